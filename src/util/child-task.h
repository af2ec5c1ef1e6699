/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Long file-system work (snapshots, restores, gc) in a forked child, so the event loop never blocks. */
#pragma once

#include <stddef.h>
#include <systemd/sd-event.h>

typedef struct ChildTask ChildTask;

/*
 * The work, run in the child: write at most 64 KiB of result text to @out_fd; return 0 or -errno
 * (the child exits with that errno).
 */
typedef int (*ChildTaskFn)(int out_fd, void *userdata);
/* In the parent: @error is 0 or -errno (from the child, or -ECHILD if it died); @out its text. */
typedef void (*ChildTaskDoneFn)(ChildTask *t, int error, const char *out, void *userdata);

/* child_task_start() - fork and run @fn; @done runs once from the loop. Return: 0 or -errno. */
int child_task_start(sd_event *e, ChildTaskFn fn, ChildTaskDoneFn done, void *userdata, ChildTask **ret);
/* child_task_free() - kills a still running child (and waits for it). */
ChildTask *child_task_free(ChildTask *t);
