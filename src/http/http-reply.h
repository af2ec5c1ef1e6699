/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Replies and request parsing of the transport: JSON answers and error bodies (their codes and
 * statuses from http-error.h), strict JSON request bodies, route patterns. May call util/,
 * http-error and http-server only.
 */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http-error.h"

typedef struct HttpRequest HttpRequest;

#define HTTP_JSON_MAX_DEPTH 64
#define HTTP_ROUTE_MAX_PARAMS 4
/* Endpoints that take no body still accept an empty JSON object ("{}", whitespace around it) of
 * at most this many bytes: many clients send one with every POST. */
#define HTTP_EMPTY_BODY_MAX 1024


/* Replies: JSON bodies, and {"error": code, "message": …} with the kind's code and status. */
/* http_reply_json() - @o (not consumed) as the answer; NULL (its allocation failed): http_reply_oom(). */
void http_reply_json(HttpRequest *req, unsigned status, json_object *o);
void http_reply_error_full(HttpRequest *req, HttpError error, bool close, const char *const *headers,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define http_reply_error(req, error, ...) http_reply_error_full(req, error, false, NULL, __VA_ARGS__)

/*
 * http_reply_oom() - answer "Out of memory." as HTTP_ERROR_INTERNAL (500 internal), as every
 * handler always has and docs/api.md section 3 documents ("internal: … out of memory"). This
 * contradicts http_error_from_errno(-ENOMEM) (503 sandbox_unavailable, STYLE.md §4): the status
 * clients see is kept.
 */
void http_reply_oom(HttpRequest *req);


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
