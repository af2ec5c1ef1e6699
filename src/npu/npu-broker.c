/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host NPU broker (npu-broker.h): requests into jobs, jobs into units or children, their ends
 * into final states. The store (npu-jobs.h) holds every job's files; this file holds the jobs
 * that are active now.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu/npu-broker.h"
#include "npu/npu-host.h"
#include "npu/npu-jobs.h"
#include "npu/npu-workload.h"
#include "util/bus-util.h"
#include "util/fd-util.h"
#include "util/helper-path.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"
#include "workspace/workspace.h"

#define POLL_USEC (500U * 1000U)         /* how often a job's unit is looked at */

typedef struct BrokerJob BrokerJob;

struct BrokerJob {
        NpuBroker *broker;
        BrokerJob *next, *prev;
        char id[NPU_JOB_ID_LEN + 1];
        char *workload;
        char *session;
        unsigned *chips;
        size_t n_chips;
        NpuClaim *claim;
        char *unit;                      /* under systemd: sandbox-runner-npu@<id>.service */
        pid_t pid;                       /* by hand: the runner, our child */
        sd_event_source *child_source, *poll_source;
        int lease_fd;                    /* the session workspace's write lease, for the job's life */
        bool cancelled;
        char *workspace;                 /* the workspace submitted with it (the dialect's), or NULL */
        void *commit;                    /* its end's commit under way (npu_broker_set_commit()) */
        NpuJobState end_state;           /* its end, told once the commit is done */
        const char *end_error;
        NpuJobResult result;
        bool has_result;
};

struct NpuBroker {
        sd_event *event;
        sd_bus *bus;
        bool under_systemd;
        NpuManager *npu;
        NpuWorkloads *workloads;
        char *repo_dir;
        char *state_dir;
        char *jobs_dir;
        int jobs_fd;
        char *runner;                    /* sandbox-runner-npu, for jobs started as children */
        char *device_root;
        char **mgmt;                     /* the management nodes under device_root */
        BrokerJob *jobs;
        unsigned n_jobs;
        void (*busy_ref)(void *userdata);
        void (*busy_unref)(void *userdata);
        void *userdata;
        NpuBrokerCommit commit;
};

static void job_set_state(BrokerJob *j, NpuJobState state, const NpuJobResult *result, const char *error) {
        NpuJobUpdate u = {
                .state = state,
                .unit = j->unit,
                .pid = j->pid,
                .result = result,
                .error = error,
        };
        int r = npu_jobs_set_state(j->broker->jobs_fd, j->id, &u, NULL);

        if (r < 0 && r != -EALREADY)
                log_warning_errno(r, "NPU job %s: cannot record its state '%s': %m", j->id,
                                  npu_job_state_to_string(state));
}

static char *chips_text(const BrokerJob *j) {
        char *t = strdup("");

        for (size_t i = 0; t && i < j->n_chips; i++) {
                char *n = NULL;
                if (asprintf(&n, "%s%s%u", t, i > 0 ? "," : "", j->chips[i]) < 0)
                        n = NULL;
                free(t);
                t = n;
        }
        return t;
}

static void job_log_started(const BrokerJob *j) {
        _cleanup_free_ char *chips = chips_text(j), *as = NULL;

        if (!j->unit && asprintf(&as, "a child of the daemon (pid %i)", (int) j->pid) < 0)
                as = NULL;
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_NPU_JOB_STARTED,
                   "SANDBOX_NPU_JOB=%s", j->id,
                   "SANDBOX_NPU_WORKLOAD=%s", j->workload,
                   "SANDBOX_SESSION=%s", j->session,
                   "SANDBOX_NPU_CHIPS=%s", chips ?: "",
                   "SANDBOX_UNIT=%s", j->unit ?: as ?: "a child of the daemon",
                   "MESSAGE=NPU job %s (workload %s, session %s) started on chip(s) %s as %s.", j->id, j->workload,
                   j->session, chips ?: "?", j->unit ?: as ?: "a child of the daemon");
}

