/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the egress gateway's upstream route (src/egress/egress-route.c): the upstream
 * proxy's URL, the no_proxy list, and what a route and mode open do to a policy (its JSON, its
 * revision, matching).
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egress/egress-policy.h"

static void test_upstream_good(void **state) {
        static const struct {
                const char *in, *url, *host, *authorization;
                uint16_t port;
        } good[] = {
                { "http://proxy.example:3128", "http://proxy.example:3128", "proxy.example", NULL, 3128 },
                { "HTTP://Proxy.Example:3128/", "http://proxy.example:3128", "proxy.example", NULL, 3128 },
                { "http://127.0.0.1:8080", "http://127.0.0.1:8080", "127.0.0.1", NULL, 8080 },
                { "http://localhost:1", "http://localhost:1", "localhost", NULL, 1 },
                { "http://[::1]:3128", "http://[::1]:3128", "::1", NULL, 3128 },
                { "http://[0:0::1]:3128", "http://[::1]:3128", "::1", NULL, 3128 },
                /* "Aladdin:open sesame", RFC 7617's example, with the space percent-encoded. */
                { "http://Aladdin:open%20sesame@proxy:3128", "http://proxy:3128", "proxy",
                  "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", 3128 },
                { "http://user:@proxy:3128", "http://proxy:3128", "proxy", "Basic dXNlcjo=", 3128 },
        };

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                EgressUpstream u = {};
                const char *why = NULL;

                assert_int_equal(egress_upstream_parse(good[i].in, &u, &why), 0);
                assert_string_equal(u.url, good[i].url);
                assert_string_equal(u.host, good[i].host);
                assert_int_equal(u.port, good[i].port);
                if (good[i].authorization)
                        assert_string_equal(u.authorization, good[i].authorization);
                else
                        assert_null(u.authorization);
                egress_upstream_done(&u);
                assert_null(u.url);
        }
}

static void test_upstream_bad(void **state) {
        static const char *const bad[] = {
                "", "proxy:3128", "//proxy:3128", "https://proxy:3128", "socks5://proxy:1080", "ftp://proxy:21",
                "http://proxy", "http://proxy:", "http://proxy:0", "http://proxy:65536", "http://proxy:03128",
                "http://proxy:3128/path", "http://proxy:3128?q", "http://proxy:3128/#f", "http://proxy:3128/x y",
                "http://pro xy:3128", "http://pro_xy:3128", "http://-proxy:3128", "http://proxy-:3128",
                "http://a..b:3128", "http://2130706433:3128", "http://127.1:3128", "http://0x7f.0.0.1:3128",
                "http://[::1:3128", "http://[zz::1]:3128", "http://secret@proxy:3128", "http://:secret@proxy:3128",
                "http://u:s%zzecret@proxy:3128", "http://u:s%00@proxy:3128", "http://pr\\oxy:3128",
                "http://proxy:3128\r\nX: y", "http://bücher.example:3128",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                EgressUpstream u = {};
                const char *why = NULL;

                if (egress_upstream_parse(bad[i], &u, &why) != -EINVAL)
                        fail_msg("%s: accepted", bad[i]);
                assert_non_null(why);
                assert_null(strstr(why, "secret"));
                assert_null(u.url);
        }
}

