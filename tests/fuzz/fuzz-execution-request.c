/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Request bodies as the HTTP layer takes them: http_json_parse() (size check, strict json-c,
 * depth limit, UTF-8 and \u0000 checks), then execution_request_parse() for /execute and
 * /execute-shell bodies, with and without caps, and egress_policy_from_json() (the PUT
 * /api/network-policy body, parsed the same way).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-policy.h"
#include "execution/execution-request.h"
#include "fuzz.h"
#include "http/http-reply.h"

static void check_request(json_object *o, ExecutionKind kind, const ExecutionMaxima *max) {
        ExecutionRequest *er = NULL;
        char *why = NULL;
        int r;

        r = execution_request_parse(o, kind, max, &er, &why);
        FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -EPROTONOSUPPORT || r == -ENOMEM);
        if (r == 0) {
                FUZZ_CHECK(er);
                FUZZ_CHECK(er->argv && er->argv[0]);
                FUZZ_CHECK(er->timeout_usec > 0);
                if (max->max_timeout_usec > 0)
                        FUZZ_CHECK(er->timeout_usec <= max->max_timeout_usec);
                if (max->memory_max > 0)
                        FUZZ_CHECK(er->memory_max > 0 && er->memory_max <= max->memory_max);
                if (max->tasks_max > 0)
                        FUZZ_CHECK(er->tasks_max > 0 && er->tasks_max <= max->tasks_max);
                if (er->code)
                        FUZZ_CHECK(strlen(er->code) <= er->code_size);
        }
        free(why);
        execution_request_free(er);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const ExecutionMaxima capped = {
                .default_timeout_usec = 30 * 1000000ULL,
                .max_timeout_usec = 300 * 1000000ULL,
                .memory_max = 1ULL << 30,
                .tasks_max = 256,
                .cpu_quota_percent = 200,
        }, uncapped = {
                .default_timeout_usec = 30 * 1000000ULL,
                .max_timeout_usec = 3600 * 1000000ULL,
        };
        json_object *o = NULL;
        EgressPolicy *p = NULL;
        const char *why = NULL;
        char *error = NULL;
        int r;

        if (size > 256 * 1024)
                return 0;

        r = http_json_parse((const char *) data, size, &o, &why);
        FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
        if (r < 0) {
                FUZZ_CHECK(r != -EBADMSG || why);
                return 0;
        }
        FUZZ_CHECK(json_object_is_type(o, json_type_object));

        check_request(o, EXECUTION_KIND_EXECUTE, &capped);
        check_request(o, EXECUTION_KIND_SHELL, &capped);
        check_request(o, EXECUTION_KIND_EXECUTE, &uncapped);
        check_request(o, EXECUTION_KIND_SHELL, &uncapped);

        r = egress_policy_from_json(o, &p, &error);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        free(error);
        egress_policy_free(p);

        json_object_put(o);
        return 0;
}
