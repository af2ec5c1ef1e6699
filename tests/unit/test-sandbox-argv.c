/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Golden tests of src/sandbox/sandbox-argv.c: the whole bwrap argv per case (with an environment,
 * extra binds, an NPU launch and CDI edits too), and the env/cwd/bind validators. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/sandbox-argv.h"
#include "util/strv.h"

#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))

/* ---------------------------------------------------------------------------------------------
 * Comparison with a readable diff: a longest-common-subsequence alignment of the two arrays,
 * printed one element a line, "  " same, "- " expected but missing, "+ " present but unexpected. */

static size_t count(const char *const *l) {
        size_t n = 0;

        while (l && l[n])
                n++;
        return n;
}

/* @s with everything but printable ASCII as \xNN, in a buffer the caller frees. */
static char *escape(const char *s) {
        char *e = malloc(strlen(s) * 4 + 1), *q = e;

        assert_non_null(e);
        for (const char *p = s; *p; p++) {
                unsigned char c = (unsigned char) *p;
                if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
                        *q++ = (char) c;
                else
                        q += sprintf(q, "\\x%02x", c);
        }
        *q = 0;
        return e;
}

/* Every message line starts with "# ", so that it is a TAP comment. */
static void print_element(const char *prefix, size_t index, const char *s) {
        char *e = escape(s);

        print_message("# %s[%3zu] \"%s\"\n", prefix, index, e);
        free(e);
}

static void print_argv_diff(const char *const *got, size_t n_got, const char *const *want, size_t n_want) {
        /* lcs[i][j] = LCS length of want[i..] and got[j..] */
        size_t *lcs = calloc((n_want + 1) * (n_got + 1), sizeof(size_t));
        size_t i = 0, j = 0;

        assert_non_null(lcs);
#define LCS(a, b) lcs[(a) * (n_got + 1) + (b)]
        for (size_t a = n_want; a-- > 0; )
                for (size_t b = n_got; b-- > 0; )
                        LCS(a, b) = strcmp(want[a], got[b]) == 0 ? LCS(a + 1, b + 1) + 1
                                                                 : (LCS(a + 1, b) > LCS(a, b + 1) ? LCS(a + 1, b)
                                                                                                  : LCS(a, b + 1));
        print_message("# argv differs (%zu elements expected, %zu got); - expected, + got:\n", n_want, n_got);
        while (i < n_want || j < n_got) {
                if (i < n_want && j < n_got && strcmp(want[i], got[j]) == 0) {
                        print_element("  ", j, got[j]);
                        i++, j++;
                } else if (j < n_got && (i == n_want || LCS(i, j + 1) >= LCS(i + 1, j))) {
                        print_element("+ ", j, got[j]);
                        j++;
                } else {
                        print_element("- ", i, want[i]);
                        i++;
                }
        }
#undef LCS
        free(lcs);
}

static void assert_argv_equal_at(char **got, const char *const *want, const char *file, int line) {
        size_t n_got = count((const char *const *) got), n_want = count(want);
        bool same = n_got == n_want;

        for (size_t i = 0; same && i < n_want; i++)
                same = strcmp(got[i], want[i]) == 0;
        if (same)
                return;
        print_message("# %s:%d:\n", file, line);
        print_argv_diff((const char *const *) got, n_got, want, n_want);
        fail();
}
#define assert_argv_equal(got, ...) \
        assert_argv_equal_at((got), (const char *const[]) { __VA_ARGS__, NULL }, __FILE__, __LINE__)

/* ---------------------------------------------------------------------------------------------
 * Inputs */

static char *payload_python[] = { "python3", "-c", "print(6*7)", NULL };

static SandboxSpec spec_default(void) {
        return (SandboxSpec) {
                .workspace = "/var/lib/sandbox-runner/workspaces/agent7-runner1",
                .cwd = NULL,
                .argv = payload_python,
                .env = NULL,
                .tmp_size = 0,
                .seccomp_fd = 3,
                .passwd_fd = -1,
                .group_fd = -1,
                .hosts_fd = -1,
                .code_fd = -1,
        };
}

static char **build_ok(const SandboxSpec *spec, const SandboxProbe *probe) {
        char **a = NULL, **b = NULL;

        assert_int_equal(sandbox_argv_build(spec, probe, &a), 0);
        assert_non_null(a);

        /* Pure: the same inputs give the same argv again. */
        assert_int_equal(sandbox_argv_build(spec, probe, &b), 0);
        assert_argv_equal_at(b, (const char *const *) a, __FILE__, __LINE__);
        strv_free(b);
        return a;
}

/* ---------------------------------------------------------------------------------------------
 * Golden argv */

