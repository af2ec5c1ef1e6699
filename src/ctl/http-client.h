/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CLI's HTTP client: one request at a time to the daemon over TCP or an AF_UNIX socket (libcurl). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "../util/macro.h"

/* Default address of the daemon (DESIGN.md §2: sandbox-runner.socket). */
#define HTTP_CLIENT_DEFAULT_URL "http://127.0.0.1:4311"

/* Upper bound on an answer body kept in memory. */
#define HTTP_RESPONSE_SIZE_MAX ((size_t) 64 * 1024 * 1024)

typedef struct HttpClient HttpClient;

typedef struct HttpRequest {
        const char *method;             /* "GET", "POST", ... */
        const char *path;               /* path-with-query, starting with '/' */
        const char *bearer;             /* token for "Authorization: Bearer", or NULL */
        const char *const *headers;     /* extra "Name: value" lines, NULL-terminated, or NULL */
        const char *content_type;       /* of @body, or NULL */
        const void *body;               /* NULL: no body */
        size_t body_size;
        size_t max_response_size;       /* 0: HTTP_RESPONSE_SIZE_MAX */
} HttpRequest;

typedef struct HttpResponse {
        long status;                    /* HTTP status code */
        char *body;                     /* NUL-terminated (the NUL is not counted in body_size) */
        size_t body_size;
        char *content_type;             /* NULL if the server sent none */
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
 * -EPROTO (TLS or HTTP protocol failure); the size limit is @req->max_response_size when set, -EINVAL (bad @req), -ENOMEM, -EIO (anything else).
 */
int http_client_request(HttpClient *c, const HttpRequest *req, HttpResponse *ret, char **ret_error);

void http_response_done(HttpResponse *r);
