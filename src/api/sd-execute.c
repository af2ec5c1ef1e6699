/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POST /execute of the ScienceDiscovery dialect: their PythonExecutionRequest checked and mapped
 * onto one of our synchronous executions (workspace = their runnerWorkspaceKey), and its end
 * answered as their PythonExecutionResult (files from the snapshot trees' diff, their output
 * budget, ISO times) or as the 400 they give for a timeout or a quota. May call core/,
 * execution/, workspace/ and the http/ transport.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/sd-env.h"
#include "api/sd-internal.h"
#include "build-config.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "egress/egress-epochs.h"
#include "environment/env-manager.h"
#include "npu/npu-manager.h"
#include "execution/replay.h"
#include "http/http-server.h"
#include "sandbox/sandbox-argv.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "workspace/cas/cas.h"
#include "workspace/workspace.h"

/* What the answer needs beyond the execution: kept from the request. */
typedef struct SdpRun {
        Manager *m;
        HttpRequest *req;
        Execution *e;
        char *language;                 /* "python" or "r" */
        char *environment_revision;     /* the request's environmentRevisionId, or NULL */
        char *network_revision;         /* networkAccess.revision, or NULL */
        bool network_open;              /* networkAccess.mode open */
        uint64_t timeout_ms;            /* 0: none asked (ours capped it) */
        uint64_t max_output_bytes;      /* 0: no truncation */
        uint64_t submitted_ms;
        bool started;                   /* false while it waits for its turn or its chips */
        bool skills;                    /* the skill variables were injected */
        SdpSlot *slot;                  /* its place in the order of its (session, agent) */
        ExecutionWatch *watch;          /* its client left: until the run is over (on_abandoned()) */
        unsigned npu_chips[64];         /* npuDevices, claimed when its turn comes */
        size_t n_npu_chips;
} SdpRun;

static SdpRun *sdp_run_free(SdpRun *r) {
        if (!r)
                return NULL;
        sdp_slot_leave(r->slot);        /* the next run of its pair gets its turn */
        execution_watch_free(r->watch);
        free(r->language);
        free(r->environment_revision);
        free(r->network_revision);
        free(r);
        return NULL;
}
SR_DEFINE_FREE_FUNC(SdpRun *, sdp_run_free);

static void hold_releasep(EnvHold **h) {
        env_hold_release(*h);
        *h = NULL;
}

static uint64_t realtime_ms(void) {
        return now_usec(CLOCK_REALTIME) / 1000;
}

static const char *language_title(const char *language) {
        return streq(language, "r") ? "R" : streq(language, "shell") ? "Shell" : "Python";
}

