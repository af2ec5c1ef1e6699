# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shared by the tests that speak the ScienceDiscovery dialect (docs/api.md section 15): a daemon
started by hand with our own API on one listener and --listen sciencediscovery=127.0.0.1:PORT on a
second, and a client that signs and sends as their API server does (bearer token; execution
signature = hex HMAC-SHA256 keyed with the token over "<ms>\\n<sha256 hex of the body>"), with
chunked streaming uploads as their client sends them.  Traffic only to 127.0.0.1."""

import argparse
import base64
import hashlib
import hmac
import importlib.util
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import traceback
import urllib.parse
import uuid

import execute_lib as L
import testlib as T
from execute_lib import HttpError, now, trunc

RUN_TIMEOUT = 20.0
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
BAD_SIGNATURE = {"error": "Invalid or expired execution signature"}
UNAUTHORIZED = {"error": "Unauthorized"}


class SdDaemon(L.Daemon):
    """execute_lib's daemon with a second listener that speaks the ScienceDiscovery dialect."""

    def start(self, wait=15.0):
        last = ""
        for attempt in range(4):
            self.port = self._pick_port()
            self.sd_port = self._pick_port()
            if self.sd_port == self.port:
                continue
            logf = open(self.log_path, "ab")
            argv = [self.path, "--listen", "%s:%d" % (L.LOOPBACK, self.port),
                    "--listen", "sciencediscovery=%s:%d" % (L.LOOPBACK, self.sd_port),
                    "--config", self.conf, "--log-target", "console"]
            self.proc = L.subprocess.Popen(argv, stdin=L.subprocess.DEVNULL, stdout=logf, stderr=logf,
                                           env=self.env(), cwd=self.tmp, close_fds=True,
                                           **T.popen_ids(self.run_as))
            logf.close()
            deadline = now() + wait
            while now() < deadline and self.proc.poll() is None:
                r = self.health(timeout=1.0)
                if r is not None and r.status == 200:
                    return r
                time.sleep(0.1)
            rc = self.proc.poll()
            if rc is None:
                self.kill()
                raise L.DaemonError("no 200 from GET /health within %.0fs; log tail: %s" %
                                    (wait, trunc(self.log_tail(), 1500)))
            last = "exited with %s; log tail: %s" % (rc, trunc(self.log_tail(), 1500))
            if "in use" not in last:
                break
        raise L.DaemonError("daemon failed to start: " + last)


def epoch(session="session-1", policy="none"):
    return {"id": "epoch-1", "sessionId": session, "createdAt": "2026-12-03T00:00:00.000Z",
            "reason": "test", "environmentRevisionId": "rev-1",
            "mounts": [{"source": "workspace", "mode": "read-write"}],
            "secretRefs": [], "networkPolicy": policy}


