/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* json-c with the tree's cleanup attribute: _cleanup_(json_object_putp) json_object *o = NULL. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/macro.h"

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);

/* json_new_u64() - an unsigned count as a JSON number; past INT64_MAX (never, in practice) it is
 * clamped to INT64_MAX, as API.md's integers are signed 64-bit. */
/* json_get_string() - the string at @key of the object @o (NULL: none), or NULL when it is absent or
 * not a string. */
static inline const char *json_get_string(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static inline json_object *json_new_u64(uint64_t v) {
        return json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v);
}

/*
 * json_text_check_strict() - what json-c's strict mode still lets through, refused before it
 * parses @size bytes of @text: raw control characters inside strings (JSON allows them only as
 * whitespace between tokens; a NUL anywhere) and single-quoted strings or names. Follows string
 * boundaries only; the parsing itself is json-c's.
 * Return: 0, or -EBADMSG with a static reason in *@ret_why.
 */
int json_text_check_strict(const char *text, size_t size, const char **ret_why);

/*
 * json_write_file_atomic_at() - @o as text (json-c's @flags) and a final newline, written as
 * @name of @dfd with write_file_atomic_at(). Return: 0, -ENOMEM (also for a NULL @o) or -errno.
 */
int json_write_file_atomic_at(int dfd, const char *name, json_object *o, int flags, mode_t mode);

/*
 * json_parse_text() - the JSON document in the @size bytes of @text (NUL-terminated, as the read_file
 * helpers leave it), parsed by json-c's default tokener. Return: 0, or -EBADMSG for a NUL byte
 * inside the @size bytes or text that is not JSON.
 */
int json_parse_text(const char *text, size_t size, json_object **ret);

/*
 * json_parse_strict() - the one JSON document in the @len bytes of @text (at most INT_MAX),
 * parsed by json-c in strict mode with UTF-8 validation and at most @max_depth levels; only white
 * space may follow it. Callers that must refuse what strict mode lets through run
 * json_text_check_strict() first.
 * Return: 0; -ENOMEM; -EFBIG if @len is over INT_MAX; -EBADMSG with *@ret_error:
 * json_tokener_continue if the text ends inside the document, json_tokener_success if something
 * other than white space follows it, else json-c's error (json_tokener_error_desc() names it).
 */
int json_parse_strict(const char *text, size_t len, int max_depth, json_object **ret,
                      enum json_tokener_error *ret_error);

/* json_add() - add @v (consumed; NULL after an OOM counts as one) under @key. Return: 0 or -ENOMEM. */
int json_add(json_object *o, const char *key, json_object *v);

/* json_array_add() - append @v (consumed; NULL after an OOM counts as one) to @a. Return: 0 or -ENOMEM. */
int json_array_add(json_object *a, json_object *v);

/* json_strv_new() - a JSON array of the strings of @l (which may be NULL). Return: NULL on OOM. */
json_object *json_strv_new(char *const *l);

/* json_unsigned_array_new() - a JSON array of the @n numbers of @v (NULL if @n is 0). Return: NULL on OOM. */
json_object *json_unsigned_array_new(const unsigned *v, size_t n);
