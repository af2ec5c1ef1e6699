/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CAS trees: the canonical tree object (encoding and strict decoding, see cas.h), loading a tree
 * by digest, and the lookups of the public API: resolving a path in a tree, listing a directory
 * (cas_tree_list()) and opening a file's content (cas_open_file()). Calls cas-object.c,
 * cas-digest.c, cas-text.c.
 */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/macro.h"
#include "workspace/cas/cas-internal.h"

void tree_entry_done(TreeEntry *e) {
        e->name = mfree(e->name);
        e->target = mfree(e->target);
}

void tree_done(Tree *t) {
        for (size_t i = 0; i < t->n; i++)
                tree_entry_done(&t->entries[i]);
        t->entries = mfree(t->entries);
        t->n = t->alloc = 0;
}

/* Append @e, taking its strings (also on failure). */
int tree_push(Tree *t, TreeEntry *e) {
        if (t->n == t->alloc) {
                size_t na = MAX(t->alloc * 2, (size_t) 16);
                TreeEntry *v = reallocarray(t->entries, na, sizeof(TreeEntry));

                if (!v) {
                        tree_entry_done(e);
                        return -ENOMEM;
                }
                t->entries = v;
                t->alloc = na;
        }
        t->entries[t->n++] = *e;
        *e = (TreeEntry) {};
        return 0;
}

int tree_encode(const Tree *t, Buf *out) {
        int r;

        r = buf_puts(out, TREE_MAGIC);
        if (r < 0)
                return r;
        for (size_t i = 0; i < t->n; i++) {
                const TreeEntry *e = &t->entries[i];
                char hex[DIGEST_HEX_LEN + 1];

                if (e->type == DT_LNK)
                        r = buf_printf(out, "l 0777 %" PRIu64 " - ", e->size);
                else {
                        hex_encode(e->digest.b, sizeof(e->digest.b), hex);
                        r = buf_printf(out, "%c %04o %" PRIu64 " %s ", e->type == DT_DIR ? 'd' : 'f',
                                       (unsigned) (e->mode & 0777), e->size, hex);
                }
                if (r >= 0)
                        r = buf_put_escaped(out, e->name);
                if (r >= 0 && e->type == DT_LNK) {
                        r = buf_puts(out, " ");
                        if (r >= 0)
                                r = buf_put_escaped(out, e->target);
                }
                if (r >= 0)
                        r = buf_puts(out, "\n");
                if (r < 0)
                        return r;
                if (out->size > TREE_MAX_BYTES)
                        return -E2BIG;
        }
        return 0;
}

static int tree_decode(const char *data, size_t size, Tree *ret) {
        _cleanup_(tree_done) Tree t = {};
        const char *p = data, *end = data + size;
        int r;

        if (size < strlen(TREE_MAGIC) || memcmp(data, TREE_MAGIC, strlen(TREE_MAGIC)) != 0)
                return -EIO;
        p += strlen(TREE_MAGIC);

        while (p < end) {
                _cleanup_(tree_entry_done) TreeEntry e = {};
                const char *eol = memchr(p, '\n', (size_t) (end - p)), *sp;
                size_t len;

                if (!eol || eol - p < 2 || p[1] != ' ')
                        return -EIO;
                switch (p[0]) {
                case 'f':
                        e.type = DT_REG;
                        break;
                case 'd':
                        e.type = DT_DIR;
                        break;
                case 'l':
                        e.type = DT_LNK;
                        break;
                default:
                        return -EIO;
                }
                p += 2;

                /* Four octal digits, the first always 0 (no setuid/setgid/sticky). */
                if (eol - p < 5 || p[0] != '0' || p[4] != ' ')
                        return -EIO;
                for (unsigned i = 1; i < 4; i++) {
                        if (p[i] < '0' || p[i] > '7')
                                return -EIO;
                        e.mode = e.mode << 3 | (uint32_t) (p[i] - '0');
                }
                p += 5;
                if (e.type == DT_LNK && e.mode != 0777)
                        return -EIO;

                r = parse_u64(&p, eol, ' ', &e.size);
                if (r < 0)
                        return r;

                if (e.type == DT_LNK) {
                        if (eol - p < 2 || p[0] != '-' || p[1] != ' ')
                                return -EIO;
                        p += 2;
                } else {
                        if (eol - p < (ptrdiff_t) DIGEST_HEX_LEN + 1 || p[DIGEST_HEX_LEN] != ' ')
                                return -EIO;
                        if (digest_from_hex(p, &e.digest) < 0)
                                return -EIO;
                        p += DIGEST_HEX_LEN + 1;
                }

                sp = memchr(p, ' ', (size_t) (eol - p));
                if ((e.type == DT_LNK) != !!sp)
                        return -EIO;
                r = cas_unescape(p, (size_t) ((sp ?: eol) - p), &e.name, &len);
                if (r < 0)
                        return r;
                if (!cas_name_valid(e.name, len))
                        return -EIO;
                if (t.n > 0 && strcmp(t.entries[t.n - 1].name, e.name) >= 0)
                        return -EIO;
                if (sp) {
                        r = cas_unescape(sp + 1, (size_t) (eol - sp - 1), &e.target, &len);
                        if (r < 0)
                                return r;
                        if (len == 0 || len > SYMLINK_MAX_BYTES || len != e.size)
                                return -EIO;
                }

                r = tree_push(&t, &e);
                if (r < 0)
                        return r;
                p = eol + 1;
        }

        *ret = t;
        t = (Tree) {};
        return 0;
}

