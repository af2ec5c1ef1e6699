/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The listing of a parsed profile (seccomp_profile_describe()): one line per deny rule with its
 * native syscall number, errno and canonical condition, for tests and the integration battery.
 * Pure apart from an in-memory stream; calls the rule model and names.
 */

#include <inttypes.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sandbox/seccomp-profile-internal.h"
#include "sandbox/seccomp-profile.h"
#include "util/macro.h"

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
                const char *en = profile_errno_name(errnum);
                int nr;

                r = profile_rule_number(rule, native, &nr, NULL);
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
