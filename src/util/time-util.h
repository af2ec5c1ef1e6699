/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The time now on a clock, in microseconds (as sd-event counts it). Header only: libc and util/macro.h. */
#pragma once

#include <stdint.h>
#include <time.h>

#include "util/macro.h"

static inline uint64_t now_usec(clockid_t clock) {
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}
