#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the ScienceDiscovery dialect's per-request network policy (docs/api.md
15.3, notes §12): permissionEpoch.networkPolicy / .networkAccess mapped onto a gateway instance
of that allowlist's own, while the policy in force on our own API stays "none".

    /usr/bin/python3 tests/integration/sciencediscovery-network.py --daemon BUILD/src/sandbox-runnerd
                                                                   [--run-as self] [--verbose] [--keep-tmp]

Like egress-e2e.py, the test runs itself again inside new mount and network namespaces
(`unshare --mount --net`): the only network there is a loopback of its own, and its test origins
are egress-e2e.py's (setup_test_hosts(): a private /etc/hosts maps allowed.test to 127.0.0.2 and
other.test to 127.0.0.4, HTTP origins on port 80 that record the request lines they got, a DNS
stub that records the names asked).  Nothing can leave the machine.

The daemon (two listeners: our own API and --listen sciencediscovery=...) runs with [Network]
Mode=none and Mirrors=127.0.0.0/8: a run whose networkAccess says allowPrivateNetwork may reach
those loopback origins through its gateway; without it the gateway refuses their addresses.

An upstream HTTP proxy of the test's own (UpstreamProxy, on 127.0.0.1) serves the runs whose
sandboxEgressProxy names it: it records every CONNECT and absolute-form request it served and
the Proxy-Authorization it got, then relays to the origin.

Checks: /health's sandboxNetwork; a run with an allowlist reaches an allowed origin (and only
it: another name is refused by the gateway, a direct connect has no route) and reports
networkPolicy, networkAccessRevision and the proxy variables; the next run with "none" reaches
nothing; a mode that is not the policy's is no network; mode open reaches an origin in no
allowlist and is still refused a loopback address without allowPrivateNetwork; sandboxEgressProxy
url sends the gateway's CONNECT (and plain forwards) through the upstream proxy, with its
credentials only there, while direct with the same list does not; [Network] OpenMode=no (a
daemon of its own, with HTTPS_PROXY and no_proxy in its environment) refuses open and drops it
from /health, and its sandboxEgressProxy environment goes through that proxy but for no_proxy; allowPrivateNetwork false is refused by
the address policy; bad policies are 400; a managed shell run with an allowlist; our own API's
runs keep the policy in force (none).  Prints TAP, exits 1 on any failure.  Needs root (exit 77
otherwise).  Bounded: < 100 s.
"""

import base64
import importlib.util
import json
import os
import select
import socket
import sys
import threading
import time
import uuid

sys.dont_write_bytecode = True     # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import execute_lib as L                                                    # noqa: E402
import sd_lib as S                                                      # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import trunc                                 # noqa: E402

_spec = importlib.util.spec_from_file_location("egress_e2e", os.path.join(HERE, "egress-e2e.py"))
E = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E)

INNER_ENV = "SR_SD_NETWORK_INNER"
BUDGET = 140.0
RUN_TIMEOUT = 30.0
CONFIG = L.CONFIG_TEXT.replace("MaxOutputBytes=4K", "MaxOutputBytes=64K") + """\
[Network]
Mode=none
Mirrors=127.0.0.0/8
"""

CASES, case = T.case_registry()

client, access, epoch_with = S.net_client, S.net_access, S.epoch_with


def run(ctx, res, urls, policy, net_access, what):
    """One /execute of the client; return (answer, client output) or (None, None) after a failure."""
    b, r = ctx.execute(client(urls), permissionEpoch=epoch_with(ctx, policy, net_access))
    if not res.check(r.status == 200, "%s: expected 200, got %s" % (what, r.brief())):
        return None, None
    j = r.json()
    if not res.check(j.get("exitCode") == 0, "%s: exit %s, stderr %s" % (what, j.get("exitCode"),
                                                                     trunc(j.get("stderr"), 800))):
        return j, None
    try:
        return j, json.loads(j.get("stdout") or "")
    except ValueError:
        res.fail("%s: stdout is not JSON: %s" % (what, trunc(j.get("stdout"))))
        return j, None


TUNNEL_CLIENT = r'''
import http.client, json, os, urllib.parse
p = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY") or "http://127.0.0.1:9")
out = {"env": "\n".join("%s=%s" % kv for kv in sorted(os.environ.items())), "fetch": {}}
for host, path in TARGETS:
    try:
        c = http.client.HTTPConnection(p.hostname, p.port, timeout=10)
        c.set_tunnel(host, 80)
        c.request("GET", path)
        r = c.getresponse()
        out["fetch"][host + path] = {"status": r.status, "body": r.read().decode()}
    except Exception as e:
        out["fetch"][host + path] = {"error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps(out))
'''


def tunnel_client(targets):
    """Code that GETs each (host, path) of @targets on port 80 through a CONNECT tunnel of its proxy."""
    return "TARGETS = %r\n%s" % (targets, TUNNEL_CLIENT)


class UpstreamProxy:
    """An upstream HTTP proxy on 127.0.0.1 (an ephemeral port): CONNECT host:port tunnels and
    absolute-form GETs, each recorded in .served as {"method", "target", "auth"} before it is
    relayed to the origin (resolved by the namespace's /etc/hosts)."""

    def __init__(self):
        self.served = []
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, userinfo=""):
        return "http://%s127.0.0.1:%d" % (userinfo + "@" if userinfo else "", self.port)

    def find(self, text):
        with self.lock:
            return [x for x in self.served if text in x["target"]]

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _relay(a, b):
        socks = [a, b]
        while socks:
            r, _, _ = select.select(socks, [], [], 15)
            if not r:
                return
            for s in r:
                d = s.recv(65536)
                other = b if s is a else a
                if not d:
                    socks.remove(s)
                    try:
                        other.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                else:
                    other.sendall(d)

    def _serve(self, c):
        c.settimeout(15)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = [ln.split(":", 1) for ln in lines[1:]]
            auth = [v.strip() for k, v in headers if k.strip().lower() == "proxy-authorization"]
            with self.lock:
                self.served.append({"method": method, "target": target, "auth": auth[0] if auth else None})
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                o = socket.create_connection((host, int(port)), timeout=10)
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    o.sendall(rest)
            else:
                u = target[len("http://"):]
                hostport, path = (u.split("/", 1) + [""])[:2]
                host, _, port = hostport.partition(":")
                o = socket.create_connection((host, int(port or 80)), timeout=10)
                keep = ["%s:%s" % (k, v) for k, v in headers
                        if k.strip().lower() not in ("proxy-authorization", "proxy-connection")]
                o.sendall(("%s /%s HTTP/1.1\r\n%s\r\n\r\n" % (method, path, "\r\n".join(keep))).encode("latin-1")
                          + rest)
            self._relay(c, o)
            o.close()
        except (OSError, ValueError):
            pass
        finally:
            c.close()

    def close(self):
        self.sock.close()


