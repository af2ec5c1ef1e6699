/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The NPU broker's workload allowlist: strict parsing, lookup, and the listing of GET /npu/workloads. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/npu-workload-internal.h"
#include "npu/npu-workload.h"
#include "sandbox/sandbox-argv.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"

/* The allowlist nests four levels deep (object, array, workload, argv/env); a little slack. */
#define NPU_WORKLOADS_MAX_DEPTH 16

/* ---- shared helpers -------------------------------------------------------------------------- */

int npu_refuse(char **ret_why, int error, const char *fmt, ...) {
        va_list ap;
        int r;

        if (!ret_why)
                return error;
        va_start(ap, fmt);
        r = set_messagev(ret_why, error, fmt, ap);
        va_end(ap);
        return r;
}

bool npu_string_clean(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || (unsigned char) *s == 0x7f)
                        return false;
        return true;
}

int npu_json_parse(const char *text, size_t len, int max_depth, const char *what, json_object **ret,
                   char **ret_why) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        enum json_tokener_error err;
        const char *strict_why = NULL;
        int r;

        if (len == 0)
                return npu_refuse(ret_why, -EBADMSG, "%s: empty; a JSON object is required", what);
        if (len > INT32_MAX)
                return npu_refuse(ret_why, -EBADMSG, "%s: too large", what);
        /* What json-c's strict mode still lets through (single quotes, raw control characters). */
        if (json_text_check_strict(text, len, &strict_why) < 0)
                return npu_refuse(ret_why, -EBADMSG, "%s: %s", what, strict_why);

        r = json_parse_strict(text, len, max_depth, &o, &err);
        if (r == -EBADMSG && err == json_tokener_continue)
                return npu_refuse(ret_why, r, "%s: the JSON document is incomplete", what);
        if (r == -EBADMSG && err == json_tokener_success)
                return npu_refuse(ret_why, r, "%s: trailing data after the JSON document", what);
        if (r == -EBADMSG)
                return npu_refuse(ret_why, r, "%s: invalid JSON: %s", what, json_tokener_error_desc(err));
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object))
                return npu_refuse(ret_why, -EBADMSG, "%s: must be a JSON object", what);
        *ret = STEAL(o);
        return 0;
}

/* ---- validators ------------------------------------------------------------------------------- */

bool npu_workload_id_valid(const char *id) {
        return str_token_valid(id, NPU_WORKLOAD_ID_MAX, LOWERCASE_LETTERS DIGITS, LOWERCASE_LETTERS DIGITS "._-");
}

/* Components of @p from @start on: non-empty, not "." or "..". @p has no trailing '/'. */
static bool components_plain(const char *p) {
        for (const char *c = p;;) {
                size_t n = strcspn(c, "/");

                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (c[n] == '\0')
                        return true;
                c += n + 1;
        }
}

/* ${repo:REL}'s REL: relative, normalised, no "." or ".." or empty component. */
static bool repo_rel_valid(const char *rel) {
        return *rel && *rel != '/' && strlen(rel) < NPU_ARG_MAX && npu_string_clean(rel) &&
               components_plain(rel);
}

/* An absolute normalised path other than "/": argv[0] literal, a resource root. */
static bool abs_path_valid(const char *p) {
        return p[0] == '/' && p[1] != '\0' && strlen(p) < NPU_PATH_MAX && npu_string_clean(p) &&
               components_plain(p + 1);
}

/* A config field path: 1..NPU_CONFIG_FIELD_SEGMENTS_MAX names of [A-Za-z0-9_-], joined by '.'. */
static bool config_field_valid(const char *f) {
        size_t segments = 1, n = 0;

        if (strlen(f) > 256)
                return false;
        for (const char *c = f;; c++) {
                if (*c == '.' || *c == '\0') {
                        if (n == 0)
                                return false;
                        if (*c == '\0')
                                return true;
                        if (++segments > NPU_CONFIG_FIELD_SEGMENTS_MAX)
                                return false;
                        n = 0;
                        continue;
                }
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '_' || *c == '-'))
                        return false;
                n++;
        }
}

/* ---- parsing ------------------------------------------------------------------------------------ */

static void npu_arg_done(NpuArg *a) {
        a->text = mfree(a->text);
        a->rel = mfree(a->rel);
}

