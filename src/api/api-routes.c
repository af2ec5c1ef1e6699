/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The HTTP API's front: the route table, and the order every request goes through before a
 * resource's handler runs (target and framing limits, route and method, bearer token, Content-Type
 * and Content-Length; once the body is in: signature, body checks, JSON parse). Logs
 * authentication failures. May call core/ (the Manager's secrets, config, counters), the http/
 * transport and the handlers of api-*.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api-internal.h"
#include "api/api.h"
#include "api/kg.h"
#include "api/sd-api.h"
#include "build-config.h"
#include "core/manager.h"
#include "http/auth.h"
#include "util/dialect.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "workspace/workspace.h"

int api_param_id(const char *p, size_t len, char ret[static 129]) {
        if (len == 0 || len > 128)
                return -EINVAL;
        memcpy(ret, p, len);
        ret[len] = '\0';
        return workspace_id_valid(ret) ? 0 : -EINVAL;
}

int api_query_offset(const HttpRequest *req, uint64_t *ret) {
        const char *s = http_request_query(req, "offset");
        unsigned long long v;
        char *end = NULL;

        if (!s) {
                *ret = 0;
                return 0;
        }
        if (s[0] < '0' || s[0] > '9')
                return -EINVAL;         /* strtoull() would take a sign or white space */
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || !end || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

static const Route routes[] = {
        { "GET",  "/health",        ROUTE_AUTH_NONE,   false, api_health },
        { "GET",  "/status",        ROUTE_AUTH_BEARER, false, api_status },
        { "POST", "/execute",       ROUTE_AUTH_SIGNED, true,  api_execute },
        { "POST", "/execute-shell", ROUTE_AUTH_SIGNED, true,  api_execute },
        { "POST", "/shell-executions",          ROUTE_AUTH_SIGNED, true,  api_shell_create },
        { "GET",  "/shell-executions/*",        ROUTE_AUTH_BEARER, false, api_shell_get },
        { "GET",  "/shell-executions/*/logs",   ROUTE_AUTH_BEARER, false, api_shell_logs },
        { "POST", "/shell-executions/*/cancel", ROUTE_AUTH_SIGNED, false, api_shell_cancel },
        { "POST", "/workspaces/*/teardown",     ROUTE_AUTH_BEARER, false, api_teardown },
        { "PUT",  "/workspaces/*/files/**",     ROUTE_AUTH_BEARER, false, api_files_upload, api_files_put_begin },
        { "POST", "/workspaces/*/files",        ROUTE_AUTH_BEARER, false, api_files_upload, api_files_post_begin },
        { "GET",  "/workspaces/*/files/**",     ROUTE_AUTH_BEARER, false, api_files_get },
        { "GET",  "/workspaces/*/files",        ROUTE_AUTH_BEARER, false, api_files_list },
        { "DELETE", "/workspaces/*/files/**",   ROUTE_AUTH_BEARER, false, api_files_delete },
        { "GET",  "/workspaces/*/revisions",    ROUTE_AUTH_BEARER, false, api_revisions },
        /* <ref>: an executionId or, slashes and all, the listed "workspace/<ws>/<executionId>". */
        { "GET",  "/workspaces/*/revisions/<ref>/tree",     ROUTE_AUTH_BEARER, false, api_revision_tree },
        { "GET",  "/workspaces/*/revisions/<ref>/files",    ROUTE_AUTH_BEARER, false, api_revision_tree },
        { "GET",  "/workspaces/*/revisions/<ref>/files/**", ROUTE_AUTH_BEARER, false, api_revision_file },
        { "POST", "/workspaces/*/restore",      ROUTE_AUTH_BEARER, true,  api_restore },
        { "GET",  "/api/network-policy",        ROUTE_AUTH_BEARER, false, api_network_get },
        { "PUT",  "/api/network-policy",        ROUTE_AUTH_BEARER, true,  api_network_put },
        { "GET",  "/api/quota-settings",        ROUTE_AUTH_BEARER, false, api_quota_get },
        { "GET",  "/environments",              ROUTE_AUTH_BEARER, false, api_environments_list },
        { "GET",  "/environments/setup",        ROUTE_AUTH_BEARER, false, api_environments_setup },
        { "POST", "/environments/setup/retry",  ROUTE_AUTH_BEARER, false, api_environments_retry },
        { "GET",  "/environments/*",            ROUTE_AUTH_BEARER, false, api_environment_get },
        { "PUT",  "/environments/*",            ROUTE_AUTH_BEARER, true,  api_environment_put },
        { "DELETE", "/environments/*",          ROUTE_AUTH_BEARER, false, api_environment_delete },
        { "GET",  "/environments/*/revisions",  ROUTE_AUTH_BEARER, false, api_environment_revisions },
        { "PUT",  "/api/quota-settings",        ROUTE_AUTH_BEARER, true,  api_quota_put },
        { "GET",  "/npu/chips",                 ROUTE_AUTH_BEARER, false, api_npu_chips },
        { "GET",  "/npu/workloads",             ROUTE_AUTH_BEARER, false, api_npu_workloads },
        { "POST", "/npu/jobs",                  ROUTE_AUTH_SIGNED, true,  api_npu_job_create },
        { "GET",  "/npu/jobs",                  ROUTE_AUTH_BEARER, false, api_npu_jobs_list },
        { "GET",  "/npu/jobs/*",                ROUTE_AUTH_BEARER, false, api_npu_job_get },
        { "GET",  "/npu/jobs/*/log",            ROUTE_AUTH_BEARER, false, api_npu_job_log },
        { "GET",  "/npu/jobs/*/result",         ROUTE_AUTH_BEARER, false, api_npu_job_result },
        { "POST", "/npu/jobs/*/cancel",         ROUTE_AUTH_SIGNED, true,  api_npu_job_cancel },
};

/* ---- request flow ---------------------------------------------------------------------------- */

#define MAX_TARGET_BYTES 8192
#define MAX_HEADERS 100

static const char *const www_authenticate[] = {
        "WWW-Authenticate", "Bearer realm=\"sandbox-runner\"", NULL,
};

/* A Content-Length above @cap is refused at once, before the body is read. Return: @cap, or 0
 * when the request was answered. */
static uint64_t check_content_length(HttpRequest *req, uint64_t cap, bool no_body) {
        const char *cl = http_request_header(req, "Content-Length");
        unsigned long long v;
        char *end = NULL;

        if (!cl)
                return cap;
        errno = 0;
        v = strtoull(cl, &end, 10);
        if (errno != 0 || !end || *end || cl[0] < '0' || cl[0] > '9') {
                http_reply_error_full(req, HTTP_ERROR_INVALID_REQUEST, true, NULL, "Invalid Content-Length.");
                return 0;
        }
        if (v <= cap)
                return cap;
        if (no_body)
                http_reply_error_full(req, HTTP_ERROR_PAYLOAD_TOO_LARGE, true, NULL,
                                      "This endpoint takes no body (an empty JSON object {} of at most %" PRIu64
                                      " bytes is tolerated).", cap);
        else
                http_reply_error_full(req, HTTP_ERROR_PAYLOAD_TOO_LARGE, true, NULL,
                                      "The request body exceeds %" PRIu64 " bytes.", cap);
        return 0;
}

uint64_t http_api_begin(HttpRequest *req, void *userdata) {
        Manager *m = userdata;
        const char *path = http_request_path(req), *method = http_request_method(req);
        const char *params[HTTP_ROUTE_MAX_PARAMS];
        size_t lens[HTTP_ROUTE_MAX_PARAMS];
        const Route *route = NULL;
        char allow[64] = "";
        const char *ct;
        int r;

        /* A listener that speaks the ScienceDiscovery dialect: its own table and rules (sd-routes.c). */
        if (http_request_listener_tag(req) == HTTP_DIALECT_SCIENCEDISCOVERY)
                return sdp_api_begin(req, userdata);

        /* The Kernel Gateway API when the kernels are enabled (kg-routes.c); unknown paths otherwise. */
        if (m->kernels && kg_api_path(path))
                return kg_api_begin(req, userdata);

        if (strlen(http_request_target(req)) > MAX_TARGET_BYTES) {
                http_reply_error_full(req, HTTP_ERROR_TARGET_TOO_LONG, true, NULL,
                                      "The request target is longer than %u bytes.", MAX_TARGET_BYTES);
                return 0;
        }
        /* libmicrohttpd decodes %00 into the path and so cuts it short: refuse it instead. */
        if (strcasestr(http_request_target(req), "%00")) {
                http_reply_error_full(req, HTTP_ERROR_INVALID_REQUEST, true, NULL,
                                      "NUL (%%00) is not allowed in a request target.");
                return 0;
        }
        if (http_request_n_headers(req) > MAX_HEADERS) {
                http_reply_error_full(req, HTTP_ERROR_TOO_MANY_HEADERS, true, NULL,
                                      "The request has more than %u header fields.", MAX_HEADERS);
                return 0;
        }
        /* Request smuggling: refuse ambiguous framing outright and close the connection. */
        if (http_request_header_count(req, "Content-Length") > 1 ||
            (http_request_header_count(req, "Content-Length") > 0 &&
             http_request_header_count(req, "Transfer-Encoding") > 0) ||
            http_request_header_count(req, "Transfer-Encoding") > 1) {
                http_reply_error_full(req, HTTP_ERROR_INVALID_REQUEST, true, NULL,
                                      "Ambiguous message framing (Content-Length and Transfer-Encoding).");
                return 0;
        }

        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                if (http_route_match(routes[i].pattern, path, params, lens, HTTP_ROUTE_MAX_PARAMS) < 0)
                        continue;
                if (streq(routes[i].method, method)) {
                        route = &routes[i];
                        break;
                }
                if (strlen(allow) + strlen(routes[i].method) + 3 < sizeof(allow)) {
                        if (allow[0])
                                strcat(allow, ", ");
                        strcat(allow, routes[i].method);
                }
        }
        if (!route && allow[0]) {
                const char *const hdr[] = { "Allow", allow, NULL };
                http_reply_error_full(req, HTTP_ERROR_METHOD_NOT_ALLOWED, false, hdr,
                                      "Method %s is not allowed here; allowed: %s.",
                                      strlen(method) <= 16 ? method : "(long)", allow);
                return 0;
        }
        if (!route) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such endpoint.");
                return 0;
        }

        if (route->auth != ROUTE_AUTH_NONE) {
                r = auth_check_bearer(m->secrets.token, http_request_header(req, "Authorization"));
                if (r < 0) {
                        api_log_auth_failure(m, req, r == -ENODATA ? "missing bearer token" : "wrong bearer token");
                        http_reply_error_full(req, HTTP_ERROR_UNAUTHORIZED, false, www_authenticate,
                                              r == -ENODATA ? "A bearer token is required (Authorization: Bearer <token>)."
                                              : "The bearer token is not valid.");
                        return 0;
                }
        }

        if (route->begin)
                return route->begin(m, req, params, lens);
        if (!route->json_body)
                /* No body is expected, but clients that send "{}" with every request are served:
                 * the (small) body is read and checked in http_api_dispatch(). */
                return check_content_length(req, HTTP_EMPTY_BODY_MAX, true);

        ct = http_request_header(req, "Content-Type");
        if (!ct || !str_has_prefix_ci(ct, "application/json") ||
            (ct[16] != '\0' && ct[16] != ';' && ct[16] != ' ')) {
                http_reply_error_full(req, HTTP_ERROR_UNSUPPORTED_MEDIA_TYPE, true, NULL,
                                      "The request body must be sent as Content-Type: application/json.");
                return 0;
        }
        return check_content_length(req, m->config.max_request_body_bytes, false);
}