/* A field that must be absent or a non-negative integer (their resolveQuotaBytes). */
static int get_quantity(json_object *body, const char *key, uint64_t *ret) {
        json_object *v;
        int64_t i;

        *ret = 0;
        if (!json_object_object_get_ex(body, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (json_object_is_type(v, json_type_double)) {
                double d = json_object_get_double(v);
                if (d < 0 || d != (double) (int64_t) d)
                        return -EINVAL;
                *ret = (uint64_t) d;
                return 0;
        }
        if (!json_object_is_type(v, json_type_int))
                return -EINVAL;
        i = json_object_get_int64(v);
        if (i < 0)
                return -EINVAL;
        *ret = (uint64_t) i;
        return 0;
}


static bool blank(const char *s) {
        if (!s)
                return true;
        for (; *s; s++)
                if (!strchr(" \t\r\n", *s))
                        return false;
        return true;
}

/* permissionEpoch.mounts must be exactly [{source:"workspace", mode:"read-write"}]. */
static bool mounts_valid(json_object *epoch) {
        json_object *mounts, *m0, *v;

        if (!json_object_object_get_ex(epoch, "mounts", &mounts))
                return true;            /* optional in what they send: the workspace is the only mount */
        if (!json_object_is_type(mounts, json_type_array) || json_object_array_length(mounts) != 1)
                return false;
        m0 = json_object_array_get_idx(mounts, 0);
        if (!json_object_is_type(m0, json_type_object) || json_object_object_length(m0) != 2)
                return false;
        return json_object_object_get_ex(m0, "source", &v) && json_object_is_type(v, json_type_string) &&
               streq(json_object_get_string(v), "workspace") &&
               json_object_object_get_ex(m0, "mode", &v) && json_object_is_type(v, json_type_string) &&
               streq(json_object_get_string(v), "read-write");
}

/* ---- the answer ------------------------------------------------------------------------------ */

/* The refs of the workspace: this run's (its size) and the one before it (the diff's base). */
static void find_refs(Manager *m, const char *ws, const char *exec_id, char **ret_prev, uint64_t *ret_bytes) {
        CasRef *refs = NULL, ref = {};
        const char *prev;
        size_t n = 0;

        *ret_prev = NULL;
        *ret_bytes = 0;
        /* Known since this daemon published it: no listing of the workspace's refs, whose number
         * grows until the next pruning. */
        if (workspace_heads_base(&m->exec.heads, ws, exec_id, &prev) > 0 && cas_read_ref(m->cas, ws, exec_id, &ref) >= 0) {
                *ret_bytes = ref.bytes;
                cas_ref_done(&ref);
                *ret_prev = strdup(prev);
                return;
        }
        if (cas_list_refs(m->cas, ws, &refs, &n) < 0)
                return;
        /* Newest first: the ref after this run's is the workspace as the run found it. */
        for (size_t i = 0; i < n; i++)
                if (streq(refs[i].exec_id, exec_id)) {
                        *ret_bytes = refs[i].bytes;
                        if (i + 1 < n)
                                *ret_prev = strdup(refs[i + 1].tree);
                        break;
                }
        cas_refs_free(refs, n);
}

static json_object *environment_variables(const char *language, bool network) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        /* What the sandbox gets after --clearenv (sandbox-argv.c), plus what we add here. */
        json_object_object_add(o, "PATH", json_object_new_string(SANDBOX_PATH));
        json_object_object_add(o, "HOME", json_object_new_string(SANDBOX_WORKSPACE));
        json_object_object_add(o, "LANG", json_object_new_string("C.UTF-8"));
        json_object_object_add(o, "TMPDIR", json_object_new_string("/tmp"));
        json_object_object_add(o, "USER", json_object_new_string("sandbox"));
        json_object_object_add(o, "LOGNAME", json_object_new_string("sandbox"));
        if (streq(language, "r"))
                json_object_object_add(o, "R_ENVIRON_USER", json_object_new_string("/dev/null"));
        else if (streq(language, "python"))
                json_object_object_add(o, "PYTHONNOUSERSITE", json_object_new_string("1"));
        if (network) {
                /* The bridge's proxy (sandbox-argv.c): the only way out, to the run's gateway. */
                static const char *const proxy[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };

                for (size_t i = 0; i < ELEMENTSOF(proxy); i++)
                        json_object_object_add(o, proxy[i], json_object_new_string(SANDBOX_PROXY_URL));
                json_object_object_add(o, "NO_PROXY", json_object_new_string("localhost,127.0.0.1,::1"));
                json_object_object_add(o, "no_proxy", json_object_new_string("localhost,127.0.0.1,::1"));
        }
        return o;
}

json_object *sdp_result_json(Manager *m, json_object *ours, const char *language, const char *revision,
                             const char *network_revision, bool network_open, uint64_t max_output,
                             uint64_t finished) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *out = NULL, *err = NULL, *prev = NULL;
        json_object *v, *created = NULL, *modified = NULL, *snap;
        const char *status = "", *snapshot = NULL, *stdout_s = "", *stderr_s = "", *id = "", *ws = "";
        const char *network = "none";
        size_t out_size, err_size;
        uint64_t duration = 0, bytes = 0;
        char when[32], kernel[160], env_rid[SDP_ENV_REVISION_ID_MAX];
        int exit_code = 1, r;

        if (!o)
                return NULL;
        if (json_object_object_get_ex(ours, "executionId", &v))
                id = json_object_get_string(v);
        if (json_object_object_get_ex(ours, "workspaceId", &v))
                ws = json_object_get_string(v);
        if (json_object_object_get_ex(ours, "status", &v))
                status = json_object_get_string(v);
        if (json_object_object_get_ex(ours, "stdout", &v))
                stdout_s = json_object_get_string(v);
        if (json_object_object_get_ex(ours, "stderr", &v))
                stderr_s = json_object_get_string(v);
        if (json_object_object_get_ex(ours, "durationMs", &v))
                duration = (uint64_t) json_object_get_int64(v);
        if (json_object_object_get_ex(ours, "snapshot", &v) && json_object_is_type(v, json_type_string))
                snapshot = json_object_get_string(v);
        /* The environment the run had: their revision id of it. */
        if (json_object_object_get_ex(ours, "environment", &v) && json_object_is_type(v, json_type_object)) {
                json_object *n, *rv;

                if (json_object_object_get_ex(v, "name", &n) && json_object_object_get_ex(v, "revision", &rv)) {
                        sdp_env_revision_id(json_object_get_string(n), (unsigned) json_object_get_int64(rv), env_rid);
                        revision = env_rid;
                }
        }
        /* Our gateway's revision, or "none": what the run actually had. */
        if (json_object_object_get_ex(ours, "network", &v) && json_object_is_type(v, json_type_string))
                network = json_object_get_string(v);
        /* A signal (or a limit that killed the run) is exit code 1, as they report it. */
        if (streq(status, "exited") && json_object_object_get_ex(ours, "exitCode", &v))
                exit_code = json_object_get_int(v);

        r = sdp_output_bound(stdout_s, strlen(stdout_s), stderr_s, strlen(stderr_s), max_output,
                             &out, &out_size, &err, &err_size);
        if (r < 0)
                return NULL;

        if (snapshot) {
                find_refs(m, ws, id, &prev, &bytes);
                r = sdp_tree_diff(m->cas, prev, snapshot, &created, &modified);
                if (r < 0) {
                        log_warning_errno(r, "Failed to compare the snapshots of execution '%s', ignoring: %m", id);
                        created = json_object_new_array();
                        modified = json_object_new_array();
                }
        } else {
                created = json_object_new_array();
                modified = json_object_new_array();
        }

        json_object_object_add(o, "exitCode", json_object_new_int(exit_code));
        json_object_object_add(o, "stdout", json_object_new_string_len(out, (int) out_size));
        json_object_object_add(o, "stderr", json_object_new_string_len(err, (int) err_size));
        json_object_object_add(o, "createdFiles", created);
        json_object_object_add(o, "modifiedFiles", modified);
        json_object_object_add(o, "environmentVariables", environment_variables(language, !streq(network, "none")));
        if (revision)
                json_object_object_add(o, "environmentRevisionId", json_object_new_string(revision));
        (void) snprintf(kernel, sizeof(kernel), "ephemeral:%s", id);
        json_object_object_add(o, "kernelId", json_object_new_string(kernel));
        json_object_object_add(o, "kernelMode", json_object_new_string("ephemeral"));
        json_object_object_add(o, "language", json_object_new_string(language));
        json_object_object_add(o, "startedAt", json_object_new_string(
                                       sdp_iso_time(finished > duration ? finished - duration : finished, when)));
        json_object_object_add(o, "finishedAt", json_object_new_string(sdp_iso_time(finished, when)));
        json_object_object_add(o, "networkPolicy", json_object_new_string(
                                       streq(network, "none") ? SDP_NETWORK_NONE :
                                       network_open ? SDP_NETWORK_OPEN : SDP_NETWORK_ALLOWLIST));
        json_object_object_add(o, "networkAccessRevision", json_object_new_string(
                                       streq(network, "none") ? "none" : network_revision ?: network));
        json_object_object_add(o, "cgroupMode", json_object_new_string(
                                       m->limits == LIMITS_SYSTEMD_SCOPE ? "systemd-scope" :
                                       m->limits == LIMITS_CGROUP ? "cgroup" : "none"));
        json_object_object_add(o, "runnerVersion", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "sandbox", json_object_new_string("bubblewrap"));
        json_object_object_add(o, "workingDirectory", json_object_new_string(SANDBOX_WORKSPACE));
        if (snapshot && (snap = json_object_new_object())) {
                /* An opaque reference into our CAS (a remote runner's refs are opaque to their API). */
                json_object_object_add(snap, "pool", json_object_new_string("agent-state"));
                json_object_object_add(snap, "digest", json_object_new_string(snapshot));
                json_object_object_add(snap, "size", json_new_u64(bytes));
                json_object_object_add(snap, "mediaType", json_object_new_string(
                                               "application/vnd.sandbox-runner.workspace-tree.v1"));
                json_object_object_add(o, "workspaceSnapshot", snap);
        }
        return STEAL(o);
}

