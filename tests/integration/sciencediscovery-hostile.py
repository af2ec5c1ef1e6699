#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The hostile inputs of SECURITY.md section 5 that reach the ScienceDiscovery dialect's own
parsers (its route table and framing checks, its bearer and execution signature, its JSON bodies,
its workspace keys and paths, its streamed uploads), sent with raw sockets to a daemon that
speaks both dialects on two listeners (docs/api.md section 15).

    /usr/bin/python3 tests/integration/sciencediscovery-hostile.py --daemon BUILD/src/sandbox-runnerd
                                                                   [--run-as self] [--verbose]

Every refusal must come in their shape (JSON {"error": "..."}) or as a close without an answer
(framing errors), never a hang and never more than one answer; nothing may be written; after
every case the daemon still runs and both listeners answer GET /health.  Prints TAP; exits 1 on
any failure.  Bounded (< 90 s); traffic only to 127.0.0.1.
"""

import hashlib
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import http_battery_lib as H                                               # noqa: E402
import sd_lib as S                                                         # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import Result, now                                        # noqa: E402

BUDGET = 85.0
READ_TIMEOUT = 3.0
SETTLE = 0.3
CONFIG = L.CONFIG_TEXT.replace("[Runner]\n", "[Runner]\nHeaderTimeoutSec=2\nRequestTimeoutSec=5\n"
                                             "MaxRequestBodyBytes=1M\n")
KEY = "hostile-proj/session-1"
BAD_SIGNATURE = "Invalid or expired execution signature"
CASES, case = T.case_registry()


class Ctx:
    def __init__(self, d):
        self.d = d
        self.c = S.SdClient(d)

    @property
    def port(self):
        return self.d.sd_port

    def auth(self):
        return ("Authorization", "Bearer " + self.d.token)

    def execute_raw(self, body, ts=None, sig=None, extra=(), auth=True, content_length=True):
        t, s = self.c.sign(body, ts)
        h = ([self.auth()] if auth else []) + [("Content-Type", "application/json"),
                                               ("x-science-execution-timestamp", t),
                                               ("x-science-execution-signature", s if sig is None else sig)]
        return H.build_request("POST", "/execute", h + list(extra), body, content_length=content_length)

    def valid_body(self):
        return json.dumps(self.c.execute_body("print(6*7)", KEY)).encode()


def ex_of(ctx, data, settle=0.0, timeout=READ_TIMEOUT):
    return H.exchange(ctx.port, data, timeout=timeout, settle=settle)


def their_error(res, ex, status, message=None):
    """One answer, in their shape: status, JSON with charset, {"error": str}."""
    rs, _, perr = ex.responses()
    if not res.check(rs, "no answer (closed: %s) to a request their shape must answer" % ex.ended):
        return None
    r = rs[0]
    res.notes.insert(0, "answered %d %s" % (r.status, H.trunc(r.body, 200)))
    res.eq("status", r.status, status)
    res.eq("content-type", r.header("content-type"), "application/json; charset=utf-8")
    j = r.json()
    if res.check(isinstance(j, dict) and isinstance(j.get("error"), str) and set(j) == {"error"},
                 "body is not their {\"error\": str}: %r" % H.trunc(r.body, 200)) and message:
        res.check(message in j["error"], "error %r lacks %r" % (j["error"], message))
    res.check(len(rs) == 1, "%d answers to one request" % len(rs))
    return r


def reject_or_close(res, ex, statuses=(400,)):
    """A framing error: an answer with a status in statuses, or a close; one answer at most,
    never a hang."""
    rs, _, perr = ex.responses()
    if rs:
        res.notes.insert(0, "answered %d" % rs[0].status)
        res.check(rs[0].status in statuses, "status %d, expected %s or a close" % (rs[0].status, statuses))
        res.check(len(rs) == 1, "%d answers: a request hidden in the body was answered" % len(rs))
    else:
        res.check(ex.ended, "no answer and still open after %.1fs (hang)" % READ_TIMEOUT)


# ---- the request line and headers --------------------------------------------------------------

@case("request target > 8 KiB on their listener -> 400/414 or close")
def c_long_target(ctx, res):
    reject_or_close(res, ex_of(ctx, H.build_request("GET", "/status?pad=" + "a" * 9000, [ctx.auth()]), SETTLE),
                    (400, 414, 431))


@case("101 headers on their listener -> 400/431 or close")
def c_many_headers(ctx, res):
    h = [ctx.auth()] + [("X-H-%03d" % i, "v") for i in range(101)]
    reject_or_close(res, ex_of(ctx, H.build_request("GET", "/status", h), SETTLE), (400, 431))


@case("%00 in a query value (workspace, path) -> 400 in their shape, never a shorter name")
def c_nul_query(ctx, res):
    their_error(res, ex_of(ctx, H.build_request("GET", "/remote-workspace/files?workspace=k%00x", [ctx.auth()])), 400)
    their_error(res, ex_of(ctx, H.build_request("GET", "/remote-workspace/file?workspace=%s&path=a%%00b" % KEY,
                                                [ctx.auth()])), 400)


@case("duplicate Content-Length (+ a hidden request) -> 400 or close, one answer")
def c_dup_cl(ctx, res):
    body = ctx.valid_body()
    hidden = H.build_request("GET", "/status", [ctx.auth()])
    req = ctx.execute_raw(body, extra=[("Content-Length", str(len(body))), ("Content-Length", str(len(body) + len(hidden)))])
    reject_or_close(res, ex_of(ctx, req + hidden, SETTLE))


@case("Content-Length + Transfer-Encoding: chunked (CL.TE smuggling) -> 400 or close, one answer")
def c_cl_te(ctx, res):
    body = ctx.valid_body()
    req = ctx.execute_raw(body, extra=[("Content-Length", str(len(body))), ("Transfer-Encoding", "chunked")])
    reject_or_close(res, ex_of(ctx, req + H.build_request("GET", "/status", [ctx.auth()]), SETTLE))


@case("Transfer-Encoding given twice -> 400 or close")
def c_te_twice(ctx, res):
    h = [ctx.auth(), ("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")]
    reject_or_close(res, ex_of(ctx, H.build_request("POST", "/kernels/teardown", h, b"2\r\n{}\r\n0\r\n\r\n",
                                                     content_length=False), SETTLE))


@case("Content-Length '+5', overflow and hex -> 400 or close")
def c_cl_forms(ctx, res):
    for v in ("+5", "99999999999999999999999", "0x10"):
        h = [ctx.auth(), ("Content-Type", "application/json"), ("Content-Length", v)]
        sub = Result(v)
        reject_or_close(sub, ex_of(ctx, H.build_request("POST", "/kernels/teardown", h, b"{}", content_length=False)),
                        (400, 413))
        res.failures += ["Content-Length %s: %s" % (v, f) for f in sub.failures]


@case("chunk sizes ffffffffffffffff, -1, 0x10 on a streamed upload -> 400/413 or close, no hang")
def c_chunk_sizes(ctx, res):
    for size_line in (b"ffffffffffffffff", b"-1", b"0x10"):
        h = [ctx.auth(), ("Transfer-Encoding", "chunked"), ("x-workspace-size", "16"),
             ("x-workspace-sha256", hashlib.sha256(b"x" * 16).hexdigest())]
        req = H.build_request("PUT", "/remote-workspace/transfer-file?workspace=%s&path=chunks.bin" % KEY, h,
                              size_line + b"\r\n" + b"x" * 4096, content_length=False)
        sub = Result(size_line)
        reject_or_close(sub, ex_of(ctx, req), (400, 413))
        res.failures += ["chunk size %r: %s" % (size_line, f) for f in sub.failures]
    res.check(not os.path.exists(os.path.join(workspace_dir(ctx), "chunks.bin")), "a file was written")


@case("JSON body over their 2,000,000-byte cap (Content-Length) -> 400 before the body")
def c_cl_too_big(ctx, res):
    t, s = ctx.c.sign(b"")
    h = [ctx.auth(), ("Content-Type", "application/json"), ("Content-Length", str(2000001)),
         ("x-science-execution-timestamp", t), ("x-science-execution-signature", s)]
    their_error(res, ex_of(ctx, H.build_request("POST", "/execute", h, b"", content_length=False)), 400)


@case("slowloris on their listener: closed by 5 s (HeaderTimeoutSec=2)")
def c_slowloris(ctx, res):
    c = H.RawConn(ctx.port)
    t0 = now()
    try:
        c.send(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        while now() - t0 < 6.0 and not c.ex.ended and not c.ex.send_error:
            c.read(0.5, until_responses=0)
            if c.ex.ended:
                break
            c.send(b"a", deadline=now() + 0.5)
        ended = c.ex.ended or c.ex.send_error
    finally:
        c.close()
    res.check(ended and now() - t0 <= 6.5, "still open after %.1fs of trickled header bytes" % (now() - t0))


# ---- bearer and signature -----------------------------------------------------------------------

@case("bearer: wrong token of the same length, another length, empty, Basic -> 401 Unauthorized")
def c_bearer(ctx, res):
    tok = ctx.d.token
    # (The scheme's case does not matter, RFC 9110: "bearer <token>" is the right token.)
    for v in ("Bearer " + ("0" if tok[0] != "0" else "1") + tok[1:], "Bearer " + tok + "x", "Bearer ", "Basic " + tok,
              tok):
        their_error(res, ex_of(ctx, H.build_request("GET", "/status", [("Authorization", v)])), 401, "Unauthorized")


@case("signature: missing, wrong, other key, 10 min old or ahead, 30 digits, non-digits -> 401")
def c_signature(ctx, res):
    body = ctx.valid_body()
    ms = int(time.time() * 1000)
    other_ts, other_sig = ctx.c.sign(body, token="another-token")
    for what, req in (("missing", H.build_request("POST", "/execute", [ctx.auth(), ("Content-Type", "application/json")], body)),
                      ("wrong", ctx.execute_raw(body, sig="0" * 64)),
                      ("other key", ctx.execute_raw(body, ts=other_ts, sig=other_sig)),
                      ("old", ctx.execute_raw(body, ts=ms - 600000)),
                      ("ahead", ctx.execute_raw(body, ts=ms + 600000)),
                      ("30 digits", ctx.execute_raw(body, ts="1" * 30)),
                      ("signed other body", ctx.execute_raw(body, sig=ctx.c.sign(body + b" ")[1])),
                      ("uppercase hex", ctx.execute_raw(body, sig=ctx.c.sign(body)[1].upper()))):
        sub = Result(what)
        their_error(sub, ex_of(ctx, req), 401, BAD_SIGNATURE)
        res.failures += ["%s: %s" % (what, f) for f in sub.failures]
    their_error(res, ex_of(ctx, ctx.execute_raw(body, auth=False)), 401, "Unauthorized")


@case("a streamed upload refused before its body (wrong token, unknown route) still gets the answer, no file")
def c_refused_stream(ctx, res):
    # Their client streams transfers: closing on it before the body is read would leave it a
    # broken pipe instead of the error (notes, appendix).
    chunks = [os.urandom(65536) for _ in range(160)]
    data = b"".join(chunks)
    h = [("x-workspace-size", str(len(data))), ("x-workspace-sha256", hashlib.sha256(data).hexdigest())]
    for what, path, auth, status, message in (
            ("wrong token", "/remote-workspace/transfer-file?workspace=%s&path=refused.bin" % urllib.parse.quote(KEY, safe=""),
             "wrong-token", 401, "Unauthorized"),
            ("unknown route", "/remote-workspace/transfer-files?workspace=%s&path=refused.bin" % urllib.parse.quote(KEY, safe=""),
             True, 404, "Not found")):
        try:
            r = ctx.c.put_chunked(path, chunks, extra=h, auth=auth, timeout=10.0)
        except OSError as e:
            res.fail("%s: the client got %s instead of the answer" % (what, e))
            continue
        res.check(r.status == status and (r.json() or {}).get("error") == message, "%s: %s" % (what, r.brief()))
    res.check(not os.path.exists(os.path.join(workspace_dir(ctx), "refused.bin")), "a file was written")


# ---- JSON bodies ----------------------------------------------------------------------------------

@case("JSON: depth 10000, 1e999999, invalid UTF-8, \\u0000, trailing garbage, null, [] -> 400 their shape")
def c_json(ctx, res):
    good = ctx.valid_body()
    bodies = {
        "depth 10000": b"[" * 10000 + b"]" * 10000,
        "deep field": good[:-1] + b',"x":' + b"[" * 10000 + b"]" * 10000 + b"}",
        "1e999999": good[:-1] + b',"executionTimeoutMs":1e999999}',
        "invalid UTF-8": good.replace(b"print(6*7)", b"print(\xff\xfe)"),
        "\\u0000": good.replace(b"print(6*7)", b"print(\\u0000)"),
        "trailing garbage": good + b"x",
        "two objects": good + good,
        "null": b"null",
        "array": b"[]",
        "negative limit": good[:-1] + b',"maxOutputBytes":-1}',
        "fractional limit": good[:-1] + b',"executionTimeoutMs":1.5}',
    }
    for what, body in bodies.items():
        sub = Result(what)
        their_error(sub, ex_of(ctx, ctx.execute_raw(body)), 400)
        res.failures += ["%s: %s" % (what, f) for f in sub.failures]


@case("JSON 1.1 MiB chunked body on /execute (past the 1 MiB cap) -> their 400 'Request body exceeds the N byte limit', read to its end")
def c_json_chunked(ctx, res):
    body = b'{"code":"' + b"a" * (1100 * 1024) + b'"}'
    data = b"".join(b"%x\r\n" % len(body[i:i + 65536]) + body[i:i + 65536] + b"\r\n" for i in range(0, len(body), 65536))
    # Signed as their client signs it (the signature is checked after the body): the cap refuses it.
    req = ctx.execute_raw(body, extra=[("Transfer-Encoding", "chunked")], content_length=False)
    req = req[:len(req) - len(body)] + data + b"0\r\n\r\n"
    # Not our 413 {"error","message"}: their runner throws, so 400 {"error"} (notes §1, readBytes);
    # the cap is the smaller of theirs (2,000,000) and our MaxRequestBodyBytes=1M.
    their_error(res, ex_of(ctx, req, timeout=6.0), 400, "Request body exceeds the %d byte limit" % (1 << 20))
    # A route without a JSON body (GET) takes at most 1 KiB: 2 KiB chunked is their 400 as well.
    h = [ctx.auth(), ("Transfer-Encoding", "chunked")]
    sub = Result("GET /status with a chunked body")
    their_error(sub, ex_of(ctx, H.build_request("GET", "/status", h, b"400\r\n" + b"x" * 1024 + b"\r\n" +
                                                 b"400\r\n" + b"y" * 1024 + b"\r\n0\r\n\r\n",
                                                 content_length=False), timeout=6.0),
                400, "Request body exceeds the 1024 byte limit")
    res.failures += ["GET /status with a body: %s" % f for f in sub.failures]


# ---- keys and paths ------------------------------------------------------------------------------

def workspace_dir(ctx, key=KEY):
    return ctx.d.workspace_path("sd-" + hashlib.sha256(key.encode()).hexdigest()[:40])


@case("paths: ../x, /abs, a/../../x, ..\\\\x, %2e%2e/x, overlong UTF-8, > 255-byte name, > 2000 bytes, ., .. -> 400")
def c_paths(ctx, res):
    for p in ("../x", "/abs", "a/../../x", "..\\x", "%2e%2e/x", "%2E%2E", "%c0%ae%c0%ae/x", "a/" + "b" * 256,
              "a/" * 1001 + "b", ".", "..", "a/./b", "a//b", "x%0a"):
        target = "/remote-workspace/file?workspace=%s&path=%s" % (urllib.parse.quote(KEY, safe=""),
                                                                    p if "%" in p else urllib.parse.quote(p, safe=""))
        h = [ctx.auth(), ("Content-Type", "application/octet-stream")]
        sub = Result(p)
        their_error(sub, ex_of(ctx, H.build_request("PUT", target, h, b"data")), 400)
        their_error(sub, ex_of(ctx, H.build_request("GET", target, [ctx.auth()])), 400)
        res.failures += ["path %r: %s" % (p[:40], f) for f in sub.failures]
    top = os.path.dirname(os.path.dirname(workspace_dir(ctx)))
    res.check(not os.path.exists(os.path.join(top, "x")) and not os.path.exists("/abs"), "something was written outside")


@case("device names are plain files inside the workspace (dev/null, CON, nul)")
def c_device_names(ctx, res):
    for p in ("dev/null", "CON", "nul"):
        r = ctx.c.request("PUT", "/remote-workspace/file?workspace=%s&path=%s&conflict=overwrite" %
                          (urllib.parse.quote(KEY, safe=""), urllib.parse.quote(p, safe="")),
                          raw=b"plain", content_type="application/octet-stream")
        res.eq("PUT %s" % p, r.status, 201)
        f = os.path.join(workspace_dir(ctx), p)
        res.check(os.path.isfile(f) and open(f, "rb").read() == b"plain", "%s is not a plain file inside" % p)


@case("a FIFO and a hard link planted by the sandbox: GET refuses them at once (400), no hang")
def c_fifo_hardlink(ctx, res):
    r = ctx.c.execute_shell("mkfifo fifo && echo secret > orig && ln orig hard && ln -s /etc/passwd sym", KEY)
    if not res.check(r.status == 200 and (r.json() or {}).get("exitCode") == 0, "set-up run: %s" % r.brief()):
        return
    for p in ("fifo", "hard", "sym"):
        t0 = now()
        ex = ex_of(ctx, H.build_request("GET", "/remote-workspace/file?workspace=%s&path=%s" %
                                        (urllib.parse.quote(KEY, safe=""), p), [ctx.auth()]))
        sub = Result(p)
        r = their_error(sub, ex, 400)
        res.failures += ["%s: %s" % (p, f) for f in sub.failures]
        res.check(now() - t0 < 2.0, "%s: answered only after %.1fs" % (p, now() - t0))
        res.check(r is None or b"root:" not in r.body, "%s: /etc/passwd leaked" % p)


@case("keys: ../x, /abs, a//b, a/./b, 501 characters, a\\\\b, empty -> 400 and no directory made")
def c_keys(ctx, res):
    before = sorted(os.listdir(os.path.dirname(workspace_dir(ctx))))
    for k in ("../x", "/abs", "a//b", "a/./b", "k" * 501, "a\\b", "", "a/../b", "."):
        target = "/remote-workspace/file?workspace=%s&path=f.txt" % urllib.parse.quote(k, safe="")
        sub = Result(k)
        their_error(sub, ex_of(ctx, H.build_request("PUT", target, [ctx.auth()], b"data")), 400)
        r = ctx.c.execute("print(1)", k)
        sub.eq("/execute status", r.status, 400)
        res.failures += ["key %r: %s" % (k[:40], f) for f in sub.failures]
    res.eq("workspaces", sorted(os.listdir(os.path.dirname(workspace_dir(ctx)))), before)



def make_ctx(st):
    ctx = Ctx(st.d)
    # The workspace the cases use exists (an upload made it).
    ctx.c.request("PUT", "/remote-workspace/file?workspace=%s&path=seed.txt" % urllib.parse.quote(KEY, safe=""),
                  raw=b"seed", content_type="application/octet-stream")
    return ctx


def main():
    d = []

    def after_case(res):
        # Both listeners still answer after each hostile case.
        for port in (d[0].port, d[0].sd_port):
            st, _, _ = H.health(port)
            res.check(st == 200, "GET /health on port %d after the case: %r" % (port, st))

    def remember(st):
        d.append(st.d)
        return make_ctx(st)

    return S.test_main(__doc__, CASES, BUDGET, remember, config=CONFIG, after_case=after_case)


if __name__ == "__main__":
    sys.exit(main())
