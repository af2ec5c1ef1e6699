/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The start of an execution: its logs and first record (managed runs), its egress epoch, the
 * workspace lease (polled while another writer holds it), then the launch: the seccomp program and
 * memfds, bwrap's command line, a keeper from the pool (or a new one) given its job, the daemon's
 * cgroup or the scope around it ('G' once the scope holds the sandbox), and the watches on what
 * follows (--info-fd, output, reports, the keeper's exit, the timeout, the workspace's quota).
 * Every failure goes through execution_fail() and comes back as its -errno.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress/egress-epochs.h"
#include "execution/execution-internal.h"
#include "execution/execution.h"
#include "execution/keeper-pool.h"
#include "sandbox/sandbox-argv.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/strv.h"
#include "workspace/cas/cas.h"
#include "workspace/quota.h"
#include "workspace/workspace.h"

#define LEASE_RETRY_USEC (50 * USEC_PER_MSEC)

/* With a scope: the scope holds the sandbox, 'G' lets bwrap go on. */
static void go(Execution *e) {
        char g = 'G';

        if (write(e->proc.control_fd, &g, 1) != 1) {
                execution_fail(e, negative_errno(), "the sandbox keeper went away before start");
                return;
        }
        if (e->early) {
                /* bwrap was waiting for its seccomp program: the payload starts now. */
                if (e->phase < EXECUTION_RUNNING)   /* not if it is finishing already */
                        e->phase = EXECUTION_RUNNING;
                execution_log_started(e);
        }
        keeper_pool_refill(e->ctx->keeper_pool);   /* the loop now waits for the run */
}

static void on_scope_started(Scope *s, int error, const char *message, void *userdata) {
        Execution *e = userdata;

        if (error < 0) {
                execution_fail(e, error, "could not create the execution's scope: %s", message ?: "unknown error");
                return;
        }
        if (e->kill_reason != EXECUTION_STATUS_RUNNING)
                return;   /* 'K' was sent already; the keeper exits */
        go(e);
}

#define QUOTA_TICK_USEC (100 * USEC_PER_MSEC)

bool execution_quota_exceeded(Execution *e, uint64_t bytes) {
        e->workspace_bytes = bytes;
        e->have_workspace_bytes = true;
        if (bytes <= e->workspace_limit)
                return false;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_QUOTA_EXCEEDED,
                   "SANDBOX_EXECUTION_ID=%s", e->id,
                   "SANDBOX_WORKSPACE=%s", e->req->workspace_id,
                   "SANDBOX_WORKSPACE_BYTES=%" PRIu64, bytes,
                   "SANDBOX_WORKSPACE_LIMIT=%" PRIu64, e->workspace_limit,
                   "MESSAGE=Workspace '%s' reached %" PRIu64 " bytes (limit %" PRIu64 "); stopping execution '%s'.",
                   e->req->workspace_id, bytes, e->workspace_limit, e->id);
        return true;
}

static uint64_t smaller_limit(uint64_t limit, uint64_t cap) {
        return cap > 0 && (limit == 0 || cap < limit) ? cap : limit;
}

void execution_cap_limits(Execution *e, uint64_t workspace_bytes, uint64_t output_bytes) {
        e->workspace_limit = smaller_limit(e->workspace_limit, workspace_bytes);
        e->output_limit = smaller_limit(e->output_limit, output_bytes);
}

int execution_cap_retention(Execution *e, uint64_t bytes) {
        OutputBuffer *out = NULL, *err = NULL;

        if (output_buffer_new(bytes, &out) < 0 || output_buffer_new(bytes, &err) < 0) {
                output_buffer_free(out);
                return -ENOMEM;
        }
        output_buffer_free(e->out);
        output_buffer_free(e->err);
        e->out = out;
        e->err = err;
        return 0;
}

