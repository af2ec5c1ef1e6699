/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Dropping every capability the daemon was started with. */
#pragma once

/*
 * caps_drop_all() - clear the effective, permitted, inheritable and ambient sets and, where
 * CAP_SETPCAP allows, the bounding set. bwrap needs none of them: it makes unprivileged user
 * namespaces. Return: 0 or -errno.
 */
int caps_drop_all(void);
