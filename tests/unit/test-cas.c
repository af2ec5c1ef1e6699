/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/workspace/cas/ (cas.h): tree encoding, dedup, stat cache, untrusted trees, crash points, restore, gc, fsck. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nettle/sha2.h>

#include "workspace/cas/cas.h"

#define ZERO_DIGEST "sha256:0000000000000000000000000000000000000000000000000000000000000000"

/* ---------------------------------------------------------------------------------------------
 * Fixture: a temp dir holding "store" (the CAS root) and "ws" (a workspace), removed at the end. */

typedef struct Fixture {
        char dir[256];
        int dir_fd, store_fd, ws_fd;
        Cas *cas;
} Fixture;

static int chmod_dirs(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (flag == FTW_D || flag == FTW_DNR)
                (void) chmod(path, 0700);
        return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static void rm_rf(const char *dir) {
        (void) nftw(dir, chmod_dirs, 16, FTW_PHYS);
        (void) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(Fixture));
        const char *tmp = getenv("TMPDIR");

        if (!f)
                return -1;
        (void) snprintf(f->dir, sizeof(f->dir), "%s/test-cas.XXXXXX",
                        tmp && tmp[0] == '/' && strlen(tmp) < 100 ? tmp : "/tmp");
        if (!mkdtemp(f->dir))
                return -1;
        f->dir_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->dir_fd < 0 || mkdirat(f->dir_fd, "store", 0700) < 0 || mkdirat(f->dir_fd, "ws", 0700) < 0)
                return -1;
        f->store_fd = openat(f->dir_fd, "store", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        f->ws_fd = openat(f->dir_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->store_fd < 0 || f->ws_fd < 0 || cas_open(f->store_fd, &f->cas) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        cas_free(f->cas);
        (void) close(f->ws_fd);
        (void) close(f->store_fd);
        (void) close(f->dir_fd);
        rm_rf(f->dir);
        free(f);
        return 0;
}

static void reopen_ws(Fixture *f) {
        (void) close(f->ws_fd);
        f->ws_fd = openat(f->dir_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->ws_fd >= 0);
}

/* ---------------------------------------------------------------------------------------------
 * Helpers. */

static void sha256_hex(const void *data, size_t size, char out[65]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t d[SHA256_DIGEST_SIZE];
        struct sha256_ctx h;

        sha256_init(&h);
        sha256_update(&h, size, data);
        sha256_digest(&h, sizeof(d), d);
        for (size_t i = 0; i < sizeof(d); i++) {
                out[2 * i] = hex[d[i] >> 4];
                out[2 * i + 1] = hex[d[i] & 15];
        }
        out[64] = 0;
}

static void write_at(int dfd, const char *path, const void *data, size_t size, mode_t mode) {
        int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        const char *p = data;

        assert_true(fd >= 0);
        while (size > 0) {
                ssize_t k = write(fd, p, size);

                assert_true(k > 0);
                p += k;
                size -= (size_t) k;
        }
        assert_int_equal(fchmod(fd, mode), 0);
        assert_int_equal(close(fd), 0);
}

static void write_str(int dfd, const char *path, const char *s) {
        write_at(dfd, path, s, strlen(s), 0644);
}

/* Overwrite in place, same size: only the timestamps tell the change. */
static void overwrite_str(int dfd, const char *path, const char *s) {
        int fd = openat(dfd, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, s, strlen(s), 0), (ssize_t) strlen(s));
        assert_int_equal(close(fd), 0);
}

static void mkdir_mode(int dfd, const char *path, mode_t mode) {
        assert_int_equal(mkdirat(dfd, path, 0700), 0);
        assert_int_equal(fchmodat(dfd, path, mode, 0), 0);
}

/* Let the coarse clock move past every timestamp written so far (see "racy" in cas.h). */
static void pass_clock_tick(void) {
        struct timespec res = {}, ts;

        (void) clock_getres(CLOCK_REALTIME_COARSE, &res);
        ts = (struct timespec) { .tv_nsec = 3 * res.tv_nsec + 2 * 1000 * 1000 };
        if (ts.tv_nsec >= 1000000000L)
                ts = (struct timespec) { .tv_sec = 1 };
        (void) nanosleep(&ts, NULL);
}

static size_t count_objects(Fixture *f) {
        size_t n = 0;

        for (unsigned i = 0; i < 256; i++) {
                char sub[32];
                DIR *d;
                struct dirent *de;

                int fd;

                (void) snprintf(sub, sizeof(sub), "objects/%02x", i);
                fd = openat(f->store_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT)
                        continue;               /* fan-out directories are created on first use */
                d = fdopendir(fd);
                assert_non_null(d);
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.')
                                n++;
                closedir(d);
        }
        return n;
}

static size_t count_dir(int dfd, const char *path) {
        DIR *d = fdopendir(openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        struct dirent *de;
        size_t n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                if (!(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0))
                        n++;
        closedir(d);
        return n;
}

/* objects/xx/yyy… of a "sha256:<hex>" digest, relative to the store. */
static void object_path(const char *digest, char out[80]) {
        const char *hex = digest + strlen("sha256:");

        (void) snprintf(out, 80, "objects/%.2s/%.62s", hex, hex + 2);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* A recursive listing of @dfd: one line per entry with type, mode, size and content hash or target. */
static void listing_rec(int dfd, const char *prefix, FILE *out) {
        DIR *d = fdopendir(openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                names = realloc(names, (n + 1) * sizeof(char *));
                assert_non_null(names);
                names[n] = strdup(de->d_name);
                assert_non_null(names[n]);
                n++;
        }
        closedir(d);
        if (n > 1)
                qsort(names, n, sizeof(char *), cmp_str);

        for (size_t i = 0; i < n; i++) {
                struct stat st;
                char *path = NULL;

                assert_true(asprintf(&path, "%s%s%s", prefix, *prefix ? "/" : "", names[i]) > 0);
                assert_int_equal(fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW), 0);
                if (S_ISREG(st.st_mode)) {
                        int fd = openat(dfd, names[i], O_RDONLY | O_CLOEXEC);
                        char *data = malloc((size_t) st.st_size + 1), hex[65];

                        assert_true(fd >= 0);
                        assert_non_null(data);
                        assert_int_equal(read(fd, data, (size_t) st.st_size + 1), st.st_size);
                        close(fd);
                        sha256_hex(data, (size_t) st.st_size, hex);
                        free(data);
                        fprintf(out, "%s f %04o %lld %s\n", path, (unsigned) (st.st_mode & 07777),
                                (long long) st.st_size, hex);
                } else if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        assert_true(sub >= 0);
                        fprintf(out, "%s d %04o\n", path, (unsigned) (st.st_mode & 07777));
                        listing_rec(sub, path, out);
                        close(sub);
                } else if (S_ISLNK(st.st_mode)) {
                        char target[4096];
                        ssize_t k = readlinkat(dfd, names[i], target, sizeof(target));

                        assert_true(k > 0);
                        fprintf(out, "%s l %.*s\n", path, (int) k, target);
                } else
                        fprintf(out, "%s other\n", path);
                free(path);
                free(names[i]);
        }
        free(names);
}

static char *listing(int dfd) {
        char *s = NULL;
        size_t n = 0;
        FILE *out = open_memstream(&s, &n);

        assert_non_null(out);
        listing_rec(dfd, "", out);
        fclose(out);
        return s;
}

static char *snapshot_ok(Fixture *f, const char *exec_id, uint64_t created, CasSnapshotStats *st) {
        char *digest = NULL;

        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", exec_id, created, &digest, st), 0);
        assert_non_null(digest);
        assert_int_equal(strlen(digest), 71);
        return digest;
}

static void assert_fsck_ok_full(Fixture *f, bool full) {
        char *problem = NULL;
        int r = full ? cas_fsck_full(f->cas, &problem) : cas_fsck(f->cas, &problem);

        if (r != 0)
                print_message("# fsck: %d %s\n", r, problem ?: "");
        assert_int_equal(r, 0);
        assert_null(problem);
}

static void assert_fsck_ok(Fixture *f) {
        assert_fsck_ok_full(f, true);
}

