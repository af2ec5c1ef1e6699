/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One request to the daemon, as every command makes it: the daemon's address, the API token and
 * the signing key (looked up only when a request needs them), the signature headers, the transfer
 * (http-client.c), and the answer: checked, parsed as JSON, errors reported once here. Also the
 * request/answer helpers most commands are made of. It calls credentials.c, sign.c,
 * http-client.c and output.c.
 */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "build-config.h"
#include "credentials.h"
#include "ctl.h"
#include "http-client.h"
#include "output.h"
#include "sign.h"

/* Answers are small, well-formed objects; anything nested deeper is refused. */
#define JSON_DEPTH_MAX 64

SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);

static const char *url(const CtlOptions *o) {
        const char *e;

        if (o->url)
                return o->url;
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
static int acquire_token(const CtlOptions *o, char **ret) {
        const CredentialSpec spec = {
                .explicit_file = o->token_file,
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
static int acquire_signing_key(const CtlOptions *o, char **ret, size_t *ret_size) {
        const CredentialSpec spec = {
                .explicit_file = o->signing_key_file,
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

/* Signature headers for @req, "X-Sandbox-Timestamp: ..." and "X-Sandbox-Signature: v1=...".
 * Returns an exit code (0: done). */
static int sign_request(const CtlOptions *o, const Request *req, char **ret_timestamp, char **ret_signature) {
        _cleanup_(erase_and_freep) char *key = NULL;
        _cleanup_free_ char *sig = NULL, *ts_header = NULL, *sig_header = NULL;
        size_t key_size = 0;
        time_t now;
        int r;

        r = acquire_signing_key(o, &key, &key_size);
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

/* The client for @req, the token if it needs one, the signature headers if it is signed.
 * Returns an exit code. */
static int request_prepare(const CtlOptions *o, const Request *req, const char *eurl, HttpClient **ret_client,
                           char **ret_token, char **ret_timestamp, char **ret_signature) {
        _cleanup_(http_client_freep) HttpClient *client = NULL;
        _cleanup_erase_ char *token = NULL;
        int r;

        r = http_client_new(url(o), req->timeout_usec, PROGRAM "/" PACKAGE_VERSION, &client);
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
                r = acquire_token(o, &token);
                if (r != 0)
                        return CTL_EXIT_FAILURE;
        }

        if (req->sign) {
                /* Only bodies held in memory can be signed. */
                if (req->read_body || req->n_parts > 0) {
                        log_error("Internal error: a streamed body cannot be signed.");
                        return CTL_EXIT_FAILURE;
                }
                r = sign_request(o, req, ret_timestamp, ret_signature);
                if (r != 0)
                        return r;
        }

        *ret_client = STEAL(client);
        *ret_token = STEAL(token);
        return 0;
}

/* A transfer that failed (error @r, libcurl's @curl_error): say why. Returns the exit code. */
static int request_failed(const Request *req, int r, const char *curl_error, const char *eurl) {
        _cleanup_free_ char *emsg = NULL;

        /* The callback's owner says what went wrong. */
        if (req->callback_error && *req->callback_error < 0)
                return CTL_EXIT_FAILURE;

        (void) output_escape(curl_error ?: strerror(-r), &emsg);
        if (errno_is_unavailable(r)) {
                log_error("Cannot connect to sandbox-runner at %s: %s. Is it running? Under systemd: 'systemctl "
                          "start sandbox-runner.socket' (then 'journalctl -u sandbox-runner'); started by hand: "
                          "'sandbox-runnerd --listen=ADDRESS' (tests/setup.sh run), whose log says why it stopped.",
                          eurl, emsg ?: strerror(-r));
                return CTL_EXIT_UNAVAILABLE;
        }
        if (r == -EFBIG)
                log_error("Answer from %s is larger than %zu MiB, refusing it.",
                          eurl, (req->max_response_size ?: HTTP_RESPONSE_SIZE_MAX) / 1024 / 1024);
        else
                log_error("Request to %s failed: %s", eurl, emsg ?: strerror(-r));
        return CTL_EXIT_FAILURE;
}

/* An error answer with a JSON body: say what the daemon said. Returns the exit code. */
static int request_error_answer(const CtlOptions *o, json_object *answer, long status) {
        _cleanup_free_ char *emsg = NULL, *ecode = NULL;
        const char *m, *c;

        /* With --json the error object is the output too, for scripts. */
        if (o->json) {
                (void) output_json(stdout, answer);
                (void) fflush(stdout);
        }

        m = json_string_field(answer, "message");
        /* Ours: {"error": code, "message"}; the Kernel Gateway routes': {"reason", "message"}. */
        c = json_string_field(answer, "error") ?: json_string_field(answer, "reason");
        if (output_escape(m ?: "Request failed", &emsg) < 0 ||
            output_escape(c ?: "unknown", &ecode) < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        log_error("%s (%s, HTTP %ld)", emsg, ecode, status);
        return CTL_EXIT_FAILURE;
}

/* Hand the answer's headers to the caller, if it asked for them. */
static void request_pass_response(const Request *req, HttpResponse *resp) {
        if (req->ret_response) {
                *req->ret_response = *resp;
                *resp = (HttpResponse) {};
        }
}

/* The answer @resp that came: checked, parsed. Returns an exit code (see request()). */
static int request_answer(const CtlOptions *o, const Request *req, HttpResponse *resp, const char *eurl,
                          json_object **ret_answer) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        bool success = resp->status >= 200 && resp->status < 300;
        int r;

        if (req->ret_status)
                *req->ret_status = resp->status;
        if (req->quiet_status > 0 && resp->status == req->quiet_status)
                return CTL_EXIT_FAILURE;

        if (req->raw_answer && success) {
                request_pass_response(req, resp);
                if (ret_answer)
                        *ret_answer = NULL;
                return 0;
        }

        r = parse_json(resp->body, resp->body_size, &answer);
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }
        if (r < 0) {
                if (success)
                        log_error("The answer from %s is not valid JSON (HTTP %ld).", eurl, resp->status);
                else
                        log_error("Request failed with HTTP %ld from %s (no JSON error body).",
                                  resp->status, eurl);
                return CTL_EXIT_FAILURE;
        }

        if (!success)
                return request_error_answer(o, answer, resp->status);

        request_pass_response(req, resp);
        if (ret_answer)
                *ret_answer = STEAL(answer);
        return 0;
}

int request(const CtlOptions *o, const Request *req_in, json_object **ret_answer) {
        _cleanup_(http_client_freep) HttpClient *client = NULL;
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *curl_error = NULL, *eurl = NULL, *ts_header = NULL, *sig_header = NULL;
        _cleanup_erase_ char *token = NULL;
        const char *headers[3] = {};
        Request req_copy = *req_in, *req = &req_copy;
        int r;

        /* A JSON body is sent (and signed) as its text. */
        if (req->json) {
                req->body = json_body(req->json, &req->body_size);
                if (!req->body)
                        return log_oom();
        }

        r = output_escape(url(o), &eurl);
        if (r < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        r = request_prepare(o, req, eurl, &client, &token, &ts_header, &sig_header);
        if (r != 0)
                return r;
        if (ts_header) {
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
        if (r < 0)
                return request_failed(req, r, curl_error, eurl);

        /* The token is no longer needed; do not keep it around while printing. */
        erase_and_free(STEAL(token));

        return request_answer(o, req, &resp, eurl, ret_answer);
}

int request_and_show(const CtlOptions *o, const Request *req, const char *const *first) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = request(o, req, &answer);
        if (r != 0)
                return r;

        return show_answer(o, answer, first);
}

/* A request of @method with the token and --timeout; @json (NULL: none) as its body. */
static Request json_request(const CtlOptions *o, const char *method, const char *path, json_object *json, bool sign) {
        return (Request) {
                .method = method,
                .path = path,
                .need_token = true,
                .sign = sign,
                .json = json,
                .timeout_usec = o->timeout_usec,
        };
}

int request_post_signed(const CtlOptions *o, const char *path, json_object *json, json_object **ret_answer) {
        Request req = json_request(o, "POST", path, json, true);

        return request(o, &req, ret_answer);
}

int request_post_signed_and_show(const CtlOptions *o, const char *path, json_object *json, const char *const *first) {
        Request req = json_request(o, "POST", path, json, true);

        return request_and_show(o, &req, first);
}

int request_put(const CtlOptions *o, const char *path, json_object *json, json_object **ret_answer) {
        Request req = json_request(o, "PUT", path, json, false);

        return request(o, &req, ret_answer);
}

int request_log(const CtlOptions *o, const Request *req, LogSink *sink, HttpResponse *ret_response) {
        json_object *answer = NULL;     /* a raw answer: stays NULL */
        Request get = *req;

        get.method = "GET";
        get.need_token = true;
        get.write_body = log_sink_write;
        get.write_userdata = sink;
        get.accept = "application/octet-stream";
        get.raw_answer = true;
        get.callback_error = &sink->error;
        get.ret_response = ret_response;
        sink->bytes = 0;
        sink->error = 0;
        return request(o, &get, &answer);
}

int request_get(const CtlOptions *o, const char *path, json_object **ret_answer) {
        return request(o,
                       &(const Request) {
                               .method = "GET",
                               .path = path,
                               .need_token = true,
                               .timeout_usec = o->timeout_usec,
                       },
                       ret_answer);
}

int request_get_unless_json(const CtlOptions *o, const char *path, json_object **ret_answer) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = request_get(o, path, &answer);
        if (r != 0)
                return r;
        if (o->json) {
                *ret_answer = NULL;
                return show_answer(o, answer, NULL);
        }
        *ret_answer = STEAL(answer);
        return 0;
}
