/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Asynchronous name resolution for the gateway: glibc getaddrinfo_a() completions on the sd-event loop. */
#pragma once

#include <netdb.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct Resolver Resolver;
typedef struct ResolveQuery ResolveQuery;

/*
 * Called from the event loop once a query finished: @error is 0 or an EAI_* code, @ai the answers
 * (owned by the query, valid during the call only). The query is freed after the callback returns.
 */
typedef void (*resolve_handler_t)(ResolveQuery *q, int error, const struct addrinfo *ai, void *userdata);

/*
 * resolver_new() - a resolver attached to @event. Lookups go through getaddrinfo() (so
 * /etc/hosts and nsswitch apply) in glibc's worker threads; completions are signalled with
 * SIGEV_THREAD to an eventfd the loop watches. Return: 0 or -errno.
 */
int resolver_new(sd_event *event, Resolver **ret);
/* resolver_free() - cancel what can be cancelled; lookups still running finish unobserved. */
Resolver *resolver_free(Resolver *r);
SR_DEFINE_FREE_FUNC(Resolver *, resolver_free);

/*
 * resolver_resolve() - start resolving @host (AF_UNSPEC, SOCK_STREAM, numeric @port, no
 * AI_ADDRCONFIG). Return: 0 with *@ret the query, or -errno (-EAGAIN: glibc refused to queue it).
 */
int resolver_resolve(Resolver *r, const char *host, uint16_t port, resolve_handler_t handler, void *userdata,
                     ResolveQuery **ret);

/* resolve_query_cancel() - the handler will not be called; resources go when glibc is done. Return: NULL. */
ResolveQuery *resolve_query_cancel(ResolveQuery *q);

/* resolver_n_pending() - queries started and not yet delivered or cancelled. */
unsigned resolver_n_pending(const Resolver *r);
