#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The node's membership of a fleet ([Fleet], issue 24) against a real etcd (run under
tests/helpers/etcd-cluster.py, which sets ETCD_ENDPOINTS), daemons started by hand on loopback:

  - registered: /health.fleet says "registered"; etcd holds <prefix>nodes/<NodeId> with the node,
    its AdvertiseURL, its version and capacity, under a lease of LeaseTTLSec=3;
  - serves: a run goes as without a fleet, and the record stays while the node lives (renewed);
  - stop: SIGTERM revokes the lease, the record is gone at once (not after its TTL);
  - killed: a node killed (SIGKILL) keeps its record until the lease expires, then it is gone;
  - unreachable: a node whose etcd cannot be reached serves runs, /health.fleet says
    "unavailable" with the reason, and it registers once etcd is there (here: never, a dead port);
  - misconfigured: Enable=yes without Etcd= is refused at start with the reason, exit status 78
    (EX_CONFIG, which the unit does not restart).

    etcd-cluster.py --members 1 -- fleet-membership.py --daemon build/src/sandbox-runnerd
"""

import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import time
import traceback
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import testlib as T             # noqa: E402

PREFIX = "/sr-test-%d/" % os.getpid()


def config(node, endpoints, ttl=3, extra=""):
    return """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
[Fleet]
Enable=yes
NodeId=%s
AdvertiseURL=http://127.0.0.1:1/%s
Etcd=%s
EtcdPrefix=%s
LeaseTTLSec=%d
%s""" % (node, node, " ".join(endpoints), PREFIX, ttl, extra)


def etcd(path, body):
    """One call to etcd's JSON gateway (the first member)."""
    url = os.environ["ETCD_ENDPOINTS"].split(",")[0] + path
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read() or b"{}")


def b64(s):
    return base64.b64encode(s.encode()).decode()


def record(node):
    """The node's record in etcd: (value as JSON, lease id) or (None, None)."""
    kvs = etcd("/v3/kv/range", {"key": b64(PREFIX + "nodes/" + node)}).get("kvs") or []
    if not kvs:
        return None, None
    return json.loads(base64.b64decode(kvs[0]["value"])), int(kvs[0].get("lease", "0"))


def wait_for(pred, limit):
    deadline = time.monotonic() + limit
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def fleet_health(d):
    h = d.health(timeout=5.0)
    return ((h.json() or {}) if h is not None else {}).get("fleet") or {}


def run_true(d):
    body = json.dumps({"command": "echo ok", "workspaceId": "fleet-ws"}).encode()
    ts = int(time.time())
    r = L.http(d.port, "POST", "/execute-shell",
               [("Authorization", "Bearer " + d.token), ("X-Sandbox-Timestamp", str(ts)),
                ("X-Sandbox-Signature", L.signature(d.key, ts, "POST", "/execute-shell", body)),
                ("Content-Type", "application/json")], body, timeout=30)
    return r.status, (r.json() or {}).get("stdout")


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d" % port


def case_registered(args, res):
    endpoints = os.environ["ETCD_ENDPOINTS"].split(",")
    d = L.Daemon(args.daemon, config=config("node-a", endpoints))
    try:
        d.start()
        fh = wait_for(lambda: (lambda f: f if f.get("state") == "registered" else None)(fleet_health(d)), 15)
        res.note("/health.fleet: %s" % (fh or fleet_health(d)))
        res.eq("/health.fleet.state", (fh or {}).get("state"), "registered")
        rec, lease = record("node-a")
        res.note("record: %s (lease %s)" % (rec, lease))
        res.check(rec is not None, "no record at %snodes/node-a" % PREFIX)
        if rec is None:
            return
        res.eq("record node and url", (rec.get("node"), rec.get("url")), ("node-a", "http://127.0.0.1:1/node-a"))
        cap = rec.get("capacity") or {}
        res.check(isinstance(cap.get("memoryAvailableBytes"), int) and cap["memoryAvailableBytes"] > 0,
                  "capacity.memoryAvailableBytes: %r" % cap.get("memoryAvailableBytes"))
        res.check(isinstance(cap.get("diskFreeBytes"), int) and cap.get("cpus", 0) >= 1, "capacity: %r" % cap)
        res.check(isinstance(rec.get("version"), str) and rec.get("startedAt", 0) > 1.7e9, "version/startedAt: %r" % rec)
        res.eq("the record's lease is /health's", lease, (fh or {}).get("lease"))
        ttl = etcd("/v3/kv/lease/timetolive", {"ID": str(lease)})
        res.check(0 < int(ttl.get("grantedTTL", 0)) <= 3, "granted TTL %r, LeaseTTLSec=3" % ttl.get("grantedTTL"))

        # serves, and the record outlives several TTLs (renewed)
        res.eq("a run", run_true(d), (200, "ok\n"))
        time.sleep(7)
        rec2, lease2 = record("node-a")
        res.check(rec2 is not None and lease2 == lease, "after 7 s (TTL 3): record %r lease %r" % (rec2, lease2))
        res.check(rec2 is not None and rec2.get("updatedAt", 0) >= rec.get("updatedAt", 0),
                  "the record was not refreshed: %r then %r" % (rec, rec2))
        res.check(fleet_health(d).get("registrations", 0) >= 2, "registrations: %r" % fleet_health(d))

        # SIGTERM: the lease revoked, the record gone at once
        rc, took = d.terminate()
        res.note("SIGTERM: exit %r after %.2f s" % (rc, took))
        res.eq("exit status", rc, 0)
        gone = wait_for(lambda: record("node-a")[0] is None, 1.0)
        res.check(gone, "the record is still there after a clean stop (its lease should be revoked)")
        res.check("left the fleet" in d.log_text(), "no 'left the fleet' in the log")
    finally:
        d.cleanup()


