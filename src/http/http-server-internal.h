/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private to the HTTP server (http-server.c, http-connection.c, http-answer.c): the server, the
 * connection, the request and the streamed answer, and the functions one part calls in another.
 * Nothing outside these three files includes this; the public API is http-server.h.
 */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "http/http-server.h"
#include "util/socket-util.h"

typedef struct HttpConnection HttpConnection;
typedef struct HttpUpgrade HttpUpgrade;

struct HttpServer {
        sd_event *event;
        struct MHD_Daemon *mhd;
        sd_event_source *mhd_io;
        sd_event_source *mhd_timer;
        sd_event_source **listeners;
        unsigned *listener_tags;          /* parallel to listeners: what http_server_add_listener_tag() gave */
        size_t n_listeners;
        HttpServerLimits limits;
        HttpServerCallbacks cb;
        void *userdata;
        HttpConnection *connections;      /* doubly-linked list */
        unsigned n_connections;
        HttpConnection *adding;           /* connection being handed to MHD_add_connection() */
        HttpRequest *suspended;           /* list of suspended requests (resumed before stopping) */
        HttpUpgrade *upgrades;            /* sockets handed over after a 101 (closed before stopping) */
        uint64_t n_requests;
        uint64_t next_request_id;
        bool in_run;
        bool retiring;                    /* http_server_retire(): no accepting, answers close */
};

struct HttpConnection {
        HttpServer *server;
        HttpConnection *prev, *next;
        int fd;
        SockaddrUnion addr;
        socklen_t addr_len;
        char client[INET6_ADDRSTRLEN + 16];
        unsigned tag;                     /* its listener's tag (the API dialect it speaks) */
        sd_event_source *deadline;
        bool attached;                    /* MHD knows it; freed from its NOTIFY_CONNECTION */
};

struct HttpRequest {
        HttpServer *server;
        HttpConnection *conn;
        struct MHD_Connection *mhd;
        char *target;                     /* raw request target as sent */
        const char *method;
        const char *path;
        uint64_t id;
        uint64_t body_cap;
        char *body;
        size_t body_size;
        size_t body_alloc;
        struct MHD_Response *response;
        unsigned status;
        bool started, dispatched, suspended, replied;
        bool in_handler;                  /* inside on_mhd_access() for this request */
        bool want_suspend;                /* suspend when the handler returns */
        bool peer_gone;                   /* the client hung up while we waited */
        sd_event_source *hangup_source;   /* watches the socket while suspended */
        HttpStream *stream;               /* our streamed answer, if any */
        HttpUpgrade *upgrade;             /* a 101 queued, its socket not handed over yet */
        HttpBodySink sink;                /* streams the body instead of buffering it */
        void *sink_userdata;
        int sink_error;
        uint64_t sink_bytes;
        HttpRequest *suspended_prev, *suspended_next;
        bool upgraded;                    /* its socket was handed over (a WebSocket) */
        bool too_large;                   /* body over the cap: discarded, 413 at the end */
        bool own_too_large;               /* ... or dispatched all the same (http_request_own_too_large()) */
        void *userdata;
        void (*abort_cb)(HttpRequest *req, void *userdata);
};

struct HttpStream {
        HttpRequest *req;                 /* NULL once the request is gone */
        HttpStreamReader reader;
        void (*free_cb)(void *);
        void *userdata;
};

/* http_server_run() - run MHD once (not re-entered from its own callbacks) and re-arm its timer
 * from MHD_get_timeout(). Return: 0 or -errno (logged). */
int http_server_run(HttpServer *s);

/* http_connection_arm() - replace the deadline of @c by one @timeout_usec from now (0: none);
 * where it cannot be armed the connection is shut down (fail closed). */
void http_connection_arm(HttpConnection *c, uint64_t timeout_usec);
/* http_connection_free() - unlink @c from its server and free it (MHD closed its socket). */
void http_connection_free(HttpConnection *c);

/* http_upgrade_request_gone() - @req is freed before its 101 went out: release its upgrade. */
void http_upgrade_request_gone(HttpRequest *req);
/* http_upgrade_retire_all() - the server retires: each owner that asked is told to wind down. */
void http_upgrade_retire_all(HttpServer *s);
/* http_upgrade_close_all() - before MHD stops: every owner of a handed-over socket lets it go. */
void http_upgrade_close_all(HttpServer *s);

/* http_request_suspend_now() - suspend @req in MHD and watch its socket for a hang-up. */
void http_request_suspend_now(HttpRequest *req);
/* http_request_resume() - undo http_request_suspend_now(), if @req is suspended. */
void http_request_resume(HttpRequest *req);
