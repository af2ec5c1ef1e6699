/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Workspace file operations: path validation, symlink-proof reads, atomic writes, listings. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "util/dirent-util.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/utf8.h"
#include "workspace/ws-files.h"

#define WS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define WS_IO_BUF (64U * 1024U)
#define WS_TMP_RANDOM 6
#define WS_TMP_ATTEMPTS 64
#define WS_OPENAT2_EAGAIN_RETRIES 32

/* Test hooks, and whether the kernel answered ENOSYS to openat2 (then it never will). */
static unsigned test_flags;
static bool openat2_missing;

void ws_files_test_set(unsigned flags) {
        test_flags = flags;
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

/* Split a validated, non-empty @path at its last '/': *ret_parent is "" for a top-level name. */
static int path_split(const char *path, char **ret_parent, const char **ret_name) {
        const char *slash = strrchr(path, '/');
        char *parent;

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

/* -------------------------------------------------------------------------------------------
 * Reads and digests */

int ws_file_open_read(int ws_fd, const char *path, uint64_t max_size, int *ret_fd, struct stat *ret_st) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        r = ws_path_validate(path, false);
        if (r < 0)
                return r;

        /* O_NONBLOCK: opening a FIFO returns at once (to be refused below) instead of waiting
         * for a writer the sandbox never provides. */
        fd = ws_open_beneath(ws_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd == -ENXIO)
                return -EBADFD;                 /* a socket, or a device without a driver */
        if (fd < 0)
                return fd;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (S_ISLNK(st.st_mode))
                return -ELOOP;                  /* cannot happen with O_NOFOLLOW; defensive */
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if (st.st_nlink > 1)
                return -EMLINK;
        if (st.st_size < 0 || (uint64_t) st.st_size > max_size)
                return -EFBIG;

        r = fd_nonblock(fd, false);
        if (r < 0)
                return r;

        *ret_fd = STEAL_FD(fd);
        if (ret_st)
                *ret_st = st;
        return 0;
}

int ws_file_sha256(int fd, uint64_t max, uint8_t ret[32]) {
        _cleanup_free_ uint8_t *buf = NULL;
        struct sha256_ctx ctx;
        uint64_t off = 0;

        buf = malloc(WS_IO_BUF);
        if (!buf)
                return -ENOMEM;
        sha256_init(&ctx);
        for (;;) {
                ssize_t k = pread(fd, buf, WS_IO_BUF, (off_t) off);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                if ((uint64_t) k > max - off)
                        return -EFBIG;          /* grew past the limit meanwhile */
                sha256_update(&ctx, (size_t) k, buf);
                off += (uint64_t) k;
        }
        sha256_digest(&ctx, SHA256_DIGEST_SIZE, ret);
        return 0;
}

int ws_repr_digest(const uint8_t d[32], char **ret_header_value) {
        char b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE) + 1];
        char *s;

        base64_encode_raw(b64, SHA256_DIGEST_SIZE, d);
        b64[BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE)] = '\0';
        if (asprintf(&s, "sha-256=:%s:", b64) < 0)
                return -ENOMEM;
        *ret_header_value = s;
        return 0;
}

/* -------------------------------------------------------------------------------------------
 * Atomic writes */

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

        if (!(test_flags & WS_TEST_NO_TMPFILE)) {
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

        r = ws_path_validate(path, false);
        if (r < 0)
                return r;
        r = path_split(path, &parent, &name);
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

int ws_writer_commit(WsWriter *w, uint8_t ret_sha256[32]) {
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
        if (renameat(w->dir_fd, w->tmp_name, w->dir_fd, w->name) < 0)
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

/* -------------------------------------------------------------------------------------------
 * Listing and removal */

static const char *const entry_type_table[_WS_ENTRY_TYPE_MAX] = {
        [WS_ENTRY_FILE] = "file",
        [WS_ENTRY_DIR] = "dir",
        [WS_ENTRY_SYMLINK] = "symlink",
        [WS_ENTRY_OTHER] = "other",
};

const char *ws_entry_type_to_string(WsEntryType t) {
        if (t < 0 || t >= _WS_ENTRY_TYPE_MAX)
                return NULL;
        return entry_type_table[t];
}

WsEntry *ws_entries_free(WsEntry *e, size_t n) {
        if (!e)
                return NULL;
        for (size_t i = 0; i < n; i++)
                free(e[i].name);
        return mfree(e);
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const WsEntry *) a)->name, ((const WsEntry *) b)->name);
}

