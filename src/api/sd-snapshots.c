/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's workspace snapshots (notes §10; docs/api.md 15.6): POST
 * /remote-workspace/snapshots exports the last tree of the workspace committed to our snapshot
 * store (by an execution or an upload: it never waits for a running writer), optionally narrowed
 * to some paths, under a new UUID; GET /remote-workspace/snapshots/{uuid}/file serves its files'
 * exact bytes from the store. An export is a record file (<state>/sd-snapshots/<uuid>.json) and a
 * ref of its own in the store (workspace "sd-snapshot-<uuid>") that keeps its tree from the gc, so
 * it survives later writes, the workspace's deletion and restarts, until the retention of
 * [ScienceDiscovery] (ExportRetentionSec=, MaxExports=) removes it after a later export. May call core/, workspace/ and
 * the http/ transport.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-internal.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/child-task.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"
#include "workspace/ws-files.h"

#define SNAPSHOTS_DIR "sd-snapshots"
#define SNAPSHOT_MAX_FILES 100000
#define SNAPSHOT_RECORD_MAX (UINT64_C(64) << 20)

typedef struct Export {
        Manager *m;
        HttpRequest *req;               /* NULL once the client is gone */
        char ws[129];
        char *key;                      /* their workspace key, as sent */
        json_object *paths;             /* the selection, or NULL: everything */
        char id[37];                    /* the new UUID */
        ChildTask *task;
} Export;

static Export *export_free(Export *x) {
        if (!x)
                return NULL;
        x->task = child_task_free(x->task);
        json_object_put(x->paths);
        manager_busy_unref(x->m);
        free(x->key);
        return mfree(x);
}

static void on_export_gone(HttpRequest *req, void *userdata) {
        Export *x = userdata;

        x->req = NULL;                  /* the export completes anyway (it is cheap and durable) */
}

