/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The workspace endpoints other than files: POST /workspaces/{ws}/teardown, the revisions
 * (content-addressed snapshots: list, tree, files) and POST .../restore, with the revision refs
 * they take. May call core/, execution/, workspace/ (cas/) and the http/ transport.
 */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/api.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/child-task.h"
#include "util/fd-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/utf8.h"
#include "workspace/cas/cas.h"
#include "workspace/workspace.h"

/* ---- revision refs --------------------------------------------------------------------------- */

int http_revision_ref_parse(const char *ref, size_t len, const char *ws, char ret_id[static 129]) {
        const char *id = ref;
        size_t id_len = len;

        if (len >= 10 && strneq(ref, "workspace/", 10)) {
                const char *w = ref + 10, *slash = memchr(w, '/', len - 10);
                size_t w_len;

                if (!slash)
                        return -EINVAL;
                w_len = (size_t) (slash - w);
                id = slash + 1;
                id_len = len - (size_t) (id - ref);
                if (w_len == 0 || memchr(id, '/', id_len))
                        return -EINVAL;
                /* Refused by name, before anything is looked up: another workspace's revisions
                 * are never read through this one. */
                if (w_len != strlen(ws) || !strneq(w, ws, w_len))
                        return -EXDEV;
        }
        if (id_len == 0 || id_len > 128 || memchr(id, '\0', id_len))
                return -EINVAL;
        memcpy(ret_id, id, id_len);
        ret_id[id_len] = '\0';
        return workspace_id_valid(ret_id) ? 0 : -EINVAL;
}

/* ---- teardown ------------------------------------------------------------------------------ */

typedef struct Teardown {
        HttpRequest *req;
        json_object *stopped;
        ExecutionWatch **watches;
        size_t n_watches;
        bool replied;
        bool setting_up;                  /* cancelling: runs may finish synchronously */
} Teardown;

static void teardown_free(Teardown *t) {
        for (size_t i = 0; i < t->n_watches; i++)
                execution_watch_free(t->watches[i]);
        free(t->watches);
        json_object_put(t->stopped);
        free(t);
}

static void teardown_check(void *userdata) {
        Teardown *t = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (t->setting_up)
                return;
        for (size_t i = 0; i < t->n_watches; i++)
                if (execution_watch_alive(t->watches[i]) &&
                    !execution_finished(execution_watch_execution(t->watches[i])))
                        return;
        if (t->req) {
                http_request_set_userdata(t->req, NULL, NULL);
                o = json_object_new_object();
                if (o) {
                        json_object_object_add(o, "stopped", json_object_get(t->stopped));
                        http_reply_json(t->req, 200, o);
                } else
                        http_reply_oom(t->req);
        }
        teardown_free(t);
}

static void on_teardown_gone(HttpRequest *req, void *userdata) {
        Teardown *t = userdata;

        /* The runs are stopped anyway; only nobody waits for the answer now. */
        t->req = NULL;
}

