/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Transient systemd scopes per execution over sd-bus, with limits and cgroup accounting. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "util/bus-util.h"
#include "util/log.h"
#include "sandbox/cgroup.h"
#include "sandbox/scope.h"
#include "util/macro.h"
#include "util/string-util.h"

struct ScopeManager {
        sd_event *event;
        sd_bus *bus;
        sd_bus_slot *job_removed_slot;
        Scope *scopes;                  /* list, for matching JobRemoved by unit name */
        bool no_oom_policy;             /* systemd < 253: scopes have no OOMPolicy= */
        bool unified;                   /* cgroup v2 only */
};

struct Scope {
        ScopeManager *manager;
        Scope *prev, *next;
        char *name;
        pid_t pids[SCOPE_PIDS_MAX];
        size_t n_pids;
        ScopeLimits limits;
        char *description;
        sd_bus_slot *start_slot;
        ScopeStartedFn cb;
        void *userdata;
        bool started;                   /* JobRemoved seen (or failed) */
        bool referenced;                /* AddRef=yes took effect */
        char *early_result;             /* JobRemoved seen before the method reply */
        sd_bus_slot *set_slot;          /* SetUnitProperties() in flight */
        ScopeStartedFn set_cb;
        void *set_userdata;
};

static void scope_job_finished(Scope *s, const char *result) {
        s->started = true;
        if (streq(result, "done"))
                s->cb(s, 0, NULL, s->userdata);
        else {
                char msg[128];
                (void) snprintf(msg, sizeof(msg), "the scope's start job finished with result '%s'", result);
                s->cb(s, -EIO, msg, s->userdata);
        }
}

static int start_send(Scope *s);

int scope_manager_new(sd_event *e, sd_bus *bus, ScopeManager **ret) {
        ScopeManager *sm;
        struct stat st;

        sm = calloc(1, sizeof(*sm));
        if (!sm)
                return -ENOMEM;
        sm->event = sd_event_ref(e);
        sm->unified = stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0;

        sm->bus = sd_bus_ref(bus);
        *ret = sm;
        return 0;
}

ScopeManager *scope_manager_free(ScopeManager *sm) {
        if (!sm)
                return NULL;
        while (sm->scopes)
                scope_free(sm->scopes);
        sm->job_removed_slot = sd_bus_slot_unref(sm->job_removed_slot);
        sm->bus = sd_bus_unref(sm->bus);   /* the owner flushes and closes it */
        sd_event_unref(sm->event);
        free(sm);
        return NULL;
}

static Scope *find_scope(ScopeManager *sm, const char *name) {
        for (Scope *s = sm->scopes; s; s = s->next)
                if (streq(s->name, name))
                        return s;
        return NULL;
}

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        ScopeManager *sm = userdata;
        const char *path, *unit, *result;
        uint32_t id;
        Scope *s;
        int r;

        r = sd_bus_message_read(m, "uoss", &id, &path, &unit, &result);
        if (r < 0)
                return 0;
        s = find_scope(sm, unit);
        if (!s || s->started)
                return 0;
        if (s->start_slot) {
                /* The reply is still in flight; finish when it arrives. */
                free(s->early_result);
                s->early_result = strdup(result);
                return 0;
        }
        scope_job_finished(s, result);
        return 0;
}

static int ensure_subscribed(ScopeManager *sm) {
        int r;

        if (sm->job_removed_slot)
                return 0;
        r = sd_bus_match_signal(sm->bus, &sm->job_removed_slot, SYSTEMD_BUS_SERVICE, SYSTEMD_BUS_PATH,
                                SYSTEMD_BUS_INTERFACE, "JobRemoved", on_job_removed, sm);
        if (r < 0)
                return r;
        /* Without Subscribe() systemd does not emit job signals to us. */
        r = bus_call_manager_async(sm->bus, NULL, "Subscribe", NULL, NULL, NULL);
        return r < 0 ? r : 0;
}

