/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Start-up probes of bwrap, and launching one sandbox through a keeper (src/keeper/). */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "sandbox/sandbox.h"
#include "util/dirent-util.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/strv.h"

/* bwrap's own environment is visible inside the sandbox as /proc/1/environ: keep it empty of
 * anything but a PATH. */
static char *const bwrap_environ[] = { (char *) "PATH=/usr/bin:/bin", NULL };

static int pidfd_open_(pid_t pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

static void child_reset_signals(void) {
        sigset_t none;
        struct sigaction sa = { .sa_handler = SIG_DFL };

        for (int sig = 1; sig < _NSIG; sig++)
                (void) sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---- probes ---------------------------------------------------------------------------------- */

/* Run bwrap synchronously with its stderr captured; 0 = exit status 0. */
static int run_bwrap(const char *bwrap, char **argv, char **ret_stderr) {
        int pipefd[2];
        pid_t pid;
        char buf[1024];
        ssize_t k;
        size_t n;
        int status;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return negative_errno();
        pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return r;
        }
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                child_reset_signals();
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(pipefd[1], 2) < 0)
                        _exit(127);
                execve(bwrap, argv, bwrap_environ);
                _exit(127);
        }
        safe_close(pipefd[1]);
        k = loop_read(pipefd[0], buf, sizeof(buf) - 1);
        n = k > 0 ? (size_t) k : 0;     /* a read error: no message */
        safe_close(pipefd[0]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        buf[n] = '\0';
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        if (ret_stderr)
                *ret_stderr = n > 0 ? strdup(buf) : NULL;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        return -EPERM;
}

static int probe_argv(const SandboxProbe *p, bool fresh_proc, bool disable_userns, char ***ret) {
        _cleanup_strv_free_ char **a = NULL;
        const char *const base[] = {
                "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
        };
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(base); i++)
                r = strv_extend(&a, base[i]);
        if (r >= 0 && disable_userns)
                r = strv_extend(&a, "--disable-userns");
        if (r >= 0)
                r = strv_extend(&a, "--ro-bind") >= 0 && strv_extend(&a, "/usr") >= 0 ? strv_extend(&a, "/usr") : -ENOMEM;
        if (r >= 0 && p->usr_merged) {
                const char *const links[] = { "usr/bin", "/bin", "usr/lib", "/lib" };
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(links); i += 2)
                        r = strv_extend(&a, "--symlink") >= 0 && strv_extend(&a, links[i]) >= 0 ?
                                strv_extend(&a, links[i + 1]) : -ENOMEM;
        }
        for (char **d = p->lib_dirs; r >= 0 && d && *d; d++) {
                char target[64];
                (void) snprintf(target, sizeof(target), "usr%s", *d);
                r = strv_extend(&a, p->usr_merged ? "--symlink" : "--ro-bind") >= 0 &&
                        strv_extend(&a, p->usr_merged ? target : *d) >= 0 ? strv_extend(&a, *d) : -ENOMEM;
        }
        if (r >= 0)
                r = fresh_proc ? (strv_extend(&a, "--proc") >= 0 ? strv_extend(&a, "/proc") : -ENOMEM)
                               : (strv_extend(&a, "--ro-bind") >= 0 && strv_extend(&a, "/proc") >= 0 ?
                                  strv_extend(&a, "/proc") : -ENOMEM);
        /* The launch covers /proc/sys read-only (sandbox_argv_build()): a host without it has
         * no usable sandbox, rather than one with writable sysctls. */
        if (r >= 0 && fresh_proc)
                r = strv_extend(&a, "--ro-bind") >= 0 && strv_extend(&a, "/proc/sys") >= 0 ?
                        strv_extend(&a, "/proc/sys") : -ENOMEM;
        if (r >= 0)
                r = strv_extend(&a, "--dev") >= 0 ? strv_extend(&a, "/dev") : -ENOMEM;
        if (r >= 0)
                r = strv_extend(&a, "--") >= 0 ? strv_extend(&a, "/usr/bin/true") : -ENOMEM;
        if (r < 0)
                return r;
        *ret = STEAL(a);
        return 0;
}

