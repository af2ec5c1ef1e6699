/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libmicrohttpd driven by sd-event: we accept connections ourselves (for per-client and overall
 * caps and header/body deadlines), hand them to an MHD daemon without listen socket or threads,
 * and run MHD from its epoll fd and its timeout, both as sd-event sources.
 */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "http/http-server.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/socket-util.h"

typedef struct HttpConnection HttpConnection;

struct HttpServer {
        sd_event *event;
        struct MHD_Daemon *mhd;
        sd_event_source *mhd_io;
        sd_event_source *mhd_timer;
        sd_event_source **listeners;
        size_t n_listeners;
        HttpServerLimits limits;
        HttpServerCallbacks cb;
        void *userdata;
        HttpConnection *connections;      /* doubly-linked list */
        unsigned n_connections;
        HttpConnection *adding;           /* connection being handed to MHD_add_connection() */
        HttpRequest *suspended;           /* list of suspended requests (resumed before stopping) */
        uint64_t n_requests;
        uint64_t next_request_id;
        bool in_run;
};

struct HttpConnection {
        HttpServer *server;
        HttpConnection *prev, *next;
        int fd;
        SockaddrUnion addr;
        socklen_t addr_len;
        char client[INET6_ADDRSTRLEN + 16];
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
        HttpBodySink sink;                /* streams the body instead of buffering it */
        void *sink_userdata;
        int sink_error;
        uint64_t sink_bytes;
        HttpRequest *suspended_prev, *suspended_next;
        bool too_large;                   /* body over the cap: discarded, 413 at the end */
        void *userdata;
        void (*abort_cb)(HttpRequest *req, void *userdata);
};

struct HttpStream {
        HttpRequest *req;                 /* NULL once the request is gone */
        HttpStreamReader reader;
        void (*free_cb)(void *);
        void *userdata;
};

static int server_run(HttpServer *s);

/* ---- deadlines -------------------------------------------------------------------------- */

static int on_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpConnection *c = userdata;

        /* MHD offers no call to drop a connection from outside a handler; shutting the socket
         * down makes MHD see EOF on its next run and close it through its normal path. */
        log_debug("Connection from %s missed its deadline, closing.", c->client);
        (void) shutdown(c->fd, SHUT_RDWR);
        c->deadline = sd_event_source_disable_unref(c->deadline);
        return server_run(c->server);
}

static void connection_arm(HttpConnection *c, uint64_t timeout_usec) {
        int r;

        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (timeout_usec == 0)
                return;
        r = sd_event_add_time_relative(c->server->event, &c->deadline, CLOCK_MONOTONIC, timeout_usec,
                                       100 * USEC_PER_MSEC, on_deadline, c);
        if (r < 0) {
                /* Fail closed: a connection we cannot bound does not get served. */
                log_warning_errno(r, "Failed to arm connection deadline, closing: %m");
                (void) shutdown(c->fd, SHUT_RDWR);
                return;
        }
        (void) sd_event_source_set_description(c->deadline, "http-deadline");
}

static void connection_free(HttpConnection *c) {
        HttpServer *s;

        if (!c)
                return;
        s = c->server;
        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (c->prev)
                c->prev->next = c->next;
        else
                s->connections = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_connections--;
        free(c);
        if (s->cb.activity)
                s->cb.activity(s, s->userdata);
}

static bool same_client(const HttpConnection *a, const SockaddrUnion *addr) {
        if (a->addr.sa.sa_family != addr->sa.sa_family)
                return false;
        switch (addr->sa.sa_family) {
        case AF_INET:
                return a->addr.in.sin_addr.s_addr == addr->in.sin_addr.s_addr;
        case AF_INET6:
                return memcmp(&a->addr.in6.sin6_addr, &addr->in6.sin6_addr, sizeof(struct in6_addr)) == 0;
        default:
                /* AF_UNIX peers are local processes; they share one bucket. */
                return true;
        }
}

/* ---- accepting ------------------------------------------------------------------------------- */

