/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Seccomp profiles: parsing seccomp/NAME.profile into deny rules, compiling them into sealed memfds. */

#include <fcntl.h>
#include <inttypes.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/macro.h"

#define PROFILE_SIZE_MAX (1U << 20)
#define LINE_LENGTH_MAX 4096U
#define LINE_TOKENS_MAX 128U
#define INCLUDE_DEPTH_MAX 8U
#define RULES_MAX 1024U
#define EXPANSION_MAX 256U         /* libseccomp rules one "unless" may expand to */
#define ARG_COUNT 6U
#define NR_MAX 0x7fffffff

SR_DEFINE_FREE_FUNC(scmp_filter_ctx, seccomp_release);

static const char *const seccomp_variant_table[_SECCOMP_VARIANT_MAX] = {
        [SECCOMP_VARIANT_BASELINE] = "baseline",
        [SECCOMP_VARIANT_NETWORK] = "network",
        [SECCOMP_VARIANT_NPU] = "npu",
};

const char *seccomp_variant_to_string(SeccompVariant v) {
        if (v < 0 || v >= _SECCOMP_VARIANT_MAX)
                return NULL;
        return seccomp_variant_table[v];
}

SeccompVariant seccomp_variant_from_string(const char *s) {
        if (!s)
                return _SECCOMP_VARIANT_INVALID;
        for (size_t i = 0; i < _SECCOMP_VARIANT_MAX; i++)
                if (streq(seccomp_variant_table[i], s))
                        return (SeccompVariant) i;
        return _SECCOMP_VARIANT_INVALID;
}

/* ---------------------------------------------------------------------------------------------
 * Symbolic names. Values come from the build's own headers, i.e. the native ABI, which is the only
 * one the compiled filter lets through (TIOCSTI, for one, differs between architectures).
 */

#define SOCK_TYPE_MASK 0xf      /* include/linux/net.h; not exported to user space */

typedef struct Constant {
        const char *name;
        uint64_t value;
} Constant;

#define C(x) { #x, (uint64_t) (x) }
static const Constant constant_table[] = {
        C(CLONE_NEWNS), C(CLONE_NEWCGROUP), C(CLONE_NEWUTS), C(CLONE_NEWIPC), C(CLONE_NEWUSER),
        C(CLONE_NEWPID), C(CLONE_NEWNET),
#ifdef CLONE_NEWTIME
        C(CLONE_NEWTIME),
#endif
        C(TIOCSTI), C(TIOCLINUX), C(TIOCSETD),
        C(PER_LINUX), C(PER_LINUX32), C(ADDR_NO_RANDOMIZE), C(READ_IMPLIES_EXEC), C(UNAME26),
        C(AF_UNSPEC), C(AF_UNIX), C(AF_LOCAL), C(AF_INET), C(AF_AX25), C(AF_IPX), C(AF_APPLETALK),
        C(AF_NETROM), C(AF_BRIDGE), C(AF_ATMPVC), C(AF_X25), C(AF_INET6), C(AF_ROSE), C(AF_DECnet),
        C(AF_NETBEUI), C(AF_SECURITY), C(AF_KEY), C(AF_NETLINK), C(AF_ROUTE), C(AF_PACKET), C(AF_ASH),
        C(AF_ECONET), C(AF_ATMSVC), C(AF_RDS), C(AF_SNA), C(AF_IRDA), C(AF_PPPOX), C(AF_WANPIPE),
        C(AF_LLC), C(AF_IB), C(AF_MPLS), C(AF_CAN), C(AF_TIPC), C(AF_BLUETOOTH), C(AF_IUCV),
        C(AF_RXRPC), C(AF_ISDN), C(AF_PHONET), C(AF_IEEE802154), C(AF_CAIF), C(AF_ALG), C(AF_NFC),
        C(AF_VSOCK), C(AF_KCM), C(AF_QIPCRTR), C(AF_SMC),
#ifdef AF_XDP
        C(AF_XDP),
#endif
#ifdef AF_MCTP
        C(AF_MCTP),
#endif
        C(SOCK_STREAM), C(SOCK_DGRAM), C(SOCK_RAW), C(SOCK_RDM), C(SOCK_SEQPACKET), C(SOCK_DCCP),
        C(SOCK_PACKET), C(SOCK_TYPE_MASK), C(SOCK_NONBLOCK), C(SOCK_CLOEXEC),
        C(IPPROTO_IP), C(IPPROTO_ICMP), C(IPPROTO_TCP), C(IPPROTO_UDP), C(IPPROTO_IPV6),
        C(IPPROTO_ICMPV6), C(IPPROTO_SCTP), C(IPPROTO_UDPLITE), C(IPPROTO_RAW),
#ifdef IPPROTO_MPTCP
        C(IPPROTO_MPTCP),
#endif
        C(NETLINK_ROUTE), C(NETLINK_USERSOCK), C(NETLINK_FIREWALL), C(NETLINK_SOCK_DIAG),
        C(NETLINK_NFLOG), C(NETLINK_XFRM), C(NETLINK_SELINUX), C(NETLINK_ISCSI), C(NETLINK_AUDIT),
        C(NETLINK_FIB_LOOKUP), C(NETLINK_CONNECTOR), C(NETLINK_NETFILTER), C(NETLINK_IP6_FW),
        C(NETLINK_DNRTMSG), C(NETLINK_KOBJECT_UEVENT), C(NETLINK_GENERIC), C(NETLINK_SCSITRANSPORT),
        C(NETLINK_ECRYPTFS), C(NETLINK_RDMA), C(NETLINK_CRYPTO),
};

