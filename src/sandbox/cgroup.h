/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon's own cgroups: limits and accounting per execution without systemd.
 *
 * When no transient scope can be had (no system bus: a container, the quick start) a daemon
 * started as root still enforces memory, tasks and CPU: before it drops to its user it makes
 * "sandbox-runner" under its own cgroup in each hierarchy it needs (cgroup v2 where the
 * controllers are usable, else the v1 memory, pids, cpu and cpuacct hierarchies of a hybrid
 * host) and hands that directory to the user, as systemd's Delegate= does. Each execution then
 * gets "x-<id>" under it, with the limits written before the keeper is moved in (so bwrap and
 * everything under it start there), accounting read at the end, and the directory removed.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct json_object;

#include "sandbox/limits.h"     /* ScopeLimits, ScopeAccounting: the same limits, the same accounting */

typedef struct CgroupRoot CgroupRoot;
typedef struct Cgroup Cgroup;

/*
 * cgroup_root_prepare() - find or make our delegated directory in every hierarchy needed.
 * As root: make it and chown it (and its control files) to @uid/@gid. Otherwise: use it only if
 * it is writable already. Stale "x-*" directories of earlier runs that are empty are removed.
 * Return: 0, or -errno with *ret_reason saying why there are no cgroups of our own.
 */
int cgroup_root_prepare(uid_t uid, gid_t gid, CgroupRoot **ret, char **ret_reason);
CgroupRoot *cgroup_root_free(CgroupRoot *r);
/*
 * cgroup_root_check() - what cgroup_root_prepare() would find, changing nothing (the preflight):
 * started as root (@as_root), the hierarchy it would use; otherwise, only our directory when it
 * is writable already. Return: 0 with *@ret_description ("cgroup v2 under PATH"), or -errno with
 * *@ret_reason; -ENOMEM.
 */
int cgroup_root_check(bool as_root, char **ret_description, char **ret_reason);
/*
 * cgroup_root_export() - describe @r for the next image of this daemon (a re-execution): the
 * hierarchies' directory fds are left open across execve() (FD_CLOEXEC cleared), and the object
 * says which is which. cgroup_root_import() takes them over again (FD_CLOEXEC set), checking
 * that each fd is a directory. Return: 0, -ENOMEM, -EBADF or -EINVAL for what is no such object.
 */
int cgroup_root_export(const CgroupRoot *r, struct json_object **ret);
int cgroup_root_import(struct json_object *o, CgroupRoot **ret);
/* cgroup_root_describe() - "cgroup v1 (memory, pids, cpu, cpuacct) under PATH" or the v2 form. */
const char *cgroup_root_describe(const CgroupRoot *r);

/* cgroup_new() - "x-@name" with @limits (NULL: none yet) in every hierarchy. Return: 0 or -errno. */
int cgroup_new(CgroupRoot *root, const char *name, const ScopeLimits *limits, Cgroup **ret);
/* cgroup_set_limits() - write @limits (before anything in it runs). Return: 0 or -errno. */
int cgroup_set_limits(Cgroup *cg, const ScopeLimits *limits);
/* cgroup_attach() - move @pid (and so what it starts from now on) in. Return: 0 or -errno. */
int cgroup_attach(Cgroup *cg, pid_t pid);
/* cgroup_read_accounting() - peak memory, CPU time, peak tasks, limit events. Return: 0. */
int cgroup_read_accounting(Cgroup *cg, ScopeAccounting *ret);
/* cgroup_kill() - SIGKILL every process in it. Return: 0 or -errno. */
int cgroup_kill(Cgroup *cg);
/* cgroup_free() - kill what is left, remove the directories, free. Return: NULL. */
Cgroup *cgroup_free(Cgroup *cg);

/* Reading control files (also for scopes): a number, or the value of "KEY VALUE" lines. */
int cg_read_u64(int dir_fd, const char *path, uint64_t *ret);
int cg_read_keyed(int dir_fd, const char *path, const char *key, uint64_t *ret);