def marker(what):
    return "/sdnet-%s-%s" % (what, uuid.uuid4().hex[:8])


def seen(m):
    return [x for x in E.HttpHandler.find(m)]


@case("1 sd network health: sandboxNetwork available, modes none, domain-allowlist and open")
def c_health(ctx, res):
    r = ctx.sd("GET", "/health", auth=False)
    if res.check(r.status == 200, r.brief()):
        res.eq("sandboxNetwork", r.json().get("sandboxNetwork"),
               {"available": True, "modes": ["none", "domain-allowlist", "open"]})
        res.eq("networkPolicy (the default)", r.json().get("networkPolicy"), "none")


@case("2 sd network: an allowlist run reaches the allowed origin, only it, through its own gateway")
def c_allowlist(ctx, res):
    ok, other = marker("ok"), marker("other")
    urls = ["http://allowed.test" + ok, "http://other.test" + other]
    j, out = run(ctx, res, urls, "domain-allowlist", access(), "allowlist run")
    if out is None:
        return
    res.eq("allowed.test status", out["fetch"][urls[0]].get("status"), 200)
    res.check(len(seen(ok)) == 1, "the allowed origin did not see the request once: %s" % seen(ok))
    res.eq("other.test (not listed): the gateway's answer", out["fetch"][urls[1]].get("status"), 403)
    res.eq("other.test never reached", seen(other), [])
    res.check(out["direct"] != "connected", "a direct connect to 127.0.0.2:80 worked")
    res.eq("proxy in the sandbox", out["proxy"], "http://127.0.0.1:18118")
    res.eq("networkPolicy", j.get("networkPolicy"), "domain-allowlist")
    res.eq("networkAccessRevision", j.get("networkAccessRevision"), "rev-net-1")
    env = j.get("environmentVariables") or {}
    res.eq("environmentVariables.HTTP_PROXY", env.get("HTTP_PROXY"), "http://127.0.0.1:18118")
    res.eq("environmentVariables.NO_PROXY", env.get("NO_PROXY"), "localhost,127.0.0.1,::1")
    res.check("allowed.test" not in ctx.dns.asked(), "the DNS stub was asked: %s" % ctx.dns.asked())