/* The errnos a rule may return. Names only: a typo must not silently become another number. */
static const Constant errno_table[] = {
        C(EPERM), C(ENOENT), C(EIO), C(ENXIO), C(EACCES), C(EFAULT), C(EBUSY), C(EEXIST), C(ENODEV),
        C(EINVAL), C(ENOTTY), C(ENOSYS), C(EOPNOTSUPP), C(EAFNOSUPPORT), C(EPFNOSUPPORT),
        C(EPROTONOSUPPORT), C(ESOCKTNOSUPPORT), C(ENOTRECOVERABLE),
};
#undef C

static const Constant *constant_lookup(const Constant *table, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(table[i].name, name))
                        return table + i;
        return NULL;
}

static const char *errno_name(int errnum) {
        for (size_t i = 0; i < ELEMENTSOF(errno_table); i++)
                if (errno_table[i].value == (uint64_t) errnum)
                        return errno_table[i].name;
        return NULL;
}

/* Architecture names as libseccomp spells them, for messages (libseccomp has no token → name). */
static const char *const arch_names[] = {
        "x86", "x86_64", "x32", "arm", "aarch64", "mips", "mips64", "mips64n32", "mipsel", "mipsel64",
        "mipsel64n32", "ppc", "ppc64", "ppc64le", "s390", "s390x", "parisc", "parisc64", "riscv64",
};

static const char *arch_name(uint32_t token) {
        for (size_t i = 0; i < ELEMENTSOF(arch_names); i++)
                if (seccomp_arch_resolve_name(arch_names[i]) == token)
                        return arch_names[i];
        return "unknown";
}

/* ---------------------------------------------------------------------------------------------
 * Rules
 */

typedef enum CondOp {
        COND_EQ,
        COND_NE,
        COND_MASKED_EQ,
} CondOp;

typedef struct Cond {
        unsigned arg;
        CondOp op;
        uint64_t mask;                  /* COND_MASKED_EQ only */
        uint64_t value;
} Cond;

typedef struct ArchNumber {
        char *arch_name;
        uint32_t arch;
        int nr;
} ArchNumber;

typedef struct Rule {
        char *syscall;                  /* a libseccomp name, or the label of a deny-number rule */
        char *origin;                   /* "baseline.profile:12" */
        bool by_number;                 /* deny-number */
        ArchNumber *numbers;
        size_t n_numbers;
        Cond conds[ARG_COUNT];
        size_t n_conds;
        bool has_unless;                /* deny unless A<unless_arg> [& unless_mask] ∈ unless_values */
        unsigned unless_arg;
        uint64_t unless_mask;           /* 0 = the whole 64-bit argument */
        uint64_t *unless_values;        /* sorted, unique */
        size_t n_unless_values;
        int errnum;
} Rule;

typedef struct ArchList {
        char *origin;
        uint32_t *arches;
        size_t n_arches;
} ArchList;

struct SeccompProfile {
        char *name;
        Rule *rules;
        size_t n_rules;
        uint64_t *families;             /* allow-socket-families, merged over includes; sorted */
        size_t n_families;
        char *families_origin;          /* the first allow-socket-families line */
        ArchList *arch_lists;           /* "architectures" lines: the native one must be in each */
        size_t n_arch_lists;
        int errno_override;
};

static void rule_done(Rule *r) {
        free(r->syscall);
        free(r->origin);
        for (size_t i = 0; i < r->n_numbers; i++)
                free(r->numbers[i].arch_name);
        free(r->numbers);
        free(r->unless_values);
}

SeccompProfile *seccomp_profile_free(SeccompProfile *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_rules; i++)
                rule_done(p->rules + i);
        free(p->rules);
        free(p->families);
        free(p->families_origin);
        for (size_t i = 0; i < p->n_arch_lists; i++) {
                free(p->arch_lists[i].origin);
                free(p->arch_lists[i].arches);
        }
        free(p->arch_lists);
        free(p->name);
        free(p);
        return NULL;
}

size_t seccomp_profile_n_rules(const SeccompProfile *p) {
        return p ? p->n_rules : 0;
}

int seccomp_profile_set_errno_override(SeccompProfile *p, int errnum) {
        if (!p || errnum < 0 || errnum > 4095)
                return -EINVAL;
        p->errno_override = errnum;
        return 0;
}

/* Insert @v into the sorted array *@values unless present. Return: 0 or -ENOMEM. */
static int sorted_insert(uint64_t **values, size_t *n, uint64_t v) {
        uint64_t *a;
        size_t i;

        for (i = 0; i < *n; i++) {
                if ((*values)[i] == v)
                        return 0;
                if ((*values)[i] > v)
                        break;
        }
        a = realloc(*values, (*n + 1) * sizeof(uint64_t));
        if (!a)
                return -ENOMEM;
        memmove(a + i + 1, a + i, (*n - i) * sizeof(uint64_t));
        a[i] = v;
        *values = a;
        (*n)++;
        return 0;
}

/*
 * The comparisons that make "deny unless A<n> [& M] ∈ S" from rules that can only say "deny if":
 * the complement of S (within [0, M], or all 64 bits) as a union of ranges, each a single
 * comparison because libseccomp allows one comparison per argument and rule. The top range of an
 * unmasked argument is "> max(S)"; a range from 0 is "< min(S)"; every other range is split
 * into aligned power-of-two blocks, each one masked equality (at most 2×64 blocks per range).
 * With @out NULL only counts. Return: the number of comparisons, or -E2BIG above @max.
 */
