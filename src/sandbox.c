/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Start-up probes of bwrap, and launching one sandbox under a small keeper process. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"
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
        size_t n = 0;
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
        for (;;) {
                ssize_t k = read(pipefd[0], buf + n, sizeof(buf) - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
                if (n >= sizeof(buf) - 1)
                        break;
        }
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

        {
                char *argv[] = { (char *) "bwrap", (char *) "--version", NULL };
                int pipefd[2];
                if (pipe2(pipefd, O_CLOEXEC) == 0) {
                        pid_t pid = fork();
                        if (pid == 0) {
                                child_reset_signals();
                                if (dup2(pipefd[1], 1) < 0)
                                        _exit(127);
                                execve(bwrap, argv, bwrap_environ);
                                _exit(127);
                        }
                        safe_close(pipefd[1]);
                        if (pid > 0) {
                                char buf[128];
                                ssize_t n = read(pipefd[0], buf, sizeof(buf) - 1);
                                if (n > 0) {
                                        buf[n] = '\0';
                                        buf[strcspn(buf, "\n")] = '\0';
                                        rep.bwrap_version = strdup(buf);
                                }
                                (void) waitpid(pid, NULL, 0);
                        }
                        safe_close(pipefd[0]);
                }
        }

        *ret = rep;
        return 0;
oom:
        sandbox_probe_report_done(&rep);
        return -ENOMEM;
}

void sandbox_probe_report_done(SandboxProbeReport *r) {
        strv_free(r->probe.etc_files);
        strv_free(r->probe.lib_dirs);
        free(r->reason);
        free(r->bwrap_version);
        *r = (SandboxProbeReport) {};
}

/* ---- launching ------------------------------------------------------------------------------- */

#define KEEPER_FD_CONTROL 8
#define KEEPER_FD_REPORT  9

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

/* "<tag><v>\n" into @buf (at least 16 bytes): no stdio, which is not async-signal-safe. */
static void format_report(char *buf, char tag, int v) {
        char digits[12];
        unsigned u = v < 0 ? 0U - (unsigned) v : (unsigned) v;
        size_t n = 0, i = 0;

        do
                digits[n++] = (char) ('0' + u % 10);
        while ((u /= 10) > 0);
        buf[i++] = tag;
        if (v < 0)
                buf[i++] = '-';
        while (n > 0)
                buf[i++] = digits[--n];
        buf[i++] = '\n';
        buf[i] = '\0';
}

static void set_limit(int resource, uint64_t v) {
        struct rlimit rl = { .rlim_cur = (rlim_t) v, .rlim_max = (rlim_t) v };
        (void) setrlimit(resource, &rl);
}

/* The keeper: runs in the forked child, never returns. The daemon has threads (snapshots), so only
 * async-signal-safe calls here: no malloc, no stdio. */
/* close() for the keeper (no logging, nothing but the syscall). Return: -1. */
static int safe_close_keeper(int fd) {
        if (fd >= 0)
                (void) close(fd);
        return -1;
}

/* Early start: the whole seccomp program (the memfd at SANDBOX_FD_SECCOMP) into @fd in one
 * write(), which a pipe with room for all of it takes whole: bwrap never sees a part of it. */
