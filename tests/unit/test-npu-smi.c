/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/npu/npu-smi.c, table-driven: `npu-smi info -m` as an Atlas 800T A2 (910B), an
 * Atlas 800 (910A), an Atlas 300I Duo (310P) and an Atlas A3 print it, with other spacing, CRLF,
 * trailing junk, missing columns, duplicate ids, huge and non-decimal ids, and a 16-chip host;
 * `npu-smi info` (910B, 310P and A3 forms) matched by (NPU, chip), processes counted, the chips
 * left alone on a refusal; hostile input refused with a reason (sizes, NULs, long lines, 257
 * chips); and the names of the 910 series.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npu/npu-smi.h"
#include "util/macro.h"

#define MAP_HEADER "        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name\n"
#define MAP_ROW(npu, chip, logic, name) \
        "        " npu "                              " chip "                              " logic "                              " name "\n"

static const char map_910b[] =
        MAP_HEADER
        MAP_ROW("0", "0", "0", "Ascend 910B3")
        MAP_ROW("0", "1", "-", "Mcu")
        MAP_ROW("1", "0", "1", "Ascend 910B3")
        MAP_ROW("1", "1", "-", "Mcu");

static const char info_910b[] =
        "+------------------------------------------------------------------------------------------------+\n"
        "| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 0     910B3               | OK            | 93.9        38                0    / 0             |\n"
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          3379 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "| 1     910B3               | Warning       | 91.5        37                0    / 0             |\n"
        "| 0                         | 0000:C2:00.0  | 0           0    / 0          3378 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
        "+===========================+===============+====================================================+\n"
        "| No running processes found in NPU 0                                                            |\n"
        "+===========================+===============+====================================================+\n"
        "| 1       0                 | 1234567       | python3                  | 2048                    |\n"
        "+===========================+===============+====================================================+\n";

/* Atlas 300I Duo: two chips a card, one card row then one row per chip ("chip id, device id"). */
static const char map_310p[] =
        MAP_HEADER
        MAP_ROW("1", "0", "0", "Ascend 310P3")
        MAP_ROW("1", "1", "1", "Ascend 310P3")
        MAP_ROW("2", "0", "2", "Ascend 310P3")
        MAP_ROW("2", "1", "3", "Ascend 310P3");

static const char info_310p[] =
        "+--------------------------------------------------------------------------------------------------------+\n"
        "| npu-smi 23.0.0                                   Version: 23.0.0                                       |\n"
        "+-------------------------------+-----------------+------------------------------------------------------+\n"
        "| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |\n"
        "| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |\n"
        "+===============================+=================+======================================================+\n"
        "| 1       310P3                 | OK              | NA           54                0     / 0             |\n"
        "| 0       0                     | 0000:01:00.0    | 0            1685 / 44280                            |\n"
        "| 1       1                     | 0000:01:00.0    | 0            1432 / 44280                            |\n"
        "+===============================+=================+======================================================+\n"
        "| 2       310P3                 | Alarm           | NA           53                0     / 0             |\n"
        "| 0       2                     | 0000:02:00.0    | 0            1703 / 44280                            |\n"
        "| 1       3                     | 0000:02:00.0    | 0            1427 / 44280                            |\n"
        "+===============================+=================+======================================================+\n"
        "+-------------------------------+-----------------+------------------------------------------------------+\n"
        "| NPU     Chip                  | Process id      | Process name             | Process memory(MB)        |\n"
        "+===============================+=================+======================================================+\n"
        "| No running processes found in NPU 1                                                                    |\n"
        "+===============================+=================+======================================================+\n"
        "| 2       1                     | 4242            | infer                    | 512                       |\n"
        "| 2       1                     | 4243            | infer                    | 512                       |\n"
        "+===============================+=================+======================================================+\n";

/* Atlas A3 (910_93): "Chip Phy-ID" columns, two chips and an MCU a card, tabs before the columns. */
static const char map_a3[] =
        "\tNPU ID                         Chip ID                        Chip Logic ID                  Chip Phy-ID                    Chip Name                     \n"
        "\t0                              0                              0                              0                              Ascend910                     \n"
        "\t0                              1                              1                              1                              Ascend910                     \n"
        "\t0                              2                              -                              -                              Mcu                           \n"
        "\t1                              0                              2                              2                              Ascend910                     \n"
        "\t1                              1                              3                              3                              Ascend910                     \n"
        "\t1                              2                              -                              -                              Mcu                           \n";