static int unless_expand(const Rule *r, struct scmp_arg_cmp *out, size_t max) {
        uint64_t domain = r->unless_mask ? r->unless_mask : UINT64_MAX;
        size_t n = 0;

#define EMIT(op_, a_, b_)                                                                       \
        do {                                                                                    \
                if (n >= max)                                                                   \
                        return -E2BIG;                                                          \
                if (out)                                                                        \
                        out[n] = (struct scmp_arg_cmp) { .arg = r->unless_arg, .op = (op_),     \
                                                         .datum_a = (a_), .datum_b = (b_) };    \
                n++;                                                                            \
        } while (false)

        for (size_t i = 0; i <= r->n_unless_values; i++) {
                uint64_t lo, hi;

                /* The gap before value i (or after the last value). */
                if (i == 0) {
                        if (r->unless_values[0] == 0)
                                continue;
                        lo = 0;
                } else {
                        if (r->unless_values[i - 1] == domain)
                                continue;
                        lo = r->unless_values[i - 1] + 1;
                }
                if (i < r->n_unless_values) {
                        if (r->unless_values[i] == lo)
                                continue;
                        hi = r->unless_values[i] - 1;
                } else
                        hi = domain;
                if (lo > hi)
                        continue;

                if (!r->unless_mask && hi == UINT64_MAX) {
                        EMIT(SCMP_CMP_GT, lo - 1, 0);           /* lo ≥ 1 here: some value < lo */
                        continue;
                }
                if (!r->unless_mask && lo == 0) {
                        EMIT(SCMP_CMP_LT, hi + 1, 0);
                        continue;
                }
                for (;;) {
                        unsigned k = 0;

                        /* The largest aligned block starting at lo that stays within hi. */
                        while (k < 63 && (lo & ((UINT64_C(2) << k) - 1)) == 0 &&
                               (UINT64_C(2) << k) - 1 <= hi - lo)
                                k++;
                        EMIT(SCMP_CMP_MASKED_EQ, domain & ~((UINT64_C(1) << k) - 1), lo);
                        if (hi - lo < (UINT64_C(1) << k))
                                break;
                        lo += UINT64_C(1) << k;
                }
        }
#undef EMIT
        return (int) n;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing
 */

typedef struct ParseState {
        SeccompProfile *profile;
        const char *stack[INCLUDE_DEPTH_MAX + 1];       /* names of the profiles being parsed */
        size_t depth;
        char **ret_error;
} ParseState;

static int fail(char **ret_error, int error, const char *file, unsigned line, const char *fmt, ...)
        _printf_(5, 6);
static int fail(char **ret_error, int error, const char *file, unsigned line, const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (ret_error) {
                free(*ret_error);
                *ret_error = NULL;
                if (file)
                        r = line > 0 ? asprintf(ret_error, "%s:%u: %s", file, line, what) :
                                       asprintf(ret_error, "%s: %s", file, what);
                else
                        r = asprintf(ret_error, "%s", what);
                if (r < 0) {
                        *ret_error = NULL;
                        return -ENOMEM;
                }
        }
        return error;
}

static bool valid_identifier(const char *s, bool dash) {
        if (isempty(s))
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || (dash && *c == '-')))
                        return false;
        return true;
}

/* Decimal or 0x-hex, the full 64-bit range, nothing else. Return: 0 or -EINVAL. */
static int parse_number(const char *s, uint64_t *ret) {
        uint64_t v = 0;
        unsigned base = 10;

        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                s += 2;
        }
        if (*s == '\0')
                return -EINVAL;
        for (; *s; s++) {
                unsigned d;

                if (*s >= '0' && *s <= '9')
                        d = *s - '0';
                else if (base == 16 && *s >= 'a' && *s <= 'f')
                        d = *s - 'a' + 10;
                else if (base == 16 && *s >= 'A' && *s <= 'F')
                        d = *s - 'A' + 10;
                else
                        return -EINVAL;
                if (v > (UINT64_MAX - d) / base)
                        return -EINVAL;
                v = v * base + d;
        }
        *ret = v;
        return 0;
}

/* A number or a symbolic constant. Return: 0 or -EINVAL (message in *ret_error). */
static int parse_value(ParseState *s, const char *file, unsigned line, const char *tok, uint64_t *ret) {
        const Constant *c;

        if (tok[0] >= '0' && tok[0] <= '9') {
                if (parse_number(tok, ret) < 0)
                        return fail(s->ret_error, -EINVAL, file, line, "bad number '%s'", tok);
                return 0;
        }
        c = constant_lookup(constant_table, ELEMENTSOF(constant_table), tok);
        if (!c)
                return fail(s->ret_error, -EINVAL, file, line, "unknown constant '%s'", tok);
        *ret = c->value;
        return 0;
}

static int parse_arg(ParseState *s, const char *file, unsigned line, const char *tok, unsigned *ret) {
        if (tok[0] != 'A' || tok[1] < '0' || tok[1] > '5' || tok[2] != '\0')
                return fail(s->ret_error, -EINVAL, file, line,
                            "expected an argument A0…A5, got '%s'", tok);
        *ret = tok[1] - '0';
        return 0;
}

