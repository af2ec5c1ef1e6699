#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Isolation of Jupyter kernels (issue 22), from inside real sandboxed ipykernels: a daemon with
[Kernels] Enable=yes started by hand (as an unprivileged user: the default --run-as; or as root:
--run-as self), two kernels A and B on two workspaces, and kernel code probing its sandbox:

  - A sees none of B's files, processes or /tmp (and B sees its own: the control);
  - A reaches neither the daemon's API (its loopback port, any Unix socket under its directories,
    B's ipc sockets) nor the host network nor private ranges; only lo exists;
  - A's environment holds no daemon variable (token, keys, CREDENTIALS_DIRECTORY, SANDBOX_*);
  - A runs as a non-root uid with no capabilities, NoNewPrivs and a seccomp filter, and on the
    host every process of its sandbox has a uid other than 0;
  - the escape battery of execute.py (its Python and shell probes, and its checks, reused as
    they are) and try-syscall's probes of seccomp-battery.py, run from kernel code;
  - a kernel with "network": "none" has no network either;
  - with --egress (root: private mount and network namespaces, egress-e2e.py's test origins and
    allowlist policy): a kernel with "network": "default" reaches an allowed origin through the
    in-sandbox bridge and is refused another; with "none" it reaches neither;
  - a kernel that fills its socket directory (/run/kernel) with files, a big file or a directory
    is ended with reason "misbehaved", its directory removed, no process left, the daemon serving.

    kernels-isolation.py --daemon build/src/sandbox-runnerd --build-root build [--run-as self]
                         [--egress] [--only NAME] [--verbose]"""

import base64
import importlib.util
import json
import os
import secrets
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import kernels as K             # noqa: E402
import testlib as T             # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUDGET = 420


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


X = load("execute_battery", os.path.join(HERE, "execute.py"))               # the escape battery
E = load("egress_e2e", os.path.join(HERE, "egress-e2e.py"))                 # its test origins
SB = load("seccomp_battery", os.path.join(HERE, "seccomp-battery.py"))      # the syscall probes


class Kern:
    """One kernel of the suite: its id, workspace and the markers its code left."""

    def __init__(self, name, kid, ws):
        self.name = name
        self.id = kid
        self.ws = ws
        self.marker = "sr-iso-%s-%s" % (name, secrets.token_hex(4))


class Ctx(K.Ctx):
    def __init__(self, d, build_root):
        super().__init__(d)
        self.build_root = build_root
        self.kernels = {}               # name -> Kern
        self.fixtures = {}              # execute.py's escape cases read their battery here

    @property
    def listen_port(self):
        return self.d.port

    def run(self, kid, code, timeout=60.0):
        return K.run_code(self, kid, code, timeout=timeout)

    def probe(self, kid, code, res, timeout=60.0):
        """Run @code, which leaves its findings in a dict R; return R (None and a failure if not)."""
        o = self.run(kid, code + "\nprint('@@R@@' + json.dumps(R))", timeout=timeout)
        out = "".join(o.stdout)
        if (o.reply or {}).get("status") != "ok" or "@@R@@" not in out:
            res.fail("the probe did not run: reply %r, errors %r, stdout %r" % (
                o.reply, [e.get("evalue") for e in o.errors], L.trunc(out, 600)))
            return None
        return json.loads(out.split("@@R@@", 1)[1])

    def start(self, name, res, body=None):
        r = self.call("POST", "/api/kernels", dict({"name": "python3"}, **(body or {})), timeout=30)
        if not res.eq("POST /api/kernels (%s)" % name, r.status, 201):
            res.note(r.brief())
            return None
        j = r.json() or {}
        k = Kern(name, j.get("id"), j.get("workspaceId"))
        self.kernels[name] = k
        return k

    def kernel_dir(self, k):
        return os.path.join(self.d.run, "kernels", k.id)


def need(ctx, res, *names):
    missing = [n for n in names if n not in ctx.kernels]
    if missing:
        res.fail("no kernel %s (the setup case failed)" % ", ".join(missing))
    return not missing


def secrets_in(ctx, text):
    return X.secrets_in(ctx, text)


# ---- setup ----------------------------------------------------------------------------------

SETUP = r'''
import json, os, subprocess, sys
open('/workspace/MARKER.txt', 'w').write('MARKER')
os.mkdir('/workspace/MARKER.d')
open('/tmp/MARKER-tmp', 'w').write('MARKER')
P = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(900)', 'MARKER'])
R = {'pid': P.pid, 'cwd': os.getcwd(), 'run_kernel': sorted(os.listdir('/run/kernel'))}
'''


def case_setup(ctx, res):
    """Two kernels, each on a workspace of its own, leave files in /workspace and /tmp and a
    marked process."""
    for name in ("A", "B"):
        k = ctx.start(name, res)
        if k is None:
            return
        R = ctx.probe(k.id, SETUP.replace("MARKER", k.marker), res)
        if R is None:
            del ctx.kernels[name]
            return
        res.note("kernel %s: %s on workspace %s, its /run/kernel: %s" % (name, k.id, k.ws, R["run_kernel"]))
        res.check(set(R["run_kernel"]) <= {"connection.json", "k-1", "k-2", "k-3", "k-4", "k-5"},
                  "/run/kernel of %s holds only its connection file and sockets: %s" % (name, R["run_kernel"]))
    a, b = ctx.kernels["A"], ctx.kernels["B"]
    res.check(a.ws != b.ws, "two workspaces: %s, %s" % (a.ws, b.ws))


# ---- files, /tmp, processes ------------------------------------------------------------------

LOOK = r'''
import json, os
R = {'found': [], 'tmp': sorted(os.listdir('/tmp')), 'ws': sorted(os.listdir('/workspace')),
     'run_kernel': sorted(os.listdir('/run/kernel')), 'procs': {}}
for top in os.listdir('/'):
    if top in ('proc', 'sys', 'dev', 'usr'):
        continue
    for dp, dn, fn in os.walk('/' + top, onerror=lambda e: None):
        for n in dn + fn:
            if 'OTHER' in n or 'OTHER_ID' in n or 'OTHER_WS' in n:
                R['found'].append(os.path.join(dp, n))
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            R['procs'][p] = open('/proc/%s/cmdline' % p, 'rb').read().decode('latin-1').replace('\0', ' ')
        except OSError:
            pass
R['host_paths'] = {p: os.path.lexists(p) for p in (HOST_WS, HOST_DIR, HOST_RUN)}
'''


def look(ctx, res, me, other):
    code = LOOK.replace("OTHER_ID", other.id).replace("OTHER_WS", other.ws).replace("OTHER", other.marker)
    code = code.replace("HOST_WS", repr(ctx.d.workspace_path(other.ws))).replace(
        "HOST_DIR", repr(ctx.kernel_dir(other))).replace("HOST_RUN", repr(ctx.d.run))
    return ctx.probe(me.id, code, res)


def case_files(ctx, res):
    if not need(ctx, res, "A", "B"):
        return
    a, b = ctx.kernels["A"], ctx.kernels["B"]
    R = look(ctx, res, a, b)
    if R is None:
        return
    res.check(not R["found"], "kernel A finds B's files, workspace or id at %s" % R["found"])
    res.check(not any(R["host_paths"].values()), "host paths visible in A: %r" % R["host_paths"])
    res.check(a.marker + ".txt" in R["ws"] and b.marker + ".txt" not in R["ws"],
              "A's /workspace holds its own file, not B's: %s" % R["ws"])
    # control: B's files are there, for B and on the host
    own = look(ctx, res, b, b)
    if own is not None:
        res.check(any(p.endswith(b.marker + ".txt") for p in own["found"]),
                  "control: B does not find its own file (the search proves nothing): %s" % own["found"][:10])
    res.check(os.path.exists(os.path.join(ctx.d.workspace_path(b.ws), b.marker + ".txt")),
              "control: B's file is not in its host workspace")


def case_tmp(ctx, res):
    if not need(ctx, res, "A", "B"):
        return
    a, b = ctx.kernels["A"], ctx.kernels["B"]
    ra, rb = look(ctx, res, a, b), look(ctx, res, b, a)
    if ra is None or rb is None:
        return
    res.check(a.marker + "-tmp" in ra["tmp"], "control: A's /tmp lacks its own file: %s" % ra["tmp"])
    res.check(b.marker + "-tmp" not in ra["tmp"], "A's /tmp shows B's file: %s" % ra["tmp"])
    res.check(b.marker + "-tmp" in rb["tmp"], "control: B's /tmp lacks its own file: %s" % rb["tmp"])
    res.check(a.marker + "-tmp" not in rb["tmp"], "B's /tmp shows A's file: %s" % rb["tmp"])


def case_processes(ctx, res):
    if not need(ctx, res, "A", "B"):
        return
    a, b = ctx.kernels["A"], ctx.kernels["B"]
    R = look(ctx, res, a, b)
    if R is None:
        return
    procs = R["procs"]
    res.note("A's /proc: %s" % L.trunc(json.dumps(procs), 900))
    res.check(len(procs) <= 8, "%d processes visible to A: not a pid namespace of its own" % len(procs))
    res.check(any(a.marker in c for c in procs.values()), "control: A does not see its own marked process")
    res.check(not any(b.marker in c for c in procs.values()), "A sees B's process")
    res.check(not any("sandbox-runnerd" in c for c in procs.values()), "A sees the daemon")
    res.check(str(ctx.d.pid) not in procs or ctx.d.pid <= 16, "the daemon's pid %d is in A's /proc" % ctx.d.pid)
    # the marked processes do exist on the host (the control of the control)
    host = [p for p in L.all_pids() if b.marker.encode() in b" ".join(L.cmdline(p) or [])]
    res.check(host, "control: B's marked process is not on the host")


# ---- the daemon, the network --------------------------------------------------------------------

NET = r'''
import json, os, socket, time
R = {}
def tcp(host, port, fam=socket.AF_INET, t=3.0):
    t0 = time.monotonic()
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
    except OSError as e:
        return {'stage': 'socket', 'errno': e.errno, 't': time.monotonic() - t0}
    s.settimeout(t)
    try:
        s.connect((host, port))
        return {'stage': 'connected', 't': time.monotonic() - t0}
    except socket.timeout:
        return {'stage': 'timeout', 't': time.monotonic() - t0}
    except OSError as e:
        return {'stage': 'connect', 'errno': e.errno, 't': time.monotonic() - t0}
    finally:
        s.close()
def unix(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as e:
        return {'stage': 'socket', 'errno': e.errno}
    try:
        s.settimeout(3)
        s.connect(path)
        return {'stage': 'connected'}
    except OSError as e:
        return {'stage': 'connect', 'errno': e.errno}
    finally:
        s.close()
def udp(host, port):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as e:
        return {'stage': 'socket', 'errno': e.errno}
    try:
        s.sendto(b'x', (host, port))
        return {'stage': 'sent'}
    except OSError as e:
        return {'stage': 'sendto', 'errno': e.errno}
    finally:
        s.close()
R['tcp'] = {'%s:%d' % (h, p): tcp(h, p) for h, p in @TARGETS@}
R['tcp6'] = {'[%s]:%d' % (h, p): tcp(h, p, socket.AF_INET6) for h, p in @TARGETS6@}
R['udp'] = {'%s:%d' % (h, p): udp(h, p) for h, p in (('8.8.8.8', 53), ('10.0.0.1', 53))}
R['unix'] = {p: unix(p) for p in @UNIX@}
try:
    R['dns'] = socket.getaddrinfo('example.com', 80)[:1] and 'resolved'
except OSError as e:
    R['dns'] = 'failed: %s' % e
R['net_dev'] = [ln.split(':')[0].strip() for ln in open('/proc/net/dev').read().splitlines()[2:]]
R['route'] = open('/proc/net/route').read().splitlines()[1:]
R['tcp_table'] = [ln.split()[1] for f in ('/proc/net/tcp', '/proc/net/tcp6')
                  for ln in open(f).read().splitlines()[1:] if len(ln.split()) > 3]
'''

PRIVATE = [("10.0.0.1", 80), ("172.16.0.1", 80), ("192.168.0.1", 80), ("192.168.1.1", 443), ("169.254.169.254", 80),
           ("100.64.0.1", 80), ("8.8.8.8", 53), ("1.1.1.1", 443)]
PRIVATE6 = [("fd00::1", 80), ("fe80::1", 80), ("2001:4860:4860::8888", 53), ("::1", 1)]


def host_addresses():
    """This host's own non-loopback IPv4 addresses (the kernel must not reach them either)."""
    out = set()
    try:
        with open("/proc/net/fib_trie") as f:
            lines = f.read().splitlines()
        for i, ln in enumerate(lines):
            if "/32 host LOCAL" in ln and i > 0:
                a = lines[i - 1].split()[-1]
                if not a.startswith("127."):
                    out.add(a)
    except OSError:
        pass
    return sorted(out)


