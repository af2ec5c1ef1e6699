/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The node's record in etcd (membership.h). The states:
 *   connecting   no lease yet: grant one, then put the record under it;
 *   registered   the record is there: every third of the TTL a keepalive, then the record put
 *                again (its capacity is current, one write per third of the TTL, none per run);
 *   unavailable  etcd could not be reached or refused: the same steps again after a back-off
 *                (1 s, doubling, at most a third of the TTL); a lease that expired meanwhile
 *                (keepalive: -ENOENT) is granted anew.
 * A revoke at a clean stop ends the record at once; a node that dies loses it with its lease.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build-config.h"
#include "fleet/etcd.h"
#include "fleet/membership.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"

typedef enum MemberState {
        MEMBER_CONNECTING,
        MEMBER_REGISTERED,
        MEMBER_UNAVAILABLE,
} MemberState;

static const char *const state_names[] = {
        [MEMBER_CONNECTING] = "connecting",
        [MEMBER_REGISTERED] = "registered",
        [MEMBER_UNAVAILABLE] = "unavailable",
};

struct FleetMember {
        sd_event *event;
        EtcdClient *etcd;
        char **endpoints, *prefix, *ca_file, *cert_file, *key_file;   /* for the client of the leave */
        char *node_id, *advertise_url, *key;
        uint64_t ttl_usec;
        void (*describe)(json_object *record, void *userdata);
        void *userdata;

        MemberState state;
        int64_t lease_id;
        EtcdCall *call;                  /* at most one in flight */
        sd_event_source *timer;
        uint64_t backoff_usec;
        uint64_t started_usec;           /* CLOCK_REALTIME, for the record */
        unsigned registrations;          /* puts of the record that succeeded */
        char *last_error;
        uint64_t last_error_usec;        /* CLOCK_REALTIME */
        bool leaving, left;
};

static void member_step(FleetMember *m);

static void member_arm(FleetMember *m, uint64_t after_usec) {
        if (sd_event_source_set_time_relative(m->timer, after_usec) >= 0)
                (void) sd_event_source_set_enabled(m->timer, SD_EVENT_ONESHOT);
}

static uint64_t member_period(const FleetMember *m) {
        return MAX(m->ttl_usec / 3, USEC_PER_SEC / 2);
}

static void member_failed(FleetMember *m, int error, const EtcdResult *r, const char *what) {
        char *msg = NULL;

        if (asprintf(&msg, "%s: %s", what, r && r->message ? r->message : strerror(-error)) < 0)
                msg = NULL;
        if (m->state != MEMBER_UNAVAILABLE || !m->last_error || !msg || !streq(msg, m->last_error))
                log_warning("Fleet: %s; node '%s' retries in %" PRIu64 " ms.", msg ?: what, m->node_id,
                            m->backoff_usec / USEC_PER_MSEC);
        free(m->last_error);
        m->last_error = msg;
        m->last_error_usec = now_usec(CLOCK_REALTIME);
        m->state = MEMBER_UNAVAILABLE;
        member_arm(m, m->backoff_usec);
        m->backoff_usec = MIN(m->backoff_usec * 2, member_period(m));
}

static char *member_record(FleetMember *m) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "node", json_object_new_string(m->node_id));
        json_object_object_add(o, "url", json_object_new_string(m->advertise_url));
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "startedAt", json_new_u64(m->started_usec / USEC_PER_SEC));
        json_object_object_add(o, "updatedAt", json_new_u64(now_usec(CLOCK_REALTIME) / USEC_PER_SEC));
        if (m->describe)
                m->describe(o, m->userdata);
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        return s ? strdup(s) : NULL;
}

static void on_put(int error, const EtcdResult *r, void *userdata) {
        FleetMember *m = userdata;

        m->call = NULL;
        if (error == -ENOENT) {         /* the lease went meanwhile: a new one */
                m->lease_id = 0;
                member_failed(m, error, r, "its lease expired");
                return;
        }
        if (error < 0) {
                member_failed(m, error, r, "etcd refused or could not take the node's record");
                return;
        }
        if (m->state != MEMBER_REGISTERED)
                log_info("Fleet: node '%s' registered at %s (lease %" PRIi64 ", TTL %" PRIu64 " s).", m->node_id,
                         r->endpoint ?: "etcd", m->lease_id, m->ttl_usec / USEC_PER_SEC);
        m->state = MEMBER_REGISTERED;
        m->registrations++;
        m->backoff_usec = USEC_PER_SEC;
        member_arm(m, member_period(m));
}

static void member_put(FleetMember *m) {
        _cleanup_free_ char *record = member_record(m);
        int r;

        if (!record) {
                member_failed(m, -ENOMEM, NULL, "the node's record");
                return;
        }
        r = etcd_put(m->etcd, m->key, record, m->lease_id, on_put, m, &m->call);
        if (r < 0)
                member_failed(m, r, NULL, "the node's record could not be sent");
}

static void on_grant(int error, const EtcdResult *r, void *userdata) {
        FleetMember *m = userdata;

        m->call = NULL;
        if (error < 0) {
                member_failed(m, error, r, "no lease from etcd");
                return;
        }
        m->lease_id = r->lease_id;
        member_put(m);
}

static void on_keepalive(int error, const EtcdResult *r, void *userdata) {
        FleetMember *m = userdata;

        m->call = NULL;
        if (error == -ENOENT) {
                m->lease_id = 0;
                member_failed(m, error, r, "its lease expired");
                return;
        }
        if (error < 0) {
                member_failed(m, error, r, "the lease could not be renewed");
                return;
        }
        member_put(m);   /* the record again: its capacity as it is now */
}

