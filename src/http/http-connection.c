/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The HTTP server's connections: its listening sockets, accept4() with the overall and
 * per-client caps, and each connection's header and body deadlines (architecture.md section 2,
 * items 1 to 4). Hands accepted connections to MHD; calls back into http-server.c to run it.
 * May call util/ only besides.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "http/http-server-internal.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/socket-util.h"

/* ---- deadlines -------------------------------------------------------------------------- */

static int on_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpConnection *c = userdata;

        /* MHD offers no call to drop a connection from outside a handler; shutting the socket
         * down makes MHD see EOF on its next run and close it through its normal path. */
        log_debug("Connection from %s missed its deadline, closing.", c->client);
        (void) shutdown(c->fd, SHUT_RDWR);
        c->deadline = sd_event_source_disable_unref(c->deadline);
        return http_server_run(c->server);
}

void http_connection_arm(HttpConnection *c, uint64_t timeout_usec) {
        int r;

        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (timeout_usec == 0)
                return;
        r = sd_event_add_time_relative(c->server->event, &c->deadline, CLOCK_MONOTONIC, timeout_usec,
                                       100 * USEC_PER_MSEC, on_deadline, c);
        if (r < 0) {
                /* Fail closed: a connection we cannot bound does not get served. */
                log_warning_errno(r, "Failed to arm connection deadline, closing: %m");
                (void) shutdown(c->fd, SHUT_RDWR);
                return;
        }
        (void) sd_event_source_set_description(c->deadline, "http-deadline");
}

void http_connection_free(HttpConnection *c) {
        HttpServer *s;

        if (!c)
                return;
        s = c->server;
        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (c->prev)
                c->prev->next = c->next;
        else
                s->connections = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_connections--;
        free(c);
        if (s->cb.activity)
                s->cb.activity(s, s->userdata);
}

static bool same_client(const HttpConnection *a, const SockaddrUnion *addr) {
        if (a->addr.sa.sa_family != addr->sa.sa_family)
                return false;
        switch (addr->sa.sa_family) {
        case AF_INET:
                return a->addr.in.sin_addr.s_addr == addr->in.sin_addr.s_addr;
        case AF_INET6:
                return memcmp(&a->addr.in6.sin6_addr, &addr->in6.sin6_addr, sizeof(struct in6_addr)) == 0;
        default:
                /* AF_UNIX peers are local processes; they share one bucket. */
                return true;
        }
}

/* ---- accepting ------------------------------------------------------------------------------- */

static int on_listener(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpServer *s = userdata;
        unsigned tag = 0;

        for (size_t i = 0; i < s->n_listeners; i++)
                if (s->listeners[i] == es)
                        tag = s->listener_tags[i];

        for (unsigned i = 0; i < 64; i++) {
                SockaddrUnion addr = {};
                socklen_t len = sizeof(addr);
                unsigned same = 0;
                HttpConnection *c;
                int cfd;

                cfd = accept4(fd, &addr.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        if (errno == ECONNABORTED || errno == EPROTO)
                                continue;
                        log_warning_errno(errno, "accept() failed, ignoring: %m");
                        break;
                }

                for (HttpConnection *o = s->connections; o; o = o->next)
                        if (same_client(o, &addr))
                                same++;
                if (s->n_connections >= s->limits.max_connections ||
                    (s->limits.max_connections_per_client > 0 && same >= s->limits.max_connections_per_client)) {
                        char buf[INET6_ADDRSTRLEN + 16];
                        log_debug("Refusing connection from %s: %u open overall, %u from this client.",
                                  sockaddr_format(&addr.sa, len, buf, sizeof(buf)), s->n_connections, same);
                        safe_close(cfd);
                        continue;
                }

                c = calloc(1, sizeof(*c));
                if (!c) {
                        safe_close(cfd);
                        return log_oom();
                }
                *c = (HttpConnection) {
                        .server = s, .fd = cfd, .addr = addr, .addr_len = len, .tag = tag, .next = s->connections,
                };
                (void) sockaddr_format(&addr.sa, len, c->client, sizeof(c->client));
                if (s->connections)
                        s->connections->prev = c;
                s->connections = c;
                s->n_connections++;
                http_connection_arm(c, s->limits.header_timeout_usec);

                s->adding = c;
                if (MHD_add_connection(s->mhd, cfd, &addr.sa, len) != MHD_YES) {
                        /* MHD closed the socket already. */
                        log_debug("MHD refused connection from %s.", c->client);
                        s->adding = NULL;
                        http_connection_free(c);
                        continue;
                }
                s->adding = NULL;
                c->attached = true;
                if (s->cb.activity)
                        s->cb.activity(s, s->userdata);
        }
        return http_server_run(s);
}

/* ---- listeners ------------------------------------------------------------------------------ */

void http_server_retire(HttpServer *s) {
        s->retiring = true;
        for (size_t i = 0; i < s->n_listeners; i++)
                (void) sd_event_source_set_enabled(s->listeners[i], SD_EVENT_OFF);
        /* Upgraded connections (WebSockets) would otherwise hold a retiring server forever. */
        http_upgrade_retire_all(s);
}

int http_server_take_listeners(HttpServer *s, int **ret_fds, unsigned **ret_tags, size_t *ret_n) {
        int *fds = NULL;

        if (s->n_listeners > 0) {
                fds = calloc(s->n_listeners, sizeof(int));
                if (!fds)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < s->n_listeners; i++) {
                fds[i] = sd_event_source_get_io_fd(s->listeners[i]);
                sd_event_source_disable_unref(s->listeners[i]);
        }
        *ret_n = s->n_listeners;
        s->listeners = mfree(s->listeners);
        *ret_tags = STEAL(s->listener_tags);
        s->n_listeners = 0;
        *ret_fds = fds;
        return 0;
}

int http_server_add_listener(HttpServer *s, int fd) {
        return http_server_add_listener_tag(s, fd, 0);
}

int http_server_add_listener_tag(HttpServer *s, int fd, unsigned tag) {
        sd_event_source **l, *es = NULL;
        unsigned *t;
        int r;

        l = realloc(s->listeners, sizeof(*l) * (s->n_listeners + 1));
        if (!l) {
                safe_close(fd);
                return -ENOMEM;
        }
        s->listeners = l;
        t = realloc(s->listener_tags, sizeof(*t) * (s->n_listeners + 1));
        if (!t) {
                safe_close(fd);
                return -ENOMEM;
        }
        s->listener_tags = t;
        r = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        if (r < 0) {
                safe_close(fd);
                return negative_errno();
        }
        r = sd_event_add_io(s->event, &es, fd, EPOLLIN, on_listener, s);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        (void) sd_event_source_set_description(es, "http-listener");
        s->listener_tags[s->n_listeners] = tag;
        s->listeners[s->n_listeners++] = es;
        return 0;
}
