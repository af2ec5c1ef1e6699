/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sandboxes built ahead of their runs (prebuilt.h). A build is a cold launch minus what only the
 * request knows: bwrap's command line of the shape (an empty /workspace, an empty code file, the
 * exec helper as the command), a keeper from the keeper pool (in its cgroup with the daemon's
 * own cgroups), bwrap started at once; the sandbox is ready once bwrap told its pid ("S") and its
 * pid 1's (--info-fd). A sandbox whose keeper exits while it waits is discarded and logged. Builds
 * run from an idle-priority event source, one per dispatch, so that they never delay a request.
 */

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "execution/keeper-pool.h"
#include "execution/keeper-reap.h"
#include "execution/prebuilt.h"
#include "keeper/exec-request.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"

typedef struct PrebuiltSandbox PrebuiltSandbox;

struct PrebuiltSandbox {
        PrebuiltPool *pool;
        PrebuiltShape shape;
        SandboxProcess proc;
        int bind_fd, request_fd;
        pid_t bwrap_pid, init_pid;
        int init_pidfd;
        Cgroup *cgroup;
        Scope *scope;                    /* with scopes: the sandbox's, from its build on */
        bool scope_ready;                /* its start job done, 'G' sent */
        int info_fd;
        char info_buf[512];          /* bwrap's JSON: child-pid and the namespaces, ~240 bytes */
        size_t info_len;
        char report_buf[64];
        size_t report_len;
        sd_event_source *info_source, *report_source, *keeper_source, *helper_source;
        bool helper_ready;               /* the exec helper said EXEC_HELPER_READY */
        bool bind_prepared;              /* its keeper was told to prepare the bind */
        PrebuiltSandbox *next;
};

struct PrebuiltPool {
        ExecutionContext *ctx;
        PrebuiltSandbox *sandboxes;      /* building and ready */
        bool wanted[_PREBUILT_SHAPE_MAX];
        sd_event_source *refill;         /* idle priority: one build per dispatch */
        sd_event_source *quiet_timer;    /* builds wait for PREBUILT_QUIET_USEC without a run */
        sd_event_source *decay_timer;    /* a target grown by a burst goes back (and its excess) */
        uint64_t last_run_usec;          /* CLOCK_MONOTONIC: the last take or cold start */
        /* PrebuiltBurst=: runs of each shape since the last quiet moment, and the size its pool is
         * kept at (the largest such burst lately, at least Prebuilt=, at most PrebuiltBurst=). */
        unsigned demand[_PREBUILT_SHAPE_MAX];
        unsigned target[_PREBUILT_SHAPE_MAX];
        uint64_t target_usec[_PREBUILT_SHAPE_MAX];   /* when a burst last reached the target */
        unsigned failures;               /* builds that failed in a row: no more until a take */
};

#define PREBUILT_FAILURES_MAX 3
#define PREBUILT_PSS_SAMPLE 4         /* memoryPerIdleBytes: the mean over at most this many */
#define PREBUILT_STOP_GRACE_MS 2000   /* a keeper told to go kills and reaps its sandbox */
/* Builds run only once no run has started for this long, and none runs: a build takes most of a
 * CPU for milliseconds, and a burst of runs needs the CPUs (measured on 2 CPUs: a build beside
 * each run made prebuilt runs as slow as cold ones). */
#define PREBUILT_QUIET_USEC (50 * USEC_PER_MSEC)

static const char *const shape_names[_PREBUILT_SHAPE_MAX] = {
        [PREBUILT_SHELL] = "shell",
        [PREBUILT_CODE] = "code",
};

const char *prebuilt_shape_to_string(PrebuiltShape s) {
        return s >= 0 && s < _PREBUILT_SHAPE_MAX ? shape_names[s] : NULL;
}

static void pool_ask(PrebuiltPool *p) {
        (void) sd_event_source_set_enabled(p->refill, SD_EVENT_ON);
}

static bool sandbox_ready(const PrebuiltSandbox *s) {
        return s->bwrap_pid > 0 && s->init_pid > 0 && s->init_pidfd >= 0 && s->helper_ready &&
               (s->pool->ctx->limits != LIMITS_SYSTEMD_SCOPE || s->scope_ready);
}

