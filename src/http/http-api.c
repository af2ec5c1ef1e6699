/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The HTTP API: route table, authentication order, JSON (de)serialisation, errno → HTTP map. */

#include <dirent.h>
#include <inttypes.h>
#include <nettle/base64.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "build-config.h"
#include "workspace/cas/cas.h"
#include "sandbox/cgroup.h"
#include "util/child-task.h"
#include "egress/egress-epochs.h"
#include "execution/execution.h"
#include "http/http-api.h"
#include "http/http-files.h"
#include "http/http-server.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "core/manager.h"
#include "execution/records.h"
#include "execution/replay.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/utf8.h"
#include "workspace/workspace.h"

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);

typedef enum RouteAuth {
        ROUTE_AUTH_NONE,
        ROUTE_AUTH_BEARER,
        ROUTE_AUTH_SIGNED,              /* bearer + X-Sandbox-Timestamp + X-Sandbox-Signature */
} RouteAuth;

typedef struct Route Route;
typedef void (*RouteHandler)(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                             const char **params, size_t *lens);
/* Streamed bodies: set up a body sink once the headers are in; return the body cap. */
typedef uint64_t (*RouteBegin)(Manager *m, HttpRequest *req, const char **params, size_t *lens);

struct Route {
        const char *method;
        const char *pattern;
        RouteAuth auth;
        bool json_body;
        RouteHandler handler;
        RouteBegin begin;
};

/* ---- pure helpers ---------------------------------------------------------------------------- */

unsigned http_status_from_errno(int error) {
        switch (abs(error)) {
        case 0:
                return 200;
        case EINVAL:
        case EBADMSG:
                return 400;
        case EPERM:
        case EACCES:
                return 403;
        case ENOENT:
                return 404;
        case EEXIST:
                return 409;
        case E2BIG:
        case EFBIG:
                return 413;
        case EDQUOT:
                return 507;
        case EBUSY:
        case EAGAIN:
        case ENOMEM:
                return 503;
        default:
                return 500;
        }
}

char *http_error_json(const char *code, const char *message) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *clean = NULL;
        size_t j = 0;
        char *s;

        clean = strdup(message ?: "");
        if (!clean)
                return NULL;
        for (size_t i = 0; clean[i]; i++)
                if ((unsigned char) clean[i] >= 0x20 && clean[i] != 0x7f)
                        clean[j++] = clean[i];
        clean[j] = '\0';
        /* Messages may quote client input: never let invalid UTF-8 into the JSON answer. */
        if (!utf8_valid(clean, j))
                for (size_t i = 0; i < j; i++)
                        if ((unsigned char) clean[i] >= 0x80)
                                clean[i] = '?';

        o = json_object_new_object();
        if (!o ||
            json_object_object_add(o, "error", json_object_new_string(code ?: "internal")) < 0 ||
            json_object_object_add(o, "message", json_object_new_string(clean)) < 0)
                return NULL;
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        return s;
}

static int json_check(json_object *o, unsigned depth, const char **ret_why) {
        if (depth > HTTP_JSON_MAX_DEPTH) {
                *ret_why = "JSON nesting is too deep";
                return -EBADMSG;
        }
        switch (json_object_get_type(o)) {
        case json_type_string: {
                const char *s = json_object_get_string(o);
                size_t n = (size_t) json_object_get_string_len(o);
                if (strlen(s) != n) {
                        *ret_why = "JSON strings must not contain \\u0000";
                        return -EBADMSG;
                }
                /* Escapes can produce what raw-byte validation cannot see (a lone \\ud800). */
                if (!utf8_valid(s, n)) {
                        *ret_why = "JSON strings must be valid Unicode (no lone surrogates)";
                        return -EBADMSG;
                }
                return 0;
        }
        case json_type_double:
                if (!isfinite(json_object_get_double(o))) {
                        *ret_why = "JSON number out of range";
                        return -EBADMSG;
                }
                return 0;
        case json_type_object: {
                json_object_object_foreach(o, key, val) {
                        int r;
                        if (!utf8_valid(key, strlen(key))) {
                                *ret_why = "JSON keys must be valid Unicode";
                                return -EBADMSG;
                        }
                        r = json_check(val, depth + 1, ret_why);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        int r = json_check(json_object_array_get_idx(o, i), depth + 1, ret_why);
                        if (r < 0)
                                return r;
                }
                return 0;
        case json_type_null:
        case json_type_boolean:
        case json_type_int:
                return 0;
        }
        return 0;
}

int http_json_parse(const char *body, size_t size, json_object **ret, const char **ret_why) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        struct json_tokener *tok;
        enum json_tokener_error err;
        size_t end;
        int r;

        if (size == 0) {
                *ret_why = "the request body is empty; a JSON object is required";
                return -EBADMSG;
        }
        if (size > INT32_MAX) {
                *ret_why = "the request body is too large";
                return -EBADMSG;
        }
        /* What json-c's strict mode still lets through: raw control characters inside strings
         * (JSON allows them only as whitespace between tokens) and single-quoted names. This
         * only follows string boundaries; the parsing itself is json-c's. */
        for (size_t i = 0, in_string = 0; i < size; i++) {
                unsigned char c = (unsigned char) body[i];

                if (c < 0x20 && (in_string || (c != '\t' && c != '\n' && c != '\r'))) {
                        *ret_why = "raw control characters are not allowed in JSON (escape them)";
                        return -EBADMSG;
                }
                if (in_string) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_string = 0;
                } else if (c == '"')
                        in_string = 1;
                else if (c == '\'') {
                        *ret_why = "JSON strings and names must use double quotes";
                        return -EBADMSG;
                }
        }

        tok = json_tokener_new_ex(HTTP_JSON_MAX_DEPTH + 1);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, body, (int) size);
        err = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);

        if (err == json_tokener_continue) {
                *ret_why = "the JSON document is incomplete";
                return -EBADMSG;
        }
        if (err == json_tokener_error_depth) {
                *ret_why = "JSON nesting is too deep";
                return -EBADMSG;
        }
        if (err != json_tokener_success) {
                *ret_why = json_tokener_error_desc(err);
                return -EBADMSG;
        }
        for (; end < size; end++)
                if (!strchr(" \t\r\n", body[end])) {
                        *ret_why = "trailing data after the JSON document";
                        return -EBADMSG;
                }
        if (!json_object_is_type(o, json_type_object)) {
                *ret_why = "the request body must be a JSON object";
                return -EBADMSG;
        }
        r = json_check(o, 1, ret_why);
        if (r < 0)
                return r;
        *ret = STEAL(o);
        return 0;
}

