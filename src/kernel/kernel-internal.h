/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What kernel.c (one kernel), kernel-wire.c (its sockets and messages) and kernel-manager.c share. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "kernel/jupyter-msg.h"
#include "kernel/kernel-connection.h"
#include "kernel/kernel-output.h"
#include "kernel/kernel-routes.h"
#include "kernel/kernel-zmq.h"
#include "kernel/kernel.h"

typedef struct Execution Execution;
typedef struct KernelAdopted KernelAdopted;
typedef struct PoolReaper PoolReaper;
typedef struct AdoptedSnapshot AdoptedSnapshot;
struct EnvManager;

#define KERNEL_SPEC_DEFAULT "python3"

/* How long a kernel may take to answer its first kernel_info_request, and the nudge's period. */
#define KERNEL_READY_TIMEOUT_USEC (60 * USEC_PER_SEC)
#define KERNEL_NUDGE_USEC (500 * USEC_PER_MSEC)
#define KERNEL_NUDGE_CONNECT_USEC (5 * USEC_PER_MSEC)   /* while the shell socket is not connected */
/* An interrupt_request unanswered for this long: SIGINT to the kernel's process. */
#define KERNEL_INTERRUPT_FALLBACK_USEC (5 * USEC_PER_SEC)
/* A dead kernel (crashed, OOM, lifetime, culled) stays listed with its reason this long. */
#define KERNEL_DEAD_LINGER_USEC (600 * USEC_PER_SEC)
/* What the daemon keeps of a kernel's own stdout and stderr (not its iopub). */
#define KERNEL_OUTPUT_RETENTION_BYTES (64ULL * 1024)
/* No lifetime: the run's wall-clock limit is this (sd-event cannot arm "never"). */
#define KERNEL_NO_LIFETIME_USEC (10ULL * 365 * 24 * 3600 * USEC_PER_SEC)

struct KernelClient {
        Kernel *kernel;
        KernelClient *prev, *next;
        KernelClientOps ops;
        void *userdata;
};

/* The kernel's directory (kernel-dir.c): its five sockets, the connection file and a spare; a few
 * KiB of regular files. More, or anything but sockets and files, and the kernel is ended. */
#define KERNEL_DIR_MAX_ENTRIES 7
#define KERNEL_DIR_MAX_BYTES (8U * 1024)

/* How many client messages wait for a kernel that is not ready yet; one more is refused (-EAGAIN). */
#define KERNEL_PENDING_MAX 64

struct Kernel {
        KernelManager *manager;
        Kernel *prev, *next;
        char id[JUPYTER_UUID_LEN + 1];
        char session[JUPYTER_UUID_LEN + 1];      /* the daemon's session, in its own messages */
        char key[KERNEL_KEY_LEN + 1];
        char *spec;
        char *owner;
        char *workspace_id;
        json_object *env;                        /* the request's, kept for restarts */
        json_object *limits;                     /* as asked (the model shows the effective ones) */
        json_object *network;
        uint64_t memory_max, tasks_max;
        unsigned cpu_quota_percent;
        char *dir;                               /* host path: <runtime>/kernels/<id> */
        char *environment;                       /* a managed environment's kernel (NULL: python3) */
        bool r_kernel;                           /* ... IRkernel's */

        KernelState state;
        KernelEndReason reason;
        bool counted;                            /* holds a place under the cap and a busy reference */
        bool ready;                              /* kernel_info answered and iopub heard since the start */
        bool iopub_heard;
        bool info_replied;                       /* a kernel_info_reply came since the start */
        bool restarting;                         /* the run ends for a restart: a new one follows */
        bool executing;                          /* an execute_request is between its busy and idle */
        bool prespawned;                         /* started by the pool, not handed out: hidden */
        bool pool_released;                      /* ... and no longer in it (ended) */
        uint64_t created_usec;                   /* CLOCK_MONOTONIC */
        uint64_t last_activity_usec;             /* CLOCK_REALTIME */
        uint64_t last_activity_mono;
        unsigned generation;                     /* runs so far: the execution id's suffix */
        bool final_snapshot;                     /* re-adopted, its run over: its end snapshot runs */

        Execution *exec;
        KernelAdopted *adopted;                  /* its sandbox is a previous daemon's (kernel-adopt.h) */
        KernelSocket *sockets[_JUPYTER_CHANNEL_MAX];
        JupyterDigestHistory *digests;
        KernelOutput *output;                    /* per-request budget ([Kernels] MaxOutputBytes=) */
        KernelRoutes *routes;
        KernelClient *clients;
        unsigned n_clients;
        /* Clients' messages sent while the kernel is not ready (starting, restarting): sent in
         * order once it is (a client may send at once after POST /api/kernels, as DocsGPT does). */
        JupyterMsg *pending[KERNEL_PENDING_MAX];
        size_t n_pending;

