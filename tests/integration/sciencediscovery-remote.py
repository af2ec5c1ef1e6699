#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the ScienceDiscovery dialect's remote workspaces and skill packages
(docs/api.md 15.6 and 15.7; notes/sciencediscovery-protocol.md sections 10 and 11), driven as their
API server drives a direct runner, on a daemon with both dialects on two listeners.

    /usr/bin/python3 tests/integration/sciencediscovery-remote.py --daemon BUILD/src/sandbox-runnerd
                                                                  [--run-as self] [--verbose]

Checks: PUT /remote-workspace/file (201, conflict reject 409, overwrite), GET .../file bytes,
listings (GET, POST with paths), the chunked verified PUT .../transfer-file (201 with the
hash, executable bits; a size or hash mismatch, bad metadata, a reject collision: 400 that the
streaming client can read, and no file; a client that hangs up mid-body: no file, no temporary),
hostile keys and paths (400), the bearer (401), an execution that sees the uploads and whose
outputs are listed, snapshot export (201; exact bytes that survive an overwrite, DELETE
/remote-workspace and a daemon restart; unselected paths and other workspaces: 400), and skill
packages (POST: checks of sizes, hashes, SKILL.md, the package hash; GET; an execution that reads
/skills read-only, writes /skill-extensions into its workspace and lists the variables; a
package changed on disk is no longer served).  Prints TAP; exits 1 on any failure.  Bounded
(< 200 s); traffic only to 127.0.0.1.
"""

import hashlib
import os
import secrets
import shutil
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
import sd_lib as S                                                         # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import now                      # noqa: E402

BUDGET = 200.0
UNAUTHORIZED = {"error": "Unauthorized"}
CASES, case = T.case_registry()


class Ctx:
    def __init__(self, d):
        self.d = d
        self.c = S.SdClient(d)
        self.key = "proj-%s/session-%s/runners/r1/agents/main" % (secrets.token_hex(3), secrets.token_hex(3))
        self.fixtures = {}

    q = staticmethod(S.query)

    def ws_dir(self, key=None):
        return self.d.workspace_path(S.workspace_name(key or self.key))

    def put(self, path, data, conflict=None, key=None):
        p = {"workspace": self.key if key is None else key, "path": path}
        if conflict:
            p["conflict"] = conflict
        return self.c.request("PUT", self.q("/remote-workspace/file", **p), raw=data,
                              content_type="application/octet-stream")

    def transfer(self, path, chunks, **kw):
        return S.transfer(self.c, self.key, path, chunks, **kw)

    def get_file(self, path, key=None):
        return self.c.request("GET", self.q("/remote-workspace/file", workspace=self.key if key is None else key,
                                            path=path))

    def listing(self, key=None):
        r = self.c.request("GET", self.q("/remote-workspace/files", workspace=key or self.key))
        return r, {e["path"]: e for e in (r.json() or [])} if r.status == 200 else {}


quote = S.quote


def expect(res, r, status, body=None, what=""):
    ok = res.check(r is not None and r.status == status,
                   "%s: expected HTTP %d, got %s" % (what, status, r.brief() if r is not None else None))
    if ok and body is not None:
        res.eq(what + " body", r.json(), body)
    return ok


def leftovers(ctx):
    """Temporary upload files (named ones) anywhere in the workspace."""
    found = []
    for dp, dn, fn in os.walk(ctx.ws_dir()):
        found += [os.path.join(dp, f) for f in fn if f.startswith(".sandbox-upload-")]
    return found


# ---- 1: plain uploads, downloads, listings ------------------------------------------------------

WS_MAX = 8 << 20                        # the daemon's MaxWorkspaceBytes=8M


@case("1 PUT body past maxWorkspaceBytes (8M): 400 'Request body exceeds the N byte limit', sized or chunked; no file")
def c_put_cap(ctx, res):
    r = ctx.c.request("GET", "/health")
    res.eq("/health maxWorkspaceBytes", (r.json() or {}).get("maxWorkspaceBytes"), WS_MAX)
    big = b"z" * (WS_MAX + 1)
    message = {"error": "Request body exceeds the %d byte limit" % WS_MAX}
    expect(res, ctx.put("cap/sized.bin", big), 400, message, "PUT 8M+1 with Content-Length")
    # Chunked as their client streams: read to its end, then their answer (not our 413).
    chunks = [big[i:i + 262144] for i in range(0, len(big), 262144)]
    r = ctx.c.put_chunked(ctx.q("/remote-workspace/file", workspace=ctx.key, path="cap/chunked.bin"), chunks,
                          timeout=30.0)
    expect(res, r, 400, message, "PUT 8M+1 chunked")
    exact = b"e" * WS_MAX
    expect(res, ctx.put("cap/exact.bin", exact), 201, {"path": "cap/exact.bin", "size": WS_MAX}, "PUT exactly 8M")
    for name in ("sized.bin", "chunked.bin"):
        res.check(not os.path.exists(os.path.join(ctx.ws_dir(), "cap", name)), "cap/%s was written" % name)
    res.check(not leftovers(ctx), "temporary files left: %s" % leftovers(ctx))
    # A transfer that says it is larger than the workspace may be: their quota error, before the body.
    r = ctx.transfer("cap/transfer.bin", [b"t" * 1024], size=WS_MAX + 1)
    expect(res, r, 400, {"error": "Remote workspace exceeds its execution quota"}, "transfer of 8M+1 declared")
    expect(res, ctx.c.request("DELETE", ctx.q("/remote-workspace", workspace=ctx.key)), 200, {"deleted": True},
           "DELETE (the 8M file would fill the workspace's quota for the runs below)")


@case("1 PUT /remote-workspace/file: 201 {path,size}; reject 409; overwrite; GET the bytes")
def c_put(ctx, res):
    data = b"hello remote\n" + os.urandom(3000)
    r = ctx.put("data/in.bin", data)
    expect(res, r, 201, {"path": "data/in.bin", "size": len(data)}, "PUT new file")
    r = ctx.put("data/in.bin", b"other")
    expect(res, r, 409, {"error": "Remote workspace file already exists"}, "PUT again (reject by default)")
    r = ctx.put("data/in.bin", b"other", conflict="reject")
    expect(res, r, 409, None, "PUT conflict=reject")
    r = ctx.get_file("data/in.bin")
    if expect(res, r, 200, None, "GET file"):
        res.check(r.body == data, "GET returned other bytes (%d)" % len(r.body))
        res.eq("content-type", r.header("content-type"), "application/octet-stream")
    data2 = b"version 2\n"
    expect(res, ctx.put("data/in.bin", data2, conflict="overwrite"), 201, {"path": "data/in.bin", "size": len(data2)},
           "PUT conflict=overwrite")
    r = ctx.get_file("data/in.bin")
    res.check(r.status == 200 and r.body == data2, "after overwrite: %s" % r.brief())
    expect(res, ctx.put("top.txt", b"top\n"), 201, None, "PUT top.txt")
    expect(res, ctx.put("data/in.bin", b"x", conflict="sometimes"), 400, None, "conflict=sometimes")


@case("1 listings: GET all regular files sorted with size and modifiedAt; POST with paths; symlinks skipped")
def c_list(ctx, res):
    os.symlink("/etc/passwd", os.path.join(ctx.ws_dir(), "link-out"))
    r, files = ctx.listing()
    if not expect(res, r, 200, None, "GET files"):
        return
    paths = [e["path"] for e in r.json()]
    res.eq("paths", paths, sorted(paths))
    res.check("data/in.bin" in files and "top.txt" in files, "uploads not listed: %r" % paths)
    res.check("link-out" not in files, "a symlink is listed: %r" % paths)
    e = files.get("top.txt", {})
    res.eq("top.txt size", e.get("size"), 4)
    res.check(isinstance(e.get("modifiedAt"), str) and e["modifiedAt"].endswith("Z"), "modifiedAt: %r" % e)
    r = ctx.c.request("POST", "/remote-workspace/files", {"workspace": ctx.key, "paths": ["data", "missing.txt"]})
    if expect(res, r, 200, None, "POST files with paths"):
        res.eq("selected", [e["path"] for e in r.json()], ["data/in.bin"])
    r = ctx.c.request("POST", "/remote-workspace/files", {"workspace": ctx.key, "paths": ["x"] * 51})
    expect(res, r, 400, None, "POST 51 paths")
    r, files = ctx.listing(key="never-used-%s" % secrets.token_hex(3))
    expect(res, r, 200, [], "GET files of a workspace never used")


@case("1 hostile keys and paths: 400 in their shape, nothing written; no token 401")
def c_hostile(ctx, res):
    for path in ("../x", "/abs", "a/../../x", "a//b", "./a", "a/.", "..\\x", "a/" + "b" * 256, "x" * 2001, ""):
        r = ctx.put(path, b"bad")
        res.check(r.status == 400 and "error" in (r.json() or {}), "PUT path %r: %s" % (path[:40], r.brief()))
        r = ctx.get_file(path)
        res.check(r.status == 400, "GET path %r: %s" % (path[:40], r.brief()))
    for key in ("../etc", "/abs", "a//b", "a/./b", "a\\b", "x" * 501, ""):
        r = ctx.put("f.txt", b"bad", key=key)
        res.check(r.status == 400, "PUT key %r: %s" % (key[:40], r.brief()))
        r = ctx.c.request("GET", ctx.q("/remote-workspace/files", workspace=key))
        res.check(r.status == 400, "GET files key %r: %s" % (key[:40], r.brief()))
    # %00 inside a query value: refused, never cut short to a shorter name
    r = ctx.c.request("PUT", "/remote-workspace/file?workspace=%s&path=nul%%00.txt" % quote(ctx.key), raw=b"x",
                      content_type="application/octet-stream")
    res.check(r.status == 400, "PUT path with %%00: %s" % r.brief())
    res.check(not os.path.exists(os.path.join(ctx.ws_dir(), "nul")), "a file 'nul' was written")
    # through a symlink the sandbox may have planted: refused
    os.symlink("/tmp", os.path.join(ctx.ws_dir(), "via-link"))
    r = ctx.put("via-link/escape.txt", b"x")
    res.check(r.status == 400, "PUT through a symlink: %s" % r.brief())
    res.check(not os.path.exists("/tmp/escape.txt"), "written through the symlink")
    r = ctx.get_file("link-out")
    res.check(r.status == 400 and b"root:" not in r.body, "GET of a symlink to /etc/passwd: %s" % r.brief())
    r = ctx.c.request("GET", ctx.q("/remote-workspace/files", workspace=ctx.key), auth=False)
    expect(res, r, 401, UNAUTHORIZED, "no token")
    r = ctx.c.request("PUT", ctx.q("/remote-workspace/file", workspace=ctx.key, path="n.txt"), raw=b"x",
                      auth="wrong-token", content_type="application/octet-stream")
    expect(res, r, 401, UNAUTHORIZED, "wrong token")
    res.check(not os.path.exists(os.path.join(ctx.ws_dir(), "n.txt")), "written without the token")


# ---- 2: verified streaming uploads -----------------------------------------------------------

@case("2 transfer-file: chunked, size and hash verified: 201 {path,size,sha256}; executable bits kept")
def c_transfer(ctx, res):
    chunks = [os.urandom(65536) for _ in range(20)] + [b"tail"]
    data = b"".join(chunks)
    r = ctx.transfer("big/blob.bin", chunks)
    if expect(res, r, 201, None, "transfer"):
        res.eq("answer", r.json(), {"path": "big/blob.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    with open(os.path.join(ctx.ws_dir(), "big/blob.bin"), "rb") as f:
        res.check(f.read() == data, "the bytes on disk differ")
    r = ctx.transfer("bin/tool.sh", [b"#!/bin/sh\necho tool-ran\n"], executable=0o111)
    expect(res, r, 201, None, "executable transfer")
    mode = os.stat(os.path.join(ctx.ws_dir(), "bin/tool.sh")).st_mode
    res.check(mode & 0o100, "the owner's executable bit is not set: %o" % mode)
    ctx.fixtures["blob"] = data


@case("2 transfer-file refusals: mismatch, bad metadata, collision give a readable 400 and no file")
def c_transfer_bad(ctx, res):
    chunks = [os.urandom(32768) for _ in range(8)]
    data = b"".join(chunks)
    for what, kw in (("hash mismatch", {"sha": hashlib.sha256(b"other").hexdigest()}),
                     ("size too small", {"size": len(data) - 1}),
                     ("size too large", {"size": len(data) + 1}),
                     ("uppercase hash", {"sha": hashlib.sha256(data).hexdigest().upper()}),
                     ("size not a number", {"size": "12abc"}),
                     ("executable 0o644", {"executable": 0o644})):
        name = "bad/%s.bin" % what.replace(" ", "-")
        r = ctx.transfer(name, chunks, **kw)
        res.check(r is not None and r.status == 400 and isinstance((r.json() or {}).get("error"), str),
                  "%s: %s" % (what, r.brief() if r else None))
        res.check(not os.path.exists(os.path.join(ctx.ws_dir(), name)), "%s: the file was published" % what)
    r = ctx.transfer("bad/no-headers.bin", chunks, extra=[])
    res.check(r.status == 400, "no metadata headers: %s" % r.brief())
    r = ctx.transfer("big/blob.bin", [b"replacement"])
    expect(res, r, 400, {"error": "Remote workspace file already exists"}, "reject collision")
    with open(os.path.join(ctx.ws_dir(), "big/blob.bin"), "rb") as f:
        res.check(f.read() == ctx.fixtures.get("blob"), "the existing file changed")
    r = ctx.transfer("big/blob.bin", [b"replacement"], conflict="overwrite")
    if expect(res, r, 201, None, "overwrite collision"):
        ctx.fixtures["blob"] = b"replacement"
    with open(os.path.join(ctx.ws_dir(), "big/blob.bin"), "rb") as f:
        res.check(f.read() == b"replacement", "the file was not overwritten")
    res.eq("temporary files left", leftovers(ctx), [])


@case("2 transfer-file: a client that hangs up mid-body leaves no file and no temporary")
def c_transfer_disconnect(ctx, res):
    chunks = [os.urandom(65536) for _ in range(64)]
    r = ctx.transfer("cut/partial.bin", chunks, stop_after=8)
    res.check(r is None, "expected no answer")
    deadline = now() + 5
    while now() < deadline and leftovers(ctx):
        L.time.sleep(0.1)
    res.check(not os.path.exists(os.path.join(ctx.ws_dir(), "cut/partial.bin")), "a partial file was published")
    res.eq("temporary files left", leftovers(ctx), [])
    r, files = ctx.listing()
    res.check("cut/partial.bin" not in files, "listed: %r" % sorted(files))


# ---- 3: executions in the remote workspace, snapshots -------------------------------------------

@case("3 /execute with runnerWorkspaceKey sees the uploads; its outputs are listed and downloadable")
def c_exec(ctx, res):
    code = ("import os\nprint(open('top.txt').read().strip(), os.access('bin/tool.sh', os.X_OK))\n"
            "open('out/result.txt','w').write('computed\\n') if os.makedirs('out', exist_ok=True) is None else 0\n")
    r = ctx.c.execute(code, ctx.key)
    if not expect(res, r, 200, None, "execute"):
        return
    j = r.json()
    res.eq("stdout", j.get("stdout"), "top True\n")
    res.eq("createdFiles", j.get("createdFiles"), ["out/result.txt"])
    r = ctx.get_file("out/result.txt")
    res.check(r.status == 200 and r.body == b"computed\n", "download of the output: %s" % r.brief())
    r = ctx.c.execute_shell("./bin/tool.sh", ctx.key)
    if expect(res, r, 200, None, "execute-shell of the uploaded tool"):
        res.eq("tool stdout", r.json().get("stdout"), "tool-ran\n")


@case("3 snapshots: 201 with sha256/executable; exact bytes after an overwrite; paths select; 400 elsewhere")
def c_snapshots(ctx, res):
    r = ctx.c.request("POST", "/remote-workspace/snapshots", {"workspace": ctx.key})
    if not expect(res, r, 201, None, "POST snapshots"):
        return
    snap = r.json()
    res.check(str(uuid.UUID(snap.get("id", "x"))) == snap.get("id"), "id is not a UUID: %r" % snap.get("id"))
    res.eq("workspace", snap.get("workspace"), ctx.key)
    res.check(isinstance(snap.get("capturedAt"), str), "capturedAt: %r" % snap)
    files = {f["path"]: f for f in snap.get("files", [])}
    res.check("out/result.txt" in files and "top.txt" in files and "big/blob.bin" in files,
              "files: %r" % sorted(files))
    res.eq("top.txt entry", files.get("top.txt"), {"path": "top.txt", "size": 4,
                                                   "sha256": hashlib.sha256(b"top\n").hexdigest(), "executable": 0})
    res.check(files.get("bin/tool.sh", {}).get("executable", 0) & 0o100, "tool.sh executable: %r" % files.get("bin/tool.sh"))
    res.check("link-out" not in files, "a symlink is in the snapshot")
    ctx.fixtures["snap"] = snap
    # overwritten after the snapshot: the snapshot still serves the old bytes
    expect(res, ctx.put("top.txt", b"changed\n", conflict="overwrite"), 201, None, "overwrite top.txt")
    path = "/remote-workspace/snapshots/%s/file" % snap["id"]
    r = ctx.c.request("GET", ctx.q(path, workspace=ctx.key, path="top.txt"))
    res.check(r.status == 200 and r.body == b"top\n", "snapshot file after overwrite: %s" % r.brief())
    r = ctx.c.request("GET", ctx.q(path, workspace=ctx.key, path="not/there.txt"))
    expect(res, r, 400, None, "unselected path")
    r = ctx.c.request("GET", ctx.q(path, workspace="another-workspace", path="top.txt"))
    expect(res, r, 400, None, "another workspace")
    r = ctx.c.request("GET", ctx.q(path, workspace=ctx.key, path="top.txt"), auth=False)
    expect(res, r, 401, UNAUTHORIZED, "no token")
    r = ctx.c.request("GET", ctx.q("/remote-workspace/snapshots/%s/file" % uuid.uuid4(), workspace=ctx.key,
                                   path="top.txt"))
    expect(res, r, 400, None, "unknown snapshot")
    r = ctx.c.request("POST", "/remote-workspace/snapshots", {"workspace": ctx.key, "paths": ["big", "top.txt"]})
    if expect(res, r, 201, None, "POST snapshots with paths"):
        sel = r.json()
        res.eq("selected", sorted(f["path"] for f in sel["files"]), ["big/blob.bin", "top.txt"])
        sp = "/remote-workspace/snapshots/%s/file" % sel["id"]
        r = ctx.c.request("GET", ctx.q(sp, workspace=ctx.key, path="out/result.txt"))
        expect(res, r, 400, None, "a path outside the selection")
        r = ctx.c.request("GET", ctx.q(sp, workspace=ctx.key, path="top.txt"))
        res.check(r.status == 200 and r.body == b"changed\n", "the selected top.txt is the new one: %s" % r.brief())


@case("3 DELETE /remote-workspace empties it (root kept); snapshots still serve their bytes")
def c_delete(ctx, res):
    r = ctx.c.request("DELETE", ctx.q("/remote-workspace", workspace=ctx.key))
    expect(res, r, 200, {"deleted": True}, "DELETE")
    res.check(os.path.isdir(ctx.ws_dir()) and os.listdir(ctx.ws_dir()) == [],
              "the root is not an empty directory: %r" % (os.path.isdir(ctx.ws_dir()) and os.listdir(ctx.ws_dir())))
    r, files = ctx.listing()
    res.eq("listing after DELETE", files, {})
    snap = ctx.fixtures.get("snap")
    if snap:
        r = ctx.c.request("GET", ctx.q("/remote-workspace/snapshots/%s/file" % snap["id"], workspace=ctx.key,
                                       path="big/blob.bin"))
        res.check(r.status == 200 and r.body == ctx.fixtures.get("blob"), "snapshot after DELETE: %s" % r.brief())


# ---- 4: skill packages --------------------------------------------------------------------------

skill, bundle_id = S.skill, S.bundle_id


@case("4 skill packages: POST checks the bundle and answers {id, root}; GET re-verifies")
def c_skills(ctx, res):
    skills = [skill("data-tools", {"SKILL.md": b"# Data tools\n", "scripts/run.py": b"print('skill-script')\n"}),
              skill("alpha", {"SKILL.md": b"# Alpha\n"}, revision=3, version="2.1")]
    bid = bundle_id(skills)
    r = ctx.c.request("GET", "/skill-packages/%s" % bid)
    expect(res, r, 200, {"id": bid}, "GET before POST")
    r = ctx.c.request("POST", "/skill-packages", {"skills": skills})
    if not expect(res, r, 200, None, "POST"):
        return
    j = r.json()
    res.eq("id", j.get("id"), bid)
    res.check(isinstance(j.get("root"), str) and j["root"].endswith(bid), "root: %r" % j)
    ctx.fixtures["skills_root"] = j.get("root")
    r = ctx.c.request("GET", "/skill-packages/%s" % bid)
    expect(res, r, 200, {"id": bid, "root": j.get("root")}, "GET after POST")
    r = ctx.c.request("POST", "/skill-packages", {"skills": skills})
    expect(res, r, 200, {"id": bid, "root": j.get("root")}, "POST again (held)")
    bad = []
    s = skill("x", {"SKILL.md": b"a"})
    s["files"][0]["hash"] = hashlib.sha256(b"b").hexdigest()
    bad.append(("file hash", [s]))
    s = skill("x", {"SKILL.md": b"a"})
    s["files"][0]["size"] = 2
    bad.append(("file size", [s]))
    bad.append(("no SKILL.md", [skill("x", {"README.md": b"a"})]))
    s = skill("x", {"SKILL.md": b"a"})
    s["hash"] = "0" * 64
    bad.append(("package hash", [s]))
    bad.append(("duplicate ids", [skill("x", {"SKILL.md": b"a"}), skill("x", {"SKILL.md": b"b"})]))
    bad.append(("empty list", []))
    bad.append(("bad id", [skill("Bad_Id", {"SKILL.md": b"a"})]))
    bad.append(("path escape", [skill("x", {"SKILL.md": b"a", "../evil": b"e"})]))
    s = skill("x", {"SKILL.md": b"a"})
    s["revision"] = 0
    bad.append(("revision 0", [s]))
    s = skill("x", {"SKILL.md": b"a"})
    s["files"][0]["content"] = "not base64!"
    bad.append(("bad base64", [s]))
    for what, sk in bad:
        r = ctx.c.request("POST", "/skill-packages", {"skills": sk})
        res.check(r.status == 400 and isinstance((r.json() or {}).get("error"), str), "%s: %s" % (what, r.brief()))
    store = os.path.dirname(j.get("root") or "/nonexistent/x")
    res.eq("entries of the store", sorted(os.listdir(store)) if os.path.isdir(store) else None, [bid])
    expect(res, ctx.c.request("GET", "/skill-packages/zz"), 400, None, "GET a malformed id")
    expect(res, ctx.c.request("GET", "/skill-packages/%s" % bid, auth=False), 401, UNAUTHORIZED, "no token")


@case("4 skills in a run: /skills read-only, /skill-extensions writable into the workspace, variables")
def c_skills_run(ctx, res):
    root = ctx.fixtures.get("skills_root")
    if not root:
        return res.fail("no package from the previous case")
    code = ("import os, subprocess\n"
            "print(open('/skills/data-tools/SKILL.md').read().strip())\n"
            "print(subprocess.run(['python3', '/skills/data-tools/scripts/run.py'], capture_output=True, text=True).stdout.strip())\n"
            "try:\n    open('/skills/data-tools/new.txt', 'w')\n    print('skills-writable')\n"
            "except OSError as e:\n    print('skills-ro', e.errno)\n"
            "open(os.path.join(os.environ['SCIENCEDISCOVERY_SKILL_EXTENSIONS_DIR'], 'ext.txt'), 'w').write('ext')\n"
            "print(os.environ['SCIENCEDISCOVERY_SKILLS_DIR'])\n")
    r = ctx.c.execute(code, ctx.key, skillPackagesRoot=root)
    if not expect(res, r, 200, None, "execute with skillPackagesRoot"):
        return
    j = r.json()
    res.eq("stdout", j.get("stdout"), "# Data tools\nskill-script\nskills-ro 30\n/skills\n")
    ev = j.get("environmentVariables") or {}
    res.eq("SCIENCEDISCOVERY_SKILLS_DIR", ev.get("SCIENCEDISCOVERY_SKILLS_DIR"), "/skills")
    res.eq("SCIENCEDISCOVERY_SKILL_EXTENSIONS_DIR", ev.get("SCIENCEDISCOVERY_SKILL_EXTENSIONS_DIR"), "/skill-extensions")
    p = os.path.join(ctx.ws_dir(), ".sciencediscovery/skill-extensions/ext.txt")
    res.check(os.path.isfile(p), "the extension file is not in the workspace")
    r = ctx.c.execute_shell("ls /skills/alpha", ctx.key, skillPackagesRoot=root)
    if expect(res, r, 200, None, "execute-shell with skillPackagesRoot"):
        res.eq("ls", r.json().get("stdout"), "SKILL.md\n")
    for bad in ("/etc", root + "/..", os.path.dirname(root) + "/" + "0" * 64, "relative"):
        r = ctx.c.execute("print(1)", ctx.key, skillPackagesRoot=bad)
        res.check(r.status == 400, "skillPackagesRoot %r: %s" % (bad, r.brief()))
    # A package changed on disk (here by the test, as root or as its owner) is not served any more.
    victim = os.path.join(root, "alpha", "SKILL.md")
    try:
        os.chmod(os.path.join(root, "alpha"), 0o755)
        os.chmod(victim, 0o644)
        with open(victim, "ab") as f:
            f.write(b"tampered\n")
        os.chmod(victim, 0o444)
    except OSError as e:
        return res.fail("could not change the package on disk: %s" % e)
    bid = os.path.basename(root)
    r = ctx.c.request("GET", "/skill-packages/%s" % bid)
    expect(res, r, 200, {"id": bid}, "GET of a changed package")
    r = ctx.c.execute("print(1)", ctx.key, skillPackagesRoot=root)
    res.check(r.status == 400, "a run with a changed package: %s" % r.brief())


# ---- 5: a restart --------------------------------------------------------------------------------

@case("5 after a restart of the daemon, the snapshot still serves its files")
def c_restart(ctx, res):
    snap = ctx.fixtures.get("snap")
    if not snap:
        return res.fail("no snapshot from case 3")
    rc, _ = ctx.d.terminate()
    res.eq("exit status after SIGTERM", rc, 0)
    ctx.d.start()
    r = ctx.c.request("GET", ctx.q("/remote-workspace/snapshots/%s/file" % snap["id"], workspace=ctx.key,
                                   path="out/result.txt"))
    res.check(r.status == 200 and r.body == b"computed\n", "after the restart: %s" % r.brief())



# ---- 6: quota of uploads, listings off the loop, retention of exports and packages --------------

QUOTA_ERROR = {"error": "Remote workspace exceeds its execution quota"}


@case("6 quota: an upload past the workspace's total is refused, nothing lost; a replaced file counts its growth")
def c_quota(ctx, res):
    expect(res, ctx.c.request("DELETE", ctx.q("/remote-workspace", workspace=ctx.key)), 200, {"deleted": True},
           "DELETE first")
    a = os.urandom(5 << 20)
    expect(res, ctx.put("q/a.bin", a), 201, {"path": "q/a.bin", "size": len(a)}, "PUT 5M")
    expect(res, ctx.put("q/b.bin", b"b" * (4 << 20)), 400, QUOTA_ERROR, "PUT 4M more (9M > 8M)")
    r = ctx.transfer("q/c.bin", [b"c" * (1 << 20)] * 4)
    expect(res, r, 400, QUOTA_ERROR, "transfer 4M more")
    for name in ("b.bin", "c.bin"):
        res.check(not os.path.exists(os.path.join(ctx.ws_dir(), "q", name)), "q/%s was written" % name)
    res.check(not leftovers(ctx), "temporary files left: %s" % leftovers(ctx))
    r = ctx.get_file("q/a.bin")
    res.check(r.status == 200 and r.body == a, "q/a.bin after the refusals: %s" % r.brief())
    # Replaced: only its growth counts (6M in place of 5M: 6M in all).
    a6 = os.urandom(6 << 20)
    expect(res, ctx.put("q/a.bin", a6, conflict="overwrite"), 201, {"path": "q/a.bin", "size": len(a6)},
           "overwrite 5M with 6M")
    expect(res, ctx.put("q/d.bin", b"d" * (2 << 20)), 201, None, "PUT 2M (exactly 8M in all)")
    expect(res, ctx.put("q/e.bin", b"e"), 400, QUOTA_ERROR, "PUT one byte more")
    expect(res, ctx.put("q/a.bin", b"x" * (7 << 20), conflict="overwrite"), 400, QUOTA_ERROR,
           "overwrite 6M with 7M (9M in all)")
    r = ctx.get_file("q/a.bin")
    res.check(r.status == 200 and r.body == a6, "q/a.bin after the refused overwrite: %s" % r.brief())
    expect(res, ctx.put("q/a.bin", b"small", conflict="overwrite"), 201, None, "overwrite 6M with 5 bytes")
    expect(res, ctx.c.request("DELETE", ctx.q("/remote-workspace", workspace=ctx.key)), 200, {"deleted": True},
           "DELETE after")


@case("6 listings walk in a thread: /health answers while big listings are under way (by order)")
def c_list_thread(ctx, res):
    key = ctx.key + "-big"
    expect(res, ctx.put("seed.txt", b"s", key=key), 201, None, "PUT a first file")
    top = os.path.join(ctx.ws_dir(key), "many")
    os.makedirs(top, exist_ok=True)
    n = 80000
    for i in range(n):
        os.close(os.open(os.path.join(top, "f%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
    done, results = [], {}

    def listing(i):
        r = ctx.c.request("GET", ctx.q("/remote-workspace/files", workspace=key), timeout=90.0)
        results[i] = r
        done.append(i)
    threads = [threading.Thread(target=listing, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    health = ctx.c.request("GET", "/health", timeout=60.0)
    pending = 3 - len(done)
    for t in threads:
        t.join(95.0)
    res.check(health.status == 200, "/health: %s" % health.brief())
    res.check(pending > 0, "/health answered only after every listing")
    for i in range(3):
        r = results.get(i)
        res.check(r is not None and r.status == 200 and len(r.json() or []) == n + 1,
                  "listing %d: %s" % (i, r.brief() if r else None))
    shutil.rmtree(top)                  # the test's own files (the daemon may run as another user)
    expect(res, ctx.c.request("DELETE", ctx.q("/remote-workspace", workspace=key), timeout=60.0), 200,
           {"deleted": True}, "DELETE the big workspace")


def snapshot_records(ctx):
    d = os.path.join(ctx.d.state, "sd-snapshots")
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json"))


@case("6 exports: the oldest beyond MaxExports=3 and those past ExportRetentionSec= are deleted")
def c_export_retention(ctx, res):
    expect(res, ctx.put("keep.txt", b"kept\n", conflict="overwrite"), 201, None, "PUT keep.txt")
    old = ctx.fixtures.get("snap", {}).get("id")
    ids = []
    for i in range(4):
        r = ctx.c.request("POST", "/remote-workspace/snapshots", {"workspace": ctx.key})
        if not expect(res, r, 201, None, "export %d" % i):
            return
        ids.append(r.json()["id"])

    def serves(sid):
        r = ctx.c.request("GET", ctx.q("/remote-workspace/snapshots/%s/file" % sid, workspace=ctx.key,
                                       path="keep.txt"))
        return r.status == 200 and r.body == b"kept\n"
    res.eq("records kept", snapshot_records(ctx), sorted(ids[1:]))
    res.check(not serves(ids[0]), "the oldest export still serves")
    if old:
        res.check(old not in snapshot_records(ctx), "case 3's export is still kept")
    for sid in ids[1:]:
        res.check(serves(sid), "export %s does not serve" % sid)
    # One made old (its record's time): gone after the next export, whatever the count.
    rec = os.path.join(ctx.d.state, "sd-snapshots", ids[1] + ".json")
    t = time.time() - 30 * 86400
    os.utime(rec, (t, t))
    r = ctx.c.request("POST", "/remote-workspace/snapshots", {"workspace": ctx.key})
    expect(res, r, 201, None, "export after aging one")
    res.eq("records after aging", snapshot_records(ctx), sorted(ids[2:] + [r.json()["id"]]))
    res.check(not serves(ids[1]), "the aged export still serves")


@case("6 skill packages: least recently used beyond MaxSkillPackages=3 deleted, never one a run holds")
def c_skill_retention(ctx, res):
    held = [skill("held", {"SKILL.md": b"# Held\n"})]
    r = ctx.c.request("POST", "/skill-packages", {"skills": held})
    if not expect(res, r, 200, None, "POST the held package"):
        return
    root, hid = r.json()["root"], r.json()["id"]
    store = os.path.dirname(root)
    out = {}

    def run():
        out["r"] = ctx.c.execute_shell("touch started; while [ ! -e go ]; do sleep 0.1; done; cat /skills/held/SKILL.md",
                                       ctx.key, timeout=90.0, skillPackagesRoot=root)
    t = threading.Thread(target=run)
    t.start()
    started = os.path.join(ctx.ws_dir(), "started")
    for _ in range(600):
        if os.path.exists(started) or not t.is_alive():
            break
        time.sleep(0.1)
    res.check(os.path.exists(started), "the run holding the package did not start")
    others = []
    for i in range(4):
        r = ctx.c.request("POST", "/skill-packages", {"skills": [skill("q%d" % i, {"SKILL.md": b"# Q%d\n" % i})]})
        expect(res, r, 200, None, "POST q%d" % i)
        others.append(r.json().get("id"))
        res.check(os.path.isdir(root), "the held package was deleted after q%d" % i)
    held_store = sorted(e for e in os.listdir(store) if not e.startswith("."))
    res.eq("store while held", held_store, sorted([hid] + others[1:]))
    expect(res, ctx.c.request("GET", "/skill-packages/%s" % others[0]), 200, {"id": others[0]}, "GET q0 (deleted)")
    open(os.path.join(ctx.ws_dir(), "go"), "w").close()
    t.join(95.0)
    r = out.get("r")
    res.check(r is not None and r.status == 200 and (r.json() or {}).get("stdout") == "# Held\n",
              "the held run: %s" % (r.brief() if r else None))
    os.unlink(os.path.join(ctx.ws_dir(), "go"))
    os.unlink(started)
    r = ctx.c.request("POST", "/skill-packages", {"skills": [skill("q9", {"SKILL.md": b"# Q9\n"})]})
    expect(res, r, 200, None, "POST q9 after the run")
    res.check(not os.path.exists(root), "the package no run holds any more is kept")
    expect(res, ctx.c.request("GET", "/skill-packages/%s" % hid), 200, {"id": hid}, "GET the released package")
    res.eq("store after", sorted(e for e in os.listdir(store) if not e.startswith(".")),
           sorted(others[2:] + [r.json().get("id")]))



def main():
    # MaxWorkspaceBytes=8M: their maxWorkspaceBytes, the cap of a PUT body (below MaxUploadFileBytes).
    return S.test_main(__doc__, CASES, BUDGET, lambda st: Ctx(st.d),
                       config=L.CONFIG_TEXT.replace("[Quota]\n", "[Quota]\nMaxWorkspaceBytes=8M\n")
                       + "\n[ScienceDiscovery]\nMaxExports=3\nMaxSkillPackages=3\n")


if __name__ == "__main__":
    sys.exit(main())
