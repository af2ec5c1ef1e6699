#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""[Kernels] Prespawn= (issue 22, docs/kernels.md), end to end against real sandboxed ipykernels:
a daemon with Prespawn=2 and MaxKernels=3 keeps two kernels started and ready, hidden from every
listing; POST /api/kernels {"name": "python3"} gets one (201, execution_state idle, a fresh
kernel-<id> workspace) and the pool refills; a request asking what the pool lacks (limits, a
KERNEL_* environment) gets a cold kernel; no kernel is ever handed out twice; the cap counts the
clients' kernels only; PUT /api/network-policy drains the pool (reason deleted, workspaces
removed) and it refills; python-base's ipykernel and r-base's IRkernel as kernelspecs
python-base, ir and r-base (and POST {"environment": "r-base"}); at stop the pool's kernels end and their workspaces go. Also: the
default Python has the document libraries agents use (python3-docx, python3-openpyxl,
python3-reportlab, matplotlib).

    kernels-prespawn.py --daemon build/src/sandbox-runnerd [--run-as self] [--only NAME] [--verbose]"""

import json
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import kernels as K             # noqa: E402

import websocket                # Debian's python3-websocket  # noqa: E402

BUDGET = 560
PRESPAWN, CAP = 2, 3
# r-base (a site library with Debian's IRkernel, built in seconds) and python-base (a venv with
# Debian's ipykernel copied in, a minute or two) for the environment kernelspecs
CONFIG = L.CONFIG_TEXT.replace("Bootstrap=\n", "Bootstrap=r-base python-base\n") + """\
[Kernels]
Enable=yes
Prespawn=%d
MaxKernels=%d
""" % (PRESPAWN, CAP)


class Ctx:
    def __init__(self, d):
        self.d = d
        self.handed = []                # ids POST answered, in order
        self.live = []                  # ours to delete at the end

    def call(self, method, path, body=None, timeout=10.0, scheme="token"):
        h = [("Authorization", scheme + " " + self.d.token)]
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            h.append(("Content-Type", "application/json"))
        return L.http(self.d.port, method, path, h, data, timeout=timeout)

    def kernels_health(self):
        r = self.call("GET", "/health")
        return (r.json() or {}).get("kernels") or {}

    def wait_pool(self, n=PRESPAWN, limit=120.0):
        deadline = time.monotonic() + limit
        h = {}
        while time.monotonic() < deadline:
            h = self.kernels_health()
            if h.get("prespawned", 0) >= n:
                return h
            time.sleep(0.2)
        return h

    def pool_workspaces(self):
        """kernel-<id> workspaces of kernels no client got: the pool's (its ids are hidden)."""
        root = os.path.join(self.d.state, "workspaces")
        mine = {"kernel-" + k for k in self.handed}
        return {w for w in (os.listdir(root) if os.path.isdir(root) else [])
                if w.startswith("kernel-") and w not in mine}

    def create(self, body=None):
        r = self.call("POST", "/api/kernels", body if body is not None else {"name": "python3"}, timeout=30.0)
        j = r.json() or {} if r.status == 201 else {}
        if r.status == 201:
            self.handed.append(j["id"])
            self.live.append(j["id"])
        return r, j

    def delete(self, kid):
        r = self.call("DELETE", "/api/kernels/" + kid)
        if kid in self.live:
            self.live.remove(kid)
        return r

    def run(self, kid, code, timeout=60.0):
        """One execution on a new WebSocket: (execute_reply content, stdout text)."""
        ws = websocket.create_connection("ws://127.0.0.1:%d/api/kernels/%s/channels" % (self.d.port, kid),
                                         header=["Authorization: token " + self.d.token], timeout=timeout)
        try:
            mid = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": mid, "username": "t", "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            reply, idle, out = None, False, []
            deadline = time.monotonic() + timeout
            while not (reply is not None and idle):
                ws.settimeout(max(0.05, deadline - time.monotonic()))
                m = json.loads(ws.recv())
                if (m.get("parent_header") or {}).get("msg_id") != mid:
                    continue
                t = m.get("msg_type") or m["header"]["msg_type"]
                c = m.get("content") or {}
                if t == "stream" and c.get("name") == "stdout":
                    out.append(c.get("text", ""))
                elif t == "error":
                    out.append("ERROR %s: %s" % (c.get("ename"), c.get("evalue")))
                elif t == "execute_reply":
                    reply = c
                elif t == "status" and c.get("execution_state") == "idle":
                    idle = True
            return reply, "".join(out)
        finally:
            ws.close()


