#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Security posture of sandbox-runnerd started by hand, driven only through the HTTP API.

    /usr/bin/python3 tests/integration/posture.py --daemon BUILD/src/sandbox-runnerd [--verbose]
                                                  [--dialect sciencediscovery]

Run as root. Starts the daemon twice without systemd (the private-systemd suites cover the
service): once as root, once as an unprivileged user (nobody), each on its own 127.0.0.1 port
and temp dir, and checks from inside sandboxes and from outside:
  - no global sysctl is writable (each is written back with its own value: nothing changes),
    /proc/sysrq-trigger, /proc/irq and /proc/bus are not writable;
  - the payload's processes (and the daemon's) have a non-root host uid, read from
    /proc/PID/status outside the sandbox;
  - a fork loop is stopped by the tasks limit, a memory hog by the memory limit;
  - the answer carries the accounting of the mechanism in use (/health.scopes.mechanism:
    'cgroup' for the root start, 'rlimit' for the user start) and names it;
  - started as root, the daemon's own cgroups are gone after the runs;
  - started as root with a SandboxUser= that does not exist, executions are refused (503) and
    /health says why.
Prints TAP; exits 1 on any failure. Bounded (< 120 s); traffic only to 127.0.0.1.

--dialect sciencediscovery: each daemon also listens in the ScienceDiscovery dialect (docs/api.md
section 15) and every payload goes through it (their signed /execute-shell, and /shell-executions
for the managed run; "set +e" first, their bash being -euo pipefail). Their requests carry no
limits, so the daemons' configured ones are the fork loop's and the hog's (TasksMax=32,
MemoryMax=64M); their answers carry no accounting, so what is checked there is what the payload
saw. /health is still read on our own listener.
"""

import argparse
import json
import os
import pwd
import secrets
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import sd_lib as S                                                         # noqa: E402
from execute_lib import Result, now, trunc                                 # noqa: E402

CONFIG = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=30
"""

# Global sysctls written back with their current value (never another one).
SYSCTLS = ["kernel/core_pattern", "vm/swappiness", "kernel/sysrq", "kernel/pid_max", "fs/file-max"]

SYSCTL_SCRIPT = r"""
for s in %s; do
  f=/proc/sys/$s
  [ -e "$f" ] || { echo "$s absent"; continue; }
  v=$(cat "$f")
  if (printf '%%s\n' "$v" > "$f") 2>/dev/null; then echo "$s WRITABLE"; else echo "$s refused"; fi
done
for f in /proc/sysrq-trigger /proc/irq/default_smp_affinity /proc/bus/pci/devices; do
  if [ ! -e "$f" ]; then echo "$f absent"; continue; fi
  if (: >> "$f") 2>/dev/null; then echo "$f WRITABLE"; else echo "$f refused"; fi
done
grep -E ' /proc/(sys|irq|bus) ' /proc/self/mountinfo | awk '{print $5, $6}'
""" % " ".join(SYSCTLS)

FORK_LOOP = r"""
import os, sys, time, errno
n, err = 0, None
kids = []
for i in range(2000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    kids.append(pid)
    n += 1
print("forked", n, "errno", err)
for k in kids:
    os.kill(k, 9)
for k in kids:
    os.waitpid(k, 0)
"""

MEMORY_HOG = r"""
import sys
chunks = []
try:
    for i in range(64):
        chunks.append(bytearray(16 << 20))     # touched: bytearray zero-fills
        print("allocated", (i + 1) * 16, "MiB", flush=True)
except MemoryError:
    print("MemoryError", flush=True)
    sys.exit(3)
"""


SD_LIMITS = "TasksMax=32\nMemoryMax=64M\n"
DIALECT = "ours"                # main(): --dialect


