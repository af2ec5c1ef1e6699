/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Runs that may outlive the daemon: a kernel's sandbox in a systemd scope stays when the daemon
 * stops, for the next daemon to re-adopt (src/kernel/kernel-adopt.c). The keeper took a
 * detachable job (KEEPER_JOB_DETACHABLE): it no longer dies with us, and the end of its control
 * pipe leaves bwrap running. Leaving closes our ends and forgets the run: no kill, no snapshot, no
 * record; the workspace lease goes with our descriptor (the next daemon takes it again).
 */

#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "execution/execution-internal.h"
#include "sandbox/scope.h"
#include "util/fd-util.h"

void execution_set_detachable(Execution *e) {
        e->detachable = true;
}

const char *execution_scope_unit(const Execution *e) {
        return e->detachable && e->scope && e->phase == EXECUTION_RUNNING && !e->keeper_gone &&
                               e->end_usec == 0 && !e->reported_exit ? scope_name(e->scope) : NULL;
}

pid_t execution_keeper_pid(const Execution *e) {
        return e->keeper_gone ? 0 : e->proc.keeper_pid;
}

int execution_context_kill_unit(ExecutionContext *c, const char *unit) {
        /* Only ours: a name of our runs' scopes, as the polkit rule allows anyway. */
        if (!c->scopes || !unit || strncmp(unit, SCOPE_PREFIX, strlen(SCOPE_PREFIX)) != 0)
                return -EOPNOTSUPP;
        return scope_kill_by_name(c->scopes, unit);
}

int execution_leave(Execution *e) {
        if (!execution_scope_unit(e) || e->kill_reason != EXECUTION_STATUS_RUNNING)
                return -EOPNOTSUPP;
        /* Nothing of what follows may kill: the sandbox's pid 1 and the keeper are left alone, and
         * the scope is only unreferenced (it is collected once its processes are gone). */
        e->init_source = sd_event_source_disable_unref(e->init_source);
        e->init_pidfd = safe_close(e->init_pidfd);
        e->keeper_source = sd_event_source_disable_unref(e->keeper_source);
        e->proc.control_fd = safe_close(e->proc.control_fd);
        e->keeper_gone = true;
        e->scope = scope_free(e->scope);
        e->done = NULL;
        execution_free(e);
        return 0;
}