# ---- cases ----------------------------------------------------------------------------------

def case_pool_ready(ctx, res):
    h = ctx.wait_pool()
    res.eq("/health kernels.enabled", h.get("enabled"), True)
    res.eq("/health kernels.prespawned (ready)", h.get("prespawned"), PRESPAWN)
    res.eq("/health kernels.prespawn", h.get("prespawn"), PRESPAWN)
    res.eq("/health kernels.cap", h.get("cap"), CAP)
    res.eq("/health kernels.count (the clients' kernels)", h.get("count"), 0)
    r = ctx.call("GET", "/api/kernels")
    res.eq("GET /api/kernels lists no prespawned kernel", r.json(), [])
    res.eq("pool workspaces on disk", len(ctx.pool_workspaces()), PRESPAWN)


def case_hand_out(ctx, res):
    pool = ctx.pool_workspaces()
    r, j = ctx.create()
    if not res.eq("POST /api/kernels", r.status, 201):
        res.note(r.brief())
        return
    kid = j.get("id", "")
    res.eq("execution_state of a prespawned kernel", j.get("execution_state"), "idle")
    res.eq("workspaceId", j.get("workspaceId"), "kernel-" + kid)
    res.check(("kernel-" + kid) in pool, "the kernel came from the pool (%s in %s)" % (kid, sorted(pool)))
    res.eq("GET /api/kernels/{id}", ctx.call("GET", "/api/kernels/" + kid).status, 200)
    reply, out = ctx.run(kid, "import os\nx = 6 * 7\nprint(x, os.environ.get('KERNEL_ID'))")
    res.eq("execute_reply", (reply or {}).get("status"), "ok")
    res.eq("stdout", out.strip(), "42 " + kid)
    h = ctx.wait_pool()
    res.eq("the pool refilled to", h.get("prespawned"), PRESPAWN)
    res.eq("kernels.count", h.get("count"), 1)
    listed = [k.get("id") for k in (ctx.call("GET", "/api/kernels").json() or [])]
    res.eq("GET /api/kernels lists the handed-out kernel only", listed, [kid])


def case_document_libraries(ctx, res):
    r, j = ctx.create()
    if not res.eq("POST /api/kernels", r.status, 201):
        return
    code = ("import docx, openpyxl, reportlab, matplotlib\n"
            "from reportlab.pdfgen import canvas\n"
            "d = docx.Document(); d.add_paragraph('hi'); d.save('/tmp/a.docx')\n"
            "wb = openpyxl.Workbook(); wb.active['A1'] = 3; wb.save('/tmp/a.xlsx')\n"
            "c = canvas.Canvas('/tmp/a.pdf'); c.drawString(10, 10, 'hi'); c.save()\n"
            "import os\nprint(sorted(f for f in os.listdir('/tmp') if f.startswith('a.')))")
    reply, out = ctx.run(j["id"], code)
    res.eq("execute_reply", (reply or {}).get("status"), "ok")
    res.eq("documents made", out.strip(), "['a.docx', 'a.pdf', 'a.xlsx']")
    res.eq("DELETE", ctx.delete(j["id"]).status, 204)


def wait_environment(ctx, name, limit=300):
    deadline, state = time.monotonic() + limit, None
    while time.monotonic() < deadline:
        state = (ctx.call("GET", "/environments/" + name, scheme="Bearer").json() or {}).get("state")
        if state in ("ready", "failed"):
            break
        time.sleep(1)
    return state