static int append_properties(sd_bus_message *m, const Scope *s, bool oom_policy) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)(sv)(sv)",
                                  "Description", "s", s->description,
                                  "Slice", "s", SCOPE_SLICE,
                                  "AddRef", "b", 1,
                                  "CollectMode", "s", "inactive-or-failed",
                                  "MemoryAccounting", "b", 1,
                                  "TasksAccounting", "b", 1,
                                  "CPUAccounting", "b", 1);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "PIDs");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "au");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "u");
        for (size_t i = 0; r >= 0 && i < s->n_pids; i++)
                r = sd_bus_message_append(m, "u", (uint32_t) s->pids[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0 && s->limits.memory_max > 0)
                r = sd_bus_message_append(m, "(sv)(sv)", "MemoryMax", "t", s->limits.memory_max,
                                          "MemorySwapMax", "t", (uint64_t) 0);
        if (r >= 0 && s->limits.tasks_max > 0)
                r = sd_bus_message_append(m, "(sv)", "TasksMax", "t", s->limits.tasks_max);
        if (r >= 0 && s->limits.cpu_quota_percent > 0)
                r = sd_bus_message_append(m, "(sv)", "CPUQuotaPerSecUSec", "t",
                                          (uint64_t) s->limits.cpu_quota_percent * 10000U);
        /* Only the process that hit the limit dies; the keeper survives to report. */
        if (r >= 0 && oom_policy)
                r = sd_bus_message_append(m, "(sv)", "OOMPolicy", "s", "continue");
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static int build_start(ScopeManager *sm, const Scope *s, sd_bus_message **ret) {
        sd_bus_message *m = NULL;
        int r;

        r = bus_message_new_manager_call(sm->bus, &m, "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", s->name, "fail");
        if (r >= 0)
                r = append_properties(m, s, !sm->no_oom_policy);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0) {
                sd_bus_message_unref(m);
                return r;
        }
        *ret = m;
        return 0;
}

static bool error_is_oom_policy(const sd_bus_error *e) {
        return e && e->message && strstr(e->message, "OOMPolicy");
}

static int on_start_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Scope *s = userdata;
        const sd_bus_error *e;

        s->start_slot = sd_bus_slot_unref(s->start_slot);
        e = sd_bus_message_get_error(reply);
        if (e) {
                if (!s->manager->no_oom_policy && error_is_oom_policy(e)) {
                        s->manager->no_oom_policy = true;
                        log_debug("systemd does not know OOMPolicy= on scopes; retrying without it.");
                        if (start_send(s) >= 0)
                                return 0;
                }
                s->started = true;
                s->cb(s, -sd_bus_error_get_errno(e) ?: -EIO, e->message, s->userdata);
                return 0;
        }
        s->referenced = true;
        if (s->early_result)
                scope_job_finished(s, s->early_result);
        return 0;
}

static int start_send(Scope *s) {
        sd_bus_message *m = NULL;
        int r;

        r = build_start(s->manager, s, &m);
        if (r < 0)
                return r;
        r = sd_bus_call_async(s->manager->bus, &s->start_slot, m, on_start_reply, s, 30 * USEC_PER_SEC);
        sd_bus_message_unref(m);
        return r;
}

int scope_start_pids(ScopeManager *sm, const char *name, const pid_t *pids, size_t n_pids, const ScopeLimits *limits,
                     const char *description, ScopeStartedFn cb, void *userdata, Scope **ret) {
        Scope *s;
        int r;

        if (n_pids == 0 || n_pids > SCOPE_PIDS_MAX)
                return -EINVAL;
        r = ensure_subscribed(sm);
        if (r < 0)
                return r;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (Scope) { .manager = sm, .n_pids = n_pids, .limits = *limits, .cb = cb, .userdata = userdata };
        memcpy(s->pids, pids, n_pids * sizeof(pid_t));
        s->name = strdup(name);
        s->description = strdup(description);
        if (!s->name || !s->description) {
                free(s->name);
                free(s->description);
                free(s);
                return -ENOMEM;
        }
        s->next = sm->scopes;
        if (sm->scopes)
                sm->scopes->prev = s;
        sm->scopes = s;

        r = start_send(s);
        if (r < 0) {
                scope_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int scope_start(ScopeManager *sm, const char *name, pid_t pid, const ScopeLimits *limits,
                const char *description, ScopeStartedFn cb, void *userdata, Scope **ret) {
        return scope_start_pids(sm, name, &pid, 1, limits, description, cb, userdata, ret);
}

static int on_set_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Scope *s = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        ScopeStartedFn cb = s->set_cb;

        s->set_slot = sd_bus_slot_unref(s->set_slot);
        s->set_cb = NULL;
        if (cb)
                cb(s, e ? (-sd_bus_error_get_errno(e) ?: -EIO) : 0, e ? e->message : NULL, s->set_userdata);
        return 0;
}

/* A limit of 0 is none: systemd's "infinity". */
static uint64_t or_infinity(uint64_t v) {
        return v > 0 ? v : UINT64_MAX;
}

int scope_set_properties(Scope *s, const ScopeLimits *limits, const char *description, ScopeStartedFn cb,
                         void *userdata) {
        sd_bus_message *m = NULL;
        int r;

        if (s->set_slot)
                return -EBUSY;
        r = bus_message_new_manager_call(s->manager->bus, &m, "SetUnitProperties");
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", s->name, 1);   /* runtime: gone with the unit */
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0 && description)
                r = sd_bus_message_append(m, "(sv)", "Description", "s", description);
        if (r >= 0 && limits)
                r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)",
                                          "MemoryMax", "t", or_infinity(limits->memory_max),
                                          "MemorySwapMax", "t", (uint64_t) 0,
                                          "TasksMax", "t", or_infinity(limits->tasks_max),
                                          "CPUQuotaPerSecUSec", "t",
                                          limits->cpu_quota_percent > 0 ?
                                                  (uint64_t) limits->cpu_quota_percent * 10000U : UINT64_MAX);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                /* Without @cb no reply is asked for (sd_bus_call_async() then only sends). */
                r = sd_bus_call_async(s->manager->bus, cb ? &s->set_slot : NULL, m, cb ? on_set_reply : NULL, s,
                                      30 * USEC_PER_SEC);
        sd_bus_message_unref(m);
        if (r < 0)
                return r;
        s->set_cb = cb;
        s->set_userdata = userdata;
        if (limits)
                s->limits = *limits;
        return 0;
}

