/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tables of src/execution/execution-request.c: the bodies of /execute, /execute-shell and /shell-executions
 * that are accepted (and what they become), and every refusal (with the field it names). */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "execution/execution-request.h"
#include "util/strv.h"

#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))
#define SEC 1000000ULL
#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)

/* The argv of `language: python`: python3 -c with a runner that reads the code file. */
#define PYTHON_RUNNER \
        "import sys; sys.argv[0] = '-c'; __f = '/.sandbox/code'; " \
        "exec(compile(open(__f, encoding='utf-8').read(), __f, 'exec'), " \
        "{'__name__': '__main__', '__builtins__': __builtins__})"

static const ExecutionMaxima maxima = {
        .default_timeout_usec = 30 * SEC,
        .max_timeout_usec = 300 * SEC,
        .memory_max = 1 * GIB,
        .tasks_max = 512,
        .cpu_quota_percent = 200,
};

/* A maximum of 0 means no cap. */
static const ExecutionMaxima no_caps = {
        .default_timeout_usec = 30 * SEC,
        .max_timeout_usec = 3600 * SEC,
};

/* ---------------------------------------------------------------------------------------------
 * Helpers */

/* @n bytes of @s with everything but printable ASCII as \xNN, in a buffer the caller frees. */
static char *escape_n(const char *s, size_t n) {
        char *e, *q;

        if (!s)
                return strdup("(null)");
        if (n > 200)
                n = 200;
        e = malloc(n * 4 + 4);
        assert_non_null(e);
        q = e;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f)
                        *q++ = (char) c;
                else
                        q += sprintf(q, "\\x%02x", c);
        }
        *q = 0;
        return e;
}

static const char *kind_name(ExecutionKind kind) {
        return kind == EXECUTION_KIND_SHELL ? "shell" : "execute";
}

/* Parse @json (which must be valid JSON) and hand it to execution_request_parse(). */
static int parse(const char *json, ExecutionKind kind, const ExecutionMaxima *max, ExecutionRequest **ret,
                 char **why) {
        enum json_tokener_error error;
        json_object *o = json_tokener_parse_verbose(json, &error);     /* "null" is NULL too */
        int r;

        if (error != json_tokener_success) {
                char *e = escape_n(json, strlen(json));
                print_message("# not JSON: %s\n", e);
                free(e);
                fail();
        }
        *ret = NULL;
        r = execution_request_parse(o, kind, max, ret, why);
        json_object_put(o);
        return r;
}

/* Parse @json that must be accepted; on refusal, print why and fail. */
static ExecutionRequest *parse_ok_at(const char *json, ExecutionKind kind, const ExecutionMaxima *max,
                                     const char *file, int line) {
        ExecutionRequest *er;
        char *why = NULL;
        int r = parse(json, kind, max, &er, &why);

        if (r != 0) {
                char *e = escape_n(json, strlen(json));
                print_message("# %s:%d: %s %s → %d (%s), expected 0: %s\n", file, line, kind_name(kind), e, r,
                              strerror(-r), why ?: "(no why)");
                free(e);
                free(why);
                fail();
        }
        assert_null(why);
        assert_non_null(er);
        return er;
}
#define parse_ok(json, kind, max) parse_ok_at((json), (kind), (max), __FILE__, __LINE__)

/* Check one refusal; returns false (after printing the reason) when it does not hold. */
static bool check_refused(const char *label, const char *json, ExecutionKind kind, const ExecutionMaxima *max,
                          int want, const char *field, const char *detail) {
        ExecutionRequest *er;
        char *why = NULL, *e;
        bool ok;
        int r = parse(json, kind, max, &er, &why);

        ok = r == want && !er;
        if (ok && want == -EBADMSG)
                ok = why && (!field || strstr(why, field)) && (!detail || strstr(why, detail));
        if (ok && want == -EPROTONOSUPPORT)
                ok = !why;
        if (!ok) {
                e = escape_n(json, strlen(json));
                print_message("# %s: %s %s → %d (%s), why \"%s\"; expected %d (%s) naming \"%s\"%s%s%s\n",
                              label, kind_name(kind), e, r, r < 0 ? strerror(-r) : "accepted", why ?: "(null)",
                              want, strerror(-want), field ?: "", detail ? " and \"" : "", detail ?: "",
                              detail ? "\"" : "");
                free(e);
        }
        free(why);
        execution_request_free(er);
        return ok;
}

typedef struct Refusal {
        ExecutionKind kind;
        const char *json;
        int error;              /* -EBADMSG or -EPROTONOSUPPORT */
        const char *field;      /* must be in why */
        const char *detail;     /* must be in why too, when set */
} Refusal;

static void check_refusals(const char *label, const Refusal *cases, size_t n, const ExecutionMaxima *max) {
        size_t failed = 0;

        for (size_t i = 0; i < n; i++)
                if (!check_refused(label, cases[i].json, cases[i].kind, max, cases[i].error, cases[i].field,
                                   cases[i].detail))
                        failed++;
        if (failed > 0) {
                print_message("# %s: %zu of %zu refusals do not hold\n", label, failed, n);
                fail();
        }
}

static void assert_strv_equal_at(char **got, const char *const *want, const char *what, const char *file,
                                 int line) {
        size_t n_got = strv_length(got), n_want = strv_length((char *const *) want);
        bool same = n_got == n_want;

        for (size_t i = 0; same && i < n_want; i++)
                same = strcmp(got[i], want[i]) == 0;
        if (same)
                return;
        print_message("# %s:%d: %s differs (%zu elements expected, %zu got)\n", file, line, what, n_want, n_got);
        for (size_t i = 0; i < n_want || i < n_got; i++) {
                char *w = i < n_want ? escape_n(want[i], strlen(want[i])) : strdup("(none)");
                char *g = i < n_got ? escape_n(got[i], strlen(got[i])) : strdup("(none)");

                print_message("#   [%zu] %s \"%s\" / \"%s\"\n", i,
                              i < n_want && i < n_got && strcmp(want[i], got[i]) == 0 ? "  " : "!=", w, g);
                free(w);
                free(g);
        }
        fail();
}
#define assert_strv_equal(got, want, what) assert_strv_equal_at((got), (want), (what), __FILE__, __LINE__)

/* Bytes equal, the same size, and NUL-terminated past the end (the code and stdin are C strings too). */
static void assert_bytes_at(const char *got, size_t got_size, const char *want, size_t want_size,
                            const char *what, const char *file, int line) {
        if (!want && !got && got_size == 0)
                return;
        if (want && got && got_size == want_size && memcmp(got, want, want_size) == 0 && got[got_size] == '\0')
                return;
        {
                char *w = escape_n(want, want_size), *g = escape_n(got, got_size);
                print_message("# %s:%d: %s: expected %zu bytes \"%s\", got %zu bytes \"%s\"\n", file, line, what,
                              want_size, w, got_size, g);
                free(w);
                free(g);
        }
        fail();
}
#define assert_bytes(got, got_size, want, want_size, what) \
        assert_bytes_at((got), (got_size), (want), (want_size), (what), __FILE__, __LINE__)