void http_api_dispatch(HttpRequest *req, void *userdata) {
        Manager *m = userdata;
        const Route *route = NULL;
        const char *params[HTTP_ROUTE_MAX_PARAMS] = {};
        size_t lens[HTTP_ROUTE_MAX_PARAMS] = {};
        _cleanup_(json_object_putp) json_object *body = NULL;
        int r;

        if (http_request_listener_tag(req) == HTTP_DIALECT_SCIENCEDISCOVERY)
                return sdp_api_dispatch(req, userdata);
        if (m->kernels && kg_api_path(http_request_path(req)))
                return kg_api_dispatch(req, userdata);

        for (size_t i = 0; i < ELEMENTSOF(routes); i++)
                if (streq(routes[i].method, http_request_method(req)) &&
                    http_route_match(routes[i].pattern, http_request_path(req), params, lens,
                                     HTTP_ROUTE_MAX_PARAMS) >= 0) {
                        route = &routes[i];
                        break;
                }
        if (!route)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such endpoint.");

        if (route->auth == ROUTE_AUTH_SIGNED) {
                size_t size;
                const void *data = http_request_body(req, &size);
                struct timespec ts;

                (void) clock_gettime(CLOCK_REALTIME, &ts);
                r = auth_signature_verify(m->secrets.signing_key, m->secrets.signing_key_size,
                                          http_request_header(req, "X-Sandbox-Timestamp"),
                                          http_request_header(req, "X-Sandbox-Signature"),
                                          http_request_method(req), http_request_target(req),
                                          data, size, ts.tv_sec, m->config.signature_max_skew_usec / USEC_PER_SEC);
                switch (r) {
                case 0:
                        break;
                case -ENODATA:
                        api_log_auth_failure(m, req, "signature missing");
                        return http_reply_error(req, HTTP_ERROR_SIGNATURE_MISSING,
                                                "X-Sandbox-Timestamp and X-Sandbox-Signature are required on this endpoint.");
                case -EBADMSG:
                        api_log_auth_failure(m, req, "signature malformed");
                        return http_reply_error(req, HTTP_ERROR_SIGNATURE_INVALID,
                                                "X-Sandbox-Timestamp must be decimal Unix seconds and X-Sandbox-Signature 'v1=' followed by 64 lowercase hex digits.");
                case -ETIME:
                        api_log_auth_failure(m, req, "signature timestamp outside the window");
                        return http_reply_error(req, HTTP_ERROR_SIGNATURE_EXPIRED,
                                                "X-Sandbox-Timestamp is more than %" PRIu64 " s away from the server's clock.",
                                                m->config.signature_max_skew_usec / USEC_PER_SEC);
                default:
                        api_log_auth_failure(m, req, "signature mismatch");
                        return http_reply_error(req, HTTP_ERROR_SIGNATURE_INVALID,
                                                "The request signature does not match (check the signing key, the path with query, and the body hash).");
                }
        }

        if (!route->json_body && !route->begin) {
                size_t size;
                const void *data = http_request_body(req, &size);

                /* After the signature: a signed request's body is interpreted only once it matched. */
                if (!http_body_is_empty(data, size))
                        return http_reply_error(req, HTTP_ERROR_BODY_NOT_ALLOWED,
                                                "This endpoint takes no body; send none, or an empty JSON object ({}).");
        }

        if (route->json_body) {
                const char *why = NULL;
                size_t size;
                const char *data = http_request_body(req, &size);

                r = http_json_parse(data, size, &body, &why);
                if (r == -ENOMEM)
                        return http_reply_oom(req);
                if (r < 0)
                        return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid JSON body: %s.", why);
        }

        route->handler(m, req, route, body, params, lens);
}
