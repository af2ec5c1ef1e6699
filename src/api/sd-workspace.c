/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's remote workspaces (notes §10; docs/api.md 15.8): downloads
 * (listings: sd-listing.c) of the workspace their runnerWorkspaceKey names, uploads (PUT /remote-workspace/file,
 * and the chunked, size- and hash-verified PUT /remote-workspace/transfer-file) and DELETE
 * /remote-workspace. Uploads stream into our atomic workspace writers (ws-files.h) while the body
 * arrives; only the commit takes the workspace's write lease (so it waits for a running execution,
 * as their shared mutation lock does), then their quota sum is checked in a thread (the walk), and every mutation is committed to our snapshot store
 * before the answer, so that /remote-workspace/snapshots sees it. Anything refused, a mismatch or
 * a disconnect publishes nothing. May call core/, workspace/ and the http/ transport.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-auth.h"
#include "api/sd-internal.h"
#include "core/manager.h"
#include "core/snapshot-gc.h"
#include "http/http-server.h"
#include "util/child-task.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/thread-task.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"
#include "workspace/workspace.h"
#include "workspace/ws-files.h"

#define LEASE_RETRY_USEC (50 * USEC_PER_MSEC)

bool sdp_path_valid(const char *path) {
        return path && *path && strlen(path) <= SDP_PATH_MAX && ws_path_validate(path, false) >= 0;
}

bool sdp_workspace_param(HttpRequest *req, const char *key, char ret[static 129]) {
        if (!key) {
                sdp_reply_error(req, 400, "workspace is required");
                return false;
        }
        if (!sdp_runner_workspace_key_valid(key)) {
                sdp_reply_error(req, 400, "Invalid runner workspace key");
                return false;
        }
        sdp_workspace_for_key(key, ret);
        return true;
}

