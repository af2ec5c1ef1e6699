/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A daemon started as root becomes its sandbox user before it does anything else. */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "sandbox/caps.h"
#include "util/log.h"
#include "daemon/privileges.h"
#include "util/macro.h"

bool privileges_own_cgroups_wanted(void) {
        /* With systemd: transient scopes (or nothing); without it, cgroups of our own. */
        return sd_booted() <= 0;
}

void identity_done(Identity *id) {
        id->name = mfree(id->name);
}

int identity_resolve(const char *user, Identity *ret, char **ret_reason) {
        struct passwd *pw;
        char *end;

        *ret_reason = NULL;
        if (isempty(user))
                return asprintf(ret_reason, "[Execution] SandboxUser= is empty") < 0 ? -ENOMEM : -ESRCH;
        errno = 0;
        if (user[0] >= '0' && user[0] <= '9') {
                unsigned long u = strtoul(user, &end, 10);
                pw = *end == '\0' && u < UINT32_MAX ? getpwuid((uid_t) u) : NULL;
        } else
                pw = getpwnam(user);
        if (!pw)
                return asprintf(ret_reason, "the sandbox user '%s' ([Execution] SandboxUser=) does not exist%s%s; "
                                "create it (systemd-sysusers creates 'sandbox-runner' from the package's "
                                "sysusers.d file)", user, errno ? ": " : "", errno ? strerror(errno) : "") < 0 ?
                        -ENOMEM : -ESRCH;
        if (pw->pw_uid == 0 || pw->pw_gid == 0)
                return asprintf(ret_reason, "the sandbox user '%s' ([Execution] SandboxUser=) is root (uid %u, gid %u): "
                                "payloads never run as host root", user, (unsigned) pw->pw_uid,
                                (unsigned) pw->pw_gid) < 0 ? -ENOMEM : -EPERM;
        *ret = (Identity) { .uid = pw->pw_uid, .gid = pw->pw_gid, .name = strdup(pw->pw_name) };
        return ret->name ? 0 : -ENOMEM;
}

/* nftw() has no user data: one walk at a time, at start-up. */
static const Identity *walk_id;
static const char *walk_skip;
static unsigned long walk_changed, walk_left;
static int walk_error;

static int own_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        bool ok;

        if (walk_skip && type == FTW_D && streq(path, walk_skip))
                return FTW_SKIP_SUBTREE;       /* the secrets stay root's */
        ok = type == FTW_D || type == FTW_DP || type == FTW_SL || type == FTW_SLN ||
                  (type == FTW_F && S_ISREG(st->st_mode) && st->st_nlink == 1);

        if (st->st_uid != 0 && st->st_gid != 0)
                return 0;                      /* not root's: leave it */
        if (!ok) {
                walk_left++;
                return 0;
        }
        if (lchown(path, st->st_uid == 0 ? walk_id->uid : (uid_t) -1, st->st_gid == 0 ? walk_id->gid : (gid_t) -1) < 0) {
                walk_error = -errno;
                return 0;
        }
        walk_changed++;
        return 0;
}

int privileges_own_tree(const char *dir, const char *skip, const Identity *id) {
        _cleanup_free_ char *skip_real = skip ? realpath(skip, NULL) : NULL;
        _cleanup_free_ char *dir_real = realpath(dir, NULL);
        struct stat st;

        if (lstat(dir, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (st.st_uid == id->uid)
                return 0;
        if (!dir_real)
                return negative_errno();
        walk_id = id;
        walk_skip = skip_real;
        walk_changed = walk_left = 0;
        walk_error = 0;
        if (nftw(dir_real, own_one, 16, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL) < 0)
                return negative_errno();
        if (walk_error < 0)
                return walk_error;
        log_info("Handed %s to user '%s' (%lu entries)%s.", dir, id->name, walk_changed,
                 walk_left > 0 ? "; some root-owned entries that are neither directories, symlinks nor "
                                 "singly linked files were left as they are" : "");
        if (walk_left > 0)
                log_warning("%lu root-owned entries under %s were not handed over (hard links, devices, FIFOs).",
                            walk_left, dir);
        return 0;
}

int privileges_drop(const Identity *id) {
        uid_t ru, eu, su;
        gid_t rg, eg, sg;
        int r;

        /* The bounding set while CAP_SETPCAP is still ours; the rest goes with the uid. */
        r = caps_drop_bounding();
        if (r < 0)
                return r;
        if (setgroups(0, NULL) < 0 || setresgid(id->gid, id->gid, id->gid) < 0 ||
            setresuid(id->uid, id->uid, id->uid) < 0)
                return negative_errno();
        r = caps_drop_all();
        if (r < 0)
                return r;
        /* (The new uid also left us non-dumpable: processes of the same uid cannot read our memory
         * or environment through /proc. We keep it so.) */
        if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
                return negative_errno();
        if (ru != id->uid || eu != id->uid || su != id->uid || rg != id->gid || eg != id->gid || sg != id->gid)
                return -EPERM;
        if (setuid(0) == 0 || setgid(0) == 0)
                return -EPERM;    /* could get root back: refuse to go on */
        return 0;
}