class SdClient:
    def __init__(self, d):
        self.d = d

    @property
    def port(self):
        return self.d.sd_port

    def sign(self, body, ts=None, token=None):
        ts = str(int(time.time() * 1000)) if ts is None else str(ts)
        s = ts.encode() + b"\n" + hashlib.sha256(body).hexdigest().encode()
        return ts, hmac.new((token or self.d.token).encode(), s, hashlib.sha256).hexdigest()

    def headers(self, data=b"", auth=True, signed=False, content_type="application/json"):
        h = []
        if auth:
            h.append(("Authorization", "Bearer " + (auth if isinstance(auth, str) else self.d.token)))
        if data and content_type:
            h.append(("Content-Type", content_type))
        if signed:
            t, s = self.sign(data)
            h += [("x-science-execution-timestamp", t), ("x-science-execution-signature", s)]
        return h

    def request(self, method, path, body=None, auth=True, signed=False, raw=None, timeout=10.0,
                content_type="application/json", extra=(), ts=None, sig=None):
        """One request to their listener. signed: with the execution signature, of timestamp
        @ts (default now) and, when @sig is given, that signature instead of the right one."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        h = self.headers(data, auth, False, content_type) + list(extra)
        if signed:
            t, s = self.sign(data, ts)
            h += [("x-science-execution-timestamp", t), ("x-science-execution-signature", sig if sig is not None else s)]
        return L.http(self.port, method, path, h, data, timeout=timeout)

    def execute_body(self, code, key, **kw):
        b = {"executionId": str(uuid.uuid4()), "agentId": "main", "code": code, "language": "python",
             "kernelMode": "ephemeral", "executionTimeoutMs": 0, "maxOutputBytes": 1073741824,
             "maxWorkspaceBytes": 10737418240, "kernelIdleTimeoutMs": 0,
             "workspaceRoot": "/ignored/when/a/key/is/sent", "runnerWorkspaceKey": key,
             "permissionEpoch": epoch()}
        b.update(kw)
        return b

    def execute(self, code, key, timeout=30.0, path="/execute", **kw):
        body = self.execute_body(code, key, **kw)
        if path != "/execute":
            body.pop("language", None)
        return self.request("POST", path, body, signed=True, timeout=timeout)

    def execute_shell(self, code, key, timeout=30.0, **kw):
        return self.execute(code, key, timeout=timeout, path="/execute-shell", **kw)

    def put_chunked(self, path, chunks, extra=(), auth=True, stop_after=None, timeout=15.0):
        """PUT with Transfer-Encoding: chunked, as their client streams it.  stop_after=N: hang up
        after N chunks (a disconnect in the middle) and return None.  Else the Response."""
        lines = ["PUT %s HTTP/1.1" % path, "Host: %s" % L.LOOPBACK, "Connection: close",
                 "Transfer-Encoding: chunked", "Content-Type: application/octet-stream"]
        for k, v in self.headers(b"", auth, False, None) + list(extra):
            lines.append("%s: %s" % (k, v))
        t0 = now()
        s = socket.create_connection((L.LOOPBACK, self.port), timeout=timeout)
        try:
            s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            for i, c in enumerate(chunks):
                if stop_after is not None and i >= stop_after:
                    s.shutdown(socket.SHUT_RDWR)
                    return None
                if c:
                    s.sendall(b"%x\r\n" % len(c) + c + b"\r\n")
            s.sendall(b"0\r\n\r\n")
            data = b""
            while True:
                s.settimeout(max(0.1, timeout - (now() - t0)))
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    raise HttpError("no complete answer within %.1fs (got %d bytes)" % (timeout, len(data)))
                if not chunk:
                    break
                data += chunk
                if L._complete(data):
                    break
        finally:
            s.close()
        return L._parse_response(data, now() - t0)


class Ctx:
    """One session of their API server on one runnerWorkspaceKey (@key, default a fresh
    "sd-XXXX/session-XXXX"): sd() sends a request to their listener, execute() a signed python
    run in that workspace and answers (request body, response)."""

    def __init__(self, d, verbose=False, key=None):
        self.d = d
        self.verbose = verbose
        self.c = SdClient(d)
        self.key = key or "sd-%s/session-%s" % (uuid.uuid4().hex[:8], uuid.uuid4().hex[:8])

    def sign(self, body, ts=None, token=None):
        return self.c.sign(body, ts, token)

    def sd(self, method, path, body=None, auth=True, signed=False, ts=None, sig=None, raw=None, timeout=10.0):
        return self.c.request(method, path, body, auth=auth, signed=signed, raw=raw, timeout=timeout, ts=ts,
                              sig=sig)

    def execute_body(self, code, **kw):
        return self.c.execute_body(code, self.key, **kw)

    def execute(self, code, timeout=RUN_TIMEOUT, **kw):
        body = self.execute_body(code, **kw)
        return body, self.sd("POST", "/execute", body, signed=True, timeout=timeout)


# ---- managed shell executions (POST /shell-executions and its GETs) ----------------------------

def shell_submit(ctx, res, code, **kw):
    """Submit @code as their API's run_shell does: (request body, response)."""
    body = ctx.execute_body(code, **kw)
    body.pop("language")
    body["executionId"] = "shell:" + uuid.uuid4().hex
    r = ctx.sd("POST", "/shell-executions", body, signed=True)
    return body, r


def shell_path(body, suffix="", session="session-1", agent="main", extra=""):
    return "/shell-executions/%s%s?sessionId=%s&agentId=%s%s" % (body["executionId"], suffix, session, agent, extra)


def shell_wait(ctx, res, body, limit=15.0):
    """Poll as their API does (every 200 ms) until a terminal state; return the last record."""
    t0 = now()
    while now() - t0 < limit:
        r = ctx.sd("GET", shell_path(body))
        if r.status != 200:
            res.fail("poll: %s" % r.brief())
            return None
        j = r.json()
        if j.get("state") not in ("queued", "running"):
            return j
        time.sleep(0.2)
    res.fail("no terminal state within %.0f s" % limit)
    return None


