/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's listings of a remote workspace (GET and POST
 * /remote-workspace/files, notes §10; docs/api.md 15.8), and the size their quota check of an
 * upload adds up (sdp_rw_usage()). A listing walks the whole tree, so it runs in a thread of its
 * own (thread-task.h) and is answered from the loop: other clients are served meanwhile. The
 * thread owns its copies (the key's workspace fd, the selected paths); the loop only reads its
 * result once it is joined. May call core/, workspace/ and the http/ transport.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-internal.h"
#include "core/manager.h"
#include "http/http-server.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/thread-task.h"
#include "workspace/ws-files.h"

/* Files a listing walks at most (and directory levels); a usage sum has no file cap of its own. */
#define LIST_MAX_FILES 100000
#define USAGE_MAX_FILES 10000000
#define LIST_MAX_DEPTH 256

typedef struct Listing {
        json_object *files;             /* NULL: only add up the sizes */
        size_t n, max;
        uint64_t bytes;
} Listing;

static int list_add(Listing *l, const char *path, uint64_t size, int64_t mtime_usec) {
        json_object *e;
        char when[32];

        if (++l->n > l->max)
                return -E2BIG;
        l->bytes += size;
        if (!l->files)
                return 0;
        e = json_object_new_object();
        if (!e)
                return -ENOMEM;
        json_object_object_add(e, "path", json_object_new_string(path));
        json_object_object_add(e, "size", json_new_u64(size));
        json_object_object_add(e, "modifiedAt", json_object_new_string(
                                       sdp_iso_time(mtime_usec > 0 ? (uint64_t) mtime_usec / 1000 : 0, when)));
        return json_object_array_add(l->files, e) < 0 ? -ENOMEM : 0;
}

/* The regular files below the directory @dir ("" = the root), symlinks and others skipped. */
static int list_walk(Listing *l, int ws_fd, const char *dir, unsigned depth) {
        WsEntry *entries = NULL;
        size_t n = 0;
        int r;

        if (depth > LIST_MAX_DEPTH)
                return -E2BIG;
        r = ws_list_dir(ws_fd, dir, &entries, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = NULL;

                if (!entries[i].name_valid ||
                    (entries[i].type != WS_ENTRY_FILE && entries[i].type != WS_ENTRY_DIR))
                        continue;
                if (asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", entries[i].name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (entries[i].type == WS_ENTRY_FILE)
                        r = list_add(l, p, entries[i].size, entries[i].mtime_usec);
                else {
                        r = list_walk(l, ws_fd, p, depth + 1);
                        /* Replaced under the walk by the sandbox, or not ours to read: skipped. */
                        if ((r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EXDEV || r == -EACCES))
                                r = 0;
                }
        }
        ws_entries_free(entries, n);
        return r;
}

/* One selected path: a file, or every file below a directory; absent ones are left out. */
static int list_select(Listing *l, int ws_fd, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = ws_open_beneath(ws_fd, path, O_PATH);
        if (fd < 0)
                return fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EXDEV ? 0 : fd;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISREG(st.st_mode))
                return list_add(l, path, (uint64_t) st.st_size,
                                (int64_t) st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000);
        if (S_ISDIR(st.st_mode)) {
                int r = list_walk(l, ws_fd, path, 1);
                return r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EXDEV ? 0 : r;
        }
        return 0;
}

int sdp_rw_usage(int ws_fd, const char *path, uint64_t *ret_bytes, int64_t *ret_existing) {
        Listing l = { .max = USAGE_MAX_FILES };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        /* Their sum: the sizes of the regular files, symlinks and others left out (notes §10). */
        r = list_walk(&l, ws_fd, "", 0);
        if (r < 0)
                return r;
        *ret_bytes = l.bytes;
        *ret_existing = -1;
        fd = ws_open_beneath(ws_fd, path, O_PATH);
        if (fd >= 0 && fstat(fd, &st) >= 0)
                *ret_existing = S_ISREG(st.st_mode) ? (int64_t) st.st_size : 0;
        return 0;
}

static int compare_paths(const void *a, const void *b) {
        json_object *x = *(json_object *const *) a, *y = *(json_object *const *) b, *px, *py;

        if (!json_object_object_get_ex(x, "path", &px) || !json_object_object_get_ex(y, "path", &py))
                return 0;
        return strcmp(json_object_get_string(px), json_object_get_string(py));
}

/* Sorted by path (bytewise), each path once. Return: a new array, NULL on OOM. */
static json_object *sorted_unique(json_object *files) {
        json_object *out = json_object_new_array();
        const char *last = NULL;

        if (!out)
                return NULL;
        json_object_array_sort(files, compare_paths);
        for (size_t i = 0; i < json_object_array_length(files); i++) {
                json_object *e = json_object_array_get_idx(files, i), *p;

                if (!json_object_object_get_ex(e, "path", &p))
                        continue;
                if (last && streq(last, json_object_get_string(p)))
                        continue;
                last = json_object_get_string(p);
                json_object_array_add(out, json_object_get(e));
        }
        return out;
}

/* One listing under way: the thread's copies, then its result. */
typedef struct ListJob {
        Manager *m;
        HttpRequest *req;               /* NULL once the client is gone */
        int ws_fd;                      /* -ENOENT: a workspace never used */
        json_object *paths;             /* the selection (a copy), or NULL: everything */
        json_object *out;               /* the thread's answer */
        ThreadTask *task;
} ListJob;

static ListJob *list_job_free(ListJob *j) {
        if (!j)
                return NULL;
        j->task = thread_task_free(j->task);
        safe_close(j->ws_fd);
        json_object_put(j->paths);
        json_object_put(j->out);
        manager_busy_unref(j->m);
        return mfree(j);
}

static int list_work(void *userdata, char **ret_out) {
        ListJob *j = userdata;
        _cleanup_(json_object_putp) json_object *files = json_object_new_array();
        Listing l = { .files = files, .max = LIST_MAX_FILES };
        int r = 0;

        if (!files)
                return -ENOMEM;
        if (j->ws_fd >= 0) {
                if (!j->paths)
                        r = list_walk(&l, j->ws_fd, "", 0);
                for (size_t i = 0; j->paths && r >= 0 && i < json_object_array_length(j->paths); i++)
                        r = list_select(&l, j->ws_fd, json_object_get_string(json_object_array_get_idx(j->paths, i)));
        } else if (j->ws_fd != -ENOENT)
                r = j->ws_fd;
        if (r < 0)
                return r;
        j->out = sorted_unique(files);
        return j->out ? 0 : -ENOMEM;
}

static void on_list_done(ThreadTask *t, int error, const char *out, void *userdata) {
        ListJob *j = userdata;

        if (j->req) {
                http_request_set_userdata(j->req, NULL, NULL);
                if (error == -E2BIG)
                        sdp_reply_error(j->req, 400, "The remote workspace holds more than %d files", LIST_MAX_FILES);
                else if (error == -ENOMEM)
                        sdp_reply_error(j->req, 500, "Out of memory");
                else if (error < 0)
                        sdp_reply_error(j->req, 400, "The remote workspace cannot be listed: %s", strerror(-error));
                else
                        sdp_reply_json(j->req, 200, j->out);
        }
        j->task = NULL;                 /* thread_task_free() of a finished task from its done: not here */
        thread_task_free(t);
        list_job_free(j);
}

static void on_list_gone(HttpRequest *req, void *userdata) {
        ListJob *j = userdata;

        j->req = NULL;                  /* the walk finishes in its thread, then nothing is sent */
}

/* The selection of a POST body (NULL: none). Return: false once the 400 is sent. */
static bool paths_check(HttpRequest *req, json_object *body, json_object **ret) {
        json_object *paths;

        *ret = NULL;
        if (!json_object_object_get_ex(body, "paths", &paths) || json_object_is_type(paths, json_type_null))
                return true;
        if (!json_object_is_type(paths, json_type_array) || json_object_array_length(paths) > SDP_SELECT_MAX) {
                sdp_reply_error(req, 400, "paths must be an array of at most %d paths", SDP_SELECT_MAX);
                return false;
        }
        for (size_t i = 0; i < json_object_array_length(paths); i++) {
                json_object *p = json_object_array_get_idx(paths, i);

                if (!json_object_is_type(p, json_type_string) || !sdp_path_valid(json_object_get_string(p))) {
                        sdp_reply_error(req, 400, "Invalid remote workspace path");
                        return false;
                }
        }
        *ret = paths;
        return true;
}

void sdp_rw_files(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        json_object *v, *paths = NULL;
        const char *key;
        ListJob *j;
        char ws[129];
        int r;

        if (body) {
                key = json_object_object_get_ex(body, "workspace", &v) && json_object_is_type(v, json_type_string) ?
                      json_object_get_string(v) : NULL;
                if (!paths_check(req, body, &paths))
                        return;
        } else
                key = http_request_query(req, "workspace");
        if (!sdp_workspace_param(req, key, ws))
                return;

        j = calloc(1, sizeof(*j));
        if (!j)
                return sdp_reply_error(req, 500, "Out of memory");
        manager_busy_ref(m);
        *j = (ListJob) { .m = m, .req = req, .ws_fd = -EBADF };
        /* A deep copy: the body is the dispatcher's, freed when this returns. */
        if (paths && json_object_deep_copy(paths, &j->paths, NULL) < 0) {
                list_job_free(j);
                return sdp_reply_error(req, 500, "Out of memory");
        }
        j->ws_fd = openat(m->workspaces_fd, ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (j->ws_fd < 0)
                j->ws_fd = negative_errno();
        r = thread_task_start(m->event, list_work, j, on_list_done, j, &j->task);
        if (r < 0) {
                list_job_free(j);
                return sdp_reply_error(req, 500, "The listing could not be started: %s", strerror(-r));
        }
        http_request_set_userdata(req, j, on_list_gone);
        http_request_suspend(req);
}
