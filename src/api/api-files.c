/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace file endpoints: streamed uploads (raw and multipart), downloads with digests, listing.
 *
 * Uploads stream into unnamed temporary files in the target directories while the body arrives
 * (never held in memory); only the commit (link + rename into place) takes the workspace's write
 * lease, so a running execution delays it but does not block the transfer. Anything refused
 * (limits, names) leaves nothing behind. Reads never take the lease. May call core/, workspace/
 * and the http/ transport.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/utf8.h"
#include "workspace/workspace.h"
#include "workspace/ws-files.h"

#define LEASE_RETRY_USEC (50 * USEC_PER_MSEC)

typedef struct UploadPart {
        char *path;
        WsWriter *writer;
        uint8_t sha256[32];
} UploadPart;

typedef struct Upload {
        Manager *manager;
        HttpRequest *req;
        char ws[129];
        int ws_fd;
        int lease_fd;
        bool multipart;
        struct MHD_PostProcessor *pp;
        UploadPart *parts;
        size_t n_parts;
        uint64_t file_max;
        uint64_t request_max;
        uint64_t total;
        int error;                       /* first refusal: -EFBIG, -EINVAL, ... */
        char *error_message;
        sd_event_source *retry;
} Upload;

static uint64_t limit_or_max(uint64_t v) {
        return v == 0 ? UINT64_MAX : v;
}

static Upload *upload_free(Upload *u) {
        if (!u)
                return NULL;
        u->retry = sd_event_source_disable_unref(u->retry);
        if (u->pp)
                (void) MHD_destroy_post_processor(u->pp);
        for (size_t i = 0; i < u->n_parts; i++) {
                ws_writer_free(u->parts[i].writer);   /* aborts what was not committed */
                free(u->parts[i].path);
        }
        free(u->parts);
        free(u->error_message);
        safe_close(u->lease_fd);
        safe_close(u->ws_fd);
        free(u);
        return NULL;
}

static void on_upload_gone(HttpRequest *req, void *userdata) {
        /* The client went away: nothing of the upload stays. */
        upload_free(userdata);
}

static void upload_refuse(Upload *u, int error, const char *fmt, ...) _printf_(3, 4);
static void upload_refuse(Upload *u, int error, const char *fmt, ...) {
        va_list ap;

        if (u->error < 0)
                return;
        u->error = error;
        va_start(ap, fmt);
        if (vasprintf(&u->error_message, fmt, ap) < 0)
                u->error_message = NULL;
        va_end(ap);
        /* Drop what was written so far at once. */
        for (size_t i = 0; i < u->n_parts; i++)
                u->parts[i].writer = ws_writer_free(u->parts[i].writer);
}

/* The answer to a failed file operation on @path. Not http_error_from_errno(): as clients have
 * always seen it (docs/api.md section 8.2), -EEXIST is a conflict with a directory or file (400
 * invalid_request, not 409), links and special files are 403 forbidden whatever the errno, and
 * -ENOMEM is 500 internal (not 503). */
static void reply_path_error(HttpRequest *req, int r, const char *path) {
        switch (r) {
        case -EINVAL:
        case -ENAMETOOLONG:
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Invalid file name '%s' (relative, no '.' or '..', "
                                        "valid UTF-8, components ≤ 255 bytes).", path);
        case -ENOENT:
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such file or directory: '%s'.", path);
        case -ELOOP:
        case -EXDEV:
        case -EMLINK:
        case -EBADFD:
        case -EACCES:
        case -EPERM:
                return http_reply_error(req, HTTP_ERROR_FORBIDDEN, "'%s' is not a regular file reachable without "
                                        "following links.", path);
        case -EISDIR:
        case -ENOTDIR:
        case -ENOTEMPTY:
        case -EEXIST:
                return http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "'%s' conflicts with a directory or file.", path);
        case -EFBIG:
        case -E2BIG:
                return http_reply_error(req, HTTP_ERROR_PAYLOAD_TOO_LARGE, "'%s' exceeds the size limit.", path);
        case -EWOULDBLOCK:
                return http_reply_error(req, HTTP_ERROR_SANDBOX_UNAVAILABLE, "'%s' is in use; retry.", path);
        default:
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "'%s': %s.", path, strerror(-r));
        }
}

