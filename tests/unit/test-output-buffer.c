/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/execution/output-buffer.c: head/tail retention against a reference model, UTF-8 cuts, base64. */

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <nettle/base64.h>

#include "execution/output-buffer.h"

/* ---------------------------------------------------------------------------------------------
 * The reference model: the whole stream is known, so head and tail are plain slices of it. */

typedef struct Model {
        uint8_t *data;
        size_t size;
} Model;

static void model_append(Model *m, const void *p, size_t n) {
        m->data = realloc(m->data, m->size + n + 1);
        assert_non_null(m->data);
        if (n > 0)
                memcpy(m->data + m->size, p, n);
        m->size += n;
}

static bool is_continuation(uint8_t c) {
        return (c & 0xC0) == 0x80;
}

/*
 * What the buffer should hold. With @snap (only meaningful for a valid UTF-8 stream) the head
 * ends and the tail starts on a character boundary of the stream: a boundary is any position
 * whose byte is not a continuation byte.
 */
static void model_render(const Model *m, uint64_t limit, bool snap, char **ret, size_t *ret_size) {
        size_t head_end, tail_start, n = 0;
        char marker[64], *out;
        int k;

        if (limit == 0 || m->size <= limit) {
                out = malloc(m->size + 1);
                assert_non_null(out);
                if (m->size > 0)
                        memcpy(out, m->data, m->size);
                *ret = out;
                *ret_size = m->size;
                return;
        }

        head_end = (size_t) (limit / 2);
        tail_start = m->size - (size_t) (limit - limit / 2);
        if (snap) {
                while (head_end > 0 && is_continuation(m->data[head_end]))
                        head_end--;
                while (tail_start < m->size && is_continuation(m->data[tail_start]))
                        tail_start++;
        }
        k = snprintf(marker, sizeof(marker), "\n[... %zu bytes omitted ...]\n", tail_start - head_end);
        assert_true(k > 0 && (size_t) k < sizeof(marker));

        out = malloc(head_end + (size_t) k + (m->size - tail_start) + 1);
        assert_non_null(out);
        memcpy(out, m->data, head_end);
        n += head_end;
        memcpy(out + n, marker, (size_t) k);
        n += (size_t) k;
        memcpy(out + n, m->data + tail_start, m->size - tail_start);
        n += m->size - tail_start;

        *ret = out;
        *ret_size = n;
}

/* Bytes shown printable, others as \xNN, for messages. */
static void print_bytes(const char *label, const char *p, size_t n) {
        char *s = malloc(n * 4 + 1), *q = s;

        assert_non_null(s);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) p[i];
                if (c >= 0x20 && c < 0x7f && c != '\\')
                        *q++ = (char) c;
                else
                        q += sprintf(q, "\\x%02x", c);
        }
        *q = 0;
        print_message("# %s (%zu bytes): \"%s\"\n", label, n, s);
        free(s);
}

static void assert_bytes_equal(const char *got, size_t got_size, const char *want, size_t want_size,
                               const char *what) {
        if (got_size == want_size && memcmp(got, want, got_size) == 0)
                return;
        print_message("# mismatch: %s\n", what);
        print_bytes("  got ", got, got_size);
        print_bytes("  want", want, want_size);
        fail();
}

/* Render, render_text and the counters must all agree with the model. */
static void check_against_model(const OutputBuffer *b, const Model *m, uint64_t limit, bool text_is_utf8,
                                const char *what) {
        char *got, *want;
        size_t got_size, want_size;
        const char *encoding;

        assert_int_equal(output_buffer_total(b), m->size);
        assert_int_equal(output_buffer_truncated(b), limit > 0 && m->size > limit);

        assert_int_equal(output_buffer_render(b, &got, &got_size), 0);
        model_render(m, limit, false, &want, &want_size);
        assert_bytes_equal(got, got_size, want, want_size, what);
        assert_int_equal(got[got_size], 0);     /* NUL-terminated */
        free(got);
        free(want);

        if (!text_is_utf8)
                return;
        assert_int_equal(output_buffer_render_text(b, &got, &got_size, &encoding), 0);
        assert_string_equal(encoding, "utf-8");
        model_render(m, limit, true, &want, &want_size);
        assert_bytes_equal(got, got_size, want, want_size, what);
        assert_int_equal(got[got_size], 0);
        free(got);
        free(want);
}

