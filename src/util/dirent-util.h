/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Walking a directory by fd: opening a DIR stream on an fd or on a name below one (each walk with
 * its own file offset, so it starts at the first entry), and reading it past "." and "..". Owns
 * nothing beyond the DIR streams it returns; calls nothing but libc.
 */
#pragma once

#include <dirent.h>

#include "util/macro.h"

SR_DEFINE_FREE_FUNC(DIR *, closedir);

/* opendir_fd() - a DIR stream on the directory @fd, which it takes over (closed on failure too). Return: 0 or -errno. */
int opendir_fd(int fd, DIR **ret);

/*
 * opendir_at() - a DIR stream on @path below @dfd ("." for @dfd itself) with an open file
 * description of its own: reading it moves no other fd's offset. Return: 0 or -errno.
 */
int opendir_at(int dfd, const char *path, DIR **ret);

/* readdir_no_dot() - the next entry other than "." and "..". Return: 1 with *@ret set, 0 at the end, or -errno. */
int readdir_no_dot(DIR *d, struct dirent **ret);

/*
 * FOREACH_DIRENT() - every entry of @d but "." and "..". A read error ends the loop as the end
 * would: for best-effort walks only; the others loop on readdir_no_dot().
 */
#define FOREACH_DIRENT(de, d) for (struct dirent *de; readdir_no_dot((d), &de) > 0;)
