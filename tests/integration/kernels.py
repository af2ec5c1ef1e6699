#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Stateful Jupyter kernels behind the Kernel Gateway API (issue 22), end to end: a daemon with
[Kernels] Enable=yes, real sandboxed ipykernels, and DocsGPT's client sequence
(docs/kernels.md; notes §4) spoken with Debian's python3-websocket:

  POST /api/kernels {"name"} -> id; a prime execution; then a NEW WebSocket per execution
  (Authorization: token T, no subprotocol, legacy JSON on "shell"), done only after both the
  execute_reply and status: idle of its msg_id; files through stdout as base64 (a 4.2 MB message
  up, a ~14 MB stream message down, compared byte for byte); timeout -> POST .../interrupt with
  no body -> drain for idle -> the same kernel still usable; DELETE -> 204, then 404.

Plus the bad input of the issue: no token, a WebSocket without the upgrade headers, malformed
messages on a live socket, a 1 GiB frame header (close 1009), an unknown kernel. Each case is one
TAP point.

    kernels.py --daemon build/src/sandbox-runnerd [--run-as self] [--only NAME] [--verbose]"""

import argparse
import base64
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import time
import traceback
import uuid

import websocket        # Debian's python3-websocket (websocket-client)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import testlib as T             # noqa: E402
from testlib import Result      # noqa: E402

BUDGET = 600
CONFIG = L.CONFIG_TEXT + """\
[Kernels]
Enable=yes
"""
SESSION = uuid.uuid4().hex


class Ctx:
    def __init__(self, d):
        self.d = d
        self.kernel = None              # the id DocsGPT's sequence works on

    def auth(self):
        return [("Authorization", "token " + self.d.token)]

    def call(self, method, path, body=None, headers=None, timeout=10.0):
        h = list(self.auth() if headers is None else headers)
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            h.append(("Content-Type", "application/json"))
        return L.http(self.d.port, method, path, h, data, timeout=timeout)

    def ws_url(self, kid, query=""):
        return "ws://127.0.0.1:%d/api/kernels/%s/channels%s" % (self.d.port, kid, query)

    def ws(self, kid, timeout=30.0):
        return websocket.create_connection(self.ws_url(kid), timeout=timeout,
                                           header=["Authorization: token " + self.d.token])


def execute_request(code):
    """DocsGPT's execute_request: legacy JSON on shell, a header without date."""
    msg_id = uuid.uuid4().hex
    return msg_id, json.dumps({
        "header": {"msg_id": msg_id, "username": "docsgpt", "session": SESSION,
                   "msg_type": "execute_request", "version": "5.3"},
        "parent_header": {}, "metadata": {},
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
        "channel": "shell", "buffers": [],
    })


class Outcome:
    def __init__(self):
        self.stdout = []
        self.stderr = []
        self.results = []
        self.errors = []
        self.reply = None
        self.idle = False


def collect(ws, msg_id, out, deadline):
    """Read frames until both the execute_reply and status: idle of @msg_id (DocsGPT's rule)."""
    while not (out.reply is not None and out.idle):
        ws.settimeout(max(0.05, deadline - time.monotonic()))
        frame = ws.recv()
        m = json.loads(frame)           # a non-JSON frame is a ProtocolError for DocsGPT
        if (m.get("parent_header") or {}).get("msg_id") != msg_id:
            continue
        t = m.get("msg_type") or m["header"]["msg_type"]
        c = m.get("content") or {}
        if t == "stream":
            (out.stdout if c.get("name") == "stdout" else out.stderr).append(c.get("text", ""))
        elif t in ("execute_result", "display_data"):
            out.results.append(c.get("data", {}))
        elif t == "error":
            out.errors.append(c)
        elif t == "execute_reply":
            out.reply = c
        elif t == "status" and c.get("execution_state") == "idle":
            out.idle = True
    return out


