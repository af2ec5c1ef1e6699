/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/http/auth.h: secret loading, bearer tokens and v1 request signatures. */

#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/auth.h"
#include "config/config.h"

/*
 * Known answers, computed independently of this code with Python's hmac/hashlib:
 *
 *   python3 -c 'import hmac, hashlib; k = b"unit-test-signing-key-0123456789";
 *       body = b"{\"code\":\"print(6*7)\",\"language\":\"python\"}";
 *       S = b"v1\n1700000000\nPOST\n/execute?wait=1\n" + hashlib.sha256(body).hexdigest().encode();
 *       print(hmac.new(k, S, hashlib.sha256).hexdigest())'
 *   → 757641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acb99
 *   (cross-checked with: BH=$(printf '%s' "$BODY" | openssl dgst -sha256 -r | cut -d' ' -f1);
 *    printf 'v1\n1700000000\nPOST\n/execute?wait=1\n%s' "$BH" | openssl dgst -sha256 -hmac "$KEY" -r)
 *
 *   python3 -c 'import hmac, hashlib; k = b"unit-test-signing-key-0123456789";
 *       S = b"v1\n1700000000\nGET\n/status\n" + hashlib.sha256(b"").hexdigest().encode();
 *       print(hmac.new(k, S, hashlib.sha256).hexdigest())'
 *   → c92e0032e7721a97144b258b53c22e5370a32f74c18e29b65ae600cc29d53d30
 *
 * A binary key with NUL bytes (0x00..0x1f) and a body with a NUL byte, so that both sizes are
 * honoured rather than strlen():
 *   python3 -c 'import hmac, hashlib; k = bytes(range(32)); body = b"a\x00b";
 *       S = b"v1\n0\nGET\n/status\n" + hashlib.sha256(body).hexdigest().encode();
 *       print(hmac.new(k, S, hashlib.sha256).hexdigest())'
 *   → a6c64f2a31855e2236ae63a12ac0682e6a533294e023d171db2fb11c9fe9fd87
 */
#define KEY "unit-test-signing-key-0123456789"
#define BODY "{\"code\":\"print(6*7)\",\"language\":\"python\"}"
#define TS "1700000000"
#define TS_NUM INT64_C(1700000000)
#define SIG_POST "757641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acb99"
#define SIG_GET_EMPTY "c92e0032e7721a97144b258b53c22e5370a32f74c18e29b65ae600cc29d53d30"
#define SIG_BINARY "a6c64f2a31855e2236ae63a12ac0682e6a533294e023d171db2fb11c9fe9fd87"

#define SKEW 300

static const uint8_t *key_bytes(void) {
        return (const uint8_t *) KEY;
}

/* ---- auth_secret_equal() ------------------------------------------------------------------- */

static void test_secret_equal(void **state) {
        assert_true(auth_secret_equal("secret-token", 12, "secret-token", 12));
        assert_false(auth_secret_equal("secret-token", 12, "secret-tokex", 12));
        assert_false(auth_secret_equal("secret-token", 12, "Secret-token", 12));
        /* Different lengths, one a prefix of the other. */
        assert_false(auth_secret_equal("secret-token", 12, "secret-token2", 13));
        assert_false(auth_secret_equal("secret-token", 12, "secret", 6));
        /* The lengths are honoured, not the NULs. */
        assert_false(auth_secret_equal("secret-token", 12, "secret-token", 11));
        assert_true(auth_secret_equal("a\0b", 3, "a\0b", 3));
        assert_false(auth_secret_equal("a\0b", 3, "a\0c", 3));
        /* Empty. */
        assert_true(auth_secret_equal("", 0, "", 0));
        assert_false(auth_secret_equal("", 0, "x", 1));
        assert_false(auth_secret_equal("x", 1, "", 0));
}

/* ---- auth_check_bearer() ------------------------------------------------------------------- */

#define TOKEN "0123456789abcdef-api-token"

