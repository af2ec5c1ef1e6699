# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for tests/integration/workspaces.py: a daemon with the test's own configuration (and,
for the cross-process lease, a second daemon on the same state directory), bearer/signed
requests, managed runs, a streaming (chunked) reader for followed logs, multipart bodies,
/proc scans by marker, the CAS object count, and TAP with always-printed measurements.
Python 3 stdlib only; all traffic goes to 127.0.0.1.  Builds on execute_lib."""

import base64
import hashlib
import json
import os
import secrets
import socket
import time

import execute_lib as L
from execute_lib import HttpError, now

CONFIG_TEXT = """\
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
[Execution]
AllowUnscoped=yes
DefaultTimeoutSec=30
[Quota]
MaxOutputBytes=1M
"""

FINAL_STATES = ("exited", "signaled", "timeout", "memory_limit", "tasks_limit",
                "workspace_quota_exceeded", "cancelled", "interrupted", "failed")


class Daemon(L.Daemon):
    """execute_lib's daemon with this test's config; share_state_from: another Daemon whose
    state directory this one uses (two processes on the same workspaces, records and CAS)."""

    def __init__(self, path, keep_tmp=False, run_as=None, share_state_from=None):
        super().__init__(path, keep_tmp=keep_tmp, run_as=run_as, config=CONFIG_TEXT)
        if share_state_from is not None:
            os.rmdir(self.state)
            self.state = share_state_from.state
            # Same secrets, so that one client talks to both.
            self.token, self.key_text, self.key = (share_state_from.token, share_state_from.key_text,
                                                   share_state_from.key)
            for name, val in (("api-token", self.token), ("signing-key", self.key_text)):
                with open(os.path.join(self.creds, name), "w") as f:
                    f.write(val + "\n")

    def objects_dir(self):
        return os.path.join(self.state, "cas", "objects")


# --------------------------------------------------------------------------------------------
# Results: execute_lib's, plus measurements that are printed whatever the outcome.

class Result(L.Result):
    def __init__(self, name):
        super().__init__(name)
        self.infos = []

    def info(self, msg):
        self.infos.append(msg)


class Tap(L.Tap):
    def comments(self, res, verbose):
        return list(res.infos) + super().comments(res, verbose)


# --------------------------------------------------------------------------------------------
# Client

class Client:
    def __init__(self, daemon, budget):
        self.d = daemon
        self.budget = budget

    def bearer(self):
        return ("Authorization", "Bearer " + self.d.token)

    def signed(self, method, path, body):
        ts = int(time.time())
        return [("X-Sandbox-Timestamp", str(ts)),
                ("X-Sandbox-Signature", L.signature(self.d.key, ts, method, path, body))]

    def request(self, method, path, body=b"", headers=(), signed=False, auth=True, timeout=10.0, port=None):
        """Response, or raise OSError/HttpError."""
        h = ([self.bearer()] if auth else []) + list(headers)
        if signed:
            h += self.signed(method, path, body)
        return L.http(port or self.d.port, method, path, h, body, timeout=self.budget.bound(timeout))

    def try_request(self, *a, **kw):
        """(Response or None, error string or None)"""
        try:
            return self.request(*a, **kw), None
        except (OSError, HttpError) as e:
            return None, "%s: %s" % (type(e).__name__, e)

    def get(self, path, timeout=10.0):
        return self.try_request("GET", path, timeout=timeout)

    def json_req(self, method, path, obj, signed=False, timeout=10.0):
        raw = json.dumps(obj).encode()
        return self.try_request(method, path, raw, [("Content-Type", "application/json")], signed=signed,
                                timeout=timeout)

    def execute(self, body, timeout=20.0):
        """Synchronous /execute-shell: (Response or None, error)."""
        return self.json_req("POST", "/execute-shell", body, signed=True, timeout=timeout)

    def managed(self, body, timeout=10.0):
        return self.json_req("POST", "/shell-executions", body, signed=True, timeout=timeout)

    def cancel(self, eid, timeout=10.0, body=b""):
        """Signed over body (b"" or what clients that always send JSON send: b"{}")."""
        path = "/shell-executions/%s/cancel" % eid
        h = [("Content-Type", "application/json")] if body else []
        return self.try_request("POST", path, body, h, signed=True, timeout=timeout)

    def teardown(self, ws, timeout=10.0, body=b""):
        h = [("Content-Type", "application/json")] if body else []
        return self.try_request("POST", "/workspaces/%s/teardown" % ws, body, h, timeout=timeout)

    def status(self, eid, timeout=5.0):
        """The record JSON (dict) or None; and the Response (or error string)."""
        r, err = self.get("/shell-executions/%s" % eid, timeout=timeout)
        if r is None:
            return None, err
        j = r.json()
        return (j if r.status == 200 and isinstance(j, dict) else None), r

    def wait_final(self, eid, seconds):
        """Poll until the run's state is final; return (record or None, seconds waited)."""
        t0 = now()
        deadline = t0 + max(0.1, min(seconds, self.budget.left()))
        j = None
        while now() < deadline:
            j, _ = self.status(eid)
            if j is not None and j.get("state") in FINAL_STATES:
                return j, now() - t0
            time.sleep(0.05)
        return j, now() - t0

    def wait_log(self, eid, needle, seconds, stream="stdout"):
        """Poll the log until it contains needle (bytes); return the log bytes or None."""
        deadline = now() + max(0.1, min(seconds, self.budget.left()))
        while now() < deadline:
            r, _ = self.get("/shell-executions/%s/logs?stream=%s&offset=0" % (eid, stream))
            if r is not None and r.status == 200 and needle in r.body:
                return r.body
            time.sleep(0.03)
        return None


