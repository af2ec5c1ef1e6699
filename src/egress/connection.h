/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One client connection of the egress gateway: request head, decision, resolution, connect, relay.
 * Implemented by connection.c (object, events, dispatch), connection-request.c (head, decision),
 * connection-upstream.c (resolution, connect, relay) and connection-reply.c (journal, answers).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct EgressPolicy EgressPolicy;
typedef struct EgressUpstream EgressUpstream;
typedef struct Resolver Resolver;
typedef struct Connection Connection;

#define CONNECTION_HEAD_TIMEOUT_USEC    (10U * USEC_PER_SEC)
#define CONNECTION_RESOLVE_TIMEOUT_USEC (10U * USEC_PER_SEC)
#define CONNECTION_CONNECT_TIMEOUT_USEC (10U * USEC_PER_SEC)  /* all attempts together */
#define CONNECTION_ATTEMPT_TIMEOUT_USEC (3U * USEC_PER_SEC)   /* one attempt, when more addresses are left */
#define CONNECTION_IDLE_TIMEOUT_USEC    (300U * USEC_PER_SEC)
#define CONNECTION_REPLY_TIMEOUT_USEC   (10U * USEC_PER_SEC)
#define CONNECTION_LINGER_USEC          (2U * USEC_PER_SEC)

/* What every connection shares; owned by the gateway and outliving its connections. */
typedef struct ConnectionContext {
        sd_event *event;
        const EgressPolicy *policy;
        const EgressUpstream *upstream; /* the proxy every allowed target goes through but no_proxy's, or NULL */
        const char *revision;
        Resolver *resolver;
        uint64_t idle_timeout_usec;     /* relay idle timeout; CONNECTION_IDLE_TIMEOUT_USEC normally */
        /* Called once the connection closed itself; the callee unlinks and frees it. */
        void (*on_closed)(Connection *c, void *userdata);
        void *userdata;
} ConnectionContext;

/*
 * connection_new() - take over an accepted, non-blocking client socket @fd and start reading its
 * request head. @execution_id (taken over) labels the log entries. Return: 0 or -errno (@fd and
 * @execution_id are then closed/freed).
 */
int connection_new(const ConnectionContext *ctx, int fd, char *execution_id, Connection **ret);
/* connection_free() - close both sockets and cancel whatever is pending. Return: NULL. */
Connection *connection_free(Connection *c);
SR_DEFINE_FREE_FUNC(Connection *, connection_free);

const char *connection_execution_id(const Connection *c);

/* For the gateway's list of connections. */
Connection *connection_next(const Connection *c);
void connection_link(Connection **head, Connection *c);
void connection_unlink(Connection **head, Connection *c);

/*
 * connection_reply_busy() - answer 503 on a just-accepted socket that is not going to get a
 * Connection (over a cap), best effort and without blocking, and close it.
 */
void connection_reply_busy(int fd, const char *why);
