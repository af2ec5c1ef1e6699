/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the API's files share: the route table's types and the handlers each resource file
 * (api-health.c, api-executions.c, api-workspaces.c, api-files.c, api-settings.c) gives to the
 * table in api-routes.c. Handlers answer every request they get (a reply, or a suspension that
 * ends in one); errors go through http_reply_error() with an HttpError kind.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/json-util.h"
#include "util/macro.h"

typedef struct HttpRequest HttpRequest;
typedef struct Manager Manager;

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

/* api-routes.c: an id in a path ({ws} of /workspaces/{ws}/..., {id} of /shell-executions/{id}):
 * @len bytes at @p copied to @ret and validated. Return: 0, or -EINVAL when it is not a valid id. */
int api_param_id(const char *p, size_t len, char ret[static 129]);

/* api_log_auth_failure() - count a refused credential and log it (SR_MESSAGE_AUTH_FAILED with the
 * method, path, client and @reason); our own API's and the Kernel Gateway routes'. */
void api_log_auth_failure(Manager *m, HttpRequest *req, const char *reason);

/* api-routes.c: the "offset" query parameter of a log read, decimal digits only; 0 when absent.
 * Return: 0, or -EINVAL for anything else (the caller answers 400). */
int api_query_offset(const HttpRequest *req, uint64_t *ret);

/* api-health.c */
void api_health(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                const char **params, size_t *lens);
void api_status(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                const char **params, size_t *lens);

/* api-executions.c */
void api_execute(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                 const char **params, size_t *lens);
void api_shell_create(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens);
void api_shell_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens);
void api_shell_logs(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                    const char **params, size_t *lens);
void api_shell_cancel(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens);

/* api-workspaces.c */
void api_teardown(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                  const char **params, size_t *lens);
void api_revisions(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens);
void api_revision_tree(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens);
void api_revision_file(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens);
void api_restore(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                 const char **params, size_t *lens);

/* api-settings.c */
void api_quota_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens);
void api_quota_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens);
void api_network_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens);
void api_network_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens);

/* api-environments.c: the environments (docs/api.md section 14). */
#include "environment/env-manager.h"
#include "http/http-error.h"
HttpError api_environment_refusal_error(EnvRefusal refusal, bool execution);
void api_environments_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                           const char **params, size_t *lens);
void api_environment_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                         const char **params, size_t *lens);
void api_environment_revisions(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                               const char **params, size_t *lens);
void api_environment_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                         const char **params, size_t *lens);
void api_environment_delete(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens);
void api_environments_setup(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens);
void api_environments_retry(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                            const char **params, size_t *lens);

/* api-files.c: workspace files. Begin hooks (headers in, no body yet) may reply; else they set up
 * the body sink. Return: the body cap. */
uint64_t api_files_put_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);
uint64_t api_files_post_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);
void api_files_upload(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens);
void api_files_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens);
void api_files_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                    const char **params, size_t *lens);
void api_files_delete(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens);

/* api-npu.c: chips and devices (docs/api.md section 10). */
void api_npu_chips(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens);
void api_npu_workloads(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens);
void api_npu_job_create(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                        const char **params, size_t *lens);
void api_npu_jobs_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens);
void api_npu_job_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens);
void api_npu_job_log(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens);
void api_npu_job_result(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                        const char **params, size_t *lens);
void api_npu_job_cancel(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                        const char **params, size_t *lens);
