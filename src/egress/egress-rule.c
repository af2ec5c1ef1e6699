/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Allowlist entries of the egress policy and the host names they and request targets are made
 * of: the strict LDH check, IDNA to A-labels (libidn2), canonical forms; also the reason and port
 * helpers the other policy files share (egress-policy-internal.h). Pure. May use util/ only.
 */

#include <assert.h>
#include <errno.h>
#include <idn2.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-policy-internal.h"
#include "util/macro.h"
#include "util/string-util.h"

/* asprintf() that returns the string, NULL on OOM (asprintf() leaves its pointer undefined then). */
_printf_(1, 2) char *egress_strprintf(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

/* Set *@ret_error (if wanted) to a copy of @reason. Return: -EINVAL, or -ENOMEM. */
int egress_fail_reason(char **ret_error, const char *reason) {
        if (ret_error) {
                *ret_error = strdup(reason);
                if (!*ret_error)
                        return -ENOMEM;
        }
        return -EINVAL;
}

/* As egress_fail_reason() with a format. */
_printf_(2, 3) int egress_fail_printf(char **ret_error, const char *fmt, ...) {
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
int egress_port_parse(const char *s, size_t n, uint16_t *ret) {
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
                return egress_fail_printf(ret_error, "cannot convert to A-labels: %s", idn2_strerror(rc));
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
                                return egress_fail_printf(ret_error, "invalid A-label '%s': %s", label,
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
                return egress_fail_reason(ret_error, "empty entry");
        if (strlen(entry) > EGRESS_ENTRY_INPUT_MAX)
                return egress_fail_reason(ret_error, "entry too long");
        for (const char *p = entry; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f || *p == ' ')
                        return egress_fail_reason(ret_error, bad_host_char_reason((unsigned char) *p));

        colon = strchr(entry, ':');
        for (const char *p = entry; p != colon && *p; p++) {
                unsigned char c = (unsigned char) *p;

                /* Non-ASCII goes to IDNA below; '*' has its own rule. */
                if (c >= 0x80 || c == '*')
                        continue;
                why = bad_host_char_reason(c);
                if (why)
                        return egress_fail_reason(ret_error, why);
        }
        if (colon) {
                /* "::1", "fe80::1": more than one colon and no dot before the first. */
                if (strchr(colon + 1, ':') && !memchr(entry, '.', (size_t) (colon - entry)))
                        return egress_fail_reason(ret_error,
                                           "IP literals are not allowed (brackets or colons in a host name)");
                if (colon[1] == '\0')
                        return egress_fail_reason(ret_error, "empty port");
                if (egress_port_parse(colon + 1, strlen(colon + 1), &port) < 0)
                        return egress_fail_reason(ret_error, "the port must be 1-65535 in plain decimal, no leading zero");
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
                return egress_fail_reason(ret_error, "'*' is only allowed as the whole first label of an allowlist entry");
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
                return egress_fail_reason(ret_error, why);
        }
        if (wildcard && strlen(name) + 2 > DNS_NAME_MAX)
                return egress_fail_reason(ret_error, "host name longer than 253 octets");
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
                return egress_strprintf("%s%s:%" PRIu16, r->wildcard ? "*." : "", r->pattern, r->port);
        return egress_strprintf("%s%s", r->wildcard ? "*." : "", r->pattern);
}
