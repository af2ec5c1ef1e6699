/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The chips, their discovery and probes, and the claims of executions (npu-manager.h). The
 * discovery and every re-probe run in a forked child (util/child-task.h) that answers in JSON:
 * the daemon's loop never waits for npu-smi, and the DCMI library is only ever loaded there.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npu/cdi.h"
#include "npu/npu-host.h"
#include "npu/npu-manager-internal.h"
#include "npu/npu-manager.h"
#include "npu/npu-probe.h"
#include "npu/npu-smi.h"
#include "util/child-task.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"


static const char *const phase_names[] = {
        [NPU_PHASE_IDLE] = "starting",
        [NPU_PHASE_PROBING] = "probing",
        [NPU_PHASE_READY] = "ready",
        [NPU_PHASE_FAILED] = "failed",
};

static int free_and_strdup(char **p, const char *s) {
        char *t = s ? strdup(s) : NULL;

        if (s && !t)
                return -ENOMEM;
        free(*p);
        *p = t;
        return 0;
}

static char *reason_trim(const char *s) {
        return s ? strndup(s, NPU_REASON_MAX) : NULL;
}

static NpuChip *chip_find(NpuManager *m, unsigned id) {
        for (size_t i = 0; i < m->n_chips; i++)
                if (m->chips[i].id == id)
                        return &m->chips[i];
        return NULL;
}

static void chips_free(NpuManager *m) {
        for (size_t i = 0; i < m->n_chips; i++) {
                free(m->chips[i].name);
                free(m->chips[i].health);
                free(m->chips[i].reason);
                free(m->chips[i].last_failure);
        }
        m->chips = mfree(m->chips);
        m->n_chips = 0;
}


static bool dir_exists(const char *p) {
        struct stat st;

        return p && stat(p, &st) >= 0 && S_ISDIR(st.st_mode);
}

int npu_manager_new(const NpuManagerParams *p, NpuManager **ret, char **ret_error) {
        _cleanup_(npu_manager_freep) NpuManager *m = NULL;
        const Config *c = p->config;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(p->event);
        m->probe = p->probe;
        m->probe_timeout_usec = c->npu_probe_timeout_usec;
        m->bwrap = strdup(p->bwrap);
        m->device_root = strdup(c->npu_device_root ?: "/dev");
        m->driver_dir = strdup(c->npu_driver_dir ?: "/usr/local/Ascend/driver");
        if (asprintf(&m->scratch_dir, "%s/npu", p->state_dir) < 0)
                m->scratch_dir = NULL;
        if (!m->bwrap || !m->device_root || !m->driver_dir || !m->scratch_dir)
                return -ENOMEM;
        /* The toolkit is optional: a host with the driver only runs npu-smi and the runtime. */
        if (dir_exists(c->npu_toolkit_dir) && !(m->toolkit_dir = strdup(c->npu_toolkit_dir)))
                return -ENOMEM;
        if (c->npu_smi && !(m->smi = strdup(c->npu_smi)))
                return -ENOMEM;
        if (c->npu_dcmi_library && !(m->dcmi_library = strdup(c->npu_dcmi_library)))
                return -ENOMEM;
        if (access("/etc/ascend_install.info", R_OK) >= 0 && !(m->install_info = strdup("/etc/ascend_install.info")))
                return -ENOMEM;
        for (char **d = c->npu_cdi_dirs; d && *d; d++)
                if (strv_extend(&m->cdi_dirs, *d) < 0)
                        return -ENOMEM;
        if (mkdir(m->scratch_dir, 0700) < 0 && errno != EEXIST)
                return set_message(ret_error, negative_errno(), "cannot create the probes' scratch directory %s: %m",
                                   m->scratch_dir);
        *ret = STEAL(m);
        return 0;
}

/* ---- discovery (in the child) ---- */


