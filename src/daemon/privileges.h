/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A daemon started as root becomes its sandbox user before it does anything else.
 *
 * Started as root (by hand, in a container), bwrap would map the sandbox's user to host uid 0,
 * and host root may write every global sysctl and is exempt from RLIMIT_NPROC. So the daemon
 * hands its state and runtime directories (and its cgroups, cgroup.h) to [Execution]
 * SandboxUser= and switches to that user for good: every keeper, bwrap and payload then runs
 * under it, exactly as under the service unit's User=. Started as any other user, nothing
 * changes.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct Identity {
        uid_t uid;
        gid_t gid;
        char *name;
} Identity;

void identity_done(Identity *id);

/*
 * privileges_own_cgroups_wanted() - whether start-up looks for cgroups of the daemon's own
 * (cgroup.h): only on a host not booted with systemd, where no transient scope can be had.
 */
bool privileges_own_cgroups_wanted(void);

/*
 * identity_resolve() - look @user (a name or a numeric uid) up in the user database.
 * Return: 0, -ESRCH (no such user), -EPERM (it is uid 0), with *ret_reason for the operator.
 */
int identity_resolve(const char *user, Identity *ret, char **ret_reason);

/*
 * privileges_own_tree() - give @dir and what lies under it (one file system, no symlink
 * followed) to @id, where root owns it: directories, symlinks and regular files with a single
 * link; anything else (a hard link a root sandbox of an older version may have made, a device)
 * is left as it is and counted in the log. The directory @skip (the credentials, when they lie
 * inside; may be NULL) stays as it is. Done only when @dir itself is not @id's yet.
 * Return: 0 or -errno.
 */
int privileges_own_tree(const char *dir, const char *skip, const Identity *id);

/*
 * privileges_drop() - supplementary groups cleared, then gid and uid (real, effective, saved)
 * set to @id's, every capability gone (the bounding set too); checked by trying to get uid 0
 * back. Return: 0 or -errno.
 */
int privileges_drop(const Identity *id);
