/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/kernel/kernel-output.c: the per-request output budget ([Kernels]
 * MaxOutputBytes=), its marker, what it counts and what it never touches. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kernel/kernel-output.h"
#include "util/json-util.h"
#include "util/macro.h"

static const char session[] = "00000000-0000-4000-8000-000000000000";

/* A client's request, whose header the kernel's output carries as parent_header. */
static JupyterMsg *request(void) {
        JupyterMsg *m = NULL;

        assert_int_equal(jupyter_msg_new(JUPYTER_CHANNEL_SHELL, "execute_request", "client", NULL, NULL, &m), 0);
        return m;
}

static JupyterMsg *iopub(const JupyterMsg *parent, const char *type, const char *json) {
        json_object *content = json_tokener_parse(json);
        JupyterMsg *m = NULL;

        assert_non_null(content);
        assert_int_equal(jupyter_msg_new(JUPYTER_CHANNEL_IOPUB, type, "kernel", parent, content, &m), 0);
        return m;
}

static JupyterMsg *stream(const JupyterMsg *parent, size_t n) {
        char json[256];

        assert_true(n < 200);
        (void) snprintf(json, sizeof(json), "{\"name\":\"stdout\",\"text\":\"%*s\"}", (int) n, "");
        return iopub(parent, "stream", json);
}

/* Judge @m (freed) and return the verdict; the marker, if any, into *@ret_marker. */
static int judge(KernelOutput *o, JupyterMsg *m, JupyterMsg **ret_marker, uint64_t *ret_delivered) {
        JupyterMsg *marker = NULL;
        uint64_t delivered = UINT64_MAX;
        int r;

        r = kernel_output_judge(o, m, session, &marker, &delivered);
        jupyter_msg_free(m);
        if (r == KERNEL_OUTPUT_TRUNCATE) {
                assert_non_null(marker);
                if (ret_delivered)
                        *ret_delivered = delivered;
                if (ret_marker)
                        *ret_marker = marker;
                else
                        jupyter_msg_free(marker);
        } else
                assert_null(marker);
        return r;
}

static void test_bytes(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *req = request(), *m = NULL;

        /* "name" 4 + "stdout" 6 + "text" 4 + 10 spaces */
        m = stream(req, 10);
        assert_int_equal(kernel_output_message_bytes(m), 24);
        m = jupyter_msg_free(m);
        /* "data" 4 + "text/plain" 10 + "abc" 3 + "metadata" 8 + "execution_count" 15 + a number 8 */
        m = iopub(req, "execute_result", "{\"data\":{\"text/plain\":\"abc\"},\"metadata\":{},\"execution_count\":3}");
        assert_int_equal(kernel_output_message_bytes(m), 48);
        m = jupyter_msg_free(m);
        /* "ename" 5 + 1 + "evalue" 6 + 2 + "traceback" 9 + 3 + 4 */
        m = iopub(req, "error", "{\"ename\":\"E\",\"evalue\":\"vv\",\"traceback\":[\"aaa\",\"bbbb\"]}");
        assert_int_equal(kernel_output_message_bytes(m), 30);
        m = jupyter_msg_free(m);
        /* not output: nothing */
        m = iopub(req, "status", "{\"execution_state\":\"busy\"}");
        assert_int_equal(kernel_output_message_bytes(m), 0);
        m = jupyter_msg_free(m);
        m = iopub(req, "execute_input", "{\"code\":\"print(1)\",\"execution_count\":1}");
        assert_int_equal(kernel_output_message_bytes(m), 0);
}

static void test_no_budget(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *req = request();
        KernelOutput *o = NULL;

        assert_int_equal(kernel_output_new(0, &o), 0);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(judge(o, stream(req, 150), NULL, NULL), KERNEL_OUTPUT_PASS);
        kernel_output_free(o);
}

