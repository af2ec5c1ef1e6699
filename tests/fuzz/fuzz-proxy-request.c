/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The egress gateway's request path, as src/egress/connection.c runs it: the head of a CONNECT or
 * absolute-URI request fed to proxy_request_feed_head() (once whole, once in small pieces as
 * recv() might deliver it: both must agree), the target parsed from the request line only
 * (egress_target_parse_connect/_absolute()), the host canonicalised and matched against an
 * allowlist, the head rebuilt for upstream, and the body that came with the head delimited by
 * proxy_request_feed_body().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-policy.h"
#include "egress/proxy-request.h"
#include "fuzz.h"

static EgressPolicy *policy;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char *allow[] = { "example.org", "*.example.com:443", "pypi.org:443", "bücher.example", NULL };

        if (egress_policy_new(true, allow, NULL, &policy, NULL) < 0)
                abort();
        return 0;
}

typedef struct Outcome {
        int head;               /* proxy_request_feed_head() */
        size_t head_end;
        int body;               /* proxy_request_feed_body(), after a complete forward head */
        size_t body_consumed;
} Outcome;

/* Feed the head in @data as if received @step bytes at a time (0: all at once); each call sees a buffer of
 * exactly the bytes received so far, so that a read past them is caught. */
static void feed_head(ProxyRequest *r, const uint8_t *data, size_t size, size_t step, Outcome *o) {
        size_t parsed = 0, fill = 0, end = 0;
        char *buf = NULL;
        int k = 0;

        *o = (Outcome) {};
        if (step == 0)
                step = size;
        while (fill < size) {
                fill = size - fill < step ? size : fill + step;
                free(buf);
                buf = malloc(fill);
                if (!buf)
                        abort();
                memcpy(buf, data, fill);
                k = proxy_request_feed_head(r, buf, parsed, fill, &end);
                FUZZ_CHECK(k == 0 || k == 1 || k == -EBADMSG);
                if (k != 0)
                        break;
                FUZZ_CHECK(end == fill);
                parsed = fill;
        }
        free(buf);
        o->head = k;
        if (k < 0) {
                FUZZ_CHECK(r->status >= 400 && r->status < 600 && r->error);
                return;
        }
        if (k == 0)
                return;
        FUZZ_CHECK(r->head_complete && r->url && end <= size);
        o->head_end = end;
}

/* Then, for a forwarded request, the body bytes that came after the head, again in pieces. */
static void feed_body(ProxyRequest *r, const uint8_t *data, size_t size, size_t step, Outcome *o) {
        int k;

        if (o->head != 1 || proxy_request_is_connect(r))
                return;
        if (step == 0)
                step = size;
        for (size_t off = o->head_end; off < size;) {
                size_t n = size - off < step ? size - off : step, consumed = 0;
                char *chunk = malloc(n);

                if (!chunk)
                        abort();
                memcpy(chunk, data + off, n);
                k = proxy_request_feed_body(r, chunk, n, &consumed);
                free(chunk);
                FUZZ_CHECK(k == 0 || k == 1 || k == -EBADMSG);
                if (k < 0) {
                        /* Refused: what was consumed before does not matter, the connection goes. */
                        o->body = k;
                        o->body_consumed = 0;
                        return;
                }
                FUZZ_CHECK(consumed <= n);
                o->body_consumed += consumed;
                o->body = k;
                if (k > 0)
                        break;
                FUZZ_CHECK(consumed == n);
                off += n;
        }
}

static void check_forward_head(const ProxyRequest *r, const EgressTarget *t) {
        ProxyRequest again;
        size_t head_size = 0, end = 0;
        char *head = NULL;
        int k;

        if (proxy_request_build_forward_head(r, t->host, t->port, t->path_and_query, NULL, &head, &head_size) < 0)
                return;
        FUZZ_CHECK(strlen(head) == head_size);

        /* What goes upstream is exactly one head: CRLF line ends only, one empty line, at the end. */
        for (size_t i = 0; i < head_size; i++) {
                if (head[i] == '\r')
                        FUZZ_CHECK(i + 1 < head_size && head[i + 1] == '\n');
                if (head[i] == '\n')
                        FUZZ_CHECK(i > 0 && head[i - 1] == '\r');
        }
        FUZZ_CHECK(head_size >= 4 && strstr(head, "\r\n\r\n") == head + head_size - 4);

        /* And it parses as one (Host: and Connection: are added: mind the header cap). */
        if (r->n_headers + 2 <= PROXY_REQUEST_HEADERS_MAX) {
                proxy_request_init(&again);
                k = proxy_request_feed_head(&again, head, 0, head_size, &end);
                if (k != 1 || end != head_size)
                        fprintf(stderr, "forward head (%d, %zu of %zu): %s\n", k, end, head_size, head);
                FUZZ_CHECK(k == 1 && end == head_size);
                FUZZ_CHECK(proxy_request_method(&again) == proxy_request_method(r));
                proxy_request_done(&again);
        }
        free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ProxyRequest whole, pieces;
        Outcome a, b;
        EgressTarget t = {};
        const char *reason = NULL;
        char *canonical = NULL;
        size_t step;
        int r;

        /* The gateway's head buffer holds PROXY_REQUEST_HEAD_MAX bytes: it never feeds more. */
        if (size > PROXY_REQUEST_HEAD_MAX)
                size = PROXY_REQUEST_HEAD_MAX;

        step = 1 + (size % 7) + size / 64;
        proxy_request_init(&whole);
        proxy_request_init(&pieces);
        feed_head(&whole, data, size, 0, &a);
        feed_head(&pieces, data, size, step, &b);
        FUZZ_CHECK(a.head == b.head);
        FUZZ_CHECK(a.head_end == b.head_end);
        /* Not compared: the status of a refusal. A head that breaks two rules (a target over
         * PROXY_REQUEST_URL_MAX that later holds a NUL) is refused for whichever the parser sees
         * first, and http_parser hands the target over per buffer: 414 or 400. */

        /* As connection_decide() does: the target from the request line only, never Host:. */
        if (a.head == 1) {
                if (proxy_request_is_connect(&whole))
                        r = egress_target_parse_connect(whole.url, &t, &reason);
                else
                        r = egress_target_parse_absolute(whole.url, &t, &reason);
                FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
                if (r == 0) {
                        FUZZ_CHECK(t.host && t.port > 0);
                        FUZZ_CHECK(proxy_request_is_connect(&whole) == !t.path_and_query);

                        /* The target's host is canonical already: canonicalising it changes nothing. */
                        r = egress_host_canonicalize_full(t.host, &canonical, &reason);
                        FUZZ_CHECK(r == 0 || r == -ENOMEM);
                        if (r == 0)
                                FUZZ_CHECK(strcmp(canonical, t.host) == 0);
                        free(canonical);

                        r = egress_policy_match(policy, t.host, t.port, &reason);
                        FUZZ_CHECK(r == 0 || r == 1);

                        /* The head sent upstream is built before any body byte is fed. */
                        if (!proxy_request_is_connect(&whole))
                                check_forward_head(&whole, &t);
                        egress_target_done(&t);
                }
        }

        /* The body is fed whatever the decision, for coverage; both ways must agree. */
        feed_body(&whole, data, size, 0, &a);
        feed_body(&pieces, data, size, step, &b);
        FUZZ_CHECK(a.body == b.body);
        FUZZ_CHECK(a.body_consumed == b.body_consumed);

        proxy_request_done(&pieces);
        proxy_request_done(&whole);
        return 0;
}