def run_code(ctx, kid, code, timeout=60.0):
    """One execution on a new WebSocket, closed afterwards. ipykernel told to stop on error (as
    DocsGPT's requests do) aborts a request that reaches it right after an error's reply, before
    its own abort ends (stop_on_error_timeout): on a loaded host the next execution can be that
    one. An "aborted" reply did not run the code: it is sent again (at most twice)."""
    for attempt in range(3):
        ws = ctx.ws(kid, timeout=timeout)
        try:
            msg_id, text = execute_request(code)
            ws.send(text)
            out = collect(ws, msg_id, Outcome(), time.monotonic() + timeout)
        finally:
            ws.close()
        if (out.reply or {}).get("status") != "aborted":
            break
        time.sleep(0.2)
    return out


def need_kernel(ctx, res):
    if ctx.kernel is None:
        res.fail("no kernel (the create case failed)")
        return False
    return True


# ---- cases ----------------------------------------------------------------------------------

def case_auth(ctx, res):
    r = ctx.call("GET", "/api/kernels", headers=[])
    res.eq("GET /api/kernels without a token", r.status, 401)
    j = r.json() or {}
    res.check("reason" in j and "message" in j, "401 body is {reason, message}: %s" % r.brief())
    r = ctx.call("GET", "/api", headers=[("Authorization", "Bearer " + ctx.d.token)])
    res.eq("GET /api with Bearer", r.status, 200)
    res.check("version" in (r.json() or {}), "GET /api has a version")


def case_kernelspecs(ctx, res):
    r = ctx.call("GET", "/api/kernelspecs")
    res.eq("status", r.status, 200)
    j = r.json() or {}
    res.check("python3" in j.get("kernelspecs", {}), "python3 is a kernelspec: %s" % r.brief())
    r = ctx.call("GET", "/api/kernelspecs/no-such-spec")
    res.eq("unknown spec", r.status, 404)


def case_create(ctx, res):
    r = ctx.call("POST", "/api/kernels", {"name": "python3"}, timeout=10.0)
    if not res.eq("POST /api/kernels", r.status, 201):
        res.note(r.brief())
        return
    j = r.json() or {}
    kid = j.get("id", "")
    res.check(str(uuid.UUID(kid)) == kid, "the id is a UUID: %r" % kid)
    res.eq("Location", r.header("location"), "/api/kernels/" + kid)
    for k in ("name", "last_activity", "execution_state", "connections"):
        res.check(k in j, "model has %s" % k)
    res.check(isinstance(j.get("connections"), int), "connections is an integer")
    time.strptime(j.get("last_activity", "")[:19], "%Y-%m-%dT%H:%M:%S")
    res.check(j.get("last_activity", "").endswith("Z") and "." in j.get("last_activity", ""),
              "last_activity has microseconds and Z: %r" % j.get("last_activity"))
    ctx.kernel = kid
    # prime, as DocsGPT does: a private directory under /tmp, and the kernel's cwd in it
    o = run_code(ctx, kid, "import os, shutil\nd = '/tmp/docsgpt-sandbox/%s'\nshutil.rmtree(d, True)\n"
                 "os.makedirs(d, mode=0o700)\nos.chdir(d)\nprint(os.getcwd())" % SESSION)
    res.eq("prime reply", (o.reply or {}).get("status"), "ok")
    res.eq("prime cwd", "".join(o.stdout).strip(), "/tmp/docsgpt-sandbox/" + SESSION)


def case_state_kept(ctx, res):
    if not need_kernel(ctx, res):
        return
    o = run_code(ctx, ctx.kernel, "x = 41")
    res.eq("first reply", (o.reply or {}).get("status"), "ok")
    o = run_code(ctx, ctx.kernel, "x + 1")
    res.eq("second reply", (o.reply or {}).get("status"), "ok")
    res.eq("execute_result", [r.get("text/plain") for r in o.results], ["42"])
    o = run_code(ctx, ctx.kernel, "1/0")
    res.eq("error reply", (o.reply or {}).get("status"), "error")
    res.eq("error name", [e.get("ename") for e in o.errors], ["ZeroDivisionError"])
    r = ctx.call("GET", "/api/kernels/" + ctx.kernel)
    res.eq("GET while alive", r.status, 200)


