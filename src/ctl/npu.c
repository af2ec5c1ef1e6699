/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Accelerators: npu chips (GET /npu/chips), and the host NPU broker: npu workloads (GET
 * /npu/workloads), npu jobs, submit, show, log, result and cancel (/npu/jobs..., every job
 * endpoint scoped by --session), waiting for a job's end and following its log by polling.
 * Requests go through request.c; bodies and tables are npu-util.c's; it calls output.c and
 * transfer.c for escaping and writing.
 */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "exec-util.h"
#include "npu-util.h"
#include "output.h"
#include "transfer.h"
#include "util/time-util.h"

#define NPU_POLL_USEC (500 * USEC_PER_MSEC)

/* Which options of npu a subcommand takes. */
typedef enum NpuOptions {
        NPU_OPT_SESSION = 1 << 0,       /* --session, required */
        NPU_OPT_CONFIG = 1 << 1,
        NPU_OPT_WAIT = 1 << 2,
        NPU_OPT_FOLLOW = 1 << 3,
} NpuOptions;

/* "/npu/jobs/<id><suffix>?session_id=<session><query>", id and session escaped; @id NULL:
 * "/npu/jobs?session_id=..."; @session NULL: no query. NULL on OOM (reported). */
static char *job_path(const char *id, const char *suffix, const char *session, const char *query) {
        _cleanup_free_ char *eid = NULL, *esession = NULL;
        char *p;

        if ((id && transfer_escape(id, &eid) < 0) || (session && transfer_escape(session, &esession) < 0) ||
            asprintf(&p, "/npu/jobs%s%s%s%s%s%s", id ? "/" : "", eid ?: "", suffix ?: "",
                     session ? "?session_id=" : "", esession ?: "", query ?: "") < 0) {
                (void) log_oom();
                return NULL;
        }
        return p;
}

/* Print the text that a npu-util.c formatter made of @answer. Returns an exit code. */
static int print_formatted(json_object *answer, int (*format)(json_object *, char **), const char *what) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = format(answer, &text);
        if (r == -EBADMSG) {
                log_error("The answer has no '%s' list.", what);
                return CTL_EXIT_FAILURE;
        }
        if (r < 0)
                return log_oom();
        fputs(text, stdout);
        return flush_stdout();
}

/* GET @path: the answer with --json, else the table @format makes of it. */
static int get_and_print(const CtlOptions *o, const char *path, int (*format)(json_object *, char **),
                         const char *what) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = request_get_unless_json(o, path, &answer);
        if (r != 0 || !answer)
                return r;
        return print_formatted(answer, format, what);
}

static int npu_chips(const CtlOptions *o, int argc, char *argv[]) {
        return get_and_print(o, "/npu/chips", npu_format_chips, "chips");
}

static int npu_workloads(const CtlOptions *o, int argc, char *argv[]) {
        return get_and_print(o, "/npu/workloads", npu_format_workloads, "workloads");
}

static int npu_jobs(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *path = job_path(NULL, NULL, o->npu_session, NULL);

        if (!path)
                return CTL_EXIT_FAILURE;
        return get_and_print(o, path, npu_format_jobs, "jobs");
}

/* GET /npu/jobs/{id}?session_id=. Returns an exit code. */
static int get_job(const CtlOptions *o, const char *id, json_object **ret) {
        _cleanup_free_ char *path = job_path(id, NULL, o->npu_session, NULL);

        if (!path)
                return CTL_EXIT_FAILURE;
        return request_get(o, path, ret);
}

static int npu_show(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "jobId", "workloadId", "sessionId", "state", "chips", "exitCode",
                                             "signal", "error", NULL };
        _cleanup_(json_object_putp) json_object *job = NULL;
        int r;

        r = get_job(o, argv[0], &job);
        if (r != 0)
                return r;
        return show_answer(o, job, first);
}

