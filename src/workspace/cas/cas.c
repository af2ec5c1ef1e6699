/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The content-addressed snapshot store of workspaces (see cas.h for the layout, durability and
 * concurrency rules): opening and closing the store, its settings, and what every operation
 * shares: the store lock, crash-point injection, random numbers. The operations themselves live
 * in cas-snapshot.c, cas-restore.c, cas-tree.c (lookups), cas-ref.c and cas-gc.c.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/fs-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"

int cas_random_u64(uint64_t *ret) {
        uint64_t v;
        ssize_t n;

        do
                n = getrandom(&v, sizeof(v), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if (n != (ssize_t) sizeof(v))
                return -EIO;
        *ret = v;
        return 0;
}

int cas_crash_point(Cas *c, const char *point) {
        int r;

        if (!c->crash_hook)
                return 0;
        r = c->crash_hook(point, c->crash_userdata);
        if (r < 0) {
                c->crashed = true;
                return r;
        }
        return 0;
}

/* A shared or exclusive flock() on the store root, on a file description of its own. */
int cas_store_lock(Cas *c, int operation) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(c->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        do
                r = flock(fd, operation);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
        return STEAL_FD(fd);
}

/* ---------------------------------------------------------------------------------------------
 * Open, close, settings. */

Cas *cas_free(Cas *c) {
        if (!c)
                return NULL;
        (void) safe_close(c->root_fd);
        (void) safe_close(c->objects_fd);
        (void) safe_close(c->refs_fd);
        (void) safe_close(c->tmp_fd);
        (void) safe_close(c->cache_fd);
        free(c);
        return NULL;
}

SR_DEFINE_FREE_FUNC(Cas *, cas_free);

int cas_open(int root_fd, Cas **ret) {
        _cleanup_(cas_freep) Cas *c = NULL;
        _cleanup_close_ int refs = -EBADF;
        bool created = false, created_refs = false;
        int r;

        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (Cas) {
                .root_fd = -EBADF,
                .objects_fd = -EBADF,
                .refs_fd = -EBADF,
                .tmp_fd = -EBADF,
                .cache_fd = -EBADF,
                .limits = {
                        .max_depth = CAS_DEFAULT_MAX_DEPTH,
                        .max_entries = CAS_DEFAULT_MAX_ENTRIES,
                        .max_file_size = CAS_DEFAULT_MAX_FILE_SIZE,
                },
        };
        r = cas_random_u64(&c->tmp_prefix);
        if (r >= 0)
                r = cas_random_u64(&c->hash_seed);
        if (r < 0)
                return r;

        c->root_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (c->root_fd < 0)
                return negative_errno();

        c->objects_fd = mkdir_open(c->root_fd, "objects", &created);
        if (c->objects_fd < 0)
                return c->objects_fd;
        refs = mkdir_open(c->root_fd, "refs", &created);
        if (refs < 0)
                return refs;
        c->refs_fd = mkdir_open(refs, "workspace", &created_refs);
        if (c->refs_fd < 0)
                return c->refs_fd;
        c->tmp_fd = mkdir_open(c->root_fd, "tmp", &created);
        if (c->tmp_fd < 0)
                return c->tmp_fd;
        c->cache_fd = mkdir_open(c->root_fd, "cache", &created);
        if (c->cache_fd < 0)
                return c->cache_fd;

        if (created_refs && fsync(refs) < 0)
                return negative_errno();
        if ((created || created_refs) && fsync(c->root_fd) < 0)
                return negative_errno();
        /* A previous process may have died between renaming objects into objects/ and syncing
         * their directories: make them durable before any ref can name them again. Once per
         * open (the daemon forks its snapshot children from this Cas, so it cannot be lazy). */
        if (syncfs(c->root_fd) < 0)
                return negative_errno();

        *ret = STEAL(c);
        return 0;
}

int cas_set_limits(Cas *c, const CasLimits *limits) {
        assert(c);
        assert(limits);

        c->limits = (CasLimits) {
                .max_depth = limits->max_depth ?: CAS_DEFAULT_MAX_DEPTH,
                .max_entries = limits->max_entries ?: CAS_DEFAULT_MAX_ENTRIES,
                .max_file_size = limits->max_file_size ?: CAS_DEFAULT_MAX_FILE_SIZE,
        };
        return 0;
}

void cas_set_crash_hook(Cas *c, CasCrashHook hook, void *userdata) {
        assert(c);
        c->crash_hook = hook;
        c->crash_userdata = userdata;
}
