/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One execution: lease, sandbox launch in its scope, output capture, limits, result, records.
 *
 * Order at the end (DESIGN.md §3): the keeper reports bwrap's exit (the sandbox's pid namespace
 * is gone: nothing can still write), the accounting is read while the keeper still holds the
 * scope, the scope is killed and released, the lease is released, the journal entry is written,
 * and only then is the answer sent.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "workspace/cas/cas.h"
#include "egress/egress-epochs.h"
#include "execution/execution.h"
#include "execution/keeper-pool.h"
#include "execution/keeper-reap.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "execution/output-buffer.h"
#include "workspace/quota.h"
#include "execution/records.h"
#include "sandbox/sandbox-argv.h"
#include "sandbox/sandbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/scope.h"
#include "sandbox/seccomp-profile.h"
#include "util/thread-task.h"
#include "util/fd-util.h"
#include "util/macro.h"
#include "util/strv.h"
#include "workspace/workspace.h"

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);

static int pidfd_send_signal_(int fd, int sig) {
        return (int) syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

typedef struct SnapshotJob SnapshotJob;
static void snapshot_job_free(SnapshotJob *j);
typedef struct KeeperReap KeeperReap;
typedef struct Execution Execution;
static void execution_scope_start(Execution *e);
static bool execution_quota_exceeded(Execution *e, uint64_t bytes);
static int on_info(sd_event_source *s, int fd, uint32_t revents, void *userdata);

#define READ_CHUNK (64 * 1024)
#define LEASE_RETRY_USEC (50 * USEC_PER_MSEC)
#define KILL_GRACE_USEC (5 * USEC_PER_SEC)
/* The keeper, the outer bwrap and bwrap's init in the pid namespace count against TasksMax. */
#define TASKS_OVERHEAD 3

typedef enum ExecutionState {
        STATE_NEW,
        STATE_WAITING_LEASE,
        STATE_STARTING,
        STATE_RUNNING,
        STATE_FINISHED,
} ExecutionState;

struct Execution {
        ExecutionContext *ctx;
        Execution *prev, *next;
        ExecutionRequest *req;
        char *id;
        ExecutionState state;
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

        ExecutionDoneFn done;
        void *userdata;

        /* The quota settings at creation: later changes apply to later runs. */
        uint64_t output_limit;
        uint64_t workspace_limit;
        EgressEpoch *egress;              /* the policy revision this run uses; NULL = no network */
        char *network;                    /* its revision, kept for the answer and the record */
        ThreadTask *snapshot_task;
        SnapshotJob *snapshot_job;        /* owned; the thread's input while snapshot_task runs */
        char *snapshot;                   /* "sha256:…" of the published tree */
        char *snapshot_error;
        bool snapshot_done;
        QuotaWatch *quota;
        sd_event_source *quota_source;
        uint64_t workspace_bytes;         /* last usage seen (before, during, after the run) */
        bool have_workspace_bytes;

        /* Managed runs: logs on disk (resumable by offset), a record written at start. */
        bool managed;
        int log_fds[_RECORD_STREAM_MAX];
        uint64_t log_bytes[_RECORD_STREAM_MAX];
        bool log_truncated[_RECORD_STREAM_MAX];
        ExecutionWatch *watches;
        sd_event_source *linger_source;
};

struct ExecutionWatch {
        Execution *execution;
        ExecutionWatch *prev, *next;
        void (*cb)(void *userdata);
        void *userdata;
};

static void execution_notify_watches(Execution *e) {
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

static const char *const status_table[_EXECUTION_STATUS_MAX] = {
        [EXECUTION_STATUS_RUNNING] = "running",
        [EXECUTION_STATUS_EXITED] = "exited",
        [EXECUTION_STATUS_SIGNALED] = "signaled",
        [EXECUTION_STATUS_TIMEOUT] = "timeout",
        [EXECUTION_STATUS_MEMORY_LIMIT] = "memory_limit",
        [EXECUTION_STATUS_TASKS_LIMIT] = "tasks_limit",
        [EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED] = "workspace_quota_exceeded",
        [EXECUTION_STATUS_CANCELLED] = "cancelled",
        [EXECUTION_STATUS_INTERRUPTED] = "interrupted",
        [EXECUTION_STATUS_FAILED] = "failed",
};

const char *execution_status_to_string(ExecutionStatus s) {
        if (s < 0 || s >= _EXECUTION_STATUS_MAX)
                return NULL;
        return status_table[s];
}

static const char *const limits_mechanism_table[_LIMITS_MAX] = {
        [LIMITS_SYSTEMD_SCOPE] = "systemd-scope",
        [LIMITS_CGROUP] = "cgroup",
        [LIMITS_RLIMIT] = "rlimit",
};

const char *limits_mechanism_to_string(LimitsMechanism l) {
        return l >= 0 && l < _LIMITS_MAX ? limits_mechanism_table[l] : NULL;
}

static uint64_t now_mono(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static uint64_t now_real(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
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
                .proc = { .keeper_pidfd = -EBADF, .control_fd = -EBADF, .report_fd = -EBADF,
                          .stdout_fd = -EBADF, .stderr_fd = -EBADF },
                .status = EXECUTION_STATUS_RUNNING,
                .kill_reason = EXECUTION_STATUS_RUNNING,
                .log_fds = { -EBADF, -EBADF },
                .created_realtime_usec = now_real(),
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

/*
 * Everything of the sandbox goes: after this no process of the run exists. The keeper (ours,
 * outside the sandbox: bwrap and the whole pid namespace are gone once it reported) is killed and
 * reaped here with @wait. Without: before the exit report it is killed and its exit source reaps
 * it (the finish waits for that); after the report it is left alone until the answer is out
 * (execution_finish()), so that its exit does not compete with the snapshot and the answer.
 */
/* Hand the killed keeper of a finished run to the loop. Return: true if it took it. */
static bool execution_reap_keeper_later(Execution *e) {
        if (!e->keeper_source || e->state != STATE_FINISHED || !e->reported_exit)
                return false;
        if (keeper_reap_add(e->ctx, e->proc.keeper_pid, &e->proc.keeper_pidfd, &e->keeper_source, &e->scope,
                            &e->cgroup) < 0)
                return false;   /* and the caller waits for it */
        e->keeper_gone = true;   /* as far as this execution is concerned */
        return true;
}

static void execution_release_sandbox_full(Execution *e, bool wait) {
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
                 * released after the answer, execution_finish().) */
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
                e->ctx->busy_unref(e->ctx->userdata);
        }
}

static void execution_release_resources(Execution *e) {
        execution_release_resources_full(e, true);
}

Execution *execution_free(Execution *e) {
        ExecutionContext *c;

        if (!e)
                return NULL;
        c = e->ctx;
        execution_release_resources(e);
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
        return e->state == STATE_FINISHED;
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
        if (e->state == STATE_FINISHED) {
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

/* Which limits refused the run anything (a fork, memory), also when the payload survived it:
 * "tasks,memory", "" for none. */
static const char *limits_hit(const Execution *e) {
        bool tasks = e->have_acct && e->acct.tasks_max_hits > 0;
        bool memory = e->have_acct && (e->acct.memory_max_hits > 0 || e->acct.oom_kills > 0);

        return tasks && memory ? "tasks,memory" : tasks ? "tasks" : memory ? "memory" : "";
}

static void log_finished(Execution *e) {
        char peak[32] = "unknown";

        if (e->have_acct && e->acct.memory_peak != UINT64_MAX)
                (void) snprintf(peak, sizeof(peak), "%" PRIu64, e->acct.memory_peak);
        log_struct(e->status == EXECUTION_STATUS_FAILED ? LOG_WARNING : LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_EXECUTION_FINISHED,
                   "SANDBOX_EXECUTION_ID=%s", e->id,
                   "SANDBOX_WORKSPACE=%s", e->req->workspace_id,
                   "SANDBOX_SCOPE=%s", e->unit ?: "",
                   "SANDBOX_STATUS=%s", execution_status_to_string(e->status),
                   "SANDBOX_EXIT_STATUS=%d", e->status == EXECUTION_STATUS_EXITED ? e->exit_code : -1,
                   "SANDBOX_SIGNAL=%d", e->signal,
                   "SANDBOX_DURATION_USEC=%" PRIu64, e->end_usec - e->start_usec,
                   "SANDBOX_MEMORY_PEAK=%s", peak,
                   "SANDBOX_LIMITS_HIT=%s", limits_hit(e),
                   "SANDBOX_CPU_USAGE_NSEC=%" PRIu64, e->have_acct && e->acct.cpu_usage_nsec != UINT64_MAX ? e->acct.cpu_usage_nsec : 0,
                   "SANDBOX_STDOUT_BYTES=%" PRIu64, output_buffer_total(e->out),
                   "SANDBOX_STDERR_BYTES=%" PRIu64, output_buffer_total(e->err),
                   "MESSAGE=Execution '%s' in workspace '%s' finished: %s%s%s.", e->id, e->req->workspace_id,
                   execution_status_to_string(e->status),
                   e->failure_message ? ": " : "", e->failure_message ?: "");
}

#define EXECUTION_LINGER_USEC (600 * USEC_PER_SEC)

static int on_linger(sd_event_source *s, uint64_t usec, void *userdata) {
        execution_free_later(userdata);
        return 0;
}

static void execution_write_record(Execution *e) {
        json_object *o;
        int r;

        if (e->ctx->records_fd < 0)
                return;
        o = execution_record_json_full(e, true);
        if (!o) {
                log_oom();
                return;
        }
        r = record_write_prepared(e->ctx->records_fd, e->id, &e->record_fd, o, e->managed);
        if (r < 0)
                log_warning_errno(r, "Failed to write the record of execution '%s', ignoring: %m", e->id);
        json_object_put(o);
}

static void execution_finish(Execution *e);

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
                e->snapshot_error = strdup(strerror(-error));
        } else {
                e->snapshot = strdup(out);
                e->ctx->snapshot_published(e->ctx->userdata);
        }
        /* @out belongs to the task. */
        e->snapshot_task = thread_task_free(e->snapshot_task);
        snapshot_job_free(e->snapshot_job);
        e->snapshot_job = NULL;
        execution_finish(e);
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
        execution_finish(e);
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

static void execution_finish(Execution *e) {
        bool answer_first;
        int r;

        if (e->state == STATE_FINISHED)
                return;
        if (e->end_usec == 0) {
                e->end_usec = now_mono();
                if (e->start_usec == 0)
                        e->start_usec = e->end_usec;
                /* A last look at the workspace: the run may have reached its quota after the last
                 * tick, or with one file (RLIMIT_FSIZE lets a file grow one byte past the quota,
                 * so that reaching it shows; the writer got SIGXFSZ or EFBIG). */
                if (e->quota && e->reported_exit && e->failure >= 0 && e->kill_reason == EXECUTION_STATUS_RUNNING) {
                        uint64_t bytes;
                        r = quota_watch_tick(e->quota, &bytes);
                        if (r < 0 || execution_quota_exceeded(e, bytes))
                                e->kill_reason = EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED;
                }
                execution_decide_status(e);
        }

        /* The sandbox goes first (no process of the run is left: nothing can still write), then
         * the snapshot is published while we still hold the lease, then the lease goes. After
         * the exit report the sandbox is gone already (the keeper reaped bwrap and its pid 1):
         * the snapshot starts before we kill the keeper, whose exit would otherwise delay it.
         * The keeper is reaped while the snapshot runs; the answer waits for both. */
        if (e->reported_exit && execution_wants_snapshot(e) && !e->snapshot_task) {
                r = execution_snapshot_start(e);
                if (r < 0) {
                        log_warning_errno(r, "Failed to start the snapshot of '%s', ignoring: %m", e->id);
                        e->snapshot_done = true;
                }
        }
        if (!e->reported_exit && execution_wait_init(e))
                return;   /* on_init_gone() comes back here */
        execution_release_sandbox_full(e, false);
        if (execution_wants_snapshot(e)) {
                if (e->snapshot_task)
                        return;   /* in progress */
                r = execution_snapshot_start(e);
                if (r >= 0)
                        return;
                log_warning_errno(r, "Failed to start the snapshot of '%s', ignoring: %m", e->id);
                e->snapshot_done = true;
        }
        if (!e->keeper_gone && e->keeper_source && !e->reported_exit)
                return;   /* on_keeper_exit() comes back here */
        execution_release_resources_full(e, false);
        e->state = STATE_FINISHED;
        /* A synchronous run answers first: the record and the journal entry follow in this very
         * callback, so no other request (the loop is single-threaded) can see the difference,
         * and the answer does not wait for them. Managed runs have readers (log followers,
         * teardowns) who are woken below, and who may read the record: it comes first. */
        answer_first = e->done && !e->managed;
        if (!answer_first) {
                execution_write_record(e);
                log_finished(e);
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
                log_finished(e);
        }
        /* The answer is out: now the keeper goes, reaped by the loop (and with it the scope). */
        if (e->proc.keeper_pid > 0 && !e->keeper_gone && !execution_reap_keeper_later(e))
                (void) kill(e->proc.keeper_pid, SIGKILL);   /* reaped when @e goes */
}

static void execution_fail(Execution *e, int error, const char *fmt, ...) _printf_(3, 4);
static void execution_fail(Execution *e, int error, const char *fmt, ...) {
        va_list ap;

        e->failure = error < 0 ? error : -EIO;
        free(e->failure_message);
        e->failure_message = NULL;
        va_start(ap, fmt);
        if (vasprintf(&e->failure_message, fmt, ap) < 0)
                e->failure_message = NULL;
        va_end(ap);
        execution_finish(e);
}

static void maybe_finish(Execution *e) {
        if (e->state == STATE_FINISHED)
                return;
        if (e->reported_exit && e->stdout_eof && e->stderr_eof)
                execution_finish(e);
        else if (e->keeper_gone && !e->reported_exit)
                /* The keeper died without reporting (killed from outside): the run is over. */
                execution_finish(e);
}

/* ---- I/O and reports ------------------------------------------------------------------------- */

static void execution_log_append(Execution *e, RecordStream s, const char *p, size_t n) {
        uint64_t limit = e->output_limit;

        if (e->log_fds[s] < 0 || e->log_truncated[s])
                return;
        /* The log keeps the first MaxOutputBytes (offsets stay stable for resuming clients);
         * the answer's head+tail view comes from the retention buffer. */
        if (limit > 0 && e->log_bytes[s] + n > limit) {
                n = (size_t) (limit - e->log_bytes[s]);
                e->log_truncated[s] = true;
        }
        while (n > 0) {
                ssize_t k = write(e->log_fds[s], p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        log_warning_errno(errno, "Failed to write the %s log of '%s', ignoring: %m",
                                          record_stream_to_string(s), e->id);
                        e->log_truncated[s] = true;
                        break;
                }
                p += k;
                n -= (size_t) k;
                e->log_bytes[s] += (uint64_t) k;
        }
        execution_notify_watches(e);
}

/* Read what @fd (stdout or stderr) has, up to a few chunks; at EOF, close it and maybe finish. */
static void drain_output(Execution *e, bool is_out, int fd) {
        OutputBuffer *b = is_out ? e->out : e->err;
        char buf[READ_CHUNK];

        for (unsigned i = 0; i < 16; i++) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        if (is_out) {
                                e->stdout_eof = true;
                                e->stdout_source = sd_event_source_disable_unref(e->stdout_source);
                                e->proc.stdout_fd = safe_close(e->proc.stdout_fd);
                        } else {
                                e->stderr_eof = true;
                                e->stderr_source = sd_event_source_disable_unref(e->stderr_source);
                                e->proc.stderr_fd = safe_close(e->proc.stderr_fd);
                        }
                        maybe_finish(e);
                        return;
                }
                if (output_buffer_append(b, buf, (size_t) n) < 0)
                        log_oom();
                if (e->managed)
                        execution_log_append(e, is_out ? RECORD_STREAM_STDOUT : RECORD_STREAM_STDERR, buf, (size_t) n);
        }
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;

        drain_output(e, s == e->stdout_source, fd);
        return 0;
}

static void log_started(Execution *e) {
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_EXECUTION_STARTED,
                   "SANDBOX_EXECUTION_ID=%s", e->id,
                   "SANDBOX_WORKSPACE=%s", e->req->workspace_id,
                   "SANDBOX_SCOPE=%s", e->scope ? scope_name(e->scope) : "",
                   "SANDBOX_PID=%d", (int) e->bwrap_pid,
                   "SANDBOX_TIMEOUT_USEC=%" PRIu64, e->req->timeout_usec,
                   "SANDBOX_MEMORY_MAX=%" PRIu64, e->req->memory_max,
                   "SANDBOX_TASKS_MAX=%" PRIu64, e->req->tasks_max,
                   "MESSAGE=Execution '%s' started in workspace '%s'%s%s.", e->id, e->req->workspace_id,
                   e->scope ? " in " : " without a scope", e->scope ? scope_name(e->scope) : "");
}

