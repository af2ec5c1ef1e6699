/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private to the workspace file API (ws-path.c, ws-files.c, ws-writer.c): what one part calls in
 * another. Nothing outside these three files includes this; the public API is ws-files.h, whose
 * conventions (0 or -errno, the common errnos listed there) these functions follow.
 */
#pragma once

/* ws_path_split() - validate the non-empty @path (ws_path_validate()) and split it at its last
 * '/': *ret_parent is "" for a top-level name, *ret_name points into @path.
 * Return: 0, what ws_path_validate() refuses @path with, or -ENOMEM. */
int ws_path_split(const char *path, char **ret_parent, const char **ret_name);

/* ws_files_test_flags() - the WS_TEST_* flags ws_files_test_set() set last (0 in the daemon). */
unsigned ws_files_test_flags(void);
