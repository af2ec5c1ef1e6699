/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The CLI's accelerator parts (src/ctl/npu-util.c): the input is taken as the daemon's answer
 * (JSON) to GET /npu/chips, /npu/workloads and /npu/jobs, formatted as the npu command's tables,
 * and as a --npu chip list and a --device name. Invariants: a formatter answers 0 or -EBADMSG
 * (no "chips"/"workloads"/"jobs" list) and its text holds no control character but '\n', so that
 * an answer cannot drive the terminal; an accepted chip list has 1 to 64 distinct ids of at most
 * 65535 and only digits and commas; an accepted device name has a '/' and an '=' after it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "fuzz.h"
#include "npu-util.h"

static void check_text(const char *t) {
        for (const char *p = t; *p; p++)
                FUZZ_CHECK(*p == '\n' || ((unsigned char) *p >= 0x20 && *p != 0x7f));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int (*const formats[])(json_object *, char **) = { npu_format_chips, npu_format_workloads, npu_format_jobs };
        json_object *answer;
        unsigned *chips = NULL;
        size_t n = 0, bad = 0;
        char *s;
        int r;

        if (size > 64 * 1024)
                return 0;
        s = fuzz_strndup(data, size);

        answer = json_tokener_parse(s);
        for (size_t i = 0; answer && i < sizeof(formats) / sizeof(formats[0]); i++) {
                char *t = NULL;

                r = formats[i](answer, &t);
                FUZZ_CHECK(r == 0 || r == -EBADMSG);
                FUZZ_CHECK((r == 0) == (t != NULL));
                if (t)
                        check_text(t);
                free(t);
        }
        json_object_put(answer);

        r = npu_parse_chips(s, &chips, &n, &bad);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE || r == -E2BIG || r == -EEXIST);
        if (r == 0) {
                FUZZ_CHECK(n >= 1 && n <= NPU_CHIPS_MAX);
                FUZZ_CHECK(strspn(s, "0123456789,") == strlen(s));
                for (size_t i = 0; i < n; i++) {
                        FUZZ_CHECK(chips[i] <= NPU_CHIP_ID_MAX);
                        for (size_t j = 0; j < i; j++)
                                FUZZ_CHECK(chips[i] != chips[j]);
                }
        } else {
                FUZZ_CHECK(!chips);
                FUZZ_CHECK(r == -E2BIG || bad <= strlen(s));
        }
        free(chips);

        if (npu_device_name_valid(s)) {
                const char *slash = strchr(s, '/');

                FUZZ_CHECK(slash && slash != s && strchr(slash, '=') && strlen(s) <= 255);
        }
        free(s);
        return 0;
}
