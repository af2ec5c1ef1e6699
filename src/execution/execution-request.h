/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Validation of /execute, /execute-shell and /shell-executions bodies into an ExecutionRequest. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "sandbox/sandbox-argv.h"

typedef enum ExecutionKind {
        EXECUTION_KIND_EXECUTE,         /* language + code, or argv */
        EXECUTION_KIND_SHELL,           /* command, run by /bin/sh -c */
        _EXECUTION_KIND_MAX,
        _EXECUTION_KIND_INVALID = -22,
} ExecutionKind;

typedef struct ExecutionMaxima {
        uint64_t default_timeout_usec;
        uint64_t max_timeout_usec;
        uint64_t memory_max;            /* 0 = no cap */
        uint64_t tasks_max;             /* 0 = no cap */
        unsigned cpu_quota_percent;     /* 0 = no cap */
} ExecutionMaxima;

struct Config;
/* The maxima of the configuration @c ([Execution] DefaultTimeoutSec=, MaxTimeoutSec=, MemoryMax=,
 * TasksMax=, CPUQuota=). */
ExecutionMaxima execution_maxima_from_config(const struct Config *c);

#define EXECUTION_ARGV_MAX 4096
#define EXECUTION_ARG_BYTES_MAX (128 * 1024 - 1)
#define EXECUTION_ENV_MAX 256
#define EXECUTION_ENV_VALUE_MAX (32 * 1024)
#define EXECUTION_CODE_PATH SANDBOX_CODE_PATH
#define EXECUTION_NPU_CHIPS_MAX 64
#define EXECUTION_DEVICES_MAX 32

typedef struct ExecutionRequest {
        char *execution_id;             /* NULL: the caller generates one */
        char *workspace_id;
        char *language;                 /* "python", "shell", "r" or NULL for argv/command */
        char *code;                     /* bound read-only at EXECUTION_CODE_PATH when set */
        size_t code_size;
        char **argv;                    /* the payload's argv (built from language/command if needed) */
        char **env;                     /* KEY=VALUE */
        char *stdin_data;
        size_t stdin_size;
        char *cwd;                      /* relative to /workspace, "" = top */
        char *environment;              /* the environment's name, or NULL (checked by its owner) */
        unsigned *npu_chips;            /* "npu": {"chips": [...]}: host logic ids, request order, unique */
        size_t n_npu_chips;
        char **devices;                 /* "devices": CDI names, unique (checked by the NPU manager) */
        uint64_t timeout_usec;
        uint64_t memory_max;            /* effective, after capping; 0 = none */
        uint64_t tasks_max;
        unsigned cpu_quota_percent;
} ExecutionRequest;

/*
 * execution_request_parse() - validate a request body. Pure.
 * Return: 0; -EBADMSG with *ret_why (allocated: the caller frees it) for a bad field;
 * -EPROTONOSUPPORT for kernelMode "persistent"; -ENOMEM.
 */
int execution_request_parse(json_object *body, ExecutionKind kind, const ExecutionMaxima *max,
                            ExecutionRequest **ret, char **ret_why);
ExecutionRequest *execution_request_free(ExecutionRequest *r);
static inline void execution_request_freep(ExecutionRequest **r) {
        *r = execution_request_free(*r);
}
