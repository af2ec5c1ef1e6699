/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runnerd: command line, configuration, secrets, then the Manager's loop. */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "build-config.h"
#include "sandbox/caps.h"
#include "sandbox/cgroup.h"
#include "config/config.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "core/manager.h"
#include "core/reexec.h"
#include "daemon/preflight.h"
#include "daemon/privileges.h"
#include "api/api.h"
#include "util/macro.h"
#include "util/strv.h"

static const char *arg_config = NULL;
static char **arg_listen = NULL;
static LogTarget arg_log_target = LOG_TARGET_AUTO;
static bool arg_keep_caps = false;
static bool arg_check = false;
static bool arg_json = false;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "Run untrusted code in Bubblewrap sandboxes behind an HTTP API.\n\n"
               "  -h --help                 Show this help\n"
               "     --version              Show the version\n"
               "     --config=FILE          Read FILE and FILE.d/*.conf instead of\n"
               "                            " CONFIG_FILE " and its .d/\n"
               "     --listen=ADDRESS       Listen on ADDRESS (IPV4:PORT, [IPV6]:PORT or /path.sock)\n"
               "                            when not socket-activated; repeatable; overrides Listen=;\n"
               "                            sciencediscovery=ADDRESS speaks that dialect there\n"
               "     --log-target=TARGET    auto, journal or console (default: auto)\n"
               "     --keep-caps            Do not drop capabilities (debugging only)\n"
               "     --check                Check what this host lacks, print one line per item\n"
               "                            (ok, warn or fail, the reason, the fix), start nothing;\n"
               "                            exit 1 when an item failed\n"
               "     --json                 With --check: print the report as JSON\n\n"
               "Secrets come from the credentials 'api-token' and 'signing-key' in\n"
               "$CREDENTIALS_DIRECTORY, or from [Auth] TokenFile=/SigningKeyFile=.\n"
               "See sandbox-runnerd(8) and sandbox-runner.conf(5).\n",
               program_invocation_short_name);
}

enum {
        ARG_VERSION = 0x100,
        ARG_CONFIG,
        ARG_LISTEN,
        ARG_LOG_TARGET,
        ARG_KEEP_CAPS,
        ARG_CHECK,
        ARG_JSON,
};

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",       no_argument,       NULL, 'h'            },
                { "version",    no_argument,       NULL, ARG_VERSION    },
                { "config",     required_argument, NULL, ARG_CONFIG     },
                { "listen",     required_argument, NULL, ARG_LISTEN     },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "keep-caps",  no_argument,       NULL, ARG_KEEP_CAPS  },
                { "check",      no_argument,       NULL, ARG_CHECK      },
                { "json",       no_argument,       NULL, ARG_JSON       },
                {}
        };
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandbox-runnerd %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_LISTEN:
                        r = strv_extend(&arg_listen, optarg);
                        if (r < 0)
                                return log_oom();
                        break;
                case ARG_LOG_TARGET:
                        if (log_target_from_option(optarg, &arg_log_target) < 0)
                                return -EINVAL;
                        break;
                case ARG_KEEP_CAPS:
                        arg_keep_caps = true;
                        break;
                case ARG_CHECK:
                        arg_check = true;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "This program takes no positional arguments.");
        if (arg_json && !arg_check)
                return log_error_errno(EINVAL, "--json is an option of --check.");
        if (arg_check && arg_listen)
                return log_error_errno(EINVAL, "--check starts nothing: --listen= does not go with it.");
        return 1;
}

/*
 * Started as root: hand the state and runtime directories (and, without systemd, cgroups of our
 * own) to [Execution] SandboxUser= and become that user for good, so that no keeper, bwrap or
 * payload ever runs as host uid 0. Without such a user we stay up (health, files) but refuse
 * executions and say why. Started as any other user: only look for delegated cgroups.
 */
