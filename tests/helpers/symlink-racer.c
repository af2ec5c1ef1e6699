/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * symlink-racer - swap a path between a regular file and a symlink as fast as possible, to race
 * the daemon's workspace file operations (TOCTOU tests). libc only, no sanitizer: it runs inside
 * the sandbox, as the payload a hostile tenant would run.
 *
 *   symlink-racer [-x] [-c CONTENT] [-n MAX_SWAPS] PATH TARGET SECONDS
 *
 * Default mode: each round renames a fresh symlink PATH.racer-lnk -> TARGET over PATH, then a
 * freshly written regular file PATH.racer-reg (holding CONTENT, default "REGULAR\n") over PATH,
 * so PATH always exists and is, at any instant, either the regular file or the symlink.
 * -x: renameat2(RENAME_EXCHANGE) between PATH and PATH.racer-alt (a symlink to TARGET), which
 * also works when PATH is a directory (race a parent component: PATH/file vs TARGET/file).
 * PATH is created with CONTENT if missing.
 *
 * Runs for SECONDS (0: until SIGTERM/SIGINT), or until MAX_SWAPS swaps; then leaves PATH as the
 * regular file (or the directory), removes its helper names, and prints "swaps N" on stdout.
 * Exit status: 0 done, 1 usage, 2 a system call failed (message on stderr).
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
        (void) sig;
        stop = 1;
}

static int usage(void) {
        fprintf(stderr, "usage: symlink-racer [-x] [-c CONTENT] [-n MAX_SWAPS] PATH TARGET SECONDS\n");
        return 1;
}

static int fail(const char *what, const char *path) {
        fprintf(stderr, "symlink-racer: %s '%s': %s\n", what, path, strerror(errno));
        return 2;
}

static char *suffixed(const char *path, const char *suffix) {
        size_t a = strlen(path), b = strlen(suffix);
        char *s = malloc(a + b + 1);

        if (!s) {
                fprintf(stderr, "symlink-racer: out of memory\n");
                exit(2);
        }
        memcpy(s, path, a);
        memcpy(s + a, suffix, b + 1);
        return s;
}

static int write_file(const char *path, const char *content) {
        size_t n = strlen(content);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

        if (fd < 0)
                return -1;
        for (size_t done = 0; done < n;) {
                ssize_t k = write(fd, content + done, n - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        int e = errno;
                        close(fd);
                        errno = e ?: EIO;
                        return -1;
                }
                done += (size_t) k;
        }
        return close(fd);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000U + (uint64_t) ts.tv_nsec / 1000U;
}

int main(int argc, char **argv) {
        const char *content = "REGULAR\n", *path, *target;
        uint64_t max_swaps = UINT64_MAX, swaps = 0, deadline = UINT64_MAX;
        struct sigaction sa = { .sa_handler = on_signal };
        bool exchange = false;
        char *lnk, *reg, *alt, *end;
        struct stat st;
        int c, r = 0;

        while ((c = getopt(argc, argv, "xc:n:")) >= 0) {
                switch (c) {
                case 'x':
                        exchange = true;
                        break;
                case 'c':
                        content = optarg;
                        break;
                case 'n':
                        errno = 0;
                        max_swaps = strtoull(optarg, &end, 10);
                        if (errno || *end || !*optarg)
                                return usage();
                        break;
                default:
                        return usage();
                }
        }
        if (argc - optind != 3)
                return usage();
        path = argv[optind];
        target = argv[optind + 1];
        errno = 0;
        unsigned long secs = strtoul(argv[optind + 2], &end, 10);
        if (errno || *end || !argv[optind + 2][0])
                return usage();
        if (secs > 0)
                deadline = now_usec() + (uint64_t) secs * 1000000U;

        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGINT, &sa, NULL);

        lnk = suffixed(path, ".racer-lnk");
        reg = suffixed(path, ".racer-reg");
        alt = suffixed(path, ".racer-alt");
        (void) unlink(lnk);
        (void) unlink(reg);
        (void) unlink(alt);

        if (lstat(path, &st) < 0) {
                if (errno != ENOENT)
                        return fail("stat", path);
                if (write_file(path, content) < 0)
                        return fail("create", path);
        } else if (S_ISDIR(st.st_mode) && !exchange) {
                fprintf(stderr, "symlink-racer: '%s' is a directory: use -x\n", path);
                return 1;
        }
        if (exchange && symlink(target, alt) < 0)
                return fail("symlink", alt);

        while (!stop && swaps < max_swaps) {
                if ((swaps & 63) == 0 && now_usec() >= deadline)
                        break;
                if (exchange) {
                        if (renameat2(AT_FDCWD, path, AT_FDCWD, alt, RENAME_EXCHANGE) < 0) {
                                r = fail("exchange", path);
                                break;
                        }
                } else {
                        if (symlink(target, lnk) < 0) {
                                r = fail("symlink", lnk);
                                break;
                        }
                        if (rename(lnk, path) < 0) {
                                r = fail("rename", lnk);
                                break;
                        }
                        if (write_file(reg, content) < 0) {
                                r = fail("create", reg);
                                break;
                        }
                        if (rename(reg, path) < 0) {
                                r = fail("rename", reg);
                                break;
                        }
                }
                swaps++;
        }

        /* Leave the regular file (or directory) in place, and no helper names. */
        if (exchange) {
                if (swaps % 2 == 1 && renameat2(AT_FDCWD, path, AT_FDCWD, alt, RENAME_EXCHANGE) < 0 && r == 0)
                        r = fail("exchange", path);
                (void) unlink(alt);
        } else {
                (void) unlink(lnk);
                (void) unlink(reg);
                if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) &&
                    (write_file(reg, content) < 0 || rename(reg, path) < 0) && r == 0)
                        r = fail("restore", path);
        }
        printf("swaps %llu\n", (unsigned long long) swaps);
        free(lnk);
        free(reg);
        free(alt);
        return r;
}
