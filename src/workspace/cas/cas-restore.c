/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cas_restore(): build a tree into a hidden sibling of the workspace, make it durable, swap it
 * in with RENAME_EXCHANGE, remove the old tree and seed the stat cache; and the removal of what
 * an interrupted restore left behind. Calls cas-tree.c, cas-stat-cache.c, cas-digest.c,
 * util/fs-util, util/io-util.
 */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"
#include "workspace/workspace.h"

/* ".<ws_name>.cas-restore-<16 lowercase hex>" exactly. */
static bool is_restore_leftover(const char *name, const char *ws_name) {
        size_t l = strlen(ws_name);

        if (name[0] != '.' || strncmp(name + 1, ws_name, l) != 0)
                return false;
        name += 1 + l;
        if (strncmp(name, RESTORE_SUFFIX, strlen(RESTORE_SUFFIX)) != 0)
                return false;
        name += strlen(RESTORE_SUFFIX);
        if (strlen(name) != RESTORE_RANDOM_LEN)
                return false;
        for (; *name; name++)
                if (cas_unhex_lower(*name) < 0)
                        return false;
        return true;
}

typedef struct Restore {
        Cas *cas;
        StatCache cache;
        Buf path;
        uint64_t entries;
        uint8_t *buf;           /* read/write fallback of copy_file_range(), allocated on demand */
} Restore;

static void restore_done(Restore *r) {
        cas_stat_cache_done(&r->cache);
        buf_done(&r->path);
        r->buf = mfree(r->buf);
}

static int restore_copy(Restore *rs, int in, int out, uint64_t size) {
        bool fallback = false;

        while (size > 0) {
                ssize_t n;

                if (!fallback) {
                        n = copy_file_range(in, NULL, out, NULL, (size_t) MIN(size, (uint64_t) 1 << 30), 0);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                                      errno == EOPNOTSUPP || errno == EBADF)) {
                                fallback = true;
                                continue;
                        }
                } else {
                        if (!rs->buf) {
                                rs->buf = malloc(IO_BUFFER_SIZE);
                                if (!rs->buf)
                                        return -ENOMEM;
                        }
                        n = loop_read(in, rs->buf, (size_t) MIN(size, (uint64_t) IO_BUFFER_SIZE));
                        if (n > 0) {
                                int r = loop_write(out, rs->buf, (size_t) n);

                                if (r < 0)
                                        return r;
                        }
                }
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        return -EIO;    /* the object is shorter than its tree says */
                size -= (uint64_t) n;
        }
        return 0;
}

