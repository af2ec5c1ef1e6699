/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* File-descriptor helpers. */

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"

int memfd_new_data(const char *name, const void *data, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, data, size);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return negative_errno();
        return STEAL_FD(fd);
}

int fd_nonblock(int fd, int nonblock) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0)
                return negative_errno();
        flags = nonblock ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
        if (fcntl(fd, F_SETFL, flags) < 0)
                return negative_errno();
        return 0;
}

int fd_cloexec(int fd, int cloexec) {
        int flags = fcntl(fd, F_GETFD);

        if (flags < 0)
                return negative_errno();
        flags = cloexec ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC;
        if (fcntl(fd, F_SETFD, flags) < 0)
                return negative_errno();
        return 0;
}