static void test_no_proxy(void **state) {
        static const struct {
                const char *list, *host;
                uint16_t port;
                bool match;
        } cases[] = {
                { NULL, "a.example.org", 443, false },
                { "", "a.example.org", 443, false },
                { "*", "a.example.org", 443, true },
                { "example.org", "example.org", 443, true },
                { "example.org", "a.example.org", 443, true },
                { ".example.org", "a.b.example.org", 443, true },
                { ".example.org", "example.org", 443, true },
                { "EXAMPLE.org.", "a.example.org", 443, true },
                { "example.org", "badexample.org", 443, false },
                { "example.org", "example.org.evil.com", 443, false },
                { "other.org, example.org", "a.example.org", 443, true },
                { "other.org  example.org", "a.example.org", 443, true },
                { "other.org,,", "a.example.org", 443, false },
                { "example.org:443", "a.example.org", 443, true },
                { "example.org:443", "a.example.org", 80, false },
                { "example.org:0", "a.example.org", 443, false },
                { "10.0.0.0/8,127.0.0.1,::1", "a.example.org", 443, false },
                { "*.example.org", "a.example.org", 443, false },       /* curl has no wildcards but "*" */
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                if (egress_no_proxy_match(cases[i].list, cases[i].host, cases[i].port) != cases[i].match)
                        fail_msg("no_proxy \"%s\" vs %s:%u: expected %d", cases[i].list ?: "(null)", cases[i].host,
                                 cases[i].port, cases[i].match);
}

static EgressPolicy *policy(EgressMode mode, char *const *allow, const EgressRoute *route) {
        EgressPolicy *p = NULL;
        char *error = NULL;

        if (egress_policy_new_full(mode, allow, NULL, route, &p, &error) < 0)
                fail_msg("policy refused: %s", error ?: "?");
        return p;
}

static void test_policy_route(void **state) {
        char *allow[] = { (char *) "example.org", NULL };
        EgressPolicy *direct, *plain, *via, *via2, *auth, *auth2, *open, *back;
        json_object *o;
        char *error = NULL;

        direct = policy(EGRESS_MODE_ALLOWLIST, allow, NULL);
        plain = NULL;
        assert_int_equal(egress_policy_new(true, allow, NULL, &plain, NULL), 0);
        /* No route: the revision of before (the same as egress_policy_new()'s). */
        assert_string_equal(egress_policy_revision(direct), egress_policy_revision(plain));
        assert_null(egress_policy_upstream(direct));
        assert_false(egress_policy_via_upstream(direct, "example.org", 443));

        via = policy(EGRESS_MODE_ALLOWLIST, allow, &(EgressRoute) { .upstream = "http://proxy:3128",
                                                                   .no_proxy = "internal.example.org" });
        via2 = policy(EGRESS_MODE_ALLOWLIST, allow, &(EgressRoute) { .upstream = "http://proxy:3129",
                                                                    .no_proxy = "internal.example.org" });
        auth = policy(EGRESS_MODE_ALLOWLIST, allow, &(EgressRoute) { .upstream = "http://proxy:3128",
                                                                    .upstream_auth = "tag-1",
                                                                    .no_proxy = "internal.example.org" });
        auth2 = policy(EGRESS_MODE_ALLOWLIST, allow, &(EgressRoute) { .upstream = "http://proxy:3128",
                                                                     .upstream_auth = "tag-2",
                                                                     .no_proxy = "internal.example.org" });
        /* Every upstream and every credential: another revision, so another gateway instance. */
        assert_string_not_equal(egress_policy_revision(direct), egress_policy_revision(via));
        assert_string_not_equal(egress_policy_revision(via), egress_policy_revision(via2));
        assert_string_not_equal(egress_policy_revision(via), egress_policy_revision(auth));
        assert_string_not_equal(egress_policy_revision(auth), egress_policy_revision(auth2));
        assert_true(egress_policy_via_upstream(via, "example.org", 443));
        assert_false(egress_policy_via_upstream(via, "a.internal.example.org", 443));
        assert_false(egress_policy_upstream_auth(via));
        assert_true(egress_policy_upstream_auth(auth));

        /* The JSON (the gateway's snapshot) round-trips to the same revision. */
        o = egress_policy_to_json(auth);
        assert_non_null(o);
        assert_string_equal(json_object_get_string(json_object_object_get(o, "upstream")), "http://proxy:3128");
        assert_string_equal(json_object_get_string(json_object_object_get(o, "upstreamAuth")), "tag-1");
        assert_int_equal(egress_policy_from_json(o, &back, &error), 0);
        assert_string_equal(egress_policy_revision(back), egress_policy_revision(auth));
        json_object_put(o);
        egress_policy_free(back);

        /* Mode open: any name matches, and addresses are still classified. */
        open = policy(EGRESS_MODE_OPEN, NULL, NULL);
        assert_true(egress_policy_is_open(open));
        assert_true(egress_policy_is_allowlist(open));
        assert_int_equal(egress_policy_match(open, "anything.example.net", 8443, NULL), 1);
        assert_int_equal(egress_policy_match(direct, "anything.example.net", 8443, NULL), 0);
        {
                struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
                struct sockaddr_in pub = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x5db8d822) };

                assert_int_equal(egress_address_allowed(open, (struct sockaddr *) &sa, sizeof(sa), NULL), 0);
                sa.sin_addr.s_addr = htonl(0xa9fea9fe);     /* 169.254.169.254 */
                assert_int_equal(egress_address_allowed(open, (struct sockaddr *) &sa, sizeof(sa), NULL), 0);
                sa.sin_addr.s_addr = htonl(0x0a000001);
                assert_int_equal(egress_address_allowed(open, (struct sockaddr *) &sa, sizeof(sa), NULL), 0);
                assert_int_equal(egress_address_allowed(open, (struct sockaddr *) &pub, sizeof(pub), NULL), 1);
        }
        o = egress_policy_to_json(open);
        assert_string_equal(json_object_get_string(json_object_object_get(o, "mode")), "open");
        assert_int_equal(egress_policy_from_json(o, &back, &error), 0);
        assert_string_equal(egress_policy_revision(back), egress_policy_revision(open));
        assert_string_not_equal(egress_policy_revision(open), egress_policy_revision(direct));
        json_object_put(o);
        egress_policy_free(back);

        egress_policy_free(direct);
        egress_policy_free(plain);
        egress_policy_free(via);
        egress_policy_free(via2);
        egress_policy_free(auth);
        egress_policy_free(auth2);
        egress_policy_free(open);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_upstream_good),
                cmocka_unit_test(test_upstream_bad),
                cmocka_unit_test(test_no_proxy),
                cmocka_unit_test(test_policy_route),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
