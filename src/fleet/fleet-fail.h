/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the fleet's clients (etcd.c and etcd-json.c through etcd_answer_fail(), s3.c) share to fail an answer. */
#pragma once

#include <stdarg.h>
#include <stdlib.h>

#include "util/macro.h"
#include "util/string-util.h"

/*
 * fleet_fail() - an answer's failure: frees *@message, sets it from @format (malloc'ed) and points
 * *@result_message, the message its callback sees, at it (NULL when out of memory: the caller's
 * strerror() stands in). Return: @error, or -ENOMEM.
 */
static inline _printf_(4, 5) int fleet_fail(char **message, const char **result_message, int error,
                                           const char *format, ...) {
        va_list ap;
        int r;

        *message = mfree(*message);
        va_start(ap, format);
        r = set_messagev(message, error, format, ap);
        va_end(ap);
        *result_message = *message;
        return r;
}