static char *read_all_fd(int fd, uint64_t size) {
        char *data = malloc(size + 1);

        assert_non_null(data);
        assert_int_equal(read(fd, data, size + 1), (ssize_t) size);
        data[size] = 0;
        return data;
}

/* A workspace with a bit of everything, modes included. */
static void populate(int ws) {
        char big[3 << 17];     /* larger than the read buffer (256 KiB): the streamed path */

        for (size_t i = 0; i < sizeof(big); i++)
                big[i] = (char) (i * 7 + i / 4096);
        write_str(ws, "README", "hello\n");
        write_at(ws, "run.sh", "#!/bin/sh\necho hi\n", 18, 0755);
        write_at(ws, "secret", "s3cr3t", 6, 0600);
        write_at(ws, "empty", "", 0, 0644);
        write_at(ws, "big.bin", big, sizeof(big), 0644);
        mkdir_mode(ws, "src", 0755);
        write_str(ws, "src/main.c", "int main(void) { return 0; }\n");
        write_str(ws, "src/copy.c", "hello\n");         /* same content as README */
        mkdir_mode(ws, "src/deep", 0750);
        mkdir_mode(ws, "src/deep/er", 0755);
        write_at(ws, "src/deep/er/x", "x", 1, 0700);
        mkdir_mode(ws, "emptydir", 0700);
        mkdir_mode(ws, "ro", 0755);
        write_str(ws, "ro/file", "read only dir\n");
        assert_int_equal(fchmodat(ws, "ro", 0555, 0), 0);
        assert_int_equal(symlinkat("src/main.c", ws, "link"), 0);
        assert_int_equal(symlinkat("../../outside", ws, "src/up"), 0);
        write_str(ws, "sp ace%\n\xff", "weird name\n");
}

/* ---------------------------------------------------------------------------------------------
 * Encoding. */

/* The tree format is pinned: the exact bytes of a small root tree and subtree. */
static void test_tree_format(void **state) {
        Fixture *f = *state;
        char *digest, hx[65], he[65], hd[65], path[80], expected[1024], sub[256];
        char *got;
        int fd;
        struct stat st;

        write_at(f->ws_fd, "a b", "x", 1, 0644);
        mkdir_mode(f->ws_fd, "d", 0755);
        write_at(f->ws_fd, "d/e", "", 0, 0755);
        assert_int_equal(symlinkat("t%", f->ws_fd, "l"), 0);
        digest = snapshot_ok(f, "e1", 1, NULL);

        sha256_hex("x", 1, hx);
        sha256_hex("", 0, he);
        (void) snprintf(sub, sizeof(sub), "sr-tree 1\nf 0755 0 %s e\n", he);
        sha256_hex(sub, strlen(sub), hd);
        (void) snprintf(expected, sizeof(expected),
                        "sr-tree 1\n"
                        "f 0644 1 %s a%%20b\n"
                        "d 0755 0 %s d\n"
                        "l 0777 2 - l t%%25\n", hx, hd);

        object_path(digest, path);
        fd = openat(f->store_fd, path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0444);
        got = read_all_fd(fd, (uint64_t) st.st_size);
        close(fd);
        assert_string_equal(got, expected);
        sha256_hex(expected, strlen(expected), hx);
        assert_string_equal(digest + strlen("sha256:"), hx);
        free(got);
        free(digest);
}

/* Same tree → same digest, whatever the creation order and timestamps; names round-trip. */
static void test_determinism_and_round_trip(void **state) {
        static const char *const names[] = {
                "plain", "sp ace", "per%cent", "new\nline", "tab\tx", "\xff\xfe", "\xc3\xbcn\xc3\xaf", "-dash",
                "~tilde", "\x01", "z",
        };
        Fixture *f = *state;
        char *d1, *d2, *d3;
        CasEntry *e = NULL;
        size_t n = 0;

        /* Order 1. */
        mkdir_mode(f->ws_fd, "dir", 0755);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char path[64];

                write_str(f->ws_fd, names[i], names[i]);
                strcpy(path, "dir/");
                strcat(path, names[i]);
                assert_int_equal(symlinkat(names[i], f->ws_fd, path), 0);
        }
        d1 = snapshot_ok(f, "e1", 1, NULL);

        /* Order 2: everything recreated in reverse order, in a new workspace, later. */
        pass_clock_tick();
        assert_int_equal(renameat(f->dir_fd, "ws", f->dir_fd, "ws-old"), 0);
        assert_int_equal(mkdirat(f->dir_fd, "ws", 0700), 0);
        reopen_ws(f);
        for (size_t i = sizeof(names) / sizeof(names[0]); i-- > 0;)
                write_str(f->ws_fd, names[i], names[i]);
        mkdir_mode(f->ws_fd, "dir", 0755);
        for (size_t i = sizeof(names) / sizeof(names[0]); i-- > 0;) {
                char path[64];

                strcpy(path, "dir/");
                strcat(path, names[i]);
                assert_int_equal(symlinkat(names[i], f->ws_fd, path), 0);
        }
        d2 = snapshot_ok(f, "e2", 2, NULL);
        assert_string_equal(d1, d2);

        /* Round trip of every name and target, sorted bytewise. */
        assert_int_equal(cas_tree_list(f->cas, d1, "dir", &e, &n), 0);
        assert_int_equal(n, sizeof(names) / sizeof(names[0]));
        for (size_t i = 0; i < n; i++) {
                bool found = false;

                if (i > 0)
                        assert_true(strcmp(e[i - 1].name, e[i].name) < 0);
                assert_int_equal(e[i].type, DT_LNK);
                assert_string_equal(e[i].name, e[i].target);
                assert_int_equal(e[i].size, strlen(e[i].target));
                assert_string_equal(e[i].digest, "");
                for (size_t j = 0; j < n; j++)
                        found = found || strcmp(names[j], e[i].name) == 0;
                assert_true(found);
        }
        cas_entries_free(e, n);

        /* A mode change is a different tree. */
        assert_int_equal(fchmodat(f->ws_fd, "plain", 0755, 0), 0);
        d3 = snapshot_ok(f, "e3", 3, NULL);
        assert_string_not_equal(d1, d3);
        assert_fsck_ok(f);
        free(d1);
        free(d2);
        free(d3);
}

/* Non-canonical trees are corrupt (-EIO) even though they hash to their name. */
static void test_strict_tree_decoding(void **state) {
        Fixture *f = *state;
        char he[65], bad[512], hex[65], path[80], digest[80];
        CasEntry *e = NULL;
        size_t n = 0;
        const char *cases[] = {
                "sr-tree 1\nf 0644 0 %s b\nf 0644 0 %s a\n",          /* unsorted */
                "sr-tree 1\nf 0644 0 %s a\nf 0644 0 %s a\n",          /* duplicate */
                "sr-tree 1\nf 0644 0 %s %%41\n",                      /* needless escape */
                "sr-tree 1\nf 0644 0 %s a b\n",                       /* raw space */
                "sr-tree 1\nf 1644 0 %s a\n",                         /* setuid bit */
                "sr-tree 1\nf 0644 00 %s a\n",                        /* leading zero */
                "sr-tree 1\nf 0644 0 %s a",                           /* no final newline */
                "sr-tree 1\nf 0644 0 %s ..\n",                        /* dot-dot */
                "sr-tree 1\nf 0644 0 %s a%%2Fb\n",                    /* slash in a name */
                "sr-tree 1\nl 0777 3 - a xy\n",                       /* wrong target size */
                "sr-tree 2\n",                                        /* version */
        };

        sha256_hex("", 0, he);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int fd;

                (void) snprintf(bad, sizeof(bad), cases[i], he, he);
                sha256_hex(bad, strlen(bad), hex);
                (void) snprintf(digest, sizeof(digest), "sha256:%s", hex);
                object_path(digest, path);
                path[10] = 0;
                (void) mkdirat(f->store_fd, path, 0700);
                path[10] = '/';
                fd = openat(f->store_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
                assert_true(fd >= 0);
                assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t) strlen(bad));
                close(fd);
                assert_int_equal(cas_tree_list(f->cas, digest, "", &e, &n), -EIO);
        }

        /* An uppercase digest is not a digest; neither is anything but "sha256:" + 64 hex. */
        for (size_t i = 0; i < 64; i++)
                hex[i] = (char) (hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 32 : hex[i]);
        (void) snprintf(digest, sizeof(digest), "sha256:%s", hex);
        if (strpbrk(hex, "ABCDEF"))
                assert_int_equal(cas_tree_list(f->cas, digest, "", &e, &n), -EINVAL);
        assert_int_equal(cas_tree_list(f->cas, "sha256:00", "", &e, &n), -EINVAL);
        assert_int_equal(cas_tree_list(f->cas, "md5:00", "", &e, &n), -EINVAL);

        /* A corrupted object: its digest no longer matches. */
        write_str(f->ws_fd, "a", "a");
        {
                char *d = snapshot_ok(f, "e1", 1, NULL);

                object_path(d, path);
                int fd;

                assert_int_equal(fchmodat(f->store_fd, path, 0644, 0), 0);
                fd = openat(f->store_fd, path, O_WRONLY | O_CLOEXEC);

                assert_true(fd >= 0);
                assert_int_equal(pwrite(fd, "X", 1, 0), 1);
                close(fd);
                assert_int_equal(cas_tree_list(f->cas, d, "", &e, &n), -EIO);
                free(d);
        }
}