static void sandbox_unlink(PrebuiltSandbox *s) {
        for (PrebuiltSandbox **p = &s->pool->sandboxes; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        return;
                }
}

/* The event sources and what the run does not take. */
static void sandbox_free(PrebuiltSandbox *s) {
        if (!s)
                return;
        s->info_source = sd_event_source_disable_unref(s->info_source);
        s->report_source = sd_event_source_disable_unref(s->report_source);
        s->keeper_source = sd_event_source_disable_unref(s->keeper_source);
        s->helper_source = sd_event_source_disable_unref(s->helper_source);
        safe_close(s->info_fd);
        safe_close(s->bind_fd);
        safe_close(s->request_fd);
        safe_close(s->init_pidfd);
        sandbox_process_done(&s->proc);
        cgroup_free(s->cgroup);
        scope_free(s->scope);
        free(s);
}

/* Discard: the keeper is killed (and bwrap with it) and reaped off the loop. What bwrap said on
 * its stderr, if anything, goes with the warning. */
static void sandbox_discard(PrebuiltSandbox *s, const char *why) {
        if (why) {
                char said[512] = "";
                ssize_t n = s->proc.stderr_fd >= 0 ? read(s->proc.stderr_fd, said, sizeof(said) - 1) : -1;

                if (n > 0) {
                        said[n] = '\0';
                        said[strcspn(said, "\n")] = '\0';
                }
                log_warning("A sandbox built ahead of its run (%s) is discarded: %s%s%s.", shape_names[s->shape], why,
                            n > 0 ? ": " : "", n > 0 ? said : "");
        }
        sandbox_unlink(s);
        pool_ask(s->pool);   /* a build may go on (or start over) */
        /* Our ends first: an exec helper that started although its bwrap is killed (a kill during
         * the build, before bwrap's pid 1 set its parent-death signal) reads EOF and exits, and
         * with it that pid 1, which the keeper waits for before it exits itself. */
        s->request_fd = safe_close(s->request_fd);
        s->bind_fd = safe_close(s->bind_fd);
        s->info_source = sd_event_source_disable_unref(s->info_source);
        s->info_fd = safe_close(s->info_fd);
        s->helper_source = sd_event_source_disable_unref(s->helper_source);
        if (s->proc.keeper_pid > 0) {
                /* Told to go: it kills bwrap and reaps the sandbox (its subreaper), then exits; reaped
                 * from the loop, its cgroup removed once it is gone. A keeper already gone reads
                 * nothing: the reap below finds it all the same. */
                if (write(s->proc.control_fd, "K", 1) != 1)
                        log_debug_errno(errno, "Prebuilt sandbox: the keeper %d did not take 'K': %m", (int) s->proc.keeper_pid);
                s->proc.control_fd = safe_close(s->proc.control_fd);
                if (keeper_reap_add(s->pool->ctx, s->proc.keeper_pid, &s->proc.keeper_pidfd, &s->keeper_source,
                                    &s->scope, &s->cgroup, true) < 0) {
                        /* No loop (the daemon's end): wait for it here, as keeper_reaps_flush() would. */
                        struct pollfd pf = { .fd = s->proc.keeper_pidfd, .events = POLLIN };

                        s->keeper_source = sd_event_source_disable_unref(s->keeper_source);
                        if (pf.fd < 0 || poll(&pf, 1, PREBUILT_STOP_GRACE_MS) <= 0)
                                (void) kill(s->proc.keeper_pid, SIGKILL);
                        (void) waitpid(s->proc.keeper_pid, NULL, 0);
                }
                s->proc.keeper_pid = 0;
        }
        sandbox_free(s);
}

/* With scopes: the scope holds keeper, bwrap and the sandbox's pid 1; 'G' lets the pid 1 go on. */
static void on_scope_started(Scope *scope, int error, const char *message, void *userdata) {
        PrebuiltSandbox *s = userdata;
        char why[256];

        if (error < 0) {
                (void) snprintf(why, sizeof(why), "its scope could not be created: %s", message ?: strerror(-error));
                s->pool->failures++;
                sandbox_discard(s, why);
                return;
        }
        if (write(s->proc.control_fd, "G", 1) != 1) {
                sandbox_discard(s, "its keeper went away before the go");
                return;
        }
        s->scope_ready = true;
}

