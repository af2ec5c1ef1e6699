/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's NPU routes (notes §9) on our chips and host NPU broker
 * (docs/npu.md): their NpuInventory from our probed chips, their workload descriptors from our
 * allowlist, their NpuJob from our broker's jobs (npu-jobs.h) plus what only they send (inputs,
 * environmentRevisionId, workspaceRoot), kept beside in <state>/sciencediscovery/npu-jobs/<id>.json.
 * A job's files are those of the runner workspace their runnerWorkspaceKey names; its end commits
 * that workspace's tree to our snapshot store (revision sd-npu-<id>, as an upload's). /health's
 * npuBroker, /status's npuJobs (every session's active jobs) and /resources' npu (the inventory).
 * May call core/, npu/ and the http/ transport.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-internal.h"
#include "core/manager.h"
#include "core/snapshot-gc.h"
#include "execution/execution.h"
#include "http/http-server.h"
#include "npu/npu-broker.h"
#include "npu/npu-jobs.h"
#include "npu/npu-manager.h"
#include "util/child-task.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"
#include "workspace/workspace.h"

#define SDP_NPU_LOG_MAX (256U * 1024U)   /* the log an NpuJob carries: its first 256 KiB */


static bool broker_ready(Manager *m, HttpRequest *req) {
        if (m->broker)
                return true;
        sdp_reply_error(req, 400, "%s", !m->config.npu_broker ? "NPU broker is not enabled on this runner"
                                        : m->broker_error ?: "NPU broker is unavailable");
        return false;
}

/* ---- their fields of a job, beside ours --------------------------------------------------------- */

static char *extras_path(Manager *m, const char *id) {
        char *p;

        return asprintf(&p, "%s/sciencediscovery/npu-jobs/%s.json", m->state_dir, id) < 0 ? NULL : p;
}

