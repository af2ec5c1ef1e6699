/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/environment/env-source.c, table-driven: the index URL rules, presets and
 * their precedence, requirement specifiers (option injection, URLs, paths refused), the conda
 * channel allowlist and the offline mode (CRAN refused).
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "environment/env-source.h"
#include "util/macro.h"

static void test_kinds(void **state) {
        assert_string_equal(env_kind_to_string(ENV_KIND_PYTHON), "python");
        assert_string_equal(env_kind_to_string(ENV_KIND_R), "r");
        assert_string_equal(env_kind_to_string(ENV_KIND_CONDA), "conda");
        assert_int_equal(env_kind_from_string("conda"), ENV_KIND_CONDA);
        assert_int_equal(env_kind_from_string("julia"), -EINVAL);
        assert_int_equal(env_kind_from_string(NULL), -EINVAL);
}

static void test_index_url(void **state) {
        static const struct {
                const char *url;
                bool ok;
        } cases[] = {
                { "https://pypi.org/simple", true },
                { "https://pypi.org/simple/", true },
                { "https://mirror.example.org:8443/pypi/simple", true },
                { "HTTPS://pypi.org/simple", true },
                { "https://pypi.org", true },
                { "http://pypi.org/simple", false },            /* not https */
                { "ftp://pypi.org/simple", false },
                { "file:///srv/wheels", false },
                { "pypi.org/simple", false },
                { "https://user:secret@pypi.org/simple", false },  /* credentials */
                { "https://token@pypi.org/simple", false },
                { "https://pypi.org/simple?x=1", false },       /* query */
                { "https://pypi.org/simple#frag", false },      /* fragment */
                { "https://pypi.org/sim ple", false },          /* whitespace */
                { "https://pypi.org/simple\t", false },
                { "https://pypi.org/simple\n", false },
                { "https://pypi.org/\x01", false },             /* control byte */
                { "https://pypi.org/\xc3\xa9", false },         /* non-ASCII */
                { "https://pypi.org\\@evil.example/", false },   /* backslash */
                { "https://127.0.0.1/simple", false },          /* IP literal */
                { "https://[::1]/simple", false },
                { "https://localhost/simple", false },          /* one label */
                { "https://pypi.org:0/simple", false },
                { "https://pypi.org:65536/simple", false },
                { "https:///simple", false },
                { "", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;
                int r = env_index_url_check(cases[i].url, &why);

                if (cases[i].ok != (r == 0))
                        fail_msg("%s: %d (%s)", cases[i].url, r, why ?: "-");
                if (r < 0)
                        assert_non_null(why);
        }
        assert_int_equal(env_index_url_check(NULL, NULL), -EINVAL);
}

static void test_index_url_length(void **state) {
        char url[ENV_INDEX_URL_MAX + 2];
        size_t n = strlen("https://pypi.org/");

        memcpy(url, "https://pypi.org/", n);
        memset(url + n, 'a', sizeof(url) - n - 1);
        url[ENV_INDEX_URL_MAX] = '\0';                          /* exactly 2048 bytes */
        assert_int_equal(env_index_url_check(url, NULL), 0);
        url[ENV_INDEX_URL_MAX] = 'a';                           /* 2049 */
        url[ENV_INDEX_URL_MAX + 1] = '\0';
        assert_int_equal(env_index_url_check(url, NULL), -EINVAL);
}

/* The provisioning gateway's allowlist entry of an index: its canonical host, pinned to its port. */
static void test_index_allow_entry(void **state) {
        static const struct {
                const char *url, *entry;
        } good[] = {
                { "https://pypi.org/simple", "pypi.org:443" },
                { "https://PyPI.Example.ORG/simple/", "pypi.example.org:443" },
                { "https://mirror.example.net:8443/pypi/simple", "mirror.example.net:8443" },
                { "https://pypi.tuna.tsinghua.edu.cn/simple", "pypi.tuna.tsinghua.edu.cn:443" },
        };
        const char *reason = NULL;
        char *entry = NULL;

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                assert_int_equal(env_index_url_allow_entry(good[i].url, &entry, &reason), 0);
                assert_string_equal(entry, good[i].entry);
                free(entry);
                entry = NULL;
        }
        assert_int_equal(env_index_url_allow_entry("http://pypi.org/simple", &entry, &reason), -EINVAL);
        assert_null(entry);
        assert_int_equal(env_index_url_allow_entry("https://127.0.0.1/simple", &entry, &reason), -EINVAL);
        assert_null(entry);
        assert_int_equal(env_index_url_allow_entry("https://u:p@pypi.org/simple", &entry, &reason), -EINVAL);
        assert_null(entry);
}

