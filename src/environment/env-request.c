/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a PUT /environments/{name} may ask for (API.md "Environments"): the body's fields, the
 * package specifiers, channels and sources (env-source.h's checks, each refusal with its own
 * kind), and the client wheels, read from a workspace and copied into the store's hash storage.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "environment/env-manager-internal.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"
#include "workspace/workspace.h"
#include "workspace/ws-files.h"

#define PACKAGES_MAX 256
#define WHEELS_MAX 64
#define WHEEL_BYTES_MAX (512ULL << 20)

int env_refuse(EnvRefusal *ret_refusal, char **ret_why, EnvRefusal refusal, int error, const char *fmt, ...) {
        va_list ap;

        *ret_refusal = refusal;
        va_start(ap, fmt);
        if (vasprintf(ret_why, fmt, ap) < 0)
                *ret_why = NULL;
        va_end(ap);
        return *ret_why ? error : -ENOMEM;
}

/* ---- PUT /environments/{name} ------------------------------------------------------------ */

static int get_field(json_object *o, const char *key, json_type type, bool required, json_object **ret,
                     EnvRefusal *ret_refusal, char **ret_why) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) {
                *ret = NULL;
                if (required)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "'%s' is required", key);
                return 0;
        }
        if (!json_object_is_type(v, type))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "'%s' has the wrong type", key);
        *ret = v;
        return 0;
}

static int only_fields(json_object *o, const char *const *allowed, const char *what, EnvRefusal *ret_refusal,
                       char **ret_why) {
        json_object_object_foreach(o, key, val) {
                bool ok = false;
                (void) val;
                for (const char *const *a = allowed; *a && !ok; a++)
                        ok = streq(*a, key);
                if (!ok)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "unknown field '%s' in %s",
                                      key, what);
        }
        return 0;
}

static int parse_strings(json_object *a, size_t max, const char *what, char ***ret, EnvRefusal *ret_refusal,
                         char **ret_why) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = a ? json_object_array_length(a) : 0;

        if (n > max)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "at most %zu %s", max, what);
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(a, i);
                int r;

                if (!json_object_is_type(v, json_type_string))
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "%s must be strings", what);
                r = strv_extend(&l, json_object_get_string(v));
                if (r < 0)
                        return r;
        }
        *ret = STEAL(l);
        return 0;
}

/* A wheel already in the store, as GET /environments/{name} lists it: {"sha256", "file"} (a PUT
 * that keeps the wheels of an earlier one). */
static int stored_wheel(EnvManager *m, json_object *w, EnvWheel *ret, EnvRefusal *ret_refusal, char **ret_why) {
        static const char *const fields[] = { "sha256", "file", NULL };
        _cleanup_free_ char *path = NULL;
        json_object *sha, *file;
        EnvWheel x;
        int r;

        r = only_fields(w, fields, "a stored wheel", ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(w, "sha256", json_type_string, true, &sha, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(w, "file", json_type_string, true, &file, ret_refusal, ret_why);
        if (r < 0)
                return r;
        if (!env_sha256_valid(json_object_get_string(sha)) || !env_wheel_file_valid(json_object_get_string(file)))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "invalid stored wheel");
        x = (EnvWheel) { .sha256 = (char *) json_object_get_string(sha), .file = (char *) json_object_get_string(file) };
        path = env_store_wheel_path(m->store, &x);
        if (!path)
                return -ENOMEM;
        if (access(path, F_OK) < 0)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                                  "no stored wheel %s with SHA-256 %s", x.file, x.sha256);
        ret->sha256 = strdup(x.sha256);
        ret->file = strdup(x.file);
        return ret->sha256 && ret->file ? 0 : -ENOMEM;
}

/* Copy one client wheel ({"workspaceId", "path"}) into the store's hash storage. */
static int put_wheel(EnvManager *m, json_object *w, EnvWheel *ret, EnvRefusal *ret_refusal, char **ret_why) {
        static const char *const fields[] = { "workspaceId", "path", NULL };
        _cleanup_close_ int ws_fd = -EBADF, fd = -EBADF;
        json_object *id, *path;
        const char *base;
        int r;

        if (!json_object_is_type(w, json_type_object))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "each of 'wheels' is {\"workspaceId\", \"path\"} or {\"sha256\", \"file\"}");
        if (json_object_object_get_ex(w, "sha256", NULL))
                return stored_wheel(m, w, ret, ret_refusal, ret_why);
        r = only_fields(w, fields, "a wheel", ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(w, "workspaceId", json_type_string, true, &id, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(w, "path", json_type_string, true, &path, ret_refusal, ret_why);
        if (r < 0)
                return r;
        if (!workspace_id_valid(json_object_get_string(id)))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "invalid workspaceId of a wheel");
        if (ws_path_validate(json_object_get_string(path), false) < 0)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "invalid path of a wheel");
        ws_fd = workspace_open(m->workspaces_fd, json_object_get_string(id));
        if (ws_fd < 0)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "no workspace '%s'",
                              json_object_get_string(id));
        r = ws_file_open_read(ws_fd, json_object_get_string(path), WHEEL_BYTES_MAX, &fd, NULL);
        if (r < 0)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "the wheel '%s' cannot be read from workspace '%s': %s", json_object_get_string(path),
                              json_object_get_string(id), strerror(-r));
        base = strrchr(json_object_get_string(path), '/');
        base = base ? base + 1 : json_object_get_string(path);
        r = env_store_wheel_add(m->store, fd, base, ret);
        if (r == -EINVAL)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "'%s' is not a wheel's file name (NAME-VERSION-...-PLATFORM.whl)", base);
        if (r < 0)
                return log_error_errno(r, "Cannot store the wheel '%s': %m", base);
        return 0;
}

