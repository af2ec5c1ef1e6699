#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One whole agent session of the ScienceDiscovery API server against one daemon (issue 26):
the steps run IN ORDER, each on what the ones before it left, with one runnerWorkspaceKey and
one session, as their API server drives a direct runner (notes/sciencediscovery-protocol.md: §2
/health before every run, §8 the environment catalog synced at a run's start, §11 skills
prepared before the run that mounts them, §10 uploads, runs, then the pull), while our own API
answers on the daemon's other listener.

    /usr/bin/python3 tests/integration/sciencediscovery-journey.py --daemon BUILD/src/sandbox-runnerd
                                                                   [--run-as self] [--verbose] [--keep-tmp]

The steps: health and the direct-runner probe; the environment catalog (every revision's snapshot
hash-checked); a skill package prepared; a chunked, hash-checked upload (a wrong hash refused);
a python run that reads the upload, creates and modifies files; the skill package mounted
read-only in a run; a managed shell run polled at 200 ms, its logs paged; a cancel; a client that
hangs up and so aborts its run; the per-request network policy (an allowlist run reaches the
allowed test origin, the next run with "none" reaches nothing); an NPU job whose output lands in
the workspace, committed at its end (an export right after it holds the output; the next run's
createdFiles does not list it); the listing, downloads and a snapshot export of what the session made; our own API
on the other listener.

Like sciencediscovery-network.py the test runs itself again inside new mount and network
namespaces (`unshare --mount --net`): its test origins are egress-e2e.py's (allowed.test on
127.0.0.2:80, other.test on 127.0.0.4:80, in a private /etc/hosts), nothing leaves the machine.
The NPU host is FAKE, npu.py's: no NPU exists on the test machines; character device nodes made
with mknod from /dev/null's numbers and a fake npu-smi (tests/helpers/fake-npu-smi.sh), and the
broker's "fold" workload is a python script of a fake checkout.  The environments are built
offline from tests/helpers/make-wheelhouse.py's wheels.  Needs root (namespaces, mknod).
Prints TAP (one point a step), exits 1 on any failure.  Bounded: < 240 s.
"""

import email.utils
import hashlib
import importlib.util
import json
import os
import re
import secrets
import sys
import time
import uuid

sys.dont_write_bytecode = True     # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import execute_lib as L                                                    # noqa: E402
import npu as N                                                            # noqa: E402
import sd_lib as S                                                         # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import Result, now, trunc                                 # noqa: E402

_spec = importlib.util.spec_from_file_location("egress_e2e", os.path.join(HERE, "egress-e2e.py"))
E = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E)

INNER_ENV = "SR_SD_JOURNEY_INNER"
BUDGET = 230.0
SETUP = 150.0           # starter-python built from the wheelhouse, under load
RUN_TIMEOUT = 40.0
SESSION = "session-1"   # the permission epoch's sessionId (sd_lib.epoch()); the NPU jobs' too
CONFIG = """\
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=60
[Quota]
MaxOutputBytes=64K
[Network]
Mode=none
Mirrors=127.0.0.0/8
"""

STEPS, step = T.case_registry()


class Journey(S.Ctx):
    """The session: one key, formed as their API forms a remote runner's
    (<projectId>/<sessionId>/runners/<ns>), and what the steps hand on to the next ones."""

    def __init__(self, d, verbose, npu, dns):
        super().__init__(d, verbose, key="proj-%s/%s/runners/r1" % (secrets.token_hex(3), SESSION))
        self.npu = npu
        self.dns = dns
        self.revision = "starter-python@1"     # the starter's current revision, from the catalog
        self.skills_root = None
        self.files = {}                        # path -> bytes the session expects in the workspace

    def ws(self, *path):
        return os.path.join(self.d.workspace_path(S.workspace_name(self.key)), *path)

    def epoch(self, policy="none", access=None):
        e = S.epoch_with(self, policy, access)
        e["environmentRevisionId"] = self.revision
        return e

    def run(self, res, code, what, policy="none", access=None, **kw):
        """A run_python as their recorder makes it: GET /health first (it reads `sandbox`), then
        the signed POST /execute; the answer's JSON after its checks, or None."""
        h = self.sd("GET", "/health", auth=False)
        res.check(h.status == 200 and h.json().get("sandbox") == "bubblewrap", "%s: /health %s" % (what, h.brief()))
        kw.setdefault("environmentRevisionId", self.revision)
        b, r = self.execute(code, timeout=RUN_TIMEOUT, permissionEpoch=self.epoch(policy, access), **kw)
        if not res.check(r.status == 200, "%s: expected 200, got %s" % (what, r.brief())):
            return None
        j = r.json()
        # Their recorder throws without these three (notes §3).
        for k in ("environmentVariables", "createdFiles", "modifiedFiles"):
            res.check(k in j, "%s: the answer lacks %s" % (what, k))
        res.eq(what + ": kernelId", j.get("kernelId"), "ephemeral:" + b["executionId"])
        res.check(j.get("exitCode") == 0, "%s: exit %s, stderr %s" % (what, j.get("exitCode"), trunc(j.get("stderr"), 800)))
        return j

    def get_file(self, path):
        return self.sd("GET", S.query("/remote-workspace/file", workspace=self.key, path=path))


