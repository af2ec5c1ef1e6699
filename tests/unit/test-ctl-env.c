/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/ctl/env-util.c: the PUT bodies of env create and env install (merging specs and
 * wheels), wheel arguments, spec names, progress lines, setup outcomes and terminal redrawing. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "env-util.h"

/* The compact JSON text of @o, to compare against expected bodies. */
static const char *text(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static json_object *parse(const char *s) {
        json_object *o = json_tokener_parse(s);

        assert_non_null(o);
        return o;
}

static void test_kind_valid(void **state) {
        assert_true(env_kind_valid("python"));
        assert_true(env_kind_valid("r"));
        assert_true(env_kind_valid("conda"));
        assert_false(env_kind_valid("R"));
        assert_false(env_kind_valid(""));
        assert_false(env_kind_valid(NULL));
}

static void test_wheel_parse(void **state) {
        static const char *const bad[] = { "", "ws", ":path", "ws:", ":", NULL };
        json_object *w = NULL;

        assert_int_equal(env_wheel_parse("ws1:client/srtest_gamma-0.1-py3-none-any.whl", &w), 0);
        assert_string_equal(text(w), "{\"workspaceId\":\"ws1\",\"path\":\"client/srtest_gamma-0.1-py3-none-any.whl\"}");
        json_object_put(w);

        /* Split at the first colon: a path may hold more. */
        assert_int_equal(env_wheel_parse("w:a:b.whl", &w), 0);
        assert_string_equal(text(w), "{\"workspaceId\":\"w\",\"path\":\"a:b.whl\"}");
        json_object_put(w);

        for (const char *const *b = bad; *b; b++) {
                w = NULL;
                assert_int_equal(env_wheel_parse(*b, &w), -EINVAL);
                assert_null(w);
        }
}

static void test_spec_name(void **state) {
        static const struct {
                const char *kind, *spec, *name;
        } ok[] = {
                { "python", "numpy",                "numpy"        },
                { "python", "NumPy>=1.2",           "numpy"        },
                { "python", "srtest_alpha>=2",      "srtest-alpha" },
                { "python", "Srtest.Alpha==1.0",    "srtest-alpha" },
                { "python", "a--_.b[extra]~=1",     "a-b"          },
                { "python", "pkg ; python_version", "pkg"          },
                { "r",      "data.table",           "data.table"   },
                { "r",      "Matrix",               "Matrix"       },
                { "conda",  "conda-forge::NumPy=1", "numpy"        },
        };
        static const char *const bad[] = { "--index-url=https://x", "-e", "", " numpy", "./pkg", NULL };
        char *n;

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                n = NULL;
                assert_int_equal(env_spec_name(ok[i].kind, ok[i].spec, &n), 0);
                assert_string_equal(n, ok[i].name);
                free(n);
        }
        for (const char *const *b = bad; *b; b++) {
                n = NULL;
                assert_int_equal(env_spec_name("python", *b, &n), -EINVAL);
                assert_null(n);
        }
}

static void test_create_body(void **state) {
        const char *packages[] = { "srtest_alpha", "srtest_beta==1.0" };
        const char *wheels[] = { "ws1:client/srtest_gamma-0.1-py3-none-any.whl" };
        const char *channels[] = { "conda-forge", "bioconda" };
        const char *injection[] = { "--index-url=https://x" };
        const char *bad_wheel[] = { "nocolon" };
        json_object *b = NULL;

        /* The minimum: kind, empty lists, an empty source (the daemon's defaults). */
        assert_int_equal(env_create_body(&(EnvCreateArgs) { .kind = "python" }, &b), 0);
        assert_string_equal(text(b), "{\"kind\":\"python\",\"packages\":[],\"wheels\":[],\"source\":{}}");
        json_object_put(b);

        assert_int_equal(env_create_body(&(EnvCreateArgs) {
                                                 .kind = "python",
                                                 .index_url = "https://mirror.example/simple",
                                                 .offline = true,
                                                 .packages = packages,
                                                 .n_packages = 2,
                                                 .wheels = wheels,
                                                 .n_wheels = 1,
                                         },
                                         &b),
                         0);
        assert_string_equal(text(b),
                            "{\"kind\":\"python\",\"packages\":[\"srtest_alpha\",\"srtest_beta==1.0\"],"
                            "\"wheels\":[{\"workspaceId\":\"ws1\",\"path\":\"client/srtest_gamma-0.1-py3-none-any.whl\"}],"
                            "\"source\":{\"indexUrl\":\"https://mirror.example/simple\",\"offline\":true}}");
        json_object_put(b);

        assert_int_equal(env_create_body(&(EnvCreateArgs) {
                                                 .kind = "conda",
                                                 .preset = "tuna",
                                                 .channels = channels,
                                                 .n_channels = 2,
                                         },
                                         &b),
                         0);
        assert_string_equal(text(b), "{\"kind\":\"conda\",\"packages\":[],\"wheels\":[],\"source\":{\"preset\":\"tuna\"},"
                                     "\"channels\":[\"conda-forge\",\"bioconda\"]}");
        json_object_put(b);

        /* Specs go to the daemon as they are: it judges them (package_spec_invalid). */
        assert_int_equal(env_create_body(&(EnvCreateArgs) { .kind = "python", .packages = injection, .n_packages = 1 },
                                         &b),
                         0);
        assert_string_equal(text(b), "{\"kind\":\"python\",\"packages\":[\"--index-url=https://x\"],\"wheels\":[],"
                                     "\"source\":{}}");
        json_object_put(b);

        b = NULL;
        assert_int_equal(env_create_body(&(EnvCreateArgs) { .kind = "python", .wheels = bad_wheel, .n_wheels = 1 }, &b),
                         -EINVAL);
        assert_null(b);
}

