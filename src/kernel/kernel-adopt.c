/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kernels across a daemon restart (kernel-adopt.h): their records, leaving them running when the
 * daemon stops, and re-adopting them (or ending them as interrupted) when the next one starts.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "execution/execution-context.h"
#include "execution/execution.h"
#include "kernel/kernel-adopt.h"
#include "kernel/kernel-internal.h"
#include "util/fd-util.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/thread-task.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"
#include "workspace/workspace.h"

#define RECORD_SUFFIX ".json"
#define RECORD_NAME_MAX (JUPYTER_UUID_LEN + sizeof(RECORD_SUFFIX))
#define RECORD_BYTES_MAX (1024U * 1024U)

struct KernelAdopted {
        char *unit;                      /* the scope the previous daemon started for its run */
        pid_t keeper_pid, sandbox_pid;
        int keeper_pidfd;
        int sandbox_pidfd;               /* the sandbox's pid 1: its exit is the pid namespace's end */
        int lease_fd;                    /* the workspace's write lease, taken again */
        sd_event_source *keeper_source;
        sd_event_source *lifetime_timer;
};

static void record_name(const Kernel *k, char ret[static RECORD_NAME_MAX]) {
        (void) snprintf(ret, RECORD_NAME_MAX, "%s" RECORD_SUFFIX, k->id);
}

static int add_str(json_object *o, const char *key, const char *v) {
        return v ? json_add(o, key, json_object_new_string(v)) : 0;
}

/* What every record holds (a tombstone too): who the kernel is and what it was given. */
static json_object *record_base(Kernel *k) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || add_str(o, "id", k->id) < 0 || add_str(o, "owner", k->owner) < 0 ||
            add_str(o, "spec", k->spec) < 0 || add_str(o, "workspaceId", k->workspace_id) < 0 ||
            json_add(o, "env", json_object_get(k->env)) < 0 ||
            (k->limits && json_add(o, "limits", json_object_get(k->limits)) < 0) ||
            (k->network && json_add(o, "network", json_object_get(k->network)) < 0) ||
            json_add(o, "memoryMax", json_new_u64(k->memory_max)) < 0 ||
            json_add(o, "tasksMax", json_new_u64(k->tasks_max)) < 0 ||
            json_add(o, "cpuQuotaPercent", json_new_u64(k->cpu_quota_percent)) < 0 ||
            json_add(o, "generation", json_new_u64(k->generation)) < 0 ||
            json_add(o, "createdMonotonicUsec", json_new_u64(k->created_usec)) < 0 ||
            json_add(o, "lastActivityUsec", json_new_u64(k->last_activity_usec)) < 0)
                return NULL;
        return STEAL(o);
}

static int record_store(Kernel *k, json_object *o) {
        char name[RECORD_NAME_MAX];
        int r;

        if (!o)
                return -ENOMEM;
        record_name(k, name);
        r = json_write_file_atomic_at(k->manager->dir_fd, name, o, JSON_C_TO_STRING_PLAIN, 0600);
        if (r < 0)
                log_warning_errno(r, "Kernel '%s': its record cannot be written, it will not outlive the daemon: %m",
                                  k->id);
        return r;
}

/* The record of a live kernel: the base, its key, and its run's scope and pids (none: no scope). */
static int record_write_live(Kernel *k, const char *unit, pid_t keeper, pid_t sandbox) {
        _cleanup_(json_object_putp) json_object *o = record_base(k);

        if (!o || add_str(o, "key", k->key) < 0 || add_str(o, "unit", unit) < 0 ||
            json_add(o, "keeperPid", json_object_new_int(keeper)) < 0 ||
            json_add(o, "sandboxPid", json_object_new_int(sandbox)) < 0)
                return -ENOMEM;
        return record_store(k, o);
}

void kernel_record_write(Kernel *k) {
        if (k->exec)
                (void) record_write_live(k, execution_scope_unit(k->exec), execution_keeper_pid(k->exec),
                                         execution_sandbox_pid(k->exec));
        else if (k->adopted)
                (void) record_write_live(k, k->adopted->unit, k->adopted->keeper_pid, k->adopted->sandbox_pid);
}

