/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace disk usage, the one-shot scan: quota_scan() and the degraded watcher's periodic
 * scans. Walks the tree once, counting the blocks of every distinct inode (inodes with more than
 * one link are remembered in a table, to be counted once). Also the limits' defaults and the
 * random hash key the watcher shares. Calls util/ only.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "util/dirent-util.h"
#include "util/hashmap.h"
#include "util/macro.h"
#include "workspace/quota-internal.h"

/* ---------------------------------------------------------------------------------------------
 * The one-shot scan (quota_scan(), and the degraded mode's periodic scans): no index, only the
 * inodes with more than one link are remembered, to count them once. */

typedef struct Scan {
        QuotaLimits limits;
        uint64_t key[2];
        HashMap links;
        uint64_t bytes, files, dirs, entries, stats;
} Scan;

static void inode_free_link(HashLink *l) {
        free(hashmap_entry(l, Inode, link));
}

/* A new record, with no bytes and no references yet, for the inode of @st: in @t under @hash. */
int quota_inode_add(HashMap *t, const struct stat *st, uint64_t hash, Inode **ret) {
        _cleanup_free_ Inode *i = NULL;
        int r;

        i = calloc(1, sizeof(*i));
        if (!i)
                return -ENOMEM;
        *i = (Inode) { .dev = st->st_dev, .ino = st->st_ino };
        r = hashmap_add(t, &i->link, hash);
        if (r < 0)
                return r;
        *ret = STEAL(i);
        return 0;
}

static void scan_done(Scan *s) {
        hashmap_drain(&s->links, inode_free_link);
}

static int scan_account(Scan *s, const struct stat *st) {
        if (S_ISDIR(st->st_mode))
                s->dirs++;
        else
                s->files++;

        if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
                uint64_t h = inode_hash(st->st_dev, st->st_ino, s->key);
                Inode *i;
                int r;

                if (inode_find(&s->links, st->st_dev, st->st_ino, h))
                        return 0;
                r = quota_inode_add(&s->links, st, h, &i);
                if (r < 0)
                        return r;
        }
        s->bytes += stat_bytes(st);
        return 0;
}

/* Takes over @fd (a directory). */
static int scan_dir(Scan *s, int fd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        r = opendir_fd(fd, &d);
        if (r < 0)
                return r;

        for (;;) {
                struct stat st;
                int sub;

                r = readdir_no_dot(d, &de);
                if (r <= 0)
                        return r;
                if (++s->entries > s->limits.max_entries)
                        return -E2BIG;

                /* stat, then open directories with O_NOFOLLOW and account the fd's own stat: a name
                 * swapped for a symlink in between is then counted as what it is now. */
                for (unsigned attempt = 0;; attempt++) {
                        s->stats++;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                if (errno == ENOENT)
                                        break;
                                return negative_errno();
                        }
                        if (!S_ISDIR(st.st_mode)) {
                                r = scan_account(s, &st);
                                if (r < 0)
                                        return r;
                                break;
                        }
                        if (depth >= s->limits.max_depth)
                                return -E2BIG;
                        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0) {
                                if (errno == ENOENT)
                                        break;
                                if ((errno == ELOOP || errno == ENOTDIR) && attempt < 3)
                                        continue;
                                return negative_errno();
                        }
                        if (fstat(sub, &st) < 0) {
                                r = negative_errno();
                                (void) safe_close(sub);
                                return r;
                        }
                        r = scan_account(s, &st);
                        if (r < 0) {
                                (void) safe_close(sub);
                                return r;
                        }
                        r = scan_dir(s, sub, depth + 1);
                        if (r < 0)
                                return r;
                        break;
                }
        }
}

void limits_fill(QuotaLimits *l, const QuotaLimits *in) {
        *l = in ? *in : (QuotaLimits) {};
        if (l->max_entries == 0)
                l->max_entries = QUOTA_MAX_ENTRIES_DEFAULT;
        if (l->max_depth == 0)
                l->max_depth = QUOTA_MAX_DEPTH_DEFAULT;
        if (l->max_watches == 0)
                l->max_watches = QUOTA_MAX_WATCHES_DEFAULT;
        if (l->max_index == 0)
                l->max_index = QUOTA_MAX_INDEX_DEFAULT;
        if (l->sparse_per_tick == 0)
                l->sparse_per_tick = QUOTA_SPARSE_PER_TICK_DEFAULT;
        if (l->sweep_per_tick == 0)
                l->sweep_per_tick = QUOTA_SWEEP_PER_TICK_DEFAULT;
}

int quota_random_key(uint64_t key[2]) {
        ssize_t n = getrandom(key, 2 * sizeof(uint64_t), 0);

        if (n < 0)
                return negative_errno();
        return n == 2 * sizeof(uint64_t) ? 0 : -EIO;
}

static int scan_run(int dir_fd, const QuotaLimits *limits, uint64_t *ret_bytes, QuotaStats *ret_stats) {
        Scan s = {};
        struct stat st;
        int fd, r;

        limits_fill(&s.limits, limits);
        r = quota_random_key(s.key);
        if (r < 0)
                return r;

        /* An own open file description: readdir() must start at offset 0. */
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        s.stats++;
        if (fstat(fd, &st) < 0) {
                r = negative_errno();
                (void) safe_close(fd);
                return r;
        }
        r = scan_account(&s, &st);
        if (r < 0) {
                (void) safe_close(fd);
                return r;
        }
        r = scan_dir(&s, fd, 0);
        scan_done(&s);
        if (r < 0)
                return r;

        *ret_bytes = s.bytes;
        if (ret_stats)
                *ret_stats = (QuotaStats) {
                        .files = s.files,
                        .dirs = s.dirs,
                        .full_scans = 1,
                        .restats = s.stats,
                };
        return 0;
}

int quota_scan_full(int dir_fd, const QuotaLimits *limits, uint64_t *ret_bytes, QuotaStats *ret_stats) {
        assert(dir_fd >= 0);
        assert(ret_bytes);

        return scan_run(dir_fd, limits, ret_bytes, ret_stats);
}

int quota_scan(int dir_fd, uint64_t *ret_bytes, QuotaStats *ret_stats) {
        return quota_scan_full(dir_fd, NULL, ret_bytes, ret_stats);
}
