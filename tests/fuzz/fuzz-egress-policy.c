/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The allowlist: every line of the input as an allowlist entry (egress_rule_parse(): its
 * canonical form must parse back to itself), as a request host (egress_host_canonicalize_full():
 * a fixed point), as a CONNECT authority and an absolute URI; all lines together as the allow
 * list and as the mirror CIDRs of a policy (egress_policy_new(), whose JSON must round-trip to the
 * same revision), each host matched against it, and the first bytes as IPv4/IPv6 addresses for
 * the address classifier.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-policy.h"
#include "fuzz.h"

#define MAX_LINES 32

static void check_rule(const char *line) {
        EgressRule rule, again;
        char *error = NULL, *s, *t;
        int r;

        r = egress_rule_parse(line, &rule, &error);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        FUZZ_CHECK(r != -EINVAL || error);
        free(error);
        if (r < 0)
                return;
        s = egress_rule_to_string(&rule);
        if (s) {
                r = egress_rule_parse(s, &again, NULL);
                FUZZ_CHECK(r == 0 || r == -ENOMEM);
                if (r == 0) {
                        t = egress_rule_to_string(&again);
                        FUZZ_CHECK(!t || strcmp(s, t) == 0);
                        FUZZ_CHECK(again.wildcard == rule.wildcard && again.port == rule.port);
                        free(t);
                        egress_rule_done(&again);
                }
                free(s);
        }
        egress_rule_done(&rule);
}

static void check_host(const char *line, const EgressPolicy *p) {
        const char *reason = NULL;
        char *canonical = NULL, *again = NULL;
        int r;

        r = egress_host_canonicalize_full(line, &canonical, &reason);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r < 0)
                return;
        r = egress_host_canonicalize_full(canonical, &again, &reason);
        FUZZ_CHECK(r == 0 || r == -ENOMEM);
        if (r == 0)
                FUZZ_CHECK(strcmp(canonical, again) == 0);
        free(again);
        if (p) {
                r = egress_policy_match(p, canonical, 443, &reason);
                FUZZ_CHECK(r == 0 || r == 1);
                r = egress_policy_match(p, canonical, 80, &reason);
                FUZZ_CHECK(r == 0 || r == 1);
        }
        free(canonical);
}

static void check_target(const char *line, bool connect, const EgressPolicy *p) {
        EgressTarget t = {};
        const char *reason = NULL;
        char *canonical = NULL;
        int r;

        r = connect ? egress_target_parse_connect(line, &t, &reason) : egress_target_parse_absolute(line, &t, &reason);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r < 0)
                return;
        FUZZ_CHECK(t.host && t.port > 0);
        FUZZ_CHECK(connect == !t.path_and_query);
        FUZZ_CHECK(!strpbrk(t.host, "@\\%:[] "));
        r = egress_host_canonicalize_full(t.host, &canonical, &reason);
        FUZZ_CHECK(r == 0 || r == -ENOMEM);
        if (r == 0)
                FUZZ_CHECK(strcmp(canonical, t.host) == 0);
        free(canonical);
        if (p) {
                r = egress_policy_match(p, t.host, t.port, &reason);
                FUZZ_CHECK(r == 0 || r == 1);
        }
        egress_target_done(&t);
}

static void check_json_round_trip(const EgressPolicy *p) {
        EgressPolicy *q = NULL;
        json_object *o;
        char *error = NULL;
        int r;

        o = egress_policy_to_json(p);
        if (!o)
                return;
        r = egress_policy_from_json(o, &q, &error);
        FUZZ_CHECK(r == 0 || r == -ENOMEM);
        if (r == 0)
                FUZZ_CHECK(strcmp(egress_policy_revision(p), egress_policy_revision(q)) == 0);
        free(error);
        egress_policy_free(q);
        json_object_put(o);
}

static void check_addresses(const EgressPolicy *p, const uint8_t *data, size_t size) {
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(443) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
        const char *reason = NULL;
        int r;

        if (size >= 4) {
                memcpy(&in.sin_addr, data, 4);
                r = egress_address_allowed(p, (const struct sockaddr *) &in, sizeof(in), &reason);
                FUZZ_CHECK(r == 0 || r == 1);
        }
        if (size >= 16) {
                memcpy(&in6.sin6_addr, data, 16);
                r = egress_address_allowed(p, (const struct sockaddr *) &in6, sizeof(in6), &reason);
                FUZZ_CHECK(r == 0 || r == 1);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *lines[MAX_LINES + 1], *buf = NULL, *error = NULL;
        EgressPolicy *allow = NULL, *mirrors = NULL;
        size_t n;
        int r;

        if (size > 8192)
                return 0;

        n = fuzz_split(data, size, '\n', lines, MAX_LINES, &buf);
        lines[n] = NULL;

        r = egress_policy_new(true, lines, NULL, &allow, &error);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        FUZZ_CHECK(r != -EINVAL || error);
        free(error);
        error = NULL;
        if (allow) {
                FUZZ_CHECK(strlen(egress_policy_revision(allow)) == EGRESS_REVISION_LENGTH);
                check_json_round_trip(allow);
        }

        r = egress_policy_new(true, NULL, lines, &mirrors, &error);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        FUZZ_CHECK(r != -EINVAL || error);
        free(error);
        if (mirrors) {
                check_json_round_trip(mirrors);
                check_addresses(mirrors, data, size);
        }

        for (size_t i = 0; i < n; i++) {
                check_rule(lines[i]);
                check_host(lines[i], allow);
                check_target(lines[i], true, allow);
                check_target(lines[i], false, allow);
        }

        egress_policy_free(allow);
        egress_policy_free(mirrors);
        free(buf);
        return 0;
}
