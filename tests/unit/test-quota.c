/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/workspace/quota.c: full scans against a reference computed here (nftw, st_blocks, one
 * count per dev/ino), and the inotify watcher against a fresh full scan after every kind of change.
 */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/aio_abi.h>
#include <sys/syscall.h>

#include "workspace/quota.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* ---------------------------------------------------------------------------------------------
 * Reference: du's rule, computed independently. nftw() has no user pointer: file-scope state. */

typedef struct RefIno {
        dev_t dev;
        ino_t ino;
        uint64_t bytes;
} RefIno;

static RefIno *ref_v;
static size_t ref_n, ref_cap;

static int ref_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) path;
        (void) flag;
        (void) ftw;
        if (ref_n == ref_cap) {
                ref_cap = ref_cap ? ref_cap * 2 : 1024;
                ref_v = realloc(ref_v, ref_cap * sizeof(*ref_v));
                assert_non_null(ref_v);
        }
        ref_v[ref_n++] = (RefIno) { st->st_dev, st->st_ino, (uint64_t) st->st_blocks * 512 };
        return 0;
}

static int ref_cmp(const void *a, const void *b) {
        const RefIno *x = a, *y = b;

        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static uint64_t reference_usage(const char *root) {
        uint64_t sum = 0;

        ref_n = 0;
        assert_int_equal(nftw(root, ref_visit, 64, FTW_PHYS), 0);
        qsort(ref_v, ref_n, sizeof(*ref_v), ref_cmp);
        for (size_t i = 0; i < ref_n; i++)
                if (i == 0 || ref_cmp(&ref_v[i - 1], &ref_v[i]) != 0)
                        sum += ref_v[i].bytes;
        return sum;
}

/* ---------------------------------------------------------------------------------------------
 * Fixture: BASE/ws is the watched workspace, BASE/out is "outside" (same fs, for moves in/out). */

typedef struct Fx {
        char base[512];
        int root_fd;
        QuotaWatch *w;
} Fx;

static int rm_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        /* Directories only: chmod() follows symlinks, and the tree holds links to "/" and "..". */
        if (flag == FTW_DP || flag == FTW_D)
                (void) chmod(path, 0700);
        (void) remove(path);
        return 0;
}

static void rm_rf(const char *path) {
        (void) nftw(path, rm_visit, 64, FTW_DEPTH | FTW_PHYS);
}

/* A path below BASE/ws (or, starting with "/out", below BASE). Eight rotating buffers. */
_printf_(2, 3) static const char *P(Fx *f, const char *fmt, ...) {
        static char bufs[8][2 * PATH_MAX];
        static unsigned next;
        char rel[PATH_MAX], *b = bufs[next++ % 8];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        if (strncmp(rel, "/out", 4) == 0)
                (void) snprintf(b, sizeof(bufs[0]), "%s%s", f->base, rel);
        else
                (void) snprintf(b, sizeof(bufs[0]), "%s/ws%s%s", f->base, rel[0] ? "/" : "", rel);
        return b;
}

static const char *tmp_root(void) {
        const char *t = getenv("TMPDIR");

        return t && t[0] ? t : "/var/tmp";
}

static int setup_in(void **state, const char *root) {
        Fx *f = calloc(1, sizeof(*f));
        char p[sizeof(f->base) + 16];

        assert_non_null(f);
        (void) snprintf(f->base, sizeof(f->base), "%s/test-quota.XXXXXX", root);
        assert_non_null(mkdtemp(f->base));
        (void) snprintf(p, sizeof(p), "%s/ws", f->base);
        assert_int_equal(mkdir(p, 0700), 0);
        (void) snprintf(p, sizeof(p), "%s/out", f->base);
        assert_int_equal(mkdir(p, 0700), 0);
        (void) snprintf(p, sizeof(p), "%s/ws", f->base);
        f->root_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->root_fd >= 0);
        *state = f;
        return 0;
}

static int setup(void **state) {
        return setup_in(state, tmp_root());
}

/*
 * On a tmpfs if there is one: its st_blocks change only with the calls that make events. Disk
 * file systems also change them at writeback, with no event (ext4 allocates extent-tree blocks
 * for fragmented files then): the sweep's business, noise for a test of the events alone.
 */
static int setup_tmpfs(void **state) {
        struct statfs sfs;

        if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC && access("/dev/shm", W_OK) == 0)
                return setup_in(state, "/dev/shm");
        return setup(state);
}

static int teardown(void **state) {
        Fx *f = *state;

        f->w = quota_watch_free(f->w);
        close(f->root_fd);
        rm_rf(f->base);
        free(f);
        free(ref_v);
        ref_v = NULL;
        ref_n = ref_cap = 0;
        return 0;
}

static void write_file(const char *path, size_t size, bool append) {
        static char chunk[65536];
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0600);

        assert_true(fd >= 0);
        memset(chunk, 'x', sizeof(chunk));
        while (size > 0) {
                size_t n = size < sizeof(chunk) ? size : sizeof(chunk);
                assert_int_equal(write(fd, chunk, n), (ssize_t) n);
                size -= n;
        }
        /* Allocated now: with delayed allocation the blocks a file reports can still change at
         * writeback (a reservation becomes the real extent), without an event, and the exact
         * comparisons below would race the flusher. */
        assert_int_equal(fsync(fd), 0);
        assert_int_equal(close(fd), 0);
}

