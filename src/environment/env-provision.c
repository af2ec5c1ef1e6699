/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One provisioning step in a sandbox (env-provision.h): the launch (the execution's fd layout, a
 * keeper started for it, bwrap at once), the provisioner's stdout as JSON lines, the tail of its
 * stderr, the keeper's reports, a timeout and a kill.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "environment/env-provision.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"

#define LINE_MAX_BYTES (64U * 1024U)          /* one stdout line (a result lists every package) */
#define STDOUT_MAX_BYTES (4U * 1024U * 1024U)  /* all of stdout: more is a broken provisioner */
#define STDERR_TAIL 2048U

struct EnvProvision {
        sd_event *event;
        SandboxProcess proc;
        sd_event_source *stdout_source, *stderr_source, *report_source, *timer_source;
        EnvProvisionProgressFn progress;
        EnvProvisionDoneFn done;
        void *userdata;

        char *line;                      /* stdout, up to its next newline */
        size_t line_len;
        size_t stdout_total;
        json_object *result;
        char stderr_tail[STDERR_TAIL + 1];
        size_t stderr_len;
        char report_buf[64];
        size_t report_len;

        int wait_status;
        bool exited, stdout_eof, stderr_eof, finished;
        int error;                       /* a failure seen before the end (kill, timeout, bad output) */
        char *error_message;
};

static void set_error(EnvProvision *p, int error, const char *fmt, ...) _printf_(3, 4);
static void set_error(EnvProvision *p, int error, const char *fmt, ...) {
        va_list ap;

        if (p->error < 0)
                return;   /* the first reason stands */
        p->error = error;
        va_start(ap, fmt);
        if (vasprintf(&p->error_message, fmt, ap) < 0)
                p->error_message = NULL;
        va_end(ap);
}

static void send_kill(EnvProvision *p) {
        char k = 'K';

        if (p->proc.control_fd < 0)
                return;
        /* As execution_kill() does: a keeper that cannot be told (EPIPE: it is gone already) is
         * killed outright, so a stuck provisioner does not outlive its timeout. */
        if (write(p->proc.control_fd, &k, 1) != 1 && p->proc.keeper_pid > 0)
                (void) kill(p->proc.keeper_pid, SIGKILL);
}

void env_provision_kill(EnvProvision *p, const char *why) {
        if (!p || p->finished)
                return;
        set_error(p, -ECANCELED, "%s", why ?: "stopped");
        send_kill(p);
}

/* The last non-empty line of stderr, for the error message. */
static const char *stderr_last_line(EnvProvision *p) {
        char *s = p->stderr_tail, *e;

        s[p->stderr_len] = '\0';
        e = s + p->stderr_len;
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
                *--e = '\0';
        for (char *c = e; c > s; c--)
                if (c[-1] == '\n')
                        return c;
        return s;
}

static void maybe_finish(EnvProvision *p) {
        _cleanup_free_ char *message = NULL;
        int error = 0;

        if (p->finished || !p->exited || !p->stdout_eof || !p->stderr_eof)
                return;
        p->finished = true;
        p->timer_source = sd_event_source_disable_unref(p->timer_source);

        if (p->error < 0) {
                error = p->error;
                message = strdup(p->error_message ?: "the provisioning step failed");
        } else if (!WIFEXITED(p->wait_status) || WEXITSTATUS(p->wait_status) != 0) {
                const char *last = stderr_last_line(p);
                int k;

                error = -EPROTO;
                /* bwrap's pid 1 reports a killed payload as 128 + the signal. */
                if (WIFEXITED(p->wait_status) && WEXITSTATUS(p->wait_status) > 128 &&
                    WEXITSTATUS(p->wait_status) < 128 + 65)
                        k = asprintf(&message, "the provisioner was killed by signal %d%s%s",
                                     WEXITSTATUS(p->wait_status) - 128, *last ? ": " : "", last);
                else if (WIFSIGNALED(p->wait_status))
                        k = asprintf(&message, "the provisioner was killed by signal %d%s%s",
                                     WTERMSIG(p->wait_status), *last ? ": " : "", last);
                else
                        k = asprintf(&message, "%s (exit status %d)", *last ? last : "the provisioner failed",
                                     WIFEXITED(p->wait_status) ? WEXITSTATUS(p->wait_status) : -1);
                if (k < 0)
                        message = NULL;   /* undefined after a failed asprintf(): -ENOMEM below */
        } else if (!p->result) {
                error = -EPROTO;
                message = strdup("the provisioner ended without a result");
        }
        if (error < 0 && !message)
                error = -ENOMEM;
        p->done(error, message, error < 0 ? NULL : p->result, p->userdata);
}