static int setup_identity(const Config *config, CgroupRoot **ret_cgroups, char **ret_cgroups_reason,
                          char **ret_identity_error) {
        _cleanup_free_ char *reason = NULL, *state = NULL, *runtime = NULL;
        _cleanup_(identity_done) Identity id = {};
        bool want_cgroups = privileges_own_cgroups_wanted();
        int r;

        if (geteuid() != 0) {
                if (want_cgroups)
                        (void) cgroup_root_prepare(geteuid(), getegid(), ret_cgroups, ret_cgroups_reason);
                return 0;
        }

        r = identity_resolve(config->sandbox_user, &id, &reason);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0) {
                log_struct(LOG_ERR,
                           "MESSAGE_ID=" SR_MESSAGE_SANDBOX_USER,
                           "SANDBOX_USER=%s", config->sandbox_user,
                           "MESSAGE=Started as root, but %s: executions are refused.", reason);
                r = caps_drop_all();
                if (r < 0)
                        return log_error_errno(r, "Failed to drop capabilities: %m");
                *ret_identity_error = STEAL(reason);
                return 0;
        }

        r = manager_directories(&state, &runtime);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the state or runtime directory: %m");
        /* The secrets were read: wherever they lie, they stay root's. */
        r = privileges_own_tree(state, getenv("CREDENTIALS_DIRECTORY"), &id);
        if (r >= 0)
                r = privileges_own_tree(runtime, getenv("CREDENTIALS_DIRECTORY"), &id);
        if (r < 0)
                return log_error_errno(r, "Failed to hand the state and runtime directories to '%s': %m", id.name);
        if (want_cgroups) {
                r = cgroup_root_prepare(id.uid, id.gid, ret_cgroups, ret_cgroups_reason);
                if (r == -ENOMEM)
                        return log_oom();
        }
        r = privileges_drop(&id);
        if (r < 0)
                return log_error_errno(r, "Failed to become user '%s': %m", id.name);
        /* The directories are the user's now; every directory above them must let it through. */
        for (const char *const *d = (const char *const[]) { state, runtime, NULL }; *d; d++)
                if (access(*d, R_OK | W_OK | X_OK) < 0)
                        return log_error_errno(errno, "User '%s' cannot reach '%s' (%m): every directory above it "
                                               "must be searchable by that user (chmod o+x), or set "
                                               "[Execution] SandboxUser= to another user.", id.name, *d);
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_SANDBOX_USER,
                   "SANDBOX_USER=%s", id.name,
                   "SANDBOX_UID=%u", (unsigned) id.uid,
                   "MESSAGE=Started as root: running as user '%s' (uid %u, gid %u) from now on; every sandbox "
                   "runs under it.", id.name, (unsigned) id.uid, (unsigned) id.gid);
        return 0;
}

