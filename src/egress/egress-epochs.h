/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon's side of egress: the network policy in force (config, then the API), one gateway
 * instance per policy revision (a systemd socket unit, or a child we socket-activate ourselves
 * when started by hand), and what a sandbox needs to use it. It owns its state (EgressEpochs) and
 * may call the policy (egress-policy.h), config/ and util/; the Manager creates it and hands it
 * the system bus, executions take their epoch from it.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config/config.h"

typedef struct EgressEpochs EgressEpochs;
typedef struct EgressPolicy EgressPolicy;
typedef struct EgressEpoch EgressEpoch;
typedef struct EgressUpstream EgressUpstream;

/*
 * egress_epochs_new() - load the policy (settings/network.json if the API set one, else [Network]
 * of @config) and put it in force. @bus: the daemon's system bus or NULL (used, with a reference,
 * only when running as a systemd service: the gateways are units then).
 * Return: 0, -EINVAL (and the like) with *ret_error, -errno.
 */
int egress_epochs_new(sd_event *event, sd_bus *bus, const char *state_dir, const char *runtime_dir,
                      const Config *config, EgressEpochs **ret, char **ret_error);
EgressEpochs *egress_epochs_free(EgressEpochs *ee);
static inline void egress_epochs_freep(EgressEpochs **ee) {
        *ee = egress_epochs_free(*ee);
}

/* egress_policy_json() - GET /api/network-policy. */
json_object *egress_current_json(EgressEpochs *ee);
/*
 * egress_set_policy() - PUT /api/network-policy: validate, persist, rotate the epoch (new runs
 * use the new revision; running ones keep theirs). Return: 0, -EINVAL with *ret_error, -ENOMEM,
 * -errno (with *ret_error naming the file or directory that failed).
 */
int egress_set_policy(EgressEpochs *ee, json_object *body, char **ret_error);

/*
 * egress_epoch_acquire() - for a new execution: NULL when the policy is "none"; else the current
 * epoch with its gateway started (or being started). Return: 0 or -errno with *ret_reason.
 */
int egress_epoch_acquire(EgressEpochs *ee, EgressEpoch **ret, const char **ret_reason);
void egress_epoch_release(EgressEpoch *ep);
/*
 * egress_epoch_acquire_for() - a gateway of its own for @allow (host entries) and @mirrors
 * (address ranges), independent of the policy in force: the provisioning sandbox of an
 * environment reaches its index through it (DESIGN.md §14), a ScienceDiscovery run its
 * per-request allowlist (docs/api.md §15). An epoch with the same policy is
 * shared. Release it with egress_epoch_release().
 * Return: 0, or -errno with *ret_error (allocated).
 */
int egress_epoch_acquire_for(EgressEpochs *ee, char *const *allow, char *const *mirrors, EgressEpoch **ret,
                             char **ret_error);
/*
 * egress_epoch_acquire_route() - as egress_epoch_acquire_for(), in mode open (@open: any public
 * destination, @allow must be empty) or allowlist, and through @upstream (NULL: direct) except
 * for the targets @no_proxy names. The upstream's credentials go to the gateway in a file of
 * its own (owner-only), never into the policy snapshot; a keyed tag of them is part of the
 * revision, so every upstream and credential has its own gateway instance.
 */
int egress_epoch_acquire_route(EgressEpochs *ee, bool open, char *const *allow, char *const *mirrors,
                               const EgressUpstream *upstream, const char *no_proxy, EgressEpoch **ret,
                               char **ret_error);
const char *egress_epoch_socket(const EgressEpoch *ep);
const char *egress_epoch_revision(const EgressEpoch *ep);
/* egress_epoch_open() - whether @ep's policy is in mode open (any public destination). */
bool egress_epoch_open(const EgressEpoch *ep);

/* egress_available() - whether a policy of its own (egress_epoch_acquire_for()) can work here;
 * false with the reason when a helper is missing or, under systemd, the bus is. */
bool egress_available(EgressEpochs *ee, const char **ret_reason);

/* For /health: mode, revision, whether egress can work, and why not. */
void egress_health(EgressEpochs *ee, json_object *o);

/* The in-sandbox bridge binary, or NULL when it is missing. */
const char *egress_bridge_path(EgressEpochs *ee);
