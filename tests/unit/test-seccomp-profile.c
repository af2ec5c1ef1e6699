/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/sandbox/seccomp-profile.c: parsing, includes, compilation, memfds, rule semantics in the kernel. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/seccomp-profile.h"
#include "util/macro.h"

static int parse(const char *text, SeccompProfile **ret, char **ret_error) {
        return seccomp_profile_parse("t.profile", text, strlen(text), ret, ret_error);
}

/* Parsing @text must fail with @error and a "t.profile:LINE: …" message containing @fragment. */
static void expect_parse_error(const char *text, int error, const char *fragment) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *msg = NULL;
        int r;

        r = parse(text, &p, &msg);
        if (r != error || !msg || !strstr(msg, fragment))
                print_message("text: %s\nr=%d (%s) message: %s\n", text, r, strerror(-r), msg ? msg : "(none)");
        assert_int_equal(r, error);
        assert_null(p);
        assert_non_null(msg);
        assert_non_null(strstr(msg, fragment));
        assert_true(strneq(msg, "t.profile", 9) || strneq(msg, "baseline.profile", 16));
}

static void test_variant_strings(void **state) {
        assert_string_equal(seccomp_variant_to_string(SECCOMP_VARIANT_BASELINE), "baseline");
        assert_string_equal(seccomp_variant_to_string(SECCOMP_VARIANT_NETWORK), "network");
        assert_string_equal(seccomp_variant_to_string(SECCOMP_VARIANT_NPU), "npu");
        assert_null(seccomp_variant_to_string(_SECCOMP_VARIANT_MAX));
        assert_null(seccomp_variant_to_string(_SECCOMP_VARIANT_INVALID));
        for (int v = 0; v < _SECCOMP_VARIANT_MAX; v++)
                assert_int_equal(seccomp_variant_from_string(seccomp_variant_to_string(v)), v);
        assert_int_equal(seccomp_variant_from_string("Baseline"), _SECCOMP_VARIANT_INVALID);
        assert_int_equal(seccomp_variant_from_string(NULL), _SECCOMP_VARIANT_INVALID);
}

static void test_parse_minimal(void **state) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *d = NULL;
        const char *text =
                "# comment only\n"
                "\n"
                "   deny ptrace EPERM   # trailing comment\n"
                "deny clone if A0 & CLONE_NEWUSER EPERM\n"
                "deny ioctl if A1 & 0xffffffff == TIOCSTI EPERM\n"
                "deny personality if A0 != PER_LINUX EPERM\n"
                "deny clone3 ENOSYS\r\n"
                "deny socket if A0 == AF_INET and A1 & SOCK_TYPE_MASK == SOCK_RAW EPERM\n"
                "deny socket if A0 == AF_INET6 unless A2 in IPPROTO_IP IPPROTO_TCP EPROTONOSUPPORT\n"
                "deny-number open_tree_attr x86_64=467 aarch64=467 ENOSYS\n"
                "allow-socket-families AF_UNIX AF_UNSPEC\n"
                "allow-socket-families AF_NETLINK AF_UNIX\n"
                "deny mbind EPERM";                     /* no final newline */

        assert_int_equal(parse(text, &p, NULL), 0);
        /* 9 rules + socket() and socketpair() for the family list */
        assert_int_equal(seccomp_profile_n_rules(p), 11);

        assert_int_equal(seccomp_profile_describe(p, &d), 0);
        assert_non_null(strstr(d, "t.profile:3\tptrace\t"));
        assert_non_null(strstr(d, "\tEPERM\tif A0 & 0x10000000 == 0x10000000\n"));
        assert_non_null(strstr(d, "\tEPERM\tif A1 & 0xffffffff == 0x5412\n"));
        assert_non_null(strstr(d, "\tEPERM\tif A0 != 0\n"));
        assert_non_null(strstr(d, "\tclone3\t"));
        assert_non_null(strstr(d, "\tENOSYS\t\n"));
        assert_non_null(strstr(d, "\tEPERM\tif A0 == 2 and A1 & 15 == 3\n"));
        assert_non_null(strstr(d, "\tEPROTONOSUPPORT\tif A0 == 10 unless A2 in 0 6\n"));
        assert_non_null(strstr(d, "t.profile:10\topen_tree_attr\t"));
        /* the family lists are merged, sorted, deduplicated; both rules point at the first line */
        assert_non_null(strstr(d, "t.profile:11\tsocket\t"));
        assert_non_null(strstr(d, "t.profile:11\tsocketpair\t"));
        assert_non_null(strstr(d, "\tEAFNOSUPPORT\tunless A0 in 0 1 16\n"));
        assert_non_null(strstr(d, "t.profile:13\tmbind\t"));
}

