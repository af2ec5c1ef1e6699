/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Workspace disk usage: one-shot full scans, and an inotify-maintained index for the 100 ms checks of a run. */
#pragma once

/*
 * What is counted. Usage is the space a tree *allocates*: the sum of st_blocks * 512 over the
 * distinct inodes of the tree, the workspace root and every directory included, symlinks counted
 * as themselves (never followed), hard links once (a dev/ino map). A sparse file therefore costs
 * its allocated blocks, not its st_size; a 10 GiB ftruncate() costs nothing until written. This
 * is what `du -s -B1` reports and what actually fills the disk. Inodes themselves (millions of
 * empty files) cost no blocks: they are bounded by the entry cap instead (-E2BIG).
 *
 * How the watcher stays cheap. quota_watch_new() scans the tree once into an index (one node per
 * name, one record per inode) and puts an inotify watch on every directory. The kernel reports
 * changes by (directory, name) whatever the path or mount they were made through, so a sandbox
 * writing through its bind mount is seen as well. quota_watch_tick() drains the inotify fd
 * without blocking, coalesces the events into a set of dirty names per directory (an appender
 * produces one IN_MODIFY per write(); it costs one re-stat per tick, not one per write), then
 * re-stats only those names, from a directory fd reopened beneath the root with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS and checked to still be the indexed inode. A tick is O(changes), not
 * O(files). Directory identity is the watch descriptor, which the kernel ties to the inode: a
 * directory renamed within the tree is re-attached in O(1) with its subtree, a new directory
 * (also one moved in whole from outside) is scanned after its watch is in place, so nothing
 * created in between is missed. IN_Q_OVERFLOW, or an index found inconsistent with the tree (a
 * race lost too often), cause a full resync of the index, counted in full_scans.
 *
 * Sparse files are polled. Stores through a shared writable mmap() produce no inotify event
 * (inotify(7): "does not report file accesses and modifications that may occur because of
 * mmap(2), msync(2), and munmap(2)"), and a mapping outlives close(). But such stores can only
 * allocate blocks in holes below EOF: a store past EOF raises SIGBUS, and growing a file takes a
 * write() or a truncate, both reported (so are pwritev2(), fallocate() including hole punching,
 * copy_file_range(), sendfile() and splice(): checked on Linux 6.18). So only regular files with
 * fewer allocated bytes than their size can grow silently. The index keeps them in a set and
 * re-stats them every tick (QuotaLimits.sparse_per_tick of them, default 1024, round-robin past
 * that); a tree without sparse files costs nothing here. Files that only look sparse because the
 * filesystem compresses them or stores them inline are polled too. Past 1024 sparse files they
 * are polled round-robin, and a writer can get ahead of the check by that much.
 *
 * The sweep, a safety net. Some writes to an indexed file are named by no event the index can
 * use: through a hard link created, written through and removed between two ticks (the events
 * name only the transient link; link() and unlink() report nothing for the other names, checked
 * on Linux 6.18), or by Linux AIO (io_submit() writes raise no inotify event at all, checked on
 * Linux 6.18; the sandbox's seccomp profile should deny io_setup()/io_submit() as it denies
 * io_uring). And disk file systems change st_blocks at writeback, with no event (ext4 allocates
 * extent-tree blocks for fragmented files then). So each tick also re-stats
 * QuotaLimits.sweep_per_tick indexed files round-robin (default 256: a pass over 100,000 files
 * every ~40 s, ~0.5 ms per tick). Such changes are caught within one pass, not within a tick.
 *
 * Degraded mode. Watches are a shared, per-user kernel resource (fs.inotify.max_user_watches,
 * max_user_instances). Past QuotaLimits.max_watches directories, past QuotaLimits.max_index
 * names (the index costs ~180 bytes per name), or when the kernel refuses a watch or an inotify
 * instance, the watcher drops its index and watches and falls back to full scans, paced so they
 * take at most a fifth of the time (a scan of T ms runs at most every 5·T ms, and at most once
 * per tick). QuotaStats.degraded says so; the caller should log it once.
 *
 * Hostile trees. Depth is capped (max_depth, default 256) and so is the number of names
 * (max_entries, default 10,000,000): past either the usage is unknown and the functions return
 * -E2BIG (the caller treats that like an exceeded quota). A directory the daemon cannot read or
 * search (the sandbox can chmod 000 what it owns) gives -EACCES while it stays so: its content
 * is unknown, so fail closed. Directories swapped for symlinks, renamed away and back, or deleted
 * between an event and its re-stat are handled by re-checking inode identity on every open
 * (O_NOFOLLOW, fstat of the opened fd).
 *
 * Known limits. Files unlinked while still open keep their blocks but have no name: they are
 * not counted (they are freed when the sandbox, their last holder, dies). Between two ticks a
 * writer can add up to (tick period × its write rate) past the limit; through the channels only
 * the sweep sees, up to (sweep period × write rate). Degraded full scans block the caller for
 * their duration (~2.5-6 µs per name on a warm ext4, see tests/bench/bench-quota.c). Hence
 * SECURITY.md §5: a per-file RLIMIT_FSIZE or a project quota on top.
 *
 * All functions return 0 or a negative errno; nothing is logged (the caller logs once).
 */

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/macro.h"

