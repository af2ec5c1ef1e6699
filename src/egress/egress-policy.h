/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The egress gateway's policy, pure: allowlist entries, host matching, address classes, request
 * targets. Implemented by egress-rule.c (entries, host names), egress-policy.c (the policy, its
 * JSON, matching), egress-address.c (mirrors, address classes) and egress-target.c (targets).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <json-c/json.h>

/*
 * Limits. An allowlist entry or a host name is at most 253 octets (without the one trailing dot
 * that is stripped); a request target is at most EGRESS_TARGET_MAX bytes (the daemon's request
 * line cap, and well under the 64 KiB that http_parser's 16-bit offsets can describe).
 */
#define EGRESS_POLICY_ALLOW_MAX 1024
#define EGRESS_POLICY_MIRRORS_MAX 64
#define EGRESS_ENTRY_INPUT_MAX 1024
#define EGRESS_TARGET_MAX 8192
#define EGRESS_REVISION_LENGTH 16

/*
 * One allowlist entry, canonical: @pattern is a lower-case ASCII (A-label) DNS name without the
 * trailing dot and without the "*." of a wildcard; @wildcard means "sub-domains of @pattern,
 * never @pattern itself"; @port pins the entry to one port (0 = any port).
 */
typedef struct EgressRule {
        char *pattern;
        bool wildcard;
        uint16_t port;
} EgressRule;

/* The policy: mode none|allowlist, rules, mirror CIDRs, content revision. Immutable once built. */
typedef struct EgressPolicy EgressPolicy;

/*
 * egress_rule_parse() - parse one allowlist entry: "example.org", "*.example.org",
 * "example.org:443", "*.example.org:8443", "EXAMPLE.ORG." (case-folded, one trailing dot
 * stripped), "bücher.example" (converted to its A-label with libidn2: UTS-46 non-transitional,
 * NFC; the result is checked again as strict LDH). Refused: IP literals however written
 * (2130706433, 0x7f000001, 0177.0.0.1, 127.1, [::1]: any name whose last label is a number),
 * single-label names, "*" anywhere but as the whole first label, "*.org" (a wildcard needs two
 * labels under it), '_', empty or over-long labels (> 63), names > 253 octets, leading or
 * trailing hyphens, invalid A-labels ("xn--zz"), ports that are not canonical decimal 1-65535.
 * @ret is written only on success; free it with egress_rule_done().
 * @ret_error: if not NULL, receives a newly allocated human-readable reason on -EINVAL.
 * Return: 0, -EINVAL (bad entry), or -ENOMEM.
 */
int egress_rule_parse(const char *entry, EgressRule *ret, char **ret_error);
void egress_rule_done(EgressRule *r);
/* egress_rule_to_string() - the canonical entry, "*.example.org:443". Return: new string or NULL (OOM). */
char *egress_rule_to_string(const EgressRule *r);

/*
 * egress_policy_new() - build a policy.
 * @allowlist: false for mode "none" (no network at all: every match and address is denied; the
 *   lists are still validated and kept, so a GET shows what a PUT stored), true for "allowlist".
 * @allow: NULL-terminated allowlist entries (see egress_rule_parse()), or NULL; at most
 *   EGRESS_POLICY_ALLOW_MAX. Duplicates after canonicalisation are merged.
 * @mirrors: NULL-terminated CIDRs ("127.0.0.0/8", "10.1.2.0/24", "fd00::/8"; a bare address means
 *   /32 or /128), or NULL; at most EGRESS_POLICY_MIRRORS_MAX. Host bits must be zero (a range with
 *   host bits set is refused, naming the range that was probably meant); the prefix must be /8 or
 *   longer; ranges overlapping ::ffff:0:0/96 are refused (write IPv4 ranges in IPv4 form).
 * @ret_error: if not NULL, receives a newly allocated message ("allow entry \"a_b.org\": ...") on
 *   -EINVAL; not written otherwise.
 * Return: 0, -EINVAL (bad entry or mirror, too many), -ENOMEM.
 */
int egress_policy_new(bool allowlist, char *const *allow, char *const *mirrors, EgressPolicy **ret, char **ret_error);
/*
 * The upstream route of a policy (optional): the gateway dials allowed targets through an upstream
 * HTTP proxy (CONNECT host:port for tunnels, absolute-form for plain HTTP) instead of directly.
 * @upstream: the canonical URL from egress_upstream_parse() (no userinfo), or NULL for direct.
 * @upstream_auth: an opaque tag standing for the upstream's credentials (the secret itself never
 *   enters the policy: the gateway reads it from a file of its own), or NULL for none; it is part
 *   of the revision, so other credentials make another gateway instance.
 * @no_proxy: a no_proxy list (see egress_no_proxy_match()), or NULL.
 */
typedef struct EgressRoute {
        const char *upstream;
        const char *upstream_auth;
        const char *no_proxy;
} EgressRoute;

typedef enum EgressMode {
        EGRESS_MODE_NONE,
        EGRESS_MODE_ALLOWLIST,
        EGRESS_MODE_OPEN,       /* any host name; every resolved address still checked */
} EgressMode;

