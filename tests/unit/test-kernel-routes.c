/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/kernel/kernel-routes.c: replies routed by msg_id to their client, replaced,
 * removed, dropped with their client, bounded by KERNEL_ROUTES_MAX (the oldest forgotten). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kernel/kernel-routes.h"

static int a, b;

static void test_add_find_remove(void **state) {
        KernelRoutes *r = NULL;

        assert_int_equal(kernel_routes_new(&r), 0);
        assert_null(kernel_routes_find(r, "m1"));
        assert_null(kernel_routes_find(r, NULL));
        assert_int_equal(kernel_routes_add(r, "m1", &a), 0);
        assert_int_equal(kernel_routes_add(r, "m2", &b), 0);
        assert_ptr_equal(kernel_routes_find(r, "m1"), &a);
        assert_ptr_equal(kernel_routes_find(r, "m2"), &b);
        assert_null(kernel_routes_find(r, "m3"));
        /* the same id again: the latest sender gets the reply */
        assert_int_equal(kernel_routes_add(r, "m1", &b), 0);
        assert_ptr_equal(kernel_routes_find(r, "m1"), &b);
        assert_int_equal(kernel_routes_size(r), 2);
        kernel_routes_remove(r, "m1");
        kernel_routes_remove(r, "unknown");
        kernel_routes_remove(r, NULL);
        assert_null(kernel_routes_find(r, "m1"));
        assert_int_equal(kernel_routes_size(r), 1);
        kernel_routes_free(r);
}

static void test_drop_owner(void **state) {
        KernelRoutes *r = NULL;
        char id[32];

        assert_int_equal(kernel_routes_new(&r), 0);
        for (int i = 0; i < 1000; i++) {
                snprintf(id, sizeof(id), "msg-%d", i);
                assert_int_equal(kernel_routes_add(r, id, i % 2 ? &a : &b), 0);
        }
        kernel_routes_drop_owner(r, &a);
        assert_int_equal(kernel_routes_size(r), 500);
        assert_null(kernel_routes_find(r, "msg-1"));
        assert_ptr_equal(kernel_routes_find(r, "msg-2"), &b);
        kernel_routes_drop_owner(r, &b);
        assert_int_equal(kernel_routes_size(r), 0);
        kernel_routes_free(r);
}

static void test_bounded(void **state) {
        KernelRoutes *r = NULL;
        char id[32];

        assert_int_equal(kernel_routes_new(&r), 0);
        for (unsigned i = 0; i < KERNEL_ROUTES_MAX + 100; i++) {
                snprintf(id, sizeof(id), "m%u", i);
                assert_int_equal(kernel_routes_add(r, id, &a), 0);
        }
        assert_int_equal(kernel_routes_size(r), KERNEL_ROUTES_MAX);
        assert_null(kernel_routes_find(r, "m0"));
        assert_null(kernel_routes_find(r, "m99"));
        assert_ptr_equal(kernel_routes_find(r, "m100"), &a);
        snprintf(id, sizeof(id), "m%u", KERNEL_ROUTES_MAX + 99);
        assert_ptr_equal(kernel_routes_find(r, id), &a);
        kernel_routes_free(r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_find_remove),
                cmocka_unit_test(test_drop_owner),
                cmocka_unit_test(test_bounded),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
