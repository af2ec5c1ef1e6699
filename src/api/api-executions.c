/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The execution endpoints: POST /execute and /execute-shell (answered when the run ends), POST
 * /shell-executions (managed runs), and GET /shell-executions/{id}, .../logs (also followed) and
 * POST .../cancel. Owns the request's side of a run (the disconnect that cancels it, a log
 * follower); may call core/, execution/, workspace/ and the http/ transport.
 */

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "execution/records.h"
#include "execution/replay.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "npu/npu-manager.h"
#include "util/fd-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "workspace/workspace.h"

static void on_execution_done(Execution *e, void *userdata) {
        HttpRequest *req = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *message = NULL;
        int failure;

        http_request_set_userdata(req, NULL, NULL);
        failure = execution_failure(e, &message);
        if (failure == -ENOENT)
                http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "%s.", message ?: "not found");
        else if (failure < 0)
                http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "The sandbox could not be started: %s.",
                                 message ?: "unknown error");
        else {
                o = execution_to_json(e);
                if (o)
                        http_reply_json(req, 200, o);
                else
                        http_reply_oom(req);
        }
        execution_free_later(e);
}

static void on_request_gone(HttpRequest *req, void *userdata) {
        Execution *e = userdata;

        /* API.md: a client that disconnects from a synchronous request aborts its run. */
        execution_detach(e);
        execution_cancel(e, EXECUTION_STATUS_CANCELLED);
}

static void release_environment(void *hold) {
        env_hold_release(hold);
}

/* Validate and create an execution; on any refusal the reply is sent and NULL returned. */
static Execution *prepare_execution(Manager *m, HttpRequest *req, json_object *body, ExecutionKind kind,
                                    const unsigned **ret_chips, size_t *ret_n_chips, char *const **ret_devices) {
        _cleanup_(execution_request_freep) ExecutionRequest *er = NULL;
        _cleanup_free_ char *why = NULL;
        ExecutionMaxima max = execution_maxima_from_config(&m->config);
        const char *reason;
        EnvHold *hold = NULL;
        Execution *e;
        struct timespec ts;
        int r;

        r = execution_request_parse(body, kind, &max, &er, &why);
        if (r == -EPROTONOSUPPORT) {
                http_reply_error(req, HTTP_ERROR_PERSISTENT_KERNEL_UNSUPPORTED,
                                 "kernelMode 'persistent' is not supported; use 'ephemeral' or omit it.");
                return NULL;
        }
        if (r == -ENOMEM) {
                http_reply_oom(req);
                return NULL;
        }
        if (r < 0) {
                http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid request: %s.", why ?: "bad field");
                return NULL;
        }

        r = manager_can_execute(m, &reason);
        if (r < 0) {
                http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "Executions are refused: %s.", reason);
                return NULL;
        }

        if (er->execution_id) {
                Execution *old = execution_find(&m->exec, er->execution_id);

                (void) clock_gettime(CLOCK_MONOTONIC, &ts);
                r = replay_table_check_and_insert(m->replay, er->execution_id,
                                                  (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000);
                if (r == -EEXIST || (old && !execution_finished(old))) {
                        http_reply_error(req, HTTP_ERROR_EXECUTION_ID_CONFLICT,
                                         r == -EEXIST ? "executionId '%s' was used within the last 60 s."
                                         : "executionId '%s' belongs to a run that is still active.",
                                         er->execution_id);
                        return NULL;
                }
                if (r < 0) {
                        http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE,
                                         "Too many recent executions to track their ids; retry shortly.");
                        return NULL;
                }
        }

        if ((er->n_npu_chips > 0 || er->devices) && !m->npu) {
                http_reply_error(req, HTTP_ERROR_NPU_UNAVAILABLE, "%s.",
                                 !m->config.npu_enable ? "Chips and devices are not enabled on this runner ([NPU] Enable=no)"
                                 : m->npu_error ?: "Chips and devices are unavailable");
                return NULL;
        }

        if (er->environment) {
                if (!m->environments) {
                        http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "Environments are unavailable: %s.",
                                         m->environments_error ?: "not set up");
                        return NULL;
                }
                _cleanup_free_ char *env_why = NULL;
                EnvRefusal refusal = 0;

                r = env_manager_acquire(m->environments, er->environment, &hold, &refusal, &env_why);
                if (r == -ENOMEM) {
                        http_reply_oom(req);
                        return NULL;
                }
                if (r < 0) {
                        http_reply_error(req, api_environment_refusal_error(refusal, true), "%s.",
                                         env_why ?: "the environment cannot be used");
                        return NULL;
                }
        }

        /* The request moves into the execution: these stay valid as long as it. */
        *ret_chips = er->npu_chips;
        *ret_n_chips = er->n_npu_chips;
        *ret_devices = er->devices;
        r = execution_new(&m->exec, STEAL(er), &e);
        if (r < 0) {
                env_hold_release(hold);
                http_reply_oom(req);
                return NULL;
        }
        if (hold)
                execution_set_environment(e, &(ExecutionEnv) {
                                                     .hold = hold,
                                                     .release = release_environment,
                                                     .name = env_hold_name(hold),
                                                     .revision = env_hold_revision(hold),
                                                     .prefix = env_hold_prefix(hold),
                                                     .hide_file = env_hold_cover(hold),
                                                     .r = env_hold_kind(hold) == ENV_KIND_R,
                                             });
        return e;
}

