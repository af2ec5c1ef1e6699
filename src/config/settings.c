/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Quota settings that persist across restarts: config baseline, environment seeds, API changes. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/settings.h"
#include "util/json-util.h"
#include "util/macro.h"

typedef struct QuotaField {
        const char *json;
        const char *env;
        size_t offset;
} QuotaField;

static const QuotaField fields[] = {
        { "maxWorkspaceBytes",     "SANDBOX_RUNNER_MAX_WORKSPACE_BYTES",      offsetof(QuotaSettings, max_workspace_bytes) },
        { "maxOutputBytes",        "SANDBOX_RUNNER_MAX_OUTPUT_BYTES",         offsetof(QuotaSettings, max_output_bytes) },
        { "maxUploadFileBytes",    "SANDBOX_RUNNER_MAX_UPLOAD_FILE_BYTES",    offsetof(QuotaSettings, max_upload_file_bytes) },
        { "maxUploadRequestBytes", "SANDBOX_RUNNER_MAX_UPLOAD_REQUEST_BYTES", offsetof(QuotaSettings, max_upload_request_bytes) },
};

#define FIELD(s, f) (*(uint64_t *) ((uint8_t *) (s) + (f)->offset))

int quota_settings_apply_json(QuotaSettings *s, json_object *o, const char **ret_why) {
        QuotaSettings n = *s;

        if (!json_object_is_type(o, json_type_object)) {
                *ret_why = "the body must be a JSON object";
                return -EBADMSG;
        }
        json_object_object_foreach(o, key, val) {
                const QuotaField *f = NULL;
                int64_t v;

                for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                        if (streq(key, fields[i].json))
                                f = &fields[i];
                if (!f) {
                        *ret_why = "unknown field (known: maxWorkspaceBytes, maxOutputBytes, maxUploadFileBytes, "
                                   "maxUploadRequestBytes)";
                        return -EBADMSG;
                }
                if (!json_object_is_type(val, json_type_int)) {
                        *ret_why = "quota values must be integers (bytes; 0 = unlimited)";
                        return -EBADMSG;
                }
                v = json_object_get_int64(val);
                if (v < 0 || v == INT64_MAX) {
                        *ret_why = "quota values must be between 0 and 2^63-2 bytes";
                        return -EBADMSG;
                }
                FIELD(&n, f) = (uint64_t) v;
        }
        *s = n;
        return 0;
}

json_object *quota_settings_to_json(const QuotaSettings *s) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                json_object_object_add(o, fields[i].json, json_object_new_int64((int64_t) FIELD(s, &fields[i])));
        return o;
}

static int settings_path(const char *state_dir, const char *name, char **ret) {
        return asprintf(ret, "%s/settings/%s", state_dir, name) < 0 ? -ENOMEM : 0;
}

int quota_settings_load(const Config *c, const char *state_dir, QuotaSettings *ret, char **ret_error) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        QuotaSettings s = {
                .max_workspace_bytes = c->max_workspace_bytes,
                .max_output_bytes = c->max_output_bytes,
                .max_upload_file_bytes = c->max_upload_file_bytes,
                .max_upload_request_bytes = c->max_upload_request_bytes,
        };
        const char *why = NULL;
        int r;

        r = settings_path(state_dir, "quota.json", &path);
        if (r < 0)
                return r;
        if (access(path, F_OK) == 0) {
                o = json_object_from_file(path);
                if (!o || quota_settings_apply_json(&s, o, &why) < 0) {
                        if (asprintf(ret_error, "%s: %s", path, why ?: "not a JSON object") < 0)
                                return -ENOMEM;
                        return -EINVAL;
                }
                *ret = s;
                return 0;
        }

        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const char *e = getenv(fields[i].env);
                uint64_t v;

                if (isempty(e))
                        continue;
                if (config_parse_bytes(e, &v) < 0) {
                        if (asprintf(ret_error, "$%s='%s' is not a size (e.g. 10G, 512M, 0)", fields[i].env, e) < 0)
                                return -ENOMEM;
                        return -EINVAL;
                }
                FIELD(&s, &fields[i]) = v;
        }
        *ret = s;
        return 0;
}

int quota_settings_save(const char *state_dir, const QuotaSettings *s) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *tmp = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *text;
        int r;

        if (asprintf(&dir, "%s/settings", state_dir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        r = settings_path(state_dir, "quota.json", &path);
        if (r < 0)
                return r;
        r = settings_path(state_dir, ".quota.json.tmp", &tmp);
        if (r < 0)
                return r;
        o = quota_settings_to_json(s);
        if (!o)
                return -ENOMEM;
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        if (write(fd, text, strlen(text)) != (ssize_t) strlen(text) || write(fd, "\n", 1) != 1 || fsync(fd) < 0) {
                r = errno > 0 ? -errno : -EIO;
                (void) unlink(tmp);
                return r;
        }
        if (rename(tmp, path) < 0) {
                r = negative_errno();
                (void) unlink(tmp);
                return r;
        }
        return 0;
}
