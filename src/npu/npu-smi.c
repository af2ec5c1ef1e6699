/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parsers of `npu-smi info -m` and `npu-smi info`, and the Ascend 910 name rule: pure and bounded. */

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "npu/npu-smi.h"
#include "util/macro.h"
#include "util/string-util.h"

/* The longest chip name kept, and the longest health or bus id. */
#define NPU_SMI_NAME_MAX 64
#define NPU_SMI_FIELD_MAX 32
/* The most cells of one row of `npu-smi info` (the widest table has 4). */
#define INFO_CELLS_MAX 8

/* A piece of the input: never NUL-terminated, never read past n. */
typedef struct Slice {
        const char *p;
        size_t n;
} Slice;


/* span_dup() - @n bytes of @p as a string. Not strndup(): the input is not NUL-terminated and
 * need not be (the fuzz target hands out the bare buffer), so nothing past @n may be read. */
static char *span_dup(const char *p, size_t n) {
        char *t = malloc(n + 1);

        if (!t)
                return NULL;
        memcpy(t, p, n);
        t[n] = '\0';
        return t;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

static Slice slice_trim(Slice s) {
        while (s.n > 0 && is_blank(s.p[0])) {
                s.p++;
                s.n--;
        }
        while (s.n > 0 && is_blank(s.p[s.n - 1]))
                s.n--;
        return s;
}

/* slice_token() - the next run of non-blank bytes of *@s into *@ret; *@s then starts after it. */
static bool slice_token(Slice *s, Slice *ret) {
        size_t i = 0, j;

        while (i < s->n && is_blank(s->p[i]))
                i++;
        if (i == s->n) {
                *s = (Slice) { s->p + s->n, 0 };
                return false;
        }
        for (j = i; j < s->n && !is_blank(s->p[j]); j++)
                ;
        *ret = (Slice) { s->p + i, j - i };
        *s = (Slice) { s->p + j, s->n - j };
        return true;
}

static bool slice_is(Slice s, const char *word) {
        size_t n = strlen(word);

        /* s holds no NUL (refused by line_next()), so strncasecmp() stops at n bytes of it */
        return s.n == n && strncasecmp(s.p, word, n) == 0;
}

/* slice_eat_words() - whether *@s starts with the space-separated @words (any case, any spacing);
 * if so, *@s is moved past them, else it is left alone. */
static bool slice_eat_words(Slice *s, const char *words) {
        Slice rest = *s, tok;

        for (const char *w = words; *w;) {
                size_t n = strcspn(w, " ");

                if (!slice_token(&rest, &tok) || tok.n != n || strncasecmp(tok.p, w, n) != 0)
                        return false;
                w += n;
                w += strspn(w, " ");
        }
        *s = rest;
        return true;
}

static bool slice_words_are(Slice s, const char *words) {
        Slice tok;

        return slice_eat_words(&s, words) && !slice_token(&s, &tok);
}

/* parse_id() - a decimal id: 1-9 digits, no sign, no leading zero ("0" itself is fine). */
static bool parse_id(Slice t, unsigned *ret) {
        unsigned v = 0;

        if (t.n == 0 || t.n > 9 || (t.n > 1 && t.p[0] == '0'))
                return false;
        for (size_t i = 0; i < t.n; i++) {
                if (t.p[i] < '0' || t.p[i] > '9')
                        return false;
                v = v * 10 + (unsigned) (t.p[i] - '0');
        }
        *ret = v;
        return true;
}

/* fail() - -EBADMSG, with *@ret_why = "line N: <text>" (just the text for line 0). */
_printf_(3, 4) static int fail(char **ret_why, unsigned line, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int r;

        if (!ret_why)
                return -EBADMSG;
        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (line == 0) {
                *ret_why = STEAL(msg);
                return -EBADMSG;
        }
        if (asprintf(ret_why, "line %u: %s", line, msg) < 0) {
                *ret_why = NULL;
                return -ENOMEM;
        }
        return -EBADMSG;
}

/* fail_quoting() - fail() with the start of the offending line appended, escaped for a log. */
static int fail_quoting(char **ret_why, unsigned line, const char *what, Slice s) {
        _cleanup_free_ char *raw = NULL, *quoted = NULL;

        if (!ret_why)
                return -EBADMSG;
        raw = span_dup(s.p, MIN(s.n, (size_t) 80));
        if (!raw)
                return -ENOMEM;
        quoted = str_escape_log(raw, 64);
        if (!quoted)
                return -ENOMEM;
        return fail(ret_why, line, "%s: '%s'", what, quoted);
}

/* text_dup() - a copy of @s trimmed, each run of blanks inside made one space. Return: 0, -EINVAL
 * (a byte that is not printable ASCII), -E2BIG (more than @max bytes), -ENOMEM. */
static int text_dup(Slice s, size_t max, char **ret) {
        _cleanup_free_ char *t = NULL;
        size_t j = 0;

        s = slice_trim(s);
        t = malloc(MIN(s.n, max) + 1);
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < s.n; i++) {
                char c = s.p[i];

                if (is_blank(c) && is_blank(s.p[i - 1]))        /* i > 0: s is trimmed */
                        continue;
                if (is_blank(c))
                        c = ' ';
                else if (c < 0x20 || c > 0x7e)
                        return -EINVAL;
                if (j >= max)
                        return -E2BIG;
                t[j++] = c;
        }
        t[j] = '\0';
        *ret = STEAL(t);
        return 0;
}

