/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /health's workspace usage: measured in a child, at most every 30 s. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct WorkspaceUsage WorkspaceUsage;

/* workspace_usage_new() - measure the workspaces under @workspaces_fd (not taken). */
int workspace_usage_new(sd_event *event, int workspaces_fd, WorkspaceUsage **ret);
WorkspaceUsage *workspace_usage_free(WorkspaceUsage *u);
/* workspace_usage_get() - the last measurement (false if none yet); refreshes it if old. */
bool workspace_usage_get(WorkspaceUsage *u, uint64_t *ret_bytes, uint64_t *ret_count);
