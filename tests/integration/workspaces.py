#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of workspaces and managed runs of sandbox-runnerd: managed shell executions
(logs by offset, follow, cancel, records across restarts, SIGKILL recovery), workspace
teardown, the write lease across two daemon processes on one state directory, the workspace
quota, content-addressed snapshots (revisions, trees, files with Repr-Digest, restore), and the
workspace file endpoints (upload, download, listing, limits, hostile names, a symlink race).

    /usr/bin/python3 tests/integration/workspaces.py --daemon BUILD/src/sandbox-runnerd
                                                     [--verbose] [--keep-tmp] [--only SUBSTRING]

Starts the daemon by hand (no systemd: [Execution] AllowUnscoped=yes) on an ephemeral
127.0.0.1 port with a private temp dir, as tests/integration/execute.py does (as root, the
daemon runs as an ordinary user).  Prints TAP, exits 1 on any failure.  Bounded: < 120 s;
traffic only to 127.0.0.1; only processes it started are ended, by pid.
"""

import argparse
import errno
import fcntl
import json
import os
import shutil
import re
import secrets
import shlex
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import testlib as T                                                        # noqa: E402
import workspaces_lib as W                                                 # noqa: E402
from execute_lib import now, trunc                                         # noqa: E402
from workspaces_lib import Result                                          # noqa: E402

BUDGET = 110.0
MiB = 1 << 20
NOT_WIRED = "No such endpoint."


class Ctx:
    def __init__(self, daemon, budget, verbose, path):
        self.d = daemon
        self.c = W.Client(daemon, budget)
        self.budget = budget
        self.verbose = verbose
        self.daemon_path = path
        self.mark = "wstest-%s" % secrets.token_hex(8)   # in the env of every payload
        self.fx = {}                                      # fixtures shared between cases
        self.extra_daemons = []
        self.seq = 0

    def new_id(self, prefix):
        self.seq += 1
        return "%s-%d-%s" % (prefix, self.seq, secrets.token_hex(3))

    def body(self, ws, command, eid=None, marker=None, **kw):
        b = {"executionId": eid or self.new_id("x"), "workspaceId": ws, "command": command,
             "env": {"WSTEST_MARK": marker or self.mark}}
        b.update(kw)
        return b


# --------------------------------------------------------------------------------------------
# helpers on results

def started_managed(res, ctx, body, client=None):
    """POST /shell-executions that must answer 202 running; return the id or None."""
    c = client or ctx.c
    r, err = c.managed(body)
    if r is None:
        res.fail("POST /shell-executions %s: no answer: %s" % (body["executionId"], err))
        return None
    j = r.json()
    if r.status != 202 or not isinstance(j, dict) or j.get("executionId") != body["executionId"]:
        res.fail("POST /shell-executions %s: expected 202 with the id, got %s" % (body["executionId"], r.brief()))
        return None
    if j.get("state") != "running":
        res.fail("POST /shell-executions %s: state %r, expected 'running'" % (body["executionId"], j.get("state")))
    return body["executionId"]


def run_sync(res, ctx, body, client=None, timeout=20.0):
    """Synchronous /execute-shell that must answer 200; return the answer JSON or None."""
    c = client or ctx.c
    r, err = c.execute(body, timeout=timeout)
    if r is None:
        res.fail("/execute-shell %s: no answer: %s" % (body["executionId"], err))
        return None
    j = r.json()
    if r.status != 200 or not isinstance(j, dict):
        res.fail("/execute-shell %s: expected 200, got %s" % (body["executionId"], r.brief()))
        return None
    res.note("%s: %s" % (body["executionId"], trunc(json.dumps(j), 700)))
    check_snapshot(res, j)
    return j


def check_snapshot(res, j):
    snap = j.get("snapshot") if isinstance(j, dict) else None
    if j and j.get("status") in ("exited", "signaled", "timeout", "cancelled", "workspace_quota_exceeded") \
            and j.get("durationMs", 0) > 0:
        res.check(isinstance(snap, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", snap or ""),
                  "answer of %s has no snapshot 'sha256:<64 hex>': %r" % (j.get("executionId"), snap))


def expect_exited0(res, j, what):
    if j is None:
        return False
    return res.check(j.get("status") == "exited" and j.get("exitCode") == 0,
                     "%s: status %r exitCode %r, expected exited 0 (stderr %r)" %
                     (what, j.get("status"), j.get("exitCode"), trunc(j.get("stderr"), 300)))


def not_wired(r):
    return r is not None and r.status == 404 and r.error_code() == "not_found" and \
        (r.json() or {}).get("message") == NOT_WIRED


def fail_not_wired(res, what, r):
    res.fail("%s: the endpoint is not wired yet (404 not_found \"%s\"); the lead wires it next" % (what, NOT_WIRED))


# --------------------------------------------------------------------------------------------
# Cases

CASES, case = T.case_registry()


# ---- 1. managed runs

@case("1 managed: 202 running; the client closes at once; the run finishes with all its lines")
def c_managed_basic(ctx, res):
    cmd = "for i in 1 2 3 4 5; do echo $i; sleep 0.3; done"
    eid = started_managed(res, ctx, ctx.body("m-basic", cmd, ctx.new_id("mb")))
    # A second one whose client closes right after sending (without reading the 202).
    eid2 = ctx.new_id("mb-close")
    raw = json.dumps(ctx.body("m-basic2", cmd, eid2)).encode()
    h = [ctx.c.bearer(), ("Content-Type", "application/json")] + ctx.c.signed("POST", "/shell-executions", raw)
    s = socket.create_connection((L.LOOPBACK, ctx.d.port), timeout=5)
    s.sendall(L.build_request("POST", "/shell-executions", h, raw))
    s.close()
    if not eid:
        return
    j, _ = ctx.c.status(eid)
    res.check(j is not None and j.get("state") == "running" and j.get("kind") == "managed",
              "GET right after the 202: expected state running, kind managed; got %s" %
              trunc(json.dumps(j), 300))
    j, waited = ctx.c.wait_final(eid, 6)
    res.note("%s final after %.2fs: %s" % (eid, waited, trunc(json.dumps(j), 600)))
    if j is None or not expect_exited0(res, j, eid):
        return
    res.eq("stdout", j.get("stdout"), "1\n2\n3\n4\n5\n")
    check_snapshot(res, j)
    ctx.fx["finished"] = {eid: j}
    j2, _ = ctx.c.wait_final(eid2, 4)
    if j2 is None:
        res.fail("the run whose client closed right after sending is unknown (GET 404): the request was "
                 "dropped, or never started")
    else:
        res.check(j2.get("status") == "exited" and j2.get("stdout") == "1\n2\n3\n4\n5\n",
                  "the run whose client closed right after sending: status %r stdout %r, expected exited "
                  "with all 5 lines" % (j2.get("status"), j2.get("stdout")))
        ctx.fx["finished"][eid2] = j2


@case("1 managed logs: offset=0 gives bytes + X-Sandbox-Next-Offset; resuming there gives only the rest")
def c_logs_offset(ctx, res):
    cmd = "for i in 1 2 3 4 5; do echo line-$i; sleep 0.3; done; echo err >&2"
    eid = started_managed(res, ctx, ctx.body("m-logs", cmd, ctx.new_id("ml")))
    if not eid:
        return
    first = ctx.c.wait_log(eid, b"line-2", 3)
    r, err = ctx.c.get("/shell-executions/%s/logs?stream=stdout&offset=0" % eid)
    if r is None or r.status != 200:
        res.fail("first logs request: %s" % (err or r.brief()))
        return
    part1 = r.body
    nxt = r.header("x-sandbox-next-offset")
    res.note("while running: %r next offset %r (first poll saw %r)" % (part1, nxt, first))
    if not res.check(nxt is not None and nxt.isdigit(), "no numeric X-Sandbox-Next-Offset: %r" % nxt):
        return
    res.eq("X-Sandbox-Next-Offset", int(nxt), len(part1))
    res.check(part1 and not part1.endswith(b"line-5\n"), "the first read already has the whole output: %r" % part1)
    j, _ = ctx.c.wait_final(eid, 4)
    if not expect_exited0(res, j, eid):
        return
    r, err = ctx.c.get("/shell-executions/%s/logs?stream=stdout&offset=%s" % (eid, nxt))
    if r is None or r.status != 200:
        res.fail("resumed logs request: %s" % (err or r.brief()))
        return
    full = b"".join(b"line-%d\n" % i for i in range(1, 6))
    res.eq("bytes from offset %s" % nxt, r.body, full[len(part1):])
    res.eq("X-Sandbox-Next-Offset at the end", r.header("x-sandbox-next-offset"), str(len(full)))
    r, err = ctx.c.get("/shell-executions/%s/logs?stream=stdout&offset=%d" % (eid, len(full) + 100))
    res.check(r is not None and r.status == 200 and r.body == b"" and
              r.header("x-sandbox-next-offset") == str(len(full)),
              "offset past the end: expected 200, empty, next offset %d; got %s" %
              (len(full), r.brief() if r else err))
    r, err = ctx.c.get("/shell-executions/%s/logs?stream=stderr" % eid)
    res.check(r is not None and r.status == 200 and r.body == b"err\n",
              "stderr log: expected 'err\\n', got %s" % (r.brief() if r else err))
    ctx.fx.setdefault("finished", {})[eid] = j


@case("1 managed logs follow=1: bytes arrive while the run goes on, the stream ends with the run")
def c_logs_follow(ctx, res):
    cmd = "for i in 1 2 3 4 5; do echo f-$i; sleep 0.3; done"
    eid = started_managed(res, ctx, ctx.body("m-follow", cmd, ctx.new_id("mf")))
    if not eid:
        return
    t0 = now()
    status, hd, chunks, took, err = W.stream_get(ctx.d.port, "/shell-executions/%s/logs?stream=stdout&offset=0&follow=1"
                                                 % eid, [ctx.c.bearer()], ctx.budget.bound(8))
    body = b"".join(c for _, c in chunks)
    res.note("HTTP %s headers %s; %d chunks in %.2fs: %s" % (status, hd, len(chunks), took,
             ["%.2fs %r" % (t - t0, c) for t, c in chunks]))
    if not res.check(err is None and status == 200, "follow request: status %r, error %r" % (status, err)):
        return
    res.eq("followed bytes", body, b"".join(b"f-%d\n" % i for i in range(1, 6)))
    if chunks:
        first, last = chunks[0][0] - t0, chunks[-1][0] - t0
        res.info("follow: first bytes after %.2fs, last after %.2fs, stream closed after %.2fs" % (first, last, took))
        res.check(first < 0.6, "the first bytes came only after %.2fs (the run prints every 0.3 s)" % first)
        res.check(took - first >= 0.8, "the bytes did not arrive before the end: first at %.2fs, end at %.2fs"
                  % (first, took))
        res.check(len(chunks) >= 3, "only %d chunks: the log was not streamed as written" % len(chunks))
    j, _ = ctx.c.status(eid)
    res.check(j is not None and j.get("state") == "exited",
              "state when the stream ended: %r, expected exited" % (j or {}).get("state"))


@case("1 managed cancel: 202 cancelling, ends 'cancelled' promptly, no process left")
def c_cancel(ctx, res):
    mark = ctx.mark + "-cancel"
    eid = started_managed(res, ctx, ctx.body("m-cancel", "echo started; sleep 30; echo %s" % mark, ctx.new_id("mc"),
                                             marker=mark))
    if not eid:
        return
    if ctx.c.wait_log(eid, b"started", 4) is None:
        res.fail("the run did not print 'started' within 4 s")
    res.check(W.marked_pids(mark), "no process with the marker found while the run is active (scan broken?)")
    t0 = now()
    r, err = ctx.c.cancel(eid)
    if r is None:
        res.fail("cancel: no answer: %s" % err)
        return
    res.check(r.status == 202 and (r.json() or {}).get("state") == "cancelling",
              "cancel: expected 202 state cancelling, got %s" % r.brief())
    j, waited = ctx.c.wait_final(eid, 5)
    res.info("cancel: final state %r %.0f ms after the cancel" % ((j or {}).get("state"), (now() - t0) * 1000))
    res.check(j is not None and j.get("status") == "cancelled", "final status %r, expected cancelled" %
              (j or {}).get("status"))
    res.check(now() - t0 < 2.0, "cancel took %.2fs" % (now() - t0))
    left = W.wait_no_marked(mark, 1.0)
    res.check(not left, "processes left after the cancel: %s" % [L.describe_pid(p) for p in left])
    r, err = ctx.c.cancel(eid)
    res.check(r is not None and r.status == 202 and (r.json() or {}).get("state") == "finished",
              "second cancel: expected 202 state finished, got %s" % (r.brief() if r else err))
    ctx.fx.setdefault("finished", {})[eid] = j


@case("1 managed cancel with the JSON body '{}' (signed over it): 202 cancelling, the run ends 'cancelled'")
def c_cancel_json_body(ctx, res):
    mark = ctx.mark + "-cancel-json"
    eid = started_managed(res, ctx, ctx.body("m-cancel-json", "echo started; sleep 30; echo %s" % mark,
                                             ctx.new_id("mcj"), marker=mark))
    if not eid:
        return
    if ctx.c.wait_log(eid, b"started", 4) is None:
        res.fail("the run did not print 'started' within 4 s")
    for body in (b'{"a":1}', b"[]"):
        r, err = ctx.c.cancel(eid, body=body)
        res.check(r is not None and r.status == 400 and r.error_code() == "body_not_allowed",
                  "cancel with %r: expected 400 body_not_allowed, got %s" % (body, r.brief() if r else err))
    j, _ = ctx.c.status(eid)
    res.check(j is not None and j.get("state") == "running",
              "after the refused cancels the run must still run: state %r" % (j or {}).get("state"))
    t0 = now()
    r, err = ctx.c.cancel(eid, body=b"{}")
    if r is None:
        res.fail("cancel {}: no answer: %s" % err)
        return
    res.check(r.status == 202 and (r.json() or {}).get("state") == "cancelling",
              "cancel {}: expected 202 state cancelling, got %s" % r.brief())
    j, waited = ctx.c.wait_final(eid, 5)
    res.check(j is not None and j.get("status") == "cancelled", "final status %r, expected cancelled" %
              (j or {}).get("status"))
    res.check(now() - t0 < 2.0, "cancel {} took %.2fs" % (now() - t0))
    left = W.wait_no_marked(mark, 1.0)
    res.check(not left, "processes left after the cancel {}: %s" % [L.describe_pid(p) for p in left])
    r, err = ctx.c.cancel(eid, body=b" { }\n")
    res.check(r is not None and r.status == 202 and (r.json() or {}).get("state") == "finished",
              "second cancel ' { }\\n': expected 202 state finished, got %s" % (r.brief() if r else err))


# ---- 2. teardown

@case("2 teardown: two runs in W + one in V; POST /workspaces/W/teardown stops both of W, V's goes on")
def c_teardown(ctx, res):
    mark = ctx.mark + "-td"
    w, v = "td-w", "td-v"
    a = started_managed(res, ctx, ctx.body(w, "echo a; sleep 30", ctx.new_id("tdA"), marker=mark))
    b = started_managed(res, ctx, ctx.body(w, "echo b; sleep 30", ctx.new_id("tdB"), marker=mark))
    c = started_managed(res, ctx, ctx.body(v, "sleep 1.5; echo v-done", ctx.new_id("tdV")))
    if not (a and b and c):
        return
    ctx.c.wait_log(a, b"a", 3)
    t0 = now()
    r, err = ctx.c.try_request("POST", "/workspaces/%s/teardown" % w, b"", timeout=10)
    if r is None:
        res.fail("teardown: no answer: %s" % err)
        return
    res.info("teardown answered in %.0f ms: %s" % ((now() - t0) * 1000, r.brief(300)))
    j = r.json()
    res.check(r.status == 200 and isinstance(j, dict) and sorted(j.get("stopped") or []) == sorted([a, b]),
              "expected 200 {\"stopped\": [%s, %s]}, got %s" % (a, b, r.brief()))
    for eid in (a, b):
        s, _ = ctx.c.status(eid)
        res.check(s is not None and s.get("status") == "cancelled",
                  "%s after the teardown: status %r, expected cancelled" % (eid, (s or {}).get("status")))
    s, _ = ctx.c.status(c)
    res.check(s is not None and s.get("state") == "running",
              "V's run right after the teardown: state %r, expected running" % (s or {}).get("state"))
    left = W.wait_no_marked(mark, 1.0)
    res.check(not left, "processes of W left: %s" % [L.describe_pid(p) for p in left])
    s, _ = ctx.c.wait_final(c, 4)
    res.check(s is not None and s.get("status") == "exited" and s.get("stdout") == "v-done\n",
              "V's run: status %r stdout %r, expected exited 'v-done'" % ((s or {}).get("status"), (s or {}).get("stdout")))
    r, err = ctx.c.try_request("POST", "/workspaces/%s/teardown" % w, b"", timeout=5)
    res.check(r is not None and r.status == 200 and (r.json() or {}).get("stopped") == [],
              "second teardown: expected 200 {\"stopped\": []}, got %s" % (r.brief() if r else err))


@case("2 teardown with the JSON body '{}': stops the workspace's run (cancelled), answers its id")
def c_teardown_json_body(ctx, res):
    mark = ctx.mark + "-td-json"
    w = "td-json"
    a = started_managed(res, ctx, ctx.body(w, "echo a; sleep 30", ctx.new_id("tdJ"), marker=mark))
    if not a:
        return
    ctx.c.wait_log(a, b"a", 3)
    r, err = ctx.c.teardown(w, body=b'{"a":1}')
    res.check(r is not None and r.status == 400 and r.error_code() == "body_not_allowed",
              "teardown with {\"a\":1}: expected 400 body_not_allowed, got %s" % (r.brief() if r else err))
    s, _ = ctx.c.status(a)
    res.check(s is not None and s.get("state") == "running",
              "after the refused teardown the run must still run: state %r" % (s or {}).get("state"))
    r, err = ctx.c.teardown(w, body=b"{}")
    if r is None:
        res.fail("teardown {}: no answer: %s" % err)
        return
    j = r.json()
    res.check(r.status == 200 and isinstance(j, dict) and j.get("stopped") == [a],
              "teardown {}: expected 200 {\"stopped\": [%s]}, got %s" % (a, r.brief()))
    s, _ = ctx.c.status(a)
    res.check(s is not None and s.get("status") == "cancelled",
              "%s after the teardown {}: status %r, expected cancelled" % (a, (s or {}).get("status")))
    left = W.wait_no_marked(mark, 1.0)
    res.check(not left, "processes left after the teardown {}: %s" % [L.describe_pid(p) for p in left])
    r, err = ctx.c.teardown(w, body=b"\t{\r\n}\r\n")
    res.check(r is not None and r.status == 200 and (r.json() or {}).get("stopped") == [],
              "second teardown (whitespace around {}): expected 200 {\"stopped\": []}, got %s" %
              (r.brief() if r else err))


# ---- 3. snapshots

@case("3 snapshots: a revision per run (ref workspace/<ws>/<id>, tree = the answer's snapshot)")
def c_revisions(ctx, res):
    ws = "snap"
    ids = []
    for cmd in ("echo one > one", "echo two > two"):
        j = run_sync(res, ctx, ctx.body(ws, cmd, ctx.new_id("sr")))
        if not expect_exited0(res, j, cmd):
            return
        ids.append((j["executionId"], j.get("snapshot")))
    r, err = ctx.c.get("/workspaces/%s/revisions" % ws)
    if r is None or r.status != 200:
        res.fail("GET revisions: %s" % (r.brief() if r else err))
        return
    revs = (r.json() or {}).get("revisions")
    res.note("revisions: %s" % trunc(json.dumps(revs), 800))
    if not res.check(isinstance(revs, list), "no 'revisions' list"):
        return
    by_id = {x.get("executionId"): x for x in revs if isinstance(x, dict)}
    for eid, snap in ids:
        x = by_id.get(eid)
        if not res.check(x is not None, "no revision for %s" % eid):
            continue
        res.eq("ref of %s" % eid, x.get("ref"), "workspace/%s/%s" % (ws, eid))
        res.check(isinstance(x.get("createdAt"), int) and isinstance(x.get("bytes"), int),
                  "revision %s: createdAt/bytes not integers: %r" % (eid, x))
        if "tree" in x:
            res.eq("tree of %s" % eid, x.get("tree"), snap)
    r, err = ctx.c.get("/workspaces/no-such-ws-%s/revisions" % secrets.token_hex(3))
    res.check(r is not None and r.status == 200 and (r.json() or {}).get("revisions") == [],
              "revisions of an unknown workspace: expected 200 with [], got %s" % (r.brief() if r else err))
    r, err = ctx.c.get("/workspaces/.bad/revisions")
    res.check(r is not None and r.status == 404, "revisions of '.bad': expected 404, got %s" % (r.brief() if r else err))


@case("3 snapshots wait for the whole sandbox: a writer that closed its stdio and outlives the payload's main "
      "process is gone before the snapshot (snapshot == workspace; nothing changes after the answer)")
def c_snapshot_after_all(ctx, res):
    ws = "bgwriter"
    cmd = ("rm -f bg.txt; (exec </dev/null >/dev/null 2>&1; i=0; while :; do i=$((i+1)); echo $i >> bg.txt; done) & "
           "sleep 0.2")
    live = os.path.join(ctx.d.state, "workspaces", ws, "bg.txt")
    for k in range(5):
        j = run_sync(res, ctx, ctx.body(ws, cmd, ctx.new_id("bg")))
        if not expect_exited0(res, j, "background writer"):
            return
        with open(live, "rb") as f:
            first = f.read()
        time.sleep(0.2)
        with open(live, "rb") as f:
            later = f.read()
        res.check(len(first) > 0 and first == later, "run %d: bg.txt still changed after the answer (%d -> %d bytes)" %
                  (k, len(first), len(later)))
        r, err = ctx.c.get("/workspaces/%s/revisions/%s/files/bg.txt" % (ws, j["executionId"]))
        if r is None or r.status != 200:
            res.fail("GET revision file bg.txt: %s" % (r.brief() if r else err))
            return
        res.check(r.body == later, "run %d: the snapshot's bg.txt (%d bytes, last line %r) is not the workspace's "
                  "(%d bytes, last line %r)" % (k, len(r.body), r.body[-12:], len(later), later[-12:]))


@case("3 snapshot retention: with SnapshotRetention=3, 25 runs in one workspace leave the 3 newest revisions once "
      "the runs pause (the gc waits for a quiet moment); their files still read")
def c_retention(ctx, res):
    d3 = W.Daemon(ctx.daemon_path, keep_tmp=ctx.d.keep_tmp, run_as=ctx.d.run_as)
    ctx.extra_daemons.append(d3)
    with open(d3.conf, "a") as f:
        f.write("SnapshotRetention=3\n")   # CONFIG_TEXT ends in [Quota]
    try:
        d3.start()
    except (L.DaemonError, OSError) as e:
        res.fail("daemon with SnapshotRetention=3 did not start: %s" % e)
        return
    c3 = W.Client(d3, ctx.budget)
    ws, ids = "retain", []
    for i in range(25):
        j = run_sync(res, ctx, ctx.body(ws, "echo %d > n.txt" % i, ctx.new_id("rt")), client=c3)
        if not expect_exited0(res, j, "run %d" % i):
            return
        ids.append(j["executionId"])
    r, err = c3.get("/workspaces/%s/revisions" % ws)
    n_busy = len((r.json() or {}).get("revisions") or []) if r is not None and r.status == 200 else None
    res.note("revisions right after the 25th run: %s (the gc waits for a pause)" % n_busy)
    deadline, revs = now() + 10, None
    while now() < deadline:
        time.sleep(0.5)
        r, err = c3.get("/workspaces/%s/revisions" % ws)
        if r is None or r.status != 200:
            res.fail("GET revisions: %s" % (r.brief() if r else err))
            return
        revs = [x.get("executionId") for x in (r.json() or {}).get("revisions") or []]
        if len(revs) <= 3:
            break
    res.note("revisions after the pause: %s" % revs)
    if not res.check(revs is not None and sorted(revs) == sorted(ids[-3:]),
                     "expected exactly the 3 newest revisions %s, got %s" % (ids[-3:], revs)):
        return
    for k, eid in enumerate(ids[-3:]):
        r, err = c3.get("/workspaces/%s/revisions/%s/files/n.txt" % (ws, eid))
        res.check(r is not None and r.status == 200 and r.body == b"%d\n" % (22 + k),
                  "n.txt of kept revision %s: %s" % (eid, r.brief() if r else err))


@case("3 snapshots: identical content stored once (no new object for an unchanged tree; 2 same files -> 1 blob)")
def c_dedup(ctx, res):
    ws = "dedup"
    objs = ctx.d.objects_dir()
    j = run_sync(res, ctx, ctx.body(ws, "echo base > base; mkdir -p d; echo x > d/x"))
    if not expect_exited0(res, j, "base"):
        return
    n0, s0 = W.count_objects(objs)
    j2 = run_sync(res, ctx, ctx.body(ws, "true"))
    if not expect_exited0(res, j2, "true"):
        return
    n1, s1 = W.count_objects(objs)
    res.info("objects: %d before the no-op run, %d after" % (n0, n1))
    res.check(n1 == n0, "a run that changes nothing added objects: %s" % sorted(s1 - s0))
    res.eq("snapshot of the no-op run", j2.get("snapshot"), j.get("snapshot"))
    content = ("same-content-%s\n" % secrets.token_hex(16)).encode()
    j3 = run_sync(res, ctx, ctx.body(ws, "printf '%%s\\n' '%s' > a; cp a b; cp a d/c" % content.decode().strip()))
    if not expect_exited0(res, j3, "a, b, d/c"):
        return
    n2, s2 = W.count_objects(objs)
    new = sorted(s2 - s1)
    h = W.sha256_hex(content)
    blob = "%s/%s" % (h[:2], h[2:])
    res.info("3 files with one new content: %d new objects (%s)" % (len(new), ", ".join(n[:10] for n in new)))
    res.check(blob in s2, "no object %s for the content" % blob)
    try:
        with open(os.path.join(objs, blob), "rb") as f:
            res.check(f.read() == content, "object %s does not hold the content" % blob)
    except OSError as e:
        res.fail("object %s: %s" % (blob, e))
    # one blob + the root tree + the tree of d/
    res.check(len(new) == 3, "expected 3 new objects (1 blob, 2 trees), got %d: %s" % (len(new), new))


TREE_CMD = ("mkdir -p dir/sub emptydir 'sp ace' && printf 'alpha\\n' > dir/a.txt && printf beta > dir/sub/b.bin && "
            "printf '#!/bin/sh\\necho run\\n' > tool.sh && chmod 755 tool.sh && printf 'x\\n' > 'sp ace/f i le' && "
            ": > empty && cp dir/a.txt dup.txt && ln -s dir/a.txt link-to-file && ln -s dir link-to-dir && "
            "ln -s /nonexistent/dangling dangling && chmod 600 dir/sub/b.bin")
LIST_CMD = ("find . -mindepth 1 -printf '%y %m %p -> %l\\n' | LC_ALL=C sort; echo ===; "
            "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum")
MUTATE_CMD = ("rm -rf dir/sub emptydir 'sp ace/f i le' dangling && echo changed > dir/a.txt && chmod 644 tool.sh && "
              "chmod 755 empty && ln -sfn tool.sh link-to-file && mkdir newdir && echo new > newdir/n && "
              "ln -s newdir link-new")


@case("3 revision tree ?dir= lists entries; files/<path> gives the bytes with a matching Repr-Digest")
def c_tree_files(ctx, res):
    ws = "restore"
    j = run_sync(res, ctx, ctx.body(ws, TREE_CMD + " && " + LIST_CMD, ctx.new_id("r1")))
    if not expect_exited0(res, j, "tree"):
        return
    r1 = j["executionId"]
    ctx.fx["restore"] = (r1, j.get("stdout"), j.get("snapshot"))
    r, err = ctx.c.get("/workspaces/%s/revisions/%s/tree?dir=" % (ws, r1))
    if r is None or r.status != 200:
        res.fail("tree ?dir=: %s" % (r.brief() if r else err))
        return
    ent = {e.get("name"): e for e in (r.json() or {}).get("entries", [])}
    res.note("root entries: %s" % trunc(json.dumps(ent), 1200))
    want = {"dir": "dir", "emptydir": "dir", "sp ace": "dir", "tool.sh": "file", "empty": "file",
            "dup.txt": "file", "link-to-file": "symlink", "link-to-dir": "symlink", "dangling": "symlink"}
    res.eq("root names", sorted(ent), sorted(want))
    for n, t in want.items():
        if n in ent:
            res.eq("type of %s" % n, ent[n].get("type"), t)
    if "dup.txt" in ent:
        res.eq("dup.txt size", ent["dup.txt"].get("size"), 6)
        res.eq("dup.txt sha256", ent["dup.txt"].get("sha256"), W.sha256_hex(b"alpha\n"))
    if "link-to-file" in ent and "target" in ent["link-to-file"]:
        res.eq("link-to-file target", ent["link-to-file"].get("target"), "dir/a.txt")
    r, err = ctx.c.get("/workspaces/%s/revisions/%s/tree?dir=dir/sub" % (ws, r1))
    sub = (r.json() or {}).get("entries") if r is not None and r.status == 200 else None
    res.check(isinstance(sub, list) and [e.get("name") for e in sub] == ["b.bin"] and sub[0].get("size") == 4,
              "tree ?dir=dir/sub: expected one entry b.bin of 4 bytes, got %s" % (r.brief() if r else err))
    r, err = ctx.c.get("/workspaces/%s/revisions/%s/tree?dir=nope" % (ws, r1))
    res.check(r is not None and r.status == 404, "tree ?dir=nope: expected 404, got %s" % (r.brief() if r else err))
    for path, data in (("dir/a.txt", b"alpha\n"), ("dir/sub/b.bin", b"beta"), ("sp%20ace/f%20i%20le", b"x\n"),
                       ("empty", b"")):
        r, err = ctx.c.get("/workspaces/%s/revisions/%s/files/%s" % (ws, r1, path))
        if r is None or r.status != 200:
            res.fail("GET files/%s: %s" % (path, r.brief() if r else err))
            continue
        res.eq("bytes of %s" % path, r.body, data)
        res.eq("Repr-Digest of %s" % path, r.header("repr-digest"), W.repr_digest_of(r.body))
    for path, what in (("dir", "a directory"), ("link-to-file", "a symlink"), ("nope", "missing"),
                       ("link-to-dir/a.txt", "through a symlink")):
        r, err = ctx.c.get("/workspaces/%s/revisions/%s/files/%s" % (ws, r1, path))
        res.check(r is not None and r.status == 404, "GET files/%s (%s): expected 404, got %s" %
                  (path, what, r.brief() if r else err))


@case("3 restore {ref}: afterwards the workspace is exactly that revision (files, dirs, symlinks, modes, bytes)")
def c_restore(ctx, res):
    ws = "restore"
    if "restore" not in ctx.fx:
        res.fail("no revision from the previous case")
        return
    r1, listing1, snap1 = ctx.fx["restore"]
    j = run_sync(res, ctx, ctx.body(ws, MUTATE_CMD + " && " + LIST_CMD))
    if not expect_exited0(res, j, "mutate"):
        return
    res.check(j.get("stdout") != listing1, "the mutation did not change the listing")
    for ref in (r1, "workspace/%s/%s" % (ws, r1)):
        t0 = now()
        r, err = ctx.c.json_req("POST", "/workspaces/%s/restore" % ws, {"ref": ref}, timeout=10)
        if r is None or r.status != 200:
            res.fail("restore %s: %s" % (ref, r.brief() if r else err))
            return
        res.note("restore %s: %s (%.0f ms)" % (ref, r.brief(300), (now() - t0) * 1000))
        j = run_sync(res, ctx, ctx.body(ws, LIST_CMD))
        if not expect_exited0(res, j, "listing"):
            return
        if not res.check(j.get("stdout") == listing1, "after restore %s the tree differs" % ref):
            res.note("revision:\n%s\nafter restore:\n%s" % (listing1, j.get("stdout")))
        res.eq("snapshot after restore %s (the revision's tree)" % ref, j.get("snapshot"), snap1)
        if ref == r1:   # mutate again before the second form of the ref
            j = run_sync(res, ctx, ctx.body(ws, "rm -rf dir && echo y > extra"))
            expect_exited0(res, j, "second mutation")
    r, err = ctx.c.json_req("POST", "/workspaces/%s/restore" % ws, {"ref": "no-such-ref"})
    res.check(r is not None and r.status == 404, "restore of an unknown ref: expected 404, got %s" %
              (r.brief() if r else err))
    r, err = ctx.c.json_req("POST", "/workspaces/%s/restore" % ws, {"ref": "workspace/other/%s" % r1})
    res.check(r is not None and r.status in (400, 404), "restore of another workspace's ref: expected 400/404, got %s" %
              (r.brief() if r else err))


def ref_forms(ref):
    """The ways a client puts a listed ref into a URL: as given (slashes and all) and
    percent-encoded (workspace%2F<ws>%2F<id>)."""
    return (("as given", ref), ("percent-encoded", urllib.parse.quote(ref, safe="")))


@case("3 every listed ref works as given and percent-encoded (and the id alone) in revisions/{ref}/files/{path}, "
      "files?dir=, tree, and restore; another workspace's ref is refused (400 ref_workspace_mismatch), never served")
def c_listed_refs(ctx, res):
    ws, other = "refs", "refs-other"
    content = {}
    for cmd, data in (("mkdir -p dir && printf 'one\\n' > dir/a.txt", b"one\n"),
                      ("printf 'two\\n' > dir/a.txt && printf b > dir/b.txt", b"two\n")):
        j = run_sync(res, ctx, ctx.body(ws, cmd, ctx.new_id("ref")))
        if not expect_exited0(res, j, cmd):
            return
        content[j["executionId"]] = data
    j = run_sync(res, ctx, ctx.body(other, "mkdir -p dir && printf 'secret\\n' > dir/a.txt", ctx.new_id("oth")))
    if not expect_exited0(res, j, "other workspace"):
        return
    other_id = j["executionId"]

    r, err = ctx.c.get("/workspaces/%s/revisions" % ws)
    if r is None or r.status != 200:
        res.fail("GET revisions: %s" % (r.brief() if r else err))
        return
    revs = [x for x in (r.json() or {}).get("revisions") or [] if x.get("executionId") in content]
    if not res.check(len(revs) == 2, "expected the 2 revisions of this case in the list, got %s" % r.brief()):
        return
    n = 0
    for x in revs:
        ref, eid = x["ref"], x["executionId"]
        data = content[eid]
        res.eq("listed ref of %s" % eid, ref, "workspace/%s/%s" % (ws, eid))
        for form, f in ref_forms(ref) + (("the execution id", eid),):
            base = "/workspaces/%s/revisions/%s" % (ws, f)
            r, err = ctx.c.get(base + "/files/dir/a.txt")
            if res.check(r is not None and r.status == 200, "GET %s/files/dir/a.txt (%s): %s" %
                         (base, form, r.brief() if r else err)):
                res.eq("bytes of dir/a.txt at %s (%s)" % (ref, form), r.body, data)
                res.eq("Repr-Digest of dir/a.txt at %s (%s)" % (ref, form), r.header("repr-digest"),
                       W.repr_digest_of(data))
            for q in ("/files?dir=dir", "/tree?dir=dir"):
                r, err = ctx.c.get(base + q)
                ent = {e.get("name"): e for e in ((r.json() or {}).get("entries") or [])} \
                    if r is not None and r.status == 200 else None
                if res.check(ent is not None and "a.txt" in ent, "GET %s%s (%s): expected a listing with a.txt, "
                             "got %s" % (base, q, form, r.brief() if r else err)):
                    res.eq("sha256 of a.txt in %s%s" % (base, q), ent["a.txt"].get("sha256"), W.sha256_hex(data))
                    res.eq("names in %s%s" % (base, q), sorted(ent), ["a.txt", "b.txt"] if data == b"two\n"
                           else ["a.txt"])
            for q in ("/files", "/files?dir=", "/tree"):
                r, err = ctx.c.get(base + q)
                names = [e.get("name") for e in ((r.json() or {}).get("entries") or [])] \
                    if r is not None and r.status == 200 else None
                res.check(names == ["dir"], "GET %s%s (%s): expected the root entries ['dir'], got %s" %
                          (base, q, form, r.brief() if r else err))
            n += 1
    res.info("%d refs x 3 forms read through files/{path}, files?dir=, files, tree" % len(revs))

    # Restore, with each form, alternating between the two revisions so that each one changes the
    # workspace: afterwards dir/a.txt is that revision's.
    order = sorted(revs, key=lambda x: content[x["executionId"]])     # one, two
    forms = []
    for x in order:
        forms += [(x, "as given", x["ref"]), (x, "percent-encoded", urllib.parse.quote(x["ref"], safe="")),
                  (x, "the execution id", x["executionId"])]
    forms = [forms[i] for i in (0, 3, 1, 4, 2, 5)]
    for x, form, f in forms:
        r, err = ctx.c.json_req("POST", "/workspaces/%s/restore" % ws, {"ref": f}, timeout=10)
        if not res.check(r is not None and r.status == 200, "restore {\"ref\": %r} (%s): %s" %
                         (f, form, r.brief() if r else err)):
            continue
        res.eq("restored (%s)" % form, (r.json() or {}).get("restored"), x["ref"])
        r, err = ctx.c.get("/workspaces/%s/files/dir/a.txt" % ws)
        res.check(r is not None and r.status == 200 and r.body == content[x["executionId"]],
                  "after restore %r (%s): dir/a.txt is %s, expected %r" %
                  (f, form, r.brief() if r else err, content[x["executionId"]]))

    # Another workspace's ref, through this workspace: refused by name, never served; the same
    # for a ref of this workspace through the other one.
    foreign = "workspace/%s/%s" % (other, other_id)
    for url_ws, ref in ((ws, foreign), (other, revs[0]["ref"])):
        for form, f in ref_forms(ref):
            base = "/workspaces/%s/revisions/%s" % (url_ws, f)
            for q in ("/files/dir/a.txt", "/files?dir=dir", "/files", "/tree", "/tree?dir=dir"):
                r, err = ctx.c.get(base + q)
                res.check(r is not None and r.status == 400 and r.error_code() == "ref_workspace_mismatch",
                          "GET %s%s (%s, another workspace's ref): expected 400 ref_workspace_mismatch, got %s" %
                          (base, q, form, r.brief() if r else err))
                res.check(r is None or ((r.header("content-type") or "").startswith("application/json") and
                                        b"secret" not in r.body and b"one\n" not in r.body),
                          "GET %s%s served the other workspace's content: %s" % (base, q, r.brief()))
            r, err = ctx.c.json_req("POST", "/workspaces/%s/restore" % url_ws, {"ref": f}, timeout=10)
            res.check(r is not None and r.status == 400 and r.error_code() == "ref_workspace_mismatch",
                      "restore of workspace %s to %r (%s): expected 400 ref_workspace_mismatch, got %s" %
                      (url_ws, f, form, r.brief() if r else err))
    # The other workspace's execution id alone names no revision of this workspace.
    r, err = ctx.c.get("/workspaces/%s/revisions/%s/files/dir/a.txt" % (ws, other_id))
    res.check(r is not None and r.status == 404 and b"secret" not in r.body,
              "GET revisions/<the other workspace's id>/files/dir/a.txt: expected 404, got %s" %
              (r.brief() if r else err))
    r, err = ctx.c.get("/workspaces/%s/files/dir/a.txt" % ws)
    res.check(r is not None and r.status == 200 and r.body == content[order[-1]["executionId"]],
              "the refused restores changed the workspace: dir/a.txt is %s" % (r.brief() if r else err))
    # Malformed refs: not a revision of this workspace.
    for f in ("workspace/%s" % ws, "workspace/%s/" % ws, "workspace/%s/%s/x" % (ws, revs[0]["executionId"])):
        r, err = ctx.c.json_req("POST", "/workspaces/%s/restore" % ws, {"ref": f}, timeout=10)
        res.check(r is not None and r.status == 404 and r.error_code() == "not_found",
                  "restore to the malformed ref %r: expected 404 not_found, got %s" % (f, r.brief() if r else err))


# ---- 4. quota

@case("4 quota: PUT maxWorkspaceBytes 8 MiB shows in GET and /health; a writer is stopped within 200 ms of crossing it")
def c_quota(ctx, res):
    ws = "quota"
    r, err = ctx.c.get("/api/quota-settings")
    if r is None or r.status != 200:
        res.fail("GET quota-settings: %s" % (r.brief() if r else err))
        return
    ctx.fx["quota_orig"] = orig = r.json()
    r, err = ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 8 * MiB})
    res.check(r is not None and r.status == 200 and (r.json() or {}).get("maxWorkspaceBytes") == 8 * MiB,
              "PUT: %s" % (r.brief() if r else err))
    r, err = ctx.c.get("/api/quota-settings")
    res.check(r is not None and (r.json() or {}).get("maxWorkspaceBytes") == 8 * MiB,
              "GET after PUT: %s" % (r.brief() if r else err))
    r, err = ctx.c.try_request("GET", "/health", auth=False)
    res.check(r is not None and ((r.json() or {}).get("runner") or {}).get("maxWorkspaceBytes") == 8 * MiB,
              "/health runner.maxWorkspaceBytes: %s" % (r.brief() if r else err))
    # 64 KiB chunks into 1 MiB files (the file size rlimit is the quota), ~20 MB/s.
    code = ("import os, sys, time\n"
            "chunk = b'\\xa5' * 65536\n"
            "n = 0; fd = -1\n"
            "while n < 64 << 20:\n"
            "    if n % (1 << 20) == 0:\n"
            "        if fd >= 0: os.close(fd)\n"
            "        fd = os.open('f%03d' % (n >> 20), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
            "    os.write(fd, chunk); n += len(chunk)\n"
            "    sys.stderr.write('%.6f %d\\n' % (time.monotonic(), n)); sys.stderr.flush()\n"
            "    time.sleep(0.0025)\n"
            "print('not stopped')\n")
    t0 = now()
    body = {"executionId": ctx.new_id("q"), "workspaceId": ws, "argv": ["python3", "-c", code],
            "env": {"WSTEST_MARK": ctx.mark}, "timeoutMs": 20000}
    r, err = ctx.c.json_req("POST", "/execute", body, signed=True, timeout=25)
    if r is None or r.status != 200:
        res.fail("writer: %s" % (r.brief() if r else err))
        return
    j = r.json()
    res.note("writer answer after %.2fs: %s" % (now() - t0, trunc(json.dumps(j), 800)))
    res.eq("status", j.get("status"), "workspace_quota_exceeded")
    used = (j.get("workspaceQuota") or {}).get("usedBytes")
    res.check(isinstance(used, int) and used > 8 * MiB, "workspaceQuota.usedBytes %r is not > 8 MiB" % used)
    check_snapshot(res, j)
    lines = []
    for ln in (j.get("stderr") or "").splitlines():
        p = ln.split()
        if len(p) == 2:
            try:
                lines.append((float(p[0]), int(p[1])))
            except ValueError:
                pass
    if not res.check(len(lines) >= 2, "the writer printed no progress (%d lines)" % len(lines)):
        return
    # usedBytes counts directories and allocation too, so the daemon may stop the writer before
    # its own count passed 8 MiB: then it was stopped within one 64 KiB write of crossing.
    cross = next((t for t, n in lines if n > 8 * MiB), None)
    if cross is None:
        res.check(lines[-1][1] >= 8 * MiB - 2 * 65536,
                  "the writer stopped at %d bytes, far below the 8 MiB quota" % lines[-1][1])
        cross = lines[-1][0]
    rate = (lines[-1][1] - lines[0][1]) / max(1e-6, lines[-1][0] - lines[0][0]) / 1e6
    lag = (lines[-1][0] - cross) * 1000
    res.info("quota: writer at %.1f MB/s; last write %.0f ms after crossing 8 MiB (%d bytes written, usedBytes %s)"
             % (rate, lag, lines[-1][1], used))
    res.check(lag <= 200, "the writer went on for %.0f ms after crossing the quota (limit 200 ms)" % lag)
    # The next run is refused before it starts.
    j = run_sync(res, ctx, ctx.body(ws, "echo started > started.txt; echo started"))
    if j is not None:
        res.check(j.get("status") == "workspace_quota_exceeded" and j.get("stdout") == "" and
                  j.get("durationMs") == 0 and j.get("signal") is None,
                  "next run: expected workspace_quota_exceeded, not started (durationMs 0, signal null, no output); "
                  "got status %r durationMs %r stdout %r" % (j.get("status"), j.get("durationMs"), j.get("stdout")))
        res.check(not os.path.exists(os.path.join(ctx.d.workspace_path(ws), "started.txt")),
                  "the refused run wrote started.txt")
    # Remove the files (quota off for that run), quota back on: runs start again.
    ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 0})
    j = run_sync(res, ctx, ctx.body(ws, "rm -f f*"))
    expect_exited0(res, j, "rm -f f*")
    ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 8 * MiB})
    j = run_sync(res, ctx, ctx.body(ws, "echo ok"))
    if expect_exited0(res, j, "after the files were removed"):
        res.eq("stdout after removal", j.get("stdout"), "ok\n")
    # Restore the setting.
    r, err = ctx.c.json_req("PUT", "/api/quota-settings", orig)
    res.check(r is not None and r.status == 200 and r.json() == orig, "restoring %s: %s" % (orig, r.brief() if r else err))


@case("4 quota reached with one file (RLIMIT_FSIZE, SIGXFSZ): workspace_quota_exceeded with the usage seen, not exited")
def c_quota_one_file(ctx, res):
    ws = "quota-one-file"
    r, err = ctx.c.get("/api/quota-settings")
    if not res.check(r is not None and r.status == 200, "GET quota-settings: %s" % (r.brief() if r else err)):
        return
    orig = r.json()
    r, err = ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 8 * MiB})
    if not res.check(r is not None and r.status == 200, "PUT: %s" % (r.brief() if r else err)):
        return
    try:
        # One write stream far past the quota: the file size rlimit stops it one byte past the
        # quota (head gets SIGXFSZ), usage never grows beyond that, and the shell goes on.
        j = run_sync(res, ctx, ctx.body(ws, "head -c 50000000 /dev/zero > big; echo after $?"))
        if j is None:
            return
        res.note("answer: %s" % trunc(json.dumps(j), 600))
        res.eq("status", j.get("status"), "workspace_quota_exceeded")
        used = (j.get("workspaceQuota") or {}).get("usedBytes")
        res.check(isinstance(used, int) and used > 8 * MiB, "workspaceQuota.usedBytes %r is not > 8 MiB" % used)
        # The rlimit hits the writer only: the shell goes on and says so, unless the daemon's
        # 100 ms quota tick killed the run first (signal 9), which a loaded machine allows.
        res.check(j.get("signal") != signal.SIGXFSZ, "SIGXFSZ ended the run itself, not only the writer: %r" % j)
        res.check("after" in (j.get("stdout") or "") or j.get("signal") == signal.SIGKILL,
                  "the run was expected to go on after the refused write (or be stopped by the quota tick): "
                  "stdout %r, signal %r" % (j.get("stdout"), j.get("signal")))
        if "after" not in (j.get("stdout") or ""):
            res.note("the quota tick stopped the run before the shell printed (a loaded machine)")
        size = os.path.getsize(os.path.join(ctx.d.workspace_path(ws), "big"))
        res.eq("size of the file the limit stopped", size, 8 * MiB + 1)
        # The many-files route keeps working (c_quota); under the quota nothing changes:
        ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 0})
        expect_exited0(res, run_sync(res, ctx, ctx.body(ws, "rm -f big")), "rm -f big")
        ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 8 * MiB})
        j = run_sync(res, ctx, ctx.body(ws, "head -c 4000000 /dev/zero > small; echo ok"))
        if expect_exited0(res, j, "a file under the quota"):
            res.eq("stdout", j.get("stdout"), "ok\n")
    finally:
        r, err = ctx.c.json_req("PUT", "/api/quota-settings", orig)
        res.check(r is not None and r.status == 200, "restoring %s: %s" % (orig, r.brief() if r else err))


# ---- 5. restarts

def restart(ctx, res, how):
    """Stop the daemon (how "TERM"; anything else: it is stopped already) and start it again on the
    same state directory."""
    if how == "TERM":
        rc, took = ctx.d.terminate(grace=10)
        res.note("SIGTERM: exit status %r after %.2fs" % (rc, took))
        res.check(rc == 0, "exit status after SIGTERM %r, expected 0" % rc)
    t0 = now()
    try:
        ctx.d.start()
    except (L.DaemonError, OSError) as e:
        res.fail("restart failed: %s" % e)
        return False
    res.note("restarted (pid %d, port %d) in %.2fs" % (ctx.d.pid, ctx.d.port, now() - t0))
    return True


@case("5 SIGTERM + start on the same state dir: finished runs still answer GET (records, logs); quota setting persists")
def c_restart(ctx, res):
    r, err = ctx.c.json_req("PUT", "/api/quota-settings", {"maxWorkspaceBytes": 8 * MiB + 4096})
    if r is None or r.status != 200:
        res.fail("PUT quota: %s" % (r.brief() if r else err))
    before = dict(ctx.fx.get("finished") or {})
    if not res.check(before, "no finished runs from case 1"):
        return
    if not restart(ctx, res, "TERM"):
        return
    for eid, j in before.items():
        s, rr = ctx.c.status(eid)
        if s is None:
            res.fail("GET %s after the restart: %s" % (eid, rr.brief() if hasattr(rr, "brief") else rr))
            continue
        for k in ("status", "exitCode", "stdout", "workspaceId", "kind", "snapshot"):
            if k in j:
                res.eq("%s.%s after the restart" % (eid, k), s.get(k), j.get(k))
    eid = next(iter(before))
    r, err = ctx.c.get("/shell-executions/%s/logs?stream=stdout" % eid)
    res.check(r is not None and r.status == 200 and r.body.decode() == before[eid].get("stdout"),
              "logs of %s after the restart: %s" % (eid, r.brief() if r else err))
    r, err = ctx.c.get("/api/quota-settings")
    res.check(r is not None and (r.json() or {}).get("maxWorkspaceBytes") == 8 * MiB + 4096,
              "quota setting after the restart: %s" % (r.brief() if r else err))
    r, err = ctx.c.try_request("GET", "/health", auth=False)
    res.check(r is not None and ((r.json() or {}).get("runner") or {}).get("maxWorkspaceBytes") == 8 * MiB + 4096,
              "/health after the restart: %s" % (r.brief() if r else err))
    orig = ctx.fx.get("quota_orig") or {"maxWorkspaceBytes": 10 << 30}
    r, err = ctx.c.json_req("PUT", "/api/quota-settings", orig)
    res.check(r is not None and r.status == 200 and r.json() == orig, "restoring %s: %s" % (orig, r.brief() if r else err))


@case("5 a run's keeper killed from outside: the run ends, and its sandbox is gone before the snapshot "
      "(a background writer with closed stdio writes nothing after the end; snapshot == workspace)")
def c_keeper_killed(ctx, res):
    mark = ctx.mark + "-kk"
    ws = "keeperkill"
    cmd = ("rm -f bg.txt; (exec </dev/null >/dev/null 2>&1; while :; do echo x >> bg.txt; done) & "
           "echo started; sleep 30")
    eid = started_managed(res, ctx, ctx.body(ws, cmd, ctx.new_id("kk"), marker=mark))
    if not eid:
        return
    if ctx.c.wait_log(eid, b"started", 4) is None:
        res.fail("the run did not print 'started' within 4 s")
        return
    table = L.proc_table()
    marked = W.marked_pids(mark)
    keeper = marked[0] if marked else None
    while keeper in table and table[keeper][2] != ctx.d.pid:
        keeper = table[keeper][2]
    if not res.check(keeper in table and table[keeper][2] == ctx.d.pid,
                     "no keeper (a child of the daemon above the run's processes %s)" % marked):
        return
    res.note("killing the keeper: %s" % L.describe_pid(keeper, table))
    os.kill(keeper, signal.SIGKILL)
    j, took = ctx.c.wait_final(eid, 10)
    if not res.check(j is not None and j.get("state") in W.FINAL_STATES,
                     "the run did not end within 10 s of its keeper's death: %s" % trunc(json.dumps(j), 400)):
        return
    res.note("ended %.2f s after the keeper's death: %s" % (took, trunc(json.dumps(j), 600)))
    left = W.wait_no_marked(mark, 2)
    res.check(not left, "processes of the run alive after its end: %s" % [L.describe_pid(p) for p in left])
    live = os.path.join(ctx.d.state, "workspaces", ws, "bg.txt")
    with open(live, "rb") as f:
        first = f.read()
    time.sleep(0.3)
    with open(live, "rb") as f:
        later = f.read()
    res.check(first == later, "bg.txt changed after the run ended (%d -> %d bytes)" % (len(first), len(later)))
    if res.check(isinstance(j.get("snapshot"), str), "no snapshot for the run: %r" % j.get("snapshot")):
        r, err = ctx.c.get("/workspaces/%s/revisions/%s/files/bg.txt" % (ws, eid))
        res.check(r is not None and r.status == 200 and r.body == later,
                  "the snapshot's bg.txt (%s) is not the workspace's (%d bytes)" %
                  (("%d bytes" % len(r.body)) if r is not None and r.status == 200 else (r.brief() if r else err),
                   len(later)))


@case("5 SIGKILL mid-run: keeper and bwrap die with the daemon; the next start marks the run 'interrupted'")
def c_sigkill(ctx, res):
    mark = ctx.mark + "-kill"
    ws = "killed"
    eid = started_managed(res, ctx, ctx.body(ws, "echo started; sleep 30; echo %s" % mark, ctx.new_id("k"), marker=mark))
    if not eid:
        return
    if ctx.c.wait_log(eid, b"started", 4) is None:
        res.fail("the run did not print 'started' within 4 s")
    snap = W.snapshot_tree(ctx.d.pid)
    snap.pop(ctx.d.pid, None)
    res.note("daemon pid %d; its descendants: %s" % (ctx.d.pid, [L.describe_pid(p) for p in snap]))
    res.check(snap, "the daemon has no child processes during the run")
    res.check(W.marked_pids(mark), "no marked process during the run")
    os.kill(ctx.d.pid, signal.SIGKILL)
    ctx.d.proc.wait(5)
    t0 = now()
    deadline = t0 + 2.0
    alive = W.alive_of(snap) + W.marked_pids(mark)
    while alive and now() < deadline:
        time.sleep(0.05)
        alive = W.alive_of(snap) + W.marked_pids(mark)
    res.info("SIGKILL: %s" % ("all processes of the run gone after %.0f ms" % ((now() - t0) * 1000) if not alive
                             else "processes alive 2 s later"))
    res.check(not alive, "alive 2 s after the daemon's SIGKILL: %s" % [L.describe_pid(p) for p in sorted(set(alive))])
    if not restart(ctx, res, "dead"):
        return
    s, rr = ctx.c.status(eid)
    res.note("after the restart: %s" % trunc(json.dumps(s), 700))
    res.check(s is not None and s.get("status") == "interrupted" and s.get("state") == "interrupted",
              "status after the restart %r, expected interrupted" % (s or {}).get("status"))
    res.check(s is not None and isinstance(s.get("finishedAt"), int), "no finishedAt in the interrupted record")
    r, err = ctx.c.get("/shell-executions/%s/logs" % eid)
    res.check(r is not None and r.status == 200 and r.body == b"started\n",
              "log of the interrupted run: %s" % (r.brief() if r else err))
    j = run_sync(res, ctx, ctx.body(ws, "echo again"), timeout=8)
    expect_exited0(res, j, "a new run in the killed run's workspace (lease free)")
    left = W.marked_pids(mark)
    res.check(not left, "marked processes after the restart: %s" % left)


# ---- 6. the write lease across processes

def second_daemon(ctx, res):
    if "d2" in ctx.fx:
        return ctx.fx["d2"]
    d2 = W.Daemon(ctx.daemon_path, keep_tmp=ctx.d.keep_tmp, run_as=ctx.d.run_as, share_state_from=ctx.d)
    ctx.extra_daemons.append(d2)
    try:
        d2.start()
    except (L.DaemonError, OSError) as e:
        res.fail("second daemon did not start: %s" % e)
        return None
    res.note("second daemon pid %d on port %d, same state dir %s" % (d2.pid, d2.port, d2.state))
    ctx.fx["d2"] = W.Client(d2, ctx.budget)
    return ctx.fx["d2"]


TIMED = "date +%s.%N; sleep 1; date +%s.%N"


def two_runs(ctx, res, c2, ws_a, ws_b):
    """A 'sleep 1' run on daemon A in ws_a and one on B in ws_b started 0.1 s later; return
    ((start, end) of A, (start, end) of B, B's request end - A's request start) or None."""
    out = {}

    def go(key, client, ws):
        t = now()
        r, err = client.execute(ctx.body(ws, TIMED), timeout=15)
        out[key] = (t, now(), r, err)

    ta = threading.Thread(target=go, args=("a", ctx.c, ws_a))
    tb = threading.Thread(target=go, args=("b", c2, ws_b))
    ta.start()
    time.sleep(0.1)
    tb.start()
    ta.join(20)
    tb.join(20)
    iv = {}
    for k in ("a", "b"):
        if k not in out:
            res.fail("run %s did not return" % k)
            return None
        t, t_end, r, err = out[k]
        j = r.json() if r is not None else None
        if r is None or r.status != 200 or not expect_exited0(res, j, "run %s" % k):
            res.fail("run %s: %s" % (k, r.brief() if r else err))
            return None
        try:
            a, b = [float(x) for x in j["stdout"].split()]
        except ValueError:
            res.fail("run %s: stdout %r" % (k, j.get("stdout")))
            return None
        iv[k] = (a, b)
    return iv["a"], iv["b"], out["b"][1] - out["a"][0]


@case("6 lease across processes: 2 daemons, same state dir: 'sleep 1' runs in one workspace are serialised")
def c_lease_same(ctx, res):
    c2 = second_daemon(ctx, res)
    if c2 is None:
        return
    x = two_runs(ctx, res, c2, "lease", "lease")
    if x is None:
        return
    a, b, total = x
    res.info("same workspace: A ran %.3f-%.3f, B ran %.3f-%.3f (B started %.3fs after A ended); B's answer %.2fs after "
             "A's request" % (0, a[1] - a[0], b[0] - a[0], b[1] - a[0], b[0] - a[1], total))
    res.check(b[0] >= a[1] or a[0] >= b[1], "the runs overlapped: A %s, B %s" % (a, b))
    res.check(total >= 1.9, "B answered %.2fs after A's request: not serialised" % total)


@case("6 lease across processes: in different workspaces the runs overlap")
def c_lease_diff(ctx, res):
    c2 = second_daemon(ctx, res)
    if c2 is None:
        return
    x = two_runs(ctx, res, c2, "lease-a", "lease-b")
    if x is None:
        return
    a, b, total = x
    res.info("different workspaces: overlap %.2fs; B's answer %.2fs after A's request" %
             (min(a[1], b[1]) - max(a[0], b[0]), total))
    res.check(b[0] < a[1] and a[0] < b[1], "the runs did not overlap: A %s, B %s" % (a, b))


def try_flock(path):
    """None if LOCK_EX|LOCK_NB was granted (and released), else the errno."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


