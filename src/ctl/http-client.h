/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CLI's HTTP client: one request at a time to the daemon over TCP or an AF_UNIX socket (libcurl). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/macro.h"

/* Default address of the daemon (DESIGN.md §2: sandbox-runner.socket). */
#define HTTP_CLIENT_DEFAULT_URL "http://127.0.0.1:4311"

/* Upper bound on an answer body kept in memory. */
#define HTTP_RESPONSE_SIZE_MAX ((size_t) 64 * 1024 * 1024)

/* Upper bound on the header lines of an answer that are kept (see http_response_header()). */
#define HTTP_RESPONSE_HEADERS_MAX 128

typedef struct HttpClient HttpClient;

/*
 * Streamed bodies. A reader fills @buf with up to @size bytes and returns how many (0 at the end),
 * or -errno to abort the transfer. A rewinder starts the body over (libcurl may need to send it
 * again); without one, or when it returns -errno, the transfer fails instead. A writer takes the
 * next @size bytes of a 2xx answer and returns 0, or -errno to abort the transfer. The first
 * error of a callback is what http_client_request() returns.
 */
typedef ssize_t (*HttpBodyReader)(void *buf, size_t size, void *userdata);
typedef int (*HttpBodyRewinder)(void *userdata);
typedef int (*HttpBodyWriter)(const void *data, size_t size, void *userdata);

/* One file of a multipart/form-data body, streamed through its reader. */
typedef struct HttpMimePart {
        const char *name;               /* the form field */
        const char *filename;           /* the part's filename parameter, or NULL */
        const char *content_type;       /* or NULL: application/octet-stream */
        int64_t size;                   /* bytes the reader gives; -1: unknown */
        HttpBodyReader read;
        HttpBodyRewinder rewind;        /* or NULL */
        void *userdata;
} HttpMimePart;

typedef struct HttpRequest {
        const char *method;             /* "GET", "POST", ... */
        const char *path;               /* path-with-query, starting with '/' */
        const char *bearer;             /* token for "Authorization: Bearer", or NULL */
        const char *const *headers;     /* extra "Name: value" lines, NULL-terminated, or NULL */
        const char *content_type;       /* of @body, or NULL */
        const void *body;               /* NULL: no body */
        size_t body_size;
        size_t max_response_size;       /* 0: HTTP_RESPONSE_SIZE_MAX */

        /* A streamed body instead of @body: read through @read_body; @read_size bytes, or -1 when
         * unknown (sent chunked). Sent with "Expect: 100-continue", so that an early refusal
         * (too large, not found) arrives before the body is sent. */
        HttpBodyReader read_body;
        HttpBodyRewinder rewind_body;
        void *read_userdata;
        int64_t read_size;

        /* A multipart/form-data body instead of @body (method POST unless @method says otherwise). */
        const HttpMimePart *parts;
        size_t n_parts;

        /* 2xx answer bodies go to @write_body as they arrive instead of into memory; the
         * answers of other statuses are still collected (they carry the JSON error). */
        HttpBodyWriter write_body;
        void *write_userdata;

        const char *accept;             /* the Accept header value; NULL: application/json */
        uint64_t connect_timeout_usec;  /* 0: libcurl's default */
} HttpRequest;

typedef struct HttpResponse {
        long status;                    /* HTTP status code */
        char *body;                     /* NUL-terminated (the NUL is not counted in body_size) */
        size_t body_size;
        char *content_type;             /* NULL if the server sent none */
        char **headers;                 /* the final answer's header lines, "Name: value" */
        size_t n_headers;
} HttpResponse;

/*
 * http_client_new() - validate the daemon address and prepare a client.
 * @url: "http://HOST[:PORT][/PREFIX]", "https://..." or "unix:/ABSOLUTE/PATH.sock"
 * @timeout_usec: whole-request timeout; 0 = none
 * @user_agent: User-Agent header value
 * Return: 0, -EINVAL on a malformed or unsupported URL (-ENAMETOOLONG for a socket path that
 * does not fit sockaddr_un), -ENOMEM.
 */
int http_client_new(const char *url, uint64_t timeout_usec, const char *user_agent, HttpClient **ret);
HttpClient *http_client_free(HttpClient *c);
SR_DEFINE_FREE_FUNC(HttpClient *, http_client_free);

/* http_client_url() - the address as the operator gave it, for messages. */
const char *http_client_url(const HttpClient *c);

/*
 * http_client_request() - send @req and collect the answer, whatever its status.
 * @ret: filled on success; release with http_response_done()
 * @ret_error: on failure, libcurl's description (caller frees; may be NULL). It never contains
 *   request headers, so never the token.
 * Return: 0 when an HTTP answer arrived (any status); -ECONNREFUSED (nothing listens, or the
 * socket file is missing), -EHOSTUNREACH (name not resolved), -ETIMEDOUT, -ECONNRESET (the
 * connection broke or closed without an answer), -EFBIG (answer above HTTP_RESPONSE_SIZE_MAX),
 * -EPROTO (TLS or HTTP protocol failure); the size limit is @req->max_response_size when set, -EINVAL (bad @req), -ENOMEM, -EIO (anything else),
 * or the first error a body callback returned.
 */
int http_client_request(HttpClient *c, const HttpRequest *req, HttpResponse *ret, char **ret_error);

void http_response_done(HttpResponse *r);

/*
 * http_response_header() - the value of the answer's header @name (case-insensitive), without
 * surrounding whitespace; the first one if it was sent more than once. NULL if absent.
 */
const char *http_response_header(const HttpResponse *r, const char *name);
