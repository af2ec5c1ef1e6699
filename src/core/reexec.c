/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Re-execution of a daemon started by hand, keeping its listening sockets: see reexec.h. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "build-config.h"
#include "core/manager.h"
#include "core/reexec.h"
#include "http/http-server.h"
#include "sandbox/cgroup.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

#define STATE_MAX (64U * 1024U)
#define EXEC_RETRY_USEC (10 * USEC_PER_SEC)     /* a build may still be writing the binary */
#define DELETED_SUFFIX " (deleted)"

void reexec_state_done(ReexecState *s) {
        for (size_t i = 0; i < s->n_listen_fds; i++)
                safe_close(s->listen_fds[i]);
        free(s->listen_fds);
        free(s->listen_tags);
        secrets_done(&s->secrets);
        cgroup_root_free(s->cgroups);
        free(s->cgroups_reason);
        free(s->identity_error);
        free(s->stale_binary);
        *s = (ReexecState) {};
}

/* The whole of a sealed memfd (or any regular file) from its start: at most @max bytes. */
static int read_fd_all(int fd, size_t max, bool secret, char **ret, size_t *ret_size) {
        struct stat st;
        char *buf;
        size_t n = 0;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size > max)
                return -EINVAL;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (n < (size_t) st.st_size) {
                ssize_t k = pread(fd, buf + n, (size_t) st.st_size - n, (off_t) n);
                if (k <= 0) {
                        int r = k < 0 ? negative_errno() : -EIO;
                        if (secret)
                                explicit_bzero(buf, n);
                        free(buf);
                        return r;
                }
                n += (size_t) k;
        }
        buf[n] = '\0';
        *ret = buf;
        *ret_size = n;
        return 0;
}

static int fd_from_json(json_object *o, const char *key, int *ret) {
        json_object *v;
        int64_t fd;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return -EINVAL;
        fd = json_object_get_int64(v);
        if (fd < 3 || fd > INT_MAX || fcntl((int) fd, F_GETFD) < 0)
                return -EBADF;
        *ret = (int) fd;
        return fd_cloexec(*ret, 1);
}

static int secret_from_json(json_object *o, const char *key, char **ret, size_t *ret_size) {
        int fd, r;

        r = fd_from_json(o, key, &fd);
        if (r < 0)
                return r;
        r = read_fd_all(fd, AUTH_SECRET_MAX, true, ret, ret_size);
        safe_close(fd);
        return r;
}

static int string_from_json(json_object *o, const char *key, char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return -EINVAL;
        *ret = strdup(json_object_get_string(v));
        return *ret ? 0 : -ENOMEM;
}

static int state_parse(json_object *o, ReexecState *s, const char **ret_what) {
        json_object *a, *v;
        size_t token_size = 0;
        char *key = NULL;
        int r;

        *ret_what = "the listening sockets";
        if (!json_object_object_get_ex(o, "listeners", &a) || !json_object_is_type(a, json_type_array) ||
            json_object_array_length(a) == 0 || json_object_array_length(a) > 1024)
                return -EINVAL;
        s->listen_fds = calloc(json_object_array_length(a), sizeof(int));
        s->listen_tags = calloc(json_object_array_length(a), sizeof(unsigned));
        if (!s->listen_fds || !s->listen_tags)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *l = json_object_array_get_idx(a, i), *t;
                int fd;

                r = fd_from_json(l, "fd", &fd);
                if (r < 0)
                        return r;
                if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
                        return -EBADF;
                s->listen_fds[s->n_listen_fds++] = fd;
                if (!json_object_object_get_ex(l, "tag", &t) || !json_object_is_type(t, json_type_int) ||
                    json_object_get_int64(t) < 0 || json_object_get_int64(t) > UINT_MAX)
                        return -EINVAL;
                s->listen_tags[i] = (unsigned) json_object_get_int64(t);
        }

        *ret_what = "the secrets";
        r = secret_from_json(o, "tokenFd", &s->secrets.token, &token_size);
        if (r < 0)
                return r;
        r = secret_from_json(o, "signingKeyFd", &key, &s->secrets.signing_key_size);
        if (r < 0)
                return r;
        s->secrets.signing_key = (uint8_t *) key;
        if (token_size < AUTH_SECRET_MIN || s->secrets.signing_key_size < AUTH_SECRET_MIN)
                return -EINVAL;

        *ret_what = "the cgroups";
        if (json_object_object_get_ex(o, "cgroups", &v) && !json_object_is_type(v, json_type_null)) {
                r = cgroup_root_import(v, &s->cgroups);
                if (r < 0)
                        return r;
        }
        *ret_what = "the start-up state";
        if (string_from_json(o, "cgroupsReason", &s->cgroups_reason) < 0 ||
            string_from_json(o, "identityError", &s->identity_error) < 0 ||
            string_from_json(o, "staleBinary", &s->stale_binary) < 0)
                return -EINVAL;
        if (!json_object_object_get_ex(o, "generation", &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 1 || json_object_get_int64(v) > UINT_MAX)
                return -EINVAL;
        s->generation = (unsigned) json_object_get_int64(v);
        return 0;
}

