/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Workspace disk usage: one-shot full scans, and an inotify-maintained index for the 100 ms checks of a run. */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "workspace/quota.h"
#include "util/dirent-util.h"
#include "util/hashmap.h"
#include "util/macro.h"
#include "util/siphash24.h"

/* Events that can change the blocks of a name, or which inode a name refers to. IN_EXCL_UNLINK:
 * writes through a name already unlinked cannot be attributed by name anyway (an inode still
 * linked elsewhere is caught by the sweep), so do not queue their events. */
#define QUOTA_WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
                          IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR | IN_EXCL_UNLINK)
/* Past this many distinct dirty names in one directory, re-read the directory instead. */
#define DIRTY_NAMES_MAX 64U
/* A dirty directory that cannot be reopened at its indexed path this many ticks in a row means
 * the index lost track of it: resync. */
#define DIRTY_RETRIES_MAX 5U
/* Passes over the dirty set per tick at most (see watch_process_dirty()). */
#define DIRTY_PASSES_MAX 4U
/* Degraded full scans use at most 1/DEGRADED_DUTY of the time. */
#define DEGRADED_DUTY 5U
/* Bytes read from the inotify fd per tick at most: the rest waits for the next tick. */
#define DRAIN_BUFFER_SIZE (64U * 1024U)
#define DRAIN_ROUNDS_MAX 64U

/* ---------------------------------------------------------------------------------------------
 * Inode records: the blocks of each distinct inode, shared by all names that refer to it. */

typedef struct Node Node;

typedef struct Inode {
        HashLink link;
        dev_t dev;
        ino_t ino;
        uint64_t bytes;
        uint64_t refs;
        Node *names;                    /* the index's names of it (watcher only) */
} Inode;

static uint64_t inode_hash(dev_t dev, ino_t ino, const uint64_t key[2]) {
        uint64_t k[2] = { (uint64_t) dev, (uint64_t) ino };

        return siphash24_tweak(k, sizeof(k), key, 1);
}

static Inode *inode_find(const HashMap *t, dev_t dev, ino_t ino, uint64_t hash) {
        HASHMAP_FOREACH_HASH(l, t, hash) {
                Inode *i = hashmap_entry(l, Inode, link);

                if (i->dev == dev && i->ino == ino)
                        return i;
        }
        return NULL;
}

static uint64_t stat_bytes(const struct stat *st) {
        /* st_blocks is in 512-byte units whatever st_blksize says (stat(2)). */
        return st->st_blocks > 0 ? (uint64_t) st->st_blocks * 512U : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The one-shot scan (quota_scan(), and the degraded mode's periodic scans): no index, only the
 * inodes with more than one link are remembered, to count them once. */

typedef struct Scan {
        QuotaLimits limits;
        uint64_t key[2];
        HashMap links;
        uint64_t bytes, files, dirs, entries, stats;
} Scan;

static void inode_free_link(HashLink *l) {
        free(hashmap_entry(l, Inode, link));
}

static void scan_done(Scan *s) {
        hashmap_drain(&s->links, inode_free_link);
}

static int scan_account(Scan *s, const struct stat *st) {
        if (S_ISDIR(st->st_mode))
                s->dirs++;
        else
                s->files++;

        if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
                uint64_t h = inode_hash(st->st_dev, st->st_ino, s->key);
                Inode *i;
                int r;

                if (inode_find(&s->links, st->st_dev, st->st_ino, h))
                        return 0;
                i = calloc(1, sizeof(*i));
                if (!i)
                        return -ENOMEM;
                *i = (Inode) { .dev = st->st_dev, .ino = st->st_ino };
                r = hashmap_add(&s->links, &i->link, h);
                if (r < 0) {
                        free(i);
                        return r;
                }
        }
        s->bytes += stat_bytes(st);
        return 0;
}

/* Takes over @fd (a directory). */
static int scan_dir(Scan *s, int fd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        r = opendir_fd(fd, &d);
        if (r < 0)
                return r;

        for (;;) {
                struct stat st;
                int sub;

                r = readdir_no_dot(d, &de);
                if (r <= 0)
                        return r;
                if (++s->entries > s->limits.max_entries)
                        return -E2BIG;

                /* stat, then open directories with O_NOFOLLOW and account the fd's own stat: a name
                 * swapped for a symlink in between is then counted as what it is now. */
                for (unsigned attempt = 0;; attempt++) {
                        s->stats++;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                if (errno == ENOENT)
                                        break;
                                return negative_errno();
                        }
                        if (!S_ISDIR(st.st_mode)) {
                                r = scan_account(s, &st);
                                if (r < 0)
                                        return r;
                                break;
                        }
                        if (depth >= s->limits.max_depth)
                                return -E2BIG;
                        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0) {
                                if (errno == ENOENT)
                                        break;
                                if ((errno == ELOOP || errno == ENOTDIR) && attempt < 3)
                                        continue;
                                return negative_errno();
                        }
                        if (fstat(sub, &st) < 0) {
                                r = negative_errno();
                                (void) safe_close(sub);
                                return r;
                        }
                        r = scan_account(s, &st);
                        if (r < 0) {
                                (void) safe_close(sub);
                                return r;
                        }
                        r = scan_dir(s, sub, depth + 1);
                        if (r < 0)
                                return r;
                        break;
                }
        }
}

