/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/util/string-util.h: log-safe escaping, case-insensitive prefixes, token
 * validation and the growing buffer. */

#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/string-util.h"

static void assert_escape(const char *in, size_t max, const char *expected) {
        char *out = str_escape_log(in, max);
        bool same;

        assert_non_null(out);
        same = strcmp(out, expected) == 0;
        if (!same)
                print_error("str_escape_log(\"%s\", %zu) = \"%s\", expected \"%s\"\n", in, max, out, expected);
        free(out);              /* before failing: no leak to confuse LeakSanitizer/valgrind */
        assert_true(same);
}

static void test_escape_plain(void **state) {
        assert_escape("", 10, "");
        assert_escape("GET /health?x=1", 100, "GET /health?x=1");
        /* Printable ASCII other than quotes and backslash passes through. */
        assert_escape(" !#$%&()*+,-./09:;<=>?@AZ[]^_`az{|}~", 100, " !#$%&()*+,-./09:;<=>?@AZ[]^_`az{|}~");
}

static void test_escape_control(void **state) {
        assert_escape("a\nb", 10, "a\\x0ab");
        assert_escape("a\rb", 10, "a\\x0db");
        assert_escape("a\tb", 10, "a\\x09b");
        assert_escape("\x01\x1f", 10, "\\x01\\x1f");
        /* A terminal escape sequence cannot reach the log intact. */
        assert_escape("\x1b[31mred", 20, "\\x1b[31mred");
        /* Forged log line: the newline is escaped, so no second line starts. */
        assert_escape("x\r\nFAKE: entry", 40, "x\\x0d\\x0aFAKE: entry");
}

static void test_escape_quotes_backslash(void **state) {
        assert_escape("'q'", 10, "\\x27q\\x27");
        assert_escape("\"q\"", 10, "\\x22q\\x22");
        assert_escape("a\\b", 10, "a\\x5cb");
        /* An input that already looks escaped is escaped again (not ambiguous). */
        assert_escape("\\x41", 10, "\\x5cx41");
}

static void test_escape_high_bytes(void **state) {
        assert_escape("\x7f", 10, "\\x7f");
        assert_escape("\x80", 10, "\\x80");
        assert_escape("\xff", 10, "\\xff");
        /* UTF-8 "é" is escaped byte by byte. */
        assert_escape("caf\xc3\xa9", 10, "caf\\xc3\\xa9");
}

static void test_escape_truncation(void **state) {
        assert_escape("abcdef", 3, "abc...");
        assert_escape("abcdef", 5, "abcde...");
        /* Exactly @max bytes: nothing was cut, no ellipsis. */
        assert_escape("abcdef", 6, "abcdef");
        assert_escape("abcdef", 7, "abcdef");
        assert_escape("a", 0, "...");
        assert_escape("", 0, "");
        /* The cut counts input bytes, escaped ones included. */
        assert_escape("ab\n", 3, "ab\\x0a");
        assert_escape("ab\ncd", 3, "ab\\x0a...");
        assert_escape("\xff\xff\xff\xff", 2, "\\xff\\xff...");
}

static void test_escape_worst_case_length(void **state) {
        /* Every byte escaped (4x) plus the ellipsis: the buffer must hold it all. */
        char in[257];
        char *out;

        for (size_t i = 0; i < 256; i++)
                in[i] = (char) (i % 31 + 1);   /* control characters 0x01..0x1f */
        in[256] = '\0';

        out = str_escape_log(in, 200);
        assert_non_null(out);
        assert_int_equal(strlen(out), 200 * 4 + 3);
        assert_memory_equal(out, "\\x01\\x02", 8);
        assert_string_equal(out + 200 * 4, "...");
        free(out);
}

static void test_escape_no_limit(void **state) {
        /*
         * SIZE_MAX is the natural way to ask for "no limit". The header promises a copy cut at
         * @max input bytes, so the whole string must come back.
         */
        assert_escape("abc\n", SIZE_MAX, "abc\\x0a");
        assert_escape("abc", SIZE_MAX - 1, "abc");
}