static int npu_result(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "jobId", "state", "exitCode", "signal", "timedOut", "error", NULL };
        _cleanup_(json_object_putp) json_object *result = NULL;
        _cleanup_free_ char *path = job_path(argv[0], "/result", o->npu_session, NULL);
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_get(o, path, &result);
        if (r != 0)
                return r;
        return show_answer(o, result, first);
}

static int npu_cancel(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "jobId", "state", NULL };
        _cleanup_(json_object_putp) json_object *body = json_object_new_object();
        _cleanup_free_ char *path = NULL;

        if (!body || json_add_string(body, "sessionId", o->npu_session, strlen(o->npu_session)) < 0)
                return log_oom();
        /* The session goes in the body, as docs/api.md section 10.3 has it. */
        path = job_path(argv[0], "/cancel", NULL, NULL);
        if (!path)
                return CTL_EXIT_FAILURE;
        return request_post_signed_and_show(o, path, body, first);
}

/* ---- logs and waiting -------------------------------------------------------------------------- */

/* One GET of the log from @offset into @sink: *@ret_next the next offset, *@ret_finished whether
 * the job had ended. Returns an exit code. */
static int read_log_chunk(const CtlOptions *o, const char *id, uint64_t offset, LogSink *sink, uint64_t *ret_next,
                          bool *ret_finished) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *path = NULL;
        char query[32];
        const char *h;
        uint64_t v;
        int r;

        (void) snprintf(query, sizeof(query), "&offset=%" PRIu64, offset);
        path = job_path(id, "/log", o->npu_session, query);
        if (!path)
                return CTL_EXIT_FAILURE;

        r = request_log(o, &(const Request) { .path = path, .timeout_usec = o->timeout_usec }, sink, &resp);
        if (r != 0)
                return r;

        h = http_response_header(&resp, "X-Sandbox-Next-Offset");
        *ret_next = h && exec_parse_uint(h, UINT64_MAX, &v) >= 0 ? v : offset + sink->bytes;
        h = http_response_header(&resp, "X-Sandbox-Job-Finished");
        *ret_finished = h && streq(h, "1");
        return 0;
}

/* Sleep one poll interval, unless @deadline (CLOCK_MONOTONIC, 0: none) is reached. Returns 0, or
 * an exit code when the time is up. */
static int poll_wait(uint64_t deadline, const char *id) {
        if (deadline > 0 && now_usec(CLOCK_MONOTONIC) + NPU_POLL_USEC > deadline) {
                _cleanup_free_ char *e = output_escaped(id);

                log_error("Timed out waiting for job %s (--timeout); it keeps running.", e ?: "");
                return CTL_EXIT_FAILURE;
        }
        (void) usleep(NPU_POLL_USEC);
        return 0;
}

static uint64_t poll_deadline(const CtlOptions *o) {
        uint64_t t = ctl_long_timeout(o);

        return t > 0 ? now_usec(CLOCK_MONOTONIC) + t : 0;
}

/* Copy the log of job @id to @fd (-EBADF: discard) from its start: what there is so far, or with
 * @follow polling every NPU_POLL_USEC until the job has ended and no byte is left. Returns an
 * exit code. */
static int copy_log(const CtlOptions *o, const char *id, int fd, bool follow) {
        LogSink sink = { .fd = fd };
        uint64_t offset = 0, deadline = follow ? poll_deadline(o) : 0;
        bool finished = false;
        int r;

        for (;;) {
                r = read_log_chunk(o, id, offset, &sink, &offset, &finished);
                if (r != 0)
                        return r;
                /* An answer carries at most 1 MiB: ask again at once while bytes come. */
                if (sink.bytes > 0)
                        continue;
                if (!follow || finished)
                        return 0;
                r = poll_wait(deadline, id);
                if (r != 0)
                        return r;
        }
}

