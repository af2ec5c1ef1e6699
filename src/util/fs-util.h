/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Directories below a directory fd: the sorted names of a directory, mkdir-and-open, and the
 * removal of a tree that untrusted code wrote. Generic helpers: no policy, no logging; they
 * call only libc.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct DirNames {
        char **v;
        size_t n, alloc;
} DirNames;

/* dir_names_done() - free the names and reset @l to empty. */
void dir_names_done(DirNames *l);

/*
 * dir_read_names() - the names in the directory @dfd (not "." and ".."), sorted bytewise (read
 * through a file description of its own: @dfd's position is left alone). With @counter, each
 * name counts against @max, and going over it, or a name longer than 255 bytes, is -E2BIG.
 * Return: 0 or -errno.
 */
int dir_read_names(int dfd, uint64_t *counter, uint64_t max, DirNames *ret);

/*
 * mkdir_open() - create directory @name of @dfd (mode 0700) unless it exists, and open it
 * (O_DIRECTORY|O_NOFOLLOW). *@created is set to true if it was created, else left alone.
 * Return: the fd or -errno.
 */
int mkdir_open(int dfd, const char *name, bool *created);

/*
 * rm_rf_at() - remove directory @name of @parent_fd and everything below it, whatever the depth
 * (no recursion: two fds at most) and the permission bits (directories that deny their owner
 * access are chmod()ed first). Never follows a symlink. Subdirectories are moved up under
 * temporary names ".cas-rm-<n>" on the way. Must not run while something writes to the tree.
 * A missing @name is not an error. Return: 0 or -errno; -ENOTDIR @name is not a directory.
 */
int rm_rf_at(int parent_fd, const char *name);
