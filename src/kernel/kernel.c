/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One kernel: its directory and connection file, its run (an execution of the /execute shape:
 * the sandbox argv builder, the seccomp profile, the scope or cgroup limits, the payload uid, the
 * workspace's write lease, a private /tmp, an environment from nothing, the network policy), its
 * readiness (kernel_info nudges until iopub delivers), its state, interrupt, restart, idle cull,
 * and its end (status dead to its clients, the directory removed, the run stopped).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "execution/execution.h"
#include "kernel/kernel-adopt.h"
#include "kernel/kernel-internal.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/string-table.h"
#include "util/time-util.h"
#include "workspace/workspace.h"

static const char *const kernel_state_table[_KERNEL_STATE_MAX] = {
        [KERNEL_STARTING] = "starting",
        [KERNEL_IDLE] = "idle",
        [KERNEL_BUSY] = "busy",
        [KERNEL_RESTARTING] = "restarting",
        [KERNEL_DEAD] = "dead",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(kernel_state, KernelState);

static const char *const kernel_end_reason_table[_KERNEL_END_MAX] = {
        [KERNEL_END_NONE] = "none",
        [KERNEL_END_DELETED] = "deleted",
        [KERNEL_END_CULLED] = "culled",
        [KERNEL_END_LIFETIME] = "lifetime",
        [KERNEL_END_OOM] = "oom",
        [KERNEL_END_CRASHED] = "crashed",
        [KERNEL_END_INTERRUPTED] = "interrupted",
        [KERNEL_END_MISBEHAVED] = "misbehaved",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(kernel_end_reason, KernelEndReason);

const char *kernel_id(Kernel *k) {
        return k->id;
}

KernelState kernel_state(Kernel *k) {
        return k->state;
}

KernelEndReason kernel_end_reason(Kernel *k) {
        return k->reason;
}

const char *kernel_owner(Kernel *k) {
        return k->owner;
}

void kernel_touch(Kernel *k) {
        k->last_activity_usec = now_usec(CLOCK_REALTIME);
        k->last_activity_mono = now_usec(CLOCK_MONOTONIC);
}

void kernel_set_state(Kernel *k, KernelState s) {
        if (k->state == KERNEL_DEAD)
                return;
        k->state = s;
}

static void kernel_uncount(Kernel *k) {
        if (!k->counted)
                return;
        k->counted = false;
        k->manager->n_live--;
        k->manager->busy_unref(k->manager->userdata);
}

/* The run is no longer the kernel's: stopped if it still goes, freed by the executions once done. */
static void kernel_drop_exec(Kernel *k) {
        Execution *e = STEAL(k->exec);

        if (k->adopted)
                kernel_adopted_drop(k, false);
        if (!e)
                return;
        execution_cancel(e, EXECUTION_STATUS_CANCELLED);
        execution_detach(e);
}

static void kernel_stop_timers(Kernel *k) {
        k->nudge_timer = sd_event_source_disable_unref(k->nudge_timer);
        k->ready_timer = sd_event_source_disable_unref(k->ready_timer);
        k->interrupt_timer = sd_event_source_disable_unref(k->interrupt_timer);
        k->idle_timer = sd_event_source_disable_unref(k->idle_timer);
        k->dir_watch = sd_event_source_disable_unref(k->dir_watch);
}

static void kernel_destroy(Kernel *k) {
        jupyter_digest_history_free(k->digests);
        kernel_output_free(k->output);
        kernel_routes_free(k->routes);
        json_object_put(k->env);
        json_object_put(k->limits);
        json_object_put(k->network);
        free(k->spec);
        free(k->owner);
        free(k->workspace_id);
        free(k->environment);
        free(k->dir);
        explicit_bzero(k->key, sizeof(k->key));
        free(k);
}

Kernel *kernel_free(Kernel *k) {
        KernelManager *km;

        if (!k || k->free_pending)
                return NULL;
        km = k->manager;
        kernel_wire_drop_pending(k);
        kernel_clients_closed(k);
        kernel_stop_timers(k);
        k->linger_timer = sd_event_source_disable_unref(k->linger_timer);
        kernel_wire_close(k);
        kernel_pool_release(k);
        kernel_drop_exec(k);
        kernel_uncount(k);
        if (k->dir)
                kernel_dir_remove(k);
        if (k->prev)
                k->prev->next = k->next;
        else if (km->kernels == k)
                km->kernels = k->next;
        if (k->next)
                k->next->prev = k->prev;
        k->prev = k->next = NULL;
        if (k->dispatching > 0) {
                k->free_pending = true;   /* kernel_free_pending() frees it once the message is handled */
                return NULL;
        }
        kernel_destroy(k);
        return NULL;
}

void kernel_free_pending(Kernel *k) {
        if (k->free_pending && k->dispatching == 0)
                kernel_destroy(k);
}

static int on_linger(sd_event_source *s, uint64_t usec, void *userdata) {
        kernel_free(userdata);
        return 0;
}

void kernel_end(Kernel *k, KernelEndReason reason) {
        KernelManager *km = k->manager;

        if (k->state == KERNEL_DEAD)
                return;
        k->reason = reason;
        k->state = KERNEL_DEAD;
        log_struct(reason == KERNEL_END_DELETED || reason == KERNEL_END_CULLED ? LOG_INFO : LOG_NOTICE,
                   "MESSAGE_ID=" SR_MESSAGE_KERNEL_ENDED,
                   "SANDBOX_KERNEL_ID=%s", k->id,
                   "SANDBOX_KERNEL_SPEC=%s", k->spec,
                   "SANDBOX_KERNEL_REASON=%s", kernel_end_reason_to_string(reason),
                   "SANDBOX_WORKSPACE=%s", k->workspace_id,
                   "MESSAGE=Kernel '%s' (%s, workspace '%s') ended: %s.", k->id, k->spec, k->workspace_id,
                   kernel_end_reason_to_string(reason));
        kernel_stop_timers(k);
        kernel_wire_drop_pending(k);
        kernel_broadcast_status(k, "dead");
        kernel_clients_closed(k);
        kernel_wire_close(k);
        kernel_pool_release(k);
        kernel_drop_exec(k);
        kernel_uncount(k);
        kernel_record_end(k);
        if (k->dir)
                kernel_dir_remove(k);
        k->dir = mfree(k->dir);
        /* Ended by itself (or culled): listed with its reason for a while, then forgotten. */
        if (sd_event_add_time_relative(km->event, &k->linger_timer, CLOCK_MONOTONIC, KERNEL_DEAD_LINGER_USEC,
                                       USEC_PER_SEC, on_linger, k) < 0)
                log_debug("Kernel '%s' is forgotten at once (no timer).", k->id);
}

int kernel_delete(Kernel *k, KernelEndReason reason) {
        kernel_end(k, reason);
        kernel_free(k);
        return 0;
}

/* ---- idle culling --------------------------------------------------------------------------- */

static int on_idle_check(sd_event_source *s, uint64_t usec, void *userdata) {
        Kernel *k = userdata;
        uint64_t timeout = k->manager->config->kernels_idle_timeout_usec, now = now_usec(CLOCK_MONOTONIC);

        /* A busy kernel runs something: not idle, however long it takes (MaxLifetimeSec= bounds it). */
        if (k->state == KERNEL_IDLE && now >= k->last_activity_mono + timeout) {
                log_struct(LOG_INFO,
                           "MESSAGE_ID=" SR_MESSAGE_KERNEL_CULLED,
                           "SANDBOX_KERNEL_ID=%s", k->id,
                           "SANDBOX_KERNEL_CONNECTIONS=%u", k->n_clients,
                           "SANDBOX_KERNEL_IDLE_SEC=%" PRIu64, (now - k->last_activity_mono) / USEC_PER_SEC,
                           "MESSAGE=Kernel '%s' culled: idle for %" PRIu64 " s (IdleTimeoutSec=), %u connection(s).",
                           k->id, (now - k->last_activity_mono) / USEC_PER_SEC, k->n_clients);
                k->idle_timer = sd_event_source_disable_unref(k->idle_timer);
                kernel_end(k, KERNEL_END_CULLED);
                return 0;
        }
        (void) sd_event_source_set_time(s, MAX(k->last_activity_mono + timeout, now + USEC_PER_SEC));
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

void kernel_arm_idle(Kernel *k) {
        uint64_t timeout = k->manager->config->kernels_idle_timeout_usec;

        if (timeout == 0 || k->idle_timer)
                return;
        if (sd_event_add_time_relative(k->manager->event, &k->idle_timer, CLOCK_MONOTONIC, timeout, USEC_PER_SEC,
                                       on_idle_check, k) < 0)
                log_warning("Kernel '%s' cannot be culled when idle (no timer).", k->id);
}

/* ---- readiness ------------------------------------------------------------------------------ */

void kernel_became_ready(Kernel *k) {
        bool restarted = k->generation > 1;

        k->ready = true;
        k->nudge_timer = sd_event_source_disable_unref(k->nudge_timer);
        k->ready_timer = sd_event_source_disable_unref(k->ready_timer);
        if (k->state == KERNEL_STARTING || k->state == KERNEL_RESTARTING)
                kernel_set_state(k, KERNEL_IDLE);
        kernel_touch(k);
        if (k->prespawned)
                kernel_pool_ready(k);     /* idle from its hand-out on */
        else
                kernel_arm_idle(k);
        kernel_wire_flush_pending(k);
        kernel_record_write(k);
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_KERNEL_STARTED,
                   "SANDBOX_KERNEL_ID=%s", k->id,
                   "SANDBOX_KERNEL_SPEC=%s", k->spec,
                   "SANDBOX_WORKSPACE=%s", k->workspace_id,
                   "SANDBOX_KERNEL_START_MSEC=%" PRIu64, (now_usec(CLOCK_MONOTONIC) - k->created_usec) / USEC_PER_MSEC,
                   "MESSAGE=Kernel '%s' (%s) %s in its sandbox, workspace '%s'.", k->id, k->spec,
                   restarted ? "restarted" : "ready", k->workspace_id);
}

static int on_nudge(sd_event_source *s, uint64_t usec, void *userdata) {
        Kernel *k = userdata;
        char id[JUPYTER_UUID_LEN + 1];
        int r;

        if (k->ready)
                return 0;
        /* Until the kernel listens, the send fails (-EAGAIN): nothing piles up. */
        r = kernel_wire_send_own(k, JUPYTER_CHANNEL_SHELL, "kernel_info_request", NULL, id);
        if (r < 0 && r != -EAGAIN)
                log_debug_errno(r, "Kernel '%s': kernel_info_request not sent: %m", k->id);
        /* Not connected yet: try again soon. Sent: the kernel answers once its loop runs; ask
         * again only now and then (a request can be lost to a kernel that restarted). */
        (void) sd_event_source_set_time_relative(s, r == -EAGAIN ? KERNEL_NUDGE_CONNECT_USEC : KERNEL_NUDGE_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int on_ready_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Kernel *k = userdata;

        k->ready_timer = sd_event_source_disable_unref(k->ready_timer);
        log_warning("Kernel '%s' did not answer kernel_info within %" PRIu64 " s; ending it.", k->id,
                    KERNEL_READY_TIMEOUT_USEC / USEC_PER_SEC);
        kernel_end(k, KERNEL_END_CRASHED);
        return 0;
}

/* ---- the run -------------------------------------------------------------------------------- */

static KernelEndReason reason_of(ExecutionStatus s) {
        switch (s) {
        case EXECUTION_STATUS_MEMORY_LIMIT:
                return KERNEL_END_OOM;
        case EXECUTION_STATUS_TIMEOUT:
                return KERNEL_END_LIFETIME;
        case EXECUTION_STATUS_INTERRUPTED:
                return KERNEL_END_INTERRUPTED;
        case EXECUTION_STATUS_CANCELLED:
                return KERNEL_END_DELETED;
        case EXECUTION_STATUS_RUNNING:
        case EXECUTION_STATUS_EXITED:
        case EXECUTION_STATUS_SIGNALED:
        case EXECUTION_STATUS_TASKS_LIMIT:
        case EXECUTION_STATUS_WORKSPACE_QUOTA_EXCEEDED:
        case EXECUTION_STATUS_FAILED:
        case _EXECUTION_STATUS_MAX:
        case _EXECUTION_STATUS_INVALID:
                break;
        }
        return KERNEL_END_CRASHED;
}

static void remove_sockets(Kernel *k) {
        _cleanup_close_ int fd = openat(k->manager->dir_fd, k->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char name[16];

        for (unsigned port = 1; fd >= 0 && port <= KERNEL_PORT_HB; port++) {
                (void) snprintf(name, sizeof(name), "k-%u", port);
                (void) unlinkat(fd, name, 0);
        }
}

void kernel_run_ended(Kernel *k, KernelEndReason reason) {
        _cleanup_free_ char *error = NULL;

        kernel_wire_close(k);
        if (k->restarting && k->state != KERNEL_DEAD) {
                k->restarting = false;
                remove_sockets(k);
                if (kernel_run(k, &error) >= 0)
                        return;
                log_warning("Kernel '%s' could not be restarted: %s", k->id, error ?: "out of memory");
                kernel_end(k, KERNEL_END_CRASHED);
                return;
        }
        kernel_end(k, reason);
}

static void on_exec_done(Execution *e, void *userdata) {
        Kernel *k = userdata;
        ExecutionStatus status = execution_status(e);
        const char *failure = NULL;

        k->exec = NULL;    /* the executions free it once it has lingered */
        if (status == EXECUTION_STATUS_FAILED && execution_failure(e, &failure) < 0 && failure)
                log_warning("Kernel '%s': its sandbox could not run: %s", k->id, failure);
        kernel_run_ended(k, reason_of(status));
}

int kernel_await_ready(Kernel *k) {
        int r;

        /* The socket directory holds only what the kernel needs (kernel-dir.c). */
        r = kernel_dir_watch(k);
        if (r >= 0)
                r = kernel_wire_connect(k);
        if (r >= 0)
                r = sd_event_add_time_relative(k->manager->event, &k->nudge_timer, CLOCK_MONOTONIC, 0, USEC_PER_MSEC,
                                               on_nudge, k);
        if (r >= 0)
                r = sd_event_add_time_relative(k->manager->event, &k->ready_timer, CLOCK_MONOTONIC,
                                               KERNEL_READY_TIMEOUT_USEC, USEC_PER_SEC, on_ready_timeout, k);
        if (r < 0) {
                kernel_wire_close(k);
                kernel_stop_timers(k);
        }
        return r;
}

/* The body of a run, as /execute would take it: the kernelspec's argv, the env, the limits. */
static json_object *kernel_run_body(Kernel *k) {
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *env = json_object_new_object();
        const Config *c = k->manager->config;
        uint64_t lifetime = c->kernels_max_lifetime_usec, elapsed = now_usec(CLOCK_MONOTONIC) - k->created_usec;
        char *argv[8] = {};
        char id[128];
        size_t n = 0;

        if (!body || !env)
                return NULL;
        /* The kernelspec's argv, the connection file where it says. */
        for (char *const *a = kernel_spec_argv(k->r_kernel); *a && n < ELEMENTSOF(argv) - 1; a++)
                argv[n++] = streq(*a, "{connection_file}") ? (char *) KERNEL_SANDBOX_CONNECTION_FILE : *a;
        (void) snprintf(id, sizeof(id), "kernel-%s-%u", k->id, k->generation);
        json_object_object_foreach(k->env, name, value)
                if (json_add(env, name, json_object_get(value)) < 0)
                        return NULL;
        /* IPython's and matplotlib's caches in the private /tmp, not in the workspace (HOME). */
        if (json_add(env, "IPYTHONDIR", json_object_new_string("/tmp/.ipython")) < 0 ||
            json_add(env, "MPLCONFIGDIR", json_object_new_string("/tmp/.matplotlib")) < 0 ||
            json_add(env, "KERNEL_ID", json_object_new_string(k->id)) < 0)
                return NULL;
        /* The run's wall-clock limit is what remains of the kernel's lifetime (a restart keeps it). */
        lifetime = lifetime == 0 ? KERNEL_NO_LIFETIME_USEC : lifetime > elapsed ? lifetime - elapsed : USEC_PER_MSEC;
        if (json_add(body, "executionId", json_object_new_string(id)) < 0 ||
            json_add(body, "workspaceId", json_object_new_string(k->workspace_id)) < 0 ||
            json_add(body, "argv", json_strv_new(argv)) < 0 ||
            json_add(body, "env", STEAL(env)) < 0 ||
            json_add(body, "timeoutMs", json_new_u64(lifetime / USEC_PER_MSEC)) < 0 ||
            (k->limits && json_add(body, "limits", json_object_get(k->limits)) < 0))
                return NULL;
        return STEAL(body);
}

int kernel_run(Kernel *k, char **ret_error) {
        KernelManager *km = k->manager;
        const Config *c = km->config;
        _cleanup_(json_object_putp) json_object *body = NULL;
        ExecutionRequest *req = NULL;
        ExecutionMaxima max = {
                .default_timeout_usec = KERNEL_NO_LIFETIME_USEC,
                .max_timeout_usec = KERNEL_NO_LIFETIME_USEC,
                .memory_max = c->kernels_memory_max,
                .tasks_max = c->kernels_tasks_max,
                .cpu_quota_percent = c->kernels_cpu_quota_percent,
        };
        Execution *e = NULL;
        int r;

        k->generation++;
        k->ready = k->iopub_heard = k->info_replied = false;
        body = kernel_run_body(k);
        if (!body)
                return -ENOMEM;
        r = execution_request_parse(body, EXECUTION_KIND_EXECUTE, &max, &req, ret_error);
        if (r < 0)
                return r == -EBADMSG ? -EINVAL : r;
        k->memory_max = req->memory_max;
        k->tasks_max = req->tasks_max;
        k->cpu_quota_percent = req->cpu_quota_percent;
        r = execution_new(km->exec, req, &e);
        if (r < 0)
                return r;
        r = kernel_use_environment(k, e, ret_error);
        if (r >= 0)
                r = execution_add_bind(e, k->dir, KERNEL_SANDBOX_DIR, true);
        /* ipykernel sends the code's output over iopub; what reaches its fds 1 and 2 directly
         * (a subprocess's, say) is kept as a bounded head and tail, not up to MaxOutputBytes=. */
        if (r >= 0)
                r = execution_cap_retention(e, KERNEL_OUTPUT_RETENTION_BYTES);
        if (r < 0) {
                execution_free(e);
                return r;
        }
        if (k->network && json_object_is_type(k->network, json_type_string) &&
            streq(json_object_get_string(k->network), "none"))
                execution_set_egress(e, NULL);
        /* Kept across a daemon restart where it runs in a systemd scope (kernel-adopt.h). */
        execution_set_detachable(e);
        r = kernel_await_ready(k);
        if (r < 0) {
                execution_free(e);
                return r;
        }
        k->exec = e;
        /* A failure to start comes back through on_exec_done() (now or from the loop). */
        (void) execution_start(e, on_exec_done, k);
        return 0;
}

/* ---- interrupt, restart, the model ----------------------------------------------------------- */

/* SIGINT to the kernel's process: the children of the sandbox's pid 1 (and theirs: a bridge may
 * stand between), as a Ctrl-C in a terminal reaches the foreground group. */
static void signal_children(pid_t pid, int sig, unsigned depth) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        size_t size;
        char *p, *end;

        if (depth > 2 || asprintf(&path, "/proc/%d/task/%d/children", (int) pid, (int) pid) < 0)
                return;
        if (read_file_limited(AT_FDCWD, path, 0, 64 * 1024, READ_FILE_UP_TO_MAX, &text, &size) < 0)
                return;
        for (p = text; *p; p = end) {
                long child = strtol(p, &end, 10);

                if (end == p)
                        break;
                if (child > 1) {
                        (void) kill((pid_t) child, sig);
                        signal_children((pid_t) child, sig, depth + 1);
                }
        }
}

static void kernel_sigint(Kernel *k) {
        pid_t pid = k->exec ? execution_sandbox_pid(k->exec) : k->adopted ? kernel_adopted_sandbox_pid(k) : 0;

        if (pid <= 0)
                return;
        log_debug("Kernel '%s': interrupt by SIGINT.", k->id);
        signal_children(pid, SIGINT, 0);
}

static int on_interrupt_fallback(sd_event_source *s, uint64_t usec, void *userdata) {
        Kernel *k = userdata;

        k->interrupt_timer = sd_event_source_disable_unref(k->interrupt_timer);
        if (k->interrupt_id[0] == '\0')
                return 0;
        kernel_routes_remove(k->routes, k->interrupt_id);
        k->interrupt_id[0] = '\0';
        /* No answer yet, but the execution has ended (the request's killpg() came late, on a
         * loaded host): a signal now would interrupt whatever runs next. */
        if (!k->executing)
                return 0;
        kernel_sigint(k);
        return 0;
}

int kernel_interrupt(Kernel *k) {
        int r;

        if (k->state == KERNEL_DEAD)
                return -ESHUTDOWN;
        kernel_touch(k);
        /* interrupt_mode "signal" (IRkernel does not answer interrupt_request): the signal now. */
        if (k->r_kernel) {
                kernel_sigint(k);
                return 0;
        }
        /* interrupt_mode "message": ipykernel answers it with killpg(SIGINT) on itself, which
         * works across the PID namespace; a kernel that does not answer gets the signal. */
        r = kernel_wire_send_own(k, JUPYTER_CHANNEL_CONTROL, "interrupt_request", NULL, k->interrupt_id);
        if (r < 0) {
                k->interrupt_id[0] = '\0';
                kernel_sigint(k);
                return 0;
        }
        k->interrupt_timer = sd_event_source_disable_unref(k->interrupt_timer);
        if (sd_event_add_time_relative(k->manager->event, &k->interrupt_timer, CLOCK_MONOTONIC,
                                       KERNEL_INTERRUPT_FALLBACK_USEC, USEC_PER_MSEC, on_interrupt_fallback, k) < 0)
                kernel_sigint(k);
        return 0;
}

int kernel_restart(Kernel *k) {
        if (k->state == KERNEL_DEAD)
                return -ESHUTDOWN;
        if (k->restarting)
                return 0;
        kernel_touch(k);
        k->state = KERNEL_RESTARTING;
        k->executing = false;
        kernel_broadcast_status(k, "restarting");
        k->nudge_timer = sd_event_source_disable_unref(k->nudge_timer);
        k->ready_timer = sd_event_source_disable_unref(k->ready_timer);
        k->interrupt_timer = sd_event_source_disable_unref(k->interrupt_timer);
        k->ready = false;
        if (k->adopted) {
                /* Re-adopted: its sandbox is killed; its keeper's exit starts the next run. */
                k->restarting = true;
                kernel_adopted_kill(k);
                return 0;
        }
        if (!k->exec) {
                /* Between two runs (cannot happen while alive, but be safe): start one now. */
                _cleanup_free_ char *error = NULL;
                return kernel_run(k, &error);
        }
        /* The run ends (its lease released, its workspace snapshotted); on_exec_done() starts the
         * next one on the same id, workspace, limits and key. */
        k->restarting = true;
        execution_cancel(k->exec, EXECUTION_STATUS_CANCELLED);
        return 0;
}

static int format_time(uint64_t usec, char ret[static 32]) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;
        char base[24];

        if (!gmtime_r(&t, &tm) || strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) != 19)
                return -EOVERFLOW;
        /* jupyter_server's gateway client parses %Y-%m-%dT%H:%M:%S.%fZ: microseconds and Z always. */
        (void) snprintf(ret, 32, "%.19s.%06uZ", base, (unsigned) (usec % USEC_PER_SEC));
        return 0;
}

json_object *kernel_model(Kernel *k) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *limits = json_object_new_object();
        char when[32];

        if (!o || !limits || format_time(k->last_activity_usec, when) < 0)
                return NULL;
        if ((k->memory_max > 0 && json_add(limits, "memoryBytes", json_new_u64(k->memory_max)) < 0) ||
            (k->tasks_max > 0 && json_add(limits, "tasks", json_new_u64(k->tasks_max)) < 0) ||
            (k->cpu_quota_percent > 0 && json_add(limits, "cpuPercent", json_new_u64(k->cpu_quota_percent)) < 0))
                return NULL;
        if (json_add(o, "id", json_object_new_string(k->id)) < 0 ||
            json_add(o, "name", json_object_new_string(k->spec)) < 0 ||
            json_add(o, "last_activity", json_object_new_string(when)) < 0 ||
            json_add(o, "execution_state", json_object_new_string(kernel_state_to_string(k->state))) < 0 ||
            json_add(o, "connections", json_object_new_int((int) k->n_clients)) < 0 ||
            json_add(o, "workspaceId", json_object_new_string(k->workspace_id)) < 0 ||
            json_add(o, "limits", STEAL(limits)) < 0 ||
            json_add(o, "network", k->network ? json_object_get(k->network) : json_object_new_string("default")) < 0 ||
            (k->environment && json_add(o, "environment", json_object_new_string(k->environment)) < 0) ||
            (k->state == KERNEL_DEAD &&
             json_add(o, "reason", json_object_new_string(kernel_end_reason_to_string(k->reason))) < 0))
                return NULL;
        return STEAL(o);
}