static int extras_write(Manager *m, const char *id, json_object *o) {
        _cleanup_free_ char *top = NULL, *dir = NULL, *path = extras_path(m, id), *tmp = NULL;

        if (!path || asprintf(&top, "%s/sciencediscovery", m->state_dir) < 0 ||
            asprintf(&dir, "%s/npu-jobs", top) < 0 || asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        if ((mkdir(top, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
                return negative_errno();
        if (json_object_to_file_ext(tmp, o, JSON_C_TO_STRING_PLAIN) < 0 || rename(tmp, path) < 0) {
                int r = errno > 0 ? -errno : -EIO;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static json_object *extras_read(Manager *m, const char *id) {
        _cleanup_free_ char *path = extras_path(m, id);

        return path && access(path, F_OK) == 0 ? json_object_from_file(path) : NULL;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

static const char *their_state(NpuJobState s) {
        switch (s) {
        case NPU_JOB_QUEUED:
                return "queued";
        case NPU_JOB_RUNNING:
                return "running";
        case NPU_JOB_SUCCEEDED:
                return "succeeded";
        case NPU_JOB_CANCELLED:
                return "cancelled";
        case NPU_JOB_FAILED:
        case NPU_JOB_INTERRUPTED:
        case _NPU_JOB_STATE_MAX:
        case _NPU_JOB_STATE_INVALID:
        default:
                return "failed";
        }
}

static json_object *logs_json(Manager *m, const NpuJob *j, bool summary) {
        _cleanup_(npu_job_log_chunk_done) NpuJobLogChunk chunk = {};
        json_object *o = json_object_new_object();
        bool truncated = false;

        if (!o)
                return NULL;
        /* Our log holds both streams as they came: all of it is "stdout". */
        if (!summary && npu_jobs_read_log(npu_broker_jobs_fd(m->broker), j->id, j->session_id, 0, SDP_NPU_LOG_MAX,
                                          &chunk) >= 0)
                truncated = chunk.size >= SDP_NPU_LOG_MAX;
        json_object_object_add(o, "stdout", sdp_lossy_string(chunk.data ?: "", chunk.size));
        json_object_object_add(o, "stderr", json_object_new_string(""));
        json_object_object_add(o, "truncated", json_object_new_boolean(truncated));
        return o;
}

/* Their NpuJob of our job @j; @summary: as their lists give it (no logs, workspaceRoot ""). */
static json_object *job_json(Manager *m, const NpuJob *j, bool summary) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *x = extras_read(m, j->id);
        uint64_t later = MAX(j->started_ms, j->finished_ms), updated = MAX(j->created_ms, later);
        json_object *v;
        char when[32];

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_string(j->id));
        json_object_object_add(o, "sessionId", json_object_new_string(j->session_id));
        json_object_object_add(o, "workloadId", json_object_new_string(j->workload_id));
        json_object_object_add(o, "state", json_object_new_string(their_state(j->state)));
        json_object_object_add(o, "inputs", x && json_object_object_get_ex(x, "inputs", &v) ?
                               json_object_get(v) : json_object_new_object());
        json_object_object_add(o, "logs", logs_json(m, j, summary));
        json_object_object_add(o, "createdAt", json_object_new_string(sdp_iso_time(j->created_ms, when)));
        json_object_object_add(o, "updatedAt", json_object_new_string(sdp_iso_time(updated, when)));
        if (j->started_ms > 0)
                json_object_object_add(o, "startedAt", json_object_new_string(sdp_iso_time(j->started_ms, when)));
        if (j->finished_ms > 0)
                json_object_object_add(o, "finishedAt", json_object_new_string(sdp_iso_time(j->finished_ms, when)));
        if (npu_job_state_is_final(j->state) && j->exit_code >= 0)
                json_object_object_add(o, "exitCode", json_object_new_int(j->exit_code));
        if (j->error || j->state == NPU_JOB_INTERRUPTED)
                json_object_object_add(o, "error", json_object_new_string(
                                               j->error ?: "interrupted: the runner restarted while the job was active"));
        if (json_get_string(x, "environmentRevisionId"))
                json_object_object_add(o, "environmentRevisionId", json_object_new_string(json_get_string(x, "environmentRevisionId")));
        json_object_object_add(o, "workspaceRoot", json_object_new_string(summary ? "" : json_get_string(x, "workspaceRoot") ?: ""));
        return STEAL(o);
}

static json_object *workloads_json(Manager *m) {
        _cleanup_(json_object_putp) json_object *ours = m->broker ? npu_broker_workloads_json(m->broker) : NULL;
        json_object *a = json_object_new_array(), *l;

        if (!a || !ours || !json_object_object_get_ex(ours, "workloads", &l))
                return a;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *w = json_object_array_get_idx(l, i), *d = json_object_new_object(), *v;

                if (!d)
                        continue;
                json_object_object_add(d, "id", json_object_new_string(json_get_string(w, "id") ?: ""));
                json_object_object_add(d, "label", json_object_new_string(json_get_string(w, "id") ?: ""));
                json_object_object_add(d, "description", json_object_new_string(json_get_string(w, "description") ?: ""));
                json_object_object_add(d, "phase", json_object_new_string("available"));
                if (json_object_object_get_ex(w, "inputs", &v) && json_object_array_length(v) > 0)
                        json_object_object_add(d, "requiredInputs", json_object_get(v));
                json_object_object_add(d, "requiresEnvironmentRevision", json_object_new_boolean(false));
                json_object_array_add(a, d);
        }
        return a;
}

json_object *sdp_npu_health(Manager *m) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "enabled", json_object_new_boolean(!!m->broker));
        json_object_object_add(o, "queueConcurrency", json_object_new_int(1));
        json_object_object_add(o, "workloads", workloads_json(m));
        return o;
}

/* ---- a job's end: its workspace's tree, committed ------------------------------------------------ */

typedef struct NpuCommit {
        Manager *m;
        char ws[129];
        char exec_id[64];               /* the revision's ref name: sd-npu-<jobId> */
        int ws_fd;
        ChildTask *task;
        void (*done)(void *token);
        void *token;
} NpuCommit;

static void commit_free(NpuCommit *c) {
        c->task = child_task_free(c->task);
        safe_close(c->ws_fd);
        free(c);
}

static int commit_child(int out_fd, void *userdata) {
        NpuCommit *c = userdata;
        _cleanup_free_ char *digest = NULL;
        int r;

        r = cas_snapshot(c->m->cas, c->ws_fd, c->ws, c->exec_id, now_usec(CLOCK_REALTIME) / 1000, &digest, NULL);
        if (r < 0)
                return r;
        return loop_write(out_fd, digest, strlen(digest));
}

/* As an upload's: the new head is what the next run's createdFiles/modifiedFiles compare with. */
static void on_commit_done(ChildTask *t, int error, const char *out, void *userdata) {
        NpuCommit *c = userdata;
        void (*done)(void *token) = c->done;
        void *token = c->token;

        c->task = child_task_free(c->task);
        if (error < 0) {
                log_warning_errno(error, "Failed to snapshot workspace '%s' after NPU job %s: %m", c->ws, c->exec_id + 7);
                workspace_heads_forget(&c->m->exec.heads, c->ws);
        } else {
                if (out && strneq(out, "sha256:", 7))
                        (void) workspace_heads_publish(&c->m->exec.heads, c->ws, c->exec_id, out);
                else
                        workspace_heads_forget(&c->m->exec.heads, c->ws);
                snapshot_gc_published(c->m->gc);
        }
        commit_free(c);
        done(token);
}

static void commit_abort(void *handle) {
        NpuCommit *c = handle;

        workspace_heads_forget(&c->m->exec.heads, c->ws);      /* its ref may be written or not */
        commit_free(c);
}

/* The broker's job of @id ended, under the lease of @ws: commit that tree off the loop. */
static int commit_start(const char *id, const char *ws, void (*done)(void *token), void *token, void *userdata,
                        void **ret_handle) {
        Manager *m = userdata;
        NpuCommit *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        *c = (NpuCommit) { .m = m, .done = done, .token = token };
        (void) snprintf(c->ws, sizeof(c->ws), "%s", ws);
        (void) snprintf(c->exec_id, sizeof(c->exec_id), "sd-npu-%s", id);
        c->ws_fd = workspace_open(m->workspaces_fd, ws);
        r = c->ws_fd < 0 ? c->ws_fd : child_task_start(m->event, commit_child, on_commit_done, c, &c->task);
        if (r < 0) {
                log_warning_errno(r, "Failed to snapshot workspace '%s' after NPU job %s: %m", ws, id);
                workspace_heads_forget(&m->exec.heads, ws);
                commit_free(c);
                return r;
        }
        *ret_handle = c;
        return 0;
}

/* ---- routes ---------------------------------------------------------------------------------- */

json_object *sdp_npu_inventory(Manager *m) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *ours = NULL;
        json_object *devices = json_object_new_array(), *chips;
        const char *phase;
        char when[32];

        if (!o || !devices) {
                json_object_put(devices);
                return NULL;
        }
        json_object_object_add(o, "capturedAt", json_object_new_string(
                                       sdp_iso_time(now_usec(CLOCK_REALTIME) / 1000, when)));
        json_object_object_add(o, "devices", devices);
        ours = m->npu ? npu_manager_chips_json(m->npu) : NULL;
        if (!ours) {
                json_object_object_add(o, "supported", json_object_new_boolean(false));
                json_object_object_add(o, "error", json_object_new_string(
                                               !m->config.npu_enable ? "NPU devices are not enabled on this runner"
                                               : m->npu_error ?: "NPU devices are unavailable"));
                return STEAL(o);
        }
        /* Our chips are probed at start-up and each again before it is used (refresh=1 is that
         * same inventory: a card's state shows in health and sandboxUsable). */
        phase = json_get_string(ours, "phase") ?: "";
        json_object_object_add(o, "supported", json_object_new_boolean(!streq(phase, "failed")));
        if (json_object_object_get_ex(ours, "chips", &chips))
                for (size_t i = 0; i < json_object_array_length(chips); i++) {
                        json_object *c = json_object_array_get_idx(chips, i), *d = json_object_new_object(), *v;
                        bool usable = json_object_object_get_ex(c, "selectable", &v) && json_object_get_boolean(v);

                        if (!d)
                                continue;
                        json_object_object_add(d, "hostIndex", json_object_object_get_ex(c, "id", &v) ?
                                               json_object_get(v) : json_object_new_int(0));
                        json_object_object_add(d, "chipName", json_object_new_string(json_get_string(c, "name") ?: ""));
                        json_object_object_add(d, "health", json_object_new_string(json_get_string(c, "health") ?: "UNKNOWN"));
                        json_object_object_add(d, "sandboxUsable", json_object_new_boolean(usable));
                        if (!usable && json_get_string(c, "reason"))
                                json_object_object_add(d, "sandboxUnusableReason", json_object_new_string(json_get_string(c, "reason")));
                        json_object_array_add(devices, d);
                }
        if (json_get_string(ours, "error"))
                json_object_object_add(o, "error", json_object_new_string(json_get_string(ours, "error")));
        return STEAL(o);
}

void sdp_npu_devices(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = sdp_npu_inventory(m);

        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, o);
}