void kernel_record_end(Kernel *k) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char name[RECORD_NAME_MAX];

        if (k->manager->stopping && k->reason == KERNEL_END_INTERRUPTED) {
                /* The next daemon lists it as interrupted (a client asking learns why it is gone). */
                o = record_base(k);
                if (o && json_add(o, "reason", json_object_new_string("interrupted")) >= 0 &&
                    record_store(k, o) >= 0)
                        return;
        }
        record_name(k, name);
        if (unlinkat(k->manager->dir_fd, name, 0) < 0 && errno != ENOENT)
                log_debug_errno(errno, "Kernel '%s': its record cannot be removed: %m", k->id);
}

/* ---- leaving, at the daemon's stop ---------------------------------------------------------- */

int kernel_leave(Kernel *k) {
        _cleanup_free_ char *name = NULL;
        const char *unit;
        pid_t keeper, sandbox;
        int r;

        if ((k->state != KERNEL_IDLE && k->state != KERNEL_BUSY) || !k->ready || k->restarting)
                return -EOPNOTSUPP;
        if (k->exec) {
                unit = execution_scope_unit(k->exec);
                keeper = execution_keeper_pid(k->exec);
                sandbox = execution_sandbox_pid(k->exec);
        } else if (k->adopted) {
                unit = k->adopted->unit;
                keeper = k->adopted->keeper_pid;
                sandbox = k->adopted->sandbox_pid;
        } else
                return -EOPNOTSUPP;
        if (!unit || keeper <= 0)
                return -EOPNOTSUPP;
        /* Ours: leaving frees the run's scope object, and with it the name. */
        name = strdup(unit);
        if (!name)
                return -EOPNOTSUPP;
        unit = name;
        r = record_write_live(k, unit, keeper, sandbox);
        if (r < 0)
                return -EOPNOTSUPP;
        if (k->exec) {
                r = execution_leave(k->exec);
                if (r < 0) {
                        kernel_record_end(k);
                        return r;
                }
                k->exec = NULL;
        }
        if (k->adopted)
                kernel_adopted_drop(k, true);
        log_struct(LOG_NOTICE,
                   "SANDBOX_KERNEL_ID=%s", k->id,
                   "SANDBOX_UNIT=%s", unit,
                   "MESSAGE=Kernel '%s' left running in %s for the next daemon to re-adopt.", k->id, unit);
        /* Its directory stays (the sockets, the connection file); its clients are closed. */
        k->dir = mfree(k->dir);
        kernel_free(k);
        return 0;
}

/* ---- the adopted run ------------------------------------------------------------------------ */

pid_t kernel_adopted_sandbox_pid(Kernel *k) {
        return k->adopted ? k->adopted->sandbox_pid : 0;
}

void kernel_adopted_kill(Kernel *k) {
        KernelAdopted *a = k->adopted;

        if (!a)
                return;
        (void) syscall(SYS_pidfd_send_signal, a->sandbox_pidfd, SIGKILL, NULL, 0);
        (void) syscall(SYS_pidfd_send_signal, a->keeper_pidfd, SIGKILL, NULL, 0);
        (void) execution_context_kill_unit(k->manager->exec, a->unit);
}

/* After the kill, before the lease goes: the sandbox's pid 1 exits only once every process of
 * its pid namespace has, so nothing of it can still write to the workspace. Bounded: a run's
 * end waits for the same (execution_wait_init()), here without a loop to come back to. */
static void wait_sandbox_gone(KernelAdopted *a) {
        struct pollfd p = { .fd = a->sandbox_pidfd, .events = POLLIN };

        if (a->sandbox_pidfd >= 0 && poll(&p, 1, 2000) == 0)
                log_warning("The sandbox's pid 1 (%d) of %s did not exit within 2 s of SIGKILL.", (int) a->sandbox_pid,
                            a->unit);
}

/* ---- the end snapshot ------------------------------------------------------------------------ */