#define CURRENT \
        "{\"name\":\"e1\",\"kind\":\"python\",\"base\":false,\"state\":\"ready\",\"revision\":1," \
        "\"packages\":[{\"name\":\"srtest-alpha\",\"version\":\"1.0\"}]," \
        "\"requested\":[\"srtest_alpha\",\"srtest_beta\"]," \
        "\"wheels\":[{\"sha256\":\"aa\",\"file\":\"srtest_gamma-0.1-py3-none-any.whl\"}," \
        "{\"sha256\":\"bb\",\"file\":\"other-1.0-py3-none-any.whl\"}]," \
        "\"source\":{\"preset\":\"ustc\",\"offline\":false},\"channels\":[\"conda-forge\"]}"

static void test_install_body(void **state) {
        const char *specs[] = { "Srtest.Alpha>=2", "srtest_delta", "-e" };
        const char *wheels[] = { "ws2:dist/srtest_gamma-0.2-py3-none-any.whl", "ws2:new_one-1-py3-none-any.whl" };
        json_object *cur = parse(CURRENT), *b = NULL;

        /* A spec for a requested name replaces it in its place; new ones are appended; one
         * without a name goes as it is; a wheel of the same distribution replaces the stored one. */
        assert_int_equal(env_install_body(cur, specs, 3, wheels, 2, &b), 0);
        assert_string_equal(text(b),
                            "{\"kind\":\"python\","
                            "\"packages\":[\"Srtest.Alpha>=2\",\"srtest_beta\",\"srtest_delta\",\"-e\"],"
                            "\"wheels\":[{\"workspaceId\":\"ws2\",\"path\":\"dist/srtest_gamma-0.2-py3-none-any.whl\"},"
                            "{\"sha256\":\"bb\",\"file\":\"other-1.0-py3-none-any.whl\"},"
                            "{\"workspaceId\":\"ws2\",\"path\":\"new_one-1-py3-none-any.whl\"}],"
                            "\"source\":{\"preset\":\"ustc\"},\"channels\":[\"conda-forge\"]}");
        json_object_put(b);

        /* Its display name is kept. */
        json_object_put(cur);
        cur = parse("{\"kind\":\"python\",\"displayName\":\"Sci Env\",\"requested\":[]}");
        assert_int_equal(env_install_body(cur, (const char *[]) { "srtest_beta" }, 1, NULL, 0, &b), 0);
        assert_string_equal(text(b), "{\"kind\":\"python\",\"packages\":[\"srtest_beta\"],\"wheels\":[],"
                                     "\"source\":{},\"displayName\":\"Sci Env\"}");
        json_object_put(b);

        /* Nothing new: the same wanted set goes back (offline only when true). */
        json_object_put(cur);
        cur = parse("{\"kind\":\"r\",\"requested\":[\"data.table\"],\"source\":{\"offline\":true}}");
        assert_int_equal(env_install_body(cur, (const char *[]) { "Matrix", "data.table>=1.14" }, 2, NULL, 0, &b), 0);
        assert_string_equal(text(b), "{\"kind\":\"r\",\"packages\":[\"data.table>=1.14\",\"Matrix\"],\"wheels\":[],"
                                     "\"source\":{\"offline\":true}}");
        json_object_put(b);
        json_object_put(cur);

        /* r names are case-sensitive: "matrix" is another package than "Matrix". */
        cur = parse("{\"kind\":\"r\",\"requested\":[\"Matrix\"]}");
        assert_int_equal(env_install_body(cur, (const char *[]) { "matrix" }, 1, NULL, 0, &b), 0);
        assert_string_equal(text(b), "{\"kind\":\"r\",\"packages\":[\"Matrix\",\"matrix\"],\"wheels\":[],\"source\":{}}");
        json_object_put(b);
        json_object_put(cur);

        /* No kind in the answer; a malformed wheel. */
        cur = parse("{\"requested\":[]}");
        b = NULL;
        assert_int_equal(env_install_body(cur, NULL, 0, NULL, 0, &b), -EBADMSG);
        assert_null(b);
        json_object_put(cur);
        cur = parse(CURRENT);
        assert_int_equal(env_install_body(cur, NULL, 0, (const char *[]) { "ws:" }, 1, &b), -EINVAL);
        assert_null(b);
        json_object_put(cur);
}