/* ---------------------------------------------------------------------------------------------
 * Objects and the stat cache. */

static void test_identical_content_stored_once(void **state) {
        Fixture *f = *state;
        CasSnapshotStats st;
        char *d;

        mkdir_mode(f->ws_fd, "a", 0755);
        mkdir_mode(f->ws_fd, "b", 0755);
        write_str(f->ws_fd, "one", "same content\n");
        write_str(f->ws_fd, "a/two", "same content\n");
        write_at(f->ws_fd, "b/three", "same content\n", 13, 0755);    /* another mode, same object */
        write_str(f->ws_fd, "other", "other content\n");
        assert_int_equal(linkat(f->ws_fd, "other", f->ws_fd, "hardlink", 0), 0);
        d = snapshot_ok(f, "e1", 1, &st);

        /* Objects: two contents + root, a, b trees. */
        assert_int_equal(count_objects(f), 5);
        assert_int_equal(st.new_objects, 5);
        assert_int_equal(st.files, 5);
        assert_int_equal(st.dirs, 2);
        assert_int_equal(st.bytes, 13 * 3 + 14 * 2);
        assert_int_equal(st.hashed_bytes, 13 * 3 + 14 * 2);
        assert_int_equal(count_dir(f->store_fd, "tmp"), 0);
        free(d);
        assert_fsck_ok(f);
}

static void test_stat_cache(void **state) {
        Fixture *f = *state;
        CasSnapshotStats st;
        char *d1, *d2, *d3, *d4, *d5;

        populate(f->ws_fd);
        pass_clock_tick();
        d1 = snapshot_ok(f, "e1", 1, &st);
        assert_int_equal(st.hashed_bytes, st.bytes);
        assert_true(st.bytes > (3 << 17));

        /* Unchanged: nothing is read, nothing written, not even the cache file (same inode). */
        {
                struct stat c1, c2;

                assert_int_equal(fstatat(f->store_fd, "cache/ws", &c1, 0), 0);
                d2 = snapshot_ok(f, "e2", 2, &st);
                assert_int_equal(fstatat(f->store_fd, "cache/ws", &c2, 0), 0);
                assert_int_equal(c1.st_ino, c2.st_ino);
        }
        print_message("# unchanged snapshot: %" PRIu64 " files, %" PRIu64 " bytes, hashed %" PRIu64 "\n",
                      st.files, st.bytes, st.hashed_bytes);
        assert_int_equal(st.hashed_bytes, 0);
        assert_int_equal(st.new_objects, 0);
        assert_string_equal(d1, d2);

        /* The cache is persistent: a new Cas object on the same store uses it too. */
        cas_free(f->cas);
        assert_int_equal(cas_open(f->store_fd, &f->cas), 0);
        d3 = snapshot_ok(f, "e3", 3, &st);
        assert_int_equal(st.hashed_bytes, 0);
        assert_string_equal(d1, d3);

        /* One file changed in place, same size: only it is read again, and the cache is replaced. */
        overwrite_str(f->ws_fd, "src/main.c", "int main(void) { return 1; }\n");
        {
                struct stat c1, c2;

                assert_int_equal(fstatat(f->store_fd, "cache/ws", &c1, 0), 0);
                d4 = snapshot_ok(f, "e4", 4, &st);
                assert_int_equal(fstatat(f->store_fd, "cache/ws", &c2, 0), 0);
                assert_int_not_equal(c1.st_ino, c2.st_ino);
        }
        assert_int_equal(st.hashed_bytes, strlen("int main(void) { return 1; }\n"));
        assert_int_equal(st.new_objects, 3);            /* the file, src, root */
        assert_string_not_equal(d3, d4);

        /* A file changed right after it was snapshotted, within the same clock tick: never missed. */
        write_str(f->ws_fd, "fresh", "aaaa");
        free(snapshot_ok(f, "e5", 5, NULL));
        overwrite_str(f->ws_fd, "fresh", "bbbb");
        d5 = snapshot_ok(f, "e6", 6, &st);
        {
                int fd;
                uint64_t size;
                char dg[72], *data;

                assert_int_equal(cas_open_file(f->cas, d5, "fresh", &fd, &size, dg), 0);
                data = read_all_fd(fd, size);
                close(fd);
                assert_string_equal(data, "bbbb");
                free(data);
        }

        /* The cache never names an object that is gone: a deleted object is stored again. */
        {
                char hex[65], digest[80], path[80];

                /* First let "fresh" (maybe too recent to be cached so far) make it into the cache. */
                pass_clock_tick();
                free(snapshot_ok(f, "e6b", 6, &st));
                /* Read again here only what was too recent to be cached so far: "fresh" (4
                 * bytes) and, when e4 to e6 all ran within a clock tick of its change (a loaded
                 * machine), src/main.c (29 bytes); after the tick, everything is cached. */
                {
                        uint64_t main_c = strlen("int main(void) { return 1; }\n");
                        print_message("# e6b hashed %llu bytes\n", (unsigned long long) st.hashed_bytes);
                        assert_true(st.hashed_bytes == 0 || st.hashed_bytes == 4 || st.hashed_bytes == main_c ||
                                    st.hashed_bytes == main_c + 4);
                }
                sha256_hex("hello\n", 6, hex);
                (void) snprintf(digest, sizeof(digest), "sha256:%s", hex);
                object_path(digest, path);
                assert_int_equal(unlinkat(f->store_fd, path, 0), 0);
                free(snapshot_ok(f, "e7", 7, &st));
                assert_int_equal(st.hashed_bytes, 6);   /* README and src/copy.c: read once, stored once */
                assert_int_equal(faccessat(f->store_fd, path, F_OK, 0), 0);
        }
        assert_fsck_ok(f);

        /* A damaged cache file is ignored. */
        write_str(f->store_fd, "cache/ws", "sr-statcache 1\n1 2 3\n");
        free(snapshot_ok(f, "e8", 8, &st));
        assert_int_equal(st.hashed_bytes, st.bytes);

        /* The cache is not synced: a crash may leave it cut short (or empty). Such a file is
         * ignored, not half used. */
        {
                char *data;
                int fd;
                struct stat cs;

                pass_clock_tick();
                free(snapshot_ok(f, "e9", 9, &st));    /* a complete cache again */
                fd = openat(f->store_fd, "cache/ws", O_RDONLY | O_CLOEXEC);
                assert_true(fd >= 0);
                assert_int_equal(fstat(fd, &cs), 0);
                data = read_all_fd(fd, (uint64_t) cs.st_size);
                close(fd);
                assert_non_null(strstr(data, "\nend "));
                *strstr(data, "\nend ") = '\0';            /* all rows, no trailer */
                write_str(f->store_fd, "cache/ws", data);
                free(data);
                free(snapshot_ok(f, "e10", 10, &st));
                assert_int_equal(st.hashed_bytes, st.bytes);
                write_str(f->store_fd, "cache/ws", "");
                free(snapshot_ok(f, "e11", 11, &st));
                assert_int_equal(st.hashed_bytes, st.bytes);
        }

        free(d1);
        free(d2);
        free(d3);
        free(d4);
        free(d5);
}