static void mkdir_ok(const char *path) {
        assert_int_equal(mkdir(path, 0700), 0);
}

static void rename_ok(const char *a, const char *b) {
        assert_int_equal(rename(a, b), 0);
}

/* The watcher's answer after one tick, checked against a full scan and the reference. */
#define check_watch(f) check_watch_at((f), __LINE__)
static uint64_t check_watch_at(Fx *f, int line) {
        uint64_t ticked = 0, scanned = 0, ref;
        int r;

        r = quota_watch_tick(f->w, &ticked);
        if (r != 0)
                print_message("# line %i: tick failed: %s\n", line, strerror(-r));
        assert_int_equal(r, 0);
        assert_int_equal(quota_scan(f->root_fd, &scanned, NULL), 0);
        ref = reference_usage(P(f, "%s", ""));
        if (ticked != ref || scanned != ref)
                print_message("# line %i: tick %" PRIu64 " scan %" PRIu64 " reference %" PRIu64 "\n",
                              line, ticked, scanned, ref);
        assert_int_equal(scanned, ref);
        assert_int_equal(ticked, ref);
        return ticked;
}

static QuotaStats stats_of(Fx *f) {
        QuotaStats s;

        quota_watch_stats(f->w, &s);
        return s;
}

/* ---------------------------------------------------------------------------------------------
 * Full scans */

static void build_mixed_tree(Fx *f) {
        mkdir_ok(P(f, "a"));
        mkdir_ok(P(f, "a/b"));
        mkdir_ok(P(f, "a/b/c"));
        mkdir_ok(P(f, "empty"));
        write_file(P(f, "top"), 10000, false);
        write_file(P(f, "zero"), 0, false);
        write_file(P(f, "a/one"), 1, false);
        write_file(P(f, "a/b/big"), 300000, false);
        write_file(P(f, "a/b/c/deep"), 5000, false);
        assert_int_equal(link(P(f, "a/b/big"), P(f, "hard1")), 0);
        assert_int_equal(link(P(f, "a/b/big"), P(f, "a/hard2")), 0);
        assert_int_equal(symlink("a/b/big", P(f, "sym")), 0);
        assert_int_equal(symlink("/", P(f, "a/root-link")), 0);
        assert_int_equal(symlink("..", P(f, "a/b/loop")), 0);
        assert_int_equal(mkfifo(P(f, "fifo"), 0600), 0);
}

static void test_scan_matches_reference(void **state) {
        Fx *f = *state;
        QuotaStats s;
        uint64_t bytes = 0, again = 0;

        build_mixed_tree(f);
        assert_int_equal(quota_scan(f->root_fd, &bytes, &s), 0);
        assert_int_equal(bytes, reference_usage(P(f, "%s", "")));
        /* top zero one big deep hard1 hard2 sym root-link loop fifo */
        assert_int_equal(s.files, 11);
        assert_int_equal(s.dirs, 5);            /* root a b c empty */
        assert_int_equal(s.full_scans, 1);
        assert_false(s.degraded);

        /* Hard links: removing two of three names changes nothing. */
        assert_int_equal(unlink(P(f, "hard1")), 0);
        assert_int_equal(unlink(P(f, "a/hard2")), 0);
        assert_int_equal(quota_scan(f->root_fd, &again, NULL), 0);
        assert_int_equal(again, bytes);
}

static void test_scan_sparse_and_symlinks(void **state) {
        Fx *f = *state;
        uint64_t before = 0, after = 0;
        struct stat st;
        int fd;

        assert_int_equal(quota_scan(f->root_fd, &before, NULL), 0);

        /* A 1 GiB sparse file with one 4 KiB block written costs about one block, not 1 GiB. */
        fd = open(P(f, "sparse"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, INT64_C(1) << 30), 0);
        assert_int_equal(pwrite(fd, "x", 1, INT64_C(512) << 20), 1);
        assert_int_equal(fsync(fd), 0);
        assert_int_equal(fstat(fd, &st), 0);
        close(fd);
        assert_int_equal(quota_scan(f->root_fd, &after, NULL), 0);
        assert_true(after - before < (UINT64_C(1) << 20));
        assert_int_equal(after - before, (uint64_t) st.st_blocks * 512);

        /* A symlink to a big tree outside is never followed. */
        write_file(P(f, "/out/huge"), 4 << 20, false);
        assert_int_equal(symlink(P(f, "/out"), P(f, "outlink")), 0);
        assert_int_equal(quota_scan(f->root_fd, &before, NULL), 0);
        assert_true(before < after + 65536);
        assert_int_equal(before, reference_usage(P(f, "%s", "")));
}

