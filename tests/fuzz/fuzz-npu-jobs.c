/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU broker's job files (src/npu/npu-jobs-json.c): the input is parsed as JSON and read as
 * job.json and as result.json (the workload runs as the daemon's user and can write both).
 * Invariants: each parser answers 0, -EBADMSG or -ENOMEM; an accepted job passes
 * npu_job_validate(), its argv[0] is absolute, its environment never sets
 * ASCEND_RT_VISIBLE_DEVICES, and it survives a round trip through npu_job_to_json() unchanged;
 * an accepted result has no exit status and signal both, and survives its round trip too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "npu/npu-jobs.h"
#include "util/json-util.h"
#include "util/strv.h"
#include "fuzz.h"

static void check_job(json_object *o) {
        _cleanup_(json_object_putp) json_object *back = NULL;
        NpuJob *j = NULL, *k = NULL;
        const char *reason = NULL;
        int r;

        r = npu_job_from_json(o, &j, &reason);
        FUZZ_CHECK(r == 0 || r == -ENOMEM || (r == -EBADMSG && reason));
        if (r < 0)
                return;
        FUZZ_CHECK(npu_job_validate(j, NULL) == 0);
        FUZZ_CHECK(j->argv && j->argv[0] && j->argv[0][0] == '/');
        for (char **e = j->env; e && *e; e++)
                FUZZ_CHECK(!strneq(*e, NPU_JOB_VISIBLE_DEVICES_VAR "=", strlen(NPU_JOB_VISIBLE_DEVICES_VAR) + 1));
        back = npu_job_to_json(j);
        FUZZ_CHECK(back);
        FUZZ_CHECK(npu_job_from_json(back, &k, NULL) == 0);
        FUZZ_CHECK(streq(j->id, k->id) && streq(j->session_id, k->session_id) && streq(j->cwd, k->cwd));
        FUZZ_CHECK(strv_length(j->argv) == strv_length(k->argv) && strv_length(j->env) == strv_length(k->env));
        FUZZ_CHECK(j->state == k->state && j->n_chips == k->n_chips && j->exit_code == k->exit_code &&
                   j->signal == k->signal && j->pid == k->pid && j->created_ms == k->created_ms);
        npu_job_free(j);
        npu_job_free(k);
}

static void check_result(json_object *o) {
        _cleanup_(json_object_putp) json_object *back = NULL;
        NpuJobResult res = {}, again = {};
        int r;

        r = npu_job_result_from_json(o, &res);
        FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
        if (r < 0)
                return;
        FUZZ_CHECK(!(res.exit_code >= 0 && res.signal > 0));
        back = npu_job_result_to_json(&res);
        FUZZ_CHECK(back);
        FUZZ_CHECK(npu_job_result_from_json(back, &again) == 0);
        FUZZ_CHECK(again.exit_code == res.exit_code && again.signal == res.signal &&
                   again.timed_out == res.timed_out && again.finished_ms == res.finished_ms);
        npu_job_result_done(&res);
        npu_job_result_done(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char *s;

        if (size > 64 * 1024)
                return 0;
        s = fuzz_strndup(data, size);
        o = json_tokener_parse(s);
        free(s);
        if (!o)
                return 0;
        check_job(o);
        check_result(o);
        return 0;
}