class Posture:
    """One daemon started by hand; ids: None = the test's own (root), else (uid, gid)."""

    def __init__(self, path, name, run_as, config=CONFIG):
        self.name = name
        self.sd = DIALECT == "sciencediscovery"
        if self.sd:
            self.d = S.SdDaemon(path, run_as=run_as, config=config.replace("[Execution]\n", "[Execution]\n" + SD_LIMITS))
            self.client = S.SdClient(self.d)
        else:
            self.d = L.Daemon(path, run_as=run_as, config=config)
        self.seq = 0
        self.ids = []
        self.health = None

    def start(self):
        r = self.d.start()
        self.health = r.json()
        return r

    def new_id(self):
        self.seq += 1
        i = "%s-%d-%s" % (self.name, self.seq, secrets.token_hex(4))
        self.ids.append(i)
        return i

    def sd_execute(self, command, timeout, managed):
        """Their /execute-shell (or /shell-executions), the answer in our terms."""
        key = "ws-" + self.name
        if managed:
            body = self.client.execute_body("set +e\n" + command, key, executionId=self.new_id())
            body.pop("language")
            return self.client.request("POST", "/shell-executions", body, signed=True, timeout=timeout)
        r = self.client.execute_shell("set +e\n" + command, key, timeout=timeout, executionId=self.new_id())
        j = r.json()
        if r.status == 200 and isinstance(j, dict):
            # Only what the payload saw: status, exit code, output.
            j = {"status": "exited", "exitCode": j.get("exitCode"), "stdout": j.get("stdout"), "stderr": j.get("stderr")}
            r = L.Response(r.status, r.reason, r.headers, json.dumps(j).encode(), r.elapsed)
        return r

    def execute(self, command, limits=None, timeout=40.0, managed=False):
        if self.sd:
            return self.sd_execute(command, timeout, managed)
        path = "/shell-executions" if managed else "/execute-shell"
        body = {"executionId": self.new_id(), "workspaceId": "ws-" + self.name, "command": command}
        if limits:
            body["limits"] = limits
        raw = json.dumps(body).encode()
        ts = int(time.time())
        h = [("Authorization", "Bearer " + self.d.token), ("Content-Type", "application/json"),
             ("X-Sandbox-Timestamp", str(ts)),
             ("X-Sandbox-Signature", L.signature(self.d.key, ts, "POST", path, raw))]
        return L.http(self.d.port, "POST", path, h, raw, timeout=timeout)

    def get(self, path):
        return L.http(self.d.port, "GET", path, [("Authorization", "Bearer " + self.d.token)], timeout=10.0)


