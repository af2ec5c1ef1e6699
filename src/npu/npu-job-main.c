/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sandbox-runner-npu: runs one host NPU broker job (DESIGN.md §9) from its directory, as the
 * process of sandbox-runner-npu@<jobId>.service: the workload's argv with execve() (an absolute
 * path, no shell, no PATH search) in its own process group, a fixed environment, stdin
 * /dev/null, stdout and stderr appended to the job's log; the timeout and a stop request
 * (SIGTERM) end the process group, SIGTERM first and SIGKILL after NPU_JOB_KILL_GRACE_SEC; then
 * result.json. It writes only log, started and result.json: job.json is the daemon's (npu-jobs.h).
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "build-config.h"
#include "npu/npu-jobs.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"
#include "util/time-util.h"

/* From SIGTERM to SIGKILL of the job's process group; the unit's TimeoutStopSec= is longer. */
#define NPU_JOB_KILL_GRACE_SEC 10U
/* After SIGKILL, how long to wait for descendants that left the process group (setsid()). */
#define NPU_JOB_REAP_GRACE_SEC 5U

static const char *arg_job = NULL;

static void help(void) {
        printf("%s --job DIR\n\n"
               "Runs one host NPU broker job of sandbox-runnerd: the program of DIR/job.json, without a\n"
               "shell, in its own process group, its output appended to DIR/log; writes DIR/result.json.\n"
               "Started by sandbox-runnerd as sandbox-runner-npu@<jobId>.service.\n\n"
               "  -h --help                 Show this help\n"
               "     --version              Show the version\n"
               "     --job DIR              The job's directory\n",
               program_invocation_short_name);
}

enum {
        ARG_VERSION = 0x100,
        ARG_JOB,
};

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",    no_argument,       NULL, 'h'         },
                { "version", no_argument,       NULL, ARG_VERSION },
                { "job",     required_argument, NULL, ARG_JOB     },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandbox-runner-npu %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_JOB:
                        arg_job = optarg;
                        break;
                case '?':
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "This program takes no positional arguments.");
        if (!arg_job)
                return log_error_errno(EINVAL, "--job DIR is required.");
        return 1;
}

/* ---------------------------------------------------------------------------------------------- */

/* What the child tells the runner through its close-on-exec pipe when it cannot exec. */
typedef enum ChildStep {
        CHILD_SETUP,
        CHILD_CHDIR,
        CHILD_EXEC,
} ChildStep;

static _Noreturn void child_fail(int report_fd, ChildStep step) {
        int msg[2] = { (int) step, errno };

        (void) !write(report_fd, msg, sizeof(msg));
        _exit(127);
}

/* In the child after fork(): only async-signal-safe calls. */
static _Noreturn void child_exec(const NpuJob *j, char **env, int log_fd, int null_fd, int report_fd,
                                 const sigset_t *saved_mask) {
        (void) setpgid(0, 0);
        /* Without systemd around (tests, by hand): the workload does not outlive a killed runner. */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void) signal(sig, SIG_DFL);
        if (sigprocmask(SIG_SETMASK, saved_mask, NULL) < 0)
                child_fail(report_fd, CHILD_SETUP);
        if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0)
                child_fail(report_fd, CHILD_SETUP);
        if (chdir(j->cwd) < 0)
                child_fail(report_fd, CHILD_CHDIR);
        /* Every fd of ours is close-on-exec; this is for those that were inherited without it. */
        if (report_fd > STDERR_FILENO + 1)
                (void) syscall(SYS_close_range, (unsigned) STDERR_FILENO + 1, (unsigned) report_fd - 1, 0U);
        (void) syscall(SYS_close_range, (unsigned) report_fd + 1, ~0U, 0U);
        execve(j->argv[0], j->argv, env);
        child_fail(report_fd, CHILD_EXEC);
}

/*
 * Start the workload. Return: its pid, or -errno with the reason in *@ret_error (the workload
 * could not be run: a missing cwd, a program that cannot be executed).
 */