def read_logs(ctx, res, body, cursor=1, max_pages=10):
    """Page through GET /shell-executions/{id}/logs from @cursor as their execution_logs tool
    does, checking each page's bounds (at most 4 chunks of at most 4 KiB): (texts by stream,
    pages read, the chunks' cursors, the next cursor), or None after a failed request."""
    texts, pages, seen = {"stdout": "", "stderr": ""}, 0, []
    while pages < max_pages:
        r = ctx.sd("GET", shell_path(body, "/logs", extra="&cursor=%d" % cursor))
        if not res.check(r.status == 200, "logs cursor %d: %s" % (cursor, r.brief())):
            return None
        j = r.json()
        pages += 1
        res.check(len(j.get("chunks", [])) <= 4, "more than 4 chunks: %d" % len(j["chunks"]))
        for c in j.get("chunks", []):
            res.check(len(c["text"]) <= 4096, "chunk of %d" % len(c["text"]))
            texts[c["stream"]] += c["text"]
            seen.append(c["cursor"])
        cursor = j.get("nextCursor")
        if not j.get("truncated"):
            break
    return texts, pages, seen, cursor


def active_executions(ctx):
    """The executionIds GET /status lists as active."""
    r = ctx.sd("GET", "/status")
    return [x.get("executionId") for x in (r.json() or {}).get("activeExecutions", [])]


def execute_then_hang_up(ctx, res, body):
    """Send POST /execute of @body, wait until /status lists the run, hang up; then wait until it
    is gone. Return the seconds from the hang-up until it left /status, or None when it never
    showed or did not leave within 10 s (a failure recorded in @res)."""
    data = json.dumps(body).encode()
    t, sig = ctx.sign(data)
    headers = [("Authorization", "Bearer " + ctx.d.token), ("Content-Type", "application/json"),
               ("x-science-execution-timestamp", t), ("x-science-execution-signature", sig)]
    s = socket.create_connection((L.LOOPBACK, ctx.d.sd_port), timeout=5)
    try:
        s.sendall(L.build_request("POST", "/execute", headers, data))
        t0 = now()
        while body["executionId"] not in active_executions(ctx) and now() - t0 < 5:
            time.sleep(0.1)
        if not res.check(body["executionId"] in active_executions(ctx), "the run never showed in /status"):
            return None
        # Past its launch (a cancel during the launch falls back to the 5 s kill grace, on our
        # own API as well).
        time.sleep(0.5)
    finally:
        s.close()
    t0 = now()
    while body["executionId"] in active_executions(ctx) and now() - t0 < 10:
        time.sleep(0.1)
    if not res.check(body["executionId"] not in active_executions(ctx),
                     "the run is still active 10 s after the disconnect"):
        return None
    return now() - t0


# ---- remote workspaces and skill packages --------------------------------------------------------

def quote(s):
    return urllib.parse.quote(s, safe="")


def query(route, **params):
    return route + "?" + "&".join("%s=%s" % (k, quote(v)) for k, v in params.items())


def transfer(c, key, path, chunks, size=None, sha=None, executable=None, conflict=None, stop_after=None,
             extra=None):
    """PUT /remote-workspace/transfer-file of @chunks, streamed chunked with the metadata headers
    their client sends (x-workspace-size and -sha256 of the data unless @size or @sha say
    otherwise; @extra replaces them all), through SdClient @c: the Response, or None after a
    hang-up (@stop_after)."""
    data = b"".join(chunks)
    p = {"workspace": key, "path": path}
    if conflict:
        p["conflict"] = conflict
    h = [("x-workspace-size", str(len(data) if size is None else size)),
         ("x-workspace-sha256", hashlib.sha256(data).hexdigest() if sha is None else sha)]
    if executable is not None:
        h.append(("x-workspace-executable", str(executable)))
    return c.put_chunked(query("/remote-workspace/transfer-file", **p), chunks, extra=h if extra is None else extra,
                         stop_after=stop_after)


