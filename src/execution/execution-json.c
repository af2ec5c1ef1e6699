/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What is said of an execution: its answer (API.md), its record (records.h), its journal entry
 * when finished, and the names of its statuses and limits mechanisms. Reads the execution, writes
 * nothing of it; calls records.h, output-buffer.h and util/.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execution/execution-internal.h"
#include "execution/execution.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/string-table.h"

static const char *const execution_status_table[_EXECUTION_STATUS_MAX] = {
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

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(execution_status, ExecutionStatus)

static const char *const limits_mechanism_table[_LIMITS_MAX] = {
        [LIMITS_SYSTEMD_SCOPE] = "systemd-scope",
        [LIMITS_CGROUP] = "cgroup",
        [LIMITS_RLIMIT] = "rlimit",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(limits_mechanism, LimitsMechanism)

/* Which limits refused the run anything (a fork, memory), also when the payload survived it:
 * "tasks,memory", "" for none. */
static const char *limits_hit(const Execution *e) {
        bool tasks = e->have_acct && e->acct.tasks_max_hits > 0;
        bool memory = e->have_acct && (e->acct.memory_max_hits > 0 || e->acct.oom_kills > 0);

        return tasks && memory ? "tasks,memory" : tasks ? "tasks" : memory ? "memory" : "";
}

void execution_log_finished(Execution *e) {
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
                   "SANDBOX_ENVIRONMENT=%s", e->env.hold ? e->env.name : "",
                   "SANDBOX_ENVIRONMENT_REVISION=%u", e->env.hold ? e->env.revision : 0,
                   "MESSAGE=Execution '%s' in workspace '%s' finished: %s%s%s.", e->id, e->req->workspace_id,
                   execution_status_to_string(e->status),
                   e->failure_message ? ": " : "", e->failure_message ?: "");
}

void execution_write_record(Execution *e) {
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
        json_object_object_add(o, k_bytes, json_new_u64(output_buffer_total(b)));
        json_object_object_add(o, k_trunc, json_object_new_boolean(output_buffer_truncated(b)));
        return 0;
}

json_object *execution_record_json(const Execution *e) {
        return execution_record_json_full(e, false);
}

json_object *execution_record_json_full(const Execution *e, bool for_disk) {
        json_object *o = execution_to_json(e);
        bool finished = e->phase == EXECUTION_DONE;

        if (!o)
                return NULL;
        json_object_object_add(o, "state", json_object_new_string(
                        finished ? execution_status_to_string(e->status) : "running"));
        json_object_object_add(o, "kind", json_object_new_string(e->managed ? "managed" : "synchronous"));
        if (!finished && for_disk) {
                /* Who runs it: recovery leaves the runs of a live daemon (same state directory) alone. */
                json_object_object_add(o, "daemonPid", json_object_new_int((int) getpid()));
                json_object_object_add(o, "daemonStartTime", json_new_u64(process_start_time(getpid())));
        }
        json_object_object_add(o, "createdAt", json_new_u64(e->created_realtime_usec / 1000));
        if (e->managed) {
                json_object *logs = json_object_new_object();
                for (int s = 0; s < _RECORD_STREAM_MAX; s++) {
                        json_object *l = json_object_new_object();
                        json_object_object_add(l, "bytes", json_new_u64(e->log_bytes[s]));
                        json_object_object_add(l, "truncated", json_object_new_boolean(e->log_truncated[s]));
                        /* What the log keeps (its budget; 0: all). */
                        json_object_object_add(l, "limitBytes", json_new_u64(e->output_limit));
                        json_object_object_add(logs, record_stream_to_string((RecordStream) s), l);
                }
                json_object_object_add(o, "logs", logs);
        }
        return o;
}

ExecutionStatus execution_status(const Execution *e) {
        return e->status;
}

pid_t execution_sandbox_pid(const Execution *e) {
        return e->init_pidfd >= 0 && e->phase != EXECUTION_DONE ? e->init_pid : 0;
}

json_object *execution_to_json(const Execution *e) {
        json_object *o = json_object_new_object(), *res, *lim;
        bool finished = e->phase == EXECUTION_DONE;

        if (!o)
                return NULL;
        json_object_object_add(o, "executionId", json_object_new_string(e->id));
        json_object_object_add(o, "workspaceId", json_object_new_string(e->req->workspace_id));
        if (e->env.hold) {
                json_object *env = json_object_new_object();
                if (env) {
                        json_object_object_add(env, "name", json_object_new_string(e->env.name));
                        json_object_object_add(env, "revision", json_object_new_int64(e->env.revision));
                }
                json_object_object_add(o, "environment", env);
        }
        if (e->req->n_npu_chips > 0) {
                json_object *npu = json_object_new_object(), *chips = json_object_new_array();
                for (size_t i = 0; chips && i < e->req->n_npu_chips; i++)
                        json_object_array_add(chips, json_object_new_int64(e->req->npu_chips[i]));
                if (npu)
                        json_object_object_add(npu, "chips", chips);
                else
                        json_object_put(chips);
                json_object_object_add(o, "npu", npu);
        }
        if (e->req->devices) {
                json_object *devices = json_object_new_array();
                for (char **d = e->req->devices; devices && *d; d++)
                        json_object_array_add(devices, json_object_new_string(*d));
                json_object_object_add(o, "devices", devices);
        }
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
                               json_new_u64(((finished ? e->end_usec : now_usec(CLOCK_MONOTONIC)) - (e->start_usec ?: now_usec(CLOCK_MONOTONIC))) / 1000));

        res = json_object_new_object();
        if (e->have_acct && e->acct.memory_peak != UINT64_MAX)
                json_object_object_add(res, "memoryPeakBytes", json_new_u64(e->acct.memory_peak));
        else
                json_object_object_add(res, "memoryPeakBytes", NULL);
        if (e->have_acct && e->acct.cpu_usage_nsec != UINT64_MAX)
                json_object_object_add(res, "cpuUsageNsec", json_new_u64(e->acct.cpu_usage_nsec));
        else
                json_object_object_add(res, "cpuUsageNsec", NULL);
        if (e->have_acct && e->acct.tasks_peak != UINT64_MAX)
                json_object_object_add(res, "tasksPeak", json_new_u64(e->acct.tasks_peak));
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
                json_object_object_add(w, "limitBytes", json_new_u64(e->workspace_limit));
                json_object_object_add(w, "usedBytes", e->have_workspace_bytes ? json_new_u64(e->workspace_bytes) : NULL);
                json_object_object_add(o, "workspaceQuota", w);
        }

        lim = json_object_new_object();
        json_object_object_add(lim, "timeoutMs", json_new_u64(e->req->timeout_usec / 1000));
        json_object_object_add(lim, "memoryBytes", json_new_u64(e->req->memory_max));
        /* With rlimits only, no CPU bound: say so. */
        json_object_object_add(lim, "tasks", json_new_u64(e->req->tasks_max));
        json_object_object_add(lim, "cpuPercent", e->ctx->limits != LIMITS_RLIMIT ?
                               json_new_u64(e->req->cpu_quota_percent) : NULL);
        json_object_object_add(lim, "enforcedBy", json_object_new_string(
                        e->ctx->limits == LIMITS_SYSTEMD_SCOPE ? "scope" :
                        e->ctx->limits == LIMITS_CGROUP ? "cgroup" : "rlimit"));
        /* The run's scope: sandbox-runner-x-<id>.scope, or the one its sandbox was built in. */
        if (e->unit)
                json_object_object_add(lim, "scope", json_object_new_string(e->unit));
        json_object_object_add(o, "limits", lim);
        json_object_object_add(o, "network", json_object_new_string(e->network ?: "none"));
        /* Which path served it: a sandbox built ahead, or one built for it (once launched). */
        if (e->bwrap_pid > 0)
                json_object_object_add(o, "sandbox", json_object_new_string(e->prebuilt ? "prebuilt" : "cold"));
        if (e->network_open)
                json_object_object_add(o, "networkMode", json_object_new_string("open"));
        if (e->failure < 0 && e->failure_message)
                json_object_object_add(o, "error", json_object_new_string(e->failure_message));
        if (finished)
                json_object_object_add(o, "snapshot", e->snapshot ? json_object_new_string(e->snapshot) : NULL);
        if (e->snapshot_error)
                json_object_object_add(o, "snapshotError", json_object_new_string(e->snapshot_error));
        return o;
}
