/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The retention buffer of one output stream: everything up to the limit, past it head + tail. */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/base64.h>

#include "execution/output-buffer.h"
#include "util/macro.h"
#include "util/utf8.h"

/* The first allocation; later ones double, up to the limit. */
#define OUTPUT_BUFFER_MIN_ALLOC ((size_t) 256)

/*
 * Layout of buf: while total <= limit (or limit = 0) it holds the whole stream, linearly. Once
 * the stream passes the limit, buf has exactly limit bytes: [0, head_size) is the head and
 * [head_size, limit) is a ring of tail_size bytes whose oldest byte is at ring_start. The switch
 * needs no copying: at the moment total reaches limit the bytes [head_size, limit) are already
 * the last tail_size bytes of the stream, in order, i.e. a full ring starting at 0.
 */
struct OutputBuffer {
        uint64_t limit;         /* 0 = unlimited */
        uint64_t total;         /* bytes ever appended */
        size_t head_size;       /* limit / 2 */
        size_t tail_size;       /* limit - limit / 2 */
        size_t ring_start;      /* index into the ring of the oldest tail byte, once truncated */
        uint8_t *buf;
        size_t allocated;
};

int output_buffer_new(uint64_t limit, OutputBuffer **ret) {
        OutputBuffer *b;

        assert(ret);

        /* Only reachable with a 32-bit size_t: such a limit could never be held in memory. */
        if (limit > SIZE_MAX)
                return -ENOMEM;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        *b = (OutputBuffer) {
                .limit = limit,
                .head_size = (size_t) (limit / 2),
                .tail_size = (size_t) (limit - limit / 2),
        };

        /* No data buffer yet: it grows with what is appended (the default limit is 1 GiB). */
        *ret = b;
        return 0;
}

OutputBuffer *output_buffer_free(OutputBuffer *b) {
        if (!b)
                return NULL;
        free(b->buf);
        free(b);
        return NULL;
}

uint64_t output_buffer_total(const OutputBuffer *b) {
        assert(b);
        return b->total;
}

bool output_buffer_truncated(const OutputBuffer *b) {
        assert(b);
        return b->limit > 0 && b->total > b->limit;
}

/* Make room for @need bytes: grow geometrically, but never beyond the limit. */
static int buffer_reserve(OutputBuffer *b, size_t need) {
        size_t cap = b->limit > 0 ? (size_t) b->limit : SIZE_MAX, n;
        uint8_t *p;

        assert(need <= cap);

        if (need <= b->allocated)
                return 0;

        n = b->allocated > cap / 2 ? cap : MAX(b->allocated * 2, OUTPUT_BUFFER_MIN_ALLOC);
        n = MAX(n, need);
        n = MIN(n, cap);

        p = realloc(b->buf, n);
        if (!p)
                return -ENOMEM;
        b->buf = p;
        b->allocated = n;
        return 0;
}

int output_buffer_append(OutputBuffer *b, const void *data, size_t n) {
        const uint8_t *p = data;
        uint8_t *ring;
        size_t first;
        int r;

        assert(b);
        assert(data || n == 0);

        if (n == 0)
                return 0;

        if (b->limit == 0) {
                /* Unlimited: all of it, linearly, as long as the address space allows. */
                if (n > SIZE_MAX - (size_t) b->total)
                        return -ENOMEM;

                r = buffer_reserve(b, (size_t) b->total + n);
                if (r < 0)
                        return r;

                memcpy(b->buf + b->total, p, n);
                b->total += n;
                return 0;
        }

        if (b->total <= b->limit && n <= b->limit - b->total) {
                /* Still within the limit: linear, like the unlimited case. */
                r = buffer_reserve(b, (size_t) (b->total + n));
                if (r < 0)
                        return r;

                memcpy(b->buf + b->total, p, n);
                b->total += n;
                return 0;
        }

        /* Past the limit now (or already): from here on exactly limit bytes are held. */
        r = buffer_reserve(b, (size_t) b->limit);
        if (r < 0)
                return r;

        if (b->total < b->limit) {
                /* Fill up to the limit first; that makes the ring full, starting at 0. */
                size_t m = (size_t) (b->limit - b->total);

                memcpy(b->buf + b->total, p, m);
                b->total += m;
                b->ring_start = 0;
                p += m;
                n -= m;
        }

        ring = b->buf + b->head_size;
        if (n >= b->tail_size) {
                /* The chunk replaces the whole tail. */
                memcpy(ring, p + (n - b->tail_size), b->tail_size);
                b->ring_start = 0;
        } else {
                /* Overwrite the n oldest bytes, wrapping around the end of the ring. */
                first = MIN(n, b->tail_size - b->ring_start);
                memcpy(ring + b->ring_start, p, first);
                memcpy(ring, p + first, n - first);
                b->ring_start = (b->ring_start + n) % b->tail_size;
        }
        b->total += n;
        return 0;
}

