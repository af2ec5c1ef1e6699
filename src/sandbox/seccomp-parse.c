/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The parser of seccomp/NAME.profile: lines into directives (deny, deny-number,
 * allow-socket-families, include, architectures), directives into the deny rules of a
 * SeccompProfile; includes resolve against the embedded profiles only. Pure: no I/O; calls
 * libseccomp only to resolve syscall and architecture names, and the rule model
 * (seccomp-profile.c) and names (seccomp-names.c) through seccomp-profile-internal.h.
 */

#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/seccomp-profile-internal.h"
#include "sandbox/seccomp-profile.h"
#include "util/macro.h"

/* ---------------------------------------------------------------------------------------------
 * Parsing
 */

typedef struct ParseState {
        SeccompProfile *profile;
        const char *stack[INCLUDE_DEPTH_MAX + 1];       /* names of the profiles being parsed */
        size_t depth;
        char **ret_error;
} ParseState;

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
                        return profile_fail(s->ret_error, -EINVAL, file, line, "bad number '%s'", tok);
                return 0;
        }
        c = profile_constant_lookup(tok);
        if (!c)
                return profile_fail(s->ret_error, -EINVAL, file, line, "unknown constant '%s'", tok);
        *ret = c->value;
        return 0;
}

static int parse_arg(ParseState *s, const char *file, unsigned line, const char *tok, unsigned *ret) {
        if (tok[0] != 'A' || tok[1] < '0' || tok[1] > '5' || tok[2] != '\0')
                return profile_fail(s->ret_error, -EINVAL, file, line,
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
                return profile_fail(s->ret_error, -EINVAL, file, line, "incomplete condition");
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
                        return profile_fail(s->ret_error, -EINVAL, file, line, "mask %s is zero",
                                            tok[*i + 2]);
                if (*i + 4 < n && streq(tok[*i + 3], "==")) {
                        r = parse_value(s, file, line, tok[*i + 4], &c.value);
                        if (r < 0)
                                return r;
                        if (c.value & ~c.mask)
                                return profile_fail(s->ret_error, -EINVAL, file, line,
                                                    "value %s has bits outside the mask %s: "
                                                    "the condition never holds",
                                                    tok[*i + 4], tok[*i + 2]);
                        *i += 5;
                } else {
                        /* The shorthand "A0 & FLAG" means "FLAG is set", so it takes one bit only:
                         * with several bits a reader could take it for "any of them". */
                        if (c.mask & (c.mask - 1))
                                return profile_fail(s->ret_error, -EINVAL, file, line,
                                                    "'& %s' without '== VALUE' needs a single-bit mask",
                                                    tok[*i + 2]);
                        c.value = c.mask;
                        *i += 3;
                }
        } else
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "expected '==', '!=' or '&' after %s, got '%s'", tok[*i], tok[*i + 1]);

        *ret = c;
        return 0;
}

/* "unless A<n> [& MASK] in V...", up to the end of the clause tokens. */
static int parse_unless(ParseState *s, const char *file, unsigned line, char **tok, size_t n, size_t *i,
                        Rule *rule) {
        int r;

        if (*i + 3 > n)
                return profile_fail(s->ret_error, -EINVAL, file, line, "incomplete 'unless' clause");
        r = parse_arg(s, file, line, tok[*i], &rule->unless_arg);
        if (r < 0)
                return r;
        (*i)++;
        if (streq(tok[*i], "&")) {
                uint64_t m;

                if (*i + 3 > n)
                        return profile_fail(s->ret_error, -EINVAL, file, line, "incomplete 'unless' clause");
                r = parse_value(s, file, line, tok[*i + 1], &m);
                if (r < 0)
                        return r;
                /* The expansion enumerates [0, MASK], so the mask must be low contiguous bits. */
                if (m == 0 || (m & (m + 1)) != 0)
                        return profile_fail(s->ret_error, -EINVAL, file, line,
                                            "the mask of an 'unless' clause must be contiguous low bits "
                                            "(0xf, 0xffffffff), got '%s'", tok[*i + 1]);
                rule->unless_mask = m == UINT64_MAX ? 0 : m;
                *i += 2;
        }
        if (!streq(tok[*i], "in"))
                return profile_fail(s->ret_error, -EINVAL, file, line, "expected 'in', got '%s'", tok[*i]);
        (*i)++;
        if (*i >= n)
                return profile_fail(s->ret_error, -EINVAL, file, line, "empty set after 'in'");
        for (; *i < n; (*i)++) {
                uint64_t v;

                r = parse_value(s, file, line, tok[*i], &v);
                if (r < 0)
                        return r;
                if (rule->unless_mask && (v & ~rule->unless_mask))
                        return profile_fail(s->ret_error, -EINVAL, file, line,
                                            "value %s is outside the mask", tok[*i]);
                if (profile_sorted_insert(&rule->unless_values, &rule->n_unless_values, v) < 0)
                        return -ENOMEM;
        }
        rule->has_unless = true;
        return 0;
}

