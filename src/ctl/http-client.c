/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sends one HTTP request to the daemon with libcurl and collects the answer into memory, or streams
 * bodies in both directions through callbacks. */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include <curl/curl.h>

#include "ctl-util.h"
#include "http-client.h"
#include "util/string-util.h"

struct HttpClient {
        char *url;              /* as given */
        char *base;             /* "scheme://authority[/prefix]" without a trailing '/' */
        char *unix_path;        /* AF_UNIX socket, or NULL */
        char *user_agent;
        uint64_t timeout_usec;
};

typedef struct Buffer {
        char *data;
        size_t size;
        size_t allocated;
        size_t max;
        bool too_big;
} Buffer;

/* One transfer: where the answer goes, the callbacks' first error, the header lines. */
typedef struct Transfer {
        CURL *curl;
        const HttpRequest *req;
        Buffer b;
        int cb_error;                   /* first error of a body callback */
        bool streaming;                 /* 2xx answer: the body goes to req->write_body */
        bool status_known;
        char **headers;
        size_t n_headers;
} Transfer;

typedef struct MimePart {
        Transfer *t;
        const HttpMimePart *p;
} MimePart;

SR_DEFINE_FREE_FUNC(CURL *, curl_easy_cleanup);
SR_DEFINE_FREE_FUNC(curl_mime *, curl_mime_free);

static void strv_free_n(char **l, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(l[i]);
        free(l);
}

/* Header lists may carry the token: overwrite every line before libcurl frees them. */
static void curl_slist_erase_and_freep(struct curl_slist **l) {
        for (struct curl_slist *i = *l; i; i = i->next)
                if (i->data)
                        explicit_bzero(i->data, strlen(i->data));
        curl_slist_free_all(*l);
        *l = NULL;
}

static bool has_bad_chars(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s <= 0x20 || (unsigned char) *s == 0x7f)
                        return true;
        return false;
}

int http_client_new(const char *url, uint64_t timeout_usec, const char *user_agent, HttpClient **ret) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        size_t n;

        if (isempty(url) || has_bad_chars(url))
                return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->timeout_usec = timeout_usec;

        c->url = strdup(url);
        c->user_agent = strdup(user_agent ?: "sandbox-runnerctl");
        if (!c->url || !c->user_agent)
                return -ENOMEM;

        if (strncmp(url, "unix:", 5) == 0) {
                const char *p = url + 5;

                if (p[0] != '/')
                        return -EINVAL;
                if (strlen(p) >= sizeof_field(struct sockaddr_un, sun_path))
                        return -ENAMETOOLONG;

                c->unix_path = strdup(p);
                /* The host part is only what goes into the Host: header. */
                c->base = strdup("http://localhost");
                if (!c->unix_path || !c->base)
                        return -ENOMEM;
        } else {
                const char *authority;

                if (strncasecmp(url, "http://", 7) == 0)
                        authority = url + 7;
                else if (strncasecmp(url, "https://", 8) == 0)
                        authority = url + 8;
                else
                        return -EINVAL;

                /* A host is required; paths of requests are appended, so no query or fragment. */
                if (authority[0] == '\0' || authority[0] == '/' || authority[0] == ':' || strpbrk(url, "?#"))
                        return -EINVAL;

                c->base = strdup(url);
                if (!c->base)
                        return -ENOMEM;
                n = strlen(c->base);
                while (n > 0 && c->base[n - 1] == '/')
                        c->base[--n] = '\0';
        }

        *ret = STEAL(c);
        return 0;
}

HttpClient *http_client_free(HttpClient *c) {
        if (!c)
                return NULL;

        free(c->url);
        free(c->base);
        free(c->unix_path);
        free(c->user_agent);
        free(c);
        return NULL;
}

const char *http_client_url(const HttpClient *c) {
        return c->url;
}

void http_response_done(HttpResponse *r) {
        if (!r)
                return;

        free(r->body);
        free(r->content_type);
        strv_free_n(r->headers, r->n_headers);
        *r = (HttpResponse) {};
}

