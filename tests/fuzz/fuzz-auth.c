/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Request authentication: the input's lines are the X-Sandbox-Timestamp and X-Sandbox-Signature
 * values, the method and the path, the rest is the body. auth_signature_verify() on them; then the
 * signature the daemon computes for the same request must verify whenever the timestamp is
 * well-formed and fresh, and no other signature may. The first line is also an Authorization:
 * value for auth_check_bearer().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "fuzz.h"

#define NOW 1700000000
#define SKEW 300

static const uint8_t key[32] = "0123456789abcdef0123456789abcdef";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *f[5], *buf = NULL, expected[65], good[3 + 65];
        size_t body_size;
        int r, k;

        if (size > 64 * 1024)
                return 0;

        (void) fuzz_split(data, size, '\n', f, 5, &buf);
        body_size = (size_t) (buf + size - f[4]);

        r = auth_signature_verify(key, sizeof(key), f[0], f[1], f[2], f[3], f[4], body_size, NOW, SKEW);
        FUZZ_CHECK(r == 0 || r == -ENODATA || r == -EBADMSG || r == -ETIME || r == -EKEYREJECTED);

        auth_signature_compute(key, sizeof(key), f[0], f[2], f[3], f[4], body_size, expected);
        FUZZ_CHECK(strlen(expected) == 64);
        snprintf(good, sizeof(good), "v1=%s", expected);
        if (r == 0)
                FUZZ_CHECK(strcmp(f[1], good) == 0);

        k = auth_signature_verify(key, sizeof(key), f[0], good, f[2], f[3], f[4], body_size, NOW, SKEW);
        FUZZ_CHECK(k == 0 || k == -ENODATA || k == -EBADMSG || k == -ETIME);
        if (r == -EKEYREJECTED)
                FUZZ_CHECK(k == 0);

        k = auth_check_bearer("fuzz-token-0123456789", f[0]);
        FUZZ_CHECK(k == 0 || k == -ENODATA || k == -EACCES);
        FUZZ_CHECK(!auth_secret_equal(f[0], strlen(f[0]), f[1], strlen(f[1])) == !!strcmp(f[0], f[1]));

        free(buf);
        return 0;
}
