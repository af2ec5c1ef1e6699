/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the command modules of sandbox-runnerctl share with main.c: the options (one CtlOptions,
 * passed to every command), messages, one request to the daemon and the request/answer helpers,
 * JSON helpers, and the commands each module implements. No module keeps mutable globals. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ctl-util.h"
#include "http-client.h"
#include "util/json-util.h"

#define PROGRAM "sandbox-runnerctl"

/* Generous: /health and /status answer at once; a hung daemon should not hang a script. */
#define DEFAULT_TIMEOUT_USEC (30 * USEC_PER_SEC)

/* Transfers whose length is not known beforehand (uploads, downloads, followed logs) have no
 * overall time limit unless --timeout is given; connecting still is limited to this. */
#define CONNECT_TIMEOUT_USEC (30 * USEC_PER_SEC)

/* exec and shell: what the request may take beyond the execution's own timeout (sandbox set-up,
 * waiting for the workspace, the snapshot, the answer's transfer); the longest --timeout-ms. */
#define EXEC_TIMEOUT_MARGIN_USEC (30 * USEC_PER_SEC)
#define EXEC_TIMEOUT_MS_MAX ((uint64_t) 7 * 24 * 3600 * 1000)

/* Options of the CLI: which command may take which (see options.c). */
typedef enum VerbFlags {
        VERB_EXEC_OPTIONS = 1 << 0,     /* takes the options of exec/shell */
        VERB_OPTIONS_FIRST = 1 << 1,    /* options end at the first argument (it is a program's argv) */
        VERB_FOLLOW = 1 << 2,           /* --follow */
        VERB_DETACH = 1 << 3,           /* --detach */
        VERB_LOG_OPTIONS = 1 << 4,      /* --stream, --offset */
        VERB_REVISION = 1 << 5,         /* --revision */
        VERB_MULTIPART = 1 << 6,        /* --multipart */
        VERB_ENV_OPTIONS = 1 << 7,      /* the options of env (env.c checks which subcommand takes which) */
        VERB_WAIT = 1 << 8,             /* --wait (env create/install, npu submit) */
        VERB_NPU_OPTIONS = 1 << 9,      /* --session, --config (npu.c checks which subcommand takes which) */
} VerbFlags;

/* How many classes of command options there are (options.c: option_classes[]). */
#define CTL_OPTION_CLASSES 9

/* Every option of the command line, filled by options_parse() and read by the commands. */
typedef struct CtlOptions {
        /* Global options. */
        const char *url;
        const char *token_file;
        const char *signing_key_file;
        bool json;
        bool verbose;
        uint64_t timeout_usec;
        bool timeout_set;

        /* Options of some commands. */
        bool follow;                    /* shell, logs, env setup, npu submit, npu log */
        bool wait;                      /* env create, env install, npu submit */
        bool detach;                    /* shell */
        const char *stream;             /* logs: "stdout" (default) or "stderr" */
        uint64_t offset;                /* logs */
        const char *revision;           /* download */
        bool multipart;                 /* upload */

        /* Options of exec and shell. */
        const char *workspace;
        const char *execution_id;
        uint64_t exec_timeout_ms;       /* 0: not given, the daemon's default */
        uint64_t memory;                /* 0: not given */
        uint64_t tasks;
        uint64_t cpu;
        const char **env;               /* "NAME=VALUE", pointing into argv; owned */
        size_t n_env;
        const char *cwd;
        const char *environment;        /* --environment: the run's environment (/opt/science-env) */
        unsigned *npu_chips;            /* --npu: chip logic ids; owned */
        size_t n_npu_chips;
        const char **devices;           /* --device: CDI device names, pointing into argv; owned */
        size_t n_devices;
        const char *stdin_file;
        const char *language;
        const char *code;
        const char *code_file;

        /* Options of env. The lists point into argv; the arrays are owned. */
        const char *env_kind;           /* create: python, r or conda */
        const char *env_index_url;      /* create */
        const char *env_preset;         /* create */
        bool env_offline;               /* create */
        const char **env_channels;      /* create: --channel, repeatable */
        size_t n_env_channels;
        const char **env_wheels;        /* create, install: --wheel WORKSPACE:PATH, repeatable */
        size_t n_env_wheels;
        bool env_retry;                 /* setup */

        /* Options of npu (they point into argv). */
        const char *npu_session;        /* --session: the broker session (a workspace id) */
        const char *npu_config;         /* --config: submit's configPath, in the session's workspace */

        /* The first option of each class given, for "not an option of this command". */
        const char *class_option[CTL_OPTION_CLASSES];
} CtlOptions;

