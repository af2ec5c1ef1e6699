/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The environment manager's state, shared by env-manager.c (the API, holds) and env-setup.c
 * (the queue, the provisioning steps, publishing). */
#pragma once

#include "environment/env-manager.h"
#include "environment/env-provision.h"
#include "environment/env-store.h"

typedef enum EnvPhase {
        ENV_PHASE_PENDING,
        ENV_PHASE_BUILDING,
        ENV_PHASE_READY,
        ENV_PHASE_FAILED,
        _ENV_PHASE_MAX,
        _ENV_PHASE_INVALID = -22,
} EnvPhase;

const char *env_phase_to_string(EnvPhase p);

/* The built-in base environments. */
typedef struct EnvBase {
        const char *name;
        EnvKind kind;
        const char *const *debian_packages;
} EnvBase;

const EnvBase *env_base_find(const char *name);

/* How many runs hold each revision's prefix. */
typedef struct EnvRevisionHold {
        unsigned revision;
        unsigned n;
        char *prefix;
} EnvRevisionHold;

typedef struct Env Env;
struct Env {
        EnvManager *manager;
        Env *next;
        char *name;
        bool base;
        EnvMeta *meta;                   /* what the live revision was built from; NULL: none yet */
        EnvMeta *wanted;                 /* what a queued or running setup builds (setup.json) */
        EnvMeta *failed;                 /* the last failed setup's spec, for a retry */
        EnvPhase phase;
        unsigned done, total;
        char *step;
        char *error;
        char *setup_id;                  /* the queued, running or last setup */
        unsigned live_revision;          /* 0 = none */
        char *live_prefix;
        EnvRevisionHold *holds;
        size_t n_holds;
        bool queued;
        bool removed;                    /* DELETEd: gone from the API, freed when not held */
};

struct EnvHold {
        Env *env;
        unsigned revision;
        char *prefix;
};

struct EnvManager {
        sd_event *event;
        const Config *config;
        char *state_dir;
        char *keeper_path;
        const SandboxProbe *probe;
        int workspaces_fd;
        EgressEpochs *egress;
        EgressEpoch *epoch;              /* the running setup's gateway, when it is online */
        void (*busy_ref)(void *userdata);
        void (*busy_unref)(void *userdata);
        void *userdata;

        EnvStore *store;
        char *cover;                     /* <root>/cover: empty, mode 0000 */
        char *script;                    /* the provisioner's text */
        size_t script_size;
        char *script_error;              /* why there is none */
        Env *envs;                       /* sorted by name */
        Env **queue;                     /* setups waiting, in order */
        size_t n_queue;
        Env *running;                    /* the setup in its sandbox */
        EnvProvision *provision;
        uint64_t setup_start_usec;
        struct ChildTask *trash_task;    /* emptying the trash */
        bool trash_again;
        bool started, stopping;
};

Env *env_find(EnvManager *m, const char *name);
int env_add(EnvManager *m, const char *name, bool base, Env **ret);
void env_free_if_unused(Env *e);
int env_set_error(Env *e, const char *fmt, ...) _printf_(2, 3);
json_object *env_json(Env *e, bool full);

/* env_refuse() - set the refusal and its reason (formatted). Return: @error, or -ENOMEM. */
int env_refuse(EnvRefusal *ret_refusal, char **ret_why, EnvRefusal refusal, int error, const char *fmt, ...)
        _printf_(5, 6);

/* env-request.c: the body of a PUT, checked, wheels stored: what the setup will build. */
int env_request_parse(EnvManager *m, const char *name, Env *existing, json_object *body, EnvMeta **ret,
                      EnvRefusal *ret_refusal, char **ret_why);

/* env-setup.c */
int env_setup_queue(Env *e, EnvMeta *wanted);     /* takes @wanted; persists it as setup.json */
void env_setup_next(EnvManager *m);
int env_setup_recover(EnvManager *m);             /* at start: load, recover, find interrupted setups */
int env_base_meta(const EnvBase *b, const Config *config, EnvMeta **ret);
int env_retire_revision(Env *e, unsigned revision);  /* an old prefix goes when no run holds it */
void env_trash_empty_async(EnvManager *m);
