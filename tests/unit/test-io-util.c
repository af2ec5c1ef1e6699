/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/util/io-util.h on real pipes and files: loop_read() across short reads,
 * EOF and interrupted read()s, loop_write() across short (signal-interrupted) writes and a
 * closed reader, loop_pread() at offsets (the file position untouched), read_file_at() and
 * fsync_at() on a temporary directory.
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
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/io-util.h"
#include "util/macro.h"
#include "test-dir.h"

static volatile sig_atomic_t n_alarms;

static void on_alarm(int sig) {
        (void) sig;
        n_alarms++;
}

/* SIGALRM every @usec without SA_RESTART, so that blocking read()/write() return EINTR or short. */
static void alarm_start(long usec) {
        struct sigaction sa = { .sa_handler = on_alarm };
        struct itimerval it = {
                .it_interval = { .tv_usec = usec },
                .it_value = { .tv_usec = usec },
        };

        n_alarms = 0;
        sigemptyset(&sa.sa_mask);
        assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
        assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
}

static void alarm_stop(void) {
        struct itimerval it = {};

        assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
        (void) signal(SIGALRM, SIG_IGN);
}

static uint8_t pattern(size_t i) {
        return (uint8_t) (i * 31 + i / 251);
}

/* A child that writes @n pattern bytes into @fd in pieces of @piece, pausing @pause_us between. */
static pid_t writer_start(int fd, size_t n, size_t piece, useconds_t pause_us) {
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
                uint8_t buf[4096];

                for (size_t off = 0; off < n;) {
                        size_t k = MIN(piece, n - off);

                        if (k > sizeof(buf))
                                k = sizeof(buf);
                        for (size_t i = 0; i < k; i++)
                                buf[i] = pattern(off + i);
                        if (write(fd, buf, k) != (ssize_t) k)
                                _exit(1);
                        off += k;
                        if (pause_us > 0)
                                (void) usleep(pause_us);
                }
                _exit(0);
        }
        return pid;
}

static void child_wait_ok(pid_t pid) {
        int status;

        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_read_short_reads(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        uint8_t buf[1000];
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        /* 1000 bytes in pieces of 7: every read() of the pipe is short. */
        pid = writer_start(p[1], sizeof(buf), 7, 100);
        p[1] = safe_close(p[1]);
        assert_int_equal(loop_read(p[0], buf, sizeof(buf)), (ssize_t) sizeof(buf));
        for (size_t i = 0; i < sizeof(buf); i++)
                assert_int_equal(buf[i], pattern(i));
        child_wait_ok(pid);
}

static void test_read_eof(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        uint8_t buf[64];

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write(p[1], "hello", 5), 5);
        p[1] = safe_close(p[1]);
        /* Fewer bytes than asked for: only at end of file. */
        assert_int_equal(loop_read(p[0], buf, sizeof(buf)), 5);
        assert_memory_equal(buf, "hello", 5);
        /* Then end of file again, and a zero-byte read. */
        assert_int_equal(loop_read(p[0], buf, sizeof(buf)), 0);
        assert_int_equal(loop_read(p[0], buf, 0), 0);
}

static void test_read_stops_at_n(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        char buf[8] = {};

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write(p[1], "0123456789", 10), 10);
        /* The writer stays open: the loop must not wait for more than it was asked for. */
        assert_int_equal(loop_read(p[0], buf, 4), 4);
        assert_memory_equal(buf, "0123", 4);
        assert_int_equal(loop_read(p[0], buf, 6), 6);
        assert_memory_equal(buf, "456789", 6);
}

static void test_read_interrupted(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        uint8_t buf[300];
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        /* The data comes late; meanwhile SIGALRM interrupts the blocked read() (EINTR). */
        pid = writer_start(p[1], sizeof(buf), 100, 50 * 1000);
        p[1] = safe_close(p[1]);
        alarm_start(5 * 1000);
        assert_int_equal(loop_read(p[0], buf, sizeof(buf)), (ssize_t) sizeof(buf));
        alarm_stop();
        assert_true(n_alarms > 0);
        for (size_t i = 0; i < sizeof(buf); i++)
                assert_int_equal(buf[i], pattern(i));
        child_wait_ok(pid);
}