static void test_parse_errors(void **state) {
        /* Unknown syscalls fail closed, they are never skipped. */
        expect_parse_error("deny sr_no_such_syscall EPERM\n", -EINVAL, "t.profile:1: syscall 'sr_no_such_syscall' is unknown to libseccomp");
        if (seccomp_syscall_resolve_name("open_tree_attr") == __NR_SCMP_ERROR)
                expect_parse_error("# x\ndeny open_tree_attr ENOSYS\n", -EINVAL, "t.profile:2: syscall 'open_tree_attr' is unknown");
        expect_parse_error("deny Ptrace EPERM\n", -EINVAL, "bad syscall name");

        /* Conditions */
        expect_parse_error("deny clone if A0 CLONE_NEWUSER 0 EPERM\n", -EINVAL, "expected '==', '!=' or '&'");
        expect_parse_error("deny clone if A6 == 1 EPERM\n", -EINVAL, "expected an argument A0");
        expect_parse_error("deny clone if EPERM\n", -EINVAL, "incomplete condition");
        expect_parse_error("deny clone if A0 EPERM\n", -EINVAL, "incomplete condition");
        expect_parse_error("deny clone if A0 & 0x3 EPERM\n", -EINVAL, "single-bit mask");
        expect_parse_error("deny clone if A0 & 0 == 0 EPERM\n", -EINVAL, "is zero");
        expect_parse_error("deny clone if A0 & 0x1 == 0x2 EPERM\n", -EINVAL, "bits outside the mask");
        expect_parse_error("deny clone if A0 == 1 and A0 == 2 EPERM\n", -EINVAL, "A0 is compared twice");
        expect_parse_error("deny clone if A0 == 1 and EPERM\n", -EINVAL, "incomplete condition");
        expect_parse_error("deny clone if A0 == 1 A1 == 2 EPERM\n", -EINVAL, "unexpected 'A1'");
        expect_parse_error("deny clone if A0 == 1 or A1 == 2 EPERM\n", -EINVAL, "unexpected 'or'");
        expect_parse_error("deny clone A0 == 1 EPERM\n", -EINVAL, "unexpected 'A0'");

        /* Constants and numbers */
        expect_parse_error("deny clone if A0 & CLONE_NEWFOO EPERM\n", -EINVAL, "unknown constant 'CLONE_NEWFOO'");
        expect_parse_error("deny clone if A0 == 0x EPERM\n", -EINVAL, "bad number '0x'");
        expect_parse_error("deny clone if A0 == 18446744073709551616 EPERM\n", -EINVAL, "bad number");
        expect_parse_error("deny clone if A0 == 12abc EPERM\n", -EINVAL, "bad number");
        expect_parse_error("deny clone if A0 == -1 EPERM\n", -EINVAL, "unknown constant '-1'");

        /* Errnos: names from the table only */
        expect_parse_error("deny ptrace EWHATEVER\n", -EINVAL, "unknown errno 'EWHATEVER'");
        expect_parse_error("deny ptrace 1\n", -EINVAL, "unknown errno '1'");
        expect_parse_error("deny ptrace\n", -EINVAL, "expected 'deny SYSCALL ERRNO'");
        expect_parse_error("deny\n", -EINVAL, "expected 'deny SYSCALL ERRNO'");

        /* unless */
        expect_parse_error("deny socket unless A0 EAFNOSUPPORT\n", -EINVAL, "incomplete 'unless'");
        expect_parse_error("deny socket unless A0 of 1 2 EAFNOSUPPORT\n", -EINVAL, "expected 'in'");
        expect_parse_error("deny socket unless A1 & 0xf0 in 16 EPERM\n", -EINVAL, "contiguous low bits");
        expect_parse_error("deny socket unless A1 & 0xf in 16 EPERM\n", -EINVAL, "outside the mask");
        expect_parse_error("deny socket unless A1 & 0x1 in 0 1 EPERM\n", -EINVAL, "covers every value");
        expect_parse_error("deny socket if A0 == 2 unless A0 in 1 EPERM\n", -EINVAL, "A0 is compared twice");
        /* each gap between these is ~120 aligned blocks */
        expect_parse_error("deny socket unless A0 in 1 0x3ffffffffffffffe 0x7ffffffffffffffe 0x8000000000000001 "
                           "0xfffffffffffffffe EPERM\n", -E2BIG, "more than 256 rules");

        /* deny-number */
        expect_parse_error("deny-number foo ENOSYS\n", -EINVAL, "needs ARCH=NR pairs");
        expect_parse_error("deny-number foo vax=4 ENOSYS\n", -EINVAL, "architecture 'vax' is unknown");
        expect_parse_error("deny-number foo x86_64=0x80000000 ENOSYS\n", -EINVAL, "bad syscall number");
        expect_parse_error("deny-number foo x86_64= ENOSYS\n", -EINVAL, "bad syscall number");
        expect_parse_error("deny-number foo x86_64=1 x86_64=2 ENOSYS\n", -EINVAL, "given twice");

        /* Families and directives */
        expect_parse_error("allow-socket-families\n", -EINVAL, "at least one");
        expect_parse_error("allow-socket-families AF_UNIX SOCK_RAW\n", -EINVAL, "expected an AF_* name");
        expect_parse_error("allow-socket-families AF_NOPE\n", -EINVAL, "unknown constant 'AF_NOPE'");
        expect_parse_error("allow-socket-families 4096\n", -EINVAL, "out of range");
        expect_parse_error("\n\nallow ptrace\n", -EINVAL, "t.profile:3: unknown directive 'allow'");
        expect_parse_error("architectures\n", -EINVAL, "at least one name");
        expect_parse_error("architectures x86_64 vax\n", -EINVAL, "architecture 'vax' is unknown");
}

