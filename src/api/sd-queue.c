/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's order of /execute and /execute-shell runs (notes §1,
 * "Concurrency"): runs of one (permissionEpoch.sessionId, agentId) go one after the other, first
 * come first served, while other pairs run in parallel. Every such run, waiting or running, is a
 * slot in a list the Manager holds (Manager.sd_slots); GET /status lists them as their
 * activeExecutions. May call core/ (the loop) and util/.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "api/sd-internal.h"
#include "core/manager.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

struct SdpSlot {
        Manager *m;
        SdpSlot *prev, *next;           /* Manager.sd_slots, in the order of arrival */
        char *session, *agent, *id, *language;
        uint64_t queued_ms, started_ms; /* Unix ms; started_ms 0 while it waits */
        bool running;                   /* its turn came (the run may still wait for its workspace) */
        sd_event_source *defer;         /* its turn came while it waited: start from the loop */
        SdpSlotStart start;
        void *userdata;
};

static uint64_t realtime_ms(void) {
        return now_usec(CLOCK_REALTIME) / 1000;
}

static bool same_pair(const SdpSlot *a, const SdpSlot *b) {
        return streq(a->session, b->session) && streq(a->agent, b->agent);
}

static SdpSlot *slot_free(SdpSlot *s) {
        if (!s)
                return NULL;
        s->defer = sd_event_source_disable_unref(s->defer);
        free(s->session);
        free(s->agent);
        free(s->id);
        free(s->language);
        return mfree(s);
}

int sdp_slot_enter(Manager *m, const char *session, const char *agent, const char *id, const char *language,
                   SdpSlotStart start, void *userdata, SdpSlot **ret) {
        SdpSlot *s, *last = NULL;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (SdpSlot) {
                .m = m,
                .session = strdup(session),
                .agent = strdup(agent),
                .id = strdup(id),
                .language = strdup(language),
                .queued_ms = realtime_ms(),
                .start = start,
                .userdata = userdata,
                .running = true,
        };
        if (!s->session || !s->agent || !s->id || !s->language) {
                slot_free(s);
                return -ENOMEM;
        }
        /* Its turn has come unless an earlier run of the same pair is still there (waiting or
         * running: only the first of a pair ever runs). */
        for (SdpSlot *i = m->sd_slots; i; i = i->next) {
                if (same_pair(i, s))
                        s->running = false;
                last = i;
        }
        if (s->running)
                s->started_ms = s->queued_ms;
        s->prev = last;
        if (last)
                last->next = s;
        else
                m->sd_slots = s;
        *ret = s;
        return s->running;
}

static int on_turn(sd_event_source *source, void *userdata) {
        SdpSlot *s = userdata;

        s->defer = sd_event_source_disable_unref(s->defer);
        s->start(s->userdata);          /* may leave the slot (and free it) */
        return 0;
}

SdpSlot *sdp_slot_leave(SdpSlot *s) {
        Manager *m;
        SdpSlot *next = NULL;
        int r;

        if (!s)
                return NULL;
        m = s->m;
        if (s->prev)
                s->prev->next = s->next;
        else
                m->sd_slots = s->next;
        if (s->next)
                s->next->prev = s->prev;
        /* The first waiting run of the pair is next (first come, first served). */
        if (s->running)
                for (SdpSlot *i = m->sd_slots; i; i = i->next)
                        if (same_pair(i, s)) {
                                next = i;
                                break;
                        }
        slot_free(s);
        if (!next)
                return NULL;
        next->running = true;
        next->started_ms = realtime_ms();
        /* Not from here: the caller may be in the middle of the previous run's end. */
        r = sd_event_add_defer(m->event, &next->defer, on_turn, next);
        if (r < 0) {
                log_warning_errno(r, "Failed to schedule execution '%s' from the loop, starting it now: %m", next->id);
                next->start(next->userdata);
        } else
                (void) sd_event_source_set_description(next->defer, "sd-execute-turn");
        return NULL;
}

json_object *sdp_slots_json(Manager *m) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();
        char when[32];

        if (!a)
                return NULL;
        for (SdpSlot *s = m->sd_slots; s; s = s->next) {
                json_object *x = json_object_new_object();

                if (!x)
                        return NULL;
                json_object_object_add(x, "agentId", json_object_new_string(s->agent));
                json_object_object_add(x, "executionId", json_object_new_string(s->id));
                json_object_object_add(x, "kernelMode", json_object_new_string("ephemeral"));
                json_object_object_add(x, "language", json_object_new_string(s->language));
                json_object_object_add(x, "queuedAt", json_object_new_string(sdp_iso_time(s->queued_ms, when)));
                json_object_object_add(x, "sessionId", json_object_new_string(s->session));
                if (s->running)
                        json_object_object_add(x, "startedAt", json_object_new_string(sdp_iso_time(s->started_ms, when)));
                json_object_object_add(x, "status", json_object_new_string(s->running ? "running" : "queued"));
                json_object_array_add(a, x);
        }
        return STEAL(a);
}