/* "A<n> == V", "A<n> != V", "A<n> & M == V", "A<n> & BIT". Advances *i. */
static int parse_cond(ParseState *s, const char *file, unsigned line, char **tok, size_t n, size_t *i,
                      Cond *ret) {
        Cond c = {};
        int r;

        if (*i + 3 > n)
                return fail(s->ret_error, -EINVAL, file, line, "incomplete condition");
        r = parse_arg(s, file, line, tok[*i], &c.arg);
        if (r < 0)
                return r;

        if (streq(tok[*i + 1], "==") || streq(tok[*i + 1], "!=")) {
                c.op = streq(tok[*i + 1], "==") ? COND_EQ : COND_NE;
                r = parse_value(s, file, line, tok[*i + 2], &c.value);
                if (r < 0)
                        return r;
                *i += 3;
        } else if (streq(tok[*i + 1], "&")) {
                c.op = COND_MASKED_EQ;
                r = parse_value(s, file, line, tok[*i + 2], &c.mask);
                if (r < 0)
                        return r;
                if (c.mask == 0)
                        return fail(s->ret_error, -EINVAL, file, line, "mask %s is zero", tok[*i + 2]);
                if (*i + 4 < n && streq(tok[*i + 3], "==")) {
                        r = parse_value(s, file, line, tok[*i + 4], &c.value);
                        if (r < 0)
                                return r;
                        if (c.value & ~c.mask)
                                return fail(s->ret_error, -EINVAL, file, line,
                                            "value %s has bits outside the mask %s: the condition never holds",
                                            tok[*i + 4], tok[*i + 2]);
                        *i += 5;
                } else {
                        /* The shorthand "A0 & FLAG" means "FLAG is set", so it takes one bit only:
                         * with several bits a reader could take it for "any of them". */
                        if (c.mask & (c.mask - 1))
                                return fail(s->ret_error, -EINVAL, file, line,
                                            "'& %s' without '== VALUE' needs a single-bit mask", tok[*i + 2]);
                        c.value = c.mask;
                        *i += 3;
                }
        } else
                return fail(s->ret_error, -EINVAL, file, line,
                            "expected '==', '!=' or '&' after %s, got '%s'", tok[*i], tok[*i + 1]);

        *ret = c;
        return 0;
}

/* "unless A<n> [& MASK] in V...", up to the end of the clause tokens. */
static int parse_unless(ParseState *s, const char *file, unsigned line, char **tok, size_t n, size_t *i,
                        Rule *rule) {
        int r;

        if (*i + 3 > n)
                return fail(s->ret_error, -EINVAL, file, line, "incomplete 'unless' clause");
        r = parse_arg(s, file, line, tok[*i], &rule->unless_arg);
        if (r < 0)
                return r;
        (*i)++;
        if (streq(tok[*i], "&")) {
                uint64_t m;

                if (*i + 3 > n)
                        return fail(s->ret_error, -EINVAL, file, line, "incomplete 'unless' clause");
                r = parse_value(s, file, line, tok[*i + 1], &m);
                if (r < 0)
                        return r;
                /* The expansion enumerates [0, MASK], so the mask must be low contiguous bits. */
                if (m == 0 || (m & (m + 1)) != 0)
                        return fail(s->ret_error, -EINVAL, file, line,
                                    "the mask of an 'unless' clause must be contiguous low bits "
                                    "(0xf, 0xffffffff), got '%s'", tok[*i + 1]);
                rule->unless_mask = m == UINT64_MAX ? 0 : m;
                *i += 2;
        }
        if (!streq(tok[*i], "in"))
                return fail(s->ret_error, -EINVAL, file, line, "expected 'in', got '%s'", tok[*i]);
        (*i)++;
        if (*i >= n)
                return fail(s->ret_error, -EINVAL, file, line, "empty set after 'in'");
        for (; *i < n; (*i)++) {
                uint64_t v;

                r = parse_value(s, file, line, tok[*i], &v);
                if (r < 0)
                        return r;
                if (rule->unless_mask && (v & ~rule->unless_mask))
                        return fail(s->ret_error, -EINVAL, file, line,
                                    "value %s is outside the mask", tok[*i]);
                if (sorted_insert(&rule->unless_values, &rule->n_unless_values, v) < 0)
                        return -ENOMEM;
        }
        rule->has_unless = true;
        return 0;
}

static int profile_add_rule(ParseState *s, const char *file, unsigned line, Rule *rule) {
        SeccompProfile *p = s->profile;
        Rule *a;

        if (p->n_rules >= RULES_MAX)
                return fail(s->ret_error, -E2BIG, file, line, "more than %u rules", RULES_MAX);
        a = realloc(p->rules, (p->n_rules + 1) * sizeof(Rule));
        if (!a)
                return -ENOMEM;
        p->rules = a;
        p->rules[p->n_rules++] = *rule;
        *rule = (Rule) {};
        return 0;
}