/* A re-adopted kernel's run is no Execution, which would snapshot the workspace at its end: this
 * does, in a thread, holding the lease until the snapshot is published (or failed). @resume: the
 * kernel's run ended by itself; kernel_run_ended() follows the snapshot (a restart's next run
 * needs the lease), if the kernel is still there. */
struct AdoptedSnapshot {
        KernelManager *km;
        ThreadTask *task;
        int ws_fd, lease_fd;
        char *kernel_id, *workspace_id, *exec_id;
        bool resume;
        AdoptedSnapshot *next;
};

static void snapshot_unlink_free(AdoptedSnapshot *j) {
        for (AdoptedSnapshot **p = &j->km->adopted_snapshots; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        break;
                }
        j->task = thread_task_free(j->task);   /* waits for a thread still running */
        safe_close(j->ws_fd);
        safe_close(j->lease_fd);               /* the lease goes after the snapshot */
        free(j->kernel_id);
        free(j->workspace_id);
        free(j->exec_id);
        free(j);
}

static int snapshot_work(void *userdata, char **ret_out) {
        AdoptedSnapshot *j = userdata;

        return cas_snapshot(j->km->exec->cas, j->ws_fd, j->workspace_id, j->exec_id,
                            now_usec(CLOCK_REALTIME) / USEC_PER_MSEC, ret_out, NULL);
}

static void on_snapshot_done(ThreadTask *t, int error, const char *out, void *userdata) {
        AdoptedSnapshot *j = userdata;
        KernelManager *km = j->km;
        _cleanup_free_ char *id = STEAL(j->kernel_id);
        bool resume = j->resume;

        if (error < 0)
                log_warning_errno(error, "Failed to snapshot workspace '%s' after the re-adopted kernel '%s': %m",
                                  j->workspace_id, id);
        else {
                log_debug("Workspace '%s' snapshotted after the re-adopted kernel '%s': %s", j->workspace_id, id, out);
                (void) workspace_heads_publish(&km->exec->heads, j->workspace_id, j->exec_id, out);
                km->exec->snapshot_published(km->exec->userdata);
        }
        snapshot_unlink_free(j);
        if (!resume)
                return;
        for (Kernel *k = km->kernels; k; k = k->next)
                if (streq(k->id, id) && k->final_snapshot) {
                        k->final_snapshot = false;
                        kernel_run_ended(k, KERNEL_END_CRASHED);
                        return;
                }
}

/* Takes the lease (@a's); Return: whether the snapshot started (else the lease is released). */
static bool snapshot_start(Kernel *k, KernelAdopted *a, bool resume) {
        KernelManager *km = k->manager;
        AdoptedSnapshot *j;

        if (!km->exec->cas || a->lease_fd < 0) {
                a->lease_fd = safe_close(a->lease_fd);
                return false;
        }
        j = calloc(1, sizeof(*j));
        if (!j) {
                a->lease_fd = safe_close(a->lease_fd);
                return false;
        }
        *j = (AdoptedSnapshot) {
                .km = km, .resume = resume, .lease_fd = STEAL_FD(a->lease_fd),
                .ws_fd = workspace_open(km->exec->workspaces_fd, k->workspace_id),
                .kernel_id = strdup(k->id), .workspace_id = strdup(k->workspace_id),
        };
        j->next = km->adopted_snapshots;
        km->adopted_snapshots = j;
        if (j->ws_fd < 0 || !j->kernel_id || !j->workspace_id ||
            asprintf(&j->exec_id, "kernel-%s-%u", k->id, k->generation) < 0 ||
            thread_task_start(km->event, snapshot_work, j, on_snapshot_done, j, &j->task) < 0) {
                log_warning("Kernel '%s': its workspace '%s' is not snapshotted at its end.", k->id, k->workspace_id);
                snapshot_unlink_free(j);
                return false;
        }
        return true;
}

void kernel_adopted_snapshots_free(KernelManager *km) {
        while (km->adopted_snapshots)
                snapshot_unlink_free(km->adopted_snapshots);
}

