#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Benchmark of sandbox egress: the bridge (inside the sandbox) and the gateway together.

    bench-egress.py --daemon BUILD/src/sandbox-runnerd [--mib 1024] [--repeat 3] [--connects 1000]

Not a pass/fail test: it prints medians and ratios against a floor measured in the same run.
Same set-up as tests/integration/egress-e2e.py (whose helpers it imports): new mount and network
namespaces with only a loopback, a private /etc/hosts, test servers on 127.0.0.0/8, the daemon
started by hand ([Execution] AllowUnscoped=yes, [Network] Mode=allowlist, Allow=allowed.test,
Mirrors=127.0.0.0/8), which starts the gateway as its child on the first connection.

 (a) throughput: a client in a sandbox downloads --mib MiB from a loopback server through
     CONNECT (the bridge on 127.0.0.1:18118 hands the connection over to the gateway, which relays
     between the client's socket and 127.0.0.2:9000), against the same client outside the sandbox
     downloading the same bytes from the same server directly; --repeat times each, alternating,
     median of each. The rounds are paired (every path once per round, back to back), so the
     median of the per-round ratios is printed too: it is less sensitive to load that comes and
     goes on the machine than the ratio of the medians;
 (b) set-up latency: --connects sequential CONNECTs from inside one sandbox run (connect to the
     bridge, CONNECT allowed.test:7001, read the 200, close) against as many direct TCP connects
     (connect, close) to the same server (it accepts and closes) from outside; medians, p90, p99
     and the difference; the connects run in up to 10 batches that take turns (each batch's added
     median over the direct batch beside it: their quartiles are printed too).

Unless --no-breakdown, both also measure two partial paths, to tell the hops apart: "gateway"
(the client outside any sandbox, a plain byte-stream client on the gateway's AF_UNIX socket: no
bridge, no sandbox, the gateway relays between AF_UNIX and TCP) and "bridge"
(sandbox-runner-bridge run by hand outside any sandbox on 127.0.0.1:18119, handing connections
over to the same gateway: bridge + gateway without the sandbox). CPU seconds per GiB of each process
(client, bridge, gateway, server) come from /proc.

Targets (from the issue): throughput >= 80% of direct; set-up adds < 1 ms at the median.
Needs root (namespaces); traffic stays on the private loopback. Other load on the machine shows
in the numbers (the load average is printed at the end). Ends with the BENCH-RESULT line of
bench_result.py: targets throughput (per round: full / direct) and connect-added (per batch).
"""

import argparse
import importlib.util
import json
import os
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True     # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
E2E_PATH = os.path.join(HERE, "..", "integration", "egress-e2e.py")
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
_spec = importlib.util.spec_from_file_location("egress_e2e", E2E_PATH)
E = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E)
import execute_lib as L                                                    # noqa: E402
import testlib as T                                                        # noqa: E402
sys.path.insert(0, HERE)
import bench_result as R                                                   # noqa: E402

BULK_PORT = 9000
SINK_PORT = 7001        # accepts and closes at once: the upstream of the set-up latency runs
BRIDGE_PORT = 18119
INNER_ENV = "SR_EGRESS_BENCH_INNER"
CONFIG = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=600
MaxTimeoutSec=1200
MemoryMax=2G
[Quota]
MaxOutputBytes=16M
[Network]
Mode=allowlist
Allow=allowed.test
Mirrors=127.0.0.0/8
"""

# The same client runs in the sandbox (through the bridge) and outside it (direct). Input: JSON
# on stdin. Output: JSON on stdout.
CLIENT = r'''
import json, os, socket, sys, time

PROXY = ("127.0.0.1", 18118)
cfg = json.loads(sys.stdin.read())

def cpu_of(pid):
    # utime + stime of pid in seconds (clock ticks), or None
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None

def open_conn(via, host, name, port):
    if via == "direct":
        return socket.create_connection((host, port), timeout=30)
    if via.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(via[5:])
    elif via.startswith("tcp:"):
        s = socket.create_connection(("127.0.0.1", int(via[4:])), timeout=30)
    else:
        s = socket.create_connection(PROXY, timeout=30)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name.encode(), port, name.encode(), port))
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise OSError("proxy closed the connection: %r" % buf)
        buf += d
    if not buf.startswith(b"HTTP/1.1 200"):
        raise OSError("CONNECT refused: %r" % buf[:200])
    if buf.split(b"\r\n\r\n", 1)[1]:
        raise OSError("unexpected bytes after the 200")
    return s

def download(via, host, name, port, n):
    s = open_conn(via, host, name, port)
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    got = 0
    # In the sandbox the bridge is our parent (it runs the workload as its child).
    parent = os.getppid() if via == "proxy" else None
    p0 = cpu_of(parent) if parent else None
    c0 = os.times()
    t0 = time.perf_counter()
    s.sendall(b"%d\n" % n)
    while True:
        k = s.recv_into(mv)
        if k == 0:
            break
        got += k
    dt = time.perf_counter() - t0
    c1 = os.times()
    p1 = cpu_of(parent) if parent else None
    s.close()
    if got != n:
        raise OSError("got %d bytes, expected %d" % (got, n))
    return {"seconds": dt, "clientCpu": (c1.user + c1.system) - (c0.user + c0.system),
            "bridgeCpu": p1 - p0 if p0 is not None and p1 is not None else None}

def connects(via, host, name, port, n, warm):
    lat = []
    for i in range(warm + n):
        t0 = time.perf_counter()
        if via == "direct":
            s = socket.create_connection((host, port), timeout=30)
        else:
            s = open_conn(via, host, name, port)
        dt = time.perf_counter() - t0
        s.close()
        if i >= warm:
            lat.append(dt)
    return lat

out = {}
if cfg["what"] == "download":
    out = download(cfg["via"], cfg["host"], cfg["name"], cfg["port"], cfg["bytes"])
else:
    out["latencies"] = connects(cfg["via"], cfg["host"], cfg["name"], cfg["port"], cfg["n"], cfg["warm"])
print(json.dumps(out))
'''


class BulkHandler(socketserver.BaseRequestHandler):
    """Reads "<n>\\n", sends n bytes, closes."""
    chunk = memoryview(bytes(range(256)) * (4 << 12))       # 4 MiB

    def handle(self):
        s = self.request
        buf = b""
        while b"\n" not in buf:
            d = s.recv(64)
            if not d:
                return
            buf += d
        n = int(buf.split(b"\n")[0])
        c = self.chunk
        try:
            while n > 0:
                k = min(n, len(c))
                s.sendall(c[:k])
                n -= k
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def local(cfg, timeout=900):
    """The client outside the sandbox (same interpreter as in the sandbox: /usr/bin/python3)."""
    p = subprocess.run(["/usr/bin/python3", "-c", CLIENT], input=json.dumps(cfg).encode(), capture_output=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("direct client failed: %s" % p.stderr.decode("utf-8", "replace")[-1500:])
    return json.loads(p.stdout)


def sandboxed(ctx, cfg, timeout=900):
    body = {"executionId": ctx.new_id("bench"), "workspaceId": "bench", "language": "python", "code": CLIENT,
            "stdin": json.dumps(cfg), "timeoutMs": int(timeout * 1000)}
    r = ctx.request("POST", "/execute", body, signed=True, timeout=timeout + 30)
    j = r.json() or {}
    if r.status != 200 or j.get("status") != "exited" or j.get("exitCode") != 0:
        raise RuntimeError("sandboxed client failed: %s stderr=%s" % (r.brief(600), (j.get("stderr") or "")[-1500:]))
    return json.loads(j["stdout"])


def start_sink(addr):
    """Accept and close at once, in one thread: upstream connections of the latency runs end
    as soon as the tunnel does (a thread per connection could lag and pile them up against the
    gateway's 256 connections per execution)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr)
    s.listen(1024)

    def loop():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.close()
    import threading
    threading.Thread(target=loop, daemon=True).start()
    return s


def L_cpu(pid):
    """utime + stime of pid in seconds, or None."""
    if not pid:
        return None
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def stop_bridge(p):
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--mib", type=int, default=1024, help="size of one download (default 1024 MiB)")
    ap.add_argument("--repeat", type=int, default=3, help="downloads of each kind (default 3)")
    ap.add_argument("--connects", type=int, default=1000, help="sequential connects of each kind (default 1000)")
    ap.add_argument("--warm", type=int, default=50, help="warm-up connects, not counted (default 50)")
    ap.add_argument("--no-breakdown", dest="breakdown", action="store_false",
                    help="skip the extra paths (gateway only; bridge + gateway without a sandbox)")
    ap.add_argument("--keep-tmp", action="store_true")
    args = ap.parse_args()

    if os.environ.get(INNER_ENV) != "1":
        if os.geteuid() != 0:
            print("bench-egress: needs root (mount and network namespaces)", file=sys.stderr)
            return 77
        env = dict(os.environ)
        env[INNER_ENV] = "1"
        argv = ["--daemon", os.path.abspath(args.daemon), "--mib", str(args.mib), "--repeat", str(args.repeat),
                "--connects", str(args.connects), "--warm", str(args.warm)] + (["--keep-tmp"] if args.keep_tmp else []) + \
            ([] if args.breakdown else ["--no-breakdown"])
        os.execvpe("unshare", ["unshare", "--mount", "--net", "--propagation", "private", "--",
                               sys.executable, os.path.abspath(__file__)] + argv, env)

    workdir = tempfile.mkdtemp(prefix="sr-bench-egress.")
    d = None
    try:
        dns, servers = E.setup_test_hosts(workdir)
        bulk = E.start_server(("127.0.0.2", BULK_PORT), BulkHandler)
        sink = start_sink(("127.0.0.2", SINK_PORT))
        d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=T.resolve_run_as("auto"), config=CONFIG)
        d.start()
        ctx = E.Ctx(d, L.Budget(24 * 3600), dns)
        nbytes = args.mib << 20
        print("# bench-egress: %d CPUs, kernel %s, daemon pid %d (tmp %s)" % (os.cpu_count(), os.uname().release,
                                                                            d.pid, d.tmp))

        # Warm-up: start the gateway, fault in the interpreter on both sides.
        sandboxed(ctx, {"what": "download", "via": "proxy", "host": "127.0.0.2", "name": "allowed.test",
                        "port": BULK_PORT, "bytes": 16 << 20})
        local({"what": "download", "via": "direct", "host": "127.0.0.2", "name": "allowed.test", "port": BULK_PORT,
               "bytes": 16 << 20})

        # The gateway child (started by the warm-up) and its socket: for the breakdown.
        gw_pid = next((p for p in L.descendants(d.pid)
                       if (L.cmdline(p) or [b""])[0].endswith(b"sandbox-runner-egress")), None)
        # Named by the instance, <revision>-<build> (docs/architecture.md section 11).
        sn = (ctx.health().json() or {}).get("sandboxNetwork") or {}
        gw_sock = os.path.join(d.run, "egress", "%s.sock" % (sn.get("instance") or sn.get("revision")))
        print("# gateway pid %s, socket %s" % (gw_pid, gw_sock))

        # (a) throughput, alternating so that drift hits all paths alike. Three paths:
        # direct (client outside, straight to the server), gateway only (client outside, over
        # the gateway's AF_UNIX socket: no sandbox, no bridge), full (client in the sandbox,
        # bridge + gateway). CPU seconds of each process per run from /proc.
        cfg = {"what": "download", "host": "127.0.0.2", "name": "allowed.test", "port": BULK_PORT, "bytes": nbytes}
        paths = ["direct", "gateway", "full"]
        bridge = None
        if args.breakdown:
            # The bridge binary outside any sandbox (root, our namespace) on another port.
            exe = os.path.join(os.path.dirname(os.path.abspath(args.daemon)), "bridge", "sandbox-runner-bridge")
            bridge = subprocess.Popen([exe, "--gateway", gw_sock, "--listen", "127.0.0.1:%d" % BRIDGE_PORT, "--",
                                       "sleep", "100000"], stdin=subprocess.DEVNULL)
            time.sleep(0.3)
            paths.insert(2, "bridge")
        runs = {p: [] for p in paths}
        via = {"direct": "direct", "gateway": "unix:" + gw_sock, "bridge": "tcp:%d" % BRIDGE_PORT}
        try:
            for i in range(args.repeat):
                for path in paths:
                    g0, s0 = L_cpu(gw_pid), os.times()
                    b0 = L_cpu(bridge.pid) if path == "bridge" else None
                    if path == "full":
                        r = sandboxed(ctx, dict(cfg, via="proxy"))
                    else:
                        r = local(dict(cfg, via=via[path]))
                    g1, s1 = L_cpu(gw_pid), os.times()
                    if b0 is not None:
                        r["bridgeCpu"] = L_cpu(bridge.pid) - b0
                    r["serverCpu"] = (s1.user + s1.system) - (s0.user + s0.system)
                    r["gatewayCpu"] = g1 - g0 if path != "direct" and g0 is not None and g1 is not None else None
                    runs[path].append(r)
                print("#   round %d: %s" % (i + 1, ", ".join("%s %.3f s" % (p, runs[p][-1]["seconds"]) for p in paths)),
                      flush=True)
        except BaseException:
            stop_bridge(bridge)
            raise
        mib = nbytes / (1 << 20)
        rate = {k: mib / statistics.median([r["seconds"] for r in v]) for k, v in runs.items()}
        ratio = rate["full"] / rate["direct"]
        paired = statistics.median(d["seconds"] / f["seconds"] for d, f in zip(runs["direct"], runs["full"]))
        print("throughput (%d MiB, median of %d): direct %.0f MiB/s; sandbox via bridge + gateway %.0f MiB/s: "
              "%.1f%% of direct (target >= 80%%: %s)" % (mib, args.repeat, rate["direct"], rate["full"], 100 * ratio,
                                                        "met" if ratio >= 0.8 else "NOT met"), flush=True)
        print("  per round, full / direct: %s; median %.1f%%" % (
            ", ".join("%.1f%%" % (100 * d["seconds"] / f["seconds"]) for d, f in zip(runs["direct"], runs["full"])),
            100 * paired), flush=True)
        names = {"gateway": "gateway only (client outside, on the gateway's AF_UNIX socket)",
                 "bridge": "bridge + gateway without a sandbox (bridge run by hand on 127.0.0.1:%d)" % BRIDGE_PORT}
        for p in paths:
            if p in names:
                print("  breakdown: %s %.0f MiB/s (%.1f%%)" % (names[p], rate[p], 100 * rate[p] / rate["direct"]))

        def cpu(path, key):
            v = [r.get(key) for r in runs[path] if r.get(key) is not None]
            return "%.2f" % (statistics.median(v) / (mib / 1024)) if v else "-"
        print("CPU seconds per GiB (median), per process: %s" % "; ".join(
            "%s: client %s, bridge %s, gateway %s, server %s" % (
                p, cpu(p, "clientCpu"), cpu(p, "bridgeCpu"), cpu(p, "gatewayCpu"), cpu(p, "serverCpu"))
            for p in paths), flush=True)

        # (b) set-up latency, the same paths: a connect (direct) or connect + CONNECT + 200 (the rest),
        # in batches that take turns (each path one batch, then the next round), so that load that
        # comes and goes weighs on all paths alike; each batch's own figure is its median over the
        # direct batch of its round.
        nb = min(10, max(1, args.connects // 20))
        sizes = [args.connects // nb + (1 if b < args.connects % nb else 0) for b in range(nb)]
        try:
            lat = {p: [] for p in paths}
            per_batch = []
            for k in sizes:
                got = {}
                for path in paths:
                    cfg = {"what": "connects", "host": "127.0.0.2", "name": "allowed.test", "port": SINK_PORT,
                           "n": k, "warm": args.warm}
                    if path == "full":
                        got[path] = sandboxed(ctx, dict(cfg, via="proxy"))["latencies"]
                    else:
                        got[path] = local(dict(cfg, via=via[path]))["latencies"]
                    lat[path] += got[path]
                per_batch.append((statistics.median(got["full"]) - statistics.median(got["direct"])) * 1e6)
        finally:
            stop_bridge(bridge)
        med = {k: statistics.median(v) * 1e6 for k, v in lat.items()}
        md, mp = med["direct"], med["full"]
        added_q = R.quartiles(per_batch)
        print("  per batch of %d, added over direct: median %.0f us (p25 %.0f, p75 %.0f; %d batches)" % (
            sizes[0], added_q[0], added_q[1], added_q[2], nb), flush=True)
        print("connect set-up (%d sequential, after %d warm-up): direct TCP connect median %.0f us (p90 %.0f, p99 %.0f); "
              "CONNECT through bridge + gateway from the sandbox median %.0f us (p90 %.0f, p99 %.0f)" % (
                  args.connects, args.warm, md, pct(lat["direct"], 90) * 1e6, pct(lat["direct"], 99) * 1e6,
                  mp, pct(lat["full"], 90) * 1e6, pct(lat["full"], 99) * 1e6))
        print("added at the median: %.0f us, ratio %.1fx (target < 1000 us: %s)" % (
            mp - md, mp / md if md else float("inf"), "met" if mp - md < 1000 else "NOT met"), flush=True)
        for p in paths:
            if p in names:
                print("  breakdown: %s: CONNECT median %.0f us (p90 %.0f), %.0f us over direct" % (
                    names[p], med[p], pct(lat[p], 90) * 1e6, med[p] - md))
        try:
            with open("/proc/loadavg") as f:
                print("# load average at the end: %s" % " ".join(f.read().split()[:3]))
        except OSError:
            pass
        print("# summary: " + json.dumps({"throughputDirectMiBs": round(rate["direct"]),
                                          "throughputGatewayOnlyMiBs": round(rate["gateway"]),
                                          "throughputProxyMiBs": round(rate["full"]),
                                          "throughputRatio": round(ratio, 3),
                                          "throughputRatioPairedMedian": round(paired, 3),
                                          "connectDirectMedianUs": round(md),
                                          "connectProxyMedianUs": round(mp), "connectAddedUs": round(mp - md)}))
        per_round = [d_["seconds"] / f["seconds"] for d_, f in zip(runs["direct"], runs["full"])]
        R.emit("egress", {"mib": args.mib, "repeat": args.repeat, "connects": args.connects, "warm": args.warm,
                          "connectBatches": nb},
               [R.result("egress", "throughput", ratio, rate["direct"], "MiB/s", batch_values=per_round),
                R.result("egress", "connect-added", mp - md, md, "us", batch_values=per_batch)])
        rc, _ = d.terminate()
        bulk.shutdown()
        sink.close()
        for s in servers:
            s.shutdown()
        return 0
    finally:
        if d is not None:
            d.cleanup()
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
