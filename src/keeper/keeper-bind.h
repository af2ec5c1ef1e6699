/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The late bind of a prebuilt sandbox (keeper-bind.c). */
#pragma once

#include <stdbool.h>

#include "exec-request.h"

/* keeper_bind() - mount @b's workspace (and code) into its sandbox, from a child of ours, and
 * wait for its word (not its exit: the keeper reaps it with the sandbox).
 * Return: 0 or -errno. */
int keeper_bind(const KeeperBind *b);