static const char info_a3[] =
        "+------------------------------------------------------------------------------------------------+\n"
        "| npu-smi 24.1.rc3                 Version: 24.1.rc3                                             |\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU     Name              | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip    Phy-ID            | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 0     Ascend910           | OK            | 164.3       40                0    / 0             |\n"
        "| 0     0                   | 0000:9D:00.0  | 0           0    / 0          3379 / 65536         |\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| 0     Ascend910           | OK            | -           40                0    / 0             |\n"
        "| 1     1                   | 0000:9F:00.0  | 0           0    / 0          3379 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "| 1     Ascend910           | Critical      | 160.1       41                0    / 0             |\n"
        "| 0     2                   | 0000:A1:00.0  | 0           0    / 0          3379 / 65536         |\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| 1     Ascend910           | OK            | -           41                0    / 0             |\n"
        "| 1     3                   | 0000:A3:00.0  | 0           0    / 0          3379 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
        "+===========================+===============+====================================================+\n"
        "| 0       1                 | 77            | python3                  | 100                     |\n"
        "| No running processes found in NPU 1                                                            |\n"
        "+===========================+===============+====================================================+\n";

static void parse_map_ok(const char *text, NpuSmiChips *ret) {
        char *why = NULL;
        int r = npu_smi_parse_mapping(text, strlen(text), ret, &why);

        if (r < 0)
                fail_msg("mapping refused: %d %s", r, why ?: "-");
        assert_null(why);
}

static void assert_chip(const NpuSmiChip *c, unsigned logic, unsigned npu, unsigned chip, const char *name) {
        assert_int_equal(c->logic_id, logic);
        assert_int_equal(c->npu_id, npu);
        assert_int_equal(c->chip_id, chip);
        assert_string_equal(c->name, name);
}

static void test_mapping_910b(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};

        parse_map_ok(map_910b, &c);
        assert_int_equal(c.n, 2);
        assert_chip(&c.chips[0], 0, 0, 0, "Ascend 910B3");
        assert_chip(&c.chips[1], 1, 1, 0, "Ascend 910B3");
        assert_null(c.chips[0].health);
        assert_null(c.chips[0].bus_id);
        assert_int_equal(c.chips[0].n_processes, 0);
}

static void test_mapping_forms(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {}, d = {};

        parse_map_ok(map_310p, &c);
        assert_int_equal(c.n, 4);
        assert_chip(&c.chips[1], 1, 1, 1, "Ascend 310P3");
        assert_chip(&c.chips[3], 3, 2, 1, "Ascend 310P3");

        parse_map_ok(map_a3, &d);
        assert_int_equal(d.n, 4);
        assert_chip(&d.chips[0], 0, 0, 0, "Ascend910");
        assert_chip(&d.chips[3], 3, 1, 1, "Ascend910");
}

