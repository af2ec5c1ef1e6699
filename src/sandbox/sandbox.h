/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Start-up probes of bwrap, and launching one sandbox through a keeper (src/keeper/). */
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "keeper/keeper-job.h"   /* the fd layout of bwrap (SandboxSpec takes these numbers) */
#include "sandbox/sandbox-argv.h"


typedef struct SandboxProbeReport {
        SandboxProbe probe;
        bool usable;
        char *reason;            /* why unusable, or the warning about a fallback; NULL if none */
        char *bwrap_version;
} SandboxProbeReport;

/*
 * sandbox_probe() - find the sandbox shape that works on this host by running minimal sandboxes:
 * /proc first (fresh procfs, else a read-only bind), then --disable-userns on that shape; also
 * which /etc files and lib links exist, and the host's interpreters that a sandbox with an
 * environment covers (sandbox_probe_interpreters(); a directory it cannot read is logged as a
 * warning, not fatal). Synchronous (a few ms each; done once at start-up).
 * Return: 0 (see ->usable) or -ENOMEM.
 */
int sandbox_probe(const char *bwrap, SandboxProbeReport *ret);
/* sandbox_bwrap_version() - the first line of "@bwrap --version" ("bubblewrap 0.8.0"), or NULL
 * when it cannot be run or says nothing (or on OOM). */
char *sandbox_bwrap_version(const char *bwrap);
void sandbox_probe_report_done(SandboxProbeReport *r);

/*
 * sandbox_probe_interpreters() - the host's Python, pip and R entry points, which a sandbox with an
 * environment covers (SandboxProbe.interpreters): in @root's /usr/bin, /usr/local/bin and, when
 * /usr is not merged, /bin, every name starting with "python" or "pip", and "R" and "Rscript",
 * that is a regular file or a link resolving to one (not a directory, not a dangling link).
 * @root is prepended to each directory (NULL or "" = the host; a test gives a fake tree); the
 * paths returned are without it ("/usr/bin/python3"), sorted. Missing directories are skipped.
 * Return: 0 (*@ret NULL when none), -ENOMEM, or -errno of a directory that cannot be read.
 */
int sandbox_probe_interpreters(const char *root, bool usr_merged, char ***ret);

typedef struct SandboxLimits {
        uint64_t fsize;          /* RLIMIT_FSIZE, 0 = none */
        uint64_t as;             /* RLIMIT_AS (only when no scope enforces memory), 0 = none */
        uint64_t nofile;         /* RLIMIT_NOFILE */
        uint64_t nproc;          /* RLIMIT_NPROC (only when no cgroup counts tasks), 0 = none; it
                                  * counts every process of the host uid, not just this sandbox's */
} SandboxLimits;

typedef struct SandboxFds {
        int stdin_fd;            /* becomes fd 0 (a memfd or /dev/null) */
        int seccomp_fd;
        int passwd_fd, group_fd, hosts_fd, code_fd;   /* -1 = none */
        /* The write end of a pipe for bwrap's --info-fd, or -1. With it (and not @start_now), the
         * keeper starts bwrap at once but gated (early start, see sandbox_spawn()). */
        int info_fd;
        /* Without a scope to wait for: the keeper starts bwrap at once, no 'G', no gate. */
        bool start_now;
        /* The sandbox may outlive the daemon (KEEPER_JOB_DETACHABLE): only 'K' kills it. */
        bool detachable;
        /* Built ahead of its run (KEEPER_JOB_PREBUILT, src/keeper/exec-request.h): the exec helper
         * (bwrap's command, as /proc/self/fd/SANDBOX_FD_EXEC) and its end of the request socket;
         * the keeper's job socket, on which the bind goes, into *@ret_bind_fd. */
        int exec_fd, request_fd;
        int *ret_bind_fd;
} SandboxFds;

/* The files a sandbox gets (SandboxFds), owned: sandbox_files_done() closes them. */
typedef struct SandboxFiles {
        int seccomp_fd, passwd_fd, group_fd, hosts_fd, code_fd, stdin_fd;
} SandboxFiles;
#define SANDBOX_FILES_NULL                                                                           \
        ((SandboxFiles) { .seccomp_fd = -EBADF, .passwd_fd = -EBADF, .group_fd = -EBADF,             \
                          .hosts_fd = -EBADF, .code_fd = -EBADF, .stdin_fd = -EBADF })
void sandbox_files_done(SandboxFiles *f);
/* sandbox_files_make_etc() - the sandbox's /etc/passwd, group and hosts (SANDBOX_*_DATA) as memfds
 * in @f (each -errno on failure). Return: 0 or -ENOMEM. */
int sandbox_files_make_etc(SandboxFiles *f);

/* A keeper (sandbox-runner-keeper), started ahead of its run, waiting for its job. */
typedef struct SandboxKeeper {
        pid_t pid;               /* 0 = none */
        int pidfd;
        int job_fd;
} SandboxKeeper;
#define SANDBOX_KEEPER_NULL ((SandboxKeeper) { .pid = 0, .pidfd = -EBADF, .job_fd = -EBADF })

