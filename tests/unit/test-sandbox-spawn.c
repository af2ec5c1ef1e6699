/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sandbox_spawn() with real bwrap, in early-start mode (what runs with a scope): bwrap builds the
 * sandbox at once but runs nothing until the keeper gets 'G'; if the keeper dies or is told 'K'
 * first, the payload never runs (bwrap reads an empty seccomp program and refuses it). Without
 * a scope in sight: the test plays the daemon's part (reads "S<pid>" and the --info-fd JSON).
 * Also the keeper (sandbox-runner-keeper) itself: what it inherits, which jobs it refuses, and
 * that it starts nothing for anyone but the parent it was told of; and a keeper that exits before
 * it takes its job (before the send, or while it is sent): sandbox_spawn() says how it ended.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sandbox/sandbox.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/macro.h"
#include "util/strv.h"

typedef struct Fixture {
        char dir[64];
        SandboxProbeReport probe;
        SandboxProcess proc;
        int info_fd;            /* read end */
        pid_t bwrap_pid, init_pid;
        bool detachable;        /* spawn(): a detachable job (a kernel's, in a scope) */
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        strcpy(f->dir, "/tmp/test-sandbox-spawn.XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        assert_int_equal(chmod(f->dir, 0777), 0);   /* the sandbox's uid writes here */
        assert_int_equal(sandbox_probe("/usr/bin/bwrap", &f->probe), 0);
        assert_true(f->probe.usable);
        f->info_fd = -1;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        char path[128];

        (void) snprintf(path, sizeof(path), "%s/ran", f->dir);
        (void) unlink(path);
        (void) rmdir(f->dir);
        sandbox_process_done(&f->proc);
        safe_close(f->info_fd);
        sandbox_probe_report_done(&f->probe);
        free(f);
        return 0;
}

/* Read one line from @fd (blocking, 10 s at most) into @buf. */
static void read_line(int fd, char *buf, size_t size) {
        size_t n = 0;

        while (n < size - 1) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                assert_int_equal(poll(&p, 1, 10000), 1);
                k = read(fd, buf + n, 1);
                assert_int_equal(k, 1);
                if (buf[n] == '\n')
                        break;
                n++;
        }
        buf[n] = '\0';
}

