/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Managed shell executions: shell --follow / --detach, status-of, logs, cancel. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "exec-util.h"
#include "output.h"
#include "transfer.h"

/* After a follow stream ended while the run still shows as running (a broken connection, a
 * daemon restart), wait this long before following again. */
#define REFOLLOW_DELAY_USEC (200 * USEC_PER_MSEC)

/* "/shell-executions/<id><suffix>", the id escaped. NULL on OOM (reported). */
static char *execution_path(const char *id, const char *suffix) {
        _cleanup_free_ char *eid = NULL;
        char *p;

        if (transfer_escape(id, &eid) < 0 || asprintf(&p, "/shell-executions/%s%s", eid, suffix ?: "") < 0) {
                (void) log_oom();
                return NULL;
        }
        return p;
}

/* GET .../logs?stream=@stream&offset=@offset[&follow=1] into @sink. @ret_next: the next offset
 * (X-Sandbox-Next-Offset, or @offset plus what arrived when following). @quiet_404: a missing log
 * (a run still waiting for its workspace has none yet) is not reported; @ret_status says so.
 * Returns an exit code. */
static int read_log(const CtlOptions *o, const char *id, const char *stream, uint64_t offset, bool follow, LogSink *sink,
                    uint64_t *ret_next, bool quiet_404, long *ret_status) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *base = NULL, *path = NULL;
        const char *next;
        int r;

        base = execution_path(id, "/logs");
        if (!base)
                return CTL_EXIT_FAILURE;
        if (asprintf(&path, "%s?stream=%s&offset=%" PRIu64 "%s", base, stream, offset, follow ? "&follow=1" : "") < 0)
                return log_oom();

        r = request_log(o,
                        &(const Request) {
                                .path = path,
                                /* A followed log lasts as long as the run. */
                                .timeout_usec = follow ? ctl_long_timeout(o) : o->timeout_usec,
                                .connect_timeout_usec = CONNECT_TIMEOUT_USEC,
                                .quiet_status = quiet_404 ? 404 : 0,
                                .ret_status = ret_status,
                        },
                        sink, &resp);
        if (r != 0)
                return r;

        if (ret_next) {
                uint64_t v;

                next = http_response_header(&resp, "X-Sandbox-Next-Offset");
                if (!follow && next && exec_parse_uint(next, UINT64_MAX, &v) >= 0)
                        *ret_next = v;
                else
                        *ret_next = offset + sink->bytes;
        }
        return 0;
}

/* GET /shell-executions/{id}. Returns an exit code. */
static int get_record(const CtlOptions *o, const char *id, json_object **ret) {
        _cleanup_free_ char *path = execution_path(id, NULL);

        if (!path)
                return CTL_EXIT_FAILURE;
        return request_get(o, path, ret);
}

static bool record_running(json_object *record) {
        const char *state = json_string_field(record, "state") ?: json_string_field(record, "status");

        return !state || streq(state, "running");
}

/* The log of @stream was cut at MaxOutputBytes: say so. */
static void note_log_truncation(json_object *record, const char *eid, const char *stream) {
        json_object *logs, *l;

        if (!json_object_object_get_ex(record, "logs", &logs) || !json_object_object_get_ex(logs, stream, &l) ||
            !json_bool_field(l, "truncated"))
                return;
        log_error("The %s log of execution %s was cut at %" PRIi64 " bytes (MaxOutputBytes=).", stream, eid,
                  json_int_field(l, "bytes", 0));
}

/* POST /shell-executions: start the run. @ret_id, @ret_eid: its id, raw and escaped for messages.
 * Returns an exit code. */
static int start_run(const CtlOptions *o, json_object *body, json_object **ret_started, char **ret_id,
                     char **ret_eid) {
        _cleanup_(json_object_putp) json_object *started = NULL;
        _cleanup_free_ char *id = NULL, *eid = NULL;
        const char *s;
        int r;

        r = request_post_signed(o, "/shell-executions", body, &started);
        if (r != 0)
                return r;

        s = json_string_field(started, "executionId");
        if (!s) {
                log_error("The answer has no 'executionId'.");
                return CTL_EXIT_FAILURE;
        }
        id = strdup(s);
        eid = output_escaped(s);
        if (!id || !eid)
                return log_oom();

        *ret_started = STEAL(started);
        *ret_id = STEAL(id);
        *ret_eid = STEAL(eid);
        return 0;
}

/* Follow the stdout log of run @id into @out until the run's record says it ended; @ret_record:
 * that record. Returns an exit code, negated when the output could not be written after the run
 * ended (reported; the run is not said to be still running then). */