static void reply_result(SdpRun *run, json_object *ours) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        o = sdp_result_json(run->m, ours, run->language, run->environment_revision, run->network_revision, run->network_open,
                            run->max_output_bytes, realtime_ms());
        if (!o)
                return sdp_reply_error(run->req, 500, "Out of memory");
        if (run->skills) {
                json_object *env;

                if (json_object_object_get_ex(o, "environmentVariables", &env))
                        sdp_skills_env(env);
        }
        sdp_reply_json(run->req, 200, o);
}

static void on_done(Execution *e, void *userdata) {
        _cleanup_(sdp_run_freep) SdpRun *run = userdata;
        _cleanup_(json_object_putp) json_object *ours = NULL;
        const char *message = NULL, *status = "";
        json_object *v;
        int failure;

        http_request_set_userdata(run->req, NULL, NULL);
        failure = execution_failure(e, &message);
        ours = failure < 0 ? NULL : execution_to_json(e);
        if (ours && json_object_object_get_ex(ours, "status", &v))
                status = json_object_get_string(v);

        /* Their runner throws, and so answers 400, where a run could not finish normally. */
        if (failure < 0)
                sdp_reply_error(run->req, 400, "%s execution failed: %s", language_title(run->language),
                                message ?: "the sandbox could not be started");
        else if (!ours)
                sdp_reply_error(run->req, 500, "Out of memory");
        else if (streq(status, "timeout"))
                sdp_reply_error(run->req, 400, "%s execution timed out after %" PRIu64 " ms",
                                language_title(run->language), run->timeout_ms);
        else if (streq(status, "workspace_quota_exceeded")) {
                uint64_t limit = 0;
                json_object *q;

                if (json_object_object_get_ex(ours, "workspaceQuota", &q) &&
                    json_object_object_get_ex(q, "limitBytes", &v))
                        limit = (uint64_t) json_object_get_int64(v);
                sdp_reply_error(run->req, 400, "Workspace exceeded the %" PRIu64 " byte execution quota (%s)",
                                limit, execution_workspace(e));
        } else if (streq(status, "failed") || streq(status, "interrupted") || streq(status, "cancelled"))
                sdp_reply_error(run->req, 400, "%s execution failed: %s", language_title(run->language), status);
        else
                reply_result(run, ours);
        execution_free_later(e);
}