def workspace_name(key):
    """Our workspace of a runnerWorkspaceKey (sdp_workspace_for_key()): the key itself when it is
    one plain name, else "sd-" and 40 hex of its SHA-256."""
    if len(key) <= 128 and all(ch.isalnum() or ch in "._-" for ch in key) and not key.startswith("."):
        return key
    return "sd-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def skill(sid, files, revision=1, version="1.0.0"):
    """One skill of a SkillPackageBundle, its files {path: bytes}, with their package hash."""
    entries = []
    h = hashlib.sha256()
    for path, data in sorted(files.items()):
        entries.append({"path": path, "content": base64.b64encode(data).decode(), "size": len(data),
                        "hash": hashlib.sha256(data).hexdigest()})
        h.update(("%d:%s:%d:" % (len(path.encode()), path, len(data))).encode() + data)
    return {"id": sid, "revision": revision, "version": version, "hash": h.hexdigest(), "files": entries}


def bundle_id(skills):
    """The id their client computes for a set of skills (skillBundleIdentity)."""
    ident = sorted(({"hash": s["hash"], "id": s["id"], "revision": s["revision"], "version": s["version"]}
                    for s in skills), key=lambda o: o["id"])
    return hashlib.sha256(json.dumps(ident, separators=(",", ":")).encode()).hexdigest()


# ---- the per-request network policy --------------------------------------------------------------

# Runs in the sandbox: fetches each URL (through HTTP_PROXY when set, as urllib does) and tries
# a direct TCP connect to 127.0.0.2:80; prints one JSON document.
NET_CLIENT = r'''
import json, os, socket, urllib.error, urllib.request
out = {"proxy": os.environ.get("HTTP_PROXY"), "fetch": {}}
for url in URLS:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            out["fetch"][url] = {"status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        out["fetch"][url] = {"status": e.code}
    except Exception as e:
        out["fetch"][url] = {"error": "%s: %s" % (type(e).__name__, e)}
try:
    socket.create_connection(("127.0.0.2", 80), timeout=3).close()
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
'''


def net_client(urls):
    return "URLS = %r\n%s" % (urls, NET_CLIENT)


def net_access(mode="domain-allowlist", domains=("allowed.test",), private=True, revision="rev-net-1", **kw):
    """permissionEpoch.networkAccess as their API sends it."""
    a = {"mode": mode, "allowedDomains": list(domains), "allowPrivateNetwork": private, "revision": revision,
         "egressProxyPolicy": "inherit"}
    a.update(kw)
    return a


def epoch_with(ctx, policy, net_access):
    """ctx's permission epoch with networkPolicy @policy and networkAccess @net_access (None: none)."""
    e = ctx.execute_body("")["permissionEpoch"]
    e["networkPolicy"] = policy
    if net_access is not None:
        e["networkAccess"] = net_access
    return e


# ---- NPU jobs (on npu.py's fake Ascend host) ------------------------------------------------------

def fold_config(d, key, weights, **over):
    """The config of npu.py's "fold" workload for the runner workspace of @key."""
    cfg = {"workspace": d.workspace_path(workspace_name(key)), "run_dir": "out/run1",
           "target_pdb": "target.pdb", "weights": weights, "sleep": 0}
    cfg.update(over)
    return json.dumps(cfg)


def job_body(key, session, **kw):
    """POST /npu/jobs as their API sends it (None drops a field)."""
    b = {"workloadId": "fold", "sessionId": session, "workspaceRoot": "/their/host/path",
         "environmentRevisionId": "starter-python@1", "inputs": {"configPath": "cfg.json"},
         "jobId": str(uuid.uuid4()), "runnerWorkspaceKey": key}
    b.update(kw)
    return {k: v for k, v in b.items() if v is not None}


def wait_job(ctx, job, session, states, t=60):
    """Poll GET /npu/jobs/{id} until its state is one of @states; raise after @t seconds."""
    deadline = now() + t
    j = None
    while now() < deadline:
        r = ctx.sd("GET", "/npu/jobs/%s?session_id=%s" % (job, session))
        j = r.json() if r.status == 200 else None
        if j and j.get("state") in states:
            return j
        time.sleep(0.2)
    raise AssertionError("job %s did not reach %s: %s" % (job, states, j))


# ---- scientific environments, offline ------------------------------------------------------------