static void test_check_bearer(void **state) {
        assert_int_equal(auth_check_bearer(TOKEN, NULL), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, ""), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, "Basic x"), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, "Basic " TOKEN), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer"), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, TOKEN), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer:" TOKEN), -ENODATA);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearerx " TOKEN), -ENODATA);

        assert_int_equal(auth_check_bearer(TOKEN, "Bearer wrong"), -EACCES);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer "), -EACCES);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer " TOKEN "x"), -EACCES);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer 0123456789abcdef"), -EACCES);
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer 0123456789ABCDEF-api-token"), -EACCES);

        assert_int_equal(auth_check_bearer(TOKEN, "Bearer " TOKEN), 0);
        /* The scheme is case-insensitive (RFC 9110 §11.1), the token is not. */
        assert_int_equal(auth_check_bearer(TOKEN, "bearer " TOKEN), 0);
        assert_int_equal(auth_check_bearer(TOKEN, "BEARER " TOKEN), 0);
        assert_int_equal(auth_check_bearer(TOKEN, "BeArEr " TOKEN), 0);
        /* RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ... ], so more than one space is fine. */
        assert_int_equal(auth_check_bearer(TOKEN, "Bearer   " TOKEN), 0);
}

/* ---- auth_signature_compute() -------------------------------------------------------------- */

static void test_signature_compute(void **state) {
        static const uint8_t binary_key[32] = {
                0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
        };
        char hex[65];

        memset(hex, 'Z', sizeof(hex));
        auth_signature_compute(key_bytes(), strlen(KEY), TS, "POST", "/execute?wait=1", BODY, strlen(BODY), hex);
        assert_string_equal(hex, SIG_POST);

        memset(hex, 'Z', sizeof(hex));
        auth_signature_compute(key_bytes(), strlen(KEY), TS, "GET", "/status", NULL, 0, hex);
        assert_string_equal(hex, SIG_GET_EMPTY);
        /* An empty body given as a pointer is the same as none. */
        auth_signature_compute(key_bytes(), strlen(KEY), TS, "GET", "/status", "", 0, hex);
        assert_string_equal(hex, SIG_GET_EMPTY);

        memset(hex, 'Z', sizeof(hex));
        auth_signature_compute(binary_key, sizeof(binary_key), "0", "GET", "/status", "a\0b", 3, hex);
        assert_string_equal(hex, SIG_BINARY);
}

/* ---- auth_signature_verify() --------------------------------------------------------------- */

static int verify(const char *ts, const char *sig, const char *method, const char *path,
                  const char *body, int64_t now) {
        return auth_signature_verify(key_bytes(), strlen(KEY), ts, sig, method, path,
                                     body, body ? strlen(body) : 0, now, SKEW);
}

static void test_verify_ok(void **state) {
        assert_int_equal(verify(TS, "v1=" SIG_POST, "POST", "/execute?wait=1", BODY, TS_NUM), 0);
        assert_int_equal(verify(TS, "v1=" SIG_GET_EMPTY, "GET", "/status", NULL, TS_NUM), 0);
}

static void test_verify_missing(void **state) {
        assert_int_equal(verify(NULL, "v1=" SIG_POST, "POST", "/execute?wait=1", BODY, TS_NUM), -ENODATA);
        assert_int_equal(verify("", "v1=" SIG_POST, "POST", "/execute?wait=1", BODY, TS_NUM), -ENODATA);
        assert_int_equal(verify(TS, NULL, "POST", "/execute?wait=1", BODY, TS_NUM), -ENODATA);
        assert_int_equal(verify(TS, "", "POST", "/execute?wait=1", BODY, TS_NUM), -ENODATA);
        assert_int_equal(verify(NULL, NULL, "POST", "/execute?wait=1", BODY, TS_NUM), -ENODATA);
}