int reexec_state_take(ReexecState *ret, char **ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(reexec_state_done) ReexecState s = {};
        _cleanup_free_ char *text = NULL;
        const char *e = getenv(REEXEC_ENV), *what = "its state";
        char *end;
        size_t size;
        long fd;
        int r;

        if (!e)
                return 0;
        errno = 0;
        fd = strtol(e, &end, 10);
        if (errno != 0 || *end || end == e || fd < 3 || fd > INT_MAX)
                return set_message(ret_error, -EINVAL, "$" REEXEC_ENV "='%s' is no file descriptor", e);
        (void) unsetenv(REEXEC_ENV);
        r = read_fd_all((int) fd, STATE_MAX, false, &text, &size);
        safe_close((int) fd);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_error, r, "cannot read the state of the previous image from fd %ld: %s", fd,
                                   strerror(-r));
        o = json_tokener_parse(text);
        if (!o || !json_object_is_type(o, json_type_object))
                return set_message(ret_error, -EINVAL, "the state of the previous image is not a JSON object");
        r = state_parse(o, &s, &what);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_error, r, "cannot take over %s of the previous image: %s", what, strerror(-r));
        *ret = s;
        s = (ReexecState) {};
        return 1;
}

/* ---- the old image's side ---------------------------------------------------------------------- */

static int add_fd(json_object *o, const char *key, int fd) {
        if (fd_cloexec(fd, 0) < 0)
                return -EBADF;
        return json_add(o, key, json_object_new_int(fd));
}

static int add_secret(json_object *o, const char *key, const char *name, const void *data, size_t size) {
        int fd = memfd_new_data(name, data, size);

        if (fd < 0)
                return fd;
        return add_fd(o, key, fd);      /* the fd stays open for the new image */
}

/* What the new image takes over; the fds it names are left open, FD_CLOEXEC cleared. */
static int state_build(Manager *m, const int *fds, const unsigned *tags, size_t n, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *a = json_object_new_array();
        int r;

        if (!o || !a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *l = json_object_new_object();

                if (!l || json_object_array_add(a, l) < 0) {
                        json_object_put(l);
                        return -ENOMEM;
                }
                r = add_fd(l, "fd", fds[i]);
                if (r >= 0)
                        r = json_add(l, "tag", json_object_new_int64(tags ? tags[i] : 0));
                if (r < 0)
                        return r;
        }
        r = json_add(o, "listeners", STEAL(a));
        if (r >= 0)
                r = add_secret(o, "tokenFd", "sandbox-runner-api-token", m->secrets.token, strlen(m->secrets.token));
        if (r >= 0)
                r = add_secret(o, "signingKeyFd", "sandbox-runner-signing-key", m->secrets.signing_key,
                               m->secrets.signing_key_size);
        if (r >= 0 && m->cgroups) {
                json_object *c = NULL;

                r = cgroup_root_export(m->cgroups, &c);
                if (r >= 0)
                        r = json_add(o, "cgroups", c);
        }
        if (r >= 0 && m->cgroups_reason)
                r = json_add(o, "cgroupsReason", json_object_new_string(m->cgroups_reason));
        if (r >= 0 && m->identity_error)
                r = json_add(o, "identityError", json_object_new_string(m->identity_error));
        if (r >= 0)
                r = json_add(o, "generation", json_object_new_int64((int64_t) m->generation + 1));
        if (r < 0)
                return r;
        *ret = STEAL(o);
        return 0;
}

