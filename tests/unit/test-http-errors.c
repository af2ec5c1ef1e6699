/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The API's error table (http-error.c) against the table of error codes in docs/api.md section 3,
 * both ways: every documented row (code, status) is exactly one HttpError, every HttpError is a
 * documented row; and the errno map answers with the table's statuses.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/http-error.h"

#define MAX_ROWS 64

typedef struct DocRow {
        char code[64];
        unsigned status;
} DocRow;

/* The rows "| `code` | status | when |" of the table in "## 3. Errors" of docs/api.md. */
static size_t doc_rows(DocRow rows[static MAX_ROWS]) {
        FILE *f = fopen(SR_API_DOC, "re");
        char line[4096];
        bool in_section = false;
        size_t n = 0;

        if (!f)
                fail_msg("cannot open %s: %s", SR_API_DOC, strerror(errno));
        while (fgets(line, sizeof(line), f)) {
                char code[64];
                unsigned status;

                if (strncmp(line, "## ", 3) == 0) {
                        in_section = strncmp(line, "## 3. Errors", 12) == 0;
                        continue;
                }
                if (!in_section || sscanf(line, "| `%63[a-z_]` | %u |", code, &status) != 2)
                        continue;
                assert_true(n < MAX_ROWS);
                snprintf(rows[n].code, sizeof(rows[n].code), "%s", code);
                rows[n].status = status;
                n++;
        }
        fclose(f);
        return n;
}

static void test_documented_codes_in_table(void **state) {
        DocRow rows[MAX_ROWS];
        size_t n = doc_rows(rows);

        /* The section is there and parsed: at least the codes the API has had from the start. */
        assert_true(n >= 15);
        for (size_t i = 0; i < n; i++) {
                unsigned found = 0;

                for (HttpError e = 0; e < _HTTP_ERROR_MAX; e++)
                        if (strcmp(http_error_code(e), rows[i].code) == 0 && http_error_status(e) == rows[i].status)
                                found++;
                if (found != 1)
                        fail_msg("docs/api.md documents '%s' %u; the error table has it %u times (must be 1)",
                                 rows[i].code, rows[i].status, found);
        }
}

static void test_table_entries_documented(void **state) {
        DocRow rows[MAX_ROWS];
        size_t n = doc_rows(rows);

        for (HttpError e = 0; e < _HTTP_ERROR_MAX; e++) {
                const char *code = http_error_code(e);
                unsigned found = 0;

                assert_non_null(code);
                for (size_t i = 0; i < n; i++)
                        if (strcmp(rows[i].code, code) == 0 && rows[i].status == http_error_status(e))
                                found++;
                if (found != 1)
                        fail_msg("error table entry %d ('%s' %u) is documented %u times in docs/api.md section 3 "
                                 "(must be 1)", (int) e, code, http_error_status(e), found);
        }
}

static void test_invalid_kinds(void **state) {
        assert_null(http_error_code(_HTTP_ERROR_MAX));
        assert_null(http_error_code(_HTTP_ERROR_INVALID));
        assert_int_equal(http_error_status(_HTTP_ERROR_INVALID), 500);
}

static void test_errno_map_uses_table(void **state) {
        static const int errnos[] = { EINVAL, EBADMSG, EPERM, EACCES, ENOENT, EEXIST, E2BIG, EFBIG,
                                      EDQUOT, EBUSY, EAGAIN, ENOMEM, EIO, ENOSPC, EXDEV };

        assert_int_equal(http_status_from_errno(0), 200);
        for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
                HttpError e = http_error_from_errno(-errnos[i]);

                assert_true(e >= 0 && e < _HTTP_ERROR_MAX);
                assert_int_equal(http_status_from_errno(-errnos[i]), http_error_status(e));
        }
        assert_int_equal(http_error_from_errno(-ENOENT), HTTP_ERROR_NOT_FOUND);
        assert_int_equal(http_error_from_errno(-EIO), HTTP_ERROR_INTERNAL);
}

/* http-server.c answers a body over its cap (seen mid-upload) through the table: the bodies it
 * wrote by hand before are what http_error_json() renders, byte for byte. */
static void test_payload_too_large_body(void **state) {
        char *s;

        s = http_error_json(http_error_code(HTTP_ERROR_PAYLOAD_TOO_LARGE), "This request takes no body.");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"payload_too_large\",\"message\":\"This request takes no body.\"}");
        free(s);
        s = http_error_json(http_error_code(HTTP_ERROR_PAYLOAD_TOO_LARGE), "The request body exceeds 1048576 bytes.");
        assert_non_null(s);
        assert_string_equal(s, "{\"error\":\"payload_too_large\",\"message\":\"The request body exceeds 1048576 bytes.\"}");
        free(s);
        assert_int_equal(http_error_status(HTTP_ERROR_PAYLOAD_TOO_LARGE), 413);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_documented_codes_in_table),
                cmocka_unit_test(test_table_entries_documented),
                cmocka_unit_test(test_invalid_kinds),
                cmocka_unit_test(test_errno_map_uses_table),
                cmocka_unit_test(test_payload_too_large_body),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
