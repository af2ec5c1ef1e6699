/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Logging to the journal (structured, with MESSAGE_IDs) or to stderr, systemd style. */

#include <printf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>

#include "util/log.h"
#include "util/string-table.h"

static LogTarget log_target = LOG_TARGET_CONSOLE;
static int log_max_level = LOG_INFO;

static const char *const log_target_table[_LOG_TARGET_MAX] = {
        [LOG_TARGET_AUTO] = "auto",
        [LOG_TARGET_JOURNAL] = "journal",
        [LOG_TARGET_CONSOLE] = "console",
};

static const char *const log_level_table[] = {
        [LOG_EMERG] = "emerg", [LOG_ALERT] = "alert", [LOG_CRIT] = "crit", [LOG_ERR] = "err",
        [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(log_target, LogTarget)

int log_target_from_option(const char *s, LogTarget *ret) {
        LogTarget t = log_target_from_string(s);

        if (t < 0)
                return log_error_errno(EINVAL, "Invalid --log-target '%s'.", s);
        *ret = t;
        return 0;
}

int log_level_from_string(const char *s) {
        ssize_t i;

        if (!s)
                return -EINVAL;
        i = string_table_lookup_from_string(log_level_table, ELEMENTSOF(log_level_table), s);
        if (i >= 0)
                return (int) i;
        if (streq(s, "error"))
                return LOG_ERR;
        if (streq(s, "warn"))
                return LOG_WARNING;
        return -EINVAL;
}

/* True when stderr is the journal stream systemd connected us to ($JOURNAL_STREAM = "dev:ino"). */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_setup(LogTarget target) {
        if (target == LOG_TARGET_AUTO)
                target = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_CONSOLE;
        log_target = target;
}

void log_set_max_level(int level) {
        log_max_level = level;
}

int log_get_max_level(void) {
        return log_max_level;
}

bool log_to_journal(void) {
        return log_target == LOG_TARGET_JOURNAL;
}

static int error_result(int error) {
        return error == 0 ? 0 : -abs(error);
}

static void console_write(int level, const char *msg) {
        static const char *const prefix[] = {
                [LOG_EMERG] = "emerg: ", [LOG_ALERT] = "alert: ", [LOG_CRIT] = "crit: ",
                [LOG_ERR] = "error: ", [LOG_WARNING] = "warning: ", [LOG_NOTICE] = "",
                [LOG_INFO] = "", [LOG_DEBUG] = "debug: ",
        };
        (void) fprintf(stderr, "%s%s\n", prefix[level & LOG_PRIMASK], msg);
}

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int saved = errno, r;

        if ((level & LOG_PRIMASK) > log_max_level)
                return error_result(error);

        /* So that %m expands to the error we are logging. */
        errno = abs(error);
        va_start(ap, format);
        r = vasprintf(&msg, format, ap);
        va_end(ap);
        if (r < 0) {
                errno = saved;
                return error_result(error);
        }

        if (log_target == LOG_TARGET_JOURNAL) {
                if (error != 0)
                        (void) sd_journal_send("PRIORITY=%i", level & LOG_PRIMASK, "ERRNO=%i", abs(error),
                                               "CODE_FILE=%s", file, "CODE_LINE=%i", line, "CODE_FUNC=%s", func,
                                               "SYSLOG_IDENTIFIER=%s", program_invocation_short_name,
                                               "MESSAGE=%s", msg, NULL);
                else
                        (void) sd_journal_send("PRIORITY=%i", level & LOG_PRIMASK,
                                               "CODE_FILE=%s", file, "CODE_LINE=%i", line, "CODE_FUNC=%s", func,
                                               "SYSLOG_IDENTIFIER=%s", program_invocation_short_name,
                                               "MESSAGE=%s", msg, NULL);
        } else
                console_write(level & LOG_PRIMASK, msg);

        errno = saved;
        return error_result(error);
}

/*
 * Step a va_list over the arguments one printf format consumes, with glibc's
 * parse_printf_format(). Only the argument kinds our callers use are supported.
 */
static void va_format_advance(const char *format, va_list *ap) {
        int types[16];
        size_t n;

        n = parse_printf_format(format, ELEMENTSOF(types), types);
        if (n > ELEMENTSOF(types))
                n = ELEMENTSOF(types);
        for (size_t i = 0; i < n; i++) {
                int t = types[i];

                if (t & PA_FLAG_PTR) {
                        (void) va_arg(*ap, void *);
                        continue;
                }
                switch (t & ~PA_FLAG_MASK) {
                case PA_INT:
                case PA_CHAR:
                case PA_WCHAR:
                        if (t & (PA_FLAG_LONG_LONG | PA_FLAG_LONG))
                                (void) va_arg(*ap, long long);
                        else
                                (void) va_arg(*ap, int);
                        break;
                case PA_STRING:
                case PA_WSTRING:
                case PA_POINTER:
                        (void) va_arg(*ap, void *);
                        break;
                case PA_FLOAT:
                case PA_DOUBLE:
                        if (t & PA_FLAG_LONG_DOUBLE)
                                (void) va_arg(*ap, long double);
                        else
                                (void) va_arg(*ap, double);
                        break;
                default:
                        (void) va_arg(*ap, int);
                }
        }
}

#define LOG_STRUCT_MAX_FIELDS 48

int log_struct_internal(int level, int error, const char *file, int line, const char *func,
                        const char *format, ...) {
        char *items[LOG_STRUCT_MAX_FIELDS + 8] = {};
        struct iovec iov[LOG_STRUCT_MAX_FIELDS + 8];
        const char *message = NULL;
        size_t n = 0;
        va_list ap;
        int saved = errno;

        if ((level & LOG_PRIMASK) > log_max_level)
                return error_result(error);

        errno = abs(error);
        va_start(ap, format);
        for (const char *f = format; f && n < LOG_STRUCT_MAX_FIELDS; f = va_arg(ap, const char *)) {
                va_list aq;
                char *s;

                va_copy(aq, ap);
                errno = abs(error);
                if (vasprintf(&s, f, aq) < 0)
                        s = NULL;
                va_end(aq);
                va_format_advance(f, &ap);
                if (!s)
                        continue;
                items[n++] = s;
                if (strneq(s, "MESSAGE=", 8))
                        message = s + 8;
        }
        va_end(ap);

        if (log_target == LOG_TARGET_JOURNAL) {
                size_t k = 0;

                if (asprintf(&items[n], "PRIORITY=%i", level & LOG_PRIMASK) >= 0)
                        n++;
                if (error != 0 && asprintf(&items[n], "ERRNO=%i", abs(error)) >= 0)
                        n++;
                if (asprintf(&items[n], "CODE_FILE=%s", file) >= 0)
                        n++;
                if (asprintf(&items[n], "CODE_LINE=%i", line) >= 0)
                        n++;
                if (asprintf(&items[n], "CODE_FUNC=%s", func) >= 0)
                        n++;
                if (asprintf(&items[n], "SYSLOG_IDENTIFIER=%s", program_invocation_short_name) >= 0)
                        n++;
                for (size_t i = 0; i < n; i++)
                        iov[k++] = (struct iovec) { .iov_base = items[i], .iov_len = strlen(items[i]) };
                (void) sd_journal_sendv(iov, (int) k);
        } else if (message)
                console_write(level & LOG_PRIMASK, message);

        for (size_t i = 0; i < n; i++)
                free(items[i]);
        errno = saved;
        return error_result(error);
}