def case_environment_kernels(ctx, res):
    if not res.eq("r-base", wait_environment(ctx, "r-base"), "ready"):
        return
    if not res.eq("python-base", wait_environment(ctx, "python-base"), "ready"):
        return
    specs = (ctx.call("GET", "/api/kernelspecs").json() or {}).get("kernelspecs") or {}
    res.check({"python3", "python-base", "r-base", "ir"} <= set(specs), "kernelspecs: %s" % sorted(specs))
    res.eq("python-base's metadata", ((specs.get("python-base") or {}).get("spec") or {}).get("metadata"),
           {"environment": "python-base"})
    r, j = ctx.create({"name": "python-base"})
    if res.eq("POST {\"name\": \"python-base\"}", r.status, 201):
        res.eq("its environment", j.get("environment"), "python-base")
        reply, out = ctx.run(j["id"], "import sys, ipykernel, numpy\nprint(sys.executable, ipykernel.__file__)", timeout=120)
        res.eq("execute_reply", (reply or {}).get("status"), "ok")
        res.check(out.startswith("/opt/science-env/bin/python3 /opt/science-env/lib/"),
                  "the environment's python and ipykernel: %r" % out)
        res.eq("DELETE", ctx.delete(j["id"]).status, 204)
    # From the command line: an environment's kernel is the kernelspec of its name.
    ctl = os.path.join(os.path.dirname(os.path.abspath(ctx.d.path)), "ctl", "sandbox-runnerctl")
    p = subprocess.run([ctl, "--token-file", os.path.join(ctx.d.creds, "api-token"), "--json",
                        "kernel", "start", "python-base"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, SANDBOX_RUNNER_URL="http://127.0.0.1:%d" % ctx.d.port))
    j = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip().startswith("{") else {}
    res.eq("sandbox-runnerctl kernel start python-base: exit, environment", (p.returncode, j.get("environment")),
           (0, "python-base"))
    if j.get("id"):
        ctx.handed.append(j["id"])      # its workspace is no pool's
        res.eq("its DELETE", ctx.delete(j["id"]).status, 204)
    res.eq("ir's language", ((specs.get("ir") or {}).get("spec") or {}).get("language"), "R")
    res.eq("GET /api/kernelspecs/ir", ctx.call("GET", "/api/kernelspecs/ir").status, 200)
    pool = ctx.pool_workspaces()
    for body, name in (({"name": "ir"}, "ir"), ({"environment": "r-base"}, "r-base")):
        r, j = ctx.create(body)
        if not res.eq("POST %s" % json.dumps(body), r.status, 201):
            res.note(r.brief())
            continue
        res.eq("its name", j.get("name"), name)
        res.eq("its environment", j.get("environment"), "r-base")
        res.check(("kernel-" + j["id"]) not in pool, "not a prespawned kernel")
        reply, out = ctx.run(j["id"], "x <- 6 * 7\ncat(x, R.home(), sep = ' ')", timeout=120)
        res.eq("execute_reply", (reply or {}).get("status"), "ok")
        res.eq("R answers from the environment", out.strip().split(" ")[0], "42")
        res.eq("DELETE", ctx.delete(j["id"]).status, 204)
    for body in ({"name": "ir", "environment": "python-base"}, {"environment": "no-such-env"},
                 {"name": "no-such-spec"}, {"environment": 7}):
        r, _ = ctx.create(body)
        res.eq("POST %s" % json.dumps(body), r.status, 400)
    res.eq("kernels.count afterwards", ctx.kernels_health().get("count"), len(ctx.live))


def case_not_matching(ctx, res):
    ctx.wait_pool()
    pool = ctx.pool_workspaces()
    for body in ({"name": "python3", "limits": {"memoryBytes": 512 << 20}},
                 {"name": "python3", "env": {"KERNEL_USERNAME": "t"}}):
        r, j = ctx.create(body)
        if not res.eq("POST %s" % json.dumps(body), r.status, 201):
            res.note(r.brief())
            continue
        res.check(("kernel-" + j["id"]) not in pool, "a cold kernel, not one of the pool's")
        res.eq("its state", j.get("execution_state"), "starting")
        reply, _ = ctx.run(j["id"], "y = 1")
        res.eq("it runs", (reply or {}).get("status"), "ok")
        res.eq("DELETE", ctx.delete(j["id"]).status, 204)
    res.eq("the pool is untouched", ctx.pool_workspaces() >= pool, True)


