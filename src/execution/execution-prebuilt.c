/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A run in a sandbox built ahead (prebuilt.h): the launch takes a ready sandbox of its shape
 * instead of building one, writes the run's limits to its cgroup, asks its keeper to bind the
 * workspace (and the code file) into it (KeeperBind, answered "B<errno>" on the report pipe), and
 * on that answer hands the exec helper the payload's argv, environment, directory, stdio and
 * rlimits (ExecRequest). From there on the run is watched and ended as a cold one. A workspace
 * that cannot be bound fails the run as a cold launch that cannot start does; the sandbox goes
 * with the run's keeper, never back to the pool.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "execution/execution-internal.h"
#include "execution/prebuilt.h"
#include "sandbox/scope.h"
#include "sandbox/sandbox-argv.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"

/* The shape a run would take from the pool, if it has one. */
static bool prebuilt_fits(const Execution *e, PrebuiltShape *ret) {
        const ExecutionContext *c = e->ctx;

        if (c->prebuilt_max == 0 || c->exec_helper_fd < 0 || !c->probe->proc_fresh || e->egress || e->env.hold ||
            e->devices.hold || e->devices.npu || e->devices.n_nodes > 0 || e->devices.n_binds > 0 || strv_length(e->extra) > 0 || e->detachable)
                return false;
        *ret = e->req->code ? PREBUILT_CODE : PREBUILT_SHELL;
        return true;
}

/* The request's strings in a sealed memfd: the directory, argv, the environment bwrap would make. */
static int request_strings(Execution *e) {
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *cwd = NULL, *buf = NULL, *pwd = NULL;
        size_t size = 0;
        char *p;
        int r;

        r = sandbox_env_list(&(SandboxSpec) { .env = e->req->env }, &env);
        if (r < 0)
                return r;
        if (asprintf(&cwd, SANDBOX_WORKSPACE "%s%s", isempty(e->req->cwd) ? "" : "/", e->req->cwd ?: "") < 0) {
                cwd = NULL;
                return -ENOMEM;
        }
        /* bwrap sets PWD after its --chdir, last. */
        if (asprintf(&pwd, "PWD=%s", cwd) < 0)
                pwd = NULL;
        if (!pwd || strv_extend(&env, pwd) < 0)
                return -ENOMEM;
        size = strlen(cwd) + 1;
        STRV_FOREACH(a, e->req->argv)
                size += strlen(*a) + 1;
        STRV_FOREACH(v, env)
                size += strlen(*v) + 1;
        if (size > EXEC_REQUEST_STRINGS_MAX)
                return -E2BIG;
        p = buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        p = stpcpy(p, cwd) + 1;
        STRV_FOREACH(a, e->req->argv)
                p = stpcpy(p, *a) + 1;
        STRV_FOREACH(v, env)
                p = stpcpy(p, *v) + 1;
        e->request_fds[3] = memfd_new_data("sandbox-request", buf, size);
        if (e->request_fds[3] < 0)
                return e->request_fds[3];
        e->request = (ExecRequest) {
                .magic = EXEC_REQUEST_MAGIC,
                .argc = (uint32_t) strv_length(e->req->argv),
                .envc = (uint32_t) strv_length(env),
                .strings_size = (uint32_t) size,
        };
        return 0;
}

/* The code, in a file of its own for the keeper to bind read-only (removed once bound). */
static int write_code_file(Execution *e) {
        _cleanup_close_ int fd = -EBADF;

        if (!e->req->code)
                return 0;
        if (asprintf(&e->code_file, "%s/prebuilt-%s.code", e->ctx->runtime_dir, e->id) < 0) {
                e->code_file = NULL;
                return -ENOMEM;
        }
        /* As bwrap's --ro-bind-data makes it: 0600, the sandbox's user's (ours, mapped). */
        fd = open(e->code_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                e->code_file = mfree(e->code_file);
                return negative_errno();
        }
        return loop_write(fd, e->req->code, e->req->code_size);
}