static void limits_fill(QuotaLimits *l, const QuotaLimits *in) {
        *l = in ? *in : (QuotaLimits) {};
        if (l->max_entries == 0)
                l->max_entries = QUOTA_MAX_ENTRIES_DEFAULT;
        if (l->max_depth == 0)
                l->max_depth = QUOTA_MAX_DEPTH_DEFAULT;
        if (l->max_watches == 0)
                l->max_watches = QUOTA_MAX_WATCHES_DEFAULT;
        if (l->max_index == 0)
                l->max_index = QUOTA_MAX_INDEX_DEFAULT;
        if (l->sparse_per_tick == 0)
                l->sparse_per_tick = QUOTA_SPARSE_PER_TICK_DEFAULT;
        if (l->sweep_per_tick == 0)
                l->sweep_per_tick = QUOTA_SWEEP_PER_TICK_DEFAULT;
}

static int random_key(uint64_t key[2]) {
        ssize_t n = getrandom(key, 2 * sizeof(uint64_t), 0);

        if (n < 0)
                return negative_errno();
        return n == 2 * sizeof(uint64_t) ? 0 : -EIO;
}

static int scan_run(int dir_fd, const QuotaLimits *limits, uint64_t *ret_bytes, QuotaStats *ret_stats) {
        Scan s = {};
        struct stat st;
        int fd, r;

        limits_fill(&s.limits, limits);
        r = random_key(s.key);
        if (r < 0)
                return r;

        /* An own open file description: readdir() must start at offset 0. */
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        s.stats++;
        if (fstat(fd, &st) < 0) {
                r = negative_errno();
                (void) safe_close(fd);
                return r;
        }
        r = scan_account(&s, &st);
        if (r < 0) {
                (void) safe_close(fd);
                return r;
        }
        r = scan_dir(&s, fd, 0);
        scan_done(&s);
        if (r < 0)
                return r;

        *ret_bytes = s.bytes;
        if (ret_stats)
                *ret_stats = (QuotaStats) {
                        .files = s.files,
                        .dirs = s.dirs,
                        .full_scans = 1,
                        .restats = s.stats,
                };
        return 0;
}

int quota_scan_full(int dir_fd, const QuotaLimits *limits, uint64_t *ret_bytes, QuotaStats *ret_stats) {
        assert(dir_fd >= 0);
        assert(ret_bytes);

        return scan_run(dir_fd, limits, ret_bytes, ret_stats);
}

int quota_scan(int dir_fd, uint64_t *ret_bytes, QuotaStats *ret_stats) {
        return quota_scan_full(dir_fd, NULL, ret_bytes, ret_stats);
}

/* ---------------------------------------------------------------------------------------------
 * The index. A Node is one name; a directory's Node also has a Dir, which is stable for the
 * lifetime of the directory in the index (its Node is reallocated when the directory is renamed,
 * its children point at the Dir). Names detached from the tree during a tick (a directory whose
 * name now means something else) wait under the pseudo-directory `limbo` until the end of the
 * tick: if the same directory (same watch descriptor) shows up elsewhere in the meantime, it is
 * moved back in O(1) with its whole subtree; otherwise it is destroyed. */

typedef struct Dir Dir;

struct Node {
        HashLink link;                  /* QuotaWatch.names, keyed by (parent, name); not for limbo */
        Dir *parent;                    /* NULL only for the root */
        Node *sib_prev, *sib_next;
        Inode *inode;
        Node *ino_prev, *ino_next;      /* Inode.names */
        Dir *dir;                       /* directories only */
        uint32_t gen;                   /* last dir_sync() of the parent that saw this name */
        uint32_t sparse_idx;            /* position in QuotaWatch.sparse, or NOT_IN_SET */
        uint32_t file_idx;              /* position in QuotaWatch.files (non-directories), or NOT_IN_SET */
        char name[];
};

#define NOT_IN_SET UINT32_MAX

/* An unordered set of nodes with O(1) add and remove (the node keeps its position), walked
 * round-robin by a cursor. */
typedef struct NodeSet {
        Node **v;
        size_t n, allocated, cursor;
        size_t idx_offset;              /* of the node's uint32_t position field */
} NodeSet;

struct Dir {
        HashLink link;                  /* QuotaWatch.wds, keyed by wd, while wd >= 0 */
        Node *node;
        Node *children;
        size_t n_children;
        int wd;
        unsigned depth;                 /* root = 0 */
        bool truncated;                 /* has subdirectories below max_depth, not indexed */
        bool unreadable;                /* could not be opened, read or searched: content unknown */
        Dir *dirty_prev, *dirty_next;   /* QuotaWatch.dirty_head */
        bool dirty, dirty_all;
        char **dirty_names;
        size_t n_dirty_names;
        unsigned retries;
};

struct QuotaWatch {
        QuotaLimits limits;
        int root_fd;
        int fd;                         /* inotify */
        uint64_t key[2];

        HashMap names;                  /* Node by (parent Dir, name) */
        HashMap inodes;                 /* Inode by (dev, ino) */
        HashMap wds;                    /* Dir by wd */
        Dir *root;
        Dir limbo;
        Dir *dirty_head, *dirty_tail;
        NodeSet sparse;                 /* regular files with holes below EOF: polled every tick */
        NodeSet files;                  /* all non-directories: swept round-robin */

