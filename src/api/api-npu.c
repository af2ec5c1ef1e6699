/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU endpoints (API.md "NPU and other devices", docs/api.md section 10): GET /npu/chips,
 * what the NPU manager (npu/npu-manager.h) found and who holds each chip; the host NPU broker's
 * workloads and jobs (npu/npu-broker.h, npu/npu-jobs.h): a job of another session is 404.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api-internal.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "npu/npu-broker.h"
#include "npu/npu-jobs.h"
#include "npu/npu-manager.h"
#include "util/json-util.h"

void api_npu_chips(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (!m->npu)
                return http_reply_error(req, HTTP_ERROR_NPU_UNAVAILABLE, "%s.",
                                        !m->config.npu_enable ? "Chips and devices are not enabled on this runner ([NPU] Enable=no)"
                                        : m->npu_error ?: "Chips and devices are unavailable");
        o = npu_manager_chips_json(m->npu);
        http_reply_json(req, 200, o);
}

/* ---- the host NPU broker (docs/api.md section 10.3) ---- */

static bool broker_ready(Manager *m, HttpRequest *req) {
        if (m->broker)
                return true;
        http_reply_error(req, HTTP_ERROR_NPU_UNAVAILABLE, "%s.",
                         !m->config.npu_broker ? "The NPU broker is not enabled on this runner ([NPU] Broker=no)"
                         : m->broker_error ?: "The NPU broker is unavailable");
        return false;
}

/* The job's id (params[0]) and the session of the request (?session_id=, or the body's sessionId). */
static bool job_params(HttpRequest *req, const char **params, size_t *lens, json_object *body, char id[static 129],
                       const char **ret_session) {
        const char *session = http_request_query(req, "session_id");
        json_object *v;

        if (!session && body && json_object_object_get_ex(body, "sessionId", &v) && json_object_is_type(v, json_type_string))
                session = json_object_get_string(v);
        if (!session || !npu_session_id_valid(session)) {
                http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "The session must be given (session_id=, a session's id).");
                return false;
        }
        if (params && (api_param_id(params[0], lens[0], id) < 0 || !npu_job_id_valid(id))) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such job.");
                return false;
        }
        *ret_session = session;
        return true;
}

/* A job as clients see it: without its host paths (argv, env, cwd) and the runner's pid. */
static json_object *job_json(const NpuJob *j) {
        json_object *o = npu_job_to_json(j);

        if (o) {
                json_object_object_del(o, "argv");
                json_object_object_del(o, "env");
                json_object_object_del(o, "cwd");
                json_object_object_del(o, "pid");
        }
        return o;
}

void api_npu_workloads(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (!broker_ready(m, req))
                return;
        o = npu_broker_workloads_json(m->broker);
        http_reply_json(req, 200, o);
}

void api_npu_job_create(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                        const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *why = NULL;
        char id[NPU_JOB_ID_LEN + 1];
        int r;

        if (!broker_ready(m, req))
                return;
        if (manager_refuses_new_work(m))
                return http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "Jobs are refused: %s.",
                                        manager_refuses_new_work(m));
        r = npu_broker_submit(m->broker, body, NULL, id, &why);
        switch (r) {
        case 0:
                break;
        case -ENOMEM:
                return http_reply_oom(req);
        case -ENOENT:
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "%s.", why ?: "not found");
        case -EPERM:
                return http_reply_error(req, HTTP_ERROR_FORBIDDEN, "%s.", why ?: "a path is refused");
        case -ENODEV:
                return http_reply_error(req, HTTP_ERROR_NPU_UNAVAILABLE, "%s.", why ?: "no chips for this job");
        case -EBUSY:
                return http_reply_error(req, HTTP_ERROR_NPU_CHIP_UNAVAILABLE, "%s.", why ?: "its chips are held");
        case -EAGAIN:
                return http_reply_error(req, HTTP_ERROR_WORKSPACE_BUSY, "%s.", why ?: "the workspace is in use");
        case -EINVAL:
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid request: %s.", why ?: "bad field");
        default:
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The job cannot be made: %s.", why ?: strerror(-r));
        }
        o = json_object_new_object();
        if (!o)
                return http_reply_oom(req);
        json_object_object_add(o, "jobId", json_object_new_string(id));
        json_object_object_add(o, "state", json_object_new_string("queued"));
        http_reply_json(req, 202, o);
}

