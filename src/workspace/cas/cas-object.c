/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CAS objects: files in tmp/ (unique names, atomic replacement of a file through tmp/), and
 * objects written to tmp/ and published in batches (made durable, renamed into objects/, their
 * directories made durable), looked up and read back with their digest verified. Calls
 * cas-digest.c, util/io-util.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <unistd.h>

#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"

static _Atomic uint64_t tmp_counter;   /* process-wide: threads share the pid and the prefix */

/* A new file in tmp/, created with @mode, its name in @name. Return: a write fd or -errno. */
int cas_tmp_open(Cas *c, char name[static 64], mode_t mode) {
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                int fd, r;

                /* The thread id: forked children and snapshot threads share the prefix and the
                 * counter (the main thread's id is the pid). */
                (void) snprintf(name, 64, "%016" PRIx64 "-%d-%" PRIu64, c->tmp_prefix, (int) gettid(),
                                atomic_fetch_add(&tmp_counter, 1) + 1);
                fd = openat(c->tmp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return negative_errno();
                r = cas_random_u64(&c->tmp_prefix);
                if (r < 0)
                        return r;
        }
        return -EEXIST;
}

/* Error paths remove their tmp files, except after an injected crash (a crash would not). */
void cas_tmp_unlink(Cas *c, const char *name) {
        if (!c->crashed && name[0])
                (void) unlinkat(c->tmp_fd, name, 0);
}

/*
 * Write @data to tmp/, fsync, rename to @name in @dir_fd, fsync @dir_fd. Without @durable, no
 * fsync at all: for what is only a cache, which a crash may lose or leave empty (readers check it).
 */
int cas_write_file_atomic_full(Cas *c, int dir_fd, const char *name, const void *data, size_t size,
                           mode_t mode, bool durable, int prepared_fd, const char *cas_prepared_name,
                           const char *crash_written, const char *crash_renamed) {
        _cleanup_close_ int fd = prepared_fd;
        int src_dir = c->tmp_fd;
        char tmp[CAS_PREPARED_NAME_MAX];
        int r;

        if (fd >= 0) {
                /* Made ahead of time in @dir_fd itself (cas_ref_prepare()). */
                src_dir = dir_fd;
                (void) snprintf(tmp, sizeof(tmp), "%s", cas_prepared_name);
        } else {
                fd = cas_tmp_open(c, tmp, mode);
                if (fd < 0)
                        return fd;
        }
        r = loop_write(fd, data, size);
        if (r >= 0 && durable && fsync(fd) < 0)
                r = negative_errno();
        fd = safe_close(fd);
        if (r >= 0 && crash_written)
                r = cas_crash_point(c, crash_written);
        if (r >= 0 && renameat(src_dir, tmp, dir_fd, name) < 0)
                r = negative_errno();
        if (r < 0) {
                if (!c->crashed)
                        (void) unlinkat(src_dir, tmp, 0);
                return r;
        }
        if (crash_renamed) {
                r = cas_crash_point(c, crash_renamed);
                if (r < 0)
                        return r;
        }
        if (durable && fsync(dir_fd) < 0)
                return negative_errno();
        return 0;
}

int cas_write_file_atomic(Cas *c, int dir_fd, const char *name, const void *data, size_t size, mode_t mode,
                      const char *crash_written, const char *crash_renamed) {
        return cas_write_file_atomic_full(c, dir_fd, name, data, size, mode, true, -EBADF, NULL, crash_written,
                                      crash_renamed);
}

/* ---------------------------------------------------------------------------------------------
 * Objects: written to tmp/, published (made durable, renamed into objects/) in batches. */

void cas_pending_done(Cas *c, Pending *p) {
        for (size_t i = 0; i < p->n; i++)
                cas_tmp_unlink(c, p->items[i].tmp);
        p->items = mfree(p->items);
        p->n = p->alloc = 0;
        cas_dset_done(&p->set);
}

int cas_pending_add(Pending *p, const Digest *d, const char *tmp, uint64_t size) {
        int r;

        if (p->n == p->alloc) {
                size_t na = MAX(p->alloc * 2, (size_t) 64);
                PendingObject *v = reallocarray(p->items, na, sizeof(PendingObject));

                if (!v)
                        return -ENOMEM;
                p->items = v;
                p->alloc = na;
        }
        r = cas_dset_add(&p->set, d);
        if (r < 0)
                return r;
        p->items[p->n] = (PendingObject) { .digest = *d };
        (void) snprintf(p->items[p->n].tmp, sizeof(p->items[p->n].tmp), "%s", tmp);
        p->n++;
        p->bytes += size;
        return 0;
}

/*
 * Publish a batch: make every tmp file durable, rename each into objects/, make the object
 * directories touched durable. Durable means fsync() of each file (directory), or, from
 * BATCH_SYNCFS_MIN of them, one syncfs() of the store's file system: each fsync() of a new
 * file costs a journal commit and a device cache flush, so thousands of small objects would
 * spend seconds in flushes that a single syncfs() does at once (it also writes whatever else
 * is dirty on that file system, hence only for large batches).
 */