void api_teardown(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                  const char **params, size_t *lens) {
        char ws[129];
        Teardown *t;

        if (api_param_id(params[0], lens[0], ws) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");

        t = calloc(1, sizeof(*t));
        if (!t || !(t->stopped = json_object_new_array())) {
                free(t);
                return http_reply_oom(req);
        }
        t->req = req;
        for (Execution *e = m->exec.executions; e; e = execution_next(e)) {
                ExecutionWatch **w;

                if (execution_finished(e) || !streq(execution_workspace(e), ws))
                        continue;
                w = realloc(t->watches, sizeof(*w) * (t->n_watches + 1));
                if (!w)
                        break;
                t->watches = w;
                if (execution_watch_add(e, teardown_check, t, &t->watches[t->n_watches]) < 0)
                        break;
                t->n_watches++;
                json_object_array_add(t->stopped, json_object_new_string(execution_id(e)));
        }
        http_request_set_userdata(req, t, on_teardown_gone);
        http_request_suspend(req);
        /* Cancel after all watches are in place: a run may finish synchronously (one still waiting
         * for the lease does), and the answer must wait until the loop is through. */
        t->setting_up = true;
        for (size_t i = 0; i < t->n_watches; i++)
                if (execution_watch_alive(t->watches[i]))
                        execution_cancel(execution_watch_execution(t->watches[i]), EXECUTION_STATUS_CANCELLED);
        t->setting_up = false;
        teardown_check(t);
}

/* ---- revisions (content-addressed snapshots) ---------------------------------------------- */

/* The answer to a ref that http_revision_ref_parse() refused with @error. */
static void reply_bad_ref(HttpRequest *req, int error, const char *ws, const char *ref, size_t len) {
        int l = (int) MIN(len, (size_t) 300);

        if (error == -EXDEV)
                return http_reply_error(req, HTTP_ERROR_REF_WORKSPACE_MISMATCH,
                                        "The ref '%.*s' is a revision of another workspace, not of '%s'.", l, ref, ws);
        http_reply_error(req, HTTP_ERROR_NOT_FOUND, "Workspace '%s' has no revision '%.*s'.", ws, l, ref);
}

static json_object *ref_json(const char *ws, const CasRef *r) {
        json_object *o = json_object_new_object();
        char *name = NULL;

        if (!o || asprintf(&name, "workspace/%s/%s", ws, r->exec_id) < 0) {
                json_object_put(o);
                return NULL;
        }
        json_object_object_add(o, "ref", json_object_new_string(name));
        json_object_object_add(o, "executionId", json_object_new_string(r->exec_id));
        json_object_object_add(o, "createdAt", json_new_u64(r->created_ms));
        json_object_object_add(o, "bytes", json_new_u64(r->bytes));
        json_object_object_add(o, "tree", json_object_new_string(r->tree));
        free(name);
        return o;
}

void api_revisions(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *list;
        CasRef *refs = NULL;
        size_t n = 0;
        char ws[129];
        int r;

        if (api_param_id(params[0], lens[0], ws) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
        r = cas_list_refs(m->cas, ws, &refs, &n);
        if (r < 0 && r != -ENOENT)
                return http_reply_error(req, HTTP_ERROR_INTERNAL,
                                        "The revisions of workspace '%s' cannot be listed: %s.", ws, strerror(-r));
        o = json_object_new_object();
        list = json_object_new_array();
        if (!o || !list) {
                json_object_put(list);
                cas_refs_free(refs, n);
                return http_reply_oom(req);
        }
        for (size_t i = 0; i < n; i++)
                json_object_array_add(list, ref_json(ws, &refs[i]));
        cas_refs_free(refs, n);
        json_object_object_add(o, "workspaceId", json_object_new_string(ws));
        json_object_object_add(o, "revisions", list);
        http_reply_json(req, 200, o);
}

/* {ws} and {ref} (an executionId, or "workspace/<ws>/<executionId>" with its slashes, as the
 * routes' "<ref>" captures it). On any refusal the reply is sent and < 0 returned. */
static int read_revision(Manager *m, HttpRequest *req, const char **params, size_t *lens, char *ws, CasRef *ret) {
        char id[129];
        int r;

        if (api_param_id(params[0], lens[0], ws) < 0) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
                return -ENOENT;
        }
        r = http_revision_ref_parse(params[1], lens[1], ws, id);
        if (r < 0) {
                reply_bad_ref(req, r, ws, params[1], lens[1]);
                return r;
        }
        r = cas_read_ref(m->cas, ws, id, ret);
        if (r == -ENOENT || r == -EINVAL) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "Workspace '%s' has no revision '%s'.", ws, id);
                return -ENOENT;
        }
        if (r < 0) {
                http_reply_error(req, HTTP_ERROR_INTERNAL, "Revision '%s' of workspace '%s' cannot be read: %s.",
                                 id, ws, strerror(-r));
                return r;
        }
        return 0;
}

void api_revision_tree(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *dir = http_request_query(req, "dir") ?: "";
        CasRef ref = {};
        CasEntry *entries = NULL;
        json_object *list;
        size_t n = 0;
        char ws[129];
        int r;

        if (read_revision(m, req, params, lens, ws, &ref) < 0)
                return;
        r = cas_tree_list(m->cas, ref.tree, dir, &entries, &n);
        cas_ref_done(&ref);
        if (r == -ENOENT || r == -ENOTDIR || r == -EINVAL)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No directory '%s' in this revision.", dir);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "Directory '%s' of this revision cannot be read: %s.",
                                        isempty(dir) ? "/" : dir, strerror(-r));
        o = json_object_new_object();
        list = json_object_new_array();
        size_t unlisted = 0;
        for (size_t i = 0; o && list && i < n; i++) {
                json_object *e;
                const CasEntry *c = &entries[i];

                /* Names a client cannot address (not UTF-8, control bytes) are counted, not sent. */
                if (!utf8_valid(c->name, strlen(c->name)) || strpbrk(c->name, "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") ||
                    (c->target && !utf8_valid(c->target, strlen(c->target)))) {
                        unlisted++;
                        continue;
                }
                e = json_object_new_object();
                json_object_object_add(e, "name", json_object_new_string(c->name));
                json_object_object_add(e, "type", json_object_new_string(
                                c->type == DT_DIR ? "dir" : c->type == DT_LNK ? "symlink" : "file"));
                json_object_object_add(e, "size", json_new_u64(c->size));
                json_object_object_add(e, "mode", json_object_new_int((int) c->mode));
                if (c->type == DT_REG && strneq(c->digest, "sha256:", 7))
                        json_object_object_add(e, "sha256", json_object_new_string(c->digest + 7));
                if (c->target)
                        json_object_object_add(e, "target", json_object_new_string(c->target));
                json_object_array_add(list, e);
        }
        cas_entries_free(entries, n);
        if (!o || !list) {
                json_object_put(list);
                return http_reply_oom(req);
        }
        json_object_object_add(o, "entries", list);
        if (unlisted > 0)
                json_object_object_add(o, "unlisted", json_new_u64(unlisted));
        http_reply_json(req, 200, o);
}

