# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for tests/integration/execute.py: the daemon under test, a small HTTP/1.1 client,
signed execution requests, /proc scans and TAP output.  Python 3 stdlib only; all traffic goes
to 127.0.0.1."""

import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from testlib import Result, chown_tree, popen_ids          # noqa: F401 (Result: L.Result)

LOOPBACK = "127.0.0.1"

CONFIG_TEXT = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=20
[Quota]
MaxOutputBytes=4K
"""


def now():
    return time.monotonic()


def trunc(s, n=400):
    if s is None:
        return "None"
    if not isinstance(s, str):
        s = repr(s)
    return s if len(s) <= n else s[:n] + "...(%d more)" % (len(s) - n)


# --------------------------------------------------------------------------------------------
# Time budget: every blocking call is bounded by what is left of it.

class Budget:
    def __init__(self, seconds):
        self.t0 = now()
        self.deadline = self.t0 + seconds
        self.expired = threading.Event()

    def left(self):
        return self.deadline - now()

    def bound(self, t):
        """A timeout no longer than what is left (at least a sliver, so calls fail rather than
        block when the budget is gone)."""
        return max(0.05, min(t, self.left()))

    def elapsed(self):
        return now() - self.t0


# --------------------------------------------------------------------------------------------
# HTTP

class Response:
    def __init__(self, status, reason, headers, body, elapsed):
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (lower-case name, value)
        self.body = body
        self.elapsed = elapsed
        self._json = None
        self._json_done = False

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def json(self):
        if not self._json_done:
            self._json_done = True
            try:
                self._json = json.loads(self.body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                self._json = None
        return self._json

    def error_code(self):
        j = self.json()
        if isinstance(j, dict) and isinstance(j.get("error"), str):
            return j["error"]
        return None

    def brief(self, n=600):
        return "HTTP %d %s (%.2fs): %s" % (self.status, self.reason, self.elapsed,
                                          trunc(self.body.decode("utf-8", "replace"), n))


class HttpError(Exception):
    pass


def build_request(method, path, headers=(), body=b""):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % LOOPBACK, "Connection: close"]
    for k, v in headers:
        lines.append("%s: %s" % (k, v))
    if body or method in ("POST", "PUT"):
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _parse_response(data, elapsed):
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise HttpError("incomplete response header: %r" % trunc(data.decode("latin-1"), 200))
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise HttpError("bad status line %r" % lines[0])
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else ""
    headers = []
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers.append((k.strip().lower(), v.strip()))
    hd = dict(headers)
    if "chunked" in hd.get("transfer-encoding", "").lower():
        body = b""
        buf = rest
        while True:
            ln, sep, buf = buf.partition(b"\r\n")
            if not sep:
                raise HttpError("truncated chunked body")
            size = int(ln.split(b";")[0].strip(), 16)
            if size == 0:
                break
            body += buf[:size]
            buf = buf[size + 2:]
    elif "content-length" in hd:
        n = int(hd["content-length"])
        if len(rest) < n:
            raise HttpError("body shorter (%d) than Content-Length %d" % (len(rest), n))
        body = rest[:n]
    else:
        body = rest
    return Response(status, reason, headers, body, elapsed)


def _complete(data):
    """True when data holds a whole response (so we need not wait for the close)."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for ln in head.decode("latin-1").split("\r\n")[1:]:
        k, _, v = ln.partition(":")
        if k.strip().lower() == "content-length":
            try:
                return len(rest) >= int(v.strip())
            except ValueError:
                return False
    return False


def http(port, method, path, headers=(), body=b"", timeout=10.0):
    """One request on a fresh connection; return a Response or raise HttpError / OSError."""
    t0 = now()
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    try:
        s.sendall(build_request(method, path, headers, body))
        data = b""
        while True:
            left = timeout - (now() - t0)
            if left <= 0:
                raise HttpError("no complete answer within %.1fs (got %d bytes)" % (timeout, len(data)))
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                raise HttpError("no complete answer within %.1fs (got %d bytes)" % (timeout, len(data)))
            if not chunk:
                break
            data += chunk
            if _complete(data):
                break
    finally:
        s.close()
    if not data:
        raise HttpError("connection closed without an answer after %.2fs" % (now() - t0))
    return _parse_response(data, now() - t0)


def signature(key, ts, method, path, body):
    s = b"v1\n" + str(ts).encode() + b"\n" + method.encode() + b"\n" + path.encode() + b"\n" + \
        hashlib.sha256(body).hexdigest().encode()
    return "v1=" + hmac.new(key, s, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------------------------
# /proc

def proc_stat(pid):
    """(comm, state, ppid, starttime) or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("latin-1")
    except OSError:
        return None
    lp, rp = data.find("("), data.rfind(")")
    if lp < 0 or rp < 0:
        return None
    rest = data[rp + 2:].split()
    try:
        return data[lp + 1:rp], rest[0], int(rest[1]), int(rest[19])
    except (IndexError, ValueError):
        return None


