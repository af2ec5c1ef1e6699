/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The WebSocket → Jupyter message path of a kernel's channel, as src/api/kg-channels.c drives it,
 * on hostile input: the bytes are what a client sends after the 101, fed to the server side of
 * src/http/websocket.c (wslay: masking, fragments, control frames, the size rule, the close
 * handshake) as the bytes the HTTP server read past the handshake, over a socketpair whose
 * client end is shut for writing after them; every whole message goes on to
 * jupyter_msg_from_ws_text() / _binary() and, when it decodes, back out encoded as a kernel
 * message would be (jupyter_msg_to_ws(), websocket_send()).
 *
 * The first byte picks the channel's options: bit 0 the v1 subprotocol, bits 1-2 the message cap
 * (64, 1K, 16K, the default). Checks: no message past the cap reaches the owner; a decode is 0 or
 * -EBADMSG with a reason; what decodes has a header with msg_id and msg_type and a valid channel,
 * and encodes and decodes again; the connection always ends, closed() called once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "http/websocket.h"
#include "kernel/jupyter-msg.h"
#include "util/log.h"
#include "fuzz.h"

typedef struct Channel {
        bool v1;
        uint64_t max;
        unsigned n_closed;
        uint16_t code;
        size_t n_messages;
} Channel;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        /* The 1009 and 1002 journal entries are right, and noise here. */
        log_set_max_level(LOG_CRIT);
        return 0;
}

static void check_encodes(bool v1, const JupyterMsg *m) {
        JupyterMsg *back = NULL;
        const char *why = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        bool binary;

        FUZZ_CHECK(jupyter_msg_to_ws(v1, m, &buf, &len, &binary) == 0);
        FUZZ_CHECK(binary == (v1 || m->n_buffers > 0));
        if (binary)
                FUZZ_CHECK(jupyter_msg_from_ws_binary(v1, buf, len, &back, &why) == 0);
        else
                FUZZ_CHECK(jupyter_msg_from_ws_text((const char *) buf, len, &back, &why) == 0);
        FUZZ_CHECK(back->channel == m->channel);
        FUZZ_CHECK(json_object_equal(back->header, m->header) && json_object_equal(back->content, m->content));
        jupyter_msg_free(back);
        free(buf);
}

static void on_message(WebSocket *ws, bool binary, const uint8_t *data, size_t size, void *userdata) {
        Channel *ch = userdata;
        JupyterMsg *m = NULL;
        const char *why = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        bool out_binary;
        int r;

        FUZZ_CHECK(size <= ch->max);
        ch->n_messages++;
        r = binary ? jupyter_msg_from_ws_binary(ch->v1, data, size, &m, &why) :
                     jupyter_msg_from_ws_text((const char *) data, size, &m, &why);
        FUZZ_CHECK(r == 0 || r == -EBADMSG);
        FUZZ_CHECK((r == 0) == !!m);
        if (r < 0) {
                FUZZ_CHECK(why && *why);
                return;
        }
        FUZZ_CHECK(jupyter_msg_id(m) && jupyter_msg_type(m));
        FUZZ_CHECK(m->channel >= 0 && m->channel < _JUPYTER_CHANNEL_MAX);
        check_encodes(ch->v1, m);
        /* Out again, as the kernel's answer would go: the send path under the same connection. */
        FUZZ_CHECK(jupyter_msg_to_ws(ch->v1, m, &buf, &len, &out_binary) == 0);
        r = websocket_send(ws, out_binary, buf, len);
        FUZZ_CHECK(r == 0 || r == -EPIPE || r == -ENOBUFS);
        free(buf);
        jupyter_msg_free(m);
}

static void on_closed(WebSocket *ws, uint16_t code, void *userdata) {
        Channel *ch = userdata;

        ch->n_closed++;
        ch->code = code;
}

static const WebSocketOps ops = {
        .message = on_message,
        .closed = on_closed,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const uint64_t caps[] = { 64, 1024, 16 * 1024, 0 };
        WebSocket *ws = NULL;
        sd_event *e = NULL;
        Channel ch = {};
        int fds[2];

        if (size < 1 || size > 64 * 1024)
                return 0;
        ch.v1 = data[0] & 1;
        ch.max = caps[(data[0] >> 1) & 3] ?: WEBSOCKET_MAX_MESSAGE_DEFAULT;

        FUZZ_CHECK(sd_event_new(&e) >= 0);
        FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
        /* The client said all it says: the server reads its bytes, then the end of the stream. */
        FUZZ_CHECK(shutdown(fds[1], SHUT_WR) == 0);
        FUZZ_CHECK(websocket_new(e, fds[0], data + 1, size - 1, "fuzz",
                                 &(WebSocketLimits) {
                                         .max_message_bytes = caps[(data[0] >> 1) & 3],
                                         .ping_interval_usec = UINT64_MAX,
                                         .close_timeout_usec = 1000,
                                 },
                                 &ops, &ch, &ws) == 0);
        for (unsigned i = 0; i < 10000 && ch.n_closed == 0; i++)
                FUZZ_CHECK(sd_event_run(e, UINT64_MAX) >= 0);
        /* Always over, once: with the code we sent (ours: 1002, 1007, 1009; or the client's own,
         * echoed), or 1006 when none was sent before the peer went away. */
        FUZZ_CHECK(ch.n_closed == 1);
        FUZZ_CHECK(ch.code >= 1000 && ch.code <= 4999);
        websocket_free(ws);
        close(fds[0]);
        close(fds[1]);
        sd_event_unref(e);
        return 0;
}
