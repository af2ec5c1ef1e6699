/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runnerctl: the command table, --help, dispatch to a command and exit codes; wires the
 * CLI's modules (options.c parses the command line into one CtlOptions, which every command gets). */

#include <curl/curl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "build-config.h"
#include "ctl.h"
#include "output.h"

typedef struct Verb {
        const char *name;
        unsigned min_args;      /* after the verb and its options */
        unsigned max_args;
        VerbFlags flags;
        int (*run)(const CtlOptions *o, int argc, char *argv[]);
        const char *summary;
} Verb;

static const Verb verbs[] = {
        { "health",     0, 0,        0,                                     verb_health,
          "Show the daemon's health (no token needed)" },
        { "check",      0, 0,        0,                                     verb_check,
          "Judge the daemon's /health item by item: ok, warn or fail, the reason, the fix" },
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
        { "env",        1, UINT_MAX, VERB_ENV_OPTIONS | VERB_FOLLOW | VERB_WAIT, verb_env,
          "Scientific environments: list, show, create, install, remove, revisions, setup" },
        { "npu",        0, 2,        VERB_NPU_OPTIONS | VERB_FOLLOW | VERB_WAIT, verb_npu,
          "Accelerators: chips, workloads; broker jobs: jobs, submit, show, log, result, cancel" },
        { "kernel",     0, 3,        0,                                     verb_kernel,
          "Jupyter kernels: list, start, exec, interrupt, restart, stop" },
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
                "%1$s [OPTIONS...] env (list | show NAME | remove NAME | revisions NAME)\n"
                "%1$s [OPTIONS...] env create NAME --kind KIND [ENV OPTIONS...] [--] [PKG...]\n"
                "%1$s [OPTIONS...] env install NAME [--wheel WS:PATH]... [--wait] [--] PKG...\n"
                "%1$s [OPTIONS...] env setup [--follow] [--retry [NAME]]\n"
                "%1$s [OPTIONS...] npu [chips | workloads]\n"
                "%1$s [OPTIONS...] npu jobs --session SESSION\n"
                "%1$s [OPTIONS...] npu submit WORKLOAD --session SESSION [--config PATH] [--wait | --follow]\n"
                "%1$s [OPTIONS...] npu (show | result | cancel) JOB --session SESSION\n"
                "%1$s [OPTIONS...] npu log JOB --session SESSION [--follow]\n"
                "%1$s [OPTIONS...] kernel [list] | start [SPEC [WORKSPACE]] | exec ID [CODE | -]\n"
                "%1$s [OPTIONS...] kernel (interrupt | restart | stop) ID\n"
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
                "     --environment=NAME    Run with environment NAME at /opt/science-env\n"
                "     --npu=ID[,ID...]      Give the run these NPU chips (logic ids, the N of\n"
                "                           /dev/davinciN; 1 to 64); it sees /dev/davinci0..n-1\n"
                "     --device=NAME         Give the run the CDI device NAME, vendor.com/class=name\n"
                "                           (repeatable)\n"
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
                "Env options (env):\n"
                "     --kind=KIND           create: python, r or conda\n"
                "     --index-url=URL       create: the package index (HTTPS)\n"
                "     --preset=PRESET       create: an index preset (upstream, tuna, ustc, ...)\n"
                "     --offline             create: install from the wheelhouse only\n"
                "     --channel=CHANNEL     create: a conda channel (repeatable)\n"
                "     --wheel=WS:PATH       create, install: a wheel file of workspace WS\n"
                "                           (repeatable)\n"
                "     --wait                create, install: follow the setup until it is done\n"
                "     --follow              setup: follow until no setup is pending or building\n"
                "     --retry               setup: retry the failed setups (or NAME's) first\n"
                "Package specs that start with '-' go after '--'; the daemon judges them.\n"
                "\n"
                "NPU options (npu):\n"
                "     --session=SESSION     jobs, submit, show, log, result, cancel: the broker\n"
                "                           session (the workspace whose files the job uses)\n"
                "     --config=PATH         submit: the job's config file, a path in the workspace\n"
                "     --wait                submit: wait for the job's end, print its final state;\n"
                "                           exit 0 only when it succeeded\n"
                "     --follow              submit, log: print the job's log until the job ended\n"
                "\n"
                "exec and shell print the run's output and exit with its exit code (128+N when\n"
                "killed by signal N, 124 on timeout, 125 on another limit or cancellation).\n"
                "\n"
                "See the %s(1) man page for details.\n",
                HTTP_CLIENT_DEFAULT_URL, (unsigned) (DEFAULT_TIMEOUT_USEC / USEC_PER_SEC),
                (unsigned) (EXEC_TIMEOUT_MARGIN_USEC / USEC_PER_SEC), PROGRAM);
}

/* options_parse(), and what its outcome means for the program: -1 to go on, else the exit code
 * (--help and --version print and succeed; a usage error was reported). */
static int parse_options(CtlOptions *o, int argc, char *argv[], bool options_first) {
        int r;

        r = options_parse(o, argc, argv, options_first);
        if (r < 0) {
                fprintf(stderr, "Try '%s --help' for more information.\n", PROGRAM);
                return CTL_EXIT_USAGE;
        }
        if (r == OPTIONS_HELP)
                help(stdout);
        if (r != OPTIONS_CONTINUE)
                return flush_stdout();
        return -1;
}

/* Return: the exit code. */
static int dispatch(CtlOptions *o, int argc, char *argv[]) {
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
        r = parse_options(o, argc, argv, verb->flags & VERB_OPTIONS_FIRST);
        if (r >= 0)
                return r;

        r = options_check_verb(o, verb->flags, name);
        if (r != 0)
                return r;

        n = argc - optind;
        if (n < verb->min_args) {
                log_error("Missing argument for '%s'.", name);
                return CTL_EXIT_USAGE;
        }
        if (n > verb->max_args) {
                log_error("Too many arguments for '%s'.", name);
                return CTL_EXIT_USAGE;
        }
        return verb->run(o, n, argv + optind);
}

int main(int argc, char *argv[]) {
        _cleanup_(ctl_options_done) CtlOptions o = CTL_OPTIONS_INIT;
        CURLcode code;
        int r;

        /* Options before the command; parsing stops at its name. */
        r = parse_options(&o, argc, argv, true);
        if (r >= 0)
                return r;

        code = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (code != CURLE_OK) {
                log_error("Failed to initialise libcurl: %s", curl_easy_strerror(code));
                return CTL_EXIT_FAILURE;
        }

        r = dispatch(&o, argc, argv);

        curl_global_cleanup();
        return r;
}
