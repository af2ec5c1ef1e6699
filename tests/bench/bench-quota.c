/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Cost of workspace quota checks on a tree of 100,000 small files in 1,000 directories, next to
 * `du -s -B1` of the same tree in the same run: a full scan (median of 5), the watcher's idle tick
 * (median of 1,000: with the default sweep, without it, and with 1,000 sparse files added, which
 * are polled), its tick while a writer appends 4 KiB every millisecond, and the time from the
 * moment a writer crosses a limit to the first 100 ms tick that reports it. The tree lives below
 * --dir (never a tmpfs: /var/tmp is used instead) and is removed at exit. Page cache warm (the
 * tree was just written), as during a run.
 *
 *   bench-quota [--dir DIR] [--files 100000] [--dirs 1000] [--trials 10]
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "workspace/quota.h"
#include "util/macro.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

#define TICK_NS (UINT64_C(100) * 1000 * 1000)

/* The data directory, removed at exit whatever happens (die() included). */
static char base[4096];

static int rm_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) flag;
        (void) ftw;
        (void) remove(path);
        return 0;
}

static void remove_base(void) {
        char ws[4200];
        long ncpu = MIN(sysconf(_SC_NPROCESSORS_ONLN), 8L);
        unsigned workers = ncpu < 1 ? 1 : (unsigned) ncpu;
        DIR *d;

        if (!base[0])
                return;

        /* The top-level directories of the workspace in parallel (unlink is kernel time), then the
         * rest. FTW_PHYS: never through a symlink; remove() only, no chmod (it follows links). */
        (void) snprintf(ws, sizeof(ws), "%s/ws", base);
        for (unsigned k = 0; k < workers; k++) {
                pid_t pid = fork();

                if (pid == 0) {
                        struct dirent *de;
                        unsigned i = 0;

                        /* Its own DIR: a shared one would share the file offset. */
                        d = opendir(ws);
                        while (d && (de = readdir(d)))
                                if (de->d_name[0] != '.' && i++ % workers == k) {
                                        char p[4500];

                                        (void) snprintf(p, sizeof(p), "%s/%s", ws, de->d_name);
                                        (void) nftw(p, rm_visit, 16, FTW_DEPTH | FTW_PHYS);
                                }
                        _exit(0);
                }
                if (pid < 0)
                        break;
        }
        while (wait(NULL) > 0)
                ;
        (void) nftw(base, rm_visit, 64, FTW_DEPTH | FTW_PHYS);
        base[0] = '\0';
}

static void on_signal(int sig) {
        remove_base();
        signal(sig, SIG_DFL);
        raise(sig);
}

