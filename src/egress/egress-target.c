/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Request targets of the egress gateway: a CONNECT authority or an absolute http:// URI, split by
 * http_parser_parse_url() and then held to the host-name rules of the policy. Pure. May use util/
 * only.
 */

#include <errno.h>
#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-policy-internal.h"
#include "util/macro.h"
#include "util/string-util.h"

/* ---------------------------------------------------------------------------------------------
 * Request targets */

void egress_target_done(EgressTarget *t) {
        if (!t)
                return;
        free(t->host);
        free(t->path_and_query);
        *t = (EgressTarget) {};
}

/* Printable ASCII only, and no '\' (parsers disagree on it: WHATWG reads it as '/'). */
static const char *check_target_bytes(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];

                if (c <= 0x20 || c >= 0x7f)
                        return "control characters, spaces and non-ASCII bytes are not allowed in the request target";
                if (c == '\\')
                        return "'\\' is not allowed in the request target";
        }
        return NULL;
}

/*
 * Checks of the authority "host[:port]" shared by both forms, before the parser runs, so the
 * reason names the problem. @n is the authority's length.
 */
static const char *check_authority(const char *s, size_t n, bool port_required) {
        const char *colon = memchr(s, ':', n);

        if (n == 0)
                return "empty host name";
        if (memchr(s, '@', n))
                return "userinfo ('@') is not allowed in the authority";
        if (s[0] == '[')
                return "IP literals are not allowed";
        if (memchr(s, '%', n))
                return "percent-encoding is not allowed in host names";
        if (!colon)
                return port_required ? "a port is required (host:port)" : NULL;
        if (colon == s)
                return "empty host name";
        if (colon + 1 == s + n)
                return "empty port";
        if (memchr(colon + 1, ':', (size_t) (s + n - colon - 1)))
                return "more than one port";
        return NULL;
}

/*
 * When http_parser_parse_url() refused an authority that passed check_authority(): name the part
 * it did not like, if our own checks agree, so the reason is useful.
 */
static const char *diagnose_authority(const char *s, size_t n) {
        _cleanup_free_ char *host = NULL, *canonical = NULL;
        const char *colon = memchr(s, ':', n), *why = NULL;
        uint16_t port;

        if (colon && egress_port_parse(colon + 1, (size_t) (s + n - colon - 1), &port) < 0)
                return "the port must be 1-65535 in plain decimal, no leading zero";
        host = strndup(s, colon ? (size_t) (colon - s) : n);
        if (host && egress_host_canonicalize_full(host, &canonical, &why) < 0 && why)
                return why;
        return "malformed authority";
}

/*
 * After http_parser_parse_url() succeeded: its host (and port) fields must cover exactly
 * [@off, @off + @n) of @s, with no userinfo; then the stricter host and port checks.
 */
static int target_from_fields(const char *s, const struct http_parser_url *u, size_t off, size_t n,
                              uint16_t default_port, EgressTarget *t, const char **why) {
        uint16_t host_off, host_len;
        _cleanup_free_ char *host = NULL;
        uint16_t port = default_port;
        int r;

        if ((u->field_set & (1 << UF_USERINFO)) || !(u->field_set & (1 << UF_HOST))) {
                *why = "userinfo ('@') is not allowed in the authority";
                return -EINVAL;
        }
        host_off = u->field_data[UF_HOST].off;
        host_len = u->field_data[UF_HOST].len;
        if (host_off != off || host_len > n) {
                *why = "malformed authority";
                return -EINVAL;
        }
        if (u->field_set & (1 << UF_PORT)) {
                uint16_t port_off = u->field_data[UF_PORT].off, port_len = u->field_data[UF_PORT].len;

                if (port_off != host_off + host_len + 1 || (size_t) port_off + port_len != off + n) {
                        *why = "malformed authority";
                        return -EINVAL;
                }
                /* http_parser takes ":0" and ":0443"; we do not. */
                if (egress_port_parse(s + port_off, port_len, &port) < 0) {
                        *why = "the port must be 1-65535 in plain decimal, no leading zero";
                        return -EINVAL;
                }
        } else if ((size_t) host_len != n) {
                *why = "malformed authority";
                return -EINVAL;
        }

        host = strndup(s + host_off, host_len);
        if (!host)
                return -ENOMEM;
        r = egress_host_canonicalize_full(host, &t->host, why);
        if (r < 0)
                return r;
        t->port = port;
        return 0;
}