int ws_list_dir_max(int ws_fd, const char *dir_path, size_t max_entries, WsEntry **ret, size_t *ret_n) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF;
        WsEntry *e = NULL;
        size_t n = 0, allocated = 0;
        int r;

        r = ws_path_validate(dir_path, true);
        if (r < 0)
                return r;
        fd = ws_open_beneath(ws_fd, dir_path, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        r = opendir_fd(STEAL_FD(fd), &d);
        if (r < 0)
                return r;

        for (;;) {
                struct dirent *de;
                struct stat st;
                WsEntryType type;

                r = readdir_no_dot(d, &de);
                if (r < 0)
                        goto fail;
                if (r == 0)
                        break;
                if (n >= max_entries) {
                        r = -E2BIG;
                        goto fail;
                }
                /* One component, relative to the directory fd, not followed: race-free. */
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue;       /* removed meanwhile */
                        r = negative_errno();
                        goto fail;
                }
                type = S_ISREG(st.st_mode) ? WS_ENTRY_FILE :
                       S_ISDIR(st.st_mode) ? WS_ENTRY_DIR :
                       S_ISLNK(st.st_mode) ? WS_ENTRY_SYMLINK : WS_ENTRY_OTHER;

                if (n >= allocated) {
                        size_t na = allocated ? allocated * 2 : 64;
                        WsEntry *ne = reallocarray(e, na, sizeof(*e));
                        if (!ne) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        e = ne;
                        allocated = na;
                }
                e[n] = (WsEntry) {
                        .name = strdup(de->d_name),
                        .name_valid = ws_path_validate(de->d_name, false) >= 0 && !strchr(de->d_name, '/'),
                        .type = type,
                        .size = (type == WS_ENTRY_FILE || type == WS_ENTRY_SYMLINK) && st.st_size > 0 ?
                                (uint64_t) st.st_size : 0,
                        .mtime_usec = (int64_t) st.st_mtim.tv_sec * (int64_t) USEC_PER_SEC +
                                      st.st_mtim.tv_nsec / (int64_t) NSEC_PER_USEC,
                };
                if (!e[n].name) {
                        r = -ENOMEM;
                        goto fail;
                }
                n++;
        }

        if (n > 0)
                qsort(e, n, sizeof(*e), entry_cmp);
        *ret = e;
        *ret_n = n;
        return 0;

fail:
        ws_entries_free(e, n);
        return r;
}

int ws_list_dir(int ws_fd, const char *dir_path, WsEntry **ret, size_t *ret_n) {
        return ws_list_dir_max(ws_fd, dir_path, WS_LIST_MAX_ENTRIES, ret, ret_n);
}

int ws_remove(int ws_fd, const char *path) {
        _cleanup_free_ char *parent = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *name;
        int r;

        r = ws_path_validate(path, false);
        if (r < 0)
                return r;
        r = path_split(path, &parent, &name);
        if (r < 0)
                return r;
        pfd = ws_open_beneath(ws_fd, parent, O_PATH | O_DIRECTORY);
        if (pfd < 0)
                return pfd;

        /* unlinkat() never follows the last component: a symlink is removed itself. */
        if (unlinkat(pfd, name, 0) >= 0)
                return 0;
        if (errno != EISDIR)
                return negative_errno();
        if (unlinkat(pfd, name, AT_REMOVEDIR) >= 0)
                return 0;
        return errno == EEXIST ? -ENOTEMPTY : negative_errno();
}
