/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Computes the "v1" request signature of the sandbox-runner API: canonical string and HMAC. */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include "util/macro.h"
#include "sign.h"

static void hex_lower(const uint8_t *p, size_t n, char *ret) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                ret[2 * i] = digits[p[i] >> 4];
                ret[2 * i + 1] = digits[p[i] & 0xf];
        }
        ret[2 * n] = '\0';
}

/* RFC 9110 "token" characters: what a method may consist of. */
static bool method_is_valid(const char *m) {
        if (isempty(m))
                return false;

        for (const char *p = m; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                      strchr("!#$%&'*+-.^_`|~", *p)))
                        return false;
        return true;
}

/* A request target in origin form; any byte that could make S ambiguous ('\n', space, controls,
 * non-ASCII) is refused, so two different requests can never share a string to sign. */
static bool path_is_valid(const char *p) {
        if (!p || p[0] != '/')
                return false;

        for (; *p; p++)
                if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f)
                        return false;
        return true;
}

void sign_sha256_hex(const void *data, size_t size, char ret[static SIGN_SHA256_HEX_SIZE]) {
        struct sha256_ctx ctx;
        uint8_t digest[SHA256_DIGEST_SIZE];

        sha256_init(&ctx);
        if (size > 0)
                sha256_update(&ctx, size, data);
        sha256_digest(&ctx, sizeof(digest), digest);
        hex_lower(digest, sizeof(digest), ret);
}

int sign_v1_message(uint64_t timestamp, const char *method, const char *path_with_query,
                    const void *body, size_t body_size, char **ret) {
        char body_hex[SIGN_SHA256_HEX_SIZE];
        char *s;
        int r;

        if (!method_is_valid(method) || !path_is_valid(path_with_query))
                return -EINVAL;
        if (!body && body_size > 0)
                return -EINVAL;

        sign_sha256_hex(body, body_size, body_hex);

        r = asprintf(&s, "v1\n%" PRIu64 "\n%s\n%s\n%s", timestamp, method, path_with_query, body_hex);
        if (r < 0)
                return -ENOMEM;

        *ret = s;
        return 0;
}

int sign_v1(const void *key, size_t key_size, uint64_t timestamp, const char *method,
            const char *path_with_query, const void *body, size_t body_size, char **ret) {
        _cleanup_free_ char *message = NULL;
        struct hmac_sha256_ctx ctx;
        uint8_t mac[SHA256_DIGEST_SIZE];
        char *sig;
        int r;

        if (!key || key_size == 0)
                return -EINVAL;

        r = sign_v1_message(timestamp, method, path_with_query, body, body_size, &message);
        if (r < 0)
                return r;

        sig = malloc(strlen("v1=") + 2 * sizeof(mac) + 1);
        if (!sig)
                return -ENOMEM;

        hmac_sha256_set_key(&ctx, key_size, key);
        hmac_sha256_update(&ctx, strlen(message), (const uint8_t *) message);
        hmac_sha256_digest(&ctx, sizeof(mac), mac);
        /* The context holds key-derived state; do not leave it on the stack. */
        explicit_bzero(&ctx, sizeof(ctx));

        memcpy(sig, "v1=", 3);
        hex_lower(mac, sizeof(mac), sig + 3);
        explicit_bzero(mac, sizeof(mac));

        *ret = sig;
        return 0;
}
