/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Logging to the journal (structured, with MESSAGE_IDs) or to stderr, systemd style. */
#pragma once

#include <stdbool.h>
#include <stdlib.h>
#include <syslog.h>

#include "util/macro.h"

typedef enum LogTarget {
        LOG_TARGET_AUTO,
        LOG_TARGET_JOURNAL,
        LOG_TARGET_CONSOLE,
        _LOG_TARGET_MAX,
        _LOG_TARGET_INVALID = -EINVAL,
} LogTarget;

/* log_target_from_string() - "auto", "journal", "console". Return: the target or -EINVAL. */
LogTarget log_target_from_string(const char *s);
/*
 * log_target_from_option() - the value of a --log-target= option into *@ret; an invalid one is
 * logged ("Invalid --log-target '…'."). For the daemons' command lines. Return: 0 or -EINVAL.
 */
int log_target_from_option(const char *s, LogTarget *ret);
/* log_level_from_string() - syslog level names ("debug" … "emerg"). Return: level or -EINVAL. */
int log_level_from_string(const char *s);

/* log_setup() - pick the target; AUTO means journal when stderr is connected to it. */
void log_setup(LogTarget target);
void log_set_max_level(int level);
int log_get_max_level(void);
bool log_to_journal(void);

/* log_internal() - log one message. Return: -abs(error) (or 0 for error == 0). */
int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) _printf_(6, 7);

/*
 * log_struct_internal() - log a structured event: a list of "FIELD=format", args… items ending in
 * NULL, one of which must be "MESSAGE=…". Return: -abs(error) or 0.
 */
int log_struct_internal(int level, int error, const char *file, int line, const char *func,
                        const char *format, ...);

#define log_full_errno(level, error, ...) \
        log_internal((level), (error), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_full(level, ...) log_full_errno((level), 0, __VA_ARGS__)

#define log_debug(...)   log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)    log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...)  log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...)   log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...)   log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_info_errno(e, ...)    log_full_errno(LOG_INFO, (e), __VA_ARGS__)
#define log_notice_errno(e, ...)  log_full_errno(LOG_NOTICE, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...)   log_full_errno(LOG_ERR, (e), __VA_ARGS__)

#define log_oom() log_full_errno(LOG_ERR, ENOMEM, "Out of memory.")

/* log_struct(LOG_NOTICE, "MESSAGE_ID=%s", ID, "FIELD=%s", v, "MESSAGE=…", …) */
#define log_struct(level, ...) \
        log_struct_internal((level), 0, __FILE__, __LINE__, __func__, __VA_ARGS__, NULL)
#define log_struct_errno(level, error, ...) \
        log_struct_internal((level), (error), __FILE__, __LINE__, __func__, __VA_ARGS__, NULL)
