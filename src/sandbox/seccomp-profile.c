/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Seccomp profiles: the variants, the rule model shared by the parser and the compiler (a profile
 * is a list of deny rules, each a syscall, up to six argument conditions and an optional "unless"
 * set), its lifetime and accessors, and the expansion of an "unless" set into the comparisons
 * libseccomp can express. Pure: no I/O, no libseccomp context. The parser is seccomp-parse.c,
 * the compiler seccomp-compile.c, the listing seccomp-describe.c, the symbolic names
 * seccomp-names.c; seccomp-profile-internal.h is what they share. Calls only util/.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/seccomp-profile-internal.h"
#include "sandbox/seccomp-profile.h"
#include "util/macro.h"
#include "util/string-table.h"

static const char *const seccomp_variant_table[_SECCOMP_VARIANT_MAX] = {
        [SECCOMP_VARIANT_BASELINE] = "baseline",
        [SECCOMP_VARIANT_NETWORK] = "network",
        [SECCOMP_VARIANT_NPU] = "npu",
};

DEFINE_STRING_TABLE_LOOKUP(seccomp_variant, SeccompVariant)

void profile_rule_done(Rule *r) {
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
                profile_rule_done(p->rules + i);
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
int profile_sorted_insert(uint64_t **values, size_t *n, uint64_t v) {
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
int profile_unless_expand(const Rule *r, struct scmp_arg_cmp *out, size_t max) {
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

int profile_fail(char **ret_error, int error, const char *file, unsigned line, const char *fmt, ...) {
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
