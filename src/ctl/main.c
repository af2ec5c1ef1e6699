/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runnerctl: command line, verb table and exit codes; wires the CLI's modules. */

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "build-config.h"
#include "credentials.h"
#include "ctl-util.h"
#include "http-client.h"
#include "output.h"

#define PROGRAM "sandbox-runnerctl"

/* Answers are small, well-formed objects; anything nested deeper is refused. */
#define JSON_DEPTH_MAX 64

/* Generous: /health and /status answer at once; a hung daemon should not hang a script. */
#define DEFAULT_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define TIMEOUT_SEC_MAX (7 * 24 * 3600.0)

static const char *arg_url = NULL;
static const char *arg_token_file = NULL;
static const char *arg_signing_key_file = NULL;
static bool arg_json = false;
static uint64_t arg_timeout_usec = DEFAULT_TIMEOUT_USEC;

typedef struct Verb {
        const char *name;
        unsigned max_args;      /* after the verb itself */
        int (*run)(int argc, char *argv[]);
        const char *summary;
} Verb;

SR_DEFINE_FREE_FUNC(json_object *, json_object_put);
SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);

_printf_(1, 2)
static void log_error(const char *fmt, ...) {
        va_list ap;

        fputs(PROGRAM ": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
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

/* The token is needed only by some verbs, so it is looked up only then. */
static int acquire_token(char **ret) {
        _cleanup_free_ char *source = NULL;
        const CredentialSpec spec = {
                .explicit_file = arg_token_file,
                .option_name = "--token-file",
                .env_value = "SANDBOX_RUNNER_TOKEN",
                .env_file = "SANDBOX_RUNNER_TOKEN_FILE",
                .credential_name = "api-token",
                .fallback_dir = CREDENTIAL_FALLBACK_DIR,
                .text = true,
        };
        int r;

        r = credential_find(&spec, ret, NULL, &source);
        if (r == -ENOKEY) {
                log_error("No API token: use --token-file FILE, $SANDBOX_RUNNER_TOKEN, "
                          "$SANDBOX_RUNNER_TOKEN_FILE, $CREDENTIALS_DIRECTORY/api-token or "
                          CREDENTIAL_FALLBACK_DIR "/api-token.");
                return -r;
        }
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return -r;
        }
        if (r < 0) {
                _cleanup_free_ char *esource = NULL;

                (void) output_escape(source ?: "?", &esource);
                log_error("Cannot use the API token from %s: %s.", esource ?: "?", credential_error(r, spec.text));
                return -r;
        }
        return 0;
}

/* Not used by any verb yet: the signed verbs (execute, ...) will call it. */
_unused_ static int acquire_signing_key(char **ret, size_t *ret_size) {
        _cleanup_free_ char *source = NULL;
        const CredentialSpec spec = {
                .explicit_file = arg_signing_key_file,
                .option_name = "--signing-key-file",
                .env_value = "SANDBOX_RUNNER_SIGNING_KEY",
                .env_file = "SANDBOX_RUNNER_SIGNING_KEY_FILE",
                .credential_name = "signing-key",
                .fallback_dir = CREDENTIAL_FALLBACK_DIR,
                .text = false,
        };
        int r;

        r = credential_find(&spec, ret, ret_size, &source);
        if (r == -ENOKEY) {
                log_error("No signing key: use --signing-key-file FILE, $SANDBOX_RUNNER_SIGNING_KEY, "
                          "$SANDBOX_RUNNER_SIGNING_KEY_FILE, $CREDENTIALS_DIRECTORY/signing-key or "
                          CREDENTIAL_FALLBACK_DIR "/signing-key.");
                return -r;
        }
        if (r < 0) {
                _cleanup_free_ char *esource = NULL;

                (void) output_escape(source ?: "?", &esource);
                log_error("Cannot use the signing key from %s: %s.", esource ?: "?", credential_error(r, spec.text));
                return -r;
        }
        return 0;
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

static const char *json_string_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

static int flush_stdout(void) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
                log_error("Failed to write to standard output: %s", strerror(errno ?: EIO));
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

/*
 * Do one request and present the answer. Returns the exit code.
 * @first: keys shown first in the human form.
 */
static int call(const char *method, const char *path, bool need_token, const char *const *first) {
        _cleanup_(http_client_freep) HttpClient *client = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *curl_error = NULL, *eurl = NULL;
        _cleanup_erase_ char *token = NULL;
        int r;

        r = output_escape(url(), &eurl);
        if (r < 0) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        r = http_client_new(url(), arg_timeout_usec, PROGRAM "/" PACKAGE_VERSION, &client);
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

        if (need_token) {
                r = acquire_token(&token);
                if (r != 0)
                        return CTL_EXIT_FAILURE;
        }

        r = http_client_request(client,
                                &(const HttpRequest) {
                                        .method = method,
                                        .path = path,
                                        .bearer = token,
                                },
                                &resp, &curl_error);
        if (r < 0) {
                _cleanup_free_ char *emsg = NULL;

                (void) output_escape(curl_error ?: strerror(-r), &emsg);
                if (errno_is_unavailable(r)) {
                        log_error("Cannot connect to sandbox-runner at %s: %s", eurl, emsg ?: strerror(-r));
                        return CTL_EXIT_UNAVAILABLE;
                }
                if (r == -EFBIG)
                        log_error("Answer from %s is larger than %zu MiB, refusing it.",
                                  eurl, HTTP_RESPONSE_SIZE_MAX / 1024 / 1024);
                else
                        log_error("Request to %s failed: %s", eurl, emsg ?: strerror(-r));
                return CTL_EXIT_FAILURE;
        }

        /* The token is no longer needed; do not keep it around while printing. */
        erase_and_free(STEAL(token));

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

        if (arg_json || !json_object_is_type(answer, json_type_object))
                r = output_json(stdout, answer);
        else
                r = output_flat(stdout, answer, first);
        if (r == -ENOMEM) {
                log_error("Out of memory.");
                return CTL_EXIT_FAILURE;
        }

        return flush_stdout();
}

static int verb_health(int argc, char *argv[]) {
        static const char *const first[] = { "status", "version", "uptimeSec", NULL };

        return call("GET", "/health", false, first);
}

static int verb_status(int argc, char *argv[]) {
        static const char *const first[] = { "status", "version", "uptimeSec", NULL };

        return call("GET", "/status", true, first);
}

static const Verb verbs[] = {
        { "health", 0, verb_health, "Show the daemon's health (no token needed)" },
        { "status", 0, verb_status, "Show running executions, counts and probe details" },
};

static void help(FILE *f) {
        fprintf(f,
                "%1$s [OPTIONS...] COMMAND\n"
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
                "     --timeout=SEC         Give up after SEC seconds (default: %u, 0: never)\n"
                "\n"
                "See the %s(1) man page for details.\n",
                HTTP_CLIENT_DEFAULT_URL, (unsigned) (DEFAULT_TIMEOUT_USEC / USEC_PER_SEC), PROGRAM);
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

/* Return: 1 to go on, 0 to exit successfully (--help, --version), <0 on a usage error. */
static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_URL,
                ARG_TOKEN_FILE,
                ARG_SIGNING_KEY_FILE,
                ARG_JSON,
                ARG_TIMEOUT,
        };
        static const struct option options[] = {
                { "help",             no_argument,       NULL, 'h'                  },
                { "version",          no_argument,       NULL, ARG_VERSION          },
                { "url",              required_argument, NULL, ARG_URL              },
                { "token-file",       required_argument, NULL, ARG_TOKEN_FILE       },
                { "signing-key-file", required_argument, NULL, ARG_SIGNING_KEY_FILE },
                { "json",             no_argument,       NULL, ARG_JSON             },
                { "timeout",          required_argument, NULL, ARG_TIMEOUT          },
                {}
        };
        int c, r;

        /* getopt_long() prefixes its messages with argv[0]; make that the program's name. */
        if (argc > 0)
                argv[0] = (char *) PROGRAM;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
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
                case ARG_TIMEOUT:
                        r = parse_timeout(optarg, &arg_timeout_usec);
                        if (r < 0) {
                                _cleanup_free_ char *e = NULL;

                                (void) output_escape(optarg, &e);
                                log_error("Invalid --timeout '%s': expected seconds, 0 to %.0f.",
                                          e ?: "", TIMEOUT_SEC_MAX);
                                return r;
                        }
                        break;
                case '?':
                        return -EINVAL;         /* getopt_long() has said what is wrong */
                default:
                        abort();        /* getopt_long() returned an option we did not list */
                }

        return 1;
}

static int dispatch(int argc, char *argv[]) {
        const char *name;

        if (optind >= argc) {
                log_error("Missing command.");
                help(stderr);
                return CTL_EXIT_USAGE;
        }
        name = argv[optind];

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
                unsigned n = argc - optind - 1;

                if (!streq(verbs[i].name, name))
                        continue;

                if (n > verbs[i].max_args) {
                        log_error("Too many arguments for '%s'.", name);
                        return CTL_EXIT_USAGE;
                }
                return verbs[i].run(argc - optind, argv + optind);
        }

        {
                _cleanup_free_ char *e = NULL;

                (void) output_escape(name, &e);
                log_error("Unknown command '%s'. Try '%s --help'.", e ?: "", PROGRAM);
        }
        return CTL_EXIT_USAGE;
}

int main(int argc, char *argv[]) {
        CURLcode code;
        int r;

        r = parse_argv(argc, argv);
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
        return r;
}
