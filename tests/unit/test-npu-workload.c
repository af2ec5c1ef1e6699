/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/npu/npu-workload.h, table-driven: the allowlist's strict parsing (unknown
 * fields, ids, placeholders, limits), loading, the GET /npu/workloads listing, and the expansion
 * of a workload against a real tree under /tmp: a repository with a symlink out of it, a
 * workspace with symlinks in and out, hard links, a directory, a dangling symlink, a resource
 * root, and configs whose path fields point everywhere.
 */

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "npu/npu-workload.h"
#include "test-dir.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"

/* A workload with id "w" and the fields @extra (argv, ...) after chips and timeoutSec. */
#define WL(extra) "{\"workloads\":[{\"id\":\"w\",\"description\":\"d\",\"chips\":1,\"timeoutSec\":1" extra "}]}"
/* A workload with id "x" and argv ["/bin/x"] and the fields @f (chips, timeoutSec, ...). */
#define WN(f) "{\"workloads\":[{\"id\":\"x\",\"description\":\"d\",\"argv\":[\"/bin/x\"]," f "}]}"
/* A workload with valid fields but the id, and then @f (the id field, or nothing). */
#define WID(f) "{\"workloads\":[{\"description\":\"d\",\"argv\":[\"/bin/x\"],\"chips\":1,\"timeoutSec\":1" f "}]}"
/* A workload with id "x" and the description field @f (or none). */
#define WD(f) "{\"workloads\":[{\"id\":\"x\"" f ",\"argv\":[\"/bin/x\"],\"chips\":1,\"timeoutSec\":1}]}"
#define ARGV_OK ",\"argv\":[\"${repo:bin/run}\",\"--config\",\"${input:configPath}\"]"

/* ---- parsing ------------------------------------------------------------------------------------ */