static bool is_link_into_usr(const char *path) {
        char buf[64];
        ssize_t n = readlink(path, buf, sizeof(buf) - 1);

        if (n <= 0)
                return false;
        buf[n] = '\0';
        return strneq(buf, "usr/", 4) || strneq(buf, "/usr/", 5);
}

static bool is_interpreter_name(const char *name) {
        return strneq(name, "python", 6) || strneq(name, "pip", 3) || streq(name, "R") || streq(name, "Rscript");
}

static int strv_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int sandbox_probe_interpreters(const char *root, bool usr_merged, char ***ret) {
        const char *const dirs[] = { "/usr/bin", "/usr/local/bin", usr_merged ? NULL : "/bin" };
        _cleanup_strv_free_ char **l = NULL;

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *path = NULL;
                _cleanup_(closedirp) DIR *d = NULL;
                struct dirent *de;
                int r;

                if (!dirs[i])
                        continue;
                if (asprintf(&path, "%s%s", root ?: "", dirs[i]) < 0)
                        return -ENOMEM;
                d = opendir(path);
                if (!d) {
                        if (errno == ENOENT || errno == ENOTDIR)
                                continue;
                        return negative_errno();
                }
                while ((r = readdir_no_dot(d, &de)) > 0) {
                        struct stat st;
                        char *p;

                        /* Regular files, directly or through a link that resolves (a bind over a
                         * dangling link fails, and a directory is not a program). */
                        if (!is_interpreter_name(de->d_name) || fstatat(dirfd(d), de->d_name, &st, 0) < 0 ||
                            !S_ISREG(st.st_mode))
                                continue;
                        if (asprintf(&p, "%s/%s", dirs[i], de->d_name) < 0 || strv_consume(&l, p) < 0)
                                return -ENOMEM;
                }
                if (r < 0)
                        return r;
        }
        if (l)
                qsort(l, strv_length(l), sizeof(char *), strv_cmp);
        *ret = STEAL(l);
        return 0;
}

char *sandbox_bwrap_version(const char *bwrap) {
        char *argv[] = { (char *) "bwrap", (char *) "--version", NULL };
        char buf[128], *v = NULL;
        int pipefd[2];
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return NULL;
        pid = fork();
        if (pid == 0) {
                child_reset_signals();
                if (dup2(pipefd[1], 1) < 0)
                        _exit(127);
                execve(bwrap, argv, bwrap_environ);
                _exit(127);
        }
        safe_close(pipefd[1]);
        if (pid > 0) {
                ssize_t n = read(pipefd[0], buf, sizeof(buf) - 1);
                if (n > 0) {
                        buf[n] = '\0';
                        buf[strcspn(buf, "\n")] = '\0';
                        v = strdup(buf);
                }
                (void) waitpid(pid, NULL, 0);
        }
        safe_close(pipefd[0]);
        return v;
}

