/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private to src/workspace/cas/: the Cas struct, the types and limits its parts share, and the
 * functions one part calls in another. Nothing outside cas/ includes this; the public API is
 * cas.h. Functions follow the conventions of cas.h (0 or -errno, -EIO for a corrupt store).
 */
#pragma once

#include "util/string-util.h"   /* hex_encode() */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <nettle/sha2.h>

#include "util/macro.h"
#include "workspace/cas/cas.h"

#define TREE_MAGIC "sr-tree 1\n"
#define CACHE_MAGIC "sr-statcache 1\n"
#define DIGEST_PREFIX "sha256:"
#define DIGEST_HEX_LEN 64U
#define NAME_MAX_BYTES 255U
#define SYMLINK_MAX_BYTES 4095U                         /* PATH_MAX - 1 */
#define IO_BUFFER_SIZE ((size_t) 256 << 10)           /* files up to this are read in one go */
#define BATCH_MAX_OBJECTS 4096U                         /* objects per fsync batch */
#define BATCH_MAX_BYTES (UINT64_C(256) << 20)           /* dirty bytes per fsync batch */
#define WRITEBACK_CHUNK (UINT64_C(8) << 20)            /* large objects: writeback started every 8 MiB */
#define BATCH_SYNCFS_MIN 16U                            /* from this many files: one syncfs() */
#define TREE_MAX_BYTES (UINT64_C(1) << 30)
#define REF_MAX_BYTES 4096U
#define CACHE_MAX_BYTES (UINT64_C(4) << 30)
#define RESTORE_SUFFIX ".cas-restore-"
#define RESTORE_RANDOM_LEN 16U
#define CAS_PREPARED_NAME_MAX 160   /* "." + an id (≤ 128) + ".pre"; also tmp/ names */

struct Cas {
        int root_fd;
        int objects_fd;
        int refs_fd;            /* refs/workspace */
        int tmp_fd;
        int cache_fd;

        CasLimits limits;

        CasCrashHook crash_hook;
        void *crash_userdata;
        bool crashed;           /* the hook fired: leave everything behind, as a crash would */
        bool need_sync;         /* objects may have been renamed into objects/ without the
                                 * directory sync (a flush failed half-way): syncfs() before
                                 * the next ref may name them */

        uint64_t tmp_prefix;    /* random, so that tmp names never collide across processes */
        uint64_t hash_seed;     /* digest hash tables: keyed, against engineered collisions */
};

/* cas.c: what every operation shares. */
int cas_random_u64(uint64_t *ret);
int cas_crash_point(Cas *c, const char *point);
int cas_store_lock(Cas *c, int operation);

/* cas-digest.c: digests and digest sets. */
typedef struct Digest {
        uint8_t b[SHA256_DIGEST_SIZE];
} Digest;

int cas_unhex_lower(char c);
int digest_from_hex(const char *s, Digest *ret);
int digest_parse(const char *s, Digest *ret);
void digest_format(const Digest *d, char out[static 72]);
void digest_relpath(const Digest *d, char out[static 66]);
void digest_of(const void *data, size_t size, Digest *ret);
bool digest_eq(const Digest *a, const Digest *b);

typedef struct DigestSet {
        Digest *keys;
        uint8_t *used;
        size_t n, cap;          /* cap: a power of two, load ≤ 1/2 */
        uint64_t seed;
} DigestSet;

bool cas_dset_contains(const DigestSet *s, const Digest *d);
int cas_dset_add(DigestSet *s, const Digest *d);
void cas_dset_clear(DigestSet *s);
void cas_dset_done(DigestSet *s);

/* cas-text.c: buffers, escaping, parsing. */
typedef struct Buf {
        char *data;
        size_t size, alloc;
} Buf;