/* Read bwrap's --info-fd JSON to its end; the sandbox's pid 1 into f->init_pid. */
static void read_init_pid(Fixture *f) {
        char json[256];
        size_t n = 0;
        json_object *o, *v;

        for (;;) {
                struct pollfd p = { .fd = f->info_fd, .events = POLLIN };
                ssize_t k;

                assert_int_equal(poll(&p, 1, 10000), 1);
                k = read(f->info_fd, json + n, sizeof(json) - 1 - n);
                assert_true(k >= 0);
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        json[n] = '\0';
        o = json_tokener_parse(json);
        assert_non_null(o);
        assert_true(json_object_object_get_ex(o, "child-pid", &v));
        f->init_pid = (pid_t) json_object_get_int(v);
        json_object_put(o);
        assert_true(f->init_pid > 1);
}

/* Start `sh -c SCRIPT` through a keeper of its own, early (gated) or at once (@start_now, what
 * runs without a scope); wait for "S". */
static void spawn(Fixture *f, const char *script, bool start_now) {
        char *payload[] = { (char *) "/bin/sh", (char *) "-c", (char *) script, NULL };
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_free_ char *err = NULL;
        _cleanup_close_ int seccomp_fd = -EBADF, stdin_fd = -EBADF;
        SandboxKeeper keeper = SANDBOX_KEEPER_NULL;
        int info[2];
        char line[64];

        SandboxSpec spec = {
                .workspace = f->dir, .cwd = "", .argv = payload, .tmp_size = 16ULL << 20,
                .seccomp_fd = SANDBOX_FD_SECCOMP, .passwd_fd = -1, .group_fd = -1, .hosts_fd = -1,
                .code_fd = -1, .info_fd = SANDBOX_FD_INFO,
        };
        assert_int_equal(sandbox_argv_build(&spec, &f->probe.probe, &argv), 0);
        assert_int_equal(seccomp_program_for_variant(SECCOMP_VARIANT_BASELINE, &seccomp_fd, &err), 0);
        stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(stdin_fd >= 0);
        assert_int_equal(pipe2(info, O_CLOEXEC), 0);
        SandboxFds fds = {
                .stdin_fd = stdin_fd, .seccomp_fd = seccomp_fd, .passwd_fd = -1, .group_fd = -1,
                .hosts_fd = -1, .code_fd = -1, .info_fd = info[1], .start_now = start_now,
                .detachable = f->detachable,
        };
        assert_int_equal(sandbox_keeper_start(SR_KEEPER_PATH, &keeper), 0);
        assert_true(sandbox_keeper_alive(&keeper));
        assert_int_equal(sandbox_spawn("/usr/bin/bwrap", argv, &fds, &(SandboxLimits) { .nofile = 1024 },
                                       &keeper, &f->proc, NULL), 0);
        assert_int_equal(keeper.pid, 0);   /* consumed */
        safe_close(info[1]);
        f->info_fd = info[0];

        /* Early: no 'G' was sent, and yet bwrap runs: it reports at once. */
        read_line(f->proc.report_fd, line, sizeof(line));
        assert_int_equal(line[0], 'S');
        f->bwrap_pid = atoi(line + 1);
        assert_true(f->bwrap_pid > 1);
}

/* Start `sh -c 'touch /workspace/ran'` early; wait for "S" and the sandbox's pid 1. */
static void spawn_early(Fixture *f) {
        spawn(f, "touch /workspace/ran", false);
        read_init_pid(f);
        assert_int_not_equal(f->init_pid, f->bwrap_pid);
}

/* Until /proc/PID/stat says @pid is in @state ('T' stopped, 'Z' zombie); 10 s at most. */
static void wait_state(pid_t pid, char state) {
        char path[64], buf[512] = "", *p = NULL;

        (void) snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        for (unsigned i = 0; i < 1000; i++) {
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t n;

                assert_true(fd >= 0);
                n = read(fd, buf, sizeof(buf) - 1);
                assert_true(n > 0);
                buf[n] = '\0';
                p = strrchr(buf, ')');
                assert_non_null(p);
                if (p[1] == ' ' && p[2] == state)
                        return;
                (void) nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        fail_msg("pid %d not in state %c after 10 s: %s", (int) pid, state, buf);
}

/* Reap whatever comes to us (we are a subreaper: the sandbox's pid 1 too, if orphaned) until
 * nothing of the spawn is left; 10 s at most. */
static void reap_all(void) {
        for (unsigned i = 0; i < 1000; i++) {
                pid_t p = waitpid(-1, NULL, WNOHANG);
                if (p < 0 && errno == ECHILD)
                        return;
                if (p == 0)
                        (void) nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        fail_msg("children still running after 10 s");
}

static bool ran(const Fixture *f) {
        char path[128];

        (void) snprintf(path, sizeof(path), "%s/ran", f->dir);
        return access(path, F_OK) == 0;
}

/* The sandbox is built and waits: after a while, still nothing ran. */
static void assert_waiting(const Fixture *f) {
        (void) nanosleep(&(struct timespec) { .tv_nsec = 200 * 1000 * 1000 }, NULL);
        assert_false(ran(f));
        if (kill(f->init_pid, 0) < 0) {
                char buf[4096];
                ssize_t k;

                (void) fd_nonblock(f->proc.stderr_fd, 1);
                k = read(f->proc.stderr_fd, buf, sizeof(buf) - 1);
                buf[k > 0 ? k : 0] = '\0';
                fail_msg("the sandbox's pid 1 is gone (%m); bwrap said: %s", buf);
        }
}

static void test_go_runs_the_payload(void **state) {
        Fixture *f = *state;
        char line[64];

        spawn_early(f);
        assert_waiting(f);
        assert_int_equal(write(f->proc.control_fd, "G", 1), 1);
        read_line(f->proc.report_fd, line, sizeof(line));
        assert_string_equal(line, "X0");
        assert_true(ran(f));
        f->proc.control_fd = safe_close(f->proc.control_fd);   /* release the keeper */
        reap_all();
}

static void test_keeper_killed_before_go(void **state) {
        Fixture *f = *state;

        spawn_early(f);
        assert_waiting(f);
        /* What happens when the daemon dies, or releases the sandbox before the scope exists. */
        assert_int_equal(kill(f->proc.keeper_pid, SIGKILL), 0);
        reap_all();
        assert_int_equal(kill(f->init_pid, 0), -1);
        assert_false(ran(f));
}

static void test_kill_before_go(void **state) {
        Fixture *f = *state;
        char line[64];
        int status;

        spawn_early(f);
        assert_waiting(f);
        assert_int_equal(write(f->proc.control_fd, "K", 1), 1);
        read_line(f->proc.report_fd, line, sizeof(line));
        assert_int_equal(line[0], 'X');
        status = atoi(line + 1);
        assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        f->proc.control_fd = safe_close(f->proc.control_fd);
        reap_all();
        assert_false(ran(f));
}

/* The sandbox dies before 'G', and the keeper reads the 'G' before it sees bwrap's exit: its write
 * of the seccomp program goes into a pipe nobody reads any more. It still reports bwrap's exit
 * (it used to die of SIGPIPE there, so that the daemon saw a keeper gone without a report). */
static void test_go_after_the_sandbox_died(void **state) {
        Fixture *f = *state;
        char line[64];
        int status;

        spawn_early(f);
        assert_waiting(f);
        /* Keep the keeper from looking while the sandbox goes and the 'G' comes: on SIGCONT it finds
         * both, and takes the 'G' first. */
        assert_int_equal(kill(f->proc.keeper_pid, SIGSTOP), 0);
        wait_state(f->proc.keeper_pid, 'T');
        assert_int_equal(kill(f->init_pid, SIGKILL), 0);
        assert_int_equal(kill(f->bwrap_pid, SIGKILL), 0);
        /* bwrap: exited, not reaped (the keeper is stopped); the pid 1 likewise (the keeper's now). */
        wait_state(f->bwrap_pid, 'Z');
        wait_state(f->init_pid, 'Z');
        assert_int_equal(write(f->proc.control_fd, "G", 1), 1);
        assert_int_equal(kill(f->proc.keeper_pid, SIGCONT), 0);
        read_line(f->proc.report_fd, line, sizeof(line));
        assert_int_equal(line[0], 'X');
        status = atoi(line + 1);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
        f->proc.control_fd = safe_close(f->proc.control_fd);
        reap_all();
        assert_false(ran(f));
}

/* Unscoped (start_now): runs at once; by the exit report the sandbox's pid 1 is gone too, with a
 * background process the payload left behind. */
static void test_start_now_reports_after_the_sandbox_is_gone(void **state) {
        Fixture *f = *state;
        char line[64];

        spawn(f, "sleep 1000 & touch /workspace/ran", true);
        read_line(f->proc.report_fd, line, sizeof(line));
        assert_string_equal(line, "X0");
        assert_true(ran(f));
        /* The pid 1 (from the info JSON, complete by now) no longer exists: the keeper reaped it. */
        read_init_pid(f);
        assert_int_equal(kill(f->init_pid, 0), -1);
        assert_int_equal(errno, ESRCH);
        f->proc.control_fd = safe_close(f->proc.control_fd);
        reap_all();
}

/* Detachable (a kernel's sandbox in a scope): the end of the control pipe (the daemon went away)
 * leaves the sandbox running; once it ends by itself, the keeper reaps it and exits, reporting to
 * nobody. */
static void test_detachable_outlives_the_control_pipe(void **state) {
        Fixture *f = *state;
        int status;

        f->detachable = true;
        spawn(f, "sleep 1; touch /workspace/ran", false);
        read_init_pid(f);
        assert_int_equal(write(f->proc.control_fd, "G", 1), 1);
        f->proc.control_fd = safe_close(f->proc.control_fd);
        f->proc.report_fd = safe_close(f->proc.report_fd);
        (void) nanosleep(&(struct timespec) { .tv_nsec = 300 * 1000 * 1000 }, NULL);
        assert_int_equal(kill(f->init_pid, 0), 0);
        assert_int_equal(kill(f->proc.keeper_pid, 0), 0);
        assert_int_equal(waitpid(f->proc.keeper_pid, &status, 0), f->proc.keeper_pid);
        f->proc.keeper_pid = 0;
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_true(ran(f));
        assert_int_equal(kill(f->init_pid, 0), -1);
        reap_all();
}

/* Detachable, and yet 'K' kills it as any other (before 'G': nothing runs), and the end of the
 * control pipe before 'G' (a daemon gone before the scope existed) too. */
static void test_detachable_killed_by_k(void **state) {
        Fixture *f = *state;
        char line[64];

        f->detachable = true;
        spawn_early(f);
        assert_waiting(f);
        assert_int_equal(write(f->proc.control_fd, "K", 1), 1);
        read_line(f->proc.report_fd, line, sizeof(line));
        assert_int_equal(line[0], 'X');
        f->proc.control_fd = safe_close(f->proc.control_fd);
        reap_all();
        assert_false(ran(f));
}

static void test_detachable_released_before_go(void **state) {
        Fixture *f = *state;
        char line[64];

        f->detachable = true;
        spawn_early(f);
        assert_waiting(f);
        f->proc.control_fd = safe_close(f->proc.control_fd);
        /* As without the flag: bwrap killed, no report, the keeper gone. */
        assert_int_equal(waitpid(f->proc.keeper_pid, NULL, 0), f->proc.keeper_pid);
        f->proc.keeper_pid = 0;
        assert_int_equal(read(f->proc.report_fd, line, sizeof(line)), 0);
        reap_all();
        assert_false(ran(f));
        assert_int_equal(kill(f->init_pid, 0), -1);
}

/* The signal that killed @pid (a child of ours), or its exit status. */
static int wait_exit_status_or_signal(pid_t pid) {
        int status;

        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
}

static int wait_exit_status(pid_t pid) {
        int status;

        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        return WEXITSTATUS(status);
}

/* A keeper started ahead and never used goes when its job socket closes. */
static void test_unused_keeper_exits(void **state) {
        SandboxKeeper k = SANDBOX_KEEPER_NULL;

        assert_int_equal(sandbox_keeper_start(SR_KEEPER_PATH, &k), 0);
        k.job_fd = safe_close(k.job_fd);
        assert_int_equal(wait_exit_status(k.pid), 0);
        k.pid = 0;
        sandbox_keeper_stop(&k);
}

/* Until @pid sits in recvmsg(), by /proc/PID/syscall (the syscall it is blocked in); 10 s at most. */
static void wait_in_recvmsg(pid_t pid) {
        char path[64], buf[256] = "";

        (void) snprintf(path, sizeof(path), "/proc/%d/syscall", (int) pid);
        for (unsigned i = 0; i < 1000; i++) {
                FILE *f = fopen(path, "re");
                long nr = -1;

                assert_non_null(f);
                if (fgets(buf, sizeof(buf), f))
                        nr = strtol(buf, NULL, 10);
                fclose(f);
                if (nr == SYS_recvmsg)
                        return;
                (void) nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        fail_msg("keeper %d not in recvmsg() after 10 s: %s", (int) pid, buf);
}

/* Nothing of ours but the job socket reaches the keeper, not even an fd without close-on-exec. */
static void test_keeper_inherits_only_its_socket(void **state) {
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        char path[64], fds[256] = "";
        int leak[2];
        DIR *d;
        struct dirent *de;

        assert_int_equal(pipe(leak), 0);   /* deliberately without O_CLOEXEC */
        assert_int_equal(sandbox_keeper_start(SR_KEEPER_PATH, &k), 0);
        (void) snprintf(path, sizeof(path), "/proc/%d/fd", (int) k.pid);
        /* Wait for it to be past its own set-up: blocked in recvmsg() on its job socket. (Not "fd 3
         * is gone": close_range() takes the fds one by one, and a look in between sees the later
         * ones still open.) */
        wait_in_recvmsg(k.pid);
        d = opendir(path);
        assert_non_null(d);
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                size_t l = strlen(fds);

                /* Too many fds to list is a failure in itself, not something to cut short. */
                assert_true(l + strlen(de->d_name) + 2 <= sizeof(fds));
                (void) snprintf(fds + l, sizeof(fds) - l, "%s ", de->d_name);
        }
        closedir(d);
        /* stdin, stdout (/dev/null), stderr (ours), the job socket moved to 100. */
        assert_string_equal(fds, "0 1 2 100 ");
        safe_close(leak[0]);
        safe_close(leak[1]);
        sandbox_keeper_stop(&k);
}

/* A job that is not exactly what the daemon sends: the keeper starts nothing and says so. */
static void send_raw_job(int sock, const KeeperJob *job, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 16)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) job, .iov_len = sizeof(*job) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > 0) {
                struct cmsghdr *c;
                msg.msg_control = &control;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        assert_int_equal(sendmsg(sock, &msg, MSG_NOSIGNAL), (ssize_t) sizeof(*job));
}

static void test_keeper_refuses_bad_jobs(void **state) {
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int fds[2] = { devnull, devnull };
        struct {
                KeeperJob job;
                size_t n_fds;
        } cases[] = {
                /* wrong magic */
                { { .magic = 0x12345678, .fd_mask = 0, .argc = 1 }, 1 },
                /* the mask names a slot, but only the argv memfd came */
                { { .magic = KEEPER_JOB_MAGIC, .fd_mask = 1, .argc = 1 }, 1 },
                /* a slot beyond the layout */
                { { .magic = KEEPER_JOB_MAGIC, .fd_mask = 1U << KEEPER_JOB_SLOTS, .argc = 1 }, 2 },
                /* no fds at all */
                { { .magic = KEEPER_JOB_MAGIC, .fd_mask = 0, .argc = 1 }, 0 },
                /* the "argv memfd" is /dev/null: empty */
                { { .magic = KEEPER_JOB_MAGIC, .fd_mask = 0, .argc = 1 }, 1 },
        };

        assert_true(devnull >= 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                SandboxKeeper k = SANDBOX_KEEPER_NULL;

                assert_int_equal(sandbox_keeper_start(SR_KEEPER_PATH, &k), 0);
                send_raw_job(k.job_fd, &cases[i].job, fds, cases[i].n_fds);
                assert_int_equal(wait_exit_status(k.pid), 120);
                k.pid = 0;
                sandbox_keeper_stop(&k);
        }
        safe_close(devnull);
}

/* A job for sandbox_spawn() that no keeper below gets to run. */
static int spawn_unused(SandboxKeeper *k, siginfo_t *ret_si) {
        char *argv[] = { (char *) "/bin/true", NULL };
        _cleanup_close_ int stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        SandboxFds fds = {
                .stdin_fd = stdin_fd, .seccomp_fd = -1, .passwd_fd = -1, .group_fd = -1, .hosts_fd = -1,
                .code_fd = -1, .info_fd = -1, .start_now = true,
        };
        SandboxProcess proc = {};

        assert_true(stdin_fd >= 0);
        return sandbox_spawn("/usr/bin/bwrap", argv, &fds, &(SandboxLimits) { .nofile = 1024 }, k, &proc, ret_si);
}

/* A pidfd of @k's process, to tell later whether it was reaped (pids are reused, pidfds not). */
static int keeper_pidfd(const SandboxKeeper *k) {
        int fd = fcntl(k->pidfd, F_DUPFD_CLOEXEC, 3);

        assert_true(fd >= 0);
        return fd;
}

static void assert_reaped(int pidfd) {
        siginfo_t si = {};

        assert_int_equal(waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
        safe_close(pidfd);
}

/* Gone before the job: a keeper that exited (here: it refused a bad job) before the send. */
static void test_spawn_keeper_exited_before_job(void **state) {
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        KeeperJob bad = { .magic = 0x12345678, .argc = 1 };
        siginfo_t si = {};
        int fd;

        assert_int_equal(sandbox_keeper_start(SR_KEEPER_PATH, &k), 0);
        fd = keeper_pidfd(&k);
        send_raw_job(k.job_fd, &bad, NULL, 0);
        /* Until it is a zombie (not reaped). */
        assert_int_equal(waitid(P_PIDFD, (id_t) fd, &si, WEXITED | WNOWAIT), 0);
        si = (siginfo_t) {};
        assert_int_equal(spawn_unused(&k, &si), -ECHILD);
        assert_int_equal(k.pid, 0);
        assert_int_equal(si.si_code, CLD_EXITED);
        assert_int_equal(si.si_status, 120);
        assert_reaped(fd);
}

/* A keeper script: @body after a #!/bin/sh line, in @dir. Return: its path (static). */
static const char *keeper_script(const char *dir, const char *body) {
        static char path[128];
        FILE *f;

        (void) snprintf(path, sizeof(path), "%s/keeper.sh", dir);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_true(fprintf(f, "#!/bin/sh\n%s\n", body) > 0);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(chmod(path, 0755), 0);
        return path;
}

/* A pipe whose ends a keeper script inherits (no close-on-exec), out of the way of the fds that
 * sandbox_keeper_start() sets up (0-3), and below 10 (sh redirects name one digit). */
static void gate_pipe(int gate[2]) {
        int p[2];

        assert_int_equal(pipe(p), 0);
        for (int i = 0; i < 2; i++) {
                gate[i] = fcntl(p[i], F_DUPFD, 5);
                assert_true(gate[i] >= 5 && gate[i] <= 9);
        }
        safe_close(p[0]);
        safe_close(p[1]);
}

/* Wait until the keeper closed its end of the job socket (a hang-up on ours); 10 s at most. */
static void wait_hangup(const SandboxKeeper *k) {
        struct pollfd p = { .fd = k->job_fd, .events = POLLIN };

        assert_int_equal(poll(&p, 1, 10000), 1);
        assert_true(p.revents & POLLHUP);
}

/* Gone while the job is sent: the keeper has closed its job socket (the send fails, EPIPE) and exits
 * (status 120) only once we let it, after that. Reported by its exit status, not the errno. */
static void test_spawn_keeper_exits_during_send(void **state) {
        char dir[] = "/tmp/test-sandbox-spawn-keeper.XXXXXX", body[128], path[160];
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        siginfo_t si = {};
        int gate[2], fd;

        assert_non_null(mkdtemp(dir));
        /* The script exits when it reads EOF from gate[0]. */
        gate_pipe(gate);
        (void) snprintf(body, sizeof(body), "exec 3>&- %d>&-\nread x <&%d\nexit 120", gate[1], gate[0]);
        assert_int_equal(sandbox_keeper_start(keeper_script(dir, body), &k), 0);
        safe_close(gate[0]);
        fd = keeper_pidfd(&k);
        wait_hangup(&k);
        /* Its socket is closed, it is alive (it waits for the gate): let it go, and send at once. It
         * exits while the job is sent, or a moment before: the same answer either way. */
        safe_close(gate[1]);
        assert_int_equal(spawn_unused(&k, &si), -ECHILD);
        assert_int_equal(si.si_code, CLD_EXITED);
        assert_int_equal(si.si_status, 120);
        assert_reaped(fd);
        (void) snprintf(path, sizeof(path), "%s/keeper.sh", dir);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(dir), 0);
}

/* A keeper that closes its job socket and stays: not waited for without bound, killed and reaped. */
static void test_spawn_keeper_hangs_up_and_stays(void **state) {
        char dir[] = "/tmp/test-sandbox-spawn-keeper.XXXXXX", body[128], path[160];
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        struct timespec t0, t1;
        siginfo_t si = {};
        int gate[2], fd;
        double took;

        assert_non_null(mkdtemp(dir));
        gate_pipe(gate);
        (void) snprintf(body, sizeof(body), "exec 3>&- %d>&-\nread x <&%d\nexit 120", gate[1], gate[0]);
        assert_int_equal(sandbox_keeper_start(keeper_script(dir, body), &k), 0);
        safe_close(gate[0]);
        fd = keeper_pidfd(&k);
        wait_hangup(&k);
        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t0), 0);
        assert_int_equal(spawn_unused(&k, &si), -ECHILD);   /* gate[1] stays open: it never exits */
        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t1), 0);
        took = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
        assert_int_equal(si.si_code, CLD_KILLED);
        assert_int_equal(si.si_status, SIGKILL);
        assert_true(took < 5.0);
        assert_reaped(fd);
        safe_close(gate[1]);
        (void) snprintf(path, sizeof(path), "%s/keeper.sh", dir);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(dir), 0);
}

