/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * exec and shell: the body of POST /execute and /execute-shell built from the command line (the
 * program's argv or code, the exec options, code and standard input read from files), the signed
 * request, and the run's outcome: its output written out, its exit code the CLI's. shell
 * --follow/--detach hands over to runs.c. It calls request.c, exec-util.c, npu-util.c (--npu,
 * --device) and output.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ctl.h"
#include "exec-util.h"
#include "npu-util.h"
#include "output.h"

/* exec and shell: the daemon's default execution timeout (DefaultTimeoutSec=, 30 s unless
 * configured otherwise). */
#define EXEC_DEFAULT_TIMEOUT_USEC (30 * USEC_PER_SEC)

/* An execution's answer carries its output (the daemon keeps up to MaxOutputBytes= of each stream,
 * 1 GiB by default, escaped in JSON); more than this is not held in memory. Runs with more output
 * should write it to a file in the workspace. */
#define EXEC_ANSWER_SIZE_MAX ((size_t) 1024 * 1024 * 1024)

/* Upper bound on code and stdin read from files: beyond this the request is too big anyway. */
#define EXEC_INPUT_SIZE_MAX ((size_t) 64 * 1024 * 1024)

/* Command-line strings go into JSON strings, so they must be UTF-8. Returns an exit code. */
static int check_utf8_arg(const char *what, const char *s) {
        _cleanup_free_ char *e = NULL;

        if (exec_utf8_valid(s, strlen(s)))
                return 0;

        (void) output_escape(s, &e);
        log_error("%s '%s' is not valid UTF-8; the API carries it as a JSON string.", what, e ?: "");
        return CTL_EXIT_USAGE;
}

/* Read a whole file, or standard input for "-". @what names the option, for messages.
 * Returns an exit code. */
static int read_input(const char *what, const char *path, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *epath = NULL, *source = NULL;
        int r;

        (void) output_escape(path, &epath);
        if (streq(path, "-") ? asprintf(&source, "standard input (%s -)", what) < 0
                             : asprintf(&source, "%s '%s'", what, epath ?: "") < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        if (streq(path, "-"))
                r = exec_read_fd(STDIN_FILENO, EXEC_INPUT_SIZE_MAX, ret, ret_size);
        else {
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0) {
                        log_error("Cannot open %s: %s", source, strerror(errno));
                        return CTL_EXIT_FAILURE;
                }
                r = exec_read_fd(fd, EXEC_INPUT_SIZE_MAX, ret, ret_size);
        }
        if (r == -EFBIG) {
                log_error("%s is larger than %zu MiB.", source, EXEC_INPUT_SIZE_MAX / 1024 / 1024);
                return CTL_EXIT_FAILURE;
        }
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        if (r < 0) {
                log_error("Cannot read %s: %s", source, strerror(-r));
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

/* --npu and --device: "npu": {"chips": [...]} and "devices": [...]. Returns an exit code. */
static int add_npu_fields(const CtlOptions *o, json_object *body) {
        json_object *devices = NULL;
        size_t bad = 0;
        int r;

        if (o->n_npu_chips > 0 && json_add(body, "npu", npu_chips_json(o->npu_chips, o->n_npu_chips)) < 0)
                return log_oom();
        if (o->n_devices == 0)
                return 0;

        r = npu_devices_json(o->devices, o->n_devices, &devices, &bad);
        if (r == -ENOMEM)
                return log_oom();
        if (r == -E2BIG) {
                log_error("--device may be given at most %u times.", NPU_DEVICES_MAX);
                return CTL_EXIT_USAGE;
        }
        if (r < 0) {
                _cleanup_free_ char *e = output_escaped(o->devices[bad]);

                if (r == -EEXIST)
                        log_error("--device names '%s' twice.", e ?: "");
                else
                        log_error("Invalid --device '%s': expected a CDI device name, vendor.com/class=name.", e ?: "");
                return CTL_EXIT_USAGE;
        }
        if (json_add(body, "devices", devices) < 0)
                return log_oom();
        return 0;
}

/* The fields common to /execute and /execute-shell. Returns an exit code. */
static int add_common_fields(const CtlOptions *o, json_object *body) {
        _cleanup_free_ char *stdin_data = NULL;
        size_t stdin_size = 0;
        int r;

        if (o->execution_id) {
                r = check_utf8_arg("--id", o->execution_id);
                if (r != 0)
                        return r;
                if (json_add_string(body, "executionId", o->execution_id, strlen(o->execution_id)) < 0)
                        goto oom;
        }
        if (o->workspace) {
                r = check_utf8_arg("--workspace", o->workspace);
                if (r != 0)
                        return r;
                if (json_add_string(body, "workspaceId", o->workspace, strlen(o->workspace)) < 0)
                        goto oom;
        }

        if (o->stdin_file) {
                _cleanup_free_ char *e = NULL;

                r = read_input("--stdin-file", o->stdin_file, &stdin_data, &stdin_size);
                if (r != 0)
                        return r;
                if (!exec_utf8_valid(stdin_data, stdin_size)) {
                        (void) output_escape(o->stdin_file, &e);
                        log_error("--stdin-file '%s' is binary, not UTF-8 text. The API carries stdin as "
                                  "a JSON string, so binary input cannot be passed; encode it (e.g. "
                                  "base64) or put it in the workspace.", e ?: "");
                        return CTL_EXIT_FAILURE;
                }
                r = json_add_string(body, "stdin", stdin_data, stdin_size);
                if (r == -EFBIG) {
                        log_error("--stdin-file is too large.");
                        return CTL_EXIT_FAILURE;
                }
                if (r < 0)
                        goto oom;
        }

        if (o->n_env > 0) {
                json_object *env = json_object_new_object();

                if (json_add(body, "env", env) < 0)
                        goto oom;
                for (size_t i = 0; i < o->n_env; i++) {
                        _cleanup_free_ char *name = NULL;
                        const char *eq = strchr(o->env[i], '=');

                        r = check_utf8_arg("--env", o->env[i]);
                        if (r != 0)
                                return r;
                        name = strndup(o->env[i], eq - o->env[i]);
                        if (!name)
                                goto oom;
                        /* A repeated NAME: the last one wins, as in env(1). */
                        if (json_add_string(env, name, eq + 1, strlen(eq + 1)) < 0)
                                goto oom;
                }
        }

        if (o->cwd) {
                r = check_utf8_arg("--cwd", o->cwd);
                if (r != 0)
                        return r;
                if (json_add_string(body, "cwd", o->cwd, strlen(o->cwd)) < 0)
                        goto oom;
        }

        if (o->environment) {
                r = check_utf8_arg("--environment", o->environment);
                if (r != 0)
                        return r;
                if (json_add_string(body, "environment", o->environment, strlen(o->environment)) < 0)
                        goto oom;
        }

        r = add_npu_fields(o, body);
        if (r != 0)
                return r;

        if (o->exec_timeout_ms > 0 && json_add_u64(body, "timeoutMs", o->exec_timeout_ms) < 0)
                goto oom;

        if (o->memory > 0 || o->tasks > 0 || o->cpu > 0) {
                json_object *limits = json_object_new_object();

                if (json_add(body, "limits", limits) < 0)
                        goto oom;
                if (o->memory > 0 && json_add_u64(limits, "memoryBytes", o->memory) < 0)
                        goto oom;
                if (o->tasks > 0 && json_add_u64(limits, "tasks", o->tasks) < 0)
                        goto oom;
                if (o->cpu > 0 && json_add_u64(limits, "cpuPercent", o->cpu) < 0)
                        goto oom;
        }

        return 0;

oom:
        log_error("Out of memory.");
        return CTL_EXIT_FAILURE;
}

/* Write the answer's "stdout" or "stderr" to @f, decoded. Returns an exit code. */
static int write_output(FILE *f, json_object *answer, const char *name) {
        _cleanup_free_ char *k_enc = NULL, *decoded = NULL;
        const char *text, *encoding;
        size_t size;
        json_object *v;

        if (!json_object_object_get_ex(answer, name, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string)) {
                log_error("The answer's '%s' is not a string.", name);
                return CTL_EXIT_FAILURE;
        }
        text = json_object_get_string(v);
        size = (size_t) json_object_get_string_len(v);

        if (asprintf(&k_enc, "%sEncoding", name) < 0) {
                k_enc = NULL;
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        encoding = json_string_field(answer, k_enc);
        if (encoding && streq(encoding, "base64")) {
                int r = exec_base64_decode(text, size, &decoded, &size);

                if (r == -ENOMEM) {
                        log_error("Out of memory.");
                        return CTL_EXIT_FAILURE;
                }
                if (r < 0) {
                        log_error("The answer's '%s' is not valid base64.", name);
                        return CTL_EXIT_FAILURE;
                }
                text = decoded;
        } else if (encoding && !streq(encoding, "utf-8")) {
                _cleanup_free_ char *e = NULL;

                (void) output_escape(encoding, &e);
                log_error("The answer's '%s' has an unknown encoding '%s'.", k_enc, e ?: "");
                return CTL_EXIT_FAILURE;
        }

        if (size > 0 && fwrite(text, 1, size, f) != size) {
                if (f == stdout)
                        log_error("Failed to write to standard output: %s", strerror(errno ?: EIO));
                return CTL_EXIT_FAILURE;
        }
        if (fflush(f) != 0) {
                if (f == stdout)
                        log_error("Failed to write to standard output: %s", strerror(errno ?: EIO));
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

static void note_truncation(json_object *answer, const char *eid, const char *name) {
        _cleanup_free_ char *k_trunc = NULL, *k_bytes = NULL;
        int64_t total;

        if (asprintf(&k_trunc, "%sTruncated", name) < 0 || asprintf(&k_bytes, "%sBytes", name) < 0)
                return;
        if (!json_bool_field(answer, k_trunc))
                return;

        total = json_int_field(answer, k_bytes, -1);
        if (total >= 0)
                log_error("The %s of execution %s was truncated by the daemon (%" PRIi64 " bytes in total; "
                          "the beginning and the end are shown).", name, eid, total);
        else
                log_error("The %s of execution %s was truncated by the daemon.", name, eid);
}

int execution_outcome(const CtlOptions *o, const char *eid, const char *status, const char *estatus, int code) {
        if (!o->json && code >= 0 && !streq(status, "exited") && !streq(status, "signaled"))
                log_error("execution %s ended: %s", eid, estatus);

        if (code < 0) {
                log_error("Execution %s ended with status %s but without a valid %s.", eid, estatus,
                          streq(status, "exited") ? "exitCode" : "signal");
                return CTL_EXIT_FAILURE;
        }
        return code;
}

/* Send an execution request, show its outcome. Returns the exit code. */
static int run_execution(const CtlOptions *o, const char *path, json_object *body) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *eid = NULL, *estatus = NULL;
        const char *status, *id;
        uint64_t timeout_usec;
        int r, code;

        /* The request must outlive the execution: when the client gives up, the daemon cancels
         * the run. An explicit --timeout may make the wait longer (or unlimited), never shorter. */
        timeout_usec = (o->exec_timeout_ms > 0 ? o->exec_timeout_ms * USEC_PER_MSEC : EXEC_DEFAULT_TIMEOUT_USEC) +
                       EXEC_TIMEOUT_MARGIN_USEC;
        if (o->timeout_set)
                timeout_usec = o->timeout_usec == 0 ? 0 : MAX(o->timeout_usec, timeout_usec);

        r = request(o,
                    &(const Request) {
                            .method = "POST",
                            .path = path,
                            .need_token = true,
                            .sign = true,
                            .json = body,
                            .timeout_usec = timeout_usec,
                            .max_response_size = EXEC_ANSWER_SIZE_MAX,
                    },
                    &answer);
        if (r != 0)
                return r;

        status = json_string_field(answer, "status");
        if (!status) {
                log_error("The answer has no 'status'.");
                if (o->json)
                        (void) output_json(stdout, answer);
                return CTL_EXIT_FAILURE;
        }
        code = exec_status_exit_code(status, json_int_field(answer, "exitCode", -1),
                                     json_int_field(answer, "signal", -1));

        id = json_string_field(answer, "executionId");
        if (output_escape(id ?: "(unknown)", &eid) < 0 || output_escape(status, &estatus) < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        if (o->json) {
                r = output_json(stdout, answer);
                if (r == -ENOMEM) {
                        log_error("Out of memory.");
                        return CTL_EXIT_FAILURE;
                }
                r = flush_stdout();
                if (r != 0)
                        return r;
        } else {
                r = write_output(stdout, answer, "stdout");
                if (r != 0)
                        return r;
                r = write_output(stderr, answer, "stderr");
                if (r != 0)
                        return r;

                note_truncation(answer, eid, "stdout");
                note_truncation(answer, eid, "stderr");
        }

        return execution_outcome(o, eid, status, estatus, code);
}

/* exec --language: the code from --code, --file or standard input. Returns an exit code. */
static int add_code(const CtlOptions *o, json_object *body, int argc, char *argv[]) {
        _cleanup_free_ char *code = NULL;
        bool from_stdin = argc == 1 && streq(argv[0], "-");
        unsigned sources = !!o->code + !!o->code_file + from_stdin;
        size_t code_size = 0;
        int r;

        if (argc > 1 || (argc == 1 && !from_stdin)) {
                log_error("With --language, the code comes from --code, --file or '-' (standard "
                          "input), not from arguments.");
                return CTL_EXIT_USAGE;
        }
        if (sources != 1) {
                log_error("--language needs exactly one of --code CODE, --file FILE or '-' "
                          "(the code on standard input).");
                return CTL_EXIT_USAGE;
        }
        if (from_stdin && o->stdin_file && streq(o->stdin_file, "-")) {
                log_error("The code and --stdin-file cannot both come from standard input.");
                return CTL_EXIT_USAGE;
        }

        if (o->code) {
                r = check_utf8_arg("--code", o->code);
                if (r != 0)
                        return r;
                code = strdup(o->code);
                if (!code) {
                        log_error("Out of memory.");
                        return CTL_EXIT_FAILURE;
                }
                code_size = strlen(code);
        } else {
                _cleanup_free_ char *e = NULL;

                r = read_input("--file", o->code_file ?: "-", &code, &code_size);
                if (r != 0)
                        return r;
                if (!exec_utf8_valid(code, code_size)) {
                        (void) output_escape(o->code_file ?: "-", &e);
                        log_error("The code in %s is not UTF-8 text; the API carries it as a JSON "
                                  "string.", o->code_file ? e ?: "" : "standard input");
                        return CTL_EXIT_FAILURE;
                }
        }

        if (json_add_string(body, "language", o->language, strlen(o->language)) < 0 ||
            json_add_string(body, "code", code, code_size) < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

/* exec -- PROGRAM [ARGUMENTS...]: the program's argv. Returns an exit code. */
static int add_argv(const CtlOptions *o, json_object *body, int argc, char *argv[]) {
        json_object *a;
        int r;

        if (o->code || o->code_file) {
                log_error("--code and --file need --language.");
                return CTL_EXIT_USAGE;
        }
        if (argc == 0) {
                log_error("Missing the program: exec [OPTIONS] -- PROGRAM [ARGUMENTS...], or "
                          "exec --language LANGUAGE (--code CODE | --file FILE | -).");
                return CTL_EXIT_USAGE;
        }

        a = json_object_new_array();
        if (json_add(body, "argv", a) < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        for (int i = 0; i < argc; i++) {
                json_object *v;

                r = check_utf8_arg("Argument", argv[i]);
                if (r != 0)
                        return r;
                v = json_object_new_string(argv[i]);
                if (!v || json_object_array_add(a, v) < 0) {
                        json_object_put(v);
                        log_error("Out of memory.");
                        return CTL_EXIT_FAILURE;
                }
        }
        return 0;
}

int verb_exec(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        int r;

        body = json_object_new_object();
        if (!body) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        if (o->language)
                r = add_code(o, body, argc, argv);
        else
                r = add_argv(o, body, argc, argv);
        if (r != 0)
                return r;

        r = add_common_fields(o, body);
        if (r != 0)
                return r;

        return run_execution(o, "/execute", body);
}

int verb_shell(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        int r;

        if (o->language || o->code || o->code_file) {
                log_error("--language, --code and --file are for exec; shell takes the command line as "
                          "its argument.");
                return CTL_EXIT_USAGE;
        }
        if (isempty(argv[0])) {
                log_error("The command must not be empty.");
                return CTL_EXIT_USAGE;
        }
        r = check_utf8_arg("The command", argv[0]);
        if (r != 0)
                return r;

        body = json_object_new_object();
        if (!body || json_add_string(body, "command", argv[0], strlen(argv[0])) < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        r = add_common_fields(o, body);
        if (r != 0)
                return r;

        if (o->follow && o->detach) {
                log_error("--follow and --detach exclude each other.");
                return CTL_EXIT_USAGE;
        }
        if (o->follow || o->detach)
                return run_managed_shell(o, body);

        return run_execution(o, "/execute-shell", body);
}

