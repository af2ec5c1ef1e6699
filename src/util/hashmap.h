/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An intrusive chained hash table: the caller embeds a HashLink in its own records and supplies the
 * 64-bit hash (a keyed one, util/siphash24.h, where keys come from outside); lookups walk the one
 * chain of that hash and compare their own keys, inline, with no call per probe. The table owns
 * only its bucket array, never the records. Bucket counts are powers of two, from
 * HASHMAP_BUCKETS_MIN; the table doubles once it holds more records than buckets (up to a cap, if
 * set), and shrinks only when asked (hashmap_shrink()). Calls nothing but libc.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define HASHMAP_BUCKETS_MIN ((size_t) 64)

typedef struct HashLink {
        struct HashLink *next;
        uint64_t hash;
} HashLink;

/* All zero is an empty table (its buckets come with the first record). */
typedef struct HashMap {
        HashLink **buckets;
        size_t mask;                    /* number of buckets - 1 */
        size_t n;                       /* records linked */
        size_t max_buckets;             /* growth stops here (a power of two); 0: no cap */
} HashMap;

/* hashmap_entry() - the record that embeds @link as @member. */
#define hashmap_entry(link, type, member) ((type *) ((char *) (link) - offsetof(type, member)))

/*
 * hashmap_init() - an empty table with @n_buckets buckets (a power of two, at least
 * HASHMAP_BUCKETS_MIN) allocated now, growing up to @max_buckets (0: no cap).
 * Return: 0 or -ENOMEM.
 */
int hashmap_init(HashMap *h, size_t n_buckets, size_t max_buckets);

/* hashmap_done() - free the buckets (not the records) and leave an empty table, cap kept. */
void hashmap_done(HashMap *h);

/*
 * hashmap_add() - link @l under @hash. Keys are the caller's: it checks for an equal record
 * first if it must. Growing is best effort (on OOM chains only get longer).
 * Return: 0, or -ENOMEM when the table has no buckets yet and none can be allocated.
 */
int hashmap_add(HashMap *h, HashLink *l, uint64_t hash);

/* hashmap_remove() - unlink @l, which must be linked in @h. */
void hashmap_remove(HashMap *h, HashLink *l);

/*
 * hashmap_shrink() - after removals: when fewer than one record per 8 buckets is left, go down to
 * the fewest buckets (at least HASHMAP_BUCKETS_MIN) for two per record. Best effort.
 */
void hashmap_shrink(HashMap *h);

/* hashmap_drain() - unlink every record, calling @fn on each (which may free it), then hashmap_done(). */
void hashmap_drain(HashMap *h, void (*fn)(HashLink *l));

static inline size_t hashmap_size(const HashMap *h) {
        return h->n;
}

static inline size_t hashmap_buckets(const HashMap *h) {
        return h->buckets ? h->mask + 1 : 0;
}

/* The first link from @l on with hash @hash. */
static inline HashLink *hashmap_skip_(HashLink *l, uint64_t hash) {
        while (l && l->hash != hash)
                l = l->next;
        return l;
}

static inline HashLink *hashmap_first_(const HashMap *h, uint64_t hash) {
        return h->buckets ? hashmap_skip_(h->buckets[hash & h->mask], hash) : NULL;
}

/* HASHMAP_FOREACH_HASH() - every link of @h with exactly @hash (the caller then compares keys). */
#define HASHMAP_FOREACH_HASH(l, h, hash)                                        \
        for (HashLink *l = hashmap_first_((h), (hash)); l; l = hashmap_skip_(l->next, (hash)))
