/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The CAS store's decoders, through the public API: the input is stored as an object (named by
 * its SHA-256, as the store requires) and listed as a tree (cas_tree_list(), then the lookups
 * cas_tree_list()/cas_open_file() of its first entries), and stored as the ref
 * refs/workspace/ws/e1, read with cas_read_ref(), cas_list_refs() and checked by cas_fsck().
 * The store lives in a directory made below $TMPDIR (or /tmp) and removed at exit; each input's
 * files are removed after it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/cas/cas.h"
#include "fuzz.h"

static char store_dir[4096];
static Cas *cas;
static int objects_fd = -1, refs_fd = -1;

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        if (type == FTW_DP)
                return rmdir(path) < 0 ? -1 : 0;
        return unlink(path) < 0 ? -1 : 0;
}

static void cleanup(void) {
        cas = cas_free(cas);
        if (objects_fd >= 0)
                close(objects_fd);
        if (refs_fd >= 0)
                close(refs_fd);
        if (store_dir[0] != '\0')
                (void) nftw(store_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        const char *tmp = getenv("TMPDIR");
        int fd;

        snprintf(store_dir, sizeof(store_dir), "%s/fuzz-cas-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(store_dir))
                abort();
        atexit(cleanup);
        fd = open(store_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || cas_open(fd, &cas) < 0)
                abort();
        /* The two directories the inputs are written to. */
        objects_fd = openat(fd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        refs_fd = openat(fd, "refs/workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(fd);
        if (objects_fd < 0 || refs_fd < 0)
                abort();
        if (mkdirat(refs_fd, "ws", 0755) < 0)
                abort();
        return 0;
}

static void write_file(int dfd, const char *name, const uint8_t *data, size_t size) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);

        if (fd < 0)
                abort();
        for (size_t off = 0; off < size;) {
                ssize_t n = write(fd, data + off, size - off);
                if (n <= 0)
                        abort();
                off += (size_t) n;
        }
        close(fd);
}

static void check_tree(const uint8_t *data, size_t size) {
        static const char hexdigits[] = "0123456789abcdef";
        uint8_t d[SHA256_DIGEST_SIZE];
        char digest[72] = "sha256:", rel[66], fan[3];
        struct sha256_ctx ctx;
        CasEntry *e = NULL;
        size_t n = 0;
        int r;

        sha256_init(&ctx);
        sha256_update(&ctx, size, data);
        sha256_digest(&ctx, sizeof(d), d);
        for (size_t i = 0; i < sizeof(d); i++) {
                digest[7 + 2 * i] = hexdigits[d[i] >> 4];
                digest[7 + 2 * i + 1] = hexdigits[d[i] & 15];
        }
        digest[71] = '\0';
        memcpy(fan, digest + 7, 2);
        fan[2] = '\0';
        snprintf(rel, sizeof(rel), "%s/%s", fan, digest + 9);

        if (mkdirat(objects_fd, fan, 0755) < 0 && errno != EEXIST)
                abort();
        write_file(objects_fd, rel, data, size);

        r = cas_tree_list(cas, digest, "", &e, &n);
        FUZZ_CHECK(r == 0 || r == -EIO || r == -ENOMEM);
        if (r == 0) {
                for (size_t i = 0; i < n && i < 4; i++) {
                        CasEntry *sub = NULL;
                        size_t m = 0;
                        uint64_t fsize;
                        char got[72];
                        int fd = -1;

                        FUZZ_CHECK(e[i].name && !strchr(e[i].name, '/'));
                        FUZZ_CHECK(strcmp(e[i].name, ".") != 0 && strcmp(e[i].name, "..") != 0);
                        if (i > 0)
                                FUZZ_CHECK(strcmp(e[i - 1].name, e[i].name) < 0);
                        /* The objects it names do not exist (unless it names itself). */
                        r = cas_tree_list(cas, digest, e[i].name, &sub, &m);
                        if (r == 0)
                                cas_entries_free(sub, m);
                        r = cas_open_file(cas, digest, e[i].name, &fd, &fsize, got);
                        if (r == 0)
                                close(fd);
                }
                cas_entries_free(e, n);
        }
        if (unlinkat(objects_fd, rel, 0) < 0)
                abort();
}

static void check_ref(const uint8_t *data, size_t size) {
        CasRef ref = {}, *refs = NULL;
        char *problem = NULL;
        size_t n = 0;
        int dfd, r;

        dfd = openat(refs_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                abort();
        write_file(dfd, "e1", data, size);

        r = cas_read_ref(cas, "ws", "e1", &ref);
        FUZZ_CHECK(r == 0 || r == -EIO || r == -ENOMEM);
        if (r == 0) {
                FUZZ_CHECK(strcmp(ref.exec_id, "e1") == 0 && strlen(ref.tree) == 71);
                cas_ref_done(&ref);
        }
        r = cas_list_refs(cas, "ws", &refs, &n);
        FUZZ_CHECK(r == 0 || r == -EIO || r == -ENOMEM);
        if (r == 0) {
                FUZZ_CHECK(n <= 1);
                cas_refs_free(refs, n);
        }
        r = cas_fsck(cas, &problem);
        FUZZ_CHECK(r == 0 || r == -EUCLEAN || r == -ENOMEM);
        free(problem);

        if (unlinkat(dfd, "e1", 0) < 0)
                abort();
        close(dfd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 256 * 1024)
                return 0;
        check_tree(data, size);
        check_ref(data, size);
        return 0;
}