def host_unix_sockets(ctx):
    """Unix sockets under the daemon's directories (its API socket if any, the kernels' ipc
    sockets, the egress ones): none may be reachable from a kernel."""
    out = []
    for top in (ctx.d.tmp,):
        for dp, dn, fn in os.walk(top):
            for n in fn:
                p = os.path.join(dp, n)
                try:
                    if stat.S_ISSOCK(os.lstat(p).st_mode):
                        out.append(p)
                except OSError:
                    pass
    return out


def net_probe(ctx, res, kid):
    socks = host_unix_sockets(ctx)
    targets = [("127.0.0.1", ctx.d.port)] + PRIVATE + [(a, ctx.d.port) for a in host_addresses()] + \
        [(a, 22) for a in host_addresses()]
    code = NET.replace("@TARGETS6@", repr(PRIVATE6)).replace("@TARGETS@", repr(targets)).replace("@UNIX@", repr(socks))
    R = ctx.probe(kid, code, res, timeout=120)
    if R is not None:
        R["unix_paths"] = socks
    return R


def check_no_network(ctx, res, R, who):
    res.note("%s: tcp %s" % (who, L.trunc(json.dumps(R["tcp"]), 1200)))
    res.eq("%s: interfaces" % who, R["net_dev"], ["lo"])
    res.eq("%s: IPv4 routes" % who, R["route"], [])
    port_hex = ":%04X" % ctx.d.port
    res.check(not [a for a in R["tcp_table"] if a.endswith(port_hex)],
              "%s: the daemon's listening socket is in its /proc/net/tcp" % who)
    for what, r in list(R["tcp"].items()) + list(R["tcp6"].items()):
        if what.startswith("127.0.0.1:") or what.startswith("[::1]"):
            # its own loopback: refused (nothing listens there), never the daemon
            res.check(r["stage"] in ("socket", "connect") and r.get("errno") in (None, 111, 99, 101, 1, 13, 97),
                      "%s: connect %s: %r (expected refused)" % (who, what, r))
            continue
        res.check(r["stage"] in ("socket", "connect"), "%s: connect %s did not fail: %r" % (who, what, r))
        if r["stage"] == "connect":
            res.check(r.get("errno") in (101, 113, 99, 1, 13, 97),
                      "%s: connect %s: errno %r, expected ENETUNREACH" % (who, what, r.get("errno")))
        res.check(r["t"] < 2.0, "%s: connect %s took %.2fs (expected an immediate failure)" % (who, what, r["t"]))
    for what, r in R["udp"].items():
        res.check(r["stage"] != "sent", "%s: UDP to %s was sent" % (who, what))
    res.check(R["dns"] != "resolved", "%s: example.com resolved" % who)
    res.check(R["unix_paths"], "control: no Unix socket found under the daemon's directories (the kernels' "
              "own ipc sockets at least)")
    for p, r in R["unix"].items():
        res.check(r["stage"] != "connected", "%s: connected to the host's Unix socket %s" % (who, p))