/* The common case of a current host: fresh procfs, --disable-userns works, merged /usr. */
static void test_fresh_proc_userns_merged(void **state) {
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a = build_ok(&spec, &probe);

        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* An old host: /proc only as a read-only bind, no --disable-userns, /bin etc. real directories. */
static void test_robind_proc_no_userns_unmerged(void **state) {
        char *lib_dirs[] = { "/lib64", "/lib32", NULL };
        SandboxProbe probe = { .proc_fresh = false, .disable_userns = false, .usr_merged = false,
                               .lib_dirs = lib_dirs };
        SandboxSpec spec = spec_default();
        char **a;

        spec.cwd = "";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--ro-bind", "/bin", "/bin",
                "--ro-bind", "/sbin", "/sbin",
                "--ro-bind", "/lib", "/lib",
                "--ro-bind", "/lib64", "/lib64",
                "--ro-bind", "/lib32", "/lib32",
                "--dev", "/dev",
                "--ro-bind", "/proc", "/proc",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* Merged /usr with extra lib dirs (links), /etc files, all three generated /etc files and the code. */
static void test_merged_lib_dirs_etc_files_all_fds(void **state) {
        char *lib_dirs[] = { "/lib64", "/libx32", NULL };
        char *etc_files[] = { "/etc/ld.so.cache", "/etc/ssl/certs", "/etc/resolv.conf", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = false, .usr_merged = true,
                               .lib_dirs = lib_dirs, .etc_files = etc_files };
        SandboxSpec spec = spec_default();
        char **a;

        spec.passwd_fd = 5;
        spec.group_fd = 6;
        spec.hosts_fd = 7;
        spec.code_fd = 8;
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/lib64", "/lib64",
                "--symlink", "usr/libx32", "/libx32",
                "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
                "--ro-bind", "/etc/ssl/certs", "/etc/ssl/certs",
                "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf",
                "--ro-bind-data", "5", "/etc/passwd",
                "--ro-bind-data", "6", "/etc/group",
                "--ro-bind-data", "7", "/etc/hosts",
                "--ro-bind-data", "8", "/.sandbox/code",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* Only some generated /etc files; a code fd of 0..2 (stdio) means none. */
static void test_some_fds(void **state) {
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;

        spec.passwd_fd = 4;
        spec.hosts_fd = 12;
        spec.code_fd = 2;
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--ro-bind-data", "4", "/etc/passwd",
                "--ro-bind-data", "12", "/etc/hosts",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* Early start (with a scope): --info-fd just before --seccomp; an info fd of 0..2 means none. */
static void test_info_fd(void **state) {
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;

        spec.info_fd = 10;
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--info-fd", "10",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);

        spec.info_fd = 2;
        a = build_ok(&spec, &probe);
        for (char **p = a; *p; p++)
                assert_string_not_equal(*p, "--info-fd");
        strv_free(a);
}

/* A /tmp size (just before its --tmpfs) and a working directory below /workspace. */
static void test_tmp_size_and_cwd(void **state) {
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;

        spec.tmp_size = UINT64_C(67108864);
        spec.cwd = "a/b";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--size", "67108864",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace/a/b",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);

        /* The largest size is written in full. */
        spec.tmp_size = UINT64_MAX;
        spec.cwd = "x";
        a = build_ok(&spec, &probe);
        assert_int_equal(strv_length(a), 76);
        assert_string_equal(a[42], "--size");
        assert_string_equal(a[43], "18446744073709551615");
        assert_string_equal(a[44], "--tmpfs");
        assert_string_equal(a[50], "/workspace/x");
        strv_free(a);
}

/* Extra environment after the baseline, values verbatim (empty, with '=', spaces, quotes, newline). */
static void test_extra_env(void **state) {
        char *env[] = {
                "MY_VAR=x",
                "EMPTY=",
                "WITH_EQ=a=b=c",
                "SPACES=hello world",
                "QUOTES=\"double\" 'single' $HOME `id`",
                "NL=line1\nline2",
                "_under=1",
                NULL,
        };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;

        spec.env = env;
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "MY_VAR", "x",
                "--setenv", "EMPTY", "",
                "--setenv", "WITH_EQ", "a=b=c",
                "--setenv", "SPACES", "hello world",
                "--setenv", "QUOTES", "\"double\" 'single' $HOME `id`",
                "--setenv", "NL", "line1\nline2",
                "--setenv", "_under", "1",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* The payload argv is passed verbatim after "--", even when it looks like bwrap options. */
static void test_payload_argv_verbatim(void **state) {
        char *payload[] = { "sh", "-c", "echo \"a b\" 'c d' $HOME; ls -la", "", "--", "--bind", "/ /", "x y", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;

        spec.argv = payload;
        spec.seccomp_fd = 10;
        spec.workspace = "/srv/work spaces/w 1";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/srv/work spaces/w 1", "/workspace",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "10",
                "--", "sh", "-c", "echo \"a b\" 'c d' $HOME; ls -la", "", "--", "--bind", "/ /", "x y");
        strv_free(a);
}

/* Everything at once, in the non-default direction of each probe, with the code as a file. */
static void test_everything(void **state) {
        char *lib_dirs[] = { "/lib64", NULL };
        char *etc_files[] = { "/etc/ld.so.cache", NULL };
        char *env[] = { "MY_VAR=1", NULL };
        char *payload[] = { "/usr/bin/Rscript", "-e", "cat(42)", NULL };
        SandboxProbe probe = { .proc_fresh = false, .disable_userns = true, .usr_merged = false,
                               .lib_dirs = lib_dirs, .etc_files = etc_files };
        SandboxSpec spec = {
                .workspace = "/w",
                .cwd = "x/y/z",
                .argv = payload,
                .env = env,
                .tmp_size = 1,
                .seccomp_fd = 3,
                .passwd_fd = 4,
                .group_fd = 5,
                .hosts_fd = -1,
                .code_fd = 6,
        };
        char **a = build_ok(&spec, &probe);

        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--ro-bind", "/bin", "/bin",
                "--ro-bind", "/sbin", "/sbin",
                "--ro-bind", "/lib", "/lib",
                "--ro-bind", "/lib64", "/lib64",
                "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
                "--ro-bind-data", "4", "/etc/passwd",
                "--ro-bind-data", "5", "/etc/group",
                "--ro-bind-data", "6", "/.sandbox/code",
                "--dev", "/dev",
                "--ro-bind", "/proc", "/proc",
                "--size", "1",
                "--tmpfs", "/tmp",
                "--bind", "/w", "/workspace",
                "--chdir", "/workspace/x/y/z",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "MY_VAR", "1",
                "--seccomp", "3",
                "--", "/usr/bin/Rscript", "-e", "cat(42)");
        strv_free(a);
}

/* An environment: its prefix read-only at /opt/science-env after the workspace, each host
 * interpreter covered by the empty file, its bin/ first on PATH. */
static void test_env_prefix_hides_interpreters(void **state) {
        char *interpreters[] = { "/usr/bin/R", "/usr/bin/Rscript", "/usr/bin/pip3", "/usr/bin/python3",
                                 "/usr/bin/python3.11", "/usr/local/bin/python3.12", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true,
                               .interpreters = interpreters };
        SandboxSpec spec = spec_default();
        char **a;

        spec.env_prefix = "/var/lib/sandbox-runner/environments/prefixes/python-base";
        spec.hide_file = "/var/lib/sandbox-runner/environments/hidden";
        spec.cwd = "sub";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/var/lib/sandbox-runner/environments/prefixes/python-base", "/opt/science-env",
                "--ro-bind", "/var/lib/sandbox-runner/environments/hidden", "/usr/bin/R",
                "--ro-bind", "/var/lib/sandbox-runner/environments/hidden", "/usr/bin/Rscript",
                "--ro-bind", "/var/lib/sandbox-runner/environments/hidden", "/usr/bin/pip3",
                "--ro-bind", "/var/lib/sandbox-runner/environments/hidden", "/usr/bin/python3",
                "--ro-bind", "/var/lib/sandbox-runner/environments/hidden", "/usr/bin/python3.11",
                "--ro-bind", "/var/lib/sandbox-runner/environments/hidden", "/usr/local/bin/python3.12",
                "--chdir", "/workspace/sub",
                "--clearenv",
                "--setenv", "PATH", "/opt/science-env/bin:/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);

        /* A host without interpreters: nothing to cover, no hide file needed. */
        probe.interpreters = NULL;
        spec.hide_file = NULL;
        a = build_ok(&spec, &probe);
        assert_int_equal(strv_length(a), 77);
        assert_string_equal(a[44], "--bind");
        assert_string_equal(a[47], "--ro-bind");
        assert_string_equal(a[48], "/var/lib/sandbox-runner/environments/prefixes/python-base");
        assert_string_equal(a[49], "/opt/science-env");
        assert_string_equal(a[50], "--chdir");
        assert_string_equal(a[55], "/opt/science-env/bin:/usr/local/bin:/usr/bin:/bin");
        strv_free(a);

        /* Interpreters but no environment: the host's own are visible, PATH is the baseline. */
        probe.interpreters = interpreters;
        spec.env_prefix = NULL;
        spec.cwd = NULL;
        a = build_ok(&spec, &probe);
        assert_int_equal(strv_length(a), 74);
        for (char **p = a; *p; p++) {
                assert_string_not_equal(*p, "/opt/science-env");
                assert_string_not_equal(*p, "/usr/bin/python3");
        }
        assert_string_equal(a[51], "PATH");
        assert_string_equal(a[52], "/usr/local/bin:/usr/bin:/bin");
        strv_free(a);
}

/* The provisioning sandbox's shape: extra binds, writable and read-only, in order, after the
 * workspace and egress binds; PATH stays the baseline (no environment in use). */
static void test_extra_binds(void **state) {
        const SandboxBind binds[] = {
                { "/var/lib/sandbox-runner/environments/prefixes/.new-sci-3", "/opt/science-env", true },
                { "/var/lib/sandbox-runner/environments/wheels", "/opt/wheelhouse", false },
                { "/var/lib/dpkg", "/var/lib/dpkg", false },
                { "/etc/R", "/etc/R", false },
                { "/srv/cache dir", "/tmp/pip cache", true },
        };
        char *payload[] = { "/usr/bin/python3", "-m", "venv", "--copies", "/opt/science-env", NULL };
        char *interpreters[] = { "/usr/bin/python3", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true,
                               .interpreters = interpreters };
        SandboxSpec spec = spec_default();
        char **a;

        spec.argv = payload;
        spec.binds = binds;
        spec.n_binds = ELEMENTS(binds);
        spec.egress_socket = "/run/sandbox-runner/egress/env.sock";
        spec.bridge = "/usr/libexec/sandbox-runner/sandbox-runner-bridge";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/usr/libexec/sandbox-runner/sandbox-runner-bridge", "/.sandbox/bridge",
                "--bind", "/run/sandbox-runner/egress/env.sock", "/run/sandbox-egress.sock",
                "--bind", "/var/lib/sandbox-runner/environments/prefixes/.new-sci-3", "/opt/science-env",
                "--ro-bind", "/var/lib/sandbox-runner/environments/wheels", "/opt/wheelhouse",
                "--ro-bind", "/var/lib/dpkg", "/var/lib/dpkg",
                "--ro-bind", "/etc/R", "/etc/R",
                "--bind", "/srv/cache dir", "/tmp/pip cache",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "HTTP_PROXY", "http://127.0.0.1:18118",
                "--setenv", "HTTPS_PROXY", "http://127.0.0.1:18118",
                "--setenv", "http_proxy", "http://127.0.0.1:18118",
                "--setenv", "https_proxy", "http://127.0.0.1:18118",
                "--setenv", "NO_PROXY", "localhost,127.0.0.1,::1",
                "--setenv", "no_proxy", "localhost,127.0.0.1,::1",
                "--seccomp", "3",
                "--", "/.sandbox/bridge", "--gateway", "/run/sandbox-egress.sock", "--",
                "/usr/bin/python3", "-m", "venv", "--copies", "/opt/science-env");
        strv_free(a);
}

static ssize_t argv_index(char **a, const char *s) {
        for (ssize_t i = 0; a[i]; i++)
                if (strcmp(a[i], s) == 0)
                        return i;
        return -1;
}

/* The provisioning sandbox: its root read-only after every mount (--remount-ro / after the last
 * bind, before the environment variables); not so without the flag. */
static void test_root_read_only(void **state) {
        const SandboxBind binds[] = { { "/srv/build", "/opt/science-env", true } };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;
        ssize_t i;

        spec.binds = binds;
        spec.n_binds = ELEMENTS(binds);
        a = build_ok(&spec, &probe);
        assert_int_equal(argv_index(a, "--remount-ro"), -1);
        strv_free(a);

        spec.root_read_only = true;
        a = build_ok(&spec, &probe);
        i = argv_index(a, "--remount-ro");
        assert_true(i > argv_index(a, "/opt/science-env"));
        assert_string_equal(a[i + 1], "/");
        assert_true(i < argv_index(a, "--clearenv"));
        strv_free(a);
}

/* An environment and extra binds at once: the binds first, then the environment. */
static void test_env_prefix_with_binds(void **state) {
        const SandboxBind binds[] = { { "/srv/data", "/data", false } };
        char *interpreters[] = { "/bin/python", "/usr/bin/python3", NULL };
        SandboxProbe probe = { .proc_fresh = false, .disable_userns = false, .usr_merged = false,
                               .interpreters = interpreters };
        SandboxSpec spec = spec_default();
        char **a;

        spec.binds = binds;
        spec.n_binds = ELEMENTS(binds);
        spec.env_prefix = "/e/r-base";
        spec.hide_file = "/e/hidden";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--ro-bind", "/bin", "/bin",
                "--ro-bind", "/sbin", "/sbin",
                "--ro-bind", "/lib", "/lib",
                "--dev", "/dev",
                "--ro-bind", "/proc", "/proc",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/srv/data", "/data",
                "--ro-bind", "/e/r-base", "/opt/science-env",
                "--ro-bind", "/e/hidden", "/bin/python",
                "--ro-bind", "/e/hidden", "/usr/bin/python3",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/opt/science-env/bin:/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* ---------------------------------------------------------------------------------------------
 * Refusals */

static void assert_refused(const SandboxSpec *spec, const SandboxProbe *probe, const char *what) {
        char *sentinel[] = { "untouched", NULL };
        char **a = sentinel;
        int r = sandbox_argv_build(spec, probe, &a);

        if (r != -EINVAL) {
                char *e = escape(what);

                print_message("# expected -EINVAL for \"%s\", got %d\n", e, r);
                free(e);
                if (r == 0)
                        strv_free(a);
                fail();
        }
        assert_ptr_equal(a, sentinel);  /* outputs are written only on success */
}

static void test_build_refuses_reserved_env(void **state) {
        static const char *const bad[] = {
                "PATH=/tmp/evil", "HOME=/", "LD_PRELOAD=/workspace/x.so", "LD_LIBRARY_PATH=/workspace",
                "LD_AUDIT=x", "LANG=C", "TMPDIR=/workspace", "USER=root", "LOGNAME=root", "SHELL=/bin/sh",
                "PWD=/", "HTTP_PROXY=http://x", "https_proxy=http://x", "NO_PROXY=*",
                "1ABC=x", "A-B=x", "=x", "NOEQUALS", "",
        };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };

        for (size_t i = 0; i < ELEMENTS(bad); i++) {
                char *env[] = { "MY_VAR=fine", (char *) bad[i], NULL };
                SandboxSpec spec = spec_default();

                spec.env = env;
                assert_refused(&spec, &probe, bad[i]);
        }
}

static void test_build_refuses_bad_cwd(void **state) {
        static const char *const bad[] = { "..", "a/../b", "/abs", "a//b", "a/", ".", "./a", "/", "a\\b", "a\nb" };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };

        for (size_t i = 0; i < ELEMENTS(bad); i++) {
                SandboxSpec spec = spec_default();

                spec.cwd = bad[i];
                assert_refused(&spec, &probe, bad[i]);
        }
}

static void test_build_refuses_incomplete_spec(void **state) {
        char *empty_argv[] = { NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec;
        char **a = NULL;

        assert_int_equal(sandbox_argv_build(NULL, &probe, &a), -EINVAL);
        spec = spec_default();
        assert_int_equal(sandbox_argv_build(&spec, NULL, &a), -EINVAL);

        spec = spec_default();
        spec.workspace = NULL;
        assert_refused(&spec, &probe, "no workspace");
        spec = spec_default();
        spec.argv = NULL;
        assert_refused(&spec, &probe, "no argv");
        spec = spec_default();
        spec.argv = empty_argv;
        assert_refused(&spec, &probe, "empty argv");
        spec = spec_default();
        spec.seccomp_fd = -1;
        assert_refused(&spec, &probe, "no seccomp fd");
}

/* Symbolic links in the sandbox (a skill package's /skill-extensions): after the extra binds,
 * before --chdir; their destinations checked as binds', their targets absolute. */
static void test_symlinks(void **state) {
        const SandboxBind binds[] = { { "/var/lib/sandbox-runner/sd-skills/abc", "/skills", false } };
        const SandboxSymlink links[] = { { "/workspace/.sciencediscovery/skill-extensions", "/skill-extensions" } };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxSpec spec = spec_default();
        ssize_t b, l, c;
        char **a;

        spec.binds = binds;
        spec.n_binds = ELEMENTS(binds);
        spec.symlinks = links;
        spec.n_symlinks = ELEMENTS(links);
        a = build_ok(&spec, &probe);
        b = argv_index(a, "/skills");
        l = argv_index(a, "/skill-extensions");
        c = argv_index(a, "--chdir");
        assert_true(b > 0 && l > 0 && c > 0 && b < l && l < c);
        assert_string_equal(a[b - 2], "--ro-bind");
        assert_string_equal(a[l - 2], "--symlink");
        assert_string_equal(a[l - 1], "/workspace/.sciencediscovery/skill-extensions");
        strv_free(a);

        for (size_t i = 0; i < 4; i++) {
                static const SandboxSymlink bad[] = {
                        { "/workspace/x", "/workspace/x" }, { "relative", "/x" },
                        { "/x", "/usr/bin/evil" }, { "/a\nb", "/x" },
                };
                SandboxSpec s2 = spec_default();

                s2.symlinks = &bad[i];
                s2.n_symlinks = 1;
                assert_refused(&s2, &probe, bad[i].dest);
        }
}

static void test_build_refuses_bad_binds(void **state) {
        static const char *const bad_dests[] = {
                "/", "", "relative", "usr", "/usr", "/usr/", "/usr/lib/x", "/./usr", "/x/../usr", "//usr",
                "/bin", "/bin/sh", "/sbin", "/lib", "/lib64/x", "/lib32", "/libx32", "/proc", "/proc/1",
                "/dev", "/dev/shm", "/workspace", "/workspace/x", "/.sandbox", "/.sandbox/bridge",
                "/etc/passwd", "/etc/group", "/etc/hosts", "/run/sandbox-egress.sock", "/opt/",
                "/opt//x", "/opt/./x", "/a\nb", "/a\\b",
        };
        static const char *const good_dests[] = {
                "/opt/science-env", "/usr2", "/procx", "/devices", "/workspace2", "/binary", "/library",
                "/etc/R", "/etc/hosts.allow", "/var/lib/dpkg", "/tmp/x", "/run/other.sock", "/.sandboxes",
        };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        char **a;

        for (size_t i = 0; i < ELEMENTS(bad_dests); i++) {
                SandboxBind b = { "/srv/x", bad_dests[i], false };
                SandboxSpec spec = spec_default();

                assert_false(sandbox_bind_dest_valid(bad_dests[i]));
                spec.binds = &b;
                spec.n_binds = 1;
                assert_refused(&spec, &probe, bad_dests[i]);
        }
        assert_false(sandbox_bind_dest_valid(NULL));
        for (size_t i = 0; i < ELEMENTS(good_dests); i++) {
                SandboxBind b = { "/srv/x", good_dests[i], true };
                SandboxSpec spec = spec_default();

                if (!sandbox_bind_dest_valid(good_dests[i])) {
                        print_message("# bind destination \"%s\" refused, should be accepted\n", good_dests[i]);
                        fail();
                }
                spec.binds = &b;
                spec.n_binds = 1;
                a = build_ok(&spec, &probe);
                strv_free(a);
        }

        /* A relative or missing source; a count without an array. */
        {
                SandboxBind b = { "srv/x", "/data", false };
                SandboxSpec spec = spec_default();

                spec.binds = &b;
                spec.n_binds = 1;
                assert_refused(&spec, &probe, "relative source");
                b.source = NULL;
                assert_refused(&spec, &probe, "no source");
                spec.binds = NULL;
                assert_refused(&spec, &probe, "n_binds without binds");
        }

        /* With an environment, nothing at or under /opt/science-env: its bind would cover it. */
        {
                SandboxBind b = { "/srv/x", "/opt/science-env", true };
                SandboxSpec spec = spec_default();

                spec.binds = &b;
                spec.n_binds = 1;
                spec.env_prefix = "/e/p";
                assert_refused(&spec, &probe, "bind at the environment");
                b.dest = "/opt/science-env/lib";
                assert_refused(&spec, &probe, "bind under the environment");
                b.dest = "/opt/science-envx";
                a = build_ok(&spec, &probe);
                strv_free(a);
        }
}

static void test_build_refuses_bad_env(void **state) {
        char *interpreters[] = { "/usr/bin/python3", NULL };
        char *relative[] = { "/usr/bin/python3", "usr/bin/R", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true,
                               .interpreters = interpreters };
        SandboxSpec spec = spec_default();

        /* Interpreters to hide and nothing to hide them with. */
        spec.env_prefix = "/e/p";
        assert_refused(&spec, &probe, "env_prefix without hide_file");
        spec.hide_file = "";
        assert_refused(&spec, &probe, "empty hide_file");
        spec.hide_file = "hidden";
        assert_refused(&spec, &probe, "relative hide_file");

        spec.hide_file = "/e/hidden";
        spec.env_prefix = "e/p";
        assert_refused(&spec, &probe, "relative env_prefix");
        spec.env_prefix = "";
        assert_refused(&spec, &probe, "empty env_prefix");

        spec.env_prefix = "/e/p";
        probe.interpreters = relative;
        assert_refused(&spec, &probe, "relative interpreter");
}

/* ---------------------------------------------------------------------------------------------
 * Validators */

static void print_rejection(const char *kind, const char *value, const char *verdict) {
        char *e = escape(value);

        print_message("# %s \"%s\" %s\n", kind, e, verdict);
        free(e);
}

static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);

        assert_non_null(s);
        memset(s, c, n);
        s[n] = 0;
        return s;
}

