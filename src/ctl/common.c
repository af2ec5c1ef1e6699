/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What every command of sandbox-runnerctl uses besides the request: messages on standard error,
 * standard output and showing an answer (plain or --json), and the json-c field accessors and
 * builders. It calls only output.c and libc.
 */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "ctl.h"
#include "output.h"
#include "transfer.h"

void log_error(const char *fmt, ...) {
        va_list ap;

        fputs(PROGRAM ": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

int log_oom(void) {
        log_error("Out of memory.");
        return CTL_EXIT_FAILURE;
}

const char *json_string_field(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

json_object *json_array_field(json_object *o, const char *key) {
        json_object *l;

        if (!json_object_object_get_ex(o, key, &l) || !json_object_is_type(l, json_type_array))
                return NULL;
        return l;
}

int print_string_list(json_object *l) {
        size_t n = l ? json_object_array_length(l) : 0;

        if (n == 0)
                printf("(none)");
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *e = output_escaped(json_object_get_string(json_object_array_get_idx(l, i)));

                if (!e)
                        return -ENOMEM;
                printf("%s%s", i > 0 ? ", " : "", e);
        }
        printf("\n");
        return 0;
}

int flush_stdout(void) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
                log_error("Failed to write to standard output: %s", strerror(errno ?: EIO));
                return CTL_EXIT_FAILURE;
        }
        return 0;
}

/* Signature headers for @req, "X-Sandbox-Timestamp: ..." and "X-Sandbox-Signature: v1=...".
 * Returns an exit code (0: done). */
int show_answer(const CtlOptions *o, json_object *answer, const char *const *first) {
        int r;

        if (o->json || !json_object_is_type(answer, json_type_object))
                r = output_json(stdout, answer);
        else
                r = output_flat(stdout, answer, first);
        if (r == -ENOMEM)
                return log_oom();

        return flush_stdout();
}

const char *json_body(json_object *o, size_t *ret_size) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

        if (s && ret_size)
                *ret_size = strlen(s);  /* embedded NULs are escaped as \u0000 */
        return s;
}

int json_add_string(json_object *o, const char *key, const char *s, size_t n) {
        if (n > INT_MAX)
                return -EFBIG;
        return json_add(o, key, json_object_new_string_len(s, (int) n));
}

int json_add_u64(json_object *o, const char *key, uint64_t v) {
        return json_add(o, key, json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t) v));
}

/* Command-line strings go into JSON strings, so they must be UTF-8. Returns an exit code. */
int64_t json_int_field(json_object *o, const char *key, int64_t fallback) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return fallback;
        return json_object_get_int64(v);
}

bool json_bool_field(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}

int log_sink_write(const void *data, size_t size, void *userdata) {
        LogSink *s = userdata;
        int r;

        if (s->fd >= 0) {
                r = transfer_write_all(s->fd, data, size);
                if (r < 0) {
                        s->error = r;
                        log_error("Failed to write to standard %s: %s", s->fd == STDERR_FILENO ? "error" : "output",
                                  strerror(-r));
                        return r;
                }
        }
        s->bytes += size;
        return 0;
}
