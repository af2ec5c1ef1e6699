/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One client connection of the egress gateway: request head, decision, resolution, connect, relay. */

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/egress-policy.h"
#include "egress/connection.h"
#include "egress/egress-log-ids.h"
#include "egress/handoff.h"
#include "egress/proxy-request.h"
#include "egress/relay.h"
#include "egress/resolver.h"
#include "util/log.h"
#include "util/socket-util.h"

#define LINGER_DISCARD_MAX (256U * 1024U)
#define ADDRESSES_MAX 32U

/* Handlers return this to have the connection closed normally (negative errno: closed on error). */
#define CONNECTION_CLOSE 1

typedef enum ConnectionState {
        CONNECTION_HEAD,        /* reading the request head */
        CONNECTION_RESOLVING,   /* the name is being resolved */
        CONNECTION_CONNECTING,  /* a non-blocking connect() to an approved address */
        CONNECTION_RELAY,       /* bytes flow both ways */
        CONNECTION_REPLY,       /* writing our own (error) answer */
        CONNECTION_LINGER,      /* answer sent and SHUT_WR done: draining the client before close */
        _CONNECTION_STATE_MAX,
        _CONNECTION_STATE_INVALID = -EINVAL,
} ConnectionState;

typedef enum Decision {
        DECISION_ALLOWED,
        DECISION_DENIED,
        DECISION_FAILED,        /* allowed by the policy, but the upstream could not be reached */
} Decision;

struct Connection {
        const ConnectionContext *ctx;
        Connection *prev, *next;
        ConnectionState state;
        char *execution_id;
        uint64_t last_activity_usec;

        int client_fd;                  /* the AF_UNIX connection, or the TCP socket handed over on it */
        int upstream_fd;
        bool client_checked;            /* the first read (hand-over or not) is done */
        bool client_passed;             /* client_fd was handed over: its file is shared with the sender */
        sd_event_source *client_source;
        sd_event_source *upstream_source;
        sd_event_source *timer;

        /* The request. */
        char *head;                     /* PROXY_REQUEST_HEAD_MAX bytes: everything read so far */
        size_t head_fill;
        size_t head_parsed;
        size_t head_end;                /* first byte after the head, once complete */
        ProxyRequest request;
        EgressTarget target;
        bool have_target;
        const char *method;
        const char *allow_reason;

        /* Resolution and connect. */
        ResolveQuery *query;
        SockaddrUnion addresses[ADDRESSES_MAX];
        socklen_t address_lengths[ADDRESSES_MAX];
        size_t n_addresses;
        size_t next_address;
        int connect_error;
        uint64_t connect_deadline_usec;
        char address[INET6_ADDRSTRLEN + 16];    /* the one dialled: "1.2.3.4:443", "[::1]:443" */

        /* Relay: up = client → upstream, down = upstream → client. */
        Pump up;
        Pump down;
        bool relaying;

        /* Our own answer. */
        char *reply;
        size_t reply_size;
        size_t reply_offset;
        size_t discarded;
};

static int connection_update_events(Connection *c);
static int on_upstream_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static char *memdup(const void *p, size_t n) {
        char *d = malloc(n ?: 1);

        if (d && n > 0)
                memcpy(d, p, n);
        return d;
}

static uint64_t now_usec(const Connection *c) {
        uint64_t t = 0;

        (void) sd_event_now(c->ctx->event, CLOCK_MONOTONIC, &t);
        return t;
}

