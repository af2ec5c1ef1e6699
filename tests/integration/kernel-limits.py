#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A kernel's message limits end to end (issue 22; docs/kernels.md, "Limits"): a daemon with
[Kernels] Enable=yes, a small MaxOutputBytes= and the smallest MaxMessageBytes=, a real
sandboxed ipykernel, and a client speaking as DocsGPT does (a new WebSocket per execution, legacy
JSON, done after both the execute_reply and status: idle of its msg_id):

  output-budget   an execution printing past the budget gets its output up to it, then exactly
                  one stream message on stderr with the marker, then nothing of its output: only
                  status and its execute_reply; the bytes the marker names are those delivered;
                  the next execution has a budget of its own
  execute-budget  the same through POST /api/kernels/{id}/execute (ours): the marker in stderr
  max-message     a message of exactly MaxMessageBytes= is executed; one byte more closes the
                  WebSocket with 1009 (and a journal entry) while the kernel serves other sockets

    kernel-limits.py --daemon build/src/sandbox-runnerd [--run-as self] [--only NAME] [--verbose]"""

import json
import os
import struct
import sys
import time

import websocket        # Debian's python3-websocket (websocket-client)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L         # noqa: E402
import kernels as K             # noqa: E402  (DocsGPT's client: execute_request, collect, run_code)

BUDGET = 300
MAX_OUTPUT = 64 * 1024
MAX_MESSAGE = 64 * 1024         # the least config_verify() accepts
CONFIG = L.CONFIG_TEXT + """\
[Kernels]
Enable=yes
MaxOutputBytes=%d
MaxMessageBytes=%d
""" % (MAX_OUTPUT, MAX_MESSAGE)
MARKER = "[sandbox-runner: output truncated after "
# 200 lines of 1 KiB, flushed one by one: about 200 KiB of stdout, past the 64 KiB budget
FLOOD = "import sys\nfor i in range(200):\n    print('%04d' % i + 'x' * 1019, flush=True)\nprint('after')\n"


def stream_bytes(c):
    """What the daemon counts for a stream message: its content's keys and strings."""
    return len("name") + len(c.get("name", "")) + len("text") + len(c.get("text", "").encode())


def frames_of(ws, msg_id, deadline):
    """Every message of @msg_id, in order, until both its execute_reply and status: idle."""
    got, reply, idle = [], False, False
    while not (reply and idle):
        ws.settimeout(max(0.05, deadline - time.monotonic()))
        m = json.loads(ws.recv())
        if (m.get("parent_header") or {}).get("msg_id") != msg_id:
            continue
        t = m.get("msg_type") or m["header"]["msg_type"]
        got.append((t, m.get("content") or {}))
        reply = reply or t == "execute_reply"
        idle = idle or (t == "status" and got[-1][1].get("execution_state") == "idle")
    return got


def in_log(d, *texts, timeout=15.0):
    """Whether the daemon's log holds all of @texts, waiting for it: the daemon may write its
    entry after the client has seen what it logs."""
    deadline = time.monotonic() + timeout
    while True:
        log = d.log_text()
        if all(t in log for t in texts):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def case_create(ctx, res):
    r = ctx.call("POST", "/api/kernels", {"name": "python3"}, timeout=10.0)
    if not res.eq("POST /api/kernels", r.status, 201):
        res.note(r.brief())
        return
    ctx.kernel = (r.json() or {}).get("id")
    o = K.run_code(ctx, ctx.kernel, "print('ready')")
    res.eq("first execution", "".join(o.stdout).strip(), "ready")


