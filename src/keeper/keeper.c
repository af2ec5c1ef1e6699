/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sandbox-runner-keeper: the process between sandbox-runnerd and one bwrap.
 *
 * The daemon starts keepers ahead of their runs (so that neither a fork of the daemon nor an exec
 * sits between a request and its sandbox) and hands each one job (keeper-job.h). The keeper then
 * starts bwrap, reports its pid, is the child subreaper that reaps the sandbox's pid 1 (bwrap
 * exits before it: only once that pid 1 is gone is the pid namespace, and so the run, over),
 * reports bwrap's wait status, and holds its cgroup (the scope's accounting) until released.
 *
 * Usage (by the daemon only): sandbox-runner-keeper PARENT-PID, with the job socket as fd 3.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper-bind.h"
#include "keeper-job.h"

/* Exit statuses before bwrap runs (the daemon logs them). */
enum {
        EXIT_SETUP = 120,        /* a job we could not take */
        EXIT_PARENT = 126,       /* not started by the parent we were told of */
};

static char *const bwrap_environ[] = { (char *) "PATH=/usr/bin:/bin", NULL };

static int safe_close(int fd) {
        if (fd >= 0)
                (void) close(fd);
        return -1;
}

static void write_all(int fd, const char *s) {
        size_t n = strlen(s);

        while (n > 0) {
                ssize_t k = write(fd, s, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return;
                s += k;
                n -= (size_t) k;
        }
}

static void report(char tag, int v) {
        char line[32];

        (void) snprintf(line, sizeof(line), "%c%d\n", tag, v);
        write_all(KEEPER_FD_REPORT, line);
}

static void set_limit(int resource, uint64_t v) {
        struct rlimit rl = { .rlim_cur = (rlim_t) v, .rlim_max = (rlim_t) v };
        (void) setrlimit(resource, &rl);
}

/* Receive the job: returns 0, 1 on a clean EOF (the daemon let us go unused), -1 on a bad one.
 * On 0 the slots are at their fd numbers and *ret_argv_fd holds the argv memfd. */
static int receive_job(int sock, KeeperJob *job, int *ret_argv_fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * (KEEPER_JOB_SLOTS + 1))];
        } control;
        struct iovec iov = { .iov_base = job, .iov_len = sizeof(*job) };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control),
        };
        int fds[KEEPER_JOB_SLOTS + 1], n_fds = 0, high[KEEPER_JOB_SLOTS], want = 0;
        ssize_t k;

        do
                k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < n && n_fds < KEEPER_JOB_SLOTS + 1; i++)
                                memcpy(&fds[n_fds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                }
        if (k == 0 && n_fds == 0)
                return 1;
        for (int i = 0; i < KEEPER_JOB_SLOTS; i++)
                if (job->fd_mask & (1U << i))
                        want++;
        if (k != (ssize_t) sizeof(*job) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || job->magic != KEEPER_JOB_MAGIC ||
            (job->fd_mask >> KEEPER_JOB_SLOTS) != 0 || n_fds != want + 1) {
                for (int i = 0; i < n_fds; i++)
                        (void) close(fds[i]);
                return -1;
        }

        /* Out of the way of the layout first (the received fds can be anywhere), then into it. */
        for (int i = 0, j = 0; i < KEEPER_JOB_SLOTS; i++) {
                high[i] = -1;
                if (!(job->fd_mask & (1U << i)))
                        continue;
                high[i] = fcntl(fds[j], F_DUPFD_CLOEXEC, 100);
                if (high[i] < 0)
                        return -1;
                (void) close(fds[j++]);
        }
        *ret_argv_fd = fcntl(fds[n_fds - 1], F_DUPFD_CLOEXEC, 100);
        if (*ret_argv_fd < 0)
                return -1;
        (void) close(fds[n_fds - 1]);
        for (int i = 0; i < KEEPER_JOB_SLOTS; i++) {
                if (high[i] < 0) {
                        (void) close(i);
                        continue;
                }
                if (dup2(high[i], i) < 0)
                        return -1;
                (void) close(high[i]);
        }
        /* bwrap inherits the layout, except the keeper's own two pipes. */
        (void) fcntl(KEEPER_FD_CONTROL, F_SETFD, FD_CLOEXEC);
        (void) fcntl(KEEPER_FD_REPORT, F_SETFD, FD_CLOEXEC);
        return 0;
}