static int profile_add_rule(ParseState *s, const char *file, unsigned line, Rule *rule) {
        SeccompProfile *p = s->profile;
        Rule *a;

        if (p->n_rules >= RULES_MAX)
                return profile_fail(s->ret_error, -E2BIG, file, line, "more than %u rules", RULES_MAX);
        a = realloc(p->rules, (p->n_rules + 1) * sizeof(Rule));
        if (!a)
                return -ENOMEM;
        p->rules = a;
        p->rules[p->n_rules++] = *rule;
        *rule = (Rule) {};
        return 0;
}

/* The ARCH=NR pairs of a deny-number rule, from tok[*i] on. Advances *i. */
static int parse_deny_numbers(ParseState *s, const char *file, unsigned line, char **tok, size_t end, size_t *i,
                              Rule *rule) {
        for (; *i < end && strchr(tok[*i], '='); (*i)++) {
                _cleanup_free_ char *an = strndup(tok[*i], strcspn(tok[*i], "="));
                const char *num = strchr(tok[*i], '=') + 1;
                uint64_t nr;
                uint32_t arch;
                ArchNumber *a;

                if (!an)
                        return -ENOMEM;
                arch = seccomp_arch_resolve_name(an);
                if (arch == 0)
                        return profile_fail(s->ret_error, -EINVAL, file, line,
                                            "architecture '%s' is unknown to libseccomp", an);
                if (parse_number(num, &nr) < 0 || nr > NR_MAX)
                        return profile_fail(s->ret_error, -EINVAL, file, line, "bad syscall number '%s'", num);
                for (size_t j = 0; j < rule->n_numbers; j++)
                        if (rule->numbers[j].arch == arch)
                                return profile_fail(s->ret_error, -EINVAL, file, line,
                                                    "architecture '%s' given twice", an);
                a = realloc(rule->numbers, (rule->n_numbers + 1) * sizeof(ArchNumber));
                if (!a)
                        return -ENOMEM;
                rule->numbers = a;
                rule->numbers[rule->n_numbers++] = (ArchNumber) {
                        .arch_name = STEAL(an), .arch = arch, .nr = (int) nr,
                };
        }
        if (rule->n_numbers == 0)
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "deny-number needs ARCH=NR pairs, e.g. x86_64=467");
        return 0;
}

/* "COND [and COND]..." after "if", each argument compared once (marked in @used). Advances *i. */
static int parse_deny_conds(ParseState *s, const char *file, unsigned line, char **tok, size_t end, size_t *i,
                            Rule *rule, bool used[static ARG_COUNT]) {
        for (;;) {
                Cond c;
                int r;

                r = parse_cond(s, file, line, tok, end, i, &c);
                if (r < 0)
                        return r;
                if (used[c.arg])
                        return profile_fail(s->ret_error, -EINVAL, file, line, "A%u is compared twice "
                                            "(libseccomp takes one comparison per argument and rule)", c.arg);
                used[c.arg] = true;
                rule->conds[rule->n_conds++] = c;
                if (*i < end && streq(tok[*i], "and")) {
                        (*i)++;
                        continue;
                }
                return 0;
        }
}

/* The clause after "unless": its argument not compared before, its expansion within bounds. */
static int parse_deny_unless(ParseState *s, const char *file, unsigned line, char **tok, size_t end, size_t *i,
                             Rule *rule, const bool used[static ARG_COUNT]) {
        int r;

        r = parse_unless(s, file, line, tok, end, i, rule);
        if (r < 0)
                return r;
        if (used[rule->unless_arg])
                return profile_fail(s->ret_error, -EINVAL, file, line, "A%u is compared twice "
                                    "(libseccomp takes one comparison per argument and rule)",
                                    rule->unless_arg);
        r = profile_unless_expand(rule, NULL, EXPANSION_MAX);
        if (r == -E2BIG)
                return profile_fail(s->ret_error, -E2BIG, file, line,
                                    "the 'unless' set expands to more than %u rules", EXPANSION_MAX);
        if (r == 0)
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "the 'unless' set covers every value: the rule never matches");
        return 0;
}

/* deny SYSCALL ... ERRNO, deny-number NAME ARCH=NR... ... ERRNO */
static int parse_deny(ParseState *s, const char *file, unsigned line, char **tok, size_t n, bool by_number) {
        _cleanup_(profile_rule_done) Rule rule = {};
        const Constant *e;
        bool used[ARG_COUNT] = {};
        size_t i = 2, end = n - 1;
        int r;

        if (n < 3)
                return profile_fail(s->ret_error, -EINVAL, file, line, "expected '%s %s ERRNO'", tok[0],
                                    by_number ? "NAME ARCH=NR..." : "SYSCALL");

        if (!valid_identifier(tok[1], false))
                return profile_fail(s->ret_error, -EINVAL, file, line, "bad syscall name '%s'", tok[1]);
        rule.syscall = strdup(tok[1]);
        if (asprintf(&rule.origin, "%s:%u", file, line) < 0)
                rule.origin = NULL;
        if (!rule.syscall || !rule.origin)
                return -ENOMEM;
        rule.by_number = by_number;

        if (!by_number && seccomp_syscall_resolve_name(tok[1]) == __NR_SCMP_ERROR) {
                const struct scmp_version *v = seccomp_version();
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "syscall '%s' is unknown to libseccomp %u.%u.%u: "
                                    "a deny rule must not be skipped; "
                                    "give its numbers with deny-number (docs/seccomp.md)",
                                    tok[1], v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0);
        }

        if (by_number) {
                r = parse_deny_numbers(s, file, line, tok, end, &i, &rule);
                if (r < 0)
                        return r;
        }
        if (i < end && streq(tok[i], "if")) {
                i++;
                r = parse_deny_conds(s, file, line, tok, end, &i, &rule, used);
                if (r < 0)
                        return r;
        }
        if (i < end && streq(tok[i], "unless")) {
                i++;
                r = parse_deny_unless(s, file, line, tok, end, &i, &rule, used);
                if (r < 0)
                        return r;
        }
        if (i != end)
                return profile_fail(s->ret_error, -EINVAL, file, line, "unexpected '%s'", tok[i]);

        e = profile_errno_lookup(tok[end]);
        if (!e)
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "unknown errno '%s' (expected e.g. EPERM, ENOSYS)", tok[end]);
        rule.errnum = (int) e->value;

        return profile_add_rule(s, file, line, &rule);
}