/* The @i-th oldest byte of the tail, once truncated. */
static uint8_t tail_byte(const OutputBuffer *b, size_t i) {
        return b->buf[b->head_size + (b->ring_start + i) % b->tail_size];
}

typedef struct Segment {
        const uint8_t *data;
        size_t size;
} Segment;

/*
 * The retained bytes as up to four pieces in order (head, marker, the ring from its oldest byte
 * to its end, the ring's start), leaving out the last @head_trim bytes of the head and the first
 * @tail_skip bytes of the tail as well (both 0 unless truncated); the marker, formatted into
 * @marker, counts everything left out. Return: the number of pieces.
 */
static size_t buffer_segments(const OutputBuffer *b, size_t head_trim, size_t tail_skip,
                              char marker[static 64], Segment ret[static 4]) {
        size_t tail_n, tail_off, first;
        int k;

        if (!output_buffer_truncated(b)) {
                ret[0] = (Segment) { b->buf, (size_t) b->total };  /* all of it is held, so it fits */
                return 1;
        }

        assert(head_trim <= b->head_size);
        assert(tail_skip <= b->tail_size);

        k = snprintf(marker, 64, OUTPUT_BUFFER_MARKER_FORMAT, b->total - b->limit + head_trim + tail_skip);
        assert(k > 0 && k < 64);

        tail_n = b->tail_size - tail_skip;
        tail_off = (b->ring_start + tail_skip) % b->tail_size;
        first = MIN(tail_n, b->tail_size - tail_off);

        ret[0] = (Segment) { b->buf, b->head_size - head_trim };
        ret[1] = (Segment) { (const uint8_t *) marker, (size_t) k };
        ret[2] = (Segment) { b->buf + b->head_size + tail_off, first };
        ret[3] = (Segment) { b->buf + b->head_size, tail_n - first };
        return 4;
}

/* Total size of @n segments: at most limit + marker, or what an unlimited buffer holds. */
static int segments_size(const Segment *seg, size_t n, size_t *ret) {
        size_t size = 0;

        for (size_t i = 0; i < n; i++) {
                if (seg[i].size > SIZE_MAX - 1 - size)
                        return -ENOMEM;
                size += seg[i].size;
        }
        *ret = size;
        return 0;
}

/* The segments as one NUL-terminated string. */
static int buffer_compose(const OutputBuffer *b, size_t head_trim, size_t tail_skip,
                          char **ret, size_t *ret_size) {
        Segment seg[4];
        char marker[64];
        size_t n, size;
        uint8_t *out, *q;
        int r;

        n = buffer_segments(b, head_trim, tail_skip, marker, seg);
        r = segments_size(seg, n, &size);
        if (r < 0)
                return r;

        out = malloc(size + 1);
        if (!out)
                return -ENOMEM;
        q = out;
        for (size_t i = 0; i < n; i++)
                if (seg[i].size > 0) {
                        memcpy(q, seg[i].data, seg[i].size);
                        q += seg[i].size;
                }
        *q = 0;

        *ret = (char *) out;
        *ret_size = size;
        return 0;
}

/* The exact retained bytes (as output_buffer_render()) in base64, encoded piece by piece so that
 * the raw rendering never has to exist next to its encoding. */
static int buffer_base64(const OutputBuffer *b, char **ret, size_t *ret_size) {
        struct base64_encode_ctx ctx;
        Segment seg[4];
        char marker[64], *out, *q;
        size_t n, size, encoded;
        int r;

        n = buffer_segments(b, 0, 0, marker, seg);
        r = segments_size(seg, n, &size);
        if (r < 0)
                return r;

        /* BASE64_ENCODE_RAW_LENGTH() = 4 * ceil(size / 3) plus slack must not overflow. */
        if (size / 3 >= SIZE_MAX / 4 - 2)
                return -ENOMEM;
        encoded = BASE64_ENCODE_RAW_LENGTH(size);

        out = malloc(encoded + BASE64_ENCODE_FINAL_LENGTH + 1);
        if (!out)
                return -ENOMEM;
        base64_encode_init(&ctx);
        q = out;
        for (size_t i = 0; i < n; i++)
                q += base64_encode_update(&ctx, q, seg[i].size, seg[i].data);
        q += base64_encode_final(&ctx, q);
        assert((size_t) (q - out) == encoded);
        *q = 0;

        *ret = out;
        *ret_size = encoded;
        return 0;
}

