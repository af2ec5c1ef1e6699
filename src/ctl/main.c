/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runnerctl: command line, verb table and exit codes; wires the CLI's modules. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "build-config.h"
#include "credentials.h"
#include "ctl.h"
#include "ctl-util.h"
#include "exec-util.h"
#include "http-client.h"
#include "output.h"
#include "sign.h"
#include "transfer.h"

/* Answers are small, well-formed objects; anything nested deeper is refused. */
#define JSON_DEPTH_MAX 64

#define TIMEOUT_SEC_MAX (7 * 24 * 3600.0)

/* exec and shell: the daemon's default execution timeout (DefaultTimeoutSec=, 30 s unless
 * configured otherwise), and what the request may take beyond the execution's own timeout
 * (sandbox set-up, waiting for the workspace, the snapshot, the answer's transfer). */
#define EXEC_DEFAULT_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define EXEC_TIMEOUT_MARGIN_USEC (30 * USEC_PER_SEC)
#define EXEC_TIMEOUT_MS_MAX ((uint64_t) 7 * 24 * 3600 * 1000)

/* An execution's answer carries its output (the daemon keeps up to MaxOutputBytes= of each stream,
 * 1 GiB by default, escaped in JSON); more than this is not held in memory. Runs with more output
 * should write it to a file in the workspace. */
#define EXEC_ANSWER_SIZE_MAX ((size_t) 1024 * 1024 * 1024)

/* Upper bound on code and stdin read from files: beyond this the request is too big anyway. */
#define EXEC_INPUT_SIZE_MAX ((size_t) 64 * 1024 * 1024)

static const char *arg_url = NULL;
static const char *arg_token_file = NULL;
static const char *arg_signing_key_file = NULL;
bool arg_json = false;
bool arg_verbose = false;
uint64_t arg_timeout_usec = DEFAULT_TIMEOUT_USEC;
bool arg_timeout_set = false;

/* Options of some commands (see option_classes[]). */
bool arg_follow = false;
bool arg_detach = false;
const char *arg_stream = NULL;
uint64_t arg_offset = 0;
const char *arg_revision = NULL;
bool arg_multipart = false;

/* Options of exec and shell. */
static const char *arg_workspace = NULL;
static const char *arg_execution_id = NULL;
static uint64_t arg_exec_timeout_ms = 0;        /* 0: not given, the daemon's default */
static uint64_t arg_memory = 0;                 /* 0: not given */
static uint64_t arg_tasks = 0;
static uint64_t arg_cpu = 0;
static const char **arg_env = NULL;             /* "NAME=VALUE", pointing into argv */
static size_t arg_n_env = 0;
static const char *arg_cwd = NULL;
static const char *arg_stdin_file = NULL;
static const char *arg_language = NULL;
static const char *arg_code = NULL;
static const char *arg_code_file = NULL;

typedef enum VerbFlags {
        VERB_EXEC_OPTIONS = 1 << 0,     /* takes the options of exec/shell */
        VERB_OPTIONS_FIRST = 1 << 1,    /* options end at the first argument (it is a program's argv) */
        VERB_FOLLOW = 1 << 2,           /* --follow */
        VERB_DETACH = 1 << 3,           /* --detach */
        VERB_LOG_OPTIONS = 1 << 4,      /* --stream, --offset */
        VERB_REVISION = 1 << 5,         /* --revision */
        VERB_MULTIPART = 1 << 6,        /* --multipart */
} VerbFlags;

/* Options that only some commands take, by the flag a command needs for them. */
static const struct {
        VerbFlags flag;
        const char *commands;
} option_classes[] = {
        { VERB_EXEC_OPTIONS, "exec and shell" },
        { VERB_FOLLOW,       "shell and logs" },
        { VERB_DETACH,       "shell" },
        { VERB_LOG_OPTIONS,  "logs" },
        { VERB_REVISION,     "download" },
        { VERB_MULTIPART,    "upload" },
};
/* The first option of each class given, for "not an option of this command". */
static const char *arg_class_option[ELEMENTSOF(option_classes)] = {};

typedef struct Verb {
        const char *name;
        unsigned min_args;      /* after the verb and its options */
        unsigned max_args;
        VerbFlags flags;
        int (*run)(int argc, char *argv[]);
        const char *summary;
} Verb;

SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);