/* The program path and its arguments from the memfd: a NULL-terminated array, path first. */
static char **read_argv(int fd, uint32_t argc) {
        struct stat st;
        char *buf, **v;
        size_t n = 0, off = 0;

        if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t) st.st_size > KEEPER_ARGV_BYTES_MAX ||
            argc == 0 || argc > KEEPER_ARGV_BYTES_MAX / 2)
                return NULL;
        buf = malloc((size_t) st.st_size + 1);
        v = calloc((size_t) argc + 2, sizeof(char *));
        if (!buf || !v)
                return NULL;
        while (off < (size_t) st.st_size) {
                ssize_t k = pread(fd, buf + off, (size_t) st.st_size - off, (off_t) off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return NULL;
                off += (size_t) k;
        }
        if (buf[off - 1] != '\0')
                return NULL;
        buf[off] = '\0';
        for (size_t p = 0; p < off; p += strlen(buf + p) + 1) {
                if (n >= (size_t) argc + 1)
                        return NULL;
                v[n++] = buf + p;
        }
        return n == (size_t) argc + 1 ? v : NULL;
}

/* Early start: the whole seccomp program (the memfd at SANDBOX_FD_SECCOMP) into @fd in one
 * write(), which a pipe with room for all of it takes whole: bwrap never sees a part of it. */
static int release_program(int fd) {
        struct stat st;
        void *p;
        ssize_t k;

        if (fstat(SANDBOX_FD_SECCOMP, &st) < 0 || st.st_size <= 0)
                return -1;
        p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, SANDBOX_FD_SECCOMP, 0);
        if (p == MAP_FAILED)
                return -1;
        do
                k = write(fd, p, (size_t) st.st_size);
        while (k < 0 && errno == EINTR);
        (void) munmap(p, (size_t) st.st_size);
        return k == (ssize_t) st.st_size ? 0 : -1;
}

static void reap_all(void) {
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
}

/* The argument, and the process attributes: die with the daemon, be the subreaper of the sandbox.
 * Return: 0 to go on, or the exit status. */
static int keeper_setup(int argc, char *argv[]) {
        char *end;
        long parent;

        if (argc != 2 || (parent = strtol(argv[1], &end, 10)) <= 1 || *end != '\0') {
                fprintf(stderr, "%s is an internal helper of sandbox-runnerd and is not meant to be run by hand.\n",
                        argv[0]);
                return EXIT_FAILURE;
        }
        /* We die with the daemon; if it is gone already (our parent is not the one that started
         * us), we never start anything. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != (pid_t) parent)
                return EXIT_PARENT;
        /* bwrap exits as soon as its pid 1 in the sandbox has told it the payload's status, which
         * is before that pid 1 has exited, and so before the kernel has killed what was left in
         * the pid namespace. As a subreaper we inherit that pid 1 and reap it ourselves: once it
         * is gone, the whole namespace is, and only then is the run over (nothing can still write
         * to the workspace when the snapshot starts). */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return EXIT_SETUP;
        return 0;
}

/* The job from the socket at KEEPER_FD_JOB, its fds in their slots, and bwrap's argv.
 * Return: 0; 1 when the daemon let us go unused; -1 on a job we cannot take. */
static int take_job(KeeperJob *job, char ***ret_args, int *ret_sock) {
        int sock, argv_fd = -1;

        /* Nothing of the daemon but the job socket (an fd it passed without close-on-exec, say a
         * socket-activated listener, must not reach bwrap). */
        sock = fcntl(KEEPER_FD_JOB, F_DUPFD_CLOEXEC, 100);
        if (sock < 0)
                return -1;
        (void) syscall(SYS_close_range, 3U, 99U, 0U);
        (void) syscall(SYS_close_range, (unsigned) sock + 1, ~0U, 0U);

        switch (receive_job(sock, job, &argv_fd)) {
        case 1:
                return 1;       /* not needed after all */
        case 0:
                break;
        default:
                return -1;
        }
        if (job->flags & KEEPER_JOB_PREBUILT)
                *ret_sock = sock;       /* the bind comes on it (keeper-bind.c) */
        else
                sock = safe_close(sock);
        *ret_args = read_argv(argv_fd, job->argc);
        argv_fd = safe_close(argv_fd);
        return *ret_args ? 0 : -1;
}

/* Early start: the program's pipe. Its read end becomes bwrap's SANDBOX_FD_SECCOMP, only we hold
 * the write end (close-on-exec), sized to take the program in one write. Return: 0 or -1. */
