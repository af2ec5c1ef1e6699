/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One chip's probe sandbox (npu-probe.h): bwrap started directly by the (forked, throwaway)
 * caller with the execution's fd layout, its output read until it exits or the timeout.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keeper/keeper-job.h"
#include "npu/npu-probe.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"

#define PROBE_OUTPUT_MAX (64U * 1024U)

static const char passwd_data[] = SANDBOX_PASSWD_DATA;
static const char group_data[] = SANDBOX_GROUP_DATA;
static const char hosts_data[] = SANDBOX_HOSTS_DATA;

static uint64_t now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000U + (uint64_t) ts.tv_nsec / 1000000U;
}

/* In the forked child: the fds at the numbers the argv names, output to @out_fd, then bwrap. */
_Noreturn static void probe_exec(const char *bwrap, char **argv, const int fds[4], int out_fd) {
        static const int targets[4] = { SANDBOX_FD_SECCOMP, SANDBOX_FD_PASSWD, SANDBOX_FD_GROUP, SANDBOX_FD_HOSTS };
        int high[4], null_fd;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Out of the way of the targets first: a source may sit on another's number. */
        for (int i = 0; i < 4; i++)
                if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64)) < 0)
                        _exit(127);
        out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 64);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out_fd < 0 || null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
            dup2(out_fd, STDERR_FILENO) < 0)
                _exit(127);
        for (int i = 0; i < 4; i++)
                if (dup2(high[i], targets[i]) < 0)   /* dup2() leaves the copy without O_CLOEXEC */
                        _exit(127);
        execv(bwrap, argv);
        _exit(127);
}

