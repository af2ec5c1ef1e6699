/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The stat cache of a workspace (cache/<wsId>, format in cas.h): rows of (dev, ino, size, mtime,
 * ctime) → digest that let a snapshot skip reading unchanged files, their parsing, lookup and
 * (non-durable) rewriting; and the timestamp helpers that decide what may be cached. Calls
 * cas-object.c (atomic file write), cas-digest.c, cas-text.c, util/io-util.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/io-util.h"
#include "util/macro.h"
#include "workspace/cas/cas-internal.h"

struct timespec cas_now_coarse(void) {
        struct timespec ts = {};

        (void) clock_gettime(CLOCK_REALTIME_COARSE, &ts);
        return ts;
}

bool cas_ts_before(const struct timespec *a, const struct timespec *b) {
        return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* A timestamp as one number for equality tests: ns since the epoch, modulo 2^64 (mtime is
 * settable to any value by the sandbox, so the product may wrap; unsigned wrapping is defined). */
uint64_t cas_ts_key(const struct timespec *t) {
        return (uint64_t) t->tv_sec * UINT64_C(1000000000) + (uint64_t) t->tv_nsec;
}

/* ---------------------------------------------------------------------------------------------
 * The stat cache. */

void cas_stat_cache_done(StatCache *sc) {
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

int cas_stat_cache_add(StatCache *sc, const char *path, const struct stat *st, const Digest *d) {
        char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        return stat_cache_push(sc, p, &(CacheRow) {
                .dev = (uint64_t) st->st_dev,
                .ino = (uint64_t) st->st_ino,
                .size = (uint64_t) st->st_size,
                .mtime = cas_ts_key(&st->st_mtim),
                .ctime = cas_ts_key(&st->st_ctim),
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

const CacheRow *cas_stat_cache_find(const StatCache *sc, const char *path) {
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
        _cleanup_(cas_stat_cache_done) StatCache sc = {};
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
                r = cas_unescape(sp + 1, (size_t) (eol - sp - 1), &path, &len);
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
int cas_stat_cache_load(Cas *c, const char *ws_id, StatCache *ret, Buf *ret_raw) {
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
int cas_stat_cache_write(Cas *c, const char *ws_id, const StatCache *sc, const Buf *old_raw) {
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
        return cas_write_file_atomic_full(c, c->cache_fd, ws_id, b.data, b.size, 0600, false, -EBADF, NULL, NULL, NULL);
}
