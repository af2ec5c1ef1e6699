/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of the npu command and of exec/shell --npu and --device: the chip list, device
 * names, the broker job's body, job states and the tables of npu chips, workloads and jobs. It
 * calls output.c (escaping), json-c and libc; no request, no global state. */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl-util.h"
#include "npu-util.h"
#include "output.h"
#include "util/json-util.h"

/* A column of a table is padded to its widest cell, but never wider than this. */
#define NPU_COLUMN_WIDTH_MAX 64

int npu_parse_chips(const char *s, unsigned **ret, size_t *ret_n, size_t *ret_bad) {
        _cleanup_free_ unsigned *chips = NULL;
        const char *p = s;
        size_t n = 0;

        if (isempty(s)) {
                if (ret_bad)
                        *ret_bad = 0;
                return -EINVAL;
        }
        chips = calloc(NPU_CHIPS_MAX, sizeof(unsigned));
        if (!chips)
                return -ENOMEM;

        for (;;) {
                size_t len = strspn(p, "0123456789");
                unsigned long v = 0;

                if (len == 0 || (p[len] != ',' && p[len] != '\0')) {
                        if (ret_bad)
                                *ret_bad = p - s;
                        return -EINVAL;
                }
                /* Digits only, so no strtoul() sign or space rules apply; stop counting past the
                 * maximum so that long inputs cannot overflow. */
                for (size_t i = 0; i < len && v <= NPU_CHIP_ID_MAX; i++)
                        v = v * 10 + (unsigned long) (p[i] - '0');
                if (v > NPU_CHIP_ID_MAX) {
                        if (ret_bad)
                                *ret_bad = p - s;
                        return -ERANGE;
                }
                for (size_t i = 0; i < n; i++)
                        if (chips[i] == v) {
                                if (ret_bad)
                                        *ret_bad = p - s;
                                return -EEXIST;
                        }
                if (n == NPU_CHIPS_MAX)
                        return -E2BIG;
                chips[n++] = (unsigned) v;

                if (p[len] == '\0')
                        break;
                p += len + 1;
        }

        *ret = STEAL(chips);
        *ret_n = n;
        return 0;
}

json_object *npu_chips_json(const unsigned *chips, size_t n) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || json_add(o, "chips", json_unsigned_array_new(chips, n)) < 0)
                return NULL;
        return STEAL(o);
}

bool npu_device_name_valid(const char *s) {
        const char *slash, *eq;

        if (isempty(s) || strlen(s) > 255 ||
            strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/=:") != strlen(s))
                return false;
        slash = strchr(s, '/');
        if (!slash || slash == s)
                return false;
        eq = strchr(slash, '=');
        return eq && eq != slash + 1 && eq[1] != '\0';
}

int npu_devices_json(const char *const *names, size_t n, json_object **ret, size_t *ret_bad) {
        _cleanup_(json_object_putp) json_object *a = NULL;

        if (n == 0 || n > NPU_DEVICES_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                int r = npu_device_name_valid(names[i]) ? 0 : -EINVAL;

                for (size_t j = 0; r == 0 && j < i; j++)
                        if (streq(names[i], names[j]))
                                r = -EEXIST;
                if (r < 0) {
                        if (ret_bad)
                                *ret_bad = i;
                        return r;
                }
        }

        a = json_object_new_array();
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_new_string(names[i]);

                if (!v || json_object_array_add(a, v) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }
        }
        *ret = STEAL(a);
        return 0;
}

int npu_job_body(const char *workload, const char *session, const char *config_path, json_object **ret) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        json_object *inputs;

        if (isempty(workload) || isempty(session))
                return -EINVAL;

        body = json_object_new_object();
        if (!body ||
            json_add(body, "workloadId", json_object_new_string(workload)) < 0 ||
            json_add(body, "sessionId", json_object_new_string(session)) < 0)
                return -ENOMEM;
        if (config_path &&
            (json_add(body, "inputs", inputs = json_object_new_object()) < 0 ||
             json_add(inputs, "configPath", json_object_new_string(config_path)) < 0))
                return -ENOMEM;

        *ret = STEAL(body);
        return 0;
}

bool npu_job_state_final(const char *state) {
        return state && (streq(state, "succeeded") || streq(state, "failed") || streq(state, "cancelled") ||
                         streq(state, "interrupted"));
}

/* ---- tables ------------------------------------------------------------------------------------ */

/* Cells of a table, row by row, the header first; every cell escaped and owned. */
typedef struct Table {
        size_t n_columns;
        size_t n_cells;
        char **cells;
} Table;