void api_npu_jobs_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *l;
        NpuJob **jobs = NULL;
        const char *session;
        size_t n = 0;
        char id[129];
        int r;

        if (!broker_ready(m, req) || !job_params(req, NULL, NULL, NULL, id, &session))
                return;
        r = npu_jobs_list(npu_broker_jobs_fd(m->broker), session, &jobs, &n);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The jobs of session '%s' cannot be listed: %s.",
                                        session, strerror(-r));
        o = json_object_new_object();
        l = json_object_new_array();
        if (o && l) {
                json_object_object_add(o, "jobs", l);
                for (size_t i = 0; i < n; i++)
                        json_object_array_add(l, job_json(jobs[i]));
        } else
                json_object_put(l);
        npu_job_list_free(jobs, n);
        if (!o || !l)
                return http_reply_oom(req);
        http_reply_json(req, 200, o);
}

/* The job the path names, of the request's session; false once the request is answered. */
static bool load_job(Manager *m, HttpRequest *req, const char **params, size_t *lens, char id[static 129],
                     const char **ret_session, NpuJob **ret) {
        int r;

        if (!broker_ready(m, req) || !job_params(req, params, lens, NULL, id, ret_session))
                return false;
        r = npu_jobs_load_for_session(npu_broker_jobs_fd(m->broker), id, *ret_session, ret);
        if (r < 0) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No job '%s' of session '%s'.", id, *ret_session);
                return false;
        }
        return true;
}

void api_npu_job_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(npu_job_freep) NpuJob *job = NULL;
        const char *session;
        char id[129];

        if (!load_job(m, req, params, lens, id, &session, &job))
                return;
        o = job_json(job);
        http_reply_json(req, 200, o);
}

void api_npu_job_log(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens) {
        _cleanup_(npu_job_log_chunk_done) NpuJobLogChunk chunk = {};
        const char *session;
        char id[129], next[32];
        uint64_t offset;
        int r;

        if (!broker_ready(m, req) || !job_params(req, params, lens, NULL, id, &session))
                return;
        if (api_query_offset(req, &offset) < 0)
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "offset must be a byte offset (decimal).");
        r = npu_jobs_read_log(npu_broker_jobs_fd(m->broker), id, session, offset, 1U << 20, &chunk);
        if (r == -ENOENT)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No job '%s' of session '%s'.", id, session);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The log of job '%s' cannot be read: %s.", id,
                                        strerror(-r));
        (void) snprintf(next, sizeof(next), "%" PRIu64, chunk.next_offset);
        const char *const hdr[] = { "X-Sandbox-Next-Offset", next,
                                    "X-Sandbox-Job-Finished", chunk.finished ? "1" : "0", NULL };
        r = http_request_reply(req, 200, "application/octet-stream", chunk.data, chunk.size, false, hdr);
        if (r < 0)
                http_reply_oom(req);
}

void api_npu_job_result(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                        const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(npu_job_freep) NpuJob *job = NULL;
        NpuJobResult result = { .exit_code = -1 };
        const char *session;
        char id[129];
        int r;

        if (!load_job(m, req, params, lens, id, &session, &job))
                return;
        r = npu_jobs_load_result(npu_broker_jobs_fd(m->broker), id, &result);
        if (r == -ENOENT)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "Job '%s' has no result (it is %s).", id,
                                        npu_job_state_to_string(job->state));
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The result of job '%s' cannot be read: %s.", id,
                                        strerror(-r));
        o = npu_job_result_to_json(&result);
        npu_job_result_done(&result);
        if (!o)
                return http_reply_oom(req);
        json_object_object_add(o, "jobId", json_object_new_string(id));
        json_object_object_add(o, "state", json_object_new_string(npu_job_state_to_string(job->state)));
        http_reply_json(req, 200, o);
}

void api_npu_job_cancel(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                        const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session;
        char id[129];
        int r;

        if (!broker_ready(m, req) || !job_params(req, params, lens, body, id, &session))
                return;
        r = npu_broker_cancel(m->broker, id, session);
        if (r == -ENOENT)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No job '%s' of session '%s'.", id, session);
        o = json_object_new_object();
        if (!o)
                return http_reply_oom(req);
        json_object_object_add(o, "jobId", json_object_new_string(id));
        json_object_object_add(o, "state", json_object_new_string(r > 0 ? "cancelling" : "finished"));
        http_reply_json(req, 202, o);
}