/* A growable string for generated bodies. */
typedef struct Buf {
        char *s;
        size_t n;
        FILE *f;
} Buf;

static FILE *buf_open(Buf *b) {
        *b = (Buf) {};
        b->f = open_memstream(&b->s, &b->n);
        assert_non_null(b->f);
        return b->f;
}

static char *buf_close(Buf *b) {
        assert_int_equal(fclose(b->f), 0);
        return b->s;
}

static void put_repeat(FILE *f, char c, size_t n) {
        for (size_t i = 0; i < n; i++)
                fputc(c, f);
}

static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);

        assert_non_null(s);
        memset(s, c, n);
        s[n] = 0;
        return s;
}

/* ---------------------------------------------------------------------------------------------
 * Accepted bodies */

/* What each kind of payload becomes: the argv, the language and the code, byte for byte. */
static void test_payloads(void **state) {
#define CODE(s) .code = (s), .code_size = sizeof(s) - 1
        const struct {
                ExecutionKind kind;
                const char *json;
                const char *const *argv;
                const char *language;
                const char *code;
                size_t code_size;
        } cases[] = {
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"python\", \"code\": \"print(6*7)\"}",
                  (const char *const[]) { "python3", "-c", PYTHON_RUNNER, NULL }, "python", CODE("print(6*7)") },
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"shell\", \"code\": \"echo hi; ls -la\\n\"}",
                  (const char *const[]) { "/bin/sh", "/.sandbox/code", NULL }, "shell", CODE("echo hi; ls -la\n") },
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"r\", \"code\": \"cat(6*7)\"}",
                  (const char *const[]) { "Rscript", "--no-save", "/.sandbox/code", NULL }, "r", CODE("cat(6*7)") },
                /* Multibyte UTF-8, raw and \u-escaped (with a surrogate pair), kept byte for byte. */
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"python\", \"code\": \"print('h\xc3\xa9llo \xe2\x86\x92 \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80')\\n\"}",
                  (const char *const[]) { "python3", "-c", PYTHON_RUNNER, NULL }, "python",
                  CODE("print('h\xc3\xa9llo \xe2\x86\x92 \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80')\n") },
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"shell\", \"code\": \"echo \\u00e9\\u2192\\u4e16\\ud83d\\ude00\\t\\\"q\\\"\\\\\"}",
                  (const char *const[]) { "/bin/sh", "/.sandbox/code", NULL }, "shell",
                  CODE("echo \xc3\xa9\xe2\x86\x92\xe4\xb8\x96\xf0\x9f\x98\x80\t\"q\"\\") },
                /* Code is a file, not an argument: empty code and NUL bytes are kept as they are. */
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"python\", \"code\": \"\"}",
                  (const char *const[]) { "python3", "-c", PYTHON_RUNNER, NULL }, "python", CODE("") },
                { EXECUTION_KIND_EXECUTE, "{\"language\": \"python\", \"code\": \"a\\u0000b\"}",
                  (const char *const[]) { "python3", "-c", PYTHON_RUNNER, NULL }, "python", CODE("a\0b") },
                /* argv, verbatim; later elements may be empty. */
                { EXECUTION_KIND_EXECUTE, "{\"argv\": [\"ls\", \"-la\", \"\", \"caf\\u00e9\", \"a b\"]}",
                  (const char *const[]) { "ls", "-la", "", "caf\xc3\xa9", "a b", NULL }, NULL, NULL, 0 },
                { EXECUTION_KIND_EXECUTE, "{\"argv\": [\"true\"], \"language\": null, \"code\": null}",
                  (const char *const[]) { "true", NULL }, NULL, NULL, 0 },
                { EXECUTION_KIND_EXECUTE, "{\"argv\": [\"/usr/bin/env\"]}",
                  (const char *const[]) { "/usr/bin/env", NULL }, NULL, NULL, 0 },
                /* /execute-shell and /shell-executions: command → /bin/sh -c command. */
                { EXECUTION_KIND_SHELL, "{\"command\": \"echo 'h\xc3\xa9llo' | wc -c\"}",
                  (const char *const[]) { "/bin/sh", "-c", "echo 'h\xc3\xa9llo' | wc -c", NULL }, NULL, NULL, 0 },
                { EXECUTION_KIND_SHELL, "{\"command\": \"for i in 1 2; do echo $i; done\\nexit 3\"}",
                  (const char *const[]) { "/bin/sh", "-c", "for i in 1 2; do echo $i; done\nexit 3", NULL },
                  NULL, NULL, 0 },
        };
#undef CODE

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                ExecutionRequest *er = parse_ok(cases[i].json, cases[i].kind, &maxima);
                char what[32];

                (void) snprintf(what, sizeof(what), "payload %zu: argv", i);
                assert_strv_equal(er->argv, cases[i].argv, what);
                if (cases[i].language)
                        assert_string_equal(er->language, cases[i].language);
                else
                        assert_null(er->language);
                (void) snprintf(what, sizeof(what), "payload %zu: code", i);
                assert_bytes(er->code, er->code_size, cases[i].code, cases[i].code_size, what);
                execution_request_free(er);
        }
}

/* What an omitted (or null) optional field becomes. */
static void test_defaults(void **state) {
        static const char *const bodies[] = {
                "{\"language\": \"python\", \"code\": \"1\"}",
                "{\"language\": \"python\", \"code\": \"1\", \"executionId\": null, \"workspaceId\": null, "
                "\"stdin\": null, \"env\": null, \"cwd\": null, \"timeoutMs\": null, \"limits\": null, "
                "\"kernelMode\": null}",
                "{\"language\": \"python\", \"code\": \"1\", \"kernelMode\": \"ephemeral\", \"limits\": {}, \"env\": {}}",
        };

        for (size_t i = 0; i < ELEMENTS(bodies); i++) {
                ExecutionRequest *er = parse_ok(bodies[i], EXECUTION_KIND_EXECUTE, &maxima);

                assert_null(er->execution_id);
                assert_string_equal(er->workspace_id, "default");
                assert_int_equal(strv_length(er->env), 0);
                assert_null(er->stdin_data);
                assert_int_equal(er->stdin_size, 0);
                assert_string_equal(er->cwd, "");
                assert_int_equal(er->timeout_usec, maxima.default_timeout_usec);
                assert_int_equal(er->memory_max, maxima.memory_max);
                assert_int_equal(er->tasks_max, maxima.tasks_max);
                assert_int_equal(er->cpu_quota_percent, maxima.cpu_quota_percent);
                execution_request_free(er);
        }

        /* The same on /execute-shell. */
        {
                ExecutionRequest *er = parse_ok("{\"command\": \"true\"}", EXECUTION_KIND_SHELL, &no_caps);

                assert_null(er->execution_id);
                assert_string_equal(er->workspace_id, "default");
                assert_null(er->language);
                assert_null(er->code);
                assert_int_equal(er->code_size, 0);
                assert_string_equal(er->cwd, "");
                assert_int_equal(er->timeout_usec, no_caps.default_timeout_usec);
                assert_int_equal(er->memory_max, 0);
                assert_int_equal(er->tasks_max, 0);
                assert_int_equal(er->cpu_quota_percent, 0);
                execution_request_free(er);
        }
}

