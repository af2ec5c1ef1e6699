/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The S3 client (s3.h): one SigV4-signed HTTP request per call, S3's XML errors turned into -errno. */

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fleet/curl-glue.h"
#include "fleet/fleet-fail.h"
#include "fleet/s3.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/time-util.h"

/* CURLOPT_AWS_SIGV4 came with 7.75. FIXME: drop when meson.build requires libcurl >= 7.75. */
#if LIBCURL_VERSION_NUM < 0x074b00
#error "the S3 client signs with CURLOPT_AWS_SIGV4: libcurl >= 7.75 is needed"
#endif

#define USEC_TO_MSEC_UP(u) (((u) + USEC_PER_MSEC - 1) / USEC_PER_MSEC)

/* An answer other than a GET's is S3's XML error at most: a few hundred bytes. */
#define S3_ERROR_BODY_MAX ((size_t) 64 * 1024)
/* <Code> and <Message> are short; longer texts are cut (a message) or not taken (a code). */
#define S3_XML_TEXT_MAX 512
#define S3_ETAG_MAX 256

typedef enum S3Op {
        S3_OP_PUT,
        S3_OP_GET,
        S3_OP_HEAD,
        S3_OP_DELETE,
        _S3_OP_MAX,
        _S3_OP_INVALID = -EINVAL,
} S3Op;

static const char *const s3_op_method[_S3_OP_MAX] = {
        [S3_OP_PUT] = "PUT",
        [S3_OP_GET] = "GET",
        [S3_OP_HEAD] = "HEAD",
        [S3_OP_DELETE] = "DELETE",
};

struct S3Client {
        sd_event *event;
        CurlGlue *glue;
        char *endpoint;                 /* scheme://host[:port], without a trailing '/' */
        char *bucket;
        char *prefix;
        char *access_key_id;
        char *secret;                   /* erased when freed */
        char *sigv4;                    /* CURLOPT_AWS_SIGV4: "aws:amz:<region>:s3" */
        char *ca_file;
        uint64_t timeout_usec;
        size_t max_body_size;
        S3Call *calls;
};

struct S3Call {
        S3Client *client;
        S3Op op;
        char *key;                      /* the caller's, escaped for messages */
        char *body;                     /* PUT: a copy of the caller's body */
        size_t body_size;
        struct curl_slist *headers;
        CurlGlueRequest *request;
        char etag[S3_ETAG_MAX];         /* from the answer's headers; "" if none */
        S3Callback callback;
        void *userdata;
        S3Call *prev, *next;
};

/* An answer handed to the callback and what its result points to. */
typedef struct S3Answer {
        S3Result result;
        char *message;
        char code[S3_XML_TEXT_MAX];
        char etag[S3_ETAG_MAX];
} S3Answer;

/* answer_fail(S3Answer *a, int error, const char *format, ...) - fleet_fail() on @a's message and
 * result. Return: @error, or -ENOMEM. */
#define answer_fail(a, error, ...) fleet_fail(&(a)->message, &(a)->result.message, (error), __VA_ARGS__)

static S3Call *call_free(S3Call *call) {
        S3Client *c;

        if (!call)
                return NULL;
        c = call->client;
        if (call->next)
                call->next->prev = call->prev;
        if (call->prev)
                call->prev->next = call->next;
        else if (c && c->calls == call)
                c->calls = call->next;
        (void) curl_glue_request_free(call->request);
        curl_slist_free_all(call->headers);
        free(call->body);
        free(call->key);
        free(call);
        return NULL;
}
SR_DEFINE_FREE_FUNC(S3Call *, call_free);

S3Call *s3_call_cancel(S3Call *call) {
        return call_free(call);
}

/*
 * The text of the first <@name> element after <Error> in the @size bytes at @body, with the five
 * predefined XML entities replaced, into @out (@out_size bytes with its NUL). Not an XML parser:
 * S3's error documents are flat, and anything else (CDATA, attributes, other entities) stays as
 * it is. Return: true if the element was found; a text that does not fit is cut when @cut, else
 * not taken.
 */
