/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one table of the API's errors: each kind a JSON "error" code with its HTTP status, the kind
 * of an errno-driven failure, and the {"error", "message"} body. Pure: no request, no server; the
 * server (413 of a body past its cap) and the replies (http-reply.h) both answer through it.
 */
#pragma once

#include <errno.h>

/*
 * HttpError - what went wrong, as a client sees it: each kind is one row of the table of error
 * codes in docs/api.md section 3 (a code with its HTTP status). A handler names the kind; the
 * code and the status come from the one table in http-error.c (http_error_code(),
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
        HTTP_ERROR_WORKSPACE_BUSY,                /* 423 workspace_busy (POST /npu/jobs on a leased workspace) */
        HTTP_ERROR_WORKSPACE_KERNEL,              /* 409 workspace_busy (an execution on a live kernel's workspace) */
        HTTP_ERROR_INSUFFICIENT_STORAGE,          /* 507 insufficient_storage */
        HTTP_ERROR_ENVIRONMENT_UNKNOWN,           /* 400 environment_unknown */
        HTTP_ERROR_ENVIRONMENT_NOT_READY,         /* 409 environment_not_ready */
        HTTP_ERROR_ENVIRONMENT_READ_ONLY,         /* 409 environment_read_only */
        HTTP_ERROR_ENVIRONMENT_BUSY,              /* 409 environment_busy */
        HTTP_ERROR_INDEX_URL_INVALID,             /* 400 index_url_invalid */
        HTTP_ERROR_PACKAGE_SPEC_INVALID,          /* 400 package_spec_invalid */
        HTTP_ERROR_SOURCE_OFFLINE_UNSUPPORTED,    /* 400 source_offline_unsupported */
        HTTP_ERROR_CHANNEL_NOT_ALLOWED,           /* 400 channel_not_allowed */
        HTTP_ERROR_NPU_UNAVAILABLE,               /* 400 npu_unavailable */
        HTTP_ERROR_NPU_CHIP_UNAVAILABLE,          /* 409 npu_chip_unavailable */
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

/*
 * http_error_json() - render {"error": code, "message": message} (message sanitised: control
 * characters dropped). Return: a new string or NULL on OOM.
 */
char *http_error_json(const char *code, const char *message);