/* Runs /execute's execution: answered when it ends (or by on_execution_done() if it cannot start). */
static void execute_go(Manager *m, HttpRequest *req, Execution *e) {
        http_request_set_userdata(req, e, on_request_gone);
        http_request_suspend(req);
        (void) execution_start(e, on_execution_done, req);
}

static void shell_go(Manager *m, HttpRequest *req, Execution *e);

/* A run that names chips or devices, between its claim and its start. */
typedef struct DeviceWait {
        Manager *m;
        HttpRequest *req;
        Execution *e;
} DeviceWait;

static void on_device_wait_request_gone(HttpRequest *req, void *userdata) {
        DeviceWait *w = userdata;

        execution_free_later(w->e);   /* with it the claim, and its re-probe */
        free(w);
}

static void release_claim(void *hold) {
        npu_claim_free(hold);
}

static void on_claimed(NpuClaim *c, int error, const char *why, void *userdata) {
        DeviceWait *w = userdata;
        Manager *m = w->m;
        HttpRequest *req = w->req;
        Execution *e = w->e;

        http_request_set_userdata(req, NULL, NULL);
        free(w);
        if (error < 0) {
                http_reply_error(req, error == -EBUSY ? HTTP_ERROR_NPU_CHIP_UNAVAILABLE : HTTP_ERROR_SANDBOX_UNAVAILABLE,
                                 "%s.", why ?: "the chips cannot be had");
                execution_free_later(e);
                return;
        }
        if (execution_is_managed(e))
                shell_go(m, req, e);
        else
                execute_go(m, req, e);
}

/*
 * The chips and devices @er asks for, claimed for @e (whose request it is): 0 when there are none;
 * 1 when the claim is under way (the run starts from on_claimed()); < 0 when the answer is sent.
 */
static int claim_devices(Manager *m, HttpRequest *req, Execution *e, const unsigned *chips, size_t n_chips,
                         char *const *devices) {
        _cleanup_free_ char *why = NULL;
        ExecutionDevices d = {};
        DeviceWait *w;
        NpuClaim *claim = NULL;
        int r;

        if (n_chips == 0 && !devices)
                return 0;
        w = calloc(1, sizeof(DeviceWait));
        if (!w) {
                execution_free_later(e);
                http_reply_oom(req);
                return -ENOMEM;
        }
        *w = (DeviceWait) { .m = m, .req = req, .e = e };
        r = npu_manager_claim(m->npu, chips, n_chips, devices, execution_id(e), on_claimed, w, &claim, &why);
        if (r < 0) {
                free(w);
                execution_free_later(e);
                if (r == -ENOMEM)
                        http_reply_oom(req);
                else
                        http_reply_error(req, r == -EBUSY ? HTTP_ERROR_NPU_CHIP_UNAVAILABLE : HTTP_ERROR_NPU_UNAVAILABLE,
                                         "%s.", why ?: "the chips or devices cannot be used");
                return r;
        }
        d = (ExecutionDevices) { .hold = claim, .release = release_claim, .npu = npu_claim_npu(claim) };
        npu_claim_devices(claim, &d.nodes, &d.n_nodes, &d.binds, &d.n_binds, &d.env);
        execution_set_devices(e, &d);
        http_request_set_userdata(req, w, on_device_wait_request_gone);
        http_request_suspend(req);
        return 1;
}