static void test_env_name_valid(void **state) {
        static const char *const bad[] = {
                "", "PATH", "HOME", "LANG", "TMPDIR", "USER", "LOGNAME", "SHELL", "PWD",
                "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
                "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_", "LD_anything",
                "1ABC", "9", "0_", "A-B", "A B", "A=B", "a.b", "\xc3\x89T\xc3\x89", "A\tB", " A", "A ",
        };
        static const char *const good[] = {
                "MY_VAR", "_", "_X1", "a", "z9", "LD", "LDX", "PATHX", "MY_PATH", "HOME2", "PYTHONPATH",
                "OMP_NUM_THREADS",
        };
        char *s;

        assert_false(sandbox_env_name_valid(NULL));
        for (size_t i = 0; i < ELEMENTS(bad); i++)
                if (sandbox_env_name_valid(bad[i])) {
                        print_rejection("env name", bad[i], "accepted, should be refused");
                        fail();
                }
        for (size_t i = 0; i < ELEMENTS(good); i++)
                if (!sandbox_env_name_valid(good[i])) {
                        print_rejection("env name", good[i], "refused, should be accepted");
                        fail();
                }

        s = repeat('N', 128);
        assert_true(sandbox_env_name_valid(s));
        free(s);
        s = repeat('N', 129);
        assert_false(sandbox_env_name_valid(s));
        free(s);
}

