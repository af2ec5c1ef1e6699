/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cas_snapshot(): walk a workspace below its directory fd (never following a symlink, never
 * resolving a path twice), store new contents as objects (the stat cache skips unchanged
 * files), write the trees bottom-up, then the ref, and rewrite the stat cache. Calls every
 * other part of the store but gc.
 */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"
#include "workspace/workspace.h"

typedef struct Snapshot {
        Cas *cas;
        CasSnapshotStats stats;
        uint64_t entries;
        Buf path;                       /* relative path of the entry being visited */
        StatCache old_cache, new_cache;
        Buf old_cache_raw;
        Pending blobs, trees;
        uint8_t *buf;                   /* IO_BUFFER_SIZE */
        struct timespec racy;           /* entries changed at or after this may not be cached */
} Snapshot;

static void snapshot_done(Snapshot *s) {
        buf_done(&s->path);
        cas_stat_cache_done(&s->old_cache);
        cas_stat_cache_done(&s->new_cache);
        buf_done(&s->old_cache_raw);
        cas_pending_done(s->cas, &s->blobs);
        cas_pending_done(s->cas, &s->trees);
        s->buf = mfree(s->buf);
}

static size_t snapshot_path_push(Snapshot *s, const char *name) {
        size_t mark = s->path.size;

        /* Cannot fail for lack of room: buf_reserve() was done by the caller. */
        if (mark > 0)
                s->path.data[s->path.size++] = '/';
        memcpy(s->path.data + s->path.size, name, strlen(name) + 1);
        s->path.size += strlen(name);
        return mark;
}

static void snapshot_path_pop(Snapshot *s, size_t mark) {
        s->path.size = mark;
        s->path.data[mark] = 0;
}

static int snapshot_maybe_flush(Snapshot *s) {
        int r;

        if (s->trees.n >= BATCH_MAX_OBJECTS) {
                /* Never a tree before the objects it names. */
                r = cas_pending_flush(s->cas, &s->blobs);
                if (r < 0)
                        return r;
                return cas_pending_flush(s->cas, &s->trees);
        }
        if (s->blobs.n >= BATCH_MAX_OBJECTS || s->blobs.bytes >= BATCH_MAX_BYTES)
                return cas_pending_flush(s->cas, &s->blobs);
        return 0;
}

/*
 * Hash the file at @fd and store it unless already present, in one pass: a file that fits the
 * buffer is hashed first and written only if new; a larger one is copied to tmp/ while hashed.
 */
static int snapshot_store_fd(Snapshot *s, int fd, Digest *ret, uint64_t *ret_size) {
        Cas *c = s->cas;
        struct sha256_ctx h;
        _cleanup_close_ int out = -EBADF;
        char tmp[64] = "";
        uint64_t total;
        ssize_t n;
        int r;

        sha256_init(&h);
        n = loop_read(fd, s->buf, IO_BUFFER_SIZE);
        if (n < 0)
                return (int) n;
        sha256_update(&h, (size_t) n, s->buf);
        total = (uint64_t) n;
        if (total > c->limits.max_file_size)
                return -E2BIG;

        if ((size_t) n < IO_BUFFER_SIZE) {
                sha256_digest(&h, sizeof(ret->b), ret->b);
                s->stats.hashed_bytes += total;
                r = cas_object_write_data(c, &s->blobs, ret, s->buf, (size_t) n, CAS_CRASH_OBJECT_WRITTEN);
                if (r < 0)
                        return r;
                s->stats.new_objects += (uint64_t) r;
                *ret_size = total;
                return r > 0 ? snapshot_maybe_flush(s) : 0;
        }

        out = cas_tmp_open(c, tmp, 0444);
        if (out < 0)
                return out;
        for (uint64_t written = 0, synced = 0;;) {
                r = loop_write(out, s->buf, (size_t) n);
                if (r < 0)
                        goto fail;
                /* Start the writeback every few MiB: dirty pages do not pile up until the fsync, and
                 * the disk works while we hash (chunks much smaller than this measured slower). */
                written += (uint64_t) n;
                if (written - synced >= WRITEBACK_CHUNK) {
                        (void) sync_file_range(out, (off_t) synced, (off_t) (written - synced),
                                               SYNC_FILE_RANGE_WRITE);
                        synced = written;
                }
                n = loop_read(fd, s->buf, IO_BUFFER_SIZE);
                if (n < 0) {
                        r = (int) n;
                        goto fail;
                }
                if (n == 0)
                        break;
                if (total + (uint64_t) n > c->limits.max_file_size) {
                        r = -E2BIG;
                        goto fail;
                }
                sha256_update(&h, (size_t) n, s->buf);
                total += (uint64_t) n;
        }
        sha256_digest(&h, sizeof(ret->b), ret->b);
        s->stats.hashed_bytes += total;
        out = safe_close(out);

        r = cas_object_present(c, &s->blobs, ret, total);
        if (r < 0)
                goto fail;
        if (r > 0) {
                cas_tmp_unlink(c, tmp);
                *ret_size = total;
                return 0;
        }
        r = cas_pending_add(&s->blobs, ret, tmp, total);
        if (r < 0)
                goto fail;
        s->stats.new_objects++;
        *ret_size = total;
        r = cas_crash_point(c, CAS_CRASH_OBJECT_WRITTEN);
        if (r < 0)
                return r;
        return snapshot_maybe_flush(s);

fail:
        cas_tmp_unlink(c, tmp);
        return r;
}