static void job_log_finished(const BrokerJob *j, NpuJobState state, const char *reason) {
        log_struct(state == NPU_JOB_FAILED ? LOG_WARNING : LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_NPU_JOB_FINISHED,
                   "SANDBOX_NPU_JOB=%s", j->id,
                   "SANDBOX_NPU_WORKLOAD=%s", j->workload,
                   "SANDBOX_SESSION=%s", j->session,
                   "SANDBOX_NPU_JOB_STATE=%s", npu_job_state_to_string(state),
                   "SANDBOX_REASON=%s", reason ?: "",
                   "MESSAGE=NPU job %s (workload %s, session %s): %s%s%s.", j->id, j->workload, j->session,
                   npu_job_state_to_string(state), reason ? ": " : "", reason ?: "");
}

static BrokerJob *job_free(BrokerJob *j) {
        NpuBroker *b;

        if (!j)
                return NULL;
        b = j->broker;
        j->child_source = sd_event_source_disable_unref(j->child_source);
        j->poll_source = sd_event_source_disable_unref(j->poll_source);
        j->claim = npu_claim_free(j->claim);
        if (j->commit && b->commit.abort)
                b->commit.abort(j->commit);
        j->commit = NULL;
        j->lease_fd = safe_close(j->lease_fd);      /* after the commit: it ran under the lease */
        npu_job_result_done(&j->result);
        if (j->prev)
                j->prev->next = j->next;
        else if (b->jobs == j)
                b->jobs = j->next;
        if (j->next)
                j->next->prev = j->prev;
        if (b->n_jobs > 0)
                b->n_jobs--;
        if (b->busy_unref)
                b->busy_unref(b->userdata);
        free(j->unit);
        free(j->chips);
        free(j->workload);
        free(j->session);
        free(j->workspace);
        return mfree(j);
}

static void job_record_end(BrokerJob *j) {
        const char *why = j->end_error ?: j->result.error;

        job_set_state(j, j->end_state, j->has_result ? &j->result : NULL, why);
        job_log_finished(j, j->end_state, why);
        job_free(j);
}

static void on_committed(void *token) {
        BrokerJob *j = token;

        j->commit = NULL;
        job_record_end(j);
}

/* The end of a job: its runner's result decides, a cancel wins, no result is a failure. A job
 * submitted with a workspace has its tree committed (still under its lease) before its end is
 * recorded, so that whoever sees it final sees its output in the snapshot store. */
static void job_finish(BrokerJob *j) {
        NpuBroker *b = j->broker;
        int r;

        r = npu_jobs_load_result(b->jobs_fd, j->id, &j->result);
        j->has_result = r >= 0;
        if (j->cancelled)
                j->end_state = NPU_JOB_CANCELLED;
        else if (r < 0) {
                j->end_state = NPU_JOB_FAILED;
                j->end_error = "the job's runner ended without a result (see the journal)";
        } else {
                j->end_state = npu_job_result_state(&j->result);
                if (j->result.timed_out)
                        j->end_error = "the job ran past the workload's timeout and was stopped";
        }
        if (j->workspace && b->commit.start &&
            b->commit.start(j->id, j->workspace, on_committed, j, b->commit.userdata, &j->commit) >= 0)
                return;
        j->commit = NULL;
        job_record_end(j);
}

static int on_child_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        BrokerJob *j = userdata;

        j->child_source = sd_event_source_disable_unref(j->child_source);
        j->pid = 0;
        job_finish(j);
        return 0;
}