/* A job that cannot be built (an argv over the limit): the keeper is not left behind, waiting. */
static void test_spawn_failure_stops_the_keeper(void **state) {
        _cleanup_free_ char *big = malloc(KEEPER_ARGV_BYTES_MAX + 1);
        char *argv[] = { big, NULL };
        SandboxFds fds = {
                .stdin_fd = -1, .seccomp_fd = -1, .passwd_fd = -1, .group_fd = -1, .hosts_fd = -1,
                .code_fd = -1, .info_fd = -1, .start_now = true,
        };
        SandboxKeeper k = SANDBOX_KEEPER_NULL;
        SandboxProcess proc = {};
        int fd;

        assert_non_null(big);
        memset(big, 'x', KEEPER_ARGV_BYTES_MAX);
        big[KEEPER_ARGV_BYTES_MAX] = '\0';
        assert_int_equal(sandbox_keeper_start(SR_KEEPER_PATH, &k), 0);
        fd = keeper_pidfd(&k);
        assert_int_equal(sandbox_spawn("/usr/bin/bwrap", argv, &fds, &(SandboxLimits) {}, &k, &proc, NULL), -E2BIG);
        assert_int_equal(k.pid, 0);
        assert_int_equal(k.pidfd, -EBADF);
        assert_int_equal(k.job_fd, -EBADF);
        assert_reaped(fd);
}

