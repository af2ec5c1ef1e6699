#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of sandbox-runner-egress, the egress gateway.

    egress-gateway.py GATEWAY_BINARY

Runs itself again inside new mount and network namespaces (`unshare --mount --net`): the only
network there is a loopback of its own, so every upstream of the test lives on 127.0.0.0/8 and
nothing can leave the machine. A temporary hosts file is bind-mounted over /etc/hosts, mapping

    allowed.test, a.wild.test, b.a.wild.test, wild.test, notlisted.test  -> 127.0.0.2
    pinned.test                                                           -> 127.0.0.3
    private.test                                                          -> 10.0.0.1
    rebind.test                                                           -> 127.0.0.4 and 192.168.1.1
    v6.wild.test                                                          -> ::1
    slowfirst.wild.test         -> 127.0.0.5 (a listener that never accepts) and 127.0.0.2

and /etc/resolv.conf is replaced too: a DNS stub of the test on 127.0.0.1:53, with a search list.

The gateway gets its listening AF_UNIX socket passed the socket-activation way (LISTEN_FDS=1,
LISTEN_PID) and a policy allowing allowed.test, *.wild.test, pinned.test:443, private.test and
rebind.test with the mirror 127.0.0.0/8. 10.0.0.1 and 192.168.1.1 are refused before any connect (and would be unreachable
in the private network namespace anyway): the test checks the refusal (403, not 502) and that the
gateway's log names the refused address and never reports dialling it.

A second gateway serves a policy in mode open with an upstream route (test_upstream): an upstream
proxy of the test on 127.0.0.6:3128 gets the CONNECTs and absolute-form requests of allowed
targets with the credentials of --upstream-auth, a refusal of the upstream becomes 502, a refused
address never reaches it, a target that noProxy names goes direct.

Output is TAP. Needs root for the namespaces and the bind mount (exit 77 otherwise).
"""

import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

HOSTS = """\
127.0.0.1 localhost
::1 localhost
127.0.0.2 allowed.test
127.0.0.2 a.wild.test
127.0.0.2 b.a.wild.test
127.0.0.2 wild.test
127.0.0.2 notlisted.test
127.0.0.3 pinned.test
10.0.0.1 private.test
127.0.0.4 rebind.test
192.168.1.1 rebind.test
::1 v6.wild.test
127.0.0.5 slowfirst.wild.test
127.0.0.2 slowfirst.wild.test
"""

# private.test and rebind.test are listed so that what refuses them is the address check.
POLICY = {"mode": "allowlist", "allow": ["allowed.test", "*.wild.test", "pinned.test:443", "private.test",
                                         "rebind.test"],
          "mirrors": ["127.0.0.0/8"]}

ECHO_PORT = 7000
INNER_ENV = "SR_EGRESS_TEST_INNER"

# ------------------------------------------------------------------------------------------------
# TAP

_n = 0
_failed = 0
# Slow cases run in threads: one lock keeps each TAP line (and its number) whole and in order.
_tap_lock = threading.Lock()


def ok(cond, desc, diag=None):
    global _n, _failed
    with _tap_lock:
        _n += 1
        lines = [f"ok {_n} - {desc}" if cond else f"not ok {_n} - {desc}"]
        if not cond:
            _failed += 1
            if diag:
                lines += [f"# {line}" for line in str(diag).splitlines()[:40]]
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    return cond


def note(msg):
    with _tap_lock:
        sys.stdout.write("".join(f"# {line}\n" for line in str(msg).splitlines()))
        sys.stdout.flush()


# ------------------------------------------------------------------------------------------------
# Namespaces


def enter_namespaces(gateway):
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (mount and network namespaces, bind mount over /etc/hosts)")
        sys.exit(77)
    env = dict(os.environ)
    env[INNER_ENV] = "1"
    os.execvpe("unshare", ["unshare", "--mount", "--net", "--propagation", "private", "--",
                           sys.executable, os.path.abspath(__file__), gateway], env)


def loopback_up():
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


# ------------------------------------------------------------------------------------------------
# Upstream servers (all on 127.0.0.0/8 in our private network namespace)


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class HttpHandler(socketserver.BaseRequestHandler):
    """A minimal HTTP/1.1 origin recording the raw head and body it got."""
    seen = []
    lock = threading.Lock()

    def handle(self):
        s = self.request
        s.settimeout(10)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = [tuple(x.split(":", 1)) for x in lines[1:]]
            hmap = {k.strip().lower(): v.strip() for k, v in headers}
            body = rest
            if "content-length" in hmap:
                n = int(hmap["content-length"])
                while len(body) < n:
                    d = s.recv(65536)
                    if not d:
                        break
                    body += d
            elif hmap.get("transfer-encoding", "").lower() == "chunked":
                while not body.endswith(b"0\r\n\r\n"):
                    d = s.recv(65536)
                    if not d:
                        break
                    body += d
            # Anything the gateway might have forwarded behind the message (it must not).
            s.settimeout(0.3)
            try:
                extra = s.recv(65536)
            except (socket.timeout, OSError):
                extra = b""
            record = {"request_line": lines[0], "headers": headers, "hmap": hmap, "body": body,
                      "extra": extra}
            with HttpHandler.lock:
                HttpHandler.seen.append(record)
            answer = json.dumps({"path": lines[0].split(" ")[1], "host": hmap.get("host")}).encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(answer), answer))
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class DnsStub:
    """A DNS server on 127.0.0.1:53 (our own namespace): records the names asked, answers NXDOMAIN,
    and never answers names starting with "slow." (so that the gateway's own deadline fires)."""

    def __init__(self):
        self.names = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                d, addr = self.sock.recvfrom(4096)
            except OSError:
                return
            i, labels = 12, []
            while i < len(d) and d[i]:
                labels.append(d[i + 1:i + 1 + d[i]].decode("ascii", "replace"))
                i += 1 + d[i]
            name = ".".join(labels)
            self.names.append(name)
            if name.startswith("slow."):
                continue
            # Same id and question, QR + RD + RA, RCODE 3 (NXDOMAIN), no records.
            self.sock.sendto(d[:2] + b"\x81\x83" + d[4:6] + b"\0" * 6 + d[12:i + 5], addr)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def start_server(addr, handler):
    srv = Server(addr, handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


# ------------------------------------------------------------------------------------------------
# Gateway process

WRAPPER = ("import os, sys\n"
           "fd = int(sys.argv[1])\n"
           "if fd != 3:\n"
           "    os.dup2(fd, 3)\n"
           "    os.close(fd)\n"
           "os.environ['LISTEN_FDS'] = '1'\n"
           "os.environ['LISTEN_PID'] = str(os.getpid())\n"
           "os.execv(sys.argv[2], sys.argv[2:])\n")


class Gateway:
    def __init__(self, binary, workdir, name, policy_path, extra=()):
        self.path = os.path.join(workdir, f"{name}.sock")
        self.log_path = os.path.join(workdir, f"{name}.log")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self.path)
        lsock.listen(128)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRAPPER, str(lsock.fileno()), binary, "--policy", policy_path,
             "--log-target", "console", *extra],
            pass_fds=[lsock.fileno()], stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        lsock.close()   # the gateway has it now

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def connect(gw, timeout=15):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(gw.path)
    return s


