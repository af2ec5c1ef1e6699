/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/workspace/ws-files.h: the hostile-name table, symlinks at every component, magic
 * links, FIFOs, sockets, devices, hard links, mount crossings, atomic writes, listings, removal,
 * and symlink races against a concurrent renaming process. Every resolution test runs twice:
 * with openat2 and with the component-by-component fallback (test hook), plus once more with
 * openat2 really answering ENOSYS (a seccomp filter in a child).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nettle/sha2.h>
#include <seccomp.h>

#include "util/macro.h"
#include "workspace/ws-files.h"

#define REGULAR "REGULAR"
#define SECRET "SECRET"

typedef struct State {
        char root[256];            /* mkdtemp dir: ws/ (the workspace) and outside/ */
        char ws[PATH_MAX];
        char out[PATH_MAX];
        int ws_fd;
        int out_fd;
        unsigned mode;                  /* ws_files_test_set() flags of this run */
} State;

static const unsigned mode_openat2 = 0;
static const unsigned mode_fallback = WS_TEST_NO_OPENAT2;
static const unsigned mode_named_tmp = WS_TEST_NO_TMPFILE;
static const unsigned mode_fallback_named_tmp = WS_TEST_NO_OPENAT2 | WS_TEST_NO_TMPFILE;

/* ---------------------------------------------------------------------------------------------
 * Helpers */

static void put_file(int dir_fd, const char *path, const char *content) {
        int fd = openat(dir_fd, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t n = strlen(content);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, n), (ssize_t) n);
        assert_int_equal(close(fd), 0);
}

/* The whole content of @fd from its current offset (at most @cap - 1 bytes), NUL-terminated. */
static char *slurp(int fd, size_t cap) {
        char *buf = calloc(1, cap);
        size_t n = 0;

        assert_non_null(buf);
        for (;;) {
                ssize_t k = read(fd, buf + n, cap - 1 - n);
                assert_true(k >= 0);
                n += (size_t) k;
                if (k == 0 || n == cap - 1)
                        break;
        }
        return buf;
}

