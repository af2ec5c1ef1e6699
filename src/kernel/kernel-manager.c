/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The KernelManager: the kernelspecs, the cap (counted when a request arrives), the kernels'
 * directories under the runtime directory, the ZMQ context, and a new kernel's making: its id,
 * key, directory and connection file, its workspace checked, its first run.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "config/config.h"
#include "execution/execution-context.h"
#include "kernel/kernel-adopt.h"
#include "kernel/kernel-internal.h"
#include "util/fs-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/time-util.h"
#include "workspace/workspace.h"

/* What a previous daemon left and no record re-adopted (kernel_adopt_all() ran first): it goes. */
static void remove_stale(KernelManager *km) {
        _cleanup_close_ int fd = fcntl(km->dir_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d)
                return;
        fd = -EBADF;   /* the DIR's now */
        while ((de = readdir(d)))
                if (jupyter_uuid_valid(de->d_name) && !kernel_manager_find(km, NULL, de->d_name) &&
                    rm_rf_at(km->dir_fd, de->d_name) >= 0)
                        log_debug("Removed the directory of kernel '%s' of a previous daemon.", de->d_name);
        closedir(d);
}

int kernel_manager_new(const KernelManagerParams *p, KernelManager **ret) {
        KernelManager *km;
        int r;

        km = calloc(1, sizeof(*km));
        if (!km)
                return -ENOMEM;
        *km = (KernelManager) {
                .event = p->event,
                .exec = p->exec,
                .environments = p->environments,
                .config = p->config,
                .dir_fd = -EBADF,
                .busy_ref = p->busy_ref,
                .busy_unref = p->busy_unref,
                .userdata = p->userdata,
        };
        if (asprintf(&km->dir, "%s/kernels", p->runtime_dir) < 0) {
                km->dir = NULL;
                kernel_manager_free(km);
                return -ENOMEM;
        }
        /* <dir>/<uuid>/k-N must fit a socket address. */
        if (strlen(km->dir) + 1 + JUPYTER_UUID_LEN + strlen("/k-N") > KERNEL_SUN_PATH_MAX - 1) {
                kernel_manager_free(km);
                return -ENAMETOOLONG;
        }
        if (mkdir(km->dir, 0700) < 0 && errno != EEXIST) {
                r = -errno;
                kernel_manager_free(km);
                return r;
        }
        km->dir_fd = open(km->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        km->zmq = zmq_ctx_new();
        if (km->dir_fd < 0 || !km->zmq) {
                r = km->dir_fd < 0 ? -errno : -ENOMEM;
                kernel_manager_free(km);
                return r;
        }
        kernel_adopt_all(km);
        remove_stale(km);
        kernel_pool_schedule(km);   /* Prespawn=: once the loop runs */
        *ret = km;
        return 0;
}

void kernel_manager_stop(KernelManager *km) {
        if (!km)
                return;
        km->stopping = true;
        kernel_pool_drain(km);    /* reason deleted, their workspaces removed */
        /* Kept for the next daemon where they run in a scope, else ended (interrupted). */
        for (Kernel *k = km->kernels, *next; k; k = next) {
                next = k->next;
                if (k->state == KERNEL_DEAD)
                        continue;
                if (kernel_leave(k) < 0)
                        kernel_end(k, KERNEL_END_INTERRUPTED);
        }
}

KernelManager *kernel_manager_free(KernelManager *km) {
        if (!km)
                return NULL;
        while (km->kernels) {
                kernel_end(km->kernels, KERNEL_END_INTERRUPTED);
                kernel_free(km->kernels);
        }
        kernel_pool_free(km);
        kernel_adopted_snapshots_free(km);
        if (km->zmq)
                (void) zmq_ctx_term(km->zmq);
        safe_close(km->dir_fd);
        free(km->dir);
        return mfree(km);
}

Kernel *kernel_manager_find(KernelManager *km, const char *owner, const char *id) {
        if (!id)
                return NULL;
        for (Kernel *k = km->kernels; k; k = k->next)
                if (!k->prespawned && streq(k->id, id) && (!owner || !k->owner || streq(owner, k->owner)))
                        return k;
        return NULL;
}

json_object *kernel_manager_list(KernelManager *km, const char *owner) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (Kernel *k = km->kernels; k; k = k->next)
                if (!k->prespawned && (!owner || !k->owner || streq(owner, k->owner)) && json_array_add(a, kernel_model(k)) < 0)
                        return NULL;
        return STEAL(a);
}

Kernel *kernel_manager_find_by_workspace(KernelManager *km, const char *workspace_id) {
        if (!km || !workspace_id)
                return NULL;
        for (Kernel *k = km->kernels; k; k = k->next)
                if (k->state != KERNEL_DEAD && k->workspace_id && streq(k->workspace_id, workspace_id))
                        return k;
        return NULL;
}

unsigned kernel_manager_count(KernelManager *km) {
        return km->n_live;
}

static int set_error(char **ret_error, int r, const char *fmt, const char *arg) {
        if (ret_error && asprintf(ret_error, fmt, arg) < 0)
                *ret_error = NULL;
        return r;
}