void log_error(const char *fmt, ...) {
        va_list ap;

        fputs(PROGRAM ": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

int log_oom(void) {
        log_error("Out of memory.");
        return CTL_EXIT_FAILURE;
}

static const char *url(void) {
        const char *e;

        if (arg_url)
                return arg_url;
        e = getenv("SANDBOX_RUNNER_URL");
        return !isempty(e) ? e : HTTP_CLIENT_DEFAULT_URL;
}

static const char *credential_error(int r, bool text) {
        switch (r) {
        case -ENODATA:
                return "it is empty";
        case -EBADMSG:
                return text ? "it contains spaces, control characters or non-ASCII bytes" :
                              "it contains a NUL byte";
        case -EFBIG:
                return "it is larger than 64 KiB";
        default:
                return strerror(-r);
        }
}

/* Find one secret as @spec says; on failure say where we looked (@hint) and why. */
static int acquire_secret(const CredentialSpec *spec, const char *what, const char *hint,
                          char **ret, size_t *ret_size) {
        _cleanup_free_ char *source = NULL;
        int r;

        r = credential_find(spec, ret, ret_size, &source);
        if (r == -ENOKEY) {
                log_error("No %s: use %s.", what, hint);
                return -r;
        }
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return -r;
        }
        if (r < 0) {
                _cleanup_free_ char *esource = NULL;

                (void) output_escape(source ?: "?", &esource);
                log_error("Cannot use the %s from %s: %s.", what, esource ?: "?", credential_error(r, spec->text));
                return -r;
        }
        return 0;
}

/* The token is needed only by some verbs, so it is looked up only then. */
static int acquire_token(char **ret) {
        const CredentialSpec spec = {
                .explicit_file = arg_token_file,
                .option_name = "--token-file",
                .env_value = "SANDBOX_RUNNER_TOKEN",
                .env_file = "SANDBOX_RUNNER_TOKEN_FILE",
                .credential_name = "api-token",
                .fallback_dir = CREDENTIAL_FALLBACK_DIR,
                .text = true,
        };

        return acquire_secret(&spec, "API token",
                              "--token-file FILE, $SANDBOX_RUNNER_TOKEN, $SANDBOX_RUNNER_TOKEN_FILE, "
                              "$CREDENTIALS_DIRECTORY/api-token or " CREDENTIAL_FALLBACK_DIR "/api-token",
                              ret, NULL);
}

/* For the signed endpoints (POST /execute, /execute-shell). */
static int acquire_signing_key(char **ret, size_t *ret_size) {
        const CredentialSpec spec = {
                .explicit_file = arg_signing_key_file,
                .option_name = "--signing-key-file",
                .env_value = "SANDBOX_RUNNER_SIGNING_KEY",
                .env_file = "SANDBOX_RUNNER_SIGNING_KEY_FILE",
                .credential_name = "signing-key",
                .fallback_dir = CREDENTIAL_FALLBACK_DIR,
                .text = false,
        };

        return acquire_secret(&spec, "signing key",
                              "--signing-key-file FILE, $SANDBOX_RUNNER_SIGNING_KEY, $SANDBOX_RUNNER_SIGNING_KEY_FILE, "
                              "$CREDENTIALS_DIRECTORY/signing-key or " CREDENTIAL_FALLBACK_DIR "/signing-key",
                              ret, ret_size);
}

/* Parse a whole answer body as one JSON value (whitespace around it allowed).
 * Return: 0, -EBADMSG if it is not exactly one JSON value, -ENOMEM. */
static int parse_json(const char *body, size_t size, json_object **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *obj = NULL;
        size_t end;

        if (size == 0 || size > INT_MAX)
                return -EBADMSG;

        tok = json_tokener_new_ex(JSON_DEPTH_MAX);
        if (!tok)
                return -ENOMEM;

        obj = json_tokener_parse_ex(tok, body, (int) size);
        if (!obj || json_tokener_get_error(tok) != json_tokener_success)
                return -EBADMSG;

        for (end = json_tokener_get_parse_end(tok); end < size; end++)
                if (!strchr(" \t\r\n", body[end]))
                        return -EBADMSG;

        *ret = STEAL(obj);
        return 0;
}

static bool errno_is_unavailable(int r) {
        return r == -ECONNREFUSED || r == -EHOSTUNREACH || r == -ETIMEDOUT || r == -ECONNRESET;
}

const char *json_string_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

int flush_stdout(void) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
                log_error("Failed to write to standard output: %s", strerror(errno ?: EIO));
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

/* Signature headers for @req, "X-Sandbox-Timestamp: ..." and "X-Sandbox-Signature: v1=...".
 * Returns an exit code (0: done). */
static int sign_request(const Request *req, char **ret_timestamp, char **ret_signature) {
        _cleanup_(erase_and_freep) char *key = NULL;
        _cleanup_free_ char *sig = NULL, *ts_header = NULL, *sig_header = NULL;
        size_t key_size = 0;
        time_t now;
        int r;

        r = acquire_signing_key(&key, &key_size);
        if (r != 0)
                return CTL_EXIT_FAILURE;

        now = time(NULL);
        if (now == (time_t) -1 || now < 0) {
                log_error("Cannot read the clock: %s", strerror(errno ?: EINVAL));
                return CTL_EXIT_FAILURE;
        }

        r = sign_v1(key, key_size, (uint64_t) now, req->method, req->path, req->body, req->body_size, &sig);
        if (r < 0) {
                log_error("Cannot sign the request: %s", r == -ENOMEM ? "out of memory" : "invalid method or path");
                return CTL_EXIT_FAILURE;
        }

        if (asprintf(&ts_header, "X-Sandbox-Timestamp: %llu", (unsigned long long) now) < 0 ||
            asprintf(&sig_header, "X-Sandbox-Signature: %s", sig) < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        *ret_timestamp = STEAL(ts_header);
        *ret_signature = STEAL(sig_header);
        return 0;
}

int request(const Request *req, json_object **ret_answer) {
        _cleanup_(http_client_freep) HttpClient *client = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *curl_error = NULL, *eurl = NULL, *ts_header = NULL, *sig_header = NULL;
        _cleanup_erase_ char *token = NULL;
        const char *headers[3] = {};
        int r;

        r = output_escape(url(), &eurl);
        if (r < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        r = http_client_new(url(), req->timeout_usec, PROGRAM "/" PACKAGE_VERSION, &client);
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        if (r < 0) {
                log_error("Invalid daemon address '%s': expected http://HOST[:PORT], https://... or "
                          "unix:/PATH/TO/SOCKET%s.", eurl,
                          r == -ENAMETOOLONG ? " (socket path too long)" : "");
                return CTL_EXIT_USAGE;
        }

        if (req->need_token) {
                r = acquire_token(&token);
                if (r != 0)
                        return CTL_EXIT_FAILURE;
        }

        if (req->sign) {
                /* Only bodies held in memory can be signed. */
                if (req->read_body || req->n_parts > 0) {
                        log_error("Internal error: a streamed body cannot be signed.");
                        return CTL_EXIT_FAILURE;
                }
                r = sign_request(req, &ts_header, &sig_header);
                if (r != 0)
                        return r;
                headers[0] = ts_header;
                headers[1] = sig_header;
        }

        r = http_client_request(client,
                                &(const HttpRequest) {
                                        .method = req->method,
                                        .path = req->path,
                                        .bearer = token,
                                        .headers = headers,
                                        .content_type = req->body ? "application/json" : req->content_type,
                                        .body = req->body,
                                        .body_size = req->body_size,
                                        .max_response_size = req->max_response_size,
                                        .read_body = req->read_body,
                                        .rewind_body = req->rewind_body,
                                        .read_userdata = req->read_userdata,
                                        .read_size = req->read_body ? req->read_size : 0,
                                        .parts = req->parts,
                                        .n_parts = req->n_parts,
                                        .write_body = req->write_body,
                                        .write_userdata = req->write_userdata,
                                        .accept = req->accept,
                                        .connect_timeout_usec = req->connect_timeout_usec,
                                },
                                &resp, &curl_error);
        if (r < 0) {
                _cleanup_free_ char *emsg = NULL;

                /* The callback's owner says what went wrong. */
                if (req->callback_error && *req->callback_error < 0)
                        return CTL_EXIT_FAILURE;

                (void) output_escape(curl_error ?: strerror(-r), &emsg);
                if (errno_is_unavailable(r)) {
                        log_error("Cannot connect to sandbox-runner at %s: %s", eurl, emsg ?: strerror(-r));
                        return CTL_EXIT_UNAVAILABLE;
                }
                if (r == -EFBIG)
                        log_error("Answer from %s is larger than %zu MiB, refusing it.",
                                  eurl, (req->max_response_size ?: HTTP_RESPONSE_SIZE_MAX) / 1024 / 1024);
                else
                        log_error("Request to %s failed: %s", eurl, emsg ?: strerror(-r));
                return CTL_EXIT_FAILURE;
        }

        /* The token is no longer needed; do not keep it around while printing. */
        erase_and_free(STEAL(token));

        if (req->ret_status)
                *req->ret_status = resp.status;
        if (req->quiet_status > 0 && resp.status == req->quiet_status)
                return CTL_EXIT_FAILURE;

        if (req->raw_answer && resp.status >= 200 && resp.status < 300) {
                if (req->ret_response) {
                        *req->ret_response = resp;
                        resp = (HttpResponse) {};
                }
                *ret_answer = NULL;
                return 0;
        }

        r = parse_json(resp.body, resp.body_size, &answer);
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        if (r < 0) {
                if (resp.status >= 200 && resp.status < 300)
                        log_error("The answer from %s is not valid JSON (HTTP %ld).", eurl, resp.status);
                else
                        log_error("Request failed with HTTP %ld from %s (no JSON error body).",
                                  resp.status, eurl);
                return CTL_EXIT_FAILURE;
        }

        if (resp.status < 200 || resp.status >= 300) {
                _cleanup_free_ char *emsg = NULL, *ecode = NULL;
                const char *m, *c;

                /* With --json the error object is the output too, for scripts. */
                if (arg_json) {
                        (void) output_json(stdout, answer);
                        (void) fflush(stdout);
                }

                m = json_string_field(answer, "message");
                c = json_string_field(answer, "error");
                if (output_escape(m ?: "Request failed", &emsg) < 0 ||
                    output_escape(c ?: "unknown", &ecode) < 0) {
                        log_error("Out of memory.");
                        return CTL_EXIT_FAILURE;
                }
                log_error("%s (%s, HTTP %ld)", emsg, ecode, resp.status);
                return CTL_EXIT_FAILURE;
        }

        if (req->ret_response) {
                *req->ret_response = resp;
                resp = (HttpResponse) {};
        }
        *ret_answer = STEAL(answer);
        return 0;
}

int show_answer(json_object *answer, const char *const *first) {
        int r;

        if (arg_json || !json_object_is_type(answer, json_type_object))
                r = output_json(stdout, answer);
        else
                r = output_flat(stdout, answer, first);
        if (r == -ENOMEM)
                return log_oom();

        return flush_stdout();
}

const char *json_body(json_object *o, size_t *ret_size) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

        if (s && ret_size)
                *ret_size = strlen(s);  /* embedded NULs are escaped as \u0000 */
        return s;
}

/*
 * Do one request and present the answer. Returns the exit code.
 * @first: keys shown first in the human form.
 */
static int call(const char *method, const char *path, bool need_token, const char *const *first) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = request(&(const Request) {
                            .method = method,
                            .path = path,
                            .need_token = need_token,
                            .timeout_usec = arg_timeout_usec,
                    },
                    &answer);
        if (r != 0)
                return r;

        return show_answer(answer, first);
}

static int verb_health(int argc, char *argv[]) {
        static const char *const first[] = { "status", "version", "uptimeSec", NULL };

        return call("GET", "/health", false, first);
}

static int verb_status(int argc, char *argv[]) {
        static const char *const first[] = { "status", "version", "uptimeSec", NULL };

        return call("GET", "/status", true, first);
}

/* ---- exec and shell ---------------------------------------------------------------------------- */

int json_add(json_object *o, const char *key, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int json_add_string(json_object *o, const char *key, const char *s, size_t n) {
        if (n > INT_MAX)
                return -EFBIG;
        return json_add(o, key, json_object_new_string_len(s, (int) n));
}

int json_add_u64(json_object *o, const char *key, uint64_t v) {
        return json_add(o, key, json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v));
}

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

/* The fields common to /execute and /execute-shell. Returns an exit code. */
static int add_common_fields(json_object *o) {
        _cleanup_free_ char *stdin_data = NULL;
        size_t stdin_size = 0;
        int r;

        if (arg_execution_id) {
                r = check_utf8_arg("--id", arg_execution_id);
                if (r != 0)
                        return r;
                if (json_add_string(o, "executionId", arg_execution_id, strlen(arg_execution_id)) < 0)
                        goto oom;
        }
        if (arg_workspace) {
                r = check_utf8_arg("--workspace", arg_workspace);
                if (r != 0)
                        return r;
                if (json_add_string(o, "workspaceId", arg_workspace, strlen(arg_workspace)) < 0)
                        goto oom;
        }

        if (arg_stdin_file) {
                _cleanup_free_ char *e = NULL;

                r = read_input("--stdin-file", arg_stdin_file, &stdin_data, &stdin_size);
                if (r != 0)
                        return r;
                if (!exec_utf8_valid(stdin_data, stdin_size)) {
                        (void) output_escape(arg_stdin_file, &e);
                        log_error("--stdin-file '%s' is binary, not UTF-8 text. The API carries stdin as "
                                  "a JSON string, so binary input cannot be passed; encode it (e.g. "
                                  "base64) or put it in the workspace.", e ?: "");
                        return CTL_EXIT_FAILURE;
                }
                r = json_add_string(o, "stdin", stdin_data, stdin_size);
                if (r == -EFBIG) {
                        log_error("--stdin-file is too large.");
                        return CTL_EXIT_FAILURE;
                }
                if (r < 0)
                        goto oom;
        }

        if (arg_n_env > 0) {
                json_object *env = json_object_new_object();

                if (json_add(o, "env", env) < 0)
                        goto oom;
                for (size_t i = 0; i < arg_n_env; i++) {
                        _cleanup_free_ char *name = NULL;
                        const char *eq = strchr(arg_env[i], '=');

                        r = check_utf8_arg("--env", arg_env[i]);
                        if (r != 0)
                                return r;
                        name = strndup(arg_env[i], eq - arg_env[i]);
                        if (!name)
                                goto oom;
                        /* A repeated NAME: the last one wins, as in env(1). */
                        if (json_add_string(env, name, eq + 1, strlen(eq + 1)) < 0)
                                goto oom;
                }
        }

        if (arg_cwd) {
                r = check_utf8_arg("--cwd", arg_cwd);
                if (r != 0)
                        return r;
                if (json_add_string(o, "cwd", arg_cwd, strlen(arg_cwd)) < 0)
                        goto oom;
        }

        if (arg_exec_timeout_ms > 0 && json_add_u64(o, "timeoutMs", arg_exec_timeout_ms) < 0)
                goto oom;

        if (arg_memory > 0 || arg_tasks > 0 || arg_cpu > 0) {
                json_object *limits = json_object_new_object();

                if (json_add(o, "limits", limits) < 0)
                        goto oom;
                if (arg_memory > 0 && json_add_u64(limits, "memoryBytes", arg_memory) < 0)
                        goto oom;
                if (arg_tasks > 0 && json_add_u64(limits, "tasks", arg_tasks) < 0)
                        goto oom;
                if (arg_cpu > 0 && json_add_u64(limits, "cpuPercent", arg_cpu) < 0)
                        goto oom;
        }

        return 0;

oom:
        log_error("Out of memory.");
        return CTL_EXIT_FAILURE;
}

int64_t json_int_field(json_object *o, const char *key, int64_t fallback) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return fallback;
        return json_object_get_int64(v);
}