static int chip_from_json(NpuChip *c, json_object *o) {
        json_object *v;
        int64_t id;

        if (!json_object_object_get_ex(o, "id", &v) || (id = json_object_get_int64(v)) < 0 || id > UINT32_MAX)
                return -EBADMSG;
        c->id = (unsigned) id;
        if (json_object_object_get_ex(o, "name", &v) && !(c->name = strdup(json_object_get_string(v))))
                return -ENOMEM;
        if (json_object_object_get_ex(o, "health", &v) && !(c->health = strdup(json_object_get_string(v))))
                return -ENOMEM;
        c->selectable = json_object_object_get_ex(o, "selectable", &v) && json_object_get_boolean(v);
        if (json_object_object_get_ex(o, "reason", &v) && !(c->reason = reason_trim(json_object_get_string(v))))
                return -ENOMEM;
        return 0;
}

static int discovery_apply(NpuManager *m, const char *out) {
        _cleanup_(json_object_putp) json_object *root = json_tokener_parse(out);
        json_object *chips, *mgmt, *v;
        size_t n;
        int r;

        if (!root || !json_object_object_get_ex(root, "chips", &chips) || !json_object_is_type(chips, json_type_array) ||
            !json_object_object_get_ex(root, "mgmt", &mgmt) || !json_object_is_type(mgmt, json_type_array))
                return -EBADMSG;
        if (json_object_object_get_ex(root, "error", &v))
                return free_and_strdup(&m->error, json_object_get_string(v)) < 0 ? -ENOMEM : -EIO;
        if (json_object_object_get_ex(root, "source", &v) && free_and_strdup(&m->source, json_object_get_string(v)) < 0)
                return -ENOMEM;
        m->mgmt = strv_free(m->mgmt);
        for (size_t i = 0; i < json_object_array_length(mgmt); i++)
                if (strv_extend(&m->mgmt, json_object_get_string(json_object_array_get_idx(mgmt, i))) < 0)
                        return -ENOMEM;
        n = json_object_array_length(chips);
        chips_free(m);
        m->chips = calloc(MAX(n, (size_t) 1), sizeof(NpuChip));
        if (!m->chips)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = chip_from_json(&m->chips[m->n_chips++], json_object_array_get_idx(chips, i));
                if (r < 0)
                        return r;
        }
        return 0;
}

static void discovery_log(NpuManager *m) {
        unsigned selectable = 0;

        for (size_t i = 0; i < m->n_chips; i++) {
                if (m->chips[i].selectable)
                        selectable++;
                else
                        log_notice("NPU chip %u (%s) is not selectable: %s", m->chips[i].id,
                                   m->chips[i].name ?: "unnamed", m->chips[i].reason ?: "no reason given");
        }
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_NPU_PROBED,
                   "SANDBOX_NPU_CHIPS=%zu", m->n_chips,
                   "SANDBOX_NPU_SELECTABLE=%u", selectable,
                   "SANDBOX_NPU_SOURCE=%s", m->source ?: "none",
                   "MESSAGE=NPU: %zu chip%s under %s, %u selectable (state from %s; %zu management node%s).",
                   m->n_chips, m->n_chips == 1 ? "" : "s", m->device_root, selectable, m->source ?: "nothing",
                   strv_length(m->mgmt), strv_length(m->mgmt) == 1 ? "" : "s");
}

static void on_discovered(ChildTask *t, int error, const char *out, void *userdata) {
        NpuManager *m = userdata;
        int r = error;

        m->discovery = child_task_free(m->discovery);
        if (r >= 0)
                r = discovery_apply(m, out);
        if (r < 0) {
                m->phase = NPU_PHASE_FAILED;
                if (!m->error && asprintf(&m->error, "the discovery failed: %s", strerror(-r)) < 0)
                        m->error = NULL;   /* contents undefined on failure */
                log_error("NPU chips cannot be used: %s", m->error ?: "out of memory");
                return;
        }
        m->phase = NPU_PHASE_READY;
        discovery_log(m);
}

void npu_manager_start(NpuManager *m) {
        int r;

        if (!m || m->phase != NPU_PHASE_IDLE)
                return;
        m->phase = NPU_PHASE_PROBING;
        r = child_task_start(m->event, npu_discover, on_discovered, m, &m->discovery);
        if (r < 0) {
                m->phase = NPU_PHASE_FAILED;
                if (asprintf(&m->error, "cannot start the discovery: %s", strerror(-r)) < 0)
                        m->error = NULL;   /* contents undefined on failure */
                log_error("NPU chips cannot be used: %s", m->error ?: "out of memory");
        }
}

