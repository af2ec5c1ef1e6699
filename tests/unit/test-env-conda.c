/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit test of src/environment/env-conda.c: the `micromamba create` argv as data for several plans
 * (channel order, offline, the package cache, refusals), and env_micromamba_verify() on files made
 * per case (test-dir.h): a match in either case, a mismatch, bad configured hashes, a symbolic
 * link, a directory, a FIFO and a missing file. No micromamba exists here: data only.
 */

#include <errno.h>
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

#include "environment/env-conda.h"
#include "util/strv.h"
#include "test-dir.h"

#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))

static void assert_argv_equal_at(char **got, const char *const *want, const char *file, int line) {
        size_t n = 0;

        for (; want[n]; n++)
                if (!got[n] || strcmp(got[n], want[n]) != 0) {
                        print_message("# %s:%d: at %zu: got \"%s\", expected \"%s\"\n", file, line, n,
                                      got[n] ?: "(end)", want[n]);
                        fail();
                }
        if (got[n]) {
                print_message("# %s:%d: unexpected \"%s\" at %zu\n", file, line, got[n], n);
                fail();
        }
}
#define assert_argv_equal(got, ...) \
        assert_argv_equal_at((got), (const char *const[]) { __VA_ARGS__, NULL }, __FILE__, __LINE__)

static char *channels_one[] = { "https://conda.anaconda.org/conda-forge", NULL };
static char *channels_two[] = { "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge",
                                "https://conda.anaconda.org/bioconda", NULL };
static char *packages[] = { "numpy>=1.26", "scipy 1.11.*", "python=3.11", NULL };

static EnvCondaPlan plan_default(void) {
        return (EnvCondaPlan) {
                .micromamba = "/.sandbox/micromamba",
                .prefix = "/opt/science-env",
                .channels = channels_one,
                .packages = packages,
        };
}

static char **build_ok(const EnvCondaPlan *p) {
        char **a = NULL, **b = NULL;

        assert_int_equal(env_conda_argv(p, &a), 0);
        assert_non_null(a);
        /* Pure: the same plan gives the same argv again. */
        assert_int_equal(env_conda_argv(p, &b), 0);
        assert_argv_equal_at(b, (const char *const *) a, __FILE__, __LINE__);
        strv_free(b);
        return a;
}

/* One channel, online, no cache: the throw-away root in /tmp. */
static void test_argv_default(void **state) {
        EnvCondaPlan p = plan_default();
        char **a = build_ok(&p);

        assert_argv_equal(a,
                "/.sandbox/micromamba", "create", "--yes", "--no-rc", "--no-env",
                "--root-prefix", "/tmp/mamba-root", "--prefix", "/opt/science-env",
                "--override-channels", "--strict-channel-priority",
                "--always-copy", "--safety-checks", "enabled",
                "-c", "https://conda.anaconda.org/conda-forge",
                "--",
                "numpy>=1.26", "scipy 1.11.*", "python=3.11");
        strv_free(a);
}

/* Two channels in the order given (strict priority: the first wins), offline, a package cache
 * (its parent becomes the root prefix). */
static void test_argv_channels_offline_cache(void **state) {
        char *one[] = { "r-base", NULL };
        EnvCondaPlan p = plan_default();
        char **a;

        p.channels = channels_two;
        p.packages = one;
        p.offline = true;
        p.pkgs_dir = "/var/cache/conda/pkgs";
        a = build_ok(&p);
        assert_argv_equal(a,
                "/.sandbox/micromamba", "create", "--yes", "--no-rc", "--no-env",
                "--root-prefix", "/var/cache/conda", "--prefix", "/opt/science-env",
                "--override-channels", "--strict-channel-priority",
                "--always-copy", "--safety-checks", "enabled",
                "-c", "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge",
                "-c", "https://conda.anaconda.org/bioconda",
                "--offline",
                "--",
                "r-base");
        strv_free(a);

        /* The other order, online: the same argv with the channels swapped and no --offline. */
        {
                char *swapped[] = { channels_two[1], channels_two[0], NULL };

                p.channels = swapped;
                p.offline = false;
                p.pkgs_dir = "/c/pkgs";
                a = build_ok(&p);
                assert_argv_equal(a,
                        "/.sandbox/micromamba", "create", "--yes", "--no-rc", "--no-env",
                        "--root-prefix", "/c", "--prefix", "/opt/science-env",
                        "--override-channels", "--strict-channel-priority",
                        "--always-copy", "--safety-checks", "enabled",
                        "-c", "https://conda.anaconda.org/bioconda",
                        "-c", "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge",
                        "--",
                        "r-base");
                strv_free(a);
        }
}

