/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace disk usage, the watcher (QuotaWatch, see quota.h): its life cycle, and the 100 ms
 * tick: drain the inotify fd into the dirty set, process the dirty set, poll the sparse files and
 * sweep the others, resync the index when it lost track, and fall back to periodic full scans
 * (degraded mode) when the tree cannot be indexed. The index is quota-index.c, reading the tree
 * into it quota-sync.c, the one-shot scan quota-scan.c. Calls those and util/.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/hashmap.h"
#include "util/macro.h"
#include "workspace/quota-internal.h"

/* A dirty directory that cannot be reopened at its indexed path this many ticks in a row means
 * the index lost track of it: resync. */
#define DIRTY_RETRIES_MAX 5U
/* Passes over the dirty set per tick at most (see watch_process_dirty()). */
#define DIRTY_PASSES_MAX 4U
/* Degraded full scans use at most 1/DEGRADED_DUTY of the time. */
#define DEGRADED_DUTY 5U
/* Bytes read from the inotify fd per tick at most: the rest waits for the next tick. */
#define DRAIN_BUFFER_SIZE (64U * 1024U)
#define DRAIN_ROUNDS_MAX 64U

static uint64_t now_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec;
}

/* ---- whole-index operations ---- */

static void watch_clear_index(QuotaWatch *w) {
        w->clearing = true;
        if (w->root) {
                Node *n = w->root->node;

                quota_node_destroy(w, n);
                w->root = NULL;
        }
        quota_limbo_flush(w);
        assert(w->n_nodes == 0 && w->n_watches == 0 && w->bytes == 0);
        w->dirty_head = w->dirty_tail = NULL;
        assert(w->sparse.n == 0 && w->files.n == 0);
        w->sparse.cursor = w->files.cursor = 0;
        w->clearing = false;
        w->over_entries = false;
        w->need_resync = false;
}

static int watch_degraded_scan(QuotaWatch *w) {
        QuotaStats s;
        uint64_t start = now_ns(), bytes, dur;
        int r;

        r = quota_scan_full(w->root_fd, &w->limits, &bytes, &s);
        dur = now_ns() - start;
        w->next_scan_ns = start + dur * DEGRADED_DUTY;
        w->full_scans++;
        w->restats += s.restats;
        if (r < 0) {
                w->degraded_error = r;
                return r;
        }
        w->degraded_error = 0;
        w->bytes = bytes;
        w->degraded_files = s.files;
        w->degraded_dirs = s.dirs;
        return 0;
}

static int watch_degrade(QuotaWatch *w) {
        if (!w->degraded)
                watch_clear_index(w);
        w->degraded = true;
        w->want_degrade = false;
        return watch_degraded_scan(w);
}

/* Drain and discard whatever is queued (degraded mode, where nothing is watched any more). */
static void watch_drain_discard(QuotaWatch *w) {
        for (unsigned i = 0; i < DRAIN_ROUNDS_MAX; i++)
                if (read(w->fd, w->evbuf, DRAIN_BUFFER_SIZE) <= 0)
                        return;
}

static int watch_resync(QuotaWatch *w) {
        struct stat st;
        int fd, r;

        /* The dirty set is subsumed; what changes from here on is queued for the next tick. */
        while (w->dirty_head) {
                Dir *d = w->dirty_head;

                quota_dirty_unlink(w, d);
                quota_dirty_names_clear(d);
                d->dirty_all = false;
                d->retries = 0;
        }
        w->need_resync = false;
        w->over_entries = false;
        w->full_scans++;

        fd = openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        w->restats++;
        if (fstat(fd, &st) < 0) {
                r = negative_errno();
                (void) safe_close(fd);
                return r;
        }
        watch_set_inode_bytes(w, w->root->node->inode, stat_bytes(&st));
        r = quota_dir_sync(w, w->root, fd, true);
        quota_limbo_flush(w);
        return r;
}