static void test_parse_limits(void **state) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *msg = NULL, *big = NULL, *line = NULL;
        size_t n = (1U << 20) + 1;

        big = malloc(n);
        assert_non_null(big);
        memset(big, '\n', n);
        assert_int_equal(seccomp_profile_parse("big.profile", big, n, &p, &msg), -E2BIG);
        assert_non_null(strstr(msg, "big.profile: larger than"));
        free(msg);
        msg = NULL;

        line = malloc(5000);
        assert_non_null(line);
        memset(line, ' ', 5000);
        memcpy(line, "# ", 2);
        assert_int_equal(seccomp_profile_parse("long.profile", line, 5000, &p, &msg), -EINVAL);
        assert_non_null(strstr(msg, "long.profile:1: line longer than"));
        free(msg);
        msg = NULL;

        /* A NUL byte inside the text (size given explicitly). */
        assert_int_equal(seccomp_profile_parse("nul.profile", "deny ptrace EPERM\ndeny kcmp \0 EPERM\n", 35, &p, &msg),
                         -EINVAL);
        assert_non_null(strstr(msg, "nul.profile:2: NUL byte"));
        free(msg);
        msg = NULL;

        /* NULL ret_error is fine; an empty profile is a valid profile without rules. */
        assert_int_equal(parse("deny nope_nope EPERM", &p, NULL), -EINVAL);
        assert_int_equal(seccomp_profile_parse("empty.profile", "", 0, &p, NULL), 0);
        assert_int_equal(seccomp_profile_n_rules(p), 0);
}

