/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandbox-runner-egress: the egress gateway of one network-policy revision (command line, listeners, loop). */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "build-config.h"
#include "sandbox/caps.h"
#include "egress/egress-policy.h"
#include "egress/connection.h"
#include "egress/egress-log-ids.h"
#include "egress/handoff.h"
#include "egress/peer.h"
#include "egress/resolver.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/string-util.h"

#define POLICY_FILE_MAX (4U * 1024U * 1024U)
#define POLICY_JSON_MAX_DEPTH 32
#define CONNECTIONS_MAX_DEFAULT 1024U
#define CONNECTIONS_PER_EXECUTION_MAX 256U
#define LISTENERS_MAX 16U
#define ACCEPT_BATCH 64

static const char *arg_policy = NULL;
static const char *arg_listen = NULL;
static const char *arg_upstream_auth = NULL;
static uint64_t arg_idle_exit_usec = 60 * USEC_PER_SEC;
static unsigned arg_max_connections = CONNECTIONS_MAX_DEFAULT;
static LogTarget arg_log_target = LOG_TARGET_AUTO;

typedef struct Gateway {
        sd_event *event;
        EgressPolicy *policy;
        EgressUpstream upstream;        /* the policy's upstream proxy, when it has one */
        Resolver *resolver;
        ConnectionContext ctx;

        sd_event_source *listeners[LISTENERS_MAX];
        unsigned n_listeners;
        bool socket_activated;
        bool accept_paused;
        sd_event_source *accept_retry;

        Connection *connections;
        unsigned n_connections;
        unsigned max_connections;
        uint64_t n_accepted;

        sd_event_source *idle_timer;
} Gateway;

SR_DEFINE_FREE_FUNC(json_tokener *, json_tokener_free);
SR_DEFINE_FREE_FUNC(EgressPolicy *, egress_policy_free);

/* ---------------------------------------------------------------------------------------------- */

static void help(void) {
        printf("%s --policy=FILE [OPTIONS...]\n\n"
               "Egress gateway of one sandbox network-policy revision: an HTTP CONNECT and forward proxy\n"
               "that only reaches the host names the policy allows, on public addresses (or the mirrors\n"
               "it names), resolved and checked here.\n\n"
               "  -h --help                 Show this help\n"
               "     --version              Show the version\n"
               "     --policy=FILE          The policy snapshot (JSON) written by sandbox-runnerd\n"
               "     --idle-exit-sec=SEC    Exit after SEC seconds without connections (default 60;\n"
               "                            0 = never); only when the socket was passed to us\n"
               "     --max-connections=N    Concurrent client connections (default %u)\n"
               "     --listen=PATH          Listen on the AF_UNIX socket PATH when no socket was passed\n"
               "                            (development only; the service gets its socket from systemd)\n"
               "     --log-target=TARGET    auto, journal or console (default: auto)\n"
               "     --upstream-auth=FILE   The upstream proxy's Proxy-Authorization value, when the\n"
               "                            policy's upstream takes credentials\n\n"
               "See sandbox-runner-egress(8).\n",
               program_invocation_short_name, CONNECTIONS_MAX_DEFAULT);
}

enum {
        ARG_VERSION = 0x100,
        ARG_POLICY,
        ARG_IDLE_EXIT_SEC,
        ARG_MAX_CONNECTIONS,
        ARG_LISTEN,
        ARG_LOG_TARGET,
        ARG_UPSTREAM_AUTH,
};

static int parse_uint(const char *s, unsigned long long max, unsigned long long *ret) {
        unsigned long long v;
        char *end;

        if (isempty(s) || s[0] < '0' || s[0] > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",            no_argument,       NULL, 'h'                 },
                { "version",         no_argument,       NULL, ARG_VERSION         },
                { "policy",          required_argument, NULL, ARG_POLICY          },
                { "idle-exit-sec",   required_argument, NULL, ARG_IDLE_EXIT_SEC   },
                { "max-connections", required_argument, NULL, ARG_MAX_CONNECTIONS },
                { "listen",          required_argument, NULL, ARG_LISTEN          },
                { "log-target",      required_argument, NULL, ARG_LOG_TARGET      },
                { "upstream-auth",   required_argument, NULL, ARG_UPSTREAM_AUTH   },
                {}
        };
        unsigned long long v;
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandbox-runner-egress %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_POLICY:
                        arg_policy = optarg;
                        break;
                case ARG_IDLE_EXIT_SEC:
                        if (parse_uint(optarg, UINT32_MAX, &v) < 0)
                                return log_error_errno(EINVAL, "Invalid --idle-exit-sec '%s'.", optarg);
                        arg_idle_exit_usec = v * USEC_PER_SEC;
                        break;
                case ARG_MAX_CONNECTIONS:
                        if (parse_uint(optarg, 65536, &v) < 0 || v == 0)
                                return log_error_errno(EINVAL, "Invalid --max-connections '%s'.", optarg);
                        arg_max_connections = (unsigned) v;
                        break;
                case ARG_LISTEN:
                        arg_listen = optarg;
                        break;
                case ARG_UPSTREAM_AUTH:
                        arg_upstream_auth = optarg;
                        break;
                case ARG_LOG_TARGET:
                        if (log_target_from_option(optarg, &arg_log_target) < 0)
                                return -EINVAL;
                        break;
                case '?':
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "This program takes no positional arguments.");
        if (!arg_policy)
                return log_error_errno(EINVAL, "--policy=FILE is required.");
        return 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* The policy snapshot. */