static int watch_drain(QuotaWatch *w) {
        for (unsigned round = 0; round < DRAIN_ROUNDS_MAX; round++) {
                ssize_t n = read(w->fd, w->evbuf, DRAIN_BUFFER_SIZE);

                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return negative_errno();
                }
                if (n == 0)
                        return 0;

                for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t) n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) (w->evbuf + off);
                        Dir *d;

                        off += sizeof(struct inotify_event) + ev->len;
                        w->events++;

                        if (ev->mask & IN_Q_OVERFLOW) {
                                w->need_resync = true;
                                continue;
                        }
                        d = quota_wd_find(w, ev->wd);
                        if (!d)
                                continue;       /* a watch we removed: its IN_IGNORED and stragglers */
                        if (ev->mask & IN_IGNORED) {
                                /* The kernel dropped the watch: the directory is gone (or its fs). */
                                quota_dir_unwatch(w, d, false);
                                if (d == w->root)
                                        w->need_resync = true;
                                else if (d->node->parent && d->node->parent != &w->limbo)
                                        quota_dir_mark_dirty(w, d->node->parent, d->node->name);
                                continue;
                        }
                        if (ev->len > 0 && ev->name[0] != '\0')
                                quota_dir_mark_dirty(w, d, ev->name);
                        else
                                quota_dir_mark_dirty(w, d, NULL);
                }
        }
        return 0;
}

/* Process the dirty set as it stands; what gets re-marked meanwhile waits for the next pass. */
static int watch_process_dirty_pass(QuotaWatch *w, bool final) {
        Dir *last = w->dirty_tail;

        while (w->dirty_head && !w->want_degrade && !w->need_resync) {
                Dir *d = w->dirty_head;
                bool is_last = d == last, all = d->dirty_all;
                char **names = d->dirty_names;
                size_t n_names = d->n_dirty_names;
                int r;

                quota_dirty_unlink(w, d);
                d->dirty_names = NULL;
                d->n_dirty_names = 0;
                d->dirty_all = false;

                r = quota_dir_refresh(w, d, all, names, n_names);
                if (r == -ESTALE || r == -ENOLINK) {
                        /* Not where the index says: renamed, the events saying where are still
                         * queued or further down the dirty set. Retry; a persistent mismatch
                         * means the index lost track. In limbo: keep the names in case it is
                         * found again this tick, but that is no reason for another pass. */
                        bool remarked = w->remarked;

                        if (r == -ESTALE && final && ++d->retries >= DIRTY_RETRIES_MAX)
                                w->need_resync = true;
                        if (all)
                                d->dirty_all = true;
                        quota_dir_mark_dirty(w, d, NULL);
                        for (size_t i = 0; i < n_names; i++)
                                quota_dir_mark_dirty(w, d, names[i]);
                        if (r == -ENOLINK)
                                w->remarked = remarked;
                        r = 0;
                } else if (r >= 0)
                        d->retries = 0;

                for (size_t i = 0; i < n_names; i++)
                        free(names[i]);
                free(names);
                if (r < 0)
                        return r;
                if (is_last)
                        break;
        }
        return 0;
}

static int watch_process_dirty(QuotaWatch *w) {
        int r;

        /* Processing can make more work for this tick: names changed in a directory that was then
         * renamed (its new path is known once the rename is processed, maybe later in the pass),
         * or the other names of a hard-linked inode one of whose names went away. A few more
         * passes for those, so that the tick is exact rather than one tick late; bounded, as a
         * writer racing us could keep them coming. */
        for (unsigned pass = 0; pass < DIRTY_PASSES_MAX; pass++) {
                w->remarked = false;
                r = watch_process_dirty_pass(w, pass == DIRTY_PASSES_MAX - 1);
                if (r < 0)
                        return r;
                if (!w->remarked) {
                        /* Settled: what is still in limbo has left the tree. Destroying it may ask
                         * for re-stats of other names of its hard-linked files. */
                        quota_limbo_flush(w);
                        if (!w->remarked)
                                return 0;
                }
        }
        return 0;
}

