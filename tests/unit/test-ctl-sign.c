/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/ctl/sign.c: the "v1" string to sign and its HMAC-SHA256, against known answers. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sign.h"

#define KEY "test-signing-key-0123456789"
#define BODY "{\"executionId\":\"a1\",\"language\":\"python\",\"code\":\"print(6*7)\"}"

/*
 * Expected values were computed independently of this code, with OpenSSL and cross-checked with
 * Python's hmac module:
 *
 *   KEY='test-signing-key-0123456789'
 *   BODY='{"executionId":"a1","language":"python","code":"print(6*7)"}'
 *   BH=$(printf '%s' "$BODY" | openssl dgst -sha256 -r | cut -d' ' -f1)
 *   printf 'v1\n1700000000\nPOST\n/execute?wait=1\n%s' "$BH" | openssl dgst -sha256 -hmac "$KEY" -r
 *
 *   python3 -c 'import hmac, hashlib; k = b"test-signing-key-0123456789";
 *       S = b"v1\n1700000000\nGET\n/status\n" + hashlib.sha256(b"").hexdigest().encode();
 *       print(hmac.new(k, S, hashlib.sha256).hexdigest())'
 */
#define BODY_SHA256 "f8c4e02f995ffb64d963a8cf951edde67cd3b0be2749d240fbb9cc72cd2bc9bc"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SIG_POST "v1=a4bf7ea5fa209a87ac10ab1f1a67c489a00faed868dda8cf2205c35d668e85ac"
#define SIG_GET_EMPTY "v1=3b16396b8ed134d96dcdfd8fc2a62798e7d454f73bd308428f1e174d611d6305"

/*
 * A key longer than the SHA-256 block (131 bytes of 0xaa, as RFC 4231 test case 6), a binary
 * body (the bytes 0..255) and timestamp 0:
 *
 *   H=$(python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)))' | openssl dgst -sha256 -r | cut -d' ' -f1)
 *   printf 'v1\n0\nPUT\n/workspaces/w1/files/a%%20b.txt?x=1&y=2\n%s' "$H" |
 *       openssl dgst -sha256 -mac HMAC -macopt hexkey:$(python3 -c 'print("aa"*131)') -r
 */
#define BIN_SHA256 "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880"
#define SIG_LONG_KEY "v1=2359eb84faa5fd37f54a3cbcbb533c78ad18e480a39ab2e8969b606dec14d04f"

static void test_sha256_hex(void **state) {
        char hex[SIGN_SHA256_HEX_SIZE];
        uint8_t bin[256];

        sign_sha256_hex(BODY, strlen(BODY), hex);
        assert_string_equal(hex, BODY_SHA256);

        sign_sha256_hex(NULL, 0, hex);
        assert_string_equal(hex, EMPTY_SHA256);

        for (size_t i = 0; i < sizeof(bin); i++)
                bin[i] = i;
        sign_sha256_hex(bin, sizeof(bin), hex);
        assert_string_equal(hex, BIN_SHA256);
}

static void test_message(void **state) {
        char *s = NULL;

        assert_int_equal(sign_v1_message(1700000000, "POST", "/execute?wait=1", BODY, strlen(BODY), &s), 0);
        assert_string_equal(s, "v1\n1700000000\nPOST\n/execute?wait=1\n" BODY_SHA256);
        free(s);

        /* Empty body: the hash of the empty string; NULL and "" are the same body. */
        assert_int_equal(sign_v1_message(0, "GET", "/status", NULL, 0, &s), 0);
        assert_string_equal(s, "v1\n0\nGET\n/status\n" EMPTY_SHA256);
        free(s);
        assert_int_equal(sign_v1_message(0, "GET", "/status", "", 0, &s), 0);
        assert_string_equal(s, "v1\n0\nGET\n/status\n" EMPTY_SHA256);
        free(s);

        /* 64-bit timestamps are written in full. */
        assert_int_equal(sign_v1_message(UINT64_MAX, "GET", "/", NULL, 0, &s), 0);
        assert_string_equal(s, "v1\n18446744073709551615\nGET\n/\n" EMPTY_SHA256);
        free(s);
}

static void test_known_answers(void **state) {
        uint8_t key[131], bin[256];
        char *sig = NULL;

        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "POST", "/execute?wait=1",
                                 BODY, strlen(BODY), &sig), 0);
        assert_string_equal(sig, SIG_POST);
        free(sig);

        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "GET", "/status", NULL, 0, &sig), 0);
        assert_string_equal(sig, SIG_GET_EMPTY);
        free(sig);

        memset(key, 0xaa, sizeof(key));
        for (size_t i = 0; i < sizeof(bin); i++)
                bin[i] = i;
        assert_int_equal(sign_v1(key, sizeof(key), 0, "PUT", "/workspaces/w1/files/a%20b.txt?x=1&y=2",
                                 bin, sizeof(bin), &sig), 0);
        assert_string_equal(sig, SIG_LONG_KEY);
        free(sig);
}

static void test_every_part_matters(void **state) {
        char *a = NULL, *b = NULL;

        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "POST", "/execute", BODY, strlen(BODY), &a), 0);

        /* Each component changes the signature: timestamp, method, path, query, body, key. */
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000001, "POST", "/execute", BODY, strlen(BODY), &b), 0);
        assert_string_not_equal(a, b);
        free(b);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "PUT", "/execute", BODY, strlen(BODY), &b), 0);
        assert_string_not_equal(a, b);
        free(b);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "POST", "/execute-shell", BODY, strlen(BODY), &b), 0);
        assert_string_not_equal(a, b);
        free(b);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "POST", "/execute?", BODY, strlen(BODY), &b), 0);
        assert_string_not_equal(a, b);
        free(b);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "POST", "/execute", BODY, strlen(BODY) - 1, &b), 0);
        assert_string_not_equal(a, b);
        free(b);
        assert_int_equal(sign_v1(KEY, strlen(KEY) - 1, 1700000000, "POST", "/execute", BODY, strlen(BODY), &b), 0);
        assert_string_not_equal(a, b);
        free(b);

        /* Deterministic, lowercase hex, "v1=" + 64 digits. */
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1700000000, "POST", "/execute", BODY, strlen(BODY), &b), 0);
        assert_string_equal(a, b);
        assert_int_equal(strlen(a), 3 + 64);
        assert_true(strncmp(a, "v1=", 3) == 0);
        assert_int_equal(strspn(a + 3, "0123456789abcdef"), 64);
        free(b);
        free(a);
}

static void test_invalid(void **state) {
        char *s = (char *) 0x1;       /* must stay untouched on failure */

        assert_int_equal(sign_v1(KEY, 0, 1, "GET", "/", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(NULL, 0, 1, "GET", "/", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "", "/", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GE T", "/", NULL, 0, &s), -EINVAL);
        /* A newline in the method or path would let two requests share a string to sign. */
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET\n/", "/", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET", "/a\nb", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET", "/a b", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET", "/\xc3\xa9", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET", "execute", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET", "", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "GET", NULL, NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, NULL, "/", NULL, 0, &s), -EINVAL);
        assert_int_equal(sign_v1(KEY, strlen(KEY), 1, "POST", "/", NULL, 5, &s), -EINVAL);
        assert_int_equal(sign_v1_message(1, "GET", "/a\r", NULL, 0, &s), -EINVAL);
        assert_ptr_equal(s, (char *) 0x1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sha256_hex),
                cmocka_unit_test(test_message),
                cmocka_unit_test(test_known_answers),
                cmocka_unit_test(test_every_part_matters),
                cmocka_unit_test(test_invalid),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
