/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an execution came to (its answer's "status"); the names are execution-json.c's. */
#pragma once

typedef enum ExecutionStatus {
        EXECUTION_STATUS_RUNNING,
        EXECUTION_STATUS_EXITED,
        EXECUTION_STATUS_SIGNALED,
        EXECUTION_STATUS_TIMEOUT,
        EXECUTION_STATUS_MEMORY_LIMIT,
        EXECUTION_STATUS_TASKS_LIMIT,
        EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED,
        EXECUTION_STATUS_CANCELLED,
        EXECUTION_STATUS_INTERRUPTED,
        EXECUTION_STATUS_FAILED,            /* the sandbox could not be started */
        _EXECUTION_STATUS_MAX,
        _EXECUTION_STATUS_INVALID = -22,
} ExecutionStatus;

const char *execution_status_to_string(ExecutionStatus s);
