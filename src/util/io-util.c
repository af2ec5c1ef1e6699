/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Blocking I/O on file descriptors: read() and write() loops that retry after EINTR and
 * continue after short counts, reading a whole small file (below a directory fd, or bounded by a
 * size limit), fsync() of a directory entry. Generic: no policy, no logging; calls only libc.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io-util.h"
#include "util/macro.h"

/* read(), or with @off >= 0 pread() from @off on. */
static ssize_t loop_read_at(int fd, void *buf, size_t n, int64_t off) {
        size_t done = 0;

        while (done < n) {
                size_t want = MIN(n - done, (size_t) SSIZE_MAX);
                ssize_t k = off < 0 ? read(fd, (uint8_t *) buf + done, want) :
                                      pread(fd, (uint8_t *) buf + done, want, (off_t) (off + (int64_t) done));

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

ssize_t loop_read(int fd, void *buf, size_t n) {
        return loop_read_at(fd, buf, n, -1);
}

ssize_t loop_pread(int fd, void *buf, size_t n, uint64_t off) {
        if (off > INT64_MAX)
                return -EINVAL;
        return loop_read_at(fd, buf, n, (int64_t) off);
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

int read_file_limited(int dfd, const char *path, int open_flags, size_t max, ReadFileFlags flags,
                      char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        char *buf;
        size_t alloc, want;
        struct stat st;
        ssize_t n;

        fd = openat(dfd, path, O_RDONLY | O_CLOEXEC | open_flags);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > (uint64_t) max)
                return -EFBIG;

        want = (flags & READ_FILE_UP_TO_MAX) ? max + 1 : (size_t) st.st_size;
        alloc = (flags & READ_FILE_UP_TO_MAX) ? max + 1 : (size_t) st.st_size + 1;
        buf = (flags & READ_FILE_SECRET) ? calloc(1, alloc) : malloc(alloc);
        if (!buf)
                return -ENOMEM;
        n = loop_read(fd, buf, want);
        if (n < 0 || (size_t) n > max) {
                if (flags & READ_FILE_SECRET)
                        explicit_bzero(buf, want);
                free(buf);
                return n < 0 ? errno_from_ssize(n) : -EFBIG;
        }
        buf[n] = '\0';
        *ret = buf;
        if (ret_size)
                *ret_size = (size_t) n;
        return 0;
}

int write_file_atomic_at(int dfd, const char *name, const void *data, size_t size, mode_t mode) {
        static const char hex[] = "0123456789abcdef";
        char tmp[sizeof(ATOMIC_TMP_PREFIX) + 16];
        uint8_t rnd[8];
        int fd, r;

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return errno > 0 ? -errno : -EIO;
        memcpy(tmp, ATOMIC_TMP_PREFIX, strlen(ATOMIC_TMP_PREFIX));
        for (size_t i = 0; i < sizeof(rnd); i++) {
                tmp[strlen(ATOMIC_TMP_PREFIX) + 2 * i] = hex[rnd[i] >> 4];
                tmp[strlen(ATOMIC_TMP_PREFIX) + 2 * i + 1] = hex[rnd[i] & 15];
        }
        tmp[sizeof(tmp) - 1] = '\0';
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, data, size);
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r >= 0 && errno != EINTR)
                r = -errno;
        if (r >= 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dfd, tmp, 0);
                return r;
        }
        return fsync(dfd) < 0 ? -errno : 0;
}
