/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upload: files streamed into a workspace, one as a raw PUT or several as multipart/form-data,
 * their SHA-256 computed while sending and compared with what the daemon says it stored. It
 * calls request.c (with streamed bodies), files.c for the paths, output.c and transfer.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "ctl.h"
#include "output.h"
#include "transfer.h"

typedef struct Source {
        const char *name;               /* as given, for messages */
        int fd;
        bool seekable;
        off_t start;                    /* where the bytes start (standard input may be read already) */
        int64_t size;                   /* -1: unknown (a pipe), sent chunked */
        uint64_t sent;
        struct sha256_ctx sha;
        int *error;                     /* shared by all sources of a request */
} Source;

static void source_fail(Source *s, int error, const char *what) {
        _cleanup_free_ char *e = output_escaped(s->name);

        if (*s->error == 0)
                *s->error = error;
        log_error("Cannot upload '%s': %s%s%s.", e ?: "", what ?: "", what ? ": " : "", strerror(-error));
}

static ssize_t source_read(void *buf, size_t size, void *userdata) {
        Source *s = userdata;
        ssize_t k;

        if (s->size >= 0) {
                uint64_t left = (uint64_t) s->size - s->sent;

                if (left == 0)
                        return 0;
                size = (size_t) MIN((uint64_t) size, left);
        }
        do
                k = read(s->fd, buf, size);
        while (k < 0 && errno == EINTR);
        if (k < 0) {
                int r = negative_errno();
                source_fail(s, r, "read error");
                return r;
        }
        if (k == 0 && s->size >= 0) {
                /* The file shrank after its size was announced. */
                source_fail(s, -EIO, "the file became shorter while it was sent");
                return -EIO;
        }
        sha256_update(&s->sha, (size_t) k, buf);
        s->sent += (uint64_t) k;
        return k;
}

static int source_rewind(void *userdata) {
        Source *s = userdata;

        if (!s->seekable || lseek(s->fd, s->start, SEEK_SET) < 0) {
                source_fail(s, -ESPIPE, "it cannot be sent again");
                return -ESPIPE;
        }
        sha256_init(&s->sha);
        s->sent = 0;
        return 0;
}

/* Open @path ("-": standard input) for sending. Returns an exit code. */
static int source_open(Source *s, const char *path, int *error) {
        _cleanup_free_ char *e = output_escaped(path);
        struct stat st;

        *s = (Source) { .name = path, .fd = -EBADF, .size = -1, .error = error };
        sha256_init(&s->sha);
        if (streq(path, "-"))
                s->fd = STDIN_FILENO;
        else {
                s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (s->fd < 0) {
                        log_error("Cannot open '%s': %s", e ?: "", strerror(errno));
                        return CTL_EXIT_FAILURE;
                }
        }
        if (fstat(s->fd, &st) < 0) {
                log_error("Cannot stat '%s': %s", e ?: "", strerror(errno));
                return CTL_EXIT_FAILURE;
        }
        if (S_ISDIR(st.st_mode)) {
                log_error("'%s' is a directory; upload sends files.", e ?: "");
                return CTL_EXIT_FAILURE;
        }
        if (S_ISREG(st.st_mode)) {
                /* A regular file: its size is known, from where its offset is (0 unless it is a
                 * standard input that was read from already). */
                s->start = lseek(s->fd, 0, SEEK_CUR);
                s->seekable = s->start >= 0;
                if (s->start < 0)
                        s->start = 0;
                s->size = st.st_size > s->start ? (int64_t) (st.st_size - s->start) : 0;
        }
        return 0;
}

static void source_close(Source *s) {
        if (s->fd > STDIN_FILENO)
                s->fd = safe_close(s->fd);
}

/* Compare the daemon's record of one written file with what was sent. Returns an exit code. */
static int check_written(const CtlOptions *o, json_object *w, const char *remote, Source *s, char hex[static 65]) {
        _cleanup_free_ char *er = output_escaped(remote), *theirs = NULL;
        uint8_t digest[TRANSFER_SHA256_SIZE];
        const char *sha = json_string_field(w, "sha256"), *path = json_string_field(w, "path");
        int64_t bytes = json_int_field(w, "bytes", -1);

        sha256_digest(&s->sha, sizeof(digest), digest);
        transfer_hex(digest, sizeof(digest), hex);
        if (!sha || !path || bytes < 0) {
                log_error("The daemon's answer for '%s' lacks its path, bytes or sha256.", er ?: "");
                return CTL_EXIT_FAILURE;
        }
        theirs = output_escaped(sha);
        if (!streq(path, remote)) {
                _cleanup_free_ char *ep = output_escaped(path);
                log_error("The daemon wrote '%s' where '%s' was sent.", ep ?: "", er ?: "");
                return CTL_EXIT_FAILURE;
        }
        if ((uint64_t) bytes != s->sent || strcasecmp(sha, hex) != 0) {
                log_error("'%s' arrived damaged: sent %" PRIu64 " bytes with SHA-256 %s, the daemon stored %" PRIi64
                          " bytes with SHA-256 %s.", er ?: "", s->sent, hex, bytes, theirs ?: "");
                return CTL_EXIT_FAILURE;
        }
        if (o->verbose)
                log_error("'%s': the daemon's SHA-256 matches the one computed while sending.", er ?: "");
        return 0;
}