static void test_scan_limits(void **state) {
        Fx *f = *state;
        QuotaLimits l = { .max_depth = 4, .max_entries = 20 };
        uint64_t bytes;
        int fd, next;

        /* Depth: root = 0; 4 levels fine, the 5th is not. */
        mkdir_ok(P(f, "1"));
        mkdir_ok(P(f, "1/2"));
        mkdir_ok(P(f, "1/2/3"));
        mkdir_ok(P(f, "1/2/3/4"));
        write_file(P(f, "1/2/3/4/f"), 100, false);
        assert_int_equal(quota_scan_full(f->root_fd, &l, &bytes, NULL), 0);
        mkdir_ok(P(f, "1/2/3/4/5"));
        assert_int_equal(quota_scan_full(f->root_fd, &l, &bytes, NULL), -E2BIG);
        assert_int_equal(rmdir(P(f, "1/2/3/4/5")), 0);

        /* Entries. */
        for (int i = 0; i < 15; i++)
                write_file(P(f, "f%d", i), 0, false);
        assert_int_equal(quota_scan_full(f->root_fd, &l, &bytes, NULL), 0);    /* 5 + 15 names */
        write_file(P(f, "one-more"), 0, false);
        assert_int_equal(quota_scan_full(f->root_fd, &l, &bytes, NULL), -E2BIG);

        /* The default depth cap, 256: a 257-deep chain is refused (mkdirat: no PATH_MAX issue). */
        fd = openat(f->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < 256; i++) {
                assert_int_equal(mkdirat(fd, "d", 0700), 0);
                next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(next >= 0);
                close(fd);
                fd = next;
        }
        assert_int_equal(quota_scan(f->root_fd, &bytes, NULL), 0);
        assert_int_equal(mkdirat(fd, "d", 0700), 0);
        assert_int_equal(quota_scan(f->root_fd, &bytes, NULL), -E2BIG);
        close(fd);
}

/* ---------------------------------------------------------------------------------------------
 * The watcher, change by change */

static void test_watch_basic_changes(void **state) {
        Fx *f = *state;
        uint64_t b0, b;
        int fd;

        build_mixed_tree(f);
        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        assert_true(quota_watch_fd(f->w) >= 0);
        b0 = check_watch(f);
        assert_int_equal(stats_of(f).dirs, 5);
        assert_int_equal(stats_of(f).files, 11);
        assert_int_equal(stats_of(f).watches, 5);
        assert_int_equal(stats_of(f).full_scans, 1);

        /* Nothing happened: same answer. */
        assert_int_equal(check_watch(f), b0);

        write_file(P(f, "new"), 50000, false);                          /* create */
        b = check_watch(f);
        assert_true(b > b0);
        write_file(P(f, "new"), 200000, true);                          /* append */
        check_watch(f);
        assert_int_equal(truncate(P(f, "new"), 4096), 0);               /* truncate */
        check_watch(f);
        assert_int_equal(truncate(P(f, "new"), 0), 0);
        check_watch(f);
        assert_int_equal(unlink(P(f, "new")), 0);                       /* unlink */
        check_watch(f);

        mkdir_ok(P(f, "n"));                                            /* mkdir + files, same tick */
        mkdir_ok(P(f, "n/m"));
        for (int i = 0; i < 20; i++)
                write_file(P(f, "n/m/f%d", i), 1000 * (size_t) i, false);
        check_watch(f);

        assert_int_equal(link(P(f, "n/m/f19"), P(f, "a/b/c/h")), 0);   /* hard link elsewhere */
        check_watch(f);
        write_file(P(f, "a/b/c/h"), 100000, true);                      /* grow through the other name */
        check_watch(f);
        assert_int_equal(unlink(P(f, "n/m/f19")), 0);                   /* first name gone */
        check_watch(f);

        rename_ok(P(f, "top"), P(f, "n/top2"));                         /* rename a file across dirs */
        check_watch(f);

        fd = open(P(f, "a/one"), O_WRONLY | O_CLOEXEC);                 /* a fallocate'd extent */
        assert_true(fd >= 0);
        assert_int_equal(posix_fallocate(fd, 0, 1 << 20), 0);
        close(fd);
        check_watch(f);

        assert_int_equal(chmod(P(f, "a/one"), 0400), 0);                /* attribute-only change */
        check_watch(f);
}

/* Writes through one name of a hard-linked inode, then that name goes away before the tick:
 * the events name only the vanished name, the other names must be re-stat'ed. */
static void test_watch_hard_link_written_then_removed(void **state) {
        Fx *f = *state;
        uint64_t b;

        mkdir_ok(P(f, "a"));
        mkdir_ok(P(f, "b"));
        write_file(P(f, "a/keep"), 4096, false);
        assert_int_equal(link(P(f, "a/keep"), P(f, "b/alias")), 0);
        /* Without the sweep: the events alone must do. */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .sweep_per_tick = QUOTA_SWEEP_DISABLED },
                                              &f->w), 0);
        check_watch(f);

        write_file(P(f, "b/alias"), 200000, true);              /* grow through the indexed alias... */
        assert_int_equal(unlink(P(f, "b/alias")), 0);           /* ...and drop it */
        check_watch(f);

        assert_int_equal(link(P(f, "a/keep"), P(f, "b/alias")), 0);
        check_watch(f);
        write_file(P(f, "b/alias"), 100000, true);              /* grow, then replace the name */
        write_file(P(f, "b/other"), 10, false);
        rename_ok(P(f, "b/other"), P(f, "b/alias"));
        check_watch(f);

        assert_int_equal(link(P(f, "a/keep"), P(f, "b/alias2")), 0);
        check_watch(f);
        write_file(P(f, "b/alias2"), 100000, true);             /* grow, then the whole dir goes */
        rm_rf(P(f, "b"));
        check_watch(f);

        /* A link the index never saw (created, written through, removed between two ticks): no
         * event names "keep". The documented gap without the sweep... */
        assert_int_equal(link(P(f, "a/keep"), P(f, "a/transient")), 0);
        write_file(P(f, "a/transient"), 300000, true);
        assert_int_equal(unlink(P(f, "a/transient")), 0);
        assert_int_equal(quota_watch_tick(f->w, &b), 0);
        assert_true(b + 250000 < reference_usage(P(f, "%s", "")));
        f->w = quota_watch_free(f->w);

        /* ...that the sweep closes (one pass: this tree is smaller than one tick's share). */
        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        check_watch(f);
        assert_int_equal(link(P(f, "a/keep"), P(f, "a/transient")), 0);
        write_file(P(f, "a/transient"), 300000, true);
        assert_int_equal(unlink(P(f, "a/transient")), 0);
        check_watch(f);
}