/* Accepted variants: the chips as "logic:npu:chip:name;..." in logic id order. */
static void test_mapping_variants(void **state) {
        static const struct {
                const char *text, *expect;
        } cases[] = {
                /* Atlas 800 (910A) */
                { MAP_HEADER MAP_ROW("0", "0", "0", "Ascend 910B") MAP_ROW("1", "0", "1", "Ascend 910B"),
                  "0:0:0:Ascend 910B;1:1:0:Ascend 910B;" },
                /* single spaces, CRLF, blank lines around, runs of blanks inside the name */
                { "\r\n\nNPU ID Chip ID Chip Logic ID Chip Name\r\n0 0 0 Ascend   910B3\r\n\r\n", "0:0:0:Ascend 910B3;" },
                /* tabs, trailing blanks, no final newline */
                { "NPU ID\tChip ID\tChip Logic ID\tChip Name\t\n\t3\t0\t7\tAscend 910B4  \t", "7:3:0:Ascend 910B4;" },
                /* unsorted rows come out sorted by logic id */
                { "NPU ID Chip ID Chip Logic ID Chip Name\n5 0 9 A\n1 0 2 B\n3 0 0 C\n", "0:3:0:C;2:1:0:B;9:5:0:A;" },
                /* the largest id; the columns in another order; a Slot ID */
                { "NPU ID Chip ID Chip Logic ID Chip Name\n999999999 0 999999999 X\n", "999999999:999999999:0:X;" },
                { "Chip Logic ID  Slot ID  NPU ID  Chip ID  Chip Name\n4 - 2 1 Ascend 950\n", "4:2:1:Ascend 950;" },
                /* the header alone: no chips; MCU rows only: no chips */
                { MAP_HEADER, "" },
                { MAP_HEADER MAP_ROW("0", "1", "-", "Mcu"), "" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
                char got[512] = "";

                parse_map_ok(cases[i].text, &c);
                for (size_t j = 0; j < c.n; j++)
                        (void) snprintf(got + strlen(got), sizeof(got) - strlen(got), "%u:%u:%u:%s;", c.chips[j].logic_id,
                                        c.chips[j].npu_id, c.chips[j].chip_id, c.chips[j].name);
                if (!streq(got, cases[i].expect))
                        fail_msg("case %zu: got '%s', expected '%s'", i, got, cases[i].expect);
        }
}

/* Refused: -EBADMSG, and the reason names the line (when there is one) and says what is wrong. */
static void test_mapping_refused(void **state) {
        static const struct {
                const char *text, *why;
        } cases[] = {
                { "", "empty" },
                { "\n  \n", "empty" },
                { "dcmi model initialized failed, because the device is used. ret is -8020\n",
                  "line 1: not the header of `npu-smi info -m`" },
                { "NPU ID Chip ID Chip Name\n0 0 X\n", "line 1: not the header" },              /* no logic id */
                { "NPU ID Chip ID Chip Logic ID Chip Name Chip ID\n", "line 1: not the header" }, /* twice */
                { "NPU ID Chip Name Chip ID Chip Logic ID\n", "line 1: not the header" },      /* name not last */
                { "NPU ID Chip ID Chip Logic ID Chip Name Extra\n", "line 1: not the header" },
                { MAP_HEADER MAP_ROW("0", "0", "0", "Ascend 910B3") "garbage\n", "line 3: 'NPU ID' is not a decimal id" },
                { MAP_HEADER MAP_ROW("0", "0", "0", "Ascend 910B3") "Total: 1\n", "line 3:" },
                { MAP_HEADER "0 0 Ascend 910B3\n", "line 2: 'Chip Logic ID' is not a decimal id" },  /* missing column */
                { MAP_HEADER "0 0 0\n", "line 2: the row has no chip name" },
                { MAP_HEADER "0 0\n", "line 2: the row has fewer than the header's 4 columns" },
                { MAP_HEADER "0 0 0 A\n1 0 0 B\n", "line 3: chip logic id 0 is listed twice" },
                { MAP_HEADER "0 0 0 A\n0 0 1 B\n", "line 3: NPU 0 chip 0 is listed twice" },
                { MAP_HEADER "0 0 1000000000 A\n", "line 2: 'Chip Logic ID' is not a decimal id" },
                { MAP_HEADER "0 0 4294967296 A\n", "line 2: 'Chip Logic ID'" },
                { MAP_HEADER "0 0 99999999999999999999999 A\n", "line 2: 'Chip Logic ID'" },
                { MAP_HEADER "0 0 01 A\n", "line 2: 'Chip Logic ID'" },                      /* leading zero */
                { MAP_HEADER "0 0 +1 A\n", "line 2: 'Chip Logic ID'" },
                { MAP_HEADER "0 0 -1 A\n", "line 2: 'Chip Logic ID'" },
                { MAP_HEADER "0 0 0x1 A\n", "line 2: 'Chip Logic ID'" },
                { MAP_HEADER "0 0 1a A\n", "line 2: 'Chip Logic ID'" },
                { MAP_HEADER "a 0 0 A\n", "line 2: 'NPU ID'" },
                { MAP_HEADER "- 0 0 A\n", "line 2: 'NPU ID' is '-'" },
                { MAP_HEADER "0 - 0 A\n", "line 2: 'Chip ID' is '-'" },
                { MAP_HEADER "0 0 0 Ascend\x01" "910\n", "line 2: the chip name holds a byte that is not printable" },
                { MAP_HEADER "0 0 0 Ascend \xe6\x98\x87\xe8\x85\xbe\n", "line 2: the chip name holds a byte" },
                { MAP_HEADER "0 0 0 Ascend\r910\n", "line 2: the chip name holds a byte" },
                { MAP_HEADER "0 0 0 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
                  "line 2: the chip name is longer than 64 bytes" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                NpuSmiChips c = { .n = 12345 };
                _cleanup_free_ char *why = NULL;
                int r = npu_smi_parse_mapping(cases[i].text, strlen(cases[i].text), &c, &why);

                if (r != -EBADMSG || !why || !strstr(why, cases[i].why))
                        fail_msg("case %zu: %d '%s', expected -EBADMSG '%s'", i, r, why ?: "-", cases[i].why);
                assert_int_equal(c.n, 12345);                   /* @ret untouched */
        }
}

/* Hostile sizes and bytes: a NUL, a line over 4 KiB, more than 1 MiB, a 257th chip. */
static void test_mapping_hostile(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips ok = {};
        _cleanup_free_ char *big = NULL, *why = NULL;
        NpuSmiChips c = {};
        size_t n = 0, cap = 2 * NPU_SMI_INPUT_MAX;
        static const char nul[] = MAP_HEADER "0 0 0 Asc\0end\n";
        int r;

        r = npu_smi_parse_mapping(nul, sizeof(nul) - 1, &c, &why);
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(why, "line 2: the line holds a NUL byte"));
        why = mfree(why);

        /* a prefix of the text: nothing past @len is read (the row is cut before its name) */
        r = npu_smi_parse_mapping(map_910b, strlen(MAP_HEADER) + 40, &c, &why);
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(why, "line 2"));
        why = mfree(why);

        big = malloc(cap);
        assert_non_null(big);
        n = (size_t) snprintf(big, cap, "NPU ID Chip ID Chip Logic ID Chip Name\n0 0 0 ");
        memset(big + n, 'A', NPU_SMI_LINE_MAX);
        memcpy(big + n + NPU_SMI_LINE_MAX, "\n", 2);
        r = npu_smi_parse_mapping(big, strlen(big), &c, &why);
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(why, "line 2: the line is longer than 4096 bytes"));
        why = mfree(why);

        memset(big, '\n', cap);
        r = npu_smi_parse_mapping(big, NPU_SMI_INPUT_MAX + 1, &c, &why);
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(why, "larger than 1 MiB"));
        why = mfree(why);

        /* 256 chips are fine, a 257th is refused */
        n = (size_t) snprintf(big, cap, "NPU ID Chip ID Chip Logic ID Chip Name\n");
        for (unsigned i = 0; i < NPU_SMI_CHIPS_MAX; i++)
                n += (size_t) snprintf(big + n, cap - n, "%u 0 %u Ascend 910B3\n%u 1 - Mcu\n", i, i, i);
        parse_map_ok(big, &ok);
        assert_int_equal(ok.n, NPU_SMI_CHIPS_MAX);
        assert_int_equal(ok.chips[255].logic_id, 255);
        (void) snprintf(big + n, cap - n, "999 0 999 Ascend 910B3\n");
        r = npu_smi_parse_mapping(big, strlen(big), &c, &why);
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(why, "line 514: more than 256 chips"));

        assert_int_equal(npu_smi_parse_mapping(NULL, 0, &c, NULL), -EBADMSG);   /* empty, no reason asked */
}