@case("2 sd network: the next run with none reaches nothing (no proxy, no route)")
def c_none_after(ctx, res):
    m = marker("none")
    urls = ["http://allowed.test" + m]
    j, out = run(ctx, res, urls, "domain-allowlist", access(), "allowlist run")
    if out is not None:
        res.eq("the allowlist run before it", out["fetch"][urls[0]].get("status"), 200)
    m2 = marker("none2")
    urls = ["http://allowed.test" + m2]
    j, out = run(ctx, res, urls, "none", access(mode="none", domains=(), revision="none"), "none run")
    if out is None:
        return
    res.check("error" in out["fetch"][urls[0]], "the none run fetched: %s" % out["fetch"][urls[0]])
    res.eq("origin never reached", seen(m2), [])
    res.check(out["direct"] != "connected", "a direct connect worked")
    res.eq("no proxy", out["proxy"], None)
    res.eq("networkPolicy", j.get("networkPolicy"), "none")
    res.eq("networkAccessRevision", j.get("networkAccessRevision"), "none")
    res.check("HTTP_PROXY" not in (j.get("environmentVariables") or {}), "proxy variable reported")


@case("2 sd network: networkAccess whose mode is not the policy's is no network (their rule)")
def c_mismatch(ctx, res):
    m = marker("mismatch")
    urls = ["http://allowed.test" + m]
    j, out = run(ctx, res, urls, "none", access(), "mismatch run")
    if out is None:
        return
    res.check("error" in out["fetch"][urls[0]], "fetched: %s" % out["fetch"][urls[0]])
    res.eq("origin never reached", seen(m), [])
    res.eq("networkPolicy", j.get("networkPolicy"), "none")


@case("2 sd network: allowPrivateNetwork false: the gateway refuses the origin's loopback address")
def c_private(ctx, res):
    m = marker("private")
    urls = ["http://allowed.test" + m]
    j, out = run(ctx, res, urls, "domain-allowlist", access(private=False, revision="rev-net-2"), "run")
    if out is None:
        return
    res.eq("status from the gateway", out["fetch"][urls[0]].get("status"), 403)
    res.eq("origin never reached", seen(m), [])
    res.eq("networkAccessRevision", j.get("networkAccessRevision"), "rev-net-2")


@case("2 sd network: bad policies and proxy URLs are 400 in their shape")
def c_bad(ctx, res):
    bad_urls = ("https://127.0.0.1:3128", "socks5://127.0.0.1:1080", "http://127.0.0.1", "http://127.0.0.1:0",
                "http://127.0.0.1:3128/path", "http://127.0.0.1:3128?q=1", "ftp://127.0.0.1:21", "127.0.0.1:3128",
                "http://:hunter2@127.0.0.1:3128", "http://pro_xy:3128", "http://2130706433:3128", "")
    rows = [("proxy url %r" % u, "domain-allowlist", access(),
             {"sandboxEgressProxy": {"mode": "url", "url": u}}, "proxy URL") for u in bad_urls]
    rows += [("proxy url missing", "domain-allowlist", access(), {"sandboxEgressProxy": {"mode": "url"}},
              "sandboxEgressProxy.url"),
             ("proxy url not a string", "none", None, {"sandboxEgressProxy": {"mode": "url", "url": 7}},
              "sandboxEgressProxy.url")]
    for what, policy, a, extra, text in rows + [
            ("IP literal entry", "domain-allowlist", access(domains=("127.0.0.2",)), {}, "allowedDomains"),
            ("wildcard too broad", "domain-allowlist", access(domains=("*.test",)), {}, "allowedDomains"),
            ("allowedDomains not an array", "domain-allowlist", access(allowedDomains="allowed.test"), {},
             "allowedDomains"),
            ("allowPrivateNetwork not a bool", "domain-allowlist", access(allowPrivateNetwork="yes"), {},
             "allowPrivateNetwork"),
            ("unknown policy", "everything", None, {}, "networkPolicy"),
            ("proxy mode", "none", None, {"sandboxEgressProxy": {"mode": "socks"}}, "sandboxEgressProxy")]:
        b = ctx.execute_body("print(1)", permissionEpoch=epoch_with(ctx, policy, a), **extra)
        r = ctx.sd("POST", "/execute", b, signed=True)
        if res.check(r.status == 400, "%s: expected 400, got %s" % (what, r.brief())):
            err = (r.json() or {}).get("error", "")
            res.check(text in err and len(r.json()) == 1, "%s: error %r lacks %r" % (what, err, text))
            res.check("hunter2" not in err, "%s: the error quotes the credentials: %r" % (what, err))
    res.check("hunter2" not in ctx.d.log_text(), "the daemon's log holds the proxy credentials")
    # direct (and environment) proxy modes are what our gateway does: accepted.
    b = ctx.execute_body("print(1)", permissionEpoch=epoch_with(ctx, "domain-allowlist", access()),
                         sandboxEgressProxy={"mode": "direct"})
    r = ctx.sd("POST", "/execute", b, signed=True, timeout=RUN_TIMEOUT)
    res.check(r.status == 200, "sandboxEgressProxy direct: %s" % r.brief())


