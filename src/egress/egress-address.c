/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Addresses in the egress policy: mirrors (the internal CIDRs an allowlist may reach) and the
 * classification of a resolved address against the refused special-purpose ranges (SECURITY.md
 * §3), which egress_address_allowed() decides with. Pure. May use util/ only.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-policy-internal.h"
#include "util/macro.h"
#include "util/string-util.h"

/* ---------------------------------------------------------------------------------------------
 * Mirrors */

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefixlen) {
        unsigned full = prefixlen / 8, rest = prefixlen % 8;

        if (memcmp(a, net, full) != 0)
                return false;
        if (rest == 0)
                return true;
        return ((a[full] ^ net[full]) & (uint8_t) (0xff << (8 - rest))) == 0;
}

static bool host_bits_zero(const uint8_t *a, unsigned bytes, unsigned prefixlen) {
        for (unsigned bit = prefixlen; bit < bytes * 8; bit++)
                if (a[bit / 8] & (0x80 >> (bit % 8)))
                        return false;
        return true;
}

static void clear_host_bits(uint8_t *a, unsigned bytes, unsigned prefixlen) {
        for (unsigned bit = prefixlen; bit < bytes * 8; bit++)
                a[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
}

static const uint8_t v4mapped_prefix[16] = { [10] = 0xff, [11] = 0xff };

void egress_mirror_done(Mirror *m) {
        free(m->canonical);
        free(m->reason);
        *m = (Mirror) {};
}

/*
 * "10.1.2.0/24", "fd00::/8", or a bare address (/32, /128). Host bits must be zero: a range with
 * host bits set is refused rather than silently widened, naming the range probably meant.
 */
int egress_mirror_parse(const char *s, Mirror *ret, char **ret_error) {
        char addr[MIRROR_INPUT_MAX + 1], buf[INET6_ADDRSTRLEN];
        const char *slash;
        Mirror m = {};
        unsigned bytes, prefixlen;
        size_t n;

        if (isempty(s))
                return egress_fail_reason(ret_error, "empty address range");
        n = strlen(s);
        if (n > MIRROR_INPUT_MAX)
                return egress_fail_reason(ret_error, "address range too long");

        slash = strchr(s, '/');
        n = slash ? (size_t) (slash - s) : n;
        memcpy(addr, s, n);
        addr[n] = '\0';

        if (strchr(addr, ':')) {
                m.family = AF_INET6;
                bytes = 16;
                if (inet_pton(AF_INET6, addr, m.addr) != 1)
                        return egress_fail_reason(ret_error, "not an IPv6 address (zone ids are not allowed)");
        } else {
                m.family = AF_INET;
                bytes = 4;
                /* inet_pton() takes only four decimal octets: no 127.1, 0x7f.0.0.1 or 0177.0.0.1. */
                if (inet_pton(AF_INET, addr, m.addr) != 1)
                        return egress_fail_reason(ret_error, "not an IPv4 address in dotted-quad form");
        }

        prefixlen = bytes * 8;
        if (slash) {
                const char *p = slash + 1;
                size_t l = strlen(p);
                unsigned v = 0;

                if (l == 0 || l > 3 || (l > 1 && p[0] == '0'))
                        return egress_fail_reason(ret_error, "the prefix length must be plain decimal");
                for (size_t i = 0; i < l; i++) {
                        if (p[i] < '0' || p[i] > '9')
                                return egress_fail_reason(ret_error, "the prefix length must be plain decimal");
                        v = v * 10 + (unsigned) (p[i] - '0');
                }
                if (v > bytes * 8)
                        return egress_fail_reason(ret_error, m.family == AF_INET ? "the prefix length must be 8-32" :
                                                                         "the prefix length must be 8-128");
                prefixlen = v;
        }
        /* A mirror is one internal host or network; /0-/7 would switch the address policy off. */
        if (prefixlen < MIRROR_PREFIX_MIN)
                return egress_fail_reason(ret_error, m.family == AF_INET ? "the prefix length must be 8-32" :
                                                                 "the prefix length must be 8-128");
        if (m.family == AF_INET6 && prefix_match(m.addr, v4mapped_prefix, MIN(prefixlen, 96u)))
                return egress_fail_reason(ret_error,
                                   "ranges overlapping ::ffff:0:0/96 are not allowed; write IPv4 ranges in IPv4 form");
        if (!host_bits_zero(m.addr, bytes, prefixlen)) {
                uint8_t net[16];

                memcpy(net, m.addr, sizeof(net));
                clear_host_bits(net, bytes, prefixlen);
                (void) inet_ntop(m.family, net, buf, sizeof(buf));
                return egress_fail_printf(ret_error, "host bits are set; did you mean %s/%u?", buf, prefixlen);
        }
        m.prefixlen = prefixlen;

        (void) inet_ntop(m.family, m.addr, buf, sizeof(buf));
        m.canonical = egress_strprintf("%s/%u", buf, prefixlen);
        m.reason = m.canonical ? egress_strprintf("inside mirror %s", m.canonical) : NULL;
        if (!m.reason) {
                egress_mirror_done(&m);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

static bool mirror_contains(const Mirror *m, int family, const uint8_t *a) {
        return m->family == family && prefix_match(a, m->addr, m->prefixlen);
}

/* ---------------------------------------------------------------------------------------------
 * Addresses. Provenance: IANA IPv4/IPv6 Special-Purpose Address Registries (RFC 6890 and
 * updates, RFC 9637 for 3fff::/20), smokescreen's classifier, SECURITY.md §3. First match wins. */

typedef struct AddressRange {
        uint8_t net[16];
        unsigned prefixlen;
        const char *reason;
        bool never_exempt;      /* no mirror can allow it: not a unicast destination at all */
} AddressRange;

#define V4(a, b, c, d) { a, b, c, d }

static const AddressRange ipv4_denied[] = {
        { V4(255, 255, 255, 255), 32, "broadcast (255.255.255.255)", true },
        { V4(0, 0, 0, 0), 8, "\"this network\" (0.0.0.0/8)", true },
        { V4(10, 0, 0, 0), 8, "private (10.0.0.0/8)", false },
        { V4(100, 64, 0, 0), 10, "shared address space, CGNAT (100.64.0.0/10)", false },
        { V4(127, 0, 0, 0), 8, "loopback (127.0.0.0/8)", false },
        { V4(169, 254, 0, 0), 16, "link-local, cloud metadata (169.254.0.0/16)", false },
        { V4(172, 16, 0, 0), 12, "private (172.16.0.0/12)", false },
        { V4(192, 0, 0, 0), 24, "IETF protocol assignments (192.0.0.0/24)", false },
        { V4(192, 0, 2, 0), 24, "documentation (192.0.2.0/24)", false },
        { V4(192, 88, 99, 0), 24, "6to4 relay anycast (192.88.99.0/24)", false },
        { V4(192, 168, 0, 0), 16, "private (192.168.0.0/16)", false },
        { V4(198, 18, 0, 0), 15, "benchmarking (198.18.0.0/15)", false },
        { V4(198, 51, 100, 0), 24, "documentation (198.51.100.0/24)", false },
        { V4(203, 0, 113, 0), 24, "documentation (203.0.113.0/24)", false },
        { V4(224, 0, 0, 0), 4, "multicast (224.0.0.0/4)", true },
        { V4(240, 0, 0, 0), 4, "reserved (240.0.0.0/4)", true },
};

static const AddressRange ipv6_denied[] = {
        { {}, 128, "unspecified (::)", true },
        { { [15] = 1 }, 128, "loopback (::1)", false },
        { {}, 96, "IPv4-compatible (::/96)", false },
        { { 0, 0x64, 0xff, 0x9b }, 96, "NAT64 (64:ff9b::/96)", false },
        { { 0, 0x64, 0xff, 0x9b, 0, 1 }, 48, "local-use NAT64 (64:ff9b:1::/48)", false },
        { { 0x01, 0x00 }, 64, "discard-only (100::/64)", false },
        { { 0x20, 0x01, 0x00, 0x00 }, 32, "Teredo (2001::/32)", false },
        { { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation (2001:db8::/32)", false },
        { { 0x20, 0x01 }, 23, "IETF protocol assignments (2001::/23)", false },
        { { 0x20, 0x02 }, 16, "6to4 (2002::/16)", false },
        { { 0x3f, 0xff }, 20, "documentation (3fff::/20)", false },
        { { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 }, 128, "cloud metadata (fd00:ec2::254)", false },
        { { 0xfc }, 7, "unique local (fc00::/7)", false },
        { { 0xfe, 0x80 }, 10, "link-local (fe80::/10)", false },
        { { 0xfe, 0xc0 }, 10, "site-local (fec0::/10)", false },
        { { 0xff }, 8, "multicast (ff00::/8)", true },
};

static const AddressRange *classify(const AddressRange *table, size_t n, const uint8_t *a) {
        for (size_t i = 0; i < n; i++)
                if (prefix_match(a, table[i].net, table[i].prefixlen))
                        return &table[i];
        return NULL;
}

static int address_verdict(const EgressPolicy *p, int family, const uint8_t *a, const char **ret_reason) {
        static const uint8_t global_unicast[16] = { 0x20 };
        const AddressRange *range;

        if (family == AF_INET6 && prefix_match(a, v4mapped_prefix, 96)) {
                /* Classified for the reason only: a mapped address is never dialled, whatever it maps. */
                *ret_reason = classify(ipv4_denied, ELEMENTSOF(ipv4_denied), a + 12) ?
                        "IPv4-mapped IPv6 address (::ffff:0:0/96) of a special-purpose IPv4 address" :
                        "IPv4-mapped IPv6 address (::ffff:0:0/96): connect over IPv4 instead";
                return 0;
        }

        range = family == AF_INET ? classify(ipv4_denied, ELEMENTSOF(ipv4_denied), a) :
                                    classify(ipv6_denied, ELEMENTSOF(ipv6_denied), a);
        if (range && range->never_exempt) {
                *ret_reason = range->reason;
                return 0;
        }
        for (size_t i = 0; i < p->n_mirrors; i++)
                if (mirror_contains(&p->mirrors[i], family, a)) {
                        *ret_reason = p->mirrors[i].reason;
                        return 1;
                }
        if (range) {
                *ret_reason = range->reason;
                return 0;
        }
        if (family == AF_INET6 && !prefix_match(a, global_unicast, 3)) {
                *ret_reason = "not global unicast (outside 2000::/3)";
                return 0;
        }
        *ret_reason = "global unicast";
        return 1;
}

int egress_address_allowed(const EgressPolicy *p, const struct sockaddr *sa, socklen_t len, const char **ret_reason) {
        const char *why = NULL;
        uint8_t a[16] = {};
        int family, r;

        if (!sa || len < (socklen_t) sizeof(sa_family_t))
                return -EINVAL;
        family = sa->sa_family;
        switch (family) {
        case AF_INET:
                if (len < (socklen_t) sizeof(struct sockaddr_in))
                        return -EINVAL;
                memcpy(a, &((const struct sockaddr_in *) sa)->sin_addr, 4);
                break;
        case AF_INET6:
                if (len < (socklen_t) sizeof(struct sockaddr_in6))
                        return -EINVAL;
                memcpy(a, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
                break;
        default:
                if (ret_reason)
                        *ret_reason = "unsupported address family";
                return 0;
        }

        if (!p->allowlist) {
                why = "network policy mode is none";
                r = 0;
        } else
                r = address_verdict(p, family, a, &why);
        if (ret_reason)
                *ret_reason = why;
        return r;
}