static int content_length(HttpRequest *req, uint64_t *ret) {
        const char *cl = http_request_header(req, "Content-Length");
        char *end = NULL;

        if (!cl)
                return 0;
        errno = 0;
        *ret = strtoull(cl, &end, 10);
        return errno == 0 && end && !*end ? 1 : -EINVAL;
}

/* ---- raw PUT --------------------------------------------------------------------------------- */

static int on_put_body(HttpRequest *req, const void *data, size_t size, int error, void *userdata) {
        Upload *u = userdata;
        int r;

        if (error < 0) {
                upload_refuse(u, error, "the file exceeds %" PRIu64 " bytes", u->file_max);
                return error;
        }
        r = ws_writer_write(u->parts[0].writer, data, size);
        if (r == -EFBIG)
                upload_refuse(u, r, "the file exceeds %" PRIu64 " bytes", u->file_max);
        else if (r < 0)
                upload_refuse(u, r, "writing '%s' failed: %s", u->parts[0].path, strerror(-r));
        return r;
}

static Upload *upload_new(Manager *m, HttpRequest *req, const char **params, size_t *lens) {
        Upload *u = calloc(1, sizeof(*u));

        if (!u)
                return NULL;
        *u = (Upload) {
                .manager = m, .req = req, .ws_fd = -EBADF, .lease_fd = -EBADF,
                .file_max = limit_or_max(m->quota.max_upload_file_bytes),
                .request_max = limit_or_max(m->quota.max_upload_request_bytes),
        };
        if (api_param_id(params[0], lens[0], u->ws) < 0)
                return upload_free(u);
        return u;
}

uint64_t api_files_put_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens) {
        _cleanup_free_ char *path = NULL;
        Upload *u;
        uint64_t cl;
        int r = 0;

        u = upload_new(m, req, params, lens);
        if (!u) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
                return 0;
        }
        path = strndup(params[1], lens[1]);
        if (!path || (r = ws_path_validate(path, false)) < 0) {
                reply_path_error(req, path ? r : -ENOMEM, path ?: "");
                upload_free(u);
                return 0;
        }
        if (content_length(req, &cl) > 0 && cl > u->file_max) {
                http_reply_error_full(req, HTTP_ERROR_PAYLOAD_TOO_LARGE, true, NULL,
                                      "The file exceeds %" PRIu64 " bytes (maxUploadFileBytes).", u->file_max);
                upload_free(u);
                return 0;
        }
        u->ws_fd = workspace_open(m->workspaces_fd, u->ws);
        u->parts = calloc(1, sizeof(UploadPart));
        if (u->ws_fd < 0 || !u->parts) {
                http_reply_error(req, HTTP_ERROR_INTERNAL, "The workspace cannot be opened.");
                upload_free(u);
                return 0;
        }
        r = ws_writer_begin(u->ws_fd, path, u->file_max, true, &u->parts[0].writer);
        if (r < 0) {
                reply_path_error(req, r, path);
                upload_free(u);
                return 0;
        }
        u->parts[0].path = STEAL(path);
        u->n_parts = 1;
        http_request_set_userdata(req, u, on_upload_gone);
        http_request_set_body_sink(req, on_put_body, u);
        return u->file_max;
}

/* ---- multipart POST -------------------------------------------------------------------------- */

static MHD_Result_t on_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                            const char *content_type, const char *transfer_encoding, const char *data,
                            uint64_t off, size_t size) {
        Upload *u = cls;
        UploadPart *p;
        int r;

        if (u->error < 0)
                return MHD_YES;   /* keep consuming; the answer is decided at the end */
        if (!filename) {
                upload_refuse(u, -EINVAL, "part '%s' has no filename (each part's filename is its path)",
                              key ?: "");
                return MHD_YES;
        }
        if (off == 0) {
                UploadPart *parts = realloc(u->parts, sizeof(UploadPart) * (u->n_parts + 1));
                if (!parts) {
                        upload_refuse(u, -ENOMEM, "out of memory");
                        return MHD_YES;
                }
                u->parts = parts;
                p = &u->parts[u->n_parts];
                *p = (UploadPart) { .path = strdup(filename) };
                if (!p->path) {
                        upload_refuse(u, -ENOMEM, "out of memory");
                        return MHD_YES;
                }
                u->n_parts++;
                r = ws_path_validate(filename, false);
                if (r >= 0)
                        r = ws_writer_begin(u->ws_fd, filename, u->file_max, true, &p->writer);
                if (r < 0) {
                        upload_refuse(u, r, "cannot write '%s': %s", filename,
                                      r == -EINVAL || r == -ENAMETOOLONG ? "invalid file name" : strerror(-r));
                        return MHD_YES;
                }
        }
        p = &u->parts[u->n_parts - 1];
        if (size == 0)
                return MHD_YES;
        u->total += size;
        if (u->total > u->request_max) {
                upload_refuse(u, -EFBIG, "the upload exceeds %" PRIu64 " bytes (maxUploadRequestBytes)", u->request_max);
                return MHD_YES;
        }
        r = ws_writer_write(p->writer, data, size);
        if (r == -EFBIG)
                upload_refuse(u, r, "'%s' exceeds %" PRIu64 " bytes (maxUploadFileBytes)", p->path, u->file_max);
        else if (r < 0)
                upload_refuse(u, r, "writing '%s' failed: %s", p->path, strerror(-r));
        return MHD_YES;
}

