/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The watcher's index: its tables (names by (parent, name), inodes by (dev, ino), directories by
 * watch descriptor), the tree of Nodes and Dirs with limbo, the node sets that are polled, and
 * the dirty set the events feed. Keeps QuotaWatch's counters (bytes, nodes, watches, truncated,
 * unreadable) in step with it. Makes no system call but inotify_rm_watch(): what is on disk is
 * read by quota-sync.c. Calls util/ only.
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "util/hashmap.h"
#include "util/macro.h"
#include "util/siphash24.h"
#include "workspace/quota-internal.h"

/* Past this many distinct dirty names in one directory, re-read the directory instead. */
#define DIRTY_NAMES_MAX 64U

/* ---- inode records ---- */

static int watch_ref_inode(QuotaWatch *w, const struct stat *st, Inode **ret) {
        uint64_t h = inode_hash(st->st_dev, st->st_ino, w->key);
        Inode *i;
        int r;

        i = inode_find(&w->inodes, st->st_dev, st->st_ino, h);
        if (!i) {
                r = quota_inode_add(&w->inodes, st, h, &i);
                if (r < 0)
                        return r;
        }
        i->refs++;
        /* Another name of the same inode, or the same name re-stat'ed: the latest stat wins. */
        watch_set_inode_bytes(w, i, stat_bytes(st));
        *ret = i;
        return 0;
}

static void watch_unref_inode(QuotaWatch *w, Inode *i) {
        if (!i)
                return;
        assert(i->refs > 0);
        if (--i->refs > 0)
                return;
        w->bytes -= i->bytes;
        hashmap_remove(&w->inodes, &i->link);
        free(i);
}


static void node_attach_inode(Node *n, Inode *i) {
        n->inode = i;
        n->ino_prev = NULL;
        n->ino_next = i->names;
        if (i->names)
                i->names->ino_prev = n;
        i->names = n;
}

static void inode_names_remove(Node *n) {
        if (n->ino_prev)
                n->ino_prev->ino_next = n->ino_next;
        else
                n->inode->names = n->ino_next;
        if (n->ino_next)
                n->ino_next->ino_prev = n->ino_prev;
        n->ino_prev = n->ino_next = NULL;
}

/* @n no longer refers to its inode. */
static void node_detach_inode(QuotaWatch *w, Node *n) {
        Inode *i = n->inode;

        if (!i)
                return;
        inode_names_remove(n);
        n->inode = NULL;

        /* A hard-linked inode keeps other names. Writes may have gone through the name that just
         * went away (its events are what brought us here), and nothing is reported for the other
         * names: re-stat one of them, or the shared record stays stale. */
        if (!w->clearing)
                for (Node *o = i->names; o; o = o->ino_next)
                        if (o->parent && o->parent != &w->limbo) {
                                quota_dir_mark_dirty(w, o->parent, o->name);
                                break;
                        }
        watch_unref_inode(w, i);
}

/* Point @n at the inode described by @st. */
int quota_node_set_inode(QuotaWatch *w, Node *n, const struct stat *st) {
        Inode *i;
        int r;

        if (inode_is(n->inode, st)) {
                watch_set_inode_bytes(w, n->inode, stat_bytes(st));
                return 0;
        }
        r = watch_ref_inode(w, st, &i);
        if (r < 0)
                return r;
        node_detach_inode(w, n);
        node_attach_inode(n, i);
        return 0;
}

/* ---- names ---- */

/* File names are chosen by the sandbox: the table is keyed with a random key against hash flooding. */
static uint64_t name_hash(const QuotaWatch *w, const Dir *parent, const char *name) {
        return siphash24_tweak(name, strlen(name), w->key, (uint64_t) (uintptr_t) parent);
}

Node *quota_node_find(const QuotaWatch *w, const Dir *parent, const char *name) {
        uint64_t h = name_hash(w, parent, name);

        HASHMAP_FOREACH_HASH(l, &w->names, h) {
                Node *n = hashmap_entry(l, Node, link);

                if (n->parent == parent && streq(n->name, name))
                        return n;
        }
        return NULL;
}