static void test_verify_bad_timestamp(void **state) {
        static const char *const bad[] = {
                "-5", "+5", "0123", "00", "12a", "a12", " 1700000000", "1700000000 ", "1.7e9",
                "1700000000.0", "0x6553f100", "1234567890123" /* 13 digits */, "9999999999999",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (verify(bad[i], "v1=" SIG_POST, "POST", "/execute?wait=1", BODY, TS_NUM) != -EBADMSG)
                        fail_msg("timestamp '%s' is not refused as malformed", bad[i]);
}

static void test_verify_bad_signature(void **state) {
        static const char *const bad[] = {
                SIG_POST,                                       /* no "v1=" */
                "v2=" SIG_POST,
                "V1=" SIG_POST,
                "v1:" SIG_POST,
                " v1=" SIG_POST,
                "v1= " SIG_POST,
                "v1=" SIG_POST " ",
                "v1=" SIG_POST "0",                             /* 65 hex digits */
                "v1=757641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acb9",  /* 63 */
                "v1=",
                "v1=757641E921742258B4CF929BE7CA92817806517EFCCDF9F553EE6C96388ACB99", /* uppercase */
                "v1=757641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acbzz", /* not hex */
                "v1=757641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acb9g",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (verify(TS, bad[i], "POST", "/execute?wait=1", BODY, TS_NUM) != -EBADMSG)
                        fail_msg("signature '%s' is not refused as malformed", bad[i]);
}

static void test_verify_window(void **state) {
        const char *sig = "v1=" SIG_POST;

        /* Exactly at the boundary, either direction: accepted. */
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, TS_NUM + SKEW), 0);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, TS_NUM - SKEW), 0);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, TS_NUM + 1), 0);
        /* One second beyond: stale, or from the future. */
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, TS_NUM + SKEW + 1), -ETIME);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, TS_NUM - SKEW - 1), -ETIME);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, TS_NUM + 86400), -ETIME);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", BODY, 0), -ETIME);

        /* A zero window accepts only the current second. */
        assert_int_equal(auth_signature_verify(key_bytes(), strlen(KEY), TS, sig, "POST", "/execute?wait=1",
                                               BODY, strlen(BODY), TS_NUM, 0), 0);
        assert_int_equal(auth_signature_verify(key_bytes(), strlen(KEY), TS, sig, "POST", "/execute?wait=1",
                                               BODY, strlen(BODY), TS_NUM + 1, 0), -ETIME);
        assert_int_equal(auth_signature_verify(key_bytes(), strlen(KEY), TS, sig, "POST", "/execute?wait=1",
                                               BODY, strlen(BODY), TS_NUM - 1, 0), -ETIME);

        /* Well-formed edge timestamps: "0" and 12 digits. */
        {
                char hex[65], header[68];

                auth_signature_compute(key_bytes(), strlen(KEY), "0", "GET", "/status", NULL, 0, hex);
                (void) snprintf(header, sizeof(header), "v1=%s", hex);
                assert_int_equal(verify("0", header, "GET", "/status", NULL, 0), 0);
                assert_int_equal(verify("0", header, "GET", "/status", NULL, SKEW + 1), -ETIME);

                auth_signature_compute(key_bytes(), strlen(KEY), "999999999999", "GET", "/status", NULL, 0, hex);
                (void) snprintf(header, sizeof(header), "v1=%s", hex);
                assert_int_equal(verify("999999999999", header, "GET", "/status", NULL, INT64_C(999999999999)), 0);
        }
}

static void test_verify_rejected(void **state) {
        static const char other_key[] = "unit-test-signing-key-0123456788";
        const char *sig = "v1=" SIG_POST;
        char hex[65], header[68];

        /* Wrong key. */
        assert_int_equal(auth_signature_verify((const uint8_t *) other_key, strlen(other_key), TS, sig, "POST",
                                               "/execute?wait=1", BODY, strlen(BODY), TS_NUM, SKEW),
                         -EKEYREJECTED);
        /* A key that is a prefix of the right one. */
        assert_int_equal(auth_signature_verify(key_bytes(), strlen(KEY) - 1, TS, sig, "POST",
                                               "/execute?wait=1", BODY, strlen(BODY), TS_NUM, SKEW),
                         -EKEYREJECTED);
        /* Wrong body, including a truncated one and none at all. */
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", "{\"code\":\"print(6*8)\",\"language\":\"python\"}",
                                TS_NUM), -EKEYREJECTED);
        assert_int_equal(auth_signature_verify(key_bytes(), strlen(KEY), TS, sig, "POST", "/execute?wait=1",
                                               BODY, strlen(BODY) - 1, TS_NUM, SKEW), -EKEYREJECTED);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=1", NULL, TS_NUM), -EKEYREJECTED);
        /* Wrong path or query. */
        assert_int_equal(verify(TS, sig, "POST", "/execute", BODY, TS_NUM), -EKEYREJECTED);
        assert_int_equal(verify(TS, sig, "POST", "/execute?wait=0", BODY, TS_NUM), -EKEYREJECTED);
        assert_int_equal(verify(TS, sig, "POST", "/execute-shell?wait=1", BODY, TS_NUM), -EKEYREJECTED);
        /* Wrong method, including its case. */
        assert_int_equal(verify(TS, sig, "PUT", "/execute?wait=1", BODY, TS_NUM), -EKEYREJECTED);
        assert_int_equal(verify(TS, sig, "post", "/execute?wait=1", BODY, TS_NUM), -EKEYREJECTED);
        /* A signature replayed with another (fresh) timestamp. */
        assert_int_equal(verify("1700000001", sig, "POST", "/execute?wait=1", BODY, TS_NUM), -EKEYREJECTED);
        /* One flipped hex digit. */
        assert_int_equal(verify(TS, "v1=857641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acb99", "POST",
                                "/execute?wait=1", BODY, TS_NUM), -EKEYREJECTED);
        assert_int_equal(verify(TS, "v1=757641e921742258b4cf929be7ca92817806517efccdf9f553ee6c96388acb98", "POST",
                                "/execute?wait=1", BODY, TS_NUM), -EKEYREJECTED);

        /* And a freshly computed signature for the changed request is accepted again. */
        auth_signature_compute(key_bytes(), strlen(KEY), TS, "PUT", "/execute?wait=1", BODY, strlen(BODY), hex);
        (void) snprintf(header, sizeof(header), "v1=%s", hex);
        assert_int_equal(verify(TS, header, "PUT", "/execute?wait=1", BODY, TS_NUM), 0);
}