/* ---- lines ------------------------------------------------------------------------------------ */

typedef struct LineReader {
        const char *text;
        size_t len, pos;
        unsigned line;          /* the number of the line last returned, from 1 */
} LineReader;

/* line_next() - the next line, without its "\n" and a "\r" before it. Return: 1 with *@ret, 0 at
 * the end of the text, -EBADMSG for a line over NPU_SMI_LINE_MAX bytes or holding a NUL byte. */
static int line_next(LineReader *r, Slice *ret, char **ret_why) {
        const char *p, *nl;
        size_t n;

        if (r->pos >= r->len)
                return 0;
        p = r->text + r->pos;
        nl = memchr(p, '\n', r->len - r->pos);
        n = nl ? (size_t) (nl - p) : r->len - r->pos;
        r->pos += n + (nl ? 1 : 0);
        r->line++;
        if (n > 0 && p[n - 1] == '\r')
                n--;
        if (n > NPU_SMI_LINE_MAX)
                return fail(ret_why, r->line, "the line is longer than %zu bytes", NPU_SMI_LINE_MAX);
        if (memchr(p, '\0', n))
                return fail(ret_why, r->line, "the line holds a NUL byte");
        *ret = (Slice) { p, n };
        return 1;
}

static int check_input(const char *text, size_t len, char **ret_why) {
        if (!text && len > 0)
                return -EINVAL;
        if (len > NPU_SMI_INPUT_MAX)
                return fail(ret_why, 0, "the output is larger than 1 MiB (%zu bytes)", len);
        return 0;
}

/* ---- npu-smi info -m -------------------------------------------------------------------------- */

typedef enum MapColumn {
        MAP_NPU,
        MAP_CHIP,
        MAP_LOGIC,
        MAP_PHY,
        MAP_SLOT,
        MAP_NAME,
        _MAP_COLUMN_MAX,
} MapColumn;

static const char *const map_column_table[_MAP_COLUMN_MAX] = {
        [MAP_NPU] = "NPU ID",
        [MAP_CHIP] = "Chip ID",
        [MAP_LOGIC] = "Chip Logic ID",
        [MAP_PHY] = "Chip Phy-ID",
        [MAP_SLOT] = "Slot ID",
        [MAP_NAME] = "Chip Name",
};

/* map_parse_header() - the columns the header line @s names, into @cols. Return: their number,
 * or 0 when @s is not such a header. */
static size_t map_parse_header(Slice s, MapColumn cols[static _MAP_COLUMN_MAX]) {
        bool seen[_MAP_COLUMN_MAX] = {};
        size_t n = 0;

        s = slice_trim(s);
        while (s.n > 0) {
                size_t c;

                for (c = 0; c < _MAP_COLUMN_MAX; c++)
                        if (slice_eat_words(&s, map_column_table[c]))
                                break;
                if (c == _MAP_COLUMN_MAX || seen[c])
                        return 0;
                seen[c] = true;
                cols[n++] = (MapColumn) c;
                s = slice_trim(s);
        }
        if (!seen[MAP_NPU] || !seen[MAP_CHIP] || !seen[MAP_LOGIC] || n == 0 || cols[n - 1] != MAP_NAME)
                return 0;
        return n;
}

/* map_parse_row() - one row after the header. Return: 0 with *@ret (its name allocated), or with
 * *@ret_mcu set for a row without a logic id; -EBADMSG, -ENOMEM. */
