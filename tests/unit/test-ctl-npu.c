/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/ctl/npu-util.c: the --npu chip list, --device names, the broker job's body,
 * job states, and the tables of npu chips, workloads and jobs (escaping included). */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npu-util.h"

#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))

/* The compact JSON text of @o, to compare against expected bodies. */
static const char *text(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static json_object *parse(const char *s) {
        json_object *o = json_tokener_parse(s);

        assert_non_null(o);
        return o;
}

static void test_parse_chips_ok(void **state) {
        static const struct {
                const char *in;
                const char *json;       /* npu_chips_json() of the result */
        } ok[] = {
                { "0",          "{\"chips\":[0]}"       },
                { "5,3",        "{\"chips\":[5,3]}"     },
                { "3,0",        "{\"chips\":[3,0]}"     },
                { "65535",      "{\"chips\":[65535]}"   },
                { "007,8",      "{\"chips\":[7,8]}"     },
        };

        for (size_t i = 0; i < ELEMENTS(ok); i++) {
                unsigned *chips = NULL;
                size_t n = 0;
                json_object *j;

                assert_int_equal(npu_parse_chips(ok[i].in, &chips, &n, NULL), 0);
                j = npu_chips_json(chips, n);
                assert_non_null(j);
                assert_string_equal(text(j), ok[i].json);
                json_object_put(j);
                free(chips);
        }
}

static void test_parse_chips_bad(void **state) {
        static const struct {
                const char *in;
                int error;
                size_t bad;             /* the offending item's offset (not checked for -E2BIG) */
        } bad[] = {
                { "",            -EINVAL, 0 },
                { ",",           -EINVAL, 0 },
                { "5,",          -EINVAL, 2 },
                { ",5",          -EINVAL, 0 },
                { "5,,3",        -EINVAL, 2 },
                { "a",           -EINVAL, 0 },
                { "5,x3",        -EINVAL, 2 },
                { "-1",          -EINVAL, 0 },
                { "+1",          -EINVAL, 0 },
                { " 1",          -EINVAL, 0 },
                { "1 ",          -EINVAL, 0 },
                { "1, 2",        -EINVAL, 2 },
                { "0x10",        -EINVAL, 0 },
                { "1;2",         -EINVAL, 0 },
                { "65536",       -ERANGE, 0 },
                { "1,99999999999999999999999", -ERANGE, 2 },
                { "3,5,3",       -EEXIST, 4 },
                { "0,00",        -EEXIST, 2 },
        };

        for (size_t i = 0; i < ELEMENTS(bad); i++) {
                unsigned *chips = NULL;
                size_t n = 0, off = SIZE_MAX;

                assert_int_equal(npu_parse_chips(bad[i].in, &chips, &n, &off), bad[i].error);
                assert_null(chips);
                assert_int_equal(off, bad[i].bad);
        }
}

static void test_parse_chips_count(void **state) {
        char s[4 * 70] = "";
        unsigned *chips = NULL;
        size_t n = 0;

        /* 64 ids: the most an execution takes. */
        for (unsigned i = 0; i < 64; i++)
                snprintf(s + strlen(s), sizeof(s) - strlen(s), "%s%u", i > 0 ? "," : "", i);
        assert_int_equal(npu_parse_chips(s, &chips, &n, NULL), 0);
        assert_int_equal(n, 64);
        assert_int_equal(chips[0], 0);
        assert_int_equal(chips[63], 63);
        free(chips);

        /* 65: refused. */
        chips = NULL;
        strcat(s, ",64");
        assert_int_equal(npu_parse_chips(s, &chips, &n, NULL), -E2BIG);
        assert_null(chips);
}

static void test_device_names(void **state) {
        static const struct {
                const char *name;
                bool valid;
        } names[] = {
                { "example.com/fake=dev0",      true  },
                { "nvidia.com/gpu=0",           true  },
                { "nvidia.com/gpu=all",         true  },
                { "a.b/c/d=e:f",                true  },
                { "",                           false },
                { "nodevice",                   false },
                { "/gpu=0",                     false },
                { "nvidia.com/=0",              false },
                { "nvidia.com/gpu=",            false },
                { "nvidia.com=0/gpu",           false },
                { "nvidia.com/gpu=0;rm",        false },
                { "nvidia.com/gpu=0 x",         false },
                { "nvidia.com/gpu=\xc3\xa9",    false },
        };
        char long_name[300];

        for (size_t i = 0; i < ELEMENTS(names); i++)
                assert_int_equal(npu_device_name_valid(names[i].name), names[i].valid);

        /* 255 bytes are fine, 256 are not. */
        memset(long_name, 'a', sizeof(long_name));
        memcpy(long_name, "v.com/c=", 8);
        long_name[255] = '\0';
        assert_true(npu_device_name_valid(long_name));
        long_name[255] = 'a';
        long_name[256] = '\0';
        assert_false(npu_device_name_valid(long_name));
}

static void test_devices_json(void **state) {
        static const char *const good[] = { "example.com/fake=dev0", "nvidia.com/gpu=1" };
        static const char *const dup[] = { "a.com/b=c", "a.com/b=d", "a.com/b=c" };
        static const char *const malformed[] = { "a.com/b=c", "nodevice" };
        const char *many[33];
        json_object *j = NULL;
        size_t bad = SIZE_MAX;

        assert_int_equal(npu_devices_json(good, ELEMENTS(good), &j, NULL), 0);
        assert_string_equal(text(j), "[\"example.com/fake=dev0\",\"nvidia.com/gpu=1\"]");
        json_object_put(j);

        j = NULL;
        assert_int_equal(npu_devices_json(dup, ELEMENTS(dup), &j, &bad), -EEXIST);
        assert_null(j);
        assert_int_equal(bad, 2);
        assert_int_equal(npu_devices_json(malformed, ELEMENTS(malformed), &j, &bad), -EINVAL);
        assert_null(j);
        assert_int_equal(bad, 1);
        assert_int_equal(npu_devices_json(good, 0, &j, NULL), -E2BIG);

        for (size_t i = 0; i < ELEMENTS(many); i++)
                many[i] = "a.com/b=c";      /* the count is checked first */
        assert_int_equal(npu_devices_json(many, 33, &j, NULL), -E2BIG);
        assert_null(j);
}

static void test_job_body(void **state) {
        json_object *b = NULL;

        assert_int_equal(npu_job_body("fold", "npu-sess-a", "runs/a/config.json", &b), 0);
        assert_string_equal(text(b), "{\"workloadId\":\"fold\",\"sessionId\":\"npu-sess-a\","
                                     "\"inputs\":{\"configPath\":\"runs/a/config.json\"}}");
        json_object_put(b);

        b = NULL;
        assert_int_equal(npu_job_body("fold", "s", NULL, &b), 0);
        assert_string_equal(text(b), "{\"workloadId\":\"fold\",\"sessionId\":\"s\"}");
        json_object_put(b);

        b = NULL;
        assert_int_equal(npu_job_body("", "s", NULL, &b), -EINVAL);
        assert_int_equal(npu_job_body("fold", NULL, "c.json", &b), -EINVAL);
        assert_null(b);
}

static void test_job_state_final(void **state) {
        static const struct {
                const char *state;
                bool final;
        } states[] = {
                { "queued",      false },
                { "running",     false },
                { "cancelling",  false },
                { "succeeded",   true  },
                { "failed",      true  },
                { "cancelled",   true  },
                { "interrupted", true  },
                { "",            false },
                { NULL,          false },
        };

        for (size_t i = 0; i < ELEMENTS(states); i++)
                assert_int_equal(npu_job_state_final(states[i].state), states[i].final);
}

/* Each formatter against an answer, the expected text exactly. */
static void test_format(void **state) {
        static const struct {
                int (*format)(json_object *, char **);
                const char *answer;
                const char *expected;
        } cases[] = {
                /* docs/api.md section 10.2's example, a chip held, one refused spec. */
                { npu_format_chips,
                  "{\"chips\": [{\"id\": 0, \"name\": \"Ascend 910B3\", \"health\": \"OK\", \"selectable\": true, "
                  "\"heldBy\": \"ex-0042\"}, {\"id\": 2, \"name\": \"Ascend 310P3\", \"health\": \"OK\", "
                  "\"selectable\": false, \"reason\": \"chip 2 is an Ascend 310P3, not of the Ascend 910 series\"}, "
                  "{\"id\": 3, \"name\": \"Ascend 910B3\", \"health\": \"OK\", \"selectable\": true, "
                  "\"lastProbeFailure\": \"the probe of chip 3 failed\"}], \"phase\": \"ready\", "
                  "\"cdiDevices\": [\"example.com/fake=dev0\", \"example.com/fake=dev1\"], "
                  "\"cdiRefused\": [{\"what\": \"/etc/cdi/nvidia.json: nvidia.com/gpu=0\", \"reason\": \"hooks\"}]}",
                  "ID  NAME          HEALTH  SELECTABLE  HELD-BY  REASON\n"
                  "0   Ascend 910B3  OK      yes         ex-0042  -\n"
                  "2   Ascend 310P3  OK      no          -        chip 2 is an Ascend 310P3, not of the Ascend 910 series\n"
                  "3   Ascend 910B3  OK      yes         -        the probe of chip 3 failed\n"
                  "CDI devices: example.com/fake=dev0, example.com/fake=dev1\n"
                  "Refused CDI specs:\n"
                  "  /etc/cdi/nvidia.json: nvidia.com/gpu=0: hooks\n" },
                /* Still probing, no chip, no CDI; missing and mistyped fields are "-". */
                { npu_format_chips,
                  "{\"chips\": [{\"id\": \"1\", \"selectable\": 1}], \"phase\": \"probing\", \"cdiDevices\": []}",
                  "ID  NAME  HEALTH  SELECTABLE  HELD-BY  REASON\n"
                  "-   -     -       -           -        -\n"
                  "The chips are still being probed: none is selectable yet.\n"
                  "CDI devices: (none)\n" },
                /* Discovery failed; a server string cannot reach the terminal raw. */
                { npu_format_chips,
                  "{\"chips\": [], \"phase\": \"failed\", \"error\": \"npu-smi: \\u001b]0;x\\u0007 gone\"}",
                  "ID  NAME  HEALTH  SELECTABLE  HELD-BY  REASON\n"
                  "The chips' discovery is failed: npu-smi: \\x1b]0;x\\x07 gone\n"
                  "CDI devices: (none)\n" },
                { npu_format_workloads,
                  "{\"workloads\": [{\"id\": \"fold\", \"description\": \"Fold a protein on one chip\", \"chips\": 1, "
                  "\"timeoutSec\": 120, \"inputs\": [\"configPath\"]}, {\"id\": \"escape-long-name\", "
                  "\"description\": \"Caf\\u00e9\", \"chips\": 16, \"timeoutSec\": 86400}]}",
                  "ID                CHIPS  TIMEOUT  DESCRIPTION\n"
                  "fold              1      120s     Fold a protein on one chip\n"
                  "escape-long-name  16     86400s   Caf\xc3\xa9\n" },
                { npu_format_workloads, "{\"workloads\": []}", "ID  CHIPS  TIMEOUT  DESCRIPTION\n" },
                { npu_format_jobs,
                  "{\"jobs\": [{\"jobId\": \"0123456789abcdef\", \"workloadId\": \"fold\", \"state\": \"succeeded\", "
                  "\"chips\": [0, 3], \"createdAt\": 1700000000123}, {\"jobId\": \"fedcba9876543210\", "
                  "\"workloadId\": \"f\\u00f6ld\", \"state\": \"queued\", \"chips\": []}]}",
                  "JOB               WORKLOAD  STATE      CHIPS  CREATED\n"
                  "0123456789abcdef  fold      succeeded  0,3    2023-11-14T22:13:20Z\n"
                  "fedcba9876543210  f\xc3\xb6ld      queued     -      -\n" },
        };

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                json_object *a = parse(cases[i].answer);
                char *t = NULL;

                assert_int_equal(cases[i].format(a, &t), 0);
                assert_string_equal(t, cases[i].expected);
                free(t);
                json_object_put(a);
        }
}

static void test_format_bad(void **state) {
        static const char *const answers[] = { "{}", "{\"chips\": {}, \"workloads\": 1, \"jobs\": \"x\"}", "[]", "3" };

        for (size_t i = 0; i < ELEMENTS(answers); i++) {
                json_object *a = parse(answers[i]);
                char *t = NULL;

                assert_int_equal(npu_format_chips(a, &t), -EBADMSG);
                assert_int_equal(npu_format_workloads(a, &t), -EBADMSG);
                assert_int_equal(npu_format_jobs(a, &t), -EBADMSG);
                assert_null(t);
                json_object_put(a);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_chips_ok),
                cmocka_unit_test(test_parse_chips_bad),
                cmocka_unit_test(test_parse_chips_count),
                cmocka_unit_test(test_device_names),
                cmocka_unit_test(test_devices_json),
                cmocka_unit_test(test_job_body),
                cmocka_unit_test(test_job_state_final),
                cmocka_unit_test(test_format),
                cmocka_unit_test(test_format_bad),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