/* A run of @body: answered when it ends, or (@managed: POST /shell-executions) once it started. */
static void start_execution(Manager *m, HttpRequest *req, json_object *body, ExecutionKind kind, bool managed) {
        const unsigned *chips;
        size_t n_chips;
        char *const *devices;
        Execution *e;

        e = prepare_execution(m, req, body, kind, &chips, &n_chips, &devices);
        if (!e)
                return;
        /* A managed run belongs to nobody's connection: it ends on its own or by cancel. */
        if (managed)
                execution_set_managed(e);
        if (claim_devices(m, req, e, chips, n_chips, devices) != 0)
                return;
        if (managed)
                shell_go(m, req, e);
        else
                execute_go(m, req, e);
}

void api_execute(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                 const char **params, size_t *lens) {
        start_execution(m, req, body,
                        streq(route->pattern, "/execute-shell") ? EXECUTION_KIND_SHELL : EXECUTION_KIND_EXECUTE,
                        false);
}

static void reply_execution_failure(HttpRequest *req, Execution *e) {
        const char *message = NULL;
        int failure = execution_failure(e, &message);

        if (failure == -ENOENT)
                http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "%s.", message ?: "not found");
        else
                http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "The sandbox could not be started: %s.",
                                 message ?: "unknown error");
}

static void shell_go(Manager *m, HttpRequest *req, Execution *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        r = execution_start(e, NULL, NULL);
        if (r < 0 && execution_finished(e))
                return reply_execution_failure(req, e);

        o = json_object_new_object();
        if (!o)
                return http_reply_oom(req);
        json_object_object_add(o, "executionId", json_object_new_string(execution_id(e)));
        json_object_object_add(o, "workspaceId", json_object_new_string(execution_workspace(e)));
        json_object_object_add(o, "state", json_object_new_string(execution_finished(e) ? "finished" : "running"));
        http_reply_json(req, 202, o);
}

void api_shell_create(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens) {
        start_execution(m, req, body, EXECUTION_KIND_SHELL, true);
}

void api_shell_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char id[129];
        Execution *e;
        int r;

        if (api_param_id(params[0], lens[0], id) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such execution.");
        e = execution_find(&m->exec, id);
        if (e)
                o = execution_record_json(e);
        else {
                r = record_read(m->records_fd, id, &o);
                if (r == -ENOENT || r == -EINVAL)
                        return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No execution '%s' is known.", id);
                if (r < 0)
                        return http_reply_error(req, HTTP_ERROR_INTERNAL, "The record of '%s' cannot be read.", id);
                /* Bookkeeping for recovery, not for clients. */
                json_object_object_del(o, "daemonPid");
                json_object_object_del(o, "daemonStartTime");
        }
        http_reply_json(req, 200, o);
}

typedef struct LogFollow {
        int fd;
        uint64_t offset;
        ExecutionWatch *watch;
        HttpStream *stream;
} LogFollow;

static void log_follow_free(void *userdata) {
        LogFollow *f = userdata;

        execution_watch_free(f->watch);
        safe_close(f->fd);
        free(f);
}

static void log_follow_wake(void *userdata) {
        LogFollow *f = userdata;

        if (f->stream)
                http_stream_wake(f->stream);
}