/* The workspace: an existing one must not be leased now (an execution on it, another kernel). */
static int check_workspace(KernelManager *km, const char *id, bool fresh, char **ret_error) {
        _cleanup_close_ int fd = -EBADF, lease = -EBADF;
        struct stat st;

        if (!workspace_id_valid(id))
                return set_error(ret_error, -EINVAL, "'workspaceId' '%.128s' is not a valid workspace id", id);
        if (fresh)
                return 0;
        if (fstatat(km->exec->workspaces_fd, id, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return set_error(ret_error, -ENOENT, "workspace '%s' does not exist", id);
        fd = workspace_open(km->exec->workspaces_fd, id);
        if (fd < 0)
                return set_error(ret_error, fd, "workspace '%s' cannot be opened", id);
        lease = workspace_lease_try(fd);
        if (lease == -EWOULDBLOCK)
                return set_error(ret_error, -EBUSY, "workspace '%s' is in use by another execution or kernel", id);
        if (lease < 0)
                return set_error(ret_error, lease, "workspace '%s' cannot be leased", id);
        /* Released now: the kernel's run takes it (a flock of another open file would conflict). */
        return 0;
}

static int kernel_make_dir(Kernel *k) {
        KernelManager *km = k->manager;
        _cleanup_(json_object_putp) json_object *conn = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (mkdirat(km->dir_fd, k->id, 0700) < 0)
                return -errno;
        if (asprintf(&k->dir, "%s/%s", km->dir, k->id) < 0) {
                k->dir = NULL;
                (void) rm_rf_at(km->dir_fd, k->id);
                return -ENOMEM;
        }
        fd = openat(km->dir_fd, k->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        conn = kernel_connection_json(k->key, k->spec);
        if (!conn)
                return -ENOMEM;
        r = json_write_file_atomic_at(fd, KERNEL_CONNECTION_FILE, conn, JSON_C_TO_STRING_PLAIN, 0600);
        return r;
}

int kernel_new(KernelManager *km, const KernelStartRequest *r, Kernel **ret, char **ret_error) {
        Kernel *k;
        int q;

        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        *k = (Kernel) {
                .manager = km,
                .state = KERNEL_STARTING,
                .created_usec = now_usec(CLOCK_MONOTONIC),
                .next = km->kernels,
        };
        if (km->kernels)
                km->kernels->prev = k;
        km->kernels = k;
        kernel_touch(k);
        q = jupyter_uuid_new(k->id);
        if (q >= 0)
                q = jupyter_uuid_new(k->session);
        if (q >= 0)
                q = kernel_connection_key_new(k->key);
        if (q < 0)
                goto fail;
        k->spec = strdup(r->spec ?: KERNEL_SPEC_DEFAULT);
        k->owner = r->owner ? strdup(r->owner) : NULL;
        if (r->workspace_id)
                k->workspace_id = strdup(r->workspace_id);
        else if (asprintf(&k->workspace_id, "kernel-%s", k->id) < 0)
                k->workspace_id = NULL;
        k->env = r->env ? json_object_get(r->env) : json_object_new_object();
        k->limits = json_object_get(r->limits);
        k->network = json_object_get(r->network);
        q = jupyter_digest_history_new(&k->digests);
        if (q >= 0)
                q = kernel_routes_new(&k->routes);
        if (q >= 0 && (!k->spec || (r->owner && !k->owner) || !k->workspace_id || !k->env))
                q = -ENOMEM;
        if (q >= 0 && !json_object_is_type(k->env, json_type_object))
                q = set_error(ret_error, -EINVAL, "%s", "'env' must be an object of strings");
        /* The network of runs: the policy in force (absent, or "default"), or none at all. */
        if (q >= 0 && k->network && !json_object_is_type(k->network, json_type_null) &&
            (!json_object_is_type(k->network, json_type_string) ||
             (!streq(json_object_get_string(k->network), "none") &&
              !streq(json_object_get_string(k->network), "default"))))
                q = set_error(ret_error, -EINVAL, "%s", "'network' must be \"none\" or \"default\"");
        if (q >= 0)
                q = check_workspace(km, k->workspace_id, !r->workspace_id, ret_error);
        if (q >= 0)
                q = kernel_make_dir(k);
        if (q < 0)
                goto fail;
        *ret = k;
        return 0;
fail:
        kernel_free(k);
        return q;
}

int kernel_manager_start(KernelManager *km, const KernelStartRequest *r, Kernel **ret, char **ret_error) {
        unsigned max = km->config->kernels_max;
        KernelSpecChoice choice = {};
        KernelStartRequest req;
        Kernel *k = NULL;
        int q;

        if (ret_error)
                *ret_error = NULL;
        if (km->stopping)
                return set_error(ret_error, -ESHUTDOWN, "%s", "the runner is stopping");
        q = kernel_spec_resolve(km, r->spec, r->environment, &choice, ret_error);
        if (q < 0)
                return q;
        /* Counted now, in the one thread: two requests racing never pass the cap together. */
        if (max > 0 && km->n_live >= max) {
                free(choice.environment);
                if (ret_error && asprintf(ret_error, "Resource Limit: %u kernels run already (MaxKernels=%u)",
                                          km->n_live, max) < 0)
                        *ret_error = NULL;
                return -EUSERS;
        }
        /* A prespawned kernel, if one fits: its busy reference is the counted kernel's now. */
        k = choice.environment ? NULL : kernel_pool_take(km, r);
        if (k) {
                k->counted = true;
                km->n_live++;
                *ret = k;
                return 0;
        }
        req = *r;
        req.spec = choice.spec;
        q = kernel_new(km, &req, &k, ret_error);
        if (q < 0) {
                free(choice.environment);
                return q;
        }
        k->environment = STEAL(choice.environment);
        k->r_kernel = choice.r;
        k->counted = true;
        km->n_live++;
        km->busy_ref(km->userdata);
        q = kernel_run(k, ret_error);
        if (q >= 0 && k->state == KERNEL_DEAD)
                q = set_error(ret_error, -EIO, "%s", "the kernel's sandbox could not be started");
        if (q < 0) {
                kernel_free(k);
                return q;
        }
        *ret = k;
        return 0;
}