/* A watch of a run whose client left: at its end (or when it is freed, at shutdown), the run's
 * place in the order goes. */
static void on_abandoned(void *userdata) {
        SdpRun *run = userdata;
        Execution *e = execution_watch_execution(run->watch);

        if (e && !execution_finished(e))
                return;         /* output, not the end */
        sdp_run_free(run);
}

static void on_request_gone(HttpRequest *req, void *userdata) {
        SdpRun *run = userdata;
        Execution *e = run->e;

        if (!run->started) {
                /* It waited for its turn or its chips and never ran: its place goes to the next. */
                sdp_run_free(run);
                execution_free_later(e);   /* with it the claim of its chips */
                return;
        }
        /* Their client's disconnect aborts the run (notes §1); nobody waits for the answer. Its
         * pair's turn passes on once the run is over (as theirs: when its process is gone), or
         * now if it cannot be watched. */
        run->req = NULL;
        if (execution_watch_add(e, on_abandoned, run, &run->watch) < 0)
                sdp_run_free(run);
        execution_detach(e);
        execution_cancel(e, EXECUTION_STATUS_CANCELLED);
}

static void on_claimed(NpuClaim *c, int error, const char *why, void *userdata) {
        SdpRun *run = userdata;

        if (error < 0) {
                http_request_set_userdata(run->req, NULL, NULL);
                sdp_reply_error(run->req, error == -EBUSY ? 409 : 400, "NPU devices cannot be used: %s",
                                why ?: "the chips cannot be had");
                execution_free_later(run->e);
                sdp_run_free(run);
                return;
        }
        run->started = true;
        (void) execution_start(run->e, on_done, run);
}

/* Its turn has come (at once, or from the loop once the earlier run of its pair left): claim its
 * chips, then start; or start. */
static void run_go(void *userdata) {
        SdpRun *run = userdata;
        int r;

        if (run->n_npu_chips > 0) {
                SdpRequest p = { .n_npu_chips = run->n_npu_chips };

                /* Their host card indices are our chips' logic ids: held and re-probed, then the run. */
                memcpy(p.npu_chips, run->npu_chips, sizeof(p.npu_chips));
                r = sdp_npu_claim(run->m, run->req, run->e, &p, on_claimed, run);
                if (r < 0) {
                        /* Answered already. */
                        http_request_set_userdata(run->req, NULL, NULL);
                        execution_free_later(run->e);
                        sdp_run_free(run);
                }
                return;
        }
        run->started = true;
        (void) execution_start(run->e, on_done, run);
}