static void member_step(FleetMember *m) {
        int r;

        if (m->call || m->leaving)
                return;
        if (m->lease_id == 0)
                r = etcd_lease_grant(m->etcd, (int64_t) (m->ttl_usec / USEC_PER_SEC), on_grant, m, &m->call);
        else
                r = etcd_lease_keepalive(m->etcd, m->lease_id, on_keepalive, m, &m->call);
        if (r < 0)
                member_failed(m, r, NULL, "etcd could not be asked");
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        member_step(userdata);
        return 0;
}

static int strdup_or_null(const char *s, char **ret) {
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

static int member_client(FleetMember *m, sd_event *event, uint64_t timeout_usec, EtcdClient **ret) {
        return etcd_client_new(event, &(EtcdClientConfig) {
                                       .endpoints = m->endpoints, .prefix = m->prefix, .ca_file = m->ca_file,
                                       .cert_file = m->cert_file, .key_file = m->key_file,
                                       .timeout_usec = timeout_usec,
                               }, ret);
}

int fleet_member_new(const FleetMemberParams *p, FleetMember **ret) {
        _cleanup_(fleet_member_freep) FleetMember *m = NULL;
        int r;

        if (isempty(p->node_id) || isempty(p->advertise_url) || !p->endpoints || !p->endpoints[0] ||
            p->lease_ttl_usec < 2 * USEC_PER_SEC)
                return -EINVAL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(p->event);
        m->ttl_usec = p->lease_ttl_usec;
        m->describe = p->describe;
        m->userdata = p->userdata;
        m->backoff_usec = USEC_PER_SEC;
        m->node_id = strdup(p->node_id);
        m->advertise_url = strdup(p->advertise_url);
        if (!m->node_id || !m->advertise_url || asprintf(&m->key, "nodes/%s", p->node_id) < 0) {
                m->key = NULL;
                return -ENOMEM;
        }
        for (char *const *e = p->endpoints; *e; e++)
                if (strv_extend(&m->endpoints, *e) < 0)
                        return -ENOMEM;
        if (strdup_or_null(p->prefix, &m->prefix) < 0 || strdup_or_null(p->ca_file, &m->ca_file) < 0 ||
            strdup_or_null(p->cert_file, &m->cert_file) < 0 || strdup_or_null(p->key_file, &m->key_file) < 0)
                return -ENOMEM;
        r = member_client(m, p->event, MIN(member_period(m), 5 * USEC_PER_SEC), &m->etcd);
        if (r < 0)
                return r;
        r = sd_event_add_time(p->event, &m->timer, CLOCK_MONOTONIC, 0, 10 * USEC_PER_MSEC, on_timer, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(m->timer, "fleet-membership");
        *ret = STEAL(m);
        return 0;
}

void fleet_member_start(FleetMember *m) {
        if (!m)
                return;
        m->started_usec = now_usec(CLOCK_REALTIME);
        member_step(m);
}

static void on_revoke(int error, const EtcdResult *r, void *userdata) {
        FleetMember *m = userdata;

        m->left = true;
        if (error < 0 && error != -ENOENT)
                log_warning("Fleet: node '%s' could not leave (%s); its record goes with its lease.", m->node_id,
                            r && r->message ? r->message : strerror(-error));
        else
                log_info("Fleet: node '%s' left the fleet.", m->node_id);
}

/* On a loop of its own: the daemon's has ended by then. */
void fleet_member_leave(FleetMember *m, uint64_t timeout_usec) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(etcd_client_freep) EtcdClient *c = NULL;
        uint64_t deadline;

        if (!m || m->leaving)
                return;
        m->leaving = true;
        (void) sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
        m->call = etcd_call_cancel(m->call);
        if (m->lease_id == 0 || sd_event_new(&e) < 0 || member_client(m, e, timeout_usec, &c) < 0 ||
            etcd_lease_revoke(c, m->lease_id, on_revoke, m, NULL) < 0)
                return;
        deadline = now_usec(CLOCK_MONOTONIC) + timeout_usec;
        while (!m->left && now_usec(CLOCK_MONOTONIC) < deadline)
                if (sd_event_run(e, deadline - now_usec(CLOCK_MONOTONIC)) < 0)
                        break;
}

FleetMember *fleet_member_free(FleetMember *m) {
        if (!m)
                return NULL;
        m->call = etcd_call_cancel(m->call);
        m->timer = sd_event_source_disable_unref(m->timer);
        m->etcd = etcd_client_free(m->etcd);
        sd_event_unref(m->event);
        strv_free(m->endpoints);
        free(m->prefix);
        free(m->ca_file);
        free(m->cert_file);
        free(m->key_file);
        free(m->node_id);
        free(m->advertise_url);
        free(m->key);
        free(m->last_error);
        free(m);
        return NULL;
}

bool fleet_member_registered(FleetMember *m) {
        return m && m->state == MEMBER_REGISTERED;
}

json_object *fleet_member_health(FleetMember *m) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "enabled", json_object_new_boolean(true));
        json_object_object_add(o, "node", json_object_new_string(m->node_id));
        json_object_object_add(o, "url", json_object_new_string(m->advertise_url));
        json_object_object_add(o, "state", json_object_new_string(state_names[m->state]));
        json_object_object_add(o, "lease", m->lease_id > 0 ? json_object_new_int64(m->lease_id) : NULL);
        json_object_object_add(o, "ttlSec", json_new_u64(m->ttl_usec / USEC_PER_SEC));
        json_object_object_add(o, "registrations", json_new_u64(m->registrations));
        json_object_object_add(o, "lastError", m->last_error ? json_object_new_string(m->last_error) : NULL);
        json_object_object_add(o, "lastErrorAt",
                               m->last_error ? json_new_u64(m->last_error_usec / USEC_PER_SEC) : NULL);
        return o;
}