/* sandbox_pidfd_of_child(): a grandchild of the keeper (the sandbox's pid 1 under bwrap), and the
 * same process once bwrap is gone and it was handed to the keeper, a subreaper (as this test is). */
typedef struct Family {
        pid_t b, c;             /* killed and reaped at teardown (in this order), should the test fail */
} Family;

static int family_setup(void **state) {
        Family *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        *state = f;
        return 0;
}

static int family_teardown(void **state) {
        Family *f = *state;

        for (pid_t *p = &f->b; p <= &f->c; p++)
                if (*p > 0) {
                        (void) kill(*p, SIGKILL);
                        (void) waitpid(*p, NULL, 0);
                }
        free(f);
        return 0;
}

static void test_pidfd_of_child(void **state) {
        Family *f = *state;
        int ready[2], hold[2], fd;
        pid_t b, c = 0;
        char ch;

        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        assert_int_equal(pipe2(hold, O_CLOEXEC), 0);
        b = fork();   /* "bwrap" */
        assert_true(b >= 0);
        if (b == 0) {
                pid_t pid = fork();   /* "the sandbox's pid 1": waits until the test lets it go */
                if (pid == 0) {
                        if (read(hold[0], &ch, 1) < 0)
                                _exit(EXIT_FAILURE);   /* the test then sees an exit, not SIGKILL */
                        _exit(0);
                }
                if (write(ready[1], &pid, sizeof(pid)) != (ssize_t) sizeof(pid))
                        _exit(EXIT_FAILURE);   /* the test's read of ready[0] then fails */
                if (read(hold[0], &ch, 1) < 0)   /* EOF: the test closed hold[1] */
                        _exit(EXIT_FAILURE);
                _exit(0);
        }
        f->b = b;
        safe_close(ready[1]);
        assert_int_equal(read(ready[0], &c, sizeof(c)), (ssize_t) sizeof(c));
        f->c = c;   /* ours once b is gone (teardown kills b first) */
        safe_close(ready[0]);

        fd = sandbox_pidfd_of_child(c, getpid());
        assert_true(fd >= 0);
        safe_close(fd);
        /* Neither child nor grandchild of another process (our parent is its great-grandparent). */
        assert_int_equal(sandbox_pidfd_of_child(c, getppid()), -ESRCH);
        assert_int_equal(sandbox_pidfd_of_child(getpid(), getpid()), -ESRCH);

        /* "bwrap" exits (its child stays, blocked on hold: our copy of the write end is open): the
         * grandchild becomes our child. */
        assert_int_equal(kill(b, SIGKILL), 0);
        assert_int_equal(wait_exit_status_or_signal(b), SIGKILL);
        f->b = 0;
        fd = sandbox_pidfd_of_child(c, getpid());
        assert_true(fd >= 0);
        safe_close(fd);

        assert_int_equal(kill(c, SIGKILL), 0);
        assert_int_equal(wait_exit_status_or_signal(c), SIGKILL);
        f->c = 0;
        safe_close(hold[0]);
        safe_close(hold[1]);
}