static void test_includes(void **state) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *base = NULL, *p = NULL;
        _cleanup_free_ char *d = NULL;
        const char *text;
        size_t size;

        assert_int_equal(seccomp_builtin_profile("baseline", &text, &size), 0);
        assert_int_equal(seccomp_profile_parse("baseline.profile", text, size, &base, NULL), 0);
        assert_int_equal(seccomp_builtin_profile("no-such-profile", &text, &size), -ENOENT);

        /* An include adds the included rules; the family lists of both are merged. */
        assert_int_equal(parse("include baseline\ndeny mlock EPERM\nallow-socket-families AF_INET\n", &p, NULL), 0);
        assert_int_equal(seccomp_profile_n_rules(p), seccomp_profile_n_rules(base) + 1);
        assert_int_equal(seccomp_profile_describe(p, &d), 0);
        assert_non_null(strstr(d, "\tEAFNOSUPPORT\tunless A0 in 0 1 2 16\n"));
        assert_non_null(strstr(d, "baseline.profile:"));        /* origins name the included file */
        assert_non_null(strstr(d, "t.profile:2\tmlock\t"));

        expect_parse_error("include nonexistent\n", -ENOENT, "t.profile:1: unknown profile 'nonexistent'");
        expect_parse_error("include\n", -EINVAL, "expected 'include NAME'");
        expect_parse_error("include ../etc/passwd\n", -EINVAL, "expected 'include NAME'");
        expect_parse_error("include baseline network\n", -EINVAL, "expected 'include NAME'");

        /* A profile that includes itself, directly or through a chain. */
        {
                _cleanup_(seccomp_profile_freep) SeccompProfile *q = NULL;
                _cleanup_free_ char *msg = NULL;

                assert_int_equal(seccomp_profile_parse("baseline.profile", "include baseline\n", 17, &q, &msg), -ELOOP);
                assert_non_null(strstr(msg, "baseline.profile:1: include cycle"));
                free(msg);
                msg = NULL;
                assert_int_equal(seccomp_profile_parse("baseline", "include network\n", 16, &q, &msg), -ELOOP);
                assert_non_null(strstr(msg, "network.profile:"));
                assert_non_null(strstr(msg, "include cycle: 'baseline'"));
        }
}

static void test_variants_rule_counts(void **state) {
        size_t n[_SECCOMP_VARIANT_MAX];

        for (int v = 0; v < _SECCOMP_VARIANT_MAX; v++) {
                _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
                _cleanup_free_ char *file = NULL, *msg = NULL, *d = NULL;
                const char *text, *name = seccomp_variant_to_string(v);
                size_t size, lines = 0;

                assert_int_equal(seccomp_builtin_profile(name, &text, &size), 0);
                assert_true(asprintf(&file, "%s.profile", name) > 0);
                if (seccomp_profile_parse(file, text, size, &p, &msg) < 0)
                        fail_msg("%s", msg);
                n[v] = seccomp_profile_n_rules(p);

                assert_int_equal(seccomp_profile_describe(p, &d), 0);
                for (const char *c = d; (c = strchr(c, '\n')); c++)
                        lines++;
                assert_int_equal(lines, n[v]);
                /* Only the errnos the profiles are documented to use. */
                for (char *l = d, *e; *l; l = e + 1) {
                        e = strchr(l, '\n');
                        assert_non_null(e);
                        *e = '\0';
                        if (!strstr(l, "\tEPERM\t") && !strstr(l, "\tENOSYS\t") &&
                            !strstr(l, "\tEAFNOSUPPORT\t") && !strstr(l, "\tEPROTONOSUPPORT\t"))
                                fail_msg("unexpected errno in '%s'", l);
                }
        }

        /* SECURITY.md §2 has 70-odd entries; the baseline meets or exceeds it. */
        assert_in_range(n[SECCOMP_VARIANT_BASELINE], 75, 200);
        /* network = baseline + type and protocol rules for AF_INET and AF_INET6 */
        assert_int_equal(n[SECCOMP_VARIANT_NETWORK], n[SECCOMP_VARIANT_BASELINE] + 4);
        assert_int_equal(n[SECCOMP_VARIANT_NPU], n[SECCOMP_VARIANT_NETWORK]);
}