/*
 * Re-stat up to @budget nodes of @set, round-robin. The sparse set: their holes can be filled
 * through mmap() without any event. All files (the sweep): a safety net for writes no event
 * names (through a hard link created and removed between two ticks, Linux AIO). Whatever does not
 * match the index is handed to the dirty set.
 */
static int watch_poll_set(QuotaWatch *w, NodeSet *set, uint64_t budget) {
        _cleanup_close_ int fd = -EBADF;
        Dir *fd_dir = NULL;

        budget = MIN(budget, (uint64_t) set->n);
        while (budget > 0 && set->n > 0 && !w->want_degrade) {
                struct stat st;
                size_t at;
                Node *n;

                budget--;
                if (set->cursor >= set->n)
                        set->cursor = 0;
                at = set->cursor;
                n = set->v[at];

                if (n->parent != fd_dir) {
                        fd = safe_close(fd);
                        fd_dir = n->parent;
                        fd = n->parent->dirty ? -ESTALE : quota_dir_open(w, n->parent);
                        if (fd < 0 && fd != -ESTALE && fd != -ENOLINK && fd != -EACCES && fd != -EAGAIN)
                                return fd;
                }
                if (fd < 0) {
                        set->cursor++;          /* dirty or unreachable: the dirty set has it */
                        continue;
                }

                w->restats++;
                if (fstatat(fd, n->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !inode_is(n->inode, &st) ||
                    S_ISDIR(st.st_mode)) {
                        quota_dir_mark_dirty(w, n->parent, n->name);
                        set->cursor++;
                        continue;
                }
                watch_set_inode_bytes(w, n->inode, stat_bytes(&st));
                quota_sparse_update(w, n, &st);
                if (*nodeset_idx(set, n) == at)
                        set->cursor++;          /* else the last one moved into this slot */
        }
        return 0;
}

static int watch_result(const QuotaWatch *w, uint64_t *ret_bytes) {
        if (w->degraded) {
                if (w->degraded_error < 0)
                        return w->degraded_error;
        } else {
                if (w->over_entries || w->n_truncated > 0)
                        return -E2BIG;
                if (w->n_unreadable > 0)
                        return -EACCES;
        }
        *ret_bytes = w->bytes;
        return 0;
}

int quota_watch_tick(QuotaWatch *w, uint64_t *ret_bytes) {
        int r;

        assert(w);
        assert(ret_bytes);

        if (w->degraded) {
                watch_drain_discard(w);
                if (now_ns() >= w->next_scan_ns)
                        (void) watch_degraded_scan(w);
                return watch_result(w, ret_bytes);
        }

        r = watch_drain(w);
        if (r < 0)
                return r;

        if (!w->need_resync) {
                r = watch_process_dirty(w);
                if (r < 0) {
                        quota_limbo_flush(w);
                        return r;
                }
        }
        quota_limbo_flush(w);
        if (!w->need_resync && w->limits.sparse_per_tick != QUOTA_SPARSE_POLL_DISABLED) {
                r = watch_poll_set(w, &w->sparse, w->limits.sparse_per_tick);
                if (r < 0)
                        return r;
        }
        if (!w->need_resync && w->limits.sweep_per_tick != QUOTA_SWEEP_DISABLED) {
                r = watch_poll_set(w, &w->files, w->limits.sweep_per_tick);
                if (r < 0)
                        return r;
        }

        /* Names were left out of a too-big tree: once it shrank well below the cap, index them. */
        if (w->over_entries && w->n_nodes < w->limits.max_entries / 10 * 9)
                w->need_resync = true;

        if (w->need_resync && !w->want_degrade) {
                r = watch_resync(w);
                if (r < 0)
                        return r;
        }
        if (w->want_degrade) {
                r = watch_degrade(w);
                if (r < 0)
                        return r;
        }
        return watch_result(w, ret_bytes);
}

int quota_watch_new_full(int dir_fd, const QuotaLimits *limits, QuotaWatch **ret) {
        _cleanup_(quota_watch_freep) QuotaWatch *w = NULL;
        struct stat st;
        int r, wd;

        assert(dir_fd >= 0);
        assert(ret);

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (QuotaWatch) {
                .root_fd = -EBADF,
                .fd = -EBADF,
                .use_openat2 = true,
                .sparse.idx_offset = offsetof(Node, sparse_idx),
                .files.idx_offset = offsetof(Node, file_idx),
        };
        w->limbo.wd = -1;
        limits_fill(&w->limits, limits);
        r = quota_random_key(w->key);
        if (r < 0)
                return r;
        w->evbuf = malloc(DRAIN_BUFFER_SIZE);
        if (!w->evbuf)
                return -ENOMEM;

        w->root_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w->root_fd < 0)
                return negative_errno();
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->fd < 0) {
                if (errno != EMFILE && errno != ENFILE && errno != ENOMEM)
                        return negative_errno();
                /* Out of inotify instances: still usable, by full scans. The caller polls the
                 * timer anyway; give it an fd that never becomes readable. */
                w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
                if (w->fd < 0)
                        return negative_errno();
                r = watch_degrade(w);
                if (r < 0)
                        return r;
                *ret = STEAL(w);
                return 0;
        }

        if (fstat(w->root_fd, &st) < 0)
                return negative_errno();
        w->restats++;
        wd = quota_watch_add(w, w->root_fd);
        r = quota_node_new_dir(w, NULL, "", &st, wd < 0 ? -1 : wd, &w->root);
        if (r < 0)
                return r;
        w->full_scans++;
        if (!w->want_degrade) {
                int fd = openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (fd < 0)
                        return negative_errno();
                r = quota_dir_sync(w, w->root, fd, true);
                if (r < 0)
                        return r;
                quota_limbo_flush(w);
        }
        if (w->want_degrade) {
                r = watch_degrade(w);
                if (r < 0)
                        return r;
        }

        r = watch_result(w, &(uint64_t) { 0 });
        if (r < 0)
                return r;
        *ret = STEAL(w);
        return 0;
}

