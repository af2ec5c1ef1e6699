/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Chips and devices in sandboxes (DESIGN.md §9): the daemon's view of the host's Ascend chips
 * (found under [NPU] DeviceRoot=, their state from DCMI or npu-smi, each probed in a sandbox
 * shaped like a real launch, all in a forked child so that vendor code never runs in the daemon)
 * and of the CDI devices (specs in [NPU] CDISpecDirectories=), and the claims executions make:
 * a claim checks the chips and devices, holds the chips and re-probes them before the run starts.
 * Owns its child tasks; calls npu/, sandbox/, config/ and util/.
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "config/config.h"
#include "sandbox/sandbox-argv.h"

typedef struct NpuManager NpuManager;
typedef struct NpuClaim NpuClaim;

typedef struct NpuManagerParams {
        sd_event *event;
        const Config *config;           /* read at new(): copied */
        const char *state_dir;          /* the probes' scratch workspaces go under <state>/npu */
        const char *bwrap;
        const SandboxProbe *probe;      /* borrowed: the Manager's, for the daemon's lifetime */
} NpuManagerParams;

/* npu_manager_new() - with [NPU] Enable=yes only. Return: 0, -ENOMEM, or -errno with *@ret_error
 * naming what failed (the probes' scratch directory). */
int npu_manager_new(const NpuManagerParams *p, NpuManager **ret, char **ret_error);
/* npu_manager_start() - find and probe the chips (after READY; a child task). */
void npu_manager_start(NpuManager *m);
NpuManager *npu_manager_free(NpuManager *m);
static inline void npu_manager_freep(NpuManager **m) {
        *m = npu_manager_free(*m);
}

/* GET /npu/chips: {"chips": [{"id","name","health","selectable","reason"?,"heldBy"?}], "cdiDevices": [...], ...} */
json_object *npu_manager_chips_json(NpuManager *m);
/* /health's "npu" summary. */
json_object *npu_manager_health_json(NpuManager *m);

/*
 * The claim's end: @error 0 (the chips answered their re-probe: the run may start), -EBUSY (a chip
 * failed its re-probe: 409 npu_chip_unavailable, @why names it), other -errno (@why says).
 * After an error the claim holds nothing; the caller still frees it.
 */
typedef void (*NpuClaimDoneFn)(NpuClaim *c, int error, const char *why, void *userdata);

/*
 * npu_manager_claim() - what an execution asks (@chips: host logic ids in the request's order;
 * @devices: CDI names), for @holder (the execution's id). Checked now: chip passthrough enabled,
 * every chip found, selectable and not held (by another run), every device known and usable.
 * Then the chips are held and re-probed; @done is called once, from the loop (also without chips).
 * Return: 0; -EINVAL (400 npu_unavailable), -EBUSY (409 npu_chip_unavailable: a chip is held by
 * another run), -ENOMEM, each with *ret_why (allocated) except -ENOMEM.
 */
int npu_manager_claim(NpuManager *m, const unsigned *chips, size_t n_chips, char *const *devices,
                      const char *holder, NpuClaimDoneFn done, void *userdata, NpuClaim **ret, char **ret_why);
/*
 * npu_manager_pick() - @n chips for a broker job: the lowest selectable ones that no run holds,
 * ascending, into @ret. Return: 0, or -EINVAL / -EBUSY (as npu_manager_claim()) with *ret_why.
 */
int npu_manager_pick(NpuManager *m, unsigned n, unsigned *ret, char **ret_why);

/* npu_claim_free() - release the chips (a re-probe still running is stopped, @done not called). */
NpuClaim *npu_claim_free(NpuClaim *c);
static inline void npu_claim_freep(NpuClaim **c) {
        *c = npu_claim_free(*c);
}

/* What the launch binds, valid while the claim lives: NULL without chips. */
const SandboxNpu *npu_claim_npu(const NpuClaim *c);
void npu_claim_devices(const NpuClaim *c, const SandboxDevice **ret_nodes, size_t *ret_n_nodes,
                       const SandboxBind **ret_binds, size_t *ret_n_binds, char *const **ret_env);
