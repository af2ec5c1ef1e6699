/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private to src/workspace/quota*.c: the records of the watcher's index (Inode, Node, Dir,
 * NodeSet) and the QuotaWatch struct, the few helpers small enough to inline, and the functions
 * one part calls in another. quota-scan.c is the one-shot scan, quota-index.c the index's tables
 * and tree, quota-sync.c brings names and directories of the index in line with the tree, and
 * quota.c is the watcher (QuotaWatch: events, the dirty set, polls, resync, degraded mode).
 * Nothing outside src/workspace/ includes this; the public API is quota.h. Functions return 0 or
 * a -errno, as there.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/hashmap.h"
#include "util/siphash24.h"
#include "workspace/quota.h"

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

static inline uint64_t inode_hash(dev_t dev, ino_t ino, const uint64_t key[2]) {
        uint64_t k[2] = { (uint64_t) dev, (uint64_t) ino };

        return siphash24_tweak(k, sizeof(k), key, 1);
}

static inline Inode *inode_find(const HashMap *t, dev_t dev, ino_t ino, uint64_t hash) {
        HASHMAP_FOREACH_HASH(l, t, hash) {
                Inode *i = hashmap_entry(l, Inode, link);

                if (i->dev == dev && i->ino == ino)
                        return i;
        }
        return NULL;
}

static inline uint64_t stat_bytes(const struct stat *st) {
        /* st_blocks is in 512-byte units whatever st_blksize says (stat(2)). */
        return st->st_blocks > 0 ? (uint64_t) st->st_blocks * 512U : 0;
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
        uint32_t gen;                   /* last quota_dir_sync() of the parent that saw this name */
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

static inline void watch_set_inode_bytes(QuotaWatch *w, Inode *i, uint64_t bytes) {
        w->bytes = w->bytes - i->bytes + bytes;
        i->bytes = bytes;
}

static inline bool inode_is(const Inode *i, const struct stat *st) {
        return i && i->dev == st->st_dev && i->ino == st->st_ino;
}

static inline uint32_t *nodeset_idx(const NodeSet *set, Node *n) {
        return (uint32_t *) ((uint8_t *) n + set->idx_offset);
}

/* quota-scan.c */
int quota_inode_add(HashMap *t, const struct stat *st, uint64_t hash, Inode **ret);
void limits_fill(QuotaLimits *l, const QuotaLimits *in);
int quota_random_key(uint64_t key[2]);

/* quota-index.c */
int quota_node_set_inode(QuotaWatch *w, Node *n, const struct stat *st);
Node *quota_node_find(const QuotaWatch *w, const Dir *parent, const char *name);
void quota_sparse_update(QuotaWatch *w, Node *n, const struct stat *st);
void quota_dirty_names_clear(Dir *d);
void quota_dirty_unlink(QuotaWatch *w, Dir *d);
void quota_dir_mark_dirty(QuotaWatch *w, Dir *d, const char *name);
void quota_dir_set_truncated(QuotaWatch *w, Dir *d, bool b);
void quota_dir_set_unreadable(QuotaWatch *w, Dir *d, bool b);
void quota_dir_unwatch(QuotaWatch *w, Dir *d, bool rm);
Dir *quota_wd_find(const QuotaWatch *w, int wd);
void quota_node_destroy(QuotaWatch *w, Node *n);
void quota_node_drop(QuotaWatch *w, Node *n);
void quota_limbo_flush(QuotaWatch *w);
bool quota_index_full(QuotaWatch *w);
int quota_node_new_file(QuotaWatch *w, Dir *parent, const char *name, const struct stat *st, Node **ret);
int quota_node_new_dir(QuotaWatch *w, Dir *parent, const char *name, const struct stat *st, int wd, Dir **ret);
bool quota_dir_is_below(const QuotaWatch *w, const Dir *d, const Dir *ancestor);
int quota_dir_move(QuotaWatch *w, Dir *d, Dir *parent, const char *name);

/* quota-sync.c */
int quota_watch_add(QuotaWatch *w, int fd);
int quota_dir_sync(QuotaWatch *w, Dir *d, int fd, bool recursive);
int quota_dir_open(QuotaWatch *w, Dir *d);
int quota_dir_refresh(QuotaWatch *w, Dir *d, bool all, char **names, size_t n_names);