@case("6 lease is a flock on the workspace dir: a 3rd process gets EWOULDBLOCK while a run holds it; "
      "status/logs stay prompt; an outside flock holds runs back")
def c_lease_flock(ctx, res):
    c2 = second_daemon(ctx, res)
    ws = "lease-flock"
    path = ctx.d.workspace_path(ws)
    eid = started_managed(res, ctx, ctx.body(ws, "echo started; sleep 1.5", ctx.new_id("lf")))
    if not eid:
        return
    if ctx.c.wait_log(eid, b"started", 4) is None:
        res.fail("the run did not start")
        return
    e = try_flock(path)
    res.check(e == errno.EWOULDBLOCK, "flock(LOCK_EX|LOCK_NB) on %s during the run: %s, expected EWOULDBLOCK" %
              (path, "granted" if e is None else errno.errorcode.get(e, e)))
    worst = 0.0
    for p in ("/shell-executions/%s" % eid, "/shell-executions/%s/logs?stream=stdout" % eid):
        for cl in (ctx.c, c2) if c2 else (ctx.c,):
            r, err = cl.get(p, timeout=3)
            ok = r is not None and (r.status == 200 or (cl is not ctx.c and r.status == 404))
            res.check(ok, "GET %s on %s during the run: %s" % (p, "A" if cl is ctx.c else "B",
                                                               r.brief() if r else err))
            if r is not None:
                worst = max(worst, r.elapsed)
    res.info("status/logs while the lease is held: slowest answer %.0f ms" % (worst * 1000))
    res.check(worst < 0.5, "a status/logs request took %.0f ms while the lease was held" % (worst * 1000))
    j, _ = ctx.c.wait_final(eid, 4)
    expect_exited0(res, j, eid)
    res.check(try_flock(path) is None, "flock still refused after the run ended")
    # The other way round: our flock holds a run back (on either daemon).
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cl = c2 or ctx.c
        eid2 = started_managed(res, ctx, ctx.body(ws, "echo ran > ran.txt; echo ran", ctx.new_id("lf2")), client=cl)
        time.sleep(0.8)
        if eid2:
            s, _ = cl.status(eid2, timeout=2)
            res.check(s is not None and s.get("state") == "running" and
                      not os.path.exists(os.path.join(path, "ran.txt")),
                      "with an outside flock held, the run did not wait: %s" % trunc(json.dumps(s), 300))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    if eid2:
        t0 = now()
        s, _ = cl.wait_final(eid2, 3)
        res.check(s is not None and s.get("status") == "exited" and s.get("stdout") == "ran\n",
                  "after our flock was released: %s" % trunc(json.dumps(s), 300))
        res.info("the held-back run finished %.0f ms after our flock was released" % ((now() - t0) * 1000))


