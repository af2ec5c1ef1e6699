/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The API's errors: the table of codes and statuses, the errno map, the error body (http-error.h). */

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "http/http-error.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/utf8.h"

/* ---- the API's errors ------------------------------------------------------------------------ */

/* The one table of the API's errors: every code docs/api.md section 3 lists, with its status (a
 * code answered with more than one status, invalid_request, is one row per status, as there).
 * test-http-errors checks this table against that section, both ways. */
static const struct {
        const char *code;
        unsigned status;
} http_error_table[_HTTP_ERROR_MAX] = {
        [HTTP_ERROR_UNAUTHORIZED]                  = { "unauthorized",                  401 },
        [HTTP_ERROR_SIGNATURE_MISSING]             = { "signature_missing",             401 },
        [HTTP_ERROR_SIGNATURE_INVALID]             = { "signature_invalid",             401 },
        [HTTP_ERROR_SIGNATURE_EXPIRED]             = { "signature_expired",             401 },
        [HTTP_ERROR_NOT_FOUND]                     = { "not_found",                     404 },
        [HTTP_ERROR_METHOD_NOT_ALLOWED]            = { "method_not_allowed",            405 },
        [HTTP_ERROR_EXECUTION_ID_CONFLICT]         = { "execution_id_conflict",         409 },
        [HTTP_ERROR_PERSISTENT_KERNEL_UNSUPPORTED] = { "persistent_kernel_unsupported", 400 },
        [HTTP_ERROR_INVALID_REQUEST]               = { "invalid_request",               400 },
        [HTTP_ERROR_BODY_NOT_ALLOWED]              = { "body_not_allowed",              400 },
        [HTTP_ERROR_REF_WORKSPACE_MISMATCH]        = { "ref_workspace_mismatch",        400 },
        [HTTP_ERROR_TARGET_TOO_LONG]               = { "invalid_request",               414 },
        [HTTP_ERROR_UNSUPPORTED_MEDIA_TYPE]        = { "invalid_request",               415 },
        [HTTP_ERROR_TOO_MANY_HEADERS]              = { "invalid_request",               431 },
        [HTTP_ERROR_FORBIDDEN]                     = { "forbidden",                     403 },
        [HTTP_ERROR_PAYLOAD_TOO_LARGE]             = { "payload_too_large",             413 },
        [HTTP_ERROR_SANDBOX_UNAVAILABLE]           = { "sandbox_unavailable",           503 },
        [HTTP_ERROR_INTERNAL]                      = { "internal",                      500 },
        [HTTP_ERROR_WORKSPACE_BUSY]                = { "workspace_busy",                423 },
        [HTTP_ERROR_WORKSPACE_KERNEL]              = { "workspace_busy",                409 },
        [HTTP_ERROR_INSUFFICIENT_STORAGE]          = { "insufficient_storage",          507 },
        [HTTP_ERROR_ENVIRONMENT_UNKNOWN]           = { "environment_unknown",           400 },
        [HTTP_ERROR_ENVIRONMENT_NOT_READY]         = { "environment_not_ready",         409 },
        [HTTP_ERROR_ENVIRONMENT_READ_ONLY]         = { "environment_read_only",         409 },
        [HTTP_ERROR_ENVIRONMENT_BUSY]              = { "environment_busy",              409 },
        [HTTP_ERROR_INDEX_URL_INVALID]             = { "index_url_invalid",             400 },
        [HTTP_ERROR_PACKAGE_SPEC_INVALID]          = { "package_spec_invalid",          400 },
        [HTTP_ERROR_SOURCE_OFFLINE_UNSUPPORTED]    = { "source_offline_unsupported",    400 },
        [HTTP_ERROR_CHANNEL_NOT_ALLOWED]           = { "channel_not_allowed",           400 },
        [HTTP_ERROR_NPU_UNAVAILABLE]               = { "npu_unavailable",               400 },
        [HTTP_ERROR_NPU_CHIP_UNAVAILABLE]          = { "npu_chip_unavailable",          409 },
};

const char *http_error_code(HttpError error) {
        if (error < 0 || error >= _HTTP_ERROR_MAX)
                return NULL;
        return http_error_table[error].code;
}

unsigned http_error_status(HttpError error) {
        if (error < 0 || error >= _HTTP_ERROR_MAX)
                return 500;
        return http_error_table[error].status;
}

HttpError http_error_from_errno(int error) {
        switch (abs(error)) {
        case EINVAL:
        case EBADMSG:
                return HTTP_ERROR_INVALID_REQUEST;
        case EPERM:
        case EACCES:
                return HTTP_ERROR_FORBIDDEN;
        case ENOENT:
                return HTTP_ERROR_NOT_FOUND;
        case EEXIST:
                return HTTP_ERROR_EXECUTION_ID_CONFLICT;
        case E2BIG:
        case EFBIG:
                return HTTP_ERROR_PAYLOAD_TOO_LARGE;
        case EDQUOT:
                return HTTP_ERROR_INSUFFICIENT_STORAGE;
        case EBUSY:
        case EAGAIN:
        case ENOMEM:
                return HTTP_ERROR_SANDBOX_UNAVAILABLE;
        default:
                return HTTP_ERROR_INTERNAL;
        }
}

unsigned http_status_from_errno(int error) {
        return error == 0 ? 200 : http_error_status(http_error_from_errno(error));
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
