/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of the CLI's accelerator support (no request, no terminal): the --npu chip list
 * and --device names of exec and shell as the API's "npu" and "devices" fields, the body of a
 * broker job, job states, and the tables of the npu command (chips with the CDI devices,
 * workloads, jobs) as text, server strings escaped. json-c and libc only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

/* What the daemon takes in an execution (docs/api.md section 10.1). */
#define NPU_CHIPS_MAX 64U
#define NPU_CHIP_ID_MAX 65535U
#define NPU_DEVICES_MAX 32U

/*
 * npu_parse_chips() - "5,3": chip logic ids (the N of the host's /dev/davinciN) separated by
 * commas, each only decimal digits (no sign, space or empty item), 1 to NPU_CHIPS_MAX of them, no
 * id twice. The order is kept (the daemon renumbers in ascending host order anyway).
 * @ret: the ids; caller frees
 * @ret_bad: if not NULL, on -EINVAL, -ERANGE and -EEXIST the offset in @s of the offending item
 * Return: 0; -EINVAL for an empty list or item or one that is not digits only, -ERANGE for an id
 * above NPU_CHIP_ID_MAX, -E2BIG for more than NPU_CHIPS_MAX ids, -EEXIST for an id given twice,
 * -ENOMEM.
 */
int npu_parse_chips(const char *s, unsigned **ret, size_t *ret_n, size_t *ret_bad);

/* npu_chips_json() - {"chips": [ids...]}, the "npu" field of an execution. NULL on OOM. */
json_object *npu_chips_json(const unsigned *chips, size_t n);

/*
 * npu_device_name_valid() - whether @s has the shape of a CDI device name as the daemon accepts
 * it: "vendor.com/class=name", at most 255 bytes of letters, digits and "._-/=:", a non-empty
 * kind before the first '/' and a non-empty class and name around the '=' after it.
 */
bool npu_device_name_valid(const char *s);

/*
 * npu_devices_json() - the "devices" field of an execution: the array of @names.
 * @ret_bad: if not NULL, on -EINVAL and -EEXIST the index of the offending name
 * Return: 0; -EINVAL for a name that npu_device_name_valid() refuses, -EEXIST for a name given
 * twice, -E2BIG for none or more than NPU_DEVICES_MAX names, -ENOMEM.
 */
int npu_devices_json(const char *const *names, size_t n, json_object **ret, size_t *ret_bad);

/*
 * npu_job_body() - the body of POST /npu/jobs: {"workloadId", "sessionId", "inputs":
 * {"configPath"}}, "inputs" only when @config_path is not NULL.
 * Return: 0, -EINVAL if @workload or @session is empty, -ENOMEM.
 */
int npu_job_body(const char *workload, const char *session, const char *config_path, json_object **ret);

/* npu_job_state_final() - whether a broker job in @state has ended: succeeded, failed, cancelled
 * or interrupted. */
bool npu_job_state_final(const char *state);

/*
 * npu_format_chips() - GET /npu/chips as text: a table "ID NAME HEALTH SELECTABLE HELD-BY REASON"
 * (REASON: why a chip is not selectable, else its last failed re-probe, else "-"), a line when the
 * chips are still being probed or their discovery failed, the usable CDI devices and the refused
 * CDI specs with their reasons.
 * Return: 0, -EBADMSG if @answer has no "chips" array, -ENOMEM.
 */
int npu_format_chips(json_object *answer, char **ret);

/*
 * npu_format_workloads() - GET /npu/workloads as a table "ID CHIPS TIMEOUT DESCRIPTION".
 * Return: 0, -EBADMSG if @answer has no "workloads" array, -ENOMEM.
 */
int npu_format_workloads(json_object *answer, char **ret);

/*
 * npu_format_jobs() - GET /npu/jobs as a table "JOB WORKLOAD STATE CHIPS CREATED" (CHIPS the
 * logic ids comma-separated, CREATED in RFC 3339 UTC).
 * Return: 0, -EBADMSG if @answer has no "jobs" array, -ENOMEM.
 */
int npu_format_jobs(json_object *answer, char **ret);