static size_t skip_json_ws(const char *b, size_t i, size_t size) {
        /* JSON whitespace (RFC 8259): space, tab, LF, CR. */
        while (i < size && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
                i++;
        return i;
}

bool http_body_is_empty(const void *body, size_t size) {
        const char *b = body;
        size_t i;

        i = skip_json_ws(b, 0, size);
        if (i == size)
                return true;
        if (b[i] != '{')
                return false;
        i = skip_json_ws(b, i + 1, size);
        if (i == size || b[i] != '}')
                return false;
        return skip_json_ws(b, i + 1, size) == size;
}

static int route_match(const char *p, const char *q, const char **params, size_t *lens, size_t max, size_t n) {
        for (;;) {
                if (*p == '\0' && *q == '\0')
                        return (int) n;
                if (p[0] == '*' && p[1] == '*' && p[2] == '\0') {
                        /* "**" at the end: the (non-empty) rest of the path, slashes included. */
                        size_t l = strlen(q);
                        if (l == 0 || n >= max)
                                return -ENOENT;
                        params[n] = q;
                        lens[n] = l;
                        return (int) n + 1;
                }
                if (strneq(p, "<ref>", 5)) {
                        size_t l;

                        if (n >= max)
                                return -ENOENT;
                        /* The listed form "workspace/<ws>/<id>" first: its slashes are not path
                         * separators here. Only if the rest of the pattern cannot match after
                         * it, the single segment (an execution id, "workspace" included). */
                        if (strneq(q, "workspace/", 10)) {
                                /* (strchr(), not q + 10: gcc's overread check cannot follow that.) */
                                const char *e = strchr(q, '/') + 1;

                                l = strcspn(e, "/");
                                if (l > 0 && e[l] == '/') {
                                        e += l + 1;
                                        l = strcspn(e, "/");
                                        if (l > 0) {
                                                int r = route_match(p + 5, e + l, params, lens, max, n + 1);
                                                if (r >= 0) {
                                                        params[n] = q;
                                                        lens[n] = (size_t) (e + l - q);
                                                        return r;
                                                }
                                        }
                                }
                        }
                        l = strcspn(q, "/");
                        if (l == 0)
                                return -ENOENT;
                        params[n] = q;
                        lens[n] = l;
                        n++;
                        p += 5;
                        q += l;
                        continue;
                }
                if (*p == '*') {
                        size_t l = strcspn(q, "/");
                        if (l == 0 || n >= max)
                                return -ENOENT;
                        params[n] = q;
                        lens[n] = l;
                        n++;
                        p++;
                        q += l;
                        continue;
                }
                if (*p != *q)
                        return -ENOENT;
                p++;
                q++;
        }
}

int http_route_match(const char *pattern, const char *path, const char **params, size_t *lens, size_t max) {
        return route_match(pattern, path, params, lens, max, 0);
}

int http_revision_ref_parse(const char *ref, size_t len, const char *ws, char ret_id[static 129]) {
        const char *id = ref;
        size_t id_len = len;

        if (len >= 10 && strneq(ref, "workspace/", 10)) {
                const char *w = ref + 10, *slash = memchr(w, '/', len - 10);
                size_t w_len;

                if (!slash)
                        return -EINVAL;
                w_len = (size_t) (slash - w);
                id = slash + 1;
                id_len = len - (size_t) (id - ref);
                if (w_len == 0 || memchr(id, '/', id_len))
                        return -EINVAL;
                /* Refused by name, before anything is looked up: another workspace's revisions
                 * are never read through this one. */
                if (w_len != strlen(ws) || !strneq(w, ws, w_len))
                        return -EXDEV;
        }
        if (id_len == 0 || id_len > 128 || memchr(id, '\0', id_len))
                return -EINVAL;
        memcpy(ret_id, id, id_len);
        ret_id[id_len] = '\0';
        return workspace_id_valid(ret_id) ? 0 : -EINVAL;
}

/* ---- replies --------------------------------------------------------------------------------- */

void http_reply_json(HttpRequest *req, unsigned status, json_object *o) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        int r;

        r = http_request_reply(req, status, "application/json", s, strlen(s), false, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to queue a reply, ignoring: %m");
}

void http_reply_error_full(HttpRequest *req, unsigned status, const char *code, bool close,
                          const char *const *headers, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL, *body = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r >= 0)
                body = http_error_json(code, msg);
        if (!body) {
                static const char oom[] = "{\"error\":\"internal\",\"message\":\"Out of memory.\"}";
                (void) http_request_reply(req, 500, "application/json", oom, strlen(oom), true, NULL);
                return;
        }
        r = http_request_reply(req, status, "application/json", body, strlen(body), close, headers);
        if (r < 0)
                log_warning_errno(r, "Failed to queue an error reply, ignoring: %m");
}

#define reply_error(req, status, code, ...) http_reply_error_full(req, status, code, false, NULL, __VA_ARGS__)
#define reply_error_full http_reply_error_full
#define reply_json http_reply_json

static void log_auth_failure(Manager *m, HttpRequest *req, const char *reason) {
        _cleanup_free_ char *path = str_escape_log(http_request_path(req), 256);
        _cleanup_free_ char *method = str_escape_log(http_request_method(req), 32);

        m->n_auth_failures++;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_AUTH_FAILED,
                   "HTTP_METHOD=%s", method ?: "?",
                   "HTTP_PATH=%s", path ?: "?",
                   "HTTP_REQUEST_ID=%" PRIu64, http_request_id(req),
                   "SANDBOX_CLIENT=%s", http_request_client(req),
                   "SANDBOX_REASON=%s", reason,
                   "MESSAGE=Rejected %s '%s' from %s: %s.", method ?: "?", path ?: "?",
                   http_request_client(req), reason);
}

/* ---- handlers -------------------------------------------------------------------------------- */

static json_object *json_u64(uint64_t v) {
        return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v);
}