static int on_listener(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpServer *s = userdata;

        for (unsigned i = 0; i < 64; i++) {
                SockaddrUnion addr = {};
                socklen_t len = sizeof(addr);
                unsigned same = 0;
                HttpConnection *c;
                int cfd;

                cfd = accept4(fd, &addr.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        if (errno == ECONNABORTED || errno == EPROTO)
                                continue;
                        log_warning_errno(errno, "accept() failed, ignoring: %m");
                        break;
                }

                for (HttpConnection *o = s->connections; o; o = o->next)
                        if (same_client(o, &addr))
                                same++;
                if (s->n_connections >= s->limits.max_connections ||
                    (s->limits.max_connections_per_client > 0 && same >= s->limits.max_connections_per_client)) {
                        char buf[INET6_ADDRSTRLEN + 16];
                        log_debug("Refusing connection from %s: %u open overall, %u from this client.",
                                  sockaddr_format(&addr.sa, len, buf, sizeof(buf)), s->n_connections, same);
                        safe_close(cfd);
                        continue;
                }

                c = calloc(1, sizeof(*c));
                if (!c) {
                        safe_close(cfd);
                        return log_oom();
                }
                *c = (HttpConnection) { .server = s, .fd = cfd, .addr = addr, .addr_len = len, .next = s->connections };
                (void) sockaddr_format(&addr.sa, len, c->client, sizeof(c->client));
                if (s->connections)
                        s->connections->prev = c;
                s->connections = c;
                s->n_connections++;
                connection_arm(c, s->limits.header_timeout_usec);

                s->adding = c;
                if (MHD_add_connection(s->mhd, cfd, &addr.sa, len) != MHD_YES) {
                        /* MHD closed the socket already. */
                        log_debug("MHD refused connection from %s.", c->client);
                        s->adding = NULL;
                        connection_free(c);
                        continue;
                }
                s->adding = NULL;
                c->attached = true;
                if (s->cb.activity)
                        s->cb.activity(s, s->userdata);
        }
        return server_run(s);
}

/* ---- MHD callbacks --------------------------------------------------------------------------- */

static void on_mhd_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
        HttpServer *s = cls;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                *socket_context = s->adding;
                return;
        }
        if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
                connection_free(*socket_context);
                *socket_context = NULL;
        }
}

static void *on_mhd_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
        HttpServer *s = cls;
        const union MHD_ConnectionInfo *ci;
        HttpRequest *req;

        req = calloc(1, sizeof(*req));
        if (!req)
                return NULL;
        ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        *req = (HttpRequest) {
                .server = s,
                .mhd = connection,
                .conn = ci ? ci->socket_context : NULL,
                .id = ++s->next_request_id,
        };
        /* Bounded by MHD's connection memory limit. */
        req->target = strdup(uri ?: "");
        return req;
}

static void request_unlink_suspended(HttpRequest *req) {
        HttpServer *s = req->server;

        req->hangup_source = sd_event_source_disable_unref(req->hangup_source);
        if (!req->suspended)
                return;
        if (req->suspended_prev)
                req->suspended_prev->suspended_next = req->suspended_next;
        else if (s->suspended == req)
                s->suspended = req->suspended_next;
        if (req->suspended_next)
                req->suspended_next->suspended_prev = req->suspended_prev;
        req->suspended_prev = req->suspended_next = NULL;
        req->suspended = false;
}

static void request_resume(HttpRequest *req) {
        if (!req->suspended)
                return;
        request_unlink_suspended(req);
        MHD_resume_connection(req->mhd);
}

static void request_abort(HttpRequest *req) {
        void (*cb)(HttpRequest *, void *) = req->abort_cb;

        /* At most once: from a hang-up seen while suspended, or from MHD's completion. */
        req->abort_cb = NULL;
        if (cb && !req->replied)
                cb(req, req->userdata);
}

static void request_free(HttpRequest *req) {
        if (!req)
                return;
        if (req->stream)
                req->stream->req = NULL;
        request_unlink_suspended(req);
        if (req->response)
                MHD_destroy_response(req->response);
        free(req->body);
        free(req->target);
        free(req);
}

