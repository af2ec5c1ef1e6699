/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU manager's state (npu-manager.c) as its discovery (npu-discovery.c) sees it: the chips,
 * the launch's shape, the claims. Internal to npu/.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "npu/cdi.h"
#include "npu/npu-manager.h"
#include "sandbox/sandbox-argv.h"
#include "util/child-task.h"

#define NPU_REASON_MAX 300

typedef enum NpuPhase {
        NPU_PHASE_IDLE,                  /* not started yet */
        NPU_PHASE_PROBING,
        NPU_PHASE_READY,
        NPU_PHASE_FAILED,
} NpuPhase;


typedef struct NpuChip {
        unsigned id;                     /* the logic id: the N of davinciN */
        char *name;                      /* "Ascend 910B3", NULL if the state did not say */
        char *health;
        bool selectable;                 /* its probe at start-up succeeded */
        char *reason;                    /* why not selectable */
        char *last_failure;              /* the last re-probe's failure, if the last one failed */
        NpuClaim *held_by;
} NpuChip;

struct NpuManager {
        sd_event *event;
        char *bwrap;
        const SandboxProbe *probe;
        char *scratch_dir;
        char *device_root, *driver_dir, *toolkit_dir, *smi, *dcmi_library, *install_info;
        uint64_t probe_timeout_usec;
        char **cdi_dirs;

        NpuPhase phase;
        char *error;                     /* FAILED: why */
        char *source;                    /* "dcmi" or "npu-smi" */
        char **mgmt;                     /* the management nodes found */
        NpuChip *chips;
        size_t n_chips;
        ChildTask *discovery;
        NpuClaim *claims;                /* all claims alive, to unlink them at free */
};

struct NpuClaim {
        NpuManager *manager;
        NpuClaim *next, *prev;
        char *holder;
        unsigned *chips;                 /* ascending */
        size_t n_chips;
        SandboxNpu npu;
        CdiEdits edits;
        SandboxDevice *nodes;            /* views of edits, in the sandbox spec's types */
        SandboxBind *binds;
        ChildTask *task;
        sd_event_source *defer;
        NpuClaimDoneFn done;
        void *userdata;
};

/* The launch's shape without its chips, as the configuration and the discovery say. */
static inline SandboxNpu npu_base(NpuManager *m) {
        return (SandboxNpu) {
                .device_root = m->device_root,
                .mgmt_nodes = m->mgmt,
                .driver_dir = m->driver_dir,
                .toolkit_dir = m->toolkit_dir,
                .smi = m->smi,
                .install_info = m->install_info,
        };
}

/* npu_discover() - in the forked child: the device nodes, the chips' state and their probes, as
 * JSON on @out_fd ({"chips": [...], "mgmt": [...], "source"?, "error"?}). A ChildTaskFn. */
int npu_discover(int out_fd, void *userdata);

/* npu_reasons_free() - free @n strings of @l (NULL entries among them: chips that answered) and @l. */
void npu_reasons_free(char **l, size_t n);