static void base64_decode_alloc(const char *s, size_t n, char **ret, size_t *ret_size) {
        struct base64_decode_ctx ctx;
        size_t size = BASE64_DECODE_LENGTH(n);
        uint8_t *out = malloc(size + 1);

        assert_non_null(out);
        base64_decode_init(&ctx);
        assert_true(base64_decode_update(&ctx, &size, out, n, s));
        assert_true(base64_decode_final(&ctx));
        *ret = (char *) out;
        *ret_size = size;
}

/* render_text() must be base64 of exactly what render() gives. */
static void assert_base64_of_render(const OutputBuffer *b) {
        char *raw, *text, *decoded;
        size_t raw_size, text_size, decoded_size;
        const char *encoding;

        assert_int_equal(output_buffer_render(b, &raw, &raw_size), 0);
        assert_int_equal(output_buffer_render_text(b, &text, &text_size, &encoding), 0);
        assert_string_equal(encoding, "base64");
        assert_int_equal(strlen(text), text_size);
        assert_int_equal(text_size, (raw_size + 2) / 3 * 4);
        base64_decode_alloc(text, text_size, &decoded, &decoded_size);
        assert_bytes_equal(decoded, decoded_size, raw, raw_size, "base64 round trip");
        free(raw);
        free(text);
        free(decoded);
}

/* ------------------------------------------------------------------------------------------- */

static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* Limit 10 (and neighbours) with 0..40 bytes, in chunks of 1, 3, 7 and in one chunk, checked after every chunk. */
static void test_sizes_and_chunks(void **state) {
        static const uint64_t limits[] = { 10, 1, 2, 3, 4, 9, 11, 40, 41 };
        static const size_t chunks[] = { 1, 3, 7, SIZE_MAX };

        for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++)
                for (size_t total = 0; total <= 40; total++)
                        for (size_t ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
                                OutputBuffer *b = NULL;
                                Model m = {};
                                char what[128];

                                assert_int_equal(output_buffer_new(limits[li], &b), 0);
                                for (size_t off = 0; off < total; ) {
                                        size_t n = chunks[ci] == SIZE_MAX ? total : chunks[ci];
                                        if (n > total - off)
                                                n = total - off;

                                        assert_int_equal(output_buffer_append(b, alphabet + off, n), 0);
                                        model_append(&m, alphabet + off, n);
                                        off += n;

                                        (void) snprintf(what, sizeof(what),
                                                        "limit %" PRIu64 ", %zu of %zu bytes, chunk %zu",
                                                        limits[li], off, total, n);
                                        check_against_model(b, &m, limits[li], true, what);
                                }
                                check_against_model(b, &m, limits[li], true, "final");
                                output_buffer_free(b);
                                free(m.data);
                        }
}

/* A few results spelled out, so that the model itself is checked too. */
static void test_exact_examples(void **state) {
        OutputBuffer *b = NULL;
        char *s;
        size_t n;

        assert_int_equal(output_buffer_new(10, &b), 0);

        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_int_equal(n, 0);
        assert_string_equal(s, "");
        free(s);

        assert_int_equal(output_buffer_append(b, "0123456789", 10), 0);
        assert_false(output_buffer_truncated(b));
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_string_equal(s, "0123456789");
        free(s);

        assert_int_equal(output_buffer_append(b, "a", 1), 0);
        assert_true(output_buffer_truncated(b));
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_string_equal(s, "01234\n[... 1 bytes omitted ...]\n6789a");
        assert_int_equal(n, strlen(s));
        free(s);

        assert_int_equal(output_buffer_append(b, "bcdefghijklmnopqrstuvwxyz", 25), 0);
        assert_int_equal(output_buffer_total(b), 36);
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_string_equal(s, "01234\n[... 26 bytes omitted ...]\nvwxyz");
        free(s);

        /* Odd limit: the tail gets the extra byte. */
        b = output_buffer_free(b);
        assert_null(b);
        assert_int_equal(output_buffer_new(5, &b), 0);
        assert_int_equal(output_buffer_append(b, "abcdefgh", 8), 0);
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_string_equal(s, "ab\n[... 3 bytes omitted ...]\nfgh");
        free(s);
        output_buffer_free(b);

        /* Limit 1: no head at all. */
        assert_int_equal(output_buffer_new(1, &b), 0);
        assert_int_equal(output_buffer_append(b, "xyz", 3), 0);
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_string_equal(s, "\n[... 2 bytes omitted ...]\nz");
        free(s);
        output_buffer_free(b);

        assert_null(output_buffer_free(NULL));
}

