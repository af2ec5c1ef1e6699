/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect (docs/api.md, "ScienceDiscovery dialect"), served on the listeners
 * that speak it: its route table, bearer and execution-signature checks with its error shape
 * ({"error": "..."}), its JSON answers, and GET /health, /status and /resources. May call core/,
 * execution/ and the http/ transport; our own API (api-routes.c) hands these listeners' requests here.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "api/sd-api.h"
#include "api/sd-auth.h"
#include "api/sd-internal.h"
#include "build-config.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "http/auth.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

/* As on our own API (api-routes.c). */
#define SDP_TARGET_MAX 8192U
#define SDP_HEADERS_MAX 100U

typedef enum SdpAuth {
        SDP_AUTH_NONE,
        SDP_AUTH_BEARER,
        SDP_AUTH_SIGNED,                /* bearer + x-science-execution-timestamp/-signature */
} SdpAuth;

typedef struct SdpRoute {
        const char *method;
        const char *pattern;
        SdpAuth auth;
        bool json_body;
        SdpHandler handler;
        SdpBegin begin;                 /* streamed or large bodies: sets up the body, returns its cap */
        const char *signature_error;    /* SDP_AUTH_SIGNED: their message; NULL: the execution's */
} SdpRoute;

static const SdpRoute routes[] = {
        { "GET",  "/health",    SDP_AUTH_NONE,   false, sdp_health },
        { "GET",  "/status",    SDP_AUTH_BEARER, false, sdp_status },
        { "GET",  "/resources", SDP_AUTH_BEARER, false, sdp_resources },
        { "POST", "/execute",   SDP_AUTH_SIGNED, true,  sdp_execute },
        { "POST", "/execute-shell",             SDP_AUTH_SIGNED, true,  sdp_execute_shell },
        { "POST", "/shell-executions",          SDP_AUTH_SIGNED, true,  sdp_shell_create },
        { "GET",  "/shell-executions/*",        SDP_AUTH_BEARER, false, sdp_shell_get },
        { "GET",  "/shell-executions/*/logs",   SDP_AUTH_BEARER, false, sdp_shell_logs },
        /* Unsigned, without a body, as their client sends it (notes §4). */
        { "POST", "/shell-executions/*/cancel", SDP_AUTH_BEARER, false, sdp_shell_cancel },
        { "GET",  "/kernels",                   SDP_AUTH_BEARER, false, sdp_kernels_list },
        { "POST", "/kernels/teardown",          SDP_AUTH_BEARER, true,  sdp_kernels_teardown },
        { "POST", "/kernels/*/teardown",        SDP_AUTH_BEARER, true,  sdp_kernel_teardown },
        /* Increment 2 (h-sd2): environments (sd-env.c, sd-env-change.c). */
        { "GET",    "/environments",                        SDP_AUTH_BEARER, false, sdp_environments_list },
        { "POST",   "/environments",                        SDP_AUTH_BEARER, true,  sdp_environment_create },
        { "DELETE", "/environments/*",                      SDP_AUTH_BEARER, false, sdp_environment_delete },
        { "POST",   "/environments/*/install",              SDP_AUTH_BEARER, true,  sdp_environment_install },
        { "POST",   "/environments/*/uninstall",            SDP_AUTH_BEARER, true,  sdp_environment_uninstall },
        { "GET",    "/environment-setup",                   SDP_AUTH_BEARER, false, sdp_environment_setup_get },
        { "POST",   "/environment-setup",                   SDP_AUTH_BEARER, true,  sdp_environment_setup_post },
        { "GET",    "/environment-revisions",               SDP_AUTH_BEARER, false, sdp_environment_revisions },
        { "GET",    "/environment-revisions/*/snapshot",    SDP_AUTH_BEARER, false, sdp_environment_snapshot },
        /* Increment 2 (h-sd2): the NPU broker and devices (sd-npu.c), signed as their NPU routes are. */
        { "GET",    "/npu/devices",                         SDP_AUTH_BEARER, false, sdp_npu_devices },
        { "GET",    "/npu/workloads",                       SDP_AUTH_BEARER, false, sdp_npu_workloads },
        { "GET",    "/npu/jobs",                            SDP_AUTH_BEARER, false, sdp_npu_jobs_list },
        { "POST",   "/npu/jobs",                            SDP_AUTH_SIGNED, true,  sdp_npu_job_create,
          .signature_error = "Invalid or expired NPU job signature" },
        { "GET",    "/npu/jobs/*",                          SDP_AUTH_BEARER, false, sdp_npu_job_get },
        { "GET",    "/npu/jobs/*/logs",                     SDP_AUTH_BEARER, false, sdp_npu_job_logs },
        { "GET",    "/npu/jobs/*/result",                   SDP_AUTH_BEARER, false, sdp_npu_job_result },
        { "POST",   "/npu/jobs/*/cancel",                   SDP_AUTH_SIGNED, true,  sdp_npu_job_cancel,
          .signature_error = "Invalid or expired NPU job cancel signature" },
        /* Remote workspaces (sd-workspace.c, sd-snapshots.c) and skill packages (sd-skills.c). */
        { "GET",    "/remote-workspace/files",          SDP_AUTH_BEARER, false, sdp_rw_files },
        { "POST",   "/remote-workspace/files",          SDP_AUTH_BEARER, true,  sdp_rw_files },
        { "GET",    "/remote-workspace/file",           SDP_AUTH_BEARER, false, sdp_rw_file_get },
        { "PUT",    "/remote-workspace/file",           SDP_AUTH_BEARER, false, sdp_rw_put, sdp_rw_put_begin },
        { "PUT",    "/remote-workspace/transfer-file",  SDP_AUTH_BEARER, false, sdp_rw_put, sdp_rw_transfer_begin },
        { "DELETE", "/remote-workspace",                SDP_AUTH_BEARER, false, sdp_rw_delete },
        { "POST",   "/remote-workspace/snapshots",      SDP_AUTH_BEARER, true,  sdp_rw_snapshot_create },
        { "GET",    "/remote-workspace/snapshots/*/file", SDP_AUTH_BEARER, false, sdp_rw_snapshot_file },
        { "GET",    "/skill-packages/*",                SDP_AUTH_BEARER, false, sdp_skills_get },
        { "POST",   "/skill-packages",                  SDP_AUTH_BEARER, true,  sdp_skills_post, sdp_skills_begin },
};

