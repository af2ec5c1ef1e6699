/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit test of sandbox_probe_interpreters() (src/sandbox/sandbox.c): the host's python*, pip*, R
 * and Rscript that a sandbox with an environment covers, listed from a fake root tree made per
 * case (test-dir.h), and once from the real root.
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

#include "sandbox/sandbox.h"
#include "util/strv.h"
#include "test-dir.h"

static void mkdir_at(const TestDir *d, const char *path) {
        assert_int_equal(mkdirat(d->fd, path, 0755), 0);
}

static void file_at(const TestDir *d, const char *path) {
        int fd = openat(d->fd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);

        assert_true(fd >= 0);
        assert_int_equal(close(fd), 0);
}

static void link_at(const TestDir *d, const char *target, const char *path) {
        assert_int_equal(symlinkat(target, d->fd, path), 0);
}

static void assert_strv_equal(char **got, const char *const *want) {
        size_t n = 0;

        for (; want[n]; n++) {
                if (!got || !got[n]) {
                        print_message("# missing \"%s\" at %zu\n", want[n], n);
                        fail();
                }
                if (strcmp(got[n], want[n]) != 0) {
                        print_message("# at %zu: got \"%s\", expected \"%s\"\n", n, got[n], want[n]);
                        fail();
                }
        }
        if (got && got[n]) {
                print_message("# unexpected \"%s\" at %zu\n", got[n], n);
                fail();
        }
}

/* A tree with every kind of entry: matching files, links that resolve, links that do not,
 * directories, names that only look alike. */
static void make_tree(const TestDir *d) {
        mkdir_at(d, "usr");
        mkdir_at(d, "usr/bin");
        mkdir_at(d, "usr/local");
        mkdir_at(d, "usr/local/bin");
        mkdir_at(d, "bin");

        file_at(d, "usr/bin/python3.11");
        link_at(d, "python3.11", "usr/bin/python3");
        link_at(d, "python3", "usr/bin/python");
        file_at(d, "usr/bin/python3.11-config");
        file_at(d, "usr/bin/pip3");
        link_at(d, "pip3", "usr/bin/pip");
        file_at(d, "usr/bin/R");
        file_at(d, "usr/bin/Rscript");
        file_at(d, "usr/bin/pydoc3");               /* not an entry point we cover */
        file_at(d, "usr/bin/Rcmd");
        file_at(d, "usr/bin/rscript");
        file_at(d, "usr/bin/xpython");
        file_at(d, "usr/bin/ls");
        mkdir_at(d, "usr/bin/python-dir");          /* a directory */
        link_at(d, "python-dir", "usr/bin/python-dirlink");   /* a link to one */
        link_at(d, "nowhere", "usr/bin/python-dangling");     /* a link to nothing */
        mkdir_at(d, "usr/bin/R.d");

        file_at(d, "usr/local/bin/python3.12");
        file_at(d, "usr/local/bin/pip3.12");
        link_at(d, "../../bin/R", "usr/local/bin/R");

        file_at(d, "bin/python2");
        file_at(d, "bin/sh");
}

static void test_merged(void **state) {
        TestDir *d = *state;
        char **l = NULL;

        make_tree(d);
        assert_int_equal(sandbox_probe_interpreters(d->path, true, &l), 0);
        assert_strv_equal(l, (const char *const[]) {
                "/usr/bin/R", "/usr/bin/Rscript", "/usr/bin/pip", "/usr/bin/pip3", "/usr/bin/python",
                "/usr/bin/python3", "/usr/bin/python3.11", "/usr/bin/python3.11-config",
                "/usr/local/bin/R", "/usr/local/bin/pip3.12", "/usr/local/bin/python3.12", NULL });
        strv_free(l);
}

/* Not merged: /bin is a directory of its own and is listed too. */
static void test_unmerged(void **state) {
        TestDir *d = *state;
        char **l = NULL;

        make_tree(d);
        assert_int_equal(sandbox_probe_interpreters(d->path, false, &l), 0);
        assert_strv_equal(l, (const char *const[]) {
                "/bin/python2",
                "/usr/bin/R", "/usr/bin/Rscript", "/usr/bin/pip", "/usr/bin/pip3", "/usr/bin/python",
                "/usr/bin/python3", "/usr/bin/python3.11", "/usr/bin/python3.11-config",
                "/usr/local/bin/R", "/usr/local/bin/pip3.12", "/usr/local/bin/python3.12", NULL });
        strv_free(l);
}

/* Missing directories are skipped; nothing found is NULL. */
static void test_missing_dirs(void **state) {
        TestDir *d = *state;
        char *sentinel[] = { "untouched", NULL };
        char **l = sentinel;

        assert_int_equal(sandbox_probe_interpreters(d->path, false, &l), 0);
        assert_null(l);

        mkdir_at(d, "usr");
        mkdir_at(d, "usr/bin");
        file_at(d, "usr/bin/Rscript");
        file_at(d, "usr/bin/perl");
        assert_int_equal(sandbox_probe_interpreters(d->path, true, &l), 0);
        assert_strv_equal(l, (const char *const[]) { "/usr/bin/Rscript", NULL });
        strv_free(l);
}

/* A bin directory that is a file: skipped as if missing. */
static void test_bin_not_a_dir(void **state) {
        TestDir *d = *state;
        char **l = NULL;

        mkdir_at(d, "usr");
        file_at(d, "usr/bin");
        mkdir_at(d, "usr/local");
        mkdir_at(d, "usr/local/bin");
        file_at(d, "usr/local/bin/pip");
        assert_int_equal(sandbox_probe_interpreters(d->path, true, &l), 0);
        assert_strv_equal(l, (const char *const[]) { "/usr/local/bin/pip", NULL });
        strv_free(l);
}

/* The real host: every entry absolute under a listed directory, sorted, and a regular file. */
static void test_host(void **state) {
        char **l = NULL;
        struct stat st;

        assert_int_equal(sandbox_probe_interpreters(NULL, true, &l), 0);
        for (size_t i = 0; l && l[i]; i++) {
                assert_true(strncmp(l[i], "/usr/bin/", 9) == 0 || strncmp(l[i], "/usr/local/bin/", 15) == 0);
                assert_int_equal(stat(l[i], &st), 0);
                assert_true(S_ISREG(st.st_mode));
                if (i > 0)
                        assert_true(strcmp(l[i - 1], l[i]) < 0);
        }
        /* Where the host has Debian's python3 (this project's CI does), it is in the list. */
        if (stat("/usr/bin/python3", &st) == 0) {
                bool found = false;

                for (size_t i = 0; l && l[i]; i++)
                        found = found || strcmp(l[i], "/usr/bin/python3") == 0;
                assert_true(found);
        }
        strv_free(l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_merged, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_unmerged, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_missing_dirs, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_bin_not_a_dir, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_host),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
