/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace files and revisions: upload (streamed raw PUT, or multipart/form-data), download
 * (streamed into a temporary file, SHA-256 checked against Repr-Digest, then renamed into place),
 * ls, revisions, tree, restore, rm, teardown.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "ctl.h"
#include "output.h"
#include "transfer.h"

/* Room for a temporary file's name next to the target: ".<name>.XXXXXX" within NAME_MAX. */
#define TMP_NAME_BASE_MAX 200

/* "/workspaces/<ws>" with the id escaped, followed by @fmt. NULL on OOM (reported). */
_printf_(2, 3)
static char *workspace_path(const char *ws, const char *fmt, ...) {
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
static char *remote_path(const char *path) {
        char *e = NULL;

        if (transfer_escape_path(path, &e) < 0)
                (void) log_oom();
        return e;
}

/* ---- upload ------------------------------------------------------------------------------------ */

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

/* ---- download ---------------------------------------------------------------------------------- */

typedef struct Dest {
        int fd;
        const char *name;               /* for messages, escaped */
        struct sha256_ctx sha;
        uint64_t bytes;
        int error;
} Dest;

static int dest_write(const void *data, size_t size, void *userdata) {
        Dest *d = userdata;
        int r;

        sha256_update(&d->sha, size, data);
        r = transfer_write_all(d->fd, data, size);
        if (r < 0) {
                d->error = r;
                log_error("Cannot write %s: %s", d->name, strerror(-r));
                return r;
        }
        d->bytes += size;
        return 0;
}

/* Where LOCAL goes: "-" is standard output (NULL), a directory gets the remote name. */
static int download_target(const char *remote, const char *local, char **ret) {
        _cleanup_free_ char *base = transfer_basename(remote);
        struct stat st;
        char *t;

        if (!base)
                return log_oom();
        if (local && isempty(local)) {
                log_error("LOCAL must not be empty (use '-' for standard output).");
                return CTL_EXIT_USAGE;
        }
        if (local && streq(local, "-")) {
                *ret = NULL;
                return 0;
        }
        if (!local || (local[0] && local[strlen(local) - 1] == '/') ||
            (stat(local, &st) >= 0 && S_ISDIR(st.st_mode))) {
                if (isempty(base)) {
                        log_error("The remote path has no file name; give LOCAL.");
                        return CTL_EXIT_USAGE;
                }
                if (!local)
                        t = strdup(base);
                else if (asprintf(&t, "%s%s%s", local, local[strlen(local) - 1] == '/' ? "" : "/", base) < 0)
                        t = NULL;
        } else
                t = strdup(local);
        if (!t)
                return log_oom();
        *ret = t;
        return 0;
}

/* A temporary file next to @target: "<dir>/.<name>.XXXXXX". Returns an exit code. */
static int make_temporary(const char *target, char **ret_path, int *ret_fd) {
        _cleanup_free_ char *base = transfer_basename(target), *tmp = NULL, *e = output_escaped(target);
        const char *slash = strrchr(target, '/');
        int fd;

        if (!base || !e)
                return log_oom();
        if (strlen(base) > TMP_NAME_BASE_MAX)
                base[TMP_NAME_BASE_MAX] = '\0';
        if (asprintf(&tmp, "%.*s.%s.XXXXXX", slash ? (int) (slash - target + 1) : 0, target, base) < 0)
                return log_oom();
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                log_error("Cannot create a temporary file next to '%s': %s", e, strerror(errno));
                return CTL_EXIT_FAILURE;
        }
        *ret_path = STEAL(tmp);
        *ret_fd = fd;
        return 0;
}

/* The API path of @remote in workspace @ws, or in its revision --revision. NULL on OOM (reported). */
static char *download_path(const CtlOptions *o, const char *ws, const char *remote) {
        _cleanup_free_ char *rpath = remote_path(remote), *erev = NULL;

        if (!rpath)
                return NULL;
        if (!o->revision)
                return workspace_path(ws, "/files/%s", rpath);
        if (transfer_escape(o->revision, &erev) < 0) {
                (void) log_oom();
                return NULL;
        }
        return workspace_path(ws, "/revisions/%s/files/%s", erev, rpath);
}

