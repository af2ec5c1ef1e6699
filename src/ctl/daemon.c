/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's own state: health (GET /health, no token), status (GET /status), and check (GET
 * /health judged item by item, check-util.c). Each is one request/answer through request.c. */

#include "check-util.h"
#include "ctl.h"
#include "output.h"

static const char *const daemon_first[] = { "status", "version", "uptimeSec", NULL };

int verb_health(const CtlOptions *o, int argc, char *argv[]) {
        return request_and_show(o,
                                &(const Request) {
                                        .method = "GET",
                                        .path = "/health",
                                        .timeout_usec = o->timeout_usec,
                                },
                                daemon_first);
}

int verb_status(const CtlOptions *o, int argc, char *argv[]) {
        return request_and_show(o,
                                &(const Request) {
                                        .method = "GET",
                                        .path = "/status",
                                        .need_token = true,
                                        .timeout_usec = o->timeout_usec,
                                },
                                daemon_first);
}

int verb_check(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *health = NULL, *report = NULL;
        int r;

        r = request(o,
                    &(const Request) {
                            .method = "GET",
                            .path = "/health",
                            .timeout_usec = o->timeout_usec,
                    },
                    &health);
        if (r != 0)
                return r;
        if (check_from_health(health, &report) < 0)
                return log_oom();
        r = o->json ? output_json(stdout, report) : check_format(stdout, report);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0) {
                log_error("Failed to write the report.");
                return CTL_EXIT_FAILURE;
        }
        /* 0 when no item failed (warnings do not count), as sandbox-runnerd --check. */
        return check_report_ok(report) ? 0 : CTL_EXIT_FAILURE;
}