static void check_sealed_memfd(int fd, size_t *ret_size) {
        char path[64], target[256];
        struct stat st;
        ssize_t k;
        char c;

        assert_true(fd >= 0);
        assert_int_equal(fcntl(fd, F_GET_SEALS),
                         F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_true(st.st_size > 0);
        assert_int_equal(st.st_size % 8, 0);                   /* struct sock_filter */
        assert_true(st.st_size <= 4096 * 8);                   /* BPF_MAXINSNS */

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        k = readlink(path, target, sizeof(target) - 1);
        assert_true(k > 0);
        target[k] = '\0';
        assert_non_null(strstr(target, "memfd:sandbox-seccomp"));

        /* Sealed: no write, no growth, no shrinking, no further seals. */
        assert_int_equal(pwrite(fd, "x", 1, 0), -1);
        assert_int_equal(errno, EPERM);
        assert_int_equal(ftruncate(fd, 0), -1);
        assert_int_equal(ftruncate(fd, st.st_size + 8), -1);
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
        assert_int_equal(pread(fd, &c, 1, 0), 1);
        *ret_size = (size_t) st.st_size;
}

static void test_variants_compile(void **state) {
        for (int v = 0; v < _SECCOMP_VARIANT_MAX; v++) {
                _cleanup_close_ int a = -EBADF, b = -EBADF;
                _cleanup_free_ char *msg = NULL;
                size_t sa, sb;
                char c;

                if (seccomp_program_for_variant(v, &a, &msg) < 0)
                        fail_msg("%s: %s", seccomp_variant_to_string(v), msg);
                check_sealed_memfd(a, &sa);
                /* A second call: a new memfd with its own offset, the same program. */
                assert_int_equal(seccomp_program_for_variant(v, &b, NULL), 0);
                check_sealed_memfd(b, &sb);
                assert_int_not_equal(a, b);
                assert_int_equal(sa, sb);
                assert_int_equal(read(a, &c, 1), 1);
                assert_int_equal(lseek(b, 0, SEEK_CUR), 0);
        }

        {
                _cleanup_free_ char *msg = NULL;
                int fd = -EBADF;

                assert_int_equal(seccomp_program_for_variant(_SECCOMP_VARIANT_MAX, &fd, &msg), -EINVAL);
                assert_non_null(msg);
                assert_int_equal(seccomp_program_for_variant(_SECCOMP_VARIANT_INVALID, &fd, NULL), -EINVAL);
                assert_int_equal(fd, -EBADF);
        }
}

static const char *native_arch_name(void) {
        static const char *const names[] = { "x86_64", "aarch64", "x86", "arm", "riscv64", "ppc64le", "s390x" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (seccomp_arch_resolve_name(names[i]) == seccomp_arch_native())
                        return names[i];
        return NULL;
}

static void test_compile_fails_closed(void **state) {
        const char *native = native_arch_name();
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL, *q = NULL, *u = NULL;
        _cleanup_free_ char *msg = NULL, *text = NULL;
        int fd = -EBADF;

        /* No number for the native architecture: parse accepts it, compile refuses. */
        assert_non_null(native);
        assert_int_equal(parse(streq(native, "s390x") ? "deny-number foo ppc64le=467 ENOSYS\n" :
                               "deny-number foo s390x=467 ENOSYS\n", &p, NULL), 0);
        assert_int_equal(seccomp_profile_compile(p, &fd, &msg), -EINVAL);
        assert_int_equal(fd, -EBADF);
        assert_non_null(strstr(msg, "t.profile:1: no number for foo on the native architecture"));
        free(msg);
        msg = NULL;

        /* A number that contradicts libseccomp's table. */
        assert_true(asprintf(&text, "deny-number ptrace %s=999 ENOSYS\n", native) > 0);
        assert_int_equal(parse(text, &q, NULL), 0);
        assert_int_equal(seccomp_profile_compile(q, &fd, &msg), -EINVAL);
        assert_non_null(strstr(msg, "ptrace is "));
        assert_non_null(strstr(msg, ", not 999"));
        free(msg);
        msg = NULL;

        /* A profile written for other architectures only. */
        {
                _cleanup_(seccomp_profile_freep) SeccompProfile *a = NULL, *b = NULL;
                _cleanup_free_ char *t = NULL;

                assert_int_equal(parse(streq(native, "s390x") ? "deny ptrace EPERM\narchitectures ppc64le mips\n" :
                                       "deny ptrace EPERM\narchitectures s390x mips\n", &a, NULL), 0);
                assert_int_equal(seccomp_profile_compile(a, &fd, &msg), -EOPNOTSUPP);
                assert_non_null(strstr(msg, "t.profile:2: the profile is not written for the native architecture"));
                free(msg);
                msg = NULL;

                assert_true(asprintf(&t, "architectures s390x %s\narchitectures %s\ndeny ptrace EPERM\n",
                                     native, native) > 0);
                assert_int_equal(parse(t, &b, NULL), 0);
                assert_int_equal(seccomp_profile_compile(b, &fd, NULL), 0);
                fd = safe_close(fd);
        }

        /* A syscall that does not exist on this architecture has nothing to filter. */
        assert_int_equal(parse("deny umount EPERM\ndeny uselib EPERM\n", &u, NULL), 0);
        assert_int_equal(seccomp_profile_compile(u, &fd, &msg), 0);
        safe_close(fd);
}

static void test_errno_override(void **state) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *d = NULL;

        assert_int_equal(parse("deny ptrace EPERM\ndeny clone3 ENOSYS\n", &p, NULL), 0);
        assert_int_equal(seccomp_profile_set_errno_override(p, 5000), -EINVAL);
        assert_int_equal(seccomp_profile_set_errno_override(p, -1), -EINVAL);
        assert_int_equal(seccomp_profile_set_errno_override(p, ENOTRECOVERABLE), 0);
        assert_int_equal(seccomp_profile_describe(p, &d), 0);
        assert_null(strstr(d, "EPERM"));
        assert_null(strstr(d, "ENOSYS"));
        assert_non_null(strstr(d, "\tptrace\t"));
}

/* ---------------------------------------------------------------------------------------------
 * Semantics against the kernel: load a compiled program in a child and call getpid() (which
 * ignores its arguments) with chosen argument registers. The filter sees them all.
 */

static void load_program(int memfd) {
        struct sock_filter insns[4096];
        struct sock_fprog prog;
        ssize_t k = pread(memfd, insns, sizeof(insns), 0);

        if (k <= 0 || k % sizeof(struct sock_filter) != 0)
                _exit(90);
        prog = (struct sock_fprog) { .len = (unsigned short) (k / sizeof(struct sock_filter)), .filter = insns };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(91);
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                _exit(92);
}

typedef struct ArgCase {
        uint64_t args[6];
        int expect;             /* 0 = allowed, else the errno */
} ArgCase;

/* Compile @text, then in a child check each case. Return: the child's exit status (0 = all
 * matched; 100+i = case i differed). */
static int check_cases(const char *text, long nr, const ArgCase *cases, size_t n) {
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *msg = NULL;
        _cleanup_close_ int fd = -EBADF;
        pid_t pid;
        int status;

        if (parse(text, &p, &msg) < 0)
                fail_msg("%s", msg);
        if (seccomp_profile_compile(p, &fd, &msg) < 0)
                fail_msg("%s", msg);

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                load_program(fd);
                for (size_t i = 0; i < n; i++) {
                        const uint64_t *a = cases[i].args;
                        long r;

                        errno = 0;
                        r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
                        if ((cases[i].expect == 0 && r < 0) || (cases[i].expect != 0 && (r >= 0 || errno != cases[i].expect))) {
                                fprintf(stderr, "case %zu: args %#" PRIx64 " %#" PRIx64 " %#" PRIx64 ": r=%ld errno=%d, expected %d\n",
                                        i, a[0], a[1], a[2], r, errno, cases[i].expect);
                                _exit(n < 150 ? 100 + (int) i : 100);
                        }
                }
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status))
                return 256 + WTERMSIG(status);
        return WEXITSTATUS(status);
}