static void handle_report_line(Execution *e, const char *line) {
        if (line[0] == 'S') {
                e->bwrap_pid = (pid_t) atoi(line + 1);
                if (e->early)
                        execution_scope_start(e);   /* once the sandbox's pid 1 is known too */
                else {
                        e->state = STATE_RUNNING;
                        log_started(e);
                }
        } else if (line[0] == 'X') {
                e->wait_status = atoi(line + 1);
                e->reported_exit = true;
                e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
                /* The keeper still holds the scope: read what it used now. */
                if (e->scope && scope_read_accounting(e->scope, &e->acct) >= 0)
                        e->have_acct = true;
                else if (e->cgroup && cgroup_read_accounting(e->cgroup, &e->acct) >= 0)
                        e->have_acct = true;
                /* bwrap is gone, and with it every writer of stdout and stderr: what is left in the
                 * pipes is there now, so read it without another trip through the loop. */
                if (!e->stdout_eof && e->proc.stdout_fd >= 0)
                        drain_output(e, true, e->proc.stdout_fd);
                if (!e->stderr_eof && e->proc.stderr_fd >= 0 && e->state != STATE_FINISHED)
                        drain_output(e, false, e->proc.stderr_fd);
                maybe_finish(e);
        }
}

static int on_report(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;
        ssize_t n;

        n = read(fd, e->report_buf + e->report_len, sizeof(e->report_buf) - 1 - e->report_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                e->report_source = sd_event_source_disable_unref(e->report_source);
                e->proc.report_fd = safe_close(e->proc.report_fd);
                return 0;
        }
        e->report_len += (size_t) n;
        e->report_buf[e->report_len] = '\0';
        for (char *nl; (nl = strchr(e->report_buf, '\n')); ) {
                *nl = '\0';
                handle_report_line(e, e->report_buf);
                if (e->state == STATE_FINISHED)
                        return 0;
                e->report_len -= (size_t) (nl + 1 - e->report_buf);
                memmove(e->report_buf, nl + 1, e->report_len + 1);
        }
        if (e->report_len >= sizeof(e->report_buf) - 1)
                e->report_len = 0;
        return 0;
}

