/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runnerd: command line, configuration, secrets, then the Manager's loop. */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "build-config.h"
#include "caps.h"
#include "config.h"
#include "log-ids.h"
#include "log.h"
#include "manager.h"
#include "util/macro.h"
#include "util/strv.h"

static const char *arg_config = NULL;
static char **arg_listen = NULL;
static LogTarget arg_log_target = LOG_TARGET_AUTO;
static bool arg_keep_caps = false;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "Run untrusted code in Bubblewrap sandboxes behind an HTTP API.\n\n"
               "  -h --help                 Show this help\n"
               "     --version              Show the version\n"
               "     --config=FILE          Read FILE and FILE.d/*.conf instead of\n"
               "                            " CONFIG_FILE " and its .d/\n"
               "     --listen=ADDRESS       Listen on ADDRESS (IPV4:PORT, [IPV6]:PORT or /path.sock)\n"
               "                            when not socket-activated; repeatable; overrides Listen=\n"
               "     --log-target=TARGET    auto, journal or console (default: auto)\n"
               "     --keep-caps            Do not drop capabilities (debugging only)\n\n"
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
};

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",       no_argument,       NULL, 'h'            },
                { "version",    no_argument,       NULL, ARG_VERSION    },
                { "config",     required_argument, NULL, ARG_CONFIG     },
                { "listen",     required_argument, NULL, ARG_LISTEN     },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "keep-caps",  no_argument,       NULL, ARG_KEEP_CAPS  },
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
                        arg_log_target = log_target_from_string(optarg);
                        if (arg_log_target < 0)
                                return log_error_errno(EINVAL, "Invalid --log-target '%s'.", optarg);
                        break;
                case ARG_KEEP_CAPS:
                        arg_keep_caps = true;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "This program takes no positional arguments.");
        return 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL;
        Config config;
        Secrets secrets = {};
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

        if (!arg_keep_caps) {
                if (geteuid() == 0)
                        log_warning("Running as root: sandboxes map their user to the host's uid 0. "
                                    "Run as an unprivileged user (the service unit does) for production.");
                r = caps_drop_all(geteuid() == 0);
                if (r < 0) {
                        config_done(&config);
                        return log_error_errno(r, "Failed to drop capabilities: %m");
                }
        }

        r = secrets_load(&config, &secrets, &error);
        if (r < 0) {
                log_struct_errno(LOG_ERR, r,
                                 "MESSAGE_ID=" SR_MESSAGE_CREDENTIALS_MISSING,
                                 "MESSAGE=%s", error ?: "Failed to load the secrets.");
                config_done(&config);
                return r;
        }

        r = manager_new(&config, &secrets, &m);
        config_done(&config);
        secrets_done(&secrets);
        if (r < 0)
                return r;

        r = manager_probe(m);
        if (r < 0)
                return r;

        r = manager_listen(m, arg_listen);
        if (r < 0)
                return r;

        r = manager_setup_egress(m);
        if (r < 0)
                return r;

        /* After binding: a second instance that cannot listen never touches the records. */
        (void) manager_recover(m);

        return manager_run(m);
}

int main(int argc, char *argv[]) {
        int r;

        r = run(argc, argv);
        arg_listen = strv_free(arg_listen);
        if (r < 0)
                (void) sd_notifyf(false, "ERRNO=%i", -r);
        /* 78 (EX_CONFIG) for what only the operator can fix: the unit does not restart on it. */
        if (r == -EINVAL || r == -ENOKEY || r == -ENOENT)
                return 78;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