_printf_(1, 2) static _Noreturn void die(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        fprintf(stderr, "bench-quota: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        exit(EXIT_FAILURE);
}

static uint64_t now_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
        struct timespec ts = { .tv_sec = (time_t) (t / 1000000000ULL), .tv_nsec = (long) (t % 1000000000ULL) };

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

typedef struct Dist {
        double median_ms, p25_ms, p75_ms, p99_ms, max_ms;
} Dist;

static Dist dist(uint64_t *v, size_t n) {
        qsort(v, n, sizeof(*v), cmp_u64);
        return (Dist) {
                .median_ms = (double) v[n / 2] / 1e6,
                .p25_ms = (double) v[n / 4] / 1e6,
                .p75_ms = (double) v[MIN(n - 1, n * 3 / 4)] / 1e6,
                .p99_ms = (double) v[MIN(n - 1, n * 99 / 100)] / 1e6,
                .max_ms = (double) v[n - 1] / 1e6,
        };
}

/* ---- the tree ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void) {
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Directories [first, first+n) of @ws with @per files of 1 B to 4 KiB each. */
static void make_dirs(int ws_fd, unsigned first, unsigned n, unsigned per) {
        static char data[4096];

        memset(data, 'q', sizeof(data));
        for (unsigned d = first; d < first + n; d++) {
                char name[64];
                int dfd;

                (void) snprintf(name, sizeof(name), "d%04u", d);
                if (mkdirat(ws_fd, name, 0700) < 0)
                        die("mkdir %s: %m", name);
                dfd = openat(ws_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0)
                        die("open %s: %m", name);
                for (unsigned i = 0; i < per; i++) {
                        size_t size = 1 + (size_t) (rng() % sizeof(data));
                        int fd;

                        (void) snprintf(name, sizeof(name), "f%05u", i);
                        fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                        if (fd < 0 || write(fd, data, size) != (ssize_t) size)
                                die("create %s: %m", name);
                        close(fd);
                }
                close(dfd);
        }
}

/* In parallel, one process per CPU: file creation is all kernel time. */
static void make_tree(int ws_fd, unsigned dirs, unsigned per) {
        long ncpu = MIN(sysconf(_SC_NPROCESSORS_ONLN), 8L);
        unsigned workers = ncpu < 1 ? 1 : (unsigned) ncpu, chunk = (dirs + workers - 1) / workers;

        for (unsigned k = 0; k < workers; k++) {
                unsigned first = k * chunk, n = first >= dirs ? 0 : MIN(chunk, dirs - first);
                pid_t pid = fork();

                if (pid < 0)
                        die("fork: %m");
                if (pid == 0) {
                        rng_state += k * 7919;
                        make_dirs(ws_fd, first, n, per);
                        _exit(0);
                }
        }
        for (;;) {
                int status;
                pid_t pid = wait(&status);

                if (pid < 0)
                        break;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        die("tree builder failed");
        }
}

/* ---- du ---- */

static uint64_t run_du(const char *path, uint64_t *ret_ns) {
        char cmd[8192], out[128] = "";
        uint64_t t0 = now_ns(), bytes;
        FILE *p;

        (void) snprintf(cmd, sizeof(cmd), "du -s -B1 '%s'", path);
        p = popen(cmd, "re");
        if (!p)
                die("popen du: %m");
        if (!fgets(out, sizeof(out), p))
                die("du: no output");
        if (pclose(p) != 0)
                die("du failed");
        *ret_ns = now_ns() - t0;
        bytes = strtoull(out, NULL, 10);
        return bytes;
}

/* ---- a writer: appends 4 KiB every millisecond, publishes when its file crossed @cross_at ---- */

typedef struct Shared {
        volatile uint64_t cross_ns;     /* when the file's allocated bytes first exceeded cross_at */
        volatile uint64_t written;
} Shared;

static _Noreturn void writer(const char *path, uint64_t cross_at, Shared *sh, uint64_t duration_ns) {
        static const char block[4096];
        uint64_t start = now_ns(), next = start;
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

        if (fd < 0)
                _exit(1);
        for (;;) {
                struct stat st;

                next += 1000 * 1000;
                sleep_until(next);
                if (write(fd, block, sizeof(block)) != (ssize_t) sizeof(block))
                        _exit(2);
                sh->written += sizeof(block);
                if (cross_at > 0 && sh->cross_ns == 0 && fstat(fd, &st) == 0 &&
                    (uint64_t) st.st_blocks * 512 > cross_at)
                        sh->cross_ns = now_ns();
                if (duration_ns > 0 && now_ns() - start >= duration_ns)
                        _exit(0);
        }
}

static pid_t start_writer(const char *path, uint64_t cross_at, Shared *sh, uint64_t duration_ns) {
        pid_t pid = fork();

        if (pid < 0)
                die("fork: %m");
        if (pid == 0)
                writer(path, cross_at, sh, duration_ns);
        return pid;
}

static void stop_writer(pid_t pid) {
        int status;

        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, &status, 0);
}

