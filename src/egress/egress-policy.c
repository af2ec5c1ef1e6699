/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress gateway's policy, pure: allowlist entries, host matching, address classes, request targets. */

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <http_parser.h>
#include <idn2.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nettle/sha2.h>

#include "egress/egress-policy.h"
#include "util/macro.h"
#include "util/string-util.h"

#define DNS_NAME_MAX 253
#define DNS_LABEL_MAX 63
#define MIRROR_INPUT_MAX 64
#define MIRROR_PREFIX_MIN 8

typedef struct PolicyEntry {
        EgressRule rule;
        char *canonical;        /* "*.example.org:443" */
        char *allow_reason;     /* "allowed by *.example.org:443" */
        char *port_reason;      /* "port not allowed by *.example.org:443" */
} PolicyEntry;

typedef struct Mirror {
        int family;
        uint8_t addr[16];       /* network address, host bits zero; IPv4 in the first 4 bytes */
        unsigned prefixlen;
        char *canonical;        /* "10.1.2.0/24" */
        char *reason;           /* "inside mirror 10.1.2.0/24" */
} Mirror;

struct EgressPolicy {
        bool allowlist;
        PolicyEntry *entries;   /* sorted by canonical form, unique */
        size_t n_entries;
        Mirror *mirrors;        /* sorted by canonical form, unique */
        size_t n_mirrors;
        char revision[EGRESS_REVISION_LENGTH + 1];
};