/*
 * sandbox_keeper_start() - start a keeper (@keeper_path) as our child: it dies with us, and
 * waits for the job that sandbox_spawn() sends. Starting one is a fork and an exec (most of a
 * millisecond here): the daemon keeps one ready, so that neither sits between a request and its
 * sandbox. Return: 0 or -errno.
 */
int sandbox_keeper_start(const char *keeper_path, SandboxKeeper *ret);
/* sandbox_keeper_alive() - still waiting for its job (not dead, not used). */
bool sandbox_keeper_alive(const SandboxKeeper *k);
/* sandbox_keeper_stop() - kill and reap an unused keeper. */
void sandbox_keeper_stop(SandboxKeeper *k);
/*
 * sandbox_keeper_reap() - reap an unused keeper that exited or is exiting (its pidfd is readable,
 * or its end of the job socket is closed, which happens only as it exits), and learn how it ended.
 * Waits for it up to @timeout_ms (-1: no bound); one still running after that is killed. Blocks
 * only for that wait: call it for a keeper known to be on its way out.
 * @ret_si: si_code (CLD_EXITED, CLD_KILLED, CLD_DUMPED) and si_status, as waitid() tells; may be NULL.
 * Return: 0, or -ETIMEDOUT if it did not exit in time (then killed; *ret_si says so).
 */
int sandbox_keeper_reap(SandboxKeeper *k, int timeout_ms, siginfo_t *ret_si);

typedef struct SandboxProcess {
        pid_t keeper_pid;        /* our child: holds the scope's cgroup until we release it */
        int keeper_pidfd;
        int control_fd;          /* write 'G' to start bwrap, 'K' to kill it; close to release */
        int report_fd;           /* keeper writes "S<pid>\n" when bwrap started, "X<status>\n" at its exit */
        int stdout_fd;
        int stderr_fd;
} SandboxProcess;

/*
 * sandbox_spawn() - hand @keeper (consumed: moved into @ret, or reaped on failure) the job of
 * running bwrap with @argv (fds laid out as SANDBOX_FD_*), an explicit minimal environment and
 * @limits. The keeper waits for 'G' on its control pipe (not with @fds->start_now), then starts
 * bwrap, reports its pid and, later, its wait status (once the sandbox's pid 1, and so the pid
 * namespace, is gone too), then waits to be released.
 *
 * Early start (@fds->info_fd set, @argv has --info-fd SANDBOX_FD_INFO): the keeper execs bwrap at
 * once, but bwrap gets its seccomp program through a pipe, not the memfd: bwrap reads it to EOF
 * in the sandbox's pid 1 after it has built the whole sandbox and before it forks the payload,
 * so the sandbox is built while systemd makes the scope, and nothing runs until 'G', on which the
 * keeper writes the program in one write() and closes the pipe. If the keeper dies first, bwrap
 * reads an empty program, which it refuses: it fails closed. The caller puts the keeper, bwrap
 * ("S<pid>") and the pid 1 (from the --info-fd JSON) into the scope before 'G'.
 *
 * A keeper that exited before it took the job (it died while it waited, or it gave up, or it
 * refuses jobs and exits while this one is being sent, as a keeper of another version may) is
 * reaped here, and @ret_keeper_exit (may be NULL; written on -ECHILD only) says how it ended,
 * whatever the send saw of it (nothing yet, EPIPE, ECONNRESET). A keeper that takes the job and
 * gives up later is the caller's to watch (its pidfd, in @ret).
 * Return: 0; -ECHILD if @keeper exited before it took the job; or -errno.
 */
int sandbox_spawn(const char *bwrap, char *const *argv, const SandboxFds *fds, const SandboxLimits *limits,
                  SandboxKeeper *keeper, SandboxProcess *ret, siginfo_t *ret_keeper_exit);
void sandbox_process_done(SandboxProcess *p);

/*
 * sandbox_process_watch() - make the keeper's stdout, stderr and report pipes of @p non-blocking
 * and watch each in @e for input (@on_stdout, @on_stderr, @on_report with @userdata), the sources
 * in *@ret_stdout, *@ret_stderr and *@ret_report (those made before a failure stay there).
 * Return: 0 or -errno.
 */
int sandbox_process_watch(const SandboxProcess *p, sd_event *e, sd_event_io_handler_t on_stdout,
                          sd_event_io_handler_t on_stderr, sd_event_io_handler_t on_report, void *userdata,
                          sd_event_source **ret_stdout, sd_event_source **ret_stderr, sd_event_source **ret_report);

/*
 * sandbox_pidfd_of_child() - a pidfd of @pid (the sandbox's pid 1, from bwrap's --info-fd),
 * checked to be a child or grandchild of the keeper @keeper. Return: the fd or -errno.
 */
int sandbox_pidfd_of_child(pid_t pid, pid_t keeper);