static int map_parse_row(Slice s, const MapColumn *cols, size_t n_cols, unsigned line,
                         NpuSmiChip *ret, bool *ret_mcu, char **ret_why) {
        NpuSmiChip chip = {};
        bool mcu = false;
        int r;

        for (size_t i = 0; i + 1 < n_cols; i++) {
                const char *label = map_column_table[cols[i]];
                Slice tok;
                unsigned v;

                if (!slice_token(&s, &tok))
                        return fail(ret_why, line, "the row has fewer than the header's %zu columns", n_cols);
                if (slice_is(tok, "-")) {
                        if (cols[i] == MAP_NPU || cols[i] == MAP_CHIP)
                                return fail(ret_why, line, "'%s' is '-'", label);
                        if (cols[i] == MAP_LOGIC)
                                mcu = true;
                        continue;
                }
                if (!parse_id(tok, &v))
                        return fail(ret_why, line,
                                    "'%s' is not a decimal id of at most 9 digits without a sign or a leading zero",
                                    label);
                if (cols[i] == MAP_NPU)
                        chip.npu_id = v;
                else if (cols[i] == MAP_CHIP)
                        chip.chip_id = v;
                else if (cols[i] == MAP_LOGIC)
                        chip.logic_id = v;
        }
        if (slice_trim(s).n == 0)
                return fail(ret_why, line, "the row has no chip name");
        if (!mcu) {
                r = text_dup(s, NPU_SMI_NAME_MAX, &chip.name);
                if (r == -ENOMEM)
                        return r;
                if (r == -E2BIG)
                        return fail(ret_why, line, "the chip name is longer than %d bytes", NPU_SMI_NAME_MAX);
                if (r < 0)
                        return fail(ret_why, line, "the chip name holds a byte that is not printable ASCII");
        }
        *ret = chip;
        *ret_mcu = mcu;
        return 0;
}

/* chips_add() - append @chip (taking its name, freed on failure too), refusing a 257th chip and
 * duplicates. */
static int chips_add(NpuSmiChips *c, NpuSmiChip *chip, unsigned line, char **ret_why) {
        _cleanup_free_ char *name = STEAL(chip->name);

        if (c->n >= NPU_SMI_CHIPS_MAX)
                return fail(ret_why, line, "more than %d chips", NPU_SMI_CHIPS_MAX);
        for (size_t i = 0; i < c->n; i++) {
                if (c->chips[i].logic_id == chip->logic_id)
                        return fail(ret_why, line, "chip logic id %u is listed twice", chip->logic_id);
                if (c->chips[i].npu_id == chip->npu_id && c->chips[i].chip_id == chip->chip_id)
                        return fail(ret_why, line, "NPU %u chip %u is listed twice", chip->npu_id, chip->chip_id);
        }
        if ((c->n & (c->n - 1)) == 0) {         /* 0, 1, 2, 4, ...: grow to the next power of two */
                NpuSmiChip *a = reallocarray(c->chips, c->n ? c->n * 2 : 1, sizeof(NpuSmiChip));

                if (!a)
                        return -ENOMEM;
                c->chips = a;
        }
        c->chips[c->n] = *chip;
        c->chips[c->n++].name = STEAL(name);
        return 0;
}

static int chip_compare_logic(const void *a, const void *b) {
        const NpuSmiChip *x = a, *y = b;

        return x->logic_id < y->logic_id ? -1 : x->logic_id > y->logic_id;
}

int npu_smi_parse_mapping(const char *text, size_t len, NpuSmiChips *ret, char **ret_why) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        LineReader lr = { .text = text, .len = len };
        MapColumn cols[_MAP_COLUMN_MAX];
        size_t n_cols = 0;
        Slice line;
        int r;

        r = check_input(text, len, ret_why);
        if (r < 0)
                return r;

        while ((r = line_next(&lr, &line, ret_why)) > 0) {
                NpuSmiChip chip;
                bool mcu;

                if (slice_trim(line).n == 0)
                        continue;
                if (n_cols == 0) {
                        n_cols = map_parse_header(line, cols);
                        if (n_cols == 0)
                                return fail_quoting(ret_why, lr.line, "not the header of `npu-smi info -m` "
                                                    "(NPU ID, Chip ID, Chip Logic ID, ..., Chip Name)", line);
                        continue;
                }
                r = map_parse_row(line, cols, n_cols, lr.line, &chip, &mcu, ret_why);
                if (r < 0)
                        return r;
                if (mcu)
                        continue;
                r = chips_add(&c, &chip, lr.line, ret_why);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        if (n_cols == 0)
                return fail(ret_why, 0, "the output of `npu-smi info -m` is empty: no header");

        if (c.n > 1)
                qsort(c.chips, c.n, sizeof(NpuSmiChip), chip_compare_logic);
        *ret = c;
        c = (NpuSmiChips) {};
        return 0;
}

