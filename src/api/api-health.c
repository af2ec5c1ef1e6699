/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * GET /health and GET /status: what the daemon can do and how busy it is. Reads the Manager and
 * the server's counters; may call core/, sandbox/, egress/, execution/ and the http/ transport.
 */

#include <stdio.h>
#include <stdlib.h>

#include "api/api-internal.h"
#include "build-config.h"
#include "core/manager.h"
#include "npu/npu-broker.h"
#include "npu/npu-manager.h"
#include "environment/env-manager.h"
#include "egress/egress-epochs.h"
#include "execution/execution.h"
#include "execution/prebuilt.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "kernel/kernel.h"
#include "sandbox/cgroup.h"
#include "util/macro.h"

/* [Kernels]: {enabled, count (the clients' kernels, against cap), prespawned (ready to be handed
 * out), prespawnStarting, prespawn (Prespawn=), cap (MaxKernels=, 0: none)}, reason when unavailable. */
static json_object *health_kernels(Manager *m) {
        json_object *k = json_object_new_object();
        unsigned starting = 0, ready = m->kernels ? kernel_manager_prespawned(m->kernels, &starting) : 0;

        if (!k)
                return NULL;
        json_object_object_add(k, "enabled", json_object_new_boolean(m->kernels != NULL));
        json_object_object_add(k, "count", json_new_u64(m->kernels ? kernel_manager_count(m->kernels) : 0));
        json_object_object_add(k, "prespawned", json_new_u64(ready));
        json_object_object_add(k, "prespawnStarting", json_new_u64(starting));
        json_object_object_add(k, "prespawn", json_new_u64(m->kernels ? m->config.kernels_prespawn : 0));
        json_object_object_add(k, "cap", json_new_u64(m->config.kernels_max));
        if (!m->kernels && m->config.kernels_enable)
                json_object_object_add(k, "reason", json_object_new_string(m->kernels_error ?: "unavailable"));
        return k;
}

/* [Execution] Prebuilt=: {max (per shape), burstMax and burstKeepSec (PrebuiltBurst=,
 * PrebuiltBurstKeepSec=), available (whether sandboxes can be built ahead here), shapes: {shell:
 * {wanted, target, ready, building, memoryPerIdleBytes}, code: {...}}} (docs/architecture.md,
 * "Sandboxes built ahead"); a shape is wanted once a run of it started, and then kept at its
 * target ready. */
static json_object *health_prebuilt(Manager *m) {
        json_object *p = json_object_new_object(), *shapes = json_object_new_object();

        if (!p || !shapes) {
                json_object_put(p);
                json_object_put(shapes);
                return NULL;
        }
        json_object_object_add(p, "max", json_new_u64(m->exec.prebuilt_max));
        json_object_object_add(p, "burstMax", json_new_u64(MAX(m->exec.prebuilt_burst, m->exec.prebuilt_max)));
        json_object_object_add(p, "burstKeepSec", json_new_u64(m->exec.prebuilt_burst_keep_usec / USEC_PER_SEC));
        json_object_object_add(p, "available", json_object_new_boolean(
                        m->exec.prebuilt_max > 0 && m->exec.exec_helper_fd >= 0 && m->probe.probe.proc_fresh));
        for (PrebuiltShape s = 0; s < _PREBUILT_SHAPE_MAX; s++) {
                json_object *one = json_object_new_object();
                unsigned ready, building;

                prebuilt_counts(&m->exec, s, &ready, &building);
                json_object_object_add(one, "wanted", json_object_new_boolean(prebuilt_wanted(&m->exec, s)));
                json_object_object_add(one, "target", json_new_u64(prebuilt_target(&m->exec, s)));
                json_object_object_add(one, "ready", json_new_u64(ready));
                json_object_object_add(one, "building", json_new_u64(building));
                /* What one idle sandbox of the shape costs in memory: the proportional set size of
                 * its keeper, bwrap's two processes and the exec helper (kernel memory, about
                 * another 0.5 MiB in a cgroup's count, not included); null while none is ready. */
                uint64_t pss = ready > 0 ? prebuilt_idle_pss(&m->exec, s) : 0;
                json_object_object_add(one, "memoryPerIdleBytes", pss > 0 ? json_new_u64(pss) : NULL);
                json_object_object_add(shapes, prebuilt_shape_to_string(s), one);
        }
        json_object_object_add(p, "shapes", shapes);
        return p;
}