static void test_presets(void **state) {
        const char *names[] = { "upstream", "tuna", "ustc", "huaweicloud" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                const char *u = env_preset_url(names[i], ENV_KIND_PYTHON);

                assert_non_null(u);
                assert_int_equal(env_index_url_check(u, NULL), 0);     /* every preset passes our rules */
                u = env_preset_url(names[i], ENV_KIND_CONDA);
                if (streq(names[i], "huaweicloud"))
                        assert_null(u);                                  /* conda has no Huawei Cloud */
                else {
                        assert_non_null(u);
                        assert_int_equal(env_index_url_check(u, NULL), 0);
                }
                assert_null(env_preset_url(names[i], ENV_KIND_R));
        }
        assert_null(env_preset_url("aliyun", ENV_KIND_PYTHON));
        assert_null(env_preset_url(NULL, ENV_KIND_PYTHON));
        assert_string_equal(env_preset_url("upstream", ENV_KIND_PYTHON), "https://pypi.org/simple");
}

static void test_precedence(void **state) {
        const char *url = NULL, *why = NULL;

        /* the request's explicit URL first */
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, "https://mirror.example.org/simple", "tuna", "ustc",
                                            &url, &why), 0);
        assert_string_equal(url, "https://mirror.example.org/simple");
        /* then the request's preset */
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, NULL, "tuna", "ustc", &url, &why), 0);
        assert_string_equal(url, env_preset_url("tuna", ENV_KIND_PYTHON));
        /* then the global preset */
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, NULL, NULL, "ustc", &url, &why), 0);
        assert_string_equal(url, env_preset_url("ustc", ENV_KIND_PYTHON));
        /* then upstream */
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, NULL, NULL, NULL, &url, &why), 0);
        assert_string_equal(url, "https://pypi.org/simple");
        assert_int_equal(env_source_resolve(ENV_KIND_CONDA, NULL, NULL, NULL, &url, &why), 0);
        assert_string_equal(url, env_preset_url("upstream", ENV_KIND_CONDA));

        /* refusals: a bad explicit URL (not hidden by a good preset), unknown presets, conda's
         * Huawei Cloud, R */
        url = NULL;
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, "http://pypi.org/simple", "tuna", NULL, &url, &why),
                         -EINVAL);
        assert_null(url);
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, NULL, "aliyun", NULL, &url, &why), -EINVAL);
        assert_int_equal(env_source_resolve(ENV_KIND_PYTHON, NULL, NULL, "aliyun", &url, &why), -EINVAL);
        assert_int_equal(env_source_resolve(ENV_KIND_CONDA, NULL, "huaweicloud", NULL, &url, &why), -EINVAL);
        assert_non_null(strstr(why, "huaweicloud"));
        assert_int_equal(env_source_resolve(ENV_KIND_R, NULL, NULL, NULL, &url, &why), -EINVAL);
}

