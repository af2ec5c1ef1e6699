/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The egress gateway's policy object, pure: built from allowlist entries and mirrors (parsed by
 * egress-rule.c and egress-address.c), sorted and unique, with its content revision; its JSON form
 * both ways, and matching a canonical host and port against the allowlist. Address classes are in
 * egress-address.c, request targets in egress-target.c. May use util/ only.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

#include "egress/egress-policy-internal.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"

/* ---------------------------------------------------------------------------------------------
 * Policy */

static void entry_done(PolicyEntry *e) {
        egress_rule_done(&e->rule);
        free(e->canonical);
        free(e->allow_reason);
        free(e->port_reason);
        *e = (PolicyEntry) {};
}

EgressPolicy *egress_policy_free(EgressPolicy *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_entries; i++)
                entry_done(&p->entries[i]);
        free(p->entries);
        for (size_t i = 0; i < p->n_mirrors; i++)
                egress_mirror_done(&p->mirrors[i]);
        free(p->mirrors);
        free(p->upstream);
        free(p->upstream_auth);
        free(p->no_proxy);
        return mfree(p);
}

SR_DEFINE_FREE_FUNC(EgressPolicy *, egress_policy_free);

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const PolicyEntry *) a)->canonical, ((const PolicyEntry *) b)->canonical);
}

static int mirror_cmp(const void *a, const void *b) {
        return strcmp(((const Mirror *) a)->canonical, ((const Mirror *) b)->canonical);
}

static void entry_drop(void *e) {
        entry_done(e);
}

static void mirror_drop(void *m) {
        egress_mirror_done(m);
}

/*
 * Sort @n items of @size bytes by @cmp and drop the repeats: each is freed with @drop, the items
 * after it move up and the slots they leave are zeroed. Return: how many are left.
 */
static size_t sort_unique(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *),
                          void (*drop)(void *)) {
        uint8_t *b = base;
        size_t j = 1;

        if (n <= 1)
                return n;
        qsort(base, n, size, cmp);
        for (size_t i = 1; i < n; i++) {
                if (cmp(b + i * size, b + (j - 1) * size) == 0)
                        drop(b + i * size);
                else {
                        if (i != j) {
                                memcpy(b + j * size, b + i * size, size);
                                memset(b + i * size, 0, size);
                        }
                        j++;
                }
        }
        return j;
}

static int item_error(char **ret_error, const char *what, size_t index, const char *input, const char *why) {
        _cleanup_free_ char *escaped = NULL;

        if (!ret_error)
                return -EINVAL;
        escaped = str_escape_log(input, 300);
        if (!escaped)
                return -ENOMEM;
        return egress_fail_printf(ret_error, "%s %zu (\"%s\"): %s", what, index, escaped, why);
}

static void sha_line(struct sha256_ctx *ctx, const char *key, const char *value) {
        sha256_update(ctx, strlen(key), (const uint8_t *) key);
        sha256_update(ctx, 1, (const uint8_t *) " ");
        sha256_update(ctx, strlen(value), (const uint8_t *) value);
        sha256_update(ctx, 1, (const uint8_t *) "\n");
}