void scope_set_properties_cancel(Scope *s) {
        if (!s)
                return;
        s->set_slot = sd_bus_slot_unref(s->set_slot);
        s->set_cb = NULL;
        s->set_userdata = NULL;
}

const ScopeLimits *scope_limits(const Scope *s) {
        return &s->limits;
}

void scope_set_userdata(Scope *s, ScopeStartedFn cb, void *userdata) {
        s->cb = cb;
        s->userdata = userdata;
}

int scope_kill_by_name(ScopeManager *sm, const char *name) {
        return bus_call_manager_async(sm->bus, NULL, "KillUnit", NULL, NULL, "ssi", name, "all",
                                      (int32_t) SIGKILL);
}

int scope_kill(Scope *s) {
        return bus_call_manager_async(s->manager->bus, NULL, "KillUnit", NULL, NULL, "ssi", s->name, "all",
                                      (int32_t) SIGKILL);
}

const char *scope_name(const Scope *s) {
        return s->name;
}

Scope *scope_free(Scope *s) {
        ScopeManager *sm;

        if (!s)
                return NULL;
        sm = s->manager;
        s->start_slot = sd_bus_slot_unref(s->start_slot);
        s->set_slot = sd_bus_slot_unref(s->set_slot);
        if (s->referenced)
                (void) bus_call_manager_async(sm->bus, NULL, "UnrefUnit", NULL, NULL, "s", s->name);
        if (s->prev)
                s->prev->next = s->next;
        else
                sm->scopes = s->next;
        if (s->next)
                s->next->prev = s->prev;
        free(s->name);
        free(s->description);
        free(s->early_result);
        free(s);
        return NULL;
}

/* ---- accounting from the cgroup files -------------------------------------------------------- */

static int read_u64_file(const char *path, uint64_t *ret) {
        return cg_read_u64(AT_FDCWD, path, ret);
}

static int read_keyed_file(const char *path, const char *key, uint64_t *ret) {
        return cg_read_keyed(AT_FDCWD, path, key, ret);
}

/* systemd nests slices by the dashes in their names: "a-b.slice" lives in "a.slice". */
#define SCOPE_SLICE_PATH "sandbox.slice/" SCOPE_SLICE

int scope_read_accounting(Scope *s, ScopeAccounting *ret) {
        ScopeAccounting a = {
                .memory_peak = UINT64_MAX, .cpu_usage_nsec = UINT64_MAX, .tasks_peak = UINT64_MAX,
        };
        char p[512];
        uint64_t v = 0;

        if (s->manager->unified) {
#define CG(file) (snprintf(p, sizeof(p), "/sys/fs/cgroup/" SCOPE_SLICE_PATH "/%s/" file, s->name), p)
                if (read_u64_file(CG("memory.peak"), &v) >= 0)
                        a.memory_peak = v;
                if (read_keyed_file(CG("cpu.stat"), "usage_usec", &v) >= 0)
                        a.cpu_usage_nsec = v * 1000;
                if (read_u64_file(CG("pids.peak"), &v) >= 0)
                        a.tasks_peak = v;
                if (read_keyed_file(CG("memory.events"), "oom_kill", &v) >= 0)
                        a.oom_kills = v;
                if (read_keyed_file(CG("memory.events"), "max", &v) >= 0)
                        a.memory_max_hits = v;
                if (read_keyed_file(CG("pids.events"), "max", &v) >= 0)
                        a.tasks_max_hits = v;
#undef CG
        } else {
#define CG(ctrl, file) (snprintf(p, sizeof(p), "/sys/fs/cgroup/" ctrl "/" SCOPE_SLICE_PATH "/%s/" file, s->name), p)
                if (read_u64_file(CG("memory", "memory.max_usage_in_bytes"), &v) >= 0)
                        a.memory_peak = v;
                if (read_u64_file(CG("cpuacct", "cpuacct.usage"), &v) >= 0 ||
                    read_u64_file(CG("cpu,cpuacct", "cpuacct.usage"), &v) >= 0)
                        a.cpu_usage_nsec = v;
                /* Hybrid hosts with cpu and cpuacct mounted apart: systemd 252 only realises the
                 * cpu one; the unified tree still has cpu.stat. */
                else if (read_keyed_file(CG("unified", "cpu.stat"), "usage_usec", &v) >= 0)
                        a.cpu_usage_nsec = v * 1000;
                if (read_keyed_file(CG("memory", "memory.oom_control"), "oom_kill", &v) >= 0)
                        a.oom_kills = v;
                if (read_u64_file(CG("memory", "memory.failcnt"), &v) >= 0)
                        a.memory_max_hits = v;
                if (read_keyed_file(CG("pids", "pids.events"), "max", &v) >= 0)
                        a.tasks_max_hits = v;
                if (read_u64_file(CG("pids", "pids.peak"), &v) >= 0)
                        a.tasks_peak = v;
#undef CG
        }
        *ret = a;
        return 0;
}