static void test_package_specs(void **state) {
        static const struct {
                const char *spec;
                bool ok;
        } cases[] = {
                { "numpy", true },
                { "pandas>=2", true },
                { "pandas >= 2.0, < 3", true },
                { "scipy==1.11.4", true },
                { "requests[security,socks]>=2.31", true },
                { "zope.interface", true },
                { "typing_extensions~=4.8", true },
                { "pkg===1.0+local", true },
                { "pkg!=1.*", true },
                { "A", true },
                { "-e .", false },                              /* option injection */
                { "--index-url=https://evil.example/simple", false },
                { "--extra-index-url https://evil.example/simple", false },
                { "-r requirements.txt", false },
                { "-", false },
                { "https://evil.example/pkg.whl", false },      /* remote URLs */
                { "git+https://github.com/x/y", false },
                { "git+ssh://git@github.com/x/y", false },
                { "file:///tmp/pkg.whl", false },
                { "file:pkg", false },
                { "pkg @ https://evil.example/pkg.whl", false }, /* direct reference */
                { "./pkg", false },                             /* paths */
                { "../pkg", false },
                { "/tmp/pkg.whl", false },
                { "~/pkg", false },
                { "pkg\\x", false },
                { "pkg; python_version < '3.8'", false },       /* markers */
                { "pkg>=", false },
                { "pkg=1.0", false },
                { "pkg 1.0", false },
                { "pkg>=1.0 <2", false },
                { "pkg[", false },
                { "pkg[]", false },
                { "_pkg", false },
                { "pkg-", false },
                { "pkg\n", false },
                { "", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;
                int r = env_package_spec_check(cases[i].spec, &why);

                if (cases[i].ok != (r == 0))
                        fail_msg("'%s': %d (%s)", cases[i].spec, r, why ?: "-");
                if (r < 0)
                        assert_non_null(why);
        }
}

static void test_package_spec_length(void **state) {
        char spec[ENV_PACKAGE_SPEC_MAX + 2];

        memset(spec, 'a', sizeof(spec));
        spec[ENV_PACKAGE_SPEC_MAX] = '\0';
        assert_int_equal(env_package_spec_check(spec, NULL), 0);
        spec[ENV_PACKAGE_SPEC_MAX] = 'a';
        spec[ENV_PACKAGE_SPEC_MAX + 1] = '\0';
        assert_int_equal(env_package_spec_check(spec, NULL), -EINVAL);
}

static void test_channels(void **state) {
        char *allow[] = { (char *) "conda-forge", (char *) "https://conda.anaconda.org/bioconda/", NULL };
        const char *why = NULL;

        assert_int_equal(env_channel_check("conda-forge", allow, &why), 0);
        assert_int_equal(env_channel_check("conda-forge/", allow, &why), 0);
        assert_int_equal(env_channel_check("https://conda.anaconda.org/bioconda", allow, &why), 0);
        assert_int_equal(env_channel_check("defaults", allow, &why), -EINVAL);
        assert_non_null(why);
        assert_int_equal(env_channel_check("conda-forge-evil", allow, &why), -EINVAL);
        assert_int_equal(env_channel_check("conda", allow, &why), -EINVAL);
        assert_int_equal(env_channel_check("conda-forge", NULL, &why), -EINVAL);
        assert_int_equal(env_channel_check("", allow, &why), -EINVAL);
}

static void test_offline(void **state) {
        const char *why = NULL;
        EnvSourceRequest cran = { .kind = ENV_KIND_R, .cran = true };
        EnvSourceRequest bioc = { .kind = ENV_KIND_R, .bioconductor = true };
        EnvSourceRequest url = { .kind = ENV_KIND_PYTHON, .index_url = "https://pypi.org/simple" };
        EnvSourceRequest preset = { .kind = ENV_KIND_PYTHON, .preset = "tuna" };
        EnvSourceRequest channels = { .kind = ENV_KIND_CONDA, .n_channels = 1 };
        EnvSourceRequest local = { .kind = ENV_KIND_PYTHON };

        assert_int_equal(env_offline_check(&cran, true, &why), -EINVAL);
        assert_non_null(strstr(why, "CRAN"));
        assert_int_equal(env_offline_check(&bioc, true, &why), -EINVAL);
        assert_non_null(strstr(why, "Bioconductor"));
        assert_int_equal(env_offline_check(&url, true, &why), -EINVAL);
        assert_int_equal(env_offline_check(&preset, true, &why), -EINVAL);
        assert_int_equal(env_offline_check(&channels, true, &why), -EINVAL);
        assert_int_equal(env_offline_check(&local, true, &why), 0);     /* a wheelhouse, client wheels */
        /* online: all of them pass this check */
        assert_int_equal(env_offline_check(&cran, false, &why), 0);
        assert_int_equal(env_offline_check(&url, false, &why), 0);
        assert_int_equal(env_offline_check(&channels, false, &why), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),
                cmocka_unit_test(test_index_url),
                cmocka_unit_test(test_index_url_length),
                cmocka_unit_test(test_index_allow_entry),
                cmocka_unit_test(test_presets),
                cmocka_unit_test(test_precedence),
                cmocka_unit_test(test_package_specs),
                cmocka_unit_test(test_package_spec_length),
                cmocka_unit_test(test_channels),
                cmocka_unit_test(test_offline),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
