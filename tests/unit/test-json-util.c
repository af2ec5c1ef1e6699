/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/util/json-util.h: the builders that consume their value (json_add(),
 * json_array_add(), json_unsigned_array_new()) and the parsers (json_parse_text(),
 * json_parse_strict()) with what each refuses.
 */

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/json-util.h"

static void assert_json(json_object *o, const char *expected) {
        assert_non_null(o);
        assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), expected);
}

static void test_add(void **state) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        assert_non_null(o);
        assert_int_equal(json_add(o, "a", json_object_new_int(1)), 0);
        assert_int_equal(json_add(o, "b", json_object_new_string("x")), 0);
        /* NULL stands for a value whose allocation failed. */
        assert_int_equal(json_add(o, "c", NULL), -ENOMEM);
        assert_json(o, "{\"a\":1,\"b\":\"x\"}");
}

static void test_array_add(void **state) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        assert_non_null(a);
        assert_int_equal(json_array_add(a, json_object_new_int(1)), 0);
        /* Not a JSON null, as json_object_array_add() would have it. */
        assert_int_equal(json_array_add(a, NULL), -ENOMEM);
        assert_int_equal(json_array_add(a, json_object_new_boolean(true)), 0);
        assert_json(a, "[1,true]");
}

static void test_unsigned_array(void **state) {
        static const unsigned v[] = { 0, 7, UINT_MAX };
        _cleanup_(json_object_putp) json_object *a = json_unsigned_array_new(v, 3), *empty = NULL;

        assert_json(a, "[0,7,4294967295]");
        empty = json_unsigned_array_new(NULL, 0);
        assert_json(empty, "[]");
}

static void test_strv(void **state) {
        char *l[] = { (char *) "a", (char *) "b c", NULL };
        _cleanup_(json_object_putp) json_object *a = json_strv_new(l), *empty = json_strv_new(NULL);

        assert_json(a, "[\"a\",\"b c\"]");
        assert_json(empty, "[]");
}

static void test_parse_text(void **state) {
        static const char nul[] = "{\"a\":1}\0{}";
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *none = NULL;

        assert_int_equal(json_parse_text("{\"a\": [1, 2]}", strlen("{\"a\": [1, 2]}"), &o), 0);
        assert_json(o, "{\"a\":[1,2]}");
        /* A NUL inside the bytes read: the text is not what json-c would see. */
        assert_int_equal(json_parse_text(nul, sizeof(nul) - 1, &none), -EBADMSG);
        assert_int_equal(json_parse_text("{\"a\":", 5, &none), -EBADMSG);
        assert_int_equal(json_parse_text("", 0, &none), -EBADMSG);
        assert_null(none);
}

static int parse_strict(const char *text, size_t len, int depth, enum json_tokener_error *ret_err) {
        json_object *o = NULL;
        int r;

        *ret_err = json_tokener_error_parse_eof;        /* a value none of the checks expects */
        r = json_parse_strict(text, len, depth, &o, ret_err);
        if (r >= 0) {
                assert_non_null(o);
                json_object_put(o);
        } else
                assert_null(o);
        return r;
}

static void test_parse_strict(void **state) {
        static const char nul_after[] = "{}\0";
        static const char text[] = " {\"a\": \"\xc3\xa9\"}\r\n\t ";
        _cleanup_(json_object_putp) json_object *o = NULL;
        enum json_tokener_error err;

        assert_int_equal(json_parse_strict(text, sizeof(text) - 1, 4, &o, &err), 0);
        assert_json(o, "{\"a\":\"\xc3\xa9\"}");

        assert_int_equal(parse_strict("{\"a\": 1", 7, 4, &err), -EBADMSG);
        assert_int_equal(err, json_tokener_continue);
        /* json-c's strict mode refuses most of what follows a document itself... */
        assert_int_equal(parse_strict("{} x", 4, 4, &err), -EBADMSG);
        assert_true(err != json_tokener_success && err != json_tokener_continue);
        assert_int_equal(parse_strict("{}{}", 4, 4, &err), -EBADMSG);
        assert_true(err != json_tokener_success && err != json_tokener_continue);
        /* ...but stops at a NUL, which is not white space: data after the document. */
        assert_int_equal(parse_strict(nul_after, sizeof(nul_after) - 1, 4, &err), -EBADMSG);
        assert_int_equal(err, json_tokener_success);
        assert_int_equal(parse_strict("[1]\t\0", 5, 4, &err), -EBADMSG);
        assert_int_equal(err, json_tokener_success);
        /* Strict mode: no trailing commas, invalid UTF-8 refused, the depth bounded. */
        assert_int_equal(parse_strict("[1,]", 4, 4, &err), -EBADMSG);
        assert_true(err != json_tokener_success && err != json_tokener_continue);
        assert_int_equal(parse_strict("\"\xff\"", 3, 4, &err), -EBADMSG);
        assert_true(err != json_tokener_success && err != json_tokener_continue);
        assert_int_equal(parse_strict("[[[]]]", 6, 3, &err), 0);
        assert_int_equal(parse_strict("[[[[]]]]", 8, 3, &err), -EBADMSG);
        assert_int_equal(err, json_tokener_error_depth);
        assert_int_equal(parse_strict("", 0, 4, &err), -EBADMSG);
        assert_int_equal(err, json_tokener_continue);
        assert_int_equal(parse_strict("{}", (size_t) INT_MAX + 1, 4, &err), -EFBIG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add),
                cmocka_unit_test(test_array_add),
                cmocka_unit_test(test_unsigned_array),
                cmocka_unit_test(test_strv),
                cmocka_unit_test(test_parse_text),
                cmocka_unit_test(test_parse_strict),
        };

        return cmocka_run_group_tests_name("json-util", tests, NULL, NULL);
}