static int parse_families(ParseState *s, const char *file, unsigned line, char **tok, size_t n) {
        SeccompProfile *p = s->profile;
        int r;

        if (n < 2)
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "allow-socket-families needs at least one AF_*");
        for (size_t i = 1; i < n; i++) {
                uint64_t v;

                if (!strneq(tok[i], "AF_", 3) && !(tok[i][0] >= '0' && tok[i][0] <= '9'))
                        return profile_fail(s->ret_error, -EINVAL, file, line,
                                            "expected an AF_* name, got '%s'",
                                            tok[i]);
                r = parse_value(s, file, line, tok[i], &v);
                if (r < 0)
                        return r;
                if (v > 1023)
                        return profile_fail(s->ret_error, -EINVAL, file, line,
                                            "address family %s out of range", tok[i]);
                if (profile_sorted_insert(&p->families, &p->n_families, v) < 0)
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
                return profile_fail(s->ret_error, -EINVAL, file, line,
                                    "architectures needs at least one name");
        l.arches = calloc(n - 1, sizeof(uint32_t));
        if (!l.arches)
                return -ENOMEM;
        for (size_t i = 1; i < n; i++) {
                uint32_t arch = seccomp_arch_resolve_name(tok[i]);

                if (arch == 0) {
                        free(l.arches);
                        return profile_fail(s->ret_error, -EINVAL, file, line,
                                            "architecture '%s' is unknown to libseccomp",
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
                return profile_fail(s->ret_error, -EINVAL, file, line, "expected 'include NAME'");
        for (size_t i = 0; i < s->depth; i++)
                if (streq(s->stack[i], tok[1]))
                        return profile_fail(s->ret_error, -ELOOP, file, line,
                                            "include cycle: '%s' includes itself",
                                            tok[1]);
        if (s->depth >= INCLUDE_DEPTH_MAX)
                return profile_fail(s->ret_error, -ELOOP, file, line, "includes nested deeper than %u",
                                    INCLUDE_DEPTH_MAX);
        r = seccomp_builtin_profile(tok[1], &text, &size);
        if (r < 0)
                return profile_fail(s->ret_error, -ENOENT, file, line,
                                    "unknown profile '%s' (no seccomp/%s.profile)",
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
                        return profile_fail(s->ret_error, -EINVAL, file, line, "more than %u words",
                                            LINE_TOKENS_MAX);
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
        return profile_fail(s->ret_error, -EINVAL, file, line,
                            "unknown directive '%s' (expected deny, deny-number, "
                            "allow-socket-families, include, architectures)", tok[0]);
}

static int parse_text(ParseState *s, const char *file, const char *bare, const char *text, size_t size) {
        unsigned line = 0;
        size_t pos = 0;
        int r;

        if (size > PROFILE_SIZE_MAX)
                return profile_fail(s->ret_error, -E2BIG, file, 0, "larger than %u bytes", PROFILE_SIZE_MAX);
        if (size > 0 && !text)
                return -EINVAL;

        s->stack[s->depth++] = bare;
        while (pos < size) {
                _cleanup_free_ char *l = NULL;
                const char *nl = memchr(text + pos, '\n', size - pos);
                size_t len = nl ? (size_t) (nl - (text + pos)) : size - pos;

                line++;
                if (len > LINE_LENGTH_MAX) {
                        r = profile_fail(s->ret_error, -EINVAL, file, line, "line longer than %u bytes",
                                         LINE_LENGTH_MAX);
                        goto finish;
                }
                if (memchr(text + pos, '\0', len)) {
                        r = profile_fail(s->ret_error, -EINVAL, file, line, "NUL byte in line");
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
                _cleanup_(profile_rule_done) Rule rule = {
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
                r = profile_unless_expand(&rule, NULL, EXPANSION_MAX);
                if (r == 0)
                        continue;       /* every family allowed: nothing to deny */
                if (r < 0)
                        return profile_fail(s->ret_error, r, file, 0,
                                            "the socket family list expands to too many rules");
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