def case_output_budget(ctx, res):
    if not K.need_kernel(ctx, res):
        return
    ws = ctx.ws(ctx.kernel, timeout=60)
    try:
        msg_id, text = K.execute_request(FLOOD)
        ws.send(text)
        got = frames_of(ws, msg_id, time.monotonic() + 120)
    finally:
        ws.close()
    markers = [i for i, (t, c) in enumerate(got) if t == "stream" and MARKER in c.get("text", "")]
    if not res.eq("markers", len(markers), 1):
        res.note("messages: %r" % [(t, c.get("name")) for t, c in got])
        return
    i = markers[0]
    marker = got[i][1]
    res.eq("the marker's stream", marker.get("name"), "stderr")
    res.check("(MaxOutputBytes=%d)" % MAX_OUTPUT in marker["text"], "the marker names the budget: %r" % marker["text"])
    before = [c for t, c in got[:i] if t == "stream"]
    delivered = sum(stream_bytes(c) for c in before)
    stdout = "".join(c.get("text", "") for c in before if c.get("name") == "stdout")
    res.check(0 < delivered <= MAX_OUTPUT, "delivered %d bytes, within the budget" % delivered)
    res.check(MARKER + "%d bytes " % delivered in marker["text"],
              "the marker names the bytes delivered (%d): %r" % (delivered, marker["text"]))
    res.check(stdout.startswith("0000" + "x" * 1019 + "\n0001"), "the output is delivered from its start")
    res.check("after" not in stdout, "the output past the budget is not delivered")
    after = [t for t, c in got[i + 1:]]
    res.check(all(t in ("status", "execute_reply") for t in after),
              "nothing but status and the reply after the marker: %r" % after)
    replies = [c for t, c in got if t == "execute_reply"]
    res.eq("one execute_reply", len(replies), 1)
    res.eq("the execution itself succeeded", (replies[0] if replies else {}).get("status"), "ok")
    res.check(got[-1][0] in ("status", "execute_reply"), "the idle and the reply arrive")
    # the next execution has a budget of its own, and the kernel still has its state
    o = K.run_code(ctx, ctx.kernel, "print('next', i)")
    res.eq("the next execution's output", "".join(o.stdout).strip(), "next 199")
    res.eq("no marker on it", [s for s in o.stderr if MARKER in s], [])
    res.check(in_log(ctx.d, "'%s' passed MaxOutputBytes=%d after %d bytes" % (msg_id, MAX_OUTPUT, delivered)),
              "the truncation is in the journal")


def case_execute_budget(ctx, res):
    """POST /api/kernels/{id}/execute is a client of the same iopub: the same marker."""
    if not K.need_kernel(ctx, res):
        return
    r = ctx.call("POST", "/api/kernels/%s/execute" % ctx.kernel, {"code": FLOOD}, timeout=120.0)
    if not res.eq("POST .../execute", r.status, 200):
        res.note(r.brief())
        return
    j = r.json() or {}
    stderr, stdout = j.get("stderr", ""), j.get("stdout", "")
    res.eq("markers in stderr", stderr.count(MARKER), 1)
    res.check(0 < len(stdout) <= MAX_OUTPUT, "stdout within the budget: %d bytes" % len(stdout))
    res.check("after" not in stdout, "nothing past the budget in stdout")
    res.eq("status", j.get("status"), "ok")


def send_text(ws, size, tag):
    """An execute_request padded to exactly @size bytes (a comment in its code)."""
    msg_id, text = K.execute_request("print(%r)\n#" % tag)
    pad = size - len(text.encode())
    assert pad >= 0
    doc = json.loads(text)
    doc["content"]["code"] += "p" * pad
    data = json.dumps(doc)
    assert len(data.encode()) == size, (len(data.encode()), size)
    ws.send(data)
    return msg_id


def case_max_message(ctx, res):
    if not K.need_kernel(ctx, res):
        return
    ws = ctx.ws(ctx.kernel, timeout=60)
    try:
        msg_id = send_text(ws, MAX_MESSAGE, "at the limit")
        o = K.collect(ws, msg_id, K.Outcome(), time.monotonic() + 60)
        res.eq("a message of exactly MaxMessageBytes= runs", "".join(o.stdout).strip(), "at the limit")
        send_text(ws, MAX_MESSAGE + 1, "over the limit")
        code = None
        deadline = time.monotonic() + 30
        while code is None and time.monotonic() < deadline:
            try:
                op, frame = ws.recv_data_frame(True)
            except websocket.WebSocketConnectionClosedException:
                break
            if op == websocket.ABNF.OPCODE_CLOSE:
                code = struct.unpack(">H", frame.data[:2])[0] if len(frame.data) >= 2 else 1005
        res.eq("one byte more: close code", code, 1009)
    finally:
        ws.close()
    res.check(in_log(ctx.d, "(1009): a message over %d bytes (MaxMessageBytes=)" % MAX_MESSAGE),
              "the 1009 is in the journal")
    o = K.run_code(ctx, ctx.kernel, "print('still serving')")
    res.eq("the kernel serves other sockets", "".join(o.stdout).strip(), "still serving")


CASES = [
    ("create", case_create),
    ("output-budget", case_output_budget),
    ("execute-budget", case_execute_budget),
    ("max-message", case_max_message),
]



def main():
    return K.test_main(__doc__, CASES, BUDGET, lambda d, args: K.Ctx(d), config=CONFIG, always=("create",),
                       kernels_of=lambda ctx: [ctx.kernel] if ctx.kernel else [])


if __name__ == "__main__":
    sys.exit(main())
