/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the ScienceDiscovery dialect's increment 2, its pure parts: the per-request
 * network policy (src/api/sd-network.h: their rule that networkAccess counts only when its mode
 * is the policy's, and the fields' checks) and the names of environments, revisions and packages
 * (src/api/sd-env.h).
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/sd-env.h"
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

static void test_open(void **state) {
        SdpNetwork n;
        const char *why;
        json_object *o;

        /* Open: a network, any destination; a list sent along is ignored, private access kept. */
        assert_int_equal(parse("{\"networkPolicy\":\"open\",\"networkAccess\":{\"mode\":\"open\","
                               "\"allowedDomains\":[\"a.org\"],\"allowPrivateNetwork\":true,\"revision\":\"o-1\"}}",
                               &n, &why, &o), 0);
        assert_true(n.allowlist);
        assert_true(n.open);
        assert_true(n.private_network);
        assert_null(n.domains);
        assert_string_equal(n.revision, "o-1");
        json_object_put(o);

        /* Open access under another policy: no network. */
        assert_int_equal(parse("{\"networkPolicy\":\"domain-allowlist\",\"networkAccess\":{\"mode\":\"open\"}}",
                               &n, &why, &o), 0);
        assert_false(n.allowlist);
        assert_false(n.open);
        json_object_put(o);
}

static int proxy(const char *text, SdpNetwork *n, const char **why) {
        json_object *o = text ? json_tokener_parse(text) : NULL;
        int r;

        assert_true(!text || o || strcmp(text, "null") == 0);
        *why = NULL;
        r = sdp_proxy_parse(o, n, why);
        json_object_put(o);
        return r;
}

static void test_proxy(void **state) {
        static const char *const bad[] = {
                "[]", "{}", "{\"mode\":7}", "{\"mode\":\"socks\"}", "{\"mode\":\"url\"}",
                "{\"mode\":\"url\",\"url\":5}", "{\"mode\":\"url\",\"url\":\"\"}",
                "{\"mode\":\"url\",\"url\":\"https://proxy:3128\"}",
                "{\"mode\":\"url\",\"url\":\"http://proxy\"}",
                "{\"mode\":\"url\",\"url\":\"http://proxy:3128/path\"}",
                "{\"mode\":\"url\",\"url\":\"http://:secret@proxy:3128\"}",
                "{\"mode\":\"url\",\"url\":\"socks5://proxy:1080\"}",
        };
        SdpNetwork n = {};
        const char *why;

        assert_int_equal(proxy(NULL, &n, &why), 0);
        assert_int_equal(n.proxy, SDP_PROXY_DIRECT);
        assert_int_equal(proxy("null", &n, &why), 0);
        assert_int_equal(n.proxy, SDP_PROXY_DIRECT);
        assert_int_equal(proxy("{\"mode\":\"direct\"}", &n, &why), 0);
        assert_int_equal(n.proxy, SDP_PROXY_DIRECT);
        assert_int_equal(proxy("{\"mode\":\"environment\"}", &n, &why), 0);
        assert_int_equal(n.proxy, SDP_PROXY_ENVIRONMENT);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(proxy(bad[i], &n, &why), -EINVAL);
                assert_non_null(why);
                /* The reason never quotes the URL (it may hold credentials). */
                assert_null(strstr(why, "secret"));
        }
}

static const char *fake_env_values[8];

static const char *fake_getenv(const char *name) {
        static const char *const names[] = { "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY",
                                             "no_proxy", "NO_PROXY" };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(names[i], name) == 0)
                        return fake_env_values[i];
        return NULL;
}

static void test_proxy_environment(void **state) {
        const char *url, *no_proxy, *why = NULL;

        memset(fake_env_values, 0, sizeof(fake_env_values));
        assert_int_equal(sdp_proxy_from_environment(fake_getenv, &url, &no_proxy, &why), 0);
        assert_null(url);
        assert_null(no_proxy);

        /* https_proxy first, then HTTPS_PROXY, http_proxy, HTTP_PROXY; empty values do not count. */
        fake_env_values[3] = "http://upper-http:8080";
        fake_env_values[2] = "http://lower-http:8080";
        assert_int_equal(sdp_proxy_from_environment(fake_getenv, &url, &no_proxy, &why), 0);
        assert_string_equal(url, "http://lower-http:8080");
        fake_env_values[0] = "";
        fake_env_values[1] = "http://upper-https:3128";
        fake_env_values[5] = "internal.example";
        assert_int_equal(sdp_proxy_from_environment(fake_getenv, &url, &no_proxy, &why), 0);
        assert_string_equal(url, "http://upper-https:3128");
        assert_string_equal(no_proxy, "internal.example");
        fake_env_values[4] = "lower.example";
        assert_int_equal(sdp_proxy_from_environment(fake_getenv, &url, &no_proxy, &why), 0);
        assert_string_equal(no_proxy, "lower.example");

        fake_env_values[4] = "a.example\nb.example";
        assert_int_equal(sdp_proxy_from_environment(fake_getenv, &url, &no_proxy, &why), -EINVAL);
        assert_non_null(why);
        fake_env_values[4] = NULL;

        fake_env_values[0] = "https://tls-proxy:443";
        assert_int_equal(sdp_proxy_from_environment(fake_getenv, &url, &no_proxy, &why), -EINVAL);
        assert_non_null(why);
}