const char *http_response_header(const HttpResponse *r, const char *name) {
        size_t l = strlen(name);

        for (size_t i = 0; i < r->n_headers; i++) {
                const char *h = r->headers[i];

                if (strncasecmp(h, name, l) == 0 && h[l] == ':') {
                        h += l + 1;
                        return h + strspn(h, " \t");
                }
        }
        return NULL;
}

static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Transfer *t = userdata;
        size_t n = size * nmemb, l = n;
        char **a, *line;

        /* A status line starts the headers of another answer (after "100 Continue", ...). */
        if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
                strv_free_n(t->headers, t->n_headers);
                t->headers = NULL;
                t->n_headers = 0;
                return n;
        }
        while (l > 0 && (ptr[l - 1] == '\n' || ptr[l - 1] == '\r' || ptr[l - 1] == ' ' || ptr[l - 1] == '\t'))
                l--;
        if (l == 0 || !memchr(ptr, ':', l) || t->n_headers >= HTTP_RESPONSE_HEADERS_MAX)
                return n;       /* the blank line at the end, a folded line, or too many */

        line = strndup(ptr, l);
        if (!line)
                return 0;
        a = reallocarray(t->headers, t->n_headers + 1, sizeof(char *));
        if (!a) {
                free(line);
                return 0;
        }
        t->headers = a;
        t->headers[t->n_headers++] = line;
        return n;
}

static size_t buffer_append(Buffer *b, const char *ptr, size_t n) {
        int r = str_buf_append(&b->data, &b->size, &b->allocated, b->max, ptr, n);

        if (r == -EFBIG)
                b->too_big = true;
        return r < 0 ? 0 : n;   /* 0 makes libcurl fail with CURLE_WRITE_ERROR */
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Transfer *t = userdata;
        size_t n = size * nmemb;
        int r;

        if (!t->status_known) {
                long status = 0;

                /* Only the final answer's body reaches this callback: its status is known. */
                (void) curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
                t->streaming = t->req->write_body && status >= 200 && status < 300;
                t->status_known = true;
        }
        if (!t->streaming)
                return buffer_append(&t->b, ptr, n);
        if (n == 0)
                return 0;

        r = t->req->write_body(ptr, n, t->req->write_userdata);
        if (r < 0) {
                if (t->cb_error == 0)
                        t->cb_error = r;
                return 0;       /* CURLE_WRITE_ERROR */
        }
        return n;
}

static size_t read_into(Transfer *t, HttpBodyReader read, void *userdata, char *buf, size_t n) {
        ssize_t k;

        k = read(buf, n, userdata);
        if (k < 0) {
                if (t->cb_error == 0)
                        t->cb_error = (int) k;
                return CURL_READFUNC_ABORT;
        }
        return (size_t) MIN((size_t) k, n);
}

static int seek_with(Transfer *t, HttpBodyRewinder rewind, void *userdata, curl_off_t offset, int origin) {
        int r;

        if (offset != 0 || origin != SEEK_SET || !rewind)
                return CURL_SEEKFUNC_CANTSEEK;
        r = rewind(userdata);
        if (r < 0) {
                if (t->cb_error == 0)
                        t->cb_error = r;
                return CURL_SEEKFUNC_FAIL;
        }
        return CURL_SEEKFUNC_OK;
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *userdata) {
        Transfer *t = userdata;

        return read_into(t, t->req->read_body, t->req->read_userdata, buf, size * nitems);
}

static int seek_cb(void *userdata, curl_off_t offset, int origin) {
        Transfer *t = userdata;

        return seek_with(t, t->req->rewind_body, t->req->read_userdata, offset, origin);
}

static size_t mime_read_cb(char *buf, size_t size, size_t nitems, void *userdata) {
        MimePart *m = userdata;

        return read_into(m->t, m->p->read, m->p->userdata, buf, size * nitems);
}