static int keeper_release_program(int fd) {
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

static _Noreturn void keeper_main(const char *bwrap, char *const *argv, const SandboxLimits *limits, pid_t parent,
                                  bool early, bool start_now) {
        char c, line[48];
        pid_t pid;
        int pidfd, status, program[2] = { -1, -1 };

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(126);
        /* bwrap exits as soon as its pid 1 in the sandbox has told it the payload's status, which
         * is before that pid 1 has exited, and so before the kernel has killed what was left in
         * the pid namespace. As a subreaper we inherit that pid 1 and reap it ourselves: once it
         * is gone, the whole namespace is, and only then is the run over (nothing can still write
         * to the workspace when the snapshot starts). */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                _exit(126);

        if (early) {
                /* The program's pipe: its read end becomes bwrap's SANDBOX_FD_SECCOMP, only we
                 * hold the write end (close-on-exec), sized to take the program in one write. */
                struct stat st;

                if (pipe2(program, O_CLOEXEC) < 0 || fstat(SANDBOX_FD_SECCOMP, &st) < 0)
                        _exit(124);
                /* Above the layout: a free slot of it (no code fd, say) is closed again below. */
                for (int i = 0; i < 2; i++) {
                        int fd = fcntl(program[i], F_DUPFD_CLOEXEC, SANDBOX_FD_INFO + 1);
                        if (fd < 0)
                                _exit(124);
                        (void) close(program[i]);
                        program[i] = fd;
                }
                if (st.st_size > 65536 && fcntl(program[1], F_SETPIPE_SZ, (int) st.st_size) < 0)
                        _exit(124);
        }

        /* Wait for the go: the scope exists and we are in it. (Early start: later, see below. No
         * scope: no wait.) */
        for (; !early && !start_now;) {
                ssize_t k = read(KEEPER_FD_CONTROL, &c, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k != 1 || c != 'G')
                        _exit(125);
                break;
        }

        /* vfork(): the keeper is a copy of the daemon, and copying its page tables again only to
         * exec bwrap costs a good part of a millisecond. The child shares our memory until the
         * exec: it only closes fds (its own table), sets limits and execs or _exit()s. */
        pid = vfork();
        if (pid < 0)
                _exit(124);
        if (pid == 0) {
                if (early && dup2(program[0], SANDBOX_FD_SECCOMP) < 0)
                        _exit(124);
                (void) close(KEEPER_FD_CONTROL);
                (void) close(KEEPER_FD_REPORT);
                set_limit(RLIMIT_CORE, 0);
                if (limits->fsize > 0)
                        set_limit(RLIMIT_FSIZE, limits->fsize);
                if (limits->as > 0)
                        set_limit(RLIMIT_AS, limits->as);
                if (limits->nofile > 0)
                        set_limit(RLIMIT_NOFILE, limits->nofile);
                execve(bwrap, argv, bwrap_environ);
                write_all(2, "sandbox-runner: failed to execute bwrap\n");
                _exit(127);
        }

        /* The keeper holds no end of the payload's stdio (early start: it keeps the program). */
        for (int fd = 0; fd <= SANDBOX_FD_CODE; fd++)
                if (!early || fd != SANDBOX_FD_SECCOMP)
                        (void) close(fd);
        (void) close(SANDBOX_FD_INFO);
        if (early)
                (void) close(program[0]);

        format_report(line, 'S', (int) pid);
        write_all(KEEPER_FD_REPORT, line);

        pidfd = pidfd_open_(pid);
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = KEEPER_FD_CONTROL, .events = POLLIN },
                        { .fd = pidfd, .events = POLLIN },
                };
                if (poll(p, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 100) < 0 && errno != EINTR)
                        break;
                if (p[0].revents) {
                        ssize_t k = read(KEEPER_FD_CONTROL, &c, 1);
                        if (k <= 0 || c == 'K') {
                                (void) kill(pid, SIGKILL);
                                /* The pid 1 waits for its program, and is not yet bound to bwrap's
                                 * life: an empty program ends it. */
                                program[1] = safe_close_keeper(program[1]);
                        }
                        if (k <= 0)
                                break;
                        if (c == 'G' && program[1] >= 0) {
                                /* Everything is in the scope: let the sandbox's pid 1 go on. */
                                if (keeper_release_program(program[1]) < 0)
                                        (void) kill(pid, SIGKILL);
                                program[1] = safe_close_keeper(program[1]);
                                (void) close(SANDBOX_FD_SECCOMP);
                        }
                }
                if (pidfd < 0 || p[1].revents) {
                        if (waitpid(pid, &status, WNOHANG) == pid) {
                                /* The sandbox's pid 1, if it outlived bwrap (see above); if it
                                 * still waits for its program, an empty one ends it. */
                                program[1] = safe_close_keeper(program[1]);
                                while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                                        ;
                                format_report(line, 'X', status);
                                write_all(KEEPER_FD_REPORT, line);
                                /* Hold the cgroup (and so the accounting) until released. */
                                while (read(KEEPER_FD_CONTROL, &c, 1) > 0)
                                        ;
                                _exit(0);
                        }
                }
        }
        (void) kill(pid, SIGKILL);
        program[1] = safe_close_keeper(program[1]);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        _exit(0);
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
                pp = proc_ppid(pp);   /* bwrap, whose parent is the keeper */
                if (pp < 0)
                        return pp;
                if (pp != keeper)
                        return -ESRCH;
        }
        return STEAL_FD(fd);
}

