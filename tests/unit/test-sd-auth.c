/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the ScienceDiscovery dialect's pure parts: the execution signature (src/api/
 * sd-auth.h), the result shaping (sd-internal.h: output budget, workspace keys, ISO times) and
 * the listen-address form that picks a dialect (src/util/dialect.h).
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/sd-auth.h"
#include "api/sd-internal.h"
#include "util/dialect.h"

/*
 * Known answers, computed independently of this code with Python's hmac/hashlib, as their API
 * server signs (the bearer token is the key):
 *
 *   python3 -c 'import hmac, hashlib; k = b"sciencediscovery-runner-local";
 *       body = b"{\"executionId\":\"e1\",\"code\":\"print(1)\"}";
 *       S = b"1700000000123\n" + hashlib.sha256(body).hexdigest().encode();
 *       print(hmac.new(k, S, hashlib.sha256).hexdigest())'
 *   → 84af968f53e930625d1b98c1e178ab70f5f80dab2abb16e939ca25dd3a8510ad
 *
 *   the same with the timestamp "0" and an empty body
 *   → 8cdb840828ce497052814c6c0a9eb275b0943d23847dc3ee4471ac25ae865a30
 */
#define TOKEN "sciencediscovery-runner-local"
#define BODY "{\"executionId\":\"e1\",\"code\":\"print(1)\"}"
#define TS "1700000000123"
#define TS_NUM UINT64_C(1700000000123)
#define SIG "84af968f53e930625d1b98c1e178ab70f5f80dab2abb16e939ca25dd3a8510ad"
#define SIG_TAIL "af968f53e930625d1b98c1e178ab70f5f80dab2abb16e939ca25dd3a8510ad"   /* SIG without "84" */
#define SIG_EMPTY "8cdb840828ce497052814c6c0a9eb275b0943d23847dc3ee4471ac25ae865a30"
#define WINDOW SDP_SIGNATURE_MAX_AGE_MS

static void test_known_vectors(void **state) {
        char hex[65];

        sdp_signature_compute(TOKEN, TS, BODY, strlen(BODY), hex);
        assert_string_equal(hex, SIG);
        sdp_signature_compute(TOKEN, "0", NULL, 0, hex);
        assert_string_equal(hex, SIG_EMPTY);

        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG, BODY, strlen(BODY), TS_NUM, WINDOW), 0);
        assert_int_equal(sdp_signature_verify(TOKEN, "0", SIG_EMPTY, "", 0, 0, WINDOW), 0);
}

static void test_mismatch(void **state) {
        char other[] = SIG;

        /* Another body, another key, another timestamp (same window), one changed digit. */
        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG, BODY " ", strlen(BODY) + 1, TS_NUM, WINDOW), -EKEYREJECTED);
        assert_int_equal(sdp_signature_verify(TOKEN "x", TS, SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -EKEYREJECTED);
        assert_int_equal(sdp_signature_verify(TOKEN, "1700000000124", SIG, BODY, strlen(BODY), TS_NUM, WINDOW),
                         -EKEYREJECTED);
        other[63] = other[63] == '0' ? '1' : '0';
        assert_int_equal(sdp_signature_verify(TOKEN, TS, other, BODY, strlen(BODY), TS_NUM, WINDOW), -EKEYREJECTED);
}

static void test_expiry(void **state) {
        /* ±30 s exactly is still good; one millisecond more is not, on either side. */
        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG, BODY, strlen(BODY), TS_NUM + WINDOW, WINDOW), 0);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG, BODY, strlen(BODY), TS_NUM - WINDOW, WINDOW), 0);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG, BODY, strlen(BODY), TS_NUM + WINDOW + 1, WINDOW), -ETIME);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG, BODY, strlen(BODY), TS_NUM - WINDOW - 1, WINDOW), -ETIME);
        /* Seconds instead of milliseconds (our own API's unit) are 53 years off. */
        assert_int_equal(sdp_signature_verify(TOKEN, "1700000000", SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -ETIME);
}