static int open_existing(Manager *m, const char *ws) {
        int fd = openat(m->workspaces_fd, ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

void sdp_rw_file_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        static const char *const headers[] = { "Cache-Control", "no-store", NULL };
        _cleanup_close_ int ws_fd = -EBADF;
        const char *path = http_request_query(req, "path");
        struct stat st;
        char ws[129];
        int fd = -EBADF, r;

        if (!sdp_workspace_param(req, http_request_query(req, "workspace"), ws))
                return;
        if (!sdp_path_valid(path))
                return sdp_reply_error(req, 400, "Invalid remote workspace path");
        ws_fd = open_existing(m, ws);
        if (ws_fd < 0)
                return sdp_reply_error(req, 400, "Remote workspace file not found");
        /* No symlink is followed, FIFOs and hard links are refused, the bytes sent are the
         * checked inode's first st_size (ws_file_open_read()). */
        r = ws_file_open_read(ws_fd, path, UINT64_MAX, &fd, &st);
        if (r == -ENOENT || r == -ENOTDIR)
                return sdp_reply_error(req, 400, "Remote workspace file not found");
        if (r < 0)
                return sdp_reply_error(req, 400, "Remote workspace path is not a regular file inside the workspace");
        r = http_request_reply_fd(req, 200, "application/octet-stream", fd, 0, (uint64_t) st.st_size, headers);
        if (r < 0)
                sdp_reply_error(req, 500, "Out of memory");
}

/* ---- mutations: uploads and DELETE ----------------------------------------------------------- */

typedef enum MutationKind {
        MUTATION_PUT,                   /* PUT /remote-workspace/file */
        MUTATION_TRANSFER,              /* PUT /remote-workspace/transfer-file */
        MUTATION_CLEAR,                 /* DELETE /remote-workspace */
} MutationKind;

typedef struct Mutation {
        Manager *m;
        HttpRequest *req;               /* NULL once the client is gone */
        MutationKind kind;
        char ws[129];
        char exec_id[64];               /* the snapshot's ref name */
        char *path;
        bool replace;                   /* conflict=overwrite */
        uint64_t max;                   /* bytes the file may have */
        uint64_t declared;              /* transfer: x-workspace-size */
        uint8_t want[32];               /* transfer: x-workspace-sha256 */
        mode_t mode;                    /* permission bits of the new file */
        WsWriter *writer;
        int ws_fd, lease_fd;
        int status;                     /* the first refusal's status (400, 409, 500), 0 = none */
        char *message;
        uint8_t sha256[32];
        uint64_t size;
        sd_event_source *retry;
        ThreadTask *quota_task;         /* their quota's sum of the workspace, under the lease */
        uint64_t usage;                 /* ... its result: bytes of the regular files */
        int64_t existing;               /* ... and of the file at the path (-1: none) */
        ChildTask *task;
        bool busy;                      /* holds a manager_busy_ref() from the commit's wait on */
} Mutation;

static Mutation *mutation_free(Mutation *x) {
        if (!x)
                return NULL;
        x->retry = sd_event_source_disable_unref(x->retry);
        x->quota_task = thread_task_free(x->quota_task);
        x->task = child_task_free(x->task);
        ws_writer_free(x->writer);      /* aborts what was not committed */
        safe_close(x->lease_fd);
        safe_close(x->ws_fd);
        if (x->busy)
                manager_busy_unref(x->m);
        free(x->path);
        free(x->message);
        return mfree(x);
}
SR_DEFINE_FREE_FUNC(Mutation *, mutation_free);

static void on_mutation_gone(HttpRequest *req, void *userdata) {
        Mutation *x = userdata;

        /* The client went away. A snapshot under way finishes (the file is in place already and
         * must reach the store); before the commit nothing of the upload stays. */
        x->req = NULL;
        if (!x->task && !x->quota_task)
                mutation_free(x);
}

static void mutation_refuse(Mutation *x, unsigned status, const char *fmt, ...) _printf_(3, 4);
static void mutation_refuse(Mutation *x, unsigned status, const char *fmt, ...) {
        va_list ap;

        if (x->status != 0)
                return;
        x->status = status;
        va_start(ap, fmt);
        if (vasprintf(&x->message, fmt, ap) < 0)
                x->message = NULL;
        va_end(ap);
        /* Drop what was written so far at once; the rest of the body is read and discarded. */
        x->writer = ws_writer_free(x->writer);
}

static int on_body(HttpRequest *req, const void *data, size_t size, int error, void *userdata) {
        Mutation *x = userdata;
        int r;

        if (x->status != 0)
                return 0;               /* refused already: keep reading, so the answer arrives */
        if (x->kind == MUTATION_TRANSFER && size > x->declared - ws_writer_written(x->writer)) {
                mutation_refuse(x, 400, "Remote workspace transfer exceeds its declared size of %" PRIu64 " bytes",
                                x->declared);
                return 0;
        }
        r = ws_writer_write(x->writer, data, size);
        if (r == -EFBIG && x->kind == MUTATION_PUT)
                /* Their words for a body past the cap of a PUT (their maxWorkspaceBytes). */
                mutation_refuse(x, 400, "Request body exceeds the %" PRIu64 " byte limit", x->max);
        else if (r == -EFBIG)
                mutation_refuse(x, 400, "Remote workspace file exceeds %" PRIu64 " bytes", x->max);
        else if (r < 0)
                mutation_refuse(x, 400, "Writing the remote workspace file failed: %s", strerror(-r));
        return 0;
}

static uint64_t limit_or_max(uint64_t v) {
        return v == 0 ? UINT64_MAX : v;
}

static int hex_decode32(const char *s, uint8_t ret[32]) {
        if (!s || strlen(s) != 64)
                return -EINVAL;
        for (size_t i = 0; i < 32; i++) {
                int hi, lo;

                hi = s[2 * i] >= '0' && s[2 * i] <= '9' ? s[2 * i] - '0' :
                     s[2 * i] >= 'a' && s[2 * i] <= 'f' ? s[2 * i] - 'a' + 10 : -1;
                lo = s[2 * i + 1] >= '0' && s[2 * i + 1] <= '9' ? s[2 * i + 1] - '0' :
                     s[2 * i + 1] >= 'a' && s[2 * i + 1] <= 'f' ? s[2 * i + 1] - 'a' + 10 : -1;
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                ret[i] = (uint8_t) (hi << 4 | lo);
        }
        return 0;
}

static void hex_encode32(const uint8_t d[32], char ret[static 65]) {
        for (size_t i = 0; i < 32; i++)
                (void) snprintf(ret + 2 * i, 3, "%02x", d[i]);
}

static Mutation *mutation_new(Manager *m, HttpRequest *req, MutationKind kind) {
        Mutation *x = calloc(1, sizeof(*x));
        uint64_t rnd = 0;

        if (!x)
                return NULL;
        *x = (Mutation) { .m = m, .req = req, .kind = kind, .ws_fd = -EBADF, .lease_fd = -EBADF, .mode = 0600 };
        /* Only for a unique name: without random bytes (never, once booted) the time alone. */
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t) sizeof(rnd))
                rnd = 0;
        (void) snprintf(x->exec_id, sizeof(x->exec_id), "sd-%s-%" PRIu64 "-%016" PRIx64,
                        kind == MUTATION_CLEAR ? "clear" : "upload", now_usec(CLOCK_REALTIME) / 1000, rnd);
        return x;
}