        uint64_t bytes;                 /* sum of Inode.bytes */
        uint64_t n_nodes, n_files, n_dirs, n_watches;
        uint64_t n_truncated, n_unreadable;
        uint32_t gen;
        bool over_entries;              /* names were left out of the index: the tree is too big */
        bool need_resync;
        bool want_degrade;
        bool use_openat2;
        bool clearing;                  /* tearing the whole index down */
        bool remarked;                  /* the dirty set grew while it was being processed */

        /* degraded mode */
        bool degraded;
        int degraded_error;             /* last degraded scan's error, or 0 */
        uint64_t degraded_files, degraded_dirs;
        uint64_t next_scan_ns;

        uint64_t full_scans, events, restats;
        uint8_t *evbuf;
};

static uint64_t now_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec;
}

/* ---- inode records ---- */

static void watch_set_inode_bytes(QuotaWatch *w, Inode *i, uint64_t bytes) {
        w->bytes = w->bytes - i->bytes + bytes;
        i->bytes = bytes;
}

static int watch_ref_inode(QuotaWatch *w, const struct stat *st, Inode **ret) {
        uint64_t h = inode_hash(st->st_dev, st->st_ino, w->key);
        Inode *i;
        int r;

        i = inode_find(&w->inodes, st->st_dev, st->st_ino, h);
        if (!i) {
                i = calloc(1, sizeof(*i));
                if (!i)
                        return -ENOMEM;
                *i = (Inode) { .dev = st->st_dev, .ino = st->st_ino };
                r = hashmap_add(&w->inodes, &i->link, h);
                if (r < 0) {
                        free(i);
                        return r;
                }
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

static bool inode_is(const Inode *i, const struct stat *st) {
        return i && i->dev == st->st_dev && i->ino == st->st_ino;
}

static void dir_mark_dirty(QuotaWatch *w, Dir *d, const char *name);

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
                                dir_mark_dirty(w, o->parent, o->name);
                                break;
                        }
        watch_unref_inode(w, i);
}