/* The run @e of request @p takes its place in their order (notes §1): runs of one (session, agent)
 * one after the other, in the order they came; @run (taken) goes with it. */
static void run_enqueue(Manager *m, HttpRequest *req, SdpRun *run, Execution *e, const SdpRequest *p) {
        int r;

        /* Their maxWorkspaceBytes bounds our quota for this run (the smaller one applies). */
        execution_cap_limits(e, p->max_workspace, 0);
        run->e = e;
        memcpy(run->npu_chips, p->npu_chips, sizeof(run->npu_chips));
        run->n_npu_chips = p->n_npu_chips;
        r = sdp_slot_enter(m, p->session, p->agent, p->id, p->language, run_go, run, &run->slot);
        if (r < 0) {
                execution_free(e);
                sdp_run_free(run);
                return sdp_reply_error(req, 500, "Out of memory");
        }
        http_request_set_userdata(req, run, on_request_gone);
        http_request_suspend(req);
        if (r > 0)
                run_go(run);    /* else run_go() from the loop, or on_request_gone(), has it */
}

/* ---- the request ----------------------------------------------------------------------------- */

/* The replay table's key for their id: apart from our own ids, bounded. */
static void replay_key(const char *id, char ret[static REPLAY_ID_MAX + 1]) {
        char h[129];

        if (strlen(id) + 3 <= REPLAY_ID_MAX) {
                memcpy(ret, "sd:", 3);
                strcpy(ret + 3, id);
        } else {
                /* Long ids: "sd-" and 40 hex of their SHA-256 (a valid id itself is never this long). */
                sdp_workspace_for_key(id, h);
                memcpy(ret, "sd:#", 4);
                strcpy(ret + 4, h);
        }
}