/* Interleaved chunk sizes over a bigger stream, for the ring's wrap-around. */
static void test_ring_wraps(void **state) {
        static const uint64_t limits[] = { 64, 65, 1000, 4097 };
        uint8_t data[20000];

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t) ('a' + (i * 7 + i / 26) % 26);

        for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++) {
                OutputBuffer *b = NULL;
                Model m = {};
                size_t off = 0, step = 0;

                assert_int_equal(output_buffer_new(limits[li], &b), 0);
                while (off < sizeof(data)) {
                        size_t n = (step * 131 + 17) % 997;

                        if (n > sizeof(data) - off)
                                n = sizeof(data) - off;
                        assert_int_equal(output_buffer_append(b, data + off, n), 0);
                        model_append(&m, data + off, n);
                        off += n;
                        step++;
                        check_against_model(b, &m, limits[li], true, "ring wrap");
                }
                output_buffer_free(b);
                free(m.data);
        }
}

/* A valid UTF-8 stream cut at every offset, head and tail, must stay valid UTF-8. */
static void test_utf8_cut_everywhere(void **state) {
        /* 1-, 2-, 3- and 4-byte characters: a, é (c3 a9), € (e2 82 ac), 😀 (f0 9f 98 80), U+10FFFF. */
        static const char text[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                                   "b\xf4\x8f\xbf\xbf\xc3\xa9\xc3\xa9\xe2\x82\xac"
                                   "c\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xe2\x82\xac" "d";
        static const size_t chunks[] = { 1, 2, 3, 5, SIZE_MAX };
        const size_t len = sizeof(text) - 1;

        for (size_t shift = 0; shift < 4; shift++)
                for (uint64_t limit = 1; limit <= len + shift + 2; limit++)
                        for (size_t ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
                                OutputBuffer *b = NULL;
                                Model m = {};
                                char what[128];

                                assert_int_equal(output_buffer_new(limit, &b), 0);
                                for (size_t i = 0; i < shift; i++) {
                                        assert_int_equal(output_buffer_append(b, "_", 1), 0);
                                        model_append(&m, "_", 1);
                                }
                                for (size_t off = 0; off < len; ) {
                                        size_t n = chunks[ci] == SIZE_MAX ? len : chunks[ci];
                                        if (n > len - off)
                                                n = len - off;
                                        assert_int_equal(output_buffer_append(b, text + off, n), 0);
                                        model_append(&m, text + off, n);
                                        off += n;
                                }
                                (void) snprintf(what, sizeof(what), "utf-8: shift %zu, limit %" PRIu64 ", chunk %zu",
                                                shift, limit, chunks[ci]);
                                check_against_model(b, &m, limit, true, what);
                                output_buffer_free(b);
                                free(m.data);
                        }
}

/* One multibyte character, cut at each of its offsets by the head end and by the tail start. */
static void test_utf8_cut_one_character(void **state) {
        static const struct {
                const char *in;
                uint64_t limit;
                const char *want;
        } cases[] = {
                /* head = 2 bytes: "a" + first byte of é → "a"; tail = 2 bytes "zz" */
                { "a\xc3\xa9xyzz",              4, "a\n[... 4 bytes omitted ...]\nzz" },
                /* head ends after the whole é */
                { "a\xc3\xa9xyzz",              6, "a\xc3\xa9\n[... 1 bytes omitted ...]\nyzz" },
                /* € cut after 1 and after 2 of its 3 bytes */
                { "\xe2\x82\xac" "0123456789",  2, "\n[... 12 bytes omitted ...]\n9" },
                { "\xe2\x82\xac" "0123456789",  4, "\n[... 11 bytes omitted ...]\n89" },
                { "\xe2\x82\xac" "0123456789",  6, "\xe2\x82\xac\n[... 7 bytes omitted ...]\n789" },
                /* 😀 at the tail start: whole, then the tail begins 1, 2, 3 bytes into it */
                { "0123456789\xf0\x9f\x98\x80", 8, "0123\n[... 6 bytes omitted ...]\n\xf0\x9f\x98\x80" },
                { "0123456789\xf0\x9f\x98\x80" "a", 8, "0123\n[... 10 bytes omitted ...]\na" },
                { "0123456789\xf0\x9f\x98\x80" "ab", 8, "0123\n[... 10 bytes omitted ...]\nab" },
                { "0123456789\xf0\x9f\x98\x80" "abc", 8, "0123\n[... 10 bytes omitted ...]\nabc" },
                { "0123456789\xf0\x9f\x98\x80" "abcd", 8, "0123\n[... 10 bytes omitted ...]\nabcd" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                OutputBuffer *b = NULL;
                const char *encoding;
                char *s, what[64];
                size_t n;

                assert_int_equal(output_buffer_new(cases[i].limit, &b), 0);
                assert_int_equal(output_buffer_append(b, cases[i].in, strlen(cases[i].in)), 0);
                assert_int_equal(output_buffer_render_text(b, &s, &n, &encoding), 0);
                assert_string_equal(encoding, "utf-8");
                (void) snprintf(what, sizeof(what), "one character, case %zu", i);
                assert_bytes_equal(s, n, cases[i].want, strlen(cases[i].want), what);
                free(s);
                output_buffer_free(b);
        }
}

/* What is and is not UTF-8 (strict), untruncated. */
static void test_utf8_validity(void **state) {
        static const struct {
                const char *in;
                size_t len;
                bool utf8;
        } cases[] = {
                { "", 0, true },
                { "plain ASCII text that is longer than sixteen bytes\n", 52, true },
                { "a\0b", 3, true },                            /* U+0000 is valid */
                { "\xc3\xa9", 2, true },
                { "\xf4\x8f\xbf\xbf", 4, true },                /* U+10FFFF */
                { "\xef\xbb\xbf", 3, true },                    /* BOM */
                { "\xed\x9f\xbf", 3, true },                    /* U+D7FF */
                { "\xee\x80\x80", 3, true },                    /* U+E000 */
                { "\xff", 1, false },
                { "\xfe\xff", 2, false },
                { "\x80", 1, false },                           /* lone continuation */
                { "\xc0\xaf", 2, false },                       /* overlong '/' */
                { "\xc1\xbf", 2, false },                       /* overlong */
                { "\xe0\x80\xaf", 3, false },                   /* overlong */
                { "\xe0\x9f\xbf", 3, false },                   /* overlong */
                { "\xf0\x80\x80\xaf", 4, false },               /* overlong */
                { "\xf0\x8f\xbf\xbf", 4, false },               /* overlong */
                { "\xed\xa0\x80", 3, false },                   /* surrogate U+D800 */
                { "\xed\xbf\xbf", 3, false },                   /* surrogate U+DFFF */
                { "\xf4\x90\x80\x80", 4, false },               /* U+110000 */
                { "\xf5\x80\x80\x80", 4, false },
                { "ab\xe2\x82", 4, false },                     /* unfinished at the end of the stream */
                { "\xe2\x82" "a", 3, false },
                { "abcdefgh\xc3", 9, false },                   /* after the eight-byte fast path */
                { "abcdefghijklmno\x80", 16, false },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                OutputBuffer *b = NULL;
                const char *encoding;
                char *s;
                size_t n;

                assert_int_equal(output_buffer_new(0, &b), 0);
                assert_int_equal(output_buffer_append(b, cases[i].in, cases[i].len), 0);
                assert_int_equal(output_buffer_render_text(b, &s, &n, &encoding), 0);
                if (strcmp(encoding, cases[i].utf8 ? "utf-8" : "base64") != 0) {
                        print_bytes("wrong encoding for", cases[i].in, cases[i].len);
                        fail();
                }
                if (cases[i].utf8)
                        assert_bytes_equal(s, n, cases[i].in, cases[i].len, "utf-8 passes unchanged");
                free(s);
                if (!cases[i].utf8)
                        assert_base64_of_render(b);
                output_buffer_free(b);
        }
}

/* Known answers for the encoder, then binary data of many lengths, whole and truncated. */
static void test_base64(void **state) {
        static const struct {
                const char *in;
                size_t len;
                const char *want;
        } known[] = {
                { "\xff", 1, "/w==" },
                { "\xff\xfe", 2, "//4=" },
                { "\xff\xfe\x00", 3, "//4A" },
                { "M\xe9n\xff", 4, "Telu/w==" },
                { "\xfb\xff\xbf", 3, "+/+/" },
        };
        uint8_t data[300];

        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
                OutputBuffer *b = NULL;
                const char *encoding;
                char *s;
                size_t n;

                assert_int_equal(output_buffer_new(0, &b), 0);
                assert_int_equal(output_buffer_append(b, known[i].in, known[i].len), 0);
                assert_int_equal(output_buffer_render_text(b, &s, &n, &encoding), 0);
                assert_string_equal(encoding, "base64");
                assert_string_equal(s, known[i].want);
                assert_int_equal(n, strlen(known[i].want));
                free(s);
                output_buffer_free(b);
        }

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t) (255 - i);  /* starts with 0xff: never UTF-8 */

        for (uint64_t limit = 0; limit <= 40; limit += 3)
                for (size_t len = 1; len <= sizeof(data); len += 13) {
                        OutputBuffer *b = NULL;
                        Model m = {};

                        assert_int_equal(output_buffer_new(limit, &b), 0);
                        for (size_t off = 0, step = len % 5 + 1; off < len; off += step) {
                                size_t k = step < len - off ? step : len - off;

                                /* in small steps, so that the ring has wrapped */
                                assert_int_equal(output_buffer_append(b, data + off, k), 0);
                                model_append(&m, data + off, k);
                        }
                        check_against_model(b, &m, limit, false, "binary");
                        assert_base64_of_render(b);     /* the head always has the 0xff */
                        output_buffer_free(b);
                        free(m.data);
                }
}

