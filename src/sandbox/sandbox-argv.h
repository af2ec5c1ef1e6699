/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bwrap command line for one execution or provisioning step: a pure function of
 * (configuration, request, probes), with an environment's prefix (DESIGN.md §14), the extra
 * binds the provisioning sandbox needs, and the devices of an NPU launch or a CDI spec (§9).
 * Calls util/ only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SANDBOX_UID 1000
#define SANDBOX_GID 1000
#define SANDBOX_WORKSPACE "/workspace"
#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin"
#define SANDBOX_CODE_PATH "/.sandbox/code"
#define SANDBOX_BRIDGE_PATH "/.sandbox/bridge"
#define SANDBOX_EGRESS_SOCKET "/run/sandbox-egress.sock"
#define SANDBOX_PROXY_URL "http://127.0.0.1:18118"

/* The /etc files every sandbox gets as memfds (--ro-bind-data): one user, one group, loopback. */
#define SANDBOX_PASSWD_DATA "sandbox:x:1000:1000:sandbox:" SANDBOX_WORKSPACE ":/bin/sh\n"
#define SANDBOX_GROUP_DATA "sandbox:x:1000:\n"
#define SANDBOX_HOSTS_DATA "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\tsandbox\n"
/* Where an environment's prefix appears in a sandbox (DESIGN.md §14); its bin/ leads PATH. */
#define SANDBOX_ENV_PREFIX "/opt/science-env"
#define SANDBOX_ENV_PATH SANDBOX_ENV_PREFIX "/bin:" SANDBOX_PATH

typedef struct SandboxProbe {
        bool proc_fresh;          /* a fresh procfs can be mounted (else: read-only bind of /proc) */
        bool disable_userns;      /* bwrap --disable-userns works */
        bool usr_merged;          /* /bin, /sbin, /lib* are links into /usr */
        char **etc_files;         /* read-only /etc files present on the host to bind (absolute) */
        char **lib_dirs;          /* extra top-level lib dirs that exist: "/lib32", "/libx32", "/lib64" */
        char **interpreters;      /* the host's python*, pip*, R and Rscript (absolute, sorted): what
                                   * a sandbox with an environment must not see (sandbox_probe_interpreters()) */
} SandboxProbe;

/* One extra bind (the provisioning sandbox's: the new prefix, a wheelhouse, /var/lib/dpkg, /etc/R). */
typedef struct SandboxBind {
        const char *source;      /* host path (absolute) */
        const char *dest;        /* absolute path in the sandbox, normalised (sandbox_bind_dest_valid()) */
        bool writable;           /* --bind, else --ro-bind */
} SandboxBind;

/* A symbolic link made in the sandbox's root (bwrap --symlink TARGET DEST): @target is read inside
 * the sandbox, so it can point only at what the sandbox sees. */
typedef struct SandboxSymlink {
        const char *target;      /* absolute path in the sandbox */
        const char *dest;        /* as an extra bind's destination (sandbox_bind_dest_valid()) */
} SandboxSymlink;

/* A device node bound from the host (bwrap --dev-bind SOURCE DEST), after the fresh --dev /dev. */
typedef struct SandboxDevice {
        const char *source;     /* host path (absolute); the caller has checked it is a device node */
        const char *dest;       /* under /dev/, normalised, not one of the entries bwrap's --dev makes */
} SandboxDevice;

/*
 * An NPU launch (DESIGN.md §9): chips bound renumbered from 0, management nodes, the CANN tree.
 * The trees (driver, toolkit, npu-smi, install info) are bound read-only at the same path as on the
 * host, except those at or under /usr: the sandbox already sees the host's /usr read-only, so they
 * are not bound again. The others must be valid bind destinations (sandbox_bind_dest_valid()), not
 * under SANDBOX_ENV_PREFIX when an environment is used; a tree at or under another one is not
 * bound twice. No path may hold ':' (they are joined into PATH and LD_LIBRARY_PATH).
 */
typedef struct SandboxNpu {
        const char *device_root;        /* host directory holding davinciN and the management nodes ("/dev") */
        const unsigned *chips;          /* host logic ids, strictly ascending (else -EINVAL); ≥ 1 */
        size_t n_chips;
        char *const *mgmt_nodes;        /* names present under device_root: "davinci_manager", "devmm_svm",
                                         * "hisi_hdc" (others, or one twice: -EINVAL); NULL = none */
        const char *driver_dir;         /* host driver tree ("/usr/local/Ascend/driver"), required */
        const char *toolkit_dir;        /* CANN toolkit ("/usr/local/Ascend/ascend-toolkit/latest"), NULL = none */
        const char *smi;                /* host path of npu-smi, NULL = none */
        const char *install_info;       /* "/etc/ascend_install.info" when present on the host, else NULL */
} SandboxNpu;
/* What an NPU launch's PATH has after the environment's bin/ (if any), before the toolkit's. */
#define SANDBOX_NPU_PATH_HEAD "/usr/local/bin:/usr/local/sbin"