static int open_program_pipe(int program[2]) {
        struct stat st;

        if (pipe2(program, O_CLOEXEC) < 0 || fstat(SANDBOX_FD_SECCOMP, &st) < 0)
                return -1;
        /* Above the layout: a free slot of it (no code fd, say) would be closed again. */
        for (int i = 0; i < 2; i++) {
                int fd = fcntl(program[i], F_DUPFD_CLOEXEC, KEEPER_JOB_SLOTS);
                if (fd < 0)
                        return -1;
                (void) close(program[i]);
                program[i] = fd;
        }
        if (st.st_size > 65536 && fcntl(program[1], F_SETPIPE_SZ, (int) st.st_size) < 0)
                return -1;
        return 0;
}

/* The go: the scope exists and we are in it. Return: 0 or -1. */
static int wait_for_go(void) {
        char c;

        for (;;) {
                ssize_t k = read(KEEPER_FD_CONTROL, &c, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k != 1 || c != 'G')
                        return -1;
                return 0;
        }
}

/* vfork(): the child only moves an fd (@program_r, early start), sets limits and execs (or
 * _exit()s); it never returns from here. Return: bwrap's pid, or -1. */
static pid_t spawn_bwrap(const KeeperJob *job, char **args, int program_r) {
        pid_t pid;

        pid = vfork();
        if (pid != 0)
                return pid;

        if (program_r >= 0 && dup2(program_r, SANDBOX_FD_SECCOMP) < 0)
                _exit(124);
        set_limit(RLIMIT_CORE, 0);
        if (job->fsize > 0)
                set_limit(RLIMIT_FSIZE, job->fsize);
        if (job->as > 0)
                set_limit(RLIMIT_AS, job->as);
        if (job->nofile > 0)
                set_limit(RLIMIT_NOFILE, job->nofile);
        if (job->nproc > 0)
                set_limit(RLIMIT_NPROC, job->nproc);
        execve(args[0], args + 1, bwrap_environ);
        write_all(2, "sandbox-runner: failed to execute bwrap\n");
        _exit(127);
}

/* A byte from the daemon: 'K' (or the end of the pipe) kills bwrap; 'G' (early start) lets the
 * sandbox's pid 1 go on. Return: false once the control pipe is gone. */
static bool handle_control(pid_t pid, int *program_w, bool detachable) {
        char c;
        ssize_t k = read(KEEPER_FD_CONTROL, &c, 1);

        /* Detachable: the daemon went away (a restart), the sandbox stays for the next one. */
        if (k <= 0 && detachable && *program_w < 0)
                return false;
        if (k <= 0 || c == 'K') {
                (void) kill(pid, SIGKILL);
                /* The pid 1 waits for its program, and is not yet bound to bwrap's
                 * life: an empty program ends it. */
                *program_w = safe_close(*program_w);
        }
        if (k <= 0)
                return false;
        if (c == 'G' && *program_w >= 0) {
                /* Everything is in the scope: let the sandbox's pid 1 go on. */
                if (release_program(*program_w) < 0)
                        (void) kill(pid, SIGKILL);
                *program_w = safe_close(*program_w);
                (void) close(SANDBOX_FD_SECCOMP);
        }
        return true;
}

/* bwrap's exit, if it has: reap what is left, report, hold the cgroup (and so the accounting)
 * until released. Return: true once done. */
static bool handle_exit(pid_t pid, int *program_w) {
        int status;
        char c;

        if (waitpid(pid, &status, WNOHANG) != pid)
                return false;
        /* The sandbox's pid 1, if it outlived bwrap (see above); if it
         * still waits for its program, an empty one ends it. */
        *program_w = safe_close(*program_w);
        keeper_bind_abandon();
        reap_all();
        report('X', status);
        while (read(KEEPER_FD_CONTROL, &c, 1) > 0)
                ;
        return true;
}

/* Until bwrap has exited (reported) or the daemon is gone (bwrap killed, unless @detachable: then
 * until bwrap has exited, with nobody to report to). Return: the exit status. */
/* Prebuilt: the one bind on the job socket, answered on the report pipe; then the socket goes.
 * Before it, maybe, the word to prepare it (keeper_bind_prepare()), not answered. */