def expect(res, r, status, what, body=None):
    ok = res.check(r is not None and r.status == status,
                   "%s: expected HTTP %d, got %s" % (what, status, r.brief() if r is not None else None))
    if ok and body is not None:
        res.eq(what + " body", r.json(), body)
    return ok


def check_ref(res, what, ref):
    """An AgentStateRef of our CAS, as workspaceSnapshot and version are."""
    ref = ref or {}
    res.eq(what + ".pool", ref.get("pool"), "agent-state")
    res.check(re.match(r"^sha256:[0-9a-f]{64}$", ref.get("digest") or ""), "%s.digest %r" % (what, ref.get("digest")))
    res.check(isinstance(ref.get("size"), int) and ref["size"] > 0, "%s.size %r" % (what, ref.get("size")))


# ---- the session, in their API server's order ---------------------------------------------------

@step("1 health (no token) as every run reads it, then the direct-runner probe: GET /status with the token")
def s_health(j, res):
    r = j.sd("GET", "/health", auth=False)
    if not expect(res, r, 200, "GET /health"):
        return
    h = r.json()
    res.eq("status", h.get("status"), "ok")
    res.eq("platform (the probe reads it first)", h.get("platform"), "linux")
    res.eq("npuBroker.enabled (read unguarded)", (h.get("npuBroker") or {}).get("enabled"), True)
    res.eq("npuBroker workloads", [w.get("id") for w in (h.get("npuBroker") or {}).get("workloads", [])],
           ["fold", "escape"])
    res.eq("scientificEnvs.available", (h.get("scientificEnvs") or {}).get("available"), True)
    res.eq("sandboxNetwork", h.get("sandboxNetwork"), {"available": True, "modes": ["none", "domain-allowlist", "open"]})
    skew = abs(email.utils.parsedate_to_datetime(r.header("date")).timestamp() - time.time())
    res.check(skew < 5, "the Date header their client corrects its clock from is %.1f s off" % skew)
    expect(res, j.sd("GET", "/status", auth=False), 401, "the probe without the token", S.UNAUTHORIZED)
    r = j.sd("GET", "/status")
    if expect(res, r, 200, "GET /status (the token works)"):
        res.eq("kernels", r.json().get("kernels"), [])
        res.eq("activeExecutions of a fresh session", r.json().get("activeExecutions"), [])
    r = L.http(j.d.port, "GET", "/health")
    res.check(r.status == 200 and isinstance((r.json() or {}).get("sandbox"), dict),
              "the other listener is not our own API: %s" % r.brief())


