/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Dropping every capability the daemon was started with. */
#pragma once

#include <stdbool.h>

/*
 * caps_drop_all() - clear the effective, permitted, inheritable and ambient sets and, where
 * CAP_SETPCAP allows, the bounding set. bwrap needs none of them: it makes unprivileged user
 * namespaces (and no payload runs as uid 0: a root-started daemon becomes its user first, see
 * privileges.h). Return: 0 or -errno.
 */
int caps_drop_all(void);

/* caps_drop_bounding() - empty the bounding set only (needs CAP_SETPCAP). Return: 0 or -errno. */
int caps_drop_bounding(void);
