/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A server-side WebSocket on sd-event, framed by wslay's event API (websocket.h). Reads and
 * writes happen only from this file's own event sources (the socket, a deferred "kick", the ping
 * and close timers), never from inside websocket_send() or websocket_close(): the owner's
 * callbacks never run re-entered from its own calls, and closed() is the last thing a handler
 * does. May call util/ only.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "http/websocket.h"
#include "util/log.h"
#include "util/macro.h"

struct WebSocket {
        sd_event *event;
        int fd;
        sd_event_source *io;
        sd_event_source *kick;          /* deferred: send what was queued, re-arm, maybe finish */
        sd_event_source *ping_timer;
        sd_event_source *close_timer;
        wslay_event_context_ptr ctx;
        uint8_t *extra;                 /* read by the HTTP server past the handshake */
        size_t extra_size, extra_pos;
        WebSocketLimits limits;
        WebSocketOps ops;
        void *userdata;
        char *client;
        uint16_t close_code;            /* what we asked to close with (0: nothing yet) */
        uint16_t deferred_code;         /* websocket_close_after_sent(): closed once the queue is sent */
        char deferred_reason[124];
        bool eof;                       /* the peer closed its side, or the socket failed */
        bool close_logged;
        bool finished;
};

static void ws_log_close(WebSocket *ws, uint16_t code) {
        if (ws->close_logged)
                return;
        ws->close_logged = true;
        if (code == WEBSOCKET_CLOSE_TOO_BIG)
                log_struct(LOG_NOTICE,
                           "SANDBOX_CLIENT=%s", ws->client,
                           "WEBSOCKET_CLOSE_CODE=%u", (unsigned) code,
                           "WEBSOCKET_MAX_MESSAGE_BYTES=%" PRIu64, ws->limits.max_message_bytes,
                           "MESSAGE=Closed the WebSocket of %s (1009): a message over %" PRIu64 " bytes (MaxMessageBytes=).",
                           ws->client, ws->limits.max_message_bytes);
        else if (code == WEBSOCKET_CLOSE_POLICY)
                log_struct(LOG_NOTICE,
                           "SANDBOX_CLIENT=%s", ws->client,
                           "WEBSOCKET_CLOSE_CODE=%u", (unsigned) code,
                           "WEBSOCKET_MAX_QUEUED_BYTES=%" PRIu64, ws->limits.max_queued_bytes,
                           "MESSAGE=Closed the WebSocket of %s (1008): it did not read, %" PRIu64 " bytes waited to be sent.",
                           ws->client, ws->limits.max_queued_bytes);
        else if (code == WEBSOCKET_CLOSE_PROTOCOL_ERROR || code == 1007)
                log_struct(LOG_INFO,
                           "SANDBOX_CLIENT=%s", ws->client,
                           "WEBSOCKET_CLOSE_CODE=%u", (unsigned) code,
                           "MESSAGE=Closed the WebSocket of %s (%u): it broke the protocol.", ws->client, (unsigned) code);
}

static ssize_t on_wslay_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        WebSocket *ws = userdata;
        ssize_t n;

        if (ws->extra_pos < ws->extra_size) {
                n = (ssize_t) MIN(len, ws->extra_size - ws->extra_pos);
                memcpy(buf, ws->extra + ws->extra_pos, (size_t) n);
                ws->extra_pos += (size_t) n;
                return n;
        }
        n = recv(ws->fd, buf, len, MSG_DONTWAIT);
        if (n > 0)
                return n;
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        ws->eof = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t on_wslay_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        WebSocket *ws = userdata;
        ssize_t n;

        n = send(ws->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
        if (n >= 0)
                return n;
        if (errno == EAGAIN || errno == EINTR) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        ws->eof = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static void on_wslay_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        WebSocket *ws = userdata;

        if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
                return;         /* pings are answered by wslay, pongs and close handled there */
        if (ws->close_code != 0 || !ws->ops.message)
                return;         /* closing: what still arrives is not acted on */
        ws->ops.message(ws, arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length, ws->userdata);
}