static int spawn(const NpuJob *j, int log_fd, const sigset_t *saved_mask, char **ret_error) {
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_pair_ int report[2] = { -EBADF, -EBADF };
        _cleanup_close_ int null_fd = -EBADF;
        int msg[2], r;
        ssize_t n;
        pid_t pid;

        r = npu_job_runner_env(j, &env);
        if (r < 0)
                return r;
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0)
                return negative_errno();
        if (pipe2(report, O_CLOEXEC) < 0)
                return negative_errno();

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                report[0] = safe_close(report[0]);
                child_exec(j, env, log_fd, null_fd, report[1], saved_mask);
        }
        /* Both sides set the group, so that it exists before either signals it. */
        (void) setpgid(pid, pid);
        report[1] = safe_close(report[1]);
        do
                n = read(report[0], msg, sizeof(msg));
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return pid;             /* end of file: execve() succeeded */

        (void) waitpid(pid, NULL, 0);
        if (n != (ssize_t) sizeof(msg))
                return set_message(ret_error, -EIO, "The workload's process failed before execve().");
        switch ((ChildStep) msg[0]) {
        case CHILD_CHDIR:
                return set_message(ret_error, -msg[1], "Cannot change to the directory '%s': %s", j->cwd,
                                   strerror(msg[1]));
        case CHILD_EXEC:
                return set_message(ret_error, -msg[1], "Cannot execute '%s': %s", j->argv[0], strerror(msg[1]));
        case CHILD_SETUP:
        default:
                return set_message(ret_error, -msg[1], "Cannot set up the workload's process: %s", strerror(msg[1]));
        }
}

/* ---------------------------------------------------------------------------------------------- */

typedef struct Supervisor {
        pid_t pid;                      /* the workload, leader of its process group */
        int status;                     /* its wait status, once main_exited */
        bool main_exited;
        bool timed_out;
        bool stop_requested;
        bool terminating;               /* SIGTERM sent to the group */
        bool killed;                    /* SIGKILL sent to the group */
        uint64_t deadline;              /* CLOCK_MONOTONIC: the job's timeout */
        uint64_t kill_at;               /* CLOCK_MONOTONIC: SIGKILL, once terminating */
        uint64_t give_up_at;            /* CLOCK_MONOTONIC: stop waiting for escaped descendants */
} Supervisor;

/* Reap what exited. Return: true while children (the workload, or orphans we inherited) remain. */
static bool reap(Supervisor *s) {
        for (;;) {
                int status;
                pid_t p = waitpid(-1, &status, WNOHANG);

                if (p > 0) {
                        if (p == s->pid) {
                                s->status = status;
                                s->main_exited = true;
                        }
                        continue;
                }
                if (p < 0 && errno == EINTR)
                        continue;
                return p == 0;          /* 0: children remain; ECHILD: none */
        }
}

static void terminate(Supervisor *s, uint64_t now) {
        if (s->terminating)
                return;
        s->terminating = true;
        s->kill_at = now + NPU_JOB_KILL_GRACE_SEC * USEC_PER_SEC;
        (void) kill(-s->pid, SIGTERM);
}

/* Wait for @mask's signals until @deadline (CLOCK_MONOTONIC; 0: no deadline). */
static int wait_signal(const sigset_t *mask, uint64_t deadline, uint64_t now) {
        struct timespec ts;
        uint64_t left;

        if (deadline == 0)
                return sigwaitinfo(mask, NULL);
        left = deadline > now ? deadline - now : 0;
        ts = (struct timespec) { .tv_sec = (time_t) (left / USEC_PER_SEC),
                                 .tv_nsec = (long) (left % USEC_PER_SEC) * 1000 };
        return sigtimedwait(mask, NULL, &ts);
}

/*
 * Until the workload and every descendant we reap are gone: the timeout and SIGTERM/SIGINT end
 * the process group (SIGTERM, then SIGKILL after the grace); when the workload exits by itself,
 * what it left behind in its group is ended the same way. A descendant that left the group
 * (setsid()) is the unit's cgroup's to kill (KillMode=control-group); we stop waiting for it
 * NPU_JOB_REAP_GRACE_SEC after SIGKILL.
 */
static void supervise(Supervisor *s, const sigset_t *mask) {
        for (;;) {
                bool children = reap(s);
                uint64_t now = now_usec(CLOCK_MONOTONIC), next;
                int sig;

                if (!children)
                        return;
                if (!s->terminating && s->main_exited)
                        terminate(s, now);
                if (!s->terminating && now >= s->deadline) {
                        s->timed_out = true;
                        terminate(s, now);
                }
                if (s->terminating && !s->killed && now >= s->kill_at) {
                        s->killed = true;
                        s->give_up_at = now + NPU_JOB_REAP_GRACE_SEC * USEC_PER_SEC;
                        (void) kill(-s->pid, SIGKILL);
                }
                if (s->killed && now >= s->give_up_at)
                        return;
                next = s->killed ? s->give_up_at : s->terminating ? s->kill_at : s->deadline;

                sig = wait_signal(mask, next, now);
                if (sig == SIGTERM || sig == SIGINT) {
                        s->stop_requested = true;
                        terminate(s, now_usec(CLOCK_MONOTONIC));
                }
        }
}

