/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the seccomp profile module share and nothing outside it may use: the limits
 * of the format, the rule model (Rule, Cond, the SeccompProfile struct), the symbolic names
 * (seccomp-names.c), the rule helpers (seccomp-profile.c), the native syscall number of a rule
 * (seccomp-compile.c) and the error formatter, all named profile_*(). The public API is
 * seccomp-profile.h.
 */
#pragma once

#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define PROFILE_SIZE_MAX (1U << 20)
#define LINE_LENGTH_MAX 4096U
#define LINE_TOKENS_MAX 128U
#define INCLUDE_DEPTH_MAX 8U
#define RULES_MAX 1024U
#define EXPANSION_MAX 256U         /* libseccomp rules one "unless" may expand to */
#define ARG_COUNT 6U
#define NR_MAX 0x7fffffff

/* ---------------------------------------------------------------------------------------------
 * Symbolic names (seccomp-names.c)
 */

typedef struct Constant {
        const char *name;
        uint64_t value;
} Constant;

/* A constant a condition may name (AF_UNIX, CLONE_NEWUSER, TIOCSTI, …). Return: NULL if unknown. */
const Constant *profile_constant_lookup(const char *name);
/* An errno a rule may return, by name (EPERM, ENOSYS, …). Return: NULL if unknown. */
const Constant *profile_errno_lookup(const char *name);
/* The inverse, for the listing. Return: NULL for an errno not in the table. */
const char *profile_errno_name(int errnum);
/* libseccomp's name of an architecture token, for messages. Return: "unknown" if none. */
const char *profile_arch_name(uint32_t token);

/* ---------------------------------------------------------------------------------------------
 * Rules (seccomp-profile.c)
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

/* profile_rule_done() - frees what @r owns (not @r itself). */
void profile_rule_done(Rule *r);

/* Insert @v into the sorted array *@values unless present. Return: 0 or -ENOMEM. */
int profile_sorted_insert(uint64_t **values, size_t *n, uint64_t v);

/*
 * profile_unless_expand() - the comparisons that make "deny unless A<n> [& M] ∈ S" of @r
 * (see seccomp-profile.c). With @out NULL only counts. Return: the number of comparisons, or
 * -E2BIG above @max.
 */
int profile_unless_expand(const Rule *r, struct scmp_arg_cmp *out, size_t max);

/*
 * profile_rule_number() - the syscall number of @rule on @arch (seccomp-compile.c).
 * Return: 1 and *ret_nr; 0 when the syscall does not exist there (nothing to filter); -EINVAL
 * (fail closed, message in *ret_error).
 */
int profile_rule_number(const Rule *rule, uint32_t arch, int *ret_nr, char **ret_error);

/*
 * profile_fail() - set *@ret_error (when non-NULL) to "FILE:LINE: reason" ("FILE: reason"
 * for @line 0, the bare reason for @file NULL). Return: @error, or -ENOMEM.
 */
int profile_fail(char **ret_error, int error, const char *file, unsigned line, const char *fmt, ...)
        _printf_(5, 6);
