#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""End-to-end test of sandbox egress: daemon, sandbox, bridge and gateway together.

    egress-e2e.py --daemon BUILD/src/sandbox-runnerd [--verbose] [--keep-tmp] [--run-as USER]

The daemon finds sandbox-runner-egress and sandbox-runner-bridge next to itself in the build tree
(src/egress/, src/bridge/); started by hand it listens on $RUNTIME_DIRECTORY/egress/<rev>.sock and
starts the gateway as its child on the first connection.

The test runs itself again inside new mount and network namespaces (`unshare --mount --net`): the
only network there is a loopback of its own, so every test host lives on 127.0.0.0/8 (or is
unreachable, 10.0.0.1) and nothing can leave the machine. A private /etc/hosts (bind mount) maps

    allowed.test, a.wild.test, wild.test, notlisted.test  -> 127.0.0.2
    pinned.test                                            -> 127.0.0.3
    other.test                                             -> 127.0.0.4
    private.test                                           -> 10.0.0.1

and a private /etc/resolv.conf names a DNS stub of the test on 127.0.0.1:53 that answers every A
query (with 127.0.0.9) and records the names asked: a sandbox that could reach it would resolve.
Test servers: HTTP (answers with the request line and Host header it got, as JSON) on port 80 of
127.0.0.2/.3/.4, TCP echo on 127.0.0.2:7000 and 127.0.0.3:443.

The daemon runs with [Execution] AllowUnscoped=yes and [Network] Mode=allowlist,
Allow=allowed.test *.wild.test pinned.test:443 other.test, Mirrors=127.0.0.0/8 (the mirror exempts
the loopback test hosts from the address policy; 10/8 is not a mirror). Every case runs python3
inside a sandbox: HTTP through HTTP_PROXY (urllib), CONNECT by hand and with http.client's
set_tunnel, name resolution, raw sockets, direct connects; then the policy API: rotation while a
managed run keeps its epoch, an invalid PUT, and mode none.

Output is TAP. Needs root (exit 77 otherwise, the only skip; CI runs as root). As root the daemon
runs as the user 'sandbox-runner' if it exists, else nobody (it is rootless by design).
"""

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.dont_write_bytecode = True     # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import HttpError, Result, now, trunc                      # noqa: E402

INNER_ENV = "SR_EGRESS_E2E_INNER"
BUDGET = 150.0          # seconds for all cases; the watchdog kills the daemon after it
RUN_TIMEOUT = 40.0      # read timeout of one /execute

HOSTS = """\
127.0.0.1 localhost
::1 localhost
127.0.0.2 allowed.test
127.0.0.2 a.wild.test
127.0.0.2 wild.test
127.0.0.2 notlisted.test
127.0.0.3 pinned.test
127.0.0.4 other.test
10.0.0.1 private.test
"""

ALLOW_A = ["allowed.test", "*.wild.test", "pinned.test:443", "other.test"]
MIRRORS = ["127.0.0.0/8"]
ECHO_PORT = 7000
DNS_ANSWER = "127.0.0.9"        # nothing listens there

CONFIG_TEXT = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=30
MaxTimeoutSec=600
[Network]
Mode=allowlist
Allow=%s
Mirrors=%s
""" % (" ".join(ALLOW_A), " ".join(MIRRORS))

# ------------------------------------------------------------------------------------------------
# The client that runs inside the sandbox (python3 from the host's /usr). It reads a list of
# operations as JSON on stdin and prints one JSON document with a result per operation.

CLIENT = r'''
import errno, hashlib, http.client, json, os, socket, sys, time, urllib.error, urllib.request

PROXY = ("127.0.0.1", 18118)

def err(e):
    return {"error": "%s: %s" % (type(e).__name__, e), "errno": getattr(e, "errno", None),
            "errname": errno.errorcode.get(getattr(e, "errno", None) or 0)}

def op_http(o):
    req = urllib.request.Request(o["url"], headers=o.get("headers", {}))
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return {"status": r.status, "body": r.read().decode("utf-8", "replace")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode("utf-8", "replace")}
    except Exception as e:
        return err(e)

def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest

def op_connect(o):
    try:
        s = socket.create_connection(PROXY, timeout=20)
        a = o["authority"]
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a, a)).encode())
        head, rest = read_head(s)
        line = head.split("\r\n")[0]
        status = int(line.split(" ")[1]) if line.startswith("HTTP/") else None
        res = {"status": status, "statusLine": line}
        if status != 200:
            body = rest
            while True:
                d = s.recv(65536)
                if not d:
                    break
                body += d
            res["body"] = body.decode("utf-8", "replace")
            s.close()
            return res
        n = o.get("bytes", 0)
        payload = os.urandom(n)
        got = bytearray(rest)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got += d
        s.close()
        res.update(sent=n, received=len(got), sha256Sent=hashlib.sha256(payload).hexdigest(),
                   sha256Received=hashlib.sha256(bytes(got)).hexdigest())
        return res
    except Exception as e:
        return err(e)

def op_tunnel_http(o):
    # http.client over CONNECT (set_tunnel): the origin-form request goes through the tunnel.
    try:
        c = http.client.HTTPConnection(*PROXY, timeout=20)
        c.set_tunnel(o["host"], o["port"])
        c.request("GET", o["path"])
        r = c.getresponse()
        res = {"status": r.status, "body": r.read().decode("utf-8", "replace")}
        c.close()
        return res
    except Exception as e:
        return err(e)

def op_resolve(o):
    try:
        return {"addresses": sorted({a[4][0] for a in socket.getaddrinfo(o["name"], 80)})}
    except Exception as e:
        return err(e)

def op_socket(o):
    try:
        s = socket.socket(o["family"], o["type"], o.get("proto", 0))
        s.close()
        return {"created": True}
    except Exception as e:
        return err(e)

def op_tcp(o):
    try:
        s = socket.create_connection((o["host"], o["port"]), timeout=3)
        s.close()
        return {"connected": True}
    except Exception as e:
        return err(e)

def op_info(o):
    names = [k for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy")
             if k in os.environ]
    try:
        with open("/proc/net/dev") as f:
            ifaces = sorted(l.split(":")[0].strip() for l in f.read().splitlines()[2:] if ":" in l)
    except OSError as e:
        ifaces = err(e)
    return {"proxyEnv": {k: os.environ[k] for k in names}, "interfaces": ifaces,
            "gatewaySocket": os.path.exists("/run/sandbox-egress.sock"),
            "bridge": os.path.exists("/.sandbox/bridge") or os.path.isdir("/.sandbox")}

def op_sleep(o):
    time.sleep(o["seconds"])
    return {}

OPS = {"http": op_http, "connect": op_connect, "tunnel_http": op_tunnel_http, "resolve": op_resolve,
       "socket": op_socket, "tcp": op_tcp, "info": op_info, "sleep": op_sleep}
out = []
for o in json.loads(sys.stdin.read()):
    out.append(OPS[o["op"]](o))
print(json.dumps(out))
'''

