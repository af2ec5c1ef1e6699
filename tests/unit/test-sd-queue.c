/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the ScienceDiscovery dialect's order of runs (src/api/sd-queue.c): one run of a
 * (session, agent) at a time, first come first served, other pairs at once; the turn passes on
 * from the loop when a run leaves; /status's entries.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-event.h>

#include <cmocka.h>

#include "api/sd-internal.h"
#include "core/manager.h"

typedef struct Run {
        const char *name;
        SdpSlot *slot;
        unsigned started;
} Run;

static char order[64];

static void on_start(void *userdata) {
        Run *r = userdata;

        r->started++;
        strncat(order, r->name, sizeof(order) - strlen(order) - 1);
}

static void run_loop(sd_event *e) {
        /* Every pending defer source, then nothing left to do. */
        for (int i = 0; i < 10; i++)
                assert_true(sd_event_run(e, 0) >= 0);
}

static int enter(Manager *m, Run *r, const char *session, const char *agent) {
        return sdp_slot_enter(m, session, agent, r->name, "python", on_start, r, &r->slot);
}

static const char *status_of(Manager *m, const char *id, const char *key) {
        json_object *a = sdp_slots_json(m), *v;
        static char buf[64];

        assert_non_null(a);
        buf[0] = '\0';
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *x = json_object_array_get_idx(a, i);

                if (json_object_object_get_ex(x, "executionId", &v) && strcmp(json_object_get_string(v), id) == 0 &&
                    json_object_object_get_ex(x, key, &v))
                        (void) snprintf(buf, sizeof(buf), "%s", json_object_get_string(v));
        }
        json_object_put(a);
        return buf;
}

static void test_order(void **state) {
        sd_event *e = NULL;
        Manager m = {};
        Run a = { "A" }, b = { "B" }, c = { "C" }, d = { "D" }, x = { "X" };

        assert_int_equal(sd_event_new(&e), 0);
        m.event = e;
        order[0] = '\0';

        assert_int_equal(enter(&m, &a, "s1", "main"), 1);      /* first of its pair: at once */
        assert_int_equal(enter(&m, &b, "s1", "main"), 0);      /* waits for A */
        assert_int_equal(enter(&m, &x, "s1", "sub"), 1);       /* another agent: at once */
        assert_int_equal(enter(&m, &c, "s1", "main"), 0);      /* waits for B */
        assert_int_equal(enter(&m, &d, "s2", "main"), 1);      /* another session: at once */

        assert_string_equal(status_of(&m, "A", "status"), "running");
        assert_string_equal(status_of(&m, "B", "status"), "queued");
        assert_string_equal(status_of(&m, "B", "startedAt"), "");
        assert_string_equal(status_of(&m, "B", "sessionId"), "s1");
        assert_string_equal(status_of(&m, "B", "agentId"), "main");
        assert_string_equal(status_of(&m, "B", "language"), "python");
        assert_string_equal(status_of(&m, "B", "kernelMode"), "ephemeral");
        assert_true(strlen(status_of(&m, "B", "queuedAt")) == 24);
        assert_true(strlen(status_of(&m, "A", "startedAt")) == 24);

        /* Runs that came at once were never called back: their caller started them. */
        run_loop(e);
        assert_string_equal(order, "");

        /* Other pairs leaving start nothing of this one. */
        x.slot = sdp_slot_leave(x.slot);
        d.slot = sdp_slot_leave(d.slot);
        run_loop(e);
        assert_string_equal(order, "");

        /* A leaves: B's turn, from the loop (not from inside the leave). */
        a.slot = sdp_slot_leave(a.slot);
        assert_string_equal(order, "");
        assert_string_equal(status_of(&m, "B", "status"), "running");
        assert_string_equal(status_of(&m, "C", "status"), "queued");
        run_loop(e);
        assert_string_equal(order, "B");

        /* C waits still; B leaves: C. */
        b.slot = sdp_slot_leave(b.slot);
        run_loop(e);
        assert_string_equal(order, "BC");
        assert_int_equal(c.started, 1);
        c.slot = sdp_slot_leave(c.slot);
        assert_null(m.sd_slots);
        assert_null(sdp_slot_leave(NULL));
        sd_event_unref(e);
}

static void test_waiting_leaves(void **state) {
        sd_event *e = NULL;
        Manager m = {};
        Run a = { "A" }, b = { "B" }, c = { "C" };

        assert_int_equal(sd_event_new(&e), 0);
        m.event = e;
        order[0] = '\0';

        assert_int_equal(enter(&m, &a, "s", "g"), 1);
        assert_int_equal(enter(&m, &b, "s", "g"), 0);
        assert_int_equal(enter(&m, &c, "s", "g"), 0);
        /* A waiting run whose client left: gone from the list, gives no turn (A still runs). */
        b.slot = sdp_slot_leave(b.slot);
        run_loop(e);
        assert_string_equal(order, "");
        assert_string_equal(status_of(&m, "B", "status"), "");
        assert_string_equal(status_of(&m, "C", "status"), "queued");
        /* A ends: C next, B never. */
        a.slot = sdp_slot_leave(a.slot);
        run_loop(e);
        assert_string_equal(order, "C");
        assert_int_equal(b.started, 0);
        /* A run whose turn came leaves before the loop started it: nothing is called back. */
        assert_int_equal(enter(&m, &a, "s", "g"), 0);
        c.slot = sdp_slot_leave(c.slot);
        a.slot = sdp_slot_leave(a.slot);
        run_loop(e);
        assert_string_equal(order, "C");
        assert_null(m.sd_slots);
        sd_event_unref(e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_order),
                cmocka_unit_test(test_waiting_leaves),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