def case_killed(args, res):
    endpoints = os.environ["ETCD_ENDPOINTS"].split(",")
    d = L.Daemon(args.daemon, config=config("node-b", endpoints))
    try:
        d.start()
        res.check(wait_for(lambda: record("node-b")[0] is not None, 15), "node-b never registered")
        d.kill()
        t0 = time.monotonic()
        res.check(record("node-b")[0] is not None, "the record went at once with a SIGKILL (no lease left to expire?)")
        gone = wait_for(lambda: record("node-b")[0] is None, 10)
        res.note("record gone %.1f s after the SIGKILL (TTL 3)" % (time.monotonic() - t0))
        res.check(gone, "the record outlived its lease by 10 s")
    finally:
        d.cleanup()


def case_unreachable(args, res):
    d = L.Daemon(args.daemon, config=config("node-c", [dead_port()]))
    try:
        d.start()
        fh = wait_for(lambda: (lambda f: f if f.get("state") == "unavailable" else None)(fleet_health(d)), 15)
        res.note("/health.fleet: %s" % (fh or fleet_health(d)))
        res.eq("/health.fleet.state", (fh or {}).get("state"), "unavailable")
        res.check("refused" in ((fh or {}).get("lastError") or "").lower() or
                  "connect" in ((fh or {}).get("lastError") or "").lower(),
                  "lastError does not say why: %r" % (fh or {}).get("lastError"))
        res.eq("a run while etcd is away", run_true(d), (200, "ok\n"))
        res.check("Fleet:" in d.log_text(), "no 'Fleet:' warning in the log")
    finally:
        d.cleanup()


def case_misconfigured(args, res):
    d = L.Daemon(args.daemon, config=config("node-d", ["x"]).replace("Etcd=x\n", ""))
    try:
        p = subprocess.run([d.path, "--listen", "127.0.0.1:%d" % d._pick_port(), "--config", d.conf,
                            "--log-target", "console"], env=d.env(), capture_output=True, text=True, timeout=30)
        res.note("exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
        res.eq("exit status", p.returncode, 78)
        res.check("[Fleet] Enable=yes needs Etcd=" in p.stderr, "the reason is not given: %r" % p.stderr[-300:])
    finally:
        d.cleanup()


CASES = [("registered", case_registered), ("killed", case_killed), ("unreachable", case_unreachable),
         ("misconfigured", case_misconfigured)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    args = ap.parse_args()
    if not os.environ.get("ETCD_ENDPOINTS"):
        print("Bail out! ETCD_ENDPOINTS is not set: run under tests/helpers/etcd-cluster.py")
        return 1
    print("1..%d" % len(CASES))
    failed = 0
    for i, (name, fn) in enumerate(CASES, 1):
        res = T.Result(name)
        try:
            fn(args, res)
        except Exception:
            res.fail("exception: %s" % traceback.format_exc())
        print("%s %d - %s" % ("ok" if res.ok else "not ok", i, name))
        for line in ["FAIL: " + f for f in res.failures] + res.notes:
            print("#   " + line.replace("\n", "\n#   "))
        failed += not res.ok
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
