/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bwrap command line for one execution or provisioning step: a pure function of
 * (configuration, request, probes), with an environment's prefix and the extra binds the
 * provisioning sandbox needs. Calls util/ only.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/sandbox-argv.h"
#include "util/macro.h"
#include "util/strv.h"

static int add(char ***l, ...) {
        va_list ap;
        int r = 0;

        va_start(ap, l);
        for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *)) {
                r = strv_extend(l, s);
                if (r < 0)
                        break;
        }
        va_end(ap);
        return r;
}

static int add_fd(char ***l, const char *opt, int fd, const char *dest) {
        char buf[16];

        (void) snprintf(buf, sizeof(buf), "%i", fd);
        return dest ? add(l, opt, buf, dest, NULL) : add(l, opt, buf, NULL);
}

/* Names the payload must not set: they belong to the baseline or change how code is loaded. */
static const char *const reserved_env[] = {
        "PATH", "HOME", "LANG", "TMPDIR", "USER", "LOGNAME", "SHELL", "PWD",
        "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
};

bool sandbox_env_name_valid(const char *name) {
        size_t l;

        if (isempty(name))
                return false;
        l = strlen(name);
        if (l > 128)
                return false;
        if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_'))
                return false;
        for (size_t i = 1; i < l; i++) {
                char c = name[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
                        return false;
        }
        if (strneq(name, "LD_", 3))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(reserved_env); i++)
                if (streq(name, reserved_env[i]))
                        return false;
        return true;
}

