/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The inside of one execution, shared by the files of the execution module only: execution.c
 * (life, lease, the finish), execution-launch.c (the sandbox's start), execution-io.c (output and
 * the keeper's reports), execution-json.c (the answer, the record, the journal entry).
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <systemd/sd-event.h>

#include "execution/execution-context.h"
#include "execution/execution.h"
#include "keeper/exec-request.h"
#include "execution/execution-request.h"
#include "execution/execution-status.h"
#include "execution/output-buffer.h"
#include "execution/records.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/scope.h"
#include "util/macro.h"
#include "util/thread-task.h"
#include "util/time-util.h"

typedef struct EgressEpoch EgressEpoch;
typedef struct QuotaWatch QuotaWatch;

/*
 * Where a run is. The finish is one pass of execution_advance() from the top, which every callback
 * that an unfinished end waits for calls again (on_init_gone(), on_snapshot_done(), the keeper's
 * exit): each wait it meets names its phase, and the run is DONE when it reaches the bottom.
 */
typedef enum ExecutionPhase {
        EXECUTION_NEW,                    /* created, not started */
        EXECUTION_LEASE_WAIT,             /* another writer holds the workspace: polling */
        EXECUTION_LAUNCHING,              /* the keeper has its job; with a scope, until 'G' */
        EXECUTION_RUNNING,                /* the payload runs */
        /* The finish, in this order: */
        EXECUTION_WAIT_INIT,              /* ended unreported: the sandbox's pid 1 is killed, awaited */
        EXECUTION_SNAPSHOT,               /* the workspace's snapshot is being published */
        EXECUTION_REAP,                   /* ended unreported: awaiting the keeper's exit */
        EXECUTION_DONE,                   /* resources released, record and journal entry written,
                                           * answered (the order: execution_conclude()) */
} ExecutionPhase;

struct Execution {
        ExecutionContext *ctx;
        Execution *prev, *next;
        ExecutionRequest *req;
        ExecutionEnv env;                /* hold == NULL: no environment */
        ExecutionDevices devices;        /* hold == NULL: no chips or devices */
        char **extra;                    /* execution_add_bind(): triples "ro"|"rw"|"ln", source, dest */
        char *id;
        ExecutionPhase phase;
        ExecutionStatus status;
        int exit_code;
        int signal;
        int failure;
        char *failure_message;

        int ws_fd;
        int lease_fd;
        SandboxProcess proc;
        pid_t bwrap_pid;
        /* Early start (with a scope): bwrap builds the sandbox while systemd makes the scope. */
        bool early;
        int info_fd;                      /* bwrap's --info-fd JSON, read until EOF */
        sd_event_source *info_source;
        char info_buf[256];
        size_t info_len;
        pid_t init_pid;                   /* the sandbox's pid 1, from that JSON */
        int init_pidfd;                   /* ... checked to be ours; for a run that ends unreported */
        sd_event_source *init_source;     /* waiting for that pid 1 to be gone */
        int record_fd;                    /* the final record's file, made while the sandbox runs */
        int ref_fd;                       /* the snapshot ref's file, likewise (cas_ref_prepare()) */
        sd_event_source *keeper_source, *report_source, *stdout_source, *stderr_source;
        sd_event_source *timeout_source, *lease_source, *kill_source, *free_source;
        char report_buf[64];
        size_t report_len;
        OutputBuffer *out, *err;
        Scope *scope;
        Cgroup *cgroup;                   /* without systemd: the daemon's own cgroup for the run */
        char *unit;                       /* the scope's name, kept for the records */
        ScopeAccounting acct;
        bool have_acct;
        bool reported_exit, stdout_eof, stderr_eof, keeper_gone, busy_ref;
        int wait_status;
        ExecutionStatus kill_reason;      /* RUNNING = none requested */
        uint64_t start_usec, end_usec;    /* CLOCK_MONOTONIC */
        uint64_t created_realtime_usec;

        void (*done)(Execution *e, void *userdata);   /* ExecutionDoneFn */
        void *userdata;

        /* The quota settings at creation: later changes apply to later runs. */
        uint64_t output_limit;
        uint64_t workspace_limit;
        EgressEpoch *egress;              /* the policy revision this run uses; NULL = no network */
        char *network;                    /* its revision, kept for the answer and the record */
        bool network_open;                /* ... of a policy in mode open (the record's networkMode) */
        bool egress_fixed;                /* execution_set_egress(): not the policy in force */
        ThreadTask *snapshot_task;
        struct SnapshotJob *snapshot_job;        /* owned; the thread's input while snapshot_task runs */
        char *snapshot;                   /* "sha256:…" of the published tree */
        char *snapshot_error;
        bool snapshot_done;
        QuotaWatch *quota;
        sd_event_source *quota_source;
        uint64_t workspace_bytes;         /* last usage seen (before, during, after the run) */
        bool have_workspace_bytes;

        /* Built ahead (prebuilt.h): the sandbox came built; until the keeper's "B" the bind
         * socket, the helper's request socket and what the request carries (stdin, the stdout
         * and stderr pipes' write ends, the strings' memfd), and the code's file until bound. */
        bool prebuilt;
        bool scope_limits_pending;       /* prebuilt with scopes: SetUnitProperties() of its limits in flight */
        int bind_fd, request_fd;
        int request_fds[EXEC_REQUEST_FDS];
        ExecRequest request;
        char *code_file;

        /* Managed runs: logs on disk (resumable by offset), a record written at start. */
        bool managed;
        bool detachable;                  /* execution_set_detachable(): may outlive the daemon */
        int log_fds[_RECORD_STREAM_MAX];
        uint64_t log_bytes[_RECORD_STREAM_MAX];
        bool log_truncated[_RECORD_STREAM_MAX];
        struct ExecutionWatch *watches;
        sd_event_source *linger_source;
};


/* execution.c */
/* execution_advance() - move the finish on from where it is (see ExecutionPhase). */
void execution_advance(Execution *e);
/* execution_fail() - the run failed with @error (a message from @fmt): it finishes. Return: the
 * failure's -errno (-EIO if @error was none). */
int execution_fail(Execution *e, int error, const char *fmt, ...) _printf_(3, 4);
/* execution_maybe_end() - the run is over when the keeper reported its exit and the output is
 * read to its end, or when the keeper died without a report. */
void execution_maybe_end(Execution *e);
/* execution_kill() - stop the run for @reason ('K' to the keeper, the whole scope after a grace). */
void execution_kill(Execution *e, ExecutionStatus reason);
void execution_notify_watches(Execution *e);
/* execution_fail_keeper_gone() - the keeper exited before it took its job: fail, saying how (from
 * its exit status). Return: the failure's -errno. */
int execution_fail_keeper_gone(Execution *e, const siginfo_t *si);
int execution_on_keeper_exit(sd_event_source *s, const siginfo_t *si, void *userdata);
/* execution_quota_exceeded() - usage @bytes seen: over the limit? (Then said in the journal.) */
bool execution_quota_exceeded(Execution *e, uint64_t bytes);

/* execution-launch.c */
/* execution_launch() - with the lease held: the sandbox's files, argv, keeper, limits, watches.
 * Return: 0 (started, or ended at once over its quota), or the failure's -errno (failed). */
int execution_launch(Execution *e);
/* execution_launch_watch() - the started sandbox watched: --info-fd (@info_fd, or -EBADF), its
 * output, reports, keeper and timeout; the record's and the snapshot ref's files prepared. */
int execution_launch_watch(Execution *e, int info_fd);
/* execution-prebuilt.c: a run in a sandbox built ahead. execution_launch_prebuilt() - take one of
 * the run's shape, with @limits as rlimits (the helper sets them): 1 (launched), 0 (none: the
 * cold path), or the run's failure. execution_prebuilt_bound() - the keeper's "B<@error>".
 * execution_prebuilt_done() - what is left of it (fds, the code's file). */
int execution_launch_prebuilt(Execution *e, const SandboxLimits *limits);
void execution_prebuilt_bound(Execution *e, int error);
void execution_prebuilt_done(Execution *e);
/* execution_scope_limits() - the run's limits for its scope or cgroup (tasks with TASKS_OVERHEAD). */
ScopeLimits execution_scope_limits(const Execution *e);
/* execution_scope_start() - early start: keeper, bwrap and the sandbox's pid 1 into the scope. */
void execution_scope_start(Execution *e);

/* execution-io.c */
int execution_on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata);
int execution_on_report(sd_event_source *s, int fd, uint32_t revents, void *userdata);
void execution_log_started(Execution *e);

/* execution-json.c */
/* execution_write_record() - the record on disk (the prepared file if there is one). */
void execution_write_record(Execution *e);
/* execution_log_finished() - the journal entry of the finished run. */
void execution_log_finished(Execution *e);