static int follow_run(const CtlOptions *o, const char *id, LogSink *out, json_object **ret_record) {
        _cleanup_(json_object_putp) json_object *record = NULL;
        uint64_t offset = 0;
        int r;

        for (;;) {
                long http_status = 0;

                /* With --json the output is not shown: the stream only tells when the run ends. A
                 * run waiting for its workspace (another run holds it) has no log yet: 404. */
                r = read_log(o, id, "stdout", offset, true, out, &offset, true, &http_status);
                if (r != 0 && http_status != 404)
                        return r;

                json_object_put(record);
                record = NULL;
                r = get_record(o, id, &record);
                if (r != 0)
                        return r;
                if (!record_running(record))
                        break;
                (void) usleep(REFOLLOW_DELAY_USEC);
        }
        /* What was written after the last stream ended (if it ended early, or never started). A
         * failure here counts only when the output could not be written. */
        r = read_log(o, id, "stdout", offset, false, out, &offset, true, NULL);
        if (r != 0 && out->error < 0)
                return -r;

        *ret_record = STEAL(record);
        return 0;
}

/* The ended run's @record: shown, its stderr written, its exit code the CLI's. */
static int finish_run(const CtlOptions *o, const char *id, const char *eid, json_object *record) {
        _cleanup_free_ char *estatus = NULL;
        const char *status;
        int r, code;

        status = json_string_field(record, "status");
        if (!status || streq(status, "running")) {
                log_error("The record of execution %s has no final 'status'.", eid);
                return CTL_EXIT_FAILURE;
        }
        code = exec_status_exit_code(status, json_int_field(record, "exitCode", -1),
                                     json_int_field(record, "signal", -1));
        estatus = output_escaped(status);
        if (!estatus)
                return log_oom();

        if (o->json) {
                r = show_answer(o, record, NULL);
                if (r != 0)
                        return r;
        } else {
                LogSink err = { .fd = STDERR_FILENO };

                long http_status = 0;

                r = read_log(o, id, "stderr", 0, false, &err, NULL, true, &http_status);
                if (r != 0 && http_status != 404)
                        return r;
                note_log_truncation(record, eid, "stdout");
                note_log_truncation(record, eid, "stderr");
        }

        return execution_outcome(o, eid, status, estatus, code);
}

int run_managed_shell(const CtlOptions *o, json_object *body) {
        _cleanup_(json_object_putp) json_object *started = NULL, *record = NULL;
        _cleanup_free_ char *id = NULL, *eid = NULL, *note = NULL;
        LogSink out = { .fd = o->json ? -EBADF : STDOUT_FILENO };
        int r;

        r = start_run(o, body, &started, &id, &eid);
        if (r != 0)
                return r;

        if (o->detach) {
                if (o->json)
                        return show_answer(o, started, NULL);
                /* The id alone, for "id=$(sandbox-runnerctl shell --detach ...)". */
                printf("%s\n", eid);
                return flush_stdout();
        }

        /* --follow: the run goes on without us; an interrupt says how to stop it. */
        if (asprintf(&note, "\n" PROGRAM ": execution %s keeps running; stop it with: " PROGRAM " cancel %s\n",
                     eid, eid) < 0)
                return log_oom();
        transfer_interrupt_setup();
        transfer_interrupt_message(note);
        if (o->verbose)
                log_error("Started execution %s.", eid);

        if (flush_stdout() != 0)
                return CTL_EXIT_FAILURE;
        r = follow_run(o, id, &out, &record);
        if (r < 0)
                return -r;      /* the output could not be written (reported) */
        if (r > 0) {
                transfer_interrupt_message(NULL);
                log_error("Execution %s may still be running; see: " PROGRAM " status-of %s", eid, eid);
                return r;
        }
        transfer_interrupt_message(NULL);

        return finish_run(o, id, eid, record);
}

int verb_status_of(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "executionId", "state", "status", "exitCode", "signal",
                                             "workspaceId", "durationMs", NULL };
        _cleanup_(json_object_putp) json_object *record = NULL;
        int r;

        r = get_record(o, argv[0], &record);
        if (r != 0)
                return r;

        /* The output itself is what "logs" is for: the summary leaves it out. */
        if (!o->json && json_object_is_type(record, json_type_object)) {
                json_object_object_del(record, "stdout");
                json_object_object_del(record, "stderr");
        }
        return show_answer(o, record, first);
}

int verb_logs(const CtlOptions *o, int argc, char *argv[]) {
        LogSink out = { .fd = STDOUT_FILENO };
        uint64_t next = 0;
        int r;

        r = flush_stdout();
        if (r != 0)
                return r;
        r = read_log(o, argv[0], o->stream ?: "stdout", o->offset, o->follow, &out, &next, false, NULL);
        if (r != 0)
                return r;
        if (o->verbose)
                fprintf(stderr, "next offset: %" PRIu64 "\n", next);
        return 0;
}

int verb_cancel(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "executionId", "state", NULL };
        _cleanup_free_ char *path = execution_path(argv[0], "/cancel");

        if (!path)
                return CTL_EXIT_FAILURE;
        return request_post_signed_and_show(o, path, NULL, first);
}
