/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bwrap command line for one execution or provisioning step: a pure function of
 * (configuration, request, probes), with an environment's prefix, the extra binds the
 * provisioning sandbox needs, and the devices of an NPU launch or a CDI spec. Calls util/ only.
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
                r = add_fd(a, spec->prebuilt ? "--file" : "--ro-bind-data", spec->code_fd, SANDBOX_CODE_PATH);
        return r;
}

/* @n strings concatenated into a new one (NULL on OOM). */
static char *concat(size_t n, const char *const *parts) {
        size_t l = 1;
        char *s, *q;

        for (size_t i = 0; i < n; i++)
                l += strlen(parts[i]);
        s = q = malloc(l);
        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++)
                q = stpcpy(q, parts[i]);
        return s;
}
#define CONCAT(...) concat(ELEMENTSOF(((const char *const[]) { __VA_ARGS__ })), \
                           (const char *const[]) { __VA_ARGS__ })

/* One --dev-bind of @root/@name at /dev/@dest_name. */
static int add_dev_bind(char ***a, const char *root, const char *name, const char *dest_name) {
        _cleanup_free_ char *src = NULL, *dst = NULL;

        src = CONCAT(root, "/", name);
        dst = CONCAT("/dev/", dest_name);
        if (!src || !dst)
                return -ENOMEM;
        return add(a, "--dev-bind", src, dst, NULL);
}

/* Over the fresh /dev, before anything else is mounted: the NPU chips renumbered from 0 in
 * ascending host order (DESIGN.md §9: the payload sees davinci0.. whichever chips it got), the
 * management nodes, then the CDI device nodes. */
static int argv_add_devices(char ***a, const SandboxSpec *spec) {
        const SandboxNpu *npu = spec->npu;
        int r = 0;

        for (size_t k = 0; npu && r >= 0 && k < npu->n_chips; k++) {
                char host[32], sandbox[32];

                (void) snprintf(host, sizeof(host), "davinci%u", npu->chips[k]);
                (void) snprintf(sandbox, sizeof(sandbox), "davinci%zu", k);
                r = add_dev_bind(a, npu->device_root, host, sandbox);
        }
        for (char *const *m = npu ? npu->mgmt_nodes : NULL; r >= 0 && m && *m; m++)
                r = add_dev_bind(a, npu->device_root, *m, *m);
        for (size_t i = 0; r >= 0 && i < spec->n_devices; i++)
                r = add(a, "--dev-bind", spec->devices[i].source, spec->devices[i].dest, NULL);
        return r;
}