# ------------------------------------------------------------------------------------------------
# Namespaces, test hosts


class DnsStub:
    """DNS on 127.0.0.1:53 of our namespace: answers every A query with DNS_ANSWER (and AAAA with
    nothing), records the names asked."""

    def __init__(self):
        self.names = []
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        threading.Thread(target=self.serve, daemon=True).start()

    def asked(self):
        with self.lock:
            return list(self.names)

    def serve(self):
        while True:
            try:
                d, addr = self.sock.recvfrom(4096)
            except OSError:
                return
            if len(d) < 17:
                continue
            i, labels = 12, []
            while i < len(d) and d[i]:
                labels.append(d[i + 1:i + 1 + d[i]].decode("ascii", "replace"))
                i += 1 + d[i]
            qtype = struct.unpack("!H", d[i + 1:i + 3])[0] if i + 3 <= len(d) else 0
            with self.lock:
                self.names.append(".".join(labels).lower())
            question = d[12:i + 5]
            if qtype == 1:
                answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(DNS_ANSWER)
                self.sock.sendto(d[:2] + b"\x81\x80" + d[4:6] + b"\x00\x01\x00\x00\x00\x00" + question + answer,
                                 addr)
            else:
                self.sock.sendto(d[:2] + b"\x81\x80" + d[4:6] + b"\x00\x00\x00\x00\x00\x00" + question, addr)


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        try:
            while True:
                data = s.recv(1 << 20)
                if not data:
                    break
                s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class HttpHandler(socketserver.BaseRequestHandler):
    """An HTTP/1.1 origin that answers with the request line and Host header it got (JSON) and
    records them (seen: list of dicts, with the server address)."""
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
            head = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")
            lines = head.split("\r\n")
            hosts = [ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("host:")]
            rec = {"server": "%s:%d" % self.server.server_address[:2], "requestLine": lines[0],
                   "host": hosts[0] if len(hosts) == 1 else hosts,
                   "headers": [ln.split(":", 1)[0].strip().lower() for ln in lines[1:]]}
            with HttpHandler.lock:
                HttpHandler.seen.append(rec)
            answer = json.dumps(rec).encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(answer), answer))
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    @classmethod
    def find(cls, marker):
        with cls.lock:
            return [r for r in cls.seen if marker in r["requestLine"]]


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 512    # the default 5 drops SYNs under sequential connects (1 s retransmits)