json_object *sdp_npu_active_jobs(Manager *m) {
        json_object *a = json_object_new_array();
        NpuJob **jobs = NULL;
        size_t n = 0;

        /* As their runner's: every session's job summaries, those queued or running only. */
        if (!a || !m->broker || npu_jobs_list(npu_broker_jobs_fd(m->broker), NULL, &jobs, &n) < 0)
                return a;
        for (size_t i = 0; i < n; i++)
                if (!npu_job_state_is_final(jobs[i]->state))
                        json_object_array_add(a, job_json(m, jobs[i], true));
        npu_job_list_free(jobs, n);
        return a;
}

void sdp_npu_workloads(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *a = NULL;

        if (!broker_ready(m, req))
                return;
        a = workloads_json(m);
        if (!a)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, a);
}

static const char *query_session(HttpRequest *req) {
        return http_request_query(req, "session_id") ?: http_request_query(req, "sessionId");
}

void sdp_npu_jobs_list(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *a = NULL;
        const char *session = query_session(req);
        NpuJob **jobs = NULL;
        size_t n = 0;
        int r;

        if (!broker_ready(m, req))
                return;
        if (!session || !npu_session_id_valid(session))
                return sdp_reply_error(req, 400, "session_id is required");
        r = npu_jobs_list(npu_broker_jobs_fd(m->broker), session, &jobs, &n);
        if (r < 0)
                return sdp_reply_error(req, 500, "NPU jobs cannot be listed: %s", strerror(-r));
        a = json_object_new_array();
        for (size_t i = 0; a && i < n; i++)
                json_object_array_add(a, job_json(m, jobs[i], true));
        npu_job_list_free(jobs, n);
        if (!a)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, a);
}