/* Link @n as a child of @parent (in the name table unless @parent is limbo). */
static int node_link(QuotaWatch *w, Node *n, Dir *parent) {
        int r;

        if (parent != &w->limbo) {
                r = hashmap_add(&w->names, &n->link, name_hash(w, parent, n->name));
                if (r < 0)
                        return r;
        }
        n->parent = parent;
        n->sib_prev = NULL;
        n->sib_next = parent->children;
        if (parent->children)
                parent->children->sib_prev = n;
        parent->children = n;
        parent->n_children++;
        return 0;
}

static void node_unlink(QuotaWatch *w, Node *n) {
        Dir *p = n->parent;

        if (!p)
                return;
        if (p != &w->limbo)
                hashmap_remove(&w->names, &n->link);
        if (n->sib_prev)
                n->sib_prev->sib_next = n->sib_next;
        else
                p->children = n->sib_next;
        if (n->sib_next)
                n->sib_next->sib_prev = n->sib_prev;
        n->sib_prev = n->sib_next = NULL;
        n->parent = NULL;
        p->n_children--;
}

static Node *node_alloc(const char *name) {
        size_t l = strlen(name);
        Node *n = calloc(1, offsetof(Node, name) + l + 1);

        if (!n)
                return NULL;
        memcpy(n->name, name, l + 1);
        n->sparse_idx = n->file_idx = NOT_IN_SET;
        return n;
}

/* ---- node sets ---- */

static void nodeset_remove(NodeSet *set, Node *n) {
        uint32_t *ip = nodeset_idx(set, n), i = *ip;

        if (i == NOT_IN_SET)
                return;
        assert(i < set->n && set->v[i] == n);
        set->v[i] = set->v[--set->n];
        *nodeset_idx(set, set->v[i]) = i;
        *ip = NOT_IN_SET;
}

static void nodeset_add(NodeSet *set, Node *n) {
        uint32_t *ip = nodeset_idx(set, n);

        if (*ip != NOT_IN_SET || set->n >= UINT32_MAX - 1)
                return;
        if (set->n == set->allocated) {
                size_t m = MAX(set->allocated * 2, (size_t) 64);
                Node **a = realloc(set->v, m * sizeof(Node *));

                if (!a)
                        return;         /* not polled: only what the events say, nothing worse */
                set->v = a;
                set->allocated = m;
        }
        *ip = (uint32_t) set->n;
        set->v[set->n++] = n;
}

/*
 * Keep @n in the poll set iff it is a regular file with unallocated ranges below its size: the
 * only place a store through a shared writable mapping can allocate blocks without an event (a
 * store past EOF raises SIGBUS; growing the size is a truncate or a write, both reported). A file
 * without holes can only grow through calls that inotify reports.
 */
void quota_sparse_update(QuotaWatch *w, Node *n, const struct stat *st) {
        if (S_ISREG(st->st_mode) && st->st_size > 0 && stat_bytes(st) < (uint64_t) st->st_size)
                nodeset_add(&w->sparse, n);
        else
                nodeset_remove(&w->sparse, n);
}

/* ---- dirty set ---- */

void quota_dirty_names_clear(Dir *d) {
        for (size_t i = 0; i < d->n_dirty_names; i++)
                free(d->dirty_names[i]);
        d->dirty_names = mfree(d->dirty_names);
        d->n_dirty_names = 0;
}

void quota_dirty_unlink(QuotaWatch *w, Dir *d) {
        if (!d->dirty)
                return;
        if (d->dirty_prev)
                d->dirty_prev->dirty_next = d->dirty_next;
        else
                w->dirty_head = d->dirty_next;
        if (d->dirty_next)
                d->dirty_next->dirty_prev = d->dirty_prev;
        else
                w->dirty_tail = d->dirty_prev;
        d->dirty_prev = d->dirty_next = NULL;
        d->dirty = false;
}

/* Note that @name in @d (or, with @name NULL, @d's own inode) changed. Idempotent and cheap: the
 * same name written to a thousand times between two ticks costs one comparison per event. */
