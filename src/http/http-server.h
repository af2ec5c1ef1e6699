/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libmicrohttpd driven by sd-event: listeners, connection limits, deadlines, request lifecycle. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

/* FIXME: drop when libmicrohttpd >= 0.9.71 is the oldest supported (enum MHD_Result). */
#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

typedef struct HttpServer HttpServer;
typedef struct HttpRequest HttpRequest;
typedef struct HttpStream HttpStream;
typedef struct HttpUpgrade HttpUpgrade;

/*
 * A body consumer: called with each piece of the body as it arrives (error 0), or once with
 * @error < 0 and no data when the body went over the cap. Return 0, or -errno to refuse the rest
 * (it is then discarded; dispatch() still runs and sees http_request_sink_error()).
 */
typedef int (*HttpBodySink)(HttpRequest *req, const void *data, size_t size, int error, void *userdata);

/* A streamed answer: fill @buf from position @pos; return bytes, 0 after http_request_stream_wait(),
 * MHD_CONTENT_READER_END_OF_STREAM or MHD_CONTENT_READER_END_WITH_ERROR. */
typedef ssize_t (*HttpStreamReader)(HttpRequest *req, uint64_t pos, char *buf, size_t max, void *userdata);

typedef struct HttpServerLimits {
        unsigned max_connections;          /* overall */
        unsigned max_connections_per_client;
        uint64_t header_timeout_usec;      /* from connect (or end of the previous request) to complete headers */
        uint64_t request_timeout_usec;     /* from complete headers to complete body */
        uint64_t max_body_bytes;           /* cap for bodies buffered in memory */
        size_t max_uri_bytes;
        unsigned max_headers;
} HttpServerLimits;

typedef struct HttpServerCallbacks {
        /*
         * begin() - headers are complete, no body read yet. May reply (e.g. 401, 404, 413), in which
         * case the body is discarded. Return the body cap in bytes to buffer (0 = no body expected).
         */
        uint64_t (*begin)(HttpRequest *req, void *userdata);
        /* dispatch() - the whole request is here. Must reply now or after http_request_suspend(). */
        void (*dispatch)(HttpRequest *req, void *userdata);
        /* activity() - connection count changed (for the idle timer). */
        void (*activity)(HttpServer *s, void *userdata);
} HttpServerCallbacks;

int http_server_new(sd_event *e, const HttpServerLimits *limits, const HttpServerCallbacks *cb,
                    void *userdata, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);
static inline void http_server_freep(HttpServer **s) {
        *s = http_server_free(*s);
}

/* http_server_add_listener() - serve a listening socket; takes ownership of @fd. Return: 0 or -errno. */
int http_server_add_listener(HttpServer *s, int fd);
/* http_server_add_listener_tag() - the same, its connections' requests carrying @tag (for instance
 * the API dialect the listener speaks; http_request_listener_tag()). */
int http_server_add_listener_tag(HttpServer *s, int fd, unsigned tag);
/*
 * http_server_retire() - accept no more connections (the listening sockets stay open: under socket
 * activation systemd queues new connections for the next daemon), finish the requests in progress
 * and close each connection after its next answer ("Connection: close"); idle keep-alive
 * connections end at their header deadline. For a graceful restart.
 */
void http_server_retire(HttpServer *s);
unsigned http_server_n_connections(const HttpServer *s);
/*
 * http_server_take_listeners() - stop serving the listening sockets and hand their fds and tags
 * to the caller (a re-execution passes them on). Return: 0 with *@ret_fds and *@ret_tags (free
 * both) and *@ret_n, -ENOMEM.
 */
int http_server_take_listeners(HttpServer *s, int **ret_fds, unsigned **ret_tags, size_t *ret_n);
unsigned http_server_n_listeners(const HttpServer *s);
uint64_t http_server_n_requests(const HttpServer *s);

/* Request accessors. The path is MHD's decoded path; the raw target keeps the query as sent. */
const char *http_request_method(const HttpRequest *req);
const char *http_request_path(const HttpRequest *req);
const char *http_request_target(const HttpRequest *req);
const char *http_request_header(const HttpRequest *req, const char *name);
unsigned http_request_header_count(const HttpRequest *req, const char *name);
unsigned http_request_n_headers(const HttpRequest *req);
const char *http_request_query(const HttpRequest *req, const char *name);
const void *http_request_body(const HttpRequest *req, size_t *ret_size);
uint64_t http_request_id(const HttpRequest *req);
/* http_request_listener_tag() - the tag of the listener the request's connection came from (0: none). */
unsigned http_request_listener_tag(const HttpRequest *req);
const char *http_request_client(const HttpRequest *req);
bool http_request_replied(const HttpRequest *req);
void http_request_set_userdata(HttpRequest *req, void *userdata, void (*abort_cb)(HttpRequest *req, void *userdata));
void *http_request_get_userdata(const HttpRequest *req);
/* http_request_post_processor() - libmicrohttpd's multipart/form-data parser for this request. */
struct MHD_PostProcessor *http_request_post_processor(HttpRequest *req, size_t buffer_size,
                                                     MHD_PostDataIterator iterator, void *cls);