def start_server(addr, handler):
    srv = Server(addr, handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def setup_test_hosts(workdir):
    """In our private namespaces: lo up, /etc/hosts and /etc/resolv.conf, DNS stub, servers.
    Return (dns stub, [servers])."""
    T.check_private_netns()
    T.loopback_up()
    hosts = os.path.join(workdir, "hosts")
    with open(hosts, "w") as f:
        f.write(HOSTS)
    os.chmod(hosts, 0o644)
    subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
    resolv = os.path.join(workdir, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:2 attempts:1\n")
    os.chmod(resolv, 0o644)
    subprocess.run(["mount", "--bind", resolv, os.path.realpath("/etc/resolv.conf")], check=True)
    dns = DnsStub()
    servers = [start_server(("127.0.0.2", 80), HttpHandler),
               start_server(("127.0.0.3", 80), HttpHandler),
               start_server(("127.0.0.4", 80), HttpHandler),
               start_server(("127.0.0.2", ECHO_PORT), EchoHandler),
               start_server(("127.0.0.3", 443), EchoHandler)]
    return dns, servers


# ------------------------------------------------------------------------------------------------
# Context


class Ctx:
    def __init__(self, daemon, budget, dns):
        self.d = daemon
        self.budget = budget
        self.dns = dns
        self.seq = 0
        self.lock = threading.Lock()
        self.tag = secrets.token_hex(4)
        self.shared = {}

    def new_id(self, prefix="e2e"):
        with self.lock:
            self.seq += 1
            return "%s-%d-%s" % (prefix, self.seq, self.tag)

    def marker(self, what):
        return "/e2e-%s-%s-%s" % (what, self.tag, secrets.token_hex(3))

    def bearer(self):
        return ("Authorization", "Bearer " + self.d.token)

    def request(self, method, path, body=None, signed=False, timeout=10.0):
        raw = b"" if body is None else json.dumps(body).encode()
        h = [self.bearer()]
        if body is not None:
            h.append(("Content-Type", "application/json"))
        if signed:
            ts = int(time.time())
            h += [("X-Sandbox-Timestamp", str(ts)),
                  ("X-Sandbox-Signature", L.signature(self.d.key, ts, method, path, raw))]
        return L.http(self.d.port, method, path, h, raw, timeout=self.budget.bound(timeout))

    def health(self):
        return L.http(self.d.port, "GET", "/health", timeout=self.budget.bound(5.0))

    def policy(self):
        return self.request("GET", "/api/network-policy")

    def run_ops(self, res, ops, workspace="e2e", timeout=RUN_TIMEOUT, exec_id=None):
        """One /execute of the client with these operations. Return (answer JSON, [results]) or
        (answer or None, None) after noting a failure."""
        body = {"executionId": exec_id or self.new_id(), "workspaceId": workspace, "language": "python",
                "code": CLIENT, "stdin": json.dumps(ops), "timeoutMs": int(timeout * 1000) - 5000}
        try:
            r = self.request("POST", "/execute", body, signed=True, timeout=timeout)
        except (OSError, HttpError) as e:
            res.fail("POST /execute: no answer: %s: %s" % (type(e).__name__, e))
            return None, None
        j = r.json()
        if r.status != 200 or not isinstance(j, dict):
            res.fail("POST /execute: expected 200 with the answer, got " + r.brief())
            return None, None
        return j, parse_results(res, j, len(ops))


def parse_results(res, j, n):
    res.note("run %s: status=%s exitCode=%s network=%s durationMs=%s" % (
        j.get("executionId"), j.get("status"), j.get("exitCode"), j.get("network"), j.get("durationMs")))
    if j.get("status") != "exited" or j.get("exitCode") != 0:
        res.fail("the client did not exit 0: status=%s exitCode=%s stderr=%s error=%s" % (
            j.get("status"), j.get("exitCode"), trunc(j.get("stderr"), 1500), j.get("error")))
        return None
    try:
        out = json.loads(j.get("stdout") or "")
    except ValueError:
        res.fail("client output is not JSON: %s" % trunc(j.get("stdout"), 800))
        return None
    if not isinstance(out, list) or len(out) != n:
        res.fail("client output has %s results, expected %d" % (len(out) if isinstance(out, list) else "no", n))
        return None
    for i, o in enumerate(out):
        res.note("  op %d: %s" % (i, trunc(json.dumps(o), 600)))
    if j.get("stderr"):
        res.note("  stderr: %s" % trunc(j.get("stderr"), 600))
    return out


def refused(res, what, o, statuses, reason_words=()):
    """o is the result of an http/connect op that must have been refused by the gateway."""
    if o.get("status") not in statuses:
        return res.fail("%s: expected HTTP %s from the gateway, got %s" % (
            what, "/".join(map(str, statuses)), trunc(json.dumps(o), 400)))
    body = o.get("body") or ""
    ok = res.check("sandbox-runner egress gateway" in body, "%s: the refusal does not come from the gateway: %r" %
                   (what, trunc(body, 300)))
    for w in reason_words:
        ok &= res.check(w in body, "%s: the reason does not mention %r: %r" % (what, w, trunc(body, 300)))
    return ok


# ------------------------------------------------------------------------------------------------
# Cases

CASES, case = T.case_registry()


@case("/health: sandboxNetwork mode allowlist, the current revision, available true")
def t_health(ctx, res):
    h = ctx.health().json() or {}
    net = h.get("sandboxNetwork")
    res.note("sandboxNetwork: %s" % json.dumps(net))
    if not res.check(isinstance(net, dict), "no sandboxNetwork object in /health: %s" % trunc(json.dumps(h), 500)):
        return
    res.eq("sandboxNetwork.mode", net.get("mode"), "allowlist")
    res.eq("sandboxNetwork.available", net.get("available"), True)
    rev = net.get("revision")
    res.check(isinstance(rev, str) and len(rev) == 16 and all(c in "0123456789abcdef" for c in rev),
              "revision %r is not 16 lower-case hex digits" % rev)
    p = ctx.policy().json() or {}
    res.eq("revision in /health vs GET /api/network-policy", rev, p.get("revision"))
    ctx.shared["revA"] = rev
    res.check("reason" not in net, "a reason is given although available: %r" % net.get("reason"))


@case("GET /api/network-policy: the canonical policy of the configuration, with its revision")
def t_policy_get(ctx, res):
    r = ctx.policy()
    p = r.json() or {}
    res.note("GET: " + r.brief(600))
    res.eq("HTTP status", r.status, 200)
    res.eq("mode", p.get("mode"), "allowlist")
    res.eq("allow (canonical, sorted)", p.get("allow"), sorted(ALLOW_A))
    res.eq("mirrors", p.get("mirrors"), MIRRORS)
    res.eq("revision", p.get("revision"), ctx.shared.get("revA"))
    r2 = L.http(ctx.d.port, "GET", "/api/network-policy", timeout=5.0)
    res.eq("GET without a bearer token", r2.status, 401)


@case("sandbox shape: proxy variables set, only lo, the gateway socket bound in, answer names the revision")
def t_shape(ctx, res):
    j, out = ctx.run_ops(res, [{"op": "info"}])
    if not out:
        return
    info = out[0]
    env = info["proxyEnv"]
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        res.eq(k, env.get(k), "http://127.0.0.1:18118")
    res.eq("network interfaces", info["interfaces"], ["lo"])
    res.eq("/run/sandbox-egress.sock exists", info["gatewaySocket"], True)
    res.eq("answer.network", j.get("network"), ctx.shared.get("revA"))


@case("HTTP to an allowed name: 200; upstream sees the origin-form request and Host from the URI")
def t_http_allowed(ctx, res):
    m = ctx.marker("http")
    # A mismatched Host header from the client: the gateway must use the URI's authority.
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://allowed.test%s?q=1&r=two" % m,
                                "headers": {"Host": "169.254.169.254", "X-Test": "kept"}}])
    if not out:
        return
    o = out[0]
    if not res.eq("status", o.get("status"), 200):
        return
    seen = HttpHandler.find(m)
    res.note("upstream saw: %s" % json.dumps(seen))
    if not res.eq("requests seen upstream", len(seen), 1):
        return
    s = seen[0]
    res.eq("upstream server", s["server"], "127.0.0.2:80")
    res.eq("request line upstream (origin form)", s["requestLine"], "GET %s?q=1&r=two HTTP/1.1" % m)
    res.eq("Host upstream", s["host"], "allowed.test")
    res.check("x-test" in s["headers"], "an end-to-end header was dropped: %s" % s["headers"])
    res.check("proxy-connection" not in s["headers"], "a hop-by-hop header was forwarded: %s" % s["headers"])
    try:
        echoed = json.loads(o["body"])
    except (ValueError, KeyError):
        echoed = None
    res.check(echoed == s, "the sandbox got a different answer than the upstream sent: %r" % trunc(o.get("body"), 300))