/* Linux AIO writes raise no inotify event (Linux 6.18): only the sweep sees them. */
static void test_watch_aio_writes_need_the_sweep(void **state) {
        Fx *f = *state;
        static char block[65536];
        aio_context_t ctx = 0;
        struct iocb cb, *cbs[1] = { &cb };
        struct io_event ev;
        uint64_t b0, b;
        int fd;

        if (syscall(SYS_io_setup, 8, &ctx) < 0) {
                print_message("# io_setup: %s, skipping the AIO part\n", strerror(errno));
                return;
        }
        for (int pass = 0; pass < 2; pass++) {
                bool sweep = pass == 1;

                assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) {
                                        .sweep_per_tick = sweep ? 0 : QUOTA_SWEEP_DISABLED }, &f->w), 0);
                fd = open(P(f, "aio%d", pass), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                assert_true(fd >= 0);
                b0 = check_watch(f);
                for (int i = 0; i < 16; i++) {
                        cb = (struct iocb) {
                                .aio_fildes = (uint32_t) fd,
                                .aio_lio_opcode = IOCB_CMD_PWRITE,
                                .aio_buf = (uint64_t) (uintptr_t) block,
                                .aio_nbytes = sizeof(block),
                                .aio_offset = (int64_t) i * (int64_t) sizeof(block),
                        };
                        assert_int_equal(syscall(SYS_io_submit, ctx, 1, cbs), 1);
                        assert_int_equal(syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL), 1);
                        assert_int_equal(ev.res, (int64_t) sizeof(block));
                }
                assert_int_equal(quota_watch_tick(f->w, &b), 0);
                print_message("# 1 MiB of AIO writes, sweep %s: +%" PRIu64 " bytes seen\n", sweep ? "on" : "off",
                              b - b0);
                if (sweep)
                        check_watch(f);
                else
                        assert_true(b - b0 < sizeof(block));    /* the documented gap */
                close(fd);
                f->w = quota_watch_free(f->w);
        }
        (void) syscall(SYS_io_destroy, ctx);
}

static void test_watch_directory_moves(void **state) {
        Fx *f = *state;
        QuotaStats s0, s1;

        mkdir_ok(P(f, "a"));
        mkdir_ok(P(f, "b"));
        mkdir_ok(P(f, "big"));
        for (int d = 0; d < 10; d++) {
                mkdir_ok(P(f, "big/d%d", d));
                for (int i = 0; i < 100; i++)
                        write_file(P(f, "big/d%d/f%d", d, i), 100, false);
        }
        write_file(P(f, "a/x"), 10000, false);
        write_file(P(f, "b/y"), 20000, false);
        /* No sweep: the re-stat count below is then what the rename costs. */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .sweep_per_tick = QUOTA_SWEEP_DISABLED },
                                              &f->w), 0);
        check_watch(f);

        /* A rename within the tree re-attaches the subtree: no rescan of its 1,000 files. */
        quota_watch_stats(f->w, &s0);
        rename_ok(P(f, "big"), P(f, "a/big2"));
        check_watch(f);
        quota_watch_stats(f->w, &s1);
        assert_int_equal(s1.full_scans, s0.full_scans);
        print_message("# rename of a 1,000-file subtree: %" PRIu64 " re-stats\n", s1.restats - s0.restats);
        assert_true(s1.restats - s0.restats < 20);
        assert_int_equal(s1.watches, s0.watches);

        /* Out of the tree, and back in whole (a new directory: scanned). */
        rename_ok(P(f, "a/big2"), P(f, "/out/big"));
        check_watch(f);
        assert_int_equal(stats_of(f).watches, s0.watches - 11);
        rename_ok(P(f, "/out/big"), P(f, "b/big"));
        check_watch(f);
        assert_int_equal(stats_of(f).watches, s0.watches);

        /* Away and back between two ticks. */
        rename_ok(P(f, "b/big"), P(f, "/out/big"));
        rename_ok(P(f, "/out/big"), P(f, "b/big"));
        check_watch(f);

        /* Swap two directories through a temporary name. */
        rename_ok(P(f, "a"), P(f, "t"));
        rename_ok(P(f, "b"), P(f, "a"));
        rename_ok(P(f, "t"), P(f, "b"));
        check_watch(f);

        /* Invert parent and child: a/big → big, then a → big/a. */
        rename_ok(P(f, "a/big"), P(f, "big"));
        rename_ok(P(f, "a"), P(f, "big/a"));
        check_watch(f);
        check_watch(f);

        /* Replace a directory by a file, and a file by a directory, under the same name. */
        rename_ok(P(f, "b"), P(f, "/out/b"));
        write_file(P(f, "b"), 30000, false);
        check_watch(f);
        assert_int_equal(unlink(P(f, "b")), 0);
        mkdir_ok(P(f, "b"));
        write_file(P(f, "b/z"), 40000, false);
        check_watch(f);

        /* rmdir of a whole subtree, and mkdir again under the same name (inode number reuse). */
        rm_rf(P(f, "big"));
        check_watch(f);
        mkdir_ok(P(f, "big"));
        write_file(P(f, "big/again"), 5000, false);
        check_watch(f);
}