int sandbox_probe(const char *bwrap, SandboxProbeReport *ret) {
        static const char *const etc_candidates[] = {
                "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/nsswitch.conf",
                "/etc/protocols", "/etc/services", "/etc/mime.types", "/etc/R", "/etc/python3",
                "/etc/python3.11", "/etc/python3.12", "/etc/python3.13", "/etc/matplotlibrc",
        };
        static const char *const lib_candidates[] = { "/lib64", "/lib32", "/libx32" };
        SandboxProbeReport rep = {};
        _cleanup_free_ char *err_fresh = NULL, *err_bind = NULL, *err_userns = NULL;
        struct stat st;
        int r;

        rep.probe.usr_merged = is_link_into_usr("/bin") && is_link_into_usr("/lib");
        for (size_t i = 0; i < ELEMENTSOF(etc_candidates); i++)
                if (stat(etc_candidates[i], &st) == 0 && strv_extend(&rep.probe.etc_files, etc_candidates[i]) < 0)
                        goto oom;
        for (size_t i = 0; i < ELEMENTSOF(lib_candidates); i++)
                if (lstat(lib_candidates[i], &st) == 0 &&
                    (!rep.probe.usr_merged || is_link_into_usr(lib_candidates[i])) &&
                    strv_extend(&rep.probe.lib_dirs, lib_candidates[i]) < 0)
                        goto oom;
        /* An unreadable bin directory (never seen: we are root) is no reason to refuse every
         * sandbox; said loudly, since environments' runs then see the host's interpreters. */
        r = sandbox_probe_interpreters(NULL, rep.probe.usr_merged, &rep.probe.interpreters);
        if (r == -ENOMEM)
                goto oom;
        if (r < 0)
                log_warning_errno(r, "Failed to list the host's interpreters, sandboxes with an environment will not hide them: %m");

        if (access(bwrap, X_OK) < 0) {
                rep.usable = false;
                if (asprintf(&rep.reason, "bwrap not found or not executable at '%s' ([Execution] Bwrap=)", bwrap) < 0)
                        goto oom;
                *ret = rep;
                return 0;
        }

        for (int attempt = 0; attempt < 2; attempt++) {
                _cleanup_strv_free_ char **a = NULL;
                bool fresh = attempt == 0;

                r = probe_argv(&rep.probe, fresh, false, &a);
                if (r < 0)
                        goto oom;
                r = run_bwrap(bwrap, a, fresh ? &err_fresh : &err_bind);
                if (r == 0) {
                        rep.usable = true;
                        rep.probe.proc_fresh = fresh;
                        break;
                }
        }
        if (!rep.usable) {
                if (asprintf(&rep.reason, "no sandbox could be built: %s",
                             err_bind ?: err_fresh ?: "bwrap failed without a message") < 0)
                        goto oom;
                *ret = rep;
                return 0;
        }
        if (!rep.probe.proc_fresh &&
            asprintf(&rep.reason, "a fresh /proc is refused here (%s); using a read-only bind of the host's /proc",
                     err_fresh ?: "no message") < 0)
                goto oom;

        {
                _cleanup_strv_free_ char **a = NULL;
                r = probe_argv(&rep.probe, rep.probe.proc_fresh, true, &a);
                if (r < 0)
                        goto oom;
                rep.probe.disable_userns = run_bwrap(bwrap, a, &err_userns) == 0;
        }

        rep.bwrap_version = sandbox_bwrap_version(bwrap);

        *ret = rep;
        return 0;
oom:
        sandbox_probe_report_done(&rep);
        return -ENOMEM;
}

void sandbox_probe_report_done(SandboxProbeReport *r) {
        strv_free(r->probe.etc_files);
        strv_free(r->probe.lib_dirs);
        strv_free(r->probe.interpreters);
        free(r->reason);
        free(r->bwrap_version);
        *r = (SandboxProbeReport) {};
}

/* ---- launching ------------------------------------------------------------------------------- */

int sandbox_keeper_start(const char *keeper_path, SandboxKeeper *ret) {
        _cleanup_close_pair_ int sv[2] = { -EBADF, -EBADF };
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        char parent[32];
        char *const argv[] = { (char *) "sandbox-runner-keeper", parent, NULL };
        pid_t pid;
        int r, pidfd;

        if (!keeper_path)
                return -ENOENT;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return negative_errno();
        (void) snprintf(parent, sizeof(parent), "%d", (int) getpid());
        sigemptyset(&none);
        sigfillset(&all);
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        r = posix_spawnattr_init(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }
        /* stdin and stdout /dev/null, stderr ours (the journal) until the job brings its own. */
        r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (r == 0)
                r = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, sv[1], KEEPER_FD_JOB);
        if (r == 0)
                r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        if (r == 0)
                r = posix_spawnattr_setsigmask(&attr, &none);
        if (r == 0)
                r = posix_spawnattr_setsigdefault(&attr, &all);
        if (r == 0)
                r = posix_spawn(&pid, keeper_path, &fa, &attr, argv, (char *const *) bwrap_environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r != 0)
                return -r;
        pidfd = pidfd_open_(pid);
        if (pidfd < 0) {
                r = negative_errno();
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return r;
        }
        *ret = (SandboxKeeper) { .pid = pid, .pidfd = pidfd, .job_fd = STEAL_FD(sv[0]) };
        return 0;
}

