/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What npu-workload.c shares with npu-workload-expand.c: strict JSON and the reasons of refusals. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/macro.h"

/*
 * npu_json_parse() - one JSON object from @len bytes of @text: json-c's strict mode with UTF-8
 * validation, nesting at most @max_depth, nothing but whitespace after it. @what names the text
 * in reasons ("the allowlist", "configPath").
 * Return: 0 with *@ret, -EBADMSG with a reason, -ENOMEM.
 */
int npu_json_parse(const char *text, size_t len, int max_depth, const char *what, json_object **ret,
                   char **ret_why);

/* npu_string_clean() - @s holds no control character (U+0000-U+001F, U+007F). */
bool npu_string_clean(const char *s);

/*
 * npu_refuse() - *@ret_why = the formatted reason (if @ret_why is not NULL).
 * Return: @error, or -ENOMEM when the reason could not be allocated.
 */
int npu_refuse(char **ret_why, int error, const char *fmt, ...) _printf_(3, 4);
