/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sandbox-runner-exec: the command of a sandbox built ahead of its run (exec-request.h). It runs
 * in the sandbox as bwrap left it for a payload (its pid, session, seccomp filter, no
 * capabilities), waits for the request, and becomes the payload: by the time the payload runs,
 * nothing of the helper is left but what it set (limits, stdio, working directory, environment),
 * each as bwrap sets it for a payload of a sandbox built for it.
 *
 * Usage: none by hand; bwrap execs it as /proc/self/fd/SANDBOX_FD_EXEC.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "exec-request.h"
#include "keeper-job.h"

/* Failures before the payload runs: bwrap's own words and status for the same failures. */
#define EXIT_SETUP 1

extern char **environ;

static void set_limit(int resource, uint64_t v) {
        struct rlimit rl = { .rlim_cur = (rlim_t) v, .rlim_max = (rlim_t) v };

        if (v > 0)
                (void) setrlimit(resource, &rl);
}

/* The request and its fds (moved above the layout, close-on-exec). Return: 0, 1 on end of file
 * (the sandbox is discarded), -1 on anything else. */
static int receive_request(ExecRequest *req, int fds[static EXEC_REQUEST_FDS]) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * EXEC_REQUEST_FDS)];
        } control;
        struct iovec iov = { .iov_base = req, .iov_len = sizeof(*req) };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control),
        };
        int n_fds = 0;
        ssize_t k;

        do
                k = recvmsg(SANDBOX_FD_REQUEST, &msg, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < n; i++) {
                                int fd;
                                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                if (n_fds < EXEC_REQUEST_FDS)
                                        fds[n_fds++] = fd;
                                else
                                        (void) close(fd);
                        }
                }
        if (k == 0 && n_fds == 0)
                return 1;
        if (k != (ssize_t) sizeof(*req) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n_fds != EXEC_REQUEST_FDS ||
            req->magic != EXEC_REQUEST_MAGIC || req->argc == 0 || req->strings_size == 0 ||
            req->strings_size > EXEC_REQUEST_STRINGS_MAX)
                return -1;
        /* Above everything the payload gets (0-2) and the layout (closed below). */
        for (int i = 0; i < n_fds; i++) {
                int fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
                if (fd < 0)
                        return -1;
                (void) close(fds[i]);
                fds[i] = fd;
        }
        return 0;
}

/* The strings of the memfd, split: *ret_cwd, then argv and envp (NULL-terminated). Return: 0 or -1. */
static int read_strings(int fd, const ExecRequest *req, char **ret_cwd, char ***ret_argv, char ***ret_envp) {
        size_t size = req->strings_size, off = 0, n = 0, want = 1 + (size_t) req->argc + req->envc;
        struct stat st;
        char *buf, **v;

        if (fstat(fd, &st) < 0 || st.st_size != (off_t) size || want > size)
                return -1;
        buf = malloc(size + 1);
        v = calloc(want + 2, sizeof(char *));
        if (!buf || !v)
                return -1;
        while (off < size) {
                ssize_t k = pread(fd, buf + off, size - off, (off_t) off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                off += (size_t) k;
        }
        if (buf[size - 1] != '\0')
                return -1;
        buf[size] = '\0';
        for (size_t p = 0; p < size; p += strlen(buf + p) + 1) {
                if (n >= want)
                        return -1;
                /* argv ends after argc entries: the environment starts one slot later. */
                v[n + (n > req->argc)] = buf + p;
                n++;
        }
        if (n != want)
                return -1;
        *ret_cwd = v[0];
        *ret_argv = v + 1;                       /* v[1 + argc] stays NULL */
        *ret_envp = v + 2 + req->argc;           /* and so does the last */
        return 0;
}

/* In a sanitizer build: no LeakSanitizer check at exit (as the keeper: it would need ptrace, which
 * the sandbox's seccomp filter refuses, and would turn a clean exit into status 1). */
#if defined(__SANITIZE_ADDRESS__)
#  define EXEC_HELPER_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define EXEC_HELPER_ASAN 1
#  endif
#endif
#ifdef EXEC_HELPER_ASAN
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) {
        return 1;
}
#endif

int main(void) {
        ExecRequest req = {};
        int fds[EXEC_REQUEST_FDS] = { -1, -1, -1, -1 }, r;
        char *cwd, **args, **envp;

        /* Here: the sandbox is whole (bwrap execs us last). Nobody listening: discarded already. */
        if (send(SANDBOX_FD_REQUEST, &(char) { EXEC_HELPER_READY }, 1, MSG_NOSIGNAL) != 1)
                return EXIT_SUCCESS;
        r = receive_request(&req, fds);
        if (r > 0)
                return EXIT_SUCCESS;
        if (r < 0 || read_strings(fds[3], &req, &cwd, &args, &envp) < 0) {
                /* Nobody to read stderr yet: the daemon sees the exit before a request was taken. */
                return EXIT_SETUP;
        }
        set_limit(RLIMIT_FSIZE, req.fsize);
        set_limit(RLIMIT_AS, req.as);
        set_limit(RLIMIT_NOFILE, req.nofile);
        set_limit(RLIMIT_NPROC, req.nproc);
        for (int i = 0; i < 3; i++)
                if (dup2(fds[i], i) < 0)
                        return EXIT_SETUP;
        /* Nothing else of ours reaches the payload: not the request socket, not this program. */
        (void) syscall(SYS_close_range, 3U, ~0U, 0U);

        if (chdir(cwd) < 0) {
                fprintf(stderr, "bwrap: Can't chdir to %s: %s\n", cwd, strerror(errno));
                return EXIT_SETUP;
        }
        /* As bwrap: the payload is looked up in the PATH of the environment it gets. */
        environ = envp;
        execvp(args[0], args);
        fprintf(stderr, "bwrap: execvp %s: %s\n", args[0], strerror(errno));
        return EXIT_SETUP;
}
