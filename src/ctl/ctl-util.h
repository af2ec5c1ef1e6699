/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small generic macros the CLI needs beyond src/util/macro.h. */
#pragma once

#include <limits.h>
#include <stddef.h>

#include "util/macro.h"

#ifndef MIN
#define MIN(a, b) ({ typeof(a) _a = (a); typeof(b) _b = (b); _a < _b ? _a : _b; })
#endif
#ifndef MAX
#define MAX(a, b) ({ typeof(a) _a = (a); typeof(b) _b = (b); _a > _b ? _a : _b; })
#endif
#ifndef DIV_ROUND_UP
#define DIV_ROUND_UP(x, y) ({ typeof(x) _x = (x); typeof(y) _y = (y); (_x + _y - 1) / _y; })
#endif
#ifndef sizeof_field
#define sizeof_field(type, member) sizeof(((type *) 0)->member)
#endif

/* The exit codes of sandbox-runnerctl (sysexits.h where one fits). */
#define CTL_EXIT_FAILURE        1       /* the request failed: error answer, bad answer, local error */
#define CTL_EXIT_USAGE          2       /* bad command line */
#define CTL_EXIT_UNAVAILABLE    69      /* EX_UNAVAILABLE: the daemon could not be reached */