def case_daemon_api(ctx, res):
    """The daemon's loopback listener, its sockets and B's ipc sockets are out of A's reach."""
    if not need(ctx, res, "A", "B"):
        return
    R = net_probe(ctx, res, ctx.kernels["A"].id)
    if R is None:
        return
    r = R["tcp"]["127.0.0.1:%d" % ctx.d.port]
    res.note("connect 127.0.0.1:%d (the daemon's port) from A: %r" % (ctx.d.port, r))
    res.check(r["stage"] != "connected", "A connected to the daemon's port")
    b_socks = [p for p in R["unix_paths"] if ctx.kernels["B"].id in p]
    res.check(b_socks, "control: B's ipc sockets are on the host: %s" % R["unix_paths"])
    res.note("Unix sockets tried: %s" % R["unix"])
    for p, u in R["unix"].items():
        res.check(u["stage"] != "connected", "A connected to %s" % p)
    # and the control: the daemon does answer on that port from here
    res.eq("control: GET /health from the host", ctx.call("GET", "/health").status, 200)


def case_network(ctx, res):
    """No interface but lo, no route: the host's addresses, private ranges and the internet fail fast."""
    if not need(ctx, res, "A"):
        return
    R = net_probe(ctx, res, ctx.kernels["A"].id)
    if R is not None:
        check_no_network(ctx, res, R, "kernel A")