static void npu_workload_done(NpuWorkload *w) {
        free(w->id);
        free(w->description);
        for (size_t i = 0; i < w->n_argv; i++)
                npu_arg_done(&w->argv[i]);
        free(w->argv);
        strv_free(w->config_fields);
        strv_free(w->resource_roots);
        strv_free(w->env);
        *w = (NpuWorkload) {};
}

NpuWorkloads *npu_workloads_free(NpuWorkloads *w) {
        if (!w)
                return NULL;
        for (size_t i = 0; i < w->n; i++)
                npu_workload_done(&w->workloads[i]);
        free(w->workloads);
        return mfree(w);
}

/* A string that json-c holds: no "\u0000" inside (json-c keeps the length), no control bytes. */
static const char *json_clean_string(json_object *o) {
        const char *s;

        if (!json_object_is_type(o, json_type_string))
                return NULL;
        s = json_object_get_string(o);
        if (strlen(s) != (size_t) json_object_get_string_len(o) || !npu_string_clean(s))
                return NULL;
        return s;
}

/*
 * One argv word: a literal, or a literal prefix and one placeholder that ends the word. Return:
 * 0, -EBADMSG with a static reason in *ret_reason, -ENOMEM.
 */
static int parse_arg(const char *s, bool first, NpuArg *ret, const char **ret_reason) {
        static const char repo[] = "${repo:", config[] = "${input:configPath}";
        _cleanup_free_ char *text = NULL, *rel = NULL;
        const char *p = strstr(s, "${"), *end;
        NpuArgKind kind;

        if (strlen(s) > NPU_ARG_MAX) {
                *ret_reason = "longer than 4096 bytes";
                return -EBADMSG;
        }
        if (!p) {
                if (first && !abs_path_valid(s)) {
                        *ret_reason = "must be ${repo:...} or an absolute normalised path";
                        return -EBADMSG;
                }
                text = strdup(s);
                if (!text)
                        return -ENOMEM;
                *ret = (NpuArg) { .kind = NPU_ARG_LITERAL, .text = STEAL(text) };
                return 0;
        }
        if (strneq(p, config, strlen(config)) && p[strlen(config)] == '\0') {
                kind = NPU_ARG_CONFIG_PATH;
                end = p + strlen(config);
        } else if (strneq(p, repo, strlen(repo))) {
                end = strchr(p, '}');
                if (!end) {
                        *ret_reason = "a placeholder must end its word (\"${repo:REL}\")";
                        return -EBADMSG;
                }
                rel = strndup(p + strlen(repo), (size_t) (end - p) - strlen(repo));
                if (!rel)
                        return -ENOMEM;
                if (strstr(rel, "${") || !repo_rel_valid(rel)) {
                        *ret_reason = "${repo:REL} needs a relative normalised REL "
                                      "(no '/' first, no \".\", \"..\" or empty component)";
                        return -EBADMSG;
                }
                kind = NPU_ARG_REPO;
                end++;
        } else {
                *ret_reason = "unknown placeholder or text after one "
                              "(only ${repo:REL} and ${input:configPath}, at the end of a word)";
                return -EBADMSG;
        }
        if (*end != '\0') {
                *ret_reason = "a placeholder must end its word";
                return -EBADMSG;
        }
        if (first && (kind != NPU_ARG_REPO || p != s)) {
                *ret_reason = "must be ${repo:...} or an absolute normalised path";
                return -EBADMSG;
        }
        text = strndup(s, (size_t) (p - s));
        if (!text)
                return -ENOMEM;
        *ret = (NpuArg) { .kind = kind, .text = STEAL(text), .rel = STEAL(rel) };
        return 0;
}

