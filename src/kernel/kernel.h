/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Stateful Jupyter kernels, each in a sandbox of its own (docs/kernels.md). The KernelManager
 * owns every kernel of the daemon: kernelspecs, the cap, prespawned kernels, culling, records for
 * re-adoption. A Kernel is one sandboxed ipykernel (or IRkernel) reached over ZMQ ipc sockets in
 * a per-kernel directory; the daemon holds one iopub SUB for it from its start and speaks the
 * wire protocol itself. The HTTP side (src/api/kg-*.c) sees only this interface: it attaches a
 * KernelClient per WebSocket, sends the client's messages, and gets the kernel's messages back.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "kernel/jupyter-msg.h"

typedef struct sd_event sd_event;
typedef struct Config Config;
typedef struct ExecutionContext ExecutionContext;
typedef struct KernelManager KernelManager;
typedef struct Kernel Kernel;
typedef struct KernelClient KernelClient;

typedef enum KernelState {
        KERNEL_STARTING,
        KERNEL_IDLE,
        KERNEL_BUSY,
        KERNEL_RESTARTING,
        KERNEL_DEAD,
        _KERNEL_STATE_MAX,
        _KERNEL_STATE_INVALID = -EINVAL,
} KernelState;

typedef enum KernelEndReason {
        KERNEL_END_NONE,
        KERNEL_END_DELETED,
        KERNEL_END_CULLED,
        KERNEL_END_LIFETIME,
        KERNEL_END_OOM,
        KERNEL_END_CRASHED,
        KERNEL_END_INTERRUPTED,          /* the daemon stopped and could not keep it */
        KERNEL_END_MISBEHAVED,           /* it filled its socket directory (kernel-dir.c) */
        _KERNEL_END_MAX,
        _KERNEL_END_INVALID = -EINVAL,
} KernelEndReason;

const char *kernel_state_to_string(KernelState s);
const char *kernel_end_reason_to_string(KernelEndReason r);

/* What the manager depends on, handed in by its owner (the daemon's Manager, or a test helper):
 * kernels are runs of the /execute shape, so they start through the executions' context. */
typedef struct KernelManagerParams {
        sd_event *event;
        ExecutionContext *exec;          /* the runs' context (filled, alive as long as the manager) */
        const Config *config;            /* [Kernels] */
        struct EnvManager *environments; /* managed environments' kernelspecs (NULL: python3 only) */
        const char *runtime_dir;         /* kernels' directories: <runtime_dir>/kernels/<id> */
        /* Kernels alive keep the owner from idle-exiting. */
        void (*busy_ref)(void *userdata);
        void (*busy_unref)(void *userdata);
        void *userdata;
} KernelManagerParams;

/* kernel_manager_new() - Return: 0, -ENAMETOOLONG when @p->runtime_dir leaves no room for the
 * kernels' socket paths (sun_path), or -errno. */
int kernel_manager_new(const KernelManagerParams *p, KernelManager **ret);
KernelManager *kernel_manager_free(KernelManager *km);
/* kernel_manager_stop() - the daemon stops: every kernel ends (reason interrupted). */
void kernel_manager_stop(KernelManager *km);

/* GET /api/kernelspecs: {"default": ..., "kernelspecs": {name: {name, spec:{argv, display_name,
 * language, interrupt_mode, env:{}, metadata:{}}, resources:{}}}}; one spec by name (NULL: none). */
json_object *kernel_manager_specs(KernelManager *km);
json_object *kernel_manager_spec(KernelManager *km, const char *name);

/* What POST /api/kernels asks; @owner is the credential's name (listing and id routes are scoped
 * to it). Body fields the HTTP side parsed: name (NULL: the default spec), env (KERNEL_* and the
 * allowlist only), workspaceId (NULL: a fresh kernel-<id>), limits as for runs ({memoryBytes,
 * tasks, cpuPercent}, capped by [Kernels]), network "none" (no network at all) or "default"/NULL
 * (the policy in force, as runs). */
