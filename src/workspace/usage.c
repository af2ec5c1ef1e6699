/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /health's workspace usage: a walk of every workspace, in a child, at most every 30 s; answers
 * give the last result. Calls workspace/quota.h (quota_scan()) and util/ only.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/child-task.h"
#include "util/dirent-util.h"
#include "util/fd-util.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "workspace/quota.h"
#include "workspace/usage.h"

struct WorkspaceUsage {
        sd_event *event;
        int workspaces_fd;               /* not ours */
        ChildTask *task;
        uint64_t bytes, count, at_usec;  /* the last measurement, and when (CLOCK_MONOTONIC) */
        bool known;
};

int workspace_usage_new(sd_event *event, int workspaces_fd, WorkspaceUsage **ret) {
        WorkspaceUsage *u;

        u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        *u = (WorkspaceUsage) { .event = sd_event_ref(event), .workspaces_fd = workspaces_fd };
        *ret = u;
        return 0;
}

WorkspaceUsage *workspace_usage_free(WorkspaceUsage *u) {
        if (!u)
                return NULL;
        u->task = child_task_free(u->task);
        sd_event_unref(u->event);
        free(u);
        return NULL;
}

#define USAGE_MAX_AGE_USEC (30 * USEC_PER_SEC)

static int usage_child(int out_fd, void *userdata) {
        WorkspaceUsage *u = userdata;
        _cleanup_(closedirp) DIR *d = NULL;
        uint64_t total = 0, count = 0;
        char line[64];
        int r;

        r = opendir_at(u->workspaces_fd, ".", &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d) {
                _cleanup_close_ int wfd = -EBADF;
                uint64_t bytes = 0;

                if (de->d_name[0] == '.')
                        continue;
                wfd = openat(u->workspaces_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (wfd < 0)
                        continue;
                count++;
                if (quota_scan(wfd, &bytes, NULL) >= 0)
                        total += bytes;
        }
        (void) snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 "\n", total, count);
        return write(out_fd, line, strlen(line)) < 0 ? negative_errno() : 0;
}

static void on_usage_done(ChildTask *t, int error, const char *out, void *userdata) {
        WorkspaceUsage *u = userdata;
        unsigned long long b, c;

        u->task = child_task_free(u->task);
        if (error >= 0 && sscanf(out, "%llu %llu", &b, &c) == 2) {
                u->bytes = b;
                u->count = c;
                u->known = true;
        }
        u->at_usec = now_usec(CLOCK_MONOTONIC);
}

bool workspace_usage_get(WorkspaceUsage *u, uint64_t *ret_bytes, uint64_t *ret_count) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        /* A walk of every workspace is not for the request path (and /health is unauthenticated):
         * it runs in a child, at most every 30 s, and answers give the last result. */
        if (!u->task && (!u->known || now - u->at_usec > USAGE_MAX_AGE_USEC))
                (void) child_task_start(u->event, usage_child, on_usage_done, u, &u->task);
        *ret_bytes = u->bytes;
        *ret_count = u->count;
        return u->known;
}
