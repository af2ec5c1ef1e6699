/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One proxy request from an untrusted client: its head parsed with libhttp-parser, its body delimited. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/proxy-request.h"
#include "util/macro.h"

static ProxyRequest *request_of(http_parser *p) {
        return p->data;
}

static int request_fail(ProxyRequest *r, unsigned status, const char *error) {
        /* Keep the first reason: later callbacks of a failing parse say less. */
        if (r->status == 0) {
                r->status = status;
                r->error = error;
        }
        return 1;               /* makes http_parser_execute() stop with HPE_CB_* */
}

static int append(char **s, size_t *size, const char *data, size_t n) {
        char *p;

        p = realloc(*s, *size + n + 1);
        if (!p)
                return -ENOMEM;
        memcpy(p + *size, data, n);
        *size += n;
        p[*size] = '\0';
        *s = p;
        return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
        ProxyRequest *r = request_of(p);

        r->method_known = true;
        if (r->url_size + n > PROXY_REQUEST_URL_MAX)
                return request_fail(r, 414, "request target too long");
        if (append(&r->url, &r->url_size, at, n) < 0)
                return request_fail(r, 503, "out of memory");
        return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
        ProxyRequest *r = request_of(p);
        ProxyHeader *h;
        size_t size;

        if (r->n_headers == 0 || r->in_value) {
                /* A new header; the head cap bounds the sizes, this bounds the count. */
                if (r->n_headers >= PROXY_REQUEST_HEADERS_MAX)
                        return request_fail(r, 431, "too many header fields");
                h = reallocarray(r->headers, r->n_headers + 1, sizeof(ProxyHeader));
                if (!h)
                        return request_fail(r, 503, "out of memory");
                r->headers = h;
                r->headers[r->n_headers++] = (ProxyHeader) {};
                r->in_value = false;
        }
        h = &r->headers[r->n_headers - 1];
        size = h->name ? strlen(h->name) : 0;
        if (append(&h->name, &size, at, n) < 0)
                return request_fail(r, 503, "out of memory");
        return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
        ProxyRequest *r = request_of(p);
        ProxyHeader *h;
        size_t size;

        if (r->n_headers == 0)
                return request_fail(r, 400, "malformed header");
        h = &r->headers[r->n_headers - 1];
        r->in_value = true;
        size = h->value ? strlen(h->value) : 0;
        if (append(&h->value, &size, at, n) < 0)
                return request_fail(r, 503, "out of memory");
        return 0;
}

static bool method_forwardable(enum http_method m) {
        switch ((int) m) {
        case HTTP_GET:
        case HTTP_HEAD:
        case HTTP_POST:
        case HTTP_PUT:
        case HTTP_DELETE:
        case HTTP_OPTIONS:
        case HTTP_PATCH:
                return true;
        default:
                return false;
        }
}

static int on_headers_complete(http_parser *p) {
        ProxyRequest *r = request_of(p);

        if (p->http_major == 0)
                return request_fail(r, 400, "HTTP/0.9 requests are not supported");
        if (p->http_major != 1 || p->http_minor > 1)
                return request_fail(r, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
        if (p->method != HTTP_CONNECT && !method_forwardable(p->method))
                return request_fail(r, 405, "method not allowed: use CONNECT, or GET, HEAD, POST, PUT, "
                                            "DELETE, OPTIONS or PATCH with an absolute URI");
        if (!r->url)
                return request_fail(r, 400, "missing request target");

        r->head_complete = true;
        /* Stop right here: the caller decides on the head before any body byte is looked at. */
        http_parser_pause(p, 1);
        return 0;
}

static int on_message_complete(http_parser *p) {
        ProxyRequest *r = request_of(p);

        r->message_complete = true;
        /* One request per connection: nothing after this message is consumed. */
        http_parser_pause(p, 1);
        return 0;
}

static const http_parser_settings settings = {
        .on_url = on_url,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_message_complete = on_message_complete,
};

void proxy_request_init(ProxyRequest *r) {
        *r = (ProxyRequest) {};
        http_parser_init(&r->parser, HTTP_REQUEST);
        r->parser.data = r;
}

void proxy_request_done(ProxyRequest *r) {
        for (size_t i = 0; i < r->n_headers; i++) {
                free(r->headers[i].name);
                free(r->headers[i].value);
        }
        free(r->headers);
        free(r->url);
        *r = (ProxyRequest) {};
}

enum http_method proxy_request_method(const ProxyRequest *r) {
        return (enum http_method) r->parser.method;
}

static int parse_error(ProxyRequest *r) {
        enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);

        if (r->status == 0) {
                switch ((int) e) {
                case HPE_INVALID_METHOD:
                        r->status = 400;
                        r->error = "unknown method";
                        break;
                case HPE_INVALID_URL:
                        r->status = 400;
                        r->error = "malformed request target";
                        break;
                case HPE_INVALID_VERSION:
                        r->status = 400;
                        r->error = "malformed HTTP version";
                        break;
                case HPE_HEADER_OVERFLOW:
                        r->status = 431;
                        r->error = "request head too large";
                        break;
                case HPE_UNEXPECTED_CONTENT_LENGTH:
                case HPE_INVALID_CONTENT_LENGTH:
                case HPE_INVALID_TRANSFER_ENCODING:
                        r->status = 400;
                        r->error = "conflicting or invalid message length (Content-Length/Transfer-Encoding)";
                        break;
                case HPE_INVALID_CHUNK_SIZE:
                        r->status = 400;
                        r->error = "invalid chunk size";
                        break;
                default:
                        r->status = 400;
                        r->error = "malformed request";
                }
        }
        return -EBADMSG;
}

