/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Prespawned kernels ([Kernels] Prespawn=N, docs/kernels.md): N kernels of the default spec kept
 * started over fresh workspaces (kernel-<id>), owned by nobody and hidden from every listing,
 * handed out once by POST /api/kernels when the request asks nothing they do not have, never
 * reused. The pool refills from the event loop (a defer source: after the request that took one
 * has been answered), backs off when its kernels fail to start, and is drained (reason deleted,
 * the workspaces removed once their runs are gone) when the network policy changes and when the
 * daemon stops or reloads. Prespawned kernels are not counted against MaxKernels=: the cap counts
 * the clients' kernels; the pool adds at most Prespawn= more (they hold a busy reference: the
 * daemon does not idle-exit with a pool).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "execution/execution-context.h"
#include "execution/execution.h"
#include "kernel/kernel-internal.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"

/* After a prespawned kernel failed to get ready: the next try waits this long, doubling. */
#define POOL_BACKOFF_MIN_USEC (5 * USEC_PER_SEC)
#define POOL_BACKOFF_MAX_USEC (300 * USEC_PER_SEC)
/* A refill waits this long after the take (kernel_pool_schedule()). */
#define POOL_REFILL_DELAY_USEC (50 * USEC_PER_MSEC)

/* A drained kernel's workspace goes once its run is gone (the lease released, the snapshot done). */
typedef struct PoolReaper PoolReaper;
struct PoolReaper {
        KernelManager *km;
        PoolReaper *next;
        ExecutionWatch *watch;
        char *workspace_id;
};

static void pool_remove_workspace(KernelManager *km, const char *ws) {
        ExecutionContext *c = km->exec;
        int r;

        r = rm_rf_at(c->workspaces_fd, ws);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Prespawned kernel's workspace '%s' could not be removed: %m", ws);
        if (c->cas)
                (void) cas_refs_remove(c->cas, ws);
        workspace_heads_forget(&c->heads, ws);
}

static void reaper_free(PoolReaper *p) {
        KernelManager *km = p->km;

        for (PoolReaper **q = &km->pool_reapers; *q; q = &(*q)->next)
                if (*q == p) {
                        *q = p->next;
                        break;
                }
        execution_watch_free(p->watch);
        free(p->workspace_id);
        free(p);
}

static void on_reaper_watch(void *userdata) {
        PoolReaper *p = userdata;
        Execution *e = execution_watch_alive(p->watch) ? execution_watch_execution(p->watch) : NULL;

        if (e && !execution_finished(e))
                return;
        pool_remove_workspace(p->km, p->workspace_id);
        reaper_free(p);
}

/* The kernel's workspace goes now (its run is over) or once its run is (a watch on it). */
static void pool_reap_workspace(Kernel *k) {
        KernelManager *km = k->manager;
        PoolReaper *p;

        if (!k->exec || execution_finished(k->exec)) {
                pool_remove_workspace(km, k->workspace_id);
                return;
        }
        p = calloc(1, sizeof(*p));
        if (!p || !(p->workspace_id = strdup(k->workspace_id)) ||
            execution_watch_add(k->exec, on_reaper_watch, p, &p->watch) < 0) {
                log_warning("Prespawned kernel '%s': its workspace '%s' is left (out of memory).", k->id,
                            k->workspace_id);
                if (p)
                        free(p->workspace_id);
                free(p);
                return;
        }
        p->km = km;
        p->next = km->pool_reapers;
        km->pool_reapers = p;
}

static void pool_refill(KernelManager *km);

static int on_refill(sd_event_source *s, uint64_t usec, void *userdata) {
        KernelManager *km = userdata;

        km->pool_backoff_timer = sd_event_source_disable_unref(km->pool_backoff_timer);
        pool_refill(km);
        return 0;
}

static int on_refill_soon(sd_event_source *s, uint64_t usec, void *userdata) {
        KernelManager *km = userdata;

        km->pool_defer = sd_event_source_disable_unref(km->pool_defer);
        pool_refill(km);
        return 0;
}

