/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace paths: validation of client-supplied paths and their resolution beneath a workspace
 * fd without following links (openat2, or the component-by-component walk where the kernel has
 * none), and the test hooks of the file API. May call util/ only.
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fd-util.h"
#include "util/macro.h"
#include "util/utf8.h"
#include "workspace/ws-files-internal.h"
#include "workspace/ws-files.h"

#define WS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define WS_OPENAT2_EAGAIN_RETRIES 32

/* Test hooks, and whether the kernel answered ENOSYS to openat2 (then it never will). */
static unsigned test_flags;
static bool openat2_missing;

void ws_files_test_set(unsigned flags) {
        test_flags = flags;
}

unsigned ws_files_test_flags(void) {
        return test_flags;
}

/* -------------------------------------------------------------------------------------------
 * Path validation */

static int component_validate(const char *s, size_t n) {
        if (n == 0)
                return -EINVAL;                 /* leading, trailing or doubled '/' */
        if (n > WS_NAME_MAX)
                return -ENAMETOOLONG;
        if (n == 1 && s[0] == '.')
                return -EINVAL;
        if (n >= 2 && s[0] == '.' && s[1] == '.')
                return -EINVAL;                 /* "..", and "..x" for good measure */
        if (n >= strlen(WS_UPLOAD_TMP_PREFIX) && strneq(s, WS_UPLOAD_TMP_PREFIX, strlen(WS_UPLOAD_TMP_PREFIX)))
                return -EINVAL;
        return 0;
}

int ws_path_validate_n(const char *path, size_t n, bool allow_empty) {
        size_t start = 0;

        if (!path)
                return -EINVAL;
        if (n == 0)
                return allow_empty ? 0 : -EINVAL;
        if (n > WS_PATH_MAX)
                return -ENAMETOOLONG;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) path[i];

                if (c < 0x20 || c == 0x7f || c == '\\')
                        return -EINVAL;         /* NUL, control bytes, DOS separators */
        }
        if (!utf8_valid(path, n))
                return -EINVAL;                 /* also overlong forms such as \xc0\xae for '.' */
        for (size_t i = 0; i <= n; i++) {
                if (i < n && path[i] != '/')
                        continue;
                int r = component_validate(path + start, i - start);
                if (r < 0)
                        return r;
                start = i + 1;
        }
        return 0;
}

int ws_path_validate(const char *path, bool allow_empty) {
        size_t n;

        if (!path)
                return -EINVAL;
        n = strnlen(path, WS_PATH_MAX + 1);
        if (n > WS_PATH_MAX)
                return -ENAMETOOLONG;
        return ws_path_validate_n(path, n, allow_empty);
}

int ws_path_split(const char *path, char **ret_parent, const char **ret_name) {
        const char *slash;
        char *parent;
        int r;

        r = ws_path_validate(path, false);
        if (r < 0)
                return r;
        slash = strrchr(path, '/');
        parent = slash ? strndup(path, (size_t) (slash - path)) : strdup("");
        if (!parent)
                return -ENOMEM;
        *ret_parent = parent;
        *ret_name = slash ? slash + 1 : path;
        return 0;
}

/* -------------------------------------------------------------------------------------------
 * Resolution */

static int openat2_beneath(int dir_fd, const char *path, int flags) {
        struct open_how how = {
                /* With O_PATH, O_NOFOLLOW would return the symlink itself instead of ELOOP. */
                .flags = (uint64_t) ((flags & O_PATH ? flags & ~O_NOFOLLOW : flags) | O_CLOEXEC),
                .resolve = WS_RESOLVE,
        };

        for (unsigned attempt = 0;; attempt++) {
                long fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));

                if (fd >= 0)
                        return (int) fd;
                if (errno == EINTR)
                        continue;
                /* A concurrent rename anywhere on the system makes RESOLVE_BENEATH retry-safe. */
                if (errno == EAGAIN && attempt < WS_OPENAT2_EAGAIN_RETRIES)
                        continue;
                return -errno;
        }
}

/* The mount of @fd (its statx mount id where the kernel has one, else its st_dev) and its type. */
typedef struct FdId {
        uint64_t mnt;
        bool by_mnt_id;
        mode_t mode;
} FdId;

static int fd_id(int fd, FdId *ret) {
        struct statx sx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_TYPE))
                return -EIO;
        *ret = (FdId) {
                .by_mnt_id = sx.stx_mask & STATX_MNT_ID,
                .mnt = sx.stx_mask & STATX_MNT_ID ? sx.stx_mnt_id :
                        ((uint64_t) sx.stx_dev_major << 32 | sx.stx_dev_minor),
                .mode = sx.stx_mode,
        };
        return 0;
}

/* The checks openat2 would make on one component just opened with O_PATH|O_NOFOLLOW. */
static int walk_check(int fd, const FdId *root, bool want_dir) {
        FdId id;
        int r;

        r = fd_id(fd, &id);
        if (r < 0)
                return r;
        if (S_ISLNK(id.mode))
                return -ELOOP;
        if (id.by_mnt_id != root->by_mnt_id || id.mnt != root->mnt)
                return -EXDEV;
        if (want_dir && !S_ISDIR(id.mode))
                return -ENOTDIR;
        return 0;
}

/*
 * The fallback for kernels without openat2: one component at a time, each opened with
 * O_PATH|O_NOFOLLOW (which never blocks, never follows and never opens a device), checked on the
 * fd, and used as the directory of the next. No ".." or absolute component can occur (the path
 * is validated), so staying on the fds keeps the walk beneath @ws_fd.
 */
static int walk_beneath(int ws_fd, const char *path, int flags) {
        _cleanup_close_ int cur = -EBADF;
        const char *p = path;
        FdId root;
        int r;

        r = fd_id(ws_fd, &root);
        if (r < 0)
                return r;

        for (;;) {
                _cleanup_close_ int fd = -EBADF;
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);
                char name[WS_NAME_MAX + 1];
                int dfd = cur >= 0 ? cur : ws_fd;

                if (len == 0 || len > WS_NAME_MAX)
                        return -EINVAL;         /* validated by the caller; defensive */
                memcpy(name, p, len);
                name[len] = '\0';

                if (slash || (flags & (O_PATH | O_DIRECTORY))) {
                        fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                return -errno;
                        r = walk_check(fd, &root, slash || (flags & O_DIRECTORY));
                        if (r < 0)
                                return r;
                        if (slash) {
                                safe_close(cur);
                                cur = STEAL_FD(fd);
                                p = slash + 1;
                                continue;
                        }
                        if (flags & O_PATH)
                                return STEAL_FD(fd);
                        /* Reopen the very directory checked, not the name. */
                        r = openat(fd, ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC);
                        return r < 0 ? -errno : r;
                }

                /* Final non-directory open: O_NOFOLLOW makes a symlink ELOOP, as openat2 does. */
                fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                r = walk_check(fd, &root, false);
                if (r < 0)
                        return r;
                return STEAL_FD(fd);
        }
}

int ws_open_beneath(int ws_fd, const char *path, int flags) {
        int r;

        if (ws_fd < 0 || !path || (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
                return -EINVAL;
        r = ws_path_validate(path, true);
        if (r < 0)
                return r;

        if (path[0] == '\0') {
                r = openat(ws_fd, ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC);
                return r < 0 ? -errno : r;
        }

        if (!(test_flags & WS_TEST_NO_OPENAT2) && !openat2_missing) {
                r = openat2_beneath(ws_fd, path, flags);
                if (r != -ENOSYS)
                        return r;
                openat2_missing = true;
        }
        return walk_beneath(ws_fd, path, flags);
}