/* /dev, /proc and the /tmp tmpfs. */
static int argv_add_kernel_fs(char ***a, const SandboxSpec *spec, const SandboxProbe *probe) {
        char size[32];
        int r;

        r = add(a, "--dev", "/dev", NULL);
        if (r >= 0)
                r = argv_add_devices(a, spec);
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
        if (spec->n_symlinks > 0 && !spec->symlinks)
                return false;
        for (size_t i = 0; i < spec->n_symlinks; i++) {
                const SandboxSymlink *l = &spec->symlinks[i];

                if (!path_absolute(l->target) || strpbrk(l->target, "\n") || !sandbox_bind_dest_valid(l->dest) ||
                    (spec->env_prefix && path_at_or_under(l->dest, SANDBOX_ENV_PREFIX)))
                        return false;
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

/* @p is absolute and normalised, as a bind destination must be, and not "/". */
static bool path_normalised(const char *p) {
        return path_absolute(p) && p[1] != '\0' && sandbox_cwd_valid(p + 1);
}

/* The management nodes an NPU launch may bind from its device root (DESIGN.md §9). */
static const char *const npu_mgmt_nodes[] = { "davinci_manager", "devmm_svm", "hisi_hdc" };

/* What bwrap's --dev makes itself (bubblewrap's SETUP_MOUNT_DEV): a CDI device may not replace it
 * or be put inside it (/dev/shm, /dev/pts). */
static const char *const bwrap_dev_entries[] = {
        "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/console",
        "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd", "/dev/core", "/dev/shm", "/dev/pts",
        "/dev/ptmx",
};

/* A host tree of an NPU launch, bound at the same path: normalised, no ':' (the trees are joined
 * into PATH and LD_LIBRARY_PATH), and either at or under /usr (visible already, not bound) or a
 * valid bind destination out of the environment's way. */
static bool npu_tree_valid(const SandboxSpec *spec, const char *p) {
        if (!path_normalised(p) || strchr(p, ':'))
                return false;
        if (path_at_or_under(p, "/usr"))
                return true;
        return sandbox_bind_dest_valid(p) && !(spec->env_prefix && path_at_or_under(p, SANDBOX_ENV_PREFIX));
}

static bool npu_mgmt_node_known(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(npu_mgmt_nodes); i++)
                if (streq(name, npu_mgmt_nodes[i]))
                        return true;
        return false;
}

static bool spec_npu_valid(const SandboxSpec *spec) {
        const SandboxNpu *npu = spec->npu;

        /* No egress bridge: an NPU launch keeps its private network namespace whatever the policy. */
        if (spec->egress_socket || spec->bridge)
                return false;
        if (!path_normalised(npu->device_root) || npu->n_chips == 0 || !npu->chips)
                return false;
        for (size_t k = 1; k < npu->n_chips; k++)
                if (npu->chips[k] <= npu->chips[k - 1])
                        return false;   /* the renumbering must not depend on the caller's order */
        for (char *const *m = npu->mgmt_nodes; m && *m; m++) {
                if (!npu_mgmt_node_known(*m))
                        return false;
                for (char *const *o = npu->mgmt_nodes; o < m; o++)
                        if (streq(*o, *m))
                                return false;
        }
        if (!npu->driver_dir || !npu_tree_valid(spec, npu->driver_dir))
                return false;
        return (!npu->toolkit_dir || npu_tree_valid(spec, npu->toolkit_dir)) &&
               (!npu->smi || npu_tree_valid(spec, npu->smi)) &&
               (!npu->install_info || npu_tree_valid(spec, npu->install_info));
}

/* @dest is a node the NPU part binds already: /dev/davinci<k> for its chips, /dev/<management node>. */
static bool npu_dev_dest_used(const SandboxNpu *npu, const char *dest) {
        char buf[64];

        if (!npu)
                return false;
        for (size_t k = 0; k < npu->n_chips; k++) {
                (void) snprintf(buf, sizeof(buf), "/dev/davinci%zu", k);
                if (streq(dest, buf))
                        return true;
        }
        for (char *const *m = npu->mgmt_nodes; m && *m; m++)
                if (streq(dest + strlen("/dev/"), *m))   /* @dest is under /dev/ (cdi_device_valid()) */
                        return true;
        return false;
}

static bool cdi_device_valid(const SandboxSpec *spec, size_t i) {
        const SandboxDevice *d = &spec->devices[i];

        if (!path_absolute(d->source) || !path_normalised(d->dest) ||
            !path_at_or_under(d->dest, "/dev") || streq(d->dest, "/dev"))
                return false;
        for (size_t j = 0; j < ELEMENTSOF(bwrap_dev_entries); j++)
                if (path_at_or_under(d->dest, bwrap_dev_entries[j]))
                        return false;
        if (npu_dev_dest_used(spec->npu, d->dest))
                return false;
        for (size_t j = 0; j < i; j++)
                if (streq(spec->devices[j].dest, d->dest))
                        return false;   /* the second would silently hide the first */
        return true;
}

/* "NAME=VALUE" with NAME as sandbox_env_name_valid(). */
static bool env_entry_valid(const char *e) {
        const char *eq = strchr(e, '=');
        char name[129];

        if (!eq || (size_t) (eq - e) >= sizeof(name))
                return false;
        memcpy(name, e, (size_t) (eq - e));
        name[eq - e] = '\0';
        return sandbox_env_name_valid(name);
}

/* The NPU part and the CDI edits are well formed and do not collide (DESIGN.md §9). */
static bool spec_devices_valid(const SandboxSpec *spec) {
        if (spec->npu && !spec_npu_valid(spec))
                return false;
        if ((spec->n_devices > 0 && !spec->devices) || (spec->n_device_binds > 0 && !spec->device_binds))
                return false;
        for (size_t i = 0; i < spec->n_devices; i++)
                if (!cdi_device_valid(spec, i))
                        return false;
        for (size_t i = 0; i < spec->n_device_binds; i++) {
                const SandboxBind *b = &spec->device_binds[i];

                if (b->writable || !path_absolute(b->source) || !sandbox_bind_dest_valid(b->dest))
                        return false;
                if (spec->env_prefix && path_at_or_under(b->dest, SANDBOX_ENV_PREFIX))
                        return false;
        }
        for (char *const *e = spec->device_env; e && *e; e++)
                if (!env_entry_valid(*e))
                        return false;
        return true;
}

/* The NPU's host trees read-only at their own paths, except those at or under /usr (the sandbox
 * sees the host's /usr read-only already) and those at or under another one (bound with it; and
 * a parent bound after its child would cover the child's bind). Then the CDI mounts. All after
 * --tmpfs /tmp, so that bwrap can make mount points for trees kept under /tmp. */
static int argv_add_device_binds(char ***a, const SandboxSpec *spec) {
        const SandboxNpu *npu = spec->npu;
        const char *trees[] = { npu ? npu->driver_dir : NULL, npu ? npu->toolkit_dir : NULL,
                                npu ? npu->smi : NULL, npu ? npu->install_info : NULL };
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(trees); i++) {
                bool covered = !trees[i] || path_at_or_under(trees[i], "/usr");

                for (size_t j = 0; !covered && j < ELEMENTSOF(trees); j++)
                        covered = j != i && trees[j] && path_at_or_under(trees[i], trees[j]) &&
                                  (j < i || !streq(trees[i], trees[j]));
                if (!covered)
                        r = add(a, "--ro-bind", trees[i], trees[i], NULL);
        }
        for (size_t i = 0; r >= 0 && i < spec->n_device_binds; i++)
                r = add(a, "--ro-bind", spec->device_binds[i].source, spec->device_binds[i].dest, NULL);
        return r;
}

