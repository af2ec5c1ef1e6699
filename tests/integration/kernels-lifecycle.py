#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lifecycle of Jupyter kernels over HTTP (issue 22), against a daemon with [Kernels]
Enable=yes and MaxKernels=3 and real sandboxed ipykernels:

- interrupt: `while True: pass`, then POST .../interrupt with an empty body (no Content-Type, as
  DocsGPT sends it): the execution ends with KeyboardInterrupt and the kernel answers the next one;
- restart: POST .../restart (empty body) keeps the id and the workspace (a file written there is
  still there) and clears the state (a variable is gone);
- workspace-busy: POST /execute (ours) on a live kernel's workspace gets 409 workspace_busy at once,
  not a wait for the lease; after DELETE of the kernel the same request runs and sees its files;
- cap: 20 POSTs racing from threads: exactly 3 get 201, the 17 others 403 "Resource Limit", never
  more than 3 kernels listed;
- oom: a kernel started with limits {memoryBytes} that allocates in a loop ends `dead` with reason
  `oom` (GET model); its WebSocket gets `status: dead` and then a close;
- never-ready: a kernel whose own process cannot start. No `env` a client may pass does that:
  only KERNEL_* variables reach the kernel and ipykernel reads none of them. The real way is the
  request's limits: {tasks: 1} leaves ipykernel no room for its threads (heartbeat, iopub, control),
  so its process fails at start. It ends `dead` with reason `crashed`, and no process and no
  socket directory of it is left.