static void test_ids(void **state) {
        const struct {
                const char *json;
                const char *execution_id;       /* NULL: absent */
                const char *workspace_id;
        } cases[] = {
                { "{\"argv\": [\"true\"], \"executionId\": \"a1b2-C3_d.e\", \"workspaceId\": \"agent7-runner1\"}",
                  "a1b2-C3_d.e", "agent7-runner1" },
                { "{\"argv\": [\"true\"], \"executionId\": \"x\"}", "x", "default" },
                { "{\"argv\": [\"true\"], \"workspaceId\": \"w\"}", NULL, "w" },
                { "{\"argv\": [\"true\"], \"workspaceId\": \"a..b\", \"executionId\": \"x..\"}", "x..", "a..b" },
                { "{\"argv\": [\"true\"], \"workspaceId\": \"-_.\", \"executionId\": \"_\"}", "_", "-_." },
        };
        char *id = repeat('i', 128), *json = NULL;
        ExecutionRequest *er;

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                er = parse_ok(cases[i].json, EXECUTION_KIND_EXECUTE, &maxima);
                if (cases[i].execution_id)
                        assert_string_equal(er->execution_id, cases[i].execution_id);
                else
                        assert_null(er->execution_id);
                assert_string_equal(er->workspace_id, cases[i].workspace_id);
                execution_request_free(er);
        }

        /* 128 characters are fine, 129 are not (for both ids). */
        assert_true(asprintf(&json, "{\"command\": \"true\", \"executionId\": \"%s\", \"workspaceId\": \"%s\"}",
                             id, id) > 0);
        er = parse_ok(json, EXECUTION_KIND_SHELL, &maxima);
        assert_string_equal(er->execution_id, id);
        assert_string_equal(er->workspace_id, id);
        execution_request_free(er);
        free(json);
        free(id);

        id = repeat('i', 129);
        assert_true(asprintf(&json, "{\"command\": \"true\", \"executionId\": \"%s\"}", id) > 0);
        assert_true(check_refused("129-char executionId", json, EXECUTION_KIND_SHELL, &maxima, -EBADMSG,
                                  "executionId", NULL));
        free(json);
        assert_true(asprintf(&json, "{\"command\": \"true\", \"workspaceId\": \"%s\"}", id) > 0);
        assert_true(check_refused("129-char workspaceId", json, EXECUTION_KIND_SHELL, &maxima, -EBADMSG,
                                  "workspaceId", NULL));
        free(json);
        free(id);
}

static void test_stdin(void **state) {
#define STDIN(s) .data = (s), .size = sizeof(s) - 1
        const struct {
                const char *json;
                const char *data;
                size_t size;
        } cases[] = {
                { "{\"argv\": [\"cat\"], \"stdin\": \"\"}", STDIN("") },
                { "{\"argv\": [\"cat\"], \"stdin\": \"line1\\nline2\\n\"}", STDIN("line1\nline2\n") },
                { "{\"argv\": [\"cat\"], \"stdin\": \"h\xc3\xa9llo \\u4e16\\ud83d\\ude00\"}",
                  STDIN("h\xc3\xa9llo \xe4\xb8\x96\xf0\x9f\x98\x80") },
                { "{\"argv\": [\"cat\"], \"stdin\": \"a\\u0000b\\u0000\"}", STDIN("a\0b\0") },
        };
#undef STDIN
        ExecutionRequest *er;
        char *big;
        Buf b;

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                er = parse_ok(cases[i].json, EXECUTION_KIND_EXECUTE, &maxima);
                assert_bytes(er->stdin_data, er->stdin_size, cases[i].data, cases[i].size, "stdin");
                execution_request_free(er);
        }

        /* On /execute-shell too. */
        er = parse_ok("{\"command\": \"cat\", \"stdin\": \"x\"}", EXECUTION_KIND_SHELL, &maxima);
        assert_bytes(er->stdin_data, er->stdin_size, "x", 1, "stdin");
        execution_request_free(er);

        /* Neither stdin nor code is bound by the argv limits: 1 MiB of each. */
        fputs("{\"language\": \"python\", \"stdin\": \"", buf_open(&b));
        put_repeat(b.f, 's', MIB);
        fputs("\", \"code\": \"", b.f);
        put_repeat(b.f, 'c', MIB);
        fputs("\"}", b.f);
        big = buf_close(&b);
        er = parse_ok(big, EXECUTION_KIND_EXECUTE, &maxima);
        free(big);
        assert_int_equal(er->stdin_size, MIB);
        assert_int_equal(er->code_size, MIB);
        big = repeat('s', MIB);
        assert_bytes(er->stdin_data, er->stdin_size, big, MIB, "1 MiB stdin");
        free(big);
        big = repeat('c', MIB);
        assert_bytes(er->code, er->code_size, big, MIB, "1 MiB code");
        free(big);
        execution_request_free(er);
}

