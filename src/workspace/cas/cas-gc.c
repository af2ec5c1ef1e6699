/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Retention and checking of the store: cas_gc() (ref retention, mark from every ref, sweep of
 * unreferenced objects and of tmp/) and cas_fsck()/cas_fsck_full() (the same marking, reporting
 * the first problem). Calls cas-ref.c, cas-tree.c, cas-digest.c, util/fs-util, util/io-util.
 */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"
#include "workspace/workspace.h"

typedef struct Mark {
        Cas *cas;
        DigestSet trees, files;
        bool fsck, full;
        char *problem;          /* fsck: the first problem found */
        uint8_t *buf;
} Mark;

static void mark_done(Mark *m) {
        cas_dset_done(&m->trees);
        cas_dset_done(&m->files);
        m->problem = mfree(m->problem);
        m->buf = mfree(m->buf);
}

_printf_(2, 3) static int mark_problem(Mark *m, const char *fmt, ...) {
        va_list ap;
        int k;

        if (!m->problem) {
                va_start(ap, fmt);
                k = vasprintf(&m->problem, fmt, ap);
                va_end(ap);
                if (k < 0) {
                        m->problem = NULL;
                        return -ENOMEM;
                }
        }
        return -EUCLEAN;
}

static int fsck_file(Mark *m, const TreeEntry *e) {
        _cleanup_close_ int fd = -EBADF;
        struct sha256_ctx h;
        struct stat st;
        char rel[66], digest[72];
        Digest got;

        digest_relpath(&e->digest, rel);
        digest_format(&e->digest, digest);
        fd = openat(m->cas->objects_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0 && errno == ENOENT)
                return mark_problem(m, "missing object %s", digest);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != e->size)
                return mark_problem(m, "object %s: %" PRIu64 " bytes, the tree says %" PRIu64,
                                    digest, (uint64_t) st.st_size, e->size);
        if (!m->full)
                return 0;

        if (!m->buf) {
                m->buf = malloc(IO_BUFFER_SIZE);
                if (!m->buf)
                        return -ENOMEM;
        }
        sha256_init(&h);
        for (;;) {
                ssize_t n = loop_read(fd, m->buf, IO_BUFFER_SIZE);

                if (n < 0)
                        return (int) n;
                if (n == 0)
                        break;
                sha256_update(&h, (size_t) n, m->buf);
        }
        sha256_digest(&h, sizeof(got.b), got.b);
        if (!digest_eq(&got, &e->digest))
                return mark_problem(m, "object %s: content does not match its digest", digest);
        return 0;
}

/*
 * Mark everything tree @d reaches. gc: a missing tree (or object) is skipped, it has nothing
 * to protect; any other error stops gc. fsck: each problem is -EUCLEAN with its description.
 */