bool sandbox_keeper_alive(const SandboxKeeper *k) {
        struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

        return k->pid > 0 && k->pidfd >= 0 && k->job_fd >= 0 && poll(&p, 1, 0) == 0;
}

void sandbox_keeper_stop(SandboxKeeper *k) {
        if (k->pid > 0) {
                (void) kill(k->pid, SIGKILL);
                while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        k->pidfd = safe_close(k->pidfd);
        k->job_fd = safe_close(k->job_fd);
        k->pid = 0;
}

static uint64_t now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

int sandbox_keeper_reap(SandboxKeeper *k, int timeout_ms, siginfo_t *ret_si) {
        siginfo_t si = {};
        int r = 0;

        if (k->pid <= 0)
                return -ESRCH;
        if (k->pidfd >= 0) {
                uint64_t deadline = timeout_ms >= 0 ? now_ms() + (uint64_t) timeout_ms : UINT64_MAX;

                for (;;) {
                        struct pollfd p = { .fd = k->pidfd, .events = POLLIN };
                        uint64_t t = now_ms();
                        int n;

                        n = poll(&p, 1, deadline == UINT64_MAX ? -1 : t >= deadline ? 0 : (int) (deadline - t));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                r = -ETIMEDOUT;
                        break;
                }
        } else if (timeout_ms >= 0)
                r = -ETIMEDOUT;   /* no pidfd to wait on: the bound is all we have */
        if (r < 0)
                (void) kill(k->pid, SIGKILL);
        while (waitid(P_PID, (id_t) k->pid, &si, WEXITED) < 0)
                if (errno != EINTR)
                        break;
        k->pidfd = safe_close(k->pidfd);
        k->job_fd = safe_close(k->job_fd);
        k->pid = 0;
        if (ret_si)
                *ret_si = si;
        return r;
}

/* The program path and @argv, each NUL-terminated, in a sealed memfd. */
static int argv_memfd(const char *bwrap, char *const *argv, uint32_t *ret_argc) {
        _cleanup_free_ char *buf = NULL;
        size_t size = strlen(bwrap) + 1, argc = 0, off = 0;
        int fd;

        for (char *const *a = argv; *a; a++, argc++)
                size += strlen(*a) + 1;
        if (argc == 0 || argc > UINT32_MAX || size > KEEPER_ARGV_BYTES_MAX)
                return -E2BIG;
        buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, bwrap, strlen(bwrap) + 1);
        off = strlen(bwrap) + 1;
        for (char *const *a = argv; *a; a++) {
                memcpy(buf + off, *a, strlen(*a) + 1);
                off += strlen(*a) + 1;
        }
        fd = memfd_new_data("sandbox-argv", buf, size);
        if (fd >= 0)
                *ret_argc = (uint32_t) argc;
        return fd;
}

/* One message: the job, the slots' fds, then the argv memfd. */
static int send_job(int sock, const KeeperJob *job, const int *slots, int argv_fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * (KEEPER_JOB_SLOTS + 1))];
        } control = {};
        int fds[KEEPER_JOB_SLOTS + 1];
        size_t n = 0;
        struct iovec iov = { .iov_base = (void *) job, .iov_len = sizeof(*job) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control };
        struct cmsghdr *c;
        ssize_t k;

        for (int i = 0; i < KEEPER_JOB_SLOTS; i++)
                if (job->fd_mask & (1U << i))
                        fds[n++] = slots[i];
        fds[n++] = argv_fd;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        do
                k = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return negative_errno();
        return k == (ssize_t) sizeof(*job) ? 0 : -EIO;
}

/* The parent pid of @pid (field 4 of /proc/PID/stat, after the command name), or -errno. */
static pid_t proc_ppid(pid_t pid) {
        char path[64], buf[512], *p;
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        long v;

        (void) snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return n < 0 ? negative_errno() : -EIO;
        buf[n] = '\0';
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %ld", &v) != 1 || v <= 0)
                return -EIO;
        return (pid_t) v;
}

