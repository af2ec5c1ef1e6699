/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One execution: lease, sandbox launch in its scope, output capture, limits, result, records.
 * What a run depends on comes in with its ExecutionContext (filled by the daemon once, before its
 * loop runs): the loop, configuration values, the probes' findings, the keeper pool, the records,
 * the snapshot store, the egress epochs, and two callbacks up (busy, snapshot published). The
 * module calls sandbox/, workspace/, egress/, config/ and util/, nothing of core/ or above.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "execution/execution-context.h"
#include "execution/execution-request.h"
#include "execution/execution-status.h"

typedef struct ExecutionWatch ExecutionWatch;
typedef struct EgressEpoch EgressEpoch;


typedef void (*ExecutionDoneFn)(Execution *e, void *userdata);

/*
 * execution_new() - create an execution for a validated request (ownership of @req moves in).
 * Return: 0 or -errno.
 */
int execution_new(ExecutionContext *c, ExecutionRequest *req, Execution **ret);
/* The environment a run uses (DESIGN.md §14), held by its owner for as long as the run exists. */
typedef struct ExecutionEnv {
        void *hold;                      /* released with @release when the execution is freed */
        void (*release)(void *hold);
        const char *name;                /* these three are the hold's: valid while it is held */
        unsigned revision;
        const char *prefix;              /* host path, bound read-only at SANDBOX_ENV_PREFIX */
        const char *hide_file;           /* covers the host's interpreters (SandboxSpec.hide_file) */
        bool r;                          /* an R environment: /etc/R is bound as well */
} ExecutionEnv;

/* execution_set_environment() - before execution_start(): the run takes @env (and its hold). */
void execution_set_environment(Execution *e, const ExecutionEnv *env);

/* The chips and CDI devices a run uses (DESIGN.md §9), held by their owner (the NPU manager's
 * claim) until the sandbox is gone. Everything here is the hold's: valid while it is held. */
typedef struct ExecutionDevices {
        void *hold;                      /* released with @release once the sandbox is gone */
        void (*release)(void *hold);
        const SandboxNpu *npu;           /* chips: NULL = none */
        const SandboxDevice *nodes;      /* CDI: device nodes, read-only binds, variables */
        size_t n_nodes;
        const SandboxBind *binds;
        size_t n_binds;
        char *const *env;
} ExecutionDevices;

/* execution_set_devices() - before execution_start(): the run takes @d (and its hold). A run with
 * chips gets no egress bridge and the npu seccomp variant, whatever the network policy. */
void execution_set_devices(Execution *e, const ExecutionDevices *d);

/*
 * execution_set_egress() - before execution_start(): the run uses @ep (a reference the caller
 * took with egress_epoch_acquire_for(), moved in) instead of the policy in force; @ep NULL: no
 * network at all, whatever that policy says. A run with chips still gets none.
 */
void execution_set_egress(Execution *e, EgressEpoch *ep);

/*
 * execution_add_bind() - before execution_start(): bind the host path @source read-only (or, with
 * @writable, read-write) at @dest in the sandbox; execution_add_symlink(): make @dest a symbolic
 * link to @target (a path in the sandbox). @dest as sandbox_bind_dest_valid() (checked at launch:
 * a refused one fails the run). Both copied. Return: 0 or -ENOMEM.
 */
int execution_add_bind(Execution *e, const char *source, const char *dest, bool writable);
int execution_add_symlink(Execution *e, const char *target, const char *dest);

/*
 * execution_start() - take the lease (waiting if needed), then launch. @done runs exactly once.
 * Return: 0 once the run is under way (or waits for its lease, or ended at once without a failure,
 * a workspace over its quota), -errno if it could not be started: the run is failed then
 * (execution_failure() says why), and @done has run already if it finished.
 */