static int mime_seek_cb(void *userdata, curl_off_t offset, int origin) {
        MimePart *m = userdata;

        return seek_with(m->t, m->p->rewind, m->p->userdata, offset, origin);
}

static int curl_code_to_errno(CURLcode code, const Buffer *b) {
        /* Over int: libcurl has ~100 codes and adds more; everything unlisted is -EIO. */
        switch ((int) code) {
        case CURLE_OK:
                return 0;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_GOT_NOTHING:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_PARTIAL_FILE:
                return -ECONNRESET;
        case CURLE_WRITE_ERROR:
                return b->too_big ? -EFBIG : -ENOMEM;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
                return -EINVAL;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_WEIRD_SERVER_REPLY:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return -EPROTO;
        default:
                return -EIO;
        }
}

static int append_header(struct curl_slist **l, const char *line) {
        struct curl_slist *n;

        n = curl_slist_append(*l, line);
        if (!n)
                return -ENOMEM;
        *l = n;
        return 0;
}

static int setup_mime(CURL *curl, Transfer *t, MimePart *wrappers, curl_mime **ret) {
        _cleanup_(curl_mime_freep) curl_mime *mime = NULL;
        const HttpRequest *req = t->req;

        mime = curl_mime_init(curl);
        if (!mime)
                return -ENOMEM;
        for (size_t i = 0; i < req->n_parts; i++) {
                const HttpMimePart *p = &req->parts[i];
                curl_mimepart *part;
                CURLcode code;

                if (!p->read || isempty(p->name))
                        return -EINVAL;
                wrappers[i] = (MimePart) { .t = t, .p = p };
                part = curl_mime_addpart(mime);
                if (!part)
                        return -ENOMEM;
                code = curl_mime_name(part, p->name);
                if (code == CURLE_OK && p->filename)
                        code = curl_mime_filename(part, p->filename);
                if (code == CURLE_OK)
                        code = curl_mime_type(part, p->content_type ?: "application/octet-stream");
                if (code == CURLE_OK)
                        code = curl_mime_data_cb(part, p->size >= 0 ? (curl_off_t) p->size : (curl_off_t) -1,
                                                 mime_read_cb, mime_seek_cb, NULL, &wrappers[i]);
                if (code != CURLE_OK)
                        return code == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
        }
        *ret = STEAL(mime);
        return 0;
}

static bool request_valid(const HttpRequest *req) {
        if (isempty(req->method) || has_bad_chars(req->method) ||
            !req->path || req->path[0] != '/' || has_bad_chars(req->path))
                return false;
        if (req->bearer && (isempty(req->bearer) || has_bad_chars(req->bearer)))
                return false;
        if (!!req->body + !!req->read_body + (req->n_parts > 0) > 1 || (req->n_parts > 0 && !req->parts))
                return false;
        if (req->accept && strpbrk(req->accept, "\r\n"))
                return false;
        return true;
}

/* Append the header line "@name: @prefix@value"; it is erased before it is freed (a token). */
static int append_header_value(struct curl_slist **l, const char *name, const char *prefix, const char *value) {
        _cleanup_erase_ char *line = NULL;

        if (asprintf(&line, "%s: %s%s", name, prefix, value) < 0) {
                line = NULL;
                return -ENOMEM;
        }
        return append_header(l, line);
}

