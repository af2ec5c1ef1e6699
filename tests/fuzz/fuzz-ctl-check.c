/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The CLI's check command (src/ctl/check-util.c): the input is taken as the daemon's answer (JSON)
 * to GET /health, judged item by item and formatted as lines. Invariants: the report always has
 * the five items in order, each ok, warn or fail, a fix exactly for warn and fail; "ok" is true
 * exactly when no item failed; the lines, one per item, hold no control character but '\n', so
 * that an answer cannot drive the terminal.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check-util.h"
#include "fuzz.h"

static void check_report(json_object *report) {
        static const char *const ids[] = { "sandbox", "limits", "egress", "environments", "npu" };
        json_object *checks = json_object_object_get(report, "checks");
        bool failed = false;

        FUZZ_CHECK(json_object_array_length(checks) == sizeof(ids) / sizeof(ids[0]));
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
                json_object *c = json_object_array_get_idx(checks, i);
                const char *status = json_object_get_string(json_object_object_get(c, "status"));

                FUZZ_CHECK(strcmp(json_object_get_string(json_object_object_get(c, "id")), ids[i]) == 0);
                FUZZ_CHECK(strcmp(status, "ok") == 0 || strcmp(status, "warn") == 0 || strcmp(status, "fail") == 0);
                FUZZ_CHECK(!!json_object_object_get(c, "fix") == (strcmp(status, "ok") != 0));
                failed = failed || strcmp(status, "fail") == 0;
        }
        FUZZ_CHECK(check_report_ok(report) == !failed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *health, *report = NULL;
        char *s, *text = NULL;
        size_t text_size = 0, lines = 0;
        FILE *f;

        if (size > 64 * 1024)
                return 0;
        s = fuzz_strndup(data, size);
        health = json_tokener_parse(s);
        free(s);
        if (!health)
                return 0;
        FUZZ_CHECK(check_from_health(health, &report) == 0);
        check_report(report);

        f = open_memstream(&text, &text_size);
        FUZZ_CHECK(f);
        FUZZ_CHECK(check_format(f, report) == 0);
        FUZZ_CHECK(fclose(f) == 0);
        for (const char *p = text; *p; p++) {
                FUZZ_CHECK(*p == '\n' || ((unsigned char) *p >= 0x20 && *p != 0x7f));
                lines += *p == '\n';
        }
        FUZZ_CHECK(lines == 5);
        free(text);
        json_object_put(report);
        json_object_put(health);
        return 0;
}