int egress_target_parse_connect(const char *authority, EgressTarget *ret, const char **ret_reason) {
        _cleanup_(egress_target_done) EgressTarget t = {};
        struct http_parser_url u;
        const char *why = NULL;
        size_t n;
        int r;

        if (isempty(authority)) {
                why = "empty CONNECT target";
                goto invalid;
        }
        n = strlen(authority);
        if (n > EGRESS_TARGET_MAX) {
                why = "request target too long";
                goto invalid;
        }
        why = check_target_bytes(authority, n);
        if (why)
                goto invalid;
        if (strpbrk(authority, "/?#")) {
                why = "a CONNECT target is host:port only (no scheme, path or query)";
                goto invalid;
        }
        why = check_authority(authority, n, true);
        if (why)
                goto invalid;

        http_parser_url_init(&u);
        if (http_parser_parse_url(authority, n, 1, &u) != 0) {
                why = diagnose_authority(authority, n);
                goto invalid;
        }
        r = target_from_fields(authority, &u, 0, n, 0, &t, &why);
        if (r == -EINVAL)
                goto invalid;
        if (r < 0)
                return r;

        *ret = t;
        t = (EgressTarget) {};
        return 0;

invalid:
        if (ret_reason)
                *ret_reason = why;
        return -EINVAL;
}

int egress_target_parse_absolute(const char *uri, EgressTarget *ret, const char **ret_reason) {
        _cleanup_(egress_target_done) EgressTarget t = {};
        struct http_parser_url u;
        const char *why = NULL, *auth, *rest;
        size_t n, auth_len;
        int r;

        if (isempty(uri)) {
                why = "empty request target";
                goto invalid;
        }
        n = strlen(uri);
        if (n > EGRESS_TARGET_MAX) {
                why = "request target too long";
                goto invalid;
        }
        why = check_target_bytes(uri, n);
        if (why)
                goto invalid;
        if (strncasecmp(uri, "http://", 7) != 0) {
                if (strncasecmp(uri, "https://", 8) == 0)
                        why = "https targets must use CONNECT (the gateway does not originate TLS)";
                else if (uri[0] == '/')
                        why = "the request target must be an absolute http:// URI";
                else
                        why = "only http:// URIs are forwarded";
                goto invalid;
        }
        if (strchr(uri, '#')) {
                why = "fragments are not allowed in the request target";
                goto invalid;
        }
        auth = uri + 7;
        auth_len = strcspn(auth, "/?");
        rest = auth + auth_len;
        why = check_authority(auth, auth_len, false);
        if (why)
                goto invalid;

        http_parser_url_init(&u);
        if (http_parser_parse_url(uri, n, 0, &u) != 0) {
                why = diagnose_authority(auth, auth_len);
                if (streq(why, "malformed authority"))
                        why = "malformed URI";
                goto invalid;
        }
        if (!(u.field_set & (1 << UF_SCHEMA)) || u.field_data[UF_SCHEMA].off != 0 ||
            u.field_data[UF_SCHEMA].len != 4 || (u.field_set & (1 << UF_FRAGMENT))) {
                why = "malformed URI";
                goto invalid;
        }
        r = target_from_fields(uri, &u, 7, auth_len, 80, &t, &why);
        if (r == -EINVAL)
                goto invalid;
        if (r < 0)
                return r;

        /* The path and query exactly as sent, "/" if the URI had no path. */
        t.path_and_query = rest[0] == '/' ? strdup(rest) : egress_strprintf("/%s", rest);
        if (!t.path_and_query)
                return -ENOMEM;

        *ret = t;
        t = (EgressTarget) {};
        return 0;

invalid:
        if (ret_reason)
                *ret_reason = why;
        return -EINVAL;
}
