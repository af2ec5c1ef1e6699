/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/execution/replay.c: the executionId replay window, expiry, pruning and the entry cap. */

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "execution/replay.h"

#define WINDOW REPLAY_WINDOW_USEC_DEFAULT
#define T0 (UINT64_C(1000) * UINT64_C(1000000))        /* an arbitrary CLOCK_MONOTONIC start */

static void test_insert_and_duplicate(void **state) {
        ReplayTable *t = NULL;

        assert_int_equal(WINDOW, UINT64_C(60000000));
        assert_int_equal(replay_table_new(WINDOW, &t), 0);
        assert_int_equal(replay_table_size(t), 0);

        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0), 0);
        assert_int_equal(replay_table_size(t), 1);

        /* Within the window, at its start and at its very last microsecond. */
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0 + 1), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0 + WINDOW - 1), -EEXIST);
        assert_int_equal(replay_table_size(t), 1);

        /* Other ids are independent, including prefixes and extensions of it. */
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c", T0 + WINDOW - 1), 0);
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3x", T0 + WINDOW - 1), 0);
        assert_int_equal(replay_table_check_and_insert(t, "A1B2-C3", T0 + WINDOW - 1), 0);
        assert_int_equal(replay_table_size(t), 4);

        /* The window has passed: usable again, and remembered anew from now. */
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0 + WINDOW), 0);
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0 + WINDOW), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0 + 2 * WINDOW - 1), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "a1b2-c3", T0 + 2 * WINDOW), 0);

        assert_null(replay_table_free(t));
        assert_null(replay_table_free(NULL));
}

/* A refused retry does not push the window further out. */
static void test_retry_does_not_extend(void **state) {
        ReplayTable *t = NULL;

        assert_int_equal(replay_table_new(1000, &t), 0);
        assert_int_equal(replay_table_check_and_insert(t, "x", 0), 0);
        for (uint64_t now = 100; now < 1000; now += 100)
                assert_int_equal(replay_table_check_and_insert(t, "x", now), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "x", 1000), 0);
        replay_table_free(t);
}

static void test_many_ids(void **state) {
        ReplayTable *t = NULL;
        char id[REPLAY_ID_MAX + 1];
        const size_t n = 100000;

        assert_int_equal(replay_table_new(WINDOW, &t), 0);
        for (size_t i = 0; i < n; i++) {
                (void) snprintf(id, sizeof(id), "exec-%zu", i);
                assert_int_equal(replay_table_check_and_insert(t, id, T0 + i), 0);
        }
        assert_int_equal(replay_table_size(t), n);
        for (size_t i = 0; i < n; i += 7) {
                (void) snprintf(id, sizeof(id), "exec-%zu", i);
                assert_int_equal(replay_table_check_and_insert(t, id, T0 + n), -EEXIST);
        }
        for (size_t i = n; i < n + 1000; i++) {
                (void) snprintf(id, sizeof(id), "exec-%zu", i);
                assert_int_equal(replay_table_check_and_insert(t, id, T0 + n), 0);
        }
        assert_int_equal(replay_table_size(t), n + 1000);

        /* Everything expires; one insert prunes it all (and the table shrinks again). */
        assert_int_equal(replay_table_check_and_insert(t, "later", T0 + n + WINDOW), 0);
        assert_int_equal(replay_table_size(t), 1);
        for (size_t i = 0; i < n; i += 1000) {
                (void) snprintf(id, sizeof(id), "exec-%zu", i);
                assert_int_equal(replay_table_check_and_insert(t, id, T0 + n + WINDOW), 0);
        }
        assert_int_equal(replay_table_size(t), 1 + n / 1000);
        replay_table_free(t);
}

/* Pruning takes exactly the expired prefix, lazily, on insert. */
static void test_expiry_pruning(void **state) {
        ReplayTable *t = NULL;
        char id[32];

        assert_int_equal(replay_table_new(1000, &t), 0);
        for (uint64_t i = 0; i < 1000; i++) {
                (void) snprintf(id, sizeof(id), "id-%" PRIu64, i);
                assert_int_equal(replay_table_check_and_insert(t, id, i), 0);
        }
        assert_int_equal(replay_table_size(t), 1000);

        /* At 1500 the ids inserted at 0..500 (expiring at 1000..1500) are gone. */
        assert_int_equal(replay_table_check_and_insert(t, "new", 1500), 0);
        assert_int_equal(replay_table_size(t), 1000 - 501 + 1);
        assert_int_equal(replay_table_check_and_insert(t, "id-500", 1500), 0);
        assert_int_equal(replay_table_check_and_insert(t, "id-501", 1500), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "id-999", 1500), -EEXIST);
        assert_int_equal(replay_table_size(t), 1000 - 501 + 2);

        /* Expired entries count until the next insert prunes them. */
        assert_int_equal(replay_table_check_and_insert(t, "id-999", 1998), -EEXIST);
        assert_int_equal(replay_table_size(t), 3);      /* id-999 (1999), new and id-500 (2500) */
        assert_int_equal(replay_table_check_and_insert(t, "id-999", 1999), 0);
        assert_int_equal(replay_table_size(t), 3);      /* new, id-500, id-999 */
        assert_int_equal(replay_table_check_and_insert(t, "zzz", 10000000), 0);
        assert_int_equal(replay_table_size(t), 1);
        replay_table_free(t);
}