/* A regular file. Return: 0, 1 = skipped (not readable), or -errno. */
static int snapshot_file(Snapshot *s, int dfd, const char *name, const struct stat *st, TreeEntry *e) {
        _cleanup_close_ int fd = -EBADF;
        const CacheRow *row;
        struct stat st1, st2;
        uint64_t size = 0;
        int r;

        e->type = DT_REG;
        e->mode = st->st_mode & 0777;

        row = cas_stat_cache_find(&s->old_cache, s->path.data);
        if (row && row->dev == (uint64_t) st->st_dev && row->ino == (uint64_t) st->st_ino &&
            row->size == (uint64_t) st->st_size && row->mtime == cas_ts_key(&st->st_mtim) &&
            row->ctime == cas_ts_key(&st->st_ctim)) {
                /* Unchanged since it was hashed: only check the object is still there (gc). */
                r = cas_object_present(s->cas, &s->blobs, &row->digest, row->size);
                if (r < 0)
                        return r;
                if (r > 0) {
                        e->digest = row->digest;
                        e->size = row->size;
                        return cas_stat_cache_add(&s->new_cache, s->path.data, st, &row->digest);
                }
        }

        if ((uint64_t) st->st_size > s->cas->limits.max_file_size)
                return -E2BIG;

        /* O_NONBLOCK: were it swapped for a FIFO since the lstat, the open must not hang. */
        fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == EACCES || errno == EPERM)
                        return 1;
                if (errno == ENOENT || errno == ELOOP || errno == ENXIO)
                        return -EBUSY;
                return negative_errno();
        }
        if (fstat(fd, &st1) < 0)
                return negative_errno();
        if (!S_ISREG(st1.st_mode) || st1.st_dev != st->st_dev || st1.st_ino != st->st_ino)
                return -EBUSY;

        r = snapshot_store_fd(s, fd, &e->digest, &size);
        if (r < 0)
                return r;
        e->size = size;

        /* Cache it only if nothing changed while reading and no later write could hide in the
         * same timestamp tick. */
        if (fstat(fd, &st2) < 0)
                return negative_errno();
        if ((uint64_t) st2.st_size == size && st2.st_size == st1.st_size &&
            cas_ts_key(&st2.st_mtim) == cas_ts_key(&st1.st_mtim) && cas_ts_key(&st2.st_ctim) == cas_ts_key(&st1.st_ctim) &&
            cas_ts_before(&st2.st_ctim, &s->racy))
                return cas_stat_cache_add(&s->new_cache, s->path.data, &st2, &e->digest);
        return 0;
}