def read_head(s, initial=b""):
    buf = initial
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def status_of(head):
    m = re.match(r"HTTP/1\.1 (\d{3}) ", head)
    return int(m.group(1)) if m else None


def read_all(s):
    buf = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except OSError:
        pass
    return buf


def request(gw, raw):
    """Send raw bytes, read until the gateway closes. Return (status, head, body)."""
    with connect(gw) as s:
        s.sendall(raw)
        data = read_all(s)
    head, _, body = data.partition(b"\r\n\r\n")
    head = head.decode("latin-1")
    return status_of(head), head, body.decode("utf-8", "replace")


def connect_tunnel(gw, authority, early=b""):
    s = connect(gw)
    s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: test\r\n\r\n".encode() + early)
    head, rest = read_head(s)
    return s, status_of(head), head, rest


def recv_exactly(s, n, initial=b""):
    buf = initial
    while len(buf) < n:
        d = s.recv(min(65536, n - len(buf)))
        if not d:
            break
        buf += d
    return buf


# ------------------------------------------------------------------------------------------------
# Cases


def test_connect_allowed(gw):
    s, st, head, rest = connect_tunnel(gw, f"allowed.test:{ECHO_PORT}", early=b"early-bytes|")
    ok(st == 200 and head == "HTTP/1.1 200 Connection established",
       "CONNECT allowed.test: 200 Connection established, nothing else in the answer head", head)
    got = recv_exactly(s, len(b"early-bytes|"), rest)
    ok(got == b"early-bytes|", "bytes sent right behind the CONNECT head reach the upstream first", got)
    s.sendall(b"ping")
    ok(recv_exactly(s, 4) == b"ping", "the tunnel relays both ways")
    s.shutdown(socket.SHUT_WR)
    ok(read_all(s) == b"", "half-close is passed on: the echo server sees EOF and closes, and so do we")
    s.close()

    for name in ("a.wild.test", "b.a.wild.test", "A.Wild.Test."):
        s, st, head, _ = connect_tunnel(gw, f"{name}:{ECHO_PORT}")
        good = st == 200
        if good:
            s.sendall(b"x")
            good = recv_exactly(s, 1) == b"x"
        s.close()
        ok(good, f"CONNECT {name} (matches *.wild.test) works", head)

    s, st, head, _ = connect_tunnel(gw, "pinned.test:443")
    good = st == 200
    if good:
        s.sendall(b"pinned")
        good = recv_exactly(s, 6) == b"pinned"
    s.close()
    ok(good, "CONNECT pinned.test:443 (pinned port) works", head)


