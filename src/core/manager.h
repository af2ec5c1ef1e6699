/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Manager: event loop, configuration, secrets, HTTP server, idle exit and watchdog wiring,
 * the probes, and the owner of what executions depend on (their ExecutionContext, filled once
 * before the loop runs), of the egress epochs, the snapshot gc and the workspace usage. It calls
 * the modules below it (execution/, egress/, sandbox/, workspace/, config/, util/) and the HTTP
 * transport; the API's handlers are handed in by main().
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "http/auth.h"
#include "http/http-server.h"
#include "config/config.h"
#include "sandbox/sandbox.h"
#include "config/settings.h"
#include "execution/execution.h"

typedef struct ScopeManager ScopeManager;
typedef struct ReplayTable ReplayTable;
typedef struct EgressEpochs EgressEpochs;
typedef struct sd_bus sd_bus;
typedef struct CgroupRoot CgroupRoot;

typedef struct Manager {
        sd_event *event;
        Config config;
        Secrets secrets;
        HttpServer *http;
        sd_event_source *idle_timer;
        uint64_t start_usec;             /* CLOCK_MONOTONIC */
        uint64_t start_realtime_usec;
        char *state_dir;
        char *runtime_dir;
        bool socket_activated;
        unsigned busy;                   /* work that must keep the daemon alive (executions, released
                                          * keepers not yet reaped) */
        uint64_t n_auth_failures;

        int workspaces_fd;               /* $STATE_DIRECTORY/workspaces */
        int records_fd;                  /* $STATE_DIRECTORY/records */
        QuotaSettings quota;             /* in force for new executions and uploads */
        struct Cas *cas;                 /* $STATE_DIRECTORY/cas */
        struct SnapshotGc *gc;           /* its pruning (SnapshotRetention=) */
        struct WorkspaceUsage *usage;    /* /health's workspace usage */
        SandboxProbeReport probe;
        ScopeManager *scopes;
        bool scopes_available;
        char *scopes_reason;
        LimitsMechanism limits;          /* decided by manager_probe() */
        CgroupRoot *cgroups;             /* our delegated cgroups, when we have them */
        char *cgroups_reason;            /* ... or why not */
        char *identity_error;            /* started as root without a usable SandboxUser= */
        uid_t sandbox_uid;               /* the host uid payloads run as (ours) */
        ReplayTable *replay;
        bool stopping;                   /* SIGTERM seen: runs are being interrupted */
        bool retiring;                   /* manager_retire(): finishing runs, starting none, then exit */
        const char *retire_reason;       /* ... why (a static string) */
        bool reexec;                     /* retired, not socket-activated: re-execute (reexec.h) */
        char *refusal;                   /* the 503 message of manager_refuses_new_work() */
        char *stale_binary;              /* a re-execution of it failed: we run the old image (reexec.h) */
        unsigned generation;             /* how many times this daemon re-executed itself (reexec.h) */
        char *keeper_path;               /* sandbox-runner-keeper, as /proc/self/fd/<keeper_fd> */
        int keeper_fd;                   /* O_PATH: the file found at start-up */
        int exec_helper_fd;              /* O_PATH: sandbox-runner-exec (prebuilt sandboxes), or -EBADF */
        struct KeeperPool *keeper_pool;  /* keepers started ahead of their runs */

        sd_bus *bus;                     /* the system bus (scopes, egress units), or NULL */
        EgressEpochs *egress;            /* the network policy and its gateways (egress-epochs.h) */
        sd_event_source *stop_timer;
        ExecutionContext exec;           /* what executions depend on: filled by manager_run() */
        struct EnvManager *environments; /* the environments (NULL: their store cannot be used) */
        char *environments_error;        /* ... and why */
        struct NpuManager *npu;          /* chips and devices ([NPU] Enable=yes), or NULL */
        char *npu_error;                 /* ... and why not, when enabled */
        struct NpuBroker *broker;        /* the host NPU broker ([NPU] Broker=yes), or NULL */
        char *broker_error;              /* ... and why not, when enabled */
        struct KernelManager *kernels;   /* Jupyter kernels ([Kernels] Enable=yes), or NULL */
        char *kernels_error;             /* ... and why not, when enabled */
        struct FleetMember *fleet;       /* this node's record in the fleet ([Fleet] Enable=yes), or NULL */
        char *fleet_error;               /* ... and why not, when enabled */
        struct SdpSlot *sd_slots;        /* the ScienceDiscovery dialect's /execute* runs, waiting or
                                          * running (api/sd-queue.c; owned by their requests) */
} Manager;