/*
 * egress_policy_new_full() - as egress_policy_new(), with mode open and a route. In mode open the
 * allowlist is ignored (it must be empty) and every canonical host name matches; addresses are
 * classified exactly as in mode allowlist (only global unicast, or the mirrors).
 * Return: 0, -EINVAL (with @ret_error), -ENOMEM.
 */
int egress_policy_new_full(EgressMode mode, char *const *allow, char *const *mirrors, const EgressRoute *route,
                           EgressPolicy **ret, char **ret_error);

/* egress_policy_free() - accepts NULL; returns NULL. (Callers declare their own freep with SR_DEFINE_FREE_FUNC.) */
EgressPolicy *egress_policy_free(EgressPolicy *p);

/* egress_policy_is_allowlist() - true in modes "allowlist" and "open" (a network), false in "none". */
bool egress_policy_is_allowlist(const EgressPolicy *p);
bool egress_policy_is_open(const EgressPolicy *p);
/* The route: the upstream's canonical URL (NULL: direct), whether it takes credentials. */
const char *egress_policy_upstream(const EgressPolicy *p);
bool egress_policy_upstream_auth(const EgressPolicy *p);
/* egress_policy_via_upstream() - does a request to @canonical_host:@port go through the upstream
 * (one is set and no_proxy does not name the host)? */
bool egress_policy_via_upstream(const EgressPolicy *p, const char *canonical_host, uint16_t port);

/*
 * egress_policy_revision() - EGRESS_REVISION_LENGTH lower-case hex digits: the start of the
 * SHA-256 of the canonical content (mode, sorted unique canonical entries, sorted unique canonical
 * mirrors). The same content in any order, case or spelling gives the same revision. Owned by @p.
 */
const char *egress_policy_revision(const EgressPolicy *p);

/*
 * egress_policy_to_json() - {"mode": "none"|"allowlist", "allow": [canonical, sorted],
 * "mirrors": [canonical, sorted], "revision": "..."}. Return: new object, or NULL on OOM.
 */
json_object *egress_policy_to_json(const EgressPolicy *p);

/*
 * egress_policy_from_json() - the PUT /api/network-policy body and the snapshot file.
 * "mode" is required ("none" or "allowlist"); "allow" and "mirrors" are optional arrays of
 * strings; "revision" is accepted and ignored (it is derived from the content, so a GET answer can
 * be PUT back; a caller reading a snapshot may compare it with egress_policy_revision()); any
 * other key is refused, so a typo cannot silently empty a list.
 * Return: 0, -EINVAL (with @ret_error as for egress_policy_new()), -ENOMEM.
 */
int egress_policy_from_json(json_object *o, EgressPolicy **ret, char **ret_error);

/*
 * egress_host_canonicalize_full() - the one canonical form of a request's host: lower-case, one
 * trailing dot stripped; refused unless it is an ASCII LDH DNS name of two or more labels.
 * Refused with a reason: empty names, percent signs (no percent-decoding is ever done), '@',
 * '\', spaces, control bytes, non-ASCII bytes (clients send A-labels), brackets and colons (IPv6
 * literals, zone ids), '_', '*', empty labels, labels > 63 or names > 253 octets, leading or
 * trailing hyphens, IP literals in any form (a last label that is a number: decimal, octal or
 * 0x-hex, as WHATWG's "ends in a number"), single-label names (they can match no entry and the
 * resolver would try its search list).
 * Gateway note: the gateway clears the resolver search list (LOCALDOMAIN="") so that no search
 * domain is appended; a trailing dot would also skip /etc/hosts in glibc 2.36.
 * @ret is written only on success. @ret_reason: if not NULL, a static reason on -EINVAL.
 * Return: 0, -EINVAL, -ENOMEM.
 */
int egress_host_canonicalize_full(const char *host, char **ret, const char **ret_reason);
/* egress_host_canonicalize() - the same without the reason. */
static inline int egress_host_canonicalize(const char *host, char **ret) {
        return egress_host_canonicalize_full(host, ret, NULL);
}

/*
 * egress_policy_match() - may @canonical_host (from egress_host_canonicalize() or an EgressTarget) be reached on
 * @port? Labels match exactly: "*.example.org" covers "a.example.org" and "a.b.example.org",
 * not "example.org", "badexample.org" or "example.org.evil.com". A host that is not canonical
 * (upper case, trailing dot) matches nothing, so it fails closed.
 * @ret_reason: if not NULL, "allowed by example.org:443", "not in the allowlist",
 *   "port not allowed by example.org:443" (the first entry whose host matched), or "network
 *   policy mode is none". Static or owned by @p: valid while @p lives.
 * Return: 1 allowed, 0 denied, -EINVAL if @canonical_host is NULL/empty or @port is 0.
 */
int egress_policy_match(const EgressPolicy *p, const char *canonical_host, uint16_t port, const char **ret_reason);

