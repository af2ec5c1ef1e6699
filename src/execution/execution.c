/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One execution: its life (creation, watchers, cancel, free) and its finish, a state machine of
 * named phases (execution-internal.h: ExecutionPhase) that execution_advance() walks top to
 * bottom. The start and the launch are execution-launch.c's, the output and the keeper's reports
 * execution-io.c's, the answer, the record and the journal entry execution-json.c's.
 *
 * Order at the end (DESIGN.md §3): the keeper reports bwrap's exit (the sandbox's pid namespace
 * is gone: nothing can still write), the accounting is read while the keeper still holds the
 * scope, the snapshot is published, the scope is released, the lease is released; then a managed
 * run's record and journal entry are written before its watchers are woken, while a synchronous
 * run is answered first and its record and journal entry follow in the same callback (no other
 * request can come between: execution_conclude()). The keeper is killed and reaped last.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress/egress-epochs.h"
#include "execution/execution-internal.h"
#include "execution/prebuilt.h"
#include "execution/execution.h"
#include "execution/keeper-reap.h"
#include "util/fd-util.h"
#include "util/log.h"
#include "util/strv.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"
#include "workspace/quota.h"

static int pidfd_send_signal_(int fd, int sig) {
        return (int) syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

#define KILL_GRACE_USEC (5 * USEC_PER_SEC)

typedef struct SnapshotJob SnapshotJob;
static void snapshot_job_free(SnapshotJob *j);

struct ExecutionWatch {
        Execution *execution;
        ExecutionWatch *prev, *next;
        void (*cb)(void *userdata);
        void *userdata;
};

void execution_notify_watches(Execution *e) {
        for (ExecutionWatch *w = e->watches, *next; w; w = next) {
                next = w->next;
                w->cb(w->userdata);
        }
}

int execution_watch_add(Execution *e, void (*cb)(void *userdata), void *userdata, ExecutionWatch **ret) {
        ExecutionWatch *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        *w = (ExecutionWatch) { .execution = e, .cb = cb, .userdata = userdata, .next = e->watches };
        if (e->watches)
                e->watches->prev = w;
        e->watches = w;
        *ret = w;
        return 0;
}

ExecutionWatch *execution_watch_free(ExecutionWatch *w) {
        Execution *e;

        if (!w)
                return NULL;
        e = w->execution;
        if (e) {
                if (w->prev)
                        w->prev->next = w->next;
                else
                        e->watches = w->next;
                if (w->next)
                        w->next->prev = w->prev;
        }
        free(w);
        return NULL;
}

bool execution_watch_alive(const ExecutionWatch *w) {
        return w && w->execution;
}

Execution *execution_watch_execution(const ExecutionWatch *w) {
        return w ? w->execution : NULL;
}

static int random_id(char **ret) {
        uint8_t b[16];
        char *s;

        if (getentropy(b, sizeof(b)) < 0)
                return negative_errno();
        if (asprintf(&s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                     b[14], b[15]) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int execution_new(ExecutionContext *c, ExecutionRequest *req, Execution **ret) {
        Execution *e;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e) {
                execution_request_free(req);
                return -ENOMEM;
        }
        *e = (Execution) {
                .ctx = c,
                .req = req,
                .ws_fd = -EBADF,
                .lease_fd = -EBADF,
                .info_fd = -EBADF,
                .init_pidfd = -EBADF,
                .record_fd = -EBADF,
                .ref_fd = -EBADF,
                .bind_fd = -EBADF,
                .request_fd = -EBADF,
                .request_fds = { -EBADF, -EBADF, -EBADF, -EBADF },
                .proc = { .keeper_pidfd = -EBADF, .control_fd = -EBADF, .report_fd = -EBADF,
                          .stdout_fd = -EBADF, .stderr_fd = -EBADF },
                .status = EXECUTION_STATUS_RUNNING,
                .kill_reason = EXECUTION_STATUS_RUNNING,
                .log_fds = { -EBADF, -EBADF },
                .created_realtime_usec = now_usec(CLOCK_REALTIME),
                .output_limit = c->quota->max_output_bytes,
                .workspace_limit = c->quota->max_workspace_bytes,
        };
        if (req->execution_id)
                e->id = strdup(req->execution_id);
        else {
                r = random_id(&e->id);
                if (r < 0)
                        e->id = NULL;
        }
        if (!e->id ||
            output_buffer_new(c->quota->max_output_bytes, &e->out) < 0 ||
            output_buffer_new(c->quota->max_output_bytes, &e->err) < 0) {
                execution_free(e);
                return -ENOMEM;
        }

        e->next = c->executions;
        if (c->executions)
                c->executions->prev = e;
        c->executions = e;
        *ret = e;
        return 0;
}

/* Hand the killed keeper of a finished run to the loop. Return: true if it took it. */
static bool execution_reap_keeper_later(Execution *e) {
        if (!e->keeper_source || e->phase != EXECUTION_DONE || !e->reported_exit)
                return false;
        if (keeper_reap_add(e->ctx, e->proc.keeper_pid, &e->proc.keeper_pidfd, &e->keeper_source, &e->scope,
                            &e->cgroup, false) < 0)
                return false;   /* and the caller waits for it */
        e->keeper_gone = true;   /* as far as this execution is concerned */
        return true;
}

static void execution_release_devices(Execution *e) {
        if (e->devices.hold && e->devices.release)
                e->devices.release(e->devices.hold);
        e->devices = (ExecutionDevices) {};
}

/*
 * Everything of the sandbox goes: after this no process of the run exists. The keeper (ours,
 * outside the sandbox: bwrap and the whole pid namespace are gone once it reported) is killed and
 * reaped here with @wait. Without: before the exit report it is killed and its exit source reaps
 * it (the finish waits for that); after the report it is left alone until the answer is out
 * (execution_advance()), so that its exit does not compete with the snapshot and the answer.
 */
static void execution_release_sandbox_full(Execution *e, bool wait) {
        execution_prebuilt_done(e);
        e->info_source = sd_event_source_disable_unref(e->info_source);
        e->info_fd = safe_close(e->info_fd);
        e->init_source = sd_event_source_disable_unref(e->init_source);
        e->init_pidfd = safe_close(e->init_pidfd);
        e->report_source = sd_event_source_disable_unref(e->report_source);
        e->stdout_source = sd_event_source_disable_unref(e->stdout_source);
        e->stderr_source = sd_event_source_disable_unref(e->stderr_source);
        e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
        e->lease_source = sd_event_source_disable_unref(e->lease_source);
        e->kill_source = sd_event_source_disable_unref(e->kill_source);
        e->quota_source = sd_event_source_disable_unref(e->quota_source);
        /* The watcher stays with the workspace for the next run (it keeps following changes). */
        quota_cache_put(&e->ctx->quota_cache, e->req->workspace_id, e->ws_fd, e->quota);
        e->quota = NULL;
        egress_epoch_release(e->egress);
        e->egress = NULL;
        if (wait && e->proc.keeper_pid > 0 && !e->keeper_gone)
                (void) execution_reap_keeper_later(e);
        if (e->proc.keeper_pid > 0 && !e->keeper_gone && (wait || !e->reported_exit || !e->keeper_source)) {
                /* Still ours to reap: make sure nothing survives us. (After the exit report, on
                 * the way to the answer, the keeper holds nothing of the sandbox any more: it is
                 * released after the answer, execution_advance().) */
                (void) kill(e->proc.keeper_pid, SIGKILL);
                if (wait || !e->keeper_source) {
                        e->keeper_source = sd_event_source_disable_unref(e->keeper_source);
                        (void) waitpid(e->proc.keeper_pid, NULL, 0);
                        e->keeper_gone = true;
                }
        }
        if (e->keeper_gone) {
                e->keeper_source = sd_event_source_disable_unref(e->keeper_source);
                sandbox_process_done(&e->proc);
                if (e->scope) {
                        /* After the exit report only the keeper was left in the scope (it reaped
                         * bwrap and the sandbox's pid 1, and with it the pid namespace), and it is
                         * gone now: the scope is empty, no KillUnit (which would cost another polkit
                         * check per run). Else kill whatever may be left. */
                        if (!e->reported_exit)
                                (void) scope_kill(e->scope);
                        e->scope = scope_free(e->scope);
                }
                e->cgroup = cgroup_free(e->cgroup);
        } else {
                /* The exit source watches the pidfd: that one stays until the keeper is reaped, and
                 * the scope until then too (see above); the control pipe as well while the keeper
                 * is kept (closing it releases the keeper). */
                int pidfd = STEAL_FD(e->proc.keeper_pidfd), control = STEAL_FD(e->proc.control_fd);
                sandbox_process_done(&e->proc);
                e->proc.keeper_pidfd = pidfd;
                e->proc.control_fd = control;
        }
}

static void execution_release_resources_full(Execution *e, bool wait) {
        execution_release_sandbox_full(e, wait);
        e->snapshot_task = thread_task_free(e->snapshot_task);   /* waits for a thread still running */
        snapshot_job_free(e->snapshot_job);
        e->snapshot_job = NULL;
        e->lease_fd = safe_close(e->lease_fd);
        e->ws_fd = safe_close(e->ws_fd);
        for (int s = 0; s < _RECORD_STREAM_MAX; s++)
                e->log_fds[s] = safe_close(e->log_fds[s]);
        if (e->busy_ref) {
                e->busy_ref = false;
                if (e->ctx->n_running > 0)
                        e->ctx->n_running--;
                if (e->ctx->n_running == 0)
                        prebuilt_kick(e->ctx);   /* builds wait while runs go on */
                e->ctx->busy_unref(e->ctx->userdata);
        }
}

static void execution_release_resources(Execution *e) {
        execution_release_resources_full(e, true);
}

void execution_set_devices(Execution *e, const ExecutionDevices *d) {
        execution_release_devices(e);
        e->devices = *d;
}

void execution_set_egress(Execution *e, EgressEpoch *ep) {
        egress_epoch_release(e->egress);
        e->egress = ep;
        e->egress_fixed = true;
}

void execution_set_environment(Execution *e, const ExecutionEnv *env) {
        if (e->env.hold && e->env.release)
                e->env.release(e->env.hold);
        e->env = *env;
}

Execution *execution_free(Execution *e) {
        ExecutionContext *c;

        if (!e)
                return NULL;
        c = e->ctx;
        execution_release_resources(e);
        execution_release_devices(e);
        strv_free(e->extra);
        if (e->env.hold && e->env.release)
                e->env.release(e->env.hold);   /* its prefix may go now, if it is not live */
        e->cgroup = cgroup_free(e->cgroup);   /* one made for a run whose keeper never came */
        record_prepared_discard(c->records_fd, e->id, &e->record_fd);   /* a run that never finished */
        if (c->cas)
                cas_ref_prepared_discard(c->cas, e->req->workspace_id, e->id, STEAL_FD(e->ref_fd));
        e->ref_fd = safe_close(e->ref_fd);
        if (e->prev)
                e->prev->next = e->next;
        else if (c->executions == e)
                c->executions = e->next;
        if (e->next)
                e->next->prev = e->prev;
        e->free_source = sd_event_source_disable_unref(e->free_source);
        e->linger_source = sd_event_source_disable_unref(e->linger_source);
        /* Watchers outlive us: tell them, then detach them. */
        while (e->watches) {
                ExecutionWatch *w = e->watches;
                e->watches = w->next;
                w->execution = NULL;
                w->prev = w->next = NULL;
                w->cb(w->userdata);
        }
        output_buffer_free(e->out);
        output_buffer_free(e->err);
        execution_request_free(e->req);
        free(e->failure_message);
        free(e->unit);
        free(e->network);
        free(e->snapshot);
        free(e->snapshot_error);
        free(e->id);
        free(e);
        return NULL;
}

Execution *execution_next(const Execution *e) {
        return e->next;
}

const char *execution_id(const Execution *e) {
        return e->id;
}

const char *execution_workspace(const Execution *e) {
        return e->req->workspace_id;
}

bool execution_finished(const Execution *e) {
        return e->phase == EXECUTION_DONE;
}

int execution_failure(const Execution *e, const char **ret_message) {
        if (ret_message)
                *ret_message = e->failure_message;
        return e->failure;
}

static int on_free_later(sd_event_source *s, void *userdata) {
        execution_free(userdata);
        return 0;
}

void execution_free_later(Execution *e) {
        /* Never free from inside our own callbacks: defer to a clean point of the loop. */
        if (e->free_source)
                return;
        if (sd_event_add_defer(e->ctx->event, &e->free_source, on_free_later, e) < 0)
                log_oom();
}

static void free_when_done(Execution *e, void *userdata) {
        execution_free_later(e);
}

void execution_detach(Execution *e) {
        if (e->phase == EXECUTION_DONE) {
                execution_free_later(e);
                return;
        }
        e->done = free_when_done;
        e->userdata = NULL;
}

/* ---- the end --------------------------------------------------------------------------------- */

static void execution_decide_status(Execution *e) {
        int st = e->wait_status;

        if (e->failure < 0) {
                e->status = EXECUTION_STATUS_FAILED;
                return;
        }
        if (!e->reported_exit && e->keeper_gone)
                /* The keeper died without reporting (killed with its scope): so did the run. */
                st = W_EXITCODE(0, SIGKILL);
        if (WIFEXITED(st)) {
                int code = WEXITSTATUS(st);

                /* bwrap reports a payload killed by signal N as exit code 128+N, like a shell. */
                if (code > 128 && code < 128 + 65) {
                        e->signal = code - 128;
                        e->exit_code = -1;
                        e->status = EXECUTION_STATUS_SIGNALED;
                } else {
                        e->exit_code = code;
                        e->status = EXECUTION_STATUS_EXITED;
                }
        } else if (WIFSIGNALED(st)) {
                e->signal = WTERMSIG(st);
                e->exit_code = -1;
                e->status = EXECUTION_STATUS_SIGNALED;
        }

        if (e->kill_reason == EXECUTION_STATUS_CANCELLED || e->kill_reason == EXECUTION_STATUS_INTERRUPTED ||
            e->kill_reason == EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED) {
                e->status = e->kill_reason;
                if (!e->reported_exit)
                        e->exit_code = -1;
        }
        else if (e->have_acct && e->acct.oom_kills > 0)
                e->status = EXECUTION_STATUS_MEMORY_LIMIT;
        else if (e->have_acct && e->acct.tasks_max_hits > 0 && !(e->status == EXECUTION_STATUS_EXITED && e->exit_code == 0))
                e->status = EXECUTION_STATUS_TASKS_LIMIT;
        else if (e->kill_reason == EXECUTION_STATUS_TIMEOUT)
                e->status = EXECUTION_STATUS_TIMEOUT;
}

#define EXECUTION_LINGER_USEC (600 * USEC_PER_SEC)

static int on_linger(sd_event_source *s, uint64_t usec, void *userdata) {
        execution_free_later(userdata);
        return 0;
}

/* What the snapshot thread works on: its own copies, nothing the loop may change meanwhile. */
struct SnapshotJob {
        Cas *cas;                         /* cas_snapshot() works on a copy of it */
        int ws_fd;
        int ref_fd;                       /* cas_ref_prepare()'s file, or -EBADF */
        char *workspace_id, *execution_id;
        uint64_t created_ms;
};

static void snapshot_job_free(SnapshotJob *j) {
        if (!j)
                return;
        safe_close(j->ws_fd);
        safe_close(j->ref_fd);            /* only if the thread never ran */
        free(j->workspace_id);
        free(j->execution_id);
        free(j);
}

static int snapshot_work(void *userdata, char **ret_out) {
        SnapshotJob *j = userdata;
        _cleanup_free_ char *digest = NULL;
        CasSnapshotStats st = {};
        int r;

        r = cas_snapshot_prepared(j->cas, j->ws_fd, j->workspace_id, j->execution_id, j->created_ms,
                                  STEAL_FD(j->ref_fd), &digest, &st);
        if (r < 0)
                return r;
        *ret_out = STEAL(digest);
        return 0;
}

static void on_snapshot_done(ThreadTask *t, int error, const char *out, void *userdata) {
        Execution *e = userdata;

        e->snapshot_done = true;
        if (error < 0) {
                log_warning_errno(error, "Failed to snapshot workspace '%s' after execution '%s': %m",
                                  e->req->workspace_id, e->id);
                if (asprintf(&e->snapshot_error, "the snapshot of workspace '%s' failed: %s", e->req->workspace_id,
                             strerror(-error)) < 0)
                        e->snapshot_error = NULL;   /* contents undefined on failure */
        } else {
                e->snapshot = strdup(out);
                (void) workspace_heads_publish(&e->ctx->heads, e->req->workspace_id, e->id, out);
                e->ctx->snapshot_published(e->ctx->userdata);
        }
        /* @out belongs to the task. */
        e->snapshot_task = thread_task_free(e->snapshot_task);
        snapshot_job_free(e->snapshot_job);
        e->snapshot_job = NULL;
        execution_advance(e);
}

/* The snapshot, in a thread (the answer waits for it; a fork would cost more than a small walk). */
static int execution_snapshot_start(Execution *e) {
        SnapshotJob *j;
        int r;

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (SnapshotJob) {
                .cas = e->ctx->cas,
                .ws_fd = fcntl(e->ws_fd, F_DUPFD_CLOEXEC, 3),
                .ref_fd = -EBADF,
                .workspace_id = strdup(e->req->workspace_id),
                .execution_id = strdup(e->id),
                .created_ms = e->created_realtime_usec / 1000,
        };
        if (j->ws_fd < 0 || !j->workspace_id || !j->execution_id) {
                r = j->ws_fd < 0 ? negative_errno() : -ENOMEM;
                snapshot_job_free(j);
                return r;
        }
        j->ref_fd = STEAL_FD(e->ref_fd);
        r = thread_task_start(e->ctx->event, snapshot_work, j, on_snapshot_done, e, &e->snapshot_task);
        if (r < 0) {
                e->ref_fd = STEAL_FD(j->ref_fd);   /* discarded with the execution */
                snapshot_job_free(j);
                return r;
        }
        e->snapshot_job = j;
        return 0;
}

static bool execution_wants_snapshot(const Execution *e) {
        /* Every run that started changed (or may have changed) the workspace. */
        return e->ctx->cas && !e->snapshot_done && e->failure == 0 && e->ws_fd >= 0 && e->lease_fd >= 0 &&
                e->proc.keeper_pid > 0;
}

static int on_init_gone(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;

        e->init_source = sd_event_source_disable_unref(e->init_source);
        e->init_pidfd = safe_close(e->init_pidfd);
        execution_advance(e);
        return 0;
}

/*
 * A run that ends without the keeper's exit report (the keeper was killed, or did not answer a
 * kill): the sandbox may still be dying, and its pid 1 may even outlive bwrap for good if it had
 * not yet bound itself to bwrap's life. Kill it and wait until it is gone (with it the whole pid
 * namespace) before anything looks at the workspace. Return: true while waiting.
 */
static bool execution_wait_init(Execution *e) {
        struct pollfd p = { .fd = e->init_pidfd, .events = POLLIN };

        if (e->init_source)
                return true;
        if (e->init_pidfd < 0 || poll(&p, 1, 0) != 0)
                return false;   /* unknown, or gone already */
        (void) pidfd_send_signal_(e->init_pidfd, SIGKILL);
        if (sd_event_add_io(e->ctx->event, &e->init_source, e->init_pidfd, EPOLLIN, on_init_gone, e) < 0) {
                log_warning("Execution '%s': cannot wait for its sandbox to be gone; going on.", e->id);
                return false;
        }
        return true;
}

/* The run ended: once, its end time, a last look at its workspace, and what it came to. */
static void execution_end(Execution *e) {
        int r;

        e->end_usec = now_usec(CLOCK_MONOTONIC);
        if (e->start_usec == 0)
                e->start_usec = e->end_usec;
        /* A last look at the workspace: the run may have reached its quota after the last tick, or
         * with one file (RLIMIT_FSIZE lets a file grow one byte past the quota, so that reaching it
         * shows; the writer got SIGXFSZ or EFBIG). */
        if (e->quota && e->reported_exit && e->failure >= 0 && e->kill_reason == EXECUTION_STATUS_RUNNING) {
                uint64_t bytes;
                r = quota_watch_tick(e->quota, &bytes);
                if (r < 0 || execution_quota_exceeded(e, bytes))
                        e->kill_reason = EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED;
        }
        execution_decide_status(e);
}

/* Start the snapshot. Return: true if it runs (on_snapshot_done() comes back); false if it could
 * not start: logged, and the run goes on without one. */
static bool execution_snapshot_begin(Execution *e) {
        int r;

        r = execution_snapshot_start(e);
        if (r >= 0)
                return true;
        log_warning_errno(r, "Failed to start the snapshot of '%s', ignoring: %m", e->id);
        e->snapshot_done = true;
        return false;
}

/*
 * The last of a run, at the bottom of the finish (EXECUTION_DONE): the record and the journal
 * entry, the watchers, the answer, then the keeper's release. A synchronous run answers first: the
 * record and the journal entry follow in this very callback, so no other request (the loop is
 * single-threaded) can see the difference, and the answer does not wait for them. Managed runs
 * have readers (log followers, teardowns) who are woken here, and who may read the record: it
 * comes first.
 */
static void execution_conclude(Execution *e) {
        bool answer_first = e->done && !e->managed;

        if (!answer_first) {
                execution_write_record(e);
                execution_log_finished(e);
        }
        execution_notify_watches(e);
        if (e->managed)
                /* Keep a finished managed run in memory a while for status and log readers;
                 * its record and logs stay on disk after that. */
                (void) sd_event_add_time_relative(e->ctx->event, &e->linger_source, CLOCK_MONOTONIC,
                                                  EXECUTION_LINGER_USEC, USEC_PER_SEC, on_linger, e);
        if (e->done) {
                ExecutionDoneFn done = e->done;
                e->done = NULL;
                done(e, e->userdata);   /* frees @e later, not now (execution_free_later()) */
        }
        if (answer_first) {
                execution_write_record(e);
                execution_log_finished(e);
        }
        /* The answer is out: now the keeper goes, reaped by the loop (and with it the scope). */
        if (e->proc.keeper_pid > 0 && !e->keeper_gone && !execution_reap_keeper_later(e))
                (void) kill(e->proc.keeper_pid, SIGKILL);   /* reaped when @e goes */
}

/*
 * The finish, top to bottom: every pass starts here (the end of the run, and each callback an
 * unfinished pass waits for), skips what is done, and stops at the first wait, naming it.
 *
 * The sandbox goes first (no process of the run is left: nothing can still write), then the
 * snapshot is published while we still hold the lease, then the lease goes. After the exit report
 * the sandbox is gone already (the keeper reaped bwrap and its pid 1): the snapshot starts before
 * we kill the keeper, whose exit would otherwise delay it. The keeper is reaped while the snapshot
 * runs; the answer waits for both.
 */
void execution_advance(Execution *e) {
        if (e->phase == EXECUTION_DONE)
                return;
        if (e->end_usec == 0)
                execution_end(e);
        if (e->reported_exit && execution_wants_snapshot(e) && !e->snapshot_task)
                (void) execution_snapshot_begin(e);

        /* WAIT_INIT: an end without the exit report may leave the sandbox's pid 1 dying. */
        if (!e->reported_exit && execution_wait_init(e)) {
                e->phase = EXECUTION_WAIT_INIT;
                return;   /* on_init_gone() comes back here */
        }
        execution_release_sandbox_full(e, false);

        /* SNAPSHOT: published while the lease is held. */
        if (execution_wants_snapshot(e) && (e->snapshot_task || execution_snapshot_begin(e))) {
                e->phase = EXECUTION_SNAPSHOT;
                return;   /* on_snapshot_done() comes back here */
        }

        /* REAP: a keeper killed without its exit report is reaped before the answer. */
        if (!e->keeper_gone && e->keeper_source && !e->reported_exit) {
                e->phase = EXECUTION_REAP;
                return;   /* execution_on_keeper_exit() comes back here */
        }

        /* DONE: the lease and the rest go; the record, the journal entry and the answer. */
        execution_release_resources_full(e, false);
        execution_release_devices(e);   /* no process of the sandbox is left to use them */
        e->phase = EXECUTION_DONE;
        execution_conclude(e);
}

int execution_fail(Execution *e, int error, const char *fmt, ...) {
        int failure = error < 0 ? error : -EIO;
        va_list ap;

        e->failure = failure;
        free(e->failure_message);
        e->failure_message = NULL;
        va_start(ap, fmt);
        if (vasprintf(&e->failure_message, fmt, ap) < 0)
                e->failure_message = NULL;
        va_end(ap);
        execution_advance(e);
        return failure;
}

void execution_maybe_end(Execution *e) {
        if (e->phase == EXECUTION_DONE)
                return;
        if (e->reported_exit && e->stdout_eof && e->stderr_eof)
                execution_advance(e);
        else if (e->keeper_gone && !e->reported_exit)
                /* The keeper died without reporting (killed from outside): the run is over. */
                execution_advance(e);
}

/* A keeper that gave up before it started bwrap, with its exit status (src/keeper/keeper.c): why. */
static const char *keeper_exit_why(int status) {
        return status == 120 ? "it refused its job (is sandbox-runner-keeper of another version than the daemon?)" :
               status == 126 ? "it was not started by this daemon" :
                               "it could not set up";
}

/* The keeper exited before it took its job (sandbox_spawn() said -ECHILD): say how, from its exit
 * status, never from what the send happened to see of that. */
int execution_fail_keeper_gone(Execution *e, const siginfo_t *si) {
        if (si->si_code == CLD_EXITED && si->si_status != 0)
                return execution_fail(e, -EPROTO,
                                      "the sandbox keeper exited with status %d before starting bwrap: %s",
                                      si->si_status, keeper_exit_why(si->si_status));
        if (si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED)
                return execution_fail(e, -ECHILD,
                                      "the sandbox keeper was killed by signal %d (%s) before it took its job",
                                      si->si_status, strsignal(si->si_status));
        return execution_fail(e, -ECHILD, "the sandbox keeper exited before it took its job");
}

int execution_on_keeper_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        Execution *e = userdata;

        e->keeper_gone = true;
        e->keeper_source = sd_event_source_disable_unref(e->keeper_source);
        if (e->bwrap_pid <= 0 && e->failure == 0 && e->end_usec == 0 && si->si_code == CLD_EXITED &&
            si->si_status != 0) {
                /* It gave up before it started bwrap: say why. */
                execution_fail(e, -EPROTO, "the sandbox keeper exited with status %d before starting bwrap: %s",
                               si->si_status, keeper_exit_why(si->si_status));
                return 0;
        }
        if (e->phase == EXECUTION_DONE)
                execution_release_sandbox_full(e, false);   /* after the answer: its pidfd, the scope */
        else if (e->end_usec != 0)
                execution_advance(e);    /* it was finishing, and waited for this */
        else
                execution_maybe_end(e);
        return 0;
}

/* ---- killing --------------------------------------------------------------------------------- */

static int on_kill_grace(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;

        /* The keeper did not report after 'K': kill everything, the keeper included. */
        log_warning("Execution '%s' did not stop within %u s of being killed; killing its scope.", e->id,
                    (unsigned) (KILL_GRACE_USEC / USEC_PER_SEC));
        if (e->scope)
                (void) scope_kill(e->scope);
        if (e->cgroup)
                (void) cgroup_kill(e->cgroup);
        if (e->proc.keeper_pid > 0 && !e->keeper_gone)
                (void) kill(e->proc.keeper_pid, SIGKILL);
        return 0;
}

void execution_kill(Execution *e, ExecutionStatus reason) {
        if (e->phase == EXECUTION_DONE || e->end_usec != 0 || e->kill_reason != EXECUTION_STATUS_RUNNING)
                return;   /* finished or finishing (its status is decided): nothing left to kill */
        e->kill_reason = reason;
        if (e->phase == EXECUTION_LEASE_WAIT || e->phase == EXECUTION_NEW) {
                execution_advance(e);
                return;
        }
        if (e->proc.control_fd >= 0) {
                char k = 'K';
                /* Before 'G' a 'K' makes the keeper exit without starting anything. */
                if (write(e->proc.control_fd, &k, 1) != 1)
                        (void) kill(e->proc.keeper_pid, SIGKILL);
        }
        (void) sd_event_add_time_relative(e->ctx->event, &e->kill_source, CLOCK_MONOTONIC, KILL_GRACE_USEC,
                                          USEC_PER_SEC / 10, on_kill_grace, e);
}

void execution_cancel(Execution *e, ExecutionStatus reason) {
        execution_kill(e, reason);
}

void execution_set_managed(Execution *e) {
        e->managed = true;
}

bool execution_is_managed(const Execution *e) {
        return e->managed;
}

Execution *execution_find(ExecutionContext *c, const char *id) {
        for (Execution *e = c->executions; e; e = e->next)
                if (streq(e->id, id))
                        return e;
        return NULL;
}

void execution_context_done(ExecutionContext *c) {
        while (c->executions)
                execution_free(c->executions);
        prebuilt_pool_free(c);
        keeper_reaps_flush(c);
        quota_cache_flush(&c->quota_cache);
        workspace_heads_done(&c->heads);
}
