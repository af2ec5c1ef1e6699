/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The node's membership of a fleet ([Fleet] Enable=yes, fleet/membership.c): set up after the
 * rest of the manager, its record filled in with what the node can take, left at the end.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/manager.h"
#include "execution/prebuilt.h"
#include "fleet/membership.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"

/* MemAvailable of /proc/meminfo, in bytes (0: unknown). */
static uint64_t mem_available(void) {
        char line[128];
        uint64_t kib = 0;
        FILE *f = fopen("/proc/meminfo", "re");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
                        break;
        (void) fclose(f);
        return kib * 1024;
}

/* The node's record beyond its name and URL: what placement weighs (issue 24: free capacity, and
 * the sandboxes built ahead of each shape). */
static void describe_node(json_object *record, void *userdata) {
        Manager *m = userdata;
        json_object *cap = json_object_new_object(), *pre = json_object_new_object();
        struct statvfs sv;

        if (!cap || !pre) {
                json_object_put(cap);
                json_object_put(pre);
                return;
        }
        json_object_object_add(cap, "runsActive", json_new_u64(m->exec.n_running));
        json_object_object_add(cap, "memoryAvailableBytes", json_new_u64(mem_available()));
        if (statvfs(m->state_dir, &sv) >= 0)
                json_object_object_add(cap, "diskFreeBytes", json_new_u64((uint64_t) sv.f_bavail * sv.f_frsize));
        json_object_object_add(cap, "cpus", json_new_u64((uint64_t) MAX(sysconf(_SC_NPROCESSORS_ONLN), 1L)));
        json_object_object_add(record, "capacity", cap);
        for (PrebuiltShape s = 0; s < _PREBUILT_SHAPE_MAX; s++) {
                unsigned ready, building;

                prebuilt_counts(&m->exec, s, &ready, &building);
                json_object_object_add(pre, prebuilt_shape_to_string(s), json_new_u64(ready));
        }
        json_object_object_add(record, "prebuilt", pre);
}

void manager_setup_fleet(Manager *m) {
        char host[256] = "";
        const Config *c = &m->config;
        int r;

        if (!c->fleet_enable)
                return;
        if (!c->fleet_node_id && gethostname(host, sizeof(host) - 1) < 0)
                host[0] = '\0';
        r = fleet_member_new(&(FleetMemberParams) {
                                     .event = m->event,
                                     .node_id = c->fleet_node_id ?: host,
                                     .advertise_url = c->fleet_advertise_url,
                                     .endpoints = c->fleet_etcd,
                                     .prefix = c->fleet_etcd_prefix ?: FLEET_ETCD_PREFIX_DEFAULT,
                                     .ca_file = c->fleet_etcd_ca, .cert_file = c->fleet_etcd_cert,
                                     .key_file = c->fleet_etcd_key,
                                     .lease_ttl_usec = c->fleet_lease_ttl_usec,
                                     .describe = describe_node, .userdata = m,
                             }, &m->fleet);
        if (r < 0) {
                if (asprintf(&m->fleet_error, "%s", strerror(-r)) < 0)
                        m->fleet_error = NULL;
                log_error_errno(r, "Fleet: this node cannot join ([Fleet]): %m; it serves alone.");
                return;
        }
        fleet_member_start(m->fleet);
}

void manager_fleet_done(Manager *m) {
        fleet_member_leave(m->fleet, 2 * USEC_PER_SEC);
        m->fleet = fleet_member_free(m->fleet);
        m->fleet_error = mfree(m->fleet_error);
}

json_object *manager_fleet_health(Manager *m) {
        json_object *o;

        if (m->fleet)
                return fleet_member_health(m->fleet);
        o = json_object_new_object();
        if (!o)
                return NULL;
        json_object_object_add(o, "enabled", json_object_new_boolean(m->config.fleet_enable));
        if (m->config.fleet_enable)
                json_object_object_add(o, "error", json_object_new_string(m->fleet_error ?: "unavailable"));
        return o;
}
