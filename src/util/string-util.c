/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* String helpers. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/macro.h"
#include "util/string-util.h"

char *str_escape_log(const char *s, size_t max) {
        static const char hex[] = "0123456789abcdef";
        size_t n, j = 0;
        char *out;

        if (!s)
                s = "";
        n = strnlen(s, max < SIZE_MAX ? max + 1 : SIZE_MAX);
        out = malloc((n > max ? max : n) * 4 + 4);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n && i < max; i++) {
                unsigned char c = (unsigned char) s[i];

                if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'' || c == '"') {
                        out[j++] = '\\';
                        out[j++] = 'x';
                        out[j++] = hex[c >> 4];
                        out[j++] = hex[c & 15];
                } else
                        out[j++] = (char) c;
        }
        if (n > max) {
                memcpy(out + j, "...", 3);
                j += 3;
        }
        out[j] = '\0';
        return out;
}

bool str_has_prefix_ci(const char *s, const char *prefix) {
        return s && strncasecmp(s, prefix, strlen(prefix)) == 0;
}

int str_buf_append(char **data, size_t *size, size_t *allocated, size_t max, const void *p, size_t n) {
        if (*size > max || n > max - *size)
                return -EFBIG;
        if (*size + n + 1 > *allocated) {
                size_t a = MAX(*allocated * 2, *size + n + 1);
                char *b;

                a = MIN(a, max + 1);
                b = realloc(*data, a);

                if (!b)
                        return -ENOMEM;
                *data = b;
                *allocated = a;
        }
        memcpy(*data + *size, p, n);
        *size += n;
        (*data)[*size] = '\0';
        return 0;
}

bool str_token_valid(const char *s, size_t max, const char *first_charset, const char *charset) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > max)
                return false;
        /* s[0] is not NUL here: strchr() would find the terminator of any set. */
        if (first_charset && !strchr(first_charset, s[0]))
                return false;
        return strspn(s, charset) == n;
}

int set_messagev(char **ret_message, int error, const char *fmt, va_list ap) {
        if (vasprintf(ret_message, fmt, ap) < 0) {
                *ret_message = NULL;
                return -ENOMEM;
        }
        return error;
}

int set_message(char **ret_message, int error, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = set_messagev(ret_message, error, fmt, ap);
        va_end(ap);
        return r;
}

void hex_encode(const void *p, size_t n, char *out) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *in = p;

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = hex[in[i] >> 4];
                out[2 * i + 1] = hex[in[i] & 15];
        }
        out[2 * n] = '\0';
}
