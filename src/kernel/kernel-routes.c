/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The routes of a kernel's replies (kernel-routes.h): a keyed hash table and a list by age. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kernel/kernel-routes.h"
#include "util/hashmap.h"
#include "util/macro.h"
#include "util/siphash24.h"

typedef struct Route {
        HashLink link;
        struct Route *older, *newer;
        void *owner;
        char msg_id[];
} Route;

struct KernelRoutes {
        HashMap map;
        uint8_t key[16];
        Route *oldest, *newest;
};

int kernel_routes_new(KernelRoutes **ret) {
        KernelRoutes *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        /* Message ids come from clients: a keyed hash, so that none can choose collisions. */
        if (getrandom(r->key, sizeof(r->key), 0) != (ssize_t) sizeof(r->key)) {
                free(r);
                return negative_errno();
        }
        *ret = r;
        return 0;
}

static void route_unlink(KernelRoutes *r, Route *x) {
        hashmap_remove(&r->map, &x->link);
        if (x->older)
                x->older->newer = x->newer;
        else
                r->oldest = x->newer;
        if (x->newer)
                x->newer->older = x->older;
        else
                r->newest = x->older;
        free(x);
}

KernelRoutes *kernel_routes_free(KernelRoutes *r) {
        if (!r)
                return NULL;
        while (r->oldest)
                route_unlink(r, r->oldest);
        hashmap_done(&r->map);
        return mfree(r);
}

static Route *route_find(KernelRoutes *r, const char *msg_id) {
        uint64_t h = siphash24(msg_id, strlen(msg_id), r->key);

        HASHMAP_FOREACH_HASH(l, &r->map, h) {
                Route *x = hashmap_entry(l, Route, link);

                if (streq(x->msg_id, msg_id))
                        return x;
        }
        return NULL;
}

int kernel_routes_add(KernelRoutes *r, const char *msg_id, void *owner) {
        size_t len = strlen(msg_id);
        Route *x;
        int k;

        x = route_find(r, msg_id);
        if (x)
                route_unlink(r, x);
        if (hashmap_size(&r->map) >= KERNEL_ROUTES_MAX)
                route_unlink(r, r->oldest);
        x = malloc(sizeof(*x) + len + 1);
        if (!x)
                return -ENOMEM;
        *x = (Route) { .owner = owner, .older = r->newest };
        memcpy(x->msg_id, msg_id, len + 1);
        k = hashmap_add(&r->map, &x->link, siphash24(msg_id, len, r->key));
        if (k < 0) {
                free(x);
                return k;
        }
        if (r->newest)
                r->newest->newer = x;
        else
                r->oldest = x;
        r->newest = x;
        return 0;
}

void *kernel_routes_find(KernelRoutes *r, const char *msg_id) {
        Route *x = msg_id ? route_find(r, msg_id) : NULL;

        return x ? x->owner : NULL;
}

void kernel_routes_remove(KernelRoutes *r, const char *msg_id) {
        Route *x = msg_id ? route_find(r, msg_id) : NULL;

        if (x)
                route_unlink(r, x);
}

void kernel_routes_drop_owner(KernelRoutes *r, void *owner) {
        for (Route *x = r->oldest, *next; x; x = next) {
                next = x->newer;
                if (x->owner == owner)
                        route_unlink(r, x);
        }
        hashmap_shrink(&r->map);
}

size_t kernel_routes_size(const KernelRoutes *r) {
        return hashmap_size(&r->map);
}