@case("6 a workspace directory swapped while a run waits for its lease (what a restore does): the run "
      "works in the new directory, never in the replaced one")
def c_lease_restore_swap(ctx, res):
    # Deterministic form of the restore race: we hold the lease (flock on the directory inode, as
    # a restore does), swap the directory for a new one while a run on the second daemon waits
    # on the OLD inode, then release. The run must notice that the name now points elsewhere,
    # take the lease of the new directory and work there.
    c2 = second_daemon(ctx, res)
    if c2 is None:
        return
    ws = "swap"
    path = ctx.d.workspace_path(ws)
    j = run_sync(res, ctx, ctx.body(ws, "echo old > a"))
    if not expect_exited0(res, j, "setup"):
        return
    out = {}

    def run():
        out["run"] = c2.execute(ctx.body(ws, "cat a; echo mark > b"), timeout=15)

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.4)                      # the run is queued on the old inode now
        os.rename(path, path + ".replaced")
        os.mkdir(path, 0o700)
        with open(os.path.join(path, "a"), "w") as f:
            f.write("new\n")
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    t.join(15)
    xr, xerr = out.get("run", (None, "no answer"))
    xj = xr.json() if xr is not None and xr.status == 200 else None
    if not expect_exited0(res, xj, "the queued run (%s)" % (xr.brief() if xr else xerr)):
        return
    res.eq("the run read the new directory", (xj.get("stdout") or "").strip(), "new")
    res.check(os.path.exists(os.path.join(path, "b")), "the run's write is not in the new directory")
    res.check(not os.path.exists(os.path.join(path + ".replaced", "b")),
              "the run wrote into the replaced directory")
    shutil.rmtree(path + ".replaced", ignore_errors=True)


