/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The limits of one execution and what was measured of it: the same for a transient scope
 * (scope.h) and for a cgroup of the daemon's own (cgroup.h), which both use them. Types only.
 */
#pragma once

#include <stdint.h>

typedef struct ScopeLimits {
        uint64_t memory_max;            /* 0 = none */
        uint64_t tasks_max;             /* 0 = none */
        unsigned cpu_quota_percent;     /* 0 = none */
} ScopeLimits;

typedef struct ScopeAccounting {
        uint64_t memory_peak;           /* UINT64_MAX = unknown */
        uint64_t cpu_usage_nsec;        /* UINT64_MAX = unknown */
        uint64_t tasks_peak;            /* UINT64_MAX = unknown */
        uint64_t oom_kills;             /* kills by the memory limit */
        uint64_t tasks_max_hits;        /* fork()s refused by the tasks limit */
        uint64_t memory_max_hits;       /* times the memory limit was reached (reclaim, then OOM) */
} ScopeAccounting;
