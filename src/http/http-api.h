/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The HTTP API: route table, authentication order, JSON (de)serialisation, errno → HTTP map. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct HttpRequest HttpRequest;
typedef struct Manager Manager;

#define HTTP_JSON_MAX_DEPTH 64
#define HTTP_ROUTE_MAX_PARAMS 4
/* Endpoints that take no body still accept an empty JSON object ("{}", whitespace around it) of
 * at most this many bytes: many clients send one with every POST. */
#define HTTP_EMPTY_BODY_MAX 1024

/* Entry points for HttpServerCallbacks; @userdata is the Manager. */
uint64_t http_api_begin(HttpRequest *req, void *userdata);
void http_api_dispatch(HttpRequest *req, void *userdata);

/* Replies: JSON bodies, and {"error": code, "message": …} with the given status. */
void http_reply_json(HttpRequest *req, unsigned status, json_object *o);
void http_reply_error_full(HttpRequest *req, unsigned status, const char *code, bool close,
                           const char *const *headers, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define http_reply_error(req, status, code, ...) http_reply_error_full(req, status, code, false, NULL, __VA_ARGS__)

/* http_status_from_errno() - the one errno → HTTP status map (STYLE.md §4). */
unsigned http_status_from_errno(int error);

/*
 * http_error_json() - render {"error": code, "message": message} (message sanitised: control
 * characters dropped). Return: a new string or NULL on OOM.
 */
char *http_error_json(const char *code, const char *message);

/*
 * http_json_parse() - parse a request body: strict JSON, valid UTF-8, depth ≤ HTTP_JSON_MAX_DEPTH,
 * no trailing data, an object at the top, no NUL inside strings, no non-finite numbers.
 * Return: 0, -EBADMSG with *ret_why set to a static explanation, -ENOMEM.
 */
int http_json_parse(const char *body, size_t size, json_object **ret, const char **ret_why);

/*
 * http_body_is_empty() - whether a request body counts as "no body": empty, only JSON whitespace,
 * or an empty JSON object with JSON whitespace (space, tab, CR, LF) around and inside it.
 */
bool http_body_is_empty(const void *body, size_t size);

/*
 * http_route_match() - match @path against @pattern, where a "*" segment matches one non-empty
 * segment, a "<ref>" segment a revision ref (the three segments "workspace/<a>/<b>" when the
 * path has them there and the rest of the pattern matches after them, else one segment, like
 * "*"), and a final "**" the non-empty rest; captures go to @params (pointers into @path,
 * lengths in @lens).
 * Return: number of captures (≥ 0) or -ENOENT.
 */
int http_route_match(const char *pattern, const char *path, const char **params, size_t *lens, size_t max);

/*
 * http_revision_ref_parse() - the execution id of a revision ref of workspace @ws: @ref (@len
 * bytes, not NUL-terminated) is either an execution id, or "workspace/<ws>/<executionId>" as
 * GET /workspaces/{ws}/revisions lists it. The id goes to @ret_id.
 * Return: 0; -EXDEV when the ref names another workspace; -EINVAL when it is malformed (not an
 * id, or a "workspace/" ref without exactly two more segments, or with an invalid id).
 */
int http_revision_ref_parse(const char *ref, size_t len, const char *ws, char ret_id[static 129]);
