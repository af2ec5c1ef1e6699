/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The quota watchers kept between runs: see quota-cache.h. */

#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "execution/quota-cache.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "workspace/quota.h"

static void *quota_free_thread(void *p) {
        quota_watch_free(p);
        return NULL;
}

/* Closing an inotify instance waits for an RCU grace period (often ~10 ms): never on the loop. */
static void quota_watch_free_async(QuotaWatch *w) {
        pthread_attr_t attr;
        pthread_t t;

        if (!w)
                return;
        if (pthread_attr_init(&attr) == 0) {
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                if (pthread_create(&t, &attr, quota_free_thread, w) == 0) {
                        (void) pthread_attr_destroy(&attr);
                        return;
                }
                (void) pthread_attr_destroy(&attr);
        }
        quota_watch_free(w);
}

/* Take the cached watcher of this workspace directory (same inode), if any. */
QuotaWatch *quota_cache_take(QuotaCache *cache, const char *ws, int ws_fd) {
        struct stat st;

        if (fstat(ws_fd, &st) < 0)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(cache->entries); i++) {
                struct QuotaCacheEntry *c = &cache->entries[i];

                if (!c->watch || !streq(c->ws, ws))
                        continue;
                if (c->dev == (uint64_t) st.st_dev && c->ino == (uint64_t) st.st_ino) {
                        QuotaWatch *w = c->watch;
                        *c = (struct QuotaCacheEntry) {};
                        return w;
                }
                /* The directory was replaced (a restore): that index is of no use any more. */
                quota_watch_free_async(c->watch);
                *c = (struct QuotaCacheEntry) {};
        }
        return NULL;
}

/* Keep the watcher for the next run in this workspace; evict the least recently used. */
void quota_cache_put(QuotaCache *cache, const char *ws, int ws_fd, QuotaWatch *w) {
        struct QuotaCacheEntry *slot = NULL;
        struct stat st;

        if (!w)
                return;
        if (ws_fd < 0 || fstat(ws_fd, &st) < 0 || strlen(ws) >= sizeof(slot->ws)) {
                quota_watch_free_async(w);
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(cache->entries); i++) {
                struct QuotaCacheEntry *c = &cache->entries[i];
                if (!c->watch) {
                        slot = c;
                        break;
                }
                if (!slot || c->last_used < slot->last_used)
                        slot = c;
        }
        if (slot->watch)
                quota_watch_free_async(slot->watch);
        *slot = (struct QuotaCacheEntry) {
                .dev = (uint64_t) st.st_dev, .ino = (uint64_t) st.st_ino, .last_used = now_usec(CLOCK_MONOTONIC), .watch = w,
        };
        strcpy(slot->ws, ws);
}

void quota_cache_flush(QuotaCache *cache) {
        for (size_t i = 0; i < ELEMENTSOF(cache->entries); i++) {
                quota_watch_free(cache->entries[i].watch);
                cache->entries[i] = (struct QuotaCacheEntry) {};
        }
}
