/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Dropping every capability the daemon was started with. */
#pragma once

#include <stdbool.h>

/*
 * caps_drop_all() - clear the effective, permitted, inheritable and ambient sets and, where
 * CAP_SETPCAP allows, the bounding set. bwrap needs none of them: it makes unprivileged user
 * namespaces. With @keep_setfcap_bound, CAP_SETFCAP stays in the bounding set only: a daemon
 * running as uid 0 needs it for bwrap to map uid 0 into a user namespace (Linux ≥ 5.12), and
 * bwrap, executed as uid 0, regains exactly the bounding set. Return: 0 or -errno.
 */
int caps_drop_all(bool keep_setfcap_bound);

/* caps_drop_bounding() - empty the bounding set only (needs CAP_SETPCAP). Return: 0 or -errno. */
int caps_drop_bounding(void);
