/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The egress gateway's word on a connection: the journal entry of each decision (structured
 * fields, never request bytes) and our own answers (an error reply, then half-close and a short
 * linger), including the 503 for a connection over a cap. May use egress/ and util/.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/connection-internal.h"
#include "egress/egress-log-ids.h"
#include "egress/handoff.h"
#include "util/log.h"

#define LINGER_DISCARD_MAX (256U * 1024U)

/* ---------------------------------------------------------------------------------------------- */
/* Journal entries: one per decision, with host, port, method and the dialled address only — never
 * header values, bodies, paths or queries. */

void connection_log_decision(Connection *c, Decision d, unsigned status, const char *reason) {
        char target[300], result[64];

        /*
         * Every reason is our own text or the policy's (static strings, addresses we formatted),
         * never bytes of the request; the host is canonical (LDH) or absent.
         */
        if (c->have_target && c->target.host)
                (void) snprintf(target, sizeof(target), "%s:%u", connection_host(c), connection_port(c));
        else
                (void) snprintf(target, sizeof(target), "(no valid target)");
        if (d == DECISION_ALLOWED)
                (void) snprintf(result, sizeof(result), "%s", status == 200 ? "tunnel" : "forwarded");
        else
                (void) snprintf(result, sizeof(result), "HTTP %u", status);

        log_struct(d == DECISION_ALLOWED ? LOG_INFO : LOG_NOTICE,
                   "MESSAGE_ID=%s", d == DECISION_ALLOWED ? SR_MESSAGE_EGRESS_ALLOWED :
                                    d == DECISION_DENIED ? SR_MESSAGE_EGRESS_DENIED : SR_MESSAGE_EGRESS_FAILED,
                   "SANDBOX_EGRESS_DECISION=%s", d == DECISION_DENIED ? "denied" : "allowed",
                   "SANDBOX_EGRESS_HOST=%s", connection_host(c),
                   "SANDBOX_EGRESS_PORT=%u", connection_port(c),
                   "SANDBOX_EGRESS_METHOD=%s", c->method ?: "",
                   "SANDBOX_EGRESS_REASON=%s", reason ?: "",
                   "SANDBOX_EGRESS_ADDRESS=%s", c->address,
                   "SANDBOX_EGRESS_STATUS=%u", status,
                   "SANDBOX_EGRESS_REVISION=%s", c->ctx->revision,
                   "SANDBOX_EXECUTION_ID=%s", c->execution_id,
                   "MESSAGE=Egress %s: %s %s%s%s for execution %s: %s (%s, policy revision %s).",
                   d == DECISION_ALLOWED ? "allowed" : d == DECISION_DENIED ? "denied" : "allowed but failed",
                   c->method ?: "request", target,
                   !c->address[0] ? "" : c->via_upstream ? " via the upstream proxy " : " via ", c->address,
                   c->execution_id, reason ?: "", result, c->ctx->revision);
}

/* ---------------------------------------------------------------------------------------------- */
/* Our own answers. */

int connection_reply(Connection *c, unsigned status, const char *body_fmt, ...) {
        _cleanup_free_ char *body = NULL;
        va_list ap;
        int r, n;

        va_start(ap, body_fmt);
        n = vasprintf(&body, body_fmt, ap);
        va_end(ap);
        if (n < 0) {
                body = NULL;
                return -ENOMEM;
        }

        c->reply = mfree(c->reply);
        n = asprintf(&c->reply,
                     "HTTP/1.1 %u %s\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "%s"
                     "Connection: close\r\n"
                     "\r\n"
                     "%s",
                     status, proxy_status_text(status), strlen(body),
                     status == 405 ? "Allow: CONNECT, GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r\n" : "",
                     body);
        if (n < 0) {
                c->reply = NULL;
                return -ENOMEM;
        }
        c->reply_size = (size_t) n;
        c->reply_offset = 0;

        /* Whatever was going on stops here. */
        c->query = resolve_query_cancel(c->query);
        c->upstream_source = sd_event_source_disable_unref(c->upstream_source);
        c->upstream_fd = safe_close(c->upstream_fd);

        c->state = CONNECTION_REPLY;
        r = connection_arm_timer(c, CONNECTION_REPLY_TIMEOUT_USEC);
        if (r < 0)
                return r;
        return connection_update_events(c);
}

/* Log a refusal or failure and answer it. Return: 0, or -errno (then close). */
int connection_refuse(Connection *c, Decision d, unsigned status, const char *reason) {
        connection_log_decision(c, d, status, reason);

        if (status == 403 && c->have_target)
                return connection_reply(c, status,
                                        "sandbox-runner egress gateway: access to %s:%u is not allowed by the "
                                        "sandbox's network policy: %s.\n",
                                        connection_host(c), connection_port(c), reason);
        if (status >= 500 && c->have_target)
                return connection_reply(c, status,
                                        "sandbox-runner egress gateway: %s:%u could not be reached: %s.\n",
                                        connection_host(c), connection_port(c), reason);
        return connection_reply(c, status, "sandbox-runner egress gateway: %s.\n", reason);
}

int connection_on_reply_writable(Connection *c) {
        while (c->reply_offset < c->reply_size) {
                ssize_t n = send(c->client_fd, c->reply + c->reply_offset, c->reply_size - c->reply_offset,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return negative_errno();
                }
                c->reply_offset += (size_t) n;
        }

        /*
         * Sent: half-close, then drain what the client still sends for a moment, so that closing
         * with unread input does not reset the connection before the client read our answer.
         */
        c->reply = mfree(c->reply);
        if (shutdown(c->client_fd, SHUT_WR) < 0)
                return negative_errno();
        c->state = CONNECTION_LINGER;
        (void) connection_arm_timer(c, CONNECTION_LINGER_USEC);
        return connection_update_events(c);
}

int connection_on_linger_readable(Connection *c) {
        char buf[4096];

        for (;;) {
                ssize_t n = recv(c->client_fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : CONNECTION_CLOSE;
                if (n == 0)
                        return CONNECTION_CLOSE;
                c->discarded += (size_t) n;
                if (c->discarded > LINGER_DISCARD_MAX)
                        return CONNECTION_CLOSE;
        }
}

void connection_reply_busy(int fd, const char *why) {
        char buf[512];
        size_t size;
        int n, passed = -EBADF;

        /* A bridge hands the client's socket over right after connecting: if it is here already,
         * answer there (the bridge does not read the AF_UNIX connection). */
        if (handoff_guard_available() && handoff_receive(fd, buf, sizeof(buf), &size, &passed) > 0) {
                safe_close(fd);
                fd = passed;
        }

        n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 503 Service Unavailable\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n"
                     "Retry-After: 1\r\n"
                     "\r\n"
                     "sandbox-runner egress gateway: %s.\n",
                     strlen("sandbox-runner egress gateway: .\n") + strlen(why), why);
        if (n > 0)
                (void) send(fd, buf, MIN((size_t) n, sizeof(buf) - 1), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) shutdown(fd, SHUT_WR);
        if (passed >= 0)
                handoff_guard_close(fd);
        else
                safe_close(fd);
}
