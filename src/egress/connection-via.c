/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A gateway connection through the upstream HTTP proxy of its policy: once the target passed the
 * policy and every address it resolved to was approved, the proxy's own name is resolved (no
 * address checks: the operator or the API server chose it, loopback and private are fine), the
 * gateway connects to it and sends CONNECT host:port (then relays once it answers 2xx) or the
 * forwarded request in absolute form. The proxy's credentials go only to the proxy. May use
 * egress/ and util/.
 */

#include <errno.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/connection-internal.h"
#include "util/log.h"

static void on_via_resolved(ResolveQuery *q, int error, const struct addrinfo *ai, void *userdata) {
        Connection *c = userdata;
        int r;

        c->query = NULL;        /* the resolver frees it */
        if (error != 0) {
                char reason[256];

                (void) snprintf(reason, sizeof(reason), "the upstream proxy's name resolution failed: %s",
                                error == EAI_SYSTEM ? strerror(errno) : gai_strerror(error));
                connection_handle(c, connection_refuse(c, DECISION_FAILED, 502, reason));
                return;
        }
        c->n_addresses = 0;
        for (const struct addrinfo *i = ai; i && c->n_addresses < ADDRESSES_MAX; i = i->ai_next) {
                if (i->ai_addrlen > sizeof(SockaddrUnion))
                        continue;
                memcpy(&c->addresses[c->n_addresses], i->ai_addr, i->ai_addrlen);
                c->address_lengths[c->n_addresses++] = i->ai_addrlen;
        }
        if (c->n_addresses == 0) {
                connection_handle(c, connection_refuse(c, DECISION_FAILED, 502, "the upstream proxy has no address"));
                return;
        }
        c->next_address = 0;
        c->connect_error = 0;
        c->connect_deadline_usec = now_usec(c) + CONNECTION_CONNECT_TIMEOUT_USEC;
        r = connection_connect_next(c);
        connection_handle(c, r);
}

int connection_via_resolve(Connection *c) {
        int r;

        c->via_upstream = true;
        c->state = CONNECTION_RESOLVING;
        r = resolver_resolve(c->ctx->resolver, c->ctx->upstream->host, c->ctx->upstream->port, on_via_resolved, c,
                             &c->query);
        if (r < 0)
                return connection_refuse(c, DECISION_FAILED, 503, "the resolver is busy");
        r = connection_arm_timer(c, CONNECTION_RESOLVE_TIMEOUT_USEC);
        if (r < 0)
                return r;
        return connection_update_events(c);
}

char *connection_via_absolute_target(const Connection *c) {
        const char *path = c->target.path_and_query ?: "/";
        char *s;

        if ((c->target.port == 80 ? asprintf(&s, "http://%s%s", c->target.host, path) :
                                    asprintf(&s, "http://%s:%u%s", c->target.host, (unsigned) c->target.port, path)) < 0)
                return NULL;
        return s;
}

int connection_via_connected(Connection *c) {
        const char *auth = c->ctx->upstream->authorization;
        _cleanup_free_ char *head = NULL;
        ssize_t n;
        int len;

        if (!proxy_request_is_connect(&c->request))
                return connection_start_relay(c, NULL, 0);

        len = asprintf(&head, "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n%s%s%s\r\n", c->target.host,
                       (unsigned) c->target.port, c->target.host, (unsigned) c->target.port,
                       auth ? "Proxy-Authorization: " : "", auth ?: "", auth ? "\r\n" : "");
        if (len < 0)
                return -ENOMEM;
        /* A fresh connection's send buffer takes a head this small whole. */
        n = send(c->upstream_fd, head, (size_t) len, MSG_NOSIGNAL | MSG_DONTWAIT);
        explicit_bzero(head, (size_t) len);
        if (n != len) {
                char reason[256];

                (void) snprintf(reason, sizeof(reason), "sending CONNECT to the upstream proxy %s failed: %s",
                                c->address, n < 0 ? strerror(errno) : "short write");
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
        c->via_head = malloc(VIA_HEAD_MAX);
        if (!c->via_head)
                return -ENOMEM;
        c->state = CONNECTION_HANDSHAKE;
        n = connection_arm_timer(c, CONNECTION_CONNECT_TIMEOUT_USEC);
        if (n < 0)
                return (int) n;
        return connection_update_events(c);
}

/* 2: no body, and what follows is the tunnel (http_parser's contract for CONNECT answers). */
static int on_via_headers_complete(http_parser *p) {
        return 2;
}

int connection_via_on_readable(Connection *c) {
        static const http_parser_settings settings = { .on_headers_complete = on_via_headers_complete };
        char reason[256];
        http_parser p;
        size_t parsed;
        ssize_t n;

        n = recv(c->upstream_fd, c->via_head + c->via_fill, VIA_HEAD_MAX - c->via_fill, MSG_DONTWAIT);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
        if (n == 0) {
                (void) snprintf(reason, sizeof(reason), "the upstream proxy %s closed before answering CONNECT",
                                c->address);
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
        c->via_fill += (size_t) n;

        /* The whole head again each time: it is small, and the parser keeps no state between. */
        http_parser_init(&p, HTTP_RESPONSE);
        parsed = http_parser_execute(&p, &settings, c->via_head, c->via_fill);
        if (HTTP_PARSER_ERRNO(&p) == HPE_OK && !p.upgrade) {
                if (c->via_fill < VIA_HEAD_MAX)
                        return 0;       /* not complete yet */
                (void) snprintf(reason, sizeof(reason), "the upstream proxy %s answered CONNECT with a head over %u bytes",
                                c->address, VIA_HEAD_MAX);
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK) {
                (void) snprintf(reason, sizeof(reason), "the upstream proxy %s answered CONNECT with a malformed head",
                                c->address);
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
        if (p.status_code < 200 || p.status_code > 299) {
                (void) snprintf(reason, sizeof(reason), "the upstream proxy %s refused CONNECT with status %u",
                                c->address, p.status_code);
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
        /* Bytes behind the head are the tunnel's first (a server that speaks first). */
        if (parsed < c->via_fill) {
                size_t rest = c->via_fill - parsed;
                char *early = malloc(rest);

                if (!early)
                        return -ENOMEM;
                memcpy(early, c->via_head + parsed, rest);
                c->via_head = mfree(c->via_head);
                return connection_start_relay(c, early, rest);
        }
        c->via_head = mfree(c->via_head);
        return connection_start_relay(c, NULL, 0);
}
