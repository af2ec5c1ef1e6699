/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Secrets (API token, signing key), bearer-token checks and v1 request signatures. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Config Config;

#define AUTH_SECRET_MIN 16
#define AUTH_SECRET_MAX 4096

typedef struct Secrets {
        char *token;
        uint8_t *signing_key;
        size_t signing_key_size;
} Secrets;

/*
 * secrets_load() - read the API token and the signing key: first the systemd credentials
 * $CREDENTIALS_DIRECTORY/api-token and .../signing-key, then [Auth] TokenFile=/SigningKeyFile=.
 * Trailing whitespace is stripped; each must be AUTH_SECRET_MIN..AUTH_SECRET_MAX bytes.
 * Return: 0; -ENOKEY when a secret is missing, -EINVAL when one is unusable (with *ret_error).
 */
int secrets_load(const Config *c, Secrets *ret, char **ret_error);
/*
 * secrets_path() - the file secrets_load() reads the secret @credential ("api-token",
 * "signing-key") from: $CREDENTIALS_DIRECTORY/@credential when that exists, else @configured
 * ([Auth] TokenFile= or SigningKeyFile=; may be NULL).
 * Return: 0 with *@ret (a new string), -ENOKEY when there is neither, -ENOMEM.
 */
int secrets_path(const char *credential, const char *configured, char **ret);
void secrets_done(Secrets *s);

/* auth_sha256_hex() - SHA-256 of @size bytes at @data as 64 lowercase hex digits (the body hash both
 * signature schemes sign). */
void auth_sha256_hex(const void *data, size_t size, char ret_hex[static 65]);

/* auth_secret_equal() - constant-time comparison, also in the lengths. */
bool auth_secret_equal(const char *a, size_t a_len, const char *b, size_t b_len);

/*
 * auth_check_bearer() - check an "Authorization:" header value against @token.
 * Return: 0, -ENODATA (header missing or not "Bearer"), -EACCES (wrong token).
 */
int auth_check_bearer(const char *token, const char *authorization);

/* auth_signature_compute() - v1 signature as lowercase hex (64 chars + NUL) into @ret_hex. */
void auth_signature_compute(const uint8_t *key, size_t key_size, const char *timestamp,
                            const char *method, const char *path_with_query,
                            const void *body, size_t body_size, char ret_hex[static 65]);

/*
 * auth_signature_verify() - check X-Sandbox-Timestamp/X-Sandbox-Signature (API.md, "v1").
 * @now_sec: the daemon's clock; @max_skew_sec: the freshness window in either direction.
 * Return: 0; -ENODATA (a header is missing), -EBADMSG (a header is malformed),
 * -ETIME (timestamp outside the window), -EKEYREJECTED (signature does not match).
 */
int auth_signature_verify(const uint8_t *key, size_t key_size,
                          const char *timestamp, const char *signature,
                          const char *method, const char *path_with_query,
                          const void *body, size_t body_size,
                          int64_t now_sec, uint64_t max_skew_sec);