static void parse_info_ok(const char *map, const char *info, NpuSmiChips *ret) {
        char *why = NULL;
        int r;

        parse_map_ok(map, ret);
        r = npu_smi_parse_info(info, strlen(info), ret, &why);
        if (r < 0)
                fail_msg("info refused: %d %s", r, why ?: "-");
}

static void assert_state(const NpuSmiChip *c, const char *health, const char *bus, unsigned n_processes) {
        if (health)
                assert_string_equal(c->health, health);
        else
                assert_null(c->health);
        if (bus)
                assert_string_equal(c->bus_id, bus);
        else
                assert_null(c->bus_id);
        assert_int_equal(c->n_processes, n_processes);
}

static void test_info_forms(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips b = {}, p = {}, a = {};

        parse_info_ok(map_910b, info_910b, &b);
        assert_int_equal(b.n, 2);
        assert_state(&b.chips[0], "OK", "0000:C1:00.0", 0);
        assert_state(&b.chips[1], "Warning", "0000:C2:00.0", 1);
        assert_string_equal(b.chips[1].name, "Ascend 910B3");   /* the name is `info -m`'s */

        parse_info_ok(map_310p, info_310p, &p);
        assert_state(&p.chips[0], "OK", "0000:01:00.0", 0);
        assert_state(&p.chips[1], "OK", "0000:01:00.0", 0);
        assert_state(&p.chips[2], "Alarm", "0000:02:00.0", 0);
        assert_state(&p.chips[3], "Alarm", "0000:02:00.0", 2);

        parse_info_ok(map_a3, info_a3, &a);
        assert_state(&a.chips[0], "OK", "0000:9D:00.0", 0);
        assert_state(&a.chips[1], "OK", "0000:9F:00.0", 1);
        assert_state(&a.chips[2], "Critical", "0000:A1:00.0", 0);
        assert_state(&a.chips[3], "OK", "0000:A3:00.0", 0);
}