int quota_watch_new(int dir_fd, QuotaWatch **ret) {
        return quota_watch_new_full(dir_fd, NULL, ret);
}

int quota_watch_fd(const QuotaWatch *w) {
        assert(w);
        return w->fd;
}

void quota_watch_stats(const QuotaWatch *w, QuotaStats *ret) {
        assert(w);
        assert(ret);

        *ret = (QuotaStats) {
                .files = w->degraded ? w->degraded_files : w->n_files,
                .dirs = w->degraded ? w->degraded_dirs : w->n_dirs,
                .watches = w->n_watches,
                .full_scans = w->full_scans,
                .events = w->events,
                .restats = w->restats,
                .degraded = w->degraded,
        };
}

void quota_watch_request_resync(QuotaWatch *w) {
        assert(w);
        if (!w->degraded)
                w->need_resync = true;
        else
                w->next_scan_ns = 0;
}

QuotaWatch *quota_watch_free(QuotaWatch *w) {
        if (!w)
                return NULL;

        if (w->degraded)
                w->bytes = 0;                   /* from the last scan, not from the (empty) index */

        /* Closing the inotify fd drops all watches at once; no inotify_rm_watch() per directory. */
        w->fd = safe_close(w->fd);
        watch_clear_index(w);
        hashmap_done(&w->names);
        hashmap_done(&w->inodes);
        hashmap_done(&w->wds);
        free(w->sparse.v);
        free(w->files.v);
        w->root_fd = safe_close(w->root_fd);
        free(w->evbuf);
        return mfree(w);
}