/* Once bwrap's pid and its pid 1's are known: the scope, under the name of the keeper (a run
 * taking the sandbox gives it the run's description, see execution-prebuilt.c). */
static void sandbox_scope_start(PrebuiltSandbox *s) {
        ExecutionContext *c = s->pool->ctx;
        char name[64], description[96];
        int r;

        if (c->limits != LIMITS_SYSTEMD_SCOPE || s->scope || s->bwrap_pid <= 0 || s->init_pid <= 0)
                return;
        /* p<daemon pid>-<keeper pid>: unique while it lives, whose it is. */
        (void) snprintf(name, sizeof(name), SCOPE_PREFIX "p%d-%d.scope", (int) getpid(), (int) s->proc.keeper_pid);
        (void) snprintf(description, sizeof(description), "sandbox-runner sandbox built ahead (%s), not yet taken",
                        shape_names[s->shape]);
        r = scope_start_pids(c->scopes, name, (pid_t[]) { s->proc.keeper_pid, s->bwrap_pid, s->init_pid }, 3,
                             &c->prebuilt_limits, description, on_scope_started, s, &s->scope);
        if (r < 0) {
                s->pool->failures++;
                sandbox_discard(s, "its scope could not be asked for");
        }
}

/* Once its tree is final (the helper runs) and its pid 1 known: its keeper prepares the bind's
 * child (keeper-bind.c), off the request path. If the word does not go, the bind forks it then. */
static void sandbox_prepare_bind(PrebuiltSandbox *s) {
        _cleanup_free_ KeeperBind *b = NULL;

        if (s->bind_prepared || !s->helper_ready || s->init_pid <= 0 || s->bind_fd < 0)
                return;
        b = calloc(1, sizeof(*b));
        if (!b)
                return;
        b->magic = KEEPER_BIND_PREPARE_MAGIC;
        b->init_pid = s->init_pid;
        if (s->shape == PREBUILT_CODE)
                b->code_path[0] = '/';
        if (send(s->bind_fd, b, sizeof(*b), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t) sizeof(*b))
                s->bind_prepared = true;
}

static int on_keeper_exit(sd_event_source *src, const siginfo_t *si, void *userdata) {
        PrebuiltSandbox *s = userdata;
        char why[64];

        (void) snprintf(why, sizeof(why), "its keeper exited (code %d, status %d)", si->si_code, si->si_status);
        s->keeper_source = sd_event_source_disable_unref(s->keeper_source);
        s->proc.keeper_pid = 0;   /* reaped by the child source */
        s->pool->failures++;
        sandbox_discard(s, why);
        return 0;
}

static int on_report(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        PrebuiltSandbox *s = userdata;
        ssize_t n;
        char *nl;

        n = read(fd, s->report_buf + s->report_len, sizeof(s->report_buf) - 1 - s->report_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                sandbox_discard(s, "its keeper's report pipe closed");
                return 0;
        }
        s->report_len += (size_t) n;
        s->report_buf[s->report_len] = '\0';
        nl = strchr(s->report_buf, '\n');
        if (!nl)
                return 0;
        if (s->report_buf[0] != 'S' || nl[1] != '\0') {
                /* "X": bwrap exited before any run; anything else after "S" is not for a sandbox
                 * that waits. */
                sandbox_discard(s, "bwrap exited while it waited");
                s = NULL;
                return 0;
        }
        s->bwrap_pid = (pid_t) atoi(s->report_buf + 1);
        s->report_len = 0;
        /* The rest of the report pipe is the run's: no more reading here. */
        s->report_source = sd_event_source_disable_unref(s->report_source);
        sandbox_scope_start(s);
        if (sandbox_ready(s))
                s->pool->failures = 0;
        return 0;
}