static void test_watch_dir_replaced_by_symlink(void **state) {
        Fx *f = *state;
        uint64_t b;

        mkdir_ok(P(f, "d"));
        write_file(P(f, "d/data"), 100000, false);
        write_file(P(f, "/out/secret"), 8 << 20, false);
        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        check_watch(f);

        /* The sandbox swaps the directory for a symlink to somewhere big: never followed. */
        rename_ok(P(f, "d"), P(f, "/out/d"));
        assert_int_equal(symlink(P(f, "/out"), P(f, "d")), 0);
        write_file(P(f, "/out/d/data"), 4096, true);
        b = check_watch(f);
        assert_true(b < (1 << 20));
        assert_int_equal(stats_of(f).watches, 1);

        /* And back: a symlink replaced by a directory. */
        assert_int_equal(unlink(P(f, "d")), 0);
        rename_ok(P(f, "/out/d"), P(f, "d"));
        check_watch(f);
        assert_int_equal(stats_of(f).watches, 2);

        /* A symlink loop inside the tree is just a name. */
        assert_int_equal(symlink(".", P(f, "d/self")), 0);
        assert_int_equal(symlink("self/self", P(f, "d/self2")), 0);
        check_watch(f);
}

static void test_watch_many_small_files(void **state) {
        Fx *f = *state;
        QuotaStats s;

        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        for (int d = 0; d < 20; d++) {
                mkdir_ok(P(f, "d%d", d));
                for (int i = 0; i < 50; i++)
                        write_file(P(f, "d%d/f%d", d, i), 10, false);
        }
        for (int i = 0; i < 1000; i++)
                write_file(P(f, "flat%d", i), (size_t) i * 7, false);
        check_watch(f);
        quota_watch_stats(f->w, &s);
        assert_int_equal(s.files, 2000);
        assert_int_equal(s.dirs, 21);

        for (int i = 0; i < 1000; i += 2)
                assert_int_equal(unlink(P(f, "flat%d", i)), 0);
        rm_rf(P(f, "d7"));
        check_watch(f);
        quota_watch_stats(f->w, &s);
        assert_int_equal(s.files, 2000 - 500 - 50);
}

static void test_watch_appender_is_coalesced(void **state) {
        Fx *f = *state;
        static const char block[4096];
        QuotaStats s0, s1;
        uint64_t b;
        int fd;

        /* No sweep: count only what the events cost. */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .sweep_per_tick = QUOTA_SWEEP_DISABLED },
                                              &f->w), 0);
        fd = open(P(f, "log"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        check_watch(f);
        quota_watch_stats(f->w, &s0);
        for (int i = 0; i < 2000; i++) {
                assert_int_equal(write(fd, block, sizeof(block)), (ssize_t) sizeof(block));
                if (i % 500 == 499)             /* let the events be read in several batches */
                        assert_int_equal(quota_watch_tick(f->w, &b), 0);
        }
        b = check_watch(f);
        quota_watch_stats(f->w, &s1);
        close(fd);
        print_message("# 2000 appends: %" PRIu64 " events read, %" PRIu64 " re-stats\n",
                      s1.events - s0.events, s1.restats - s0.restats);
        assert_true(b >= 2000 * sizeof(block));
        /* One re-stat of the file and one of its directory per tick at most. */
        assert_true(s1.restats - s0.restats <= 5 * 3);
}

static void test_watch_fd_wakes(void **state) {
        Fx *f = *state;
        struct pollfd p;
        uint64_t b;

        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        assert_int_equal(quota_watch_tick(f->w, &b), 0);
        p = (struct pollfd) { .fd = quota_watch_fd(f->w), .events = POLLIN };
        assert_int_equal(poll(&p, 1, 0), 0);
        write_file(P(f, "x"), 1, false);
        assert_int_equal(poll(&p, 1, 1000), 1);
        check_watch(f);
        assert_int_equal(poll(&p, 1, 0), 0);    /* drained */
}

static void test_watch_overflow(void **state) {
        Fx *f = *state;
        QuotaStats s0, s1;
        unsigned long max_queued = 16384;
        FILE *q = fopen("/proc/sys/fs/inotify/max_queued_events", "re");
        bool real = true;

        if (q) {
                if (fscanf(q, "%lu", &max_queued) != 1)
                        max_queued = 16384;
                fclose(q);
        }
        if (max_queued > 200000)
                real = false;           /* too many files to force it: use the hook */

        mkdir_ok(P(f, "d"));
        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        check_watch(f);
        quota_watch_stats(f->w, &s0);
        if (real) {
                /* IN_MODIFY, IN_ATTRIB, IN_MODIFY, ...: alternating, so the kernel cannot merge
                 * them; twice the queue length. Plus a few new names the resync must find. */
                int fd = open(P(f, "d/f"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

                assert_true(fd >= 0);
                for (unsigned long i = 0; i < max_queued; i++) {
                        assert_int_equal(write(fd, "x", 1), 1);
                        assert_int_equal(fchmod(fd, i % 2 ? 0600 : 0640), 0);
                }
                close(fd);
                for (int i = 0; i < 10; i++)
                        write_file(P(f, "d/g%d", i), 5000, false);
        } else {
                write_file(P(f, "d/f"), 1, false);
                quota_watch_request_resync(f->w);
        }
        check_watch(f);
        quota_watch_stats(f->w, &s1);
        print_message("# %s overflow: full scans %" PRIu64 " → %" PRIu64 "\n", real ? "real" : "simulated",
                      s0.full_scans, s1.full_scans);
        assert_int_equal(s1.full_scans, s0.full_scans + 1);
        check_watch(f);

        /* The resync hook on its own. */
        quota_watch_request_resync(f->w);
        check_watch(f);
        assert_int_equal(stats_of(f).full_scans, s1.full_scans + 1);
}

static void wait_and_check_degraded(Fx *f) {
        /* Degraded scans are paced (at most 1/5 of the time): do not depend on the clock here. */
        quota_watch_request_resync(f->w);
        check_watch(f);
        assert_true(stats_of(f).degraded);
        assert_int_equal(stats_of(f).watches, 0);
}

static void test_watch_cap_degrades(void **state) {
        Fx *f = *state;
        QuotaStats s;

        for (int i = 0; i < 5; i++) {
                mkdir_ok(P(f, "d%d", i));
                write_file(P(f, "d%d/f", i), 1000, false);
        }

        /* At creation: 6 directories, 3 watches allowed. */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .max_watches = 3 }, &f->w), 0);
        quota_watch_stats(f->w, &s);
        assert_true(s.degraded);
        assert_int_equal(s.watches, 0);
        assert_int_equal(s.dirs, 6);
        check_watch(f);
        write_file(P(f, "d3/g"), 70000, false);
        wait_and_check_degraded(f);
        rm_rf(P(f, "d2"));
        wait_and_check_degraded(f);
        f->w = quota_watch_free(f->w);

        /* During a run: fine at first, then the tree grows past the cap. */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .max_watches = 8 }, &f->w), 0);
        assert_false(stats_of(f).degraded);
        check_watch(f);
        for (int i = 0; i < 5; i++)
                mkdir_ok(P(f, "e%d", i));
        write_file(P(f, "e4/big"), 300000, false);
        check_watch(f);
        assert_true(stats_of(f).degraded);
        write_file(P(f, "e4/big"), 300000, true);
        wait_and_check_degraded(f);
}

