/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Environment sources (src/environment/env-source.c): the input, as one string, is checked as an
 * index URL and as a package specifier. Invariants: either check answers 0 or -EINVAL, with a
 * reason when it refuses; an accepted index URL is https, ASCII-printable, without '@', '?', '#'
 * or '\' and at most 2048 bytes; an accepted specifier starts with a letter or digit and holds no
 * '/', '@', ';', "://" and no whitespace but spaces.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "environment/env-source.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *why = NULL;
        char *s;
        int r;

        if (size > 8 * 1024)
                return 0;
        s = fuzz_strndup(data, size);

        r = env_index_url_check(s, &why);
        FUZZ_CHECK(r == 0 || (r == -EINVAL && why));
        if (r == 0) {
                FUZZ_CHECK(strncasecmp(s, "https://", 8) == 0);
                FUZZ_CHECK(strlen(s) <= ENV_INDEX_URL_MAX);
                FUZZ_CHECK(!strpbrk(s, "@?#\\ \t\r\n"));
                for (const char *p = s; *p; p++)
                        FUZZ_CHECK((unsigned char) *p > 0x20 && (unsigned char) *p < 0x7f);
        }

        why = NULL;
        r = env_package_spec_check(s, &why);
        FUZZ_CHECK(r == 0 || (r == -EINVAL && why));
        if (r == 0) {
                FUZZ_CHECK((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
                           (s[0] >= '0' && s[0] <= '9'));
                FUZZ_CHECK(!strpbrk(s, "/\\@;\t\r\n") && !strstr(s, "://"));
                FUZZ_CHECK(strlen(s) <= ENV_PACKAGE_SPEC_MAX);
        }
        free(s);
        return 0;
}