static void on_mhd_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                             enum MHD_RequestTerminationCode toe) {
        HttpServer *s = cls;
        HttpRequest *req = *con_cls;

        *con_cls = NULL;
        if (!req)
                return;
        request_abort(req);
        if (req->conn && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
                /* keep-alive: the next request's headers must arrive in time too */
                connection_arm(req->conn, s->limits.header_timeout_usec);
        request_free(req);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        _cleanup_free_ char *msg = NULL;
        size_t l;

        if (vasprintf(&msg, fmt, ap) < 0)
                return;
        l = strlen(msg);
        while (l > 0 && msg[l - 1] == '\n')
                msg[--l] = '\0';
        log_debug("libmicrohttpd: %s", msg);
}

static MHD_Result_t queue_pending(HttpRequest *req) {
        MHD_Result_t ret;

        if (!req->response)
                return MHD_YES;
        ret = MHD_queue_response(req->mhd, req->status, req->response);
        MHD_destroy_response(req->response);
        req->response = NULL;
        return ret;
}

static int on_hangup(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpRequest *req = userdata;

        /* MHD does not watch suspended connections: we do, so that a client that goes away
         * while its request waits (a synchronous execution) cancels it (API.md). */
        log_debug("Client of request %" PRIu64 " hung up while it was waiting.", req->id);
        req->hangup_source = sd_event_source_disable_unref(req->hangup_source);
        req->peer_gone = true;
        request_abort(req);
        /* Let MHD see the closed socket and finish the request. */
        request_resume(req);
        return server_run(req->server);
}

static void request_suspend_now(HttpRequest *req) {
        HttpServer *s = req->server;
        int r;

        MHD_suspend_connection(req->mhd);
        req->suspended = true;
        req->suspended_next = s->suspended;
        if (s->suspended)
                s->suspended->suspended_prev = req;
        s->suspended = req;
        if (req->conn) {
                r = sd_event_add_io(s->event, &req->hangup_source, req->conn->fd, EPOLLRDHUP, on_hangup, req);
                if (r < 0)
                        log_warning_errno(r, "Failed to watch a waiting client, ignoring: %m");
                else
                        (void) sd_event_source_set_description(req->hangup_source, "http-hangup");
        }
}

static MHD_Result_t on_mhd_access(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
        HttpServer *s = cls;
        HttpRequest *req = *con_cls;

        if (!req)
                return MHD_NO;   /* out of memory in on_mhd_uri(): drop the connection */

        if (!req->started) {
                req->started = true;
                req->method = method;
                req->path = url;
                s->n_requests++;
                if (req->conn)
                        connection_arm(req->conn, s->limits.request_timeout_usec);
                req->body_cap = s->cb.begin(req, s->userdata);
                /* An early answer to a request without a body waits for MHD's next call: queued
                 * now, before MHD has seen the (empty) body, it would close the connection. */
                if (req->replied && http_request_header_count(req, "Content-Length") == 0 &&
                    http_request_header_count(req, "Transfer-Encoding") == 0)
                        return MHD_YES;
                return queue_pending(req);
        }

        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;

                *upload_data_size = 0;
                if (req->replied || req->too_large)
                        return MHD_YES;           /* answered early or over the cap: discard */
                if (req->sink) {
                        if (req->sink_error < 0)
                                return MHD_YES;   /* the consumer gave up: discard the rest */
                        req->sink_bytes += n;
                        if (req->sink_bytes > req->body_cap) {
                                req->too_large = true;
                                req->sink_error = -EFBIG;
                                (void) req->sink(req, NULL, 0, req->sink_error, req->sink_userdata);
                                return MHD_YES;
                        }
                        req->sink_error = req->sink(req, upload_data, n, 0, req->sink_userdata);
                        /* Streamed uploads (authenticated: sinks are set only after the bearer
                         * check) may take longer than RequestTimeoutSec in total: the deadline
                         * slides while data keeps coming. */
                        if (req->conn)
                                connection_arm(req->conn, s->limits.request_timeout_usec);
                        return MHD_YES;
                }
                if ((uint64_t) req->body_size + n > req->body_cap) {
                        /* MHD cannot queue a response in the middle of an upload: drop the body,
                         * answer 413 once it has ended (the request deadline bounds the wait). */
                        req->too_large = true;
                        req->body = mfree(req->body);
                        req->body_size = req->body_alloc = 0;
                        return MHD_YES;
                }
                if (req->body_size + n + 1 > req->body_alloc) {
                        size_t want = MAX(req->body_alloc * 2, req->body_size + n + 1);
                        char *b = realloc(req->body, want);
                        if (!b)
                                return MHD_NO;
                        req->body = b;
                        req->body_alloc = want;
                }
                memcpy(req->body + req->body_size, upload_data, n);
                req->body_size += n;
                req->body[req->body_size] = '\0';
                return MHD_YES;
        }

        /* The client hung up while its request waited (on_hangup() resumed it so that MHD sees
         * that): nobody is left to answer. Without a response MHD would call us again at once,
         * and again, until its connection timeout: close the connection now. */
        if (req->peer_gone && !req->response)
                return MHD_NO;

        if (req->too_large && !req->replied) {
                char msg[160];
                if (req->body_cap == 0)
                        (void) snprintf(msg, sizeof(msg),
                                        "{\"error\":\"payload_too_large\",\"message\":\"This request takes no body.\"}");
                else
                        (void) snprintf(msg, sizeof(msg),
                                        "{\"error\":\"payload_too_large\",\"message\":\"The request body exceeds %" PRIu64 " bytes.\"}",
                                        req->body_cap);
                (void) http_request_reply(req, 413, "application/json", msg, strlen(msg), true, NULL);
                return queue_pending(req);
        }

        if (!req->dispatched && !req->replied) {
                req->dispatched = true;
                if (req->conn)
                        connection_arm(req->conn, 0);   /* the handler bounds its own work */
                req->in_handler = true;
                s->cb.dispatch(req, s->userdata);
                req->in_handler = false;
                if (req->want_suspend && !req->replied)
                        request_suspend_now(req);
                req->want_suspend = false;
        }
        return queue_pending(req);
}