static const SdpRoute *route_find(HttpRequest *req, const char **params, size_t *lens) {
        for (size_t i = 0; i < ELEMENTSOF(routes); i++)
                if (streq(routes[i].method, http_request_method(req)) &&
                    http_route_match(routes[i].pattern, http_request_path(req), params, lens,
                                     HTTP_ROUTE_MAX_PARAMS) >= 0)
                        return &routes[i];
        return NULL;
}

/* ---- answers --------------------------------------------------------------------------------- */

static void reply_json_full(HttpRequest *req, unsigned status, json_object *o, bool close) {
        static const char *const headers[] = { "Cache-Control", "no-store", NULL };
        _cleanup_free_ char *body = NULL;
        const char *s;
        int r;

        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s || asprintf(&body, "%s\n", s) < 0) {
                static const char oom[] = "{\"error\":\"Out of memory\"}\n";
                (void) http_request_reply(req, 500, "application/json; charset=utf-8", oom, strlen(oom), true, headers);
                return;
        }
        r = http_request_reply(req, status, "application/json; charset=utf-8", body, strlen(body), close, headers);
        if (r < 0)
                log_warning_errno(r, "Failed to queue a reply, ignoring: %m");
}

void sdp_reply_json(HttpRequest *req, unsigned status, json_object *o) {
        reply_json_full(req, status, o, false);
}

static void reply_error_va(HttpRequest *req, unsigned status, bool close, const char *fmt, va_list ap) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *msg = NULL;

        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        o = json_object_new_object();
        if (o)
                json_object_object_add(o, "error", json_object_new_string(msg ?: "Out of memory"));
        reply_json_full(req, status, o ?: json_object_new_null(), close);
}

void sdp_reply_error(HttpRequest *req, unsigned status, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        reply_error_va(req, status, false, fmt, ap);
        va_end(ap);
}

/* An answer before the body was read: the connection closes after it (the body is discarded). */
static void reply_error_close(HttpRequest *req, unsigned status, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        reply_error_va(req, status, true, fmt, ap);
        va_end(ap);
}

static void log_auth_failure(Manager *m, HttpRequest *req, const char *reason) {
        _cleanup_free_ char *path = str_escape_log(http_request_path(req), 256);

        m->n_auth_failures++;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_AUTH_FAILED,
                   "HTTP_METHOD=%s", streq(http_request_method(req), "POST") ? "POST" :
                   streq(http_request_method(req), "DELETE") ? "DELETE" : "GET",
                   "HTTP_PATH=%s", path ?: "?",
                   "HTTP_REQUEST_ID=%" PRIu64, http_request_id(req),
                   "SANDBOX_CLIENT=%s", http_request_client(req),
                   "SANDBOX_REASON=%s", reason,
                   "MESSAGE=Rejected ScienceDiscovery request '%s' from %s: %s.", path ?: "?",
                   http_request_client(req), reason);
}