@step("2 the environment catalog at the run's start: listed, every revision's snapshot matches its hash and size")
def s_environments(j, res):
    t0 = now()
    envs = {}
    while now() - t0 < SETUP:
        envs = j.sd("GET", "/health", auth=False).json().get("scientificEnvs") or {}
        if envs.get("startersReady"):
            break
        time.sleep(0.3)
    res.note("starters ready after %.1f s" % (now() - t0))
    if not res.check(envs.get("startersReady"), "starter-python not ready within %.0f s: %r" % (SETUP, envs)):
        return
    r = j.sd("GET", "/environments")
    if not expect(res, r, 200, "GET /environments"):
        return
    starter = next((e for e in r.json() if e.get("id") == "starter-python"), None)
    if not res.check(starter is not None, "no starter-python listed: %s" % r.brief()):
        return
    res.eq("starter kind", starter.get("kind"), "starter")
    j.revision = starter.get("currentRevisionId") or j.revision
    r = j.sd("GET", "/environment-revisions")
    if not expect(res, r, 200, "GET /environment-revisions"):
        return
    revs = r.json()
    res.check(any(x.get("id") == j.revision for x in revs), "the current revision %r is not listed" % j.revision)
    for x in revs:
        s = j.sd("GET", "/environment-revisions/%s/snapshot" % x["id"])
        if expect(res, s, 200, "snapshot of " + x["id"]):
            res.eq(x["id"] + " snapshot hash", hashlib.sha256(s.body).hexdigest(), x["snapshot"]["hash"])
            res.eq(x["id"] + " snapshot size", len(s.body), x["snapshot"]["size"])


SKILLS = [S.skill("data-tools", {"SKILL.md": b"# Data tools\n", "scripts/summarise.py": b"print('skill')\n"})]


@step("3 skill packages prepared as their client does: GET (absent), POST the bundle, GET (held)")
def s_skills(j, res):
    bid = S.bundle_id(SKILLS)
    expect(res, j.sd("GET", "/skill-packages/%s" % bid), 200, "GET before", {"id": bid})
    r = j.sd("POST", "/skill-packages", {"skills": SKILLS})
    if not expect(res, r, 200, "POST /skill-packages"):
        return
    res.eq("id", r.json().get("id"), bid)
    root = r.json().get("root")
    if res.check(isinstance(root, str) and root.endswith(bid), "root %r" % root):
        j.skills_root = root
    expect(res, j.sd("GET", "/skill-packages/%s" % bid), 200, "GET after", {"id": bid, "root": root})


@step("4 workspace transfer in: chunked, size and hash checked (201 echoes them); a wrong hash publishes nothing")
def s_upload(j, res):
    rows = ["x,y"] + ["%d,%d" % (i, i * i) for i in range(20000)]
    data = ("\n".join(rows) + "\n").encode()
    chunks = [data[i:i + 16384] for i in range(0, len(data), 16384)]
    res.check(len(chunks) > 4, "not several chunks")
    r = S.transfer(j.c, j.key, "data/input.csv", chunks)
    if expect(res, r, 201, "transfer data/input.csv"):
        res.eq("answer", r.json(), {"path": "data/input.csv", "size": len(data),
                                    "sha256": hashlib.sha256(data).hexdigest()})
        j.files["data/input.csv"] = data
    notes = b"# Notes\n"
    r = S.transfer(j.c, j.key, "notes.md", [notes])
    if expect(res, r, 201, "transfer notes.md"):
        j.files["notes.md"] = notes
    r = S.transfer(j.c, j.key, "data/tampered.csv", chunks, sha=hashlib.sha256(b"other").hexdigest())
    res.check(r is not None and r.status == 400 and isinstance((r.json() or {}).get("error"), str),
              "a wrong hash: %s" % (r.brief() if r else None))
    res.check(not os.path.exists(j.ws("data/tampered.csv")), "the mismatched upload was published")
    # Their push conflict check before a sync: POST files with the paths it is about to write.
    r = j.sd("POST", "/remote-workspace/files", {"workspace": j.key, "paths": ["data", "notes.md"]})
    if expect(res, r, 200, "POST /remote-workspace/files"):
        res.eq("listed", [(e["path"], e["size"]) for e in r.json()],
               [("data/input.csv", len(data)), ("notes.md", len(notes))])