static void handle_bind(int *bind_sock) {
        KeeperBind b = {};
        ssize_t k;

        do
                k = recv(*bind_sock, &b, sizeof(b), 0);
        while (k < 0 && errno == EINTR);
        if (k == (ssize_t) sizeof(b) && b.magic == KEEPER_BIND_PREPARE_MAGIC) {
                (void) keeper_bind_prepare(&b);   /* if it fails, the bind forks its child then */
                return;
        }
        if (k == (ssize_t) sizeof(b))
                report('B', -keeper_bind(&b));
        else if (k > 0)
                report('B', EINVAL);
        *bind_sock = safe_close(*bind_sock);
}

static int supervise(pid_t pid, int program_w, bool detachable, int bind_sock) {
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        bool control = true;

        for (;;) {
                struct pollfd p[3] = {
                        { .fd = control ? KEEPER_FD_CONTROL : -1, .events = POLLIN },
                        { .fd = bind_sock, .events = POLLIN },
                        { .fd = pidfd, .events = POLLIN },
                };
                if (poll(p, pidfd >= 0 ? 3 : 2, pidfd >= 0 ? -1 : 100) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        handle_bind(&bind_sock);
                bool gated = program_w >= 0;   /* before 'G': the end of the pipe kills */

                if (p[0].revents && !handle_control(pid, &program_w, detachable)) {
                        if (!detachable || gated)
                                break;
                        control = false;
                        (void) close(KEEPER_FD_CONTROL);
                        (void) close(KEEPER_FD_REPORT);
                }
                if ((pidfd < 0 || p[2].revents) && handle_exit(pid, &program_w))
                        return EXIT_SUCCESS;
        }
        (void) kill(pid, SIGKILL);
        program_w = safe_close(program_w);
        keeper_bind_abandon();
        reap_all();
        return EXIT_SUCCESS;
}

/* In a build with -fsanitize=address: LeakSanitizer's check at exit turned the keeper's clean exit
 * into status 1 (test-sandbox-spawn's detachable case; its message goes to the keeper's stderr,
 * which is the sandbox's); the check stops the world from a traced clone, and the keeper is a
 * child subreaper. A libc-only supervisor of one sandbox keeps nothing to leak: no check. */
#if defined(__SANITIZE_ADDRESS__)
#  define KEEPER_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define KEEPER_ASAN 1
#  endif
#endif
#ifdef KEEPER_ASAN
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) {
        return 1;
}
#endif

int main(int argc, char *argv[]) {
        KeeperJob job = {};
        char **args = NULL;
        bool early;
        int r, program[2] = { -1, -1 }, bind_sock = -1;
        pid_t pid;

        r = keeper_setup(argc, argv);
        if (r != 0)
                return r;
        r = take_job(&job, &args, &bind_sock);
        if (r > 0)
                return EXIT_SUCCESS;
        if (r < 0)
                return EXIT_SETUP;
        early = job.flags & KEEPER_JOB_EARLY;
        /* A detachable sandbox outlives the daemon: no parent-death signal from now on. */
        if ((job.flags & KEEPER_JOB_DETACHABLE) && prctl(PR_SET_PDEATHSIG, 0) < 0)
                return EXIT_SETUP;
        if (early && open_program_pipe(program) < 0)
                return EXIT_SETUP;

        /* Wait for the go. (Early start: later, in supervise(). No scope: no wait.) */
        if (!early && !(job.flags & KEEPER_JOB_START_NOW) && wait_for_go() < 0)
                return EXIT_SETUP;

        pid = spawn_bwrap(&job, args, program[0]);
        if (pid < 0)
                return EXIT_SETUP;

        /* bwrap has exec'd (vfork) with SIGPIPE at its default, for the payload. Ours is ignored from
         * now on: the program's pipe may have no reader any more when the 'G' comes (the sandbox
         * died first, and we read the 'G' before its exit): the write fails, and we go on to report
         * bwrap's exit, instead of dying without a report. Likewise for a report nobody reads. */
        (void) signal(SIGPIPE, SIG_IGN);

        /* The keeper holds no end of the payload's stdio (early start: it keeps the program). */
        for (int fd = 0; fd <= SANDBOX_FD_CODE; fd++)
                if (!early || fd != SANDBOX_FD_SECCOMP)
                        (void) close(fd);
        (void) close(SANDBOX_FD_INFO);
        (void) close(SANDBOX_FD_EXEC);
        (void) close(SANDBOX_FD_REQUEST);
        program[0] = safe_close(program[0]);

        report('S', (int) pid);
        return supervise(pid, program[1], job.flags & KEEPER_JOB_DETACHABLE, bind_sock);
}
