/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Quota settings that persist across restarts: config baseline, environment seeds, API changes. */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

typedef struct Config Config;

/* 0 means unlimited for every field. */
typedef struct QuotaSettings {
        uint64_t max_workspace_bytes;
        uint64_t max_output_bytes;
        uint64_t max_upload_file_bytes;
        uint64_t max_upload_request_bytes;
} QuotaSettings;

/*
 * quota_settings_load() - the settings in force: $STATE_DIRECTORY/settings/quota.json if it
 * exists (written by the API); otherwise the [Quota] configuration with the environment seeds
 * SANDBOX_RUNNER_MAX_WORKSPACE_BYTES, SANDBOX_RUNNER_MAX_OUTPUT_BYTES,
 * SANDBOX_RUNNER_MAX_UPLOAD_FILE_BYTES, SANDBOX_RUNNER_MAX_UPLOAD_REQUEST_BYTES applied on top
 * (sizes as in the configuration: 10G, 512M, 0). Return: 0, -EINVAL with *ret_error.
 */
int quota_settings_load(const Config *c, const char *state_dir, QuotaSettings *ret, char **ret_error);

/* quota_settings_save() - persist atomically. Return: 0 or -errno. */
int quota_settings_save(const char *state_dir, const QuotaSettings *s);

/*
 * quota_settings_apply_json() - a PUT body: any subset of the four camelCase fields, each a
 * non-negative integer. Pure. Return: 0, -EBADMSG with *ret_why (static).
 */
int quota_settings_apply_json(QuotaSettings *s, json_object *o, const char **ret_why);

json_object *quota_settings_to_json(const QuotaSettings *s);