def case_network_none(ctx, res):
    """A kernel started with "network": "none": the same, and the model says so."""
    for bad in ({"x": 1}, "open", 1):
        r = ctx.call("POST", "/api/kernels", {"name": "python3", "network": bad})
        res.check(r.status == 400 and "network" in ((r.json() or {}).get("message") or ""),
                  "network %r: expected 400 naming it, got %s" % (bad, r.brief()))
    k = ctx.start("N", res, {"network": "none"})
    if k is None:
        return
    j = ctx.call("GET", "/api/kernels/" + k.id).json() or {}
    res.eq("network in the model", j.get("network"), "none")
    R = net_probe(ctx, res, k.id)
    if R is not None:
        check_no_network(ctx, res, R, "kernel N")
    S = ctx.probe(k.id, "import json\nR = {l.split(':')[0]: l.split(':', 1)[1].strip() for l in "
                  "open('/proc/self/status') if l.startswith(('Seccomp', 'CapEff', 'NoNewPrivs'))}", res)
    if S is not None:
        res.eq("kernel N: Seccomp, CapEff, NoNewPrivs", (S.get("Seccomp"), S.get("CapEff"), S.get("NoNewPrivs")),
               ("2", "0000000000000000", "1"))
    delete(ctx, res, k)


# ---- environment, credentials ----------------------------------------------------------------

ENVIRON = r'''
import json, os, subprocess
R = {'env': dict(os.environ), 'environs': {}}
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            R['environs'][p] = open('/proc/%s/environ' % p, 'rb').read().decode('latin-1')
        except OSError as e:
            R['environs'][p] = 'unreadable: %s' % e
R['child'] = subprocess.run(['env'], capture_output=True, text=True).stdout
'''

DAEMON_VARS = ("CREDENTIALS_DIRECTORY", "STATE_DIRECTORY", "RUNTIME_DIRECTORY", "SANDBOX_TEST_SECRET",
               "SANDBOX_RUNNER", "INVOCATION_ID", "NOTIFY_SOCKET", "LISTEN_FDS", "JOURNAL_STREAM")