/* Whether the job's unit is still active (unknown to systemd, inactive and failed are not). */
static bool unit_active(NpuBroker *b, const char *unit) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *state = NULL;
        const char *path;
        int r;

        r = sd_bus_call_method(b->bus, SYSTEMD_BUS_SERVICE, SYSTEMD_BUS_PATH, SYSTEMD_BUS_INTERFACE, "GetUnit",
                               &error, &reply, "s", unit);
        sd_bus_error_free(&error);
        if (r < 0 || sd_bus_message_read(reply, "o", &path) < 0)
                return false;   /* not loaded: gone (CollectMode=inactive-or-failed) */
        r = sd_bus_get_property_string(b->bus, SYSTEMD_BUS_SERVICE, path, "org.freedesktop.systemd1.Unit",
                                       "ActiveState", &error, &state);
        sd_bus_error_free(&error);
        if (r < 0)
                return false;
        return !streq(state, "inactive") && !streq(state, "failed");
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        BrokerJob *j = userdata;

        if (unit_active(j->broker, j->unit))
                return sd_event_source_set_time_relative(s, POLL_USEC) < 0 ? 0 :
                       sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        j->poll_source = sd_event_source_disable_unref(j->poll_source);
        job_finish(j);
        return 0;
}

/* DeviceAllow= for the job's chips and the management nodes, then the start of its unit. */
static int job_start_unit(BrokerJob *j, char **ret_why) {
        NpuBroker *b = j->broker;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        j->unit = npu_job_unit_name(j->id);
        if (!j->unit)
                return -ENOMEM;
        r = bus_message_new_manager_call(b->bus, &m, "SetUnitProperties");
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", j->unit, true);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "DeviceAllow");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a(ss)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(ss)");
        for (size_t i = 0; r >= 0 && i < j->n_chips; i++) {
                _cleanup_free_ char *node = NULL;
                if (asprintf(&node, "%s/davinci%u", b->device_root, j->chips[i]) < 0)
                        return -ENOMEM;
                r = sd_bus_message_append(m, "(ss)", node, "rw");
        }
        for (char **n = b->mgmt; r >= 0 && n && *n; n++) {
                _cleanup_free_ char *node = NULL;
                if (asprintf(&node, "%s/%s", b->device_root, *n) < 0)
                        return -ENOMEM;
                r = sd_bus_message_append(m, "(ss)", node, "rw");
        }
        for (int k = 0; r >= 0 && k < 4; k++)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_call(b->bus, m, 0, &error, NULL);
        if (r < 0) {
                (void) set_message(ret_why, r, "its devices cannot be set on %s: %s", j->unit, error.message ?: strerror(-r));
                sd_bus_error_free(&error);
                return r;
        }
        m = sd_bus_message_unref(m);
        r = bus_message_new_manager_call(b->bus, &m, "StartUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", j->unit, "replace");
        if (r >= 0)
                r = sd_bus_call(b->bus, m, 0, &error, NULL);
        if (r < 0) {
                (void) set_message(ret_why, r, "%s cannot be started: %s", j->unit, error.message ?: strerror(-r));
                sd_bus_error_free(&error);
                return r;
        }
        return sd_event_add_time_relative(b->event, &j->poll_source, CLOCK_MONOTONIC, POLL_USEC, 100U * 1000U,
                                          on_poll, j);
}

/* Started by hand: the same runner, as our child (it stops the job when we die). */
static int job_start_child(BrokerJob *j, char **ret_why) {
        NpuBroker *b = j->broker;
        _cleanup_free_ char *dir = NULL;
        pid_t parent = getpid();

        if (!b->runner)
                return set_message(ret_why, -ENOENT, "sandbox-runner-npu is not installed next to the daemon");
        if (asprintf(&dir, "%s/%s", b->jobs_dir, j->id) < 0)
                return -ENOMEM;
        j->pid = fork();
        if (j->pid < 0)
                return set_message(ret_why, -errno, "cannot start the job's runner %s: %m", b->runner);
        if (j->pid == 0) {
                sigset_t none;

                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent)
                        _exit(EXIT_FAILURE);
                execl(b->runner, "sandbox-runner-npu", "--job", dir, (char *) NULL);
                _exit(127);
        }
        return sd_event_add_child(b->event, &j->child_source, j->pid, WEXITED, on_child_exit, j);
}

