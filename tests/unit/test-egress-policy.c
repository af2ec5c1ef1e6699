/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/egress/egress-policy.h: the tables of SECURITY.md §3 and §4, case by case. */

#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egress/egress-policy.h"
#include "util/macro.h"

static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);

        assert_non_null(s);
        memset(s, c, n);
        s[n] = '\0';
        return s;
}

/* A name of exactly @len octets: labels of up to 63 'a' joined by dots, ending in ".example". */
static char *name_of_length(size_t len) {
        const char *tail = ".example";
        size_t tl = strlen(tail), body;
        char *s;

        assert_true(len > tl + 1);
        body = len - tl;
        s = malloc(len + 1);
        assert_non_null(s);
        memset(s, 'a', body);
        for (size_t i = 63; i < body; i += 64)
                s[i] = '.';
        if (s[body - 1] == '.') {
                /* No empty label before the tail: the dot moves one to the left. */
                s[body - 2] = '.';
                s[body - 1] = 'a';
        }
        memcpy(s + body, tail, tl + 1);
        assert_int_equal(strlen(s), len);
        return s;
}

static EgressPolicy *policy(bool allowlist, const char *const *allow, const char *const *mirrors) {
        EgressPolicy *p = NULL;
        char *error = NULL;
        int r;

        r = egress_policy_new(allowlist, (char *const *) allow, (char *const *) mirrors, &p, &error);
        if (r < 0)
                fail_msg("egress_policy_new: %d %s", r, error ?: "");
        assert_null(error);
        return p;
}

/* ---------------------------------------------------------------------------------------------
 * Allowlist entries */

static void test_rule_parse_valid(void **state) {
        static const struct {
                const char *in, *canonical;
                bool wildcard;
                uint16_t port;
        } cases[] = {
                { "example.org", "example.org", false, 0 },
                { "EXAMPLE.ORG.", "example.org", false, 0 },
                { "Example.Org", "example.org", false, 0 },
                { "*.example.org", "*.example.org", true, 0 },
                { "*.EXAMPLE.org.", "*.example.org", true, 0 },
                { "example.org:443", "example.org:443", false, 443 },
                { "*.example.org:443", "*.example.org:443", true, 443 },
                { "*.Example.Org.:443", "*.example.org:443", true, 443 },
                { "example.org:1", "example.org:1", false, 1 },
                { "example.org:65535", "example.org:65535", false, 65535 },
                { "3com.com", "3com.com", false, 0 },
                { "a-b.example.org", "a-b.example.org", false, 0 },
                { "ab--cd.example.org", "ab--cd.example.org", false, 0 },
                { "a.b.c.d.example.org", "a.b.c.d.example.org", false, 0 },
                { "1.2.3.4.nip.io", "1.2.3.4.nip.io", false, 0 },   /* a name; its addresses are checked */
                { "xn--bcher-kva.example", "xn--bcher-kva.example", false, 0 },
                { "XN--BCHER-KVA.example", "xn--bcher-kva.example", false, 0 },
                { "xn--exmple-cua.org", "xn--exmple-cua.org", false, 0 },
                /* U-labels become A-labels (UTS-46 non-transitional, NFC). */
                { "bücher.example", "xn--bcher-kva.example", false, 0 },
                { "BÜCHER.example", "xn--bcher-kva.example", false, 0 },
                { "bu\xcc\x88" "cher.example", "xn--bcher-kva.example", false, 0 },     /* NFD input */
                { "*.bücher.example:443", "*.xn--bcher-kva.example:443", true, 443 },
                { "faß.de", "xn--fa-hia.de", false, 0 },                                /* non-transitional */
                { "\xef\xbd\x85\xef\xbd\x98\xef\xbd\x81\xef\xbd\x8d\xef\xbd\x90\xef\xbd\x8c\xef\xbd\x85.org",
                  "example.org", false, 0 },                                             /* full-width */
                { "bücher\xe3\x80\x82" "example", "xn--bcher-kva.example", false, 0 },  /* ideographic stop */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                EgressRule rule = { .pattern = (char *) 0x1 };
                char *error = NULL, *s;
                int r;

                r = egress_rule_parse(cases[i].in, &rule, &error);
                if (r < 0)
                        fail_msg("'%s': %d %s", cases[i].in, r, error ?: "");
                s = egress_rule_to_string(&rule);
                assert_non_null(s);
                if (!streq(s, cases[i].canonical))
                        fail_msg("'%s' → '%s', expected '%s'", cases[i].in, s, cases[i].canonical);
                assert_int_equal(rule.wildcard, cases[i].wildcard);
                assert_int_equal(rule.port, cases[i].port);
                assert_null(strchr(rule.pattern, '*'));

                /* The canonical form is a fixed point. */
                {
                        EgressRule again;
                        char *s2;

                        assert_int_equal(egress_rule_parse(s, &again, NULL), 0);
                        s2 = egress_rule_to_string(&again);
                        assert_string_equal(s2, s);
                        free(s2);
                        egress_rule_done(&again);
                }
                free(s);
                egress_rule_done(&rule);
                assert_null(rule.pattern);
        }
}