/* result.json, for a job that could not run: the reason. Return: 0 or -errno. */
static int write_failure(int job_fd, const char *error) {
        NpuJobResult res = {
                .exit_code = -1,
                .finished_ms = npu_job_now_ms(),
                .error = (char *) error,
        };

        return npu_job_write_result_at(job_fd, &res);
}

/* Run the job of @job_fd. Return: 0 when result.json says how it ended, or -errno (logged). */
static int run_job(int job_fd, const sigset_t *mask, const sigset_t *saved_mask) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_free_ char *error = NULL;
        _cleanup_close_ int log_fd = -EBADF;
        const char *reason = NULL;
        Supervisor s = {};
        NpuJobResult res = { .exit_code = -1 };
        int r;

        r = npu_job_load_at(job_fd, &j, &reason);
        if (r == -EBADMSG) {
                if (set_message(&error, r, "job.json is not a valid job: %s", reason) == -ENOMEM)
                        return log_oom();
                (void) write_failure(job_fd, error);
                return log_error_errno(r, "Failed to load the job of '%s': %s", arg_job, error);
        }
        if (r < 0) {
                (void) write_failure(job_fd, "job.json cannot be read");
                return log_error_errno(r, "Failed to read the job of '%s': %m", arg_job);
        }
        log_fd = npu_job_open_log_at(job_fd);
        if (log_fd < 0) {
                (void) write_failure(job_fd, "the log cannot be opened");
                return log_error_errno(log_fd, "Failed to open the log of job %s: %m", j->id);
        }

        res.started_ms = npu_job_now_ms();
        r = spawn(j, log_fd, saved_mask, &error);
        if (r < 0) {
                (void) write_failure(job_fd, error ?: "the workload could not be started");
                return log_error_errno(r, "Failed to run job %s: %s", j->id, error ?: "cannot start the workload");
        }
        s = (Supervisor) {
                .pid = r,
                .deadline = now_usec(CLOCK_MONOTONIC) + j->timeout_sec * USEC_PER_SEC,
        };
        r = npu_job_write_started_at(job_fd, s.pid, res.started_ms);
        if (r < 0)
                log_warning_errno(r, "Failed to write the start of job %s, ignoring: %m", j->id);
        log_info("Job %s: workload '%s' started as process %i (%zu chip(s), timeout %" PRIu64 " s).",
                 j->id, j->argv[0], (int) s.pid, j->n_chips, j->timeout_sec);

        supervise(&s, mask);

        if (s.main_exited && WIFEXITED(s.status))
                res.exit_code = WEXITSTATUS(s.status);
        else if (s.main_exited && WIFSIGNALED(s.status))
                res.signal = WTERMSIG(s.status);
        res.timed_out = s.timed_out;
        res.finished_ms = npu_job_now_ms();
        r = npu_job_write_result_at(job_fd, &res);
        if (r < 0)
                return log_error_errno(r, "Failed to write the result of job %s: %m", j->id);
        log_info("Job %s finished: exit status %i, signal %i%s%s.", j->id, res.exit_code, res.signal,
                 s.timed_out ? ", timed out" : "", s.stop_requested ? ", stopped on request" : "");
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_close_ int job_fd = -EBADF;
        sigset_t mask, saved_mask;
        int r;

        log_setup(LOG_TARGET_AUTO);
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;

        /* Signals are taken with sigtimedwait(): blocked before the workload exists. */
        (void) sigemptyset(&mask);
        (void) sigaddset(&mask, SIGCHLD);
        (void) sigaddset(&mask, SIGTERM);
        (void) sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, &saved_mask) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");
        /* Orphans of the workload become our children: we reap them, and the job ends with them. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return log_error_errno(errno, "Failed to become a subreaper: %m");

        job_fd = open(arg_job, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (job_fd < 0)
                return log_error_errno(errno, "Failed to open the job directory '%s': %m", arg_job);
        return run_job(job_fd, &mask, &saved_mask);
}

int main(int argc, char *argv[]) {
        return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
