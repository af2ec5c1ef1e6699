/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One provisioning step of an environment, run in a sandbox (DESIGN.md §14): the in-sandbox
 * provisioner (sandbox-runner-provision.py, run by Debian's /usr/bin/python3) with its plan on
 * stdin, in a bwrap sandbox built by the same argv builder, seccomp program, keeper and fd layout
 * as an execution's, the new prefix its only writable bind (at /opt/science-env), a scratch
 * directory as its /workspace, and no network unless it is given a gateway of its own (whose
 * allowlist is the index's host only). Its stdout is read as JSON
 * lines ({"progress": ...}, then {"result": ...}); the last line of its stderr becomes the error.
 * It owns its process and its event sources; it may call sandbox/ (argv, keeper, seccomp) and
 * util/; what the step means is the caller's (environment/env-manager.c).
 */
#pragma once

#include <json-c/json.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "sandbox/sandbox-argv.h"

typedef struct EnvProvision EnvProvision;

typedef struct EnvProvisionSpec {
        sd_event *event;
        const char *bwrap;
        const char *keeper_path;
        const SandboxProbe *probe;
        const char *script;             /* the provisioner's text, bound at SANDBOX_CODE_PATH */
        size_t script_size;
        const char *plan;               /* the plan (JSON), its stdin */
        const char *build_path;         /* host: the new prefix, bound writable at SANDBOX_ENV_PREFIX */
        const char *scratch_path;       /* host: its /workspace and HOME */
        const SandboxBind *binds;       /* further binds (read-only sources: a wheelhouse, dpkg's db) */
        size_t n_binds;
        uint64_t tmp_size;
        uint64_t timeout_usec;
        /* Online (both or neither): the gateway's socket and the bridge, as for an execution
         * with a network policy; the network seccomp variant then. */
        const char *egress_socket;
        const char *bridge;
} EnvProvisionSpec;

/* Progress as the step reports it; @step may be NULL. */
typedef void (*EnvProvisionProgressFn)(unsigned done, unsigned total, const char *step, void *userdata);
/*
 * The step ended: @error 0 with @result (the "result" object, borrowed for the call), or -errno
 * with @message (what failed: the step's last line of stderr, a timeout, a kill).
 */
typedef void (*EnvProvisionDoneFn)(int error, const char *message, json_object *result, void *userdata);

/*
 * env_provision_start() - start the step. @done is called exactly once, from the loop, unless the
 * step is freed first. Return: 0, or -errno (nothing started, @done not called).
 */
int env_provision_start(const EnvProvisionSpec *spec, EnvProvisionProgressFn progress, EnvProvisionDoneFn done,
                        void *userdata, EnvProvision **ret);
/* env_provision_kill() - stop the step (its done follows with -ECANCELED and @why). */
void env_provision_kill(EnvProvision *p, const char *why);
/* env_provision_free() - kill what still runs, wait for the keeper, free. */
EnvProvision *env_provision_free(EnvProvision *p);