static int on_quota_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;
        uint64_t bytes;
        int r;

        r = quota_watch_tick(e->quota, &bytes);
        if (r < 0) {
                /* Fail closed: a workspace we cannot measure (a sandbox hid part of it) is
                 * treated as over its quota. */
                log_warning_errno(r, "Cannot measure workspace '%s' of execution '%s', stopping it: %m",
                                  e->req->workspace_id, e->id);
                e->quota_source = sd_event_source_disable_unref(e->quota_source);
                execution_kill(e, EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED);
                return 0;
        } else {
                if (execution_quota_exceeded(e, bytes)) {
                        e->quota_source = sd_event_source_disable_unref(e->quota_source);
                        execution_kill(e, EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED);
                        return 0;
                }
        }
        r = sd_event_source_set_time_relative(s, QUOTA_TICK_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* Before the run: measure the workspace and keep watching it while the run goes on. */
static int execution_quota_begin(Execution *e) {
        uint64_t bytes;
        int r;

        if (e->workspace_limit == 0)
                return 0;
        e->quota = quota_cache_take(&e->ctx->quota_cache, e->req->workspace_id, e->ws_fd);
        if (!e->quota) {
                r = quota_watch_new(e->ws_fd, &e->quota);
                if (r < 0)
                        return r;
        }
        r = quota_watch_tick(e->quota, &bytes);
        if (r < 0)
                return r;
        e->workspace_bytes = bytes;
        e->have_workspace_bytes = true;
        if (bytes > e->workspace_limit)
                return -EDQUOT;
        return sd_event_add_time_relative(e->ctx->event, &e->quota_source, CLOCK_MONOTONIC, QUOTA_TICK_USEC,
                                          USEC_PER_MSEC, on_quota_tick, e);
}

ScopeLimits execution_scope_limits(const Execution *e) {
        return (ScopeLimits) {
                .memory_max = e->req->memory_max,
                .tasks_max = e->req->tasks_max > 0 ? e->req->tasks_max + TASKS_OVERHEAD : 0,
                .cpu_quota_percent = e->req->cpu_quota_percent,
        };
}

/* The run's limits on the daemon's own cgroup: the keeper's, or a new one it is moved into. */
static int execution_cgroup_setup(Execution *e, pid_t keeper_pid) {
        ScopeLimits limits = execution_scope_limits(e);
        int r;

        if (e->cgroup)
                return cgroup_set_limits(e->cgroup, &limits);
        r = cgroup_new(e->ctx->cgroups, e->id, &limits, &e->cgroup);
        if (r >= 0)
                r = cgroup_attach(e->cgroup, keeper_pid);
        return r;
}

/* The keeper pool's attach hook: a fresh cgroup for a keeper started ahead, while idle. */
void *execution_keeper_attach(pid_t pid, void *userdata) {
        CgroupRoot *root = userdata;
        Cgroup *cg = NULL;
        char name[32];

        /* x-<daemon pid>-k<keeper pid>: whose it is, with other root daemons beside us. */
        (void) snprintf(name, sizeof(name), "%d-k%d", (int) getpid(), (int) pid);
        if (cgroup_new(root, name, NULL, &cg) < 0 || cgroup_attach(cg, pid) < 0) {
                log_debug("Cannot move keeper %d into a cgroup ahead of its run; its run will.", (int) pid);
                return cgroup_free(cg);
        }
        return cg;
}

void execution_keeper_detach(void *attached, void *userdata) {
        cgroup_free(attached);
}

/* Early start: keeper, bwrap and the sandbox's pid 1 into the scope, all in one job. */
void execution_scope_start(Execution *e) {
        ExecutionContext *c = e->ctx;
        _cleanup_free_ char *description = NULL;
        ScopeLimits limits = execution_scope_limits(e);
        int r;

        if (!e->early || e->scope || e->bwrap_pid <= 0 || e->init_pid <= 0 ||
            e->kill_reason != EXECUTION_STATUS_RUNNING || e->phase == EXECUTION_DONE)
                return;
        if (asprintf(&e->unit, SCOPE_PREFIX "%s.scope", e->id) < 0 ||
            asprintf(&description, "sandbox-runner execution %s (workspace %s)", e->id, e->req->workspace_id) < 0) {
                execution_fail(e, -ENOMEM, "out of memory");
                return;
        }
        r = scope_start_pids(c->scopes, e->unit, (pid_t[]) { e->proc.keeper_pid, e->bwrap_pid, e->init_pid }, 3,
                             &limits, description, on_scope_started, e, &e->scope);
        if (r < 0)
                execution_fail(e, r, "could not ask systemd for the scope %s: %s", e->unit, strerror(-r));
}

/* bwrap's --info-fd: {"child-pid": N} (N = the sandbox's pid 1, as we see it), then EOF. */
static int on_info(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v;
        ssize_t n;
        int64_t pid;

        n = read(fd, e->info_buf + e->info_len, sizeof(e->info_buf) - 1 - e->info_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0) {
                e->info_len += (size_t) n;
                if (e->info_len < sizeof(e->info_buf) - 1)
                        return 0;
        }
        /* EOF (or more than it ever writes): the whole text is there. */
        e->info_source = sd_event_source_disable_unref(e->info_source);
        e->info_fd = safe_close(e->info_fd);
        if (n < 0 || e->info_len == 0)
                return 0;   /* bwrap failed before it cloned: its exit report follows */
        e->info_buf[e->info_len] = '\0';
        o = json_tokener_parse(e->info_buf);
        if (!o || !json_object_object_get_ex(o, "child-pid", &v) || !json_object_is_type(v, json_type_int) ||
            (pid = json_object_get_int64(v)) <= 1 || pid > INT32_MAX) {
                execution_fail(e, -EPROTO, "bwrap's --info-fd output is not the expected {\"child-pid\": N}");
                return 0;
        }
        e->init_pid = (pid_t) pid;
        e->init_pidfd = sandbox_pidfd_of_child(e->init_pid, e->proc.keeper_pid);
        execution_scope_start(e);
        return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;

        e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
        execution_kill(e, EXECUTION_STATUS_TIMEOUT);
        return 0;
}

/* The files and command line of one launch, closed when it is done (the keeper has its copies). */
typedef struct LaunchFiles {
        SandboxFiles files;
        int info_r, info_w;               /* bwrap's --info-fd */
        char **argv;
} LaunchFiles;

#define LAUNCH_FILES_NULL ((LaunchFiles) { .files = SANDBOX_FILES_NULL, .info_r = -EBADF, .info_w = -EBADF })

static void launch_files_done(LaunchFiles *f) {
        sandbox_files_done(&f->files);
        safe_close(f->info_r);
        safe_close(f->info_w);
        strv_free(f->argv);
}

/* The seccomp program and the memfds the sandbox gets: /etc files, the code, stdin. */
static int launch_prepare_files(Execution *e, LaunchFiles *f) {
        _cleanup_free_ char *seccomp_error = NULL;
        int r;

        r = seccomp_program_for_variant(e->devices.npu ? SECCOMP_VARIANT_NPU :
                                        e->egress ? SECCOMP_VARIANT_NETWORK : SECCOMP_VARIANT_BASELINE,
                                        &f->files.seccomp_fd, &seccomp_error);
        if (r < 0)
                return execution_fail(e, r, "could not build the seccomp filter: %s", seccomp_error ?: strerror(-r));
        r = sandbox_files_make_etc(&f->files);
        if (e->req->code)
                f->files.code_fd = memfd_new_data("sandbox-code", e->req->code, e->req->code_size);
        f->files.stdin_fd = e->req->stdin_data ?
                memfd_new_data("sandbox-stdin", e->req->stdin_data, e->req->stdin_size) :
                open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (r < 0 || f->files.stdin_fd < 0 || (e->req->code && f->files.code_fd < 0))
                return execution_fail(e, -ENOMEM, "could not prepare the sandbox's files");
        return 0;
}

static int add_extra(Execution *e, const char *kind, const char *source, const char *dest) {
        if (strv_extend(&e->extra, kind) < 0 || strv_extend(&e->extra, source) < 0 ||
            strv_extend(&e->extra, dest) < 0)
                return -ENOMEM;
        return 0;
}

int execution_add_bind(Execution *e, const char *source, const char *dest, bool writable) {
        return add_extra(e, writable ? "rw" : "ro", source, dest);
}

int execution_add_symlink(Execution *e, const char *target, const char *dest) {
        return add_extra(e, "ln", target, dest);
}

/* bwrap's command line and the --info-fd pipe. */
static int launch_prepare_argv(Execution *e, LaunchFiles *f) {
        ExecutionContext *c = e->ctx;
        _cleanup_free_ char *workspace_path = NULL;
        size_t n_extra = strv_length(e->extra) / 3, n_binds = 0, n_links = 0;
        _cleanup_free_ SandboxBind *binds = calloc(n_extra + 1, sizeof(SandboxBind));
        _cleanup_free_ SandboxSymlink *links = calloc(n_extra + 1, sizeof(SandboxSymlink));
        SandboxSpec spec;
        int info[2], r;

        if (!binds || !links || asprintf(&workspace_path, "%s/workspaces/%s", c->state_dir, e->req->workspace_id) < 0)
                return execution_fail(e, -ENOMEM, "out of memory");
        if (e->env.hold && e->env.r)
                binds[n_binds++] = (SandboxBind) { .source = "/etc/R", .dest = "/etc/R" };
        for (size_t i = 0; i < n_extra; i++) {
                char **x = e->extra + 3 * i;

                if (streq(x[0], "ln"))
                        links[n_links++] = (SandboxSymlink) { .target = x[1], .dest = x[2] };
                else
                        binds[n_binds++] = (SandboxBind) { .source = x[1], .dest = x[2], .writable = streq(x[0], "rw") };
        }
        spec = (SandboxSpec) {
                .workspace = workspace_path,
                .cwd = e->req->cwd,
                .argv = e->req->argv,
                .env = e->req->env,
                .tmp_size = c->tmp_size,
                .seccomp_fd = SANDBOX_FD_SECCOMP,
                .passwd_fd = SANDBOX_FD_PASSWD,
                .group_fd = SANDBOX_FD_GROUP,
                .hosts_fd = SANDBOX_FD_HOSTS,
                .code_fd = e->req->code ? SANDBOX_FD_CODE : -1,
                .info_fd = SANDBOX_FD_INFO,
                .egress_socket = e->egress ? egress_epoch_socket(e->egress) : NULL,
                .bridge = e->egress ? egress_bridge_path(c->egress) : NULL,
                .env_prefix = e->env.hold ? e->env.prefix : NULL,
                .hide_file = e->env.hold ? e->env.hide_file : NULL,
                .binds = binds,
                .n_binds = n_binds,
                .symlinks = links,
                .n_symlinks = n_links,
                .npu = e->devices.npu,
                .devices = e->devices.nodes,
                .n_devices = e->devices.n_nodes,
                .device_binds = e->devices.binds,
                .n_device_binds = e->devices.n_binds,
                .device_env = e->devices.env,
        };
        r = sandbox_argv_build(&spec, c->probe, &f->argv);
        if (r < 0)
                return execution_fail(e, r, "could not build the sandbox command line");
        if (pipe2(info, O_CLOEXEC) < 0)
                return execution_fail(e, negative_errno(), "could not prepare the sandbox's files");
        f->info_r = info[0];
        f->info_w = info[1];
        return 0;
}

/* A keeper (from the pool, or started now) gets its job: bwrap with @fds, under @limits. */
static int launch_spawn(Execution *e, char **argv, const SandboxFds *fds, const SandboxLimits *limits) {
        ExecutionContext *c = e->ctx;
        siginfo_t keeper_exit = {};
        int r;

        for (unsigned attempt = 0;; attempt++) {
                SandboxKeeper keeper = SANDBOX_KEEPER_NULL;
                void *attached = NULL;

                r = c->keeper_pool ? keeper_pool_take_attached(c->keeper_pool, &keeper, &attached) :
                                     sandbox_keeper_start(c->keeper_path, &keeper);
                /* With the daemon's own cgroups the keeper is in one before it has its job, so
                 * that bwrap and all under it start there: a pooled keeper was moved into a
                 * fresh one ahead (execution_keeper_attach()), only the limits are written now. */
                if (r >= 0 && c->limits == LIMITS_CGROUP) {
                        e->cgroup = cgroup_free(e->cgroup);
                        e->cgroup = attached;
                        r = execution_cgroup_setup(e, keeper.pid);
                        if (r < 0) {
                                sandbox_keeper_stop(&keeper);
                                return execution_fail(e, r, "could not put the sandbox into its cgroup: %s",
                                                      strerror(-r));
                        }
                }
                if (r >= 0)
                        r = sandbox_spawn(c->bwrap, argv, fds, limits, &keeper, &e->proc, &keeper_exit);
                /* A keeper that died between our look and the job: once more, with a new one. */
                if (attempt > 0 || r != -ECHILD)
                        break;
                log_debug("Execution '%s': its keeper exited before it took its job (code %d, status %d); "
                          "trying another.", e->id, keeper_exit.si_code, keeper_exit.si_status);
        }
        if (r == -ECHILD)
                return execution_fail_keeper_gone(e, &keeper_exit);
        if (r < 0)
                return execution_fail(e, r, "could not start the sandbox (%s): %s", c->bwrap, strerror(-r));
        return 0;
}

int execution_launch_watch(Execution *e, int info_fd) {
        ExecutionContext *c = e->ctx;
        int r;

        e->info_fd = info_fd;
        if (e->info_fd >= 0) {
                (void) fd_nonblock(e->info_fd, 1);
                r = sd_event_add_io(c->event, &e->info_source, e->info_fd, EPOLLIN, on_info, e);
                if (r < 0)
                        return execution_fail(e, r, "could not watch the sandbox: %s", strerror(-r));
        }
        e->start_usec = now_usec(CLOCK_MONOTONIC);
        e->phase = EXECUTION_LAUNCHING;
        if (!e->early && !e->prebuilt)
                /* Nothing to wait for but the run: its keeper's replacement, once idle. (With a
                 * scope: after the go, go()). */
                keeper_pool_refill(c->keeper_pool);

        r = sandbox_process_watch(&e->proc, c->event, execution_on_output, execution_on_output, execution_on_report, e,
                                  &e->stdout_source, &e->stderr_source, &e->report_source);
        if (r >= 0)
                r = sd_event_add_child_pidfd(c->event, &e->keeper_source, e->proc.keeper_pidfd, WEXITED,
                                             execution_on_keeper_exit, e);
        if (r >= 0)
                r = sd_event_add_time_relative(c->event, &e->timeout_source, CLOCK_MONOTONIC,
                                               e->req->timeout_usec, USEC_PER_MSEC, on_timeout, e);
        if (r < 0)
                return execution_fail(e, r, "could not watch the sandbox: %s", strerror(-r));
        (void) sd_event_source_set_description(e->keeper_source, "execution-keeper");

        /* Without a scope the keeper started bwrap at once; with one, the scope starts once bwrap
         * told us its pid and its pid 1's (execution_scope_start()), and 'G' follows. */

        /* The final record's file, now that the sandbox runs (on a busy file system, creating a
         * file can take a millisecond, which would otherwise come after the run). */
        if (c->records_fd >= 0 && e->phase != EXECUTION_DONE)
                e->record_fd = record_prepare(c->records_fd, e->id);
        /* Likewise the snapshot ref's file. */
        if (c->cas && e->phase != EXECUTION_DONE)
                e->ref_fd = cas_ref_prepare(c->cas, e->req->workspace_id, e->id);
        return 0;
}

int execution_launch(Execution *e) {
        ExecutionContext *c = e->ctx;
        _cleanup_(launch_files_done) LaunchFiles f = LAUNCH_FILES_NULL;
        SandboxFds fds;
        SandboxLimits limits;
        int r;

        /* With a scope: start bwrap at once and make the scope meanwhile (sandbox_spawn()). */
        e->early = c->limits == LIMITS_SYSTEMD_SCOPE;
        limits = (SandboxLimits) {
                .fsize = e->workspace_limit > 0 ? e->workspace_limit + 1 : 0,
                .nofile = 4096,
                /* Without a scope or a cgroup, the address-space limit is the only memory bound we
                 * have, and RLIMIT_NPROC the only tasks bound (over every process of our uid). */
                .as = c->limits == LIMITS_RLIMIT ? e->req->memory_max : 0,
                .nproc = c->limits == LIMITS_RLIMIT && e->req->tasks_max > 0 ? e->req->tasks_max + TASKS_OVERHEAD : 0,
        };
        r = execution_quota_begin(e);
        if (r < 0 && r != -ENOMEM)
                r = -EDQUOT;   /* fail closed, as during the run */
        if (r == -EDQUOT) {
                /* Over the limit before anything ran: the run does not start. */
                e->kill_reason = EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED;
                e->phase = EXECUTION_RUNNING;
                execution_advance(e);
                return 0;
        }
        if (r < 0)
                return execution_fail(e, r, "could not measure workspace '%s': %s", e->req->workspace_id,
                                      strerror(-r));
        if (!isempty(e->req->cwd)) {
                /* The working directory must exist in the workspace (bwrap would fail obscurely). */
                struct stat st;
                if (fstatat(e->ws_fd, e->req->cwd, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        return execution_fail(e, -ENOENT, "cwd '%s' is not a directory in the workspace",
                                              e->req->cwd);
        }

        /* A sandbox of this shape built ahead, if there is one ready (prebuilt.h). */
        r = execution_launch_prebuilt(e, &limits);
        if (r != 0)
                return r < 0 ? r : 0;

        r = launch_prepare_files(e, &f);
        if (r < 0)
                return r;
        r = launch_prepare_argv(e, &f);
        if (r < 0)
                return r;
        fds = (SandboxFds) {
                .stdin_fd = f.files.stdin_fd, .seccomp_fd = f.files.seccomp_fd, .passwd_fd = f.files.passwd_fd,
                .group_fd = f.files.group_fd, .hosts_fd = f.files.hosts_fd,
                .code_fd = e->req->code ? f.files.code_fd : -1,
                .info_fd = f.info_w,
                .start_now = !e->early,
                /* Only a scope outlives the daemon (its own cgroups and rlimits do not). */
                .detachable = e->detachable && c->limits == LIMITS_SYSTEMD_SCOPE,
        };
        r = launch_spawn(e, f.argv, &fds, &limits);
        if (r < 0)
                return r;
        f.info_w = safe_close(f.info_w);
        return execution_launch_watch(e, STEAL_FD(f.info_r));
}

/*
 * The workspace lease. Return: 1 when it is ours, 0 while another writer holds it (or the
 * directory was swapped by a restore meanwhile: the next try takes the new one), or the run's
 * failure (-errno, the run failed: execution_fail()).
 */
static int execution_try_lease(Execution *e) {
        struct stat a, b;
        int fd;

        fd = workspace_lease_try(e->ws_fd);
        if (fd == -EWOULDBLOCK)
                return 0;
        /* A restore swaps the workspace directory for a new one: the lease must be on the
         * directory that the name refers to now, else take it again on that one. */
        if (fd >= 0 && fstat(e->ws_fd, &a) >= 0 &&
            (fstatat(e->ctx->workspaces_fd, e->req->workspace_id, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
             a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
                safe_close(fd);
                e->ws_fd = safe_close(e->ws_fd);
                e->ws_fd = workspace_open(e->ctx->workspaces_fd, e->req->workspace_id);
                if (e->ws_fd < 0)
                        return execution_fail(e, e->ws_fd, "could not open workspace '%s': %s", e->req->workspace_id,
                                              strerror(-e->ws_fd));
                return 0;   /* retried by the lease timer */
        }
        if (fd < 0)
                return execution_fail(e, fd, "could not take the lease of workspace '%s': %s", e->req->workspace_id,
                                      strerror(-fd));
        e->lease_fd = fd;
        e->lease_source = sd_event_source_disable_unref(e->lease_source);
        return 1;
}

static int on_lease_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Execution *e = userdata;
        int r;

        r = execution_try_lease(e);
        if (r == 0)
                return sd_event_source_set_time_relative(s, LEASE_RETRY_USEC) >= 0 ?
                        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) : 0;
        if (r > 0)
                /* A failure is the run's (execution_fail() recorded it, its answer and journal
                 * entry say it): nothing is left to do with it here. */
                (void) execution_launch(e);
        return 0;
}

int execution_start(Execution *e, ExecutionDoneFn done, void *userdata) {
        ExecutionContext *c = e->ctx;
        int r;

        e->done = done;
        e->userdata = userdata;
        e->busy_ref = true;
        c->n_running++;
        c->n_total++;
        c->busy_ref(c->userdata);

        if (e->managed && c->records_fd >= 0) {
                /* Logs exist from the start (empty while the run waits for the lease), and the
                 * record is durable before the run: a daemon that dies leaves a record that the
                 * next start marks 'interrupted'. */
                for (int s = 0; s < _RECORD_STREAM_MAX; s++) {
                        e->log_fds[s] = record_log_create(c->records_fd, e->id, (RecordStream) s);
                        if (e->log_fds[s] < 0)
                                return execution_fail(e, e->log_fds[s], "could not create the execution's logs");
                }
                execution_write_record(e);
        }

        /* The permission epoch: the network policy in force now, kept for the whole run. A run
         * with chips gets none: no bridge, its network namespace stays empty (DESIGN.md §9). */
        if (e->devices.npu) {
                /* Not even a policy of its own: its namespace stays empty. */
                egress_epoch_release(e->egress);
                e->egress = NULL;
        } else if (e->egress_fixed) {
                if (e->egress) {
                        e->network = strdup(egress_epoch_revision(e->egress));
                        e->network_open = egress_epoch_open(e->egress);
                }
        } else {
                const char *reason = NULL;
                int k = egress_epoch_acquire(c->egress, &e->egress, &reason);
                if (k < 0)
                        return execution_fail(e, k, "egress is configured but cannot work: %s",
                                              reason ?: strerror(-k));
                if (e->egress) {
                        e->network = strdup(egress_epoch_revision(e->egress));
                        e->network_open = egress_epoch_open(e->egress);
                }
        }

        e->ws_fd = workspace_open(c->workspaces_fd, e->req->workspace_id);
        if (e->ws_fd < 0)
                return execution_fail(e, e->ws_fd, "could not open workspace '%s': %s", e->req->workspace_id,
                                      strerror(-e->ws_fd));

        r = execution_try_lease(e);
        if (r < 0)
                return r;
        if (r == 0) {
                /* Another writer holds it (here or in another process): poll until it is ours. */
                e->phase = EXECUTION_LEASE_WAIT;
                r = sd_event_add_time_relative(c->event, &e->lease_source, CLOCK_MONOTONIC, LEASE_RETRY_USEC,
                                               USEC_PER_MSEC, on_lease_retry, e);
                if (r < 0)
                        return execution_fail(e, r, "could not wait for the workspace lease");
                return 0;
        }
        return execution_launch(e);
}