NpuManager *npu_manager_free(NpuManager *m) {
        if (!m)
                return NULL;
        m->discovery = child_task_free(m->discovery);
        /* Claims outlive nothing: their executions release them first; unlink any left. */
        while (m->claims) {
                NpuClaim *c = m->claims;
                m->claims = c->next;
                c->manager = NULL;
                c->next = c->prev = NULL;
        }
        chips_free(m);
        strv_free(m->mgmt);
        strv_free(m->cdi_dirs);
        free(m->error);
        free(m->source);
        free(m->bwrap);
        free(m->scratch_dir);
        free(m->device_root);
        free(m->driver_dir);
        free(m->toolkit_dir);
        free(m->smi);
        free(m->dcmi_library);
        free(m->install_info);
        sd_event_unref(m->event);
        return mfree(m);
}

/* ---- the API's view ---- */

static json_object *chip_json(const NpuChip *c) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_int64(c->id));
        json_object_object_add(o, "name", c->name ? json_object_new_string(c->name) : NULL);
        json_object_object_add(o, "health", json_object_new_string(c->health ?: "UNKNOWN"));
        json_object_object_add(o, "selectable", json_object_new_boolean(c->selectable));
        if (c->reason)
                json_object_object_add(o, "reason", json_object_new_string(c->reason));
        if (c->held_by)
                json_object_object_add(o, "heldBy", json_object_new_string(c->held_by->holder));
        if (c->last_failure)
                json_object_object_add(o, "lastProbeFailure", json_object_new_string(c->last_failure));
        return o;
}

/* The CDI devices usable now, and the specs and devices refused with their reasons. */
static int cdi_json(NpuManager *m, json_object *root) {
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = NULL;
        _cleanup_strv_free_ char **names = NULL;
        json_object *devices = json_object_new_array(), *refused = json_object_new_array();
        const char *const *what = NULL, *const *why = NULL;
        size_t n;
        int r;

        json_object_object_add(root, "cdiDevices", devices);
        json_object_object_add(root, "cdiRefused", refused);
        if (!devices || !refused)
                return -ENOMEM;
        r = cdi_registry_load(m->cdi_dirs, &reg);
        if (r < 0)
                return r;
        names = cdi_registry_devices(reg);
        for (char **d = names; d && *d; d++)
                json_object_array_add(devices, json_object_new_string(*d));
        n = cdi_registry_refusals(reg, &what, &why);
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_new_object();
                if (!o)
                        return -ENOMEM;
                json_object_object_add(o, "what", json_object_new_string(what[i]));
                json_object_object_add(o, "reason", json_object_new_string(why[i]));
                json_object_array_add(refused, o);
        }
        return 0;
}

json_object *npu_manager_chips_json(NpuManager *m) {
        _cleanup_(json_object_putp) json_object *root = json_object_new_object();
        json_object *chips = json_object_new_array(), *mgmt = json_object_new_array();

        if (!root || !chips || !mgmt) {
                json_object_put(chips);
                json_object_put(mgmt);
                return NULL;
        }
        json_object_object_add(root, "chips", chips);
        json_object_object_add(root, "managementNodes", mgmt);
        for (size_t i = 0; i < m->n_chips; i++)
                json_object_array_add(chips, chip_json(&m->chips[i]));
        for (char **n = m->mgmt; n && *n; n++)
                json_object_array_add(mgmt, json_object_new_string(*n));
        json_object_object_add(root, "phase", json_object_new_string(phase_names[m->phase]));
        if (m->source)
                json_object_object_add(root, "source", json_object_new_string(m->source));
        if (m->error)
                json_object_object_add(root, "error", json_object_new_string(m->error));
        json_object_object_add(root, "deviceRoot", json_object_new_string(m->device_root));
        if (cdi_json(m, root) < 0)
                return NULL;
        return STEAL(root);
}