/* Invalid bytes in the omitted middle do not matter; next to a cut they make it base64 of the exact bytes. */
static void test_truncated_text_or_not(void **state) {
        OutputBuffer *b = NULL;
        const char *encoding;
        char *s;
        size_t n;

        /* The invalid byte is omitted: what remains is text. */
        assert_int_equal(output_buffer_new(6, &b), 0);
        assert_int_equal(output_buffer_append(b, "abc\xff\xff\xff" "def", 9), 0);
        assert_int_equal(output_buffer_render_text(b, &s, &n, &encoding), 0);
        assert_string_equal(encoding, "utf-8");
        assert_string_equal(s, "abc\n[... 3 bytes omitted ...]\ndef");
        free(s);
        output_buffer_free(b);

        /* The head ends in a cut character (snapped), but the tail is binary: base64 of the raw
         * render, which still has the lead byte and the unsnapped count. */
        assert_int_equal(output_buffer_new(6, &b), 0);
        assert_int_equal(output_buffer_append(b, "ab\xe2\x82\xac" "xyz\xff", 9), 0);
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        assert_bytes_equal(s, n, "ab\xe2\n[... 3 bytes omitted ...]\nyz\xff",
                           strlen("ab\xe2\n[... 3 bytes omitted ...]\nyz\xff"), "raw render");
        free(s);
        assert_base64_of_render(b);
        output_buffer_free(b);

        /* A stray continuation byte at the tail start is dropped like a cut character's. */
        assert_int_equal(output_buffer_new(5, &b), 0);
        assert_int_equal(output_buffer_append(b, "ab\xff\xff\x80xy", 7), 0);
        assert_int_equal(output_buffer_render_text(b, &s, &n, &encoding), 0);
        assert_string_equal(encoding, "utf-8");
        assert_string_equal(s, "ab\n[... 3 bytes omitted ...]\nxy");
        free(s);
        output_buffer_free(b);

        /* A head ending in an invalid lead sequence is not "snapped" into validity. */
        assert_int_equal(output_buffer_new(6, &b), 0);
        assert_int_equal(output_buffer_append(b, "a\xe0\x80" "bcxy", 7), 0);
        assert_base64_of_render(b);
        output_buffer_free(b);
}

