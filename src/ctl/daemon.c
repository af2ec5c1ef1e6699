/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's own state: health (GET /health, no token) and status (GET /status). Each is one
 * request/answer through request.c. */

#include "ctl.h"

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