static void test_read_error(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        char buf[4];

        assert_int_equal(loop_read(-1, buf, sizeof(buf)), -EBADF);
        assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        /* Not for non-blocking fds: EAGAIN is returned, not waited out. */
        assert_int_equal(loop_read(p[0], buf, sizeof(buf)), -EAGAIN);

        assert_int_equal(errno_from_ssize(-ENOENT), -ENOENT);
        assert_int_equal(errno_from_ssize(-4095), -4095);
        assert_int_equal(errno_from_ssize(-((ssize_t) 1 << 40)), -EIO);    /* no truncation to 0 */
}

static void test_pread(void **state) {
        char buf[16] = {};
        off_t pos;
        int fd;

        fd = memfd_create("test-pread", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "0123456789", 10), 10);
        assert_int_equal(lseek(fd, 3, SEEK_SET), 3);

        /* From the offset asked for, to the end of the file, and the file position stays. */
        assert_int_equal(loop_pread(fd, buf, sizeof(buf), 4), 6);
        assert_memory_equal(buf, "456789", 6);
        assert_int_equal(loop_pread(fd, buf, 2, 0), 2);
        assert_memory_equal(buf, "01", 2);
        assert_int_equal(loop_pread(fd, buf, sizeof(buf), 10), 0);
        assert_int_equal(loop_pread(fd, buf, sizeof(buf), 100), 0);
        pos = lseek(fd, 0, SEEK_CUR);
        assert_int_equal(pos, 3);

        assert_int_equal(loop_pread(fd, buf, 1, (uint64_t) INT64_MAX + 1), -EINVAL);
        assert_int_equal(loop_pread(-1, buf, 1, 0), -EBADF);
        close(fd);
}

static void test_pread_pipe(void **state) {
        char buf[4];
        int p[2];

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(loop_pread(p[0], buf, sizeof(buf), 0), -ESPIPE);
        close(p[0]);
        close(p[1]);
}

static void test_write_short_writes(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        _cleanup_free_ uint8_t *data = NULL;
        const size_t n = 4U << 20;
        pid_t pid;
        int status;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        data = malloc(n);
        assert_non_null(data);
        for (size_t i = 0; i < n; i++)
                data[i] = pattern(i);

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* A slow reader, checking every byte. */
                uint8_t buf[4096];
                size_t off = 0;

                (void) close(p[1]);
                for (;;) {
                        ssize_t k = read(p[0], buf, sizeof(buf));

                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                _exit(2);
                        if (k == 0)
                                break;
                        for (ssize_t i = 0; i < k; i++)
                                if (buf[i] != pattern(off + (size_t) i))
                                        _exit(3);
                        off += (size_t) k;
                        if (off % (256U << 10) < (size_t) k)
                                (void) usleep(2000);
                }
                _exit(off == n ? 0 : 4);
        }
        p[0] = safe_close(p[0]);

        /* A blocked write() to the full pipe that a signal interrupts returns a short count
         * (or EINTR if nothing was written yet): both must be carried on. */
        alarm_start(1000);
        assert_int_equal(loop_write(p[1], data, n), 0);
        alarm_stop();
        assert_true(n_alarms > 0);
        p[1] = safe_close(p[1]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_write_closed_reader(void **state) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };

        (void) signal(SIGPIPE, SIG_IGN);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        p[0] = safe_close(p[0]);
        assert_int_equal(loop_write(p[1], "x", 1), -EPIPE);
        assert_int_equal(loop_write(p[1], "", 0), 0);   /* nothing to write: no write() at all */
        assert_int_equal(loop_write(-1, "x", 1), -EBADF);
}

static void put_file(int dfd, const char *name, const void *data, size_t n) {
        _cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, data, n), 0);
}

static void test_write_then_read_file(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *data = NULL;
        _cleanup_free_ char *big = NULL;
        size_t size = 0;

        put_file(d->fd, "file", "line 1\nline 2\n", 14);
        assert_int_equal(read_file_at(d->fd, "file", 14, &data, &size), 0);
        assert_int_equal(size, 14);
        assert_string_equal(data, "line 1\nline 2\n");      /* NUL-terminated */
        data = mfree(data);

        /* One byte over the limit. */
        assert_int_equal(read_file_at(d->fd, "file", 13, &data, &size), -E2BIG);
        assert_null(data);

        put_file(d->fd, "empty", "", 0);
        assert_int_equal(read_file_at(d->fd, "empty", 0, &data, &size), 0);
        assert_int_equal(size, 0);
        assert_string_equal(data, "");
        data = mfree(data);

        /* Larger than a pipe or a page: written and read back whole. */
        big = malloc(1U << 20);
        assert_non_null(big);
        for (size_t i = 0; i < 1U << 20; i++)
                big[i] = (char) pattern(i);
        put_file(d->fd, "big", big, 1U << 20);
        assert_int_equal(read_file_at(d->fd, "big", UINT64_MAX, &data, &size), 0);
        assert_int_equal(size, 1U << 20);
        assert_memory_equal(data, big, 1U << 20);
}

