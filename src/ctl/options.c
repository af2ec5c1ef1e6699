/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The command line of sandbox-runnerctl: the option table, which commands take which options,
 * parsing and checking every value into one CtlOptions. It prints only usage errors (and
 * --version); it makes no request and may call output.c, env-util.c, exec-util.c and transfer.c
 * helpers.
 */

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build-config.h"
#include "ctl.h"
#include "env-util.h"
#include "exec-util.h"
#include "npu-util.h"
#include "output.h"
#include "transfer.h"

#define TIMEOUT_SEC_MAX (7 * 24 * 3600.0)

/* Options that only some commands take, by the flag a command needs for them. */
static const struct {
        VerbFlags flag;
        const char *commands;
} option_classes[] = {
        { VERB_EXEC_OPTIONS, "exec and shell" },
        { VERB_FOLLOW,       "shell, logs, env setup, npu submit and npu log" },
        { VERB_DETACH,       "shell" },
        { VERB_LOG_OPTIONS,  "logs" },
        { VERB_REVISION,     "download" },
        { VERB_MULTIPART,    "upload" },
        { VERB_ENV_OPTIONS,  "env" },
        { VERB_WAIT,         "env create, env install and npu submit" },
        { VERB_NPU_OPTIONS,  "npu" },
};
_Static_assert(ELEMENTSOF(option_classes) == CTL_OPTION_CLASSES, "option classes");

void ctl_options_done(CtlOptions *o) {
        o->env = mfree(o->env);
        o->n_env = 0;
        o->npu_chips = mfree(o->npu_chips);
        o->n_npu_chips = 0;
        o->devices = mfree(o->devices);
        o->n_devices = 0;
        o->env_channels = mfree(o->env_channels);
        o->n_env_channels = 0;
        o->env_wheels = mfree(o->env_wheels);
        o->n_env_wheels = 0;
}

uint64_t ctl_long_timeout(const CtlOptions *o) {
        return o->timeout_set ? o->timeout_usec : 0;
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
        ARG_ENVIRONMENT,
        ARG_NPU,
        ARG_DEVICE,
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
        /* env */
        ARG_ENV_FIRST,
        ARG_KIND = ARG_ENV_FIRST,
        ARG_INDEX_URL,
        ARG_PRESET,
        ARG_OFFLINE,
        ARG_CHANNEL,
        ARG_WHEEL,
        ARG_RETRY,
        ARG_ENV_LAST = ARG_RETRY,
        /* env and npu */
        ARG_WAIT,
        /* npu */
        ARG_SESSION,
        ARG_CONFIG,
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
        { "environment",      required_argument, NULL, ARG_ENVIRONMENT      },
        { "npu",              required_argument, NULL, ARG_NPU              },
        { "device",           required_argument, NULL, ARG_DEVICE           },
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
        { "kind",             required_argument, NULL, ARG_KIND             },
        { "index-url",        required_argument, NULL, ARG_INDEX_URL        },
        { "preset",           required_argument, NULL, ARG_PRESET           },
        { "offline",          no_argument,       NULL, ARG_OFFLINE          },
        { "channel",          required_argument, NULL, ARG_CHANNEL          },
        { "wheel",            required_argument, NULL, ARG_WHEEL            },
        { "wait",             no_argument,       NULL, ARG_WAIT             },
        { "retry",            no_argument,       NULL, ARG_RETRY            },
        { "session",          required_argument, NULL, ARG_SESSION          },
        { "config",           required_argument, NULL, ARG_CONFIG           },
        {}
};