/* asprintf() that returns the string, NULL on OOM (asprintf() leaves its pointer undefined then). */
_printf_(1, 2) static char *strprintf(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

/* Set *@ret_error (if wanted) to a copy of @reason. Return: -EINVAL, or -ENOMEM. */
static int fail_reason(char **ret_error, const char *reason) {
        if (ret_error) {
                *ret_error = strdup(reason);
                if (!*ret_error)
                        return -ENOMEM;
        }
        return -EINVAL;
}

/* As fail_reason() with a format. */
_printf_(2, 3) static int fail_printf(char **ret_error, const char *fmt, ...) {
        va_list ap;
        int r;

        if (!ret_error)
                return -EINVAL;
        va_start(ap, fmt);
        r = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        if (r < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

/* ---------------------------------------------------------------------------------------------
 * Host names */

static bool is_ldh(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static bool is_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Why @c cannot appear in a host name (NULL if it can: LDH or '.'). Non-ASCII is the caller's call. */
static const char *bad_host_char_reason(unsigned char c) {
        if (c < 0x20 || c == 0x7f || c == ' ')
                return "control characters and spaces are not allowed in host names";
        if (c >= 0x80)
                return "non-ASCII host names must be given in A-label (xn--) form";
        if (is_ldh((char) c) || c == '.')
                return NULL;
        switch (c) {
        case '%':
                return "percent-encoding is not allowed in host names";
        case '@':
                return "userinfo ('@') is not allowed";
        case '\\':
                return "'\\' is not allowed in host names";
        case '[':
        case ']':
        case ':':
                return "IP literals are not allowed (brackets or colons in a host name)";
        case '_':
                return "'_' is not allowed in host names";
        case '*':
                return "'*' is only allowed as the whole first label of an allowlist entry";
        default:
                return "invalid character in host name";
        }
}

/*
 * WHATWG URL's "ends in a number": a last label of decimal digits or 0x-hex makes the whole name
 * an IPv4 literal to inet_aton() and to browsers (2130706433, 0x7f000001, 0177.0.0.1, 127.1,
 * 127.000.000.001). No TLD is numeric, so refusing these refuses no real name; listing IP
 * spellings instead would miss some.
 */
static bool label_is_number(const char *l, size_t n) {
        size_t i = 0;

        if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
                for (i = 2; i < n; i++)
                        if (!is_hex(l[i]))
                                return false;
                return true;
        }
        for (i = 0; i < n; i++)
                if (l[i] < '0' || l[i] > '9')
                        return false;
        return n > 0;
}

static const char reason_two_labels[] = "host name needs at least two labels";

/*
 * Check a name of printable ASCII already without its trailing dot: LDH labels of 1-63 octets,
 * no leading or trailing hyphen, at most 253 octets, two labels or more, not an IP literal.
 * Returns the number of labels, or 0 with @reason set.
 */
static size_t check_dns_name(const char *s, const char **reason) {
        size_t len = strlen(s), n_labels = 0;
        const char *last = s;
        size_t last_len = 0;

        for (size_t i = 0; i < len; i++) {
                const char *why = bad_host_char_reason((unsigned char) s[i]);

                if (why) {
                        *reason = why;
                        return 0;
                }
        }
        if (len == 0) {
                *reason = "empty host name";
                return 0;
        }
        if (len > DNS_NAME_MAX) {
                *reason = "host name longer than 253 octets";
                return 0;
        }
        for (const char *p = s;; ) {
                size_t l = strcspn(p, ".");

                if (l == 0) {
                        *reason = "empty label in host name";
                        return 0;
                }
                if (l > DNS_LABEL_MAX) {
                        *reason = "label longer than 63 octets in host name";
                        return 0;
                }
                if (p[0] == '-' || p[l - 1] == '-') {
                        *reason = "label starting or ending with '-' in host name";
                        return 0;
                }
                n_labels++;
                last = p;
                last_len = l;
                if (p[l] == '\0')
                        break;
                p += l + 1;
        }
        if (label_is_number(last, last_len)) {
                *reason = "IP literals are not allowed (the last label is a number)";
                return 0;
        }
        if (n_labels < 2) {
                *reason = reason_two_labels;
                return 0;
        }
        return n_labels;
}

static void ascii_lowercase(char *s) {
        for (; *s; s++)
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char) (*s - 'A' + 'a');
}

/* Strip exactly one trailing dot, in place. */
static void strip_one_dot(char *s) {
        size_t l = strlen(s);

        if (l > 0 && s[l - 1] == '.')
                s[l - 1] = '\0';
}

int egress_host_canonicalize_full(const char *host, char **ret, const char **ret_reason) {
        _cleanup_free_ char *h = NULL;
        const char *why = NULL;

        if (isempty(host)) {
                why = "empty host name";
                goto invalid;
        }
        /* Every byte first, so the reason names the byte class (a '%' beats "too long"). */
        for (const char *p = host; *p; p++) {
                why = bad_host_char_reason((unsigned char) *p);
                if (why)
                        goto invalid;
        }
        if (strlen(host) > DNS_NAME_MAX + 1) {
                why = "host name longer than 253 octets";
                goto invalid;
        }

        h = strdup(host);
        if (!h)
                return -ENOMEM;
        strip_one_dot(h);
        ascii_lowercase(h);
        if (check_dns_name(h, &why) == 0)
                goto invalid;

        *ret = STEAL(h);
        return 0;

invalid:
        if (ret_reason)
                *ret_reason = why;
        return -EINVAL;
}

/* ---------------------------------------------------------------------------------------------
 * Allowlist entries */

/* Canonical decimal 1-65535: no sign, no leading zero, no empty string. */
static int parse_port(const char *s, size_t n, uint16_t *ret) {
        uint32_t v = 0;

        if (n == 0 || n > 5 || s[0] == '0')
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (uint32_t) (s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

static bool has_non_ascii(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s >= 0x80)
                        return true;
        return false;
}

#define IDN2_FLAGS (IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT)

/*
 * U-labels → A-labels. Deliberately without IDN2_USE_STD3_ASCII_RULES: with it, libidn2 2.3.3
 * silently drops disallowed characters ("a_b.de" → "ab.de", a full-width colon vanishes), which
 * would widen an entry. Without it, such characters come out as ASCII and the strict LDH check
 * that always follows refuses them.
 */
static int to_alabels(const char *name, char **ret, char **ret_error) {
        char *out = NULL;
        int rc;

        rc = idn2_to_ascii_8z(name, &out, IDN2_FLAGS);
        if (rc == IDN2_MALLOC)
                return -ENOMEM;
        if (rc != IDN2_OK)
                return fail_printf(ret_error, "cannot convert to A-labels: %s", idn2_strerror(rc));
        /* idn2 allocates with its own allocator: hand the caller a plain malloc() copy. */
        *ret = strdup(out);
        idn2_free(out);
        return *ret ? 0 : -ENOMEM;
}

/* Every "xn--" label must be a valid A-label that converts back to itself ("xn--zz" does not). */
static int check_alabels(const char *name, char **ret_error) {
        for (const char *p = name; *p; ) {
                size_t l = strcspn(p, ".");

                if (l >= 4 && strneq(p, "xn--", 4)) {
                        char label[DNS_LABEL_MAX + 1], *out = NULL;
                        int rc;

                        assert(l <= DNS_LABEL_MAX);
                        memcpy(label, p, l);
                        label[l] = '\0';
                        rc = idn2_to_ascii_8z(label, &out, IDN2_FLAGS);
                        if (rc == IDN2_MALLOC)
                                return -ENOMEM;
                        if (rc != IDN2_OK || !streq(out, label)) {
                                idn2_free(out);
                                return fail_printf(ret_error, "invalid A-label '%s': %s", label,
                                                   rc != IDN2_OK ? idn2_strerror(rc) : "it does not round-trip");
                        }
                        idn2_free(out);
                }
                p += l;
                if (*p == '.')
                        p++;
        }
        return 0;
}

int egress_rule_parse(const char *entry, EgressRule *ret, char **ret_error) {
        _cleanup_free_ char *name = NULL;
        const char *colon, *base, *why = NULL;
        bool wildcard = false;
        uint16_t port = 0;
        int r;

        if (isempty(entry))
                return fail_reason(ret_error, "empty entry");
        if (strlen(entry) > EGRESS_ENTRY_INPUT_MAX)
                return fail_reason(ret_error, "entry too long");
        for (const char *p = entry; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f || *p == ' ')
                        return fail_reason(ret_error, bad_host_char_reason((unsigned char) *p));

        colon = strchr(entry, ':');
        for (const char *p = entry; p != colon && *p; p++) {
                unsigned char c = (unsigned char) *p;

                /* Non-ASCII goes to IDNA below; '*' has its own rule. */
                if (c >= 0x80 || c == '*')
                        continue;
                why = bad_host_char_reason(c);
                if (why)
                        return fail_reason(ret_error, why);
        }
        if (colon) {
                /* "::1", "fe80::1": more than one colon and no dot before the first. */
                if (strchr(colon + 1, ':') && !memchr(entry, '.', (size_t) (colon - entry)))
                        return fail_reason(ret_error,
                                           "IP literals are not allowed (brackets or colons in a host name)");
                if (colon[1] == '\0')
                        return fail_reason(ret_error, "empty port");
                if (parse_port(colon + 1, strlen(colon + 1), &port) < 0)
                        return fail_reason(ret_error, "the port must be 1-65535 in plain decimal, no leading zero");
                name = strndup(entry, (size_t) (colon - entry));
        } else
                name = strdup(entry);
        if (!name)
                return -ENOMEM;

        base = name;
        if (strneq(base, "*.", 2)) {
                wildcard = true;
                base += 2;
        }
        if (strchr(base, '*'))
                return fail_reason(ret_error, "'*' is only allowed as the whole first label of an allowlist entry");
        if (base != name)
                memmove(name, base, strlen(base) + 1);
        strip_one_dot(name);

        if (has_non_ascii(name)) {
                char *a = NULL;

                r = to_alabels(name, &a, ret_error);
                if (r < 0)
                        return r;
                free(name);
                name = a;
        }
        ascii_lowercase(name);

        if (check_dns_name(name, &why) == 0) {
                if (wildcard && why == reason_two_labels)
                        why = "a wildcard needs two labels under it (*.example.org, not *.org)";
                return fail_reason(ret_error, why);
        }
        if (wildcard && strlen(name) + 2 > DNS_NAME_MAX)
                return fail_reason(ret_error, "host name longer than 253 octets");
        r = check_alabels(name, ret_error);
        if (r < 0)
                return r;

        *ret = (EgressRule) {
                .pattern = STEAL(name),
                .wildcard = wildcard,
                .port = port,
        };
        return 0;
}

void egress_rule_done(EgressRule *r) {
        if (!r)
                return;
        free(r->pattern);
        *r = (EgressRule) {};
}

char *egress_rule_to_string(const EgressRule *r) {
        if (r->port > 0)
                return strprintf("%s%s:%" PRIu16, r->wildcard ? "*." : "", r->pattern, r->port);
        return strprintf("%s%s", r->wildcard ? "*." : "", r->pattern);
}

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

static void mirror_done(Mirror *m) {
        free(m->canonical);
        free(m->reason);
        *m = (Mirror) {};
}

/*
 * "10.1.2.0/24", "fd00::/8", or a bare address (/32, /128). Host bits must be zero: a range with
 * host bits set is refused rather than silently widened, naming the range probably meant.
 */
static int mirror_parse(const char *s, Mirror *ret, char **ret_error) {
        char addr[MIRROR_INPUT_MAX + 1], buf[INET6_ADDRSTRLEN];
        const char *slash;
        Mirror m = {};
        unsigned bytes, prefixlen;
        size_t n;

        if (isempty(s))
                return fail_reason(ret_error, "empty address range");
        n = strlen(s);
        if (n > MIRROR_INPUT_MAX)
                return fail_reason(ret_error, "address range too long");

        slash = strchr(s, '/');
        n = slash ? (size_t) (slash - s) : n;
        memcpy(addr, s, n);
        addr[n] = '\0';

        if (strchr(addr, ':')) {
                m.family = AF_INET6;
                bytes = 16;
                if (inet_pton(AF_INET6, addr, m.addr) != 1)
                        return fail_reason(ret_error, "not an IPv6 address (zone ids are not allowed)");
        } else {
                m.family = AF_INET;
                bytes = 4;
                /* inet_pton() takes only four decimal octets: no 127.1, 0x7f.0.0.1 or 0177.0.0.1. */
                if (inet_pton(AF_INET, addr, m.addr) != 1)
                        return fail_reason(ret_error, "not an IPv4 address in dotted-quad form");
        }

        prefixlen = bytes * 8;
        if (slash) {
                const char *p = slash + 1;
                size_t l = strlen(p);
                unsigned v = 0;

                if (l == 0 || l > 3 || (l > 1 && p[0] == '0'))
                        return fail_reason(ret_error, "the prefix length must be plain decimal");
                for (size_t i = 0; i < l; i++) {
                        if (p[i] < '0' || p[i] > '9')
                                return fail_reason(ret_error, "the prefix length must be plain decimal");
                        v = v * 10 + (unsigned) (p[i] - '0');
                }
                if (v > bytes * 8)
                        return fail_reason(ret_error, m.family == AF_INET ? "the prefix length must be 8-32" :
                                                                         "the prefix length must be 8-128");
                prefixlen = v;
        }
        /* A mirror is one internal host or network; /0-/7 would switch the address policy off. */
        if (prefixlen < MIRROR_PREFIX_MIN)
                return fail_reason(ret_error, m.family == AF_INET ? "the prefix length must be 8-32" :
                                                                 "the prefix length must be 8-128");
        if (m.family == AF_INET6 && prefix_match(m.addr, v4mapped_prefix, MIN(prefixlen, 96u)))
                return fail_reason(ret_error,
                                   "ranges overlapping ::ffff:0:0/96 are not allowed; write IPv4 ranges in IPv4 form");
        if (!host_bits_zero(m.addr, bytes, prefixlen)) {
                uint8_t net[16];

                memcpy(net, m.addr, sizeof(net));
                clear_host_bits(net, bytes, prefixlen);
                (void) inet_ntop(m.family, net, buf, sizeof(buf));
                return fail_printf(ret_error, "host bits are set; did you mean %s/%u?", buf, prefixlen);
        }
        m.prefixlen = prefixlen;

        (void) inet_ntop(m.family, m.addr, buf, sizeof(buf));
        m.canonical = strprintf("%s/%u", buf, prefixlen);
        m.reason = m.canonical ? strprintf("inside mirror %s", m.canonical) : NULL;
        if (!m.reason) {
                mirror_done(&m);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

static bool mirror_contains(const Mirror *m, int family, const uint8_t *a) {
        return m->family == family && prefix_match(a, m->addr, m->prefixlen);
}

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
                mirror_done(&p->mirrors[i]);
        free(p->mirrors);
        return mfree(p);
}

SR_DEFINE_FREE_FUNC(EgressPolicy *, egress_policy_free);

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const PolicyEntry *) a)->canonical, ((const PolicyEntry *) b)->canonical);
}