/* The job of the path for @session: loaded, or the 400 (another session) or 404 is sent. */
static NpuJob *owned_job(Manager *m, HttpRequest *req, const char *p, size_t len, const char *session) {
        char id[NPU_JOB_ID_LEN + 1];
        NpuJob *j = NULL;

        if (!session || !npu_session_id_valid(session)) {
                sdp_reply_error(req, 400, "session_id is required");
                return NULL;
        }
        if (len != NPU_JOB_ID_LEN) {
                sdp_reply_error(req, 404, "NPU job not found");
                return NULL;
        }
        memcpy(id, p, len);
        id[len] = '\0';
        if (!npu_job_id_valid(id) || npu_jobs_load(npu_broker_jobs_fd(m->broker), id, &j) < 0) {
                sdp_reply_error(req, 404, "NPU job not found");
                return NULL;
        }
        if (!streq(j->session_id, session)) {
                npu_job_free(j);
                sdp_reply_error(req, 400, "NPU job belongs to another session");
                return NULL;
        }
        return j;
}

static void reply_job(Manager *m, HttpRequest *req, unsigned status, const NpuJob *j, bool wrap) {
        _cleanup_(json_object_putp) json_object *o = job_json(m, j, false), *w = NULL;

        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        if (!wrap)
                return sdp_reply_json(req, status, o);
        w = json_object_new_object();
        if (!w)
                return sdp_reply_error(req, 500, "Out of memory");
        json_object_object_add(w, "job", STEAL(o));
        sdp_reply_json(req, status, w);
}