/* The revision covers exactly what to_json() shows but the revision itself; entries hold no '\n'. */
static void compute_revision(EgressPolicy *p) {
        static const char hex[] = "0123456789abcdef";
        uint8_t digest[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha_line(&ctx, "sandbox-runner-egress-policy", "1");
        sha_line(&ctx, "mode", p->open ? "open" : p->allowlist ? "allowlist" : "none");
        for (size_t i = 0; i < p->n_entries; i++)
                sha_line(&ctx, "allow", p->entries[i].canonical);
        for (size_t i = 0; i < p->n_mirrors; i++)
                sha_line(&ctx, "mirror", p->mirrors[i].canonical);
        /* Only when set, so that the revisions of policies without a route stay what they were. */
        if (p->upstream)
                sha_line(&ctx, "upstream", p->upstream);
        if (p->upstream_auth)
                sha_line(&ctx, "upstream-auth", p->upstream_auth);
        if (p->no_proxy)
                sha_line(&ctx, "no-proxy", p->no_proxy);
        sha256_digest(&ctx, sizeof(digest), digest);
        for (size_t i = 0; i < EGRESS_REVISION_LENGTH / 2; i++) {
                p->revision[2 * i] = hex[digest[i] >> 4];
                p->revision[2 * i + 1] = hex[digest[i] & 15];
        }
        p->revision[EGRESS_REVISION_LENGTH] = '\0';
}

static int entry_from_string(const char *s, PolicyEntry *ret, char **ret_error) {
        PolicyEntry e = {};
        int r;

        r = egress_rule_parse(s, &e.rule, ret_error);
        if (r < 0)
                return r;
        e.canonical = egress_rule_to_string(&e.rule);
        if (e.canonical) {
                e.allow_reason = egress_strprintf("allowed by %s", e.canonical);
                e.port_reason = egress_strprintf("port not allowed by %s", e.canonical);
        }
        if (!e.canonical || !e.allow_reason || !e.port_reason) {
                entry_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

/* A route's strings hold no line break (they are lines of the revision) and no NUL. */
static int route_copy(const char *what, const char *s, size_t max, char **ret, char **ret_error) {
        if (!s)
                return 0;
        if (strlen(s) > max || strpbrk(s, "\r\n"))
                return egress_fail_printf(ret_error, "%s: at most %zu characters, no line breaks", what, max);
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int policy_set_route(EgressPolicy *p, const EgressRoute *route, char **ret_error) {
        EgressUpstream u = {};
        int r;

        if (!route)
                return 0;
        if (route->upstream) {
                const char *why = NULL;

                /* Canonical already, and without credentials: a fixed point of the parser. */
                r = egress_upstream_parse(route->upstream, &u, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || u.authorization || !streq(u.url, route->upstream)) {
                        egress_upstream_done(&u);
                        return egress_fail_printf(ret_error, "upstream: %s", why ?: "not a canonical proxy URL "
                                                  "without credentials (http://host:port)");
                }
                egress_upstream_done(&u);
        } else if (route->upstream_auth || route->no_proxy)
                return egress_fail_reason(ret_error, "upstreamAuth and noProxy need an upstream");
        r = route_copy("upstream", route->upstream, 2048, &p->upstream, ret_error);
        if (r >= 0)
                r = route_copy("upstreamAuth", route->upstream_auth, 128, &p->upstream_auth, ret_error);
        if (r >= 0)
                r = route_copy("noProxy", route->no_proxy, 4096, &p->no_proxy, ret_error);
        return r;
}

int egress_policy_new(bool allowlist, char *const *allow, char *const *mirrors, EgressPolicy **ret, char **ret_error) {
        return egress_policy_new_full(allowlist ? EGRESS_MODE_ALLOWLIST : EGRESS_MODE_NONE, allow, mirrors, NULL,
                                      ret, ret_error);
}

int egress_policy_new_full(EgressMode mode, char *const *allow, char *const *mirrors, const EgressRoute *route,
                           EgressPolicy **ret, char **ret_error) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
        size_t n_allow = 0, n_mirrors = 0;
        int r;

        for (char *const *i = allow; i && *i; i++)
                n_allow++;
        for (char *const *i = mirrors; i && *i; i++)
                n_mirrors++;
        if (n_allow > EGRESS_POLICY_ALLOW_MAX) {
                return egress_fail_printf(ret_error, "too many allow entries (at most %d)", EGRESS_POLICY_ALLOW_MAX);
        }
        if (n_mirrors > EGRESS_POLICY_MIRRORS_MAX) {
                return egress_fail_printf(ret_error, "too many mirrors (at most %d)", EGRESS_POLICY_MIRRORS_MAX);
        }

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->allowlist = mode != EGRESS_MODE_NONE;
        p->open = mode == EGRESS_MODE_OPEN;
        if (p->open && n_allow > 0)
                return egress_fail_reason(ret_error, "mode open takes no allow entries");
        r = policy_set_route(p, route, ret_error);
        if (r < 0)
                return r;
        p->entries = calloc(MAX(n_allow, (size_t) 1), sizeof(PolicyEntry));
        p->mirrors = calloc(MAX(n_mirrors, (size_t) 1), sizeof(Mirror));
        if (!p->entries || !p->mirrors)
                return -ENOMEM;

        for (size_t i = 0; i < n_allow; i++) {
                _cleanup_free_ char *why = NULL;

                r = entry_from_string(allow[i], &p->entries[i], ret_error ? &why : NULL);
                if (r == -EINVAL)
                        return item_error(ret_error, "allow entry", i, allow[i], why ?: "invalid");
                if (r < 0)
                        return r;
                p->n_entries++;
        }
        for (size_t i = 0; i < n_mirrors; i++) {
                _cleanup_free_ char *why = NULL;

                r = egress_mirror_parse(mirrors[i], &p->mirrors[i], ret_error ? &why : NULL);
                if (r == -EINVAL)
                        return item_error(ret_error, "mirror", i, mirrors[i], why ?: "invalid");
                if (r < 0)
                        return r;
                p->n_mirrors++;
        }

        /* Sorted and unique, so the same content in any order or spelling is the same policy. */
        p->n_entries = sort_unique(p->entries, p->n_entries, sizeof(PolicyEntry), entry_cmp, entry_drop);
        p->n_mirrors = sort_unique(p->mirrors, p->n_mirrors, sizeof(Mirror), mirror_cmp, mirror_drop);

        compute_revision(p);
        *ret = STEAL(p);
        return 0;
}

bool egress_policy_is_allowlist(const EgressPolicy *p) {
        return p->allowlist;
}

bool egress_policy_is_open(const EgressPolicy *p) {
        return p->open;
}

const char *egress_policy_upstream(const EgressPolicy *p) {
        return p->upstream;
}

bool egress_policy_upstream_auth(const EgressPolicy *p) {
        return p->upstream_auth;
}

bool egress_policy_via_upstream(const EgressPolicy *p, const char *canonical_host, uint16_t port) {
        return p->upstream && !egress_no_proxy_match(p->no_proxy, canonical_host, port);
}

const char *egress_policy_revision(const EgressPolicy *p) {
        return p->revision;
}

static int json_append(json_object *a, const char *s) {
        json_object *v = json_object_new_string(s);

        if (!v || json_object_array_add(a, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

json_object *egress_policy_to_json(const EgressPolicy *p) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *allow, *mirrors;

        o = json_object_new_object();
        if (!o)
                return NULL;
        if (json_add(o, "mode", json_object_new_string(p->open ? "open" : p->allowlist ? "allowlist" : "none")) < 0 ||
            json_add(o, "allow", allow = json_object_new_array()) < 0 ||
            json_add(o, "mirrors", mirrors = json_object_new_array()) < 0)
                return NULL;
        for (size_t i = 0; i < p->n_entries; i++)
                if (json_append(allow, p->entries[i].canonical) < 0)
                        return NULL;
        for (size_t i = 0; i < p->n_mirrors; i++)
                if (json_append(mirrors, p->mirrors[i].canonical) < 0)
                        return NULL;
        if ((p->upstream && json_add(o, "upstream", json_object_new_string(p->upstream)) < 0) ||
            (p->upstream_auth && json_add(o, "upstreamAuth", json_object_new_string(p->upstream_auth)) < 0) ||
            (p->no_proxy && json_add(o, "noProxy", json_object_new_string(p->no_proxy)) < 0))
                return NULL;
        if (json_add(o, "revision", json_object_new_string(p->revision)) < 0)
                return NULL;
        return STEAL(o);
}

/* A JSON array of strings → a NULL-terminated array of borrowed pointers (freed with free()). */
static int json_strings(json_object *a, const char *key, size_t max, const char ***ret, char **ret_error) {
        _cleanup_free_ const char **l = NULL;
        size_t n;

        if (!json_object_is_type(a, json_type_array))
                return egress_fail_printf(ret_error, "\"%s\" must be an array of strings", key);
        n = json_object_array_length(a);
        if (n > max)
                return egress_fail_printf(ret_error, "too many %s entries (at most %zu)", key, max);
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(a, i);

                if (!json_object_is_type(s, json_type_string))
                        return egress_fail_printf(ret_error, "\"%s\" must be an array of strings", key);
                /* An embedded NUL would cut the entry short and check less than was sent. */
                if (strlen(json_object_get_string(s)) != (size_t) json_object_get_string_len(s))
                        return egress_fail_printf(ret_error, "%s %zu contains a NUL byte", key, i);
                l[i] = json_object_get_string(s);
        }
        *ret = STEAL(l);
        return 0;
}

int egress_policy_from_json(json_object *o, EgressPolicy **ret, char **ret_error) {
        _cleanup_free_ const char **allow = NULL, **mirrors = NULL;
        json_object *mode = NULL;
        EgressRoute route = {};
        EgressMode m;
        bool have_mode = false;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return egress_fail_reason(ret_error, "the network policy must be a JSON object");

        json_object_object_foreach(o, key, val) {
                if (streq(key, "mode")) {
                        mode = val;
                        have_mode = true;
                } else if (streq(key, "allow")) {
                        r = json_strings(val, "allow", EGRESS_POLICY_ALLOW_MAX, &allow, ret_error);
                        if (r < 0)
                                return r;
                } else if (streq(key, "mirrors")) {
                        r = json_strings(val, "mirrors", EGRESS_POLICY_MIRRORS_MAX, &mirrors, ret_error);
                        if (r < 0)
                                return r;
                } else if (streq(key, "upstream") || streq(key, "upstreamAuth") || streq(key, "noProxy")) {
                        const char **slot = streq(key, "upstream") ? &route.upstream :
                                            streq(key, "upstreamAuth") ? &route.upstream_auth : &route.no_proxy;

                        if (!json_object_is_type(val, json_type_string) ||
                            strlen(json_object_get_string(val)) != (size_t) json_object_get_string_len(val))
                                return egress_fail_printf(ret_error, "\"%s\" must be a string", key);
                        *slot = json_object_get_string(val);
                } else if (streq(key, "revision")) {
                        if (!json_object_is_type(val, json_type_string))
                                return egress_fail_reason(ret_error, "\"revision\" must be a string");
                } else {
                        _cleanup_free_ char *escaped = str_escape_log(key, 64);

                        if (!escaped)
                                return -ENOMEM;
                        return egress_fail_printf(ret_error, "unknown key \"%s\"", escaped);
                }
        }

        if (!have_mode)
                return egress_fail_reason(ret_error, "\"mode\" is required (\"none\" or \"allowlist\")");
        if (!json_object_is_type(mode, json_type_string))
                return egress_fail_reason(ret_error, "\"mode\" must be \"none\", \"allowlist\" or \"open\"");
        if (streq(json_object_get_string(mode), "allowlist"))
                m = EGRESS_MODE_ALLOWLIST;
        else if (streq(json_object_get_string(mode), "none"))
                m = EGRESS_MODE_NONE;
        else if (streq(json_object_get_string(mode), "open"))
                m = EGRESS_MODE_OPEN;
        else
                return egress_fail_reason(ret_error, "\"mode\" must be \"none\", \"allowlist\" or \"open\"");

        return egress_policy_new_full(m, (char *const *) allow, (char *const *) mirrors, &route, ret, ret_error);
}

/* ---------------------------------------------------------------------------------------------
 * Matching */

int egress_policy_match(const EgressPolicy *p, const char *canonical_host, uint16_t port, const char **ret_reason) {
        const char *port_why = NULL;
        size_t hl;

        if (isempty(canonical_host) || port == 0)
                return -EINVAL;
        if (!p->allowlist) {
                if (ret_reason)
                        *ret_reason = "network policy mode is none";
                return 0;
        }

        if (p->open) {
                /* Any name; what it resolves to is still classified (egress_address_allowed()). */
                if (ret_reason)
                        *ret_reason = "allowed by mode open";
                return 1;
        }

        hl = strlen(canonical_host);
        for (size_t i = 0; i < p->n_entries; i++) {
                const PolicyEntry *e = &p->entries[i];
                size_t pl = strlen(e->rule.pattern);
                bool host_ok;

                if (e->rule.wildcard)
                        /* One or more whole labels, then ".pattern": never the apex, never "xpattern". */
                        host_ok = hl > pl + 1 &&
                                  canonical_host[hl - pl - 1] == '.' &&
                                  streq(canonical_host + hl - pl, e->rule.pattern);
                else
                        host_ok = streq(canonical_host, e->rule.pattern);
                if (!host_ok)
                        continue;
                if (e->rule.port == 0 || e->rule.port == port) {
                        if (ret_reason)
                                *ret_reason = e->allow_reason;
                        return 1;
                }
                if (!port_why)
                        port_why = e->port_reason;
        }

        if (ret_reason)
                *ret_reason = port_why ?: "not in the allowlist";
        return 0;
}
