/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One server-side WebSocket connection (RFC 6455) on a connected socket, driven by sd-event, its
 * framing done by wslay: whole messages in (fragments reassembled, at most max_message_bytes,
 * else close 1009 and a journal entry), whole messages out, pings, the close handshake.
 *
 * Back-pressure: what we send waits in wslay's queue. Above the queue's high-water mark
 * (WEBSOCKET_QUEUE_HIGH) the socket is not read (a client that does not read its answers cannot
 * send more work); once the queue passes its hard cap (max_queued_bytes) the connection is closed
 * with 1008 and a journal entry: never an unbounded queue, never a message dropped in silence.
 * The socket is not ours: websocket_free() leaves it open (its owner closes it).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct WebSocket WebSocket;

#define WEBSOCKET_MAX_MESSAGE_DEFAULT (UINT64_C(16) * 1024 * 1024)
#define WEBSOCKET_PING_INTERVAL_DEFAULT (30 * USEC_PER_SEC)
#define WEBSOCKET_CLOSE_TIMEOUT_DEFAULT (5 * USEC_PER_SEC)
/* Stop reading the peer while this much waits to be sent. */
#define WEBSOCKET_QUEUE_HIGH (UINT64_C(8) * 1024 * 1024)

/* Close codes (RFC 6455 section 7.4.1) we send. */
#define WEBSOCKET_CLOSE_NORMAL 1000
#define WEBSOCKET_CLOSE_GOING_AWAY 1001
#define WEBSOCKET_CLOSE_PROTOCOL_ERROR 1002
#define WEBSOCKET_CLOSE_ABNORMAL 1006
#define WEBSOCKET_CLOSE_POLICY 1008
#define WEBSOCKET_CLOSE_TOO_BIG 1009
#define WEBSOCKET_CLOSE_INTERNAL 1011

typedef struct WebSocketLimits {
        uint64_t max_message_bytes;     /* a bigger message from the peer: close 1009 (0: default) */
        uint64_t max_queued_bytes;      /* output waiting past this: close 1008 (0: 4 × max message + 64 MiB) */
        uint64_t ping_interval_usec;    /* 0: the default; UINT64_MAX: no pings */
        uint64_t close_timeout_usec;    /* how long the close handshake may take (0: the default) */
} WebSocketLimits;

typedef struct WebSocketOps {
        /* A whole message from the peer; @data is valid during the call. May send and close. */
        void (*message)(WebSocket *ws, bool binary, const uint8_t *data, size_t size, void *userdata);
        /* Once, when the connection is over (handshake done, peer gone, error, timeout): @code is
         * the code we sent or, where we sent none, WEBSOCKET_CLOSE_ABNORMAL. The callee may free @ws. */
        void (*closed)(WebSocket *ws, uint16_t code, void *userdata);
} WebSocketOps;

/*
 * websocket_new() - serve @fd (connected, non-blocking; not taken) as the server side, after the
 * 101 went out. @extra: bytes the HTTP server read past the handshake (may be NULL). @client: the
 * peer as logged (copied). Return: 0 or -errno.
 */
int websocket_new(sd_event *e, int fd, const void *extra, size_t extra_size, const char *client,
                  const WebSocketLimits *limits, const WebSocketOps *ops, void *userdata, WebSocket **ret);
WebSocket *websocket_free(WebSocket *ws);
static inline void websocket_freep(WebSocket **ws) {
        *ws = websocket_free(*ws);
}

/* websocket_send() - queue one message (copied). Return: 0; -EPIPE when closing or closed; -ENOBUFS
 * when the queue is past its cap (the connection is then being closed with 1008); -ENOMEM. */
int websocket_send(WebSocket *ws, bool binary, const void *data, size_t size);
/* websocket_close() - start the close handshake with @code and @reason (at most 123 bytes). */
void websocket_close(WebSocket *ws, uint16_t code, const char *reason);
/* websocket_close_after_sent() - the same, once what is queued now has been sent (the last words a
 * peer must read, such as a kernel's "status: dead"); nothing more can be queued meanwhile, and the
 * close timeout bounds the wait. */
void websocket_close_after_sent(WebSocket *ws, uint16_t code, const char *reason);
/* Bytes waiting to be sent. */
uint64_t websocket_queued_bytes(const WebSocket *ws);
bool websocket_is_closing(const WebSocket *ws);
const char *websocket_client(const WebSocket *ws);
