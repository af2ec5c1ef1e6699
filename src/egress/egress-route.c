/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The gateway's upstream route, pure: an upstream HTTP proxy's URL (split by
 * http_parser_parse_url(), then held to stricter rules here) and the no_proxy list that sends some
 * targets direct. May use util/ only.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-policy-internal.h"
#include "util/macro.h"
#include "util/string-util.h"

void egress_upstream_done(EgressUpstream *u) {
        if (!u)
                return;
        free(u->host);
        free(u->url);
        if (u->authorization) {
                explicit_bzero(u->authorization, strlen(u->authorization));
                free(u->authorization);
        }
        *u = (EgressUpstream) {};
}

/* A DNS name of LDH labels (one label is fine: "proxy", "localhost"), lower-cased into @ret. */
static bool upstream_name_ok(const char *s, size_t n) {
        size_t label = 0;

        if (n == 0 || n > DNS_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (c == '.') {
                        if (label == 0 || s[i - 1] == '-')
                                return false;
                        label = 0;
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
                if (c == '-' && label == 0)
                        return false;
                if (++label > DNS_LABEL_MAX)
                        return false;
        }
        return label > 0 && s[n - 1] != '-';
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char) (c | 0x20);
        return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The userinfo "user:password", percent-decoded (%XX only), as "Basic <base64>". */
static int upstream_authorization(const char *s, size_t n, char **ret, const char **why) {
        _cleanup_free_ char *plain = NULL, *out = NULL;
        size_t k = 0;

        plain = malloc(n + 1);
        if (!plain)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (s[i] != '%') {
                        plain[k++] = s[i];
                        continue;
                }
                if (i + 2 >= n || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0 ||
                    (hex_value(s[i + 1]) == 0 && hex_value(s[i + 2]) == 0)) {
                        explicit_bzero(plain, k);
                        *why = "malformed percent-encoding in the proxy URL's credentials";
                        return -EINVAL;
                }
                plain[k++] = (char) (hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
                i += 2;
        }
        plain[k] = '\0';
        if (!memchr(plain, ':', k) || plain[0] == ':') {
                explicit_bzero(plain, k);
                *why = "the proxy URL's credentials must be user:password";
                return -EINVAL;
        }
        out = malloc(strlen("Basic ") + BASE64_ENCODE_RAW_LENGTH(k) + 1);
        if (!out) {
                explicit_bzero(plain, k);
                return -ENOMEM;
        }
        memcpy(out, "Basic ", strlen("Basic "));
        base64_encode_raw((char *) out + strlen("Basic "), k, (const uint8_t *) plain);
        out[strlen("Basic ") + BASE64_ENCODE_RAW_LENGTH(k)] = '\0';
        explicit_bzero(plain, k);
        *ret = STEAL(out);
        return 0;
}

static const char *upstream_check_bytes(const char *url) {
        for (const char *p = url; *p; p++)
                if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f || *p == '\\')
                        return "control characters, spaces, '\\' and non-ASCII bytes are not allowed in the proxy URL";
        return NULL;
}