def test_forward(gw):
    HttpHandler.seen.clear()
    st, head, body = request(gw, b"GET http://allowed.test:8080/some/path?q=topsecretquery HTTP/1.1\r\n"
                                 b"Host: 169.254.169.254\r\n"
                                 b"Proxy-Connection: keep-alive\r\n"
                                 b"Proxy-Authorization: Basic c2VjcmV0\r\n"
                                 b"Connection: keep-alive, X-Drop-Me\r\n"
                                 b"X-Drop-Me: 1\r\n"
                                 b"Keep-Alive: 300\r\n"
                                 b"TE: trailers\r\n"
                                 b"Upgrade: websocket\r\n"
                                 b"X-Custom: topsecretheadervalue\r\n"
                                 b"\r\n")
    ok(st == 200, "absolute-URI GET to allowed.test:8080 is forwarded", head + body)
    rec = HttpHandler.seen[-1] if HttpHandler.seen else None
    ok(rec and rec["request_line"] == "GET /some/path?q=topsecretquery HTTP/1.1",
       "upstream sees the origin-form request line", rec and rec["request_line"])
    hosts = [v.strip() for k, v in (rec["headers"] if rec else []) if k.strip().lower() == "host"]
    ok(hosts == ["allowed.test:8080"], "upstream sees exactly one Host:, from the URI, not the client's "
       "Host: 169.254.169.254", hosts)
    names = [k.strip().lower() for k, _ in (rec["headers"] if rec else [])]
    dropped = {"proxy-connection", "proxy-authorization", "x-drop-me", "keep-alive", "te", "upgrade"}
    ok(rec and not dropped & set(names), "hop-by-hop headers (and those named in Connection:) are removed",
       names)
    ok(rec and rec["hmap"].get("connection") == "close" and names.count("connection") == 1,
       "upstream gets Connection: close", rec and rec["hmap"])
    ok(rec and rec["hmap"].get("x-custom") == "topsecretheadervalue", "end-to-end headers are kept")

    HttpHandler.seen.clear()
    st, head, body = request(gw, b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    rec = HttpHandler.seen[-1] if HttpHandler.seen else None
    ok(st == 200 and rec and rec["hmap"].get("host") == "allowed.test",
       "default port 80: Host: without a port", rec and rec["hmap"])

    HttpHandler.seen.clear()
    payload = os.urandom(100000)
    st, head, body = request(gw, b"POST http://allowed.test:8080/upload HTTP/1.1\r\nHost: x\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload +
                                 b"GET http://allowed.test:8080/smuggled HTTP/1.1\r\n\r\n")
    rec = HttpHandler.seen[-1] if HttpHandler.seen else None
    ok(st == 200 and rec and rec["body"] == payload, "POST body (Content-Length) is forwarded intact",
       head)
    ok(rec and rec["extra"] == b"" and all("smuggled" not in r["request_line"] for r in HttpHandler.seen),
       "bytes after the end of the request are not forwarded (one request per connection)",
       rec and rec["extra"][:100])

    HttpHandler.seen.clear()
    st, head, body = request(gw, b"POST http://allowed.test:8080/chunked HTTP/1.1\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n"
                                 b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    rec = HttpHandler.seen[-1] if HttpHandler.seen else None
    ok(st == 200 and rec and rec["body"] == b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
       "chunked body is forwarded raw, framing included", rec and rec["body"])

    st, head, body = request(gw, b"GET http://allowed.test:8080/x HTTP/1.0\r\n\r\n")
    ok(st == 200, "HTTP/1.0 absolute-URI request is forwarded", head)


def expect_refusal(gw, raw, statuses, desc, must_contain=()):
    st, head, body = request(gw, raw)
    good = st in statuses and "Connection: close" in head and all(m in body for m in must_contain)
    ok(good, f"{desc} -> {st}", f"{head}\n\n{body}")
    return st, body


def test_refusals(gw):
    expect_refusal(gw, b"CONNECT notlisted.test:443 HTTP/1.1\r\n\r\n", {403},
                   "CONNECT to a name not in the allowlist", ["notlisted.test"])
    expect_refusal(gw, b"GET http://notlisted.test/ HTTP/1.1\r\n\r\n", {403},
                   "absolute-URI GET to a name not in the allowlist", ["notlisted.test"])
    expect_refusal(gw, f"CONNECT wild.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode(), {403},
                   "*.wild.test does not allow the apex wild.test")
    expect_refusal(gw, b"CONNECT evilallowed.test:443 HTTP/1.1\r\n\r\n", {403},
                   "no suffix match without a label boundary")
    expect_refusal(gw, b"CONNECT allowed.test.evil.test:443 HTTP/1.1\r\n\r\n", {403},
                   "allowed.test.evil.test is not allowed.test")
    expect_refusal(gw, b"CONNECT pinned.test:80 HTTP/1.1\r\n\r\n", {403},
                   "pinned.test:80 with pinned.test:443 in the allowlist")
    expect_refusal(gw, b"GET http://pinned.test/ HTTP/1.1\r\n\r\n", {403},
                   "absolute-URI GET to pinned.test (port 80) with a :443 pin")

    for target in ("127.0.0.2:7000", "[::1]:7000", "2130706433:7000", "0x7f000001:7000", "127.1:7000",
                   "0177.0.0.1:7000", "[::ffff:127.0.0.1]:7000", "0.0.0.0:7000"):
        expect_refusal(gw, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode(), {400, 403},
                       f"IP literal target CONNECT {target}")
    for uri in ("http://127.0.0.2:8080/", "http://[::1]/", "http://2130706433/"):
        expect_refusal(gw, f"GET {uri} HTTP/1.1\r\n\r\n".encode(), {400, 403}, f"IP literal target GET {uri}")

    st, body = expect_refusal(gw, f"CONNECT private.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode(), {403},
                              "a name resolving to a private address (10.0.0.1)", ["10.0.0.1"])
    st, body = expect_refusal(gw, f"CONNECT rebind.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode(), {403},
                              "a name resolving to loopback-mirror AND private addresses (192.168.1.1)",
                              ["192.168.1.1"])
    expect_refusal(gw, f"CONNECT v6.wild.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode(), {403},
                   "a name resolving to ::1 (loopback, not a mirror)", ["::1"])

    for target in ("user:pw@allowed.test:7000", "allowed.test@169.254.169.254:80"):
        expect_refusal(gw, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode(), {400}, f"userinfo in CONNECT {target}")
    expect_refusal(gw, b"GET http://user@allowed.test:8080/ HTTP/1.1\r\n\r\n", {400},
                   "userinfo in an absolute URI")

    expect_refusal(gw, b"GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", {400},
                   "origin-form request with only Host: (not a proxy request)")
    expect_refusal(gw, b"GET /path HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", {400},
                   "origin-form request with Host: 169.254.169.254")
    for uri in ("ftp://allowed.test/", "gopher://allowed.test/", "file:///etc/passwd", "https://allowed.test/"):
        expect_refusal(gw, f"GET {uri} HTTP/1.1\r\n\r\n".encode(), {400}, f"scheme other than http: {uri}")

    for port in ("0", "65536", "-1", "+443", "0443", "443:80", "", "99999999999"):
        expect_refusal(gw, f"CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n".encode(), {400},
                       f"bad port CONNECT allowed.test:{port}")
    expect_refusal(gw, b"CONNECT allowed.test HTTP/1.1\r\n\r\n", {400}, "CONNECT without a port")
    expect_refusal(gw, b"GET http://allowed.test:0/ HTTP/1.1\r\n\r\n", {400}, "bad port in an absolute URI")

    expect_refusal(gw, b"TRACE http://allowed.test/ HTTP/1.1\r\n\r\n", {405}, "TRACE")
    expect_refusal(gw, b"PROPFIND http://allowed.test/ HTTP/1.1\r\n\r\n", {405}, "PROPFIND")
    expect_refusal(gw, b"FOO http://allowed.test/ HTTP/1.1\r\n\r\n", {400}, "unknown method")
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/2.0\r\n\r\n", {505}, "HTTP/2.0 request line")
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", {400},
                   "obs-fold header continuation")
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/1.1\rX: a\r\r", {400}, "CR-only line endings")
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/1.1\r\nNoColon\r\n\r\n", {400}, "header line without colon")
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/1.1\r\nX: a\x00b\r\n\r\n", {400}, "NUL in a header")
    expect_refusal(gw, b"POST http://allowed.test:8080/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n"
                       b"\r\nabc", {400}, "duplicate Content-Length")
    expect_refusal(gw, b"POST http://allowed.test:8080/ HTTP/1.1\r\nContent-Length: 3\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {400}, "Content-Length with Transfer-Encoding")
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(101))
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/1.1\r\n" + many + b"\r\n", {431}, "101 header fields")
    expect_refusal(gw, b"GET http://allowed.test/ HTTP/1.1\r\nX-Big: " + b"a" * 17000 + b"\r\n\r\n", {431},
                   "request head over 16 KiB")
    expect_refusal(gw, b"GET http://allowed.test/" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", {414, 431},
                   "request target over 8 KiB")


def test_dns(gw, dns):
    dns.names.clear()
    expect_refusal(gw, b"CONNECT nx.wild.test:443 HTTP/1.1\r\n\r\n", {502},
                   "a name that does not resolve: 502", ["nx.wild.test"])
    asked = sorted(set(dns.names))
    ok(asked == ["nx.wild.test"], "the name is resolved as approved: no search-list suffix "
       "(resolv.conf has 'search corp.internal')", asked)


def test_resolve_deadline(gw):
    t0 = time.monotonic()
    st, head, body = request(gw, b"CONNECT slow.wild.test:443 HTTP/1.1\r\n\r\n")
    elapsed = time.monotonic() - t0
    ok(st == 504 and 9 <= elapsed <= 15, f"a resolution that takes too long: 504 after the 10 s deadline "
       f"({elapsed:.1f} s)", head + body)


def test_connect_fallback(gw):
    """The first address never answers a SYN (its accept queue is full): the gateway must give up on
    it after the per-attempt limit and use the next approved address, within the overall 10 s."""
    black = socket.socket()
    black.bind(("127.0.0.5", ECHO_PORT))
    black.listen(0)
    fillers = []
    try:
        for _ in range(4):   # fill the accept queue; later SYNs are dropped
            f = socket.socket()
            f.setblocking(False)
            try:
                f.connect(("127.0.0.5", ECHO_PORT))
            except BlockingIOError:
                pass
            fillers.append(f)
        time.sleep(0.2)
        t0 = time.monotonic()
        s, st, head, _ = connect_tunnel(gw, f"slowfirst.wild.test:{ECHO_PORT}")
        elapsed = time.monotonic() - t0
        good = st == 200
        if good:
            s.sendall(b"fallback")
            good = recv_exactly(s, 8) == b"fallback"
        s.close()
        ok(good and 2 <= elapsed <= 8, f"a silent first address is given up after ~3 s and the next one is "
           f"used ({elapsed:.1f} s)", head)
        ok(re.search(r"allowed: CONNECT slowfirst\.wild\.test:7000 via 127\.0\.0\.2:7000", gw.log_text()),
           "log: the address actually dialled is the second one")
    finally:
        for f in fillers:
            f.close()
        black.close()


def test_big_tunnel(gw):
    payload = os.urandom(1 << 20)
    s, st, head, rest = connect_tunnel(gw, f"allowed.test:{ECHO_PORT}")
    if not ok(st == 200, "CONNECT for the 1 MiB transfer", head):
        return
    got = [rest]

    def reader():
        try:
            while sum(map(len, got)) < len(payload):
                d = s.recv(1 << 16)
                if not d:
                    break
                got.append(d)
        except OSError:
            pass

    t = threading.Thread(target=reader)
    t.start()
    s.sendall(payload)
    t.join(30)
    s.close()
    data = b"".join(got)
    ok(hashlib.sha256(data).digest() == hashlib.sha256(payload).digest(),
       "1 MiB through the tunnel and back intact", f"got {len(data)} bytes")


def test_concurrent(gw, n=20):
    results = [None] * n
    barrier = threading.Barrier(n)

    def one(i):
        try:
            s, st, head, rest = connect_tunnel(gw, f"a.wild.test:{ECHO_PORT}")
            barrier.wait(20)   # all tunnels open at the same time
            blob = os.urandom(65536)
            s.sendall(blob)
            back = recv_exactly(s, len(blob), rest)
            s.close()
            results[i] = st == 200 and back == blob
        except Exception as e:  # noqa: BLE001 - report any failure of the thread
            results[i] = repr(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ok(all(r is True for r in results), f"{n} concurrent tunnels, 64 KiB each way", results)


def test_head_deadline(gw):
    s = connect(gw, timeout=20)
    s.sendall(b"CONNECT allowed.test:7000 HTTP/1.1\r\n")    # never finished
    t0 = time.monotonic()
    data = read_all(s)
    elapsed = time.monotonic() - t0
    s.close()
    ok(data.startswith(b"HTTP/1.1 408 ") and 8 <= elapsed <= 15,
       f"an unfinished head is answered 408 and closed after the 10 s deadline ({elapsed:.1f} s)", data[:200])


# ------------------------------------------------------------------------------------------------
# Hand-over (what sandbox-runner-bridge does): one NUL byte on the AF_UNIX connection carrying the
# client's TCP socket; the gateway then serves that socket and drops the AF_UNIX connection.


def tcp_pair():
    """A connected TCP pair on loopback: (client, accepted)."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname(), timeout=15)
    s, _ = ls.accept()
    ls.close()
    c.settimeout(15)
    return c, s


def hand_over(gw, fds, data=b"\0"):
    u = connect(gw)
    socket.send_fds(u, [data], fds)
    return u


def closed_soon(s, timeout=5):
    """True if the peer closes s (EOF or reset) within timeout, with nothing sent first."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except OSError:
        return False


def pipe_released(r, timeout=5):
    """True once every write end of the pipe whose read end is r is closed (EOF on r)."""
    import select
    ready, _, _ = select.select([r], [], [], timeout)
    return bool(ready) and os.read(r, 1) == b""


def gateway_fds(gw):
    try:
        return len(os.listdir(f"/proc/{gw.proc.pid}/fd"))
    except OSError:
        return -1


def test_handoff(gw):
    base = gateway_fds(gw)

    # A well-formed hand-over: the tunnel runs on the TCP socket; the AF_UNIX connection is closed.
    c, s = tcp_pair()
    u = hand_over(gw, [s.fileno()])
    s.close()
    ok(closed_soon(u), "hand-over: the gateway closes the AF_UNIX connection once it has the TCP socket")
    u.close()
    c.sendall(f"CONNECT allowed.test:{ECHO_PORT} HTTP/1.1\r\nHost: x\r\n\r\nearly|".encode())
    head, rest = read_head(c)
    got = recv_exactly(c, len(b"early|"), rest)
    c.sendall(b"ping")
    echo = recv_exactly(c, 4)
    c.shutdown(socket.SHUT_WR)
    ok(status_of(head) == 200 and got == b"early|" and echo == b"ping" and read_all(c) == b"",
       "hand-over: CONNECT on the handed-over TCP socket, early bytes, echo, half-close", (head, got, echo))
    c.close()

    # A refusal is answered on the TCP socket too.
    c, s = tcp_pair()
    u = hand_over(gw, [s.fileno()])
    s.close()
    c.sendall(b"CONNECT notlisted.test:443 HTTP/1.1\r\n\r\n")
    head, _ = read_head(c)
    ok(status_of(head) == 403, "hand-over: a denied CONNECT is answered 403 on the TCP socket", head)
    c.close()
    u.close()

    # Plain clients may send descriptors along: they are closed, the request is served as usual.
    r, w = os.pipe()
    u = connect(gw)
    socket.send_fds(u, [f"CONNECT allowed.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode()], [w, w])
    os.close(w)
    head, _ = read_head(u)
    u.sendall(b"plain")
    good = status_of(head) == 200 and recv_exactly(u, 5) == b"plain"
    ok(good and pipe_released(r), "plain client sending descriptors with its request: served, descriptors closed",
       head)
    u.close()
    os.close(r)

    # Refusals: the AF_UNIX connection is closed without an answer, every descriptor is closed.
    r, w = os.pipe()
    u = hand_over(gw, [w])
    os.close(w)
    ok(closed_soon(u) and pipe_released(r), "hand-over of a pipe: refused, closed")
    u.close()
    os.close(r)

    a, b = socket.socketpair()
    u = hand_over(gw, [a.fileno()])
    a.close()
    ok(closed_soon(u) and closed_soon(b), "hand-over of an AF_UNIX stream socket: refused, closed")
    u.close()
    b.close()

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as d:
        d.connect(("127.0.0.2", ECHO_PORT))
        u = hand_over(gw, [d.fileno()])
    ok(closed_soon(u), "hand-over of a connected UDP socket: refused")
    u.close()

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        u = hand_over(gw, [ls.fileno()])
    ok(closed_soon(u), "hand-over of a listening TCP socket: refused")
    u.close()

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as un:
        u = hand_over(gw, [un.fileno()])
    ok(closed_soon(u), "hand-over of an unconnected TCP socket: refused")
    u.close()

    c, s = tcp_pair()
    r, w = os.pipe()
    u = hand_over(gw, [s.fileno(), w])
    s.close()
    os.close(w)
    ok(closed_soon(u) and closed_soon(c) and pipe_released(r),
       "hand-over of a TCP socket plus a second descriptor: refused, both closed")
    u.close()
    c.close()
    os.close(r)

    r, w = os.pipe()
    u = hand_over(gw, [w] * 12)     # more than the gateway makes room for: the rest is cut off
    os.close(w)
    ok(closed_soon(u) and pipe_released(r), "hand-over of 12 descriptors: refused, all closed")
    u.close()
    os.close(r)

    c, s = tcp_pair()
    u = hand_over(gw, [s.fileno()], data=b"\0GET / HTTP/1.1\r\n\r\n")
    s.close()
    ok(closed_soon(u) and closed_soon(c), "hand-over with bytes after the marker: refused, socket closed")
    u.close()
    c.close()

    u = connect(gw)
    u.sendall(b"\0")
    ok(closed_soon(u), "the marker without a descriptor: refused")
    u.close()

    # The sender keeps a copy of the socket and makes it blocking: the gateway must not stall on it.
    c, s = tcp_pair()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    u = hand_over(gw, [s.fileno()])
    c.sendall(f"CONNECT allowed.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode())
    head, _ = read_head(c)
    s.setblocking(True)             # clears O_NONBLOCK on the file the gateway shares
    c.setblocking(False)
    blob = os.urandom(1 << 16)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:   # never read: the echo backs up into the gateway
        try:
            c.send(blob)
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            break
    t0 = time.monotonic()
    st, _, _ = request(gw, b"CONNECT notlisted.test:443 HTTP/1.1\r\n\r\n")
    elapsed = time.monotonic() - t0
    time.sleep(0.3)
    ok(status_of(head) == 200 and st == 403 and elapsed < 2,
       f"a handed-over socket made blocking by its sender does not stall the gateway ({elapsed:.2f} s)",
       (head, st))
    ok("made its handed-over socket blocking" in gw.log_text(),
       "log: the connection whose socket was made blocking is closed", gw.log_text()[-1500:])
    c.close()
    s.close()
    u.close()

    time.sleep(0.5)
    now = gateway_fds(gw)
    ok(base > 0 and 0 < now <= base,
       f"hand-over: no descriptor left behind in the gateway ({base} before, {now} after)")


CLIENT_HANDOFF_IN_CGROUP = (
    "import socket, sys\n"
    "open(sys.argv[1] + '/cgroup.procs', 'w').write('0')\n"   # move ourselves in
    "ls = socket.socket(); ls.bind(('127.0.0.1', 0)); ls.listen(1)\n"
    "c = socket.create_connection(ls.getsockname(), timeout=15); t, _ = ls.accept()\n"
    "u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "u.connect(sys.argv[2])\n"
    "socket.send_fds(u, [b'\\0'], [t.fileno()])\n"
    "t.close(); u.close()\n"
    "c.sendall(b'CONNECT notlisted.test:444 HTTP/1.1\\r\\n\\r\\n')\n"
    "print(c.recv(4096).split(b'\\r\\n')[0].decode())\n")


CLIENT_IN_CGROUP = (
    "import socket, sys\n"
    "open(sys.argv[1] + '/cgroup.procs', 'w').write('0')\n"   # move ourselves in
    "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "s.settimeout(15)\n"
    "s.connect(sys.argv[2])\n"
    "s.sendall(b'CONNECT notlisted.test:443 HTTP/1.1\\r\\n\\r\\n')\n"
    "data = b''\n"
    "while True:\n"
    "    d = s.recv(4096)\n"
    "    if not d:\n"
    "        break\n"
    "    data += d\n"
    "print(data.split(b'\\r\\n')[0].decode())\n")


def cgroup_base():
    """A hierarchy where we may make a child of our own cgroup: cgroup v2, else v1 name=systemd."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, ctrl, path in lines:
        if ctrl == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return "/sys/fs/cgroup" + path
        if ctrl == "" and os.path.exists("/sys/fs/cgroup/unified/cgroup.controllers"):
            return "/sys/fs/cgroup/unified" + path
    for _, ctrl, path in lines:
        if ctrl == "name=systemd":
            return "/sys/fs/cgroup/systemd" + path
    return None


def test_execution_id(gw):
    """A client inside a sandbox-runner-x-<id>.scope cgroup is logged with that execution id."""
    base = cgroup_base()
    if not ok(base is not None and os.path.isdir(base), "found a cgroup hierarchy for the execution-id test",
              base):
        return
    parent = os.path.join(base, f"sr-egress-test-{os.getpid()}")
    scope = os.path.join(parent, "sandbox-runner-x-egresstest42.scope")
    try:
        os.makedirs(scope)
        p = subprocess.run([sys.executable, "-c", CLIENT_IN_CGROUP, scope, gw.path], capture_output=True,
                           timeout=30)
        out = p.stdout.decode().strip()
        ok(p.returncode == 0 and out.startswith("HTTP/1.1 403"), "client inside an execution scope is answered",
           out + p.stderr.decode())
        time.sleep(0.2)
        log = gw.log_text()
        ok(re.search(r"denied: CONNECT notlisted\.test:443 for execution egresstest42:", log),
           "log: the execution id comes from the client's cgroup (sandbox-runner-x-egresstest42.scope)",
           log[-2000:])
        # Handed over, the TCP socket says nothing about the execution: the AF_UNIX peer does.
        p = subprocess.run([sys.executable, "-c", CLIENT_HANDOFF_IN_CGROUP, scope, gw.path], capture_output=True,
                           timeout=30)
        out = p.stdout.decode().strip()
        time.sleep(0.2)
        log = gw.log_text()
        ok(p.returncode == 0 and out.startswith("HTTP/1.1 403") and
           re.search(r"denied: CONNECT notlisted\.test:444 for execution egresstest42:", log),
           "hand-over: the execution id comes from the cgroup of the AF_UNIX peer", out + p.stderr.decode())
    finally:
        for d in (scope, parent):
            try:
                os.rmdir(d)
            except OSError as e:
                note(f"could not remove {d}: {e}")


def test_logs(gw):
    log = gw.log_text()
    lines = log.splitlines()

    def has(*parts):
        return any(all(p in line for p in parts) for line in lines)

    ok(has("allowed", "CONNECT", "allowed.test:7000", "via 127.0.0.2:7000"),
       "log: allowed CONNECT with host, port and the dialled address", log[-3000:])
    ok(has("denied", "CONNECT", "notlisted.test:443"), "log: denied CONNECT to a name not in the allowlist")
    ok(has("denied", "private.test:7000", "10.0.0.1"), "log: refusal names the private address")
    ok(has("denied", "rebind.test:7000", "192.168.1.1"), "log: refusal names the rebinding address")
    ok(not re.search(r"via (10\.0\.0\.1|192\.168\.1\.1|\[::1\])", log),
       "log: no connection to 10.0.0.1, 192.168.1.1 or ::1 was ever made")
    ok(has("denied", "pinned.test:80"), "log: pinned port refusal")
    ok(has("allowed", "GET", "allowed.test:8080"), "log: forwarded GET")
    ok("topsecretquery" not in log and "topsecretheadervalue" not in log and "c2VjcmV0" not in log,
       "log: no query strings or header values")
    ok("AddressSanitizer" not in log and "runtime error" not in log, "no sanitizer report", log[-3000:])


def test_no_socket(binary, policy):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")}
    p = subprocess.run([binary, "--policy", policy, "--log-target", "console"], env=env,
                       capture_output=True, timeout=30)
    err = p.stderr.decode("utf-8", "replace")
    ok(p.returncode != 0 and "LISTEN_FDS" in err, "without a passed socket the gateway refuses to start, "
       "saying why", f"rc={p.returncode} {err}")


def test_bad_policy(binary, workdir):
    bad = os.path.join(workdir, "bad-policy.json")
    with open(bad, "w") as f:
        f.write("{not json")
    p = subprocess.run([binary, "--policy", bad, "--log-target", "console", "--listen",
                        os.path.join(workdir, "bad.sock")], capture_output=True, timeout=30)
    ok(p.returncode == 78, "an invalid policy file: exit status 78 (EX_CONFIG)",
       f"rc={p.returncode} {p.stderr.decode('utf-8', 'replace')}")
    p = subprocess.run([binary, "--policy", os.path.join(workdir, "missing.json"), "--log-target", "console",
                        "--listen", os.path.join(workdir, "bad.sock")], capture_output=True, timeout=30)
    ok(p.returncode == 78, "a missing policy file: exit status 78 (EX_CONFIG)",
       f"rc={p.returncode} {p.stderr.decode('utf-8', 'replace')}")


def test_idle_exit(binary, workdir, policy):
    gw = Gateway(binary, workdir, "idle", policy, ["--idle-exit-sec", "2"])
    try:
        time.sleep(0.5)
        s, st, head, _ = connect_tunnel(gw, f"allowed.test:{ECHO_PORT}")
        time.sleep(3.5)
        alive = gw.proc.poll() is None
        s.sendall(b"still")
        good = alive and recv_exactly(s, 5) == b"still"
        s.close()
        ok(good, "no idle exit while a connection is open (3.5 s with --idle-exit-sec 2)")
        t0 = time.monotonic()
        try:
            rc = gw.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        elapsed = time.monotonic() - t0
        ok(rc == 0 and elapsed < 6, f"exits (status 0) about 2 s after the last connection closed "
           f"({elapsed:.1f} s)", f"rc={rc}\n{gw.log_text()[-2000:]}")
    finally:
        gw.stop()


UPSTREAM_AUTH = "Basic dXBzdHJlYW06c2VjcmV0"      # upstream:secret


class UpstreamHandler(socketserver.BaseRequestHandler):
    """An upstream proxy: records (request line, Proxy-Authorization); CONNECT to notlisted.test is
    refused with 407, other CONNECTs get 200 plus an early banner and are relayed to the target;
    absolute-form requests are answered with the request line it got."""
    seen = []

    def handle(self):
        s = self.request
        s.settimeout(10)
        try:
            head, rest = read_head(s)
            lines = head.split("\r\n")
            auth = [ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("proxy-authorization:")]
            UpstreamHandler.seen.append((lines[0], auth))
            method, target, _ = lines[0].split(" ", 2)
            if method != "CONNECT":
                body = lines[0].encode()
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                return
            if target.startswith("notlisted.test:"):
                s.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 4\r\n\r\nnope")
                return
            host, port = target.rsplit(":", 1)
            o = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"HTTP/1.1 200 Connection established\r\n\r\nBANNER:" + rest)
            while True:
                d = s.recv(65536)
                if not d:
                    break
                o.sendall(d)
                s.sendall(o.recv(65536))
            o.close()
        except (OSError, ValueError):
            pass


def test_upstream(binary, workdir):
    policy = os.path.join(workdir, "upstream-policy.json")
    with open(policy, "w") as f:
        json.dump({"mode": "open", "mirrors": ["127.0.0.0/8"], "upstream": "http://127.0.0.6:3128",
                   "upstreamAuth": "test-tag", "noProxy": "pinned.test"}, f)
    auth = os.path.join(workdir, "upstream.auth")
    with open(auth, "w") as f:
        f.write(UPSTREAM_AUTH)
    os.chmod(auth, 0o600)
    srv = start_server(("127.0.0.6", 3128), UpstreamHandler)
    gw = Gateway(binary, workdir, "gw-upstream", policy, ["--idle-exit-sec", "0", "--upstream-auth", auth])
    try:
        time.sleep(0.3)
        # Mode open: a name in no allowlist, through the upstream, with its credentials.
        s, st, head, rest = connect_tunnel(gw, f"notlisted.test:{ECHO_PORT}")
        s.close()
        ok(st == 502, "open + upstream: the upstream's 407 to CONNECT becomes 502", head)
        s, st, head, rest = connect_tunnel(gw, f"a.wild.test:{ECHO_PORT}")
        with s:
            banner = recv_exactly(s, len(b"BANNER:"), rest)
            s.sendall(b"ping")
            echoed = recv_exactly(s, 4)
        ok(st == 200 and banner == b"BANNER:" and echoed == b"ping",
           "open + upstream: CONNECT a.wild.test tunnelled through the upstream (its early bytes first)",
           f"{head!r} {banner!r} {echoed!r}")
        ok((f"CONNECT a.wild.test:{ECHO_PORT} HTTP/1.1", [UPSTREAM_AUTH]) in UpstreamHandler.seen,
           "the upstream got CONNECT host:port with Proxy-Authorization from --upstream-auth", UpstreamHandler.seen)
        st, head, body = request(gw, b"GET http://allowed.test/x?y=1 HTTP/1.1\r\nHost: allowed.test\r\n"
                                     b"Proxy-Authorization: Basic Y2xpZW50OnNlY3JldA==\r\n\r\n")
        ok(st == 200 and body == "GET http://allowed.test/x?y=1 HTTP/1.1",
           "open + upstream: a plain request goes upstream in absolute form", f"{head!r} {body!r}")
        ok(("GET http://allowed.test/x?y=1 HTTP/1.1", [UPSTREAM_AUTH]) in UpstreamHandler.seen,
           "... with the upstream's credentials, not the client's", UpstreamHandler.seen)
        n = len(UpstreamHandler.seen)
        st, head, body = request(gw, f"CONNECT private.test:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode())
        ok(st == 403 and len(UpstreamHandler.seen) == n,
           "open + upstream: a refused address (10.0.0.1) is 403 and never sent upstream", f"{head!r}")
        st, head, body = request(gw, f"CONNECT 127.0.0.2:{ECHO_PORT} HTTP/1.1\r\n\r\n".encode())
        ok(st == 400 and len(UpstreamHandler.seen) == n, "open: IP literals still refused (400)", f"{head!r}")
        s, st, head, rest = connect_tunnel(gw, "pinned.test:443")
        with s:
            s.sendall(b"direct")
            echoed = recv_exactly(s, 6, rest)
        ok(st == 200 and echoed == b"direct" and len(UpstreamHandler.seen) == n,
           "noProxy: pinned.test goes direct, not upstream", f"{head!r} {echoed!r}")
        log = gw.log_text()
        ok("via the upstream proxy 127.0.0.6:3128" in log and "dXBzdHJlYW06c2VjcmV0" not in log,
           "the log names the upstream, never its credentials", log[-2000:])
    finally:
        gw.stop()
        srv.shutdown()
        srv.server_close()
    p = subprocess.run([binary, "--policy", policy, "--log-target", "console", "--listen",
                        os.path.join(workdir, "noauth.sock")], capture_output=True, timeout=30)
    ok(p.returncode == 78, "a policy whose upstream takes credentials, without --upstream-auth: exit 78",
       f"rc={p.returncode} {p.stderr.decode('utf-8', 'replace')}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    if os.environ.get(INNER_ENV) != "1":
        enter_namespaces(binary)

    loopback_up()
    with tempfile.TemporaryDirectory(prefix="sr-egress-test.") as workdir:
        hosts = os.path.join(workdir, "hosts")
        with open(hosts, "w") as f:
            f.write(HOSTS)
        subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
        # A resolver of our own: with a search list, to check that it is never applied.
        resolv = os.path.join(workdir, "resolv.conf")
        with open(resolv, "w") as f:
            f.write("nameserver 127.0.0.1\nsearch corp.internal\noptions timeout:30 attempts:1\n")
        subprocess.run(["mount", "--bind", resolv, os.path.realpath("/etc/resolv.conf")], check=True)
        dns = DnsStub()
        policy = os.path.join(workdir, "policy.json")
        with open(policy, "w") as f:
            json.dump(POLICY, f)

        servers = [start_server(("127.0.0.2", ECHO_PORT), EchoHandler),
                   start_server(("127.0.0.3", 443), EchoHandler),
                   start_server(("127.0.0.4", ECHO_PORT), EchoHandler),
                   start_server(("127.0.0.2", 8080), HttpHandler),
                   start_server(("127.0.0.2", 80), HttpHandler)]

        gw = Gateway(binary, workdir, "gw", policy, ["--idle-exit-sec", "0"])
        try:
            # The two 10 s deadlines run alongside everything else.
            slow = [threading.Thread(target=test_head_deadline, args=(gw,)),
                    threading.Thread(target=test_resolve_deadline, args=(gw,))]
            time.sleep(0.3)
            for t in slow:
                t.start()
            test_connect_allowed(gw)
            test_forward(gw)
            test_refusals(gw)
            test_connect_fallback(gw)
            test_big_tunnel(gw)
            test_concurrent(gw)
            test_dns(gw, dns)
            test_execution_id(gw)
            for t in slow:
                t.join(30)
            test_handoff(gw)
            test_logs(gw)
            ok(gw.proc.poll() is None, "the gateway is still running after all of that")
        finally:
            rc = gw.stop()
        ok(rc == 0, "SIGTERM: clean exit (status 0)", f"rc={rc}\n{gw.log_text()[-3000:]}")

        test_no_socket(binary, policy)
        test_bad_policy(binary, workdir)
        test_idle_exit(binary, workdir, policy)
        test_upstream(binary, workdir)

        for s in servers:
            s.shutdown()
            s.server_close()

    print(f"1..{_n}", flush=True)
    note(f"{_n - _failed} passed, {_failed} failed")
    return 1 if _failed else 0


if __name__ == "__main__":
    sys.exit(main())