def status_ids(pid):
    """(uid line, gid line) of /proc/PID/status, or None if it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    uid = [ln for ln in lines if ln.startswith("Uid:")]
    gid = [ln for ln in lines if ln.startswith("Gid:")]
    if not uid or not gid:
        return None
    return [int(x) for x in uid[0].split()[1:]], [int(x) for x in gid[0].split()[1:]]


# --------------------------------------------------------------------------------------------
# Cases (each gets the posture, its expected host uid and mechanism, and a Result)

def case_health(p, want_uid, want_mech, res):
    h = p.health or {}
    sb, sc = h.get("sandbox", {}), h.get("scopes", {})
    res.eq("/health.sandbox.executions", sb.get("executions"), True)
    res.eq("/health.sandbox.hostUid", sb.get("hostUid"), want_uid)
    res.eq("/health.scopes.mechanism", sc.get("mechanism"), want_mech)
    ids = status_ids(p.d.pid)
    res.check(ids is not None and ids[0] == [want_uid] * 4 and 0 not in ids[1],
              "the daemon's own ids (real, effective, saved, fs) are not all %d: %r" % (want_uid, ids))
    res.note("health: %s" % trunc(json.dumps(h), 600))


def case_sysctls(p, want_uid, want_mech, res):
    r = p.execute(SYSCTL_SCRIPT)
    j = r.json() or {}
    out = text(j, "stdout")
    res.eq("status of the sysctl write-back run", (r.status, j.get("status")), (200, "exited"))
    res.check("WRITABLE" not in out, "something host-wide is writable from the sandbox:\n%s" % out)
    refused = [ln for ln in out.splitlines() if ln.endswith(" refused")]
    res.check(len([ln for ln in refused if ln.split()[0] in SYSCTLS]) >= 3,
              "fewer than 3 global sysctls were tried and refused:\n%s" % out)
    res.check("/proc/sys ro," in out or "/proc/sys ro" in out,
              "/proc/sys is not a read-only mount in the sandbox:\n%s" % out)
    res.note(out)


def case_host_uid(p, want_uid, want_mech, res):
    mark = "31.%d" % (secrets.randbelow(10 ** 6) + 10 ** 6)
    r = p.execute("sleep %s" % mark, managed=True)
    res.check(r.status in (200, 201, 202), "the managed run was not accepted: %s" % r.brief())
    found = []
    deadline = now() + 10
    while now() < deadline and not found:
        for pid in L.all_pids():
            cl = L.cmdline(pid) or []
            if cl[:2] == [b"sleep", mark.encode()]:
                found.append(pid)
        time.sleep(0.1)
    res.check(found, "the payload 'sleep %s' was not seen from outside" % mark)
    for pid in found:
        ids = status_ids(pid)
        res.check(ids is not None and 0 not in ids[0] and 0 not in ids[1],
                  "the payload (pid %d) has a root host uid or gid: %r" % (pid, ids))
        res.check(ids is not None and ids[0] == [want_uid] * 4,
                  "the payload (pid %d) runs as host uid %r, expected %d" % (pid, ids and ids[0], want_uid))
        # Its ancestors up to the daemon (bwrap, the keeper) too.
        q, seen = pid, 0
        while q > 1 and q != p.d.pid and seen < 10:
            st = L.proc_stat(q)
            if st is None:
                break
            ids = status_ids(q)
            res.check(ids is not None and 0 not in ids[0],
                      "an ancestor of the payload (%s) runs as host root: %r" % (L.describe_pid(q), ids))
            q, seen = st[2], seen + 1
        os.kill(pid, 9)


def text(j, stream):
    v = j.get(stream)
    if isinstance(v, dict):
        v = v.get("text")
    return v if isinstance(v, str) else ""


def answer(r):
    j = r.json() or {}
    return j, j.get("resources") or {}, j.get("limits") or {}


def case_fork_loop(p, want_uid, want_mech, res):
    r = p.execute("python3 -c '%s'" % FORK_LOOP.replace("'", "'\\''"), limits={"tasks": 32})
    j, rs, lim = answer(r)
    out = text(j, "stdout")
    res.eq("HTTP status", r.status, 200)
    words = out.split()
    forked = int(words[1]) if len(words) >= 4 and words[0] == "forked" else None
    res.check(forked is not None and 1 <= forked <= 32 + 3,
              "the fork loop was not stopped near the tasks limit of 32: %r (stderr %r)" %
              (out, trunc(str(j.get("stderr")), 300)))
    res.check(len(words) >= 4 and words[3] == "11", "fork did not fail with EAGAIN: %r" % out)
    if p.sd:
        return res.note("their answer: %s" % trunc(json.dumps(j), 700))
    res.eq("limits.tasks", lim.get("tasks"), 32)
    res.eq("limits.enforcedBy", lim.get("enforcedBy"), {"cgroup": "cgroup", "rlimit": "rlimit"}[want_mech])
    if want_mech == "cgroup":
        res.check("tasks" in (rs.get("limitsHit") or []), "resources.limitsHit lacks 'tasks': %r" % rs)
        res.check(isinstance(rs.get("tasksPeak"), int) and 30 <= rs["tasksPeak"] <= 35,
                  "resources.tasksPeak is not the limit: %r" % rs)
        res.check(isinstance(rs.get("cpuUsageNsec"), int) and rs["cpuUsageNsec"] > 0,
                  "no CPU accounting: %r" % rs)
        res.check(isinstance(rs.get("memoryPeakBytes"), int) and rs["memoryPeakBytes"] > 0,
                  "no memory accounting: %r" % rs)
    res.note("answer: %s" % trunc(json.dumps(j), 700))


def case_memory_hog(p, want_uid, want_mech, res):
    r = p.execute("python3 -c '%s'" % MEMORY_HOG, limits={"memoryBytes": 64 << 20})
    j, rs, lim = answer(r)
    out = text(j, "stdout")
    res.eq("HTTP status", r.status, 200)
    got = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("allocated")]
    res.check(not got or max(got) <= 64, "the hog got past the 64 MiB limit: %r" % out)
    if p.sd:
        # Killed by the cgroup's limit (their exit code 1 for a signal), or refused by RLIMIT_AS.
        res.check(j.get("exitCode") == (1 if want_mech == "cgroup" else 3) and (want_mech == "cgroup" or "MemoryError" in out),
                  "the hog was not stopped: %r, %r" % (j.get("exitCode"), out))
        return res.note("their answer: %s" % trunc(json.dumps(j), 700))
    res.eq("limits.memoryBytes", lim.get("memoryBytes"), 64 << 20)
    if want_mech == "cgroup":
        res.eq("status", j.get("status"), "memory_limit")
        res.check("memory" in (rs.get("limitsHit") or []), "resources.limitsHit lacks 'memory': %r" % rs)
        res.check(isinstance(rs.get("memoryPeakBytes"), int) and
                  (48 << 20) <= rs["memoryPeakBytes"] <= (64 << 20),
                  "resources.memoryPeakBytes is not near the limit: %r" % rs)
    else:
        # RLIMIT_AS: the allocation fails inside the payload.
        res.check("MemoryError" in out and j.get("exitCode") == 3,
                  "the hog was not refused memory (RLIMIT_AS): %r, %r" % (j.get("status"), out))
    res.note("answer: %s" % trunc(json.dumps(j), 700))


def case_cgroups_gone(p, want_uid, want_mech, res):
    if want_mech != "cgroup":
        # Nothing of ours to look at: the daemon has no cgroups (say why, from /health).
        res.check(p.health.get("scopes", {}).get("cgroupReason"),
                  "/health.scopes has no cgroupReason for the rlimit mechanism: %r" % p.health.get("scopes"))
        return
    desc = p.health["scopes"].get("cgroup", "")
    root = desc.split(" under ", 1)[1] if " under " in desc else None
    res.check(root and os.path.isdir(root), "/health.scopes.cgroup names no directory: %r" % desc)
    if not root:
        return
    st = os.stat(root)
    res.eq("owner of the daemon's cgroup", st.st_uid, want_uid)
    ws = p.d.workspace_path("ws-" + p.name)
    res.check(os.path.isdir(ws) and os.stat(ws).st_uid == want_uid,
              "the workspace is not owned by uid %d: %r" % (want_uid, os.path.isdir(ws) and os.stat(ws).st_uid))

    mine = "x-%d-k" % p.d.pid

    def ours_left(keepers):
        """Our cgroups that should be gone: every run's, and those of our keepers that are no
        longer there: a keeper started ahead is in x-<daemon pid>-k<pid>, and its run uses that
        one; a keeper started for a run puts it in x-<execution id>. (Other daemons started as
        root, by a suite running beside this one, share the directory.)"""
        names = set(os.listdir(root))
        left = ["x-" + i for i in p.ids if "x-" + i in names]
        for n in names:
            if n.startswith(mine) and n[len(mine):].isdigit():
                pid = int(n[len(mine):])
                if pid in keepers or pid not in L.children(p.d.pid):
                    left.append(n)
        return sorted(left)

    # While it runs: only the cgroups of the keepers started ahead (moved in while
    # the daemon was idle) are there; every run's is gone once its keeper is.
    left = None
    deadline = now() + 10
    while now() < deadline:
        left = ours_left(set())
        if not left:
            break
        time.sleep(0.1)
    res.check(not left, "per-execution cgroups left behind under %s: %r" % (root, left))
    # Stopped with SIGTERM, the daemon leaves none at all (its idle keepers' go with them, and
    # those of the sandboxes built ahead: x-<daemon pid>-p<keeper pid>).
    L.wait_prebuilt_settled(p.d.port)
    pre = L.prebuilt_sandboxes(p.d.pid)
    res.check(all(os.path.isdir(os.path.join(root, "x-%d-p%d" % (p.d.pid, k))) for k in pre),
              "the sandboxes built ahead %r are not each in a cgroup of their own" % sorted(pre))
    idle = {pid for pid in L.children(p.d.pid)
            if (L.cmdline(pid) or [b""])[0].endswith(b"sandbox-runner-keeper") and pid not in pre}
    res.check(idle and all(os.path.isdir(os.path.join(root, "%s%d" % (mine, pid))) for pid in idle),
              "the idle keepers %r are not each in a cgroup of their own (%s<pid>): %r" %
              (sorted(idle), mine, sorted(os.listdir(root))))
    rc, _ = p.d.terminate()
    res.eq("exit status after SIGTERM", rc, 0)
    left = ours_left(idle) + sorted(n for n in os.listdir(root) if n.startswith("x-%d-p" % p.d.pid))
    res.check(not left, "cgroups left behind after SIGTERM under %s: %r" % (root, left))


CASES = [
    ("health names the host uid and the limits mechanism", case_health),
    ("no global sysctl or /proc knob is writable", case_sysctls),
    ("the payload and its ancestors have a non-root host uid", case_host_uid),
    ("a fork loop is stopped by the tasks limit", case_fork_loop),
    ("a memory hog is stopped by the memory limit", case_memory_hog),
    ("per-execution cgroups removed; state owned by the sandbox user", case_cgroups_gone),
]


def refused_case(path, res):
    """Root with a SandboxUser= that does not exist: up, but executions refused."""
    p = Posture(path, "nouser", None, CONFIG + "SandboxUser=no-such-user-%s\n" % secrets.token_hex(3))
    try:
        p.start()
        sb = p.health.get("sandbox", {})
        res.eq("/health.sandbox.executions", sb.get("executions"), False)
        res.check("does not exist" in (sb.get("executionsRefused") or ""),
                  "/health does not say why: %r" % sb)
        r = p.execute("true")
        if p.sd:
            res.eq("their POST /execute-shell", r.status, 400)
        else:
            res.eq("POST /execute-shell", (r.status, r.error_code()), (503, "sandbox_unavailable"))
        res.check(b"does not exist" in r.body, "the refusal does not say why: %s" % r.brief())
        res.check("no-such-user" in p.d.log_tail(), "the log does not name the user")
    finally:
        p.d.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--dialect", choices=("ours", "sciencediscovery"), default="ours",
                    help="sciencediscovery: every payload through that dialect's listener")
    args = ap.parse_args()
    global DIALECT
    DIALECT = args.dialect
    if os.geteuid() != 0:
        print("1..0 # the posture test starts the daemon as root and as another user: run it as root")
        return 1

    try:
        sr = pwd.getpwnam("sandbox-runner")
    except KeyError:
        print("Bail out! no user 'sandbox-runner' (tests/setup.sh creates it with the sysusers file)")
        return 1
    nobody = pwd.getpwnam("nobody")
    # Without systemd as PID 1 here, a root start gets cgroups of its own; a user start rlimits.
    postures = [("root", None, sr.pw_uid, "cgroup"), ("user", (nobody.pw_uid, nobody.pw_gid), nobody.pw_uid, "rlimit")]
    tap = L.Tap(sys.stdout)
    print("1..%d" % (len(CASES) * len(postures) + 1), flush=True)
    t0 = now()
    for name, run_as, want_uid, want_mech in postures:
        p = Posture(args.daemon, name, run_as)
        try:
            try:
                p.start()
                sys.stdout.write("# %s: daemon pid %d on port %d\n" % (name, p.d.pid, p.d.port))
                err = None
            except (L.DaemonError, OSError) as e:
                err = e
            for cname, fn in CASES:
                res = Result("%s start: %s" % (name, cname))
                if err is not None:
                    res.fail("daemon did not start: %s" % err)
                else:
                    try:
                        fn(p, want_uid, want_mech, res)
                    except Exception:                          # noqa: BLE001
                        res.fail("test error:\n" + traceback.format_exc())
                    if not p.d.alive() and fn is not case_cgroups_gone:
                        res.fail("the daemon died: %s" % p.d.log_tail(1500))
                if not res.ok:
                    res.note("daemon log tail:\n" + p.d.log_tail(2000))
                tap.emit(res, verbose=args.verbose)
        finally:
            p.d.cleanup()
    res = Result("root start without its SandboxUser=: executions refused, /health says why")
    try:
        refused_case(args.daemon, res)
    except Exception:                                          # noqa: BLE001
        res.fail("test error:\n" + traceback.format_exc())
    tap.emit(res, verbose=args.verbose)
    print("# %d failed, %.1fs" % (len(tap.failed), now() - t0))
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