static void test_progress_line(void **state) {
        static const struct {
                const char *entry;
                size_t width;
                const char *line;
        } cases[] = {
                { "{\"name\":\"python-base\",\"phase\":\"building\",\"done\":2,\"total\":4,\"step\":\"scipy\"}", 4,
                  "python-base building 2/4 scipy" },
                { "{\"name\":\"e1\",\"phase\":\"ready\",\"done\":3,\"total\":3}", 6,
                  "e1     ready    3/3" },
                { "{\"name\":\"e1\",\"phase\":\"pending\"}", 2,
                  "e1 pending  -/-" },
                { "{\"name\":\"e1\",\"phase\":\"failed\",\"done\":1,\"total\":3,\"step\":\"x\",\"error\":\"no index\"}", 2,
                  "e1 failed   1/3: no index" },
                /* Server strings cannot drive the terminal. */
                { "{\"name\":\"e\\u001b[2J\",\"phase\":\"building\",\"done\":0,\"total\":1,\"step\":\"a\\nb\"}", 1,
                  "e\\x1b[2J building 0/1 a\\nb" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_object *e = parse(cases[i].entry);
                char *line = NULL;

                assert_int_equal(env_progress_line(e, cases[i].width, &line), 0);
                assert_string_equal(line, cases[i].line);
                free(line);
                json_object_put(e);
        }
}

static void test_setup_outcome(void **state) {
        static const struct {
                const char *answer;
                EnvOutcome outcome;
        } cases[] = {
                { "{\"setup\":[]}",                                                      ENV_OUTCOME_READY   },
                { "{\"setup\":[{\"phase\":\"ready\"},{\"phase\":\"ready\"}]}",          ENV_OUTCOME_READY   },
                { "{\"setup\":[{\"phase\":\"ready\"},{\"phase\":\"failed\"}]}",         ENV_OUTCOME_FAILED  },
                { "{\"setup\":[{\"phase\":\"failed\"},{\"phase\":\"building\"}]}",      ENV_OUTCOME_RUNNING },
                { "{\"setup\":[{\"phase\":\"pending\"}]}",                               ENV_OUTCOME_RUNNING },
                { "{\"setup\":[{}]}",                                                    ENV_OUTCOME_RUNNING },
        };
        json_object *a;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                a = parse(cases[i].answer);
                assert_int_equal(env_setup_outcome(a), cases[i].outcome);
                json_object_put(a);
        }

        assert_true(env_phase_final("ready"));
        assert_true(env_phase_final("failed"));
        assert_false(env_phase_final("building"));
        assert_false(env_phase_final("pending"));
        assert_false(env_phase_final(NULL));

        a = parse("{\"setup\":[{\"name\":\"a\",\"phase\":\"ready\"},{\"name\":\"b\",\"phase\":\"failed\"}]}");
        assert_string_equal(json_object_get_string(json_object_object_get(env_setup_entry(a, "b"), "phase")), "failed");
        assert_null(env_setup_entry(a, "c"));
        assert_null(env_setup_entry(a, NULL));
        json_object_put(a);
}

/* What env_redraw() writes, as a string. */
static char *redraw(size_t n_old, char *const *lines, size_t n, size_t columns) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        assert_non_null(f);
        assert_int_equal(env_redraw(f, n_old, lines, n, columns), 0);
        assert_int_equal(fclose(f), 0);
        return buf;
}

static void test_redraw(void **state) {
        char *two[] = { "a 1/2", "b 0/1" }, *one[] = { "a 2/2" }, *wide[] = { "abcdefgh", "\xc3\xa9\xc3\xa9\xc3\xa9x" };
        char *s;

        /* The first drawing: each line cleared and written. */
        s = redraw(0, two, 2, 0);
        assert_string_equal(s, "\r\033[2Ka 1/2\n\r\033[2Kb 0/1\n");
        free(s);

        /* Up over the old lines, then rewritten. */
        s = redraw(2, two, 2, 0);
        assert_string_equal(s, "\r\033[2A\r\033[2Ka 1/2\n\r\033[2Kb 0/1\n");
        free(s);

        /* Fewer lines than before: the rest cleared, the cursor back below the new ones. */
        s = redraw(2, one, 1, 0);
        assert_string_equal(s, "\r\033[2A\r\033[2Ka 2/2\n\r\033[2K\n\r\033[1A");
        free(s);

        /* Cut to the terminal's width less one, counting characters, not bytes. */
        s = redraw(0, wide, 2, 5);
        assert_string_equal(s, "\r\033[2Kabcd\n\r\033[2K\xc3\xa9\xc3\xa9\xc3\xa9x\n");
        free(s);
        s = redraw(0, wide + 1, 1, 4);
        assert_string_equal(s, "\r\033[2K\xc3\xa9\xc3\xa9\xc3\xa9\n");
        free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kind_valid),
                cmocka_unit_test(test_wheel_parse),
                cmocka_unit_test(test_spec_name),
                cmocka_unit_test(test_create_body),
                cmocka_unit_test(test_install_body),
                cmocka_unit_test(test_progress_line),
                cmocka_unit_test(test_setup_outcome),
                cmocka_unit_test(test_redraw),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