/* deny SYSCALL ... ERRNO, deny-number NAME ARCH=NR... ... ERRNO */
static int parse_deny(ParseState *s, const char *file, unsigned line, char **tok, size_t n, bool by_number) {
        _cleanup_(rule_done) Rule rule = {};
        const Constant *e;
        bool used[ARG_COUNT] = {};
        size_t i = 2, end = n - 1;
        int r;

        if (n < 3)
                return fail(s->ret_error, -EINVAL, file, line, "expected '%s %s ERRNO'", tok[0],
                            by_number ? "NAME ARCH=NR..." : "SYSCALL");

        if (!valid_identifier(tok[1], false))
                return fail(s->ret_error, -EINVAL, file, line, "bad syscall name '%s'", tok[1]);
        rule.syscall = strdup(tok[1]);
        if (asprintf(&rule.origin, "%s:%u", file, line) < 0)
                rule.origin = NULL;
        if (!rule.syscall || !rule.origin)
                return -ENOMEM;
        rule.by_number = by_number;

        if (!by_number && seccomp_syscall_resolve_name(tok[1]) == __NR_SCMP_ERROR) {
                const struct scmp_version *v = seccomp_version();
                return fail(s->ret_error, -EINVAL, file, line,
                            "syscall '%s' is unknown to libseccomp %u.%u.%u: a deny rule must not be skipped; "
                            "give its numbers with deny-number (docs/seccomp.md)",
                            tok[1], v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0);
        }

        if (by_number) {
                for (; i < end && strchr(tok[i], '='); i++) {
                        _cleanup_free_ char *an = strndup(tok[i], strcspn(tok[i], "="));
                        const char *num = strchr(tok[i], '=') + 1;
                        uint64_t nr;
                        uint32_t arch;
                        ArchNumber *a;

                        if (!an)
                                return -ENOMEM;
                        arch = seccomp_arch_resolve_name(an);
                        if (arch == 0)
                                return fail(s->ret_error, -EINVAL, file, line,
                                            "architecture '%s' is unknown to libseccomp", an);
                        if (parse_number(num, &nr) < 0 || nr > NR_MAX)
                                return fail(s->ret_error, -EINVAL, file, line, "bad syscall number '%s'", num);
                        for (size_t j = 0; j < rule.n_numbers; j++)
                                if (rule.numbers[j].arch == arch)
                                        return fail(s->ret_error, -EINVAL, file, line,
                                                    "architecture '%s' given twice", an);
                        a = realloc(rule.numbers, (rule.n_numbers + 1) * sizeof(ArchNumber));
                        if (!a)
                                return -ENOMEM;
                        rule.numbers = a;
                        rule.numbers[rule.n_numbers++] = (ArchNumber) {
                                .arch_name = STEAL(an), .arch = arch, .nr = (int) nr,
                        };
                }
                if (rule.n_numbers == 0)
                        return fail(s->ret_error, -EINVAL, file, line,
                                    "deny-number needs ARCH=NR pairs, e.g. x86_64=467");
        }

        if (i < end && streq(tok[i], "if")) {
                i++;
                for (;;) {
                        Cond c;

                        r = parse_cond(s, file, line, tok, end, &i, &c);
                        if (r < 0)
                                return r;
                        if (used[c.arg])
                                return fail(s->ret_error, -EINVAL, file, line, "A%u is compared twice "
                                            "(libseccomp takes one comparison per argument and rule)", c.arg);
                        used[c.arg] = true;
                        rule.conds[rule.n_conds++] = c;
                        if (i < end && streq(tok[i], "and")) {
                                i++;
                                continue;
                        }
                        break;
                }
        }
        if (i < end && streq(tok[i], "unless")) {
                i++;
                r = parse_unless(s, file, line, tok, end, &i, &rule);
                if (r < 0)
                        return r;
                if (used[rule.unless_arg])
                        return fail(s->ret_error, -EINVAL, file, line, "A%u is compared twice "
                                    "(libseccomp takes one comparison per argument and rule)", rule.unless_arg);
                r = unless_expand(&rule, NULL, EXPANSION_MAX);
                if (r == -E2BIG)
                        return fail(s->ret_error, -E2BIG, file, line,
                                    "the 'unless' set expands to more than %u rules", EXPANSION_MAX);
                if (r == 0)
                        return fail(s->ret_error, -EINVAL, file, line,
                                    "the 'unless' set covers every value: the rule never matches");
        }
        if (i != end)
                return fail(s->ret_error, -EINVAL, file, line, "unexpected '%s'", tok[i]);

        e = constant_lookup(errno_table, ELEMENTSOF(errno_table), tok[end]);
        if (!e)
                return fail(s->ret_error, -EINVAL, file, line,
                            "unknown errno '%s' (expected e.g. EPERM, ENOSYS)", tok[end]);
        rule.errnum = (int) e->value;

        return profile_add_rule(s, file, line, &rule);
}

