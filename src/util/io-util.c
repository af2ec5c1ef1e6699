/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Blocking I/O on file descriptors: read() and write() loops that retry after EINTR and
 * continue after short counts, reading a whole small file below a directory fd, fsync() of a
 * directory entry. Generic: no policy, no logging; calls only libc.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io-util.h"
#include "util/macro.h"

ssize_t loop_read(int fd, void *buf, size_t n) {
        size_t done = 0;

        while (done < n) {
                ssize_t k = read(fd, (uint8_t *) buf + done, MIN(n - done, (size_t) SSIZE_MAX));

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

int loop_write(int fd, const void *buf, size_t n) {
        const uint8_t *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, MIN(n, (size_t) SSIZE_MAX));

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int fsync_at(int dfd, const char *name) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        if (fsync(fd) < 0)
                return negative_errno();
        return 0;
}

int read_file_at(int dfd, const char *name, uint64_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *data = NULL;
        struct stat st;
        ssize_t n;

        fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return errno == ELOOP ? -EIO : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EIO;
        if ((uint64_t) st.st_size > max || (uint64_t) st.st_size >= SIZE_MAX)
                return -E2BIG;
        data = malloc((size_t) st.st_size + 1);
        if (!data)
                return -ENOMEM;
        /* One byte more than expected: a file that grew meanwhile is not silently cut. */
        n = loop_read(fd, data, (size_t) st.st_size + 1);
        if (n < 0)
                return (int) n;
        if ((uint64_t) n != (uint64_t) st.st_size)
                return -EIO;
        data[n] = 0;
        *ret = STEAL(data);
        *ret_size = (size_t) n;
        return 0;
}