/* Chips that the table does not list get no health; rows of chips `-m` did not list are skipped;
 * a second parse replaces what the first filled in. */
static void test_info_matching(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        _cleanup_free_ char *why = NULL;
        static const char map[] = MAP_HEADER MAP_ROW("0", "0", "0", "Ascend 910B3") MAP_ROW("7", "0", "5", "Ascend 910B3");
        static const char info[] =
                "| NPU Name | Health | Power(W) |\n| Chip | Bus-Id | AICore(%) |\n+====+\n"
                "| 0 910B3 | OK | 1 |\n| 0 | 0000:C1:00.0 | 0 |\n+----+\n"
                "| 3 910B3 | OK | 1 |\n| 0 | 0000:C9:00.0 | 0 |\n+----+\n"   /* NPU 3: not in `-m` */
                "| 0 910B3 | Warning | 1 |\n| 1 | | 0 |\n+----+\n"            /* NPU 0 chip 1: neither */
                "| NPU Chip | Process id | Process name | Process memory(MB) |\n"
                "| 7 0 | 10 | a | 1 |\n| 7 0 | 11 | b | 1 |\n| 3 0 | 12 | c | 1 |\n| 7 0 | 13 | d | 1 |\n";

        parse_info_ok(map, info, &c);
        assert_state(&c.chips[0], "OK", "0000:C1:00.0", 0);
        assert_state(&c.chips[1], NULL, NULL, 3);               /* processes, but not in the device table */

        assert_int_equal(npu_smi_parse_info(info_910b, strlen(info_910b), &c, &why), 0);
        assert_state(&c.chips[0], "OK", "0000:C1:00.0", 0);
        assert_state(&c.chips[1], NULL, NULL, 0);               /* NPU 7 is not in this one */
}