def build_wheelhouse(top):
    """tests/helpers/make-wheelhouse.py's wheels under @top (top/wheelhouse: srtest_alpha 1.0/2.0,
    srtest_beta 1.0; top/client: the client wheel srtest_gamma 0.1), readable by every user.
    Returns the environments' section of runner.conf that builds starter-python (our python-base)
    from them in seconds, offline."""
    spec = importlib.util.spec_from_file_location(
        "make_wheelhouse", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers",
                                        "make-wheelhouse.py"))
    wh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wh)
    for sub, name, version, requires, init in wh.WHEELS:
        os.makedirs(os.path.join(top, sub), exist_ok=True)
        wh.write_wheel(os.path.join(top, sub, "%s-%s-py3-none-any.whl" % (name, version)),
                       wh.wheel_bytes_files(name, version, requires, init))
    for root, dirs, files in os.walk(top):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return ("[Environments]\nBootstrap=python-base\nOffline=yes\nWheelhouse=%s\nPythonBase=wheelhouse\n"
            "PythonBasePackages=\nPythonBasePackages=srtest_alpha<2\nSetupTimeoutSec=120\n"
            % os.path.join(top, "wheelhouse"))


def run_cases(ctx, d, cases, tap, budget, verbose, after_case=None):
    """Run each (name, fn) of @cases against @ctx (its daemon @d) and emit a TAP line for each: a
    case fails when it raises or leaves the daemon dead (or when after_case(res), run while the
    daemon lives, finds it wrong); none runs once @budget is spent."""
    for name, fn in cases:
        res = L.Result(name)
        t0 = now()
        if budget.left() <= 0:
            res.fail("not run: the time budget is exhausted")
        elif not d.alive():
            res.fail("the daemon is not running (exit status %r)" % d.proc.poll())
        else:
            try:
                fn(ctx, res)
            except Exception:                                  # noqa: BLE001
                res.fail("test error:\n" + traceback.format_exc())
            if not d.alive():
                res.fail("the daemon died (exit status %r); log tail:\n%s" % (d.proc.poll(), d.log_tail(2000)))
            elif after_case:
                after_case(res)
        res.note("(%.2fs)" % (now() - t0))
        tap.emit(res, verbose=verbose)


class Setup:
    """What a dialect test's prepare() gets: the daemon not started yet (@d: write its
    configuration to d.conf), the options, whom it runs as, a scratch directory, and where to
    register what must be undone at the end (cleanups: callables, run last first)."""

    def __init__(self, d, args, run_as, workdir):
        self.d, self.args, self.run_as, self.workdir = d, args, run_as, workdir
        self.cleanups = []


def test_main(doc, cases, budget_s, make_ctx, config=None, prepare=None, inner_env=None, after_case=None,
              need_root=None):
    """The main() of every dialect test: the options (--daemon, --verbose, --keep-tmp, --run-as),
    re-run inside private namespaces first when @inner_env names the marker variable, the TAP
    plan, the daemon with @config (default execute_lib's) on both listeners, prepare(setup) (may
    return a note for the log) before it starts, ctx = make_ctx(setup), the cases (run_cases), the
    daemon's log tail on failure, and everything stopped and removed. @need_root: why the test must
    run as root (then it fails every case otherwise: not a skip)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    args = ap.parse_args()
    if inner_env and os.environ.get(inner_env) != "1":
        argv = ["--daemon", os.path.abspath(args.daemon), "--run-as", args.run_as]
        argv += ["--verbose"] if args.verbose else []
        argv += ["--keep-tmp"] if args.keep_tmp else []
        T.enter_namespaces(argv, inner_env)

    out = sys.stdout
    tap = L.Tap(out)
    out.write("1..%d\n" % len(cases))
    out.flush()
    if need_root and os.geteuid() != 0:
        for name, _ in cases:
            r = L.Result(name)
            r.fail(need_root)
            tap.emit(r)
        return 1
    budget = L.Budget(budget_s)
    run_as = T.resolve_run_as(args.run_as)
    workdir = tempfile.mkdtemp(prefix="sr-sd-test.")
    d = SdDaemon(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as,
                 config=L.CONFIG_TEXT if config is None else config)
    setup = Setup(d, args, run_as, workdir)
    try:
        note = prepare(setup) if prepare else None
        out.write("# daemon runs as uid %s%s\n" % (T.run_as_uid(run_as), "; " + note if note else ""))
        if L.start_or_fail_all(d, cases, tap, L.Result, 300) is None:
            return 1
        out.write("# ScienceDiscovery listener on 127.0.0.1:%d\n" % d.sd_port)
        ctx = make_ctx(setup)
        run_cases(ctx, d, cases, tap, budget, args.verbose, after_case)
        if tap.failed:
            L.write_log_tail(d, out)
        d.terminate()
    finally:
        for fn in reversed(setup.cleanups):
            fn()
        d.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
    return tap.summary(len(cases), budget.elapsed())