bool sdp_request_check(Manager *m, HttpRequest *req, json_object *body, SdpKind kind, SdpRequest *ret) {
        SdpRequest p = {};
        json_object *epoch, *v;
        const char *mode, *reason;
        uint64_t ignored;

        p.id = json_get_string(body, "executionId");
        p.code = json_get_string(body, "code");
        if (blank(p.id) || strlen(p.id) > 160) {
                sdp_reply_error(req, 400, "executionId must be a non-blank string of at most 160 characters");
                return false;
        }
        if (blank(p.code)) {
                sdp_reply_error(req, 400, "code must be a non-blank string");
                return false;
        }
        /* The pair (permissionEpoch.sessionId, agentId) owns a managed run and orders the
         * others: both required, as their queue requires them. */
        p.agent = json_get_string(body, "agentId");
        if (blank(p.agent)) {
                sdp_reply_error(req, 400, "Agent ID is required");
                return false;
        }
        p.language = kind != SDP_KIND_EXECUTE ? "shell" : json_get_string(body, "language") ?: "python";
        if (kind == SDP_KIND_EXECUTE && !streq(p.language, "python") && !streq(p.language, "r")) {
                sdp_reply_error(req, 400, "language must be python or r");
                return false;
        }
        mode = json_get_string(body, "kernelMode");
        if (mode && streq(mode, "persistent")) {
                sdp_reply_error(req, 400, "Runner executions must be ephemeral; persistent runtimes are no "
                                "longer supported. Use managed Shell Execution for background tasks");
                return false;
        }
        if (json_object_object_get_ex(body, "kernelMode", &v) && !(mode && streq(mode, "ephemeral"))) {
                sdp_reply_error(req, 400, "kernelMode must be ephemeral");
                return false;
        }
        if (get_quantity(body, "executionTimeoutMs", &p.timeout_ms) < 0) {
                sdp_reply_error(req, 400, "executionTimeoutMs must be a non-negative integer");
                return false;
        }
        if (get_quantity(body, "maxOutputBytes", &p.max_output) < 0) {
                sdp_reply_error(req, 400, "maxOutputBytes must be a non-negative integer");
                return false;
        }
        if (get_quantity(body, "maxWorkspaceBytes", &p.max_workspace) < 0 ||
            get_quantity(body, "kernelIdleTimeoutMs", &ignored) < 0) {
                sdp_reply_error(req, 400, "maxWorkspaceBytes and kernelIdleTimeoutMs must be non-negative integers");
                return false;
        }
        if (!json_object_object_get_ex(body, "permissionEpoch", &epoch) ||
            !json_object_is_type(epoch, json_type_object)) {
                sdp_reply_error(req, 400, "permissionEpoch must be an object");
                return false;
        }
        p.session = json_get_string(epoch, "sessionId");
        if (blank(p.session)) {
                sdp_reply_error(req, 400, "Session ID is required");
                return false;
        }
        if (!mounts_valid(epoch)) {
                sdp_reply_error(req, 400, "permissionEpoch.mounts must be exactly the read-write workspace");
                return false;
        }
        if (!sdp_network_check(req, body, epoch, &p.net))
                return false;
        if (!sdp_npu_devices_parse(m, req, body, &p))
                return false;
        p.skills = json_get_string(body, "skillPackagesRoot");
        if (json_object_object_get_ex(body, "skillPackagesRoot", &v) && !json_object_is_type(v, json_type_null) &&
            !p.skills) {
                sdp_reply_error(req, 400, "skillPackagesRoot must be a string");
                return false;
        }
        p.environment_id = json_get_string(body, "environmentId");
        if (p.environment_id && kind == SDP_KIND_EXECUTE) {
                sdp_reply_error(req, 400, "environmentId is for shell runs; send environmentRevisionId");
                return false;
        }
        p.epoch_revision = json_get_string(epoch, "environmentRevisionId");
        p.key = json_get_string(body, "runnerWorkspaceKey");
        if (!p.key) {
                sdp_reply_error(req, 400, "Runner workspace must be inside the runner's own workspaces: "
                                "this runner shares no filesystem with the API; send runnerWorkspaceKey");
                return false;
        }
        if (!sdp_runner_workspace_key_valid(p.key)) {
                sdp_reply_error(req, 400, "Invalid runner workspace key");
                return false;
        }
        p.cwd = json_get_string(body, "cwd");
        if (json_object_object_get_ex(body, "cwd", &v) && !p.cwd) {
                sdp_reply_error(req, 400, "cwd must be a string");
                return false;
        }
        p.revision = json_get_string(body, "environmentRevisionId");
        if (manager_can_execute(m, &reason) < 0) {
                sdp_reply_error(req, 400, "Executions are refused: %s", reason);
                return false;
        }
        sdp_workspace_for_key(p.key, p.ws);
        *ret = p;
        return true;
}

Execution *sdp_execution_new(Manager *m, HttpRequest *req, const SdpRequest *p, ExecutionRequest **er,
                             EnvHold **hold, const char *skills_dir) {
        EgressEpoch *egress = NULL;
        Execution *e;
        int r;

        if (!sdp_network_prepare(m, req, p, &egress))
                return NULL;
        r = execution_new(&m->exec, STEAL(*er), &e);
        if (r < 0) {
                egress_epoch_release(egress);
                sdp_reply_error(req, 500, "Out of memory");
                return NULL;
        }
        /* Always the request's own policy: never the one in force on our own API. */
        execution_set_egress(e, egress);
        sdp_env_attach(e, STEAL(*hold));
        if (skills_dir && sdp_skills_attach(m, e, skills_dir, p->ws) < 0) {
                execution_free(e);
                sdp_reply_error(req, 500, "Out of memory");
                return NULL;
        }
        return e;
}

