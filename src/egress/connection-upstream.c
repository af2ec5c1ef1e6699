/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The upstream side of a gateway connection: resolving an allowed target (every answer classified
 * by the policy, a single refused one refuses the request), connecting to the approved addresses
 * in turn, and relaying both ways once connected. May use egress/ and util/.
 */

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/connection-internal.h"
#include "egress/handoff.h"
#include "util/log.h"

static int on_upstream_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static char *memdup(const void *p, size_t n) {
        char *d = malloc(n ?: 1);

        if (d && n > 0)
                memcpy(d, p, n);
        return d;
}

/* ---------------------------------------------------------------------------------------------- */
/* Relay. */

int connection_run_relay(Connection *c) {
        int a, b;

        /* splice() on a handed-over socket follows flags its sender can change: see handoff.h. */
        if (c->client_passed)
                handoff_guard_arm();
        a = pump_run(&c->up);
        b = pump_run(&c->down);
        if (c->client_passed && handoff_guard_disarm() && handoff_socket_blocking(c->client_fd)) {
                log_notice("Connection of execution %s to %s:%u: the client made its handed-over socket "
                           "blocking, closing.", c->execution_id, connection_host(c), connection_port(c));
                return -EPERM;
        }
        if (a > 0 || b > 0)
                c->last_activity_usec = now_usec(c);

        if (c->down.state == PUMP_FAILED)
                return c->down.error;
        if (c->up.state == PUMP_FAILED) {
                /*
                 * The upstream stopped reading (it may have answered early and closed): stop sending
                 * but still deliver its answer. A client read error or a malformed body ends it all.
                 */
                if (!streq(c->up.error_what, "write"))
                        return c->up.error;
                log_debug_errno(c->up.error, "Upstream %s stopped reading, ignoring: %m", c->address);
                c->up.state = PUMP_DONE;
        }
        /* A forwarded request ends with the answer; a tunnel once both directions are done. */
        if (c->down.state == PUMP_DONE && (c->up.state == PUMP_DONE || !proxy_request_is_connect(&c->request)))
                return CONNECTION_CLOSE;
        return connection_update_events(c);
}