static void test_rule_parse_invalid(void **state) {
        static const struct {
                const char *in, *why;   /* a substring of the reason */
        } cases[] = {
                { "", "empty" },
                { "example", "two labels" },
                { "localhost", "two labels" },
                { "example.", "two labels" },
                { "*.org", "wildcard needs two labels" },
                { "*", "'*'" },
                { "*.", "empty" },
                { "**.example.org", "'*'" },
                { "*example.org", "'*'" },
                { "a*.example.org", "'*'" },
                { "a.*.example.org", "'*'" },
                { "example.*", "'*'" },
                { "*.*.example.org", "'*'" },
                /* IP literals, however written. */
                { "2130706433", "IP literal" },
                { "0x7f000001", "IP literal" },
                { "0X7F000001", "IP literal" },
                { "0177.0.0.1", "IP literal" },
                { "127.1", "IP literal" },
                { "127.000.000.001", "IP literal" },
                { "127.0.0.1", "IP literal" },
                { "0.0.0.0", "IP literal" },
                { "169.254.169.254", "IP literal" },
                { "1.2.3.0x4", "IP literal" },
                { "0x7f.0x0.0x0.0x1", "IP literal" },
                { "example.123", "IP literal" },
                { "example.0x", "IP literal" },
                { "example.0xff", "IP literal" },
                { "\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97.0.0.1", "IP literal" },        /* full-width 127 */
                { "[::1]", "IP literal" },
                { "[::ffff:127.0.0.1]", "IP literal" },
                { "[fe80::1%25eth0]", "IP literal" },
                { "::1", "IP literal" },
                /* Labels and characters. */
                { "a_b.example.org", "'_'" },
                { "_dmarc.example.org", "'_'" },
                { "a..example.org", "empty label" },
                { ".example.org", "empty label" },
                { "example.org..", "empty label" },
                { "-a.example.org", "'-'" },
                { "a-.example.org", "'-'" },
                { "example.org-", "'-'" },
                { "exa%6dple.org", "percent" },
                { "example.org%00.evil", "percent" },
                { "example.org\\@evil", "'\\'" },
                { "user@example.org", "'@'" },
                { "example .org", "spaces" },
                { "example.org\t", "control" },
                { "exam\x01ple.org", "control" },
                { "exam\x7fple.org", "control" },
                { "a/b.example.org", "invalid character" },
                { "example.org/", "invalid character" },
                { "xn--zz.example", "A-label" },
                { "xn--ab.example", "A-label" },
                { "xn--.example", "'-'" },
                { "ex\xef\xbc\x9a" "ample.org", "IP literal" },  /* full-width colon becomes ':' */
                { "\xff\xfe.example", "A-labels" },              /* invalid UTF-8 */
                /* Ports. */
                { "example.org:0", "port" },
                { "example.org:65536", "port" },
                { "example.org:-1", "port" },
                { "example.org:+443", "port" },
                { "example.org:0443", "port" },
                { "example.org:443:80", "port" },
                { "example.org:", "empty port" },
                { "example.org:http", "port" },
                { "example.org: 443", "spaces" },
                { "example.org:443 ", "spaces" },
                { ":443", "empty" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                EgressRule rule = {};
                char *error = NULL;
                int r;

                r = egress_rule_parse(cases[i].in, &rule, &error);
                if (r != -EINVAL)
                        fail_msg("'%s' → %d, expected -EINVAL", cases[i].in, r);
                assert_null(rule.pattern);      /* not written on failure */
                assert_non_null(error);
                if (!strstr(error, cases[i].why))
                        fail_msg("'%s' → \"%s\", expected a reason with \"%s\"", cases[i].in, error, cases[i].why);
                free(error);

                /* ret_error is optional. */
                assert_int_equal(egress_rule_parse(cases[i].in, &rule, NULL), -EINVAL);
        }
}

static void test_rule_lengths(void **state) {
        EgressRule rule;
        char *error = NULL, *label63, *label64, *s;

        /* Labels of 63 octets are fine, 64 are not. */
        label63 = repeat('a', 63);
        label64 = repeat('a', 64);
        assert_non_null(s = malloc(100));
        snprintf(s, 100, "%s.example.org", label63);
        assert_int_equal(egress_rule_parse(s, &rule, NULL), 0);
        egress_rule_done(&rule);
        snprintf(s, 100, "%s.example.org", label64);
        assert_int_equal(egress_rule_parse(s, &rule, &error), -EINVAL);
        assert_non_null(strstr(error, "63"));
        free(error);
        free(s);
        free(label63);
        free(label64);

        /* Names of 253 octets are fine (254 with the trailing dot), 254 are not. */
        s = name_of_length(253);
        assert_int_equal(egress_rule_parse(s, &rule, NULL), 0);
        assert_int_equal(strlen(rule.pattern), 253);
        egress_rule_done(&rule);
        free(s);

        {
                char *n253 = name_of_length(253), *dotted;

                assert_non_null(dotted = malloc(256));
                snprintf(dotted, 256, "%s.", n253);
                assert_int_equal(egress_rule_parse(dotted, &rule, NULL), 0);
                assert_int_equal(strlen(rule.pattern), 253);
                egress_rule_done(&rule);
                snprintf(dotted, 256, "%s..", n253);
                assert_int_equal(egress_rule_parse(dotted, &rule, NULL), -EINVAL);
                free(dotted);
                free(n253);
        }

        s = name_of_length(254);
        assert_int_equal(egress_rule_parse(s, &rule, &error), -EINVAL);
        assert_non_null(strstr(error, "253"));
        free(error);
        free(s);

        /* A wildcard counts "*." against the 253: what it matches is at least that long. */
        {
                char *n251 = name_of_length(251), *n252 = name_of_length(252), *w;

                assert_non_null(w = malloc(300));
                snprintf(w, 300, "*.%s", n251);
                assert_int_equal(egress_rule_parse(w, &rule, NULL), 0);
                egress_rule_done(&rule);
                snprintf(w, 300, "*.%s", n252);
                assert_int_equal(egress_rule_parse(w, &rule, NULL), -EINVAL);
                free(w);
                free(n251);
                free(n252);
        }

        /* Over-long input is refused before any work. */
        s = repeat('a', EGRESS_ENTRY_INPUT_MAX + 1);
        assert_int_equal(egress_rule_parse(s, &rule, &error), -EINVAL);
        assert_non_null(strstr(error, "too long"));
        free(error);
        free(s);
}

/* ---------------------------------------------------------------------------------------------
 * Host canonicalisation and matching */

static void test_host_canonicalize(void **state) {
        static const struct {
                const char *in, *out;
        } good[] = {
                { "example.org", "example.org" },
                { "EXAMPLE.ORG.", "example.org" },
                { "LOGIN.INTERNAL.EXAMPLE.COM.", "login.internal.example.com" },
                { "internal.example.com.evil", "internal.example.com.evil" },
                { "xn--bcher-kva.example", "xn--bcher-kva.example" },
                { "1.2.3.4.nip.io", "1.2.3.4.nip.io" },
        };
        static const struct {
                const char *in, *why;
        } bad[] = {
                { "", "empty" },
                { ".", "empty" },
                { "..", "empty label" },
                { "example.org..", "empty label" },
                { "a..example.org", "empty label" },
                { "localhost", "two labels" },
                { "metadata", "two labels" },
                { "2130706433", "IP literal" },
                { "0x7f000001", "IP literal" },
                { "0177.0.0.1", "IP literal" },
                { "127.1", "IP literal" },
                { "127.000.000.001", "IP literal" },
                { "127.0.0.1", "IP literal" },
                { "127.0.0.1.", "IP literal" },
                { "0.0.0.0", "IP literal" },
                { "[::]", "IP literal" },
                { "::", "IP literal" },
                { "[::ffff:127.0.0.1]", "IP literal" },
                { "[::ffff:7f00:1]", "IP literal" },
                { "[0:0:0:0:0:ffff:a9fe:a9fe]", "IP literal" },
                { "fe80::1%25eth0", "IP literal" },
                { "[fe80::1%25eth0]", "IP literal" },
                { "exa%6dple.org", "percent" },
                { "example.org%00.evil", "percent" },
                { "example.org\\@evil", "'\\'" },
                { "user:pw@evil.com", "IP literal" },   /* ':' comes first */
                { "example.org@169.254.169.254", "'@'" },
                { "a_b.example.org", "'_'" },
                { "*.example.org", "'*'" },
                { "exam ple.org", "spaces" },
                { "example.org\r", "control" },
                { "example.org\n", "control" },
                { "bücher.example", "A-label" },
                { "-a.example.org", "'-'" },
                { "a-.example.org", "'-'" },
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                char *h = NULL;
                const char *why = NULL;

                assert_int_equal(egress_host_canonicalize_full(good[i].in, &h, &why), 0);
                assert_string_equal(h, good[i].out);
                free(h);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *h = NULL;
                const char *why = NULL;
                int r;

                r = egress_host_canonicalize_full(bad[i].in, &h, &why);
                if (r != -EINVAL)
                        fail_msg("'%s' → %d, expected -EINVAL", bad[i].in, r);
                assert_null(h);
                assert_non_null(why);
                if (!strstr(why, bad[i].why))
                        fail_msg("'%s' → \"%s\", expected a reason with \"%s\"", bad[i].in, why, bad[i].why);
                assert_int_equal(egress_host_canonicalize_full(bad[i].in, &h, NULL), -EINVAL);
        }
        {
                char *h = NULL, *h2 = NULL;

                assert_int_equal(egress_host_canonicalize_full(NULL, &h, NULL), -EINVAL);
                assert_int_equal(egress_host_canonicalize(NULL, &h), -EINVAL);
                assert_int_equal(egress_host_canonicalize("a_b.example", &h), -EINVAL);
                assert_null(h);
                /* The short form, and the canonical form is a fixed point. */
                assert_int_equal(egress_host_canonicalize("A.Example.ORG.", &h), 0);
                assert_string_equal(h, "a.example.org");
                assert_int_equal(egress_host_canonicalize(h, &h2), 0);
                assert_string_equal(h2, h);
                free(h);
                free(h2);
        }
}

static void test_host_lengths(void **state) {
        char *h = NULL, *s, *l63, *l64, buf[128];
        const char *why;

        l63 = repeat('a', 63);
        l64 = repeat('b', 64);
        snprintf(buf, sizeof(buf), "%s.example.org", l63);
        assert_int_equal(egress_host_canonicalize_full(buf, &h, NULL), 0);
        free(h);
        snprintf(buf, sizeof(buf), "%s.example.org", l64);
        assert_int_equal(egress_host_canonicalize_full(buf, &h, &why), -EINVAL);
        assert_non_null(strstr(why, "63"));
        free(l63);
        free(l64);

        s = name_of_length(253);
        assert_int_equal(egress_host_canonicalize_full(s, &h, NULL), 0);
        free(h);
        {
                char d[300];

                snprintf(d, sizeof(d), "%s.", s);
                assert_int_equal(egress_host_canonicalize_full(d, &h, NULL), 0);
                assert_int_equal(strlen(h), 253);
                free(h);
                snprintf(d, sizeof(d), "%s..", s);
                assert_int_equal(egress_host_canonicalize_full(d, &h, NULL), -EINVAL);
        }
        free(s);

        s = name_of_length(254);
        assert_int_equal(egress_host_canonicalize_full(s, &h, &why), -EINVAL);
        assert_non_null(strstr(why, "253"));
        free(s);

        s = repeat('a', 100000);
        assert_int_equal(egress_host_canonicalize_full(s, &h, &why), -EINVAL);
        free(s);
}

/* The host as the gateway sees it: canonicalised first, then matched. */
static int check_host(const EgressPolicy *p, const char *host, uint16_t port, const char **why) {
        char *h = NULL;
        int r;

        r = egress_host_canonicalize_full(host, &h, why);
        if (r < 0)
                return r;
        r = egress_policy_match(p, h, port, why);
        free(h);
        return r;
}

static void test_match_table(void **state) {
        static const char *const allow[] = {
                "example.org", "*.example.net", "*.internal.example.com", "pinned.example:443",
                "*.wpinned.example:8443", NULL,
        };
        static const struct {
                const char *host;
                uint16_t port;
                int expected;           /* 1, 0, or -EINVAL from canonicalisation */
                const char *why;
        } cases[] = {
                /* Exact entries: the name only, in any case, with one trailing dot. */
                { "example.org", 443, 1, "allowed by example.org" },
                { "EXAMPLE.ORG.", 80, 1, "allowed by example.org" },
                { "Example.Org", 1, 1, "allowed by example.org" },
                { "a.example.org", 443, 0, "not in the allowlist" },
                { "example.org.evil.com", 443, 0, "not in the allowlist" },
                { "evilexample.org", 443, 0, "not in the allowlist" },
                { "example.org-evil.com", 443, 0, "not in the allowlist" },
                { "xn--exmple-cua.org", 443, 0, "not in the allowlist" },
                { "example.or", 443, 0, "not in the allowlist" },
                { "xample.org", 443, 0, "not in the allowlist" },
                { "example.org..", 443, -EINVAL, "empty label" },
                { "exa%6dple.org", 443, -EINVAL, "percent" },
                { "example.org%00.evil", 443, -EINVAL, "percent" },
                { "example.org\\@evil", 443, -EINVAL, "'\\'" },
                /* Wildcards: sub-domains at any depth, never the apex, always at a label boundary. */
                { "a.example.net", 443, 1, "allowed by *.example.net" },
                { "a.b.example.net", 443, 1, "allowed by *.example.net" },
                { "A.B.C.EXAMPLE.NET.", 443, 1, "allowed by *.example.net" },
                { "example.net", 443, 0, "not in the allowlist" },
                { "badexample.net", 443, 0, "not in the allowlist" },
                { "a.badexample.net", 443, 0, "not in the allowlist" },
                { "example.net.evil.com", 443, 0, "not in the allowlist" },
                { "a.example.net.evil.com", 443, 0, "not in the allowlist" },
                { "a.example.netx", 443, 0, "not in the allowlist" },
                { "aexample.net", 443, 0, "not in the allowlist" },
                /* smokescreen's case. */
                { "LOGIN.INTERNAL.EXAMPLE.COM.", 443, 1, "allowed by *.internal.example.com" },
                { "internal.example.com.evil", 443, 0, "not in the allowlist" },
                { "internal.example.com", 443, 0, "not in the allowlist" },
                /* Port pins. */
                { "pinned.example", 443, 1, "allowed by pinned.example:443" },
                { "pinned.example", 80, 0, "port not allowed by pinned.example:443" },
                { "pinned.example", 8443, 0, "port not allowed by pinned.example:443" },
                { "a.pinned.example", 443, 0, "not in the allowlist" },
                { "a.wpinned.example", 8443, 1, "allowed by *.wpinned.example:8443" },
                { "a.wpinned.example", 443, 0, "port not allowed by *.wpinned.example:8443" },
                { "wpinned.example", 8443, 0, "not in the allowlist" },
                /* IP literals never reach matching. */
                { "127.0.0.1", 443, -EINVAL, "IP literal" },
                { "2130706433", 443, -EINVAL, "IP literal" },
        };
        EgressPolicy *p = policy(true, allow, NULL);

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;
                int r;

                r = check_host(p, cases[i].host, cases[i].port, &why);
                if (r != cases[i].expected)
                        fail_msg("'%s' port %u → %d (%s), expected %d", cases[i].host, cases[i].port, r,
                                 why ?: "", cases[i].expected);
                assert_non_null(why);
                if (!strstr(why, cases[i].why))
                        fail_msg("'%s' port %u → \"%s\", expected \"%s\"", cases[i].host, cases[i].port, why,
                                 cases[i].why);
        }

        /* Hosts that are not canonical match nothing: fail closed. */
        assert_int_equal(egress_policy_match(p, "EXAMPLE.ORG", 443, NULL), 0);
        assert_int_equal(egress_policy_match(p, "example.org.", 443, NULL), 0);
        assert_int_equal(egress_policy_match(p, "", 443, NULL), -EINVAL);
        assert_int_equal(egress_policy_match(p, NULL, 443, NULL), -EINVAL);
        assert_int_equal(egress_policy_match(p, "example.org", 0, NULL), -EINVAL);
        egress_policy_free(p);
}

