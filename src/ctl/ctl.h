/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the command modules of sandbox-runnerctl share with main.c: the options, messages, one
 * request to the daemon, JSON helpers, and the commands each module implements. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ctl-util.h"
#include "http-client.h"

#define PROGRAM "sandbox-runnerctl"

/* Generous: /health and /status answer at once; a hung daemon should not hang a script. */
#define DEFAULT_TIMEOUT_USEC (30 * USEC_PER_SEC)

/* Transfers whose length is not known beforehand (uploads, downloads, followed logs) have no
 * overall time limit unless --timeout is given; connecting still is limited to this. */
#define CONNECT_TIMEOUT_USEC (30 * USEC_PER_SEC)

/* Global options. */
extern bool arg_json;
extern bool arg_verbose;
extern uint64_t arg_timeout_usec;
extern bool arg_timeout_set;

/* Options of some commands. */
extern bool arg_follow;                 /* shell, logs */
extern bool arg_detach;                 /* shell */
extern const char *arg_stream;          /* logs: "stdout" (default) or "stderr" */
extern uint64_t arg_offset;             /* logs */
extern const char *arg_revision;        /* download */
extern bool arg_multipart;              /* upload */

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);

_printf_(1, 2) void log_error(const char *fmt, ...);
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
 * Returns an exit code: 0 with @ret_answer set to the 2xx answer's JSON (NULL for @raw_answer),
 * else the failure's.
 */
int request(const Request *req, json_object **ret_answer);

/* Print @answer: pretty JSON with --json, else aligned "key: value" lines with @first first.
 * Returns an exit code. */
int show_answer(json_object *answer, const char *const *first);

/* Field accessors that tolerate anything: NULL, @fallback or false when missing or mistyped. */
const char *json_string_field(json_object *o, const char *key);
int64_t json_int_field(json_object *o, const char *key, int64_t fallback);
bool json_bool_field(json_object *o, const char *key);

/* Builders: the value is consumed also on failure. Return 0, -ENOMEM (-EFBIG: string > INT_MAX). */
int json_add(json_object *o, const char *key, json_object *v);
int json_add_string(json_object *o, const char *key, const char *s, size_t n);
int json_add_u64(json_object *o, const char *key, uint64_t v);

/* The JSON text of @o, for a request body. NULL on OOM. */
const char *json_body(json_object *o, size_t *ret_size);

/* ---- runs.c: managed shell executions ---------------------------------------------------------- */

/* shell --follow / --detach with the /execute-shell body @body. Returns the exit code. */
int run_managed_shell(json_object *body);
int verb_status_of(int argc, char *argv[]);
int verb_logs(int argc, char *argv[]);
int verb_cancel(int argc, char *argv[]);

/* ---- files.c: workspace files and revisions ---------------------------------------------------- */

int verb_upload(int argc, char *argv[]);
int verb_download(int argc, char *argv[]);
int verb_ls(int argc, char *argv[]);
int verb_revisions(int argc, char *argv[]);
int verb_tree(int argc, char *argv[]);
int verb_restore(int argc, char *argv[]);
int verb_rm(int argc, char *argv[]);
int verb_teardown(int argc, char *argv[]);

/* ---- settings.c: quota and network policy ------------------------------------------------------ */

int verb_quota(int argc, char *argv[]);
int verb_policy(int argc, char *argv[]);
