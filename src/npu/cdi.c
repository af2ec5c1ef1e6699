/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CDI specs: the strict JSON parser of a spec and its devices, kinds and device names, the typed
 * field helpers that cdi-edits.c shares. */

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/cdi-internal.h"
#include "npu/cdi.h"
#include "sandbox/sandbox-argv.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"

/* Objects of a spec nest 7 deep at most (spec, devices, device, containerEdits, hooks, hook,
 * args): a little room, and no more. */
#define CDI_JSON_DEPTH_MAX 16
/* The longest label of a kind's vendor, a kind's class and a device's name. */
#define CDI_LABEL_MAX 63
#define CDI_VENDOR_MAX 253
#define CDI_NAME_MAX 255

/* ---- names and paths ---------------------------------------------------------------------------- */

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9][A-Za-z0-9<extra>]*, @n bytes, 1 ≤ @n ≤ @max. */
static bool word_valid(const char *s, size_t n, size_t max, const char *extra) {
        if (n == 0 || n > max || !is_alnum(s[0]))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!is_alnum(s[i]) && !(s[i] && strchr(extra, s[i])))
                        return false;
        return true;
}

/* A DNS-like vendor: two or more labels of letters, digits and inner '-'. */
static bool vendor_valid(const char *s, size_t n) {
        size_t labels = 0;

        if (n == 0 || n > CDI_VENDOR_MAX)
                return false;
        for (size_t i = 0; i < n; ) {
                size_t l = 0;

                while (i + l < n && s[i + l] != '.')
                        l++;
                if (!word_valid(s + i, l, CDI_LABEL_MAX, "-") || s[i + l - 1] == '-')
                        return false;
                labels++;
                i += l;
                if (i < n && ++i == n)
                        return false;           /* a trailing dot */
        }
        return labels >= 2;
}

static bool kind_valid_n(const char *s, size_t n) {
        const char *slash = memchr(s, '/', n);

        if (!slash)
                return false;
        return vendor_valid(s, (size_t) (slash - s)) &&
                word_valid(slash + 1, n - (size_t) (slash - s) - 1, CDI_LABEL_MAX, "_.-");
}

static bool device_name_valid(const char *s) {
        return word_valid(s, strlen(s), CDI_NAME_MAX, "_.:-");
}

bool cdi_device_name_valid(const char *qualified) {
        const char *eq;

        if (!qualified)
                return false;
        eq = strchr(qualified, '=');
        return eq && kind_valid_n(qualified, (size_t) (eq - qualified)) && device_name_valid(eq + 1);
}

/* "0.3.0" to "0.8.0" (the released 0.x versions nvidia-ctk and others write), and "1.x.y". */
static bool version_supported(const char *v) {
        unsigned long part[3];
        const char *p = v;

        for (size_t i = 0; i < 3; i++) {
                size_t l = strspn(p, "0123456789");

                if (l == 0 || l > 4 || (l > 1 && p[0] == '0'))
                        return false;
                part[i] = strtoul(p, NULL, 10);
                p += l;
                if (*p != (i < 2 ? '.' : '\0'))
                        return false;
                p++;
        }
        if (part[0] == 0)
                return part[1] >= 3 && part[1] <= 8 && part[2] == 0;
        return part[0] == 1;
}
/* ---- typed fields ------------------------------------------------------------------------------- */

/* A JSON path for the reasons: the top level is "". */
const char *cdi_shown(const char *path) {
        return path[0] ? path : "top level";
}

char *cdi_path_join(const char *path, const char *key) {
        char *s;

        return asprintf(&s, "%s%s%s", path, path[0] ? "." : "", key) < 0 ? NULL : s;
}

char *cdi_path_index(const char *path, size_t i) {
        char *s;

        return asprintf(&s, "%s[%zu]", path, i) < 0 ? NULL : s;
}

