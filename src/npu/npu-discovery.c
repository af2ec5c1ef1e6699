/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The discovery of the chips (npu-manager-internal.h), run in a forked child of the daemon: the
 * device nodes under the device root, the chips' state (DCMI or npu-smi: vendor code never runs
 * in the daemon itself), the 910 rule and health, and every remaining chip's probe, all at once.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/npu-host.h"
#include "npu/npu-manager-internal.h"
#include "npu/npu-probe.h"
#include "npu/npu-smi.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"

static const NpuSmiChip *state_find(const NpuSmiChips *s, unsigned id) {
        for (size_t i = 0; i < s->n; i++)
                if (s->chips[i].logic_id == id)
                        return &s->chips[i];
        return NULL;
}

/* Why the state alone rules chip @id out. Returns 1 with the reason, 0 (NULL) if it is to be probed,
 * -ENOMEM: a failed reason must not read as "to be probed". */
static int state_refusal(NpuManager *m, unsigned id, const NpuSmiChips *state, const char *state_error,
                         char **ret_reason) {
        const NpuSmiChip *s = state_find(state, id);
        char *reason;
        int k;

        if (state_error)
                k = asprintf(&reason, "the chips' state cannot be read: %s", state_error);
        else if (!s)
                k = asprintf(&reason, "%s does not list chip %u", m->dcmi_library ? "DCMI" : "npu-smi", id);
        else if (!npu_chip_name_is_910(s->name))
                k = asprintf(&reason, "chip %u is an %s, not of the Ascend 910 series", id, s->name ?: "unknown chip");
        else if (s->health && !streq(s->health, "OK") && !streq(s->health, "Warning"))
                k = asprintf(&reason, "chip %u reports health '%s'", id, s->health);
        else {
                *ret_reason = NULL;
                return 0;
        }
        if (k < 0)
                return -ENOMEM;
        *ret_reason = reason;
        return 1;
}

/* One chip found under the device root: what the state says, and why it is not selectable. */
static json_object *discover_chip(unsigned id, const NpuSmiChips *state, char *reason) {
        const NpuSmiChip *s = state_find(state, id);
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_int64(id));
        if (s && s->name)
                json_object_object_add(o, "name", json_object_new_string(s->name));
        if (s && s->health)
                json_object_object_add(o, "health", json_object_new_string(s->health));
        json_object_object_add(o, "selectable", json_object_new_boolean(!reason));
        if (reason) {
                reason[MIN(strlen(reason), (size_t) NPU_REASON_MAX)] = '\0';
                json_object_object_add(o, "reason", json_object_new_string(reason));
        }
        return o;
}

void npu_reasons_free(char **l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                free(l[i]);
        free(l);
}

/* Every chip: refused by its state, or probed (all probes at once). */
static int discover_chips(NpuManager *m, const NpuHostNodes *nodes, const NpuSmiChips *state, const char *state_error,
                          json_object *chips) {
        _cleanup_free_ unsigned *probe_ids = NULL;
        _cleanup_free_ size_t *probe_of = NULL;
        char **reasons = NULL, **probe_reasons = NULL;
        SandboxNpu base = npu_base(m);
        size_t n_probe = 0;
        int r = 0;

        reasons = calloc(nodes->n_chips + 1, sizeof(char *));
        probe_ids = calloc(nodes->n_chips + 1, sizeof(unsigned));
        probe_of = calloc(nodes->n_chips + 1, sizeof(size_t));
        if (!reasons || !probe_ids || !probe_of) {
                free(reasons);
                return -ENOMEM;
        }
        for (size_t i = 0; i < nodes->n_chips; i++) {
                r = state_refusal(m, nodes->chips[i], state, state_error, &reasons[i]);
                if (r < 0) {
                        npu_reasons_free(reasons, nodes->n_chips);
                        return r;
                }
                if (r == 0) {
                        probe_of[n_probe] = i;
                        probe_ids[n_probe++] = nodes->chips[i];
                }
        }
        r = npu_probe_chips(m->bwrap, m->probe, &base, probe_ids, n_probe, m->scratch_dir, m->probe_timeout_usec,
                            &probe_reasons);
        for (size_t k = 0; r >= 0 && k < n_probe; k++)
                reasons[probe_of[k]] = STEAL(probe_reasons[k]);
        for (size_t i = 0; r >= 0 && i < nodes->n_chips; i++) {
                json_object *c = discover_chip(nodes->chips[i], state, reasons[i]);
                if (!c)
                        r = -ENOMEM;
                else
                        json_object_array_add(chips, c);
        }
        npu_reasons_free(probe_reasons, n_probe);
        npu_reasons_free(reasons, nodes->n_chips);
        return r;
}

int npu_discover(int out_fd, void *userdata) {
        NpuManager *m = userdata;
        _cleanup_(json_object_putp) json_object *root = json_object_new_object(), *chips = json_object_new_array(),
                                                *mgmt = json_object_new_array();
        _cleanup_free_ char *state_error = NULL, *scan_error = NULL;
        NpuHostNodes nodes = {};
        NpuSmiChips state = {};
        const char *source = NULL, *text;
        int r;

        if (!root || !chips || !mgmt)
                return -ENOMEM;
        r = npu_host_scan_nodes(m->device_root, &nodes, &scan_error);
        if (r < 0) {
                json_object_object_add(root, "error", json_object_new_string(scan_error ?: strerror(-r)));
                goto out;
        }
        for (char **n = nodes.mgmt; n && *n; n++)
                json_object_array_add(mgmt, json_object_new_string(*n));
        if (nodes.n_chips > 0) {
                r = npu_host_read_state(m->smi, m->driver_dir, m->dcmi_library, m->probe_timeout_usec, &state,
                                        &source, &state_error);
                if (r < 0 && !state_error)
                        state_error = strdup(strerror(-r));
                if (source)
                        json_object_object_add(root, "source", json_object_new_string(source));
        }
        /* The management nodes are part of every probe's (and launch's) shape. */
        strv_free(m->mgmt);
        m->mgmt = STEAL(nodes.mgmt);
        r = discover_chips(m, &nodes, &state, state_error, chips);
        if (r < 0)
                return r;
out:
        json_object_object_add(root, "chips", json_object_get(chips));
        json_object_object_add(root, "mgmt", json_object_get(mgmt));
        npu_host_nodes_done(&nodes);
        npu_smi_chips_done(&state);
        text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
        return loop_write(out_fd, text, strlen(text));
}