static void test_match_pins_combine(void **state) {
        static const char *const pinned_and_open[] = { "example.org:443", "example.org", NULL };
        static const char *const two_pins[] = { "example.org:443", "example.org:8443", NULL };
        const char *why;
        EgressPolicy *p;

        /* An unpinned entry for the same name allows every port. */
        p = policy(true, pinned_and_open, NULL);
        assert_int_equal(egress_policy_match(p, "example.org", 80, &why), 1);
        assert_string_equal(why, "allowed by example.org");
        assert_int_equal(egress_policy_match(p, "example.org", 443, &why), 1);
        egress_policy_free(p);

        p = policy(true, two_pins, NULL);
        assert_int_equal(egress_policy_match(p, "example.org", 443, &why), 1);
        assert_int_equal(egress_policy_match(p, "example.org", 8443, &why), 1);
        assert_string_equal(why, "allowed by example.org:8443");
        assert_int_equal(egress_policy_match(p, "example.org", 80, &why), 0);
        assert_string_equal(why, "port not allowed by example.org:443");
        egress_policy_free(p);

        /* An empty allowlist denies everything. */
        p = policy(true, NULL, NULL);
        assert_int_equal(egress_policy_match(p, "example.org", 443, &why), 0);
        assert_string_equal(why, "not in the allowlist");
        egress_policy_free(p);
}

static void test_mode_none(void **state) {
        static const char *const allow[] = { "example.org", NULL };
        static const char *const mirrors[] = { "127.0.0.0/8", NULL };
        struct sockaddr_in in = { .sin_family = AF_INET };
        const char *why;
        EgressPolicy *p;

        p = policy(false, allow, mirrors);
        assert_false(egress_policy_is_allowlist(p));
        assert_int_equal(egress_policy_match(p, "example.org", 443, &why), 0);
        assert_string_equal(why, "network policy mode is none");
        assert_int_equal(inet_pton(AF_INET, "8.8.8.8", &in.sin_addr), 1);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in, sizeof(in), &why), 0);
        assert_string_equal(why, "network policy mode is none");
        assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &in.sin_addr), 1);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in, sizeof(in), &why), 0);
        egress_policy_free(p);
}

/* ---------------------------------------------------------------------------------------------
 * Addresses */

typedef struct AddressCase {
        const char *addr;
        int expected;
        const char *why;
} AddressCase;