static void test_has_prefix_ci(void **state) {
        assert_true(str_has_prefix_ci("Bearer abc", "Bearer "));
        assert_true(str_has_prefix_ci("bearer abc", "Bearer "));
        assert_true(str_has_prefix_ci("BEARER abc", "bearer "));
        assert_true(str_has_prefix_ci("application/JSON; charset=utf-8", "Application/json"));
        assert_true(str_has_prefix_ci("abc", "abc"));
        assert_true(str_has_prefix_ci("abc", ""));
        assert_true(str_has_prefix_ci("", ""));
        assert_false(str_has_prefix_ci("Bear", "Bearer "));
        assert_false(str_has_prefix_ci("Bearer", "Bearer "));
        assert_false(str_has_prefix_ci("Basic abc", "Bearer "));
        assert_false(str_has_prefix_ci("", "a"));
        assert_false(str_has_prefix_ci("xabc", "abc"));
}

static void test_token_valid(void **state) {
        const char *lower = LOWERCASE_LETTERS DIGITS "._-";

        assert_true(str_token_valid("a", 4, NULL, lower));
        assert_true(str_token_valid("a.b-", 4, LOWERCASE_LETTERS, lower));
        assert_false(str_token_valid("a.b-c", 4, NULL, lower));         /* longer than max */
        assert_false(str_token_valid("", 4, NULL, lower));
        assert_false(str_token_valid(NULL, 4, NULL, lower));
        assert_false(str_token_valid(".ab", 4, LOWERCASE_LETTERS DIGITS, lower));
        assert_true(str_token_valid(".ab", 4, NULL, lower));
        assert_false(str_token_valid("aB", 4, NULL, lower));
        assert_true(str_token_valid("aB9_", 4, NULL, ALPHANUMERICAL "_"));
        assert_false(str_token_valid("a b", 4, NULL, lower));
        assert_false(str_token_valid("a/b", 4, NULL, lower));
        assert_false(str_token_valid("\xc3\xa9", 4, NULL, lower));
}

static void test_hex_encode(void **state) {
        static const unsigned char in[] = { 0x00, 0x0f, 0xa5, 0xff, 0x10 };
        char out[2 * sizeof(in) + 2];

        memset(out, 'X', sizeof(out));
        hex_encode(in, sizeof(in), out);
        assert_string_equal(out, "000fa5ff10");
        assert_int_equal(out[2 * sizeof(in) + 1], 'X');         /* nothing past the NUL */
        hex_encode(in, 0, out);
        assert_string_equal(out, "");
}

static void test_buf_append(void **state) {
        char *data = NULL;
        size_t size = 0, allocated = 0;

        assert_int_equal(str_buf_append(&data, &size, &allocated, 8, "abc", 3), 0);
        assert_int_equal(size, 3);
        assert_true(allocated >= 4 && allocated <= 9);
        assert_string_equal(data, "abc");
        assert_int_equal(str_buf_append(&data, &size, &allocated, 8, "", 0), 0);
        assert_string_equal(data, "abc");
        assert_int_equal(str_buf_append(&data, &size, &allocated, 8, "defgh", 5), 0);
        assert_int_equal(size, 8);
        assert_int_equal(allocated, 9);                 /* never past max + 1 */
        assert_string_equal(data, "abcdefgh");
        /* One byte over the limit: refused, nothing appended. */
        assert_int_equal(str_buf_append(&data, &size, &allocated, 8, "i", 1), -EFBIG);
        assert_int_equal(size, 8);
        assert_string_equal(data, "abcdefgh");
        free(data);

        /* Bytes, not strings: a NUL inside is kept, the terminator follows the size. */
        data = NULL;
        size = allocated = 0;
        assert_int_equal(str_buf_append(&data, &size, &allocated, SIZE_MAX - 1, "a\0b", 3), 0);
        assert_int_equal(size, 3);
        assert_memory_equal(data, "a\0b\0", 4);
        free(data);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_escape_plain),
                cmocka_unit_test(test_escape_control),
                cmocka_unit_test(test_escape_quotes_backslash),
                cmocka_unit_test(test_escape_high_bytes),
                cmocka_unit_test(test_escape_truncation),
                cmocka_unit_test(test_escape_worst_case_length),
                cmocka_unit_test(test_escape_no_limit),
                cmocka_unit_test(test_has_prefix_ci),
                cmocka_unit_test(test_token_valid),
                cmocka_unit_test(test_buf_append),
                cmocka_unit_test(test_hex_encode),
        };

        return cmocka_run_group_tests_name("string-util", tests, NULL, NULL);
}