/* Refused, the chips' state left as it was. */
static void test_info_refused(void **state) {
#define HEAD "| NPU Name | Health | Power(W) |\n| Chip | Bus-Id | AICore(%) |\n+===+\n"
#define CARD0 "| 0 910B3 | OK | 1 |\n| 0 | 0000:C1:00.0 | 0 |\n+---+\n"
#define PROCS "| NPU Chip | Process id | Process name | Process memory(MB) |\n"
        static const struct {
                const char *text, *why;
        } cases[] = {
                { "", "no device table" },
                { "+---+\n| npu-smi 23.0.rc3 Version: 23.0.rc3 |\n+---+\n", "no device table" },
                { "dcmi module initialize failed. ret is -8005\n", "line 1: neither a border nor a table row" },
                { "| something else | x |\n", "line 1: not the device table's header" },
                { HEAD CARD0, "no process table" },
                { "| NPU Name | Health | Power(W) |\n+---+\n", "line 2: the device table's header has one row" },
                { "| NPU Name | Health | Power(W) |\n", "ended within the device table's header" },
                { "| NPU Name | Health | Power(W) |\n| Chip | Bus | x |\n", "line 2: the device table's second header row" },
                { "| NPU Name | Health | P |\n| Die | Bus-Id | x |\n", "line 2: the device table's second header row starts" },
                { "| NPU Name | Health | P |\n| Chip | Bus-Id |\n", "line 2: the device table's second header row" },
                { HEAD "| 0 910B3 | OK |\n", "line 4: the row has 2 cells, the device table's header 3" },
                { HEAD "| 0 910B3 | OK | 1 |\n+---+\n" PROCS, "line 4: the card row is followed by no chip row" },
                { HEAD "| 0 910B3 | OK | 1 |\n" PROCS, "line 4: the card row is followed by no chip row" },
                { HEAD CARD0 CARD0 PROCS, "line 8: NPU 0 chip 0 is listed twice (first on line 5)" },
                { HEAD "| x 910B3 | OK | 1 |\n", "line 4: the card row does not start with a decimal NPU id" },
                { HEAD "| 0 | OK | 1 |\n", "line 4: the card row has no chip name" },
                { HEAD "| 0 910B3 | Not OK | 1 |\n", "line 4: the health is not one printable word" },
                { HEAD "| 0 910B3 | | 1 |\n", "line 4: the health" },
                { HEAD "| 0 910B3 | OK | 1 |\n| 0 1 | 0000:C1:00.0 | 0 |\n", "line 5: the chip row's first cell holds more" },
                { HEAD "| 0 910B3 | OK | 1 |\n| - | 0000:C1:00.0 | 0 |\n", "line 5: the chip row does not start" },
                { HEAD "| 0 910B3 | OK | 1 |\n| 0 | 0000:C1:00.0; rm | 0 |\n", "line 5: the bus id is not one word" },
                { HEAD "| 0 910B3 | OK | 1 |\n| 0 | 0000:C1:00.0 | 0\n", "line 5: neither a border nor a table row" },
                { HEAD CARD0 "garbage\n" PROCS, "line 7: neither a border nor a table row" },
                { HEAD CARD0 "+--x--+\n", "line 7: a border holds more" },
                { HEAD CARD0 PROCS "| 0 0 | 123 | a |\n", "line 8: the row has 3 cells, the process table's header 4" },
                { HEAD CARD0 PROCS "| 0 | 123 | a | 1 |\n", "line 8: the process row does not start" },
                { HEAD CARD0 PROCS "| 0 0 | -5 | a | 1 |\n", "line 8: the process id is not a decimal id" },
                { HEAD CARD0 PROCS "| No running processes found in NPU x |\n", "line 8: a process table row of one cell" },
                { HEAD CARD0 PROCS "| NPU Name | Health | Power(W) |\n", "line 8: the row has 3 cells" },
                { HEAD CARD0 PROCS "trailing junk\n", "line 8: neither" },
                { HEAD "| 0 910B3 | OK | 1 |\n| 0 | 0000:C1:00.0 | 0 | | | | | | | |\n", "line 5: neither" },
        };
#undef HEAD
#undef CARD0
#undef PROCS
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};

        parse_info_ok(map_910b, info_910b, &c);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *why = NULL;
                int r = npu_smi_parse_info(cases[i].text, strlen(cases[i].text), &c, &why);

                if (r != -EBADMSG || !why || !strstr(why, cases[i].why))
                        fail_msg("case %zu: %d '%s', expected -EBADMSG '%s'", i, r, why ?: "-", cases[i].why);
                assert_state(&c.chips[0], "OK", "0000:C1:00.0", 0);
                assert_state(&c.chips[1], "Warning", "0000:C2:00.0", 1);
        }
}

/* CRLF, and the hostile sizes of the mapping hold for `npu-smi info` too. */
static void test_info_crlf_hostile(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        _cleanup_free_ char *crlf = NULL, *why = NULL;
        size_t n = 0;

        crlf = malloc(2 * sizeof(info_910b));
        assert_non_null(crlf);
        for (const char *p = info_910b; *p; p++) {
                if (*p == '\n')
                        crlf[n++] = '\r';
                crlf[n++] = *p;
        }
        crlf[n] = '\0';
        parse_info_ok(map_910b, crlf, &c);
        assert_state(&c.chips[1], "Warning", "0000:C2:00.0", 1);

        strchr(crlf, '\n')[5] = '\0';                         /* a NUL in line 2 */
        assert_int_equal(npu_smi_parse_info(crlf, n, &c, &why), -EBADMSG);
        assert_non_null(strstr(why, "line 2: the line holds a NUL byte"));
        why = mfree(why);
        assert_int_equal(npu_smi_parse_info(crlf, NPU_SMI_INPUT_MAX + 1, &c, &why), -EBADMSG);
        assert_non_null(strstr(why, "larger than 1 MiB"));
        assert_int_equal(npu_smi_parse_info(NULL, 0, &c, NULL), -EBADMSG);
}

