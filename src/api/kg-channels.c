/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * GET /api/kernels/{id}/channels: a kernel's WebSocket. The upgrade is checked (ws-handshake.h;
 * 400 otherwise), the v1.kernel.websocket.jupyter.org subprotocol chosen only when offered, and
 * once the 101 went out a KgChannel joins three things: the socket (HttpUpgrade), its framing
 * (WebSocket) and the kernel (a KernelClient).
 *
 * Client → kernel: each message is decoded (jupyter_msg_from_ws_*()) and sent on its channel; a
 * message that does not decode (not JSON, no header, an unknown channel) or that the kernel side
 * refuses is logged and dropped, as jupyter_server does: nothing reaches the kernel, the socket
 * stays open. Only the size rule (MaxMessageBytes=, close 1009) closes it.
 * Kernel → client: every message delivered is encoded (jupyter_msg_to_ws()) and queued; what the
 * WebSocket does when the client does not read is in websocket.h (stop reading it, close 1008 past
 * the cap). When the kernel ends the socket is closed (1001, the reason as its text) once what was
 * queued, the kernel's status: dead last, has been sent.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/kg-internal.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "http/websocket.h"
#include "http/ws-handshake.h"
#include "kernel/jupyter-msg.h"
#include "kernel/kernel.h"
#include "util/json-util.h"
#include "util/log.h"

#define KG_WS_V1_PROTOCOL "v1.kernel.websocket.jupyter.org"

typedef struct KgChannel {
        Manager *manager;
        char kernel_id[65];
        char owner[64];
        bool v1;
        HttpUpgrade *upgrade;           /* once the 101 went out */
        WebSocket *ws;
        KernelClient *client;           /* NULL once the kernel is gone */
        uint64_t n_dropped;
} KgChannel;

static void channel_free(KgChannel *ch) {
        if (!ch)
                return;
        if (ch->client)
                kernel_detach(ch->client);
        websocket_free(ch->ws);
        free(ch);
}

/* The server goes away (or the client did before the 101): let go, never close (http-server.h). */
static void on_release(void *userdata) {
        channel_free(userdata);
}

/* The daemon restarts: the client reconnects to the next one (kernels survive, docs/kernels.md). */
static void on_retire(void *userdata) {
        KgChannel *ch = userdata;

        if (ch->ws)
                websocket_close(ch->ws, WEBSOCKET_CLOSE_GOING_AWAY, "server restarting");
}

static void on_ws_message(WebSocket *ws, bool binary, const uint8_t *data, size_t size, void *userdata) {
        KgChannel *ch = userdata;
        _cleanup_jupyter_msg_ JupyterMsg *msg = NULL;
        const char *why = NULL;
        int r;

        if (!ch->client)
                return;
        r = binary ? jupyter_msg_from_ws_binary(ch->v1, data, size, &msg, &why) :
                     jupyter_msg_from_ws_text((const char *) data, size, &msg, &why);
        if (r < 0) {
                ch->n_dropped++;
                log_info("Kernel %s: dropped a message from %s: %s.", ch->kernel_id, websocket_client(ws),
                         r == -ENOMEM ? "out of memory" : why ?: "it does not decode");
                return;
        }
        r = kernel_client_send(ch->client, STEAL(msg));
        if (r < 0) {
                ch->n_dropped++;
                log_info_errno(r, "Kernel %s: dropped a message from %s, the kernel side refused it: %m", ch->kernel_id, websocket_client(ws));
        }
}

static void on_ws_closed(WebSocket *ws, uint16_t code, void *userdata) {
        KgChannel *ch = userdata;
        HttpUpgrade *u = ch->upgrade;

        log_debug("Kernel %s: WebSocket of %s closed (%u).", ch->kernel_id, websocket_client(ws), (unsigned) code);
        channel_free(ch);
        http_upgrade_close(u);
}

static void on_kernel_deliver(KernelClient *c, JupyterMsg *m, void *userdata) {
        _cleanup_jupyter_msg_ JupyterMsg *msg = m;
        _cleanup_free_ uint8_t *buf = NULL;
        KgChannel *ch = userdata;
        bool binary = false;
        size_t len = 0;
        int r;

        if (!ch->ws || websocket_is_closing(ch->ws))
                return;
        r = jupyter_msg_to_ws(ch->v1, msg, &buf, &len, &binary);
        if (r < 0) {
                log_warning_errno(r, "Kernel %s: a message for %s could not be encoded, closing: %m",
                                  ch->kernel_id, websocket_client(ch->ws));
                /* Never a silent hole in the output: the client sees the socket end. */
                return websocket_close(ch->ws, WEBSOCKET_CLOSE_INTERNAL, "message could not be encoded");
        }
        r = websocket_send(ch->ws, binary, buf, len);
        if (r < 0 && r != -ENOBUFS && r != -EPIPE)
                websocket_close(ch->ws, WEBSOCKET_CLOSE_INTERNAL, "out of memory");
}