/* The kill (unless @keep), then what the adoption holds; the lease goes after the end snapshot
 * (not when kept: the kernel goes on). Return: whether a snapshot started with @resume. */
static bool adopted_drop(Kernel *k, bool keep, bool resume) {
        KernelAdopted *a = STEAL(k->adopted);
        bool started = false;

        if (!a)
                return false;
        k->adopted = a;
        if (!keep) {
                kernel_adopted_kill(k);
                wait_sandbox_gone(a);
                started = snapshot_start(k, a, resume);
        }
        k->adopted = NULL;
        a->keeper_source = sd_event_source_disable_unref(a->keeper_source);
        a->lifetime_timer = sd_event_source_disable_unref(a->lifetime_timer);
        safe_close(a->keeper_pidfd);
        safe_close(a->sandbox_pidfd);
        safe_close(a->lease_fd);
        free(a->unit);
        free(a);
        return started;
}

void kernel_adopted_drop(Kernel *k, bool keep) {
        (void) adopted_drop(k, keep, false);
}

static int on_keeper_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Kernel *k = userdata;
        siginfo_t si = {};

        /* Our child only after a re-exec; otherwise pid 1 reaps it. */
        (void) waitid(P_PIDFD, (id_t) fd, &si, WEXITED | WNOHANG);
        log_debug("Kernel '%s': the keeper of its re-adopted sandbox exited.", k->id);
        /* Whatever of the sandbox may be left goes before the snapshot, the lease (and a restart's
         * next run) after it. */
        kernel_wire_close(k);
        if (adopted_drop(k, false, true)) {
                k->final_snapshot = true;
                return 0;
        }
        kernel_run_ended(k, KERNEL_END_CRASHED);
        return 0;
}

static int on_lifetime(sd_event_source *s, uint64_t usec, void *userdata) {
        kernel_end(userdata, KERNEL_END_LIFETIME);
        return 0;
}

/* ---- re-adoption, at start ------------------------------------------------------------------ */

static const char *rec_str(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v) : NULL;
}

static uint64_t rec_u64(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int) &&
                               json_object_get_int64(v) > 0 ? (uint64_t) json_object_get_int64(v) : 0;
}

static json_object *rec_get(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && !json_object_is_type(v, json_type_null)
               ? json_object_get(v) : NULL;
}

/* A Kernel as the record describes it, in the manager's list (not counted, no run). */
static int kernel_from_record(KernelManager *km, json_object *o, const char *id, Kernel **ret) {
        const char *owner = rec_str(o, "owner"), *key = rec_str(o, "key"), *ws = rec_str(o, "workspaceId");
        Kernel *k;
        int r;

        if (!ws || !workspace_id_valid(ws) || !rec_str(o, "spec"))
                return -EBADMSG;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        *k = (Kernel) {
                .manager = km,
                .state = KERNEL_STARTING,
                .created_usec = rec_u64(o, "createdMonotonicUsec"),
                .last_activity_usec = rec_u64(o, "lastActivityUsec"),
                .last_activity_mono = now_usec(CLOCK_MONOTONIC),
                .generation = (unsigned) rec_u64(o, "generation"),
                .memory_max = rec_u64(o, "memoryMax"),
                .tasks_max = rec_u64(o, "tasksMax"),
                .cpu_quota_percent = (unsigned) rec_u64(o, "cpuQuotaPercent"),
                .next = km->kernels,
        };
        if (km->kernels)
                km->kernels->prev = k;
        km->kernels = k;
        memcpy(k->id, id, JUPYTER_UUID_LEN);
        if (key && strlen(key) == KERNEL_KEY_LEN)
                memcpy(k->key, key, KERNEL_KEY_LEN);
        k->spec = strdup(rec_str(o, "spec"));
        k->owner = owner ? strdup(owner) : NULL;
        k->workspace_id = strdup(ws);
        k->env = rec_get(o, "env") ?: json_object_new_object();
        k->limits = rec_get(o, "limits");
        k->network = rec_get(o, "network");
        r = jupyter_uuid_new(k->session);
        if (r >= 0)
                r = jupyter_digest_history_new(&k->digests);
        if (r >= 0)
                r = kernel_routes_new(&k->routes);
        if (r >= 0 && (!k->spec || (owner && !k->owner) || !k->workspace_id || !k->env))
                r = -ENOMEM;
        if (r < 0) {
                kernel_free(k);
                return r;
        }
        *ret = k;
        return 0;
}

