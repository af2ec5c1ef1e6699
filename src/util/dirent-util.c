/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Directory streams on fds, and reading them past "." and ".." (util/dirent-util.h). Calls nothing but libc. */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>

#include "util/dirent-util.h"

int opendir_fd(int fd, DIR **ret) {
        DIR *d;
        int r;

        assert(fd >= 0);
        assert(ret);

        d = fdopendir(fd);
        if (!d) {
                r = negative_errno();
                (void) safe_close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

int opendir_at(int dfd, const char *path, DIR **ret) {
        int fd;

        assert(path);
        assert(ret);

        fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        return opendir_fd(fd, ret);
}

int readdir_no_dot(DIR *d, struct dirent **ret) {
        struct dirent *de;

        assert(d);
        assert(ret);

        for (;;) {
                errno = 0;
                de = readdir(d);
                if (!de) {
                        *ret = NULL;
                        return errno != 0 ? -errno : 0;
                }
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        break;
        }
        *ret = de;
        return 1;
}