/* -ENOENT if the tree object is missing, -EIO if corrupt. */
int tree_load(Cas *c, const Digest *d, Tree *ret) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = cas_object_read(c, d, TREE_MAX_BYTES, &data, &size);
        if (r < 0)
                return r;
        return tree_decode(data, size, ret);
}

static const TreeEntry *tree_find(const Tree *t, const char *name) {
        size_t lo = 0, hi = t->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int k = strcmp(name, t->entries[mid].name);

                if (k == 0)
                        return &t->entries[mid];
                if (k < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Lookups. */

/*
 * Split a relative lookup path into its components (in place in a copy): no leading '/', no
 * empty, "." or ".." component, at most 256 components of at most 255 bytes. "" = no component.
 */
static int path_split(const char *path, char **ret_copy, char ***ret_parts, size_t *ret_n) {
        _cleanup_free_ char *copy = NULL;
        _cleanup_free_ char **parts = NULL;
        size_t n = 0, len;

        if (!path)
                return -EINVAL;
        len = strnlen(path, (NAME_MAX_BYTES + 1) * 256 + 1);
        if (len > (NAME_MAX_BYTES + 1) * 256)
                return -EINVAL;
        copy = strdup(path);
        parts = calloc(257, sizeof(char *));
        if (!copy || !parts)
                return -ENOMEM;
        if (len > 0)
                for (char *p = copy;;) {
                        char *slash = strchr(p, '/');

                        if (slash)
                                *slash = 0;
                        if (n == 256 || !cas_name_valid(p, strlen(p)))
                                return -EINVAL;
                        parts[n++] = p;
                        if (!slash)
                                break;
                        p = slash + 1;
                }
        *ret_copy = STEAL(copy);
        *ret_parts = STEAL(parts);
        *ret_n = n;
        return 0;
}

/*
 * Resolve @path in tree @root: the tree of its parent directory in @ret_parent and the entry
 * (pointing into it) in @ret_entry; for "" *ret_entry is NULL and @ret_parent the root tree.
 */
static int tree_resolve(Cas *c, const char *root_digest, const char *path, Tree *ret_parent,
                        const TreeEntry **ret_entry) {
        _cleanup_(tree_done) Tree cur = {};
        _cleanup_free_ char *copy = NULL;
        _cleanup_free_ char **parts = NULL;
        const TreeEntry *e = NULL;
        Digest d;
        size_t n;
        int r;

        r = digest_parse(root_digest, &d);
        if (r < 0)
                return r;
        r = path_split(path, &copy, &parts, &n);
        if (r < 0)
                return r;
        r = tree_load(c, &d, &cur);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                Tree next = {};

                e = tree_find(&cur, parts[i]);
                if (!e)
                        return -ENOENT;
                if (i + 1 == n)
                        break;
                if (e->type != DT_DIR)
                        return -ENOTDIR;
                d = e->digest;
                r = tree_load(c, &d, &next);
                if (r < 0)
                        return r == -ENOENT ? -EIO : r;     /* a tree naming a missing object */
                tree_done(&cur);
                cur = next;
                e = NULL;
        }
        *ret_parent = cur;
        cur = (Tree) {};
        *ret_entry = e;
        return 0;
}

void cas_entries_free(CasEntry *e, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(e[i].name);
                free(e[i].target);
        }
        free(e);
}

int cas_tree_list(Cas *c, const char *tree_digest, const char *dir_path, CasEntry **ret, size_t *ret_n) {
        _cleanup_(tree_done) Tree parent = {}, dir = {};
        const TreeEntry *e;
        CasEntry *v = NULL;
        const Tree *t;
        int r;

        assert(c);
        assert(ret);
        assert(ret_n);

        r = tree_resolve(c, tree_digest, dir_path, &parent, &e);
        if (r < 0)
                return r;
        t = &parent;
        if (e) {
                if (e->type != DT_DIR)
                        return -ENOTDIR;
                r = tree_load(c, &e->digest, &dir);
                if (r < 0)
                        return r == -ENOENT ? -EIO : r;
                t = &dir;
        }

        if (t->n > 0) {
                v = calloc(t->n, sizeof(CasEntry));
                if (!v)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < t->n; i++) {
                const TreeEntry *x = &t->entries[i];

                v[i] = (CasEntry) {
                        .name = strdup(x->name),
                        .type = x->type,
                        .mode = x->mode,
                        .size = x->size,
                };
                if (x->type != DT_LNK)
                        digest_format(&x->digest, v[i].digest);
                else
                        v[i].target = strdup(x->target);
                if (!v[i].name || (x->type == DT_LNK && !v[i].target)) {
                        cas_entries_free(v, i + 1);
                        return -ENOMEM;
                }
        }
        *ret = v;
        *ret_n = t->n;
        return 0;
}

int cas_open_file(Cas *c, const char *tree_digest, const char *path, int *ret_fd, uint64_t *ret_size,
                  char ret_digest[static 72]) {
        _cleanup_(tree_done) Tree parent = {};
        _cleanup_close_ int fd = -EBADF;
        const TreeEntry *e;
        struct stat st;
        char rel[66];
        int r;

        assert(c);
        assert(ret_fd);

        r = tree_resolve(c, tree_digest, path, &parent, &e);
        if (r < 0)
                return r;
        if (!e || e->type == DT_DIR)
                return -EISDIR;
        if (e->type == DT_LNK)
                return -ELOOP;

        digest_relpath(&e->digest, rel);
        fd = openat(c->objects_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? -EIO : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != e->size)
                return -EIO;

        if (ret_size)
                *ret_size = e->size;
        digest_format(&e->digest, ret_digest);
        *ret_fd = STEAL_FD(fd);
        return 0;
}