/* ---- npu-smi info ----------------------------------------------------------------------------- */

typedef struct InfoChip {               /* what the text says of one chip of @chips, until committed */
        Slice health, bus_id;
        unsigned n_processes;
        unsigned line;                  /* its chip row's; 0: not in the device table */
} InfoChip;

typedef enum InfoState {
        INFO_TITLE,                     /* before the device table's header */
        INFO_DEVICE_HEADER,             /* after the header's first row */
        INFO_DEVICES,
        INFO_PROCESSES,
} InfoState;

typedef struct InfoParser {
        const NpuSmiChips *chips;
        InfoChip *found;                /* one per chip of chips */
        InfoState state;
        size_t n_cells;                 /* of each row of the device table */
        size_t n_process_cells;         /* of each process row */
        unsigned chip_values;           /* ids starting a chip row: 1 (910B) or 2 (310P, Atlas A3) */
        unsigned block_rows;            /* rows since the last border */
        unsigned card_line;             /* the current card row's */
        unsigned npu_id;                /* the current card's */
        Slice health;                   /* the current card's */
        unsigned line;
        char **why;
} InfoParser;

/* row_cells() - the trimmed cells of the row @s ("| a | b |"). Return: their number, or 0 when @s
 * is not such a row or has more than INFO_CELLS_MAX cells. */
static size_t row_cells(Slice s, Slice cells[static INFO_CELLS_MAX]) {
        size_t n = 0, start = 1;

        s = slice_trim(s);
        if (s.n < 2 || s.p[0] != '|' || s.p[s.n - 1] != '|')
                return 0;
        for (size_t i = 1; i < s.n; i++) {
                if (s.p[i] != '|')
                        continue;
                if (n >= INFO_CELLS_MAX)
                        return 0;
                cells[n++] = slice_trim((Slice) { s.p + start, i - start });
                start = i + 1;
        }
        return n;
}

/* one_word() - whether @s is one word of 1..NPU_SMI_FIELD_MAX bytes, each printable and in @extra
 * or alphanumeric (@extra NULL: any printable byte but a blank). */
static bool one_word(Slice s, const char *extra) {
        if (s.n == 0 || s.n > NPU_SMI_FIELD_MAX)
                return false;
        for (size_t i = 0; i < s.n; i++) {
                char c = s.p[i];
                bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

                if (c <= 0x20 || c > 0x7e)
                        return false;
                if (extra && !alnum && !strchr(extra, c))
                        return false;
        }
        return true;
}

static ssize_t info_find(const InfoParser *p, unsigned npu_id, unsigned chip_id) {
        for (size_t i = 0; i < p->chips->n; i++)
                if (p->chips->chips[i].npu_id == npu_id && p->chips->chips[i].chip_id == chip_id)
                        return (ssize_t) i;
        return -1;
}

static int info_title(InfoParser *p, const Slice *cells, size_t n, Slice line) {
        Slice first = cells[0], tok;

        if (n >= 2 && slice_words_are(cells[0], "NPU Name") && slice_words_are(cells[1], "Health")) {
                p->n_cells = n;
                p->state = INFO_DEVICE_HEADER;
                return 0;
        }
        if (n == 1 && slice_token(&first, &tok) && slice_is(tok, "npu-smi"))
                return 0;                       /* "| npu-smi 23.0.rc3   Version: 23.0.rc3 |" */
        return fail_quoting(p->why, p->line,
                            "not the device table's header of `npu-smi info` (NPU Name | Health | ...)", line);
}

static int info_device_header(InfoParser *p, const Slice *cells, size_t n) {
        if (n != p->n_cells || !slice_words_are(cells[1], "Bus-Id"))
                return fail(p->why, p->line,
                            "the device table's second header row is not 'Chip | Bus-Id | ...' with %zu cells",
                            p->n_cells);
        if (slice_words_are(cells[0], "Chip"))
                p->chip_values = 1;
        else if (slice_words_are(cells[0], "Chip Device") || slice_words_are(cells[0], "Chip Phy-ID"))
                p->chip_values = 2;
        else
                return fail(p->why, p->line, "the device table's second header row starts with neither 'Chip', "
                            "'Chip Device' nor 'Chip Phy-ID'");
        p->state = INFO_DEVICES;
        p->block_rows = 0;
        return 0;
}