/* Refill from the loop, a moment after what runs now: the client that took a kernel opens its
 * WebSocket and executes at once, and a kernel's start holds the loop for milliseconds and the
 * CPU for most of a second (measured: that first execution took 20-45 ms instead of 5 with the
 * refill run right after the answer). */
void kernel_pool_schedule(KernelManager *km) {
        if (km->stopping || km->config->kernels_prespawn == 0 || km->pool_defer || km->pool_backoff_timer)
                return;
        if (sd_event_add_time_relative(km->event, &km->pool_defer, CLOCK_MONOTONIC, POOL_REFILL_DELAY_USEC,
                                       USEC_PER_MSEC, on_refill_soon, km) < 0)
                log_warning("Prespawned kernels are not refilled (no timer).");
}

static void pool_back_off(KernelManager *km) {
        km->pool_backoff_usec = km->pool_backoff_usec == 0 ? POOL_BACKOFF_MIN_USEC :
                                MIN(km->pool_backoff_usec * 2, (uint64_t) POOL_BACKOFF_MAX_USEC);
        km->pool_defer = sd_event_source_disable_unref(km->pool_defer);
        if (km->pool_backoff_timer)
                return;
        if (sd_event_add_time_relative(km->event, &km->pool_backoff_timer, CLOCK_MONOTONIC, km->pool_backoff_usec,
                                       USEC_PER_SEC, on_refill, km) < 0)
                log_warning("Prespawned kernels are not refilled (no timer).");
}

static int pool_start_one(KernelManager *km) {
        _cleanup_free_ char *error = NULL;
        Kernel *k = NULL;
        int r;

        r = kernel_new(km, &(KernelStartRequest) {}, &k, &error);
        if (r < 0) {
                log_warning_errno(r, "A prespawned kernel could not be made: %s", error ?: "%m");
                return r;
        }
        k->prespawned = true;
        km->n_pool++;
        km->busy_ref(km->userdata);
        r = kernel_run(k, &error);
        if (r >= 0 && k->state == KERNEL_DEAD)
                r = -EIO;
        if (r < 0) {
                log_warning_errno(r, "A prespawned kernel could not be started: %s", error ?: "%m");
                kernel_delete(k, KERNEL_END_DELETED);
                return r;
        }
        log_debug("Prespawned kernel '%s' starting (%u of %u).", k->id, km->n_pool, km->config->kernels_prespawn);
        return 0;
}

static void pool_refill(KernelManager *km) {
        unsigned starting;

        /* One batch at a time: while kernels of the pool start, the slots taken meanwhile wait for
         * them, then fill together. At most Prespawn= starts share the CPU (each one is most of a
         * CPU-second of imports), and under a burst of takes the kernels get ready together,
         * which serves more of the burst from ready kernels than starts spread one per take (on
         * 2 cores, 20 takes back to back with Prespawn=4: 15-16 ready ones instead of 10-11). */
        (void) kernel_manager_prespawned(km, &starting);
        if (starting > 0)
                return;
        while (!km->stopping && km->n_pool < km->config->kernels_prespawn && !km->pool_backoff_timer)
                if (pool_start_one(km) < 0) {
                        pool_back_off(km);
                        return;
                }
}

void kernel_pool_ready(Kernel *k) {
        k->manager->pool_backoff_usec = 0;
        log_debug("Prespawned kernel '%s' ready.", k->id);
        kernel_pool_schedule(k->manager);   /* the slots taken while it started */
}

/* From kernel_end() and kernel_free(), before the run is dropped: a kernel of the pool ends. */
void kernel_pool_release(Kernel *k) {
        KernelManager *km = k->manager;
        bool failed;

        if (!k->prespawned || k->pool_released)
                return;
        k->pool_released = true;
        km->n_pool--;
        km->busy_unref(km->userdata);
        pool_reap_workspace(k);
        /* Ended by itself before it was ready (not drained, not a lifetime's end): back off. */
        failed = !k->ready && k->reason != KERNEL_END_DELETED && k->reason != KERNEL_END_INTERRUPTED &&
                 k->reason != KERNEL_END_LIFETIME;
        if (km->stopping)
                return;
        if (failed)
                pool_back_off(km);
        else
                kernel_pool_schedule(km);
}