typedef struct KernelStartRequest {
        const char *owner;
        const char *spec;
        json_object *env;
        const char *workspace_id;
        json_object *limits;
        json_object *network;
        const char *environment;         /* ours: a managed environment's kernel, as runs name one */
} KernelStartRequest;

/* Starts a kernel (or hands out a prespawned one). Returns at once with the kernel in STARTING
 * (or IDLE when prespawned). Errors: -EUSERS at the cap (403), -ENOENT unknown spec or workspace,
 * -EBUSY workspace leased (409), -EINVAL bad limits (400); @ret_error says why. */
int kernel_manager_start(KernelManager *km, const KernelStartRequest *r, Kernel **ret, char **ret_error);

Kernel *kernel_manager_find(KernelManager *km, const char *owner, const char *id);
/* Kernels of @owner (NULL: all), as a JSON array of models. */
json_object *kernel_manager_list(KernelManager *km, const char *owner);
unsigned kernel_manager_count(KernelManager *km);
/* The kernel, not yet ended, whose workspace is @workspace_id (it holds that workspace's write
 * lease for its whole life, restarts included), or NULL. */
Kernel *kernel_manager_find_by_workspace(KernelManager *km, const char *workspace_id);
/* Prespawn= (kernel-pool.c): prespawned kernels ready to be handed out (and, in @ret_starting,
 * those still starting); kernel_pool_drain() ends them all (reason deleted, their workspaces
 * removed) and refills from the loop: the network policy changed. NULL @km: nothing. */
unsigned kernel_manager_prespawned(KernelManager *km, unsigned *ret_starting);
void kernel_pool_drain(KernelManager *km);

/* The model: id, name, last_activity (%Y-%m-%dT%H:%M:%S.%fZ), execution_state, connections,
 * workspaceId, limits, network, reason (once dead). */
json_object *kernel_model(Kernel *k);
const char *kernel_id(Kernel *k);
KernelState kernel_state(Kernel *k);
KernelEndReason kernel_end_reason(Kernel *k);     /* KERNEL_END_NONE while alive */
const char *kernel_owner(Kernel *k);


/* kernel_interrupt() - interrupt_request on control; SIGINT to the kernel's process when it is not
 * answered within 2 s (or cannot be sent). kernel_restart() - the run ends and a new one starts on
 * the same id, key, workspace and limits (state restarting, then idle once ready; the clients get
 * status restarting). Both: 0, or -ESHUTDOWN for a dead kernel. */
int kernel_interrupt(Kernel *k);
int kernel_restart(Kernel *k);
/* Ends the kernel now (SIGKILL to its scope), releases its workspace lease, snapshots it, removes
 * its directory; the kernel is gone from the manager when this returns. */
int kernel_delete(Kernel *k, KernelEndReason reason);

/* One WebSocket. deliver() gets every iopub message and the shell/control/stdin replies whose
 * parent this client sent (a reference the callee may keep: jupyter_msg_free() when done is the
 * callee's); closed() once when the kernel is gone (after a final status: dead on iopub). */
typedef struct KernelClientOps {
        void (*deliver)(KernelClient *c, JupyterMsg *m, void *userdata);
        void (*closed)(KernelClient *c, KernelEndReason reason, void *userdata);
} KernelClientOps;

/* kernel_attach() - Return: 0, -ESHUTDOWN for a dead kernel, -ENOMEM. deliver() and closed() may
 * detach their own client (closed() must, eventually: the client stays allocated until then) and
 * may delete the kernel; they must not detach other clients. */
int kernel_attach(Kernel *k, const KernelClientOps *ops, void *userdata, KernelClient **ret);
/* Sends @m (takes it) on its channel; the daemon signs it; its replies come back to this client.
 * Return: 0; -EINVAL for iopub or a message without msg_id; -ESHUTDOWN once the kernel is gone;
 * -EAGAIN while the kernel does not listen yet (starting or restarting: nothing is queued) or its
 * queue is full; -ENOMEM. */
int kernel_client_send(KernelClient *c, JupyterMsg *m);
/* kernel_detach() - the WebSocket is gone (also after closed()); frees @c. */
void kernel_detach(KernelClient *c);