static int sync_files(int dfd, size_t n, const char *(*name)(size_t i, void *userdata), void *userdata) {
        int r;

        if (n >= BATCH_SYNCFS_MIN)
                return syncfs(dfd) < 0 ? negative_errno() : 0;
        for (size_t i = 0; i < n; i++) {
                r = fsync_at(dfd, name(i, userdata));
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char *pending_tmp_name(size_t i, void *userdata) {
        return ((Pending *) userdata)->items[i].tmp;
}

static const char *touched_dir_name(size_t i, void *userdata) {
        return ((const char (*)[3]) userdata)[i];
}

int cas_pending_flush(Cas *c, Pending *p) {
        char dirs[256][3];
        uint8_t touched[256] = {};
        size_t n_dirs = 0;
        bool new_dirs = false, need_sync;
        int r;

        if (p->n == 0)
                return 0;

        r = sync_files(c->tmp_fd, p->n, pending_tmp_name, p);
        if (r < 0)
                return r;
        r = cas_crash_point(c, CAS_CRASH_OBJECTS_SYNCED);
        if (r < 0)
                return r;

        need_sync = c->need_sync;
        c->need_sync = true;            /* until the directories are synced below */
        for (size_t i = 0; i < p->n; i++) {
                char rel[66];

                digest_relpath(&p->items[i].digest, rel);
                if (renameat(c->tmp_fd, p->items[i].tmp, c->objects_fd, rel) < 0) {
                        /* The fan-out directories are created on first use. */
                        if (errno != ENOENT)
                                return negative_errno();
                        rel[2] = 0;
                        if (mkdirat(c->objects_fd, rel, 0700) < 0 && errno != EEXIST)
                                return negative_errno();
                        new_dirs = true;
                        rel[2] = '/';
                        if (renameat(c->tmp_fd, p->items[i].tmp, c->objects_fd, rel) < 0)
                                return negative_errno();
                }
                p->items[i].tmp[0] = 0;
                touched[p->items[i].digest.b[0]] = 1;
                r = cas_crash_point(c, CAS_CRASH_OBJECT_RENAMED);
                if (r < 0)
                        return r;
        }

        for (unsigned i = 0; i < 256; i++)
                if (touched[i])
                        (void) snprintf(dirs[n_dirs++], sizeof(dirs[0]), "%02x", i);
        r = sync_files(c->objects_fd, n_dirs, touched_dir_name, dirs);
        if (r < 0)
                return r;
        if (new_dirs && n_dirs < BATCH_SYNCFS_MIN && fsync(c->objects_fd) < 0)
                return negative_errno();
        c->need_sync = need_sync;
        r = cas_crash_point(c, CAS_CRASH_OBJECTS_PUBLISHED);
        if (r < 0)
                return r;

        p->n = 0;
        p->bytes = 0;
        cas_dset_clear(&p->set);
        return 0;
}

/*
 * 1 if the object is pending in @p or published with @size bytes, 0 if not (missing, or a
 * damaged copy of another size, which the new one will replace), <0 on error.
 */
int cas_object_present(Cas *c, const Pending *p, const Digest *d, uint64_t size) {
        struct stat st;
        char rel[66];

        if (p && cas_dset_contains(&p->set, d))
                return 1;
        digest_relpath(d, rel);
        if (fstatat(c->objects_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return S_ISREG(st.st_mode) && (uint64_t) st.st_size == size;
}

/* Write @data as a pending object. Return: 1 written, 0 already present, or -errno. */
int cas_object_write_data(Cas *c, Pending *p, const Digest *d, const void *data, size_t size,
                      const char *crash) {
        _cleanup_close_ int fd = -EBADF;
        char tmp[64];
        int r;

        r = cas_object_present(c, p, d, size);
        if (r != 0)
                return r < 0 ? r : 0;

        fd = cas_tmp_open(c, tmp, 0444);
        if (fd < 0)
                return fd;
        r = loop_write(fd, data, size);
        if (r >= 0)
                r = cas_pending_add(p, d, tmp, size);
        if (r < 0) {
                cas_tmp_unlink(c, tmp);
                return r;
        }
        r = cas_crash_point(c, crash);
        if (r < 0)
                return r;
        return 1;
}

/* Read a whole object, verifying its digest (-EIO). -ENOENT if missing. */
int cas_object_read(Cas *c, const Digest *d, uint64_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *data = NULL;
        Digest got;
        char rel[66];
        size_t size;
        int r;

        digest_relpath(d, rel);
        r = read_file_at(c->objects_fd, rel, max, &data, &size);
        if (r == -E2BIG)
                return -EIO;
        if (r < 0)
                return r;
        digest_of(data, size, &got);
        if (!digest_eq(&got, d))
                return -EIO;
        *ret = STEAL(data);
        *ret_size = size;
        return 0;
}