/* "sha256:<hex>" → the Repr-Digest value "sha-256=:<base64>:". */
static int repr_digest_from_hex(const char *digest, char *buf, size_t size) {
        uint8_t raw[32];
        char b64[BASE64_ENCODE_RAW_LENGTH(32) + 1];

        if (!strneq(digest, "sha256:", 7) || strlen(digest + 7) != 64)
                return -EINVAL;
        for (size_t i = 0; i < 32; i++) {
                unsigned v;
                if (sscanf(digest + 7 + 2 * i, "%2x", &v) != 1)
                        return -EINVAL;
                raw[i] = (uint8_t) v;
        }
        base64_encode_raw(b64, sizeof(raw), raw);
        b64[BASE64_ENCODE_RAW_LENGTH(32)] = '\0';
        return snprintf(buf, size, "sha-256=:%s:", b64) < (int) size ? 0 : -ENOBUFS;
}

void api_revision_file(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                       const char **params, size_t *lens) {
        _cleanup_free_ char *path = NULL;
        char ws[129], digest[72], repr[96];
        CasRef ref = {};
        uint64_t size;
        int fd = -EBADF, r;

        if (read_revision(m, req, params, lens, ws, &ref) < 0)
                return;
        path = strndup(params[2], lens[2]);
        if (!path) {
                cas_ref_done(&ref);
                return http_reply_oom(req);
        }
        r = cas_open_file(m->cas, ref.tree, path, &fd, &size, digest);
        cas_ref_done(&ref);
        if (r == -EISDIR || r == -ELOOP)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "'%s' is not a regular file in this revision.", path);
        if (r == -ENOENT || r == -ENOTDIR || r == -EINVAL)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No file '%s' in this revision.", path);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "'%s' of this revision cannot be read: %s.", path,
                                        strerror(-r));
        if (repr_digest_from_hex(digest, repr, sizeof(repr)) < 0) {
                safe_close(fd);
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "Corrupt digest.");
        }
        const char *const hdr[] = { "Repr-Digest", repr, "X-Sandbox-SHA256", digest + 7, NULL };
        r = http_request_reply_fd(req, 200, "application/octet-stream", fd, 0, size, hdr);
        if (r < 0)
                http_reply_oom(req);
}

typedef struct Restore {
        Manager *manager;
        HttpRequest *req;
        char ws[129];
        char *tree;
        char *ref_name;
        int ws_fd, lease_fd;
        sd_event_source *retry;
        ChildTask *task;
} Restore;

static void restore_free(Restore *x) {
        x->retry = sd_event_source_disable_unref(x->retry);
        x->task = child_task_free(x->task);
        safe_close(x->lease_fd);
        safe_close(x->ws_fd);
        manager_busy_unref(x->manager);
        free(x->tree);
        free(x->ref_name);
        free(x);
}

static void on_restore_gone(HttpRequest *req, void *userdata) {
        Restore *x = userdata;
        x->req = NULL;   /* the restore completes anyway; nobody waits for the answer */
}

static void restore_reply(Restore *x, int error) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        /* The tree changed without a snapshot: what the last one was is no base for the next. */
        workspace_heads_forget(&x->manager->exec.heads, x->ws);

        if (x->req) {
                http_request_set_userdata(x->req, NULL, NULL);
                if (error < 0)
                        http_reply_error(x->req, HTTP_ERROR_INTERNAL,
                                         "The restore of '%s' into workspace '%s' failed: %s.", x->ref_name, x->ws,
                                         strerror(-error));
                else if ((o = json_object_new_object())) {
                        json_object_object_add(o, "workspaceId", json_object_new_string(x->ws));
                        json_object_object_add(o, "restored", json_object_new_string(x->ref_name));
                        json_object_object_add(o, "tree", json_object_new_string(x->tree));
                        http_reply_json(x->req, 200, o);
                } else
                        http_reply_oom(x->req);
        }
        restore_free(x);
}