static ssize_t log_follow_read(HttpRequest *req, uint64_t pos, char *buf, size_t max, void *userdata) {
        LogFollow *f = userdata;
        ssize_t n;

        n = pread(f->fd, buf, max, (off_t) (f->offset + pos));
        if (n > 0)
                return n;
        if (n < 0 && errno != EINTR && errno != EAGAIN)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        /* At the end of what is written: done if the run is, else wait for more. */
        if (!execution_watch_alive(f->watch) || execution_finished(execution_watch_execution(f->watch))) {
                n = pread(f->fd, buf, max, (off_t) (f->offset + pos));
                return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
        }
        http_request_stream_wait(req);
        return 0;
}

void api_shell_logs(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                    const char **params, size_t *lens) {
        const char *stream = http_request_query(req, "stream") ?: "stdout";
        const char *follow_s = http_request_query(req, "follow");
        _cleanup_close_ int fd = -EBADF;
        char id[129], next[32], name[16];
        uint64_t offset = 0;
        RecordStream s;
        struct stat st;
        Execution *e;
        bool follow = false;
        int r;

        if (api_param_id(params[0], lens[0], id) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such execution.");
        s = record_stream_from_string(stream);
        if (s < 0)
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "stream must be 'stdout' or 'stderr'.");
        if (api_query_offset(req, &offset) < 0)
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "offset must be a byte offset (decimal).");
        if (follow_s) {
                if (!streq(follow_s, "0") && !streq(follow_s, "1"))
                        return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "follow must be 0 or 1.");
                follow = streq(follow_s, "1");
        }

        fd = record_log_open(m->records_fd, id, s);
        if (fd < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No %s log for execution '%s' (only managed runs keep logs).",
                                        stream, id);
        if (fstat(fd, &st) < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The log cannot be read.");
        (void) snprintf(name, sizeof(name), "%s", stream);

        e = execution_find(&m->exec, id);
        if (!follow || !e || execution_finished(e)) {
                uint64_t size = (uint64_t) st.st_size;
                if (offset > size)
                        offset = size;
                (void) snprintf(next, sizeof(next), "%" PRIu64, size);
                const char *const hdr[] = { "X-Sandbox-Next-Offset", next, NULL };
                r = http_request_reply_fd(req, 200, "application/octet-stream", STEAL_FD(fd), offset, size - offset, hdr);
                if (r < 0)
                        http_reply_oom(req);
                return;
        }

        /* Follow: stream from the offset until the run ends; the client's next offset is the
         * offset it asked for plus the bytes it received. */
        LogFollow *f = calloc(1, sizeof(*f));
        if (!f)
                return http_reply_oom(req);
        *f = (LogFollow) { .fd = STEAL_FD(fd), .offset = offset };
        r = execution_watch_add(e, log_follow_wake, f, &f->watch);
        if (r < 0) {
                log_follow_free(f);
                return http_reply_oom(req);
        }
        r = http_request_reply_stream(req, 200, "application/octet-stream", MHD_SIZE_UNKNOWN, log_follow_read,
                                      log_follow_free, f, NULL, &f->stream);
        if (r < 0) {
                log_follow_free(f);
                http_reply_oom(req);
        }
}

void api_shell_cancel(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char id[129];
        Execution *e;

        if (api_param_id(params[0], lens[0], id) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such execution.");
        e = execution_find(&m->exec, id);
        if (!e) {
                json_object *rec = NULL;
                if (record_read(m->records_fd, id, &rec) < 0)
                        return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No execution '%s' is known.", id);
                json_object_put(rec);
        } else if (!execution_finished(e))
                execution_cancel(e, EXECUTION_STATUS_CANCELLED);

        o = json_object_new_object();
        if (!o)
                return http_reply_oom(req);
        json_object_object_add(o, "executionId", json_object_new_string(id));
        json_object_object_add(o, "state", json_object_new_string(
                        e && !execution_finished(e) ? "cancelling" : "finished"));
        http_reply_json(req, 202, o);
}