static int load_policy(const char *path, EgressPolicy **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
        _cleanup_free_ char *data = NULL, *error = NULL, *path_esc = NULL;
        json_object *rev;
        size_t size = 0;
        int r;

        path_esc = str_escape_log(path, 256);
        r = read_file_limited(AT_FDCWD, path, O_NOCTTY, POLICY_FILE_MAX, READ_FILE_UP_TO_MAX, &data, &size);
        if (r < 0)
                return log_struct_errno(LOG_ERR, r,
                                        "MESSAGE_ID=" SR_MESSAGE_EGRESS_POLICY_INVALID,
                                        "SANDBOX_EGRESS_POLICY_FILE=%s", path_esc ?: "",
                                        "MESSAGE=Failed to read the egress policy '%s': %m", path_esc ?: "");

        tok = json_tokener_new_ex(POLICY_JSON_MAX_DEPTH);
        if (!tok)
                return log_oom();
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, data, (int) size);
        if (!o || json_tokener_get_error(tok) != json_tokener_success || json_tokener_get_parse_end(tok) != size)
                return log_struct_errno(LOG_ERR, EBADMSG,
                                        "MESSAGE_ID=" SR_MESSAGE_EGRESS_POLICY_INVALID,
                                        "SANDBOX_EGRESS_POLICY_FILE=%s", path_esc ?: "",
                                        "MESSAGE=Egress policy '%s' is not valid JSON: %s", path_esc ?: "",
                                        json_tokener_error_desc(json_tokener_get_error(tok)));

        r = egress_policy_from_json(o, &p, &error);
        if (r < 0) {
                _cleanup_free_ char *error_esc = str_escape_log(error ?: "invalid policy", 512);

                return log_struct_errno(LOG_ERR, r,
                                        "MESSAGE_ID=" SR_MESSAGE_EGRESS_POLICY_INVALID,
                                        "SANDBOX_EGRESS_POLICY_FILE=%s", path_esc ?: "",
                                        "MESSAGE=Egress policy '%s' is invalid: %s", path_esc ?: "",
                                        error_esc ?: "invalid policy");
        }

        /* The daemon records the revision it computed; a different one here means version skew. */
        if (json_object_object_get_ex(o, "revision", &rev) && json_object_is_type(rev, json_type_string) &&
            !streq(json_object_get_string(rev), egress_policy_revision(p))) {
                _cleanup_free_ char *rev_esc = str_escape_log(json_object_get_string(rev), 64);

                log_warning("Egress policy '%s' says revision '%s', its content is revision %s: enforcing the content.",
                            path_esc ?: "", rev_esc ?: "", egress_policy_revision(p));
        }

        *ret = STEAL(p);
        return 0;
}

/* The policy's upstream proxy, and its credentials from --upstream-auth= (a file of the daemon's,
 * under systemd a credential of the unit): never in the policy snapshot, never logged. */
