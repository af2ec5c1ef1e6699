/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 validation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* utf8_valid() - strict UTF-8 (RFC 3629): no overlong forms, no surrogates, ≤ U+10FFFF. */
bool utf8_valid(const char *s, size_t n);