static void handle_line(EnvProvision *p, char *line) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v, *d, *t, *s;

        if (p->error < 0 || isempty(line))
                return;
        o = json_tokener_parse(line);
        if (!o || !json_object_is_type(o, json_type_object)) {
                set_error(p, -EPROTO, "the provisioner wrote something other than JSON to stdout");
                send_kill(p);
                return;
        }
        if (json_object_object_get_ex(o, "progress", &v) && json_object_is_type(v, json_type_object)) {
                int64_t done = -1, total = -1;

                if (json_object_object_get_ex(v, "done", &d) && json_object_is_type(d, json_type_int))
                        done = json_object_get_int64(d);
                if (json_object_object_get_ex(v, "total", &t) && json_object_is_type(t, json_type_int))
                        total = json_object_get_int64(t);
                if (done < 0 || total < 0 || done > total || total > 100000)
                        return;   /* progress is a hint: a bad one is ignored */
                s = NULL;
                (void) json_object_object_get_ex(v, "step", &s);
                if (p->progress)
                        p->progress((unsigned) done, (unsigned) total,
                                    s && json_object_is_type(s, json_type_string) ? json_object_get_string(s) : NULL,
                                    p->userdata);
        } else if (json_object_object_get_ex(o, "result", &v) && json_object_is_type(v, json_type_object)) {
                json_object_put(p->result);
                p->result = json_object_get(v);
        }
}

/* One read of a nonblocking pipe: > 0 bytes, 0 at its end (a failure ends it too), -EAGAIN when it
 * is empty for now. */
static ssize_t pipe_read(int fd, char *buf, size_t size) {
        for (;;) {
                ssize_t n = read(fd, buf, size);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return -EAGAIN;
                return n < 0 ? 0 : n;
        }
}

static int on_stdout(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EnvProvision *p = userdata;
        char buf[16384];

        for (;;) {
                ssize_t n = pipe_read(fd, buf, sizeof(buf));

                if (n == -EAGAIN)
                        return 0;
                if (n == 0) {
                        p->stdout_source = sd_event_source_disable_unref(p->stdout_source);
                        p->proc.stdout_fd = safe_close(p->proc.stdout_fd);
                        p->stdout_eof = true;
                        if (p->line_len > 0) {
                                p->line[p->line_len] = '\0';
                                handle_line(p, p->line);
                                p->line_len = 0;
                        }
                        maybe_finish(p);
                        return 0;
                }
                p->stdout_total += (size_t) n;
                if (p->stdout_total > STDOUT_MAX_BYTES) {
                        set_error(p, -EPROTO, "the provisioner wrote more than %u bytes to stdout", STDOUT_MAX_BYTES);
                        send_kill(p);
                        continue;   /* keep reading to EOF */
                }
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] == '\n') {
                                p->line[p->line_len] = '\0';
                                handle_line(p, p->line);
                                p->line_len = 0;
                        } else if (p->line_len < LINE_MAX_BYTES)
                                p->line[p->line_len++] = buf[i];
                        else if (p->error == 0) {
                                set_error(p, -EPROTO, "the provisioner wrote a line of more than %u bytes",
                                          LINE_MAX_BYTES);
                                send_kill(p);
                        }
                }
        }
}

static int on_stderr(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EnvProvision *p = userdata;
        char buf[4096];

        for (;;) {
                ssize_t n = pipe_read(fd, buf, sizeof(buf));

                if (n == -EAGAIN)
                        return 0;
                if (n == 0) {
                        p->stderr_source = sd_event_source_disable_unref(p->stderr_source);
                        p->proc.stderr_fd = safe_close(p->proc.stderr_fd);
                        p->stderr_eof = true;
                        maybe_finish(p);
                        return 0;
                }
                /* Keep the last STDERR_TAIL bytes, printable only. */
                for (ssize_t i = 0; i < n; i++) {
                        char c = buf[i];
                        if ((unsigned char) c < ' ' && c != '\n')
                                c = ' ';
                        if ((unsigned char) c >= 127)
                                c = '?';
                        if (p->stderr_len == STDERR_TAIL) {
                                memmove(p->stderr_tail, p->stderr_tail + STDERR_TAIL / 2, STDERR_TAIL / 2);
                                p->stderr_len = STDERR_TAIL / 2;
                        }
                        p->stderr_tail[p->stderr_len++] = c;
                }
        }
}