static void handle_health(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                          const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *runner, *sandbox, *scopes, *net, *ws;
        const char *reason;
        bool can = manager_can_execute(m, &reason) >= 0;

        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        json_object_object_add(o, "status", json_object_new_string(can ? "ok" : "degraded"));
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "uptimeSec", json_u64(manager_uptime_sec(m)));

        sandbox = json_object_new_object();
        json_object_object_add(sandbox, "usable", json_object_new_boolean(m->probe.usable));
        json_object_object_add(sandbox, "proc", json_object_new_string(m->probe.probe.proc_fresh ? "fresh" : "ro-bind"));
        json_object_object_add(sandbox, "disableUserns", json_object_new_boolean(m->probe.probe.disable_userns));
        if (m->probe.bwrap_version)
                json_object_object_add(sandbox, "bwrap", json_object_new_string(m->probe.bwrap_version));
        if (m->probe.reason)
                json_object_object_add(sandbox, "reason", json_object_new_string(m->probe.reason));
        /* The host uid that payloads run as (never 0: a root-started daemon became its user). */
        json_object_object_add(sandbox, "hostUid", json_object_new_int64((int64_t) m->sandbox_uid));
        json_object_object_add(sandbox, "executions", json_object_new_boolean(can));
        if (!can)
                json_object_object_add(sandbox, "executionsRefused", json_object_new_string(reason));
        json_object_object_add(o, "sandbox", sandbox);

        scopes = json_object_new_object();
        json_object_object_add(scopes, "available", json_object_new_boolean(m->scopes_available));
        if (m->scopes_reason)
                json_object_object_add(scopes, "reason", json_object_new_string(m->scopes_reason));
        /* What enforces the limits: a scope, our own cgroups, or (weaker) rlimits only. */
        json_object_object_add(scopes, "mechanism", json_object_new_string(limits_mechanism_to_string(m->limits)));
        if (m->limits == LIMITS_CGROUP)
                json_object_object_add(scopes, "cgroup", json_object_new_string(cgroup_root_describe(m->cgroups)));
        else if (m->limits == LIMITS_RLIMIT && m->cgroups_reason)
                json_object_object_add(scopes, "cgroupReason", json_object_new_string(m->cgroups_reason));
        json_object_object_add(scopes, "limits", json_object_new_string(
                        m->limits == LIMITS_SYSTEMD_SCOPE ? "scope" :
                        m->limits == LIMITS_CGROUP ? "cgroup" :
                        m->config.allow_unscoped ? "rlimit (weaker: memory as address space, tasks counted over the "
                                                   "whole sandbox user, no CPU limit, no accounting)"
                                                 : "none"));
        json_object_object_add(o, "scopes", scopes);

        net = json_object_new_object();
        egress_health(m->egress, net);
        json_object_object_add(o, "sandboxNetwork", net);

        ws = json_object_new_object();
        {
                _cleanup_free_ char *root = NULL;
                uint64_t used, count;
                bool known = manager_workspace_usage(m, &used, &count);

                if (asprintf(&root, "%s/workspaces", m->state_dir) >= 0)
                        json_object_object_add(ws, "root", json_object_new_string(root));
                /* Measured in the background at most every 30 s: null until the first result. */
                json_object_object_add(ws, "usedBytes", known ? json_u64(used) : NULL);
                json_object_object_add(ws, "count", known ? json_u64(count) : NULL);
        }
        json_object_object_add(o, "workspace", ws);

        runner = json_object_new_object();
        json_object_object_add(runner, "maxWorkspaceBytes", json_u64(m->quota.max_workspace_bytes));
        json_object_object_add(runner, "maxFileBytes", json_u64(0));
        json_object_object_add(runner, "maxOutputBytes", json_u64(m->quota.max_output_bytes));
        json_object_object_add(runner, "maxUploadFileBytes", json_u64(m->quota.max_upload_file_bytes));
        json_object_object_add(runner, "maxUploadRequestBytes", json_u64(m->quota.max_upload_request_bytes));
        json_object_object_add(runner, "runningExecutions", json_u64(m->exec.n_running));
        json_object_object_add(o, "runner", runner);
        reply_json(req, 200, o);
}

static void handle_status(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                          const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *conn = json_object_new_object(), *reqs = json_object_new_object();

        if (!o || !conn || !reqs) {
                json_object_put(conn);
                json_object_put(reqs);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "uptimeSec", json_u64(manager_uptime_sec(m)));
        json_object_object_add(o, "socketActivated", json_object_new_boolean(m->socket_activated));
        json_object_object_add(o, "listeners", json_u64(http_server_n_listeners(m->http)));
        json_object_object_add(conn, "open", json_u64(http_server_n_connections(m->http)));
        json_object_object_add(conn, "max", json_u64(m->config.max_connections));
        json_object_object_add(conn, "maxPerClient", json_u64(m->config.max_connections_per_client));
        json_object_object_add(o, "connections", conn);
        json_object_object_add(reqs, "total", json_u64(http_server_n_requests(m->http)));
        json_object_object_add(reqs, "authFailures", json_u64(m->n_auth_failures));
        json_object_object_add(o, "requests", reqs);
        json_object_object_add(o, "idleExitSec", json_u64(m->config.idle_exit_usec / USEC_PER_SEC));
        {
                json_object *ex = json_object_new_object(), *running = json_object_new_array();
                for (Execution *e = m->exec.executions; e; e = execution_next(e))
                        if (!execution_finished(e)) {
                                json_object *x = json_object_new_object();
                                json_object_object_add(x, "executionId", json_object_new_string(execution_id(e)));
                                json_object_object_add(x, "workspaceId", json_object_new_string(execution_workspace(e)));
                                json_object_array_add(running, x);
                        }
                json_object_object_add(ex, "running", running);
                json_object_object_add(ex, "total", json_u64(m->exec.n_total));
                json_object_object_add(o, "executions", ex);
        }
        reply_json(req, 200, o);
}

static void on_execution_done(Execution *e, void *userdata) {
        HttpRequest *req = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *message = NULL;
        int failure;

        http_request_set_userdata(req, NULL, NULL);
        failure = execution_failure(e, &message);
        if (failure == -ENOENT)
                reply_error(req, 400, "invalid_request", "%s.", message ?: "not found");
        else if (failure < 0)
                reply_error(req, 503, "sandbox_unavailable", "The sandbox could not be started: %s.",
                            message ?: "unknown error");
        else {
                o = execution_to_json(e);
                if (o)
                        reply_json(req, 200, o);
                else
                        reply_error(req, 500, "internal", "Out of memory.");
        }
        execution_free_later(e);
}

static void on_request_gone(HttpRequest *req, void *userdata) {
        Execution *e = userdata;

        /* API.md: a client that disconnects from a synchronous request aborts its run. */
        execution_detach(e);
        execution_cancel(e, EXECUTION_STATUS_CANCELLED);
}