@step("5 run_python: reads the upload, creates and modifies files; createdFiles, modifiedFiles, its snapshot")
def s_python(j, res):
    code = ("import csv, os\n"
            "rows = list(csv.DictReader(open('data/input.csv')))\n"
            "os.makedirs('results', exist_ok=True)\n"
            "total = sum(int(r['y']) for r in rows)\n"
            "open('results/summary.txt', 'w').write('rows=%d total=%d\\n' % (len(rows), total))\n"
            "open('notes.md', 'a').write('- summarised %d rows\\n' % len(rows))\n"
            "print('rows', len(rows))\n")
    a = j.run(res, code, "run_python")
    if a is None:
        return
    res.eq("stdout", a.get("stdout"), "rows 20000\n")
    res.eq("createdFiles", a.get("createdFiles"), ["results/summary.txt"])
    res.eq("modifiedFiles", a.get("modifiedFiles"), ["notes.md"])
    res.eq("environmentRevisionId", a.get("environmentRevisionId"), j.revision)
    res.eq("HOME", (a.get("environmentVariables") or {}).get("HOME"), "/workspace")
    res.check(S.ISO.match(a.get("startedAt") or "") and S.ISO.match(a.get("finishedAt") or ""), "ISO times")
    check_ref(res, "workspaceSnapshot", a.get("workspaceSnapshot"))
    total = sum(i * i for i in range(20000))
    j.files["results/summary.txt"] = ("rows=20000 total=%d\n" % total).encode()
    j.files["notes.md"] = b"# Notes\n- summarised 20000 rows\n"


@step("6 the skill package in a run: read at /skills, read-only there; the extension directory is writable")
def s_skill_run(j, res):
    if not res.check(j.skills_root, "no package from step 3"):
        return
    code = ("import os\n"
            "print(open('/skills/data-tools/SKILL.md').read().strip())\n"
            "for p in ('/skills/data-tools/new.txt', '/skills/data-tools/SKILL.md'):\n"
            "    try:\n        open(p, 'a').write('x')\n        print('writable', p)\n"
            "    except OSError as e:\n        print('refused', e.errno)\n"
            "print(bool(os.statvfs('/skills').f_flag & os.ST_RDONLY))\n"
            "open(os.path.join(os.environ['SCIENCEDISCOVERY_SKILL_EXTENSIONS_DIR'], 'ext.txt'), 'w').write('e')\n")
    a = j.run(res, code, "run with skillPackagesRoot", skillPackagesRoot=j.skills_root)
    if a is None:
        return
    # A new file: EROFS (30); the package's own 0444 file: EACCES (13) or EROFS; the mount read-only.
    res.check(a.get("stdout") in ("# Data tools\nrefused 30\nrefused 13\nTrue\n", "# Data tools\nrefused 30\nrefused 30\nTrue\n"),
              "inside the run: %r" % a.get("stdout"))
    ev = a.get("environmentVariables") or {}
    res.eq("SCIENCEDISCOVERY_SKILLS_DIR", ev.get("SCIENCEDISCOVERY_SKILLS_DIR"), "/skills")
    res.eq("createdFiles", a.get("createdFiles"), [".sciencediscovery/skill-extensions/ext.txt"])
    # Still the package it was: served again, re-verified.
    bid = S.bundle_id(SKILLS)
    expect(res, j.sd("GET", "/skill-packages/%s" % bid), 200, "GET after the run", {"id": bid, "root": j.skills_root})


@step("7 run_shell through the managed path: 202, polled every 200 ms to completed; its logs paged")
def s_shell(j, res):
    code = ("cat results/summary.txt > shell-out.txt\n"
            "head -c 20000 /dev/zero | tr '\\0' a\n"
            "echo -n done >&2\n")
    body, r = S.shell_submit(j, res, code)
    if not expect(res, r, 202, "POST /shell-executions"):
        return
    res.eq("202", {k: r.json().get(k) for k in ("id", "state", "sessionId", "agentId")},
           {"id": body["executionId"], "state": "queued", "sessionId": SESSION, "agentId": "main"})
    rec = S.shell_wait(j, res, body, limit=RUN_TIMEOUT)
    if rec is None:
        return
    res.eq("state", rec.get("state"), "completed")
    result = rec.get("result") or {}
    res.eq("result.exitCode", result.get("exitCode"), 0)
    res.eq("result.createdFiles", result.get("createdFiles"), ["shell-out.txt"])
    check_ref(res, "result.workspaceSnapshot", result.get("workspaceSnapshot"))
    res.eq("version (their API requires it)", rec.get("version"), result.get("workspaceSnapshot"))
    j.files["shell-out.txt"] = j.files.get("results/summary.txt", b"")
    got = S.read_logs(j, res, body)
    if got is None:
        return
    texts, pages, cursors, _ = got
    res.check(texts["stdout"] == "a" * 20000, "stdout through the pages: %d bytes" % len(texts["stdout"]))
    res.eq("stderr through the pages", texts["stderr"], "done")
    res.check(pages >= 2, "one page only: %d" % pages)
    res.check(cursors == sorted(cursors), "cursors out of order: %r" % cursors)


