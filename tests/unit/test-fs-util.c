/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/util/fs-util.h on a temporary directory: sorted directory names and their
 * limits, mkdir_open(), and rm_rf_at() on deep trees, closed permission bits and symlinks.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs-util.h"
#include "util/macro.h"
#include "test-dir.h"

static void touch(int dfd, const char *name) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        (void) close(fd);
}

static void test_dir_read_names(void **state) {
        TestDir *d = *state;
        _cleanup_(dir_names_done) DirNames l = {};
        const char *expected[] = { "B", "a", "a.b", "ab", "dir", "\xc3\xa9" };
        uint64_t counter = 0;

        touch(d->fd, "ab");
        touch(d->fd, "\xc3\xa9");
        touch(d->fd, "a.b");
        touch(d->fd, "B");
        touch(d->fd, "a");
        assert_int_equal(mkdirat(d->fd, "dir", 0700), 0);

        /* Bytewise order, without "." and "..". */
        assert_int_equal(dir_read_names(d->fd, NULL, 0, &l), 0);
        assert_int_equal(l.n, ELEMENTSOF(expected));
        for (size_t i = 0; i < l.n; i++)
                assert_string_equal(l.v[i], expected[i]);
        dir_names_done(&l);
        assert_null(l.v);
        assert_int_equal(l.n, 0);

        /* Counting against a limit, across calls. */
        assert_int_equal(dir_read_names(d->fd, &counter, 6, &l), 0);
        assert_int_equal(counter, 6);
        dir_names_done(&l);
        assert_int_equal(dir_read_names(d->fd, &counter, 11, &l), -E2BIG);
        assert_null(l.v);

        /* The caller's fd position is left alone: it reads the same again. */
        assert_int_equal(dir_read_names(d->fd, NULL, 0, &l), 0);
        assert_int_equal(l.n, ELEMENTSOF(expected));
}

static void test_dir_read_names_empty(void **state) {
        TestDir *d = *state;
        _cleanup_(dir_names_done) DirNames l = {};

        assert_int_equal(dir_read_names(d->fd, NULL, 0, &l), 0);
        assert_int_equal(l.n, 0);
        assert_int_equal(dir_read_names(-1, NULL, 0, &l), -EBADF);
}

static void test_mkdir_open(void **state) {
        TestDir *d = *state;
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        bool created = false;
        struct stat st;

        a = mkdir_open(d->fd, "x", &created);
        assert_true(a >= 0);
        assert_true(created);
        assert_int_equal(fstat(a, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0700);

        /* Already there: opened, @created left alone. */
        created = false;
        b = mkdir_open(d->fd, "x", &created);
        assert_true(b >= 0);
        assert_false(created);

        touch(d->fd, "file");
        assert_int_equal(mkdir_open(d->fd, "file", &created), -ENOTDIR);
        assert_int_equal(symlinkat("x", d->fd, "link"), 0);
        /* O_DIRECTORY|O_NOFOLLOW on a symlink: the kernel says ENOTDIR. */
        assert_int_equal(mkdir_open(d->fd, "link", &created), -ENOTDIR);
        assert_int_equal(mkdir_open(d->fd, "missing/y", &created), -ENOENT);
}

static void test_rm_rf_at(void **state) {
        TestDir *d = *state;
        _cleanup_close_ int outside = -EBADF;
        char name[16];
        int fd;
        struct stat st;

        /* Something a symlink in the tree points at: it must survive. */
        assert_int_equal(mkdirat(d->fd, "keep", 0700), 0);
        touch(d->fd, "keep/file");

        /* A tree 300 levels deep, with files, symlinks and closed permission bits on the way. */
        assert_int_equal(mkdirat(d->fd, "t", 0700), 0);
        fd = openat(d->fd, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        for (unsigned i = 0; i < 300; i++) {
                int sub;

                (void) snprintf(name, sizeof(name), "d%u", i);
                touch(fd, "f");
                assert_int_equal(symlinkat("../../../keep", fd, "l"), 0);
                assert_int_equal(mkdirat(fd, name, 0700), 0);
                sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(sub >= 0);
                if (i % 50 == 0)
                        assert_int_equal(fchmod(fd, 0), 0);
                (void) close(fd);
                fd = sub;
        }
        (void) close(fd);

        assert_int_equal(rm_rf_at(d->fd, "t"), 0);
        assert_int_equal(fstatat(d->fd, "t", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(fstatat(d->fd, "keep/file", &st, AT_SYMLINK_NOFOLLOW), 0);

        /* Missing: not an error. Not a directory: -ENOTDIR, left in place. */
        assert_int_equal(rm_rf_at(d->fd, "t"), 0);
        touch(d->fd, "file");
        assert_int_equal(rm_rf_at(d->fd, "file"), -ENOTDIR);
        assert_int_equal(symlinkat("keep", d->fd, "link"), 0);
        assert_int_equal(rm_rf_at(d->fd, "link"), -ENOTDIR);
        outside = openat(d->fd, "keep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(outside >= 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_dir_read_names, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_dir_read_names_empty, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_mkdir_open, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_rm_rf_at, test_dir_setup, test_dir_teardown),
        };

        return cmocka_run_group_tests_name("fs-util", tests, NULL, NULL);
}
