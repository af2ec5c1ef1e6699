/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An execution's output and its keeper's word: stdout and stderr into the answer's buffers (and
 * a managed run's logs), and the keeper's reports ('S' bwrap started, 'X' its exit status). What
 * ends the run goes to execution_maybe_end() (execution.c).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execution/execution-internal.h"
#include "execution/execution.h"
#include "util/fd-util.h"
#include "util/log-ids.h"
#include "util/log.h"

#define READ_CHUNK (64 * 1024)

static void execution_log_append(Execution *e, RecordStream s, const char *p, size_t n) {
        uint64_t limit = e->output_limit;

        if (e->log_fds[s] < 0 || e->log_truncated[s])
                return;
        /* The log keeps the first MaxOutputBytes (offsets stay stable for resuming clients);
         * the answer's head+tail view comes from the retention buffer. */
        if (limit > 0 && e->log_bytes[s] + n > limit) {
                n = (size_t) (limit - e->log_bytes[s]);
                e->log_truncated[s] = true;
        }
        while (n > 0) {
                ssize_t k = write(e->log_fds[s], p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        log_warning_errno(errno, "Failed to write the %s log of '%s', ignoring: %m",
                                          record_stream_to_string(s), e->id);
                        e->log_truncated[s] = true;
                        break;
                }
                p += k;
                n -= (size_t) k;
                e->log_bytes[s] += (uint64_t) k;
        }
        execution_notify_watches(e);
}

/* Read what @fd (stdout or stderr) has, up to a few chunks; at EOF, close it and maybe finish. */
static void drain_output(Execution *e, bool is_out, int fd) {
        OutputBuffer *b = is_out ? e->out : e->err;
        char buf[READ_CHUNK];

        for (unsigned i = 0; i < 16; i++) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        if (is_out) {
                                e->stdout_eof = true;
                                e->stdout_source = sd_event_source_disable_unref(e->stdout_source);
                                e->proc.stdout_fd = safe_close(e->proc.stdout_fd);
                        } else {
                                e->stderr_eof = true;
                                e->stderr_source = sd_event_source_disable_unref(e->stderr_source);
                                e->proc.stderr_fd = safe_close(e->proc.stderr_fd);
                        }
                        execution_maybe_end(e);
                        return;
                }
                if (output_buffer_append(b, buf, (size_t) n) < 0)
                        log_oom();
                if (e->managed)
                        execution_log_append(e, is_out ? RECORD_STREAM_STDOUT : RECORD_STREAM_STDERR, buf, (size_t) n);
        }
}

int execution_on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;

        drain_output(e, s == e->stdout_source, fd);
        return 0;
}

void execution_log_started(Execution *e) {
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_EXECUTION_STARTED,
                   "SANDBOX_EXECUTION_ID=%s", e->id,
                   "SANDBOX_WORKSPACE=%s", e->req->workspace_id,
                   "SANDBOX_SCOPE=%s", e->scope ? scope_name(e->scope) : "",
                   "SANDBOX_PID=%d", (int) e->bwrap_pid,
                   "SANDBOX_TIMEOUT_USEC=%" PRIu64, e->req->timeout_usec,
                   "SANDBOX_MEMORY_MAX=%" PRIu64, e->req->memory_max,
                   "SANDBOX_TASKS_MAX=%" PRIu64, e->req->tasks_max,
                   "MESSAGE=Execution '%s' started in workspace '%s'%s%s.", e->id, e->req->workspace_id,
                   e->scope ? " in " : " without a scope", e->scope ? scope_name(e->scope) : "");
}

static void handle_report_line(Execution *e, const char *line) {
        if (line[0] == 'S') {
                e->bwrap_pid = (pid_t) atoi(line + 1);
                if (e->early)
                        execution_scope_start(e);   /* once the sandbox's pid 1 is known too */
                else {
                        if (e->phase < EXECUTION_RUNNING)   /* not if it is finishing already */
                                e->phase = EXECUTION_RUNNING;
                        execution_log_started(e);
                }
        } else if (line[0] == 'B') {
                execution_prebuilt_bound(e, atoi(line + 1));   /* a sandbox built ahead: bound */
        } else if (line[0] == 'X') {
                e->wait_status = atoi(line + 1);
                e->reported_exit = true;
                e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
                /* The keeper still holds the scope: read what it used now. */
                if (e->scope && scope_read_accounting(e->scope, &e->acct) >= 0)
                        e->have_acct = true;
                else if (e->cgroup && cgroup_read_accounting(e->cgroup, &e->acct) >= 0)
                        e->have_acct = true;
                /* bwrap is gone, and with it every writer of stdout and stderr: what is left in the
                 * pipes is there now, so read it without another trip through the loop. */
                if (!e->stdout_eof && e->proc.stdout_fd >= 0)
                        drain_output(e, true, e->proc.stdout_fd);
                if (!e->stderr_eof && e->proc.stderr_fd >= 0 && e->phase != EXECUTION_DONE)
                        drain_output(e, false, e->proc.stderr_fd);
                execution_maybe_end(e);
        }
}

int execution_on_report(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Execution *e = userdata;
        ssize_t n;

        n = read(fd, e->report_buf + e->report_len, sizeof(e->report_buf) - 1 - e->report_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                e->report_source = sd_event_source_disable_unref(e->report_source);
                e->proc.report_fd = safe_close(e->proc.report_fd);
                return 0;
        }
        e->report_len += (size_t) n;
        e->report_buf[e->report_len] = '\0';
        for (char *nl; (nl = strchr(e->report_buf, '\n')); ) {
                *nl = '\0';
                handle_report_line(e, e->report_buf);
                if (e->phase == EXECUTION_DONE)
                        return 0;
                e->report_len -= (size_t) (nl + 1 - e->report_buf);
                memmove(e->report_buf, nl + 1, e->report_len + 1);
        }
        if (e->report_len >= sizeof(e->report_buf) - 1)
                e->report_len = 0;
        return 0;
}