static const char *type_name(json_type t) {
        switch (t) {
        case json_type_object:
                return "an object";
        case json_type_array:
                return "an array";
        case json_type_string:
                return "a string";
        case json_type_int:
                return "an integer";
        case json_type_boolean:
                return "a boolean";
        case json_type_double:
        case json_type_null:
                break;
        }
        return "a value";
}

int cdi_expect(json_object *o, json_type t, const char *path, char **why) {
        if (o && json_object_is_type(o, t))
                return 0;
        return set_message(why, -EBADMSG, "%s: must be %s", cdi_shown(path), type_name(t));
}

/* Strict decoding: every field of @o is one of @known (NULL-terminated). */
int cdi_known_fields(json_object *o, const char *path, const char *const *known, char **why) {
        json_object_object_foreach(o, key, v) {
                _cleanup_free_ char *k = NULL;
                bool found = false;

                (void) v;
                for (const char *const *f = known; *f && !found; f++)
                        found = streq(*f, key);
                if (found)
                        continue;
                k = str_escape_log(key, 64);
                if (!k)
                        return -ENOMEM;
                return set_message(why, -EBADMSG, "%s: unknown field '%s'", cdi_shown(path), k);
        }
        return 0;
}

int cdi_check_string(json_object *o, const char *path, const char **ret, char **why) {
        size_t n;
        int r;

        r = cdi_expect(o, json_type_string, path, why);
        if (r < 0)
                return r;
        n = (size_t) json_object_get_string_len(o);
        if (n > CDI_STRING_MAX)
                return set_message(why, -EBADMSG, "%s: longer than %d bytes", cdi_shown(path), CDI_STRING_MAX);
        *ret = json_object_get_string(o);
        if (strlen(*ret) != n)
                return set_message(why, -EBADMSG, "%s: holds a NUL byte", cdi_shown(path));
        return 0;
}

/* Field @key of @o as a string: *@ret NULL when absent (then an error if @required). */
int cdi_field_string(json_object *o, const char *path, const char *key, bool required,
                        const char **ret, char **why) {
        _cleanup_free_ char *p = NULL;
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(o, key, &v)) {
                if (required)
                        return set_message(why, -EBADMSG, "%s: missing field '%s'", cdi_shown(path), key);
                return 0;
        }
        p = cdi_path_join(path, key);
        if (!p)
                return -ENOMEM;
        return cdi_check_string(v, p, ret, why);
}

/* Field @key of @o as an integer in [@min, @max], if present: only its type and range count. */
int cdi_field_integer(json_object *o, const char *path, const char *key, int64_t min, int64_t max, char **why) {
        _cleanup_free_ char *p = NULL;
        json_object *v;
        int64_t i;
        int r;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        p = cdi_path_join(path, key);
        if (!p)
                return -ENOMEM;
        r = cdi_expect(v, json_type_int, p, why);
        if (r < 0)
                return r;
        errno = 0;
        i = json_object_get_int64(v);
        if (errno != 0 || i < min || i > max)
                return set_message(why, -EBADMSG, "%s: out of range", p);
        return 0;
}

/* @o as an array of at most @max entries; *@ret_n its length. */
int cdi_check_array(json_object *o, const char *path, size_t max, size_t *ret_n, char **why) {
        int r;

        r = cdi_expect(o, json_type_array, path, why);
        if (r < 0)
                return r;
        *ret_n = json_object_array_length(o);
        if (*ret_n > max)
                return set_message(why, -EBADMSG, "%s: more than %zu entries", path, max);
        return 0;
}

/* An array of strings (each checked), at most CDI_EDITS_MAX. */
int cdi_check_string_array(json_object *o, const char *path, char **why) {
        size_t n;
        int r;

        r = cdi_check_array(o, path, CDI_EDITS_MAX, &n, why);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = cdi_path_index(path, i);
                const char *s;

                if (!p)
                        return -ENOMEM;
                r = cdi_check_string(json_object_array_get_idx(o, i), p, &s, why);
        }
        return r;
}

