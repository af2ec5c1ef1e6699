/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An asynchronous S3 client for snapshot objects: path-style URLs, SigV4 through libcurl, in an sd-event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct S3Client S3Client;
typedef struct S3Call S3Call;

/* Bounds used when the configuration leaves them 0. */
#define S3_TIMEOUT_USEC_DEFAULT (30 * USEC_PER_SEC)
#define S3_BODY_SIZE_MAX_DEFAULT ((size_t) 64 * 1024 * 1024)
/* S3's own limit on a key's length in bytes, the client's prefix included. */
#define S3_KEY_SIZE_MAX 1024

typedef struct S3ClientConfig {
        /* "http://127.0.0.1:9000" or "https://s3.example.net": scheme, host, port, nothing after
         * them but '/'. Objects are addressed path-style: <endpoint>/<bucket>/<prefix><key>. */
        const char *endpoint;
        const char *bucket;             /* 3..63 of [a-z0-9.-], starting and ending alphanumerical */
        const char *region;             /* the signing region, "us-east-1": [a-z0-9-]+ */
        const char *access_key_id;      /* the credentials; the client keeps a copy of each, */
        const char *secret_access_key;  /* erased when it is freed. Never logged. */
        const char *ca_file;            /* TLS: the CA bundle to verify the endpoint with; NULL: the system's */
        const char *prefix;             /* prepended to every key; NULL or "" for none */
        uint64_t timeout_usec;          /* one call, from connecting to the answer's last byte */
        size_t max_body_size;           /* a PUT's body and a GET's answer */
} S3ClientConfig;

/* What a call answers; valid during the callback only. Fields a call does not fill are 0/NULL. */
typedef struct S3Result {
        const char *message;            /* on error: what failed (S3's <Code> and <Message>, libcurl's, ours) */
        const char *code;               /* on error: S3's <Code> if the answer had one, else NULL */
        long http_status;               /* the answer's status; 0 when no answer came */
        const char *etag;               /* put, get, head: the ETag header as sent (quotes and all), or NULL */
        const char *body;               /* get: body_size bytes, NUL-terminated after them */
        size_t body_size;
        uint64_t size;                  /* get: body_size; head: the object's Content-Length */
} S3Result;

/*
 * S3Callback - the end of a call: @error 0 or -errno, @result never NULL (its message says why on
 * error). Runs from the event loop, never from inside the function that started the call; the
 * call's handle is gone when it runs. It may start and cancel calls and free other objects, but
 * must not free the S3Client.
 *
 * Errors of every call: from the answer, by S3's <Code> first: NoSuchKey -ENOENT;
 * SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied -EACCES; PreconditionFailed -EEXIST;
 * SlowDown, InternalError, ServiceUnavailable and any 5xx -EAGAIN (retryable); without a <Code>
 * (a HEAD's answer has no body): 403 -EACCES, 412 -EEXIST, 404 -ENOENT for HEAD only; any other
 * answer that is not 2xx -EIO. From the transfer: -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH (the
 * endpoint cannot be reached), -ETIMEDOUT (the call's timeout), -ECONNRESET (closed without an
 * answer), -EPROTO (not HTTP, an answer cut short, a HEAD without Content-Length), -E2BIG (an
 * answer over max_body_size), -EACCES (TLS refused), -ENOMEM, -EIO.
 */
typedef void (*S3Callback)(int error, const S3Result *result, void *userdata);

/*
 * s3_client_new() - a client on @event (referenced); copies @config. Nothing is sent yet.
 * Return: 0, -EINVAL (an endpoint that is not http:// or https://, or has a path, query or
 * credentials; a bucket or region of the wrong shape; no access key or secret), -ENOENT/-EACCES
 * (a CA file that cannot be read), -ENOMEM or -EIO.
 */
int s3_client_new(sd_event *event, const S3ClientConfig *config, S3Client **ret);
/* s3_client_free() - cancels the calls in flight (no callback runs). Accepts NULL. Return: NULL. */
S3Client *s3_client_free(S3Client *c);
SR_DEFINE_FREE_FUNC(S3Client *, s3_client_free);

/*
 * The calls. Each returns 0 when the call started (its callback will run exactly once unless it
 * is cancelled), or an error and then no callback runs: -EINVAL (a key that is empty, has control
 * characters or a "." or ".." segment, or is with the prefix over S3_KEY_SIZE_MAX bytes), -E2BIG
 * (s3_put(): a body over max_body_size), -ENOMEM. @ret_call may be NULL; otherwise it receives a
 * handle for s3_call_cancel(), valid until the callback runs. Keys are UTF-8 strings ('/' as in
 * S3); the client's prefix goes in front of them and each byte outside A-Z a-z 0-9 - . _ ~ /
 * is percent-encoded in the URL. Every request carries x-amz-content-sha256, the hex SHA-256 of
 * its body (of "" when it has none), which the signature covers.
 */

/*
 * s3_put() - stores the @size bytes at @body (copied) as @key: etag. With @if_none_match the
 * request carries "If-None-Match: *", S3's write-once condition: -EEXIST when the key exists
 * already (412 PreconditionFailed), which for content-addressed keys means "already there". A
 * store that ignores the condition (s3rver does) overwrites and answers 0.
 */
int s3_put(S3Client *c, const char *key, const void *body, size_t size, bool if_none_match, S3Callback callback,
           void *userdata, S3Call **ret_call);
/* s3_get() - @key's content: body, body_size, size, etag. -ENOENT: no such key; -E2BIG: over max_body_size. */
int s3_get(S3Client *c, const char *key, S3Callback callback, void *userdata, S3Call **ret_call);
/* s3_head() - @key's size and etag, without its content. -ENOENT: no such key. */
int s3_head(S3Client *c, const char *key, S3Callback callback, void *userdata, S3Call **ret_call);
/* s3_delete() - deletes @key. S3 answers 204 whether or not it existed: deleting an absent key is 0. */
int s3_delete(S3Client *c, const char *key, S3Callback callback, void *userdata, S3Call **ret_call);

/*
 * s3_call_cancel() - stops a call; its callback does not run. What the store already applied
 * stays applied. Accepts NULL. Return: NULL.
 */
S3Call *s3_call_cancel(S3Call *call);