static int on_report(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EnvProvision *p = userdata;
        ssize_t n;

        n = read(fd, p->report_buf + p->report_len, sizeof(p->report_buf) - 1 - p->report_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                /* The keeper is gone: whatever it did not report ended badly. */
                p->report_source = sd_event_source_disable_unref(p->report_source);
                p->proc.report_fd = safe_close(p->proc.report_fd);
                if (!p->exited) {
                        set_error(p, -EPROTO, "the sandbox keeper went away before the provisioner ended");
                        p->exited = true;
                }
                maybe_finish(p);
                return 0;
        }
        p->report_len += (size_t) n;
        p->report_buf[p->report_len] = '\0';
        for (char *nl; (nl = strchr(p->report_buf, '\n')); ) {
                *nl = '\0';
                if (p->report_buf[0] == 'X') {
                        p->wait_status = atoi(p->report_buf + 1);
                        p->exited = true;
                }
                p->report_len -= (size_t) (nl + 1 - p->report_buf);
                memmove(p->report_buf, nl + 1, p->report_len + 1);
        }
        if (p->report_len >= sizeof(p->report_buf) - 1)
                p->report_len = 0;
        maybe_finish(p);
        return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        EnvProvision *p = userdata;

        p->timer_source = sd_event_source_disable_unref(p->timer_source);
        set_error(p, -ETIMEDOUT, "the provisioning step did not finish within its time ([Environments] SetupTimeoutSec=)");
        send_kill(p);
        return 0;
}

/* The files bwrap gets, in the execution's layout; closed once the keeper has its copies. */
static int provision_files(const EnvProvisionSpec *spec, SandboxFiles *f) {
        _cleanup_free_ char *seccomp_error = NULL;
        int r;

        r = seccomp_program_for_variant(spec->egress_socket ? SECCOMP_VARIANT_NETWORK : SECCOMP_VARIANT_BASELINE,
                                        &f->seccomp_fd, &seccomp_error);
        if (r < 0)
                return log_error_errno(r, "Cannot build the provisioning sandbox's seccomp filter: %s",
                                       seccomp_error ?: strerror(-r));
        r = sandbox_files_make_etc(f);
        f->code_fd = memfd_new_data("sandbox-provision", spec->script, spec->script_size);
        f->stdin_fd = memfd_new_data("sandbox-plan", spec->plan, strlen(spec->plan));
        if (r < 0 || f->code_fd < 0 || f->stdin_fd < 0)
                return -ENOMEM;
        return 0;
}

static int provision_argv(const EnvProvisionSpec *spec, char ***ret) {
        _cleanup_free_ SandboxBind *binds = NULL;
        char *const argv[] = { (char *) "/usr/bin/python3", (char *) "-I", (char *) "-B",
                               (char *) SANDBOX_CODE_PATH, NULL };
        SandboxSpec s;

        binds = calloc(spec->n_binds + 1, sizeof(SandboxBind));
        if (!binds)
                return -ENOMEM;
        binds[0] = (SandboxBind) { .source = spec->build_path, .dest = SANDBOX_ENV_PREFIX, .writable = true };
        for (size_t i = 0; i < spec->n_binds; i++)
                binds[i + 1] = spec->binds[i];
        s = (SandboxSpec) {
                .workspace = spec->scratch_path,
                .cwd = "",
                .argv = argv,
                .tmp_size = spec->tmp_size,
                .seccomp_fd = SANDBOX_FD_SECCOMP,
                .passwd_fd = SANDBOX_FD_PASSWD,
                .group_fd = SANDBOX_FD_GROUP,
                .hosts_fd = SANDBOX_FD_HOSTS,
                .code_fd = SANDBOX_FD_CODE,
                .info_fd = -1,
                .binds = binds,
                .n_binds = spec->n_binds + 1,
                .root_read_only = true,
                .egress_socket = spec->egress_socket,
                .bridge = spec->bridge,
        };
        return sandbox_argv_build(&s, spec->probe, ret);
}

