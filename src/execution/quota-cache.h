/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The quota watchers kept between runs, per workspace directory (the index of a big workspace
 * costs a full scan to build). Owned by the execution context (ExecutionContext.quota_cache);
 * calls only workspace/quota.h.
 */
#pragma once

#include <stdint.h>

typedef struct QuotaWatch QuotaWatch;

#define QUOTA_CACHE_SIZE 16

typedef struct QuotaCache {
        struct QuotaCacheEntry {
                char ws[129];
                uint64_t dev, ino, last_used;
                QuotaWatch *watch;
        } entries[QUOTA_CACHE_SIZE];
} QuotaCache;

/* quota_cache_take() - the cached watcher of this workspace directory (same inode), or NULL. */
QuotaWatch *quota_cache_take(QuotaCache *c, const char *ws, int ws_fd);
/* quota_cache_put() - keep @w (taken) for the next run in @ws; evicts the least recently used. */
void quota_cache_put(QuotaCache *c, const char *ws, int ws_fd, QuotaWatch *w);
/* quota_cache_flush() - drop every watcher, synchronously (shutdown). */
void quota_cache_flush(QuotaCache *c);
