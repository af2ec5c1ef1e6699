#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the ScienceDiscovery dialect's scientific environments (docs/api.md 15.6,
notes §8) on our environments (docs/environments.md), offline.

    /usr/bin/python3 tests/integration/sciencediscovery-env.py --daemon BUILD/src/sandbox-runnerd
                                                               [--run-as self] [--verbose] [--keep-tmp]

The daemon (our own API and --listen sciencediscovery=...) runs with [Environments] Offline=yes,
the wheelhouse of tests/helpers/make-wheelhouse.py (srtest_alpha 1.0/2.0, srtest_beta 1.0, the
client wheel srtest_gamma 0.1) and PythonBase=wheelhouse with srtest_alpha<2, so that their
starter-python (our python-base) is built in seconds without Debian's packages or a network.

Checks: /health's scientificEnvs; GET /environments and /environment-revisions in their shapes
(packages as their runner records them, localWheels as objects); every revision's /snapshot bytes
match its hash and size and are their runner's revision document; a display name kept and
returned; runs resolve the starter, a current
revision, refuse a historical or unknown one; POST /environments, install (an index package and
a client wheel from the runner workspace), uninstall, each answered when its revision exists;
a managed shell run with environmentId; refusals (read-only starter, wrong manager, unknown
package); DELETE; /environment-setup; an R run through starter-r (our r-base, built on first
use).  Prints TAP, exits 1 on any failure.  Bounded: < 280 s; traffic only to 127.0.0.1.
"""

import base64
import hashlib
import json
import os
import sys
import time
import uuid

sys.dont_write_bytecode = True     # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import execute_lib as L                                                    # noqa: E402
import sd_lib as S                                                      # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import now, trunc                                 # noqa: E402

BUDGET = 270.0
SETUP = 150.0           # a setup's answer under load
CASES, case = T.case_registry()
CTX = None


def expect(res, r, status, what):
    return res.check(r.status == status, "%s: expected HTTP %d, got %s" % (what, status, r.brief()))


def env_by_id(ctx, eid):
    r = ctx.sd("GET", "/environments")
    return next((e for e in (r.json() or []) if e.get("id") == eid), None) if r.status == 200 else None


def epoch():
    """Their permission epoch as their API sends it once the runner's environments are in use:
    no revision of its own (the request's environmentRevisionId, or none: the starter)."""
    e = S.Ctx.execute_body(CTX, "")["permissionEpoch"]
    e.pop("environmentRevisionId")
    return e


def execute(ctx, code, **kw):
    kw.setdefault("permissionEpoch", epoch())
    return ctx.execute(code, **kw)


def run(ctx, res, code, what, language="python", **kw):
    b, r = execute(ctx, code, language=language, timeout=60.0, **kw)
    if not expect(res, r, 200, what):
        return None
    j = r.json()
    res.check(j.get("exitCode") == 0, "%s: exit %s, stderr %s" % (what, j.get("exitCode"), trunc(j.get("stderr"))))
    return j


@case("1 sd env health: scientificEnvs available; startersReady once starter-python is built")
def c_health(ctx, res):
    t0 = now()
    j = {}
    while now() - t0 < SETUP:
        j = ctx.sd("GET", "/health", auth=False).json().get("scientificEnvs") or {}
        if j.get("startersReady"):
            break
        time.sleep(0.3)
    res.note("starter ready after %.1f s" % (now() - t0))
    res.eq("scientificEnvs", j, {"available": True, "enabled": True, "languages": ["python", "r"],
                                 "provisioner": "sandbox-runner", "startersReady": True})


@case("2 sd env list: starter-python in their Environment shape")
def c_list(ctx, res):
    r = ctx.sd("GET", "/environments")
    if not expect(res, r, 200, "GET /environments"):
        return
    e = next((x for x in r.json() if x.get("id") == "starter-python"), None)
    if not res.check(e is not None, "no starter-python: %s" % r.brief()):
        return
    res.eq("keys", sorted(e), ["createdAt", "currentRevisionId", "id", "kind", "language", "name", "updatedAt"])
    res.eq("kind", e.get("kind"), "starter")
    res.eq("language", e.get("language"), "python")
    res.eq("currentRevisionId", e.get("currentRevisionId"), "starter-python@1")
    res.check(S.ISO.match(e.get("createdAt") or ""), "createdAt %r" % e.get("createdAt"))
    expect(res, ctx.sd("GET", "/environments", auth=False), 401, "no token")


@case("2 sd env revisions: their shape; every snapshot's bytes match its hash and size")
def c_revisions(ctx, res):
    r = ctx.sd("GET", "/environment-revisions")
    if not expect(res, r, 200, "GET /environment-revisions"):
        return
    revs = r.json()
    res.check(any(x.get("id") == "starter-python@1" for x in revs), "no starter-python@1: %s" % r.brief())
    for x in revs:
        for k in ("environmentId", "language", "languageVersion", "packages", "channels", "packageSpecHash",
                  "platform", "provisioner", "runnerVersion", "createdAt", "snapshot"):
            res.check(k in x, "%s lacks %s" % (x.get("id"), k))
        s = ctx.sd("GET", "/environment-revisions/%s/snapshot" % x["id"])
        if expect(res, s, 200, "snapshot of " + x["id"]):
            res.eq(x["id"] + " snapshot sha256", hashlib.sha256(s.body).hexdigest(), x["snapshot"]["hash"])
            res.eq(x["id"] + " snapshot size", len(s.body), x["snapshot"]["size"])
            res.eq("content-type", s.header("content-type"), "application/json")
    base = next((x for x in revs if x.get("id") == "starter-python@1"), {})
    # Their runner's forms: "<name>=<version>" per installed distribution, "<manager>:<spec>" per
    # requirement; never our "name==version".
    res.check("srtest_alpha=1.0" in base.get("packages", []), "starter packages: %s" % base.get("packages"))
    res.check("pip:srtest_alpha<2" in base.get("packages", []), "starter requirements: %s" % base.get("packages"))
    res.check(not any("==" in p for p in base.get("packages", [])), "name==version: %s" % base.get("packages"))
    check_snapshot(ctx, res, base)
    res.check(base.get("languageVersion", "").startswith("3."), "languageVersion %r" % base.get("languageVersion"))
    expect(res, ctx.sd("GET", "/environment-revisions/nope@1/snapshot"), 404, "unknown revision's snapshot")


def check_snapshot(ctx, res, rev):
    """The snapshot bytes of @rev: their runner's revision document, pretty-printed by two, with
    the revision's fields; its SHA-256 and length are the revision's snapshot."""
    s = ctx.sd("GET", "/environment-revisions/%s/snapshot" % rev.get("id"))
    if not expect(res, s, 200, "snapshot of %s" % rev.get("id")):
        return None
    res.eq("snapshot sha256 and size", (hashlib.sha256(s.body).hexdigest(), len(s.body)),
           (rev["snapshot"]["hash"], rev["snapshot"]["size"]))
    text = s.body.decode()
    res.check(text.startswith('{\n  "channels": ') and text.endswith("\n}\n"), "layout: %r" % text[:80])
    doc = json.loads(text)
    want = ["channels", "createdAt", "environmentId", "format", "language", "packages", "platform", "provisioner",
            "revisionId"] + (["localWheels"] if rev.get("localWheels") else [])
    res.eq("snapshot keys", sorted(doc), sorted(want))
    res.eq("snapshot fields", {k: doc.get(k) for k in want},
           dict({k: rev.get(k) for k in want if k not in ("format", "revisionId")},
                format="science-agent-environment-revision-v1", revisionId=rev.get("id")))
    return doc


@case("3 sd env runs: the starter by default, a current revision, never a historical or unknown one")
def c_runs(ctx, res):
    code = "import srtest_alpha, sys\nprint(srtest_alpha.VERSION, sys.prefix)\n"
    j = run(ctx, res, code, "no revision")
    if j:
        res.eq("stdout", j.get("stdout"), "1.0 /opt/science-env\n")
        res.eq("environmentRevisionId", j.get("environmentRevisionId"), "starter-python@1")
    j = run(ctx, res, code, "starter-python@1", environmentRevisionId="starter-python@1")
    if j:
        res.eq("environmentRevisionId", j.get("environmentRevisionId"), "starter-python@1")
    for rid in ("starter-python@9", "nope@1", "rev-1", "starter-r@x"):
        b, r = execute(ctx, "print(1)", environmentRevisionId=rid)
        if expect(res, r, 400, rid):
            res.eq(rid, r.json(), {"error": "Unknown environment revision; select a current environment"})


@case("4 sd env create, install (index + client wheel), uninstall: answered with the new revision")
def c_change(ctx, res):
    r = ctx.sd("POST", "/environments", {"name": "Sci Env", "language": "python"}, timeout=SETUP)
    if not expect(res, r, 201, "POST /environments"):
        return
    e = r.json()
    res.eq("created", (e.get("id"), e.get("name"), e.get("kind"), e.get("language"), e.get("currentRevisionId")),
           ("sci-env", "Sci Env", "task", "python", "sci-env@1"))
    ctx.shared["env"] = e.get("id")
    res.eq("listed with their name", (env_by_id(ctx, "sci-env") or {}).get("name"), "Sci Env")
    # Kept beside our environment: its displayName on our own API.
    r = L.http(ctx.d.port, "GET", "/environments/sci-env", [("Authorization", "Bearer " + ctx.d.token)])
    if expect(res, r, 200, "our GET /environments/sci-env"):
        res.eq("our name and displayName", (r.json().get("name"), r.json().get("displayName")), ("sci-env", "Sci Env"))
    r = ctx.sd("POST", "/environments/sci-env/install", {"packages": ["srtest_beta"], "manager": "pip"}, timeout=SETUP)
    if expect(res, r, 201, "install srtest_beta"):
        res.eq("revision", r.json().get("id"), "sci-env@2")
        res.check({"srtest_beta=1.0", "pip:srtest_beta"} <= set(r.json().get("packages", [])),
                  "packages %s" % r.json().get("packages"))
        check_snapshot(ctx, res, r.json())
    res.eq("their name kept by an install", (env_by_id(ctx, "sci-env") or {}).get("name"), "Sci Env")
    # The client wheel: written into the runner workspace by a run, then installed from there.
    wheel = "srtest_gamma-0.1-py3-none-any.whl"
    data = ctx.wheel_bytes
    b, r = execute(ctx, "mkdir -p dist\necho %s | base64 -d > dist/%s\n" % (base64.b64encode(data).decode(), wheel))
    b2 = dict(b, executionId=str(uuid.uuid4()))
    b2.pop("language")
    r = ctx.sd("POST", "/execute-shell", b2, signed=True, timeout=30)
    expect(res, r, 200, "writing the wheel")
    r = ctx.sd("POST", "/environments/sci-env/install",
               {"packages": ["dist/" + wheel], "runnerWorkspaceKey": ctx.key, "workspaceRoot": "/ignored"}, timeout=SETUP)
    if expect(res, r, 201, "install the client wheel"):
        rev = r.json()
        sha = hashlib.sha256(data).hexdigest()
        res.eq("revision", rev.get("id"), "sci-env@3")
        res.eq("localWheels", rev.get("localWheels"),
               [{"content": {"hash": sha, "size": len(data)}, "distribution": "srtest-gamma", "filename": wheel,
                 "manager": "pip", "sourcePath": wheel, "version": "0.1"}])
        pkgs = rev.get("packages", [])
        res.check("srtest_gamma=0.1" in pkgs, "packages %s" % pkgs)
        rec = [json.loads(p[len("pip:wheel:"):]) for p in pkgs if p.startswith("pip:wheel:")]
        res.eq("the wheel's package record", rec,
               [{"distribution": "srtest-gamma", "path": wheel, "sha256": sha, "version": "0.1"}])
        check_snapshot(ctx, res, rev)
    j = run(ctx, res, "import srtest_beta, srtest_gamma\nprint(srtest_beta.VERSION, srtest_gamma.VERSION)\n",
            "sci-env@3 run", environmentRevisionId="sci-env@3")
    if j:
        res.eq("stdout", j.get("stdout"), "1.0 0.1\n")
    b, r = execute(ctx, "print(1)", environmentRevisionId="sci-env@2")
    if expect(res, r, 400, "historical"):
        res.eq("historical", r.json(), {"error": "Historical environment revisions are audit-only; select the "
                                                 "latest environment"})
    r = ctx.sd("POST", "/environments/sci-env/uninstall", {"packages": ["srtest-beta"]}, timeout=SETUP)
    if expect(res, r, 201, "uninstall srtest-beta"):
        res.eq("revision", r.json().get("id"), "sci-env@4")
        res.check(not any(p.startswith(("srtest_beta=", "pip:srtest_beta")) for p in r.json().get("packages", [])),
                  "still there: %s" % r.json().get("packages"))
    expect(res, ctx.sd("POST", "/environments/sci-env/uninstall", {"packages": ["srtest_beta"]}), 400,
           "uninstall what is not installed")


@case("4 sd env refusals: read-only starter, wrong manager, bad bodies, unknown environment")
def c_refusals(ctx, res):
    for what, path, body, status in (
            ("starter read-only", "/environments/starter-python/install", {"packages": ["srtest_beta"]}, 400),
            ("cran into python", "/environments/sci-env/install", {"packages": ["x"], "manager": "cran"}, 400),
            ("empty packages", "/environments/sci-env/install", {"packages": []}, 400),
            ("option injection", "/environments/sci-env/install", {"packages": ["--index-url=https://x.test/"]}, 400),
            ("wheel without key", "/environments/sci-env/install", {"packages": ["a-1-py3-none-any.whl"]}, 400),
            ("wheel out of the workspace", "/environments/sci-env/install",
             {"packages": ["../../../etc/a-1-py3-none-any.whl"], "runnerWorkspaceKey": ctx.key}, 400),
            ("absolute wheel path", "/environments/sci-env/install",
             {"packages": ["/etc/a-1-py3-none-any.whl"], "runnerWorkspaceKey": ctx.key}, 400),
            ("unknown environment", "/environments/nope/install", {"packages": ["srtest_beta"]}, 404),
            ("base's own name", "/environments/python-base/install", {"packages": ["srtest_beta"]}, 404),
            ("create without language", "/environments", {"name": "x"}, 400),
            ("create with a bad base", "/environments", {"name": "x", "language": "python",
                                                         "baseEnvironmentId": "nope"}, 400)):
        r = ctx.sd("POST", path, body)
        if expect(res, r, status, what):
            res.check(isinstance((r.json() or {}).get("error"), str) and len(r.json()) == 1, "%s: %s" % (what, r.brief()))


@case("5 sd env managed shell with environmentId: its latest revision, reported in the result")
def c_shell(ctx, res):
    body, r = S.shell_submit(ctx, res, "python3 -c 'import srtest_gamma; print(srtest_gamma.VERSION)'\n",
                             environmentId="sci-env")
    if not expect(res, r, 202, "submit"):
        return
    j = S.shell_wait(ctx, res, body, limit=60)
    if j:
        res.eq("state", j.get("state"), "completed")
        res.eq("stdout", (j.get("result") or {}).get("stdout"), "0.1\n")
        res.eq("environmentRevisionId", (j.get("result") or {}).get("environmentRevisionId"), "sci-env@4")
    body, r = S.shell_submit(ctx, res, "true\n", environmentId="nope")
    expect(res, r, 400, "unknown environmentId")


@case("6 sd env setup: GET ready; POST needs confirmed:true")
def c_setup(ctx, res):
    r = ctx.sd("GET", "/environment-setup")
    if expect(res, r, 200, "GET /environment-setup"):
        j = r.json()
        res.eq("state", j.get("state"), "ready")
        res.check("srtest_alpha" in j.get("starterPackages", []), "starterPackages %s" % j.get("starterPackages"))
        res.eq("offline", j.get("offline"), True)
    expect(res, ctx.sd("POST", "/environment-setup", {}), 400, "unconfirmed")
    expect(res, ctx.sd("POST", "/environment-setup", {"confirmed": True}), 202, "confirmed")


@case("7 sd env R: starter-r on first use (400 not ready), then an R run in it")
def c_r(ctx, res):
    b, r = execute(ctx, "cat(1 + 1, '\\n')", language="r")
    if expect(res, r, 400, "first R run"):
        res.check("starter-r is not ready" in r.json().get("error", ""), "first R run: %s" % r.brief())
    t0 = now()
    while now() - t0 < SETUP and not (env_by_id(ctx, "starter-r") or {}).get("currentRevisionId"):
        time.sleep(0.3)
    res.note("starter-r after %.1f s" % (now() - t0))
    j = run(ctx, res, "cat(1 + 1, Sys.getenv('R_ENVIRON_USER'), '\\n')", "R run", language="r")
    if j:
        res.eq("stdout", j.get("stdout"), "2 /dev/null \n")
        res.eq("environmentRevisionId", j.get("environmentRevisionId"), "starter-r@1")
        res.eq("language", j.get("language"), "r")
    b, r = execute(ctx, "print(1)", environmentRevisionId="starter-r@1")
    expect(res, r, 400, "a python run with an R revision")


@case("8 sd env delete: {deleted}, gone from the list, its revision refused")
def c_delete(ctx, res):
    r = ctx.sd("DELETE", "/environments/sci-env")
    if expect(res, r, 200, "DELETE"):
        res.eq("answer", r.json(), {"deleted": "sci-env"})
    res.eq("listed", env_by_id(ctx, "sci-env"), None)
    b, r = execute(ctx, "print(1)", environmentRevisionId="sci-env@4")
    expect(res, r, 400, "its revision")
    expect(res, ctx.sd("DELETE", "/environments/starter-python"), 400, "a starter")



def prepare(st):
    d = st.d
    st.wh = os.path.join(d.tmp, "wh")
    envs = S.build_wheelhouse(st.wh)
    with open(d.conf, "w") as f:
        f.write(L.CONFIG_TEXT.replace("MaxOutputBytes=4K", "MaxOutputBytes=64K").replace("Bootstrap=\n", "") + envs)
    T.chown_tree(d.tmp, st.run_as)


def make_ctx(st):
    global CTX
    ctx = CTX = S.Ctx(st.d, st.args.verbose)
    ctx.shared = {}
    with open(os.path.join(st.wh, "client", "srtest_gamma-0.1-py3-none-any.whl"), "rb") as f:
        ctx.wheel_bytes = f.read()
    return ctx


def main():
    return S.test_main(__doc__, CASES, BUDGET, make_ctx, prepare=prepare)


if __name__ == "__main__":
    sys.exit(main())
