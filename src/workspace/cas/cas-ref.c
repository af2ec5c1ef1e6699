/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CAS refs (refs/workspace/<wsId>/<execId>): canonical JSON formatting and strict parsing,
 * reading and listing a workspace's refs, files prepared ahead of a snapshot, and writing a ref
 * durably. Calls cas-object.c (atomic file write), cas-digest.c, util/io-util, util/fs-util.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"
#include "workspace/workspace.h"

SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);

static int ref_format(const Digest *tree, const char *exec_id, uint64_t created_ms, uint64_t bytes, char **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char digest[72];
        const char *s;

        digest_format(tree, digest);
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        /* Canonical: keys in sorted order (json-c keeps insertion order), no whitespace. */
        const struct {
                const char *key;
                json_object *value;
        } fields[] = {
                { "bytes", json_object_new_int64((int64_t) bytes) },
                { "createdAt", json_object_new_int64((int64_t) created_ms) },
                { "executionId", json_object_new_string(exec_id) },
                { "tree", json_object_new_string(digest) },
        };
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                if (r >= 0 && (!fields[i].value || json_object_object_add(o, fields[i].key, fields[i].value) < 0))
                        r = -ENOMEM;
                if (r < 0)
                        json_object_put(fields[i].value);
        }
        if (r < 0)
                return r;
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -ENOMEM;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int json_get_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        int64_t x;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return -EIO;
        errno = 0;
        x = json_object_get_int64(v);
        if (x < 0 || errno != 0)
                return -EIO;
        *ret = (uint64_t) x;
        return 0;
}

static int ref_parse(const char *data, size_t size, const char *exec_id, CasRef *ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v;
        const char *tree;
        uint64_t created, bytes;
        Digest d;

        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, data, (int) size);
        if (!o || json_tokener_get_error(tok) != json_tokener_success || json_tokener_get_parse_end(tok) != size)
                return -EIO;
        if (!json_object_is_type(o, json_type_object))
                return -EIO;
        if (!json_object_object_get_ex(o, "executionId", &v) || !json_object_is_type(v, json_type_string) ||
            !streq(json_object_get_string(v), exec_id))
                return -EIO;
        if (!json_object_object_get_ex(o, "tree", &v) || !json_object_is_type(v, json_type_string))
                return -EIO;
        tree = json_object_get_string(v);
        if (digest_parse(tree, &d) < 0)
                return -EIO;
        if (json_get_u64(o, "createdAt", &created) < 0 || json_get_u64(o, "bytes", &bytes) < 0)
                return -EIO;

        *ret = (CasRef) {
                .exec_id = strdup(exec_id),
                .tree = strdup(tree),
                .created_ms = created,
                .bytes = bytes,
        };
        if (!ret->exec_id || !ret->tree) {
                cas_ref_done(ret);
                return -ENOMEM;
        }
        return 0;
}

static int ref_read_at(int ws_dir_fd, const char *exec_id, CasRef *ret) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_file_at(ws_dir_fd, exec_id, REF_MAX_BYTES, &data, &size);
        if (r == -E2BIG)
                return -EIO;
        if (r < 0)
                return r;
        return ref_parse(data, size, exec_id, ret);
}

void cas_ref_done(CasRef *ref) {
        if (!ref)
                return;
        ref->exec_id = mfree(ref->exec_id);
        ref->tree = mfree(ref->tree);
}

void cas_refs_free(CasRef *refs, size_t n) {
        for (size_t i = 0; i < n; i++)
                cas_ref_done(&refs[i]);
        free(refs);
}

static int cmp_refs_newest_first(const void *a, const void *b) {
        const CasRef *x = a, *y = b;

        if (x->created_ms != y->created_ms)
                return x->created_ms > y->created_ms ? -1 : 1;
        return -strcmp(x->exec_id, y->exec_id);
}

void cas_ref_list_done(RefList *l) {
        cas_refs_free(l->refs, l->n);
        *l = (RefList) {};
}

/* All refs of the workspace directory @ws_dir_fd, newest first. Names that are no id are ignored. */
int cas_refs_load(int ws_dir_fd, RefList *ret) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_(cas_ref_list_done) RefList l = {};
        int r;

        r = dir_read_names(ws_dir_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        if (names.n > 0) {
                l.refs = calloc(names.n, sizeof(CasRef));
                if (!l.refs)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < names.n; i++) {
                if (!workspace_id_valid(names.v[i]))
                        continue;
                r = ref_read_at(ws_dir_fd, names.v[i], &l.refs[l.n]);
                if (r == -ENOENT)       /* deleted meanwhile by gc */
                        continue;
                if (r < 0)
                        return r;
                l.n++;
        }
        if (l.n > 1)
                qsort(l.refs, l.n, sizeof(CasRef), cmp_refs_newest_first);
        *ret = l;
        l = (RefList) {};
        return 0;
}

/* The workspace's ref directory, made (and made durable) on first use. Return: fd or -errno. */
static int ref_dir_open(Cas *c, const char *ws_id) {
        _cleanup_close_ int dfd = -EBADF;
        bool created = false;

        dfd = mkdir_open(c->refs_fd, ws_id, &created);
        if (dfd < 0)
                return dfd;
        if (created && fsync(c->refs_fd) < 0)
                return negative_errno();
        return STEAL_FD(dfd);
}

void cas_prepared_name(const char *exec_id, char name[static CAS_PREPARED_NAME_MAX]) {
        (void) snprintf(name, CAS_PREPARED_NAME_MAX, ".%s.pre", exec_id);
}

