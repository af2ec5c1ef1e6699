/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The last two published snapshot trees per workspace (workspace-heads.h). */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "execution/workspace-heads.h"
#include "util/macro.h"
#include "util/siphash24.h"

typedef struct Head {
        HashLink link;
        char *ws;
        char *exec_id;                  /* the current head's snapshot */
        char *cur, *prev;               /* trees: "sha256:<hex>"; prev NULL: unknown */
} Head;

static void head_free(Head *x) {
        if (!x)
                return;
        free(x->ws);
        free(x->exec_id);
        free(x->cur);
        free(x->prev);
        free(x);
}

static uint64_t head_hash(WorkspaceHeads *h, const char *ws) {
        if (!h->keyed) {
                if (getrandom(h->key, sizeof(h->key), GRND_NONBLOCK) != (ssize_t) sizeof(h->key))
                        memset(h->key, 0x5a, sizeof(h->key));   /* ids are ours: no flooding risk */
                h->keyed = true;
        }
        return siphash24(ws, strlen(ws), h->key);
}

static Head *head_find(WorkspaceHeads *h, const char *ws, uint64_t hash) {
        HASHMAP_FOREACH_HASH(l, &h->map, hash) {
                Head *x = hashmap_entry(l, Head, link);
                if (streq(x->ws, ws))
                        return x;
        }
        return NULL;
}

void workspace_heads_forget(WorkspaceHeads *h, const char *ws) {
        Head *x = head_find(h, ws, head_hash(h, ws));

        if (!x)
                return;
        hashmap_remove(&h->map, &x->link);
        head_free(x);
}

int workspace_heads_publish(WorkspaceHeads *h, const char *ws, const char *exec_id, const char *digest) {
        uint64_t hash = head_hash(h, ws);
        Head *x = head_find(h, ws, hash);
        char *e = strdup(exec_id), *d = strdup(digest);

        if (!e || !d) {
                free(e);
                free(d);
                workspace_heads_forget(h, ws);
                return -ENOMEM;
        }
        if (x) {
                free(x->prev);
                free(x->exec_id);
                x->prev = x->cur;
                x->cur = d;
                x->exec_id = e;
                return 0;
        }
        x = calloc(1, sizeof(*x));
        if (!x || !(x->ws = strdup(ws)) || hashmap_add(&h->map, &x->link, hash) < 0) {
                if (x)
                        free(x->ws);
                free(x);
                free(e);
                free(d);
                return -ENOMEM;
        }
        x->exec_id = e;
        x->cur = d;
        return 0;
}

int workspace_heads_base(WorkspaceHeads *h, const char *ws, const char *exec_id, const char **ret_prev) {
        Head *x = head_find(h, ws, head_hash(h, ws));

        if (!x || !x->prev || !streq(x->exec_id, exec_id))
                return 0;
        *ret_prev = x->prev;
        return 1;
}

static void drain_one(HashLink *l) {
        head_free(hashmap_entry(l, Head, link));
}

void workspace_heads_done(WorkspaceHeads *h) {
        hashmap_drain(&h->map, drain_one);
}
