# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers shared by tests/integration/environments.py and environments-online.py: a client of
the environments API (bearer requests, signed executions, the setups' progress, the revision
records) and the provisioning sandboxes of the daemon under test. Python 3 stdlib only; all
traffic goes to 127.0.0.1."""

import json
import os
import secrets
import time

import execute_lib as L
from execute_lib import now


class EnvClient:
    """The daemon @d (an execute_lib.Daemon) within @budget (an execute_lib.Budget); executions
    go to @workspace unless a body names another; ids carry @mark_prefix."""

    def __init__(self, d, budget, workspace, mark_prefix):
        self.d = d
        self.budget = budget
        self.workspace = workspace
        self.seq = 0
        self.mark = "%s-%s" % (mark_prefix, secrets.token_hex(6))

    def new_id(self):
        self.seq += 1
        return "%s-%d" % (self.mark, self.seq)

    def bearer(self):
        return ("Authorization", "Bearer " + self.d.token)

    def req(self, method, path, body=None, timeout=10.0, raw=None):
        """(status, JSON answer or None) of a bearer request; @body as JSON, or @raw bytes."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        h = [self.bearer()]
        if body is not None:
            h.append(("Content-Type", "application/json"))
        r = L.http(self.d.port, method, path, h, data, timeout=self.budget.bound(timeout))
        try:
            j = json.loads(r.body.decode()) if r.body else None
        except ValueError:
            j = None
        return r.status, j

    def execute(self, body, path="/execute-shell", timeout=90.0):
        """(status, JSON answer) of a signed execution request."""
        b = dict(body)
        b.setdefault("executionId", self.new_id())
        b.setdefault("workspaceId", self.workspace)
        raw = json.dumps(b).encode()
        ts = int(time.time())
        h = [self.bearer(), ("Content-Type", "application/json"), ("X-Sandbox-Timestamp", str(ts)),
             ("X-Sandbox-Signature", L.signature(self.d.key, ts, "POST", path, raw))]
        r = L.http(self.d.port, "POST", path, h, raw, timeout=self.budget.bound(timeout))
        return r.status, json.loads(r.body.decode())

    def env_root(self):
        return os.path.join(self.d.state, "environments")

    def setup_entry(self, name):
        st, j = self.req("GET", "/environments/setup")
        if st != 200:
            return None
        for e in (j or {}).get("setup", []):
            if e.get("name") == name:
                return e
        return None

    def wait_phase(self, name, phases=("ready", "failed"), revision=None, timeout=300.0):
        """Poll GET /environments/setup until @name is in one of @phases (and at @revision), or,
        waiting for a @revision, its setup failed. Return its last entry (None: never seen)."""
        deadline = now() + min(timeout, max(0.0, self.budget.left()))
        e = None
        while now() < deadline:
            e = self.setup_entry(name)
            if e and e.get("phase") in phases and (revision is None or e.get("revision") == revision):
                return e
            if e and revision is not None and e.get("phase") == "failed":
                return e
            time.sleep(0.2)
        return e

    def revision_packages(self, name):
        """[(revision, {package name: package})] of @name's revision records."""
        st, j = self.req("GET", "/environments/%s/revisions" % name)
        return [(r.get("revision"), {p.get("name"): p for p in r.get("packages", [])})
                for r in (j or {}).get("revisions", [])]

    def build_dirs(self, name):
        """The build directories of @name's setups left on disk."""
        d = os.path.join(self.env_root(), "envs", name)
        return [n for n in os.listdir(d) if n.startswith("build-")] if os.path.isdir(d) else []

    def provisioner_pids(self):
        """Processes of the daemon's provisioning sandboxes: the provisioner runs as
        /usr/bin/python3 -I -B /.sandbox/code."""
        out = []
        for pid in L.descendants(self.d.pid):
            c = L.cmdline(pid) or []
            if c[:1] == [b"/usr/bin/python3"] and b"/.sandbox/code" in c:
                out.append(pid)
        return out

    def wait_provisioner(self, timeout=60.0):
        deadline = now() + timeout
        while now() < deadline:
            p = self.provisioner_pids()
            if p:
                return p
            time.sleep(0.01)
        return []


def probe_wheel_files(init, record_hash):
    """The files of the wheel srtest_probe 1.0, in archive order: its module (@init, the text of
    its __init__.py, which defines probe()) and a .pth file that calls srtest_probe.probe() in
    every interpreter that starts with the wheel installed: in the provisioning sandbox, the
    provisioner's check of the new environment. @record_hash: make-wheelhouse.py's."""
    name, version = "srtest_probe", "1.0"
    info = "%s-%s.dist-info" % (name, version)
    files = [
        ("%s/__init__.py" % name, init.encode()),
        ("zz_srtest_probe.pth", b"import srtest_probe; srtest_probe.probe()\n"),
        ("%s/METADATA" % info, ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n\n" % (name, version)).encode()),
        ("%s/WHEEL" % info, b"Wheel-Version: 1.0\nGenerator: environments_lib.py\nRoot-Is-Purelib: true\n"
                            b"Tag: py3-none-any\n\n"),
    ]
    record = "".join("%s,%s,%d\n" % (p, record_hash(d), len(d)) for p, d in files)
    record += "%s/RECORD,,\n" % info
    files.append(("%s/RECORD" % info, record.encode()))
    return files


def py(code):
    """A shell word running @code with the first python3 on PATH."""
    return "python3 -c '%s'" % code.replace("'", "'\"'\"'")
