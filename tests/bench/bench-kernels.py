#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 22's speed targets for kernels (docs/kernels.md), measured in one run side by side with
jupyter_server 1.23 (Debian's python3-jupyter-server) serving the same ipykernel unsandboxed on
this machine: the floor a Kernel Gateway user has today.

    bench-kernels.py BUILDDIR [--rounds N] [--runs N] [--prespawned N]

1. execute-new-ws: `x = 1` round trip, a new WebSocket each time as DocsGPT does (open, send
   execute_request, read until execute_reply and status idle of that msg_id, close), against one
   live kernel of each server, in alternating batches; each batch's median ratio (ours over
   jupyter_server's). Target <= 0.3.
2. cold-start: POST /api/kernels -> first execute_reply of `x = 1` over a new WebSocket, one
   kernel of each server per round, alternating; each round's ratio. Target <= 1.1.
3. prespawn-start: the same with [Kernels] Prespawn=4 on a second daemon, N kernels created back
   to back (default 20); each one's ratio to jupyter_server's cold median of step 2.
   Target <= 0.05.
4. idle-memory: the proportional set size (Pss, smaps_rollup) of one idle kernel's processes,
   ours over jupyter_server's; reported only.

Our daemon is started by hand (no systemd; AllowUnscoped=yes), as root unless BENCH_USER names
a user. Progress on stderr; one line "BENCH-RESULT {json}" on stdout (bench_result.py). Exit 0
when it measured (whether the targets hold is in that line), 2 when it could not. BENCH_SMOKE=1:
a few rounds only (CI's smoke test: it runs to its end, no timing asserted).
"""

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_result as R                                                   # noqa: E402

try:
    import websocket                                                       # python3-websocket
except ImportError:
    sys.exit("bench-kernels.py: python3-websocket is missing (tests/setup.sh installs it)")

PY = "/usr/bin/python3"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A Kernel Gateway REST + WebSocket client, as DocsGPT and jupyter_server's gateway client
    use one: `Authorization: token T`, a new WebSocket per execution."""

    def __init__(self, name, port, token):
        self.name, self.port, self.token = name, port, token

    def http(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data, method=method,
                                     headers={"Authorization": "token " + self.token,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)

    def wait_up(self, proc, what, timeout=60):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if proc.poll() is not None:
                raise RuntimeError("%s exited with %s" % (what, proc.returncode))
            try:
                self.http("GET", "/api/kernelspecs", timeout=5)
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        raise RuntimeError("%s did not answer /api/kernelspecs in %d s" % (what, timeout))

    def create(self):
        status, model = self.http("POST", "/api/kernels", {"name": "python3"})
        if status != 201:
            raise RuntimeError("%s: POST /api/kernels answered %d" % (self.name, status))
        return model["id"]

    def delete(self, kid):
        try:
            self.http("DELETE", "/api/kernels/" + kid)
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def execute(self, kid, code, timeout=60):
        """One execution over a new WebSocket; the seconds it took, from opening the socket to
        both execute_reply and status idle of the request."""
        t0 = time.monotonic()
        ws = websocket.create_connection("ws://127.0.0.1:%d/api/kernels/%s/channels" % (self.port, kid),
                                         header=["Authorization: token " + self.token], timeout=timeout)
        try:
            mid = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": mid, "msg_type": "execute_request", "username": "bench",
                           "session": uuid.uuid4().hex, "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            reply = idle = False
            while not (reply and idle):
                m = json.loads(ws.recv())
                if m.get("parent_header", {}).get("msg_id") != mid:
                    continue
                t = m.get("msg_type") or m.get("header", {}).get("msg_type")
                if t == "execute_reply":
                    if m["content"].get("status") != "ok":
                        raise RuntimeError("%s: execute_reply %s" % (self.name, m["content"]))
                    reply = True
                elif t == "status" and m["content"].get("execution_state") == "idle":
                    idle = True
        finally:
            ws.close()
        return time.monotonic() - t0

    def cold_start(self):
        """POST /api/kernels -> the first execute_reply (seconds), and the kernel's id."""
        t0 = time.monotonic()
        kid = self.create()
        self.execute(kid, "x = 1", timeout=120)
        return time.monotonic() - t0, kid


def pss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def descendants(root):
    """Every live process below @root (by /proc/PID/stat's ppid), @root excluded."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Bench:
    def __init__(self, build, tmp, smoke):
        self.build, self.tmp, self.smoke = build, tmp, smoke
        self.procs = []
        self.token = os.urandom(32).hex()

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def jupyter_server(self):
        port = free_port()
        home = os.path.join(self.tmp, "jupyter")
        os.makedirs(home, exist_ok=True)
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "JUPYTER_RUNTIME_DIR": os.path.join(home, "runtime"),
               "JUPYTER_DATA_DIR": os.path.join(home, "data"), "JUPYTER_CONFIG_DIR": os.path.join(home, "config"),
               "LANG": "C.UTF-8"}
        argv = [PY, "-m", "jupyter_server", "--no-browser", "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port=%d" % port, "--ServerApp.port_retries=0", "--ServerApp.token=" + self.token,
                "--ServerApp.root_dir=" + home, "--ServerApp.open_browser=False"]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.tmp, "jupyter.log"), "w"))
        self.procs.append(p)
        g = Gateway("jupyter_server", port, self.token)
        g.wait_up(p, "jupyter_server")
        g.pid = p.pid
        return g

    def runner(self, name, prespawn):
        d = os.path.join(self.tmp, name)
        for sub in ("creds", "state", "run"):
            os.makedirs(os.path.join(d, sub))
        with open(os.path.join(d, "creds", "api-token"), "w") as f:
            f.write(self.token)
        with open(os.path.join(d, "creds", "signing-key"), "w") as f:
            f.write(os.urandom(32).hex())
        with open(os.path.join(d, "runner.conf"), "w") as f:
            f.write("[Environments]\nBootstrap=\n[Runner]\nIdleExitSec=0\nLogLevel=warning\n"
                    "MaxConnectionsPerClient=64\n[Execution]\nAllowUnscoped=yes\n"
                    "[Kernels]\nEnable=yes\nMaxKernels=64\nPrespawn=%d\n" % prespawn)
        pre = []
        user = os.environ.get("BENCH_USER")
        if user:
            pw = pwd.getpwnam(user)
            for sub in ("creds", "state", "run"):
                for root, dirs, files in os.walk(os.path.join(d, sub)):
                    for x in [root] + [os.path.join(root, y) for y in files]:
                        os.chown(x, pw.pw_uid, pw.pw_gid)
            pre = ["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid, "--clear-groups"]
        port = free_port()
        env = {"PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": os.path.join(d, "creds"),
               "STATE_DIRECTORY": os.path.join(d, "state"), "RUNTIME_DIRECTORY": os.path.join(d, "run")}
        p = subprocess.Popen(pre + [os.path.join(self.build, "src", "sandbox-runnerd"), "--listen",
                                    "127.0.0.1:%d" % port, "--config", os.path.join(d, "runner.conf"),
                                    "--log-target", "console"],
                             env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "daemon.log"), "w"))
        self.procs.append(p)
        g = Gateway(name, port, self.token)
        g.wait_up(p, "sandbox-runnerd (%s)" % name)
        g.pid = p.pid
        return g

    def wait_prespawned(self, g, n, timeout=120):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            _, h = g.http("GET", "/health")
            if (h.get("kernels") or {}).get("prespawned", 0) >= n:
                return
            time.sleep(0.2)
        raise RuntimeError("%s: %d prespawned kernels not ready in %d s" % (g.name, n, timeout))


def kernel_pss(g, kid, jupyter):
    """The Pss (KiB) of the processes of one idle kernel: jupyter_server's child running
    ipykernel_launcher; ours, the whole sandbox: the processes below our daemon whose command line
    names the kernel (the keeper, bwrap: its directory is bound) and everything below them (the
    sandbox's init, the ipykernel, whose own command line names only /run/kernel)."""
    if jupyter:
        pids = [p for p in descendants(g.pid) if "ipykernel" in cmdline(p)]
    else:
        tops = [p for p in descendants(g.pid) if kid in cmdline(p)]
        pids = sorted(set(tops + [c for t in tops for c in descendants(t)]))
    kib = pss_kib(pids)
    return kib, len(pids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--prespawned", type=int, default=20)
    a = ap.parse_args()
    smoke = bool(os.environ.get("BENCH_SMOKE"))
    if smoke:
        a.rounds, a.runs, a.prespawned = 2, 4, 6
    tmp = tempfile.mkdtemp(prefix="sr-bench-kernels.")
    os.chmod(tmp, 0o755)
    b = Bench(os.path.abspath(a.build), tmp, smoke)
    try:
        js = b.jupyter_server()
        ours = b.runner("runner", 0)
        log("jupyter_server on %d, sandbox-runnerd on %d" % (js.port, ours.port))

        # 2 first (a cold kernel each, alternating), keeping the last kernel of each for 1 and 4.
        cold_j, cold_o, cold_ratios = [], [], []
        kj = ko = None
        for i in range(a.rounds):
            for k, g in ((kj, js), (ko, ours)):
                if k:
                    g.delete(k)
            tj, kj = js.cold_start()
            to, ko = ours.cold_start()
            cold_j.append(tj)
            cold_o.append(to)
            cold_ratios.append(to / tj)
            log("cold start %d: jupyter_server %.0f ms, ours %.0f ms" % (i, tj * 1e3, to * 1e3))

        ws_ratios, ws_j, ws_o = [], [], []
        for i in range(a.rounds):
            bj = [js.execute(kj, "x = 1") for _ in range(a.runs)]
            bo = [ours.execute(ko, "x = 1") for _ in range(a.runs)]
            ws_j += bj
            ws_o += bo
            ws_ratios.append(statistics.median(bo) / statistics.median(bj))
            log("execute batch %d: jupyter_server %.1f ms, ours %.1f ms" %
                (i, statistics.median(bj) * 1e3, statistics.median(bo) * 1e3))

        time.sleep(2)   # idle
        mj, nj = kernel_pss(js, kj, True)
        mo, no = kernel_pss(ours, ko, False)
        log("idle kernel Pss: jupyter_server %d KiB (%d processes), ours %d KiB (%d processes)" % (mj, nj, mo, no))
        for k, g in ((kj, js), (ko, ours)):
            g.delete(k)

        pre = b.runner("prespawn", 4)
        b.wait_prespawned(pre, 4)
        cold_floor = statistics.median(cold_j)
        pre_ratios, pre_times = [], []
        kids = []
        for i in range(a.prespawned):
            t, k = pre.cold_start()
            kids.append(k)
            pre_times.append(t)
            pre_ratios.append(t / cold_floor)
        log("prespawned starts (ms): " + " ".join("%.0f" % (t * 1e3) for t in pre_times))
        for k in kids:
            pre.delete(k)

        results = [
            R.result("kernels", "execute-new-ws", statistics.median(ws_o) / statistics.median(ws_j),
                     statistics.median(ws_j) * 1e3, "ms", batch_values=ws_ratios),
            R.result("kernels", "cold-start", statistics.median(cold_o) / cold_floor, cold_floor * 1e3, "ms",
                     batch_values=cold_ratios),
            R.result("kernels", "prespawn-start", statistics.median(pre_times) / cold_floor, cold_floor * 1e3,
                     "ms", batch_values=pre_ratios),
        ]
        if mj > 0 and mo > 0:
            results.append(R.result("kernels", "idle-memory", mo / mj, mj / 1024.0, "MiB", batch=(1, mo / mj,
                                                                                               mo / mj, mo / mj)))
        R.emit("kernels", {"rounds": a.rounds, "runs": a.runs, "prespawned": a.prespawned,
                           "loadavg": os.getloadavg()[0]}, results)
        return 0
    except (RuntimeError, OSError, websocket.WebSocketException) as e:
        log("bench-kernels.py: could not measure: %s" % e)
        for name in ("jupyter.log", "runner/daemon.log", "prespawn/daemon.log"):
            p = os.path.join(tmp, name)
            if os.path.exists(p):
                log("--- %s (tail)\n%s" % (name, open(p, errors="replace").read()[-3000:]))
        return 2
    finally:
        b.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
