/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/kernel/kernel-connection.c: the key, the connection file, the socket names and
 * their length limit (sun_path). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernel/kernel-connection.h"
#include "util/json-util.h"

static void test_key(void **state) {
        char k1[KERNEL_KEY_LEN + 1], k2[KERNEL_KEY_LEN + 1];

        assert_int_equal(kernel_connection_key_new(k1), 0);
        assert_int_equal(kernel_connection_key_new(k2), 0);
        assert_int_equal(strlen(k1), 64);
        assert_int_equal(strspn(k1, "0123456789abcdef"), 64);
        assert_string_not_equal(k1, k2);
}

static void test_json(void **state) {
        _cleanup_(json_object_putp) json_object *o = kernel_connection_json("abc", "python3");
        json_object *v;
        int ports[5] = {};

        assert_non_null(o);
        assert_true(json_object_object_get_ex(o, "transport", &v));
        assert_string_equal(json_object_get_string(v), "ipc");
        assert_true(json_object_object_get_ex(o, "ip", &v));
        assert_string_equal(json_object_get_string(v), "/run/kernel/k");
        assert_true(json_object_object_get_ex(o, "key", &v));
        assert_string_equal(json_object_get_string(v), "abc");
        assert_true(json_object_object_get_ex(o, "signature_scheme", &v));
        assert_string_equal(json_object_get_string(v), "hmac-sha256");
        /* five distinct ports, 1 to 5 */
        const char *names[5] = { "shell_port", "iopub_port", "stdin_port", "control_port", "hb_port" };
        for (int i = 0; i < 5; i++) {
                assert_true(json_object_object_get_ex(o, names[i], &v));
                assert_in_range(json_object_get_int(v), 1, 5);
                assert_int_equal(ports[json_object_get_int(v) - 1]++, 0);
        }
}

static void test_endpoint(void **state) {
        char dir[200];
        char *e = NULL;

        assert_int_equal(kernel_connection_endpoint("/run/sr/kernels/x", JUPYTER_CHANNEL_IOPUB, &e), 0);
        assert_string_equal(e, "ipc:///run/sr/kernels/x/k-2");
        free(e);
        assert_int_equal(kernel_connection_endpoint("/d", _JUPYTER_CHANNEL_MAX, &e), -EINVAL);
        /* a socket path of 106 bytes fits, 107 does not */
        memset(dir, 'a', sizeof(dir));
        dir[0] = '/';
        dir[106 - 4] = '\0';                  /* "/aaa…" + "/k-N" = 106 */
        assert_int_equal(kernel_connection_endpoint(dir, JUPYTER_CHANNEL_SHELL, &e), 0);
        assert_int_equal(strlen(e) - strlen("ipc://"), 106);
        free(e);
        dir[106 - 4] = 'a';
        dir[107 - 4] = '\0';
        assert_int_equal(kernel_connection_endpoint(dir, JUPYTER_CHANNEL_SHELL, &e), -ENAMETOOLONG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_key),
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_endpoint),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