/* --check: the preflight (preflight.h) for the configuration; 0 when no item failed, 1 if one did. */
static int run_check(Config *config) {
        _cleanup_(preflight_report_done) PreflightReport report = {};
        _cleanup_strv_free_ char **sockets = NULL;
        _cleanup_free_ char *sockets_reason = NULL;
        int r;

        /* Under socket activation the sockets' FileDescriptorName= choose the dialects: ask systemd. */
        r = preflight_query_sockets("sandbox-runner.service", &sockets, &sockets_reason);
        if (r < 0)
                return log_oom();
        if (sockets_reason)
                log_debug("%s", sockets_reason);
        r = preflight_run(config, &PREFLIGHT_PATHS_HOST, sockets, &report);
        if (r < 0)
                return log_error_errno(r, "Failed to run the checks: %m");
        if (arg_json) {
                _cleanup_(json_object_putp) json_object *o = NULL;

                r = preflight_report_json(&report, &o);
                if (r < 0)
                        return log_oom();
                if (puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE)) < 0 ||
                    fflush(stdout) != 0)
                        return log_error_errno(EIO, "Failed to write the report.");
        } else {
                r = preflight_report_format(&report, stdout);
                if (r < 0)
                        return log_error_errno(r, "Failed to write the report: %m");
        }
        return preflight_report_ok(&report) ? 0 : 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *cgroups_reason = NULL, *identity_error = NULL;
        _cleanup_(reexec_state_done) ReexecState reexec = {};
        CgroupRoot *cgroups = NULL;
        Config config;
        Secrets secrets = {};
        bool reexecuted;
        int r;

        log_setup(LOG_TARGET_AUTO);
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;
        log_setup(arg_log_target);

        r = config_init(&config);
        if (r < 0)
                return log_oom();
        r = config_load(&config, arg_config ?: CONFIG_FILE, !!arg_config, &error);
        if (r >= 0)
                r = config_verify(&config, &error);
        if (r < 0) {
                log_struct_errno(LOG_ERR, r,
                                 "MESSAGE_ID=" SR_MESSAGE_CONFIG_INVALID,
                                 "MESSAGE=%s", error ?: "Failed to load the configuration.");
                config_done(&config);
                return r;
        }
        log_set_max_level(config.log_level);

        if (arg_check) {
                r = run_check(&config);
                config_done(&config);
                return r;
        }

        /* Re-executed by ourselves (reexec.h): the previous image hands on what it had as root. */
        r = reexec_state_take(&reexec, &error);
        if (r < 0) {
                config_done(&config);
                if (r == -ENOMEM)
                        return log_oom();
                return log_error_errno(r, "Failed to start as a re-execution: %s", error);
        }
        reexecuted = r > 0;
        if (reexecuted) {
                secrets = reexec.secrets;
                reexec.secrets = (Secrets) {};
                cgroups = STEAL(reexec.cgroups);
                cgroups_reason = STEAL(reexec.cgroups_reason);
                identity_error = STEAL(reexec.identity_error);
        } else
                r = secrets_load(&config, &secrets, &error);
        if (r < 0) {
                log_struct_errno(LOG_ERR, r,
                                 "MESSAGE_ID=" SR_MESSAGE_CREDENTIALS_MISSING,
                                 "MESSAGE=%s", error ?: "Failed to load the secrets.");
                config_done(&config);
                return r;
        }

        /* After the secrets (root's files may hold them), before anything else is made. */
        r = reexecuted ? 0 : setup_identity(&config, &cgroups, &cgroups_reason, &identity_error);
        /* A re-executed root without a usable SandboxUser= gained capabilities back with execve(). */
        if (r >= 0 && !arg_keep_caps && (!identity_error || reexecuted)) {
                r = caps_drop_all();
                if (r < 0)
                        log_error_errno(r, "Failed to drop capabilities: %m");
        }
        if (r < 0) {
                config_done(&config);
                secrets_done(&secrets);
                cgroup_root_free(cgroups);
                return r;
        }

        /* The API's handlers answer the Manager's HTTP server (they sit above the core). */
        r = manager_new(&config, &secrets, &(const HttpServerCallbacks) {
                                .begin = http_api_begin,
                                .dispatch = http_api_dispatch,
                        }, &m);
        config_done(&config);
        secrets_done(&secrets);
        if (r < 0) {
                cgroup_root_free(cgroups);
                return r;
        }
        manager_set_limits_setup(m, STEAL(cgroups), STEAL(cgroups_reason), STEAL(identity_error));
        if (reexecuted) {
                m->generation = reexec.generation;
                m->stale_binary = STEAL(reexec.stale_binary);
                log_info("Re-executed (re-execution %u): took over %zu listening socket(s), the secrets and %s of "
                         "the previous image.", m->generation, reexec.n_listen_fds,
                         m->cgroups ? "the cgroups" : "the limits set-up");
        }

        r = manager_probe(m);
        if (r < 0)
                return r;

        r = reexecuted ? manager_adopt_listeners(m, reexec.listen_fds, reexec.listen_tags, reexec.n_listen_fds)
                       : manager_listen(m, arg_listen);
        if (r < 0)
                return r;

        r = manager_setup_egress(m);
        if (r < 0)
                return r;

        /* After binding: a second instance that cannot listen never touches the records. */
        (void) manager_recover(m);

        r = manager_run(m);
        if (r < 0 || !m->reexec || m->stopping)
                return r;
        /* Retired while started by hand: nobody would start us again (reexec.h). */
        return manager_reexec(&m, argv);
}

int main(int argc, char *argv[]) {
        int r;

        r = run(argc, argv);
        arg_listen = strv_free(arg_listen);
        if (arg_check)          /* 0: nothing failed; 1: an item failed, or the check could not run */
                return r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
        if (r < 0)
                (void) sd_notifyf(false, "ERRNO=%i", -r);
        /* 78 (EX_CONFIG) for what only the operator can fix: the unit does not restart on it. */
        if (r == -EINVAL || r == -ENOKEY || r == -ENOENT)
                return 78;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
