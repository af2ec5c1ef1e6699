/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The text encodings shared by trees, the stat cache and lookups: Buf (a growable
 * NUL-terminated buffer), the one %XX escaping rule of names and paths and its strict inverse,
 * name validity, strict decimal parsing. Pure: no I/O; calls only libc.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "workspace/cas/cas-internal.h"

static const char hex_upper[] = "0123456789ABCDEF";

static int unhex_upper(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

void buf_done(Buf *b) {
        b->data = mfree(b->data);
        b->size = b->alloc = 0;
}

/* Room for @more bytes plus a terminating NUL. */
int buf_reserve(Buf *b, size_t more) {
        size_t need, n;
        char *p;

        if (more > SIZE_MAX / 2 - b->size)
                return -ENOMEM;
        need = b->size + more + 1;
        if (need <= b->alloc)
                return 0;
        n = MAX(b->alloc * 2, need);
        n = MAX(n, (size_t) 64);
        p = realloc(b->data, n);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->alloc = n;
        return 0;
}

int buf_put(Buf *b, const void *p, size_t n) {
        int r;

        r = buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n > 0)
                memcpy(b->data + b->size, p, n);
        b->size += n;
        b->data[b->size] = 0;
        return 0;
}

int buf_puts(Buf *b, const char *s) {
        return buf_put(b, s, strlen(s));
}

_printf_(2, 3) int buf_printf(Buf *b, const char *fmt, ...) {
        va_list ap;
        int k, r;

        va_start(ap, fmt);
        k = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -EINVAL;
        r = buf_reserve(b, (size_t) k);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        (void) vsnprintf(b->data + b->size, (size_t) k + 1, fmt, ap);
        va_end(ap);
        b->size += (size_t) k;
        return 0;
}

/* The one escaping rule of trees and the stat cache: outside 0x21..0x7e, and '%', is "%XX". */
static bool byte_needs_escape(unsigned char c) {
        return c < 0x21 || c > 0x7e || c == '%';
}

int buf_put_escaped(Buf *b, const char *s) {
        size_t n = strlen(s);
        char *o;
        int r;

        r = buf_reserve(b, n * 3);
        if (r < 0)
                return r;
        o = b->data + b->size;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];

                if (byte_needs_escape(c)) {
                        *o++ = '%';
                        *o++ = hex_upper[c >> 4];
                        *o++ = hex_upper[c & 15];
                } else
                        *o++ = (char) c;
        }
        b->size = (size_t) (o - b->data);
        b->data[b->size] = 0;
        return 0;
}

/* Strict inverse of buf_put_escaped(): any other spelling, or a NUL byte, is -EIO. */
int cas_unescape(const char *s, size_t n, char **ret, size_t *ret_len) {
        _cleanup_free_ char *out = NULL;
        size_t j = 0;

        out = malloc(n + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];

                if (c == '%') {
                        int hi, lo;

                        if (n - i < 3)
                                return -EIO;
                        hi = unhex_upper(s[i + 1]);
                        lo = unhex_upper(s[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EIO;
                        c = (unsigned char) (hi << 4 | lo);
                        if (c == 0 || !byte_needs_escape(c))
                                return -EIO;
                        i += 2;
                } else if (byte_needs_escape(c))
                        return -EIO;
                out[j++] = (char) c;
        }
        out[j] = 0;
        *ret = STEAL(out);
        if (ret_len)
                *ret_len = j;
        return 0;
}

bool cas_name_valid(const char *name, size_t len) {
        return len >= 1 && len <= NAME_MAX_BYTES && !memchr(name, '/', len) &&
                !streq(name, ".") && !streq(name, "..");
}

/* Decimal, no sign, no leading zero, then @sep. Advances *p past @sep. */
int parse_u64(const char **p, const char *end, char sep, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;

        if (s >= end || *s < '0' || *s > '9')
                return -EIO;
        if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9')
                return -EIO;
        for (; s < end && *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned) (*s - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -EIO;
                v = v * 10 + d;
        }
        if (s >= end || *s != sep)
                return -EIO;
        *p = s + 1;
        *ret = v;
        return 0;
}