static bool uuid_valid(const char *s, size_t n) {
        if (n != 36)
                return false;
        for (size_t i = 0; i < 36; i++)
                if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' :
                    !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static int uuid_new(char ret[static 37]) {
        uint8_t b[16];

        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
                return -EIO;
        b[6] = (b[6] & 0x0f) | 0x40;    /* version 4 */
        b[8] = (b[8] & 0x3f) | 0x80;    /* RFC 4122 variant */
        (void) snprintf(ret, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                        b[14], b[15]);
        return 0;
}

/* Is @path selected: equal to a path of @paths or below one of them? (NULL: everything.) */
static bool selected(json_object *paths, const char *path) {
        if (!paths)
                return true;
        for (size_t i = 0; i < json_object_array_length(paths); i++) {
                const char *p = json_object_get_string(json_object_array_get_idx(paths, i));
                size_t l = strlen(p);

                if (strneq(path, p, l) && (path[l] == '\0' || path[l] == '/'))
                        return true;
        }
        return false;
}

/* The regular files of tree @tree below @dir, in path order, into @files. */
static int tree_walk(Cas *cas, const char *tree, const char *dir, json_object *paths, json_object *files,
                     unsigned depth) {
        CasEntry *entries = NULL;
        size_t n = 0;
        int r;

        if (depth > CAS_DEFAULT_MAX_DEPTH)
                return -E2BIG;
        r = cas_tree_list(cas, tree, dir, &entries, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = NULL;
                const CasEntry *c = &entries[i];
                json_object *e;

                if (c->type == DT_LNK)
                        continue;
                if (asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", c->name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                /* Names their paths cannot carry (not UTF-8, control bytes) are left out. */
                if (!sdp_path_valid(p))
                        continue;
                if (c->type == DT_DIR) {
                        r = tree_walk(cas, tree, p, paths, files, depth + 1);
                        continue;
                }
                if (!selected(paths, p))
                        continue;
                if (json_object_array_length(files) >= SNAPSHOT_MAX_FILES) {
                        r = -E2BIG;
                        break;
                }
                e = json_object_new_object();
                if (!e) {
                        r = -ENOMEM;
                        break;
                }
                json_object_object_add(e, "path", json_object_new_string(p));
                json_object_object_add(e, "size", json_new_u64(c->size));
                json_object_object_add(e, "sha256", json_object_new_string(c->digest + strlen("sha256:")));
                json_object_object_add(e, "executable", json_object_new_int((int) (c->mode & 0111)));
                json_object_array_add(files, e);
        }
        cas_entries_free(entries, n);
        return r;
}

static int snapshots_dir_open(Manager *m, bool create) {
        _cleanup_free_ char *p = NULL;
        int fd;

        if (asprintf(&p, "%s/" SNAPSHOTS_DIR, m->state_dir) < 0)
                return -ENOMEM;
        if (create && mkdir(p, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

typedef struct ExportAge {
        char id[37];
        int64_t mtime;                  /* the record's (ns): when it was captured */
} ExportAge;

static int compare_newest_first(const void *a, const void *b) {
        const ExportAge *x = a, *y = b;

        return x->mtime != y->mtime ? (x->mtime < y->mtime ? 1 : -1) : strcmp(y->id, x->id);
}

/* Their runner keeps exports forever and has no route to delete one (notes §10): ours go after
 * [ScienceDiscovery] ExportRetentionSec= (by the record's time), and the oldest beyond
 * MaxExports=, never the export @keep just taken. The record goes first (a GET then finds
 * nothing), then the ref that held its tree (the next gc frees what nothing else uses). */
static void exports_prune(Manager *m, int dfd, const char *keep) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_free_ ExportAge *v = NULL;
        int64_t now = (int64_t) now_usec(CLOCK_REALTIME) * 1000;
        size_t n = 0;

        if (dir_read_names(dfd, NULL, 0, &names) < 0)
                return;
        v = calloc(names.n + 1, sizeof(*v));
        if (!v)
                return;
        for (size_t i = 0; i < names.n; i++) {
                size_t l = strlen(names.v[i]);
                struct stat st;

                if (l != 36 + 5 || !streq(names.v[i] + 36, ".json") || !uuid_valid(names.v[i], 36) ||
                    fstatat(dfd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                memcpy(v[n].id, names.v[i], 36);
                v[n++].mtime = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        qsort(v, n, sizeof(*v), compare_newest_first);
        for (size_t i = 0, kept = 0; i < n; i++) {
                uint64_t age = now > v[i].mtime ? (uint64_t) (now - v[i].mtime) : 0;
                char name[48], pin[64];

                if (streq(v[i].id, keep) ||
                    ((m->config.sd_max_exports == 0 || kept < m->config.sd_max_exports) &&
                     (m->config.sd_export_retention_usec == 0 ||
                      age / 1000 < m->config.sd_export_retention_usec))) {
                        kept++;
                        continue;
                }
                (void) snprintf(name, sizeof(name), "%s.json", v[i].id);
                (void) snprintf(pin, sizeof(pin), "sd-snapshot-%s", v[i].id);
                if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
                        continue;
                for (unsigned busy = 0; cas_refs_remove(m->cas, pin) == -EBUSY && busy < 100; busy++)
                        (void) usleep(100 * 1000);
        }
}

/* In a child (the tree walk may be long, the store lock may wait for a gc): pin the tree, write
 * the record. */
static int export_child(int out_fd, void *userdata) {
        Export *x = userdata;
        Cas *cas = x->m->cas;
        _cleanup_(json_object_putp) json_object *rec = NULL;
        _cleanup_close_ int dfd = -EBADF;
        char pin[64], name[48], when[32];
        int r = -ENOENT;

        (void) snprintf(pin, sizeof(pin), "sd-snapshot-%s", x->id);
        /* A gc may drop the newest ref between the listing and the pin (take the next newest),
         * or hold the store a while (wait for it, up to 10 s: this is a child, not the loop). */
        for (unsigned attempt = 0, busy = 0; attempt < 5 && busy < 100;) {
                json_object *files = json_object_new_array();
                CasRef *refs = NULL;
                size_t n = 0;
                uint64_t captured = now_usec(CLOCK_REALTIME) / 1000;

                json_object_put(rec);
                rec = json_object_new_object();
                if (!rec || !files) {
                        json_object_put(files);
                        return -ENOMEM;
                }
                json_object_object_add(rec, "id", json_object_new_string(x->id));
                json_object_object_add(rec, "workspace", json_object_new_string(x->key));
                json_object_object_add(rec, "workspaceId", json_object_new_string(x->ws));
                json_object_object_add(rec, "capturedAt", json_object_new_string(sdp_iso_time(captured, when)));
                json_object_object_add(rec, "files", files);
                r = cas_list_refs(cas, x->ws, &refs, &n);
                if (r == -ENOENT || (r >= 0 && n == 0)) {
                        /* Nothing committed yet: an empty snapshot. */
                        cas_refs_free(refs, n);
                        r = 0;
                        break;
                }
                if (r < 0)
                        return r;
                r = tree_walk(cas, refs[0].tree, "", x->paths, files, 0);
                if (r >= 0)
                        r = cas_ref_add(cas, pin, x->ws, refs[0].tree, captured, refs[0].bytes);
                if (r >= 0)
                        json_object_object_add(rec, "tree", json_object_new_string(refs[0].tree));
                cas_refs_free(refs, n);
                if (r == -EBUSY) {
                        busy++;
                        (void) usleep(100 * 1000);
                        continue;
                }
                if (r != -ENOENT && r != -EIO)
                        break;
                attempt++;
        }
        if (r < 0)
                return r;
        dfd = snapshots_dir_open(x->m, true);
        if (dfd < 0)
                return dfd;
        (void) snprintf(name, sizeof(name), "%s.json", x->id);
        r = json_write_file_atomic_at(dfd, name, rec, JSON_C_TO_STRING_PLAIN, 0600);
        if (r >= 0)
                exports_prune(x->m, dfd, x->id);
        return r;
}

static int record_read(Manager *m, const char *id, json_object **ret) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int dfd = -EBADF;
        char name[48];
        size_t size;
        const char *why;
        int r;

        dfd = snapshots_dir_open(m, false);
        if (dfd < 0)
                return dfd;
        (void) snprintf(name, sizeof(name), "%s.json", id);
        r = read_file_at(dfd, name, SNAPSHOT_RECORD_MAX, &text, &size);
        if (r < 0)
                return r;
        r = http_json_parse(text, size, ret, &why);
        return r < 0 ? -EIO : 0;
}

static void on_export_done(ChildTask *t, int error, const char *out, void *userdata) {
        Export *x = userdata;
        _cleanup_(json_object_putp) json_object *rec = NULL;
        int r = error;

        x->task = child_task_free(x->task);
        if (r >= 0)
                r = record_read(x->m, x->id, &rec);
        if (r < 0)
                log_warning_errno(r, "Failed to export a snapshot of workspace '%s': %m", x->ws);
        if (x->req) {
                http_request_set_userdata(x->req, NULL, NULL);
                if (r == -E2BIG)
                        sdp_reply_error(x->req, 400, "The snapshot holds more than %d files", SNAPSHOT_MAX_FILES);
                else if (r < 0)
                        sdp_reply_error(x->req, 500, "The snapshot could not be taken: %s", strerror(-r));
                else {
                        /* Their RemoteWorkspaceSnapshot: the record without our own fields. */
                        json_object_object_del(rec, "workspaceId");
                        json_object_object_del(rec, "tree");
                        sdp_reply_json(x->req, 201, rec);
                }
        }
        export_free(x);
}

void sdp_rw_snapshot_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        Export *x;
        json_object *v, *paths = NULL;
        const char *key;
        char ws[129];
        int r;

        key = json_object_object_get_ex(body, "workspace", &v) && json_object_is_type(v, json_type_string) ?
              json_object_get_string(v) : NULL;
        if (!sdp_workspace_param(req, key, ws))
                return;
        if (json_object_object_get_ex(body, "paths", &paths) && !json_object_is_type(paths, json_type_null)) {
                if (!json_object_is_type(paths, json_type_array) || json_object_array_length(paths) > SDP_SELECT_MAX)
                        return sdp_reply_error(req, 400, "paths must be an array of at most %d paths", SDP_SELECT_MAX);
                for (size_t i = 0; i < json_object_array_length(paths); i++) {
                        json_object *p = json_object_array_get_idx(paths, i);

                        if (!json_object_is_type(p, json_type_string) || !sdp_path_valid(json_object_get_string(p)))
                                return sdp_reply_error(req, 400, "Invalid remote workspace path");
                }
        } else
                paths = NULL;

        x = calloc(1, sizeof(*x));
        if (!x)
                return sdp_reply_error(req, 500, "Out of memory");
        *x = (Export) { .m = m, .req = req, .key = strdup(key), .paths = json_object_get(paths) };
        manager_busy_ref(m);
        memcpy(x->ws, ws, sizeof(ws));
        if (!x->key || uuid_new(x->id) < 0) {
                export_free(x);
                return sdp_reply_error(req, 500, "Out of memory");
        }
        r = child_task_start(m->event, export_child, on_export_done, x, &x->task);
        if (r < 0) {
                export_free(x);
                return sdp_reply_error(req, 500, "The snapshot could not be started: %s", strerror(-r));
        }
        http_request_set_userdata(req, x, on_export_gone);
        http_request_suspend(req);
}

/* The record's entry for @path, or NULL. */
static json_object *record_file(json_object *rec, const char *path) {
        json_object *files, *p;

        if (!json_object_object_get_ex(rec, "files", &files) || !json_object_is_type(files, json_type_array))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(files); i++) {
                json_object *e = json_object_array_get_idx(files, i);

                if (json_object_object_get_ex(e, "path", &p) && streq(json_object_get_string(p), path))
                        return e;
        }
        return NULL;
}

void sdp_rw_snapshot_file(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        static const char *const headers[] = { "Cache-Control", "no-store", NULL };
        _cleanup_(json_object_putp) json_object *rec = NULL;
        const char *path = http_request_query(req, "path");
        json_object *v, *tree;
        char ws[129], id[37], digest[72], hex[65];
        uint8_t raw[32];
        uint64_t size;
        int fd = -EBADF, r;

        if (!sdp_workspace_param(req, http_request_query(req, "workspace"), ws))
                return;
        if (!uuid_valid(params[0], lens[0]))
                return sdp_reply_error(req, 400, "Remote workspace snapshot not found");
        memcpy(id, params[0], 36);
        id[36] = '\0';
        if (!sdp_path_valid(path))
                return sdp_reply_error(req, 400, "Invalid remote workspace path");
        r = record_read(m, id, &rec);
        if (r < 0)
                return sdp_reply_error(req, 400, "Remote workspace snapshot not found");
        /* Another workspace's snapshot is not found either: the id alone opens nothing. */
        if (!json_object_object_get_ex(rec, "workspaceId", &v) || !streq(json_object_get_string(v), ws))
                return sdp_reply_error(req, 400, "Remote workspace snapshot not found");
        if (!record_file(rec, path))
                return sdp_reply_error(req, 400, "Remote workspace snapshot does not include this path");
        if (!json_object_object_get_ex(rec, "tree", &tree))
                return sdp_reply_error(req, 400, "Remote workspace snapshot does not include this path");
        r = cas_open_file(m->cas, json_object_get_string(tree), path, &fd, &size, digest);
        if (r < 0)
                return sdp_reply_error(req, 500, "The snapshot's file cannot be read: %s", strerror(-r));
        /* Verified: the bytes sent are those the store named (and the record listed). */
        r = ws_file_sha256(fd, size, raw);
        for (size_t i = 0; r >= 0 && i < 32; i++)
                (void) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        if (r < 0 || !streq(hex, digest + strlen("sha256:"))) {
                safe_close(fd);
                return sdp_reply_error(req, 500, "The snapshot's file fails verification");
        }
        r = http_request_reply_fd(req, 200, "application/octet-stream", fd, 0, size, headers);
        if (r < 0)
                sdp_reply_error(req, 500, "Out of memory");
}
