/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Directories below a directory fd: the sorted names of a directory, mkdir-and-open, and the
 * removal of a whole tree that untrusted code wrote (any depth, any permission bits, never
 * following a symlink). Generic: no policy, no logging; calls only libc.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs-util.h"
#include "util/macro.h"

#define DIR_NAME_MAX_BYTES 255U

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
        *d = NULL;
}

void dir_names_done(DirNames *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i]);
        l->v = mfree(l->v);
        l->n = l->alloc = 0;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int dir_read_names(int dfd, uint64_t *counter, uint64_t max, DirNames *ret) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_(dir_names_done) DirNames l = {};
        int fd;

        /* A file description of its own: the caller's position is left alone. */
        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                (void) safe_close(fd);
                return negative_errno();
        }
        for (;;) {
                struct dirent *de;
                char *s;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return negative_errno();
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (counter) {
                        if (strlen(de->d_name) > DIR_NAME_MAX_BYTES || ++*counter > max)
                                return -E2BIG;
                }
                if (l.n == l.alloc) {
                        size_t na = MAX(l.alloc * 2, (size_t) 16);
                        char **v = reallocarray(l.v, na, sizeof(char *));

                        if (!v)
                                return -ENOMEM;
                        l.v = v;
                        l.alloc = na;
                }
                s = strdup(de->d_name);
                if (!s)
                        return -ENOMEM;
                l.v[l.n++] = s;
        }
        if (l.n > 1)
                qsort(l.v, l.n, sizeof(char *), cmp_names);
        *ret = l;
        l = (DirNames) {};
        return 0;
}

int mkdir_open(int dfd, const char *name, bool *created) {
        int fd;

        if (mkdirat(dfd, name, 0700) >= 0)
                *created = true;
        else if (errno != EEXIST)
                return negative_errno();
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        return fd;
}

/* Give the owner rwx on directory @name of @dfd (checked not to be a symlink) if it lacks it. */
static int dir_make_writable(int dfd, const char *name) {
        struct stat st;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if ((st.st_mode & 0700) == 0700)
                return 0;
        /* Nothing else writes to the tree now (see rm_rf_at()), so the lstat above holds. */
        if (fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0) < 0)
                return negative_errno();
        return 0;
}

/*
 * Empty the directory @fd, whatever the depth and without recursion: two fds at most. Each
 * pass removes the non-directories below @fd's direct subdirectories, renames their own
 * subdirectories up into @fd and removes them; the tree gets one level shallower per pass.
 * Never follows a symlink.
 */
static int rm_rf_children(int fd) {
        uint64_t counter = 0;
        int r;

        for (;;) {
                _cleanup_(dir_names_done) DirNames names = {};

                r = dir_read_names(fd, NULL, 0, &names);
                if (r < 0)
                        return r;
                if (names.n == 0)
                        return 0;

                for (size_t i = 0; i < names.n; i++) {
                        _cleanup_(dir_names_done) DirNames sub_names = {};
                        _cleanup_close_ int sub = -EBADF;
                        const char *name = names.v[i];

                        if (unlinkat(fd, name, 0) >= 0 || errno == ENOENT)
                                continue;
                        if (errno != EISDIR && errno != EPERM)
                                return negative_errno();
                        if (unlinkat(fd, name, AT_REMOVEDIR) >= 0)
                                continue;
                        if (errno != ENOTEMPTY && errno != EEXIST && errno != EACCES && errno != EPERM)
                                return negative_errno();

                        r = dir_make_writable(fd, name);
                        if (r < 0)
                                return r;
                        sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return negative_errno();
                        r = dir_read_names(sub, NULL, 0, &sub_names);
                        if (r < 0)
                                return r;
                        for (size_t j = 0; j < sub_names.n; j++) {
                                const char *n2 = sub_names.v[j];

                                if (unlinkat(sub, n2, 0) >= 0 || errno == ENOENT)
                                        continue;
                                if (errno != EISDIR && errno != EPERM)
                                        return negative_errno();
                                /* Moving a directory to another parent rewrites its "..". */
                                r = dir_make_writable(sub, n2);
                                if (r < 0)
                                        return r;
                                for (;;) {
                                        char hoisted[64];

                                        (void) snprintf(hoisted, sizeof(hoisted), ".cas-rm-%" PRIu64, counter++);
                                        if (renameat2(sub, n2, fd, hoisted, RENAME_NOREPLACE) >= 0)
                                                break;
                                        if (errno != EEXIST)
                                                return negative_errno();
                                }
                        }
                        sub = safe_close(sub);
                        if (unlinkat(fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                                return negative_errno();
                }
        }
}

int rm_rf_at(int parent_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = dir_make_writable(parent_fd, name);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = rm_rf_children(fd);
        if (r < 0)
                return r;
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

