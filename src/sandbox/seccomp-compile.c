/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The compiler of a parsed profile: the libseccomp filter for the native architecture (default
 * ALLOW, foreign architectures KILL_PROCESS), its BPF export, the sealed memfd handed to bwrap,
 * and the per-variant memo of the embedded profiles' programs. Calls libseccomp, memfd helpers
 * of util/, the parser (seccomp_profile_parse()) and the rule model.
 */

#include <errno.h>
#include <inttypes.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/seccomp-profile-internal.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/macro.h"

SR_DEFINE_FREE_FUNC(scmp_filter_ctx, seccomp_release);

/* ---------------------------------------------------------------------------------------------
 * Compiling
 */

/* The syscall number of @rule on @arch. Return: 1 and *ret_nr; 0 when the syscall does not exist
 * there (nothing to filter); -EINVAL (fail closed, message in *ret_error). */
int profile_rule_number(const Rule *rule, uint32_t arch, int *ret_nr, char **ret_error) {
        int known = seccomp_syscall_resolve_name_arch(arch, rule->syscall);

        if (rule->by_number) {
                for (size_t i = 0; i < rule->n_numbers; i++) {
                        if (rule->numbers[i].arch != arch)
                                continue;
                        /* Once libseccomp learns the name, its table and ours must agree. */
                        if (known >= 0 && known != rule->numbers[i].nr)
                                return profile_fail(ret_error, -EINVAL, rule->origin, 0,
                                                    "%s is %d on %s for libseccomp, not %d",
                                                    rule->syscall, known, rule->numbers[i].arch_name,
                                                    rule->numbers[i].nr);
                        *ret_nr = rule->numbers[i].nr;
                        return 1;
                }
                return profile_fail(ret_error, -EINVAL, rule->origin, 0,
                                    "no number for %s on the native architecture %s: "
                                    "refusing to build a filter without it",
                                    rule->syscall, profile_arch_name(arch));
        }

        if (known == __NR_SCMP_ERROR)
                return profile_fail(ret_error, -EINVAL, rule->origin, 0,
                                    "syscall '%s' is unknown to libseccomp on %s",
                                    rule->syscall, profile_arch_name(arch));
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

        r = profile_rule_number(rule, arch, &nr, ret_error);
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
                n_unless = profile_unless_expand(rule, unless, EXPANSION_MAX);
                if (n_unless < 0)
                        return profile_fail(ret_error, n_unless, rule->origin, 0, "'unless' set too large");
        }

        /* Exact: libseccomp must not rewrite a rule into something else or drop it. */
        for (int u = 0; u < (rule->has_unless ? n_unless : 1); u++) {
                size_t n = rule->n_conds;

                if (rule->has_unless)
                        cmp[n++] = unless[u];
                r = seccomp_rule_add_exact_array(ctx, action, nr, (unsigned) n, n > 0 ? cmp : NULL);
                if (r < 0)
                        return profile_fail(ret_error, r, rule->origin, 0,
                                            "libseccomp refused the rule for %s (nr %d): %s",
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
                return profile_fail(ret_error, -EOPNOTSUPP, NULL, 0,
                                    "libseccomp does not know the native architecture");

        /* Argument positions and ioctl numbers differ between architectures (clone's flags are
         * A1 on s390): a profile only compiles where it was written for. */
        for (size_t i = 0; i < p->n_arch_lists; i++) {
                bool found = false;

                for (size_t j = 0; j < p->arch_lists[i].n_arches; j++)
                        found = found || p->arch_lists[i].arches[j] == native;
                if (!found)
                        return profile_fail(ret_error, -EOPNOTSUPP, p->arch_lists[i].origin, 0,
                                            "the profile is not written for the native architecture %s",
                                            profile_arch_name(native));
        }

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return profile_fail(ret_error, -ENOMEM, NULL, 0, "seccomp_init() failed");

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
                return profile_fail(ret_error, r, NULL, 0,
                                    "cannot make foreign architectures KILL_PROCESS: %s",
                                    strerror(-r));

        for (size_t i = 0; i < p->n_rules; i++) {
                r = add_rule(ctx, native, p, p->rules + i, ret_error);
                if (r < 0)
                        return r;
        }

        /* libseccomp 2.5 exports to an fd only; go through an anonymous memfd. */
        fd = memfd_create("sandbox-seccomp-export", MFD_CLOEXEC);
        if (fd < 0)
                return profile_fail(ret_error, -errno, NULL, 0, "memfd_create() failed: %m");
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return profile_fail(ret_error, r, p->name, 0, "seccomp_export_bpf() failed: %s",
                                    strerror(-r));
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % 8 != 0 || st.st_size > 4096 * 8)
                return profile_fail(ret_error, -EINVAL, p->name, 0,
                                    "exported program has an odd size of %jd bytes",
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
                return profile_fail(ret_error, r, NULL, 0, "cannot create the sealed memfd: %s",
                                    strerror(-r));
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
                return profile_fail(ret_error, -EINVAL, NULL, 0, "invalid seccomp variant %d", (int) v);

        if (!cache[v].bpf) {
                _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
                _cleanup_free_ char *file = NULL;

                r = seccomp_builtin_profile(name, &text, &size);
                if (r < 0)
                        return profile_fail(ret_error, r, NULL, 0, "no embedded profile '%s'", name);
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
                return profile_fail(ret_error, r, NULL, 0, "cannot create the sealed memfd: %s",
                                    strerror(-r));
        return 0;
}