static void test_watch_index_cap_degrades(void **state) {
        Fx *f = *state;

        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .max_index = 50 }, &f->w), 0);
        check_watch(f);
        for (int i = 0; i < 60; i++)
                write_file(P(f, "f%d", i), 100, false);
        check_watch(f);
        assert_true(stats_of(f).degraded);
        assert_int_equal(stats_of(f).files, 60);
}

static void test_watch_entry_and_depth_caps(void **state) {
        Fx *f = *state;
        QuotaLimits l = { .max_entries = 50, .max_index = 1000, .max_depth = 3 };
        uint64_t b;

        assert_int_equal(quota_watch_new_full(f->root_fd, &l, &f->w), 0);
        check_watch(f);

        for (int i = 0; i < 60; i++)
                write_file(P(f, "f%d", i), 100, false);
        assert_int_equal(quota_watch_tick(f->w, &b), -E2BIG);
        assert_int_equal(quota_watch_tick(f->w, &b), -E2BIG);   /* stays so */
        for (int i = 0; i < 30; i++)
                assert_int_equal(unlink(P(f, "f%d", i)), 0);
        check_watch(f);                                         /* shrank: indexed again */
        assert_int_equal(stats_of(f).files, 30);

        mkdir_ok(P(f, "1"));
        mkdir_ok(P(f, "1/2"));
        mkdir_ok(P(f, "1/2/3"));
        write_file(P(f, "1/2/3/f"), 100, false);
        check_watch(f);
        mkdir_ok(P(f, "1/2/3/4"));
        write_file(P(f, "1/2/3/4/hidden"), 1 << 20, false);
        assert_int_equal(quota_watch_tick(f->w, &b), -E2BIG);
        assert_int_equal(quota_watch_tick(f->w, &b), -E2BIG);
        rm_rf(P(f, "1/2/3/4"));
        check_watch(f);

        /* Moved below the cap as a whole. */
        mkdir_ok(P(f, "x"));
        mkdir_ok(P(f, "x/y"));
        check_watch(f);
        rename_ok(P(f, "x"), P(f, "1/2/x"));
        assert_int_equal(quota_watch_tick(f->w, &b), -E2BIG);
        rename_ok(P(f, "1/2/x"), P(f, "x"));
        check_watch(f);

        /* Creation refuses a tree past the caps. */
        f->w = quota_watch_free(f->w);
        mkdir_ok(P(f, "1/2/3/4"));
        assert_int_equal(quota_watch_new_full(f->root_fd, &l, &f->w), -E2BIG);
        assert_null(f->w);
}

