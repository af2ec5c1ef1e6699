/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Kernel Gateway API's front: which paths are its own, its route table, its token check
 * ("Authorization: token T" or "Bearer T", and "?token=T" on the WebSocket only, as browsers
 * cannot set headers there), the body it accepts (none, or a JSON object) and its error shape.
 * Served on our API's listener when the kernels are enabled (Manager.kernels); kg-*.c reach the
 * kernels only through src/kernel/kernel.h. May call core/ (the Manager's token, config), the
 * http/ transport and the handlers of kg-kernels.c and kg-channels.c.
 */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/kg-internal.h"
#include "api/kg.h"
#include "core/manager.h"
#include "http/auth.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "http/websocket.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/string-util.h"

typedef struct KgRoute {
        const char *method;
        const char *pattern;
        bool takes_body;                  /* a JSON object, or nothing */
        bool websocket;                   /* ?token= accepted */
        KgHandler handler;
} KgRoute;

static const KgRoute kg_routes[] = {
        { "GET",    "/api",                          false, false, kg_api_version },
        { "GET",    "/api/kernelspecs",              false, false, kg_kernelspecs },
        { "GET",    "/api/kernelspecs/*",            false, false, kg_kernelspec },
        { "GET",    "/api/kernels",                  false, false, kg_kernels_list },
        { "POST",   "/api/kernels",                  true,  false, kg_kernel_create },
        { "GET",    "/api/kernels/*",                false, false, kg_kernel_get },
        { "DELETE", "/api/kernels/*",                false, false, kg_kernel_delete },
        { "POST",   "/api/kernels/*/interrupt",      true,  false, kg_kernel_interrupt },
        { "POST",   "/api/kernels/*/restart",        true,  false, kg_kernel_restart },
        { "POST",   "/api/kernels/*/execute",        true,  false, kg_kernel_execute },
        { "GET",    "/api/kernels/*/channels",       false, true,  kg_channels },
        { "GET",    "/api/sessions",                 false, false, kg_sessions },
        { "POST",   "/api/sessions",                 true,  false, kg_sessions },
        { "GET",    "/api/sessions/**",              false, false, kg_sessions },
};

bool kg_api_path(const char *path) {
        static const char *const prefixes[] = { "/api/kernels", "/api/kernelspecs", "/api/sessions", "/kernelspecs" };

        if (!path)
                return false;
        if (streq(path, "/api") || streq(path, "/api/"))
                return true;
        for (size_t i = 0; i < ELEMENTSOF(prefixes); i++) {
                size_t l = strlen(prefixes[i]);
                if (strneq(path, prefixes[i], l) && (path[l] == '\0' || path[l] == '/'))
                        return true;
        }
        return false;
}

uint64_t kg_max_message_bytes(const Manager *m) {
        /* [Kernels] MaxMessageBytes= (at least 64K, config_validate()); the default where unset. */
        return m->config.kernels_max_message_bytes ?: WEBSOCKET_MAX_MESSAGE_DEFAULT;
}

const char *kg_status_reason(unsigned status) {
        switch (status) {
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 409: return "Conflict";
        case 413: return "Payload Too Large";
        case 426: return "Upgrade Required";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        default:  return "Error";
        }
}

void kg_reply_error(HttpRequest *req, unsigned status, const char *fmt, ...) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        o = json_object_new_object();
        if (o) {
                json_object_object_add(o, "reason", json_object_new_string(kg_status_reason(status)));
                json_object_object_add(o, "message", json_object_new_string(msg ?: "Out of memory."));
        }
        http_reply_json(req, status, o);
}

int kg_param_kernel_id(const char *p, size_t len, char ret[static 65]) {
        unsigned dashes = 0;
        bool word = false;

        if (len == 0 || len > 64)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (p[i] == '-') {
                        if (!word)
                                return -EINVAL;
                        dashes++;
                        word = false;
                } else if (isalnum((unsigned char) p[i]) || p[i] == '_')
                        word = true;
                else
                        return -EINVAL;
        }
        if (dashes != 4 || !word)
                return -EINVAL;
        memcpy(ret, p, len);
        ret[len] = '\0';
        return 0;
}