static void table_done(Table *t) {
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
        *t = (Table) {};
}

/* Append a cell: @s escaped for a terminal, "-" for NULL or "". */
static int table_add(Table *t, const char *s) {
        char **c, *e;

        e = output_escaped(isempty(s) ? "-" : s);
        if (!e)
                return -ENOMEM;
        c = reallocarray(t->cells, t->n_cells + 1, sizeof(char *));
        if (!c) {
                free(e);
                return -ENOMEM;
        }
        t->cells = c;
        t->cells[t->n_cells++] = e;
        return 0;
}

static int table_new(Table *t, const char *const *header) {
        *t = (Table) {};
        for (const char *const *h = header; *h; h++, t->n_columns++)
                if (table_add(t, *h) < 0)
                        return -ENOMEM;
        return 0;
}

/* Characters on a terminal: UTF-8 continuation bytes take no column. */
static size_t text_width(const char *s) {
        size_t w = 0;

        for (; *s; s++)
                if (((unsigned char) *s & 0xc0) != 0x80)
                        w++;
        return w;
}

/* The rows of @t, columns two spaces apart, each padded to its widest cell (at most
 * NPU_COLUMN_WIDTH_MAX), the last one not padded, into @f. */
static void table_print(const Table *t, FILE *f) {
        size_t widths[16] = {};

        assert(t->n_columns > 0 && t->n_columns <= ELEMENTSOF(widths));
        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns;

                size_t w = MAX(widths[c], text_width(t->cells[i]));

                widths[c] = MIN(w, (size_t) NPU_COLUMN_WIDTH_MAX);
        }
        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns, w = text_width(t->cells[i]);

                fputs(t->cells[i], f);
                if (c + 1 == t->n_columns)
                        fputc('\n', f);
                else
                        fprintf(f, "%*s", (int) (w < widths[c] ? widths[c] - w + 2 : 2), "");
        }
}

static json_object *array_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_array))
                return NULL;
        return v;
}

static const char *string_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

/* The integer @key of @o in decimal, with @suffix, or "-" when missing or not an integer. */
static void int_text(json_object *o, const char *key, const char *suffix, char buf[static 32]) {
        json_object *v;

        if (json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v) &&
            json_object_is_type(v, json_type_int))
                (void) snprintf(buf, 32, "%" PRIi64 "%s", json_object_get_int64(v), suffix);
        else
                (void) snprintf(buf, 32, "-");
}

static const char *bool_text(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_boolean))
                return "-";
        return json_object_get_boolean(v) ? "yes" : "no";
}

/* The table's text, then what @footer (may be NULL) adds to it, as a new string. */
static int table_text(const Table *t, int (*footer)(json_object *, FILE *), json_object *answer, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;
        int r = 0;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        table_print(t, f);
        if (footer)
                r = footer(answer, f);
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        *ret = STEAL(buf);
        return 0;
}

/* ---- npu chips --------------------------------------------------------------------------------- */

/* The strings of @list joined by ", ", escaped, or "(none)". */
static int print_strings(FILE *f, json_object *list) {
        size_t n = list ? json_object_array_length(list) : 0;

        if (n == 0)
                fputs("(none)", f);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *e = output_escaped(json_object_get_string(json_object_array_get_idx(list, i)));

                if (!e)
                        return -ENOMEM;
                fprintf(f, "%s%s", i > 0 ? ", " : "", e);
        }
        fputc('\n', f);
        return 0;
}

/* After the chips: the phase unless ready, the CDI devices, the refused CDI specs. */
static int chips_footer(json_object *answer, FILE *f) {
        const char *phase = string_field(answer, "phase");
        json_object *refused = array_field(answer, "cdiRefused");

        if (phase && streq(phase, "probing"))
                fputs("The chips are still being probed: none is selectable yet.\n", f);
        else if (phase && !streq(phase, "ready")) {
                _cleanup_free_ char *p = output_escaped(phase),
                                    *e = output_escaped(string_field(answer, "error") ?: "no reason given");

                if (!p || !e)
                        return -ENOMEM;
                fprintf(f, "The chips' discovery is %s: %s\n", p, e);
        }

        fputs("CDI devices: ", f);
        if (print_strings(f, array_field(answer, "cdiDevices")) < 0)
                return -ENOMEM;
        if (!refused || json_object_array_length(refused) == 0)
                return 0;
        fputs("Refused CDI specs:\n", f);
        for (size_t i = 0; i < json_object_array_length(refused); i++) {
                json_object *e = json_object_array_get_idx(refused, i);
                _cleanup_free_ char *what = output_escaped(string_field(e, "what") ?: "?"),
                                    *reason = output_escaped(string_field(e, "reason") ?: "no reason given");

                if (!what || !reason)
                        return -ENOMEM;
                fprintf(f, "  %s: %s\n", what, reason);
        }
        return 0;
}