static int connection_arm_timer(Connection *c, uint64_t usec) {
        int r;

        r = sd_event_source_set_time(c->timer, now_usec(c) + usec);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

static const char *connection_host(const Connection *c) {
        return c->have_target && c->target.host ? c->target.host : "";
}

static unsigned connection_port(const Connection *c) {
        return c->have_target ? c->target.port : 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Journal entries: one per decision, with host, port, method and the dialled address only — never
 * header values, bodies, paths or queries. */

static void connection_log_decision(Connection *c, Decision d, unsigned status, const char *reason) {
        char target[300], result[64];

        /*
         * Every reason is our own text or the policy's (static strings, addresses we formatted),
         * never bytes of the request; the host is canonical (LDH) or absent.
         */
        if (c->have_target && c->target.host)
                (void) snprintf(target, sizeof(target), "%s:%u", connection_host(c), connection_port(c));
        else
                (void) snprintf(target, sizeof(target), "(no valid target)");
        if (d == DECISION_ALLOWED)
                (void) snprintf(result, sizeof(result), "%s", status == 200 ? "tunnel" : "forwarded");
        else
                (void) snprintf(result, sizeof(result), "HTTP %u", status);

        log_struct(d == DECISION_ALLOWED ? LOG_INFO : LOG_NOTICE,
                   "MESSAGE_ID=%s", d == DECISION_ALLOWED ? SR_MESSAGE_EGRESS_ALLOWED :
                                    d == DECISION_DENIED ? SR_MESSAGE_EGRESS_DENIED : SR_MESSAGE_EGRESS_FAILED,
                   "SANDBOX_EGRESS_DECISION=%s", d == DECISION_DENIED ? "denied" : "allowed",
                   "SANDBOX_EGRESS_HOST=%s", connection_host(c),
                   "SANDBOX_EGRESS_PORT=%u", connection_port(c),
                   "SANDBOX_EGRESS_METHOD=%s", c->method ?: "",
                   "SANDBOX_EGRESS_REASON=%s", reason ?: "",
                   "SANDBOX_EGRESS_ADDRESS=%s", c->address,
                   "SANDBOX_EGRESS_STATUS=%u", status,
                   "SANDBOX_EGRESS_REVISION=%s", c->ctx->revision,
                   "SANDBOX_EXECUTION_ID=%s", c->execution_id,
                   "MESSAGE=Egress %s: %s %s%s%s for execution %s: %s (%s, policy revision %s).",
                   d == DECISION_ALLOWED ? "allowed" : d == DECISION_DENIED ? "denied" : "allowed but failed",
                   c->method ?: "request", target, c->address[0] ? " via " : "", c->address,
                   c->execution_id, reason ?: "", result, c->ctx->revision);
}

/* ---------------------------------------------------------------------------------------------- */
/* Our own answers. */

static int connection_reply(Connection *c, unsigned status, const char *body_fmt, ...) _printf_(3, 4);

static int connection_reply(Connection *c, unsigned status, const char *body_fmt, ...) {
        _cleanup_free_ char *body = NULL;
        va_list ap;
        int r, n;

        va_start(ap, body_fmt);
        n = vasprintf(&body, body_fmt, ap);
        va_end(ap);
        if (n < 0) {
                body = NULL;
                return -ENOMEM;
        }

        c->reply = mfree(c->reply);
        n = asprintf(&c->reply,
                     "HTTP/1.1 %u %s\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "%s"
                     "Connection: close\r\n"
                     "\r\n"
                     "%s",
                     status, proxy_status_text(status), strlen(body),
                     status == 405 ? "Allow: CONNECT, GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r\n" : "",
                     body);
        if (n < 0) {
                c->reply = NULL;
                return -ENOMEM;
        }
        c->reply_size = (size_t) n;
        c->reply_offset = 0;

        /* Whatever was going on stops here. */
        c->query = resolve_query_cancel(c->query);
        c->upstream_source = sd_event_source_disable_unref(c->upstream_source);
        c->upstream_fd = safe_close(c->upstream_fd);

        c->state = CONNECTION_REPLY;
        r = connection_arm_timer(c, CONNECTION_REPLY_TIMEOUT_USEC);
        if (r < 0)
                return r;
        return connection_update_events(c);
}

/* Log a refusal or failure and answer it. Return: 0, or -errno (then close). */
static int connection_refuse(Connection *c, Decision d, unsigned status, const char *reason) {
        connection_log_decision(c, d, status, reason);

        if (status == 403 && c->have_target)
                return connection_reply(c, status,
                                        "sandbox-runner egress gateway: access to %s:%u is not allowed by the "
                                        "sandbox's network policy: %s.\n",
                                        connection_host(c), connection_port(c), reason);
        if (status >= 500 && c->have_target)
                return connection_reply(c, status,
                                        "sandbox-runner egress gateway: %s:%u could not be reached: %s.\n",
                                        connection_host(c), connection_port(c), reason);
        return connection_reply(c, status, "sandbox-runner egress gateway: %s.\n", reason);
}

static int on_reply_writable(Connection *c) {
        while (c->reply_offset < c->reply_size) {
                ssize_t n = send(c->client_fd, c->reply + c->reply_offset, c->reply_size - c->reply_offset,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return negative_errno();
                }
                c->reply_offset += (size_t) n;
        }

        /*
         * Sent: half-close, then drain what the client still sends for a moment, so that closing
         * with unread input does not reset the connection before the client read our answer.
         */
        c->reply = mfree(c->reply);
        if (shutdown(c->client_fd, SHUT_WR) < 0)
                return negative_errno();
        c->state = CONNECTION_LINGER;
        (void) connection_arm_timer(c, CONNECTION_LINGER_USEC);
        return connection_update_events(c);
}

static int on_linger_readable(Connection *c) {
        char buf[4096];

        for (;;) {
                ssize_t n = recv(c->client_fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : CONNECTION_CLOSE;
                if (n == 0)
                        return CONNECTION_CLOSE;
                c->discarded += (size_t) n;
                if (c->discarded > LINGER_DISCARD_MAX)
                        return CONNECTION_CLOSE;
        }
}

/* ---------------------------------------------------------------------------------------------- */
/* Relay. */

static int connection_run_relay(Connection *c) {
        int a, b;

        /* splice() on a handed-over socket follows flags its sender can change: see handoff.h. */
        if (c->client_passed)
                handoff_guard_arm();
        a = pump_run(&c->up);
        b = pump_run(&c->down);
        if (c->client_passed && handoff_guard_disarm() && handoff_socket_blocking(c->client_fd)) {
                log_notice("Connection of execution %s to %s:%u: the client made its handed-over socket "
                           "blocking, closing.", c->execution_id, connection_host(c), connection_port(c));
                return -EPERM;
        }
        if (a > 0 || b > 0)
                c->last_activity_usec = now_usec(c);

        if (c->down.state == PUMP_FAILED)
                return c->down.error;
        if (c->up.state == PUMP_FAILED) {
                /*
                 * The upstream stopped reading (it may have answered early and closed): stop sending
                 * but still deliver its answer. A client read error or a malformed body ends it all.
                 */
                if (!streq(c->up.error_what, "write"))
                        return c->up.error;
                log_debug_errno(c->up.error, "Upstream %s stopped reading, ignoring: %m", c->address);
                c->up.state = PUMP_DONE;
        }
        /* A forwarded request ends with the answer; a tunnel once both directions are done. */
        if (c->down.state == PUMP_DONE && (c->up.state == PUMP_DONE || !proxy_request_is_connect(&c->request)))
                return CONNECTION_CLOSE;
        return connection_update_events(c);
}

static int connection_start_relay(Connection *c) {
        const char *rest = c->head + c->head_end;
        size_t n_rest = c->head_fill - c->head_end;
        bool connect = proxy_request_is_connect(&c->request);
        int r;

        r = pump_init(&c->up, c->client_fd, c->upstream_fd, /* shutdown_dst= */ connect);
        if (r < 0)
                return r;
        r = pump_init(&c->down, c->upstream_fd, c->client_fd, /* shutdown_dst= */ true);
        if (r < 0)
                return r;
        c->relaying = true;

        if (connect) {
                static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                char *s;

                s = strdup(established);
                if (!s)
                        return -ENOMEM;
                pump_queue(&c->down, s, strlen(established));

                /* The client may have sent tunnel bytes right behind the head: they go first. */
                if (n_rest > 0) {
                        s = memdup(rest, n_rest);
                        if (!s)
                                return -ENOMEM;
                        pump_queue(&c->up, s, n_rest);
                }
        } else {
                _cleanup_free_ char *head = NULL;
                size_t head_size, consumed = 0;

                r = proxy_request_build_forward_head(&c->request, c->target.host, c->target.port,
                                                     c->target.path_and_query, &head, &head_size);
                if (r < 0)
                        return r;
                pump_queue(&c->up, STEAL(head), head_size);

                /* Then the start of the body that came with the head, cut where the message ends. */
                c->up.body = &c->request;
                r = proxy_request_feed_body(&c->request, rest, n_rest, &consumed);
                if (r < 0)
                        return -EBADMSG;
                if (consumed > 0) {
                        char *s = memdup(rest, consumed);
                        if (!s)
                                return -ENOMEM;
                        pump_queue(&c->up, s, consumed);
                }
                if (r > 0)
                        c->up.src_eof = true;
        }

        /* The head buffer is not needed any more. */
        c->head = mfree(c->head);
        c->head_fill = c->head_end = c->head_parsed = 0;

        c->state = CONNECTION_RELAY;
        c->last_activity_usec = now_usec(c);
        r = connection_arm_timer(c, c->ctx->idle_timeout_usec);
        if (r < 0)
                return r;
        return connection_run_relay(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Connecting to the approved addresses, in the resolver's order. */

static int connection_connected(Connection *c) {
        static const int one = 1;
        int r;

        (void) setsockopt(c->upstream_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* The same towards a handed-over client: what upstream sends goes on at once, the tail of a
         * burst does not wait for the client's (delayed) ACK. */
        if (c->client_passed)
                (void) setsockopt(c->client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        connection_log_decision(c, DECISION_ALLOWED, proxy_request_is_connect(&c->request) ? 200 : 0,
                                c->allow_reason ?: "allowed by the policy");

        r = connection_start_relay(c);
        if (r == -EBADMSG) {
                /* Nothing was sent upstream yet. */
                connection_log_decision(c, DECISION_DENIED, 400, c->request.error ?: "malformed request body");
                return connection_reply(c, 400, "sandbox-runner egress gateway: %s.\n",
                                        c->request.error ?: "malformed request body");
        }
        return r;
}

static int connection_connect_next(Connection *c) {
        int r;

        while (c->next_address < c->n_addresses) {
                const SockaddrUnion *a = &c->addresses[c->next_address];
                socklen_t len = c->address_lengths[c->next_address];

                c->next_address++;
                (void) sockaddr_format(&a->sa, len, c->address, sizeof(c->address));

                c->upstream_source = sd_event_source_disable_unref(c->upstream_source);
                c->upstream_fd = safe_close(c->upstream_fd);
                c->upstream_fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (c->upstream_fd < 0) {
                        c->connect_error = errno;
                        continue;
                }
                /* The approved address itself: no second lookup, no name anywhere in between. */
                if (connect(c->upstream_fd, &a->sa, len) < 0 && errno != EINPROGRESS) {
                        c->connect_error = errno;
                        continue;
                }

                /* A silent address (say, IPv6 without a route) must not eat the others' time. */
                c->state = CONNECTION_CONNECTING;
                if (c->next_address < c->n_addresses)
                        r = sd_event_source_set_time(c->timer, MIN(c->connect_deadline_usec,
                                                                   now_usec(c) + CONNECTION_ATTEMPT_TIMEOUT_USEC));
                else
                        r = sd_event_source_set_time(c->timer, c->connect_deadline_usec);
                if (r >= 0)
                        r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
                if (r < 0)
                        return r;
                r = sd_event_add_io(c->ctx->event, &c->upstream_source, c->upstream_fd, EPOLLOUT,
                                    on_upstream_io, c);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(c->upstream_source, "egress-upstream");
                return connection_update_events(c);
        }

        errno = c->connect_error ?: ECONNREFUSED;
        {
                char reason[256];

                (void) snprintf(reason, sizeof(reason), "connecting to %s failed: %m", c->address);
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }
}

static int on_upstream_connect(Connection *c) {
        int error = 0;
        socklen_t len = sizeof(error);

        if (getsockopt(c->upstream_fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                error = errno;
        if (error == EINPROGRESS || error == EALREADY)
                return 0;
        if (error != 0) {
                c->connect_error = error;
                return connection_connect_next(c);
        }
        return connection_connected(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Resolution: every answer is classified; a single refused one refuses the request. */

static void connection_handle(Connection *c, int r);

static int connection_resolved(Connection *c, int error, const struct addrinfo *ai) {
        if (error != 0) {
                char reason[256];

                (void) snprintf(reason, sizeof(reason), "name resolution failed: %s",
                                error == EAI_SYSTEM ? strerror(errno) : gai_strerror(error));
                return connection_refuse(c, DECISION_FAILED, 502, reason);
        }

        c->n_addresses = 0;
        for (const struct addrinfo *i = ai; i; i = i->ai_next) {
                const char *why = NULL;
                bool duplicate = false;
                int k;

                k = egress_address_allowed(c->ctx->policy, i->ai_addr, i->ai_addrlen, &why);
                if (k <= 0) {
                        char ip[INET6_ADDRSTRLEN] = "?", reason[512];
                        const void *raw = i->ai_family == AF_INET6 ?
                                (const void *) &((const struct sockaddr_in6 *) i->ai_addr)->sin6_addr :
                                (const void *) &((const struct sockaddr_in *) i->ai_addr)->sin_addr;

                        if (i->ai_family == AF_INET || i->ai_family == AF_INET6)
                                (void) inet_ntop(i->ai_family, raw, ip, sizeof(ip));
                        (void) snprintf(reason, sizeof(reason), "resolved address %s refused: %s", ip,
                                        why ?: "not a public address");
                        return connection_refuse(c, DECISION_DENIED, 403, reason);
                }

                if (i->ai_addrlen > sizeof(SockaddrUnion))
                        continue;
                for (size_t j = 0; j < c->n_addresses; j++)
                        if (c->address_lengths[j] == i->ai_addrlen &&
                            memcmp(&c->addresses[j], i->ai_addr, i->ai_addrlen) == 0)
                                duplicate = true;
                if (duplicate || c->n_addresses >= ADDRESSES_MAX)
                        continue;
                memcpy(&c->addresses[c->n_addresses], i->ai_addr, i->ai_addrlen);
                c->address_lengths[c->n_addresses++] = i->ai_addrlen;
        }
        if (c->n_addresses == 0)
                return connection_refuse(c, DECISION_FAILED, 502, "the name has no usable address");

        c->next_address = 0;
        c->connect_error = 0;
        c->connect_deadline_usec = now_usec(c) + CONNECTION_CONNECT_TIMEOUT_USEC;
        return connection_connect_next(c);
}

static void on_resolved(ResolveQuery *q, int error, const struct addrinfo *ai, void *userdata) {
        Connection *c = userdata;

        c->query = NULL;        /* the resolver frees it */
        connection_handle(c, connection_resolved(c, error, ai));
}

/* ---------------------------------------------------------------------------------------------- */
/* The request head and the decision. */

static int connection_decide(Connection *c) {
        _cleanup_free_ char *canonical = NULL;
        const char *reason = NULL;
        int r;

        c->method = http_method_str(proxy_request_method(&c->request));

        /* The target comes from the request target only, never from Host:. */
        if (proxy_request_is_connect(&c->request))
                r = egress_target_parse_connect(c->request.url, &c->target, &reason);
        else
                r = egress_target_parse_absolute(c->request.url, &c->target, &reason);
        if (r < 0)
                return connection_refuse(c, DECISION_DENIED, 400, reason ?: "malformed request target");
        c->have_target = true;

        /* Already canonical (a fixed point): checked again so that nothing else is ever matched. */
        r = egress_host_canonicalize_full(c->target.host, &canonical, &reason);
        if (r < 0)
                return connection_refuse(c, DECISION_DENIED, 400, reason ?: "malformed host name");
        free(c->target.host);
        c->target.host = STEAL(canonical);

        r = egress_policy_match(c->ctx->policy, c->target.host, c->target.port, &reason);
        if (r <= 0)
                return connection_refuse(c, DECISION_DENIED, 403, reason ?: "not in the allowlist");
        c->allow_reason = reason;

        c->state = CONNECTION_RESOLVING;
        r = resolver_resolve(c->ctx->resolver, c->target.host, c->target.port, on_resolved, c, &c->query);
        if (r < 0)
                return connection_refuse(c, DECISION_FAILED, 503, "the resolver is busy");
        r = connection_arm_timer(c, CONNECTION_RESOLVE_TIMEOUT_USEC);
        if (r < 0)
                return r;
        return connection_update_events(c);
}

/* The first read of an AF_UNIX connection: a hand-over from the bridge (see handoff.h), or the start
 * of a plain client's request. Return: as recv(), with errno set; a hand-over reads 0 bytes but
 * is not the end (c->client_passed is then set and client_fd is the TCP socket). */
static ssize_t connection_first_read(Connection *c) {
        size_t n = 0;
        int passed = -EBADF, r;

        r = handoff_receive(c->client_fd, c->head, PROXY_REQUEST_HEAD_MAX, &n, &passed);
        if (r == -EAGAIN) {
                errno = EAGAIN;
                return -1;
        }
        if (r > 0 && !handoff_guard_available()) {
                safe_close(passed);
                r = -EOPNOTSUPP;
        }
        if (r < 0) {
                log_notice_errno(r, "Refusing a connection of execution %s: %s: %m", c->execution_id,
                                 r == -EBADMSG ? "malformed hand-over (not exactly one descriptor behind the marker)" :
                                 r == -EOPNOTSUPP ? "cannot guard handed-over sockets here" :
                                 "the handed-over descriptor is not a connected TCP socket");
                errno = -r;
                return -1;
        }
        c->client_checked = true;
        if (r == 0)
                return (ssize_t) n;

        /* From now on the client is the TCP socket; the AF_UNIX connection has done its job. */
        r = sd_event_source_set_io_fd(c->client_source, passed);
        if (r < 0) {
                safe_close(passed);
                errno = -r;
                return -1;
        }
        safe_close(c->client_fd);
        c->client_fd = passed;
        c->client_passed = true;
        errno = EAGAIN;
        return -1;
}

static int on_head_readable(Connection *c) {
        for (;;) {
                size_t end;
                ssize_t n;
                int r;

                if (c->head_fill >= PROXY_REQUEST_HEAD_MAX)
                        return connection_refuse(c, DECISION_DENIED, 431, "request head too large");

                if (!c->client_checked) {
                        n = connection_first_read(c);
                        if (n < 0 && errno == EAGAIN && c->client_passed)
                                continue;       /* read the head from the handed-over socket right away */
                } else
                        n = recv(c->client_fd, c->head + c->head_fill, PROXY_REQUEST_HEAD_MAX - c->head_fill,
                                 MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
                if (n == 0)
                        return CONNECTION_CLOSE;        /* gone before sending a whole head */
                c->head_fill += (size_t) n;

                r = proxy_request_feed_head(&c->request, c->head, c->head_parsed, c->head_fill, &end);
                if (r < 0) {
                        if (c->request.method_known)
                                c->method = http_method_str(proxy_request_method(&c->request));
                        return connection_refuse(c, DECISION_DENIED, c->request.status ?: 400,
                                                 c->request.error ?: "malformed request");
                }
                c->head_parsed = c->head_fill;
                if (r > 0) {
                        c->head_end = end;
                        return connection_decide(c);
                }
        }
}

/* ---------------------------------------------------------------------------------------------- */
/* Events. */

static int set_source_events(sd_event_source *s, uint32_t events) {
        int r;

        if (!s)
                return 0;
        /* A source with nothing to wait for is taken off epoll, or a hang-up would wake us forever. */
        if (events == 0)
                return sd_event_source_set_enabled(s, SD_EVENT_OFF);
        r = sd_event_source_set_io_events(s, events);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static int connection_update_events(Connection *c) {
        uint32_t client = 0, upstream = 0;
        int r;

        switch (c->state) {
        case CONNECTION_HEAD:
        case CONNECTION_LINGER:
                client = EPOLLIN;
                break;
        case CONNECTION_REPLY:
                client = EPOLLOUT;
                break;
        case CONNECTION_RESOLVING:
                break;
        case CONNECTION_CONNECTING:
                upstream = EPOLLOUT;
                break;
        case CONNECTION_RELAY:
                client = (pump_wants_read(&c->up) ? EPOLLIN : 0) | (pump_wants_write(&c->down) ? EPOLLOUT : 0);
                upstream = (pump_wants_read(&c->down) ? EPOLLIN : 0) | (pump_wants_write(&c->up) ? EPOLLOUT : 0);
                break;
        case _CONNECTION_STATE_MAX:
        case _CONNECTION_STATE_INVALID:
                assert(false);
        }

        r = set_source_events(c->client_source, client);
        if (r < 0)
                return r;
        return set_source_events(c->upstream_source, upstream);
}

static void connection_close(Connection *c, int error) {
        if (c->relaying)
                log_debug_errno(error, "Connection of execution %s to %s:%u via %s closed%s%s; %" PRIu64
                                " bytes up, %" PRIu64 " bytes down.", c->execution_id, connection_host(c),
                                connection_port(c), c->address, error != 0 ? ": " : "", error != 0 ? "%m" : "",
                                c->up.bytes, c->down.bytes);
        else if (error != 0)
                log_debug_errno(error, "Connection of execution %s closed: %m", c->execution_id);

        if (c->ctx->on_closed)
                c->ctx->on_closed(c, c->ctx->userdata);
        else
                connection_free(c);
}

/* Every handler's result goes through here: <0 error, CONNECTION_CLOSE done, else carry on. */
static void connection_handle(Connection *c, int r) {
        if (r < 0)
                connection_close(c, r);
        else if (r == CONNECTION_CLOSE)
                connection_close(c, 0);
}

static int on_client_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;
        int r = 0;

        switch (c->state) {
        case CONNECTION_HEAD:
                r = on_head_readable(c);
                break;
        case CONNECTION_RELAY:
                r = connection_run_relay(c);
                break;
        case CONNECTION_REPLY:
                r = on_reply_writable(c);
                break;
        case CONNECTION_LINGER:
                r = on_linger_readable(c);
                break;
        case CONNECTION_RESOLVING:
        case CONNECTION_CONNECTING:
                r = connection_update_events(c);
                break;
        case _CONNECTION_STATE_MAX:
        case _CONNECTION_STATE_INVALID:
                assert(false);
        }
        connection_handle(c, r);
        return 0;
}

static int on_upstream_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;
        int r;

        if (c->state == CONNECTION_CONNECTING)
                r = on_upstream_connect(c);
        else if (c->state == CONNECTION_RELAY)
                r = connection_run_relay(c);
        else
                r = connection_update_events(c);
        connection_handle(c, r);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Connection *c = userdata;
        char reason[256];
        int r = CONNECTION_CLOSE;

        switch (c->state) {
        case CONNECTION_HEAD:
                /* Slow or silent clients: a deadline for the whole head, not per byte. */
                log_debug("Request head of execution %s not complete after %" PRIu64 " s, closing.",
                          c->execution_id, CONNECTION_HEAD_TIMEOUT_USEC / USEC_PER_SEC);
                r = connection_reply(c, 408, "sandbox-runner egress gateway: request head not received in time.\n");
                break;
        case CONNECTION_RESOLVING:
                c->query = resolve_query_cancel(c->query);
                r = connection_refuse(c, DECISION_FAILED, 504, "name resolution timed out");
                break;
        case CONNECTION_CONNECTING:
                if (usec < c->connect_deadline_usec && c->next_address < c->n_addresses) {
                        /* This address is slow: on to the next one. */
                        c->connect_error = ETIMEDOUT;
                        r = connection_connect_next(c);
                        break;
                }
                (void) snprintf(reason, sizeof(reason), "connecting to %s timed out", c->address);
                r = connection_refuse(c, DECISION_FAILED, 504, reason);
                break;
        case CONNECTION_RELAY:
                if (usec < c->last_activity_usec + c->ctx->idle_timeout_usec) {
                        r = connection_arm_timer(c, c->last_activity_usec + c->ctx->idle_timeout_usec - usec);
                        break;
                }
                log_debug("Connection of execution %s to %s:%u idle for %" PRIu64 " s, closing.", c->execution_id,
                          connection_host(c), connection_port(c), c->ctx->idle_timeout_usec / USEC_PER_SEC);
                r = CONNECTION_CLOSE;
                break;
        case CONNECTION_REPLY:
        case CONNECTION_LINGER:
                r = CONNECTION_CLOSE;
                break;
        case _CONNECTION_STATE_MAX:
        case _CONNECTION_STATE_INVALID:
                assert(false);
        }
        connection_handle(c, r);
        return 0;
}

/* ---------------------------------------------------------------------------------------------- */

int connection_new(const ConnectionContext *ctx, int fd, char *execution_id, Connection **ret) {
        _cleanup_(connection_freep) Connection *c = NULL;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                free(execution_id);
                return -ENOMEM;
        }
        *c = (Connection) {
                .ctx = ctx,
                .state = CONNECTION_HEAD,
                .client_fd = fd,
                .upstream_fd = -EBADF,
                .execution_id = execution_id,
                .up = { .pipe = { -EBADF, -EBADF } },
                .down = { .pipe = { -EBADF, -EBADF } },
        };
        proxy_request_init(&c->request);

        c->head = malloc(PROXY_REQUEST_HEAD_MAX);
        if (!c->head)
                return -ENOMEM;

        r = sd_event_add_io(ctx->event, &c->client_source, fd, EPOLLIN, on_client_io, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->client_source, "egress-client");
        r = sd_event_add_time_relative(ctx->event, &c->timer, CLOCK_MONOTONIC, CONNECTION_HEAD_TIMEOUT_USEC,
                                       50 * USEC_PER_MSEC, on_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->timer, "egress-connection-timer");

        *ret = STEAL(c);
        return 0;
}

Connection *connection_free(Connection *c) {
        if (!c)
                return NULL;
        c->query = resolve_query_cancel(c->query);
        sd_event_source_disable_unref(c->client_source);
        sd_event_source_disable_unref(c->upstream_source);
        sd_event_source_disable_unref(c->timer);
        if (c->client_passed)
                handoff_guard_close(c->client_fd);      /* its sender may have set SO_LINGER */
        else
                safe_close(c->client_fd);
        safe_close(c->upstream_fd);
        pump_done(&c->up);
        pump_done(&c->down);
        proxy_request_done(&c->request);
        if (c->have_target)
                egress_target_done(&c->target);
        free(c->head);
        free(c->reply);
        free(c->execution_id);
        return mfree(c);
}

const char *connection_execution_id(const Connection *c) {
        return c->execution_id;
}

Connection *connection_next(const Connection *c) {
        return c->next;
}

void connection_link(Connection **head, Connection *c) {
        c->prev = NULL;
        c->next = *head;
        if (*head)
                (*head)->prev = c;
        *head = c;
}

void connection_unlink(Connection **head, Connection *c) {
        if (c->prev)
                c->prev->next = c->next;
        else if (*head == c)
                *head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
}

void connection_reply_busy(int fd, const char *why) {
        char buf[512];
        size_t size;
        int n, passed = -EBADF;

        /* A bridge hands the client's socket over right after connecting: if it is here already,
         * answer there (the bridge does not read the AF_UNIX connection). */
        if (handoff_guard_available() && handoff_receive(fd, buf, sizeof(buf), &size, &passed) > 0) {
                safe_close(fd);
                fd = passed;
        }

        n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 503 Service Unavailable\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n"
                     "Retry-After: 1\r\n"
                     "\r\n"
                     "sandbox-runner egress gateway: %s.\n",
                     strlen("sandbox-runner egress gateway: .\n") + strlen(why), why);
        if (n > 0)
                (void) send(fd, buf, MIN((size_t) n, sizeof(buf) - 1), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) shutdown(fd, SHUT_WR);
        if (passed >= 0)
                handoff_guard_close(fd);
        else
                safe_close(fd);
}