static void test_id_valid(void **state) {
        static const struct {
                const char *id;
                bool ok;
        } cases[] = {
                { "fold-protein", true }, { "a", true }, { "0", true }, { "a.b_c-d", true },
                { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true },   /* 64 */
                { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },  /* 65 */
                { "", false }, { "Fold", false }, { "-fold", false }, { ".fold", false }, { "_fold", false },
                { "fold protein", false }, { "fold/protein", false }, { "fold\n", false },
                { "f\xc3\xa9", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (npu_workload_id_valid(cases[i].id) != cases[i].ok)
                        fail_msg("'%s': expected %s", cases[i].id, cases[i].ok ? "valid" : "invalid");
        assert_false(npu_workload_id_valid(NULL));
}

static void test_parse_good(void **state) {
        static const char text[] =
                "{\"workloads\": [\n"
                "  {\"id\": \"fold-protein\", \"description\": \"Structure prediction on one chip\",\n"
                "   \"argv\": [\"${repo:venv/bin/python}\", \"${repo:tools/fold.py}\", \"--config\",\n"
                "            \"${input:configPath}\",\n"
                "            \"--weights=${repo:weights}\", \"--price=$5\", \"{}\", \"$\"],\n"
                "   \"chips\": 1, \"timeoutSec\": 3600,\n"
                "   \"configPathFields\": [\"workspace\", \"run_dir\", \"target_pdb\", \"inputs.msa_dir\"],\n"
                "   \"resourceRoots\": [\"/srv/models/fold-weights\"],\n"
                "   \"env\": {\"OMP_NUM_THREADS\": \"8\", \"ASCEND_RT_VISIBLE_DEVICES\": \"0\"}},\n"
                "  {\"id\": \"bench\", \"description\": \"Matmul benchmark\",\n"
                "   \"argv\": [\"/usr/local/bin/bench\", \"-n\", \"3\"],\n"
                "   \"chips\": 16, \"timeoutSec\": 604800}\n"
                "]}\n";
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = NULL;
        _cleanup_free_ char *why = NULL;
        const NpuWorkload *f, *b;

        assert_int_equal(npu_workloads_parse(text, strlen(text), &w, &why), 0);
        assert_null(why);
        assert_int_equal(w->n, 2);
        f = npu_workloads_find(w, "fold-protein");
        assert_non_null(f);
        assert_string_equal(f->description, "Structure prediction on one chip");
        assert_int_equal(f->n_argv, 8);
        assert_int_equal(f->argv[0].kind, NPU_ARG_REPO);
        assert_string_equal(f->argv[0].text, "");
        assert_string_equal(f->argv[0].rel, "venv/bin/python");
        assert_int_equal(f->argv[2].kind, NPU_ARG_LITERAL);
        assert_string_equal(f->argv[2].text, "--config");
        assert_int_equal(f->argv[3].kind, NPU_ARG_CONFIG_PATH);
        assert_int_equal(f->argv[4].kind, NPU_ARG_REPO);
        assert_string_equal(f->argv[4].text, "--weights=");
        assert_string_equal(f->argv[4].rel, "weights");
        assert_int_equal(f->argv[5].kind, NPU_ARG_LITERAL);       /* '$' without '{' is a literal */
        assert_int_equal(f->argv[7].kind, NPU_ARG_LITERAL);
        assert_true(f->takes_config);
        assert_int_equal(f->chips, 1);
        assert_true(f->timeout_usec == 3600 * USEC_PER_SEC);
        assert_string_equal(f->config_fields[3], "inputs.msa_dir");
        assert_null(f->config_fields[4]);
        assert_string_equal(f->resource_roots[0], "/srv/models/fold-weights");
        /* sorted */
        assert_string_equal(f->env[0], "ASCEND_RT_VISIBLE_DEVICES=0");
        assert_string_equal(f->env[1], "OMP_NUM_THREADS=8");
        assert_null(f->env[2]);

        b = npu_workloads_find(w, "bench");
        assert_non_null(b);
        assert_false(b->takes_config);
        assert_int_equal(b->argv[0].kind, NPU_ARG_LITERAL);
        assert_null(b->config_fields);
        assert_null(b->env);
        assert_int_equal(b->chips, 16);
        assert_true(!npu_workloads_find(w, "fold") && !npu_workloads_find(w, NULL) && !npu_workloads_find(NULL, "bench"));
}

static void test_parse_bad(void **state) {
        static const struct {
                const char *text;
                const char *why;        /* a part of the reason */
        } cases[] = {
                /* the document */
                { "", "empty" },
                { "[]", "must be a JSON object" },
                { "{\"workloads\": []} x", "the allowlist: invalid JSON" },    /* json-c's strict mode: trailing data */
                { "{\"workloads\": []", "incomplete" },
                { "{'workloads': []}", "must use double quotes" },
                { "{\"workloads\": [], \"x\n\": 1}", "raw control characters" },
                { "{\"workloads\": {}}", "must be an array" },
                { "{}", "must be an array" },
                { "{\"workloads\": [], \"version\": 1}", "unknown field 'version'" },
                { "{\"workloads\": [1]}", "must be an object" },
                /* fields */
                { WL(ARGV_OK ",\"shell\":true"), "unknown field 'shell'" },
                { WL(ARGV_OK ",\"ID\":\"x\""), "unknown field 'ID'" },
                { WID(""), "id is required" },
                { WID(",\"id\":\"Bad\""), "id must match" },
                { WID(",\"id\":\"-x\""), "id must match" },
                { WID(",\"id\":\"a\\u0000b\""), "id must match" },
                { WID(",\"id\":7"), "id must match" },
                { "{\"workloads\":["
                  "{\"id\":\"x\",\"description\":\"d\",\"argv\":[\"/bin/x\"],\"chips\":1,\"timeoutSec\":1},"
                  "{\"id\":\"x\",\"description\":\"e\","
                  "\"argv\":[\"/bin/y\"],\"chips\":1,\"timeoutSec\":1}]}", "used twice" },
                { WD(""), "description is required" },
                { WD(",\"description\":\"\""), "description must be" },
                { WD(",\"description\":\"a\\nb\""), "description must be" },
                { WL(""), "argv is required" },
                { WL(",\"argv\":[]"), "argv must have 1 to 256" },
                { WL(",\"argv\":\"/bin/x\""), "argv must be an array" },
                { WL(",\"argv\":[\"/bin/x\", 1]"), "argv[1]: must be a string" },
                { WL(",\"argv\":[\"/bin/x\", \"a\\tb\"]"), "argv[1]: must be a string" },
                /* argv[0] */
                { WL(",\"argv\":[\"python\"]"), "argv[0]: must be ${repo:...} or an absolute" },
                { WL(",\"argv\":[\"./run\"]"), "argv[0]: must be" },
                { WL(",\"argv\":[\"/usr/../bin/sh\"]"), "argv[0]: must be" },
                { WL(",\"argv\":[\"/usr//bin/x\"]"), "argv[0]: must be" },
                { WL(",\"argv\":[\"/\"]"), "argv[0]: must be" },
                { WL(",\"argv\":[\"${input:configPath}\"]"), "argv[0]: must be" },
                { WL(",\"argv\":[\"x${repo:bin/run}\"]"), "argv[0]: must be" },
                /* placeholders */
                { WL(",\"argv\":[\"/bin/x\",\"${input:other}\"]"), "argv[1]: unknown placeholder" },
                { WL(",\"argv\":[\"/bin/x\",\"${HOME}\"]"), "argv[1]: unknown placeholder" },
                { WL(",\"argv\":[\"/bin/x\",\"--x=${input:configPath}.bak\"]"), "argv[1]: unknown placeholder" },
                { WL(",\"argv\":[\"/bin/x\",\"${input:configPath}${input:configPath}\"]"), "argv[1]: unknown placeholder" },
                { WL(",\"argv\":[\"/bin/x\",\"${repo:a}${repo:b}\"]"), "argv[1]: a placeholder must end its word" },
                { WL(",\"argv\":[\"/bin/x\",\"${repo:a}/b\"]"), "argv[1]: a placeholder must end" },
                { WL(",\"argv\":[\"/bin/x\",\"${repo:a\"]"), "argv[1]: a placeholder must end" },
                { WL(",\"argv\":[\"${repo:../bin/x}\"]"), "argv[0]: ${repo:REL} needs" },
                { WL(",\"argv\":[\"${repo:/bin/x}\"]"), "argv[0]: ${repo:REL} needs" },
                { WL(",\"argv\":[\"${repo:}\"]"), "argv[0]: ${repo:REL} needs" },
                { WL(",\"argv\":[\"${repo:a//b}\"]"), "argv[0]: ${repo:REL} needs" },
                { WL(",\"argv\":[\"${repo:a/./b}\"]"), "argv[0]: ${repo:REL} needs" },
                { WL(",\"argv\":[\"${repo:a/}\"]"), "argv[0]: ${repo:REL} needs" },
                { WL(",\"argv\":[\"${repo:a/${repo:b}\"]"), "argv[0]: ${repo:REL} needs" },
                /* numbers */
                { WN("\"chips\":0,\"timeoutSec\":1"), "chips must be 1 to 16" },
                { WN("\"chips\":17,\"timeoutSec\":1"), "chips must be 1 to 16" },
                { WN("\"chips\":1.0,\"timeoutSec\":1"), "chips must be an integer" },
                { WN("\"chips\":\"1\",\"timeoutSec\":1"), "chips must be an integer" },
                { WN("\"timeoutSec\":1"), "chips is required" },
                { WN("\"chips\":1,\"timeoutSec\":0"), "timeoutSec must be 1 to 604800" },
                { WN("\"chips\":1,\"timeoutSec\":604801"), "timeoutSec must be 1 to 604800" },
                { WN("\"chips\":1,\"timeoutSec\":-1"), "timeoutSec must be 1 to 604800" },
                { WN("\"chips\":1"), "timeoutSec is required" },
                /* configPathFields, resourceRoots, env */
                { WL(",\"argv\":[\"/bin/x\"],\"configPathFields\":[\"run_dir\"]"),
                  "configPathFields without ${input:configPath}" },
                { WL(ARGV_OK ",\"configPathFields\":[\"a..b\"]"), "configPathFields[0]: a dotted path" },
                { WL(ARGV_OK ",\"configPathFields\":[\"a.\"]"), "configPathFields[0]" },
                { WL(ARGV_OK ",\"configPathFields\":[\".a\"]"), "configPathFields[0]" },
                { WL(ARGV_OK ",\"configPathFields\":[\"a b\"]"), "configPathFields[0]" },
                { WL(ARGV_OK ",\"configPathFields\":[\"a.b.c.d.e.f.g.h.i\"]"), "configPathFields[0]" },
                { WL(ARGV_OK ",\"configPathFields\":[\"x\",\"x\"]"), "configPathFields[1]: 'x' is listed twice" },
                { WL(ARGV_OK ",\"configPathFields\":\"x\""), "configPathFields must be an array" },
                { WL(ARGV_OK ",\"resourceRoots\":[\"srv/models\"]"), "resourceRoots[0]: an absolute" },
                { WL(ARGV_OK ",\"resourceRoots\":[\"/\"]"), "resourceRoots[0]: an absolute" },
                { WL(ARGV_OK ",\"resourceRoots\":[\"/srv/../etc\"]"), "resourceRoots[0]" },
                { WL(ARGV_OK ",\"resourceRoots\":[\"/srv/\"]"), "resourceRoots[0]" },
                { WL(ARGV_OK ",\"env\":{\"LD_PRELOAD\":\"/x.so\"}"), "env: a name must match" },
                { WL(ARGV_OK ",\"env\":{\"PATH\":\"/x\"}"), "env: a name must match" },
                { WL(ARGV_OK ",\"env\":{\"1X\":\"1\"}"), "env: a name must match" },
                { WL(ARGV_OK ",\"env\":{\"X\":1}"), "env: X: a string" },
                { WL(ARGV_OK ",\"env\":{\"X\":\"${repo:a}\"}"), "env: X: a string" },
                { WL(ARGV_OK ",\"env\":[\"X=1\"]"), "env must be an object" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(npu_workloads_freep) NpuWorkloads *w = NULL;
                _cleanup_free_ char *why = NULL;
                int r = npu_workloads_parse(cases[i].text, strlen(cases[i].text), &w, &why);

                if (r != -EBADMSG || !why || !strstr(why, cases[i].why))
                        fail_msg("case %zu: %s\n  -> %d '%s', expected a reason with '%s'", i, cases[i].text, r,
                                 why ?: "(none)", cases[i].why);
                assert_null(w);
        }
}

/* The counted limits: 256 argv words pass and 257 fail; a word of 4096 bytes passes, 4097 fails. */
static void test_parse_limits(void **state) {
        _cleanup_free_ char *text = NULL;
        char *why = NULL;
        NpuWorkloads *w = NULL;
        size_t n;

        for (size_t words = 256; words <= 257; words++) {
                text = mfree(text);
                n = 0;
                text = malloc(64 + words * 5 + 128);
                if (!text)
                        abort();   /* (not assert_non_null(): gcc's -Wformat-overflow does not know it stops) */
                n += (size_t) sprintf(text + n, "{\"workloads\":[{\"id\":\"x\",\"description\":\"d\",\"argv\":[\"/bin/x\"");
                for (size_t i = 1; i < words; i++)
                        n += (size_t) sprintf(text + n, ",\"a\"");
                (void) sprintf(text + n, "],\"chips\":1,\"timeoutSec\":1}]}");
                assert_int_equal(npu_workloads_parse(text, strlen(text), &w, &why), words == 256 ? 0 : -EBADMSG);
                if (words == 257)
                        assert_non_null(strstr(why, "argv must have 1 to 256"));
                w = npu_workloads_free(w);
                why = mfree(why);
        }
        for (size_t len = 4096; len <= 4097; len++) {
                text = mfree(text);
                text = malloc(len + 128);
                assert_non_null(text);
                n = (size_t) sprintf(text, "{\"workloads\":[{\"id\":\"x\",\"description\":\"d\",\"argv\":[\"/bin/x\",\"");
                memset(text + n, 'a', len);
                (void) sprintf(text + n + len, "\"],\"chips\":1,\"timeoutSec\":1}]}");
                assert_int_equal(npu_workloads_parse(text, strlen(text), &w, &why), len == 4096 ? 0 : -EBADMSG);
                w = npu_workloads_free(w);
                why = mfree(why);
        }
        /* 257 workloads */
        text = mfree(text);
        text = malloc(257 * 96 + 64);
        assert_non_null(text);
        n = (size_t) sprintf(text, "{\"workloads\":[");
        for (size_t i = 0; i < 257; i++)
                n += (size_t) sprintf(text + n, "%s{\"id\":\"w%zu\",\"description\":\"d\","
                                      "\"argv\":[\"/bin/x\"],\"chips\":1,\"timeoutSec\":1}",
                                      i ? "," : "", i);
        (void) sprintf(text + n, "]}");
        assert_int_equal(npu_workloads_parse(text, strlen(text), &w, &why), -EBADMSG);
        assert_non_null(strstr(why, "more than 256 workloads"));
        why = mfree(why);
        /* more than 1 MiB, whatever it holds */
        assert_int_equal(npu_workloads_parse(text, NPU_WORKLOADS_MAX_BYTES + 1, &w, NULL), -EBADMSG);
        /* an empty list is a valid allowlist (the broker offers nothing) */
        assert_int_equal(npu_workloads_parse("{\"workloads\":[]}", 16, &w, &why), 0);
        assert_int_equal(w->n, 0);
        w = npu_workloads_free(w);
}

static void test_to_json(void **state) {
        static const char text[] =
                "{\"workloads\":["
                "{\"id\":\"fold\",\"description\":\"Fold \\\"it\\\"\","
                "\"argv\":[\"${repo:bin/run}\",\"${input:configPath}\"],"
                "\"chips\":2,\"timeoutSec\":60,\"resourceRoots\":[\"/srv/secret/path\"],\"env\":{\"X\":\"1\"}},"
                "{\"id\":\"bench\",\"description\":\"B\","
                "\"argv\":[\"/opt/bench/bin/bench\"],\"chips\":1,\"timeoutSec\":5}]}";
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *s;

        assert_int_equal(npu_workloads_parse(text, strlen(text), &w, NULL), 0);
        o = npu_workloads_to_json(w);
        assert_non_null(o);
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        assert_string_equal(s,
                "[{\"id\":\"fold\",\"description\":\"Fold \\\"it\\\"\","
                "\"chips\":2,\"timeoutSec\":60,\"inputs\":[\"configPath\"]},"
                "{\"id\":\"bench\",\"description\":\"B\",\"chips\":1,\"timeoutSec\":5,\"inputs\":[]}]");
        /* no host path leaks */
        assert_null(strstr(s, "/srv"));
        assert_null(strstr(s, "/opt"));
        json_object_put(o);
        o = npu_workloads_to_json(NULL);
        assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), "[]");
}

/* ---- the tree ----------------------------------------------------------------------------------- */

static char *at(const TestDir *d, const char *rel) {
        char *p;

        assert_true(asprintf(&p, "%s/%s", d->path, rel) > 0);
        return p;
}

static void put(const TestDir *d, const char *rel, const char *content) {
        _cleanup_free_ char *p = at(d, rel);
        FILE *f = fopen(p, "we");

        assert_non_null(f);
        assert_int_equal(fputs(content, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

static void mkdir_p(const TestDir *d, const char *rel) {
        _cleanup_free_ char *p = at(d, rel);

        assert_int_equal(mkdir(p, 0755), 0);
}

static void symlink_at(const TestDir *d, const char *target, const char *rel) {
        _cleanup_free_ char *p = at(d, rel);
        _cleanup_free_ char *t = target[0] == '@' ? at(d, target + 1) : strdup(target);

        assert_int_equal(symlink(t, p), 0);
}

/*
 * repo/ venv/bin/python tools/fold.py escape -> /etc
 * ws/   cfg.json sub/cfg.json link-cfg -> cfg.json passwd-link -> /etc/passwd adir/ data/
 *       out-link -> ../outside dangling -> ../outside/nothing res-link -> ../res/weights hl.json
 * outside/ secret.json hl.json (a hard link of ws/hl.json)
 * res/weights/model.bin
 */
static int setup_tree(void **state) {
        static const char *const dirs[] = {
                "repo", "repo/venv", "repo/venv/bin", "repo/tools", "ws", "ws/sub", "ws/adir", "ws/data",
                "outside", "res", "res/weights", NULL,
        };
        TestDir *d;
        _cleanup_free_ char *a = NULL, *b = NULL;

        (void) test_dir_setup(state);
        d = *state;
        STRV_FOREACH(dir, (char **) dirs)
                mkdir_p(d, *dir);
        put(d, "repo/venv/bin/python", "#!/bin/true\n");
        put(d, "repo/tools/fold.py", "print()\n");
        symlink_at(d, "/etc", "repo/escape");
        put(d, "ws/cfg.json", "{}");
        put(d, "ws/sub/cfg.json", "{\"workspace\": \"..\"}");
        symlink_at(d, "cfg.json", "ws/link-cfg");
        symlink_at(d, "/etc/passwd", "ws/passwd-link");
        put(d, "outside/secret.json", "{}");
        symlink_at(d, "@outside", "ws/out-link");
        symlink_at(d, "@outside/nothing", "ws/dangling");
        put(d, "res/weights/model.bin", "w");
        symlink_at(d, "@res/weights", "ws/res-link");
        put(d, "ws/hl.json", "{}");
        a = at(d, "ws/hl.json");
        b = at(d, "outside/hl.json");
        assert_int_equal(link(a, b), 0);
        return 0;
}

/* The test's allowlist: resourceRoots name the tree, so "{B}" is replaced by its path. */
static NpuWorkloads *tree_workloads(const TestDir *d) {
        static const char tmpl[] =
                "{\"workloads\":["
                "{\"id\":\"fold\",\"description\":\"Fold\","
                "\"argv\":[\"${repo:venv/bin/python}\",\"${repo:tools/fold.py}\",\"--config\",\"${input:configPath}\","
                "\"--tools=${repo:tools}\"],"
                "\"chips\":2,\"timeoutSec\":3600,"
                "\"configPathFields\":[\"workspace\",\"run_dir\",\"target_pdb\",\"inputs.msa_dir\"],"
                "\"resourceRoots\":[\"{B}/res/weights\",\"{B}/res/missing\"],"
                "\"env\":{\"OMP_NUM_THREADS\":\"8\"}},"
                "{\"id\":\"plain\",\"description\":\"No config\","
                "\"argv\":[\"/usr/bin/true\",\"x\"],\"chips\":1,\"timeoutSec\":1},"
                "{\"id\":\"escape\",\"description\":\"Escape\","
                "\"argv\":[\"${repo:escape/passwd}\"],\"chips\":1,\"timeoutSec\":1},"
                "{\"id\":\"gone\",\"description\":\"Missing\","
                "\"argv\":[\"${repo:nothing/here}\"],\"chips\":1,\"timeoutSec\":1},"
                "{\"id\":\"eq\",\"description\":\"Prefix\","
                "\"argv\":[\"${repo:venv/bin/python}\",\"--config=${input:configPath}\"],"
                "\"chips\":1,\"timeoutSec\":1}"
                "]}";
        NpuWorkloads *w = NULL;
        char *text = malloc(sizeof(tmpl) + 2 * strlen(d->path)), *o = text, *why = NULL;

        assert_non_null(text);
        for (const char *p = tmpl; *p;)
                if (strneq(p, "{B}", 3)) {
                        o = stpcpy(o, d->path);
                        p += 3;
                } else
                        *o++ = *p++;
        *o = '\0';
        if (npu_workloads_parse(text, strlen(text), &w, &why) < 0)
                fail_msg("%s", why);
        free(text);
        return w;
}

static json_object *inputs_of(const char *config_path) {
        json_object *o = json_object_new_object();

        assert_non_null(o);
        if (config_path)
                assert_int_equal(json_object_object_add(o, "configPath", json_object_new_string(config_path)), 0);
        return o;
}

/* @got is @prefix, @real and @suffix, one after the other. */
static void assert_prefixed(const char *got, const char *prefix, const char *real, const char *suffix) {
        _cleanup_free_ char *expect = NULL;

        assert_true(asprintf(&expect, "%s%s%s", prefix, real, suffix) > 0);
        assert_string_equal(got, expect);
}

/* ---- expansion ------------------------------------------------------------------------------------ */

static void test_expand_good(void **state) {
        const TestDir *d = *state;
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = tree_workloads(d);
        _cleanup_(json_object_putp) json_object *in = inputs_of("cfg.json");
        _cleanup_(npu_job_plan_done) NpuJobPlan p = {};
        _cleanup_free_ char *repo = at(d, "repo"), *ws = at(d, "ws"), *why = NULL, *real = NULL, *expect = NULL;

        real = realpath(d->path, NULL);
        assert_non_null(real);
        put(d, "ws/cfg.json",
            "{\"workspace\": \".\", \"run_dir\": \"runs/new/out\", \"target_pdb\": \"data\","
            " \"inputs\": {\"msa_dir\": \"res-link/model.bin\", \"other\": \"/etc\"}, \"n\": 3}");
        assert_int_equal(npu_workload_expand(npu_workloads_find(w, "fold"), repo, ws, in, &p, &why), 0);
        assert_null(why);

        assert_prefixed(p.argv[0], "", real, "/repo/venv/bin/python");
        assert_prefixed(p.argv[1], "", real, "/repo/tools/fold.py");
        assert_string_equal(p.argv[2], "--config");
        assert_prefixed(p.argv[3], "", real, "/ws/cfg.json");
        assert_prefixed(p.config_path, "", real, "/ws/cfg.json");
        assert_prefixed(p.argv[4], "--tools=", real, "/repo/tools");
        assert_null(p.argv[5]);
        assert_prefixed(p.cwd, "", real, "/ws");
        assert_string_equal(p.env[0], "OMP_NUM_THREADS=8");
        assert_null(p.env[1]);
        assert_int_equal(p.chips, 2);
        assert_true(p.timeout_usec == 3600 * USEC_PER_SEC);
        assert_int_equal(p.n_config_args, 1);
        assert_int_equal(p.config_args[0], 3);

        /* the copy: every declared path field resolved, the rest as it was */
        assert_true(asprintf(&expect,
                             "{\"workspace\":\"%1$s/ws\",\"run_dir\":\"%1$s/ws/runs/new/out\","
                             "\"target_pdb\":\"%1$s/ws/data\","
                             "\"inputs\":{\"msa_dir\":\"%1$s/res/weights/model.bin\","
                             "\"other\":\"/etc\"},\"n\":3}", real) > 0);
        assert_string_equal(p.config_json, expect);
        assert_int_equal(p.config_json_size, strlen(expect));
        expect = mfree(expect);

        assert_int_equal(npu_job_plan_use_config_copy(&p, "relative/config.json"), -EINVAL);
        assert_int_equal(npu_job_plan_use_config_copy(&p, "/run/npu/job-1/config.json"), 0);
        assert_string_equal(p.argv[3], "/run/npu/job-1/config.json");
        assert_string_equal(p.argv[2], "--config");
}

/* A prefix placeholder, a workload without inputs, and a symlink to a config inside the workspace. */
static void test_expand_forms(void **state) {
        const TestDir *d = *state;
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = tree_workloads(d);
        _cleanup_(json_object_putp) json_object *in = inputs_of("link-cfg"), *sub = inputs_of("sub/cfg.json");
        _cleanup_(npu_job_plan_done) NpuJobPlan p = {};
        _cleanup_free_ char *repo = at(d, "repo"), *ws = at(d, "ws"), *real = realpath(d->path, NULL);

        put(d, "ws/cfg.json", "{}");
        assert_int_equal(npu_workload_expand(npu_workloads_find(w, "eq"), repo, ws, in, &p, NULL), 0);
        assert_prefixed(p.argv[1], "--config=", real, "/ws/cfg.json");
        assert_int_equal(npu_job_plan_use_config_copy(&p, "/job/c.json"), 0);
        assert_string_equal(p.argv[1], "--config=/job/c.json");
        assert_string_equal(p.config_json, "{}");
        npu_job_plan_done(&p);

        assert_int_equal(npu_workload_expand(npu_workloads_find(w, "plain"), repo, ws, NULL, &p, NULL), 0);
        assert_string_equal(p.argv[0], "/usr/bin/true");
        assert_string_equal(p.argv[1], "x");
        assert_null(p.config_path);
        assert_null(p.config_json);
        assert_null(p.env);
        assert_int_equal(npu_job_plan_use_config_copy(&p, "/job/c.json"), -EINVAL);
        npu_job_plan_done(&p);

        /* "workspace": ".." from ws/sub/cfg.json is relative to the workspace, not to the config */
        assert_int_equal(npu_workload_expand(npu_workloads_find(w, "fold"), repo, ws, sub, &p, NULL), -EPERM);
}

static void test_expand_config_path(void **state) {
        static const struct {
                const char *path;
                int r;
                const char *why;
        } cases[] = {
                { "cfg.json", 0, NULL },
                { "./cfg.json", 0, NULL },
                { "sub//../cfg.json", -EPERM, "configPath: may not hold a \"..\" component" },
                { "../ws/cfg.json", -EPERM, "configPath: may not hold a \"..\"" },
                { "sub/..", -EPERM, "configPath: may not hold a \"..\"" },
                { "/etc/passwd", -EPERM, "configPath: must be relative" },
                { "passwd-link", -EPERM, "configPath: resolves outside the session's workspace" },
                { "out-link/secret.json", -EPERM, "configPath: resolves outside the session's workspace" },
                { "link-cfg", 0, NULL },
                { "adir", -EPERM, "configPath: not a regular file" },
                { ".", -EPERM, "configPath: not a regular file" },
                { "missing.json", -ENOENT, "configPath: no such file" },
                { "cfg.json/x", -ENOENT, "configPath: no such file" },
                { "dangling", -ENOENT, "configPath: no such file" },
                { "hl.json", -EPERM, "configPath: has more than one hard link" },
                { "", -EBADMSG, "configPath: must be 1 to 4096 bytes" },
                { "a\nb", -EBADMSG, "configPath: must be 1 to 4096 bytes" },
        };
        const TestDir *d = *state;
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = tree_workloads(d);
        _cleanup_free_ char *repo = at(d, "repo"), *ws = at(d, "ws");
        const NpuWorkload *fold = npu_workloads_find(w, "fold");

        put(d, "ws/cfg.json", "{\"workspace\": \".\"}");
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(json_object_putp) json_object *in = inputs_of(cases[i].path);
                _cleanup_(npu_job_plan_done) NpuJobPlan p = {};
                _cleanup_free_ char *why = NULL;
                int r = npu_workload_expand(fold, repo, ws, in, &p, &why);

                if (r != cases[i].r || (cases[i].why && (!why || !strstr(why, cases[i].why))))
                        fail_msg("'%s': %d '%s', expected %d '%s'", cases[i].path, r, why ?: "(none)", cases[i].r,
                                 cases[i].why ?: "");
                if (r < 0)
                        assert_null(p.argv);
        }
}

static void test_expand_inputs(void **state) {
        static const struct {
                const char *workload;
                const char *inputs;     /* JSON, or NULL for no inputs at all */
                int r;
                const char *why;
        } cases[] = {
                { "fold", "{\"configPath\":\"cfg.json\",\"weights\":\"x\"}", -EBADMSG, "inputs: unknown input" },
                { "fold", "{\"config\":\"cfg.json\"}", -EBADMSG, "inputs: unknown input" },
                { "fold", "{}", -EBADMSG, "inputs.configPath is required" },
                { "fold", NULL, -EBADMSG, "inputs.configPath is required" },
                { "fold", "{\"configPath\":1}", -EBADMSG, "configPath: must be a string" },
                { "fold", "{\"configPath\":null}", -EBADMSG, "configPath: must be a string" },
                { "fold", "{\"configPath\":\"a\\u0000b\"}", -EBADMSG, "configPath: must be 1 to 4096" },
                { "fold", "[\"cfg.json\"]", -EBADMSG, "inputs: must be an object" },
                { "plain", "{\"configPath\":\"cfg.json\"}", -EBADMSG, "takes no config" },
                { "plain", "{}", 0, NULL },
                { "plain", NULL, 0, NULL },
                { "escape", NULL, -EPERM, "argv[0]: ${repo:escape/passwd} resolves outside the repository" },
                { "gone", NULL, -ENOENT, "argv[0]: ${repo:nothing/here} does not exist" },
        };
        const TestDir *d = *state;
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = tree_workloads(d);
        _cleanup_free_ char *repo = at(d, "repo"), *ws = at(d, "ws"), *nows = at(d, "nothing");

        put(d, "ws/cfg.json", "{}");
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(json_object_putp) json_object *in = cases[i].inputs ? json_tokener_parse(cases[i].inputs) : NULL;
                _cleanup_(npu_job_plan_done) NpuJobPlan p = {};
                _cleanup_free_ char *why = NULL;
                int r;

                if (cases[i].inputs)
                        assert_non_null(in);
                r = npu_workload_expand(npu_workloads_find(w, cases[i].workload), repo, ws, in, &p, &why);
                if (r != cases[i].r || (cases[i].why && (!why || !strstr(why, cases[i].why))))
                        fail_msg("case %zu: %d '%s', expected %d '%s'", i, r, why ?: "(none)", cases[i].r,
                                 cases[i].why ?: "");
        }
        /* a workspace or repository that is not there */
        {
                _cleanup_(npu_job_plan_done) NpuJobPlan p = {};
                _cleanup_free_ char *why = NULL;

                assert_int_equal(npu_workload_expand(npu_workloads_find(w, "plain"), repo, nows, NULL, &p, &why), -ENOENT);
                why = mfree(why);
                assert_int_equal(npu_workload_expand(npu_workloads_find(w, "eq"), nows, ws, NULL, &p, &why), -EBADMSG);
                why = mfree(why);
                assert_int_equal(npu_workload_expand(npu_workloads_find(w, "gone"), nows, ws, NULL, &p, &why), -ENOENT);
                assert_non_null(strstr(why, "the repository cannot be resolved"));
        }
}

static void test_expand_fields(void **state) {
        static const struct {
                const char *config;     /* "{B}" is the tree's path */
                int r;
                const char *why;
                const char *field;      /* with r == 0: this field's value in the copy ... */
                const char *value;      /* ... is this, "{B}" replaced (the resolved path) */
        } cases[] = {
                { "{\"workspace\": \".\"}", 0, NULL, "workspace", "{B}/ws" },
                { "{\"workspace\": \"{B}/ws\"}", 0, NULL, "workspace", "{B}/ws" },
                { "{\"workspace\": \"{B}/ws/../ws/data\"}", 0, NULL, "workspace", "{B}/ws/data" },
                { "{\"run_dir\": \"data/../data/x/y\"}", 0, NULL, "run_dir", "{B}/ws/data/x/y" },
                { "{\"unrelated\": \"/etc\"}", 0, NULL, "unrelated", "/etc" },
                { "{\"inputs\": {\"msa_dir\": \"data\"}}", 0, NULL, NULL, NULL },
                { "{\"inputs\": {}}", 0, NULL, NULL, NULL },
                /* absolute, relative, through symlinks: out of the workspace */
                { "{\"run_dir\": \"/etc\"}", -EPERM, "run_dir: resolves outside the session's workspace", NULL, NULL },
                { "{\"run_dir\": \"/\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"../../\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"..\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"{B}/outside\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"{B}/wsx\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"out-link\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"out-link/secret.json\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"target_pdb\": \"passwd-link\"}", -EPERM, "target_pdb: resolves outside", NULL, NULL },
                { "{\"inputs\": {\"msa_dir\": \"/etc\"}}", -EPERM, "inputs.msa_dir: resolves outside", NULL, NULL },
                { "{\"inputs\": {\"msa_dir\": \"../outside\"}}", -EPERM, "inputs.msa_dir: resolves outside", NULL, NULL },
                /* a dotted key reads the same field */
                { "{\"inputs.msa_dir\": \"/etc\"}", -EPERM, "inputs.msa_dir: resolves outside", NULL, NULL },
                { "{\"inputs.msa_dir\": \"data\"}", 0, NULL, "inputs.msa_dir", "{B}/ws/data" },
                /* resource roots, directly and through a symlink in the workspace */
                { "{\"target_pdb\": \"{B}/res/weights/model.bin\"}", 0, NULL, "target_pdb", "{B}/res/weights/model.bin" },
                { "{\"target_pdb\": \"{B}/res/weights\"}", 0, NULL, "target_pdb", "{B}/res/weights" },
                { "{\"target_pdb\": \"res-link/model.bin\"}", 0, NULL, "target_pdb", "{B}/res/weights/model.bin" },
                { "{\"target_pdb\": \"{B}/res\"}", -EPERM, "target_pdb: resolves outside", NULL, NULL },
                { "{\"target_pdb\": \"{B}/res/missing/x\"}", -EPERM, "target_pdb: resolves outside", NULL, NULL },
                /* outputs that do not exist yet */
                { "{\"run_dir\": \"runs/2024/a\"}", 0, NULL, "run_dir", "{B}/ws/runs/2024/a" },
                { "{\"run_dir\": \"{B}/ws/new\"}", 0, NULL, "run_dir", "{B}/ws/new" },
                { "{\"run_dir\": \"out-link/new\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"out-link/new/deeper\"}", -EPERM, "run_dir: resolves outside", NULL, NULL },
                { "{\"run_dir\": \"new/../../outside\"}", -EPERM, "run_dir: \".\" or \"..\" after a directory", NULL, NULL },
                { "{\"run_dir\": \"dangling\"}", -EPERM, "run_dir: a symbolic link that leads nowhere", NULL, NULL },
                { "{\"run_dir\": \"dangling/x\"}", -EPERM, "run_dir: a symbolic link that leads nowhere", NULL, NULL },
                { "{\"run_dir\": \"cfg.json/x\"}", -EPERM, "run_dir: a component on the way is not a dir", NULL, NULL },
                { "{\"run_dir\": \"hl.json\"}", -EPERM, "run_dir: has more than one hard link", NULL, NULL },
                /* not strings */
                { "{\"run_dir\": 5}", -EPERM, "run_dir: must be a string", NULL, NULL },
                { "{\"run_dir\": null}", -EPERM, "run_dir: must be a string", NULL, NULL },
                { "{\"run_dir\": [\"data\"]}", -EPERM, "run_dir: must be a string", NULL, NULL },
                { "{\"run_dir\": {\"path\": \"data\"}}", -EPERM, "run_dir: must be a string", NULL, NULL },
                { "{\"run_dir\": \"\"}", -EPERM, "run_dir: must be a path", NULL, NULL },
                { "{\"run_dir\": \"da\\u0000ta\"}", -EPERM, "run_dir: must be a path", NULL, NULL },
                { "{\"inputs\": \"data\"}", -EPERM, "inputs.msa_dir: 'inputs' on the way is not an object", NULL, NULL },
                { "{\"inputs\": [{\"msa_dir\": \"/etc\"}]}", -EPERM, "inputs.msa_dir: 'inputs' on the way", NULL, NULL },
                /* the config itself */
                { "[]", -EBADMSG, "configPath: must be a JSON object", NULL, NULL },
                { "{\"a\": 1", -EBADMSG, "configPath: the JSON document is incomplete", NULL, NULL },
                { "{\"a\": 1} {}", -EBADMSG, "configPath: invalid JSON", NULL, NULL },
                { "workspace: .", -EBADMSG, "configPath: invalid JSON", NULL, NULL },
                { "", -EBADMSG, "configPath: empty", NULL, NULL },
        };
        const TestDir *d = *state;
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = tree_workloads(d);
        _cleanup_free_ char *repo = at(d, "repo"), *ws = at(d, "ws"), *real = realpath(d->path, NULL);
        const NpuWorkload *fold = npu_workloads_find(w, "fold");

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(json_object_putp) json_object *in = inputs_of("cfg.json"), *copy = NULL;
                _cleanup_(npu_job_plan_done) NpuJobPlan p = {};
                _cleanup_free_ char *why = NULL, *config = NULL, *value = NULL;
                const char *tmpl = cases[i].config;
                char *o;
                int r;

                /* the config with "{B}" replaced by the tree's path as given, the value by its realpath */
                config = o = malloc(strlen(tmpl) + 4 * strlen(d->path) + 1);
                assert_non_null(config);
                for (const char *c = tmpl; *c;)
                        if (strneq(c, "{B}", 3)) {
                                o = stpcpy(o, d->path);
                                c += 3;
                        } else
                                *o++ = *c++;
                *o = '\0';
                put(d, "ws/cfg.json", config);

                r = npu_workload_expand(fold, repo, ws, in, &p, &why);
                if (r != cases[i].r || (cases[i].why && (!why || !strstr(why, cases[i].why))))
                        fail_msg("%s: %d '%s', expected %d '%s'", cases[i].config, r, why ?: "(none)", cases[i].r,
                                 cases[i].why ?: "");
                if (r < 0) {
                        assert_null(p.config_json);
                        continue;
                }
                assert_non_null(p.config_json);
                copy = json_tokener_parse(p.config_json);
                assert_non_null(copy);
                if (!cases[i].field)
                        continue;
                assert_true(asprintf(&value, "%s%s", strneq(cases[i].value, "{B}", 3) ? real : "",
                                     cases[i].value + (strneq(cases[i].value, "{B}", 3) ? 3 : 0)) > 0);
                {
                        json_object *v = NULL;

                        assert_true(json_object_object_get_ex(copy, cases[i].field, &v));
                        assert_string_equal(json_object_get_string(v), value);
                }
        }
}

/* A config over 1 MiB, and a FIFO in its place, are refused without a hang. */
static void test_expand_config_limits(void **state) {
        const TestDir *d = *state;
        _cleanup_(npu_workloads_freep) NpuWorkloads *w = tree_workloads(d);
        _cleanup_(json_object_putp) json_object *big = inputs_of("big.json"), *fifo = inputs_of("fifo.json");
        _cleanup_free_ char *repo = at(d, "repo"), *ws = at(d, "ws"), *text = NULL, *f = at(d, "ws/fifo.json");
        const NpuWorkload *fold = npu_workloads_find(w, "fold");
        NpuJobPlan p = {};
        char *why = NULL;

        text = malloc(NPU_CONFIG_MAX_BYTES + 2);
        assert_non_null(text);
        text[0] = '{';
        memset(text + 1, ' ', NPU_CONFIG_MAX_BYTES - 2);
        text[NPU_CONFIG_MAX_BYTES - 1] = '}';
        text[NPU_CONFIG_MAX_BYTES] = '\0';
        put(d, "ws/big.json", text);                                   /* exactly 1 MiB */
        assert_int_equal(npu_workload_expand(fold, repo, ws, big, &p, &why), 0);
        npu_job_plan_done(&p);
        text[NPU_CONFIG_MAX_BYTES] = ' ';
        text[NPU_CONFIG_MAX_BYTES + 1] = '\0';
        put(d, "ws/big.json", text);                                   /* one byte more */
        assert_int_equal(npu_workload_expand(fold, repo, ws, big, &p, &why), -EBADMSG);
        assert_non_null(strstr(why, "larger than 1 MiB"));
        why = mfree(why);

        assert_int_equal(mkfifo(f, 0600), 0);
        assert_int_equal(npu_workload_expand(fold, repo, ws, fifo, &p, &why), -EPERM);
        assert_non_null(strstr(why, "not a regular file"));
        free(why);
}

/* ---- loading ------------------------------------------------------------------------------------ */

static void test_load(void **state) {
        const TestDir *d = *state;
        _cleanup_free_ char *good = at(d, "allow.json"), *dir = at(d, "ws"), *missing = at(d, "nothing.json"),
                            *fifo = at(d, "allow.fifo"), *big = at(d, "big-allow.json"), *text = NULL;
        NpuWorkloads *w = NULL;
        char *why = NULL;

        put(d, "allow.json", WID(",\"id\":\"x\"") "\n");
        assert_int_equal(npu_workloads_load(good, &w, &why), 0);
        assert_int_equal(w->n, 1);
        assert_non_null(npu_workloads_find(w, "x"));
        w = npu_workloads_free(w);

        assert_int_equal(npu_workloads_load(missing, &w, &why), -ENOENT);
        assert_non_null(why);
        why = mfree(why);
        assert_int_equal(npu_workloads_load(dir, &w, &why), -EBADMSG);
        assert_non_null(strstr(why, "not a regular file"));
        why = mfree(why);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        assert_int_equal(npu_workloads_load(fifo, &w, &why), -EBADMSG);
        why = mfree(why);

        text = malloc(NPU_WORKLOADS_MAX_BYTES + 2);
        assert_non_null(text);
        memset(text, ' ', NPU_WORKLOADS_MAX_BYTES + 1);
        text[NPU_WORKLOADS_MAX_BYTES + 1] = '\0';
        put(d, "big-allow.json", text);
        assert_int_equal(npu_workloads_load(big, &w, &why), -EBADMSG);
        assert_non_null(strstr(why, "larger than 1 MiB"));
        free(why);
        assert_null(w);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_id_valid),
                cmocka_unit_test(test_parse_good),
                cmocka_unit_test(test_parse_bad),
                cmocka_unit_test(test_parse_limits),
                cmocka_unit_test(test_to_json),
                cmocka_unit_test_setup_teardown(test_expand_good, setup_tree, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_expand_forms, setup_tree, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_expand_config_path, setup_tree, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_expand_inputs, setup_tree, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_expand_fields, setup_tree, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_expand_config_limits, setup_tree, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_load, setup_tree, test_dir_teardown),
        };
        return cmocka_run_group_tests_name("npu-workload", tests, NULL, NULL);
}