/* The end: no more events, the owner told once. Must be the last thing its caller does. */
static void ws_finish(WebSocket *ws) {
        uint16_t code;

        if (ws->finished)
                return;
        ws->finished = true;
        (void) sd_event_source_set_enabled(ws->io, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(ws->kick, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(ws->ping_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(ws->close_timer, SD_EVENT_OFF);
        code = wslay_event_get_close_sent(ws->ctx) ? wslay_event_get_status_code_sent(ws->ctx) :
               ws->close_code != 0 ? ws->close_code : WEBSOCKET_CLOSE_ABNORMAL;
        ws_log_close(ws, code);
        log_debug("WebSocket of %s closed (%u).", ws->client, (unsigned) code);
        if (ws->ops.closed)
                ws->ops.closed(ws, code, ws->userdata);
}

static int on_close_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        WebSocket *ws = userdata;

        log_debug("WebSocket of %s: the close handshake timed out.", ws->client);
        ws_finish(ws);
        return 0;
}

static void ws_arm_close_timer(WebSocket *ws) {
        int r;

        if (ws->close_timer)
                return;
        r = sd_event_add_time_relative(ws->event, &ws->close_timer, CLOCK_MONOTONIC, ws->limits.close_timeout_usec,
                                       100 * USEC_PER_MSEC, on_close_timer, ws);
        if (r < 0) {
                /* Without a bound on the handshake the peer could hold it open: end at once. */
                log_warning_errno(r, "Failed to arm a WebSocket close timer, closing now: %m");
                ws->eof = true;
        } else
                (void) sd_event_source_set_description(ws->close_timer, "websocket-close");
}

/* Send what waits, then decide the events we want; finishes when nothing is left to do. */
static void ws_process(WebSocket *ws, bool can_read) {
        uint32_t events = 0;
        int r;

        if (ws->finished)
                return;
        if (can_read && !ws->eof && wslay_event_want_read(ws->ctx)) {
                r = wslay_event_recv(ws->ctx);
                if (r < 0)
                        ws->eof = true;
                else if (!wslay_event_get_read_enabled(ws->ctx))
                        /* A close came in, or wslay refused a frame (1002, 1007, 1009) and queued
                         * its close: bound the rest of the handshake. */
                        ws_arm_close_timer(ws);
        }
        if (!ws->eof && wslay_event_want_write(ws->ctx)) {
                r = wslay_event_send(ws->ctx);
                if (r < 0)
                        ws->eof = true;
        }
        /* A deferred close once the messages before it are out (wslay sends control frames
         * first: queued at once, the close would overtake them and they would be lost). */
        if (ws->deferred_code != 0 && ws->close_code == 0 && !ws->eof && websocket_queued_bytes(ws) == 0) {
                ws->close_code = ws->deferred_code;
                r = wslay_event_queue_close(ws->ctx, ws->deferred_code, (const uint8_t *) ws->deferred_reason,
                                            strlen(ws->deferred_reason));
                if ((r != 0 && r != WSLAY_ERR_NO_MORE_MSG) || wslay_event_send(ws->ctx) < 0)
                        ws->eof = true;
        }
        if (wslay_event_get_close_sent(ws->ctx))
                ws_log_close(ws, wslay_event_get_status_code_sent(ws->ctx));
        if (ws->eof || (wslay_event_get_close_sent(ws->ctx) && wslay_event_get_close_received(ws->ctx)))
                return ws_finish(ws);

        if (wslay_event_want_read(ws->ctx) && websocket_queued_bytes(ws) < WEBSOCKET_QUEUE_HIGH)
                events |= EPOLLIN;
        if (wslay_event_want_write(ws->ctx))
                events |= EPOLLOUT;
        if (events == 0 && !wslay_event_want_read(ws->ctx))
                /* Closed for reading and everything sent: only a close sent and none received
                 * (or the reverse) is left, which the close timer bounds. Watch for the peer's
                 * hang-up meanwhile. */
                events = EPOLLRDHUP;
        r = sd_event_source_set_io_events(ws->io, events);
        if (r >= 0)
                r = sd_event_source_set_enabled(ws->io, SD_EVENT_ON);
        if (r < 0) {
                log_warning_errno(r, "Failed to watch the WebSocket of %s, closing: %m", ws->client);
                ws->eof = true;
                return ws_finish(ws);
        }
}

static int on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        WebSocket *ws = userdata;

        if ((revents & (EPOLLERR | EPOLLHUP)) || ((revents & EPOLLRDHUP) && !(revents & EPOLLIN) &&
                                                   !wslay_event_want_read(ws->ctx)))
                ws->eof = true;
        ws_process(ws, revents & (EPOLLIN | EPOLLHUP | EPOLLERR));
        return 0;
}

static int on_kick(sd_event_source *es, void *userdata) {
        WebSocket *ws = userdata;

        ws_process(ws, ws->extra_pos < ws->extra_size);
        return 0;
}

static void ws_kick(WebSocket *ws) {
        if (ws->finished)
                return;
        if (sd_event_source_set_enabled(ws->kick, SD_EVENT_ONESHOT) < 0)
                /* Fall back to the socket: writable wakes us. */
                (void) sd_event_source_set_io_events(ws->io, EPOLLIN | EPOLLOUT);
}

static int on_ping_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        WebSocket *ws = userdata;
        struct wslay_event_msg msg = { .opcode = WSLAY_PING };
        int r;

        if (ws->close_code == 0 && wslay_event_queue_msg(ws->ctx, &msg) == 0)
                ws_kick(ws);
        r = sd_event_source_set_time_relative(es, ws->limits.ping_interval_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        if (r < 0)
                log_debug_errno(r, "Failed to re-arm the ping timer of the WebSocket of %s, no more pings: %m", ws->client);
        return 0;
}

int websocket_new(sd_event *e, int fd, const void *extra, size_t extra_size, const char *client,
                  const WebSocketLimits *limits, const WebSocketOps *ops, void *userdata, WebSocket **ret) {
        static const struct wslay_event_callbacks callbacks = {
                .recv_callback = on_wslay_recv,
                .send_callback = on_wslay_send,
                .on_msg_recv_callback = on_wslay_msg,
        };
        _cleanup_(websocket_freep) WebSocket *ws = NULL;
        int r;

        ws = calloc(1, sizeof(*ws));
        if (!ws)
                return -ENOMEM;
        *ws = (WebSocket) {
                .event = sd_event_ref(e),
                .fd = fd,
                .limits = limits ? *limits : (WebSocketLimits) {},
                .ops = *ops,
                .userdata = userdata,
                .client = strdup(client ?: "(unknown)"),
        };
        if (!ws->client)
                return -ENOMEM;
        if (ws->limits.max_message_bytes == 0)
                ws->limits.max_message_bytes = WEBSOCKET_MAX_MESSAGE_DEFAULT;
        if (ws->limits.max_queued_bytes == 0)
                ws->limits.max_queued_bytes = 4 * ws->limits.max_message_bytes + UINT64_C(64) * 1024 * 1024;
        if (ws->limits.ping_interval_usec == 0)
                ws->limits.ping_interval_usec = WEBSOCKET_PING_INTERVAL_DEFAULT;
        if (ws->limits.close_timeout_usec == 0)
                ws->limits.close_timeout_usec = WEBSOCKET_CLOSE_TIMEOUT_DEFAULT;
        if (extra_size > 0) {
                ws->extra = malloc(extra_size);
                if (!ws->extra)
                        return -ENOMEM;
                memcpy(ws->extra, extra, extra_size);
                ws->extra_size = extra_size;
        }

        if (wslay_event_context_server_init(&ws->ctx, &callbacks, ws) != 0)
                return -ENOMEM;
        wslay_event_config_set_max_recv_msg_length(ws->ctx, ws->limits.max_message_bytes);

        r = sd_event_add_io(e, &ws->io, fd, EPOLLIN, on_io, ws);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(ws->io, "websocket");
        r = sd_event_add_defer(e, &ws->kick, on_kick, ws);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(ws->kick, "websocket-kick");
        /* Bytes read past the handshake are processed from the kick, not from here. */
        r = sd_event_source_set_enabled(ws->kick, extra_size > 0 ? SD_EVENT_ONESHOT : SD_EVENT_OFF);
        if (r < 0)
                return r;
        if (ws->limits.ping_interval_usec != UINT64_MAX) {
                r = sd_event_add_time_relative(e, &ws->ping_timer, CLOCK_MONOTONIC, ws->limits.ping_interval_usec,
                                               USEC_PER_SEC, on_ping_timer, ws);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(ws->ping_timer, "websocket-ping");
        }
        *ret = STEAL(ws);
        return 0;
}

WebSocket *websocket_free(WebSocket *ws) {
        if (!ws)
                return NULL;
        sd_event_source_disable_unref(ws->io);
        sd_event_source_disable_unref(ws->kick);
        sd_event_source_disable_unref(ws->ping_timer);
        sd_event_source_disable_unref(ws->close_timer);
        if (ws->ctx)
                wslay_event_context_free(ws->ctx);
        sd_event_unref(ws->event);
        free(ws->extra);
        free(ws->client);
        free(ws);
        return NULL;
}

uint64_t websocket_queued_bytes(const WebSocket *ws) {
        return wslay_event_get_queued_msg_length(ws->ctx);
}

bool websocket_is_closing(const WebSocket *ws) {
        return ws->finished || ws->close_code != 0 || ws->deferred_code != 0 || ws->eof ||
               !wslay_event_get_read_enabled(ws->ctx);
}

const char *websocket_client(const WebSocket *ws) {
        return ws->client;
}

void websocket_close(WebSocket *ws, uint16_t code, const char *reason) {
        size_t l = reason ? MIN(strlen(reason), (size_t) 123) : 0;
        int r;

        if (ws->finished || ws->close_code != 0)
                return;
        ws->close_code = code;
        r = wslay_event_queue_close(ws->ctx, code, (const uint8_t *) reason, l);
        if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG)
                ws->eof = true;         /* no memory: end (NO_MORE_MSG: a close is queued already) */
        ws_arm_close_timer(ws);
        ws_kick(ws);
}