static int load_upstream(Gateway *g) {
        _cleanup_free_ char *data = NULL;
        const char *url = egress_policy_upstream(g->policy), *why = NULL;
        size_t size = 0;
        int r;

        if (!url)
                return 0;
        r = egress_upstream_parse(url, &g->upstream, &why);
        if (r < 0)
                return log_error_errno(r, "Invalid upstream proxy in the policy: %s", why ?: "malformed");
        if (!egress_policy_upstream_auth(g->policy))
                return 0;
        if (!arg_upstream_auth)
                return log_error_errno(EINVAL, "The policy's upstream proxy takes credentials: --upstream-auth=FILE is required.");
        r = read_file_limited(AT_FDCWD, arg_upstream_auth, O_NOCTTY, 4096, READ_FILE_UP_TO_MAX, &data, &size);
        if (r < 0)
                return log_error_errno(r, "Failed to read the upstream proxy's credentials: %m");
        if (size == 0 || strlen(data) != size || strpbrk(data, "\r\n") || strncmp(data, "Basic ", 6) != 0) {
                explicit_bzero(data, size);
                return log_error_errno(EINVAL, "The upstream proxy's credentials file is empty or malformed.");
        }
        g->upstream.authorization = STEAL(data);
        return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Connections, caps and idle exit. */

static void gateway_update_idle(Gateway *g) {
        int r;

        if (!g->idle_timer)
                return;
        if (g->n_connections > 0) {
                (void) sd_event_source_set_enabled(g->idle_timer, SD_EVENT_OFF);
                return;
        }
        r = sd_event_source_set_time_relative(g->idle_timer, arg_idle_exit_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(g->idle_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the idle timer, ignoring: %m");
}

static void gateway_pause_accept(Gateway *g, bool pause) {
        if (g->accept_paused == pause)
                return;
        g->accept_paused = pause;
        for (unsigned i = 0; i < g->n_listeners; i++)
                (void) sd_event_source_set_enabled(g->listeners[i], pause ? SD_EVENT_OFF : SD_EVENT_ON);
}

static void on_connection_closed(Connection *c, void *userdata) {
        Gateway *g = userdata;

        connection_unlink(&g->connections, c);
        connection_free(c);
        g->n_connections--;
        gateway_pause_accept(g, false);
        gateway_update_idle(g);
}

static unsigned count_execution(Gateway *g, const char *id) {
        unsigned n = 0;

        for (Connection *c = g->connections; c; c = connection_next(c))
                if (streq(connection_execution_id(c), id))
                        n++;
        return n;
}

static int on_accept_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Gateway *g = userdata;

        g->accept_retry = sd_event_source_disable_unref(g->accept_retry);
        gateway_pause_accept(g, false);
        return 0;
}

static int on_listener(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Gateway *g = userdata;
        int r;

        for (int i = 0; i < ACCEPT_BATCH; i++) {
                _cleanup_free_ char *id = NULL;
                Connection *c;
                int cfd;

                cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                                return 0;
                        /*
                         * Out of descriptors or memory, or worse: stop accepting for a second rather
                         * than spin on a level-triggered listener (and never return an error here,
                         * which would make sd-event disable the listener for good).
                         */
                        log_warning_errno(errno, "Failed to accept a connection, pausing for a second: %m");
                        gateway_pause_accept(g, true);
                        if (!g->accept_retry)
                                (void) sd_event_add_time_relative(g->event, &g->accept_retry, CLOCK_MONOTONIC,
                                                                  USEC_PER_SEC, 0, on_accept_retry, g);
                        return 0;
                }
                g->n_accepted++;

                r = peer_execution_id(cfd, &id);
                if (r < 0) {
                        log_oom();
                        connection_reply_busy(cfd, "out of memory");
                        continue;
                }

                if (g->n_connections >= g->max_connections) {
                        log_warning("Refusing a connection of execution %s: %u connections open (the limit).",
                                    id, g->n_connections);
                        connection_reply_busy(cfd, "too many connections");
                        continue;
                }
                if (count_execution(g, id) >= CONNECTIONS_PER_EXECUTION_MAX) {
                        log_notice("Refusing a connection of execution %s: it has %u open (the limit).",
                                   id, CONNECTIONS_PER_EXECUTION_MAX);
                        connection_reply_busy(cfd, "too many connections from this execution");
                        continue;
                }

                r = connection_new(&g->ctx, cfd, STEAL(id), &c);
                if (r < 0) {
                        log_warning_errno(r, "Failed to set up a connection, ignoring: %m");
                        continue;
                }
                connection_link(&g->connections, c);
                g->n_connections++;
                gateway_update_idle(g);
        }
        return 0;
}

static int on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        Gateway *g = userdata;

        if (g->n_connections > 0)
                return 0;
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_EGRESS_STOPPED,
                   "SANDBOX_EGRESS_REVISION=%s", g->ctx.revision,
                   "SANDBOX_EGRESS_CONNECTIONS=%" PRIu64, g->n_accepted,
                   "MESSAGE=Egress gateway for policy revision %s idle for %" PRIu64 " s, exiting after %" PRIu64
                   " connection(s).", g->ctx.revision, arg_idle_exit_usec / USEC_PER_SEC, g->n_accepted);
        return sd_event_exit(g->event, 0);
}