void quota_dir_mark_dirty(QuotaWatch *w, Dir *d, const char *name) {
        w->remarked = true;
        if (!d->dirty) {
                d->dirty = true;
                d->dirty_prev = w->dirty_tail;
                d->dirty_next = NULL;
                if (w->dirty_tail)
                        w->dirty_tail->dirty_next = d;
                else
                        w->dirty_head = d;
                w->dirty_tail = d;
        }
        if (d->truncated || d->unreadable)
                d->dirty_all = true;
        if (!name || d->dirty_all)
                return;

        /* Most recent first: an appender hits on the first comparison. */
        for (size_t i = d->n_dirty_names; i > 0; i--)
                if (streq(d->dirty_names[i - 1], name))
                        return;

        if (d->n_dirty_names >= DIRTY_NAMES_MAX) {
                quota_dirty_names_clear(d);
                d->dirty_all = true;
                return;
        }
        if (!d->dirty_names) {
                d->dirty_names = calloc(DIRTY_NAMES_MAX, sizeof(char *));
                if (!d->dirty_names) {
                        d->dirty_all = true;    /* no memory for the name: re-read the directory */
                        return;
                }
        }
        d->dirty_names[d->n_dirty_names] = strdup(name);
        if (!d->dirty_names[d->n_dirty_names]) {
                quota_dirty_names_clear(d);
                d->dirty_all = true;
                return;
        }
        d->n_dirty_names++;
}

/* ---- directories ---- */

void quota_dir_set_truncated(QuotaWatch *w, Dir *d, bool b) {
        if (d->truncated == b)
                return;
        d->truncated = b;
        if (b)
                w->n_truncated++;
        else
                w->n_truncated--;
}

void quota_dir_set_unreadable(QuotaWatch *w, Dir *d, bool b) {
        if (b) {
                /* Retried every tick until it can be read again (not in another pass of this one:
                 * nothing changes that before the sandbox does). */
                bool remarked = w->remarked;

                quota_dir_mark_dirty(w, d, NULL);
                d->dirty_all = true;
                w->remarked = remarked;
        }
        if (d->unreadable == b)
                return;
        d->unreadable = b;
        if (b)
                w->n_unreadable++;
        else
                w->n_unreadable--;
}

void quota_dir_unwatch(QuotaWatch *w, Dir *d, bool rm) {
        if (d->wd < 0)
                return;
        if (rm && w->fd >= 0)
                (void) inotify_rm_watch(w->fd, d->wd);
        hashmap_remove(&w->wds, &d->link);
        d->wd = -1;
        w->n_watches--;
}

Dir *quota_wd_find(const QuotaWatch *w, int wd) {
        HASHMAP_FOREACH_HASH(l, &w->wds, (uint64_t) wd) {
                Dir *d = hashmap_entry(l, Dir, link);

                if (d->wd == wd)
                        return d;
        }
        return NULL;
}

/* Destroy @n and everything below it. */
void quota_node_destroy(QuotaWatch *w, Node *n) {
        Dir *d = n->dir;

        if (d) {
                while (d->children)
                        quota_node_destroy(w, d->children);
                quota_dir_unwatch(w, d, true);
                quota_dirty_unlink(w, d);
                quota_dirty_names_clear(d);
                quota_dir_set_truncated(w, d, false);
                quota_dir_set_unreadable(w, d, false);
                free(d);
                w->n_dirs--;
        } else {
                nodeset_remove(&w->sparse, n);
                nodeset_remove(&w->files, n);
                w->n_files--;
        }

        node_unlink(w, n);
        node_detach_inode(w, n);
        w->n_nodes--;
        free(n);
}

/* The name @n no longer refers to what it did: files go at once, directories wait in limbo. */
void quota_node_drop(QuotaWatch *w, Node *n) {
        if (!n->dir) {
                quota_node_destroy(w, n);
                return;
        }
        node_unlink(w, n);
        (void) node_link(w, n, &w->limbo);     /* limbo is not hashed: cannot fail */
}

void quota_limbo_flush(QuotaWatch *w) {
        while (w->limbo.children)
                quota_node_destroy(w, w->limbo.children);
}