/* http_request_suspend() - reply later (from another event source). */
void http_request_suspend(HttpRequest *req);

/* http_request_set_body_sink() - from begin(): stream the body to @sink (up to the cap begin() returns). */
void http_request_set_body_sink(HttpRequest *req, HttpBodySink sink, void *userdata);
/* http_request_sink_error() - 0, or what the sink (or the cap: -EFBIG) refused the body with. */
int http_request_sink_error(const HttpRequest *req);
/*
 * http_request_own_too_large() - from begin(): a body past the cap is still discarded, but
 * dispatch() runs and answers it (another API's shape) instead of the transport's 413;
 * http_request_too_large() says so, with the cap in *@ret_cap (@ret_cap may be NULL).
 */
void http_request_own_too_large(HttpRequest *req);
bool http_request_too_large(const HttpRequest *req, uint64_t *ret_cap);

/*
 * http_request_reply_stream() - answer with a body produced by @reader (chunked when @size is
 * MHD_SIZE_UNKNOWN). @free_cb runs when MHD is done with the answer. Return: 0 or -errno.
 */
int http_request_reply_stream(HttpRequest *req, unsigned status, const char *content_type, uint64_t size,
                              HttpStreamReader reader, void (*free_cb)(void *), void *userdata,
                              const char *const *headers, HttpStream **ret_stream);
/* http_request_stream_wait() - from the reader: no data yet; return 0 after calling this. */
void http_request_stream_wait(HttpRequest *req);
/* http_stream_wake() - data (or the end) is there: let MHD call the reader again. Safe to call
 * until @free_cb ran, also after the request itself is gone. */
void http_stream_wake(HttpStream *st);

/* http_request_reply_fd() - answer with @size bytes of the file @fd from @offset (fd taken over; sendfile). */
int http_request_reply_fd(HttpRequest *req, unsigned status, const char *content_type, int fd, uint64_t offset,
                          uint64_t size, const char *const *headers);

/*
 * http_request_reply() - reply with a body (copied). @headers: NULL-terminated name, value, …
 * pairs or NULL. @close: ask MHD to close the connection after the answer.
 * Return: 0 or -errno.
 */
int http_request_reply(HttpRequest *req, unsigned status, const char *content_type,
                       const void *body, size_t size, bool close, const char *const *headers);

/*
 * A protocol upgrade (a WebSocket): http_request_reply_upgrade() answers 101 Switching Protocols
 * with @headers (NULL-terminated pairs: Upgrade and the protocol's own; MHD adds "Connection:
 * Upgrade") and, once that went out, hands the connection's socket to @handler with the bytes
 * already read past the request (@extra). From then on the socket is the owner's to read and
 * write (sd-event; MHD no longer watches it), never to close: http_upgrade_close() does that.
 * @release runs (once, with @userdata) where the owner must let go instead: the client went away
 * before the 101 was sent (@handler never runs), or the server is freed before the owner called
 * http_upgrade_close() (the owner stops using the socket; the server closes it).
 * Return: 0; -ESHUTDOWN while the server retires; -EALREADY; -ENOMEM.
 */
typedef void (*HttpUpgradeHandler)(HttpUpgrade *u, int fd, const void *extra, size_t extra_size, void *userdata);
int http_request_reply_upgrade(HttpRequest *req, const char *const *headers, HttpUpgradeHandler handler,
                               void (*release)(void *userdata), void *userdata);
/* http_upgrade_on_retire() - when the server retires (http_server_retire()), call @retire with the
 * upgrade's userdata: the owner ends its protocol cleanly (a WebSocket closes with 1001), then
 * calls http_upgrade_close() as usual; a retiring server waits for its connections. @retire must
 * not call http_upgrade_close() itself. */
void http_upgrade_on_retire(HttpUpgrade *u, void (*retire)(void *userdata));
/* http_upgrade_close() - the owner is done with the socket: MHD closes it and @u is freed. */
void http_upgrade_close(HttpUpgrade *u);
/* The peer, as logged. */
const char *http_upgrade_client(const HttpUpgrade *u);
sd_event *http_upgrade_event(const HttpUpgrade *u);