json_object *npu_manager_health_json(NpuManager *m) {
        json_object *o = json_object_new_object();
        unsigned selectable = 0, held = 0;

        if (!o)
                return NULL;
        for (size_t i = 0; i < m->n_chips; i++) {
                selectable += m->chips[i].selectable;
                held += !!m->chips[i].held_by;
        }
        json_object_object_add(o, "enabled", json_object_new_boolean(true));
        json_object_object_add(o, "phase", json_object_new_string(phase_names[m->phase]));
        json_object_object_add(o, "chips", json_object_new_int64((int64_t) m->n_chips));
        json_object_object_add(o, "selectable", json_object_new_int64(selectable));
        json_object_object_add(o, "held", json_object_new_int64(held));
        if (m->source)
                json_object_object_add(o, "source", json_object_new_string(m->source));
        if (m->error)
                json_object_object_add(o, "error", json_object_new_string(m->error));
        return o;
}

/* ---- claims ---- */

static int cmp_unsigned(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;

        return x < y ? -1 : x > y;
}

/* Every chip exists, is selectable and free. */
static int claim_check_chips(NpuManager *m, const unsigned *chips, size_t n, char **ret_why) {
        if (n == 0)
                return 0;
        if (m->phase == NPU_PHASE_IDLE || m->phase == NPU_PHASE_PROBING)
                return set_message(ret_why, -EINVAL, "the chips are still being probed; retry in a moment");
        if (m->phase == NPU_PHASE_FAILED)
                return set_message(ret_why, -EINVAL, "no chip can be used: %s", m->error ?: "the discovery failed");
        for (size_t i = 0; i < n; i++) {
                NpuChip *c = chip_find(m, chips[i]);

                if (!c)
                        return set_message(ret_why, -EINVAL, "chip %u does not exist (no %s/davinci%u, or it is not "
                                         "a character device)", chips[i], m->device_root, chips[i]);
                if (!c->selectable)
                        return set_message(ret_why, -EINVAL, "chip %u is not selectable: %s", c->id,
                                         c->reason ?: "its probe failed");
                if (c->held_by)
                        return set_message(ret_why, -EBUSY, "chip %u is held by execution '%s'", c->id,
                                         c->held_by->holder);
        }
        return 0;
}

/* The CDI edits of @devices, in the sandbox spec's types. */
static int claim_resolve_devices(NpuClaim *c, char *const *devices, char **ret_why) {
        _cleanup_(cdi_registry_freep) CdiRegistry *reg = NULL;
        int r;

        if (strv_length((char **) devices) == 0)
                return 0;
        r = cdi_registry_load(c->manager->cdi_dirs, &reg);
        if (r < 0)
                return set_message(ret_why, -EINVAL, "the CDI specs cannot be read: %s", strerror(-r));
        r = cdi_registry_resolve(reg, devices, &c->edits, ret_why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return -EINVAL;
        /* The nodes are bound writable: each must be a device on this host (a spec naming a
         * directory such as /dev/shm would hand the sandbox a writable host directory). */
        for (size_t i = 0; i < c->edits.n_nodes; i++) {
                struct stat st;

                if (stat(c->edits.nodes[i].host_path, &st) < 0)
                        return set_message(ret_why, -EINVAL, "the device node %s of a CDI device is missing: %m",
                                         c->edits.nodes[i].host_path);
                if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
                        return set_message(ret_why, -EINVAL, "%s, named as a device node by a CDI spec, is not a device",
                                         c->edits.nodes[i].host_path);
        }
        c->nodes = calloc(MAX(c->edits.n_nodes, (size_t) 1), sizeof(SandboxDevice));
        c->binds = calloc(MAX(c->edits.n_mounts, (size_t) 1), sizeof(SandboxBind));
        if (!c->nodes || !c->binds)
                return -ENOMEM;
        for (size_t i = 0; i < c->edits.n_nodes; i++)
                c->nodes[i] = (SandboxDevice) { .source = c->edits.nodes[i].host_path, .dest = c->edits.nodes[i].path };
        for (size_t i = 0; i < c->edits.n_mounts; i++)
                c->binds[i] = (SandboxBind) { .source = c->edits.mounts[i].host_path,
                                              .dest = c->edits.mounts[i].container_path };
        return 0;
}

/* In the child: the claim's chips, each in its probe sandbox; the failures as JSON. */
static int reprobe(int out_fd, void *userdata) {
        NpuClaim *c = userdata;
        NpuManager *m = c->manager;
        _cleanup_(json_object_putp) json_object *failures = json_object_new_array();
        char **reasons = NULL;
        SandboxNpu base = npu_base(m);
        const char *text;
        int r;

        if (!failures)
                return -ENOMEM;
        r = npu_probe_chips(m->bwrap, m->probe, &base, c->chips, c->n_chips, m->scratch_dir, m->probe_timeout_usec,
                            &reasons);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_chips; i++) {
                json_object *o;

                if (!reasons[i])
                        continue;
                o = json_object_new_object();
                if (!o) {
                        npu_reasons_free(reasons, c->n_chips);
                        return -ENOMEM;
                }
                json_object_object_add(o, "id", json_object_new_int64(c->chips[i]));
                json_object_object_add(o, "reason", json_object_new_string(reasons[i]));
                json_object_array_add(failures, o);
        }
        npu_reasons_free(reasons, c->n_chips);
        text = json_object_to_json_string_ext(failures, JSON_C_TO_STRING_PLAIN);
        return loop_write(out_fd, text, strlen(text));
}

