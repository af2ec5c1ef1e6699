/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The executionId replay table: which ids were used within the replay window. */

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "execution/replay.h"
#include "util/hashmap.h"
#include "util/macro.h"
#include "util/siphash24.h"

/* Bucket counts are powers of two up to this (from HASHMAP_BUCKETS_MIN); it keeps the load at most
 * ~1 at the cap. */
#define REPLAY_BUCKETS_MAX ((size_t) 1 << 20)

typedef struct ReplayEntry ReplayEntry;
struct ReplayEntry {
        HashLink link;                  /* ReplayTable.map, by the id's SipHash */
        ReplayEntry *fifo_next;         /* the next younger entry */
        uint64_t expires_usec;
        size_t len;
        char id[];
};

struct ReplayTable {
        uint64_t window_usec;
        uint64_t last_now_usec;         /* the latest time seen, so that the FIFO stays sorted */
        uint8_t key[16];                /* SipHash key: clients cannot choose ids that share a bucket */
        HashMap map;                    /* ReplayEntry by id */
        size_t max_entries;
        ReplayEntry *fifo_oldest, *fifo_newest;
};

static void table_seed(ReplayTable *t) {
        static const uint8_t zero_key[16] = {};
        struct timespec mono = {}, real = {};
        uint64_t seed[4], k[2];

        if (getrandom(t->key, sizeof(t->key), GRND_NONBLOCK) == (ssize_t) sizeof(t->key))
                return;

        /*
         * Only before the kernel's pool is initialised (or without getrandom()). The key guards
         * against chosen collisions, not secrets, so a key nobody outside can predict to the
         * nanosecond is good enough there: it is never worse than an unkeyed hash.
         */
        (void) clock_gettime(CLOCK_MONOTONIC, &mono);
        (void) clock_gettime(CLOCK_REALTIME, &real);
        seed[0] = (uint64_t) mono.tv_sec * UINT64_C(1000000000) + (uint64_t) mono.tv_nsec;
        seed[1] = (uint64_t) real.tv_sec * UINT64_C(1000000000) + (uint64_t) real.tv_nsec;
        seed[2] = (uint64_t) getpid();
        seed[3] = (uint64_t) (uintptr_t) t;
        k[0] = siphash24(seed, sizeof(seed), zero_key);
        seed[0] ^= k[0];
        k[1] = siphash24(seed, sizeof(seed), zero_key);
        memcpy(t->key, k, sizeof(t->key));
}

int replay_table_new(uint64_t window_usec, ReplayTable **ret) {
        _cleanup_(replay_table_freep) ReplayTable *t = NULL;

        assert(ret);

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        *t = (ReplayTable) {
                .window_usec = window_usec,
                .max_entries = REPLAY_TABLE_MAX_ENTRIES,
        };

        if (hashmap_init(&t->map, HASHMAP_BUCKETS_MIN, REPLAY_BUCKETS_MAX) < 0)
                return -ENOMEM;
        table_seed(t);

        *ret = STEAL(t);
        return 0;
}

ReplayTable *replay_table_free(ReplayTable *t) {
        if (!t)
                return NULL;

        for (ReplayEntry *e = t->fifo_oldest, *next; e; e = next) {
                next = e->fifo_next;
                free(e);
        }
        hashmap_done(&t->map);
        free(t);
        return NULL;
}

int replay_table_set_max_entries(ReplayTable *t, size_t max) {
        assert(t);

        if (max == 0 || max > REPLAY_TABLE_MAX_ENTRIES)
                return -EINVAL;
        t->max_entries = max;
        return 0;
}

size_t replay_table_size(const ReplayTable *t) {
        assert(t);
        return hashmap_size(&t->map);
}

/* Drop every entry whose window ended at or before @now_usec: a prefix of the FIFO. */
static void table_prune(ReplayTable *t, uint64_t now_usec) {
        bool pruned = false;

        while (t->fifo_oldest && t->fifo_oldest->expires_usec <= now_usec) {
                ReplayEntry *e = t->fifo_oldest;

                t->fifo_oldest = e->fifo_next;
                if (!t->fifo_oldest)
                        t->fifo_newest = NULL;
                hashmap_remove(&t->map, &e->link);
                free(e);
                pruned = true;
        }

        /* Give memory back after a burst. */
        if (pruned)
                hashmap_shrink(&t->map);
}

int replay_table_check_and_insert(ReplayTable *t, const char *id, uint64_t now_usec) {
        ReplayEntry *e;
        uint64_t h;
        size_t len;

        assert(t);
        assert(id);

        len = strnlen(id, REPLAY_ID_MAX + 1);
        if (len == 0 || len > REPLAY_ID_MAX)
                return -EINVAL;

        /* All entries share one window, so the FIFO is sorted by expiry as long as time does
         * not go backwards; CLOCK_MONOTONIC does not, but do not rely on the caller for that. */
        now_usec = MAX(now_usec, t->last_now_usec);
        t->last_now_usec = now_usec;

        table_prune(t, now_usec);

        h = siphash24(id, len, t->key);
        HASHMAP_FOREACH_HASH(l, &t->map, h) {
                e = hashmap_entry(l, ReplayEntry, link);
                if (e->len == len && memcmp(e->id, id, len) == 0)
                        return -EEXIST;
        }

        if (t->window_usec == 0)
                return 0;               /* nothing is remembered */
        if (hashmap_size(&t->map) >= t->max_entries)
                return -ENOSPC;

        e = malloc(sizeof(ReplayEntry) + len + 1);
        if (!e)
                return -ENOMEM;
        *e = (ReplayEntry) {
                .expires_usec = now_usec > UINT64_MAX - t->window_usec ? UINT64_MAX
                                                                        : now_usec + t->window_usec,
                .len = len,
        };
        memcpy(e->id, id, len);
        e->id[len] = 0;

        (void) hashmap_add(&t->map, &e->link, h);       /* cannot fail: the buckets exist */
        if (t->fifo_newest)
                t->fifo_newest->fifo_next = e;
        else
                t->fifo_oldest = e;
        t->fifo_newest = e;
        return 0;
}
