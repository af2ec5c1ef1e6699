/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of the env command: request bodies of env create and env install (merging specs
 * and wheels), wheel arguments, progress lines, setup outcomes, redrawing lines on a terminal. It
 * calls output.c (escaping), json-c and libc; no request, no global state. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-util.h"
#include "env-util.h"
#include "output.h"
#include "util/json-util.h"

bool env_kind_valid(const char *kind) {
        return kind && (streq(kind, "python") || streq(kind, "r") || streq(kind, "conda"));
}

static const char *string_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static json_object *array_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
                return NULL;
        return v;
}

int env_wheel_parse(const char *arg, json_object **ret) {
        _cleanup_(json_object_putp) json_object *w = NULL;
        const char *colon = arg ? strchr(arg, ':') : NULL;

        if (!colon || colon == arg || colon[1] == '\0')
                return -EINVAL;

        w = json_object_new_object();
        if (!w ||
            json_add(w, "workspaceId", json_object_new_string_len(arg, (int) (colon - arg))) < 0 ||
            json_add(w, "path", json_object_new_string(colon + 1)) < 0)
                return -ENOMEM;

        *ret = STEAL(w);
        return 0;
}

static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
}

int env_spec_name(const char *kind, const char *spec, char **ret) {
        const char *p = spec, *sep;
        bool fold = !streq(kind ?: "", "r");
        char *n, *q;
        size_t len;

        if (!spec)
                return -EINVAL;
        /* conda: "channel::name..." */
        sep = strstr(spec, "::");
        if (sep && streq(kind ?: "", "conda"))
                p = sep + 2;

        /* A name starts with a letter or digit. */
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
                return -EINVAL;
        for (len = 0; name_char(p[len]); len++)
                ;

        n = malloc(len + 1);
        if (!n)
                return -ENOMEM;
        q = n;
        for (size_t i = 0; i < len; i++) {
                char c = p[i];

                if (fold && (c == '-' || c == '_' || c == '.')) {
                        if (q > n && q[-1] == '-')
                                continue;
                        c = '-';
                } else if (fold && c >= 'A' && c <= 'Z')
                        c += 'a' - 'A';
                *q++ = c;
        }
        *q = '\0';

        *ret = n;
        return 0;
}

/* Whether @a and @b are specs for the same name (a spec without a name matches none). */
static bool same_name(const char *kind, const char *a, const char *b) {
        _cleanup_free_ char *na = NULL, *nb = NULL;

        return env_spec_name(kind, a, &na) >= 0 && env_spec_name(kind, b, &nb) >= 0 && streq(na, nb);
}

/* The distribution of a wheel file name ("srtest_alpha-1.0-py3-none-any.whl" → "srtest-alpha"),
 * or NULL (also on OOM: then nothing is replaced). */
static char *wheel_dist(const char *path) {
        const char *base = path ? strrchr(path, '/') : NULL;
        _cleanup_free_ char *name = NULL;
        char *n = NULL;

        base = base ? base + 1 : path;
        if (!base)
                return NULL;
        name = strndup(base, strcspn(base, "-"));
        if (!name || env_spec_name("python", name, &n) < 0)
                return NULL;
        return n;
}