static int check_address(const EgressPolicy *p, const char *addr, const char **why) {
        if (strchr(addr, ':')) {
                struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };

                if (inet_pton(AF_INET6, addr, &in6.sin6_addr) != 1)
                        fail_msg("bad test address %s", addr);
                return egress_address_allowed(p, (struct sockaddr *) &in6, sizeof(in6), why);
        } else {
                struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(443) };

                if (inet_pton(AF_INET, addr, &in.sin_addr) != 1)
                        fail_msg("bad test address %s", addr);
                return egress_address_allowed(p, (struct sockaddr *) &in, sizeof(in), why);
        }
}

static void run_address_cases(const EgressPolicy *p, const AddressCase *cases, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const char *why = NULL;
                int r;

                r = check_address(p, cases[i].addr, &why);
                if (r != cases[i].expected)
                        fail_msg("%s → %d (%s), expected %d", cases[i].addr, r, why ?: "", cases[i].expected);
                assert_non_null(why);
                if (!strstr(why, cases[i].why))
                        fail_msg("%s → \"%s\", expected \"%s\"", cases[i].addr, why, cases[i].why);
        }
}

#define G "global unicast"

/* Each range of SECURITY.md §3: the addresses just outside, the first and the last inside. */
static const AddressCase ipv4_cases[] = {
        { "0.0.0.0", 0, "0.0.0.0/8" },
        { "0.255.255.255", 0, "0.0.0.0/8" },
        { "1.0.0.0", 1, G },
        { "1.1.1.1", 1, G },
        { "8.8.8.8", 1, G },
        { "9.255.255.255", 1, G },
        { "10.0.0.0", 0, "10.0.0.0/8" },
        { "10.0.0.1", 0, "private" },
        { "10.255.255.255", 0, "10.0.0.0/8" },
        { "11.0.0.0", 1, G },
        { "100.63.255.255", 1, G },
        { "100.64.0.0", 0, "100.64.0.0/10" },
        { "100.64.0.1", 0, "CGNAT" },
        { "100.100.100.200", 0, "100.64.0.0/10" },      /* Alibaba metadata */
        { "100.127.255.255", 0, "100.64.0.0/10" },
        { "100.128.0.0", 1, G },
        { "126.255.255.255", 1, G },
        { "127.0.0.0", 0, "loopback" },
        { "127.0.0.1", 0, "loopback (127.0.0.0/8)" },
        { "127.255.255.255", 0, "loopback" },
        { "128.0.0.0", 1, G },
        { "169.253.255.255", 1, G },
        { "169.254.0.0", 0, "169.254.0.0/16" },
        { "169.254.169.254", 0, "metadata" },
        { "169.254.255.255", 0, "169.254.0.0/16" },
        { "169.255.0.0", 1, G },
        { "172.15.255.255", 1, G },
        { "172.16.0.0", 0, "172.16.0.0/12" },
        { "172.31.255.255", 0, "172.16.0.0/12" },
        { "172.32.0.0", 1, G },
        { "191.255.255.255", 1, G },
        { "192.0.0.0", 0, "192.0.0.0/24" },
        { "192.0.0.192", 0, "192.0.0.0/24" },           /* Oracle metadata */
        { "192.0.0.255", 0, "192.0.0.0/24" },
        { "192.0.1.0", 1, G },
        { "192.0.1.255", 1, G },
        { "192.0.2.0", 0, "192.0.2.0/24" },
        { "192.0.2.255", 0, "192.0.2.0/24" },
        { "192.0.3.0", 1, G },
        { "192.88.98.255", 1, G },
        { "192.88.99.0", 0, "192.88.99.0/24" },
        { "192.88.99.255", 0, "192.88.99.0/24" },
        { "192.88.100.0", 1, G },
        { "192.167.255.255", 1, G },
        { "192.168.0.0", 0, "192.168.0.0/16" },
        { "192.168.255.255", 0, "192.168.0.0/16" },
        { "192.169.0.0", 1, G },
        { "198.17.255.255", 1, G },
        { "198.18.0.0", 0, "198.18.0.0/15" },
        { "198.19.255.255", 0, "198.18.0.0/15" },
        { "198.20.0.0", 1, G },
        { "198.51.99.255", 1, G },
        { "198.51.100.0", 0, "198.51.100.0/24" },
        { "198.51.100.255", 0, "198.51.100.0/24" },
        { "198.51.101.0", 1, G },
        { "203.0.112.255", 1, G },
        { "203.0.113.0", 0, "203.0.113.0/24" },
        { "203.0.113.255", 0, "203.0.113.0/24" },
        { "203.0.114.0", 1, G },
        { "223.255.255.255", 1, G },
        { "224.0.0.0", 0, "multicast" },
        { "239.255.255.255", 0, "224.0.0.0/4" },
        { "240.0.0.0", 0, "240.0.0.0/4" },
        { "255.255.255.254", 0, "240.0.0.0/4" },
        { "255.255.255.255", 0, "broadcast" },
};