void websocket_close_after_sent(WebSocket *ws, uint16_t code, const char *reason) {
        if (ws->finished || ws->close_code != 0 || ws->deferred_code != 0)
                return;
        if (ws->eof || websocket_queued_bytes(ws) == 0)
                return websocket_close(ws, code, reason);
        ws->deferred_code = code;
        (void) snprintf(ws->deferred_reason, sizeof(ws->deferred_reason), "%s", reason ?: "");
        ws_arm_close_timer(ws);
        ws_kick(ws);
}

int websocket_send(WebSocket *ws, bool binary, const void *data, size_t size) {
        struct wslay_event_msg msg = {
                .opcode = binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME,
                .msg = data,
                .msg_length = size,
        };
        uint64_t queued;
        int r;

        if (ws->finished || ws->close_code != 0 || ws->deferred_code != 0 || ws->eof ||
            !wslay_event_get_write_enabled(ws->ctx))
                return -EPIPE;
        queued = websocket_queued_bytes(ws);
        if (queued > 0 && queued + size > ws->limits.max_queued_bytes) {
                websocket_close(ws, WEBSOCKET_CLOSE_POLICY, "client too slow");
                return -ENOBUFS;
        }
        r = wslay_event_queue_msg(ws->ctx, &msg);
        if (r == WSLAY_ERR_NOMEM)
                return -ENOMEM;
        if (r != 0)
                return -EPIPE;
        ws_kick(ws);
        return 0;
}