@case("2 sd network: open reaches an origin in no allowlist, through the gateway")
def c_open(ctx, res):
    m = marker("open")
    urls = ["http://other.test" + m]
    j, out = run(ctx, res, urls, "open", access(mode="open", domains=(), revision="rev-open-1"), "open run")
    if out is None:
        return
    res.eq("other.test status", out["fetch"][urls[0]].get("status"), 200)
    res.check(len(seen(m)) == 1, "the origin did not see the request once: %s" % seen(m))
    res.check(out["direct"] != "connected", "a direct connect to 127.0.0.2:80 worked")
    res.eq("proxy in the sandbox", out["proxy"], "http://127.0.0.1:18118")
    res.eq("networkPolicy", j.get("networkPolicy"), "open")
    res.eq("networkAccessRevision", j.get("networkAccessRevision"), "rev-open-1")


@case("2 sd network: open without allowPrivateNetwork is still refused loopback and private addresses")
def c_open_private(ctx, res):
    m = marker("open-private")
    urls = ["http://other.test" + m, "http://allowed.test" + m]
    j, out = run(ctx, res, urls, "open", access(mode="open", domains=(), private=False, revision="rev-open-2"),
                 "open run")
    if out is None:
        return
    for u in urls:
        res.eq("%s: the gateway's answer" % u, out["fetch"][u].get("status"), 403)
    res.eq("origins never reached", seen(m), [])
    res.eq("networkPolicy", j.get("networkPolicy"), "open")