/* A 16-chip 910B host (16 cards of one chip and an MCU), its `info` generated in the 910B form. */
static void test_sixteen_chips(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        _cleanup_free_ char *map = NULL, *info = NULL;
        size_t m = 0, n = 0, cap = 64 * 1024;

        map = malloc(cap);
        info = malloc(cap);
        assert_true(map && info);
        m += (size_t) snprintf(map + m, cap - m, MAP_HEADER);
        n += (size_t) snprintf(info + n, cap - n, "| NPU   Name | Health | Power(W) |\n| Chip | Bus-Id | AICore(%%) |\n"
                               "+=====+=====+=====+\n");
        for (unsigned i = 0; i < 16; i++) {
                m += (size_t) snprintf(map + m, cap - m, "\t%u\t0\t%u\tAscend 910B%u\n\t%u\t1\t-\tMcu\n", 15 - i, 15 - i,
                                       1 + i % 4, 15 - i);
                n += (size_t) snprintf(info + n, cap - n, "| %u 910B%u | %s | 90.0 |\n| 0 | 0000:%02X:00.0 | 0 |\n+-----+\n",
                                       i, 1 + (15 - i) % 4, i == 9 ? "Alarm" : "OK", 0xC1 + i);
        }
        n += (size_t) snprintf(info + n, cap - n, "| NPU Chip | Process id | Process name | Process memory(MB) |\n");
        for (unsigned i = 0; i < 16; i++)
                n += (size_t) (i % 2 ? snprintf(info + n, cap - n, "| %u 0 | %u | python3 | 100 |\n| %u 0 | %u | x | 1 |\n",
                                                i, 1000 + i, i, 2000 + i)
                                     : snprintf(info + n, cap - n, "| No running processes found in NPU %u |\n", i));
        parse_info_ok(map, info, &c);
        assert_int_equal(c.n, 16);
        for (unsigned i = 0; i < 16; i++) {
                char bus[16];

                (void) snprintf(bus, sizeof(bus), "0000:%02X:00.0", 0xC1 + i);
                assert_chip(&c.chips[i], i, i, 0, (const char *[]) { "Ascend 910B1", "Ascend 910B2", "Ascend 910B3",
                                                                     "Ascend 910B4" }[(15 - i) % 4]);
                assert_state(&c.chips[i], i == 9 ? "Alarm" : "OK", bus, i % 2 ? 2 : 0);
        }
}

static void test_name_is_910(void **state) {
        static const struct {
                const char *name;
                bool is_910;
        } cases[] = {
                { "Ascend 910", true },
                { "Ascend 910A", true },
                { "Ascend 910B", true },
                { "Ascend 910B1", true },
                { "Ascend 910B2", true },
                { "Ascend 910B3", true },
                { "Ascend 910B4", true },
                { "Ascend 910ProA", true },
                { "Ascend 910PremiumA", true },
                { "Ascend 910C", true },
                { "Ascend 910_9391", true },
                { "Ascend 910_9392", true },
                { "Ascend910", true },
                { "Ascend910B3", true },
                { "ASCEND 910B", true },
                { "910B4", true },
                { "910B3", true },
                { "910", true },
                { "Ascend 310P3", false },
                { "Ascend 310B1", false },
                { "Ascend 310", false },
                { "310P3", false },
                { "Mcu", false },
                { "", false },
                { "Ascend", false },
                { "Ascend 9100", false },
                { "Ascend 91", false },
                { "Ascend 910_", false },
                { "Ascend 910_93a", false },
                { "Ascend 910 B", false },
                { "Ascend 910-B", false },
                { "Ascend 910B3 ", false },
                { "Kunpeng 910", false },
                { "Ascend 1910", false },
                { "Ascend 950PR", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (npu_chip_name_is_910(cases[i].name) != cases[i].is_910)
                        fail_msg("'%s': expected %s", cases[i].name, cases[i].is_910 ? "910" : "not 910");
        assert_false(npu_chip_name_is_910(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mapping_910b),
                cmocka_unit_test(test_mapping_forms),
                cmocka_unit_test(test_mapping_variants),
                cmocka_unit_test(test_mapping_refused),
                cmocka_unit_test(test_mapping_hostile),
                cmocka_unit_test(test_info_forms),
                cmocka_unit_test(test_info_matching),
                cmocka_unit_test(test_info_refused),
                cmocka_unit_test(test_info_crlf_hostile),
                cmocka_unit_test(test_sixteen_chips),
                cmocka_unit_test(test_name_is_910),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
