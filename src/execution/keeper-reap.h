/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Released keepers still exiting: a keeper killed after its run's answer is reaped by the loop (a
 * keeper's exit can take most of a millisecond, which the next request would wait for), and its
 * scope or cgroup goes when it is gone. Until then the owner is busy (ExecutionContext.busy_ref):
 * neither the idle exit nor SIGTERM leaves one behind. The list is the execution context's
 * (ExecutionContext.keeper_reaps); calls sandbox/ (scope, cgroup) and util/ only.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "sandbox/cgroup.h"
#include "sandbox/scope.h"

typedef struct ExecutionContext ExecutionContext;
typedef struct KeeperReap KeeperReap;

/*
 * keeper_reap_add() - kill the keeper @pid and reap it from the loop. @watch is the caller's
 * child source on it, dropped first (sd-event takes one per pid). On success *@pidfd, *@scope and
 * *@cgroup are taken, and the context is busy until the keeper is reaped. @graceful: not killed,
 * the caller told it to go ('K', its control pipe closed): it kills and reaps its sandbox itself
 * (killed, the sandbox's processes would be left to the next subreaper up); at the daemon's end
 * it has KEEPER_REAP_GRACE_MS to do so.
 * Return: 0, or -errno (then nothing was taken but @watch, and the caller reaps it).
 */
int keeper_reap_add(ExecutionContext *c, pid_t pid, int *pidfd, sd_event_source **watch, Scope **scope,
                    Cgroup **cgroup, bool graceful);

/* keeper_reaps_flush() - kill and reap the released keepers still exiting, without the loop
 * (shutdown, after it ended: the loop reaps them otherwise, and the daemon is busy until then, so
 * that neither the idle exit nor SIGTERM needs this but when the stop timer ran out). */
void keeper_reaps_flush(ExecutionContext *c);