static int info_block_end(InfoParser *p) {
        if (p->block_rows == 1)
                return fail(p->why, p->card_line, "the card row is followed by no chip row");
        p->block_rows = 0;
        return 0;
}

/* "| 0     910B3 | OK | ...": the NPU id, the name, the health */
static int info_card_row(InfoParser *p, const Slice *cells) {
        Slice s = cells[0], tok;

        if (!slice_token(&s, &tok) || !parse_id(tok, &p->npu_id))
                return fail(p->why, p->line, "the card row does not start with a decimal NPU id");
        if (slice_trim(s).n == 0)
                return fail(p->why, p->line, "the card row has no chip name");
        if (!one_word(cells[1], NULL))
                return fail(p->why, p->line, "the health is not one printable word of at most %d bytes",
                            NPU_SMI_FIELD_MAX);
        p->health = cells[1];
        p->card_line = p->line;
        return 0;
}

/* "| 0 | 0000:C1:00.0 | ...": the chip id (and a device or physical id), the bus id */
static int info_chip_row(InfoParser *p, const Slice *cells) {
        Slice s = cells[0], tok;
        unsigned chip_id, v;
        ssize_t i;

        if (!slice_token(&s, &tok) || !parse_id(tok, &chip_id))
                return fail(p->why, p->line, "the chip row does not start with a decimal chip id");
        if (p->chip_values == 2 && (!slice_token(&s, &tok) || !(slice_is(tok, "-") || parse_id(tok, &v))))
                return fail(p->why, p->line, "the chip row's second id is not a decimal id");
        if (slice_token(&s, &tok))
                return fail(p->why, p->line, "the chip row's first cell holds more than %u id(s)", p->chip_values);
        if (cells[1].n > 0 && !one_word(cells[1], ":."))
                return fail(p->why, p->line, "the bus id is not one word of letters, digits, ':' and '.'");

        i = info_find(p, p->npu_id, chip_id);
        if (i < 0)
                return 0;                       /* not a chip of ours: `info -m` did not list it */
        if (p->found[i].line > 0)
                return fail(p->why, p->line, "NPU %u chip %u is listed twice (first on line %u)", p->npu_id, chip_id,
                            p->found[i].line);
        p->found[i].health = p->health;
        p->found[i].bus_id = cells[1];
        p->found[i].line = p->line;
        return 0;
}

static int info_devices(InfoParser *p, const Slice *cells, size_t n) {
        int r;

        if (n >= 2 && slice_words_are(cells[0], "NPU Chip") && slice_words_are(cells[1], "Process id")) {
                r = info_block_end(p);
                if (r < 0)
                        return r;
                p->n_process_cells = n;
                p->state = INFO_PROCESSES;
                return 0;
        }
        if (n != p->n_cells)
                return fail(p->why, p->line, "the row has %zu cells, the device table's header %zu", n, p->n_cells);
        if (p->block_rows++ == 0)
                return info_card_row(p, cells);
        return info_chip_row(p, cells);
}

static int info_processes(InfoParser *p, const Slice *cells, size_t n) {
        Slice s = cells[0], tok;
        unsigned npu_id, chip_id, pid;
        ssize_t i;

        if (n == 1) {
                if (!slice_eat_words(&s, "No running processes found in NPU") || !slice_token(&s, &tok) ||
                    !parse_id(tok, &npu_id) || slice_token(&s, &tok))
                        return fail(p->why, p->line,
                                    "a process table row of one cell is not 'No running processes found in NPU N'");
                return 0;
        }
        if (n != p->n_process_cells)
                return fail(p->why, p->line, "the row has %zu cells, the process table's header %zu", n,
                            p->n_process_cells);
        if (!slice_token(&s, &tok) || !parse_id(tok, &npu_id) || !slice_token(&s, &tok) || !parse_id(tok, &chip_id) ||
            slice_token(&s, &tok))
                return fail(p->why, p->line, "the process row does not start with a decimal NPU id and chip id");
        if (!parse_id(cells[1], &pid))
                return fail(p->why, p->line, "the process id is not a decimal id");
        i = info_find(p, npu_id, chip_id);
        if (i >= 0)
                p->found[i].n_processes++;
        return 0;
}