static int parse_source(EnvManager *m, json_object *src, EnvMeta *w, EnvRefusal *ret_refusal, char **ret_why) {
        static const char *const fields[] = { "indexUrl", "preset", "offline", NULL };
        json_object *url, *preset, *offline;
        const char *reason;
        int r;

        w->offline = m->config->env_offline;
        if (!src)
                return 0;
        r = only_fields(src, fields, "'source'", ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(src, "indexUrl", json_type_string, false, &url, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(src, "preset", json_type_string, false, &preset, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(src, "offline", json_type_boolean, false, &offline, ret_refusal, ret_why);
        if (r < 0)
                return r;
        if (url && env_index_url_check(json_object_get_string(url), &reason) < 0)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INDEX_URL, -EINVAL, "indexUrl: %s", reason);
        if (preset && !env_preset_url(json_object_get_string(preset), w->kind))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INDEX_URL, -EINVAL,
                              "unknown preset '%s' for %s environments", json_object_get_string(preset),
                              env_kind_to_string(w->kind));
        if ((url && !(w->index_url = strdup(json_object_get_string(url)))) ||
            (preset && !(w->preset = strdup(json_object_get_string(preset)))))
                return -ENOMEM;
        w->offline = (offline && json_object_get_boolean(offline)) || m->config->env_offline;
        return 0;
}

/* The body of a PUT, checked: what the setup will build. */
int env_request_parse(EnvManager *m, const char *name, Env *existing, json_object *body, EnvMeta **ret,
                      EnvRefusal *ret_refusal, char **ret_why) {
        static const char *const fields[] = { "kind", "displayName", "packages", "wheels", "source", "channels", NULL };
        _cleanup_(env_meta_freep) EnvMeta *w = NULL;
        json_object *kind, *display, *packages, *wheels, *source, *channels;
        const char *reason;
        int r;

        if (!json_object_is_type(body, json_type_object))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "the body must be a JSON object");
        r = only_fields(body, fields, "the body", ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(body, "kind", json_type_string, !existing, &kind, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(body, "displayName", json_type_string, false, &display, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(body, "packages", json_type_array, false, &packages, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(body, "wheels", json_type_array, false, &wheels, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(body, "source", json_type_object, false, &source, ret_refusal, ret_why);
        if (r >= 0)
                r = get_field(body, "channels", json_type_array, false, &channels, ret_refusal, ret_why);
        if (r < 0)
                return r;

        if (display && (!env_display_name_valid(json_object_get_string(display)) ||
                        (size_t) json_object_get_string_len(display) != strlen(json_object_get_string(display))))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "'displayName' must be 1 to %d bytes of UTF-8 without control characters",
                              ENV_DISPLAY_NAME_MAX);
        w = calloc(1, sizeof(EnvMeta));
        if (!w || !(w->name = strdup(name)) || (display && !(w->display_name = strdup(json_object_get_string(display)))))
                return -ENOMEM;
        if (kind) {
                w->kind = env_kind_from_string(json_object_get_string(kind));
                if (w->kind < 0)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                                      "'kind' must be python, r or conda");
        } else
                w->kind = (existing->meta ?: existing->wanted ?: existing->failed)->kind;
        if (existing && (existing->meta ?: existing->wanted ?: existing->failed) &&
            (existing->meta ?: existing->wanted ?: existing->failed)->kind != w->kind)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "environment '%s' is of another kind; remove it first", name);
        if (w->kind == ENV_KIND_CONDA && !m->config->env_micromamba)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "conda environments need [Environments] Micromamba= and MicromambaSHA256=");

        r = parse_strings(packages, PACKAGES_MAX, "packages", &w->packages, ret_refusal, ret_why);
        if (r < 0)
                return r;
        STRV_FOREACH(p, w->packages)
                if (env_package_spec_check(*p, &reason) < 0)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_PACKAGE_SPEC, -EINVAL, "package '%.64s': %s",
                                      *p, reason);
        r = parse_strings(channels, 32, "channels", &w->channels, ret_refusal, ret_why);
        if (r < 0)
                return r;
        STRV_FOREACH(c, w->channels)
                if (env_channel_check(*c, m->config->env_channels, &reason) < 0)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_CHANNEL, -EINVAL, "channel '%.64s': %s", *c,
                                      reason);
        r = parse_source(m, source, w, ret_refusal, ret_why);
        if (r < 0)
                return r;
        if (w->kind == ENV_KIND_R && w->packages) {
                EnvSourceRequest sr = { .kind = ENV_KIND_R, .cran = true };
                if (env_offline_check(&sr, w->offline, &reason) < 0)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_OFFLINE, -EINVAL, "%s", reason);
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "R packages from CRAN are not supported yet; r environments hold Debian's R packages");
        }
        {
                EnvSourceRequest sr = {
                        .kind = w->kind, .index_url = w->index_url, .preset = w->preset,
                        .n_channels = strv_length(w->channels),
                };
                if (env_offline_check(&sr, w->offline, &reason) < 0)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_OFFLINE, -EINVAL, "%s", reason);
        }
        if (wheels && w->kind != ENV_KIND_PYTHON)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "wheels are for python environments");
        if (wheels && json_object_array_length(wheels) > WHEELS_MAX)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL, "at most %d wheels", WHEELS_MAX);
        w->wheels = calloc(wheels ? json_object_array_length(wheels) + 1 : 1, sizeof(EnvWheel));
        if (!w->wheels)
                return -ENOMEM;
        for (size_t i = 0; wheels && i < json_object_array_length(wheels); i++) {
                r = put_wheel(m, json_object_array_get_idx(wheels, i), &w->wheels[w->n_wheels], ret_refusal, ret_why);
                if (r < 0)
                        return r;
                w->n_wheels++;
        }
        *ret = STEAL(w);
        return 0;
}

