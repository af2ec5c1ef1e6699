/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Asynchronous name resolution for the gateway: glibc getaddrinfo_a() completions on the sd-event loop. */

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "egress/resolver.h"
#include "util/macro.h"

struct ResolveQuery {
        Resolver *resolver;             /* NULL once detached (cancelled, or the resolver is gone) */
        ResolveQuery *next;
        struct gaicb cb;                /* glibc reads it until the request is done */
        struct addrinfo hints;
        char *host;
        char service[8];
        resolve_handler_t handler;
        void *userdata;
};

struct Resolver {
        sd_event_source *source;
        ResolveQuery *queries;          /* submitted to glibc, not yet reaped */
        unsigned n_pending;             /* of which still wanted by a caller */
};

/*
 * The completion eventfd lives as long as the process: glibc runs the SIGEV_THREAD function in a
 * thread of its own, possibly after gai_error() already reports the request as done, so closing the
 * fd could make a late notification write into a recycled descriptor. One gateway process serves
 * one policy revision and exits, so one descriptor for its whole life is the simple, safe choice.
 */
static int completion_fd = -EBADF;

/*
 * Queries glibc was still working on when their resolver went away: glibc keeps pointers to
 * them, so they are parked here (reachable, not leaked) until the process exits.
 */
static ResolveQuery *abandoned = NULL;

static void notify_completion(union sigval v) {
        uint64_t one = 1;

        (void) v;
        if (write(completion_fd, &one, sizeof(one)) < 0) {
                /* Nothing to do, and no loop to report to from glibc's thread: adding 1 to a
                 * non-blocking eventfd only fails with EAGAIN when the counter is saturated, and
                 * then the fd is already readable, so on_completion() runs anyway. */
        }
}

static ResolveQuery *query_free(ResolveQuery *q) {
        if (!q)
                return NULL;
        if (q->cb.ar_result)
                freeaddrinfo(q->cb.ar_result);
        free(q->host);
        return mfree(q);
}

static void resolver_unlink(Resolver *r, ResolveQuery *q) {
        for (ResolveQuery **p = &r->queries; *p; p = &(*p)->next)
                if (*p == q) {
                        *p = q->next;
                        q->next = NULL;
                        return;
                }
}

static int on_completion(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Resolver *r = userdata;
        uint64_t v;
        ResolveQuery *q, *next;

        if (read(fd, &v, sizeof(v)) < 0) {
                /* Nothing to do: the non-blocking read only resets the counter, and fails with
                 * EAGAIN when an earlier wakeup already did. Every outstanding request is looked
                 * at below either way, so no completion is missed. */
        }

        /* The eventfd only says "something finished": look at every outstanding request. */
        for (q = r->queries; q; q = next) {
                int e;

                next = q->next;
                e = gai_error(&q->cb);
                if (e == EAI_INPROGRESS)
                        continue;

                resolver_unlink(r, q);
                if (q->handler) {
                        r->n_pending--;
                        q->handler(q, e, e == 0 ? q->cb.ar_result : NULL, q->userdata);
                }
                query_free(q);
        }
        return 0;
}

int resolver_new(sd_event *event, Resolver **ret) {
        Resolver *r;
        int k;

        if (completion_fd < 0) {
                completion_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (completion_fd < 0)
                        return negative_errno();
        }

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        k = sd_event_add_io(event, &r->source, completion_fd, EPOLLIN, on_completion, r);
        if (k < 0) {
                free(r);
                return k;
        }
        (void) sd_event_source_set_description(r->source, "resolver");
        *ret = r;
        return 0;
}

Resolver *resolver_free(Resolver *r) {
        ResolveQuery *q, *next;

        if (!r)
                return NULL;
        for (q = r->queries; q; q = next) {
                next = q->next;
                if (gai_error(&q->cb) != EAI_INPROGRESS || gai_cancel(&q->cb) == EAI_CANCELED)
                        query_free(q);
                else {
                        q->resolver = NULL;
                        q->handler = NULL;
                        q->next = abandoned;
                        abandoned = q;
                }
        }
        sd_event_source_disable_unref(r->source);
        return mfree(r);
}

int resolver_resolve(Resolver *r, const char *host, uint16_t port, resolve_handler_t handler, void *userdata,
                     ResolveQuery **ret) {
        struct gaicb *list[1];
        struct sigevent sev = {
                .sigev_notify = SIGEV_THREAD,
                .sigev_notify_function = notify_completion,
        };
        ResolveQuery *q;
        int e;

        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (ResolveQuery) {
                .resolver = r,
                .hints = {
                        .ai_family = AF_UNSPEC,
                        .ai_socktype = SOCK_STREAM,
                        .ai_flags = AI_NUMERICSERV,     /* deliberately no AI_ADDRCONFIG */
                },
                .handler = handler,
                .userdata = userdata,
        };
        q->host = strdup(host);
        if (!q->host) {
                free(q);
                return -ENOMEM;
        }
        (void) snprintf(q->service, sizeof(q->service), "%u", (unsigned) port);
        q->cb = (struct gaicb) {
                .ar_name = q->host,
                .ar_service = q->service,
                .ar_request = &q->hints,
        };

        list[0] = &q->cb;
        e = getaddrinfo_a(GAI_NOWAIT, list, 1, &sev);
        if (e != 0) {
                query_free(q);
                return e == EAI_AGAIN ? -EAGAIN : e == EAI_MEMORY ? -ENOMEM : -EIO;
        }

        q->next = r->queries;
        r->queries = q;
        r->n_pending++;
        *ret = q;
        return 0;
}

ResolveQuery *resolve_query_cancel(ResolveQuery *q) {
        Resolver *r;

        if (!q || !q->handler)
                return NULL;
        r = q->resolver;
        q->handler = NULL;
        q->userdata = NULL;
        r->n_pending--;

        /* Freed now if glibc lets go of it, else reaped by on_completion() when it is done. */
        if (gai_cancel(&q->cb) == EAI_CANCELED || gai_error(&q->cb) != EAI_INPROGRESS) {
                resolver_unlink(r, q);
                query_free(q);
        }
        return NULL;
}

unsigned resolver_n_pending(const Resolver *r) {
        return r->n_pending;
}
