/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Keepers started ahead of their runs (keeper-pool.h). */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "keeper-pool.h"
#include "log.h"
#include "util/macro.h"

#define KEEPER_POOL_MAX 8

struct KeeperPool {
        sd_event *event;
        char *path;
        unsigned target;
        SandboxKeeper ready[KEEPER_POOL_MAX];
        unsigned n_ready;
        sd_event_source *refill;          /* idle priority: one start per dispatch */
};

static int on_refill(sd_event_source *s, void *userdata) {
        KeeperPool *p = userdata;
        SandboxKeeper k;
        int r;

        if (p->n_ready < p->target) {
                r = sandbox_keeper_start(p->path, &k);
                if (r < 0) {
                        /* Runs start theirs themselves meanwhile; the next take asks again. */
                        log_warning_errno(r, "Failed to start a keeper ahead of its run, ignoring: %m");
                        return sd_event_source_set_enabled(s, SD_EVENT_OFF);
                }
                p->ready[p->n_ready++] = k;
        }
        if (p->n_ready >= p->target)
                return sd_event_source_set_enabled(s, SD_EVENT_OFF);
        return 0;
}

static void pool_ask(KeeperPool *p) {
        if (p->n_ready < p->target)
                (void) sd_event_source_set_enabled(p->refill, SD_EVENT_ON);
}

int keeper_pool_new(sd_event *e, const char *keeper_path, unsigned target, KeeperPool **ret) {
        KeeperPool *p;
        int r;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(e);
        p->target = MIN(target, (unsigned) KEEPER_POOL_MAX);
        p->path = strdup(keeper_path);
        if (!p->path) {
                keeper_pool_free(p);
                return -ENOMEM;
        }
        r = sd_event_add_defer(e, &p->refill, on_refill, p);
        if (r < 0) {
                keeper_pool_free(p);
                return r;
        }
        /* Anything else pending goes first: a start blocks the loop until the keeper has exec'd
         * (vfork), which is best done while the loop has nothing else to do, typically while a
         * sandbox runs. */
        (void) sd_event_source_set_priority(p->refill, SD_EVENT_PRIORITY_IDLE);
        (void) sd_event_source_set_description(p->refill, "keeper-pool-refill");
        (void) sd_event_source_set_enabled(p->refill, SD_EVENT_OFF);
        pool_ask(p);
        *ret = p;
        return 0;
}

KeeperPool *keeper_pool_free(KeeperPool *p) {
        if (!p)
                return NULL;
        while (p->n_ready > 0)
                sandbox_keeper_stop(&p->ready[--p->n_ready]);
        p->refill = sd_event_source_disable_unref(p->refill);
        sd_event_unref(p->event);
        free(p->path);
        free(p);
        return NULL;
}

int keeper_pool_take(KeeperPool *p, SandboxKeeper *ret) {
        while (p->n_ready > 0) {
                SandboxKeeper k = p->ready[--p->n_ready];

                if (sandbox_keeper_alive(&k)) {
                        *ret = k;
                        /* Its replacement: on keeper_pool_refill(), unless that was the last. */
                        if (p->n_ready == 0)
                                pool_ask(p);
                        return 0;
                }
                log_debug("A keeper started ahead died while it waited; taking another.");
                sandbox_keeper_stop(&k);
        }
        /* None ready (more runs at once than the pool holds, or starts are failing): now. */
        pool_ask(p);
        return sandbox_keeper_start(p->path, ret);
}

void keeper_pool_refill(KeeperPool *p) {
        if (p)
                pool_ask(p);
}

unsigned keeper_pool_ready(const KeeperPool *p) {
        return p ? p->n_ready : 0;
}
