/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Renders JSON answers as pretty JSON or as flattened, aligned "key: value" lines. */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ctl-util.h"
#include "output.h"

typedef struct Entry {
        char *key;
        char *value;
} Entry;

typedef struct Table {
        Entry *entries;
        size_t n;
        size_t allocated;
} Table;

/* Nesting deeper than this is shown as compact JSON rather than flattened further. */
#define FLATTEN_DEPTH_MAX 16

static void table_done(Table *t) {
        for (size_t i = 0; i < t->n; i++) {
                free(t->entries[i].key);
                free(t->entries[i].value);
        }
        free(t->entries);
        *t = (Table) {};
}

/* Takes ownership of @key and @value, also on failure. */
static int table_add(Table *t, char *key, char *value) {
        if (t->n >= t->allocated) {
                size_t a = MAX(t->allocated * 2, (size_t) 16);
                Entry *e;

                e = reallocarray(t->entries, a, sizeof(Entry));
                if (!e) {
                        free(key);
                        free(value);
                        return -ENOMEM;
                }
                t->entries = e;
                t->allocated = a;
        }

        t->entries[t->n++] = (Entry) { .key = key, .value = value };
        return 0;
}

int output_escape(const char *s, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;

        /* Worst case: every byte becomes "\xNN". */
        buf = malloc(strlen(s) * 4 + 1);
        if (!buf)
                return -ENOMEM;

        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '\n') {
                        memcpy(buf + n, "\\n", 2);
                        n += 2;
                } else if (*p == '\t') {
                        memcpy(buf + n, "\\t", 2);
                        n += 2;
                } else if (*p < 0x20 || *p == 0x7f) {
                        n += sprintf(buf + n, "\\x%02x", *p);
                } else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        /* U+0080..U+009F: C1 controls (CSI, OSC, ...) some terminals obey. */
                        n += sprintf(buf + n, "\\xc2\\x%02x", p[1]);
                        p++;
                } else
                        buf[n++] = *p;
        }
        buf[n] = '\0';

        *ret = STEAL(buf);
        return 0;
}

char *output_escaped(const char *s) {
        char *e = NULL;

        (void) output_escape(s ?: "", &e);
        return e;
}

int output_json(FILE *f, json_object *obj) {
        const char *s;

        s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -ENOMEM;

        if (fputs(s, f) < 0 || fputc('\n', f) < 0)
                return -EIO;
        return 0;
}

static bool endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);

        return a >= b && streq(s + a - b, suffix);
}

static bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int format_bytes(const char *leaf, int64_t v, char **ret) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double d = v;
        size_t u = 0;
        int r;

        if (v == 0 && startswith(leaf, "max"))
                /* API.md: a zero maximum means unlimited. */
                r = asprintf(ret, "0 (unlimited)");
        else if (v < 1024)
                r = asprintf(ret, "%" PRIi64, v);
        else {
                d /= 1024;
                while (d >= 1024 && u + 1 < ELEMENTSOF(units)) {
                        d /= 1024;
                        u++;
                }
                r = asprintf(ret, "%" PRIi64 " (%.1f %s)", v, d, units[u]);
        }
        return r < 0 ? -ENOMEM : 0;
}

static int format_duration(int64_t sec, char **ret) {
        int64_t d = sec / 86400, h = sec / 3600 % 24, m = sec / 60 % 60, s = sec % 60;
        int r;

        if (sec < 0)
                r = asprintf(ret, "%" PRIi64 "s", sec);
        else if (d > 0)
                r = asprintf(ret, "%" PRIi64 "d %" PRIi64 "h %" PRIi64 "min %" PRIi64 "s", d, h, m, s);
        else if (h > 0)
                r = asprintf(ret, "%" PRIi64 "h %" PRIi64 "min %" PRIi64 "s", h, m, s);
        else if (m > 0)
                r = asprintf(ret, "%" PRIi64 "min %" PRIi64 "s", m, s);
        else
                r = asprintf(ret, "%" PRIi64 "s", s);
        return r < 0 ? -ENOMEM : 0;
}

/* A scalar (or anything at the depth limit) as one display string. @leaf is the last key
 * component, which selects unit formatting. */
static int format_value(const char *leaf, json_object *v, char **ret) {
        char *s;

        switch (json_object_get_type(v)) {
        case json_type_null:
                s = strdup("-");
                break;
        case json_type_boolean:
                s = strdup(json_object_get_boolean(v) ? "yes" : "no");
                break;
        case json_type_int:
                if (leaf && endswith(leaf, "Bytes"))
                        return format_bytes(leaf, json_object_get_int64(v), ret);
                s = strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
                break;
        case json_type_string:
                return output_escape(json_object_get_string(v), ret);
        case json_type_double:
        case json_type_object:
        case json_type_array:
        default: {
                const char *j = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                                  JSON_C_TO_STRING_NOSLASHESCAPE);
                if (!j)
                        return -ENOMEM;
                return output_escape(j, ret);
        }
        }

        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static bool is_scalar(json_object *v) {
        return !json_object_is_type(v, json_type_object) && !json_object_is_type(v, json_type_array);
}