/* Limit 0: everything is kept, never truncated. */
static void test_unlimited(void **state) {
        OutputBuffer *b = NULL;
        Model m = {};
        uint8_t chunk[4099];

        assert_int_equal(output_buffer_new(0, &b), 0);
        for (size_t i = 0; i < 300; i++) {
                size_t n = (i * 37) % sizeof(chunk);

                for (size_t j = 0; j < n; j++)
                        chunk[j] = (uint8_t) ('A' + (i + j) % 26);
                assert_int_equal(output_buffer_append(b, chunk, n), 0);
                model_append(&m, chunk, n);
                assert_false(output_buffer_truncated(b));
        }
        assert_int_equal(output_buffer_append(b, NULL, 0), 0);
        check_against_model(b, &m, 0, true, "unlimited");
        output_buffer_free(b);
        free(m.data);
}

/* total counts every byte, far past the limit; what is kept stays limit + marker. */
static void test_total_counts_everything(void **state) {
        OutputBuffer *b = NULL;
        char chunk[4096], *s;
        uint64_t sum = 0;
        size_t n;

        memset(chunk, 'q', sizeof(chunk));
        assert_int_equal(output_buffer_new(4, &b), 0);
        for (size_t i = 0; i < 1024; i++) {
                assert_int_equal(output_buffer_append(b, chunk, i % 7 == 0 ? 0 : sizeof(chunk) - i), 0);
                sum += i % 7 == 0 ? 0 : sizeof(chunk) - i;
                assert_int_equal(output_buffer_total(b), sum);
        }
        assert_int_equal(output_buffer_render(b, &s, &n), 0);
        {
                char want[128];
                (void) snprintf(want, sizeof(want), "qq\n[... %" PRIu64 " bytes omitted ...]\nqq", sum - 4);
                assert_string_equal(s, want);
        }
        free(s);
        output_buffer_free(b);
}

