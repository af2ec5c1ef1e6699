/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 validation. */

#include <stdint.h>

#include "util/utf8.h"

bool utf8_valid(const char *s, size_t n) {
        const uint8_t *p = (const uint8_t *) s, *end = p + n;

        while (p < end) {
                uint8_t c = *p;
                size_t len;
                uint32_t cp, min;

                if (c < 0x80) {
                        p++;
                        continue;
                }
                if ((c & 0xe0) == 0xc0) {
                        len = 2;
                        cp = c & 0x1f;
                        min = 0x80;
                } else if ((c & 0xf0) == 0xe0) {
                        len = 3;
                        cp = c & 0x0f;
                        min = 0x800;
                } else if ((c & 0xf8) == 0xf0) {
                        len = 4;
                        cp = c & 0x07;
                        min = 0x10000;
                } else
                        return false;
                if ((size_t) (end - p) < len)
                        return false;
                for (size_t i = 1; i < len; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i] & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += len;
        }
        return true;
}