/* Read @fd until end of file or @deadline; the output's last non-empty line into @ret_last. */
static int probe_read(int fd, uint64_t deadline, char **ret_last) {
        _cleanup_free_ char *buf = malloc(PROBE_OUTPUT_MAX + 1);
        size_t len = 0;
        char *end, *start;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                uint64_t now = now_ms();
                ssize_t n;
                int k;

                if (now >= deadline)
                        return -ETIME;
                k = poll(&p, 1, (int) MIN(deadline - now, (uint64_t) 1000));
                if (k < 0 && errno != EINTR)
                        return -errno;
                if (k <= 0)
                        continue;
                if (len < PROBE_OUTPUT_MAX)
                        n = read(fd, buf + len, PROBE_OUTPUT_MAX - len);
                else {
                        char sink[4096];
                        n = read(fd, sink, sizeof(sink));   /* past the cap: drained, not kept */
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (len < PROBE_OUTPUT_MAX)
                        len += (size_t) n;
        }
        buf[len] = '\0';
        end = buf + len;
        while (end > buf && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
                *--end = '\0';
        start = strrchr(buf, '\n');
        start = start ? start + 1 : buf;
        for (char *c = start; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f)
                        *c = ' ';   /* the reason goes into JSON and the journal */
        *ret_last = strndup(start, 300);
        return *ret_last ? 0 : -ENOMEM;
}

static int probe_run(const char *bwrap, char **argv, const int fds[4], unsigned id, uint64_t timeout_usec,
                     char **ret_why) {
        _cleanup_free_ char *last = NULL;
        int pipefd[2], status = 0, r;
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return set_message(ret_why, -errno, "the probe of chip %u: cannot make a pipe: %m", id);
        pid = fork();
        if (pid < 0) {
                r = -errno;
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return set_message(ret_why, r, "the probe of chip %u: cannot fork %s: %s", id, bwrap, strerror(-r));
        }
        if (pid == 0)
                probe_exec(bwrap, argv, fds, pipefd[1]);
        safe_close(pipefd[1]);
        r = probe_read(pipefd[0], now_ms() + timeout_usec / 1000U, &last);
        safe_close(pipefd[0]);
        if (r < 0)
                (void) kill(pid, SIGKILL);   /* bwrap's --die-with-parent takes the sandbox along */
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r == -ETIME)
                return set_message(ret_why, -ETIME, "the probe of chip %u (npu-smi info in a sandbox) did not finish within %"
                           PRIu64 " s", id, timeout_usec / 1000000U);
        if (r < 0)
                return set_message(ret_why, r, "the probe of chip %u could not be read: %s", id, strerror(-r));
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (WIFEXITED(status))
                return set_message(ret_why, -EIO, "the probe of chip %u failed: npu-smi info in a sandbox binding it "
                           "exited with status %d%s%s", id, WEXITSTATUS(status), isempty(last) ? "" : ": ", last ?: "");
        return set_message(ret_why, -EIO, "the probe of chip %u failed: its sandbox was killed by signal %d", id,
                   WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int npu_probe_chip(const char *bwrap, const SandboxProbe *probe, const SandboxNpu *base, unsigned id,
                   const char *scratch_dir, uint64_t timeout_usec, char **ret_why) {
        _cleanup_free_ char *seccomp_error = NULL, *workspace = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        int fds[4] = { -EBADF, -EBADF, -EBADF, -EBADF };
        SandboxNpu npu = *base;
        SandboxSpec spec;
        int r;

        *ret_why = NULL;
        /* Never as root: the daemon drops to its user before anything runs (a safety net). */
        if (geteuid() == 0)
                return set_message(ret_why, -EPERM, "the probe of chip %u would run as root; refused", id);
        if (!base->smi)
                return set_message(ret_why, -ENOENT, "no npu-smi is configured ([NPU] NpuSmi=): chips cannot be probed");
        if (asprintf(&workspace, "%s/probe-XXXXXX", scratch_dir) < 0)
                return -ENOMEM;
        if (!mkdtemp(workspace))
                return set_message(ret_why, -errno, "cannot make the probe's workspace under %s: %m", scratch_dir);

        npu.chips = &id;
        npu.n_chips = 1;
        spec = (SandboxSpec) {
                .workspace = workspace,
                .cwd = "",
                .argv = (char *const[]) { (char *) base->smi, (char *) "info", NULL },
                .seccomp_fd = SANDBOX_FD_SECCOMP,
                .passwd_fd = SANDBOX_FD_PASSWD,
                .group_fd = SANDBOX_FD_GROUP,
                .hosts_fd = SANDBOX_FD_HOSTS,
                .code_fd = -1,
                .info_fd = -1,
                .npu = &npu,
        };
        r = sandbox_argv_build(&spec, probe, &argv);
        if (r < 0)
                (void) set_message(ret_why, r, "cannot build the probe sandbox of chip %u: %s", id, strerror(-r));
        else {
                r = seccomp_program_for_variant(SECCOMP_VARIANT_NPU, &fds[0], &seccomp_error);
                if (r < 0)
                        (void) set_message(ret_why, r, "cannot build the npu seccomp filter: %s", seccomp_error ?: strerror(-r));
        }
        if (r >= 0) {
                fds[1] = memfd_new_data("sandbox-passwd", passwd_data, strlen(passwd_data));
                fds[2] = memfd_new_data("sandbox-group", group_data, strlen(group_data));
                fds[3] = memfd_new_data("sandbox-hosts", hosts_data, strlen(hosts_data));
                if (fds[1] < 0 || fds[2] < 0 || fds[3] < 0)
                        r = set_message(ret_why, -ENOMEM, "out of memory");
        }
        if (r >= 0)
                r = probe_run(bwrap, argv, fds, id, timeout_usec, ret_why);
        for (int i = 0; i < 4; i++)
                safe_close(fds[i]);
        (void) rm_rf_at(AT_FDCWD, workspace);
        return r;
}

/* In the forked prober of chip @i: one line "<i> <reason>\n" (no reason: it answered), written
 * in one write() of at most PIPE_BUF bytes, so the lines of concurrent probers never mix. */
_Noreturn static void probe_one(const char *bwrap, const SandboxProbe *probe, const SandboxNpu *base,
                                unsigned id, size_t i, const char *scratch_dir, uint64_t timeout_usec, int out_fd) {
        _cleanup_free_ char *reason = NULL;
        char line[512];
        int k;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (npu_probe_chip(bwrap, probe, base, id, scratch_dir, timeout_usec, &reason) >= 0)
                k = snprintf(line, sizeof(line), "%zu \n", i);
        else {
                for (char *c = reason; c && *c; c++)
                        if (*c == '\n')
                                *c = ' ';
                k = snprintf(line, sizeof(line), "%zu %.400s\n", i, reason ?: "its probe failed");
        }
        _exit(write(out_fd, line, (size_t) MIN(k, (int) sizeof(line) - 1)) > 0 ? 0 : 1);
}

/* Read the probers' lines until every one of them closed the pipe; each line sets its slot. */
static int probe_collect(int fd, size_t n, char **reasons, bool *answered) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = n * 512 + 1;
        ssize_t k;

        buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        while (len < cap - 1 && (k = read(fd, buf + len, cap - 1 - len)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                len += (size_t) k;
        }
        buf[len] = '\0';
        for (char *line = buf, *end; (end = strchr(line, '\n')); line = end + 1) {
                char *rest;
                unsigned long i;

                *end = '\0';
                errno = 0;
                i = strtoul(line, &rest, 10);
                if (errno != 0 || rest == line || *rest != ' ' || i >= n || answered[i])
                        continue;
                answered[i] = true;
                if (rest[1] != '\0' && !(reasons[i] = strdup(rest + 1)))
                        return -ENOMEM;
        }
        return 0;
}

int npu_probe_chips(const char *bwrap, const SandboxProbe *probe, const SandboxNpu *base, const unsigned *ids,
                    size_t n, const char *scratch_dir, uint64_t timeout_usec, char ***ret_reasons) {
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_free_ bool *answered = NULL;
        char **reasons;
        int pipefd[2], r = 0;

        reasons = calloc(n + 1, sizeof(char *));
        pids = calloc(n + 1, sizeof(pid_t));
        answered = calloc(n + 1, sizeof(bool));
        if (!reasons || !pids || !answered) {
                free(reasons);
                return -ENOMEM;
        }
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                free(reasons);
                return -errno;
        }
        for (size_t i = 0; i < n; i++) {
                pids[i] = fork();
                if (pids[i] == 0) {
                        safe_close(pipefd[0]);
                        probe_one(bwrap, probe, base, ids[i], i, scratch_dir, timeout_usec, pipefd[1]);
                }
                if (pids[i] < 0) {
                        r = -errno;
                        break;
                }
        }
        safe_close(pipefd[1]);
        if (r >= 0)
                r = probe_collect(pipefd[0], n, reasons, answered);
        safe_close(pipefd[0]);
        for (size_t i = 0; i < n; i++)
                if (pids[i] > 0) {
                        if (r < 0)
                                (void) kill(pids[i], SIGKILL);
                        while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                                ;
                }
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (!answered[i] && asprintf(&reasons[i], "the probe of chip %u ended without an answer", ids[i]) < 0)
                        r = -ENOMEM;
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        free(reasons[i]);
                free(reasons);
                return r;
        }
        *ret_reasons = reasons;
        return 0;
}