static void execute(Manager *m, HttpRequest *req, json_object *body, SdpKind kind) {
        _cleanup_(json_object_putp) json_object *ours = json_object_new_object();
        _cleanup_(execution_request_freep) ExecutionRequest *er = NULL;
        _cleanup_(sdp_run_freep) SdpRun *run = NULL;
        _cleanup_free_ char *why = NULL, *skills_dir = NULL;
        char rkey[REPLAY_ID_MAX + 1];
        json_object *env;
        ExecutionMaxima max = execution_maxima_from_config(&m->config);
        _cleanup_(hold_releasep) EnvHold *hold = NULL;
        SdpRequest p;
        Execution *e;
        int r;

        if (!ours)
                return sdp_reply_error(req, 500, "Out of memory");
        if (!sdp_request_check(m, req, body, kind, &p))
                return;

        /* Our request: the workspace their key names, the code, the limits. */
        json_object_object_add(ours, "workspaceId", json_object_new_string(p.ws));
        if (strlen(p.id) <= 128 && workspace_id_valid(p.id))
                json_object_object_add(ours, "executionId", json_object_new_string(p.id));
        if (kind == SDP_KIND_EXECUTE_SHELL) {
                static const char *const shell_argv[] = { SDP_SHELL_ARGV, NULL };
                json_object *argv = json_object_new_array();

                for (const char *const *a = shell_argv; argv && *a; a++)
                        json_object_array_add(argv, json_object_new_string(*a));
                json_object_object_add(ours, "argv", argv);
                json_object_object_add(ours, "stdin", json_object_new_string(p.code));
        } else {
                json_object_object_add(ours, "language", json_object_new_string(p.language));
                json_object_object_add(ours, "code", json_object_new_string(p.code));
        }
        if (p.cwd)
                json_object_object_add(ours, "cwd", json_object_new_string(p.cwd));
        /* 0 = none for them; ours always has one: the configured maximum. */
        json_object_object_add(ours, "timeoutMs", json_new_u64(
                                       p.timeout_ms > 0 ? MIN(p.timeout_ms, m->config.max_timeout_usec / 1000)
                                                        : m->config.max_timeout_usec / 1000));
        if (p.skills && sdp_skills_prepare(m, req, body, kind == SDP_KIND_EXECUTE ? sdp_execute : sdp_execute_shell,
                                           p.skills, &skills_dir) <= 0)
                return;
        if (kind == SDP_KIND_EXECUTE || skills_dir) {
                env = json_object_new_object();
                if (env && kind == SDP_KIND_EXECUTE)
                        json_object_object_add(env, streq(p.language, "r") ? "R_ENVIRON_USER" : "PYTHONNOUSERSITE",
                                               json_object_new_string(streq(p.language, "r") ? "/dev/null" : "1"));
                if (env && skills_dir)
                        sdp_skills_env(env);
                json_object_object_add(ours, "env", env);
        }
        /* The environment: their revision (or the starter), held from now until the run ends. */
        if (!sdp_env_prepare(m, req, &p, kind, &hold))
                return;
        if (hold)
                json_object_object_add(ours, "environment", json_object_new_string(env_hold_name(hold)));

        r = execution_request_parse(ours, EXECUTION_KIND_EXECUTE, &max, &er, &why);
        if (r == -ENOMEM)
                return sdp_reply_error(req, 500, "Out of memory");
        if (r < 0)
                return sdp_reply_error(req, 400, "Invalid request: %s", why ?: "bad field");

        replay_key(p.id, rkey);
        r = replay_table_check_and_insert(m->replay, rkey, now_usec(CLOCK_MONOTONIC));
        if (r == -EEXIST || (er->execution_id && execution_find(&m->exec, er->execution_id)))
                return sdp_reply_error(req, 409, "Execution ID has already been used");
        if (r < 0)
                return sdp_reply_error(req, 503, "Too many recent executions to track their ids; retry shortly");

        run = calloc(1, sizeof(*run));
        if (!run)
                return sdp_reply_error(req, 500, "Out of memory");
        *run = (SdpRun) {
                .m = m,
                .req = req,
                .language = strdup(p.language),
                .environment_revision = kind == SDP_KIND_EXECUTE_SHELL ? strdup(SDP_SHELL_REVISION) :
                                        p.revision ? strdup(p.revision) : NULL,
                .timeout_ms = p.timeout_ms > 0 ? p.timeout_ms : m->config.max_timeout_usec / 1000,
                .max_output_bytes = p.max_output,
                .submitted_ms = realtime_ms(),
                .skills = skills_dir,
        };
        if (p.net.allowlist && p.net.revision)
                run->network_revision = strdup(p.net.revision);
        run->network_open = p.net.open;
        if (!run->language || ((p.revision || kind == SDP_KIND_EXECUTE_SHELL) && !run->environment_revision) ||
            (p.net.allowlist && p.net.revision && !run->network_revision))
                return sdp_reply_error(req, 500, "Out of memory");

        e = sdp_execution_new(m, req, &p, &er, &hold, skills_dir);
        if (e)
                run_enqueue(m, req, STEAL(run), e, &p);
}

void sdp_execute(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        execute(m, req, body, SDP_KIND_EXECUTE);
}

void sdp_execute_shell(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        execute(m, req, body, SDP_KIND_EXECUTE_SHELL);
}