def case_upload_download(ctx, res):
    if not need_kernel(ctx, res):
        return
    rnd = random.Random(22)
    up = bytes(rnd.getrandbits(8) for _ in range(3 * 1024 * 1024))
    b64 = base64.b64encode(up).decode()
    code = "import base64\nopen('up.bin', 'wb').write(base64.b64decode('%s'))\nprint('ok')" % b64
    res.check(len(code) > 4 * 1000 * 1000, "the upload message is over 4 MB (%d)" % len(code))
    o = run_code(ctx, ctx.kernel, code, timeout=120)
    res.eq("upload", "".join(o.stdout).strip(), "ok")
    o = run_code(ctx, ctx.kernel, "import hashlib\nprint(hashlib.sha256(open('up.bin','rb').read()).hexdigest())")
    res.eq("uploaded bytes", "".join(o.stdout).strip(), hashlib.sha256(up).hexdigest())
    # 10 MiB down in one print: a ~14 MB stream message
    o = run_code(ctx, ctx.kernel,
                 "import base64, random\ndata = random.Random(7).randbytes(10 * 1024 * 1024)\n"
                 "print(base64.b64encode(data).decode())", timeout=120)
    got = base64.b64decode("".join(o.stdout).strip())
    res.eq("downloaded bytes", hashlib.sha256(got).hexdigest(),
           hashlib.sha256(random.Random(7).randbytes(10 * 1024 * 1024)).hexdigest())


def case_interrupt(ctx, res):
    if not need_kernel(ctx, res):
        return
    ws = ctx.ws(ctx.kernel)
    try:
        msg_id, text = execute_request("while True:\n    pass")
        ws.send(text)
        out = Outcome()
        try:
            collect(ws, msg_id, out, time.monotonic() + 3.0)
            res.fail("the busy loop ended by itself")
        except websocket.WebSocketTimeoutException:
            pass
        r = L.http(ctx.d.port, "POST", "/api/kernels/%s/interrupt" % ctx.kernel, ctx.auth(), b"")
        res.check(r.status in (200, 204), "interrupt with an empty body: %s" % r.brief())
        collect(ws, msg_id, out, time.monotonic() + 10.0)
        res.eq("interrupted reply", (out.reply or {}).get("status"), "error")
        res.eq("KeyboardInterrupt", [e.get("ename") for e in out.errors], ["KeyboardInterrupt"])
    finally:
        ws.close()
    o = run_code(ctx, ctx.kernel, "x")
    res.eq("state kept after the interrupt", [r.get("text/plain") for r in o.results], ["41"])


def case_bad_messages(ctx, res):
    if not need_kernel(ctx, res):
        return
    ws = ctx.ws(ctx.kernel)
    try:
        ws.send("not json")
        ws.send(json.dumps({"content": {}}))
        ws.send(json.dumps({"header": {"msg_id": "b", "msg_type": "execute_request"}, "channel": "nope"}))
        msg_id, text = execute_request("print('still here')")
        ws.send(text)
        o = collect(ws, msg_id, Outcome(), time.monotonic() + 30)
        res.eq("the socket survived bad messages", "".join(o.stdout).strip(), "still here")
    finally:
        ws.close()


def case_frame_too_big(ctx, res):
    if not need_kernel(ctx, res):
        return
    ws = ctx.ws(ctx.kernel)
    try:
        # a masked binary frame announcing 1 GiB, then 4 KiB of it
        hdr = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", 1 << 30) + b"\0\0\0\0"
        ws.sock.sendall(hdr + b"\0" * 4096)
        code = None
        try:
            op, frame = ws.recv_data_frame(True)
            if op == websocket.ABNF.OPCODE_CLOSE and len(frame.data) >= 2:
                code = struct.unpack(">H", frame.data[:2])[0]
        except websocket.WebSocketConnectionClosedException:
            pass
        res.eq("close code", code, 1009)
    finally:
        ws.close()
    o = run_code(ctx, ctx.kernel, "print(1)")
    res.eq("the kernel serves other sockets", "".join(o.stdout).strip(), "1")