bool quota_index_full(QuotaWatch *w) {
        if (w->n_nodes < w->limits.max_entries && w->n_nodes < w->limits.max_index)
                return false;
        if (w->n_nodes >= w->limits.max_index && w->limits.max_index < w->limits.max_entries)
                w->want_degrade = true;
        else
                w->over_entries = true;
        return true;
}

/* A new name for a non-directory. */
int quota_node_new_file(QuotaWatch *w, Dir *parent, const char *name, const struct stat *st, Node **ret) {
        _cleanup_free_ Node *n = NULL;
        Inode *i;
        int r;

        n = node_alloc(name);
        if (!n)
                return -ENOMEM;
        r = watch_ref_inode(w, st, &i);
        if (r < 0)
                return r;
        node_attach_inode(n, i);
        r = node_link(w, n, parent);
        if (r < 0) {
                node_detach_inode(w, n);
                return r;
        }
        w->n_nodes++;
        w->n_files++;
        nodeset_add(&w->files, n);
        *ret = STEAL(n);
        return 0;
}

/* A new directory node. @wd < 0: none (unreadable). */
int quota_node_new_dir(QuotaWatch *w, Dir *parent, const char *name, const struct stat *st, int wd, Dir **ret) {
        _cleanup_free_ Node *n = NULL;
        _cleanup_free_ Dir *d = NULL;
        Inode *i;
        int r;

        n = node_alloc(name);
        d = calloc(1, sizeof(*d));
        if (!n || !d)
                return -ENOMEM;
        *d = (Dir) { .node = n, .wd = -1, .depth = parent ? parent->depth + 1 : 0 };
        if (wd >= 0) {
                r = hashmap_add(&w->wds, &d->link, (uint64_t) wd);
                if (r < 0)
                        return r;
                d->wd = wd;
                w->n_watches++;
        }
        r = watch_ref_inode(w, st, &i);
        if (r < 0) {
                quota_dir_unwatch(w, d, false);
                return r;
        }
        node_attach_inode(n, i);
        if (parent) {
                r = node_link(w, n, parent);
                if (r < 0) {
                        node_detach_inode(w, n);
                        quota_dir_unwatch(w, d, false);
                        return r;
                }
        }
        n->dir = d;
        w->n_nodes++;
        w->n_dirs++;
        (void) STEAL(n);
        *ret = STEAL(d);
        return 0;
}

bool quota_dir_is_below(const QuotaWatch *w, const Dir *d, const Dir *ancestor) {
        for (unsigned i = 0; d && i <= w->limits.max_depth + 2; i++) {
                if (d == ancestor)
                        return true;
                d = d->node->parent;
        }
        return false;
}

static void dir_fix_depth(QuotaWatch *w, Dir *d, unsigned depth) {
        d->depth = depth;
        /* Moved below the cap: let a resync truncate it. Or moved up, with subdirectories it could
         * not index before: let a resync read them. (Either way the run is over the cap or was.) */
        if (depth > w->limits.max_depth || (d->truncated && depth < w->limits.max_depth))
                w->need_resync = true;
        for (Node *c = d->children; c; c = c->sib_next)
                if (c->dir && depth < w->limits.max_depth + 2)
                        dir_fix_depth(w, c->dir, depth + 1);
}

/* Re-attach the directory @d (found by its watch descriptor) as @name in @parent. */
int quota_dir_move(QuotaWatch *w, Dir *d, Dir *parent, const char *name) {
        Node *old = d->node, *n;
        int r;

        if (old->parent == parent && streq(old->name, name))
                return 0;
        n = node_alloc(name);
        if (!n)
                return -ENOMEM;
        node_unlink(w, old);
        r = node_link(w, n, parent);
        if (r < 0) {
                free(n);
                /* Keep the directory reachable for destruction at the end of the tick. */
                (void) node_link(w, old, &w->limbo);
                return r;
        }
        node_attach_inode(n, old->inode);
        inode_names_remove(old);
        n->dir = d;
        n->gen = old->gen;
        d->node = n;
        free(old);
        if (d->depth != parent->depth + 1)
                dir_fix_depth(w, d, parent->depth + 1);
        /* Its pending names failed to resolve at the old path earlier in this pass: another pass. */
        if (d->dirty)
                w->remarked = true;
        return 0;
}
