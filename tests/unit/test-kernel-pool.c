/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/kernel/kernel-pool.c and kernel-specs.c's pure parts: which POST a prespawned
 * kernel serves (kernel_pool_request_fits()), and the kernelspecs' argv. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernel/kernel-internal.h"
#include "util/json-util.h"

static void test_fits(void **state) {
        _cleanup_(json_object_putp) json_object *empty = json_object_new_object(), *env = NULL, *limits = NULL,
                                                *def = json_object_new_string("default"),
                                                *none = json_object_new_string("none"), *null = json_object_new_null();

        env = json_tokener_parse("{\"KERNEL_USERNAME\": \"u\"}");
        limits = json_tokener_parse("{\"memoryBytes\": 536870912}");
        assert_non_null(env);
        assert_non_null(limits);
        /* What DocsGPT sends ({"name": "python3"}), and the same with empty or default fields. */
        assert_true(kernel_pool_request_fits(&(KernelStartRequest) { .owner = "api-token" }));
        assert_true(kernel_pool_request_fits(&(KernelStartRequest) { .spec = "python3" }));
        assert_true(kernel_pool_request_fits(&(KernelStartRequest) { .spec = "python3", .env = empty, .limits = empty }));
        assert_true(kernel_pool_request_fits(&(KernelStartRequest) { .network = def }));
        assert_true(kernel_pool_request_fits(&(KernelStartRequest) { .network = null }));
        /* Anything the pool's kernels lack. */
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .spec = "ir" }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .spec = "python-base" }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .environment = "python-base" }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .workspace_id = "w1" }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .env = env }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .limits = limits }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .network = none }));
        assert_false(kernel_pool_request_fits(&(KernelStartRequest) { .network = empty }));
}

static void test_argv(void **state) {
        char *const *py = kernel_spec_argv(false), *const *r = kernel_spec_argv(true);

        assert_string_equal(py[0], "python3");
        assert_string_equal(py[2], "ipykernel_launcher");
        assert_string_equal(py[4], "{connection_file}");
        assert_null(py[5]);
        assert_string_equal(r[0], "R");
        assert_string_equal(r[3], "IRkernel::main()");
        assert_string_equal(r[5], "{connection_file}");
        assert_null(r[6]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fits),
                cmocka_unit_test(test_argv),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
