/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pruning of the snapshot store (SnapshotRetention=): counts the published snapshots and,
 * every so often, runs cas_gc() in a child once snapshots pause. Owned by the Manager, told of each
 * snapshot through the execution context's callback; calls workspace/cas and util/ only.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/snapshot-gc.h"
#include "util/child-task.h"
#include "util/log.h"
#include "util/macro.h"
#include "workspace/cas/cas.h"

struct SnapshotGc {
        sd_event *event;
        Cas *cas;                        /* not ours */
        unsigned retention;              /* snapshots kept per workspace, 0 = all (no pruning) */
        uint64_t n_published;
        uint64_t n_at_gc;                /* n_published when the last gc ended */
        ChildTask *task;
        sd_event_source *timer;          /* the gc waits for a pause in snapshots */
};

int snapshot_gc_new(sd_event *event, Cas *cas, unsigned retention, SnapshotGc **ret) {
        SnapshotGc *g;

        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        *g = (SnapshotGc) { .event = sd_event_ref(event), .cas = cas, .retention = retention };
        *ret = g;
        return 0;
}

SnapshotGc *snapshot_gc_free(SnapshotGc *g) {
        if (!g)
                return NULL;
        g->task = child_task_free(g->task);
        g->timer = sd_event_source_disable_unref(g->timer);
        sd_event_unref(g->event);
        free(g);
        return NULL;
}

#define GC_EVERY_SNAPSHOTS 20
/* The gc holds the store exclusively while it sweeps, and snapshots wait for it: it runs once
 * no snapshot was published for a moment, or, under steady load, after this many anyway. */
#define GC_QUIET_USEC (2 * USEC_PER_SEC)
#define GC_FORCE_SNAPSHOTS 2000

static int gc_child(int out_fd, void *userdata) {
        SnapshotGc *g = userdata;
        uint64_t freed = 0;
        char line[64];
        int r;

        r = cas_gc(g->cas, g->retention, &freed);
        if (r < 0)
                return r;
        (void) snprintf(line, sizeof(line), "%" PRIu64 "\n", freed);
        return write(out_fd, line, strlen(line)) < 0 ? negative_errno() : 0;
}

static void on_gc_done(ChildTask *t, int error, const char *out, void *userdata) {
        SnapshotGc *g = userdata;

        g->task = child_task_free(g->task);
        if (error == -EBUSY)
                return;   /* another process holds the store: next time */
        if (error < 0) {
                log_warning_errno(error, "Pruning the snapshot store failed, ignoring: %m");
                return;
        }
        g->n_at_gc = g->n_published;
        log_debug("Pruned the snapshot store (keeping %u per workspace): %s bytes freed.",
                  g->retention, out);
}

static void gc_start(SnapshotGc *g) {
        g->timer = sd_event_source_disable_unref(g->timer);
        if (g->task)
                return;
        if (child_task_start(g->event, gc_child, on_gc_done, g, &g->task) < 0)
                log_warning("Failed to start pruning the snapshot store, ignoring.");
}

static int on_gc_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        gc_start(userdata);
        return 0;
}

void snapshot_gc_published(SnapshotGc *g) {
        int r;

        g->n_published++;
        if (g->retention == 0 || g->task ||
            g->n_published - g->n_at_gc < GC_EVERY_SNAPSHOTS)
                return;
        if (g->n_published - g->n_at_gc >= GC_FORCE_SNAPSHOTS) {
                gc_start(g);
                return;
        }
        /* (Re)arm: it fires once snapshots paused for GC_QUIET_USEC. */
        if (g->timer)
                r = sd_event_source_set_time_relative(g->timer, GC_QUIET_USEC);
        else
                r = sd_event_add_time_relative(g->event, &g->timer, CLOCK_MONOTONIC, GC_QUIET_USEC,
                                               100 * USEC_PER_MSEC, on_gc_timer, g);
        if (r >= 0)
                r = sd_event_source_set_enabled(g->timer, SD_EVENT_ONESHOT);
        if (r < 0)
                gc_start(g);
}