/* Headers in: check what they say and open the writer; any refusal waits for the end of the
 * body (their client streams it and must still read the answer, notes' appendix). */
static uint64_t put_begin(Manager *m, HttpRequest *req, MutationKind kind) {
        _cleanup_(mutation_freep) Mutation *x = NULL;
        const char *key = http_request_query(req, "workspace"), *path = http_request_query(req, "path");
        const char *conflict = http_request_query(req, "conflict");
        int r;

        x = mutation_new(m, req, kind);
        if (!x) {
                sdp_reply_error(req, 500, "Out of memory");
                return 0;
        }
        x->max = limit_or_max(m->quota.max_upload_file_bytes);
        /* Their PUT body is capped by the runner's maxWorkspaceBytes (0: none, as /health says
         * it): the smaller of that and MaxUploadFileBytes applies. */
        if (kind == MUTATION_PUT && m->quota.max_workspace_bytes > 0)
                x->max = MIN(x->max, m->quota.max_workspace_bytes);
        if (!key || !sdp_runner_workspace_key_valid(key))
                mutation_refuse(x, 400, key ? "Invalid runner workspace key" : "workspace is required");
        else if (!sdp_path_valid(path))
                mutation_refuse(x, 400, "Invalid remote workspace path");
        else if (conflict && !streq(conflict, "reject") && !streq(conflict, "overwrite"))
                mutation_refuse(x, 400, "conflict must be reject or overwrite");
        x->replace = conflict && streq(conflict, "overwrite");

        if (kind == MUTATION_TRANSFER && x->status == 0) {
                const char *size = http_request_header(req, "x-workspace-size");
                const char *exec = http_request_header(req, "x-workspace-executable");
                uint64_t e = 0;

                if (sdp_timestamp_parse(size, &x->declared) < 0)
                        mutation_refuse(x, 400, "x-workspace-size must be the file's size in bytes");
                else if (hex_decode32(http_request_header(req, "x-workspace-sha256"), x->want) < 0)
                        mutation_refuse(x, 400, "x-workspace-sha256 must be 64 lowercase hex digits");
                else if (exec && (sdp_timestamp_parse(exec, &e) < 0 || (e & ~(uint64_t) 0111) != 0))
                        mutation_refuse(x, 400, "x-workspace-executable must be the file's mode bits within 0o111");
                else if (m->quota.max_workspace_bytes > 0 && x->declared > m->quota.max_workspace_bytes)
                        mutation_refuse(x, 400, "Remote workspace exceeds its execution quota");
                else if (x->declared > x->max)
                        mutation_refuse(x, 400, "Remote workspace file exceeds %" PRIu64 " bytes", x->max);
                /* Executable for whom it says, readable and writable for the owner, as uploads are. */
                x->mode = 0600 | (e & 0100 ? 0100 : 0) | (e & 0010 ? 0010 : 0) | (e & 0001 ? 0001 : 0);
        }
        if (kind == MUTATION_PUT && x->status == 0) {
                const char *cl = http_request_header(req, "Content-Length");
                uint64_t n;

                /* Declared too large: refused before anything is written (the body is still read,
                 * so that the answer arrives). */
                if (cl && sdp_timestamp_parse(cl, &n) >= 0 && n > x->max)
                        mutation_refuse(x, 400, "Request body exceeds the %" PRIu64 " byte limit", x->max);
        }
        if (x->status == 0) {
                sdp_workspace_for_key(key, x->ws);
                x->path = strdup(path);
                x->ws_fd = workspace_open(m->workspaces_fd, x->ws);
                if (!x->path || x->ws_fd < 0)
                        mutation_refuse(x, 500, "The remote workspace cannot be opened");
        }
        if (x->status == 0) {
                r = ws_writer_begin(x->ws_fd, x->path, x->max, true, &x->writer);
                if (r >= 0 && x->mode != 0600)
                        r = ws_writer_chmod(x->writer, x->mode);
                if (r == -EISDIR || r == -ENOTDIR || r == -EEXIST)
                        mutation_refuse(x, 400, "Remote workspace path conflicts with a directory or file");
                else if (r < 0)
                        mutation_refuse(x, 400, "Remote workspace path is not writable: %s", strerror(-r));
        }
        http_request_set_userdata(req, x, on_mutation_gone);
        http_request_set_body_sink(req, on_body, x);
        x = NULL;
        /* The sink bounds the file (and, refused, discards the rest): no cap of the transport's,
         * whose answer would not be theirs. The request deadline bounds the time. */
        return UINT64_MAX;
}

