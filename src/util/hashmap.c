/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The intrusive chained hash table of util/hashmap.h: growth, shrinking and unlinking. Owns the
 * bucket array only. Calls nothing but libc.
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "util/hashmap.h"

/* Rebuild the chains for @nb buckets (a power of two). Best effort: on OOM keep the old ones. */
static int hashmap_rehash(HashMap *h, size_t nb) {
        HashLink **b;

        assert(nb >= HASHMAP_BUCKETS_MIN && (nb & (nb - 1)) == 0);

        if (h->buckets && nb == h->mask + 1)
                return 0;
        b = calloc(nb, sizeof(*b));
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; h->buckets && i <= h->mask; i++)
                for (HashLink *x = h->buckets[i], *next; x; x = next) {
                        next = x->next;
                        x->next = b[x->hash & (nb - 1)];
                        b[x->hash & (nb - 1)] = x;
                }
        free(h->buckets);
        h->buckets = b;
        h->mask = nb - 1;
        return 0;
}

int hashmap_init(HashMap *h, size_t n_buckets, size_t max_buckets) {
        assert(h);
        assert(max_buckets == 0 || (max_buckets >= n_buckets && (max_buckets & (max_buckets - 1)) == 0));

        *h = (HashMap) { .max_buckets = max_buckets };
        return hashmap_rehash(h, n_buckets);
}

void hashmap_done(HashMap *h) {
        free(h->buckets);
        *h = (HashMap) { .max_buckets = h->max_buckets };
}

int hashmap_add(HashMap *h, HashLink *l, uint64_t hash) {
        assert(h);
        assert(l);

        if (!h->buckets) {
                if (hashmap_rehash(h, HASHMAP_BUCKETS_MIN) < 0)
                        return -ENOMEM;
        } else if (h->n > h->mask && (h->max_buckets == 0 || h->mask + 1 < h->max_buckets))
                (void) hashmap_rehash(h, (h->mask + 1) * 2);       /* else longer chains, still correct */

        l->hash = hash;
        l->next = h->buckets[hash & h->mask];
        h->buckets[hash & h->mask] = l;
        h->n++;
        return 0;
}

void hashmap_remove(HashMap *h, HashLink *l) {
        assert(h && h->buckets);
        assert(l);

        for (HashLink **p = &h->buckets[l->hash & h->mask]; *p; p = &(*p)->next)
                if (*p == l) {
                        *p = l->next;
                        l->next = NULL;
                        h->n--;
                        return;
                }
        assert(!"hashmap_remove: not linked");
}

void hashmap_shrink(HashMap *h) {
        size_t nb;

        assert(h);

        /* The gap to the growth threshold (one per bucket) avoids flapping. */
        if (!h->buckets || h->mask + 1 <= HASHMAP_BUCKETS_MIN || h->n >= (h->mask + 1) / 8)
                return;
        for (nb = HASHMAP_BUCKETS_MIN; nb < h->n * 2; nb *= 2)
                ;
        (void) hashmap_rehash(h, nb);
}

void hashmap_drain(HashMap *h, void (*fn)(HashLink *l)) {
        assert(h);

        for (size_t i = 0; h->buckets && i <= h->mask; i++)
                for (HashLink *x = h->buckets[i], *next; x; x = next) {
                        next = x->next;
                        x->next = NULL;
                        fn(x);
                }
        hashmap_done(h);
}
