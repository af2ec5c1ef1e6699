/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Kernel Gateway API (issue 22, docs/api.md section 16, docs/kernels.md): what its three files
 * share. kg-routes.c is the front (paths, token, body), kg-kernels.c the REST handlers,
 * kg-channels.c the WebSocket of a kernel. Errors are Jupyter's {"reason", "message"}, not our
 * API's {"error", "message"}. They reach the kernels only through src/kernel/kernel.h.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

typedef struct HttpRequest HttpRequest;
typedef struct Manager Manager;

/* Who asks: the name of the credential the request authenticated with. Listing and every id
 * route see only the kernels of their credential. */
#define KG_OWNER_API_TOKEN "api-token"

typedef void (*KgHandler)(Manager *m, HttpRequest *req, const char *owner, json_object *body,
                          const char **params, size_t *lens);

/* kg-routes.c: {"reason": the status's phrase, "message": ...}. */
void kg_reply_error(HttpRequest *req, unsigned status, const char *fmt, ...) _printf_(3, 4);
/* The reason phrase of @status ("Not Found"). */
const char *kg_status_reason(unsigned status);
/* A kernel id of a path (@len bytes at @p) into @ret: Jupyter's \w+-\w+-\w+-\w+-\w+ (a UUID).
 * Return: 0 or -EINVAL. */
int kg_param_kernel_id(const char *p, size_t len, char ret[static 65]);

/* kg-routes.c: the largest message a client may send on a kernel's WebSocket ([Kernels]
 * MaxMessageBytes=, 16 MiB by default). */
uint64_t kg_max_message_bytes(const Manager *m);

/* kg-kernels.c: the kernel of the path's {id} that @owner may see, or NULL with the 404 sent. */
typedef struct Kernel Kernel;
Kernel *kg_kernel_of(Manager *m, HttpRequest *req, const char *owner, const char **params, size_t *lens);

/* kg-execute.c: POST /api/kernels/{id}/execute, ours (kg-execute.h). */
void kg_kernel_execute(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params,
                       size_t *lens);

/* kg-kernels.c */
void kg_api_version(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernelspecs(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernelspec(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernels_list(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernel_create(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernel_get(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernel_delete(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernel_interrupt(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_kernel_restart(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
void kg_sessions(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);

/* kg-kernels.c: the start request of a POST body (validated; env filtered to KERNEL_* strings).
 * Return: 0, -EBADMSG with *@ret_why, -ENOMEM. @ret_env is a new object the caller puts. */
typedef struct KernelStartRequest KernelStartRequest;
int kg_start_request_parse(json_object *body, const char *owner, KernelStartRequest *ret,
                           json_object **ret_env, const char **ret_why);

/* kg-channels.c: GET /api/kernels/{id}/channels, the WebSocket. */
void kg_channels(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens);
