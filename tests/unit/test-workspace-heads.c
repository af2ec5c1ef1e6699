/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of execution/workspace-heads.c: the last two snapshot trees per workspace. */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "execution/workspace-heads.h"

#define T1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define T2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define T3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static void test_heads(void **state) {
        WorkspaceHeads h = {};
        const char *prev = NULL;

        /* Nothing known: ask the refs. */
        assert_int_equal(workspace_heads_base(&h, "ws", "e1", &prev), 0);
        assert_int_equal(workspace_heads_publish(&h, "ws", "e1", T1), 0);
        /* The first snapshot since the start: what came before is not known here. */
        assert_int_equal(workspace_heads_base(&h, "ws", "e1", &prev), 0);
        assert_int_equal(workspace_heads_publish(&h, "ws", "e2", T2), 0);
        assert_int_equal(workspace_heads_base(&h, "ws", "e2", &prev), 1);
        assert_string_equal(prev, T1);
        /* Only the current head has a known base. */
        assert_int_equal(workspace_heads_base(&h, "ws", "e1", &prev), 0);
        assert_int_equal(workspace_heads_publish(&h, "ws", "e3", T3), 0);
        assert_int_equal(workspace_heads_base(&h, "ws", "e3", &prev), 1);
        assert_string_equal(prev, T2);
        /* Another workspace is apart. */
        assert_int_equal(workspace_heads_publish(&h, "other", "x1", T1), 0);
        assert_int_equal(workspace_heads_base(&h, "ws", "e3", &prev), 1);
        assert_string_equal(prev, T2);
        /* Forgotten (a restore): the refs decide again. */
        workspace_heads_forget(&h, "ws");
        assert_int_equal(workspace_heads_base(&h, "ws", "e3", &prev), 0);
        workspace_heads_forget(&h, "never");
        for (int i = 0; i < 500; i++) {
                char ws[32];

                (void) snprintf(ws, sizeof(ws), "ws-%d", i);
                assert_int_equal(workspace_heads_publish(&h, ws, "a", T1), 0);
                assert_int_equal(workspace_heads_publish(&h, ws, "b", T2), 0);
        }
        assert_int_equal(workspace_heads_base(&h, "ws-321", "b", &prev), 1);
        assert_string_equal(prev, T1);
        workspace_heads_done(&h);
        assert_int_equal(workspace_heads_base(&h, "ws-321", "b", &prev), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_heads),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