typedef struct SandboxSpec {
        const char *workspace;    /* host path of the workspace directory */
        const char *cwd;          /* relative to /workspace ("" = top), already validated */
        char *const *argv;        /* the payload's argv */
        char *const *env;         /* extra "KEY=VALUE" entries, already validated */
        uint64_t tmp_size;        /* bytes for the /tmp tmpfs, 0 = bwrap's default */
        int seccomp_fd;           /* fd number of the BPF program in the bwrap process */
        int passwd_fd;            /* fd with the single-record passwd file, or -1 */
        int group_fd;             /* fd with the single-record group file, or -1 */
        int hosts_fd;             /* fd with a minimal hosts file, or -1 */
        int code_fd;              /* fd with the code, bound at SANDBOX_CODE_PATH; ≤ 2 = none */
        int info_fd;              /* fd for bwrap's --info-fd (early start); ≤ 2 = none */
        /* Egress (both or neither): the gateway's socket and the bridge binary on the host. The
         * payload then runs under the bridge, with the proxy variables set. */
        const char *egress_socket;
        const char *bridge;
        /* Extra binds, after the workspace (and egress) binds, before the environment's; see
         * sandbox_bind_dest_valid() for the destinations refused. */
        const SandboxBind *binds;
        size_t n_binds;
        /* Symbolic links made after the extra binds (same destinations refused). */
        const SandboxSymlink *symlinks;
        size_t n_symlinks;
        /* An environment (NULL = none): the host path of its prefix, bound read-only at
         * SANDBOX_ENV_PREFIX with SANDBOX_ENV_PATH as PATH; and the host path of an empty file
         * (mode 0000) bound read-only over each of probe->interpreters. @hide_file is required
         * when the probe found interpreters. No extra bind may then be at or under
         * SANDBOX_ENV_PREFIX. */
        const char *env_prefix;
        const char *hide_file;
        /* The sandbox's root (bwrap's tmpfs, where /etc and the mount points live) read-only once
         * everything is mounted (--remount-ro /): only the writable binds, /tmp and /workspace can
         * be written. Used for the provisioning sandbox. */
        bool root_read_only;
        /* Devices (DESIGN.md §9). An NPU launch (@npu set) has no egress (-EINVAL with
         * egress_socket/bridge) and keeps its private network namespace. Its device nodes come
         * right after --dev /dev, then the CDI @devices; its trees after the extra binds, then the
         * CDI @device_binds (read-only: writable is -EINVAL; destinations as
         * sandbox_bind_dest_valid(), not under SANDBOX_ENV_PREFIX with an environment), then the
         * environment's prefix. Environment: the baseline (PATH is the NPU one for an NPU launch),
         * the NPU's variables (ASCEND_*, LD_LIBRARY_PATH, PYTHONPATH), @device_env, and last the
         * request's @env, which may therefore override the NPU's and the CDI's variables (but not
         * LD_LIBRARY_PATH, reserved): the payload could change its own environment anyway, so
         * this is not a boundary. */
        const SandboxNpu *npu;          /* NULL = not an NPU launch */
        const SandboxDevice *devices;   /* CDI device nodes (dest under /dev/, normalised) */
        size_t n_devices;
        const SandboxBind *device_binds;/* CDI mounts: read-only; dest as sandbox_bind_dest_valid() */
        size_t n_device_binds;
        char *const *device_env;        /* CDI env "NAME=VALUE", names as sandbox_env_name_valid() */
        /* Built ahead of its run (docs/architecture.md, "Sandboxes built ahead"): no @workspace,
         * an empty directory at /workspace and (with @code_fd) an empty file at the code's path,
         * which the keeper mounts over once the run is known (src/keeper/keeper-bind.c); the
         * sandbox starts in /; @argv is the exec helper, which gets the payload's argv,
         * environment (sandbox_env_list()) and directory with the request. */
        bool prebuilt;
} SandboxSpec;

/*
 * sandbox_argv_build() - the bwrap arguments (without the bwrap path itself, argv[0] is "bwrap"),
 * in the shape of DESIGN.md section 4 (§14 with an environment, §9 with devices). Pure: no I/O.
 * Return: 0, -EINVAL (spec incomplete, a relative path, a refused bind destination, an
 * environment with interpreters to hide and no @hide_file; an NPU launch with egress, chips not
 * strictly ascending or none, an unknown or repeated management node, a tree path refused; a CDI
 * device destination not under /dev/, un-normalised, one bwrap's /dev makes, or one used already;
 * a writable or refused CDI mount; a CDI variable without '=' or with a refused name), -ENOMEM.
 */
int sandbox_argv_build(const SandboxSpec *spec, const SandboxProbe *probe, char ***ret_argv);

/*
 * sandbox_env_list() - the payload's environment as bwrap makes it for @spec ("NAME=VALUE" in
 * bwrap's order: the baseline, the proxy, the NPU's, the CDI's, the request's; a later entry of a
 * name replaces the earlier one in its place), for a prebuilt sandbox's exec helper.
 * Return: 0, -EINVAL (a refused name), -ENOMEM.
 */
int sandbox_env_list(const SandboxSpec *spec, char ***ret_env);

/* sandbox_env_name_valid() - [A-Za-z_][A-Za-z0-9_]*, ≤ 128 bytes, not reserved (PATH, HOME, LD_*, …). */
bool sandbox_env_name_valid(const char *name);

/*
 * sandbox_bind_dest_valid() - an extra bind's destination: absolute and normalised (no "." or ".."
 * component, no "//", no trailing '/', no control bytes or '\', ≤ 1025 bytes), and neither at nor
 * under what the sandbox's shape owns: "/", /usr and its aliases (/bin, /sbin, /lib, /lib32,
 * /lib64, /libx32), /proc, /dev, /workspace, /.sandbox, the identity files (/etc/passwd,
 * /etc/group, /etc/hosts) and the egress socket.
 */
bool sandbox_bind_dest_valid(const char *dest);

/* sandbox_cwd_valid() - relative, no "..", no ".", no empty or over-long components, ≤ 1024 bytes. */
bool sandbox_cwd_valid(const char *cwd);