static const AddressCase ipv6_cases[] = {
        { "::", 0, "unspecified" },
        { "::1", 0, "loopback" },
        { "::2", 0, "::/96" },
        { "::a00:1", 0, "IPv4-compatible" },            /* ::10.0.0.1 */
        { "::808:808", 0, "IPv4-compatible" },          /* ::8.8.8.8 */
        { "::1:0:0:0", 0, "outside 2000::/3" },
        /* IPv4-mapped: classified by the IPv4 part, never dialled. */
        { "::ffff:10.0.0.5", 0, "special-purpose IPv4" },
        { "::ffff:127.0.0.1", 0, "special-purpose IPv4" },
        { "::ffff:7f00:1", 0, "special-purpose IPv4" },
        { "0:0:0:0:0:ffff:a9fe:a9fe", 0, "special-purpose IPv4" },
        { "::ffff:8.8.8.8", 0, "connect over IPv4" },
        { "::ffff:0:0", 0, "::ffff:0:0/96" },
        { "::ffff:ffff:ffff", 0, "::ffff:0:0/96" },
        { "::fffe:ffff:ffff", 0, "outside 2000::/3" },      /* not ::/96: bits 80-95 set */
        { "::1:0:0", 0, "outside 2000::/3" },           /* just past ::ffff:0:0/96 */
        /* NAT64. */
        { "64:ff9b::", 0, "64:ff9b::/96" },
        { "64:ff9b::a00:1", 0, "NAT64" },
        { "64:ff9b::808:808", 0, "64:ff9b::/96" },
        { "64:ff9b::ffff:ffff", 0, "64:ff9b::/96" },
        { "64:ff9b::1:0:0", 0, "outside 2000::/3" },
        { "64:ff9b:1::", 0, "64:ff9b:1::/48" },
        { "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", 0, "64:ff9b:1::/48" },
        { "64:ff9b:2::", 0, "outside 2000::/3" },
        /* Discard-only. */
        { "100::", 0, "100::/64" },
        { "100::ffff:ffff:ffff:ffff", 0, "100::/64" },
        { "100:0:0:1::", 0, "outside 2000::/3" },
        /* 2000::/3 and its exceptions. */
        { "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "outside 2000::/3" },
        { "2000::", 1, G },
        { "2000::1", 1, G },
        { "2001::", 0, "Teredo" },
        { "2001:0:4136:e378:8000:63bf:3fff:fdd2", 0, "Teredo (2001::/32)" },
        { "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", 0, "Teredo" },
        { "2001:1::", 0, "2001::/23" },
        { "2001:2::1", 0, "2001::/23" },                /* benchmarking */
        { "2001:10::1", 0, "2001::/23" },               /* ORCHID */
        { "2001:20::1", 0, "2001::/23" },               /* ORCHIDv2 */
        { "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "2001::/23" },
        { "2001:200::", 1, G },
        { "2001:4860:4860::8888", 1, G },
        { "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", 1, G },
        { "2001:db8::", 0, "2001:db8::/32" },
        { "2001:db8::1", 0, "documentation" },
        { "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", 0, "2001:db8::/32" },
        { "2001:db9::", 1, G },
        { "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, G },
        { "2002::", 0, "2002::/16" },
        { "2002:a00:1::1", 0, "6to4" },                 /* 6to4 of 10.0.0.1 */
        { "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "2002::/16" },
        { "2003::", 1, G },
        { "2606:4700:4700::1111", 1, G },
        { "2a00:1450:4001::1", 1, G },
        { "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, G },
        { "3fff::", 0, "3fff::/20" },
        { "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "3fff::/20" },
        { "3fff:1000::", 1, G },
        { "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, G },
        { "4000::", 0, "outside 2000::/3" },
        /* Local and special. */
        { "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "outside 2000::/3" },
        { "fc00::", 0, "fc00::/7" },
        { "fc00::1", 0, "unique local" },
        { "fd00::1", 0, "fc00::/7" },
        { "fd00:ec2::254", 0, "cloud metadata" },
        { "fd00:ec2::253", 0, "fc00::/7" },
        { "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "fc00::/7" },
        { "fe00::", 0, "outside 2000::/3" },
        { "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "outside 2000::/3" },
        { "fe80::", 0, "fe80::/10" },
        { "fe80::1", 0, "link-local" },
        { "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "fe80::/10" },
        { "fec0::", 0, "fec0::/10" },
        { "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "fec0::/10" },
        { "ff00::", 0, "multicast" },
        { "ff02::1", 0, "ff00::/8" },
        { "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "ff00::/8" },
};

static void test_address_ipv4(void **state) {
        EgressPolicy *p = policy(true, NULL, NULL);

        run_address_cases(p, ipv4_cases, ELEMENTSOF(ipv4_cases));
        egress_policy_free(p);
}

static void test_address_ipv6(void **state) {
        EgressPolicy *p = policy(true, NULL, NULL);

        run_address_cases(p, ipv6_cases, ELEMENTSOF(ipv6_cases));
        egress_policy_free(p);
}

static void test_address_bad_input(void **state) {
        EgressPolicy *p = policy(true, NULL, NULL);
        struct sockaddr_in in = { .sin_family = AF_INET };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
        struct sockaddr_un { sa_family_t f; char path[108]; } un = { .f = AF_UNIX };
        const char *why;

        assert_int_equal(inet_pton(AF_INET, "8.8.8.8", &in.sin_addr), 1);
        assert_int_equal(egress_address_allowed(p, NULL, sizeof(in), &why), -EINVAL);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in, 0, &why), -EINVAL);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in, sizeof(in) - 1, &why), -EINVAL);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in, sizeof(in), NULL), 1);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in6, sizeof(in6) - 1, &why), -EINVAL);
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &un, sizeof(un), &why), 0);
        assert_string_equal(why, "unsupported address family");

        /* A scope id changes nothing: fe80::/10 stays link-local. */
        assert_int_equal(inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr), 1);
        in6.sin6_scope_id = 2;
        assert_int_equal(egress_address_allowed(p, (struct sockaddr *) &in6, sizeof(in6), &why), 0);
        egress_policy_free(p);
}

/* ---------------------------------------------------------------------------------------------
 * Mirrors */

static void test_mirrors_exempt_exactly(void **state) {
        static const char *const mirrors[] = { "127.0.0.0/8", "10.1.2.0/24", "fd00::/8", "::1/128",
                                               "0.0.0.0/8", "224.0.0.0/8", "ff00::/8", NULL };
        static const AddressCase cases[] = {
                { "127.0.0.1", 1, "inside mirror 127.0.0.0/8" },
                { "127.0.0.0", 1, "inside mirror 127.0.0.0/8" },
                { "127.255.255.255", 1, "inside mirror 127.0.0.0/8" },
                { "126.255.255.255", 1, G },
                { "10.1.2.0", 1, "inside mirror 10.1.2.0/24" },
                { "10.1.2.7", 1, "inside mirror 10.1.2.0/24" },
                { "10.1.2.255", 1, "inside mirror 10.1.2.0/24" },
                { "10.1.1.255", 0, "private (10.0.0.0/8)" },
                { "10.1.3.0", 0, "private (10.0.0.0/8)" },
                { "10.0.0.1", 0, "private" },
                { "169.254.169.254", 0, "metadata" },
                { "8.8.8.8", 1, G },
                { "fd00::", 1, "inside mirror fd00::/8" },
                { "fd00::1", 1, "inside mirror fd00::/8" },
                { "fd00:ec2::254", 1, "inside mirror fd00::/8" },  /* the operator listed all of fd00::/8 */
                { "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, "inside mirror fd00::/8" },
                { "fc00::1", 0, "fc00::/7" },
                { "fcff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0, "fc00::/7" },
                { "fe00::", 0, "outside 2000::/3" },
                { "::1", 1, "inside mirror ::1/128" },
                { "::2", 0, "IPv4-compatible" },
                /* A mirror never exempts across families, nor the mapped form of its addresses. */
                { "::ffff:127.0.0.1", 0, "::ffff:0:0/96" },
                { "::ffff:10.1.2.7", 0, "::ffff:0:0/96" },
                /* Nor what is not a unicast destination at all. */
                { "0.0.0.0", 0, "0.0.0.0/8" },
                { "0.1.2.3", 0, "0.0.0.0/8" },
                { "224.0.0.1", 0, "multicast" },
                { "255.255.255.255", 0, "broadcast" },
                { "::", 0, "unspecified" },
                { "ff02::1", 0, "multicast" },
        };
        EgressPolicy *p = policy(true, NULL, mirrors);

        run_address_cases(p, cases, ELEMENTSOF(cases));
        egress_policy_free(p);
}

static void test_mirrors_canonical(void **state) {
        static const char *const in[] = { "10.1.2.4", "FD00::/8", "fd00:0:0::/16", "2001:DB8::/32",
                                          "192.168.0.0/16", "127.0.0.0/8", "127.0.0.0/08x", NULL };
        static const char *const expected[] = { "10.1.2.4/32", "127.0.0.0/8", "192.168.0.0/16",
                                                "2001:db8::/32", "fd00::/16", "fd00::/8", NULL };
        EgressPolicy *p;
        char *error = NULL;
        json_object *o, *m;

        /* The last one is bad: check the rest first. */
        assert_int_equal(egress_policy_new(true, NULL, (char *const *) in, &p, &error), -EINVAL);
        assert_non_null(strstr(error, "mirror 6"));
        free(error);

        {
                const char *good[ELEMENTSOF(in)] = {};

                memcpy(good, in, sizeof(char *) * 6);
                p = policy(true, NULL, good);
        }
        o = egress_policy_to_json(p);
        assert_non_null(o);
        assert_true(json_object_object_get_ex(o, "mirrors", &m));
        assert_int_equal(json_object_array_length(m), 6);
        for (size_t i = 0; expected[i]; i++)
                assert_string_equal(json_object_get_string(json_object_array_get_idx(m, i)), expected[i]);
        json_object_put(o);
        egress_policy_free(p);
}

static void test_mirrors_invalid(void **state) {
        static const struct {
                const char *in, *why;
        } cases[] = {
                { "10.1.2.3/24", "did you mean 10.1.2.0/24?" },
                { "127.0.0.1/8", "did you mean 127.0.0.0/8?" },
                { "fd00::1/8", "did you mean fd00::/8?" },
                { "10.0.0.0/33", "8-32" },
                { "10.0.0.0/7", "8-32" },
                { "0.0.0.0/0", "8-32" },
                { "::/0", "8-128" },
                { "2000::/3", "8-128" },
                { "fd00::/129", "8-128" },
                { "10.0.0.0/", "plain decimal" },
                { "10.0.0.0/08", "plain decimal" },
                { "10.0.0.0/+8", "plain decimal" },
                { "10.0.0.0/-1", "plain decimal" },
                { "10.0.0.0/8/8", "plain decimal" },
                { "10.0.0.0/1000", "plain decimal" },
                { "10.0.0.0 /8", "IPv4" },
                { "127.1/8", "IPv4" },
                { "0x7f000000/8", "IPv4" },
                { "0177.0.0.0/8", "IPv4" },
                { "2130706432/8", "IPv4" },
                { "example.org", "IPv4" },
                { "", "empty" },
                { "::ffff:0:0/96", "::ffff:0:0/96" },
                { "::ffff:10.0.0.0/104", "::ffff:0:0/96" },
                { "::/8", "::ffff:0:0/96" },
                { "::/64", "::ffff:0:0/96" },
                { "fe80::%eth0/64", "IPv6" },
                { "[fd00::]/8", "IPv6" },
                { "fd00::/8 ", "plain decimal" },
                { "127.0.0.0/8.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0", "too long" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *mirrors[] = { "127.0.0.0/8", cases[i].in, NULL };
                EgressPolicy *p = NULL;
                char *error = NULL;
                int r;

                r = egress_policy_new(true, NULL, (char *const *) mirrors, &p, &error);
                if (r != -EINVAL)
                        fail_msg("'%s' → %d, expected -EINVAL", cases[i].in, r);
                assert_null(p);
                assert_non_null(error);
                if (!strstr(error, cases[i].why) || !strstr(error, "mirror 1"))
                        fail_msg("'%s' → \"%s\", expected \"%s\"", cases[i].in, error, cases[i].why);
                free(error);
        }
}

/* ---------------------------------------------------------------------------------------------
 * Revision and JSON */

static void test_revision_stable(void **state) {
        static const char *const a[] = { "example.org", "*.example.net:443", "pypi.org", NULL };
        static const char *const b[] = { "PyPI.org.", "*.EXAMPLE.net:443", "example.org", "example.org", NULL };
        static const char *const m1[] = { "127.0.0.0/8", "fd00::/8", NULL };
        static const char *const m2[] = { "FD00:0::/8", "127.0.0.0/8", "127.0.0.0/8", NULL };
        static const char *const c[] = { "example.org", "*.example.net", "pypi.org", NULL };
        static const char *const d[] = { "example.org", "*.example.net:443", NULL };
        EgressPolicy *pa, *pb, *pc, *pd, *pn, *pm, *pe, *pe2;
        const char *rev;

        pa = policy(true, a, m1);
        pb = policy(true, b, m2);
        rev = egress_policy_revision(pa);
        assert_int_equal(strlen(rev), EGRESS_REVISION_LENGTH);
        assert_int_equal(strspn(rev, "0123456789abcdef"), EGRESS_REVISION_LENGTH);
        /* Same content in any order, case, spelling, with duplicates: same revision. */
        assert_string_equal(egress_policy_revision(pb), rev);

        /* Any change of content changes it: a port pin, an entry, the mode, a mirror. */
        pc = policy(true, c, m1);
        pd = policy(true, d, m1);
        pn = policy(false, a, m1);
        pm = policy(true, a, NULL);
        assert_string_not_equal(egress_policy_revision(pc), rev);
        assert_string_not_equal(egress_policy_revision(pd), rev);
        assert_string_not_equal(egress_policy_revision(pn), rev);
        assert_string_not_equal(egress_policy_revision(pm), rev);

        /*
         * Pinned values: the revision names gateway sockets and permission epochs across
         * restarts and upgrades, so its derivation must not drift silently.
         */
        pe = policy(true, NULL, NULL);
        pe2 = policy(false, NULL, NULL);
        assert_string_equal(egress_policy_revision(pe), "f9ed00a958d84170");
        assert_string_equal(egress_policy_revision(pe2), "109442fb89e1c12c");
        assert_string_equal(rev, "de4c0e9255f60ba7");

        egress_policy_free(pa);
        egress_policy_free(pb);
        egress_policy_free(pc);
        egress_policy_free(pd);
        egress_policy_free(pn);
        egress_policy_free(pm);
        egress_policy_free(pe);
        egress_policy_free(pe2);
}

static void test_json_round_trip(void **state) {
        static const char *const body =
                "{\"mode\": \"allowlist\", \"allow\": [\"PyPI.org.\", \"*.Example.org:443\", \"bücher.example\","
                " \"example.org\"], \"mirrors\": [\"127.0.0.0/8\", \"FD00::/8\"]}";
        json_object *in, *out, *again, *v;
        EgressPolicy *p = NULL, *q = NULL;
        char *error = NULL;
        const char *s1;

        in = json_tokener_parse(body);
        assert_non_null(in);
        assert_int_equal(egress_policy_from_json(in, &p, &error), 0);
        assert_null(error);
        assert_true(egress_policy_is_allowlist(p));

        out = egress_policy_to_json(p);
        assert_non_null(out);
        s1 = json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN);
        assert_true(json_object_object_get_ex(out, "mode", &v));
        assert_string_equal(json_object_get_string(v), "allowlist");
        assert_true(json_object_object_get_ex(out, "allow", &v));
        assert_int_equal(json_object_array_length(v), 4);
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "*.example.org:443");
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 1)), "example.org");
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 2)), "pypi.org");
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 3)), "xn--bcher-kva.example");
        assert_true(json_object_object_get_ex(out, "mirrors", &v));
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "127.0.0.0/8");
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 1)), "fd00::/8");
        assert_true(json_object_object_get_ex(out, "revision", &v));
        assert_string_equal(json_object_get_string(v), egress_policy_revision(p));

        /* The answer of a GET can be PUT back (its "revision" is ignored) and is a fixed point. */
        assert_int_equal(egress_policy_from_json(out, &q, &error), 0);
        assert_string_equal(egress_policy_revision(q), egress_policy_revision(p));
        again = egress_policy_to_json(q);
        assert_string_equal(json_object_to_json_string_ext(again, JSON_C_TO_STRING_PLAIN), s1);

        json_object_put(again);
        json_object_put(out);
        json_object_put(in);
        egress_policy_free(p);
        egress_policy_free(q);

        /* Mode none, lists optional. */
        in = json_tokener_parse("{\"mode\": \"none\"}");
        assert_int_equal(egress_policy_from_json(in, &p, NULL), 0);
        assert_false(egress_policy_is_allowlist(p));
        out = egress_policy_to_json(p);
        assert_string_equal(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN),
                            "{\"mode\":\"none\",\"allow\":[],\"mirrors\":[],\"revision\":\"109442fb89e1c12c\"}");
        json_object_put(out);
        json_object_put(in);
        egress_policy_free(p);
}