#define QUOTA_MAX_ENTRIES_DEFAULT  UINT64_C(10000000)
#define QUOTA_MAX_DEPTH_DEFAULT    256U
#define QUOTA_MAX_WATCHES_DEFAULT  16384U
#define QUOTA_MAX_INDEX_DEFAULT    UINT64_C(1000000)
#define QUOTA_SPARSE_PER_TICK_DEFAULT 1024U
#define QUOTA_SPARSE_POLL_DISABLED UINT_MAX
#define QUOTA_SWEEP_PER_TICK_DEFAULT 256U
#define QUOTA_SWEEP_DISABLED       UINT_MAX

typedef struct QuotaWatch QuotaWatch;

typedef struct QuotaStats {
        uint64_t files;         /* non-directory names (regular files, symlinks, fifos, ...) */
        uint64_t dirs;          /* directories, the root included */
        uint64_t watches;       /* inotify watches held */
        uint64_t full_scans;    /* full scans and full resyncs so far */
        uint64_t events;        /* inotify events read so far */
        uint64_t restats;       /* fstatat() calls so far (scans included) */
        bool degraded;          /* no index: periodic full scans (watch/index cap or kernel limit) */
} QuotaStats;

/* Caps; a zero field means its default. */
typedef struct QuotaLimits {
        uint64_t max_entries;   /* names in the tree; more → -E2BIG */
        unsigned max_depth;     /* directory levels below the root; deeper → -E2BIG */
        unsigned max_watches;   /* watched directories; more → degraded */
        uint64_t max_index;     /* indexed names; more → degraded */
        unsigned sparse_per_tick; /* sparse files re-stat'ed per tick; QUOTA_SPARSE_POLL_DISABLED: none */
        unsigned sweep_per_tick;  /* files re-stat'ed per tick by the sweep; QUOTA_SWEEP_DISABLED: none */
} QuotaLimits;

/*
 * quota_scan() - one full scan of the tree at @dir_fd (not modified, not followed if it is a
 * symlink's target: pass a directory fd). @ret_stats may be NULL.
 * Return: 0 and the allocated bytes (st_blocks * 512, hard links once, the root included);
 * -E2BIG if the tree has more than 10,000,000 names or is deeper than 256 levels; -EACCES if a
 * directory cannot be read or searched; -ENOMEM; other -errno from the kernel.
 */
int quota_scan(int dir_fd, uint64_t *ret_bytes, QuotaStats *ret_stats);

/* quota_scan_full() - quota_scan() with explicit caps (@limits may be NULL = defaults). */
int quota_scan_full(int dir_fd, const QuotaLimits *limits, uint64_t *ret_bytes, QuotaStats *ret_stats);

/*
 * quota_watch_new() - full scan of the tree at @dir_fd into an index, plus inotify watches on
 * its directories. @dir_fd is not taken over (an own fd to the same directory is kept). Give
 * quota_watch_fd() to the event loop if it should wake early; quota_watch_tick() must be called
 * periodically in any case (every 100 ms during a run). The usage right after creation (the
 * before-run check) is what the first quota_watch_tick() returns: no second scan is needed.
 * Return: 0, or as quota_scan(). Running out of watches is not an error (degraded mode).
 */
int quota_watch_new(int dir_fd, QuotaWatch **ret);

/* quota_watch_new_full() - quota_watch_new() with explicit caps (@limits may be NULL = defaults). */
int quota_watch_new_full(int dir_fd, const QuotaLimits *limits, QuotaWatch **ret);

/* quota_watch_fd() - the inotify fd (non-blocking, CLOEXEC), readable when a tick has work. */
int quota_watch_fd(const QuotaWatch *w);

/*
 * quota_watch_tick() - drain pending events, re-stat what they name (and the sparse files), and
 * return the current usage in @ret_bytes. Never blocks on the inotify fd.
 * Return: 0; -E2BIG while the tree is past max_entries or max_depth; -EACCES while a directory
 * cannot be read or searched; -ENOMEM; other -errno. Any error means the usage is not known:
 * fail closed (stop the run). The watcher stays usable and later ticks recover if the tree does.
 */
int quota_watch_tick(QuotaWatch *w, uint64_t *ret_bytes);

/* quota_watch_stats() - counters and current shape of the tree, as of the last tick. */
void quota_watch_stats(const QuotaWatch *w, QuotaStats *ret);

/*
 * quota_watch_request_resync() - make the next tick resync the whole index, as after
 * IN_Q_OVERFLOW (for a caller that knows the tree changed behind inotify's back, and for tests).
 */
void quota_watch_request_resync(QuotaWatch *w);

/* quota_watch_free() - drop the watches, close the fd, free the index. Accepts NULL; returns NULL. */
QuotaWatch *quota_watch_free(QuotaWatch *w);
SR_DEFINE_FREE_FUNC(QuotaWatch *, quota_watch_free);