/* Compare what @d received with the answer's Repr-Digest; @ours_hex: the SHA-256 of what came.
 * Returns an exit code. */
static int download_verify(const CtlOptions *o, const Dest *d, const HttpResponse *resp, const char *eremote,
                           bool to_file, char ours_hex[static 65]) {
        _cleanup_free_ char *eheader = NULL;
        uint8_t ours[TRANSFER_SHA256_SIZE], theirs[TRANSFER_SHA256_SIZE];
        struct sha256_ctx sha = d->sha;
        char theirs_hex[65];
        const char *header;

        sha256_digest(&sha, sizeof(ours), ours);
        transfer_hex(ours, sizeof(ours), ours_hex);
        header = http_response_header(resp, "Repr-Digest");
        if (!header) {
                log_error("The daemon sent no Repr-Digest for '%s'; the download cannot be verified%s.", eremote,
                          to_file ? " and was discarded" : "");
                return CTL_EXIT_FAILURE;
        }
        if (transfer_repr_digest_sha256(header, theirs) < 0) {
                eheader = output_escaped(header);
                log_error("The Repr-Digest of '%s' (%s) has no valid sha-256 value; the download cannot be "
                          "verified%s.", eremote, eheader ?: "", to_file ? " and was discarded" : "");
                return CTL_EXIT_FAILURE;
        }
        transfer_hex(theirs, sizeof(theirs), theirs_hex);
        if (memcmp(ours, theirs, sizeof(ours)) != 0) {
                log_error("Digest mismatch for '%s': the daemon announced SHA-256 %s, the %" PRIu64 " bytes received "
                          "have %s. %s", eremote, theirs_hex, d->bytes, ours_hex,
                          to_file ? "Nothing was saved." : "The output is damaged.");
                return CTL_EXIT_FAILURE;
        }
        if (o->verbose)
                log_error("'%s': %" PRIu64 " bytes, SHA-256 %s matches Repr-Digest.", eremote, d->bytes, ours_hex);
        return 0;
}

/* The verified temporary file @tmp (open as *@fd, closed here) becomes @target. Returns an exit code. */
static int download_save(int *fd, const char *tmp, const char *target, const char *etarget) {
        mode_t mask;

        /* The permissions a new file gets (mkostemp() made it 0600). */
        mask = umask(0);
        (void) umask(mask);
        if (fchmod(*fd, 0666 & ~mask) < 0 || fsync(*fd) < 0 || close(STEAL_FD(*fd)) < 0 || rename(tmp, target) < 0) {
                log_error("Cannot save %s: %s", etarget, strerror(errno));
                return CTL_EXIT_FAILURE;
        }
        transfer_interrupt_unlink(NULL);
        return 0;
}

/* What was saved: JSON with --json, else one line. Returns the exit code. */
static int download_show(const CtlOptions *o, const char *remote, const char *target, const char *etarget,
                         uint64_t bytes, const char *ours_hex) {
        if (o->json) {
                _cleanup_(json_object_putp) json_object *result = json_object_new_object();

                if (!result || json_add_string(result, "path", remote, strlen(remote)) < 0 ||
                    json_add_string(result, "file", target, strlen(target)) < 0 ||
                    json_add_u64(result, "bytes", bytes) < 0 ||
                    json_add_string(result, "sha256", ours_hex, strlen(ours_hex)) < 0)
                        return log_oom();
                return show_answer(o, result, NULL);
        }
        printf("%s: %" PRIu64 " bytes, sha256 %s (verified)\n", etarget, bytes, ours_hex);
        return flush_stdout();
}