/* Poll job @id until it is in a final state; @ret: its record then. Returns an exit code. */
static int wait_job(const CtlOptions *o, const char *id, json_object **ret) {
        uint64_t deadline = poll_deadline(o);
        int r;

        for (;;) {
                _cleanup_(json_object_putp) json_object *job = NULL;

                r = get_job(o, id, &job);
                if (r != 0)
                        return r;
                if (npu_job_state_final(json_string_field(job, "state"))) {
                        *ret = STEAL(job);
                        return 0;
                }
                r = poll_wait(deadline, id);
                if (r != 0)
                        return r;
        }
}

/* The ended job's @record: its final state said (on standard output after --wait, on standard
 * error after a followed log, the record itself with --json); 0 only for "succeeded". */
static int job_outcome(const CtlOptions *o, const char *eid, json_object *record) {
        const char *state = json_string_field(record, "state"), *error = json_string_field(record, "error");
        _cleanup_free_ char *estate = output_escaped(state ?: "?"), *eerror = output_escaped(error);
        int64_t code = json_int_field(record, "exitCode", -1), sig = json_int_field(record, "signal", -1);
        int r;

        if (!estate || !eerror)
                return log_oom();
        if (o->json)
                r = show_answer(o, record, NULL);
        else if (!o->follow) {
                printf("%s\n", estate);
                r = flush_stdout();
        } else
                r = 0;
        if (r != 0)
                return r;
        if (state && streq(state, "succeeded")) {
                if (o->follow && !o->json)
                        log_error("Job %s succeeded.", eid);
                return 0;
        }

        if (!isempty(eerror))
                log_error("Job %s %s: %s", eid, estate, eerror);
        else if (sig > 0)
                log_error("Job %s %s: killed by signal %" PRIi64 ".", eid, estate, sig);
        else if (code >= 0)
                log_error("Job %s %s: exit status %" PRIi64 ".", eid, estate, code);
        else
                log_error("Job %s %s.", eid, estate);
        return CTL_EXIT_FAILURE;
}

/* ---- log, submit ------------------------------------------------------------------------------- */

static int npu_log(const CtlOptions *o, int argc, char *argv[]) {
        int r;

        r = flush_stdout();
        if (r != 0)
                return r;
        return copy_log(o, argv[0], STDOUT_FILENO, o->follow);
}

/* POST /npu/jobs; @ret_id: the new job's id. With neither --wait nor --follow the answer is shown
 * (the id alone, for "job=$(sandbox-runnerctl npu submit ...)"). Returns an exit code. */
static int submit_job(const CtlOptions *o, const char *workload, char **ret_id) {
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        _cleanup_free_ char *id = NULL, *eid = NULL;
        int r;

        r = npu_job_body(workload, o->npu_session, o->npu_config, &body);
        if (r == -EINVAL) {
                log_error("npu submit needs a workload id and --session.");
                return CTL_EXIT_USAGE;
        }
        if (r < 0)
                return log_oom();
        r = request_post_signed(o, "/npu/jobs", body, &answer);
        if (r != 0)
                return r;
        if (!json_string_field(answer, "jobId")) {
                log_error("The answer has no 'jobId'.");
                return CTL_EXIT_FAILURE;
        }
        id = strdup(json_string_field(answer, "jobId"));
        eid = output_escaped(json_string_field(answer, "jobId"));
        if (!id || !eid)
                return log_oom();

        if (o->json && !o->wait && !o->follow)
                r = show_answer(o, answer, NULL);
        else if (!o->json && !o->follow) {
                printf("%s\n", eid);
                r = flush_stdout();
        } else if (!o->json && o->verbose)
                log_error("Submitted job %s.", eid);
        if (r != 0)
                return r;
        *ret_id = STEAL(id);
        return 0;
}

