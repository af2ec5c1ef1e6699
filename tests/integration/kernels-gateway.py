#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real jupyter_server in front of the runner (issue 22): Debian's python3-jupyter-server 1.23
started as

  /usr/bin/python3 -m jupyter_server --gateway-url=http://127.0.0.1:PORT --GatewayClient.auth_token=T

with HOME and the JUPYTER_* directories in a temporary directory, and our daemon with
[Kernels] Enable=yes behind it. Everything goes through jupyter_server's own REST API and its own
WebSocket (which proxies to ours with the legacy protocol and no subprotocol): the kernelspecs,
a kernel created, listed (jupyter_server polls GET /api/kernels and parses last_activity as
%Y-%m-%dT%H:%M:%S.%fZ), executed on a new WebSocket each time (state kept), interrupted,
restarted (state cleared, id kept), deleted (gone on both sides, no process left). Each case is
one TAP point.

    kernels-gateway.py --daemon build/src/sandbox-runnerd [--run-as self] [--only NAME] [--verbose]"""

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import websocket        # Debian's python3-websocket (websocket-client)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import kernels as K             # noqa: E402

BUDGET = 420
JUPYTER_PYTHON = "/usr/bin/python3"     # Debian's, with python3-jupyter-server


class JupyterServer:
    """jupyter_server 1.23 as a gateway client of the daemon on @gateway_port, in a directory
    of its own (HOME, config, data, runtime), on a loopback port of its own."""

    def __init__(self, gateway_port, gateway_token):
        self.tmp = tempfile.mkdtemp(prefix="kernels-gateway.")
        self.token = secrets.token_hex(24)
        self.port = None
        self.proc = None
        self.log_path = os.path.join(self.tmp, "jupyter-server.log")
        self.gateway_port = gateway_port
        self.gateway_token = gateway_token

    def env(self):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.tmp, "LANG": "C.UTF-8"}
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
            env[name] = os.path.join(self.tmp, name.lower())
            os.makedirs(env[name], exist_ok=True)
        return env

    def start(self, wait=60.0):
        last = ""
        for _ in range(3):
            self.port = L.Daemon._pick_port()
            argv = [JUPYTER_PYTHON, "-m", "jupyter_server",
                    "--gateway-url=http://127.0.0.1:%d" % self.gateway_port,
                    "--GatewayClient.auth_token=" + self.gateway_token,
                    "--ServerApp.ip=127.0.0.1", "--ServerApp.port=%d" % self.port,
                    "--ServerApp.port_retries=0", "--ServerApp.token=" + self.token,
                    "--ServerApp.open_browser=False", "--ServerApp.root_dir=" + self.tmp,
                    "--ServerApp.log_level=DEBUG"]
            if os.geteuid() == 0:
                argv.append("--allow-root")
            with open(self.log_path, "ab") as logf:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                             env=self.env(), cwd=self.tmp, close_fds=True)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    r = self.call("GET", "/api/status", timeout=2.0)
                    if r.status == 200:
                        return
                except (OSError, L.HttpError):
                    pass
                time.sleep(0.2)
            last = self.log_tail(1500)
            self.stop()
            if "already in use" not in last:
                break
        raise RuntimeError("jupyter_server did not start; log tail:\n" + last)

    def auth(self):
        return [("Authorization", "token " + self.token)]

    def call(self, method, path, body=None, timeout=45.0):
        h = self.auth()
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            h.append(("Content-Type", "application/json"))
        return L.http(self.port, method, path, h, data, timeout=timeout)

    def ws(self, kid, timeout=60.0):
        """jupyter_server's own WebSocket of kernel @kid (it proxies to the gateway's)."""
        url = "ws://127.0.0.1:%d/api/kernels/%s/channels?session_id=%s" % (self.port, kid, uuid.uuid4().hex)
        return websocket.create_connection(url, timeout=timeout, header=["Authorization: token " + self.token])

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()        # by its pid: the process this test started
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Ctx:
    def __init__(self, d, js):
        self.d = d
        self.js = js
        self.kernel = None

    def daemon(self, method, path, body=None, timeout=10.0):
        h = [("Authorization", "token " + self.d.token)]
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            h.append(("Content-Type", "application/json"))
        return L.http(self.d.port, method, path, h, data, timeout=timeout)


def kernel_info_request():
    msg_id = uuid.uuid4().hex
    return msg_id, json.dumps({
        "header": {"msg_id": msg_id, "username": "test", "session": K.SESSION,
                   "msg_type": "kernel_info_request", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "content": {}, "channel": "shell", "buffers": [],
    })


def open_ws(ctx, timeout=60.0):
    """jupyter_server's WebSocket, once it forwards: jupyter_server 1.23 drops what a client sends
    before its own connection to the gateway is up (GatewayWebSocketClient.on_message waits on a
    future that _connect() replaces), so a client nudges with kernel_info_request until one is
    answered, as JupyterLab does."""
    ws = ctx.js.ws(ctx.kernel, timeout=timeout)
    deadline = time.monotonic() + timeout
    sent = set()
    try:
        while time.monotonic() < deadline:
            msg_id, text = kernel_info_request()
            sent.add(msg_id)
            ws.send(text)
            ws.settimeout(0.5)
            try:
                while True:
                    m = json.loads(ws.recv())
                    if (m.get("msg_type") == "kernel_info_reply" and
                            (m.get("parent_header") or {}).get("msg_id") in sent):
                        ws.settimeout(timeout)
                        return ws
            except websocket.WebSocketTimeoutException:
                pass
        raise TimeoutError("no kernel_info_reply through jupyter_server within %.0f s" % timeout)
    except BaseException:
        ws.close()
        raise


def run_code(ctx, code, timeout=60.0):
    """One execution on a new WebSocket of jupyter_server's, closed afterwards; sent again when
    ipykernel aborted it right after an error (kernels.py's run_code says why)."""
    for attempt in range(3):
        ws = open_ws(ctx, timeout=timeout)
        try:
            msg_id, text = K.execute_request(code)
            ws.send(text)
            out = K.collect(ws, msg_id, K.Outcome(), time.monotonic() + timeout)
        finally:
            ws.close()
        if (out.reply or {}).get("status") != "aborted":
            break
        time.sleep(0.2)
    return out


def plain(o):
    return [r.get("text/plain") for r in o.results]


def need_kernel(ctx, res):
    if ctx.kernel is None:
        res.fail("no kernel (the create case failed)")
        return False
    return True


def wait_state(ctx, states, limit=60.0):
    """The kernel's model from the daemon once its execution_state is among @states."""
    deadline, j = time.monotonic() + limit, {}
    while time.monotonic() < deadline:
        r = ctx.daemon("GET", "/api/kernels/" + ctx.kernel)
        j = r.json() or {}
        if r.status == 200 and j.get("execution_state") in states:
            return j
        time.sleep(0.2)
    return j


# ---- cases ----------------------------------------------------------------------------------

def case_kernelspecs(ctx, res):
    r = ctx.js.call("GET", "/api/kernelspecs")
    res.eq("jupyter_server GET /api/kernelspecs", r.status, 200)
    j = r.json() or {}
    specs = j.get("kernelspecs", {})
    res.check("python3" in specs, "python3 comes through jupyter_server: %s" % r.brief())
    res.eq("its language", ((specs.get("python3") or {}).get("spec") or {}).get("language"), "python")
    r = ctx.js.call("GET", "/api/kernelspecs/python3")
    res.eq("one spec through jupyter_server", (r.status, (r.json() or {}).get("name")), (200, "python3"))


def case_create(ctx, res):
    r = ctx.js.call("POST", "/api/kernels", {"name": "python3"})
    if not res.eq("jupyter_server POST /api/kernels", r.status, 201):
        res.note(r.brief())
        return
    kid = (r.json() or {}).get("id", "")
    res.check(str(uuid.UUID(kid)) == kid, "the id is a UUID: %r" % kid)
    ctx.kernel = kid
    # The same kernel on our side: jupyter_server does not make ids of its own.
    r = ctx.daemon("GET", "/api/kernels/" + kid)
    res.eq("the daemon knows the id", r.status, 200)
    j = wait_state(ctx, ("idle",))
    res.eq("the kernel becomes idle", j.get("execution_state"), "idle")
    res.check(j.get("workspaceId"), "the model names its workspace: %r" % j)
    ctx.workspace = j.get("workspaceId")


def case_list(ctx, res):
    if not need_kernel(ctx, res):
        return
    r = ctx.js.call("GET", "/api/kernels")
    res.eq("jupyter_server GET /api/kernels", r.status, 200)
    models = {k.get("id"): k for k in (r.json() or [])}
    res.check(ctx.kernel in models, "the kernel is listed through jupyter_server: %s" % r.brief())
    m = models.get(ctx.kernel) or {}
    res.check(isinstance(m.get("connections"), int), "connections is an integer: %r" % m)
    res.check(m.get("execution_state") in ("idle", "busy", "starting"), "execution_state: %r" % m)
    res.check(bool(m.get("last_activity")), "last_activity parsed and given back: %r" % m)
    r = ctx.js.call("GET", "/api/kernels/" + ctx.kernel)
    res.eq("jupyter_server GET /api/kernels/{id}", (r.status, (r.json() or {}).get("id")), (200, ctx.kernel))
    log = ctx.js.log_tail(200000)
    res.check("strptime" not in log and "does not match format" not in log,
              "jupyter_server parsed last_activity without error")


def case_execute(ctx, res):
    if not need_kernel(ctx, res):
        return
    o = run_code(ctx, "x = 41\nprint('set')")
    res.eq("first execution through jupyter_server", ((o.reply or {}).get("status"), "".join(o.stdout)),
           ("ok", "set\n"))
    o = run_code(ctx, "x + 1")
    res.eq("second execution, a new WebSocket: state kept", ((o.reply or {}).get("status"), plain(o)),
           ("ok", ["42"]))
    o = run_code(ctx, "import sys\nprint('e', file=sys.stderr)\n1/0")
    res.eq("an error", ((o.reply or {}).get("status"), [e.get("ename") for e in o.errors], "".join(o.stderr)),
           ("error", ["ZeroDivisionError"], "e\n"))
    o = run_code(ctx, "x")
    res.eq("state kept after the error", plain(o), ["41"])
    r = ctx.js.call("GET", "/api/kernels/" + ctx.kernel)
    res.eq("the model after executions", r.status, 200)


def case_interrupt(ctx, res):
    if not need_kernel(ctx, res):
        return
    ws = open_ws(ctx)
    try:
        msg_id, text = K.execute_request("while True:\n    pass")
        ws.send(text)
        out = K.Outcome()
        busy = wait_state(ctx, ("busy",), 20)
        res.eq("busy in the loop", busy.get("execution_state"), "busy")
        r = ctx.js.call("POST", "/api/kernels/%s/interrupt" % ctx.kernel)
        res.eq("jupyter_server POST .../interrupt", r.status, 204)
        K.collect(ws, msg_id, out, time.monotonic() + 20.0)
        res.eq("interrupted reply", (out.reply or {}).get("status"), "error")
        res.eq("KeyboardInterrupt", [e.get("ename") for e in out.errors], ["KeyboardInterrupt"])
    finally:
        ws.close()
    o = run_code(ctx, "x")
    res.eq("state kept after the interrupt", plain(o), ["41"])


def case_restart(ctx, res):
    if not need_kernel(ctx, res):
        return
    r = ctx.js.call("POST", "/api/kernels/%s/restart" % ctx.kernel)
    res.eq("jupyter_server POST .../restart", r.status, 200)
    res.eq("the same id after the restart", (r.json() or {}).get("id"), ctx.kernel)
    j = wait_state(ctx, ("idle",))
    res.eq("idle again", j.get("execution_state"), "idle")
    res.eq("the same workspace", j.get("workspaceId"), ctx.workspace)
    o = run_code(ctx, "x")
    res.eq("x is gone after the restart", [e.get("ename") for e in o.errors], ["NameError"])
    o = run_code(ctx, "y = 7\ny * 6")
    res.eq("the restarted kernel works", plain(o), ["42"])


def case_delete(ctx, res):
    if not need_kernel(ctx, res):
        return
    r = ctx.js.call("DELETE", "/api/kernels/" + ctx.kernel)
    res.eq("jupyter_server DELETE", r.status, 204)
    res.eq("the daemon's GET after it", ctx.daemon("GET", "/api/kernels/" + ctx.kernel).status, 404)
    r = ctx.js.call("GET", "/api/kernels")
    res.check(r.status == 200 and ctx.kernel not in [k.get("id") for k in (r.json() or [])],
              "not listed by jupyter_server any more: %s" % r.brief())
    r = ctx.daemon("GET", "/api/kernels")
    res.check(r.status == 200 and ctx.kernel not in [k.get("id") for k in (r.json() or [])],
              "not listed by the daemon: %s" % r.brief())
    time.sleep(0.5)
    left = [p for p in L.all_pids() if any(ctx.kernel.encode() in a for a in (L.cmdline(p) or []))]
    res.eq("kernel processes left", left, [])
    res.check(not os.path.exists(os.path.join(ctx.d.run, "kernels", ctx.kernel)),
              "the kernel's directory is gone")
    ctx.kernel = None


CASES = [
    ("kernelspecs", case_kernelspecs),
    ("create", case_create),
    ("list", case_list),
    ("execute", case_execute),
    ("interrupt", case_interrupt),
    ("restart", case_restart),
    ("delete", case_delete),
]



def make_ctx(d, args):
    js = JupyterServer(d.port, d.token)
    try:
        js.start()
    except (RuntimeError, OSError) as e:
        js.cleanup()
        raise RuntimeError("jupyter_server did not start: %s" % e)
    sys.stdout.write("# jupyter_server pid %d on 127.0.0.1:%d\n" % (js.proc.pid, js.port))
    return Ctx(d, js)


def after_case(ctx, res):
    if ctx.js.proc.poll() is not None:
        res.fail("jupyter_server died")
    if not res.ok:
        res.note("jupyter_server log tail:\n%s" % ctx.js.log_tail(3000))


def kernels_of(ctx):
    """The kernel to delete at the end, once jupyter_server is stopped."""
    ctx.js.stop()
    ctx.js.cleanup()
    return [ctx.kernel] if ctx.kernel else []


def main():
    return K.test_main(__doc__, CASES, BUDGET, make_ctx, config=K.CONFIG, always=("create",), health_chars=300,
                       after_case=after_case, kernels_of=kernels_of)


if __name__ == "__main__":
    sys.exit(main())