static void test_json_invalid(void **state) {
        static const struct {
                const char *body, *why;
        } cases[] = {
                { "[]", "JSON object" },
                { "\"allowlist\"", "JSON object" },
                { "{}", "\"mode\" is required" },
                { "{\"allow\": []}", "\"mode\" is required" },
                { "{\"mode\": \"opened\"}", "\"mode\" must be" },
                { "{\"mode\": \"open\", \"allow\": [\"a.org\"]}", "mode open takes no allow entries" },
                { "{\"mode\": \"allowlist\", \"noProxy\": \"a.org\"}", "need an upstream" },
                { "{\"mode\": \"allowlist\", \"upstream\": \"http://u:p@proxy:3128\"}", "upstream:" },
                { "{\"mode\": \"allowlist\", \"upstream\": \"http://PROXY:3128\"}", "upstream:" },
                { "{\"mode\": \"allowlist\", \"upstream\": 5}", "must be a string" },
                { "{\"mode\": \"Allowlist\"}", "\"mode\" must be" },
                { "{\"mode\": 1}", "\"mode\" must be" },
                { "{\"mode\": null}", "\"mode\" must be" },
                { "{\"mode\": \"allowlist\", \"allow\": \"example.org\"}", "array of strings" },
                { "{\"mode\": \"allowlist\", \"allow\": null}", "array of strings" },
                { "{\"mode\": \"allowlist\", \"allow\": [1]}", "array of strings" },
                { "{\"mode\": \"allowlist\", \"allow\": [[\"a.org\"]]}", "array of strings" },
                { "{\"mode\": \"allowlist\", \"mirrors\": {}}", "array of strings" },
                { "{\"mode\": \"allowlist\", \"allows\": [\"a.org\"]}", "unknown key \"allows\"" },
                { "{\"mode\": \"allowlist\", \"revision\": 5}", "\"revision\" must be a string" },
                { "{\"mode\": \"allowlist\", \"allow\": [\"a.org\\u0000.evil.com\"]}", "NUL" },
                { "{\"mode\": \"allowlist\", \"allow\": [\"a.org\", \"127.0.0.1\"]}", "allow entry 1 (\"127.0.0.1\")" },
                { "{\"mode\": \"allowlist\", \"allow\": [\"a_b.org\"]}", "'_'" },
                { "{\"mode\": \"allowlist\", \"mirrors\": [\"10.0.0.1/8\"]}", "did you mean 10.0.0.0/8?" },
                { "{\"mode\": \"none\", \"allow\": [\"*.org\"]}", "wildcard" },        /* checked in mode none too */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *o = json_tokener_parse(cases[i].body);
                EgressPolicy *p = NULL;
                char *error = NULL;
                int r;

                assert_non_null(o);
                r = egress_policy_from_json(o, &p, &error);
                if (r != -EINVAL)
                        fail_msg("%s → %d, expected -EINVAL", cases[i].body, r);
                assert_null(p);
                assert_non_null(error);
                if (!strstr(error, cases[i].why))
                        fail_msg("%s → \"%s\", expected \"%s\"", cases[i].body, error, cases[i].why);
                free(error);
                assert_int_equal(egress_policy_from_json(o, &p, NULL), -EINVAL);
                json_object_put(o);
        }
        assert_int_equal(egress_policy_from_json(NULL, &(EgressPolicy *) { NULL }, NULL), -EINVAL);
}

