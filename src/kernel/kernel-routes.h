/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where a kernel's replies go: the msg_id of each request a client sent, mapped to that client
 * (an opaque owner), so that the shell, control and stdin messages whose parent it is reach only
 * it. Bounded: past KERNEL_ROUTES_MAX the oldest route is forgotten. Pure (getrandom() for the
 * hash key only).
 */
#pragma once

#include <stddef.h>

#define KERNEL_ROUTES_MAX 16384U

typedef struct KernelRoutes KernelRoutes;

int kernel_routes_new(KernelRoutes **ret);
KernelRoutes *kernel_routes_free(KernelRoutes *r);

/* kernel_routes_add() - route @msg_id (copied) to @owner, replacing a route of the same id.
 * Return: 0 or -ENOMEM. */
int kernel_routes_add(KernelRoutes *r, const char *msg_id, void *owner);
/* kernel_routes_find() - the owner of @msg_id (NULL: none, or @msg_id NULL). */
void *kernel_routes_find(KernelRoutes *r, const char *msg_id);
/* kernel_routes_remove() - forget @msg_id (nothing if unknown). */
void kernel_routes_remove(KernelRoutes *r, const char *msg_id);
/* kernel_routes_drop_owner() - forget every route of @owner (a client that went away). */
void kernel_routes_drop_owner(KernelRoutes *r, void *owner);
size_t kernel_routes_size(const KernelRoutes *r);