static void assert_refused(const EnvCondaPlan *p, const char *what) {
        char *sentinel[] = { "untouched", NULL };
        char **a = sentinel;
        int r = env_conda_argv(p, &a);

        if (r != -EINVAL) {
                print_message("# expected -EINVAL for %s, got %d\n", what, r);
                if (r == 0)
                        strv_free(a);
                fail();
        }
        assert_ptr_equal(a, sentinel);
}

static void test_argv_refusals(void **state) {
        static const char *const bad_packages[] = {
                "-c", "--override-channels", "--channel=https://evil.example", "-", "", "numpy\n--offline",
                "a\tb", "x\x7f",
        };
        static const char *const bad_channels[] = {
                "-c", "--offline", "", "conda forge", "https://x.example/\n", "\x01",
        };
        static const char *const bad_pkgs_dirs[] = {
                "pkgs", "/pkgs", "/var/cache/conda", "/var/cache/conda/pkgs/", "/var/cache/conda/xpkgs",
                "/var/../pkgs", "/var//pkgs", "/./pkgs", "", "/a/pkgs\n",
        };
        char *empty[] = { NULL };
        EnvCondaPlan p;
        char **a = NULL;

        assert_int_equal(env_conda_argv(NULL, &a), -EINVAL);
        p = plan_default();
        assert_int_equal(env_conda_argv(&p, NULL), -EINVAL);

        for (size_t i = 0; i < ELEMENTS(bad_packages); i++) {
                char *l[] = { "numpy", (char *) bad_packages[i], NULL };

                p = plan_default();
                p.packages = l;
                assert_refused(&p, bad_packages[i]);
        }
        for (size_t i = 0; i < ELEMENTS(bad_channels); i++) {
                char *l[] = { "conda-forge", (char *) bad_channels[i], NULL };

                p = plan_default();
                p.channels = l;
                assert_refused(&p, bad_channels[i]);
        }
        for (size_t i = 0; i < ELEMENTS(bad_pkgs_dirs); i++) {
                p = plan_default();
                p.pkgs_dir = bad_pkgs_dirs[i];
                assert_refused(&p, bad_pkgs_dirs[i]);
        }

        p = plan_default();
        p.channels = NULL;
        assert_refused(&p, "no channels");
        p.channels = empty;
        assert_refused(&p, "an empty channel list");
        p = plan_default();
        p.packages = NULL;
        assert_refused(&p, "no packages");
        p.packages = empty;
        assert_refused(&p, "an empty package list");
        p = plan_default();
        p.micromamba = NULL;
        assert_refused(&p, "no binary");
        p.micromamba = "micromamba";
        assert_refused(&p, "a relative binary");
        p = plan_default();
        p.prefix = NULL;
        assert_refused(&p, "no prefix");
        p.prefix = "opt/science-env";
        assert_refused(&p, "a relative prefix");
        p.prefix = "/opt/science-env/";
        assert_refused(&p, "a prefix with a trailing slash");
}

/* ---------------------------------------------------------------------------------------------
 * env_micromamba_verify() */

/* SHA-256 of "micromamba\n" (sha256sum). */
#define CONTENT "micromamba\n"
#define CONTENT_SHA256 "db884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd70"