static void test_kernel_conditions(void **state) {
        static const ArgCase and_cases[] = {
                { { 0 }, 0 },
                { { 5, 0x30 }, EPERM },                         /* A0 == 5 and A1 & 0xf0 == 0x30 */
                { { 5, 0x3f }, EPERM },
                { { 5, 0x13f }, EPERM },                        /* only the masked bits count */
                { { 5, 0x20 }, 0 },
                { { 6, 0x30 }, 0 },
                { { 5 | (1ULL << 32), 0x30 }, 0 },             /* == compares all 64 bits */
        };
        static const ArgCase ne_cases[] = {
                { { 0, 0, 7 }, 0 },                             /* A2 != 7 */
                { { 0, 0, 8 }, EACCES },
                { { 0, 0, 0 }, EACCES },
                { { 0, 0, 7 | (1ULL << 40) }, EACCES },
        };
        static const ArgCase bit_cases[] = {
                { { 0 }, 0 },
                { { 0, 0, 0, 0, 0, 1ULL << 63 }, ENOTTY },      /* A5 & bit 63 */
                { { 0, 0, 0, 0, 0, (1ULL << 63) | 1 }, ENOTTY },
                { { 0, 0, 0, 0, 0, (1ULL << 62) }, 0 },
        };

        assert_int_equal(check_cases("deny getpid if A0 == 5 and A1 & 0xf0 == 0x30 EPERM\n",
                                     SYS_getpid, and_cases, ELEMENTSOF(and_cases)), 0);
        assert_int_equal(check_cases("deny getpid if A2 != 7 EACCES\n", SYS_getpid, ne_cases, ELEMENTSOF(ne_cases)), 0);
        assert_int_equal(check_cases("deny getpid if A5 & 0x8000000000000000 ENOTTY\n",
                                     SYS_getpid, bit_cases, ELEMENTSOF(bit_cases)), 0);
}