static int snapshot_store_tree(Snapshot *s, const Tree *t, Digest *ret) {
        _cleanup_(buf_done) Buf b = {};
        int r;

        r = tree_encode(t, &b);
        if (r < 0)
                return r;
        digest_of(b.data, b.size, ret);
        r = cas_object_write_data(s->cas, &s->trees, ret, b.data, b.size, CAS_CRASH_TREE_WRITTEN);
        if (r <= 0)
                return r;
        s->stats.new_objects++;
        return snapshot_maybe_flush(s);
}

static int snapshot_dir(Snapshot *s, int dfd, unsigned depth, Digest *ret, uint64_t *ret_bytes);

/* Subdirectory @name of @dfd, @depth components below the root. Return: 0, 1 = skipped (not
 * readable), or -errno. */
static int snapshot_subdir(Snapshot *s, int dfd, const char *name, const struct stat *st, unsigned depth,
                           TreeEntry *e) {
        _cleanup_close_ int sub = -EBADF;
        struct stat st1;

        sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (sub < 0) {
                if (errno == EACCES || errno == EPERM)
                        return 1;
                if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
                        return -EBUSY;
                return negative_errno();
        }
        if (fstat(sub, &st1) < 0)
                return negative_errno();
        if (st1.st_dev != st->st_dev || st1.st_ino != st->st_ino)
                return -EBUSY;
        e->type = DT_DIR;
        e->mode = st->st_mode & 0777;
        return snapshot_dir(s, sub, depth + 1, &e->digest, &e->size);
}

/* Symlink @name of @dfd: its target, never followed. */
static int snapshot_symlink(Snapshot *s, int dfd, const char *name, TreeEntry *e) {
        ssize_t n = readlinkat(dfd, name, (char *) s->buf, SYMLINK_MAX_BYTES + 1);

        if (n < 0)
                return errno == ENOENT || errno == EINVAL ? -EBUSY : negative_errno();
        if (n == 0 || (size_t) n > SYMLINK_MAX_BYTES)
                return -E2BIG;
        e->type = DT_LNK;
        e->mode = 0777;
        e->size = (uint64_t) n;
        e->target = malloc((size_t) n + 1);
        if (!e->target)
                return -ENOMEM;
        memcpy(e->target, s->buf, (size_t) n);
        e->target[n] = 0;
        return 0;
}

/* The directory @dfd, @depth components below the root: store it, return its tree digest. */
static int snapshot_dir(Snapshot *s, int dfd, unsigned depth, Digest *ret, uint64_t *ret_bytes) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_(tree_done) Tree t = {};
        uint64_t total = 0;
        int r;

        r = dir_read_names(dfd, &s->entries, s->cas->limits.max_entries, &names);
        if (r < 0)
                return r;
        if (names.n > 0 && depth + 1 > s->cas->limits.max_depth)
                return -E2BIG;
        r = buf_reserve(&s->path, NAME_MAX_BYTES + 1);
        if (r < 0)
                return r;

        for (size_t i = 0; i < names.n; i++) {
                _cleanup_(tree_entry_done) TreeEntry e = {};
                const char *name = names.v[i];
                struct stat st;
                size_t mark;
                bool skip = false;

                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return errno == ENOENT ? -EBUSY : negative_errno();

                mark = snapshot_path_push(s, name);
                if (S_ISREG(st.st_mode)) {
                        r = snapshot_file(s, dfd, name, &st, &e);
                        if (r < 0)
                                return r;
                        skip = r > 0;
                        if (!skip)
                                s->stats.files++;
                } else if (S_ISDIR(st.st_mode)) {
                        r = snapshot_subdir(s, dfd, name, &st, depth, &e);
                        if (r < 0)
                                return r;
                        skip = r > 0;
                        if (!skip)
                                s->stats.dirs++;
                } else if (S_ISLNK(st.st_mode)) {
                        r = snapshot_symlink(s, dfd, name, &e);
                        if (r < 0)
                                return r;
                        s->stats.symlinks++;
                } else
                        skip = true;    /* FIFO, socket, device: never opened */
                snapshot_path_pop(s, mark);

                if (skip) {
                        s->stats.skipped++;
                        continue;
                }
                if (e.type != DT_LNK)
                        total += e.size;
                e.name = STEAL(names.v[i]);
                r = tree_push(&t, &e);
                if (r < 0)
                        return r;
        }

        r = snapshot_store_tree(s, &t, ret);
        if (r < 0)
                return r;
        *ret_bytes = total;
        return 0;
}