static bool xml_error_element(const char *body, size_t size, const char *name, bool cut, char *out,
                              size_t out_size) {
        static const struct {
                const char *entity;
                char c;
        } entities[] = {
                { "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' }, { "&quot;", '"' }, { "&apos;", '\'' },
        };
        char open[32], close[32];
        const char *error, *start, *end;
        size_t j = 0;

        error = memmem(body, size, "<Error>", 7);
        if (!error)
                return false;
        size -= error - body;
        (void) snprintf(open, sizeof(open), "<%s>", name);
        (void) snprintf(close, sizeof(close), "</%s>", name);
        start = memmem(error, size, open, strlen(open));
        if (!start)
                return false;
        start += strlen(open);
        end = memmem(start, size - (start - error), close, strlen(close));
        if (!end)
                return false;

        for (const char *p = start; p < end; p++) {
                char c = *p;

                if (c == '&')
                        for (size_t i = 0; i < ELEMENTSOF(entities); i++) {
                                size_t n = strlen(entities[i].entity);

                                if ((size_t) (end - p) >= n && strneq(p, entities[i].entity, n)) {
                                        c = entities[i].c;
                                        p += n - 1;
                                        break;
                                }
                        }
                if (j + 1 >= out_size) {
                        if (!cut)
                                return false;
                        break;
                }
                out[j++] = c == '\0' ? ' ' : c;
        }
        out[j] = '\0';
        return true;
}

/* S3's answer @status with its error @code (NULL: none) as -errno; see S3Callback in s3.h. */
static int s3_errno_from_answer(S3Op op, long status, const char *code) {
        static const struct {
                const char *code;
                int error;
        } codes[] = {
                { "NoSuchKey",             ENOENT },
                { "SignatureDoesNotMatch", EACCES },
                { "InvalidAccessKeyId",    EACCES },
                { "AccessDenied",          EACCES },
                { "PreconditionFailed",    EEXIST },
                { "SlowDown",              EAGAIN },
                { "InternalError",         EAGAIN },
                { "ServiceUnavailable",    EAGAIN },
        };

        if (code)
                for (size_t i = 0; i < ELEMENTSOF(codes); i++)
                        if (streq(code, codes[i].code))
                                return -codes[i].error;
        if (status >= 500 && status <= 599)
                return -EAGAIN;
        if (code)
                return -EIO;
        /* no S3 error document: a HEAD's answer never has one; a 404 of another request
         * without one comes from something that is not this bucket (a wrong endpoint) */
        if (status == 403)
                return -EACCES;
        if (status == 412)
                return -EEXIST;
        if (status == 404 && op == S3_OP_HEAD)
                return -ENOENT;
        return -EIO;
}

/* An answer that is not 2xx: its S3 error, if any, into @a. Return: -errno. */
static int answer_error(S3Call *call, S3Answer *a, long status, const char *body, size_t size) {
        char text[S3_XML_TEXT_MAX] = "";
        _cleanup_free_ char *message = NULL;
        bool have_code;
        int error;

        have_code = xml_error_element(body, size, "Code", false, a->code, sizeof(a->code)) &&
                str_token_valid(a->code, 64, NULL, ALPHANUMERICAL ".");
        if (!have_code)
                a->code[0] = '\0';
        else {
                a->result.code = a->code;
                (void) xml_error_element(body, size, "Message", true, text, sizeof(text));
        }
        error = s3_errno_from_answer(call->op, status, have_code ? a->code : NULL);

        if (!have_code)
                return answer_fail(a, error, "S3 %s '%s': HTTP %ld without an S3 error document",
                                   s3_op_method[call->op], call->key, status);
        message = str_escape_log(text, sizeof(text));
        if (!message)
                return -ENOMEM;
        return answer_fail(a, error, "S3 %s '%s': HTTP %ld %s: %s", s3_op_method[call->op], call->key, status,
                           a->code, isempty(message) ? "(no message)" : message);
}

/* Ends @call: its callback runs after the call is gone, then @req (which @a points into) goes. */
static void call_finish(S3Call *call, CurlGlueRequest *req, int error, S3Answer *a) {
        S3Callback callback = call->callback;
        void *userdata = call->userdata;

        if (error < 0 && !a->result.message)
                a->result.message = strerror(-error);
        log_debug_errno(error, "S3 %s '%s': %s", s3_op_method[call->op], call->key,
                        error < 0 ? a->result.message : "done");
        (void) call_free(call);
        callback(error, &a->result, userdata);
        (void) curl_glue_request_free(req);
        free(a->message);
}