/* Obsolete line folding (a header line starting with SP or HTAB) is refused outright (RFC 9112 §5.2). */
static bool head_has_obs_fold(const char *head, size_t size) {
        for (const char *p = memchr(head, '\n', size); p && (size_t) (p - head) + 1 < size;
             p = memchr(p + 1, '\n', size - (size_t) (p + 1 - head)))
                if (p[1] == ' ' || p[1] == '\t')
                        return true;
        return false;
}

int proxy_request_feed_head(ProxyRequest *r, const char *buf, size_t parsed, size_t size, size_t *ret_head_end) {
        size_t n, lf;

        if (r->status != 0)
                return -EBADMSG;
        if (parsed >= size) {
                *ret_head_end = size;
                return 0;
        }

        r->stream = buf;
        n = http_parser_execute(&r->parser, &settings, buf + parsed, size - parsed);
        if (HTTP_PARSER_ERRNO(&r->parser) == HPE_OK) {
                if (r->head_complete) /* cannot happen: on_headers_complete() pauses */
                        return parse_error(r);
                *ret_head_end = size;
                return 0;
        }
        if (HTTP_PARSER_ERRNO(&r->parser) != HPE_PAUSED || !r->head_complete)
                return parse_error(r);

        /* Paused in on_headers_complete(): the parser stopped at the LF that ends the head. */
        lf = parsed + n;
        if (lf >= size || buf[lf] != '\n') {
                (void) request_fail(r, 400, "malformed request head");
                return -EBADMSG;
        }
        if (head_has_obs_fold(buf, lf)) {
                (void) request_fail(r, 400, "obsolete header line folding");
                return -EBADMSG;
        }

        /* Let the parser take that LF, so that it is positioned at the first body byte. */
        http_parser_pause(&r->parser, 0);
        n = http_parser_execute(&r->parser, &settings, buf + lf, 1);
        if (n != 1 || (HTTP_PARSER_ERRNO(&r->parser) != HPE_OK && HTTP_PARSER_ERRNO(&r->parser) != HPE_PAUSED))
                return parse_error(r);
        http_parser_pause(&r->parser, 0);

        *ret_head_end = lf + 1;
        return 1;
}

int proxy_request_feed_body(ProxyRequest *r, const char *data, size_t size, size_t *ret_consumed) {
        size_t n;

        if (r->message_complete) {
                *ret_consumed = 0;
                return 1;
        }
        if (r->status != 0)
                return -EBADMSG;
        if (size == 0) {
                *ret_consumed = 0;
                return 0;
        }

        r->stream = data;
        n = http_parser_execute(&r->parser, &settings, data, size);
        if (HTTP_PARSER_ERRNO(&r->parser) == HPE_PAUSED && r->message_complete) {
                *ret_consumed = n;
                return 1;
        }
        if (HTTP_PARSER_ERRNO(&r->parser) != HPE_OK)
                return parse_error(r);
        *ret_consumed = n;
        return 0;
}

static bool name_in_list(const char *name, const char *const *list) {
        for (const char *const *l = list; *l; l++)
                if (strcasecmp(name, *l) == 0)
                        return true;
        return false;
}

/* Is @name one of the comma-separated tokens of a Connection: header value? */
static bool token_listed(const char *list, const char *name) {
        size_t len = strlen(name);

        for (const char *p = list; *p;) {
                size_t n;

                p += strspn(p, " \t,");
                n = strcspn(p, " \t,");
                if (n == len && strncasecmp(p, name, len) == 0)
                        return true;
                p += n;
        }
        return false;
}

static bool header_is_hop_by_hop(const ProxyRequest *r, const char *name) {
        static const char *const hop_by_hop[] = {
                "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Connection",
                "Keep-Alive", "TE", "Trailer", "Upgrade", "Host", NULL,
        };

        if (name_in_list(name, hop_by_hop))
                return true;
        /* Options named in Connection: are connection-specific too (RFC 9110 §7.6.1). */
        for (size_t i = 0; i < r->n_headers; i++)
                if (r->headers[i].name && strcasecmp(r->headers[i].name, "Connection") == 0 &&
                    r->headers[i].value && token_listed(r->headers[i].value, name))
                        return true;
        return false;
}

int proxy_request_build_forward_head(const ProxyRequest *r, const char *host, uint16_t port,
                                     const char *path_and_query, const char *proxy_authorization,
                                     char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;

        fprintf(f, "%s %s HTTP/1.1\r\n", http_method_str(proxy_request_method(r)),
                isempty(path_and_query) ? "/" : path_and_query);
        if (port == 80)
                fprintf(f, "Host: %s\r\n", host);
        else
                fprintf(f, "Host: %s:%u\r\n", host, (unsigned) port);
        for (size_t i = 0; i < r->n_headers; i++) {
                const ProxyHeader *h = &r->headers[i];
                size_t len;

                if (!h->name || header_is_hop_by_hop(r, h->name))
                        continue;
                len = h->value ? strlen(h->value) : 0;
                while (len > 0 && (h->value[len - 1] == ' ' || h->value[len - 1] == '\t'))
                        len--;
                fprintf(f, "%s: %.*s\r\n", h->name, (int) len, h->value ?: "");
        }
        if (proxy_authorization)
                fprintf(f, "Proxy-Authorization: %s\r\n", proxy_authorization);
        fputs("Connection: close\r\n\r\n", f);
        if (fclose(f) != 0 || !buf)
                return -ENOMEM;

        *ret_size = size;
        *ret = STEAL(buf);
        return 0;
}

const char *proxy_status_text(unsigned status) {
        switch (status) {
#define XX(num, name, string) case num: return #string;
        HTTP_STATUS_MAP(XX)
#undef XX
        default:
                return "Error";
        }
}
