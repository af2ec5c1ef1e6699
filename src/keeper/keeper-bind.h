/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The late bind of a prebuilt sandbox (keeper-bind.c). */
#pragma once

#include <stdbool.h>

#include "exec-request.h"

/* keeper_bind_prepare() - @p (KEEPER_BIND_PREPARE_MAGIC): fork the bind's child now, which opens
 * the sandbox's namespaces and mount points, joins its user namespace, makes its own mount
 * namespace and then waits for the bind (what a bind costs most, off the request path).
 * Return: 0 or -errno (the bind then forks its child when it comes). */
int keeper_bind_prepare(const KeeperBind *p);
/* keeper_bind() - mount @b's workspace (and code) into its sandbox, from the child prepared for it
 * (if it is for that pid 1 and shape) or a new child of ours, and wait for its word (not its exit:
 * the keeper reaps it with the sandbox). Return: 0 or -errno. */
int keeper_bind(const KeeperBind *b);
/* keeper_bind_abandon() - a prepared child that will not be used: killed (before a wait for all). */
void keeper_bind_abandon(void);