/* Whether @pid is a process of the scope @unit (and so not a reused pid). */
static bool pid_in_unit(pid_t pid, const char *unit) {
        _cleanup_free_ char *path = NULL, *text = NULL, *needle = NULL;

        if (pid <= 1 || asprintf(&path, "/proc/%d/cgroup", (int) pid) < 0 || asprintf(&needle, "/%s\n", unit) < 0)
                return false;
        if (read_file_limited(AT_FDCWD, path, 0, 64 * 1024, READ_FILE_UP_TO_MAX, &text, NULL) < 0)
                return false;
        return strstr(text, needle) != NULL;
}

/* The run the record names, taken over: its keeper in its scope, the workspace's lease.
 * Return: 0, or -errno with the reason logged (the caller ends the kernel). */
static int adopt_run(Kernel *k, json_object *o) {
        KernelManager *km = k->manager;
        _cleanup_close_ int ws_fd = -EBADF;
        const char *unit = rec_str(o, "unit");
        KernelAdopted *a;
        int r;

        if (!unit || km->exec->limits != LIMITS_SYSTEMD_SCOPE || !km->exec->scopes || strlen(k->key) != KERNEL_KEY_LEN)
                return log_notice_errno(-EOPNOTSUPP, "Kernel '%s' did not run in a systemd scope "
                                        "(or this daemon has none): it cannot be re-adopted.", k->id);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        *a = (KernelAdopted) { .keeper_pidfd = -EBADF, .sandbox_pidfd = -EBADF, .lease_fd = -EBADF };
        k->adopted = a;
        a->unit = strdup(unit);
        a->keeper_pid = (pid_t) rec_u64(o, "keeperPid");
        a->sandbox_pid = (pid_t) rec_u64(o, "sandboxPid");
        if (!a->unit)
                return -ENOMEM;
        if (!pid_in_unit(a->keeper_pid, unit))
                return log_notice_errno(-ESRCH, "Kernel '%s': its sandbox (%s) is gone.", k->id, unit);
        a->keeper_pidfd = (int) syscall(SYS_pidfd_open, a->keeper_pid, 0);
        if (a->keeper_pidfd >= 0 && !pid_in_unit(a->keeper_pid, unit))
                a->keeper_pidfd = safe_close(a->keeper_pidfd);   /* the pid was reused meanwhile */
        if (a->keeper_pidfd < 0)
                return log_notice_errno(-ESRCH, "Kernel '%s': its sandbox (%s) is gone.", k->id, unit);
        if (pid_in_unit(a->sandbox_pid, unit))
                a->sandbox_pidfd = (int) syscall(SYS_pidfd_open, a->sandbox_pid, 0);
        if (a->sandbox_pidfd >= 0 && !pid_in_unit(a->sandbox_pid, unit))
                a->sandbox_pidfd = safe_close(a->sandbox_pidfd);
        if (a->sandbox_pidfd < 0)
                a->sandbox_pid = 0;   /* no SIGINT fallback then; interrupt_request still works */
        ws_fd = workspace_open(km->exec->workspaces_fd, k->workspace_id);
        a->lease_fd = ws_fd >= 0 ? workspace_lease_try(ws_fd) : ws_fd;
        if (a->lease_fd < 0)
                return log_warning_errno(a->lease_fd, "Kernel '%s': the lease of workspace '%s' cannot be taken "
                                         "again: %m", k->id, k->workspace_id);
        r = sd_event_add_io(km->event, &a->keeper_source, a->keeper_pidfd, EPOLLIN, on_keeper_exit, k);
        if (r >= 0 && km->config->kernels_max_lifetime_usec > 0)
                r = sd_event_add_time(km->event, &a->lifetime_timer, CLOCK_MONOTONIC,
                                      MAX(k->created_usec + km->config->kernels_max_lifetime_usec,
                                          now_usec(CLOCK_MONOTONIC) + USEC_PER_MSEC),
                                      USEC_PER_SEC, on_lifetime, k);
        if (r < 0)
                return r;
        if (asprintf(&k->dir, "%s/%s", km->dir, k->id) < 0) {
                k->dir = NULL;
                return -ENOMEM;
        }
        return kernel_await_ready(k);
}