/* A ref file prepared during the run (cas_ref_prepare()) becomes the ref; listings never show it;
 * one removed meanwhile does not stop the ref; a discarded one goes; the gc prunes a day-old one. */
static void test_prepared_ref(void **state) {
        Fixture *f = *state;
        CasRef *refs = NULL;
        size_t n = 0;
        char *digest = NULL, *d1;
        int fd;

        write_str(f->ws_fd, "a", "alpha\n");
        d1 = snapshot_ok(f, "e0", 1, NULL);

        /* Prepared: invisible to the listing, then the ref itself (same inode), nothing left over. */
        fd = cas_ref_prepare(f->cas, "ws", "e1");
        assert_true(fd >= 0);
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e1.pre", F_OK, 0), 0);
        assert_int_equal(cas_list_refs(f->cas, "ws", &refs, &n), 0);
        assert_int_equal(n, 1);
        cas_refs_free(refs, n);
        {
                struct stat pre, ref;

                assert_int_equal(fstat(fd, &pre), 0);
                assert_int_equal(cas_snapshot_prepared(f->cas, f->ws_fd, "ws", "e1", 2, fd, &digest, NULL), 0);
                assert_string_equal(digest, d1);
                assert_int_equal(fstatat(f->store_fd, "refs/workspace/ws/e1", &ref, 0), 0);
                assert_int_equal(pre.st_ino, ref.st_ino);
                assert_int_equal(ref.st_mode & 0777, 0444);
        }
        free(digest);
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e1.pre", F_OK, 0), -1);
        assert_int_equal(count_dir(f->store_fd, "tmp"), 0);
        assert_int_equal(cas_list_refs(f->cas, "ws", &refs, &n), 0);
        assert_int_equal(n, 2);
        cas_refs_free(refs, n);

        /* Removed meanwhile: the ref is written the ordinary way. */
        fd = cas_ref_prepare(f->cas, "ws", "e2");
        assert_true(fd >= 0);
        assert_int_equal(unlinkat(f->store_fd, "refs/workspace/ws/.e2.pre", 0), 0);
        assert_int_equal(cas_snapshot_prepared(f->cas, f->ws_fd, "ws", "e2", 3, fd, &digest, NULL), 0);
        assert_string_equal(digest, d1);
        free(digest);
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/e2", F_OK, 0), 0);

        /* A snapshot that fails before its ref removes the prepared file. */
        fd = cas_ref_prepare(f->cas, "ws", "e3");
        assert_true(fd >= 0);
        assert_int_equal(cas_snapshot_prepared(f->cas, f->ws_fd, "ws", "bad/id", 4, fd, &digest, NULL), -EINVAL);
        /* (bad id: nothing was prepared under it, the e3 file stays for the discard below) */
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e3.pre", F_OK, 0), 0);
        cas_ref_prepared_discard(f->cas, "ws", "e3", -EBADF);   /* nothing to close: no-op */
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e3.pre", F_OK, 0), 0);
        fd = openat(f->store_fd, "refs/workspace/ws/.e3.pre", O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        cas_ref_prepared_discard(f->cas, "ws", "e3", fd);
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e3.pre", F_OK, 0), -1);

        /* Left by a crash: the gc removes it once it is a day old, not before. */
        fd = cas_ref_prepare(f->cas, "ws", "e4");
        assert_true(fd >= 0);
        close(fd);
        fd = cas_ref_prepare(f->cas, "ws", "e5");
        assert_true(fd >= 0);
        close(fd);
        {
                struct timespec old[2] = { { .tv_sec = time(NULL) - 2 * 86400 }, { .tv_sec = time(NULL) - 2 * 86400 } };
                assert_int_equal(utimensat(f->store_fd, "refs/workspace/ws/.e4.pre", old, 0), 0);
        }
        assert_int_equal(cas_gc(f->cas, 0, NULL), 0);
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e4.pre", F_OK, 0), -1);
        assert_int_equal(faccessat(f->store_fd, "refs/workspace/ws/.e5.pre", F_OK, 0), 0);
        assert_fsck_ok(f);
        free(d1);
}

/* ---------------------------------------------------------------------------------------------
 * Untrusted workspace contents. */

static void test_symlinks_not_followed(void **state) {
        Fixture *f = *state;
        CasSnapshotStats st;
        CasEntry *e = NULL;
        size_t n = 0;
        char *d, dg[72];
        int fd = -1;
        uint64_t size;

        /* A directory outside the workspace, reachable only through a symlink. */
        assert_int_equal(mkdirat(f->dir_fd, "outside", 0700), 0);
        write_str(f->dir_fd, "outside/leak", "must not be stored");

        write_str(f->ws_fd, "real", "real");
        assert_int_equal(symlinkat("/etc/shadow", f->ws_fd, "shadow"), 0);
        assert_int_equal(symlinkat("../outside", f->ws_fd, "out"), 0);
        assert_int_equal(symlinkat("loop", f->ws_fd, "loop"), 0);
        d = snapshot_ok(f, "e1", 1, &st);

        assert_int_equal(st.files, 1);
        assert_int_equal(st.symlinks, 3);
        assert_int_equal(st.bytes, 4);
        assert_int_equal(st.hashed_bytes, 4);
        assert_int_equal(count_objects(f), 2);          /* "real" + the root tree */

        assert_int_equal(cas_tree_list(f->cas, d, "", &e, &n), 0);
        assert_int_equal(n, 4);
        assert_string_equal(e[3].name, "shadow");
        assert_int_equal(e[3].type, DT_LNK);
        assert_string_equal(e[3].target, "/etc/shadow");
        assert_int_equal(e[3].size, strlen("/etc/shadow"));
        cas_entries_free(e, n);

        assert_int_equal(cas_open_file(f->cas, d, "shadow", &fd, &size, dg), -ELOOP);
        assert_int_equal(cas_open_file(f->cas, d, "out/leak", &fd, &size, dg), -ENOTDIR);
        assert_int_equal(cas_tree_list(f->cas, d, "out", &e, &n), -ENOTDIR);
        free(d);
}

static void test_special_files_skipped(void **state) {
        Fixture *f = *state;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        CasSnapshotStats st;
        CasEntry *e = NULL;
        size_t n = 0;
        char *d;
        int s;

        write_str(f->ws_fd, "file", "x");
        assert_int_equal(mkfifoat(f->ws_fd, "fifo", 0644), 0);
        assert_true(strlen(f->dir) < 90);
        (void) snprintf(sa.sun_path, sizeof(sa.sun_path), "%.90s/ws/sock", f->dir);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s >= 0);
        assert_int_equal(bind(s, (struct sockaddr *) &sa, sizeof(sa)), 0);

        /* A FIFO opened for reading would block: the alarm kills the test if the walk does. */
        alarm(30);
        d = snapshot_ok(f, "e1", 1, &st);
        alarm(0);
        close(s);

        assert_int_equal(st.skipped, 2);
        assert_int_equal(st.files, 1);
        assert_int_equal(cas_tree_list(f->cas, d, "", &e, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(e[0].name, "file");
        cas_entries_free(e, n);
        free(d);

        /* An unreadable file is skipped too (not as root: root reads anything). */
        if (geteuid() != 0) {
                write_at(f->ws_fd, "noread", "x", 1, 0000);
                free(snapshot_ok(f, "e2", 2, &st));
                assert_int_equal(st.skipped, 3);
        }
}

static void test_limits(void **state) {
        Fixture *f = *state;
        CasSnapshotStats st;
        char big[(256 << 10) + 4096];
        int fd;

        /* Depth: the default 256 components pass, 257 do not. */
        fd = dup(f->ws_fd);
        for (unsigned i = 0; i < 256; i++) {
                int sub;

                assert_int_equal(mkdirat(fd, "d", 0700), 0);
                sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(sub >= 0);
                close(fd);
                fd = sub;
        }
        free(snapshot_ok(f, "e1", 1, &st));             /* 256 nested (empty) dirs: 256 components */
        assert_int_equal(st.dirs, 256);
        write_str(fd, "f", "too deep");                 /* 257 components */
        close(fd);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "e2", 2, NULL, NULL), -E2BIG);
        assert_int_equal(cas_set_limits(f->cas, &(CasLimits) { .max_depth = 300 }), 0);
        free(snapshot_ok(f, "e3", 3, NULL));
        assert_int_equal(cas_set_limits(f->cas, &(CasLimits) { .max_depth = 2 }), 0);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "e4", 4, NULL, NULL), -E2BIG);
        assert_int_equal(cas_set_limits(f->cas, &(CasLimits) {}), 0);

        /* Entries (in a second workspace). */
        assert_int_equal(mkdirat(f->dir_fd, "w2", 0700), 0);
        (void) close(f->ws_fd);
        f->ws_fd = openat(f->dir_fd, "w2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->ws_fd >= 0);
        for (unsigned i = 0; i < 10; i++) {
                char name[16];

                (void) snprintf(name, sizeof(name), "f%u", i);
                write_str(f->ws_fd, name, name);
        }
        assert_int_equal(cas_set_limits(f->cas, &(CasLimits) { .max_entries = 10 }), 0);
        free(snapshot_ok(f, "e5", 5, NULL));
        write_str(f->ws_fd, "f10", "one too many");
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "e6", 6, NULL, NULL), -E2BIG);

        /* File size, on both paths (buffered and streamed); nothing is left in tmp/. */
        assert_int_equal(cas_set_limits(f->cas, &(CasLimits) { .max_file_size = sizeof(big) - 1 }), 0);
        memset(big, 'b', sizeof(big));
        assert_int_equal(unlinkat(f->ws_fd, "f10", 0), 0);
        write_at(f->ws_fd, "big", big, sizeof(big) - 1, 0644);
        free(snapshot_ok(f, "e7", 7, NULL));
        write_at(f->ws_fd, "big", big, sizeof(big), 0644);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "e8", 8, NULL, NULL), -E2BIG);
        assert_int_equal(cas_set_limits(f->cas, &(CasLimits) { .max_file_size = 100 }), 0);
        write_at(f->ws_fd, "big", big, 101, 0644);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "e9", 9, NULL, NULL), -E2BIG);
        assert_int_equal(count_dir(f->store_fd, "tmp"), 0);
        assert_fsck_ok(f);

        /* Bad arguments. */
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "../x", "e", 1, NULL, NULL), -EINVAL);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", ".e", 1, NULL, NULL), -EINVAL);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "a/b", 1, NULL, NULL), -EINVAL);
        assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "e", UINT64_MAX, NULL, NULL), -EINVAL);
        fd = openat(f->ws_fd, "f1", O_RDONLY | O_CLOEXEC);
        assert_int_equal(cas_snapshot(f->cas, fd, "ws", "e", 1, NULL, NULL), -ENOTDIR);
        close(fd);
}

