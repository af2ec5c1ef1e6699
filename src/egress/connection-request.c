/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The request side of a gateway connection: the first read (a hand-over from the bridge, see
 * handoff.h, or a plain client), reading the request head, and the decision on its target by the
 * policy, which hands an allowed one to resolution (connection-upstream.c). May use egress/ and
 * util/.
 */

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "egress/connection-internal.h"
#include "egress/handoff.h"
#include "util/log.h"

/* ---------------------------------------------------------------------------------------------- */
/* The request head and the decision. */

static int connection_decide(Connection *c) {
        _cleanup_free_ char *canonical = NULL;
        const char *reason = NULL;
        int r;

        c->method = http_method_str(proxy_request_method(&c->request));

        /* The target comes from the request target only, never from Host:. */
        if (proxy_request_is_connect(&c->request))
                r = egress_target_parse_connect(c->request.url, &c->target, &reason);
        else
                r = egress_target_parse_absolute(c->request.url, &c->target, &reason);
        if (r < 0)
                return connection_refuse(c, DECISION_DENIED, 400, reason ?: "malformed request target");
        c->have_target = true;

        /* Already canonical (a fixed point): checked again so that nothing else is ever matched. */
        r = egress_host_canonicalize_full(c->target.host, &canonical, &reason);
        if (r < 0)
                return connection_refuse(c, DECISION_DENIED, 400, reason ?: "malformed host name");
        free(c->target.host);
        c->target.host = STEAL(canonical);

        r = egress_policy_match(c->ctx->policy, c->target.host, c->target.port, &reason);
        if (r <= 0)
                return connection_refuse(c, DECISION_DENIED, 403, reason ?: "not in the allowlist");
        c->allow_reason = reason;

        return connection_resolve(c);
}

/* The first read of an AF_UNIX connection: a hand-over from the bridge (see handoff.h), or the start
 * of a plain client's request. Return: as recv(), with errno set; a hand-over reads 0 bytes but
 * is not the end (c->client_passed is then set and client_fd is the TCP socket). */
static ssize_t connection_first_read(Connection *c) {
        size_t n = 0;
        int passed = -EBADF, r;

        r = handoff_receive(c->client_fd, c->head, PROXY_REQUEST_HEAD_MAX, &n, &passed);
        if (r == -EAGAIN) {
                errno = EAGAIN;
                return -1;
        }
        if (r > 0 && !handoff_guard_available()) {
                safe_close(passed);
                r = -EOPNOTSUPP;
        }
        if (r < 0) {
                log_notice_errno(r, "Refusing a connection of execution %s: %s: %m", c->execution_id,
                                 r == -EBADMSG ? "malformed hand-over (not exactly one descriptor behind the marker)" :
                                 r == -EOPNOTSUPP ? "cannot guard handed-over sockets here" :
                                 "the handed-over descriptor is not a connected TCP socket");
                errno = -r;
                return -1;
        }
        c->client_checked = true;
        if (r == 0)
                return (ssize_t) n;

        /* From now on the client is the TCP socket; the AF_UNIX connection has done its job. */
        r = sd_event_source_set_io_fd(c->client_source, passed);
        if (r < 0) {
                safe_close(passed);
                errno = -r;
                return -1;
        }
        safe_close(c->client_fd);
        c->client_fd = passed;
        c->client_passed = true;
        errno = EAGAIN;
        return -1;
}

int connection_on_head_readable(Connection *c) {
        for (;;) {
                size_t end;
                ssize_t n;
                int r;

                if (c->head_fill >= PROXY_REQUEST_HEAD_MAX)
                        return connection_refuse(c, DECISION_DENIED, 431, "request head too large");

                if (!c->client_checked) {
                        n = connection_first_read(c);
                        if (n < 0 && errno == EAGAIN && c->client_passed)
                                continue;       /* read the head from the handed-over socket right away */
                } else
                        n = recv(c->client_fd, c->head + c->head_fill, PROXY_REQUEST_HEAD_MAX - c->head_fill,
                                 MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
                if (n == 0)
                        return CONNECTION_CLOSE;        /* gone before sending a whole head */
                c->head_fill += (size_t) n;

                r = proxy_request_feed_head(&c->request, c->head, c->head_parsed, c->head_fill, &end);
                if (r < 0) {
                        if (c->request.method_known)
                                c->method = http_method_str(proxy_request_method(&c->request));
                        return connection_refuse(c, DECISION_DENIED, c->request.status ?: 400,
                                                 c->request.error ?: "malformed request");
                }
                c->head_parsed = c->head_fill;
                if (r > 0) {
                        c->head_end = end;
                        return connection_decide(c);
                }
        }
}
