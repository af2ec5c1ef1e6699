/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's execution signature (notes §1): x-science-execution-timestamp
 * (decimal Unix milliseconds) and x-science-execution-signature, the lowercase hex HMAC-SHA256
 * keyed with the bearer token over "<timestamp>\n<lowercase hex SHA-256 of the body>". Method,
 * path, query and nonce are not covered: that is their scheme, kept as it is. Pure.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The largest integer a JavaScript number holds exactly (Number.MAX_SAFE_INTEGER). */
#define SDP_SAFE_INTEGER_MAX UINT64_C(9007199254740991)
#define SDP_SIGNATURE_MAX_AGE_MS UINT64_C(30000)

/*
 * sdp_timestamp_parse() - a timestamp as their runner accepts it: ^[0-9]+$ and a safe integer.
 * Return: 0, -EBADMSG (@s NULL, empty, not all digits, or above SDP_SAFE_INTEGER_MAX).
 */
int sdp_timestamp_parse(const char *s, uint64_t *ret);

/* sdp_signature_compute() - the signature of @body at @timestamp, 64 lowercase hex + NUL. */
void sdp_signature_compute(const char *token, const char *timestamp, const void *body, size_t body_size,
                           char ret_hex[static 65]);

/*
 * sdp_signature_verify() - check both headers of a request with @body against @token.
 * @now_ms: the daemon's clock; @max_age_ms: the window either way (their 30 s by default).
 * Return: 0; -ENODATA a header is missing, -EBADMSG a header is malformed, -ETIME the timestamp
 * is outside the window, -EKEYREJECTED the signature does not match (compared in constant time).
 */
int sdp_signature_verify(const char *token, const char *timestamp, const char *signature,
                         const void *body, size_t body_size, uint64_t now_ms, uint64_t max_age_ms);