/* The bind for the keeper: the workspace by its path, checked against the directory we hold. */
static int send_bind(Execution *e) {
        _cleanup_free_ KeeperBind *b = calloc(1, sizeof(KeeperBind));
        struct stat st;
        int n;

        if (!b)
                return -ENOMEM;
        if (fstat(e->ws_fd, &st) < 0)
                return negative_errno();
        *b = (KeeperBind) {
                .magic = KEEPER_BIND_MAGIC, .init_pid = e->init_pid,
                .ws_dev = (uint64_t) st.st_dev, .ws_ino = (uint64_t) st.st_ino,
        };
        n = snprintf(b->ws_path, sizeof(b->ws_path), "%s/workspaces/%s", e->ctx->state_dir, e->req->workspace_id);
        if (n < 0 || (size_t) n >= sizeof(b->ws_path) ||
            (e->code_file && strlen(e->code_file) >= sizeof(b->code_path)))
                return -ENAMETOOLONG;
        if (e->code_file)
                strcpy(b->code_path, e->code_file);
        if (send(e->bind_fd, b, sizeof(*b), MSG_NOSIGNAL) != (ssize_t) sizeof(*b))
                return negative_errno();
        return 0;
}

static void on_scope_limits_set(Scope *scope, int error, const char *message, void *userdata) {
        Execution *e = userdata;
        int r;

        e->scope_limits_pending = false;
        if (e->phase == EXECUTION_DONE || e->kill_reason != EXECUTION_STATUS_RUNNING)
                return;
        if (error < 0) {
                execution_fail(e, error, "could not set the limits of the execution's scope %s: %s", e->unit,
                               message ?: strerror(-error));
                return;
        }
        r = send_bind(e);
        if (r < 0)
                execution_fail(e, r, "could not start the sandbox (%s): %s", e->ctx->bwrap, strerror(-r));
}

/* With scopes: the run's description on the scope, and its limits where they are not those it was
 * built with (a request that names none has those): then the bind waits for systemd's answer, so
 * that the payload never runs under other limits than its own. */
static int scope_limits_set(Execution *e) {
        _cleanup_free_ char *description = NULL;
        ScopeLimits want = execution_scope_limits(e);
        const ScopeLimits *have = scope_limits(e->scope);
        bool same = want.memory_max == have->memory_max && want.tasks_max == have->tasks_max &&
                    want.cpu_quota_percent == have->cpu_quota_percent;
        int r;

        if (asprintf(&description, "sandbox-runner execution %s (workspace %s, sandbox built ahead)", e->id,
                     e->req->workspace_id) < 0) {
                description = NULL;
                return -ENOMEM;
        }
        r = scope_set_properties(e->scope, same ? NULL : &want, description, same ? NULL : on_scope_limits_set, e);
        if (r >= 0 && !same)
                e->scope_limits_pending = true;
        return r;
}