/* A path of exactly @n bytes made of components of up to 200 bytes. */
static char *long_path(size_t n) {
        char *s = repeat('c', n);

        for (size_t i = 200; i < n - 1; i += 201)
                s[i] = '/';
        return s;
}

static void test_cwd_valid(void **state) {
        static const char *const bad[] = {
                "..", ".", "a/../b", "a/..", "../a", "a/.", "./a", "a/./b",
                "/abs", "/", "a//b", "a/", "//", "a\\b", "\\",
                "a\x01", "a\nb", "\tx", "x\x1f", "x\177y",
        };
        static const char *const good[] = {
                "", "a", "a/b.c", "x/y/z", "..a", "a..", "...", ".hidden", "a/.b", "a b", "caf\xc3\xa9", "-rf",
        };
        char *s;

        assert_false(sandbox_cwd_valid(NULL));
        for (size_t i = 0; i < ELEMENTS(bad); i++)
                if (sandbox_cwd_valid(bad[i])) {
                        print_rejection("cwd", bad[i], "accepted, should be refused");
                        fail();
                }
        for (size_t i = 0; i < ELEMENTS(good); i++)
                if (!sandbox_cwd_valid(good[i])) {
                        print_rejection("cwd", good[i], "refused, should be accepted");
                        fail();
                }

        /* Components up to 255 bytes, paths up to 1024 bytes. */
        s = repeat('c', 255);
        assert_true(sandbox_cwd_valid(s));
        free(s);
        s = repeat('c', 256);
        assert_false(sandbox_cwd_valid(s));
        free(s);
        s = long_path(1024);
        assert_int_equal(strlen(s), 1024);
        assert_true(sandbox_cwd_valid(s));
        free(s);
        s = long_path(1025);
        assert_int_equal(strlen(s), 1025);
        assert_false(sandbox_cwd_valid(s));
        free(s);
}