static void test_env(void **state) {
        const struct {
                const char *json;
                const char *const *env;
        } cases[] = {
                { "{\"argv\": [\"env\"], \"env\": {\"MY_VAR\": \"x\"}}", (const char *const[]) { "MY_VAR=x", NULL } },
                /* In the body's order; values may be empty, contain '=', spaces and UTF-8. */
                { "{\"argv\": [\"env\"], \"env\": {\"B\": \"2\", \"_a1\": \"\", \"A\": \"x=y z\", \"U\": \"caf\\u00e9\"}}",
                  (const char *const[]) { "B=2", "_a1=", "A=x=y z", "U=caf\xc3\xa9", NULL } },
                /* Only the exact reserved names are: these are not. */
                { "{\"argv\": [\"env\"], \"env\": {\"Path\": \"1\", \"ld_preload\": \"2\", \"PATHX\": \"3\", "
                  "\"XLD_PRELOAD\": \"4\", \"HTTP_PROXYX\": \"5\", \"_\": \"6\"}}",
                  (const char *const[]) { "Path=1", "ld_preload=2", "PATHX=3", "XLD_PRELOAD=4", "HTTP_PROXYX=5",
                                          "_=6", NULL } },
        };
        char *json, *name;
        ExecutionRequest *er;
        Buf b;

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                er = parse_ok(cases[i].json, EXECUTION_KIND_EXECUTE, &maxima);
                assert_strv_equal(er->env, cases[i].env, "env");
                execution_request_free(er);
        }

        er = parse_ok("{\"command\": \"env\", \"env\": {\"K\": \"V\"}}", EXECUTION_KIND_SHELL, &maxima);
        assert_strv_equal(er->env, ((const char *const[]) { "K=V", NULL }), "env");
        execution_request_free(er);

        /* 256 entries are fine, 257 are not. */
        for (size_t n = 256; n <= 257; n++) {
                fputs("{\"argv\": [\"env\"], \"env\": {", buf_open(&b));
                for (size_t i = 0; i < n; i++)
                        fprintf(b.f, "%s\"V%zu\": \"%zu\"", i ? ", " : "", i, i);
                fputs("}}", b.f);
                json = buf_close(&b);
                if (n == 256) {
                        er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                        assert_int_equal(strv_length(er->env), 256);
                        assert_string_equal(er->env[0], "V0=0");
                        assert_string_equal(er->env[255], "V255=255");
                        execution_request_free(er);
                } else
                        assert_true(check_refused("257 env entries", json, EXECUTION_KIND_EXECUTE, &maxima,
                                                  -EBADMSG, "env", "256"));
                free(json);
        }

        /* Values of 32 KiB are fine, one byte more is not. */
        for (size_t n = 32 * 1024; n <= 32 * 1024 + 1; n++) {
                fputs("{\"argv\": [\"env\"], \"env\": {\"BIG\": \"", buf_open(&b));
                put_repeat(b.f, 'v', n);
                fputs("\"}}", b.f);
                json = buf_close(&b);
                if (n == 32 * 1024) {
                        er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                        assert_int_equal(strv_length(er->env), 1);
                        assert_int_equal(strlen(er->env[0]), strlen("BIG=") + n);
                        assert_memory_equal(er->env[0], "BIG=vvv", 7);
                        execution_request_free(er);
                } else
                        assert_true(check_refused("32 KiB + 1 env value", json, EXECUTION_KIND_EXECUTE, &maxima,
                                                  -EBADMSG, "env.BIG", NULL));
                free(json);
        }

        /* Names of 128 bytes are fine, 129 are not. */
        name = repeat('N', 128);
        assert_true(asprintf(&json, "{\"argv\": [\"env\"], \"env\": {\"%s\": \"1\"}}", name) > 0);
        er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
        assert_int_equal(strlen(er->env[0]), 130);
        execution_request_free(er);
        free(json);
        free(name);
        name = repeat('N', 129);
        assert_true(asprintf(&json, "{\"argv\": [\"env\"], \"env\": {\"%s\": \"1\"}}", name) > 0);
        assert_true(check_refused("129-byte env name", json, EXECUTION_KIND_EXECUTE, &maxima, -EBADMSG, "env",
                                  NULL));
        free(json);
        free(name);
}

static void test_cwd(void **state) {
        const struct {
                const char *cwd_json;   /* the JSON value */
                const char *cwd;        /* what it becomes */
        } cases[] = {
                { "\"\"", "" },
                { "\"a\"", "a" },
                { "\"a/b\"", "a/b" },
                { "\"sub/dir\"", "sub/dir" },
                { "\"/workspace\"", "" },
                { "\"/workspace/\"", "" },
                { "\"/workspace/a\"", "a" },
                { "\"/workspace/a/b.c\"", "a/b.c" },
                { "\"..a\"", "..a" },
                { "\".hidden/x\"", ".hidden/x" },
                { "\"caf\\u00e9\"", "caf\xc3\xa9" },
        };
        ExecutionRequest *er;
        char *json, *path;
        Buf b;

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                assert_true(asprintf(&json, "{\"argv\": [\"pwd\"], \"cwd\": %s}", cases[i].cwd_json) > 0);
                er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                assert_string_equal(er->cwd, cases[i].cwd);
                execution_request_free(er);
                free(json);
        }

        er = parse_ok("{\"command\": \"pwd\", \"cwd\": \"/workspace/x/y\"}", EXECUTION_KIND_SHELL, &maxima);
        assert_string_equal(er->cwd, "x/y");
        execution_request_free(er);

        /* 1024 bytes after "/workspace/" are fine, 1025 are not. */
        for (size_t n = 1024; n <= 1025; n++) {
                path = repeat('c', n);
                for (size_t i = 200; i < n - 1; i += 201)
                        path[i] = '/';
                fprintf(buf_open(&b), "{\"argv\": [\"pwd\"], \"cwd\": \"/workspace/%s\"}", path);
                json = buf_close(&b);
                if (n == 1024) {
                        er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                        assert_string_equal(er->cwd, path);
                        execution_request_free(er);
                } else
                        assert_true(check_refused("1025-byte cwd", json, EXECUTION_KIND_EXECUTE, &maxima,
                                                  -EBADMSG, "cwd", NULL));
                free(json);
                free(path);
        }
}

static void test_timeout(void **state) {
        const struct {
                const char *timeout_json;
                uint64_t usec;
        } cases[] = {
                { "1", 1000 },
                { "1500", 1500 * 1000 },
                { "30000", 30 * SEC },
                { "299999", 299999 * 1000ULL },
                { "300000", 300 * SEC },
                /* Capped at the maximum. */
                { "300001", 300 * SEC },
                { "86400000", 300 * SEC },
                { "1000000000000", 300 * SEC },
                { "18446744073709551", 300 * SEC },     /* UINT64_MAX / 1000, the largest that fits */
        };
        ExecutionRequest *er;
        char *json;

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                assert_true(asprintf(&json, "{\"argv\": [\"sleep\", \"1\"], \"timeoutMs\": %s}",
                                     cases[i].timeout_json) > 0);
                er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                if (er->timeout_usec != cases[i].usec) {
                        print_message("# timeoutMs %s → %llu µs, expected %llu µs\n", cases[i].timeout_json,
                                      (unsigned long long) er->timeout_usec, (unsigned long long) cases[i].usec);
                        fail();
                }
                execution_request_free(er);
                free(json);
        }

        /* Another maximum. */
        er = parse_ok("{\"command\": \"true\", \"timeoutMs\": 3600001}", EXECUTION_KIND_SHELL, &no_caps);
        assert_int_equal(er->timeout_usec, 3600 * SEC);
        execution_request_free(er);
        er = parse_ok("{\"command\": \"true\", \"timeoutMs\": 600000}", EXECUTION_KIND_SHELL, &no_caps);
        assert_int_equal(er->timeout_usec, 600 * SEC);
        execution_request_free(er);
}