int egress_upstream_parse(const char *url, EgressUpstream *ret, const char **ret_reason) {
        _cleanup_(egress_upstream_done) EgressUpstream u = {};
        struct http_parser_url p;
        const char *why = NULL, *host;
        size_t n, host_len;
        char buf[INET6_ADDRSTRLEN];
        uint8_t addr[16];
        int r;

        if (!ret_reason)
                ret_reason = &why;
        if (isempty(url) || strlen(url) > 2048) {
                *ret_reason = "the proxy URL must be a non-empty string of at most 2048 characters";
                return -EINVAL;
        }
        if ((*ret_reason = upstream_check_bytes(url)))
                return -EINVAL;
        n = strlen(url);
        http_parser_url_init(&p);
        if (http_parser_parse_url(url, n, 0, &p) != 0 || !(p.field_set & (1 << UF_SCHEMA)) ||
            !(p.field_set & (1 << UF_HOST))) {
                *ret_reason = "the proxy URL must be http://[user:password@]host:port";
                return -EINVAL;
        }
        if (p.field_data[UF_SCHEMA].len != 4 || strncasecmp(url + p.field_data[UF_SCHEMA].off, "http", 4) != 0) {
                *ret_reason = "the proxy URL's scheme must be http (TLS to the proxy is not supported)";
                return -EINVAL;
        }
        if ((p.field_set & ((1 << UF_QUERY) | (1 << UF_FRAGMENT))) ||
            ((p.field_set & (1 << UF_PATH)) &&
             (p.field_data[UF_PATH].len != 1 || url[p.field_data[UF_PATH].off] != '/'))) {
                *ret_reason = "the proxy URL must have no path, query or fragment";
                return -EINVAL;
        }
        if (!(p.field_set & (1 << UF_PORT)) ||
            egress_port_parse(url + p.field_data[UF_PORT].off, p.field_data[UF_PORT].len, &u.port) < 0) {
                *ret_reason = "the proxy URL needs a port, 1-65535 in plain decimal";
                return -EINVAL;
        }

        host = url + p.field_data[UF_HOST].off;
        host_len = p.field_data[UF_HOST].len;
        u.host = strndup(host, host_len);
        if (!u.host)
                return -ENOMEM;
        if (host > url && host[-1] == '[') {
                if (inet_pton(AF_INET6, u.host, addr) != 1) {
                        *ret_reason = "the proxy URL's host is not a valid IPv6 address";
                        return -EINVAL;
                }
                if (!inet_ntop(AF_INET6, addr, buf, sizeof(buf)))
                        return -EINVAL;
                free(u.host);
                u.host = strdup(buf);
                if (!u.host || asprintf(&u.url, "http://[%s]:%u", u.host, (unsigned) u.port) < 0)
                        return -ENOMEM;
        } else {
                /* A dotted quad, or a name: anything else that ends in a number is refused
                 * (2130706433, 0x7f.1: resolvers read those differently). */
                const char *last = strrchr(u.host, '.');
                bool numeric = (last ? last[1] : u.host[0]) >= '0' && (last ? last[1] : u.host[0]) <= '9';

                if (numeric ? inet_pton(AF_INET, u.host, addr) != 1 : !upstream_name_ok(u.host, host_len)) {
                        *ret_reason = "the proxy URL's host must be a DNS name, an IPv4 address or [an IPv6 address]";
                        return -EINVAL;
                }
                for (char *c = u.host; *c; c++)
                        if (*c >= 'A' && *c <= 'Z')
                                *c = (char) (*c + 'a' - 'A');
                if (asprintf(&u.url, "http://%s:%u", u.host, (unsigned) u.port) < 0)
                        return -ENOMEM;
        }
        if (p.field_set & (1 << UF_USERINFO)) {
                r = upstream_authorization(url + p.field_data[UF_USERINFO].off, p.field_data[UF_USERINFO].len,
                                           &u.authorization, ret_reason);
                if (r < 0)
                        return r;
        }
        *ret = u;
        u = (EgressUpstream) {};
        return 0;
}

/* One entry of a no_proxy list against @host: the name itself or a sub-domain, any case; a
 * leading dot is the same as none ("example.org" and ".example.org" both cover a.example.org);
 * ":port" limits it to that port. */
static bool no_proxy_entry_match(const char *e, size_t n, const char *host, uint16_t port) {
        const char *colon = memchr(e, ':', n);
        size_t hl = strlen(host);

        if (colon) {
                uint16_t p;

                /* IPv6 ranges (several colons) never match a name; nor does a bad port. */
                if (memchr(colon + 1, ':', (size_t) (e + n - colon - 1)) ||
                    egress_port_parse(colon + 1, (size_t) (e + n - colon - 1), &p) < 0 || p != port)
                        return false;
                n = (size_t) (colon - e);
        }
        while (n > 0 && e[0] == '.') {
                e++;
                n--;
        }
        while (n > 0 && e[n - 1] == '.')
                n--;
        if (n == 0 || n > hl || memchr(e, '/', n))
                return false;
        if (strncasecmp(host + hl - n, e, n) != 0)
                return false;
        return hl == n || host[hl - n - 1] == '.';
}

bool egress_no_proxy_match(const char *no_proxy, const char *host, uint16_t port) {
        const char *p = no_proxy;

        if (isempty(no_proxy) || isempty(host))
                return false;
        while (*p) {
                size_t n;

                p += strspn(p, ", \t");
                n = strcspn(p, ", \t");
                if (n == 0)
                        break;
                if (n == 1 && p[0] == '*')
                        return true;
                if (no_proxy_entry_match(p, n, host, port))
                        return true;
                p += n;
        }
        return false;
}