/* ---- secrets_load() ------------------------------------------------------------------------ */

typedef struct SecretsFixture {
        char dir[64];
        char *creds;            /* $dir/creds, a fake $CREDENTIALS_DIRECTORY */
        char *etc;              /* $dir/etc, for TokenFile=/SigningKeyFile= */
        Config config;
} SecretsFixture;

#define TOKEN_CRED "credential-token-0123456789"
#define TOKEN_FILE "file-token-0123456789abcdef"
#define KEY_CRED "credential-signing-key-0123456789"
#define KEY_FILE "file-signing-key-0123456789abcdef"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static int setup_secrets(void **state) {
        SecretsFixture *f = calloc(1, sizeof(SecretsFixture));
        const char *tmp = getenv("TMPDIR");

        if (!f)
                return -1;
        (void) snprintf(f->dir, sizeof(f->dir), "%s/test-auth.XXXXXX",
                        tmp && tmp[0] == '/' && strlen(tmp) < 30 ? tmp : "/tmp");
        if (!mkdtemp(f->dir) ||
            asprintf(&f->creds, "%s/creds", f->dir) < 0 ||
            asprintf(&f->etc, "%s/etc", f->dir) < 0 ||
            mkdir(f->creds, 0700) < 0 ||
            mkdir(f->etc, 0700) < 0 ||
            config_init(&f->config) < 0)
                return -1;
        (void) unsetenv("CREDENTIALS_DIRECTORY");
        *state = f;
        return 0;
}

static int teardown_secrets(void **state) {
        SecretsFixture *f = *state;

        (void) unsetenv("CREDENTIALS_DIRECTORY");
        (void) nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        config_done(&f->config);
        free(f->creds);
        free(f->etc);
        free(f);
        return 0;
}

static void write_bytes(const char *dir, const char *name, const char *content, size_t size) {
        char *path = NULL;
        FILE *f;

        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fwrite(content, 1, size, f), size);
        assert_int_equal(fclose(f), 0);
        free(path);
}

static void write_text(const char *dir, const char *name, const char *content) {
        write_bytes(dir, name, content, strlen(content));
}

/* Point [Auth] TokenFile=/SigningKeyFile= at $dir/etc/{token,signing-key}, through the parser. */
static void configure_files(SecretsFixture *f, bool token, bool key) {
        char *text = NULL, *error = NULL;

        assert_true(asprintf(&text, "[Auth]\nTokenFile=%s%s\nSigningKeyFile=%s%s\n",
                             token ? f->etc : "", token ? "/token" : "",
                             key ? f->etc : "", key ? "/signing-key" : "") > 0);
        assert_int_equal(config_parse_buffer(&f->config, "test.conf", text, strlen(text), &error), 0);
        assert_null(error);
        free(text);
}