def case_environment(ctx, res):
    if not need(ctx, res, "A"):
        return
    R = ctx.probe(ctx.kernels["A"].id, ENVIRON, res)
    if R is None:
        return
    env = R["env"]
    res.note("the kernel's environment: %s" % sorted(env))
    for name in env:
        res.check(not name.startswith(DAEMON_VARS) and not name.startswith("SANDBOX_"),
                  "the daemon's variable %s is in the kernel's environment" % name)
    texts = [json.dumps(env), R["child"]] + list(R["environs"].values())
    for t in texts:
        bad = secrets_in(ctx, t)
        res.check(not bad, "the kernel sees %s in %s" % (", ".join(bad), L.trunc(t, 200)))
    res.check(ctx.d.canary not in json.dumps(R), "the daemon's SANDBOX_TEST_SECRET value reached the kernel")
    res.check("PATH" in env, "control: the kernel has an environment at all (%s)" % sorted(env))


CREDS = r'''
import json, os, subprocess
def status(text):
    return {l.split(':')[0]: l.split(':', 1)[1].strip() for l in text.splitlines()
            if l.startswith(('Uid', 'Gid', 'Cap', 'NoNewPrivs', 'Seccomp'))}
R = {'self': status(open('/proc/self/status').read()),
     'child': status(subprocess.run(['cat', '/proc/self/status'], capture_output=True, text=True).stdout),
     'ids': [os.getuid(), os.geteuid(), os.getgid(), os.getegid()], 'groups': os.getgroups()}
'''


def case_credentials(ctx, res):
    if not need(ctx, res, "A"):
        return
    R = ctx.probe(ctx.kernels["A"].id, CREDS, res)
    if R is None:
        return
    res.note("kernel: %r; a child: %r" % (R["self"], R["child"]))
    res.check(0 not in R["ids"][:2], "the kernel runs as uid 0 in its sandbox: %r" % R["ids"])
    for who in ("self", "child"):
        st = R[who]
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            res.check(int(st.get(k, "0"), 16) == 0, "%s: %s is %s" % (who, k, st.get(k)))
        res.eq("%s: NoNewPrivs" % who, st.get("NoNewPrivs"), "1")
        res.eq("%s: Seccomp" % who, st.get("Seccomp"), "2")
        res.check(all(u != "0" for u in st.get("Uid", "0").split()), "%s: Uid %r" % (who, st.get("Uid")))