/* The request's header lines: Accept, User-Agent, Expect, Content-Type, Authorization, the extra ones. */
static int build_headers(const HttpClient *c, const HttpRequest *req, struct curl_slist **ret) {
        _cleanup_(curl_slist_erase_and_freep) struct curl_slist *headers = NULL;
        bool streamed_body = req->read_body || req->n_parts > 0;
        int r;

        r = append_header_value(&headers, "Accept", "", req->accept ?: "application/json");
        if (r < 0)
                return r;
        r = append_header_value(&headers, "User-Agent", "", c->user_agent);
        if (r < 0)
                return r;
        /* A body in memory is sent at once, without an "Expect: 100-continue" round trip. A
         * streamed one waits for the daemon's go-ahead, so that a refusal (too large, no such
         * workspace) comes before the body rather than in the middle of it. */
        r = append_header(&headers, streamed_body ? "Expect: 100-continue" : "Expect:");
        if (r < 0)
                return r;
        if ((req->body || req->read_body) && req->content_type) {
                r = append_header_value(&headers, "Content-Type", "", req->content_type);
                if (r < 0)
                        return r;
        }
        if (req->bearer) {
                r = append_header_value(&headers, "Authorization", "Bearer ", req->bearer);
                if (r < 0)
                        return r;
        }
        for (const char *const *h = req->headers; h && *h; h++) {
                r = append_header(&headers, *h);
                if (r < 0)
                        return r;
        }

        *ret = STEAL(headers);
        return 0;
}

/* The options of every transfer: where to, the safety switches, callbacks, time limits. */
static CURLcode setup_transfer(const HttpClient *c, Transfer *t, const char *full_url, struct curl_slist *headers,
                               char *errbuf) {
        CURL *curl = t->curl;
        CURLcode code;

        /* Each setopt that can fail only does so on memory or an unsupported option. */
        code = curl_easy_setopt(curl, CURLOPT_URL, full_url);
        if (code == CURLE_OK && c->unix_path)
                code = curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        /* Never hand the token to a proxy from the environment, never follow a redirect elsewhere. */
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_PROXY, "");
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
        /* FIXME: drop when libcurl >= 7.85 is required. */
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_cb);
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_cb);
        if (code == CURLE_OK)
                code = curl_easy_setopt(curl, CURLOPT_HEADERDATA, t);
        if (code == CURLE_OK && c->timeout_usec > 0)
                code = curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                                        (long) MIN(DIV_ROUND_UP(c->timeout_usec, USEC_PER_MSEC),
                                                   (uint64_t) LONG_MAX));
        if (code == CURLE_OK && t->req->connect_timeout_usec > 0)
                code = curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                                        (long) MIN(DIV_ROUND_UP(t->req->connect_timeout_usec, USEC_PER_MSEC),
                                                   (uint64_t) LONG_MAX));
        return code;
}

/* How the body goes: streamed (an upload), multipart (parts wrapped in @wrappers, into @mime),
 * from memory, or none (GET). Returns 0, -ENOMEM, -EINVAL (a bad part), -EIO. */
static int setup_body(Transfer *t, MimePart **wrappers, curl_mime **mime) {
        const HttpRequest *req = t->req;
        CURL *curl = t->curl;
        CURLcode code;
        int r;

        if (req->read_body) {
                /* An upload (PUT unless the method says otherwise), streamed; chunked when
                 * its size is not known. */
                code = curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
                if (code == CURLE_OK)
                        code = curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_cb);
                if (code == CURLE_OK)
                        code = curl_easy_setopt(curl, CURLOPT_READDATA, t);
                if (code == CURLE_OK)
                        code = curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, seek_cb);
                if (code == CURLE_OK)
                        code = curl_easy_setopt(curl, CURLOPT_SEEKDATA, t);
                if (code == CURLE_OK && req->read_size >= 0)
                        code = curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t) req->read_size);
                if (code == CURLE_OK && !streq(req->method, "PUT"))
                        code = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
        } else if (req->n_parts > 0) {
                *wrappers = calloc(req->n_parts, sizeof(MimePart));
                if (!*wrappers)
                        return -ENOMEM;
                r = setup_mime(curl, t, *wrappers, mime);
                if (r < 0)
                        return r;
                code = curl_easy_setopt(curl, CURLOPT_MIMEPOST, *mime);
                if (code == CURLE_OK && !streq(req->method, "POST"))
                        code = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
        } else if (req->body || !streq(req->method, "GET")) {
                /* POST-style transfer of the body (possibly empty, which still sends
                 * "Content-Length: 0"), then the method's own name if it is not POST. */
                code = curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                                        (curl_off_t) (req->body ? req->body_size : 0));
                if (code == CURLE_OK)
                        code = curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req->body ?: "");
                if (code == CURLE_OK && !streq(req->method, "POST"))
                        code = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
        } else
                code = curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);

        if (code != CURLE_OK)
                return code == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
        return 0;
}