static int on_info(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        PrebuiltSandbox *s = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v;
        ssize_t n;
        int64_t pid;

        n = read(fd, s->info_buf + s->info_len, sizeof(s->info_buf) - 1 - s->info_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0) {
                s->info_len += (size_t) n;
                if (s->info_len < sizeof(s->info_buf) - 1)
                        return 0;
        }
        s->info_source = sd_event_source_disable_unref(s->info_source);
        s->info_fd = safe_close(s->info_fd);
        s->info_buf[s->info_len] = '\0';
        o = s->info_len > 0 ? json_tokener_parse(s->info_buf) : NULL;
        if (!o || !json_object_object_get_ex(o, "child-pid", &v) || !json_object_is_type(v, json_type_int) ||
            (pid = json_object_get_int64(v)) <= 1 || pid > INT32_MAX) {
                sandbox_discard(s, "bwrap did not say its pid 1");
                return 0;
        }
        s->init_pid = (pid_t) pid;
        s->init_pidfd = sandbox_pidfd_of_child(s->init_pid, s->proc.keeper_pid);
        if (s->init_pidfd < 0) {
                sandbox_discard(s, "its pid 1 is gone");
                return 0;
        }
        sandbox_scope_start(s);
        sandbox_prepare_bind(s);
        if (sandbox_ready(s))
                s->pool->failures = 0;
        return 0;
}