static void test_cap(void **state) {
        ReplayTable *t = NULL;
        char id[32];

        assert_int_equal(replay_table_new(1000, &t), 0);
        assert_int_equal(replay_table_set_max_entries(t, 0), -EINVAL);
        assert_int_equal(replay_table_set_max_entries(t, REPLAY_TABLE_MAX_ENTRIES + 1), -EINVAL);
        assert_int_equal(replay_table_set_max_entries(t, 10), 0);

        for (int i = 0; i < 10; i++) {
                (void) snprintf(id, sizeof(id), "cap-%d", i);
                assert_int_equal(replay_table_check_and_insert(t, id, (uint64_t) i), 0);
        }
        assert_int_equal(replay_table_check_and_insert(t, "one-more", 10), -ENOSPC);
        assert_int_equal(replay_table_size(t), 10);
        /* A known id is still a conflict, not "full". */
        assert_int_equal(replay_table_check_and_insert(t, "cap-3", 10), -EEXIST);

        /* Once the first one expires there is room for exactly one. */
        assert_int_equal(replay_table_check_and_insert(t, "one-more", 1000), 0);
        assert_int_equal(replay_table_check_and_insert(t, "two-more", 1000), -ENOSPC);
        assert_int_equal(replay_table_check_and_insert(t, "two-more", 1001), 0);
        assert_int_equal(replay_table_size(t), 10);
        replay_table_free(t);
}

/* The default cap is the documented one and is enforced. */
static void test_default_cap(void **state) {
        ReplayTable *t = NULL;
        char id[32];

        assert_int_equal(REPLAY_TABLE_MAX_ENTRIES, 1000000);
        assert_int_equal(replay_table_new(WINDOW, &t), 0);
        for (size_t i = 0; i < REPLAY_TABLE_MAX_ENTRIES; i++) {
                (void) snprintf(id, sizeof(id), "%zx", i);
                assert_int_equal(replay_table_check_and_insert(t, id, T0), 0);
        }
        assert_int_equal(replay_table_size(t), REPLAY_TABLE_MAX_ENTRIES);
        assert_int_equal(replay_table_check_and_insert(t, "full", T0 + 1), -ENOSPC);
        assert_int_equal(replay_table_check_and_insert(t, "0", T0 + 1), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "full", T0 + WINDOW), 0);
        assert_int_equal(replay_table_size(t), 1);
        replay_table_free(t);
}

static void test_id_length(void **state) {
        ReplayTable *t = NULL;
        char id[REPLAY_ID_MAX + 2];

        assert_int_equal(replay_table_new(WINDOW, &t), 0);
        assert_int_equal(replay_table_check_and_insert(t, "", T0), -EINVAL);

        memset(id, 'k', sizeof(id) - 1);
        id[REPLAY_ID_MAX + 1] = 0;                      /* 129 bytes */
        assert_int_equal(replay_table_check_and_insert(t, id, T0), -EINVAL);
        id[REPLAY_ID_MAX] = 0;                          /* 128 bytes */
        assert_int_equal(replay_table_check_and_insert(t, id, T0), 0);
        assert_int_equal(replay_table_check_and_insert(t, id, T0), -EEXIST);
        id[REPLAY_ID_MAX - 1] = 0;                      /* 127 bytes: a different id */
        assert_int_equal(replay_table_check_and_insert(t, id, T0), 0);
        assert_int_equal(replay_table_size(t), 2);
        replay_table_free(t);
}

/* Window 0: nothing is remembered. */
static void test_zero_window(void **state) {
        ReplayTable *t = NULL;

        assert_int_equal(replay_table_new(0, &t), 0);
        assert_int_equal(replay_table_check_and_insert(t, "x", T0), 0);
        assert_int_equal(replay_table_check_and_insert(t, "x", T0), 0);
        assert_int_equal(replay_table_size(t), 0);
        replay_table_free(t);
}

/* A clock value older than one seen before does not shorten or reorder anything; no overflow at the end of time. */
static void test_odd_clocks(void **state) {
        ReplayTable *t = NULL;

        assert_int_equal(replay_table_new(1000, &t), 0);
        assert_int_equal(replay_table_check_and_insert(t, "a", 5000), 0);
        assert_int_equal(replay_table_check_and_insert(t, "b", 100), 0);      /* treated as 5000 */
        assert_int_equal(replay_table_check_and_insert(t, "a", 5999), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "b", 5999), -EEXIST);
        assert_int_equal(replay_table_check_and_insert(t, "c", 6000), 0);
        assert_int_equal(replay_table_size(t), 1);
        replay_table_free(t);

        assert_int_equal(replay_table_new(WINDOW, &t), 0);
        assert_int_equal(replay_table_check_and_insert(t, "end", UINT64_MAX - 5), 0);
        assert_int_equal(replay_table_check_and_insert(t, "end", UINT64_MAX - 1), -EEXIST);
        replay_table_free(t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_insert_and_duplicate),
                cmocka_unit_test(test_retry_does_not_extend),
                cmocka_unit_test(test_many_ids),
                cmocka_unit_test(test_expiry_pruning),
                cmocka_unit_test(test_cap),
                cmocka_unit_test(test_default_cap),
                cmocka_unit_test(test_id_length),
                cmocka_unit_test(test_zero_window),
                cmocka_unit_test(test_odd_clocks),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
