/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace files and revisions: the API paths of a workspace and of a file in it (shared with
 * upload.c and download.c), ls, revisions, tree, restore, rm, teardown. Each command is one
 * request through request.c; it calls output.c and transfer.c for escaping.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "output.h"
#include "transfer.h"

/* "/workspaces/<ws>" with the id escaped, followed by @fmt. NULL on OOM (reported). */
char *workspace_path(const char *ws, const char *fmt, ...) {
        _cleanup_free_ char *ews = NULL, *rest = NULL;
        va_list ap;
        char *p;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&rest, fmt, ap);
        va_end(ap);
        if (r < 0 || transfer_escape(ws, &ews) < 0 || asprintf(&p, "/workspaces/%s%s", ews, rest) < 0) {
                (void) log_oom();
                return NULL;
        }
        return p;
}

/* A path inside the workspace, each segment escaped. NULL on OOM (reported). */
char *remote_path(const char *path) {
        char *e = NULL;

        if (transfer_escape_path(path, &e) < 0)
                (void) log_oom();
        return e;
}

/* ---- listings ---------------------------------------------------------------------------------- */

/* "?dir=<escaped>" or "". NULL on OOM (reported). */
static char *dir_query(const char *dir) {
        _cleanup_free_ char *e = NULL;
        char *q;

        if (isempty(dir)) {
                q = strdup("");
                if (!q)
                        (void) log_oom();
                return q;
        }
        if (transfer_escape(dir, &e) < 0 || asprintf(&q, "?dir=%s", e) < 0) {
                (void) log_oom();
                return NULL;
        }
        return q;
}

/* One line per entry: type, [mode,] size, name ("/" after directories, "-> target" for links). */
static int print_entries(json_object *answer, bool with_mode) {
        json_object *list = json_array_field(answer, "entries");
        int64_t unlisted;

        if (!list) {
                log_error("The answer has no 'entries' list.");
                return CTL_EXIT_FAILURE;
        }
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *e = json_object_array_get_idx(list, i);
                const char *type = json_string_field(e, "type") ?: "?", *target = json_string_field(e, "target");
                _cleanup_free_ char *ename = output_escaped(json_string_field(e, "name")), *etype = output_escaped(type),
                                    *etarget = target ? output_escaped(target) : NULL;
                bool dir = streq(type, "dir");
                char size[32] = "-", mode[16] = "";

                if (!ename || !etype || (target && !etarget))
                        return log_oom();
                if (!dir && json_int_field(e, "size", -1) >= 0)
                        (void) snprintf(size, sizeof(size), "%" PRIi64, json_int_field(e, "size", 0));
                if (with_mode)
                        (void) snprintf(mode, sizeof(mode), "%04" PRIo64 " ",
                                        (uint64_t) json_int_field(e, "mode", 0) & 07777);
                printf("%-7s %s%12s  %s%s%s%s\n", etype, mode, size, ename, dir ? "/" : "",
                       etarget ? " -> " : "", etarget ?: "");
        }
        unlisted = json_int_field(answer, "unlisted", 0);
        if (unlisted > 0)
                log_error("%" PRIi64 " entr%s not listed: their names cannot be carried by the API (not UTF-8, "
                          "or control characters).", unlisted, unlisted == 1 ? "y is" : "ies are");
        return flush_stdout();
}

/* How a listing is printed without --json: @ws is the workspace asked about. Returns the exit code. */
typedef int (*ListPrinter)(json_object *answer, const char *ws);

static int print_files(json_object *answer, const char *ws) {
        return print_entries(answer, false);
}

static int print_tree(json_object *answer, const char *ws) {
        return print_entries(answer, true);
}

/* GET a listing at @path (built by the caller, NULL: failed, reported) and show it: as JSON with
 * --json, else by @print. Returns the exit code. */
static int list(const CtlOptions *o, const char *path, ListPrinter print, const char *ws) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_get_unless_json(o, path, &answer);
        if (r != 0 || !answer)
                return r;
        return print(answer, ws);
}