def host_status(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return {ln.split(":")[0]: ln.split(":", 1)[1].split() for ln in f if ln.startswith(("Uid", "Gid"))}
    except OSError:
        return None


def case_host_uid(ctx, res):
    """On the host: every process of the kernel's sandbox (its marked child, the ipykernel, what
    bwrap runs) has real, effective, saved and fs uids other than 0, in every posture."""
    if not need(ctx, res, "A"):
        return
    a = ctx.kernels["A"]
    table = L.proc_table()
    marked = [p for p in table if a.marker.encode() in b" ".join(L.cmdline(p) or [])]
    if not res.check(marked, "the kernel's marked process is not found on the host"):
        return
    payload = set(marked)
    for p in marked:
        payload.add(table[p][2])            # its parent: the ipykernel
    bw = [p for p in table if any(a.id.encode() in x for x in (L.cmdline(p) or []))]
    for p in bw:
        payload.update(L.descendants(p, table))
    res.note("daemon uid %d; bwrap %s (uids %s)" % (T.run_as_uid(ctx.d.run_as), bw,
                                                    [host_status(p) for p in bw]))
    kernel_proc = [p for p in payload if b"ipykernel_launcher" in b" ".join(L.cmdline(p) or [])]
    res.check(kernel_proc, "the ipykernel process is not among %s" % sorted(payload))
    for p in sorted(payload):
        st = host_status(p)
        if st is None:
            continue
        res.note("pid %d %s: Uid %s Gid %s" % (p, L.cmdline(p)[:3], st.get("Uid"), st.get("Gid")))
        res.check("0" not in st.get("Uid", ["0"]), "pid %d (%s) runs as host uid 0: Uid %s" % (
            p, L.cmdline(p)[:3], st.get("Uid")))
        res.check("0" not in st.get("Gid", ["0"]), "pid %d runs as host gid 0: Gid %s" % (p, st.get("Gid")))


# ---- execute.py's escape battery and try-syscall's probes, from kernel code -------------------

def escape_battery(ctx, res):
    """Run execute.py's BATTERY_PY as a cell of A and its BATTERY_SH through a subprocess; the
    other workspace is B's, with B's marker. Fills the fixtures execute.py's cases read."""
    if "battery" in ctx.fixtures:
        return
    ctx.fixtures["battery"] = (None, None)
    ctx.fixtures["battery_log"] = T.Result("battery")
    if not need(ctx, res, "A", "B"):
        return
    a, b = ctx.kernels["A"], ctx.kernels["B"]
    ctx.fixtures["battery_other"] = (b.ws, b.marker)
    code = X.BATTERY_PY
    for k, v in (("DAEMON_PORT", str(ctx.d.port)), ("HOST_OTHER", repr(ctx.d.workspace_path(b.ws))),
                 ("HOST_STATE", repr(ctx.d.state)), ("OTHER_WS", repr(b.ws)), ("OTHER_MARKER", repr(b.marker))):
        code = code.replace(k, v)
    # The results in a cell of their own (the battery's own dict R), then the shell part.
    code += "\nR['_sh'] = __import__('subprocess').run(['sh', '-c', SH], capture_output=True, text=True).stdout\n"
    code = "SH = %r\n" % X.BATTERY_SH + code
    py = ctx.probe(a.id, code, res, timeout=120)
    if py is None:
        ctx.fixtures["battery_log"].fail("the escape battery did not run in kernel A")
        return
    ctx.fixtures["battery"] = (py, {"stdout": py.pop("_sh")})


def escape_case(fn):
    def run(ctx, res):
        escape_battery(ctx, res)
        fn(ctx, res)
    return run


SYSCALLS = r'''
import base64, json, os, subprocess
open('/tmp/try-syscall', 'wb').write(base64.b64decode(BIN))
os.chmod('/tmp/try-syscall', 0o755)
p = subprocess.run(['/tmp/try-syscall'] + NAMES, capture_output=True, text=True, timeout=120)
R = {'rc': p.returncode, 'err': p.stderr[-2000:], 'results': dict(l.partition(' ')[::2] for l in p.stdout.splitlines())}
'''


def case_syscalls(ctx, res):
    """seccomp-battery.py's probes (tests/helpers/try-syscall.c), run from kernel code: every probe
    a rule of the baseline variant matches gets that rule's errno, the controls pass, the foreign
    ABIs die as in a bare sandbox under the filter."""
    if not need(ctx, res, "A"):
        return
    export = SB.find_binary(ctx.build_root, "SECCOMP_EXPORT", "seccomp-export")
    try_syscall = SB.find_binary(ctx.build_root, "TRY_SYSCALL", "try-syscall")
    if not res.check(export and try_syscall, "seccomp-export or try-syscall not found under %s" % ctx.build_root):
        return
    known = set(subprocess.run([try_syscall, "--list"], capture_output=True, text=True, check=True).stdout.split())
    names = [p for p in SB.PROBES if p in known]
    rules = SB.describe(export, "baseline")
    # What the foreign ABIs give without a filter, in a bare bwrap sandbox (seccomp-battery's way).
    bp, bare = SB.run_probes("/usr/bin/bwrap", try_syscall, None, SB.FOREIGN_ABI_PROBES)
    if not bare:
        # In the systemd box a bare bwrap of root's cannot mount a /proc (the box's own is
        # partly read-only): the kernel's answer without any filter, from a plain process, then.
        res.note("bare bwrap: %s; the foreign ABI probes run unsandboxed" % L.trunc(bp.stderr, 300))
        p = subprocess.run([try_syscall] + SB.FOREIGN_ABI_PROBES, capture_output=True, text=True, timeout=60)
        bare = dict(ln.partition(" ")[::2] for ln in p.stdout.splitlines())
    if not res.check(bare, "the foreign ABI probes gave nothing without a filter either"):
        return
    with open(try_syscall, "rb") as f:
        blob = base64.b64encode(f.read()).decode()
    R = ctx.probe(ctx.kernels["A"].id, SYSCALLS.replace("BIN", repr(blob)).replace(
        "NAMES", repr(names + SB.FOREIGN_ABI_PROBES)), res, timeout=180)
    if R is None:
        return
    got = R["results"]
    res.eq("try-syscall's exit status in the kernel", R["rc"], 0)
    bad = []
    for name in names:
        hit = [r for r in rules if SB.rule_matches(r, name)]
        if hit and all(r["nr"] == "-" for r in hit):
            continue
        if hit:
            want = {"errno=%s" % r["errno"] for r in hit}
            if got.get(name) not in want:
                bad.append("%s: %s, want %s" % (name, got.get(name), "/".join(sorted(want))))
        elif name in SB.MUST_SUCCEED["baseline"] and got.get(name) != "ok":
            bad.append("control %s: %s, want ok" % (name, got.get(name)))
    for name in SB.FOREIGN_ABI_PROBES:
        if bare.get(name) == "unsupported":
            continue
        want = "killed=SIGSEGV" if bare.get(name) == "killed=SIGSEGV" and name.startswith("i386") else "killed=SIGSYS"
        if got.get(name) != want:
            bad.append("%s: %s, want %s" % (name, got.get(name), want))
    res.note("%d probes against %d baseline rules; foreign ABIs in a bare sandbox: %s" % (
        len(names) + len(SB.FOREIGN_ABI_PROBES), len(rules), {n: bare.get(n) for n in SB.FOREIGN_ABI_PROBES}))
    res.check(len(got) >= len(names), "try-syscall answered %d of %d probes: %s" % (len(got), len(names), R["err"]))
    res.check(not bad, "probes that got through or failed otherwise:\n  " + "\n  ".join(bad))


# ---- the socket directory ---------------------------------------------------------------------

FILL = {
    "many files": "for i in range(200):\n    open('/run/kernel/f%d' % i, 'w').write('x' * 1024)\n",
    "one big file": "open('/run/kernel/big', 'wb').write(b'x' * (1 << 20))\n",
    "a directory": "import os\nos.mkdir('/run/kernel/d')\nfor i in range(200):\n"
                   "    open('/run/kernel/d/f%d' % i, 'w').write('x' * 1024)\n",
    "a sparse file": "import os\nf = open('/run/kernel/sparse', 'wb')\nos.ftruncate(f.fileno(), 1 << 30)\n",
}


def dir_fill(ctx, res, how):
    k = ctx.start("F", res)
    if k is None:
        return
    o = ctx.run(k.id, "print('ready')")
    res.eq("the kernel runs", "".join(o.stdout).strip(), "ready")
    host_dir = ctx.kernel_dir(k)
    res.check(os.path.isdir(host_dir), "control: the kernel's directory %s exists" % host_dir)
    ws = ctx.ws(k.id)
    closed = False
    try:
        msg_id, text = K.execute_request(FILL[how] + "import time\ntime.sleep(30)\n")
        ws.send(text)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                ws.recv()
            except (K.websocket.WebSocketConnectionClosedException, ConnectionError):
                closed = True
                break
            except K.websocket.WebSocketTimeoutException:
                break
    finally:
        ws.close()
    res.check(closed, "the kernel's WebSocket stayed open")
    j, deadline = {}, time.monotonic() + 15
    while time.monotonic() < deadline:
        j = ctx.call("GET", "/api/kernels/" + k.id).json() or {}
        if j.get("execution_state") == "dead":
            break
        time.sleep(0.2)
    res.eq("state, reason", (j.get("execution_state"), j.get("reason")), ("dead", "misbehaved"))
    gone = False
    for _ in range(50):
        gone = not os.path.lexists(host_dir)
        if gone:
            break
        time.sleep(0.2)
    res.check(gone, "the kernel's directory is left: %s" % (os.listdir(host_dir) if os.path.isdir(host_dir) else ""))
    time.sleep(0.5)
    left = [p for p in L.all_pids() if any(k.id.encode() in x for x in (L.cmdline(p) or []))]
    res.eq("processes of the kernel left", left, [])
    log = ctx.d.log_text()
    res.check("filled its socket directory" in log, "no journal entry saying why the kernel was ended")
    res.eq("the daemon serves: GET /health", ctx.call("GET", "/health").status, 200)
    if "A" in ctx.kernels:
        o = ctx.run(ctx.kernels["A"].id, "print(6 * 7)")
        res.eq("kernel A still runs code", "".join(o.stdout).strip(), "42")
    ctx.kernels.pop("F", None)


def delete(ctx, res, k):
    r = ctx.call("DELETE", "/api/kernels/" + k.id)
    res.eq("DELETE %s" % k.name, r.status, 204)
    ctx.kernels.pop(k.name, None)


def case_alive(ctx, res):
    """A and B ran everything above with their sockets in place: neither was ended by the watch on
    its directory; then DELETE leaves no directory and no process."""
    if not need(ctx, res, "A", "B"):
        return
    for name in ("A", "B"):
        k = ctx.kernels[name]
        j = ctx.call("GET", "/api/kernels/" + k.id).json() or {}
        res.eq("kernel %s state" % name, j.get("execution_state"), "idle")
        delete(ctx, res, k)
        time.sleep(0.5)
        res.check(not os.path.lexists(ctx.kernel_dir(k)), "kernel %s's directory is left" % name)
        left = [p for p in L.all_pids() if any(k.id.encode() in x for x in (L.cmdline(p) or []))
                or k.marker.encode() in b" ".join(L.cmdline(p) or [])]
        res.eq("kernel %s's processes left" % name, left, [])


# ---- the network policy of runs (--egress) ------------------------------------------------------

EGRESS_INNER = "SR_KERNELS_EGRESS_INNER"
EGRESS = r'''
import json, os, socket, urllib.request, urllib.error
R = {'proxy': sorted(k for k in os.environ if 'proxy' in k.lower())}
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            return {'status': r.status, 'body': r.read(4000).decode('latin-1')}
    except urllib.error.HTTPError as e:
        return {'status': e.code, 'body': e.read(2000).decode('latin-1')}
    except Exception as e:
        return {'error': '%s: %s' % (type(e).__name__, e)}
def tcp(h, p):
    try:
        s = socket.socket()
    except OSError as e:
        return 'failed: socket(): %s' % e
    s.settimeout(5)
    try:
        s.connect((h, p))
        return 'connected'
    except OSError as e:
        return 'failed: %s' % e
    finally:
        s.close()
R['allowed'] = get('http://allowed.test@M@-allowed')
R['notlisted'] = get('http://notlisted.test@M@-notlisted')
R['private'] = get('http://private.test@M@-private')
R['direct'] = tcp('127.0.0.2', 80)
'''


def egress_probe(ctx, res, network):
    k = ctx.start("G", res, {"network": network})
    if k is None:
        return None, None
    m = "/kiso-%s" % secrets.token_hex(6)
    R = ctx.probe(k.id, EGRESS.replace("@M@", m), res, timeout=90)
    if R is not None:
        res.note("kernel with network %r: %s" % (network, L.trunc(json.dumps(R), 1500)))
        res.eq("direct connect to the origin 127.0.0.2:80", R["direct"].startswith("failed"), True)
        res.eq("private.test (10.0.0.1) reached", E.HttpHandler.find(m + "-private"), [])
        res.eq("notlisted.test reached upstream", E.HttpHandler.find(m + "-notlisted"), [])
    delete(ctx, res, k)
    return R, m


def case_egress_default(ctx, res):
    """"network": "default": the policy in force (the allowlist): allowed.test answers through the
    bridge and the gateway, notlisted.test is refused (403), the origin is not reachable directly."""
    R, m = egress_probe(ctx, res, "default")
    if R is None:
        return
    res.eq("allowed.test: status", R["allowed"].get("status"), 200)
    seen = E.HttpHandler.find(m + "-allowed")
    res.eq("requests seen by allowed.test's origin", len(seen), 1)
    res.eq("notlisted.test: status", R["notlisted"].get("status"), 403)
    res.check(R["proxy"], "control: no proxy variable in the kernel's environment")


def case_egress_none(ctx, res):
    """"network": "none" under the same policy: nothing reaches any origin."""
    R, m = egress_probe(ctx, res, "none")
    if R is None:
        return
    res.check("status" not in R["allowed"], "allowed.test answered a kernel without network: %r" % R["allowed"])
    res.eq("requests seen by allowed.test's origin", E.HttpHandler.find(m + "-allowed"), [])


EGRESS_CASES = [("egress: network default follows the allowlist", case_egress_default),
                ("egress: network none reaches nothing", case_egress_none)]


CASES = [("setup", case_setup), ("files", case_files), ("tmp", case_tmp), ("processes", case_processes),
         ("daemon-api", case_daemon_api), ("network", case_network), ("network-none", case_network_none),
         ("environment", case_environment), ("credentials", case_credentials), ("host-uid", case_host_uid),
         ("syscalls", case_syscalls)]
CASES += [("escape: " + n[len("3 escape: "):], escape_case(f)) for n, f in X.CASES if n.startswith("3 escape")]
CASES += [("dir-fill: " + how, (lambda h: lambda ctx, res: dir_fill(ctx, res, h))(how)) for how in FILL]
CASES += [("alive-and-deleted", case_alive)]


def add_args(ap):
    ap.add_argument("--build-root", help="where seccomp-export and try-syscall are (default: the daemon's ../..)")
    ap.add_argument("--egress", action="store_true", help="only the network policy cases, in namespaces of "
                    "their own with egress-e2e.py's test origins (needs root)")


def setup(args, cleanups):
    """--egress: in namespaces of its own, with egress-e2e.py's test origins and allowlist."""
    if not args.egress:
        return None
    if os.environ.get(EGRESS_INNER) != "1":
        T.enter_namespaces(sys.argv[1:], EGRESS_INNER)
    workdir = E.tempfile.mkdtemp(prefix="sr-kernels-egress.")
    cleanups.append(lambda: E.shutil.rmtree(workdir, ignore_errors=True))
    _, servers = E.setup_test_hosts(workdir)
    cleanups.append(lambda: [(srv.shutdown(), srv.server_close()) for srv in servers])
    return E.CONFIG_TEXT + "[Kernels]\nEnable=yes\n"


def main():
    return K.test_main(__doc__, lambda args: EGRESS_CASES if args.egress else CASES, BUDGET,
                       lambda d, args: Ctx(d, args.build_root or
                                           os.path.dirname(os.path.dirname(os.path.abspath(args.daemon)))),
                       always=("setup",), add_args=add_args, setup=setup,
                       kernels_of=lambda ctx: [k.id for k in ctx.kernels.values()])


if __name__ == "__main__":
    sys.exit(main())