static void on_claimed(NpuClaim *c, int error, const char *reason, void *userdata) {
        BrokerJob *j = userdata;
        _cleanup_free_ char *start_why = NULL;
        int r;

        if (error < 0) {
                job_set_state(j, NPU_JOB_FAILED, NULL, reason ?: "its chips cannot be had");
                job_log_finished(j, NPU_JOB_FAILED, reason ?: "its chips cannot be had");
                job_free(j);
                return;
        }
        r = j->broker->under_systemd && j->broker->bus ? job_start_unit(j, &start_why) : job_start_child(j, &start_why);
        if (r < 0) {
                job_set_state(j, NPU_JOB_FAILED, NULL, start_why ?: strerror(-r));
                job_log_finished(j, NPU_JOB_FAILED, start_why ?: strerror(-r));
                if (j->pid > 0) {
                        (void) kill(j->pid, SIGKILL);
                        (void) waitpid(j->pid, NULL, 0);
                        j->pid = 0;
                }
                job_free(j);
                return;
        }
        job_set_state(j, NPU_JOB_RUNNING, NULL, NULL);
        job_log_started(j);
}

/* The request's fields: {"workloadId", "sessionId", "inputs"?}, nothing else. */
static int submit_parse(NpuBroker *b, json_object *body, const NpuWorkload **ret_w, const char **ret_session,
                        json_object **ret_inputs, char **ret_why) {
        json_object *v;
        const char *id;

        if (!json_object_is_type(body, json_type_object))
                return set_message(ret_why, -EINVAL, "the body must be a JSON object");
        json_object_object_foreach(body, key, val) {
                (void) val;
                if (!streq(key, "workloadId") && !streq(key, "sessionId") && !streq(key, "inputs"))
                        return set_message(ret_why, -EINVAL, "unknown field '%.64s' (workloadId, sessionId, inputs)", key);
        }
        if (!json_object_object_get_ex(body, "workloadId", &v) || !json_object_is_type(v, json_type_string))
                return set_message(ret_why, -EINVAL, "'workloadId' must be a string");
        id = json_object_get_string(v);
        *ret_w = npu_workloads_find(b->workloads, id);
        if (!*ret_w)
                return set_message(ret_why, -EINVAL, "workload '%.64s' is not in the allowlist (GET /npu/workloads)",
                           npu_workload_id_valid(id) ? id : "(invalid)");
        if (!json_object_object_get_ex(body, "sessionId", &v) || !json_object_is_type(v, json_type_string) ||
            !npu_session_id_valid(json_object_get_string(v)))
                return set_message(ret_why, -EINVAL, "'sessionId' must be a session's id (its workspace's id)");
        *ret_session = json_object_get_string(v);
        *ret_inputs = NULL;
        if (json_object_object_get_ex(body, "inputs", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_object))
                        return set_message(ret_why, -EINVAL, "'inputs' must be an object");
                *ret_inputs = v;
        }
        return 0;
}

static int submit_map_expand_error(int r) {
        if (r == -EBADMSG)
                return -EINVAL;
        return r;
}

