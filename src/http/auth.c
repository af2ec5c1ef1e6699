/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Secrets (API token, signing key), bearer-token checks and v1 request signatures. */

#include <errno.h>
#include <fcntl.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "http/auth.h"
#include "util/string-util.h"
#include "config/config.h"
#include "util/io-util.h"
#include "util/macro.h"

/* The secret file, trailing white space cut off. */
static int read_secret(const char *path, char **ret, size_t *ret_size) {
        char *buf;
        size_t n;
        int r;

        r = read_file_limited(AT_FDCWD, path, O_NOCTTY | O_NOFOLLOW, AUTH_SECRET_MAX + 64, READ_FILE_SECRET,
                              &buf, &n);
        if (r < 0)
                return r;
        while (n > 0 && strchr(" \t\r\n", buf[n - 1]))
                buf[--n] = '\0';
        *ret = buf;
        *ret_size = n;
        return 0;
}

int secrets_path(const char *credential, const char *configured, char **ret) {
        const char *dir = getenv("CREDENTIALS_DIRECTORY");
        char *p = NULL;

        if (!isempty(dir)) {
                if (asprintf(&p, "%s/%s", dir, credential) < 0)
                        return -ENOMEM;
                if (access(p, F_OK) < 0)
                        p = mfree(p);
        }
        if (!p && configured && !(p = strdup(configured)))
                return -ENOMEM;
        if (!p)
                return -ENOKEY;
        *ret = p;
        return 0;
}

static int load_one(const char *credential, const char *configured, const char *what,
                    char **ret, size_t *ret_size, char **ret_error) {
        _cleanup_free_ char *path = NULL;
        const char *dir = getenv("CREDENTIALS_DIRECTORY");
        size_t size;
        char *s;
        int r;

        r = secrets_path(credential, configured, &path);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                if (asprintf(ret_error,
                             "No %s: neither the credential '%s' ($CREDENTIALS_DIRECTORY%s) nor [Auth] %s= is set. "
                             "Refusing to start without it.",
                             what, credential, isempty(dir) ? " is unset" : " has none",
                             streq(credential, "api-token") ? "TokenFile" : "SigningKeyFile") < 0)
                        return -ENOMEM;
                return -ENOKEY;
        }

        r = read_secret(path, &s, &size);
        if (r < 0) {
                if (asprintf(ret_error, "Failed to read the %s from '%s': %s", what, path, strerror(-r)) < 0)
                        return -ENOMEM;
                return r == -ENOENT ? -ENOKEY : -EINVAL;
        }
        if (size < AUTH_SECRET_MIN || size > AUTH_SECRET_MAX || memchr(s, '\0', size)) {
                explicit_bzero(s, size);
                free(s);
                if (asprintf(ret_error, "The %s in '%s' must be %u to %u bytes of text.",
                             what, path, AUTH_SECRET_MIN, AUTH_SECRET_MAX) < 0)
                        return -ENOMEM;
                return -EINVAL;
        }
        *ret = s;
        *ret_size = size;
        return 0;
}

