/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The HTTP server's answers: a body copied from a buffer, a file range sent with sendfile, or a
 * stream produced on demand (chunked where its size is unknown), each with the headers every
 * answer carries (architecture.md section 2, items 7 and 8). Queued on the request for MHD; a
 * suspended request is resumed. May call util/ only besides.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "http/http-server-internal.h"
#include "util/macro.h"

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
                http_request_suspend_now(req);
}

void http_stream_wake(HttpStream *st) {
        HttpRequest *req = st->req;

        if (!req || !req->suspended)
                return;
        http_request_resume(req);
        (void) http_server_run(req->server);
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
        if (close || req->server->retiring)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        for (const char *const *h = headers; h && h[0] && h[1]; h += 2)
                (void) MHD_add_response_header(resp, h[0], h[1]);

        req->response = resp;
        req->status = status;
        req->replied = true;
        if (req->suspended) {
                http_request_resume(req);
                (void) http_server_run(req->server);
        }
        return 0;
}
