/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the WebSocket opening handshake (src/http/ws-handshake.c) and of the server-side
 * WebSocket (src/http/websocket.c) over a socketpair: the daemon's side in sd-event, the client's
 * a wslay client context on the other end, and raw frames where a well-behaved client library
 * would not send them (a 1 GiB length header, an unmasked frame, hand-cut fragments).
 */

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include <cmocka.h>

#include "http/websocket.h"
#include "http/ws-handshake.h"
#include "util/macro.h"
#include "util/time-util.h"

/* ---- the handshake ----------------------------------------------------------------------------- */

static void test_accept_rfc_example(void **state) {
        char accept[WS_ACCEPT_SIZE];

        /* RFC 6455 section 1.3. */
        ws_accept_compute("dGhlIHNhbXBsZSBub25jZQ==", accept);
        assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_handshake_valid(void **state) {
        WsHandshakeRequest h = {
                .method = "GET", .upgrade = "websocket", .connection = "keep-alive, Upgrade",
                .version = "13", .key = "dGhlIHNhbXBsZSBub25jZQ==",
        };
        char accept[WS_ACCEPT_SIZE];
        const char *why = NULL;

        assert_int_equal(ws_handshake_check(&h, accept, &why), 0);
        assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        /* Tokens are case-insensitive. */
        h.upgrade = "WebSocket";
        h.connection = "UPGRADE";
        assert_int_equal(ws_handshake_check(&h, accept, &why), 0);
}

static void test_handshake_refused(void **state) {
        const WsHandshakeRequest good = {
                .method = "GET", .upgrade = "websocket", .connection = "Upgrade",
                .version = "13", .key = "dGhlIHNhbXBsZSBub25jZQ==",
        };
        char accept[WS_ACCEPT_SIZE];
        const char *why;
        WsHandshakeRequest h;

        h = good; h.method = "POST"; why = NULL;
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        assert_non_null(why);
        h = good; h.upgrade = NULL; why = NULL;
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        assert_non_null(strstr(why, "Upgrade"));
        h = good; h.upgrade = "h2c";
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.connection = "keep-alive";
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.connection = "upgraded";           /* a token, not a substring */
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.version = NULL;
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.version = "8";
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EPROTONOSUPPORT);
        h = good; h.key = NULL;
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.key = "AAAAAAAAAAAAAAAAAAAAAA==X";     /* 25 characters */
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.key = "AAAAAAAAAAAAAAAAAAAAAAA=";      /* 17 bytes */
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.key = "AAAAAAAAAAAAAAAAAAAA!!==";      /* not base64 */
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
        h = good; h.key = "";
        assert_int_equal(ws_handshake_check(&h, accept, &why), -EBADMSG);
}

static void test_header_tokens(void **state) {
        assert_true(ws_header_has_token("v1.kernel.websocket.jupyter.org", "v1.kernel.websocket.jupyter.org"));
        assert_true(ws_header_has_token("chat, v1.kernel.websocket.jupyter.org ", "v1.kernel.websocket.jupyter.org"));
        assert_false(ws_header_has_token("v1.kernel.websocket.jupyter.org.x", "v1.kernel.websocket.jupyter.org"));
        assert_false(ws_header_has_token("", "upgrade"));
        assert_false(ws_header_has_token(NULL, "upgrade"));
        assert_true(ws_header_has_token(",,upgrade,,", "upgrade"));
}

/* ---- the connection ---------------------------------------------------------------------------- */

typedef struct Msg {
        uint8_t opcode;
        uint16_t status;
        size_t size;
        uint8_t *data;
} Msg;

typedef struct T {
        sd_event *event;
        int server_fd, client_fd;
        WebSocket *ws;
        /* the server's view */
        unsigned n_messages;
        bool last_binary;
        size_t last_size;
        uint8_t *last_data;
        bool echo;
        bool closed;
        uint16_t closed_code;
        /* the client's view (wslay client context) */
        wslay_event_context_ptr client;
        Msg got[64];
        unsigned n_got;
        bool client_eof;
} T;

static void on_message(WebSocket *ws, bool binary, const uint8_t *data, size_t size, void *userdata) {
        T *t = userdata;

        t->n_messages++;
        t->last_binary = binary;
        t->last_size = size;
        free(t->last_data);
        t->last_data = malloc(size + 1);
        assert_non_null(t->last_data);
        memcpy(t->last_data, data, size);
        if (t->echo)
                assert_int_equal(websocket_send(ws, binary, data, size), 0);
}

static void on_closed(WebSocket *ws, uint16_t code, void *userdata) {
        T *t = userdata;

        assert_false(t->closed);
        t->closed = true;
        t->closed_code = code;
}