@case("HTTP to a.wild.test (wildcard entry): 200 with Host a.wild.test; the apex wild.test: 403")
def t_http_wildcard(ctx, res):
    m1, m2 = ctx.marker("wild"), ctx.marker("apex")
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://a.wild.test%s" % m1},
                               {"op": "http", "url": "http://wild.test%s" % m2}])
    if not out:
        return
    if res.eq("a.wild.test status", out[0].get("status"), 200):
        seen = HttpHandler.find(m1)
        res.check(len(seen) == 1 and seen[0]["host"] == "a.wild.test" and seen[0]["requestLine"] == "GET %s HTTP/1.1" % m1,
                  "upstream saw %s" % seen)
    refused(res, "wild.test (apex)", out[1], (403,), ("not in the allowlist",))
    res.eq("requests for the apex seen upstream", HttpHandler.find(m2), [])


@case("CONNECT to an allowed name tunnels bytes (1 MiB echo), and http.client set_tunnel works")
def t_connect(ctx, res):
    m = ctx.marker("tunnel")
    j, out = ctx.run_ops(res, [{"op": "connect", "authority": "allowed.test:%d" % ECHO_PORT, "bytes": 1 << 20},
                               {"op": "connect", "authority": "pinned.test:443", "bytes": 4096},
                               {"op": "tunnel_http", "host": "allowed.test", "port": 80, "path": m}])
    if not out:
        return
    for what, o, n in (("allowed.test:%d" % ECHO_PORT, out[0], 1 << 20), ("pinned.test:443", out[1], 4096)):
        if not res.eq("CONNECT %s status" % what, o.get("status"), 200):
            continue
        res.check(o.get("received") == n and o.get("sha256Received") == o.get("sha256Sent"),
                  "CONNECT %s: sent %s bytes, got %s back, digests %s" % (
                      what, o.get("sent"), o.get("received"),
                      "match" if o.get("sha256Received") == o.get("sha256Sent") else "differ"))
    if res.eq("set_tunnel GET status", out[2].get("status"), 200):
        seen = HttpHandler.find(m)
        res.check(len(seen) == 1 and seen[0]["requestLine"] == "GET %s HTTP/1.1" % m and seen[0]["host"] == "allowed.test",
                  "upstream saw %s" % seen)


@case("a name not in the allowlist: 403 with the reason (HTTP and CONNECT), nothing reaches upstream")
def t_not_listed(ctx, res):
    m = ctx.marker("notlisted")
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://notlisted.test%s" % m},
                               {"op": "connect", "authority": "notlisted.test:%d" % ECHO_PORT}])
    if not out:
        return
    refused(res, "HTTP notlisted.test", out[0], (403,), ("notlisted.test:80", "not in the allowlist"))
    refused(res, "CONNECT notlisted.test", out[1], (403,), ("not in the allowlist",))
    res.eq("requests seen upstream", HttpHandler.find(m), [])