static VerbFlags option_class(int c) {
        if (c >= ARG_EXEC_FIRST && c <= ARG_EXEC_LAST)
                return VERB_EXEC_OPTIONS;
        if (c >= ARG_ENV_FIRST && c <= ARG_ENV_LAST)
                return VERB_ENV_OPTIONS;
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
        case ARG_WAIT:
                return VERB_WAIT;
        case ARG_SESSION:
        case ARG_CONFIG:
                return VERB_NPU_OPTIONS;
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

/* The global options: the daemon, the credentials, the output. */
static int parse_global_option(CtlOptions *o, int c, const char *value) {
        int r;

        switch (c) {
        case ARG_URL:
                if (isempty(value)) {
                        log_error("--url= needs a value.");
                        return -EINVAL;
                }
                o->url = value;
                break;
        case ARG_TOKEN_FILE:
                if (isempty(value)) {
                        log_error("--token-file= needs a value.");
                        return -EINVAL;
                }
                o->token_file = value;
                break;
        case ARG_SIGNING_KEY_FILE:
                if (isempty(value)) {
                        log_error("--signing-key-file= needs a value.");
                        return -EINVAL;
                }
                o->signing_key_file = value;
                break;
        case ARG_JSON:
                o->json = true;
                break;
        case 'v':
                o->verbose = true;
                break;
        case ARG_TIMEOUT:
                r = parse_timeout(value, &o->timeout_usec);
                if (r < 0) {
                        _cleanup_free_ char *e = NULL;

                        (void) output_escape(value, &e);
                        log_error("Invalid --timeout '%s': expected seconds, 0 to %.0f.",
                                  e ?: "", TIMEOUT_SEC_MAX);
                        return r;
                }
                o->timeout_set = true;
                break;
        default:
                abort();        /* getopt_long() returned an option we did not list */
        }
        return 0;
}

/* The options of logs, shell, download, upload, npu; --wait of env and npu. */
static int parse_command_option(CtlOptions *o, int c, const char *value) {
        switch (c) {
        case ARG_FOLLOW:
                o->follow = true;
                break;
        case ARG_DETACH:
                o->detach = true;
                break;
        case ARG_STREAM:
                if (!streq(value, "stdout") && !streq(value, "stderr"))
                        return bad_value(value, "--stream expects stdout or stderr.");
                o->stream = value;
                break;
        case ARG_OFFSET:
                return parse_uint_option("--offset", value, 0, INT64_MAX, &o->offset);
        case ARG_REVISION:
                if (isempty(value))
                        return bad_value(value, "--revision needs an execution id.");
                o->revision = value;
                break;
        case ARG_MULTIPART:
                o->multipart = true;
                break;
        case ARG_WAIT:
                o->wait = true;
                break;
        case ARG_SESSION:
                if (isempty(value))
                        return bad_value(value, "--session needs a session's id (its workspace id).");
                o->npu_session = value;
                break;
        case ARG_CONFIG:
                if (isempty(value))
                        return bad_value(value, "--config needs a path in the session's workspace.");
                o->npu_config = value;
                break;
        default:
                abort();
        }
        return 0;
}

static int parse_cpu(const char *value, uint64_t *ret) {
        _cleanup_free_ char *v = strdup(value);
        size_t n;
        int r;

        if (!v) {
                log_error("Out of memory.");
                return -ENOMEM;
        }
        /* "50%" reads naturally; the sign is optional. */
        n = strlen(v);
        if (n > 0 && v[n - 1] == '%')
                v[n - 1] = '\0';
        r = exec_parse_uint(v, 100000, ret);
        if (r < 0 || *ret == 0)
                return bad_value(value, "--cpu expects a percentage from 1 to 100000 "
                                 "(100 = one CPU).");
        return 0;
}

/* Append @value to the list *@l of *@n (pointing into argv). */
static int list_append(const char ***l, size_t *n, const char *value) {
        const char **a;

        a = reallocarray(*l, *n + 1, sizeof(char *));
        if (!a) {
                log_error("Out of memory.");
                return -ENOMEM;
        }
        *l = a;
        a[(*n)++] = value;
        return 0;
}

static int add_env(CtlOptions *o, const char *value) {
        if (!strchr(value, '=') || value[0] == '=')
                return bad_value(value, "--env expects NAME=VALUE.");
        return list_append(&o->env, &o->n_env, value);
}

/* --npu 5,3: the chips, replacing those of an earlier --npu. */
static int parse_npu(CtlOptions *o, const char *value) {
        _cleanup_free_ unsigned *chips = NULL;
        size_t n = 0, bad = 0;
        int r;

        r = npu_parse_chips(value, &chips, &n, &bad);
        switch (r) {
        case 0:
                break;
        case -ENOMEM:
                log_error("Out of memory.");
                return r;
        case -ERANGE:
                return bad_value(value, "--npu: chip %.*s is above %u, the highest chip logic id.",
                                 (int) strcspn(value + bad, ","), value + bad, NPU_CHIP_ID_MAX);
        case -EEXIST:
                return bad_value(value, "--npu names chip %.*s twice.", (int) strcspn(value + bad, ","), value + bad);
        case -E2BIG:
                return bad_value(value, "--npu names more than %u chips.", NPU_CHIPS_MAX);
        default:
                return bad_value(value, "--npu expects chip logic ids (the N of /dev/davinciN) separated by "
                                 "commas, digits only, e.g. --npu=5,3.");
        }
        free(o->npu_chips);
        o->npu_chips = STEAL(chips);
        o->n_npu_chips = n;
        return 0;
}

/* The options of exec and shell. */
static int parse_exec_option(CtlOptions *o, int c, const char *value) {
        int r;

        switch (c) {
        case ARG_WORKSPACE:
                if (isempty(value))
                        return bad_value(value, "--workspace needs a workspace id.");
                o->workspace = value;
                break;
        case ARG_ID:
                if (isempty(value))
                        return bad_value(value, "--id needs an execution id.");
                o->execution_id = value;
                break;
        case ARG_TIMEOUT_MS:
                return parse_uint_option("--timeout-ms", value, 1, EXEC_TIMEOUT_MS_MAX, &o->exec_timeout_ms);
        case ARG_MEMORY:
                r = exec_parse_size(value, &o->memory);
                if (r < 0 || o->memory == 0 || o->memory > INT64_MAX)
                        return bad_value(value, "--memory expects a number of bytes, optionally "
                                         "with a K, M, G or T suffix (e.g. 512M).");
                break;
        case ARG_TASKS:
                return parse_uint_option("--tasks", value, 1, 1000000, &o->tasks);
        case ARG_CPU:
                return parse_cpu(value, &o->cpu);
        case ARG_ENV:
                return add_env(o, value);
        case ARG_CWD:
                if (isempty(value))
                        return bad_value(value, "--cwd needs a directory.");
                o->cwd = value;
                break;
        case ARG_ENVIRONMENT:
                if (isempty(value))
                        return bad_value(value, "--environment needs an environment's name.");
                o->environment = value;
                break;
        case ARG_NPU:
                return parse_npu(o, value);
        case ARG_DEVICE:
                if (!npu_device_name_valid(value))
                        return bad_value(value, "--device expects a CDI device name, vendor.com/class=name.");
                return list_append(&o->devices, &o->n_devices, value);
        case ARG_STDIN_FILE:
                if (isempty(value))
                        return bad_value(value, "--stdin-file needs a file name ('-' for standard input).");
                o->stdin_file = value;
                break;
        case ARG_LANGUAGE:
                if (!streq(value, "python") && !streq(value, "shell") && !streq(value, "r"))
                        return bad_value(value, "--language expects python, shell or r.");
                o->language = value;
                break;
        case ARG_CODE:
                o->code = value;
                break;
        case ARG_FILE:
                if (isempty(value))
                        return bad_value(value, "--file needs a file name.");
                o->code_file = value;
                break;
        default:
                abort();
        }
        return 0;
}

/* The options of env; which subcommand takes which is env.c's to check. Values are the daemon's
 * to judge (it knows the presets, the URL rules and the channel allowlist), except the kind. */
static int parse_env_option(CtlOptions *o, int c, const char *value) {
        switch (c) {
        case ARG_KIND:
                if (!env_kind_valid(value))
                        return bad_value(value, "--kind expects python, r or conda.");
                o->env_kind = value;
                break;
        case ARG_INDEX_URL:
                if (isempty(value))
                        return bad_value(value, "--index-url needs a URL.");
                o->env_index_url = value;
                break;
        case ARG_PRESET:
                if (isempty(value))
                        return bad_value(value, "--preset needs a preset name.");
                o->env_preset = value;
                break;
        case ARG_OFFLINE:
                o->env_offline = true;
                break;
        case ARG_CHANNEL:
                if (isempty(value))
                        return bad_value(value, "--channel needs a channel name.");
                return list_append(&o->env_channels, &o->n_env_channels, value);
        case ARG_WHEEL: {
                const char *colon = strchr(value, ':');

                if (!colon || colon == value || colon[1] == '\0')
                        return bad_value(value, "--wheel expects WORKSPACE:PATH.");
                return list_append(&o->env_wheels, &o->n_env_wheels, value);
        }
        case ARG_RETRY:
                o->env_retry = true;
                break;
        default:
                abort();
        }
        return 0;
}

int options_parse(CtlOptions *o, int argc, char *argv[], bool options_first) {
        int c, r;

        /* getopt_long() prefixes its messages with argv[0]; make that the program's name. */
        if (argc > 0)
                argv[0] = (char *) PROGRAM;

        /* optind = 0 makes glibc start over, also re-reading the optstring's "+". */
        optind = 0;
        while ((c = getopt_long(argc, argv, options_first ? "+hv" : "hv", options, NULL)) >= 0) {
                VerbFlags class = option_class(c);

                for (size_t i = 0; class && i < ELEMENTSOF(option_classes); i++)
                        if (option_classes[i].flag == class && !o->class_option[i])
                                o->class_option[i] = option_name(c);

                if (c == 'h')
                        return OPTIONS_HELP;
                if (c == ARG_VERSION) {
                        printf("%s %s\n", PROGRAM, PACKAGE_VERSION);
                        return OPTIONS_EXIT;
                }
                if (c == '?')
                        return -EINVAL;         /* getopt_long() has said what is wrong */

                if (class == VERB_EXEC_OPTIONS)
                        r = parse_exec_option(o, c, optarg);
                else if (class == VERB_ENV_OPTIONS)
                        r = parse_env_option(o, c, optarg);
                else if (class != 0)
                        r = parse_command_option(o, c, optarg);
                else
                        r = parse_global_option(o, c, optarg);
                if (r < 0)
                        return r;
        }

        return OPTIONS_CONTINUE;
}

int options_check_verb(const CtlOptions *o, VerbFlags flags, const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(option_classes); i++)
                if (o->class_option[i] && !(flags & option_classes[i].flag)) {
                        log_error("--%s is an option of %s, not of '%s'.", o->class_option[i],
                                  option_classes[i].commands, name);
                        return CTL_EXIT_USAGE;
                }
        return 0;
}