def case_never_reused(ctx, res):
    seen = set(ctx.handed)
    for _ in range(2):
        for kid in list(ctx.live):
            res.eq("DELETE", ctx.delete(kid).status, 204)
        ctx.wait_pool()
        r, j = ctx.create()
        if not res.eq("POST", r.status, 201):
            return
        res.check(j["id"] not in seen, "a new id each time: %s" % j["id"])
        seen.add(j["id"])
        reply, out = ctx.run(j["id"], "print('z' in globals())")
        res.eq("no state of another client", out.strip(), "False")
    res.eq("ids handed out are all distinct", len(ctx.handed), len(set(ctx.handed)))


def case_cap(ctx, res):
    ctx.wait_pool()
    while len(ctx.live) < CAP:
        r, _ = ctx.create()
        if not res.eq("POST under the cap", r.status, 201):
            return
    h = ctx.kernels_health()
    res.eq("kernels.count at the cap", h.get("count"), CAP)
    r, _ = ctx.create()
    res.eq("POST past MaxKernels= (prespawned kernels are not counted)", r.status, 403)
    res.check("Resource Limit" in r.body.decode(errors="replace"), "the Kernel Gateway's words: %r" % r.body[:200])
    for kid in list(ctx.live):
        ctx.delete(kid)


def case_drain_on_policy(ctx, res):
    ctx.wait_pool()
    old = ctx.pool_workspaces()
    res.eq("pool before", len(old), PRESPAWN)
    r = ctx.call("PUT", "/api/network-policy", {"mode": "none"}, scheme="Bearer")
    res.eq("PUT /api/network-policy", r.status, 200)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ctx.pool_workspaces() & old:
        time.sleep(0.2)
    res.eq("the old pool's workspaces removed", sorted(ctx.pool_workspaces() & old), [])
    log = ctx.d.log_tail(200000)
    for ws in old:
        res.check(("Kernel '%s'" % ws[len("kernel-"):]) in log and "ended: deleted" in log,
                  "%s ended, reason deleted" % ws)
    h = ctx.wait_pool()
    res.eq("the pool refilled", h.get("prespawned"), PRESPAWN)
    new = ctx.pool_workspaces()
    res.check(len(new) == PRESPAWN and not (new & old), "new kernels: %s" % sorted(new))
    ctx.at_stop = new


def case_no_leftover_at_stop(ctx, res):
    # Run last: the daemon is stopped here; the pool's kernels end and their workspaces go.
    pool = ctx.pool_workspaces()
    res.eq("pool before the stop", len(pool), PRESPAWN)
    rc, took = ctx.d.terminate(grace=20)
    res.eq("daemon exit status", rc, 0)
    res.eq("pool workspaces left after the stop", sorted(ctx.pool_workspaces() & pool), [])
    ids = [w[len("kernel-"):].encode() for w in pool]
    left = [p for p in L.all_pids() if any(i in a for i in ids for a in (L.cmdline(p) or []))]
    res.eq("prespawned kernel processes left", left, [])


CASES = [
    ("pool-ready", case_pool_ready),
    ("hand-out", case_hand_out),
    ("document-libraries", case_document_libraries),
    ("environment-kernels", case_environment_kernels),
    ("not-matching", case_not_matching),
    ("never-reused", case_never_reused),
    ("cap", case_cap),
    ("drain-on-policy", case_drain_on_policy),
    ("stop", case_no_leftover_at_stop),
]



def main():
    return K.test_main(__doc__, CASES, BUDGET, lambda d, args: Ctx(d), config=CONFIG, may_stop=("stop",),
                       kernels_of=lambda ctx: list(ctx.live))


if __name__ == "__main__":
    sys.exit(main())