static void test_limits(void **state) {
        const struct {
                const ExecutionMaxima *max;
                const char *limits_json;
                uint64_t memory_max;
                uint64_t tasks_max;
                unsigned cpu_quota_percent;
        } cases[] = {
                /* None given: the maxima (0 = none). */
                { &maxima, "null", 1 * GIB, 512, 200 },
                { &maxima, "{}", 1 * GIB, 512, 200 },
                { &no_caps, "{}", 0, 0, 0 },
                /* Below the maximum: kept; above: the maximum; others stay at the maximum. */
                { &maxima, "{\"memoryBytes\": 536870912}", 512 * MIB, 512, 200 },
                { &maxima, "{\"memoryBytes\": 1048576}", 1 * MIB, 512, 200 },
                { &maxima, "{\"memoryBytes\": 1073741824}", 1 * GIB, 512, 200 },
                { &maxima, "{\"memoryBytes\": 1073741825}", 1 * GIB, 512, 200 },
                { &maxima, "{\"memoryBytes\": 1099511627776}", 1 * GIB, 512, 200 },
                { &maxima, "{\"tasks\": 1}", 1 * GIB, 1, 200 },
                { &maxima, "{\"tasks\": 256}", 1 * GIB, 256, 200 },
                { &maxima, "{\"tasks\": 513}", 1 * GIB, 512, 200 },
                { &maxima, "{\"tasks\": 1000000}", 1 * GIB, 512, 200 },
                { &maxima, "{\"cpuPercent\": 1}", 1 * GIB, 512, 1 },
                { &maxima, "{\"cpuPercent\": 100}", 1 * GIB, 512, 100 },
                { &maxima, "{\"cpuPercent\": 201}", 1 * GIB, 512, 200 },
                { &maxima, "{\"cpuPercent\": 100000}", 1 * GIB, 512, 200 },
                { &maxima, "{\"memoryBytes\": 268435456, \"tasks\": 64, \"cpuPercent\": 50}", 256 * MIB, 64, 50 },
                { &maxima, "{\"memoryBytes\": null, \"tasks\": null, \"cpuPercent\": null}", 1 * GIB, 512, 200 },
                /* A maximum of 0: no cap, the request is taken as it is. */
                { &no_caps, "{\"memoryBytes\": 1099511627776}", 1024 * GIB, 0, 0 },
                { &no_caps, "{\"tasks\": 1000000}", 0, 1000000, 0 },
                { &no_caps, "{\"cpuPercent\": 100000}", 0, 0, 100000 },
                { &no_caps, "{\"memoryBytes\": 1048576, \"tasks\": 1, \"cpuPercent\": 1}", 1 * MIB, 1, 1 },
        };
        size_t failed = 0;

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                ExecutionRequest *er;
                char *json;

                assert_true(asprintf(&json, "{\"argv\": [\"true\"], \"limits\": %s}", cases[i].limits_json) > 0);
                er = parse_ok(json, EXECUTION_KIND_EXECUTE, cases[i].max);
                if (er->memory_max != cases[i].memory_max || er->tasks_max != cases[i].tasks_max ||
                    er->cpu_quota_percent != cases[i].cpu_quota_percent) {
                        print_message("# limits %s (%s) → memory %llu tasks %llu cpu %u, "
                                      "expected memory %llu tasks %llu cpu %u\n",
                                      cases[i].limits_json, cases[i].max == &maxima ? "capped" : "no caps",
                                      (unsigned long long) er->memory_max, (unsigned long long) er->tasks_max,
                                      er->cpu_quota_percent, (unsigned long long) cases[i].memory_max,
                                      (unsigned long long) cases[i].tasks_max, cases[i].cpu_quota_percent);
                        failed++;
                }
                execution_request_free(er);
                free(json);
        }
        if (failed > 0)
                fail();
}

/* ---------------------------------------------------------------------------------------------
 * Refusals */

#define X EXECUTION_KIND_EXECUTE
#define S EXECUTION_KIND_SHELL
#define BAD -EBADMSG
#define PERSISTENT -EPROTONOSUPPORT