static void test_watch_mmap_writes_need_the_sparse_poll(void **state) {
        Fx *f = *state;
        const size_t size = 2 << 20;
        uint64_t b0, b;
        QuotaStats s0, s1;
        char *m;
        int fd;

        for (int pass = 0; pass < 2; pass++) {
                bool poll = pass == 1;

                assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) {
                                        .sparse_per_tick = poll ? 0 : QUOTA_SPARSE_POLL_DISABLED,
                                        .sweep_per_tick = QUOTA_SWEEP_DISABLED }, &f->w), 0);
                fd = open(P(f, "mapped%d", pass), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
                assert_true(fd >= 0);
                assert_int_equal(ftruncate(fd, (off_t) size), 0);
                m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                assert_true(m != MAP_FAILED);
                close(fd);
                b0 = check_watch(f);

                /* Silent: no write(), no event, the mapping outlives the fd. */
                memset(m, 'y', size);
                assert_int_equal(msync(m, size, MS_SYNC), 0);
                assert_int_equal(quota_watch_tick(f->w, &b), 0);
                print_message("# mmap writes into a sparse file, poll %s: +%" PRIu64 " bytes seen\n",
                              poll ? "on" : "off", b - b0);
                if (poll)
                        check_watch(f);
                else
                        assert_true(b - b0 < size / 2);   /* the gap the poll closes */
                assert_int_equal(munmap(m, size), 0);
                f->w = quota_watch_free(f->w);
        }

        /* Files without holes are not polled: without the sweep, an idle tick re-stats nothing. */
        for (int i = 0; i < 50; i++)
                write_file(P(f, "dense%d", i), 10000, false);
        assert_int_equal(unlink(P(f, "mapped1")), 0);   /* now full: no longer sparse either way */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .sweep_per_tick = QUOTA_SWEEP_DISABLED },
                                              &f->w), 0);
        check_watch(f);
        quota_watch_stats(f->w, &s0);
        for (int i = 0; i < 10; i++)
                check_watch(f);
        quota_watch_stats(f->w, &s1);
        assert_int_equal(s1.restats, s0.restats);
}

static int write_at(int dfd, const char *name, size_t size) {
        static const char zeros[4096];
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

        if (fd < 0)
                return -1;
        for (size_t n = 0; n < size; n += sizeof(zeros))
                if (write(fd, zeros, sizeof(zeros)) != (ssize_t) sizeof(zeros)) {
                        close(fd);
                        return -1;
                }
        return close(fd);
}

/*
 * As an unprivileged user (root's DAC override would hide it): a directory chmod 000. Everything
 * relative to @ufd, opened before dropping privileges: some containers have "/" at 0700, where
 * the unprivileged child cannot even reach /proc/self/fd (the watcher then runs degraded, which
 * must fail closed just the same).
 */