static int parse_families(ParseState *s, const char *file, unsigned line, char **tok, size_t n) {
        SeccompProfile *p = s->profile;
        int r;

        if (n < 2)
                return fail(s->ret_error, -EINVAL, file, line, "allow-socket-families needs at least one AF_*");
        for (size_t i = 1; i < n; i++) {
                uint64_t v;

                if (!strneq(tok[i], "AF_", 3) && !(tok[i][0] >= '0' && tok[i][0] <= '9'))
                        return fail(s->ret_error, -EINVAL, file, line, "expected an AF_* name, got '%s'",
                                    tok[i]);
                r = parse_value(s, file, line, tok[i], &v);
                if (r < 0)
                        return r;
                if (v > 1023)
                        return fail(s->ret_error, -EINVAL, file, line, "address family %s out of range", tok[i]);
                if (sorted_insert(&p->families, &p->n_families, v) < 0)
                        return -ENOMEM;
        }
        if (!p->families_origin && asprintf(&p->families_origin, "%s:%u", file, line) < 0) {
                p->families_origin = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* architectures NAME...: the native architectures the profile was written (and reviewed) for. */
static int parse_architectures(ParseState *s, const char *file, unsigned line, char **tok, size_t n) {
        SeccompProfile *p = s->profile;
        ArchList l = {}, *a;

        if (n < 2)
                return fail(s->ret_error, -EINVAL, file, line, "architectures needs at least one name");
        l.arches = calloc(n - 1, sizeof(uint32_t));
        if (!l.arches)
                return -ENOMEM;
        for (size_t i = 1; i < n; i++) {
                uint32_t arch = seccomp_arch_resolve_name(tok[i]);

                if (arch == 0) {
                        free(l.arches);
                        return fail(s->ret_error, -EINVAL, file, line, "architecture '%s' is unknown to libseccomp",
                                    tok[i]);
                }
                l.arches[l.n_arches++] = arch;
        }
        if (asprintf(&l.origin, "%s:%u", file, line) < 0) {
                free(l.arches);
                return -ENOMEM;
        }
        a = realloc(p->arch_lists, (p->n_arch_lists + 1) * sizeof(ArchList));
        if (!a) {
                free(l.arches);
                free(l.origin);
                return -ENOMEM;
        }
        p->arch_lists = a;
        p->arch_lists[p->n_arch_lists++] = l;
        return 0;
}

static int parse_text(ParseState *s, const char *file, const char *bare, const char *text, size_t size);

static int parse_include(ParseState *s, const char *file, unsigned line, char **tok, size_t n) {
        _cleanup_free_ char *incfile = NULL;
        const char *text;
        size_t size;
        int r;

        if (n != 2 || !valid_identifier(tok[1], true))
                return fail(s->ret_error, -EINVAL, file, line, "expected 'include NAME'");
        for (size_t i = 0; i < s->depth; i++)
                if (streq(s->stack[i], tok[1]))
                        return fail(s->ret_error, -ELOOP, file, line, "include cycle: '%s' includes itself",
                                    tok[1]);
        if (s->depth >= INCLUDE_DEPTH_MAX)
                return fail(s->ret_error, -ELOOP, file, line, "includes nested deeper than %u", INCLUDE_DEPTH_MAX);
        r = seccomp_builtin_profile(tok[1], &text, &size);
        if (r < 0)
                return fail(s->ret_error, -ENOENT, file, line, "unknown profile '%s' (no seccomp/%s.profile)",
                            tok[1], tok[1]);
        if (asprintf(&incfile, "%s.profile", tok[1]) < 0)
                return -ENOMEM;
        return parse_text(s, incfile, tok[1], text, size);
}

static int parse_line(ParseState *s, const char *file, unsigned line, char *l) {
        char *tok[LINE_TOKENS_MAX];
        size_t n = 0;
        char *c, *save = NULL;

        c = strchr(l, '#');
        if (c)
                *c = '\0';
        for (char *t = strtok_r(l, " \t\r\f\v", &save); t; t = strtok_r(NULL, " \t\r\f\v", &save)) {
                if (n >= LINE_TOKENS_MAX)
                        return fail(s->ret_error, -EINVAL, file, line, "more than %u words", LINE_TOKENS_MAX);
                tok[n++] = t;
        }
        if (n == 0)
                return 0;

        if (streq(tok[0], "deny"))
                return parse_deny(s, file, line, tok, n, false);
        if (streq(tok[0], "deny-number"))
                return parse_deny(s, file, line, tok, n, true);
        if (streq(tok[0], "allow-socket-families"))
                return parse_families(s, file, line, tok, n);
        if (streq(tok[0], "include"))
                return parse_include(s, file, line, tok, n);
        if (streq(tok[0], "architectures"))
                return parse_architectures(s, file, line, tok, n);
        return fail(s->ret_error, -EINVAL, file, line,
                    "unknown directive '%s' (expected deny, deny-number, allow-socket-families, include, "
                    "architectures)", tok[0]);
}

static int parse_text(ParseState *s, const char *file, const char *bare, const char *text, size_t size) {
        unsigned line = 0;
        size_t pos = 0;
        int r;

        if (size > PROFILE_SIZE_MAX)
                return fail(s->ret_error, -E2BIG, file, 0, "larger than %u bytes", PROFILE_SIZE_MAX);
        if (size > 0 && !text)
                return -EINVAL;

        s->stack[s->depth++] = bare;
        while (pos < size) {
                _cleanup_free_ char *l = NULL;
                const char *nl = memchr(text + pos, '\n', size - pos);
                size_t len = nl ? (size_t) (nl - (text + pos)) : size - pos;

                line++;
                if (len > LINE_LENGTH_MAX) {
                        r = fail(s->ret_error, -EINVAL, file, line, "line longer than %u bytes",
                                 LINE_LENGTH_MAX);
                        goto finish;
                }
                if (memchr(text + pos, '\0', len)) {
                        r = fail(s->ret_error, -EINVAL, file, line, "NUL byte in line");
                        goto finish;
                }
                l = strndup(text + pos, len);
                if (!l) {
                        r = -ENOMEM;
                        goto finish;
                }
                pos += len + (nl ? 1 : 0);

                r = parse_line(s, file, line, l);
                if (r < 0)
                        goto finish;
        }
        r = 0;
finish:
        s->depth--;
        return r;
}

static int profile_add_family_rules(ParseState *s, const char *file) {
        SeccompProfile *p = s->profile;
        static const char *const calls[] = { "socket", "socketpair" };
        int r;

        if (p->n_families == 0)
                return 0;
        /* socketpair() creates sockets of the family too (and autoloads its module) before it
         * finds out that the family has no pairs: filter both. */
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                _cleanup_(rule_done) Rule rule = {
                        .has_unless = true,
                        .unless_arg = 0,
                        .errnum = EAFNOSUPPORT,
                };

                rule.syscall = strdup(calls[i]);
                rule.origin = strdup(p->families_origin);
                rule.unless_values = malloc(p->n_families * sizeof(uint64_t));
                if (!rule.syscall || !rule.origin || !rule.unless_values)
                        return -ENOMEM;
                memcpy(rule.unless_values, p->families, p->n_families * sizeof(uint64_t));
                rule.n_unless_values = p->n_families;
                r = unless_expand(&rule, NULL, EXPANSION_MAX);
                if (r == 0)
                        continue;       /* every family allowed: nothing to deny */
                if (r < 0)
                        return fail(s->ret_error, r, file, 0, "the socket family list expands to too many rules");
                r = profile_add_rule(s, file, 0, &rule);
                if (r < 0)
                        return r;
        }
        return 0;
}

int seccomp_profile_parse(const char *name, const char *text, size_t size, SeccompProfile **ret,
                          char **ret_error) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *bare = NULL;
        ParseState s = { .ret_error = ret_error };
        size_t l;
        int r;

        if (!name || !ret)
                return -EINVAL;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->name = strdup(name);
        l = strlen(name);
        bare = l > 8 && streq(name + l - 8, ".profile") ? strndup(name, l - 8) : strdup(name);
        if (!p->name || !bare)
                return -ENOMEM;

        s.profile = p;
        r = parse_text(&s, name, bare, text, size);
        if (r < 0)
                return r;
        r = profile_add_family_rules(&s, name);
        if (r < 0)
                return r;

        *ret = STEAL(p);
        return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Compiling
 */

/* The syscall number of @rule on @arch. Return: 1 and *ret_nr; 0 when the syscall does not exist
 * there (nothing to filter); -EINVAL (fail closed, message in *ret_error). */
static int rule_number(const Rule *rule, uint32_t arch, int *ret_nr, char **ret_error) {
        int known = seccomp_syscall_resolve_name_arch(arch, rule->syscall);

        if (rule->by_number) {
                for (size_t i = 0; i < rule->n_numbers; i++) {
                        if (rule->numbers[i].arch != arch)
                                continue;
                        /* Once libseccomp learns the name, its table and ours must agree. */
                        if (known >= 0 && known != rule->numbers[i].nr)
                                return fail(ret_error, -EINVAL, rule->origin, 0,
                                            "%s is %d on %s for libseccomp, not %d",
                                            rule->syscall, known, rule->numbers[i].arch_name, rule->numbers[i].nr);
                        *ret_nr = rule->numbers[i].nr;
                        return 1;
                }
                return fail(ret_error, -EINVAL, rule->origin, 0,
                            "no number for %s on the native architecture %s: "
                            "refusing to build a filter without it", rule->syscall, arch_name(arch));
        }

        if (known == __NR_SCMP_ERROR)
                return fail(ret_error, -EINVAL, rule->origin, 0, "syscall '%s' is unknown to libseccomp on %s",
                            rule->syscall, arch_name(arch));
        if (known < 0)
                return 0;       /* a pseudo number: e.g. umount on x86_64, which only has umount2 */
        *ret_nr = known;
        return 1;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t arch, const SeccompProfile *p, const Rule *rule,
                    char **ret_error) {
        struct scmp_arg_cmp cmp[ARG_COUNT + 1];
        struct scmp_arg_cmp unless[EXPANSION_MAX];
        uint32_t action = SCMP_ACT_ERRNO((uint32_t) (p->errno_override > 0 ? p->errno_override : rule->errnum));
        int nr, n_unless = 0, r;

        r = rule_number(rule, arch, &nr, ret_error);
        if (r <= 0)
                return r;

        for (size_t i = 0; i < rule->n_conds; i++) {
                const Cond *c = rule->conds + i;

                switch (c->op) {
                case COND_EQ:
                        cmp[i] = (struct scmp_arg_cmp) { .arg = c->arg, .op = SCMP_CMP_EQ,
                                                         .datum_a = c->value };
                        break;
                case COND_NE:
                        cmp[i] = (struct scmp_arg_cmp) { .arg = c->arg, .op = SCMP_CMP_NE,
                                                         .datum_a = c->value };
                        break;
                case COND_MASKED_EQ:
                        cmp[i] = (struct scmp_arg_cmp) { .arg = c->arg, .op = SCMP_CMP_MASKED_EQ,
                                                         .datum_a = c->mask, .datum_b = c->value };
                        break;
                default:
                        abort();
                }
        }

        if (rule->has_unless) {
                n_unless = unless_expand(rule, unless, EXPANSION_MAX);
                if (n_unless < 0)
                        return fail(ret_error, n_unless, rule->origin, 0, "'unless' set too large");
        }

        /* Exact: libseccomp must not rewrite a rule into something else or drop it. */
        for (int u = 0; u < (rule->has_unless ? n_unless : 1); u++) {
                size_t n = rule->n_conds;

                if (rule->has_unless)
                        cmp[n++] = unless[u];
                r = seccomp_rule_add_exact_array(ctx, action, nr, (unsigned) n, n > 0 ? cmp : NULL);
                if (r < 0)
                        return fail(ret_error, r, rule->origin, 0, "libseccomp refused the rule for %s (nr %d): %s",
                                    rule->syscall, nr, strerror(-r));
        }
        return 0;
}

/* A memfd holding @data, rewound and sealed. Return: 0 or -errno. */
static int memfd_new_sealed(const void *data, size_t size, int *ret_fd) {
        int fd;

        fd = memfd_new_data("sandbox-seccomp", data, size);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

/* Build the filter and return its BPF bytes. */
static int profile_compile_bytes(const SeccompProfile *p, uint8_t **ret_bpf, size_t *ret_size,
                                 char **ret_error) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ uint8_t *bpf = NULL;
        uint32_t native = seccomp_arch_native();
        struct stat st;
        ssize_t k;
        int r;

        if (!p || !ret_bpf || !ret_size)
                return -EINVAL;
        if (native == 0)
                return fail(ret_error, -EOPNOTSUPP, NULL, 0, "libseccomp does not know the native architecture");

        /* Argument positions and ioctl numbers differ between architectures (clone's flags are
         * A1 on s390): a profile only compiles where it was written for. */
        for (size_t i = 0; i < p->n_arch_lists; i++) {
                bool found = false;

                for (size_t j = 0; j < p->arch_lists[i].n_arches; j++)
                        found = found || p->arch_lists[i].arches[j] == native;
                if (!found)
                        return fail(ret_error, -EOPNOTSUPP, p->arch_lists[i].origin, 0,
                                    "the profile is not written for the native architecture %s",
                                    arch_name(native));
        }

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return fail(ret_error, -ENOMEM, NULL, 0, "seccomp_init() failed");

        /*
         * Only the native ABI is in the filter, on purpose: every other one — i386 through
         * "int $0x80" on x86_64, x32 (libseccomp sends syscall numbers with __X32_SYSCALL_BIT to
         * this action too), 32-bit arm on aarch64 — kills the process. The sandbox runs native
         * binaries; a second ABI is a second syscall table (socketcall(), ipc(), compat ioctls)
         * in which a rule written for the native one can silently miss.
         */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r == -EINVAL)
                /* libseccomp could not confirm that the kernel has KILL_PROCESS (4.14+): it
                 * probes with seccomp(2), which e.g. valgrind does not emulate. Killing the
                 * calling thread is still a kill, never an allow. */
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_THREAD);
        if (r < 0)
                return fail(ret_error, r, NULL, 0, "cannot make foreign architectures KILL_PROCESS: %s",
                            strerror(-r));

        for (size_t i = 0; i < p->n_rules; i++) {
                r = add_rule(ctx, native, p, p->rules + i, ret_error);
                if (r < 0)
                        return r;
        }

        /* libseccomp 2.5 exports to an fd only; go through an anonymous memfd. */
        fd = memfd_create("sandbox-seccomp-export", MFD_CLOEXEC);
        if (fd < 0)
                return fail(ret_error, -errno, NULL, 0, "memfd_create() failed: %m");
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return fail(ret_error, r, p->name, 0, "seccomp_export_bpf() failed: %s", strerror(-r));
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % 8 != 0 || st.st_size > 4096 * 8)
                return fail(ret_error, -EINVAL, p->name, 0, "exported program has an odd size of %jd bytes",
                            (intmax_t) st.st_size);
        bpf = malloc((size_t) st.st_size);
        if (!bpf)
                return -ENOMEM;
        k = pread(fd, bpf, (size_t) st.st_size, 0);
        if (k < 0)
                return -errno;
        if (k != st.st_size)
                return -EIO;

        *ret_bpf = STEAL(bpf);
        *ret_size = (size_t) st.st_size;
        return 0;
}