/* "annotations": an object of strings, ignored. */
static int check_annotations(json_object *o, const char *path, char **why) {
        _cleanup_free_ char *p = cdi_path_join(path, "annotations");
        json_object *a;
        int r;

        if (!p)
                return -ENOMEM;
        if (!json_object_object_get_ex(o, "annotations", &a))
                return 0;
        r = cdi_expect(a, json_type_object, p, why);
        if (r < 0)
                return r;
        if (json_object_object_length(a) > CDI_EDITS_MAX)
                return set_message(why, -EBADMSG, "%s: more than %d entries", p, CDI_EDITS_MAX);
        json_object_object_foreach(a, key, v) {
                _cleanup_free_ char *q = NULL;
                const char *s;

                if (strlen(key) > CDI_STRING_MAX)
                        return set_message(why, -EBADMSG, "%s: a key longer than %d bytes", p, CDI_STRING_MAX);
                q = cdi_path_join(p, "<value>");
                if (!q)
                        return -ENOMEM;
                r = cdi_check_string(v, q, &s, why);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- the spec ----------------------------------------------------------------------------------- */

static int parse_device(CdiSpec *s, json_object *o, const char *path, char **why) {
        static const char *const known[] = { "name", "annotations", "containerEdits", NULL };
        _cleanup_free_ char *p = NULL, *shown_name = NULL;
        CdiDevice *d = &s->devices[s->n_devices];
        const char *name;
        json_object *edits;
        int r;

        r = cdi_expect(o, json_type_object, path, why);
        if (r >= 0)
                r = cdi_known_fields(o, path, known, why);
        if (r >= 0)
                r = cdi_field_string(o, path, "name", true, &name, why);
        if (r >= 0)
                r = check_annotations(o, path, why);
        if (r < 0)
                return r;
        shown_name = str_escape_log(name, 64);
        if (!shown_name)
                return -ENOMEM;
        if (!device_name_valid(name))
                return set_message(why, -EBADMSG, "%s.name: '%s' is not a device name ([A-Za-z0-9][A-Za-z0-9_.:-]*, "
                                   "at most %d bytes)", path, shown_name, CDI_NAME_MAX);
        for (size_t i = 0; i < s->n_devices; i++)
                if (streq(s->devices[i].name, name))
                        return set_message(why, -EBADMSG, "%s.name: device '%s' is defined twice", path, shown_name);
        if (!json_object_object_get_ex(o, "containerEdits", &edits))
                return set_message(why, -EBADMSG, "%s: missing field 'containerEdits'", path);

        *d = (CdiDevice) { .name = strdup(name) };
        if (!d->name)
                return -ENOMEM;
        s->n_devices++;         /* from here on cdi_spec_free() frees it */
        p = cdi_path_join(path, "containerEdits");
        if (!p)
                return -ENOMEM;
        return cdi_edits_parse(&d->edits, edits, p, why);
}

static int parse_devices(CdiSpec *s, json_object *top, char **why) {
        json_object *a;
        size_t n;
        int r;

        if (!json_object_object_get_ex(top, "devices", &a))
                return set_message(why, -EBADMSG, "missing field 'devices'");
        r = cdi_check_array(a, "devices", CDI_DEVICES_MAX, &n, why);
        if (r < 0)
                return r;
        if (n == 0)
                return set_message(why, -EBADMSG, "devices: a spec defines at least one device");
        s->devices = calloc(n, sizeof(CdiDevice));
        if (!s->devices)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = cdi_path_index("devices", i);

                if (!p)
                        return -ENOMEM;
                r = parse_device(s, json_object_array_get_idx(a, i), p, why);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_top(CdiSpec *s, json_object *top, char **why) {
        static const char *const known[] = { "cdiVersion", "kind", "annotations", "devices", "containerEdits", NULL };
        _cleanup_free_ char *shown_value = NULL;
        const char *version, *kind;
        json_object *edits;
        int r;

        r = cdi_expect(top, json_type_object, "", why);
        if (r >= 0)
                r = cdi_known_fields(top, "", known, why);
        if (r >= 0)
                r = cdi_field_string(top, "", "cdiVersion", true, &version, why);
        if (r >= 0)
                r = cdi_field_string(top, "", "kind", true, &kind, why);
        if (r >= 0)
                r = check_annotations(top, "", why);
        if (r < 0)
                return r;
        if (!version_supported(version)) {
                shown_value = str_escape_log(version, 32);
                if (!shown_value)
                        return -ENOMEM;
                return set_message(why, -EBADMSG, "cdiVersion: '%s' is not supported (0.3.0 to 0.8.0, or 1.x.y)",
                                   shown_value);
        }
        if (!kind_valid_n(kind, strlen(kind))) {
                shown_value = str_escape_log(kind, 64);
                if (!shown_value)
                        return -ENOMEM;
                return set_message(why, -EBADMSG, "kind: '%s' is not vendor/class (a vendor name with a dot, a class "
                                   "of [A-Za-z0-9][A-Za-z0-9_.-]*)", shown_value);
        }
        s->kind = strdup(kind);
        if (!s->kind)
                return -ENOMEM;
        if (json_object_object_get_ex(top, "containerEdits", &edits)) {
                r = cdi_edits_parse(&s->edits, edits, "containerEdits", why);
                if (r < 0)
                        return r;
        }
        r = parse_devices(s, top, why);
        if (r < 0)
                return r;
        /* A spec-level edit goes with every device: one a sandbox cannot honour refuses them all. */
        if (s->edits.refusal)
                return set_message(why, -EBADMSG, "%s", s->edits.refusal);
        return 0;
}

static int parse_json(const char *text, size_t len, json_object **ret, char **why) {
        enum json_tokener_error err;
        int r;

        r = json_parse_strict(text, len, CDI_JSON_DEPTH_MAX, ret, &err);
        if (r != -EBADMSG)
                return r;
        return set_message(why, r, "malformed JSON: %s",
                           err == json_tokener_continue ? "the document is incomplete" :
                           err == json_tokener_success ? "data after the document" : json_tokener_error_desc(err));
}

int cdi_spec_parse(const char *text, size_t len, const char *origin, CdiSpec **ret, char **ret_why) {
        _cleanup_(json_object_putp) json_object *top = NULL;
        _cleanup_(cdi_spec_freep) CdiSpec *s = NULL;
        _cleanup_free_ char *why = NULL;
        int r;

        if (len > CDI_SPEC_SIZE_MAX)
                r = set_message(&why, -EBADMSG, "the spec is larger than %zu bytes", CDI_SPEC_SIZE_MAX);
        else if (memchr(text, '\0', len))
                r = set_message(&why, -EBADMSG, "the spec holds a NUL byte");
        else
                r = parse_json(text, len, &top, &why);
        if (r >= 0) {
                s = calloc(1, sizeof(CdiSpec));
                if (!s)
                        return -ENOMEM;
                if (origin) {
                        s->origin = strdup(origin);
                        if (!s->origin)
                                return -ENOMEM;
                }
                r = parse_top(s, top, &why);
        }
        if (r == -EBADMSG && ret_why)
                *ret_why = STEAL(why);
        if (r < 0)
                return r;
        *ret = STEAL(s);
        return 0;
}

CdiSpec *cdi_spec_free(CdiSpec *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_devices; i++) {
                free(s->devices[i].name);
                cdi_edit_set_done(&s->devices[i].edits);
        }
        free(s->devices);
        cdi_edit_set_done(&s->edits);
        free(s->kind);
        free(s->origin);
        return mfree(s);
}

const char *cdi_spec_kind(const CdiSpec *s) {
        return s->kind;
}

const char *cdi_spec_origin(const CdiSpec *s) {
        return s->origin;
}

size_t cdi_spec_n_devices(const CdiSpec *s) {
        return s->n_devices;
}

const char *cdi_spec_device(const CdiSpec *s, size_t i, const char **ret_refusal) {
        if (i >= s->n_devices)
                return NULL;
        if (ret_refusal)
                *ret_refusal = s->devices[i].edits.refusal;
        return s->devices[i].name;
}