static int mirror_cmp(const void *a, const void *b) {
        return strcmp(((const Mirror *) a)->canonical, ((const Mirror *) b)->canonical);
}

static int item_error(char **ret_error, const char *what, size_t index, const char *input, const char *why) {
        _cleanup_free_ char *escaped = NULL;

        if (!ret_error)
                return -EINVAL;
        escaped = str_escape_log(input, 300);
        if (!escaped)
                return -ENOMEM;
        return fail_printf(ret_error, "%s %zu (\"%s\"): %s", what, index, escaped, why);
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
        sha_line(&ctx, "mode", p->allowlist ? "allowlist" : "none");
        for (size_t i = 0; i < p->n_entries; i++)
                sha_line(&ctx, "allow", p->entries[i].canonical);
        for (size_t i = 0; i < p->n_mirrors; i++)
                sha_line(&ctx, "mirror", p->mirrors[i].canonical);
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
                e.allow_reason = strprintf("allowed by %s", e.canonical);
                e.port_reason = strprintf("port not allowed by %s", e.canonical);
        }
        if (!e.canonical || !e.allow_reason || !e.port_reason) {
                entry_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

int egress_policy_new(bool allowlist, char *const *allow, char *const *mirrors, EgressPolicy **ret, char **ret_error) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
        size_t n_allow = 0, n_mirrors = 0, j;
        int r;

        for (char *const *i = allow; i && *i; i++)
                n_allow++;
        for (char *const *i = mirrors; i && *i; i++)
                n_mirrors++;
        if (n_allow > EGRESS_POLICY_ALLOW_MAX) {
                return fail_printf(ret_error, "too many allow entries (at most %d)", EGRESS_POLICY_ALLOW_MAX);
        }
        if (n_mirrors > EGRESS_POLICY_MIRRORS_MAX) {
                return fail_printf(ret_error, "too many mirrors (at most %d)", EGRESS_POLICY_MIRRORS_MAX);
        }

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->allowlist = allowlist;
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

                r = mirror_parse(mirrors[i], &p->mirrors[i], ret_error ? &why : NULL);
                if (r == -EINVAL)
                        return item_error(ret_error, "mirror", i, mirrors[i], why ?: "invalid");
                if (r < 0)
                        return r;
                p->n_mirrors++;
        }

        /* Sorted and unique, so the same content in any order or spelling is the same policy. */
        if (p->n_entries > 1) {
                qsort(p->entries, p->n_entries, sizeof(PolicyEntry), entry_cmp);
                for (size_t i = j = 1; i < p->n_entries; i++) {
                        if (streq(p->entries[i].canonical, p->entries[j - 1].canonical))
                                entry_done(&p->entries[i]);
                        else {
                                if (i != j) {
                                        p->entries[j] = p->entries[i];
                                        p->entries[i] = (PolicyEntry) {};
                                }
                                j++;
                        }
                }
                p->n_entries = j;
        }
        if (p->n_mirrors > 1) {
                qsort(p->mirrors, p->n_mirrors, sizeof(Mirror), mirror_cmp);
                for (size_t i = j = 1; i < p->n_mirrors; i++) {
                        if (streq(p->mirrors[i].canonical, p->mirrors[j - 1].canonical))
                                mirror_done(&p->mirrors[i]);
                        else {
                                if (i != j) {
                                        p->mirrors[j] = p->mirrors[i];
                                        p->mirrors[i] = (Mirror) {};
                                }
                                j++;
                        }
                }
                p->n_mirrors = j;
        }

        compute_revision(p);
        *ret = STEAL(p);
        return 0;
}

