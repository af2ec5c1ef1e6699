/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kernels outlive a daemon restart (kernel-adopt.c). Each kernel has a record beside its
 * directory, <runtime>/kernels/<id>.json (0600, out of the sandbox's sight: only <id>/ is bound
 * in): id, owner, spec, HMAC key, workspace, env, limits, network, its run's scope, the keeper's
 * and the sandbox's pids. When the daemon stops, a kernel whose sandbox lives in a systemd scope
 * is left running (its keeper took a detachable job); the next daemon re-adopts it: the keeper
 * still in that scope, the workspace lease taken again, ZMQ reconnected to the same ipc sockets,
 * idle after a kernel_info round trip. A kernel that cannot be kept (no scope: the daemon's own
 * cgroups or rlimits, a daemon started by hand) ends as `interrupted`, and the next daemon lists
 * it so, with that reason, for the usual while.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct Kernel Kernel;
typedef struct KernelManager KernelManager;
typedef struct KernelAdopted KernelAdopted;

/* kernel_record_write() - write (or refresh) @k's record; logged, not fatal, on failure. */
void kernel_record_write(Kernel *k);
/* kernel_record_end() - @k ended: its record goes, or (the daemon stops, reason interrupted)
 * becomes a tombstone that the next daemon lists. */
void kernel_record_end(Kernel *k);

/* kernel_leave() - the daemon stops: leave @k running for the next daemon (record written,
 * sockets and clients closed, our ends of the run closed without a kill), and free it.
 * Return: 0 (freed), or -EOPNOTSUPP (it cannot be kept: the caller ends it). */
int kernel_leave(Kernel *k);

/* kernel_adopt_all() - at start: every record in the manager's directory: re-adopt its kernel,
 * or end it as interrupted (killing what may be left of it), or list a tombstone. */
void kernel_adopt_all(KernelManager *km);

/* For a re-adopted kernel (k->adopted): the host pid of its sandbox's pid 1 (0: unknown). */
pid_t kernel_adopted_sandbox_pid(Kernel *k);
/* kernel_adopted_kill() - SIGKILL its keeper and scope; the end comes back through the keeper's
 * exit (kernel_run_ended()). */
void kernel_adopted_kill(Kernel *k);
/* kernel_adopted_drop() - kill it (unless @keep) and free what the adoption holds; the lease goes
 * after the end snapshot of its workspace (in a thread), or at once when kept. */
void kernel_adopted_drop(Kernel *k, bool keep);
/* kernel_adopted_snapshots_free() - at the manager's end: wait for the end snapshots still running
 * (their kernels are not resumed) and release their leases. */
void kernel_adopted_snapshots_free(KernelManager *km);
