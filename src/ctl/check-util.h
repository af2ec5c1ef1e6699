/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure part of `sandbox-runnerctl check`: a running daemon's GET /health judged item by item
 * (sandbox, limits, egress, environments, npu), each ok, warn or fail with the reason and the
 * fix, as the report of `sandbox-runnerd --check` ({"checks": [...], "ok": bool}) and as its
 * lines, server strings escaped. json-c and libc only. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include <json-c/json.h>

/*
 * check_from_health() - the report for @health (GET /health's answer): {"checks": [{"id",
 * "status", "summary", "reason"?, "fix"?}...], "ok": bool}, the items "sandbox", "limits",
 * "egress", "environments" and "npu" in that order. Missing or mistyped fields count as the worst
 * case of the item (an answer without "sandbox" fails "sandbox").
 * Return: 0 or -ENOMEM.
 */
int check_from_health(json_object *health, json_object **ret);

/* check_report_ok() - the report's "ok": no item failed. */
bool check_report_ok(json_object *report);

/*
 * check_format() - one line an item, as sandbox-runnerd --check prints them: status and id in
 * columns, the summary, ". " and the reason, " Fix: " and the fix (warn and fail only). Strings
 * are escaped for a terminal. Return: 0, -ENOMEM, -EIO on a write error.
 */
int check_format(FILE *f, json_object *report);
