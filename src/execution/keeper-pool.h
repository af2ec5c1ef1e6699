/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Keepers started ahead of their runs.
 *
 * Starting a keeper is a vfork and an exec: the caller waits until the new process has exec'd,
 * a few hundred microseconds, and more when the CPUs are busy. The pool keeps a few keepers
 * ready and starts replacements from an idle-priority event source, one per loop iteration,
 * when the loop has nothing else to do: typically while the sandbox that took one runs. A ready
 * keeper that dies while it waits is reaped by the loop at once, and replaced only when the next
 * run asks (one that dies as soon as it starts is not restarted over and over). (A
 * thread of its own that started them without blocking the loop measured slower: it competed
 * with the loop and the sandbox for the two CPUs; and a keeper's parent-death signal follows
 * the thread that started it.)
 */
#pragma once

#include <systemd/sd-event.h>

#include "sandbox/sandbox.h"

typedef struct KeeperPool KeeperPool;

/* keeper_pool_new() - a pool of @target keepers of @keeper_path, started in the background from
 * now on. Return: 0 or -errno. */
int keeper_pool_new(sd_event *e, const char *keeper_path, unsigned target, KeeperPool **ret);
/* keeper_pool_free() - stops the keepers not handed out. Return: NULL. */
KeeperPool *keeper_pool_free(KeeperPool *p);

/*
 * keeper_pool_take() - a keeper for a run: a ready one if there is one alive, else one started
 * now. Replacements are started once the loop is idle after keeper_pool_refill(), or at once
 * when the pool ran empty. Return: 0 or -errno.
 */
int keeper_pool_take(KeeperPool *p, SandboxKeeper *ret);
/*
 * keeper_pool_refill() - start replacements for the keepers taken, once the loop is idle. Call
 * it when the loop has nothing urgent coming: a start blocks it for a vfork and an exec, which
 * right after the take would hold up what the run waits for (with a scope: systemd's answer,
 * and the go byte after it); once the sandbox runs, the loop only waits for it.
 */
void keeper_pool_refill(KeeperPool *p);

/*
 * keeper_pool_set_attach() - @attach(pid) runs for each keeper the pool starts, from then on,
 * while the loop is idle; what it returns (NULL: nothing) goes with the keeper: to the taker of
 * keeper_pool_take_attached(), else to @detach() once the keeper is stopped (it died waiting,
 * the pool was freed, or a plain keeper_pool_take() took it). For the daemon's own cgroups: a
 * keeper is moved into a fresh one ahead of its run (moving a process in the v1 memory
 * hierarchy takes most of a millisecond), and the run only writes its limits.
 */
typedef void *(*KeeperPoolAttachFn)(pid_t pid, void *userdata);
typedef void (*KeeperPoolDetachFn)(void *attached, void *userdata);
void keeper_pool_set_attach(KeeperPool *p, KeeperPoolAttachFn attach, KeeperPoolDetachFn detach, void *userdata);
/* keeper_pool_take_attached() - keeper_pool_take(), and what was attached to it (or NULL: none,
 * or a keeper started now). */
int keeper_pool_take_attached(KeeperPool *p, SandboxKeeper *ret, void **ret_attached);

/* keeper_pool_ready() - how many keepers are ready now (for tests and /health-like reports). */
unsigned keeper_pool_ready(const KeeperPool *p);
