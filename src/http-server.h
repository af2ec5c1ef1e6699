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
unsigned http_server_n_connections(const HttpServer *s);
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
const char *http_request_client(const HttpRequest *req);
bool http_request_replied(const HttpRequest *req);
void http_request_set_userdata(HttpRequest *req, void *userdata, void (*abort_cb)(HttpRequest *req, void *userdata));

/* http_request_suspend() - reply later (from another event source). */
void http_request_suspend(HttpRequest *req);

/*
 * http_request_reply() - reply with a body (copied). @headers: NULL-terminated name, value, …
 * pairs or NULL. @close: ask MHD to close the connection after the answer.
 * Return: 0 or -errno.
 */
int http_request_reply(HttpRequest *req, unsigned status, const char *content_type,
                       const void *body, size_t size, bool close, const char *const *headers);