void api_health(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *runner, *sandbox, *scopes, *net, *ws;
        const char *reason;
        bool can = manager_can_execute(m, &reason) >= 0;

        if (!o)
                return http_reply_oom(req);
        json_object_object_add(o, "status", json_object_new_string(can ? "ok" : "degraded"));
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "uptimeSec", json_new_u64(manager_uptime_sec(m)));
        /* Started by hand and re-executed (reexec.h): how often, and whether the new binary failed. */
        json_object_object_add(o, "reexecutions", json_new_u64(m->generation));
        if (m->stale_binary)
                json_object_object_add(o, "staleBinary", json_object_new_string(m->stale_binary));

        sandbox = json_object_new_object();
        json_object_object_add(sandbox, "usable", json_object_new_boolean(m->probe.usable));
        json_object_object_add(sandbox, "proc", json_object_new_string(m->probe.probe.proc_fresh ? "fresh" : "ro-bind"));
        json_object_object_add(sandbox, "disableUserns", json_object_new_boolean(m->probe.probe.disable_userns));
        if (m->probe.bwrap_version)
                json_object_object_add(sandbox, "bwrap", json_object_new_string(m->probe.bwrap_version));
        if (m->probe.reason)
                json_object_object_add(sandbox, "reason", json_object_new_string(m->probe.reason));
        /* The host uid that payloads run as (never 0: a root-started daemon became its user). */
        json_object_object_add(sandbox, "hostUid", json_object_new_int64((int64_t) m->sandbox_uid));
        json_object_object_add(sandbox, "executions", json_object_new_boolean(can));
        if (!can)
                json_object_object_add(sandbox, "executionsRefused", json_object_new_string(reason));
        json_object_object_add(sandbox, "prebuilt", health_prebuilt(m));
        json_object_object_add(o, "sandbox", sandbox);

        scopes = json_object_new_object();
        json_object_object_add(scopes, "available", json_object_new_boolean(m->scopes_available));
        if (m->scopes_reason)
                json_object_object_add(scopes, "reason", json_object_new_string(m->scopes_reason));
        /* What enforces the limits: a scope, our own cgroups, or (weaker) rlimits only. */
        json_object_object_add(scopes, "mechanism", json_object_new_string(limits_mechanism_to_string(m->limits)));
        if (m->limits == LIMITS_CGROUP)
                json_object_object_add(scopes, "cgroup", json_object_new_string(cgroup_root_describe(m->cgroups)));
        else if (m->limits == LIMITS_RLIMIT && m->cgroups_reason)
                json_object_object_add(scopes, "cgroupReason", json_object_new_string(m->cgroups_reason));
        json_object_object_add(scopes, "limits", json_object_new_string(
                        m->limits == LIMITS_SYSTEMD_SCOPE ? "scope" :
                        m->limits == LIMITS_CGROUP ? "cgroup" :
                        m->config.allow_unscoped ? "rlimit (weaker: memory as address space, tasks counted over the "
                                                   "whole sandbox user, no CPU limit, no accounting)"
                                                 : "none"));
        json_object_object_add(o, "scopes", scopes);

        net = json_object_new_object();
        egress_health(m->egress, net);
        json_object_object_add(o, "sandboxNetwork", net);

        if (m->environments)
                json_object_object_add(o, "environments", env_manager_health_json(m->environments));
        else {
                json_object *env = json_object_new_object();
                if (env)
                        json_object_object_add(env, "reason", json_object_new_string(m->environments_error ?: "unavailable"));
                json_object_object_add(o, "environments", env);
        }

        if (m->npu) {
                json_object *npu = npu_manager_health_json(m->npu), *broker = NULL;
                if (m->broker)
                        broker = npu_broker_health_json(m->broker);
                else if (m->config.npu_broker && (broker = json_object_new_object())) {
                        json_object_object_add(broker, "enabled", json_object_new_boolean(false));
                        json_object_object_add(broker, "reason", json_object_new_string(m->broker_error ?: "unavailable"));
                }
                if (npu && broker)
                        json_object_object_add(npu, "broker", broker);
                else
                        json_object_put(broker);
                json_object_object_add(o, "npu", npu);
        }
        else {
                json_object *npu = json_object_new_object();
                if (npu) {
                        json_object_object_add(npu, "enabled", json_object_new_boolean(false));
                        if (m->config.npu_enable)
                                json_object_object_add(npu, "reason", json_object_new_string(m->npu_error ?: "unavailable"));
                }
                json_object_object_add(o, "npu", npu);
        }

        json_object_object_add(o, "kernels", health_kernels(m));
        json_object_object_add(o, "fleet", manager_fleet_health(m));

        ws = json_object_new_object();
        {
                _cleanup_free_ char *root = NULL;
                uint64_t used, count;
                bool known = manager_workspace_usage(m, &used, &count);

                if (asprintf(&root, "%s/workspaces", m->state_dir) >= 0)
                        json_object_object_add(ws, "root", json_object_new_string(root));
                /* Measured in the background at most every 30 s: null until the first result. */
                json_object_object_add(ws, "usedBytes", known ? json_new_u64(used) : NULL);
                json_object_object_add(ws, "count", known ? json_new_u64(count) : NULL);
        }
        json_object_object_add(o, "workspace", ws);

        runner = json_object_new_object();
        json_object_object_add(runner, "maxWorkspaceBytes", json_new_u64(m->quota.max_workspace_bytes));
        json_object_object_add(runner, "maxFileBytes", json_new_u64(0));
        json_object_object_add(runner, "maxOutputBytes", json_new_u64(m->quota.max_output_bytes));
        json_object_object_add(runner, "maxUploadFileBytes", json_new_u64(m->quota.max_upload_file_bytes));
        json_object_object_add(runner, "maxUploadRequestBytes", json_new_u64(m->quota.max_upload_request_bytes));
        json_object_object_add(runner, "runningExecutions", json_new_u64(m->exec.n_running));
        json_object_object_add(o, "runner", runner);
        http_reply_json(req, 200, o);
}

