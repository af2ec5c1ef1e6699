/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Protocol upgrades (http-server.h): a 101 answer, and the connection's socket handed to its new
 * owner once MHD sent it. In our mode (external epoll, no TLS) MHD treats an upgraded connection
 * as suspended: it stops watching the socket, leaves it open and counts the connection until
 * MHD_UPGRADE_ACTION_CLOSE, after which its normal close path runs (the request's completion,
 * then NOTIFY_CLOSED frees our HttpConnection). MHD aborts when stopped with one still open:
 * http_upgrade_close_all() lets the owners go first. May call util/ only besides.
 */

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "http/http-server-internal.h"
#include "util/log.h"
#include "util/macro.h"

struct HttpUpgrade {
        HttpServer *server;
        HttpRequest *req;                 /* until the socket is handed over */
        HttpConnection *conn;
        struct MHD_UpgradeResponseHandle *urh;
        HttpUpgradeHandler handler;
        void (*release)(void *userdata);
        void (*retire)(void *userdata);
        void *userdata;
        HttpUpgrade *prev, *next;         /* in server->upgrades, once handed over */
        char client[INET6_ADDRSTRLEN + 16];
};

static void upgrade_unlink(HttpUpgrade *u) {
        if (u->prev)
                u->prev->next = u->next;
        else if (u->server->upgrades == u)
                u->server->upgrades = u->next;
        if (u->next)
                u->next->prev = u->prev;
        u->prev = u->next = NULL;
}

static void on_mhd_upgrade(void *cls, struct MHD_Connection *connection, void *con_cls, const char *extra_in,
                           size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
        HttpUpgrade *u = cls;
        HttpServer *s = u->server;

        u->urh = urh;
        if (u->req) {
                u->req->upgrade = NULL;
                u->req->upgraded = true;
                u->req = NULL;
        }
        u->next = s->upgrades;
        if (s->upgrades)
                s->upgrades->prev = u;
        s->upgrades = u;
        if (u->conn)
                http_connection_arm(u->conn, 0);   /* the new protocol bounds its own time */
        /* MHD leaves the socket as it sent the 101: possibly corked, and Nagle on. A WebSocket's
         * small frames must go out as written, or every reply waits out the peer's delayed ACK. */
        (void) MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CORK_OFF);
        if (setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int)) < 0 && errno != EOPNOTSUPP &&
            errno != ENOPROTOOPT)
                log_debug_errno(errno, "Cannot set TCP_NODELAY on the upgraded connection of %s: %m", u->client);
        log_debug("Connection from %s upgraded.", u->client);
        u->handler(u, sock, extra_in, extra_in_size, u->userdata);
}

int http_request_reply_upgrade(HttpRequest *req, const char *const *headers, HttpUpgradeHandler handler,
                               void (*release)(void *userdata), void *userdata) {
        struct MHD_Response *resp;
        HttpUpgrade *u;

        if (req->replied)
                return -EALREADY;
        if (req->server->retiring)
                return -ESHUTDOWN;
        u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        *u = (HttpUpgrade) {
                .server = req->server, .req = req, .conn = req->conn,
                .handler = handler, .release = release, .userdata = userdata,
        };
        (void) snprintf(u->client, sizeof(u->client), "%s", http_request_client(req));
        resp = MHD_create_response_for_upgrade(on_mhd_upgrade, u);
        if (!resp) {
                free(u);
                return -ENOMEM;
        }
        for (const char *const *h = headers; h && h[0] && h[1]; h += 2)
                (void) MHD_add_response_header(resp, h[0], h[1]);
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        req->upgrade = u;
        req->response = resp;
        req->status = MHD_HTTP_SWITCHING_PROTOCOLS;
        req->replied = true;
        if (req->suspended) {
                http_request_resume(req);
                (void) http_server_run(req->server);
        }
        return 0;
}

void http_upgrade_request_gone(HttpRequest *req) {
        HttpUpgrade *u = req->upgrade;

        if (!u)
                return;
        /* The 101 never went out: the handler will not run. */
        req->upgrade = NULL;
        if (u->release)
                u->release(u->userdata);
        free(u);
}

void http_upgrade_close(HttpUpgrade *u) {
        HttpServer *s;

        if (!u)
                return;
        s = u->server;
        upgrade_unlink(u);
        if (MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE) != MHD_YES)
                log_warning("libmicrohttpd refused to close the upgraded connection of %s.", u->client);
        free(u);
        /* MHD finishes the connection on its next run. */
        (void) http_server_run(s);
}

void http_upgrade_close_all(HttpServer *s) {
        while (s->upgrades) {
                HttpUpgrade *u = s->upgrades;

                upgrade_unlink(u);
                if (u->release)
                        u->release(u->userdata);
                (void) MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
                free(u);
        }
}

void http_upgrade_on_retire(HttpUpgrade *u, void (*retire)(void *userdata)) {
        u->retire = retire;
}

void http_upgrade_retire_all(HttpServer *s) {
        /* The callbacks start close handshakes; none closes synchronously (http-server.h). */
        for (HttpUpgrade *u = s->upgrades; u; u = u->next)
                if (u->retire)
                        u->retire(u->userdata);
}

const char *http_upgrade_client(const HttpUpgrade *u) {
        return u->client;
}

sd_event *http_upgrade_event(const HttpUpgrade *u) {
        return u->server->event;
}
