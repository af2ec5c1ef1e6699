/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Enum ↔ name lookups over a table of names indexed by the enum, systemd style: a module writes
 * its table `static const char *const NAME_table[_X_MAX] = { … }` and then
 * DEFINE_STRING_TABLE_LOOKUP(NAME, Type) (or one half of it) to get NAME_to_string() and
 * NAME_from_string(). Header only, libc only (it may be used by any binary of the tree); it calls
 * nothing but util/macro.h.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/macro.h"

/* string_table_lookup_to_string() - @table[@i], or NULL when @i is outside the table. */
static inline const char *string_table_lookup_to_string(const char *const *table, size_t len, ssize_t i) {
        if (i < 0 || (size_t) i >= len)
                return NULL;
        return table[i];
}

/* string_table_lookup_from_string() - the index of @key in @table. Return: index or -EINVAL. */
static inline ssize_t string_table_lookup_from_string(const char *const *table, size_t len,
                                                      const char *key) {
        if (!key)
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (table[i] && streq(table[i], key))
                        return (ssize_t) i;
        return -EINVAL;
}

#define DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)                                        \
        const char *name##_to_string(type i) {                                                  \
                return string_table_lookup_to_string(name##_table, ELEMENTSOF(name##_table), i); \
        }

#define DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)                                      \
        type name##_from_string(const char *s) {                                                \
                return (type) string_table_lookup_from_string(name##_table, ELEMENTSOF(name##_table), s); \
        }

#define DEFINE_STRING_TABLE_LOOKUP(name, type)                  \
        DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)        \
        DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)
