#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Online provisioning of environments through the egress gateway (issue 12, DESIGN.md §14):
a real daemon, real provisioning sandboxes, pip against a PEP 503 index over HTTPS that this
test serves itself on the loopback of a private network namespace. Nothing leaves the machine.

    environments-online.py --daemon BUILD/src/sandbox-runnerd [--run-as self|auto|USER]
                           [--verbose] [--keep-tmp]

Like egress-e2e.py the test runs itself again inside new mount and network namespaces
(`unshare --mount --net`): the only interface is a loopback of its own, brought up here, so the
test hosts live on 127.0.0.0/8. A private /etc/hosts (bind mount) maps

    pypi.test.example   -> 127.0.0.2   (the configured index: IndexURL=)
    other.test.example  -> 127.0.0.3   (a second index, named only by one request)

and a private /etc/resolv.conf names 127.0.0.1:53, where nothing listens. The test makes a CA
and one server certificate per host with the openssl CLI; both hosts serve HTTPS on port 443
(python's http.server and ssl, in threads): /simple/ and /simple/<normalized name>/ with links
../../files/<wheel>#sha256=<hex>, the wheels under /files/, and /probe (200). Each records every
request path. The wheels: srtest_alpha 1.0 and 2.0 (2.0 requires srtest_beta), srtest_beta 1.0
(tests/helpers/make-wheelhouse.py) and srtest_probe 1.0, made here: its .pth file runs a probe
in the first interpreter of the new prefix (the provisioner's, in the provisioning sandbox) that
writes /opt/science-env/probe-report.json: HTTPS to both hosts through the proxy of its
environment (urllib), CONNECT by hand to the in-sandbox bridge, direct TCP connects to
127.0.0.2:443 and 127.0.0.3:443.

The daemon (started as the test's user: root in CI, it becomes the service user) runs with
[Environments] Bootstrap= (none), Offline=no, IndexURL=https://pypi.test.example/simple,
Mirrors=127.0.0.0/8 (the gateway's refusal of loopback addresses lifted for the provisioning
gateway only), IndexCA=<the test CA> (handed to pip as --cert), SetupTimeoutSec=120. Cases:

  - the test index itself: both certificates verify against the CA, the pages are served;
  - a setup from the configured index: srtest_alpha>=2 resolves to alpha 2.0 and beta 1.0, the
    revision record has source index:https://pypi.test.example/... and the files' SHA-256, a run
    imports them, the index saw the normalized project pages and the downloads, the other host
    nothing;
  - the provisioning sandbox reaches the index's host and nothing else: the probe's HTTPS to
    other.test.example through the proxy fails (the gateway refuses the name), CONNECT to it is
    refused, direct connects fail; other.test.example saw no request;
  - an explicit indexUrl (other.test.example) takes precedence over IndexURL=: the setup builds
    from other.test.example, whose allowlist is that host only (the probe reaches it, not
    pypi.test.example); pypi.test.example sees no request during that setup;
  - offline per request: {"offline": true} with an indexUrl (or a preset) is 400
    source_offline_unsupported, nothing created; {"offline": true} alone builds without any
    network (no wheelhouse here: it fails) and neither host sees a request;
  - the daemon restarted on the same state without Mirrors=: the gateway refuses the index's
    loopback address, the update fails with a message, revision 1 stays live and runs use it.

Output is TAP. Needs root (exit 77 otherwise, the only skip; CI runs as root).
"""

import argparse
import hashlib
import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import traceback
import urllib.request

sys.dont_write_bytecode = True     # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import testlib as T                                                        # noqa: E402
from environments_lib import EnvClient, probe_wheel_files, py              # noqa: E402
from execute_lib import now, trunc                                         # noqa: E402
from testlib import Result                                                 # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INNER_ENV = "SR_ENVIRONMENTS_ONLINE_INNER"
BUDGET = 270.0          # seconds for all cases (meson's timeout is 300); the watchdog kills the daemon
SETUP_WAIT = 150.0      # one setup: a venv, pip through the gateway (SetupTimeoutSec=120)

INDEX_HOST, INDEX_ADDR = "pypi.test.example", "127.0.0.2"
OTHER_HOST, OTHER_ADDR = "other.test.example", "127.0.0.3"
INDEX_URL = "https://%s/simple" % INDEX_HOST
OTHER_URL = "https://%s/simple" % OTHER_HOST

HOSTS = """\
127.0.0.1 localhost
::1 localhost
%s %s
%s %s
""" % (INDEX_ADDR, INDEX_HOST, OTHER_ADDR, OTHER_HOST)

spec = importlib.util.spec_from_file_location("make_wheelhouse",
                                              os.path.join(HERE, "..", "helpers", "make-wheelhouse.py"))
WH = importlib.util.module_from_spec(spec)
spec.loader.exec_module(WH)

# ------------------------------------------------------------------------------------------------
# The probe: srtest_probe's __init__.py, run by zz_srtest_probe.pth in every interpreter of its
# prefix; it acts only where the prefix is writable (the provisioning sandbox), once.

PROBE = r'''
"""srtest_probe: what a package's code can reach while its environment is provisioned online."""
import json, os, socket, ssl, urllib.request

BRIDGE = ("127.0.0.1", 18118)
HOSTS = %(hosts)s
DIRECT = %(direct)s


def _err(e):
    return "%%s: %%s" %% (type(e).__name__, e)


def _via_proxy(host):
    # urllib with the proxy of the environment (HTTPS_PROXY): CONNECT, then TLS. The test CA is
    # not known here and does not matter: whether the gateway lets the tunnel through does.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
    try:
        with opener.open("https://%%s/probe" %% host, timeout=20) as r:
            return "ok %%d" %% r.status
    except Exception as e:                                  # noqa: BLE001
        return _err(e)


def _connect(host):
    # CONNECT by hand to the bridge: the status line the gateway answers with.
    try:
        s = socket.create_connection(BRIDGE, timeout=20)
        s.sendall(("CONNECT %%s:443 HTTP/1.1\r\nHost: %%s:443\r\n\r\n" %% (host, host)).encode())
        buf = b""
        while b"\r\n" not in buf:
            d = s.recv(4096)
            if not d:
                break
            buf += d
        s.close()
        return buf.split(b"\r\n")[0].decode("latin-1") or "closed without an answer"
    except Exception as e:                                  # noqa: BLE001
        return _err(e)


def _direct(addr):
    try:
        socket.create_connection(tuple(addr), timeout=3).close()
        return "ok"
    except Exception as e:                                  # noqa: BLE001
        return _err(e)


def probe():
    prefix = "/opt/science-env"
    report = os.path.join(prefix, "probe-report.json")
    if not os.access(prefix, os.W_OK) or os.path.exists(report):
        return                       # a run (read-only prefix), or done already
    r = {"uid": os.getuid(),
         "env": {k: os.environ.get(k) for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")},
         "viaProxy": {h: _via_proxy(h) for h in HOSTS},
         "connect": {h: _connect(h) for h in HOSTS},
         "direct": {"%%s:%%d" %% tuple(a): _direct(a) for a in DIRECT}}
    with open(report, "w") as f:
        json.dump(r, f)
'''


def probe_wheel():
    init = PROBE % {"hosts": json.dumps([INDEX_HOST, OTHER_HOST]),
                    "direct": json.dumps([[INDEX_ADDR, 443], [OTHER_ADDR, 443]])}
    return probe_wheel_files(init, WH.record_hash)


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def build_wheels(out):
    """The wheels both indexes serve: {file name: (path, sha256)}, and the projects
    {normalized name: [file names]}."""
    os.makedirs(out, exist_ok=True)
    files, projects = {}, {}
    wheels = [(n, v, WH.wheel_bytes_files(n, v, req, init)) for sub, n, v, req, init in WH.WHEELS
              if sub == "wheelhouse"]
    wheels.append(("srtest_probe", "1.0", probe_wheel()))
    for name, version, content in wheels:
        fn = "%s-%s-py3-none-any.whl" % (name, version)
        path = os.path.join(out, fn)
        WH.write_wheel(path, content)
        files[fn] = (path, sha256_file(path))
        projects.setdefault(normalize(name), []).append(fn)
    return files, projects

# ------------------------------------------------------------------------------------------------
# Namespaces, certificates, the HTTPS indexes


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_certificates(d):
    """A test CA and one server certificate per host (P-256, two days): {host: (cert, key)} and
    the CA's path. The openssl CLI, nothing hand-rolled."""
    if shutil.which("openssl") is None:
        raise SystemExit("openssl is not installed (tests/setup.sh installs it)")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sandbox-runner test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    out = {}
    for host in (INDEX_HOST, OTHER_HOST):
        with open(os.path.join(d, host + ".ext"), "w") as f:
            f.write("subjectAltName=DNS:%s\nbasicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n" % host)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", host + ".key", "-out", host + ".csr", "-subj", "/CN=" + host, cwd=d)
        openssl("x509", "-req", "-in", host + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", host + ".ext", "-out", host + ".pem", cwd=d)
        out[host] = (os.path.join(d, host + ".pem"), os.path.join(d, host + ".key"))
    ca = os.path.join(d, "ca.pem")
    os.chmod(ca, 0o644)
    return ca, out


class IndexHandler(http.server.BaseHTTPRequestHandler):
    """A PEP 503 simple index: /simple/, /simple/<normalized>/ (anything else under /simple/ is
    404: pip must ask for the normalized name), /files/<wheel>, /probe. Every request path is
    recorded by its server."""
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.request.settimeout(20)
        self.request.do_handshake()
        super().setup()

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, ctype="text/html; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        path = self.path
        with srv.lock:
            srv.seen.append(path)
        projects, files = srv.projects, srv.files
        if path == "/probe":
            return self.send(200, b"probe\n", "text/plain")
        if path == "/simple/":
            links = "".join('<a href="%s/">%s</a>\n' % (p, p) for p in sorted(projects))
            return self.send(200, ("<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" % links).encode())
        m = re.fullmatch(r"/simple/([a-z0-9-]+)/", path)
        if m and m.group(1) in projects:
            links = "".join('<a href="../../files/%s#sha256=%s">%s</a>\n' % (fn, files[fn][1], fn)
                            for fn in sorted(projects[m.group(1)]))
            return self.send(200, ("<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" % links).encode())
        m = re.fullmatch(r"/files/([A-Za-z0-9_.-]+\.whl)", path)
        if m and m.group(1) in files:
            with open(files[m.group(1)][0], "rb") as f:
                return self.send(200, f.read(), "application/octet-stream")
        return self.send(404, b"not found\n", "text/plain")

    do_HEAD = do_GET


class IndexServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host, addr, cert, key, files, projects):
        super().__init__((addr, 443), IndexHandler)
        self.host = host
        self.files = files
        self.projects = projects
        self.seen = []
        self.lock = threading.Lock()
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        # The handshake happens in the handler's thread, not in accept().
        self.socket = ctx.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    def handle_error(self, request, client_address):
        pass                         # a probe's CONNECT without TLS, a client gone: not our case

    def requests(self, since=0):
        with self.lock:
            return list(self.seen[since:])

    def count(self):
        with self.lock:
            return len(self.seen)


def setup_test_hosts(workdir, wheels_dir):
    """In our private namespaces: lo up, /etc/hosts and /etc/resolv.conf, certificates, the two
    HTTPS indexes. Return (CA path, {host: IndexServer}, wheel files)."""
    T.check_private_netns()
    T.loopback_up()
    hosts = os.path.join(workdir, "hosts")
    with open(hosts, "w") as f:
        f.write(HOSTS)
    os.chmod(hosts, 0o644)
    subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
    resolv = os.path.join(workdir, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    os.chmod(resolv, 0o644)
    subprocess.run(["mount", "--bind", resolv, os.path.realpath("/etc/resolv.conf")], check=True)
    ca, certs = make_certificates(os.path.join(workdir, "tls"))
    files, projects = build_wheels(wheels_dir)
    servers = {INDEX_HOST: IndexServer(INDEX_HOST, INDEX_ADDR, *certs[INDEX_HOST], files, projects),
               OTHER_HOST: IndexServer(OTHER_HOST, OTHER_ADDR, *certs[OTHER_HOST], files, projects)}
    return ca, servers, files

# ------------------------------------------------------------------------------------------------
# Context


class Ctx(EnvClient):
    def __init__(self, d, budget, ca, servers, files, run_as):
        super().__init__(d, budget, "env-online", "envonline")
        self.ca = ca
        self.servers = servers
        self.files = files
        self.run_as = run_as

    def wait_setup_over(self, name, timeout=SETUP_WAIT):
        """@name's setup (queued by a PUT that was answered 202) is over: its entry."""
        return self.wait_phase(name, timeout=timeout)

    def marks(self):
        """Where each server's request record and the daemon's log are now."""
        m = {h: s.count() for h, s in self.servers.items()}
        m["log"] = len(self.d.log_text())
        return m

    def log_since(self, marks):
        """The daemon's log (its gateways' decisions included) since @marks."""
        return self.d.log_text()[marks["log"]:]

    def check_denied(self, res, marks, host, why):
        """The gateway logged a refusal of CONNECT @host:443 because of @why since @marks."""
        lines = [ln for ln in self.log_since(marks).splitlines()
                 if "Egress denied: CONNECT %s:443" % host in ln]
        res.check(any(why in ln for ln in lines),
                  "no 'Egress denied: CONNECT %s:443 ... %s' in the daemon's log (%r)" % (host, why, lines[-3:]))

    def seen_since(self, marks, host):
        return self.servers[host].requests(marks[host])

    def probe_report(self, name):
        path = os.path.join(self.env_root(), "envs", name, "live", "probe-report.json")
        try:
            with open(path) as f:
                return json.load(f), None
        except (OSError, ValueError) as e:
            return None, "%s: %s" % (type(e).__name__, e)


def put_and_wait(ctx, res, name, body):
    """PUT /environments/@name and wait for the end of its setup: the setup entry, or None."""
    st, j = ctx.req("PUT", "/environments/" + name, body)
    if not res.check(st == 202 and (j or {}).get("setupId"), "PUT %s: %d %r" % (name, st, j)):
        return None
    e = ctx.wait_setup_over(name)
    res.note("%s: %s" % (name, json.dumps(e)))
    return e

# ------------------------------------------------------------------------------------------------
# Cases


def case_index(ctx, res):
    """The test's own index, seen from the test: both certificates verify against the CA."""
    tls = ssl.create_default_context(cafile=ctx.ca)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=tls))
    for host in (INDEX_HOST, OTHER_HOST):
        marks = ctx.marks()
        try:
            with opener.open("https://%s/simple/srtest-alpha/" % host, timeout=10) as r:
                body = r.read().decode()
                res.eq("%s status" % host, r.status, 200)
        except Exception as e:                              # noqa: BLE001
            res.fail("https://%s/simple/srtest-alpha/: %s: %s" % (host, type(e).__name__, e))
            continue
        sha = ctx.files["srtest_alpha-2.0-py3-none-any.whl"][1]
        res.check('href="../../files/srtest_alpha-2.0-py3-none-any.whl#sha256=%s"' % sha in body,
                  "%s: the project page lacks alpha 2.0's link: %r" % (host, trunc(body, 400)))
        res.eq("%s recorded" % host, ctx.seen_since(marks, host), ["/simple/srtest-alpha/"])
    # Without the CA the certificate does not verify: pip needs IndexCA=.
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                "https://%s/simple/" % INDEX_HOST, timeout=10):
            res.fail("the index's certificate verified without the test CA")
    except Exception as e:                                  # noqa: BLE001
        res.check("CERTIFICATE_VERIFY_FAILED" in str(e), "without the CA: %s" % e)


def case_configured_index(ctx, res):
    marks = ctx.marks()
    e = put_and_wait(ctx, res, "online", {"kind": "python", "packages": ["srtest_alpha>=2"]})
    if not res.check(e and e.get("phase") == "ready" and e.get("revision") == 1, "online did not become ready: %r" % e):
        res.note("index requests: %r" % ctx.seen_since(marks, INDEX_HOST))
        return
    seen = ctx.seen_since(marks, INDEX_HOST)
    res.note("index requests: %r" % seen)
    for path in ("/simple/srtest-alpha/", "/simple/srtest-beta/",
                 "/files/srtest_alpha-2.0-py3-none-any.whl", "/files/srtest_beta-1.0-py3-none-any.whl"):
        res.check(path in seen, "the index did not see %s" % path)
    res.check(not any(p.startswith("/simple/") and not re.fullmatch(r"/simple/([a-z0-9-]+/)?", p) for p in seen),
              "pip asked for a project page that is not normalized: %r" % seen)
    res.eq("requests to %s" % OTHER_HOST, ctx.seen_since(marks, OTHER_HOST), [])
    revs = ctx.revision_packages("online")
    res.eq("revisions", [r for r, _ in revs], [1])
    pk = revs[-1][1] if revs else {}
    for name, version in (("srtest_alpha", "2.0"), ("srtest_beta", "1.0")):
        p = pk.get(name, {})
        fn = "%s-%s-py3-none-any.whl" % (name, version)
        res.eq("%s version" % name, p.get("version"), version)
        res.eq("%s sha256" % name, p.get("sha256"), ctx.files[fn][1])
        src = str(p.get("source", ""))
        res.check(src.startswith("index:https://%s/" % INDEX_HOST) and src.endswith(fn),
                  "%s's source: %r" % (name, p.get("source")))
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION, srtest_alpha.beta_version())"),
                         "environment": "online"})
    res.eq("run status", st, 200)
    res.eq("run", j.get("stdout"), "2.0 1.0\n")
    res.eq("its environment", j.get("environment"), {"name": "online", "revision": 1})
    if j.get("stdout") != "2.0 1.0\n":
        res.note("stderr: " + trunc(j.get("stderr"), 800))


def failed_outcome(outcome):
    return isinstance(outcome, str) and not outcome.startswith("ok")


def connect_status(line):
    parts = str(line).split(" ")
    return int(parts[1]) if len(parts) > 1 and parts[0].startswith("HTTP/") and parts[1].isdigit() else None


def check_probe(ctx, res, name, allowed, refused):
    """The probe's report of environment @name: the proxy of its provisioning sandbox reaches
    @allowed and refuses @refused; no direct connection works."""
    rep, why = ctx.probe_report(name)
    if not res.check(rep is not None, "no probe report in %s's prefix (%s): the probe did not run in the provisioner"
                     % (name, why)):
        return
    res.note("report: " + json.dumps(rep))
    env = rep.get("env", {})
    res.check("http://127.0.0.1:18118" in (env.get("HTTPS_PROXY"), env.get("https_proxy")),
              "the provisioning sandbox's HTTPS_PROXY: %r" % env)
    via, conn = rep.get("viaProxy", {}), rep.get("connect", {})
    res.eq("HTTPS to %s through the proxy" % allowed, via.get(allowed), "ok 200")
    res.eq("CONNECT %s:443" % allowed, connect_status(conn.get(allowed)), 200)
    res.check(failed_outcome(via.get(refused)), "HTTPS to %s through the proxy: %r" % (refused, via.get(refused)))
    st = connect_status(conn.get(refused))
    res.check(st is None or st >= 400, "CONNECT %s:443 was not refused: %r" % (refused, conn.get(refused)))
    for addr, outcome in rep.get("direct", {}).items():
        res.check(failed_outcome(outcome), "a direct connection to %s: %r" % (addr, outcome))
    res.eq("direct connections tried", sorted(rep.get("direct", {})),
           sorted(["%s:443" % INDEX_ADDR, "%s:443" % OTHER_ADDR]))


def case_reach(ctx, res):
    marks = ctx.marks()
    e = put_and_wait(ctx, res, "probe", {"kind": "python", "packages": ["srtest_probe"]})
    if not res.check(e and e.get("phase") == "ready" and e.get("revision") == 1, "probe did not become ready: %r" % e):
        return
    seen = ctx.seen_since(marks, INDEX_HOST)
    res.note("index requests: %r" % seen)
    res.check("/simple/srtest-probe/" in seen and "/files/srtest_probe-1.0-py3-none-any.whl" in seen,
              "the index did not serve srtest_probe: %r" % seen)
    check_probe(ctx, res, "probe", allowed=INDEX_HOST, refused=OTHER_HOST)
    res.check("/probe" in seen, "the probe's HTTPS through the proxy did not reach %s" % INDEX_HOST)
    ctx.check_denied(res, marks, OTHER_HOST, "not in the allowlist")
    res.eq("requests to %s" % OTHER_HOST, ctx.seen_since(marks, OTHER_HOST), [])


def case_explicit_index(ctx, res):
    marks = ctx.marks()
    body = {"kind": "python", "packages": ["srtest_beta", "srtest_probe"], "source": {"indexUrl": OTHER_URL}}
    e = put_and_wait(ctx, res, "elsewhere", body)
    seen_other, seen_index = ctx.seen_since(marks, OTHER_HOST), ctx.seen_since(marks, INDEX_HOST)
    res.note("%s requests: %r; %s requests: %r" % (OTHER_HOST, seen_other, INDEX_HOST, seen_index))
    # The gateway of this setup allows other.test.example only: IndexURL='s host is not on it.
    res.eq("requests to %s (IndexURL=) during this setup" % INDEX_HOST, seen_index, [])
    if not res.check(e and e.get("phase") == "ready" and e.get("revision") == 1,
                     "elsewhere did not become ready: %r" % e):
        return
    for path in ("/simple/srtest-beta/", "/simple/srtest-probe/", "/files/srtest_beta-1.0-py3-none-any.whl"):
        res.check(path in seen_other, "%s did not see %s" % (OTHER_HOST, path))
    revs = ctx.revision_packages("elsewhere")
    pk = revs[-1][1] if revs else {}
    for name in ("srtest_beta", "srtest_probe"):
        src = str(pk.get(name, {}).get("source", ""))
        res.check(src.startswith("index:https://%s/files/" % OTHER_HOST), "%s's source: %r" % (name, src))
        fn = "%s-1.0-py3-none-any.whl" % name
        res.eq("%s sha256" % name, pk.get(name, {}).get("sha256"), ctx.files[fn][1])
    st, j = ctx.req("GET", "/environments/%s/revisions" % "elsewhere")
    rev = ((j or {}).get("revisions") or [{}])[-1]
    res.eq("the record's indexUrl", (rev.get("sources") or {}).get("indexUrl"), OTHER_URL)
    check_probe(ctx, res, "elsewhere", allowed=OTHER_HOST, refused=INDEX_HOST)
    ctx.check_denied(res, marks, INDEX_HOST, "not in the allowlist")


OFFLINE_REFUSALS = [
    ("offline with an indexUrl", {"kind": "python", "packages": ["srtest_beta"],
                                  "source": {"offline": True, "indexUrl": INDEX_URL}}),
    ("offline with another indexUrl", {"kind": "python", "packages": ["srtest_beta"],
                                       "source": {"offline": True, "indexUrl": OTHER_URL}}),
    ("offline with a preset", {"kind": "python", "packages": ["srtest_beta"],
                               "source": {"offline": True, "preset": "upstream"}}),
]


def case_offline_request(ctx, res):
    marks = ctx.marks()
    for what, body in OFFLINE_REFUSALS:
        st, j = ctx.req("PUT", "/environments/offreq", body)
        if res.check(st == 400 and (j or {}).get("error") == "source_offline_unsupported",
                     "%s: expected 400 source_offline_unsupported, got %d %r" % (what, st, j)):
            res.check(bool((j or {}).get("message")), "%s: no message" % what)
    st, j = ctx.req("GET", "/environments/offreq")
    res.eq("GET after the refusals", st, 404)
    res.check(not os.path.exists(os.path.join(ctx.env_root(), "envs", "offreq")), "a refused PUT left envs/offreq")
    # Offline without a source: no index at all (pip --no-index; no wheelhouse is configured, so
    # nothing can be found) and no network: neither host hears of it.
    e = put_and_wait(ctx, res, "offline", {"kind": "python", "packages": ["srtest_beta"], "source": {"offline": True}})
    res.check(e and e.get("phase") == "failed" and e.get("error"),
              "an offline setup with nothing to install from: %r" % e)
    for host in (INDEX_HOST, OTHER_HOST):
        res.eq("requests to %s" % host, ctx.seen_since(marks, host), [])


def case_no_mirrors(ctx, res):
    d = ctx.d
    status, took = d.terminate(grace=20)
    res.check(status is not None, "the daemon did not exit within 20 s of SIGTERM")
    with open(d.conf, "w") as f:
        f.write(config_text(ctx.ca, mirrors=False))
    T.chown_tree(d.tmp, ctx.run_as)
    try:
        d.start(wait=30)
    except (L.DaemonError, OSError) as e:
        res.fail("the daemon without Mirrors= did not start: %s" % e)
        return
    st, j = ctx.req("GET", "/environments/online")
    if not res.check(st == 200 and (j or {}).get("revision") == 1,
                     "online after the restart (built by an earlier case): %d %r" % (st, j)):
        return
    marks = ctx.marks()
    e = put_and_wait(ctx, res, "online", {"kind": "python", "packages": ["srtest_alpha<2"]})
    res.check(e and e.get("phase") == "failed", "the setup without Mirrors= did not fail: %r" % e)
    res.check(bool((e or {}).get("error")), "the failed setup has no error message: %r" % e)
    res.check("index was not reachable: Tunnel connection failed: 403" in str((e or {}).get("error")),
              "the error does not say the gateway refused the index: %r" % (e or {}).get("error"))
    res.note("its error: %r" % (e or {}).get("error"))
    # Allowed by name, refused by address: the gateway resolved the index to its loopback address.
    ctx.check_denied(res, marks, INDEX_HOST, "resolved address %s refused: loopback" % INDEX_ADDR)
    res.eq("the live revision", (e or {}).get("revision"), 1)
    res.eq("requests to %s (its address is loopback)" % INDEX_HOST, ctx.seen_since(marks, INDEX_HOST), [])
    res.eq("requests to %s" % OTHER_HOST, ctx.seen_since(marks, OTHER_HOST), [])
    st, j = ctx.req("GET", "/environments/online")
    res.check(st == 200 and (j or {}).get("revision") == 1, "online after the failed update: %d %r" % (st, j))
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION)"), "environment": "online"})
    res.eq("a run after the failed update", j.get("stdout"), "2.0\n")
    res.eq("its environment", j.get("environment"), {"name": "online", "revision": 1})
    d_live = os.path.join(ctx.env_root(), "envs", "online")
    res.eq("build directories left", [n for n in os.listdir(d_live) if n.startswith("build-")]
           if os.path.isdir(d_live) else [], [])


CASES = [
    ("the test index: PEP 503 over HTTPS on both hosts, certificates from the test CA", case_index),
    ("IndexURL=: srtest_alpha>=2 through the gateway, recorded with sources and hashes, a run imports it",
     case_configured_index),
    ("the provisioning sandbox reaches the index's host through the proxy and nothing else", case_reach),
    ("an explicit indexUrl takes precedence: built from that host only, the configured one unreachable",
     case_explicit_index),
    ("offline per request: with an index or preset 400 source_offline_unsupported; alone, no network at all",
     case_offline_request),
    ("without Mirrors= the gateway refuses the loopback index: failed with a message, revision 1 stays live",
     case_no_mirrors),
]


def config_text(ca, mirrors=True):
    return ("[Environments]\nBootstrap=\nOffline=no\nIndexURL=%s\n%sIndexCA=%s\nSetupTimeoutSec=120\n"
            "[Runner]\nIdleExitSec=0\n[Execution]\nAllowUnscoped=yes\nDefaultTimeoutSec=60\n"
            % (INDEX_URL, "Mirrors=127.0.0.0/8\n" if mirrors else "", ca))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true", help="print the diagnostics of passing cases too")
    ap.add_argument("--keep-tmp", action="store_true")
    ap.add_argument("--run-as", default="self", help=T.RUN_AS_HELP + " (default here: self)")
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
    workdir = tempfile.mkdtemp(prefix="sr-env-online.")
    os.chmod(workdir, 0o755)
    d = None
    try:
        run_as = T.resolve_run_as(args.run_as)
        ca, servers, files = setup_test_hosts(workdir, os.path.join(workdir, "wheels"))
        d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as, config=config_text(ca))
        budget = L.Budget(BUDGET)
        ctx = Ctx(d, budget, ca, servers, files, run_as)
        # The first case checks the test's own index and needs no daemon.
        res = Result(CASES[0][0])
        try:
            CASES[0][1](ctx, res)
        except Exception as e:                                      # noqa: BLE001
            res.fail("%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
        tap.emit(res, verbose=args.verbose)
        out.write("# daemon runs as uid %s\n" % T.run_as_uid(run_as))
        if L.start_or_fail_all(d, CASES[1:], tap, Result, 600) is None:
            return 1

        def watchdog():
            if not budget.expired.wait(max(0.0, budget.left())):
                budget.expired.set()
                out.write("# time budget of %.0fs exhausted: killing the daemon\n" % BUDGET)
                out.flush()
                d.kill()
        threading.Thread(target=watchdog, daemon=True).start()

        for name, fn in CASES[1:]:
            res = Result(name)
            tc = now()
            if budget.expired.is_set():
                res.fail("not run: the time budget is exhausted")
            elif not d.alive():
                res.fail("the daemon is not running; log tail:\n%s" % d.log_tail(1500))
            else:
                try:
                    fn(ctx, res)
                except Exception as e:                              # noqa: BLE001
                    res.fail("%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
                if not d.alive():
                    res.fail("the daemon died; log tail:\n%s" % d.log_tail(2000))
            res.note("(%.2fs)" % (now() - tc))
            tap.emit(res, verbose=args.verbose)
        budget.expired.set()
        if tap.failed:
            L.write_log_tail(d, out)
        if d.alive():
            rc, secs = d.terminate()
            out.write("# daemon stopped: status %s after %.1fs\n" % (rc, secs))
        for s in servers.values():
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
