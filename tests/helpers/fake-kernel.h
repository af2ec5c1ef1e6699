/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The test double of src/kernel/ (fake-kernel.c): test-kg-api only. */
#pragma once

#include "kernel/jupyter-msg.h"
#include "kernel/kernel.h"

typedef struct FakeKernelCounters {
        unsigned n_sent;                /* messages kernel_client_send() took */
        unsigned n_replies;
        unsigned n_interrupts;
        unsigned n_restarts;
        unsigned n_env_keys;            /* env keys of the last start request */
} FakeKernelCounters;

extern FakeKernelCounters fake_kernel_counters;

/* A manager that starts at most @cap kernels; kernel_manager_free() frees it. */
KernelManager *fake_kernel_manager_new(unsigned cap);