static int restore_entries(Restore *rs, const Tree *t, int dfd, unsigned depth) {
        Cas *c = rs->cas;
        int r;

        if (t->n > 0 && depth + 1 > c->limits.max_depth)
                return -E2BIG;
        rs->entries += t->n;
        if (rs->entries > c->limits.max_entries)
                return -E2BIG;
        r = buf_reserve(&rs->path, NAME_MAX_BYTES + 1);
        if (r < 0)
                return r;

        for (size_t i = 0; i < t->n; i++) {
                const TreeEntry *e = &t->entries[i];
                size_t mark = rs->path.size;

                if (mark > 0)
                        rs->path.data[rs->path.size++] = '/';
                memcpy(rs->path.data + rs->path.size, e->name, strlen(e->name) + 1);
                rs->path.size += strlen(e->name);

                if (e->type == DT_REG) {
                        _cleanup_close_ int in = -EBADF, out = -EBADF;
                        struct stat st;
                        char rel[66];

                        digest_relpath(&e->digest, rel);
                        in = openat(c->objects_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                        if (in < 0)
                                return errno == ENOENT ? -EIO : negative_errno();
                        if (fstat(in, &st) < 0)
                                return negative_errno();
                        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != e->size)
                                return -EIO;
                        out = openat(dfd, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                        if (out < 0)
                                return negative_errno();
                        r = restore_copy(rs, in, out, e->size);
                        if (r < 0)
                                return r;
                        if (fchmod(out, e->mode) < 0 || fstat(out, &st) < 0)
                                return negative_errno();
                        r = cas_stat_cache_add(&rs->cache, rs->path.data, &st, &e->digest);
                        if (r < 0)
                                return r;
                } else if (e->type == DT_DIR) {
                        _cleanup_(tree_done) Tree sub_tree = {};
                        _cleanup_close_ int sub = -EBADF;

                        r = tree_load(c, &e->digest, &sub_tree);
                        if (r < 0)
                                return r == -ENOENT ? -EIO : r;
                        if (mkdirat(dfd, e->name, 0700) < 0)
                                return negative_errno();
                        sub = openat(dfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return negative_errno();
                        r = restore_entries(rs, &sub_tree, sub, depth + 1);
                        if (r < 0)
                                return r;
                        /* Last, once filled: the recorded mode may deny the owner write access. */
                        if (fchmod(sub, e->mode) < 0)
                                return negative_errno();
                } else {
                        if (symlinkat(e->target, dfd, e->name) < 0)
                                return negative_errno();
                }

                rs->path.size = mark;
                rs->path.data[mark] = 0;
        }
        return 0;
}

/* Remove what an interrupted restore of @ws_name left beside it. */
static int restore_cleanup(int parent_fd, const char *ws_name) {
        _cleanup_(dir_names_done) DirNames names = {};
        int r;

        r = dir_read_names(parent_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++) {
                if (!is_restore_leftover(names.v[i], ws_name))
                        continue;
                r = rm_rf_at(parent_fd, names.v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * Build tree @root in the new directory @tmp of @parent_fd and make it durable. On failure
 * @tmp is removed again, except after an injected crash.
 */
static int restore_build(Restore *rs, const Tree *root, int parent_fd, const char *tmp) {
        _cleanup_close_ int dfd = -EBADF;
        Cas *c = rs->cas;
        int r = 0;

        if (mkdirat(parent_fd, tmp, 0700) < 0)
                return negative_errno();
        dfd = openat(parent_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                r = negative_errno();
        if (r >= 0)
                r = buf_put(&rs->path, "", 0);
        if (r >= 0)
                r = restore_entries(rs, root, dfd, 0);
        /* Everything durable before the swap; one syncfs() instead of an fsync per file. */
        if (r >= 0 && syncfs(dfd) < 0)
                r = negative_errno();
        if (r >= 0)
                r = cas_crash_point(c, CAS_CRASH_RESTORE_BUILT);
        if (r < 0) {
                if (!c->crashed)
                        (void) rm_rf_at(parent_fd, tmp);
                return r;
        }
        return 0;
}

/* Seed the stat cache with the files just written, except those of the last clock tick. */
static void restore_seed_cache(Restore *rs, const char *ws_name, const struct timespec *racy) {
        size_t kept = 0;

        for (size_t i = 0; i < rs->cache.n; i++) {
                struct timespec ct = {
                        .tv_sec = (time_t) (rs->cache.rows[i].ctime / UINT64_C(1000000000)),
                        .tv_nsec = (long) (rs->cache.rows[i].ctime % UINT64_C(1000000000)),
                };

                if (cas_ts_before(&ct, racy))
                        rs->cache.rows[kept++] = rs->cache.rows[i];
                else
                        free(rs->cache.rows[i].path);
        }
        rs->cache.n = kept;
        (void) cas_stat_cache_write(rs->cas, ws_name, &rs->cache, &(const Buf) {});
}

int cas_restore(Cas *c, const char *tree_digest, int parent_fd, const char *ws_name) {
        _cleanup_(restore_done) Restore rs = { .cas = c };
        _cleanup_(tree_done) Tree root = {};
        _cleanup_close_ int lock = -EBADF;
        char tmp[1 + 128 + sizeof(RESTORE_SUFFIX) + RESTORE_RANDOM_LEN + 1];
        struct timespec racy;
        struct stat st;
        bool exists = true;
        uint64_t rnd;
        Digest d;
        int r;

        assert(c);

        if (!workspace_id_valid(ws_name))
                return -EINVAL;
        r = digest_parse(tree_digest, &d);
        if (r < 0)
                return r;
        c->crashed = false;

        lock = cas_store_lock(c, LOCK_SH);
        if (lock < 0)
                return lock;
        r = tree_load(c, &d, &root);
        if (r < 0)
                return r;

        if (fstatat(parent_fd, ws_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return negative_errno();
                exists = false;
        } else if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;

        r = restore_cleanup(parent_fd, ws_name);
        if (r < 0)
                return r;

        r = cas_random_u64(&rnd);
        if (r < 0)
                return r;
        (void) snprintf(tmp, sizeof(tmp), ".%s" RESTORE_SUFFIX "%016" PRIx64, ws_name, rnd);
        r = restore_build(&rs, &root, parent_fd, tmp);
        if (r < 0)
                return r;
        racy = cas_now_coarse();

        if (renameat2(parent_fd, tmp, parent_fd, ws_name, exists ? RENAME_EXCHANGE : RENAME_NOREPLACE) < 0) {
                r = negative_errno();
                (void) rm_rf_at(parent_fd, tmp);
                return r;
        }
        r = fsync_at(parent_fd, ".");
        if (r < 0)
                return r;
        r = cas_crash_point(c, CAS_CRASH_RESTORE_EXCHANGED);
        if (r < 0)
                return r;

        /* The new tree is in place: the restore has succeeded. The old one (now under the temp
         * name) goes; if that fails, the next restore of this workspace removes what is left. */
        if (exists)
                (void) rm_rf_at(parent_fd, tmp);

        restore_seed_cache(&rs, ws_name, &racy);
        return 0;
}
