/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The last two snapshot trees published for each workspace since the daemon started (in memory):
 * what a run's "created/modified files" compare against without listing the workspace's refs,
 * whose number grows until the next pruning. Calls util/ only.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/hashmap.h"

typedef struct WorkspaceHeads {
        HashMap map;
        uint8_t key[16];                /* siphash key, drawn with the first record */
        bool keyed;
} WorkspaceHeads;

/*
 * workspace_heads_publish() - the workspace @ws (a valid workspace id) now is the tree @digest
 * ("sha256:<hex>"), published as snapshot @exec_id: the one it was before becomes the previous.
 * Return: 0 or -ENOMEM (the workspace is then forgotten: lookups fall back to the refs).
 */
int workspace_heads_publish(WorkspaceHeads *h, const char *ws, const char *exec_id, const char *digest);

/*
 * workspace_heads_base() - the tree the snapshot @exec_id of @ws was published after: the
 * previous head, when @exec_id is the current one. Return: 1 with *@ret_prev, valid until the
 * next publish; 0 when that is not known here (not the current head, or the first snapshot of
 * the workspace since the daemon started): ask the refs.
 */
int workspace_heads_base(WorkspaceHeads *h, const char *ws, const char *exec_id, const char **ret_prev);

/* workspace_heads_forget() - drop what is known of @ws (its tree changed without a snapshot). */
void workspace_heads_forget(WorkspaceHeads *h, const char *ws);

void workspace_heads_done(WorkspaceHeads *h);