int secrets_load(const Config *c, Secrets *ret, char **ret_error) {
        Secrets s = {};
        size_t token_size;
        char *key = NULL;
        int r;

        r = load_one("api-token", c->token_file, "API token", &s.token, &token_size, ret_error);
        if (r < 0)
                return r;
        r = load_one("signing-key", c->signing_key_file, "request signing key", &key, &s.signing_key_size,
                     ret_error);
        if (r < 0) {
                secrets_done(&s);
                return r;
        }
        s.signing_key = (uint8_t *) key;
        if (auth_secret_equal(s.token, token_size, key, s.signing_key_size)) {
                secrets_done(&s);
                if (asprintf(ret_error, "The API token and the request signing key must be different secrets.") < 0)
                        return -ENOMEM;
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

void secrets_done(Secrets *s) {
        erase_and_free(s->token);
        if (s->signing_key) {
                explicit_bzero(s->signing_key, s->signing_key_size);
                free(s->signing_key);
        }
        *s = (Secrets) {};
}

bool auth_secret_equal(const char *a, size_t a_len, const char *b, size_t b_len) {
        uint8_t da[SHA256_DIGEST_SIZE], db[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        /* Compare digests, so that neither the length nor the content leaks through timing. */
        sha256_init(&ctx);
        sha256_update(&ctx, a_len, (const uint8_t *) a);
        sha256_digest(&ctx, sizeof(da), da);
        sha256_init(&ctx);
        sha256_update(&ctx, b_len, (const uint8_t *) b);
        sha256_digest(&ctx, sizeof(db), db);
        return memeql_sec(da, db, sizeof(da)) != 0;
}

int auth_check_bearer(const char *token, const char *authorization) {
        const char *given;

        if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
                return -ENODATA;
        given = authorization + 7;
        while (*given == ' ')
                given++;
        if (!auth_secret_equal(token, strlen(token), given, strlen(given)))
                return -EACCES;
        return 0;
}

void auth_sha256_hex(const void *data, size_t size, char ret_hex[static 65]) {
        uint8_t digest[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, size, size > 0 ? data : (const uint8_t *) "");
        sha256_digest(&ctx, sizeof(digest), digest);
        hex_encode(digest, sizeof(digest), ret_hex);
}

void auth_signature_compute(const uint8_t *key, size_t key_size, const char *timestamp,
                            const char *method, const char *path_with_query,
                            const void *body, size_t body_size, char ret_hex[static 65]) {
        uint8_t mac[SHA256_DIGEST_SIZE];
        char body_hex[2 * SHA256_DIGEST_SIZE + 1];
        struct hmac_sha256_ctx hctx;

        auth_sha256_hex(body, body_size, body_hex);

        hmac_sha256_set_key(&hctx, key_size, key);
        hmac_sha256_update(&hctx, 3, (const uint8_t *) "v1\n");
        hmac_sha256_update(&hctx, strlen(timestamp), (const uint8_t *) timestamp);
        hmac_sha256_update(&hctx, 1, (const uint8_t *) "\n");
        hmac_sha256_update(&hctx, strlen(method), (const uint8_t *) method);
        hmac_sha256_update(&hctx, 1, (const uint8_t *) "\n");
        hmac_sha256_update(&hctx, strlen(path_with_query), (const uint8_t *) path_with_query);
        hmac_sha256_update(&hctx, 1, (const uint8_t *) "\n");
        hmac_sha256_update(&hctx, strlen(body_hex), (const uint8_t *) body_hex);
        hmac_sha256_digest(&hctx, sizeof(mac), mac);
        hex_encode(mac, sizeof(mac), ret_hex);
}

static int parse_timestamp(const char *s, int64_t *ret) {
        int64_t v = 0;

        /* Plain decimal seconds only: no sign, no leading zeros, at most 12 digits. */
        if (isempty(s) || strlen(s) > 12 || (s[0] == '0' && s[1] != '\0'))
                return -EBADMSG;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EBADMSG;
                v = v * 10 + (*p - '0');
        }
        *ret = v;
        return 0;
}

int auth_signature_verify(const uint8_t *key, size_t key_size,
                          const char *timestamp, const char *signature,
                          const char *method, const char *path_with_query,
                          const void *body, size_t body_size,
                          int64_t now_sec, uint64_t max_skew_sec) {
        char expected[65];
        int64_t ts, skew;
        int r;

        if (isempty(timestamp) || isempty(signature))
                return -ENODATA;
        r = parse_timestamp(timestamp, &ts);
        if (r < 0)
                return r;
        if (strlen(signature) != 3 + 64 || !strneq(signature, "v1=", 3))
                return -EBADMSG;
        for (const char *p = signature + 3; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return -EBADMSG;

        skew = now_sec - ts;
        if (skew < 0)
                skew = -skew;
        if ((uint64_t) skew > max_skew_sec)
                return -ETIME;

        auth_signature_compute(key, key_size, timestamp, method, path_with_query, body, body_size, expected);
        if (!memeql_sec(expected, signature + 3, 64))
                return -EKEYREJECTED;
        return 0;
}
