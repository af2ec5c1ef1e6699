/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of one gateway connection share and nothing else includes: the Connection
 * object, its states and decisions. connection.c owns the object, its events and timer and the
 * dispatch by state; connection-request.c the request head and the policy decision;
 * connection-upstream.c resolution, connecting and the relay; connection-reply.c the journal entry
 * of each decision and the gateway's own answers. May use egress/ (policy, proxy-request, relay,
 * resolver, handoff) and util/.
 */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "egress/connection.h"
#include "egress/egress-policy.h"
#include "egress/proxy-request.h"
#include "egress/relay.h"
#include "egress/resolver.h"
#include "util/macro.h"
#include "util/socket-util.h"

#define ADDRESSES_MAX 32U

/* Handlers return this to have the connection closed normally (negative errno: closed on error). */
#define CONNECTION_CLOSE 1

typedef enum ConnectionState {
        CONNECTION_HEAD,        /* reading the request head */
        CONNECTION_RESOLVING,   /* the name is being resolved */
        CONNECTION_CONNECTING,  /* a non-blocking connect() to an approved address (or the upstream proxy) */
        CONNECTION_HANDSHAKE,   /* CONNECT sent to the upstream proxy: reading its answer */
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

        /* Through the upstream proxy (connection-via.c): c->addresses are then the proxy's. */
        bool via_upstream;
        char *via_head;                 /* the proxy's answer to our CONNECT, VIA_HEAD_MAX bytes */
        size_t via_fill;

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

static inline uint64_t now_usec(const Connection *c) {
        uint64_t t = 0;

        (void) sd_event_now(c->ctx->event, CLOCK_MONOTONIC, &t);
        return t;
}

static inline const char *connection_host(const Connection *c) {
        return c->have_target && c->target.host ? c->target.host : "";
}

static inline unsigned connection_port(const Connection *c) {
        return c->have_target ? c->target.port : 0;
}

/* connection.c: the timer, the event masks by state, and every handler's result. */
int connection_arm_timer(Connection *c, uint64_t usec);
int connection_update_events(Connection *c);
void connection_handle(Connection *c, int r);

/* connection-request.c: reading the request head, then the decision. */
int connection_on_head_readable(Connection *c);

/* connection-upstream.c: resolution of an allowed target, connecting, relaying. */
int connection_resolve(Connection *c);
int connection_connect_next(Connection *c);
int connection_run_relay(Connection *c);

/* connection-via.c: the upstream proxy, after the target's own addresses were approved. */
#define VIA_HEAD_MAX 8192U
int connection_via_resolve(Connection *c);
/* Connected to the proxy: send CONNECT (then CONNECTION_HANDSHAKE), or relay a forward request. */
int connection_via_connected(Connection *c);
int connection_via_on_readable(Connection *c);
/* The forwarded request's target as the proxy wants it: "http://host[:port]/path?q" (new string). */
char *connection_via_absolute_target(const Connection *c);
/* connection-upstream.c: start relaying; @early: bytes the upstream sent before (queued first). */
int connection_start_relay(Connection *c, char *early, size_t n_early);

/* connection-reply.c: the journal entry of a decision, our own answers and the linger after them. */
void connection_log_decision(Connection *c, Decision d, unsigned status, const char *reason);
int connection_reply(Connection *c, unsigned status, const char *body_fmt, ...) _printf_(3, 4);
/* Log a refusal or failure and answer it. Return: 0, or -errno (then close). */
int connection_refuse(Connection *c, Decision d, unsigned status, const char *reason);
int connection_on_reply_writable(Connection *c);
int connection_on_linger_readable(Connection *c);