bool sandbox_cwd_valid(const char *cwd) {
        const char *p;

        if (!cwd)
                return false;
        if (strlen(cwd) > 1024 || cwd[0] == '/')
                return false;
        for (p = cwd; *p; ) {
                size_t l = strcspn(p, "/");

                if (l == 0 || l > 255)
                        return false;
                if ((l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                for (size_t i = 0; i < l; i++)
                        if ((unsigned char) p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')
                                return false;
                p += l;
                if (*p == '/') {
                        p++;
                        if (*p == '\0')
                                return false;   /* trailing slash */
                }
        }
        return true;
}

/* bwrap itself: new namespaces, no capabilities, the sandbox's identity. */
static int argv_add_isolation(char ***a, const SandboxProbe *probe) {
        char uid[16], gid[16];
        int r;

        (void) snprintf(uid, sizeof(uid), "%u", SANDBOX_UID);
        (void) snprintf(gid, sizeof(gid), "%u", SANDBOX_GID);

        r = add(a, "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", NULL);
        if (r >= 0 && probe->disable_userns)
                r = add(a, "--disable-userns", NULL);
        if (r >= 0)
                r = add(a, "--cap-drop", "ALL", "--uid", uid, "--gid", gid, "--hostname", "sandbox", NULL);
        return r;
}

/* The host's /usr, read-only, and the system links into it. */
static int argv_add_usr(char ***a, const SandboxProbe *probe) {
        int r;

        r = add(a, "--ro-bind", "/usr", "/usr", NULL);
        if (r >= 0 && probe->usr_merged)
                r = add(a, "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                        "--symlink", "usr/lib", "/lib", NULL);
        else if (r >= 0)
                r = add(a, "--ro-bind", "/bin", "/bin", "--ro-bind", "/sbin", "/sbin",
                        "--ro-bind", "/lib", "/lib", NULL);
        for (char **d = probe->lib_dirs; r >= 0 && d && *d; d++) {
                if (probe->usr_merged) {
                        _cleanup_free_ char *target = NULL;
                        if (asprintf(&target, "usr%s", *d) < 0)
                                return -ENOMEM;
                        r = add(a, "--symlink", target, *d, NULL);
                } else
                        r = add(a, "--ro-bind", *d, *d, NULL);
        }
        return r;
}

/* The few /etc files programs need; identity files are single records made by the caller. */
static int argv_add_etc(char ***a, const SandboxSpec *spec, const SandboxProbe *probe) {
        int r = 0;

        for (char **f = probe->etc_files; r >= 0 && f && *f; f++)
                r = add(a, "--ro-bind", *f, *f, NULL);
        if (r >= 0 && spec->passwd_fd >= 0)
                r = add_fd(a, "--ro-bind-data", spec->passwd_fd, "/etc/passwd");
        if (r >= 0 && spec->group_fd >= 0)
                r = add_fd(a, "--ro-bind-data", spec->group_fd, "/etc/group");
        if (r >= 0 && spec->hosts_fd >= 0)
                r = add_fd(a, "--ro-bind-data", spec->hosts_fd, "/etc/hosts");
        if (r >= 0 && spec->code_fd > 2)
                r = add_fd(a, "--ro-bind-data", spec->code_fd, SANDBOX_CODE_PATH);
        return r;
}

/* /dev, /proc and the /tmp tmpfs. */
static int argv_add_kernel_fs(char ***a, const SandboxSpec *spec, const SandboxProbe *probe) {
        char size[32];
        int r;

        r = add(a, "--dev", "/dev", NULL);
        if (r >= 0)
                r = probe->proc_fresh ? add(a, "--proc", "/proc", NULL)
                                      : add(a, "--ro-bind", "/proc", "/proc", NULL);
        /* A fresh procfs: the host-wide knobs in it read-only, whatever bwrap decides (it covers
         * them only where the caller could write them, and /proc/sys is mode 0555). Bound from
         * the daemon's /proc: these are the same files (the sysctls that belong to a namespace
         * are those of the process that opens them). /proc/sys must exist (or the probe fails:
         * fail closed); the others are absent on some kernels. */
        if (r >= 0 && probe->proc_fresh)
                r = add(a, "--ro-bind", "/proc/sys", "/proc/sys",
                        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                        "--ro-bind-try", "/proc/irq", "/proc/irq",
                        "--ro-bind-try", "/proc/bus", "/proc/bus", NULL);
        if (r >= 0 && spec->tmp_size > 0) {
                (void) snprintf(size, sizeof(size), "%" PRIu64, spec->tmp_size);
                r = add(a, "--size", size, NULL);
        }
        if (r >= 0)
                r = add(a, "--tmpfs", "/tmp", NULL);
        return r;
}

/* Destinations an extra bind may not be at or under: the sandbox's own shape. */
static const char *const refused_bind_dests[] = {
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
        "/proc", "/dev", SANDBOX_WORKSPACE, "/.sandbox",
        "/etc/passwd", "/etc/group", "/etc/hosts", SANDBOX_EGRESS_SOCKET,
};

/* @path is @top or below it. */
static bool path_at_or_under(const char *path, const char *top) {
        size_t l = strlen(top);

        return strneq(path, top, l) && (path[l] == '\0' || path[l] == '/');
}

bool sandbox_bind_dest_valid(const char *dest) {
        if (!dest || dest[0] != '/' || dest[1] == '\0')
                return false;
        /* The rest is a relative path with the rules of a cwd: normalised, so that the prefix
         * checks below cannot be walked around ("/./usr", "/x/../usr", "//usr"). */
        if (!sandbox_cwd_valid(dest + 1))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(refused_bind_dests); i++)
                if (path_at_or_under(dest, refused_bind_dests[i]))
                        return false;
        return true;
}

static bool path_absolute(const char *p) {
        return p && p[0] == '/';
}

/* The spec's extra binds and environment are well formed (the rest is checked by the callers'
 * own rules: the workspace and the probe are the daemon's). */
static bool spec_binds_valid(const SandboxSpec *spec, const SandboxProbe *probe) {
        if (spec->n_binds > 0 && !spec->binds)
                return false;
        for (size_t i = 0; i < spec->n_binds; i++) {
                const SandboxBind *b = &spec->binds[i];

                if (!path_absolute(b->source) || !sandbox_bind_dest_valid(b->dest))
                        return false;
                if (spec->env_prefix && path_at_or_under(b->dest, SANDBOX_ENV_PREFIX))
                        return false;   /* the environment's bind would cover it */
        }
        if (!spec->env_prefix)
                return true;
        if (!path_absolute(spec->env_prefix))
                return false;
        if (strv_length(probe->interpreters) > 0 && !path_absolute(spec->hide_file))
                return false;
        for (char **p = probe->interpreters; p && *p; p++)
                if (!path_absolute(*p))
                        return false;
        return true;
}

/* The workspace, the egress bridge and socket, the extra binds, the environment (its prefix and
 * the host's interpreters covered), and the directory the payload starts in. */
static int argv_add_workspace(char ***a, const SandboxSpec *spec, const SandboxProbe *probe) {
        _cleanup_free_ char *chdir_to = NULL;
        int r;

        r = add(a, "--bind", spec->workspace, SANDBOX_WORKSPACE, NULL);
        if (r >= 0 && spec->egress_socket)
                r = add(a, "--ro-bind", spec->bridge, SANDBOX_BRIDGE_PATH,
                        "--bind", spec->egress_socket, SANDBOX_EGRESS_SOCKET, NULL);
        for (size_t i = 0; r >= 0 && i < spec->n_binds; i++)
                r = add(a, spec->binds[i].writable ? "--bind" : "--ro-bind",
                        spec->binds[i].source, spec->binds[i].dest, NULL);
        if (r >= 0 && spec->env_prefix) {
                r = add(a, "--ro-bind", spec->env_prefix, SANDBOX_ENV_PREFIX, NULL);
                for (char **p = probe->interpreters; r >= 0 && p && *p; p++)
                        r = add(a, "--ro-bind", spec->hide_file, *p, NULL);
        }
        if (r < 0)
                return r;
        if (!isempty(spec->cwd)) {
                if (asprintf(&chdir_to, SANDBOX_WORKSPACE "/%s", spec->cwd) < 0)
                        return -ENOMEM;
        } else {
                chdir_to = strdup(SANDBOX_WORKSPACE);
                if (!chdir_to)
                        return -ENOMEM;
        }
        return add(a, "--chdir", chdir_to, NULL);
}

/* An environment built from nothing: the baseline, the proxy with egress, the request's entries. */
static int argv_add_env(char ***a, const SandboxSpec *spec) {
        int r;

        r = add(a, "--clearenv",
                "--setenv", "PATH", spec->env_prefix ? SANDBOX_ENV_PATH : SANDBOX_PATH,
                "--setenv", "HOME", SANDBOX_WORKSPACE,
                "--setenv", "LANG", "C.UTF-8",
                "--setenv", "TMPDIR", "/tmp",
                "--setenv", "USER", "sandbox",
                "--setenv", "LOGNAME", "sandbox", NULL);
        if (r >= 0 && spec->egress_socket)
                r = add(a, "--setenv", "HTTP_PROXY", SANDBOX_PROXY_URL, "--setenv", "HTTPS_PROXY", SANDBOX_PROXY_URL,
                        "--setenv", "http_proxy", SANDBOX_PROXY_URL, "--setenv", "https_proxy", SANDBOX_PROXY_URL,
                        "--setenv", "NO_PROXY", "localhost,127.0.0.1,::1",
                        "--setenv", "no_proxy", "localhost,127.0.0.1,::1", NULL);
        for (char *const *e = spec->env; r >= 0 && e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *name = NULL;

                if (!eq)
                        return -EINVAL;
                name = strndup(*e, (size_t) (eq - *e));
                if (!name)
                        return -ENOMEM;
                if (!sandbox_env_name_valid(name))
                        return -EINVAL;
                r = add(a, "--setenv", name, eq + 1, NULL);
        }
        return r;
}

/* The fds bwrap reads, then the payload's command line (under the bridge with egress). */
static int argv_add_command(char ***a, const SandboxSpec *spec) {
        int r = 0;

        if (spec->info_fd > 2)
                r = add_fd(a, "--info-fd", spec->info_fd, NULL);
        if (r >= 0)
                r = add_fd(a, "--seccomp", spec->seccomp_fd, NULL);
        if (r >= 0)
                r = add(a, "--", NULL);
        if (r >= 0 && spec->egress_socket)
                r = add(a, SANDBOX_BRIDGE_PATH, "--gateway", SANDBOX_EGRESS_SOCKET, "--", NULL);
        for (char *const *p = spec->argv; r >= 0 && *p; p++)
                r = strv_extend(a, *p);
        return r;
}

int sandbox_argv_build(const SandboxSpec *spec, const SandboxProbe *probe, char ***ret_argv) {
        _cleanup_strv_free_ char **a = NULL;
        int r;

        if (!spec || !probe || !spec->workspace || !spec->argv || !spec->argv[0] || spec->seccomp_fd < 0 ||
            !sandbox_cwd_valid(spec->cwd ?: "") || !spec->egress_socket != !spec->bridge ||
            !spec_binds_valid(spec, probe))
                return -EINVAL;

        r = argv_add_isolation(&a, probe);
        if (r < 0)
                return r;
        r = argv_add_usr(&a, probe);
        if (r < 0)
                return r;
        r = argv_add_etc(&a, spec, probe);
        if (r < 0)
                return r;
        r = argv_add_kernel_fs(&a, spec, probe);
        if (r < 0)
                return r;
        r = argv_add_workspace(&a, spec, probe);
        if (r < 0)
                return r;
        if (spec->root_read_only) {
                r = add(&a, "--remount-ro", "/", NULL);
                if (r < 0)
                        return r;
        }
        r = argv_add_env(&a, spec);
        if (r < 0)
                return r;
        r = argv_add_command(&a, spec);
        if (r < 0)
                return r;

        *ret_argv = STEAL(a);
        return 0;
}