static void assert_secrets(const Secrets *s, const char *token, const char *key) {
        assert_non_null(s->token);
        assert_string_equal(s->token, token);
        assert_non_null(s->signing_key);
        assert_int_equal(s->signing_key_size, strlen(key));
        assert_memory_equal(s->signing_key, key, strlen(key));
}

static void test_secrets_credential_wins(void **state) {
        SecretsFixture *f = *state;
        Secrets s = {};
        char *error = NULL;

        write_text(f->creds, "api-token", TOKEN_CRED "\n");
        write_text(f->creds, "signing-key", KEY_CRED "\n");
        write_text(f->etc, "token", TOKEN_FILE "\n");
        write_text(f->etc, "signing-key", KEY_FILE "\n");
        configure_files(f, true, true);
        assert_int_equal(setenv("CREDENTIALS_DIRECTORY", f->creds, 1), 0);

        assert_int_equal(secrets_load(&f->config, &s, &error), 0);
        assert_null(error);
        /* Credentials win, and the trailing newline is gone. */
        assert_secrets(&s, TOKEN_CRED, KEY_CRED);
        secrets_done(&s);
        assert_null(s.token);
        assert_null(s.signing_key);
        assert_int_equal(s.signing_key_size, 0);
}

static void test_secrets_files(void **state) {
        SecretsFixture *f = *state;
        Secrets s = {};
        char *error = NULL;

        /* Trailing whitespace of any kind is stripped, inner whitespace kept. */
        write_text(f->etc, "token", TOKEN_FILE " \t\r\n\n");
        write_text(f->etc, "signing-key", "file signing key 0123456789\r\n");
        configure_files(f, true, true);

        /* No $CREDENTIALS_DIRECTORY: the configured files. */
        assert_int_equal(secrets_load(&f->config, &s, &error), 0);
        assert_null(error);
        assert_secrets(&s, TOKEN_FILE, "file signing key 0123456789");
        secrets_done(&s);

        /* $CREDENTIALS_DIRECTORY without these credentials: the files still. */
        assert_int_equal(setenv("CREDENTIALS_DIRECTORY", f->creds, 1), 0);
        assert_int_equal(secrets_load(&f->config, &s, &error), 0);
        assert_null(error);
        assert_secrets(&s, TOKEN_FILE, "file signing key 0123456789");
        secrets_done(&s);

        /* Mixed: the token from a credential, the key from its file. */
        write_text(f->creds, "api-token", TOKEN_CRED);
        assert_int_equal(secrets_load(&f->config, &s, &error), 0);
        assert_null(error);
        assert_secrets(&s, TOKEN_CRED, "file signing key 0123456789");
        secrets_done(&s);
}

static void test_secrets_missing_token(void **state) {
        SecretsFixture *f = *state;
        Secrets s = {};
        char *error = NULL;

        write_text(f->creds, "signing-key", KEY_CRED "\n");

        /* Neither a credentials directory nor TokenFile=. */
        assert_int_equal(secrets_load(&f->config, &s, &error), -ENOKEY);
        assert_non_null(error);
        assert_non_null(strstr(error, "api-token"));
        free(error);
        error = NULL;

        /* A credentials directory without api-token, and no TokenFile=. */
        assert_int_equal(setenv("CREDENTIALS_DIRECTORY", f->creds, 1), 0);
        assert_int_equal(secrets_load(&f->config, &s, &error), -ENOKEY);
        assert_non_null(error);
        assert_non_null(strstr(error, "api-token"));
        assert_non_null(strstr(error, "TokenFile"));
        free(error);
        error = NULL;

        /* TokenFile= names a file that does not exist. */
        configure_files(f, true, false);
        assert_int_equal(secrets_load(&f->config, &s, &error), -ENOKEY);
        assert_non_null(error);
        free(error);
        assert_null(s.token);
        assert_null(s.signing_key);
}

static void test_secrets_missing_key(void **state) {
        SecretsFixture *f = *state;
        Secrets s = {};
        char *error = NULL;

        /* The token loads, then the key is missing: nothing is returned (and nothing leaks). */
        write_text(f->creds, "api-token", TOKEN_CRED "\n");
        assert_int_equal(setenv("CREDENTIALS_DIRECTORY", f->creds, 1), 0);
        assert_int_equal(secrets_load(&f->config, &s, &error), -ENOKEY);
        assert_non_null(error);
        assert_non_null(strstr(error, "signing-key"));
        assert_null(s.token);
        assert_null(s.signing_key);
        free(error);
}