static void test_malformed(void **state) {
        char upper[] = SIG;

        for (char *p = upper; *p; p++)
                if (*p >= 'a' && *p <= 'f')
                        *p = (char) (*p - 'a' + 'A');
        assert_int_equal(sdp_signature_verify(TOKEN, NULL, SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -ENODATA);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, NULL, BODY, strlen(BODY), TS_NUM, WINDOW), -ENODATA);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, upper, BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, "v1=" SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, "84af", BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, SIG "0", BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, TS, "zz" SIG_TAIL, BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, "", SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, "-1", SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
        assert_int_equal(sdp_signature_verify(TOKEN, "1.7e12", SIG, BODY, strlen(BODY), TS_NUM, WINDOW), -EBADMSG);
}

static void test_timestamp_parse(void **state) {
        uint64_t v = 7;

        assert_int_equal(sdp_timestamp_parse("0", &v), 0);
        assert_true(v == 0);
        assert_int_equal(sdp_timestamp_parse("007", &v), 0);
        assert_true(v == 7);
        assert_int_equal(sdp_timestamp_parse("9007199254740991", &v), 0);
        assert_true(v == SDP_SAFE_INTEGER_MAX);
        v = 5;
        assert_int_equal(sdp_timestamp_parse("9007199254740992", &v), -EBADMSG);
        assert_int_equal(sdp_timestamp_parse("99999999999999999999999999999", &v), -EBADMSG);
        assert_int_equal(sdp_timestamp_parse("+1", &v), -EBADMSG);
        assert_int_equal(sdp_timestamp_parse(" 1", &v), -EBADMSG);
        assert_int_equal(sdp_timestamp_parse("1 ", &v), -EBADMSG);
        assert_int_equal(sdp_timestamp_parse("", &v), -EBADMSG);
        assert_int_equal(sdp_timestamp_parse(NULL, &v), -EBADMSG);
        assert_true(v == 5);    /* untouched on failure */
}

static void test_output_bound(void **state) {
        char big[1000], *o = NULL, *e = NULL;
        size_t os, es;

        memset(big, 'a', sizeof(big));
        big[0] = 'H';
        big[sizeof(big) - 1] = 'T';

        /* Within the budget, or no budget: unchanged. */
        assert_int_equal(sdp_output_bound("out", 3, "err", 3, 6, &o, &os, &e, &es), 0);
        assert_string_equal(o, "out");
        assert_string_equal(e, "err");
        free(o), free(e);
        assert_int_equal(sdp_output_bound(big, sizeof(big), "", 0, 0, &o, &os, &e, &es), 0);
        assert_int_equal(os, sizeof(big));
        free(o), free(e);

        /* Over it: head and tail around their marker, the whole within the budget. */
        assert_int_equal(sdp_output_bound(big, sizeof(big), "err", 3, 400, &o, &os, &e, &es), 0);
        assert_string_equal(e, "err");
        assert_true(os + es <= 400);
        assert_int_equal(os, 397);
        assert_int_equal(o[0], 'H');
        assert_int_equal(o[os - 1], 'T');
        assert_non_null(strstr(o, "\n...[output truncated: exceeded 400 bytes; set SCIENCE_AGENT_MAX_OUTPUT_BYTES=0 to disable]...\n"));
        free(o), free(e);

        /* Both over: together within the budget. */
        assert_int_equal(sdp_output_bound(big, sizeof(big), big, sizeof(big), 500, &o, &os, &e, &es), 0);
        assert_true(os + es <= 500);
        free(o), free(e);

        /* A UTF-8 character is never split ("é" is two bytes). */
        {
                char u[600];
                for (size_t i = 0; i < sizeof(u); i += 2)
                        memcpy(u + i, "\xc3\xa9", 2);
                assert_int_equal(sdp_output_bound(u, sizeof(u), "", 0, 301, &o, &os, &e, &es), 0);
                assert_true(os <= 301);
                assert_true(((unsigned char) o[0] & 0xC0) != 0x80);
                assert_true(((unsigned char) o[os - 1]) == 0xa9);
                free(o), free(e);
        }
}