@case("IP literals are refused as targets (http://127.0.0.2/, CONNECT 127.0.0.2:7000, 2130706434)")
def t_ip_literal(ctx, res):
    m = ctx.marker("ip")
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://127.0.0.2%s" % m},
                               {"op": "connect", "authority": "127.0.0.2:%d" % ECHO_PORT},
                               {"op": "http", "url": "http://2130706434%s" % m}])
    if not out:
        return
    refused(res, "http://127.0.0.2/", out[0], (400, 403))
    refused(res, "CONNECT 127.0.0.2", out[1], (400, 403))
    refused(res, "http://2130706434/", out[2], (400, 403))
    res.eq("requests seen upstream", HttpHandler.find(m), [])


@case("pinned.test:80 (entry pinned.test:443): 403 port not allowed")
def t_pinned(ctx, res):
    m = ctx.marker("pinned")
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://pinned.test%s" % m},
                               {"op": "connect", "authority": "pinned.test:80"}])
    if not out:
        return
    refused(res, "http://pinned.test/", out[0], (403,), ("port not allowed",))
    refused(res, "CONNECT pinned.test:80", out[1], (403,), ("port not allowed",))
    res.eq("requests seen upstream", HttpHandler.find(m), [])


@case("DNS from inside the sandbox fails (no resolver reachable; the test's DNS stub gets no query)")
def t_dns(ctx, res):
    probe = "probe-%s.test" % secrets.token_hex(6)
    j, out = ctx.run_ops(res, [{"op": "resolve", "name": "allowed.test"}, {"op": "resolve", "name": probe},
                               {"op": "resolve", "name": "example.org"}])
    if not out:
        return
    for name, o in zip(("allowed.test", probe, "example.org"), out):
        res.check("error" in o and "addresses" not in o, "getaddrinfo(%r) in the sandbox resolved: %s" % (name, o))
    asked = ctx.dns.asked()
    res.check(probe not in asked, "the test's DNS stub was asked for %s from the sandbox" % probe)
    # Sanity: the stub does answer in the test's own namespace.
    try:
        addrs = sorted({a[4][0] for a in socket.getaddrinfo(probe + "x", 80, socket.AF_INET)})
    except OSError as e:
        addrs = str(e)
    res.note("outside the sandbox getaddrinfo(%sx) = %s" % (probe, addrs))
    res.check(addrs == [DNS_ANSWER], "the DNS stub does not answer outside the sandbox either (test set-up)")


@case("raw, packet and ICMP sockets fail (EPERM/EAFNOSUPPORT; EPROTONOSUPPORT for non-IP/TCP/UDP protocols)")
def t_raw(ctx, res):
    ops = [{"op": "socket", "family": socket.AF_PACKET, "type": socket.SOCK_RAW, "proto": 0x0300},
           {"op": "socket", "family": socket.AF_PACKET, "type": socket.SOCK_DGRAM, "proto": 0x0300},
           {"op": "socket", "family": socket.AF_INET, "type": socket.SOCK_RAW, "proto": socket.IPPROTO_ICMP},
           {"op": "socket", "family": socket.AF_INET6, "type": socket.SOCK_RAW, "proto": socket.IPPROTO_ICMPV6},
           {"op": "socket", "family": socket.AF_INET, "type": socket.SOCK_RAW, "proto": socket.IPPROTO_RAW},
           {"op": "socket", "family": socket.AF_INET, "type": socket.SOCK_RAW, "proto": 0},
           {"op": "socket", "family": socket.AF_INET, "type": socket.SOCK_DGRAM, "proto": socket.IPPROTO_ICMP}]
    j, out = ctx.run_ops(res, ops)
    if not out:
        return
    # The network profile refuses SOCK_RAW with EPERM and protocols other than IP/TCP/UDP with
    # EPROTONOSUPPORT; for SOCK_RAW + IPPROTO_ICMP either rule may answer first.
    for o, r in zip(ops, out):
        res.check(r.get("errname") in ("EPERM", "EAFNOSUPPORT", "EPROTONOSUPPORT"),
                  "socket(%d, %d, %d): expected EPERM, EAFNOSUPPORT or EPROTONOSUPPORT, got %s" % (
                      o["family"], o["type"], o["proto"], r))
    res.eq("socket(AF_PACKET, SOCK_RAW) errno", out[0].get("errname"), "EAFNOSUPPORT")
    res.eq("socket(AF_INET, SOCK_RAW, 0) errno", out[5].get("errname"), "EPERM")


@case("direct TCP from inside fails: test hosts and the daemon's API are not reachable (own netns)")
def t_direct(ctx, res):
    m = ctx.marker("direct")
    j, out = ctx.run_ops(res, [{"op": "tcp", "host": "127.0.0.2", "port": 80},
                               {"op": "tcp", "host": "127.0.0.2", "port": ECHO_PORT},
                               {"op": "tcp", "host": "127.0.0.1", "port": ctx.d.port},
                               {"op": "tcp", "host": "10.0.0.1", "port": 80},
                               {"op": "http", "url": "http://localhost%s" % m}])   # NO_PROXY: direct
    if not out:
        return
    for what, o in zip(("127.0.0.2:80", "127.0.0.2:%d" % ECHO_PORT, "127.0.0.1:%d (daemon API)" % ctx.d.port,
                        "10.0.0.1:80"), out):
        res.check(o.get("connected") is not True and "error" in o, "direct connect to %s succeeded" % what)
    res.check(out[4].get("status") is None and "error" in out[4], "http://localhost/ (bypassing the proxy) answered: %s"
              % out[4])
    res.eq("requests seen upstream", HttpHandler.find(m), [])


