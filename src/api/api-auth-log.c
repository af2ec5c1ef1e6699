/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refused credential, counted and logged (SR_MESSAGE_AUTH_FAILED): our own API's routes and the
 * Kernel Gateway routes. A file of its own, so that kg-routes.c links without the route table.
 */

#include <inttypes.h>

#include "api/api-internal.h"
#include "core/manager.h"
#include "http/http-server.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

void api_log_auth_failure(Manager *m, HttpRequest *req, const char *reason) {
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