static void adopt_one(KernelManager *km, const char *name) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *text = NULL;
        char id[JUPYTER_UUID_LEN + 1];
        Kernel *k = NULL;
        size_t size;
        int r;

        memcpy(id, name, JUPYTER_UUID_LEN);
        id[JUPYTER_UUID_LEN] = '\0';
        r = read_file_limited(km->dir_fd, name, O_NOFOLLOW, RECORD_BYTES_MAX, 0, &text, &size);
        if (r >= 0)
                r = json_parse_text(text, size, &o);
        if (r >= 0 && (!json_object_is_type(o, json_type_object) || !rec_str(o, "id") || !streq(rec_str(o, "id"), id)))
                r = -EBADMSG;
        if (r >= 0)
                r = kernel_from_record(km, o, id, &k);
        (void) unlinkat(km->dir_fd, name, 0);   /* a live kernel writes it again once ready */
        if (r < 0) {
                log_warning_errno(r, "The record '%s' of a previous daemon's kernel cannot be used, removed: %m", name);
                return;
        }
        if (rec_str(o, "reason")) {
                /* Ended when the previous daemon stopped: listed as interrupted for a while. */
                (void) rm_rf_at(km->dir_fd, id);
                kernel_end(k, KERNEL_END_INTERRUPTED);
                return;
        }
        k->counted = true;
        km->n_live++;
        km->busy_ref(km->userdata);
        r = adopt_run(k, o);
        if (r >= 0) {
                log_struct(LOG_NOTICE,
                           "SANDBOX_KERNEL_ID=%s", k->id,
                           "SANDBOX_UNIT=%s", k->adopted->unit,
                           "SANDBOX_WORKSPACE=%s", k->workspace_id,
                           "MESSAGE=Kernel '%s' of a previous daemon re-adopted (%s, workspace '%s').", k->id,
                           k->adopted->unit, k->workspace_id);
                return;
        }
        /* What may be left of it goes (a scope we cannot watch), and it is listed as interrupted. */
        if (!k->dir && asprintf(&k->dir, "%s/%s", km->dir, k->id) < 0)
                k->dir = NULL;
        if (rec_str(o, "unit"))
                (void) execution_context_kill_unit(km->exec, rec_str(o, "unit"));
        kernel_end(k, KERNEL_END_INTERRUPTED);
}

void kernel_adopt_all(KernelManager *km) {
        _cleanup_close_ int fd = fcntl(km->dir_fd, F_DUPFD_CLOEXEC, 3);
        char names[256][RECORD_NAME_MAX];
        size_t n = 0;
        struct dirent *de;
        DIR *d;

        d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d)
                return;
        fd = -EBADF;   /* the DIR's now */
        /* Names first: adopting writes and removes files in the directory being read. */
        while ((de = readdir(d)) && n < ELEMENTSOF(names)) {
                size_t l = strlen(de->d_name);
                char id[JUPYTER_UUID_LEN + 1];

                if (l != JUPYTER_UUID_LEN + strlen(RECORD_SUFFIX) || !streq(de->d_name + JUPYTER_UUID_LEN, RECORD_SUFFIX))
                        continue;
                memcpy(id, de->d_name, JUPYTER_UUID_LEN);
                id[JUPYTER_UUID_LEN] = '\0';
                if (jupyter_uuid_valid(id))
                        memcpy(names[n++], de->d_name, RECORD_NAME_MAX);
        }
        closedir(d);
        for (size_t i = 0; i < n; i++)
                adopt_one(km, names[i]);
}
