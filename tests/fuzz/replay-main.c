/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The corpus-replay driver: a main() for the libFuzzer targets of tests/fuzz outside the
 * -Dfuzz=true build, so that every build (gcc, clang, ASan) runs each target once over every
 * file of its seed corpus (tests/fuzz/corpus/<name>/) as a test of the suite "unit".  It owns
 * only reading the corpus and calling the target: LLVMFuzzerInitialize() first where the target
 * defines one (a weak reference here), then LLVMFuzzerTestOneInput() on each regular file, in
 * name order, with a buffer of exactly the file's size (so that a read past the input is a
 * sanitizer report in the ASan build).  It fuzzes nothing; a crash, an abort() of FUZZ_CHECK()
 * or a sanitizer report fails the test as it would fail libFuzzer.
 *
 * Usage: fuzz-replay-NAME CORPUS-DIR...
 * TAP on stdout: one line per input, the plan last; exit 0, or 1 when a directory is missing,
 * unreadable or holds no input at all, or a target returns anything but 0 or -1 (what
 * libFuzzer accepts).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* Defined by some targets only (fuzz-cas.c, fuzz-proxy-request.c): NULL in the others. */
#pragma weak LLVMFuzzerInitialize

/* The whole of the regular file @name in @dfd, in a buffer of exactly its size (one byte, unused,
 * for an empty file). Return: 0, or -errno. */
static int read_input(int dfd, const char *name, uint8_t **ret, size_t *ret_size) {
        struct stat st;
        uint8_t *buf;
        size_t off = 0;
        int fd, r = 0;

        fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        buf = malloc(st.st_size > 0 ? (size_t) st.st_size : 1);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        while (off < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + off, (size_t) st.st_size - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -EIO;      /* shrank under us */
                        break;
                }
                off += (size_t) n;
        }
        close(fd);
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_size = off;
        return 0;
}

static int is_regular(int dfd, const char *name) {
        struct stat st;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        return S_ISREG(st.st_mode);
}

/* Replay every regular file of @dir; *n counts the inputs (TAP numbers). Return: 0, or -1 after
 * a "Bail out!" line. */
static int replay_dir(const char *dir, unsigned *n) {
        struct dirent **ents = NULL;
        unsigned before = *n;
        int dfd, k, r = 0;

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                printf("Bail out! corpus directory %s: %s\n", dir, strerror(errno));
                return -1;
        }
        k = scandirat(dfd, ".", &ents, NULL, alphasort);
        if (k < 0) {
                printf("Bail out! cannot list %s: %s\n", dir, strerror(errno));
                close(dfd);
                return -1;
        }
        for (int i = 0; i < k; i++) {
                const char *name = ents[i]->d_name;
                uint8_t *data = NULL;
                size_t size = 0;
                int q, ret;

                if (r == 0 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
                        q = is_regular(dfd, name);
                        if (q > 0)
                                q = read_input(dfd, name, &data, &size);
                        if (q < 0) {
                                printf("Bail out! %s/%s: %s\n", dir, name, strerror(-q));
                                r = -1;
                        } else if (data) {
                                fflush(stdout);
                                ret = LLVMFuzzerTestOneInput(data, size);
                                free(data);
                                (*n)++;
                                if (ret != 0 && ret != -1) {
                                        printf("not ok %u - %s/%s (the target returned %d)\n", *n, dir, name, ret);
                                        r = -1;
                                } else
                                        printf("ok %u - %s (%zu bytes)\n", *n, name, size);
                        }
                }
                free(ents[i]);
        }
        free(ents);
        close(dfd);
        if (r == 0 && *n == before) {
                printf("Bail out! no input in corpus directory %s\n", dir);
                r = -1;
        }
        return r;
}

int main(int argc, char **argv) {
        unsigned n = 0;

        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS-DIR...\n", argv[0]);
                return 1;
        }
        if (LLVMFuzzerInitialize)
                (void) LLVMFuzzerInitialize(&argc, &argv);

        for (int i = 1; i < argc; i++)
                if (replay_dir(argv[i], &n) < 0)
                        return 1;

        printf("1..%u\n# replayed %u inputs from %d corpus director%s\n", n, n, argc - 1, argc == 2 ? "y" : "ies");
        return 0;
}
