/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The conda provisioner's command line and the check of its binary (DESIGN.md §14): the argv of
 * `micromamba create` for one environment, a pure function of an EnvCondaPlan, and the SHA-256
 * check of the operator's micromamba ([Environments] Micromamba=, MicromambaSHA256=) made before
 * every use. env_conda_argv() does no I/O; env_micromamba_verify() reads the one file it is given.
 * May call util/ and nettle (sha256); nothing else.
 *
 * Not run against a real micromamba here: no registry this project can reach ships it. The argv
 * uses only options documented for `micromamba create` (mamba's docs, commands_micromamba/create).
 */
#pragma once

#include <stdbool.h>

/* micromamba's root prefix when the plan has no package cache: in the sandbox's /tmp tmpfs. */
#define ENV_CONDA_ROOT_PREFIX "/tmp/mamba-root"

typedef struct EnvCondaPlan {
        const char *micromamba;        /* the binary's path in the sandbox (absolute) */
        const char *prefix;            /* the prefix being built, in the sandbox: SANDBOX_ENV_PREFIX */
        char *const *channels;         /* already checked against the allowlist; at least one; the
                                        * first has the highest priority (strict) */
        char *const *packages;         /* conda match specs, already checked; at least one */
        bool offline;                  /* --offline: only the package cache (cached repodata) */
        /* The package cache in the sandbox, or NULL (a throw-away one in /tmp). micromamba has no
         * option for it and reads neither rc files nor environment variables here (--no-rc,
         * --no-env), so it is given as the root prefix's "pkgs": the path must end in "/pkgs"
         * and the root prefix is its parent. */
        const char *pkgs_dir;
} EnvCondaPlan;

/*
 * env_conda_argv() - the command line, argv[0] being @p->micromamba:
 *
 *   <micromamba> create --yes --no-rc --no-env --root-prefix <root> --prefix <prefix>
 *       --override-channels --strict-channel-priority --always-copy --safety-checks enabled
 *       -c <channel1> [-c <channel2> ...] [--offline] -- <package> [<package> ...]
 *
 * --no-rc/--no-env: no .condarc/.mambarc and no CONDA_... or MAMBA_... variable adds a channel, a
 * mirror or a cache; --override-channels: only the channels given; --always-copy: no hard link
 * between the package cache and the prefix (a later setup, with the cache writable, could
 * otherwise change a live environment's files); --safety-checks enabled: a package file that
 * does not match its recorded hash fails the setup. "--" ends the options (the channel option
 * takes several values), so no package is read as an option or a channel.
 * Return: 0 with a strv in *@ret_argv (strv_free()), -EINVAL (no binary or prefix, a relative
 * path, no channel or no package, an empty entry, one starting with '-' or holding a control
 * byte or (channels) a space, a package cache not ending in "/pkgs" or not normalised), -ENOMEM.
 */
int env_conda_argv(const EnvCondaPlan *p, char ***ret_argv);

/*
 * env_micromamba_verify() - @path is a regular file (opened without following a final link,
 * O_NOFOLLOW) whose SHA-256 is @sha256_hex (64 hex digits, either case).
 * Return: 0; -EINVAL "bad configured hash" (not 64 hex digits) or "bad configured path" (not
 * absolute); -EBADMSG "hash mismatch"; -ELOOP (a symbolic link), -EISDIR (a directory), -ENOEXEC
 * (another non-regular file) or the -errno of open/read, each with a static reason in
 * *@ret_reason (if not NULL; set to NULL on success).
 */
int env_micromamba_verify(const char *path, const char *sha256_hex, const char **ret_reason);