static void on_request_done(CurlGlueRequest *req, int error, long http_status, const char *body,
                            size_t body_size, void *userdata) {
        S3Call *call = userdata;
        S3Answer a = { .result.http_status = http_status };
        curl_off_t length = -1;

        call->request = NULL;           /* call_finish() frees it after the callback */
        if (call->etag[0] != '\0') {
                memcpy(a.etag, call->etag, sizeof(a.etag));
                a.result.etag = a.etag;
        }

        if (error < 0)
                error = answer_fail(&a, error, "S3 %s '%s' at %s: %s", s3_op_method[call->op], call->key,
                                    call->client->endpoint, curl_glue_request_message(req));
        else if (http_status < 200 || http_status > 299)
                error = answer_error(call, &a, http_status, body, body_size);
        else if (call->op == S3_OP_GET) {
                a.result.body = body;
                a.result.body_size = body_size;
                a.result.size = body_size;
        } else if (call->op == S3_OP_HEAD) {
                if (curl_easy_getinfo(curl_glue_request_easy(req), CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                                      &length) != CURLE_OK || length < 0)
                        error = answer_fail(&a, -EPROTO, "S3 HEAD '%s': HTTP %ld without a Content-Length",
                                            call->key, http_status);
                else
                        a.result.size = (uint64_t) length;
        }
        call_finish(call, req, error, &a);
}

/* CURLOPT_HEADERFUNCTION: keeps the ETag of the last answer (a "100 Continue" comes first). */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata) {
        S3Call *call = userdata;
        size_t n = size * nmemb, len;

        if (n >= 5 && strneq(data, "HTTP/", 5))
                call->etag[0] = '\0';
        else if (n > 5 && strncasecmp(data, "ETag:", 5) == 0) {
                const char *v = data + 5, *end = data + n;

                while (v < end && (*v == ' ' || *v == '\t'))
                        v++;
                while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
                        end--;
                len = end - v;
                if (len < sizeof(call->etag) && !memchr(v, '\0', len)) {
                        memcpy(call->etag, v, len);
                        call->etag[len] = '\0';
                }
        }
        return n;
}

static CURLcode request_setup(S3Call *call, CURL *e) {
        S3Client *c = call->client;
        long timeout_ms = (long) MIN(USEC_TO_MSEC_UP(c->timeout_usec), (uint64_t) LONG_MAX);
        CURLcode code;

        /* libcurl signs the request line, host, x-amz-date and the headers we add (SigV4,
         * service "s3" from the option), with the payload hash our x-amz-content-sha256 names */
        code = curl_easy_setopt(e, CURLOPT_AWS_SIGV4, c->sigv4);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_USERNAME, c->access_key_id);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_PASSWORD, c->secret);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers);
        if (code == CURLE_OK)           /* the path is signed as sent: libcurl must not squash it */
                code = curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        if (code == CURLE_OK)
                code = curl_easy_setopt(e, CURLOPT_HEADERDATA, call);
        if (code == CURLE_OK && c->ca_file)
                code = curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
        if (code != CURLE_OK)
                return code;

        switch (call->op) {
        case S3_OP_PUT:
                code = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
                if (code == CURLE_OK)
                        code = curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body);
                if (code == CURLE_OK)
                        code = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) call->body_size);
                return code;
        case S3_OP_GET:
                return curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        case S3_OP_HEAD:
                return curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        case S3_OP_DELETE:
                return curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
        case _S3_OP_MAX:
        case _S3_OP_INVALID:
                break;
        }
        return CURLE_BAD_FUNCTION_ARGUMENT;
}

/* The bytes of @s, percent-encoded as S3's canonical URI wants them ('/' kept), at @p. Return: the end. */
static char *uri_encode(char *p, const char *s) {
        static const char hex[] = "0123456789ABCDEF";

        for (; *s; s++) {
                unsigned char ch = (unsigned char) *s;

                if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                    ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/')
                        *p++ = (char) ch;
                else {
                        *p++ = '%';
                        *p++ = hex[ch >> 4];
                        *p++ = hex[ch & 15];
                }
        }
        return p;
}

/* <endpoint>/<bucket>/<prefix><key>, encoded. Return: 0 or -ENOMEM. */
static int object_url(const S3Client *c, const char *key, char **ret) {
        size_t n = strlen(c->endpoint) + strlen(c->bucket) + 3 * (strlen(c->prefix) + strlen(key)) + 3;
        char *url, *p;

        url = malloc(n);
        if (!url)
                return -ENOMEM;
        p = stpcpy(url, c->endpoint);
        *p++ = '/';
        p = stpcpy(p, c->bucket);
        *p++ = '/';
        p = uri_encode(p, c->prefix);
        p = uri_encode(p, key);
        *p = '\0';
        *ret = url;
        return 0;
}