static int state_memfd(json_object *o) {
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        int fd;

        if (!text)
                return -ENOMEM;
        fd = memfd_new_data("sandbox-runner-reexec", text, strlen(text));
        if (fd < 0)
                return fd;
        if (fd_cloexec(fd, 0) < 0) {
                safe_close(fd);
                return -EBADF;
        }
        return fd;
}

static int exec_with_state(const char *path, char *const argv[], json_object *o) {
        char value[32];
        int fd = state_memfd(o), r;

        if (fd < 0)
                return fd;
        (void) snprintf(value, sizeof(value), "%d", fd);
        if (setenv(REEXEC_ENV, value, 1) < 0) {
                safe_close(fd);
                return -ENOMEM;
        }
        (void) execv(path, argv);
        r = negative_errno();
        (void) unsetenv(REEXEC_ENV);
        safe_close(fd);
        return r;
}

static uint64_t now_mono(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

int manager_reexec(Manager **mp, char *const argv[]) {
        _cleanup_(json_object_putp) json_object *state = NULL;
        _cleanup_free_ int *fds = NULL;
        _cleanup_free_ unsigned *tags = NULL;
        Manager *m = *mp;
        char path[PATH_MAX];
        unsigned generation;
        uint64_t deadline;
        size_t n = 0;
        ssize_t l;
        int r;

        l = readlink("/proc/self/exe", path, sizeof(path) - 1);
        if (l < 0)
                return log_error_errno(errno, "Cannot re-execute: /proc/self/exe cannot be read: %m");
        path[l] = '\0';
        if ((size_t) l > strlen(DELETED_SUFFIX) && streq(path + l - strlen(DELETED_SUFFIX), DELETED_SUFFIX))
                path[l - strlen(DELETED_SUFFIX)] = '\0';

        r = http_server_take_listeners(m->http, &fds, &tags, &n);
        if (r >= 0)
                r = state_build(m, fds, tags, n, &state);
        if (r < 0)
                return log_error_errno(r, "Cannot re-execute: failed to hand the listening sockets and secrets on: %m");
        /* The cgroup directories' fds go on to the new image: freeing the Manager must not close them. */
        m->cgroups = NULL;
        generation = m->generation + 1;
        *mp = manager_free(m);   /* stops what it started (gateways, keepers, units) as at any exit */

        log_struct(LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_REEXECUTED,
                   "SANDBOX_VERSION=%s", PACKAGE_VERSION,
                   "SANDBOX_BINARY=%s", path,
                   "SANDBOX_GENERATION=%u", generation,
                   "MESSAGE=Re-executing %s (re-execution %u), keeping %zu listening socket%s.", path, generation, n,
                   n == 1 ? "" : "s");
        deadline = now_mono() + EXEC_RETRY_USEC;
        for (;;) {
                r = exec_with_state(path, argv, state);
                /* ETXTBSY: a linker is still writing it; ENOENT: between its unlink and rename. */
                if ((r != -ETXTBSY && r != -ENOENT) || now_mono() >= deadline)
                        break;
                (void) usleep(100 * 1000);
        }

        _cleanup_free_ char *why = NULL;
        if (asprintf(&why, "%s could not be executed (%s); this is the image started before it was replaced",
                     path, strerror(-r)) < 0)
                return log_oom();
        log_struct_errno(LOG_ERR, r,
                         "MESSAGE_ID=" SR_MESSAGE_REEXECUTED,
                         "SANDBOX_BINARY=%s", path,
                         "SANDBOX_GENERATION=%u", generation,
                         "SANDBOX_STALE_BINARY=%s", why,
                         "MESSAGE=Failed to execute %s: %m. Re-executing the old image instead; it no longer retires "
                         "because its file was replaced (SIGHUP tries again).", path);
        if (json_add(state, "staleBinary", json_object_new_string(why)) < 0)
                return log_oom();
        r = exec_with_state("/proc/self/exe", argv, state);
        return log_error_errno(r, "Failed to re-execute the old image too: %m. Exiting.");
}
