/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host NPU broker (DESIGN.md §9, [NPU] Broker=yes): allowlisted host model jobs, never a host
 * shell. A request names a workload of the allowlist ([NPU] WorkloadsFile=, npu-workload.h), a
 * session (whose workspace is the workspace of that id) and its inputs; the job's argv is the
 * workload's template with every path checked after realpath(), its config file a checked copy
 * in the job's own directory. The job gets the workload's number of chips (picked among the
 * selectable free ones, held and re-probed as an execution's) and runs as
 * sandbox-runner-npu@<job>.service (DeviceAllow= for its chips, set over the bus before the
 * start), or, started by hand, as a child running the same binary. Jobs live in the store of
 * npu-jobs.h; those active when the daemon starts are marked interrupted and their units stopped.
 * Owns its jobs' units, children and claims; calls npu/, config/ and util/.
 */
#pragma once

#include <json-c/json.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config/config.h"
#include "npu/npu-manager.h"

typedef struct NpuBroker NpuBroker;

typedef struct NpuBrokerParams {
        sd_event *event;
        sd_bus *bus;                     /* the system bus, or NULL: under systemd the jobs are units */
        const Config *config;
        const char *state_dir;
        NpuManager *npu;                 /* the chips (NULL: no chips, every job is refused) */
        void (*busy_ref)(void *userdata);   /* while a job runs, the daemon does not idle-exit */
        void (*busy_unref)(void *userdata);
        void *userdata;
} NpuBrokerParams;

/* npu_broker_new() - load the allowlist, open the store, recover. Return: 0, or -errno with *ret_error. */
int npu_broker_new(const NpuBrokerParams *p, NpuBroker **ret, char **ret_error);
NpuBroker *npu_broker_free(NpuBroker *b);
static inline void npu_broker_freep(NpuBroker **b) {
        *b = npu_broker_free(*b);
}

/* GET /npu/workloads: {"workloads": [...]} (no host path). */
json_object *npu_broker_workloads_json(NpuBroker *b);

/*
 * npu_broker_submit() - POST /npu/jobs: {"workloadId", "sessionId", "inputs": {...}}. The job is
 * created (queued) and its chips claimed; it starts once they passed their re-probe. Its files are
 * those of the workspace @workspace_id, NULL: the workspace of the session's id (our own API; the
 * ScienceDiscovery dialect names the runner workspace of the request).
 * Return: 0 with the new job's id in @ret_id (17 bytes); -EINVAL (a bad body, an unknown workload),
 * -ENOENT (no workspace of that session, a missing file), -EAGAIN (the session's workspace is leased:
 * a run, an upload or another job; the job holds that lease from its checks to its end), -EPERM (a path that leaves the workspace
 * or the checkout), -ENODEV (no chips for it: 400 npu_unavailable), -EBUSY (its chips are held:
 * 409 npu_chip_unavailable), -ENOMEM; each but -ENOMEM with *ret_why.
 */
int npu_broker_submit(NpuBroker *b, json_object *body, const char *workspace_id, char *ret_id, char **ret_why);

/*
 * npu_broker_cancel() - POST /npu/jobs/{id}/cancel: stop an active job of @session (its unit or
 * child gets SIGTERM; the job becomes "cancelled"). Return: 1 (cancelling), 0 (finished already),
 * -ENOENT (no such job of this session).
 */
int npu_broker_cancel(NpuBroker *b, const char *id, const char *session);

/*
 * npu_broker_stop() - the daemon is stopping: every active job is stopped (its unit, or its
 * runner gets SIGTERM) and marked interrupted now; its busy reference goes, so the stop does not
 * wait for it.
 */
void npu_broker_stop(NpuBroker *b);

/*
 * The commit of a workspace's tree when a job submitted with that workspace ends (the dialect's:
 * our snapshot store is not ours to call here). start() runs under the workspace's lease, which
 * the job keeps until done(@token) is called (from the loop, once) or abort(*@ret_handle) (the job
 * goes first: the daemon stops); the job's end is recorded after it. start() < 0: no commit.
 */
typedef struct NpuBrokerCommit {
        int (*start)(const char *job_id, const char *workspace_id, void (*done)(void *token), void *token,
                     void *userdata, void **ret_handle);
        void (*abort)(void *handle);
        void *userdata;
} NpuBrokerCommit;

void npu_broker_set_commit(NpuBroker *b, const NpuBrokerCommit *c);

/* The job store's directory fd (npu-jobs.h: list, load, log, result for a session). */
int npu_broker_jobs_fd(NpuBroker *b);

/* /health's "broker" part of "npu". */
json_object *npu_broker_health_json(NpuBroker *b);