void sdp_npu_job_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *ours = json_object_new_object(), *x = json_object_new_object();
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_free_ char *why = NULL;
        const char *key = json_get_string(body, "runnerWorkspaceKey"), *rev = json_get_string(body, "environmentRevisionId");
        const char *session = json_get_string(body, "sessionId"), *workload = json_get_string(body, "workloadId");
        char id[NPU_JOB_ID_LEN + 1], ws[129];
        json_object *inputs = NULL;
        int r;

        if (!broker_ready(m, req))
                return;
        if (!ours || !x)
                return sdp_reply_error(req, 500, "Out of memory");
        if (!workload)
                return sdp_reply_error(req, 400, "workloadId is required");
        if (!session || !npu_session_id_valid(session))
                return sdp_reply_error(req, 400, "sessionId is required");
        if (!rev || !*rev)
                return sdp_reply_error(req, 400, "environmentRevisionId is required");
        /* No filesystem is shared with their API: a job works in the runner workspace of a key. */
        if (!key)
                return sdp_reply_error(req, 400, "runnerWorkspaceKey is required: this runner keeps its own workspaces");
        if (!sdp_runner_workspace_key_valid(key))
                return sdp_reply_error(req, 400, "Invalid runner workspace key");
        if (json_object_object_get_ex(body, "inputs", &inputs) && !json_object_is_type(inputs, json_type_null) &&
            !json_object_is_type(inputs, json_type_object))
                return sdp_reply_error(req, 400, "inputs must be an object");
        if (manager_refuses_new_work(m))
                return sdp_reply_error(req, 400, "NPU jobs are refused: %s", manager_refuses_new_work(m));
        sdp_workspace_for_key(key, ws);

        /* Its end commits the workspace (as an upload does): snapshots and createdFiles see its output. */
        npu_broker_set_commit(m->broker, &(NpuBrokerCommit) { .start = commit_start, .abort = commit_abort, .userdata = m });
        json_object_object_add(ours, "workloadId", json_object_new_string(workload));
        json_object_object_add(ours, "sessionId", json_object_new_string(session));
        if (inputs && json_object_is_type(inputs, json_type_object))
                json_object_object_add(ours, "inputs", json_object_get(inputs));
        r = npu_broker_submit(m->broker, ours, ws, id, &why);
        if (r == -ENOMEM)
                return sdp_reply_error(req, 500, "Out of memory");
        if (r == -EBUSY || r == -EAGAIN)
                return sdp_reply_error(req, 409, "%s", why ?: "busy");
        if (r < 0)
                return sdp_reply_error(req, 400, "%s", why ?: strerror(-r));

        json_object_object_add(x, "inputs", inputs && json_object_is_type(inputs, json_type_object) ?
                               json_object_get(inputs) : json_object_new_object());
        json_object_object_add(x, "environmentRevisionId", json_object_new_string(rev));
        json_object_object_add(x, "workspaceRoot", json_object_new_string(json_get_string(body, "workspaceRoot") ?: ""));
        r = extras_write(m, id, x);
        if (r < 0)
                log_warning_errno(r, "Failed to keep the ScienceDiscovery fields of NPU job %s, ignoring: %m", id);
        if (npu_jobs_load(npu_broker_jobs_fd(m->broker), id, &j) < 0)
                return sdp_reply_error(req, 500, "The new NPU job cannot be read");
        reply_job(m, req, 201, j, false);
}

void sdp_npu_job_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;

        if (!broker_ready(m, req) || !(j = owned_job(m, req, params[0], lens[0], query_session(req))))
                return;
        reply_job(m, req, 200, j, false);
}