/* ---------------------------------------------------------------------------------------------
 * NPU launches and CDI edits (DESIGN.md §9) */

#define TK "/usr/local/Ascend/ascend-toolkit/latest"
#define DRV "/usr/local/Ascend/driver"

static const unsigned chips_3_5[] = { 3, 5 };
static char *mgmt_all[] = { "davinci_manager", "devmm_svm", "hisi_hdc", NULL };

/* The usual host: everything under /usr/local/Ascend, npu-smi in /usr/local/sbin. */
static SandboxNpu npu_default(void) {
        return (SandboxNpu) {
                .device_root = "/dev",
                .chips = chips_3_5,
                .n_chips = ELEMENTS(chips_3_5),
                .mgmt_nodes = mgmt_all,
                .driver_dir = DRV,
                .toolkit_dir = TK,
                .smi = "/usr/local/sbin/npu-smi",
                .install_info = "/etc/ascend_install.info",
        };
}

/* The value of the last --setenv @name in @a, or NULL. */
static const char *argv_env(char **a, const char *name) {
        const char *v = NULL;

        for (size_t i = 0; a[i]; i++)
                if (strcmp(a[i], "--setenv") == 0 && a[i + 1] && strcmp(a[i + 1], name) == 0)
                        v = a[i + 2];
        return v;
}

/* Host chips 3 and 5 (ascending) are davinci0 and davinci1, right after --dev /dev, then the
 * management nodes; the trees under /usr are not bound again, the install info is; the CANN
 * environment after the baseline, the request's entries last; no egress, --unshare-all kept. */
static void test_npu_launch(void **state) {
        char *env[] = { "MY_VAR=1", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxNpu npu = npu_default();
        SandboxSpec spec = spec_default();
        char **a;

        spec.npu = &npu;
        spec.env = env;
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--dev-bind", "/dev/davinci3", "/dev/davinci0",
                "--dev-bind", "/dev/davinci5", "/dev/davinci1",
                "--dev-bind", "/dev/davinci_manager", "/dev/davinci_manager",
                "--dev-bind", "/dev/devmm_svm", "/dev/devmm_svm",
                "--dev-bind", "/dev/hisi_hdc", "/dev/hisi_hdc",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/etc/ascend_install.info", "/etc/ascend_install.info",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/local/sbin:" TK "/bin:" TK "/compiler/ccec_compiler/bin"
                                    ":/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "ASCEND_HOME_PATH", TK,
                "--setenv", "ASCEND_TOOLKIT_HOME", TK,
                "--setenv", "ASCEND_OPP_PATH", TK "/opp",
                "--setenv", "ASCEND_AICPU_PATH", TK,
                "--setenv", "LD_LIBRARY_PATH", DRV "/lib64/common:" DRV "/lib64/driver:" DRV "/lib64:"
                                               TK "/lib64:" TK "/lib64/plugin/opskernel:" TK "/lib64/plugin/nnengine",
                "--setenv", "PYTHONPATH", TK "/python/site-packages:" TK "/opp/built-in/op_impl/ai_core/tbe",
                "--setenv", "MY_VAR", "1",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        for (char **p = a; *p; p++)
                assert_string_not_equal(*p, "--share-net");
        strv_free(a);

        /* One chip, no management nodes, a device root elsewhere: still renumbered from 0. */
        {
                static const unsigned chip_7[] = { 7 };

                npu.chips = chip_7;
                npu.n_chips = 1;
                npu.mgmt_nodes = NULL;
                npu.device_root = "/run/fake-dev";
                a = build_ok(&spec, &probe);
                assert_int_equal(argv_index(a, "--dev") + 2, argv_index(a, "--dev-bind"));
                assert_string_equal(a[argv_index(a, "--dev-bind") + 1], "/run/fake-dev/davinci7");
                assert_string_equal(a[argv_index(a, "--dev-bind") + 2], "/dev/davinci0");
                assert_string_equal(a[argv_index(a, "--dev-bind") + 3], "--proc");
                strv_free(a);
        }
}

/* Chips must be given strictly ascending (the renumbering is the daemon's, not the caller's order),
 * at least one; management nodes only the known ones, once; a normalised device root. */
static void test_npu_refuses_bad_chips_and_nodes(void **state) {
        static const unsigned descending[] = { 5, 3 }, repeated[] = { 3, 3 }, late_dup[] = { 0, 1, 1 };
        static const struct { const unsigned *chips; size_t n; const char *what; } bad_chips[] = {
                { descending, ELEMENTS(descending), "chips {5,3}" },
                { repeated, ELEMENTS(repeated), "chips {3,3}" },
                { late_dup, ELEMENTS(late_dup), "chips {0,1,1}" },
                { chips_3_5, 0, "no chips" },
                { NULL, 2, "n_chips without chips" },
        };
        static char *unknown[] = { "davinci_manager", "nvidia0", NULL };
        static char *chip_name[] = { "davinci0", NULL };
        static char *walk[] = { "../hisi_hdc", NULL };
        static char *twice[] = { "devmm_svm", "hisi_hdc", "devmm_svm", NULL };
        static char *const *bad_nodes[] = { unknown, chip_name, walk, twice };
        static const char *const bad_roots[] = { "dev", "/", "/dev/", "/dev/../tmp", "//dev", "" };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };

        for (size_t i = 0; i < ELEMENTS(bad_chips); i++) {
                SandboxNpu npu = npu_default();
                SandboxSpec spec = spec_default();

                npu.chips = bad_chips[i].chips;
                npu.n_chips = bad_chips[i].n;
                spec.npu = &npu;
                assert_refused(&spec, &probe, bad_chips[i].what);
        }
        for (size_t i = 0; i < ELEMENTS(bad_nodes); i++) {
                SandboxNpu npu = npu_default();
                SandboxSpec spec = spec_default();

                npu.mgmt_nodes = bad_nodes[i];
                spec.npu = &npu;
                assert_refused(&spec, &probe, bad_nodes[i][0]);
        }
        for (size_t i = 0; i < ELEMENTS(bad_roots); i++) {
                SandboxNpu npu = npu_default();
                SandboxSpec spec = spec_default();

                npu.device_root = bad_roots[i];
                spec.npu = &npu;
                assert_refused(&spec, &probe, bad_roots[i]);
        }
        {
                SandboxNpu npu = npu_default();
                SandboxSpec spec = spec_default();

                npu.device_root = NULL;
                spec.npu = &npu;
                assert_refused(&spec, &probe, "no device root");
        }
}

