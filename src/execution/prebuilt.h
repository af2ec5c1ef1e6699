/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sandboxes built ahead of their runs ([Execution] Prebuilt=, docs/architecture.md "Sandboxes
 * built ahead"): per shape, up to Prebuilt= bwrap sandboxes of the run shape, built while the
 * daemon idles, each waiting in its exec helper (src/keeper/exec-request.h) for the one run it
 * will serve. A run of that shape takes one (prebuilt_take()) and binds its workspace into it
 * (the keeper's KeeperBind) instead of building a sandbox; the pool builds a replacement off the
 * request path. A sandbox is never used twice. Shapes so far: no egress, no environment, no
 * device, no extra bind, not detachable; with or without a code file. With systemd scopes each is
 * built in a scope of its own (sandbox-runner-x-p<daemon pid>-<keeper pid>.scope), whose limits
 * and description the run that takes it sets.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "execution/execution-context.h"
#include "sandbox/cgroup.h"
#include "sandbox/scope.h"
#include "sandbox/sandbox.h"

typedef enum PrebuiltShape {
        PREBUILT_SHELL,          /* argv only (/execute-shell, the ScienceDiscovery shell) */
        PREBUILT_CODE,           /* with a code file at SANDBOX_CODE_PATH (/execute) */
        _PREBUILT_SHAPE_MAX,
} PrebuiltShape;

const char *prebuilt_shape_to_string(PrebuiltShape s);

/* What a run takes over from a prebuilt sandbox. */
typedef struct PrebuiltTaken {
        SandboxProcess proc;     /* keeper pid, pidfd, control and report pipes; no stdout/stderr */
        int bind_fd;             /* the keeper's job socket: one KeeperBind */
        int request_fd;          /* the exec helper's request socket: one ExecRequest */
        pid_t bwrap_pid;
        pid_t init_pid;
        int init_pidfd;
        Cgroup *cgroup;          /* LIMITS_CGROUP: the sandbox's cgroup (limits not set yet) */
        Scope *scope;            /* LIMITS_SYSTEMD_SCOPE: its scope, started with ExecutionContext.prebuilt_limits */
} PrebuiltTaken;

/* prebuilt_take() - a ready sandbox of @shape into @ret, and a replacement asked for; the shape is
 * wanted from now on. Return: 0, -ENOENT (none ready: the run takes the cold path). */
int prebuilt_take(ExecutionContext *c, PrebuiltShape shape, PrebuiltTaken *ret);
/* prebuilt_want() - keep sandboxes of @shape ready from now on (a cold run of it just started). */
void prebuilt_want(ExecutionContext *c, PrebuiltShape shape);
/* prebuilt_kick() - the last run ended: builds may go on once it is quiet (they wait while runs go on). */
void prebuilt_kick(ExecutionContext *c);
/* prebuilt_taken_done() - close what a run did not take of @t. */
void prebuilt_taken_done(PrebuiltTaken *t);
/* prebuilt_drain() - discard every sandbox built ahead (idle exit, stop, a change of shape); no
 * shape is wanted any more. */
void prebuilt_drain(ExecutionContext *c);
/* prebuilt_pool_free() - prebuilt_drain(), and the pool itself (execution_context_done()). */
void prebuilt_pool_free(ExecutionContext *c);
/* prebuilt_target() - how many sandboxes of @shape are kept ready: Prebuilt=, or more after a burst
 * of its runs (PrebuiltBurst=). */
unsigned prebuilt_target(ExecutionContext *c, PrebuiltShape shape);
/* prebuilt_wanted() - sandboxes of @shape are kept ready (a run of it started). */
bool prebuilt_wanted(ExecutionContext *c, PrebuiltShape shape);
/* prebuilt_counts() - sandboxes ready and being built of @shape (/health). */
void prebuilt_counts(ExecutionContext *c, PrebuiltShape shape, unsigned *ret_ready, unsigned *ret_building);
/* prebuilt_idle_pss() - the mean proportional set size, in bytes, of the ready sandboxes of @shape
 * (keeper, bwrap, bwrap's pid 1, the exec helper; from /proc/PID/smaps_rollup); 0: none ready. */
uint64_t prebuilt_idle_pss(ExecutionContext *c, PrebuiltShape shape);
