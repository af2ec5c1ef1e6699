/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Validation of /execute, /execute-shell and /shell-executions bodies into an ExecutionRequest. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "execution/execution-request.h"
#include "sandbox/sandbox-argv.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"
#include "workspace/workspace.h"

/* The python wrapper keeps `python3 -c` semantics (sys.path[0] is the cwd, __name__ is
 * "__main__") while the code itself comes from a file, so its size is not bound by argv limits
 * and tracebacks show source lines. */
#define PYTHON_RUNNER \
        "import sys; sys.argv[0] = '-c'; __f = '" EXECUTION_CODE_PATH "'; " \
        "exec(compile(open(__f, encoding='utf-8').read(), __f, 'exec'), " \
        "{'__name__': '__main__', '__builtins__': __builtins__})"

ExecutionRequest *execution_request_free(ExecutionRequest *r) {
        if (!r)
                return NULL;
        free(r->execution_id);
        free(r->workspace_id);
        free(r->language);
        free(r->code);
        strv_free(r->argv);
        strv_free(r->env);
        free(r->stdin_data);
        free(r->cwd);
        free(r->environment);
        free(r->npu_chips);
        strv_free(r->devices);
        free(r);
        return NULL;
}

static int bad(char **ret_why, const char *fmt, ...) _printf_(2, 3);
static int bad(char **ret_why, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = set_messagev(ret_why, -EBADMSG, fmt, ap);
        va_end(ap);
        return r;
}

static bool known_key(ExecutionKind kind, const char *key) {
        static const char *const common[] = {
                "executionId", "workspaceId", "stdin", "env", "cwd", "timeoutMs", "limits", "kernelMode",
                "environment", "npu", "devices",
        };
        for (size_t i = 0; i < ELEMENTSOF(common); i++)
                if (streq(key, common[i]))
                        return true;
        if (kind == EXECUTION_KIND_SHELL)
                return streq(key, "command");
        return streq(key, "language") || streq(key, "code") || streq(key, "argv");
}

static int get_string(json_object *o, const char *key, bool nul_ok, const char **ret, size_t *ret_size,
                      char **ret_why) {
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return bad(ret_why, "'%s' must be a string", key);
        *ret = json_object_get_string(v);
        if (!nul_ok && strlen(*ret) != (size_t) json_object_get_string_len(v)) {
                *ret = NULL;
                return bad(ret_why, "'%s' must not contain NUL", key);
        }
        if (ret_size)
                *ret_size = (size_t) json_object_get_string_len(v);
        return 0;
}

static int get_u64(json_object *o, const char *key, uint64_t min, uint64_t max, bool *ret_set,
                   uint64_t *ret, char **ret_why) {
        json_object *v;
        int64_t i;

        *ret_set = false;
        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_int))
                return bad(ret_why, "'%s' must be an integer", key);
        errno = 0;
        i = json_object_get_int64(v);
        if (i < 0 || (uint64_t) i < min || (uint64_t) i > max || i == INT64_MAX)
                return bad(ret_why, "'%s' must be between %llu and %llu", key,
                           (unsigned long long) min, (unsigned long long) max);
        *ret = (uint64_t) i;
        *ret_set = true;
        return 0;
}

static int dup_string(const char *s, size_t n, char **ret) {
        char *d = malloc(n + 1);

        if (!d)
                return -ENOMEM;
        memcpy(d, s, n);
        d[n] = '\0';
        *ret = d;
        return 0;
}

static uint64_t cap(uint64_t requested, uint64_t maximum) {
        if (maximum == 0)
                return requested;
        if (requested == 0)
                return maximum;
        return MIN(requested, maximum);
}

/* kernelMode first: "persistent" is refused before anything else is looked at. */
static int parse_kernel_mode(json_object *body, char **ret_why) {
        const char *s;
        int k;

        k = get_string(body, "kernelMode", false, &s, NULL, ret_why);
        if (k < 0)
                return k;
        if (s && streq(s, "persistent"))
                return -EPROTONOSUPPORT;
        if (s && !streq(s, "ephemeral"))
                return bad(ret_why, "'kernelMode' must be 'ephemeral' (or omitted)");
        return 0;
}

