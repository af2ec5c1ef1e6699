/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The content-addressed snapshot store of workspaces: objects, trees, refs, stat cache, gc. */

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
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <stdatomic.h>
#include <unistd.h>

#include <json-c/json.h>
#include <nettle/sha2.h>

#include "workspace/cas/cas.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/workspace.h"

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);
SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);

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

/* ---------------------------------------------------------------------------------------------
 * Small helpers: digests, buffers, escaping, I/O. */

typedef struct Digest {
        uint8_t b[SHA256_DIGEST_SIZE];
} Digest;

static const char hex_lower[] = "0123456789abcdef";
static const char hex_upper[] = "0123456789ABCDEF";

static void hex_encode(const uint8_t *p, size_t n, char *out) {
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = hex_lower[p[i] >> 4];
                out[2 * i + 1] = hex_lower[p[i] & 15];
        }
        out[2 * n] = 0;
}

static int unhex_lower(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

static int unhex_upper(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Exactly 64 lowercase hex digits at @s (not necessarily NUL-terminated). */
static int digest_from_hex(const char *s, Digest *ret) {
        Digest d = {};

        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
                int hi = unhex_lower(s[2 * i]), lo = hi < 0 ? -1 : unhex_lower(s[2 * i + 1]);

                if (lo < 0)
                        return -EINVAL;
                d.b[i] = (uint8_t) (hi << 4 | lo);
        }
        *ret = d;
        return 0;
}

static int digest_parse(const char *s, Digest *ret) {
        if (!s || strncmp(s, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) != 0)
                return -EINVAL;
        s += strlen(DIGEST_PREFIX);
        if (strnlen(s, DIGEST_HEX_LEN + 1) != DIGEST_HEX_LEN)
                return -EINVAL;
        return digest_from_hex(s, ret);
}

static void digest_format(const Digest *d, char out[static 72]) {
        memcpy(out, DIGEST_PREFIX, strlen(DIGEST_PREFIX));
        hex_encode(d->b, sizeof(d->b), out + strlen(DIGEST_PREFIX));
}

/* "xx/yyyy…": the object's path below objects/. */
static void digest_relpath(const Digest *d, char out[static 66]) {
        char hex[DIGEST_HEX_LEN + 1];

        hex_encode(d->b, sizeof(d->b), hex);
        out[0] = hex[0];
        out[1] = hex[1];
        out[2] = '/';
        memcpy(out + 3, hex + 2, DIGEST_HEX_LEN - 2 + 1);
}

static void digest_of(const void *data, size_t size, Digest *ret) {
        struct sha256_ctx h;

        sha256_init(&h);
        sha256_update(&h, size, data);
        sha256_digest(&h, sizeof(ret->b), ret->b);
}

static bool digest_eq(const Digest *a, const Digest *b) {
        return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

typedef struct Buf {
        char *data;
        size_t size, alloc;
} Buf;

static void buf_done(Buf *b) {
        b->data = mfree(b->data);
        b->size = b->alloc = 0;
}

/* Room for @more bytes plus a terminating NUL. */
static int buf_reserve(Buf *b, size_t more) {
        size_t need, n;
        char *p;

        if (more > SIZE_MAX / 2 - b->size)
                return -ENOMEM;
        need = b->size + more + 1;
        if (need <= b->alloc)
                return 0;
        n = MAX(b->alloc * 2, need);
        n = MAX(n, (size_t) 64);
        p = realloc(b->data, n);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->alloc = n;
        return 0;
}

static int buf_put(Buf *b, const void *p, size_t n) {
        int r;

        r = buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n > 0)
                memcpy(b->data + b->size, p, n);
        b->size += n;
        b->data[b->size] = 0;
        return 0;
}

static int buf_puts(Buf *b, const char *s) {
        return buf_put(b, s, strlen(s));
}

_printf_(2, 3) static int buf_printf(Buf *b, const char *fmt, ...) {
        va_list ap;
        int k, r;

        va_start(ap, fmt);
        k = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -EINVAL;
        r = buf_reserve(b, (size_t) k);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        (void) vsnprintf(b->data + b->size, (size_t) k + 1, fmt, ap);
        va_end(ap);
        b->size += (size_t) k;
        return 0;
}

/* The one escaping rule of trees and the stat cache: outside 0x21..0x7e, and '%', is "%XX". */
static bool byte_needs_escape(unsigned char c) {
        return c < 0x21 || c > 0x7e || c == '%';
}

static int buf_put_escaped(Buf *b, const char *s) {
        size_t n = strlen(s);
        char *o;
        int r;

        r = buf_reserve(b, n * 3);
        if (r < 0)
                return r;
        o = b->data + b->size;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];

                if (byte_needs_escape(c)) {
                        *o++ = '%';
                        *o++ = hex_upper[c >> 4];
                        *o++ = hex_upper[c & 15];
                } else
                        *o++ = (char) c;
        }
        b->size = (size_t) (o - b->data);
        b->data[b->size] = 0;
        return 0;
}

