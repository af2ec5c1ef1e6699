/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parsers of the text Huawei's `npu-smi` prints (DESIGN.md §9): `npu-smi info -m` (which chip
 * logic id, the N of /dev/davinciN, belongs to which card and chip, and the chip's name) and
 * `npu-smi info` (health, PCI bus id and processes per chip), plus the rule that says which chip
 * names are of the Ascend 910 series. Pure: no I/O, no logging.
 *
 * The text is untrusted tool output (SECURITY.md §4-5): the input is bounded (at most
 * NPU_SMI_INPUT_MAX bytes, lines of at most NPU_SMI_LINE_MAX bytes, at most NPU_SMI_CHIPS_MAX
 * chips), a NUL byte anywhere is refused, nothing is read past @len, and each refusal says on
 * which line and why. Tolerant of spacing (columns are aligned with any run of spaces or tabs,
 * lines may end in CRLF, blank lines are skipped), strict about structure (every line must be
 * one the table can hold there).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The most bytes of one output accepted. */
#define NPU_SMI_INPUT_MAX ((size_t) 1024 * 1024)
/* The longest line accepted (without its line ending). */
#define NPU_SMI_LINE_MAX ((size_t) 4096)
/* The most chips (rows with a logic id) accepted. */
#define NPU_SMI_CHIPS_MAX 256
/* The largest id accepted (nine decimal digits, as the N of /dev/davinciN). */
#define NPU_SMI_ID_MAX 999999999U

typedef struct NpuSmiChip {
        unsigned logic_id;      /* "Chip Logic ID": the N of /dev/davinciN: the chip's identity everywhere */
        unsigned npu_id;        /* "NPU ID" (the card) */
        unsigned chip_id;       /* "Chip ID" (index on the card) */
        char *name;             /* "Ascend 910B3" as printed by `info -m` (trimmed) */
        char *health;           /* from `npu-smi info`: "OK", "Warning", "Alarm", "Critical", "UNKNOWN"...;
                                 * NULL = not in the table */
        char *bus_id;           /* from `npu-smi info`, NULL if absent */
        unsigned n_processes;   /* processes listed on this chip by `npu-smi info` */
} NpuSmiChip;

typedef struct NpuSmiChips {
        NpuSmiChip *chips;
        size_t n;
} NpuSmiChips;

/*
 * npu_smi_parse_mapping() - the text of `npu-smi info -m`: a header line naming the columns, then
 * one row per chip. The header holds "NPU ID", "Chip ID", "Chip Logic ID" once each, in any
 * order, may hold "Chip Phy-ID" and "Slot ID" (newer drivers, Atlas A3 and 950), and ends with
 * "Chip Name"; blank lines may come before it. Each row holds one value per column but the last:
 * a decimal id without a sign or a leading zero, at most NPU_SMI_ID_MAX ("-" only for the logic id
 * and the optional columns), then the name, the rest of the line: printable ASCII, runs of
 * whitespace inside it collapsed to one space, at most 64 bytes. Rows whose logic id is "-" (the
 * MCU of each card) are skipped. Two rows with the same logic id, or the same NPU ID and Chip ID,
 * are refused. The chips are sorted by logic id; none at all (the header alone) is no error.
 * @ret is written only on success (then npu_smi_chips_done() it).
 * Return: 0, -EBADMSG with *@ret_why (allocated: "line N: ..."; not touched if @ret_why is NULL),
 * -ENOMEM.
 */
int npu_smi_parse_mapping(const char *text, size_t len, NpuSmiChips *ret, char **ret_why);

/*
 * npu_smi_parse_info() - the text of `npu-smi info`, into the chips of @chips (from
 * npu_smi_parse_mapping() or DCMI), matched by (npu_id, chip_id): their health, bus_id and
 * n_processes are replaced (health and bus_id NULL, n_processes 0 for a chip the text does not
 * list). Boxes drawn with '+', '-', '=' and '|': a title ("| npu-smi 23.0.rc3 ... |"), the device
 * table and the process table. The device table's header is two rows: "NPU Name | Health | ..."
 * and "Chip | Bus-Id | ..." (910B: one chip id per chip row), "Chip Device | Bus-Id | ..." (310P:
 * chip id and device id) or "Chip Phy-ID | Bus-Id | ..." (Atlas A3: chip id and physical id); the
 * second value of a chip row is not used. Each block between border lines is one card row ("0
 * 910B3 | OK | ...": NPU id, name, health) and one or more chip rows ("0 | 0000:C1:00.0 | ...":
 * chip id, bus id), each row with as many cells as the header. The process table's header is
 * "NPU Chip | Process id | Process name | Process memory(MB)"; its rows are "No running processes
 * found in NPU N" or "N C | pid | name | memory". Rows naming a chip that @chips does not hold are
 * skipped; a chip listed twice in the device table is refused, and so is a text without the
 * device table or without the process table. @chips is changed only on success.
 * Return: 0, -EBADMSG with *@ret_why (allocated, "line N: ..."), -ENOMEM.
 */
int npu_smi_parse_info(const char *text, size_t len, NpuSmiChips *chips, char **ret_why);

/* npu_smi_chips_done() - free what @c holds and empty it (c->chips NULL, c->n 0). */
void npu_smi_chips_done(NpuSmiChips *c);

/*
 * npu_chip_name_is_910() - whether a chip name (as `info -m`, `info` or DCMI print it) is of the
 * Ascend 910 series: an optional "Ascend" (any case) and optional spaces, then "910", then either
 * nothing, or a letter followed by letters and digits (910A, 910B, 910B1..910B4, 910C, 910ProA,
 * 910ProB, 910PremiumA), or '_' followed by digits (910_9391, 910_9392, 910_9362: the Atlas A3
 * chips). So "Ascend 910B3", "910B4", "Ascend910", "Ascend 910_9391" are; "Ascend 310P3",
 * "Ascend 310B1", "Ascend 9100", "Mcu", "" and NULL are not.
 */
bool npu_chip_name_is_910(const char *name);