static const WebSocketOps ops = { .message = on_message, .closed = on_closed };

static ssize_t client_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        T *t = userdata;
        ssize_t n = recv(t->client_fd, buf, len, MSG_DONTWAIT);

        if (n > 0)
                return n;
        if (n < 0 && errno == EAGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        t->client_eof = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t client_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        T *t = userdata;
        ssize_t n = send(t->client_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n >= 0)
                return n;
        if (errno == EAGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static int client_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *userdata) {
        for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t) (0x5a + i * 31);
        return 0;
}

static void client_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        T *t = userdata;
        Msg *m;

        assert_true(t->n_got < ELEMENTSOF(t->got));
        m = &t->got[t->n_got++];
        m->opcode = arg->opcode;
        m->status = arg->status_code;
        m->size = arg->msg_length;
        m->data = malloc(arg->msg_length + 1);
        assert_non_null(m->data);
        if (arg->msg_length > 0)        /* an empty ping's msg is NULL */
                memcpy(m->data, arg->msg, arg->msg_length);
        m->data[arg->msg_length] = 0;
}

static void setup_t(T *t, const WebSocketLimits *limits, const void *extra, size_t extra_size) {
        static const struct wslay_event_callbacks cb = {
                .recv_callback = client_recv,
                .send_callback = client_send,
                .genmask_callback = client_genmask,
                .on_msg_recv_callback = client_msg,
        };
        int sv[2];

        *t = (T) {};
        assert_int_equal(sd_event_new(&t->event), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        t->server_fd = sv[0];
        t->client_fd = sv[1];
        assert_int_equal(websocket_new(t->event, t->server_fd, extra, extra_size, "test-client", limits, &ops, t, &t->ws), 0);
        assert_int_equal(wslay_event_context_client_init(&t->client, &cb, t), 0);
}

static void teardown_t(T *t) {
        websocket_free(t->ws);
        wslay_event_context_free(t->client);
        for (unsigned i = 0; i < t->n_got; i++)
                free(t->got[i].data);
        free(t->last_data);
        close(t->server_fd);
        close(t->client_fd);
        sd_event_unref(t->event);
}

/* One round: the server's loop, then the client's queue and socket. */
static void step(T *t, bool client_reads) {
        assert_true(sd_event_run(t->event, 1000) >= 0);
        if (wslay_event_want_write(t->client))
                (void) wslay_event_send(t->client);
        if (client_reads && wslay_event_want_read(t->client))
                (void) wslay_event_recv(t->client);
}

/* Until @cond holds; fails after 20 s (a bound for a loaded machine, not a timing assertion). */
#define WAIT_UNTIL(t, reads, cond)                                                      \
        do {                                                                            \
                uint64_t _end = now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_SEC;          \
                while (!(cond)) {                                                       \
                        if (now_usec(CLOCK_MONOTONIC) > _end)                           \
                                fail_msg("timed out waiting for: %s", #cond);            \
                        step((t), (reads));                                             \
                }                                                                       \
        } while (0)

static void client_queue(T *t, uint8_t opcode, const void *data, size_t size) {
        struct wslay_event_msg m = { .opcode = opcode, .msg = data, .msg_length = size };

        assert_int_equal(wslay_event_queue_msg(t->client, &m), 0);
}

/* A raw client frame (masked unless @unmasked), written at once. */
static void raw_frame(T *t, bool fin, uint8_t opcode, const void *payload, size_t size, uint64_t announced, bool unmasked) {
        static const uint8_t key[4] = { 0x11, 0x22, 0x33, 0x44 };
        uint8_t hdr[14];
        size_t h = 0;
        uint8_t *buf;

        hdr[h++] = (uint8_t) ((fin ? 0x80 : 0) | opcode);
        if (announced < 126)
                hdr[h++] = (uint8_t) ((unmasked ? 0 : 0x80) | announced);
        else if (announced < 65536) {
                hdr[h++] = (uint8_t) ((unmasked ? 0 : 0x80) | 126);
                hdr[h++] = (uint8_t) (announced >> 8);
                hdr[h++] = (uint8_t) announced;
        } else {
                hdr[h++] = (uint8_t) ((unmasked ? 0 : 0x80) | 127);
                for (int i = 7; i >= 0; i--)
                        hdr[h++] = (uint8_t) (announced >> (8 * i));
        }
        if (!unmasked) {
                memcpy(hdr + h, key, 4);
                h += 4;
        }
        buf = malloc(h + size);
        assert_non_null(buf);
        memcpy(buf, hdr, h);
        for (size_t i = 0; i < size; i++)
                buf[h + i] = ((const uint8_t *) payload)[i] ^ (unmasked ? 0 : key[i % 4]);
        assert_int_equal(send(t->client_fd, buf, h + size, MSG_NOSIGNAL), (ssize_t) (h + size));
        free(buf);
}

static const Msg *client_find(T *t, uint8_t opcode) {
        for (unsigned i = 0; i < t->n_got; i++)
                if (t->got[i].opcode == opcode)
                        return &t->got[i];
        return NULL;
}

static void test_echo_text_and_binary(void **state) {
        static const uint8_t bin[] = { 0, 1, 2, 0xff, 0 };
        T t;

        setup_t(&t, NULL, NULL, 0);
        t.echo = true;
        client_queue(&t, WSLAY_TEXT_FRAME, "{\"a\": 1}", 8);
        WAIT_UNTIL(&t, true, t.n_got >= 1);
        assert_int_equal(t.got[0].opcode, WSLAY_TEXT_FRAME);
        assert_int_equal(t.got[0].size, 8);
        assert_memory_equal(t.got[0].data, "{\"a\": 1}", 8);
        assert_false(t.last_binary);

        client_queue(&t, WSLAY_BINARY_FRAME, bin, sizeof(bin));
        WAIT_UNTIL(&t, true, t.n_got >= 2);
        assert_int_equal(t.got[1].opcode, WSLAY_BINARY_FRAME);
        assert_int_equal(t.got[1].size, sizeof(bin));
        assert_memory_equal(t.got[1].data, bin, sizeof(bin));
        assert_true(t.last_binary);
        assert_false(t.closed);
        teardown_t(&t);
}

static void test_large_message_both_ways(void **state) {
        /* 14 MB: DocsGPT's largest stream message, under the 16 MiB default. */
        size_t n = 14 * 1000 * 1000;
        uint8_t *big = malloc(n);
        T t;

        assert_non_null(big);
        for (size_t i = 0; i < n; i++)
                big[i] = (uint8_t) ('A' + i % 26);
        setup_t(&t, NULL, NULL, 0);
        t.echo = true;
        client_queue(&t, WSLAY_TEXT_FRAME, big, n);
        WAIT_UNTIL(&t, true, t.n_got >= 1);
        assert_int_equal(t.n_messages, 1);
        assert_int_equal(t.got[0].size, n);
        assert_memory_equal(t.got[0].data, big, n);
        assert_false(t.closed);
        teardown_t(&t);
        free(big);
}

static void test_fragmented(void **state) {
        T t;

        setup_t(&t, NULL, NULL, 0);
        raw_frame(&t, false, WSLAY_TEXT_FRAME, "{\"hea", 5, 5, false);
        raw_frame(&t, false, WSLAY_CONTINUATION_FRAME, "der\": ", 6, 6, false);
        /* A ping between fragments is allowed (RFC 6455 section 5.4) and answered. */
        raw_frame(&t, true, WSLAY_PING, "p", 1, 1, false);
        raw_frame(&t, true, WSLAY_CONTINUATION_FRAME, "{}}", 3, 3, false);
        WAIT_UNTIL(&t, true, t.n_messages >= 1 && client_find(&t, WSLAY_PONG));
        assert_int_equal(t.n_messages, 1);
        assert_int_equal(t.last_size, 14);
        assert_memory_equal(t.last_data, "{\"header\": {}}", 14);
        assert_false(t.closed);
        teardown_t(&t);
}

static void test_ping_answered(void **state) {
        const Msg *pong;
        T t;

        setup_t(&t, NULL, NULL, 0);
        client_queue(&t, WSLAY_PING, "abc", 3);
        WAIT_UNTIL(&t, true, client_find(&t, WSLAY_PONG));
        pong = client_find(&t, WSLAY_PONG);
        assert_int_equal(pong->size, 3);
        assert_memory_equal(pong->data, "abc", 3);
        assert_int_equal(t.n_messages, 0);      /* control frames are not messages */
        teardown_t(&t);
}

static void test_server_pings(void **state) {
        WebSocketLimits l = { .ping_interval_usec = 50 * USEC_PER_MSEC };
        T t;

        setup_t(&t, &l, NULL, 0);
        WAIT_UNTIL(&t, true, client_find(&t, WSLAY_PING));
        assert_false(t.closed);
        teardown_t(&t);
}

static void test_close_handshake(void **state) {
        const Msg *c;
        T t;

        setup_t(&t, NULL, NULL, 0);
        assert_int_equal(wslay_event_queue_close(t.client, 1000, (const uint8_t *) "bye", 3), 0);
        WAIT_UNTIL(&t, true, t.closed);
        /* The server answered with the same code before it ended. */
        WAIT_UNTIL(&t, true, client_find(&t, WSLAY_CONNECTION_CLOSE) || t.client_eof);
        c = client_find(&t, WSLAY_CONNECTION_CLOSE);
        assert_non_null(c);
        assert_int_equal(c->status, 1000);
        assert_int_equal(t.closed_code, 1000);
        /* Closed: nothing more is sent. */
        assert_int_equal(websocket_send(t.ws, false, "x", 1), -EPIPE);
        teardown_t(&t);
}

static void test_server_close(void **state) {
        const Msg *c;
        T t;

        setup_t(&t, NULL, NULL, 0);
        websocket_close(t.ws, WEBSOCKET_CLOSE_GOING_AWAY, "kernel ended: deleted");
        assert_true(websocket_is_closing(t.ws));
        WAIT_UNTIL(&t, true, t.closed);
        c = client_find(&t, WSLAY_CONNECTION_CLOSE);
        assert_non_null(c);
        assert_int_equal(c->status, 1001);
        assert_int_equal(t.closed_code, 1001);
        teardown_t(&t);
}

/* What was queued before websocket_close_after_sent() reaches the peer, in order, before the close
 * (wslay sends control frames first: a plain close would overtake a kernel's "status: dead"). */
static void test_close_after_sent(void **state) {
        size_t big_size = 3 * 1024 * 1024;
        _cleanup_free_ uint8_t *big = malloc(big_size);
        unsigned i_close = UINT_MAX;
        T t;

        assert_non_null(big);
        memset(big, 'o', big_size);
        setup_t(&t, NULL, NULL, 0);
        assert_int_equal(websocket_send(t.ws, false, big, big_size), 0);
        assert_int_equal(websocket_send(t.ws, false, "dead", 4), 0);
        websocket_close_after_sent(t.ws, WEBSOCKET_CLOSE_GOING_AWAY, "kernel ended: oom");
        assert_true(websocket_is_closing(t.ws));
        /* Nothing more after the last words. */
        assert_int_equal(websocket_send(t.ws, false, "late", 4), -EPIPE);
        WAIT_UNTIL(&t, true, t.closed);
        for (unsigned i = 0; i < t.n_got; i++)
                if (t.got[i].opcode == WSLAY_CONNECTION_CLOSE)
                        i_close = i;
        assert_true(i_close != UINT_MAX);
        assert_int_equal(t.got[i_close].status, 1001);
        assert_true(i_close >= 2);
        assert_int_equal(t.got[0].opcode, WSLAY_TEXT_FRAME);
        assert_int_equal(t.got[0].size, big_size);
        assert_int_equal(t.got[1].opcode, WSLAY_TEXT_FRAME);
        assert_int_equal(t.got[1].size, 4);
        assert_memory_equal(t.got[1].data, "dead", 4);
        assert_int_equal(t.closed_code, 1001);
        teardown_t(&t);
}

static void test_gigabyte_header(void **state) {
        static const uint8_t zeros[4096];
        const Msg *c;
        T t;

        setup_t(&t, NULL, NULL, 0);
        /* The header and 4 KiB of its payload: a server that waited for (or allocated) the whole
         * payload would never answer. */
        raw_frame(&t, true, WSLAY_BINARY_FRAME, zeros, sizeof(zeros), UINT64_C(1) << 30, false);
        WAIT_UNTIL(&t, true, client_find(&t, WSLAY_CONNECTION_CLOSE));
        c = client_find(&t, WSLAY_CONNECTION_CLOSE);
        assert_int_equal(c->status, WEBSOCKET_CLOSE_TOO_BIG);
        assert_int_equal(t.n_messages, 0);
        /* The client answers the close: the handshake ends with 1009. */
        WAIT_UNTIL(&t, true, t.closed);
        assert_int_equal(t.closed_code, WEBSOCKET_CLOSE_TOO_BIG);
        teardown_t(&t);
}

static void test_over_max_fragmented(void **state) {
        WebSocketLimits l = { .max_message_bytes = 1000 };
        uint8_t chunk[600];
        const Msg *c;
        T t;

        memset(chunk, 'x', sizeof(chunk));
        setup_t(&t, &l, NULL, 0);
        /* Each fragment fits; the message does not. */
        raw_frame(&t, false, WSLAY_TEXT_FRAME, chunk, sizeof(chunk), sizeof(chunk), false);
        raw_frame(&t, true, WSLAY_CONTINUATION_FRAME, chunk, sizeof(chunk), sizeof(chunk), false);
        WAIT_UNTIL(&t, true, client_find(&t, WSLAY_CONNECTION_CLOSE));
        c = client_find(&t, WSLAY_CONNECTION_CLOSE);
        assert_int_equal(c->status, WEBSOCKET_CLOSE_TOO_BIG);
        assert_int_equal(t.n_messages, 0);
        WAIT_UNTIL(&t, true, t.closed);
        assert_int_equal(t.closed_code, WEBSOCKET_CLOSE_TOO_BIG);
        teardown_t(&t);
}

static void test_exactly_max(void **state) {
        WebSocketLimits l = { .max_message_bytes = 1000 };
        uint8_t buf[1000];
        T t;

        memset(buf, 'y', sizeof(buf));
        setup_t(&t, &l, NULL, 0);
        client_queue(&t, WSLAY_BINARY_FRAME, buf, sizeof(buf));
        WAIT_UNTIL(&t, true, t.n_messages >= 1);
        assert_int_equal(t.last_size, 1000);
        assert_false(t.closed);
        teardown_t(&t);
}

static void test_unmasked_refused(void **state) {
        const Msg *c;
        T t;

        setup_t(&t, NULL, NULL, 0);
        raw_frame(&t, true, WSLAY_TEXT_FRAME, "{}", 2, 2, true);
        WAIT_UNTIL(&t, true, client_find(&t, WSLAY_CONNECTION_CLOSE));
        c = client_find(&t, WSLAY_CONNECTION_CLOSE);
        assert_int_equal(c->status, WEBSOCKET_CLOSE_PROTOCOL_ERROR);
        assert_int_equal(t.n_messages, 0);
        teardown_t(&t);
}

static void test_peer_hangs_up(void **state) {
        T t;

        setup_t(&t, NULL, NULL, 0);
        assert_int_equal(shutdown(t.client_fd, SHUT_RDWR), 0);
        WAIT_UNTIL(&t, false, t.closed);
        assert_int_equal(t.closed_code, WEBSOCKET_CLOSE_ABNORMAL);
        teardown_t(&t);
}

static void test_extra_bytes(void **state) {
        /* A masked text frame "hi" that arrived with the handshake. */
        static const uint8_t frame[] = { 0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2 };
        T t;

        setup_t(&t, NULL, frame, sizeof(frame));
        WAIT_UNTIL(&t, true, t.n_messages >= 1);
        assert_int_equal(t.last_size, 2);
        assert_memory_equal(t.last_data, "hi", 2);
        teardown_t(&t);
}

static void test_slow_reader(void **state) {
        /* The client never reads: the server stops at its cap and closes with 1008, explicitly. */
        WebSocketLimits l = { .max_message_bytes = 1024, .max_queued_bytes = 256 * 1024,
                              .close_timeout_usec = 200 * USEC_PER_MSEC };
        static uint8_t buf[16 * 1024];
        unsigned sent = 0;
        int r = 0;
        T t;

        setup_t(&t, &l, NULL, 0);
        for (unsigned i = 0; i < 10000 && r == 0; i++) {
                r = websocket_send(t.ws, true, buf, sizeof(buf));
                if (r == 0)
                        sent++;
                (void) sd_event_run(t.event, 0);
        }
        assert_int_equal(r, -ENOBUFS);
        assert_true(sent > 0);
        assert_true(websocket_is_closing(t.ws));
        assert_int_equal(websocket_send(t.ws, true, buf, 1), -EPIPE);
        WAIT_UNTIL(&t, false, t.closed);
        assert_int_equal(t.closed_code, WEBSOCKET_CLOSE_POLICY);
        teardown_t(&t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accept_rfc_example),
                cmocka_unit_test(test_handshake_valid),
                cmocka_unit_test(test_handshake_refused),
                cmocka_unit_test(test_header_tokens),
                cmocka_unit_test(test_echo_text_and_binary),
                cmocka_unit_test(test_large_message_both_ways),
                cmocka_unit_test(test_fragmented),
                cmocka_unit_test(test_ping_answered),
                cmocka_unit_test(test_server_pings),
                cmocka_unit_test(test_close_handshake),
                cmocka_unit_test(test_server_close),
                cmocka_unit_test(test_close_after_sent),
                cmocka_unit_test(test_gigabyte_header),
                cmocka_unit_test(test_over_max_fragmented),
                cmocka_unit_test(test_exactly_max),
                cmocka_unit_test(test_unmasked_refused),
                cmocka_unit_test(test_peer_hangs_up),
                cmocka_unit_test(test_extra_bytes),
                cmocka_unit_test(test_slow_reader),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