# ---- 7. workspace files (endpoints being written)

def files_url(ws, path):
    return "/workspaces/%s/files/%s" % (ws, path)


@case("7 files: PUT raw body -> 201; GET -> bytes + Repr-Digest; a run sees the file")
def c_files_put(ctx, res):
    ws = "files"
    data = b"uploaded \x00\xff bytes " + secrets.token_bytes(64)
    r, err = ctx.c.try_request("PUT", files_url(ws, "up/a.bin"), data, [("Content-Type", "application/octet-stream")])
    if r is None:
        res.fail("PUT: %s" % err)
        return
    if not_wired(r):
        return fail_not_wired(res, "PUT /workspaces/{ws}/files/{path}", r)
    res.check(r.status == 201, "PUT: expected 201, got %s" % r.brief())
    r, err = ctx.c.get(files_url(ws, "up/a.bin"))
    if r is None or r.status != 200:
        if not_wired(r):
            return fail_not_wired(res, "GET /workspaces/{ws}/files/{path}", r)
        res.fail("GET: %s" % (r.brief() if r else err))
        return
    res.eq("downloaded bytes", r.body, data)
    res.eq("Repr-Digest", r.header("repr-digest"), W.repr_digest_of(data))
    j = run_sync(res, ctx, ctx.body(ws, "sha256sum up/a.bin"))
    if expect_exited0(res, j, "sha256sum"):
        res.eq("sha256 in the sandbox", (j.get("stdout") or "").split(" ")[0], W.sha256_hex(data))
    r, err = ctx.c.get(files_url(ws, "up/missing"))
    res.check(r is not None and r.status == 404, "GET of a missing file: expected 404, got %s" % (r.brief() if r else err))
    # An upload while a run holds the lease is committed after the run (the run never sees it).
    eid = started_managed(res, ctx, ctx.body(ws, "sleep 1; ls up", ctx.new_id("fl")))
    if eid and ctx.c.wait_log(eid, b"", 0.1) is not None:
        time.sleep(0.2)
        t0 = now()
        r, err = ctx.c.try_request("PUT", files_url(ws, "up/late.txt"), b"late\n",
                                   [("Content-Type", "application/octet-stream")], timeout=5)
        took = now() - t0
        j, _ = ctx.c.wait_final(eid, 3)
        res.check(r is not None and r.status == 201, "PUT during a run: %s" % (r.brief() if r else err))
        res.info("PUT while a run holds the lease answered after %.2fs (the run had ~0.8 s left)" % took)
        res.check(took >= 0.5, "PUT during a run answered after %.2fs: did it wait for the lease?" % took)
        res.check(j is not None and "late.txt" not in (j.get("stdout") or ""),
                  "the run saw the file uploaded while it ran: %r" % (j or {}).get("stdout"))
        r, err = ctx.c.get(files_url(ws, "up/late.txt"))
        res.check(r is not None and r.status == 200 and r.body == b"late\n", "GET up/late.txt: %s" %
                  (r.brief() if r else err))