/* A tree kept outside /usr (a fake one under /tmp, as a test host has): bound read-only at its own
 * path after --tmpfs /tmp (bwrap makes its mount point in the tmpfs); npu-smi inside the driver
 * tree is bound with it, not again, and its directory joins PATH. No toolkit: no ASCEND_* and no
 * PYTHONPATH, LD_LIBRARY_PATH and PATH without the toolkit's directories. */
static void test_npu_tree_outside_usr_no_toolkit(void **state) {
        static const unsigned chip_0[] = { 0 };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxNpu npu = {
                .device_root = "/tmp/fake/dev",
                .chips = chip_0,
                .n_chips = 1,
                .driver_dir = "/tmp/fake/driver",
                .smi = "/tmp/fake/driver/tools/npu-smi",
        };
        SandboxSpec spec = spec_default();
        char **a;

        spec.npu = &npu;
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--disable-userns",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--dev-bind", "/tmp/fake/dev/davinci0", "/dev/davinci0",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/tmp/fake/driver", "/tmp/fake/driver",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/local/sbin:/tmp/fake/driver/tools:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "LD_LIBRARY_PATH",
                "/tmp/fake/driver/lib64/common:/tmp/fake/driver/lib64/driver:/tmp/fake/driver/lib64",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        assert_true(argv_index(a, "/tmp/fake/driver") > argv_index(a, "--tmpfs"));
        strv_free(a);

        /* Every tree outside /usr: each bound once, in order, a parent before its child would be
         * (the toolkit here holds the driver: only the toolkit is bound). */
        npu.toolkit_dir = "/tmp/fake";
        npu.smi = "/opt/npu/bin/npu-smi";
        npu.install_info = "/etc/ascend_install.info";
        a = build_ok(&spec, &probe);
        {
                ssize_t i = argv_index(a, "/workspace");

                assert_string_equal(a[i + 1], "--ro-bind");
                assert_string_equal(a[i + 2], "/tmp/fake");
                assert_string_equal(a[i + 3], "/tmp/fake");
                assert_string_equal(a[i + 4], "--ro-bind");
                assert_string_equal(a[i + 5], "/opt/npu/bin/npu-smi");
                assert_string_equal(a[i + 6], "/opt/npu/bin/npu-smi");
                assert_string_equal(a[i + 7], "--ro-bind");
                assert_string_equal(a[i + 8], "/etc/ascend_install.info");
                assert_string_equal(a[i + 10], "--chdir");
        }
        assert_string_equal(argv_env(a, "PATH"), "/usr/local/bin:/usr/local/sbin:/tmp/fake/bin:"
                            "/tmp/fake/compiler/ccec_compiler/bin:/opt/npu/bin:/usr/bin:/bin");
        assert_int_equal(argv_index(a, "/tmp/fake/driver"), -1);
        strv_free(a);

        /* npu-smi where PATH already looks (/usr/bin, /usr/local/bin): not listed twice. */
        npu.smi = "/usr/bin/npu-smi";
        a = build_ok(&spec, &probe);
        assert_string_equal(argv_env(a, "PATH"), "/usr/local/bin:/usr/local/sbin:/tmp/fake/bin:"
                            "/tmp/fake/compiler/ccec_compiler/bin:/usr/bin:/bin");
        strv_free(a);
        npu.smi = "/usr/local/bin/npu-smi";
        npu.toolkit_dir = NULL;
        a = build_ok(&spec, &probe);
        assert_string_equal(argv_env(a, "PATH"), "/usr/local/bin:/usr/local/sbin:/usr/bin:/bin");
        assert_null(argv_env(a, "ASCEND_HOME_PATH"));
        assert_null(argv_env(a, "ASCEND_TOOLKIT_HOME"));
        assert_null(argv_env(a, "ASCEND_OPP_PATH"));
        assert_null(argv_env(a, "ASCEND_AICPU_PATH"));
        assert_null(argv_env(a, "PYTHONPATH"));
        strv_free(a);

        /* The driver tree under /usr: not bound (the read-only /usr shows it). */
        npu.driver_dir = DRV;
        npu.install_info = NULL;
        a = build_ok(&spec, &probe);
        assert_int_equal(argv_index(a, DRV), -1);
        assert_string_equal(a[argv_index(a, "/workspace") + 1], "--chdir");
        assert_string_equal(argv_env(a, "LD_LIBRARY_PATH"), DRV "/lib64/common:" DRV "/lib64/driver:" DRV "/lib64");
        strv_free(a);
}

/* Tree paths the sandbox's shape owns, un-normalised, relative, with ':' (they are joined into
 * PATH and LD_LIBRARY_PATH), or under the environment's prefix: refused; no driver: refused. */
static void test_npu_refuses_bad_trees(void **state) {
        static const char *const bad[] = {
                "/proc/ascend", "/dev/ascend", "/workspace/driver", "/.sandbox/x", "/etc/passwd",
                "/usr/../etc/x", "/usr//local", "/usr/local/", "/tmp/./x", "usr/local/Ascend", "",
                "/", "/tmp/a:b", "/usr/local/Ascend:/workspace", "/bin/npu-smi",
        };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };

        for (size_t i = 0; i < ELEMENTS(bad); i++)
                for (size_t field = 0; field < 4; field++) {
                        SandboxNpu npu = npu_default();
                        SandboxSpec spec = spec_default();
                        const char **f[] = { &npu.driver_dir, &npu.toolkit_dir, &npu.smi, &npu.install_info };

                        *f[field] = bad[i];
                        spec.npu = &npu;
                        assert_refused(&spec, &probe, bad[i]);
                }
        {
                SandboxNpu npu = npu_default();
                SandboxSpec spec = spec_default();

                npu.driver_dir = NULL;
                spec.npu = &npu;
                assert_refused(&spec, &probe, "no driver");
        }
        {
                SandboxNpu npu = npu_default();
                SandboxSpec spec = spec_default();

                npu.toolkit_dir = "/opt/science-env/ascend";
                spec.npu = &npu;
                spec.env_prefix = "/e/p";
                assert_refused(&spec, &probe, "toolkit under the environment");
                spec.env_prefix = NULL;         /* /opt/science-env/ascend is fine without one */
                strv_free(build_ok(&spec, &probe));
        }
}

