/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU endpoints (API.md "NPU and other devices", docs/api.md section 10): GET /npu/chips,
 * what the NPU manager (npu/npu-manager.h) found and who holds each chip.
 */

#include <errno.h>

#include "api/api-internal.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "npu/npu-manager.h"
#include "util/json-util.h"

void api_npu_chips(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (!m->npu)
                return http_reply_error(req, HTTP_ERROR_NPU_UNAVAILABLE, "%s.",
                                        !m->config.npu_enable ? "Chips and devices are not enabled on this runner ([NPU] Enable=no)"
                                        : m->npu_error ?: "Chips and devices are unavailable");
        o = npu_manager_chips_json(m->npu);
        if (!o)
                return http_reply_oom(req);
        http_reply_json(req, 200, o);
}
