/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The probe of one chip (DESIGN.md §9): a throwaway sandbox shaped exactly like a real NPU launch
 * (the same argv builder, the npu seccomp variant, the same identity files), binding only that
 * chip (as /dev/davinci0) and the management nodes, runs `npu-smi info`. A chip is selectable
 * only while its probe succeeds. Blocking: run it in a forked child (util/child-task.h), never in
 * the daemon's loop. May call sandbox/ and util/.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sandbox/sandbox-argv.h"

/*
 * npu_probe_chip() - probe chip @id: @base is the launch's shape without its chips (device root,
 * management nodes, driver, toolkit, npu-smi); the sandbox's /workspace is a fresh directory made
 * under @scratch_dir and removed afterwards; killed after @timeout_usec.
 * Return: 0 (the chip answered), -EIO (npu-smi failed: *ret_why has its last line and exit
 * status), -ETIME (timed out), other -errno (the sandbox could not be built or started), each with
 * *ret_why (allocated).
 */
int npu_probe_chip(const char *bwrap, const SandboxProbe *probe, const SandboxNpu *base, unsigned id,
                   const char *scratch_dir, uint64_t timeout_usec, char **ret_why);

/*
 * npu_probe_chips() - npu_probe_chip() of the @n chips @ids at once, each in a forked process of
 * its own (a host with 16 chips waits for one probe, not 16). *@ret_reasons gets @n entries (a
 * strv of @n slots): NULL where the chip answered, else why not (a child that died without a
 * word is a reason too). Blocking, as npu_probe_chip(). Return: 0 or -ENOMEM / -errno of fork().
 */
int npu_probe_chips(const char *bwrap, const SandboxProbe *probe, const SandboxNpu *base, const unsigned *ids,
                    size_t n, const char *scratch_dir, uint64_t timeout_usec, char ***ret_reasons);