/* With an environment: its bin/ first, then the NPU's head; a launch without NPU keeps exactly
 * today's PATH (SANDBOX_PATH, or SANDBOX_ENV_PATH with an environment). */
static void test_npu_path_with_environment(void **state) {
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxNpu npu = npu_default();
        SandboxSpec spec = spec_default();
        char **a;

        spec.env_prefix = "/var/lib/sandbox-runner/environments/prefixes/python-base";
        spec.npu = &npu;
        a = build_ok(&spec, &probe);
        assert_string_equal(argv_env(a, "PATH"), "/opt/science-env/bin:/usr/local/bin:/usr/local/sbin:"
                            TK "/bin:" TK "/compiler/ccec_compiler/bin:/usr/bin:/bin");
        assert_true(argv_index(a, "/opt/science-env") > argv_index(a, "/etc/ascend_install.info"));
        strv_free(a);

        spec.npu = NULL;
        a = build_ok(&spec, &probe);
        assert_string_equal(argv_env(a, "PATH"), SANDBOX_ENV_PATH);
        assert_string_equal(argv_env(a, "PATH"), "/opt/science-env/bin:/usr/local/bin:/usr/bin:/bin");
        assert_null(argv_env(a, "LD_LIBRARY_PATH"));
        strv_free(a);

        spec.env_prefix = NULL;
        a = build_ok(&spec, &probe);
        assert_string_equal(argv_env(a, "PATH"), SANDBOX_PATH);
        assert_string_equal(argv_env(a, "PATH"), "/usr/local/bin:/usr/bin:/bin");
        for (char **p = a; *p; p++) {
                assert_string_not_equal(*p, "--dev-bind");
                assert_null(strstr(*p, "Ascend"));
        }
        strv_free(a);
}

/* An NPU launch gets no egress bridge: with egress it is refused, whatever the policy said. */
static void test_npu_refuses_egress(void **state) {
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxNpu npu = npu_default();
        SandboxSpec spec = spec_default();
        char **a;

        spec.egress_socket = "/run/sandbox-runner/egress/x.sock";
        spec.bridge = "/usr/libexec/sandbox-runner/sandbox-runner-bridge";
        a = build_ok(&spec, &probe);            /* the same spec without NPU is fine */
        strv_free(a);
        spec.npu = &npu;
        assert_refused(&spec, &probe, "NPU with egress");
        spec.bridge = NULL;
        assert_refused(&spec, &probe, "NPU with an egress socket only");
        spec.egress_socket = NULL;
        spec.bridge = "/usr/libexec/sandbox-runner/sandbox-runner-bridge";
        assert_refused(&spec, &probe, "NPU with a bridge only");
}

/* CDI without NPU: device nodes after --dev /dev, mounts read-only after the extra binds and before
 * the environment's prefix, variables after the baseline and before the request's (which win). */
