/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A fresh directory under /tmp for each test case (cmocka setup and teardown): test_dir_setup()
 * makes it and opens it (TestDir.fd), test_dir_teardown() removes it with all it holds
 * (util/fs-util.h: rm_rf_at(), itself unit-tested by test-fs-util).
 */
#pragma once

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs-util.h"

typedef struct TestDir {
        char path[64];
        int fd;
} TestDir;

static inline int test_dir_setup(void **state) {
        TestDir *d = calloc(1, sizeof(TestDir));

        assert_non_null(d);
        (void) snprintf(d->path, sizeof(d->path), "/tmp/sr-unit-test.XXXXXX");
        assert_non_null(mkdtemp(d->path));
        d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(d->fd >= 0);
        *state = d;
        return 0;
}

static inline int test_dir_teardown(void **state) {
        TestDir *d = *state;
        char name[64];

        (void) snprintf(name, sizeof(name), "%s", strrchr(d->path, '/') + 1);
        (void) close(d->fd);
        d->fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(d->fd >= 0);
        assert_int_equal(rm_rf_at(d->fd, name), 0);
        (void) close(d->fd);
        free(d);
        return 0;
}