static int on_post_body(HttpRequest *req, const void *data, size_t size, int error, void *userdata) {
        Upload *u = userdata;

        if (error < 0) {
                upload_refuse(u, error, "the upload exceeds %" PRIu64 " bytes (maxUploadRequestBytes)", u->request_max);
                return error;
        }
        if (MHD_post_process(u->pp, data, size) != MHD_YES)
                upload_refuse(u, -EBADMSG, "malformed multipart/form-data body");
        return 0;
}

uint64_t api_files_post_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens) {
        const char *ct = http_request_header(req, "Content-Type");
        Upload *u;
        uint64_t cl;

        u = upload_new(m, req, params, lens);
        if (!u) {
                http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
                return 0;
        }
        if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0) {
                http_reply_error_full(req, HTTP_ERROR_UNSUPPORTED_MEDIA_TYPE, true, NULL,
                                      "Uploads with POST must be multipart/form-data (or PUT the raw file).");
                upload_free(u);
                return 0;
        }
        if (content_length(req, &cl) > 0 && cl > u->request_max) {
                http_reply_error_full(req, HTTP_ERROR_PAYLOAD_TOO_LARGE, true, NULL,
                                      "The upload exceeds %" PRIu64 " bytes (maxUploadRequestBytes).", u->request_max);
                upload_free(u);
                return 0;
        }
        u->multipart = true;
        u->ws_fd = workspace_open(m->workspaces_fd, u->ws);
        u->pp = http_request_post_processor(req, 64 * 1024, on_part, u);
        if (u->ws_fd < 0 || !u->pp) {
                http_reply_error(req, HTTP_ERROR_INVALID_REQUEST, "Cannot read this multipart/form-data body "
                                 "(a boundary is required).");
                upload_free(u);
                return 0;
        }
        http_request_set_userdata(req, u, on_upload_gone);
        http_request_set_body_sink(req, on_post_body, u);
        /* Multipart framing adds a little to the files; the parts are capped exactly above. */
        return u->request_max == UINT64_MAX ? UINT64_MAX : u->request_max + 64 * 1024;
}

/* ---- the commit ------------------------------------------------------------------------------ */

static void upload_commit(Upload *u) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *written = json_object_new_array();
        int r = 0;

        for (size_t i = 0; i < u->n_parts && r >= 0; i++) {
                r = ws_writer_commit(u->parts[i].writer, u->parts[i].sha256);
                if (r < 0)
                        reply_path_error(u->req, r, u->parts[i].path);
        }
        if (r >= 0 && o && written) {
                for (size_t i = 0; i < u->n_parts; i++) {
                        json_object *e = json_object_new_object();
                        char hex[65];

                        for (size_t k = 0; k < 32; k++)
                                (void) snprintf(hex + 2 * k, 3, "%02x", u->parts[i].sha256[k]);
                        json_object_object_add(e, "path", json_object_new_string(u->parts[i].path));
                        json_object_object_add(e, "bytes",
                                               json_object_new_int64((int64_t) ws_writer_written(u->parts[i].writer)));
                        json_object_object_add(e, "sha256", json_object_new_string(hex));
                        json_object_array_add(written, e);
                }
                json_object_object_add(o, "workspaceId", json_object_new_string(u->ws));
                json_object_object_add(o, "written", json_object_get(written));
                http_reply_json(u->req, 201, o);
        } else if (r >= 0)
                http_reply_oom(u->req);
        json_object_put(written);
        http_request_set_userdata(u->req, NULL, NULL);
        upload_free(u);
}

