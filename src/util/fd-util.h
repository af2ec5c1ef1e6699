/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* File-descriptor helpers. */
#pragma once

#include <stddef.h>

/*
 * memfd_new_data() - a sealed, read-only-content memfd holding @data, positioned at 0.
 * Return: the fd or -errno.
 */
int memfd_new_data(const char *name, const void *data, size_t size);

/* fd_nonblock() - set or clear O_NONBLOCK. Return: 0 or -errno. */
int fd_nonblock(int fd, int nonblock);

/* fd_cloexec() - set or clear FD_CLOEXEC. Return: 0 or -errno. */
int fd_cloexec(int fd, int cloexec);