@case("2 sd network: sandboxEgressProxy url: the gateway goes through the upstream proxy, direct does not")
def c_upstream(ctx, res):
    up = ctx.upstream
    m1, m2, m3 = marker("via-tunnel"), marker("via-forward"), marker("direct")
    auth = "Basic " + base64.b64encode(b"runner:hunter2").decode()
    proxy = {"mode": "url", "url": up.url("runner:hunter2")}
    code = tunnel_client([("allowed.test", m1)]) + "\n" + client(["http://allowed.test" + m2])
    b, r = ctx.execute(code, permissionEpoch=epoch_with(ctx, "domain-allowlist", access(revision="rev-up")),
                       sandboxEgressProxy=proxy)
    if res.check(r.status == 200 and r.json().get("exitCode") == 0, "url run: %s" % r.brief()):
        outs = [json.loads(x) for x in (r.json().get("stdout") or "").splitlines() if x.startswith("{")]
        if res.check(len(outs) == 2, "stdout: %s" % trunc(r.json().get("stdout"))):
            t, f = outs[0]["fetch"]["allowed.test" + m1], outs[1]["fetch"]["http://allowed.test" + m2]
            res.eq("tunnel status", t.get("status"), 200)
            res.check(m1 in (t.get("body") or ""), "tunnel: not the origin's body: %s" % t)
            res.eq("forward status", f.get("status"), 200)
            res.check(m2 in (f.get("body") or ""), "forward: not the origin's body: %s" % f)
            res.check("hunter2" not in outs[0]["env"] and str(up.port) not in outs[0]["env"],
                      "the upstream is visible in the sandbox's environment")
        res.eq("upstream CONNECTs", [(x["method"], x["target"]) for x in up.find("allowed.test:80")][-1:],
               [("CONNECT", "allowed.test:80")])
        res.eq("upstream forwards", [(x["method"], x["target"]) for x in up.find(m2)],
               [("GET", "http://allowed.test" + m2)])
        res.eq("credentials sent upstream", sorted({x["auth"] for x in up.find(m2) + up.find("allowed.test:80")}),
               [auth])
        res.check(len(seen(m1)) == 1 and len(seen(m2)) == 1, "origin saw %s / %s" % (seen(m1), seen(m2)))
        res.check(all("proxy-authorization" not in x["headers"] for x in seen(m1) + seen(m2)),
                  "the origin got the proxy's credentials")
    # The same allowlist, direct: the origin is reached, the upstream is not.
    before = len(up.served)
    j, out = run(ctx, res, ["http://allowed.test" + m3], "domain-allowlist", access(revision="rev-up"), "direct run")
    if out is not None:
        res.eq("direct status", out["fetch"]["http://allowed.test" + m3].get("status"), 200)
        res.eq("upstream not used by direct", up.served[before:], [])
    # Not allowed by the list: refused before anything goes upstream.
    before = len(up.served)
    b, r = ctx.execute(tunnel_client([("other.test", marker("via-refused"))]),
                       permissionEpoch=epoch_with(ctx, "domain-allowlist", access(revision="rev-up")),
                       sandboxEgressProxy=proxy)
    if res.check(r.status == 200, "refused run: %s" % r.brief()):
        res.check("403" in (r.json().get("stdout") or ""), "other.test not refused: %s" % trunc(r.json().get("stdout")))
        res.eq("nothing sent upstream for a refused target", up.served[before:], [])


def shell_fetch(ctx, res, url, epoch):
    """A managed shell run of their API fetching @url under @epoch: (its result, the fetch's
    report), or (None, None) once a failure is recorded."""
    code = "python3 - <<'EOF'\n%sEOF\n" % client([url])
    body = ctx.execute_body(code, permissionEpoch=epoch)
    body.pop("language")
    body["executionId"] = "shell:" + uuid.uuid4().hex
    r = ctx.sd("POST", "/shell-executions", body, signed=True)
    if not res.check(r.status == 202, "submit: %s" % r.brief()):
        return None, None
    j = S.shell_wait(ctx, res, body, limit=RUN_TIMEOUT)
    if j is None:
        return None, None
    res.eq("state", j.get("state"), "completed")
    result = j.get("result") or {}
    try:
        return result, json.loads(result.get("stdout") or "")["fetch"][url]
    except (ValueError, KeyError):
        res.fail("stdout is not the fetch's JSON: %s" % trunc(result.get("stdout")))
        return None, None


@case("3 sd network: a managed shell run with an allowlist reaches the origin")
def c_shell(ctx, res):
    m = marker("shell")
    result, fetched = shell_fetch(ctx, res, "http://allowed.test" + m,
                                  epoch_with(ctx, "domain-allowlist", access(revision="rev-sh")))
    if result is None:
        return
    res.eq("status", fetched.get("status"), 200)
    res.check(len(seen(m)) == 1, "origin saw %s" % seen(m))
    res.eq("result.networkPolicy", result.get("networkPolicy"), "domain-allowlist")


@case("3 sd network: a managed shell run with open reaches an origin in no allowlist, result.networkPolicy open")
def c_shell_open(ctx, res):
    m = marker("shell-open")
    result, fetched = shell_fetch(ctx, res, "http://other.test" + m,
                                  epoch_with(ctx, "open", access(mode="open", domains=(), revision="rev-sh-open")))
    if result is None:
        return
    res.eq("status", fetched.get("status"), 200)
    res.eq("result.networkPolicy (from the record's networkMode)", result.get("networkPolicy"), "open")


