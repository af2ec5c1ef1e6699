/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace file operations: symlink-proof reads and their digests, listings and removal. Paths
 * are validated and resolved by ws-path.c, atomic writes are ws-writer.c's. May call util/ only.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "util/dirent-util.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/string-table.h"
#include "workspace/ws-files-internal.h"
#include "workspace/ws-files.h"

#define WS_IO_BUF (64U * 1024U)

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
                ssize_t k = loop_pread(fd, buf, WS_IO_BUF, off);

                if (k < 0)
                        return errno_from_ssize(k);
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
 * Listing and removal */

static const char *const ws_entry_type_table[_WS_ENTRY_TYPE_MAX] = {
        [WS_ENTRY_FILE] = "file",
        [WS_ENTRY_DIR] = "dir",
        [WS_ENTRY_SYMLINK] = "symlink",
        [WS_ENTRY_OTHER] = "other",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(ws_entry_type, WsEntryType)

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

        r = ws_path_split(path, &parent, &name);
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