/* ---------------------------------------------------------------------------------------------- */
/* Listeners. */

static int gateway_add_listener(Gateway *g, int fd) {
        int r;

        if (g->n_listeners >= LISTENERS_MAX) {
                safe_close(fd);
                return log_error_errno(E2BIG, "Too many listening sockets.");
        }
        r = fd_nonblock(fd, true);
        if (r < 0) {
                safe_close(fd);
                return log_error_errno(r, "Failed to make the listening socket non-blocking: %m");
        }
        r = sd_event_add_io(g->event, &g->listeners[g->n_listeners], fd, EPOLLIN, on_listener, g);
        if (r < 0) {
                safe_close(fd);
                return log_error_errno(r, "Failed to watch the listening socket: %m");
        }
        (void) sd_event_source_set_io_fd_own(g->listeners[g->n_listeners], true);
        (void) sd_event_source_set_description(g->listeners[g->n_listeners], "egress-listener");
        g->n_listeners++;
        return 0;
}

static int bind_listener(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;

        if (strlen(path) >= sizeof(sa.sun_path) || path[0] != '/')
                return log_error_errno(EINVAL, "--listen= needs an absolute socket path shorter than %zu bytes.",
                                       sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "Failed to create a socket: %m");
        /* Remove a stale socket of an earlier run, never anything else. */
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
                (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return log_error_errno(errno, "Failed to bind to '%s': %m", path);
        /* Same rule as the socket unit: only our own uid (the runner and its sandboxes). */
        (void) chmod(path, 0600);
        if (listen(fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "Failed to listen on '%s': %m", path);
        return STEAL_FD(fd);
}

static int gateway_listen(Gateway *g) {
        int n, r;

        n = sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Failed to read the sockets passed to us: %m");
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;

                /* AF_UNIX only: the gateway is reached through the bind-mounted socket, nothing else. */
                if (sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) <= 0) {
                        log_warning("Passed file descriptor %i is not a listening AF_UNIX stream socket, closing it.",
                                    fd);
                        safe_close(fd);
                        continue;
                }
                r = gateway_add_listener(g, fd);
                if (r < 0)
                        return r;
                g->socket_activated = true;
        }

        if (g->n_listeners == 0 && arg_listen) {
                int fd = bind_listener(arg_listen);
                if (fd < 0)
                        return fd;
                r = gateway_add_listener(g, fd);
                if (r < 0)
                        return r;
        }
        if (g->n_listeners == 0)
                return log_error_errno(ENOENT,
                                       "No listening socket was passed (LISTEN_FDS). Start the gateway through "
                                       "sandbox-runner-egress@REVISION.socket (sandbox-runnerd passes one the same "
                                       "way), or use --listen=PATH for development.");

        /* Idle exit only when whoever passed the socket keeps it and can start us again. */
        if (g->socket_activated && arg_idle_exit_usec > 0) {
                r = sd_event_add_time_relative(g->event, &g->idle_timer, CLOCK_MONOTONIC, arg_idle_exit_usec,
                                               100 * USEC_PER_MSEC, on_idle, g);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the idle timer: %m");
                (void) sd_event_source_set_description(g->idle_timer, "idle-exit");
        }
        return 0;
}

/* ---------------------------------------------------------------------------------------------- */

/*
 * Each relayed connection holds 6 descriptors (2 sockets, 2 pipes): raise the soft limit to the
 * hard one (no privilege needed) and cap the connections to what fits.
 */
