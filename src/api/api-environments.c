/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The environments' endpoints (API.md "Environments", docs/api.md section 14): the list, one
 * environment, its revisions, a PUT (a setup queued), a DELETE, the setups' progress and their
 * retry. The environment manager (environment/env-manager.h) decides; this file maps its
 * refusals to error codes and answers.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "core/manager.h"
#include "environment/env-manager.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/json-util.h"
#include "util/macro.h"

static const HttpError refusal_errors[_ENV_REFUSAL_MAX] = {
        [ENV_REFUSAL_INVALID] = HTTP_ERROR_INVALID_REQUEST,
        [ENV_REFUSAL_UNKNOWN] = HTTP_ERROR_NOT_FOUND,
        [ENV_REFUSAL_NOT_READY] = HTTP_ERROR_ENVIRONMENT_NOT_READY,
        [ENV_REFUSAL_READ_ONLY] = HTTP_ERROR_ENVIRONMENT_READ_ONLY,
        [ENV_REFUSAL_BUSY] = HTTP_ERROR_ENVIRONMENT_BUSY,
        [ENV_REFUSAL_INDEX_URL] = HTTP_ERROR_INDEX_URL_INVALID,
        [ENV_REFUSAL_PACKAGE_SPEC] = HTTP_ERROR_PACKAGE_SPEC_INVALID,
        [ENV_REFUSAL_OFFLINE] = HTTP_ERROR_SOURCE_OFFLINE_UNSUPPORTED,
        [ENV_REFUSAL_CHANNEL] = HTTP_ERROR_CHANNEL_NOT_ALLOWED,
};

HttpError api_environment_refusal_error(EnvRefusal refusal, bool execution) {
        /* An execution that names an unknown environment is a bad request (400), not a missing
         * resource. */
        if (refusal == ENV_REFUSAL_UNKNOWN && execution)
                return HTTP_ERROR_ENVIRONMENT_UNKNOWN;
        if (refusal < 0 || refusal >= _ENV_REFUSAL_MAX)
                return HTTP_ERROR_INTERNAL;
        return refusal_errors[refusal];
}

/* The answer of a manager call on environment @name (NULL: on all of them): its JSON with @status, its
 * refusal, or a failure. */
static void reply(HttpRequest *req, const char *name, int r, unsigned status, json_object *o, EnvRefusal refusal,
                  char *why) {
        _cleanup_(json_object_putp) json_object *owned = o;
        _cleanup_free_ char *w = why;

        if (r == -ENOMEM || (r >= 0 && !owned))
                return http_reply_oom(req);
        if (r < 0 && w)
                return http_reply_error(req, api_environment_refusal_error(refusal, false), "%s.", w);
        if (r < 0 && name)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "Environment '%s' could not be changed: %s.",
                                        name, strerror(-r));
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The environments could not be changed: %s.",
                                        strerror(-r));
        http_reply_json(req, status, owned);
}

/* Without environments (their store could not be opened at start-up): 503, with the reason. */
static bool unavailable(Manager *m, HttpRequest *req) {
        if (m->environments)
                return false;
        http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "Environments are unavailable: %s.",
                         m->environments_error ?: "not set up");
        return true;
}

/* {name} of /environments/{name}[/...]: at most 63 bytes (the manager checks the rest). */
static bool param_name(const char *p, size_t len, char ret[static 64]) {
        if (len == 0 || len > 63 || memchr(p, '\0', len))
                return false;
        memcpy(ret, p, len);
        ret[len] = '\0';
        return true;
}

void api_environments_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                           const char **params, size_t *lens) {
        if (unavailable(m, req))
                return;
        reply(req, NULL, 0, 200, env_manager_list_json(m->environments), 0, NULL);
}

/* An endpoint of one environment ({name} in the path): the manager's call, its answer. */
typedef int (*EnvNameCall)(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                           char **ret_why);

/* @call NULL: PUT @body (a bad name is a bad request there, not an unknown environment). */
static void name_call(Manager *m, HttpRequest *req, const char *p, size_t len, EnvNameCall call, json_object *body,
                      unsigned status) {
        json_object *o = NULL;
        EnvRefusal refusal = 0;
        char *why = NULL, name[64];
        int r;

        if (unavailable(m, req))
                return;
        if (!param_name(p, len, name))
                return call ? http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such environment.") :
                              http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid environment name.");
        if (call)
                r = call(m->environments, name, &o, &refusal, &why);
        else
                r = env_manager_put(m->environments, name, body, &o, &refusal, &why);
        reply(req, name, r, status, o, refusal, why);
}

void api_environment_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                         const char **params, size_t *lens) {
        name_call(m, req, params[0], lens[0], env_manager_show_json, NULL, 200);
}

void api_environment_revisions(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                               const char **params, size_t *lens) {
        name_call(m, req, params[0], lens[0], env_manager_revisions_json, NULL, 200);
}

void api_environment_delete(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens) {
        name_call(m, req, params[0], lens[0], env_manager_remove, NULL, 202);
}

void api_environment_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                         const char **params, size_t *lens) {
        name_call(m, req, params[0], lens[0], NULL, body, 202);
}

void api_environments_setup(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens) {
        if (unavailable(m, req))
                return;
        reply(req, NULL, 0, 200, env_manager_setup_json(m->environments), 0, NULL);
}

void api_environments_retry(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens) {
        const char *name = http_request_query(req, "name");
        json_object *o = NULL;
        EnvRefusal refusal = 0;
        char *why = NULL;
        int r;

        if (unavailable(m, req))
                return;
        r = env_manager_retry(m->environments, name, &o, &refusal, &why);
        reply(req, name, r, 202, o, refusal, why);
}