static void test_refuse_shape(void **state) {
        static const Refusal cases[] = {
                { X, "[]", BAD, "object" },
                { X, "\"print(1)\"", BAD, "object" },
                { S, "null", BAD, "object" },
                { X, "{\"language\": \"python\", \"code\": \"1\", \"bogus\": 1}", BAD, "bogus" },
                { X, "{\"language\": \"python\", \"code\": \"1\", \"Code\": \"1\"}", BAD, "Code" },
                { X, "{\"language\": \"python\", \"code\": \"1\", \"limit\": {}}", BAD, "limit" },
                { X, "{\"language\": \"python\", \"code\": \"1\", \"bogus\": null}", BAD, "bogus" },
                /* Each endpoint's own payload fields only. */
                { X, "{\"argv\": [\"true\"], \"command\": \"true\"}", BAD, "command" },
                { X, "{\"command\": \"true\"}", BAD, "command" },
                { S, "{\"command\": \"true\", \"code\": \"1\"}", BAD, "code" },
                { S, "{\"command\": \"true\", \"language\": \"shell\"}", BAD, "language" },
                { S, "{\"command\": \"true\", \"argv\": [\"true\"]}", BAD, "argv" },
                { S, "{\"language\": \"shell\", \"code\": \"true\"}", BAD, "language" },
        };

        check_refusals("shape", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_kernel_mode(void **state) {
        static const Refusal cases[] = {
                { X, "{\"kernelMode\": \"persistent\", \"language\": \"python\", \"code\": \"1\"}", PERSISTENT },
                { S, "{\"kernelMode\": \"persistent\", \"command\": \"true\"}", PERSISTENT },
                { X, "{\"kernelMode\": \"persistent\"}", PERSISTENT },
                { S, "{\"kernelMode\": \"persistent\"}", PERSISTENT },
                /* "persistent" wins over whatever else is wrong, wherever it is in the body. */
                { X, "{\"bogus\": 1, \"kernelMode\": \"persistent\"}", PERSISTENT },
                { S, "{\"kernelMode\": \"persistent\", \"command\": \"\", \"code\": 5}", PERSISTENT },
                { X, "{\"argv\": [], \"code\": \"x\", \"executionId\": \"../x\", \"workspaceId\": \"\", "
                     "\"env\": {\"PATH\": 1}, \"cwd\": \"../x\", \"timeoutMs\": -1, \"limits\": {\"x\": 1}, "
                     "\"kernelMode\": \"persistent\"}", PERSISTENT },
                { X, "{\"language\": \"cobol\", \"kernelMode\": \"persistent\", \"limits\": \"big\"}", PERSISTENT },
                /* Anything but "ephemeral" (or null) is refused. */
                { X, "{\"kernelMode\": \"Persistent\", \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": \"persistent \", \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": \"ephemeral \", \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": \"\", \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": \"stateless\", \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { S, "{\"kernelMode\": \"shared\", \"command\": \"true\"}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": 1, \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": true, \"argv\": [\"true\"]}", BAD, "kernelMode" },
                { X, "{\"kernelMode\": [\"persistent\"], \"argv\": [\"true\"]}", BAD, "kernelMode" },
        };

        check_refusals("kernelMode", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_ids(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"true\"], \"executionId\": \"../x\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \".a\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \".\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \"\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \"a/b\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \"a b\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \"caf\\u00e9\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": 5}", BAD, "executionId" },
                { S, "{\"command\": \"true\", \"executionId\": \"a\\nb\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \"../x\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \".a\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \"..\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \"\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \"a/b\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \"a:b\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"workspaceId\": [\"w\"]}", BAD, "workspaceId" },
                { S, "{\"command\": \"true\", \"workspaceId\": \"/\"}", BAD, "workspaceId" },
        };

        check_refusals("ids", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_payload(void **state) {
        static const Refusal cases[] = {
                /* Neither, or both. */
                { X, "{}", BAD, "language" },
                { X, "{\"argv\": null}", BAD, "language" },
                { X, "{\"argv\": [\"ls\"], \"code\": \"x\"}", BAD, "argv" },
                { X, "{\"argv\": [\"ls\"], \"language\": \"python\"}", BAD, "argv" },
                { X, "{\"argv\": [\"ls\"], \"language\": \"python\", \"code\": \"x\"}", BAD, "argv" },
                /* language and code. */
                { X, "{\"language\": \"python\"}", BAD, "code" },
                { X, "{\"language\": \"python\", \"code\": null}", BAD, "code" },
                { X, "{\"code\": \"print(1)\"}", BAD, "language" },
                { X, "{\"language\": \"ruby\", \"code\": \"puts 1\"}", BAD, "language" },
                { X, "{\"language\": \"Python\", \"code\": \"1\"}", BAD, "language" },
                { X, "{\"language\": \"python3\", \"code\": \"1\"}", BAD, "language" },
                { X, "{\"language\": \"sh\", \"code\": \"true\"}", BAD, "language" },
                { X, "{\"language\": \"R\", \"code\": \"1\"}", BAD, "language" },
                { X, "{\"language\": \"\", \"code\": \"1\"}", BAD, "language" },
                { X, "{\"language\": 1, \"code\": \"1\"}", BAD, "language" },
                { X, "{\"language\": \"python\", \"code\": 5}", BAD, "code" },
                { X, "{\"language\": \"python\", \"code\": [\"print(1)\"]}", BAD, "code" },
                /* argv. */
                { X, "{\"argv\": []}", BAD, "argv" },
                { X, "{\"argv\": \"ls -la\"}", BAD, "argv" },
                { X, "{\"argv\": {\"0\": \"ls\"}}", BAD, "argv" },
                { X, "{\"argv\": 1}", BAD, "argv" },
                { X, "{\"argv\": [1]}", BAD, "argv[0]" },
                { X, "{\"argv\": [\"ls\", null]}", BAD, "argv[1]" },
                { X, "{\"argv\": [\"ls\", 2]}", BAD, "argv[1]" },
                { X, "{\"argv\": [\"ls\", [\"-la\"]]}", BAD, "argv[1]" },
                { X, "{\"argv\": [\"ls\", \"-l\", {}]}", BAD, "argv[2]" },
                { X, "{\"argv\": [\"\"]}", BAD, "argv[0]" },
                { X, "{\"argv\": [\"\", \"x\"]}", BAD, "argv[0]" },
                /* command. */
                { S, "{}", BAD, "command" },
                { S, "{\"command\": null}", BAD, "command" },
                { S, "{\"command\": \"\"}", BAD, "command" },
                { S, "{\"command\": 5}", BAD, "command" },
                { S, "{\"command\": [\"ls\"]}", BAD, "command" },
                /* http_json_parse() refuses NUL in JSON strings earlier, but this must too. */
                { S, "{\"command\": \"echo a\\u0000; rm -rf /\"}", BAD, "command" },
                { S, "{\"command\": \"\\u0000\"}", BAD, "command" },
                { S, "{\"command\": \"true\\u0000\"}", BAD, "command" },
                /* stdin. */
                { X, "{\"argv\": [\"cat\"], \"stdin\": 5}", BAD, "stdin" },
                { S, "{\"command\": \"cat\", \"stdin\": [\"x\"]}", BAD, "stdin" },
        };

        check_refusals("payload", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_sizes(void **state) {
        ExecutionRequest *er;
        char *json;
        Buf b;

        /* 4096 argv entries are fine, 4097 are not. */
        for (size_t n = 4096; n <= 4097; n++) {
                fputs("{\"argv\": [\"echo\"", buf_open(&b));
                for (size_t i = 1; i < n; i++)
                        fputs(", \"a\"", b.f);
                fputs("]}", b.f);
                json = buf_close(&b);
                if (n == 4096) {
                        er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                        assert_int_equal(strv_length(er->argv), 4096);
                        execution_request_free(er);
                } else
                        assert_true(check_refused("4097 argv entries", json, EXECUTION_KIND_EXECUTE, &maxima,
                                                  -EBADMSG, "argv", "4096"));
                free(json);
        }

        /* An argument of 128 KiB - 1 bytes is fine, 128 KiB is not (MAX_ARG_STRLEN counts the NUL). */
        for (size_t n = EXECUTION_ARG_BYTES_MAX; n <= EXECUTION_ARG_BYTES_MAX + 1; n++) {
                fputs("{\"argv\": [\"echo\", \"", buf_open(&b));
                put_repeat(b.f, 'a', n);
                fputs("\"]}", b.f);
                json = buf_close(&b);
                if (n == EXECUTION_ARG_BYTES_MAX) {
                        er = parse_ok(json, EXECUTION_KIND_EXECUTE, &maxima);
                        assert_int_equal(strlen(er->argv[1]), n);
                        execution_request_free(er);
                } else
                        assert_true(check_refused("argv[1] of 128 KiB", json, EXECUTION_KIND_EXECUTE, &maxima,
                                                  -EBADMSG, "argv[1]", NULL));
                free(json);
        }

        /* The same for the command. */
        for (size_t n = EXECUTION_ARG_BYTES_MAX; n <= EXECUTION_ARG_BYTES_MAX + 1; n++) {
                fputs("{\"command\": \"", buf_open(&b));
                put_repeat(b.f, ':', n);
                fputs("\"}", b.f);
                json = buf_close(&b);
                if (n == EXECUTION_ARG_BYTES_MAX) {
                        er = parse_ok(json, EXECUTION_KIND_SHELL, &maxima);
                        assert_int_equal(strv_length(er->argv), 3);
                        assert_int_equal(strlen(er->argv[2]), n);
                        execution_request_free(er);
                } else
                        assert_true(check_refused("command of 128 KiB", json, EXECUTION_KIND_SHELL, &maxima,
                                                  -EBADMSG, "command", NULL));
                free(json);
        }
}

static void test_refuse_env(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"env\"], \"env\": [\"A=1\"]}", BAD, "env" },
                { X, "{\"argv\": [\"env\"], \"env\": \"A=1\"}", BAD, "env" },
                { X, "{\"argv\": [\"env\"], \"env\": 1}", BAD, "env" },
                /* Reserved names. */
                { X, "{\"argv\": [\"env\"], \"env\": {\"PATH\": \"/tmp\"}}", BAD, "env", "'PATH'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"HOME\": \"/\"}}", BAD, "env", "'HOME'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"LANG\": \"C\"}}", BAD, "env", "'LANG'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"TMPDIR\": \"/\"}}", BAD, "env", "'TMPDIR'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"USER\": \"root\"}}", BAD, "env", "'USER'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"LOGNAME\": \"root\"}}", BAD, "env", "'LOGNAME'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"SHELL\": \"/bin/bash\"}}", BAD, "env", "'SHELL'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"PWD\": \"/\"}}", BAD, "env", "'PWD'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"LD_PRELOAD\": \"/x.so\"}}", BAD, "env", "'LD_PRELOAD'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"LD_LIBRARY_PATH\": \"/x\"}}", BAD, "env", "'LD_LIBRARY_PATH'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"LD_AUDIT\": \"/x.so\"}}", BAD, "env", "'LD_AUDIT'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"LD_\": \"x\"}}", BAD, "env", "'LD_'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"HTTP_PROXY\": \"http://evil\"}}", BAD, "env", "'HTTP_PROXY'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"HTTPS_PROXY\": \"http://evil\"}}", BAD, "env", "'HTTPS_PROXY'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"http_proxy\": \"http://evil\"}}", BAD, "env", "'http_proxy'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"https_proxy\": \"http://evil\"}}", BAD, "env", "'https_proxy'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"NO_PROXY\": \"*\"}}", BAD, "env", "'NO_PROXY'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"no_proxy\": \"*\"}}", BAD, "env", "'no_proxy'" },
                /* A bad name after good ones. */
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": \"1\", \"B\": \"2\", \"PATH\": \"x\"}}", BAD, "env", "'PATH'" },
                { S, "{\"command\": \"env\", \"env\": {\"LD_PRELOAD\": \"x\"}}", BAD, "env", "'LD_PRELOAD'" },
                /* Malformed names. */
                { X, "{\"argv\": [\"env\"], \"env\": {\"\": \"x\"}}", BAD, "env", "''" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"1A\": \"x\"}}", BAD, "env", "'1A'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A-B\": \"x\"}}", BAD, "env", "'A-B'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A=B\": \"x\"}}", BAD, "env", "'A=B'" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A B\": \"x\"}}", BAD, "env", "'A B'" },
                /* Values that are not strings. */
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": 1}}", BAD, "env.A" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": null}}", BAD, "env.A" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": true}}", BAD, "env.A" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": [\"x\"]}}", BAD, "env.A" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": {\"B\": \"x\"}}}", BAD, "env.A" },
        };

        check_refusals("env", cases, ELEMENTS(cases), &maxima);
}

/* "npu" and "devices" (DESIGN.md §9): the shape here, what exists is the NPU manager's. */
static void test_devices(void **state) {
        ExecutionRequest *er;

        er = parse_ok("{\"argv\": [\"true\"], \"npu\": {\"chips\": [5, 3, 0]}}", EXECUTION_KIND_EXECUTE, &maxima);
        assert_int_equal(er->n_npu_chips, 3);
        assert_int_equal(er->npu_chips[0], 5);
        assert_int_equal(er->npu_chips[1], 3);
        assert_int_equal(er->npu_chips[2], 0);
        assert_null(er->devices);
        execution_request_free(er);

        er = parse_ok("{\"command\": \"true\", \"devices\": [\"nvidia.com/gpu=0\", \"example.com/fake=dev-0:a\"]}",
                      EXECUTION_KIND_SHELL, &maxima);
        assert_int_equal(er->n_npu_chips, 0);
        assert_null(er->npu_chips);
        assert_int_equal(strv_length(er->devices), 2);
        assert_string_equal(er->devices[0], "nvidia.com/gpu=0");
        assert_string_equal(er->devices[1], "example.com/fake=dev-0:a");
        execution_request_free(er);

        er = parse_ok("{\"command\": \"true\", \"npu\": null, \"devices\": null}", EXECUTION_KIND_SHELL, &maxima);
        assert_int_equal(er->n_npu_chips, 0);
        assert_null(er->devices);
        execution_request_free(er);
}

static void test_refuse_devices(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"true\"], \"npu\": [0]}", BAD, "npu" },
                { X, "{\"argv\": [\"true\"], \"npu\": {}}", BAD, "npu" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": [0], \"x\": 1}}", BAD, "npu" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": 0}}", BAD, "npu" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": []}}", BAD, "npu.chips", "1 to 64" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": [1, 1]}}", BAD, "npu.chips", "twice" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": [-1]}}", BAD, "npu.chips" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": [65536]}}", BAD, "npu.chips" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": [\"0\"]}}", BAD, "npu.chips" },
                { X, "{\"argv\": [\"true\"], \"npu\": {\"chips\": [1.5]}}", BAD, "npu.chips" },
                { S, "{\"command\": \"true\", \"npu\": {\"chips\": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,"
                     "20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,"
                     "53,54,55,56,57,58,59,60,61,62,63,64]}}", BAD, "npu.chips", "1 to 64" },
                { X, "{\"argv\": [\"true\"], \"devices\": \"a.com/b=c\"}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": []}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [1]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"gpu0\"]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"a.com/b\"]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"a.com/b=\"]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"/b=c\"]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"a.com/=c\"]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"a.com/b=c d\"]}", BAD, "devices" },
                { X, "{\"argv\": [\"true\"], \"devices\": [\"a.com/b=c\", \"a.com/b=c\"]}", BAD, "devices", "twice" },
        };

        check_refusals("devices", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_cwd(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"../x\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"..\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a/../b\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a/..\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"/workspace/../x\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"/workspace/..\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"/../etc\"}", BAD, "cwd" },
                /* "." components, "./" included, are refused (whatever the comment in the code says). */
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \".\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"./\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"./a\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a/./b\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"/workspace/.\"}", BAD, "cwd" },
                /* Empty components, trailing slashes, backslashes, control characters. */
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a//b\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a/\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"/workspace/a/\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a\\\\b\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a\\nb\"}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"\\u007f\"}", BAD, "cwd" },
                /* Not a string. */
                { X, "{\"argv\": [\"pwd\"], \"cwd\": 5}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": true}", BAD, "cwd" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": [\"a\"]}", BAD, "cwd" },
                { S, "{\"command\": \"pwd\", \"cwd\": \"../x\"}", BAD, "cwd" },
        };

        check_refusals("cwd", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_timeout(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 0}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": -0}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": -1}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": -30000}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": -9223372036854775808}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 1.5}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 1000.0}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 1e3}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": \"30000\"}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": true}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": [1]}", BAD, "timeoutMs" },
                /* Past what fits in microseconds: refused rather than wrapped. */
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 18446744073709552}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 9223372036854775807}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 18446744073709551615}", BAD, "timeoutMs" },
                { X, "{\"argv\": [\"true\"], \"timeoutMs\": 99999999999999999999999}", BAD, "timeoutMs" },
                { S, "{\"command\": \"true\", \"timeoutMs\": 0}", BAD, "timeoutMs" },
        };

        check_refusals("timeoutMs", cases, ELEMENTS(cases), &maxima);
}

