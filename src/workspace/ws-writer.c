/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Atomic writes into a workspace (WsWriter): an unnamed (O_TMPFILE) or randomly named temporary
 * file in the target's directory, hashed while written, synced and renamed over the target on
 * commit; the directories it had to make are removed again when the write is abandoned. Resolves
 * through ws-path.c; may call util/ only besides.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/ws-files-internal.h"
#include "workspace/ws-files.h"

#define WS_TMP_RANDOM 6
#define WS_TMP_ATTEMPTS 64

struct WsWriter {
        int dir_fd;                     /* the target's directory, O_RDONLY (fsync needs it) */
        char *name;                     /* the target's name in dir_fd */
        int fd;                         /* the temporary file; -EBADF once discarded */
        char *tmp_name;                 /* its name in dir_fd while it has one */
        uint64_t max_bytes, written;
        struct sha256_ctx sha;
        int error;                      /* first failure, sticky */
        bool committed;

        /* Directories made by ws_writer_begin(): the path, relative to created_base_fd, of the
         * deepest; all its components from the first one on were created by us. */
        int created_base_fd;
        char *created_path;
};

static int random_tmp_name(char **ret) {
        static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        uint8_t rnd[WS_TMP_RANDOM];
        char *s;
        size_t l = strlen(WS_UPLOAD_TMP_PREFIX);

        for (size_t got = 0; got < sizeof(rnd);) {
                ssize_t k = getrandom(rnd + got, sizeof(rnd) - got, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                got += (size_t) k;
        }
        s = malloc(l + WS_TMP_RANDOM + 1);
        if (!s)
                return -ENOMEM;
        memcpy(s, WS_UPLOAD_TMP_PREFIX, l);
        for (size_t i = 0; i < WS_TMP_RANDOM; i++)
                s[l + i] = chars[rnd[i] % (sizeof(chars) - 1)];
        s[l + WS_TMP_RANDOM] = '\0';
        *ret = s;
        return 0;
}

/* Remove the directories ws_writer_begin() created, deepest first, as long as they are empty. */
static void writer_remove_created(WsWriter *w) {
        while (w->created_path && w->created_path[0]) {
                _cleanup_close_ int pfd = -EBADF;
                char *slash = strrchr(w->created_path, '/');
                const char *name = slash ? slash + 1 : w->created_path;

                if (slash)
                        *slash = '\0';
                pfd = ws_open_beneath(w->created_base_fd, slash ? w->created_path : "", O_PATH | O_DIRECTORY);
                if (pfd < 0 || unlinkat(pfd, name, AT_REMOVEDIR) < 0)
                        break;                  /* not empty any more, or gone: leave the rest */
                if (!slash)
                        break;
        }
        w->created_path = mfree(w->created_path);
        w->created_base_fd = safe_close(w->created_base_fd);
}

/* Drop the temporary file: nothing of the upload stays on disk. */
static void writer_discard(WsWriter *w) {
        w->fd = safe_close(w->fd);
        if (w->tmp_name) {
                (void) unlinkat(w->dir_fd, w->tmp_name, 0);
                w->tmp_name = mfree(w->tmp_name);
        }
        writer_remove_created(w);
}

static int writer_fail(WsWriter *w, int r) {
        if (w->error == 0)
                w->error = r;
        writer_discard(w);
        return w->error;
}

void ws_writer_abort(WsWriter *w) {
        if (!w || w->committed)
                return;
        if (w->error == 0)
                w->error = -ECANCELED;
        writer_discard(w);
}

WsWriter *ws_writer_free(WsWriter *w) {
        if (!w)
                return NULL;
        ws_writer_abort(w);
        safe_close(w->fd);
        safe_close(w->dir_fd);
        safe_close(w->created_base_fd);
        free(w->name);
        free(w->tmp_name);
        free(w->created_path);
        return mfree(w);
}

uint64_t ws_writer_written(const WsWriter *w) {
        return w ? w->written : 0;
}

/* Open (creating 0700 where missing) every component of @parent below @ws_fd; record what we made. */
static int writer_mkdirs(WsWriter *w, int ws_fd, const char *parent) {
        _cleanup_close_ int cur = -EBADF, base = -EBADF;
        size_t created_start = SIZE_MAX, created_end = 0;
        const char *p = parent;
        int r;

        /* O_PATH on the way down: search permission is all a directory needs to be walked. */
        cur = ws_open_beneath(ws_fd, "", O_PATH | O_DIRECTORY);
        if (cur < 0)
                return cur;

        while (*p) {
                _cleanup_close_ int fd = -EBADF;
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);
                _cleanup_free_ char *name = strndup(p, len);

                if (!name)
                        return -ENOMEM;
                fd = ws_open_beneath(cur, name, O_PATH | O_DIRECTORY);
                if (fd == -ENOENT) {
                        if (mkdirat(cur, name, 0700) >= 0) {
                                if (created_start == SIZE_MAX) {
                                        created_start = (size_t) (p - parent);
                                        base = fcntl(cur, F_DUPFD_CLOEXEC, 3);
                                        if (base < 0)
                                                return negative_errno();
                                }
                                created_end = (size_t) (p - parent) + len;
                        } else if (errno != EEXIST)
                                return negative_errno();
                        /* Open what is there now, with the same checks: never trust the mkdir. */
                        fd = ws_open_beneath(cur, name, O_PATH | O_DIRECTORY);
                }
                if (fd < 0)
                        return fd;
                safe_close(cur);
                cur = STEAL_FD(fd);
                p = slash ? slash + 1 : p + len;
        }

        if (created_start != SIZE_MAX) {
                w->created_path = strndup(parent + created_start, created_end - created_start);
                if (!w->created_path)
                        return -ENOMEM;
                w->created_base_fd = STEAL_FD(base);
        }
        /* The target's directory itself is needed readable: fsync() refuses O_PATH fds. */
        r = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return r < 0 ? negative_errno() : r;
}