uint64_t sdp_rw_put_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens) {
        return put_begin(m, req, MUTATION_PUT);
}

uint64_t sdp_rw_transfer_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens) {
        return put_begin(m, req, MUTATION_TRANSFER);
}

static void mutation_answer(Mutation *x, int error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char hex[65];

        if (!x->req)
                return;
        http_request_set_userdata(x->req, NULL, NULL);
        if (x->status != 0)
                return sdp_reply_error(x->req, x->status, "%s", x->message ?: "Out of memory");
        if (error < 0)
                return sdp_reply_error(x->req, 500, "The remote workspace changed but could not be committed: %s",
                                       strerror(-error));
        o = json_object_new_object();
        if (!o)
                return sdp_reply_error(x->req, 500, "Out of memory");
        if (x->kind == MUTATION_CLEAR) {
                json_object_object_add(o, "deleted", json_object_new_boolean(true));
                return sdp_reply_json(x->req, 200, o);
        }
        json_object_object_add(o, "path", json_object_new_string(x->path));
        json_object_object_add(o, "size", json_new_u64(x->size));
        if (x->kind == MUTATION_TRANSFER) {
                hex_encode32(x->sha256, hex);
                json_object_object_add(o, "sha256", json_object_new_string(hex));
        }
        sdp_reply_json(x->req, 201, o);
}

static int snapshot_child(int out_fd, void *userdata) {
        Mutation *x = userdata;
        _cleanup_free_ char *digest = NULL;
        int r;

        r = cas_snapshot(x->m->cas, x->ws_fd, x->ws, x->exec_id, now_usec(CLOCK_REALTIME) / 1000, &digest, NULL);
        if (r < 0)
                return r;
        return loop_write(out_fd, digest, strlen(digest));
}

static void on_snapshot_done(ChildTask *t, int error, const char *out, void *userdata) {
        Mutation *x = userdata;

        x->task = child_task_free(x->task);
        if (error < 0)
                log_warning_errno(error, "Failed to snapshot workspace '%s' after a remote workspace change: %m", x->ws);
        else {
                if (out && strneq(out, "sha256:", 7))
                        (void) workspace_heads_publish(&x->m->exec.heads, x->ws, x->exec_id, out);
                else
                        workspace_heads_forget(&x->m->exec.heads, x->ws);
                snapshot_gc_published(x->m->gc);
        }
        mutation_answer(x, error);
        mutation_free(x);
}