#define MANAGER_STATE_DIR_DEFAULT "/var/lib/sandbox-runner"
#define MANAGER_RUNTIME_DIR_DEFAULT "/run/sandbox-runner"

/*
 * manager_directory_paths() - $STATE_DIRECTORY and $RUNTIME_DIRECTORY (their first entry), or the
 * defaults; nothing is created. Return: 0 or -ENOMEM.
 */
int manager_directory_paths(char **ret_state, char **ret_runtime);

/*
 * manager_directories() - the same, created if missing (0700 and 0755). Return: 0 or -errno.
 */
int manager_directories(char **ret_state, char **ret_runtime);

/*
 * manager_decide_limits() - what enforces executions' limits, as start-up decides it: transient
 * scopes when @scopes_available, else the daemon's own cgroups when it has them, else rlimits
 * only (executions then run only with [Execution] AllowUnscoped=yes).
 */
static inline LimitsMechanism manager_decide_limits(bool scopes_available, bool have_cgroups) {
        return scopes_available ? LIMITS_SYSTEMD_SCOPE : have_cgroups ? LIMITS_CGROUP : LIMITS_RLIMIT;
}

/*
 * manager_new() - build the loop and the HTTP server from a loaded config; @api answers the
 * requests (its begin() and dispatch(), called with the Manager as userdata: the handlers sit
 * above the core, main() wires them). Return: 0 or -errno.
 */
int manager_new(Config *config, Secrets *secrets, const HttpServerCallbacks *api, Manager **ret);
/* manager_set_limits_setup() - what main() found as root: the cgroups (taken) or why none, and
 * why executions must be refused (no usable SandboxUser=), if so. */
void manager_set_limits_setup(Manager *m, CgroupRoot *cgroups, char *cgroups_reason, char *identity_error);
Manager *manager_free(Manager *m);
static inline void manager_freep(Manager **m) {
        *m = manager_free(*m);
}

/*
 * manager_listen() - take the sockets systemd passed (any number, named "api" or unnamed) or,
 * without socket activation, bind @extra_listen (or the configured Listen= addresses).
 * Return: 0, -ENOENT when no listener could be had (with a log message), other -errno.
 */
int manager_listen(Manager *m, char **extra_listen);
/*
 * manager_adopt_listeners() - instead of manager_listen() after a re-execution (reexec.h): serve
 * the listening sockets the previous image handed on, each with its tag (the API dialect it
 * speaks), taking ownership of @fds. Return: 0 or -errno.
 */
int manager_adopt_listeners(Manager *m, int *fds, const unsigned *tags, size_t n);

/* manager_run() - notify readiness, run until SIGTERM/SIGINT or idle exit. Return: 0 or -errno. */
int manager_run(Manager *m);

/* manager_busy_ref()/unref() - keep the daemon from idle-exiting while work runs. */
void manager_busy_ref(Manager *m);
void manager_busy_unref(Manager *m);

uint64_t manager_uptime_sec(Manager *m);

/* manager_probe() - sandbox probes and scope availability, logged and kept for /health. */
int manager_probe(Manager *m);

/* manager-fleet.c: the node's membership of a fleet ([Fleet] Enable=yes): joined once the
 * manager is set up, left (its lease revoked, on a loop of its own) when the manager is freed,
 * and its part of /health. */
void manager_setup_fleet(Manager *m);
void manager_fleet_done(Manager *m);
struct json_object *manager_fleet_health(Manager *m);

#define MANAGER_RECORDS_KEEP 10000

/* manager_setup_egress() - after manager_listen(): the network policy and its gateway. */
int manager_setup_egress(Manager *m);

/* manager_workspace_usage() - the last measurement (false if none yet); refreshes it if old. */
bool manager_workspace_usage(Manager *m, uint64_t *ret_bytes, uint64_t *ret_count);

/* manager_recover() - mark runs a previous daemon left active as interrupted; prune records. */
int manager_recover(Manager *m);

/*
 * manager_retire() - a graceful restart (SIGHUP, i.e. "systemctl reload", which a package upgrade
 * runs; or the daemon's own binary replaced on disk): accept no new connection, start no new
 * execution, environment setup or NPU job, let those running finish, then exit. Under socket
 * activation systemd queues the connections that arrive meanwhile and starts the new binary for
 * them. @why is logged.
 */
void manager_retire(Manager *m, const char *why);

/* manager_refuses_new_work() - why nothing new may start (the daemon retires or stops; a
 * replaced binary makes it retire now), or NULL. For executions and NPU jobs alike. */
const char *manager_refuses_new_work(Manager *m);

/* manager_can_execute() - 0, or -errno with a message saying why executions are refused. */
int manager_can_execute(Manager *m, const char **ret_reason);