static void test_limits(void **state) {
        char **allow = calloc(EGRESS_POLICY_ALLOW_MAX + 2, sizeof(char *));
        char **mirrors = calloc(EGRESS_POLICY_MIRRORS_MAX + 2, sizeof(char *));
        json_object *o, *a;
        EgressPolicy *p = NULL;
        char *error = NULL;

        assert_non_null(allow);
        assert_non_null(mirrors);
        for (size_t i = 0; i < EGRESS_POLICY_ALLOW_MAX + 1; i++)
                assert_true(asprintf(&allow[i], "h%zu.example.org", i) > 0);
        for (size_t i = 0; i < EGRESS_POLICY_MIRRORS_MAX + 1; i++)
                assert_true(asprintf(&mirrors[i], "10.%zu.0.0/16", i) > 0);

        assert_int_equal(egress_policy_new(true, allow, NULL, &p, &error), -EINVAL);
        assert_non_null(strstr(error, "too many allow entries"));
        free(error);
        assert_int_equal(egress_policy_new(true, NULL, mirrors, &p, &error), -EINVAL);
        assert_non_null(strstr(error, "too many mirrors"));
        free(error);

        /* Exactly at the limits is fine. */
        free(allow[EGRESS_POLICY_ALLOW_MAX]);
        allow[EGRESS_POLICY_ALLOW_MAX] = NULL;
        free(mirrors[EGRESS_POLICY_MIRRORS_MAX]);
        mirrors[EGRESS_POLICY_MIRRORS_MAX] = NULL;
        assert_int_equal(egress_policy_new(true, allow, mirrors, &p, NULL), 0);
        assert_int_equal(egress_policy_match(p, "h1023.example.org", 443, NULL), 1);
        assert_int_equal(egress_policy_match(p, "h1024.example.org", 443, NULL), 0);
        egress_policy_free(p);

        /* The JSON path refuses an oversized array before looking at its elements. */
        o = json_object_new_object();
        a = json_object_new_array();
        json_object_object_add(o, "mode", json_object_new_string("allowlist"));
        json_object_object_add(o, "allow", a);
        for (size_t i = 0; i < EGRESS_POLICY_ALLOW_MAX + 1; i++)
                json_object_array_add(a, json_object_new_int(1));
        assert_int_equal(egress_policy_from_json(o, &p, &error), -EINVAL);
        assert_non_null(strstr(error, "too many allow entries"));
        free(error);
        json_object_put(o);

        for (size_t i = 0; allow[i]; i++)
                free(allow[i]);
        for (size_t i = 0; mirrors[i]; i++)
                free(mirrors[i]);
        free(allow);
        free(mirrors);
}

/* ---------------------------------------------------------------------------------------------
 * Request targets */

static void test_target_connect(void **state) {
        static const struct {
                const char *in, *host;
                uint16_t port;
        } good[] = {
                { "example.org:443", "example.org", 443 },
                { "EXAMPLE.ORG.:8443", "example.org", 8443 },
                { "a.b.example.org:1", "a.b.example.org", 1 },
                { "example.org:65535", "example.org", 65535 },
                { "xn--bcher-kva.example:443", "xn--bcher-kva.example", 443 },
        };
        static const struct {
                const char *in, *why;
        } bad[] = {
                { "", "empty" },
                { "example.org", "port is required" },
                { "example.org:", "empty port" },
                { ":443", "empty host" },
                { "example.org:0", "port" },
                { "example.org:65536", "port" },
                { "example.org:99999", "port" },
                { "example.org:-1", "port" },
                { "example.org:+443", "port" },
                { "example.org:0443", "port" },
                { "example.org:443:80", "more than one port" },
                { "example.org:4a3", "port" },
                { "user:pw@evil.com:443", "userinfo" },
                { "example.org@169.254.169.254:443", "userinfo" },
                { "@example.org:443", "userinfo" },
                { "example.org\\@evil:443", "'\\'" },
                { "[::1]:443", "IP literal" },
                { "[::ffff:127.0.0.1]:443", "IP literal" },
                { "[fe80::1%25eth0]:443", "IP literal" },
                { "[::]:443", "IP literal" },
                { "127.0.0.1:443", "IP literal" },
                { "0.0.0.0:443", "IP literal" },
                { "2130706433:443", "IP literal" },
                { "0x7f000001:443", "IP literal" },
                { "0177.0.0.1:443", "IP literal" },
                { "127.1:443", "IP literal" },
                { "127.000.000.001:443", "IP literal" },
                { "exa%6dple.org:443", "percent" },
                { "example.org%00.evil:443", "percent" },
                { "a_b.example.org:443", "'_'" },
                { "a..example.org:443", "empty label" },
                { "localhost:443", "two labels" },
                { "example.org:443/x", "host:port only" },
                { "example.org:443?x", "host:port only" },
                { "http://example.org:443", "host:port only" },
                { "example .org:443", "spaces" },
                { "example.org:443\r\n", "control" },
                { "example.org\t:443", "control" },
                { "bücher.example:443", "non-ASCII" },
                { "*.example.org:443", "'*'" },
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                EgressTarget t = {};
                const char *why = NULL;
                int r;

                r = egress_target_parse_connect(good[i].in, &t, &why);
                if (r < 0)
                        fail_msg("'%s' → %d (%s)", good[i].in, r, why ?: "");
                assert_string_equal(t.host, good[i].host);
                assert_int_equal(t.port, good[i].port);
                assert_null(t.path_and_query);
                egress_target_done(&t);
                assert_null(t.host);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                EgressTarget t = {};
                const char *why = NULL;
                int r;

                r = egress_target_parse_connect(bad[i].in, &t, &why);
                if (r != -EINVAL)
                        fail_msg("'%s' → %d, expected -EINVAL", bad[i].in, r);
                assert_null(t.host);
                assert_non_null(why);
                if (!strstr(why, bad[i].why))
                        fail_msg("'%s' → \"%s\", expected \"%s\"", bad[i].in, why, bad[i].why);
                assert_int_equal(egress_target_parse_connect(bad[i].in, &t, NULL), -EINVAL);
        }
        {
                EgressTarget t = {};
                char *l63 = repeat('a', 63), *l64 = repeat('a', 64), buf[128];

                snprintf(buf, sizeof(buf), "%s.example.org:443", l63);
                assert_int_equal(egress_target_parse_connect(buf, &t, NULL), 0);
                egress_target_done(&t);
                snprintf(buf, sizeof(buf), "%s.example.org:443", l64);
                assert_int_equal(egress_target_parse_connect(buf, &t, NULL), -EINVAL);
                free(l63);
                free(l64);
                assert_int_equal(egress_target_parse_connect(NULL, &t, NULL), -EINVAL);
        }
}