/* The workspace, the egress bridge and socket, the extra binds, the devices' trees and mounts, the
 * environment (its prefix and the host's interpreters covered), and the directory the payload
 * starts in. */
static int argv_add_workspace(char ***a, const SandboxSpec *spec, const SandboxProbe *probe) {
        _cleanup_free_ char *chdir_to = NULL;
        int r;

        r = spec->prebuilt ? add(a, "--dir", SANDBOX_WORKSPACE, NULL)
                           : add(a, "--bind", spec->workspace, SANDBOX_WORKSPACE, NULL);
        if (r >= 0 && spec->egress_socket)
                r = add(a, "--ro-bind", spec->bridge, SANDBOX_BRIDGE_PATH,
                        "--bind", spec->egress_socket, SANDBOX_EGRESS_SOCKET, NULL);
        for (size_t i = 0; r >= 0 && i < spec->n_binds; i++)
                r = add(a, spec->binds[i].writable ? "--bind" : "--ro-bind",
                        spec->binds[i].source, spec->binds[i].dest, NULL);
        for (size_t i = 0; r >= 0 && i < spec->n_symlinks; i++)
                r = add(a, "--symlink", spec->symlinks[i].target, spec->symlinks[i].dest, NULL);
        if (r >= 0)
                r = argv_add_device_binds(a, spec);
        if (r >= 0 && spec->env_prefix) {
                r = add(a, "--ro-bind", spec->env_prefix, SANDBOX_ENV_PREFIX, NULL);
                for (char **p = probe->interpreters; r >= 0 && p && *p; p++)
                        r = add(a, "--ro-bind", spec->hide_file, *p, NULL);
        }
        if (r < 0)
                return r;
        if (spec->prebuilt)
                return add(a, "--chdir", "/", NULL);   /* the helper goes to the run's directory */
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

/* @dir is one of the entries of the ':'-separated @list. */
static bool path_list_contains(const char *list, const char *dir) {
        size_t l = strlen(dir);

        for (const char *p = list;;) {
                size_t n = strcspn(p, ":");

                if (n == l && strneq(p, dir, l))
                        return true;
                if (p[n] == '\0')
                        return false;
                p += n + 1;
        }
}

/* An NPU launch's PATH: [the environment's bin/:] SANDBOX_NPU_PATH_HEAD [:the toolkit's bin dirs]
 * [:npu-smi's directory, unless listed already] :/usr/bin:/bin. */
static char *npu_path(const SandboxSpec *spec) {
        const SandboxNpu *npu = spec->npu;
        _cleanup_free_ char *tk_dirs = NULL, *head = NULL, *base = NULL, *smi_dir = NULL;
        const char *slash;

        if (npu->toolkit_dir) {
                tk_dirs = CONCAT(":", npu->toolkit_dir, "/bin:", npu->toolkit_dir, "/compiler/ccec_compiler/bin");
                if (!tk_dirs)
                        return NULL;
        }
        head = CONCAT(spec->env_prefix ? SANDBOX_ENV_PREFIX "/bin:" : "", SANDBOX_NPU_PATH_HEAD, tk_dirs ?: "");
        base = head ? CONCAT(head, ":/usr/bin:/bin") : NULL;
        if (!base || !npu->smi)
                return STEAL(base);
        slash = strrchr(npu->smi, '/');         /* npu->smi is absolute (spec_npu_valid()) */
        smi_dir = slash == npu->smi ? strdup("/") : strndup(npu->smi, (size_t) (slash - npu->smi));
        if (!smi_dir)
                return NULL;
        if (path_list_contains(base, smi_dir))
                return STEAL(base);
        return CONCAT(head, ":", smi_dir, ":/usr/bin:/bin");
}

/* NAME=VALUE into @l: in the place of an entry of that name, else at the end (bwrap's setenv()). */
static int env_set(char ***l, const char *name, const char *value) {
        _cleanup_free_ char *e = CONCAT(name, "=", value);
        size_t n = strlen(name);

        if (!e)
                return -ENOMEM;
        for (char **p = *l; p && *p; p++)
                if (strneq(*p, name, n) && (*p)[n] == '=') {
                        free(*p);
                        *p = STEAL(e);
                        return 0;
                }
        return strv_extend(l, e);
}

/* "NAME=VALUE" entries into @l; -EINVAL for a refused name. */
static int env_add_entries(char ***l, char *const *env) {
        int r = 0;

        for (char *const *e = env; r >= 0 && e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *name = NULL;

                if (!eq)
                        return -EINVAL;
                name = strndup(*e, (size_t) (eq - *e));
                if (!name)
                        return -ENOMEM;
                if (!sandbox_env_name_valid(name))
                        return -EINVAL;
                r = env_set(l, name, eq + 1);
        }
        return r;
}

/* The CANN environment (DESIGN.md §9), as the toolkit's set_env.sh states it; LD_LIBRARY_PATH is
 * set here directly: sandbox_env_name_valid() refuses it to requests and CDI specs. */
static int env_add_npu(char ***l, const SandboxNpu *npu) {
        const char *d = npu->driver_dir, *tk = npu->toolkit_dir;
        _cleanup_free_ char *tk_libs = NULL, *ld = NULL, *opp = NULL, *py = NULL;
        int r = 0;

        if (tk) {
                tk_libs = CONCAT(":", tk, "/lib64:", tk, "/lib64/plugin/opskernel:", tk, "/lib64/plugin/nnengine");
                opp = CONCAT(tk, "/opp");
                py = CONCAT(tk, "/python/site-packages:", tk, "/opp/built-in/op_impl/ai_core/tbe");
                if (!tk_libs || !opp || !py)
                        return -ENOMEM;
        }
        ld = CONCAT(d, "/lib64/common:", d, "/lib64/driver:", d, "/lib64", tk_libs ?: "");
        if (!ld)
                return -ENOMEM;
        if (tk) {
                const char *const kv[] = { "ASCEND_HOME_PATH", tk, "ASCEND_TOOLKIT_HOME", tk,
                                           "ASCEND_OPP_PATH", opp, "ASCEND_AICPU_PATH", tk };
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(kv); i += 2)
                        r = env_set(l, kv[i], kv[i + 1]);
        }
        if (r >= 0)
                r = env_set(l, "LD_LIBRARY_PATH", ld);
        if (r >= 0 && tk)
                r = env_set(l, "PYTHONPATH", py);
        return r;
}

