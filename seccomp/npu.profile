# SPDX-License-Identifier: LGPL-2.1-or-later
#
# npu: sandboxes with accelerator devices (DESIGN.md §9). The vendor runtime imports need the
# network variant's socket calls (HCCL/collective set-up over loopback TCP), so this is the
# network profile; the bridge is not set up for it. Device-specific rules go below.
# Format: see baseline.profile and docs/seccomp.md.

include network