@step("8 cancel of a managed run (their execution_cancel): 202, then cancelled")
def s_cancel(j, res):
    body, r = S.shell_submit(j, res, "echo started\nsleep 60\n")
    if not expect(res, r, 202, "submit"):
        return
    t0 = now()
    while now() - t0 < 10 and j.sd("GET", S.shell_path(body)).json().get("state") != "running":
        time.sleep(0.2)
    r = j.sd("POST", S.shell_path(body, "/cancel"))
    if expect(res, r, 202, "cancel"):
        res.eq("its record", r.json().get("id"), body["executionId"])
    t0 = now()
    rec = S.shell_wait(j, res, body)
    if rec is not None:
        res.eq("state", rec.get("state"), "cancelled")
        res.check(now() - t0 < 10, "cancel took %.1f s" % (now() - t0))


@step("9 a client that disconnects aborts its run: gone from /status; the next run of the agent is not held up")
def s_disconnect(j, res):
    marker = "journey-hangup-" + secrets.token_hex(4)
    body = j.execute_body("import time\nprint('%s', flush=True)\ntime.sleep(60)\n" % marker,
                          permissionEpoch=j.epoch(), environmentRevisionId=j.revision)
    gone = S.execute_then_hang_up(j, res, body)
    if gone is None:
        return
    res.note("gone %.2f s after the hang-up" % gone)
    res.eq("activeExecutions", S.active_executions(j), [])
    # The next run of the same agent is not held up by it (their per-(session, agent) queue).
    a = j.run(res, "print('after')\n", "the next run")
    if a is not None:
        res.eq("stdout", a.get("stdout"), "after\n")


@step("10 the per-request network policy: an allowlist run reaches the allowed origin; the next with none nothing")
def s_network(j, res):
    ok, other, none = ("/journey-%s-%s" % (w, secrets.token_hex(4)) for w in ("ok", "other", "none"))
    urls = ["http://allowed.test" + ok, "http://other.test" + other]
    a = j.run(res, S.net_client(urls), "allowlist run", policy="domain-allowlist", access=S.net_access())
    if a is None:
        return
    out = json.loads(a.get("stdout") or "{}")
    res.eq("allowed.test", out["fetch"][urls[0]].get("status"), 200)
    res.eq("the allowed origin saw it once", len(E.HttpHandler.find(ok)), 1)
    res.eq("other.test: the gateway's refusal", out["fetch"][urls[1]].get("status"), 403)
    res.eq("other.test never reached", E.HttpHandler.find(other), [])
    res.check(out["direct"] != "connected", "a direct connect worked")
    res.eq("networkPolicy", a.get("networkPolicy"), "domain-allowlist")
    res.eq("networkAccessRevision", a.get("networkAccessRevision"), "rev-net-1")
    # On a policy change their API tears the session's kernels down (best effort) first.
    expect(res, j.sd("POST", "/kernels/teardown", {"sessionId": SESSION, "reason": "network policy changed"}), 200,
           "teardown", {"count": 0, "reason": "network policy changed"})
    urls = ["http://allowed.test" + none]
    a = j.run(res, S.net_client(urls), "none run", policy="none",
              access=S.net_access(mode="none", domains=(), revision="none"))
    if a is None:
        return
    out = json.loads(a.get("stdout") or "{}")
    res.check("error" in out["fetch"][urls[0]], "the none run fetched: %s" % out["fetch"][urls[0]])
    res.eq("origin never reached", E.HttpHandler.find(none), [])
    res.check(out["direct"] != "connected", "a direct connect worked")
    res.eq("no proxy", out["proxy"], None)
    res.eq("networkPolicy", a.get("networkPolicy"), "none")