static void test_workspace_keys(void **state) {
        char ws[129];

        assert_true(sdp_runner_workspace_key_valid("project/session"));
        assert_true(sdp_runner_workspace_key_valid("p1/s-2/runners/ns/agents/main"));
        assert_true(sdp_runner_workspace_key_valid("a.b_c-d"));
        assert_false(sdp_runner_workspace_key_valid(""));
        assert_false(sdp_runner_workspace_key_valid("/abs"));
        assert_false(sdp_runner_workspace_key_valid("a//b"));
        assert_false(sdp_runner_workspace_key_valid("a/"));
        assert_false(sdp_runner_workspace_key_valid("a/../b"));
        assert_false(sdp_runner_workspace_key_valid("./a"));
        assert_false(sdp_runner_workspace_key_valid("a\\b"));
        assert_false(sdp_runner_workspace_key_valid("a b"));
        {
                char long_key[502];
                memset(long_key, 'k', 501);
                long_key[501] = '\0';
                assert_false(sdp_runner_workspace_key_valid(long_key));
                long_key[500] = '\0';
                assert_true(sdp_runner_workspace_key_valid(long_key));
        }

        sdp_workspace_for_key("simple", ws);
        assert_string_equal(ws, "simple");
        /* python3 -c 'import hashlib; print("sd-" + hashlib.sha256(b"p/s").hexdigest()[:40])' */
        sdp_workspace_for_key("p/s", ws);
        assert_string_equal(ws, "sd-a4005af57fa13a9ccc7eb2cf06c7b801cdaa8782");
}

static void test_iso_time(void **state) {
        char buf[32];

        assert_string_equal(sdp_iso_time(0, buf), "1970-01-01T00:00:00.000Z");
        assert_string_equal(sdp_iso_time(UINT64_C(1700000000123), buf), "2023-11-14T22:13:20.123Z");
}

static void test_dialect(void **state) {
        const char *a;

        assert_int_equal(http_dialect_split_listen("sciencediscovery=127.0.0.1:4312", &a), HTTP_DIALECT_SCIENCEDISCOVERY);
        assert_string_equal(a, "127.0.0.1:4312");
        assert_int_equal(http_dialect_split_listen("api=[::1]:4311", &a), HTTP_DIALECT_NATIVE);
        assert_string_equal(a, "[::1]:4311");
        assert_int_equal(http_dialect_split_listen("127.0.0.1:4311", &a), HTTP_DIALECT_NATIVE);
        assert_string_equal(a, "127.0.0.1:4311");
        /* A socket path with '=' in it is not mistaken for a dialect. */
        assert_int_equal(http_dialect_split_listen("/run/x=y.sock", &a), HTTP_DIALECT_NATIVE);
        assert_string_equal(a, "/run/x=y.sock");
        assert_int_equal(http_dialect_split_listen("sciencediscoveryx=1.2.3.4:5", &a), HTTP_DIALECT_NATIVE);

        assert_int_equal(http_dialect_from_fd_name("sciencediscovery"), HTTP_DIALECT_SCIENCEDISCOVERY);
        assert_int_equal(http_dialect_from_fd_name("api"), HTTP_DIALECT_NATIVE);
        assert_int_equal(http_dialect_from_fd_name("sandbox-runner.socket"), HTTP_DIALECT_NATIVE);
        assert_int_equal(http_dialect_from_fd_name(NULL), HTTP_DIALECT_NATIVE);
        assert_string_equal(http_dialect_to_string(HTTP_DIALECT_SCIENCEDISCOVERY), "sciencediscovery");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_known_vectors),
                cmocka_unit_test(test_mismatch),
                cmocka_unit_test(test_expiry),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_timestamp_parse),
                cmocka_unit_test(test_output_bound),
                cmocka_unit_test(test_workspace_keys),
                cmocka_unit_test(test_iso_time),
                cmocka_unit_test(test_dialect),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