Each case is one TAP point.

    kernels-lifecycle.py --daemon build/src/sandbox-runnerd [--run-as self] [--only NAME] [--verbose]"""

import json
import os
import threading
import time
import uuid

import websocket        # Debian's python3-websocket (websocket-client)

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import kernels as K             # noqa: E402

BUDGET = 480
CAP = 3
CONFIG = K.CONFIG + "MaxKernels=%d\n" % CAP


class Ctx(K.Ctx):
    def __init__(self, d):
        super().__init__(d)
        self.workspace = None
        self.cwd = None
        self.all = set()               # every kernel made here: deleted at the end

    def create(self, body=None, timeout=30.0):
        r = self.call("POST", "/api/kernels", body if body is not None else {"name": "python3"}, timeout=timeout)
        kid = (r.json() or {}).get("id") if r.status == 201 else None
        if kid:
            self.all.add(kid)
        return r, kid

    def model(self, kid):
        r = self.call("GET", "/api/kernels/" + kid)
        return r.json() or {} if r.status == 200 else {"_status": r.status}

    def wait_state(self, kid, states, limit=60.0):
        deadline, j = time.monotonic() + limit, {}
        while time.monotonic() < deadline:
            j = self.model(kid)
            if j.get("execution_state") in states or "_status" in j:
                return j
            time.sleep(0.2)
        return j

    def delete(self, kid):
        r = self.call("DELETE", "/api/kernels/" + kid)
        self.all.discard(kid)
        return r

    def execute(self, body):
        """Our signed POST /execute; (Response, seconds)."""
        raw = json.dumps(body).encode()
        ts = int(time.time())
        h = [("Authorization", "Bearer " + self.d.token), ("Content-Type", "application/json"),
             ("X-Sandbox-Timestamp", str(ts)),
             ("X-Sandbox-Signature", L.signature(self.d.key, ts, "POST", "/execute", raw))]
        t0 = time.monotonic()
        r = L.http(self.d.port, "POST", "/execute", h, raw, timeout=60)
        return r, time.monotonic() - t0


def leftovers(kid):
    return [p for p in L.all_pids() if any(kid.encode() in a for a in (L.cmdline(p) or []))]


def errors(o):
    return [e.get("ename") for e in o.errors]


def need_kernel(ctx, res):
    if ctx.kernel is None:
        res.fail("no kernel (the interrupt case, which makes it, failed)")
        return False
    return True


# ---- cases ----------------------------------------------------------------------------------

def case_interrupt(ctx, res):
    r, kid = ctx.create()
    if not res.eq("POST /api/kernels", r.status, 201):
        res.note(r.brief())
        return
    ctx.kernel = kid
    j = ctx.wait_state(kid, ("idle", "dead"))
    res.eq("ready", j.get("execution_state"), "idle")
    ctx.workspace = j.get("workspaceId")
    ws = ctx.ws(kid)
    try:
        msg_id, text = K.execute_request("while True:\n    pass")
        ws.send(text)
        res.eq("busy in the loop", ctx.wait_state(kid, ("busy",), 20).get("execution_state"), "busy")
        # DocsGPT's interrupt: no body at all, no Content-Type.
        r = L.http(ctx.d.port, "POST", "/api/kernels/%s/interrupt" % kid, ctx.auth(), b"")
        res.eq("interrupt with an empty body", r.status, 204)
        out = K.collect(ws, msg_id, K.Outcome(), time.monotonic() + 20.0)
        res.eq("the loop's reply", (out.reply or {}).get("status"), "error")
        res.eq("KeyboardInterrupt", errors(out), ["KeyboardInterrupt"])
    finally:
        ws.close()
    o = K.run_code(ctx, kid, "print('answered')")
    res.eq("the next execution is answered", ((o.reply or {}).get("status"), "".join(o.stdout)),
           ("ok", "answered\n"))


def case_restart(ctx, res):
    if not need_kernel(ctx, res):
        return
    o = K.run_code(ctx, ctx.kernel, "import os\nv = 5\nopen('keep.txt', 'w').write('kept')\nprint(os.getcwd())")
    res.eq("before: ok", (o.reply or {}).get("status"), "ok")
    ctx.cwd = "".join(o.stdout).strip()
    r = L.http(ctx.d.port, "POST", "/api/kernels/%s/restart" % ctx.kernel, ctx.auth(), b"")
    j = r.json() or {}
    res.eq("POST .../restart with an empty body", r.status, 200)
    res.eq("the same id", j.get("id"), ctx.kernel)
    res.check(j.get("execution_state") in ("restarting", "starting", "idle"), "state after restart: %r" % j)
    j = ctx.wait_state(ctx.kernel, ("idle", "dead"))
    res.eq("idle again", j.get("execution_state"), "idle")
    res.eq("the same workspace", j.get("workspaceId"), ctx.workspace)
    o = K.run_code(ctx, ctx.kernel, "v")
    res.eq("the variable is gone", errors(o), ["NameError"])
    o = K.run_code(ctx, ctx.kernel, "import os\nprint(os.getcwd())\nprint(open(%r).read())" %
                   os.path.join(ctx.cwd, "keep.txt"))
    res.eq("the workspace's file is kept, same cwd", "".join(o.stdout), "%s\nkept\n" % ctx.cwd)


def case_workspace_busy(ctx, res):
    if not need_kernel(ctx, res):
        return
    body = {"executionId": "kcl-" + uuid.uuid4().hex[:12], "workspaceId": ctx.workspace,
            "argv": ["cat", "keep.txt"]}
    r, took = ctx.execute(body)
    res.eq("/execute on the kernel's workspace", (r.status, r.error_code()), (409, "workspace_busy"))
    res.check("message" in (r.json() or {}) and ctx.kernel in (r.json() or {}).get("message", ""),
              "the message names the kernel: %s" % r.brief())
    res.note("answered in %.2f s" % took)
    res.eq("the kernel is untouched", K.run_code(ctx, ctx.kernel, "print(2)").stdout, ["2\n"])
    res.eq("DELETE the kernel", ctx.delete(ctx.kernel).status, 204)
    ctx.kernel = None
    body["executionId"] = "kcl-" + uuid.uuid4().hex[:12]
    r, took = ctx.execute(body)
    j = r.json() or {}
    res.eq("/execute after DELETE", (r.status, j.get("exitCode"), j.get("stdout")), (200, 0, "kept"))


def case_cap(ctx, res):
    """20 racing POSTs against the cap. By hand the cap is CAP and no kernel lives before; against
    a service (--service) the cap is its /health's and the kernels it already has count: the
    race gets the room that is left."""
    live = [k for k in (ctx.call("GET", "/api/kernels").json() or []) if k.get("execution_state") != "dead"]
    cap = ((ctx.call("GET", "/health").json() or {}).get("kernels") or {}).get("cap")
    if isinstance(ctx.d, L.ServiceDaemon):
        res.note("the service's cap %r, %d kernel(s) live before the race" % (cap, len(live)))
    else:
        res.eq("no kernel lives before the race", live, [])
        res.eq("/health.kernels.cap", cap, CAP)
    if not res.check(isinstance(cap, int) and cap - len(live) >= 2, "no room for a race under cap %r" % cap):
        return
    room = cap - len(live)
    barrier = threading.Barrier(20)
    answers = [None] * 20
    seen_max = [0]
    stop = threading.Event()

    def post(i):
        barrier.wait()
        try:
            answers[i] = ctx.create(timeout=60.0)[0]
        except (OSError, L.HttpError) as e:
            answers[i] = e

    def watch():
        while not stop.is_set():
            try:
                ks = ctx.call("GET", "/api/kernels").json() or []
                seen_max[0] = max(seen_max[0], len([k for k in ks if k.get("execution_state") != "dead"]))
            except (OSError, L.HttpError):
                pass
            time.sleep(0.05)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(20)]
    w = threading.Thread(target=watch)
    w.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    time.sleep(1.0)
    stop.set()
    w.join(10)
    statuses = [a.status if isinstance(a, L.Response) else repr(a) for a in answers]
    res.eq("201s", statuses.count(201), room)
    res.eq("403s", statuses.count(403), 20 - room)
    msgs = [(a.json() or {}).get("message", "") for a in answers if isinstance(a, L.Response) and a.status == 403]
    res.check(all("Resource Limit" in m for m in msgs), "every 403 says Resource Limit: %r" % msgs[:2])
    res.check(seen_max[0] <= cap, "never more than %d kernels listed (saw %d)" % (cap, seen_max[0]))
    ks = [k for k in (ctx.call("GET", "/api/kernels").json() or []) if k.get("execution_state") != "dead"]
    res.eq("live kernels listed after the race", len(ks), cap)
    for kid in list(ctx.all):
        res.eq("DELETE %s" % kid, ctx.delete(kid).status, 204)
    r, kid = ctx.create()
    res.eq("a POST after the deletes", r.status, 201)
    if kid:
        res.eq("... and its DELETE", ctx.delete(kid).status, 204)


def case_oom(ctx, res):
    r, kid = ctx.create({"name": "python3", "limits": {"memoryBytes": 128 << 20}})
    if not res.eq("POST with limits.memoryBytes", r.status, 201):
        res.note(r.brief())
        return
    res.eq("the limit in the model", ((r.json() or {}).get("limits") or {}).get("memoryBytes"), 128 << 20)
    res.eq("ready", ctx.wait_state(kid, ("idle", "dead")).get("execution_state"), "idle")
    ws = ctx.ws(kid, timeout=60)
    states, closed = [], False
    try:
        msg_id, text = K.execute_request("chunks = []\nwhile True:\n    b = bytearray(8 << 20)\n"
                                         "    b[::4096] = b'x' * len(b[::4096])\n    chunks.append(b)")
        ws.send(text)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ws.settimeout(max(0.1, deadline - time.monotonic()))
            op, frame = ws.recv_data_frame(True)
            if op == websocket.ABNF.OPCODE_CLOSE:
                closed = True
                break
            m = json.loads(frame.data)
            if m.get("msg_type") == "status":
                states.append(m["content"].get("execution_state"))
    except websocket.WebSocketConnectionClosedException:
        closed = True
    finally:
        ws.close()
    res.check(states[-1:] == ["dead"], "status: dead is the last status on the WebSocket: %r" % states)
    res.check(closed, "the WebSocket was closed")
    j = ctx.wait_state(kid, ("dead",), 20)
    res.eq("the model", (j.get("execution_state"), j.get("reason")), ("dead", "oom"))
    res.eq("no process left", leftovers(kid), [])
    res.eq("DELETE of the dead kernel", ctx.delete(kid).status, 204)


def case_never_ready(ctx, res):
    r, kid = ctx.create({"name": "python3", "limits": {"tasks": 1}})
    if not res.eq("POST with limits.tasks 1", r.status, 201):
        res.note(r.brief())
        return
    # KERNEL_READY_TIMEOUT_USEC (60 s) bounds a kernel that hangs; this one fails at once.
    j = ctx.wait_state(kid, ("dead", "idle"), 90)
    res.eq("the model", (j.get("execution_state"), j.get("reason")), ("dead", "crashed"))
    time.sleep(0.5)
    res.eq("no process left", leftovers(kid), [])
    res.check(not os.path.exists(os.path.join(ctx.d.run, "kernels", kid)), "its socket directory is gone")
    try:
        ctx.ws(kid, timeout=10).close()
        res.fail("the WebSocket of a dead kernel opened")
    except websocket.WebSocketBadStatusException as e:
        res.eq("WebSocket of the dead kernel", e.status_code, 404)
    res.eq("DELETE", ctx.delete(kid).status, 204)
    res.eq("GET after it", ctx.call("GET", "/api/kernels/" + kid).status, 404)


CASES = [
    ("interrupt", case_interrupt),
    ("restart", case_restart),
    ("workspace-busy", case_workspace_busy),
    ("cap", case_cap),
    ("oom", case_oom),
    ("never-ready", case_never_ready),
]



def main():
    return K.test_main(__doc__, CASES, BUDGET, lambda d, args: Ctx(d), config=CONFIG, health_chars=300,
                       kernels_of=lambda ctx: list(ctx.all))


if __name__ == "__main__":
    sys.exit(main())