@step("11 an NPU job on the FAKE host: inputs uploaded, submitted signed, polled; its output lands in the workspace, committed")
def s_npu(j, res):
    r = j.sd("GET", "/npu/workloads")
    if expect(res, r, 200, "GET /npu/workloads"):
        res.eq("ids", [w.get("id") for w in r.json()], ["fold", "escape"])
    for path, data in (("target.pdb", b"ATOM 1\n"), ("cfg.json", S.fold_config(j.d, j.key, j.npu.weights).encode())):
        r = j.sd("PUT", S.query("/remote-workspace/file", workspace=j.key, path=path), raw=data)
        if expect(res, r, 201, "PUT " + path, {"path": path, "size": len(data)}):
            j.files[path] = data
    body = S.job_body(j.key, SESSION, environmentRevisionId=j.revision)
    r = j.sd("POST", "/npu/jobs", body, signed=True)
    if not expect(res, r, 201, "POST /npu/jobs"):
        return
    job = r.json()["id"]
    final = S.wait_job(j, job, SESSION, ("succeeded", "failed", "cancelled"))
    res.eq("state", final.get("state"), "succeeded")
    res.eq("exitCode", final.get("exitCode"), 0)
    r = j.sd("GET", "/npu/jobs/%s/logs?session_id=%s" % (job, SESSION))
    if expect(res, r, 200, "logs"):
        res.check("fold: done" in r.json().get("stdout", ""), "logs: %s" % trunc(r.json()))
    r = j.sd("GET", "/npu/jobs/%s/result?session_id=%s" % (job, SESSION))
    if expect(res, r, 200, "result"):
        res.eq("result.job.id", (r.json().get("job") or {}).get("id"), job)
    r = j.get_file("out/run1/model.pdb")
    if expect(res, r, 200, "the job's output, downloaded"):
        res.eq("its bytes", r.body, b"MODEL of ATOM 1\n")
        j.files["out/run1/model.pdb"] = r.body
    # The job's end committed the workspace: an export right after it holds the job's output.
    r = j.sd("POST", "/remote-workspace/snapshots", {"workspace": j.key})
    if expect(res, r, 201, "POST /remote-workspace/snapshots right after the job"):
        entries = {f["path"]: f for f in r.json().get("files", [])}
        res.eq("out/run1/model.pdb in the export", (entries.get("out/run1/model.pdb") or {}).get("sha256"),
               hashlib.sha256(b"MODEL of ATOM 1\n").hexdigest())
    # The agent looks at the result: the next run sees the job's output.
    a = j.run(res, "m = open('out/run1/model.pdb').read()\nopen('analysis.txt', 'w').write(m.upper())\nprint(m, end='')\n",
              "a run that reads the job's output")
    if a is not None:
        res.eq("its stdout", a.get("stdout"), "MODEL of ATOM 1\n")
        res.note("createdFiles of the run after the job: %r" % a.get("createdFiles"))
        res.check("analysis.txt" in (a.get("createdFiles") or []), "createdFiles %r" % a.get("createdFiles"))
        # The job's files were there before this run: not its own (their runner scans before and after).
        res.check(not [p for p in (a.get("createdFiles") or []) if p.startswith("out/")],
                  "createdFiles lists the job's output: %r" % a.get("createdFiles"))
        res.check(not [p for p in (a.get("modifiedFiles") or []) if p.startswith("out/")],
                  "modifiedFiles lists the job's output: %r" % a.get("modifiedFiles"))
        j.files["analysis.txt"] = b"MODEL OF ATOM 1\n"


