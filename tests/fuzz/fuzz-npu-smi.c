/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * npu-smi's output (src/npu/npu-smi.c): the input, split at its first NUL byte (in half when it has
 * none), is the text of `npu-smi info -m` and then that of `npu-smi info`, both handed over in
 * place (not NUL-terminated: a read past either is a sanitizer report). Invariants: each parse
 * answers 0 or -EBADMSG with a reason (or -ENOMEM); an accepted mapping has at most 256 chips, each
 * named (printable ASCII, at most 64 bytes, no blank at either end), with logic ids ascending and
 * unique, (NPU, chip) pairs unique, and no state yet; `info` keeps the chips' ids and names, sets a
 * health and a bus id only as one printable word, and leaves the chips' state alone on a refusal.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "npu/npu-smi.h"

/* Room for "logic npu chip name" of one chip. */
#define ROW 112

static void check_word(const char *s) {
        if (!s)
                return;
        FUZZ_CHECK(*s != '\0' && strlen(s) <= 32);
        for (const char *p = s; *p; p++)
                FUZZ_CHECK(*p > 0x20 && *p < 0x7f);
}

static void check_chips(const NpuSmiChips *c) {
        FUZZ_CHECK(c->n <= NPU_SMI_CHIPS_MAX);
        FUZZ_CHECK(c->n == 0 || c->chips);
        for (size_t i = 0; i < c->n; i++) {
                const NpuSmiChip *x = &c->chips[i];
                size_t n;

                FUZZ_CHECK(x->name);
                n = strlen(x->name);
                FUZZ_CHECK(n > 0 && n <= 64 && x->name[0] != ' ' && x->name[n - 1] != ' ');
                for (const char *p = x->name; *p; p++)
                        FUZZ_CHECK(*p >= 0x20 && *p < 0x7f);
                FUZZ_CHECK(x->logic_id <= NPU_SMI_ID_MAX && x->npu_id <= NPU_SMI_ID_MAX && x->chip_id <= NPU_SMI_ID_MAX);
                FUZZ_CHECK(i == 0 || c->chips[i - 1].logic_id < x->logic_id);
                for (size_t j = 0; j < i; j++)
                        FUZZ_CHECK(c->chips[j].npu_id != x->npu_id || c->chips[j].chip_id != x->chip_id);
                check_word(x->health);
                check_word(x->bus_id);
                (void) npu_chip_name_is_910(x->name);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NpuSmiChips c = {};
        const uint8_t *nul;
        char *why = NULL, *names;
        size_t n_map, n_info;
        const char *info;
        int r;

        if (size > 4 * NPU_SMI_INPUT_MAX)
                return 0;
        nul = memchr(data, 0, size);
        n_map = nul ? (size_t) (nul - data) : size / 2;
        info = (const char *) data + n_map + (nul ? 1 : 0);
        n_info = size - n_map - (nul ? 1 : 0);

        r = npu_smi_parse_mapping((const char *) data, n_map, &c, &why);
        FUZZ_CHECK(r == 0 || r == -ENOMEM || (r == -EBADMSG && why));
        free(why);
        why = NULL;
        if (r < 0)
                return 0;
        check_chips(&c);
        for (size_t i = 0; i < c.n; i++)
                FUZZ_CHECK(!c.chips[i].health && !c.chips[i].bus_id && c.chips[i].n_processes == 0);

        /* the names and ids, to compare after `info` */
        names = calloc(c.n + 1, ROW);
        FUZZ_CHECK(names);
        for (size_t i = 0; i < c.n; i++)
                (void) snprintf(names + ROW * i, ROW, "%u %u %u %s", c.chips[i].logic_id, c.chips[i].npu_id,
                                c.chips[i].chip_id, c.chips[i].name);

        r = npu_smi_parse_info(info, n_info, &c, &why);
        FUZZ_CHECK(r == 0 || r == -ENOMEM || (r == -EBADMSG && why));
        free(why);
        check_chips(&c);
        for (size_t i = 0; i < c.n; i++) {
                char now[ROW];

                (void) snprintf(now, sizeof(now), "%u %u %u %s", c.chips[i].logic_id, c.chips[i].npu_id,
                                c.chips[i].chip_id, c.chips[i].name);
                FUZZ_CHECK(strcmp(now, names + ROW * i) == 0);
                if (r < 0)
                        FUZZ_CHECK(!c.chips[i].health && !c.chips[i].bus_id && c.chips[i].n_processes == 0);
                else
                        FUZZ_CHECK(c.chips[i].health || !c.chips[i].bus_id);
        }
        free(names);
        npu_smi_chips_done(&c);
        return 0;
}
