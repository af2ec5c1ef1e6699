/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who is on the other end of a gateway connection: the execution whose scope holds the peer. */
#pragma once

#include <sys/types.h>

/*
 * peer_execution_id_from_cgroup() - find the "sandbox-runner-x-<id>.scope" component in the text of
 * a /proc/PID/cgroup file (any hierarchy, any depth) and return <id>. Only ids made of unit-name
 * characters are taken. Pure. Return: 0 with a new string, -ENOENT if there is none, -ENOMEM.
 */
int peer_execution_id_from_cgroup(const char *text, char **ret);

/*
 * peer_execution_id() - the execution id of the process that connected @fd (SO_PEERCRED pid →
 * /proc/<pid>/cgroup). cgroup membership cannot be changed from inside a sandbox, so this is
 * trustworthy as long as the pid was not recycled in between (it only labels log entries).
 * Return: 0 with a new string ("unknown" when the peer is in no execution scope), or -ENOMEM.
 */
int peer_execution_id(int fd, char **ret);
