/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the egress policy share and nothing else includes: the policy object's layout
 * (allowlist entries, mirrors, revision), the DNS and mirror limits, and the small helpers for
 * reasons and ports. egress-rule.c owns host names and allowlist entries, egress-address.c mirrors
 * and address classes, egress-policy.c the policy object, its JSON and host matching,
 * egress-target.c request targets. Pure: no I/O. May use util/ only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress/egress-policy.h"
#include "util/macro.h"

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
        bool allowlist;         /* a network at all: mode allowlist or open */
        bool open;              /* mode open: every host name matches (addresses are still checked) */
        char *upstream;         /* the upstream proxy's canonical URL (no userinfo), or NULL: direct */
        char *upstream_auth;    /* an opaque tag of the upstream's credentials, or NULL */
        char *no_proxy;         /* targets that go direct despite @upstream, or NULL */
        PolicyEntry *entries;   /* sorted by canonical form, unique */
        size_t n_entries;
        Mirror *mirrors;        /* sorted by canonical form, unique */
        size_t n_mirrors;
        char revision[EGRESS_REVISION_LENGTH + 1];
};

/* asprintf() that returns the string, NULL on OOM (asprintf() leaves its pointer undefined then). */
_printf_(1, 2) char *egress_strprintf(const char *fmt, ...);
/* Set *@ret_error (if wanted) to a copy of @reason. Return: -EINVAL, or -ENOMEM. */
int egress_fail_reason(char **ret_error, const char *reason);
/* As egress_fail_reason() with a format. */
_printf_(2, 3) int egress_fail_printf(char **ret_error, const char *fmt, ...);

/* Canonical decimal 1-65535: no sign, no leading zero, no empty string. Return: 0 or -EINVAL. */
int egress_port_parse(const char *s, size_t n, uint16_t *ret);

/*
 * egress_mirror_parse() - "10.1.2.0/24", "fd00::/8", or a bare address (/32, /128); host bits must
 * be zero. Return: 0, -EINVAL with *@ret_error (if wanted) saying why, or -ENOMEM.
 */
int egress_mirror_parse(const char *s, Mirror *ret, char **ret_error);
void egress_mirror_done(Mirror *m);