/* ---- event-loop glue ------------------------------------------------------------------------- */

static int server_run(HttpServer *s) {
        MHD_UNSIGNED_LONG_LONG timeout_ms;
        int r;

        if (s->in_run)
                return 0;
        s->in_run = true;
        (void) MHD_run(s->mhd);
        s->in_run = false;

        if (MHD_get_timeout(s->mhd, &timeout_ms) == MHD_YES) {
                uint64_t now;

                r = sd_event_now(s->event, CLOCK_MONOTONIC, &now);
                if (r < 0)
                        return log_error_errno(r, "Failed to read the clock: %m");
                r = sd_event_source_set_time(s->mhd_timer, now + (uint64_t) timeout_ms * USEC_PER_MSEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_ONESHOT);
        } else
                r = sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to re-arm the HTTP timer: %m");
        return 0;
}

static int on_mhd_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        return server_run(userdata);
}

static int on_mhd_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        return server_run(userdata);
}

int http_server_new(sd_event *e, const HttpServerLimits *limits, const HttpServerCallbacks *cb,
                    void *userdata, HttpServer **ret) {
        const union MHD_DaemonInfo *info;
        HttpServer *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (HttpServer) { .event = sd_event_ref(e), .limits = *limits, .cb = *cb, .userdata = userdata };

        s->mhd = MHD_start_daemon(
                        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                        0, NULL, NULL, on_mhd_access, s,
                        /* Our own caps are enforced at accept(); MHD's is a backstop. */
                        MHD_OPTION_CONNECTION_LIMIT, (unsigned) (limits->max_connections + 16),
                        MHD_OPTION_CONNECTION_TIMEOUT,
                        (unsigned) MAX((uint64_t) 1, (limits->header_timeout_usec + USEC_PER_SEC - 1) / USEC_PER_SEC),
                        /* Request line + header block + our read buffer must fit. */
                        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (64 * 1024),
                        MHD_OPTION_STRICT_FOR_CLIENT, (int) 1,
                        MHD_OPTION_NOTIFY_CONNECTION, on_mhd_connection, s,
                        MHD_OPTION_NOTIFY_COMPLETED, on_mhd_completed, s,
                        MHD_OPTION_URI_LOG_CALLBACK, on_mhd_uri, s,
                        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                        MHD_OPTION_END);
        if (!s->mhd) {
                http_server_free(s);
                return -EIO;
        }

        info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                http_server_free(s);
                return -EIO;
        }
        r = sd_event_add_io(e, &s->mhd_io, info->epoll_fd, EPOLLIN, on_mhd_io, s);
        if (r >= 0)
                /* Accuracy 1 µs: the default slack (250 ms) would stall MHD whenever it still has
                 * buffered data to process and asked to be run again at once. */
                r = sd_event_add_time(e, &s->mhd_timer, CLOCK_MONOTONIC, 0, 1, on_mhd_timer, s);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_OFF);
        if (r < 0) {
                http_server_free(s);
                return r;
        }
        (void) sd_event_source_set_description(s->mhd_io, "mhd-epoll");
        (void) sd_event_source_set_description(s->mhd_timer, "mhd-timer");
        *ret = s;
        return 0;
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_listeners; i++) {
                int fd = sd_event_source_get_io_fd(s->listeners[i]);
                sd_event_source_disable_unref(s->listeners[i]);
                safe_close(fd);
        }
        free(s->listeners);
        s->mhd_io = sd_event_source_disable_unref(s->mhd_io);
        s->mhd_timer = sd_event_source_disable_unref(s->mhd_timer);
        if (s->mhd) {
                /* MHD aborts when stopped with suspended connections. */
                while (s->suspended)
                        request_resume(s->suspended);
                (void) MHD_run(s->mhd);
                MHD_stop_daemon(s->mhd);   /* closes connections: NOTIFY_CLOSED frees them */
        }
        while (s->connections)
                connection_free(s->connections);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