@case("the gateway logs each decision with its reason")
def t_logs(ctx, res):
    time.sleep(0.3)
    log = ctx.d.log_text()
    want = ["Egress allowed: GET allowed.test:80 via 127.0.0.2:80",
            "Egress allowed: CONNECT allowed.test:%d via 127.0.0.2:%d" % (ECHO_PORT, ECHO_PORT),
            "Egress denied: GET notlisted.test:80",
            "not in the allowlist",
            "Egress denied: GET pinned.test:80",
            "port not allowed by pinned.test:443"]
    for w in want:
        res.check(w in log, "not in the daemon's log (where the gateway child writes): %r" % w)
    lines = [ln for ln in log.splitlines() if ln.startswith("Egress ")]
    res.note("%d decision lines; e.g.:" % len(lines))
    for ln in lines[:4]:
        res.note("  " + ln)


@case("policy rotation: a managed run keeps its epoch (other.test gets through), a new run is refused")
def t_rotation(ctx, res):
    revA = ctx.shared.get("revA")
    m_old, m_new = ctx.marker("old-epoch"), ctx.marker("new-epoch")
    mid = ctx.new_id("managed")
    ops = [{"op": "http", "url": "http://other.test%s" % m_old}]
    body = {"executionId": mid, "workspaceId": "e2e-managed",
            "command": 'sleep 2; exec python3 -c "$EGRESS_CLIENT"',
            "env": {"EGRESS_CLIENT": CLIENT}, "stdin": json.dumps(ops), "timeoutMs": 30000}
    r = ctx.request("POST", "/shell-executions", body, signed=True)
    if not res.check(r.status == 202, "POST /shell-executions: " + r.brief()):
        return
    t_started = now()
    st = ctx.request("GET", "/shell-executions/" + mid).json() or {}
    res.note("managed run while running: state=%s network=%s" % (st.get("state"), st.get("network")))
    res.eq("managed run while running: network", st.get("network"), revA)
    # Policy B: A without other.test (written differently: the revision is of the content).
    policy_b = {"mode": "allowlist", "allow": ["ALLOWED.test.", "*.wild.test", "pinned.test:443"],
                "mirrors": MIRRORS}
    r = ctx.request("PUT", "/api/network-policy", policy_b)
    res.note("PUT B: " + r.brief(400))
    pb = r.json() or {}
    if not res.check(r.status == 200, "PUT /api/network-policy: " + r.brief()):
        return
    revB = pb.get("revision")
    ctx.shared["revB"] = revB
    res.check(isinstance(revB, str) and revB != revA, "revision did not change: A %s, B %s" % (revA, revB))
    res.eq("PUT answer allow (canonical)", pb.get("allow"), sorted(["allowed.test", "*.wild.test", "pinned.test:443"]))
    net = (ctx.health().json() or {}).get("sandboxNetwork", {})
    res.eq("/health revision after the PUT", net.get("revision"), revB)
    res.eq("/health mode after the PUT", net.get("mode"), "allowlist")
    res.eq("GET revision after the PUT", (ctx.policy().json() or {}).get("revision"), revB)
    res.check(now() - t_started < 1.8, "the PUT came %.1f s after the managed run started: not a rotation under a "
              "running execution" % (now() - t_started))

    # A new run under B (another workspace: the managed run holds the lease of its own).
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://other.test%s" % m_new},
                               {"op": "http", "url": "http://allowed.test%s" % m_new}], workspace="e2e-new")
    if out:
        refused(res, "new run: other.test under B", out[0], (403,), ("not in the allowlist",))
        res.eq("new run: allowed.test under B", out[1].get("status"), 200)
        res.eq("new run: answer.network", j.get("network"), revB)
    res.check(not [s for s in HttpHandler.find(m_new) if s["host"] == "other.test"],
              "other.test was reached by the run under B")

    # The managed run, under A.
    deadline = now() + 25
    st = {}
    while now() < deadline:
        st = ctx.request("GET", "/shell-executions/" + mid).json() or {}
        if st.get("state") not in (None, "running"):
            break
        time.sleep(0.2)
    res.note("managed run: state=%s status=%s network=%s" % (st.get("state"), st.get("status"), st.get("network")))
    res.eq("managed run, finished: answer.network", st.get("network"), revA)
    out = parse_results(res, st, 1) if st.get("state") not in (None, "running") else None
    if not out:
        res.fail("the managed run did not finish with the client's output: %s" % trunc(json.dumps(st), 800))
        return
    res.eq("managed run (epoch A): other.test status", out[0].get("status"), 200)
    seen = HttpHandler.find(m_old)
    res.check(len(seen) == 1 and seen[0]["host"] == "other.test" and seen[0]["server"] == "127.0.0.4:80",
              "upstream saw %s" % seen)
    ctx.shared["rotated"] = True