int npu_broker_submit(NpuBroker *b, json_object *body, const char *workspace_id, char *ret_id, char **ret_why) {
        _cleanup_(npu_job_plan_done) NpuJobPlan plan = {};
        _cleanup_free_ char *workspace = NULL, *copy = NULL, *holder = NULL;
        _cleanup_free_ unsigned *chips = NULL;
        _cleanup_close_ int ws_fd = -EBADF, lease_fd = -EBADF;
        char id[NPU_JOB_ID_LEN + 1];
        const NpuWorkload *w = NULL;
        const char *session = NULL, *reason = NULL;
        json_object *inputs = NULL;
        NpuClaim *claim = NULL;
        BrokerJob *j;
        struct stat st;
        int r;

        *ret_why = NULL;
        r = submit_parse(b, body, &w, &session, &inputs, ret_why);
        if (r < 0)
                return r;
        if (workspace_id && !npu_session_id_valid(workspace_id))
                return set_message(ret_why, -EINVAL, "'%.64s' is not a workspace's id", workspace_id);
        if (asprintf(&workspace, "%s/workspaces/%s", b->state_dir, workspace_id ?: session) < 0)
                return -ENOMEM;
        ws_fd = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws_fd < 0 || fstat(ws_fd, &st) < 0)
                return set_message(ret_why, -ENOENT, "session '%s' has no workspace (a run or an upload makes it)",
                                   workspace_id ?: session);
        /* The workspace's write lease, from before the checks to the job's end: no run, upload or
         * restore of the session can change what was checked (swap a checked directory for a
         * symlink) while the job runs. */
        lease_fd = workspace_lease_try(ws_fd);
        if (lease_fd < 0)
                return set_message(ret_why, -EAGAIN, "session '%s''s workspace is in use (a run, an upload or another job); "
                           "retry when it is free", session);
        if (!b->npu)
                return set_message(ret_why, -ENODEV, "the broker's jobs need chips, and chips are unavailable here");
        chips = calloc(w->chips, sizeof(unsigned));
        if (!chips)
                return -ENOMEM;
        r = npu_manager_pick(b->npu, w->chips, chips, ret_why);
        if (r < 0)
                return r == -EBUSY ? -EBUSY : -ENODEV;
        r = npu_workload_expand(w, b->repo_dir, workspace, inputs, &plan, ret_why);
        if (r < 0)
                return submit_map_expand_error(r);
        r = npu_job_id_new(id);
        if (r < 0)
                return r;
        if (plan.config_json) {
                copy = npu_job_config_path(b->jobs_dir, id);
                if (!copy || npu_job_plan_use_config_copy(&plan, copy) < 0)
                        return -ENOMEM;
        }
        if (asprintf(&holder, "npu-job-%s", id) < 0)
                return -ENOMEM;
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (BrokerJob) { .broker = b, .chips = STEAL(chips), .n_chips = w->chips, .lease_fd = STEAL_FD(lease_fd),
                           .workload = strdup(w->id), .session = strdup(session),
                           .workspace = workspace_id ? strdup(workspace_id) : NULL, .result.exit_code = -1 };
        memcpy(j->id, id, sizeof(id));
        j->next = b->jobs;
        if (b->jobs)
                b->jobs->prev = j;
        b->jobs = j;
        b->n_jobs++;
        if (b->busy_ref)
                b->busy_ref(b->userdata);
        if (!j->workload || !j->session || (workspace_id && !j->workspace)) {
                job_free(j);
                return -ENOMEM;
        }
        r = npu_jobs_create(b->jobs_fd, &(NpuJobSpec) {
                                    .id = id,
                                    .workload_id = w->id,
                                    .session_id = session,
                                    .argv = plan.argv,
                                    .env = plan.env,
                                    .cwd = plan.cwd,
                                    .chips = j->chips,
                                    .n_chips = j->n_chips,
                                    .timeout_sec = MAX(plan.timeout_usec / 1000000U, (uint64_t) 1),
                                    .config = plan.config_json,
                                    .config_size = plan.config_json_size,
                            }, NULL, &reason);
        if (r < 0) {
                job_free(j);
                return r == -EINVAL ? set_message(ret_why, -EINVAL, "the job cannot be made: %s", reason ?: "invalid")
                                    : set_message(ret_why, r, "job %s cannot be stored in the job store: %s", id,
                                                  strerror(-r));
        }
        r = npu_manager_claim(b->npu, j->chips, j->n_chips, NULL, holder, on_claimed, j, &claim, ret_why);
        if (r < 0) {
                job_set_state(j, NPU_JOB_FAILED, NULL, *ret_why ?: "its chips cannot be had");
                job_free(j);
                return r == -EBUSY ? -EBUSY : r == -ENOMEM ? r : -ENODEV;
        }
        j->claim = claim;
        log_info("NPU job %s: workload '%s' for session '%s' queued.", id, w->id, session);
        memcpy(ret_id, id, sizeof(id));
        return 0;
}

static BrokerJob *job_find(NpuBroker *b, const char *id) {
        for (BrokerJob *j = b->jobs; j; j = j->next)
                if (streq(j->id, id))
                        return j;
        return NULL;
}