def case_upgrade_refused(ctx, res):
    if not need_kernel(ctx, res):
        return
    r = ctx.call("GET", "/api/kernels/%s/channels" % ctx.kernel)
    res.eq("no upgrade headers", r.status, 400)
    res.check("message" in (r.json() or {}), "400 body is JSON: %s" % r.brief())
    try:
        websocket.create_connection(ctx.ws_url(ctx.kernel), timeout=10).close()
        res.fail("a WebSocket without a token was accepted")
    except websocket.WebSocketBadStatusException as e:
        res.eq("no token", e.status_code, 401)
    ws = websocket.create_connection(ctx.ws_url(ctx.kernel, "?token=" + ctx.d.token), timeout=10)
    ws.close()


def case_execute_and_ctl(ctx, res):
    """Ours beside the Kernel Gateway's: POST /api/kernels/{id}/execute answers one execution as
    one JSON document on the same stateful kernel, and sandbox-runnerctl kernel drives it."""
    if not need_kernel(ctx, res):
        return
    path = "/api/kernels/%s/execute" % ctx.kernel
    r = ctx.call("POST", path, {"code": "kx = 41\nprint('out'); import sys; print('err', file=sys.stderr); kx"},
                 timeout=60)
    j = r.json() or {}
    res.eq("execute: status", (r.status, j.get("status")), (200, "ok"))
    res.eq("execute: stdout, stderr", (j.get("stdout"), j.get("stderr")), ("out\n", "err\n"))
    res.eq("execute: the result", [o.get("data", {}).get("text/plain") for o in j.get("outputs", [])], ["41"])
    res.eq("execute: no error, not truncated", (j.get("error"), j.get("truncated"), j.get("timedOut")),
           (None, False, False))
    r = ctx.call("POST", path, {"code": "1/0"}, timeout=60)
    j = r.json() or {}
    res.eq("execute 1/0: status, ename", (r.status, j.get("status"), (j.get("error") or {}).get("ename")),
           (200, "error", "ZeroDivisionError"))
    for body, what in (({}, "no code"), ({"code": 1}, "code not a string"), ({"code": "1", "x": 1}, "unknown field"),
                       ({"code": "1", "timeoutMs": 0}, "timeoutMs 0")):
        r = ctx.call("POST", path, body)
        res.eq("execute, %s: 400 with a message" % what, (r.status, bool((r.json() or {}).get("message"))),
               (400, True))
    r = ctx.call("POST", "/api/kernels/%s/execute" % uuid.uuid4(), {"code": "1"})
    res.eq("execute on an unknown kernel", r.status, 404)
    # A deadline: interrupted, what came is answered, the kernel stays usable.
    r = ctx.call("POST", path, {"code": "import time\nprint('before', flush=True)\ntime.sleep(60)",
                                "timeoutMs": 1500}, timeout=60)
    j = r.json() or {}
    res.eq("execute past timeoutMs: timedOut, status, stdout", (r.status, j.get("timedOut"), j.get("status"),
                                                                j.get("stdout")), (200, True, "error", "before\n"))
    # The CLI: the same kernel (its state), through the token file.
    env = dict(os.environ, SANDBOX_RUNNER_URL="http://127.0.0.1:%d" % ctx.d.port)
    base = [ctx.ctl, "--token-file", os.path.join(ctx.d.creds, "api-token")]
    p = subprocess.run(base + ["kernel", "exec", ctx.kernel, "print(kx + 1)"], env=env, capture_output=True,
                       text=True, timeout=60)
    res.eq("sandbox-runnerctl kernel exec: exit, stdout", (p.returncode, p.stdout), (0, "42\n"))
    p = subprocess.run(base + ["kernel", "exec", ctx.kernel, "-"], input="raise KeyError('k')\n", env=env,
                       capture_output=True, text=True, timeout=60)
    res.eq("kernel exec of a raise: exit 1", p.returncode, 1)
    res.check("KeyError" in p.stderr, "the exception is named on stderr: %r" % p.stderr[-300:])
    p = subprocess.run(base + ["kernel", "list"], env=env, capture_output=True, text=True, timeout=30)
    res.check(p.returncode == 0 and ctx.kernel in p.stdout, "kernel list names the kernel: %r" % p.stdout[-500:])
    p = subprocess.run(base + ["--json", "kernel", "list"], env=env, capture_output=True, text=True, timeout=30)
    ids = [k.get("id") for k in json.loads(p.stdout or "[]")] if p.returncode == 0 else []
    res.check(ctx.kernel in ids, "kernel list --json has the id: %r" % ids)