/* Validate and create an execution; on any refusal the reply is sent and NULL returned. */
static Execution *prepare_execution(Manager *m, HttpRequest *req, json_object *body, ExecutionKind kind) {
        _cleanup_(execution_request_freep) ExecutionRequest *er = NULL;
        _cleanup_free_ char *why = NULL;
        ExecutionMaxima max = {
                .default_timeout_usec = m->config.default_timeout_usec,
                .max_timeout_usec = m->config.max_timeout_usec,
                .memory_max = m->config.memory_max,
                .tasks_max = m->config.tasks_max,
                .cpu_quota_percent = m->config.cpu_quota_percent,
        };
        const char *reason;
        Execution *e;
        struct timespec ts;
        int r;

        r = execution_request_parse(body, kind, &max, &er, &why);
        if (r == -EPROTONOSUPPORT) {
                reply_error(req, 400, "persistent_kernel_unsupported",
                            "kernelMode 'persistent' is not supported; use 'ephemeral' or omit it.");
                return NULL;
        }
        if (r == -ENOMEM) {
                reply_error(req, 500, "internal", "Out of memory.");
                return NULL;
        }
        if (r < 0) {
                reply_error(req, 400, "invalid_request", "Invalid request: %s.", why ?: "bad field");
                return NULL;
        }

        r = manager_can_execute(m, &reason);
        if (r < 0) {
                reply_error(req, 503, "sandbox_unavailable", "Executions are refused: %s.", reason);
                return NULL;
        }

        if (er->execution_id) {
                Execution *old = execution_find(&m->exec, er->execution_id);

                (void) clock_gettime(CLOCK_MONOTONIC, &ts);
                r = replay_table_check_and_insert(m->replay, er->execution_id,
                                                  (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000);
                if (r == -EEXIST || (old && !execution_finished(old))) {
                        reply_error(req, 409, "execution_id_conflict",
                                    r == -EEXIST ? "executionId '%s' was used within the last 60 s."
                                                 : "executionId '%s' belongs to a run that is still active.",
                                    er->execution_id);
                        return NULL;
                }
                if (r < 0) {
                        reply_error(req, 503, "sandbox_unavailable",
                                    "Too many recent executions to track their ids; retry shortly.");
                        return NULL;
                }
        }

        r = execution_new(&m->exec, STEAL(er), &e);
        if (r < 0) {
                reply_error(req, 500, "internal", "Out of memory.");
                return NULL;
        }
        return e;
}

static void handle_execute(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                           const char **params, size_t *lens) {
        Execution *e;

        e = prepare_execution(m, req, body, streq(route->pattern, "/execute-shell") ? EXECUTION_KIND_SHELL
                                                                                   : EXECUTION_KIND_EXECUTE);
        if (!e)
                return;
        http_request_set_userdata(req, e, on_request_gone);
        http_request_suspend(req);
        /* One that cannot start is answered by on_execution_done() all the same. */
        (void) execution_start(e, on_execution_done, req);
}

static void reply_execution_failure(HttpRequest *req, Execution *e) {
        const char *message = NULL;
        int failure = execution_failure(e, &message);

        if (failure == -ENOENT)
                reply_error(req, 400, "invalid_request", "%s.", message ?: "not found");
        else
                reply_error(req, 503, "sandbox_unavailable", "The sandbox could not be started: %s.",
                            message ?: "unknown error");
}

static void handle_shell_create(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                                const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        Execution *e;
        int r;

        e = prepare_execution(m, req, body, EXECUTION_KIND_SHELL);
        if (!e)
                return;
        /* A managed run belongs to nobody's connection: it ends on its own or by cancel. */
        execution_set_managed(e);
        r = execution_start(e, NULL, NULL);
        if (r < 0 && execution_finished(e))
                return reply_execution_failure(req, e);

        o = json_object_new_object();
        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        json_object_object_add(o, "executionId", json_object_new_string(execution_id(e)));
        json_object_object_add(o, "workspaceId", json_object_new_string(execution_workspace(e)));
        json_object_object_add(o, "state", json_object_new_string(execution_finished(e) ? "finished" : "running"));
        reply_json(req, 202, o);
}

/* The id in /shell-executions/{id}/...: copied out of the path and validated. */
static int param_id(const char **params, size_t *lens, char buf[static 129]) {
        if (lens[0] == 0 || lens[0] > 128)
                return -EINVAL;
        memcpy(buf, params[0], lens[0]);
        buf[lens[0]] = '\0';
        return workspace_id_valid(buf) ? 0 : -EINVAL;
}

static void handle_shell_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                             const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char id[129];
        Execution *e;
        int r;

        if (param_id(params, lens, id) < 0)
                return reply_error(req, 404, "not_found", "No such execution.");
        e = execution_find(&m->exec, id);
        if (e)
                o = execution_record_json(e);
        else {
                r = record_read(m->records_fd, id, &o);
                if (r == -ENOENT || r == -EINVAL)
                        return reply_error(req, 404, "not_found", "No execution '%s' is known.", id);
                if (r < 0)
                        return reply_error(req, 500, "internal", "The record of '%s' cannot be read.", id);
                /* Bookkeeping for recovery, not for clients. */
                json_object_object_del(o, "daemonPid");
                json_object_object_del(o, "daemonStartTime");
        }
        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        reply_json(req, 200, o);
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

static void handle_shell_logs(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                              const char **params, size_t *lens) {
        const char *stream = http_request_query(req, "stream") ?: "stdout";
        const char *offset_s = http_request_query(req, "offset"), *follow_s = http_request_query(req, "follow");
        _cleanup_close_ int fd = -EBADF;
        char id[129], next[32], name[16];
        uint64_t offset = 0;
        RecordStream s;
        struct stat st;
        Execution *e;
        bool follow = false;
        int r;

        if (param_id(params, lens, id) < 0)
                return reply_error(req, 404, "not_found", "No such execution.");
        s = record_stream_from_string(stream);
        if (s < 0)
                return reply_error(req, 400, "invalid_request", "stream must be 'stdout' or 'stderr'.");
        if (offset_s) {
                char *end = NULL;
                errno = 0;
                unsigned long long v = strtoull(offset_s, &end, 10);
                if (errno != 0 || !end || *end || offset_s[0] < '0' || offset_s[0] > '9')
                        return reply_error(req, 400, "invalid_request", "offset must be a byte offset (decimal).");
                offset = v;
        }
        if (follow_s) {
                if (!streq(follow_s, "0") && !streq(follow_s, "1"))
                        return reply_error(req, 400, "invalid_request", "follow must be 0 or 1.");
                follow = streq(follow_s, "1");
        }

        fd = record_log_open(m->records_fd, id, s);
        if (fd < 0)
                return reply_error(req, 404, "not_found", "No %s log for execution '%s' (only managed runs keep logs).",
                                   stream, id);
        if (fstat(fd, &st) < 0)
                return reply_error(req, 500, "internal", "The log cannot be read.");
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
                        reply_error(req, 500, "internal", "Out of memory.");
                return;
        }

        /* Follow: stream from the offset until the run ends; the client's next offset is the
         * offset it asked for plus the bytes it received. */
        LogFollow *f = calloc(1, sizeof(*f));
        if (!f)
                return reply_error(req, 500, "internal", "Out of memory.");
        *f = (LogFollow) { .fd = STEAL_FD(fd), .offset = offset };
        r = execution_watch_add(e, log_follow_wake, f, &f->watch);
        if (r < 0) {
                log_follow_free(f);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        r = http_request_reply_stream(req, 200, "application/octet-stream", MHD_SIZE_UNKNOWN, log_follow_read,
                                      log_follow_free, f, NULL, &f->stream);
        if (r < 0) {
                log_follow_free(f);
                reply_error(req, 500, "internal", "Out of memory.");
        }
}

static void handle_shell_cancel(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                                const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char id[129];
        Execution *e;

        if (param_id(params, lens, id) < 0)
                return reply_error(req, 404, "not_found", "No such execution.");
        e = execution_find(&m->exec, id);
        if (!e) {
                json_object *rec = NULL;
                if (record_read(m->records_fd, id, &rec) < 0)
                        return reply_error(req, 404, "not_found", "No execution '%s' is known.", id);
                json_object_put(rec);
        } else if (!execution_finished(e))
                execution_cancel(e, EXECUTION_STATUS_CANCELLED);

        o = json_object_new_object();
        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        json_object_object_add(o, "executionId", json_object_new_string(id));
        json_object_object_add(o, "state", json_object_new_string(
                        e && !execution_finished(e) ? "cancelling" : "finished"));
        reply_json(req, 202, o);
}

static void handle_quota_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                             const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = quota_settings_to_json(&m->quota);

        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        reply_json(req, 200, o);
}