@case("after its last run, the old epoch is gone: socket and policy snapshot removed, gateway A stopped")
def t_old_epoch_gone(ctx, res):
    revA, revB = ctx.shared.get("revA"), ctx.shared.get("revB")
    if not ctx.shared.get("rotated"):
        res.fail("the rotation case did not complete")
        return
    egress = os.path.join(ctx.d.run, "egress")
    deadline = now() + 5
    while now() < deadline:
        left = sorted(os.listdir(egress))
        if not [n for n in left if n.startswith(revA)]:
            break
        time.sleep(0.1)
    res.note("%s: %s" % (egress, left))
    res.check(not [n for n in left if n.startswith(revA)], "files of revision A left: %s" % left)
    inst = (ctx.health().json() or {}).get("sandboxNetwork", {}).get("instance") or ""
    res.check(re.fullmatch(revB + "-[0-9a-f]{8}", inst) is not None,
              "/health instance %r is not <revision B>-<8 hex digits of the build>" % inst)
    res.check(left == sorted([inst + ".json", inst + ".sock"]),
              "expected only the socket and snapshot of instance %s: %s" % (inst, left))
    gws = [p for p in L.descendants(ctx.d.pid)
           if (L.cmdline(p) or [b""])[0].endswith(b"sandbox-runner-egress")]
    policies = [next((a for a in (L.cmdline(p) or [])[1:] if a.endswith(b".json")), b"?") for p in gws]
    res.note("gateway children: %s" % [L.describe_pid(p) for p in gws])
    res.check(not [p for p in policies if revA.encode() in p], "the gateway of revision A still runs")


@case("private.test (10.0.0.1), listed in a policy: refused by the address check (10/8 is not a mirror)")
def t_private_listed(ctx, res):
    revB = ctx.shared.get("revB")
    policy_c = {"mode": "allowlist", "allow": ["allowed.test", "private.test"], "mirrors": MIRRORS}
    r = ctx.request("PUT", "/api/network-policy", policy_c)
    if not res.check(r.status == 200, "PUT: " + r.brief()):
        return
    m = ctx.marker("private")
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://private.test%s" % m},
                               {"op": "connect", "authority": "private.test:443"},
                               {"op": "http", "url": "http://allowed.test%s" % m}], workspace="e2e-new")
    if out:
        refused(res, "HTTP private.test", out[0], (403,), ("10.0.0.1", "refused"))
        refused(res, "CONNECT private.test", out[1], (403,), ("10.0.0.1",))
        res.eq("allowed.test under the same policy", out[2].get("status"), 200)
    log = ctx.d.log_text()
    res.check("Egress denied: GET private.test:80" in log, "no denied entry for private.test in the log")
    res.check("via 10.0.0.1" not in log, "the gateway reports dialling 10.0.0.1")
    # Back to B.
    r = ctx.request("PUT", "/api/network-policy", {"mode": "allowlist", "allow": ["allowed.test", "*.wild.test",
                                                                                  "pinned.test:443"],
                                                   "mirrors": MIRRORS})
    res.check(r.status == 200 and (r.json() or {}).get("revision") == revB,
              "PUT B again: expected 200 with revision %s (same content, same revision), got %s" % (revB, r.brief()))


@case("an invalid PUT (IP literal entry) is 400 invalid_request with a message; the policy stays")
def t_invalid_put(ctx, res):
    before = (ctx.policy().json() or {}).get("revision")
    for bad, word in (({"mode": "allowlist", "allow": ["allowed.test", "127.0.0.2"], "mirrors": MIRRORS}, "127.0.0.2"),
                      ({"mode": "allowlist", "allow": ["[::1]"]}, "::1"),
                      ({"mode": "allowlist", "allow": ["allowed.test"], "mirror": MIRRORS}, "mirror"),
                      ({"mode": "sometimes"}, "mode")):
        r = ctx.request("PUT", "/api/network-policy", bad)
        j = r.json() or {}
        res.note("PUT %s -> %s" % (json.dumps(bad), r.brief(300)))
        res.check(r.status == 400 and j.get("error") == "invalid_request",
                  "PUT %s: expected 400 invalid_request, got %d %s" % (json.dumps(bad), r.status, j.get("error")))
        res.check(isinstance(j.get("message"), str) and word in j.get("message", ""),
                  "PUT %s: the message does not name %r: %r" % (json.dumps(bad), word, j.get("message")))
    res.eq("revision after the invalid PUTs", (ctx.policy().json() or {}).get("revision"), before)
    res.eq("/health revision after the invalid PUTs",
           (ctx.health().json() or {}).get("sandboxNetwork", {}).get("revision"), before)


@case("mode none (PUT): /health says so; a run has no proxy variables, no gateway socket, no IP sockets")
def t_mode_none(ctx, res):
    r = ctx.request("PUT", "/api/network-policy", {"mode": "none"})
    res.note("PUT none: " + r.brief(300))
    if not res.check(r.status == 200 and (r.json() or {}).get("mode") == "none", "PUT mode none: " + r.brief()):
        return
    net = (ctx.health().json() or {}).get("sandboxNetwork", {})
    res.note("sandboxNetwork: %s" % json.dumps(net))
    res.eq("/health sandboxNetwork.mode", net.get("mode"), "none")
    res.check("revision" not in net, "/health has a revision in mode none: %s" % net)
    m = ctx.marker("none")
    j, out = ctx.run_ops(res, [{"op": "info"},
                               {"op": "socket", "family": socket.AF_INET, "type": socket.SOCK_STREAM},
                               {"op": "socket", "family": socket.AF_INET6, "type": socket.SOCK_STREAM},
                               {"op": "socket", "family": socket.AF_INET, "type": socket.SOCK_DGRAM},
                               {"op": "http", "url": "http://allowed.test%s" % m}], workspace="e2e-new")
    if not out:
        return
    info = out[0]
    res.eq("proxy variables", info["proxyEnv"], {})
    res.eq("/run/sandbox-egress.sock exists", info["gatewaySocket"], False)
    res.check(info["interfaces"] == ["lo"] or isinstance(info["interfaces"], dict),
              "interfaces: %s" % info["interfaces"])
    for what, o in zip(("AF_INET stream", "AF_INET6 stream", "AF_INET dgram"), out[1:4]):
        res.check(o.get("errname") in ("EAFNOSUPPORT", "EPERM"), "socket(%s): %s" % (what, o))
    res.check("error" in out[4], "an HTTP fetch worked in mode none: %s" % out[4])
    res.eq("answer.network", j.get("network"), "none")
    res.eq("requests seen upstream", HttpHandler.find(m), [])


