/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pruning of the snapshot store (SnapshotRetention=), in a child, once snapshots pause. */
#pragma once

#include <systemd/sd-event.h>

typedef struct Cas Cas;
typedef struct SnapshotGc SnapshotGc;

/* snapshot_gc_new() - prune @cas (not taken) keeping @retention per workspace (0: never prune). */
int snapshot_gc_new(sd_event *event, Cas *cas, unsigned retention, SnapshotGc **ret);
SnapshotGc *snapshot_gc_free(SnapshotGc *g);
/* snapshot_gc_published() - count one; every so often prune (after a pause in snapshots). */
void snapshot_gc_published(SnapshotGc *g);
