/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon's side of egress: the network policy in force (config, then the API), one gateway
 * instance per policy revision (a systemd socket unit, or a child we socket-activate ourselves
 * when started by hand), and what a sandbox needs to use it.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

typedef struct Manager Manager;
typedef struct EgressPolicy EgressPolicy;
typedef struct EgressEpoch EgressEpoch;

/* egress_setup() - load the policy (settings/network.json if the API set one, else [Network]). */
int egress_setup(Manager *m, char **ret_error);
void egress_teardown(Manager *m);

/* egress_policy_json() - GET /api/network-policy. */
json_object *egress_current_json(Manager *m);
/*
 * egress_set_policy() - PUT /api/network-policy: validate, persist, rotate the epoch (new runs
 * use the new revision; running ones keep theirs). Return: 0, -EINVAL with *ret_error, -errno.
 */
int egress_set_policy(Manager *m, json_object *body, char **ret_error);

/*
 * egress_epoch_acquire() - for a new execution: NULL when the policy is "none"; else the current
 * epoch with its gateway started (or being started). Return: 0 or -errno with *ret_reason.
 */
int egress_epoch_acquire(Manager *m, EgressEpoch **ret, const char **ret_reason);
void egress_epoch_release(EgressEpoch *ep);
const char *egress_epoch_socket(const EgressEpoch *ep);
const char *egress_epoch_revision(const EgressEpoch *ep);

/* For /health: mode, revision, whether egress can work, and why not. */
void egress_health(Manager *m, json_object *o);

/* The in-sandbox bridge binary, or NULL when it is missing. */
const char *egress_bridge_path(Manager *m);
