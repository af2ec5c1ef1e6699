/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU broker's workload allowlist (src/npu/npu-workload.c): the input is an allowlist text.
 * Invariants: npu_workloads_parse() answers 0, or -EBADMSG with a reason (-ENOMEM aside); on 0,
 * every workload id is valid and unique and found again by npu_workloads_find(), argv holds 1 to
 * NPU_ARGV_MAX words, argv[0] is a whole ${repo:...} or an absolute path, every word's literal part
 * holds no "${" and every placeholder is a known one (a ${repo:REL} with a relative REL without
 * "." or ".." components), chips and the timeout are in range, configPathFields come only with
 * ${input:configPath}, env entries are NAME=value without "${", and the listing has one entry of
 * five fields a workload (no argv, no paths).
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "npu/npu-workload.h"
#include "util/macro.h"

static void check_rel(const char *rel) {
        FUZZ_CHECK(rel && *rel && rel[0] != '/');
        for (const char *c = rel;;) {
                size_t n = strcspn(c, "/");

                FUZZ_CHECK(n > 0);
                FUZZ_CHECK(!(n == 1 && c[0] == '.'));
                FUZZ_CHECK(!(n == 2 && c[0] == '.' && c[1] == '.'));
                if (c[n] == '\0')
                        break;
                c += n + 1;
        }
        FUZZ_CHECK(!strstr(rel, "${") && !strchr(rel, '}'));
}

static void check_workload(const NpuWorkloads *all, const NpuWorkload *w) {
        bool config = false;

        FUZZ_CHECK(npu_workload_id_valid(w->id));
        FUZZ_CHECK(npu_workloads_find(all, w->id) == w);        /* unique: the first is this one */
        FUZZ_CHECK(w->description && *w->description && strlen(w->description) <= NPU_DESCRIPTION_MAX);
        FUZZ_CHECK(w->n_argv >= 1 && w->n_argv <= NPU_ARGV_MAX);
        FUZZ_CHECK(w->chips >= 1 && w->chips <= NPU_CHIPS_MAX);
        FUZZ_CHECK(w->timeout_usec >= 1000000 && w->timeout_usec <= (uint64_t) NPU_TIMEOUT_SEC_MAX * 1000000);
        for (size_t i = 0; i < w->n_argv; i++) {
                const NpuArg *a = &w->argv[i];

                FUZZ_CHECK(a->text && !strstr(a->text, "${"));
                switch (a->kind) {
                case NPU_ARG_LITERAL:
                        FUZZ_CHECK(!a->rel);
                        if (i == 0)
                                FUZZ_CHECK(a->text[0] == '/' && a->text[1] != '\0');
                        break;
                case NPU_ARG_REPO:
                        check_rel(a->rel);
                        if (i == 0)
                                FUZZ_CHECK(a->text[0] == '\0');
                        break;
                case NPU_ARG_CONFIG_PATH:
                        FUZZ_CHECK(i > 0 && !a->rel);
                        config = true;
                        break;
                case _NPU_ARG_KIND_MAX:
                case _NPU_ARG_KIND_INVALID:
                        FUZZ_CHECK(!"unknown argument kind");
                }
        }
        FUZZ_CHECK(config == w->takes_config);
        FUZZ_CHECK(!w->config_fields || w->takes_config);
        for (char **r = w->resource_roots; r && *r; r++)
                FUZZ_CHECK((*r)[0] == '/' && (*r)[1] != '\0' && !strstr(*r, "/../") && !strstr(*r, "//"));
        for (char **e = w->env; e && *e; e++)
                FUZZ_CHECK(strchr(*e, '=') && **e != '=' && !strstr(*e, "${"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NpuWorkloads *w = NULL;
        json_object *list;
        char *why = NULL;
        int r;

        if (size > 64 * 1024)
                return 0;
        r = npu_workloads_parse((const char *) data, size, &w, &why);
        FUZZ_CHECK(r == 0 || r == -ENOMEM || (r == -EBADMSG && why));
        if (r < 0) {
                FUZZ_CHECK(!w);
                free(why);
                return 0;
        }
        FUZZ_CHECK(w && !why && w->n <= NPU_WORKLOADS_MAX);
        for (size_t i = 0; i < w->n; i++)
                check_workload(w, &w->workloads[i]);

        list = npu_workloads_to_json(w);
        FUZZ_CHECK(list && json_object_array_length(list) == w->n);
        for (size_t i = 0; i < w->n; i++) {
                json_object *o = json_object_array_get_idx(list, i), *v;

                FUZZ_CHECK(json_object_object_length(o) == 5);
                FUZZ_CHECK(json_object_object_get_ex(o, "id", &v) && streq(json_object_get_string(v), w->workloads[i].id));
                FUZZ_CHECK(json_object_object_get_ex(o, "inputs", &v) &&
                           json_object_array_length(v) == (w->workloads[i].takes_config ? 1U : 0U));
        }
        json_object_put(list);
        npu_workloads_free(w);
        return 0;
}