#define CTL_OPTIONS_INIT { .timeout_usec = DEFAULT_TIMEOUT_USEC }

void ctl_options_done(CtlOptions *o);

/* options_parse() returns these (or <0 on a usage error, already reported). */
enum {
        OPTIONS_EXIT = 0,               /* done: --version was printed */
        OPTIONS_CONTINUE = 1,
        OPTIONS_HELP = 2,               /* --help: print the help and exit */
};

/* Options may come before the command and after it (before a program's argv for exec). */
int options_parse(CtlOptions *o, int argc, char *argv[], bool options_first);

/* A command-only option given to a command that does not take it is reported. Returns an exit code. */
int options_check_verb(const CtlOptions *o, VerbFlags flags, const char *name);

/* The overall time limit of a transfer whose length is not known beforehand (uploads, downloads,
 * requests that wait for a workspace): none unless --timeout is given. */
uint64_t ctl_long_timeout(const CtlOptions *o);

_printf_(1, 2) void log_error(const char *fmt, ...);

/* Where the bytes of a log go (runs' and NPU jobs' logs), and how many there were. */
typedef struct LogSink {
        int fd;                 /* -EBADF: discard (only count) */
        uint64_t bytes;
        int error;
} LogSink;

/* log_sink_write() - an HTTP body writer into a LogSink (userdata). Return: 0 or -errno (logged). */
int log_sink_write(const void *data, size_t size, void *userdata);

/* "Out of memory." Returns CTL_EXIT_FAILURE. */
int log_oom(void);
/* Flush standard output, reporting a write error. Returns an exit code. */
int flush_stdout(void);

typedef struct Request {
        const char *method;
        const char *path;               /* as the daemon sees it; signed as it is */
        bool need_token;
        bool sign;                      /* X-Sandbox-Timestamp and X-Sandbox-Signature */
        const char *body;               /* JSON, or NULL */
        size_t body_size;
        json_object *json;              /* or this, serialised as the body (json_body()) */
        uint64_t timeout_usec;          /* whole request; 0: none */
        uint64_t connect_timeout_usec;  /* 0: libcurl's default */
        size_t max_response_size;       /* 0: HTTP_RESPONSE_SIZE_MAX */

        /* Streamed bodies (see http-client.h); never signed. */
        HttpBodyReader read_body;
        HttpBodyRewinder rewind_body;
        void *read_userdata;
        int64_t read_size;
        const char *content_type;       /* of the streamed body */
        const HttpMimePart *parts;
        size_t n_parts;
        HttpBodyWriter write_body;
        void *write_userdata;
        const char *accept;

        bool raw_answer;                /* a 2xx answer is not JSON (it went to write_body) */
        /* A callback's error: when it is set (< 0) after a failed transfer, the callback's owner
         * reports it and request() says nothing more. */
        const int *callback_error;
        HttpResponse *ret_response;     /* if not NULL, receives the 2xx answer (its headers) */
        /* An error answer with this status is not reported (the caller handles it); the exit
         * code is CTL_EXIT_FAILURE and *ret_status (if not NULL) says which status came. */
        long quiet_status;
        long *ret_status;
} Request;

/*
 * Do one request. Errors (no answer, error answer, non-JSON answer) are reported here, and with
 * --json an error object is also printed on standard output.
 * Returns an exit code: 0 with @ret_answer set to the 2xx answer's JSON (NULL for @raw_answer;
 * @ret_answer may be NULL when the caller needs only the status), else the failure's.
 */
int request(const CtlOptions *o, const Request *req, json_object **ret_answer);

/* The request/answer pattern of most commands: request(), then show_answer() with @first.
 * Returns the exit code. */
int request_and_show(const CtlOptions *o, const Request *req, const char *const *first);

/* POST @json (NULL: no body) to @path, signed, with the token and the --timeout limit. Returns an
 * exit code (see request()). */
int request_post_signed(const CtlOptions *o, const char *path, json_object *json, json_object **ret_answer);
/* The same, then show_answer() with @first. Returns an exit code. */
int request_post_signed_and_show(const CtlOptions *o, const char *path, json_object *json, const char *const *first);

/* PUT @json to @path with the token and the --timeout limit. Returns an exit code (see request()). */
int request_put(const CtlOptions *o, const char *path, json_object *json, json_object **ret_answer);

/* GET a log (@req: its path, time limits and error handling) into @sink, counted from 0; the 2xx
 * answer's headers in @ret_response. Returns an exit code (see request()). */
int request_log(const CtlOptions *o, const Request *req, LogSink *sink, HttpResponse *ret_response);