static void claim_unhold(NpuClaim *c) {
        if (!c->manager)
                return;
        for (size_t i = 0; i < c->n_chips; i++) {
                NpuChip *chip = chip_find(c->manager, c->chips[i]);
                if (chip && chip->held_by == c)
                        chip->held_by = NULL;
        }
}

/* The re-probe's answer: the first chip that failed is named; all chips are let go then. */
static void on_reprobed(ChildTask *t, int error, const char *out, void *userdata) {
        NpuClaim *c = userdata;
        _cleanup_(json_object_putp) json_object *failures = NULL;
        _cleanup_free_ char *why = NULL;
        int r = 0;

        c->task = child_task_free(c->task);
        if (error < 0) {
                r = error;
                if (asprintf(&why, "the chips' re-probe could not run: %s", strerror(-error)) < 0)
                        why = NULL;   /* contents undefined on failure: "out of memory" below */
        } else if (!(failures = json_tokener_parse(out)) || !json_object_is_type(failures, json_type_array)) {
                r = -EBADMSG;
                why = strdup("the chips' re-probe gave no answer");
        }
        for (size_t i = 0; r == 0 && i < c->n_chips; i++) {
                NpuChip *chip = c->manager ? chip_find(c->manager, c->chips[i]) : NULL;
                if (chip)
                        chip->last_failure = mfree(chip->last_failure);
        }
        for (size_t i = 0; failures && i < json_object_array_length(failures); i++) {
                json_object *f = json_object_array_get_idx(failures, i), *id, *reason;
                NpuChip *chip;

                if (!json_object_object_get_ex(f, "id", &id) || !json_object_object_get_ex(f, "reason", &reason))
                        continue;
                chip = c->manager ? chip_find(c->manager, (unsigned) json_object_get_int64(id)) : NULL;
                if (chip)
                        (void) free_and_strdup(&chip->last_failure, json_object_get_string(reason));
                if (r == 0) {
                        r = -EBUSY;
                        if (asprintf(&why, "chip %" PRIi64 " is not available: %s", json_object_get_int64(id),
                                     json_object_get_string(reason)) < 0)
                                why = NULL;   /* contents undefined on failure: "out of memory" below */
                }
        }
        if (r < 0) {
                log_struct(LOG_NOTICE,
                           "MESSAGE_ID=" SR_MESSAGE_NPU_CHIP_UNAVAILABLE,
                           "SANDBOX_EXECUTION_ID=%s", c->holder,
                           "SANDBOX_REASON=%s", why ?: "out of memory",
                           "MESSAGE=Execution '%s' cannot have its chips: %s", c->holder, why ?: "out of memory");
                claim_unhold(c);
        }
        c->done(c, r, why, c->userdata);
}

static int on_defer(sd_event_source *s, void *userdata) {
        NpuClaim *c = userdata;

        c->defer = sd_event_source_disable_unref(c->defer);
        c->done(c, 0, NULL, c->userdata);
        return 0;
}

