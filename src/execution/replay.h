/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The executionId replay table: which ids were used within the replay window. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * A set of ids, each remembered for the same window after its first use (API.md: a reused
 * executionId within 60 s is 409). A hash table with chaining, keyed with a random SipHash key
 * per table so that chosen ids cannot make chains long, plus a FIFO in insertion order: all
 * entries share one window, so the oldest entry always expires first and pruning is a walk from
 * the front. Every operation is O(1) on average (pruning amortised: each entry is freed once).
 * Memory is bounded by the entry cap.
 *
 * The table only covers the window. An id whose run is still known to the daemon (running
 * longer than the window, or recorded) must be refused by the caller as well.
 */
typedef struct ReplayTable ReplayTable;

#define REPLAY_WINDOW_USEC_DEFAULT (UINT64_C(60) * UINT64_C(1000000))
#define REPLAY_ID_MAX 128                       /* bytes, without the NUL */
#define REPLAY_TABLE_MAX_ENTRIES ((size_t) 1000000)

/*
 * replay_table_new() - an empty table.
 * @window_usec: how long an id is remembered after its first use; 0 remembers nothing.
 * The hash key comes from getrandom() (time-based only before the kernel's pool is ready).
 * Return: 0 or -ENOMEM.
 */
int replay_table_new(uint64_t window_usec, ReplayTable **ret);

/* replay_table_free() - accepts NULL. Return: NULL. */
ReplayTable *replay_table_free(ReplayTable *t);
static inline void replay_table_freep(ReplayTable **t) {
        *t = replay_table_free(*t);
}

/*
 * replay_table_set_max_entries() - lower the cap on remembered ids (default and maximum
 * REPLAY_TABLE_MAX_ENTRIES). Entries already held stay; inserts fail until enough expire.
 * Return: 0, or -EINVAL if @max is 0 or above REPLAY_TABLE_MAX_ENTRIES.
 */
int replay_table_set_max_entries(ReplayTable *t, size_t max);

/*
 * replay_table_check_and_insert() - refuse an id seen within the window, else remember it until
 * @now_usec + window. First prunes every entry whose window ended at or before @now_usec.
 * A refused id keeps its original expiry (retries do not extend the window).
 * @id: 1–REPLAY_ID_MAX bytes (the caller validated the character set).
 * @now_usec: CLOCK_MONOTONIC. A value older than one seen before is treated as that one.
 * Return: 0 (inserted), -EEXIST (seen within the window), -ENOSPC (the table holds the maximum
 * number of unexpired ids: the caller should answer "busy", not "conflict"), -EINVAL (@id empty
 * or longer than REPLAY_ID_MAX), -ENOMEM.
 */
int replay_table_check_and_insert(ReplayTable *t, const char *id, uint64_t now_usec);

/*
 * replay_table_size() - ids held: those inserted and not yet pruned. Pruning happens lazily in
 * replay_table_check_and_insert(), so expired ids count until the next insert.
 */
size_t replay_table_size(const ReplayTable *t);