void sdp_npu_job_logs(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(npu_job_freep) NpuJob *j = NULL;

        if (!broker_ready(m, req) || !(j = owned_job(m, req, params[0], lens[0], query_session(req))))
                return;
        o = logs_json(m, j, false);
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, o);
}

void sdp_npu_job_result(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;

        if (!broker_ready(m, req) || !(j = owned_job(m, req, params[0], lens[0], query_session(req))))
                return;
        if (!npu_job_state_is_final(j->state))
                return sdp_reply_error(req, 409, "NPU job is still %s", their_state(j->state));
        reply_job(m, req, 200, j, true);
}

void sdp_npu_job_cancel(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL, *now = NULL;

        if (!broker_ready(m, req) || !(j = owned_job(m, req, params[0], lens[0], json_get_string(body, "sessionId"))))
                return;
        (void) npu_broker_cancel(m->broker, j->id, j->session_id);
        if (npu_jobs_load(npu_broker_jobs_fd(m->broker), j->id, &now) < 0)
                return reply_job(m, req, 200, j, false);
        reply_job(m, req, 200, now, false);
}

/* ---- chips in a run (npuDevices) ------------------------------------------------------------- */

bool sdp_npu_devices_parse(Manager *m, HttpRequest *req, json_object *body, SdpRequest *p) {
        json_object *v;
        size_t n;

        p->n_npu_chips = 0;
        if (!json_object_object_get_ex(body, "npuDevices", &v) || json_object_is_type(v, json_type_null))
                return true;
        if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > ELEMENTSOF(p->npu_chips)) {
                sdp_reply_error(req, 400, "npuDevices must be an array of at most %zu card indices",
                                ELEMENTSOF(p->npu_chips));
                return false;
        }
        n = json_object_array_length(v);
        for (size_t i = 0; i < n; i++) {
                json_object *x = json_object_array_get_idx(v, i);
                int64_t c = json_object_is_type(x, json_type_int) ? json_object_get_int64(x) : -1;

                if (c < 0 || c > NPU_JOB_CHIP_ID_MAX) {
                        sdp_reply_error(req, 400, "npuDevices must hold card indices (0-%u)", NPU_JOB_CHIP_ID_MAX);
                        return false;
                }
                for (size_t k = 0; k < i; k++)
                        if (p->npu_chips[k] == (unsigned) c) {
                                sdp_reply_error(req, 400, "npuDevices names card %u twice", (unsigned) c);
                                return false;
                        }
                p->npu_chips[i] = (unsigned) c;
        }
        if (n > 0 && !m->npu) {
                sdp_reply_error(req, 400, "NPU devices are not available on this runner: %s",
                                !m->config.npu_enable ? "not enabled" : m->npu_error ?: "unavailable");
                return false;
        }
        p->n_npu_chips = n;
        return true;
}

static void release_claim(void *hold) {
        npu_claim_free(hold);
}

int sdp_npu_claim(Manager *m, HttpRequest *req, Execution *e, const SdpRequest *p,
                  void (*done)(NpuClaim *c, int error, const char *why, void *userdata), void *userdata) {
        _cleanup_free_ char *why = NULL;
        ExecutionDevices d;
        NpuClaim *claim = NULL;
        int r;

        r = npu_manager_claim(m->npu, p->npu_chips, p->n_npu_chips, NULL, execution_id(e), done, userdata, &claim, &why);
        if (r == -ENOMEM) {
                sdp_reply_error(req, 500, "Out of memory");
                return r;
        }
        if (r < 0) {
                sdp_reply_error(req, r == -EBUSY ? 409 : 400, "NPU devices cannot be used: %s", why ?: strerror(-r));
                return r;
        }
        /* The run's devices: held until its sandbox is gone; such a run gets no network. */
        d = (ExecutionDevices) { .hold = claim, .release = release_claim, .npu = npu_claim_npu(claim) };
        npu_claim_devices(claim, &d.nodes, &d.n_nodes, &d.binds, &d.n_binds, &d.env);
        execution_set_devices(e, &d);
        return 0;
}