def case_delete(ctx, res):
    if not need_kernel(ctx, res):
        return
    ws = ctx.ws(ctx.kernel)
    r = ctx.call("DELETE", "/api/kernels/" + ctx.kernel)
    res.eq("DELETE", r.status, 204)
    try:
        ws.settimeout(10)
        while True:
            ws.recv()
    except websocket.WebSocketConnectionClosedException:
        pass
    except websocket.WebSocketTimeoutException:
        res.fail("the kernel's WebSocket stayed open after DELETE")
    ws.close()
    res.eq("GET after DELETE", ctx.call("GET", "/api/kernels/" + ctx.kernel).status, 404)
    res.eq("DELETE again", ctx.call("DELETE", "/api/kernels/" + ctx.kernel).status, 404)
    try:
        ctx.ws(ctx.kernel, timeout=10).close()
        res.fail("a deleted kernel's WebSocket opened")
    except websocket.WebSocketBadStatusException as e:
        res.eq("WebSocket of a deleted kernel", e.status_code, 404)
    # Kernels live in scopes of their own (not the daemon's children): any process naming the
    # kernel's id (its connection file) is a leftover.
    time.sleep(0.5)
    left = [p for p in L.all_pids() if any(ctx.kernel.encode() in a for a in (L.cmdline(p) or []))]
    res.eq("kernel processes left", left, [])
    ctx.kernel = None


def case_restart_interrupted(ctx, res):
    """Started by hand (no systemd scope to outlive it): a restart ends the kernel as interrupted,
    and the next daemon lists it so (docs/kernels.md, "Daemon restarts")."""
    r = ctx.call("POST", "/api/kernels", {"name": "python3"})
    if not res.check(r.status == 201, "POST: %s" % r.brief()):
        return
    kid = r.json()["id"]
    o = run_code(ctx, kid, "y = 1")
    res.check(o.reply and o.reply.get("status") == "ok", "y = 1: %r" % o.reply)
    rc, took = ctx.d.terminate(grace=15)
    res.note("SIGTERM: exit status %r after %.2fs" % (rc, took))
    res.eq("exit status after SIGTERM", rc, 0)
    time.sleep(0.5)
    left = [p for p in L.all_pids() if any(kid.encode() in a for a in (L.cmdline(p) or []))]
    res.eq("kernel processes left after the daemon stopped", left, [])
    try:
        ctx.d.start()
    except (L.DaemonError, OSError) as e:
        res.fail("restart failed: %s" % e)
        return
    r = ctx.call("GET", "/api/kernels/" + kid)
    res.eq("GET after the restart", r.status, 200)
    m = r.json() or {}
    res.eq("state after the restart", (m.get("execution_state"), m.get("reason")), ("dead", "interrupted"))
    listed = [k.get("id") for k in (ctx.call("GET", "/api/kernels").json() or [])]
    res.check(kid in listed, "the interrupted kernel is listed: %r" % listed)
    kdir = os.path.join(ctx.d.run, "kernels")
    res.eq("its directory and record", sorted(n for n in os.listdir(kdir) if n.startswith(kid)), [])
    res.eq("DELETE", ctx.call("DELETE", "/api/kernels/" + kid).status, 204)
    res.eq("GET after DELETE", ctx.call("GET", "/api/kernels/" + kid).status, 404)


CASES = [
    ("auth", case_auth),
    ("kernelspecs", case_kernelspecs),
    ("create", case_create),
    ("state-kept", case_state_kept),
    ("upload-download", case_upload_download),
    ("interrupt", case_interrupt),
    ("bad-messages", case_bad_messages),
    ("frame-too-big", case_frame_too_big),
    ("upgrade-refused", case_upgrade_refused),
    ("execute-and-ctl", case_execute_and_ctl),
    ("delete", case_delete),
    ("restart-interrupted", case_restart_interrupted),
]



