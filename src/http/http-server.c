/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libmicrohttpd driven by sd-event: we accept connections ourselves (for per-client and overall
 * caps and header/body deadlines), hand them to an MHD daemon without listen socket or threads,
 * and run MHD from its epoll fd and its timeout, both as sd-event sources.
 *
 * This file owns the MHD daemon and the request lifecycle: MHD's callbacks (begin, body,
 * dispatch, completion), suspending and resuming, and the request accessors. Connections
 * (listeners, accept, caps, deadlines) are http-connection.c's, answers http-answer.c's; all
 * three share http-server-internal.h. May call util/, and http-reply.h for the error table
 * (the 413 of a body over its cap).
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http/http-error.h"
#include "http/http-server-internal.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

/* ---- MHD callbacks --------------------------------------------------------------------------- */

static void on_mhd_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
        HttpServer *s = cls;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                *socket_context = s->adding;
                return;
        }
        if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
                http_connection_free(*socket_context);
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

void http_request_resume(HttpRequest *req) {
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
        http_upgrade_request_gone(req);
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
        if (req->conn && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && !req->upgraded)
                /* keep-alive: the next request's headers must arrive in time too */
                http_connection_arm(req->conn, s->limits.header_timeout_usec);
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
        http_request_resume(req);
        return http_server_run(req->server);
}

void http_request_suspend_now(HttpRequest *req) {
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


/* 413 for a body past its cap, from the error table (http-error.h), closing the connection. */
static void reply_too_large(HttpRequest *req) {
        _cleanup_free_ char *body = NULL;
        char msg[96];
        int r;

        if (req->body_cap == 0)
                (void) snprintf(msg, sizeof(msg), "This request takes no body.");
        else
                (void) snprintf(msg, sizeof(msg), "The request body exceeds %" PRIu64 " bytes.", req->body_cap);
        body = http_error_json(http_error_code(HTTP_ERROR_PAYLOAD_TOO_LARGE), msg);
        r = body ? http_request_reply(req, http_error_status(HTTP_ERROR_PAYLOAD_TOO_LARGE), "application/json",
                                      body, strlen(body), true, NULL) : -ENOMEM;
        if (r < 0)
                log_warning_errno(r, "Failed to queue the answer to a body past its cap, ignoring: %m");
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
                        http_connection_arm(req->conn, s->limits.request_timeout_usec);
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
                                http_connection_arm(req->conn, s->limits.request_timeout_usec);
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
                /* Within body_cap (checked above): only an allocation can fail. */
                if (str_buf_append(&req->body, &req->body_size, &req->body_alloc, SIZE_MAX - 1, upload_data, n) < 0)
                        return MHD_NO;
                return MHD_YES;
        }

        /* The client hung up while its request waited (on_hangup() resumed it so that MHD sees
         * that): nobody is left to answer. Without a response MHD would call us again at once,
         * and again, until its connection timeout: close the connection now. */
        if (req->peer_gone && !req->response)
                return MHD_NO;

        if (req->too_large && !req->replied && !req->own_too_large) {
                reply_too_large(req);
                return queue_pending(req);
        }

        if (!req->dispatched && !req->replied) {
                req->dispatched = true;
                if (req->conn)
                        http_connection_arm(req->conn, 0);   /* the handler bounds its own work */
                req->in_handler = true;
                s->cb.dispatch(req, s->userdata);
                req->in_handler = false;
                if (req->want_suspend && !req->replied)
                        http_request_suspend_now(req);
                req->want_suspend = false;
        }
        return queue_pending(req);
}

/* ---- event-loop glue ------------------------------------------------------------------------- */

int http_server_run(HttpServer *s) {
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
        return http_server_run(userdata);
}

static int on_mhd_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        return http_server_run(userdata);
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
                        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE |
                        MHD_USE_ERROR_LOG,
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
        free(s->listener_tags);
        s->mhd_io = sd_event_source_disable_unref(s->mhd_io);
        s->mhd_timer = sd_event_source_disable_unref(s->mhd_timer);
        if (s->mhd) {
                /* MHD aborts when stopped with suspended connections, and upgraded ones are. */
                http_upgrade_close_all(s);
                while (s->suspended)
                        http_request_resume(s->suspended);
                (void) MHD_run(s->mhd);
                MHD_stop_daemon(s->mhd);   /* closes connections: NOTIFY_CLOSED frees them */
        }
        while (s->connections)
                http_connection_free(s->connections);
        sd_event_unref(s->event);
        free(s);
        return NULL;
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

unsigned http_request_listener_tag(const HttpRequest *req) {
        return req->conn ? req->conn->tag : 0;
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
        http_request_suspend_now(req);
}

void http_request_set_body_sink(HttpRequest *req, HttpBodySink sink, void *userdata) {
        req->sink = sink;
        req->sink_userdata = userdata;
}

int http_request_sink_error(const HttpRequest *req) {
        return req->sink_error;
}

void http_request_own_too_large(HttpRequest *req) {
        req->own_too_large = true;
}

bool http_request_too_large(const HttpRequest *req, uint64_t *ret_cap) {
        if (ret_cap)
                *ret_cap = req->body_cap;
        return req->too_large;
}
