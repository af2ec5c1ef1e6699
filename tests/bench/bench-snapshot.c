/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Snapshot and restore times of the CAS next to the floors measured in the same run, on the same
 * disk: `cp -a` of the same tree (with and without a syncfs() after it, as the snapshot syncs
 * what it writes) and `sha256sum` of all its files. Two workspaces: many small files, one big
 * file. Everything is created below --dir and removed at the end.
 *
 *   bench-snapshot --dir DIR [--files 10000] [--big-mib 1024] [--rounds 3] [--big-rounds 1]
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "workspace/cas/cas.h"
#include "util/macro.h"

extern char **environ;

/* The data directory, removed at exit whatever happens (die() included). */
static char base[4096];

static void remove_base(void) {
        char cmd[8192];

        if (!base[0])
                return;
        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        if (system(cmd) != 0)
                fprintf(stderr, "bench-snapshot: could not remove %s\n", base);
        base[0] = 0;
}

static uint64_t now_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static double ms_since(uint64_t t0) {
        return (double) (now_ns() - t0) / 1e6;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void) {
        /* xorshift64*: fast, and every file gets distinct content. */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545F4914F6CDD1DULL;
}

static void fill(uint8_t *buf, size_t n) {
        for (size_t i = 0; i < n; i += 8) {
                uint64_t v = rng();

                memcpy(buf + i, &v, MIN((size_t) 8, n - i));
        }
}

static int die(const char *what, int r) {
        fprintf(stderr, "bench-snapshot: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(EXIT_FAILURE);
}

static void write_file(int dfd, const char *name, const uint8_t *data, size_t size) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        if (fd < 0)
                die(name, -errno);
        while (size > 0) {
                ssize_t k = write(fd, data, size);

                if (k <= 0)
                        die(name, k < 0 ? -errno : -EIO);
                data += k;
                size -= (size_t) k;
        }
        (void) close(fd);
}

/* Run a shell command line; its time in ms. */
static double run_sh(const char *cmd) {
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) cmd, NULL };
        uint64_t t0 = now_ns();
        pid_t pid;
        int status, r;

        r = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ);
        if (r != 0)
                die("posix_spawn", r);
        if (waitpid(pid, &status, 0) < 0)
                die("waitpid", -errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "bench-snapshot: '%s' failed\n", cmd);
                exit(EXIT_FAILURE);
        }
        return ms_since(t0);
}

static void sync_dir(const char *dir) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || syncfs(fd) < 0)
                die("syncfs", -errno);
        (void) close(fd);
}

static void make_small(const char *dir, unsigned files) {
        uint8_t buf[4096];
        int root;

        if (mkdir(dir, 0700) < 0)
                die(dir, -errno);
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                die(dir, -errno);
        for (unsigned d = 0; d < 100; d++) {
                char name[32];
                int dfd;

                (void) snprintf(name, sizeof(name), "dir%02u", d);
                if (mkdirat(root, name, 0755) < 0)
                        die(name, -errno);
                dfd = openat(root, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0)
                        die(name, -errno);
                for (unsigned i = 0; i < files / 100; i++) {
                        size_t size = 1024 + (size_t) (rng() % 3073);     /* 1–4 KiB */

                        fill(buf, size);
                        (void) snprintf(name, sizeof(name), "file%04u.dat", i);
                        write_file(dfd, name, buf, size);
                }
                (void) close(dfd);
        }
        (void) close(root);
}

static void make_big(const char *dir, unsigned mib) {
        uint8_t *buf = malloc(1 << 20);
        int root, fd;

        if (!buf)
                die("malloc", -ENOMEM);
        if (mkdir(dir, 0700) < 0)
                die(dir, -errno);
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        fd = root < 0 ? -1 : openat(root, "big.bin", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                die(dir, -errno);
        for (unsigned i = 0; i < mib; i++) {
                fill(buf, 1 << 20);
                if (write(fd, buf, 1 << 20) != 1 << 20)
                        die("write", -errno);
        }
        (void) close(fd);
        (void) close(root);
        free(buf);
}

/* Touch @n files of the small workspace: same size, new content. */
static void modify_small(const char *dir, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                char path[4096];
                uint64_t v = rng();
                int fd;

                (void) snprintf(path, sizeof(path), "%.3000s/dir%02u/file%04u.dat", dir, i % 100, i / 100);
                fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd < 0 || pwrite(fd, &v, sizeof(v), 0) != (ssize_t) sizeof(v))
                        die(path, -errno);
                (void) close(fd);
        }
}

typedef struct Row {
        double cp, cp_sync, sha, snap1, snap2, snap3, restore;
        CasSnapshotStats s1, s2, s3;
} Row;