/* "unless" sets, exhaustively near every boundary, against a straightforward model. */
static bool model_denied(uint64_t mask, const uint64_t *set, size_t n, uint64_t v) {
        uint64_t x = mask ? (v & mask) : v;

        for (size_t i = 0; i < n; i++)
                if (set[i] == x)
                        return false;
        return true;
}

static uint64_t lcg(uint64_t *s) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        return *s >> 11 ^ *s << 21;
}

static void test_kernel_unless_sets(void **state) {
        static const uint64_t masks[] = { 0, 0x1, 0xf, 0xff, 0xffff, 0xffffffff };
        uint64_t seed = 42;
        unsigned skipped = 0;

        for (unsigned round = 0; round < 60; round++) {
                uint64_t mask = masks[round % ELEMENTSOF(masks)], set[6];
                unsigned arg = round % 6, nset = 1 + (unsigned) (lcg(&seed) % 5);
                _cleanup_free_ char *text = NULL, *vals = NULL;
                ArgCase cases[200];
                size_t n = 0, vl = 0;
                FILE *f;

                f = open_memstream(&vals, &vl);
                assert_non_null(f);
                for (unsigned i = 0; i < nset; i++) {
                        uint64_t r = lcg(&seed);
                        /* small values, values near the top and plain random ones */
                        set[i] = (i % 3 == 0) ? r % 40 : (i % 3 == 1) ? UINT64_MAX - r % 3 : r;
                        if (mask)
                                set[i] &= mask;
                        fprintf(f, " %#" PRIx64, set[i]);
                }
                fclose(f);
                if (mask)
                        assert_true(asprintf(&text, "deny getpid unless A%u & %#" PRIx64 " in%s EPERM\n", arg, mask, vals) > 0);
                else
                        assert_true(asprintf(&text, "deny getpid unless A%u in%s EPERM\n", arg, vals) > 0);
                {
                        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
                        int r = parse(text, &p, NULL);

                        /* A set covering the whole domain, or one expanding past 256 rules, is
                         * refused by the parser (tested above); skip those draws. */
                        if (r == -EINVAL || r == -E2BIG) {
                                skipped++;
                                continue;
                        }
                        assert_int_equal(r, 0);
                }

#define ADD(v)                                                                                  \
                do {                                                                            \
                        uint64_t _v = (v);                                                      \
                        if (n < ELEMENTSOF(cases)) {                                            \
                                cases[n] = (ArgCase) {};                                        \
                                cases[n].args[arg] = _v;                                        \
                                cases[n].expect = model_denied(mask, set, nset, _v) ? EPERM : 0; \
                                n++;                                                            \
                        }                                                                       \
                } while (false)

                for (unsigned i = 0; i < nset; i++) {
                        ADD(set[i]);
                        ADD(set[i] + 1);
                        ADD(set[i] - 1);
                        ADD(set[i] + 2);
                        ADD(set[i] ^ (1ULL << 33));             /* high bits: ignored only with a mask */
                        ADD(set[i] | 0xffffffff00000000ULL);
                }
                ADD(0);
                ADD(1);
                ADD(UINT64_MAX);
                ADD(mask);
                ADD(mask + 1);
                for (unsigned i = 0; i < 40; i++)
                        ADD(lcg(&seed) >> (lcg(&seed) % 64));
                for (unsigned i = 0; i < 16; i++)
                        ADD(i);
#undef ADD
                if (check_cases(text, SYS_getpid, cases, n) != 0)
                        fail_msg("round %u: %s", round, text);
        }
        assert_true(skipped < 10);
}