int connection_start_relay(Connection *c, char *early, size_t n_early) {
        const char *rest = c->head + c->head_end;
        size_t n_rest = c->head_fill - c->head_end;
        bool connect = proxy_request_is_connect(&c->request);
        int r;

        r = pump_init(&c->up, c->client_fd, c->upstream_fd, /* shutdown_dst= */ connect);
        if (r < 0)
                return r;
        r = pump_init(&c->down, c->upstream_fd, c->client_fd, /* shutdown_dst= */ true);
        if (r < 0)
                return r;
        c->relaying = true;

        if (connect) {
                static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                char *s;

                s = strdup(established);
                if (!s)
                        return -ENOMEM;
                pump_queue(&c->down, s, strlen(established));
                if (early)
                        pump_queue(&c->down, STEAL(early), n_early);

                /* The client may have sent tunnel bytes right behind the head: they go first. */
                if (n_rest > 0) {
                        s = memdup(rest, n_rest);
                        if (!s)
                                return -ENOMEM;
                        pump_queue(&c->up, s, n_rest);
                }
        } else {
                _cleanup_free_ char *head = NULL, *absolute = NULL;
                size_t head_size, consumed = 0;

                /* Through the upstream proxy: the absolute form, and its credentials (never the client's). */
                if (c->via_upstream && !(absolute = connection_via_absolute_target(c)))
                        return -ENOMEM;
                r = proxy_request_build_forward_head(&c->request, c->target.host, c->target.port,
                                                     absolute ?: c->target.path_and_query,
                                                     c->via_upstream ? c->ctx->upstream->authorization : NULL,
                                                     &head, &head_size);
                if (r < 0)
                        return r;
                pump_queue(&c->up, STEAL(head), head_size);

                /* Then the start of the body that came with the head, cut where the message ends. */
                c->up.body = &c->request;
                r = proxy_request_feed_body(&c->request, rest, n_rest, &consumed);
                if (r < 0)
                        return -EBADMSG;
                if (consumed > 0) {
                        char *s = memdup(rest, consumed);
                        if (!s)
                                return -ENOMEM;
                        pump_queue(&c->up, s, consumed);
                }
                if (r > 0)
                        c->up.src_eof = true;
        }

        /* The head buffer is not needed any more. */
        c->head = mfree(c->head);
        c->head_fill = c->head_end = c->head_parsed = 0;

        c->state = CONNECTION_RELAY;
        c->last_activity_usec = now_usec(c);
        r = connection_arm_timer(c, c->ctx->idle_timeout_usec);
        if (r < 0)
                return r;
        return connection_run_relay(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Connecting to the approved addresses, in the resolver's order. */

static int connection_connected(Connection *c) {
        static const int one = 1;
        int r;

        (void) setsockopt(c->upstream_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* The same towards a handed-over client: what upstream sends goes on at once, the tail of a
         * burst does not wait for the client's (delayed) ACK. */
        if (c->client_passed)
                (void) setsockopt(c->client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        connection_log_decision(c, DECISION_ALLOWED, proxy_request_is_connect(&c->request) ? 200 : 0,
                                c->allow_reason ?: "allowed by the policy");

        r = c->via_upstream ? connection_via_connected(c) : connection_start_relay(c, NULL, 0);
        if (r == -EBADMSG) {
                /* Nothing was sent upstream yet. */
                connection_log_decision(c, DECISION_DENIED, 400, c->request.error ?: "malformed request body");
                return connection_reply(c, 400, "sandbox-runner egress gateway: %s.\n",
                                        c->request.error ?: "malformed request body");
        }
        return r;
}

int connection_connect_next(Connection *c) {
        int r;

        while (c->next_address < c->n_addresses) {
                const SockaddrUnion *a = &c->addresses[c->next_address];
                socklen_t len = c->address_lengths[c->next_address];

                c->next_address++;
                (void) sockaddr_format(&a->sa, len, c->address, sizeof(c->address));

                c->upstream_source = sd_event_source_disable_unref(c->upstream_source);
                c->upstream_fd = safe_close(c->upstream_fd);
                c->upstream_fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (c->upstream_fd < 0) {
                        c->connect_error = errno;
                        continue;
                }
                /* The approved address itself: no second lookup, no name anywhere in between. */
                if (connect(c->upstream_fd, &a->sa, len) < 0 && errno != EINPROGRESS) {
                        c->connect_error = errno;
                        continue;
                }

                /* A silent address (say, IPv6 without a route) must not eat the others' time. */
                c->state = CONNECTION_CONNECTING;
                if (c->next_address < c->n_addresses)
                        r = sd_event_source_set_time(c->timer, MIN(c->connect_deadline_usec,
                                                                   now_usec(c) + CONNECTION_ATTEMPT_TIMEOUT_USEC));
                else
                        r = sd_event_source_set_time(c->timer, c->connect_deadline_usec);
                if (r >= 0)
                        r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
                if (r < 0)
                        return r;
                r = sd_event_add_io(c->ctx->event, &c->upstream_source, c->upstream_fd, EPOLLOUT,
                                    on_upstream_io, c);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(c->upstream_source, "egress-upstream");
                return connection_update_events(c);
        }

        errno = c->connect_error ?: ECONNREFUSED;
        {
                char reason[256];

                (void) snprintf(reason, sizeof(reason), "connecting to %s failed: %m", c->address);
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
}

static int on_upstream_connect(Connection *c) {
        int error = 0;
        socklen_t len = sizeof(error);

        if (getsockopt(c->upstream_fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                error = errno;
        if (error == EINPROGRESS || error == EALREADY)
                return 0;
        if (error != 0) {
                c->connect_error = error;
                return connection_connect_next(c);
        }
        return connection_connected(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Resolution: every answer is classified; a single refused one refuses the request. */

static int connection_resolved(Connection *c, int error, const struct addrinfo *ai) {
        if (error != 0) {
                char reason[256];

                (void) snprintf(reason, sizeof(reason), "name resolution failed: %s",
                                error == EAI_SYSTEM ? strerror(errno) : gai_strerror(error));
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }

        c->n_addresses = 0;
        for (const struct addrinfo *i = ai; i; i = i->ai_next) {
                const char *why = NULL;
                bool duplicate = false;
                int k;

                k = egress_address_allowed(c->ctx->policy, i->ai_addr, i->ai_addrlen, &why);
                if (k <= 0) {
                        char ip[INET6_ADDRSTRLEN] = "?", reason[512];
                        const void *raw = i->ai_family == AF_INET6 ?
                                (const void *) &((const struct sockaddr_in6 *) i->ai_addr)->sin6_addr :
                                (const void *) &((const struct sockaddr_in *) i->ai_addr)->sin_addr;

                        if (i->ai_family == AF_INET || i->ai_family == AF_INET6)
                                (void) inet_ntop(i->ai_family, raw, ip, sizeof(ip));
                        (void) snprintf(reason, sizeof(reason), "resolved address %s refused: %s", ip,
                                        why ?: "not a public address");
                        return connection_refuse(c, DECISION_DENIED, 403, reason);
                }

                if (i->ai_addrlen > sizeof(SockaddrUnion))
                        continue;
                for (size_t j = 0; j < c->n_addresses; j++)
                        if (c->address_lengths[j] == i->ai_addrlen &&
                            memcmp(&c->addresses[j], i->ai_addr, i->ai_addrlen) == 0)
                                duplicate = true;
                if (duplicate || c->n_addresses >= ADDRESSES_MAX)
                        continue;
                memcpy(&c->addresses[c->n_addresses], i->ai_addr, i->ai_addrlen);
                c->address_lengths[c->n_addresses++] = i->ai_addrlen;
        }
        if (c->n_addresses == 0)
                return connection_refuse(c, DECISION_FAILED, 502, "the name has no usable address");
        /* Approved: through the upstream proxy, which resolves the name again (docs/egress.md). */
        if (c->ctx->upstream && egress_policy_via_upstream(c->ctx->policy, c->target.host, c->target.port))
                return connection_via_resolve(c);

        c->next_address = 0;
        c->connect_error = 0;
        c->connect_deadline_usec = now_usec(c) + CONNECTION_CONNECT_TIMEOUT_USEC;
        return connection_connect_next(c);
}

static void on_resolved(ResolveQuery *q, int error, const struct addrinfo *ai, void *userdata) {
        Connection *c = userdata;

        c->query = NULL;        /* the resolver frees it */
        connection_handle(c, connection_resolved(c, error, ai));
}

/* After an allowed decision: resolve the target's name; on_resolved() takes it from there. */
int connection_resolve(Connection *c) {
        int r;

        c->state = CONNECTION_RESOLVING;
        r = resolver_resolve(c->ctx->resolver, c->target.host, c->target.port, on_resolved, c, &c->query);
        if (r < 0)
                return connection_refuse(c, DECISION_FAILED, 503, "the resolver is busy");
        r = connection_arm_timer(c, CONNECTION_RESOLVE_TIMEOUT_USEC);
        if (r < 0)
                return r;
        return connection_update_events(c);
}

static int on_upstream_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;
        int r;

        if (c->state == CONNECTION_CONNECTING)
                r = on_upstream_connect(c);
        else if (c->state == CONNECTION_RELAY)
                r = connection_run_relay(c);
        else if (c->state == CONNECTION_HANDSHAKE)
                r = connection_via_on_readable(c);
        else
                r = connection_update_events(c);
        connection_handle(c, r);
        return 0;
}