/* One round on the workspace @name: floors, then a cold store, three snapshots, a restore. */
static Row bench_round(const char *data_dir, const char *name, bool small, unsigned files) {
        char ws[4096], copy[4096], store[4096], cmd[16384];
        char *digest = NULL;
        Row row = {};
        uint64_t t0;
        int ws_fd, store_fd, base_fd, r;
        Cas *cas = NULL;

        (void) snprintf(ws, sizeof(ws), "%.3000s/%s", data_dir, name);
        (void) snprintf(copy, sizeof(copy), "%.3000s/%s-copy", data_dir, name);
        (void) snprintf(store, sizeof(store), "%.3000s/%s-store", data_dir, name);
        sync_dir(data_dir);

        /* Floors. */
        (void) snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", ws, copy);
        row.cp = run_sh(cmd);
        t0 = now_ns();
        sync_dir(copy);
        row.cp_sync = row.cp + ms_since(t0);
        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", copy);
        (void) run_sh(cmd);
        sync_dir(data_dir);

        (void) snprintf(cmd, sizeof(cmd), "cd '%s' && find . -type f -print0 | xargs -0 sha256sum >/dev/null", ws);
        row.sha = run_sh(cmd);

        /* The store. */
        if (mkdir(store, 0700) < 0)
                die(store, -errno);
        store_fd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ws_fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        base_fd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (store_fd < 0 || ws_fd < 0 || base_fd < 0)
                die("open", -errno);
        r = cas_open(store_fd, &cas);
        if (r < 0)
                die("cas_open", r);

        t0 = now_ns();
        r = cas_snapshot(cas, ws_fd, name, "first", 1, &digest, &row.s1);
        row.snap1 = ms_since(t0);
        if (r < 0)
                die("cas_snapshot", r);
        free(digest);
        sync_dir(data_dir);

        t0 = now_ns();
        r = cas_snapshot(cas, ws_fd, name, "second", 2, &digest, &row.s2);
        row.snap2 = ms_since(t0);
        if (r < 0)
                die("cas_snapshot", r);
        sync_dir(data_dir);

        if (small) {
                modify_small(ws, files / 100);
                t0 = now_ns();
                r = cas_snapshot(cas, ws_fd, name, "third", 3, NULL, &row.s3);
                row.snap3 = ms_since(t0);
                if (r < 0)
                        die("cas_snapshot", r);
                sync_dir(data_dir);
        }

        /* Restore the second snapshot as a new workspace beside it (cp -a's job, synced). */
        t0 = now_ns();
        r = cas_restore(cas, digest, base_fd, "restored");
        row.restore = ms_since(t0);
        if (r < 0)
                die("cas_restore", r);
        free(digest);

        cas_free(cas);
        (void) close(ws_fd);
        (void) close(store_fd);
        (void) close(base_fd);
        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s/restored'", store, data_dir);
        (void) run_sh(cmd);
        return row;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* The median over the rounds of a time or ratio; the box is shared, so single runs are noisy. */
#define MEDIAN(rows, n, expr) ({                                        \
        double _v[16];                                                  \
        for (size_t _i = 0; _i < (n); _i++) {                           \
                const Row *r = &(rows)[_i];                             \
                _v[_i] = (expr);                                        \
        }                                                               \
        qsort(_v, (n), sizeof(double), cmp_double);                     \
        (n) % 2 ? _v[(n) / 2] : (_v[(n) / 2 - 1] + _v[(n) / 2]) / 2;   \
})