/* A keeper that gave up before it started bwrap, with its exit status (src/keeper/keeper.c): why. */
static const char *keeper_exit_why(int status) {
        return status == 120 ? "it refused its job (is sandbox-runner-keeper of another version than the daemon?)" :
               status == 126 ? "it was not started by this daemon" :
                               "it could not set up";
}

/* The keeper exited before it took its job (sandbox_spawn() said -ECHILD): say how, from its exit
 * status, never from what the send happened to see of that. */
static void execution_fail_keeper_gone(Execution *e, const siginfo_t *si) {
        if (si->si_code == CLD_EXITED && si->si_status != 0)
                execution_fail(e, -EPROTO, "the sandbox keeper exited with status %d before starting bwrap: %s",
                               si->si_status, keeper_exit_why(si->si_status));
        else if (si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED)
                execution_fail(e, -ECHILD, "the sandbox keeper was killed by signal %d (%s) before it took its job",
                               si->si_status, strsignal(si->si_status));
        else
                execution_fail(e, -ECHILD, "the sandbox keeper exited before it took its job");
}

static int on_keeper_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
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
        if (e->state == STATE_FINISHED)
                execution_release_sandbox_full(e, false);   /* after the answer: its pidfd, the scope */
        else if (e->end_usec != 0)
                execution_finish(e);    /* it was finishing, and waited for this */
        else
                maybe_finish(e);
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