int npu_broker_cancel(NpuBroker *b, const char *id, const char *session) {
        _cleanup_(npu_job_freep) NpuJob *job = NULL;
        BrokerJob *j;
        int r;

        r = npu_jobs_load_for_session(b->jobs_fd, id, session, &job);
        if (r < 0)
                return -ENOENT;
        j = job_find(b, id);
        if (!j || j->commit || npu_job_state_is_final(job->state))
                return 0;               /* ended (its commit under way: its end is decided) */
        j->cancelled = true;
        if (j->unit)
                (void) bus_call_manager_async(b->bus, NULL, "StopUnit", NULL, NULL, "ss", j->unit, "replace");
        else if (j->pid > 0)
                (void) kill(j->pid, SIGTERM);   /* the runner stops the job's process group */
        else {
                /* Still waiting for its chips' re-probe: it never starts. */
                job_set_state(j, NPU_JOB_CANCELLED, NULL, NULL);
                job_log_finished(j, NPU_JOB_CANCELLED, NULL);
                job_free(j);
        }
        return 1;
}

void npu_broker_stop(NpuBroker *b) {
        if (!b)
                return;
        while (b->jobs) {
                BrokerJob *j = b->jobs;

                if (j->commit) {
                        /* Ended already: its end is told without the rest of its commit. */
                        b->commit.abort(j->commit);
                        j->commit = NULL;
                        job_record_end(j);
                        continue;
                }
                if (j->unit && b->bus) {
                        /* Synchronous: an asynchronous call would still wait for polkit when we
                         * are gone, and systemd drops it with its caller. */
                        sd_bus_error error = SD_BUS_ERROR_NULL;
                        int r = sd_bus_call_method(b->bus, SYSTEMD_BUS_SERVICE, SYSTEMD_BUS_PATH, SYSTEMD_BUS_INTERFACE,
                                                   "StopUnit", &error, NULL, "ss", j->unit, "replace");
                        if (r < 0)
                                log_warning("NPU job %s: cannot stop %s: %s", j->id, j->unit,
                                            error.message ?: strerror(-r));
                        sd_bus_error_free(&error);
                } else if (j->pid > 0)
                        (void) kill(j->pid, SIGTERM);   /* its runner stops the job */
                job_set_state(j, NPU_JOB_INTERRUPTED, NULL, NPU_JOB_ERROR_INTERRUPTED);
                job_log_finished(j, NPU_JOB_INTERRUPTED, NPU_JOB_ERROR_INTERRUPTED);
                if (j->pid > 0) {
                        /* Reaped here: its child source goes with the job. */
                        j->child_source = sd_event_source_disable_unref(j->child_source);
                        (void) waitpid(j->pid, NULL, 0);
                        j->pid = 0;
                }
                job_free(j);
        }
}

void npu_broker_set_commit(NpuBroker *b, const NpuBrokerCommit *c) {
        b->commit = *c;
}

int npu_broker_jobs_fd(NpuBroker *b) {
        return b->jobs_fd;
}

json_object *npu_broker_workloads_json(NpuBroker *b) {
        json_object *o = json_object_new_object(), *l = npu_workloads_to_json(b->workloads);

        if (!o || !l) {
                json_object_put(o);
                json_object_put(l);
                return NULL;
        }
        json_object_object_add(o, "workloads", l);
        return o;
}

json_object *npu_broker_health_json(NpuBroker *b) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "enabled", json_object_new_boolean(true));
        json_object_object_add(o, "workloads", json_object_new_int64((int64_t) b->workloads->n));
        json_object_object_add(o, "activeJobs", json_object_new_int64(b->n_jobs));
        json_object_object_add(o, "jobsAs", json_object_new_string(b->under_systemd && b->bus ?
                                                                     "sandbox-runner-npu@.service" : "child"));
        return o;
}

