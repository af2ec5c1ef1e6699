/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the ScienceDiscovery dialect's per-request network policy (src/api/sd-network.h):
 * their rule that networkAccess counts only when its mode is the policy's, and the fields' checks.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/sd-network.h"

static int parse(const char *text, SdpNetwork *ret, const char **ret_error, json_object **ret_epoch) {
        json_object *o = json_tokener_parse(text);

        assert_non_null(o);
        *ret_epoch = o;
        *ret_error = NULL;
        return sdp_network_parse(o, ret, ret_error);
}

static void test_none(void **state) {
        static const char *const none[] = {
                "{}",
                "{\"networkPolicy\":\"none\"}",
                "{\"networkPolicy\":null,\"networkAccess\":null}",
                /* A mode other than the policy's: no network. */
                "{\"networkPolicy\":\"none\",\"networkAccess\":{\"mode\":\"domain-allowlist\",\"allowedDomains\":[\"a.org\"]}}",
                "{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"none\",\"revision\":\"none\"}}",
                "{\"networkPolicy\":\"domain-allowlist\"}",
                /* "open" asked by the access but not the policy: no network, not an error. */
                "{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"open\"}}",
        };

        for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
                SdpNetwork n = { .allowlist = true };
                const char *why;
                json_object *o;

                assert_int_equal(parse(none[i], &n, &why, &o), 0);
                assert_false(n.allowlist);
                assert_string_equal(n.revision, "none");
                assert_null(n.domains);
                json_object_put(o);
        }
}

static void test_allowlist(void **state) {
        SdpNetwork n;
        const char *why;
        json_object *o;

        assert_int_equal(parse("{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"domain-allowlist\","
                               "\"allowedDomains\":[\"pypi.org\",\"*.example.org:443\"],\"allowPrivateNetwork\":true,"
                               "\"revision\":\"r-7\",\"egressProxyPolicy\":\"inherit\"}}", &n, &why, &o), 0);
        assert_true(n.allowlist);
        assert_true(n.private_network);
        assert_string_equal(n.revision, "r-7");
        assert_int_equal(json_object_array_length(n.domains), 2);
        json_object_put(o);

        /* No list, no revision, no private network: still an allowlist (that reaches nothing). */
        assert_int_equal(parse("{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"domain-allowlist\"}}",
                               &n, &why, &o), 0);
        assert_true(n.allowlist);
        assert_false(n.private_network);
        assert_null(n.revision);
        assert_null(n.domains);
        json_object_put(o);
}

static void test_refused(void **state) {
        static const struct {
                const char *text;
                int error;
                const char *in_message;
        } bad[] = {
                { "{\"networkPolicy\":\"open\",\"networkAccess\":{\"mode\":\"open\"}}", -EOPNOTSUPP, "open" },
                { "{\"networkPolicy\":\"everything\"}", -EINVAL, "networkPolicy" },
                { "{\"networkPolicy\":7}", -EINVAL, "networkPolicy" },
                { "{\"networkPolicy\":\"none\",\"networkAccess\":[]}", -EINVAL, "networkAccess" },
                { "{\"networkPolicy\":\"none\",\"networkAccess\":{}}", -EINVAL, "mode" },
                { "{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"domain-allowlist\","
                  "\"allowedDomains\":\"a.org\"}}", -EINVAL, "allowedDomains" },
                { "{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"domain-allowlist\","
                  "\"allowedDomains\":[\"a.org\",5]}}", -EINVAL, "allowedDomains" },
                { "{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"domain-allowlist\","
                  "\"allowPrivateNetwork\":\"yes\"}}", -EINVAL, "allowPrivateNetwork" },
                { "{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"domain-allowlist\","
                  "\"revision\":1}}", -EINVAL, "revision" },
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                SdpNetwork n = {};
                const char *why;
                json_object *o;

                assert_int_equal(parse(bad[i].text, &n, &why, &o), bad[i].error);
                assert_non_null(why);
                assert_non_null(strstr(why, bad[i].in_message));
                json_object_put(o);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_none),
                cmocka_unit_test(test_allowlist),
                cmocka_unit_test(test_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