static int flatten(Table *t, const char *key, const char *leaf, json_object *v, unsigned depth);

static int flatten_object(Table *t, const char *prefix, json_object *o, unsigned depth) {
        int r;

        json_object_object_foreach(o, k, child) {
                _cleanup_free_ char *key = NULL, *ek = NULL;

                r = output_escape(k, &ek);
                if (r < 0)
                        return r;
                if (prefix) {
                        if (asprintf(&key, "%s.%s", prefix, ek) < 0) {
                                key = NULL;
                                return -ENOMEM;
                        }
                } else
                        key = STEAL(ek);

                r = flatten(t, key, k, child, depth + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int join_scalars(const char *leaf, json_object *a, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t n = json_object_array_length(a), size = 0;
        FILE *f;
        int r = 0;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *s = NULL;

                r = format_value(leaf, json_object_array_get_idx(a, i), &s);
                if (r < 0)
                        break;
                fprintf(f, "%s%s", i > 0 ? ", " : "", s);
        }
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;

        *ret = STEAL(buf);
        return 0;
}

static int flatten(Table *t, const char *key, const char *leaf, json_object *v, unsigned depth) {
        _cleanup_free_ char *value = NULL, *k = NULL;
        int r;

        if (depth < FLATTEN_DEPTH_MAX && json_object_is_type(v, json_type_object) &&
            json_object_object_length(v) > 0)
                return flatten_object(t, key, v, depth);

        if (depth < FLATTEN_DEPTH_MAX && json_object_is_type(v, json_type_array) &&
            json_object_array_length(v) > 0) {
                size_t n = json_object_array_length(v);
                bool scalars = true;

                for (size_t i = 0; i < n && scalars; i++)
                        scalars = is_scalar(json_object_array_get_idx(v, i));

                if (!scalars) {
                        for (size_t i = 0; i < n; i++) {
                                _cleanup_free_ char *ik = NULL;

                                if (asprintf(&ik, "%s[%zu]", key, i) < 0)
                                        return -ENOMEM;
                                r = flatten(t, ik, leaf, json_object_array_get_idx(v, i), depth + 1);
                                if (r < 0)
                                        return r;
                        }
                        return 0;
                }

                r = join_scalars(leaf, v, &value);
                if (r < 0)
                        return r;
        } else if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array)) {
                if (depth < FLATTEN_DEPTH_MAX) {
                        value = strdup("(none)");       /* empty container */
                        if (!value)
                                return -ENOMEM;
                } else {
                        r = format_value(leaf, v, &value);      /* too deep: compact JSON */
                        if (r < 0)
                                return r;
                }
        } else if (depth == 1 && streq(leaf, "uptimeSec") && json_object_is_type(v, json_type_int)) {
                r = format_duration(json_object_get_int64(v), &value);
                if (r < 0)
                        return r;
                key = "uptime";
        } else {
                r = format_value(leaf, v, &value);
                if (r < 0)
                        return r;
        }

        k = strdup(key);
        if (!k)
                return -ENOMEM;
        return table_add(t, STEAL(k), STEAL(value));
}

static bool strv_contains(const char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

int output_flat(FILE *f, json_object *obj, const char *const *first) {
        _cleanup_(table_done) Table t = {};
        size_t width = 0;
        int r;

        if (!json_object_is_type(obj, json_type_object))
                return -EINVAL;

        for (const char *const *k = first; k && *k; k++) {
                _cleanup_free_ char *ek = NULL;
                json_object *v;

                if (!json_object_object_get_ex(obj, *k, &v))
                        continue;

                r = output_escape(*k, &ek);
                if (r < 0)
                        return r;
                r = flatten(&t, ek, *k, v, 1);
                if (r < 0)
                        return r;
        }

        json_object_object_foreach(obj, k, v) {
                _cleanup_free_ char *ek = NULL;

                if (strv_contains(first, k))
                        continue;

                r = output_escape(k, &ek);
                if (r < 0)
                        return r;
                r = flatten(&t, ek, k, v, 1);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < t.n; i++)
                width = MAX(width, strlen(t.entries[i].key));

        for (size_t i = 0; i < t.n; i++)
                if (fprintf(f, "%s:%*s %s\n", t.entries[i].key,
                            (int) (width - strlen(t.entries[i].key)), "", t.entries[i].value) < 0)
                        return -EIO;

        return 0;
}