static void test_truncate(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *req = request(), *other = request(), *marker = NULL;
        const char *text;
        json_object *v;
        KernelOutput *o = NULL;
        uint64_t delivered = 0;

        assert_int_equal(kernel_output_new(100, &o), 0);
        /* 24 + 24 + 24 + 28 = 100: exactly the budget passes */
        assert_int_equal(judge(o, stream(req, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, iopub(req, "status", "{\"execution_state\":\"busy\"}"), NULL, NULL),
                         KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, stream(req, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, stream(req, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, stream(req, 14), NULL, NULL), KERNEL_OUTPUT_PASS);
        /* one byte more: the marker instead */
        assert_int_equal(judge(o, stream(req, 1), &marker, &delivered), KERNEL_OUTPUT_TRUNCATE);
        assert_int_equal(delivered, 100);
        assert_int_equal(marker->channel, JUPYTER_CHANNEL_IOPUB);
        assert_string_equal(jupyter_msg_type(marker), "stream");
        assert_string_equal(jupyter_msg_parent_id(marker), jupyter_msg_id(req));
        assert_true(json_object_object_get_ex(marker->header, "session", &v));
        assert_string_equal(json_object_get_string(v), session);
        assert_true(json_object_object_get_ex(marker->content, "name", &v));
        assert_string_equal(json_object_get_string(v), "stderr");
        assert_true(json_object_object_get_ex(marker->content, "text", &v));
        text = json_object_get_string(v);
        assert_non_null(strstr(text, "[sandbox-runner: output truncated after 100 bytes (MaxOutputBytes=100)"));

        /* then nothing of that request's output, whatever its type or size ... */
        assert_int_equal(judge(o, stream(req, 0), NULL, NULL), KERNEL_OUTPUT_DROP);
        assert_int_equal(judge(o, iopub(req, "display_data", "{\"data\":{},\"metadata\":{}}"), NULL, NULL),
                         KERNEL_OUTPUT_DROP);
        assert_int_equal(judge(o, iopub(req, "error", "{\"ename\":\"E\",\"evalue\":\"\",\"traceback\":[]}"), NULL, NULL),
                         KERNEL_OUTPUT_DROP);
        /* ... but its status and the rest pass */
        assert_int_equal(judge(o, iopub(req, "status", "{\"execution_state\":\"idle\"}"), NULL, NULL),
                         KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, iopub(req, "comm_msg", "{\"comm_id\":\"c\",\"data\":{}}"), NULL, NULL),
                         KERNEL_OUTPUT_PASS);
        /* another request has a budget of its own */
        assert_int_equal(judge(o, stream(other, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        /* output with no parent (before any request) is not any request's */
        assert_int_equal(judge(o, stream(NULL, 150), NULL, NULL), KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, stream(NULL, 150), NULL, NULL), KERNEL_OUTPUT_PASS);
        kernel_output_free(o);
}

static void test_one_big_message(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *req = request(), *marker = NULL;
        KernelOutput *o = NULL;
        uint64_t delivered = 1;
        json_object *v;

        /* a single message over the budget: the marker says nothing was delivered */
        assert_int_equal(kernel_output_new(50, &o), 0);
        assert_int_equal(judge(o, stream(req, 100), &marker, &delivered), KERNEL_OUTPUT_TRUNCATE);
        assert_int_equal(delivered, 0);
        assert_true(json_object_object_get_ex(marker->content, "text", &v));
        assert_non_null(strstr(json_object_get_string(v), "truncated after 0 bytes (MaxOutputBytes=50)"));
        assert_int_equal(judge(o, stream(req, 1), NULL, NULL), KERNEL_OUTPUT_DROP);
        kernel_output_free(o);
}

static void test_tracked_bounded(void **state) {
        _cleanup_jupyter_msg_ JupyterMsg *first = request();
        KernelOutput *o = NULL;

        assert_int_equal(kernel_output_new(30, &o), 0);
        assert_int_equal(judge(o, stream(first, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        assert_int_equal(judge(o, stream(first, 10), NULL, NULL), KERNEL_OUTPUT_TRUNCATE);
        /* requests seen since, fewer than the table holds: the first is still truncated */
        for (unsigned i = 0; i < KERNEL_OUTPUT_TRACKED - 1; i++) {
                _cleanup_jupyter_msg_ JupyterMsg *req = request();

                assert_int_equal(judge(o, stream(req, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        }
        assert_int_equal(judge(o, stream(first, 0), NULL, NULL), KERNEL_OUTPUT_DROP);
        /* the table full of newer requests: the least recently seen one goes, its count with it */
        for (unsigned i = 0; i < KERNEL_OUTPUT_TRACKED; i++) {
                _cleanup_jupyter_msg_ JupyterMsg *req = request();

                assert_int_equal(judge(o, stream(req, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        }
        assert_int_equal(judge(o, stream(first, 10), NULL, NULL), KERNEL_OUTPUT_PASS);
        kernel_output_free(o);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bytes),
                cmocka_unit_test(test_no_budget),
                cmocka_unit_test(test_truncate),
                cmocka_unit_test(test_one_big_message),
                cmocka_unit_test(test_tracked_bounded),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