static void on_kernel_closed(KernelClient *c, KernelEndReason reason, void *userdata) {
        KgChannel *ch = userdata;
        char text[64];

        /* Unlinked from the kernel already; ours to free (kernel.h). */
        kernel_detach(c);
        ch->client = NULL;
        (void) snprintf(text, sizeof(text), "kernel ended: %s", kernel_end_reason_to_string(reason) ?: "unknown");
        /* After what is queued, the kernel's status: dead last of all. */
        if (ch->ws)
                websocket_close_after_sent(ch->ws, WEBSOCKET_CLOSE_GOING_AWAY, text);
}

static const KernelClientOps kg_client_ops = {
        .deliver = on_kernel_deliver,
        .closed = on_kernel_closed,
};

static const WebSocketOps kg_ws_ops = {
        .message = on_ws_message,
        .closed = on_ws_closed,
};

static void on_upgraded(HttpUpgrade *u, int fd, const void *extra, size_t extra_size, void *userdata) {
        KgChannel *ch = userdata;
        Manager *m = ch->manager;
        Kernel *k;
        int r;

        ch->upgrade = u;
        http_upgrade_on_retire(u, on_retire);
        r = websocket_new(http_upgrade_event(u), fd, extra, extra_size, http_upgrade_client(u),
                          &(WebSocketLimits) { .max_message_bytes = kg_max_message_bytes(m) },
                          &kg_ws_ops, ch, &ch->ws);
        if (r < 0) {
                log_warning_errno(r, "Kernel %s: failed to serve the WebSocket of %s: %m", ch->kernel_id,
                                  http_upgrade_client(u));
                channel_free(ch);
                return http_upgrade_close(u);
        }
        /* The kernel may have ended while the 101 went out. */
        k = m->kernels ? kernel_manager_find(m->kernels, ch->owner, ch->kernel_id) : NULL;
        r = k ? kernel_attach(k, &kg_client_ops, ch, &ch->client) : -ENOENT;
        if (r < 0) {
                log_debug_errno(r, "Kernel %s: cannot attach the WebSocket of %s: %m", ch->kernel_id, http_upgrade_client(u));
                websocket_close(ch->ws, WEBSOCKET_CLOSE_GOING_AWAY, r == -ENOENT ? "kernel gone" : "kernel unavailable");
        }
}

void kg_channels(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        const char *protocols = http_request_header(req, "Sec-WebSocket-Protocol");
        WsHandshakeRequest h = {
                .method = http_request_method(req),
                .upgrade = http_request_header(req, "Upgrade"),
                .connection = http_request_header(req, "Connection"),
                .version = http_request_header(req, "Sec-WebSocket-Version"),
                .key = http_request_header(req, "Sec-WebSocket-Key"),
        };
        char accept[WS_ACCEPT_SIZE], id[65];
        const char *why = NULL;
        KgChannel *ch;
        Kernel *k;
        int r;

        /* An unknown kernel first: a client that asks for a dead kernel's socket learns it is gone
         * (a dead kernel stays listed with its reason a while, but has no socket to open). */
        if (kg_param_kernel_id(params[0], lens[0], id) < 0 || !(k = kernel_manager_find(m->kernels, owner, id)))
                return kg_reply_error(req, 404, "Kernel does not exist: %.*s", (int) MIN(lens[0], (size_t) 64), params[0]);
        if (kernel_state(k) == KERNEL_DEAD)
                return kg_reply_error(req, 404, "Kernel %s has ended: %s.", id,
                                      kernel_end_reason_to_string(kernel_end_reason(k)) ?: "unknown");

        r = ws_handshake_check(&h, accept, &why);
        if (r == -EPROTONOSUPPORT) {
                const char *const hdr[] = { "Sec-WebSocket-Version", "13", NULL };
                static const char body426[] =
                        "{\"reason\":\"Upgrade Required\",\"message\":\"Only WebSocket version 13 is spoken here.\"}";

                if (http_request_reply(req, 426, "application/json", body426, strlen(body426), false, hdr) < 0)
                        http_reply_oom(req);
                return;
        }
        if (r < 0)
                return kg_reply_error(req, 400, "%s", why);

        ch = calloc(1, sizeof(*ch));
        if (!ch)
                return http_reply_oom(req);
        ch->manager = m;
        ch->v1 = ws_header_has_token(protocols, KG_WS_V1_PROTOCOL);
        memcpy(ch->kernel_id, id, sizeof(id));
        (void) snprintf(ch->owner, sizeof(ch->owner), "%s", owner);
        {
                const char *const hdr[] = {
                        "Upgrade", "websocket",
                        "Sec-WebSocket-Accept", accept,
                        ch->v1 ? "Sec-WebSocket-Protocol" : NULL, KG_WS_V1_PROTOCOL,
                        NULL,
                };

                r = http_request_reply_upgrade(req, hdr, on_upgraded, on_release, ch);
        }
        if (r < 0) {
                free(ch);
                if (r == -ESHUTDOWN)
                        return kg_reply_error(req, 503, "The daemon is restarting; open the WebSocket again.");
                return http_reply_oom(req);
        }
}
