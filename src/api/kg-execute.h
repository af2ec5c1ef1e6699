/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POST /api/kernels/{id}/execute: one execution on a kernel, answered as one JSON document. */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

#include "util/macro.h"

typedef struct Manager Manager;
typedef struct HttpRequest HttpRequest;
typedef struct Kernel Kernel;

#define KG_EXECUTE_OUTPUT_MAX (UINT64_C(64) << 20)      /* stdout + stderr + outputs kept */
#define KG_EXECUTE_TIMEOUT_DEFAULT_MS INT64_C(60000)
#define KG_EXECUTE_TIMEOUT_MAX_MS INT64_C(86400000)
#define KG_EXECUTE_DRAIN_USEC (10 * USEC_PER_SEC)        /* after the interrupt at the deadline */

/*
 * kg_execute() - run @body's "code" on @k (the caller found it for the request's credential) as
 * one execute_request; answer 200 {status, executionCount, stdout, stderr, outputs, error,
 * truncated, timedOut} once its execute_reply and status idle arrived, 400 on a bad body, 409
 * when the kernel is dead or ends meanwhile. At "timeoutMs" the kernel is interrupted and what
 * came within KG_EXECUTE_DRAIN_USEC more is answered.
 */
void kg_execute(Manager *m, HttpRequest *req, Kernel *k, json_object *body);
