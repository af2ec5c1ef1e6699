/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* NULL-terminated string arrays. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

size_t strv_length(char *const *l);
char **strv_free(char **l);
static inline void strv_freep(char ***l) {
        *l = strv_free(*l);
}
#define _cleanup_strv_free_ __attribute__((__cleanup__(strv_freep)))

/* STRV_FOREACH() - each string of the NULL-terminated list @l (which may be NULL). */
#define STRV_FOREACH(s, l) for (char **s = (l); s && *s; s++)
/* strv_extend() - append a copy of @value. Return: 0 or -ENOMEM. */
int strv_extend(char ***l, const char *value);
/* strv_contains() - whether @l (which may be NULL) holds a string equal to @s. */
bool strv_contains(char *const *l, const char *s);
/* strv_consume() - append @value, taking ownership (freed on failure). Return: 0 or -ENOMEM. */
int strv_consume(char ***l, char *value);