static int npu_submit(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *record = NULL;
        _cleanup_free_ char *id = NULL, *eid = NULL, *esession = NULL, *note = NULL;
        int r;

        r = submit_job(o, argv[0], &id);
        if (r != 0 || (!o->wait && !o->follow))
                return r;

        /* The job goes on without us; an interrupt says how to stop it. */
        eid = output_escaped(id);
        esession = output_escaped(o->npu_session);
        if (!eid || !esession ||
            asprintf(&note, "\n" PROGRAM ": job %s keeps running; stop it with: " PROGRAM " npu cancel %s --session %s\n",
                     eid, eid, esession) < 0)
                return log_oom();
        transfer_interrupt_setup();
        transfer_interrupt_message(note);

        if (o->follow)
                r = copy_log(o, id, o->json ? -EBADF : STDOUT_FILENO, true);
        if (r == 0)
                r = wait_job(o, id, &record);
        transfer_interrupt_message(NULL);
        if (r != 0)
                return r;
        return job_outcome(o, eid, record);
}

/* ---- dispatch ---------------------------------------------------------------------------------- */

static const struct {
        const char *name;
        int min_args;
        int max_args;
        NpuOptions options;
        int (*run)(const CtlOptions *o, int argc, char *argv[]);
} npu_commands[] = {
        { "chips",     0, 0, 0,                                                        npu_chips     },
        { "workloads", 0, 0, 0,                                                        npu_workloads },
        { "jobs",      0, 0, NPU_OPT_SESSION,                                          npu_jobs      },
        { "submit",    1, 1, NPU_OPT_SESSION | NPU_OPT_CONFIG | NPU_OPT_WAIT | NPU_OPT_FOLLOW, npu_submit },
        { "show",      1, 1, NPU_OPT_SESSION,                                          npu_show      },
        { "log",       1, 1, NPU_OPT_SESSION | NPU_OPT_FOLLOW,                         npu_log       },
        { "result",    1, 1, NPU_OPT_SESSION,                                          npu_result    },
        { "cancel",    1, 1, NPU_OPT_SESSION,                                          npu_cancel    },
};

/* An option given to a subcommand that does not take it is a usage error; so is a missing
 * --session where one is needed. */
static int check_options(const CtlOptions *o, const char *sub, NpuOptions allowed) {
        const struct {
                NpuOptions flag;
                bool given;
                const char *name;
        } given[] = {
                { NPU_OPT_SESSION, o->npu_session, "--session" },
                { NPU_OPT_CONFIG,  o->npu_config,  "--config"  },
                { NPU_OPT_WAIT,    o->wait,        "--wait"    },
                { NPU_OPT_FOLLOW,  o->follow,      "--follow"  },
        };

        for (size_t i = 0; i < ELEMENTSOF(given); i++)
                if (given[i].given && !(allowed & given[i].flag)) {
                        log_error("%s is not an option of 'npu %s'.", given[i].name, sub);
                        return CTL_EXIT_USAGE;
                }
        if ((allowed & NPU_OPT_SESSION) && !o->npu_session) {
                log_error("'npu %s' needs --session SESSION (the session's workspace id).", sub);
                return CTL_EXIT_USAGE;
        }
        return 0;
}

int verb_npu(const CtlOptions *o, int argc, char *argv[]) {
        /* "npu" alone is "npu chips". */
        const char *sub = argc > 0 ? argv[0] : "chips";
        int n = argc > 0 ? argc - 1 : 0, r;

        for (size_t i = 0; i < ELEMENTSOF(npu_commands); i++) {
                if (!streq(npu_commands[i].name, sub))
                        continue;
                r = check_options(o, sub, npu_commands[i].options);
                if (r != 0)
                        return r;
                if (n < npu_commands[i].min_args) {
                        log_error("Missing argument for 'npu %s'.", sub);
                        return CTL_EXIT_USAGE;
                }
                if (n > npu_commands[i].max_args) {
                        log_error("Too many arguments for 'npu %s'.", sub);
                        return CTL_EXIT_USAGE;
                }
                return npu_commands[i].run(o, n, argv + (argc > 0));
        }

        _cleanup_free_ char *e = output_escaped(sub);
        log_error("Unknown npu command '%s': expected chips, workloads, jobs, submit, show, log, result or cancel.",
                  e ?: "");
        return CTL_EXIT_USAGE;
}