int sandbox_spawn(const char *bwrap, char *const *argv, const SandboxFds *fds, const SandboxLimits *limits,
                  SandboxProcess *ret) {
        int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        int ctl[2] = { -EBADF, -EBADF }, rep[2] = { -EBADF, -EBADF };
        pid_t parent = getpid(), pid;
        int r;

        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ctl, O_CLOEXEC) < 0 ||
            pipe2(rep, O_CLOEXEC) < 0) {
                r = negative_errno();
                goto fail;
        }

        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                goto fail;
        }
        if (pid == 0) {
                /* target fd → source fd; move every source out of the way first. */
                int src[11] = {
                        fds->stdin_fd, out[1], err[1], fds->seccomp_fd, fds->passwd_fd, fds->group_fd,
                        fds->hosts_fd, fds->code_fd, ctl[0], rep[1], fds->info_fd,
                };
                int high[11];

                child_reset_signals();
                for (int i = 0; i < 11; i++) {
                        high[i] = -1;
                        if (src[i] < 0)
                                continue;
                        high[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 100);
                        if (high[i] < 0)
                                _exit(123);
                }
                for (int i = 0; i < 11; i++) {
                        if (high[i] < 0) {
                                (void) close(i);
                                continue;
                        }
                        if (dup2(high[i], i) < 0)
                                _exit(123);
                }
                /* Only the keeper's own two pipes stay close-on-exec. */
                (void) fcntl(KEEPER_FD_CONTROL, F_SETFD, FD_CLOEXEC);
                (void) fcntl(KEEPER_FD_REPORT, F_SETFD, FD_CLOEXEC);
                (void) syscall(SYS_close_range, 11U, ~0U, 0U);
                keeper_main(bwrap, argv, limits, parent, fds->info_fd >= 0 && !fds->start_now, fds->start_now);
        }

        safe_close(out[1]);
        safe_close(err[1]);
        safe_close(ctl[0]);
        safe_close(rep[1]);
        *ret = (SandboxProcess) {
                .keeper_pid = pid,
                .keeper_pidfd = pidfd_open_(pid),
                .control_fd = ctl[1],
                .report_fd = rep[0],
                .stdout_fd = out[0],
                .stderr_fd = err[0],
        };
        if (ret->keeper_pidfd < 0) {
                r = negative_errno();
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                sandbox_process_done(ret);
                return r;
        }
        return 0;

fail:
        safe_close(out[0]);
        safe_close(out[1]);
        safe_close(err[0]);
        safe_close(err[1]);
        safe_close(ctl[0]);
        safe_close(ctl[1]);
        safe_close(rep[0]);
        safe_close(rep[1]);
        return r;
}

void sandbox_process_done(SandboxProcess *p) {
        p->keeper_pidfd = safe_close(p->keeper_pidfd);
        p->control_fd = safe_close(p->control_fd);
        p->report_fd = safe_close(p->report_fd);
        p->stdout_fd = safe_close(p->stdout_fd);
        p->stderr_fd = safe_close(p->stderr_fd);
}
