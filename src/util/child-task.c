/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Long file-system work (snapshots, restores, gc) in a forked child, so the event loop never blocks. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/child-task.h"
#include "util/io-util.h"
#include "util/macro.h"

#define OUT_MAX (64 * 1024)

struct ChildTask {
        pid_t pid;
        int out_fd;
        sd_event_source *child_source;
        ChildTaskDoneFn done;
        void *userdata;
};

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        ChildTask *t = userdata;
        char *out = malloc(OUT_MAX + 1);
        ssize_t n;
        int error;

        /* The child wrote everything before it exited: read what is in the pipe. */
        if (out) {
                n = loop_read(t->out_fd, out, OUT_MAX);
                out[MAX(n, (ssize_t) 0)] = '\0';      /* a read error: no output */
        }
        if (si->si_code == CLD_EXITED)
                error = si->si_status == 0 ? 0 : -si->si_status;
        else
                error = -ECHILD;
        t->pid = 0;
        t->child_source = sd_event_source_disable_unref(t->child_source);
        t->done(t, error, out ?: "", t->userdata);
        free(out);
        return 0;
}

int child_task_start(sd_event *e, ChildTaskFn fn, ChildTaskDoneFn done, void *userdata, ChildTask **ret) {
        int pipefd[2];
        ChildTask *t;
        pid_t parent = getpid();
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        /* A pipe big enough for the whole result, so the child never blocks on it. */
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                free(t);
                return negative_errno();
        }
        (void) fcntl(pipefd[1], F_SETPIPE_SZ, OUT_MAX + 4096);
        t->pid = fork();
        if (t->pid < 0) {
                r = negative_errno();
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                free(t);
                return r;
        }
        if (t->pid == 0) {
                sigset_t none;

                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(ECHILD);
                safe_close(pipefd[0]);
                r = fn(pipefd[1], userdata);
                _exit(r < 0 ? (-r & 0xff) : 0);
        }
        safe_close(pipefd[1]);
        t->out_fd = pipefd[0];
        t->done = done;
        t->userdata = userdata;
        r = sd_event_add_child(e, &t->child_source, t->pid, WEXITED, on_child, t);
        if (r < 0) {
                child_task_free(t);
                return r;
        }
        (void) sd_event_source_set_description(t->child_source, "child-task");
        *ret = t;
        return 0;
}

ChildTask *child_task_free(ChildTask *t) {
        if (!t)
                return NULL;
        t->child_source = sd_event_source_disable_unref(t->child_source);
        if (t->pid > 0) {
                (void) kill(t->pid, SIGKILL);
                (void) waitpid(t->pid, NULL, 0);
        }
        safe_close(t->out_fd);
        free(t);
        return NULL;
}