int sandbox_pidfd_of_child(pid_t pid, pid_t keeper) {
        _cleanup_close_ int fd = -EBADF;
        pid_t pp;

        if (pid <= 1 || keeper <= 1)
                return -EINVAL;
        fd = pidfd_open_(pid);
        if (fd < 0)
                return negative_errno();
        /* Opened first, checked after: if @pid was reused in between, the fd refers to the old,
         * dead process, and signals to it fail. */
        pp = proc_ppid(pid);
        if (pp < 0)
                return pp;
        if (pp != keeper) {
                pid_t gp = proc_ppid(pp);   /* bwrap, whose parent is the keeper */

                if (gp == -ENOENT)
                        /* bwrap exited between the two looks: @pid is the keeper's now (a subreaper,
                         * it inherits bwrap's orphans), if it is the one we think. */
                        gp = proc_ppid(pid) == keeper ? keeper : -ESRCH;
                if (gp < 0)
                        return gp;
                if (gp != keeper)
                        return -ESRCH;
        }
        return STEAL_FD(fd);
}

/* How long a keeper whose end of the job socket is closed may take to become a zombie: it closes
 * that end only by exiting (it never closes it before it has received its job), so this is the
 * kernel's exit path, microseconds; the bound only keeps a broken keeper from holding us up. */
#define KEEPER_EXIT_WAIT_MS 1000

/* @keeper went before it took its job: reap it and say how it ended. Return: -ECHILD. */
static int keeper_gone(SandboxKeeper *keeper, int timeout_ms, siginfo_t *ret_keeper_exit) {
        siginfo_t si = {};
        int r;

        r = sandbox_keeper_reap(keeper, timeout_ms, &si);
        if (r == -ETIMEDOUT)
                log_debug("A keeper that did not take its job did not exit either; killed it.");
        if (ret_keeper_exit)
                *ret_keeper_exit = si;
        return -ECHILD;
}

int sandbox_spawn(const char *bwrap, char *const *argv, const SandboxFds *fds, const SandboxLimits *limits,
                  SandboxKeeper *keeper, SandboxProcess *ret, siginfo_t *ret_keeper_exit) {
        _cleanup_close_pair_ int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        _cleanup_close_pair_ int ctl[2] = { -EBADF, -EBADF }, rep[2] = { -EBADF, -EBADF };
        _cleanup_close_ int argv_fd = -EBADF;
        KeeperJob job = {
                .magic = KEEPER_JOB_MAGIC,
                .flags = (fds->start_now ? KEEPER_JOB_START_NOW : fds->info_fd >= 0 ? KEEPER_JOB_EARLY : 0) |
                         (fds->detachable ? KEEPER_JOB_DETACHABLE : 0) |
                         (fds->ret_bind_fd ? KEEPER_JOB_PREBUILT : 0),
                .fsize = limits->fsize,
                .as = limits->as,
                .nofile = limits->nofile,
                .nproc = limits->nproc,
        };
        int r;

        if (!sandbox_keeper_alive(keeper))
                /* Dead already (its pidfd is readable): reaping it does not wait. */
                return keeper_gone(keeper, 0, ret_keeper_exit);
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ctl, O_CLOEXEC) < 0 ||
            pipe2(rep, O_CLOEXEC) < 0) {
                r = negative_errno();
                sandbox_keeper_stop(keeper);   /* consumed: not left waiting, unreaped, for a job */
                return r;
        }
        argv_fd = argv_memfd(bwrap, argv, &job.argc);
        if (argv_fd < 0) {
                sandbox_keeper_stop(keeper);
                return argv_fd;
        }

        const int slots[KEEPER_JOB_SLOTS] = {
                [0] = fds->stdin_fd, [1] = out[1], [2] = err[1],
                [SANDBOX_FD_SECCOMP] = fds->seccomp_fd, [SANDBOX_FD_PASSWD] = fds->passwd_fd,
                [SANDBOX_FD_GROUP] = fds->group_fd, [SANDBOX_FD_HOSTS] = fds->hosts_fd,
                [SANDBOX_FD_CODE] = fds->code_fd, [KEEPER_FD_CONTROL] = ctl[0], [KEEPER_FD_REPORT] = rep[1],
                [SANDBOX_FD_INFO] = fds->info_fd,
                [SANDBOX_FD_EXEC] = fds->ret_bind_fd ? fds->exec_fd : -1,
                [SANDBOX_FD_REQUEST] = fds->ret_bind_fd ? fds->request_fd : -1,
        };
        for (int i = 0; i < KEEPER_JOB_SLOTS; i++)
                if (slots[i] >= 0)
                        job.fd_mask |= 1U << i;
        r = send_job(keeper->job_fd, &job, slots, argv_fd);
        if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN || r == -ECONNREFUSED)
                /* It was alive a moment ago, and exits now: its exit status says why (a keeper that
                 * refuses jobs may exit before this one is in; which errno the send saw of that is
                 * down to timing, not to what happened). */
                return keeper_gone(keeper, KEEPER_EXIT_WAIT_MS, ret_keeper_exit);
        if (r < 0) {
                sandbox_keeper_stop(keeper);
                return r;
        }
        if (fds->ret_bind_fd)
                *fds->ret_bind_fd = STEAL_FD(keeper->job_fd);
        keeper->job_fd = safe_close(keeper->job_fd);

        *ret = (SandboxProcess) {
                .keeper_pid = keeper->pid,
                .keeper_pidfd = STEAL_FD(keeper->pidfd),
                .control_fd = STEAL_FD(ctl[1]),
                .report_fd = STEAL_FD(rep[0]),
                .stdout_fd = STEAL_FD(out[0]),
                .stderr_fd = STEAL_FD(err[0]),
        };
        keeper->pid = 0;
        return 0;
}