def all_pids():
    out = []
    for n in os.listdir("/proc"):
        if n.isdigit():
            out.append(int(n))
    return out


def proc_table():
    """{pid: (comm, state, ppid, starttime)}"""
    t = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st is not None:
            t[pid] = st
    return t


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[:-1]
    except OSError:
        return None


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def children(pid, table=None):
    table = proc_table() if table is None else table
    return sorted(p for p, st in table.items() if st[2] == pid)


def descendants(pid, table=None):
    table = proc_table() if table is None else table
    kids = {}
    for p, st in table.items():
        kids.setdefault(st[2], []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return sorted(out)


def set_child_subreaper(on):
    """prctl(PR_SET_CHILD_SUBREAPER): the orphans of our descendants come to us, not to init, so
    that what a process left behind when it exited (children, zombies) can be seen here."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1 if on else 0, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "prctl(PR_SET_CHILD_SUBREAPER): %s" % os.strerror(e))


def reap_or_kill(pids):
    """End and reap children of ours (adopted orphans) by pid."""
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(p, 0)
        except OSError:
            pass


def describe_pid(pid, table=None):
    st = (table or {}).get(pid) or proc_stat(pid)
    cl = cmdline(pid)
    return "pid %d %s state=%s ppid=%s argv=%s" % (
        pid, st[0] if st else "?", st[1] if st else "?", st[2] if st else "?",
        [a.decode("utf-8", "replace") for a in cl] if cl is not None else "?")


def find_marked(marker, argv_prefix=None):
    """Live (non-zombie) processes whose environment carries marker (bytes), optionally with an
    argv starting with argv_prefix (list of bytes)."""
    out = []
    for pid in all_pids():
        env = environ(pid)
        if not env or marker not in env:
            continue
        st = proc_stat(pid)
        if st is None:
            continue
        if argv_prefix is not None:
            cl = cmdline(pid) or []
            if cl[:len(argv_prefix)] != argv_prefix:
                continue
        out.append(pid)
    return out


# --------------------------------------------------------------------------------------------
# The daemon under test

def prebuilt_sandboxes(daemon_pid, table=None):
    """The keepers below @daemon_pid that hold a sandbox built ahead of its run ([Execution]
    Prebuilt=: a bwrap whose command is the exec helper, /proc/self/fd/11), and every process
    below them: {keeper pid: [its descendants]}. An idle daemon has them beside its idle keepers."""
    table = table or proc_table()
    out = {}
    for k in children(daemon_pid, table):
        if (cmdline(k) or [b""])[0] != b"sandbox-runner-keeper":
            continue
        below = descendants(k, table)
        if any((cmdline(b) or [b""])[0].endswith(b"bwrap") and (cmdline(b) or [b""])[-1] == b"/proc/self/fd/11"
               for b in below):
            out[k] = below
    return out


def wait_prebuilt_settled(port, limit=15.0):
    """Wait until the daemon on @port builds no sandbox ahead and will not start one: every wanted
    shape of /health.sandbox.prebuilt has its max ready, none is building (the pool changes the
    daemon's children in the background until then). Return whether it settled."""
    deadline = now() + limit
    while now() < deadline:
        try:
            p = ((http(port, "GET", "/health", timeout=5.0).json() or {}).get("sandbox") or {}).get("prebuilt") or {}
        except (OSError, HttpError):
            p = {}
        shapes = (p.get("shapes") or {}).values()
        if p and all(s.get("building", 0) == 0 and
                     (not s.get("wanted") or s.get("ready", 0) >= s.get("target", p.get("max", 0)))
                     for s in shapes):
            return True
        time.sleep(0.05)
    return False


class DaemonError(Exception):
    pass


class Daemon:
    def __init__(self, path, keep_tmp=False, run_as=None, config=CONFIG_TEXT):
        self.path = os.path.abspath(path)
        self.keep_tmp = keep_tmp
        self.run_as = run_as            # None, or (uid, gid): start the daemon with these ids
        # (testlib.resolve_run_as); config: the text of its runner.conf
        self.tmp = tempfile.mkdtemp(prefix="execute-test.")
        os.chmod(self.tmp, 0o755)
        self.token = secrets.token_hex(32)
        self.key_text = secrets.token_hex(32)
        # The credential files end in a newline (as `systemd-creds` and editors leave them):
        # the daemon strips trailing whitespace, so the HMAC key is the text without it.
        self.key = self.key_text.encode()
        self.canary = "canary-" + secrets.token_hex(24)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.tmp, "daemon.log")
        self.creds = os.path.join(self.tmp, "creds")
        self.state = os.path.join(self.tmp, "state")
        self.run = os.path.join(self.tmp, "run")
        self.conf = os.path.join(self.tmp, "runner.conf")
        os.mkdir(self.creds, 0o700)
        for name, val in (("api-token", self.token), ("signing-key", self.key_text)):
            fd = os.open(os.path.join(self.creds, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(val + "\n")
        for d in (self.state, self.run):
            os.mkdir(d, 0o700)
        with open(self.conf, "w") as f:
            f.write(config)
        chown_tree(self.tmp, self.run_as)

    def workspace_path(self, ws):
        return os.path.join(self.state, "workspaces", ws)

    def env(self):
        # Exactly this, nothing inherited from the test's own environment.
        return {
            "CREDENTIALS_DIRECTORY": self.creds,
            "STATE_DIRECTORY": self.state,
            "RUNTIME_DIRECTORY": self.run,
            "PATH": "/usr/bin:/bin",
            "SANDBOX_TEST_SECRET": self.canary,
        }

    @staticmethod
    def _pick_port():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((LOOPBACK, 0))
            return s.getsockname()[1]
        finally:
            s.close()

    def health(self, timeout=2.0):
        try:
            return http(self.port, "GET", "/health", timeout=timeout)
        except (OSError, HttpError):
            return None

    def wait_reexecuted(self, n, limit=15.0):
        """GET /health until it counts n re-executions (a daemon started by hand that retired
        re-executes itself in place); return its JSON, the last one seen when time ran out."""
        deadline, j = now() + limit, {}
        while now() < deadline:
            h = self.health(timeout=2.0)
            j = (h.json() or {}) if h is not None and h.status == 200 else {}
            if j.get("reexecutions") == n:
                break
            time.sleep(0.1)
        return j

    def start(self, wait=15.0):
        last = ""
        for attempt in range(4):
            self.port = self._pick_port()
            logf = open(self.log_path, "ab")
            logf.write(("\n=== execute.py: start #%d on port %d ===\n" % (attempt + 1, self.port)).encode())
            logf.flush()
            argv = [self.path, "--listen", "%s:%d" % (LOOPBACK, self.port), "--config", self.conf,
                    "--log-target", "console"]
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                         env=self.env(), cwd=self.tmp, close_fds=True,
                                         **popen_ids(self.run_as))
            logf.close()
            deadline = now() + wait
            while now() < deadline:
                if self.proc.poll() is not None:
                    break
                r = self.health(timeout=1.0)
                if r is not None and r.status == 200:
                    return r
                time.sleep(0.1)
            rc = self.proc.poll()
            if rc is None:
                self.kill()
                raise DaemonError("no 200 from GET /health within %.0fs on port %d; log tail: %s" %
                                  (wait, self.port, trunc(self.log_tail(), 1500)))
            last = "exited with %s; log tail: %s" % (rc, trunc(self.log_tail(), 1500))
            if "in use" not in last:
                break
        raise DaemonError("daemon failed to start: " + last)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=4000):
        return self.log_text()[-n:]

    def terminate(self, grace=10.0):
        """SIGTERM by pid; return (exit status or None if it had to be killed, seconds taken)."""
        t0 = now()
        if self.proc is None:
            return None, 0.0
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
                return None, now() - t0
        return self.proc.poll(), now() - t0

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def cleanup(self):
        self.kill()
        if not self.keep_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


class ServiceDaemon:
    """The daemon of a systemd service a suite did not start (the private box of the systemd-*
    suites runs it as the service user, in its scopes): what a suite reads of Daemon, for it.
    The credentials are read from /etc/credstore (the box's); its SANDBOX_TEST_SECRET is what a
    drop-in gave the service (@canary). Nothing is started or stopped here: terminate() leaves
    the service running; alive() means the same main process still serves."""

    def __init__(self, unit, port, canary, user="sandbox-runner", prefix="sandbox-runner"):
        import pwd
        self.unit, self.port, self.canary = unit, port, canary
        self.keep_tmp = False
        with open("/etc/credstore/%s.api-token" % prefix) as f:
            self.token = f.read().strip()
        with open("/etc/credstore/%s.signing-key" % prefix) as f:
            self.key_text = f.read().strip()
        self.key = self.key_text.encode()
        pw = pwd.getpwnam(user)
        self.run_as = (pw.pw_uid, pw.pw_gid)
        self.creds = "/run/credentials/" + unit
        self.state = "/var/lib/" + prefix
        self.run = self.tmp = "/run/" + prefix
        self.path = unit
        self.main_pid = None
        self.since = time.strftime("%Y-%m-%d %H:%M:%S")

    def _show(self, prop):
        return subprocess.run(["systemctl", "show", "-p", prop, "--value", self.unit], capture_output=True,
                              text=True).stdout.strip()

    def workspace_path(self, ws):
        return os.path.join(self.state, "workspaces", ws)

    def health(self, timeout=2.0):
        return Daemon.health(self, timeout)

    def start(self, wait=30.0):
        """Wait for a 200 from GET /health (socket activation starts the service); note its pid."""
        deadline, r = now() + wait, None
        while now() < deadline:
            r = self.health(timeout=2.0)
            if r is not None and r.status == 200:
                self.main_pid = int(self._show("MainPID") or 0) or None
                return r
            time.sleep(0.2)
        raise DaemonError("%s: no 200 from GET /health on port %d within %.0fs" % (self.unit, self.port, wait))

    @property
    def pid(self):
        return self.main_pid

    def alive(self):
        return self.main_pid is not None and self._show("MainPID") == str(self.main_pid)

    def log_text(self):
        return subprocess.run(["journalctl", "-u", self.unit, "--since", self.since, "-o", "cat", "--no-pager"],
                              capture_output=True, text=True, errors="replace").stdout

    def log_tail(self, n=4000):
        return self.log_text()[-n:]

    def terminate(self, grace=10.0):
        return None, 0.0

    def kill(self):
        pass

    def cleanup(self):
        pass


def kill_leftovers(pids, out):
    """SIGKILL each of @pids (payload processes of this run left behind), saying so on @out."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            out.write("# killed leftover payload process %d\n" % pid)
        except OSError:
            pass


def write_log_tail(d, out):
    """The tail of the daemon @d's log on @out, as TAP comments."""
    out.write("# daemon log tail:\n")
    for ln in d.log_tail(3000).splitlines():
        out.write("#   %s\n" % ln)


def start_or_fail_all(d, cases, tap, result_cls, health_chars):
    """Start the daemon @d and say so in TAP comments (its pid, port, tmp and the first
    @health_chars of its /health); return that /health response.  When it does not start: each
    of @cases ((name, function) pairs) is emitted on @tap as a @result_cls that failed with why,
    and None is returned."""
    out = tap.out
    try:
        h = d.start()
    except (DaemonError, OSError) as e:
        for name, _ in cases:
            r = result_cls(name)
            r.fail("daemon did not start: %s" % e)
            tap.emit(r)
        return None
    out.write("# daemon pid %d on 127.0.0.1:%d, tmp %s\n# health: %s\n" % (
        d.pid, d.port, d.tmp, trunc(h.body.decode("utf-8", "replace"), health_chars)))
    out.flush()
    return h


# --------------------------------------------------------------------------------------------
# TAP (the outcome of a case: testlib.Result)

class Tap:
    def __init__(self, out):
        self.out = out
        self.n = 0
        self.failed = []
        self.lock = threading.Lock()

    def emit(self, res, verbose=False):
        with self.lock:
            self.n += 1
            if res.skip is not None:
                self.out.write("ok %d - %s # SKIP %s\n" % (self.n, res.name, res.skip))
            elif res.ok:
                self.out.write("ok %d - %s\n" % (self.n, res.name))
            else:
                self.out.write("not ok %d - %s\n" % (self.n, res.name))
                self.failed.append((self.n, res.name))
            for ln in self.comments(res, verbose):
                for sub in str(ln).splitlines() or [""]:
                    self.out.write("#   %s\n" % sub)
            self.out.flush()

    def summary(self, total, seconds):
        """The closing comments (how many of @total passed in @seconds, which failed); return the
        exit status of the suite."""
        self.out.write("# %d/%d passed in %.1fs\n" % (total - len(self.failed), total, seconds))
        if self.failed:
            self.out.write("# failed: %s\n" % ", ".join(str(n) for n, _ in self.failed))
        self.out.flush()
        return 1 if self.failed else 0

    def comments(self, res, verbose):
        """The lines printed as TAP comments below @res's line: its failures, and its notes when
        it failed or @verbose."""
        lines = []
        if not res.ok:
            lines += ["FAIL: " + f for f in res.failures]
        if not res.ok or verbose:
            lines += res.notes
        return lines