int sandbox_env_list(const SandboxSpec *spec, char ***ret_env) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *npu_path_value = NULL;
        const char *path = spec->env_prefix ? SANDBOX_ENV_PATH : SANDBOX_PATH;
        const char *const base[] = { "PATH", NULL, "HOME", SANDBOX_WORKSPACE, "LANG", "C.UTF-8", "TMPDIR", "/tmp",
                                     "USER", "sandbox", "LOGNAME", "sandbox" };
        const char *const proxy[] = { "HTTP_PROXY", SANDBOX_PROXY_URL, "HTTPS_PROXY", SANDBOX_PROXY_URL,
                                      "http_proxy", SANDBOX_PROXY_URL, "https_proxy", SANDBOX_PROXY_URL,
                                      "NO_PROXY", "localhost,127.0.0.1,::1", "no_proxy", "localhost,127.0.0.1,::1" };
        int r = 0;

        if (spec->npu) {
                path = npu_path_value = npu_path(spec);
                if (!npu_path_value)
                        return -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(base); i += 2)
                r = env_set(&l, base[i], base[i + 1] ?: path);
        for (size_t i = 0; r >= 0 && spec->egress_socket && i < ELEMENTSOF(proxy); i += 2)
                r = env_set(&l, proxy[i], proxy[i + 1]);
        if (r >= 0 && spec->npu)
                r = env_add_npu(&l, spec->npu);
        if (r >= 0)
                r = env_add_entries(&l, spec->device_env);
        if (r >= 0)
                r = env_add_entries(&l, spec->env);
        if (r < 0)
                return r;
        if (!l && strv_extend(&l, "PATH=" SANDBOX_PATH) < 0)   /* never: the baseline is there */
                return -ENOMEM;
        *ret_env = STEAL(l);
        return 0;
}

/* An environment built from nothing (sandbox_env_list()), bwrap's --clearenv and --setenv. */
static int argv_add_env(char ***a, const SandboxSpec *spec) {
        _cleanup_strv_free_ char **env = NULL;
        int r;

        r = sandbox_env_list(spec, &env);
        if (r >= 0)
                r = add(a, "--clearenv", NULL);
        for (char **e = env; r >= 0 && e && *e; e++) {
                _cleanup_free_ char *name = strndup(*e, strcspn(*e, "="));

                if (!name)
                        return -ENOMEM;
                r = add(a, "--setenv", name, *e + strlen(name) + 1, NULL);
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

        if (!spec || !probe || (!spec->workspace && !spec->prebuilt) || !spec->argv || !spec->argv[0] ||
            spec->seccomp_fd < 0 || !sandbox_cwd_valid(spec->cwd ?: "") || !spec->egress_socket != !spec->bridge ||
            !spec_binds_valid(spec, probe) || !spec_devices_valid(spec))
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