void sandbox_files_done(SandboxFiles *f) {
        safe_close(f->seccomp_fd);
        safe_close(f->passwd_fd);
        safe_close(f->group_fd);
        safe_close(f->hosts_fd);
        safe_close(f->code_fd);
        safe_close(f->stdin_fd);
}

int sandbox_files_make_etc(SandboxFiles *f) {
        static const char passwd_data[] = SANDBOX_PASSWD_DATA, group_data[] = SANDBOX_GROUP_DATA,
                          hosts_data[] = SANDBOX_HOSTS_DATA;

        f->passwd_fd = memfd_new_data("sandbox-passwd", passwd_data, strlen(passwd_data));
        f->group_fd = memfd_new_data("sandbox-group", group_data, strlen(group_data));
        f->hosts_fd = memfd_new_data("sandbox-hosts", hosts_data, strlen(hosts_data));
        return f->passwd_fd < 0 || f->group_fd < 0 || f->hosts_fd < 0 ? -ENOMEM : 0;
}

int sandbox_process_watch(const SandboxProcess *p, sd_event *e, sd_event_io_handler_t on_stdout,
                          sd_event_io_handler_t on_stderr, sd_event_io_handler_t on_report, void *userdata,
                          sd_event_source **ret_stdout, sd_event_source **ret_stderr, sd_event_source **ret_report) {
        int r;

        (void) fd_nonblock(p->stdout_fd, 1);
        (void) fd_nonblock(p->stderr_fd, 1);
        (void) fd_nonblock(p->report_fd, 1);
        r = sd_event_add_io(e, ret_stdout, p->stdout_fd, EPOLLIN, on_stdout, userdata);
        if (r >= 0)
                r = sd_event_add_io(e, ret_stderr, p->stderr_fd, EPOLLIN, on_stderr, userdata);
        if (r >= 0)
                r = sd_event_add_io(e, ret_report, p->report_fd, EPOLLIN, on_report, userdata);
        return r < 0 ? r : 0;
}

void sandbox_process_done(SandboxProcess *p) {
        p->keeper_pidfd = safe_close(p->keeper_pidfd);
        p->control_fd = safe_close(p->control_fd);
        p->report_fd = safe_close(p->report_fd);
        p->stdout_fd = safe_close(p->stdout_fd);
        p->stderr_fd = safe_close(p->stderr_fd);
}