static bool segment_is_dot(const char *s, size_t n) {
        return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* A key S3 and the URL can carry as it is: see s3.h. */
static int key_validate(const S3Client *c, const char *key) {
        _cleanup_free_ char *full = NULL;

        if (isempty(key))
                return -EINVAL;
        if (strlen(key) > S3_KEY_SIZE_MAX || strlen(c->prefix) + strlen(key) > S3_KEY_SIZE_MAX)
                return -EINVAL;
        for (const char *p = key; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return -EINVAL;

        /* "." and ".." segments of prefix + key: servers and proxies resolve them */
        if (asprintf(&full, "%s%s", c->prefix, key) < 0) {
                full = NULL;
                return -ENOMEM;
        }
        for (const char *p = full;;) {
                size_t n = strcspn(p, "/");

                if (segment_is_dot(p, n))
                        return -EINVAL;
                if (p[n] == '\0')
                        return 0;
                p += n + 1;
        }
}

/* The hex SHA-256 of the @size bytes at @p into @out (65 bytes). */
static void sha256_hex(const void *p, size_t size, char out[static SHA256_DIGEST_SIZE * 2 + 1]) {
        uint8_t digest[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, size, p);
        sha256_digest(&ctx, sizeof(digest), digest);
        hex_encode(digest, sizeof(digest), out);
}

static int call_headers(S3Call *call, bool if_none_match) {
        char hex[SHA256_DIGEST_SIZE * 2 + 1], line[64 + sizeof(hex)];
        const char *add[3] = {};
        size_t n = 0;

        sha256_hex(call->body ?: "", call->body_size, hex);
        (void) snprintf(line, sizeof(line), "x-amz-content-sha256: %s", hex);
        add[n++] = line;
        /* a body of our own type: else libcurl says application/x-www-form-urlencoded */
        if (call->op == S3_OP_PUT)
                add[n++] = "Content-Type: application/octet-stream";
        if (if_none_match)
                add[n++] = "If-None-Match: *";

        for (size_t i = 0; i < n; i++) {
                struct curl_slist *l = curl_slist_append(call->headers, add[i]);

                if (!l)
                        return -ENOMEM;
                call->headers = l;
        }
        return 0;
}

static int call_start(S3Client *c, S3Op op, const char *key, const void *body, size_t size, bool if_none_match,
                      S3Callback callback, void *userdata, S3Call **ret_call) {
        _cleanup_(curl_glue_request_freep) CurlGlueRequest *req = NULL;
        _cleanup_(call_freep) S3Call *call = NULL;
        _cleanup_free_ char *url = NULL;
        int r;

        assert(c);
        assert(callback);

        r = key_validate(c, key);
        if (r < 0)
                return r;
        if (op == S3_OP_PUT && size > c->max_body_size)
                return -E2BIG;

        call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (S3Call) { .op = op, .callback = callback, .userdata = userdata };
        call->key = str_escape_log(key, 256);
        if (!call->key)
                return -ENOMEM;
        if (op == S3_OP_PUT) {
                call->body = malloc(MAX(size, (size_t) 1));
                if (!call->body)
                        return -ENOMEM;
                if (size > 0)
                        memcpy(call->body, body, size);
                call->body_size = size;
        }
        r = call_headers(call, if_none_match);
        if (r < 0)
                return r;
        r = object_url(c, key, &url);
        if (r < 0)
                return r;

        call->client = c;
        r = curl_glue_request_new(c->glue, url, op == S3_OP_GET ? c->max_body_size : S3_ERROR_BODY_MAX, &req);
        if (r < 0)
                return r;
        if (request_setup(call, curl_glue_request_easy(req)) != CURLE_OK)
                return -EIO;
        r = curl_glue_request_start(req, on_request_done, call);
        if (r < 0)
                return r;
        call->request = STEAL(req);

        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        if (ret_call)
                *ret_call = call;
        call = NULL;                    /* the client's list holds it until it ends */
        return 0;
}

int s3_put(S3Client *c, const char *key, const void *body, size_t size, bool if_none_match, S3Callback callback,
           void *userdata, S3Call **ret_call) {
        if (!body && size > 0)
                return -EINVAL;
        return call_start(c, S3_OP_PUT, key, body, size, if_none_match, callback, userdata, ret_call);
}

int s3_get(S3Client *c, const char *key, S3Callback callback, void *userdata, S3Call **ret_call) {
        return call_start(c, S3_OP_GET, key, NULL, 0, false, callback, userdata, ret_call);
}

int s3_head(S3Client *c, const char *key, S3Callback callback, void *userdata, S3Call **ret_call) {
        return call_start(c, S3_OP_HEAD, key, NULL, 0, false, callback, userdata, ret_call);
}

int s3_delete(S3Client *c, const char *key, S3Callback callback, void *userdata, S3Call **ret_call) {
        return call_start(c, S3_OP_DELETE, key, NULL, 0, false, callback, userdata, ret_call);
}

/* scheme://host[:port] and at most '/' after it; copied without the '/'. */
static int endpoint_parse(const char *endpoint, char **ret) {
        const char *host;
        size_t len;

        if (isempty(endpoint))
                return -EINVAL;
        if (strneq(endpoint, "http://", 7))
                host = endpoint + 7;
        else if (strneq(endpoint, "https://", 8))
                host = endpoint + 8;
        else
                return -EINVAL;
        len = strcspn(host, "/?#@ \t\r\n");
        if (len == 0 || host[0] == ':' || strspn(host + len, "/") != strlen(host + len))
                return -EINVAL;
        *ret = strndup(endpoint, host + len - endpoint);
        return *ret ? 0 : -ENOMEM;
}

static bool bucket_valid(const char *bucket) {
        size_t n = bucket ? strlen(bucket) : 0;

        return n >= 3 && str_token_valid(bucket, 63, LOWERCASE_LETTERS DIGITS, LOWERCASE_LETTERS DIGITS ".-") &&
                bucket[n - 1] != '.' && bucket[n - 1] != '-';
}

/* The CA file: copied, and readable now (an error at the start rather than at each handshake). */
static int ca_file_copy(const char *path, char **ret) {
        if (isempty(path)) {
                *ret = NULL;
                return 0;
        }
        if (access(path, R_OK) < 0)
                return -errno;
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

static int client_copy_config(S3Client *c, const S3ClientConfig *config) {
        const char *secret = config->secret_access_key;
        int r;

        if (!bucket_valid(config->bucket) ||
            !str_token_valid(config->region, 64, NULL, LOWERCASE_LETTERS DIGITS "-") ||
            !str_token_valid(config->access_key_id, 128, NULL, ALPHANUMERICAL) || isempty(secret))
                return -EINVAL;
        for (const char *p = secret; *p; p++)
                if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f)
                        return -EINVAL;
        for (const char *p = config->prefix ?: ""; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return -EINVAL;

        r = endpoint_parse(config->endpoint, &c->endpoint);
        if (r < 0)
                return r;
        c->bucket = strdup(config->bucket);
        c->prefix = strdup(config->prefix ?: "");
        c->access_key_id = strdup(config->access_key_id);
        c->secret = strdup(secret);
        if (!c->bucket || !c->prefix || !c->access_key_id || !c->secret)
                return -ENOMEM;
        if (strlen(c->prefix) >= S3_KEY_SIZE_MAX)
                return -EINVAL;
        if (asprintf(&c->sigv4, "aws:amz:%s:s3", config->region) < 0) {
                c->sigv4 = NULL;
                return -ENOMEM;
        }
        return ca_file_copy(config->ca_file, &c->ca_file);
}

int s3_client_new(sd_event *event, const S3ClientConfig *config, S3Client **ret) {
        _cleanup_(s3_client_freep) S3Client *c = NULL;
        int r;

        assert(event);
        assert(config);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(event);
        c->timeout_usec = config->timeout_usec ?: S3_TIMEOUT_USEC_DEFAULT;
        c->max_body_size = MIN(config->max_body_size ?: S3_BODY_SIZE_MAX_DEFAULT, (size_t) INT_MAX);

        r = client_copy_config(c, config);
        if (r < 0)
                return r;
        r = curl_glue_new(event, &c->glue);
        if (r < 0)
                return r;

        *ret = STEAL(c);
        return 0;
}

S3Client *s3_client_free(S3Client *c) {
        if (!c)
                return NULL;
        while (c->calls)
                (void) call_free(c->calls);
        c->glue = curl_glue_free(c->glue);
        free(c->endpoint);
        free(c->bucket);
        free(c->prefix);
        free(c->access_key_id);
        erase_and_free(c->secret);
        free(c->sigv4);
        free(c->ca_file);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}