/* Jobs a previous daemon left active: interrupted; their units stopped (a unit outlives us). */
static void broker_recover(NpuBroker *b) {
        NpuJobStray *strays = NULL;
        size_t n = 0;
        int r;

        r = npu_jobs_recover(b->jobs_fd, &strays, &n);
        if (r < 0) {
                log_warning_errno(r, "NPU broker: cannot recover the job store: %m");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                log_notice("NPU job %s was active when the daemon stopped: marked interrupted%s%s.", strays[i].id,
                           strays[i].unit && b->bus ? ", stopping " : "", strays[i].unit && b->bus ? strays[i].unit : "");
                if (strays[i].unit && b->bus)
                        (void) bus_call_manager_async(b->bus, NULL, "StopUnit", NULL, NULL, "ss", strays[i].unit,
                                                      "replace");
        }
        npu_job_strays_free(strays, n);
        (void) npu_jobs_prune(b->jobs_fd, NPU_JOBS_KEEP);
}

int npu_broker_new(const NpuBrokerParams *p, NpuBroker **ret, char **ret_error) {
        _cleanup_(npu_broker_freep) NpuBroker *b = NULL;
        _cleanup_free_ char *load_why = NULL;
        NpuHostNodes nodes = {};
        int r;

        *ret_error = NULL;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->jobs_fd = -EBADF;
        b->event = sd_event_ref(p->event);
        b->bus = p->bus ? sd_bus_ref(p->bus) : NULL;
        b->under_systemd = !!getenv("INVOCATION_ID");
        b->npu = p->npu;
        b->busy_ref = p->busy_ref;
        b->busy_unref = p->busy_unref;
        b->userdata = p->userdata;
        b->repo_dir = strdup(p->config->npu_repo_dir);
        b->state_dir = strdup(p->state_dir);
        b->device_root = strdup(p->config->npu_device_root ?: "/dev");
        if (!b->repo_dir || !b->state_dir || !b->device_root || asprintf(&b->jobs_dir, "%s/" NPU_JOBS_DIR, p->state_dir) < 0)
                return -ENOMEM;
        b->runner = find_helper("npu", "sandbox-runner-npu");
        r = npu_workloads_load(p->config->npu_workloads_file, &b->workloads, &load_why);
        if (r < 0)
                return set_message(ret_error, r, "the workload allowlist %s cannot be used: %s", p->config->npu_workloads_file,
                           load_why ?: strerror(-r));
        b->jobs_fd = npu_jobs_open(p->state_dir);
        if (b->jobs_fd < 0)
                return set_message(ret_error, b->jobs_fd, "the job store %s cannot be opened: %s", b->jobs_dir,
                           strerror(-b->jobs_fd));
        if (npu_host_scan_nodes(b->device_root, &nodes, NULL) >= 0)
                b->mgmt = STEAL(nodes.mgmt);
        npu_host_nodes_done(&nodes);
        broker_recover(b);
        log_info("NPU broker: %zu workload%s allowlisted, jobs run as %s.", b->workloads->n,
                 b->workloads->n == 1 ? "" : "s",
                 b->under_systemd && b->bus ? "sandbox-runner-npu@<job>.service units" : "children of the daemon");
        *ret = STEAL(b);
        return 0;
}

NpuBroker *npu_broker_free(NpuBroker *b) {
        if (!b)
                return NULL;
        /* Active jobs: their runners get SIGTERM (children: also by their death signal); units are
         * left to run and are found interrupted by the next start, which stops them. */
        while (b->jobs) {
                BrokerJob *j = b->jobs;
                if (j->pid > 0) {
                        (void) kill(j->pid, SIGTERM);
                        (void) waitpid(j->pid, NULL, 0);
                        j->pid = 0;
                }
                job_free(j);
        }
        npu_workloads_free(b->workloads);
        safe_close(b->jobs_fd);
        strv_free(b->mgmt);
        free(b->repo_dir);
        free(b->state_dir);
        free(b->jobs_dir);
        free(b->runner);
        free(b->device_root);
        sd_bus_unref(b->bus);
        sd_event_unref(b->event);
        return mfree(b);
}