static void handle_quota_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                             const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        QuotaSettings n = m->quota;
        const char *why = NULL;
        int r;

        r = quota_settings_apply_json(&n, body, &why);
        if (r < 0)
                return reply_error(req, 400, "invalid_request", "Invalid quota settings: %s.", why);
        r = quota_settings_save(m->state_dir, &n);
        if (r < 0)
                return reply_error(req, 500, "internal", "The settings could not be saved: %s.", strerror(-r));
        m->quota = n;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_QUOTA_CHANGED,
                   "SANDBOX_MAX_WORKSPACE_BYTES=%" PRIu64, n.max_workspace_bytes,
                   "SANDBOX_MAX_OUTPUT_BYTES=%" PRIu64, n.max_output_bytes,
                   "SANDBOX_MAX_UPLOAD_FILE_BYTES=%" PRIu64, n.max_upload_file_bytes,
                   "SANDBOX_MAX_UPLOAD_REQUEST_BYTES=%" PRIu64, n.max_upload_request_bytes,
                   "MESSAGE=Quota settings changed: workspace %" PRIu64 ", output %" PRIu64 ", upload file %" PRIu64
                   ", upload request %" PRIu64 " bytes (0 = unlimited); new executions use them.",
                   n.max_workspace_bytes, n.max_output_bytes, n.max_upload_file_bytes, n.max_upload_request_bytes);
        o = quota_settings_to_json(&m->quota);
        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        reply_json(req, 200, o);
}

typedef struct Teardown {
        HttpRequest *req;
        json_object *stopped;
        ExecutionWatch **watches;
        size_t n_watches;
        bool replied;
        bool setting_up;                  /* cancelling: runs may finish synchronously */
} Teardown;

static void teardown_free(Teardown *t) {
        for (size_t i = 0; i < t->n_watches; i++)
                execution_watch_free(t->watches[i]);
        free(t->watches);
        json_object_put(t->stopped);
        free(t);
}

static void teardown_check(void *userdata) {
        Teardown *t = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (t->setting_up)
                return;
        for (size_t i = 0; i < t->n_watches; i++)
                if (execution_watch_alive(t->watches[i]) &&
                    !execution_finished(execution_watch_execution(t->watches[i])))
                        return;
        if (t->req) {
                http_request_set_userdata(t->req, NULL, NULL);
                o = json_object_new_object();
                if (o) {
                        json_object_object_add(o, "stopped", json_object_get(t->stopped));
                        reply_json(t->req, 200, o);
                } else
                        reply_error(t->req, 500, "internal", "Out of memory.");
        }
        teardown_free(t);
}

static void on_teardown_gone(HttpRequest *req, void *userdata) {
        Teardown *t = userdata;

        /* The runs are stopped anyway; only nobody waits for the answer now. */
        t->req = NULL;
}

static void handle_teardown(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens) {
        char ws[129];
        Teardown *t;

        if (lens[0] == 0 || lens[0] > 128)
                return reply_error(req, 404, "not_found", "No such workspace.");
        memcpy(ws, params[0], lens[0]);
        ws[lens[0]] = '\0';
        if (!workspace_id_valid(ws))
                return reply_error(req, 404, "not_found", "No such workspace.");

        t = calloc(1, sizeof(*t));
        if (!t || !(t->stopped = json_object_new_array())) {
                free(t);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        t->req = req;
        for (Execution *e = m->exec.executions; e; e = execution_next(e)) {
                ExecutionWatch **w;

                if (execution_finished(e) || !streq(execution_workspace(e), ws))
                        continue;
                w = realloc(t->watches, sizeof(*w) * (t->n_watches + 1));
                if (!w)
                        break;
                t->watches = w;
                if (execution_watch_add(e, teardown_check, t, &t->watches[t->n_watches]) < 0)
                        break;
                t->n_watches++;
                json_object_array_add(t->stopped, json_object_new_string(execution_id(e)));
        }
        http_request_set_userdata(req, t, on_teardown_gone);
        http_request_suspend(req);
        /* Cancel after all watches are in place: a run may finish synchronously (one still waiting
         * for the lease does), and the answer must wait until the loop is through. */
        t->setting_up = true;
        for (size_t i = 0; i < t->n_watches; i++)
                if (execution_watch_alive(t->watches[i]))
                        execution_cancel(execution_watch_execution(t->watches[i]), EXECUTION_STATUS_CANCELLED);
        t->setting_up = false;
        teardown_check(t);
}

static void handle_network_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                               const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = egress_current_json(m->egress);

        if (!o)
                return reply_error(req, 500, "internal", "Out of memory.");
        reply_json(req, 200, o);
}

static void handle_network_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                               const char **params, size_t *lens) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = egress_set_policy(m->egress, body, &error);
        if (r == -ENOMEM)
                return reply_error(req, 500, "internal", "Out of memory.");
        if (r == -EINVAL)
                return reply_error(req, 400, "invalid_request", "Invalid network policy: %s.", error ?: "bad value");
        if (r < 0)
                return reply_error(req, 500, "internal", "The network policy could not be applied: %s.", strerror(-r));
        handle_network_get(m, req, route, body, params, lens);
}

/* ---- revisions (content-addressed snapshots) ---------------------------------------------- */

static int copy_param(const char *p, size_t l, char *buf, size_t size) {
        if (l == 0 || l >= size)
                return -EINVAL;
        memcpy(buf, p, l);
        buf[l] = '\0';
        return 0;
}

/* {ws} of /workspaces/{ws}/...: copied out of the path and validated. */
static int revision_ws_param(const char **params, size_t *lens, char ws[static 129]) {
        if (copy_param(params[0], lens[0], ws, 129) < 0 || !workspace_id_valid(ws))
                return -EINVAL;
        return 0;
}

/* The answer to a ref that http_revision_ref_parse() refused with @error. */
static void reply_bad_ref(HttpRequest *req, int error, const char *ws, const char *ref, size_t len) {
        int l = (int) MIN(len, (size_t) 300);

        if (error == -EXDEV)
                return reply_error(req, 400, "ref_workspace_mismatch",
                                   "The ref '%.*s' is a revision of another workspace, not of '%s'.", l, ref, ws);
        reply_error(req, 404, "not_found", "Workspace '%s' has no revision '%.*s'.", ws, l, ref);
}