/* The token of "Authorization: token T" / "Bearer T", or of ?token= where @query_ok. */
static int kg_auth(Manager *m, HttpRequest *req, bool query_ok, const char **ret_owner) {
        const char *a = http_request_header(req, "Authorization"), *t = NULL;

        if (a) {
                if (str_has_prefix_ci(a, "token "))
                        t = a + 6;
                else if (str_has_prefix_ci(a, "bearer "))
                        t = a + 7;
                if (t)
                        t += strspn(t, " ");
        }
        if (!t && query_ok)
                t = http_request_query(req, "token");
        if (!t || !m->secrets.token)
                return -ENODATA;
        if (!auth_secret_equal(t, strlen(t), m->secrets.token, strlen(m->secrets.token)))
                return -EACCES;
        /* One token configured: one credential. */
        *ret_owner = KG_OWNER_API_TOKEN;
        return 0;
}

static const KgRoute *kg_route_find(HttpRequest *req, const char **params, size_t *lens, char *allow, size_t allow_size) {
        const char *path = http_request_path(req), *method = http_request_method(req);

        for (size_t i = 0; i < ELEMENTSOF(kg_routes); i++) {
                if (http_route_match(kg_routes[i].pattern, path, params, lens, HTTP_ROUTE_MAX_PARAMS) < 0)
                        continue;
                if (streq(kg_routes[i].method, method))
                        return &kg_routes[i];
                if (allow && strlen(allow) + strlen(kg_routes[i].method) + 3 < allow_size) {
                        if (allow[0])
                                strcat(allow, ", ");
                        strcat(allow, kg_routes[i].method);
                }
        }
        return NULL;
}

uint64_t kg_api_begin(HttpRequest *req, void *userdata) {
        Manager *m = userdata;
        const char *params[HTTP_ROUTE_MAX_PARAMS];
        size_t lens[HTTP_ROUTE_MAX_PARAMS];
        const char *owner = NULL;
        char allow[64] = "";
        const KgRoute *route;
        int r;

        route = kg_route_find(req, params, lens, allow, sizeof(allow));
        if (!route && allow[0]) {
                const char *const hdr[] = { "Allow", allow, NULL };
                _cleanup_free_ char *body = NULL;

                body = strdup("{\"reason\":\"Method Not Allowed\",\"message\":\"Method not allowed here.\"}");
                if (!body || http_request_reply(req, 405, "application/json", body, strlen(body), false, hdr) < 0)
                        http_reply_oom(req);
                return 0;
        }
        if (!route) {
                kg_reply_error(req, 404, "Not found: %s", "no such endpoint of the Kernel Gateway API");
                return 0;
        }
        r = kg_auth(m, req, route->websocket, &owner);
        if (r < 0) {
                api_log_auth_failure(m, req, r == -ENODATA ? "missing token" : "wrong token");
                kg_reply_error(req, 401, r == -ENODATA ?
                               "A token is required (Authorization: token <token>, or Bearer)." :
                               "The token is not valid.");
                return 0;
        }
        /* A body past its cap is answered in our shape by dispatch(), not the transport's. */
        http_request_own_too_large(req);
        if (!route->takes_body)
                return HTTP_EMPTY_BODY_MAX;   /* "{}" is tolerated, checked once it is in */
        return m->config.max_request_body_bytes;
}

void kg_api_dispatch(HttpRequest *req, void *userdata) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        const char *params[HTTP_ROUTE_MAX_PARAMS] = {};
        size_t lens[HTTP_ROUTE_MAX_PARAMS] = {};
        Manager *m = userdata;
        const char *owner = NULL;
        const KgRoute *route;
        const char *data;
        uint64_t cap;
        size_t size;
        int r;

        route = kg_route_find(req, params, lens, NULL, 0);
        if (!route)
                return kg_reply_error(req, 404, "Not found.");
        /* Checked in begin(); again for the owner. */
        if (kg_auth(m, req, route->websocket, &owner) < 0)
                return kg_reply_error(req, 401, "The token is not valid.");

        data = http_request_body(req, &size);
        if (http_request_too_large(req, &cap))
                return kg_reply_error(req, 413, "The request body exceeds %" PRIu64 " bytes.", cap);
        if (!http_body_is_empty(data, size)) {
                const char *why = NULL;

                if (!route->takes_body)
                        return kg_reply_error(req, 400, "This endpoint takes no body; send none, or {}.");
                r = http_json_parse(data, size, &body, &why);
                if (r == -ENOMEM)
                        return http_reply_oom(req);
                if (r < 0)
                        return kg_reply_error(req, 400, "Invalid JSON body: %s.", why);
        }
        route->handler(m, req, owner, body, params, lens);
}