static int snapshot_run(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                        int *prepared_fd, char **ret_digest, CasSnapshotStats *ret_stats) {
        /* The lock is declared first so that it is released last, after tmp files are removed. */
        _cleanup_close_ int lock = -EBADF;
        _cleanup_(snapshot_done) Snapshot s = { .cas = c };
        _cleanup_free_ char *digest_str = NULL;
        struct stat st;
        Digest root;
        uint64_t bytes;
        int r;

        assert(c);

        if (!workspace_id_valid(ws_id) || !workspace_id_valid(exec_id) || created_ms > INT64_MAX)
                return -EINVAL;
        c->crashed = false;

        if (fstat(ws_fd, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;

        lock = cas_store_lock(c, LOCK_SH);
        if (lock < 0)
                return lock;

        s.blobs.set.seed = s.trees.set.seed = c->hash_seed;
        s.buf = malloc(IO_BUFFER_SIZE);
        if (!s.buf)
                return -ENOMEM;
        r = buf_put(&s.path, "", 0);
        if (r < 0)
                return r;
        s.racy = cas_now_coarse();
        r = cas_stat_cache_load(c, ws_id, &s.old_cache, &s.old_cache_raw);
        if (r < 0)
                return r;

        r = snapshot_dir(&s, ws_fd, 0, &root, &bytes);
        if (r < 0)
                return r;
        r = cas_pending_flush(c, &s.blobs);
        if (r < 0)
                return r;
        r = cas_pending_flush(c, &s.trees);
        if (r < 0)
                return r;

        /* The tree may name objects an interrupted run renamed into place without syncing their
         * directory; this snapshot found them present and did not write them again. */
        if (c->need_sync) {
                if (syncfs(c->root_fd) < 0)
                        return negative_errno();
                c->need_sync = false;
        }

        r = cas_ref_write(c, ws_id, exec_id, &root, created_ms, bytes, STEAL_FD(*prepared_fd));
        if (r < 0)
                return r;
        r = cas_crash_point(c, CAS_CRASH_REF_PUBLISHED);
        if (r < 0)
                return r;

        /* The snapshot is published: a cache that cannot be written only costs the next one time. */
        (void) cas_stat_cache_write(c, ws_id, &s.new_cache, &s.old_cache_raw);

        if (ret_digest) {
                digest_str = malloc(72);
                if (!digest_str)
                        return -ENOMEM;
                digest_format(&root, digest_str);
                *ret_digest = STEAL(digest_str);
        }
        s.stats.bytes = bytes;
        if (ret_stats)
                *ret_stats = s.stats;
        return 0;
}

int cas_snapshot_prepared(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                          int prepared_fd, char **ret_digest, CasSnapshotStats *ret_stats) {
        /* The walk changes nothing in @c but its flags: on a copy, it may run in a thread of its
         * own next to the store's other users (snapshots of other workspaces, lookups). */
        Cas local = *c;
        int r;

        assert(c);
        r = snapshot_run(&local, ws_fd, ws_id, exec_id, created_ms, &prepared_fd, ret_digest, ret_stats);
        if (c->crash_hook)
                c->crashed = local.crashed;     /* tests (single-threaded) look at it */
        if (prepared_fd >= 0 && !local.crashed)
                /* Not used (the walk failed before the ref): it goes. */
                cas_ref_prepared_discard(c, ws_id, exec_id, prepared_fd);
        else
                safe_close(prepared_fd);
        return r;
}

int cas_snapshot(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                 char **ret_digest, CasSnapshotStats *ret_stats) {
        return cas_snapshot_prepared(c, ws_fd, ws_id, exec_id, created_ms, -EBADF, ret_digest, ret_stats);
}