static void execution_kill(Execution *e, ExecutionStatus reason) {
        if (e->state == STATE_FINISHED || e->end_usec != 0 || e->kill_reason != EXECUTION_STATUS_RUNNING)
                return;   /* finished or finishing (its status is decided): nothing left to kill */
        e->kill_reason = reason;
        if (e->state == STATE_WAITING_LEASE || e->state == STATE_NEW) {
                execution_finish(e);
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

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;

        e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
        execution_kill(e, EXECUTION_STATUS_TIMEOUT);
        return 0;
}

/* ---- launching ------------------------------------------------------------------------------- */

static void go(Execution *e) {
        char g = 'G';

        if (write(e->proc.control_fd, &g, 1) != 1) {
                execution_fail(e, negative_errno(), "the sandbox keeper went away before start");
                return;
        }
        if (e->early) {
                /* bwrap was waiting for its seccomp program: the payload starts now. */
                e->state = STATE_RUNNING;
                log_started(e);
        }
        keeper_pool_refill(e->ctx->keeper_pool);   /* the loop now waits for the run */
}

static void on_scope_started(Scope *s, int error, const char *message, void *userdata) {
        Execution *e = userdata;

        if (error < 0) {
                execution_fail(e, error, "could not create the execution's scope: %s", message ?: "unknown error");
                return;
        }
        if (e->kill_reason != EXECUTION_STATUS_RUNNING)
                return;   /* 'K' was sent already; the keeper exits */
        go(e);
}

#define QUOTA_TICK_USEC (100 * USEC_PER_MSEC)

/* Usage @bytes seen: over the limit? (Then say so in the journal.) */
static bool execution_quota_exceeded(Execution *e, uint64_t bytes) {
        e->workspace_bytes = bytes;
        e->have_workspace_bytes = true;
        if (bytes <= e->workspace_limit)
                return false;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_QUOTA_EXCEEDED,
                   "SANDBOX_EXECUTION_ID=%s", e->id,
                   "SANDBOX_WORKSPACE=%s", e->req->workspace_id,
                   "SANDBOX_WORKSPACE_BYTES=%" PRIu64, bytes,
                   "SANDBOX_WORKSPACE_LIMIT=%" PRIu64, e->workspace_limit,
                   "MESSAGE=Workspace '%s' reached %" PRIu64 " bytes (limit %" PRIu64 "); stopping execution '%s'.",
                   e->req->workspace_id, bytes, e->workspace_limit, e->id);
        return true;
}

