/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The names the environments' store puts into paths (environment names, setup ids, wheel file
 * names) and EnvMeta in its meta.json form, parsed strictly (env-store.h). Pure: no I/O.
 */

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "environment/env-source.h"
#include "environment/env-store.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"
#include "util/utf8.h"

#define SHA256_HEX_LEN 64

bool env_name_valid(const char *name) {
        return str_token_valid(name, ENV_NAME_MAX, LOWERCASE_LETTERS DIGITS, LOWERCASE_LETTERS DIGITS "._-") &&
               !strstr(name, "..") && !streq(name, "setup");
}

bool env_display_name_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > ENV_DISPLAY_NAME_MAX || !utf8_valid(s, n))
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

bool env_setup_id_valid(const char *id) {
        return str_token_valid(id, ENV_SETUP_ID_MAX, NULL, ALPHANUMERICAL "_-");
}

bool env_wheel_file_valid(const char *file) {
        size_t n;

        if (!str_token_valid(file, ENV_WHEEL_FILE_MAX, ALPHANUMERICAL "_+-", ALPHANUMERICAL "._+-"))
                return false;
        n = strlen(file);
        return n > strlen(".whl") && streq(file + n - strlen(".whl"), ".whl");
}

bool env_sha256_valid(const char *s) {
        if (!s || strlen(s) != SHA256_HEX_LEN)
                return false;
        for (size_t i = 0; i < SHA256_HEX_LEN; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

void env_wheel_done(EnvWheel *w) {
        w->sha256 = mfree(w->sha256);
        w->file = mfree(w->file);
}

EnvMeta *env_meta_free(EnvMeta *m) {
        if (!m)
                return NULL;
        free(m->name);
        free(m->display_name);
        strv_free(m->packages);
        strv_free(m->debian_packages);
        for (size_t i = 0; i < m->n_wheels; i++)
                env_wheel_done(&m->wheels[i]);
        free(m->wheels);
        free(m->index_url);
        free(m->preset);
        strv_free(m->channels);
        return mfree(m);
}

/* ---- to JSON ------------------------------------------------------------------------------------- */

static int json_add_string(json_object *o, const char *key, const char *value) {
        return json_add(o, key, json_object_new_string(value));
}

static json_object *wheels_to_json(const EnvWheel *w, size_t n) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                _cleanup_(json_object_putp) json_object *o = json_object_new_object();

                if (!o || json_add_string(o, "sha256", w[i].sha256) < 0 || json_add_string(o, "file", w[i].file) < 0)
                        return NULL;
                if (json_object_array_add(a, o) < 0)
                        return NULL;
                o = NULL;
        }
        return STEAL(a);
}

json_object *env_meta_to_json(const EnvMeta *m) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const char *kind = env_kind_to_string(m->kind);

        if (!o || !m->name || !kind)
                return NULL;
        if (json_add_string(o, "name", m->name) < 0 ||
            (m->display_name && json_add_string(o, "displayName", m->display_name) < 0) ||
            json_add_string(o, "kind", kind) < 0 ||
            json_add(o, "base", json_object_new_boolean(m->base)) < 0 ||
            json_add(o, "packages", json_strv_new(m->packages)) < 0 ||
            json_add(o, "debianPackages", json_strv_new(m->debian_packages)) < 0 ||
            json_add(o, "wheels", wheels_to_json(m->wheels, m->n_wheels)) < 0 ||
            (m->index_url && json_add_string(o, "indexUrl", m->index_url) < 0) ||
            (m->preset && json_add_string(o, "preset", m->preset) < 0) ||
            json_add(o, "offline", json_object_new_boolean(m->offline)) < 0 ||
            json_add(o, "channels", json_strv_new(m->channels)) < 0 ||
            json_add(o, "revision", json_new_u64(m->revision)) < 0)
                return NULL;
        return STEAL(o);
}

/* ---- from JSON ----------------------------------------------------------------------------------- */

/* A JSON string without a NUL byte inside, copied. Return: 0, -EBADMSG or -ENOMEM. */
static int json_dup_string(json_object *v, char **ret) {
        const char *s;
        char *c;

        if (!json_object_is_type(v, json_type_string))
                return -EBADMSG;
        s = json_object_get_string(v);
        if ((size_t) json_object_get_string_len(v) != strlen(s))
                return -EBADMSG;
        c = strdup(s);
        if (!c)
                return -ENOMEM;
        free(*ret);
        *ret = c;
        return 0;
}