int execution_launch_prebuilt(Execution *e, const SandboxLimits *limits) {
        ExecutionContext *c = e->ctx;
        PrebuiltTaken t;
        PrebuiltShape shape;
        int out[2], err[2], r;

        if (!prebuilt_fits(e, &shape))
                return 0;
        if (prebuilt_take(c, shape, &t) < 0)
                return 0;   /* none ready: cold, and the pool builds this shape from now on */
        e->prebuilt = true;
        e->early = false;
        e->proc = t.proc;
        e->bwrap_pid = t.bwrap_pid;
        e->init_pid = t.init_pid;
        e->init_pidfd = t.init_pidfd;
        e->bind_fd = t.bind_fd;
        e->request_fd = t.request_fd;
        e->cgroup = t.cgroup;
        e->scope = t.scope;
        if (e->scope) {
                e->unit = strdup(scope_name(e->scope));
                if (!e->unit)
                        return execution_fail(e, -ENOMEM, "out of memory");
                scope_set_userdata(e->scope, NULL, NULL);   /* started: not called again */
        }
        log_debug("Execution '%s' takes a sandbox built ahead (%s, keeper %d).", e->id,
                  prebuilt_shape_to_string(shape), (int) e->proc.keeper_pid);

        if (c->limits == LIMITS_CGROUP) {
                ScopeLimits want = execution_scope_limits(e);

                r = cgroup_set_limits(e->cgroup, &want);
                if (r < 0)
                        return execution_fail(e, r, "could not put the sandbox into its cgroup: %s", strerror(-r));
        }
        if (pipe2(out, O_CLOEXEC) < 0)
                return execution_fail(e, negative_errno(), "could not prepare the sandbox's files");
        e->proc.stdout_fd = out[0];
        e->request_fds[1] = out[1];
        if (pipe2(err, O_CLOEXEC) < 0)
                return execution_fail(e, negative_errno(), "could not prepare the sandbox's files");
        e->proc.stderr_fd = err[0];
        e->request_fds[2] = err[1];
        e->request_fds[0] = e->req->stdin_data ?
                memfd_new_data("sandbox-stdin", e->req->stdin_data, e->req->stdin_size) :
                open("/dev/null", O_RDONLY | O_CLOEXEC);
        r = e->request_fds[0] < 0 ? -ENOMEM : request_strings(e);
        if (r < 0)
                return execution_fail(e, r, "could not prepare the sandbox's files");
        e->request.fsize = limits->fsize;
        e->request.as = limits->as;
        e->request.nofile = limits->nofile;
        e->request.nproc = limits->nproc;
        r = write_code_file(e);
        if (r < 0)
                return execution_fail(e, r, "could not prepare the sandbox's files: the code: %s", strerror(-r));
        if (e->scope) {
                r = scope_limits_set(e);
                if (r < 0)
                        return execution_fail(e, r, "could not set the limits of the execution's scope %s: %s",
                                              e->unit, strerror(-r));
        }
        if (!e->scope_limits_pending) {
                r = send_bind(e);
                if (r < 0)
                        return execution_fail(e, r, "could not start the sandbox (%s): %s", c->bwrap, strerror(-r));
        }
        r = execution_launch_watch(e, -EBADF);
        return r < 0 ? r : 1;
}

/* The keeper's "B<errno>": the workspace is in the sandbox (or not: the run fails). */
void execution_prebuilt_bound(Execution *e, int error) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * EXEC_REQUEST_FDS)];
        } control = {};
        struct iovec iov = { .iov_base = &e->request, .iov_len = sizeof(e->request) };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control),
        };
        struct cmsghdr *cm;

        if (!e->prebuilt || e->request_fd < 0 || e->phase == EXECUTION_DONE)
                return;
        if (e->code_file) {
                (void) unlink(e->code_file);   /* bound (or never to be): the mount keeps it */
                e->code_file = mfree(e->code_file);
        }
        if (e->kill_reason != EXECUTION_STATUS_RUNNING) {
                /* Stopped before its start (a cancel, a timeout): the keeper was told 'K', the helper
                 * is gone or going; the run ends with that reason, not as a failed start. */
                execution_prebuilt_done(e);
                return;
        }
        if (error != 0) {
                execution_fail(e, -error, "could not start the sandbox: its workspace could not be bound: %s",
                               strerror(error));
                return;
        }
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * EXEC_REQUEST_FDS);
        memcpy(CMSG_DATA(cm), e->request_fds, sizeof(int) * EXEC_REQUEST_FDS);
        if (sendmsg(e->request_fd, &msg, MSG_NOSIGNAL) != (ssize_t) sizeof(e->request)) {
                execution_fail(e, negative_errno(), "could not start the sandbox: its exec helper is gone");
                return;
        }
        /* The payload has its ends; ours would keep its stdout open past its exit. */
        for (int i = 0; i < EXEC_REQUEST_FDS; i++)
                e->request_fds[i] = safe_close(e->request_fds[i]);
        e->request_fd = safe_close(e->request_fd);
        e->bind_fd = safe_close(e->bind_fd);
        if (e->phase < EXECUTION_RUNNING)
                e->phase = EXECUTION_RUNNING;
        execution_log_started(e);
}

void execution_prebuilt_done(Execution *e) {
        if (e->scope_limits_pending) {
                scope_set_properties_cancel(e->scope);
                e->scope_limits_pending = false;
        }
        for (int i = 0; i < EXEC_REQUEST_FDS; i++)
                e->request_fds[i] = safe_close(e->request_fds[i]);
        e->request_fd = safe_close(e->request_fd);
        e->bind_fd = safe_close(e->bind_fd);
        if (e->code_file) {
                (void) unlink(e->code_file);
                e->code_file = mfree(e->code_file);
        }
}