/* ---- request flow ---------------------------------------------------------------------------- */

/* Refusals decided before the body while one is coming (a 404, a 401): the
 * body is read and dropped first, so that a client still sending (their client streams uploads)
 * reads the answer instead of a broken pipe (notes, appendix); dispatch() decides the same
 * refusal again. The sink gives up at once, so the request's deadline does not slide: an
 * unauthenticated body is read for RequestTimeoutSec= at most. */
static int sink_discard(HttpRequest *req, const void *data, size_t size, int error, void *userdata) {
        return -ECANCELED;
}

static bool body_coming(HttpRequest *req) {
        const char *cl = http_request_header(req, "Content-Length");

        return http_request_header_count(req, "Transfer-Encoding") > 0 || (cl && !streq(cl, "0"));
}

static uint64_t refuse_after_body(HttpRequest *req) {
        http_request_set_body_sink(req, sink_discard, NULL);
        return UINT64_MAX;
}

static uint64_t json_cap(Manager *m, const SdpRoute *route) {
        return route->json_body ? MIN(SDP_JSON_BODY_MAX, m->config.max_request_body_bytes) : HTTP_EMPTY_BODY_MAX;
}

/* A Content-Length that is malformed (digits only, as their timestamps) or over @cap. */
static bool content_length_refused(HttpRequest *req, uint64_t cap, const char **ret_why) {
        const char *cl = http_request_header(req, "Content-Length");
        uint64_t v;

        if (!cl)
                return false;
        if (sdp_timestamp_parse(cl, &v) < 0) {
                *ret_why = "Invalid Content-Length";
                return true;
        }
        *ret_why = NULL;                /* over the cap: their words, with it */
        return v > cap;
}

uint64_t sdp_api_begin(HttpRequest *req, void *userdata) {
        Manager *m = userdata;
        const char *params[HTTP_ROUTE_MAX_PARAMS];
        size_t lens[HTTP_ROUTE_MAX_PARAMS];
        const SdpRoute *route;
        const char *why;
        uint64_t cap;

        /* A body past its cap is answered here, in their shape and words, not with our 413. */
        http_request_own_too_large(req);

        /* The hostile-input rules of our own API (api-routes.c), in their shape: a bounded
         * target and header count, and no %00, which libmicrohttpd would decode into the path or
         * a query value and so cut a name short. */
        if (strlen(http_request_target(req)) > SDP_TARGET_MAX) {
                reply_error_close(req, 400, "Request target exceeds %u bytes", SDP_TARGET_MAX);
                return 0;
        }
        if (strcasestr(http_request_target(req), "%00")) {
                reply_error_close(req, 400, "NUL (%%00) is not allowed in a request target");
                return 0;
        }
        if (http_request_n_headers(req) > SDP_HEADERS_MAX) {
                reply_error_close(req, 400, "The request has more than %u header fields", SDP_HEADERS_MAX);
                return 0;
        }
        /* Request smuggling: refuse ambiguous framing outright, as on our own API. */
        if (http_request_header_count(req, "Content-Length") > 1 ||
            (http_request_header_count(req, "Content-Length") > 0 &&
             http_request_header_count(req, "Transfer-Encoding") > 0) ||
            http_request_header_count(req, "Transfer-Encoding") > 1) {
                reply_error_close(req, 400, "Ambiguous message framing");
                return 0;
        }
        route = route_find(req, params, lens);
        if (!route) {
                if (body_coming(req))
                        return refuse_after_body(req);
                sdp_reply_error(req, 404, "Not found");
                return 0;
        }
        if (route->auth != SDP_AUTH_NONE &&
            auth_check_bearer(m->secrets.token, http_request_header(req, "Authorization")) < 0) {
                log_auth_failure(m, req, "missing or wrong bearer token");
                if (body_coming(req))
                        return refuse_after_body(req);
                sdp_reply_error(req, 401, "Unauthorized");
                return 0;
        }
        if (route->begin)
                return route->begin(m, req, params, lens);
        cap = json_cap(m, route);
        /* A body declared too large is refused before it is read (and the connection closed):
         * their JSON bodies are not streamed, and nothing over the cap is ever taken in. */
        if (content_length_refused(req, cap, &why)) {
                if (why)
                        reply_error_close(req, 400, "%s", why);
                else
                        reply_error_close(req, 400, "Request body exceeds the %" PRIu64 " byte limit", cap);
                return 0;
        }
        return cap;
}