static int restore_child(int out_fd, void *userdata) {
        Restore *x = userdata;
        return cas_restore(x->manager->cas, x->tree, x->manager->workspaces_fd, x->ws);
}

static void on_restore_done(ChildTask *t, int error, const char *out, void *userdata) {
        Restore *x = userdata;

        x->task = child_task_free(x->task);
        restore_reply(x, error);
}

static int on_restore_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Restore *x = userdata;
        int r;

        r = workspace_lease_try(x->ws_fd);
        if (r == -EWOULDBLOCK) {
                /* A run (here or in another process) holds the workspace: wait for it. */
                (void) sd_event_source_set_time_relative(s, 50 * USEC_PER_MSEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        x->retry = sd_event_source_disable_unref(x->retry);
        if (r < 0) {
                restore_reply(x, r);
                return 0;
        }
        x->lease_fd = r;
        r = child_task_start(x->manager->event, restore_child, on_restore_done, x, &x->task);
        if (r < 0)
                restore_reply(x, r);
        return 0;
}

/* A copy of @ref with "%2F" (either case) as '/': clients also send a ref as it appears in their
 * URLs, percent-encoded, and no valid ref contains a '%' otherwise. Return: NULL on OOM. */
static char *ref_unescape_slashes(const char *ref) {
        char *s = strdup(ref), *w = s;

        if (!s)
                return NULL;
        for (const char *p = ref; *p;)
                if (p[0] == '%' && p[1] == '2' && (p[2] == 'F' || p[2] == 'f')) {
                        *w++ = '/';
                        p += 3;
                } else
                        *w++ = *p++;
        *w = '\0';
        return s;
}

void api_restore(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                 const char **params, size_t *lens) {
        _cleanup_free_ char *unescaped = NULL;
        json_object *v;
        const char *ref_s;
        char ws[129], exec[129];
        CasRef ref = {};
        Restore *x;
        int r;

        if (api_param_id(params[0], lens[0], ws) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
        json_object_object_foreach(body, key, val) {
                (void) val;
                if (!streq(key, "ref"))
                        return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Unknown field '%.64s' (only 'ref').", key);
        }
        if (!json_object_object_get_ex(body, "ref", &v) || !json_object_is_type(v, json_type_string))
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "'ref' (a revision of this workspace) is required.");
        /* "workspace/<ws>/<executionId>" as listed, or just the executionId. */
        ref_s = unescaped = ref_unescape_slashes(json_object_get_string(v));
        if (!ref_s)
                return http_reply_oom(req);
        r = http_revision_ref_parse(ref_s, strlen(ref_s), ws, exec);
        if (r < 0)
                return reply_bad_ref(req, r, ws, ref_s, strlen(ref_s));
        r = cas_read_ref(m->cas, ws, exec, &ref);
        if (r == -ENOENT || r == -EINVAL)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "Workspace '%s' has no revision '%s'.", ws, exec);
        if (r < 0)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "Revision '%s' of workspace '%s' cannot be read: %s.",
                                        exec, ws, strerror(-r));

        x = calloc(1, sizeof(*x));
        if (!x) {
                cas_ref_done(&ref);
                return http_reply_oom(req);
        }
        *x = (Restore) { .manager = m, .req = req, .ws_fd = -EBADF, .lease_fd = -EBADF, .tree = STEAL(ref.tree) };
        cas_ref_done(&ref);
        memcpy(x->ws, ws, sizeof(x->ws));
        manager_busy_ref(m);
        if (asprintf(&x->ref_name, "workspace/%s/%s", ws, exec) < 0) {
                x->ref_name = NULL;
                restore_free(x);
                return http_reply_oom(req);
        }
        x->ws_fd = workspace_open(m->workspaces_fd, ws);
        if (x->ws_fd < 0) {
                r = x->ws_fd;
                restore_free(x);
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "Workspace '%s' cannot be opened: %s.", ws,
                                        strerror(-r));
        }
        r = sd_event_add_time_relative(m->event, &x->retry, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_restore_retry, x);
        if (r < 0) {
                restore_free(x);
                return http_reply_oom(req);
        }
        http_request_set_userdata(req, x, on_restore_gone);
        http_request_suspend(req);
}