static uint64_t vm_size(void) {
        unsigned long long pages = 0;
        FILE *f = fopen("/proc/self/statm", "re");

        assert_non_null(f);
        assert_int_equal(fscanf(f, "%llu", &pages), 1);
        fclose(f);
        return pages * (uint64_t) sysconf(_SC_PAGESIZE);
}

/*
 * Memory follows what was appended, never the limit: sixteen buffers with the default 1 GiB
 * limit holding a few bytes each, and one 1 MiB buffer fed 64 MiB, must not grow the address
 * space by anything near that (true for glibc, ASan's allocator and valgrind's alike).
 */
static void test_memory_is_lazy_and_bounded(void **state) {
        OutputBuffer *b[16] = {};
        static char chunk[65536];
        uint64_t before, after;
        char *s;
        size_t n;

        memset(chunk, 'z', sizeof(chunk));
        before = vm_size();
        for (size_t i = 0; i < 16; i++) {
                assert_int_equal(output_buffer_new(UINT64_C(1) << 30, &b[i]), 0);
                assert_int_equal(output_buffer_append(b[i], "hello\n", 6), 0);
        }
        after = vm_size();
        print_message("# 16 buffers of limit 1 GiB: address space grew by %" PRIu64 " KiB\n", (after - before) / 1024);
        assert_true(after < before + (UINT64_C(64) << 20));
        for (size_t i = 0; i < 16; i++) {
                assert_int_equal(output_buffer_render(b[i], &s, &n), 0);
                assert_string_equal(s, "hello\n");
                free(s);
                output_buffer_free(b[i]);
        }

        assert_int_equal(output_buffer_new(UINT64_C(1) << 20, &b[0]), 0);
        before = vm_size();
        for (size_t i = 0; i < 1024; i++)
                assert_int_equal(output_buffer_append(b[0], chunk, sizeof(chunk)), 0);
        after = vm_size();
        print_message("# 1 MiB buffer fed 64 MiB: address space grew by %" PRIu64 " KiB\n", (after - before) / 1024);
        assert_true(after < before + (UINT64_C(32) << 20));
        assert_int_equal(output_buffer_total(b[0]), UINT64_C(64) << 20);
        assert_int_equal(output_buffer_render(b[0], &s, &n), 0);
        assert_int_equal(n, (size_t) (UINT64_C(1) << 20) + strlen("\n[... 66060288 bytes omitted ...]\n"));
        free(s);
        output_buffer_free(b[0]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sizes_and_chunks),
                cmocka_unit_test(test_exact_examples),
                cmocka_unit_test(test_ring_wraps),
                cmocka_unit_test(test_utf8_cut_everywhere),
                cmocka_unit_test(test_utf8_cut_one_character),
                cmocka_unit_test(test_utf8_validity),
                cmocka_unit_test(test_base64),
                cmocka_unit_test(test_truncated_text_or_not),
                cmocka_unit_test(test_unlimited),
                cmocka_unit_test(test_total_counts_everything),
                cmocka_unit_test(test_memory_is_lazy_and_bounded),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