int http_server_add_listener(HttpServer *s, int fd) {
        sd_event_source **l, *es = NULL;
        int r;

        l = realloc(s->listeners, sizeof(*l) * (s->n_listeners + 1));
        if (!l) {
                safe_close(fd);
                return -ENOMEM;
        }
        s->listeners = l;
        r = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        if (r < 0) {
                safe_close(fd);
                return negative_errno();
        }
        r = sd_event_add_io(s->event, &es, fd, EPOLLIN, on_listener, s);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        (void) sd_event_source_set_description(es, "http-listener");
        s->listeners[s->n_listeners++] = es;
        return 0;
}

unsigned http_server_n_connections(const HttpServer *s) {
        return s->n_connections;
}

unsigned http_server_n_listeners(const HttpServer *s) {
        return (unsigned) s->n_listeners;
}

uint64_t http_server_n_requests(const HttpServer *s) {
        return s->n_requests;
}

/* ---- requests -------------------------------------------------------------------------------- */

const char *http_request_method(const HttpRequest *req) {
        return req->method;
}

const char *http_request_path(const HttpRequest *req) {
        return req->path;
}

const char *http_request_target(const HttpRequest *req) {
        return req->target ?: "";
}

const char *http_request_header(const HttpRequest *req, const char *name) {
        return MHD_lookup_connection_value(req->mhd, MHD_HEADER_KIND, name);
}

typedef struct HeaderCount {
        const char *name;
        unsigned n;
} HeaderCount;

static MHD_Result_t count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        HeaderCount *hc = cls;

        if (!hc->name || strcasecmp(hc->name, key) == 0)
                hc->n++;
        return MHD_YES;
}

unsigned http_request_header_count(const HttpRequest *req, const char *name) {
        HeaderCount hc = { .name = name };

        (void) MHD_get_connection_values(req->mhd, MHD_HEADER_KIND, count_header, &hc);
        return hc.n;
}

unsigned http_request_n_headers(const HttpRequest *req) {
        return http_request_header_count(req, NULL);
}

const char *http_request_query(const HttpRequest *req, const char *name) {
        return MHD_lookup_connection_value(req->mhd, MHD_GET_ARGUMENT_KIND, name);
}

const void *http_request_body(const HttpRequest *req, size_t *ret_size) {
        *ret_size = req->body_size;
        return req->body ?: "";
}

uint64_t http_request_id(const HttpRequest *req) {
        return req->id;
}

const char *http_request_client(const HttpRequest *req) {
        return req->conn ? req->conn->client : "(unknown)";
}

bool http_request_replied(const HttpRequest *req) {
        return req->replied;
}

void http_request_set_userdata(HttpRequest *req, void *userdata, void (*abort_cb)(HttpRequest *req, void *userdata)) {
        req->userdata = userdata;
        req->abort_cb = abort_cb;
}

void *http_request_get_userdata(const HttpRequest *req) {
        return req->userdata;
}

