/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/util/dirent-util.c: DIR streams on fds, and reading past "." and "..". */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/dirent-util.h"

static char dir[] = "/tmp/test-dirent-util.XXXXXX";
static int dfd = -EBADF;

static int setup(void **state) {
        if (!mkdtemp(dir))
                return -1;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || mkdirat(dfd, "sub", 0755) < 0)
                return -1;
        for (int i = 0; i < 10; i++) {
                char name[16];
                int fd;

                (void) snprintf(name, sizeof(name), "f%d", i);
                fd = openat(dfd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                if (fd < 0)
                        return -1;
                close(fd);
        }
        return 0;
}

static int teardown(void **state) {
        for (int i = 0; i < 10; i++) {
                char name[16];

                (void) snprintf(name, sizeof(name), "f%d", i);
                (void) unlinkat(dfd, name, 0);
        }
        (void) unlinkat(dfd, "sub", AT_REMOVEDIR);
        close(dfd);
        return rmdir(dir);
}

static unsigned count(DIR *d) {
        unsigned n = 0;

        FOREACH_DIRENT(de, d) {
                assert_string_not_equal(de->d_name, ".");
                assert_string_not_equal(de->d_name, "..");
                n++;
        }
        return n;
}

static void test_opendir_at(void **state) {
        _cleanup_(closedirp) DIR *d = NULL, *again = NULL, *sub = NULL;

        assert_int_equal(opendir_at(dfd, ".", &d), 0);
        assert_int_equal(count(d), 11);
        /* Its own file description: a second walk starts at the first entry again. */
        assert_int_equal(opendir_at(dfd, ".", &again), 0);
        assert_int_equal(count(again), 11);

        assert_int_equal(opendir_at(dfd, "sub", &sub), 0);
        assert_int_equal(count(sub), 0);

        assert_int_equal(opendir_at(dfd, "f0", &sub), -ENOTDIR);
        assert_int_equal(opendir_at(dfd, "missing", &sub), -ENOENT);
}

static void test_readdir_no_dot(void **state) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        unsigned n = 0;
        int r;

        assert_int_equal(opendir_fd(openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), &d), 0);
        while ((r = readdir_no_dot(d, &de)) > 0) {
                assert_non_null(de);
                n++;
        }
        assert_int_equal(r, 0);
        assert_null(de);
        assert_int_equal(n, 11);
        assert_int_equal(readdir_no_dot(d, &de), 0);
}

/* Not a directory: fdopendir() fails, and the fd is closed all the same. */
static void test_opendir_fd_not_dir(void **state) {
        DIR *d = NULL;
        int fd = openat(dfd, "f1", O_RDONLY | O_CLOEXEC);

        assert_true(fd >= 0);
        assert_int_equal(opendir_fd(fd, &d), -ENOTDIR);
        assert_null(d);
        assert_int_equal(fcntl(fd, F_GETFD), -1);
        assert_int_equal(errno, EBADF);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_opendir_at),
                cmocka_unit_test(test_readdir_no_dot),
                cmocka_unit_test(test_opendir_fd_not_dir),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
