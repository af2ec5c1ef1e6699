/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Replies and request parsing of the transport: JSON answers and error bodies, strict JSON request
 * bodies, route patterns, and the one table of the API's errors (code and HTTP status of each).
 * May call util/ and http-server only.
 */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct HttpRequest HttpRequest;

#define HTTP_JSON_MAX_DEPTH 64
#define HTTP_ROUTE_MAX_PARAMS 4
/* Endpoints that take no body still accept an empty JSON object ("{}", whitespace around it) of
 * at most this many bytes: many clients send one with every POST. */
#define HTTP_EMPTY_BODY_MAX 1024

/*
 * HttpError - what went wrong, as a client sees it: each kind is one row of the table of error
 * codes in docs/api.md section 3 (a code with its HTTP status). A handler names the kind; the
 * code and the status come from the one table in http-reply.c (http_error_code(),
 * http_error_status()), and nowhere else. invalid_request is answered with four statuses: one kind
 * each.
 */
typedef enum HttpError {
        HTTP_ERROR_UNAUTHORIZED,                  /* 401 unauthorized */
        HTTP_ERROR_SIGNATURE_MISSING,             /* 401 signature_missing */
        HTTP_ERROR_SIGNATURE_INVALID,             /* 401 signature_invalid */
        HTTP_ERROR_SIGNATURE_EXPIRED,             /* 401 signature_expired */
        HTTP_ERROR_NOT_FOUND,                     /* 404 not_found */
        HTTP_ERROR_METHOD_NOT_ALLOWED,            /* 405 method_not_allowed */
        HTTP_ERROR_EXECUTION_ID_CONFLICT,         /* 409 execution_id_conflict */
        HTTP_ERROR_PERSISTENT_KERNEL_UNSUPPORTED, /* 400 persistent_kernel_unsupported */
        HTTP_ERROR_INVALID_REQUEST,               /* 400 invalid_request */
        HTTP_ERROR_BODY_NOT_ALLOWED,              /* 400 body_not_allowed */
        HTTP_ERROR_REF_WORKSPACE_MISMATCH,        /* 400 ref_workspace_mismatch */
        HTTP_ERROR_TARGET_TOO_LONG,               /* 414 invalid_request */
        HTTP_ERROR_UNSUPPORTED_MEDIA_TYPE,        /* 415 invalid_request */
        HTTP_ERROR_TOO_MANY_HEADERS,              /* 431 invalid_request */
        HTTP_ERROR_FORBIDDEN,                     /* 403 forbidden */
        HTTP_ERROR_PAYLOAD_TOO_LARGE,             /* 413 payload_too_large */
        HTTP_ERROR_SANDBOX_UNAVAILABLE,           /* 503 sandbox_unavailable */
        HTTP_ERROR_INTERNAL,                      /* 500 internal */
        HTTP_ERROR_WORKSPACE_BUSY,                /* 423 workspace_busy (planned: nothing answers it yet) */
        HTTP_ERROR_INSUFFICIENT_STORAGE,          /* 507 insufficient_storage */
        _HTTP_ERROR_MAX,
        _HTTP_ERROR_INVALID = -EINVAL,
} HttpError;

/* The JSON "error" code and the HTTP status of @error; NULL and 500 for an invalid kind. */
const char *http_error_code(HttpError error);
unsigned http_error_status(HttpError error);

/*
 * http_error_from_errno() - the kind of an errno-driven failure (STYLE.md §4): EINVAL/EBADMSG
 * invalid_request, EPERM/EACCES forbidden, ENOENT not_found, EEXIST execution_id_conflict,
 * E2BIG/EFBIG payload_too_large, EDQUOT insufficient_storage, EBUSY/EAGAIN/ENOMEM
 * sandbox_unavailable, anything else internal. Handlers that answer differently for an errno
 * name the kind themselves (and say why where it contradicts this map).
 */
HttpError http_error_from_errno(int error);

/* http_status_from_errno() - the status of http_error_from_errno(@error); 200 for 0. */
unsigned http_status_from_errno(int error);

/* Replies: JSON bodies, and {"error": code, "message": …} with the kind's code and status. */
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
