# SPDX-License-Identifier: LGPL-2.1-or-later
"""Infrastructure for http-battery.py: starting sandbox-runnerd on a loopback port, raw-socket
HTTP exchanges, response parsing, v1 request signing, and TAP reporting.

Standard library only (Debian 12's python3 3.11).  All traffic goes to 127.0.0.x.
"""

import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time

LOOPBACK = "127.0.0.1"

CONFIG_TEXT = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
MaxConnections=64
MaxConnectionsPerClient=8
HeaderTimeoutSec=2
RequestTimeoutSec=10
MaxRequestBodyBytes=1M
"""

MAX_CONNECTIONS = 64
MAX_CONNECTIONS_PER_CLIENT = 8
HEADER_TIMEOUT = 2.0
REQUEST_TIMEOUT = 10.0
MAX_BODY = 1024 * 1024          # systemd-style "1M" is 1024-based

SANITIZER_MARKERS = ("AddressSanitizer", "runtime error", "LeakSanitizer", "UndefinedBehaviorSanitizer")


# --------------------------------------------------------------------------------------------
# Small helpers

def trunc(data, limit=300, total=None):
    """repr() of bytes/str, cut in the middle when long, with the total length."""
    if data is None:
        return "None"
    total = len(data) if total is None else total
    if len(data) <= limit:
        return repr(data) + ("" if total == len(data) else " ... [%d bytes total]" % total)
    head = data[: limit * 2 // 3]
    tail = data[-(limit // 3):]
    return "%r ... [%d bytes total] ... %r" % (head, total, tail)


def now():
    return time.monotonic()


# --------------------------------------------------------------------------------------------
# HTTP responses

class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value) as str
        self.body = body                # bytes
        self.raw_head = raw_head        # bytes
        self._json = None
        self._json_done = False

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def json(self):
        if not self._json_done:
            self._json_done = True
            try:
                self._json = json.loads(self.body.decode("utf-8"))
            except Exception:
                self._json = None
        return self._json

    def error_code(self):
        j = self.json()
        if isinstance(j, dict) and isinstance(j.get("error"), str):
            return j["error"]
        return None

    def describe(self, limit=300):
        hdrs = "; ".join("%s: %s" % (k, v) for k, v in self.headers)
        return "HTTP %s %d %s | headers: %s | body: %s" % (
            self.version, self.status, self.reason, trunc(hdrs, 400), trunc(self.body, limit))


class ParseError(Exception):
    pass


def _decode_chunked(buf, pos):
    """Decode a chunked body starting at pos. Return (body, end_pos) or None if incomplete."""
    body = bytearray()
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        line = buf[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(line, 16)
        except ValueError:
            raise ParseError("bad chunk size line %r" % bytes(buf[pos:eol][:40]))
        pos = eol + 2
        if size == 0:
            # trailers until an empty line
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                if eol == pos:
                    return bytes(body), eol + 2
                pos = eol + 2
        if len(buf) < pos + size + 2:
            return None
        body += buf[pos:pos + size]
        pos += size + 2


def parse_one_response(buf, closed, head_request=False):
    """Parse one response from the front of buf. Return (Response, consumed) or None when
    incomplete. When closed is true, a body without framing ends at the end of buf."""
    end = buf.find(b"\r\n\r\n")
    sep = 4
    if end < 0:
        return None
    head = bytes(buf[:end])
    lines = head.split(b"\r\n")
    m = re.match(rb"HTTP/(\d\.\d) (\d{3})(?: (.*))?$", lines[0])
    if not m:
        raise ParseError("bad status line %r" % lines[0][:80])
    version = m.group(1).decode()
    status = int(m.group(2))
    reason = (m.group(3) or b"").decode("latin-1")
    headers = []
    for ln in lines[1:]:
        if b":" not in ln:
            raise ParseError("bad response header line %r" % ln[:80])
        k, v = ln.split(b":", 1)
        headers.append((k.decode("latin-1").strip(), v.decode("latin-1").strip()))
    pos = end + sep

    def hv(name):
        for k, v in headers:
            if k.lower() == name:
                return v
        return None

    if head_request or 100 <= status < 200 or status in (204, 304):
        return Response(version, status, reason, headers, b"", head), pos
    te = hv("transfer-encoding")
    cl = hv("content-length")
    if te and "chunked" in te.lower():
        r = _decode_chunked(buf, pos)
        if r is None:
            return None
        body, newpos = r
        return Response(version, status, reason, headers, body, head), newpos
    if cl is not None:
        try:
            n = int(cl)
        except ValueError:
            raise ParseError("bad response Content-Length %r" % cl)
        if len(buf) < pos + n:
            return None
        return Response(version, status, reason, headers, bytes(buf[pos:pos + n]), head), pos + n
    if not closed:
        return None
    return Response(version, status, reason, headers, bytes(buf[pos:]), head), len(buf)


def parse_responses(buf, closed):
    """All complete responses in buf. Return (list, leftover_bytes, parse_error_or_None)."""
    out = []
    pos = 0
    view = bytes(buf)
    while pos < len(view):
        try:
            r = parse_one_response(view[pos:], closed)
        except ParseError as e:
            return out, view[pos:], str(e)
        if r is None:
            break
        resp, used = r
        out.append(resp)
        pos += used
    return out, view[pos:], None


# --------------------------------------------------------------------------------------------
# Raw connections

class Exchange:
    """What happened on one raw connection."""

    def __init__(self):
        self.sent = 0               # bytes of the request written
        self.to_send = 0            # bytes we meant to write
        self.send_error = None      # errno name when a write failed (server closed/reset)
        self.buf = bytearray()      # everything read
        self.closed = False         # EOF seen
        self.reset = False          # ECONNRESET seen on read
        self.connect_error = None
        self.t_start = now()
        self.t_end = None           # when the connection ended (EOF/reset), or None
        self.t_first_byte = None
        self.request_preview = b""
        self._parsed = None

    @property
    def ended(self):
        return self.closed or self.reset

    def responses(self):
        return parse_responses(self.buf, self.ended)

    def first(self):
        rs, _, _ = self.responses()
        return rs[0] if rs else None

    def end_time(self):
        return None if self.t_end is None else self.t_end - self.t_start

    def describe(self):
        out = []
        out.append("sent %d/%d bytes: %s" % (self.sent, self.to_send,
                                              trunc(self.request_preview, 240, total=self.to_send)))
        if self.connect_error:
            out.append("connect error: %s" % self.connect_error)
        if self.send_error:
            out.append("write stopped: %s" % self.send_error)
        rs, rest, perr = self.responses()
        if rs:
            for i, r in enumerate(rs[:3]):
                out.append("response %d: %s" % (i + 1, r.describe()))
            if len(rs) > 3:
                out.append("... %d responses in total" % len(rs))
        else:
            out.append("no complete response")
        if rest:
            out.append("unparsed bytes: %s" % trunc(rest, 200))
        if perr:
            out.append("response parse error: %s" % perr)
        if self.ended:
            out.append("connection %s by server after %.2fs" %
                       ("reset" if self.reset else "closed", self.end_time()))
        else:
            out.append("no close seen by the end of the read window")
        return out


class RawConn:
    def __init__(self, port, src=LOOPBACK, connect_timeout=2.0):
        self.ex = Exchange()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if src:
            self.sock.bind((src, 0))
        self.sock.settimeout(connect_timeout)
        try:
            self.sock.connect((LOOPBACK, port))
        except OSError as e:
            self.ex.connect_error = errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)
            self.ex.closed = True
            self.ex.t_end = now()
        self.sock.setblocking(False)

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _read_some(self):
        """Read what is available. Return True if something happened (data or end)."""
        ex = self.ex
        if ex.ended:
            return False
        try:
            data = self.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionResetError:
            ex.reset = True
            ex.t_end = now()
            return True
        except OSError as e:
            ex.reset = True
            ex.t_end = now()
            ex.send_error = ex.send_error or errno.errorcode.get(e.errno, str(e))
            return True
        if not data:
            ex.closed = True
            ex.t_end = now()
            return True
        if ex.t_first_byte is None:
            ex.t_first_byte = now()
        ex.buf += data
        return True

    def send(self, data, deadline=None, stop_on_response=False):
        """Write data while reading whatever comes back (so an early answer is not lost to an
        RST). Stops at a write error, at EOF, at the deadline, or (stop_on_response) as soon
        as one complete response has arrived."""
        ex = self.ex
        ex.to_send += len(data)
        if len(ex.request_preview) < 4096:
            ex.request_preview += data[: 4096 - len(ex.request_preview)]
        if ex.connect_error:
            return
        mv = memoryview(data)
        off = 0
        deadline = deadline or (now() + 10.0)
        while off < len(mv):
            if ex.ended or ex.send_error:
                return
            if stop_on_response and self.has_response():
                return
            t = deadline - now()
            if t <= 0:
                return
            r, w, _ = select.select([self.sock], [self.sock], [], min(t, 0.5))
            if r:
                self._read_some()
            if w and not ex.send_error:
                try:
                    n = self.sock.send(mv[off:off + 65536])
                    off += n
                    ex.sent += n
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    ex.send_error = errno.errorcode.get(e.errno, str(e))
                    return

    def has_response(self, n=1):
        rs, _, perr = parse_responses(self.ex.buf, self.ex.ended)
        return len(rs) >= n or perr is not None

    def read(self, timeout, until_responses=1, settle=0.0):
        """Read until the server ends the connection, or until_responses complete responses
        are in (then keep reading for `settle` more seconds to catch extras), or timeout."""
        ex = self.ex
        deadline = now() + timeout
        settle_deadline = None
        while not ex.ended:
            t = deadline - now()
            if settle_deadline is not None:
                t = min(t, settle_deadline - now())
            if t <= 0:
                break
            r, _, _ = select.select([self.sock], [], [], t)
            if r:
                self._read_some()
            if settle_deadline is None and until_responses and self.has_response(until_responses):
                if settle <= 0:
                    break
                settle_deadline = now() + settle
        return ex

    def shutdown_write(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def peek_state(self):
        """'open', 'closed', 'reset' or 'data' without blocking."""
        if self.ex.ended:
            return "reset" if self.ex.reset else "closed"
        try:
            d = self.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return "open"
        except ConnectionResetError:
            return "reset"
        except OSError:
            return "reset"
        return "data" if d else "closed"


def exchange(port, data, timeout=3.0, src=LOOPBACK, until_responses=1, settle=0.0,
             shut_wr=False, send_deadline=10.0):
    """Connect, write data (reading at the same time), optionally half-close, read the answer."""
    c = RawConn(port, src)
    try:
        c.send(data, deadline=now() + send_deadline)
        if shut_wr:
            c.shutdown_write()
        c.read(timeout, until_responses=until_responses, settle=settle)
        return c.ex
    finally:
        c.close()


def build_request(method, path, headers=(), body=b"", host="127.0.0.1", content_length=True,
                  version="HTTP/1.1"):
    """Bytes of a request. headers: list of (name, value) (str or bytes). Content-Length is
    added for a non-empty body unless content_length is False or a value is given."""
    def b(x):
        return x if isinstance(x, bytes) else x.encode("latin-1")
    out = bytearray()
    out += b(method) + b" " + b(path) + b" " + b(version) + b"\r\n"
    names = [b(k).lower() for k, _ in headers]
    if host is not None and b"host" not in names:
        out += b"Host: " + b(host) + b"\r\n"
    for k, v in headers:
        out += b(k) + b": " + b(v) + b"\r\n"
    if content_length is True and (body or method in ("POST", "PUT")) and b"content-length" not in names \
            and b"transfer-encoding" not in names:
        out += b"Content-Length: %d\r\n" % len(body)
    out += b"\r\n"
    out += body
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Signing (API.md "v1")

def signature(key, ts, method, path, body):
    s = b"v1\n" + str(ts).encode() + b"\n" + method.encode() + b"\n" + path.encode() + b"\n" + \
        hashlib.sha256(body).hexdigest().encode()
    return "v1=" + hmac.new(key, s, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------------------------
# The daemon under test

class DaemonError(Exception):
    pass


class Daemon:
    def __init__(self, path, keep_tmp=False):
        self.path = os.path.abspath(path)
        self.keep_tmp = keep_tmp
        self.tmp = tempfile.mkdtemp(prefix="http-battery.")
        os.chmod(self.tmp, 0o755)    # a root-started daemon becomes its sandbox user: it must reach this
        self.token = secrets.token_hex(32)
        self.key = secrets.token_hex(32).encode()
        self.proc = None
        self.port = None
        self.stderr_path = os.path.join(self.tmp, "daemon.stderr")
        self.stdout_path = os.path.join(self.tmp, "daemon.stdout")
        self._stderr_off = 0
        self.generation = 0
        self.asan = self._detect_asan()
        creds = os.path.join(self.tmp, "creds")
        os.mkdir(creds, 0o700)
        for name, val in (("api-token", self.token), ("signing-key", self.key.decode())):
            fn = os.path.join(creds, name)
            fd = os.open(fn, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(val)
        for d in ("state", "run"):
            os.mkdir(os.path.join(self.tmp, d), 0o700)
        with open(os.path.join(self.tmp, "runner.conf"), "w") as f:
            f.write(CONFIG_TEXT)

    def _detect_asan(self):
        try:
            with open(self.path, "rb") as f:
                data = f.read()
            return b"__asan_init" in data or b"libasan.so" in data
        except OSError:
            return False

    def env(self):
        e = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "CREDENTIALS_DIRECTORY": os.path.join(self.tmp, "creds"),
            "STATE_DIRECTORY": os.path.join(self.tmp, "state"),
            "RUNTIME_DIRECTORY": os.path.join(self.tmp, "run"),
        }
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "ASAN_SYMBOLIZER_PATH"):
            if k in os.environ:
                e[k] = os.environ[k]
        e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        return e

    @staticmethod
    def _pick_port():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((LOOPBACK, 0))
            return s.getsockname()[1]
        finally:
            s.close()

    def start(self, wait=20.0):
        """Start on a fresh ephemeral port; retry with another port when the daemon exits
        early (e.g. EADDRINUSE from a race for the port)."""
        last = ""
        for attempt in range(5):
            self.port = self._pick_port()
            self.generation += 1
            errf = open(self.stderr_path, "ab")
            outf = open(self.stdout_path, "ab")
            errf.write(("\n=== http-battery: start #%d on port %d ===\n" % (self.generation, self.port)).encode())
            errf.flush()
            argv = [self.path, "--listen", "%s:%d" % (LOOPBACK, self.port),
                    "--config", os.path.join(self.tmp, "runner.conf"), "--log-target", "console"]
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=outf, stderr=errf,
                                         env=self.env(), cwd=self.tmp, close_fds=True)
            errf.close()
            outf.close()
            deadline = now() + wait
            while now() < deadline:
                if self.proc.poll() is not None:
                    break
                st, _, _ = health(self.port, timeout=1.0)
                if st == 200:
                    self._stderr_off = os.path.getsize(self.stderr_path)
                    return
                time.sleep(0.1)
            rc = self.proc.poll()
            if rc is None:
                self.kill()
                raise DaemonError("daemon did not answer GET /health with 200 within %.0fs on port %d; "
                                  "stderr tail: %s" % (wait, self.port, trunc(self.stderr_tail(), 1500)))
            last = "exited with %s; stderr tail: %s" % (rc, trunc(self.stderr_tail(), 1500))
            if b"in use" not in self.stderr_tail().encode() and "EADDRINUSE" not in last:
                break
        raise DaemonError("daemon failed to start: " + last)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def returncode(self):
        return None if self.proc is None else self.proc.poll()

    def stderr_tail(self, n=4000):
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - n))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def new_stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(self._stderr_off)
                data = f.read()
                self._stderr_off = f.tell()
            return data.decode("utf-8", "replace")
        except OSError:
            return ""

    def rss_kib(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for ln in f:
                    if ln.startswith("VmRSS:"):
                        return int(ln.split()[1])
        except (OSError, ValueError, AttributeError):
            pass
        return None

    def stop(self, grace=5.0):
        """SIGTERM by pid, then SIGKILL. Return the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.poll()

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