        char interrupt_id[JUPYTER_UUID_LEN + 1]; /* our interrupt_request in flight */
        sd_event_source *nudge_timer;
        sd_event_source *ready_timer;
        sd_event_source *interrupt_timer;
        sd_event_source *idle_timer;
        sd_event_source *linger_timer;
        sd_event_source *dir_watch;              /* inotify on dir (kernel-dir.c) */
        uint64_t n_bad_messages;
        /* A message from the kernel is being handled (a client's deliver() may delete the kernel):
         * kernel_free() then unlinks it and tears it down, and the memory goes afterwards. */
        unsigned dispatching;
        bool free_pending;
        unsigned clients_epoch;                  /* bumped whenever the clients are all closed */
};

struct KernelManager {
        sd_event *event;
        ExecutionContext *exec;
        struct EnvManager *environments;         /* NULL: only python3 */
        const Config *config;
        char *dir;                               /* <runtime>/kernels */
        int dir_fd;
        void *zmq;
        void (*busy_ref)(void *userdata);
        void (*busy_unref)(void *userdata);
        void *userdata;
        Kernel *kernels;
        unsigned n_live;                         /* counted at request time, against MaxKernels= */
        bool stopping;
        /* Prespawn= (kernel-pool.c): kernels in the pool (starting or ready), its refill. */
        unsigned n_pool;
        sd_event_source *pool_defer;          /* the refill timer (kernel_pool_schedule()) */
        sd_event_source *pool_backoff_timer;
        uint64_t pool_backoff_usec;
        PoolReaper *pool_reapers;
        AdoptedSnapshot *adopted_snapshots;      /* kernel-adopt.c: end snapshots running */
};

/* kernel-specs.c: what POST's name (and our "environment") ask for. @ret->spec is @name or the
 * environment's name (valid while @ret is), @ret->environment is the caller's to free (NULL:
 * python3). Return: 0, -ENOENT (unknown spec, environment not ready or without a kernel),
 * -EINVAL (a spec of another environment than the one named). */
typedef struct KernelSpecChoice {
        const char *spec;
        char *environment;
        bool r;
} KernelSpecChoice;
int kernel_spec_resolve(KernelManager *km, const char *name, const char *environment, KernelSpecChoice *ret,
                        char **ret_error);
/* The kernelspec's argv, "{connection_file}" where the file goes. */
char *const *kernel_spec_argv(bool r);
/* Before the run starts: a hold on the kernel's environment, given to @e (as runs naming it). */
int kernel_use_environment(Kernel *k, Execution *e, char **ret_error);

/* kernel.c */
int kernel_new(KernelManager *km, const KernelStartRequest *r, Kernel **ret, char **ret_error);
int kernel_run(Kernel *k, char **ret_error);
Kernel *kernel_free(Kernel *k);
void kernel_free_pending(Kernel *k);
void kernel_touch(Kernel *k);
void kernel_set_state(Kernel *k, KernelState s);
void kernel_became_ready(Kernel *k);
void kernel_end(Kernel *k, KernelEndReason reason);
/* kernel_await_ready() - connect to the kernel's sockets and nudge it with kernel_info until it
 * answers (then kernel_became_ready()), ending it after KERNEL_READY_TIMEOUT_USEC. */
int kernel_await_ready(Kernel *k);
/* kernel_run_ended() - the kernel's sandbox is gone: the next run of a restart, else its end. */
void kernel_run_ended(Kernel *k, KernelEndReason reason);

/* kernel-dir.c: watch the kernel's directory (once; stopped with the timers). Return: 0 or -errno. */
int kernel_dir_watch(Kernel *k);
/* kernel_dir_remove() - remove the directory; what is left (a process not dead yet still writes)
 * is removed again every 100 ms until it is gone. */
void kernel_dir_remove(Kernel *k);
void kernel_arm_idle(Kernel *k);

/* kernel-pool.c: Prespawn=. take() hands out a kernel of the pool when @r asks nothing it lacks
 * (NULL: none); release() is called as a kernel ends, before its run is dropped. */
Kernel *kernel_pool_take(KernelManager *km, const KernelStartRequest *r);
/* Whether a prespawned kernel can serve @r: the default spec, no workspaceId, environment, env
 * variable, limits (or {}), or network other than "default". */
bool kernel_pool_request_fits(const KernelStartRequest *r);
void kernel_pool_ready(Kernel *k);
/* kernel_pool_schedule() - refill from the loop (a defer source: after what runs now). */
void kernel_pool_schedule(KernelManager *km);
void kernel_pool_release(Kernel *k);
void kernel_pool_free(KernelManager *km);

/* kernel-wire.c */
int kernel_wire_connect(Kernel *k);
void kernel_wire_close(Kernel *k);
/* kernel_wire_flush_pending() - send what clients sent before the kernel was ready. */
void kernel_wire_flush_pending(Kernel *k);
/* kernel_wire_drop_pending() - forget them: the kernel ends (a restart keeps them for the next run). */
void kernel_wire_drop_pending(Kernel *k);
int kernel_wire_send(Kernel *k, const JupyterMsg *m);
int kernel_wire_send_own(Kernel *k, JupyterChannel channel, const char *msg_type, json_object *content,
                         char ret_id[static JUPYTER_UUID_LEN + 1]);
void kernel_broadcast_status(Kernel *k, const char *execution_state);
void kernel_clients_closed(Kernel *k);
