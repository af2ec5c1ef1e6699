/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The "v1" request signature of the sandbox-runner API (HMAC-SHA256 over a canonical string). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Lowercase hex SHA-256 plus the terminating NUL. */
#define SIGN_SHA256_HEX_SIZE (64 + 1)

/*
 * sign_sha256_hex() - lowercase hex SHA-256 of a buffer.
 * @data: bytes to hash; may be NULL when @size is 0
 * @size: number of bytes
 * @ret: receives 64 hex digits and a NUL
 */
void sign_sha256_hex(const void *data, size_t size, char ret[static SIGN_SHA256_HEX_SIZE]);

/*
 * sign_v1_message() - build the string to sign,
 *   S = "v1\n" + timestamp + "\n" + METHOD + "\n" + path-with-query + "\n" + hex(SHA-256(body)).
 * @timestamp: unix seconds, written in decimal
 * @method: HTTP method, as sent (e.g. "POST"); non-empty, no whitespace or control characters
 * @path_with_query: request target as sent, starting with '/', no whitespace or control characters
 * @body: request body; may be NULL when @body_size is 0
 * @body_size: body length in bytes
 * @ret: receives the NUL-terminated string (caller frees)
 *
 * Pure: no I/O.
 * Return: 0, -EINVAL if @method or @path_with_query is malformed, -ENOMEM.
 */
int sign_v1_message(uint64_t timestamp, const char *method, const char *path_with_query,
                    const void *body, size_t body_size, char **ret);

/*
 * sign_v1() - the value of the X-Sandbox-Signature header: "v1=" + hex(HMAC-SHA256(@key, S)).
 * @key: signing key bytes (used as they are, not hex-decoded)
 * @key_size: key length in bytes; must not be 0
 * Other arguments as for sign_v1_message().
 *
 * Pure: no I/O.
 * Return: 0, -EINVAL on an empty key or a malformed @method/@path_with_query, -ENOMEM.
 */
int sign_v1(const void *key, size_t key_size, uint64_t timestamp, const char *method,
            const char *path_with_query, const void *body, size_t body_size, char **ret);