static int provision_watch(EnvProvision *p, uint64_t timeout_usec) {
        int r;

        r = sandbox_process_watch(&p->proc, p->event, on_stdout, on_stderr, on_report, p, &p->stdout_source,
                                  &p->stderr_source, &p->report_source);
        if (r >= 0)
                r = sd_event_add_time_relative(p->event, &p->timer_source, CLOCK_MONOTONIC, timeout_usec,
                                               USEC_PER_SEC, on_timeout, p);
        return r;
}

int env_provision_start(const EnvProvisionSpec *spec, EnvProvisionProgressFn progress, EnvProvisionDoneFn done,
                        void *userdata, EnvProvision **ret) {
        _cleanup_(sandbox_files_done) SandboxFiles f = SANDBOX_FILES_NULL;
        _cleanup_strv_free_ char **argv = NULL;
        SandboxKeeper keeper = SANDBOX_KEEPER_NULL;
        EnvProvision *p;
        SandboxFds fds;
        int r;

        assert(spec && spec->event && done && ret);

        r = provision_files(spec, &f);
        if (r < 0)
                return r;
        r = provision_argv(spec, &argv);
        if (r < 0)
                return log_error_errno(r, "Cannot build the provisioning sandbox's command line: %m");

        p = calloc(1, sizeof(EnvProvision));
        if (!p)
                return -ENOMEM;
        p->line = malloc(LINE_MAX_BYTES + 1);
        if (!p->line) {
                free(p);
                return -ENOMEM;
        }
        p->event = sd_event_ref(spec->event);
        p->progress = progress;
        p->done = done;
        p->userdata = userdata;
        p->proc = (SandboxProcess) { .keeper_pidfd = -EBADF, .control_fd = -EBADF, .report_fd = -EBADF,
                                     .stdout_fd = -EBADF, .stderr_fd = -EBADF };

        fds = (SandboxFds) {
                .stdin_fd = f.stdin_fd,
                .seccomp_fd = f.seccomp_fd,
                .passwd_fd = f.passwd_fd,
                .group_fd = f.group_fd,
                .hosts_fd = f.hosts_fd,
                .code_fd = f.code_fd,
                .info_fd = -1,
                .start_now = true,
        };
        r = sandbox_keeper_start(spec->keeper_path, &keeper);
        if (r >= 0)
                r = sandbox_spawn(spec->bwrap, argv, &fds,
                                  &(SandboxLimits) { .nofile = 4096 }, &keeper, &p->proc, NULL);
        if (r < 0) {
                log_error_errno(r, "Cannot start the provisioning sandbox: %m");
                env_provision_free(p);
                return r;
        }
        r = provision_watch(p, spec->timeout_usec);
        if (r < 0) {
                env_provision_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

/* Release the keeper and wait for it: it exits as soon as it sees its control pipe closed. */
static void keeper_release(SandboxProcess *proc) {
        if (proc->keeper_pid <= 0)
                return;
        proc->control_fd = safe_close(proc->control_fd);
        if (proc->keeper_pidfd >= 0) {
                struct pollfd pfd = { .fd = proc->keeper_pidfd, .events = POLLIN };

                if (poll(&pfd, 1, 2000) <= 0)
                        (void) kill(proc->keeper_pid, SIGKILL);
        }
        (void) waitpid(proc->keeper_pid, NULL, 0);
        proc->keeper_pid = 0;
}

EnvProvision *env_provision_free(EnvProvision *p) {
        if (!p)
                return NULL;
        p->stdout_source = sd_event_source_disable_unref(p->stdout_source);
        p->stderr_source = sd_event_source_disable_unref(p->stderr_source);
        p->report_source = sd_event_source_disable_unref(p->report_source);
        p->timer_source = sd_event_source_disable_unref(p->timer_source);
        if (!p->exited)
                send_kill(p);
        keeper_release(&p->proc);
        sandbox_process_done(&p->proc);
        json_object_put(p->result);
        free(p->error_message);
        free(p->line);
        sd_event_unref(p->event);
        return mfree(p);
}
