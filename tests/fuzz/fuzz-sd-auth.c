/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's execution signature and the parsers next to it: the input's
 * lines are the x-science-execution-timestamp and x-science-execution-signature values and a
 * runnerWorkspaceKey, the rest is the body. sdp_signature_verify() on them; the signature
 * computed for the same body must verify whenever the timestamp is well-formed and fresh, and no
 * other may. The body also goes through the output budget, bounded by its own length.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sd-auth.h"
#include "api/sd-internal.h"
#include "fuzz.h"

#define NOW UINT64_C(1700000000000)
#define TOKEN "sciencediscovery-runner-local"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *f[4], *buf = NULL, expected[65], ws[129], *o = NULL, *e = NULL;
        size_t body_size, os, es;
        uint64_t ts;
        int r, k;

        if (size > 64 * 1024)
                return 0;

        (void) fuzz_split(data, size, '\n', f, 4, &buf);
        body_size = (size_t) (buf + size - f[3]);

        r = sdp_signature_verify(TOKEN, f[0], f[1], f[3], body_size, NOW, SDP_SIGNATURE_MAX_AGE_MS);
        FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ETIME || r == -EKEYREJECTED);

        sdp_signature_compute(TOKEN, f[0], f[3], body_size, expected);
        FUZZ_CHECK(strlen(expected) == 64);
        if (r == 0)
                FUZZ_CHECK(strcmp(f[1], expected) == 0);
        k = sdp_signature_verify(TOKEN, f[0], expected, f[3], body_size, NOW, SDP_SIGNATURE_MAX_AGE_MS);
        FUZZ_CHECK(k == 0 || k == -EBADMSG || k == -ETIME);
        if (r == -EKEYREJECTED)
                FUZZ_CHECK(k == 0);

        if (sdp_timestamp_parse(f[0], &ts) == 0) {
                char back[32];
                const char *digits = f[0];

                FUZZ_CHECK(ts <= SDP_SAFE_INTEGER_MAX);
                while (digits[0] == '0' && digits[1])
                        digits++;
                snprintf(back, sizeof(back), "%" PRIu64, ts);
                FUZZ_CHECK(strcmp(back, digits) == 0);
        }

        if (sdp_runner_workspace_key_valid(f[2])) {
                FUZZ_CHECK(f[2][0] != '/' && strlen(f[2]) <= 500 && !strstr(f[2], "//"));
                sdp_workspace_for_key(f[2], ws);
                FUZZ_CHECK(strlen(ws) >= 1 && strlen(ws) <= 128);
        }

        if (sdp_output_bound(f[3], body_size, f[0], strlen(f[0]), body_size / 2, &o, &os, &e, &es) == 0) {
                if (body_size / 2 > 0)
                        FUZZ_CHECK(os + es <= body_size / 2);
        }
        free(o);
        free(e);
        free(buf);
        return 0;
}