/*
 * egress_address_allowed() - may the gateway connect to @sa (each resolved A/AAAA answer, and
 * then connect to exactly the address approved)? Only global unicast is allowed: IPv4 minus the
 * special-purpose ranges of SECURITY.md §3; IPv6 only inside 2000::/3, minus 2001::/23 (Teredo,
 * ORCHID, benchmarking), 2001:db8::/32, 2002::/16 (6to4) and 3fff::/20 (documentation).
 * Everything that embeds IPv4 (::ffff:0:0/96 mapped, ::/96 compatible, 64:ff9b::/96 and
 * 64:ff9b:1::/48 NAT64, Teredo, 6to4) is refused. An address inside a mirror CIDR of the same
 * family is allowed, except IPv4-mapped IPv6 addresses, unspecified addresses (0.0.0.0/8, ::),
 * multicast, broadcast and 240/4, which no mirror exempts.
 * @ret_reason: if not NULL, "global unicast", "inside mirror 127.0.0.0/8", "loopback
 *   (127.0.0.0/8)", ...; static or owned by @p.
 * Return: 1 allowed, 0 denied (also in mode none and for families other than AF_INET/AF_INET6),
 *   -EINVAL if @sa is NULL or @len is too short for its family.
 */
int egress_address_allowed(const EgressPolicy *p, const struct sockaddr *sa, socklen_t len, const char **ret_reason);

/*
 * The target of one gateway request. @host is canonical already (egress_host_canonicalize() gives
 * it back unchanged: the canonical form is a fixed point); @port is
 * 1-65535; @path_and_query is "/..." (the path, "/" if the URI had none, plus "?query") for an
 * absolute-URI forward request, NULL for CONNECT.
 *
 * Gateway note: the authority comes from the request target only. A `Host:` header is never
 * consulted for the decision (a mismatched `Host: 169.254.169.254` changes nothing); when
 * forwarding, the gateway sets Host from @host (and @port if not 80).
 */
typedef struct EgressTarget {
        char *host;
        uint16_t port;
        char *path_and_query;
} EgressTarget;

/*
 * egress_target_parse_connect() - a CONNECT request target, "host:port". The port is mandatory,
 * canonical decimal 1-65535 (":0", ":65536", ":-1", ":+443", ":0443", ":443:80", ":" refused);
 * no userinfo ('@'), no path, no IP literal. Parsed with http_parser_parse_url(), then every
 * field checked again here.
 * @ret is written only on success. @ret_reason: if not NULL, a static reason on -EINVAL.
 * Return: 0, -EINVAL, -ENOMEM.
 */
int egress_target_parse_connect(const char *authority, EgressTarget *ret, const char **ret_reason);

/*
 * egress_target_parse_absolute() - an absolute-form request target, "http://host[:port]/path?q".
 * Only the http scheme (any case) is forwarded; "https://" in absolute form is refused (use
 * CONNECT: the gateway never originates or intercepts TLS), and so are file:, ftp:, gopher: and
 * every other scheme. Refused too: userinfo ("http://u@host/", "http://a\@b/"), fragments, bytes
 * outside printable ASCII (spaces, control bytes, non-ASCII) and '\' anywhere in the target, and
 * the host and port checks of the CONNECT form. The port defaults to 80.
 * Return: as egress_target_parse_connect().
 */
int egress_target_parse_absolute(const char *uri, EgressTarget *ret, const char **ret_reason);

/*
 * An upstream HTTP proxy. @host is a DNS name (lower case; one label is fine), an IPv4 address or
 * an IPv6 address (without brackets): the operator's or the API server's choice, so loopback and
 * private addresses are fine here. @url is canonical and carries no credentials:
 * "http://proxy.example:3128", "http://[::1]:3128". @authorization is "Basic <base64>" of the
 * percent-decoded userinfo "user:password", or NULL: a secret, never logged.
 */
typedef struct EgressUpstream {
        char *host;
        uint16_t port;
        char *url;
        char *authorization;
} EgressUpstream;

/*
 * egress_upstream_parse() - "http://[user:password@]host:port[/]", parsed by
 * http_parser_parse_url() and then checked strictly: the scheme http (any case) only, a port
 * (canonical decimal 1-65535) required, no path but "/", no query, no fragment, no spaces,
 * control bytes, '\' or non-ASCII; the host a DNS name of LDH labels, a dotted-quad IPv4
 * address or a bracketed IPv6 address (other numeric forms are refused); userinfo must be
 * user:password with a non-empty user (%XX decoded, %00 refused).
 * Return: 0, -EINVAL with a static *@ret_reason (which never quotes the credentials), -ENOMEM.
 */
int egress_upstream_parse(const char *url, EgressUpstream *ret, const char **ret_reason);
/* egress_upstream_done() - free the fields (the credentials wiped first) and reset. Accepts NULL. */
void egress_upstream_done(EgressUpstream *u);

/*
 * egress_no_proxy_match() - does @no_proxy (curl's syntax: entries separated by commas or blanks;
 * "*" alone matches everything; "example.org" and ".example.org" match that name and its
 * sub-domains, any case, on label boundaries; "host:port" only on that port; IP addresses and
 * ranges never match, as targets are names) name @host (canonical) on @port?
 */
bool egress_no_proxy_match(const char *no_proxy, const char *host, uint16_t port);

/* egress_target_done() - free the fields of @t and reset it. Accepts NULL. */
void egress_target_done(EgressTarget *t);
