#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the ScienceDiscovery dialect's NPU routes (docs/api.md 15.7, notes §9)
against a FAKE Ascend host: no NPU exists on the test machines.  The host is tests/integration/
npu.py's (build_host(): character device nodes made with mknod from /dev/null's numbers, so
nothing real is reachable through them; a driver and toolkit tree; a fake npu-smi that prints
the real output format, names chip 2 an "Ascend 310P3" and chip 1 claimed), and so is the broker's
allowlist (build_broker(): a "fold" workload, a python script of a fake checkout that reads its
config and writes into the workspace).

    /usr/bin/python3 tests/integration/sciencediscovery-npu.py --daemon BUILD/src/sandbox-runnerd
                                                               [--run-as self] [--verbose] [--keep-tmp]

Checks: /health's npuBroker; GET /npu/devices as their NpuInventory, and the same inventory as
/resources' npu; GET /npu/workloads; a job
submitted signed (their NPU job signature) into the runner workspace of its key, polled to
succeeded, its logs, result and list summaries; refusals (unsigned, no environmentRevisionId,
no key, another session 400, unknown 404, a result while running 409); cancel signed with their
cancel message; a running job in /status's npuJobs (a summary), an ended one no longer; npuDevices on /execute and /shell-executions (the chips held and bound, no
network).  Prints TAP, exits 1 on any failure.  Needs root (mknod): not a skip, a failure
otherwise.  Bounded: < 150 s; traffic only to 127.0.0.1.
"""

import os
import sys

sys.dont_write_bytecode = True     # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import execute_lib as L                                                    # noqa: E402
import npu as N                                                            # noqa: E402
import sd_lib as S                                                      # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import Result, trunc                                 # noqa: E402

BUDGET = 140.0
SESSION = "sd-npu-session-1"
CASES, case = T.case_registry()


def expect(res, r, status, what, body=None):
    ok = res.check(r.status == status, "%s: expected HTTP %d, got %s" % (what, status, r.brief()))
    if ok and body is not None:
        res.eq(what + " body", r.json(), body)
    return ok


def write_files(ctx, res, files):
    """Files into the runner workspace of ctx.key, by a legacy shell run of the dialect."""
    code = "".join("mkdir -p \"$(dirname %s)\"\nprintf '%%s' '%s' > %s\n" % (p, d.replace("'", "'\\''"), p)
                   for p, d in files.items())
    b = ctx.execute_body(code)
    b.pop("language")
    r = ctx.sd("POST", "/execute-shell", b, signed=True, timeout=30)
    return expect(res, r, 200, "writing the job's files") and res.check(r.json().get("exitCode") == 0, r.brief())


def fold_config(ctx, **over):
    return S.fold_config(ctx.d, ctx.key, ctx.npu.weights, **over)


def job_body(ctx, **kw):
    return S.job_body(ctx.key, SESSION, **kw)


def wait_state(ctx, job, states, t=60):
    return S.wait_job(ctx, job, SESSION, states, t)


@case("1 sd npu health: npuBroker enabled with their workload descriptors")
def c_health(ctx, res):
    j = ctx.sd("GET", "/health", auth=False).json()
    nb = j.get("npuBroker") or {}
    res.eq("enabled", nb.get("enabled"), True)
    res.eq("queueConcurrency", nb.get("queueConcurrency"), 1)
    res.eq("workload ids", [w.get("id") for w in nb.get("workloads", [])], ["fold", "escape"])
    fold = (nb.get("workloads") or [{}])[0]
    res.eq("fold descriptor", fold, {"id": "fold", "label": "fold", "description": "Fold a protein on one chip",
                                     "phase": "available", "requiredInputs": ["configPath"],
                                     "requiresEnvironmentRevision": False})


@case("1 sd npu devices: their NpuInventory of the fake host's probed chips")
def c_devices(ctx, res):
    for q in ("", "?refresh=1"):
        r = ctx.sd("GET", "/npu/devices" + q, timeout=60)
        if not expect(res, r, 200, "GET /npu/devices" + q):
            continue
        j = r.json()
        res.eq("supported", j.get("supported"), True)
        res.check(S.ISO.match(j.get("capturedAt") or ""), "capturedAt %r" % j.get("capturedAt"))
        devs = {d.get("hostIndex"): d for d in j.get("devices", [])}
        res.eq("host indices", sorted(devs), [0, 1, 2, 3])
        res.eq("chip 0", {k: devs.get(0, {}).get(k) for k in ("chipName", "sandboxUsable")},
               {"chipName": "Ascend 910B3", "sandboxUsable": True})
        res.eq("chip 2 (a 310P) unusable", devs.get(2, {}).get("sandboxUsable"), False)
        res.check(devs.get(1, {}).get("sandboxUnusableReason"), "chip 1 (claimed) without a reason: %s" % devs.get(1))
    expect(res, ctx.sd("GET", "/npu/devices", auth=False), 401, "no token", S.UNAUTHORIZED)


@case("1 sd npu resources: /resources' npu is the inventory of /npu/devices")
def c_resources(ctx, res):
    r = ctx.sd("GET", "/resources")
    d = ctx.sd("GET", "/npu/devices")
    if not (expect(res, r, 200, "GET /resources") and expect(res, d, 200, "GET /npu/devices")):
        return
    npu = r.json().get("npu")
    if not res.check(isinstance(npu, dict), "/resources without npu: %s" % r.brief()):
        return
    res.check(S.ISO.match(npu.get("capturedAt") or ""), "npu.capturedAt %r" % npu.get("capturedAt"))
    strip = lambda j: {k: v for k, v in j.items() if k != "capturedAt"}     # noqa: E731
    res.eq("npu as /npu/devices answers it", strip(npu), strip(d.json()))
    res.eq("its host indices", sorted(x.get("hostIndex") for x in npu.get("devices", [])), [0, 1, 2, 3])


def status_jobs(ctx, res):
    r = ctx.sd("GET", "/status")
    if not expect(res, r, 200, "GET /status"):
        return None
    return {j.get("id"): j for j in r.json().get("npuJobs", [])}


@case("1 sd npu workloads: their descriptors, no host path")
def c_workloads(ctx, res):
    r = ctx.sd("GET", "/npu/workloads")
    if expect(res, r, 200, "GET /npu/workloads"):
        res.eq("ids", [w.get("id") for w in r.json()], ["fold", "escape"])
        res.check(ctx.npu.repo not in r.body.decode() and "argv" not in r.body.decode(), "host paths listed")


@case("2 sd npu job: submitted signed into the key's workspace, polled to succeeded; logs, result, list")
def c_job(ctx, res):
    if not write_files(ctx, res, {"target.pdb": "ATOM 1\n", "cfg.json": fold_config(ctx)}):
        return
    r = ctx.sd("POST", "/npu/jobs", job_body(ctx), signed=True)
    if not expect(res, r, 201, "POST /npu/jobs"):
        return
    j = r.json()
    res.eq("keys", sorted(j), ["createdAt", "environmentRevisionId", "id", "inputs", "logs", "sessionId", "state",
                               "updatedAt", "workloadId", "workspaceRoot"])
    res.eq("created", (j.get("sessionId"), j.get("workloadId"), j.get("inputs"), j.get("environmentRevisionId"),
                       j.get("workspaceRoot")),
           (SESSION, "fold", {"configPath": "cfg.json"}, "starter-python@1", "/their/host/path"))
    res.check(j.get("state") in ("queued", "running"), "state %r" % j.get("state"))
    job = j["id"]
    ctx.shared["job"] = job
    final = wait_state(ctx, job, ("succeeded", "failed", "cancelled"))
    res.eq("state", final.get("state"), "succeeded")
    res.eq("exitCode", final.get("exitCode"), 0)
    res.eq("an ended job in /status's npuJobs", (status_jobs(ctx, res) or {}).get(job), None)
    res.check("fold: done" in final.get("logs", {}).get("stdout", ""), "logs: %s" % trunc(final.get("logs")))
    res.check(S.ISO.match(final.get("finishedAt") or ""), "finishedAt %r" % final.get("finishedAt"))
    r = ctx.sd("GET", "/npu/jobs/%s/logs?session_id=%s" % (job, SESSION))
    if expect(res, r, 200, "logs"):
        res.check("chips 0" in r.json().get("stdout", "") and r.json().get("truncated") is False, r.brief())
    r = ctx.sd("GET", "/npu/jobs/%s/result?sessionId=%s" % (job, SESSION))
    if expect(res, r, 200, "result"):
        res.eq("result.job.id", (r.json().get("job") or {}).get("id"), job)
    r = ctx.sd("GET", "/npu/jobs?session_id=%s" % SESSION)
    if expect(res, r, 200, "list"):
        res.eq("ids", [x.get("id") for x in r.json()], [job])
        res.eq("summary workspaceRoot and logs", (r.json()[0].get("workspaceRoot"), r.json()[0].get("logs")),
               ("", {"stdout": "", "stderr": "", "truncated": False}))
    out = os.path.join(ctx.d.workspace_path(S.workspace_name(ctx.key)), "out", "run1", "model.pdb")
    res.check(os.path.exists(out) and open(out).read() == "MODEL of ATOM 1\n", "the job's output is in the workspace")


@case("2 sd npu refusals: unsigned, no revision, no key, other session 400, unknown 404, no session 400")
def c_refusals(ctx, res):
    expect(res, ctx.sd("POST", "/npu/jobs", job_body(ctx)), 401, "unsigned",
           {"error": "Invalid or expired NPU job signature"})
    for what, kw in (("no environmentRevisionId", {"environmentRevisionId": None}),
                     ("no runnerWorkspaceKey", {"runnerWorkspaceKey": None}),
                     ("not allowlisted", {"workloadId": "shell"}),
                     ("config out of the workspace", {"inputs": {"configPath": "../cfg.json"}})):
        r = ctx.sd("POST", "/npu/jobs", job_body(ctx, **kw), signed=True)
        if expect(res, r, 400, what):
            res.check(len(r.json()) == 1 and isinstance(r.json().get("error"), str), r.brief())
    job = ctx.shared.get("job", "0" * 16)
    expect(res, ctx.sd("GET", "/npu/jobs/%s?session_id=other-session" % job), 400, "another session",
           {"error": "NPU job belongs to another session"})
    expect(res, ctx.sd("GET", "/npu/jobs/%s?session_id=%s" % ("f" * 16, SESSION)), 404, "unknown",
           {"error": "NPU job not found"})
    expect(res, ctx.sd("GET", "/npu/jobs"), 400, "no session")
    expect(res, ctx.sd("GET", "/npu/jobs?session_id=%s" % SESSION, auth=False), 401, "no token", S.UNAUTHORIZED)


@case("3 sd npu cancel: result 409 while running; cancel signed stops it (cancelled)")
def c_cancel(ctx, res):
    if not write_files(ctx, res, {"slow.json": fold_config(ctx, run_dir="out/slow", sleep=60)}):
        return
    r = ctx.sd("POST", "/npu/jobs", job_body(ctx, inputs={"configPath": "slow.json"}), signed=True)
    if not expect(res, r, 201, "POST slow"):
        return
    job = r.json()["id"]
    wait_state(ctx, job, ("running",))
    # /status lists it while it runs: their job summary (no logs, workspaceRoot ""), any session's.
    st = (status_jobs(ctx, res) or {}).get(job)
    if res.check(st is not None, "the running job %s is not in /status's npuJobs" % job):
        res.eq("status job", {k: st.get(k) for k in ("id", "sessionId", "workloadId", "state", "inputs",
                                                      "environmentRevisionId", "workspaceRoot", "logs")},
               {"id": job, "sessionId": SESSION, "workloadId": "fold", "state": "running",
                "inputs": {"configPath": "slow.json"}, "environmentRevisionId": "starter-python@1",
                "workspaceRoot": "", "logs": {"stdout": "", "stderr": "", "truncated": False}})
        res.check(S.ISO.match(st.get("startedAt") or "") and "finishedAt" not in st, "status job times: %s" % st)
    expect(res, ctx.sd("GET", "/npu/jobs/%s/result?session_id=%s" % (job, SESSION)), 409, "result while running")
    expect(res, ctx.sd("POST", "/npu/jobs/%s/cancel" % job, {"sessionId": SESSION}), 401, "unsigned cancel",
           {"error": "Invalid or expired NPU job cancel signature"})
    r = ctx.sd("POST", "/npu/jobs/%s/cancel" % job, {"sessionId": "other-session"}, signed=True)
    expect(res, r, 400, "cancel from another session")
    r = ctx.sd("POST", "/npu/jobs/%s/cancel" % job, {"sessionId": SESSION}, signed=True)
    if expect(res, r, 200, "cancel"):
        res.eq("id", r.json().get("id"), job)
    final = wait_state(ctx, job, ("cancelled", "failed", "succeeded"), t=30)
    res.eq("state", final.get("state"), "cancelled")
    res.eq("processes left", N.job_processes(job), [])
    res.eq("a cancelled job in /status's npuJobs", (status_jobs(ctx, res) or {}).get(job), None)


DEVS = "import os\nprint(' '.join(sorted(n for n in os.listdir('/dev') if n.startswith('davinci'))), os.environ.get('ASCEND_RT_VISIBLE_DEVICES'))\n"


@case("4 sd npu npuDevices: a run with card 0 sees its node only, no network; unusable cards refused")
def c_npu_devices(ctx, res):
    epoch = ctx.execute_body("")["permissionEpoch"]
    epoch.update(networkPolicy="domain-allowlist",
                 networkAccess={"mode": "domain-allowlist", "allowedDomains": ["example.org"], "revision": "r1"})
    b, r = ctx.execute(DEVS, npuDevices=[0], permissionEpoch=epoch, timeout=60)
    if expect(res, r, 200, "npuDevices [0]"):
        j = r.json()
        res.check(j.get("exitCode") == 0, "exit %s: %s" % (j.get("exitCode"), trunc(j.get("stderr"))))
        res.eq("the sandbox's chip nodes and visible devices", j.get("stdout"), "davinci0 davinci_manager None\n")
        res.eq("networkPolicy of a run with chips", j.get("networkPolicy"), "none")
    for what, devs in (("a 310P (not selectable)", [2]), ("a claimed card", [1]), ("an unknown card", [7]),
                       ("not a number", ["0"]), ("twice", [0, 0])):
        b, r = ctx.execute("print(1)", npuDevices=devs)
        if expect(res, r, 400, what):
            res.check("error" in r.json() and len(r.json()) == 1, r.brief())
    body, r = S.shell_submit(ctx, res, "python3 - <<'EOF'\n%sEOF\n" % DEVS, npuDevices=[0])
    if expect(res, r, 202, "managed run with npuDevices [0]"):
        j = S.shell_wait(ctx, res, body, limit=60)
        if j:
            res.eq("state", j.get("state"), "completed")
            res.check(((j.get("result") or {}).get("stdout") or "").startswith("davinci0 "), "managed: %s" % j)



def prepare(st):
    d = st.d
    st.nctx = N.Ctx(d, L.Budget(BUDGET), os.path.join(d.tmp, "ascend"))
    st.nctx.inodes = N.build_host(st.nctx.root)
    N.build_broker(st.nctx)
    st.nctx.claim([1])
    with open(d.conf, "w") as f:
        f.write(N.config_text(st.nctx))
    T.chown_tree(d.tmp, st.run_as)
    return "FAKE Ascend host under %s" % st.nctx.root


def make_ctx(st):
    ctx = S.Ctx(st.d, st.args.verbose)
    ctx.npu = st.nctx
    ctx.shared = {}
    N.wait_probed(st.nctx, Result("probe"))
    return ctx


def main():
    # mknod needs root: the fake host cannot be built otherwise.
    return S.test_main(__doc__, CASES, BUDGET, make_ctx, config="", prepare=prepare,
                       need_root="this test builds fake device nodes with mknod and must run as root")


if __name__ == "__main__":
    sys.exit(main())