int verb_download(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(http_response_done) HttpResponse resp = {};
        _cleanup_free_ char *target = NULL, *tmp = NULL, *path = NULL, *etarget = NULL, *eremote = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *ws = argv[0], *remote = argv[1];
        char ours_hex[65];
        json_object *answer = NULL;
        Dest d = {};
        int r;

        r = download_target(remote, argc > 2 ? argv[2] : NULL, &target);
        if (r != 0)
                return r;
        path = download_path(o, ws, remote);
        if (!path)
                return CTL_EXIT_FAILURE;
        etarget = output_escaped(target ?: "standard output");
        eremote = output_escaped(remote);
        if (!etarget || !eremote)
                return log_oom();

        if (target) {
                r = make_temporary(target, &tmp, &fd);
                if (r != 0)
                        return r;
                /* Nothing half-written stays behind, also when interrupted. */
                transfer_interrupt_setup();
                transfer_interrupt_unlink(tmp);
                d.fd = fd;
        } else {
                r = flush_stdout();
                if (r != 0)
                        return r;
                d.fd = STDOUT_FILENO;
        }
        d.name = target ? etarget : "standard output";
        sha256_init(&d.sha);

        r = request(o,
                    &(const Request) {
                            .method = "GET",
                            .path = path,
                            .need_token = true,
                            .timeout_usec = ctl_long_timeout(o),
                            .connect_timeout_usec = CONNECT_TIMEOUT_USEC,
                            .write_body = dest_write,
                            .write_userdata = &d,
                            .accept = "application/octet-stream",
                            .raw_answer = true,
                            .callback_error = &d.error,
                            .ret_response = &resp,
                    },
                    &answer);
        if (r == 0)
                r = download_verify(o, &d, &resp, eremote, target, ours_hex);
        if (r == 0 && target)
                r = download_save(&fd, tmp, target, etarget);
        if (r != 0) {
                if (tmp) {
                        (void) unlink(tmp);
                        transfer_interrupt_unlink(NULL);
                }
                return r;
        }

        if (!target)
                return 0;
        return download_show(o, remote, target, etarget, d.bytes, ours_hex);
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

static json_object *entries_of(json_object *answer, const char *key) {
        json_object *l;

        if (!json_object_object_get_ex(answer, key, &l) || !json_object_is_type(l, json_type_array))
                return NULL;
        return l;
}

/* One line per entry: type, [mode,] size, name ("/" after directories, "-> target" for links). */
static int print_entries(json_object *answer, bool with_mode) {
        json_object *list = entries_of(answer, "entries");
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

/* GET a listing at @path (built by the caller, NULL: failed, reported) and show its entries.
 * Returns the exit code. */
static int list_dir(const CtlOptions *o, const char *path, bool with_mode) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_get(o, path, &answer);
        if (r != 0)
                return r;
        if (o->json)
                return show_answer(o, answer, NULL);
        return print_entries(answer, with_mode);
}

int verb_ls(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *q = dir_query(argc > 1 ? argv[1] : NULL), *path = NULL;

        if (!q)
                return CTL_EXIT_FAILURE;
        path = workspace_path(argv[0], "/files%s", q);
        return list_dir(o, path, false);
}

int verb_tree(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_free_ char *q = dir_query(argc > 2 ? argv[2] : NULL), *path = NULL, *erev = NULL;

        if (!q || transfer_escape(argv[1], &erev) < 0)
                return q ? log_oom() : CTL_EXIT_FAILURE;
        path = workspace_path(argv[0], "/revisions/%s/tree%s", erev, q);
        return list_dir(o, path, true);
}

int verb_revisions(const CtlOptions *o, int argc, char *argv[]) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *path = workspace_path(argv[0], "/revisions");
        json_object *list;
        size_t width = strlen("EXECUTION");
        int r;

        if (!path)
                return CTL_EXIT_FAILURE;
        r = request_get(o, path, &answer);
        if (r != 0)
                return r;
        if (o->json)
                return show_answer(o, answer, NULL);

        list = entries_of(answer, "revisions");
        if (!list) {
                log_error("The answer has no 'revisions' list.");
                return CTL_EXIT_FAILURE;
        }
        if (json_object_array_length(list) == 0) {
                _cleanup_free_ char *ews = output_escaped(argv[0]);
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