static int on_upload_lease(sd_event_source *s, uint64_t usec, void *userdata) {
        Upload *u = userdata;
        int r;

        r = workspace_lease_try(u->ws_fd);
        if (r == -EWOULDBLOCK) {
                (void) sd_event_source_set_time_relative(s, LEASE_RETRY_USEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        u->retry = sd_event_source_disable_unref(u->retry);
        if (r < 0) {
                http_reply_error(u->req, HTTP_ERROR_INTERNAL, "The lease of workspace '%s' cannot be taken: %s.",
                                 u->ws, strerror(-r));
                http_request_set_userdata(u->req, NULL, NULL);
                upload_free(u);
                return 0;
        }
        u->lease_fd = r;
        upload_commit(u);
        return 0;
}

void api_files_upload(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens) {
        Upload *u = http_request_get_userdata(req);
        int r;

        if (!u)
                return http_reply_error(req, HTTP_ERROR_INTERNAL, "Upload state lost.");
        if (u->pp) {
                (void) MHD_destroy_post_processor(u->pp);
                u->pp = NULL;
        }
        if (u->error == 0 && http_request_sink_error(req) < 0)
                upload_refuse(u, http_request_sink_error(req), "the upload exceeds the size limit");
        if (u->error == 0 && u->n_parts == 0)
                upload_refuse(u, -EINVAL, "no file in the upload");
        if (u->error < 0) {
                int e = u->error;
                http_request_set_userdata(req, NULL, NULL);
                /* As clients have always seen it: -ENOSPC is insufficient_storage too (507; the
                 * errno map knows -EDQUOT only), -ENOMEM 500 internal (the map: 503), and any
                 * other refusal but -ENOENT 400 invalid_request. */
                if (e == -EFBIG || e == -E2BIG)
                        http_reply_error(req, HTTP_ERROR_PAYLOAD_TOO_LARGE, "%s.", u->error_message ?: "too large");
                else if (e == -ENOSPC || e == -EDQUOT)
                        http_reply_error(req, HTTP_ERROR_INSUFFICIENT_STORAGE, "%s.", u->error_message ?: "no space left");
                else if (e == -ENOMEM)
                        http_reply_oom(req);
                else
                        http_reply_error(req, e == -ENOENT ? HTTP_ERROR_NOT_FOUND : HTTP_ERROR_INVALID_REQUEST,
                                         "%s.", u->error_message ?: "invalid upload");
                upload_free(u);
                return;
        }
        /* Only the commit needs the lease: wait for a running execution to finish. */
        r = sd_event_add_time_relative(m->event, &u->retry, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_upload_lease, u);
        if (r < 0) {
                http_request_set_userdata(req, NULL, NULL);
                upload_free(u);
                return http_reply_oom(req);
        }
        http_request_suspend(req);
}

/* ---- reads ------------------------------------------------------------------------------------ */

static int open_existing_ws(Manager *m, const char *ws) {
        int fd = openat(m->workspaces_fd, ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

void api_files_get(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                   const char **params, size_t *lens) {
        _cleanup_free_ char *path = NULL, *repr = NULL;
        _cleanup_close_ int ws_fd = -EBADF;
        char ws[129], hex[65], size_s[32];
        uint8_t digest[32];
        struct stat st;
        int fd = -EBADF, r;

        if (api_param_id(params[0], lens[0], ws) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
        path = strndup(params[1], lens[1]);
        if (!path)
                return http_reply_oom(req);
        r = ws_path_validate(path, false);
        if (r < 0)
                return reply_path_error(req, r, path);
        ws_fd = open_existing_ws(m, ws);
        if (ws_fd < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No workspace '%s'.", ws);
        r = ws_file_open_read(ws_fd, path, UINT64_MAX, &fd, &st);
        if (r < 0)
                return reply_path_error(req, r, path);
        /* The digest of exactly the bytes we send: the first st_size, read through this fd. */
        r = ws_file_sha256(fd, (uint64_t) st.st_size, digest);
        if (r >= 0)
                r = ws_repr_digest(digest, &repr);
        if (r < 0) {
                safe_close(fd);
                return reply_path_error(req, r, path);
        }
        for (size_t k = 0; k < 32; k++)
                (void) snprintf(hex + 2 * k, 3, "%02x", digest[k]);
        (void) snprintf(size_s, sizeof(size_s), "%" PRIu64, (uint64_t) st.st_size);
        const char *const hdr[] = { "Repr-Digest", repr, "X-Sandbox-SHA256", hex, NULL };
        r = http_request_reply_fd(req, 200, "application/octet-stream", fd, 0, (uint64_t) st.st_size, hdr);
        if (r < 0)
                http_reply_oom(req);
}

void api_files_list(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                    const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_close_ int ws_fd = -EBADF;
        const char *dir = http_request_query(req, "dir") ?: "";
        WsEntry *entries = NULL;
        json_object *list;
        size_t n = 0, hidden = 0;
        char ws[129];
        int r;

        if (api_param_id(params[0], lens[0], ws) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
        r = ws_path_validate(dir, true);
        if (r < 0)
                return reply_path_error(req, r, dir);
        ws_fd = open_existing_ws(m, ws);
        if (ws_fd < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No workspace '%s'.", ws);
        r = ws_list_dir(ws_fd, dir, &entries, &n);
        if (r < 0)
                return reply_path_error(req, r, dir);
        o = json_object_new_object();
        list = json_object_new_array();
        for (size_t i = 0; o && list && i < n; i++) {
                json_object *e;

                if (!entries[i].name_valid) {
                        hidden++;   /* not addressable through the API (bad UTF-8, control bytes) */
                        continue;
                }
                e = json_object_new_object();
                json_object_object_add(e, "name", json_object_new_string(entries[i].name));
                json_object_object_add(e, "type", json_object_new_string(ws_entry_type_to_string(entries[i].type)));
                json_object_object_add(e, "size", json_object_new_int64((int64_t) entries[i].size));
                json_object_array_add(list, e);
        }
        ws_entries_free(entries, n);
        if (!o || !list) {
                json_object_put(list);
                return http_reply_oom(req);
        }
        json_object_object_add(o, "entries", list);
        if (hidden > 0)
                json_object_object_add(o, "unlisted", json_object_new_int64((int64_t) hidden));
        http_reply_json(req, 200, o);
}

typedef struct Removal {
        HttpRequest *req;
        char *path;
        int ws_fd;
        sd_event_source *retry;
} Removal;

static void removal_free(Removal *x) {
        x->retry = sd_event_source_disable_unref(x->retry);
        safe_close(x->ws_fd);
        free(x->path);
        free(x);
}

static void on_removal_gone(HttpRequest *req, void *userdata) {
        removal_free(userdata);
}

static int on_removal_lease(sd_event_source *s, uint64_t usec, void *userdata) {
        Removal *x = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_close_ int lease = -EBADF;
        int r;

        lease = workspace_lease_try(x->ws_fd);
        if (lease == -EWOULDBLOCK) {
                (void) sd_event_source_set_time_relative(s, LEASE_RETRY_USEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        http_request_set_userdata(x->req, NULL, NULL);
        r = lease < 0 ? lease : ws_remove(x->ws_fd, x->path);
        if (r < 0)
                reply_path_error(x->req, r, x->path);
        else if ((o = json_object_new_object())) {
                json_object_object_add(o, "removed", json_object_new_string(x->path));
                http_reply_json(x->req, 200, o);
        } else
                http_reply_oom(x->req);
        removal_free(x);
        return 0;
}

void api_files_delete(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                      const char **params, size_t *lens) {
        Removal *x;
        char ws[129];
        int r = 0;

        if (api_param_id(params[0], lens[0], ws) < 0)
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No such workspace.");
        x = calloc(1, sizeof(*x));
        if (!x)
                return http_reply_oom(req);
        *x = (Removal) { .req = req, .ws_fd = -EBADF };
        x->path = strndup(params[1], lens[1]);
        if (!x->path || (r = ws_path_validate(x->path, false)) < 0) {
                reply_path_error(req, x->path ? r : -ENOMEM, x->path ?: "");
                return removal_free(x);
        }
        x->ws_fd = open_existing_ws(m, ws);
        if (x->ws_fd < 0) {
                removal_free(x);
                return http_reply_error(req, HTTP_ERROR_NOT_FOUND, "No workspace '%s'.", ws);
        }
        r = sd_event_add_time_relative(m->event, &x->retry, CLOCK_MONOTONIC, 0, USEC_PER_MSEC, on_removal_lease, x);
        if (r < 0) {
                removal_free(x);
                return http_reply_oom(req);
        }
        http_request_set_userdata(req, x, on_removal_gone);
        http_request_suspend(req);
}