/* The embedded baseline as the kernel sees it, without bwrap (the battery does the rest). */
static void test_kernel_baseline(void **state) {
        _cleanup_close_ int fd = -EBADF;
        pid_t pid;
        int status;

        assert_int_equal(seccomp_program_for_variant(SECCOMP_VARIANT_BASELINE, &fd, NULL), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                load_program(fd);
                if (syscall(SYS_unshare, 0x10000000 /* CLONE_NEWUSER */) >= 0 || errno != EPERM)
                        _exit(1);
#ifdef SYS_clone3
                if (syscall(SYS_clone3, NULL, 0) >= 0 || errno != ENOSYS)
                        _exit(2);
#endif
                if (syscall(SYS_socket, 2 /* AF_INET */, 1, 0) >= 0 || errno != EAFNOSUPPORT)
                        _exit(3);
                if (syscall(SYS_personality, 0x0040000 /* ADDR_NO_RANDOMIZE */) >= 0 || errno != EPERM)
                        _exit(4);
                if (syscall(SYS_personality, 0) < 0)
                        _exit(5);
                if (syscall(SYS_getpid) <= 0)
                        _exit(6);
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_variant_strings),
                cmocka_unit_test(test_parse_minimal),
                cmocka_unit_test(test_parse_errors),
                cmocka_unit_test(test_parse_limits),
                cmocka_unit_test(test_includes),
                cmocka_unit_test(test_variants_rule_counts),
                cmocka_unit_test(test_variants_compile),
                cmocka_unit_test(test_compile_fails_closed),
                cmocka_unit_test(test_errno_override),
                cmocka_unit_test(test_kernel_conditions),
                cmocka_unit_test(test_kernel_unless_sets),
                cmocka_unit_test(test_kernel_baseline),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