static int show_written(const CtlOptions *o, json_object *answer, Source *sources, char **remotes, size_t n) {
        json_object *written;
        char hex[65];
        int r;

        if (!json_object_object_get_ex(answer, "written", &written) || !json_object_is_type(written, json_type_array) ||
            json_object_array_length(written) != n) {
                log_error("The daemon's answer does not list the %zu file%s written.", n, n == 1 ? "" : "s");
                if (o->json)
                        (void) show_answer(o, answer, NULL);
                return CTL_EXIT_FAILURE;
        }
        for (size_t i = 0; i < n; i++) {
                r = check_written(o, json_object_array_get_idx(written, i), remotes[i], &sources[i], hex);
                if (r != 0)
                        return r;
        }
        if (o->json)
                return show_answer(o, answer, NULL);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *ep = output_escaped(remotes[i]);

                if (!ep)
                        return log_oom();
                printf("%s: %" PRIu64 " bytes, sha256 %s\n", ep, sources[i].sent,
                       json_string_field(json_object_array_get_idx(written, i), "sha256"));
        }
        return flush_stdout();
}

static int upload_one(const CtlOptions *o, const char *ws, const char *local, const char *remote) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *rpath = NULL, *path = NULL, *base = NULL;
        Source src;
        int error = 0, r;

        if (!remote) {
                if (streq(local, "-")) {
                        log_error("Uploading standard input needs the REMOTE path.");
                        return CTL_EXIT_USAGE;
                }
                base = transfer_basename(local);
                if (!base)
                        return log_oom();
                if (isempty(base)) {
                        log_error("'%s' has no file name; give the REMOTE path.", local);
                        return CTL_EXIT_USAGE;
                }
                remote = base;
        }
        rpath = remote_path(remote);
        if (!rpath)
                return CTL_EXIT_FAILURE;
        path = workspace_path(ws, "/files/%s", rpath);
        if (!path)
                return CTL_EXIT_FAILURE;

        r = source_open(&src, local, &error);
        if (r != 0) {
                source_close(&src);
                return r;
        }
        r = request(o, &(const Request) {
                            .method = "PUT",
                            .path = path,
                            .need_token = true,
                            .timeout_usec = ctl_long_timeout(o),
                            .connect_timeout_usec = CONNECT_TIMEOUT_USEC,
                            .read_body = source_read,
                            .rewind_body = source_rewind,
                            .read_userdata = &src,
                            .read_size = src.size,
                            .content_type = "application/octet-stream",
                            .callback_error = &error,
                    },
                    &answer);
        source_close(&src);
        if (r != 0)
                return r;
        return show_written(o, answer, &src, (char *[]) { (char *) remote }, 1);
}

static int upload_multipart(const CtlOptions *o, const char *ws, int n, char *locals[]) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ Source *sources = NULL;
        _cleanup_free_ HttpMimePart *parts = NULL;
        _cleanup_free_ char *path = NULL;
        char **names = NULL;
        int error = 0, r = 0;

        sources = calloc(n, sizeof(Source));
        parts = calloc(n, sizeof(HttpMimePart));
        names = calloc(n, sizeof(char *));
        path = workspace_path(ws, "/files");
        if (!sources || !parts || !names || !path) {
                free(names);
                return path ? log_oom() : CTL_EXIT_FAILURE;
        }
        for (int i = 0; i < n; i++)
                sources[i].fd = -EBADF;

        for (int i = 0; i < n && r == 0; i++) {
                if (streq(locals[i], "-")) {
                        log_error("--multipart sends files by their names; standard input has none.");
                        r = CTL_EXIT_USAGE;
                        break;
                }
                names[i] = transfer_basename(locals[i]);
                if (!names[i]) {
                        r = log_oom();
                        break;
                }
                if (isempty(names[i])) {
                        _cleanup_free_ char *e = output_escaped(locals[i]);
                        log_error("'%s' has no file name.", e ?: "");
                        r = CTL_EXIT_USAGE;
                        break;
                }
                for (int k = 0; k < i; k++)
                        if (streq(names[k], names[i])) {
                                _cleanup_free_ char *e = output_escaped(names[i]);
                                log_error("Two files named '%s': each part's name is its path in the workspace; "
                                          "upload them one at a time with a REMOTE path.", e ?: "");
                                r = CTL_EXIT_USAGE;
                                break;
                        }
                if (r != 0)
                        break;
                r = source_open(&sources[i], locals[i], &error);
                if (r != 0)
                        break;
                parts[i] = (HttpMimePart) {
                        .name = "file",
                        .filename = names[i],
                        .size = sources[i].size,
                        .read = source_read,
                        .rewind = source_rewind,
                        .userdata = &sources[i],
                };
        }

        if (r == 0)
                r = request(o, &(const Request) {
                                    .method = "POST",
                                    .path = path,
                                    .need_token = true,
                                    .timeout_usec = ctl_long_timeout(o),
                                    .connect_timeout_usec = CONNECT_TIMEOUT_USEC,
                                    .parts = parts,
                                    .n_parts = (size_t) n,
                                    .callback_error = &error,
                            },
                            &answer);
        for (int i = 0; i < n; i++)
                source_close(&sources[i]);
        if (r == 0)
                r = show_written(o, answer, sources, names, (size_t) n);
        for (int i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

int verb_upload(const CtlOptions *o, int argc, char *argv[]) {
        if (o->multipart)
                return upload_multipart(o, argv[0], argc - 1, argv + 1);
        if (argc > 3) {
                log_error("upload takes WORKSPACE LOCAL [REMOTE]; several files need --multipart.");
                return CTL_EXIT_USAGE;
        }
        return upload_one(o, argv[0], argv[1], argc > 2 ? argv[2] : NULL);
}
