/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Released keepers still exiting, reaped by the loop: see keeper-reap.h. */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "execution/execution-context.h"
#include "execution/keeper-reap.h"
#include "util/fd-util.h"
#include "util/macro.h"

struct KeeperReap {
        ExecutionContext *context;
        KeeperReap *prev, *next;
        sd_event_source *source;
        pid_t pid;
        int pidfd;
        Scope *scope;
        Cgroup *cgroup;
        bool graceful;                    /* told to go ('K', its control pipe closed): not killed */
};

#define KEEPER_REAP_GRACE_MS 2000

static KeeperReap *keeper_reap_free(KeeperReap *k, bool wait) {
        ExecutionContext *c = k->context;

        if (wait && k->source) {
                struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

                /* One that was told to go reaps its sandbox first: give it the time. */
                if (!k->graceful || k->pidfd < 0 || poll(&p, 1, KEEPER_REAP_GRACE_MS) <= 0)
                        (void) kill(k->pid, SIGKILL);
                (void) waitpid(k->pid, NULL, 0);
        }
        k->source = sd_event_source_disable_unref(k->source);
        safe_close(k->pidfd);
        k->scope = scope_free(k->scope);
        k->cgroup = cgroup_free(k->cgroup);
        if (k->prev)
                k->prev->next = k->next;
        else if (c->keeper_reaps == k)
                c->keeper_reaps = k->next;
        if (k->next)
                k->next->prev = k->prev;
        free(k);
        /* @wait: the daemon is going away (keeper_reaps_flush()), its loop is done. */
        if (!wait)
                c->busy_unref(c->userdata);
        return NULL;
}

static int on_reaped_keeper_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        KeeperReap *k = userdata;

        /* sd-event reaped it before calling us. */
        k->source = sd_event_source_disable_unref(k->source);
        keeper_reap_free(k, false);
        return 0;
}

int keeper_reap_add(ExecutionContext *c, pid_t pid, int *pidfd, sd_event_source **watch, Scope **scope,
                    Cgroup **cgroup, bool graceful) {
        KeeperReap *k;
        int r;

        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        *k = (KeeperReap) { .context = c, .pid = pid, .pidfd = -EBADF, .graceful = graceful };
        /* sd-event takes one child source per pid: ours goes first. */
        *watch = sd_event_source_disable_unref(*watch);
        r = sd_event_add_child_pidfd(c->event, &k->source, *pidfd, WEXITED, on_reaped_keeper_exit, k);
        if (r < 0) {
                free(k);
                return r;
        }
        (void) sd_event_source_set_description(k->source, "execution-keeper-reap");
        if (!graceful)
                (void) kill(k->pid, SIGKILL);
        k->pidfd = STEAL_FD(*pidfd);
        k->scope = STEAL(*scope);
        /* Its owner goes: no callback of a SetUnitProperties() still in flight reaches it. */
        scope_set_properties_cancel(k->scope);
        k->cgroup = STEAL(*cgroup);
        k->next = c->keeper_reaps;
        if (k->next)
                k->next->prev = k;
        c->keeper_reaps = k;
        c->busy_ref(c->userdata);
        return 0;
}

void keeper_reaps_flush(ExecutionContext *c) {
        while (c->keeper_reaps)
                keeper_reap_free(c->keeper_reaps, true);
}
