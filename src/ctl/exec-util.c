/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers of the exec and shell commands: number and size options, UTF-8 checks, reading input,
 * base64 decoding of the answer's output and the exit code of an execution answer. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/base64.h>

#include "ctl-util.h"
#include "exec-util.h"

int exec_parse_uint(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;

        if (isempty(s))
                return -EINVAL;

        for (const char *p = s; *p; p++) {
                unsigned d;

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                d = *p - '0';
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        if (v > max)
                return -ERANGE;

        *ret = v;
        return 0;
}

int exec_parse_size(const char *s, uint64_t *ret) {
        static const struct {
                char c;
                unsigned shift;
        } units[] = { { 'K', 10 }, { 'M', 20 }, { 'G', 30 }, { 'T', 40 } };
        _cleanup_free_ char *digits = NULL;
        const char *suffix;
        unsigned shift = 0;
        uint64_t v;
        size_t n;
        int r;

        if (isempty(s))
                return -EINVAL;

        n = strspn(s, "0123456789");
        if (n == 0)
                return -EINVAL;
        suffix = s + n;

        if (*suffix != '\0') {
                bool found = false;

                for (size_t i = 0; i < ELEMENTSOF(units); i++)
                        if (*suffix == units[i].c || *suffix == units[i].c + ('a' - 'A')) {
                                shift = units[i].shift;
                                found = true;
                                break;
                        }
                if (!found)
                        return -EINVAL;
                suffix++;
                if (!streq(suffix, "") && !streq(suffix, "B") && !streq(suffix, "iB"))
                        return -EINVAL;
        }

        digits = strndup(s, n);
        if (!digits)
                return -ENOMEM;
        r = exec_parse_uint(digits, UINT64_MAX, &v);
        if (r < 0)
                return r;
        if (shift > 0 && v > (UINT64_MAX >> shift))
                return -ERANGE;

        *ret = v << shift;
        return 0;
}

bool exec_utf8_valid(const void *data, size_t n) {
        const unsigned char *p = data;

        for (size_t i = 0; i < n;) {
                unsigned char c = p[i];
                uint32_t cp;
                size_t len;

                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf) {
                        len = 2;
                        cp = c & 0x1f;
                } else if (c >= 0xe0 && c <= 0xef) {
                        len = 3;
                        cp = c & 0x0f;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        len = 4;
                        cp = c & 0x07;
                } else
                        return false;   /* continuation byte, overlong lead (c0, c1) or > f4 */

                if (n - i < len)
                        return false;
                for (size_t k = 1; k < len; k++) {
                        if ((p[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i + k] & 0x3f);
                }
                if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||   /* overlong */
                    (cp >= 0xd800 && cp <= 0xdfff) ||                           /* surrogate */
                    cp > 0x10ffff)
                        return false;
                i += len;
        }
        return true;
}

int exec_read_fd(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = 0;

        for (;;) {
                ssize_t k;

                /* Room for one byte above @max (to tell "too big" from "exactly @max") and a NUL. */
                if (allocated - size < 4096 + 1 && allocated < max + 2) {
                        size_t a = MAX(allocated * 2, (size_t) 64 * 1024);
                        char *p;

                        a = MIN(a, max + 2);
                        p = realloc(buf, a);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        allocated = a;
                }

                k = read(fd, buf + size, allocated - size - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                size += k;
                if (size > max)
                        return -EFBIG;
        }

        buf[size] = '\0';       /* allocated on the first iteration */

        *ret = STEAL(buf);
        *ret_size = size;
        return 0;
}

int exec_base64_decode(const char *s, size_t n, char **ret, size_t *ret_size) {
        struct base64_decode_ctx ctx;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;

        /* Strict: groups of four, padding only at the end; nettle itself would also skip spaces. */
        if (n % 4 != 0)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '/' ||
                      (s[i] == '=' && i >= n - 2 && (i == n - 1 || s[n - 1] == '='))))
                        return -EBADMSG;

        buf = malloc(BASE64_DECODE_LENGTH(n) + 1);
        if (!buf)
                return -ENOMEM;

        base64_decode_init(&ctx);
        if (!base64_decode_update(&ctx, &size, (uint8_t *) buf, n, s) || !base64_decode_final(&ctx))
                return -EBADMSG;
        buf[size] = '\0';

        *ret = STEAL(buf);
        *ret_size = size;
        return 0;
}

int exec_status_exit_code(const char *status, int64_t exit_code, int64_t signal) {
        if (streq(status, "exited")) {
                if (exit_code < 0 || exit_code > 255)
                        return -EINVAL;
                return (int) exit_code;
        }
        if (streq(status, "signaled")) {
                if (signal <= 0 || signal > 127)
                        return -EINVAL;
                return 128 + (int) signal;
        }
        if (streq(status, "timeout"))
                return CTL_EXIT_EXEC_TIMEOUT;
        return CTL_EXIT_EXEC_LIMIT;
}