@case("4 sd network: our own API's runs keep the policy in force (none) meanwhile")
def c_native(ctx, res):
    m = marker("native")
    body = {"executionId": "native-" + uuid.uuid4().hex[:12], "workspaceId": "native-net", "language": "python",
            "code": client(["http://allowed.test" + m]), "timeoutMs": 20000}
    raw = json.dumps(body).encode()
    ts = int(time.time())
    h = [("Authorization", "Bearer " + ctx.d.token), ("Content-Type", "application/json"),
         ("X-Sandbox-Timestamp", str(ts)), ("X-Sandbox-Signature", L.signature(ctx.d.key, ts, "POST", "/execute", raw))]
    r = L.http(ctx.d.port, "POST", "/execute", h, raw, timeout=RUN_TIMEOUT)
    if not res.check(r.status == 200, "our /execute: %s" % r.brief()):
        return
    j = r.json()
    res.eq("network", j.get("network"), "none")
    out = json.loads(j.get("stdout") or "{}")
    res.check("error" in out.get("fetch", {}).get("http://allowed.test" + m, {}), "fetched: %s" % out)
    res.eq("origin never reached", seen(m), [])


class EnvSdDaemon(S.SdDaemon):
    """A daemon whose own environment names an upstream proxy (for sandboxEgressProxy environment)."""

    def __init__(self, *a, proxy_env=None, **kw):
        super().__init__(*a, **kw)
        self.proxy_env = proxy_env or {}

    def env(self):
        e = super().env()
        e.update(self.proxy_env)
        return e


@case("5 sd network: [Network] OpenMode=no refuses open (400) and /health does not list it; "
      "sandboxEgressProxy environment uses the daemon's https_proxy and no_proxy")
def c_open_off(ctx, res):
    up = ctx.upstream
    d2 = EnvSdDaemon(ctx.d_args[0], keep_tmp=False, run_as=ctx.d_args[1], config=CONFIG + "OpenMode=no\n",
                     proxy_env={"HTTPS_PROXY": up.url("envuser:envpw"), "no_proxy": "other.test"})
    try:
        d2.start()
        c2 = S.Ctx(d2, ctx.verbose)
        r = c2.sd("GET", "/health", auth=False)
        if res.check(r.status == 200, r.brief()):
            res.eq("modes", (r.json().get("sandboxNetwork") or {}).get("modes"), ["none", "domain-allowlist"])
        b = c2.execute_body("print(1)", permissionEpoch=epoch_with(c2, "open", access(mode="open", domains=())))
        r = c2.sd("POST", "/execute", b, signed=True)
        if res.check(r.status == 400, "open run: expected 400, got %s" % r.brief()):
            res.check("OpenMode" in (r.json() or {}).get("error", ""), "error: %s" % r.brief())
        j, out = run(c2, res, ["http://allowed.test" + marker("off")], "domain-allowlist", access(), "allowlist run")
        res.check(out is not None, "an allowlist run failed with open turned off")
        # environment: allowed.test through the daemon's HTTPS_PROXY, other.test (no_proxy) direct.
        m1, m2 = marker("env-via"), marker("env-direct")
        before = len(up.served)
        b, r = c2.execute(client(["http://allowed.test" + m1, "http://other.test" + m2]),
                          permissionEpoch=epoch_with(c2, "domain-allowlist",
                                                     access(domains=("allowed.test", "other.test"))),
                          sandboxEgressProxy={"mode": "environment"})
        if res.check(r.status == 200 and r.json().get("exitCode") == 0, "environment run: %s" % r.brief()):
            out = json.loads(r.json().get("stdout") or "{}")
            res.eq("allowed.test status", out["fetch"]["http://allowed.test" + m1].get("status"), 200)
            res.eq("other.test status", out["fetch"]["http://other.test" + m2].get("status"), 200)
            res.eq("upstream served", [(x["method"], x["target"], x["auth"]) for x in up.served[before:]],
                   [("GET", "http://allowed.test" + m1, "Basic " + base64.b64encode(b"envuser:envpw").decode())])
            res.check(len(seen(m2)) == 1, "other.test (no_proxy) not reached directly: %s" % seen(m2))
    finally:
        d2.terminate()
        d2.cleanup()



def prepare(st):
    st.dns, servers = E.setup_test_hosts(st.workdir)
    st.cleanups.append(lambda: [(s.shutdown(), s.server_close()) for s in servers])


def make_ctx(st):
    ctx = S.Ctx(st.d, st.args.verbose)
    ctx.dns = st.dns
    ctx.upstream = UpstreamProxy()
    ctx.d_args = (os.path.abspath(st.args.daemon), st.run_as)
    return ctx


def main():
    return S.test_main(__doc__, CASES, BUDGET, make_ctx, config=CONFIG, prepare=prepare, inner_env=INNER_ENV)


if __name__ == "__main__":
    sys.exit(main())