static void print_rows(const char *label, const Row *rows, size_t n, bool small) {
        const Row *r0 = &rows[0];

        printf("\n== %s: medians of %zu round(s) ==\n", label, n);
        printf("cp -a                       %10.1f ms\n", MEDIAN(rows, n, r->cp));
        printf("cp -a + syncfs              %10.1f ms\n", MEDIAN(rows, n, r->cp_sync));
        printf("find | xargs sha256sum      %10.1f ms\n", MEDIAN(rows, n, r->sha));
        printf("snapshot 1 (cold store)     %10.1f ms   files %" PRIu64 " bytes %" PRIu64 " hashed %" PRIu64
               " new objects %" PRIu64 "\n", MEDIAN(rows, n, r->snap1), r0->s1.files, r0->s1.bytes,
               r0->s1.hashed_bytes, r0->s1.new_objects);
        printf("snapshot 2 (unchanged)      %10.1f ms   hashed %" PRIu64 " new objects %" PRIu64 "\n",
               MEDIAN(rows, n, r->snap2), r0->s2.hashed_bytes, r0->s2.new_objects);
        if (small)
                printf("snapshot 3 (1%% changed)     %10.1f ms   hashed %" PRIu64 " new objects %" PRIu64 "\n",
                       MEDIAN(rows, n, r->snap3), r0->s3.hashed_bytes, r0->s3.new_objects);
        printf("restore (synced)            %10.1f ms\n", MEDIAN(rows, n, r->restore));
        for (size_t i = 0; i < n; i++)
                printf("  round %zu: cp-a+syncfs %.0f, sha256sum %.0f, snapshot 1/2/3 %.0f/%.1f/%.1f, restore %.0f ms\n",
                       i + 1, rows[i].cp_sync, rows[i].sha, rows[i].snap1, rows[i].snap2, rows[i].snap3,
                       rows[i].restore);
        printf("ratios (median of per-round ratios):\n");
        printf("  snapshot1 / cp-a            %7.2f\n", MEDIAN(rows, n, r->snap1 / r->cp));
        printf("  snapshot1 / (cp-a+syncfs)   %7.2f\n", MEDIAN(rows, n, r->snap1 / r->cp_sync));
        printf("  snapshot1 / sha256sum       %7.2f\n", MEDIAN(rows, n, r->snap1 / r->sha));
        printf("  snapshot2 / sha256sum       %7.3f\n", MEDIAN(rows, n, r->snap2 / r->sha));
        printf("  snapshot2 / snapshot1       %7.3f\n", MEDIAN(rows, n, r->snap2 / r->snap1));
        if (small)
                printf("  snapshot3 / sha256sum       %7.3f\n", MEDIAN(rows, n, r->snap3 / r->sha));
        printf("  restore / (cp-a+syncfs)     %7.2f\n", MEDIAN(rows, n, r->restore / r->cp_sync));
}

/* One JSON line per workspace, every round's times (ms): tests/bench/bench_result.py takes the
 * per-round ratios and their quartiles from it. */
static void print_json(const char *workspace, const Row *rows, size_t n, unsigned files, unsigned big_mib) {
        printf("{\"workspace\":\"%s\",\"files\":%u,\"bigMiB\":%u,\"rounds\":%zu,\"rows\":[", workspace, files,
               big_mib, n);
        for (size_t i = 0; i < n; i++)
                printf("%s{\"cp\":%.3f,\"cpSync\":%.3f,\"sha\":%.3f,\"snap1\":%.3f,\"snap2\":%.3f,\"snap3\":%.3f,"
                       "\"restore\":%.3f}", i ? "," : "", rows[i].cp, rows[i].cp_sync, rows[i].sha, rows[i].snap1,
                       rows[i].snap2, rows[i].snap3, rows[i].restore);
        printf("]}\n");
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "dir", required_argument, NULL, 'd' },
                { "files", required_argument, NULL, 'f' },
                { "big-mib", required_argument, NULL, 'b' },
                { "rounds", required_argument, NULL, 'r' },
                { "big-rounds", required_argument, NULL, 'R' },
                {}
        };
        const char *dir = NULL;
        unsigned files = 10000, big_mib = 1024, rounds = 3, big_rounds = 1;
        char path[4096];
        uint64_t t0;
        Row small[16], big[16];
        int c;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                        dir = optarg;
                        break;
                case 'f':
                        files = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'b':
                        big_mib = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'r':
                        rounds = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'R':
                        big_rounds = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                default:
                        return EXIT_FAILURE;
                }
        if (!dir || files < 100 || rounds < 1 || rounds > 16 || big_rounds < 1 || big_rounds > 16) {
                fprintf(stderr, "usage: bench-snapshot --dir DIR [--files N>=100] [--big-mib N] [--rounds 1-16] "
                        "[--big-rounds 1-16]\n");
                return EXIT_FAILURE;
        }

        (void) snprintf(base, sizeof(base), "%.3000s/bench-snapshot.XXXXXX", dir);
        if (!mkdtemp(base)) {
                base[0] = 0;
                die("mkdtemp", -errno);
        }
        (void) atexit(remove_base);
        printf("# data in %s\n", base);

        t0 = now_ns();
        (void) snprintf(path, sizeof(path), "%.3000s/small", base);
        make_small(path, files);
        (void) snprintf(path, sizeof(path), "%.3000s/big", base);
        make_big(path, big_mib);
        sync_dir(base);
        printf("# created %u small files (1-4 KiB, 100 dirs) and a %u MiB file in %.1f s\n",
               files / 100 * 100, big_mib, ms_since(t0) / 1000);
        fflush(stdout);

        for (unsigned i = 0; i < rounds; i++)
                small[i] = bench_round(base, "small", true, files);
        print_rows("small files", small, rounds, true);
        print_json("small", small, rounds, files, big_mib);
        fflush(stdout);
        for (unsigned i = 0; i < big_rounds; i++)
                big[i] = bench_round(base, "big", false, files);
        print_rows("one big file", big, big_rounds, false);
        print_json("big", big, big_rounds, files, big_mib);

        remove_base();
        return EXIT_SUCCESS;
}