static int parse_argv(json_object *a, const char *ctx, NpuWorkload *w, char **ret_why) {
        size_t n;
        int r;

        if (!json_object_is_type(a, json_type_array))
                return npu_refuse(ret_why, -EBADMSG, "%s: argv must be an array of strings", ctx);
        n = json_object_array_length(a);
        if (n == 0 || n > NPU_ARGV_MAX)
                return npu_refuse(ret_why, -EBADMSG, "%s: argv must have 1 to %u words", ctx, NPU_ARGV_MAX);
        w->argv = calloc(n, sizeof(NpuArg));
        if (!w->argv)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *s = json_clean_string(json_object_array_get_idx(a, i)), *reason = NULL;

                if (!s)
                        return npu_refuse(ret_why, -EBADMSG, "%s: argv[%zu]: must be a string without control characters",
                                          ctx, i);
                r = parse_arg(s, i == 0, &w->argv[i], &reason);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return npu_refuse(ret_why, r, "%s: argv[%zu]: %s", ctx, i, reason);
                w->n_argv = i + 1;
                if (w->argv[i].kind == NPU_ARG_CONFIG_PATH)
                        w->takes_config = true;
        }
        return 0;
}

/* An array of unique strings, each passing @valid: configPathFields, resourceRoots. */
static int parse_string_list(json_object *a, const char *ctx, const char *field, size_t max,
                             bool (*valid)(const char *), const char *rule, char ***ret, char **ret_why) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n;
        int r;

        if (!json_object_is_type(a, json_type_array))
                return npu_refuse(ret_why, -EBADMSG, "%s: %s must be an array of strings", ctx, field);
        n = json_object_array_length(a);
        if (n > max)
                return npu_refuse(ret_why, -EBADMSG, "%s: %s: more than %zu entries", ctx, field, max);
        for (size_t i = 0; i < n; i++) {
                const char *s = json_clean_string(json_object_array_get_idx(a, i));

                if (!s || !valid(s))
                        return npu_refuse(ret_why, -EBADMSG, "%s: %s[%zu]: %s", ctx, field, i, rule);
                STRV_FOREACH(p, l)
                        if (streq(*p, s))
                                return npu_refuse(ret_why, -EBADMSG, "%s: %s[%zu]: '%s' is listed twice",
                                                  ctx, field, i, s);
                r = strv_extend(&l, s);
                if (r < 0)
                        return r;
        }
        *ret = STEAL(l);
        return 0;
}

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int parse_env(json_object *o, const char *ctx, NpuWorkload *w, char **ret_why) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return npu_refuse(ret_why, -EBADMSG, "%s: env must be an object of strings", ctx);
        if ((size_t) json_object_object_length(o) > NPU_ENV_MAX)
                return npu_refuse(ret_why, -EBADMSG, "%s: env: more than %u variables", ctx, NPU_ENV_MAX);
        json_object_object_foreach(o, name, v) {
                const char *value = json_clean_string(v);
                char *e;

                if (!npu_string_clean(name) || !sandbox_env_name_valid(name))
                        return npu_refuse(ret_why, -EBADMSG,
                                          "%s: env: a name must match [A-Za-z_][A-Za-z0-9_]* "
                                          "and not be reserved (PATH, HOME, LD_*, ...)",
                                          ctx);
                if (!value || strlen(value) > NPU_ARG_MAX || strstr(value, "${"))
                        return npu_refuse(ret_why, -EBADMSG,
                                          "%s: env: %s: a string of at most 4096 bytes, no control characters, no \"${\"",
                                          ctx, name);
                if (asprintf(&e, "%s=%s", name, value) < 0)
                        return -ENOMEM;
                r = strv_consume(&l, e);
                if (r < 0)
                        return r;
        }
        if (l)
                qsort(l, strv_length(l), sizeof(char *), strcmp_ptr);
        w->env = STEAL(l);
        return 0;
}

/* An integer in [1, max]: JSON integers only (not 1.0, not "1"). */
static int parse_count(json_object *o, const char *ctx, const char *field, int64_t max, uint64_t *ret,
                       char **ret_why) {
        int64_t v;

        if (!json_object_is_type(o, json_type_int))
                return npu_refuse(ret_why, -EBADMSG, "%s: %s must be an integer", ctx, field);
        v = json_object_get_int64(o);
        if (v < 1 || v > max)
                return npu_refuse(ret_why, -EBADMSG, "%s: %s must be 1 to %" PRIi64, ctx, field, max);
        *ret = (uint64_t) v;
        return 0;
}

static bool known_field(const char *key) {
        static const char *const fields[] = {
                "id", "description", "argv", "chips", "timeoutSec", "configPathFields", "resourceRoots", "env",
        };

        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (streq(fields[i], key))
                        return true;
        return false;
}