void sdp_api_dispatch(HttpRequest *req, void *userdata) {
        Manager *m = userdata;
        _cleanup_(json_object_putp) json_object *body = NULL;
        const char *params[HTTP_ROUTE_MAX_PARAMS] = {};
        size_t lens[HTTP_ROUTE_MAX_PARAMS] = {};
        const SdpRoute *route = route_find(req, params, lens);
        const char *data;
        uint64_t cap;
        size_t size;
        int r;

        if (!route)
                return sdp_reply_error(req, 404, "Not found");
        /* Refused in begin(), the body read and dropped since: the same refusals again. */
        if (route->auth != SDP_AUTH_NONE &&
            auth_check_bearer(m->secrets.token, http_request_header(req, "Authorization")) < 0)
                return sdp_reply_error(req, 401, "Unauthorized");
        /* A body past its cap (chunked, or longer than it said): read and dropped; their runner
         * throws, so 400 with their message (notes §1, "readBytes"). */
        if (http_request_too_large(req, &cap))
                return sdp_reply_error(req, 400, "Request body exceeds the %" PRIu64 " byte limit", cap);
        /* A streamed body's handler says what its sink refused. */
        if (!route->begin && http_request_sink_error(req) < 0)
                return sdp_reply_error(req, 400, "Request body exceeds the limit");
        data = http_request_body(req, &size);

        if (route->auth == SDP_AUTH_SIGNED) {
                struct timespec ts;

                (void) clock_gettime(CLOCK_REALTIME, &ts);
                r = sdp_signature_verify(m->secrets.token,
                                         http_request_header(req, "x-science-execution-timestamp"),
                                         http_request_header(req, "x-science-execution-signature"),
                                         data, size,
                                         (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000,
                                         SDP_SIGNATURE_MAX_AGE_MS);
                if (r < 0) {
                        log_auth_failure(m, req, r == -ENODATA ? "signature missing" :
                                         r == -EBADMSG ? "signature malformed" :
                                         r == -ETIME ? "signature timestamp outside the window" : "signature mismatch");
                        return sdp_reply_error(req, 401, "%s", route->signature_error ?:
                                               "Invalid or expired execution signature");
                }
        }

        if (route->json_body) {
                const char *why = NULL;

                /* No body at all reads as {} (teardown's reason is optional); then the fields decide. */
                if (size == 0)
                        r = (body = json_object_new_object()) ? 0 : -ENOMEM;
                else
                        r = http_json_parse(data, size, &body, &why);
                if (r == -ENOMEM)
                        return sdp_reply_error(req, 500, "Out of memory");
                if (r < 0)
                        return sdp_reply_error(req, 400, "Invalid JSON body: %s", why);
                if (!json_object_is_type(body, json_type_object))
                        return sdp_reply_error(req, 400, "Request body must be a JSON object");
        }
        route->handler(m, req, body, params, lens);
}

/* ---- GET /health, /status, /resources ---------------------------------------------------------- */

void sdp_health(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *npu, *net, *envs;
        const char *cgroup_mode = m->limits == LIMITS_SYSTEMD_SCOPE ? "systemd-scope" :
                                  m->limits == LIMITS_CGROUP ? "cgroup" : "none";

        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        json_object_object_add(o, "status", json_object_new_string("ok"));
        json_object_object_add(o, "runnerVersion", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "platform", json_object_new_string("linux"));
        json_object_object_add(o, "sandbox", json_object_new_string("bubblewrap"));
        json_object_object_add(o, "executionAuth", json_object_new_string("bearer+hmac-sha256"));
        json_object_object_add(o, "executionUser", json_object_new_string(m->config.sandbox_user ?: "sandbox"));
        json_object_object_add(o, "executionTimeoutMs", json_new_u64(m->config.default_timeout_usec / 1000));
        json_object_object_add(o, "maxFileBytes", json_new_u64(0));
        json_object_object_add(o, "maxOutputBytes", json_new_u64(m->quota.max_output_bytes));
        json_object_object_add(o, "maxWorkspaceBytes", json_new_u64(m->quota.max_workspace_bytes));
        json_object_object_add(o, "cgroupDelegated", json_object_new_boolean(m->limits != LIMITS_RLIMIT));
        json_object_object_add(o, "cgroupMode", json_object_new_string(cgroup_mode));
        json_object_object_add(o, "cgroupRoot", json_object_new_string(""));
        json_object_object_add(o, "networkPolicy", json_object_new_string("none"));
        json_object_object_add(o, "noNewPrivileges", json_object_new_boolean(true));
        json_object_object_add(o, "seccompBaseline", json_object_new_string("sandbox-runner-default"));
        json_object_object_add(o, "workerConcurrency", NULL);

        /* Read by their API on every run, unguarded: always present (sd-npu.c). */
        npu = sdp_npu_health(m);
        json_object_object_add(o, "npuBroker", npu);

        /* Per-request allowlists, each through a gateway of its own (sd-network.c). */
        net = sdp_network_health(m);
        json_object_object_add(o, "sandboxNetwork", net);

        envs = sdp_environments_health(m);
        json_object_object_add(o, "scientificEnvs", envs);
        sdp_reply_json(req, 200, o);
}

static uint64_t now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

void sdp_status(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *active = sdp_slots_json(m);
        char when[32];

        if (!o || !active) {
                json_object_put(active);
                return sdp_reply_error(req, 500, "Out of memory");
        }
        /* As theirs: the /execute and /execute-shell runs of this listener, waiting or running
         * (managed runs are polled by id, and our own API's runs are not theirs). */
        json_object_object_add(o, "activeExecutions", active);
        json_object_object_add(o, "capturedAt", json_object_new_string(sdp_iso_time(now_ms(), when)));
        json_object_object_add(o, "kernels", json_object_new_array());
        json_object_object_add(o, "npuJobs", sdp_npu_active_jobs(m));
        json_object_object_add(o, "runnerVersion", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "status", json_object_new_string("ok"));
        sdp_reply_json(req, 200, o);
}

void sdp_resources(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *npu = NULL;
        json_object *v;
        _cleanup_free_ char *root = NULL;
        struct sysinfo si = {};
        struct statvfs sv;
        double load[1] = { 0 };
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        char when[32];

        if (!o || asprintf(&root, "%s/workspaces", m->state_dir) < 0)
                return sdp_reply_error(req, 500, "Out of memory");
        (void) sysinfo(&si);
        (void) getloadavg(load, 1);
        json_object_object_add(o, "capturedAt", json_object_new_string(sdp_iso_time(now_ms(), when)));
        json_object_object_add(o, "cpuCores", json_object_new_int64(cpus > 0 ? cpus : 1));
        json_object_object_add(o, "loadAverage1m", json_object_new_double(load[0]));
        json_object_object_add(o, "memoryTotalBytes", json_new_u64((uint64_t) si.totalram * si.mem_unit));
        json_object_object_add(o, "memoryFreeBytes", json_new_u64((uint64_t) si.freeram * si.mem_unit));
        json_object_object_add(o, "uptimeSeconds", json_new_u64((uint64_t) si.uptime));
        if (statvfs(root, &sv) == 0) {
                json_object *d = json_object_new_object();
                if (d) {
                        json_object_object_add(d, "path", json_object_new_string(root));
                        json_object_object_add(d, "totalBytes", json_new_u64((uint64_t) sv.f_blocks * sv.f_frsize));
                        json_object_object_add(d, "availableBytes", json_new_u64((uint64_t) sv.f_bavail * sv.f_frsize));
                }
                json_object_object_add(o, "workspaceDisk", d);
        } else {
                json_object_object_add(o, "workspaceDisk", NULL);
                json_object_object_add(o, "workspaceDiskError", json_object_new_string(strerror(errno)));
        }
        /* Their NpuInventory, only where NPUs are supported (as GET /npu/devices answers it). */
        npu = sdp_npu_inventory(m);
        if (npu && json_object_object_get_ex(npu, "supported", &v) && json_object_get_boolean(v))
                json_object_object_add(o, "npu", STEAL(npu));
        sdp_reply_json(req, 200, o);
}

/* ---- kernels: none is ever kept (persistent runs are refused), so there is nothing to tear down -- */

void sdp_kernels_list(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_array();

        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, o);
}

static const char *teardown_reason(json_object *body) {
        json_object *v;

        if (json_object_object_get_ex(body, "reason", &v) && json_object_is_type(v, json_type_string))
                return json_object_get_string(v);
        return "Persistent kernel memory was cleared";
}

void sdp_kernels_teardown(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *v;

        if (!json_object_object_get_ex(body, "sessionId", &v) || !json_object_is_type(v, json_type_string) ||
            json_object_get_string_len(v) == 0)
                return sdp_reply_error(req, 400, "sessionId is required");
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        json_object_object_add(o, "count", json_object_new_int(0));
        json_object_object_add(o, "reason", json_object_new_string(teardown_reason(body)));
        sdp_reply_json(req, 200, o);
}

void sdp_kernel_teardown(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        json_object_object_add(o, "count", json_object_new_int(0));
        json_object_object_add(o, "kernelId", json_object_new_string_len(params[0], (int) lens[0]));
        json_object_object_add(o, "reason", json_object_new_string(teardown_reason(body)));
        sdp_reply_json(req, 200, o);
}
