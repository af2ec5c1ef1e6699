/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* String helpers. */
#pragma once

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>

/*
 * str_escape_log() - a copy of @s safe to put in a log line: control characters, backslashes,
 * quotes and bytes ≥ 0x7f become \xNN; cut at @max input bytes with "..." appended.
 * Return: a new string or NULL on OOM.
 */
char *str_escape_log(const char *s, size_t max);

/* hex_encode() - the @n bytes at @p as 2*@n lowercase hex digits and a NUL, into @out. */
void hex_encode(const void *p, size_t n, char *out);

/* str_has_prefix_ci() - case-insensitive prefix check. */
bool str_has_prefix_ci(const char *s, const char *prefix);

#define DIGITS            "0123456789"
#define LOWERCASE_LETTERS "abcdefghijklmnopqrstuvwxyz"
#define UPPERCASE_LETTERS "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define ALPHANUMERICAL    LOWERCASE_LETTERS UPPERCASE_LETTERS DIGITS

/*
 * str_buf_append() - append the @n bytes at @p to the buffer *@data, which holds *@size bytes and a
 * NUL after them in *@allocated: it grows (doubling, to at most @max + 1 bytes) as needed, and
 * ends in a NUL again. Return: 0; -EFBIG if it would hold more than @max bytes (nothing is
 * appended); -ENOMEM.
 */
int str_buf_append(char **data, size_t *size, size_t *allocated, size_t max, const void *p, size_t n);

/*
 * str_token_valid() - whether @s (NULL: no) is 1..@max characters of @charset, the first one also
 * of @first_charset when that is not NULL: the shape of the names and ids that go into paths.
 */
bool str_token_valid(const char *s, size_t max, const char *first_charset, const char *charset);

/*
 * set_message() - *ret_message = the formatted text (the caller frees), for the functions that
 * say why they failed. Return: @error, or -ENOMEM (then *ret_message is NULL).
 */
int set_message(char **ret_message, int error, const char *fmt, ...) __attribute__((__format__(printf, 3, 4)));
int set_messagev(char **ret_message, int error, const char *fmt, va_list ap) __attribute__((__format__(printf, 3, 0)));

/* streq_ptr() - both strings are there and equal (NULL never equals anything, NULL included). */
static inline bool streq_ptr(const char *a, const char *b) {
        return a && b && __builtin_strcmp(a, b) == 0;
}