static json_object *ref_json(const char *ws, const CasRef *r) {
        json_object *o = json_object_new_object();
        char *name = NULL;

        if (!o || asprintf(&name, "workspace/%s/%s", ws, r->exec_id) < 0) {
                json_object_put(o);
                return NULL;
        }
        json_object_object_add(o, "ref", json_object_new_string(name));
        json_object_object_add(o, "executionId", json_object_new_string(r->exec_id));
        json_object_object_add(o, "createdAt", json_u64(r->created_ms));
        json_object_object_add(o, "bytes", json_u64(r->bytes));
        json_object_object_add(o, "tree", json_object_new_string(r->tree));
        free(name);
        return o;
}

static void handle_revisions(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                             const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *list;
        CasRef *refs = NULL;
        size_t n = 0;
        char ws[129];
        int r;

        if (revision_ws_param(params, lens, ws) < 0)
                return reply_error(req, 404, "not_found", "No such workspace.");
        r = cas_list_refs(m->cas, ws, &refs, &n);
        if (r < 0 && r != -ENOENT)
                return reply_error(req, 500, "internal", "The revisions cannot be listed: %s.", strerror(-r));
        o = json_object_new_object();
        list = json_object_new_array();
        if (!o || !list) {
                json_object_put(list);
                cas_refs_free(refs, n);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        for (size_t i = 0; i < n; i++)
                json_object_array_add(list, ref_json(ws, &refs[i]));
        cas_refs_free(refs, n);
        json_object_object_add(o, "workspaceId", json_object_new_string(ws));
        json_object_object_add(o, "revisions", list);
        reply_json(req, 200, o);
}

/* {ws} and {ref} (an executionId, or "workspace/<ws>/<executionId>" with its slashes, as the
 * routes' "<ref>" captures it). On any refusal the reply is sent and < 0 returned. */
static int read_revision(Manager *m, HttpRequest *req, const char **params, size_t *lens, char *ws, CasRef *ret) {
        char id[129];
        int r;

        if (revision_ws_param(params, lens, ws) < 0) {
                reply_error(req, 404, "not_found", "No such workspace.");
                return -ENOENT;
        }
        r = http_revision_ref_parse(params[1], lens[1], ws, id);
        if (r < 0) {
                reply_bad_ref(req, r, ws, params[1], lens[1]);
                return r;
        }
        r = cas_read_ref(m->cas, ws, id, ret);
        if (r == -ENOENT || r == -EINVAL) {
                reply_error(req, 404, "not_found", "Workspace '%s' has no revision '%s'.", ws, id);
                return -ENOENT;
        }
        if (r < 0) {
                reply_error(req, 500, "internal", "The revision cannot be read: %s.", strerror(-r));
                return r;
        }
        return 0;
}

static void handle_revision_tree(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                                 const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *dir = http_request_query(req, "dir") ?: "";
        CasRef ref = {};
        CasEntry *entries = NULL;
        json_object *list;
        size_t n = 0;
        char ws[129];
        int r;

        if (read_revision(m, req, params, lens, ws, &ref) < 0)
                return;
        r = cas_tree_list(m->cas, ref.tree, dir, &entries, &n);
        cas_ref_done(&ref);
        if (r == -ENOENT || r == -ENOTDIR || r == -EINVAL)
                return reply_error(req, 404, "not_found", "No directory '%s' in this revision.", dir);
        if (r < 0)
                return reply_error(req, 500, "internal", "The tree cannot be read: %s.", strerror(-r));
        o = json_object_new_object();
        list = json_object_new_array();
        size_t unlisted = 0;
        for (size_t i = 0; o && list && i < n; i++) {
                json_object *e;
                const CasEntry *c = &entries[i];

                /* Names a client cannot address (not UTF-8, control bytes) are counted, not sent. */
                if (!utf8_valid(c->name, strlen(c->name)) || strpbrk(c->name, "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") ||
                    (c->target && !utf8_valid(c->target, strlen(c->target)))) {
                        unlisted++;
                        continue;
                }
                e = json_object_new_object();
                json_object_object_add(e, "name", json_object_new_string(c->name));
                json_object_object_add(e, "type", json_object_new_string(
                                c->type == DT_DIR ? "dir" : c->type == DT_LNK ? "symlink" : "file"));
                json_object_object_add(e, "size", json_u64(c->size));
                json_object_object_add(e, "mode", json_object_new_int((int) c->mode));
                if (c->type == DT_REG && strneq(c->digest, "sha256:", 7))
                        json_object_object_add(e, "sha256", json_object_new_string(c->digest + 7));
                if (c->target)
                        json_object_object_add(e, "target", json_object_new_string(c->target));
                json_object_array_add(list, e);
        }
        cas_entries_free(entries, n);
        if (!o || !list) {
                json_object_put(list);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        json_object_object_add(o, "entries", list);
        if (unlisted > 0)
                json_object_object_add(o, "unlisted", json_u64(unlisted));
        reply_json(req, 200, o);
}

/* "sha256:<hex>" → the Repr-Digest value "sha-256=:<base64>:". */
static int repr_digest_from_hex(const char *digest, char *buf, size_t size) {
        uint8_t raw[32];
        char b64[BASE64_ENCODE_RAW_LENGTH(32) + 1];

        if (!strneq(digest, "sha256:", 7) || strlen(digest + 7) != 64)
                return -EINVAL;
        for (size_t i = 0; i < 32; i++) {
                unsigned v;
                if (sscanf(digest + 7 + 2 * i, "%2x", &v) != 1)
                        return -EINVAL;
                raw[i] = (uint8_t) v;
        }
        base64_encode_raw(b64, sizeof(raw), raw);
        b64[BASE64_ENCODE_RAW_LENGTH(32)] = '\0';
        return snprintf(buf, size, "sha-256=:%s:", b64) < (int) size ? 0 : -ENOBUFS;
}

static void handle_revision_file(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                                 const char **params, size_t *lens) {
        _cleanup_free_ char *path = NULL;
        char ws[129], digest[72], repr[96];
        CasRef ref = {};
        uint64_t size;
        int fd = -EBADF, r;

        if (read_revision(m, req, params, lens, ws, &ref) < 0)
                return;
        path = strndup(params[2], lens[2]);
        if (!path) {
                cas_ref_done(&ref);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        r = cas_open_file(m->cas, ref.tree, path, &fd, &size, digest);
        cas_ref_done(&ref);
        if (r == -EISDIR || r == -ELOOP)
                return reply_error(req, 404, "not_found", "'%s' is not a regular file in this revision.", path);
        if (r == -ENOENT || r == -ENOTDIR || r == -EINVAL)
                return reply_error(req, 404, "not_found", "No file '%s' in this revision.", path);
        if (r < 0)
                return reply_error(req, 500, "internal", "The file cannot be read: %s.", strerror(-r));
        if (repr_digest_from_hex(digest, repr, sizeof(repr)) < 0) {
                safe_close(fd);
                return reply_error(req, 500, "internal", "Corrupt digest.");
        }
        const char *const hdr[] = { "Repr-Digest", repr, "X-Sandbox-SHA256", digest + 7, NULL };
        r = http_request_reply_fd(req, 200, "application/octet-stream", fd, 0, size, hdr);
        if (r < 0)
                reply_error(req, 500, "internal", "Out of memory.");
}

typedef struct Restore {
        Manager *manager;
        HttpRequest *req;
        char ws[129];
        char *tree;
        char *ref_name;
        int ws_fd, lease_fd;
        sd_event_source *retry;
        ChildTask *task;
} Restore;

static void restore_free(Restore *x) {
        x->retry = sd_event_source_disable_unref(x->retry);
        x->task = child_task_free(x->task);
        safe_close(x->lease_fd);
        safe_close(x->ws_fd);
        manager_busy_unref(x->manager);
        free(x->tree);
        free(x->ref_name);
        free(x);
}

static void on_restore_gone(HttpRequest *req, void *userdata) {
        Restore *x = userdata;
        x->req = NULL;   /* the restore completes anyway; nobody waits for the answer */
}

static void restore_reply(Restore *x, int error) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (x->req) {
                http_request_set_userdata(x->req, NULL, NULL);
                if (error < 0)
                        reply_error(x->req, 500, "internal", "The restore failed: %s.", strerror(-error));
                else if ((o = json_object_new_object())) {
                        json_object_object_add(o, "workspaceId", json_object_new_string(x->ws));
                        json_object_object_add(o, "restored", json_object_new_string(x->ref_name));
                        json_object_object_add(o, "tree", json_object_new_string(x->tree));
                        reply_json(x->req, 200, o);
                } else
                        reply_error(x->req, 500, "internal", "Out of memory.");
        }
        restore_free(x);
}

static int restore_child(int out_fd, void *userdata) {
        Restore *x = userdata;
        return cas_restore(x->manager->cas, x->tree, x->manager->workspaces_fd, x->ws);
}

static void on_restore_done(ChildTask *t, int error, const char *out, void *userdata) {
        Restore *x = userdata;

        x->task = child_task_free(x->task);
        restore_reply(x, error);
}

static int on_restore_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Restore *x = userdata;
        int r;

        r = workspace_lease_try(x->ws_fd);
        if (r == -EWOULDBLOCK) {
                /* A run (here or in another process) holds the workspace: wait for it. */
                (void) sd_event_source_set_time_relative(s, 50 * USEC_PER_MSEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        x->retry = sd_event_source_disable_unref(x->retry);
        if (r < 0) {
                restore_reply(x, r);
                return 0;
        }
        x->lease_fd = r;
        r = child_task_start(x->manager->event, restore_child, on_restore_done, x, &x->task);
        if (r < 0)
                restore_reply(x, r);
        return 0;
}

/* A copy of @ref with "%2F" (either case) as '/': clients also send a ref as it appears in their
 * URLs, percent-encoded, and no valid ref contains a '%' otherwise. Return: NULL on OOM. */
static char *ref_unescape_slashes(const char *ref) {
        char *s = strdup(ref), *w = s;

        if (!s)
                return NULL;
        for (const char *p = ref; *p;)
                if (p[0] == '%' && p[1] == '2' && (p[2] == 'F' || p[2] == 'f')) {
                        *w++ = '/';
                        p += 3;
                } else
                        *w++ = *p++;
        *w = '\0';
        return s;
}

static void handle_restore(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                           const char **params, size_t *lens) {
        _cleanup_free_ char *unescaped = NULL;
        json_object *v;
        const char *ref_s;
        char ws[129], exec[129];
        CasRef ref = {};
        Restore *x;
        int r;

        if (revision_ws_param(params, lens, ws) < 0)
                return reply_error(req, 404, "not_found", "No such workspace.");
        json_object_object_foreach(body, key, val) {
                (void) val;
                if (!streq(key, "ref"))
                        return reply_error(req, 400, "invalid_request", "Unknown field '%.64s' (only 'ref').", key);
        }
        if (!json_object_object_get_ex(body, "ref", &v) || !json_object_is_type(v, json_type_string))
                return reply_error(req, 400, "invalid_request", "'ref' (a revision of this workspace) is required.");
        /* "workspace/<ws>/<executionId>" as listed, or just the executionId. */
        ref_s = unescaped = ref_unescape_slashes(json_object_get_string(v));
        if (!ref_s)
                return reply_error(req, 500, "internal", "Out of memory.");
        r = http_revision_ref_parse(ref_s, strlen(ref_s), ws, exec);
        if (r < 0)
                return reply_bad_ref(req, r, ws, ref_s, strlen(ref_s));
        r = cas_read_ref(m->cas, ws, exec, &ref);
        if (r == -ENOENT || r == -EINVAL)
                return reply_error(req, 404, "not_found", "Workspace '%s' has no revision '%s'.", ws, exec);
        if (r < 0)
                return reply_error(req, 500, "internal", "The revision cannot be read: %s.", strerror(-r));

        x = calloc(1, sizeof(*x));
        if (!x) {
                cas_ref_done(&ref);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        *x = (Restore) { .manager = m, .req = req, .ws_fd = -EBADF, .lease_fd = -EBADF, .tree = STEAL(ref.tree) };
        cas_ref_done(&ref);
        memcpy(x->ws, ws, sizeof(x->ws));
        manager_busy_ref(m);
        if (asprintf(&x->ref_name, "workspace/%s/%s", ws, exec) < 0) {
                x->ref_name = NULL;
                restore_free(x);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        x->ws_fd = workspace_open(m->workspaces_fd, ws);
        if (x->ws_fd < 0) {
                r = x->ws_fd;
                restore_free(x);
                return reply_error(req, 500, "internal", "The workspace cannot be opened: %s.", strerror(-r));
        }
        r = sd_event_add_time_relative(m->event, &x->retry, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_restore_retry, x);
        if (r < 0) {
                restore_free(x);
                return reply_error(req, 500, "internal", "Out of memory.");
        }
        http_request_set_userdata(req, x, on_restore_gone);
        http_request_suspend(req);
}

static void handle_files_upload(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                                const char **params, size_t *lens) {
        http_files_upload_finish(m, req);
}

static void handle_files_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                             const char **params, size_t *lens) {
        http_files_get(m, req, params, lens);
}

static void handle_files_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                              const char **params, size_t *lens) {
        http_files_list(m, req, params, lens);
}

static void handle_files_delete(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                                const char **params, size_t *lens) {
        http_files_delete(m, req, params, lens);
}

static const Route routes[] = {
        { "GET",  "/health",        ROUTE_AUTH_NONE,   false, handle_health },
        { "GET",  "/status",        ROUTE_AUTH_BEARER, false, handle_status },
        { "POST", "/execute",       ROUTE_AUTH_SIGNED, true,  handle_execute },
        { "POST", "/execute-shell", ROUTE_AUTH_SIGNED, true,  handle_execute },
        { "POST", "/shell-executions",          ROUTE_AUTH_SIGNED, true,  handle_shell_create },
        { "GET",  "/shell-executions/*",        ROUTE_AUTH_BEARER, false, handle_shell_get },
        { "GET",  "/shell-executions/*/logs",   ROUTE_AUTH_BEARER, false, handle_shell_logs },
        { "POST", "/shell-executions/*/cancel", ROUTE_AUTH_SIGNED, false, handle_shell_cancel },
        { "POST", "/workspaces/*/teardown",     ROUTE_AUTH_BEARER, false, handle_teardown },
        { "PUT",  "/workspaces/*/files/**",     ROUTE_AUTH_BEARER, false, handle_files_upload, http_files_put_begin },
        { "POST", "/workspaces/*/files",        ROUTE_AUTH_BEARER, false, handle_files_upload, http_files_post_begin },
        { "GET",  "/workspaces/*/files/**",     ROUTE_AUTH_BEARER, false, handle_files_get },
        { "GET",  "/workspaces/*/files",        ROUTE_AUTH_BEARER, false, handle_files_list },
        { "DELETE", "/workspaces/*/files/**",   ROUTE_AUTH_BEARER, false, handle_files_delete },
        { "GET",  "/workspaces/*/revisions",    ROUTE_AUTH_BEARER, false, handle_revisions },
        /* <ref>: an executionId or, slashes and all, the listed "workspace/<ws>/<executionId>". */
        { "GET",  "/workspaces/*/revisions/<ref>/tree",     ROUTE_AUTH_BEARER, false, handle_revision_tree },
        { "GET",  "/workspaces/*/revisions/<ref>/files",    ROUTE_AUTH_BEARER, false, handle_revision_tree },
        { "GET",  "/workspaces/*/revisions/<ref>/files/**", ROUTE_AUTH_BEARER, false, handle_revision_file },
        { "POST", "/workspaces/*/restore",      ROUTE_AUTH_BEARER, true,  handle_restore },
        { "GET",  "/api/network-policy",        ROUTE_AUTH_BEARER, false, handle_network_get },
        { "PUT",  "/api/network-policy",        ROUTE_AUTH_BEARER, true,  handle_network_put },
        { "GET",  "/api/quota-settings",        ROUTE_AUTH_BEARER, false, handle_quota_get },
        { "PUT",  "/api/quota-settings",        ROUTE_AUTH_BEARER, true,  handle_quota_put },
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
                reply_error_full(req, 400, "invalid_request", true, NULL, "Invalid Content-Length.");
                return 0;
        }
        if (v <= cap)
                return cap;
        if (no_body)
                reply_error_full(req, 413, "payload_too_large", true, NULL,
                                 "This endpoint takes no body (an empty JSON object {} of at most %" PRIu64
                                 " bytes is tolerated).", cap);
        else
                reply_error_full(req, 413, "payload_too_large", true, NULL,
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

        if (strlen(http_request_target(req)) > MAX_TARGET_BYTES) {
                reply_error_full(req, 414, "invalid_request", true, NULL,
                                 "The request target is longer than %u bytes.", MAX_TARGET_BYTES);
                return 0;
        }
        /* libmicrohttpd decodes %00 into the path and so cuts it short: refuse it instead. */
        if (strcasestr(http_request_target(req), "%00")) {
                reply_error_full(req, 400, "invalid_request", true, NULL, "NUL (%%00) is not allowed in a request target.");
                return 0;
        }
        if (http_request_n_headers(req) > MAX_HEADERS) {
                reply_error_full(req, 431, "invalid_request", true, NULL,
                                 "The request has more than %u header fields.", MAX_HEADERS);
                return 0;
        }
        /* Request smuggling: refuse ambiguous framing outright and close the connection. */
        if (http_request_header_count(req, "Content-Length") > 1 ||
            (http_request_header_count(req, "Content-Length") > 0 &&
             http_request_header_count(req, "Transfer-Encoding") > 0) ||
            http_request_header_count(req, "Transfer-Encoding") > 1) {
                reply_error_full(req, 400, "invalid_request", true, NULL,
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
                reply_error_full(req, 405, "method_not_allowed", false, hdr,
                                 "Method %s is not allowed here; allowed: %s.",
                                 strlen(method) <= 16 ? method : "(long)", allow);
                return 0;
        }
        if (!route) {
                reply_error(req, 404, "not_found", "No such endpoint.");
                return 0;
        }

        if (route->auth != ROUTE_AUTH_NONE) {
                r = auth_check_bearer(m->secrets.token, http_request_header(req, "Authorization"));
                if (r < 0) {
                        log_auth_failure(m, req, r == -ENODATA ? "missing bearer token" : "wrong bearer token");
                        reply_error_full(req, 401, "unauthorized", false, www_authenticate,
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
                reply_error_full(req, 415, "invalid_request", true, NULL,
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

        for (size_t i = 0; i < ELEMENTSOF(routes); i++)
                if (streq(routes[i].method, http_request_method(req)) &&
                    http_route_match(routes[i].pattern, http_request_path(req), params, lens,
                                     HTTP_ROUTE_MAX_PARAMS) >= 0) {
                        route = &routes[i];
                        break;
                }
        if (!route)
                return reply_error(req, 404, "not_found", "No such endpoint.");

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
                        log_auth_failure(m, req, "signature missing");
                        return reply_error(req, 401, "signature_missing",
                                           "X-Sandbox-Timestamp and X-Sandbox-Signature are required on this endpoint.");
                case -EBADMSG:
                        log_auth_failure(m, req, "signature malformed");
                        return reply_error(req, 401, "signature_invalid",
                                           "X-Sandbox-Timestamp must be decimal Unix seconds and X-Sandbox-Signature 'v1=' followed by 64 lowercase hex digits.");
                case -ETIME:
                        log_auth_failure(m, req, "signature timestamp outside the window");
                        return reply_error(req, 401, "signature_expired",
                                           "X-Sandbox-Timestamp is more than %" PRIu64 " s away from the server's clock.",
                                           m->config.signature_max_skew_usec / USEC_PER_SEC);
                default:
                        log_auth_failure(m, req, "signature mismatch");
                        return reply_error(req, 401, "signature_invalid",
                                           "The request signature does not match (check the signing key, the path with query, and the body hash).");
                }
        }

        if (!route->json_body && !route->begin) {
                size_t size;
                const void *data = http_request_body(req, &size);

                /* After the signature: a signed request's body is interpreted only once it matched. */
                if (!http_body_is_empty(data, size))
                        return reply_error(req, 400, "body_not_allowed",
                                           "This endpoint takes no body; send none, or an empty JSON object ({}).");
        }

        if (route->json_body) {
                const char *why = NULL;
                size_t size;
                const char *data = http_request_body(req, &size);

                r = http_json_parse(data, size, &body, &why);
                if (r == -ENOMEM)
                        return reply_error(req, 500, "internal", "Out of memory.");
                if (r < 0)
                        return reply_error(req, 400, "invalid_request", "Invalid JSON body: %s.", why);
        }

        route->handler(m, req, route, body, params, lens);
}
