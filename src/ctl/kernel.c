/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Stateful Jupyter kernels (docs/kernels.md): kernel list, start, exec, interrupt, restart and
 * stop, through the Kernel Gateway routes (/api/kernels...) with the API token, and exec through
 * our POST /api/kernels/{id}/execute, which answers one execution as one JSON document (no
 * WebSocket needed here). Requests go through request.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "exec-util.h"
#include "output.h"
#include "transfer.h"

#define KERNEL_CODE_SIZE_MAX ((size_t) 64 * 1024 * 1024)

/* "/api/kernels/<id><suffix>", @id escaped. NULL on OOM (reported) or a bad id (reported). */
static char *kernel_path(const char *id, const char *suffix) {
        _cleanup_free_ char *eid = NULL;
        char *p;

        if (!id || !*id || strchr(id, '/')) {
                log_error("Invalid kernel id: it is empty or has a '/'.");
                return NULL;
        }
        if (transfer_escape(id, &eid) < 0 || asprintf(&p, "/api/kernels/%s%s", eid, suffix) < 0) {
                log_oom();
                return NULL;
        }
        return p;
}

static int kernel_list(const CtlOptions *o) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        r = request_get_unless_json(o, "/api/kernels", &answer);
        if (r != 0 || !answer)
                return r;
        if (!json_object_is_type(answer, json_type_array)) {
                log_error("The daemon's kernel list is not a JSON array.");
                return CTL_EXIT_FAILURE;
        }
        printf("%-36s  %-12s  %-10s  %5s  %-27s  %s\n", "ID", "NAME", "STATE", "CONNS", "LAST ACTIVITY", "WORKSPACE");
        for (size_t i = 0; i < json_object_array_length(answer); i++) {
                json_object *k = json_object_array_get_idx(answer, i);
                _cleanup_free_ char *id = NULL, *name = NULL, *state = NULL, *ws = NULL, *last = NULL;

                if (output_escape(json_string_field(k, "id") ?: "-", &id) < 0 ||
                    output_escape(json_string_field(k, "name") ?: "-", &name) < 0 ||
                    output_escape(json_string_field(k, "execution_state") ?: "-", &state) < 0 ||
                    output_escape(json_string_field(k, "last_activity") ?: "-", &last) < 0 ||
                    output_escape(json_string_field(k, "workspaceId") ?: "-", &ws) < 0)
                        return log_oom();
                printf("%-36s  %-12s  %-10s  %5" PRIi64 "  %-27s  %s\n", id, name, state,
                       json_int_field(k, "connections", 0), last, ws);
        }
        return flush_stdout();
}

static int kernel_start(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "id", "name", "execution_state", "workspaceId", NULL };
        _cleanup_(json_object_putp) json_object *body = json_object_new_object();
        Request req = {
                .method = "POST",
                .path = "/api/kernels",
                .need_token = true,
                .json = body,
                .timeout_usec = o->timeout_usec,
        };

        if (!body ||
            (argc > 0 && json_add(body, "name", json_object_new_string(argv[0])) < 0) ||
            (argc > 1 && json_add(body, "workspaceId", json_object_new_string(argv[1])) < 0))
                return log_oom();
        return request_and_show(o, &req, first);
}

/* The code of exec: the argument, or standard input when it is "-" or absent; UTF-8 text (the
 * API carries it as a JSON string). Returns an exit code. */
static int read_code(int argc, char *argv[], char **ret, size_t *ret_size) {
        int r;

        if (argc > 0 && !streq(argv[0], "-")) {
                *ret = strdup(argv[0]);
                if (!*ret)
                        return log_oom();
                *ret_size = strlen(*ret);
        } else {
                r = exec_read_fd(STDIN_FILENO, KERNEL_CODE_SIZE_MAX, ret, ret_size);
                if (r == -ENOMEM)
                        return log_oom();
                if (r < 0) {
                        log_error("Cannot read the code from standard input: %s",
                                  r == -EFBIG ? "more than 64 MiB" : strerror(-r));
                        return CTL_EXIT_FAILURE;
                }
        }
        if (!exec_utf8_valid(*ret, *ret_size)) {
                log_error("The code is not UTF-8 text; the API carries it as a JSON string.");
                return CTL_EXIT_USAGE;
        }
        return 0;
}

/* Writes @text (may be NULL) to @f as it is: the kernel's own output. */
static void put_text(FILE *f, const char *text) {
        if (text)
                (void) fputs(text, f);
}