bool egress_policy_is_allowlist(const EgressPolicy *p) {
        return p->allowlist;
}

const char *egress_policy_revision(const EgressPolicy *p) {
        return p->revision;
}

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);

/* Add @value (consumed, may be NULL after an OOM) under @key. Return: 0 or -ENOMEM. */
static int json_add(json_object *o, const char *key, json_object *value) {
        if (!value || json_object_object_add(o, key, value) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
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
        if (json_add(o, "mode", json_object_new_string(p->allowlist ? "allowlist" : "none")) < 0 ||
            json_add(o, "allow", allow = json_object_new_array()) < 0 ||
            json_add(o, "mirrors", mirrors = json_object_new_array()) < 0)
                return NULL;
        for (size_t i = 0; i < p->n_entries; i++)
                if (json_append(allow, p->entries[i].canonical) < 0)
                        return NULL;
        for (size_t i = 0; i < p->n_mirrors; i++)
                if (json_append(mirrors, p->mirrors[i].canonical) < 0)
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
                return fail_printf(ret_error, "\"%s\" must be an array of strings", key);
        n = json_object_array_length(a);
        if (n > max)
                return fail_printf(ret_error, "too many %s entries (at most %zu)", key, max);
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(a, i);

                if (!json_object_is_type(s, json_type_string))
                        return fail_printf(ret_error, "\"%s\" must be an array of strings", key);
                /* An embedded NUL would cut the entry short and check less than was sent. */
                if (strlen(json_object_get_string(s)) != (size_t) json_object_get_string_len(s))
                        return fail_printf(ret_error, "%s %zu contains a NUL byte", key, i);
                l[i] = json_object_get_string(s);
        }
        *ret = STEAL(l);
        return 0;
}