/* ---------------------------------------------------------------------------------------------
 * Lookups and refs. */

static void test_lookups(void **state) {
        Fixture *f = *state;
        CasEntry *e = NULL;
        size_t n = 0;
        char *d, dg[72], hex[65];
        int fd = -1;
        uint64_t size = 0;
        CasRef ref = {}, *refs = NULL;

        populate(f->ws_fd);
        d = snapshot_ok(f, "e1", 1000, NULL);

        assert_int_equal(cas_tree_list(f->cas, d, "", &e, &n), 0);
        assert_int_equal(n, 10);
        assert_string_equal(e[0].name, "README");
        assert_int_equal(e[0].type, DT_REG);
        assert_int_equal(e[0].mode, 0644);
        assert_int_equal(e[0].size, 6);
        sha256_hex("hello\n", 6, hex);
        assert_string_equal(e[0].digest + 7, hex);
        for (size_t i = 0; i < n; i++)
                if (strcmp(e[i].name, "src") == 0) {
                        assert_int_equal(e[i].type, DT_DIR);
                        assert_int_equal(e[i].mode, 0755);
                        assert_int_equal(e[i].size, 29 + 6 + 1);    /* main.c + copy.c + deep/er/x */
                } else if (strcmp(e[i].name, "run.sh") == 0)
                        assert_int_equal(e[i].mode, 0755);
                else if (strcmp(e[i].name, "ro") == 0)
                        assert_int_equal(e[i].mode, 0555);
        cas_entries_free(e, n);

        assert_int_equal(cas_tree_list(f->cas, d, "src/deep/er", &e, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(e[0].name, "x");
        assert_int_equal(e[0].mode, 0700);
        cas_entries_free(e, n);
        assert_int_equal(cas_tree_list(f->cas, d, "emptydir", &e, &n), 0);
        assert_int_equal(n, 0);
        cas_entries_free(e, n);

        assert_int_equal(cas_open_file(f->cas, d, "src/main.c", &fd, &size, dg), 0);
        {
                char *data = read_all_fd(fd, size);

                assert_string_equal(data, "int main(void) { return 0; }\n");
                sha256_hex(data, size, hex);
                assert_string_equal(dg + 7, hex);
                assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
                free(data);
                close(fd);
        }

        /* Path validation and errors. */
        static const char *const bad[] = { "/src", "src/", "src//main.c", "..", "src/../README", ".", "./src" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(cas_tree_list(f->cas, d, bad[i], &e, &n), -EINVAL);
                assert_int_equal(cas_open_file(f->cas, d, bad[i], &fd, &size, dg), -EINVAL);
        }
        assert_int_equal(cas_tree_list(f->cas, d, "nope", &e, &n), -ENOENT);
        assert_int_equal(cas_tree_list(f->cas, d, "src/nope/x", &e, &n), -ENOENT);
        assert_int_equal(cas_tree_list(f->cas, d, "README", &e, &n), -ENOTDIR);
        assert_int_equal(cas_tree_list(f->cas, d, "README/x", &e, &n), -ENOTDIR);
        assert_int_equal(cas_open_file(f->cas, d, "src", &fd, &size, dg), -EISDIR);
        assert_int_equal(cas_open_file(f->cas, d, "", &fd, &size, dg), -EISDIR);
        assert_int_equal(cas_open_file(f->cas, d, "link", &fd, &size, dg), -ELOOP);
        assert_int_equal(cas_open_file(f->cas, d, "missing", &fd, &size, dg), -ENOENT);
        assert_int_equal(cas_open_file(f->cas, d, "README/x", &fd, &size, dg), -ENOTDIR);
        assert_int_equal(cas_tree_list(f->cas, ZERO_DIGEST, "", &e, &n), -ENOENT);
        {
                char deep[600] = "";

                for (unsigned i = 0; i < 257; i++)
                        strcat(deep, i ? "/a" : "a");
                assert_int_equal(cas_tree_list(f->cas, d, deep, &e, &n), -EINVAL);
        }

        /* Refs: newest first (ties by execution id, descending), replaced in place. */
        free(snapshot_ok(f, "e2", 3000, NULL));
        free(snapshot_ok(f, "e3", 2000, NULL));
        free(snapshot_ok(f, "e4", 2000, NULL));
        assert_int_equal(cas_list_refs(f->cas, "ws", &refs, &n), 0);
        assert_int_equal(n, 4);
        assert_string_equal(refs[0].exec_id, "e2");
        assert_string_equal(refs[1].exec_id, "e4");
        assert_string_equal(refs[2].exec_id, "e3");
        assert_string_equal(refs[3].exec_id, "e1");
        assert_string_equal(refs[3].tree, d);
        assert_int_equal(refs[3].created_ms, 1000);
        assert_int_equal(refs[3].bytes, 6 + 18 + 6 + 0 + (3 << 17) + 29 + 6 + 1 + 14 + 11);
        cas_refs_free(refs, n);

        assert_int_equal(cas_read_ref(f->cas, "ws", "e1", &ref), 0);
        assert_string_equal(ref.tree, d);
        assert_string_equal(ref.exec_id, "e1");
        cas_ref_done(&ref);
        {
                char *json = NULL;
                int rfd = openat(f->store_fd, "refs/workspace/ws/e1", O_RDONLY | O_CLOEXEC);
                char expected[256];
                struct stat st;

                assert_true(rfd >= 0);
                assert_int_equal(fstat(rfd, &st), 0);
                json = read_all_fd(rfd, (uint64_t) st.st_size);
                close(rfd);
                (void) snprintf(expected, sizeof(expected),
                                "{\"bytes\":%d,\"createdAt\":1000,\"executionId\":\"e1\",\"tree\":\"%s\"}",
                                6 + 18 + 6 + 0 + (3 << 17) + 29 + 6 + 1 + 14 + 11, d);
                assert_string_equal(json, expected);
                free(json);
        }
        assert_int_equal(cas_read_ref(f->cas, "ws", "nope", &ref), -ENOENT);
        assert_int_equal(cas_read_ref(f->cas, "nows", "e1", &ref), -ENOENT);
        assert_int_equal(cas_read_ref(f->cas, "ws", "../e1", &ref), -EINVAL);
        assert_int_equal(cas_read_ref(f->cas, "", "e1", &ref), -EINVAL);
        assert_int_equal(cas_list_refs(f->cas, "nows", &refs, &n), 0);
        assert_int_equal(n, 0);
        assert_null(refs);
        assert_int_equal(cas_list_refs(f->cas, "a/b", &refs, &n), -EINVAL);

        /* Snapshot again under an existing execution id: the ref is replaced. */
        write_str(f->ws_fd, "new", "new");
        {
                char *d2 = snapshot_ok(f, "e1", 5000, NULL);

                assert_int_equal(cas_read_ref(f->cas, "ws", "e1", &ref), 0);
                assert_string_equal(ref.tree, d2);
                assert_int_equal(ref.created_ms, 5000);
                cas_ref_done(&ref);
                free(d2);
        }
        free(d);
}

/* ---------------------------------------------------------------------------------------------
 * Crash points. */

typedef struct CrashHook {
        unsigned fire_at;       /* crash at this call (0-based); UINT_MAX = never */
        unsigned calls;
        char seen[4096];        /* every point name, comma-separated, in order (first 4 KiB) */
        const char *points[512];/* the first 512 points */
} CrashHook;

static int crash_hook(const char *point, void *userdata) {
        CrashHook *h = userdata;

        if (strlen(h->seen) + strlen(point) + 2 < sizeof(h->seen)) {
                strcat(h->seen, point);
                strcat(h->seen, ",");
        }
        if (h->calls < 512)
                h->points[h->calls] = point;
        if (h->calls++ == h->fire_at)
                return -EINTR;
        return 0;
}

static void make_crash_workspace(int ws, bool second, bool large) {
        char big[(256 << 10) + 100];

        /* One object larger than the read buffer: the streamed path (not needed twice). */
        memset(big, second ? 'B' : 'A', sizeof(big));
        if (!second) {
                write_str(ws, "keep", "kept in both\n");
                mkdir_mode(ws, "sub", 0755);
                write_str(ws, "sub/a", "first a\n");
                assert_int_equal(symlinkat("keep", ws, "ln"), 0);
                if (!large)
                        write_at(ws, "big", big, sizeof(big), 0644);
        } else {
                write_str(ws, "sub/a", "second a, longer\n");
                write_str(ws, "sub/new", "new in second\n");
                mkdir_mode(ws, "sub/nested", 0700);
                write_str(ws, "sub/nested/n", "nested\n");
                if (!large)
                        write_at(ws, "big", big, sizeof(big), 0644);
                else {
                        /* Enough objects for a batch made durable with one syncfs(). */
                        mkdir_mode(ws, "many", 0755);
                        for (unsigned i = 0; i < 18; i++) {
                                char name[32];

                                (void) snprintf(name, sizeof(name), "many/%u", i);
                                write_str(ws, name, name);
                        }
                }
        }
}

/*
 * Snapshot B crashes at every point in turn: A stays readable, no ref dangles, a re-run works.
 * @large: B has enough objects for the syncfs() path, and only the first and last point of each
 * run of equal points is tried.
 */
static void crash_points_run(void **state, bool large) {
        Fixture *f = *state;
        char *da, *db_ref, *db;
        CasSnapshotStats ref_stats, st;
        size_t ref_objects;
        CrashHook h = { .fire_at = UINT32_MAX };
        const char *h_ref_points[512];
        unsigned points;

        /* Reference run. */
        make_crash_workspace(f->ws_fd, false, large);
        da = snapshot_ok(f, "a", 1, NULL);
        make_crash_workspace(f->ws_fd, true, large);
        cas_set_crash_hook(f->cas, crash_hook, &h);
        db_ref = snapshot_ok(f, "b", 2, &ref_stats);
        cas_set_crash_hook(f->cas, NULL, NULL);
        ref_objects = count_objects(f);
        points = h.calls;
        memcpy(h_ref_points, h.points, sizeof(h_ref_points));
        print_message("# %u crash points%s%s\n", points, large ? "" : ": ", large ? "" : h.seen);
        assert_non_null(strstr(h.seen, CAS_CRASH_OBJECT_WRITTEN ","));
        assert_non_null(strstr(h.seen, CAS_CRASH_OBJECTS_SYNCED ","));
        assert_non_null(strstr(h.seen, CAS_CRASH_OBJECT_RENAMED ","));
        assert_non_null(strstr(h.seen, CAS_CRASH_OBJECTS_PUBLISHED ","));
        assert_non_null(strstr(h.seen, CAS_CRASH_TREE_WRITTEN ","));
        assert_non_null(strstr(h.seen,
                               CAS_CRASH_REF_WRITTEN "," CAS_CRASH_REF_RENAMED "," CAS_CRASH_REF_PUBLISHED ","));
        /* Objects before trees before the ref: the last tree is written after the last file object. */
        assert_true(strstr(h.seen, CAS_CRASH_TREE_WRITTEN) > strstr(h.seen, CAS_CRASH_OBJECT_WRITTEN));

        assert_true(points < 512);
        for (unsigned i = 0; i < points; i++) {
                CasRef ref = {};
                char *problem = NULL;
                int r;

                if (large && i > 0 && i + 1 < points && h_ref_points[i - 1] == h_ref_points[i] &&
                    h_ref_points[i + 1] == h_ref_points[i])
                        continue;

                /* Fresh store and workspace, snapshot A, then B with a crash at point i. */
                teardown(state);
                assert_int_equal(setup(state), 0);
                f = *state;
                make_crash_workspace(f->ws_fd, false, large);
                free(snapshot_ok(f, "a", 1, NULL));
                make_crash_workspace(f->ws_fd, true, large);
                h = (CrashHook) { .fire_at = i };
                cas_set_crash_hook(f->cas, crash_hook, &h);
                assert_int_equal(cas_snapshot(f->cas, f->ws_fd, "ws", "b", 2, NULL, NULL), -EINTR);
                cas_set_crash_hook(f->cas, NULL, NULL);

                /* A is intact, and whatever ref exists names a complete tree. */
                assert_int_equal(cas_read_ref(f->cas, "ws", "a", &ref), 0);
                assert_string_equal(ref.tree, da);
                cas_ref_done(&ref);
                r = cas_fsck(f->cas, &problem);
                if (r != 0)
                        print_message("# crash at %u: fsck %d %s\n", i, r, problem);
                assert_int_equal(r, 0);
                r = cas_read_ref(f->cas, "ws", "b", &ref);
                if (r == 0) {
                        assert_string_equal(ref.tree, db_ref);
                        cas_ref_done(&ref);
                } else
                        assert_int_equal(r, -ENOENT);
                /* The ref exists exactly once the crash is at or after its rename. */
                assert_int_equal(r == 0, strstr(h.seen, CAS_CRASH_REF_RENAMED) != NULL);

                /* A re-run completes, reuses what was published, and yields the same store. */
                db = snapshot_ok(f, "b", 2, &st);
                assert_string_equal(db, db_ref);
                assert_true(st.new_objects <= ref_stats.new_objects);
                assert_int_equal(count_objects(f), ref_objects);
                assert_fsck_ok_full(f, i + 1 == points);     /* content re-hashed once: valgrind */
                free(db);

                /* Leftover tmp files are allowed; gc removes them. */
                assert_int_equal(cas_gc(f->cas, 0, NULL), 0);
                assert_int_equal(count_dir(f->store_fd, "tmp"), 0);
                assert_int_equal(count_objects(f), ref_objects);
                assert_fsck_ok_full(f, false);
        }
        free(da);
        free(db_ref);
}

static void test_snapshot_crash_points(void **state) {
        crash_points_run(state, false);
}

static void test_snapshot_crash_points_syncfs(void **state) {
        crash_points_run(state, true);
}

/* ---------------------------------------------------------------------------------------------
 * Restore. */

static void test_restore(void **state) {
        Fixture *f = *state;
        char *d, *before, *after, *d2;
        int fd;
        CasSnapshotStats st;

        populate(f->ws_fd);
        d = snapshot_ok(f, "e1", 1, NULL);
        before = listing(f->ws_fd);

        /* Wreck the workspace: contents, modes, types, and a tree deeper than any limit. */
        write_str(f->ws_fd, "README", "changed\n");
        assert_int_equal(fchmodat(f->ws_fd, "run.sh", 0644, 0), 0);
        assert_int_equal(unlinkat(f->ws_fd, "secret", 0), 0);
        assert_int_equal(unlinkat(f->ws_fd, "link", 0), 0);
        write_str(f->ws_fd, "link", "now a file");
        assert_int_equal(fchmodat(f->ws_fd, "ro", 0755, 0), 0);
        assert_int_equal(unlinkat(f->ws_fd, "ro/file", 0), 0);
        write_str(f->ws_fd, "added", "added");
        assert_int_equal(mkfifoat(f->ws_fd, "fifo", 0600), 0);
        mkdir_mode(f->ws_fd, "locked", 0755);
        write_str(f->ws_fd, "locked/f", "f");
        fd = dup(f->ws_fd);
        for (unsigned i = 0; i < 300; i++) {
                int sub;

                assert_int_equal(mkdirat(fd, "z", 0700), 0);
                sub = openat(fd, "z", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = sub;
        }
        write_str(fd, "bottom", "bottom");
        close(fd);
        after = listing(f->ws_fd);
        assert_string_not_equal(before, after);
        free(after);
        assert_int_equal(fchmodat(f->ws_fd, "locked", 0000, 0), 0);

        assert_int_equal(cas_restore(f->cas, d, f->dir_fd, "ws"), 0);
        reopen_ws(f);
        after = listing(f->ws_fd);
        assert_string_equal(before, after);
        free(after);
        assert_int_equal(count_dir(f->dir_fd, "."), 2);        /* store, ws: no leftovers */

        /* The restored workspace snapshots to the same tree. */
        d2 = snapshot_ok(f, "e2", 2, &st);
        assert_string_equal(d, d2);
        print_message("# snapshot right after restore: hashed %" PRIu64 " of %" PRIu64 " bytes\n",
                      st.hashed_bytes, st.bytes);
        free(d2);

        /* Restore where no workspace exists yet. */
        assert_int_equal(cas_restore(f->cas, d, f->dir_fd, "fresh"), 0);
        fd = openat(f->dir_fd, "fresh", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        after = listing(fd);
        assert_string_equal(before, after);
        free(after);
        close(fd);

        /* Errors. */
        write_str(f->dir_fd, "afile", "x");
        assert_int_equal(cas_restore(f->cas, d, f->dir_fd, "afile"), -ENOTDIR);
        assert_int_equal(symlinkat("ws", f->dir_fd, "alink"), 0);
        assert_int_equal(cas_restore(f->cas, d, f->dir_fd, "alink"), -ENOTDIR);
        assert_int_equal(cas_restore(f->cas, d, f->dir_fd, "../ws"), -EINVAL);
        assert_int_equal(cas_restore(f->cas, "sha256:x", f->dir_fd, "ws"), -EINVAL);
        assert_int_equal(cas_restore(f->cas, ZERO_DIGEST, f->dir_fd, "ws"), -ENOENT);
        reopen_ws(f);
        after = listing(f->ws_fd);
        assert_string_equal(before, after);
        free(after);
        free(before);
        free(d);
}

static void test_restore_crash(void **state) {
        Fixture *f = *state;
        char *d_old, *d_new, *l_old, *l_new, *now;
        CrashHook h;

        make_crash_workspace(f->ws_fd, false, false);
        d_old = snapshot_ok(f, "a", 1, NULL);
        l_old = listing(f->ws_fd);
        make_crash_workspace(f->ws_fd, true, true);
        d_new = snapshot_ok(f, "b", 2, NULL);
        l_new = listing(f->ws_fd);
        assert_int_equal(cas_restore(f->cas, d_old, f->dir_fd, "ws"), 0);

        /* Crash once the new tree is built: the old one is still the workspace. */
        h = (CrashHook) { .fire_at = 0 };
        cas_set_crash_hook(f->cas, crash_hook, &h);
        assert_int_equal(cas_restore(f->cas, d_new, f->dir_fd, "ws"), -EINTR);
        assert_string_equal(h.seen, CAS_CRASH_RESTORE_BUILT ",");
        reopen_ws(f);
        now = listing(f->ws_fd);
        assert_string_equal(now, l_old);
        free(now);
        assert_int_equal(count_dir(f->dir_fd, "."), 3);        /* store, ws, and the leftover */

        /* Crash right after the swap: the new tree is the workspace, the old one lies beside it. */
        h = (CrashHook) { .fire_at = 1 };
        assert_int_equal(cas_restore(f->cas, d_new, f->dir_fd, "ws"), -EINTR);
        assert_string_equal(h.seen, CAS_CRASH_RESTORE_BUILT "," CAS_CRASH_RESTORE_EXCHANGED ",");
        reopen_ws(f);
        now = listing(f->ws_fd);
        assert_string_equal(now, l_new);
        free(now);
        assert_int_equal(count_dir(f->dir_fd, "."), 3);        /* the first leftover was removed */

        /* The next restore cleans up. */
        cas_set_crash_hook(f->cas, NULL, NULL);
        assert_int_equal(cas_restore(f->cas, d_old, f->dir_fd, "ws"), 0);
        reopen_ws(f);
        now = listing(f->ws_fd);
        assert_string_equal(now, l_old);
        free(now);
        assert_int_equal(count_dir(f->dir_fd, "."), 2);
        assert_fsck_ok(f);

        free(d_old);
        free(d_new);
        free(l_old);
        free(l_new);
}

/* ---------------------------------------------------------------------------------------------
 * gc and fsck. */

/* Snapshots e0..e4, each with "common" and its own "only". */
static void make_history(Fixture *f, char *digests[5]) {
        for (unsigned i = 0; i < 5; i++) {
                char name[32], content[64];

                write_str(f->ws_fd, "common", "common to all\n");
                if (i > 0) {
                        (void) snprintf(name, sizeof(name), "only-%u", i - 1);
                        assert_int_equal(unlinkat(f->ws_fd, name, 0), 0);
                }
                (void) snprintf(name, sizeof(name), "only-%u", i);
                (void) snprintf(content, sizeof(content), "only in snapshot %u\n", i);
                write_str(f->ws_fd, name, content);
                (void) snprintf(name, sizeof(name), "e%u", i);
                digests[i] = snapshot_ok(f, name, 100 + i, NULL);
        }
}

/* cas_ref_add(): a ref of its own keeps an old tree (and its files) through the gc of the
 * workspace that made it; unknown trees and bad ids are refused. */
static void test_ref_add_pins(void **state) {
        Fixture *f = *state;
        char *digests[5], path[80];
        CasRef ref = {};
        int fd = -EBADF;
        uint64_t size;
        char d[72];

        make_history(f, digests);
        assert_int_equal(cas_ref_add(f->cas, "pin-1", "ws", digests[0], 500, 7), 0);
        assert_int_equal(cas_read_ref(f->cas, "pin-1", "ws", &ref), 0);
        assert_string_equal(ref.tree, digests[0]);
        assert_int_equal(ref.created_ms, 500);
        cas_ref_done(&ref);
        assert_int_equal(cas_ref_add(f->cas, "pin-2", "ws",
                                     "sha256:0000000000000000000000000000000000000000000000000000000000000000", 1, 0),
                         -ENOENT);
        assert_int_equal(cas_ref_add(f->cas, "../x", "ws", digests[0], 1, 0), -EINVAL);
        assert_int_equal(cas_ref_add(f->cas, "pin-2", "ws", "sha256:xyz", 1, 0), -EINVAL);

        /* keep 1: ws keeps e4 only, but the pin keeps e0's tree and its file. */
        assert_int_equal(cas_gc(f->cas, 1, NULL), 0);
        object_path(digests[0], path);
        assert_int_equal(faccessat(f->store_fd, path, F_OK, 0), 0);
        object_path(digests[1], path);
        assert_int_equal(faccessat(f->store_fd, path, F_OK, 0), -1);
        assert_int_equal(cas_open_file(f->cas, digests[0], "only-0", &fd, &size, d), 0);
        assert_true(fd >= 0);
        close(fd);
        for (unsigned i = 0; i < 5; i++)
                free(digests[i]);
}

static void test_gc(void **state) {
        Fixture *f = *state;
        char *digests[5], path[80];
        CasRef *refs = NULL;
        size_t n = 0;
        uint64_t freed = 0;
        int lock;

        make_history(f, digests);
        assert_int_equal(count_objects(f), 11);        /* common + 5 × (only + root tree) */

        /* keep 0: nothing goes but tmp/ garbage. */
        write_str(f->store_fd, "tmp/stray", "left by a crash");
        assert_int_equal(cas_gc(f->cas, 0, &freed), 0);
        assert_int_equal(freed, strlen("left by a crash"));
        assert_int_equal(count_dir(f->store_fd, "tmp"), 0);
        assert_int_equal(count_objects(f), 11);

        /* Another workspace shares "common" and an old root tree's contents. */
        assert_int_equal(mkdirat(f->dir_fd, "ws2", 0700), 0);
        {
                int w2 = openat(f->dir_fd, "ws2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                write_str(w2, "common", "common to all\n");
                write_str(w2, "only-0", "only in snapshot 0\n");
                assert_int_equal(cas_snapshot(f->cas, w2, "ws2", "x", 1, NULL, NULL), 0);
                close(w2);
        }
        assert_int_equal(count_objects(f), 11);        /* same contents, same tree as e0 */

        /* keep 2: e4, e3 stay; e0's objects stay too, ws2 still names them. */
        assert_int_equal(cas_gc(f->cas, 2, &freed), 0);
        assert_true(freed > 0);
        assert_int_equal(cas_list_refs(f->cas, "ws", &refs, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(refs[0].exec_id, "e4");
        assert_string_equal(refs[1].exec_id, "e3");
        cas_refs_free(refs, n);
        assert_int_equal(count_objects(f), 7);         /* common, only-0/3/4, trees 0/3/4 */
        for (unsigned i = 0; i < 5; i++) {
                object_path(digests[i], path);
                assert_int_equal(faccessat(f->store_fd, path, F_OK, 0) == 0, i == 0 || i >= 3);
        }
        assert_fsck_ok(f);

        /* Files of kept refs are all readable. */
        for (unsigned i = 3; i < 5; i++) {
                char name[32];
                int fd;
                uint64_t size;
                char dg[72];

                (void) snprintf(name, sizeof(name), "only-%u", i);
                assert_int_equal(cas_open_file(f->cas, digests[i], name, &fd, &size, dg), 0);
                close(fd);
                assert_int_equal(cas_open_file(f->cas, digests[i], "common", &fd, &size, dg), 0);
                close(fd);
        }

        /* gc is refused while another operation holds the store. */
        lock = openat(f->store_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(flock(lock, LOCK_SH), 0);
        assert_int_equal(cas_gc(f->cas, 1, NULL), -EBUSY);
        close(lock);

        /* gc crashing at each point: refs kept stay complete. */
        for (unsigned i = 0;; i++) {
                CrashHook h = { .fire_at = i };
                int r;

                cas_set_crash_hook(f->cas, crash_hook, &h);
                r = cas_gc(f->cas, 1, NULL);
                cas_set_crash_hook(f->cas, NULL, NULL);
                assert_fsck_ok(f);
                if (r == 0)
                        break;
                assert_int_equal(r, -EINTR);
        }
        assert_int_equal(cas_list_refs(f->cas, "ws", &refs, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(refs[0].exec_id, "e4");
        cas_refs_free(refs, n);
        assert_int_equal(count_objects(f), 5);         /* common, only-0/4, trees 0/4 */

        for (unsigned i = 0; i < 5; i++)
                free(digests[i]);
}

static void test_fsck(void **state) {
        Fixture *f = *state;
        char *digests[5], *problem = NULL, hex[65], digest[80], path[80];
        int fd;

        make_history(f, digests);
        assert_fsck_ok(f);

        /* Same size, other content: only the full check notices. */
        sha256_hex("only in snapshot 2\n", strlen("only in snapshot 2\n"), hex);
        (void) snprintf(digest, sizeof(digest), "sha256:%s", hex);
        object_path(digest, path);
        assert_int_equal(fchmodat(f->store_fd, path, 0644, 0), 0);
        fd = openat(f->store_fd, path, O_WRONLY | O_CLOEXEC);
        assert_int_equal(pwrite(fd, "O", 1, 0), 1);
        close(fd);
        assert_int_equal(cas_fsck(f->cas, &problem), 0);
        assert_int_equal(cas_fsck_full(f->cas, &problem), -EUCLEAN);
        print_message("# %s\n", problem);
        assert_non_null(strstr(problem, "ref workspace/ws/e2"));
        assert_non_null(strstr(problem, "does not match"));
        free(problem);
        problem = NULL;

        /* A missing file object. */
        assert_int_equal(unlinkat(f->store_fd, path, 0), 0);
        assert_int_equal(cas_fsck(f->cas, &problem), -EUCLEAN);
        print_message("# %s\n", problem);
        assert_non_null(strstr(problem, "missing object"));
        free(problem);
        problem = NULL;
        /* ...which a new snapshot does not paper over silently: e2's tree still names it. */

        /* Drop e2 by hand; then a missing tree. */
        assert_int_equal(unlinkat(f->store_fd, "refs/workspace/ws/e2", 0), 0);
        assert_fsck_ok(f);
        object_path(digests[1], path);
        assert_int_equal(unlinkat(f->store_fd, path, 0), 0);
        assert_int_equal(cas_fsck(f->cas, &problem), -EUCLEAN);
        print_message("# %s\n", problem);
        assert_non_null(strstr(problem, "missing tree"));
        assert_non_null(strstr(problem, "ref workspace/ws/e1"));
        free(problem);
        problem = NULL;
        /* gc does not trip over a dangling ref (nothing to protect below it). */
        assert_int_equal(cas_gc(f->cas, 0, NULL), 0);
        assert_int_equal(unlinkat(f->store_fd, "refs/workspace/ws/e1", 0), 0);
        assert_fsck_ok(f);

        /* A malformed ref: fsck reports it, gc refuses to delete anything. */
        assert_int_equal(fchmodat(f->store_fd, "refs/workspace/ws/e3", 0644, 0), 0);
        write_str(f->store_fd, "refs/workspace/ws/e3", "{\"tree\":42}");
        assert_int_equal(cas_fsck(f->cas, &problem), -EUCLEAN);
        print_message("# %s\n", problem);
        assert_non_null(strstr(problem, "malformed"));
        free(problem);
        {
                size_t before = count_objects(f);

                assert_int_equal(cas_gc(f->cas, 1, NULL), -EIO);
                assert_int_equal(count_objects(f), before);
        }
        for (unsigned i = 0; i < 5; i++)
                free(digests[i]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_tree_format, setup, teardown),
                cmocka_unit_test_setup_teardown(test_determinism_and_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_strict_tree_decoding, setup, teardown),
                cmocka_unit_test_setup_teardown(test_identical_content_stored_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stat_cache, setup, teardown),
                cmocka_unit_test_setup_teardown(test_prepared_ref, setup, teardown),
                cmocka_unit_test_setup_teardown(test_symlinks_not_followed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_special_files_skipped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lookups, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_crash_points, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_crash_points_syncfs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restore, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restore_crash, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ref_add_pins, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fsck, setup, teardown),
        };

        /* e.g. TEST_CAS_FILTER='*crash*' to run a subset */
        if (getenv("TEST_CAS_FILTER"))
                cmocka_set_test_filter(getenv("TEST_CAS_FILTER"));
        return cmocka_run_group_tests(tests, NULL, NULL);
}