/* The fields other than id; @ctx names the workload in reasons. */
static int parse_workload_fields(json_object *o, const char *ctx, NpuWorkload *w, char **ret_why) {
        json_object *v;
        const char *s;
        uint64_t u;
        int r;

        if (!json_object_object_get_ex(o, "description", &v))
                return npu_refuse(ret_why, -EBADMSG, "%s: description is required", ctx);
        s = json_clean_string(v);
        if (!s || !*s || strlen(s) > NPU_DESCRIPTION_MAX)
                return npu_refuse(ret_why, -EBADMSG, "%s: description must be 1 to 1024 bytes without control characters",
                                  ctx);
        w->description = strdup(s);
        if (!w->description)
                return -ENOMEM;

        if (!json_object_object_get_ex(o, "argv", &v))
                return npu_refuse(ret_why, -EBADMSG, "%s: argv is required", ctx);
        r = parse_argv(v, ctx, w, ret_why);
        if (r < 0)
                return r;

        if (!json_object_object_get_ex(o, "chips", &v))
                return npu_refuse(ret_why, -EBADMSG, "%s: chips is required", ctx);
        r = parse_count(v, ctx, "chips", NPU_CHIPS_MAX, &u, ret_why);
        if (r < 0)
                return r;
        w->chips = (unsigned) u;

        if (!json_object_object_get_ex(o, "timeoutSec", &v))
                return npu_refuse(ret_why, -EBADMSG, "%s: timeoutSec is required", ctx);
        r = parse_count(v, ctx, "timeoutSec", NPU_TIMEOUT_SEC_MAX, &u, ret_why);
        if (r < 0)
                return r;
        w->timeout_usec = u * USEC_PER_SEC;

        if (json_object_object_get_ex(o, "configPathFields", &v)) {
                r = parse_string_list(v, ctx, "configPathFields", NPU_CONFIG_FIELDS_MAX, config_field_valid,
                                      "a dotted path of names of [A-Za-z0-9_-] (at most 8 names, 256 bytes)",
                                      &w->config_fields, ret_why);
                if (r < 0)
                        return r;
                if (w->config_fields && !w->takes_config)
                        return npu_refuse(ret_why, -EBADMSG,
                                          "%s: configPathFields without ${input:configPath} in argv", ctx);
        }
        if (json_object_object_get_ex(o, "resourceRoots", &v)) {
                r = parse_string_list(v, ctx, "resourceRoots", NPU_RESOURCE_ROOTS_MAX, abs_path_valid,
                                      "an absolute normalised path other than \"/\"", &w->resource_roots, ret_why);
                if (r < 0)
                        return r;
        }
        if (json_object_object_get_ex(o, "env", &v))
                return parse_env(v, ctx, w, ret_why);
        return 0;
}

static int parse_workload(json_object *o, size_t idx, NpuWorkload *w, char **ret_why) {
        _cleanup_free_ char *ctx = NULL;
        json_object *v;
        const char *id;

        if (!json_object_is_type(o, json_type_object))
                return npu_refuse(ret_why, -EBADMSG, "workloads[%zu]: must be an object", idx);
        json_object_object_foreach(o, key, val) {
                (void) val;
                if (!known_field(key)) {
                        _cleanup_free_ char *k = str_escape_log(key, 64);

                        return k ? npu_refuse(ret_why, -EBADMSG, "workloads[%zu]: unknown field '%s'", idx, k) :
                                   -ENOMEM;
                }
        }
        if (!json_object_object_get_ex(o, "id", &v))
                return npu_refuse(ret_why, -EBADMSG, "workloads[%zu]: id is required", idx);
        id = json_clean_string(v);
        if (!npu_workload_id_valid(id))
                return npu_refuse(ret_why, -EBADMSG, "workloads[%zu]: id must match [a-z0-9][a-z0-9._-]{0,63}", idx);
        w->id = strdup(id);
        if (!w->id)
                return -ENOMEM;
        if (asprintf(&ctx, "workload '%s'", id) < 0)
                return -ENOMEM;
        return parse_workload_fields(o, ctx, w, ret_why);
}