/* Run by hand, or by a process that is not the one it names, the keeper does nothing. */
static void test_keeper_checks_its_parent(void **state) {
        const char *args[][3] = {
                { "sandbox-runner-keeper", NULL },
                { "sandbox-runner-keeper", "1" },
                { "sandbox-runner-keeper", "x" },
                { "sandbox-runner-keeper", "999999999" },
        };
        const int want[] = { 1, 1, 1, 126 };

        for (size_t i = 0; i < ELEMENTSOF(args); i++) {
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        int null = open("/dev/null", O_WRONLY);
                        (void) dup2(null, 2);
                        execv(SR_KEEPER_PATH, (char *const *) args[i]);
                        _exit(99);
                }
                assert_int_equal(wait_exit_status(pid), want[i]);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_go_runs_the_payload, setup, teardown),
                cmocka_unit_test_setup_teardown(test_keeper_killed_before_go, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill_before_go, setup, teardown),
                cmocka_unit_test_setup_teardown(test_go_after_the_sandbox_died, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_now_reports_after_the_sandbox_is_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_detachable_outlives_the_control_pipe, setup, teardown),
                cmocka_unit_test_setup_teardown(test_detachable_killed_by_k, setup, teardown),
                cmocka_unit_test_setup_teardown(test_detachable_released_before_go, setup, teardown),
                cmocka_unit_test(test_unused_keeper_exits),
                cmocka_unit_test(test_keeper_inherits_only_its_socket),
                cmocka_unit_test(test_keeper_refuses_bad_jobs),
                cmocka_unit_test(test_spawn_keeper_exited_before_job),
                cmocka_unit_test(test_spawn_keeper_exits_during_send),
                cmocka_unit_test(test_spawn_keeper_hangs_up_and_stays),
                cmocka_unit_test(test_spawn_failure_stops_the_keeper),
                cmocka_unit_test_setup_teardown(test_pidfd_of_child, family_setup, family_teardown),
                cmocka_unit_test(test_keeper_checks_its_parent),
        };

        /* Orphans of the spawn (the keeper's children when it is killed) come to us. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return 1;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
