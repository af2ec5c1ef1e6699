/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-workspace directories under the state directory, and their write lease. */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "util/macro.h"
#include "workspace/workspace.h"

bool workspace_id_valid(const char *id) {
        size_t l;

        if (isempty(id) || id[0] == '.')
                return false;
        l = strlen(id);
        if (l > 128)
                return false;
        for (size_t i = 0; i < l; i++) {
                char c = id[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

int workspace_open(int root_fd, const char *id) {
        int fd;

        if (!workspace_id_valid(id))
                return -EINVAL;
        if (mkdirat(root_fd, id, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(root_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? -ENOTDIR : negative_errno();
        return fd;
}

int workspace_lease_try(int dir_fd) {
        _cleanup_close_ int fd = -EBADF;

        /* A separate open file description: the lease belongs to this fd only. */
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return errno == EWOULDBLOCK ? -EWOULDBLOCK : negative_errno();
        return STEAL_FD(fd);
}
