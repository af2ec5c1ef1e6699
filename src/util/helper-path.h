/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where the daemon's helper binaries are (the keeper, the egress gateway, the in-sandbox bridge):
 * next to the running binary, in its build-tree subdirectory, or in libexecdir. Calls nothing of
 * the daemon.
 */
#pragma once

/*
 * find_helper() - the path of the helper binary @name: installed, all helpers live in libexecdir
 * next to the daemon; in a build tree, in the subdirectory @subdir of the daemon's directory.
 * Return: a new string, or NULL if there is none.
 */
char *find_helper(const char *subdir, const char *name);