int verb_ls(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *q = dir_query(argc > 1 ? argv[1] : NULL), *path = NULL;

        if (!q)
                return CTL_EXIT_FAILURE;
        path = workspace_path(argv[0], "/files%s", q);
        return list(o, path, print_files, argv[0]);
}

int verb_tree(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *q = dir_query(argc > 2 ? argv[2] : NULL), *path = NULL, *erev = NULL;

        if (!q || transfer_escape(argv[1], &erev) < 0)
                return q ? log_oom() : CTL_EXIT_FAILURE;
        path = workspace_path(argv[0], "/revisions/%s/tree%s", erev, q);
        return list(o, path, print_tree, argv[0]);
}

/* One line per revision: execution, creation time, bytes. */
static int print_revisions(json_object *answer, const char *ws) {
        json_object *list;
        size_t width = strlen("EXECUTION");

        list = json_array_field(answer, "revisions");
        if (!list) {
                log_error("The answer has no 'revisions' list.");
                return CTL_EXIT_FAILURE;
        }
        if (json_object_array_length(list) == 0) {
                _cleanup_free_ char *ews = output_escaped(ws);
                printf("No revisions of workspace %s.\n", ews ?: "");
                return flush_stdout();
        }
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                const char *id = json_string_field(json_object_array_get_idx(list, i), "executionId");
                width = MAX(width, id ? strlen(id) : 1);
        }
        printf("%-*s  %-19s  %12s\n", (int) width, "EXECUTION", "CREATED", "BYTES");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *e = json_object_array_get_idx(list, i);
                _cleanup_free_ char *eid = output_escaped(json_string_field(e, "executionId") ?: "-");
                int64_t ms = json_int_field(e, "createdAt", -1);
                char created[32] = "-";
                struct tm tm;
                time_t t;

                if (!eid)
                        return log_oom();
                if (ms >= 0) {
                        t = (time_t) (ms / 1000);
                        if (localtime_r(&t, &tm))
                                (void) strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", &tm);
                }
                printf("%-*s  %-19s  %12" PRIi64 "\n", (int) width, eid, created, json_int_field(e, "bytes", 0));
        }
        return flush_stdout();
}

int verb_revisions(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *path = workspace_path(argv[0], "/revisions");

        return list(o, path, print_revisions, argv[0]);
}

/* ---- changes ----------------------------------------------------------------------------------- */

int verb_restore(const CtlOptions *o, int argc, char *argv[]) {
        static const char *const first[] = { "workspaceId", "restored", "tree", NULL };
        _cleanup_(json_object_putp) json_object *body = json_object_new_object();
        _cleanup_free_ char *path = workspace_path(argv[0], "/restore");

        if (!path)
                return CTL_EXIT_FAILURE;
        if (!body || json_add_string(body, "ref", argv[1], strlen(argv[1])) < 0)
                return log_oom();
        return request_and_show(o,
                                &(const Request) {
                                        .method = "POST",
                                        .path = path,
                                        .need_token = true,
                                        .json = body,
                                        .timeout_usec = ctl_long_timeout(o),
                                        .connect_timeout_usec = CONNECT_TIMEOUT_USEC,
                                },
                                first);
}

/* A request without a body that may wait for the workspace; shows the answer. */
static int change(const CtlOptions *o, const char *method, const char *path) {
        return request_and_show(o,
                                &(const Request) {
                                        .method = method,
                                        .path = path,
                                        .need_token = true,
                                        .timeout_usec = ctl_long_timeout(o),
                                        .connect_timeout_usec = CONNECT_TIMEOUT_USEC,
                                },
                                NULL);
}

int verb_rm(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *rpath = remote_path(argv[1]), *path = NULL;

        if (!rpath)
                return CTL_EXIT_FAILURE;
        path = workspace_path(argv[0], "/files/%s", rpath);
        if (!path)
                return CTL_EXIT_FAILURE;
        return change(o, "DELETE", path);
}

int verb_teardown(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *path = workspace_path(argv[0], "/teardown");

        if (!path)
                return CTL_EXIT_FAILURE;
        return change(o, "POST", path);
}