bool json_bool_field(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
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

/* Send an execution request, show its outcome. Returns the exit code. */
static int run_execution(const char *path, json_object *body) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *eid = NULL, *estatus = NULL;
        const char *s, *status, *id;
        uint64_t timeout_usec;
        size_t size;
        int r, code;

        s = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        size = strlen(s);       /* embedded NULs are escaped as \u0000 */

        /* The request must outlive the execution: when the client gives up, the daemon cancels
         * the run. An explicit --timeout may make the wait longer (or unlimited), never shorter. */
        timeout_usec = (arg_exec_timeout_ms > 0 ? arg_exec_timeout_ms * USEC_PER_MSEC : EXEC_DEFAULT_TIMEOUT_USEC) +
                       EXEC_TIMEOUT_MARGIN_USEC;
        if (arg_timeout_set)
                timeout_usec = arg_timeout_usec == 0 ? 0 : MAX(arg_timeout_usec, timeout_usec);

        r = request(&(const Request) {
                            .method = "POST",
                            .path = path,
                            .need_token = true,
                            .sign = true,
                            .body = s,
                            .body_size = size,
                            .timeout_usec = timeout_usec,
                            .max_response_size = EXEC_ANSWER_SIZE_MAX,
                    },
                    &answer);
        if (r != 0)
                return r;

        status = json_string_field(answer, "status");
        if (!status) {
                log_error("The answer has no 'status'.");
                if (arg_json)
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

        if (arg_json) {
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
                if (code >= 0 && !streq(status, "exited") && !streq(status, "signaled"))
                        log_error("execution %s ended: %s", eid, estatus);
        }

        if (code < 0) {
                log_error("Execution %s ended with status %s but without a valid %s.", eid, estatus,
                          streq(status, "exited") ? "exitCode" : "signal");
                return CTL_EXIT_FAILURE;
        }
        return code;
}

static int verb_exec(int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        _cleanup_free_ char *code = NULL;
        size_t code_size = 0;
        int r;

        body = json_object_new_object();
        if (!body) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        if (arg_language) {
                bool from_stdin = argc == 1 && streq(argv[0], "-");
                unsigned sources = !!arg_code + !!arg_code_file + from_stdin;

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
                if (from_stdin && arg_stdin_file && streq(arg_stdin_file, "-")) {
                        log_error("The code and --stdin-file cannot both come from standard input.");
                        return CTL_EXIT_USAGE;
                }

                if (arg_code) {
                        r = check_utf8_arg("--code", arg_code);
                        if (r != 0)
                                return r;
                        code = strdup(arg_code);
                        if (!code) {
                                log_error("Out of memory.");
                                return CTL_EXIT_FAILURE;
                        }
                        code_size = strlen(code);
                } else {
                        _cleanup_free_ char *e = NULL;

                        r = read_input("--file", arg_code_file ?: "-", &code, &code_size);
                        if (r != 0)
                                return r;
                        if (!exec_utf8_valid(code, code_size)) {
                                (void) output_escape(arg_code_file ?: "-", &e);
                                log_error("The code in %s is not UTF-8 text; the API carries it as a JSON "
                                          "string.", arg_code_file ? e ?: "" : "standard input");
                                return CTL_EXIT_FAILURE;
                        }
                }

                if (json_add_string(body, "language", arg_language, strlen(arg_language)) < 0 ||
                    json_add_string(body, "code", code, code_size) < 0) {
                        log_error("Out of memory.");
                        return CTL_EXIT_FAILURE;
                }
        } else {
                json_object *a;

                if (arg_code || arg_code_file) {
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
        }

        r = add_common_fields(body);
        if (r != 0)
                return r;

        return run_execution("/execute", body);
}

static int verb_shell(int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        int r;

        if (arg_language || arg_code || arg_code_file) {
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

        r = add_common_fields(body);
        if (r != 0)
                return r;

        if (arg_follow && arg_detach) {
                log_error("--follow and --detach exclude each other.");
                return CTL_EXIT_USAGE;
        }
        if (arg_follow || arg_detach)
                return run_managed_shell(body);

        return run_execution("/execute-shell", body);
}

static const Verb verbs[] = {
        { "health",     0, 0,        0,                                     verb_health,
          "Show the daemon's health (no token needed)" },
        { "status",     0, 0,        0,                                     verb_status,
          "Show running executions, counts and probe details" },
        { "exec",       0, UINT_MAX, VERB_EXEC_OPTIONS | VERB_OPTIONS_FIRST, verb_exec,
          "Run a program, or code with --language, in a sandbox" },
        { "shell",      1, 1,        VERB_EXEC_OPTIONS | VERB_FOLLOW | VERB_DETACH, verb_shell,
          "Run a shell command line (sh -c); --follow/--detach: as a managed run" },
        { "status-of",  1, 1,        0,                                     verb_status_of,
          "Show the state or outcome of a managed run" },
        { "execution",  1, 1,        0,                                     verb_status_of,
          "The same as status-of" },
        { "logs",       1, 1,        VERB_FOLLOW | VERB_LOG_OPTIONS,        verb_logs,
          "Print a managed run's output (--stream, --offset, --follow)" },
        { "cancel",     1, 1,        0,                                     verb_cancel,
          "Cancel a managed run" },
        { "upload",     2, UINT_MAX, VERB_MULTIPART,                        verb_upload,
          "Upload files into a workspace" },
        { "download",   2, 3,        VERB_REVISION,                         verb_download,
          "Download a file of a workspace or of a revision, digest-checked" },
        { "ls",         1, 2,        0,                                     verb_ls,
          "List a directory of a workspace" },
        { "revisions",  1, 1,        0,                                     verb_revisions,
          "List the revisions (snapshots after runs) of a workspace" },
        { "tree",       2, 3,        0,                                     verb_tree,
          "List a directory of a workspace's revision" },
        { "restore",    2, 2,        0,                                     verb_restore,
          "Restore a workspace to a revision" },
        { "rm",         2, 2,        0,                                     verb_rm,
          "Remove a file (or empty directory) of a workspace" },
        { "teardown",   1, 1,        0,                                     verb_teardown,
          "Stop every running execution of a workspace" },
        { "quota",      0, UINT_MAX, 0,                                     verb_quota,
          "Show the quota settings, or change them: quota set KEY=SIZE..." },
        { "policy",     0, UINT_MAX, 0,                                     verb_policy,
          "Show or change the sandboxes' network policy" },
};

static void help(FILE *f) {
        fprintf(f,
                "%1$s [OPTIONS...] COMMAND\n"
                "%1$s [OPTIONS...] exec [EXEC OPTIONS...] -- PROGRAM [ARGUMENTS...]\n"
                "%1$s [OPTIONS...] exec [EXEC OPTIONS...] --language LANG (--code CODE | --file FILE | -)\n"
                "%1$s [OPTIONS...] shell [EXEC OPTIONS...] [--follow | --detach] COMMAND\n"
                "%1$s [OPTIONS...] logs ID [--stream stdout|stderr] [--offset N] [--follow]\n"
                "%1$s [OPTIONS...] upload WORKSPACE LOCAL [REMOTE]\n"
                "%1$s [OPTIONS...] upload WORKSPACE --multipart LOCAL...\n"
                "%1$s [OPTIONS...] download WORKSPACE REMOTE [LOCAL | -] [--revision EXEC_ID]\n"
                "%1$s [OPTIONS...] ls WORKSPACE [DIR]\n"
                "%1$s [OPTIONS...] tree WORKSPACE EXEC_ID [DIR]\n"
                "%1$s [OPTIONS...] restore WORKSPACE EXEC_ID\n"
                "%1$s [OPTIONS...] quota [show | set KEY=SIZE...]\n"
                "%1$s [OPTIONS...] policy [show | set none | set allowlist ENTRY... | allow ENTRY... |\n"
                "                         deny ENTRY... | mirrors (CIDR... | none)]\n"
                "\n"
                "Query and control the sandbox-runner daemon.\n"
                "\n"
                "Commands:\n",
                PROGRAM);
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-24s %s\n", verbs[i].name, verbs[i].summary);
        fprintf(f,
                "\n"
                "Options:\n"
                "  -h --help                Show this help\n"
                "     --version             Show the version\n"
                "     --url=URL             Daemon address: http://HOST:PORT or unix:/PATH\n"
                "                           (default: $SANDBOX_RUNNER_URL, else %s)\n"
                "     --token-file=FILE     Read the API token from FILE\n"
                "     --signing-key-file=FILE\n"
                "                           Read the request signing key from FILE\n"
                "     --json                Print the daemon's JSON answer\n"
                "  -v --verbose             Say more on standard error (e.g. the next log offset)\n"
                "     --timeout=SEC         Give up after SEC seconds (default: %u, 0: never;\n"
                "                           exec/shell: at least the execution's timeout + %us)\n"
                "\n"
                "Exec options (exec and shell):\n"
                "     --language=LANG       python, shell or r; the code from --code, --file or\n"
                "                           '-' (standard input) (exec only)\n"
                "     --code=CODE           The code to run (exec only)\n"
                "     --file=FILE           Read the code from FILE (exec only)\n"
                "     --workspace=ID        Run in workspace ID (default: the daemon's \"default\")\n"
                "     --id=ID               Execution id (default: chosen by the daemon)\n"
                "     --timeout-ms=N        Kill the run after N milliseconds (default: the daemon's)\n"
                "     --memory=BYTES        Memory limit; K, M, G, T suffixes (1024-based)\n"
                "     --tasks=N             Limit on processes and threads\n"
                "     --cpu=PERCENT         CPU quota, 100 = one CPU\n"
                "     --env=NAME=VALUE      Set an environment variable (repeatable)\n"
                "     --cwd=DIR             Working directory, relative to /workspace\n"
                "     --stdin-file=FILE     Feed FILE (UTF-8 text; '-': standard input) to the run\n"
                "     --follow              shell: start a managed run and stream its output;\n"
                "                           logs: keep reading until the run ends\n"
                "     --detach              shell: start a managed run, print its id, exit\n"
                "\n"
                "Other command options:\n"
                "     --stream=STREAM       logs: stdout (default) or stderr\n"
                "     --offset=N            logs: start at byte N\n"
                "     --revision=EXEC_ID    download: the file as the run EXEC_ID left it\n"
                "     --multipart           upload: several files in one multipart request\n"
                "\n"
                "exec and shell print the run's output and exit with its exit code (128+N when\n"
                "killed by signal N, 124 on timeout, 125 on another limit or cancellation).\n"
                "\n"
                "See the %s(1) man page for details.\n",
                HTTP_CLIENT_DEFAULT_URL, (unsigned) (DEFAULT_TIMEOUT_USEC / USEC_PER_SEC),
                (unsigned) (EXEC_TIMEOUT_MARGIN_USEC / USEC_PER_SEC), PROGRAM);
}

static int parse_timeout(const char *s, uint64_t *ret_usec) {
        char *end = NULL;
        double d;

        if (isempty(s) || strchr(s, '-'))
                return -EINVAL;

        errno = 0;
        d = strtod(s, &end);
        if (errno != 0 || !end || *end != '\0' || !isfinite(d) || d < 0 || d > TIMEOUT_SEC_MAX)
                return -EINVAL;

        *ret_usec = (uint64_t) (d * USEC_PER_SEC + 0.5);
        return 0;
}

_printf_(2, 3)
static int bad_value(const char *value, const char *fmt, ...) {
        _cleanup_free_ char *e = NULL, *m = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0)
                m = NULL;

        (void) output_escape(value, &e);
        log_error("Invalid value '%s': %s", e ?: "", m ?: "out of memory");
        return -EINVAL;
}

static int parse_uint_option(const char *name, const char *value, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t v;
        int r;

        r = exec_parse_uint(value, max, &v);
        if (r < 0 || v < min)
                return bad_value(value, "%s expects a whole number from %llu to %llu.", name,
                                 (unsigned long long) min, (unsigned long long) max);
        *ret = v;
        return 0;
}

enum {
        ARG_VERSION = 0x100,
        ARG_URL,
        ARG_TOKEN_FILE,
        ARG_SIGNING_KEY_FILE,
        ARG_JSON,
        ARG_TIMEOUT,
        ARG_VERBOSE,
        /* exec and shell */
        ARG_EXEC_FIRST,
        ARG_WORKSPACE = ARG_EXEC_FIRST,
        ARG_ID,
        ARG_TIMEOUT_MS,
        ARG_MEMORY,
        ARG_TASKS,
        ARG_CPU,
        ARG_ENV,
        ARG_CWD,
        ARG_STDIN_FILE,
        ARG_LANGUAGE,
        ARG_CODE,
        ARG_FILE,
        ARG_EXEC_LAST = ARG_FILE,
        /* of some other commands */
        ARG_FOLLOW,
        ARG_DETACH,
        ARG_STREAM,
        ARG_OFFSET,
        ARG_REVISION,
        ARG_MULTIPART,
};

static const struct option options[] = {
        { "help",             no_argument,       NULL, 'h'                  },
        { "version",          no_argument,       NULL, ARG_VERSION          },
        { "url",              required_argument, NULL, ARG_URL              },
        { "token-file",       required_argument, NULL, ARG_TOKEN_FILE       },
        { "signing-key-file", required_argument, NULL, ARG_SIGNING_KEY_FILE },
        { "json",             no_argument,       NULL, ARG_JSON             },
        { "timeout",          required_argument, NULL, ARG_TIMEOUT          },
        { "verbose",          no_argument,       NULL, 'v'                  },
        { "workspace",        required_argument, NULL, ARG_WORKSPACE        },
        { "id",               required_argument, NULL, ARG_ID               },
        { "timeout-ms",       required_argument, NULL, ARG_TIMEOUT_MS       },
        { "memory",           required_argument, NULL, ARG_MEMORY           },
        { "tasks",            required_argument, NULL, ARG_TASKS            },
        { "cpu",              required_argument, NULL, ARG_CPU              },
        { "env",              required_argument, NULL, ARG_ENV              },
        { "cwd",              required_argument, NULL, ARG_CWD              },
        { "stdin-file",       required_argument, NULL, ARG_STDIN_FILE       },
        { "language",         required_argument, NULL, ARG_LANGUAGE         },
        { "code",             required_argument, NULL, ARG_CODE             },
        { "file",             required_argument, NULL, ARG_FILE             },
        { "follow",           no_argument,       NULL, ARG_FOLLOW           },
        { "detach",           no_argument,       NULL, ARG_DETACH           },
        { "stream",           required_argument, NULL, ARG_STREAM           },
        { "offset",           required_argument, NULL, ARG_OFFSET           },
        { "revision",         required_argument, NULL, ARG_REVISION         },
        { "multipart",        no_argument,       NULL, ARG_MULTIPART        },
        {}
};

static VerbFlags option_class(int c) {
        if (c >= ARG_EXEC_FIRST && c <= ARG_EXEC_LAST)
                return VERB_EXEC_OPTIONS;
        switch (c) {
        case ARG_FOLLOW:
                return VERB_FOLLOW;
        case ARG_DETACH:
                return VERB_DETACH;
        case ARG_STREAM:
        case ARG_OFFSET:
                return VERB_LOG_OPTIONS;
        case ARG_REVISION:
                return VERB_REVISION;
        case ARG_MULTIPART:
                return VERB_MULTIPART;
        default:
                return 0;       /* a global option */
        }
}

static const char *option_name(int c) {
        for (size_t i = 0; options[i].name; i++)
                if (options[i].val == c)
                        return options[i].name;
        return "?";
}

/* Options may come before the command and after it (before a program's argv for exec).
 * Return: 1 to go on, 0 to exit successfully (--help, --version), <0 on a usage error. */
static int parse_options(int argc, char *argv[], bool options_first) {
        int c, r;

        /* getopt_long() prefixes its messages with argv[0]; make that the program's name. */
        if (argc > 0)
                argv[0] = (char *) PROGRAM;

        /* optind = 0 makes glibc start over, also re-reading the optstring's "+". */
        optind = 0;
        while ((c = getopt_long(argc, argv, options_first ? "+hv" : "hv", options, NULL)) >= 0) {
                VerbFlags class = option_class(c);

                for (size_t i = 0; class && i < ELEMENTSOF(option_classes); i++)
                        if (option_classes[i].flag == class && !arg_class_option[i])
                                arg_class_option[i] = option_name(c);

                switch (c) {
                case 'h':
                        help(stdout);
                        return 0;
                case ARG_VERSION:
                        printf("%s %s\n", PROGRAM, PACKAGE_VERSION);
                        return 0;
                case ARG_URL:
                        if (isempty(optarg)) {
                                log_error("--url= needs a value.");
                                return -EINVAL;
                        }
                        arg_url = optarg;
                        break;
                case ARG_TOKEN_FILE:
                        if (isempty(optarg)) {
                                log_error("--token-file= needs a value.");
                                return -EINVAL;
                        }
                        arg_token_file = optarg;
                        break;
                case ARG_SIGNING_KEY_FILE:
                        if (isempty(optarg)) {
                                log_error("--signing-key-file= needs a value.");
                                return -EINVAL;
                        }
                        arg_signing_key_file = optarg;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case 'v':
                        arg_verbose = true;
                        break;
                case ARG_FOLLOW:
                        arg_follow = true;
                        break;
                case ARG_DETACH:
                        arg_detach = true;
                        break;
                case ARG_STREAM:
                        if (!streq(optarg, "stdout") && !streq(optarg, "stderr"))
                                return bad_value(optarg, "--stream expects stdout or stderr.");
                        arg_stream = optarg;
                        break;
                case ARG_OFFSET:
                        r = parse_uint_option("--offset", optarg, 0, INT64_MAX, &arg_offset);
                        if (r < 0)
                                return r;
                        break;
                case ARG_REVISION:
                        if (isempty(optarg))
                                return bad_value(optarg, "--revision needs an execution id.");
                        arg_revision = optarg;
                        break;
                case ARG_MULTIPART:
                        arg_multipart = true;
                        break;
                case ARG_TIMEOUT:
                        r = parse_timeout(optarg, &arg_timeout_usec);
                        if (r < 0) {
                                _cleanup_free_ char *e = NULL;

                                (void) output_escape(optarg, &e);
                                log_error("Invalid --timeout '%s': expected seconds, 0 to %.0f.",
                                          e ?: "", TIMEOUT_SEC_MAX);
                                return r;
                        }
                        arg_timeout_set = true;
                        break;
                case ARG_WORKSPACE:
                        if (isempty(optarg))
                                return bad_value(optarg, "--workspace needs a workspace id.");
                        arg_workspace = optarg;
                        break;
                case ARG_ID:
                        if (isempty(optarg))
                                return bad_value(optarg, "--id needs an execution id.");
                        arg_execution_id = optarg;
                        break;
                case ARG_TIMEOUT_MS:
                        r = parse_uint_option("--timeout-ms", optarg, 1, EXEC_TIMEOUT_MS_MAX, &arg_exec_timeout_ms);
                        if (r < 0)
                                return r;
                        break;
                case ARG_MEMORY:
                        r = exec_parse_size(optarg, &arg_memory);
                        if (r < 0 || arg_memory == 0 || arg_memory > INT64_MAX)
                                return bad_value(optarg, "--memory expects a number of bytes, optionally "
                                                 "with a K, M, G or T suffix (e.g. 512M).");
                        break;
                case ARG_TASKS:
                        r = parse_uint_option("--tasks", optarg, 1, 1000000, &arg_tasks);
                        if (r < 0)
                                return r;
                        break;
                case ARG_CPU: {
                        _cleanup_free_ char *v = strdup(optarg);
                        size_t n;

                        if (!v) {
                                log_error("Out of memory.");
                                return -ENOMEM;
                        }
                        /* "50%" reads naturally; the sign is optional. */
                        n = strlen(v);
                        if (n > 0 && v[n - 1] == '%')
                                v[n - 1] = '\0';
                        r = exec_parse_uint(v, 100000, &arg_cpu);
                        if (r < 0 || arg_cpu == 0)
                                return bad_value(optarg, "--cpu expects a percentage from 1 to 100000 "
                                                 "(100 = one CPU).");
                        break;
                }
                case ARG_ENV: {
                        const char **l;

                        if (!strchr(optarg, '=') || optarg[0] == '=')
                                return bad_value(optarg, "--env expects NAME=VALUE.");
                        l = reallocarray(arg_env, arg_n_env + 1, sizeof(char *));
                        if (!l) {
                                log_error("Out of memory.");
                                return -ENOMEM;
                        }
                        arg_env = l;
                        arg_env[arg_n_env++] = optarg;
                        break;
                }
                case ARG_CWD:
                        if (isempty(optarg))
                                return bad_value(optarg, "--cwd needs a directory.");
                        arg_cwd = optarg;
                        break;
                case ARG_STDIN_FILE:
                        if (isempty(optarg))
                                return bad_value(optarg, "--stdin-file needs a file name ('-' for standard input).");
                        arg_stdin_file = optarg;
                        break;
                case ARG_LANGUAGE:
                        if (!streq(optarg, "python") && !streq(optarg, "shell") && !streq(optarg, "r"))
                                return bad_value(optarg, "--language expects python, shell or r.");
                        arg_language = optarg;
                        break;
                case ARG_CODE:
                        arg_code = optarg;
                        break;
                case ARG_FILE:
                        if (isempty(optarg))
                                return bad_value(optarg, "--file needs a file name.");
                        arg_code_file = optarg;
                        break;
                case '?':
                        return -EINVAL;         /* getopt_long() has said what is wrong */
                default:
                        abort();        /* getopt_long() returned an option we did not list */
                }
        }

        return 1;
}

/* Return: the exit code. */
static int dispatch(int argc, char *argv[]) {
        const Verb *verb = NULL;
        const char *name;
        unsigned n;
        int r;

        if (optind >= argc) {
                log_error("Missing command.");
                help(stderr);
                return CTL_EXIT_USAGE;
        }
        name = argv[optind];

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name)) {
                        verb = verbs + i;
                        break;
                }
        if (!verb) {
                _cleanup_free_ char *e = NULL;

                (void) output_escape(name, &e);
                log_error("Unknown command '%s'. Try '%s --help'.", e ?: "", PROGRAM);
                return CTL_EXIT_USAGE;
        }

        /* The command's own options, and the global ones again, after its name. */
        argc -= optind;
        argv += optind;
        r = parse_options(argc, argv, verb->flags & VERB_OPTIONS_FIRST);
        if (r < 0) {
                fprintf(stderr, "Try '%s --help' for more information.\n", PROGRAM);
                return CTL_EXIT_USAGE;
        }
        if (r == 0)
                return flush_stdout();

        for (size_t i = 0; i < ELEMENTSOF(option_classes); i++)
                if (arg_class_option[i] && !(verb->flags & option_classes[i].flag)) {
                        log_error("--%s is an option of %s, not of '%s'.", arg_class_option[i],
                                  option_classes[i].commands, name);
                        return CTL_EXIT_USAGE;
                }

        n = argc - optind;
        if (n < verb->min_args) {
                log_error("Missing argument for '%s'.", name);
                return CTL_EXIT_USAGE;
        }
        if (n > verb->max_args) {
                log_error("Too many arguments for '%s'.", name);
                return CTL_EXIT_USAGE;
        }
        return verb->run(n, argv + optind);
}

int main(int argc, char *argv[]) {
        CURLcode code;
        int r;

        /* Options before the command; parsing stops at its name. */
        r = parse_options(argc, argv, true);
        if (r < 0) {
                fprintf(stderr, "Try '%s --help' for more information.\n", PROGRAM);
                return CTL_EXIT_USAGE;
        }
        if (r == 0)
                return flush_stdout();

        code = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (code != CURLE_OK) {
                log_error("Failed to initialise libcurl: %s", curl_easy_strerror(code));
                return CTL_EXIT_FAILURE;
        }

        r = dispatch(argc, argv);

        curl_global_cleanup();
        free(arg_env);
        return r;
}