void buf_done(Buf *b);
int buf_reserve(Buf *b, size_t more);
int buf_put(Buf *b, const void *p, size_t n);
int buf_puts(Buf *b, const char *s);
_printf_(2, 3) int buf_printf(Buf *b, const char *fmt, ...);
int buf_put_escaped(Buf *b, const char *s);
int cas_unescape(const char *s, size_t n, char **ret, size_t *ret_len);
bool cas_name_valid(const char *name, size_t len);
int parse_u64(const char **p, const char *end, char sep, uint64_t *ret);

/* cas-object.c: tmp/ files, objects published in batches. */
typedef struct PendingObject {
        Digest digest;
        char tmp[64];           /* "" once renamed into objects/ */
} PendingObject;

typedef struct Pending {
        PendingObject *items;
        size_t n, alloc;
        uint64_t bytes;
        DigestSet set;
} Pending;

int cas_tmp_open(Cas *c, char name[static 64], mode_t mode);
void cas_tmp_unlink(Cas *c, const char *name);
int cas_write_file_atomic_full(Cas *c, int dir_fd, const char *name, const void *data, size_t size, mode_t mode,
                           bool durable, int prepared_fd, const char *cas_prepared_name,
                           const char *crash_written, const char *crash_renamed);
int cas_write_file_atomic(Cas *c, int dir_fd, const char *name, const void *data, size_t size, mode_t mode,
                      const char *crash_written, const char *crash_renamed);
void cas_pending_done(Cas *c, Pending *p);
int cas_pending_add(Pending *p, const Digest *d, const char *tmp, uint64_t size);
int cas_pending_flush(Cas *c, Pending *p);
int cas_object_present(Cas *c, const Pending *p, const Digest *d, uint64_t size);
int cas_object_write_data(Cas *c, Pending *p, const Digest *d, const void *data, size_t size, const char *crash);
int cas_object_read(Cas *c, const Digest *d, uint64_t max, char **ret, size_t *ret_size);

/* cas-tree.c: tree objects. */
typedef struct TreeEntry {
        char *name;
        int type;               /* DT_REG, DT_DIR, DT_LNK */
        uint32_t mode;
        uint64_t size;
        Digest digest;          /* DT_REG, DT_DIR */
        char *target;           /* DT_LNK */
} TreeEntry;

typedef struct Tree {
        TreeEntry *entries;
        size_t n, alloc;
} Tree;

void tree_entry_done(TreeEntry *e);
void tree_done(Tree *t);
int tree_push(Tree *t, TreeEntry *e);
int tree_encode(const Tree *t, Buf *out);
int tree_load(Cas *c, const Digest *d, Tree *ret);

/* cas-stat-cache.c: the stat cache, timestamps. */
typedef struct CacheRow {
        char *path;
        uint64_t dev, ino, size, mtime, ctime;  /* times: cas_ts_key() */
        Digest digest;
} CacheRow;

typedef struct StatCache {
        CacheRow *rows;
        size_t n, alloc;
} StatCache;

struct timespec cas_now_coarse(void);
bool cas_ts_before(const struct timespec *a, const struct timespec *b);
uint64_t cas_ts_key(const struct timespec *t);
void cas_stat_cache_done(StatCache *sc);
int cas_stat_cache_add(StatCache *sc, const char *path, const struct stat *st, const Digest *d);
const CacheRow *cas_stat_cache_find(const StatCache *sc, const char *path);
int cas_stat_cache_load(Cas *c, const char *ws_id, StatCache *ret, Buf *ret_raw);
int cas_stat_cache_write(Cas *c, const char *ws_id, const StatCache *sc, const Buf *old_raw);

/* cas-ref.c: refs. */
typedef struct RefList {
        CasRef *refs;
        size_t n;
} RefList;

void cas_ref_list_done(RefList *l);
int cas_refs_load(int ws_dir_fd, RefList *ret);
void cas_prepared_name(const char *exec_id, char name[static CAS_PREPARED_NAME_MAX]);
int cas_ref_write(Cas *c, const char *ws_id, const char *exec_id, const Digest *tree, uint64_t created_ms,
              uint64_t bytes, int prepared_fd);
