/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A kernel's output budget ([Kernels] MaxOutputBytes=, docs/kernels.md): the bytes of the output
 * messages (stream, display_data, update_display_data, execute_result, error) a kernel publishes
 * on iopub for one request, counted per parent msg_id. The message that would pass the budget is
 * replaced by one explicit marker (a stream message on stderr with the request as its parent), and
 * that request's further output messages are dropped; everything else (status, execute_input,
 * comms, replies on shell) passes. Never a silent drop, and no rate: a client that asked for
 * output gets all of it up to the budget, then the marker. Pure code: no I/O, no event loop.
 */
#pragma once

#include <stdint.h>

#include "kernel/jupyter-msg.h"

/* Requests tracked at once; past it the least recently seen is forgotten (its count with it). */
#define KERNEL_OUTPUT_TRACKED 64U

typedef struct KernelOutput KernelOutput;

typedef enum KernelOutputVerdict {
        KERNEL_OUTPUT_PASS,             /* deliver the message */
        KERNEL_OUTPUT_TRUNCATE,         /* it passes the budget: deliver the marker instead */
        KERNEL_OUTPUT_DROP,             /* its request was truncated already: deliver nothing */
} KernelOutputVerdict;

/* kernel_output_new() - a budget of @max_bytes per request (0: none, every message passes). */
int kernel_output_new(uint64_t max_bytes, KernelOutput **ret);
KernelOutput *kernel_output_free(KernelOutput *o);

/* kernel_output_message_bytes() - what @m costs: for an output message the lengths of its
 * content's strings and keys (8 bytes for any other JSON value) and of its binary buffers; 0 for
 * any other message. */
uint64_t kernel_output_message_bytes(const JupyterMsg *m);

/*
 * kernel_output_judge() - judge one iopub message @m of the kernel. For KERNEL_OUTPUT_TRUNCATE
 * *@ret_marker is the marker, a new iopub stream message (name "stderr", @session, parent_header
 * that of @m), and *@ret_delivered the bytes delivered before it. Return: a verdict, or -ENOMEM
 * (nothing was recorded: the caller delivers @m as it would without a budget).
 */
int kernel_output_judge(KernelOutput *o, const JupyterMsg *m, const char *session, JupyterMsg **ret_marker,
                        uint64_t *ret_delivered);
