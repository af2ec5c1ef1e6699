/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/util/hashmap.c: insert, lookup, remove, growth, shrinking, the cap, collisions. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/hashmap.h"
#include "util/siphash24.h"

typedef struct Item {
        unsigned tag;                   /* something before the link: hashmap_entry() must subtract */
        HashLink link;
        unsigned key;
        bool drained;
} Item;

static const uint64_t sip_key[2] = { UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210) };

static uint64_t good_hash(unsigned key) {
        return siphash24_tweak(&key, sizeof(key), sip_key, 0);
}

/* Every key in one of 2 chains: lookups must still compare keys, not trust the hash. */
static uint64_t bad_hash(unsigned key) {
        return key & 1;
}

static Item *find(const HashMap *h, unsigned key, uint64_t (*hash)(unsigned)) {
        HASHMAP_FOREACH_HASH(l, h, hash(key)) {
                Item *i = hashmap_entry(l, Item, link);

                if (i->key == key)
                        return i;
        }
        return NULL;
}

static Item *items_new(size_t n) {
        Item *v = calloc(n, sizeof(*v));

        assert_non_null(v);
        for (size_t i = 0; i < n; i++)
                v[i] = (Item) { .tag = 0xdeadbeef, .key = (unsigned) i * 7 + 3 };
        return v;
}

static void check(HashMap *h, uint64_t (*hash)(unsigned)) {
        const size_t n = 5000;
        Item *v = items_new(n);

        /* Insert, and find each one right away and at the end. */
        for (size_t i = 0; i < n; i++) {
                assert_null(find(h, v[i].key, hash));
                assert_int_equal(hashmap_add(h, &v[i].link, hash(v[i].key)), 0);
                assert_ptr_equal(find(h, v[i].key, hash), &v[i]);
                assert_int_equal(hashmap_size(h), i + 1);
        }
        for (size_t i = 0; i < n; i++)
                assert_ptr_equal(find(h, v[i].key, hash), &v[i]);
        assert_null(find(h, 1, hash));          /* keys are 3 mod 7 */
        assert_null(find(h, 2, hash));

        /* Remove every other one: the rest stay findable. */
        for (size_t i = 0; i < n; i += 2)
                hashmap_remove(h, &v[i].link);
        assert_int_equal(hashmap_size(h), n / 2);
        for (size_t i = 0; i < n; i++) {
                if (i % 2 == 0)
                        assert_null(find(h, v[i].key, hash));
                else
                        assert_ptr_equal(find(h, v[i].key, hash), &v[i]);
        }

        /* Re-insert one removed. */
        assert_int_equal(hashmap_add(h, &v[0].link, hash(v[0].key)), 0);
        assert_ptr_equal(find(h, v[0].key, hash), &v[0]);

        hashmap_done(h);
        assert_int_equal(hashmap_size(h), 0);
        assert_int_equal(hashmap_buckets(h), 0);
        assert_null(find(h, v[1].key, hash));
        free(v);
}

static void test_basic(void **state) {
        HashMap h = {};

        assert_int_equal(hashmap_buckets(&h), 0);
        assert_null(find(&h, 3, good_hash));    /* an empty table has no buckets to look at */
        check(&h, good_hash);
}

static void test_collisions(void **state) {
        HashMap h = {};

        check(&h, bad_hash);
}

/* Doubling once there are more records than buckets, from HASHMAP_BUCKETS_MIN. */
static void test_growth(void **state) {
        HashMap h = {};
        Item *v = items_new(1000);

        for (size_t i = 0; i < 1000; i++) {
                assert_int_equal(hashmap_add(&h, &v[i].link, good_hash(v[i].key)), 0);
                if (i + 1 <= HASHMAP_BUCKETS_MIN)
                        assert_int_equal(hashmap_buckets(&h), HASHMAP_BUCKETS_MIN);
                assert_true(hashmap_size(&h) <= hashmap_buckets(&h));
                assert_true(hashmap_buckets(&h) < 2 * hashmap_size(&h) || hashmap_buckets(&h) == HASHMAP_BUCKETS_MIN);
        }
        assert_int_equal(hashmap_buckets(&h), 1024);

        /* Removals alone never shrink. */
        for (size_t i = 0; i < 990; i++)
                hashmap_remove(&h, &v[i].link);
        assert_int_equal(hashmap_buckets(&h), 1024);

        /* hashmap_shrink(): down to two buckets per record, at least HASHMAP_BUCKETS_MIN. */
        hashmap_shrink(&h);
        assert_int_equal(hashmap_buckets(&h), HASHMAP_BUCKETS_MIN);
        for (size_t i = 990; i < 1000; i++)
                assert_ptr_equal(find(&h, v[i].key, good_hash), &v[i]);
        hashmap_done(&h);
        free(v);
}

static void test_shrink_gap(void **state) {
        HashMap h = {};
        Item *v = items_new(2000);

        for (size_t i = 0; i < 2000; i++)
                assert_int_equal(hashmap_add(&h, &v[i].link, good_hash(v[i].key)), 0);
        assert_int_equal(hashmap_buckets(&h), 2048);

        /* 256 of 2048: not below one per 8 buckets, kept. */
        for (size_t i = 0; i < 2000 - 256; i++)
                hashmap_remove(&h, &v[i].link);
        hashmap_shrink(&h);
        assert_int_equal(hashmap_buckets(&h), 2048);

        /* 255: down to 512 (the fewest for two per record). */
        hashmap_remove(&h, &v[2000 - 256].link);
        hashmap_shrink(&h);
        assert_int_equal(hashmap_buckets(&h), 512);
        for (size_t i = 2000 - 255; i < 2000; i++)
                assert_ptr_equal(find(&h, v[i].key, good_hash), &v[i]);
        hashmap_done(&h);
        free(v);
}

/* With a cap, the table stops doubling and chains get longer; everything still found. */
static void test_cap(void **state) {
        HashMap h;
        Item *v = items_new(1000);

        assert_int_equal(hashmap_init(&h, HASHMAP_BUCKETS_MIN, 128), 0);
        assert_int_equal(hashmap_buckets(&h), HASHMAP_BUCKETS_MIN);
        for (size_t i = 0; i < 1000; i++)
                assert_int_equal(hashmap_add(&h, &v[i].link, good_hash(v[i].key)), 0);
        assert_int_equal(hashmap_buckets(&h), 128);
        for (size_t i = 0; i < 1000; i++)
                assert_ptr_equal(find(&h, v[i].key, good_hash), &v[i]);
        hashmap_done(&h);
        assert_int_equal(h.max_buckets, 128);
        free(v);
}

static void mark_drained(HashLink *l) {
        Item *i = hashmap_entry(l, Item, link);

        assert_int_equal(i->tag, 0xdeadbeef);
        assert_false(i->drained);
        i->drained = true;
}

static void test_drain(void **state) {
        HashMap h = {};
        Item *v = items_new(300);

        for (size_t i = 0; i < 300; i++)
                assert_int_equal(hashmap_add(&h, &v[i].link, bad_hash(v[i].key)), 0);
        hashmap_drain(&h, mark_drained);
        assert_int_equal(hashmap_size(&h), 0);
        assert_int_equal(hashmap_buckets(&h), 0);
        for (size_t i = 0; i < 300; i++)
                assert_true(v[i].drained);
        free(v);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_basic),
                cmocka_unit_test(test_collisions),
                cmocka_unit_test(test_growth),
                cmocka_unit_test(test_shrink_gap),
                cmocka_unit_test(test_cap),
                cmocka_unit_test(test_drain),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
