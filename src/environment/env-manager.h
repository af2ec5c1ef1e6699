/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The environments of this instance (DESIGN.md §14, API.md "Environments"): what each is and
 * wants, its phase (pending, building, ready, failed) and progress, the one queue of setups (one
 * at a time), the base environments (python-base after start-up, r-base on first use), the holds
 * that runs keep on a revision's prefix, and the JSON the API answers with. It owns the store
 * (env-store.h) and the provisioning steps (env-provision.h); it may call config/, sandbox/,
 * workspace/ (a client wheel is read from a workspace), egress/ (through env-source.h) and util/.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config/config.h"
#include "egress/egress-epochs.h"
#include "environment/env-source.h"
#include "sandbox/sandbox-argv.h"

typedef struct EnvManager EnvManager;
typedef struct EnvHold EnvHold;

typedef struct EnvManagerParams {
        sd_event *event;
        const Config *config;            /* [Environments], [Execution] Bwrap= and TmpSize= */
        const char *state_dir;           /* environments live in <state_dir>/environments */
        const char *keeper_path;
        const SandboxProbe *probe;
        int workspaces_fd;               /* client wheels are read from workspaces */
        EgressEpochs *egress;            /* online setups get a gateway of their own from it */
        /* Work that must keep the daemon alive (a setup, a removal). */
        void (*busy_ref)(void *userdata);
        void (*busy_unref)(void *userdata);
        void *userdata;
} EnvManagerParams;

/*
 * Why the API refuses a request: each kind is its own error code (api/api-environments.c maps
 * them): invalid_request, environment_unknown, environment_not_ready, environment_read_only,
 * environment_busy, index_url_invalid, package_spec_invalid, source_offline_unsupported,
 * channel_not_allowed.
 */
typedef enum EnvRefusal {
        ENV_REFUSAL_INVALID,
        ENV_REFUSAL_UNKNOWN,
        ENV_REFUSAL_NOT_READY,
        ENV_REFUSAL_READ_ONLY,
        ENV_REFUSAL_BUSY,
        ENV_REFUSAL_INDEX_URL,
        ENV_REFUSAL_PACKAGE_SPEC,
        ENV_REFUSAL_OFFLINE,
        ENV_REFUSAL_CHANNEL,
        _ENV_REFUSAL_MAX,
} EnvRefusal;

/*
 * env_manager_new() - open the store, load every environment and recover what a crash left
 * (build directories go, the live prefix stays). Nothing is built until env_manager_start().
 * Return: 0, or -errno with *ret_error.
 */
int env_manager_new(const EnvManagerParams *p, EnvManager **ret, char **ret_error);
EnvManager *env_manager_free(EnvManager *m);
static inline void env_manager_freep(EnvManager **m) {
        *m = env_manager_free(*m);
}

/* env_manager_start() - after the daemon is ready: the bootstrap ([Environments] Bootstrap=) and
 * the setups a restart interrupted, queued. */
void env_manager_start(EnvManager *m);
/* env_manager_stop() - the daemon stops: the running setup is killed (its prefix is not used). */
void env_manager_stop(EnvManager *m);
/* env_manager_retire() - the daemon retires: the running setup finishes, queued ones wait for the
 * next daemon (their setup.json stays). */
void env_manager_retire(EnvManager *m);

/* The API. JSON results are new references; on a refusal *ret_why says why (the caller frees). */
json_object *env_manager_list_json(EnvManager *m);
int env_manager_show_json(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                          char **ret_why);
int env_manager_revisions_json(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                               char **ret_why);
json_object *env_manager_setup_json(EnvManager *m);
/* PUT /environments/{name}: validate @body, copy client wheels, queue the setup. */
int env_manager_put(EnvManager *m, const char *name, json_object *body, json_object **ret,
                    EnvRefusal *ret_refusal, char **ret_why);
int env_manager_remove(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                       char **ret_why);
/* POST /environments/setup/retry: queue the failed ones again (@name: only that one). */
int env_manager_retry(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                      char **ret_why);
/* /health.environments */
json_object *env_manager_health_json(EnvManager *m);
/* env_manager_wheel_size() - the size of the client wheel @file stored under @sha256 (as a
 * revision record names it). Return: bytes, -EINVAL (not a valid hash or file name) or -errno. */
int64_t env_manager_wheel_size(EnvManager *m, const char *sha256, const char *file);

/*
 * env_manager_acquire() - for a run that names @name: a hold on the live revision's prefix, which
 * stays on disk until the hold is released even if a newer revision goes live meanwhile. The
 * first request for a base environment not built yet (r-base) queues its setup.
 * Return: 0; -ENOENT (unknown, ENV_REFUSAL_UNKNOWN); -EBUSY (no live revision yet,
 * ENV_REFUSAL_NOT_READY); -ENOMEM.
 */
int env_manager_acquire(EnvManager *m, const char *name, EnvHold **ret, EnvRefusal *ret_refusal, char **ret_why);
void env_hold_release(EnvHold *h);
const char *env_hold_name(const EnvHold *h);
unsigned env_hold_revision(const EnvHold *h);
EnvKind env_hold_kind(const EnvHold *h);
const char *env_hold_prefix(const EnvHold *h);   /* the host path of the held revision's prefix */
const char *env_hold_cover(const EnvHold *h);    /* an empty file, mode 0000, that hides host interpreters */