int output_buffer_render(const OutputBuffer *b, char **ret, size_t *ret_size) {
        assert(b);
        assert(ret);
        assert(ret_size);

        return buffer_compose(b, 0, 0, ret, ret_size);
}

/*
 * Where a cut falls: the shape of a sequence from its first bytes (RFC 3629). Whole-text validation
 * is util/utf8.c's.
 */

/* Bytes of the UTF-8 sequence that @c starts, 0 if @c cannot start one. */
static size_t utf8_lead_length(uint8_t c) {
        if (c < 0x80)
                return 1;
        if (c >= 0xC2 && c <= 0xDF)
                return 2;
        if (c >= 0xE0 && c <= 0xEF)
                return 3;
        if (c >= 0xF0 && c <= 0xF4)
                return 4;
        return 0;
}

/* Whether @c may follow @lead: the second byte's range excludes overlongs, surrogates, > U+10FFFF. */
static bool utf8_second_ok(uint8_t lead, uint8_t c) {
        switch (lead) {
        case 0xE0:
                return c >= 0xA0 && c <= 0xBF;
        case 0xED:
                return c >= 0x80 && c <= 0x9F;
        case 0xF0:
                return c >= 0x90 && c <= 0xBF;
        case 0xF4:
                return c >= 0x80 && c <= 0x8F;
        default:
                return c >= 0x80 && c <= 0xBF;
        }
}

/* Whether s[0, n) is a valid start (complete or not) of one sequence; n >= 1. */
static bool utf8_prefix_ok(const uint8_t *s, size_t n) {
        size_t len = utf8_lead_length(s[0]);

        if (len == 0 || n > len)
                return false;
        if (n >= 2 && !utf8_second_ok(s[0], s[1]))
                return false;
        for (size_t i = 2; i < n; i++)
                if ((s[i] & 0xC0) != 0x80)
                        return false;
        return true;
}

/* Length of an incomplete but so far valid multi-byte sequence at the end of s[0, n), else 0. */
static size_t utf8_incomplete_suffix(const uint8_t *s, size_t n) {
        for (size_t k = 1; k <= 3 && k <= n; k++) {
                const uint8_t *q = s + n - k;

                if ((*q & 0xC0) == 0x80)
                        continue;       /* a continuation byte: the start is further back */
                return utf8_lead_length(*q) > k && utf8_prefix_ok(q, k) ? k : 0;
        }
        return 0;
}

int output_buffer_render_text(const OutputBuffer *b, char **ret, size_t *ret_size,
                              const char **ret_encoding) {
        _cleanup_free_ char *s = NULL;
        size_t size, head_trim = 0, tail_skip = 0;
        int r;

        assert(b);
        assert(ret);
        assert(ret_size);
        assert(ret_encoding);

        if (output_buffer_truncated(b)) {
                /*
                 * A cut inside a character leaves its lead bytes at the end of the head and its
                 * continuation bytes (at most three) at the start of the tail; leave both out so
                 * that valid text stays valid. A stream that is not valid text anyway ends up
                 * as base64 of the exact bytes below.
                 */
                head_trim = utf8_incomplete_suffix(b->buf, b->head_size);
                while (tail_skip < 3 && tail_skip < b->tail_size && (tail_byte(b, tail_skip) & 0xC0) == 0x80)
                        tail_skip++;
        }

        r = buffer_compose(b, head_trim, tail_skip, &s, &size);
        if (r < 0)
                return r;

        if (utf8_valid(s, size)) {
                *ret = STEAL(s);
                *ret_size = size;
                *ret_encoding = "utf-8";
                return 0;
        }

        /* Not text: base64 of what output_buffer_render() gives, byte for byte. */
        free(s);
        s = NULL;
        r = buffer_base64(b, &s, &size);
        if (r < 0)
                return r;

        *ret = STEAL(s);
        *ret_size = size;
        *ret_encoding = "base64";
        return 0;
}