static uint64_t tick(QuotaWatch *w, uint64_t *ret_ns) {
        uint64_t t0 = now_ns(), bytes = 0;
        int r;

        r = quota_watch_tick(w, &bytes);
        if (ret_ns)
                *ret_ns = now_ns() - t0;
        if (r < 0)
                die("tick: %s", strerror(-r));
        return bytes;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "dir", required_argument, NULL, 'd' },
                { "files", required_argument, NULL, 'f' },
                { "dirs", required_argument, NULL, 'D' },
                { "trials", required_argument, NULL, 't' },
                {}
        };
        const char *dir = "/var/tmp";
        unsigned n_files = 100000, n_dirs = 1000, trials = 10;
        char ws[4200], path[4300];
        uint64_t t0, bytes, du_bytes = 0, v[1000], scan_ns[5], du_ns[5], new_ns;
        double scan_du[ELEMENTSOF(scan_ns)];
        Dist scan_d, du_d, idle_d, idle_nosweep_d, idle_sparse_d, busy_d, lat_d;
        QuotaWatch *w = NULL, *w_nosweep = NULL;
        QuotaStats s, s0;
        struct statfs sfs;
        size_t heap;
        Shared *sh;
        int ws_fd, c, r;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                        dir = optarg;
                        break;
                case 'f':
                        n_files = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'D':
                        n_dirs = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        trials = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                default:
                        fprintf(stderr, "usage: bench-quota [--dir DIR] [--files N] [--dirs N] [--trials N]\n");
                        return EXIT_FAILURE;
                }
        if (n_dirs == 0 || n_files < n_dirs || trials == 0 || trials > 1000)
                die("bad sizes");

        if (statfs(dir, &sfs) < 0)
                die("statfs %s: %m", dir);
        if (sfs.f_type == TMPFS_MAGIC) {
                fprintf(stderr, "bench-quota: %s is a tmpfs, using /var/tmp\n", dir);
                dir = "/var/tmp";
                if (statfs(dir, &sfs) < 0 || sfs.f_type == TMPFS_MAGIC)
                        die("no disk-backed directory");
        }

        (void) snprintf(base, sizeof(base), "%.3000s/bench-quota.XXXXXX", dir);
        if (!mkdtemp(base))
                die("mkdtemp %s: %m", base);
        atexit(remove_base);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        (void) snprintf(ws, sizeof(ws), "%s/ws", base);
        if (mkdir(ws, 0700) < 0)
                die("mkdir %s: %m", ws);
        ws_fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ws_fd < 0)
                die("open %s: %m", ws);

        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (sh == MAP_FAILED)
                die("mmap: %m");

        printf("# bench-quota: %u files in %u directories below %s (fs magic 0x%lx); %ld CPUs\n",
               n_dirs * (n_files / n_dirs), n_dirs, base, (unsigned long) sfs.f_type,
               sysconf(_SC_NPROCESSORS_ONLN));
        fflush(stdout);
        t0 = now_ns();
        make_tree(ws_fd, n_dirs, n_files / n_dirs);
        printf("# tree created in %.1f s\n", (double) (now_ns() - t0) / 1e9);

        /* Let writeback of the new tree finish first: it competes with the scans. */
        t0 = now_ns();
        if (syncfs(ws_fd) < 0)
                die("syncfs: %m");
        printf("# syncfs in %.1f s\n", (double) (now_ns() - t0) / 1e9);

        /* ---- full scan vs du, interleaved ---- */
        for (size_t i = 0; i < ELEMENTSOF(scan_ns); i++) {
                t0 = now_ns();
                r = quota_scan(ws_fd, &bytes, &s);
                scan_ns[i] = now_ns() - t0;
                if (r < 0)
                        die("quota_scan: %s", strerror(-r));
                du_bytes = run_du(ws, &du_ns[i]);
        }
        /* Each trial's own ratio (scan and du one after the other), before dist() sorts them. */
        for (size_t i = 0; i < ELEMENTSOF(scan_ns); i++)
                scan_du[i] = (double) scan_ns[i] / (double) du_ns[i];
        qsort(scan_du, ELEMENTSOF(scan_du), sizeof(double), cmp_double);
        scan_d = dist(scan_ns, ELEMENTSOF(scan_ns));
        du_d = dist(du_ns, ELEMENTSOF(du_ns));
        printf("full scan (quota_scan)    median %8.2f ms   %" PRIu64 " files, %" PRIu64 " dirs, %" PRIu64 " bytes\n",
               scan_d.median_ms, s.files, s.dirs, bytes);
        printf("du -s -B1                 median %8.2f ms   %" PRIu64 " bytes%s\n", du_d.median_ms, du_bytes,
               du_bytes == bytes ? " (same)" : " (DIFFERENT)");
        printf("ratio scan/du             %.2f\n", scan_d.median_ms / du_d.median_ms);

        /* ---- watcher: creation, idle ticks ---- */
        heap = mallinfo2().uordblks;
        t0 = now_ns();
        r = quota_watch_new(ws_fd, &w);
        new_ns = now_ns() - t0;
        if (r < 0)
                die("quota_watch_new: %s", strerror(-r));
        heap = mallinfo2().uordblks - heap;
        quota_watch_stats(w, &s);
        printf("quota_watch_new           %8.2f ms   %" PRIu64 " watches, index %.1f MiB (%.0f bytes per name)%s\n",
               (double) new_ns / 1e6, s.watches, (double) heap / 1048576.0,
               (double) heap / (double) (s.files + s.dirs), s.degraded ? ", DEGRADED" : "");
        if (tick(w, NULL) != bytes)
                die("first tick differs from the scan");

        quota_watch_stats(w, &s0);
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                (void) tick(w, &v[i]);
        quota_watch_stats(w, &s);
        idle_d = dist(v, ELEMENTSOF(v));
        printf("idle tick (sweep %u)      median %8.4f ms   p99 %8.4f ms   (%.0f re-stats per tick; a sweep pass "
               "every %.0f s at 10 ticks/s)\n", QUOTA_SWEEP_PER_TICK_DEFAULT, idle_d.median_ms, idle_d.p99_ms,
               (double) (s.restats - s0.restats) / ELEMENTSOF(v),
               (double) s.files / QUOTA_SWEEP_PER_TICK_DEFAULT / 10);

        r = quota_watch_new_full(ws_fd, &(QuotaLimits) { .sweep_per_tick = QUOTA_SWEEP_DISABLED }, &w_nosweep);
        if (r < 0)
                die("quota_watch_new_full: %s", strerror(-r));
        (void) tick(w_nosweep, NULL);
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                (void) tick(w_nosweep, &v[i]);
        idle_nosweep_d = dist(v, ELEMENTSOF(v));
        w_nosweep = quota_watch_free(w_nosweep);
        printf("idle tick, no sweep       median %8.4f ms   p99 %8.4f ms\n", idle_nosweep_d.median_ms,
               idle_nosweep_d.p99_ms);
        printf("ratio du/idle-tick        %.0f (sweep), %.0f (no sweep)\n", du_d.median_ms / idle_d.median_ms,
               du_d.median_ms / idle_nosweep_d.median_ms);

        /* The same with 1,000 sparse files (1 MiB, one block written): each is re-stat'ed every tick. */
        {
                int sd;

                (void) snprintf(path, sizeof(path), "%s/sparse", ws);
                if (mkdir(path, 0700) < 0 || (sd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                        die("mkdir %s: %m", path);
                for (unsigned i = 0; i < 1000; i++) {
                        char name[32];
                        int fd;

                        (void) snprintf(name, sizeof(name), "s%04u", i);
                        fd = openat(sd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                        if (fd < 0 || ftruncate(fd, 1 << 20) < 0 || pwrite(fd, "s", 1, 4096) != 1)
                                die("sparse file: %m");
                        close(fd);
                }
                close(sd);
                (void) tick(w, NULL);
                quota_watch_stats(w, &s0);
                for (size_t i = 0; i < ELEMENTSOF(v); i++)
                        (void) tick(w, &v[i]);
                quota_watch_stats(w, &s);
                idle_sparse_d = dist(v, ELEMENTSOF(v));
                printf("idle tick, +1000 sparse   median %8.4f ms   p99 %8.4f ms   (%.0f re-stats per tick)\n",
                       idle_sparse_d.median_ms, idle_sparse_d.p99_ms,
                       (double) (s.restats - s0.restats) / ELEMENTSOF(v));
                (void) snprintf(path, sizeof(path), "%s/sparse", ws);
                for (unsigned i = 0; i < 1000; i++) {
                        char p2[4400];

                        (void) snprintf(p2, sizeof(p2), "%s/s%04u", path, i);
                        (void) unlink(p2);
                }
                (void) rmdir(path);
                bytes = tick(w, NULL);
        }

        /* ---- ticks every 100 ms while a writer appends 4 KiB every ms ---- */
        {
                uint64_t next = now_ns(), before, after;
                const size_t n = 30;
                pid_t pid;

                (void) snprintf(path, sizeof(path), "%s/d0000/appender", ws);
                before = tick(w, NULL);
                quota_watch_stats(w, &s0);
                *sh = (Shared) {};
                pid = start_writer(path, 0, sh, 0);
                for (size_t i = 0; i < n; i++) {
                        next += TICK_NS;
                        sleep_until(next);
                        (void) tick(w, &v[i]);
                }
                stop_writer(pid);
                after = tick(w, NULL);
                quota_watch_stats(w, &s);
                busy_d = dist(v, n);
                printf("tick, 4 KiB/ms appender   median %8.4f ms   max %8.4f ms   (%.0f events, %.1f re-stats per "
                       "tick; usage +%.1f MiB)\n", busy_d.median_ms, busy_d.max_ms,
                       (double) (s.events - s0.events) / (double) n, (double) (s.restats - s0.restats) / (double) n,
                       (double) (after - before) / 1048576.0);
                if (quota_scan(ws_fd, &bytes, NULL) < 0 || bytes != after)
                        die("watcher %" PRIu64 " != scan %" PRIu64 " after the appender", after, bytes);
        }

        /* ---- crossing a limit: how long until a 100 ms tick says so ---- */
        {
                unsigned ok = 0;

                for (unsigned t = 0; t < trials; t++) {
                        uint64_t start_usage, limit, next, deadline, detect_ns = 0, tick_ns = 0, tcost;
                        pid_t pid;

                        (void) snprintf(path, sizeof(path), "%s/d%04u/grower%u", ws, (unsigned) (rng() % n_dirs), t);
                        start_usage = tick(w, NULL);
                        /* Cross 256 KiB .. 1.25 MiB after the start, at a random phase of the ticks. */
                        limit = start_usage + (256 << 10) + rng() % (1 << 20);
                        *sh = (Shared) {};
                        next = now_ns() + rng() % TICK_NS;
                        deadline = next + 30 * 1000000000ULL;
                        pid = start_writer(path, limit - start_usage, sh, 0);
                        for (;;) {
                                next += TICK_NS;
                                sleep_until(next);
                                bytes = tick(w, &tcost);
                                if (bytes > limit) {
                                        detect_ns = now_ns();
                                        tick_ns = tcost;
                                        break;
                                }
                                if (now_ns() > deadline)
                                        die("limit never reported");
                        }
                        stop_writer(pid);
                        /* The directory's own growth can put the tree over before the file is:
                         * then the report came first (latency 0). */
                        v[t] = sh->cross_ns > 0 && sh->cross_ns < detect_ns ? detect_ns - sh->cross_ns : 0;
                        /* Bound: one tick period plus that tick's own cost. */
                        if (v[t] <= TICK_NS + tick_ns)
                                ok++;
                        (void) unlink(path);
                }
                lat_d = dist(v, trials);
                printf("crossing → report         median %8.2f ms   max %8.2f ms   (%u/%u within 100 ms + tick cost)\n",
                       lat_d.median_ms, lat_d.max_ms, ok, trials);
        }

        quota_watch_stats(w, &s);
        printf("watcher totals            %" PRIu64 " full scans, %" PRIu64 " events, %" PRIu64 " re-stats%s\n",
               s.full_scans, s.events, s.restats, s.degraded ? ", DEGRADED" : "");
        printf("{\"files\":%" PRIu64 ",\"dirs\":%" PRIu64 ",\"scanMedianMs\":%.3f,\"duMedianMs\":%.3f,"
               "\"idleTickMedianMs\":%.4f,\"idleTickNoSweepMedianMs\":%.4f,\"idleTickSparse1000MedianMs\":%.4f,"
               "\"busyTickMedianMs\":%.4f,"
               "\"crossLatencyMedianMs\":%.2f,\"crossLatencyMaxMs\":%.2f,\"crossLatencyP25Ms\":%.2f,"
               "\"crossLatencyP75Ms\":%.2f,\"trials\":%u,\"scanTrials\":%zu,\"scanOverDuMedian\":%.4f,"
               "\"scanOverDuP25\":%.4f,\"scanOverDuP75\":%.4f}\n",
               s.files, s.dirs, scan_d.median_ms, du_d.median_ms, idle_d.median_ms, idle_nosweep_d.median_ms, idle_sparse_d.median_ms,
               busy_d.median_ms, lat_d.median_ms, lat_d.max_ms, lat_d.p25_ms, lat_d.p75_ms, trials,
               ELEMENTSOF(scan_du), scan_du[ELEMENTSOF(scan_du) / 2], scan_du[ELEMENTSOF(scan_du) / 4],
               scan_du[MIN(ELEMENTSOF(scan_du) - 1, ELEMENTSOF(scan_du) * 3 / 4)]);
        fflush(stdout);

        w = quota_watch_free(w);
        close(ws_fd);
        t0 = now_ns();
        remove_base();
        printf("# tree removed in %.1f s\n", (double) (now_ns() - t0) / 1e9);
        return EXIT_SUCCESS;
}
