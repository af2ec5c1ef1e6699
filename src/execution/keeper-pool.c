/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Keepers started ahead of their runs (keeper-pool.h). */

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#include "execution/keeper-pool.h"
#include "util/log.h"
#include "util/macro.h"

#define KEEPER_POOL_MAX 8

struct KeeperPool {
        sd_event *event;
        char *path;
        unsigned target;
        SandboxKeeper ready[KEEPER_POOL_MAX];
        sd_event_source *watch[KEEPER_POOL_MAX];   /* ready[i]'s pidfd: it died while it waited */
        void *attached[KEEPER_POOL_MAX];          /* what the attach hook made for ready[i], or NULL */
        unsigned n_ready;
        sd_event_source *refill;          /* idle priority: one start per dispatch */
        KeeperPoolAttachFn attach;
        KeeperPoolDetachFn detach;
        void *hook_userdata;
};

/* Take ready[i] out of the pool (the order of the others stays: the last is taken first), with
 * what was attached to it into *ret_attached (or, with NULL, detached now). */
static SandboxKeeper pool_remove(KeeperPool *p, unsigned i, void **ret_attached) {
        SandboxKeeper k = p->ready[i];
        void *attached = p->attached[i];

        /* Before anything else watches its pidfd: epoll takes each fd once. */
        p->watch[i] = sd_event_source_disable_unref(p->watch[i]);
        memmove(p->ready + i, p->ready + i + 1, (p->n_ready - i - 1) * sizeof(p->ready[0]));
        memmove(p->watch + i, p->watch + i + 1, (p->n_ready - i - 1) * sizeof(p->watch[0]));
        memmove(p->attached + i, p->attached + i + 1, (p->n_ready - i - 1) * sizeof(p->attached[0]));
        p->n_ready--;
        p->watch[p->n_ready] = NULL;
        p->attached[p->n_ready] = NULL;
        if (ret_attached)
                *ret_attached = attached;
        else if (attached && p->detach)
                p->detach(attached, p->hook_userdata);
        return k;
}

/* A keeper out of the pool that is not handed out: stop it, then what was attached to it. */
static void pool_discard(KeeperPool *p, SandboxKeeper *k, void *attached) {
        sandbox_keeper_stop(k);
        if (attached && p->detach)
                p->detach(attached, p->hook_userdata);
}

/* A ready keeper exited while it waited for a job: reap it now, not at the next take (an idle
 * daemon shows no zombie). No replacement until the next take asks for one: a keeper that exits
 * as soon as it is started (a broken or foreign binary) would otherwise be restarted forever. */
static int on_keeper_died(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        KeeperPool *p = userdata;
        siginfo_t si = {};

        for (unsigned i = 0; i < p->n_ready; i++) {
                SandboxKeeper k;

                if (p->watch[i] != s)
                        continue;
                void *attached;

                k = pool_remove(p, i, &attached);
                (void) sandbox_keeper_reap(&k, 0, &si);
                if (attached && p->detach)
                        p->detach(attached, p->hook_userdata);
                if (si.si_code == CLD_EXITED)
                        log_warning("A keeper started ahead of its run exited with status %d while it waited.",
                                    si.si_status);
                else
                        log_warning("A keeper started ahead of its run was killed by signal %d while it waited.",
                                    si.si_status);
                break;
        }
        (void) sd_event_source_set_enabled(p->refill, SD_EVENT_OFF);
        return 0;
}

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
                r = sd_event_add_io(p->event, &p->watch[p->n_ready], k.pidfd, EPOLLIN, on_keeper_died, p);
                if (r < 0) {
                        /* Unwatched, it would be a zombie until the next take, if it died: not kept. */
                        sandbox_keeper_stop(&k);
                        log_warning_errno(r, "Failed to watch a keeper started ahead of its run, ignoring: %m");
                        return sd_event_source_set_enabled(s, SD_EVENT_OFF);
                }
                (void) sd_event_source_set_description(p->watch[p->n_ready], "keeper-pool-ready");
                /* Whatever it must be in before its job (a cgroup), now, while the loop is idle. */
                p->attached[p->n_ready] = p->attach ? p->attach(k.pid, p->hook_userdata) : NULL;
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
        while (p->n_ready > 0) {
                void *attached;
                SandboxKeeper k = pool_remove(p, p->n_ready - 1, &attached);
                pool_discard(p, &k, attached);
        }
        p->refill = sd_event_source_disable_unref(p->refill);
        sd_event_unref(p->event);
        free(p->path);
        free(p);
        return NULL;
}

void keeper_pool_set_attach(KeeperPool *p, KeeperPoolAttachFn attach, KeeperPoolDetachFn detach, void *userdata) {
        p->attach = attach;
        p->detach = detach;
        p->hook_userdata = userdata;
}

int keeper_pool_take(KeeperPool *p, SandboxKeeper *ret) {
        return keeper_pool_take_attached(p, ret, NULL);
}

int keeper_pool_take_attached(KeeperPool *p, SandboxKeeper *ret, void **ret_attached) {
        if (ret_attached)
                *ret_attached = NULL;
        while (p->n_ready > 0) {
                void *attached;
                SandboxKeeper k = pool_remove(p, p->n_ready - 1, &attached);

                if (sandbox_keeper_alive(&k)) {
                        *ret = k;
                        if (ret_attached)
                                *ret_attached = attached;
                        else if (attached && p->detach)
                                p->detach(attached, p->hook_userdata);
                        /* Its replacement: on keeper_pool_refill(), unless that was the last. */
                        if (p->n_ready == 0)
                                pool_ask(p);
                        return 0;
                }
                /* Died since the loop last looked (on_keeper_died() did not run yet). */
                log_debug("A keeper started ahead died while it waited; taking another.");
                pool_discard(p, &k, attached);
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
