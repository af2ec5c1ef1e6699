#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the execution path of sandbox-runnerd: POST /execute and /execute-shell
against the real daemon, real bwrap and the real seccomp filter.

    /usr/bin/python3 tests/integration/execute.py --daemon BUILD/src/sandbox-runnerd
                                                  [--verbose] [--keep-tmp] [--only SUBSTRING]
                                                  [--dialect sciencediscovery]

Starts the daemon by hand (no systemd) on an ephemeral 127.0.0.1 port with a private temp dir
(credentials, config with AllowUnscoped=yes and MaxOutputBytes=4K, state and runtime dirs) and a
canary secret in its environment, then runs: results and semantics of runs, output retention,
an escape battery from inside the sandbox, persistent-kernel refusal, replay protection,
per-workspace concurrency, lifetime (background processes, client disconnect), timeouts, bad
requests, and a clean shutdown.  Prints TAP, exits 1 on any failure.  Bounded: < 90 s; traffic
only to 127.0.0.1.

--dialect sciencediscovery: the daemon also listens in the ScienceDiscovery dialect (docs/api.md
section 15), and the escape battery (the "3 escape" cases, only those) runs through it: its python
run as their signed POST /execute, its shell runs as their POST /execute-shell (bash -euo
pipefail: the battery's shell part starts with "set +e", as it probes commands that fail).
"""

import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import subprocess
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import sd_lib as S                                                         # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import HttpError, Result, now, trunc                      # noqa: E402

BUDGET = 85.0           # seconds for everything; the watchdog kills the daemon after it
RUN_TIMEOUT = 12.0      # read timeout of an ordinary execution request
FINAL = "10 SIG"        # cases that stop the daemon (SIGTERM, SIGHUP: always run, last)


# --------------------------------------------------------------------------------------------
# Context: the daemon, signed requests, shared fixtures

class Ctx:
    def __init__(self, daemon, budget, verbose):
        self.d = daemon
        self.budget = budget
        self.verbose = verbose
        self.seq = 0
        self.lock = threading.Lock()
        self.run_mark = "srtest-%s" % secrets.token_hex(8)   # in the env of long-running payloads
        self.fixtures = {}
        self.sd = None                  # an SdClient: runs go through the ScienceDiscovery listener

    @property
    def listen_port(self):
        """The port the runs under test were sent to."""
        return self.d.sd_port if self.sd else self.d.port

    # ids
    def new_id(self, prefix="x"):
        with self.lock:
            self.seq += 1
            return "%s-%d-%s" % (prefix, self.seq, secrets.token_hex(4))

    def mark(self, what):
        return "%s-%s" % (self.run_mark, what)

    # requests
    def bearer(self):
        return ("Authorization", "Bearer " + self.d.token)

    def signed(self, method, path, body):
        ts = int(time.time())
        return [("X-Sandbox-Timestamp", str(ts)),
                ("X-Sandbox-Signature", L.signature(self.d.key, ts, method, path, body))]

    def exec_bytes(self, body, path):
        """(headers, raw body) of a signed execution request; body is a dict (executionId and
        workspaceId are filled in unless present; a value None removes the key)."""
        b = dict(body)
        b.setdefault("executionId", self.new_id())
        b.setdefault("workspaceId", "ws-main")
        b = {k: v for k, v in b.items() if v is not None}
        raw = json.dumps(b).encode()
        h = [self.bearer(), ("Content-Type", "application/json")] + self.signed("POST", path, raw)
        return h, raw, b

    def post(self, body, path="/execute", timeout=RUN_TIMEOUT):
        """Return (Response or None, error string or None, the body sent)."""
        h, raw, b = self.exec_bytes(body, path)
        try:
            return L.http(self.d.port, "POST", path, h, raw, timeout=self.budget.bound(timeout)), None, b
        except (OSError, HttpError) as e:
            return None, "%s: %s" % (type(e).__name__, e), b

    def get(self, path, auth=True, timeout=5.0):
        h = [self.bearer()] if auth else []
        try:
            return L.http(self.d.port, "GET", path, h, timeout=self.budget.bound(timeout)), None
        except (OSError, HttpError) as e:
            return None, "%s: %s" % (type(e).__name__, e)


def describe_sent(res, b):
    res.note("request: " + trunc(json.dumps(b), 500))


def sd_run(res, ctx, body, timeout):
    """expect_run() through the ScienceDiscovery listener: {workspaceId, language, code} as their
    signed /execute (python) or /execute-shell (shell), the answer in our shape's terms."""
    lang, code = body.get("language"), body.get("code")
    key = body.get("workspaceId", "ws-main")
    if lang not in ("python", "shell") or set(body) - {"workspaceId", "language", "code"}:
        res.fail("not expressible in the ScienceDiscovery dialect: %r" % sorted(body))
        return None
    # One agent per workspace: their runner orders the runs of one (session, agent), so the
    # concurrency cases' runs in two workspaces are two agents' (as their API keys workspaces).
    agent = "agent-" + key
    try:
        if lang == "python":
            r = ctx.sd.execute(code, key, timeout=ctx.budget.bound(timeout), agentId=agent)
        else:
            r = ctx.sd.execute_shell("set +e\n" + code, key, timeout=ctx.budget.bound(timeout), agentId=agent)
    except (OSError, HttpError) as e:
        res.fail("no answer: %s: %s" % (type(e).__name__, e))
        return None
    j = r.json()
    if r.status != 200 or not isinstance(j, dict):
        res.fail("expected 200 with their result JSON, got " + r.brief())
        return None
    res.note("their answer (%.2fs): %s" % (r.elapsed, trunc(json.dumps(j), 900)))
    return {"status": "exited", "exitCode": j.get("exitCode"), "stdout": j.get("stdout"),
            "stderr": j.get("stderr"), "_elapsed": r.elapsed}


def expect_run(res, ctx, body, path="/execute", timeout=RUN_TIMEOUT):
    """POST an execution that must start: 200 with the answer JSON.  Return the JSON or None."""
    if ctx.sd:
        return sd_run(res, ctx, body, timeout)
    r, err, b = ctx.post(body, path, timeout)
    if r is None:
        res.fail("no answer: %s" % err)
        describe_sent(res, b)
        return None
    j = r.json()
    if r.status != 200 or not isinstance(j, dict):
        res.fail("expected 200 with the answer JSON, got " + r.brief())
        describe_sent(res, b)
        return None
    res.note("answer (%.2fs): %s" % (r.elapsed, trunc(json.dumps(j), 900)))
    j["_elapsed"] = r.elapsed
    return j


def expect_error(res, ctx, body, status, code, path="/execute", timeout=RUN_TIMEOUT):
    r, err, b = ctx.post(body, path, timeout)
    if r is None:
        res.fail("no answer: %s" % err)
        describe_sent(res, b)
        return None
    res.note("answered " + r.brief(300))
    ok = res.check(r.status == status and r.error_code() == code,
                   "expected %d %s, got %d error=%r" % (status, code, r.status, r.error_code()))
    j = r.json()
    if isinstance(j, dict) and not isinstance(j.get("message"), str):
        res.fail("error JSON has no string 'message'")
        ok = False
    if not ok:
        describe_sent(res, b)
    return r


def expect_exited(res, j, code=0, stdout=None, stderr=None):
    if j is None:
        return False
    ok = res.eq("status", j.get("status"), "exited")
    ok &= res.eq("exitCode", j.get("exitCode"), code)
    if stdout is not None:
        ok &= res.eq("stdout", j.get("stdout"), stdout)
    if stderr is not None:
        ok &= res.eq("stderr", j.get("stderr"), stderr)
    return ok


# --------------------------------------------------------------------------------------------
# Cases: one TAP point each

CASES, case = T.case_registry()


# ---- 1. semantics of runs

@case("1 python print(6*7) -> exited 0, stdout '42\\n', full answer shape")
def c_python(ctx, res):
    j = expect_run(res, ctx, {"language": "python", "code": "print(6*7)"})
    if not expect_exited(res, j, 0, "42\n", ""):
        return
    res.eq("signal", j.get("signal"), None)
    res.eq("stdoutEncoding", j.get("stdoutEncoding"), "utf-8")
    res.eq("stdoutBytes", j.get("stdoutBytes"), 3)
    res.eq("stdoutTruncated", j.get("stdoutTruncated"), False)
    res.eq("stderrBytes", j.get("stderrBytes"), 0)
    res.eq("workspaceId", j.get("workspaceId"), "ws-main")
    res.check(isinstance(j.get("executionId"), str) and j.get("executionId"), "no executionId in the answer")
    res.check(isinstance(j.get("durationMs"), int) and j["durationMs"] >= 0, "durationMs is not an integer >= 0")
    res.check(isinstance(j.get("resources"), dict), "no 'resources' object")
    res.check(isinstance(j.get("limits"), dict), "no 'limits' object")
    res.check(os.path.isdir(ctx.d.workspace_path("ws-main")),
              "the workspace directory %s does not exist on the host" % ctx.d.workspace_path("ws-main"))


@case("1 shell 'echo hi; echo err >&2; exit 3' -> exitCode 3, stdout/stderr exact")
def c_shell(ctx, res):
    j = expect_run(res, ctx, {"language": "shell", "code": "echo hi; echo err >&2; exit 3"})
    expect_exited(res, j, 3, "hi\n", "err\n")


@case("1 argv ['/bin/echo','a b','c'] -> 'a b c\\n'")
def c_argv(ctx, res):
    j = expect_run(res, ctx, {"argv": ["/bin/echo", "a b", "c"]})
    expect_exited(res, j, 0, "a b c\n")


@case("1 /execute-shell command 'echo $((2+3))' -> '5\\n'")
def c_execute_shell(ctx, res):
    j = expect_run(res, ctx, {"command": "echo $((2+3))"}, path="/execute-shell")
    expect_exited(res, j, 0, "5\n")


@case("1 stdin is passed to argv ['cat']")
def c_stdin(ctx, res):
    data = "line one\nline two \u00fcn\u00efc\u00f6de\n"
    j = expect_run(res, ctx, {"argv": ["cat"], "stdin": data})
    expect_exited(res, j, 0, data)


@case("1 env {'MY_VAR':'x'} is visible to the payload")
def c_env(ctx, res):
    j = expect_run(res, ctx, {"language": "shell", "code": "printf '%s\\n' \"$MY_VAR\"", "env": {"MY_VAR": "x"}})
    expect_exited(res, j, 0, "x\n")


@case("1 env {'PATH':'/evil'} -> 400 invalid_request")
def c_env_path(ctx, res):
    expect_error(res, ctx, {"argv": ["true"], "env": {"PATH": "/evil"}}, 400, "invalid_request")


@case("1 env {'LD_PRELOAD':...} -> 400 invalid_request")
def c_env_ld(ctx, res):
    expect_error(res, ctx, {"argv": ["true"], "env": {"LD_PRELOAD": "/workspace/evil.so"}}, 400, "invalid_request")


@case("1 baseline: cwd /workspace, HOME=/workspace, PATH=/usr/local/bin:/usr/bin:/bin, LANG, no daemon env")
def c_baseline(ctx, res):
    code = ("import os, json\nprint(os.getcwd())\n"
            "print(json.dumps(dict(os.environ), sort_keys=True))\n")
    j = expect_run(res, ctx, {"language": "python", "code": code})
    if not expect_exited(res, j, 0):
        return
    lines = j.get("stdout", "").split("\n")
    res.eq("os.getcwd()", lines[0], "/workspace")
    try:
        env = json.loads(lines[1])
    except (ValueError, IndexError):
        res.fail("could not parse the environment printed by the payload")
        return
    res.eq("HOME", env.get("HOME"), "/workspace")
    res.eq("PATH", env.get("PATH"), "/usr/local/bin:/usr/bin:/bin")
    for k in ("SANDBOX_TEST_SECRET", "CREDENTIALS_DIRECTORY", "STATE_DIRECTORY", "RUNTIME_DIRECTORY",
              "NOTIFY_SOCKET", "LISTEN_FDS", "INVOCATION_ID"):
        res.check(k not in env, "the daemon's %s leaked into the sandbox environment" % k)
    blob = json.dumps(env)
    for what, s in (("canary secret", ctx.d.canary), ("API token", ctx.d.token), ("signing key", ctx.d.key_text)):
        res.check(s not in blob, "the %s is in the sandbox environment" % what)
    res.note("environment: " + trunc(blob, 600))


@case("1 cwd 'sub/dir' (made by a first run 'mkdir -p sub/dir') -> pwd /workspace/sub/dir")
def c_cwd(ctx, res):
    j = expect_run(res, ctx, {"language": "shell", "code": "mkdir -p sub/dir"})
    if not expect_exited(res, j, 0):
        return
    res.check(os.path.isdir(os.path.join(ctx.d.workspace_path("ws-main"), "sub", "dir")),
              "sub/dir made in the sandbox is not in the host workspace directory")
    j = expect_run(res, ctx, {"language": "shell", "code": "pwd", "cwd": "sub/dir"})
    expect_exited(res, j, 0, "/workspace/sub/dir\n")


@case("1 cwd '../x' -> 400 invalid_request")
def c_cwd_dotdot(ctx, res):
    expect_error(res, ctx, {"argv": ["pwd"], "cwd": "../x"}, 400, "invalid_request")


@case("1 cwd that does not exist -> 400 invalid_request")
def c_cwd_missing(ctx, res):
    expect_error(res, ctx, {"argv": ["pwd"], "cwd": "no/such/dir-%s" % secrets.token_hex(3)}, 400,
                 "invalid_request")


@case("1 python traceback shows the failing source line")
def c_traceback(ctx, res):
    code = "def f():\n    raise RuntimeError('boom-77')  # sr-trace-line\n\nf()\n"
    j = expect_run(res, ctx, {"language": "python", "code": code})
    if not expect_exited(res, j, 1):
        return
    err = j.get("stderr", "")
    res.check("RuntimeError: boom-77" in err, "stderr has no 'RuntimeError: boom-77'")
    res.check("raise RuntimeError('boom-77')  # sr-trace-line" in err,
              "stderr does not show the failing line's text: %r" % trunc(err, 600))


@case("1 python imports a module a first run wrote into /workspace")
def c_module(ctx, res):
    j = expect_run(res, ctx, {"language": "python", "code": "open('m.py','w').write('X=1\\n')"})
    if not expect_exited(res, j, 0):
        return
    host = os.path.join(ctx.d.workspace_path("ws-main"), "m.py")
    res.check(os.path.isfile(host), "m.py is not in the host workspace directory %s" % host)
    j = expect_run(res, ctx, {"language": "python", "code": "import m; print(m.X)"})
    expect_exited(res, j, 0, "1\n")


@case("1 each run has a fresh /tmp")
def c_fresh_tmp(ctx, res):
    j = expect_run(res, ctx, {"language": "shell", "code": "touch /tmp/sr-fresh-mark && echo made"})
    if not expect_exited(res, j, 0, "made\n"):
        return
    j = expect_run(res, ctx, {"language": "shell", "code": "ls -A /tmp; echo end"})
    if expect_exited(res, j, 0):
        res.check("sr-fresh-mark" not in j.get("stdout", ""), "/tmp of the previous run is still there")


@case("1 code is bound read-only at /.sandbox/code")
def c_code_ro(ctx, res):
    code = "cat /.sandbox/code\nif echo x >> /.sandbox/code; then echo WRIT''ABLE; fi 2>/dev/null\n"
    j = expect_run(res, ctx, {"language": "shell", "code": code})
    if j is None:
        return
    out = j.get("stdout", "")
    res.check(out.startswith(code), "/.sandbox/code does not hold the code: %r" % trunc(out, 200))
    res.check("WRITABLE" not in out, "/.sandbox/code is writable from the sandbox")


@case("1 shell 'kill -9 $$' -> status signaled, signal 9")
def c_signaled(ctx, res):
    j = expect_run(res, ctx, {"language": "shell", "code": "echo before; kill -9 $$; echo after"})
    if j is None:
        return
    res.eq("status", j.get("status"), "signaled")
    res.eq("signal", j.get("signal"), 9)
    res.eq("exitCode", j.get("exitCode"), None)
    res.eq("stdout", j.get("stdout"), "before\n")


# ---- 2. output retention

@case("2 100000 bytes of stdout with MaxOutputBytes=4K -> head+tail kept, 'bytes omitted', counts exact")
def c_truncate(ctx, res):
    prog = "import sys; sys.stdout.write('HEAD-MARK-' + 'a' * (100000 - 20) + '-TAIL-MARK')"
    j = expect_run(res, ctx, {"argv": ["python3", "-c", prog]})
    if j is None:
        return
    res.notes = [n for n in res.notes if not n.startswith("answer")]
    out = j.get("stdout")
    res.note("status=%s stdoutBytes=%r stdoutTruncated=%r len(stdout)=%s head=%r tail=%r" % (
        j.get("status"), j.get("stdoutBytes"), j.get("stdoutTruncated"),
        len(out) if isinstance(out, str) else None,
        out[:40] if isinstance(out, str) else None, out[-40:] if isinstance(out, str) else None))
    res.eq("status", j.get("status"), "exited")
    res.eq("stdoutBytes", j.get("stdoutBytes"), 100000)
    res.eq("stdoutTruncated", j.get("stdoutTruncated"), True)
    res.eq("stdoutEncoding", j.get("stdoutEncoding"), "utf-8")
    if not isinstance(out, str):
        res.fail("stdout is not a string")
        return
    res.check(out.startswith("HEAD-MARK-"), "stdout does not start with the head marker")
    res.check(out.endswith("-TAIL-MARK"), "stdout does not end with the tail marker")
    res.check("bytes omitted" in out, "stdout has no 'bytes omitted' marker")
    res.check(len(out.encode()) <= 4096 + 128, "stdout is %d bytes, more than 4K + a marker" % len(out.encode()))
    res.check(len(out.encode()) >= 2048, "stdout is only %d bytes: less than half of 4K retained" % len(out.encode()))


@case("2 invalid UTF-8 stdout (b'\\xff\\xfe') -> stdoutEncoding base64")
def c_base64(ctx, res):
    j = expect_run(res, ctx, {"argv": ["python3", "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe')"]})
    if not expect_exited(res, j, 0):
        return
    res.eq("stdoutEncoding", j.get("stdoutEncoding"), "base64")
    res.eq("stdoutBytes", j.get("stdoutBytes"), 2)
    try:
        res.eq("base64-decoded stdout", base64.b64decode(j.get("stdout", ""), validate=True), b"\xff\xfe")
    except (ValueError, TypeError) as e:
        res.fail("stdout is not valid base64: %s" % e)


# ---- 3. escape battery (one python run and one shell run; each point checks one part)

BATTERY_PY = r'''
import ctypes, errno, json, os, socket, time
R = {}
def rd(p, limit=1 << 20):
    try:
        with open(p, 'rb') as f:
            return {'ok': True, 'data': f.read(limit).decode('latin-1')}
    except OSError as e:
        return {'ok': False, 'errno': e.errno, 'err': str(e)}
R['shadow'] = rd('/etc/shadow')
for p in ('/proc/1/environ', '/proc/1/cmdline', '/proc/self/environ', '/proc/self/cmdline'):
    R[p] = rd(p)
pids = sorted(int(x) for x in os.listdir('/proc') if x.isdigit())
R['pids'] = pids
R['cmdlines'] = {str(p): rd('/proc/%d/cmdline' % p, 4096).get('data') for p in pids}
def tcp(host, port, t=3.0):
    t0 = time.monotonic()
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError as e:
        return {'stage': 'socket', 'errno': e.errno, 'err': str(e), 't': time.monotonic() - t0}
    s.settimeout(t)
    try:
        s.connect((host, port))
        return {'stage': 'connected', 't': time.monotonic() - t0}
    except socket.timeout:
        return {'stage': 'timeout', 't': time.monotonic() - t0}
    except OSError as e:
        return {'stage': 'connect', 'errno': e.errno, 'err': str(e), 't': time.monotonic() - t0}
    finally:
        s.close()
R['daemon'] = tcp('127.0.0.1', DAEMON_PORT)
R['net_dev'] = [ln.split(':')[0].strip() for ln in (rd('/proc/net/dev').get('data') or '').splitlines()[2:]]
R['net_tcp'] = [(ln.split()[1], ln.split()[3]) for f in ('/proc/net/tcp', '/proc/net/tcp6')
                for ln in (rd(f).get('data') or '').splitlines()[1:] if len(ln.split()) > 3]
R['net_route'] = (rd('/proc/net/route').get('data') or '').splitlines()[1:]
R['ten'] = tcp('10.0.0.1', 80)
def look(p):
    if not os.path.lexists(p):
        return {'exists': False}
    try:
        return {'exists': True, 'entries': sorted(os.listdir(p))[:50]}
    except OSError as e:
        return {'exists': True, 'errno': e.errno}
R['paths'] = {p: look(p) for p in ('/var/lib', '/root', '/home', '/var', '/etc/sandbox-runner', HOST_STATE)}
R['root'] = sorted(os.listdir('/'))
R['up'] = sorted(os.listdir('/workspace/..'))
R['up_real'] = os.path.realpath('/workspace/..')
R['other_host_path'] = os.path.lexists(HOST_OTHER)
R['other_rel'] = os.path.lexists('/workspace/../' + OTHER_WS)
found = []
for top in os.listdir('/'):
    if top in ('proc', 'sys', 'dev', 'usr'):
        continue
    for dp, dn, fn in os.walk('/' + top, onerror=lambda e: None):
        if OTHER_MARKER in fn or OTHER_MARKER in dn or OTHER_WS in dn:
            found.append(dp)
R['other_found'] = found
R['uid'] = [os.getuid(), os.geteuid(), os.getgid()]
try:
    open('/usr/.sr-escape-test', 'w').close()
    R['usr_write'] = {'ok': True}
except OSError as e:
    R['usr_write'] = {'ok': False, 'errno': e.errno}
try:
    os.mkdir('/usr/lib/.sr-escape-test')
    R['usr_mkdir'] = {'ok': True}
except OSError as e:
    R['usr_mkdir'] = {'ok': False, 'errno': e.errno}
caps = {}
with open('/proc/self/status') as f:
    for ln in f:
        if ln.startswith('Cap') or ln.startswith('NoNewPrivs') or ln.startswith('Seccomp'):
            k, _, v = ln.partition(':')
            caps[k] = v.strip()
R['status'] = caps
libc = ctypes.CDLL(None, use_errno=True)
def call(fn, *a):
    ctypes.set_errno(0)
    rc = fn(*a)
    return {'rc': rc, 'errno': ctypes.get_errno()}
R['unshare_user'] = call(libc.unshare, 0x10000000)
R['unshare_mnt'] = call(libc.unshare, 0x00020000)
R['mount_tmpfs'] = call(libc.mount, b'x', b'/tmp', b'tmpfs', ctypes.c_ulong(0), None)
if hasattr(os, 'unshare'):
    try:
        os.unshare(os.CLONE_NEWUSER)
        R['os_unshare'] = {'ok': True}
    except OSError as e:
        R['os_unshare'] = {'ok': False, 'errno': e.errno}
with open('/workspace/battery.json', 'w') as f:
    json.dump(R, f)
print('battery done')
'''

BATTERY_SH = r'''
echo "id=$(id -u)"
if command -v unshare >/dev/null 2>&1; then unshare -U true 2>/dev/null; echo "unshare=$?"; else echo "unshare=missing"; fi
if command -v mount >/dev/null 2>&1; then mount -t tmpfs x /tmp 2>/dev/null; echo "mount=$?"; else echo "mount=missing"; fi
touch /usr/.sr-escape-sh 2>/dev/null; echo "touchusr=$?"
'''


def battery(ctx, res):
    """Run the escape battery once; return (python results dict or None, shell answer or None)."""
    if "battery" in ctx.fixtures:
        return ctx.fixtures["battery"]
    other_ws = "ws-other-%s" % secrets.token_hex(3)
    marker = "sr-other-marker-%s" % secrets.token_hex(4)
    ctx.fixtures["battery"] = (None, None)
    ctx.fixtures["battery_other"] = (other_ws, marker)
    j = expect_run(res, ctx, {"workspaceId": other_ws, "language": "shell",
                              "code": "echo secret > %s.txt; mkdir %s.d" % (marker, marker)})
    if not expect_exited(res, j, 0):
        res.fail("could not prepare the other workspace")
    code = BATTERY_PY
    for k, v in (("DAEMON_PORT", str(ctx.listen_port)), ("HOST_OTHER", repr(ctx.d.workspace_path(other_ws))),
                 ("HOST_STATE", repr(ctx.d.state)), ("OTHER_WS", repr(other_ws)), ("OTHER_MARKER", repr(marker))):
        code = code.replace(k, v)
    ws = "ws-escape"
    j = expect_run(res, ctx, {"workspaceId": ws, "language": "python", "code": code}, timeout=20)
    py = None
    if j is not None:
        if j.get("status") != "exited" or j.get("exitCode") != 0:
            res.fail("the battery payload did not exit 0: status=%r exitCode=%r stderr=%r" %
                     (j.get("status"), j.get("exitCode"), trunc(j.get("stderr"), 1500)))
        try:
            with open(os.path.join(ctx.d.workspace_path(ws), "battery.json")) as f:
                py = json.load(f)
        except (OSError, ValueError) as e:
            res.fail("no battery results in the host workspace: %s" % e)
    sh = expect_run(res, ctx, {"workspaceId": ws, "language": "shell", "code": BATTERY_SH})
    ctx.fixtures["battery"] = (py, sh)
    return py, sh


def battery_py(ctx, res):
    """The python battery's results, or None (and a failure) when it did not run.  The set-up's
    own diagnostics are shown on the first point that reports them."""
    if "battery" not in ctx.fixtures:
        sub = Result("battery")
        battery(ctx, sub)
        ctx.fixtures["battery_log"] = sub
        first = True
    else:
        first = False
    sub = ctx.fixtures["battery_log"]
    py, _ = ctx.fixtures["battery"]
    if py is None:
        res.fail("the escape battery did not run")
    if first and sub.failures:
        res.failures += sub.failures
        res.notes += sub.notes
    elif sub.failures:
        res.note("(the battery's set-up failed: see the first case 3 point)")
    return py


def secrets_in(ctx, text):
    found = []
    for what, s in (("API token", ctx.d.token), ("signing key", ctx.d.key_text),
                    ("SANDBOX_TEST_SECRET value", ctx.d.canary), ("name SANDBOX_TEST_SECRET", "SANDBOX_TEST_SECRET"),
                    ("CREDENTIALS_DIRECTORY", "CREDENTIALS_DIRECTORY"), ("credentials path", ctx.d.creds)):
        if s in text:
            found.append(what)
    return found


@case("3 escape: /etc/shadow cannot be read")
def c_shadow(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    r = py["shadow"]
    res.note("/etc/shadow: %r" % ({k: v for k, v in r.items() if k != "data"},))
    res.check(not r.get("ok"), "/etc/shadow is readable in the sandbox (%d bytes)" % len(r.get("data", "")))
    if not r.get("ok"):
        res.check(r.get("errno") in (2, 13), "reading /etc/shadow failed with errno %r, expected ENOENT/EACCES" %
                  r.get("errno"))


for _p in ("/proc/1/environ", "/proc/1/cmdline", "/proc/self/environ"):
    def _mk(p):
        def fn(ctx, res):
            py = battery_py(ctx, res)
            if py is None:
                return
            r = py[p]
            if not r.get("ok"):
                res.note("%s not readable: errno %r (fine)" % (p, r.get("errno")))
                return
            data = r.get("data", "")
            res.note("%s: %r" % (p, trunc(data.replace("\0", " | "), 800)))
            bad = secrets_in(ctx, data)
            res.check(not bad, "%s shows %s" % (p, ", ".join(bad)))
        return fn
    case("3 escape: %s has no token, signing key, SANDBOX_TEST_SECRET, CREDENTIALS_DIRECTORY" % _p)(_mk(_p))


@case("3 escape: /proc lists only the sandbox's own few pids (not the daemon's)")
def c_proc_pids(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    pids = py["pids"]
    res.note("pids in the sandbox's /proc: %s" % trunc(str(pids), 300))
    res.note("cmdlines: %s" % trunc(json.dumps(py["cmdlines"]), 800))
    res.check(len(pids) <= 8, "%d pids visible in /proc: not a fresh pid namespace / procfs" % len(pids))
    if ctx.d.pid > 16:
        res.check(ctx.d.pid not in pids, "the daemon's pid %d appears in the sandbox's /proc" % ctx.d.pid)
    for pid, cl in py["cmdlines"].items():
        if cl and "sandbox-runnerd" in cl:
            res.fail("pid %s in the sandbox is the daemon: %r" % (pid, cl))
        if cl:
            bad = secrets_in(ctx, cl)
            res.check(not bad, "/proc/%s/cmdline shows %s" % (pid, ", ".join(bad)))


@case("3 escape: connect to the daemon's 127.0.0.1 port fails (own network namespace)")
def c_net_daemon(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    r = py["daemon"]
    res.note("connect 127.0.0.1:%d from the sandbox: %r" % (ctx.listen_port, r))
    if r["stage"] == "socket":
        res.note("socket(AF_INET) itself was refused (seccomp): also a failure to connect")
    else:
        res.check(r["stage"] == "connect" and r.get("errno") == 111,
                  "expected ECONNREFUSED (111) from the sandbox's own loopback, got %r" % r)
    # Independent of seccomp: the sandbox's /proc/net shows its own namespace, where the
    # daemon's listening socket does not exist.
    port_hex = ":%04X" % ctx.listen_port
    listening = [a for a, st in py.get("net_tcp", []) if a.endswith(port_hex)]
    res.note("network interfaces in the sandbox: %s; tcp sockets: %d" % (py.get("net_dev"), len(py.get("net_tcp", []))))
    res.check(py.get("net_dev") == ["lo"], "interfaces in the sandbox: %r, expected only lo" % py.get("net_dev"))
    res.check(not listening, "the daemon's socket %s is visible in the sandbox's /proc/net/tcp: shared network "
              "namespace" % listening)


@case("3 escape: connect to 10.0.0.1:80 fails fast (network unreachable)")
def c_net_ten(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    r = py["ten"]
    res.note("connect 10.0.0.1:80 from the sandbox: %r" % r)
    res.check(r["stage"] in ("socket", "connect"), "connect did not fail: %r" % r)
    if r["stage"] == "connect":
        res.check(r.get("errno") in (101, 113, 1, 13), "errno %r, expected ENETUNREACH (101)" % r.get("errno"))
    res.check(r["t"] < 1.0, "took %.2fs, expected an immediate failure" % r["t"])
    res.check(not py.get("net_route"), "the sandbox has IPv4 routes: %r" % py.get("net_route"))


@case("3 escape: host paths /var/lib, /root, /home, the state dir are not visible")
def c_host_paths(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    res.note("root of the sandbox: %s" % py["root"])
    for p, r in py["paths"].items():
        res.note("%s: %r" % (p, r))
        if r.get("exists") and r.get("entries"):
            res.fail("%s is visible in the sandbox with entries %s" % (p, trunc(str(r["entries"]), 200)))


@case("3 escape: another workspace is not visible; /workspace/.. is the sandbox root")
def c_other_ws(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    other_ws, marker = ctx.fixtures["battery_other"]
    res.note("/workspace/.. (%s) lists %s" % (py["up_real"], py["up"]))
    res.eq("realpath(/workspace/..)", py["up_real"], "/")
    res.check(py["up"] == py["root"], "/workspace/.. is not the sandbox root")
    res.check("workspaces" not in py["up"] and other_ws not in py["up"], "/workspace/.. shows the host's workspaces")
    res.check(not py["other_host_path"], "the other workspace's host path %s exists in the sandbox" %
              ctx.d.workspace_path(other_ws))
    res.check(not py["other_rel"], "/workspace/../%s exists" % other_ws)
    res.check(not py["other_found"], "the other workspace's files are reachable at %s" % py["other_found"])
    res.check(os.path.exists(os.path.join(ctx.d.workspace_path(other_ws), marker + ".txt")),
              "control: the other workspace's marker file is not on the host (the check proves nothing)")


@case("3 escape: id -u is 1000 (and getuid/geteuid in python)")
def c_uid(ctx, res):
    py = battery_py(ctx, res)
    _, sh = ctx.fixtures.get("battery", (None, None))
    if sh is not None:
        res.note("shell battery: %r" % sh.get("stdout"))
        res.check("id=1000\n" in sh.get("stdout", ""), "id -u did not print 1000")
    else:
        res.fail("shell battery did not run")
    if py is not None:
        res.eq("[getuid, geteuid, getgid]", py["uid"][:2], [1000, 1000])


@case("3 escape: /usr is read-only")
def c_usr_ro(ctx, res):
    py = battery_py(ctx, res)
    _, sh = ctx.fixtures.get("battery", (None, None))
    if py is not None:
        res.note("python: create /usr/.sr-escape-test %r, mkdir /usr/lib/.sr-escape-test %r" %
                 (py["usr_write"], py["usr_mkdir"]))
        res.check(not py["usr_write"]["ok"], "a file could be created in /usr")
        res.check(not py["usr_mkdir"]["ok"], "a directory could be created in /usr/lib")
    if sh is not None:
        res.check("touchusr=0" not in sh.get("stdout", ""), "touch /usr/.sr-escape-sh succeeded")
    for p in ("/usr/.sr-escape-test", "/usr/lib/.sr-escape-test", "/usr/.sr-escape-sh"):
        res.check(not os.path.lexists(p), "%s appeared on the HOST" % p)


@case("3 escape: CapEff/CapPrm/CapBnd (and CapInh/CapAmb) are all zero")
def c_caps(ctx, res):
    py = battery_py(ctx, res)
    if py is None:
        return
    st = py["status"]
    res.note("/proc/self/status: %r" % st)
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        if k not in st:
            res.check(k == "CapAmb", "%s missing from /proc/self/status" % k)
            continue
        res.check(int(st[k], 16) == 0, "%s is %s, expected 0" % (k, st[k]))
    res.check(st.get("Seccomp") == "2", "Seccomp is %r, expected 2 (filter)" % st.get("Seccomp"))


@case("3 escape: creating a user namespace fails (unshare(CLONE_NEWUSER), unshare -U true)")
def c_userns(ctx, res):
    py = battery_py(ctx, res)
    _, sh = ctx.fixtures.get("battery", (None, None))
    if py is not None:
        res.note("unshare(CLONE_NEWUSER): %r; unshare(CLONE_NEWNS): %r; os.unshare: %r" %
                 (py["unshare_user"], py["unshare_mnt"], py.get("os_unshare", "n/a (python < 3.12)")))
        res.check(py["unshare_user"]["rc"] != 0, "unshare(CLONE_NEWUSER) succeeded in the sandbox")
        res.check(py["unshare_user"]["errno"] in (1, 22, 28, 38),
                  "unshare(CLONE_NEWUSER) errno %r, expected EPERM" % py["unshare_user"]["errno"])
        res.check(py["unshare_mnt"]["rc"] != 0, "unshare(CLONE_NEWNS) succeeded in the sandbox")
        if "os_unshare" in py:
            res.check(not py["os_unshare"]["ok"], "os.unshare(CLONE_NEWUSER) succeeded")
    if sh is not None:
        out = sh.get("stdout", "")
        if "unshare=missing" in out:
            res.note("no unshare binary in the sandbox")
        else:
            res.check("unshare=0" not in out, "'unshare -U true' succeeded in the sandbox")
            res.check("unshare=127" not in out and "unshare=126" not in out,
                      "'unshare -U true' could not be run at all (so it proves nothing)")


@case("3 escape: mount -t tmpfs x /tmp fails")
def c_mount(ctx, res):
    py = battery_py(ctx, res)
    _, sh = ctx.fixtures.get("battery", (None, None))
    if py is not None:
        res.note("mount(2): %r" % py["mount_tmpfs"])
        res.check(py["mount_tmpfs"]["rc"] != 0, "mount(tmpfs, /tmp) succeeded in the sandbox")
    if sh is not None:
        res.check("mount=0" not in sh.get("stdout", ""), "'mount -t tmpfs x /tmp' succeeded in the sandbox")


# ---- 4. persistent kernels

def persistent_case(ctx, res, path, body):
    ws = "ws-persist-%s" % secrets.token_hex(4)
    L.wait_prebuilt_settled(ctx.d.port)   # the pool's builds change the children otherwise
    before = L.children(ctx.d.pid)
    st0, _ = ctx.get("/status")
    b = dict(body, workspaceId=ws, kernelMode="persistent")
    expect_error(res, ctx, b, 400, "persistent_kernel_unsupported", path=path)
    time.sleep(0.2)
    after = L.children(ctx.d.pid)
    st1, _ = ctx.get("/status")
    res.check(not os.path.lexists(ctx.d.workspace_path(ws)),
              "the workspace directory %s was created" % ctx.d.workspace_path(ws))
    res.check(len(after) <= len(before) and set(after) <= set(before),
              "daemon children before %s, after %s: %s" % (before, after,
                                                          [L.describe_pid(p) for p in set(after) - set(before)]))
    try:
        t0 = st0.json()["executions"]["total"]
        t1 = st1.json()["executions"]["total"]
        res.check(t0 == t1, "/status executions.total went from %r to %r" % (t0, t1))
    except (AttributeError, KeyError, TypeError):
        res.note("no /status executions.total to compare")
    started = [ln for ln in ctx.d.log_text().splitlines() if ws in ln and "started" in ln]
    res.check(not started, "the daemon log shows an execution started in %s: %s" % (ws, started))


@case("4 kernelMode persistent on /execute -> 400 persistent_kernel_unsupported, nothing created")
def c_persistent(ctx, res):
    persistent_case(ctx, res, "/execute", {"language": "python", "code": "print(1)"})


@case("4 kernelMode persistent on /execute-shell -> 400 persistent_kernel_unsupported, nothing created")
def c_persistent_shell(ctx, res):
    persistent_case(ctx, res, "/execute-shell", {"command": "echo 1"})


# ---- 5. replay

@case("5 replay: the same executionId twice (sequential) -> 200 then 409 execution_id_conflict")
def c_replay_seq(ctx, res):
    eid = ctx.new_id("replay")
    j = expect_run(res, ctx, {"executionId": eid, "argv": ["true"]})
    if j is not None:
        res.eq("executionId in the answer", j.get("executionId"), eid)
    expect_error(res, ctx, {"executionId": eid, "argv": ["true"]}, 409, "execution_id_conflict")


@case("5 replay: the same new executionId twice concurrently -> exactly one 200 and one 409")
def c_replay_conc(ctx, res):
    eid = ctx.new_id("replay-c")
    reqs = [ctx.exec_bytes({"executionId": eid, "workspaceId": "ws-replay-%d" % i, "argv": ["true"]}, "/execute")
            for i in range(2)]
    out = [None, None]
    go = threading.Barrier(2)

    def worker(i):
        h, raw, _ = reqs[i]
        try:
            go.wait(5)
            out[i] = L.http(ctx.d.port, "POST", "/execute", h, raw, timeout=ctx.budget.bound(RUN_TIMEOUT))
        except Exception as e:                                 # noqa: BLE001
            out[i] = "%s: %s" % (type(e).__name__, e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(RUN_TIMEOUT + 2)
    sts = []
    for o in out:
        if isinstance(o, L.Response):
            res.note(o.brief(300))
            sts.append((o.status, o.error_code()))
        else:
            res.note("no answer: %s" % o)
            sts.append((None, None))
    res.check(sorted(s for s, _ in sts if s is not None) == [200, 409] and
              (409, "execution_id_conflict") in sts,
              "expected one 200 and one 409 execution_id_conflict, got %s" % sts)


# ---- 6. concurrency

def concurrent(ctx, bodies, timeout):
    out = [None] * len(bodies)
    reqs = [ctx.exec_bytes(b, "/execute") for b in bodies]
    go = threading.Barrier(len(bodies))

    def worker(i):
        h, raw, _ = reqs[i]
        try:
            go.wait(5)
            out[i] = L.http(ctx.d.port, "POST", "/execute", h, raw, timeout=ctx.budget.bound(timeout))
        except Exception as e:                                 # noqa: BLE001
            out[i] = "%s: %s" % (type(e).__name__, e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
    t0 = now()
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout + 2)
    return out, now() - t0


def answers(res, out):
    js = []
    for o in out:
        if isinstance(o, L.Response):
            j = o.json()
            if o.status != 200 or not isinstance(j, dict):
                res.fail("expected 200: " + o.brief(400))
                js.append(None)
            else:
                res.note("%.2fs: status=%s exitCode=%s durationMs=%s" % (o.elapsed, j.get("status"),
                                                                       j.get("exitCode"), j.get("durationMs")))
                js.append(j)
        else:
            res.fail("no answer: %s" % o)
            js.append(None)
    return js


@case("6 concurrency: sleep 1 in two DIFFERENT workspaces runs in parallel (< 1.8 s wall)")
def c_conc_diff(ctx, res):
    out, wall = concurrent(ctx, [{"workspaceId": "ws-conc-a", "language": "shell", "code": "sleep 1"},
                                 {"workspaceId": "ws-conc-b", "language": "shell", "code": "sleep 1"}], 10)
    js = answers(res, out)
    res.note("wall %.2fs" % wall)
    for j in js:
        if j is not None:
            expect_exited(res, j, 0)
    res.check(wall < 1.8, "two 1 s runs in different workspaces took %.2fs: not concurrent" % wall)


@case("6 concurrency: sleep 1 twice in the SAME workspace serializes (>= 2 s, each durationMs >= 1000)")
def c_conc_same(ctx, res):
    out, wall = concurrent(ctx, [{"workspaceId": "ws-conc-same", "language": "shell", "code": "sleep 1"},
                                 {"workspaceId": "ws-conc-same", "language": "shell", "code": "sleep 1"}], 10)
    js = answers(res, out)
    res.note("wall %.2fs" % wall)
    for j in js:
        if j is not None:
            expect_exited(res, j, 0)
            res.check(isinstance(j.get("durationMs"), int) and j["durationMs"] >= 1000,
                      "durationMs %r < 1000" % j.get("durationMs"))
    res.check(wall >= 2.0, "two 1 s runs in the same workspace took %.2fs: they overlapped" % wall)


# ---- 7. lifetime

@case("7 lifetime: 'sleep 1000 & echo started' answers promptly and leaves no sleep behind")
def c_background(ctx, res):
    mark = ctx.mark("bg")
    before = set(L.find_marked(mark.encode()))
    t0 = now()
    j = expect_run(res, ctx, {"language": "shell", "code": "sleep 1000 & echo started",
                              "env": {"SR_TEST_MARK": mark}}, timeout=15)
    el = now() - t0
    if j is not None:
        res.eq("stdout", j.get("stdout"), "started\n")
        res.check(el < 5.0, "the answer took %.2fs (>= 5 s): the daemon waited for the background child" % el)
    table = L.proc_table()
    left = [p for p in L.find_marked(mark.encode()) if p not in before]
    desc = [p for p in L.descendants(ctx.d.pid, table)
            if (L.cmdline(p) or [])[:2] == [b"sleep", b"1000"]]
    if left or desc:
        res.fail("left behind after the answer: %s" % [L.describe_pid(p, table) for p in sorted(set(left + desc))])
        time.sleep(1.0)
        still = L.find_marked(mark.encode())
        res.note("1 s later: %s" % ([L.describe_pid(p) for p in still] or "gone"))


@case("7 lifetime: a client that disconnects after 0.5 s (sleep 30) -> its run is killed within 3 s")
def c_disconnect(ctx, res):
    mark = ctx.mark("disc")
    eid = ctx.new_id("disc")
    ctx.fixtures["disc_eid"] = eid
    h, raw, b = ctx.exec_bytes({"executionId": eid, "workspaceId": "ws-disc", "language": "shell",
                                "code": "sleep 30", "env": {"SR_TEST_MARK": mark}}, "/execute")
    try:
        s = socket.create_connection((L.LOOPBACK, ctx.d.port), timeout=5)
    except OSError as e:
        res.fail("connect: %s" % e)
        return
    seen = False
    try:
        s.sendall(L.build_request("POST", "/execute", h, raw))
        t_end = now() + 0.5
        while now() < t_end:
            if L.find_marked(mark.encode(), [b"sleep", b"30"]):
                seen = True
            time.sleep(0.05)
        s.setblocking(False)
        try:
            early = s.recv(65536)
        except (BlockingIOError, OSError):
            early = b""
        if early:
            res.fail("the daemon answered within 0.5 s: %r" % trunc(early.decode("latin-1"), 400))
    finally:
        s.close()
    t_close = now()
    res.note("sleep 30 %s seen running before the disconnect" % ("was" if seen else "was NOT"))
    left = None
    while now() - t_close < 3.0:
        left = L.find_marked(mark.encode(), [b"sleep", b"30"])
        if not left:
            break
        time.sleep(0.1)
    if left:
        res.fail("3 s after the disconnect still running: %s" % [L.describe_pid(p) for p in left])
    else:
        res.note("gone %.2fs after the disconnect" % (now() - t_close))
    if not seen:
        res.note("(the run never showed up: the check above proves little; see the daemon log)")
    if left:
        # Keep the later cases independent of this failure: end the payload (ours) by pid and
        # wait for the daemon to see its run end.
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = now() + 3.0
        while now() < deadline:
            r, _ = ctx.get("/status", timeout=2.0)
            j = r.json() if r is not None else None
            if isinstance(j, dict) and not (j.get("executions") or {}).get("running"):
                break
            time.sleep(0.1)
        res.note("clean-up: killed the leftover sleep 30 by pid so that later cases are not affected")


@case("7 lifetime: the daemon log says the disconnected execution was 'cancelled'")
def c_disconnect_log(ctx, res):
    eid = ctx.fixtures.get("disc_eid")
    if not eid:
        res.fail("the disconnect case did not run")
        return
    deadline = now() + 3.0
    lines = []
    while now() < deadline:
        lines = [ln for ln in ctx.d.log_text().splitlines() if eid in ln]
        if any("cancel" in ln.lower() for ln in lines):
            break
        time.sleep(0.1)
    res.note("log lines for %s: %s" % (eid, lines or "none"))
    res.check(any("cancelled" in ln for ln in lines), "no log line mentions 'cancelled' for %s" % eid)


@case("7 lifetime: after the client's hang-up the daemon is idle again (< 20% of a CPU over 1 s)")
def c_disconnect_idle(ctx, res):
    def cpu_ticks():
        with open("/proc/%d/stat" % ctx.d.pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])   # utime + stime
    hz = os.sysconf("SC_CLK_TCK")
    time.sleep(0.5)   # the cancelled run's end, its snapshot
    t0, c0 = now(), cpu_ticks()
    time.sleep(1.0)
    t1, c1 = now(), cpu_ticks()
    share = (c1 - c0) / hz / (t1 - t0)
    res.note("daemon CPU over %.2f s: %.0f%% of a CPU" % (t1 - t0, 100 * share))
    # A connection MHD was left to spin on (no response, never closed) took a whole CPU until
    # its connection timeout.
    res.check(share < 0.2, "the daemon used %.0f%% of a CPU while idle" % (100 * share))


def prebuilt_max(ctx):
    """How many sandboxes may wait built ahead: each shape's target (/health: Prebuilt=, or up to
    PrebuiltBurst= after a burst), summed."""
    h = ctx.d.health(timeout=5.0)
    p = (((h.json() or {}) if h is not None else {}).get("sandbox") or {}).get("prebuilt") or {}
    return sum(max(s.get("target") or 0, p.get("max") or 0) for s in (p.get("shapes") or {}).values())


@case("7 lifetime: after 20 quick runs the daemon's children are only its idle keepers (1-2, none a zombie)")
def c_keepers_reaped(ctx, res):
    for i in range(20):
        r, err, _ = ctx.post({"language": "shell", "code": "true"}, "/execute", 15)
        if r is None or r.status != 200:
            res.fail("run %d: %s" % (i, err if r is None else r.brief()))
            return
    # Released keepers are reaped by the event loop, not waited for: give it a moment.
    deadline = now() + 3.0
    while True:
        table = L.proc_table()
        # Sandboxes built ahead ([Execution] Prebuilt=) wait under keepers of their own: counted apart.
        pre = L.prebuilt_sandboxes(ctx.d.pid, table)
        kids = [p for p in L.children(ctx.d.pid, table) if p not in pre]
        bad = [p for p in kids
               if table[p][1] == "Z" or (L.cmdline(p) or [b""])[0] != b"sandbox-runner-keeper"
               or L.children(p, table)]
        if (not bad and 1 <= len(kids) <= 2 and len(pre) <= prebuilt_max(ctx)) or now() > deadline:
            break
        time.sleep(0.05)
    res.note("children of the daemon: %s" % [L.describe_pid(p, table) for p in kids])
    res.note("sandboxes built ahead: %d (at most %d)" % (len(pre), prebuilt_max(ctx)))
    res.check(len(pre) <= prebuilt_max(ctx), "%d sandboxes built ahead, more than the shapes' targets allow" % len(pre))
    res.check(not bad, "not an idle keeper (a zombie, a keeper with children, or something else): %s"
              % [L.describe_pid(p, table) for p in bad])
    res.check(1 <= len(kids) <= 2, "%d children, not the 1 or 2 keepers started ahead" % len(kids))


def build_file(ctx, env, *rel):
    """A build product: $env if set, else relative to the daemon's build directory."""
    return os.environ.get(env) or os.path.join(os.path.dirname(os.path.dirname(ctx.d.path)), *rel)


class DaemonCopy:
    """A second daemon, copied into a directory of its own next to a keeper of our choice (the
    daemon looks for its keeper next to itself first)."""

    def __init__(self, ctx, keeper):
        self.tmp = tempfile.mkdtemp(prefix="execute-keeper.")
        self.d = None
        try:
            os.chmod(self.tmp, 0o755)
            self.keeper = os.path.join(self.tmp, "sandbox-runner-keeper")
            shutil.copy2(ctx.d.path, os.path.join(self.tmp, "sandbox-runnerd"))
            shutil.copy2(keeper, self.keeper)
            self.d = L.Daemon(os.path.join(self.tmp, "sandbox-runnerd"), run_as=ctx.d.run_as)
            self.d.start()
        except BaseException:
            self.close()
            raise
        self.ctx = Ctx(self.d, ctx.budget, False)

    def close(self):
        if self.d is not None:
            self.d.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


@case("7 lifetime: a keeper that refuses its job -> 503 sandbox_unavailable naming the keeper, nothing left")
def c_keeper_refuses(ctx, res):
    fake = build_file(ctx, "FAKE_KEEPER", "tests", "fake-keeper")
    if not os.access(fake, os.X_OK):
        res.fail("the fake keeper %s is not built" % fake)
        return
    try:
        with DaemonCopy(ctx, fake) as dc:
            check_keeper_refused(res, dc)
    except (L.DaemonError, OSError) as e:
        res.fail("could not run the second daemon: %s" % e)


def is_keeper_or_gone(pid):
    """A keeper (by its command line), or a process that exited since the table was read (a zombie,
    or reaped: no command line any more)."""
    cl = L.cmdline(pid)
    st = L.proc_stat(pid)
    return not cl or st is None or st[1] == "Z" or cl[0] == b"sandbox-runner-keeper"


def check_keeper_refused(res, dc):
    r, err, _ = dc.ctx.post({"language": "shell", "code": "echo should-not-run"}, "/execute", 15)
    if r is None:
        res.fail("no answer: %s" % err)
        return
    res.note("answer: %s" % r.brief())
    j = r.json() if r.status != 200 else {}
    res.eq("HTTP status", r.status, 503)
    res.eq("error", (j or {}).get("error"), "sandbox_unavailable")
    msg = (j or {}).get("message") or ""
    res.check("keeper" in msg and "refused its job" in msg and "120" in msg,
              "the message does not say the keeper refused its job: %r" % msg)
    # Nothing of the run: no bwrap, no payload. The pool may still be starting a fake keeper after
    # the answer (until it has exec'd, it shows the daemon's command line), or reaping one that
    # exited at once (a zombie for a moment): wait for that to pass, then look.
    deadline = now() + 3.0
    while True:
        table = L.proc_table()
        left = [p for p in L.descendants(dc.d.pid, table)
                if table[p][1] != "Z" and not is_keeper_or_gone(p)]
        if not left or now() > deadline:
            break
        time.sleep(0.05)
    res.check(not left, "left behind: %s" % [L.describe_pid(p, table) for p in left])
    rc, _ = dc.d.terminate(grace=10.0)
    res.eq("exit status of the second daemon", rc, 0)


@case("7 lifetime: the keeper file replaced while the daemon runs (an upgrade) -> runs still use the one found at start")
def c_keeper_replaced(ctx, res):
    real = build_file(ctx, "SANDBOX_RUNNER_KEEPER", "src", "keeper", "sandbox-runner-keeper")
    fake = build_file(ctx, "FAKE_KEEPER", "tests", "fake-keeper")
    for f in (real, fake):
        if not os.access(f, os.X_OK):
            res.fail("%s is not built" % f)
            return
    try:
        with DaemonCopy(ctx, real) as dc:
            # As a package manager does: the new file renamed over the old one.
            shutil.copy2(fake, dc.keeper + ".new")
            os.rename(dc.keeper + ".new", dc.keeper)
            # More runs than keepers started ahead: the later ones run under keepers started
            # after the replacement.
            for i in range(5):
                r, err, _ = dc.ctx.post({"language": "shell", "code": "echo run-%d" % i}, "/execute", 15)
                if r is None or r.status != 200:
                    res.fail("run %d after the replacement: %s" % (i, err if r is None else r.brief()))
                    return
                res.eq("run %d stdout" % i, (r.json() or {}).get("stdout"), "run-%d\n" % i)
    except (L.DaemonError, OSError) as e:
        res.fail("could not run the second daemon: %s" % e)


@case("7 lifetime: the run's keeper dies and its timeout comes before the loop sees that -> the daemon lives, answers")
def c_keeper_dies_unseen(ctx, res):
    # The timeout writes 'K' to the keeper's control pipe. If the keeper has exited and the loop has
    # not handled that yet, the write gets EPIPE, or SIGPIPE, which killed a daemon started by hand
    # (systemd ignores SIGPIPE for its services). A second daemon, stopped while its run's keeper
    # dies and the timeout passes: on SIGCONT both are pending.
    d = L.Daemon(ctx.d.path, run_as=ctx.d.run_as)
    try:
        d.start()
        dctx = Ctx(d, ctx.budget, False)
        mark = ctx.mark("unseen")
        box = {}

        def client():
            box["r"] = dctx.post({"language": "shell", "code": "sleep 30", "timeoutMs": 500,
                                  "env": {"SR_TEST_MARK": mark}}, timeout=10)
        t = threading.Thread(target=client, daemon=True)
        t.start()
        keeper, deadline = None, now() + 5.0
        while keeper is None and now() < deadline:
            if L.find_marked(mark.encode(), [b"sleep", b"30"]):
                table = L.proc_table()
                keeper = next((p for p in L.children(d.pid, table) if L.children(p, table)), None)
            if keeper is None:
                time.sleep(0.02)
        if keeper is None:
            res.fail("the run (or its keeper) did not show up within 5 s")
            return
        seen = now()    # the run's timer started before this: it fires by seen + 0.5 s
        os.kill(d.pid, signal.SIGSTOP)
        try:
            os.kill(keeper, signal.SIGKILL)
            deadline = now() + 5.0
            while (L.proc_stat(keeper) or ("", "Z"))[1] != "Z" and now() < deadline:
                time.sleep(0.01)
            res.check((L.proc_stat(keeper) or ("", "Z"))[1] == "Z", "the keeper did not exit within 5 s")
            while now() < seen + 0.6:
                time.sleep(seen + 0.6 - now())
        finally:
            os.kill(d.pid, signal.SIGCONT)
        t.join(10.0)
        r, err, _ = box.get("r") or (None, "no answer (the client is still waiting)", None)
        res.check(d.alive(), "the daemon died (exit status %r); log tail: %s" % (d.proc.poll(), d.log_tail(1500)))
        if r is None:
            res.fail("no answer: %s" % err)
            return
        res.note("answer: %s" % r.brief(400))
        res.eq("HTTP status", r.status, 200)
        res.check((r.json() or {}).get("status") in ("timeout", "signaled"),
                  "expected status timeout (or signaled), got %r" % (r.json() or {}).get("status"))
        deadline = now() + 3.0
        while L.find_marked(mark.encode()) and now() < deadline:
            time.sleep(0.05)
        left = L.find_marked(mark.encode())
        res.check(not left, "left behind: %s" % [L.describe_pid(p) for p in left])
    except (L.DaemonError, OSError) as e:
        res.fail("could not run the second daemon: %s" % e)
    finally:
        d.cleanup()


# ---- 8. timeout

@case("8 timeout: timeoutMs 500 with 'sleep 10' -> status timeout within ~2 s")
def c_timeout(ctx, res):
    mark = ctx.mark("timeout")
    t0 = now()
    j = expect_run(res, ctx, {"language": "shell", "code": "sleep 10", "timeoutMs": 500,
                              "env": {"SR_TEST_MARK": mark}}, timeout=12)
    el = now() - t0
    if j is None:
        return
    res.eq("status", j.get("status"), "timeout")
    res.check(el < 2.5, "the answer took %.2fs" % el)
    left = L.find_marked(mark.encode(), [b"sleep"])
    res.check(not left, "the timed-out payload is still running: %s" % [L.describe_pid(p) for p in left])


# ---- 9. bad requests

BAD = [
    ("unknown field", {"argv": ["true"], "bogusField": 1}),
    ("language 'cobol'", {"language": "cobol", "code": "DISPLAY 'X'."}),
    ("both argv and code", {"argv": ["true"], "language": "python", "code": "print(1)"}),
    ("executionId '../x'", {"executionId": "../x", "argv": ["true"]}),
    ("workspaceId '.hidden'", {"workspaceId": ".hidden", "argv": ["true"]}),
    ("timeoutMs 0", {"timeoutMs": 0, "argv": ["true"]}),
]

for _name, _body in BAD:
    def _mkbad(body):
        def fn(ctx, res):
            expect_error(res, ctx, body, 400, "invalid_request")
            if body.get("workspaceId") == ".hidden":
                res.check(not os.path.lexists(ctx.d.workspace_path(".hidden")), "workspace .hidden was created")
        return fn
    case("9 bad request: %s -> 400 invalid_request" % _name)(_mkbad(_body))


@case("9 timeoutMs 10^12 is capped to MaxTimeoutSec (API.md: limits are capped by the maxima)")
def c_timeout_capped(ctx, res):
    j = expect_run(res, ctx, {"timeoutMs": 10 ** 12, "argv": ["true"]})
    if j is None:
        return
    res.eq("status", j.get("status"), "exited")
    res.eq("limits.timeoutMs", (j.get("limits") or {}).get("timeoutMs"), 3600 * 1000)


# ---- 10. end state

@case("10 GET /health -> 200, sandbox.usable true")
def c_health(ctx, res):
    r, err = ctx.get("/health", auth=False)
    if r is None:
        res.fail("no answer: %s" % err)
        return
    res.note(r.brief(900))
    res.eq("status", r.status, 200)
    j = r.json() or {}
    res.eq("sandbox.usable", (j.get("sandbox") or {}).get("usable"), True)


@case("10 GET /status (bearer) -> no running executions")
def c_status(ctx, res):
    r, err = ctx.get("/status")
    if r is None:
        res.fail("no answer: %s" % err)
        return
    res.note(r.brief(900))
    res.eq("status", r.status, 200)
    j = r.json() or {}
    ex = j.get("executions")
    if not isinstance(ex, dict) or "running" not in ex:
        res.fail("no 'executions.running' in /status")
        return
    res.check(ex["running"] in ([], 0), "running executions: %r" % ex["running"])


@case("10 SIGTERM -> the daemon exits 0 and leaves no child process")
def c_sigterm(ctx, res):
    # Idle, the daemon has only the keepers it started ahead of runs: they must go with it. (The
    # last run's keeper is released after its answer and reaped by the loop: it may still be on its
    # way out, and the pool may be starting its replacement. Give that a moment, as in "after 20
    # quick runs" above.)
    deadline = now() + 3.0
    while True:
        table = L.proc_table()
        desc = L.descendants(ctx.d.pid, table)
        idle_keepers = [p for p in L.children(ctx.d.pid, table)
                        if (L.cmdline(p) or [b""])[0] == b"sandbox-runner-keeper" and table[p][1] != "Z"
                        and not L.children(p, table)]
        # ... and the sandboxes built ahead (keeper, bwrap, its pid 1, the exec helper): they go too.
        pre = L.prebuilt_sandboxes(ctx.d.pid, table)
        ahead = [p for k, below in pre.items() for p in [k] + below]
        others = [p for p in desc if p not in idle_keepers and p not in ahead]
        if (not others and len(idle_keepers) <= 2) or now() > deadline:
            break
        time.sleep(0.05)
    res.check(not others and len(idle_keepers) <= 2,
              "the idle daemon has descendants other than (at most 2) idle keepers: %s"
              % [L.describe_pid(p, table) for p in desc])
    known = {p: table[p][3] for p in desc}
    # As a subreaper, we get what the daemon leaves behind: its children still alive, or exited and
    # not reaped by it (zombies), are ours the moment it exits, before terminate() sees it exit.
    ours = set(L.children(os.getpid()))
    L.set_child_subreaper(True)
    try:
        rc, took = ctx.d.terminate(grace=10.0)
        adopted = [p for p in L.children(os.getpid()) if p not in ours]
    finally:
        L.set_child_subreaper(False)
    res.note("exit status %r after %.2fs" % (rc, took))
    res.check(rc == 0, "exit status %r, expected 0%s" % (rc, " (killed after 10 s)" if rc is None else ""))
    res.check(not adopted, "the daemon exited leaving children it had not reaped: %s"
              % [L.describe_pid(p) for p in adopted])
    L.reap_or_kill(adopted)
    time.sleep(0.2)
    survivors, zombies = [], []
    for p, start in known.items():
        st = L.proc_stat(p)
        if st is not None and st[3] == start:
            (zombies if st[1] == "Z" else survivors).append(p)
    res.check(not survivors, "still alive after the daemon exited: %s" % [L.describe_pid(p) for p in survivors])
    if zombies:
        res.note("exited but not yet reaped by their new parent: %s" % [L.describe_pid(p) for p in zombies])
    marked = L.find_marked(ctx.run_mark.encode())
    res.check(not marked, "payload processes of this test still alive: %s" % [L.describe_pid(p) for p in marked])
    tail = ctx.d.log_tail(3000)
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        res.check(bad not in tail, "sanitizer report in the daemon log")


def ensure_daemon(ctx, res):
    """Start the daemon again if an earlier "10 SIG" case stopped it; False (and a failure) if it cannot be."""
    if ctx.d.alive():
        return True
    try:
        ctx.d.start()
    except (L.DaemonError, OSError) as e:
        res.fail("could not restart the daemon: %s" % e)
        return False
    res.note("daemon restarted: pid %d port %d" % (ctx.d.pid, ctx.d.port))
    return True


def run_in_background(ctx, box, workspace, code, argv, mark, timeout, start_wait):
    """POST /execute of the shell code in a thread (its Response in box["r"], or box["err"]) and wait
    up to start_wait s for its payload (marked with mark, its argv starting with argv) to run.
    Return (the thread, whether the payload was seen)."""
    h, raw, _ = ctx.exec_bytes({"workspaceId": workspace, "language": "shell", "code": code,
                                "env": {"SR_TEST_MARK": mark}}, "/execute")
    port = ctx.d.port

    def client():
        try:
            box["r"] = L.http(port, "POST", "/execute", h, raw, timeout=ctx.budget.bound(timeout))
        except (OSError, HttpError) as e:
            box["err"] = "%s: %s" % (type(e).__name__, e)
    t = threading.Thread(target=client, daemon=True)
    t.start()
    deadline = now() + start_wait
    while now() < deadline and not L.find_marked(mark.encode(), argv):
        time.sleep(0.05)
    return t, bool(L.find_marked(mark.encode(), argv))


@case("10 SIGTERM while an execution runs -> exits 0, the client is answered, nothing left behind")
def c_sigterm_busy(ctx, res):
    if not ensure_daemon(ctx, res):
        return
    mark = ctx.mark("sigterm")
    box = {}
    t, started = run_in_background(ctx, box, "ws-sigterm", "sleep 30", [b"sleep", b"30"], mark, 15, 5.0)
    if not started:
        res.fail("the run did not start within 5 s")
    table = L.proc_table()
    known = {p: table[p][3] for p in L.descendants(ctx.d.pid, table)}
    ours = set(L.children(os.getpid()))
    L.set_child_subreaper(True)    # as in "10 SIGTERM" above: what it leaves becomes ours
    try:
        rc, took = ctx.d.terminate(grace=10.0)
        adopted = [p for p in L.children(os.getpid()) if p not in ours]
    finally:
        L.set_child_subreaper(False)
    res.note("exit status %r after %.2fs" % (rc, took))
    res.check(rc == 0, "exit status %r, expected 0%s" % (rc, " (killed after 10 s)" if rc is None else ""))
    res.check(not adopted, "the daemon exited leaving children it had not reaped: %s"
              % [L.describe_pid(p) for p in adopted])
    L.reap_or_kill(adopted)
    t.join(5.0)
    if "r" in box:
        r = box["r"]
        res.note("client got " + r.brief(500))
        j = r.json() if r.status == 200 else None
        res.check(r.status == 503 or (isinstance(j, dict) and j.get("status") in ("interrupted", "cancelled")),
                  "expected 200 with status interrupted (or a 503), got %d status=%r" %
                  (r.status, j.get("status") if isinstance(j, dict) else None))
    elif t.is_alive():
        res.fail("the client is still waiting 5 s after the daemon exited")
    else:
        res.note("client: %s (closed without an answer)" % box.get("err"))
    time.sleep(0.2)
    alive = [p for p, start in known.items()
             if (L.proc_stat(p) or (0, "Z", 0, None))[1] != "Z" and (L.proc_stat(p) or (0, 0, 0, None))[3] == start]
    res.check(not alive, "still alive after the daemon exited: %s" % [L.describe_pid(p) for p in alive])
    marked = L.find_marked(mark.encode())
    res.check(not marked, "the payload survived the daemon: %s" % [L.describe_pid(p) for p in marked])
    tail = ctx.d.log_tail(1500)
    res.check("Fatal error" not in tail and rc != -6, "the daemon aborted: %s" % trunc(tail[-400:], 400))


def read_answer(sock, timeout):
    """One whole answer from a kept-open connection, or None (nothing complete within timeout)."""
    data, t0 = b"", now()
    while not L._complete(data):
        left = timeout - (now() - t0)
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return None
        if not chunk:
            break
        data += chunk
    return L._parse_response(data, now() - t0) if data else None


def keepalive_request(method, path, headers=(), body=b""):
    """A request that keeps its connection open (build_request() asks to close it)."""
    return L.build_request(method, path, headers, body).replace(b"Connection: close", b"Connection: keep-alive", 1)


def daemon_fds(pid):
    """The targets of a process's open fds (we run as root)."""
    out = []
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
            except OSError:
                pass
    except OSError:
        pass
    return out


def health_limits(ctx):
    """(scopes.mechanism, sandbox.hostUid) of GET /health, the limits set-up a re-execution keeps."""
    h = ctx.d.health()
    j = (h.json() or {}) if h is not None and h.status == 200 else {}
    return (j.get("scopes") or {}).get("mechanism"), (j.get("sandbox") or {}).get("hostUid")


def check_reexecuted(res, ctx, pid, generation, what, limits_before):
    """The daemon started by hand re-executed itself in place: same pid, a binary that is on disk,
    /health says so, a run works (secrets and limits were handed on), the payload sees no fd of
    the daemon's, and no memfd of the hand-over is left open."""
    res.eq("%s: the daemon's pid" % what, ctx.d.proc.pid, pid)
    res.check(ctx.d.alive(), "%s: the daemon is gone (exit %s)" % (what, ctx.d.proc.poll()))
    try:
        exe = os.readlink("/proc/%d/exe" % pid)
    except OSError as e:
        exe = "unreadable: %s" % e
    res.check(not exe.endswith(" (deleted)"), "%s: the daemon still runs the replaced image: %s" % (what, exe))
    r, err = ctx.get("/health", auth=False)
    j = (r.json() or {}) if r is not None and r.status == 200 else {}
    res.check(r is not None and r.status == 200, "%s: GET /health on a new connection: %s" %
              (what, err or (r and r.brief())))
    res.eq("%s: /health reexecutions" % what, j.get("reexecutions"), generation)
    res.check("staleBinary" not in j, "%s: /health says staleBinary: %r" % (what, j.get("staleBinary")))
    res.eq("%s: executions after the re-execution" % what, (j.get("sandbox") or {}).get("executions"), True)
    # Started as root it had made cgroups of its own and become the service user: both are kept.
    res.eq("%s: limits mechanism and payload uid, before and after" % what, health_limits(ctx), limits_before)
    res.check(limits_before[1] not in (0, None), "%s: payloads run as uid %r" % (what, limits_before[1]))
    r, err, _ = ctx.post({"workspaceId": "ws-reexec", "language": "shell",
                          "code": "echo after; ls /proc/self/fd | sort -n | tr '\\n' ' '"}, "/execute", 15)
    out = ((r.json() or {}).get("stdout") or "") if r is not None and r.status == 200 else ""
    res.check(r is not None and r.status == 200, "%s: a run after the re-execution: %s" % (what, err or (r and r.brief())))
    res.check(out.startswith("after\n"), "%s: its stdout: %r" % (what, out))
    # ls's own directory fd is 3: anything beyond it was inherited from the daemon.
    res.eq("%s: the payload's open fds" % what, out.split("\n", 1)[-1].split(), ["0", "1", "2", "3"])
    left = [t for t in daemon_fds(pid) if "sandbox-runner-reexec" in t or "sandbox-runner-api-token" in t or
            "sandbox-runner-signing-key" in t]
    res.check(not left, "%s: the hand-over's memfds are still open in the daemon: %r" % (what, left))
    res.check("Re-executing " in ctx.d.log_text(), "%s: no 'Re-executing' line in the log: %s" %
              (what, ctx.d.log_tail(600)))


@case("10 SIGHUP (reload) while an execution runs, started by hand -> it finishes, nothing new starts, then the "
      "daemon re-executes itself keeping its socket")
def c_sighup_retire(ctx, res):
    if not ensure_daemon(ctx, res):
        return
    port, mark, box = ctx.d.port, ctx.mark("retire"), {}
    pid, generation = ctx.d.proc.pid, ((ctx.d.health() and ctx.d.health().json()) or {}).get("reexecutions", 0)
    limits_before = health_limits(ctx)
    # A connection opened before the reload, kept open (a client's pool).
    kept = socket.create_connection((L.LOOPBACK, port), timeout=5)
    fresh = None
    try:
        kept.sendall(keepalive_request("GET", "/health"))
        r = read_answer(kept, 5)
        res.check(r is not None and r.status == 200, "GET /health on the kept connection: %r" % (r and r.brief()))
        t, started = run_in_background(ctx, box, "ws-retire", "sleep 2; echo finished", [b"sleep", b"2"], mark,
                                       30, 10.0)
        if not started:
            res.fail("the run did not start within 10 s")
            return
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.3)
        # A run asked for on the old connection: refused, to be retried; the connection closes.
        h2, raw2, _ = ctx.exec_bytes({"workspaceId": "ws-retire-2", "language": "shell", "code": "echo no"}, "/execute")
        kept.sendall(keepalive_request("POST", "/execute", h2, raw2))
        r = read_answer(kept, 5)
        if r is None:
            res.fail("no answer on the kept connection after SIGHUP")
        else:
            res.note("kept connection: " + r.brief(300))
            res.eq("status on the kept connection", r.status, 503)
            res.eq("error", (r.json() or {}).get("error"), "sandbox_unavailable")
            msg = (r.json() or {}).get("message") or ""
            res.check("restarting (SIGHUP" in msg and "re-executed itself" in msg,
                      "the message does not say why, or what a new connection gets: %r" % msg)
            res.eq("Connection header", (r.header("connection") or "").lower(), "close")
        # A new connection is not served while the run goes on: it waits in the backlog...
        fresh = socket.create_connection((L.LOOPBACK, port), timeout=5)
        fresh.sendall(L.build_request("GET", "/health"))
        early = read_answer(fresh, 0.8)
        res.check(early is None, "a connection made while retiring was served: %r" % (early and early.brief()))
        t.join(ctx.budget.bound(30))
        r = box.get("r")
        if r is None:
            res.fail("the run in flight got no answer: %s" % box.get("err"))
        else:
            j = r.json() if r.status == 200 else {}
            res.note("run in flight: " + r.brief(300))
            res.eq("the run in flight's status", (j or {}).get("status"), "exited")
            res.eq("its stdout", (j or {}).get("stdout"), "finished\n")
        # ... and the re-executed daemon answers it.
        late = read_answer(fresh, 15)
        res.check(late is not None and late.status == 200,
                  "the connection made while retiring was not answered after the re-execution: %r" %
                  (late and late.brief()))
        res.eq("its /health reexecutions", ((late and late.json()) or {}).get("reexecutions"), generation + 1)
        res.check("Retiring (SIGHUP" in ctx.d.log_text(), "no 'Retiring' line in the log: %s" % ctx.d.log_tail(600))
        res.check(not L.find_marked(mark.encode()), "the payload outlived the old image")
        check_reexecuted(res, ctx, pid, generation + 1, "after SIGHUP", limits_before)
    finally:
        kept.close()
        if fresh is not None:
            fresh.close()


@case("10 run, rebuild, request: the binary of a daemon started by hand replaced on disk -> 503 'restarting', "
      "then the new binary answers on the same socket")
def c_rebuild(ctx, res):
    real = build_file(ctx, "SANDBOX_RUNNER_KEEPER", "src", "keeper", "sandbox-runner-keeper")
    try:
        with DaemonCopy(ctx, real) as dc:
            d, c = dc.d, dc.ctx
            pid, limits_before = d.proc.pid, health_limits(c)
            r, err, _ = c.post({"language": "shell", "code": "echo before"}, "/execute", 15)
            res.check(r is not None and r.status == 200 and (r.json() or {}).get("stdout") == "before\n",
                      "a run before the rebuild: %s" % (err or (r and r.brief())))
            # As a rebuild (ninja, meson install) does: a new file renamed over the old one.
            shutil.copy2(ctx.d.path, d.path + ".new")
            with open(d.path + ".new", "ab") as f:
                f.write(b"\0rebuilt")     # another file than the one running, as a rebuild's
            os.rename(d.path + ".new", d.path)
            r, err, _ = c.post({"language": "shell", "code": "echo during"}, "/execute", 15)
            j = (r.json() or {}) if r is not None else {}
            res.note("first request after the rebuild: %s" % (err or r.brief(300)))
            res.eq("its status", r and r.status, 503)
            res.eq("its error", j.get("error"), "sandbox_unavailable")
            msg = j.get("message") or ""
            res.check("its binary was replaced on disk" in msg and "re-executed itself" in msg,
                      "the message does not say what happens: %r" % msg)
            # The client retries on a new connection, as the message says: the new binary answers.
            d.wait_reexecuted(1)
            check_reexecuted(res, c, pid, 1, "after the rebuild", limits_before)
            rc, _ = d.terminate(grace=10.0)
            res.eq("exit status after SIGTERM", rc, 0)
    except (L.DaemonError, OSError) as e:
        res.fail("could not run the second daemon: %s" % e)


@case("10 run, broken rebuild, request: the replaced binary cannot be executed -> the old image goes on, says "
      "staleBinary, retires no more; SIGHUP once it is fixed re-executes the new one")
def c_rebuild_broken(ctx, res):
    real = build_file(ctx, "SANDBOX_RUNNER_KEEPER", "src", "keeper", "sandbox-runner-keeper")
    try:
        with DaemonCopy(ctx, real) as dc:
            d, c = dc.d, dc.ctx
            pid, limits_before = d.proc.pid, health_limits(c)
            shutil.copy2(ctx.d.path, d.path + ".new")
            os.chmod(d.path + ".new", 0o644)          # not executable: execve() says EACCES
            os.rename(d.path + ".new", d.path)
            r, err, _ = c.post({"language": "shell", "code": "echo during"}, "/execute", 15)
            res.eq("the first request after the replacement", r and r.status, 503)
            j = d.wait_reexecuted(1)
            res.eq("reexecutions", j.get("reexecutions"), 1)
            stale = j.get("staleBinary") or ""
            res.check(d.path in stale and "Permission denied" in stale,
                      "/health does not say which binary could not be executed, and why: %r" % stale)
            res.eq("the daemon's pid", d.proc.pid, pid)
            # The old image serves, and does not retire again at every request.
            for i in range(2):
                r, err, _ = c.post({"language": "shell", "code": "echo old-%d" % i}, "/execute", 15)
                res.check(r is not None and r.status == 200 and (r.json() or {}).get("stdout") == "old-%d\n" % i,
                          "run %d on the old image: %s" % (i, err or (r and r.brief())))
            res.check("Failed to execute %s" % d.path in d.log_text(), "the log does not say what failed: %s" %
                      d.log_tail(600))
            # Fixed: SIGHUP tries again, and the new binary takes over.
            os.chmod(d.path, 0o755)
            os.kill(pid, signal.SIGHUP)
            d.wait_reexecuted(2)
            check_reexecuted(res, c, pid, 2, "after SIGHUP on the fixed binary", limits_before)
            rc, _ = d.terminate(grace=10.0)
            res.eq("exit status after SIGTERM", rc, 0)
    except (L.DaemonError, OSError) as e:
        res.fail("could not run the second daemon: %s" % e)


# --------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true", help="print diagnostics of passing cases too")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    ap.add_argument("--only", help="run only cases whose name contains this (the SIGTERM cases always run)")
    ap.add_argument("--dialect", choices=("ours", "sciencediscovery"), default="ours",
                    help="sciencediscovery: the escape battery through that dialect's listener")
    args = ap.parse_args()

    budget = L.Budget(BUDGET)
    sd = args.dialect == "sciencediscovery"
    cases = [(n, f) for n, f in CASES if not args.only or args.only in n or n.startswith(FINAL)]
    if sd:
        cases = [(n, f) for n, f in cases if n.startswith("3 escape")]
    out = sys.stdout
    tap = L.Tap(out)
    out.write("1..%d\n" % len(cases))
    out.flush()

    run_as = T.resolve_run_as(args.run_as)
    d = (S.SdDaemon if sd else L.Daemon)(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as)
    out.write("# daemon runs as uid %s\n" % T.run_as_uid(run_as))
    if L.start_or_fail_all(d, cases, tap, Result, 600) is None:
        d.cleanup()
        return 1

    ctx = Ctx(d, budget, args.verbose)
    if sd:
        ctx.sd = S.SdClient(d)
        out.write("# runs through the ScienceDiscovery listener on 127.0.0.1:%d\n" % d.sd_port)

    def watchdog():
        if not budget.expired.wait(max(0.0, budget.left())):
            budget.expired.set()
            out.write("# time budget of %.0fs exhausted: killing the daemon (pid %d)\n" % (BUDGET, d.pid))
            out.flush()
            d.kill()
    wd = threading.Thread(target=watchdog, daemon=True)
    wd.start()

    try:
        for name, fn in cases:
            res = Result(name)
            t0 = now()
            if budget.expired.is_set() or budget.left() <= 0:
                res.fail("not run: the time budget is exhausted")
            elif not d.alive() and not name.startswith(FINAL):
                res.fail("the daemon is not running (exit status %r); log tail:\n%s" % (d.proc.poll(), d.log_tail(1500)))
            else:
                try:
                    fn(ctx, res)
                except Exception:                              # noqa: BLE001
                    res.fail("test error:\n" + traceback.format_exc())
                if not name.startswith(FINAL) and not d.alive():
                    res.fail("the daemon died (exit status %r); log tail:\n%s" % (d.proc.poll(), d.log_tail(2000)))
            res.note("(%.2fs)" % (now() - t0))
            tap.emit(res, verbose=args.verbose)
    finally:
        if not budget.expired.is_set():
            budget.expired.set()     # stops the watchdog
        # Leftover payload processes of this run (they carry our marker): end them by pid.
        L.kill_leftovers(L.find_marked(ctx.run_mark.encode()), out)
        if tap.failed:
            L.write_log_tail(d, out)
        d.cleanup()
        if args.keep_tmp:
            out.write("# kept %s\n" % d.tmp)

    return tap.summary(len(cases), budget.elapsed())


if __name__ == "__main__":
    sys.exit(main())