static int unreadable_child(int ufd) {
        QuotaWatch *w = NULL;
        QuotaStats s;
        uint64_t b, scanned;

        if (getuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
                return 10;
        if (mkdirat(ufd, "locked", 0700) < 0 || write_at(ufd, "locked/f", 100000) < 0)
                return 11;
        if (quota_watch_new(ufd, &w) < 0)
                return 12;
        quota_watch_stats(w, &s);
        printf("# unprivileged watcher %s\n", s.degraded ? "degraded (no /proc access)" : "indexed");
        if (quota_watch_tick(w, &b) < 0)
                return 13;

        if (fchmodat(ufd, "locked", 0, 0) < 0)
                return 14;
        quota_watch_request_resync(w);          /* degraded scans are paced: not on the clock */
        if (quota_watch_tick(w, &b) != -EACCES)
                return 15;
        if (quota_scan(ufd, &scanned, NULL) != -EACCES)
                return 16;
        quota_watch_request_resync(w);
        if (quota_watch_tick(w, &b) != -EACCES) /* stays so */
                return 17;

        if (fchmodat(ufd, "locked", 0700, 0) < 0)
                return 18;
        if (write_at(ufd, "locked/g", 50000) < 0)
                return 19;
        quota_watch_request_resync(w);
        if (quota_watch_tick(w, &b) < 0)
                return 20;
        if (quota_scan(ufd, &scanned, NULL) < 0 || scanned != b)
                return 21;
        quota_watch_free(w);
        return 0;
}

static void test_watch_unreadable_directory(void **state) {
        Fx *f = *state;
        int status, ufd;
        pid_t pid;

        mkdir_ok(P(f, "u"));
        if (getuid() == 0)
                assert_int_equal(chown(P(f, "u"), 65534, 65534), 0);
        ufd = open(P(f, "u"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(ufd >= 0);
        fflush(stdout);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int r = unreadable_child(ufd);
                fflush(stdout);
                _exit(r);
        }
        close(ufd);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Random churn: everything at once, errors ignored (most random renames are refused). */

static void rand_rel(char *buf, size_t size, unsigned *seed) {
        static const int depths[] = { 0, 0, 1, 1, 1, 2, 2, 3 };
        int depth = depths[rand_r(seed) % 8], n = 0;

        buf[0] = '\0';
        for (int i = 0; i < depth; i++)
                n += snprintf(buf + n, size - (size_t) n, "d%d/", rand_r(seed) % 4);
        (void) snprintf(buf + n, size - (size_t) n, "%c%d", rand_r(seed) % 2 ? 'd' : 'f', rand_r(seed) % 4);
}

/* Returns true after a link(): see test_watch_random_churn(). */
static bool churn_one(const char *base, unsigned *seed) {
        char a[256], b[256], pa[1024], pb[1024];
        int fd, op = rand_r(seed) % 12;

        rand_rel(a, sizeof(a), seed);
        rand_rel(b, sizeof(b), seed);
        (void) snprintf(pa, sizeof(pa), "%s/ws/%s", base, a);
        (void) snprintf(pb, sizeof(pb), "%s/ws/%s", base, b);

        switch (op) {
        case 0:
        case 1:
                fd = open(pa, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd >= 0) {
                        static const char blk[8192];
                        (void) !write(fd, blk, (size_t) (rand_r(seed) % (int) sizeof(blk)));
                        close(fd);
                }
                break;
        case 2:
                if (truncate(pa, rand_r(seed) % 20000) < 0) {
                        /* expected now and then (a directory, a missing path): churn errors are ignored */
                }
                break;
        case 3:
                (void) unlink(pa);
                break;
        case 4:
        case 5:
                (void) mkdir(pa, 0700);
                break;
        case 6:
                if (rand_r(seed) % 4 == 0)
                        rm_rf(pa);
                else
                        (void) rmdir(pa);
                break;
        case 7:
        case 8:
                (void) rename(pa, pb);
                break;
        case 9:
                return link(pa, pb) == 0;
        case 10:
                /* Never ".." (or anything resolving outside): the churn uses path strings, and a path
                 * through such a link escapes the tree (it once chmod-ed and wrote outside it). */
                if (symlink(rand_r(seed) % 2 ? "dangling-target" : b, pa) < 0) {
                        /* expected now and then (the path exists, a missing parent): ignored as above */
                }
                break;
        case 11:
                /* out of the tree and back in somewhere else */
                (void) snprintf(pb, sizeof(pb), "%s/out/x%d", base, rand_r(seed) % 4);
                if (rand_r(seed) % 2)
                        (void) rename(pa, pb);
                else
                        (void) rename(pb, pa);
                break;
        default:
                break;
        }
        return false;
}

static unsigned test_seed(unsigned dflt) {
        const char *e = getenv("QUOTA_TEST_SEED");       /* to explore: QUOTA_TEST_SEED=n */

        return e ? (unsigned) strtoul(e, NULL, 10) : dflt;
}

static void test_watch_random_churn(void **state) {
        Fx *f = *state;
        unsigned seed = test_seed(12345);
        QuotaStats s;

        /* The events alone, exact after every tick: no sweep. And a tick right after each new
         * hard link, so that no write goes through a link the index has not seen (the gap only
         * the sweep closes, see test_watch_hard_link_written_then_removed()). */
        assert_int_equal(quota_watch_new_full(f->root_fd, &(QuotaLimits) { .sweep_per_tick = QUOTA_SWEEP_DISABLED },
                                              &f->w), 0);
        for (int round = 0; round < 300; round++) {
                int n = 1 + rand_r(&seed) % 10;

                for (int i = 0; i < n; i++)
                        if (churn_one(f->base, &seed))
                                break;
                check_watch(f);
        }
        quota_watch_stats(f->w, &s);
        print_message("# churn: %" PRIu64 " files, %" PRIu64 " dirs, %" PRIu64 " full scans, %" PRIu64
                      " events, %" PRIu64 " re-stats\n", s.files, s.dirs, s.full_scans, s.events, s.restats);
        assert_int_equal(s.full_scans, 1);
}

/* A concurrent writer while the watcher ticks (default limits, sweep included): every tick
 * succeeds, and once the writer stops, the index converges to the truth. */
static void test_watch_concurrent_churn(void **state) {
        Fx *f = *state;
        uint64_t b, scanned = 0;
        int status, ticks = 0;
        pid_t pid;

        assert_int_equal(quota_watch_new(f->root_fd, &f->w), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                unsigned seed = test_seed(777);

                for (int i = 0; i < 30000; i++)
                        (void) churn_one(f->base, &seed);
                _exit(0);
        }
        for (;;) {
                pid_t p = waitpid(pid, &status, WNOHANG);

                assert_int_equal(quota_watch_tick(f->w, &b), 0);
                ticks++;
                if (p == pid)
                        break;
                (void) usleep(2000);
        }
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        for (int i = 0; i < 3; i++) {
                assert_int_equal(quota_watch_tick(f->w, &b), 0);
                assert_int_equal(quota_scan(f->root_fd, &scanned, NULL), 0);
                if (b == scanned)
                        break;
        }
        print_message("# concurrent churn: %d ticks, full scans %" PRIu64 "\n", ticks, stats_of(f).full_scans);
        check_watch(f);
}

static void test_free_null(void **state) {
        (void) state;
        assert_null(quota_watch_free(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_scan_matches_reference, setup, teardown),
                cmocka_unit_test_setup_teardown(test_scan_sparse_and_symlinks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_scan_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_basic_changes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_hard_link_written_then_removed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_aio_writes_need_the_sweep, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_directory_moves, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_dir_replaced_by_symlink, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_many_small_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_appender_is_coalesced, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_fd_wakes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_overflow, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_cap_degrades, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_index_cap_degrades, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_entry_and_depth_caps, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_mmap_writes_need_the_sparse_poll, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_unreadable_directory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_random_churn, setup_tmpfs, teardown),
                cmocka_unit_test_setup_teardown(test_watch_concurrent_churn, setup_tmpfs, teardown),
                cmocka_unit_test(test_free_null),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
