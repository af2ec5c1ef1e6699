/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libcurl's multi interface driven by an sd-event loop: its sockets are io sources, its timeout one timer. */
#pragma once

#include <curl/curl.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct CurlGlue CurlGlue;
typedef struct CurlGlueRequest CurlGlueRequest;

/*
 * CurlGlueDone - the end of one request: @error is 0 when an HTTP answer arrived (whatever its
 * @http_status), else -errno (see curl_glue_errno()) and @http_status is 0. @body is the answer's
 * body, NUL-terminated after its @body_size bytes (never NULL). The request is no longer in the
 * transfer; the callback owns it and frees it with curl_glue_request_free(), inside the callback
 * or later. The callback may start and free other requests; it must not free the CurlGlue.
 */
typedef void (*CurlGlueDone)(CurlGlueRequest *req, int error, long http_status, const char *body,
                             size_t body_size, void *userdata);

/* curl_glue_new() - a multi handle attached to @event (referenced). Return: 0, -ENOMEM or -EIO. */
int curl_glue_new(sd_event *event, CurlGlue **ret);
/* curl_glue_free() - aborts what is in flight (their callbacks are not called; the requests are
 * detached and still need curl_glue_request_free()). Accepts NULL. Return: NULL. */
CurlGlue *curl_glue_free(CurlGlue *g);
SR_DEFINE_FREE_FUNC(CurlGlue *, curl_glue_free);

/*
 * curl_glue_request_new() - an easy handle for @url with the options every request gets (no
 * signals, no proxy from the environment, no redirects, HTTP and HTTPS only, an error buffer)
 * and its answer's body collected in memory, at most @max_body bytes (a longer one fails the
 * request with -E2BIG). The caller adds its own options on curl_glue_request_easy().
 * Return: 0, -ENOMEM or -EIO (an option refused).
 */
int curl_glue_request_new(CurlGlue *g, const char *url, size_t max_body, CurlGlueRequest **ret);
/* curl_glue_request_free() - takes it out of the transfer if it is in one; accepts NULL. Return: NULL. */
CurlGlueRequest *curl_glue_request_free(CurlGlueRequest *req);
SR_DEFINE_FREE_FUNC(CurlGlueRequest *, curl_glue_request_free);

/* curl_glue_request_easy() - the request's easy handle, for curl_easy_setopt()/curl_easy_getinfo(). */
CURL *curl_glue_request_easy(CurlGlueRequest *req);

/*
 * curl_glue_request_start() - hands the request to the multi handle; @done runs from the event
 * loop when it ends, never from inside this call. A request runs once: a retry is a new request.
 * Return: 0, -EBUSY (started already), -ESHUTDOWN (its CurlGlue is gone) or -EIO.
 */
int curl_glue_request_start(CurlGlueRequest *req, CurlGlueDone done, void *userdata);

/* curl_glue_request_message() - libcurl's words for how the request failed ("" if none). */
const char *curl_glue_request_message(CurlGlueRequest *req);

/*
 * curl_glue_errno() - a transfer's CURLcode as -errno; @os_errno is CURLINFO_OS_ERRNO (the errno
 * of a failed connect(), 0 if none). Connection failures: -ECONNREFUSED, -EHOSTUNREACH,
 * -ENETUNREACH (from @os_errno where it says more); -ETIMEDOUT; -ECONNRESET (the peer closed or
 * sent nothing); -EPROTO (not HTTP, a malformed answer); -E2BIG (the body cap); -EACCES (the peer's
 * certificate refused); -EINVAL (our own certificate, key or CA file unusable); -ENOMEM; else -EIO.
 */
int curl_glue_errno(CURLcode code, long os_errno);