static void test_read_file_not_regular(void **state) {
        TestDir *d = *state;
        char *data = NULL;
        size_t size = 0;

        assert_int_equal(read_file_at(d->fd, "missing", 100, &data, &size), -ENOENT);
        assert_int_equal(mkdirat(d->fd, "sub", 0700), 0);
        assert_int_equal(read_file_at(d->fd, "sub", 100, &data, &size), -EIO);
        put_file(d->fd, "file", "x", 1);
        assert_int_equal(symlinkat("file", d->fd, "link"), 0);
        /* Never follows a symlink. */
        assert_int_equal(read_file_at(d->fd, "link", 100, &data, &size), -EIO);
        assert_null(data);
}

static void test_read_file_limited(void **state) {
        TestDir *d = *state;
        char *data = NULL;
        size_t size = 0;

        put_file(d->fd, "file", "secret\n", 7);
        for (unsigned flags = 0; flags < 4; flags++) {
                assert_int_equal(read_file_limited(d->fd, "file", O_NOCTTY, 7, flags, &data, &size), 0);
                assert_int_equal(size, 7);
                assert_string_equal(data, "secret\n");     /* NUL-terminated */
                data = mfree(data);
                /* One byte over the limit. */
                assert_int_equal(read_file_limited(d->fd, "file", 0, 6, flags, &data, &size), -EFBIG);
                assert_null(data);
        }

        /* Without the size (a text file). */
        assert_int_equal(read_file_limited(d->fd, "file", 0, 100, READ_FILE_UP_TO_MAX, &data, NULL), 0);
        assert_string_equal(data, "secret\n");
        data = mfree(data);

        put_file(d->fd, "empty", "", 0);
        assert_int_equal(read_file_limited(d->fd, "empty", 0, 0, READ_FILE_UP_TO_MAX, &data, &size), 0);
        assert_int_equal(size, 0);
        assert_string_equal(data, "");
        data = mfree(data);

        assert_int_equal(read_file_limited(d->fd, "missing", 0, 100, 0, &data, &size), -ENOENT);
        assert_int_equal(mkdirat(d->fd, "sub", 0700), 0);
        assert_int_equal(read_file_limited(d->fd, "sub", 0, 100, 0, &data, &size), -EBADFD);
        assert_int_equal(symlinkat("file", d->fd, "link"), 0);
        assert_int_equal(read_file_limited(d->fd, "link", O_NOFOLLOW, 100, 0, &data, &size), -ELOOP);
        /* Followed unless told not to. */
        assert_int_equal(read_file_limited(d->fd, "link", 0, 100, 0, &data, &size), 0);
        assert_string_equal(data, "secret\n");
        data = mfree(data);
}

static void test_fsync_at(void **state) {
        TestDir *d = *state;

        put_file(d->fd, "file", "x", 1);
        assert_int_equal(fsync_at(d->fd, "file"), 0);
        assert_int_equal(fsync_at(d->fd, "."), 0);
        assert_int_equal(fsync_at(d->fd, "missing"), -ENOENT);
        assert_int_equal(symlinkat("file", d->fd, "link"), 0);
        assert_int_equal(fsync_at(d->fd, "link"), -ELOOP);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_read_short_reads),
                cmocka_unit_test(test_read_eof),
                cmocka_unit_test(test_read_stops_at_n),
                cmocka_unit_test(test_read_interrupted),
                cmocka_unit_test(test_read_error),
                cmocka_unit_test(test_pread),
                cmocka_unit_test(test_pread_pipe),
                cmocka_unit_test(test_write_short_writes),
                cmocka_unit_test(test_write_closed_reader),
                cmocka_unit_test_setup_teardown(test_write_then_read_file, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_read_file_not_regular, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_read_file_limited, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_fsync_at, test_dir_setup, test_dir_teardown),
        };

        return cmocka_run_group_tests_name("io-util", tests, NULL, NULL);
}