def health(port, timeout=3.0, src=LOOPBACK):
    """GET /health on a fresh connection. Return (status or None, Response or None, Exchange)."""
    try:
        ex = exchange(port, build_request("GET", "/health", [("Connection", "close")]), timeout=timeout,
                      src=src)
    except OSError as e:
        return None, None, None
    r = ex.first()
    return (r.status if r else None), r, ex


# --------------------------------------------------------------------------------------------
# TAP (the outcome of a case: testlib.Result)

class Tap:
    def __init__(self, plan):
        self.n = 0
        self.failed = []
        print("1..%d" % plan, flush=True)

    def result(self, res, verbose=False):
        self.n += 1
        if res.skip is not None:
            print("ok %d - %s # SKIP %s" % (self.n, res.name, res.skip), flush=True)
            return
        print("%s %d - %s" % ("ok" if res.ok else "not ok", self.n, res.name), flush=True)
        if not res.ok:
            self.failed.append((self.n, res.name))
            for f in res.failures:
                lines = str(f).splitlines() or [""]
                print("#   FAIL: %s" % lines[0], flush=True)
                for ln in lines[1:]:
                    print("#       | %s" % ln, flush=True)
        if not res.ok or verbose:
            for nt in res.notes:
                for ln in str(nt).splitlines() or [""]:
                    print("#   %s" % ln, flush=True)
        elif res.notes:
            # always show a one-line summary of what the daemon answered
            print("#   %s" % res.notes[0], flush=True)

    def diag(self, msg):
        for ln in msg.splitlines():
            print("# %s" % ln, flush=True)