int npu_manager_claim(NpuManager *m, const unsigned *chips, size_t n_chips, char *const *devices,
                      const char *holder, NpuClaimDoneFn done, void *userdata, NpuClaim **ret, char **ret_why) {
        _cleanup_(npu_claim_freep) NpuClaim *c = NULL;
        int r;

        *ret_why = NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->holder = strdup(holder);
        c->chips = calloc(MAX(n_chips, (size_t) 1), sizeof(unsigned));
        if (!c->holder || !c->chips)
                return -ENOMEM;
        if (n_chips > 0)
                memcpy(c->chips, chips, n_chips * sizeof(unsigned));
        qsort(c->chips, n_chips, sizeof(unsigned), cmp_unsigned);
        for (size_t i = 1; i < n_chips; i++)
                if (c->chips[i] == c->chips[i - 1])
                        return set_message(ret_why, -EINVAL, "chip %u is named twice", c->chips[i]);
        c->n_chips = n_chips;
        r = claim_check_chips(m, c->chips, n_chips, ret_why);
        if (r < 0)
                return r;
        c->manager = m;
        r = claim_resolve_devices(c, devices, ret_why);
        if (r < 0)
                return r;
        c->done = done;
        c->userdata = userdata;
        if (n_chips > 0) {
                c->npu = npu_base(m);
                c->npu.chips = c->chips;
                c->npu.n_chips = n_chips;
                r = child_task_start(m->event, reprobe, on_reprobed, c, &c->task);
        } else
                r = sd_event_add_defer(m->event, &c->defer, on_defer, c);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_chips; i++)
                chip_find(m, c->chips[i])->held_by = c;
        c->next = m->claims;
        if (m->claims)
                m->claims->prev = c;
        m->claims = c;
        *ret = STEAL(c);
        return 0;
}

int npu_manager_pick(NpuManager *m, unsigned n, unsigned *ret, char **ret_why) {
        unsigned found = 0, selectable = 0;

        *ret_why = NULL;
        if (m->phase != NPU_PHASE_READY)
                return set_message(ret_why, -EINVAL, m->phase == NPU_PHASE_FAILED ? "no chip can be used: %s" :
                                 "the chips are still being probed%s; retry in a moment", m->error ?: "");
        for (size_t i = 0; i < m->n_chips; i++) {
                if (!m->chips[i].selectable)
                        continue;
                selectable++;
                if (!m->chips[i].held_by && found < n)
                        ret[found++] = m->chips[i].id;
        }
        if (found == n)
                return 0;
        if (selectable < n)
                return set_message(ret_why, -EINVAL, "the workload needs %u chip%s and this host has %u selectable",
                                 n, n == 1 ? "" : "s", selectable);
        return set_message(ret_why, -EBUSY, "the workload needs %u chip%s and only %u of the selectable ones are free",
                         n, n == 1 ? "" : "s", found);
}

NpuClaim *npu_claim_free(NpuClaim *c) {
        if (!c)
                return NULL;
        c->task = child_task_free(c->task);
        c->defer = sd_event_source_disable_unref(c->defer);
        claim_unhold(c);
        if (c->manager) {
                if (c->prev)
                        c->prev->next = c->next;
                else if (c->manager->claims == c)
                        c->manager->claims = c->next;
                if (c->next)
                        c->next->prev = c->prev;
        }
        cdi_edits_done(&c->edits);
        free(c->nodes);
        free(c->binds);
        free(c->chips);
        free(c->holder);
        return mfree(c);
}

const SandboxNpu *npu_claim_npu(const NpuClaim *c) {
        return c && c->n_chips > 0 ? &c->npu : NULL;
}

void npu_claim_devices(const NpuClaim *c, const SandboxDevice **ret_nodes, size_t *ret_n_nodes,
                       const SandboxBind **ret_binds, size_t *ret_n_binds, char *const **ret_env) {
        *ret_nodes = c->nodes;
        *ret_n_nodes = c->edits.n_nodes;
        *ret_binds = c->binds;
        *ret_n_binds = c->edits.n_mounts;
        *ret_env = c->edits.env;
}