static int mark_tree(Mark *m, const Digest *d, unsigned depth) {
        _cleanup_(tree_done) Tree t = {};
        char digest[72];
        int r;

        r = cas_dset_add(&m->trees, d);
        if (r <= 0)
                return r;
        if (depth > m->cas->limits.max_depth + 1)
                return m->fsck ? mark_problem(m, "trees nested too deep") : -E2BIG;

        r = tree_load(m->cas, d, &t);
        if (r < 0 && m->fsck && (r == -ENOENT || r == -EIO)) {
                digest_format(d, digest);
                return mark_problem(m, "%s tree %s", r == -ENOENT ? "missing" : "corrupt", digest);
        }
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;

        for (size_t i = 0; i < t.n; i++) {
                const TreeEntry *e = &t.entries[i];

                if (e->type == DT_DIR)
                        r = mark_tree(m, &e->digest, depth + 1);
                else if (e->type == DT_REG) {
                        r = cas_dset_add(&m->files, &e->digest);
                        if (r > 0 && m->fsck)
                                r = fsck_file(m, e);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct WorkspaceRefs {
        char *ws_id;
        RefList refs;
} WorkspaceRefs;

typedef struct AllRefs {
        WorkspaceRefs *v;
        size_t n;
} AllRefs;

static void all_refs_done(AllRefs *a) {
        for (size_t i = 0; i < a->n; i++) {
                free(a->v[i].ws_id);
                cas_ref_list_done(&a->v[i].refs);
        }
        a->v = mfree(a->v);
        a->n = 0;
}

/* Every ref of every workspace; -EIO if any is malformed (with @m->fsck: -EUCLEAN). */
static int all_refs_load(Cas *c, Mark *m, AllRefs *ret) {
        _cleanup_(all_refs_done) AllRefs a = {};
        _cleanup_(dir_names_done) DirNames names = {};
        int r;

        r = dir_read_names(c->refs_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        if (names.n > 0) {
                a.v = calloc(names.n, sizeof(WorkspaceRefs));
                if (!a.v)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < names.n; i++) {
                _cleanup_close_ int dfd = -EBADF;

                if (!workspace_id_valid(names.v[i]))
                        continue;
                dfd = openat(c->refs_fd, names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        return negative_errno();
                r = cas_refs_load(dfd, &a.v[a.n].refs);
                if (r == -EIO && m->fsck)
                        return mark_problem(m, "workspace %s: malformed ref", names.v[i]);
                if (r < 0)
                        return r;
                a.v[a.n].ws_id = STEAL(names.v[i]);
                a.n++;
        }
        *ret = a;
        a = (AllRefs) {};
        return 0;
}

static int mark_refs(Mark *m, const AllRefs *a) {
        int r;

        for (size_t i = 0; i < a->n; i++)
                for (size_t j = 0; j < a->v[i].refs.n; j++) {
                        const CasRef *ref = &a->v[i].refs.refs[j];
                        Digest d;

                        if (digest_parse(ref->tree, &d) < 0)
                                return -EIO;
                        r = mark_tree(m, &d, 0);
                        if (r == -EUCLEAN) {
                                char *p = NULL;

                                if (asprintf(&p, "ref workspace/%s/%s: %s", a->v[i].ws_id, ref->exec_id,
                                             m->problem) < 0)
                                        return -ENOMEM;
                                free(m->problem);
                                m->problem = p;
                        }
                        if (r < 0)
                                return r;
                }
        return 0;
}

static int fsck_impl(Cas *c, bool full, char **ret_problem) {
        _cleanup_(mark_done) Mark m = { .cas = c, .fsck = true, .full = full };
        _cleanup_(all_refs_done) AllRefs a = {};
        _cleanup_close_ int lock = -EBADF;
        int r;

        assert(c);

        m.trees.seed = m.files.seed = c->hash_seed;
        lock = cas_store_lock(c, LOCK_SH);
        if (lock < 0)
                return lock;
        r = all_refs_load(c, &m, &a);
        if (r >= 0)
                r = mark_refs(&m, &a);
        if (r == -EUCLEAN && ret_problem)
                *ret_problem = STEAL(m.problem);
        return r;
}

int cas_fsck(Cas *c, char **ret_problem) {
        return fsck_impl(c, false, ret_problem);
}

int cas_fsck_full(Cas *c, char **ret_problem) {
        return fsck_impl(c, true, ret_problem);
}

static int gc_sweep_objects(Cas *c, const Mark *m, uint64_t *freed) {
        int r;

        for (unsigned i = 0; i < 256; i++) {
                _cleanup_(dir_names_done) DirNames names = {};
                _cleanup_close_ int dfd = -EBADF;
                char sub[3], hex[DIGEST_HEX_LEN + 1];
                bool deleted = false;

                (void) snprintf(sub, sizeof(sub), "%02x", i);
                dfd = openat(c->objects_fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0 && errno == ENOENT)
                        continue;
                if (dfd < 0)
                        return negative_errno();
                r = dir_read_names(dfd, NULL, 0, &names);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < names.n; j++) {
                        struct stat st;
                        Digest d;

                        if (strlen(names.v[j]) != DIGEST_HEX_LEN - 2)
                                continue;
                        memcpy(hex, sub, 2);
                        memcpy(hex + 2, names.v[j], DIGEST_HEX_LEN - 2 + 1);
                        if (digest_from_hex(hex, &d) < 0)
                                continue;
                        if (cas_dset_contains(&m->trees, &d) || cas_dset_contains(&m->files, &d))
                                continue;
                        if (fstatat(dfd, names.v[j], &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        if (unlinkat(dfd, names.v[j], 0) < 0)
                                return negative_errno();
                        *freed += (uint64_t) st.st_size;
                        deleted = true;
                        r = cas_crash_point(c, CAS_CRASH_GC_OBJECT_DELETED);
                        if (r < 0)
                                return r;
                }
                if (deleted && fsync(dfd) < 0)
                        return negative_errno();
        }
        return 0;
}

/* Ref files prepared by runs that a crash ended (cas_ref_prepare()): a day old. (A run in
 * progress holds no store lock; one whose file went anyway writes its ref the ordinary way.) */
static void prepared_prune(int ws_dir_fd) {
        _cleanup_(dir_names_done) DirNames names = {};
        time_t now = time(NULL);

        if (dir_read_names(ws_dir_fd, NULL, 0, &names) < 0)
                return;
        for (size_t i = 0; i < names.n; i++) {
                const char *n = names.v[i];
                size_t l = strlen(n);
                struct stat st;

                if (n[0] != '.' || l < 5 || !streq(n + l - 4, ".pre") ||
                    fstatat(ws_dir_fd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                    st.st_mtim.tv_sec + 86400 > now)
                        continue;
                (void) unlinkat(ws_dir_fd, n, 0);
        }
}

int cas_gc(Cas *c, unsigned keep_per_workspace, uint64_t *ret_freed_bytes) {
        _cleanup_(mark_done) Mark m = { .cas = c };
        _cleanup_(all_refs_done) AllRefs a = {};
        _cleanup_(dir_names_done) DirNames tmp_names = {};
        _cleanup_close_ int lock = -EBADF;
        uint64_t freed = 0;
        int r;

        assert(c);

        c->crashed = false;
        m.trees.seed = m.files.seed = c->hash_seed;
        lock = cas_store_lock(c, LOCK_EX | LOCK_NB);
        if (lock < 0)
                return lock;

        /* Every ref parsed before anything is deleted: one we cannot read might name anything. */
        r = all_refs_load(c, &m, &a);
        if (r < 0)
                return r;

        for (size_t i = 0; i < a.n; i++) {
                RefList *l = &a.v[i].refs;
                _cleanup_close_ int dfd = -EBADF;

                dfd = openat(c->refs_fd, a.v[i].ws_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        return negative_errno();
                prepared_prune(dfd);
                if (keep_per_workspace == 0 || l->n <= keep_per_workspace)
                        continue;
                while (l->n > keep_per_workspace) {
                        CasRef *ref = &l->refs[l->n - 1];
                        struct stat st;

                        if (fstatat(dfd, ref->exec_id, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                                freed += (uint64_t) st.st_size;
                        if (unlinkat(dfd, ref->exec_id, 0) < 0 && errno != ENOENT)
                                return negative_errno();
                        cas_ref_done(ref);
                        l->n--;
                        r = cas_crash_point(c, CAS_CRASH_GC_REF_DELETED);
                        if (r < 0)
                                return r;
                }
                if (fsync(dfd) < 0)
                        return negative_errno();
        }
        /* Workspace ref directories left empty (by a crash between mkdir and the first ref). */
        for (size_t i = 0; i < a.n; i++)
                if (a.v[i].refs.n == 0)
                        (void) unlinkat(c->refs_fd, a.v[i].ws_id, AT_REMOVEDIR);

        r = mark_refs(&m, &a);
        if (r < 0)
                return r;
        r = gc_sweep_objects(c, &m, &freed);
        if (r < 0)
                return r;

        /* Under the exclusive lock no operation is in progress: all of tmp/ is garbage. */
        r = dir_read_names(c->tmp_fd, NULL, 0, &tmp_names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < tmp_names.n; i++) {
                struct stat st;

                if (fstatat(c->tmp_fd, tmp_names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        r = rm_rf_at(c->tmp_fd, tmp_names.v[i]);
                else
                        r = unlinkat(c->tmp_fd, tmp_names.v[i], 0) < 0 && errno != ENOENT ? negative_errno() : 0;
                if (r < 0)
                        return r;
                freed += (uint64_t) st.st_size;
        }

        if (ret_freed_bytes)
                *ret_freed_bytes = freed;
        return 0;
}
