/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test helper: writes a profile's BPF program to stdout, lists its rules, or times its compilation. */

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/seccomp-profile.h"
#include "util/macro.h"

static void usage(void) {
        fputs("Usage: seccomp-export [OPTIONS] PROFILE\n"
              "  PROFILE is an embedded profile (baseline, network, npu) or, with --file, a name for messages.\n"
              "  (default)            write the BPF program to stdout (bwrap --seccomp input)\n"
              "  --describe           list the deny rules, one per line (seccomp_profile_describe())\n"
              "  --errno-override=N   every rule returns errno N (a number or ENOTRECOVERABLE)\n"
              "  --file=PATH          parse PATH instead of the embedded text\n"
              "  --bench=N            parse+compile N times without the cache and print the mean time\n",
              stderr);
}

static int read_file(const char *path, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;
        FILE *f = fopen(path, "re");

        if (!f)
                return -errno;
        for (;;) {
                size_t k;

                if (size + 4096 > alloc) {
                        char *b = realloc(buf, alloc + 65536);
                        if (!b) {
                                fclose(f);
                                return -ENOMEM;
                        }
                        buf = b;
                        alloc += 65536;
                }
                k = fread(buf + size, 1, alloc - size, f);
                size += k;
                if (k == 0)
                        break;
        }
        if (ferror(f)) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        *ret = STEAL(buf);
        *ret_size = size;
        return 0;
}

static int copy_fd_to_stdout(int fd) {
        char buf[65536];

        for (;;) {
                ssize_t k = read(fd, buf, sizeof(buf));
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return 0;
                for (ssize_t w = 0; w < k;) {
                        ssize_t n = write(STDOUT_FILENO, buf + w, (size_t) (k - w));
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        w += n;
                }
        }
}

static double now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "describe", no_argument, NULL, 'd' },
                { "errno-override", required_argument, NULL, 'e' },
                { "file", required_argument, NULL, 'f' },
                { "bench", required_argument, NULL, 'b' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        _cleanup_(seccomp_profile_freep) SeccompProfile *p = NULL;
        _cleanup_free_ char *error = NULL, *file_text = NULL, *name = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *path = NULL, *text;
        bool describe = false;
        int override = 0, bench = 0, c, r;
        size_t size;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                        describe = true;
                        break;
                case 'e':
                        if (streq(optarg, "ENOTRECOVERABLE"))
                                override = ENOTRECOVERABLE;
                        else
                                override = atoi(optarg);
                        if (override <= 0) {
                                fprintf(stderr, "bad --errno-override '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case 'f':
                        path = optarg;
                        break;
                case 'b':
                        bench = atoi(optarg);
                        if (bench <= 0) {
                                fprintf(stderr, "bad --bench '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case 'h':
                        usage();
                        return 0;
                default:
                        usage();
                        return 2;
                }
        if (optind + 1 != argc) {
                usage();
                return 2;
        }

        if (path) {
                r = read_file(path, &file_text, &size);
                if (r < 0) {
                        fprintf(stderr, "%s: %s\n", path, strerror(-r));
                        return 1;
                }
                text = file_text;
        } else {
                r = seccomp_builtin_profile(argv[optind], &text, &size);
                if (r < 0) {
                        fprintf(stderr, "no embedded profile '%s'\n", argv[optind]);
                        return 1;
                }
        }
        if (asprintf(&name, "%s.profile", argv[optind]) < 0)
                return 1;

        if (bench > 0) {
                double t0 = now_usec(), t1;

                for (int i = 0; i < bench; i++) {
                        _cleanup_(seccomp_profile_freep) SeccompProfile *q = NULL;
                        _cleanup_close_ int mfd = -EBADF;

                        r = seccomp_profile_parse(name, text, size, &q, &error);
                        if (r >= 0)
                                r = seccomp_profile_compile(q, &mfd, &error);
                        if (r < 0) {
                                fprintf(stderr, "%s\n", error ? error : strerror(-r));
                                return 1;
                        }
                }
                t1 = now_usec();
                printf("%s: parse+compile %.0f us (mean of %d)\n", argv[optind], (t1 - t0) / bench, bench);

                /* The cached path, for comparison: the first call compiles, the rest copy. */
                if (!path && seccomp_variant_from_string(argv[optind]) >= 0) {
                        SeccompVariant v = seccomp_variant_from_string(argv[optind]);

                        t0 = now_usec();
                        for (int i = 0; i < bench; i++) {
                                _cleanup_close_ int mfd = -EBADF;

                                r = seccomp_program_for_variant(v, &mfd, &error);
                                if (r < 0) {
                                        fprintf(stderr, "%s\n", error ? error : strerror(-r));
                                        return 1;
                                }
                        }
                        t1 = now_usec();
                        printf("%s: seccomp_program_for_variant() %.1f us (mean of %d, first call included)\n",
                               argv[optind], (t1 - t0) / bench, bench);
                }
                return 0;
        }

        r = seccomp_profile_parse(name, text, size, &p, &error);
        if (r < 0) {
                fprintf(stderr, "%s\n", error ? error : strerror(-r));
                return 1;
        }
        if (override > 0 && seccomp_profile_set_errno_override(p, override) < 0) {
                fprintf(stderr, "bad --errno-override\n");
                return 2;
        }

        if (describe) {
                _cleanup_free_ char *d = NULL;

                r = seccomp_profile_describe(p, &d);
                if (r < 0) {
                        fprintf(stderr, "describe: %s\n", strerror(-r));
                        return 1;
                }
                fputs(d, stdout);
                return fflush(stdout) == 0 ? 0 : 1;
        }

        r = seccomp_profile_compile(p, &fd, &error);
        if (r < 0) {
                fprintf(stderr, "%s\n", error ? error : strerror(-r));
                return 1;
        }
        r = copy_fd_to_stdout(fd);
        if (r < 0) {
                fprintf(stderr, "write: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
