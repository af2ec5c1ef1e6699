# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shared by the tests that speak the ScienceDiscovery dialect (docs/api.md section 15): a daemon
started by hand with our own API on one listener and --listen sciencediscovery=127.0.0.1:PORT on a
second, and a client that signs and sends as their API server does (bearer token; execution
signature = hex HMAC-SHA256 keyed with the token over "<ms>\\n<sha256 hex of the body>"), with
chunked streaming uploads as their client sends them.  Traffic only to 127.0.0.1."""

import hashlib
import hmac
import json
import socket
import time
import uuid

import execute_lib as L
import testlib as T
from execute_lib import HttpError, now, trunc


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
                content_type="application/json", extra=()):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        h = self.headers(data, auth, signed, content_type) + list(extra)
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
