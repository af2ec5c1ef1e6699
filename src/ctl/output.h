/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Rendering the daemon's JSON answers for a terminal: pretty JSON or aligned "key: value" lines. */
#pragma once

#include <stdio.h>

#include <json-c/json.h>

/*
 * output_escape() - copy @s for a terminal: control characters (C0, DEL, UTF-8-encoded C1)
 * become "\n", "\t", "\xNN" escapes, so a server string cannot move the cursor or retitle the
 * terminal. Other bytes, including valid UTF-8, are kept.
 * Return: 0 or -ENOMEM.
 */
int output_escape(const char *s, char **ret);

/* output_escaped() - the same, returning the copy (NULL on OOM); NULL @s is taken as "". */
char *output_escaped(const char *s);

/*
 * output_json() - write @obj pretty-printed (two-space indent) and a newline to @f.
 * Return: 0, -ENOMEM, -EIO on a write error.
 */
int output_json(FILE *f, json_object *obj);

/*
 * output_flat() - write @obj as aligned "key: value" lines: nested objects become dotted keys
 * ("sandbox.usable: yes"), arrays of scalars a comma-separated list, arrays of objects indexed
 * keys ("running[0].executionId: ..."), booleans yes/no, null "-", empty containers "(none)",
 * "*Bytes" numbers get a binary-unit suffix, a top-level "uptimeSec" is shown as "uptime"
 * in days/hours/minutes/seconds. Strings are escaped as by output_escape().
 * @first: top-level keys to put first, in this order (NULL-terminated, may be NULL); the rest
 *   follow in the server's order.
 * Return: 0, -EINVAL if @obj is not an object, -ENOMEM, -EIO on a write error.
 */
int output_flat(FILE *f, json_object *obj, const char *const *first);