# ---- the main() of every kernel test ------------------------------------------------------------

def test_main(doc, cases, budget, make_ctx, config=None, always=(), add_args=None, setup=None,
              kernels_of=None, after_case=None, may_stop=(), health_chars=500):
    """Options (--daemon, --verbose, --keep-tmp, --run-as, --only, and add_args(ap)'s), the cases
    named by --only (and those in @always), a daemon with @config (default CONFIG: kernels on),
    setup(args, cleanups) first (may return another configuration; it may re-run the script in
    namespaces), ctx = make_ctx(d, args) (an exception fails every case), each case a TAP point
    (a dead daemon fails it unless the case is in @may_stop; after_case(ctx, res) may add
    checks), then the kernels of kernels_of(ctx) deleted, the daemon stopped, its log tail on a
    failure, and the cleanups run (last first)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", help="the daemon to start by hand (or --service)")
    ap.add_argument("--service", metavar="UNIT", help="test the running service UNIT instead (the systemd box; "
                    "port 4311, credentials from /etc/credstore)")
    ap.add_argument("--service-canary", default="", help="the SANDBOX_TEST_SECRET value given to --service")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    ap.add_argument("--only", help="run only cases whose name contains this")
    if add_args:
        add_args(ap)
    args = ap.parse_args()
    if not args.daemon and not args.service:
        ap.error("--daemon or --service is needed")

    cleanups = []
    config = (setup(args, cleanups) if setup else None) or config or CONFIG
    cases = [(n, f) for n, f in (cases(args) if callable(cases) else cases)
             if not args.only or args.only in n or n in always]
    out = sys.stdout
    tap = L.Tap(out)
    out.write("1..%d\n" % len(cases))
    if args.service:
        d = L.ServiceDaemon(args.service, 4311, args.service_canary)
    else:
        d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=T.resolve_run_as(args.run_as), config=config)
    ctx = None
    t0 = time.monotonic()
    try:
        if L.start_or_fail_all(d, cases, tap, Result, health_chars) is None:
            return 1
        try:
            ctx = make_ctx(d, args)
        except Exception:                                      # noqa: BLE001
            why = traceback.format_exc()
            for name, _ in cases:
                r = Result(name)
                r.fail("the test's set-up failed:\n" + why)
                tap.emit(r)
            return 1
        for name, fn in cases:
            res = Result(name)
            if time.monotonic() - t0 > budget:
                res.fail("not run: the time budget is exhausted")
            else:
                try:
                    fn(ctx, res)
                except Exception:                              # noqa: BLE001
                    res.fail("test error:\n" + traceback.format_exc())
                if name not in may_stop and not d.alive():
                    res.fail("the daemon died; log tail:\n%s" % d.log_tail(2000))
                elif after_case:
                    after_case(ctx, res)
            tap.emit(res, verbose=args.verbose)
    finally:
        if ctx is not None and d.alive():
            for kid in list(kernels_of(ctx) if kernels_of else ()):
                try:
                    L.http(d.port, "DELETE", "/api/kernels/" + kid, [("Authorization", "token " + d.token)], b"")
                except (OSError, L.HttpError):
                    pass
        if d.alive():
            rc, took = d.terminate(grace=10)
            out.write("# daemon stopped: exit status %r after %.2fs\n" % (rc, took))
        if tap.failed:
            L.write_log_tail(d, out)
        d.cleanup()
        for fn in reversed(cleanups):
            fn()
    return tap.summary(len(cases), time.monotonic() - t0)


def make_ctx(d, args):
    ctx = Ctx(d)
    ctx.ctl = args.ctl or os.path.join(os.path.dirname(os.path.abspath(args.daemon)), "ctl", "sandbox-runnerctl")
    return ctx


def main():
    return test_main(__doc__, CASES, BUDGET, make_ctx,
                     add_args=lambda ap: ap.add_argument("--ctl", help="sandbox-runnerctl (default: beside the "
                                                         "daemon, src/ctl/)"),
                     kernels_of=lambda ctx: [ctx.kernel] if ctx.kernel else [])


if __name__ == "__main__":
    sys.exit(main())
