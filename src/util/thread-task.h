/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Short file-system work in a thread of its own, finished from the event loop. For work that is
 * small per call but on the answer's path (the snapshot after a run): a thread starts in
 * microseconds where fork() costs the daemon's page tables and the copy-on-write faults after it.
 * The work must only touch memory it owns (give it copies) and code that is thread-safe; long or
 * crash-prone work (restores, gc) stays in a forked ChildTask.
 */
#pragma once

#include <systemd/sd-event.h>

typedef struct ThreadTask ThreadTask;

/* The work, in the thread: return 0 or -errno, and optionally a result text in *ret_out (malloc'ed). */
typedef int (*ThreadTaskFn)(void *userdata, char **ret_out);
/* In the loop's thread, once: @error from the work, @out its text ("" if none). */
typedef void (*ThreadTaskDoneFn)(ThreadTask *t, int error, const char *out, void *userdata);

/*
 * thread_task_start() - run @fn(@work_data) in a new thread (all signals blocked in it); @done
 * runs from @e afterwards with @userdata. Return: 0 or -errno (nothing started).
 */
int thread_task_start(sd_event *e, ThreadTaskFn fn, void *work_data, ThreadTaskDoneFn done, void *userdata,
                      ThreadTask **ret);
/* thread_task_free() - waits for a thread still running (its @done is not called). Return: NULL. */
ThreadTask *thread_task_free(ThreadTask *t);