static int kernel_exec(const CtlOptions *o, const char *id, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *answer = NULL;
        _cleanup_free_ char *path = kernel_path(id, "/execute"), *code = NULL;
        json_object *outputs, *error;
        size_t code_size;
        const char *status;
        Request req = {
                .method = "POST",
                .need_token = true,
                .json = body,
                .timeout_usec = ctl_long_timeout(o),
        };
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        if (!body)
                return log_oom();
        r = read_code(argc, argv, &code, &code_size);
        if (r != 0)
                return r;
        if (json_add_string(body, "code", code, code_size) < 0)
                return log_oom();
        req.path = path;
        r = request(o, &req, &answer);
        if (r != 0)
                return r;
        status = json_string_field(answer, "status");
        if (o->json)
                return show_answer(o, answer, NULL) ?: (status && streq(status, "ok") ? 0 : 1);

        put_text(stdout, json_string_field(answer, "stdout"));
        outputs = json_array_field(answer, "outputs");
        for (size_t i = 0; outputs && i < json_object_array_length(outputs); i++) {
                json_object *data = NULL, *plain = NULL;

                if (json_object_object_get_ex(json_object_array_get_idx(outputs, i), "data", &data) &&
                    json_object_object_get_ex(data, "text/plain", &plain) &&
                    json_object_is_type(plain, json_type_string)) {
                        put_text(stdout, json_object_get_string(plain));
                        put_text(stdout, "\n");
                }
        }
        put_text(stderr, json_string_field(answer, "stderr"));
        error = NULL;
        if (json_object_object_get_ex(answer, "error", &error) && error &&
            json_object_is_type(error, json_type_object))
                fprintf(stderr, "%s: %s\n", json_string_field(error, "ename") ?: "Error",
                        json_string_field(error, "evalue") ?: "");
        if (json_bool_field(answer, "truncated"))
                fprintf(stderr, "(output truncated: more than the daemon keeps for one execution)\n");
        if (json_bool_field(answer, "timedOut"))
                fprintf(stderr, "(timed out: the kernel was interrupted)\n");
        r = flush_stdout();
        if (r != 0)
                return r;
        return status && streq(status, "ok") ? 0 : 1;
}

/* interrupt, stop: an answer without a body (204). */
static int kernel_no_content(const CtlOptions *o, const char *method, const char *id, const char *suffix,
                             const char *done) {
        _cleanup_free_ char *path = kernel_path(id, suffix);
        Request req = {
                .method = method,
                .need_token = true,
                .timeout_usec = o->timeout_usec,
                .raw_answer = true,
        };
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        req.path = path;
        r = request(o, &req, NULL);
        if (r == 0 && !o->json)
                printf("%s %s\n", done, id);
        return r ?: flush_stdout();
}

static int kernel_restart(const CtlOptions *o, const char *id) {
        static const char *const first[] = { "id", "name", "execution_state", NULL };
        _cleanup_free_ char *path = kernel_path(id, "/restart");
        Request req = {
                .method = "POST",
                .need_token = true,
                .timeout_usec = ctl_long_timeout(o),
        };

        if (!path)
                return CTL_EXIT_FAILURE;
        req.path = path;
        return request_and_show(o, &req, first);
}

int verb_kernel(const CtlOptions *o, int argc, char *argv[]) {
        const char *sub = argc > 0 ? argv[0] : "list";

        if (streq(sub, "list") && argc <= 1)
                return kernel_list(o);
        if (streq(sub, "start") && argc <= 3)
                return kernel_start(o, argc - 1, argv + 1);
        if (argc >= 2 && streq(sub, "exec") && argc <= 3)
                return kernel_exec(o, argv[1], argc - 2, argv + 2);
        if (argc == 2 && streq(sub, "interrupt"))
                return kernel_no_content(o, "POST", argv[1], "/interrupt", "Interrupted");
        if (argc == 2 && streq(sub, "restart"))
                return kernel_restart(o, argv[1]);
        if (argc == 2 && streq(sub, "stop"))
                return kernel_no_content(o, "DELETE", argv[1], "", "Stopped");
        log_error("Usage: kernel [list] | start [SPEC [WORKSPACE]] | exec ID [CODE | -] | "
                  "(interrupt | restart | stop) ID");
        return CTL_EXIT_USAGE;
}
