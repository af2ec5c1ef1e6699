/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The settings endpoints: GET/PUT /api/quota-settings (persisted, journalled) and GET/PUT
 * /api/network-policy (the egress policy and its epochs). May call config/, egress/, core/ and
 * the http/ transport.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "config/settings.h"
#include "core/manager.h"
#include "kernel/kernel.h"
#include "egress/egress-epochs.h"
#include "http/http-reply.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"

void api_quota_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = quota_settings_to_json(&m->quota);

        http_reply_json(req, 200, o);
}

void api_quota_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        QuotaSettings n = m->quota;
        const char *why = NULL;
        int r;

        r = quota_settings_apply_json(&n, body, &why);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid quota settings: %s.", why);
        r = quota_settings_save(m->state_dir, &n);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL,
                                        "The quota settings could not be saved to '%s/settings/quota.json': %s.",
                                        m->state_dir, strerror(-r));
        m->quota = n;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_QUOTA_CHANGED,
                   "SANDBOX_MAX_WORKSPACE_BYTES=%" PRIu64, n.max_workspace_bytes,
                   "SANDBOX_MAX_OUTPUT_BYTES=%" PRIu64, n.max_output_bytes,
                   "SANDBOX_MAX_UPLOAD_FILE_BYTES=%" PRIu64, n.max_upload_file_bytes,
                   "SANDBOX_MAX_UPLOAD_REQUEST_BYTES=%" PRIu64, n.max_upload_request_bytes,
                   "MESSAGE=Quota settings changed: workspace %" PRIu64 ", output %" PRIu64 ", upload file %" PRIu64
                   ", upload request %" PRIu64 " bytes (0 = unlimited); new executions use them.",
                   n.max_workspace_bytes, n.max_output_bytes, n.max_upload_file_bytes, n.max_upload_request_bytes);
        o = quota_settings_to_json(&m->quota);
        http_reply_json(req, 200, o);
}

void api_network_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = egress_current_json(m->egress);

        http_reply_json(req, 200, o);
}

void api_network_put(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                     const char **params, size_t *lens) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = egress_set_policy(m->egress, body, &error);
        if (r == -ENOMEM)
                return http_reply_oom(req);
        if (r == -EINVAL)
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid network policy: %s.", error ?: "bad value");
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "The network policy could not be applied: %s.",
                                        error ?: strerror(-r));
        /* Prespawned kernels started under the old policy: ended, and started anew under this one. */
        kernel_pool_drain(m->kernels);
        api_network_get(m, req, route, body, params, lens);
}
