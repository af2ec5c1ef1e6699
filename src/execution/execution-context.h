/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What executions depend on, handed in at their creation (execution_new()) instead of the
 * daemon's Manager: the loop, configuration values, the probes' findings, the keeper pool, the
 * records, the snapshot store, the egress epochs, and the callbacks up to the owner. The owner
 * (the Manager) fills it once, before its loop runs; the execution module keeps its own state in
 * it too (the runs, released keepers, cached quota watchers).
 */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "config/settings.h"
#include "execution/quota-cache.h"
#include "execution/workspace-heads.h"
#include "sandbox/limits.h"

/* The keeper, the outer bwrap and bwrap's init in the pid namespace count against TasksMax. */
#define TASKS_OVERHEAD 3

typedef struct Execution Execution;
typedef struct Cas Cas;
typedef struct CgroupRoot CgroupRoot;
typedef struct EgressEpochs EgressEpochs;
typedef struct KeeperPool KeeperPool;
typedef struct KeeperReap KeeperReap;
typedef struct PrebuiltPool PrebuiltPool;
typedef struct SandboxProbe SandboxProbe;
typedef struct ScopeManager ScopeManager;

/* What enforces an execution's memory, tasks and CPU limits (/health.scopes.mechanism). */
typedef enum LimitsMechanism {
        LIMITS_SYSTEMD_SCOPE,            /* a transient scope per execution */
        LIMITS_CGROUP,                   /* a cgroup of the daemon's own per execution (cgroup.h) */
        LIMITS_RLIMIT,                   /* rlimits only, with [Execution] AllowUnscoped=yes */
        _LIMITS_MAX,
} LimitsMechanism;

const char *limits_mechanism_to_string(LimitsMechanism l);

/* Everything an execution depends on, handed in at creation (execution_new()). */
typedef struct ExecutionContext {
        sd_event *event;
        /* Configuration (the owner's, alive as long as the context). */
        const char *bwrap;               /* [Execution] Bwrap= */
        uint64_t tmp_size;               /* [Execution] TmpSize= */
        const char *state_dir;           /* a workspace is <state_dir>/workspaces/<id> */
        const QuotaSettings *quota;      /* in force now: each run keeps those of its creation */
        /* What the probes found. */
        LimitsMechanism limits;
        const SandboxProbe *probe;       /* what bwrap can do here */
        ScopeManager *scopes;            /* with LIMITS_SYSTEMD_SCOPE */
        CgroupRoot *cgroups;             /* with LIMITS_CGROUP */
        KeeperPool *keeper_pool;         /* keepers started ahead; NULL: one per run, from keeper_path */
        const char *keeper_path;
        /* Sandboxes built ahead (prebuilt.h): [Execution] Prebuilt= per shape, 0 = none; the exec
         * helper they run (sandbox-runner-exec, an O_PATH fd; -EBADF: none); where a run's code
         * file waits to be bound (<runtime_dir>/prebuilt). */
        unsigned prebuilt_max;
        unsigned prebuilt_burst;         /* [Execution] PrebuiltBurst=: a shape's pool grows to its bursts, up to this */
        uint64_t prebuilt_burst_keep_usec; /* [Execution] PrebuiltBurstKeepSec=: and goes back after this */
        ScopeLimits prebuilt_limits;     /* with scopes: a built sandbox's scope's, a request's unless it asks less */
        int exec_helper_fd;
        const char *runtime_dir;
        /* Stores and sources. */
        int workspaces_fd;
        int records_fd;                  /* -EBADF: no records */
        Cas *cas;                        /* NULL: no snapshots */
        EgressEpochs *egress;            /* the policy epoch each run takes */
        /* Up to the owner: work that must keep it alive (runs, keepers still exiting), and a
         * snapshot published (for its pruning). */
        void (*busy_ref)(void *userdata);
        void (*busy_unref)(void *userdata);
        void (*snapshot_published)(void *userdata);
        void *userdata;

        /* The execution module's own: zero at first, emptied by execution_context_done(). */
        Execution *executions;           /* running and recently finished, newest first */
        unsigned n_running;
        uint64_t n_total;
        KeeperReap *keeper_reaps;        /* released keepers, still exiting (keeper-reap.h) */
        QuotaCache quota_cache;          /* quota watchers kept between runs */
        PrebuiltPool *prebuilt;          /* sandboxes built ahead (prebuilt.c) */
        WorkspaceHeads heads;            /* the last snapshot trees of each workspace */
} ExecutionContext;

/* execution_context_done() - free every execution, reap the released keepers without the loop
 * (it is done), drop the cached quota watchers. */
void execution_context_done(ExecutionContext *c);
