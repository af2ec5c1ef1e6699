/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * download: a file of a workspace or of one of its revisions, streamed into a temporary file next
 * to the target (or to standard output), its SHA-256 checked against the answer's Repr-Digest,
 * then renamed into place. It calls request.c (with a streamed answer), files.c for the paths,
 * output.c and transfer.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "ctl.h"
#include "output.h"
#include "transfer.h"

/* Room for a temporary file's name next to the target: ".<name>.XXXXXX" within NAME_MAX. */
#define TMP_NAME_BASE_MAX 200

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