void api_status(Manager *m, HttpRequest *req, const Route *route, json_object *body,
                const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *conn = json_object_new_object(), *reqs = json_object_new_object();

        if (!o || !conn || !reqs) {
                json_object_put(conn);
                json_object_put(reqs);
                return http_reply_oom(req);
        }
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "uptimeSec", json_new_u64(manager_uptime_sec(m)));
        json_object_object_add(o, "socketActivated", json_object_new_boolean(m->socket_activated));
        json_object_object_add(o, "listeners", json_new_u64(http_server_n_listeners(m->http)));
        json_object_object_add(conn, "open", json_new_u64(http_server_n_connections(m->http)));
        json_object_object_add(conn, "max", json_new_u64(m->config.max_connections));
        json_object_object_add(conn, "maxPerClient", json_new_u64(m->config.max_connections_per_client));
        json_object_object_add(o, "connections", conn);
        json_object_object_add(reqs, "total", json_new_u64(http_server_n_requests(m->http)));
        json_object_object_add(reqs, "authFailures", json_new_u64(m->n_auth_failures));
        json_object_object_add(o, "requests", reqs);
        json_object_object_add(o, "idleExitSec", json_new_u64(m->config.idle_exit_usec / USEC_PER_SEC));
        {
                json_object *ex = json_object_new_object(), *running = json_object_new_array();
                for (Execution *e = m->exec.executions; e; e = execution_next(e))
                        if (!execution_finished(e)) {
                                json_object *x = json_object_new_object();
                                json_object_object_add(x, "executionId", json_object_new_string(execution_id(e)));
                                json_object_object_add(x, "workspaceId", json_object_new_string(execution_workspace(e)));
                                json_object_array_add(running, x);
                        }
                json_object_object_add(ex, "running", running);
                json_object_object_add(ex, "total", json_new_u64(m->exec.n_total));
                json_object_object_add(o, "executions", ex);
        }
        http_reply_json(req, 200, o);
}