/* The exec helper's first word: bwrap has built the whole sandbox and exec'd it. */
static int on_helper(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        PrebuiltSandbox *s = userdata;
        char c = 0;
        ssize_t n;

        n = recv(fd, &c, 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        s->helper_source = sd_event_source_disable_unref(s->helper_source);
        if (n != 1 || c != EXEC_HELPER_READY) {
                sandbox_discard(s, "its exec helper did not start");
                return 0;
        }
        s->helper_ready = true;
        sandbox_prepare_bind(s);
        if (sandbox_ready(s))
                s->pool->failures = 0;
        pool_ask(s->pool);   /* the next build, if one is missing */
        return 0;
}

/* The files, the command line and the keeper of one sandbox of @shape, started. Return: 0 or -errno. */
static int sandbox_build(PrebuiltPool *p, PrebuiltShape shape) {
        ExecutionContext *c = p->ctx;
        _cleanup_(sandbox_files_done) SandboxFiles files = SANDBOX_FILES_NULL;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_pair_ int info[2] = { -EBADF, -EBADF }, req[2] = { -EBADF, -EBADF };
        _cleanup_free_ char *seccomp_error = NULL;
        char exec_path[32];
        SandboxKeeper keeper = SANDBOX_KEEPER_NULL;
        PrebuiltSandbox *s;
        siginfo_t keeper_exit = {};
        int bind_fd = -EBADF, r;

        r = seccomp_program_for_variant(SECCOMP_VARIANT_BASELINE, &files.seccomp_fd, &seccomp_error);
        if (r < 0)
                return log_warning_errno(r, "No sandbox built ahead: the seccomp filter: %s",
                                         seccomp_error ?: strerror(-r));
        r = sandbox_files_make_etc(&files);
        if (r < 0)
                return r;
        if (shape == PREBUILT_CODE) {
                files.code_fd = memfd_new_data("sandbox-code", "", 0);
                if (files.code_fd < 0)
                        return files.code_fd;
        }
        files.stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (files.stdin_fd < 0 || pipe2(info, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, req) < 0)
                return negative_errno();
        (void) snprintf(exec_path, sizeof(exec_path), "/proc/self/fd/%d", SANDBOX_FD_EXEC);
        r = sandbox_argv_build(&(SandboxSpec) {
                                       .prebuilt = true,
                                       .argv = (char *[]) { exec_path, NULL },
                                       .tmp_size = c->tmp_size,
                                       .seccomp_fd = SANDBOX_FD_SECCOMP,
                                       .passwd_fd = SANDBOX_FD_PASSWD,
                                       .group_fd = SANDBOX_FD_GROUP,
                                       .hosts_fd = SANDBOX_FD_HOSTS,
                                       .code_fd = shape == PREBUILT_CODE ? SANDBOX_FD_CODE : -1,
                                       .info_fd = SANDBOX_FD_INFO,
                               },
                               c->probe, &argv);
        if (r < 0)
                return r;

        /* A keeper of its own, not one of the keeper pool's: that pool's refill would then start
         * a keeper (a fork and an exec of the daemon) while the next run waits for its sandbox. */
        r = sandbox_keeper_start(c->keeper_path, &keeper);
        if (r < 0)
                return r;
        s = calloc(1, sizeof(*s));
        if (!s) {
                sandbox_keeper_stop(&keeper);
                return -ENOMEM;
        }
        *s = (PrebuiltSandbox) {
                .pool = p, .shape = shape, .bind_fd = -EBADF, .request_fd = -EBADF, .init_pidfd = -EBADF,
                .info_fd = -EBADF,
                .proc = { .keeper_pidfd = -EBADF, .control_fd = -EBADF, .report_fd = -EBADF,
                          .stdout_fd = -EBADF, .stderr_fd = -EBADF },
        };
        if (c->limits == LIMITS_CGROUP) {
                /* In a cgroup of its own before bwrap starts: the run's, once it is taken. */
                char name[32];
                /* x-<daemon pid>-p<keeper pid>: whose it is, beside other root daemons. */
                (void) snprintf(name, sizeof(name), "%d-p%d", (int) getpid(), (int) keeper.pid);
                r = cgroup_new(c->cgroups, name, NULL, &s->cgroup);
                if (r >= 0)
                        r = cgroup_attach(s->cgroup, keeper.pid);
                if (r < 0) {
                        sandbox_keeper_stop(&keeper);
                        sandbox_free(s);
                        return r;
                }
        }
        r = sandbox_spawn(c->bwrap, argv,
                          &(SandboxFds) {
                                  .stdin_fd = files.stdin_fd, .seccomp_fd = files.seccomp_fd,
                                  .passwd_fd = files.passwd_fd, .group_fd = files.group_fd, .hosts_fd = files.hosts_fd,
                                  .code_fd = files.code_fd, .info_fd = info[1],
                                  /* With scopes, bwrap's pid 1 waits for the go (sandbox_scope_start()). */
                                  .start_now = c->limits != LIMITS_SYSTEMD_SCOPE,
                                  .exec_fd = c->exec_helper_fd, .request_fd = req[1], .ret_bind_fd = &bind_fd,
                          },
                          &(SandboxLimits) { .nofile = 4096 }, &keeper, &s->proc, &keeper_exit);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        s->bind_fd = bind_fd;
        s->request_fd = STEAL_FD(req[0]);
        s->info_fd = STEAL_FD(info[0]);
        /* bwrap's own stdout and stderr: nothing of a run goes there (the run's are the helper's);
         * stderr is read only if the sandbox fails while it waits. */
        s->proc.stdout_fd = safe_close(s->proc.stdout_fd);
        (void) fd_nonblock(s->proc.stderr_fd, 1);
        s->next = p->sandboxes;
        p->sandboxes = s;
        (void) fd_nonblock(s->info_fd, 1);
        (void) fd_nonblock(s->proc.report_fd, 1);
        r = sd_event_add_io(c->event, &s->info_source, s->info_fd, EPOLLIN, on_info, s);
        if (r >= 0)
                r = sd_event_add_io(c->event, &s->report_source, s->proc.report_fd, EPOLLIN, on_report, s);
        if (r >= 0)
                r = sd_event_add_io(c->event, &s->helper_source, s->request_fd, EPOLLIN, on_helper, s);
        if (r >= 0)
                r = sd_event_add_child_pidfd(c->event, &s->keeper_source, s->proc.keeper_pidfd, WEXITED,
                                             on_keeper_exit, s);
        if (r < 0) {
                sandbox_discard(s, NULL);
                return r;
        }
        (void) sd_event_source_set_description(s->keeper_source, "prebuilt-keeper");
        log_debug("Building a sandbox ahead of its run (%s), keeper %d.", shape_names[shape], (int) s->proc.keeper_pid);
        return 0;
}

static unsigned pool_count(PrebuiltPool *p, PrebuiltShape shape) {
        unsigned n = 0;

        for (PrebuiltSandbox *s = p->sandboxes; s; s = s->next)
                if (s->shape == shape)
                        n++;
        return n;
}

static unsigned pool_building(PrebuiltPool *p) {
        unsigned n = 0;

        for (PrebuiltSandbox *s = p->sandboxes; s; s = s->next)
                if (!sandbox_ready(s))
                        n++;
        return n;
}

/* How many sandboxes of @shape the pool is kept at. */
static unsigned shape_target(const PrebuiltPool *p, PrebuiltShape shape) {
        return MAX(p->ctx->prebuilt_max, p->target[shape]);
}

/* The ready sandboxes of @shape beyond its target (a burst's, gone back to Prebuilt=): discarded,
 * the oldest first (they are listed newest first). */
static void pool_trim(PrebuiltPool *p, PrebuiltShape shape) {
        unsigned keep = shape_target(p, shape), ready = 0;

        for (PrebuiltSandbox *s = p->sandboxes; s; s = s->next)
                if (s->shape == shape && sandbox_ready(s))
                        ready++;
        while (ready > keep) {
                PrebuiltSandbox *last = NULL;

                for (PrebuiltSandbox *s = p->sandboxes; s; s = s->next)
                        if (s->shape == shape && sandbox_ready(s))
                                last = s;
                sandbox_discard(last, NULL);
                ready--;
        }
}

/* Wake when the first grown target is due to go back, so that an idle daemon gives back what a
 * burst made it build (PrebuiltBurstKeepSec= after the burst). */
static void pool_arm_decay(PrebuiltPool *p) {
        uint64_t due = UINT64_MAX;

        for (PrebuiltShape shape = 0; shape < _PREBUILT_SHAPE_MAX; shape++)
                if (p->target[shape] > 0)
                        due = MIN(due, p->target_usec[shape] + p->ctx->prebuilt_burst_keep_usec + 1);
        if (due == UINT64_MAX)
                (void) sd_event_source_set_enabled(p->decay_timer, SD_EVENT_OFF);
        else if (sd_event_source_set_time(p->decay_timer, due) >= 0)
                (void) sd_event_source_set_enabled(p->decay_timer, SD_EVENT_ONESHOT);
}

/* In a quiet moment: the runs of each shape since its pool was last full (a burst, even one the
 * pool's refills split) set its target (PrebuiltBurst=); a full pool starts the count again. A
 * target that no burst as large renewed for PrebuiltBurstKeepSec= goes back to Prebuilt=, and
 * the ready sandboxes beyond it are discarded. */
static void pool_settle_demand(PrebuiltPool *p, uint64_t now) {
        unsigned cap = p->ctx->prebuilt_burst;

        for (PrebuiltShape shape = 0; shape < _PREBUILT_SHAPE_MAX; shape++) {
                unsigned d = MIN(p->demand[shape], cap), ready, building;

                if (d > shape_target(p, shape)) {
                        p->target[shape] = d;
                        p->target_usec[shape] = now;
                } else if (p->target[shape] > 0 && now > p->target_usec[shape] + p->ctx->prebuilt_burst_keep_usec) {
                        p->target[shape] = 0;   /* back to Prebuilt= */
                        pool_trim(p, shape);
                }
                prebuilt_counts(p->ctx, shape, &ready, &building);
                if (ready >= shape_target(p, shape)) {
                        if (p->demand[shape] >= shape_target(p, shape))
                                p->target_usec[shape] = now;   /* a burst as large as the pool: kept */
                        p->demand[shape] = 0;
                }
        }
        pool_arm_decay(p);
}

static int on_refill(sd_event_source *src, void *userdata) {
        PrebuiltPool *p = userdata;
        ExecutionContext *c = p->ctx;

        uint64_t now = now_usec(CLOCK_MONOTONIC);

        /* Not while runs go on (prebuilt_kick() once the last ends), not right after one started
         * (the quiet timer), and one build at a time (the next once it is ready or gone). */
        if (c->n_running > 0 || pool_building(p) > 0)
                return sd_event_source_set_enabled(src, SD_EVENT_OFF);
        if (now < p->last_run_usec + PREBUILT_QUIET_USEC) {
                (void) sd_event_source_set_enabled(src, SD_EVENT_OFF);
                if (sd_event_source_set_time(p->quiet_timer, p->last_run_usec + PREBUILT_QUIET_USEC) >= 0)
                        (void) sd_event_source_set_enabled(p->quiet_timer, SD_EVENT_ONESHOT);
                return 0;
        }

        pool_settle_demand(p, now);
        for (PrebuiltShape shape = 0; shape < _PREBUILT_SHAPE_MAX; shape++) {
                if (!p->wanted[shape] || pool_count(p, shape) >= shape_target(p, shape))
                        continue;
                if (p->failures >= PREBUILT_FAILURES_MAX)
                        break;
                if (sandbox_build(p, shape) < 0)
                        p->failures++;
                return 0;   /* one per dispatch; the source stays on while one is missing */
        }
        return sd_event_source_set_enabled(src, SD_EVENT_OFF);
}

static int on_quiet(sd_event_source *src, uint64_t usec, void *userdata) {
        pool_ask(userdata);
        return 0;
}

static PrebuiltPool *pool_get(ExecutionContext *c) {
        PrebuiltPool *p;

        if (c->prebuilt)
                return c->prebuilt;
        if (c->prebuilt_max == 0 || c->exec_helper_fd < 0)
                return NULL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->ctx = c;
        if (sd_event_add_defer(c->event, &p->refill, on_refill, p) < 0 ||
            sd_event_source_set_priority(p->refill, SD_EVENT_PRIORITY_IDLE) < 0 ||
            sd_event_source_set_enabled(p->refill, SD_EVENT_OFF) < 0 ||
            sd_event_add_time(c->event, &p->quiet_timer, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_quiet, p) < 0 ||
            sd_event_source_set_enabled(p->quiet_timer, SD_EVENT_OFF) < 0 ||
            sd_event_add_time(c->event, &p->decay_timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC, on_quiet, p) < 0 ||
            sd_event_source_set_enabled(p->decay_timer, SD_EVENT_OFF) < 0) {
                sd_event_source_disable_unref(p->refill);
                sd_event_source_disable_unref(p->quiet_timer);
                sd_event_source_disable_unref(p->decay_timer);
                free(p);
                return NULL;
        }
        (void) sd_event_source_set_description(p->refill, "prebuilt-refill");
        c->prebuilt = p;
        return p;
}


void prebuilt_kick(ExecutionContext *c) {
        if (c->prebuilt)
                pool_ask(c->prebuilt);
}

void prebuilt_want(ExecutionContext *c, PrebuiltShape shape) {
        PrebuiltPool *p = pool_get(c);

        if (!p || p->wanted[shape])
                return;
        p->wanted[shape] = true;
        pool_ask(p);
}

int prebuilt_take(ExecutionContext *c, PrebuiltShape shape, PrebuiltTaken *ret) {
        PrebuiltPool *p = pool_get(c);
        PrebuiltSandbox *s;

        if (!p)
                return -ENOENT;
        p->wanted[shape] = true;
        p->failures = 0;
        p->last_run_usec = now_usec(CLOCK_MONOTONIC);
        p->demand[shape]++;
        /* No build now: builds wait for a quiet moment (on_refill()). */
        /* The oldest ready one: the list is newest first. */
        PrebuiltSandbox *found = NULL;
        for (s = p->sandboxes; s; s = s->next)
                if (s->shape == shape && sandbox_ready(s) && !s->report_source)
                        found = s;
        if (!found) {
                pool_ask(p);   /* none ready: the cold path, and a build for the next run */
                return -ENOENT;
        }
        s = found;
        sandbox_unlink(s);
        s->keeper_source = sd_event_source_disable_unref(s->keeper_source);
        s->info_source = sd_event_source_disable_unref(s->info_source);
        s->proc.stderr_fd = safe_close(s->proc.stderr_fd);   /* bwrap's: the run gets its own */
        *ret = (PrebuiltTaken) {
                .proc = s->proc,
                .bind_fd = STEAL_FD(s->bind_fd),
                .request_fd = STEAL_FD(s->request_fd),
                .bwrap_pid = s->bwrap_pid,
                .init_pid = s->init_pid,
                .init_pidfd = STEAL_FD(s->init_pidfd),
                .cgroup = STEAL(s->cgroup),
                .scope = STEAL(s->scope),
        };
        s->proc = (SandboxProcess) { .keeper_pidfd = -EBADF, .control_fd = -EBADF, .report_fd = -EBADF,
                                     .stdout_fd = -EBADF, .stderr_fd = -EBADF };
        sandbox_free(s);
        return 0;
}

void prebuilt_taken_done(PrebuiltTaken *t) {
        sandbox_process_done(&t->proc);
        t->bind_fd = safe_close(t->bind_fd);
        t->request_fd = safe_close(t->request_fd);
        t->init_pidfd = safe_close(t->init_pidfd);
        t->cgroup = cgroup_free(t->cgroup);
        t->scope = scope_free(t->scope);
}

void prebuilt_drain(ExecutionContext *c) {
        PrebuiltPool *p = c->prebuilt;

        if (!p)
                return;
        while (p->sandboxes)
                sandbox_discard(p->sandboxes, NULL);
        for (PrebuiltShape shape = 0; shape < _PREBUILT_SHAPE_MAX; shape++)
                p->wanted[shape] = false;
        (void) sd_event_source_set_enabled(p->refill, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(p->quiet_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(p->decay_timer, SD_EVENT_OFF);
}

void prebuilt_pool_free(ExecutionContext *c) {
        PrebuiltPool *p = STEAL(c->prebuilt);

        if (!p)
                return;
        c->prebuilt = p;
        prebuilt_drain(c);
        c->prebuilt = NULL;
        sd_event_source_disable_unref(p->refill);
        sd_event_source_disable_unref(p->quiet_timer);
        sd_event_source_disable_unref(p->decay_timer);
        free(p);
}

unsigned prebuilt_target(ExecutionContext *c, PrebuiltShape shape) {
        return c->prebuilt ? shape_target(c->prebuilt, shape) : c->prebuilt_max;
}

bool prebuilt_wanted(ExecutionContext *c, PrebuiltShape shape) {
        return c->prebuilt && c->prebuilt->wanted[shape];
}

void prebuilt_counts(ExecutionContext *c, PrebuiltShape shape, unsigned *ret_ready, unsigned *ret_building) {
        unsigned ready = 0, building = 0;

        for (PrebuiltSandbox *s = c->prebuilt ? c->prebuilt->sandboxes : NULL; s; s = s->next)
                if (s->shape == shape) {
                        if (sandbox_ready(s) && !s->report_source)
                                ready++;
                        else
                                building++;
                }
        *ret_ready = ready;
        *ret_building = building;
}

/* "Pss: N kB" of /proc/@pid/smaps_rollup, in bytes; 0 if it cannot be read. */
static uint64_t pid_pss(pid_t pid) {
        char path[64], line[256];
        uint64_t kb = 0;
        FILE *f;

        (void) snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Pss: %" SCNu64 " kB", &kb) == 1)
                        break;
        (void) fclose(f);
        return kb * 1024;
}

/* The exec helper: the only child of bwrap's pid 1 while the sandbox waits. */
/* The first child of @parent other than @not (0: none). */
static pid_t child_pid(pid_t parent, pid_t not) {
        char path[64];
        int pid = 0;
        FILE *f;

        (void) snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) parent, (int) parent);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fscanf(f, "%d", &pid) == 1 && pid == (int) not)
                pid = 0;
        (void) fclose(f);
        return (pid_t) pid;
}

uint64_t prebuilt_idle_pss(ExecutionContext *c, PrebuiltShape shape) {
        uint64_t sum = 0;
        unsigned n = 0;

        for (PrebuiltSandbox *s = c->prebuilt ? c->prebuilt->sandboxes : NULL; s; s = s->next) {
                pid_t helper, binder;

                if (s->shape != shape || !sandbox_ready(s) || s->report_source)
                        continue;
                helper = child_pid(s->init_pid, 0);
                binder = child_pid(s->proc.keeper_pid, s->bwrap_pid);   /* the bind's, prepared */
                sum += pid_pss(s->proc.keeper_pid) + pid_pss(s->bwrap_pid) + pid_pss(s->init_pid) +
                       (helper > 0 ? pid_pss(helper) : 0) + (binder > 0 ? pid_pss(binder) : 0);
                /* a sample: /health may be asked often, and a pool grown by a burst is large */
                if (++n == PREBUILT_PSS_SAMPLE)
                        break;
        }
        return n > 0 ? sum / n : 0;
}
