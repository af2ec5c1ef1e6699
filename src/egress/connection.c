/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One client connection of the egress gateway: the Connection object and its life (new, free, the
 * gateway's list), its event sources and timer, and the dispatch of each event by state to the
 * request (connection-request.c), upstream (connection-upstream.c) and reply (connection-reply.c)
 * parts. May use egress/ and util/.
 */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "egress/connection-internal.h"
#include "egress/handoff.h"
#include "util/log.h"

int connection_arm_timer(Connection *c, uint64_t usec) {
        int r;

        r = sd_event_source_set_time(c->timer, now_usec(c) + usec);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

/* ---------------------------------------------------------------------------------------------- */
/* Events. */

static int set_source_events(sd_event_source *s, uint32_t events) {
        int r;

        if (!s)
                return 0;
        /* A source with nothing to wait for is taken off epoll, or a hang-up would wake us forever. */
        if (events == 0)
                return sd_event_source_set_enabled(s, SD_EVENT_OFF);
        r = sd_event_source_set_io_events(s, events);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

int connection_update_events(Connection *c) {
        uint32_t client = 0, upstream = 0;
        int r;

        switch (c->state) {
        case CONNECTION_HEAD:
        case CONNECTION_LINGER:
                client = EPOLLIN;
                break;
        case CONNECTION_REPLY:
                client = EPOLLOUT;
                break;
        case CONNECTION_RESOLVING:
                break;
        case CONNECTION_CONNECTING:
                upstream = EPOLLOUT;
                break;
        case CONNECTION_HANDSHAKE:
                upstream = EPOLLIN;
                break;
        case CONNECTION_RELAY:
                client = (pump_wants_read(&c->up) ? EPOLLIN : 0) | (pump_wants_write(&c->down) ? EPOLLOUT : 0);
                upstream = (pump_wants_read(&c->down) ? EPOLLIN : 0) | (pump_wants_write(&c->up) ? EPOLLOUT : 0);
                break;
        case _CONNECTION_STATE_MAX:
        case _CONNECTION_STATE_INVALID:
                assert(false);
        }

        r = set_source_events(c->client_source, client);
        if (r < 0)
                return r;
        return set_source_events(c->upstream_source, upstream);
}

static void connection_close(Connection *c, int error) {
        if (c->relaying)
                log_debug_errno(error, "Connection of execution %s to %s:%u via %s closed%s%s; %" PRIu64
                                " bytes up, %" PRIu64 " bytes down.", c->execution_id, connection_host(c),
                                connection_port(c), c->address, error != 0 ? ": " : "", error != 0 ? "%m" : "",
                                c->up.bytes, c->down.bytes);
        else if (error != 0)
                log_debug_errno(error, "Connection of execution %s closed: %m", c->execution_id);

        if (c->ctx->on_closed)
                c->ctx->on_closed(c, c->ctx->userdata);
        else
                connection_free(c);
}

/* Every handler's result goes through here: <0 error, CONNECTION_CLOSE done, else carry on. */
void connection_handle(Connection *c, int r) {
        if (r < 0)
                connection_close(c, r);
        else if (r == CONNECTION_CLOSE)
                connection_close(c, 0);
}

static int on_client_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;
        int r = 0;

        switch (c->state) {
        case CONNECTION_HEAD:
                r = connection_on_head_readable(c);
                break;
        case CONNECTION_RELAY:
                r = connection_run_relay(c);
                break;
        case CONNECTION_REPLY:
                r = connection_on_reply_writable(c);
                break;
        case CONNECTION_LINGER:
                r = connection_on_linger_readable(c);
                break;
        case CONNECTION_RESOLVING:
        case CONNECTION_CONNECTING:
        case CONNECTION_HANDSHAKE:
                r = connection_update_events(c);
                break;
        case _CONNECTION_STATE_MAX:
        case _CONNECTION_STATE_INVALID:
                assert(false);
        }
        connection_handle(c, r);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Connection *c = userdata;
        char reason[256];
        int r = CONNECTION_CLOSE;

        switch (c->state) {
        case CONNECTION_HEAD:
                /* Slow or silent clients: a deadline for the whole head, not per byte. */
                log_debug("Request head of execution %s not complete after %" PRIu64 " s, closing.",
                          c->execution_id, CONNECTION_HEAD_TIMEOUT_USEC / USEC_PER_SEC);
                r = connection_reply(c, 408, "sandbox-runner egress gateway: request head not received in time.\n");
                break;
        case CONNECTION_RESOLVING:
                c->query = resolve_query_cancel(c->query);
                r = connection_refuse(c, DECISION_FAILED, 504, "name resolution timed out");
                break;
        case CONNECTION_CONNECTING:
                if (usec < c->connect_deadline_usec && c->next_address < c->n_addresses) {
                        /* This address is slow: on to the next one. */
                        c->connect_error = ETIMEDOUT;
                        r = connection_connect_next(c);
                        break;
                }
                (void) snprintf(reason, sizeof(reason), "connecting to %s timed out", c->address);
                r = connection_refuse(c, DECISION_FAILED, 504, reason);
                break;
        case CONNECTION_HANDSHAKE:
                (void) snprintf(reason, sizeof(reason), "the upstream proxy %s did not answer CONNECT in time",
                                c->address);
                r = connection_refuse(c, DECISION_FAILED, 504, reason);
                break;
        case CONNECTION_RELAY:
                if (usec < c->last_activity_usec + c->ctx->idle_timeout_usec) {
                        r = connection_arm_timer(c, c->last_activity_usec + c->ctx->idle_timeout_usec - usec);
                        break;
                }
                log_debug("Connection of execution %s to %s:%u idle for %" PRIu64 " s, closing.", c->execution_id,
                          connection_host(c), connection_port(c), c->ctx->idle_timeout_usec / USEC_PER_SEC);
                r = CONNECTION_CLOSE;
                break;
        case CONNECTION_REPLY:
        case CONNECTION_LINGER:
                r = CONNECTION_CLOSE;
                break;
        case _CONNECTION_STATE_MAX:
        case _CONNECTION_STATE_INVALID:
                assert(false);
        }
        connection_handle(c, r);
        return 0;
}

/* ---------------------------------------------------------------------------------------------- */

int connection_new(const ConnectionContext *ctx, int fd, char *execution_id, Connection **ret) {
        _cleanup_(connection_freep) Connection *c = NULL;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                free(execution_id);
                return -ENOMEM;
        }
        *c = (Connection) {
                .ctx = ctx,
                .state = CONNECTION_HEAD,
                .client_fd = fd,
                .upstream_fd = -EBADF,
                .execution_id = execution_id,
                .up = { .pipe = { -EBADF, -EBADF } },
                .down = { .pipe = { -EBADF, -EBADF } },
        };
        proxy_request_init(&c->request);

        c->head = malloc(PROXY_REQUEST_HEAD_MAX);
        if (!c->head)
                return -ENOMEM;

        r = sd_event_add_io(ctx->event, &c->client_source, fd, EPOLLIN, on_client_io, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->client_source, "egress-client");
        r = sd_event_add_time_relative(ctx->event, &c->timer, CLOCK_MONOTONIC, CONNECTION_HEAD_TIMEOUT_USEC,
                                       50 * USEC_PER_MSEC, on_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->timer, "egress-connection-timer");

        *ret = STEAL(c);
        return 0;
}

Connection *connection_free(Connection *c) {
        if (!c)
                return NULL;
        c->query = resolve_query_cancel(c->query);
        sd_event_source_disable_unref(c->client_source);
        sd_event_source_disable_unref(c->upstream_source);
        sd_event_source_disable_unref(c->timer);
        if (c->client_passed)
                handoff_guard_close(c->client_fd);      /* its sender may have set SO_LINGER */
        else
                safe_close(c->client_fd);
        safe_close(c->upstream_fd);
        pump_done(&c->up);
        pump_done(&c->down);
        proxy_request_done(&c->request);
        if (c->have_target)
                egress_target_done(&c->target);
        free(c->head);
        free(c->via_head);
        free(c->reply);
        free(c->execution_id);
        return mfree(c);
}

const char *connection_execution_id(const Connection *c) {
        return c->execution_id;
}

Connection *connection_next(const Connection *c) {
        return c->next;
}

void connection_link(Connection **head, Connection *c) {
        c->prev = NULL;
        c->next = *head;
        if (*head)
                (*head)->prev = c;
        *head = c;
}

void connection_unlink(Connection **head, Connection *c) {
        if (c->prev)
                c->prev->next = c->next;
        else if (*head == c)
                *head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
}