def stream_get(port, path, headers, timeout):
    """GET with a chunked answer, read as it arrives.  Return (status, headers dict, list of
    (monotonic time, data) per decoded chunk, total seconds, error or None)."""
    t0 = now()
    chunks = []
    status, hd = None, {}
    s = socket.create_connection((L.LOOPBACK, port), timeout=timeout)
    try:
        s.sendall(L.build_request("GET", path, headers))
        buf = b""
        head_done = False
        chunked = False
        while True:
            left = timeout - (now() - t0)
            if left <= 0:
                return status, hd, chunks, now() - t0, "timeout after %.1fs" % timeout
            s.settimeout(left)
            try:
                data = s.recv(65536)
            except socket.timeout:
                return status, hd, chunks, now() - t0, "timeout after %.1fs" % timeout
            t = now()
            if not data:
                if head_done and not chunked:
                    chunks.append((t, buf))
                    return status, hd, chunks, t - t0, None
                return status, hd, chunks, t - t0, "connection closed early"
            buf += data
            if not head_done:
                head, sep, rest = buf.partition(b"\r\n\r\n")
                if not sep:
                    continue
                lines = head.decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ")[1])
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    hd[k.strip().lower()] = v.strip()
                head_done = True
                chunked = "chunked" in hd.get("transfer-encoding", "").lower()
                buf = rest
                if not chunked and "content-length" in hd and len(buf) >= int(hd["content-length"]):
                    chunks.append((t, buf[:int(hd["content-length"])]))
                    return status, hd, chunks, t - t0, None
            if not chunked:
                if "content-length" in hd and len(buf) >= int(hd["content-length"]):
                    chunks.append((t, buf[:int(hd["content-length"])]))
                    return status, hd, chunks, t - t0, None
                continue
            while True:
                ln, sep, rest = buf.partition(b"\r\n")
                if not sep:
                    break
                size = int(ln.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return status, hd, chunks, t - t0, None
                if len(rest) < size + 2:
                    break
                chunks.append((t, rest[:size]))
                buf = rest[size + 2:]
    finally:
        s.close()


def multipart(parts, boundary=None):
    """parts: list of (filename, bytes).  Return (content-type value, body bytes)."""
    boundary = boundary or ("sr-boundary-" + secrets.token_hex(12))
    out = b""
    for i, (name, data) in enumerate(parts):
        fn = name.replace("\\", "\\\\").replace('"', '\\"')
        out += (("--%s\r\nContent-Disposition: form-data; name=\"file%d\"; filename=\"%s\"\r\n"
                 "Content-Type: application/octet-stream\r\n\r\n") % (boundary, i, fn)).encode("utf-8")
        out += data + b"\r\n"
    out += ("--%s--\r\n" % boundary).encode()
    return "multipart/form-data; boundary=%s" % boundary, out


def repr_digest_of(data):
    return "sha-256=:%s:" % base64.b64encode(hashlib.sha256(data).digest()).decode()


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------
# Processes and files on the host

def marked_pids(marker):
    """Live (non-zombie) processes whose command line or environment contains marker (str)."""
    m = marker.encode()
    out = []
    for pid in L.all_pids():
        if pid == os.getpid():
            continue
        cl = L.cmdline(pid)
        env = L.environ(pid)
        if (cl and any(m in a for a in cl)) or (env and m in env):
            st = L.proc_stat(pid)
            if st is not None and st[1] != "Z":
                out.append(pid)
    return out


def wait_no_marked(marker, seconds):
    """Wait until no process carries marker; return what is left (empty list if none)."""
    deadline = now() + seconds
    left = marked_pids(marker)
    while left and now() < deadline:
        time.sleep(0.05)
        left = marked_pids(marker)
    return left


def snapshot_tree(pid):
    """{pid: starttime} of pid's descendants (and pid itself)."""
    table = L.proc_table()
    out = {p: table[p][3] for p in L.descendants(pid, table) if p in table}
    if pid in table:
        out[pid] = table[pid][3]
    return out


def alive_of(snap):
    """The pids of snap that still run (same start time, not a zombie)."""
    out = []
    for p, start in snap.items():
        st = L.proc_stat(p)
        if st is not None and st[3] == start and st[1] != "Z":
            out.append(p)
    return out


def count_objects(objects_dir):
    """(number of object files, set of their names 'xx/yyyy...') under cas/objects."""
    names = set()
    for dp, dns, fns in os.walk(objects_dir):
        for n in fns:
            rel = os.path.relpath(os.path.join(dp, n), objects_dir)
            names.add(rel)
    return len(names), names


def tree_files(root):
    """{relative path: (type, size)} of everything below root (no symlink followed)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (oct(st.st_mode), st.st_size)
    return out


def unique(prefix="t"):
    return "%s-%s" % (prefix, secrets.token_hex(5))

