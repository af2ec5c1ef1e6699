/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Manager: event loop, configuration, secrets, HTTP server, idle exit and watchdog wiring (manager.h). */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "build-config.h"
#include "core/manager.h"
#include "core/snapshot-gc.h"
#include "egress/egress-epochs.h"
#include "environment/env-manager.h"
#include "execution/execution.h"
#include "kernel/kernel.h"
#include "execution/keeper-pool.h"
#include "execution/records.h"
#include "execution/replay.h"
#include "util/dialect.h"
#include "http/http-server.h"
#include "npu/npu-broker.h"
#include "npu/npu-manager.h"
#include "sandbox/cgroup.h"
#include "sandbox/scope.h"
#include "util/helper-path.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/socket-util.h"
#include "util/strv.h"
#include "workspace/cas/cas.h"
#include "workspace/quota.h"
#include "workspace/usage.h"

static uint64_t now_usec(clockid_t clock) {
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

uint64_t manager_uptime_sec(Manager *m) {
        return (now_usec(CLOCK_MONOTONIC) - m->start_usec) / USEC_PER_SEC;
}

/* $STATE_DIRECTORY may list several directories separated by ':'; the first is ours. */
static char *dir_from_env(const char *env, const char *fallback) {
        const char *e = getenv(env);

        return isempty(e) ? strdup(fallback) : strndup(e, strcspn(e, ":"));
}

int manager_directory_paths(char **ret_state, char **ret_runtime) {
        _cleanup_free_ char *state = dir_from_env("STATE_DIRECTORY", MANAGER_STATE_DIR_DEFAULT);
        char *runtime = dir_from_env("RUNTIME_DIRECTORY", MANAGER_RUNTIME_DIR_DEFAULT);

        if (!state || !runtime) {
                free(runtime);
                return -ENOMEM;
        }
        *ret_state = STEAL(state);
        *ret_runtime = runtime;
        return 0;
}

int manager_directories(char **ret_state, char **ret_runtime) {
        _cleanup_free_ char *state = NULL, *runtime = NULL;
        int r;

        r = manager_directory_paths(&state, &runtime);
        if (r < 0)
                return r;
        if (mkdir(state, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        if (mkdir(runtime, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        *ret_state = STEAL(state);
        *ret_runtime = STEAL(runtime);
        return 0;
}

void manager_set_limits_setup(Manager *m, CgroupRoot *cgroups, char *cgroups_reason, char *identity_error) {
        m->cgroups = cgroups;
        m->cgroups_reason = cgroups_reason;
        m->identity_error = identity_error;
}

static void manager_arm_stop(Manager *m, uint64_t usec);

static void manager_update_idle(Manager *m) {
        int r;

        if (m->retiring && m->busy == 0 && (!m->http || http_server_n_connections(m->http) == 0)) {
                /* Started by hand, nobody would start us again: the new image takes over the
                 * listening sockets (reexec.c). Under socket activation systemd holds them. */
                m->reexec = !m->socket_activated;
                log_info("Retired: the last run and connection are done; %s.",
                         m->reexec ? "re-executing with the listening sockets" : "exiting");
                (void) sd_event_exit(m->event, 0);
                return;
        }
        if (!m->idle_timer)
                return;
        if (m->retiring || m->busy > 0 || (m->http && http_server_n_connections(m->http) > 0)) {
                (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
                return;
        }
        r = sd_event_source_set_time_relative(m->idle_timer, m->config.idle_exit_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->idle_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the idle timer, ignoring: %m");
}

static void on_http_activity(HttpServer *s, void *userdata) {
        manager_update_idle(userdata);
}

void manager_busy_ref(Manager *m) {
        m->busy++;
        manager_update_idle(m);
}

void manager_busy_unref(Manager *m) {
        if (m->busy > 0)
                m->busy--;
        if (m->stopping && m->busy == 0)
                /* Give the last answers a moment to be written out. */
                manager_arm_stop(m, 200 * USEC_PER_MSEC);
        manager_update_idle(m);
}

static int on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (m->busy > 0 || http_server_n_connections(m->http) > 0)
                return 0;
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_IDLE_EXIT,
                   "SANDBOX_IDLE_SEC=%" PRIu64, m->config.idle_exit_usec / USEC_PER_SEC,
                   "MESSAGE=Idle for %" PRIu64 " s, exiting; socket activation starts the runner again.",
                   m->config.idle_exit_usec / USEC_PER_SEC);
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

void manager_retire(Manager *m, const char *why) {
        if (m->stopping || m->retiring)
                return;
        m->retiring = true;
        m->retire_reason = why;
        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_RETIRING,
                   "SANDBOX_VERSION=%s", PACKAGE_VERSION,
                   "SANDBOX_BUSY=%u", m->busy,
                   "SANDBOX_REASON=%s", why,
                   "MESSAGE=Retiring (%s): finishing %u run(s), accepting no new connection; then %s.",
                   why, m->busy,
                   m->socket_activated ? "exiting, and the next connection starts the runner anew"
                                       : "re-executing the binary on disk, which keeps the listening sockets");
        (void) sd_notifyf(false, "STATUS=Retiring: finishing %u run(s), accepting no new connection.", m->busy);
        http_server_retire(m->http);
        env_manager_retire(m->environments);
        /* Kernels live until deleted: this version cannot hand them on, they end (interrupted). */
        kernel_manager_stop(m->kernels);
        /* No new run takes a keeper: stop those started ahead. */
        m->exec.keeper_pool = NULL;
        m->keeper_pool = keeper_pool_free(m->keeper_pool);
        manager_update_idle(m);
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        manager_retire(m, m->socket_activated ? "SIGHUP: systemctl reload, or a package upgrade" : "SIGHUP: reload");
        return 0;
}

/* A package upgrade (or meson install) replaced our binary: the helpers and units on disk may no
 * longer speak our protocols. */
static bool manager_binary_replaced(void) {
        static const char suffix[] = " (deleted)";
        char buf[PATH_MAX];
        ssize_t l = readlink("/proc/self/exe", buf, sizeof(buf));

        return l >= (ssize_t) strlen(suffix) && memcmp(buf + l - strlen(suffix), suffix, strlen(suffix)) == 0;
}

static int on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (m->busy > 0)
                log_warning("%u execution(s) did not finish in time after SIGTERM; exiting anyway.", m->busy);
        return sd_event_exit(m->event, 0);
}

static void manager_arm_stop(Manager *m, uint64_t usec) {
        m->stop_timer = sd_event_source_disable_unref(m->stop_timer);
        if (sd_event_add_time_relative(m->event, &m->stop_timer, CLOCK_MONOTONIC, usec, USEC_PER_MSEC,
                                       on_stop_timer, m) < 0)
                (void) sd_event_exit(m->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_debug("Received %s, shutting down.", strsignal((int) si->ssi_signo));
        if (m->stopping)
                return sd_event_exit(m->event, 0);
        m->stopping = true;
        npu_broker_stop(m->broker);   /* its jobs' busy references go with them */
        if (m->busy == 0)
                return sd_event_exit(m->event, 0);

        /* Interrupt running executions so that their clients get an answer and nothing of them
         * outlives the daemon; exit once they are done (bounded). */
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Interrupting running executions.");
        env_manager_stop(m->environments);
        kernel_manager_stop(m->kernels);
        for (Execution *e = m->exec.executions, *next; e; e = next) {
                next = execution_next(e);
                if (!execution_finished(e))
                        execution_cancel(e, EXECUTION_STATUS_INTERRUPTED);
        }
        manager_arm_stop(m, 10 * USEC_PER_SEC);
        return 0;
}

/* The state directory's stores: workspaces, quota settings, snapshots, records. */
static int manager_open_stores(Manager *m) {
        _cleanup_free_ char *ws = NULL, *error = NULL, *p = NULL;
        _cleanup_close_ int cfd = -EBADF;
        int r;

        if (asprintf(&ws, "%s/workspaces", m->state_dir) < 0)
                return log_oom();
        if (mkdir(ws, 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create '%s': %m", ws);
        m->workspaces_fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (m->workspaces_fd < 0)
                return log_error_errno(errno, "Failed to open '%s': %m", ws);

        r = quota_settings_load(&m->config, m->state_dir, &m->quota, &error);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return log_error_errno(r, "%s", error);

        if (asprintf(&p, "%s/cas", m->state_dir) < 0)
                return log_oom();
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create '%s': %m", p);
        cfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (cfd < 0)
                return log_error_errno(errno, "Failed to open '%s': %m", p);
        r = cas_open(cfd, &m->cas);
        if (r < 0)
                return log_error_errno(r, "Failed to open the snapshot store '%s': %m", p);

        m->records_fd = records_open(m->state_dir);
        if (m->records_fd < 0)
                return log_error_errno(m->records_fd, "Failed to open the records directory: %m");
        return 0;
}

static int manager_watch_signals(Manager *m) {
        sigset_t mask;
        int r;

        /* A write to a keeper's control pipe ('G', 'K') races with the keeper's exit, which the loop
         * may not have seen yet: it must fail with EPIPE (handled there), not kill the daemon.
         * systemd ignores SIGPIPE for its services (IgnoreSIGPIPE=yes), a daemon started by hand or
         * in a container has it at its default. Children get the default back: keepers are spawned
         * with every signal reset (sandbox_keeper_start()), the probes reset theirs. */
        if (sigaction(SIGPIPE, &(struct sigaction) { .sa_handler = SIG_IGN }, NULL) < 0)
                return log_error_errno(errno, "Failed to ignore SIGPIPE: %m");

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");
        r = sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGHUP, on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch signals: %m");
        return 0;
}

int manager_new(Config *config, Secrets *secrets, const HttpServerCallbacks *api, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        HttpServerLimits limits;
        HttpServerCallbacks cb = {
                .begin = api->begin,
                .dispatch = api->dispatch,
                .activity = on_http_activity,
        };
        int r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        /* Before anything can fail: manager_free() closes these. */
        m->workspaces_fd = -EBADF;
        m->records_fd = -EBADF;
        m->keeper_fd = -EBADF;
        m->exec_helper_fd = -EBADF;
        m->config = *config;
        *config = (Config) {};
        m->secrets = *secrets;
        *secrets = (Secrets) {};
        m->start_usec = now_usec(CLOCK_MONOTONIC);
        m->start_realtime_usec = now_usec(CLOCK_REALTIME);

        m->sandbox_uid = geteuid();
        r = manager_directories(&m->state_dir, &m->runtime_dir);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the state or runtime directory: %m");

        r = manager_open_stores(m);
        if (r < 0)
                return r;

        r = replay_table_new(60 * USEC_PER_SEC, &m->replay);
        if (r < 0)
                return log_oom();

        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m");

        if (snapshot_gc_new(m->event, m->cas, m->config.snapshot_retention, &m->gc) < 0 ||
            workspace_usage_new(m->event, m->workspaces_fd, &m->usage) < 0)
                return log_oom();

        r = manager_watch_signals(m);
        if (r < 0)
                return r;

        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog, ignoring: %m");

        limits = (HttpServerLimits) {
                .max_connections = m->config.max_connections,
                .max_connections_per_client = m->config.max_connections_per_client,
                .header_timeout_usec = m->config.header_timeout_usec,
                .request_timeout_usec = m->config.request_timeout_usec,
                .max_body_bytes = m->config.max_request_body_bytes,
        };
        r = http_server_new(m->event, &limits, &cb, m, &m->http);
        if (r < 0)
                return log_error_errno(r, "Failed to start the HTTP server: %m");

        *ret = STEAL(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        m->idle_timer = sd_event_source_disable_unref(m->idle_timer);
        m->stop_timer = sd_event_source_disable_unref(m->stop_timer);
        m->http = http_server_free(m->http);
        m->kernels = kernel_manager_free(m->kernels);          /* before the runs they are */
        free(m->kernels_error);
        manager_fleet_done(m);
        execution_context_done(&m->exec);
        m->environments = env_manager_free(m->environments);   /* after the runs that held its prefixes */
        free(m->environments_error);
        m->broker = npu_broker_free(m->broker);                /* its jobs hold chips */
        free(m->broker_error);
        m->npu = npu_manager_free(m->npu);                     /* after the runs that held its chips */
        free(m->npu_error);
        m->keeper_pool = keeper_pool_free(m->keeper_pool);
        free(m->keeper_path);
        safe_close(m->keeper_fd);
        safe_close(m->exec_helper_fd);
        m->egress = egress_epochs_free(m->egress);
        m->gc = snapshot_gc_free(m->gc);
        m->usage = workspace_usage_free(m->usage);
        m->cas = cas_free(m->cas);
        m->scopes = scope_manager_free(m->scopes);
        m->bus = sd_bus_flush_close_unref(m->bus);   /* after its users: their last calls go out */
        m->replay = replay_table_free(m->replay);
        sandbox_probe_report_done(&m->probe);
        free(m->scopes_reason);
        m->cgroups = cgroup_root_free(m->cgroups);
        free(m->cgroups_reason);
        free(m->identity_error);
        free(m->refusal);
        free(m->stale_binary);
        safe_close(m->workspaces_fd);
        safe_close(m->records_fd);
        sd_event_unref(m->event);
        config_done(&m->config);
        secrets_done(&m->secrets);
        free(m->state_dir);
        free(m->runtime_dir);
        free(m);
        return NULL;
}

static int bind_listener(const char *address) {
        _cleanup_close_ int fd = -EBADF;
        ListenAddress a;
        int one = 1, r;

        r = listen_address_parse(address, &a);
        if (r < 0)
                return log_error_errno(r, "Invalid listen address '%s'.", address);

        fd = socket(a.addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "Failed to create a socket for '%s': %m", address);
        if (a.addr.sa.sa_family == AF_UNIX) {
                struct stat st;
                /* Remove a stale socket from an earlier run, never anything else. */
                if (lstat(a.addr.un.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
                        (void) unlink(a.addr.un.sun_path);
        } else
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, &a.addr.sa, a.len) < 0)
                return log_error_errno(errno, "Failed to bind to '%s': %m", address);
        if (a.addr.sa.sa_family == AF_UNIX)
                (void) chmod(a.addr.un.sun_path, 0660);
        if (listen(fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "Failed to listen on '%s': %m", address);
        return STEAL_FD(fd);
}

int manager_listen(Manager *m, char **extra_listen) {
        char **names = NULL;
        int n, r;

        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "Failed to read the sockets passed by systemd: %m");

        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names ? names[i] : "unknown";

                if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
                        log_warning("Passed file descriptor %i ('%s') is not a listening stream socket, closing it.",
                                    fd, name);
                        safe_close(fd);
                        continue;
                }
                /* FileDescriptorName=sciencediscovery: that listener speaks the ScienceDiscovery dialect. */
                r = http_server_add_listener_tag(m->http, fd, http_dialect_from_fd_name(name));
                if (r < 0) {
                        strv_free(names);
                        return log_error_errno(r, "Failed to serve socket '%s': %m", name);
                }
                m->socket_activated = true;
        }
        strv_free(names);

        if (!m->socket_activated) {
                char **list = !strv_length(extra_listen) ? m->config.listen : extra_listen;

                for (char **a = list; a && *a; a++) {
                        const char *address;
                        /* "sciencediscovery=ADDRESS": that listener speaks the ScienceDiscovery dialect. */
                        HttpDialect d = http_dialect_split_listen(*a, &address);
                        int fd = bind_listener(address);
                        if (fd < 0)
                                return fd;
                        r = http_server_add_listener_tag(m->http, fd, d);
                        if (r < 0)
                                return log_error_errno(r, "Failed to serve '%s': %m", *a);
                }
        }
        if (http_server_n_listeners(m->http) == 0)
                return log_error_errno(ENOENT,
                                       "No socket to listen on: none was passed by systemd and no Listen= address is configured.");

        /* Idle exit only when systemd keeps our socket, and not a fleet's node (its lease is ours). */
        if (m->socket_activated && m->config.idle_exit_usec > 0 && !m->config.fleet_enable) {
                r = sd_event_add_time_relative(m->event, &m->idle_timer, CLOCK_MONOTONIC,
                                               m->config.idle_exit_usec, USEC_PER_SEC, on_idle, m);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the idle timer: %m");
                (void) sd_event_source_set_description(m->idle_timer, "idle-exit");
        }
        return 0;
}

int manager_adopt_listeners(Manager *m, int *fds, const unsigned *tags, size_t n) {
        int r;

        for (size_t i = 0; i < n; i++) {
                r = http_server_add_listener_tag(m->http, fds[i], tags[i]);
                fds[i] = -EBADF;        /* taken, or closed on failure */
                if (r < 0)
                        return log_error_errno(r, "Failed to serve the listening socket handed on: %m");
        }
        return 0;
}

static void on_execution_busy_ref(void *userdata) {
        manager_busy_ref(userdata);
}

static void on_execution_busy_unref(void *userdata) {
        manager_busy_unref(userdata);
}

static void on_snapshot_published(void *userdata) {
        Manager *m = userdata;

        snapshot_gc_published(m->gc);
}

/* What executions depend on, once the probes, the egress set-up and the limits are known. */
static void manager_fill_execution_context(Manager *m) {
        m->exec = (ExecutionContext) {
                .event = m->event,
                .bwrap = m->config.bwrap,
                .tmp_size = m->config.tmp_size,
                .state_dir = m->state_dir,
                .quota = &m->quota,
                .limits = m->limits,
                .probe = &m->probe.probe,
                .scopes = m->scopes,
                .cgroups = m->cgroups,
                .keeper_pool = m->keeper_pool,
                .keeper_path = m->keeper_path,
                .prebuilt_max = m->config.prebuilt,
                .prebuilt_burst = m->config.prebuilt_burst,
                .prebuilt_burst_keep_usec = m->config.prebuilt_burst_keep_usec,
                /* A request that names no limits gets these (execution_request_parse()). */
                .prebuilt_limits = {
                        .memory_max = m->config.memory_max,
                        .tasks_max = m->config.tasks_max > 0 ? m->config.tasks_max + TASKS_OVERHEAD : 0,
                        .cpu_quota_percent = m->config.cpu_quota_percent,
                },
                .exec_helper_fd = m->exec_helper_fd,
                .runtime_dir = m->runtime_dir,
                .workspaces_fd = m->workspaces_fd,
                .records_fd = m->records_fd,
                .cas = m->cas,
                .egress = m->egress,
                .busy_ref = on_execution_busy_ref,
                .busy_unref = on_execution_busy_unref,
                .snapshot_published = on_snapshot_published,
                .userdata = m,
        };
}

/* The environments, once the probes know what bwrap can do here: loaded now, built after READY. */
static void manager_setup_environments(Manager *m) {
        int r;

        r = env_manager_new(&(EnvManagerParams) {
                                    .event = m->event,
                                    .config = &m->config,
                                    .state_dir = m->state_dir,
                                    .keeper_path = m->keeper_path,
                                    .probe = &m->probe.probe,
                                    .workspaces_fd = m->workspaces_fd,
                                    .egress = m->egress,
                                    .busy_ref = on_execution_busy_ref,
                                    .busy_unref = on_execution_busy_unref,
                                    .userdata = m,
                            },
                            &m->environments, &m->environments_error);
        if (r < 0) {
                if (!m->environments_error && asprintf(&m->environments_error, "%s", strerror(-r)) < 0)
                        m->environments_error = NULL;   /* contents undefined on failure */
                log_error("Environments are unavailable: %s", m->environments_error ?: "out of memory");
        }
}

/* Chips and devices ([NPU] Enable=yes): found and probed after READY, in a child. */
static void manager_setup_npu(Manager *m) {
        int r;

        if (!m->config.npu_enable)
                return;
        /* The probes are sandboxes: none where executions are refused (no usable sandbox, or
         * started as root without the sandbox user, where a probe would run as root). */
        if (m->identity_error || !m->probe.usable) {
                if (asprintf(&m->npu_error, "chips are not probed: %s",
                             m->identity_error ?: m->probe.reason ?: "no sandbox can be built on this host") < 0)
                        m->npu_error = NULL;            /* contents undefined on failure */
                log_warning("Chips and devices are unavailable: %s", m->npu_error ?: "out of memory");
                return;
        }
        r = npu_manager_new(&(NpuManagerParams) {
                                    .event = m->event,
                                    .config = &m->config,
                                    .state_dir = m->state_dir,
                                    .bwrap = m->config.bwrap,
                                    .probe = &m->probe.probe,
                            },
                            &m->npu, &m->npu_error);
        if (r < 0) {
                if (!m->npu_error && asprintf(&m->npu_error, "%s", strerror(-r)) < 0)
                        m->npu_error = NULL;            /* contents undefined on failure */
                log_error("Chips and devices are unavailable: %s", m->npu_error ?: "out of memory");
                return;
        }
        if (!m->config.npu_broker)
                return;
        r = npu_broker_new(&(NpuBrokerParams) {
                                   .event = m->event,
                                   .bus = m->bus,
                                   .config = &m->config,
                                   .state_dir = m->state_dir,
                                   .npu = m->npu,
                                   .busy_ref = on_execution_busy_ref,
                                   .busy_unref = on_execution_busy_unref,
                                   .userdata = m,
                           },
                           &m->broker, &m->broker_error);
        if (r < 0) {
                if (!m->broker_error && asprintf(&m->broker_error, "%s", strerror(-r)) < 0)
                        m->broker_error = NULL;         /* contents undefined on failure */
                log_error("The NPU broker is unavailable: %s", m->broker_error ?: "out of memory");
        }
}

/* Jupyter kernels ([Kernels] Enable=yes): runs of the /execute shape, through the same context. */
static void manager_setup_kernels(Manager *m) {
        int r;

        if (!m->config.kernels_enable)
                return;
        r = kernel_manager_new(&(KernelManagerParams) {
                                       .event = m->event, .exec = &m->exec, .config = &m->config,
                                       .environments = m->environments,
                                       .runtime_dir = m->runtime_dir, .busy_ref = on_execution_busy_ref,
                                       .busy_unref = on_execution_busy_unref, .userdata = m,
                               }, &m->kernels);
        if (r < 0 && asprintf(&m->kernels_error, "%s", strerror(-r)) < 0)
                m->kernels_error = NULL;
        if (r < 0)
                log_error_errno(r, "Kernels are unavailable: %m");
}

int manager_run(Manager *m) {
        int r;

        manager_fill_execution_context(m);
        manager_setup_environments(m);
        manager_setup_npu(m);
        manager_setup_kernels(m);
        manager_setup_fleet(m);

        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_STARTED,
                   "SANDBOX_VERSION=%s", PACKAGE_VERSION,
                   "SANDBOX_LISTENERS=%u", http_server_n_listeners(m->http),
                   "SANDBOX_SOCKET_ACTIVATED=%i", m->socket_activated,
                   "SANDBOX_STATE_DIRECTORY=%s", m->state_dir,
                   "MESSAGE=sandbox-runnerd %s ready, serving %u socket%s%s.", PACKAGE_VERSION,
                   http_server_n_listeners(m->http), http_server_n_listeners(m->http) == 1 ? "" : "s",
                   m->socket_activated ? " passed by systemd" : "");
        (void) sd_notifyf(false, "READY=1\nSTATUS=Serving %u socket(s).", http_server_n_listeners(m->http));
        env_manager_start(m->environments);
        npu_manager_start(m->npu);

        r = sd_event_loop(m->event);

        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_STOPPING,
                   "SANDBOX_UPTIME_SEC=%" PRIu64, manager_uptime_sec(m),
                   "MESSAGE=sandbox-runnerd stopping after %" PRIu64 " s.", manager_uptime_sec(m));
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}

const char *manager_refuses_new_work(Manager *m) {
        if (!m->retiring && !m->stopping && !m->stale_binary && manager_binary_replaced())
                manager_retire(m, "its binary was replaced on disk");
        if (m->stopping)
                return m->socket_activated
                       ? "the runner is stopping (SIGTERM): it interrupts the runs in progress and starts no new one; "
                         "retry, a new connection starts the runner again"
                       : "the runner is stopping (SIGTERM): it interrupts the runs in progress and starts no new one; "
                         "it was started by hand, so nothing starts it again";
        if (m->retiring) {
                free(m->refusal);
                if (asprintf(&m->refusal, "the runner is restarting (%s): it finishes the runs in progress and starts "
                             "no new one; retry, a new connection %s", m->retire_reason,
                             m->socket_activated ? "reaches the new runner"
                                                 : "waits until the runner has re-executed itself, then reaches it") < 0)
                        m->refusal = NULL;
                return m->refusal ?: "the runner is restarting; retry";
        }
        return NULL;
}

int manager_can_execute(Manager *m, const char **ret_reason) {
        *ret_reason = manager_refuses_new_work(m);
        if (*ret_reason)
                return -ESHUTDOWN;
        if (m->identity_error) {
                *ret_reason = m->identity_error;
                return -EPERM;
        }
        if (!m->probe.usable) {
                *ret_reason = m->probe.reason ?: "no sandbox can be built on this host";
                return -EOPNOTSUPP;
        }
        if (m->limits == LIMITS_RLIMIT && !m->config.allow_unscoped) {
                *ret_reason = "transient scopes are unavailable, the daemon has no cgroups of its own, and "
                              "[Execution] AllowUnscoped= is off";
                return -EOPNOTSUPP;
        }
        *ret_reason = NULL;
        return 0;
}

static void recover_one(const char *id, json_object *record, void *userdata) {
        Manager *m = userdata;
        _cleanup_free_ char *unit = NULL;
        json_object *ws = NULL, *pid_o = NULL, *start_o = NULL;
        struct timespec ts;
        int r;

        /* Another daemon on the same state directory that is alive keeps its runs. */
        if (json_object_object_get_ex(record, "daemonPid", &pid_o) &&
            json_object_object_get_ex(record, "daemonStartTime", &start_o)) {
                pid_t pid = (pid_t) json_object_get_int(pid_o);
                uint64_t start = (uint64_t) json_object_get_int64(start_o);
                if (pid > 0 && pid != getpid() && start != 0 && process_start_time(pid) == start)
                        return;
        }

        /* The previous daemon died with this run active: its keeper and bwrap died with it
         * (parent-death signals); the scope is killed to be sure, and the record says so. */
        if (m->scopes_available && asprintf(&unit, SCOPE_PREFIX "%s.scope", id) >= 0)
                (void) scope_kill_by_name(m->scopes, unit);

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        json_object_object_add(record, "state", json_object_new_string("interrupted"));
        json_object_object_add(record, "status", json_object_new_string("interrupted"));
        json_object_object_add(record, "finishedAt",
                               json_object_new_int64((int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000));
        r = record_write(m->records_fd, id, record, true);
        if (r < 0)
                log_warning_errno(r, "Failed to mark execution '%s' interrupted, ignoring: %m", id);
        (void) json_object_object_get_ex(record, "workspaceId", &ws);
        log_struct(LOG_WARNING,
                   "MESSAGE_ID=" SR_MESSAGE_EXECUTION_FINISHED,
                   "SANDBOX_EXECUTION_ID=%s", id,
                   "SANDBOX_WORKSPACE=%s", ws ? json_object_get_string(ws) : "",
                   "SANDBOX_SCOPE=%s", unit ?: "",
                   "SANDBOX_STATUS=interrupted",
                   "MESSAGE=Execution '%s' was still running when the previous daemon stopped; marked interrupted.", id);
}

int manager_setup_egress(Manager *m) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = egress_epochs_new(m->event, m->bus, m->state_dir, m->runtime_dir, &m->config, &m->egress, &error);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return log_struct_errno(LOG_ERR, r,
                                        "MESSAGE_ID=" SR_MESSAGE_CONFIG_INVALID,
                                        "MESSAGE=Invalid network policy: %s", error ?: strerror(-r));
        return 0;
}

int manager_recover(Manager *m) {
        int n;

        n = records_foreach_running(m->records_fd, recover_one, m);
        if (n < 0)
                return log_warning_errno(n, "Failed to scan the execution records, ignoring: %m");
        n = records_prune(m->records_fd, MANAGER_RECORDS_KEEP);
        if (n > 0)
                log_debug("Pruned %i old execution records.", n);
        return 0;
}

bool manager_workspace_usage(Manager *m, uint64_t *ret_bytes, uint64_t *ret_count) {
        return workspace_usage_get(m->usage, ret_bytes, ret_count);
}