static void test_secrets_size_limits(void **state) {
        SecretsFixture *f = *state;
        Secrets s = {};
        char *error = NULL, big[AUTH_SECRET_MAX + 2];

        assert_int_equal(setenv("CREDENTIALS_DIRECTORY", f->creds, 1), 0);
        write_text(f->creds, "signing-key", KEY_CRED);

        /* 15 bytes (the newline does not count): too short. */
        write_text(f->creds, "api-token", "0123456789abcde\n");
        assert_int_equal(secrets_load(&f->config, &s, &error), -EINVAL);
        assert_non_null(error);
        free(error);
        error = NULL;

        /* 16 bytes: the minimum. */
        write_text(f->creds, "api-token", "0123456789abcdef\n");
        assert_int_equal(secrets_load(&f->config, &s, &error), 0);
        assert_null(error);
        assert_string_equal(s.token, "0123456789abcdef");
        secrets_done(&s);

        /* Short after stripping whitespace. */
        write_text(f->creds, "api-token", "0123456789abcde            \n");
        assert_int_equal(secrets_load(&f->config, &s, &error), -EINVAL);
        assert_non_null(error);
        free(error);
        error = NULL;

        /* Empty. */
        write_text(f->creds, "api-token", "");
        assert_int_equal(secrets_load(&f->config, &s, &error), -EINVAL);
        assert_non_null(error);
        free(error);
        error = NULL;

        /* AUTH_SECRET_MAX bytes: fine; one more: refused. */
        memset(big, 'k', sizeof(big));
        big[AUTH_SECRET_MAX] = '\n';
        write_bytes(f->creds, "api-token", big, AUTH_SECRET_MAX + 1);
        assert_int_equal(secrets_load(&f->config, &s, &error), 0);
        assert_null(error);
        assert_int_equal(strlen(s.token), AUTH_SECRET_MAX);
        secrets_done(&s);

        memset(big, 'k', sizeof(big));
        write_bytes(f->creds, "api-token", big, AUTH_SECRET_MAX + 1);
        assert_int_equal(secrets_load(&f->config, &s, &error), -EINVAL);
        assert_non_null(error);
        free(error);
        error = NULL;

        /* A NUL byte inside. */
        write_bytes(f->creds, "api-token", "0123456789\0abcdefgh", 19);
        assert_int_equal(secrets_load(&f->config, &s, &error), -EINVAL);
        assert_non_null(error);
        free(error);
        error = NULL;

        /* The signing key has the same minimum. */
        write_text(f->creds, "api-token", TOKEN_CRED);
        write_text(f->creds, "signing-key", "short-key\n");
        assert_int_equal(secrets_load(&f->config, &s, &error), -EINVAL);
        assert_non_null(error);
        free(error);
        assert_null(s.token);
}

static void test_secrets_done_empty(void **state) {
        Secrets s = {};

        /* Safe on an empty (or already cleared) struct. */
        secrets_done(&s);
        secrets_done(&s);
        assert_null(s.token);
        assert_null(s.signing_key);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_secret_equal),
                cmocka_unit_test(test_check_bearer),
                cmocka_unit_test(test_signature_compute),
                cmocka_unit_test(test_verify_ok),
                cmocka_unit_test(test_verify_missing),
                cmocka_unit_test(test_verify_bad_timestamp),
                cmocka_unit_test(test_verify_bad_signature),
                cmocka_unit_test(test_verify_window),
                cmocka_unit_test(test_verify_rejected),
                cmocka_unit_test_setup_teardown(test_secrets_credential_wins, setup_secrets, teardown_secrets),
                cmocka_unit_test_setup_teardown(test_secrets_files, setup_secrets, teardown_secrets),
                cmocka_unit_test_setup_teardown(test_secrets_missing_token, setup_secrets, teardown_secrets),
                cmocka_unit_test_setup_teardown(test_secrets_missing_key, setup_secrets, teardown_secrets),
                cmocka_unit_test_setup_teardown(test_secrets_size_limits, setup_secrets, teardown_secrets),
                cmocka_unit_test(test_secrets_done_empty),
        };

        return cmocka_run_group_tests_name("auth", tests, NULL, NULL);
}