/* Append @specs to the array @packages; a spec for a name already in it replaces that entry. */
static int merge_specs(json_object *packages, const char *kind, const char *const *specs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                size_t len = json_object_array_length(packages), k;
                json_object *s = json_object_new_string(specs[i]);

                if (!s)
                        return -ENOMEM;
                for (k = 0; k < len; k++)
                        if (same_name(kind, json_object_get_string(json_object_array_get_idx(packages, k)), specs[i]))
                                break;
                if (k < len) {
                        if (json_object_array_put_idx(packages, k, s) < 0) {
                                json_object_put(s);
                                return -ENOMEM;
                        }
                } else if (json_array_add(packages, s) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Append the "WORKSPACE:PATH" @wheels to @list; one of the same distribution is replaced. */
static int merge_wheels(json_object *list, const char *const *wheels, size_t n) {
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *dist = NULL;
                json_object *w = NULL;
                size_t len = json_object_array_length(list), k = len;
                int r;

                r = env_wheel_parse(wheels[i], &w);
                if (r < 0)
                        return r;
                dist = wheel_dist(string_field(w, "path"));
                for (k = 0; dist && k < len; k++) {
                        json_object *old = json_object_array_get_idx(list, k);
                        _cleanup_free_ char *od = wheel_dist(string_field(old, "file") ?: string_field(old, "path"));

                        if (od && streq(od, dist))
                                break;
                }
                if (dist && k < len) {
                        if (json_object_array_put_idx(list, k, w) < 0) {
                                json_object_put(w);
                                return -ENOMEM;
                        }
                } else if (json_array_add(list, w) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int add_strings(json_object *a, const char *const *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (json_array_add(a, json_object_new_string(l[i])) < 0)
                        return -ENOMEM;
        return 0;
}

int env_create_body(const EnvCreateArgs *a, json_object **ret) {
        _cleanup_(json_object_putp) json_object *body = json_object_new_object();
        json_object *packages, *wheels, *source, *channels;
        int r;

        if (!body || json_add(body, "kind", json_object_new_string(a->kind ?: "")) < 0 ||
            json_add(body, "packages", packages = json_object_new_array()) < 0 ||
            json_add(body, "wheels", wheels = json_object_new_array()) < 0 ||
            json_add(body, "source", source = json_object_new_object()) < 0)
                return -ENOMEM;

        if (add_strings(packages, a->packages, a->n_packages) < 0)
                return -ENOMEM;
        r = merge_wheels(wheels, a->wheels, a->n_wheels);
        if (r < 0)
                return r;

        if ((a->index_url && json_add(source, "indexUrl", json_object_new_string(a->index_url)) < 0) ||
            (a->preset && json_add(source, "preset", json_object_new_string(a->preset)) < 0) ||
            (a->offline && json_add(source, "offline", json_object_new_boolean(true)) < 0))
                return -ENOMEM;

        if (a->n_channels > 0) {
                if (json_add(body, "channels", channels = json_object_new_array()) < 0 ||
                    add_strings(channels, a->channels, a->n_channels) < 0)
                        return -ENOMEM;
        }

        *ret = STEAL(body);
        return 0;
}

/* The strings of the array @key of @o, as a new array. NULL on OOM. */
static json_object *copy_strings(json_object *o, const char *key) {
        json_object *src = array_field(o, key), *a = json_object_new_array();

        for (size_t i = 0; a && src && i < json_object_array_length(src); i++) {
                json_object *s = json_object_array_get_idx(src, i);

                if (json_object_is_type(s, json_type_string) && json_array_add(a, json_object_get(s)) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        }
        return a;
}

/* The environment's stored wheels, as they go back: {"sha256", "file"}. NULL on OOM. */
static json_object *copy_wheels(json_object *current) {
        json_object *src = array_field(current, "wheels"), *a = json_object_new_array();

        for (size_t i = 0; a && src && i < json_object_array_length(src); i++) {
                json_object *w = json_object_array_get_idx(src, i), *c;
                const char *sha = string_field(w, "sha256"), *file = string_field(w, "file");

                if (!sha || !file)
                        continue;
                c = json_object_new_object();
                if (!c)
                        goto fail;
                if (json_add(c, "sha256", json_object_new_string(sha)) < 0 ||
                    json_add(c, "file", json_object_new_string(file)) < 0) {
                        json_object_put(c);
                        goto fail;
                }
                if (json_array_add(a, c) < 0)
                        goto fail;
        }
        return a;

fail:
        json_object_put(a);
        return NULL;
}

/* The source of @current as it goes back: indexUrl and preset when set, offline only when true
 * (false is the default, and the daemon's instance-wide offline mode must not be argued with). */
static json_object *copy_source(json_object *current) {
        json_object *src = NULL, *s = json_object_new_object(), *v;
        const char *url, *preset;

        if (!s)
                return NULL;
        if (!json_object_object_get_ex(current, "source", &src) || !json_object_is_type(src, json_type_object))
                return s;
        url = string_field(src, "indexUrl");
        preset = string_field(src, "preset");
        if ((url && json_add(s, "indexUrl", json_object_new_string(url)) < 0) ||
            (preset && json_add(s, "preset", json_object_new_string(preset)) < 0) ||
            (json_object_object_get_ex(src, "offline", &v) && json_object_get_boolean(v) &&
             json_add(s, "offline", json_object_new_boolean(true)) < 0)) {
                json_object_put(s);
                return NULL;
        }
        return s;
}

int env_install_body(json_object *current, const char *const *specs, size_t n_specs,
                     const char *const *wheels, size_t n_wheels, json_object **ret) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        json_object *packages, *list;
        const char *kind = string_field(current, "kind");
        int r;

        if (!kind)
                return -EBADMSG;

        body = json_object_new_object();
        if (!body || json_add(body, "kind", json_object_new_string(kind)) < 0 ||
            json_add(body, "packages", packages = copy_strings(current, "requested")) < 0 ||
            json_add(body, "wheels", list = copy_wheels(current)) < 0 ||
            json_add(body, "source", copy_source(current)) < 0)
                return -ENOMEM;
        if (array_field(current, "channels") &&
            json_add(body, "channels", copy_strings(current, "channels")) < 0)
                return -ENOMEM;
        if (string_field(current, "displayName") &&
            json_add(body, "displayName", json_object_new_string(string_field(current, "displayName"))) < 0)
                return -ENOMEM;

        r = merge_specs(packages, kind, specs, n_specs);
        if (r < 0)
                return r;
        r = merge_wheels(list, wheels, n_wheels);
        if (r < 0)
                return r;

        *ret = STEAL(body);
        return 0;
}

int env_progress_line(json_object *entry, size_t width, char **ret) {
        _cleanup_free_ char *name = output_escaped(string_field(entry, "name") ?: "?"),
                            *phase = output_escaped(string_field(entry, "phase") ?: "?"),
                            *step = output_escaped(string_field(entry, "step")),
                            *error = output_escaped(string_field(entry, "error"));
        json_object *v;
        int64_t done = -1, total = -1;
        char count[48];
        int r;

        if (!name || !phase || !step || !error)
                return -ENOMEM;
        if (json_object_object_get_ex(entry, "done", &v) && json_object_is_type(v, json_type_int))
                done = json_object_get_int64(v);
        if (json_object_object_get_ex(entry, "total", &v) && json_object_is_type(v, json_type_int))
                total = json_object_get_int64(v);
        if (done >= 0 && total >= 0)
                (void) snprintf(count, sizeof(count), "%" PRIi64 "/%" PRIi64, done, total);
        else
                (void) snprintf(count, sizeof(count), "-/-");

        if (streq(phase, "failed") && !isempty(error))
                r = asprintf(ret, "%-*s %-8s %s: %s", (int) MIN(width, (size_t) 256), name, phase, count, error);
        else
                r = asprintf(ret, "%-*s %-8s %s%s%s", (int) MIN(width, (size_t) 256), name, phase, count,
                             isempty(step) ? "" : " ", step);
        return r < 0 ? -ENOMEM : 0;
}

bool env_phase_final(const char *phase) {
        return phase && (streq(phase, "ready") || streq(phase, "failed"));
}

EnvOutcome env_setup_outcome(json_object *answer) {
        json_object *list = array_field(answer, "setup");
        bool failed = false;

        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                const char *phase = string_field(json_object_array_get_idx(list, i), "phase");

                if (!env_phase_final(phase))
                        return ENV_OUTCOME_RUNNING;
                if (streq(phase, "failed"))
                        failed = true;
        }
        return failed ? ENV_OUTCOME_FAILED : ENV_OUTCOME_READY;
}

json_object *env_setup_entry(json_object *answer, const char *name) {
        json_object *list = array_field(answer, "setup");

        for (size_t i = 0; list && name && i < json_object_array_length(list); i++) {
                json_object *e = json_object_array_get_idx(list, i);

                if (streq(string_field(e, "name") ?: "", name))
                        return e;
        }
        return NULL;
}

/* The bytes of @s that make at most @columns characters (UTF-8 continuation bytes are free). */
static size_t cut_at(const char *s, size_t columns) {
        size_t chars = 0, i;

        if (columns == 0)
                return strlen(s);
        for (i = 0; s[i]; i++) {
                if (((unsigned char) s[i] & 0xc0) == 0x80)
                        continue;
                if (chars == columns)
                        break;
                chars++;
        }
        return i;
}

int env_redraw(FILE *f, size_t n_old, char *const *lines, size_t n_lines, size_t columns) {
        size_t cols = columns > 1 ? columns - 1 : columns;      /* no line fills the last column */

        if (n_old > 0)
                fprintf(f, "\r\033[%zuA", n_old);
        for (size_t i = 0; i < n_lines; i++)
                fprintf(f, "\r\033[2K%.*s\n", (int) cut_at(lines[i], cols), lines[i]);
        if (n_old > n_lines) {
                for (size_t i = n_lines; i < n_old; i++)
                        fputs("\r\033[2K\n", f);
                fprintf(f, "\r\033[%zuA", n_old - n_lines);
        }
        return fflush(f) != 0 || ferror(f) ? -EIO : 0;
}
