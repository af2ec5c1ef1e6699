#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sandboxes built ahead of their runs (issue 23; docs/architecture.md, "Sandboxes built ahead"),
against a daemon started by hand with [Execution] Prebuilt=2 (as an unprivileged user: the default
--run-as; or as root: --run-as self):

  - compare-shell, compare-code (first): what a payload sees, cold (the first run of its shape:
    `"sandbox": "cold"`) and prebuilt (the next: "prebuilt"), through /execute-shell and
    /execute (python with its code file): /proc/self/status (ids, capabilities, NoNewPrivs,
    seccomp, signals), the mounts (mount point, root, options, file system; no ids), the
    environment, the directory, the open fds, the limits, the hostname, pid 1's command line,
    its own pid and parent, the root's and /.sandbox's entries, the code file's mode, owner and
    content; equal, except the namespaces' inode numbers, which differ from run to run, pid 1's
    command line (bwrap's own: the same program, no workspace named) and the code file's mount
    (same point and options; its source is the run's file, bound after the workspace);
  - pool: /health's sandbox.prebuilt.shapes.shell.ready reaches 2, max 2, available; a run then
    says "prebuilt";
  - fresh: four prebuilt runs in a row, each in namespaces none of which is the host's, none sees
    a file another left in /tmp, nor a process another left behind (namespaces are not compared
    between runs: the kernel reuses the inode number of a freed one);
  - workspaces: a prebuilt run sees its own workspace only (another's marker is not there, its
    own is) and exactly one mount at /workspace; its writes land in its workspace;
  - stdin, cwd, env, exit: a prebuilt run gets its stdin, its cwd in the workspace, its env
    entries, its exit code and stderr, an unknown command's error as a cold run does;
  - keeper-killed: a waiting sandbox whose keeper is killed is discarded (journal: warning) and
    replaced, and runs go on;
  - stop: at the daemon's stop no sandbox built ahead is left (no process with the exec helper);
  - killed: a second daemon, its pool filled, is killed (SIGKILL): its sandboxes built ahead die
    with their keepers (parent-death signals), none is left;
  - burst: a third daemon with PrebuiltBurst=6 and PrebuiltBurstKeepSec=5: after a burst of 6 runs of a shape (back to back),
    its pool grows to 6 (/health target 6, 6 ready), and the next burst of 6 is served by it all;
    5 s later, the daemon idle, the target is back at 2 and the 4 beyond it are gone.

    prebuilt.py --daemon build/src/sandbox-runnerd [--run-as self] [--only NAME] [--verbose]"""

import argparse
import json
import os
import secrets
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import testlib as T             # noqa: E402

CONFIG = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=30
Prebuilt=2
[Quota]
MaxOutputBytes=256K
"""

# What a payload sees, as JSON on stdout (python; the shell shape runs it through sh).
PROBE = r'''
import json, os, resource, socket, stat
R = {}
st = {}
for ln in open('/proc/self/status'):
    k, _, v = ln.partition(':')
    if k in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp',
             'Seccomp_filters', 'SigBlk', 'SigIgn', 'SigCgt', 'Umask', 'NSpid'):
        st[k] = v.split()
R['status'] = st
mounts = []
for ln in open('/proc/self/mountinfo'):
    f = ln.split()
    sep = f.index('-')
    mounts.append([f[4], f[3], f[5], f[6:sep], f[sep + 1], f[sep + 2], f[sep + 3]])
R['mounts'] = mounts
R['ns'] = {n: os.readlink('/proc/self/ns/' + n) for n in sorted(os.listdir('/proc/self/ns'))}
R['env'] = dict(os.environ)
R['cwd'] = os.getcwd()
R['fds'] = sorted(int(x) for x in os.listdir('/proc/self/fd'))
R['limits'] = [ln.rstrip() for ln in open('/proc/self/limits')]
R['hostname'] = socket.gethostname()
R['pid1'] = open('/proc/1/cmdline', 'rb').read().decode('latin-1')
R['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
R['root'] = sorted(os.listdir('/'))
R['sandbox_dir'] = sorted(os.listdir('/.sandbox')) if os.path.isdir('/.sandbox') else None
try:
    s = os.stat('/.sandbox/code')
    R['code'] = [stat.filemode(s.st_mode), s.st_uid, s.st_gid, s.st_size, open('/.sandbox/code').read()[:64]]
except OSError as e:
    R['code'] = str(e)
R['workspace'] = [stat.filemode(os.stat('/workspace').st_mode), os.stat('/workspace').st_uid]
R['ids'] = [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()]
print(json.dumps(R))
'''


class Ctx:
    def __init__(self, d):
        self.d = d
        self.n = 0

    def post(self, path, body, timeout=60.0):
        self.n += 1
        b = dict(body)
        b.setdefault("executionId", "pb-%d-%s" % (self.n, secrets.token_hex(4)))
        b.setdefault("workspaceId", "pb-main")
        raw = json.dumps(b).encode()
        ts = int(time.time())
        h = [("Authorization", "Bearer " + self.d.token), ("Content-Type", "application/json"),
             ("X-Sandbox-Timestamp", str(ts)), ("X-Sandbox-Signature", L.signature(self.d.key, ts, "POST", path, raw))]
        r = L.http(self.d.port, "POST", path, h, raw, timeout=timeout)
        return r.json() or {}

    def shell(self, command, **kw):
        return self.post("/execute-shell", dict({"command": command}, **kw))

    def code(self, code, **kw):
        return self.post("/execute", dict({"language": "python", "code": code}, **kw))

    def health(self):
        h = self.d.health(timeout=5.0)
        return (h.json() or {}) if h is not None else {}

    def ready(self, shape, want=2, limit=20.0):
        """Wait until @want sandboxes of @shape are ready; return how many are."""
        deadline, n = time.monotonic() + limit, 0
        while time.monotonic() < deadline:
            n = (((self.health().get("sandbox") or {}).get("prebuilt") or {}).get("shapes") or {}).get(shape, {}).get(
                "ready", 0)
            if n >= want:
                break
            time.sleep(0.1)
        return n

    def probe(self, res, how, label):
        a = self.shell("python3 -c '%s'" % PROBE.replace("'", "'\"'\"'")) if how == "shell" else self.code(PROBE)
        try:
            return a.get("sandbox"), json.loads(a.get("stdout") or "")
        except ValueError:
            res.fail("%s: the probe gave no JSON: %s" % (label, L.trunc(json.dumps(a), 800)))
            return a.get("sandbox"), None


CODE = "/.sandbox/code"


def host_shared(ns):
    """The names of the namespaces of @ns ({name: "type:[inode]"}) that are this test's own (the
    host's), the time namespaces aside (bwrap makes none)."""
    return sorted(n for n, v in ns.items() if not n.startswith("time") and
                  os.path.exists("/proc/self/ns/" + n) and os.readlink("/proc/self/ns/" + n) == v)
CASES, case = T.case_registry()


def compare(ctx, res, how):
    shape = "shell" if how == "shell" else "code"
    # Cold: the first run of the shape in this daemon (these cases come first).
    kind_c, cold = ctx.probe(res, how, "cold")
    res.eq("the first probe's path", kind_c, "cold")
    res.check(ctx.ready(shape) == 2, "no %s sandbox got ready" % shape)
    kind_p, pre = ctx.probe(res, how, "prebuilt")
    res.eq("the second probe's path", kind_p, "prebuilt")
    if cold is None or pre is None:
        return
    for k in sorted(set(cold) | set(pre)):
        if k == "ns":
            # Every namespace bwrap makes is new (the time namespace is the host's in both). Not
            # compared between the runs: the kernel reuses a freed namespace's inode number.
            for who, r in (("cold", cold), ("prebuilt", pre)):
                res.eq("namespaces the %s run shares with the host" % who, host_shared(r["ns"]), [])
            res.eq("the namespaces each run has", sorted(pre["ns"]), sorted(cold["ns"]))
            continue
        if k == "mounts":
            # Mount ids differ. The code file is the known difference: bwrap's --ro-bind-data file
            # on its own tmpfs (cold), the run's file on the daemon's runtime directory bound
            # after the workspace (prebuilt); its point and options are the same.
            def norm(ms):
                return sorted(tuple(m[:1] + m[2:]) if m[0] != CODE else (m[0], m[2]) for m in ms)
            a, b = norm(cold[k]), norm(pre[k])
            res.check(a == b, "mounts differ: only cold %s, only prebuilt %s" % (
                [m for m in a if m not in b], [m for m in b if m not in a]))
            order = [m[0] for m in cold[k] if m[0] != CODE] == [m[0] for m in pre[k] if m[0] != CODE]
            res.check(order, "the mounts come in another order")
            continue
        if k == "pid1":
            # bwrap's own command line: the same program; a prebuilt one names no workspace.
            res.eq("pid 1's program", pre[k].split("\0")[0], cold[k].split("\0")[0])
            res.check("/workspaces/" not in pre[k], "pid 1's command line names a host workspace: %r" % pre[k])
            continue
        res.eq(k, pre.get(k), cold.get(k))
    res.note("cold and prebuilt agree on: %s" % ", ".join(sorted(k for k in cold if cold[k] == pre.get(k))))


@case("compare-shell")
def c_compare_shell(ctx, res):
    compare(ctx, res, "shell")


@case("compare-code")
def c_compare_code(ctx, res):
    compare(ctx, res, "code")


@case("pool")
def c_pool(ctx, res):
    # The shape was wanted since its first (cold) run in compare-shell.
    res.eq("sandboxes of the shell shape ready", ctx.ready("shell"), 2)
    p = (ctx.health().get("sandbox") or {}).get("prebuilt") or {}
    res.eq("/health.sandbox.prebuilt max, available", (p.get("max"), p.get("available")), (2, True))
    # What an idle one costs: the PSS of its keeper, bwrap's two processes and the exec helper
    # (measured about 0.8 MiB; more than 64 KiB and less than 64 MiB, else the reading is wrong).
    mem = ((p.get("shapes") or {}).get("shell") or {}).get("memoryPerIdleBytes")
    res.note("memory per idle sandbox (PSS): %r bytes" % mem)
    res.check(isinstance(mem, int) and (64 << 10) < mem < (64 << 20),
              "/health.sandbox.prebuilt.shapes.shell.memoryPerIdleBytes is %r" % mem)
    a = ctx.shell("true")
    res.eq("the next run", (a.get("status"), a.get("sandbox")), ("exited", "prebuilt"))


@case("fresh")
def c_fresh(ctx, res):
    kinds = []
    for i in range(4):
        ctx.ready("shell", 1)
        a = ctx.shell("echo tmp: $(ls /tmp); echo sleepers: $(cat /proc/[0-9]*/comm | grep -c '^sleep$'); "
                      "for n in pid mnt net user ipc uts cgroup; do echo ns: $(readlink /proc/self/ns/$n); done; "
                      "touch /tmp/left-%d; (sleep 6%d &); true" % (i, i))
        kinds.append(a.get("sandbox"))
        lines = (a.get("stdout") or "").splitlines()
        res.eq("run %d: /tmp" % i, [x for x in lines if x.startswith("tmp:")], ["tmp:"])
        res.eq("run %d: processes left by earlier runs" % i, [x for x in lines if x.startswith("sleepers:")],
               ["sleepers: 0"])
        ns = [x[4:] for x in lines if x.startswith("ns: ")]
        res.eq("run %d: namespaces read" % i, len(ns), 7)
        mine = {os.readlink("/proc/self/ns/" + n) for n in os.listdir("/proc/self/ns")}
        res.eq("run %d: namespaces shared with the host" % i, [n for n in ns if n in mine], [])
    res.check(kinds.count("prebuilt") >= 3, "runs served by the pool: %s" % kinds)


@case("workspaces")
def c_workspaces(ctx, res):
    mark = secrets.token_hex(6)
    ctx.shell("echo %s > /workspace/other-%s" % (mark, mark), workspaceId="pb-other")
    ctx.ready("shell", 1)
    a = ctx.shell("ls -a /workspace; grep -c ' /workspace ' /proc/self/mountinfo; echo mine > /workspace/mine-%s" % mark,
                  workspaceId="pb-mine")
    res.eq("served by", a.get("sandbox"), "prebuilt")
    out = (a.get("stdout") or "").split()
    res.check(("other-" + mark) not in out, "the other workspace's file is visible: %s" % out)
    res.eq("mounts at /workspace", out[-1:] if out else out, ["1"])
    res.check(os.path.exists(os.path.join(ctx.d.workspace_path("pb-mine"), "mine-" + mark)),
              "the run's write is not in its workspace")
    res.check(not os.path.exists(os.path.join(ctx.d.workspace_path("pb-other"), "mine-" + mark)),
              "the run's write went to another workspace")


@case("stdin-cwd-env-exit")
def c_request(ctx, res):
    ctx.shell("mkdir -p sub/dir", workspaceId="pb-req")
    ctx.ready("shell", 1)
    a = ctx.shell("cat; pwd; echo \"$FOO\"; echo oops >&2; exit 3", workspaceId="pb-req", cwd="sub/dir",
                  stdin="from stdin\n", env={"FOO": "bar baz"})
    res.eq("served by", a.get("sandbox"), "prebuilt")
    res.eq("exit, stdout, stderr", (a.get("status"), a.get("exitCode"), a.get("stdout"), a.get("stderr")),
           ("exited", 3, "from stdin\n/workspace/sub/dir\nbar baz\n", "oops\n"))
    ctx.ready("shell", 1)
    p = ctx.post("/execute", {"argv": ["no-such-command-here"], "workspaceId": "pb-req"})
    ctx.ready("shell", 1)
    ctx.shell("true")
    ctx.shell("true")
    c = ctx.post("/execute", {"argv": ["no-such-command-here"], "workspaceId": "pb-req"})
    res.note("prebuilt: %s / cold: %s" % (p.get("sandbox"), c.get("sandbox")))
    if p.get("sandbox") != c.get("sandbox"):
        res.eq("an unknown command: exit and stderr", (p.get("exitCode"), p.get("stderr")),
               (c.get("exitCode"), c.get("stderr")))


def helper_sandboxes():
    """Pids of bwrap processes running the exec helper (sandboxes waiting), and their keepers."""
    out = []
    for pid in L.all_pids():
        argv = L.cmdline(pid) or []
        if argv and argv[0].endswith(b"bwrap") and b"/proc/self/fd/11" in argv:
            st = L.proc_stat(pid)
            out.append((pid, st[2] if st else None))
    return out


@case("keeper-killed")
def c_keeper_killed(ctx, res):
    # the shell shape's target: Prebuilt=2, or more once the cases before made a burst of it
    target = (((ctx.health().get("sandbox") or {}).get("prebuilt") or {}).get("shapes") or {}).get(
        "shell", {}).get("target", 2)
    ctx.ready("shell", target)
    mine = [(b, k) for b, k in helper_sandboxes() if k and k in L.descendants(ctx.d.pid)]
    if not res.check(mine, "no waiting sandbox found below the daemon"):
        return
    os.kill(mine[0][1], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while "is discarded" not in ctx.d.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    res.check("is discarded" in ctx.d.log_text(), "no log entry about the discarded sandbox")
    deadline, parents, n = time.monotonic() + 20, [], 0
    while time.monotonic() < deadline:
        # the parents of the waiting sandboxes' bwrap processes (keepers, and bwrap for its pid 1)
        parents = [k for b, k in helper_sandboxes() if k and k in L.descendants(ctx.d.pid)]
        n = ctx.ready("shell", target, limit=1.0)
        if mine[0][1] not in parents and n >= target:
            break
        time.sleep(0.1)
    res.note("shell target %d, %d ready" % (target, n))
    res.check(mine[0][1] not in parents and n >= target,
              "the pool was not refilled to %d without the killed keeper %d: %d ready" % (target, mine[0][1], n))
    a = ctx.shell("echo ok")
    res.eq("a run afterwards", (a.get("stdout"), a.get("sandbox")), ("ok\n", "prebuilt"))


CASES_LAST = [("stop", None), ("killed", None), ("burst", None)]


def waiting_below(d):
    return [b for b, k in helper_sandboxes() if k and k in L.descendants(d.pid)]


def gone_within(pids, seconds):
    """The pids of @pids still alive (not zombies) after up to @seconds."""
    deadline = time.monotonic() + seconds
    while True:
        left = [b for b in pids if (L.proc_stat(b) or ("", "Z"))[1] != "Z"]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def case_burst(args, res):
    """PrebuiltBurst=: the pool of a shape grows to the size of its last burst."""
    d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=T.resolve_run_as(args.run_as),
                 config=CONFIG.replace("Prebuilt=2\n", "Prebuilt=2\nPrebuiltBurst=6\nPrebuiltBurstKeepSec=5\n"))
    try:
        d.start()
        ctx = Ctx(d)
        first = [ctx.shell("true").get("sandbox") for _ in range(6)]
        res.note("first burst: %s" % first)
        res.eq("the first burst's first run (nothing wanted yet)", first[0], "cold")
        res.eq("sandboxes of the shell shape ready after the burst", ctx.ready("shell", 6, limit=60.0), 6)
        shell = ((ctx.health().get("sandbox") or {}).get("prebuilt") or {}).get("shapes", {}).get("shell", {})
        res.eq("/health target of the shell shape", shell.get("target"), 6)
        second = [ctx.shell("true").get("sandbox") for _ in range(6)]
        res.eq("the second burst", second, ["prebuilt"] * 6)
        res.eq("sandboxes of the shell shape ready again after it", ctx.ready("shell", 6, limit=60.0), 6)
        # PrebuiltBurstKeepSec=5: with no burst since, the target goes back to Prebuilt= and the
        # sandboxes beyond it are discarded, with the daemon idle (its own timer, no request but /health)
        t0 = time.monotonic()
        deadline, shell = t0 + 30.0, {}
        while time.monotonic() < deadline:
            shell = ((ctx.health().get("sandbox") or {}).get("prebuilt") or {}).get("shapes", {}).get("shell", {})
            if shell.get("target") == 2 and shell.get("ready") == 2:
                break
            time.sleep(0.2)
        waited = time.monotonic() - t0
        res.note("back to Prebuilt= after %.1f s: %r" % (waited, shell))
        res.eq("/health target and ready of the shell shape once the burst is 5 s old", (shell.get("target"),
               shell.get("ready")), (2, 2))
        res.check(waited >= 1.0, "the pool shrank %.1f s after the burst, before PrebuiltBurstKeepSec=5" % waited)
        left = waiting_below(d)
        deadline = time.monotonic() + 5.0
        while len(left) != 4 and time.monotonic() < deadline:   # the discarded ones are reaped off the loop
            time.sleep(0.1)
            left = waiting_below(d)
        res.eq("the bwrap processes left waiting (2 sandboxes, 2 each)", len(left), 4)
    finally:
        d.cleanup()


def case_killed(args, res):
    """A daemon killed with its pool filled leaves no sandbox built ahead behind."""
    d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=T.resolve_run_as(args.run_as), config=CONFIG)
    try:
        d.start()
        ctx = Ctx(d)
        a = ctx.shell("true")
        res.eq("its first run", a.get("status"), "exited")
        res.eq("sandboxes of the shell shape ready", ctx.ready("shell", 2), 2)
        before = waiting_below(d)
        # each waiting sandbox is two bwrap processes (bwrap, and its pid 1 in the sandbox)
        res.check(len(before) == 4, "control: 2 waiting sandboxes (4 bwrap processes) before the kill, found %r" % before)
        d.kill()
        res.eq("waiting sandboxes left 5 s after the daemon's SIGKILL", gone_within(before, 5), [])
    finally:
        d.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    ap.add_argument("--only")
    args = ap.parse_args()
    cases = [(n, f) for n, f in CASES if not args.only or args.only in n] + CASES_LAST
    tap = L.Tap(sys.stdout)
    sys.stdout.write("1..%d\n" % len(cases))
    d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=T.resolve_run_as(args.run_as), config=CONFIG)
    t0 = time.monotonic()
    try:
        if L.start_or_fail_all(d, cases, tap, T.Result, 400) is None:
            return 1
        ctx = Ctx(d)
        for name, fn in cases:
            res = T.Result(name)
            if name in ("killed", "burst"):
                try:
                    (case_killed if name == "killed" else case_burst)(args, res)
                except Exception:                              # noqa: BLE001
                    res.fail("test error:\n" + traceback.format_exc())
            elif fn is None:
                # stop: no sandbox built ahead survives the daemon
                before = waiting_below(d)
                res.check(before, "control: no waiting sandbox before the stop")
                rc, took = d.terminate(grace=15)
                res.eq("the daemon's exit status", rc, 0)
                res.eq("waiting sandboxes left after the stop", gone_within(before, 5), [])
            else:
                try:
                    fn(ctx, res)
                except Exception:                              # noqa: BLE001
                    res.fail("test error:\n" + traceback.format_exc())
                if not d.alive():
                    res.fail("the daemon died; log tail:\n%s" % d.log_tail(2000))
            tap.emit(res, verbose=args.verbose)
    finally:
        if d.alive():
            d.terminate(grace=10)
        if tap.failed:
            L.write_log_tail(d, sys.stdout)
        d.cleanup()
    return tap.summary(len(cases), time.monotonic() - t0)


if __name__ == "__main__":
    sys.exit(main())