FINAL = "SIGTERM"


@case(FINAL + ": the daemon exits 0 and leaves no gateway, bridge or sandbox process behind")
def t_sigterm(ctx, res):
    # Bring a gateway up first (mode none now: back to an allowlist, one run through it).
    r = ctx.request("PUT", "/api/network-policy", {"mode": "allowlist", "allow": ["allowed.test"], "mirrors": MIRRORS})
    res.check(r.status == 200, "PUT: " + r.brief())
    j, out = ctx.run_ops(res, [{"op": "http", "url": "http://allowed.test%s" % ctx.marker("last")}], workspace="e2e-new")
    if out:
        res.eq("status", out[0].get("status"), 200)
    table = L.proc_table()
    mine = L.descendants(ctx.d.pid, table)
    known = {p: table[p][3] for p in mine}
    res.note("daemon's descendants before SIGTERM: %s" % [L.describe_pid(p, table) for p in mine])
    res.check([p for p in mine if (L.cmdline(p) or [b""])[0].endswith(b"sandbox-runner-egress")],
              "no gateway child was running")
    rc, secs = ctx.d.terminate()
    res.note("exit status %s after %.1fs" % (rc, secs))
    res.eq("exit status", rc, 0)
    time.sleep(0.2)
    left = [p for p, start in known.items()
            if (L.proc_stat(p) or (0, "Z", 0, None))[1] != "Z" and (L.proc_stat(p) or (0, 0, 0, None))[3] == start]
    res.check(not left, "still running after the daemon exited: %s" % [L.describe_pid(p) for p in left])
    egress = os.path.join(ctx.d.run, "egress")
    res.note("%s after exit: %s" % (egress, sorted(os.listdir(egress)) if os.path.isdir(egress) else "absent"))


# ------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true", help="print the diagnostics of passing cases too")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    args = ap.parse_args()
    if os.environ.get(INNER_ENV) != "1":
        argv = ["--daemon", os.path.abspath(args.daemon), "--run-as", args.run_as]
        argv += ["--verbose"] if args.verbose else []
        argv += ["--keep-tmp"] if args.keep_tmp else []
        T.enter_namespaces(argv, INNER_ENV)

    out = sys.stdout
    tap = L.Tap(out)
    out.write("1..%d\n" % len(CASES))
    out.flush()
    t0 = now()
    workdir = tempfile.mkdtemp(prefix="sr-egress-e2e.")
    d = None
    try:
        dns, servers = setup_test_hosts(workdir)
        run_as = T.resolve_run_as(args.run_as)
        d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as, config=CONFIG_TEXT)
        out.write("# daemon runs as uid %s\n" % T.run_as_uid(run_as))
        if L.start_or_fail_all(d, CASES, tap, Result, 700) is None:
            return 1
        budget = L.Budget(BUDGET)
        ctx = Ctx(d, budget, dns)

        def watchdog():
            if not budget.expired.wait(max(0.0, budget.left())):
                budget.expired.set()
                out.write("# time budget of %.0fs exhausted: killing the daemon (pid %d)\n" % (BUDGET, d.pid))
                out.flush()
                d.kill()
        threading.Thread(target=watchdog, daemon=True).start()

        for name, fn in CASES:
            res = Result(name)
            tc = now()
            if budget.expired.is_set():
                res.fail("not run: the time budget is exhausted")
            elif not d.alive():
                res.fail("the daemon is not running (exit status %r)" % d.proc.poll())
            else:
                try:
                    fn(ctx, res)
                except Exception:                              # noqa: BLE001
                    res.fail("test error:\n" + traceback.format_exc())
                if not name.startswith(FINAL) and not d.alive():
                    res.fail("the daemon died (exit status %r)" % d.proc.poll())
            res.note("(%.2fs)" % (now() - tc))
            tap.emit(res, verbose=args.verbose)
        budget.expired.set()
        if tap.failed:
            out.write("# daemon log tail:\n")
            for ln in d.log_tail(4000).splitlines():
                out.write("#   %s\n" % ln)
        if d.alive():
            rc, secs = d.terminate()
            out.write("# daemon stopped: status %s after %.1fs\n" % (rc, secs))
        for s in servers:
            s.shutdown()
            s.server_close()
    finally:
        if d is not None:
            d.cleanup()
            if args.keep_tmp:
                out.write("# kept %s\n" % d.tmp)
        shutil.rmtree(workdir, ignore_errors=True)
    return tap.summary(len(CASES), now() - t0)


if __name__ == "__main__":
    sys.exit(main())