int execution_start(Execution *e, ExecutionDoneFn done, void *userdata);
/* execution_cancel() - stop the run (the scope is killed); it finishes with @reason. */
void execution_cancel(Execution *e, ExecutionStatus reason);
/* execution_detach() - the waiting client is gone: @done will not be called; freed when done. */
void execution_detach(Execution *e);
/* execution_free_later() - free from the event loop (safe inside callbacks). */
void execution_free_later(Execution *e);
Execution *execution_free(Execution *e);
Execution *execution_next(const Execution *e);
const char *execution_id(const Execution *e);
const char *execution_workspace(const Execution *e);
bool execution_finished(const Execution *e);
/* execution_to_json() - the answer object of API.md. Return: a new object or NULL on OOM. */
json_object *execution_to_json(const Execution *e);
/* execution_record_json() - the answer plus "state", "kind", "createdAt" (and "logs" for managed runs). */
json_object *execution_record_json(const Execution *e);
/* execution_record_json_full() - with @for_disk, also who runs it (daemon pid and start time). */
json_object *execution_record_json_full(const Execution *e, bool for_disk);

/*
 * execution_cap_limits() - before execution_start(): lower this run's workspace quota to
 * @workspace_bytes and its output budget (what a managed run's logs keep) to @output_bytes, each
 * only where that is smaller than the settings it was created with (0: no change; a setting of 0,
 * unlimited, is lowered by any cap).
 */
void execution_cap_limits(Execution *e, uint64_t workspace_bytes, uint64_t output_bytes);

/*
 * execution_cap_retention() - before execution_start(): keep at most @bytes of each of stdout and
 * stderr in memory (head and tail past it, as with MaxOutputBytes=), for a run that lives long and
 * whose own output is not its result (a kernel's). Return: 0 or -ENOMEM (nothing changed).
 */
int execution_cap_retention(Execution *e, uint64_t bytes);

/*
 * Runs that may outlive the daemon (a kernel's; execution-leave.c). execution_set_detachable() -
 * before start: in a systemd scope, the sandbox is left running when the daemon goes away
 * (execution_leave(), or a crash), for the next daemon to re-adopt. execution_scope_unit() - the
 * scope of such a run while it runs (else NULL: it cannot be left). execution_keeper_pid() - its
 * keeper's pid (0 once gone). execution_leave() - close our ends without killing anything and
 * free @e (no callback, no record, no snapshot; the lease goes with our descriptor).
 * Return: 0, or -EOPNOTSUPP (not detachable, no scope, not running: nothing was done).
 */
void execution_set_detachable(Execution *e);
const char *execution_scope_unit(const Execution *e);
pid_t execution_keeper_pid(const Execution *e);
int execution_leave(Execution *e);
/* execution_context_kill_unit() - SIGKILL every process of our run's scope @unit (one a previous
 * daemon left). Return: 0, -EOPNOTSUPP (no scopes here, not one of ours), or -errno. */
int execution_context_kill_unit(ExecutionContext *c, const char *unit);

/* execution_set_managed() - before start: a managed run (logs on disk, a durable record). */
void execution_set_managed(Execution *e);
bool execution_is_managed(const Execution *e);
/* execution_find() - a run this daemon knows in memory (running or recently finished). */
Execution *execution_find(ExecutionContext *c, const char *id);

/*
 * execution_watch_add() - call @cb whenever the run writes to its logs, when it finishes, and
 * when it is freed (after which execution_watch_alive() is false). Free with execution_watch_free().
 */
int execution_watch_add(Execution *e, void (*cb)(void *userdata), void *userdata, ExecutionWatch **ret);
ExecutionWatch *execution_watch_free(ExecutionWatch *w);
bool execution_watch_alive(const ExecutionWatch *w);
Execution *execution_watch_execution(const ExecutionWatch *w);

/* execution_status() - what the run came to (EXECUTION_STATUS_RUNNING until it is decided). */
ExecutionStatus execution_status(const Execution *e);
/* execution_sandbox_pid() - the host pid of the sandbox's pid 1 (bwrap's init, whose children
 * are the payload), 0 until bwrap told it or once the sandbox is gone. */
pid_t execution_sandbox_pid(const Execution *e);

/* execution_failure() - for FAILED runs: the errno and message of what went wrong. */
int execution_failure(const Execution *e, const char **ret_message);

/* The keeper pool's attach hooks with the daemon's own cgroups (keeper_pool_set_attach(), with
 * the CgroupRoot): a keeper started ahead goes into a fresh cgroup while the loop is idle. */
void *execution_keeper_attach(pid_t pid, void *userdata);
void execution_keeper_detach(void *attached, void *userdata);
