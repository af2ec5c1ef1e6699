/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Re-execution of a daemon started by hand.
 *
 * A daemon that retires (SIGHUP, or its binary replaced on disk by a rebuild or an install) under
 * socket activation simply exits: systemd holds the listening sockets and starts the new binary
 * for the next connection. A daemon started by hand (--listen, Listen=) has nobody to start it
 * again, so once its runs and connections are done it re-executes the binary at its path, the
 * way long-running servers upgrade, handing the new image what it cannot get again by itself:
 *
 *   - the listening sockets, each with the API dialect it speaks: connections made meanwhile wait
 *     in their backlog for the new image;
 *   - the secrets: started as root, they were read before it became the service user;
 *   - its own cgroups (made as root) and the reason why it has none or may not run executions.
 *
 * They travel as file descriptors left open across execve(): a sealed memfd holding a JSON
 * object that names the others, itself named by $SANDBOX_RUNNER_REEXEC_FD. Nothing is written to
 * disk. When the binary on disk cannot be executed (a build still writing it, or removed), the
 * daemon re-executes its own old image instead (/proc/self/exe), says so in the journal and in
 * /health ("staleBinary"), and no longer retires because of the replaced file: a SIGHUP tries
 * again.
 */
#pragma once

#include <stddef.h>

#include "http/auth.h"

typedef struct Manager Manager;
typedef struct CgroupRoot CgroupRoot;

#define REEXEC_ENV "SANDBOX_RUNNER_REEXEC_FD"

typedef struct ReexecState {
        int *listen_fds;
        unsigned *listen_tags;  /* each listener's tag: the API dialect it speaks (util/dialect.h) */
        size_t n_listen_fds;
        Secrets secrets;
        CgroupRoot *cgroups;
        char *cgroups_reason;
        char *identity_error;
        char *stale_binary;     /* the new image could not be executed: why (we are the old one) */
        unsigned generation;    /* how many times this daemon re-executed itself */
} ReexecState;

/*
 * reexec_state_take() - when $SANDBOX_RUNNER_REEXEC_FD is set, take over what the previous image
 * handed on (and unset it; every fd taken is FD_CLOEXEC again). Return: 0 when the daemon was not
 * re-executed, 1 with *@ret filled, -ENOMEM, or -EINVAL/-EBADF with *@ret_error saying what was wrong.
 */
int reexec_state_take(ReexecState *ret, char **ret_error);
void reexec_state_done(ReexecState *s);

/*
 * manager_reexec() - after manager_run() returned with m->reexec: hand the listening sockets,
 * secrets and cgroups on, free the Manager (its children and units stop as at any exit), and
 * execute @argv again from the binary's path (or, failing that, the old image). Returns only on
 * failure, with -errno; *@mp is NULL then.
 */
int manager_reexec(Manager **mp, char *const argv[]);