/* Read @path of @dir_fd without any protection: what is really there (for checks only). */
static char *peek(int dir_fd, const char *path) {
        int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char *s;

        if (fd < 0)
                return NULL;
        s = slurp(fd, 4096);
        close(fd);
        return s;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f) {
        (void) st;
        (void) f;
        return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void rm_rf(const char *p) {
        (void) nftw(p, rm_cb, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* A sorted listing of everything below @path ("relpath type size" lines): what is on disk. */
static char **snap_lines;
static size_t snap_n;
static size_t snap_skip;

static int snap_cb(const char *p, const struct stat *st, int flag, struct FTW *f) {
        char *line;

        (void) flag;
        (void) f;
        if (asprintf(&line, "%s %o %lld", p + snap_skip, (unsigned) (st->st_mode & S_IFMT),
                     S_ISREG(st->st_mode) ? (long long) st->st_size : 0LL) < 0)
                return -1;
        snap_lines = realloc(snap_lines, (snap_n + 1) * sizeof(char *));
        snap_lines[snap_n++] = line;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static char *tree_snapshot(const char *path) {
        size_t len = 1;
        char *s;

        snap_lines = NULL;
        snap_n = 0;
        snap_skip = strlen(path);
        assert_int_equal(nftw(path, snap_cb, 64, FTW_PHYS), 0);
        qsort(snap_lines, snap_n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < snap_n; i++)
                len += strlen(snap_lines[i]) + 1;
        s = calloc(1, len);
        assert_non_null(s);
        for (size_t i = 0; i < snap_n; i++) {
                strcat(s, snap_lines[i]);
                strcat(s, "\n");
                free(snap_lines[i]);
        }
        free(snap_lines);
        snap_lines = NULL;
        return s;
}

static void assert_streq_free(char *got, const char *expected) {
        bool same = got && strcmp(got, expected) == 0;

        if (!same)
                print_error("got \"%s\", expected \"%s\"\n", got ?: "(null)", expected);
        free(got);
        assert_true(same);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000U + (uint64_t) ts.tv_nsec / 1000U;
}

/*
 * The fixture: a workspace full of traps.
 *   ws/file            "REGULAR"
 *   ws/dir/inner       "INNER"
 *   ws/%2e%2e/x        "PCT"        (a literal name; root/x holds the secret, should anything decode)
 *   ws/dev/null        "DEVNULL"    (just a path)
 *   ws/big             100 bytes
 *   ws/empty           0 bytes
 *   ws/link_secret  -> <root>/outside/secret
 *   ws/link_shadow  -> /etc/shadow
 *   ws/link_proc    -> /proc/self/root
 *   ws/link_rel     -> file          (benign, still refused)
 *   ws/link_dangling-> nowhere
 *   ws/dirlink      -> dir
 *   ws/dirlink_out  -> <root>/outside
 *   ws/dirlink_root -> /
 *   ws/fifo, ws/sock, ws/chardev (1:3, if mknod works)
 *   ws/hl_a, ws/hl_b   one inode; ws/hl_out = outside/hostfile
 */
static int setup(void **state) {
        unsigned mode = *state ? *(const unsigned *) *state : 0;
        const char *tmp = getenv("TMPDIR");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char buf[PATH_MAX + 64];
        State *s;
        int sock;

        s = calloc(1, sizeof(*s));
        assert_non_null(s);
        s->mode = mode;
        snprintf(s->root, sizeof(s->root), "%s/test-ws-files-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        assert_non_null(mkdtemp(s->root));
        snprintf(s->ws, sizeof(s->ws), "%s/ws", s->root);
        snprintf(s->out, sizeof(s->out), "%s/outside", s->root);
        assert_int_equal(mkdir(s->ws, 0700), 0);
        assert_int_equal(mkdir(s->out, 0700), 0);
        s->ws_fd = open(s->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        s->out_fd = open(s->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(s->ws_fd >= 0 && s->out_fd >= 0);

        put_file(s->out_fd, "secret", SECRET);
        put_file(s->out_fd, "hostfile", SECRET);
        put_file(s->out_fd, "f", SECRET);
        snprintf(buf, sizeof(buf), "%s/x", s->root);
        put_file(AT_FDCWD, buf, SECRET);

        put_file(s->ws_fd, "file", REGULAR);
        assert_int_equal(mkdirat(s->ws_fd, "dir", 0700), 0);
        put_file(s->ws_fd, "dir/inner", "INNER");
        assert_int_equal(mkdirat(s->ws_fd, "%2e%2e", 0700), 0);
        put_file(s->ws_fd, "%2e%2e/x", "PCT");
        assert_int_equal(mkdirat(s->ws_fd, "dev", 0700), 0);
        put_file(s->ws_fd, "dev/null", "DEVNULL");
        memset(buf, 'b', 100);
        buf[100] = '\0';
        put_file(s->ws_fd, "big", buf);
        put_file(s->ws_fd, "empty", "");

        snprintf(buf, sizeof(buf), "%s/secret", s->out);
        assert_int_equal(symlinkat(buf, s->ws_fd, "link_secret"), 0);
        assert_int_equal(symlinkat("/etc/shadow", s->ws_fd, "link_shadow"), 0);
        assert_int_equal(symlinkat("/proc/self/root", s->ws_fd, "link_proc"), 0);
        assert_int_equal(symlinkat("file", s->ws_fd, "link_rel"), 0);
        assert_int_equal(symlinkat("nowhere", s->ws_fd, "link_dangling"), 0);
        assert_int_equal(symlinkat("dir", s->ws_fd, "dirlink"), 0);
        assert_int_equal(symlinkat(s->out, s->ws_fd, "dirlink_out"), 0);
        assert_int_equal(symlinkat("/", s->ws_fd, "dirlink_root"), 0);

        assert_int_equal(mkfifoat(s->ws_fd, "fifo", 0600), 0);
        assert_true((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", s->ws) < sizeof(sa.sun_path));
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(sock >= 0);
        assert_int_equal(bind(sock, (struct sockaddr *) &sa, sizeof(sa)), 0);
        close(sock);
        (void) mknodat(s->ws_fd, "chardev", S_IFCHR | 0600, makedev(1, 3));   /* root only */

        put_file(s->ws_fd, "hl_a", REGULAR);
        assert_int_equal(linkat(s->ws_fd, "hl_a", s->ws_fd, "hl_b", 0), 0);
        assert_int_equal(linkat(s->out_fd, "hostfile", s->ws_fd, "hl_out", 0), 0);

        ws_files_test_set(mode);
        *state = s;
        return 0;
}

static int teardown(void **state) {
        State *s = *state;

        ws_files_test_set(0);
        close(s->ws_fd);
        close(s->out_fd);
        rm_rf(s->root);
        free(s);
        return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Path validation: the hostile-name table of SECURITY.md §5 and friends */

typedef struct PathCase {
        const char *path;
        size_t len;                     /* 0: strlen */
        int expected;
} PathCase;

static void test_path_table(void **state) {
        static const PathCase cases[] = {
                /* accepted */
                { "a", 0, 0 },
                { "a/b/c.txt", 0, 0 },
                { "dev/null", 0, 0 },                   /* a path inside the workspace */
                { "CON", 0, 0 },
                { "nul.txt", 0, 0 },
                { "%2e%2e", 0, 0 },                     /* literal: never decoded here */
                { "%2e%2e/x", 0, 0 },
                { "%2E%2E%2Fetc", 0, 0 },
                { "a%20b.pdf", 0, 0 },
                { "100%", 0, 0 },
                { ".hidden", 0, 0 },
                { "a/.b", 0, 0 },
                { "x..y", 0, 0 },
                { "a.", 0, 0 },
                { "a..", 0, 0 },
                { ".sandbox", 0, 0 },
                { ".sandbox-upload", 0, 0 },            /* the reserved prefix has a trailing '-' */
                { "caf\xc3\xa9", 0, 0 },
                { "\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80", 0, 0 },
                { "a b", 0, 0 },
                { "-rf", 0, 0 },
                { "~", 0, 0 },
                { "a:b", 0, 0 },
                /* traversal and absolute paths */
                { "../x", 0, -EINVAL },
                { "..", 0, -EINVAL },
                { ".", 0, -EINVAL },
                { "/abs", 0, -EINVAL },
                { "/", 0, -EINVAL },
                { "/etc/shadow", 0, -EINVAL },
                { "a/../../x", 0, -EINVAL },
                { "a/..", 0, -EINVAL },
                { "a/.", 0, -EINVAL },
                { "./a", 0, -EINVAL },
                { "a/./b", 0, -EINVAL },
                { "..x", 0, -EINVAL },
                { "...", 0, -EINVAL },
                { "a/..b", 0, -EINVAL },
                { "..\\x", 0, -EINVAL },
                { "a\\b", 0, -EINVAL },
                { "\\\\host\\share", 0, -EINVAL },
                { "C:\\x", 0, -EINVAL },
                /* separators */
                { "", 0, -EINVAL },
                { "a/", 0, -EINVAL },
                { "a//b", 0, -EINVAL },
                { "//a", 0, -EINVAL },
                /* reserved temp names */
                { ".sandbox-upload-", 0, -EINVAL },
                { ".sandbox-upload-abc123", 0, -EINVAL },
                { "d/.sandbox-upload-x", 0, -EINVAL },
                /* control bytes and NUL */
                { "a\nb", 0, -EINVAL },
                { "a\rb", 0, -EINVAL },
                { "a\tb", 0, -EINVAL },
                { "\x01", 0, -EINVAL },
                { "\x1b[31m", 0, -EINVAL },
                { "a\x7f", 0, -EINVAL },
                { "a\0b", 3, -EINVAL },
                { "..\0/x", 5, -EINVAL },
                { "file\0", 5, -EINVAL },
                /* bad UTF-8: overlong "..", overlong '/', surrogates, stray bytes, truncation */
                { "\xc0\xae\xc0\xae", 0, -EINVAL },
                { "\xc0\xae\xc0\xae/x", 0, -EINVAL },
                { "\xc0\xae\xc0\xae\xc0\xafx", 0, -EINVAL },
                { "a\xc0\xafx", 0, -EINVAL },
                { "\xe0\x80\xae", 0, -EINVAL },
                { "\xf0\x80\x80\xae", 0, -EINVAL },
                { "\xed\xa0\x80", 0, -EINVAL },
                { "\xf4\x90\x80\x80", 0, -EINVAL },
                { "\xff", 0, -EINVAL },
                { "\x80", 0, -EINVAL },
                { "caf\xc3", 0, -EINVAL },
                { "\xc3(", 0, -EINVAL },
        };

        (void) state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const PathCase *c = &cases[i];
                size_t n = c->len ?: strlen(c->path);
                int r = ws_path_validate_n(c->path, n, false);

                if (r != c->expected)
                        print_error("case %zu: ws_path_validate_n(\"%s\") = %d, expected %d\n", i, c->path, r,
                                    c->expected);
                assert_int_equal(r, c->expected);
                if (c->len == 0)
                        assert_int_equal(ws_path_validate(c->path, false), c->expected);
        }

        assert_int_equal(ws_path_validate(NULL, true), -EINVAL);
        assert_int_equal(ws_path_validate_n(NULL, 0, true), -EINVAL);
        assert_int_equal(ws_path_validate("", true), 0);
        assert_int_equal(ws_path_validate("", false), -EINVAL);
        assert_int_equal(ws_path_validate("/", true), -EINVAL);
}

static void test_path_lengths(void **state) {
        char *p = malloc(WS_PATH_MAX + 2);

        (void) state;
        assert_non_null(p);

        /* One component of exactly NAME_MAX bytes, and one more. */
        memset(p, 'n', WS_NAME_MAX);
        p[WS_NAME_MAX] = '\0';
        assert_int_equal(ws_path_validate(p, false), 0);
        p[WS_NAME_MAX] = 'n';
        p[WS_NAME_MAX + 1] = '\0';
        assert_int_equal(ws_path_validate(p, false), -ENAMETOOLONG);

        /* Multibyte: 127 "é" = 254 bytes fine, 128 = 256 bytes too long (bytes count, not chars). */
        for (size_t i = 0; i < 128; i++)
                memcpy(p + 2 * i, "\xc3\xa9", 2);
        p[254] = '\0';
        assert_int_equal(ws_path_validate(p, false), 0);
        p[254] = '\xc3';
        p[256] = '\0';
        assert_int_equal(ws_path_validate(p, false), -ENAMETOOLONG);

        /* A path of exactly WS_PATH_MAX bytes ("a/a/.../a"), then one more byte. */
        for (size_t i = 0; i < WS_PATH_MAX; i++)
                p[i] = i % 2 ? '/' : 'a';
        p[WS_PATH_MAX] = '\0';
        assert_int_equal(ws_path_validate(p, false), 0);
        p[WS_PATH_MAX] = '/';
        p[WS_PATH_MAX + 1] = '\0';
        assert_int_equal(ws_path_validate(p, false), -ENAMETOOLONG);
        p[WS_PATH_MAX] = 'a';
        assert_int_equal(ws_path_validate(p, false), -ENAMETOOLONG);
        assert_int_equal(ws_path_validate_n(p, WS_PATH_MAX + 1, false), -ENAMETOOLONG);

        /* Long components inside a path. */
        memset(p, 'c', 300);
        memcpy(p, "ok/", 3);
        p[300] = '\0';
        assert_int_equal(ws_path_validate(p, false), -ENAMETOOLONG);
        free(p);
}

/* ---------------------------------------------------------------------------------------------
 * Reads: the same table for openat2, its fallback, and a kernel whose openat2 says ENOSYS */

typedef struct ReadCase {
        const char *path;
        uint64_t max;
        int expected;
        int alt;                        /* also acceptable (0: none) */
        const char *content;            /* on success */
} ReadCase;

#define BIG (1ULL << 20)

static const ReadCase read_cases[] = {
        { "file", BIG, 0, 0, REGULAR },
        { "dir/inner", BIG, 0, 0, "INNER" },
        { "%2e%2e/x", BIG, 0, 0, "PCT" },
        { "dev/null", BIG, 0, 0, "DEVNULL" },
        { "empty", 0, 0, 0, "" },
        { "big", 100, 0, 0, NULL },
        { "big", 99, -EFBIG, 0, NULL },
        { "file", 0, -EFBIG, 0, NULL },
        { "dir", BIG, -EISDIR, 0, NULL },
        /* symlinks at every position, to anywhere */
        { "link_secret", BIG, -ELOOP, 0, NULL },
        { "link_shadow", BIG, -ELOOP, 0, NULL },
        { "link_proc", BIG, -ELOOP, 0, NULL },
        { "link_proc/etc/passwd", BIG, -ELOOP, 0, NULL },
        { "link_proc/proc/self/environ", BIG, -ELOOP, 0, NULL },
        { "link_rel", BIG, -ELOOP, 0, NULL },
        { "link_dangling", BIG, -ELOOP, 0, NULL },
        { "dirlink/inner", BIG, -ELOOP, 0, NULL },
        { "dirlink_out/secret", BIG, -ELOOP, 0, NULL },
        { "dirlink_root/etc/passwd", BIG, -ELOOP, 0, NULL },
        { "dirlink_root/etc/shadow", BIG, -ELOOP, 0, NULL },
        /* special files: refused at once, never blocking */
        { "fifo", BIG, -EBADFD, 0, NULL },
        { "sock", BIG, -EBADFD, 0, NULL },
        { "chardev", BIG, -EBADFD, -ENOENT, NULL },     /* ENOENT where mknod was not allowed */
        /* hard links */
        { "hl_a", BIG, -EMLINK, 0, NULL },
        { "hl_b", BIG, -EMLINK, 0, NULL },
        { "hl_out", BIG, -EMLINK, 0, NULL },
        /* missing, wrong type */
        { "missing", BIG, -ENOENT, 0, NULL },
        { "missing/x", BIG, -ENOENT, 0, NULL },
        { "file/x", BIG, -ENOTDIR, 0, NULL },
        { "fifo/x", BIG, -ENOTDIR, 0, NULL },
        /* hostile names never reach the file system */
        { "../outside/secret", BIG, -EINVAL, 0, NULL },
        { "../x", BIG, -EINVAL, 0, NULL },
        { "/etc/passwd", BIG, -EINVAL, 0, NULL },
        { "dir/../../x", BIG, -EINVAL, 0, NULL },
        { "..\\x", BIG, -EINVAL, 0, NULL },
        { "\xc0\xae\xc0\xae/x", BIG, -EINVAL, 0, NULL },
        { ".", BIG, -EINVAL, 0, NULL },
        { "", BIG, -EINVAL, 0, NULL },
};

/* Run the table; return the number of mismatches (callable in a forked child: no cmocka). */
static unsigned read_table_failures(State *s) {
        unsigned failures = 0;

        for (size_t i = 0; i < sizeof(read_cases) / sizeof(read_cases[0]); i++) {
                const ReadCase *c = &read_cases[i];
                struct stat st = {};
                int fd = -EBADF, r;
                uint64_t t0 = now_usec();

                r = ws_file_open_read(s->ws_fd, c->path, c->max, &fd, &st);
                if (now_usec() - t0 > 2 * 1000000U) {
                        fprintf(stderr, "# read '%s' took %" PRIu64 " µs\n", c->path, now_usec() - t0);
                        failures++;
                }
                if (r != c->expected && !(c->alt != 0 && r == c->alt)) {
                        fprintf(stderr, "# mode %u: read '%s' = %d (%s), expected %d\n", s->mode, c->path, r,
                                strerror(-r), c->expected);
                        failures++;
                }
                if (r < 0) {
                        if (fd != -EBADF) {
                                fprintf(stderr, "# read '%s' failed but set the fd\n", c->path);
                                failures++;
                        }
                        continue;
                }
                int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
                if (fl < 0 || (fl & O_NONBLOCK) || (fl & O_ACCMODE) != O_RDONLY || !(fdfl & FD_CLOEXEC) ||
                    !S_ISREG(st.st_mode)) {
                        fprintf(stderr, "# read '%s': flags %#x/%#x, mode %o\n", c->path, fl, fdfl, st.st_mode);
                        failures++;
                }
                if (c->content) {
                        char buf[256] = {};
                        ssize_t k = read(fd, buf, sizeof(buf) - 1);
                        if (k < 0 || strcmp(buf, c->content) != 0) {
                                fprintf(stderr, "# read '%s' gave \"%s\"\n", c->path, buf);
                                failures++;
                        }
                }
                close(fd);
        }
        return failures;
}

static void test_read_table(void **state) {
        alarm(60);                      /* a FIFO that blocks fails the test instead of hanging it */
        assert_int_equal(read_table_failures(*state), 0);
        alarm(0);
}

/* openat2 really missing: a seccomp filter answers ENOSYS in a child; the table must still hold. */
static void test_read_table_enosys(void **state) {
        State *s = *state;
        int status;
        pid_t pid;

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
                unsigned f;

                alarm(60);
                if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0 ||
                    seccomp_load(ctx) < 0)
                        _exit(200);
                seccomp_release(ctx);
                if (syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0) >= 0 || errno != ENOSYS)
                        _exit(201);
                ws_files_test_set(0);
                f = read_table_failures(s);
                /* The writer resolves the same way. */
                WsWriter *w = NULL;
                if (ws_writer_begin(s->ws_fd, "dirlink_out/x", 10, true, &w) != -ELOOP)
                        f++;
                if (ws_writer_begin(s->ws_fd, "n1/n2/f", 10, true, &w) < 0 || ws_writer_write(w, "hi", 2) < 0 ||
                    ws_writer_commit(w, NULL) < 0)
                        f++;
                w = ws_writer_free(w);
                _exit(f > 100 ? 100 : (int) f);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                print_error("child status %#x\n", status);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_streq_free(peek(s->ws_fd, "n1/n2/f"), "hi");
}

static void test_fifo_is_prompt(void **state) {
        State *s = *state;
        uint64_t t0;
        int fd = -EBADF;

        alarm(10);
        t0 = now_usec();
        for (int i = 0; i < 100; i++)
                assert_int_equal(ws_file_open_read(s->ws_fd, "fifo", BIG, &fd, NULL), -EBADFD);
        assert_true(now_usec() - t0 < 5 * 1000000U);
        assert_int_equal(fd, -EBADF);
        /* A FIFO with a writer attached and data pending is refused the same way. */
        int wfd = openat(s->ws_fd, "fifo", O_RDWR | O_CLOEXEC);
        assert_true(wfd >= 0);
        assert_int_equal(write(wfd, "x", 1), 1);
        assert_int_equal(ws_file_open_read(s->ws_fd, "fifo", BIG, &fd, NULL), -EBADFD);
        close(wfd);
        alarm(0);
}

/* A sandbox holding a write lease on its file: the open must not wait lease-break-time (45 s by
 * default) for the holder to give it up; O_NONBLOCK turns it into -EWOULDBLOCK at once. */
static void test_lease_does_not_block(void **state) {
        State *s = *state;
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        int lfd, fd = -EBADF;
        uint64_t t0;

        assert_int_equal(sigaction(SIGIO, &ign, &old), 0);     /* the break notice comes to us */
        put_file(s->ws_fd, "leased", REGULAR);
        lfd = openat(s->ws_fd, "leased", O_RDWR | O_CLOEXEC);
        assert_true(lfd >= 0);
        if (fcntl(lfd, F_SETLEASE, F_WRLCK) < 0) {
                print_message("# F_SETLEASE: %s; lease case not run\n", strerror(errno));
                close(lfd);
                assert_int_equal(sigaction(SIGIO, &old, NULL), 0);
                return;
        }
        alarm(10);
        t0 = now_usec();
        assert_int_equal(ws_file_open_read(s->ws_fd, "leased", BIG, &fd, NULL), -EWOULDBLOCK);
        assert_true(now_usec() - t0 < 2 * 1000000U);
        alarm(0);
        assert_int_equal(fd, -EBADF);
        (void) fcntl(lfd, F_SETLEASE, F_UNLCK);
        close(lfd);
        assert_int_equal(ws_file_open_read(s->ws_fd, "leased", BIG, &fd, NULL), 0);
        close(fd);
        assert_int_equal(sigaction(SIGIO, &old, NULL), 0);
}

/* /proc as the "workspace": every magic link is refused (openat2 RESOLVE_NO_MAGICLINKS; in the
 * fallback they are symlinks to O_PATH|O_NOFOLLOW). */
static void test_magic_links(void **state) {
        static const char *const paths[] = {
                "root/etc/passwd", "root", "cwd/x", "exe", "fd/0", "fd/1", "fd/2", "map_files/x",
                "self/root/etc/passwd", "thread-self/root/etc/passwd",
        };
        State *s = *state;
        int proc_fd, self_fd, fd = -EBADF, r;

        proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        self_fd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(proc_fd >= 0 && self_fd >= 0);
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                int dfd = strneq(paths[i], "self", 4) || strneq(paths[i], "thread", 6) ? proc_fd : self_fd;

                r = ws_file_open_read(dfd, paths[i], BIG, &fd, NULL);
                if (r != -ELOOP && r != -ENOENT)
                        print_error("mode %u: /proc '%s' = %d\n", s->mode, paths[i], r);
                assert_true(r == -ELOOP || (r == -ENOENT && strneq(paths[i], "map_files", 9)));
                r = ws_open_beneath(dfd, paths[i], O_PATH);
                assert_true(r == -ELOOP || (r == -ENOENT && strneq(paths[i], "map_files", 9)));
        }
        char fdname[32];
        snprintf(fdname, sizeof(fdname), "fd/%i", s->ws_fd);
        assert_int_equal(ws_file_open_read(self_fd, fdname, BIG, &fd, NULL), -ELOOP);
        assert_int_equal(ws_open_beneath(self_fd, fdname, O_PATH | O_DIRECTORY), -ELOOP);
        assert_int_equal(ws_list_dir(self_fd, fdname, &(WsEntry *) { NULL }, &(size_t) { 0 }), -ELOOP);

        /* A magic link planted in the workspace is an ordinary symlink there: refused. */
        assert_int_equal(symlinkat("/proc/self/fd/0", s->ws_fd, "magic"), 0);
        assert_int_equal(ws_file_open_read(s->ws_fd, "magic", BIG, &fd, NULL), -ELOOP);
        close(proc_fd);
        close(self_fd);
}

typedef struct OpenCase {
        const char *path;
        int flags;
        int expected;           /* 0 = an fd */
} OpenCase;

static void test_open_beneath_table(void **state) {
        static const OpenCase cases[] = {
                { "", O_RDONLY | O_DIRECTORY, 0 },
                { "dir", O_RDONLY | O_DIRECTORY, 0 },
                { "dir", O_PATH | O_DIRECTORY, 0 },
                { "dir", O_PATH, 0 },
                { "fifo", O_PATH, 0 },
                { "file", O_RDONLY | O_DIRECTORY, -ENOTDIR },
                { "file", O_PATH | O_DIRECTORY, -ENOTDIR },
                { "dir/inner", O_PATH | O_DIRECTORY, -ENOTDIR },
                { "dirlink", O_RDONLY | O_DIRECTORY, -ELOOP },
                { "dirlink", O_PATH | O_DIRECTORY, -ELOOP },
                { "dirlink", O_PATH, -ELOOP },
                { "link_rel", O_PATH | O_NOFOLLOW, -ELOOP },
                { "link_rel", O_RDONLY, -ELOOP },
                { "dirlink_out", O_PATH | O_DIRECTORY | O_NOFOLLOW, -ELOOP },
                { "dirlink_root/etc", O_PATH | O_DIRECTORY, -ELOOP },
                { "missing", O_PATH | O_DIRECTORY, -ENOENT },
                { "x", O_CREAT | O_WRONLY, -EINVAL },
                { "x", O_TMPFILE | O_WRONLY, -EINVAL },
                { "../x", O_PATH, -EINVAL },
        };
        State *s = *state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int r = ws_open_beneath(s->ws_fd, cases[i].path, cases[i].flags);

                if ((cases[i].expected == 0) != (r >= 0) || (r < 0 && r != cases[i].expected))
                        print_error("mode %u: open '%s' %#x = %d, expected %d\n", s->mode, cases[i].path,
                                    cases[i].flags, r, cases[i].expected);
                if (cases[i].expected == 0) {
                        assert_true(r >= 0);
                        assert_true(fcntl(r, F_GETFD) & FD_CLOEXEC);
                        close(r);
                } else
                        assert_int_equal(r, cases[i].expected);
        }
        assert_int_equal(ws_open_beneath(-EBADF, "x", O_PATH), -EINVAL);
        assert_int_equal(ws_open_beneath(s->ws_fd, NULL, O_PATH), -EINVAL);
}

/* Mount points inside the workspace (a tmpfs and a bind mount of the same fs) are not crossed. */
static void test_mount_crossing(void **state) {
        State *s = *state;
        int status;
        pid_t pid;

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char mnt[PATH_MAX + 16], bind_src[PATH_MAX + 16], bind_dst[PATH_MAX + 16];
                static const unsigned modes[] = { 0, WS_TEST_NO_OPENAT2 };
                unsigned f = 0;

                alarm(60);
                snprintf(mnt, sizeof(mnt), "%s/mnt", s->ws);
                snprintf(bind_src, sizeof(bind_src), "%s/dir", s->ws);
                snprintf(bind_dst, sizeof(bind_dst), "%s/bind", s->ws);
                if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
                    mkdir(mnt, 0700) < 0 || mkdir(bind_dst, 0700) < 0 ||
                    mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0 ||
                    mount(bind_src, bind_dst, "none", MS_BIND, NULL) < 0)
                        _exit(77);
                /* An fd opened before unshare() still walks the old namespace's mounts. */
                close(s->ws_fd);
                s->ws_fd = open(s->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int fd = openat(s->ws_fd, "mnt/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd < 0)
                        _exit(78);
                close(fd);
                for (size_t m = 0; m < 2; m++) {
                        WsWriter *w = NULL;
                        WsEntry *e = NULL;
                        size_t n = 0;

                        ws_files_test_set(modes[m]);
#define EXPECT_XDEV(expr) do {                                                           \
                        int _r = (expr);                                                 \
                        if (_r != -EXDEV) {                                              \
                                fprintf(stderr, "# mode %u: %s = %d\n", modes[m], #expr, _r); \
                                f++;                                                     \
                        }                                                                \
                } while (0)
                        EXPECT_XDEV(ws_file_open_read(s->ws_fd, "mnt/f", BIG, &fd, NULL));
                        EXPECT_XDEV(ws_file_open_read(s->ws_fd, "bind/inner", BIG, &fd, NULL));
                        EXPECT_XDEV(ws_open_beneath(s->ws_fd, "mnt", O_PATH));
                        EXPECT_XDEV(ws_open_beneath(s->ws_fd, "bind", O_PATH | O_DIRECTORY));
                        EXPECT_XDEV(ws_list_dir(s->ws_fd, "bind", &e, &n));
                        EXPECT_XDEV(ws_writer_begin(s->ws_fd, "mnt/new", 10, false, &w));
                        EXPECT_XDEV(ws_writer_begin(s->ws_fd, "bind/new", 10, true, &w));
                        EXPECT_XDEV(ws_remove(s->ws_fd, "mnt/f"));
#undef EXPECT_XDEV
                        if (f)
                                fprintf(stderr, "# mode %u: %u mount crossings not refused\n", modes[m], f);
                }
                (void) umount2(bind_dst, MNT_DETACH);
                (void) umount2(mnt, MNT_DETACH);
                _exit((int) f);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 77)
                skip();                 /* not root: no mount namespace */
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Digests */

static void test_sha256(void **state) {
        static const uint8_t abc[32] = {
                0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
        };
        static const uint8_t empty[32] = {
                0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
                0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
        };
        State *s = *state;
        uint8_t d[32];
        char *h = NULL;
        int fd = -EBADF;

        put_file(s->ws_fd, "abc", "abc");
        assert_int_equal(ws_file_open_read(s->ws_fd, "abc", BIG, &fd, NULL), 0);
        assert_int_equal(lseek(fd, 1, SEEK_SET), 1);
        assert_int_equal(ws_file_sha256(fd, 3, d), 0);
        assert_memory_equal(d, abc, 32);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 1);            /* pread: offset untouched */
        assert_int_equal(ws_file_sha256(fd, 2, d), -EFBIG);
        close(fd);

        assert_int_equal(ws_file_open_read(s->ws_fd, "empty", 0, &fd, NULL), 0);
        assert_int_equal(ws_file_sha256(fd, 0, d), 0);
        assert_memory_equal(d, empty, 32);
        close(fd);

        assert_int_equal(ws_file_sha256(-1, 10, d), -EBADF);

        assert_int_equal(ws_repr_digest(abc, &h), 0);
        assert_streq_free(h, "sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:");
        assert_int_equal(ws_repr_digest(empty, &h), 0);
        assert_streq_free(h, "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:");
}

/* A file larger than the pread buffer, hashed in pieces. */
static void test_sha256_large(void **state) {
        State *s = *state;
        size_t n = 300 * 1024 + 7;
        uint8_t *data = malloc(n), d[32], ref[32];
        struct sha256_ctx ctx;
        int fd;

        assert_non_null(data);
        for (size_t i = 0; i < n; i++)
                data[i] = (uint8_t) (i * 131 + 7);
        fd = openat(s->ws_fd, "large", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, n), (ssize_t) n);
        close(fd);
        sha256_init(&ctx);
        sha256_update(&ctx, n, data);
        sha256_digest(&ctx, 32, ref);

        assert_int_equal(ws_file_open_read(s->ws_fd, "large", n, &fd, NULL), 0);
        assert_int_equal(ws_file_sha256(fd, n, d), 0);
        assert_memory_equal(d, ref, 32);
        assert_int_equal(ws_file_sha256(fd, n - 1, d), -EFBIG);
        close(fd);
        free(data);
}

/* ---------------------------------------------------------------------------------------------
 * Atomic writes (each test runs with O_TMPFILE and with the named temporary file) */

static void sha_of(const char *p, size_t n, uint8_t ret[32]) {
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, n, (const uint8_t *) p);
        sha256_digest(&ctx, 32, ret);
}

static void test_write_new(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        uint8_t d[32], ref[32];
        char *before, *during;
        struct stat st;
        int fd = -EBADF;

        before = tree_snapshot(s->ws);
        assert_int_equal(ws_writer_begin(s->ws_fd, "new.txt", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "hello ", 6), 0);
        assert_int_equal(ws_writer_write(w, "", 0), 0);
        assert_int_equal(ws_writer_write(w, "world", 5), 0);
        assert_int_equal(ws_writer_written(w), 11);

        /* Not visible before the commit. */
        assert_int_equal(ws_file_open_read(s->ws_fd, "new.txt", BIG, &fd, NULL), -ENOENT);
        during = tree_snapshot(s->ws);
        if (s->mode & WS_TEST_NO_TMPFILE)
                assert_non_null(strstr(during, "/" WS_UPLOAD_TMP_PREFIX));
        else
                assert_string_equal(during, before);            /* O_TMPFILE: not even a name */
        free(during);

        assert_int_equal(ws_writer_commit(w, d), 0);
        sha_of("hello world", 11, ref);
        assert_memory_equal(d, ref, 32);
        assert_int_equal(ws_writer_commit(w, d), -EALREADY);
        assert_int_equal(ws_writer_write(w, "x", 1), -EALREADY);
        w = ws_writer_free(w);

        assert_int_equal(fstatat(s->ws_fd, "new.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_nlink, 1);
        assert_int_equal(st.st_mode & 0077, 0);
        assert_streq_free(peek(s->ws_fd, "new.txt"), "hello world");
        /* Exactly one new entry; no temporary name left. */
        during = tree_snapshot(s->ws);
        assert_null(strstr(during, WS_UPLOAD_TMP_PREFIX));
        assert_non_null(strstr(during, "/new.txt "));
        free(during);
        free(before);
}

static void test_write_replace_atomic(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        int old_fd = -EBADF, fd = -EBADF;
        char *c;

        assert_int_equal(ws_writer_begin(s->ws_fd, "file", 1 << 20, false, &w), 0);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(ws_writer_write(w, "NEWCONTENT", 10), 0);

        /* A reader before the commit sees the whole old file, never a partial new one. */
        assert_int_equal(ws_file_open_read(s->ws_fd, "file", BIG, &old_fd, NULL), 0);
        c = slurp(old_fd, 1 << 16);
        assert_streq_free(c, REGULAR);
        assert_int_equal(lseek(old_fd, 0, SEEK_SET), 0);

        assert_int_equal(ws_writer_commit(w, NULL), 0);
        w = ws_writer_free(w);

        /* The old reader keeps the old inode; a new reader gets the whole new content. */
        assert_streq_free(slurp(old_fd, 1 << 16), REGULAR);
        close(old_fd);
        assert_int_equal(ws_file_open_read(s->ws_fd, "file", BIG, &fd, NULL), 0);
        c = slurp(fd, 1 << 16);
        assert_int_equal(strlen(c), 10000);
        assert_true(strneq(c, "NEWCONTENTNEWCONTENT", 20));
        free(c);
        close(fd);
}

/* Without replace: an existing target (file or directory) stays, nothing is left; a free name
 * is taken. The running hash and the mode asked for come through. */
static void test_write_noreplace(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        uint8_t d[32], ref[32];
        char *before, *after;
        struct stat st;

        before = tree_snapshot(s->ws);
        assert_int_equal(ws_writer_begin(s->ws_fd, "file", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "other", 5), 0);
        assert_int_equal(ws_writer_commit_noreplace(w, NULL), -EEXIST);
        assert_int_equal(ws_writer_commit(w, NULL), -EEXIST);   /* spent */
        w = ws_writer_free(w);
        assert_streq_free(peek(s->ws_fd, "file"), REGULAR);
        assert_int_equal(ws_writer_begin(s->ws_fd, "dir2", 100, false, &w), 0);
        w = ws_writer_free(w);
        after = tree_snapshot(s->ws);
        assert_string_equal(after, before);
        free(after);
        free(before);

        assert_int_equal(ws_writer_begin(s->ws_fd, "fresh.sh", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "#!/bin/sh\n", 10), 0);
        ws_writer_sha256(w, d);
        sha_of("#!/bin/sh\n", 10, ref);
        assert_memory_equal(d, ref, 32);
        assert_int_equal(ws_writer_write(w, "true\n", 5), 0);
        assert_int_equal(ws_writer_chmod(w, 01700), -EINVAL);
        assert_int_equal(ws_writer_chmod(w, 0700), 0);
        assert_int_equal(ws_writer_commit_noreplace(w, d), 0);
        sha_of("#!/bin/sh\ntrue\n", 15, ref);
        assert_memory_equal(d, ref, 32);
        assert_int_equal(ws_writer_chmod(w, 0600), -EALREADY);
        w = ws_writer_free(w);
        assert_int_equal(fstatat(s->ws_fd, "fresh.sh", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        assert_streq_free(peek(s->ws_fd, "fresh.sh"), "#!/bin/sh\ntrue\n");
}

static void test_write_abort(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        char *before, *after;

        before = tree_snapshot(s->root);

        assert_int_equal(ws_writer_begin(s->ws_fd, "aborted", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "partial", 7), 0);
        ws_writer_abort(w);
        ws_writer_abort(w);                             /* idempotent */
        assert_int_equal(ws_writer_write(w, "x", 1), -ECANCELED);
        assert_int_equal(ws_writer_commit(w, NULL), -ECANCELED);
        w = ws_writer_free(w);

        /* Freed without commit (a dropped connection): the same. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "file", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "partial", 7), 0);
        w = ws_writer_free(w);

        /* Created parents are removed too, existing ones kept. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "dir/n1/n2/n3/f", 100, true, &w), 0);
        assert_int_equal(faccessat(s->ws_fd, "dir/n1/n2/n3", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(ws_writer_write(w, "partial", 7), 0);
        w = ws_writer_free(w);
        assert_int_equal(ws_writer_begin(s->ws_fd, "m1/m2/f", 100, true, &w), 0);
        ws_writer_abort(w);
        w = ws_writer_free(w);

        /* A failed begin makes nothing. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "dir/inner/x/y", 100, true, &w), -ENOTDIR);
        assert_int_equal(ws_writer_begin(s->ws_fd, "r1/r2/dir", 100, false, &w), -ENOENT);
        assert_null(w);

        after = tree_snapshot(s->root);
        assert_string_equal(before, after);
        free(before);
        free(after);
        assert_streq_free(peek(s->ws_fd, "file"), REGULAR);
}

static void test_write_max_bytes(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        char *before, *after;

        before = tree_snapshot(s->root);
        assert_int_equal(ws_writer_begin(s->ws_fd, "d1/d2/capped", 10, true, &w), 0);
        assert_int_equal(ws_writer_write(w, "123456", 6), 0);
        assert_int_equal(ws_writer_write(w, "7890", 4), 0);     /* exactly the limit */
        assert_int_equal(ws_writer_write(w, "x", 1), -EFBIG);
        /* Spent at once: nothing on disk even before the writer is freed. */
        after = tree_snapshot(s->root);
        assert_string_equal(before, after);
        free(after);
        assert_int_equal(ws_writer_write(w, "", 0), -EFBIG);
        assert_int_equal(ws_writer_commit(w, NULL), -EFBIG);
        w = ws_writer_free(w);

        /* Over the limit in one large write; replacing an existing file leaves it untouched. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "file", 4, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "12345", 5), -EFBIG);
        assert_int_equal(ws_writer_commit(w, NULL), -EFBIG);
        w = ws_writer_free(w);
        after = tree_snapshot(s->root);
        assert_string_equal(before, after);
        free(after);
        free(before);

        /* max 0: only an empty file. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "zero", 0, false, &w), 0);
        assert_int_equal(ws_writer_commit(w, NULL), 0);
        w = ws_writer_free(w);
        assert_streq_free(peek(s->ws_fd, "zero"), "");
        assert_int_equal(ws_writer_begin(s->ws_fd, "zero", 0, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "x", 1), -EFBIG);
        w = ws_writer_free(w);
        assert_streq_free(peek(s->ws_fd, "zero"), "");

        /* UINT64_MAX: no overflow in the arithmetic. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "huge", UINT64_MAX, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "abc", 3), 0);
        assert_int_equal(ws_writer_commit(w, NULL), 0);
        w = ws_writer_free(w);
}

static void test_write_refuse_dir(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        char *before, *after;
        struct stat st;

        before = tree_snapshot(s->root);
        assert_int_equal(ws_writer_begin(s->ws_fd, "dir", 100, false, &w), -EISDIR);
        assert_null(w);
        assert_int_equal(ws_writer_begin(s->ws_fd, "x/y/dir", 100, true, &w), 0);
        w = ws_writer_free(w);

        /* The directory appears between begin and commit: the rename refuses, nothing is left. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "later", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "data", 4), 0);
        assert_int_equal(mkdirat(s->ws_fd, "later", 0700), 0);
        assert_int_equal(ws_writer_commit(w, NULL), -EISDIR);
        w = ws_writer_free(w);
        assert_int_equal(unlinkat(s->ws_fd, "later", AT_REMOVEDIR), 0);
        after = tree_snapshot(s->root);
        assert_string_equal(before, after);
        free(before);
        free(after);

        assert_int_equal(fstatat(s->ws_fd, "dir/inner", &st, 0), 0);
}

static void test_write_symlink_target(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        char *before_out, *after_out;
        struct stat st;

        before_out = tree_snapshot(s->out);

        /* The final component is a symlink: the link itself is replaced, the target untouched. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "link_secret", 100, false, &w), 0);
        assert_int_equal(ws_writer_write(w, "OWNED", 5), 0);
        assert_int_equal(ws_writer_commit(w, NULL), 0);
        w = ws_writer_free(w);
        assert_int_equal(fstatat(s->ws_fd, "link_secret", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_streq_free(peek(s->ws_fd, "link_secret"), "OWNED");
        assert_streq_free(peek(s->out_fd, "secret"), SECRET);

        assert_int_equal(ws_writer_begin(s->ws_fd, "link_dangling", 100, false, &w), 0);
        assert_int_equal(ws_writer_commit(w, NULL), 0);
        w = ws_writer_free(w);
        assert_int_equal(faccessat(s->ws_fd, "nowhere", F_OK, AT_SYMLINK_NOFOLLOW), -1);

        /* A symlink as a parent: refused, with or without mkdirs, and nothing made beyond it. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "dirlink_out/new", 100, false, &w), -ELOOP);
        assert_int_equal(ws_writer_begin(s->ws_fd, "dirlink_out/new", 100, true, &w), -ELOOP);
        assert_int_equal(ws_writer_begin(s->ws_fd, "dirlink_out/sub/new", 100, true, &w), -ELOOP);
        assert_int_equal(ws_writer_begin(s->ws_fd, "dirlink_root/tmp/new", 100, true, &w), -ELOOP);
        assert_int_equal(ws_writer_begin(s->ws_fd, "link_proc/tmp/new", 100, true, &w), -ELOOP);
        assert_int_equal(ws_writer_begin(s->ws_fd, "dirlink/new", 100, true, &w), -ELOOP);
        assert_int_equal(ws_writer_begin(s->ws_fd, "file/new", 100, true, &w), -ENOTDIR);
        assert_int_equal(ws_writer_begin(s->ws_fd, "fifo/new", 100, true, &w), -ENOTDIR);
        assert_int_equal(ws_writer_begin(s->ws_fd, "missing/new", 100, false, &w), -ENOENT);
        assert_int_equal(ws_writer_begin(s->ws_fd, "../new", 100, true, &w), -EINVAL);
        assert_int_equal(ws_writer_begin(s->ws_fd, "", 100, true, &w), -EINVAL);
        assert_int_equal(ws_writer_begin(s->ws_fd, WS_UPLOAD_TMP_PREFIX "abcdef", 100, true, &w), -EINVAL);
        assert_null(w);

        after_out = tree_snapshot(s->out);
        assert_string_equal(before_out, after_out);
        free(before_out);
        free(after_out);
}

static void test_write_mkdirs(void **state) {
        State *s = *state;
        WsWriter *w = NULL;
        struct stat st;
        uint8_t d[32], ref[32];
        size_t total = 0;
        struct sha256_ctx ctx;
        char chunk[4096];

        assert_int_equal(ws_writer_begin(s->ws_fd, "a/b/c/f.bin", 1 << 20, false, &w), -ENOENT);
        assert_int_equal(ws_writer_begin(s->ws_fd, "a/b/c/f.bin", 1 << 20, true, &w), 0);
        sha256_init(&ctx);
        for (int i = 0; i < 200; i++) {
                memset(chunk, 'a' + i % 26, sizeof(chunk));
                assert_int_equal(ws_writer_write(w, chunk, sizeof(chunk) - (size_t) i), 0);
                sha256_update(&ctx, sizeof(chunk) - (size_t) i, (const uint8_t *) chunk);
                total += sizeof(chunk) - (size_t) i;
        }
        sha256_digest(&ctx, 32, ref);
        assert_int_equal(ws_writer_written(w), total);
        assert_int_equal(ws_writer_commit(w, d), 0);
        w = ws_writer_free(w);
        assert_memory_equal(d, ref, 32);

        assert_int_equal(fstatat(s->ws_fd, "a/b/c", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777 & ~0700, 0);
        assert_int_equal(fstatat(s->ws_fd, "a/b/c/f.bin", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_size, (off_t) total);

        /* The hash read back equals the hash computed while writing. */
        int fd = -EBADF;
        assert_int_equal(ws_file_open_read(s->ws_fd, "a/b/c/f.bin", BIG, &fd, NULL), 0);
        assert_int_equal(ws_file_sha256(fd, BIG, d), 0);
        assert_memory_equal(d, ref, 32);
        close(fd);

        /* Existing directories are reused, and a literal "%2e%2e" stays a name inside. */
        assert_int_equal(ws_writer_begin(s->ws_fd, "%2e%2e/y", 10, true, &w), 0);
        assert_int_equal(ws_writer_write(w, "in", 2), 0);
        assert_int_equal(ws_writer_commit(w, NULL), 0);
        w = ws_writer_free(w);
        assert_streq_free(peek(s->ws_fd, "%2e%2e/y"), "in");
        assert_null(peek(s->out_fd, "../y"));
        assert_null(peek(s->ws_fd, "../y"));
}

/* ---------------------------------------------------------------------------------------------
 * Listing and removal */

static void test_list_dir(void **state) {
        State *s = *state;
        WsEntry *e = NULL;
        size_t n = 0;

        assert_int_equal(mkdirat(s->ws_fd, "l", 0700), 0);
        put_file(s->ws_fd, "l/b.txt", "12345");
        put_file(s->ws_fd, "l/a.txt", "");
        assert_int_equal(mkdirat(s->ws_fd, "l/sub", 0700), 0);
        assert_int_equal(symlinkat("/etc/shadow", s->ws_fd, "l/ln"), 0);
        assert_int_equal(mkfifoat(s->ws_fd, "l/pipe", 0600), 0);
        put_file(s->ws_fd, "l/bad\nname", "x");
        put_file(s->ws_fd, "l/Z", "x");

        assert_int_equal(ws_list_dir(s->ws_fd, "l", &e, &n), 0);
        assert_int_equal(n, 7);
        const char *names[] = { "Z", "a.txt", "b.txt", "bad\nname", "ln", "pipe", "sub" };
        const char *types[] = { "file", "file", "file", "file", "symlink", "other", "dir" };
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(e[i].name, names[i]);
                assert_string_equal(ws_entry_type_to_string(e[i].type), types[i]);
                assert_true(e[i].mtime_usec > 1000000000LL * 1000000LL);
                assert_int_equal(e[i].name_valid, i != 3);
        }
        assert_int_equal(e[2].size, 5);
        assert_int_equal(e[1].size, 0);
        assert_int_equal(e[4].size, strlen("/etc/shadow"));
        assert_int_equal(e[6].size, 0);
        e = ws_entries_free(e, n);

        /* The root, and refusals. */
        assert_int_equal(ws_list_dir(s->ws_fd, "", &e, &n), 0);
        assert_true(n > 10);
        for (size_t i = 1; i < n; i++)
                assert_true(strcmp(e[i - 1].name, e[i].name) < 0);
        e = ws_entries_free(e, n);
        assert_int_equal(ws_list_dir(s->ws_fd, "l/sub", &e, &n), 0);
        assert_int_equal(n, 0);
        e = ws_entries_free(e, n);
        assert_int_equal(ws_list_dir(s->ws_fd, "file", &e, &n), -ENOTDIR);
        assert_int_equal(ws_list_dir(s->ws_fd, "dirlink", &e, &n), -ELOOP);
        assert_int_equal(ws_list_dir(s->ws_fd, "dirlink_out", &e, &n), -ELOOP);
        assert_int_equal(ws_list_dir(s->ws_fd, "dirlink_root/etc", &e, &n), -ELOOP);
        assert_int_equal(ws_list_dir(s->ws_fd, "fifo", &e, &n), -ENOTDIR);
        assert_int_equal(ws_list_dir(s->ws_fd, "missing", &e, &n), -ENOENT);
        assert_int_equal(ws_list_dir(s->ws_fd, "..", &e, &n), -EINVAL);
        assert_int_equal(ws_list_dir(s->ws_fd, "l/", &e, &n), -EINVAL);
        assert_null(ws_entry_type_to_string(_WS_ENTRY_TYPE_MAX));
        assert_null(ws_entries_free(NULL, 3));
}

/* Fill @dfd with @count entries named 000000... (mknod: no fd, no data block). */
static void make_entries(int dfd, unsigned from, unsigned count) {
        char name[32];

        for (unsigned i = from; i < from + count; i++) {
                snprintf(name, sizeof(name), "%06u", i);
                assert_int_equal(mknodat(dfd, name, S_IFREG | 0600, 0), 0);
        }
}

static void test_list_dir_cap(void **state) {
        State *s = *state;
        WsEntry *e = NULL;
        size_t n = 0;
        int dfd;

        assert_int_equal(mkdirat(s->ws_fd, "many", 0700), 0);
        dfd = openat(s->ws_fd, "many", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);

        assert_int_equal(ws_list_dir_max(s->ws_fd, "many", 0, &e, &n), 0);
        assert_int_equal(n, 0);
        e = ws_entries_free(e, n);
        make_entries(dfd, 0, 1);
        assert_int_equal(ws_list_dir_max(s->ws_fd, "many", 0, &e, &n), -E2BIG);
        assert_int_equal(ws_list_dir_max(s->ws_fd, "many", 1, &e, &n), 0);
        assert_int_equal(n, 1);
        e = ws_entries_free(e, n);
        make_entries(dfd, 1, 999);
        assert_int_equal(ws_list_dir_max(s->ws_fd, "many", 1000, &e, &n), 0);
        assert_int_equal(n, 1000);
        for (size_t i = 0; i < n; i++) {
                char name[32];
                snprintf(name, sizeof(name), "%06zu", i);
                assert_string_equal(e[i].name, name);
        }
        e = ws_entries_free(e, n);
        assert_int_equal(ws_list_dir_max(s->ws_fd, "many", 999, &e, &n), -E2BIG);
        close(dfd);
}

/* The real cap, WS_LIST_MAX_ENTRIES: 100,000 entries, made on a tmpfs (/dev/shm) where there is
 * one, as creating them on a disk file system takes a minute on a small VM. */
static void test_list_dir_default_cap(void **state) {
        char root[] = "/dev/shm/test-ws-files-cap-XXXXXX";
        WsEntry *e = NULL;
        size_t n = 0;
        int rfd, dfd;

        (void) state;
        if (!mkdtemp(root)) {
                print_message("# no /dev/shm: WS_LIST_MAX_ENTRIES covered by ws_list_dir_max() only\n");
                return;
        }
        rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(rfd >= 0);
        assert_int_equal(mkdirat(rfd, "many", 0700), 0);
        dfd = openat(rfd, "many", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        make_entries(dfd, 0, WS_LIST_MAX_ENTRIES);
        assert_int_equal(ws_list_dir(rfd, "many", &e, &n), 0);
        assert_int_equal(n, WS_LIST_MAX_ENTRIES);
        assert_string_equal(e[0].name, "000000");
        assert_string_equal(e[n - 1].name, "099999");
        e = ws_entries_free(e, n);
        make_entries(dfd, WS_LIST_MAX_ENTRIES, 1);
        assert_int_equal(ws_list_dir(rfd, "many", &e, &n), -E2BIG);
        close(dfd);
        close(rfd);
        rm_rf(root);
}

static void test_remove(void **state) {
        State *s = *state;

        assert_int_equal(ws_remove(s->ws_fd, "file"), 0);
        assert_int_equal(ws_remove(s->ws_fd, "file"), -ENOENT);
        assert_int_equal(ws_remove(s->ws_fd, "dir"), -ENOTEMPTY);
        assert_int_equal(ws_remove(s->ws_fd, "dir/inner"), 0);
        assert_int_equal(ws_remove(s->ws_fd, "dir"), 0);
        /* A symlink is removed itself; its target stays. */
        assert_int_equal(ws_remove(s->ws_fd, "link_secret"), 0);
        assert_streq_free(peek(s->out_fd, "secret"), SECRET);
        assert_int_equal(ws_remove(s->ws_fd, "dirlink_out"), 0);
        assert_streq_free(peek(s->out_fd, "secret"), SECRET);
        /* Nothing through a symlink or out of the workspace. */
        assert_int_equal(ws_remove(s->ws_fd, "dirlink_root/tmp"), -ELOOP);
        assert_int_equal(ws_remove(s->ws_fd, "link_proc/etc/passwd"), -ELOOP);
        assert_int_equal(ws_remove(s->ws_fd, "../outside/secret"), -EINVAL);
        assert_int_equal(ws_remove(s->ws_fd, ""), -EINVAL);
        assert_int_equal(ws_remove(s->ws_fd, "file/x"), -ENOENT);
        assert_int_equal(ws_remove(s->ws_fd, "big/x"), -ENOTDIR);
        assert_int_equal(ws_remove(s->ws_fd, "fifo"), 0);
        assert_int_equal(ws_remove(s->ws_fd, "%2e%2e/x"), 0);
        char x[PATH_MAX + 8];
        snprintf(x, sizeof(x), "%s/x", s->root);
        assert_streq_free(peek(AT_FDCWD, x), SECRET);
}

/* ---------------------------------------------------------------------------------------------
 * Races: a child swaps a name between a regular file and a symlink to a secret as fast as it can
 * while we open it 10,000 times. Every open must give the regular content or a refusal. */

typedef struct Shared {
        uint64_t swaps;
} Shared;

/* The race loop of tests/helpers/symlink-racer.c, in a child (so the test needs no helper path). */
static pid_t racer_start(int dir_fd, const char *name, const char *alt, const char *target, bool exchange,
                         Shared *sh) {
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid > 0)
                return pid;

        alarm(300);                     /* never outlive a broken parent for long */
        for (;;) {
                if (exchange) {
                        if (renameat2(dir_fd, name, dir_fd, alt, RENAME_EXCHANGE) < 0)
                                _exit(2);
                } else {
                        (void) unlinkat(dir_fd, "race.lnk", 0);
                        if (symlinkat(target, dir_fd, "race.lnk") < 0 ||
                            renameat(dir_fd, "race.lnk", dir_fd, name) < 0)
                                _exit(3);
                        (void) unlinkat(dir_fd, "race.reg", 0);
                        int fd = openat(dir_fd, "race.reg", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                        if (fd < 0 || write(fd, REGULAR, strlen(REGULAR)) != (ssize_t) strlen(REGULAR))
                                _exit(4);
                        close(fd);
                        if (renameat(dir_fd, "race.reg", dir_fd, name) < 0)
                                _exit(5);
                }
                __atomic_add_fetch(&sh->swaps, 1, __ATOMIC_RELAXED);
        }
}

static void race_reads(State *s, const char *path, pid_t pid, Shared *sh) {
        unsigned ok = 0, refused = 0, other = 0, leaked = 0, total = 0;
        uint64_t deadline;
        int status;

        while (__atomic_load_n(&sh->swaps, __ATOMIC_RELAXED) < 2)
                usleep(100);
        /* 10,000 opens, and more (for at most 30 s) until both outcomes were seen: on a busy
         * 2-CPU machine the racer can be descheduled for all of the first 10,000. */
        deadline = now_usec() + 30 * 1000000U;
        for (unsigned i = 0; i < 10000 || ((ok == 0 || refused == 0) && now_usec() < deadline); i++) {
                int fd = -EBADF, r;

                r = ws_file_open_read(s->ws_fd, path, BIG, &fd, NULL);
                if (r == 0) {
                        char buf[64] = {};
                        ssize_t k = read(fd, buf, sizeof(buf) - 1);
                        close(fd);
                        if (k >= 0 && streq(buf, REGULAR))
                                ok++;
                        else {
                                if (leaked++ == 0)
                                        print_error("mode %u: read '%s' gave \"%s\"\n", s->mode, path, buf);
                        }
                } else if (r == -ELOOP)
                        refused++;
                else if (other++ == 0)
                        print_error("mode %u: read '%s' = %d\n", s->mode, path, r);
                total++;
        }
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));               /* not an early _exit() of the racer */
        print_message("# mode %u, '%s': %u opens: %u regular, %u refused; %" PRIu64 " swaps\n", s->mode, path,
                      total, ok, refused, __atomic_load_n(&sh->swaps, __ATOMIC_RELAXED));
        assert_int_equal(leaked, 0);
        assert_int_equal(other, 0);
        assert_true(total >= 10000);
        assert_int_equal(ok + refused, total);
        assert_true(ok > 0);
        assert_true(refused > 0);
}

static Shared *shared_new(void) {
        Shared *sh = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        assert_true(sh != MAP_FAILED);
        sh->swaps = 0;
        return sh;
}

static void test_race_final_component(void **state) {
        State *s = *state;
        char target[PATH_MAX + 16];
        Shared *sh = shared_new();

        snprintf(target, sizeof(target), "%s/secret", s->out);
        put_file(s->ws_fd, "race", REGULAR);
        race_reads(s, "race", racer_start(s->ws_fd, "race", NULL, target, false, sh), sh);

        /* The same with RENAME_EXCHANGE: the regular inode and the symlink trade names. */
        sh->swaps = 0;
        put_file(s->ws_fd, "race2", REGULAR);
        assert_int_equal(symlinkat(target, s->ws_fd, "race2.alt"), 0);
        race_reads(s, "race2", racer_start(s->ws_fd, "race2", "race2.alt", NULL, true, sh), sh);
        munmap(sh, sizeof(Shared));
        assert_streq_free(peek(s->out_fd, "secret"), SECRET);
}

static void test_race_directory(void **state) {
        State *s = *state;
        Shared *sh = shared_new();

        /* rd/f is the real file; rd.alt -> outside, whose f is the secret. */
        assert_int_equal(mkdirat(s->ws_fd, "rd", 0700), 0);
        put_file(s->ws_fd, "rd/f", REGULAR);
        assert_int_equal(symlinkat(s->out, s->ws_fd, "rd.alt"), 0);
        race_reads(s, "rd/f", racer_start(s->ws_fd, "rd", "rd.alt", NULL, true, sh), sh);
        munmap(sh, sizeof(Shared));
}

/* Writes while the target and a parent are being swapped: nothing ever lands outside. */
static void test_race_write(void **state) {
        State *s = *state;
        char target[PATH_MAX + 16], *before_out, *after_out;
        Shared *sh = shared_new(), *sh2 = shared_new();
        pid_t p1, p2;
        unsigned committed = 0, refused = 0;

        before_out = tree_snapshot(s->out);
        snprintf(target, sizeof(target), "%s/secret", s->out);
        put_file(s->ws_fd, "wrace", REGULAR);
        assert_int_equal(mkdirat(s->ws_fd, "wd", 0700), 0);
        assert_int_equal(symlinkat(s->out, s->ws_fd, "wd.alt"), 0);
        p1 = racer_start(s->ws_fd, "wrace", NULL, target, false, sh);
        p2 = racer_start(s->ws_fd, "wd", "wd.alt", NULL, true, sh2);
        while (__atomic_load_n(&sh->swaps, __ATOMIC_RELAXED) < 2 || __atomic_load_n(&sh2->swaps, __ATOMIC_RELAXED) < 2)
                usleep(100);

        for (unsigned i = 0; i < 120; i++) {
                const char *path = i % 2 ? "wrace" : (i % 4 ? "wd/new" : "wd/sub/new");
                WsWriter *w = NULL;
                int r;

                r = ws_writer_begin(s->ws_fd, path, 100, true, &w);
                if (r == 0) {
                        assert_int_equal(ws_writer_write(w, "OWNED", 5), 0);
                        r = ws_writer_commit(w, NULL);
                        w = ws_writer_free(w);
                }
                if (r == 0)
                        committed++;
                else {
                        /* ELOOP: wd was the symlink; ENOENT: "wd" was renamed away with our
                         * parent fd's directory, the commit's rename target vanished. */
                        if (r != -ELOOP && r != -ENOENT)
                                print_error("write '%s' = %d\n", path, r);
                        assert_true(r == -ELOOP || r == -ENOENT);
                        refused++;
                }
        }
        kill(p1, SIGKILL);
        kill(p2, SIGKILL);
        waitpid(p1, NULL, 0);
        waitpid(p2, NULL, 0);
        print_message("# mode %u: %u writes committed, %u refused\n", s->mode, committed, refused);
        assert_true(committed > 0);
        after_out = tree_snapshot(s->out);
        assert_string_equal(before_out, after_out);
        assert_streq_free(peek(s->out_fd, "secret"), SECRET);
        free(before_out);
        free(after_out);
        munmap(sh, sizeof(Shared));
        munmap(sh2, sizeof(Shared));
}

/* ---------------------------------------------------------------------------------------------*/

#define RESOLVE_TESTS(mode)                                                                          \
        cmocka_unit_test_prestate_setup_teardown(test_read_table, setup, teardown, (void *) &(mode)),      \
        cmocka_unit_test_prestate_setup_teardown(test_fifo_is_prompt, setup, teardown, (void *) &(mode)),  \
        cmocka_unit_test_prestate_setup_teardown(test_lease_does_not_block, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_magic_links, setup, teardown, (void *) &(mode)),     \
        cmocka_unit_test_prestate_setup_teardown(test_open_beneath_table, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_list_dir, setup, teardown, (void *) &(mode)),        \
        cmocka_unit_test_prestate_setup_teardown(test_remove, setup, teardown, (void *) &(mode)),          \
        cmocka_unit_test_prestate_setup_teardown(test_race_final_component, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_race_directory, setup, teardown, (void *) &(mode))

#define WRITE_TESTS(mode)                                                                            \
        cmocka_unit_test_prestate_setup_teardown(test_write_new, setup, teardown, (void *) &(mode)),       \
        cmocka_unit_test_prestate_setup_teardown(test_write_replace_atomic, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_write_abort, setup, teardown, (void *) &(mode)),     \
        cmocka_unit_test_prestate_setup_teardown(test_write_noreplace, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_write_max_bytes, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_write_refuse_dir, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_write_symlink_target, setup, teardown, (void *) &(mode)), \
        cmocka_unit_test_prestate_setup_teardown(test_write_mkdirs, setup, teardown, (void *) &(mode)),    \
        cmocka_unit_test_prestate_setup_teardown(test_race_write, setup, teardown, (void *) &(mode))

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path_table),
                cmocka_unit_test(test_path_lengths),
                RESOLVE_TESTS(mode_openat2),
                RESOLVE_TESTS(mode_fallback),
                cmocka_unit_test_setup_teardown(test_read_table_enosys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mount_crossing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sha256, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sha256_large, setup, teardown),
                WRITE_TESTS(mode_openat2),
                WRITE_TESTS(mode_named_tmp),
                WRITE_TESTS(mode_fallback),
                WRITE_TESTS(mode_fallback_named_tmp),
                cmocka_unit_test_setup_teardown(test_list_dir_cap, setup, teardown),
                cmocka_unit_test(test_list_dir_default_cap),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