static int writer_open_tmp(WsWriter *w) {
        int r;

        if (!(ws_files_test_flags() & WS_TEST_NO_TMPFILE)) {
                w->fd = openat(w->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
                if (w->fd >= 0)
                        return 0;
                /* EISDIR: a kernel without O_TMPFILE; EOPNOTSUPP: a file system without it. */
                if (!(errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
                        return negative_errno();
        }

        for (unsigned attempt = 0; attempt < WS_TMP_ATTEMPTS; attempt++) {
                _cleanup_free_ char *tmp = NULL;

                r = random_tmp_name(&tmp);
                if (r < 0)
                        return r;
                w->fd = openat(w->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (w->fd >= 0) {
                        w->tmp_name = STEAL(tmp);
                        return 0;
                }
                if (errno != EEXIST)
                        return negative_errno();
        }
        return -EEXIST;
}

int ws_writer_begin(int ws_fd, const char *path, uint64_t max_bytes, bool mkdirs, WsWriter **ret) {
        _cleanup_(ws_writer_freep) WsWriter *w = NULL;
        _cleanup_free_ char *parent = NULL;
        const char *name;
        struct stat st;
        int r;

        r = ws_path_split(path, &parent, &name);
        if (r < 0)
                return r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (WsWriter) {
                .dir_fd = -EBADF,
                .fd = -EBADF,
                .created_base_fd = -EBADF,
                .max_bytes = max_bytes,
        };
        sha256_init(&w->sha);
        w->name = strdup(name);
        if (!w->name)
                return -ENOMEM;

        if (mkdirs)
                w->dir_fd = writer_mkdirs(w, ws_fd, parent);
        else
                w->dir_fd = ws_open_beneath(ws_fd, parent, O_RDONLY | O_DIRECTORY);
        if (w->dir_fd < 0)
                return w->dir_fd;       /* freeing w removes any directory made */

        /* Fail early rather than after a 1 GiB body; commit's rename checks again, atomically. */
        if (fstatat(w->dir_fd, w->name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode))
                return -EISDIR;

        r = writer_open_tmp(w);
        if (r < 0)
                return r;

        *ret = STEAL(w);
        return 0;
}

int ws_writer_write(WsWriter *w, const void *p, size_t n) {
        int r;

        if (!w || (!p && n > 0))
                return -EINVAL;
        if (w->committed)
                return -EALREADY;
        if (w->error < 0)
                return w->error;
        if (n > w->max_bytes - w->written)
                return writer_fail(w, -EFBIG);

        r = loop_write(w->fd, p, n);
        if (r < 0)
                return writer_fail(w, r);
        sha256_update(&w->sha, n, p);
        w->written += n;
        return 0;
}

/* Give the O_TMPFILE file a (temporary, random) name in the target's directory. */
static int writer_link_tmpfile(WsWriter *w) {
        char proc[sizeof("/proc/self/fd/") + 12];
        bool have_proc = access("/proc/self/fd", F_OK) >= 0;
        int r;

        (void) snprintf(proc, sizeof(proc), "/proc/self/fd/%i", w->fd);
        for (unsigned attempt = 0; attempt < WS_TMP_ATTEMPTS; attempt++) {
                _cleanup_free_ char *tmp = NULL;

                r = random_tmp_name(&tmp);
                if (r < 0)
                        return r;
                /* linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc magic link does not.
                 * It names the open file itself, so no path is resolved twice. */
                if (have_proc)
                        r = linkat(AT_FDCWD, proc, w->dir_fd, tmp, AT_SYMLINK_FOLLOW);
                else
                        r = linkat(w->fd, "", w->dir_fd, tmp, AT_EMPTY_PATH);
                if (r >= 0) {
                        w->tmp_name = STEAL(tmp);
                        return 0;
                }
                if (errno != EEXIST)
                        return negative_errno();
        }
        return -EEXIST;
}

void ws_writer_sha256(const WsWriter *w, uint8_t ret[32]) {
        struct sha256_ctx copy = w->sha;

        sha256_digest(&copy, SHA256_DIGEST_SIZE, ret);
}

int ws_writer_chmod(WsWriter *w, mode_t mode) {
        if (!w || (mode & ~(mode_t) 0777))
                return -EINVAL;
        if (w->committed)
                return -EALREADY;
        if (w->error < 0)
                return w->error;
        if (fchmod(w->fd, mode) < 0)
                return writer_fail(w, negative_errno());
        return 0;
}

static int writer_commit(WsWriter *w, bool replace, uint8_t ret_sha256[32]) {
        int r;

        if (!w)
                return -EINVAL;
        if (w->committed)
                return -EALREADY;
        if (w->error < 0)
                return w->error;

        if (fsync(w->fd) < 0)
                return writer_fail(w, negative_errno());
        if (!w->tmp_name) {
                r = writer_link_tmpfile(w);
                if (r < 0)
                        return writer_fail(w, r);
        }
        /* Atomic: readers see the old file or the whole new one. Replaces a symlink itself (the
         * last component is never followed); refuses a directory (EISDIR). */
        if (replace)
                r = renameat(w->dir_fd, w->tmp_name, w->dir_fd, w->name);
        else
                /* Atomic against any other writer too, the sandbox included: -EEXIST if taken. */
                r = renameat2(w->dir_fd, w->tmp_name, w->dir_fd, w->name, RENAME_NOREPLACE);
        if (r < 0)
                return writer_fail(w, negative_errno());
        w->tmp_name = mfree(w->tmp_name);
        w->committed = true;
        (void) fsync(w->dir_fd);                /* best effort: the data itself is synced */

        w->fd = safe_close(w->fd);
        w->created_path = mfree(w->created_path);
        w->created_base_fd = safe_close(w->created_base_fd);
        if (ret_sha256)
                sha256_digest(&w->sha, SHA256_DIGEST_SIZE, ret_sha256);
        return 0;
}

int ws_writer_commit(WsWriter *w, uint8_t ret_sha256[32]) {
        return writer_commit(w, true, ret_sha256);
}

int ws_writer_commit_noreplace(WsWriter *w, uint8_t ret_sha256[32]) {
        return writer_commit(w, false, ret_sha256);
}