static void test_refuse_limits(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"true\"], \"limits\": \"big\"}", BAD, "limits" },
                { X, "{\"argv\": [\"true\"], \"limits\": [1]}", BAD, "limits" },
                { X, "{\"argv\": [\"true\"], \"limits\": 5}", BAD, "limits" },
                /* Unknown keys, checked before the values. */
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memory\": 1}}", BAD, "limits.memory" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": 1048576, \"pids\": 5}}", BAD, "limits.pids" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"tasks\": 0, \"cpu\": 5}}", BAD, "limits.cpu" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"timeoutMs\": 5}}", BAD, "limits.timeoutMs" },
                /* memoryBytes: at least 1 MiB, an integer. */
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": 1048575}}", BAD, "memoryBytes" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": 1}}", BAD, "memoryBytes" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": 0}}", BAD, "memoryBytes" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": -1}}", BAD, "memoryBytes" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": \"1G\"}}", BAD, "memoryBytes" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": 1048576.5}}", BAD, "memoryBytes" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"memoryBytes\": 99999999999999999999}}", BAD, "memoryBytes" },
                /* tasks: 1 to 1000000. */
                { X, "{\"argv\": [\"true\"], \"limits\": {\"tasks\": 0}}", BAD, "tasks" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"tasks\": -1}}", BAD, "tasks" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"tasks\": 1000001}}", BAD, "tasks" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"tasks\": 2.5}}", BAD, "tasks" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"tasks\": \"8\"}}", BAD, "tasks" },
                /* cpuPercent: 1 to 100000. */
                { X, "{\"argv\": [\"true\"], \"limits\": {\"cpuPercent\": 0}}", BAD, "cpuPercent" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"cpuPercent\": -5}}", BAD, "cpuPercent" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"cpuPercent\": 100001}}", BAD, "cpuPercent" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"cpuPercent\": 4294967396}}", BAD, "cpuPercent" },
                { X, "{\"argv\": [\"true\"], \"limits\": {\"cpuPercent\": 50.5}}", BAD, "cpuPercent" },
                { S, "{\"command\": \"true\", \"limits\": {\"cpuPercent\": 0}}", BAD, "cpuPercent" },
        };

        check_refusals("limits", cases, ELEMENTS(cases), &maxima);
        /* The same without caps: the bounds are the request's own, not the maxima's. */
        check_refusals("limits (no caps)", cases, ELEMENTS(cases), &no_caps);
}