/* ---- probe ----------------------------------------------------------------------------------- */

typedef struct ProbeState {
        bool done;
        int error;
        char *message;
} ProbeState;

static void on_probe_started(Scope *s, int error, const char *message, void *userdata) {
        ProbeState *st = userdata;

        st->done = true;
        st->error = error;
        if (message)
                st->message = strdup(message);
}

int scope_manager_probe(ScopeManager *sm, char **ret_reason) {
        _cleanup_free_ char *name = NULL;
        ProbeState st = {};
        Scope *s = NULL;
        uint64_t deadline;
        struct timespec ts;
        pid_t pid;
        int r;

        pid = fork();
        if (pid < 0)
                return ret_reason ?
                       set_message(ret_reason, negative_errno(), "cannot fork the test scope's process: %m") :
                       negative_errno();
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (;;)
                        pause();
        }
        if (asprintf(&name, SCOPE_PREFIX "probe-%d.scope", (int) getpid()) < 0) {
                r = -ENOMEM;
                goto finish;
        }

        /* The whole path an execution takes: the call, polkit, and the job really finishing with
         * our process moved into the scope (a queued job alone proves only the authorisation). */
        r = scope_start(sm, name, pid, &(ScopeLimits) {}, "sandbox-runner probe", on_probe_started, &st, &s);
        if (r < 0)
                goto finish;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        deadline = (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000 + 10 * USEC_PER_SEC;
        while (!st.done) {
                uint64_t now;

                r = sd_bus_process(sm->bus, NULL);
                if (r < 0)
                        break;
                if (r > 0)
                        continue;
                (void) clock_gettime(CLOCK_MONOTONIC, &ts);
                now = (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
                if (now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                (void) sd_bus_wait(sm->bus, deadline - now);
        }
        if (st.done)
                r = st.error;
finish:
        /* Every failure but -ENOMEM names the unit (or says it could not be made). */
        if (r < 0 && r != -ENOMEM && ret_reason &&
            asprintf(ret_reason, "the test scope %s could not be created: %s", name ?: "(unnamed)",
                     st.message ?: strerror(-r)) < 0)
                r = -ENOMEM;
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        if (s) {
                s->referenced = true;   /* unref even when the reply was an error: harmless */
                scope_free(s);
        }
        free(st.message);
        return r < 0 ? r : 0;
}

int scope_manager_open_system(sd_event *e, sd_bus **ret_bus, ScopeManager **ret, char **ret_reason) {
        int r;

        *ret_reason = NULL;
        r = sd_bus_open_system(ret_bus);
        if (r >= 0)
                r = sd_bus_attach_event(*ret_bus, e, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = scope_manager_new(e, *ret_bus, ret);
        if (r < 0) {
                /* sd_bus_open_system()'s address: $DBUS_SYSTEM_BUS_ADDRESS, else the default. */
                const char *address = secure_getenv("DBUS_SYSTEM_BUS_ADDRESS");

                if (asprintf(ret_reason, "cannot connect to the system bus (%s): %s",
                             !isempty(address) ? address : "unix:path=/run/dbus/system_bus_socket", strerror(-r)) < 0)
                        return -ENOMEM;
                return -ENOTCONN;
        }
        r = scope_manager_probe(*ret, ret_reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0 && !*ret_reason && asprintf(ret_reason, "scope probe failed: %s", strerror(-r)) < 0)
                return -ENOMEM;
        return r < 0 ? r : 0;
}