static void test_cdi_edits(void **state) {
        const SandboxDevice devices[] = {
                { "/dev/dri/renderD128", "/dev/dri/renderD128" },
                { "/dev/vendor-ctl", "/dev/vendor/ctl" },
        };
        const SandboxBind device_binds[] = {
                { "/opt/vendor/lib", "/opt/vendor/lib", false },
                { "/srv/vendor firmware", "/var/lib/firmware", false },
        };
        const SandboxBind binds[] = { { "/srv/data", "/data", false } };
        char *device_env[] = { "VENDOR_VISIBLE_DEVICES=0,1", "VENDOR_MODE=a=b", NULL };
        char *env[] = { "VENDOR_MODE=mine", NULL };
        SandboxProbe probe = { .proc_fresh = false, .disable_userns = false, .usr_merged = true };
        SandboxSpec spec = spec_default();
        char **a;

        spec.devices = devices;
        spec.n_devices = ELEMENTS(devices);
        spec.device_binds = device_binds;
        spec.n_device_binds = ELEMENTS(device_binds);
        spec.device_env = device_env;
        spec.binds = binds;
        spec.n_binds = ELEMENTS(binds);
        spec.env = env;
        spec.env_prefix = "/e/p";
        a = build_ok(&spec, &probe);
        assert_argv_equal(a,
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib",
                "--dev", "/dev",
                "--dev-bind", "/dev/dri/renderD128", "/dev/dri/renderD128",
                "--dev-bind", "/dev/vendor-ctl", "/dev/vendor/ctl",
                "--ro-bind", "/proc", "/proc",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/srv/data", "/data",
                "--ro-bind", "/opt/vendor/lib", "/opt/vendor/lib",
                "--ro-bind", "/srv/vendor firmware", "/var/lib/firmware",
                "--ro-bind", "/e/p", "/opt/science-env",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/opt/science-env/bin:/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "VENDOR_VISIBLE_DEVICES", "0,1",
                /* the request's value replaces the CDI's in its place (sandbox_env_list()) */
                "--setenv", "VENDOR_MODE", "mine",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* CDI with NPU: the NPU's nodes first, then CDI's (a chip beyond the NPU's count is another node);
 * the NPU's trees, then CDI's mounts; the NPU's variables, then CDI's, then the request's. */
static void test_cdi_with_npu(void **state) {
        const SandboxDevice devices[] = { { "/dev/davinci9", "/dev/davinci2" } };
        const SandboxBind device_binds[] = { { "/opt/hccn", "/opt/hccn", false } };
        char *device_env[] = { "HCCN_CONF=/opt/hccn/hccn.conf", NULL };
        char *env[] = { "MY_VAR=1", NULL };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxNpu npu = npu_default();
        SandboxSpec spec = spec_default();
        char **a;
        ssize_t i;

        npu.mgmt_nodes = NULL;
        spec.npu = &npu;
        spec.devices = devices;
        spec.n_devices = ELEMENTS(devices);
        spec.device_binds = device_binds;
        spec.n_device_binds = ELEMENTS(device_binds);
        spec.device_env = device_env;
        spec.env = env;
        a = build_ok(&spec, &probe);

        i = argv_index(a, "--dev");
        assert_argv_equal(a + i,
                "--dev", "/dev",
                "--dev-bind", "/dev/davinci3", "/dev/davinci0",
                "--dev-bind", "/dev/davinci5", "/dev/davinci1",
                "--dev-bind", "/dev/davinci9", "/dev/davinci2",
                "--proc", "/proc",
                "--ro-bind", "/proc/sys", "/proc/sys",
                "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                "--ro-bind-try", "/proc/irq", "/proc/irq",
                "--ro-bind-try", "/proc/bus", "/proc/bus",
                "--tmpfs", "/tmp",
                "--bind", "/var/lib/sandbox-runner/workspaces/agent7-runner1", "/workspace",
                "--ro-bind", "/etc/ascend_install.info", "/etc/ascend_install.info",
                "--ro-bind", "/opt/hccn", "/opt/hccn",
                "--chdir", "/workspace",
                "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/local/sbin:" TK "/bin:" TK "/compiler/ccec_compiler/bin"
                                    ":/usr/bin:/bin",
                "--setenv", "HOME", "/workspace",
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox",
                "--setenv", "ASCEND_HOME_PATH", TK,
                "--setenv", "ASCEND_TOOLKIT_HOME", TK,
                "--setenv", "ASCEND_OPP_PATH", TK "/opp",
                "--setenv", "ASCEND_AICPU_PATH", TK,
                "--setenv", "LD_LIBRARY_PATH", DRV "/lib64/common:" DRV "/lib64/driver:" DRV "/lib64:"
                                               TK "/lib64:" TK "/lib64/plugin/opskernel:" TK "/lib64/plugin/nnengine",
                "--setenv", "PYTHONPATH", TK "/python/site-packages:" TK "/opp/built-in/op_impl/ai_core/tbe",
                "--setenv", "HCCN_CONF", "/opt/hccn/hccn.conf",
                "--setenv", "MY_VAR", "1",
                "--seccomp", "3",
                "--", "python3", "-c", "print(6*7)");
        strv_free(a);
}

/* CDI device destinations outside /dev/, un-normalised, what bwrap's /dev makes, one the NPU part
 * or another CDI device uses; mounts as extra binds are refused, and writable ones; variables with
 * a refused name. */
static void test_cdi_refuses(void **state) {
        static const char *const bad_dests[] = {
                "/proc/x", "/dev", "/dev/", "/dev/../etc/x", "/dev//x", "/dev/./x", "dev/x", "relative", "",
                "/usr/x", "/devices/x", "/dev/null", "/dev/shm", "/dev/shm/x", "/dev/pts/0", "/dev/ptmx",
                "/dev/fd", "/dev/stdout", "/dev/tty", "/dev/urandom", "/dev/davinci0", "/dev/davinci1",
                "/dev/hisi_hdc", "/dev/a\nb",
        };
        static const char *const good_dests[] = {
                "/dev/davinci2", "/dev/davinci01", "/dev/nvidia0", "/dev/dri/card0", "/dev/nullx", "/dev/ttyS0",
                "/dev/hisi_hdc2",
        };
        static const char *const bad_mounts[] = {
                "/proc/x", "/dev", "/dev/x", "/dev/../etc/x", "relative", "/usr/lib/x", "/workspace/x",
                "/etc/passwd", "/opt/science-env", "/opt/science-env/lib", "/tmp/", "",
        };
        static const char *const bad_env[] = {
                "LD_PRELOAD=/workspace/x.so", "LD_LIBRARY_PATH=/x", "PATH=/x", "HOME=/", "HTTP_PROXY=x",
                "NOEQUALS", "=x", "1A=x", "A-B=x", "",
        };
        SandboxProbe probe = { .proc_fresh = true, .disable_userns = true, .usr_merged = true };
        SandboxNpu npu = npu_default();
        char **a;

        for (size_t i = 0; i < ELEMENTS(bad_dests); i++) {
                SandboxDevice d = { "/dev/vendor0", bad_dests[i] };
                SandboxSpec spec = spec_default();

                spec.npu = &npu;
                spec.devices = &d;
                spec.n_devices = 1;
                assert_refused(&spec, &probe, bad_dests[i]);
        }
        for (size_t i = 0; i < ELEMENTS(good_dests); i++) {
                SandboxDevice d = { "/dev/vendor0", good_dests[i] };
                SandboxSpec spec = spec_default();

                spec.npu = &npu;
                spec.devices = &d;
                spec.n_devices = 1;
                a = build_ok(&spec, &probe);
                strv_free(a);
        }
        {
                /* Twice the same node; a relative source; a count without an array. */
                SandboxDevice d[] = { { "/dev/a", "/dev/x" }, { "/dev/b", "/dev/x" } };
                SandboxSpec spec = spec_default();

                spec.devices = d;
                spec.n_devices = ELEMENTS(d);
                assert_refused(&spec, &probe, "a device node twice");
                d[1].dest = "/dev/y";
                a = build_ok(&spec, &probe);
                strv_free(a);
                d[1].source = "dev/b";
                assert_refused(&spec, &probe, "relative device source");
                spec.devices = NULL;
                assert_refused(&spec, &probe, "n_devices without devices");
        }

        for (size_t i = 0; i < ELEMENTS(bad_mounts); i++) {
                SandboxBind b = { "/opt/vendor", bad_mounts[i], false };
                SandboxSpec spec = spec_default();

                spec.device_binds = &b;
                spec.n_device_binds = 1;
                spec.env_prefix = "/e/p";
                assert_refused(&spec, &probe, bad_mounts[i]);
        }
        {
                SandboxBind b = { "/opt/vendor", "/opt/vendor", true };
                SandboxSpec spec = spec_default();

                spec.device_binds = &b;
                spec.n_device_binds = 1;
                assert_refused(&spec, &probe, "writable CDI mount");
                b.writable = false;
                b.source = "opt/vendor";
                assert_refused(&spec, &probe, "relative CDI mount source");
                spec.device_binds = NULL;
                assert_refused(&spec, &probe, "n_device_binds without device_binds");
        }

        for (size_t i = 0; i < ELEMENTS(bad_env); i++) {
                char *device_env[] = { "VENDOR_OK=1", (char *) bad_env[i], NULL };
                SandboxSpec spec = spec_default();

                spec.device_env = device_env;
                assert_refused(&spec, &probe, bad_env[i]);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fresh_proc_userns_merged),
                cmocka_unit_test(test_robind_proc_no_userns_unmerged),
                cmocka_unit_test(test_merged_lib_dirs_etc_files_all_fds),
                cmocka_unit_test(test_some_fds),
                cmocka_unit_test(test_info_fd),
                cmocka_unit_test(test_tmp_size_and_cwd),
                cmocka_unit_test(test_extra_env),
                cmocka_unit_test(test_payload_argv_verbatim),
                cmocka_unit_test(test_everything),
                cmocka_unit_test(test_env_prefix_hides_interpreters),
                cmocka_unit_test(test_extra_binds),
                cmocka_unit_test(test_root_read_only),
                cmocka_unit_test(test_env_prefix_with_binds),
                cmocka_unit_test(test_build_refuses_reserved_env),
                cmocka_unit_test(test_build_refuses_bad_cwd),
                cmocka_unit_test(test_build_refuses_incomplete_spec),
                cmocka_unit_test(test_build_refuses_bad_binds),
                cmocka_unit_test(test_symlinks),
                cmocka_unit_test(test_build_refuses_bad_env),
                cmocka_unit_test(test_env_name_valid),
                cmocka_unit_test(test_cwd_valid),
                cmocka_unit_test(test_npu_launch),
                cmocka_unit_test(test_npu_refuses_bad_chips_and_nodes),
                cmocka_unit_test(test_npu_tree_outside_usr_no_toolkit),
                cmocka_unit_test(test_npu_refuses_bad_trees),
                cmocka_unit_test(test_npu_path_with_environment),
                cmocka_unit_test(test_npu_refuses_egress),
                cmocka_unit_test(test_cdi_edits),
                cmocka_unit_test(test_cdi_with_npu),
                cmocka_unit_test(test_cdi_refuses),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