int seccomp_profile_compile(const SeccompProfile *p, int *ret_memfd, char **ret_error) {
        _cleanup_free_ uint8_t *bpf = NULL;
        size_t size;
        int r;

        if (!ret_memfd)
                return -EINVAL;
        r = profile_compile_bytes(p, &bpf, &size, ret_error);
        if (r < 0)
                return r;
        r = memfd_new_sealed(bpf, size, ret_memfd);
        if (r < 0)
                return fail(ret_error, r, NULL, 0, "cannot create the sealed memfd: %s", strerror(-r));
        return 0;
}

int seccomp_program_for_variant(SeccompVariant v, int *ret_memfd, char **ret_error) {
        /*
         * A memo of a pure function of the embedded texts: compiled on first use, never changed
         * afterwards, kept until exit. The only mutable state of this module.
         */
        static struct {
                uint8_t *bpf;
                size_t size;
        } cache[_SECCOMP_VARIANT_MAX];
        const char *name = seccomp_variant_to_string(v), *text;
        size_t size;
        int r;

        if (!name || !ret_memfd)
                return fail(ret_error, -EINVAL, NULL, 0, "invalid seccomp variant %d", (int) v);

        if (!cache[v].bpf) {
                _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
                _cleanup_free_ char *file = NULL;

                r = seccomp_builtin_profile(name, &text, &size);
                if (r < 0)
                        return fail(ret_error, r, NULL, 0, "no embedded profile '%s'", name);
                if (asprintf(&file, "%s.profile", name) < 0)
                        return -ENOMEM;
                r = seccomp_profile_parse(file, text, size, &p, ret_error);
                if (r < 0)
                        return r;
                r = profile_compile_bytes(p, &cache[v].bpf, &cache[v].size, ret_error);
                if (r < 0)
                        return r;
        }

        r = memfd_new_sealed(cache[v].bpf, cache[v].size, ret_memfd);
        if (r < 0)
                return fail(ret_error, r, NULL, 0, "cannot create the sealed memfd: %s", strerror(-r));
        return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Describing
 */

static void print_value(FILE *f, uint64_t v) {
        if (v < 256)
                fprintf(f, "%" PRIu64, v);
        else
                fprintf(f, "0x%" PRIx64, v);
}

int seccomp_profile_describe(const SeccompProfile *p, char **ret) {
        _cleanup_free_ char *buf = NULL;
        uint32_t native = seccomp_arch_native();
        size_t size = 0;
        FILE *f;
        int r = 0;

        if (!p || !ret)
                return -EINVAL;
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;

        for (size_t i = 0; i < p->n_rules; i++) {
                const Rule *rule = p->rules + i;
                int errnum = p->errno_override > 0 ? p->errno_override : rule->errnum;
                const char *en = errno_name(errnum);
                int nr;

                r = rule_number(rule, native, &nr, NULL);
                if (r < 0)
                        break;
                fprintf(f, "%s\t%s\t", rule->origin, rule->syscall);
                if (r > 0)
                        fprintf(f, "%d", nr);
                else
                        fputs("-", f);
                if (en)
                        fprintf(f, "\t%s\t", en);
                else
                        fprintf(f, "\t%d\t", errnum);

                for (size_t j = 0; j < rule->n_conds; j++) {
                        const Cond *c = rule->conds + j;

                        fprintf(f, "%s A%u ", j == 0 ? "if" : " and", c->arg);
                        switch (c->op) {
                        case COND_EQ:
                        case COND_NE:
                                fputs(c->op == COND_EQ ? "== " : "!= ", f);
                                break;
                        case COND_MASKED_EQ:
                                fputs("& ", f);
                                print_value(f, c->mask);
                                fputs(" == ", f);
                                break;
                        default:
                                abort();
                        }
                        print_value(f, c->value);
                }
                if (rule->has_unless) {
                        fprintf(f, "%sunless A%u ", rule->n_conds > 0 ? " " : "", rule->unless_arg);
                        if (rule->unless_mask) {
                                fputs("& ", f);
                                print_value(f, rule->unless_mask);
                                fputs(" ", f);
                        }
                        fputs("in", f);
                        for (size_t j = 0; j < rule->n_unless_values; j++) {
                                fputs(" ", f);
                                print_value(f, rule->unless_values[j]);
                        }
                }
                fputs("\n", f);
                r = 0;
        }

        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        *ret = STEAL(buf);
        return 0;
}