/* Strict inverse of buf_put_escaped(): any other spelling, or a NUL byte, is -EIO. */
static int unescape(const char *s, size_t n, char **ret, size_t *ret_len) {
        _cleanup_free_ char *out = NULL;
        size_t j = 0;

        out = malloc(n + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];

                if (c == '%') {
                        int hi, lo;

                        if (n - i < 3)
                                return -EIO;
                        hi = unhex_upper(s[i + 1]);
                        lo = unhex_upper(s[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EIO;
                        c = (unsigned char) (hi << 4 | lo);
                        if (c == 0 || !byte_needs_escape(c))
                                return -EIO;
                        i += 2;
                } else if (byte_needs_escape(c))
                        return -EIO;
                out[j++] = (char) c;
        }
        out[j] = 0;
        *ret = STEAL(out);
        if (ret_len)
                *ret_len = j;
        return 0;
}

static bool name_valid(const char *name, size_t len) {
        return len >= 1 && len <= NAME_MAX_BYTES && !memchr(name, '/', len) &&
                !streq(name, ".") && !streq(name, "..");
}

/* Decimal, no sign, no leading zero, then @sep. Advances *p past @sep. */
static int parse_u64(const char **p, const char *end, char sep, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;

        if (s >= end || *s < '0' || *s > '9')
                return -EIO;
        if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9')
                return -EIO;
        for (; s < end && *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned) (*s - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -EIO;
                v = v * 10 + d;
        }
        if (s >= end || *s != sep)
                return -EIO;
        *p = s + 1;
        *ret = v;
        return 0;
}

static int random_u64(uint64_t *ret) {
        uint64_t v;
        ssize_t n;

        do
                n = getrandom(&v, sizeof(v), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if (n != (ssize_t) sizeof(v))
                return -EIO;
        *ret = v;
        return 0;
}

static struct timespec now_coarse(void) {
        struct timespec ts = {};

        (void) clock_gettime(CLOCK_REALTIME_COARSE, &ts);
        return ts;
}

static bool ts_before(const struct timespec *a, const struct timespec *b) {
        return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* A timestamp as one number for equality tests: ns since the epoch, modulo 2^64 (mtime is
 * settable to any value by the sandbox, so the product may wrap; unsigned wrapping is defined). */
static uint64_t ts_key(const struct timespec *t) {
        return (uint64_t) t->tv_sec * UINT64_C(1000000000) + (uint64_t) t->tv_nsec;
}

static int crash_point(Cas *c, const char *point) {
        int r;

        if (!c->crash_hook)
                return 0;
        r = c->crash_hook(point, c->crash_userdata);
        if (r < 0) {
                c->crashed = true;
                return r;
        }
        return 0;
}

#define CAS_PREPARED_NAME_MAX 160   /* "." + an id (≤ 128) + ".pre"; also tmp/ names */

static _Atomic uint64_t tmp_counter;   /* process-wide: threads share the pid and the prefix */

/* A new file in tmp/, created with @mode, its name in @name. Return: a write fd or -errno. */
static int tmp_open(Cas *c, char name[static 64], mode_t mode) {
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                int fd, r;

                /* The thread id: forked children and snapshot threads share the prefix and the
                 * counter (the main thread's id is the pid). */
                (void) snprintf(name, 64, "%016" PRIx64 "-%d-%" PRIu64, c->tmp_prefix, (int) gettid(),
                                atomic_fetch_add(&tmp_counter, 1) + 1);
                fd = openat(c->tmp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return negative_errno();
                r = random_u64(&c->tmp_prefix);
                if (r < 0)
                        return r;
        }
        return -EEXIST;
}

/* Error paths remove their tmp files, except after an injected crash (a crash would not). */
static void tmp_unlink(Cas *c, const char *name) {
        if (!c->crashed && name[0])
                (void) unlinkat(c->tmp_fd, name, 0);
}

/*
 * Write @data to tmp/, fsync, rename to @name in @dir_fd, fsync @dir_fd. Without @durable, no
 * fsync at all: for what is only a cache, which a crash may lose or leave empty (readers check it).
 */
static int write_file_atomic_full(Cas *c, int dir_fd, const char *name, const void *data, size_t size,
                                  mode_t mode, bool durable, int prepared_fd, const char *prepared_name,
                                  const char *crash_written, const char *crash_renamed) {
        _cleanup_close_ int fd = prepared_fd;
        int src_dir = c->tmp_fd;
        char tmp[CAS_PREPARED_NAME_MAX];
        int r;

        if (fd >= 0) {
                /* Made ahead of time in @dir_fd itself (cas_ref_prepare()). */
                src_dir = dir_fd;
                (void) snprintf(tmp, sizeof(tmp), "%s", prepared_name);
        } else {
                fd = tmp_open(c, tmp, mode);
                if (fd < 0)
                        return fd;
        }
        r = loop_write(fd, data, size);
        if (r >= 0 && durable && fsync(fd) < 0)
                r = negative_errno();
        fd = safe_close(fd);
        if (r >= 0 && crash_written)
                r = crash_point(c, crash_written);
        if (r >= 0 && renameat(src_dir, tmp, dir_fd, name) < 0)
                r = negative_errno();
        if (r < 0) {
                if (!c->crashed)
                        (void) unlinkat(src_dir, tmp, 0);
                return r;
        }
        if (crash_renamed) {
                r = crash_point(c, crash_renamed);
                if (r < 0)
                        return r;
        }
        if (durable && fsync(dir_fd) < 0)
                return negative_errno();
        return 0;
}

static int write_file_atomic(Cas *c, int dir_fd, const char *name, const void *data, size_t size, mode_t mode,
                             const char *crash_written, const char *crash_renamed) {
        return write_file_atomic_full(c, dir_fd, name, data, size, mode, true, -EBADF, NULL, crash_written,
                                      crash_renamed);
}

/* A shared or exclusive flock() on the store root, on a file description of its own. */
static int store_lock(Cas *c, int operation) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(c->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        do
                r = flock(fd, operation);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
        return STEAL_FD(fd);
}

/* ---------------------------------------------------------------------------------------------
 * Digest sets (open addressing), for pending objects and gc/fsck marking. */

typedef struct DigestSet {
        Digest *keys;
        uint8_t *used;
        size_t n, cap;          /* cap: a power of two, load ≤ 1/2 */
        uint64_t seed;
} DigestSet;

static size_t dset_slot(const DigestSet *s, const Digest *d) {
        uint64_t x;

        memcpy(&x, d->b, sizeof(x));
        x ^= s->seed;
        x ^= x >> 33;
        x *= UINT64_C(0xff51afd7ed558ccd);
        x ^= x >> 33;
        x *= UINT64_C(0xc4ceb9fe1a85ec53);
        x ^= x >> 33;
        return (size_t) x & (s->cap - 1);
}

static bool dset_contains(const DigestSet *s, const Digest *d) {
        if (s->n == 0)
                return false;
        for (size_t i = dset_slot(s, d);; i = (i + 1) & (s->cap - 1)) {
                if (!s->used[i])
                        return false;
                if (digest_eq(&s->keys[i], d))
                        return true;
        }
}

static void dset_insert_new(DigestSet *s, const Digest *d) {
        size_t i = dset_slot(s, d);

        while (s->used[i])
                i = (i + 1) & (s->cap - 1);
        s->keys[i] = *d;
        s->used[i] = 1;
        s->n++;
}

/* Return: 1 added, 0 already present, -ENOMEM. */
static int dset_add(DigestSet *s, const Digest *d) {
        if (dset_contains(s, d))
                return 0;
        if ((s->n + 1) * 2 > s->cap) {
                DigestSet g = { .seed = s->seed, .cap = s->cap ? s->cap * 2 : 64 };

                g.keys = calloc(g.cap, sizeof(Digest));
                g.used = calloc(g.cap, 1);
                if (!g.keys || !g.used) {
                        free(g.keys);
                        free(g.used);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < s->cap; i++)
                        if (s->used[i])
                                dset_insert_new(&g, &s->keys[i]);
                free(s->keys);
                free(s->used);
                *s = g;
        }
        dset_insert_new(s, d);
        return 1;
}

static void dset_clear(DigestSet *s) {
        if (s->used)
                memset(s->used, 0, s->cap);
        s->n = 0;
}

static void dset_done(DigestSet *s) {
        s->keys = mfree(s->keys);
        s->used = mfree(s->used);
        s->n = s->cap = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Objects: written to tmp/, published (made durable, renamed into objects/) in batches. */

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

static void pending_done(Cas *c, Pending *p) {
        for (size_t i = 0; i < p->n; i++)
                tmp_unlink(c, p->items[i].tmp);
        p->items = mfree(p->items);
        p->n = p->alloc = 0;
        dset_done(&p->set);
}

static int pending_add(Pending *p, const Digest *d, const char *tmp, uint64_t size) {
        int r;

        if (p->n == p->alloc) {
                size_t na = MAX(p->alloc * 2, (size_t) 64);
                PendingObject *v = reallocarray(p->items, na, sizeof(PendingObject));

                if (!v)
                        return -ENOMEM;
                p->items = v;
                p->alloc = na;
        }
        r = dset_add(&p->set, d);
        if (r < 0)
                return r;
        p->items[p->n] = (PendingObject) { .digest = *d };
        (void) snprintf(p->items[p->n].tmp, sizeof(p->items[p->n].tmp), "%s", tmp);
        p->n++;
        p->bytes += size;
        return 0;
}

/*
 * Publish a batch: make every tmp file durable, rename each into objects/, make the object
 * directories touched durable. Durable means fsync() of each file (directory), or, from
 * BATCH_SYNCFS_MIN of them, one syncfs() of the store's file system: each fsync() of a new
 * file costs a journal commit and a device cache flush, so thousands of small objects would
 * spend seconds in flushes that a single syncfs() does at once (it also writes whatever else
 * is dirty on that file system, hence only for large batches).
 */
static int sync_files(int dfd, size_t n, const char *(*name)(size_t i, void *userdata), void *userdata) {
        int r;

        if (n >= BATCH_SYNCFS_MIN)
                return syncfs(dfd) < 0 ? negative_errno() : 0;
        for (size_t i = 0; i < n; i++) {
                r = fsync_at(dfd, name(i, userdata));
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char *pending_tmp_name(size_t i, void *userdata) {
        return ((Pending *) userdata)->items[i].tmp;
}

static const char *touched_dir_name(size_t i, void *userdata) {
        return ((const char (*)[3]) userdata)[i];
}

static int pending_flush(Cas *c, Pending *p) {
        char dirs[256][3];
        uint8_t touched[256] = {};
        size_t n_dirs = 0;
        bool new_dirs = false, need_sync;
        int r;

        if (p->n == 0)
                return 0;

        r = sync_files(c->tmp_fd, p->n, pending_tmp_name, p);
        if (r < 0)
                return r;
        r = crash_point(c, CAS_CRASH_OBJECTS_SYNCED);
        if (r < 0)
                return r;

        need_sync = c->need_sync;
        c->need_sync = true;            /* until the directories are synced below */
        for (size_t i = 0; i < p->n; i++) {
                char rel[66];

                digest_relpath(&p->items[i].digest, rel);
                if (renameat(c->tmp_fd, p->items[i].tmp, c->objects_fd, rel) < 0) {
                        /* The fan-out directories are created on first use. */
                        if (errno != ENOENT)
                                return negative_errno();
                        rel[2] = 0;
                        if (mkdirat(c->objects_fd, rel, 0700) < 0 && errno != EEXIST)
                                return negative_errno();
                        new_dirs = true;
                        rel[2] = '/';
                        if (renameat(c->tmp_fd, p->items[i].tmp, c->objects_fd, rel) < 0)
                                return negative_errno();
                }
                p->items[i].tmp[0] = 0;
                touched[p->items[i].digest.b[0]] = 1;
                r = crash_point(c, CAS_CRASH_OBJECT_RENAMED);
                if (r < 0)
                        return r;
        }

        for (unsigned i = 0; i < 256; i++)
                if (touched[i])
                        (void) snprintf(dirs[n_dirs++], sizeof(dirs[0]), "%02x", i);
        r = sync_files(c->objects_fd, n_dirs, touched_dir_name, dirs);
        if (r < 0)
                return r;
        if (new_dirs && n_dirs < BATCH_SYNCFS_MIN && fsync(c->objects_fd) < 0)
                return negative_errno();
        c->need_sync = need_sync;
        r = crash_point(c, CAS_CRASH_OBJECTS_PUBLISHED);
        if (r < 0)
                return r;

        p->n = 0;
        p->bytes = 0;
        dset_clear(&p->set);
        return 0;
}

/*
 * 1 if the object is pending in @p or published with @size bytes, 0 if not (missing, or a
 * damaged copy of another size, which the new one will replace), <0 on error.
 */
static int object_present(Cas *c, const Pending *p, const Digest *d, uint64_t size) {
        struct stat st;
        char rel[66];

        if (p && dset_contains(&p->set, d))
                return 1;
        digest_relpath(d, rel);
        if (fstatat(c->objects_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return S_ISREG(st.st_mode) && (uint64_t) st.st_size == size;
}

/* Write @data as a pending object. Return: 1 written, 0 already present, or -errno. */
static int object_write_data(Cas *c, Pending *p, const Digest *d, const void *data, size_t size,
                             const char *crash) {
        _cleanup_close_ int fd = -EBADF;
        char tmp[64];
        int r;

        r = object_present(c, p, d, size);
        if (r != 0)
                return r < 0 ? r : 0;

        fd = tmp_open(c, tmp, 0444);
        if (fd < 0)
                return fd;
        r = loop_write(fd, data, size);
        if (r >= 0)
                r = pending_add(p, d, tmp, size);
        if (r < 0) {
                tmp_unlink(c, tmp);
                return r;
        }
        r = crash_point(c, crash);
        if (r < 0)
                return r;
        return 1;
}

/* Read a whole object, verifying its digest (-EIO). -ENOENT if missing. */
static int object_read(Cas *c, const Digest *d, uint64_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *data = NULL;
        Digest got;
        char rel[66];
        size_t size;
        int r;

        digest_relpath(d, rel);
        r = read_file_at(c->objects_fd, rel, max, &data, &size);
        if (r == -E2BIG)
                return -EIO;
        if (r < 0)
                return r;
        digest_of(data, size, &got);
        if (!digest_eq(&got, d))
                return -EIO;
        *ret = STEAL(data);
        *ret_size = size;
        return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Trees: encoding and strict decoding. */

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

static void tree_entry_done(TreeEntry *e) {
        e->name = mfree(e->name);
        e->target = mfree(e->target);
}

static void tree_done(Tree *t) {
        for (size_t i = 0; i < t->n; i++)
                tree_entry_done(&t->entries[i]);
        t->entries = mfree(t->entries);
        t->n = t->alloc = 0;
}

/* Append @e, taking its strings (also on failure). */
static int tree_push(Tree *t, TreeEntry *e) {
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

static int tree_encode(const Tree *t, Buf *out) {
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
                r = unescape(p, (size_t) ((sp ?: eol) - p), &e.name, &len);
                if (r < 0)
                        return r;
                if (!name_valid(e.name, len))
                        return -EIO;
                if (t.n > 0 && strcmp(t.entries[t.n - 1].name, e.name) >= 0)
                        return -EIO;
                if (sp) {
                        r = unescape(sp + 1, (size_t) (eol - sp - 1), &e.target, &len);
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
static int tree_load(Cas *c, const Digest *d, Tree *ret) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = object_read(c, d, TREE_MAX_BYTES, &data, &size);
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
 * The stat cache. */

typedef struct CacheRow {
        char *path;
        uint64_t dev, ino, size, mtime, ctime;  /* times: ts_key() */
        Digest digest;
} CacheRow;

typedef struct StatCache {
        CacheRow *rows;
        size_t n, alloc;
} StatCache;

static void stat_cache_done(StatCache *sc) {
        for (size_t i = 0; i < sc->n; i++)
                free(sc->rows[i].path);
        sc->rows = mfree(sc->rows);
        sc->n = sc->alloc = 0;
}

/* Takes @path (also on failure). */
static int stat_cache_push(StatCache *sc, char *path, const CacheRow *row) {
        if (sc->n == sc->alloc) {
                size_t na = MAX(sc->alloc * 2, (size_t) 64);
                CacheRow *v = reallocarray(sc->rows, na, sizeof(CacheRow));

                if (!v) {
                        free(path);
                        return -ENOMEM;
                }
                sc->rows = v;
                sc->alloc = na;
        }
        sc->rows[sc->n] = *row;
        sc->rows[sc->n].path = path;
        sc->n++;
        return 0;
}

static int stat_cache_add(StatCache *sc, const char *path, const struct stat *st, const Digest *d) {
        char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        return stat_cache_push(sc, p, &(CacheRow) {
                .dev = (uint64_t) st->st_dev,
                .ino = (uint64_t) st->st_ino,
                .size = (uint64_t) st->st_size,
                .mtime = ts_key(&st->st_mtim),
                .ctime = ts_key(&st->st_ctim),
                .digest = *d,
        });
}

/* Depth-first walk order: component by component, so '/' sorts below every name byte. */
static int path_cmp(const char *a, const char *b) {
        for (;; a++, b++) {
                int x = *a == 0 ? 0 : *a == '/' ? 1 : (unsigned char) *a + 2;
                int y = *b == 0 ? 0 : *b == '/' ? 1 : (unsigned char) *b + 2;

                if (x != y)
                        return x < y ? -1 : 1;
                if (x == 0)
                        return 0;
        }
}

static int cmp_rows(const void *a, const void *b) {
        return path_cmp(((const CacheRow *) a)->path, ((const CacheRow *) b)->path);
}

static const CacheRow *stat_cache_find(const StatCache *sc, const char *path) {
        size_t lo = 0, hi = sc->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int k = path_cmp(path, sc->rows[mid].path);

                if (k == 0)
                        return &sc->rows[mid];
                if (k < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

static int stat_cache_parse(const char *data, size_t size, StatCache *ret) {
        _cleanup_(stat_cache_done) StatCache sc = {};
        const char *p = data, *end = data + size;
        int r;

        if (size < strlen(CACHE_MAGIC) || memcmp(data, CACHE_MAGIC, strlen(CACHE_MAGIC)) != 0)
                return -EIO;
        p += strlen(CACHE_MAGIC);

        for (;;) {
                const char *eol = memchr(p, '\n', (size_t) (end - p)), *sp;
                CacheRow row = {};
                char *path;
                size_t len;

                if (!eol)
                        return -EIO;
                if (eol - p > 4 && memcmp(p, "end ", 4) == 0) {
                        uint64_t count;

                        p += 4;
                        r = parse_u64(&p, end, '\n', &count);
                        if (r < 0)
                                return r;
                        if (count != sc.n || p != end)
                                return -EIO;
                        break;
                }
                if ((r = parse_u64(&p, eol, ' ', &row.dev)) < 0 ||
                    (r = parse_u64(&p, eol, ' ', &row.ino)) < 0 ||
                    (r = parse_u64(&p, eol, ' ', &row.size)) < 0 ||
                    (r = parse_u64(&p, eol, ' ', &row.mtime)) < 0 ||
                    (r = parse_u64(&p, eol, ' ', &row.ctime)) < 0)
                        return r;
                sp = memchr(p, ' ', (size_t) (eol - p));
                if (!sp || sp - p != (ptrdiff_t) DIGEST_HEX_LEN || digest_from_hex(p, &row.digest) < 0)
                        return -EIO;
                r = unescape(sp + 1, (size_t) (eol - sp - 1), &path, &len);
                if (r < 0)
                        return r;
                if (len == 0) {
                        free(path);
                        return -EIO;
                }
                r = stat_cache_push(&sc, path, &row);
                if (r < 0)
                        return r;
                p = eol + 1;
        }

        if (sc.n > 1)
                qsort(sc.rows, sc.n, sizeof(CacheRow), cmp_rows);
        for (size_t i = 1; i < sc.n; i++)
                if (path_cmp(sc.rows[i - 1].path, sc.rows[i].path) == 0)
                        return -EIO;
        *ret = sc;
        sc = (StatCache) {};
        return 0;
}

/*
 * A missing or damaged cache is an empty one: it only saves work. @ret_raw: the file's bytes if
 * it parsed (NULL otherwise), so that an unchanged cache is not written again.
 */
static int stat_cache_load(Cas *c, const char *ws_id, StatCache *ret, Buf *ret_raw) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_file_at(c->cache_fd, ws_id, CACHE_MAX_BYTES, &data, &size);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || stat_cache_parse(data, size, ret) < 0) {
                *ret = (StatCache) {};
                return 0;
        }
        *ret_raw = (Buf) { .data = STEAL(data), .size = size, .alloc = size };
        return 0;
}

/*
 * Not made durable (no fsync): a crash may lose the new cache or leave the file short or empty,
 * which stat_cache_parse() refuses (the trailer counts the rows), and every row it keeps still
 * has its object checked before use. The objects it names were synced before the ref.
 */
static int stat_cache_write(Cas *c, const char *ws_id, const StatCache *sc, const Buf *old_raw) {
        _cleanup_(buf_done) Buf b = {};
        int r;

        r = buf_puts(&b, CACHE_MAGIC);
        for (size_t i = 0; r >= 0 && i < sc->n; i++) {
                const CacheRow *row = &sc->rows[i];
                char hex[DIGEST_HEX_LEN + 1];

                hex_encode(row->digest.b, sizeof(row->digest.b), hex);
                r = buf_printf(&b, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s ",
                               row->dev, row->ino, row->size, row->mtime, row->ctime, hex);
                if (r >= 0)
                        r = buf_put_escaped(&b, row->path);
                if (r >= 0)
                        r = buf_puts(&b, "\n");
        }
        if (r >= 0)
                r = buf_printf(&b, "end %zu\n", sc->n);
        if (r < 0)
                return r;
        if (old_raw->data && old_raw->size == b.size && memcmp(old_raw->data, b.data, b.size) == 0)
                return 0;   /* nothing changed: a run that wrote nothing costs no write here */
        return write_file_atomic_full(c, c->cache_fd, ws_id, b.data, b.size, 0600, false, -EBADF, NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Refs. */

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

typedef struct RefList {
        CasRef *refs;
        size_t n;
} RefList;

static void ref_list_done(RefList *l) {
        cas_refs_free(l->refs, l->n);
        *l = (RefList) {};
}

/* All refs of the workspace directory @ws_dir_fd, newest first. Names that are no id are ignored. */
static int refs_load(int ws_dir_fd, RefList *ret) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_(ref_list_done) RefList l = {};
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

static void prepared_name(const char *exec_id, char name[static CAS_PREPARED_NAME_MAX]) {
        (void) snprintf(name, CAS_PREPARED_NAME_MAX, ".%s.pre", exec_id);
}

/* @prepared_fd (taken over): cas_ref_prepare()'s file, or -EBADF. */
static int ref_write(Cas *c, const char *ws_id, const char *exec_id, const Digest *tree, uint64_t created_ms,
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
        prepared_name(exec_id, pre);
        if (prepared >= 0) {
                struct stat a, b;

                /* Still the file in the directory under that name (not removed meanwhile)? */
                if (fstat(prepared, &a) >= 0 && fstatat(dfd, pre, &b, AT_SYMLINK_NOFOLLOW) >= 0 &&
                    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                        return write_file_atomic_full(c, dfd, exec_id, json, strlen(json), 0444, true,
                                                      STEAL_FD(prepared), pre, CAS_CRASH_REF_WRITTEN,
                                                      CAS_CRASH_REF_RENAMED);
                prepared = safe_close(prepared);
        }
        return write_file_atomic(c, dfd, exec_id, json, strlen(json), 0444,
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
        prepared_name(exec_id, pre);
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
        prepared_name(exec_id, pre);
        (void) unlinkat(dfd, pre, 0);
}

int cas_list_refs(Cas *c, const char *ws_id, CasRef **ret, size_t *ret_n) {
        _cleanup_(ref_list_done) RefList l = {};
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
        r = refs_load(dfd, &l);
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

/* ---------------------------------------------------------------------------------------------
 * Snapshot: walk the workspace, store new contents, write trees bottom-up, then the ref. */

typedef struct Snapshot {
        Cas *cas;
        CasSnapshotStats stats;
        uint64_t entries;
        Buf path;                       /* relative path of the entry being visited */
        StatCache old_cache, new_cache;
        Buf old_cache_raw;
        Pending blobs, trees;
        uint8_t *buf;                   /* IO_BUFFER_SIZE */
        struct timespec racy;           /* entries changed at or after this may not be cached */
} Snapshot;

static void snapshot_done(Snapshot *s) {
        buf_done(&s->path);
        stat_cache_done(&s->old_cache);
        stat_cache_done(&s->new_cache);
        buf_done(&s->old_cache_raw);
        pending_done(s->cas, &s->blobs);
        pending_done(s->cas, &s->trees);
        s->buf = mfree(s->buf);
}

static size_t snapshot_path_push(Snapshot *s, const char *name) {
        size_t mark = s->path.size;

        /* Cannot fail for lack of room: buf_reserve() was done by the caller. */
        if (mark > 0)
                s->path.data[s->path.size++] = '/';
        memcpy(s->path.data + s->path.size, name, strlen(name) + 1);
        s->path.size += strlen(name);
        return mark;
}

static void snapshot_path_pop(Snapshot *s, size_t mark) {
        s->path.size = mark;
        s->path.data[mark] = 0;
}

static int snapshot_maybe_flush(Snapshot *s) {
        int r;

        if (s->trees.n >= BATCH_MAX_OBJECTS) {
                /* Never a tree before the objects it names. */
                r = pending_flush(s->cas, &s->blobs);
                if (r < 0)
                        return r;
                return pending_flush(s->cas, &s->trees);
        }
        if (s->blobs.n >= BATCH_MAX_OBJECTS || s->blobs.bytes >= BATCH_MAX_BYTES)
                return pending_flush(s->cas, &s->blobs);
        return 0;
}

/*
 * Hash the file at @fd and store it unless already present, in one pass: a file that fits the
 * buffer is hashed first and written only if new; a larger one is copied to tmp/ while hashed.
 */
static int snapshot_store_fd(Snapshot *s, int fd, Digest *ret, uint64_t *ret_size) {
        Cas *c = s->cas;
        struct sha256_ctx h;
        _cleanup_close_ int out = -EBADF;
        char tmp[64] = "";
        uint64_t total;
        ssize_t n;
        int r;

        sha256_init(&h);
        n = loop_read(fd, s->buf, IO_BUFFER_SIZE);
        if (n < 0)
                return (int) n;
        sha256_update(&h, (size_t) n, s->buf);
        total = (uint64_t) n;
        if (total > c->limits.max_file_size)
                return -E2BIG;

        if ((size_t) n < IO_BUFFER_SIZE) {
                sha256_digest(&h, sizeof(ret->b), ret->b);
                s->stats.hashed_bytes += total;
                r = object_write_data(c, &s->blobs, ret, s->buf, (size_t) n, CAS_CRASH_OBJECT_WRITTEN);
                if (r < 0)
                        return r;
                s->stats.new_objects += (uint64_t) r;
                *ret_size = total;
                return r > 0 ? snapshot_maybe_flush(s) : 0;
        }

        out = tmp_open(c, tmp, 0444);
        if (out < 0)
                return out;
        for (uint64_t written = 0, synced = 0;;) {
                r = loop_write(out, s->buf, (size_t) n);
                if (r < 0)
                        goto fail;
                /* Start the writeback every few MiB: dirty pages do not pile up until the fsync, and
                 * the disk works while we hash (chunks much smaller than this measured slower). */
                written += (uint64_t) n;
                if (written - synced >= WRITEBACK_CHUNK) {
                        (void) sync_file_range(out, (off_t) synced, (off_t) (written - synced),
                                               SYNC_FILE_RANGE_WRITE);
                        synced = written;
                }
                n = loop_read(fd, s->buf, IO_BUFFER_SIZE);
                if (n < 0) {
                        r = (int) n;
                        goto fail;
                }
                if (n == 0)
                        break;
                if (total + (uint64_t) n > c->limits.max_file_size) {
                        r = -E2BIG;
                        goto fail;
                }
                sha256_update(&h, (size_t) n, s->buf);
                total += (uint64_t) n;
        }
        sha256_digest(&h, sizeof(ret->b), ret->b);
        s->stats.hashed_bytes += total;
        out = safe_close(out);

        r = object_present(c, &s->blobs, ret, total);
        if (r < 0)
                goto fail;
        if (r > 0) {
                tmp_unlink(c, tmp);
                *ret_size = total;
                return 0;
        }
        r = pending_add(&s->blobs, ret, tmp, total);
        if (r < 0)
                goto fail;
        s->stats.new_objects++;
        *ret_size = total;
        r = crash_point(c, CAS_CRASH_OBJECT_WRITTEN);
        if (r < 0)
                return r;
        return snapshot_maybe_flush(s);

fail:
        tmp_unlink(c, tmp);
        return r;
}

/* A regular file. Return: 0, 1 = skipped (not readable), or -errno. */
static int snapshot_file(Snapshot *s, int dfd, const char *name, const struct stat *st, TreeEntry *e) {
        _cleanup_close_ int fd = -EBADF;
        const CacheRow *row;
        struct stat st1, st2;
        uint64_t size = 0;
        int r;

        e->type = DT_REG;
        e->mode = st->st_mode & 0777;

        row = stat_cache_find(&s->old_cache, s->path.data);
        if (row && row->dev == (uint64_t) st->st_dev && row->ino == (uint64_t) st->st_ino &&
            row->size == (uint64_t) st->st_size && row->mtime == ts_key(&st->st_mtim) &&
            row->ctime == ts_key(&st->st_ctim)) {
                /* Unchanged since it was hashed: only check the object is still there (gc). */
                r = object_present(s->cas, &s->blobs, &row->digest, row->size);
                if (r < 0)
                        return r;
                if (r > 0) {
                        e->digest = row->digest;
                        e->size = row->size;
                        return stat_cache_add(&s->new_cache, s->path.data, st, &row->digest);
                }
        }

        if ((uint64_t) st->st_size > s->cas->limits.max_file_size)
                return -E2BIG;

        /* O_NONBLOCK: were it swapped for a FIFO since the lstat, the open must not hang. */
        fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == EACCES || errno == EPERM)
                        return 1;
                if (errno == ENOENT || errno == ELOOP || errno == ENXIO)
                        return -EBUSY;
                return negative_errno();
        }
        if (fstat(fd, &st1) < 0)
                return negative_errno();
        if (!S_ISREG(st1.st_mode) || st1.st_dev != st->st_dev || st1.st_ino != st->st_ino)
                return -EBUSY;

        r = snapshot_store_fd(s, fd, &e->digest, &size);
        if (r < 0)
                return r;
        e->size = size;

        /* Cache it only if nothing changed while reading and no later write could hide in the
         * same timestamp tick. */
        if (fstat(fd, &st2) < 0)
                return negative_errno();
        if ((uint64_t) st2.st_size == size && st2.st_size == st1.st_size &&
            ts_key(&st2.st_mtim) == ts_key(&st1.st_mtim) && ts_key(&st2.st_ctim) == ts_key(&st1.st_ctim) &&
            ts_before(&st2.st_ctim, &s->racy))
                return stat_cache_add(&s->new_cache, s->path.data, &st2, &e->digest);
        return 0;
}

static int snapshot_store_tree(Snapshot *s, const Tree *t, Digest *ret) {
        _cleanup_(buf_done) Buf b = {};
        int r;

        r = tree_encode(t, &b);
        if (r < 0)
                return r;
        digest_of(b.data, b.size, ret);
        r = object_write_data(s->cas, &s->trees, ret, b.data, b.size, CAS_CRASH_TREE_WRITTEN);
        if (r <= 0)
                return r;
        s->stats.new_objects++;
        return snapshot_maybe_flush(s);
}

/* The directory @dfd, @depth components below the root: store it, return its tree digest. */
static int snapshot_dir(Snapshot *s, int dfd, unsigned depth, Digest *ret, uint64_t *ret_bytes) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_(tree_done) Tree t = {};
        uint64_t total = 0;
        int r;

        r = dir_read_names(dfd, &s->entries, s->cas->limits.max_entries, &names);
        if (r < 0)
                return r;
        if (names.n > 0 && depth + 1 > s->cas->limits.max_depth)
                return -E2BIG;
        r = buf_reserve(&s->path, NAME_MAX_BYTES + 1);
        if (r < 0)
                return r;

        for (size_t i = 0; i < names.n; i++) {
                _cleanup_(tree_entry_done) TreeEntry e = {};
                const char *name = names.v[i];
                struct stat st;
                size_t mark;
                bool skip = false;

                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return errno == ENOENT ? -EBUSY : negative_errno();

                mark = snapshot_path_push(s, name);
                if (S_ISREG(st.st_mode)) {
                        r = snapshot_file(s, dfd, name, &st, &e);
                        if (r < 0)
                                return r;
                        skip = r > 0;
                        if (!skip)
                                s->stats.files++;
                } else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = -EBADF;
                        struct stat st1;

                        sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                        if (sub < 0) {
                                if (errno == EACCES || errno == EPERM)
                                        skip = true;
                                else if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
                                        return -EBUSY;
                                else
                                        return negative_errno();
                        } else {
                                if (fstat(sub, &st1) < 0)
                                        return negative_errno();
                                if (st1.st_dev != st.st_dev || st1.st_ino != st.st_ino)
                                        return -EBUSY;
                                e.type = DT_DIR;
                                e.mode = st.st_mode & 0777;
                                r = snapshot_dir(s, sub, depth + 1, &e.digest, &e.size);
                                if (r < 0)
                                        return r;
                                s->stats.dirs++;
                        }
                } else if (S_ISLNK(st.st_mode)) {
                        ssize_t n = readlinkat(dfd, name, (char *) s->buf, SYMLINK_MAX_BYTES + 1);

                        if (n < 0)
                                return errno == ENOENT || errno == EINVAL ? -EBUSY : negative_errno();
                        if (n == 0 || (size_t) n > SYMLINK_MAX_BYTES)
                                return -E2BIG;
                        e.type = DT_LNK;
                        e.mode = 0777;
                        e.size = (uint64_t) n;
                        e.target = malloc((size_t) n + 1);
                        if (!e.target)
                                return -ENOMEM;
                        memcpy(e.target, s->buf, (size_t) n);
                        e.target[n] = 0;
                        s->stats.symlinks++;
                } else
                        skip = true;    /* FIFO, socket, device: never opened */
                snapshot_path_pop(s, mark);

                if (skip) {
                        s->stats.skipped++;
                        continue;
                }
                if (e.type != DT_LNK)
                        total += e.size;
                e.name = STEAL(names.v[i]);
                r = tree_push(&t, &e);
                if (r < 0)
                        return r;
        }

        r = snapshot_store_tree(s, &t, ret);
        if (r < 0)
                return r;
        *ret_bytes = total;
        return 0;
}

static int snapshot_run(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                        int *prepared_fd, char **ret_digest, CasSnapshotStats *ret_stats) {
        /* The lock is declared first so that it is released last, after tmp files are removed. */
        _cleanup_close_ int lock = -EBADF;
        _cleanup_(snapshot_done) Snapshot s = { .cas = c };
        _cleanup_free_ char *digest_str = NULL;
        struct stat st;
        Digest root;
        uint64_t bytes;
        int r;

        assert(c);

        if (!workspace_id_valid(ws_id) || !workspace_id_valid(exec_id) || created_ms > INT64_MAX)
                return -EINVAL;
        c->crashed = false;

        if (fstat(ws_fd, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;

        lock = store_lock(c, LOCK_SH);
        if (lock < 0)
                return lock;

        s.blobs.set.seed = s.trees.set.seed = c->hash_seed;
        s.buf = malloc(IO_BUFFER_SIZE);
        if (!s.buf)
                return -ENOMEM;
        r = buf_put(&s.path, "", 0);
        if (r < 0)
                return r;
        s.racy = now_coarse();
        r = stat_cache_load(c, ws_id, &s.old_cache, &s.old_cache_raw);
        if (r < 0)
                return r;

        r = snapshot_dir(&s, ws_fd, 0, &root, &bytes);
        if (r < 0)
                return r;
        r = pending_flush(c, &s.blobs);
        if (r < 0)
                return r;
        r = pending_flush(c, &s.trees);
        if (r < 0)
                return r;

        /* The tree may name objects an interrupted run renamed into place without syncing their
         * directory; this snapshot found them present and did not write them again. */
        if (c->need_sync) {
                if (syncfs(c->root_fd) < 0)
                        return negative_errno();
                c->need_sync = false;
        }

        r = ref_write(c, ws_id, exec_id, &root, created_ms, bytes, STEAL_FD(*prepared_fd));
        if (r < 0)
                return r;
        r = crash_point(c, CAS_CRASH_REF_PUBLISHED);
        if (r < 0)
                return r;

        /* The snapshot is published: a cache that cannot be written only costs the next one time. */
        (void) stat_cache_write(c, ws_id, &s.new_cache, &s.old_cache_raw);

        if (ret_digest) {
                digest_str = malloc(72);
                if (!digest_str)
                        return -ENOMEM;
                digest_format(&root, digest_str);
                *ret_digest = STEAL(digest_str);
        }
        s.stats.bytes = bytes;
        if (ret_stats)
                *ret_stats = s.stats;
        return 0;
}

int cas_snapshot_prepared(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                          int prepared_fd, char **ret_digest, CasSnapshotStats *ret_stats) {
        /* The walk changes nothing in @c but its flags: on a copy, it may run in a thread of its
         * own next to the store's other users (snapshots of other workspaces, lookups). */
        Cas local = *c;
        int r;

        assert(c);
        r = snapshot_run(&local, ws_fd, ws_id, exec_id, created_ms, &prepared_fd, ret_digest, ret_stats);
        if (c->crash_hook)
                c->crashed = local.crashed;     /* tests (single-threaded) look at it */
        if (prepared_fd >= 0 && !local.crashed)
                /* Not used (the walk failed before the ref): it goes. */
                cas_ref_prepared_discard(c, ws_id, exec_id, prepared_fd);
        else
                safe_close(prepared_fd);
        return r;
}

int cas_snapshot(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                 char **ret_digest, CasSnapshotStats *ret_stats) {
        return cas_snapshot_prepared(c, ws_fd, ws_id, exec_id, created_ms, -EBADF, ret_digest, ret_stats);
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
                        if (n == 256 || !name_valid(p, strlen(p)))
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

/* ---------------------------------------------------------------------------------------------
 * Restore. */

static bool is_restore_leftover(const char *name, const char *ws_name) {
        size_t l = strlen(ws_name);

        if (name[0] != '.' || strncmp(name + 1, ws_name, l) != 0)
                return false;
        name += 1 + l;
        if (strncmp(name, RESTORE_SUFFIX, strlen(RESTORE_SUFFIX)) != 0)
                return false;
        name += strlen(RESTORE_SUFFIX);
        if (strlen(name) != RESTORE_RANDOM_LEN)
                return false;
        for (; *name; name++)
                if (unhex_lower(*name) < 0)
                        return false;
        return true;
}

typedef struct Restore {
        Cas *cas;
        StatCache cache;
        Buf path;
        uint64_t entries;
        uint8_t *buf;           /* read/write fallback of copy_file_range(), allocated on demand */
} Restore;

static void restore_done(Restore *r) {
        stat_cache_done(&r->cache);
        buf_done(&r->path);
        r->buf = mfree(r->buf);
}

static int restore_copy(Restore *rs, int in, int out, uint64_t size) {
        bool fallback = false;

        while (size > 0) {
                ssize_t n;

                if (!fallback) {
                        n = copy_file_range(in, NULL, out, NULL, (size_t) MIN(size, (uint64_t) 1 << 30), 0);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                                      errno == EOPNOTSUPP || errno == EBADF)) {
                                fallback = true;
                                continue;
                        }
                } else {
                        if (!rs->buf) {
                                rs->buf = malloc(IO_BUFFER_SIZE);
                                if (!rs->buf)
                                        return -ENOMEM;
                        }
                        n = loop_read(in, rs->buf, (size_t) MIN(size, (uint64_t) IO_BUFFER_SIZE));
                        if (n > 0) {
                                int r = loop_write(out, rs->buf, (size_t) n);

                                if (r < 0)
                                        return r;
                        }
                }
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        return -EIO;    /* the object is shorter than its tree says */
                size -= (uint64_t) n;
        }
        return 0;
}

static int restore_entries(Restore *rs, const Tree *t, int dfd, unsigned depth) {
        Cas *c = rs->cas;
        int r;

        if (t->n > 0 && depth + 1 > c->limits.max_depth)
                return -E2BIG;
        rs->entries += t->n;
        if (rs->entries > c->limits.max_entries)
                return -E2BIG;
        r = buf_reserve(&rs->path, NAME_MAX_BYTES + 1);
        if (r < 0)
                return r;

        for (size_t i = 0; i < t->n; i++) {
                const TreeEntry *e = &t->entries[i];
                size_t mark = rs->path.size;

                if (mark > 0)
                        rs->path.data[rs->path.size++] = '/';
                memcpy(rs->path.data + rs->path.size, e->name, strlen(e->name) + 1);
                rs->path.size += strlen(e->name);

                if (e->type == DT_REG) {
                        _cleanup_close_ int in = -EBADF, out = -EBADF;
                        struct stat st;
                        char rel[66];

                        digest_relpath(&e->digest, rel);
                        in = openat(c->objects_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                        if (in < 0)
                                return errno == ENOENT ? -EIO : negative_errno();
                        if (fstat(in, &st) < 0)
                                return negative_errno();
                        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != e->size)
                                return -EIO;
                        out = openat(dfd, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                        if (out < 0)
                                return negative_errno();
                        r = restore_copy(rs, in, out, e->size);
                        if (r < 0)
                                return r;
                        if (fchmod(out, e->mode) < 0 || fstat(out, &st) < 0)
                                return negative_errno();
                        r = stat_cache_add(&rs->cache, rs->path.data, &st, &e->digest);
                        if (r < 0)
                                return r;
                } else if (e->type == DT_DIR) {
                        _cleanup_(tree_done) Tree sub_tree = {};
                        _cleanup_close_ int sub = -EBADF;

                        r = tree_load(c, &e->digest, &sub_tree);
                        if (r < 0)
                                return r == -ENOENT ? -EIO : r;
                        if (mkdirat(dfd, e->name, 0700) < 0)
                                return negative_errno();
                        sub = openat(dfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return negative_errno();
                        r = restore_entries(rs, &sub_tree, sub, depth + 1);
                        if (r < 0)
                                return r;
                        /* Last, once filled: the recorded mode may deny the owner write access. */
                        if (fchmod(sub, e->mode) < 0)
                                return negative_errno();
                } else {
                        if (symlinkat(e->target, dfd, e->name) < 0)
                                return negative_errno();
                }

                rs->path.size = mark;
                rs->path.data[mark] = 0;
        }
        return 0;
}

/* Remove what an interrupted restore of @ws_name left beside it. */
static int restore_cleanup(int parent_fd, const char *ws_name) {
        _cleanup_(dir_names_done) DirNames names = {};
        int r;

        r = dir_read_names(parent_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++) {
                if (!is_restore_leftover(names.v[i], ws_name))
                        continue;
                r = rm_rf_at(parent_fd, names.v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cas_restore(Cas *c, const char *tree_digest, int parent_fd, const char *ws_name) {
        _cleanup_(restore_done) Restore rs = { .cas = c };
        _cleanup_(tree_done) Tree root = {};
        _cleanup_close_ int lock = -EBADF, dfd = -EBADF;
        char tmp[1 + 128 + sizeof(RESTORE_SUFFIX) + RESTORE_RANDOM_LEN + 1];
        struct timespec racy;
        struct stat st;
        bool exists = true;
        uint64_t rnd;
        Digest d;
        size_t kept = 0;
        int r;

        assert(c);

        if (!workspace_id_valid(ws_name))
                return -EINVAL;
        r = digest_parse(tree_digest, &d);
        if (r < 0)
                return r;
        c->crashed = false;

        lock = store_lock(c, LOCK_SH);
        if (lock < 0)
                return lock;
        r = tree_load(c, &d, &root);
        if (r < 0)
                return r;

        if (fstatat(parent_fd, ws_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return negative_errno();
                exists = false;
        } else if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;

        r = restore_cleanup(parent_fd, ws_name);
        if (r < 0)
                return r;

        r = random_u64(&rnd);
        if (r < 0)
                return r;
        (void) snprintf(tmp, sizeof(tmp), ".%s" RESTORE_SUFFIX "%016" PRIx64, ws_name, rnd);
        if (mkdirat(parent_fd, tmp, 0700) < 0)
                return negative_errno();
        dfd = openat(parent_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                r = negative_errno();
        if (r >= 0)
                r = buf_put(&rs.path, "", 0);
        if (r >= 0)
                r = restore_entries(&rs, &root, dfd, 0);
        /* Everything durable before the swap; one syncfs() instead of an fsync per file. */
        if (r >= 0 && syncfs(dfd) < 0)
                r = negative_errno();
        if (r >= 0)
                r = crash_point(c, CAS_CRASH_RESTORE_BUILT);
        if (r < 0) {
                if (!c->crashed)
                        (void) rm_rf_at(parent_fd, tmp);
                return r;
        }
        racy = now_coarse();

        if (renameat2(parent_fd, tmp, parent_fd, ws_name, exists ? RENAME_EXCHANGE : RENAME_NOREPLACE) < 0) {
                r = negative_errno();
                (void) rm_rf_at(parent_fd, tmp);
                return r;
        }
        r = fsync_at(parent_fd, ".");
        if (r < 0)
                return r;
        r = crash_point(c, CAS_CRASH_RESTORE_EXCHANGED);
        if (r < 0)
                return r;

        /* The new tree is in place: the restore has succeeded. The old one (now under the temp
         * name) goes; if that fails, the next restore of this workspace removes what is left. */
        if (exists)
                (void) rm_rf_at(parent_fd, tmp);

        /* Seed the stat cache with the files just written, except those of the last clock tick. */
        for (size_t i = 0; i < rs.cache.n; i++) {
                struct timespec ct = {
                        .tv_sec = (time_t) (rs.cache.rows[i].ctime / UINT64_C(1000000000)),
                        .tv_nsec = (long) (rs.cache.rows[i].ctime % UINT64_C(1000000000)),
                };

                if (ts_before(&ct, &racy))
                        rs.cache.rows[kept++] = rs.cache.rows[i];
                else
                        free(rs.cache.rows[i].path);
        }
        rs.cache.n = kept;
        (void) stat_cache_write(c, ws_name, &rs.cache, &(const Buf) {});
        return 0;
}

/* ---------------------------------------------------------------------------------------------
 * gc and fsck. */

typedef struct Mark {
        Cas *cas;
        DigestSet trees, files;
        bool fsck, full;
        char *problem;          /* fsck: the first problem found */
        uint8_t *buf;
} Mark;

static void mark_done(Mark *m) {
        dset_done(&m->trees);
        dset_done(&m->files);
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

        r = dset_add(&m->trees, d);
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
                        r = dset_add(&m->files, &e->digest);
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
                ref_list_done(&a->v[i].refs);
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
                r = refs_load(dfd, &a.v[a.n].refs);
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
        lock = store_lock(c, LOCK_SH);
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
                        if (dset_contains(&m->trees, &d) || dset_contains(&m->files, &d))
                                continue;
                        if (fstatat(dfd, names.v[j], &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        if (unlinkat(dfd, names.v[j], 0) < 0)
                                return negative_errno();
                        *freed += (uint64_t) st.st_size;
                        deleted = true;
                        r = crash_point(c, CAS_CRASH_GC_OBJECT_DELETED);
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
        lock = store_lock(c, LOCK_EX | LOCK_NB);
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
                        r = crash_point(c, CAS_CRASH_GC_REF_DELETED);
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

/* ---------------------------------------------------------------------------------------------
 * Open, close, settings. */

Cas *cas_free(Cas *c) {
        if (!c)
                return NULL;
        (void) safe_close(c->root_fd);
        (void) safe_close(c->objects_fd);
        (void) safe_close(c->refs_fd);
        (void) safe_close(c->tmp_fd);
        (void) safe_close(c->cache_fd);
        free(c);
        return NULL;
}

SR_DEFINE_FREE_FUNC(Cas *, cas_free);

int cas_open(int root_fd, Cas **ret) {
        _cleanup_(cas_freep) Cas *c = NULL;
        _cleanup_close_ int refs = -EBADF;
        bool created = false, created_refs = false;
        int r;

        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (Cas) {
                .root_fd = -EBADF,
                .objects_fd = -EBADF,
                .refs_fd = -EBADF,
                .tmp_fd = -EBADF,
                .cache_fd = -EBADF,
                .limits = {
                        .max_depth = CAS_DEFAULT_MAX_DEPTH,
                        .max_entries = CAS_DEFAULT_MAX_ENTRIES,
                        .max_file_size = CAS_DEFAULT_MAX_FILE_SIZE,
                },
        };
        r = random_u64(&c->tmp_prefix);
        if (r >= 0)
                r = random_u64(&c->hash_seed);
        if (r < 0)
                return r;

        c->root_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (c->root_fd < 0)
                return negative_errno();

        c->objects_fd = mkdir_open(c->root_fd, "objects", &created);
        if (c->objects_fd < 0)
                return c->objects_fd;
        refs = mkdir_open(c->root_fd, "refs", &created);
        if (refs < 0)
                return refs;
        c->refs_fd = mkdir_open(refs, "workspace", &created_refs);
        if (c->refs_fd < 0)
                return c->refs_fd;
        c->tmp_fd = mkdir_open(c->root_fd, "tmp", &created);
        if (c->tmp_fd < 0)
                return c->tmp_fd;
        c->cache_fd = mkdir_open(c->root_fd, "cache", &created);
        if (c->cache_fd < 0)
                return c->cache_fd;

        if (created_refs && fsync(refs) < 0)
                return negative_errno();
        if ((created || created_refs) && fsync(c->root_fd) < 0)
                return negative_errno();
        /* A previous process may have died between renaming objects into objects/ and syncing
         * their directories: make them durable before any ref can name them again. Once per
         * open (the daemon forks its snapshot children from this Cas, so it cannot be lazy). */
        if (syncfs(c->root_fd) < 0)
                return negative_errno();

        *ret = STEAL(c);
        return 0;
}

int cas_set_limits(Cas *c, const CasLimits *limits) {
        assert(c);
        assert(limits);

        c->limits = (CasLimits) {
                .max_depth = limits->max_depth ?: CAS_DEFAULT_MAX_DEPTH,
                .max_entries = limits->max_entries ?: CAS_DEFAULT_MAX_ENTRIES,
                .max_file_size = limits->max_file_size ?: CAS_DEFAULT_MAX_FILE_SIZE,
        };
        return 0;
}

void cas_set_crash_hook(Cas *c, CasCrashHook hook, void *userdata) {
        assert(c);
        c->crash_hook = hook;
        c->crash_userdata = userdata;
}