struct MHD_PostProcessor *http_request_post_processor(HttpRequest *req, size_t buffer_size,
                                                     MHD_PostDataIterator iterator, void *cls) {
        return MHD_create_post_processor(req->mhd, buffer_size, iterator, cls);
}

void http_request_suspend(HttpRequest *req) {
        if (req->suspended || req->replied)
                return;
        /* Inside the handler, suspend once it returns: a reply that comes before that (a run
         * that fails at once) is then queued directly. */
        if (req->in_handler) {
                req->want_suspend = true;
                return;
        }
        request_suspend_now(req);
}

void http_request_set_body_sink(HttpRequest *req, HttpBodySink sink, void *userdata) {
        req->sink = sink;
        req->sink_userdata = userdata;
}

int http_request_sink_error(const HttpRequest *req) {
        return req->sink_error;
}

static int reply_queue(HttpRequest *req, struct MHD_Response *resp, unsigned status, const char *content_type,
                       bool close, const char *const *headers);


static ssize_t on_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        HttpStream *st = cls;

        if (!st->req || st->req->peer_gone)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        return st->reader(st->req, pos, buf, max, st->userdata);
}

static void on_stream_free(void *cls) {
        HttpStream *st = cls;

        if (st->req)
                st->req->stream = NULL;
        if (st->free_cb)
                st->free_cb(st->userdata);
        free(st);
}

int http_request_reply_stream(HttpRequest *req, unsigned status, const char *content_type, uint64_t size,
                              HttpStreamReader reader, void (*free_cb)(void *), void *userdata,
                              const char *const *headers, HttpStream **ret_stream) {
        struct MHD_Response *resp;
        HttpStream *st;

        if (req->replied)
                return -EALREADY;
        st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        *st = (HttpStream) { .req = req, .reader = reader, .free_cb = free_cb, .userdata = userdata };
        resp = MHD_create_response_from_callback(size, 64 * 1024, on_stream_read, st, on_stream_free);
        if (!resp) {
                free(st);
                return -ENOMEM;
        }
        req->stream = st;
        if (ret_stream)
                *ret_stream = st;
        return reply_queue(req, resp, status, content_type, false, headers);
}

void http_request_stream_wait(HttpRequest *req) {
        /* Called from MHD's reader callback: suspend directly (microhttpd.h: return 0 only with
         * MHD_suspend_connection(), or MHD polls). */
        if (!req->suspended)
                request_suspend_now(req);
}

void http_stream_wake(HttpStream *st) {
        HttpRequest *req = st->req;

        if (!req || !req->suspended)
                return;
        request_resume(req);
        (void) server_run(req->server);
}

int http_request_reply_fd(HttpRequest *req, unsigned status, const char *content_type, int fd, uint64_t offset,
                          uint64_t size, const char *const *headers) {
        struct MHD_Response *resp;

        if (req->replied) {
                safe_close(fd);
                return -EALREADY;
        }
        resp = MHD_create_response_from_fd_at_offset64(size, fd, offset);
        if (!resp) {
                safe_close(fd);
                return -ENOMEM;
        }
        return reply_queue(req, resp, status, content_type, false, headers);
}

int http_request_reply(HttpRequest *req, unsigned status, const char *content_type,
                       const void *body, size_t size, bool close, const char *const *headers) {
        struct MHD_Response *resp;

        if (req->replied)
                return -EALREADY;
        resp = MHD_create_response_from_buffer(size, (void *) body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return -ENOMEM;
        return reply_queue(req, resp, status, content_type, close, headers);
}

static int reply_queue(HttpRequest *req, struct MHD_Response *resp, unsigned status, const char *content_type,
                       bool close, const char *const *headers) {
        char id[32];

        (void) snprintf(id, sizeof(id), "%" PRIu64, req->id);
        if (content_type)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        (void) MHD_add_response_header(resp, "X-Request-Id", id);
        if (close)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        for (const char *const *h = headers; h && h[0] && h[1]; h += 2)
                (void) MHD_add_response_header(resp, h[0], h[1]);

        req->response = resp;
        req->status = status;
        req->replied = true;
        if (req->suspended) {
                request_resume(req);
                (void) server_run(req->server);
        }
        return 0;
}