int npu_format_chips(json_object *answer, char **ret) {
        static const char *const header[] = { "ID", "NAME", "HEALTH", "SELECTABLE", "HELD-BY", "REASON", NULL };
        _cleanup_(table_done) Table t = {};
        json_object *chips = array_field(answer, "chips");

        if (!chips)
                return -EBADMSG;
        if (table_new(&t, header) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(chips); i++) {
                json_object *c = json_object_array_get_idx(chips, i);
                char id[32];

                int_text(c, "id", "", id);
                if (table_add(&t, id) < 0 ||
                    table_add(&t, string_field(c, "name")) < 0 ||
                    table_add(&t, string_field(c, "health")) < 0 ||
                    table_add(&t, bool_text(c, "selectable")) < 0 ||
                    table_add(&t, string_field(c, "heldBy")) < 0 ||
                    table_add(&t, string_field(c, "reason") ?: string_field(c, "lastProbeFailure")) < 0)
                        return -ENOMEM;
        }
        return table_text(&t, chips_footer, answer, ret);
}

/* ---- npu workloads, npu jobs ------------------------------------------------------------------- */

int npu_format_workloads(json_object *answer, char **ret) {
        static const char *const header[] = { "ID", "CHIPS", "TIMEOUT", "DESCRIPTION", NULL };
        _cleanup_(table_done) Table t = {};
        json_object *list = array_field(answer, "workloads");

        if (!list)
                return -EBADMSG;
        if (table_new(&t, header) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *w = json_object_array_get_idx(list, i);
                char chips[32], timeout[32];

                int_text(w, "chips", "", chips);
                int_text(w, "timeoutSec", "s", timeout);
                if (table_add(&t, string_field(w, "id")) < 0 || table_add(&t, chips) < 0 ||
                    table_add(&t, timeout) < 0 || table_add(&t, string_field(w, "description")) < 0)
                        return -ENOMEM;
        }
        return table_text(&t, NULL, NULL, ret);
}

/* A job's "chips" as "0,3" ("-" when none or not a list of integers). NULL on OOM. */
static char *chips_text(json_object *job) {
        json_object *a = array_field(job, "chips");
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, n = a ? json_object_array_length(a) : 0;
        FILE *f;

        for (size_t i = 0; i < n; i++)
                if (!json_object_is_type(json_object_array_get_idx(a, i), json_type_int))
                        n = 0;
        if (n == 0)
                return strdup("-");

        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%" PRIi64, i > 0 ? "," : "", json_object_get_int64(json_object_array_get_idx(a, i)));
        if (fclose(f) != 0)
                return NULL;
        return STEAL(buf);
}

/* The time @key of @o (milliseconds since the epoch) in RFC 3339 UTC, or "-". */
static void time_text(json_object *o, const char *key, char buf[static 32]) {
        json_object *v;
        struct tm tm;
        time_t t;

        (void) snprintf(buf, 32, "-");
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0)
                return;
        t = (time_t) (json_object_get_int64(v) / 1000);
        if (gmtime_r(&t, &tm) && strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                (void) snprintf(buf, 32, "-");
}

int npu_format_jobs(json_object *answer, char **ret) {
        static const char *const header[] = { "JOB", "WORKLOAD", "STATE", "CHIPS", "CREATED", NULL };
        _cleanup_(table_done) Table t = {};
        json_object *list = array_field(answer, "jobs");

        if (!list)
                return -EBADMSG;
        if (table_new(&t, header) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *j = json_object_array_get_idx(list, i);
                _cleanup_free_ char *chips = chips_text(j);
                char created[32];

                if (!chips)
                        return -ENOMEM;
                time_text(j, "createdAt", created);
                if (table_add(&t, string_field(j, "jobId")) < 0 || table_add(&t, string_field(j, "workloadId")) < 0 ||
                    table_add(&t, string_field(j, "state")) < 0 || table_add(&t, chips) < 0 ||
                    table_add(&t, created) < 0)
                        return -ENOMEM;
        }
        return table_text(&t, NULL, NULL, ret);
}