int npu_workloads_parse(const char *text, size_t len, NpuWorkloads **ret, char **ret_why) {
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *list;
        size_t n;
        int r;

        if (len > NPU_WORKLOADS_MAX_BYTES)
                return npu_refuse(ret_why, -EBADMSG, "the allowlist is larger than 1 MiB");
        r = npu_json_parse(text, len, NPU_WORKLOADS_MAX_DEPTH, "the allowlist", &o, ret_why);
        if (r < 0)
                return r;
        json_object_object_foreach(o, key, val) {
                (void) val;
                if (!streq(key, "workloads")) {
                        _cleanup_free_ char *k = str_escape_log(key, 64);

                        return k ? npu_refuse(ret_why, -EBADMSG, "the allowlist: unknown field '%s'", k) : -ENOMEM;
                }
        }
        if (!json_object_object_get_ex(o, "workloads", &list) || !json_object_is_type(list, json_type_array))
                return npu_refuse(ret_why, -EBADMSG, "the allowlist: \"workloads\" must be an array");
        n = json_object_array_length(list);
        if (n > NPU_WORKLOADS_MAX)
                return npu_refuse(ret_why, -EBADMSG, "the allowlist: more than %u workloads", NPU_WORKLOADS_MAX);

        w = calloc(1, sizeof(NpuWorkloads));
        if (!w)
                return -ENOMEM;
        w->workloads = calloc(MAX(n, (size_t) 1), sizeof(NpuWorkload));
        if (!w->workloads)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                /* counted before it is filled: npu_workloads_free() undoes a half-parsed one */
                w->n = i + 1;
                r = parse_workload(json_object_array_get_idx(list, i), i, &w->workloads[i], ret_why);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (streq(w->workloads[j].id, w->workloads[i].id))
                                return npu_refuse(ret_why, -EBADMSG, "workloads[%zu]: the id '%s' is used twice",
                                                  i, w->workloads[i].id);
        }
        *ret = STEAL(w);
        return 0;
}

int npu_workloads_load(const char *path, NpuWorkloads **ret, char **ret_why) {
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_file_limited(AT_FDCWD, path, O_NONBLOCK, NPU_WORKLOADS_MAX_BYTES, READ_FILE_UP_TO_MAX,
                              &text, &size);
        if (r == -ENOMEM)
                return r;
        if (r == -EFBIG)
                return npu_refuse(ret_why, -EBADMSG, "%s: larger than 1 MiB", path);
        if (r == -EBADFD)
                return npu_refuse(ret_why, -EBADMSG, "%s: not a regular file", path);
        if (r < 0)
                return npu_refuse(ret_why, r, "%s: cannot be read: %s", path, strerror(-r));
        return npu_workloads_parse(text, size, ret, ret_why);
}

/* ---- lookup and listing ----------------------------------------------------------------------- */

const NpuWorkload *npu_workloads_find(const NpuWorkloads *w, const char *id) {
        if (!w || !id)
                return NULL;
        for (size_t i = 0; i < w->n; i++)
                if (streq(w->workloads[i].id, id))
                        return &w->workloads[i];
        return NULL;
}

static json_object *workload_to_json(const NpuWorkload *w) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_(json_object_putp) json_object *inputs = json_object_new_array();

        if (!o || !inputs)
                return NULL;
        if (w->takes_config) {
                json_object *c = json_object_new_string("configPath");

                if (!c || json_object_array_add(inputs, c) < 0) {
                        json_object_put(c);
                        return NULL;
                }
        }
        if (json_add(o, "id", json_object_new_string(w->id)) < 0 ||
            json_add(o, "description", json_object_new_string(w->description)) < 0 ||
            json_add(o, "chips", json_object_new_int64(w->chips)) < 0 ||
            json_add(o, "timeoutSec", json_new_u64(w->timeout_usec / USEC_PER_SEC)) < 0 ||
            json_add(o, "inputs", STEAL(inputs)) < 0)
                return NULL;
        return STEAL(o);
}

json_object *npu_workloads_to_json(const NpuWorkloads *w) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; w && i < w->n; i++) {
                json_object *o = workload_to_json(&w->workloads[i]);

                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return NULL;
                }
        }
        return STEAL(a);
}