@step("12 the pull: listing, downloads, a snapshot export whose bytes survive a later overwrite")
def s_pull(j, res):
    r = j.sd("GET", S.query("/remote-workspace/files", workspace=j.key))
    if not expect(res, r, 200, "GET /remote-workspace/files"):
        return
    listed = {e["path"]: e for e in r.json()}
    for path, data in sorted(j.files.items()):
        res.check(path in listed and listed[path]["size"] == len(data),
                  "%s: listed %r, expected %d bytes" % (path, listed.get(path), len(data)))
    res.check(".sciencediscovery/skill-extensions/ext.txt" in listed, "the extension file is not listed")
    for path in ("results/summary.txt", "notes.md", "shell-out.txt"):
        r = j.get_file(path)
        res.check(r.status == 200 and r.body == j.files.get(path), "download %s: %s" % (path, r.brief()))
    r = j.sd("POST", "/remote-workspace/snapshots", {"workspace": j.key})
    if not expect(res, r, 201, "POST /remote-workspace/snapshots"):
        return
    snap = r.json()
    res.check(str(uuid.UUID(snap.get("id", "x"))) == snap.get("id"), "id %r" % snap.get("id"))
    entries = {f["path"]: f for f in snap.get("files", [])}
    for path, data in sorted(j.files.items()):
        res.eq(path + " in the snapshot", (entries.get(path) or {}).get("sha256"), hashlib.sha256(data).hexdigest())
    r = j.sd("PUT", S.query("/remote-workspace/file", workspace=j.key, path="notes.md", conflict="overwrite"),
             raw=b"rewritten\n")
    expect(res, r, 201, "overwrite notes.md")
    for path in ("notes.md", "data/input.csv", "out/run1/model.pdb"):
        r = j.sd("GET", S.query("/remote-workspace/snapshots/%s/file" % snap["id"], workspace=j.key, path=path))
        res.check(r.status == 200 and r.body == j.files.get(path), "snapshot file %s: %s" % (path, r.brief()))


@step("13 our own API on the daemon's other listener meanwhile: a v1-signed run")
def s_native(j, res):
    d = j.d
    body = json.dumps({"workspaceId": "native-journey", "language": "python", "code": "print(6*7)"}).encode()
    ts = int(time.time())
    headers = [("Authorization", "Bearer " + d.token), ("Content-Type", "application/json"),
               ("X-Sandbox-Timestamp", str(ts)),
               ("X-Sandbox-Signature", L.signature(d.key, ts, "POST", "/execute", body))]
    r = L.http(d.port, "POST", "/execute", headers, body, timeout=RUN_TIMEOUT)
    if expect(res, r, 200, "our POST /execute"):
        res.eq("stdout", r.json().get("stdout"), "42\n")
        res.eq("network (the policy in force, not the session's)", r.json().get("network"), "none")
    r = j.sd("GET", "/status")
    if expect(res, r, 200, "their /status at the end"):
        res.eq("activeExecutions", r.json().get("activeExecutions"), [])



def prepare(st):
    st.dns, servers = E.setup_test_hosts(st.workdir)
    st.cleanups.append(lambda: [(s.shutdown(), s.server_close()) for s in servers])
    d = st.d
    # The FAKE Ascend host of npu.py (no NPU exists here) and its broker's allowlist.
    st.nctx = N.Ctx(d, L.Budget(BUDGET), os.path.join(d.tmp, "ascend"))
    st.nctx.inodes = N.build_host(st.nctx.root)
    N.build_broker(st.nctx)
    npu_section = N.config_text(st.nctx).split("[Environments]")[0]
    with open(d.conf, "w") as f:
        f.write(CONFIG + npu_section + S.build_wheelhouse(os.path.join(d.tmp, "wh")))
    T.chown_tree(d.tmp, st.run_as)
    return "FAKE Ascend host under %s" % st.nctx.root


def make_ctx(st):
    N.wait_probed(st.nctx, Result("probe"))
    j = Journey(st.d, st.args.verbose, st.nctx, st.dns)
    sys.stdout.write("# runnerWorkspaceKey %s\n" % j.key)
    return j


def main():
    return S.test_main(__doc__, STEPS, BUDGET, make_ctx, prepare=prepare, inner_env=INNER_ENV)


if __name__ == "__main__":
    sys.exit(main())
