/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-workspace directories under the state directory, and their write lease. */
#pragma once

#include <stdbool.h>

/* workspace_id_valid() - 1–128 chars of [A-Za-z0-9._-], not starting with '.' (also execution ids). */
bool workspace_id_valid(const char *id);

/*
 * workspace_open() - open (creating 0700 if needed) the workspace @id below the directory @root_fd.
 * Never follows a symlink at the last component. Return: an O_DIRECTORY fd, -EINVAL for a bad
 * id, -ENOTDIR if the name exists but is not a directory, other -errno.
 */
int workspace_open(int root_fd, const char *id);

/*
 * workspace_lease_try() - take the write lease of the workspace open at @dir_fd: an exclusive
 * flock() on its own directory inode, so it serialises writers across processes and across
 * any name the directory is reached by. Non-blocking.
 * Return: a new fd holding the lease (close it to release), -EWOULDBLOCK if held elsewhere.
 */
int workspace_lease_try(int dir_fd);
