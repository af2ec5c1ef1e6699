/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the host has of Ascend NPUs (DESIGN.md §9): the device nodes under a device root (the
 * chips' /dev/davinciN and the management nodes), and the chips' state, read from the driver's
 * DCMI library (dlopen()ed) or else from running `npu-smi info -m` and `npu-smi info` (parsed by
 * npu/npu-smi.c). Also the bounded run of a program with its output captured, which the chip
 * probe reuses. npu_host_read_state() and npu_run_capture() block: run them in a forked child
 * (util/child-task.h), never on the event loop.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "npu/npu-smi.h"

/* The management nodes a sandbox with chips also gets, where the host has them, in this order. */
#define NPU_MGMT_NODES "davinci_manager", "devmm_svm", "hisi_hdc"

/* The most bytes of a program's stdout that npu_run_capture() keeps. */
#define NPU_RUN_OUTPUT_MAX ((size_t) 1024 * 1024)

typedef struct NpuHostNodes {
        unsigned *chips;                /* logic ids N for which <root>/davinciN is a character device, ascending */
        size_t n_chips;
        char **mgmt;                    /* the management node names present as character devices under root
                                         * (strv, in the order of NPU_MGMT_NODES; never NULL after a scan) */
} NpuHostNodes;

/*
 * npu_host_scan_nodes() - the device nodes of @device_root ("/dev", or a test's directory). A chip
 * is an entry "davinci" + 1-9 decimal digits without a leading zero ("davinci0", "davinci15"; not
 * "davinci01", "davinci", "davinci_manager") that is a character device itself (lstat: a symlink,
 * a regular file or a directory of that name is not counted). A management node is one of
 * NPU_MGMT_NODES that is a character device. Other entries are ignored.
 * @ret is written only on success (then npu_host_nodes_done() it). On failure other than -ENOMEM,
 * *@ret_why (may be NULL) says why, naming @device_root ("cannot open the NPU device root '/x/dev'
 * ([NPU] DeviceRoot=): Permission denied").
 * Return: 0, -E2BIG (more than NPU_SMI_CHIPS_MAX chips), -ENOMEM, or -errno of opening or
 * reading @device_root (-ENOENT when it does not exist).
 */
int npu_host_scan_nodes(const char *device_root, NpuHostNodes *ret, char **ret_why);

/* npu_host_nodes_done() - free what @n holds and empty it. */
void npu_host_nodes_done(NpuHostNodes *n);

/*
 * npu_host_read_state() - the host's chips, their names and health. From DCMI when libdcmi.so can
 * be dlopen()ed (RTLD_NOW|RTLD_LOCAL): from @dcmi_path alone if it is set (not NULL, not ""), else
 * "libdcmi.so" (the loader's search path) then <@driver_dir>/lib64/driver/libdcmi.so (@driver_dir
 * NULL or "": /usr/local/Ascend/driver). DCMI gives every device of every card whose logic id it
 * answers (the MCU has none), named chip_type + " " + chip_name ("Ascend 910B3"), with its health
 * (0 "OK", 1 "Warning", 2 "Alarm", 3 "Critical", else "UNKNOWN"), no bus id and n_processes 0
 * (DCMI's process query is not used: the probe says whether a chip is taken). A library that
 * cannot be loaded, lacks one of the six entry points, fails dcmi_init() or any query, or answers
 * out of bounds (more than NPU_SMI_CHIPS_MAX chips, duplicate logic ids, a name that is not
 * printable ASCII) is passed over with the reason logged at debug level, and @smi (NULL or "":
 * "npu-smi", looked up in $PATH) is run as `@smi info -m` then `@smi info` with
 * npu_run_capture(), both within @timeout_usec together (0: no timeout), and the outputs parsed.
 * @ret and *@ret_source ("dcmi" or "npu-smi", static) are written only on success.
 * Return: 0; -ENOENT/-EACCES when @smi cannot be executed, -ETIMEDOUT when it did not finish in
 * time, -EIO when it exited with another status than 0 or died of a signal, -EFBIG when it printed
 * more than NPU_RUN_OUTPUT_MAX bytes, -EBADMSG when its output does not parse, -ENOMEM; each
 * failure with *@ret_why (allocated; not touched if @ret_why is NULL) saying which command and why
 * (with its stderr's last line), and why DCMI was passed over.
 */
int npu_host_read_state(const char *smi, const char *driver_dir, const char *dcmi_path, uint64_t timeout_usec,
                        NpuSmiChips *ret, const char **ret_source, char **ret_why);

/*
 * npu_run_capture() - run @argv (argv[0] a path, or a name looked up in $PATH; no shell) with
 * stdin /dev/null, the caller's environment, no other fds, default signal dispositions and an
 * empty signal mask, in a process group of its own; capture its stdout (at most
 * NPU_RUN_OUTPUT_MAX bytes) and the last non-empty line of its stderr (at most 512 bytes); kill
 * the group at @timeout_usec (0: no timeout). The child is reaped; one that does not die within a
 * second of SIGKILL (stuck in a driver) is left behind.
 * Return: 0 when it exited, with *@ret_out (NUL-terminated, allocated) and *@ret_len, *@ret_status
 * (its exit status, or -1 when a signal ended it or, with SIGCHLD ignored, its status was lost) and
 * *@ret_err (its stderr's last line, or NULL);
 * -ENOENT, -EACCES... when argv[0] cannot be executed, -ETIMEDOUT when the timeout killed it,
 * -EFBIG when its stdout went past NPU_RUN_OUTPUT_MAX (it is killed), each with *@ret_err saying
 * so; -ENOMEM, or -errno of pipe(), fork() and the like, with *@ret_err untouched.
 */
int npu_run_capture(char *const *argv, uint64_t timeout_usec, char **ret_out, size_t *ret_len, int *ret_status,
                    char **ret_err);