/* @prepared_fd (taken over): cas_ref_prepare()'s file, or -EBADF. */
int cas_ref_write(Cas *c, const char *ws_id, const char *exec_id, const Digest *tree, uint64_t created_ms,
              uint64_t bytes, int prepared_fd) {
        _cleanup_close_ int prepared = prepared_fd;
        _cleanup_free_ char *json = NULL;
        _cleanup_close_ int dfd = -EBADF;
        char pre[CAS_PREPARED_NAME_MAX];
        int r;

        r = ref_format(tree, exec_id, created_ms, bytes, &json);
        if (r < 0)
                return r;
        dfd = ref_dir_open(c, ws_id);
        if (dfd < 0)
                return dfd;
        cas_prepared_name(exec_id, pre);
        if (prepared >= 0) {
                struct stat a, b;

                /* Still the file in the directory under that name (not removed meanwhile)? */
                if (fstat(prepared, &a) >= 0 && fstatat(dfd, pre, &b, AT_SYMLINK_NOFOLLOW) >= 0 &&
                    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                        return cas_write_file_atomic_full(c, dfd, exec_id, json, strlen(json), 0444, true,
                                                      STEAL_FD(prepared), pre, CAS_CRASH_REF_WRITTEN,
                                                      CAS_CRASH_REF_RENAMED);
                prepared = safe_close(prepared);
        }
        return cas_write_file_atomic(c, dfd, exec_id, json, strlen(json), 0444,
                                 CAS_CRASH_REF_WRITTEN, CAS_CRASH_REF_RENAMED);
}

int cas_ref_prepare(Cas *c, const char *ws_id, const char *exec_id) {
        _cleanup_close_ int dfd = -EBADF;
        char pre[CAS_PREPARED_NAME_MAX];
        int fd;

        assert(c);
        if (!workspace_id_valid(ws_id) || !workspace_id_valid(exec_id))
                return -EINVAL;
        dfd = ref_dir_open(c, ws_id);
        if (dfd < 0)
                return dfd;
        cas_prepared_name(exec_id, pre);
        fd = openat(dfd, pre, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
        return fd < 0 ? negative_errno() : fd;
}

void cas_ref_prepared_discard(Cas *c, const char *ws_id, const char *exec_id, int fd) {
        _cleanup_close_ int dfd = -EBADF;
        char pre[CAS_PREPARED_NAME_MAX];

        if (fd < 0)
                return;
        safe_close(fd);
        if (!workspace_id_valid(ws_id) || !workspace_id_valid(exec_id))
                return;
        dfd = openat(c->refs_fd, ws_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return;
        cas_prepared_name(exec_id, pre);
        (void) unlinkat(dfd, pre, 0);
}

int cas_list_refs(Cas *c, const char *ws_id, CasRef **ret, size_t *ret_n) {
        _cleanup_(cas_ref_list_done) RefList l = {};
        _cleanup_close_ int dfd = -EBADF;
        int r;

        assert(c);
        assert(ret);
        assert(ret_n);

        if (!workspace_id_valid(ws_id))
                return -EINVAL;
        dfd = openat(c->refs_fd, ws_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0 && errno == ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (dfd < 0)
                return negative_errno();
        r = cas_refs_load(dfd, &l);
        if (r < 0)
                return r;
        *ret = STEAL(l.refs);
        *ret_n = l.n;
        l.n = 0;
        return 0;
}

int cas_read_ref(Cas *c, const char *ws_id, const char *exec_id, CasRef *ret) {
        _cleanup_close_ int dfd = -EBADF;

        assert(c);
        assert(ret);

        if (!workspace_id_valid(ws_id) || !workspace_id_valid(exec_id))
                return -EINVAL;
        dfd = openat(c->refs_fd, ws_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        return ref_read_at(dfd, exec_id, ret);
}

int cas_ref_add(Cas *c, const char *ws_id, const char *exec_id, const char *tree_digest, uint64_t created_ms,
                uint64_t bytes) {
        _cleanup_close_ int lock = -EBADF;
        Tree t = {};
        Digest d;
        int r;

        assert(c);
        if (!workspace_id_valid(ws_id) || !workspace_id_valid(exec_id))
                return -EINVAL;
        r = digest_parse(tree_digest, &d);
        if (r < 0)
                return r;
        /* Shared, as a snapshot holds it: no gc sweeps between the check and the ref. */
        lock = cas_store_lock(c, LOCK_SH | LOCK_NB);
        if (lock < 0)
                return lock;
        r = tree_load(c, &d, &t);
        tree_done(&t);
        if (r == -EIO)
                return -ENOENT;
        if (r < 0)
                return r;
        return cas_ref_write(c, ws_id, exec_id, &d, created_ms, bytes, -EBADF);
}

int cas_refs_remove(Cas *c, const char *ws_id) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_close_ int lock = -EBADF, dfd = -EBADF;
        int r;

        assert(c);
        if (!workspace_id_valid(ws_id))
                return -EINVAL;
        /* Shared, as cas_ref_add() takes it: a gc never runs half-way through the removal. */
        lock = cas_store_lock(c, LOCK_SH | LOCK_NB);
        if (lock < 0)
                return lock;
        dfd = openat(c->refs_fd, ws_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        r = dir_read_names(dfd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++)
                if (unlinkat(dfd, names.v[i], 0) < 0 && errno != ENOENT)
                        return negative_errno();
        if (unlinkat(c->refs_fd, ws_id, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return negative_errno();
        return fsync(c->refs_fd) < 0 ? negative_errno() : 0;
}