static void test_refused(void **state) {
        static const struct {
                const char *text;
                int error;
                const char *in_message;
        } bad[] = {
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

static void test_env_ids(void **state) {
        char id[SDP_ENV_ID_MAX], name[SDP_ENV_ID_MAX], rid[SDP_ENV_REVISION_ID_MAX];
        unsigned n = 0;

        sdp_env_id("python-base", id);
        assert_string_equal(id, "starter-python");
        sdp_env_id("r-base", id);
        assert_string_equal(id, "starter-r");
        sdp_env_id("sci-env", id);
        assert_string_equal(id, "sci-env");

        assert_true(sdp_env_name("starter-python", name));
        assert_string_equal(name, "python-base");
        assert_true(sdp_env_name("sci-env", name));
        assert_string_equal(name, "sci-env");
        /* One name each way: a base is only its starter id; no other starter-*, no bad names. */
        assert_false(sdp_env_name("python-base", name));
        assert_false(sdp_env_name("r-base", name));
        assert_false(sdp_env_name("starter-julia", name));
        assert_false(sdp_env_name("../x", name));
        assert_false(sdp_env_name("Sci", name));
        assert_false(sdp_env_name("setup", name));
        assert_false(sdp_env_name("", name));

        sdp_env_revision_id("python-base", 3, rid);
        assert_string_equal(rid, "starter-python@3");
        assert_true(sdp_env_revision_parse("starter-python@3", name, &n));
        assert_string_equal(name, "python-base");
        assert_int_equal(n, 3);
        assert_true(sdp_env_revision_parse("sci-env@12", name, &n));
        assert_string_equal(name, "sci-env");
        assert_int_equal(n, 12);
        static const char *const bad[] = { "rev-1", "sci-env@", "sci-env@0", "sci-env@01", "sci-env@1x", "@1",
                                           "python-base@1", "sci-env@-1", "sci-env@99999999999", NULL };
        for (const char *const *b = bad; *b; b++)
                assert_false(sdp_env_revision_parse(*b, name, &n));
}

static void test_spec_names(void **state) {
        char d[32];

        assert_true(sdp_env_spec_name("srtest_beta", false, d, sizeof(d)));
        assert_string_equal(d, "srtest-beta");
        assert_true(sdp_env_spec_name("Pandas>=2,<3", false, d, sizeof(d)));
        assert_string_equal(d, "pandas");
        assert_true(sdp_env_spec_name("  scipy[extra] ~= 1.10", false, d, sizeof(d)));
        assert_string_equal(d, "scipy");
        assert_true(sdp_env_spec_name("zope.interface==6", false, d, sizeof(d)));
        assert_string_equal(d, "zope-interface");
        assert_true(sdp_env_spec_name("a__b--c", false, d, sizeof(d)));
        assert_string_equal(d, "a-b-c");
        assert_true(sdp_env_spec_name("srtest_gamma-0.1-py3-none-any.whl", true, d, sizeof(d)));
        assert_string_equal(d, "srtest-gamma");
        /* Only a name is read here: options are refused by our own PUT (package_spec_invalid). */
        assert_true(sdp_env_spec_name("--index-url=x", false, d, sizeof(d)));
        assert_string_equal(d, "index-url");
        assert_false(sdp_env_spec_name(">=1", false, d, sizeof(d)));
        assert_false(sdp_env_spec_name("", false, d, sizeof(d)));
        assert_false(sdp_env_spec_name("averyveryverylongdistributionname1234", false, d, sizeof(d)));
}

static void test_slug(void **state) {
        char n[SDP_ENV_ID_MAX];

        sdp_env_slug("Sci Env", n);
        assert_string_equal(n, "sci-env");
        sdp_env_slug("  Hello, World!  ", n);
        assert_string_equal(n, "hello-world");
        sdp_env_slug("python-base", n);
        assert_string_equal(n, "env-python-base");
        sdp_env_slug("Starter R", n);
        assert_string_equal(n, "env-starter-r");
        sdp_env_slug("setup", n);
        assert_string_equal(n, "env-setup");
        sdp_env_slug("日本語", n);
        assert_string_equal(n, "env");
        sdp_env_slug("", n);
        assert_string_equal(n, "env");
        sdp_env_slug("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", n);
        assert_int_equal(strlen(n), 48);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_none),
                cmocka_unit_test(test_allowlist),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_open),
                cmocka_unit_test(test_proxy),
                cmocka_unit_test(test_proxy_environment),
                cmocka_unit_test(test_env_ids),
                cmocka_unit_test(test_spec_names),
                cmocka_unit_test(test_slug),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