/* GET @path with the token and the --timeout limit. Returns an exit code (see request()). */
int request_get(const CtlOptions *o, const char *path, json_object **ret_answer);

/* GET @path; with --json the answer is shown and *@ret_answer is NULL (nothing more to print),
 * else the caller gets the answer to print. Returns an exit code. */
int request_get_unless_json(const CtlOptions *o, const char *path, json_object **ret_answer);

/* Print @answer: pretty JSON with --json, else aligned "key: value" lines with @first first.
 * Returns an exit code. */
int show_answer(const CtlOptions *o, json_object *answer, const char *const *first);

/* Field accessors that tolerate anything: NULL, @fallback or false when missing or mistyped. */
const char *json_string_field(json_object *o, const char *key);
json_object *json_array_field(json_object *o, const char *key);
int64_t json_int_field(json_object *o, const char *key, int64_t fallback);
bool json_bool_field(json_object *o, const char *key);

/* Builders (and json_add(), util/json-util.h): the value is consumed also on failure. Return 0,
 * -ENOMEM (-EFBIG: string > INT_MAX). */
int json_add_string(json_object *o, const char *key, const char *s, size_t n);
int json_add_u64(json_object *o, const char *key, uint64_t v);

/* The strings of the JSON array @l (NULL: none) escaped and comma-separated, or "(none)"; then a
 * newline. Return: 0 or -ENOMEM. */
int print_string_list(json_object *l);

/* The JSON text of @o, for a request body. NULL on OOM. */
const char *json_body(json_object *o, size_t *ret_size);

/* ---- kernel.c: Jupyter kernels (/api/kernels...) ------------------------------------------------ */

int verb_kernel(const CtlOptions *o, int argc, char *argv[]);

/* ---- daemon.c: the daemon's state ------------------------------------------------------------- */

int verb_health(const CtlOptions *o, int argc, char *argv[]);
/* check: GET /health judged item by item (check-util.h); exit 1 when an item failed. */
int verb_check(const CtlOptions *o, int argc, char *argv[]);
int verb_status(const CtlOptions *o, int argc, char *argv[]);

/* ---- execute.c: exec and shell ----------------------------------------------------------------- */

/* The exit code of a run that ended with @status (@estatus: escaped), @code as
 * exec_status_exit_code() says; a status other than exited/signaled is said (not with --json), a
 * missing exitCode/signal reported. */
int execution_outcome(const CtlOptions *o, const char *eid, const char *status, const char *estatus, int code);

int verb_exec(const CtlOptions *o, int argc, char *argv[]);
int verb_shell(const CtlOptions *o, int argc, char *argv[]);

/* ---- runs.c: managed shell executions ---------------------------------------------------------- */

/* shell --follow / --detach with the /execute-shell body @body. Returns the exit code. */
int run_managed_shell(const CtlOptions *o, json_object *body);
int verb_status_of(const CtlOptions *o, int argc, char *argv[]);
int verb_logs(const CtlOptions *o, int argc, char *argv[]);
int verb_cancel(const CtlOptions *o, int argc, char *argv[]);

/* ---- files.c: workspace files and revisions; upload.c, download.c ----------------------------- */

/* "/workspaces/<ws>" with the id escaped, followed by @fmt. NULL on OOM (reported). */
_printf_(2, 3) char *workspace_path(const char *ws, const char *fmt, ...);
/* A path inside the workspace, each segment escaped. NULL on OOM (reported). */
char *remote_path(const char *path);

int verb_upload(const CtlOptions *o, int argc, char *argv[]);
int verb_download(const CtlOptions *o, int argc, char *argv[]);
int verb_ls(const CtlOptions *o, int argc, char *argv[]);
int verb_revisions(const CtlOptions *o, int argc, char *argv[]);
int verb_tree(const CtlOptions *o, int argc, char *argv[]);
int verb_restore(const CtlOptions *o, int argc, char *argv[]);
int verb_rm(const CtlOptions *o, int argc, char *argv[]);
int verb_teardown(const CtlOptions *o, int argc, char *argv[]);

/* ---- settings.c: quota and network policy ------------------------------------------------------ */

int verb_quota(const CtlOptions *o, int argc, char *argv[]);
int verb_policy(const CtlOptions *o, int argc, char *argv[]);

/* ---- env.c: managed scientific environments ---------------------------------------------------- */

int verb_env(const CtlOptions *o, int argc, char *argv[]);

/* ---- npu.c: accelerators: chips, the host NPU broker's workloads and jobs ---------------------- */

int verb_npu(const CtlOptions *o, int argc, char *argv[]);