static void test_target_connect_pin(void **state) {
        /* With a :443 pin, CONNECT example.org:80 is refused. */
        static const char *const allow[] = { "example.org:443", NULL };
        EgressPolicy *p = policy(true, allow, NULL);
        EgressTarget t = {};
        const char *why;

        assert_int_equal(egress_target_parse_connect("example.org:80", &t, &why), 0);
        assert_int_equal(egress_policy_match(p, t.host, t.port, &why), 0);
        assert_string_equal(why, "port not allowed by example.org:443");
        egress_target_done(&t);
        assert_int_equal(egress_target_parse_connect("Example.Org.:443", &t, &why), 0);
        assert_int_equal(egress_policy_match(p, t.host, t.port, &why), 1);
        egress_target_done(&t);
        egress_policy_free(p);
}

static void test_target_absolute(void **state) {
        static const struct {
                const char *in, *host;
                uint16_t port;
                const char *path;
        } good[] = {
                { "http://example.org/", "example.org", 80, "/" },
                { "http://example.org", "example.org", 80, "/" },
                { "http://example.org?q=1", "example.org", 80, "/?q=1" },
                { "HTTP://Example.ORG:8080/a/b?c=d&e", "example.org", 8080, "/a/b?c=d&e" },
                { "http://example.org.:80/simple", "example.org", 80, "/simple" },
                { "http://example.org/%41%00", "example.org", 80, "/%41%00" },       /* the path is not ours */
                { "http://a.b.example.org:65535/x?", "a.b.example.org", 65535, "/x?" },
        };
        static const struct {
                const char *in, *why;
        } bad[] = {
                { "", "empty" },
                { "https://example.org/", "CONNECT" },
                { "HTTPS://example.org/", "CONNECT" },
                { "file:///etc/passwd", "only http://" },
                { "gopher://example.org/", "only http://" },
                { "ftp://example.org/", "only http://" },
                { "ws://example.org/", "only http://" },
                { "httpx://example.org/", "only http://" },
                { "http:example.org/", "only http://" },
                { "http:/example.org/", "only http://" },
                { "example.org:80", "only http://" },
                { "/relative", "absolute" },
                { "//example.org/", "absolute" },
                { "http://", "empty host" },
                { "http:///x", "empty host" },
                { "http://a\\@b/", "'\\'" },
                { "http://example.org/p\\q", "'\\'" },
                { "http://user@example.org/", "userinfo" },
                { "http://user:pw@example.org/", "userinfo" },
                { "http://example.org:80@evil.example/", "userinfo" },
                { "http://example.org@169.254.169.254/", "userinfo" },
                { "http://example.org:/", "empty port" },
                { "http://example.org:0/", "port" },
                { "http://example.org:65536/", "port" },
                { "http://example.org:-1/", "port" },
                { "http://example.org:+80/", "port" },
                { "http://example.org:080/", "port" },
                { "http://example.org:443:80/", "more than one port" },
                { "http://[fe80::1%25eth0]/", "IP literal" },
                { "http://[::1]/", "IP literal" },
                { "http://[::ffff:127.0.0.1]/", "IP literal" },
                { "http://127.0.0.1/", "IP literal" },
                { "http://169.254.169.254/latest/meta-data/", "IP literal" },
                { "http://2130706433/", "IP literal" },
                { "http://0x7f000001/", "IP literal" },
                { "http://0177.0.0.1/", "IP literal" },
                { "http://127.1/", "IP literal" },
                { "http://127.000.000.001/", "IP literal" },
                { "http://exa%6dple.org/", "percent" },
                { "http://example.org%00.evil/", "percent" },
                { "http://a_b.example.org/", "'_'" },
                { "http://localhost/", "two labels" },
                { "http://example.org/#frag", "fragment" },
                { "http://example.org#frag", "fragment" },
                { "http://example.org/a b", "spaces" },
                { "http://example.org/\r\nHost: evil", "control" },
                { "http://bücher.example/", "non-ASCII" },
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                EgressTarget t = {};
                const char *why = NULL;
                int r;

                r = egress_target_parse_absolute(good[i].in, &t, &why);
                if (r < 0)
                        fail_msg("'%s' → %d (%s)", good[i].in, r, why ?: "");
                assert_string_equal(t.host, good[i].host);
                assert_int_equal(t.port, good[i].port);
                assert_string_equal(t.path_and_query, good[i].path);
                egress_target_done(&t);
                assert_null(t.host);
                assert_null(t.path_and_query);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                EgressTarget t = {};
                const char *why = NULL;
                int r;

                r = egress_target_parse_absolute(bad[i].in, &t, &why);
                if (r != -EINVAL)
                        fail_msg("'%s' → %d, expected -EINVAL", bad[i].in, r);
                assert_null(t.host);
                assert_non_null(why);
                if (!strstr(why, bad[i].why))
                        fail_msg("'%s' → \"%s\", expected \"%s\"", bad[i].in, why, bad[i].why);
        }
        {
                EgressTarget t = {};
                char *s = repeat('a', EGRESS_TARGET_MAX + 1);
                const char *why;

                memcpy(s, "http://example.org/", 19);
                assert_int_equal(egress_target_parse_absolute(s, &t, &why), -EINVAL);
                assert_non_null(strstr(why, "too long"));
                s[EGRESS_TARGET_MAX] = '\0';
                assert_int_equal(egress_target_parse_absolute(s, &t, &why), 0);
                egress_target_done(&t);
                free(s);
                assert_int_equal(egress_target_parse_absolute(NULL, &t, NULL), -EINVAL);
                egress_target_done(NULL);
        }
}

static void test_target_host_header_ignored(void **state) {
        /*
         * SECURITY.md §4: a forward request for http://example.org/ with `Host: 169.254.169.254`
         * is decided on example.org. The parser's only input is the request target: there is no
         * way to hand it a Host header, and the host it returns is the URI's.
         */
        static const char *const allow[] = { "example.org", NULL };
        EgressPolicy *p = policy(true, allow, NULL);
        EgressTarget t = {};

        assert_int_equal(egress_target_parse_absolute("http://example.org/latest/meta-data/", &t, NULL), 0);
        assert_string_equal(t.host, "example.org");
        assert_string_equal(t.path_and_query, "/latest/meta-data/");
        assert_int_equal(egress_policy_match(p, t.host, t.port, NULL), 1);
        egress_target_done(&t);
        egress_policy_free(p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rule_parse_valid),
                cmocka_unit_test(test_rule_parse_invalid),
                cmocka_unit_test(test_rule_lengths),
                cmocka_unit_test(test_host_canonicalize),
                cmocka_unit_test(test_host_lengths),
                cmocka_unit_test(test_match_table),
                cmocka_unit_test(test_match_pins_combine),
                cmocka_unit_test(test_mode_none),
                cmocka_unit_test(test_address_ipv4),
                cmocka_unit_test(test_address_ipv6),
                cmocka_unit_test(test_address_bad_input),
                cmocka_unit_test(test_mirrors_exempt_exactly),
                cmocka_unit_test(test_mirrors_canonical),
                cmocka_unit_test(test_mirrors_invalid),
                cmocka_unit_test(test_revision_stable),
                cmocka_unit_test(test_json_round_trip),
                cmocka_unit_test(test_json_invalid),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_target_connect),
                cmocka_unit_test(test_target_connect_pin),
                cmocka_unit_test(test_target_absolute),
                cmocka_unit_test(test_target_host_header_ignored),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