@case("7 files: POST multipart (filename = path) -> 201 with the list; GET each; ?dir= listing")
def c_files_multipart(ctx, res):
    ws = "files"
    parts = [("m/one.txt", b"one\n"), ("m/deep/two.bin", secrets.token_bytes(300)), ("three", b"")]
    ctype, body = W.multipart(parts)
    r, err = ctx.c.try_request("POST", "/workspaces/%s/files" % ws, body, [("Content-Type", ctype)])
    if r is None:
        res.fail("POST: %s" % err)
        return
    if not_wired(r) or r.status == 405:
        return fail_not_wired(res, "POST /workspaces/{ws}/files", r) if not_wired(r) else \
            res.fail("POST multipart: %s" % r.brief())
    res.check(r.status == 201, "POST multipart: expected 201, got %s" % r.brief())
    strings = set()

    def walk(x):
        if isinstance(x, str):
            strings.add(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(r.json())
    res.note("answer: %s" % r.brief(600))
    for p, _ in parts:
        res.check(p in strings, "the answer does not list %s: %s" % (p, r.brief(400)))
    for p, data in parts:
        r, err = ctx.c.get(files_url(ws, p))
        res.check(r is not None and r.status == 200 and r.body == data and
                  r.header("repr-digest") == W.repr_digest_of(data),
                  "GET %s: %s" % (p, r.brief(120) if r else err))
    r, err = ctx.c.get("/workspaces/%s/files?dir=m" % ws)
    if r is None or r.status != 200:
        res.fail("GET ?dir=m: %s" % (r.brief() if r else err))
        return
    ent = {e.get("name"): e for e in (r.json() or {}).get("entries", [])}
    res.eq("names in m", sorted(ent), ["deep", "one.txt"])
    if "one.txt" in ent:
        res.check(ent["one.txt"].get("type") == "file" and ent["one.txt"].get("size") == 4 and
                  ent["one.txt"].get("sha256") in (None, W.sha256_hex(b"one\n")),
                  "entry one.txt: %r" % ent["one.txt"])
    if "deep" in ent:
        res.eq("type of deep", ent["deep"].get("type"), "dir")
    r, err = ctx.c.get("/workspaces/%s/files?dir=" % ws)
    names = sorted(e.get("name") for e in ((r.json() or {}).get("entries", []) if r is not None else []))
    res.check(r is not None and r.status == 200 and {"m", "three", "up"} <= set(names),
              "GET ?dir= (root): %s" % (r.brief() if r else err))


def leftovers(ws_path, before):
    now_ = W.tree_files(ws_path)
    return sorted(set(now_) - set(before))


@case("7 files: over maxUploadFileBytes / maxUploadRequestBytes -> 413 payload_too_large, nothing left behind")
def c_files_limits(ctx, res):
    ws = "files-lim"
    r, err = ctx.c.get("/api/quota-settings")
    orig = r.json() if r is not None and r.status == 200 else None
    if not res.check(orig, "GET quota-settings: %s" % (r.brief() if r else err)):
        return
    r, err = ctx.c.json_req("PUT", "/api/quota-settings", {"maxUploadFileBytes": 1024, "maxUploadRequestBytes": 4096})
    if not res.check(r is not None and r.status == 200, "PUT upload limits: %s" % (r.brief() if r else err)):
        return
    try:
        run_sync(res, ctx, ctx.body(ws, "true"))      # the workspace exists
        base = W.tree_files(ctx.d.workspace_path(ws))
        cases = []
        r, err = ctx.c.try_request("PUT", files_url(ws, "big.bin"), b"b" * 2048,
                                   [("Content-Type", "application/octet-stream")])
        cases.append(("PUT of 2048 bytes (file limit 1024)", r, err, ["big.bin"]))
        r, err = ctx.c.try_request("PUT", files_url(ws, "ok.bin"), b"o" * 1000,
                                   [("Content-Type", "application/octet-stream")])
        if r is not None and r.status == 201:
            os.unlink(os.path.join(ctx.d.workspace_path(ws), "ok.bin"))
            base = W.tree_files(ctx.d.workspace_path(ws))
        elif not not_wired(r):
            res.fail("PUT of 1000 bytes (under the limit): expected 201, got %s" % (r.brief() if r else err))
        parts = [("p%d.bin" % i, b"p" * 1000) for i in range(5)]
        ctype, body = W.multipart(parts)
        r, err = ctx.c.try_request("POST", "/workspaces/%s/files" % ws, body, [("Content-Type", ctype)])
        cases.append(("multipart of 5 x 1000 bytes (request limit 4096)", r, err, [p for p, _ in parts]))
        ctype, body = W.multipart([("small.txt", b"s"), ("huge.bin", b"h" * 2000)])
        r, err = ctx.c.try_request("POST", "/workspaces/%s/files" % ws, body, [("Content-Type", ctype)])
        cases.append(("multipart with one part of 2000 bytes (file limit 1024)", r, err, ["small.txt", "huge.bin"]))
        for what, r, err, paths in cases:
            if r is None:
                res.fail("%s: no answer: %s" % (what, err))
                continue
            if not_wired(r):
                fail_not_wired(res, what, r)
                continue
            res.check(r.status == 413 and r.error_code() == "payload_too_large",
                      "%s: expected 413 payload_too_large, got %s" % (what, r.brief()))
            for p in paths:
                res.check(not os.path.lexists(os.path.join(ctx.d.workspace_path(ws), p)),
                          "%s: %s was written" % (what, p))
        left = leftovers(ctx.d.workspace_path(ws), base)
        res.check(not left, "left behind in the workspace: %s" % left)
    finally:
        r, err = ctx.c.json_req("PUT", "/api/quota-settings", orig)
        res.check(r is not None and r.status == 200 and r.json() == orig, "restoring %s: %s" %
                  (orig, r.brief() if r else err))


HOSTILE = [
    ("../x", "parent"), ("/abs", "absolute (empty first component)"), ("a/../../x", "a/../../x"),
    ("%2e%2e/x", "%2e%2e/x (decodes to ../x)"), ("%2e%2e%2fx", "%2e%2e%2fx"), ("x%00y", "NUL"),
    ("%c0%ae%c0%ae/x", "overlong UTF-8 '..'"), ("..%c0%afx", "overlong UTF-8 '/'"),
    ("a" * 256, "256-byte component"), (".", "."), ("./x", "./x"), ("a//b", "empty component"),
    ("esc/pwned", "through a symlink to a host dir"), ("esc2", "a symlink to a host file"),
]


@case("7 files: hostile names (../x, /abs, a/../../x, %2e%2e/x, NUL, overlong UTF-8, 256-byte name, '.', "
      "symlinks) -> 400/404 (403 for a symlink), nothing written outside")
def c_files_hostile(ctx, res):
    ws = "files-hostile"
    host_dir = os.path.join(ctx.d.tmp, "host-dir")
    os.makedirs(host_dir, exist_ok=True)
    os.chmod(host_dir, 0o777)           # writable by the daemon's user: only its checks stop it
    host_file = os.path.join(host_dir, "host-file")
    with open(host_file, "w") as f:
        f.write("HOST-FILE-SENTINEL\n")
    os.chmod(host_file, 0o666)
    j = run_sync(res, ctx, ctx.body(ws, "mkdir -p a && ln -sfn %s esc && ln -sfn %s esc2 && mkfifo fifo" %
                                    (host_dir, host_file)))
    expect_exited0(res, j, "plant symlinks and a FIFO")
    r, err = ctx.c.get(files_url(ws, "fifo"), timeout=3)
    res.check(r is not None and 400 <= r.status < 500, "GET of a FIFO: expected a prompt 4xx, got %s" %
              (r.brief(200) if r else err))
    before_host = W.tree_files(ctx.d.tmp)
    tokens = {}
    wired = True
    for path, what in HOSTILE:
        tok = ("HOSTILE-%s-" % secrets.token_hex(6)).encode()
        tokens[tok] = what
        r, err = ctx.c.try_request("PUT", files_url(ws, path), tok, [("Content-Type", "application/octet-stream")])
        if r is None:
            res.check("closed" in (err or "") or "reset" in (err or "").lower(),
                      "PUT %s (%s): no answer: %s" % (path[:40], what, err))
            continue
        if not_wired(r):
            wired = False
            continue
        allowed = (400, 403, 404) if path.startswith("esc") else (400, 404)
        entry = os.path.join(ctx.d.workspace_path(ws), path)
        if path == "esc2" and r.status == 201:
            # The final component was a symlink: replacing that entry (never writing through
            # it) is as safe as refusing.
            res.info("PUT esc2 (a symlink to a host file): 201, the symlink was replaced by a regular file")
            res.check(not os.path.islink(entry) and os.path.isfile(entry) and open(entry, "rb").read() == tok,
                      "PUT esc2 answered 201 but the workspace entry is not a regular file with the body")
            r, err = ctx.c.get(files_url(ws, path))
            res.check(r is not None and r.status == 200 and r.body == tok,
                      "GET esc2 after it was replaced: %s" % (r.brief(200) if r else err))
            continue
        res.check(r.status in allowed, "PUT %s (%s): expected %s, got %s" % (path[:40], what, allowed, r.brief(200)))
        r, err = ctx.c.get(files_url(ws, path))
        if r is not None:
            res.check(r.status in allowed and b"SENTINEL" not in r.body,
                      "GET %s (%s): expected %s, got %s" % (path[:40], what, allowed, r.brief(200)))
    if not wired:
        fail_not_wired(res, "PUT/GET /workspaces/{ws}/files/{path} (hostile names)", r)
    for q in ("..", "%2e%2e", "/", "a/..", "esc", "a%00b", "%c0%ae%c0%ae"):
        r, err = ctx.c.get("/workspaces/%s/files?dir=%s" % (ws, q))
        if r is not None and not_wired(r):
            continue
        res.check(r is not None and r.status in (400, 403, 404),
                  "GET ?dir=%s: expected 400/403/404, got %s" % (q, r.brief(200) if r else err))
    # Nothing written outside the workspace: no new file in the daemon's temp dir (state
    # included) but in this workspace and the stores, and no token anywhere else.
    ws_rel = os.path.relpath(ctx.d.workspace_path(ws), ctx.d.tmp)
    new = [p for p in set(W.tree_files(ctx.d.tmp)) - set(before_host)
           if not p.startswith(ws_rel) and not p.startswith(os.path.join("state", "cas")) and
           not p.startswith(os.path.join("state", "records")) and not p.endswith("daemon.log")]
    res.check(not new, "new files outside the workspace: %s" % new[:10])
    for p in ("/abs", "/x", os.path.join(ctx.d.state, "workspaces", "x"), os.path.join(ctx.d.state, "x"),
              os.path.join(host_dir, "pwned")):
        res.check(not os.path.lexists(p), "%s exists" % p)
    with open(host_file) as f:
        res.eq("host file", f.read(), "HOST-FILE-SENTINEL\n")
    for dp, dns, fns in os.walk(ctx.d.tmp):
        if os.path.join(ctx.d.tmp, ws_rel) in dp or "cas" in dp:
            continue
        for n in fns:
            if n == "daemon.log":
                continue
            try:
                with open(os.path.join(dp, n), "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            for tok, what in tokens.items():
                res.check(tok not in data, "the body of PUT %s ended up in %s" % (what, os.path.join(dp, n)))


@case("7 revision files: hostile names -> 400/404, never 200")
def c_revision_hostile(ctx, res):
    ws = "restore"
    r1 = (ctx.fx.get("restore") or (None,))[0]
    if not res.check(r1, "no revision from case 3"):
        return
    for path, what in HOSTILE[:12] + [("link-to-dir/a.txt", "through a symlink in the tree"),
                                     ("%2e%2e/%2e%2e/%2e%2e/etc/passwd", "encoded ../../../etc/passwd")]:
        r, err = ctx.c.get("/workspaces/%s/revisions/%s/files/%s" % (ws, r1, path))
        res.check(r is not None and r.status in (400, 404),
                  "GET revisions/%s/files/%s (%s): expected 400/404, got %s" % (r1, path[:40], what,
                                                                                r.brief(200) if r else err))


RACER = r"""
import ctypes, os, sys
CONTENT = sys.argv[1]
targets = sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    return libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0
os.makedirs("w", exist_ok=True)
def put_file():
    with open("w/.t", "w") as f:
        f.write(CONTENT)
    os.rename("w/.t", "w/target")
put_file()
print("racing", flush=True)
n = 0
while True:
    n += 1
    try:
        for dest in targets:
            try:
                os.unlink("w/.l")
            except FileNotFoundError:
                pass
            os.symlink(dest, "w/.l")
            os.rename("w/.l", "w/target")
            for _ in range(3):      # the file shape lasts about as long as the symlink one
                put_file()
        # the directory w itself: exchanged with a symlink to a host directory and back
        try:
            os.unlink("wl")
        except FileNotFoundError:
            pass
        os.symlink(os.path.dirname(targets[-1]), "wl")
        if exchange("w", "wl"):
            exchange("w", "wl")
    except OSError as e:
        print("racer error", e, file=sys.stderr, flush=True)
"""


@case("7 files: symlink race: w/target swapped file <-> symlink (/etc/shadow, a host file, a host dir) "
      "during 500 or more downloads: only the file's content or an error")
def c_files_race(ctx, res):
    ws = "race"
    host_dir = os.path.join(ctx.d.tmp, "race-host")
    os.makedirs(host_dir, exist_ok=True)
    host_file = os.path.join(host_dir, "target")
    with open(host_file, "w") as f:
        f.write("RACE-HOST-SENTINEL\n")
    os.chmod(host_file, 0o644)
    host_only = "HOSTONLY-%s" % secrets.token_hex(4)
    open(os.path.join(host_dir, host_only), "w").close()
    os.chmod(host_dir, 0o777)           # writable by the daemon's user: only its checks stop it
    forbidden = [b"RACE-HOST-SENTINEL"]
    for p in ("/etc/shadow", "/etc/passwd"):
        try:
            with open(p, "rb") as f:
                forbidden.append(f.read()[:64])
        except OSError:
            pass
    content = "the file content %s\n" % secrets.token_hex(8)
    eid = ctx.new_id("race")
    cmd = 'exec python3 -c "$RACER" %s' % " ".join(shlex.quote(a) for a in (content, "/etc/shadow", "/etc/passwd",
                                                                                host_file))
    body = {"executionId": eid, "workspaceId": ws, "command": cmd,
            "env": {"WSTEST_MARK": ctx.mark, "RACER": RACER}, "timeoutMs": 60000}
    r, err = ctx.c.json_req("POST", "/shell-executions", body, signed=True)
    if r is None or r.status != 202:
        res.fail("racer: %s" % (r.brief() if r else err))
        return
    try:
        if ctx.c.wait_log(eid, b"racing", 5) is None:
            res.fail("the racer did not start")
            return
        # The race is real: the host sees both shapes of w/target.
        shapes = set()
        tp = os.path.join(ctx.d.workspace_path(ws), "w", "target")
        for _ in range(2000):
            try:
                shapes.add("symlink" if os.path.islink(tp) else "file")
            except OSError:
                pass
        res.note("shapes of w/target seen from the host: %s" % sorted(shapes))
        counts = {}
        bad = []
        t0 = now()
        # 500 downloads at least; on a loaded machine the racer may not get the CPU during them, so
        # more (up to 20 s) until both outcomes were seen: the file's content and a refusal.
        for i in range(100000):
            if i >= 500 and (("200 file" in counts and len(counts) > 1) or now() - t0 > 20):
                break
            if ctx.budget.left() < 5:
                res.fail("stopped after %d downloads: time budget" % i)
                break
            r, err = ctx.c.get(files_url(ws, "w/target"), timeout=3)
            if r is None:
                counts["no answer"] = counts.get("no answer", 0) + 1
                if i == 0:
                    res.fail("the first download got no answer (%s): does a download wait for the lease?" % err)
                    break
                continue
            if not_wired(r):
                fail_not_wired(res, "GET /workspaces/{ws}/files/{path}", r)
                break
            key = "200 file" if r.status == 200 and r.body == content.encode() else "%d" % r.status
            if r.status == 200 and r.body != content.encode():
                key = "200 OTHER"
                bad.append(r.body[:80])
            counts[key] = counts.get(key, 0) + 1
            if r.status == 200 and any(f and f in r.body for f in forbidden):
                bad.append(b"FORBIDDEN: " + r.body[:80])
        res.info("race: %s in %.1fs" % (counts, now() - t0))
        lcounts = {}
        for i in range(100):
            r, err = ctx.c.get("/workspaces/%s/files?dir=w" % ws, timeout=3)
            if r is None:
                lcounts["no answer"] = lcounts.get("no answer", 0) + 1
                continue
            lcounts[r.status] = lcounts.get(r.status, 0) + 1
            if host_only.encode() in r.body or b"RACE-HOST" in r.body:
                bad.append(b"LISTING OF THE HOST DIR: " + r.body[:200])
        res.info("listing ?dir=w during the race: %s" % lcounts)
        # An upload into w/ during the race: its commit waits for the lease (the racer's run).
        up = {}

        def upload():
            up["r"] = ctx.c.try_request("PUT", files_url(ws, "w/uploaded"), b"uploaded\n",
                                        [("Content-Type", "application/octet-stream")], timeout=10)
        ut = threading.Thread(target=upload)
        ut.start()
        time.sleep(0.3)
        res.check(not bad, "answers that are not the file's content: %s" % bad[:5])
        res.check(not counts or ("200 file" in counts and len(counts) > 1),
                  "the race was not exercised (no download got the file, or none was refused): %s" % counts)
        ctx.c.cancel(eid)
        ctx.c.wait_final(eid, 3)
        ut.join(10)
        r, err = up.get("r", (None, "no answer"))
        landed = [os.path.relpath(os.path.join(dp, n), ctx.d.workspace_path(ws))
                  for dp, dns, fns in os.walk(ctx.d.workspace_path(ws)) for n in fns if n == "uploaded"]
        res.info("PUT w/uploaded during the race: %s; landed at %s" % (r.brief(160) if r else err, landed))
        res.check(sorted(os.listdir(host_dir)) == sorted(["target", host_only]),
                  "the host directory changed: %s" % sorted(os.listdir(host_dir)))
        if r is not None and r.status == 201:
            res.check(landed == ["w/uploaded"], "the upload answered 201 for w/uploaded but the file is at %s" % landed)
        res.check(not bad, "answers that show the host directory: %s" % bad[:3])
    finally:
        ctx.c.cancel(eid)
        ctx.c.wait_final(eid, 3)


# ---- 8. runs that wait for the lease (last: a failure here has killed the daemon)

@case("8 a managed run waiting for the lease (held by another process): state running, logs 200 empty; "
      "teardown -> {\"stopped\": [id]}, cancelled; the daemon survives")
def c_waiting_teardown(ctx, res):
    ws = "waiting"
    j = run_sync(res, ctx, ctx.body(ws, "true"))
    if not expect_exited0(res, j, "create the workspace"):
        return
    fd = os.open(ctx.d.workspace_path(ws), os.O_RDONLY | os.O_DIRECTORY)
    eid = None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        eid = started_managed(res, ctx, ctx.body(ws, "echo should-not-run", ctx.new_id("wt")))
        if not eid:
            return
        time.sleep(0.3)
        s, _ = ctx.c.status(eid)
        res.check(s is not None and s.get("state") == "running", "status while waiting: %s" % trunc(json.dumps(s), 300))
        r, err = ctx.c.get("/shell-executions/%s/logs?stream=stdout&offset=0" % eid)
        res.check(r is not None and r.status == 200 and r.body == b"" and r.header("x-sandbox-next-offset") == "0",
                  "logs of an accepted managed run that waits for the lease: expected 200, empty, "
                  "X-Sandbox-Next-Offset 0; got %s" % (r.brief(300) if r else err))
        t0 = now()
        r, err = ctx.c.try_request("POST", "/workspaces/%s/teardown" % ws, b"", timeout=5)
        res.info("teardown of a workspace whose only run waits for the lease: %s" % (r.brief(300) if r else err))
        res.check(r is not None and r.status == 200 and (r.json() or {}).get("stopped") == [eid],
                  "expected 200 {\"stopped\": [\"%s\"]}, got %s" % (eid, r.brief(300) if r else err))
        time.sleep(0.1)
        if not ctx.d.alive():
            res.fail("the daemon died during the teardown (exit status %r); log tail:\n%s" %
                     (ctx.d.proc.poll(), ctx.d.log_tail(600)))
            restart(ctx, res, "dead")
            return
        s, _ = ctx.c.status(eid)
        res.check(s is not None and s.get("status") == "cancelled" and s.get("stdout") == "",
                  "after the teardown: %s" % trunc(json.dumps(s), 300))
        res.info("teardown answered after %.0f ms" % ((now() - t0) * 1000))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# --------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    ap.add_argument("--only", help="run only cases whose name contains this")
    args = ap.parse_args()

    budget = L.Budget(BUDGET)
    cases = [(n, f) for n, f in CASES if not args.only or args.only in n]
    out = sys.stdout
    tap = W.Tap(out)
    out.write("1..%d\n" % len(cases))
    out.flush()
    run_as = T.resolve_run_as(args.run_as)
    d = W.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as)
    out.write("# daemon runs as uid %s\n" % T.run_as_uid(run_as))
    if L.start_or_fail_all(d, cases, tap, Result, 500) is None:
        d.cleanup()
        return 1
    ctx = Ctx(d, budget, args.verbose, args.daemon)

    def watchdog():
        if not budget.expired.wait(max(0.0, budget.left())):
            budget.expired.set()
            out.write("# time budget of %.0fs exhausted: killing the daemons\n" % BUDGET)
            out.flush()
            d.kill()
            for x in ctx.extra_daemons:
                x.kill()
    threading.Thread(target=watchdog, daemon=True).start()

    try:
        for name, fn in cases:
            res = Result(name)
            t0 = now()
            if budget.expired.is_set() or budget.left() <= 0:
                res.fail("not run: the time budget is exhausted")
            elif not d.alive():
                res.fail("the daemon is not running (exit status %r); log tail:\n%s" % (d.proc.poll(), d.log_tail(1500)))
            else:
                try:
                    fn(ctx, res)
                except Exception:                              # noqa: BLE001
                    res.fail("test error:\n" + traceback.format_exc())
                if not d.alive():
                    res.fail("the daemon died (exit status %r); log tail:\n%s" % (d.proc.poll(), d.log_tail(2000)))
            res.info("(%.2fs)" % (now() - t0))
            tap.emit(res, verbose=args.verbose)
    finally:
        if not budget.expired.is_set():
            budget.expired.set()
        for x in ctx.extra_daemons:
            x.terminate(grace=5)
        rc, took = d.terminate(grace=10)
        out.write("# daemon stopped: exit status %r after %.2fs\n" % (rc, took))
        L.kill_leftovers(W.marked_pids(ctx.mark), out)
        if tap.failed:
            L.write_log_tail(d, out)
        for x in ctx.extra_daemons:
            x.cleanup()
        d.cleanup()
        if args.keep_tmp:
            out.write("# kept %s\n" % d.tmp)
    return tap.summary(len(cases), budget.elapsed())


if __name__ == "__main__":
    sys.exit(main())
