#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the ScienceDiscovery dialect (docs/api.md, "ScienceDiscovery dialect"):
one daemon started by hand with two listeners, our own API on one and
--listen sciencediscovery=127.0.0.1:PORT on the other, driven as their API server drives a
direct runner (notes/sciencediscovery-protocol.md): bearer token, execution signature
(HMAC-SHA256 keyed with the token over "<ms>\\n<sha256 hex of the body>"), their bodies and
answers.

    /usr/bin/python3 tests/integration/sciencediscovery.py --daemon BUILD/src/sandbox-runnerd
                                                           [--run-as self] [--verbose] [--keep-tmp]

Checks: GET /health fields their API reads, the Date header, 401s (bearer, missing, bad, expired
or future signature), 404, POST /execute of python runs that create and modify files
(createdFiles/modifiedFiles from the snapshot trees), exit codes, replays (409), bad bodies
(400 in their shape), a timeout, their output budget, GET /status and /resources, and our own API
still answering on the other listener (and neither listener taking the other's routes or
signature).  Prints TAP, exits 1 on any failure.  Bounded: < 90 s; traffic only to 127.0.0.1.
"""

import email.utils
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import sd_lib as S                                                         # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import HttpError, now, trunc                      # noqa: E402
from sd_lib import (BAD_SIGNATURE, ISO, RUN_TIMEOUT, UNAUTHORIZED, Ctx, shell_path,  # noqa: E402
                    shell_submit, shell_wait)

BUDGET = 85.0

CASES, case = T.case_registry()


def expect(res, r, status, body=None, what=""):
    ok = res.check(r.status == status, "%s: expected HTTP %d, got %s" % (what, status, r.brief()))
    if ok and body is not None:
        res.eq(what + " body", r.json(), body)
    return ok


def files_of(res, r):
    j = r.json() or {}
    return j.get("createdFiles"), j.get("modifiedFiles")


# ---- 1: health, headers ------------------------------------------------------------------------

@case("1 sd health: the fields their API reads, no token needed")
def c_health(ctx, res):
    r = ctx.sd("GET", "/health", auth=False)
    if not expect(res, r, 200, what="GET /health"):
        return
    j = r.json()
    for k in ("cgroupDelegated", "cgroupMode", "cgroupRoot", "executionAuth", "executionUser",
              "executionTimeoutMs", "maxFileBytes", "maxOutputBytes", "maxWorkspaceBytes", "networkPolicy",
              "noNewPrivileges", "npuBroker", "platform", "runnerVersion", "sandbox", "sandboxNetwork",
              "scientificEnvs", "seccompBaseline", "status", "workerConcurrency"):
        res.check(k in j, "health lacks %r: %s" % (k, trunc(r.body.decode(), 600)))
    res.eq("status", j.get("status"), "ok")
    res.eq("sandbox", j.get("sandbox"), "bubblewrap")
    res.eq("platform", j.get("platform"), "linux")
    res.eq("executionAuth", j.get("executionAuth"), "bearer+hmac-sha256")
    res.check(isinstance((j.get("npuBroker") or {}).get("enabled"), bool), "npuBroker.enabled is not a bool")
    res.eq("npuBroker.workloads", (j.get("npuBroker") or {}).get("workloads"), [])
    res.check(isinstance((j.get("scientificEnvs") or {}).get("available"), bool), "scientificEnvs.available")
    res.eq("sandboxNetwork", j.get("sandboxNetwork"), {"available": True, "modes": ["none", "domain-allowlist", "open"]})
    res.check(j.get("workerConcurrency", 0) is None, "workerConcurrency is not null")


@case("1 sd answers: Date within 5 s of our clock, JSON with charset, no-store, final newline")
def c_headers(ctx, res):
    r = ctx.sd("GET", "/health", auth=False)
    date = r.header("date")
    if res.check(date is not None, "no Date header"):
        skew = abs(email.utils.parsedate_to_datetime(date).timestamp() - time.time())
        res.check(skew < 5, "Date %r is %.1f s off" % (date, skew))
    res.eq("content-type", r.header("content-type"), "application/json; charset=utf-8")
    res.eq("cache-control", r.header("cache-control"), "no-store")
    res.check(r.body.endswith(b"}\n"), "body does not end in a newline: %r" % r.body[-10:])
    r = ctx.sd("GET", "/status", auth=False)
    res.check(r.header("date") is not None, "no Date header on a 401")


@case("1 sd 404: unknown routes, and our own API's routes are not served here")
def c_not_found(ctx, res):
    for method, path in (("GET", "/nope"), ("GET", "/workspaces/x/files"), ("GET", "/api/network-policy"),
                         ("DELETE", "/health")):
        expect(res, ctx.sd(method, path), 404, {"error": "Not found"}, "%s %s" % (method, path))


# ---- 2: auth -----------------------------------------------------------------------------------

@case("2 sd bearer: 401 Unauthorized without or with a wrong token; /status and /resources with it")
def c_bearer(ctx, res):
    expect(res, ctx.sd("GET", "/status", auth=False), 401, UNAUTHORIZED, "no token")
    expect(res, ctx.sd("GET", "/status", auth="wrong-token-0123456789"), 401, UNAUTHORIZED, "wrong token")
    expect(res, ctx.sd("GET", "/resources", auth=False), 401, UNAUTHORIZED, "/resources without token")
    b = ctx.execute_body("print(1)")
    expect(res, ctx.sd("POST", "/execute", b, auth=False, signed=True), 401, UNAUTHORIZED,
           "/execute signed, without token")
    r = ctx.sd("GET", "/status")
    if expect(res, r, 200, what="/status"):
        j = r.json()
        res.eq("status", j.get("status"), "ok")
        res.eq("kernels", j.get("kernels"), [])
        res.check(isinstance(j.get("activeExecutions"), list), "activeExecutions")
        res.check(ISO.match(j.get("capturedAt") or ""), "capturedAt %r" % j.get("capturedAt"))
    r = ctx.sd("GET", "/resources")
    if expect(res, r, 200, what="/resources"):
        j = r.json()
        res.check(isinstance(j.get("cpuCores"), int) and j["cpuCores"] >= 1, "cpuCores %r" % j.get("cpuCores"))
        res.check(j.get("memoryTotalBytes", 0) > 0, "memoryTotalBytes")
        res.check(isinstance(j.get("workspaceDisk"), dict) and j["workspaceDisk"].get("totalBytes", 0) > 0,
                  "workspaceDisk %r" % j.get("workspaceDisk"))


@case("2 sd signature: missing, wrong key, other body, expired, future, seconds, uppercase: 401")
def c_signature(ctx, res):
    b = ctx.execute_body("print(1)")
    data = json.dumps(b).encode()
    expect(res, ctx.sd("POST", "/execute", b), 401, BAD_SIGNATURE, "unsigned")
    t, s_wrong = ctx.sign(data, token="not-the-token-0123456789")
    expect(res, ctx.sd("POST", "/execute", b, signed=True, ts=t, sig=s_wrong), 401, BAD_SIGNATURE, "wrong key")
    t, s_other = ctx.sign(data + b" ")
    expect(res, ctx.sd("POST", "/execute", b, signed=True, ts=t, sig=s_other), 401, BAD_SIGNATURE, "other body")
    ms = int(time.time() * 1000)
    for what, ts in (("expired (-31 s)", ms - 31000), ("future (+31 s)", ms + 31000), ("seconds", ms // 1000)):
        expect(res, ctx.sd("POST", "/execute", b, signed=True, ts=ts), 401, BAD_SIGNATURE, what)
    t, s = ctx.sign(data)
    expect(res, ctx.sd("POST", "/execute", b, signed=True, ts=t, sig=s.upper()), 401, BAD_SIGNATURE, "uppercase")
    # Within the window (-20 s) it is good: the same body runs.
    r = ctx.sd("POST", "/execute", b, signed=True, ts=ms - 20000, timeout=RUN_TIMEOUT)
    expect(res, r, 200, what="signed 20 s ago")


# ---- 3: execute --------------------------------------------------------------------------------

@case("3 sd execute: a python run creates files (createdFiles, sorted), the answer in their shape")
def c_create(ctx, res):
    code = ("import os\nos.makedirs('sub', exist_ok=True)\nopen('sub/b.txt','w').write('b')\n"
            "open('a.txt','w').write('a')\nopen('keep.txt','w').write('k')\nprint('made', flush=True)\n")
    b, r = ctx.execute(code)
    if not expect(res, r, 200, what="POST /execute"):
        return
    j = r.json()
    res.eq("exitCode", j.get("exitCode"), 0)
    res.eq("stdout", j.get("stdout"), "made\n")
    res.eq("stderr", j.get("stderr"), "")
    res.eq("createdFiles", j.get("createdFiles"), ["a.txt", "keep.txt", "sub/b.txt"])
    res.eq("modifiedFiles", j.get("modifiedFiles"), [])
    res.eq("kernelId", j.get("kernelId"), "ephemeral:" + b["executionId"])
    res.eq("kernelMode", j.get("kernelMode"), "ephemeral")
    res.eq("language", j.get("language"), "python")
    res.eq("sandbox", j.get("sandbox"), "bubblewrap")
    res.eq("networkPolicy", j.get("networkPolicy"), "none")
    res.eq("workingDirectory", j.get("workingDirectory"), "/workspace")
    env = j.get("environmentVariables") or {}
    res.eq("environmentVariables.HOME", env.get("HOME"), "/workspace")
    res.eq("environmentVariables.PYTHONNOUSERSITE", env.get("PYTHONNOUSERSITE"), "1")
    res.check("PATH" in env, "environmentVariables without PATH: %r" % env)
    for k in ("startedAt", "finishedAt"):
        res.check(ISO.match(j.get(k) or ""), "%s %r is not an ISO time" % (k, j.get(k)))
    res.check((j.get("startedAt") or "") <= (j.get("finishedAt") or ""), "startedAt after finishedAt")
    snap = j.get("workspaceSnapshot") or {}
    res.eq("workspaceSnapshot.pool", snap.get("pool"), "agent-state")
    res.check(re.match(r"^sha256:[0-9a-f]{64}$", snap.get("digest") or ""), "digest %r" % snap.get("digest"))
    res.check(isinstance(snap.get("size"), int) and snap["size"] > 0, "size %r" % snap.get("size"))
    res.check(isinstance(snap.get("mediaType"), str), "mediaType")
    ctx.first_snapshot = snap.get("digest")


@case("3 sd execute: the next run modifies one file and creates another (modifiedFiles)")
def c_modify(ctx, res):
    code = "open('a.txt','w').write('changed')\nopen('c.txt','w').write('c')\nprint(open('keep.txt').read())\n"
    b, r = ctx.execute(code)
    if not expect(res, r, 200, what="POST /execute"):
        return
    j = r.json()
    res.eq("stdout (the workspace persists under its key)", j.get("stdout"), "k\n")
    res.eq("createdFiles", j.get("createdFiles"), ["c.txt"])
    res.eq("modifiedFiles", j.get("modifiedFiles"), ["a.txt"])
    res.check((j.get("workspaceSnapshot") or {}).get("digest") != getattr(ctx, "first_snapshot", None),
              "the snapshot did not change")
    # Nothing written: both empty.
    b, r = ctx.execute("print(2)")
    if expect(res, r, 200, what="read-only run"):
        res.eq("files of a run that writes nothing", files_of(res, r), ([], []))


@case("3 sd execute: exit codes and stderr; another workspace key is another workspace")
def c_exit(ctx, res):
    b, r = ctx.execute("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)\n")
    if expect(res, r, 200, what="sys.exit(3)"):
        res.eq("exitCode", r.json().get("exitCode"), 3)
        res.eq("stderr", r.json().get("stderr"), "bye\n")
    b, r = ctx.execute("import os\nprint(sorted(os.listdir('.')))\n", runnerWorkspaceKey=ctx.key + "/agents/sub")
    if expect(res, r, 200, what="other key"):
        res.eq("stdout of a fresh workspace", r.json().get("stdout"), "[]\n")


@case("3 sd execute: an executionId used again is 409 in their words")
def c_replay(ctx, res):
    body = ctx.execute_body("print(1)")
    r = ctx.sd("POST", "/execute", body, signed=True, timeout=RUN_TIMEOUT)
    expect(res, r, 200, what="first")
    r = ctx.sd("POST", "/execute", body, signed=True, timeout=RUN_TIMEOUT)
    expect(res, r, 409, {"error": "Execution ID has already been used"}, "again")


@case("3 sd execute: bad bodies are 400 {error} (persistent, no key, bad key, negative limit, mounts, JSON)")
def c_bad(ctx, res):
    persistent = ("Runner executions must be ephemeral; persistent runtimes are no longer supported. "
                  "Use managed Shell Execution for background tasks")
    b, r = ctx.execute("print(1)", kernelMode="persistent")
    expect(res, r, 400, {"error": persistent}, "persistent")
    for what, kw in (("no runnerWorkspaceKey", {"runnerWorkspaceKey": None}),
                     ("key with ..", {"runnerWorkspaceKey": "a/../b"}),
                     ("absolute key", {"runnerWorkspaceKey": "/etc"}),
                     ("negative executionTimeoutMs", {"executionTimeoutMs": -1}),
                     ("fractional maxOutputBytes", {"maxOutputBytes": 1.5}),
                     ("blank code", {"code": "  "}),
                     ("no executionId", {"executionId": None}),
                     ("language", {"language": "cobol"}),
                     ("language shell on /execute", {"language": "shell"})):
        body = ctx.execute_body("print(1)")
        body.update(kw)
        body = {k: v for k, v in body.items() if v is not None}
        r = ctx.sd("POST", "/execute", body, signed=True)
        if expect(res, r, 400, what=what):
            res.check(isinstance((r.json() or {}).get("error"), str) and len(r.json()) == 1,
                      "%s: not their error shape: %s" % (what, r.brief()))
    body = ctx.execute_body("print(1)")
    body["permissionEpoch"]["mounts"] = [{"source": "/", "mode": "read-write"}]
    expect(res, ctx.sd("POST", "/execute", body, signed=True), 400, what="mounts")
    r = ctx.sd("POST", "/execute", signed=True, raw=b'{"executionId": ')
    if expect(res, r, 400, what="broken JSON"):
        res.check(str((r.json() or {}).get("error", "")).startswith("Invalid JSON"), r.brief())


@case("3 sd execute: a timeout is 400 'Python execution timed out after N ms'")
def c_timeout(ctx, res):
    t0 = now()
    b, r = ctx.execute("import time\ntime.sleep(30)\n", executionTimeoutMs=1000)
    expect(res, r, 400, {"error": "Python execution timed out after 1000 ms"}, "sleep 30 with 1 s")
    res.check(now() - t0 < 10, "the timeout took %.1f s" % (now() - t0))


@case("3 sd execute: maxOutputBytes bounds stdout+stderr with their marker, head and tail kept")
def c_output(ctx, res):
    b, r = ctx.execute("print('H' + 'x' * 3000 + 'T')\n", maxOutputBytes=300)
    if not expect(res, r, 200, what="3 KB with a 300 byte budget"):
        return
    out = r.json().get("stdout", "")
    res.check(len(out.encode()) <= 300, "stdout is %d bytes" % len(out.encode()))
    res.check("[output truncated: exceeded 300 bytes; set SCIENCE_AGENT_MAX_OUTPUT_BYTES=0 to disable]" in out,
              "no marker: %r" % trunc(out))
    res.check(out.startswith("H") and out.endswith("T\n"), "head/tail lost: %r" % trunc(out))


@case("3 sd execute: a client that disconnects aborts its run")
def c_disconnect(ctx, res):
    body = ctx.execute_body("import time\nprint('x', flush=True)\ntime.sleep(60)\n")
    gone = S.execute_then_hang_up(ctx, res, body)
    if gone is not None:
        res.note("gone %.2f s after the disconnect" % gone)


# ---- 3: their order per (session, agent) and /status -------------------------------------------

TIMED = "import time\nprint('S %%.3f' %% time.time(), flush=True)\ntime.sleep(%s)\nprint('E %%.3f' %% time.time())\n"


def span(res, r, what):
    """(start, end) as the run printed them (the host's clock: the sandbox shares it), or None."""
    if r is None or not expect(res, r, 200, what=what):
        return None
    d = dict(re.findall(r"^([SE]) (\d+\.\d+)$", (r.json() or {}).get("stdout", ""), re.M))
    if not res.check("S" in d and "E" in d, "%s: no times in %r" % (what, trunc((r.json() or {}).get("stdout")))):
        return None
    return float(d["S"]), float(d["E"])


def post_async(ctx, body, out, name):
    def worker():
        try:
            out[name] = ctx.sd("POST", "/execute", body, signed=True, timeout=RUN_TIMEOUT)
        except (HttpError, OSError) as e:
            out[name + "-error"] = "%s: %s" % (type(e).__name__, e)
    t = threading.Thread(target=worker, daemon=True)
    t.start()
    return t


def status_entries(ctx):
    r = ctx.sd("GET", "/status")
    return {x.get("executionId"): x for x in (r.json() or {}).get("activeExecutions", [])} if r.status == 200 else {}


def wait_status(ctx, ids, limit=8.0, want=None):
    """Poll /status until every id of @ids is listed (with status @want, if given); the entries."""
    t0 = now()
    while True:
        e = status_entries(ctx)
        if all(i in e and (want is None or e[i].get("status") == want) for i in ids) or now() - t0 > limit:
            return e
        time.sleep(0.05)


def open_run(ctx, body):
    """POST /execute on a socket of its own, left open (closing it is their client's disconnect)."""
    data = json.dumps(body).encode()
    t, sig = ctx.sign(data)
    headers = [("Authorization", "Bearer " + ctx.d.token), ("Content-Type", "application/json"),
               ("x-science-execution-timestamp", t), ("x-science-execution-signature", sig)]
    s = L.socket.create_connection((L.LOOPBACK, ctx.d.sd_port), timeout=5)
    s.sendall(L.build_request("POST", "/execute", headers, data))
    return s


@case("3 sd order: two runs of one (session, agent) go one after the other; /status lists them with sessionId and agentId")
def c_order_same_agent(ctx, res):
    # Different workspaces: only their order per (session, agent) can keep these two apart.
    b1 = ctx.execute_body(TIMED % 1.5, agentId="agent-o", runnerWorkspaceKey=ctx.key + "/o1")
    b2 = ctx.execute_body(TIMED % 0.1, agentId="agent-o", runnerWorkspaceKey=ctx.key + "/o2")
    out = {}
    t1 = post_async(ctx, b1, out, "1")
    e = wait_status(ctx, [b1["executionId"]], want="running")
    t2 = post_async(ctx, b2, out, "2")
    e = wait_status(ctx, [b1["executionId"], b2["executionId"]])
    x1, x2 = e.get(b1["executionId"], {}), e.get(b2["executionId"], {})
    res.eq("first: status, session, agent, language, kernelMode",
           (x1.get("status"), x1.get("sessionId"), x1.get("agentId"), x1.get("language"), x1.get("kernelMode")),
           ("running", "session-1", "agent-o", "python", "ephemeral"))
    res.check(ISO.match(x1.get("startedAt") or "") and ISO.match(x1.get("queuedAt") or ""), "first: times %r" % x1)
    res.eq("second: status, session, agent", (x2.get("status"), x2.get("sessionId"), x2.get("agentId")),
           ("queued", "session-1", "agent-o"))
    res.check(ISO.match(x2.get("queuedAt") or "") and "startedAt" not in x2, "second while queued: %r" % x2)
    t1.join(RUN_TIMEOUT)
    t2.join(RUN_TIMEOUT)
    s1, s2 = span(res, out.get("1"), "first run"), span(res, out.get("2"), "second run")
    if s1 and s2:
        res.check(s2[0] >= s1[1], "the second run started at %.3f, before the first ended at %.3f" % (s2[0], s1[1]))
    left = status_entries(ctx)
    res.check(b1["executionId"] not in left and b2["executionId"] not in left, "still in /status: %r" % left)


@case("3 sd order: runs of two agents of one session overlap")
def c_order_two_agents(ctx, res):
    b1 = ctx.execute_body(TIMED % 1.5, agentId="agent-p1", runnerWorkspaceKey=ctx.key + "/p1")
    b2 = ctx.execute_body(TIMED % 1.5, agentId="agent-p2", runnerWorkspaceKey=ctx.key + "/p2")
    out = {}
    ts = [post_async(ctx, b1, out, "1"), post_async(ctx, b2, out, "2")]
    e = wait_status(ctx, [b1["executionId"], b2["executionId"]], want="running")
    res.eq("both running", (e.get(b1["executionId"], {}).get("status"), e.get(b2["executionId"], {}).get("status")),
           ("running", "running"))
    for t in ts:
        t.join(RUN_TIMEOUT)
    s1, s2 = span(res, out.get("1"), "agent-p1"), span(res, out.get("2"), "agent-p2")
    if s1 and s2:
        res.check(s1[0] < s2[1] and s2[0] < s1[1], "no overlap: %r and %r" % (s1, s2))


@case("3 sd order: a disconnect gives the turn on (a waiting run leaves, a running one ends first)")
def c_order_disconnect(ctx, res):
    long1 = ctx.execute_body("import time\ntime.sleep(60)\n", agentId="agent-d", runnerWorkspaceKey=ctx.key + "/d1")
    waiting = ctx.execute_body("print('never')\n", agentId="agent-d", runnerWorkspaceKey=ctx.key + "/d2")
    quick = ctx.execute_body(TIMED % 0.1, agentId="agent-d", runnerWorkspaceKey=ctx.key + "/d3")
    s1 = open_run(ctx, long1)
    s2 = None
    out = {}
    try:
        e = wait_status(ctx, [long1["executionId"]], want="running")
        res.eq("long run", e.get(long1["executionId"], {}).get("status"), "running")
        s2 = open_run(ctx, waiting)
        e = wait_status(ctx, [waiting["executionId"]])
        res.eq("second run waits", e.get(waiting["executionId"], {}).get("status"), "queued")
        t = post_async(ctx, quick, out, "q")
        wait_status(ctx, [quick["executionId"]])
        # The waiting run's client leaves: it never runs, and it leaves /status at once.
        s2.close()
        s2 = None
        t0 = now()
        while waiting["executionId"] in status_entries(ctx) and now() - t0 < 5:
            time.sleep(0.05)
        e = status_entries(ctx)
        res.check(waiting["executionId"] not in e, "the abandoned waiting run is still listed")
        res.eq("after it: still the long run, then the quick one",
               (e.get(long1["executionId"], {}).get("status"), e.get(quick["executionId"], {}).get("status")),
               ("running", "queued"))
        time.sleep(0.5)        # past the long run's launch
    finally:
        if s2:
            s2.close()
        s1.close()
    t0 = now()
    t.join(RUN_TIMEOUT)
    res.check(now() - t0 < 12, "the quick run answered %.1f s after the long run's client left" % (now() - t0))
    span(res, out.get("q"), "the run after the disconnect")
    res.check(not os.path.exists(os.path.join(ctx.d.workspace_path("sd-" + hashlib.sha256(
        (ctx.key + "/d2").encode()).hexdigest()[:40]), "never")), "the abandoned run left a file")


@case("3 sd execute: maxWorkspaceBytes bounds the run's quota (400 in their words); 0 leaves ours")
def c_max_workspace(ctx, res):
    key = ctx.key + "/quota"
    code = "open('big.bin', 'wb').write(b'q' * 3000000)\nprint('wrote')\n"
    b, r = ctx.execute(code, runnerWorkspaceKey=key, maxWorkspaceBytes=1000000)
    if expect(res, r, 400, what="3 MB with maxWorkspaceBytes 1000000"):
        err = (r.json() or {}).get("error", "")
        res.check(err.startswith("Workspace exceeded the 1000000 byte execution quota ("), "error %r" % err)
    b, r = ctx.execute(code, runnerWorkspaceKey=key, maxWorkspaceBytes=0)
    if expect(res, r, 200, what="3 MB with maxWorkspaceBytes 0 (ours: 10 GiB)"):
        res.eq("stdout", r.json().get("stdout"), "wrote\n")


@case("3 sd execute-shell (legacy): bash -euo pipefail, answered at its end in their shape")
def c_execute_shell(ctx, res):
    body = ctx.execute_body("echo one > legacy.txt\ncat legacy.txt\nfalse\necho never\n")
    body.pop("language")
    r = ctx.sd("POST", "/execute-shell", body, signed=True, timeout=RUN_TIMEOUT)
    if not expect(res, r, 200, what="POST /execute-shell"):
        return
    j = r.json()
    res.eq("exitCode", j.get("exitCode"), 1)
    res.eq("stdout", j.get("stdout"), "one\n")
    res.eq("language", j.get("language"), "shell")
    res.eq("environmentRevisionId", j.get("environmentRevisionId"), "system-shell-bwrap-v1")
    res.eq("createdFiles", j.get("createdFiles"), ["legacy.txt"])
    res.check("PYTHONNOUSERSITE" not in (j.get("environmentVariables") or {}), "python's variable on a shell run")
    expect(res, ctx.sd("POST", "/execute-shell", body), 401, BAD_SIGNATURE, "unsigned")
    b2 = dict(body, executionId=str(uuid.uuid4()), kernelMode="persistent")
    r = ctx.sd("POST", "/execute-shell", b2, signed=True)
    expect(res, r, 400, what="persistent")


@case("3 sd kernels: none is kept; teardown answers count 0 (sessionId required)")
def c_kernels(ctx, res):
    r = ctx.sd("GET", "/kernels")
    expect(res, r, 200, [], "GET /kernels")
    expect(res, ctx.sd("POST", "/kernels/teardown", {"sessionId": "session-1"}), 200,
           {"count": 0, "reason": "Persistent kernel memory was cleared"}, "teardown")
    expect(res, ctx.sd("POST", "/kernels/teardown", {"sessionId": "s", "reason": "policy changed"}), 200,
           {"count": 0, "reason": "policy changed"}, "teardown with a reason")
    expect(res, ctx.sd("POST", "/kernels/teardown", {}), 400, {"error": "sessionId is required"}, "no sessionId")
    expect(res, ctx.sd("POST", "/kernels/k-1/teardown"), 200,
           {"count": 0, "kernelId": "k-1", "reason": "Persistent kernel memory was cleared"}, "one kernel")
    expect(res, ctx.sd("GET", "/kernels", auth=False), 401, UNAUTHORIZED, "no token")


# ---- 5: managed shell executions --------------------------------------------------------------

@case("5 sd shell: submit 202, poll to completed with result, version and createdFiles")
def c_shell(ctx, res):
    body, r = shell_submit(ctx, res, "mkdir -p out\necho hi > out/s.txt\necho done\n")
    if not expect(res, r, 202, what="POST /shell-executions"):
        return
    j = r.json()
    res.eq("202 id", j.get("id"), body["executionId"])
    res.eq("202 state", j.get("state"), "queued")
    res.eq("202 owner", (j.get("sessionId"), j.get("agentId")), ("session-1", "main"))
    res.check(ISO.match(j.get("queuedAt") or ""), "queuedAt %r" % j.get("queuedAt"))
    j = shell_wait(ctx, res, body)
    if j is None:
        return
    res.eq("state", j.get("state"), "completed")
    result = j.get("result") or {}
    res.eq("result.exitCode", result.get("exitCode"), 0)
    res.eq("result.stdout", result.get("stdout"), "done\n")
    res.eq("result.language", result.get("language"), "shell")
    res.eq("result.environmentRevisionId", result.get("environmentRevisionId"), "system-shell-bwrap-v1")
    res.eq("result.createdFiles", result.get("createdFiles"), ["out/s.txt"])
    res.check(isinstance(result.get("workspaceSnapshot"), dict), "no result.workspaceSnapshot")
    res.eq("version", j.get("version"), result.get("workspaceSnapshot"))
    for k in ("startedAt", "finishedAt"):
        res.check(ISO.match(j.get(k) or ""), "%s %r" % (k, j.get(k)))
    # The python runs of the same key see the file: one workspace.
    b, r = ctx.execute("print(open('out/s.txt').read(), end='')\n")
    if expect(res, r, 200, what="python after shell"):
        res.eq("python reads the shell's file", r.json().get("stdout"), "hi\n")


@case("5 sd shell: bash -euo pipefail (a failing command stops it), another owner finds nothing, ids are not reused")
def c_shell_rules(ctx, res):
    body, r = shell_submit(ctx, res, "echo before\nfalse\necho after\n")
    if not expect(res, r, 202, what="submit"):
        return
    j = shell_wait(ctx, res, body)
    if j is not None:
        res.eq("state", j.get("state"), "failed")
        res.eq("exitCode", (j.get("result") or {}).get("exitCode"), 1)
        res.eq("stdout", (j.get("result") or {}).get("stdout"), "before\n")
    for what, path in (("other agent", shell_path(body, agent="subagent:x")),
                       ("other session", shell_path(body, session="session-2")),
                       ("no owner", "/shell-executions/%s" % body["executionId"])):
        expect(res, ctx.sd("GET", path), 400, {"error": "Execution not found for this Agent"}, what)
    r = ctx.sd("POST", "/shell-executions", body, signed=True)
    expect(res, r, 400, {"error": "Execution ID has already been used; query it instead of replaying the command"},
           "resubmitted")
    b2 = dict(body, executionId="bad id with spaces")
    expect(res, ctx.sd("POST", "/shell-executions", b2, signed=True), 400, what="bad executionId")
    expect(res, ctx.sd("POST", "/shell-executions", dict(body, executionId="x" + body["executionId"])), 401,
           BAD_SIGNATURE, "unsigned submit")


@case("5 sd shell: logs in 4 KiB chunks, at most 4 a page, cursors continue where they stopped")
def c_shell_logs(ctx, res):
    body, r = shell_submit(ctx, res, "head -c 20000 /dev/zero | tr '\\0' a\necho -n err >&2\n")
    if not expect(res, r, 202, what="submit"):
        return
    if shell_wait(ctx, res, body) is None:
        return
    got = S.read_logs(ctx, res, body)
    if got is None:
        return
    texts, pages, seen, cursor = got
    res.check(texts["stdout"] == "a" * 20000, "stdout through the pages: %d bytes, %r..." % (
        len(texts["stdout"]), trunc(texts["stdout"][:80])))
    res.eq("stderr through the pages", texts["stderr"], "err")
    res.eq("pages", pages, 2)
    res.check(seen == sorted(seen) and len(set(seen)) == len(seen), "cursors %r" % seen)
    r = ctx.sd("GET", shell_path(body, "/logs", extra="&cursor=%d" % cursor))
    if expect(res, r, 200, what="logs past the end"):
        res.eq("chunks past the end", r.json().get("chunks"), [])
    expect(res, ctx.sd("GET", shell_path(body, "/logs", extra="&cursor=0")), 400, what="cursor 0")


@case("5 sd shell: cancel (unsigned, no body) is 202 and the run ends cancelled")
def c_shell_cancel(ctx, res):
    body, r = shell_submit(ctx, res, "echo started\nsleep 60\n")
    if not expect(res, r, 202, what="submit"):
        return
    time.sleep(0.5)
    r = ctx.sd("POST", shell_path(body, "/cancel"))
    if expect(res, r, 202, what="cancel"):
        res.eq("cancel answers its record", r.json().get("id"), body["executionId"])
    t0 = now()
    j = shell_wait(ctx, res, body)
    if j is not None:
        res.eq("state", j.get("state"), "cancelled")
        res.check(now() - t0 < 10, "cancel took %.1f s" % (now() - t0))
    expect(res, ctx.sd("POST", shell_path(body, "/cancel", agent="other")), 400,
           {"error": "Execution not found for this Agent"}, "another agent's cancel")


# ---- 4: our own API beside it ------------------------------------------------------------------

def log_text(ctx, res, body, stream="stdout"):
    """Every piece of @stream the logs route hands out, paging as their execution_logs tool does."""
    text, cursor, retention = "", 1, None
    for _ in range(50):
        r = ctx.sd("GET", shell_path(body, "/logs", extra="&cursor=%d" % cursor))
        if not expect(res, r, 200, what="logs cursor %d" % cursor):
            return None, None
        j = r.json()
        text += "".join(c.get("text", "") for c in j.get("chunks", []) if c.get("stream") == stream)
        retention = j.get("retentionTruncated")
        cursor = j.get("nextCursor")
        if not j.get("truncated"):
            break
    return text, retention


@case("5 sd shell: maxOutputBytes is the log budget where smaller than ours: logs stop there, result with their marker")
def c_shell_output(ctx, res):
    code = "head -c 20000 /dev/zero | tr '\\0' a\necho\n"
    body, r = shell_submit(ctx, res, code, maxOutputBytes=5000)
    if not expect(res, r, 202, what="submit with maxOutputBytes 5000"):
        return
    j = shell_wait(ctx, res, body)
    if j is None:
        return
    res.eq("state, logTruncated", (j.get("state"), j.get("logTruncated")), ("completed", True))
    out = (j.get("result") or {}).get("stdout", "")
    res.check(len(out.encode()) <= 5000, "result stdout is %d bytes" % len(out.encode()))
    res.check("[output truncated: exceeded 5000 bytes; set SCIENCE_AGENT_MAX_OUTPUT_BYTES=0 to disable]" in out,
              "no marker of theirs: %r" % trunc(out))
    res.check(out.startswith("aaaa") and out.endswith("a\n"), "head/tail lost: %r" % trunc(out))
    text, retention = log_text(ctx, res, body)
    if text is not None:
        res.eq("log bytes kept", len(text), 5000)
        res.eq("retentionTruncated", retention, True)
    # 0: no truncation of theirs; ours (MaxOutputBytes=64K here) keeps all 20 KB.
    body, r = shell_submit(ctx, res, code, maxOutputBytes=0)
    if not expect(res, r, 202, what="submit with maxOutputBytes 0"):
        return
    j = shell_wait(ctx, res, body)
    if j is None:
        return
    res.eq("state, logTruncated", (j.get("state"), j.get("logTruncated")), ("completed", False))
    res.eq("result stdout", (j.get("result") or {}).get("stdout"), "a" * 20000 + "\n")
    text, retention = log_text(ctx, res, body)
    if text is not None:
        res.eq("log", (len(text), retention), (20001, False))


@case("5 sd shell: maxWorkspaceBytes bounds a managed run's quota: failed, error in their words")
def c_shell_quota(ctx, res):
    body, r = shell_submit(ctx, res, "head -c 3000000 /dev/zero > big.bin\necho wrote\n",
                           maxWorkspaceBytes=1000000, runnerWorkspaceKey=ctx.key + "/shell-quota")
    if not expect(res, r, 202, what="submit with maxWorkspaceBytes 1000000"):
        return
    j = shell_wait(ctx, res, body)
    if j is None:
        return
    res.eq("state", j.get("state"), "failed")
    res.check(str(j.get("error", "")).startswith("Workspace exceeded the 1000000 byte execution quota ("),
              "error %r" % j.get("error"))


@case("4 native listener: our API and its v1 signature still work; neither takes the other's signature")
def c_native(ctx, res):
    d = ctx.d
    r = L.http(d.port, "GET", "/health")
    if expect(res, r, 200, what="native /health"):
        res.check(isinstance(r.json().get("sandbox"), dict), "native /health is not ours: %s" % r.brief())
    body = json.dumps({"workspaceId": "native-ws", "language": "python", "code": "print(6*7)"}).encode()
    ts = int(time.time())
    sig = L.signature(d.key, ts, "POST", "/execute", body)
    headers = [("Authorization", "Bearer " + d.token), ("Content-Type", "application/json"),
               ("X-Sandbox-Timestamp", str(ts)), ("X-Sandbox-Signature", sig)]
    r = L.http(d.port, "POST", "/execute", headers, body, timeout=RUN_TIMEOUT)
    if expect(res, r, 200, what="native /execute"):
        res.eq("native stdout", r.json().get("stdout"), "42\n")
        res.eq("native status", r.json().get("status"), "exited")
    # Their signature on our listener, ours on theirs: both refused.
    sd_body = json.dumps(ctx.execute_body("print(1)")).encode()
    t, s = ctx.sign(sd_body)
    r = L.http(d.port, "POST", "/execute",
               [("Authorization", "Bearer " + d.token), ("Content-Type", "application/json"),
                ("x-science-execution-timestamp", t), ("x-science-execution-signature", s)], sd_body)
    res.check(r.status == 401 and r.json().get("error") != BAD_SIGNATURE["error"],
              "their signature on our listener: %s" % r.brief())
    r = L.http(d.sd_port, "POST", "/execute", headers, body, timeout=RUN_TIMEOUT)
    expect(res, r, 401, BAD_SIGNATURE, "our signature on theirs")


# ---- 6: socket activation ----------------------------------------------------------------------

@case("6 socket activation: FileDescriptorName=sciencediscovery picks the dialect, 'api' stays ours")
def c_socket_activation(ctx, res):
    """A second daemon (own state and runtime dirs, same credentials) started by
    systemd-socket-activate with two named sockets, as a socket unit with FileDescriptorName= does."""
    d = ctx.d
    tmp = L.tempfile.mkdtemp(prefix="sd-activation.", dir=d.tmp)
    os.chmod(tmp, 0o755)     # searchable by the sandbox user (a daemon started as root hands over to it)
    for sub in ("state", "run"):
        os.mkdir(os.path.join(tmp, sub), 0o700)
    T.chown_tree(tmp, d.run_as)
    env = dict(d.env(), STATE_DIRECTORY=os.path.join(tmp, "state"), RUNTIME_DIRECTORY=os.path.join(tmp, "run"))
    p_api, p_sd = S.SdDaemon._pick_port(), S.SdDaemon._pick_port()
    argv = ["systemd-socket-activate", "-l", "%s:%d" % (L.LOOPBACK, p_api), "-l", "%s:%d" % (L.LOOPBACK, p_sd),
            "--fdname=api:sciencediscovery"]
    for k, v in env.items():
        argv += ["-E", "%s=%s" % (k, v)]
    argv += ["--", d.path, "--config", d.conf, "--log-target", "console"]
    log_path = os.path.join(tmp, "daemon.log")
    with open(log_path, "ab") as logf:
        proc = L.subprocess.Popen(argv, stdin=L.subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
                                  cwd=tmp, close_fds=True, **T.popen_ids(d.run_as))
    try:
        r_api = r_sd = None
        t0 = now()
        while now() - t0 < 15 and proc.poll() is None:
            try:
                # The first connection starts the daemon; it then serves both sockets.
                r_api = L.http(p_api, "GET", "/health", timeout=3)
                r_sd = L.http(p_sd, "GET", "/health", timeout=3)
                break
            except (OSError, HttpError):
                time.sleep(0.2)
        if not res.check(r_api is not None and r_sd is not None, "no answers; log: %s" % trunc(open(log_path).read(), 1500)):
            return
        res.check(r_api.status == 200 and isinstance((r_api.json() or {}).get("sandbox"), dict),
                  "socket 'api' is not our API: %s" % r_api.brief())
        res.check(r_sd.status == 200 and (r_sd.json() or {}).get("sandbox") == "bubblewrap" and
                  "npuBroker" in (r_sd.json() or {}), "socket 'sciencediscovery' is not theirs: %s" % r_sd.brief())
        r = L.http(p_sd, "GET", "/status")
        expect(res, r, 401, UNAUTHORIZED, "their /status without a token, socket-activated")
        r = L.http(p_api, "GET", "/status")
        res.check(r.status == 401 and r.json().get("error") != "Unauthorized", "our /status: %s" % r.brief())
    finally:
        # Without --accept, systemd-socket-activate execs the daemon in its own process: one pid.
        proc.terminate()
        try:
            res.eq("exit status after SIGTERM", proc.wait(10), 0)
        except L.subprocess.TimeoutExpired:
            res.fail("the socket-activated daemon did not stop within 10 s of SIGTERM")
            proc.kill()
            proc.wait(5)


# ---- 7: re-execution --------------------------------------------------------------------------

@case("7 SIGHUP by hand: the daemon re-executes itself; each listener keeps its dialect and serves a run")
def c_reexec(ctx, res):
    d = ctx.d
    pid = d.proc.pid
    os.kill(pid, signal.SIGHUP)
    j = d.wait_reexecuted(1)
    res.eq("native /health reexecutions", j.get("reexecutions"), 1)
    res.eq("the daemon's pid", d.proc.pid, pid)
    res.check(isinstance(j.get("sandbox"), dict), "the native listener no longer speaks our API: %r" % j)
    r = ctx.sd("GET", "/health", auth=False)
    if expect(res, r, 200, what="sd /health after the re-execution"):
        res.eq("sd /health sandbox", r.json().get("sandbox"), "bubblewrap")
    _, r = ctx.execute("print(40 + 2)")
    if expect(res, r, 200, what="sd /execute after the re-execution"):
        res.eq("its stdout", r.json().get("stdout"), "42\n")



def main():
    # Logs of managed runs are kept up to MaxOutputBytes: room for the 20 KB of the logs case.
    return S.test_main(__doc__, CASES, BUDGET, lambda st: Ctx(st.d, st.args.verbose),
                       config=L.CONFIG_TEXT.replace("MaxOutputBytes=4K", "MaxOutputBytes=64K"))


if __name__ == "__main__":
    sys.exit(main())