/* An embedded NUL in a string that becomes a C string must be refused, like in 'command', not cut
 * off: get_string() takes a nul_ok argument for this, but does not look at it. The NUL-safe ones
 * (code, stdin) are kept whole (test_payloads, test_stdin). */
static void test_refuse_embedded_nul(void **state) {
        static const Refusal cases[] = {
                { X, "{\"argv\": [\"true\"], \"workspaceId\": \"ok\\u0000../../etc\"}", BAD, "workspaceId" },
                { X, "{\"argv\": [\"true\"], \"executionId\": \"ok\\u0000/x\"}", BAD, "executionId" },
                { X, "{\"argv\": [\"pwd\"], \"cwd\": \"a\\u0000/../../etc\"}", BAD, "cwd" },
                { X, "{\"language\": \"python\\u0000ruby\", \"code\": \"1\"}", BAD, "language" },
                { X, "{\"argv\": [\"true\"], \"kernelMode\": \"ephemeral\\u0000x\"}", BAD, "kernelMode" },
                { X, "{\"argv\": [\"rm\\u0000-rf\"]}", BAD, "argv[0]" },
                { X, "{\"argv\": [\"ls\", \"-l\\u0000a\"]}", BAD, "argv[1]" },
                { X, "{\"argv\": [\"env\"], \"env\": {\"A\": \"x\\u0000y\"}}", BAD, "env.A" },
        };

        check_refusals("embedded NUL", cases, ELEMENTS(cases), &maxima);
}

#undef X
#undef S
#undef BAD
#undef PERSISTENT

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_payloads),
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_ids),
                cmocka_unit_test(test_stdin),
                cmocka_unit_test(test_env),
                cmocka_unit_test(test_cwd),
                cmocka_unit_test(test_timeout),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_refuse_shape),
                cmocka_unit_test(test_refuse_kernel_mode),
                cmocka_unit_test(test_refuse_ids),
                cmocka_unit_test(test_refuse_payload),
                cmocka_unit_test(test_refuse_sizes),
                cmocka_unit_test(test_refuse_env),
                cmocka_unit_test(test_refuse_cwd),
                cmocka_unit_test(test_devices),
                cmocka_unit_test(test_refuse_devices),
                cmocka_unit_test(test_refuse_timeout),
                cmocka_unit_test(test_refuse_limits),
                cmocka_unit_test(test_refuse_embedded_nul),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