static char *write_file(const TestDir *d, const char *name, const char *content) {
        char *path = NULL;
        FILE *f;

        assert_true(asprintf(&path, "%s/%s", d->path, name) > 0);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(content, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
        return path;
}

static void assert_verify(const char *path, const char *hash, int want, const char *want_reason) {
        const char *reason = "untouched";
        int r = env_micromamba_verify(path, hash, &reason);

        if (r != want) {
                print_message("# %s with %s: got %d (%s), expected %d\n", path, hash ?: "(null)", r,
                              reason ?: "(null)", want);
                fail();
        }
        if (want_reason)
                assert_string_equal(reason, want_reason);
        else
                assert_null(reason);
}

static void test_verify_match(void **state) {
        TestDir *d = *state;
        char *path = write_file(d, "micromamba", CONTENT);
        char upper[65];

        assert_verify(path, CONTENT_SHA256, 0, NULL);
        for (size_t i = 0; i < 65; i++)
                upper[i] = (char) (CONTENT_SHA256[i] >= 'a' && CONTENT_SHA256[i] <= 'f' ? CONTENT_SHA256[i] - 32
                                                                                        : CONTENT_SHA256[i]);
        assert_verify(path, upper, 0, NULL);
        assert_int_equal(env_micromamba_verify(path, CONTENT_SHA256, NULL), 0);

        /* An empty file has the well-known digest. */
        free(path);
        path = write_file(d, "empty", "");
        assert_verify(path, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0, NULL);
        free(path);
}

static void test_verify_mismatch(void **state) {
        TestDir *d = *state;
        char *path = write_file(d, "micromamba", CONTENT "x");

        assert_verify(path, CONTENT_SHA256, -EBADMSG, "hash mismatch");
        /* One digit off. */
        free(path);
        path = write_file(d, "m2", CONTENT);
        assert_verify(path, "cb884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd70", -EBADMSG,
                      "hash mismatch");
        assert_int_equal(env_micromamba_verify(path, "cb884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd70",
                                               NULL), -EBADMSG);
        free(path);
}

static void test_verify_bad_hash(void **state) {
        static const char *const bad[] = {
                "",
                "db884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd7",     /* 63 */
                "db884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd700",   /* 65 */
                "gb884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd70",    /* not hex */
                " db884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd7",
                "sha256:db884d44d82721eff493035d48fb89654695b540ac595f8b538bb6fe5abafd70",
        };
        TestDir *d = *state;
        char *path = write_file(d, "micromamba", CONTENT);

        for (size_t i = 0; i < ELEMENTS(bad); i++)
                assert_verify(path, bad[i], -EINVAL, "bad configured hash");
        assert_verify(path, NULL, -EINVAL, "bad configured hash");
        assert_verify("relative/micromamba", CONTENT_SHA256, -EINVAL, "bad configured path");
        assert_verify(NULL, CONTENT_SHA256, -EINVAL, "bad configured path");
        free(path);
}

static void test_verify_not_a_file(void **state) {
        TestDir *d = *state;
        char *path = write_file(d, "micromamba", CONTENT), *link = NULL, *dir = NULL, *fifo = NULL, *missing = NULL;

        /* A link to the right file is still refused: the configured path itself must be the file. */
        assert_true(asprintf(&link, "%s/link", d->path) > 0);
        assert_int_equal(symlink(path, link), 0);
        assert_verify(link, CONTENT_SHA256, -ELOOP, "is a symbolic link");

        assert_true(asprintf(&dir, "%s/dir", d->path) > 0);
        assert_int_equal(mkdir(dir, 0755), 0);
        assert_verify(dir, CONTENT_SHA256, -EISDIR, "is a directory");

        /* A FIFO: refused at once, without waiting for a writer. */
        assert_true(asprintf(&fifo, "%s/fifo", d->path) > 0);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        assert_verify(fifo, CONTENT_SHA256, -ENOEXEC, "not a regular file");

        assert_true(asprintf(&missing, "%s/missing", d->path) > 0);
        assert_verify(missing, CONTENT_SHA256, -ENOENT, "cannot be opened");

        free(path);
        free(link);
        free(dir);
        free(fifo);
        free(missing);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_argv_default),
                cmocka_unit_test(test_argv_channels_offline_cache),
                cmocka_unit_test(test_argv_refusals),
                cmocka_unit_test_setup_teardown(test_verify_match, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_verify_mismatch, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_verify_bad_hash, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_verify_not_a_file, test_dir_setup, test_dir_teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
