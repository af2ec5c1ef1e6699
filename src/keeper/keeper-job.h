/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What sandbox-runnerd tells a keeper (sandbox-runner-keeper), and the fd layout of a launch.
 *
 * The daemon starts keepers ahead of their runs; each waits on a SOCK_SEQPACKET socket (its fd 3)
 * for one job: one message holding a KeeperJob and, as SCM_RIGHTS, the fds of the slots set in
 * ->fd_mask (in slot order) followed by a sealed memfd holding the NUL-terminated program path
 * and then ->argc arguments. Slot i becomes the keeper's fd i; everything else is closed.
 */
#pragma once

#include <stdint.h>

/* The fd layout of the bwrap process (SandboxSpec takes these numbers), and the keeper's own. */
#define SANDBOX_FD_SECCOMP 3
#define SANDBOX_FD_PASSWD  4
#define SANDBOX_FD_GROUP   5
#define SANDBOX_FD_HOSTS   6
#define SANDBOX_FD_CODE    7
#define KEEPER_FD_CONTROL  8      /* read end: 'G' go, 'K' kill, EOF release (keeper only) */
#define KEEPER_FD_REPORT   9      /* write end: "S<pid>\n", "X<wait status>\n" (keeper only) */
#define SANDBOX_FD_INFO    10     /* bwrap --info-fd */
#define SANDBOX_FD_EXEC    11     /* prebuilt: the exec helper, bwrap's command (exec-request.h) */
#define SANDBOX_FD_REQUEST 12     /* prebuilt: the helper's end of its request socket */
#define KEEPER_JOB_SLOTS   13

/* The keeper's job socket, as the daemon starts it. */
#define KEEPER_FD_JOB      3

#define KEEPER_JOB_MAGIC   UINT32_C(0x53524b33)   /* "SRK3" */

enum {
        /* Start bwrap at once, gated: its seccomp program comes through a pipe on 'G'. */
        KEEPER_JOB_EARLY     = 1U << 0,
        /* Start bwrap at once, ungated (no scope to wait for). Neither flag: wait for 'G'. */
        KEEPER_JOB_START_NOW = 1U << 1,
        /* The sandbox may outlive the daemon (a kernel in a systemd scope): once the job is taken
         * the keeper no longer dies with the daemon, and the end of the control pipe leaves bwrap
         * running (only 'K' kills it); the next daemon re-adopts the scope (src/kernel/kernel-adopt.c). */
        KEEPER_JOB_DETACHABLE = 1U << 2,
        /* A sandbox built ahead of its run (exec-request.h): the keeper keeps its job socket and
         * takes one KeeperBind on it, answered "B<errno>\n" on the report pipe. */
        KEEPER_JOB_PREBUILT = 1U << 3,
};

typedef struct KeeperJob {
        uint32_t magic;
        uint32_t flags;
        uint32_t fd_mask;        /* bit i: slot i is among the fds sent */
        uint32_t argc;           /* arguments after the program path in the memfd */
        uint64_t fsize;          /* RLIMIT_FSIZE of bwrap, 0 = none */
        uint64_t as;             /* RLIMIT_AS, 0 = none */
        uint64_t nofile;         /* RLIMIT_NOFILE, 0 = unchanged */
        uint64_t nproc;          /* RLIMIT_NPROC, 0 = unchanged (only without cgroups for tasks) */
} KeeperJob;

#define KEEPER_ARGV_BYTES_MAX (16U * 1024U * 1024U)