/* Empty the workspace, keeping its root (DELETE /remote-workspace). */
static int clear_workspace(int ws_fd) {
        _cleanup_(dir_names_done) DirNames names = {};
        int r;

        r = dir_read_names(ws_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++) {
                /* Files and symlinks (never followed) go at once; directories with all below. */
                if (unlinkat(ws_fd, names.v[i], 0) >= 0 || errno == ENOENT)
                        continue;
                if (errno != EISDIR && errno != EPERM)
                        return negative_errno();
                r = rm_rf_at(ws_fd, names.v[i]);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        return 0;
}

/* Under the lease: publish (or clear), then commit the workspace to the store in a child. */
static void mutation_commit(Mutation *x) {
        int r;

        if (x->kind == MUTATION_CLEAR)
                r = clear_workspace(x->ws_fd);
        else if (x->replace)
                r = ws_writer_commit(x->writer, x->sha256);
        else
                r = ws_writer_commit_noreplace(x->writer, x->sha256);
        if (r == -EEXIST && x->kind == MUTATION_PUT)
                mutation_refuse(x, 409, "Remote workspace file already exists");
        else if (r == -EEXIST)
                mutation_refuse(x, 400, "Remote workspace file already exists");
        else if (r == -EISDIR || r == -ENOTDIR)
                mutation_refuse(x, 400, "Remote workspace path conflicts with a directory or file");
        else if (r < 0)
                mutation_refuse(x, 400, "The remote workspace change failed: %s", strerror(-r));
        if (x->status != 0) {
                mutation_answer(x, 0);
                mutation_free(x);
                return;
        }
        r = child_task_start(x->m->event, snapshot_child, on_snapshot_done, x, &x->task);
        if (r < 0) {
                mutation_answer(x, r);
                mutation_free(x);
        }
}

static int quota_work(void *userdata, char **ret_out) {
        Mutation *x = userdata;

        return sdp_rw_usage(x->ws_fd, x->path, &x->usage, &x->existing);
}

static void on_quota_done(ThreadTask *t, int error, const char *out, void *userdata) {
        Mutation *x = userdata;
        uint64_t max = x->m->quota.max_workspace_bytes, replaced;

        x->quota_task = thread_task_free(x->quota_task);
        if (!x->req) {
                mutation_free(x);       /* gone meanwhile: nothing is published */
                return;
        }
        /* Their check (notes §10): the files' sizes, less the file replaced, plus the new one. A
         * reject onto an existing file is left to the commit (their 409 comes first). */
        replaced = x->existing > 0 ? (uint64_t) x->existing : 0;
        if (error < 0)
                mutation_refuse(x, 400, "The remote workspace's size cannot be measured: %s", strerror(-error));
        else if ((x->replace || x->existing < 0) && x->usage - MIN(replaced, x->usage) + x->size > max)
                mutation_refuse(x, 400, "Remote workspace exceeds its execution quota");
        if (x->status != 0) {
                mutation_answer(x, 0);
                mutation_free(x);
                return;
        }
        mutation_commit(x);
}

/* Under the lease: their quota (in a thread: it walks the workspace), then the commit. */
static void mutation_check_quota(Mutation *x) {
        int r;

        if (x->kind == MUTATION_CLEAR || x->m->quota.max_workspace_bytes == 0)
                return mutation_commit(x);
        r = thread_task_start(x->m->event, quota_work, x, on_quota_done, x, &x->quota_task);
        if (r < 0) {
                mutation_refuse(x, 500, "The quota check could not be started: %s", strerror(-r));
                mutation_answer(x, 0);
                mutation_free(x);
        }
}

static int on_lease(sd_event_source *s, uint64_t usec, void *userdata) {
        Mutation *x = userdata;
        int r;

        r = workspace_lease_try(x->ws_fd);
        if (r == -EWOULDBLOCK) {
                /* A run (or another upload) holds the workspace: the commit waits for it. */
                (void) sd_event_source_set_time_relative(s, LEASE_RETRY_USEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        x->retry = sd_event_source_disable_unref(x->retry);
        if (r < 0) {
                mutation_refuse(x, 500, "The workspace lease cannot be taken: %s", strerror(-r));
                mutation_answer(x, 0);
                mutation_free(x);
                return 0;
        }
        x->lease_fd = r;
        mutation_check_quota(x);
        return 0;
}

static void mutation_wait_lease(Mutation *x) {
        int r;

        /* The daemon does not idle-exit (or stop) under a commit; a body still arriving is the
         * connection's, as on our own API. */
        manager_busy_ref(x->m);
        x->busy = true;

        r = sd_event_add_time_relative(x->m->event, &x->retry, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_lease, x);
        if (r < 0) {
                mutation_refuse(x, 500, "Out of memory");
                mutation_answer(x, 0);
                mutation_free(x);
                return;
        }
        http_request_suspend(x->req);
}

void sdp_rw_put(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        Mutation *x = http_request_get_userdata(req);

        if (!x)
                return sdp_reply_error(req, 500, "Upload state lost");
        if (x->status == 0 && http_request_sink_error(req) < 0)
                mutation_refuse(x, 400, "Remote workspace upload failed");
        if (x->status == 0) {
                x->size = ws_writer_written(x->writer);
                if (x->kind == MUTATION_TRANSFER) {
                        uint8_t got[32];

                        /* Verified before anything is published: a mismatch leaves no file. */
                        ws_writer_sha256(x->writer, got);
                        if (x->size != x->declared)
                                mutation_refuse(x, 400, "Remote workspace transfer size mismatch: %" PRIu64
                                                " bytes received, %" PRIu64 " declared", x->size, x->declared);
                        else if (memcmp(got, x->want, sizeof(got)) != 0)
                                mutation_refuse(x, 400, "Remote workspace transfer hash mismatch");
                }
        }
        if (x->status != 0) {
                mutation_answer(x, 0);
                mutation_free(x);
                return;
        }
        mutation_wait_lease(x);
}

void sdp_rw_delete(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(mutation_freep) Mutation *x = NULL;
        char ws[129];

        if (!sdp_workspace_param(req, http_request_query(req, "workspace"), ws))
                return;
        x = mutation_new(m, req, MUTATION_CLEAR);
        if (!x)
                return sdp_reply_error(req, 500, "Out of memory");
        memcpy(x->ws, ws, sizeof(ws));
        x->ws_fd = workspace_open(m->workspaces_fd, ws);
        if (x->ws_fd < 0)
                return sdp_reply_error(req, 500, "The remote workspace cannot be opened");
        http_request_set_userdata(req, x, on_mutation_gone);
        mutation_wait_lease(STEAL(x));
}