/* curl_easy_perform() failed with @code: the error, and libcurl's (or the OS's) text for it. */
static int transfer_failed(Transfer *t, CURLcode code, char *errbuf, char **ret_error) {
        long os_errno = 0;

        /* A callback's own error says best what went wrong. */
        if (t->cb_error < 0)
                return t->cb_error;

        /* For a refused connection the OS error says it best ("No such file or directory"
         * for a missing socket file); libcurl's text would name "localhost port 80". */
        if (code == CURLE_COULDNT_CONNECT &&
            curl_easy_getinfo(t->curl, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno > 0)
                (void) snprintf(errbuf, CURL_ERROR_SIZE, "%s", strerror((int) os_errno));

        if (ret_error) {
                *ret_error = strdup(errbuf[0] != '\0' ? errbuf : curl_easy_strerror(code));
                if (!*ret_error)
                        return -ENOMEM;
        }
        return curl_code_to_errno(code, &t->b);
}

/* The answer of a finished transfer: status, body (taken from @t), content type, header lines. */
static int collect_response(Transfer *t, HttpResponse *ret) {
        _cleanup_free_ char *body = STEAL(t->b.data), *ct_copy = NULL;
        const char *content_type = NULL;
        long status = 0;

        (void) curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
        (void) curl_easy_getinfo(t->curl, CURLINFO_CONTENT_TYPE, &content_type);

        if (content_type) {
                ct_copy = strdup(content_type);
                if (!ct_copy)
                        return -ENOMEM;
        }
        if (!body) {
                body = strdup("");      /* an empty answer, or a streamed one */
                if (!body)
                        return -ENOMEM;
        }

        *ret = (HttpResponse) {
                .status = status,
                .body = STEAL(body),
                .body_size = t->b.size,
                .content_type = STEAL(ct_copy),
                .headers = t->headers,
                .n_headers = t->n_headers,
        };
        return 0;
}

int http_client_request(HttpClient *c, const HttpRequest *req, HttpResponse *ret, char **ret_error) {
        _cleanup_(curl_slist_erase_and_freep) struct curl_slist *headers = NULL;
        _cleanup_(curl_easy_cleanupp) CURL *curl = NULL;
        _cleanup_(curl_mime_freep) curl_mime *mime = NULL;
        _cleanup_free_ char *full_url = NULL;
        _cleanup_free_ MimePart *wrappers = NULL;
        char errbuf[CURL_ERROR_SIZE] = "";
        Transfer t = { .req = req };
        CURLcode code;
        int r;

        if (ret_error)
                *ret_error = NULL;

        t.b.max = req->max_response_size > 0 ? req->max_response_size : HTTP_RESPONSE_SIZE_MAX;

        if (!request_valid(req))
                return -EINVAL;

        if (asprintf(&full_url, "%s%s", c->base, req->path) < 0) {
                full_url = NULL;
                return -ENOMEM;
        }

        curl = curl_easy_init();
        if (!curl)
                return -ENOMEM;
        t.curl = curl;

        r = build_headers(c, req, &headers);
        if (r < 0)
                return r;

        code = setup_transfer(c, &t, full_url, headers, errbuf);
        if (code != CURLE_OK)
                return code == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
        r = setup_body(&t, &wrappers, &mime);
        if (r < 0)
                return r;

        code = curl_easy_perform(curl);
        if (code == CURLE_OK)
                r = collect_response(&t, ret);
        else
                r = transfer_failed(&t, code, errbuf, ret_error);
        free(t.b.data);
        if (r < 0)
                strv_free_n(t.headers, t.n_headers);
        return r;
}
