/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The node's membership in a fleet ([Fleet] Enable=yes, docs/fleet.md): nodes/<node id> in etcd,
 * under a lease the node keeps alive, with its advertised URL and what it can take (the
 * describe callback's JSON). Off the request path: a grant and a put at start, a keepalive and a
 * refreshed put every third of the lease's TTL, a revoke at a clean stop.
 */
#pragma once

#include <json-c/json.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct FleetMember FleetMember;

typedef struct FleetMemberParams {
        sd_event *event;
        const char *node_id;
        const char *advertise_url;
        char *const *endpoints;          /* etcd's client URLs */
        const char *prefix;              /* every key's */
        const char *ca_file, *cert_file, *key_file;
        uint64_t lease_ttl_usec;
        /* The node's record beyond node, url, version and startedAt: its capacity, filled in by
         * the daemon (an object the callback adds fields to). */
        void (*describe)(json_object *record, void *userdata);
        void *userdata;
} FleetMemberParams;

/* fleet_member_new() - copies @p; nothing is sent until fleet_member_start(). Return: 0, -EINVAL
 * (no node id, URL or endpoint; a TTL under 2 s), -ENOMEM, or an etcd_client_new() error. */
int fleet_member_new(const FleetMemberParams *p, FleetMember **ret);
/* fleet_member_start() - registers, and keeps the registration up (retrying while etcd cannot be
 * reached: the node serves what it has meanwhile). */
void fleet_member_start(FleetMember *m);
/* fleet_member_leave() - revokes the lease (the record goes at once, not after its TTL), waiting
 * at most @timeout_usec by running @m's event loop; for the end of the daemon. */
void fleet_member_leave(FleetMember *m, uint64_t timeout_usec);
FleetMember *fleet_member_free(FleetMember *m);
SR_DEFINE_FREE_FUNC(FleetMember *, fleet_member_free);

/* fleet_member_health() - for /health: {enabled, node, url, state ("connecting", "registered",
 * "unavailable"), lease, ttlSec, registrations, lastError, lastErrorAt}. */
json_object *fleet_member_health(FleetMember *m);
/* fleet_member_registered() - whether the node's record is in etcd (as far as it knows). */
bool fleet_member_registered(FleetMember *m);
