/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What sandbox-runnerd tells the exec helper (sandbox-runner-exec) of a sandbox built ahead of
 * its run (docs/architecture.md, "Sandboxes built ahead"), and what it tells the keeper of such a
 * sandbox to bind into it.
 *
 * The helper is the command bwrap runs in a prebuilt sandbox (exec'd as /proc/self/fd/
 * SANDBOX_FD_EXEC, under the sandbox's seccomp filter, with no capabilities): it waits on the
 * SOCK_SEQPACKET socket SANDBOX_FD_REQUEST, on which it first says it is there (one message of one
 * byte, EXEC_HELPER_READY: the sandbox is built, bwrap has exec'd it), for one message, an
 * ExecRequest with, as SCM_RIGHTS,
 * the payload's stdin, stdout and stderr and a sealed memfd holding ExecRequest.strings_size
 * bytes: the working directory, then argc arguments, then envc "NAME=VALUE" entries, each
 * NUL-terminated. It lowers its limits to the request's, moves the fds to 0, 1 and 2, closes
 * every other fd, changes into the directory and execs the payload, looked up in the request's
 * PATH as bwrap does. End of file instead of a request (the sandbox is discarded): it exits 0.
 */
#pragma once

#include <stdint.h>

#define EXEC_REQUEST_MAGIC UINT32_C(0x53524531)   /* "SRE1" */
#define EXEC_HELPER_READY 'R'
#define EXEC_REQUEST_FDS 4                        /* stdin, stdout, stderr, the strings' memfd */
#define EXEC_REQUEST_STRINGS_MAX (16U * 1024U * 1024U)

typedef struct ExecRequest {
        uint32_t magic;
        uint32_t argc;           /* >= 1 */
        uint32_t envc;
        uint32_t strings_size;   /* bytes in the memfd: cwd, argv, env, each NUL-terminated */
        uint64_t fsize;          /* RLIMIT_FSIZE, 0 = unchanged */
        uint64_t as;             /* RLIMIT_AS, 0 = unchanged */
        uint64_t nofile;         /* RLIMIT_NOFILE, 0 = unchanged */
        uint64_t nproc;          /* RLIMIT_NPROC, 0 = unchanged */
} ExecRequest;

/*
 * The keeper's part (KEEPER_JOB_PREBUILT): on its job socket, after the job, one KeeperBind: bind
 * the workspace at @ws_path (which must be the directory @ws_dev/@ws_ino, the one whose lease the
 * daemon holds) at /workspace in the sandbox whose pid 1 is @init_pid, read-write, nosuid and
 * nodev as bwrap's --bind makes it; and, if @code_path is not empty, that file read-only at the
 * code's path. The keeper answers "B<errno>\n" (0: done) on its report pipe. One per sandbox.
 */
#define KEEPER_BIND_MAGIC UINT32_C(0x53524231)    /* "SRB1" */
/* Before it, once the sandbox is ready, the daemon may send a KeeperBind with this magic, its
 * @init_pid and (the code shape) a non-empty @code_path, the rest empty: the keeper then prepares
 * the bind's child ahead (keeper-bind.c), and answers nothing. */
#define KEEPER_BIND_PREPARE_MAGIC UINT32_C(0x53524250)    /* "SRBP" */
#define KEEPER_BIND_PATH_MAX 4096

typedef struct KeeperBind {
        uint32_t magic;
        int32_t init_pid;
        uint64_t ws_dev;
        uint64_t ws_ino;
        char ws_path[KEEPER_BIND_PATH_MAX];
        char code_path[KEEPER_BIND_PATH_MAX];
} KeeperBind;