static int info_line(InfoParser *p, Slice line) {
        Slice cells[INFO_CELLS_MAX];
        size_t n;

        line = slice_trim(line);
        if (line.n == 0)
                return 0;
        if (line.p[0] == '+') {
                for (size_t i = 0; i < line.n; i++)
                        if (line.p[i] != '+' && line.p[i] != '-' && line.p[i] != '=')
                                return fail_quoting(p->why, p->line, "a border holds more than '+', '-' and '='", line);
                if (p->state == INFO_DEVICE_HEADER)
                        return fail(p->why, p->line, "the device table's header has one row, not two");
                return p->state == INFO_DEVICES ? info_block_end(p) : 0;
        }
        n = row_cells(line, cells);
        if (n == 0)
                return fail_quoting(p->why, p->line, "neither a border nor a table row '| ... |' of at most 8 cells",
                                    line);

        switch (p->state) {
        case INFO_TITLE:
                return info_title(p, cells, n, line);
        case INFO_DEVICE_HEADER:
                return info_device_header(p, cells, n);
        case INFO_DEVICES:
                return info_devices(p, cells, n);
        case INFO_PROCESSES:
                return info_processes(p, cells, n);
        }
        return -EINVAL;
}

/* info_commit() - the chips' new health, bus id and process count, all or nothing. */
static int info_commit(NpuSmiChips *chips, const InfoChip *found) {
        _cleanup_free_ char **s = NULL;
        size_t n = chips->n;

        s = calloc(2 * n + 1, sizeof(char *));
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (found[i].line == 0)
                        continue;
                s[2 * i] = span_dup(found[i].health.p, found[i].health.n);
                if (found[i].bus_id.n > 0)
                        s[2 * i + 1] = span_dup(found[i].bus_id.p, found[i].bus_id.n);
                if (!s[2 * i] || (found[i].bus_id.n > 0 && !s[2 * i + 1])) {
                        for (size_t j = 0; j < 2 * n; j++)
                                free(s[j]);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n; i++) {
                NpuSmiChip *c = &chips->chips[i];

                free(c->health);
                free(c->bus_id);
                c->health = s[2 * i];
                c->bus_id = s[2 * i + 1];
                c->n_processes = found[i].n_processes;
        }
        return 0;
}

int npu_smi_parse_info(const char *text, size_t len, NpuSmiChips *chips, char **ret_why) {
        _cleanup_free_ InfoChip *found = NULL;
        LineReader lr = { .text = text, .len = len };
        InfoParser p = { .chips = chips, .why = ret_why };
        Slice line;
        int r;

        if (!chips)
                return -EINVAL;
        r = check_input(text, len, ret_why);
        if (r < 0)
                return r;
        found = calloc(MAX(chips->n, (size_t) 1), sizeof(InfoChip));
        if (!found)
                return -ENOMEM;
        p.found = found;

        while ((r = line_next(&lr, &line, ret_why)) > 0) {
                p.line = lr.line;
                r = info_line(&p, line);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        switch (p.state) {
        case INFO_TITLE:
                return fail(ret_why, 0, "`npu-smi info` printed no device table (NPU Name | Health | ...)");
        case INFO_DEVICE_HEADER:
                return fail(ret_why, 0, "`npu-smi info` ended within the device table's header");
        case INFO_DEVICES:
                return fail(ret_why, 0, "`npu-smi info` printed no process table (NPU Chip | Process id | ...)");
        case INFO_PROCESSES:
                break;
        }
        return info_commit(chips, found);
}

void npu_smi_chips_done(NpuSmiChips *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++) {
                free(c->chips[i].name);
                free(c->chips[i].health);
                free(c->chips[i].bus_id);
        }
        free(c->chips);
        *c = (NpuSmiChips) {};
}

/* ---- names ------------------------------------------------------------------------------------ */

static bool ascii_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool ascii_digit(char c) {
        return c >= '0' && c <= '9';
}

bool npu_chip_name_is_910(const char *name) {
        const char *p = name;

        if (!p)
                return false;
        if (strncasecmp(p, "Ascend", 6) == 0)
                p += 6;
        p += strspn(p, " ");
        if (!strneq(p, "910", 3))
                return false;
        p += 3;
        if (*p == '\0')
                return true;                    /* "Ascend 910", "Ascend910" */
        if (*p == '_') {                        /* "Ascend 910_9391": Atlas A3 */
                if (!ascii_digit(p[1]))
                        return false;
                for (p++; *p; p++)
                        if (!ascii_digit(*p))
                                return false;
                return true;
        }
        if (!ascii_alpha(*p))                   /* "9100", "910 B", "910-x" */
                return false;
        for (; *p; p++)                         /* "910B3", "910ProA", "910PremiumA" */
                if (!ascii_alpha(*p) && !ascii_digit(*p))
                        return false;
        return true;
}