/* Point @n at the inode described by @st. */
static int node_set_inode(QuotaWatch *w, Node *n, const struct stat *st) {
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

static Node *node_find(const QuotaWatch *w, const Dir *parent, const char *name) {
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

static uint32_t *nodeset_idx(const NodeSet *set, Node *n) {
        return (uint32_t *) ((uint8_t *) n + set->idx_offset);
}

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
static void sparse_update(QuotaWatch *w, Node *n, const struct stat *st) {
        if (S_ISREG(st->st_mode) && st->st_size > 0 && stat_bytes(st) < (uint64_t) st->st_size)
                nodeset_add(&w->sparse, n);
        else
                nodeset_remove(&w->sparse, n);
}

/* ---- dirty set ---- */

static void dirty_names_clear(Dir *d) {
        for (size_t i = 0; i < d->n_dirty_names; i++)
                free(d->dirty_names[i]);
        d->dirty_names = mfree(d->dirty_names);
        d->n_dirty_names = 0;
}

static void dirty_unlink(QuotaWatch *w, Dir *d) {
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
static void dir_mark_dirty(QuotaWatch *w, Dir *d, const char *name) {
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
                dirty_names_clear(d);
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
                dirty_names_clear(d);
                d->dirty_all = true;
                return;
        }
        d->n_dirty_names++;
}

/* ---- directories ---- */

static void dir_set_truncated(QuotaWatch *w, Dir *d, bool b) {
        if (d->truncated == b)
                return;
        d->truncated = b;
        if (b)
                w->n_truncated++;
        else
                w->n_truncated--;
}

static void dir_set_unreadable(QuotaWatch *w, Dir *d, bool b) {
        if (b) {
                /* Retried every tick until it can be read again (not in another pass of this one:
                 * nothing changes that before the sandbox does). */
                bool remarked = w->remarked;

                dir_mark_dirty(w, d, NULL);
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

static void dir_unwatch(QuotaWatch *w, Dir *d, bool rm) {
        if (d->wd < 0)
                return;
        if (rm && w->fd >= 0)
                (void) inotify_rm_watch(w->fd, d->wd);
        hashmap_remove(&w->wds, &d->link);
        d->wd = -1;
        w->n_watches--;
}

static Dir *wd_find(const QuotaWatch *w, int wd) {
        HASHMAP_FOREACH_HASH(l, &w->wds, (uint64_t) wd) {
                Dir *d = hashmap_entry(l, Dir, link);

                if (d->wd == wd)
                        return d;
        }
        return NULL;
}

/* Destroy @n and everything below it. */
static void node_destroy(QuotaWatch *w, Node *n) {
        Dir *d = n->dir;

        if (d) {
                while (d->children)
                        node_destroy(w, d->children);
                dir_unwatch(w, d, true);
                dirty_unlink(w, d);
                dirty_names_clear(d);
                dir_set_truncated(w, d, false);
                dir_set_unreadable(w, d, false);
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
static void node_drop(QuotaWatch *w, Node *n) {
        if (!n->dir) {
                node_destroy(w, n);
                return;
        }
        node_unlink(w, n);
        (void) node_link(w, n, &w->limbo);     /* limbo is not hashed: cannot fail */
}

static void limbo_flush(QuotaWatch *w) {
        while (w->limbo.children)
                node_destroy(w, w->limbo.children);
}

static bool index_full(QuotaWatch *w) {
        if (w->n_nodes < w->limits.max_entries && w->n_nodes < w->limits.max_index)
                return false;
        if (w->n_nodes >= w->limits.max_index && w->limits.max_index < w->limits.max_entries)
                w->want_degrade = true;
        else
                w->over_entries = true;
        return true;
}

/* A new name for a non-directory. */
static int node_new_file(QuotaWatch *w, Dir *parent, const char *name, const struct stat *st, Node **ret) {
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
static int node_new_dir(QuotaWatch *w, Dir *parent, const char *name, const struct stat *st, int wd, Dir **ret) {
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
                dir_unwatch(w, d, false);
                return r;
        }
        node_attach_inode(n, i);
        if (parent) {
                r = node_link(w, n, parent);
                if (r < 0) {
                        node_detach_inode(w, n);
                        dir_unwatch(w, d, false);
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

static bool dir_is_below(const QuotaWatch *w, const Dir *d, const Dir *ancestor) {
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
static int dir_move(QuotaWatch *w, Dir *d, Dir *parent, const char *name) {
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

static int watch_add(QuotaWatch *w, int fd) {
        char path[sizeof("/proc/self/fd/") + 12];
        int wd;

        if (w->n_watches >= w->limits.max_watches) {
                w->want_degrade = true;
                return -ENOSPC;
        }
        /* Through the magic link: exactly the inode we opened and checked, no path walk. */
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%i", fd);
        wd = inotify_add_watch(w->fd, path, QUOTA_WATCH_MASK);
        if (wd < 0) {
                /* ENOSPC: max_user_watches; ENOMEM; ENOENT: no /proc. Only the index depends on it. */
                w->want_degrade = true;
                return negative_errno();
        }
        return wd;
}

static int dir_sync(QuotaWatch *w, Dir *d, int fd, bool recursive);

/*
 * Bring @name in @parent (open at @pfd) in line with the tree. New directories are watched, then
 * scanned; known ones (same watch descriptor) are re-attached where they are now, and scanned
 * only if @recursive. Return: 0, -EAGAIN if the name kept changing type under us (retry later),
 * or a fatal -errno.
 */
static int node_update(QuotaWatch *w, Dir *parent, int pfd, const char *name, bool recursive, uint32_t gen) {
        Node *old = node_find(w, parent, name);
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        Dir *d;
        int r, wd;

        for (unsigned attempt = 0;; attempt++) {
                if (attempt >= 3)
                        return -EAGAIN;

                w->restats++;
                if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT) {
                                if (old)
                                        node_drop(w, old);
                                return 0;
                        }
                        if (errno == EACCES) {
                                dir_set_unreadable(w, parent, true);
                                return 0;
                        }
                        return negative_errno();
                }
                if (!S_ISDIR(st.st_mode))
                        break;
                if (parent->depth >= w->limits.max_depth) {
                        dir_set_truncated(w, parent, true);
                        if (old)
                                node_drop(w, old);
                        return 0;
                }
                if (!recursive && old && old->dir && old->dir->wd >= 0 && !old->dir->unreadable &&
                    inode_is(old->inode, &st)) {
                        /* The indexed, watched directory: its content is kept current by its own
                         * watch; only its own blocks may have changed. (Were it deleted and the
                         * inode number reused, its IN_IGNORED, still queued, brings us back.) */
                        old->gen = gen;
                        watch_set_inode_bytes(w, old->inode, stat_bytes(&st));
                        return 0;
                }
                fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0)
                        break;
                if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                        continue;               /* changed between stat and open: look again */
                if (errno != EACCES)
                        return negative_errno();
                break;                          /* a directory we may not open: unreadable */
        }

        if (!S_ISDIR(st.st_mode)) {
                if (old && old->dir) {
                        node_drop(w, old);
                        old = NULL;
                }
                if (old) {
                        old->gen = gen;
                        r = node_set_inode(w, old, &st);
                        if (r < 0)
                                return r;
                        sparse_update(w, old, &st);
                        return 0;
                }
                if (index_full(w))
                        return 0;
                r = node_new_file(w, parent, name, &st, &old);
                if (r < 0)
                        return r;
                old->gen = gen;
                sparse_update(w, old, &st);
                return 0;
        }

        if (fd < 0) {
                /* EACCES: count the directory's own blocks, flag its content as unknown (what is
                 * indexed below it stays, for when it becomes readable again). */
                if (old && old->dir && inode_is(old->inode, &st)) {
                        old->gen = gen;
                        dir_set_unreadable(w, old->dir, true);
                        return node_set_inode(w, old, &st);
                }
                if (old)
                        node_drop(w, old);
                if (index_full(w))
                        return 0;
                r = node_new_dir(w, parent, name, &st, -1, &d);
                if (r < 0)
                        return r;
                d->node->gen = gen;
                dir_set_unreadable(w, d, true);
                return 0;
        }

        w->restats++;
        if (fstat(fd, &st) < 0)
                return negative_errno();

        wd = watch_add(w, fd);
        if (wd < 0)
                return 0;                       /* degrading: the index is about to go */

        d = wd_find(w, wd);
        if (d) {
                /* The same directory (the kernel handed out its existing watch). */
                if (d == parent || dir_is_below(w, parent, d)) {
                        /* The index thinks @parent is inside @d: it missed a move. */
                        w->need_resync = true;
                        return 0;
                }
                if (old && old != d->node)
                        node_drop(w, old);
                r = dir_move(w, d, parent, name);
                if (r < 0)
                        return r;
                d->node->gen = gen;
                r = node_set_inode(w, d->node, &st);
                if (r < 0)
                        return r;
                if (!recursive && !d->unreadable)
                        return 0;
                dir_set_unreadable(w, d, false);
                return dir_sync(w, d, STEAL_FD(fd), recursive);
        }

        if (old)
                node_drop(w, old);
        if (index_full(w)) {
                (void) inotify_rm_watch(w->fd, wd);
                return 0;
        }
        r = node_new_dir(w, parent, name, &st, wd, &d);
        if (r < 0) {
                (void) inotify_rm_watch(w->fd, wd);
                return r;
        }
        d->node->gen = gen;
        /* New here (created, or moved in whole): its watch is in place, now read what it holds. */
        return dir_sync(w, d, STEAL_FD(fd), true);
}

/*
 * Re-read the directory @d, open at @fd (taken over): every name is updated, names gone are
 * dropped. Subdirectories already indexed are descended into only if @recursive.
 */
static int dir_sync(QuotaWatch *w, Dir *d, int fd, bool recursive) {
        _cleanup_(closedirp) DIR *dir = NULL;
        uint32_t gen = ++w->gen;
        struct dirent *de;
        int r;

        r = opendir_fd(fd, &dir);
        if (r < 0)
                return r;

        dir_set_truncated(w, d, false);
        for (;;) {
                if (w->want_degrade)
                        return 0;

                r = readdir_no_dot(dir, &de);
                if (r == 0)
                        break;
                if (r == -EACCES) {
                        dir_set_unreadable(w, d, true);
                        return 0;
                }
                if (r < 0)
                        return r;

                r = node_update(w, d, dirfd(dir), de->d_name, recursive, gen);
                if (r == -EAGAIN) {
                        dir_mark_dirty(w, d, de->d_name);
                        Node *n = node_find(w, d, de->d_name);
                        if (n)
                                n->gen = gen;   /* keep it until the retry */
                        continue;
                }
                if (r < 0)
                        return r;
        }

        /* What was not seen is gone. Unless the directory turned out unreadable half-way. */
        if (!d->unreadable && !w->want_degrade)
                for (Node *c = d->children, *next; c; c = next) {
                        next = c->sib_next;
                        if (c->gen != gen)
                                node_drop(w, c);
                }
        return 0;
}

/*
 * Open the indexed directory @d beneath the root, without following symlinks, and check that it
 * is still the indexed inode. Return: the fd; -ESTALE if the index path no longer leads to it
 * (a rename whose events are still queued); -ENOLINK if @d is detached from the index (in limbo);
 * -EACCES; other -errno.
 */
static int dir_open(QuotaWatch *w, Dir *d) {
        _cleanup_free_ Node **chain = NULL;
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        size_t n = 0;

        chain = calloc(w->limits.max_depth + 2, sizeof(Node *));
        buf = malloc(PATH_MAX);
        if (!chain || !buf)
                return -ENOMEM;

        for (Dir *i = d; i != w->root; i = i->node->parent) {
                if (!i->node->parent || i->node->parent == &w->limbo)
                        return -ENOLINK;        /* detached this tick: found again, or destroyed */
                if (n > w->limits.max_depth)
                        return -ESTALE;
                chain[n++] = i->node;
        }

        fd = openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();

        while (n > 0) {
                size_t len = 0;
                int nfd;

                /* As many components as fit in one path (a deep tree is longer than PATH_MAX). */
                do {
                        const char *c = chain[n - 1]->name;
                        size_t l = strlen(c);

                        if (len > 0 && len + 1 + l >= PATH_MAX)
                                break;
                        if (len > 0)
                                buf[len++] = '/';
                        memcpy(buf + len, c, l);
                        len += l;
                        n--;
                } while (n > 0 && w->use_openat2);
                buf[len] = '\0';

                if (w->use_openat2) {
                        struct open_how how = {
                                .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                        };

                        nfd = (int) syscall(SYS_openat2, fd, buf, &how, sizeof(how));
                        if (nfd < 0 && (errno == ENOSYS || errno == EPERM) && w->use_openat2) {
                                /* Kernel < 5.6 or a seccomp filter: one component at a time. */
                                w->use_openat2 = false;
                                return -EAGAIN;
                        }
                } else
                        nfd = openat(fd, buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0) {
                        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ||
                            errno == EAGAIN)
                                return -ESTALE;
                        return negative_errno();
                }
                (void) safe_close(fd);
                fd = nfd;
        }

        w->restats++;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!inode_is(d->node->inode, &st))
                return -ESTALE;
        return STEAL_FD(fd);
}

/* Process one directory of the dirty set (all of it with @all, else @names). Return: 0, -ESTALE
 * or -ENOLINK to retry, or a fatal -errno. */
static int dir_refresh(QuotaWatch *w, Dir *d, bool all, char **names, size_t n_names) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        fd = dir_open(w, d);
        if (fd == -EAGAIN)
                fd = dir_open(w, d);            /* the openat2() fallback just kicked in */
        if (fd == -EACCES) {
                dir_set_unreadable(w, d, true);
                return 0;
        }
        if (fd < 0)
                return fd;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        r = node_set_inode(w, d->node, &st);    /* the directory's own blocks grow with its entries */
        if (r < 0)
                return r;

        if (d->wd < 0) {
                /* Unreadable before, or its watch was lost: watch it again and read it whole. */
                int wd = watch_add(w, fd);

                if (wd < 0)
                        return 0;
                if (wd_find(w, wd)) {
                        (void) inotify_rm_watch(w->fd, wd);
                        w->need_resync = true;
                        return 0;
                }
                r = hashmap_add(&w->wds, &d->link, (uint64_t) wd);
                if (r < 0) {
                        (void) inotify_rm_watch(w->fd, wd);
                        return r;
                }
                d->wd = wd;
                w->n_watches++;
                dir_set_unreadable(w, d, false);
                return dir_sync(w, d, STEAL_FD(fd), true);
        }

        if (all || d->truncated || d->unreadable) {
                dir_set_unreadable(w, d, false);
                return dir_sync(w, d, STEAL_FD(fd), false);
        }

        for (size_t i = 0; i < n_names && !w->want_degrade; i++) {
                r = node_update(w, d, fd, names[i], false, w->gen);
                if (r == -EAGAIN) {
                        dir_mark_dirty(w, d, names[i]);
                        continue;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- whole-index operations ---- */

static void watch_clear_index(QuotaWatch *w) {
        w->clearing = true;
        if (w->root) {
                Node *n = w->root->node;

                node_destroy(w, n);
                w->root = NULL;
        }
        limbo_flush(w);
        assert(w->n_nodes == 0 && w->n_watches == 0 && w->bytes == 0);
        w->dirty_head = w->dirty_tail = NULL;
        assert(w->sparse.n == 0 && w->files.n == 0);
        w->sparse.cursor = w->files.cursor = 0;
        w->clearing = false;
        w->over_entries = false;
        w->need_resync = false;
}

static int watch_degraded_scan(QuotaWatch *w) {
        QuotaStats s;
        uint64_t start = now_ns(), bytes, dur;
        int r;

        r = quota_scan_full(w->root_fd, &w->limits, &bytes, &s);
        dur = now_ns() - start;
        w->next_scan_ns = start + dur * DEGRADED_DUTY;
        w->full_scans++;
        w->restats += s.restats;
        if (r < 0) {
                w->degraded_error = r;
                return r;
        }
        w->degraded_error = 0;
        w->bytes = bytes;
        w->degraded_files = s.files;
        w->degraded_dirs = s.dirs;
        return 0;
}

static int watch_degrade(QuotaWatch *w) {
        if (!w->degraded)
                watch_clear_index(w);
        w->degraded = true;
        w->want_degrade = false;
        return watch_degraded_scan(w);
}

/* Drain and discard whatever is queued (degraded mode, where nothing is watched any more). */
static void watch_drain_discard(QuotaWatch *w) {
        for (unsigned i = 0; i < DRAIN_ROUNDS_MAX; i++)
                if (read(w->fd, w->evbuf, DRAIN_BUFFER_SIZE) <= 0)
                        return;
}

static int watch_resync(QuotaWatch *w) {
        struct stat st;
        int fd, r;

        /* The dirty set is subsumed; what changes from here on is queued for the next tick. */
        while (w->dirty_head) {
                Dir *d = w->dirty_head;

                dirty_unlink(w, d);
                dirty_names_clear(d);
                d->dirty_all = false;
                d->retries = 0;
        }
        w->need_resync = false;
        w->over_entries = false;
        w->full_scans++;

        fd = openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        w->restats++;
        if (fstat(fd, &st) < 0) {
                r = negative_errno();
                (void) safe_close(fd);
                return r;
        }
        watch_set_inode_bytes(w, w->root->node->inode, stat_bytes(&st));
        r = dir_sync(w, w->root, fd, true);
        limbo_flush(w);
        return r;
}

static int watch_drain(QuotaWatch *w) {
        for (unsigned round = 0; round < DRAIN_ROUNDS_MAX; round++) {
                ssize_t n = read(w->fd, w->evbuf, DRAIN_BUFFER_SIZE);

                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return negative_errno();
                }
                if (n == 0)
                        return 0;

                for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t) n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) (w->evbuf + off);
                        Dir *d;

                        off += sizeof(struct inotify_event) + ev->len;
                        w->events++;

                        if (ev->mask & IN_Q_OVERFLOW) {
                                w->need_resync = true;
                                continue;
                        }
                        d = wd_find(w, ev->wd);
                        if (!d)
                                continue;       /* a watch we removed: its IN_IGNORED and stragglers */
                        if (ev->mask & IN_IGNORED) {
                                /* The kernel dropped the watch: the directory is gone (or its fs). */
                                dir_unwatch(w, d, false);
                                if (d == w->root)
                                        w->need_resync = true;
                                else if (d->node->parent && d->node->parent != &w->limbo)
                                        dir_mark_dirty(w, d->node->parent, d->node->name);
                                continue;
                        }
                        if (ev->len > 0 && ev->name[0] != '\0')
                                dir_mark_dirty(w, d, ev->name);
                        else
                                dir_mark_dirty(w, d, NULL);
                }
        }
        return 0;
}

/* Process the dirty set as it stands; what gets re-marked meanwhile waits for the next pass. */
static int watch_process_dirty_pass(QuotaWatch *w, bool final) {
        Dir *last = w->dirty_tail;

        while (w->dirty_head && !w->want_degrade && !w->need_resync) {
                Dir *d = w->dirty_head;
                bool is_last = d == last, all = d->dirty_all;
                char **names = d->dirty_names;
                size_t n_names = d->n_dirty_names;
                int r;

                dirty_unlink(w, d);
                d->dirty_names = NULL;
                d->n_dirty_names = 0;
                d->dirty_all = false;

                r = dir_refresh(w, d, all, names, n_names);
                if (r == -ESTALE || r == -ENOLINK) {
                        /* Not where the index says: renamed, the events saying where are still
                         * queued or further down the dirty set. Retry; a persistent mismatch
                         * means the index lost track. In limbo: keep the names in case it is
                         * found again this tick, but that is no reason for another pass. */
                        bool remarked = w->remarked;

                        if (r == -ESTALE && final && ++d->retries >= DIRTY_RETRIES_MAX)
                                w->need_resync = true;
                        if (all)
                                d->dirty_all = true;
                        dir_mark_dirty(w, d, NULL);
                        for (size_t i = 0; i < n_names; i++)
                                dir_mark_dirty(w, d, names[i]);
                        if (r == -ENOLINK)
                                w->remarked = remarked;
                        r = 0;
                } else if (r >= 0)
                        d->retries = 0;

                for (size_t i = 0; i < n_names; i++)
                        free(names[i]);
                free(names);
                if (r < 0)
                        return r;
                if (is_last)
                        break;
        }
        return 0;
}

static int watch_process_dirty(QuotaWatch *w) {
        int r;

        /* Processing can make more work for this tick: names changed in a directory that was then
         * renamed (its new path is known once the rename is processed, maybe later in the pass),
         * or the other names of a hard-linked inode one of whose names went away. A few more
         * passes for those, so that the tick is exact rather than one tick late; bounded, as a
         * writer racing us could keep them coming. */
        for (unsigned pass = 0; pass < DIRTY_PASSES_MAX; pass++) {
                w->remarked = false;
                r = watch_process_dirty_pass(w, pass == DIRTY_PASSES_MAX - 1);
                if (r < 0)
                        return r;
                if (!w->remarked) {
                        /* Settled: what is still in limbo has left the tree. Destroying it may ask
                         * for re-stats of other names of its hard-linked files. */
                        limbo_flush(w);
                        if (!w->remarked)
                                return 0;
                }
        }
        return 0;
}

/*
 * Re-stat up to @budget nodes of @set, round-robin. The sparse set: their holes can be filled
 * through mmap() without any event. All files (the sweep): a safety net for writes no event
 * names (through a hard link created and removed between two ticks, Linux AIO). Whatever does not
 * match the index is handed to the dirty set.
 */
static int watch_poll_set(QuotaWatch *w, NodeSet *set, uint64_t budget) {
        _cleanup_close_ int fd = -EBADF;
        Dir *fd_dir = NULL;

        budget = MIN(budget, (uint64_t) set->n);
        while (budget > 0 && set->n > 0 && !w->want_degrade) {
                struct stat st;
                size_t at;
                Node *n;

                budget--;
                if (set->cursor >= set->n)
                        set->cursor = 0;
                at = set->cursor;
                n = set->v[at];

                if (n->parent != fd_dir) {
                        fd = safe_close(fd);
                        fd_dir = n->parent;
                        fd = n->parent->dirty ? -ESTALE : dir_open(w, n->parent);
                        if (fd < 0 && fd != -ESTALE && fd != -ENOLINK && fd != -EACCES && fd != -EAGAIN)
                                return fd;
                }
                if (fd < 0) {
                        set->cursor++;          /* dirty or unreachable: the dirty set has it */
                        continue;
                }

                w->restats++;
                if (fstatat(fd, n->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !inode_is(n->inode, &st) ||
                    S_ISDIR(st.st_mode)) {
                        dir_mark_dirty(w, n->parent, n->name);
                        set->cursor++;
                        continue;
                }
                watch_set_inode_bytes(w, n->inode, stat_bytes(&st));
                sparse_update(w, n, &st);
                if (*nodeset_idx(set, n) == at)
                        set->cursor++;          /* else the last one moved into this slot */
        }
        return 0;
}

static int watch_result(const QuotaWatch *w, uint64_t *ret_bytes) {
        if (w->degraded) {
                if (w->degraded_error < 0)
                        return w->degraded_error;
        } else {
                if (w->over_entries || w->n_truncated > 0)
                        return -E2BIG;
                if (w->n_unreadable > 0)
                        return -EACCES;
        }
        *ret_bytes = w->bytes;
        return 0;
}

int quota_watch_tick(QuotaWatch *w, uint64_t *ret_bytes) {
        int r;

        assert(w);
        assert(ret_bytes);

        if (w->degraded) {
                watch_drain_discard(w);
                if (now_ns() >= w->next_scan_ns)
                        (void) watch_degraded_scan(w);
                return watch_result(w, ret_bytes);
        }

        r = watch_drain(w);
        if (r < 0)
                return r;

        if (!w->need_resync) {
                r = watch_process_dirty(w);
                if (r < 0) {
                        limbo_flush(w);
                        return r;
                }
        }
        limbo_flush(w);
        if (!w->need_resync && w->limits.sparse_per_tick != QUOTA_SPARSE_POLL_DISABLED) {
                r = watch_poll_set(w, &w->sparse, w->limits.sparse_per_tick);
                if (r < 0)
                        return r;
        }
        if (!w->need_resync && w->limits.sweep_per_tick != QUOTA_SWEEP_DISABLED) {
                r = watch_poll_set(w, &w->files, w->limits.sweep_per_tick);
                if (r < 0)
                        return r;
        }

        /* Names were left out of a too-big tree: once it shrank well below the cap, index them. */
        if (w->over_entries && w->n_nodes < w->limits.max_entries / 10 * 9)
                w->need_resync = true;

        if (w->need_resync && !w->want_degrade) {
                r = watch_resync(w);
                if (r < 0)
                        return r;
        }
        if (w->want_degrade) {
                r = watch_degrade(w);
                if (r < 0)
                        return r;
        }
        return watch_result(w, ret_bytes);
}

int quota_watch_new_full(int dir_fd, const QuotaLimits *limits, QuotaWatch **ret) {
        _cleanup_(quota_watch_freep) QuotaWatch *w = NULL;
        struct stat st;
        int r, wd;

        assert(dir_fd >= 0);
        assert(ret);

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (QuotaWatch) {
                .root_fd = -EBADF,
                .fd = -EBADF,
                .use_openat2 = true,
                .sparse.idx_offset = offsetof(Node, sparse_idx),
                .files.idx_offset = offsetof(Node, file_idx),
        };
        w->limbo.wd = -1;
        limits_fill(&w->limits, limits);
        r = random_key(w->key);
        if (r < 0)
                return r;
        w->evbuf = malloc(DRAIN_BUFFER_SIZE);
        if (!w->evbuf)
                return -ENOMEM;

        w->root_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w->root_fd < 0)
                return negative_errno();
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->fd < 0) {
                if (errno != EMFILE && errno != ENFILE && errno != ENOMEM)
                        return negative_errno();
                /* Out of inotify instances: still usable, by full scans. The caller polls the
                 * timer anyway; give it an fd that never becomes readable. */
                w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
                if (w->fd < 0)
                        return negative_errno();
                r = watch_degrade(w);
                if (r < 0)
                        return r;
                *ret = STEAL(w);
                return 0;
        }

        if (fstat(w->root_fd, &st) < 0)
                return negative_errno();
        w->restats++;
        wd = watch_add(w, w->root_fd);
        r = node_new_dir(w, NULL, "", &st, wd < 0 ? -1 : wd, &w->root);
        if (r < 0)
                return r;
        w->full_scans++;
        if (!w->want_degrade) {
                int fd = openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (fd < 0)
                        return negative_errno();
                r = dir_sync(w, w->root, fd, true);
                if (r < 0)
                        return r;
                limbo_flush(w);
        }
        if (w->want_degrade) {
                r = watch_degrade(w);
                if (r < 0)
                        return r;
        }

        r = watch_result(w, &(uint64_t) { 0 });
        if (r < 0)
                return r;
        *ret = STEAL(w);
        return 0;
}

int quota_watch_new(int dir_fd, QuotaWatch **ret) {
        return quota_watch_new_full(dir_fd, NULL, ret);
}

int quota_watch_fd(const QuotaWatch *w) {
        assert(w);
        return w->fd;
}

void quota_watch_stats(const QuotaWatch *w, QuotaStats *ret) {
        assert(w);
        assert(ret);

        *ret = (QuotaStats) {
                .files = w->degraded ? w->degraded_files : w->n_files,
                .dirs = w->degraded ? w->degraded_dirs : w->n_dirs,
                .watches = w->n_watches,
                .full_scans = w->full_scans,
                .events = w->events,
                .restats = w->restats,
                .degraded = w->degraded,
        };
}

void quota_watch_request_resync(QuotaWatch *w) {
        assert(w);
        if (!w->degraded)
                w->need_resync = true;
        else
                w->next_scan_ns = 0;
}

QuotaWatch *quota_watch_free(QuotaWatch *w) {
        if (!w)
                return NULL;

        if (w->degraded)
                w->bytes = 0;                   /* from the last scan, not from the (empty) index */

        /* Closing the inotify fd drops all watches at once; no inotify_rm_watch() per directory. */
        w->fd = safe_close(w->fd);
        watch_clear_index(w);
        hashmap_done(&w->names);
        hashmap_done(&w->inodes);
        hashmap_done(&w->wds);
        free(w->sparse.v);
        free(w->files.v);
        w->root_fd = safe_close(w->root_fd);
        free(w->evbuf);
        return mfree(w);
}