bool kernel_pool_request_fits(const KernelStartRequest *r) {
        const char *net = r->network && json_object_is_type(r->network, json_type_string) ?
                          json_object_get_string(r->network) : NULL;

        if (r->workspace_id || r->environment || (r->spec && !streq(r->spec, KERNEL_SPEC_DEFAULT)))
                return false;
        if (r->env && (!json_object_is_type(r->env, json_type_object) || json_object_object_length(r->env) > 0))
                return false;
        if (r->limits && (!json_object_is_type(r->limits, json_type_object) ||
                          json_object_object_length(r->limits) > 0))
                return false;
        if (r->network && !json_object_is_type(r->network, json_type_null) && (!net || !streq(net, "default")))
                return false;
        return true;
}

Kernel *kernel_pool_take(KernelManager *km, const KernelStartRequest *r) {
        uint64_t lifetime = km->config->kernels_max_lifetime_usec, now = now_usec(CLOCK_MONOTONIC);
        Kernel *best = NULL;

        if (km->n_pool == 0 || !kernel_pool_request_fits(r))
                return NULL;
        /* A ready one first (the answer says idle), else the one furthest along; never one that has
         * spent half its lifetime waiting (MaxLifetimeSec= counts from its start). */
        for (Kernel *k = km->kernels; k; k = k->next) {
                if (!k->prespawned || k->pool_released || k->state == KERNEL_DEAD)
                        continue;
                if (lifetime > 0 && now - k->created_usec > lifetime / 2)
                        continue;
                if (!best || (k->ready && !best->ready) ||
                    (k->ready == best->ready && k->created_usec < best->created_usec))
                        best = k;
        }
        if (!best)
                return NULL;
        if (r->owner) {
                best->owner = strdup(r->owner);
                if (!best->owner)
                        return NULL;
        }
        /* Out of the pool: its busy reference becomes the counted kernel's (kernel_manager_start()). */
        best->prespawned = false;
        km->n_pool--;
        kernel_touch(best);
        if (best->ready)
                kernel_arm_idle(best);
        log_debug("Prespawned kernel '%s' handed out (%s).", best->id, best->ready ? "ready" : "starting");
        kernel_pool_schedule(km);
        return best;
}

void kernel_pool_drain(KernelManager *km) {
        unsigned n = 0;

        if (!km)
                return;
        for (Kernel *k = km->kernels, *next; k; k = next) {
                next = k->next;
                if (k->prespawned && !k->pool_released && k->state != KERNEL_DEAD) {
                        kernel_delete(k, KERNEL_END_DELETED);
                        n++;
                }
        }
        if (n > 0)
                log_info("Drained %u prespawned kernel(s).", n);
        km->pool_backoff_timer = sd_event_source_disable_unref(km->pool_backoff_timer);
        km->pool_backoff_usec = 0;
        kernel_pool_schedule(km);
}

unsigned kernel_manager_prespawned(KernelManager *km, unsigned *ret_starting) {
        unsigned ready = 0, starting = 0;

        for (Kernel *k = km->kernels; k; k = k->next)
                if (k->prespawned && !k->pool_released && k->state != KERNEL_DEAD) {
                        if (k->ready)
                                ready++;
                        else
                                starting++;
                }
        if (ret_starting)
                *ret_starting = starting;
        return ready;
}

void kernel_pool_free(KernelManager *km) {
        km->pool_defer = sd_event_source_disable_unref(km->pool_defer);
        km->pool_backoff_timer = sd_event_source_disable_unref(km->pool_backoff_timer);
        while (km->pool_reapers)
                reaper_free(km->pool_reapers);
}