static unsigned fit_connections_to_nofile(unsigned wanted) {
        struct rlimit rl;
        unsigned fit;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return wanted;
        if (rl.rlim_cur < rl.rlim_max) {
                rlim_t old = rl.rlim_cur;

                rl.rlim_cur = MIN(rl.rlim_max, (rlim_t) 65536);
                if (rl.rlim_cur > old && setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        rl.rlim_cur = old;
        }
        if (rl.rlim_cur == RLIM_INFINITY)
                return wanted;
        fit = rl.rlim_cur > 64 ? (unsigned) MIN((rl.rlim_cur - 64) / 6, (rlim_t) UINT_MAX) : 1;
        if (fit < wanted) {
                log_warning("RLIMIT_NOFILE=%llu allows only %u connections, not %u.",
                            (unsigned long long) rl.rlim_cur, fit, wanted);
                return MAX(fit, 1U);
        }
        return wanted;
}

static Gateway *gateway_free(Gateway *g) {
        Connection *c;

        if (!g)
                return NULL;
        while ((c = g->connections)) {
                connection_unlink(&g->connections, c);
                connection_free(c);
        }
        for (unsigned i = 0; i < g->n_listeners; i++)
                sd_event_source_disable_unref(g->listeners[i]);
        sd_event_source_disable_unref(g->idle_timer);
        sd_event_source_disable_unref(g->accept_retry);
        resolver_free(g->resolver);
        egress_policy_free(g->policy);
        egress_upstream_done(&g->upstream);
        sd_event_unref(g->event);
        return mfree(g);
}
SR_DEFINE_FREE_FUNC(Gateway *, gateway_free);

static int run(int argc, char *argv[]) {
        _cleanup_(gateway_freep) Gateway *g = NULL;
        sigset_t mask;
        int r;

        log_setup(LOG_TARGET_AUTO);
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;
        log_setup(arg_log_target);

        g = calloc(1, sizeof(*g));
        if (!g)
                return log_oom();

        r = load_policy(arg_policy, &g->policy);
        if (r < 0)
                return r;
        r = load_upstream(g);
        if (r < 0)
                return r;

        /*
         * Names are resolved exactly as approved: an empty LOCALDOMAIN turns off the resolver's
         * search list, so a name that does not exist is never retried as "<name>.<search domain>"
         * (which could lead to a host the policy never named). Not "<name>." either: glibc's
         * files backend would then miss /etc/hosts entries. Set before any lookup thread exists.
         */
        if (setenv("LOCALDOMAIN", "", 1) < 0)
                return log_error_errno(errno, "Failed to set LOCALDOMAIN: %m");

        /* splice() into a socket whose peer is gone raises SIGPIPE: we want EPIPE. */
        (void) signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");
        /* Before any resolver thread exists: the guard's timer signals this thread only. */
        r = handoff_guard_setup();
        if (r < 0)
                log_warning_errno(r, "Failed to set up the guard for handed-over sockets, refusing hand-overs "
                                  "(plain clients still work): %m");

        r = sd_event_default(&g->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m");
        r = sd_event_add_signal(g->event, NULL, SIGTERM, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(g->event, NULL, SIGINT, NULL, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGTERM/SIGINT: %m");
        r = sd_event_set_watchdog(g->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog, ignoring: %m");

        r = resolver_new(g->event, &g->resolver);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the resolver: %m");

        g->max_connections = fit_connections_to_nofile(arg_max_connections);
        g->ctx = (ConnectionContext) {
                .event = g->event,
                .policy = g->policy,
                .upstream = g->upstream.host ? &g->upstream : NULL,
                .revision = egress_policy_revision(g->policy) ?: "unknown",
                .resolver = g->resolver,
                .idle_timeout_usec = CONNECTION_IDLE_TIMEOUT_USEC,
                .on_closed = on_connection_closed,
                .userdata = g,
        };

        r = gateway_listen(g);
        if (r < 0)
                return r;

        /* Nothing here needs a capability (tests run it as root): drop them all. */
        if (geteuid() == 0) {
                r = caps_drop_all();
                if (r < 0)
                        return log_error_errno(r, "Failed to drop capabilities: %m");
        }

        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_EGRESS_STARTED,
                   "SANDBOX_EGRESS_REVISION=%s", g->ctx.revision,
                   "SANDBOX_SOCKET_ACTIVATED=%i", g->socket_activated,
                   "MESSAGE=Egress gateway for policy revision %s ready (%u listening socket%s%s, at most %u "
                   "connections).", g->ctx.revision, g->n_listeners, g->n_listeners == 1 ? "" : "s",
                   g->socket_activated ? " passed to us" : "", g->max_connections);
        (void) sd_notifyf(false, "READY=1\nSTATUS=Serving policy revision %s.", g->ctx.revision);

        r = sd_event_loop(g->event);

        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}

int main(int argc, char *argv[]) {
        int r;

        r = run(argc, argv);
        if (r < 0)
                (void) sd_notifyf(false, "ERRNO=%i", -r);
        /* 78 (EX_CONFIG): a missing or invalid policy, bad options: restarting would not help. */
        if (r == -EINVAL || r == -ENOENT || r == -EBADMSG || r == -EFBIG || r == -EBADFD || r == -EACCES)
                return 78;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
