/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Short file-system work in a thread of its own, finished from the event loop. */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/thread-task.h"
#include "util/macro.h"

struct ThreadTask {
        pthread_t thread;
        bool joinable;
        int event_fd;                   /* written once by the thread when it is done */
        sd_event_source *source;
        ThreadTaskFn fn;
        void *work_data;
        ThreadTaskDoneFn done;
        void *userdata;
        /* Written by the thread before it signals event_fd; read by the loop after. */
        int error;
        char *out;
};

static void *thread_main(void *p) {
        ThreadTask *t = p;
        uint64_t one = 1;

        t->error = t->fn(t->work_data, &t->out);
        /* The eventfd write is the hand-over: it orders the writes above before the loop's reads. */
        while (write(t->event_fd, &one, sizeof(one)) < 0 && errno == EINTR)
                ;
        return NULL;
}

static int on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ThreadTask *t = userdata;
        uint64_t v;

        if (read(t->event_fd, &v, sizeof(v)) < 0 && errno == EAGAIN)
                return 0;   /* spurious */
        t->source = sd_event_source_disable_unref(t->source);
        (void) pthread_join(t->thread, NULL);
        t->joinable = false;
        t->done(t, t->error, t->out ?: "", t->userdata);
        return 0;
}

int thread_task_start(sd_event *e, ThreadTaskFn fn, void *work_data, ThreadTaskDoneFn done, void *userdata,
                      ThreadTask **ret) {
        ThreadTask *t;
        sigset_t all, old;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        *t = (ThreadTask) { .fn = fn, .work_data = work_data, .done = done, .userdata = userdata };
        t->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (t->event_fd < 0) {
                r = negative_errno();
                free(t);
                return r;
        }
        r = sd_event_add_io(e, &t->source, t->event_fd, EPOLLIN, on_done, t);
        if (r < 0) {
                thread_task_free(t);
                return r;
        }
        (void) sd_event_source_set_description(t->source, "thread-task");

        /* Every signal blocked in the thread: they are the loop's (signalfd, child watches). */
        sigfillset(&all);
        (void) pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&t->thread, NULL, thread_main, t);
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                thread_task_free(t);
                return r;
        }
        t->joinable = true;
        *ret = t;
        return 0;
}

ThreadTask *thread_task_free(ThreadTask *t) {
        if (!t)
                return NULL;
        if (t->joinable)
                (void) pthread_join(t->thread, NULL);
        t->source = sd_event_source_disable_unref(t->source);
        safe_close(t->event_fd);
        free(t->out);
        free(t);
        return NULL;
}