int egress_policy_from_json(json_object *o, EgressPolicy **ret, char **ret_error) {
        _cleanup_free_ const char **allow = NULL, **mirrors = NULL;
        json_object *mode = NULL;
        bool allowlist, have_mode = false;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return fail_reason(ret_error, "the network policy must be a JSON object");

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
                } else if (streq(key, "revision")) {
                        if (!json_object_is_type(val, json_type_string))
                                return fail_reason(ret_error, "\"revision\" must be a string");
                } else {
                        _cleanup_free_ char *escaped = str_escape_log(key, 64);

                        if (!escaped)
                                return -ENOMEM;
                        return fail_printf(ret_error, "unknown key \"%s\"", escaped);
                }
        }

        if (!have_mode)
                return fail_reason(ret_error, "\"mode\" is required (\"none\" or \"allowlist\")");
        if (!json_object_is_type(mode, json_type_string))
                return fail_reason(ret_error, "\"mode\" must be \"none\" or \"allowlist\"");
        if (streq(json_object_get_string(mode), "allowlist"))
                allowlist = true;
        else if (streq(json_object_get_string(mode), "none"))
                allowlist = false;
        else
                return fail_reason(ret_error, "\"mode\" must be \"none\" or \"allowlist\"");

        return egress_policy_new(allowlist, (char *const *) allow, (char *const *) mirrors, ret, ret_error);
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

        if (colon && parse_port(colon + 1, (size_t) (s + n - colon - 1), &port) < 0)
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
                if (parse_port(s + port_off, port_len, &port) < 0) {
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
        t.path_and_query = rest[0] == '/' ? strdup(rest) : strprintf("/%s", rest);
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