/* A string or null (NULL). */
static int json_dup_string_or_null(json_object *v, char **ret) {
        if (!v) {
                *ret = mfree(*ret);
                return 0;
        }
        return json_dup_string(v, ret);
}

static int json_to_strv(json_object *v, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n;
        int r;

        if (!json_object_is_type(v, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(v);
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = json_dup_string(json_object_array_get_idx(v, i), &l[i]);
                if (r < 0)
                        return r;
        }
        strv_free(*ret);
        *ret = STEAL(l);
        return 0;
}

static int json_to_wheels(json_object *v, EnvMeta *m) {
        size_t n;
        int r;

        if (!json_object_is_type(v, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(v);
        if (n == 0)
                return 0;
        m->wheels = calloc(n, sizeof(EnvWheel));
        if (!m->wheels)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *w = json_object_array_get_idx(v, i);
                EnvWheel *e = &m->wheels[m->n_wheels++];

                if (!json_object_is_type(w, json_type_object))
                        return -EBADMSG;
                json_object_object_foreach(w, key, val) {
                        if (streq(key, "sha256"))
                                r = json_dup_string(val, &e->sha256);
                        else if (streq(key, "file"))
                                r = json_dup_string(val, &e->file);
                        else
                                r = -EBADMSG;
                        if (r < 0)
                                return r;
                }
                if (!env_sha256_valid(e->sha256) || !env_wheel_file_valid(e->file))
                        return -EBADMSG;
        }
        return 0;
}

static int json_to_bool(json_object *v, bool *ret) {
        if (!json_object_is_type(v, json_type_boolean))
                return -EBADMSG;
        *ret = json_object_get_boolean(v);
        return 0;
}

static int meta_field(EnvMeta *m, const char *key, json_object *val, unsigned *seen) {
        int64_t rev;

        if (streq(key, "name")) {
                *seen |= 1U;
                return json_dup_string(val, &m->name);
        }
        if (streq(key, "displayName")) {
                int r = json_dup_string_or_null(val, &m->display_name);

                return r < 0 ? r : m->display_name && !env_display_name_valid(m->display_name) ? -EBADMSG : 0;
        }
        if (streq(key, "kind")) {
                if (!json_object_is_type(val, json_type_string))
                        return -EBADMSG;
                m->kind = env_kind_from_string(json_object_get_string(val));
                if (m->kind < 0)
                        return -EBADMSG;
                *seen |= 2U;
                return 0;
        }
        if (streq(key, "base"))
                return json_to_bool(val, &m->base);
        if (streq(key, "offline"))
                return json_to_bool(val, &m->offline);
        if (streq(key, "packages"))
                return json_to_strv(val, &m->packages);
        if (streq(key, "debianPackages"))
                return json_to_strv(val, &m->debian_packages);
        if (streq(key, "channels"))
                return json_to_strv(val, &m->channels);
        if (streq(key, "wheels"))
                return m->wheels ? -EBADMSG : json_to_wheels(val, m);
        if (streq(key, "indexUrl"))
                return json_dup_string_or_null(val, &m->index_url);
        if (streq(key, "preset"))
                return json_dup_string_or_null(val, &m->preset);
        if (streq(key, "revision")) {
                if (!json_object_is_type(val, json_type_int))
                        return -EBADMSG;
                rev = json_object_get_int64(val);
                if (rev < 0 || rev > (int64_t) UINT_MAX)
                        return -EBADMSG;
                m->revision = (unsigned) rev;
                return 0;
        }
        return -EBADMSG;
}

int env_meta_from_json(json_object *o, EnvMeta **ret) {
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        unsigned seen = 0;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        m = calloc(1, sizeof(EnvMeta));
        if (!m)
                return -ENOMEM;
        m->kind = _ENV_KIND_INVALID;

        json_object_object_foreach(o, key, val) {
                r = meta_field(m, key, val, &seen);
                if (r < 0)
                        return r;
        }
        if (seen != 3U || !env_name_valid(m->name))
                return -EBADMSG;
        *ret = STEAL(m);
        return 0;
}