static int on_quota_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;
        uint64_t bytes;
        int r;

        r = quota_watch_tick(e->quota, &bytes);
        if (r < 0) {
                /* Fail closed: a workspace we cannot measure (a sandbox hid part of it) is
                 * treated as over its quota. */
                log_warning_errno(r, "Cannot measure workspace '%s' of execution '%s', stopping it: %m",
                                  e->req->workspace_id, e->id);
                e->quota_source = sd_event_source_disable_unref(e->quota_source);
                execution_kill(e, EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED);
                return 0;
        } else {
                if (execution_quota_exceeded(e, bytes)) {
                        e->quota_source = sd_event_source_disable_unref(e->quota_source);
                        execution_kill(e, EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED);
                        return 0;
                }
        }
        r = sd_event_source_set_time_relative(s, QUOTA_TICK_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* Before the run: measure the workspace and keep watching it while the run goes on. */
static int execution_quota_begin(Execution *e) {
        uint64_t bytes;
        int r;

        if (e->workspace_limit == 0)
                return 0;
        e->quota = quota_cache_take(&e->ctx->quota_cache, e->req->workspace_id, e->ws_fd);
        if (!e->quota) {
                r = quota_watch_new(e->ws_fd, &e->quota);
                if (r < 0)
                        return r;
        }
        r = quota_watch_tick(e->quota, &bytes);
        if (r < 0)
                return r;
        e->workspace_bytes = bytes;
        e->have_workspace_bytes = true;
        if (bytes > e->workspace_limit)
                return -EDQUOT;
        return sd_event_add_time_relative(e->ctx->event, &e->quota_source, CLOCK_MONOTONIC, QUOTA_TICK_USEC,
                                          USEC_PER_MSEC, on_quota_tick, e);
}

static const char passwd_data[] = "sandbox:x:1000:1000:sandbox:" SANDBOX_WORKSPACE ":/bin/sh\n";
static const char group_data[] = "sandbox:x:1000:\n";
static const char hosts_data[] = "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\tsandbox\n";

/* The run's limits on the daemon's own cgroup: the keeper's, or a new one it is moved into. */
static int execution_cgroup_setup(Execution *e, pid_t keeper_pid) {
        ScopeLimits limits = {
                .memory_max = e->req->memory_max,
                .tasks_max = e->req->tasks_max > 0 ? e->req->tasks_max + TASKS_OVERHEAD : 0,
                .cpu_quota_percent = e->req->cpu_quota_percent,
        };
        int r;

        if (e->cgroup)
                return cgroup_set_limits(e->cgroup, &limits);
        r = cgroup_new(e->ctx->cgroups, e->id, &limits, &e->cgroup);
        if (r >= 0)
                r = cgroup_attach(e->cgroup, keeper_pid);
        return r;
}

/* The keeper pool's attach hook: a fresh cgroup for a keeper started ahead, while idle. */
void *execution_keeper_attach(pid_t pid, void *userdata) {
        CgroupRoot *root = userdata;
        Cgroup *cg = NULL;
        char name[32];

        /* x-<daemon pid>-k<keeper pid>: whose it is, with other root daemons beside us. */
        (void) snprintf(name, sizeof(name), "%d-k%d", (int) getpid(), (int) pid);
        if (cgroup_new(root, name, NULL, &cg) < 0 || cgroup_attach(cg, pid) < 0) {
                log_debug("Cannot move keeper %d into a cgroup ahead of its run; its run will.", (int) pid);
                return cgroup_free(cg);
        }
        return cg;
}

void execution_keeper_detach(void *attached, void *userdata) {
        cgroup_free(attached);
}

static int execution_launch(Execution *e) {
        ExecutionContext *c = e->ctx;
        _cleanup_close_ int seccomp_fd = -EBADF, passwd_fd = -EBADF, group_fd = -EBADF, hosts_fd = -EBADF;
        _cleanup_close_ int code_fd = -EBADF, stdin_fd = -EBADF;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_free_ char *seccomp_error = NULL, *workspace_path = NULL;
        _cleanup_close_ int info_r = -EBADF, info_w = -EBADF;
        SandboxSpec spec;
        SandboxFds fds;
        SandboxLimits limits;
        int r;

        /* With a scope: start bwrap at once and make the scope meanwhile (sandbox_spawn()). */
        e->early = c->limits == LIMITS_SYSTEMD_SCOPE;

        r = seccomp_program_for_variant(e->egress ? SECCOMP_VARIANT_NETWORK : SECCOMP_VARIANT_BASELINE, &seccomp_fd,
                                        &seccomp_error);
        if (r < 0) {
                execution_fail(e, r, "could not build the seccomp filter: %s", seccomp_error ?: strerror(-r));
                return 0;
        }
        passwd_fd = memfd_new_data("sandbox-passwd", passwd_data, strlen(passwd_data));
        group_fd = memfd_new_data("sandbox-group", group_data, strlen(group_data));
        hosts_fd = memfd_new_data("sandbox-hosts", hosts_data, strlen(hosts_data));
        if (e->req->code)
                code_fd = memfd_new_data("sandbox-code", e->req->code, e->req->code_size);
        stdin_fd = e->req->stdin_data ? memfd_new_data("sandbox-stdin", e->req->stdin_data, e->req->stdin_size)
                                      : open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (passwd_fd < 0 || group_fd < 0 || hosts_fd < 0 || stdin_fd < 0 || (e->req->code && code_fd < 0)) {
                execution_fail(e, -ENOMEM, "could not prepare the sandbox's files");
                return 0;
        }

        if (asprintf(&workspace_path, "%s/workspaces/%s", c->state_dir, e->req->workspace_id) < 0)
                return -ENOMEM;
        spec = (SandboxSpec) {
                .workspace = workspace_path,
                .cwd = e->req->cwd,
                .argv = e->req->argv,
                .env = e->req->env,
                .tmp_size = c->tmp_size,
                .seccomp_fd = SANDBOX_FD_SECCOMP,
                .passwd_fd = SANDBOX_FD_PASSWD,
                .group_fd = SANDBOX_FD_GROUP,
                .hosts_fd = SANDBOX_FD_HOSTS,
                .code_fd = e->req->code ? SANDBOX_FD_CODE : -1,
                .info_fd = SANDBOX_FD_INFO,
                .egress_socket = e->egress ? egress_epoch_socket(e->egress) : NULL,
                .bridge = e->egress ? egress_bridge_path(c->egress) : NULL,
        };
        r = sandbox_argv_build(&spec, c->probe, &argv);
        if (r < 0) {
                execution_fail(e, r, "could not build the sandbox command line");
                return 0;
        }
        {
                int info[2];

                if (pipe2(info, O_CLOEXEC) < 0) {
                        execution_fail(e, negative_errno(), "could not prepare the sandbox's files");
                        return 0;
                }
                info_r = info[0];
                info_w = info[1];
        }
        if (!isempty(e->req->cwd)) {
                /* The working directory must exist in the workspace (bwrap would fail obscurely). */
                struct stat st;
                if (fstatat(e->ws_fd, e->req->cwd, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
                        execution_fail(e, -ENOENT, "cwd '%s' is not a directory in the workspace", e->req->cwd);
                        return 0;
                }
        }

        fds = (SandboxFds) {
                .stdin_fd = stdin_fd, .seccomp_fd = seccomp_fd, .passwd_fd = passwd_fd,
                .group_fd = group_fd, .hosts_fd = hosts_fd, .code_fd = e->req->code ? code_fd : -1,
                .info_fd = info_w,
                .start_now = !e->early,
        };
        limits = (SandboxLimits) {
                .fsize = e->workspace_limit > 0 ? e->workspace_limit + 1 : 0,
                .nofile = 4096,
                /* Without a scope or a cgroup, the address-space limit is the only memory bound we
                 * have, and RLIMIT_NPROC the only tasks bound (over every process of our uid). */
                .as = c->limits == LIMITS_RLIMIT ? e->req->memory_max : 0,
                .nproc = c->limits == LIMITS_RLIMIT && e->req->tasks_max > 0 ? e->req->tasks_max + TASKS_OVERHEAD : 0,
        };
        r = execution_quota_begin(e);
        if (r < 0 && r != -ENOMEM)
                r = -EDQUOT;   /* fail closed, as during the run */
        if (r == -EDQUOT) {
                /* Over the limit before anything ran: the run does not start. */
                e->kill_reason = EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED;
                e->state = STATE_RUNNING;
                execution_finish(e);
                return 0;
        }
        if (r < 0) {
                execution_fail(e, r, "could not measure the workspace: %s", strerror(-r));
                return 0;
        }

        siginfo_t keeper_exit = {};
        for (unsigned attempt = 0;; attempt++) {
                SandboxKeeper keeper = SANDBOX_KEEPER_NULL;
                void *attached = NULL;

                r = c->keeper_pool ? keeper_pool_take_attached(c->keeper_pool, &keeper, &attached) :
                                     sandbox_keeper_start(c->keeper_path, &keeper);
                /* With the daemon's own cgroups the keeper is in one before it has its job, so
                 * that bwrap and all under it start there: a pooled keeper was moved into a
                 * fresh one ahead (execution_keeper_attach()), only the limits are written now. */
                if (r >= 0 && c->limits == LIMITS_CGROUP) {
                        e->cgroup = cgroup_free(e->cgroup);
                        e->cgroup = attached;
                        r = execution_cgroup_setup(e, keeper.pid);
                        if (r < 0) {
                                sandbox_keeper_stop(&keeper);
                                execution_fail(e, r, "could not put the sandbox into its cgroup: %s", strerror(-r));
                                return 0;
                        }
                }
                if (r >= 0)
                        r = sandbox_spawn(c->bwrap, argv, &fds, &limits, &keeper, &e->proc, &keeper_exit);
                /* A keeper that died between our look and the job: once more, with a new one. */
                if (attempt > 0 || r != -ECHILD)
                        break;
                log_debug("Execution '%s': its keeper exited before it took its job (code %d, status %d); "
                          "trying another.", e->id, keeper_exit.si_code, keeper_exit.si_status);
        }
        if (r == -ECHILD) {
                execution_fail_keeper_gone(e, &keeper_exit);
                return 0;
        }
        if (r < 0) {
                execution_fail(e, r, "could not start the sandbox: %s", strerror(-r));
                return 0;
        }
        {
                info_w = safe_close(info_w);
                e->info_fd = STEAL_FD(info_r);
                (void) fd_nonblock(e->info_fd, 1);
                r = sd_event_add_io(c->event, &e->info_source, e->info_fd, EPOLLIN, on_info, e);
                if (r < 0) {
                        execution_fail(e, r, "could not watch the sandbox: %s", strerror(-r));
                        return 0;
                }
        }
        e->start_usec = now_mono();
        e->state = STATE_STARTING;
        if (fds.start_now)
                /* Nothing to wait for but the run: its keeper's replacement, once idle. (With a
                 * scope: after the go, go()). */
                keeper_pool_refill(c->keeper_pool);

        (void) fd_nonblock(e->proc.stdout_fd, 1);
        (void) fd_nonblock(e->proc.stderr_fd, 1);
        (void) fd_nonblock(e->proc.report_fd, 1);
        r = sd_event_add_io(c->event, &e->stdout_source, e->proc.stdout_fd, EPOLLIN, on_output, e);
        if (r >= 0)
                r = sd_event_add_io(c->event, &e->stderr_source, e->proc.stderr_fd, EPOLLIN, on_output, e);
        if (r >= 0)
                r = sd_event_add_io(c->event, &e->report_source, e->proc.report_fd, EPOLLIN, on_report, e);
        if (r >= 0)
                r = sd_event_add_child_pidfd(c->event, &e->keeper_source, e->proc.keeper_pidfd, WEXITED,
                                             on_keeper_exit, e);
        if (r >= 0)
                r = sd_event_add_time_relative(c->event, &e->timeout_source, CLOCK_MONOTONIC,
                                               e->req->timeout_usec, USEC_PER_MSEC, on_timeout, e);
        if (r < 0) {
                execution_fail(e, r, "could not watch the sandbox: %s", strerror(-r));
                return 0;
        }
        (void) sd_event_source_set_description(e->keeper_source, "execution-keeper");

        /* Without a scope the keeper started bwrap at once; with one, the scope starts once bwrap
         * told us its pid and its pid 1's (execution_scope_start()), and 'G' follows. */

        /* The final record's file, now that the sandbox runs (on a busy file system, creating a
         * file can take a millisecond, which would otherwise come after the run). */
        if (c->records_fd >= 0 && e->state != STATE_FINISHED)
                e->record_fd = record_prepare(c->records_fd, e->id);
        /* Likewise the snapshot ref's file. */
        if (c->cas && e->state != STATE_FINISHED)
                e->ref_fd = cas_ref_prepare(c->cas, e->req->workspace_id, e->id);
        return 0;
}

/* Early start: keeper, bwrap and the sandbox's pid 1 into the scope, all in one job. */
static void execution_scope_start(Execution *e) {
        ExecutionContext *c = e->ctx;
        _cleanup_free_ char *description = NULL;
        int r;

        if (!e->early || e->scope || e->bwrap_pid <= 0 || e->init_pid <= 0 ||
            e->kill_reason != EXECUTION_STATUS_RUNNING || e->state == STATE_FINISHED)
                return;
        if (asprintf(&e->unit, SCOPE_PREFIX "%s.scope", e->id) < 0 ||
            asprintf(&description, "sandbox-runner execution %s (workspace %s)", e->id, e->req->workspace_id) < 0) {
                execution_fail(e, -ENOMEM, "out of memory");
                return;
        }
        r = scope_start_pids(c->scopes, e->unit, (pid_t[]) { e->proc.keeper_pid, e->bwrap_pid, e->init_pid }, 3,
                        &(ScopeLimits) {
                                .memory_max = e->req->memory_max,
                                .tasks_max = e->req->tasks_max > 0 ? e->req->tasks_max + TASKS_OVERHEAD : 0,
                                .cpu_quota_percent = e->req->cpu_quota_percent,
                        },
                        description, on_scope_started, e, &e->scope);
        if (r < 0)
                execution_fail(e, r, "could not ask systemd for a scope: %s", strerror(-r));
}

/* bwrap's --info-fd: {"child-pid": N} (N = the sandbox's pid 1, as we see it), then EOF. */
static int on_info(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v;
        ssize_t n;
        int64_t pid;

        n = read(fd, e->info_buf + e->info_len, sizeof(e->info_buf) - 1 - e->info_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0) {
                e->info_len += (size_t) n;
                if (e->info_len < sizeof(e->info_buf) - 1)
                        return 0;
        }
        /* EOF (or more than it ever writes): the whole text is there. */
        e->info_source = sd_event_source_disable_unref(e->info_source);
        e->info_fd = safe_close(e->info_fd);
        if (n < 0 || e->info_len == 0)
                return 0;   /* bwrap failed before it cloned: its exit report follows */
        e->info_buf[e->info_len] = '\0';
        o = json_tokener_parse(e->info_buf);
        if (!o || !json_object_object_get_ex(o, "child-pid", &v) || !json_object_is_type(v, json_type_int) ||
            (pid = json_object_get_int64(v)) <= 1 || pid > INT32_MAX) {
                execution_fail(e, -EPROTO, "bwrap's --info-fd output is not the expected {\"child-pid\": N}");
                return 0;
        }
        e->init_pid = (pid_t) pid;
        e->init_pidfd = sandbox_pidfd_of_child(e->init_pid, e->proc.keeper_pid);
        execution_scope_start(e);
        return 0;
}

static int try_lease(Execution *e) {
        struct stat a, b;
        int fd;

        fd = workspace_lease_try(e->ws_fd);
        if (fd == -EWOULDBLOCK)
                return 0;
        /* A restore swaps the workspace directory for a new one: the lease must be on the
         * directory that the name refers to now, else take it again on that one. */
        if (fd >= 0 && fstat(e->ws_fd, &a) >= 0 &&
            (fstatat(e->ctx->workspaces_fd, e->req->workspace_id, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
             a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
                safe_close(fd);
                e->ws_fd = safe_close(e->ws_fd);
                e->ws_fd = workspace_open(e->ctx->workspaces_fd, e->req->workspace_id);
                if (e->ws_fd < 0) {
                        execution_fail(e, e->ws_fd, "could not open workspace '%s'", e->req->workspace_id);
                        return -1;
                }
                return 0;   /* retried by the lease timer */
        }
        if (fd < 0) {
                execution_fail(e, fd, "could not take the workspace lease: %s", strerror(-fd));
                return -1;
        }
        e->lease_fd = fd;
        e->lease_source = sd_event_source_disable_unref(e->lease_source);
        return 1;
}

static int on_lease_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;
        int r;

        r = try_lease(e);
        if (r == 0)
                return sd_event_source_set_time_relative(s, LEASE_RETRY_USEC) >= 0 ?
                        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) : 0;
        if (r > 0 && execution_launch(e) < 0)
                execution_fail(e, -ENOMEM, "out of memory");
        return 0;
}

int execution_start(Execution *e, ExecutionDoneFn done, void *userdata) {
        ExecutionContext *c = e->ctx;
        int r;

        e->done = done;
        e->userdata = userdata;
        e->busy_ref = true;
        c->n_running++;
        c->n_total++;
        c->busy_ref(c->userdata);

        if (e->managed && c->records_fd >= 0) {
                /* Logs exist from the start (empty while the run waits for the lease), and the
                 * record is durable before the run: a daemon that dies leaves a record that the
                 * next start marks 'interrupted'. */
                for (int s = 0; s < _RECORD_STREAM_MAX; s++) {
                        e->log_fds[s] = record_log_create(c->records_fd, e->id, (RecordStream) s);
                        if (e->log_fds[s] < 0) {
                                execution_fail(e, e->log_fds[s], "could not create the execution's logs");
                                return 0;
                        }
                }
                execution_write_record(e);
        }

        /* The permission epoch: the network policy in force now, kept for the whole run. */
        {
                const char *reason = NULL;
                int k = egress_epoch_acquire(c->egress, &e->egress, &reason);
                if (k < 0) {
                        execution_fail(e, k, "egress is configured but cannot work: %s", reason ?: strerror(-k));
                        return 0;
                }
                if (e->egress)
                        e->network = strdup(egress_epoch_revision(e->egress));
        }

        e->ws_fd = workspace_open(c->workspaces_fd, e->req->workspace_id);
        if (e->ws_fd < 0) {
                execution_fail(e, e->ws_fd, "could not open workspace '%s': %s", e->req->workspace_id,
                               strerror(-e->ws_fd));
                return 0;
        }

        r = try_lease(e);
        if (r < 0)
                return 0;
        if (r == 0) {
                /* Another writer holds it (here or in another process): poll until it is ours. */
                e->state = STATE_WAITING_LEASE;
                r = sd_event_add_time_relative(c->event, &e->lease_source, CLOCK_MONOTONIC, LEASE_RETRY_USEC,
                                               USEC_PER_MSEC, on_lease_retry, e);
                if (r < 0)
                        execution_fail(e, r, "could not wait for the workspace lease");
                return 0;
        }
        r = execution_launch(e);
        if (r < 0)
                execution_fail(e, r, "out of memory");
        return 0;
}

/* ---- the answer ------------------------------------------------------------------------------ */

static json_object *json_u64(uint64_t v) {
        return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v);
}

static int add_output(json_object *o, const char *name, const OutputBuffer *b) {
        _cleanup_free_ char *text = NULL, *k_enc = NULL, *k_bytes = NULL, *k_trunc = NULL;
        const char *encoding;
        size_t size;
        int r;

        r = output_buffer_render_text(b, &text, &size, &encoding);
        if (r < 0)
                return r;
        if (asprintf(&k_enc, "%sEncoding", name) < 0 || asprintf(&k_bytes, "%sBytes", name) < 0 ||
            asprintf(&k_trunc, "%sTruncated", name) < 0)
                return -ENOMEM;
        json_object_object_add(o, name, json_object_new_string_len(text, (int) size));
        json_object_object_add(o, k_enc, json_object_new_string(encoding));
        json_object_object_add(o, k_bytes, json_u64(output_buffer_total(b)));
        json_object_object_add(o, k_trunc, json_object_new_boolean(output_buffer_truncated(b)));
        return 0;
}

json_object *execution_record_json(const Execution *e) {
        return execution_record_json_full(e, false);
}

json_object *execution_record_json_full(const Execution *e, bool for_disk) {
        json_object *o = execution_to_json(e);
        bool finished = e->state == STATE_FINISHED;

        if (!o)
                return NULL;
        json_object_object_add(o, "state", json_object_new_string(
                        finished ? execution_status_to_string(e->status) : "running"));
        json_object_object_add(o, "kind", json_object_new_string(e->managed ? "managed" : "synchronous"));
        if (!finished && for_disk) {
                /* Who runs it: recovery leaves the runs of a live daemon (same state directory) alone. */
                json_object_object_add(o, "daemonPid", json_object_new_int((int) getpid()));
                json_object_object_add(o, "daemonStartTime", json_u64(process_start_time(getpid())));
        }
        json_object_object_add(o, "createdAt", json_u64(e->created_realtime_usec / 1000));
        if (e->managed) {
                json_object *logs = json_object_new_object();
                for (int s = 0; s < _RECORD_STREAM_MAX; s++) {
                        json_object *l = json_object_new_object();
                        json_object_object_add(l, "bytes", json_u64(e->log_bytes[s]));
                        json_object_object_add(l, "truncated", json_object_new_boolean(e->log_truncated[s]));
                        json_object_object_add(logs, record_stream_to_string((RecordStream) s), l);
                }
                json_object_object_add(o, "logs", logs);
        }
        return o;
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

json_object *execution_to_json(const Execution *e) {
        json_object *o = json_object_new_object(), *res, *lim;
        bool finished = e->state == STATE_FINISHED;

        if (!o)
                return NULL;
        json_object_object_add(o, "executionId", json_object_new_string(e->id));
        json_object_object_add(o, "workspaceId", json_object_new_string(e->req->workspace_id));
        json_object_object_add(o, "status", json_object_new_string(
                        finished ? execution_status_to_string(e->status) : "running"));
        if (finished && e->status == EXECUTION_STATUS_EXITED)
                json_object_object_add(o, "exitCode", json_object_new_int(e->exit_code));
        else
                json_object_object_add(o, "exitCode", NULL);
        json_object_object_add(o, "signal", e->signal > 0 ? json_object_new_int(e->signal) : NULL);
        if (add_output(o, "stdout", e->out) < 0 || add_output(o, "stderr", e->err) < 0) {
                json_object_put(o);
                return NULL;
        }
        json_object_object_add(o, "durationMs",
                               json_u64(((finished ? e->end_usec : now_mono()) - (e->start_usec ?: now_mono())) / 1000));

        res = json_object_new_object();
        if (e->have_acct && e->acct.memory_peak != UINT64_MAX)
                json_object_object_add(res, "memoryPeakBytes", json_u64(e->acct.memory_peak));
        else
                json_object_object_add(res, "memoryPeakBytes", NULL);
        if (e->have_acct && e->acct.cpu_usage_nsec != UINT64_MAX)
                json_object_object_add(res, "cpuUsageNsec", json_u64(e->acct.cpu_usage_nsec));
        else
                json_object_object_add(res, "cpuUsageNsec", NULL);
        if (e->have_acct && e->acct.tasks_peak != UINT64_MAX)
                json_object_object_add(res, "tasksPeak", json_u64(e->acct.tasks_peak));
        else
                json_object_object_add(res, "tasksPeak", NULL);
        {
                json_object *hit = json_object_new_array();
                const char *h = limits_hit(e);
                if (strstr(h, "tasks"))
                        json_object_array_add(hit, json_object_new_string("tasks"));
                if (strstr(h, "memory"))
                        json_object_array_add(hit, json_object_new_string("memory"));
                json_object_object_add(res, "limitsHit", hit);
        }
        json_object_object_add(o, "resources", res);

        if (e->workspace_limit > 0 || e->have_workspace_bytes) {
                json_object *w = json_object_new_object();
                json_object_object_add(w, "limitBytes", json_u64(e->workspace_limit));
                json_object_object_add(w, "usedBytes", e->have_workspace_bytes ? json_u64(e->workspace_bytes) : NULL);
                json_object_object_add(o, "workspaceQuota", w);
        }

        lim = json_object_new_object();
        json_object_object_add(lim, "timeoutMs", json_u64(e->req->timeout_usec / 1000));
        json_object_object_add(lim, "memoryBytes", json_u64(e->req->memory_max));
        /* With rlimits only, no CPU bound: say so. */
        json_object_object_add(lim, "tasks", json_u64(e->req->tasks_max));
        json_object_object_add(lim, "cpuPercent", e->ctx->limits != LIMITS_RLIMIT ?
                               json_u64(e->req->cpu_quota_percent) : NULL);
        json_object_object_add(lim, "enforcedBy", json_object_new_string(
                        e->ctx->limits == LIMITS_SYSTEMD_SCOPE ? "scope" :
                        e->ctx->limits == LIMITS_CGROUP ? "cgroup" : "rlimit"));
        json_object_object_add(o, "limits", lim);
        json_object_object_add(o, "network", json_object_new_string(e->network ?: "none"));
        if (e->failure < 0 && e->failure_message)
                json_object_object_add(o, "error", json_object_new_string(e->failure_message));
        if (finished)
                json_object_object_add(o, "snapshot", e->snapshot ? json_object_new_string(e->snapshot) : NULL);
        if (e->snapshot_error)
                json_object_object_add(o, "snapshotError", json_object_new_string(e->snapshot_error));
        return o;
}

void execution_context_done(ExecutionContext *c) {
        while (c->executions)
                execution_free(c->executions);
        keeper_reaps_flush(c);
        quota_cache_flush(&c->quota_cache);
}
