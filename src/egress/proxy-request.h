/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One proxy request from an untrusted client: its head parsed with libhttp-parser, its body delimited. */
#pragma once

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_REQUEST_HEAD_MAX    (16U * 1024U)  /* whole head: request line + headers */
#define PROXY_REQUEST_URL_MAX     (8U * 1024U)
#define PROXY_REQUEST_HEADERS_MAX 100U

typedef struct ProxyHeader {
        char *name;
        char *value;
} ProxyHeader;

typedef struct ProxyRequest {
        http_parser parser;
        const char *stream;             /* start of the caller's contiguous head buffer (obs-fold check) */

        char *url;
        size_t url_size;
        ProxyHeader *headers;
        size_t n_headers;
        bool in_value;                  /* the last header callback was a value */

        bool method_known;              /* the request line got as far as the target */
        bool head_complete;
        bool message_complete;

        /* Why the request is refused: an HTTP status and a short static reason. */
        unsigned status;
        const char *error;
} ProxyRequest;

/* proxy_request_init() - an empty request, ready for proxy_request_feed_head(). */
void proxy_request_init(ProxyRequest *r);
/* proxy_request_done() - free what the request owns; it may be re-initialised. */
void proxy_request_done(ProxyRequest *r);

/*
 * proxy_request_feed_head() - parse more of the head. @buf is the caller's contiguous buffer holding
 * every byte received on the connection so far, @size its fill; bytes before @parsed were fed by
 * earlier calls. The caller enforces PROXY_REQUEST_HEAD_MAX by the size of its buffer: a full
 * buffer without a complete head must be answered with 431.
 * On success, *@ret_head_end is the offset of the first byte after the head (the body or tunnel
 * data start there); with the head complete, proxy_request_method() is CONNECT or a forwardable
 * method, the HTTP version is 1.0 or 1.1 and r->url is the raw request target.
 * Return: 1 when the head is complete, 0 when more bytes are needed (*@ret_head_end = @size), or
 * -EBADMSG with r->status (400, 405, 414, 431, 505) and r->error set.
 */
int proxy_request_feed_head(ProxyRequest *r, const char *buf, size_t parsed, size_t size, size_t *ret_head_end);

/*
 * proxy_request_feed_body() - after the head of a forwarded (non-CONNECT) request, feed the bytes
 * that follow it; *@ret_consumed bytes belong to this request's body (framing included, unchanged)
 * and are to be forwarded raw; whatever follows the end of the message is not. Return: 1 when the
 * message is complete, 0 when more is needed, -EBADMSG on a malformed body (r->error set).
 */
int proxy_request_feed_body(ProxyRequest *r, const char *data, size_t size, size_t *ret_consumed);

/* proxy_request_method() - the parsed method (valid once the head is complete). */
enum http_method proxy_request_method(const ProxyRequest *r);
static inline bool proxy_request_is_connect(const ProxyRequest *r) {
        return proxy_request_method(r) == HTTP_CONNECT;
}

/*
 * proxy_request_build_forward_head() - the head sent upstream for a forwarded request:
 * "METHOD origin-form HTTP/1.1", the client's headers minus the hop-by-hop ones (Proxy-Connection,
 * Proxy-Authorization, Connection, Keep-Alive, TE, Trailer, Upgrade, every header named in
 * Connection:) and minus Host:, then "Host: @host[:@port]" (port omitted when 80) and
 * "Connection: close". @path_and_query may be an absolute URI too (the form an upstream proxy is
 * sent); @proxy_authorization, if not NULL, is sent as the Proxy-Authorization header (to an
 * upstream proxy: the client's own never goes on). Pure. Return: 0 with a new NUL-terminated
 * string and its length, or -ENOMEM.
 */
int proxy_request_build_forward_head(const ProxyRequest *r, const char *host, uint16_t port,
                                     const char *path_and_query, const char *proxy_authorization,
                                     char **ret, size_t *ret_size);

/* proxy_status_text() - "Forbidden" for 403 and so on. */
const char *proxy_status_text(unsigned status);