static int check_keys(json_object *body, ExecutionKind kind, char **ret_why) {
        json_object_object_foreach(body, key, val) {
                (void) val;
                if (!known_key(kind, key))
                        return bad(ret_why, "unknown field '%.64s'", key);
        }
        return 0;
}

static int parse_ids(json_object *body, ExecutionRequest *r, char **ret_why) {
        const char *s;
        int k;

        k = get_string(body, "executionId", false, &s, NULL, ret_why);
        if (k < 0)
                return k;
        if (s) {
                if (!workspace_id_valid(s))
                        return bad(ret_why, "'executionId' must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
                r->execution_id = strdup(s);
                if (!r->execution_id)
                        return -ENOMEM;
        }
        k = get_string(body, "workspaceId", false, &s, NULL, ret_why);
        if (k < 0)
                return k;
        if (s && !workspace_id_valid(s))
                return bad(ret_why, "'workspaceId' must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
        r->workspace_id = strdup(s ?: "default");
        if (!r->workspace_id)
                return -ENOMEM;
        return 0;
}

/* /execute-shell, /shell-executions: "command", run by /bin/sh -c. */
static int parse_command(json_object *body, ExecutionRequest *r, char **ret_why) {
        const char *command = NULL;
        size_t n = 0;
        int k;

        k = get_string(body, "command", false, &command, &n, ret_why);
        if (k < 0)
                return k;
        if (!command || n == 0)
                return bad(ret_why, "'command' is required and must not be empty");
        if (strlen(command) != n || n > EXECUTION_ARG_BYTES_MAX)
                return bad(ret_why, "'command' must not contain NUL and must be shorter than %u bytes",
                           EXECUTION_ARG_BYTES_MAX + 1);
        if (strv_extend(&r->argv, "/bin/sh") < 0 || strv_extend(&r->argv, "-c") < 0 ||
            strv_extend(&r->argv, command) < 0)
                return -ENOMEM;
        return 0;
}

/* "argv": 1..EXECUTION_ARGV_MAX strings, the first not empty. */
static int parse_argv(json_object *argv, ExecutionRequest *r, char **ret_why) {
        size_t len;

        if (!json_object_is_type(argv, json_type_array))
                return bad(ret_why, "'argv' must be an array of strings");
        len = json_object_array_length(argv);
        if (len == 0 || len > EXECUTION_ARGV_MAX)
                return bad(ret_why, "'argv' must have 1 to %u elements", EXECUTION_ARGV_MAX);
        for (size_t i = 0; i < len; i++) {
                json_object *e = json_object_array_get_idx(argv, i);
                const char *a;

                if (!json_object_is_type(e, json_type_string))
                        return bad(ret_why, "'argv[%zu]' must be a string", i);
                a = json_object_get_string(e);
                if (strlen(a) != (size_t) json_object_get_string_len(e))
                        return bad(ret_why, "'argv[%zu]' must not contain NUL", i);
                if (strlen(a) > EXECUTION_ARG_BYTES_MAX || (i == 0 && a[0] == '\0'))
                        return bad(ret_why, "'argv[%zu]' is empty or too long", i);
                if (strv_extend(&r->argv, a) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* "language" with "code" (@n bytes): the interpreter's command line; the code goes to a file. */
static int parse_language(const char *language, const char *code, size_t n, ExecutionRequest *r,
                          char **ret_why) {
        if (!language)
                return bad(ret_why, "'language' (python, shell, r) with 'code', or 'argv', is required");
        if (!code)
                return bad(ret_why, "'code' is required with 'language'");
        if (streq(language, "python")) {
                if (strv_extend(&r->argv, "python3") < 0 || strv_extend(&r->argv, "-c") < 0 ||
                    strv_extend(&r->argv, PYTHON_RUNNER) < 0)
                        return -ENOMEM;
        } else if (streq(language, "shell")) {
                if (strv_extend(&r->argv, "/bin/sh") < 0 ||
                    strv_extend(&r->argv, EXECUTION_CODE_PATH) < 0)
                        return -ENOMEM;
        } else if (streq(language, "r")) {
                if (strv_extend(&r->argv, "Rscript") < 0 ||
                    strv_extend(&r->argv, "--no-save") < 0 ||
                    strv_extend(&r->argv, EXECUTION_CODE_PATH) < 0)
                        return -ENOMEM;
        } else
                return bad(ret_why, "'language' must be one of python, shell, r");
        r->language = strdup(language);
        if (!r->language || dup_string(code, n, &r->code) < 0)
                return -ENOMEM;
        r->code_size = n;
        return 0;
}

/* /execute: either "argv", or "language" with "code". */
static int parse_program(json_object *body, ExecutionRequest *r, char **ret_why) {
        const char *language = NULL, *code = NULL;
        json_object *argv = NULL;
        size_t n = 0;
        int k;

        k = get_string(body, "language", false, &language, NULL, ret_why);
        if (k < 0)
                return k;
        k = get_string(body, "code", true, &code, &n, ret_why);
        if (k < 0)
                return k;
        (void) json_object_object_get_ex(body, "argv", &argv);
        if (argv && json_object_is_type(argv, json_type_null))
                argv = NULL;

        if (argv && (language || code))
                return bad(ret_why, "give either 'argv' or 'language' with 'code', not both");
        if (argv)
                return parse_argv(argv, r, ret_why);
        return parse_language(language, code, n, r, ret_why);
}

static int parse_stdin(json_object *body, ExecutionRequest *r, char **ret_why) {
        const char *s;
        size_t n = 0;
        int k;

        k = get_string(body, "stdin", true, &s, &n, ret_why);
        if (k < 0)
                return k;
        if (s) {
                if (dup_string(s, n, &r->stdin_data) < 0)
                        return -ENOMEM;
                r->stdin_size = n;
        }
        return 0;
}

static int parse_env(json_object *body, ExecutionRequest *r, char **ret_why) {
        json_object *v;
        size_t count = 0;

        if (!json_object_object_get_ex(body, "env", &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_object))
                return bad(ret_why, "'env' must be an object of strings");
        json_object_object_foreach(v, name, value) {
                char *kv;

                if (++count > EXECUTION_ENV_MAX)
                        return bad(ret_why, "'env' has more than %u entries", EXECUTION_ENV_MAX);
                if (!sandbox_env_name_valid(name))
                        return bad(ret_why, "'env' name '%.64s' is not allowed ([A-Za-z_][A-Za-z0-9_]*, "
                                   "not PATH, HOME, LANG, TMPDIR, USER, LOGNAME, SHELL, PWD, proxies or LD_*)",
                                   name);
                if (!json_object_is_type(value, json_type_string) ||
                    (size_t) json_object_get_string_len(value) > EXECUTION_ENV_VALUE_MAX ||
                    strlen(json_object_get_string(value)) != (size_t) json_object_get_string_len(value))
                        return bad(ret_why, "'env.%.64s' must be a string of at most %u bytes", name,
                                   EXECUTION_ENV_VALUE_MAX);
                if (asprintf(&kv, "%s=%s", name, json_object_get_string(value)) < 0)
                        return -ENOMEM;
                if (strv_consume(&r->env, kv) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* "environment": a name (the environment manager knows which exist). */
static int parse_environment(json_object *body, ExecutionRequest *r, char **ret_why) {
        const char *s;
        int k;

        k = get_string(body, "environment", false, &s, NULL, ret_why);
        if (k < 0 || !s)
                return k;
        if (isempty(s) || strlen(s) > 63 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(s))
                return bad(ret_why, "'environment' must be an environment's name (lower-case letters, digits, "
                                    "'.', '_', '-'; at most 63)");
        r->environment = strdup(s);
        return r->environment ? 0 : -ENOMEM;
}

/* "npu": {"chips": [logic id, ...]}: 1 to EXECUTION_NPU_CHIPS_MAX distinct ids (the NPU manager
 * knows which exist). */
static int parse_npu(json_object *body, ExecutionRequest *r, char **ret_why) {
        json_object *npu, *chips;
        size_t n;

        if (!json_object_object_get_ex(body, "npu", &npu) || json_object_is_type(npu, json_type_null))
                return 0;
        if (!json_object_is_type(npu, json_type_object) || json_object_object_length(npu) != 1 ||
            !json_object_object_get_ex(npu, "chips", &chips) || !json_object_is_type(chips, json_type_array))
                return bad(ret_why, "'npu' must be an object {\"chips\": [chip logic ids]}");
        n = json_object_array_length(chips);
        if (n < 1 || n > EXECUTION_NPU_CHIPS_MAX)
                return bad(ret_why, "'npu.chips' must name 1 to %u chips", EXECUTION_NPU_CHIPS_MAX);
        r->npu_chips = calloc(n, sizeof(unsigned));
        if (!r->npu_chips)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(chips, i);
                int64_t id;

                if (!json_object_is_type(v, json_type_int) || (id = json_object_get_int64(v)) < 0 || id > 65535)
                        return bad(ret_why, "'npu.chips' must hold chip logic ids (integers 0 to 65535)");
                for (size_t j = 0; j < i; j++)
                        if (r->npu_chips[j] == (unsigned) id)
                                return bad(ret_why, "'npu.chips' names chip %u twice", (unsigned) id);
                r->npu_chips[i] = (unsigned) id;
        }
        r->n_npu_chips = n;
        return 0;
}

/* "devices": CDI names ("vendor.com/class=name"), checked for shape here, resolved by the NPU manager. */
static int parse_devices(json_object *body, ExecutionRequest *r, char **ret_why) {
        json_object *devices;
        size_t n;

        if (!json_object_object_get_ex(body, "devices", &devices) || json_object_is_type(devices, json_type_null))
                return 0;
        if (!json_object_is_type(devices, json_type_array))
                return bad(ret_why, "'devices' must be an array of CDI device names (\"vendor.com/class=name\")");
        n = json_object_array_length(devices);
        if (n < 1 || n > EXECUTION_DEVICES_MAX)
                return bad(ret_why, "'devices' must name 1 to %u devices", EXECUTION_DEVICES_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(devices, i);
                const char *s = json_object_get_string(v), *slash, *eq;

                if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) > 255 ||
                    strlen(s) != (size_t) json_object_get_string_len(v) ||
                    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/=:") != strlen(s) ||
                    !(slash = strchr(s, '/')) || !(eq = strchr(slash, '=')) || slash == s || eq == slash + 1 ||
                    eq[1] == '\0')
                        return bad(ret_why, "'devices' entries must be CDI device names (\"vendor.com/class=name\")");
                if (strv_contains(r->devices, s))
                        return bad(ret_why, "'devices' names '%s' twice", s);
                if (strv_extend(&r->devices, s) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_cwd(json_object *body, ExecutionRequest *r, char **ret_why) {
        const char *s;
        int k;

        k = get_string(body, "cwd", false, &s, NULL, ret_why);
        if (k < 0)
                return k;
        if (s) {
                /* Accept the "/workspace/…" spelling of the same place (leading slashes after it are
                 * dropped: the result is always below /workspace). */
                if (strneq(s, SANDBOX_WORKSPACE, strlen(SANDBOX_WORKSPACE)) &&
                    (s[strlen(SANDBOX_WORKSPACE)] == '/' || s[strlen(SANDBOX_WORKSPACE)] == '\0'))
                        s += strlen(SANDBOX_WORKSPACE);
                while (*s == '/')
                        s++;
                if (!sandbox_cwd_valid(s))
                        return bad(ret_why, "'cwd' must be a relative path below /workspace without '.' or '..'");
        }
        r->cwd = strdup(s ?: "");
        if (!r->cwd)
                return -ENOMEM;
        return 0;
}

/* "timeoutMs" and "limits": each capped by the configured maximum, the maxima when absent. */
static int parse_limits(json_object *body, const ExecutionMaxima *max, ExecutionRequest *r, char **ret_why) {
        json_object *v;
        uint64_t u;
        bool set;
        int k;

        /* Like the limits, the wall-clock limit is capped by the configured maximum. */
        k = get_u64(body, "timeoutMs", 1, UINT64_MAX / USEC_PER_MSEC, &set, &u, ret_why);
        if (k < 0)
                return k;
        r->timeout_usec = set ? MIN(u * USEC_PER_MSEC, max->max_timeout_usec) : max->default_timeout_usec;

        r->memory_max = max->memory_max;
        r->tasks_max = max->tasks_max;
        r->cpu_quota_percent = max->cpu_quota_percent;
        if (!json_object_object_get_ex(body, "limits", &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_object))
                return bad(ret_why, "'limits' must be an object");
        json_object_object_foreach(v, lkey, lval) {
                (void) lval;
                if (!streq(lkey, "memoryBytes") && !streq(lkey, "tasks") && !streq(lkey, "cpuPercent"))
                        return bad(ret_why, "unknown field 'limits.%.64s'", lkey);
        }
        k = get_u64(v, "memoryBytes", 1 << 20, UINT64_MAX - 1, &set, &u, ret_why);
        if (k < 0)
                return k;
        if (set)
                r->memory_max = cap(u, max->memory_max);
        k = get_u64(v, "tasks", 1, 1000000, &set, &u, ret_why);
        if (k < 0)
                return k;
        if (set)
                r->tasks_max = cap(u, max->tasks_max);
        k = get_u64(v, "cpuPercent", 1, 100000, &set, &u, ret_why);
        if (k < 0)
                return k;
        if (set)
                r->cpu_quota_percent = (unsigned) cap(u, max->cpu_quota_percent);
        return 0;
}

/* The members of a request that take nothing but the body, after its ids and command or program. */
static int (*const parsers[])(json_object *body, ExecutionRequest *r, char **ret_why) = {
        parse_stdin, parse_env, parse_cwd, parse_environment, parse_npu, parse_devices,
};

/* The order of the steps decides which error a bad request gets: keep it. */
int execution_request_parse(json_object *body, ExecutionKind kind, const ExecutionMaxima *max,
                            ExecutionRequest **ret, char **ret_why) {
        _cleanup_(execution_request_freep) ExecutionRequest *r = NULL;
        int k;

        *ret_why = NULL;
        if (!json_object_is_type(body, json_type_object))
                return bad(ret_why, "the body must be a JSON object");

        k = parse_kernel_mode(body, ret_why);
        if (k < 0)
                return k;
        k = check_keys(body, kind, ret_why);
        if (k < 0)
                return k;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;

        k = parse_ids(body, r, ret_why);
        if (k < 0)
                return k;
        k = kind == EXECUTION_KIND_SHELL ? parse_command(body, r, ret_why) : parse_program(body, r, ret_why);
        if (k < 0)
                return k;
        /* In this order: the first refusal is the one reported. */
        for (size_t i = 0; i < ELEMENTSOF(parsers); i++) {
                k = parsers[i](body, r, ret_why);
                if (k < 0)
                        return k;
        }
        k = parse_limits(body, max, r, ret_why);
        if (k < 0)
                return k;

        *ret = STEAL(r);
        return 0;
}

ExecutionMaxima execution_maxima_from_config(const Config *c) {
        return (ExecutionMaxima) {
                .default_timeout_usec = c->default_timeout_usec,
                .max_timeout_usec = c->max_timeout_usec,
                .memory_max = c->memory_max,
                .tasks_max = c->tasks_max,
                .cpu_quota_percent = c->cpu_quota_percent,
        };
}
