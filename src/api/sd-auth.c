/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The ScienceDiscovery dialect's execution signature: parsing, computing, verifying (nettle). */

#include <errno.h>
#include <stdbool.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <string.h>

#include "api/sd-auth.h"
#include "http/auth.h"
#include "util/string-util.h"

int sdp_timestamp_parse(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || !*s)
                return -EBADMSG;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EBADMSG;
                /* Stop before overflowing: anything above the safe integer range is refused anyway. */
                if (v > SDP_SAFE_INTEGER_MAX)
                        return -EBADMSG;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        if (v > SDP_SAFE_INTEGER_MAX)
                return -EBADMSG;
        *ret = v;
        return 0;
}

void sdp_signature_compute(const char *token, const char *timestamp, const void *body, size_t body_size,
                           char ret_hex[static 65]) {
        uint8_t mac[SHA256_DIGEST_SIZE];
        char body_hex[2 * SHA256_DIGEST_SIZE + 1];
        struct hmac_sha256_ctx hctx;

        auth_sha256_hex(body, body_size, body_hex);

        hmac_sha256_set_key(&hctx, strlen(token), (const uint8_t *) token);
        hmac_sha256_update(&hctx, strlen(timestamp), (const uint8_t *) timestamp);
        hmac_sha256_update(&hctx, 1, (const uint8_t *) "\n");
        hmac_sha256_update(&hctx, 2 * SHA256_DIGEST_SIZE, (const uint8_t *) body_hex);
        hmac_sha256_digest(&hctx, sizeof(mac), mac);
        hex_encode(mac, sizeof(mac), ret_hex);
}

static bool signature_well_formed(const char *s) {
        if (strlen(s) != 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

int sdp_signature_verify(const char *token, const char *timestamp, const char *signature,
                         const void *body, size_t body_size, uint64_t now_ms, uint64_t max_age_ms) {
        char expected[65];
        uint64_t ts;

        if (!timestamp || !signature)
                return -ENODATA;
        if (sdp_timestamp_parse(timestamp, &ts) < 0 || !signature_well_formed(signature))
                return -EBADMSG;
        if ((ts > now_ms ? ts - now_ms : now_ms - ts) > max_age_ms)
                return -ETIME;

        sdp_signature_compute(token, timestamp, body, body_size, expected);
        /* Both are 64 hex digits here: a fixed-length, constant-time comparison. */
        return memeql_sec(expected, signature, 64) ? 0 : -EKEYREJECTED;
}
