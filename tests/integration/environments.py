#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Managed scientific environments end to end (issue 12, DESIGN.md §14): a real daemon, real
provisioning sandboxes, real runs. Offline: no index, no internet.

    environments.py --daemon BUILD/src/sandbox-runnerd [--run-as self|auto|USER] [--verbose] [--keep-tmp]

The daemon is started with [Environments] Bootstrap=python-base, Offline=yes and a wheelhouse the
test builds itself (tests/helpers/make-wheelhouse.py: srtest_alpha 1.0 and 2.0, srtest_beta 1.0,
the client wheel srtest_gamma 0.1; plus srtest_probe 1.0 made here, whose .pth file runs a probe
in every interpreter of its prefix, the provisioner's own included). Cases, in order:

  - python-base, built offline from Debian's python3-numpy/-pandas/-scipy/-matplotlib: a run with
    "environment": "python-base" imports them from /opt/science-env and computes; the host's
    /usr/bin/python3 cannot be run there; /opt/science-env is read-only (pip install fails);
  - the validation tables: option injection, remote URLs, paths, bad index URLs, presets and CRAN
    in offline mode, conda channels outside the allowlist, base environments read-only, unknown
    environments (before anything is created);
  - a named environment from the wheelhouse and a client wheel uploaded to a workspace: revision
    1, the revision record's versions and SHA-256 values (checked against the files);
  - an update while a run holds the old prefix: the run keeps revision 1, a new run sees 2;
  - the provisioner killed (SIGKILL) mid-setup: the old revision stays live, the state is failed,
    no build directory is left, a retry builds it;
  - the daemon killed (SIGKILL) mid-setup: the old prefix stays live, the next start resumes;
  - the provisioning sandbox: the probe (run by the provisioner's interpreter) cannot write
    outside the new prefix, cannot reach the host's loopback or any network, runs unprivileged
    under seccomp with no new privileges;
  - r-base on first use (409 environment_not_ready, then ready): Rscript with data.table;
  - removal.

Output is TAP; nothing is skipped.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
from environments_lib import EnvClient, probe_wheel_files, py              # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import HttpError, now, trunc                              # noqa: E402
from testlib import Result                                                 # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUDGET = 540.0
SETUP_WAIT = 300.0      # a base environment under load

spec = importlib.util.spec_from_file_location("make_wheelhouse",
                                              os.path.join(HERE, "..", "helpers", "make-wheelhouse.py"))
WH = importlib.util.module_from_spec(spec)
spec.loader.exec_module(WH)

PROBE = r'''
"""srtest_probe: what a package's code can do while its environment is provisioned."""
import json, os, socket

HOST_PATHS = %(host_paths)s
LISTENER = %(listener)d


def _try(fn):
    try:
        fn()
        return "ok"
    except Exception as e:                                  # noqa: BLE001
        return "%%s: %%s" %% (type(e).__name__, e)


def _write(path):
    def w():
        with open(path, "w") as f:
            f.write("probe")
    return w


def _connect(addr):
    def c():
        s = socket.create_connection(addr, timeout=2)
        s.close()
    return c


def probe():
    prefix = "/opt/science-env"
    report = os.path.join(prefix, "probe-report.json")
    if not os.access(prefix, os.W_OK) or os.path.exists(report):
        return                       # a run (read-only prefix), or done already
    r = {"uid": os.getuid(), "writes": {}, "connects": {}}
    for p in ["/usr/srtest-probe", "/etc/srtest-probe", "/var/lib/dpkg/srtest-probe",
              "/srv/wheelhouse/srtest-probe", "/srtest-probe"] + HOST_PATHS:
        r["writes"][p] = _try(_write(p))
    r["writes"]["/tmp/srtest-probe"] = _try(_write("/tmp/srtest-probe"))
    r["writes"]["/workspace/srtest-probe"] = _try(_write("/workspace/srtest-probe"))
    r["connects"]["127.0.0.1:%%d" %% LISTENER] = _try(_connect(("127.0.0.1", LISTENER)))
    r["connects"]["10.255.255.1:80"] = _try(_connect(("10.255.255.1", 80)))
    r["resolve"] = _try(lambda: socket.getaddrinfo("example.org", 443))
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Seccomp", "NoNewPrivs", "CapEff"):
                r[k] = v.strip()
    with open(report, "w") as f:
        json.dump(r, f)
'''


def probe_wheel(path, host_paths, listener):
    init = PROBE % {"host_paths": json.dumps(host_paths), "listener": listener}
    WH.write_wheel(path, probe_wheel_files(init, WH.record_hash))


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Ctx(EnvClient):
    def __init__(self, d, budget, wh):
        super().__init__(d, budget, "env-main", "envtest")
        self.wh = wh


# ---- cases ------------------------------------------------------------------------------------

def case_base_ready(ctx, res):
    e = ctx.wait_phase("python-base", timeout=SETUP_WAIT)
    if not res.check(e is not None, "python-base is not in GET /environments/setup"):
        return
    res.note("python-base: %s" % json.dumps(e))
    res.eq("python-base phase", e.get("phase"), "ready")
    res.eq("python-base revision", e.get("revision"), 1)
    st, h = ctx.req("GET", "/health")
    res.eq("/health status", st, 200)
    envs = (h or {}).get("environments", {})
    res.check(envs.get("ready", 0) >= 1, "/health.environments.ready is not >= 1: %r" % envs)
    res.check(any(s.get("name") == "python-base" for s in envs.get("setup", [])),
              "/health.environments.setup lacks python-base")
    st, j = ctx.req("GET", "/environments/python-base/revisions")
    rev = ((j or {}).get("revisions") or [{}])[-1]
    names = {p.get("name"): p for p in rev.get("packages", [])}
    for n in ("numpy", "pandas", "scipy", "matplotlib"):
        p = names.get(n)
        if res.check(p is not None, "revision 1 of python-base lacks %s" % n):
            res.check(str(p.get("source", "")).startswith("debian:python3-"), "%s's source: %r" % (n, p.get("source")))
    res.check("python-venv" in str(rev.get("provisioner")), "provisioner: %r" % rev.get("provisioner"))
    size = rev.get("sizeBytes")
    res.note("python-base: %s bytes, built in %s ms" % (size, rev.get("durationMs")))
    print("# python-base: size %s bytes, build %s ms" % (size, rev.get("durationMs")))


BASE_SCRIPT = """
import json, numpy, pandas, scipy, scipy.linalg, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
a = numpy.array([[3.0, 1.0], [1.0, 2.0]])
x = scipy.linalg.solve(a, numpy.array([9.0, 8.0]))
df = pandas.DataFrame({"g": ["a", "a", "b"], "v": [1, 2, 5]})
s = df.groupby("g")["v"].sum().to_dict()
fig = plt.figure(); plt.plot([1, 2, 3]); fig.savefig("/tmp/p.png")
print(json.dumps({"x": [round(v, 6) for v in x], "s": s, "numpy": numpy.__file__,
                  "png": len(open("/tmp/p.png", "rb").read())}))
"""


def case_base_run(ctx, res):
    st, j = ctx.execute({"language": "python", "code": BASE_SCRIPT, "environment": "python-base"}, path="/execute")
    res.eq("status", st, 200)
    res.eq("exitCode", j.get("exitCode"), 0)
    res.eq("environment", j.get("environment"), {"name": "python-base", "revision": 1})
    try:
        out = json.loads(j.get("stdout", "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        res.fail("no JSON on stdout: %r / %r" % (trunc(j.get("stdout"), 300), trunc(j.get("stderr"), 600)))
        return
    res.eq("solve", out["x"], [2.0, 3.0])
    res.eq("groupby", out["s"], {"a": 3, "b": 5})
    res.check(out["numpy"].startswith("/opt/science-env/lib/"), "numpy from %r" % out["numpy"])
    res.check(out["png"] > 100, "matplotlib wrote %r bytes" % out["png"])


def case_base_shape(ctx, res):
    cmd = ("command -v python3; command -v pip; "
           "if [ -x /usr/bin/python3 ]; then echo host-python-executable; fi; "
           "/usr/bin/python3 -c 'print(1)' 2>/dev/null && echo host-python-ran; "
           "cat /usr/bin/python3 >/dev/null 2>&1 && echo host-python-readable; "
           "touch /opt/science-env/x 2>&1; "
           "echo $PATH")
    st, j = ctx.execute({"command": cmd, "environment": "python-base"})
    res.eq("status", st, 200)
    out = j.get("stdout", "")
    lines = out.splitlines()
    res.note("stdout: " + trunc(out, 800))
    res.check(lines[:2] == ["/opt/science-env/bin/python3", "/opt/science-env/bin/pip"],
              "python3/pip not from the environment: %r" % lines[:2])
    for bad in ("host-python-executable", "host-python-ran", "host-python-readable"):
        res.check(bad not in out, "the host's interpreter is reachable: %s" % bad)
    res.check("Read-only file system" in out, "touch under /opt/science-env did not fail read-only")
    res.check(lines and lines[-1].startswith("/opt/science-env/bin:"), "PATH: %r" % (lines[-1:],))
    # pip install of a local wheel: the read-only prefix refuses it.
    wheel = os.path.join(ctx.wh, "client", "srtest_gamma-0.1-py3-none-any.whl")
    with open(wheel, "rb") as f:
        st, _ = ctx.req("PUT", "/workspaces/env-main/files/srtest_gamma-0.1-py3-none-any.whl", raw=f.read())
    res.eq("upload", st, 201)
    st, j = ctx.execute({"command": "pip install --no-index --no-deps srtest_gamma-0.1-py3-none-any.whl",
                         "environment": "python-base"})
    res.check(j.get("exitCode") not in (0, None), "pip install into the environment succeeded")
    res.check("Read-only file system" in j.get("stderr", "") + j.get("stdout", ""),
              "pip's error is not the read-only one: %r" % trunc(j.get("stderr"), 500))
    # Without an environment: no /opt/science-env, the host's python.
    st, j = ctx.execute({"command": "command -v python3; test -e /opt/science-env && echo has-env"})
    res.eq("no environment: python3", j.get("stdout", "").splitlines()[:1], ["/usr/bin/python3"])
    res.check("has-env" not in j.get("stdout", ""), "/opt/science-env exists in a run without an environment")
    res.check("environment" not in j, "the answer names an environment: %r" % j.get("environment"))


PUT_REFUSALS = [
    # (what, name, body, status, code)
    ("option injection --index-url", "bad", {"kind": "python", "packages": ["--index-url=https://evil.example/simple"]}, 400, "package_spec_invalid"),
    ("option -e", "bad", {"kind": "python", "packages": ["-e", "pkg"]}, 400, "package_spec_invalid"),
    ("--extra-index-url", "bad", {"kind": "python", "packages": ["--extra-index-url", "https://evil.example"]}, 400, "package_spec_invalid"),
    ("remote URL", "bad", {"kind": "python", "packages": ["https://evil.example/x-1.0-py3-none-any.whl"]}, 400, "package_spec_invalid"),
    ("git+ URL", "bad", {"kind": "python", "packages": ["git+https://evil.example/x.git"]}, 400, "package_spec_invalid"),
    ("file: URL", "bad", {"kind": "python", "packages": ["file:///etc/passwd"]}, 400, "package_spec_invalid"),
    ("direct reference", "bad", {"kind": "python", "packages": ["x @ https://evil.example/x.whl"]}, 400, "package_spec_invalid"),
    ("absolute path", "bad", {"kind": "python", "packages": ["/tmp/x.whl"]}, 400, "package_spec_invalid"),
    ("relative path", "bad", {"kind": "python", "packages": ["./x"]}, 400, "package_spec_invalid"),
    ("marker", "bad", {"kind": "python", "packages": ["x; os_name=='posix'"]}, 400, "package_spec_invalid"),
    ("http index", "bad", {"kind": "python", "source": {"indexUrl": "http://pypi.example/simple"}}, 400, "index_url_invalid"),
    ("index with credentials", "bad", {"kind": "python", "source": {"indexUrl": "https://u:p@pypi.example/simple"}}, 400, "index_url_invalid"),
    ("index with query", "bad", {"kind": "python", "source": {"indexUrl": "https://pypi.example/simple?x=1"}}, 400, "index_url_invalid"),
    ("index too long", "bad", {"kind": "python", "source": {"indexUrl": "https://pypi.example/" + "a" * 2100}}, 400, "index_url_invalid"),
    ("unknown preset", "bad", {"kind": "python", "source": {"preset": "nope"}}, 400, "index_url_invalid"),
    ("conda without huaweicloud", "bad", {"kind": "conda", "source": {"preset": "huaweicloud"}}, 400, "index_url_invalid"),
    ("valid index, offline", "bad", {"kind": "python", "source": {"indexUrl": "https://pypi.example/simple"}}, 400, "source_offline_unsupported"),
    ("preset, offline", "bad", {"kind": "python", "source": {"preset": "tuna"}}, 400, "source_offline_unsupported"),
    ("CRAN, offline", "bad", {"kind": "r", "packages": ["data.table"]}, 400, "source_offline_unsupported"),
    ("conda channel not allowed", "bad", {"kind": "conda", "channels": ["evil-channel"], "packages": ["numpy"]}, 400, "channel_not_allowed"),
    ("allowed conda channel, offline", "bad", {"kind": "conda", "channels": ["conda-forge"], "packages": ["numpy"]}, 400, "source_offline_unsupported"),
    ("unknown field", "bad", {"kind": "python", "extra": 1}, 400, "invalid_request"),
    ("unknown kind", "bad", {"kind": "julia"}, 400, "invalid_request"),
    ("bad name", "Bad_Name", {"kind": "python"}, 400, "invalid_request"),
    ("a wheel outside any workspace", "bad", {"kind": "python", "wheels": [{"workspaceId": "env-main", "path": "../x.whl"}]}, 400, "invalid_request"),
    ("base read-only", "python-base", {"kind": "python", "packages": ["srtest_beta"]}, 409, "environment_read_only"),
]


def case_validation(ctx, res):
    for what, name, body, status, code in PUT_REFUSALS:
        st, j = ctx.req("PUT", "/environments/" + name, body)
        if not res.check(st == status and (j or {}).get("error") == code,
                         "%s: expected %d %s, got %d %r" % (what, status, code, st, j)):
            continue
        res.check(bool((j or {}).get("message")), "%s: no message" % what)
    st, j = ctx.req("DELETE", "/environments/python-base")
    res.check(st == 409 and (j or {}).get("error") == "environment_read_only", "DELETE python-base: %d %r" % (st, j))
    st, j = ctx.req("GET", "/environments")
    res.check(not any(e.get("name") == "bad" for e in (j or {}).get("environments", [])),
              "a refused PUT left an environment behind")
    res.check(not os.path.exists(os.path.join(ctx.env_root(), "envs", "bad")), "a refused PUT left envs/bad")
    # An execution naming an unknown environment: 400 before anything is created.
    ws = "env-never-" + secrets.token_hex(3)
    st, j = ctx.execute({"command": "true", "environment": "no-such-env", "workspaceId": ws})
    res.check(st == 400 and j.get("error") == "environment_unknown", "unknown environment: %d %r" % (st, j))
    res.check(not os.path.exists(ctx.d.workspace_path(ws)), "the refused execution created its workspace")
    st, j = ctx.execute({"command": "true", "environment": "Not/A/Name"})
    res.check(st == 400 and j.get("error") == "invalid_request", "bad environment name: %d %r" % (st, j))


def case_named_create(ctx, res):
    body = {"kind": "python", "packages": ["srtest_alpha<2"],
            "wheels": [{"workspaceId": "env-main", "path": "srtest_gamma-0.1-py3-none-any.whl"}]}
    st, j = ctx.req("PUT", "/environments/sci", body)
    if not res.check(st == 202 and j.get("state") == "building" and j.get("setupId"), "PUT sci: %d %r" % (st, j)):
        return
    st2, j2 = ctx.req("PUT", "/environments/sci", body)
    res.check(st2 == 409 and (j2 or {}).get("error") == "environment_busy", "a second PUT while building: %d %r" % (st2, j2))
    e = ctx.wait_phase("sci", revision=1)
    if not res.check(e and e.get("phase") == "ready", "sci did not become ready: %r" % e):
        return
    revs = ctx.revision_packages("sci")
    res.eq("revisions", [r for r, _ in revs], [1])
    pk = revs[-1][1] if revs else {}
    alpha, gamma = pk.get("srtest_alpha", {}), pk.get("srtest_gamma", {})
    res.eq("alpha version", alpha.get("version"), "1.0")
    res.eq("alpha sha256", alpha.get("sha256"), sha256_file(os.path.join(ctx.wh, "wheelhouse", "srtest_alpha-1.0-py3-none-any.whl")))
    res.eq("gamma version", gamma.get("version"), "0.1")
    client = sha256_file(os.path.join(ctx.wh, "client", "srtest_gamma-0.1-py3-none-any.whl"))
    res.eq("gamma sha256", gamma.get("sha256"), client)
    res.check(os.path.isfile(os.path.join(ctx.env_root(), "wheels", client, "srtest_gamma-0.1-py3-none-any.whl")),
              "the client wheel is not in hash storage")
    st, j = ctx.execute({"command": py("import srtest_alpha, srtest_gamma; print(srtest_alpha.VERSION, srtest_gamma.VERSION)"),
                         "environment": "sci"})
    res.eq("run", j.get("stdout"), "1.0 0.1\n")
    res.eq("answer's environment", j.get("environment"), {"name": "sci", "revision": 1})


def case_update_in_flight(ctx, res):
    ws = "env-hold"
    go = os.path.join(ctx.d.workspace_path(ws), "go")
    cmd = (py("import srtest_alpha; print(srtest_alpha.VERSION)") + "; "
           "while [ ! -e go ]; do sleep 0.05; done; " + py("import srtest_alpha; print(srtest_alpha.VERSION)"))
    st, j = ctx.execute({"command": cmd, "environment": "sci", "workspaceId": ws, "timeoutMs": 240000},
                        path="/shell-executions")
    if not res.check(st in (200, 201, 202) and j.get("executionId"), "managed run: %d %r" % (st, j)):
        return
    run_id = j["executionId"]
    # The update: srtest_alpha 2.0 (and srtest_beta with it), the client wheel kept by reference.
    st, j = ctx.req("GET", "/environments/sci")
    wheels = (j or {}).get("wheels", [])
    st, j = ctx.req("PUT", "/environments/sci", {"packages": ["srtest_alpha>=2"], "wheels": wheels})
    res.check(st == 202, "PUT sci (update): %d %r" % (st, j))
    e = ctx.wait_phase("sci", revision=2)
    res.check(e and e.get("phase") == "ready" and e.get("revision") == 2, "update not ready: %r" % e)
    r1 = os.path.join(ctx.env_root(), "envs", "sci", "r1")
    res.check(os.path.isdir(r1), "revision 1's prefix is gone while a run holds it")
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION, srtest_alpha.beta_version())"),
                         "environment": "sci"})
    res.eq("a run after the update", j.get("stdout"), "2.0 1.0\n")
    res.eq("its environment", j.get("environment"), {"name": "sci", "revision": 2})
    with open(go, "w"):
        pass
    deadline = now() + 60
    rec = None
    while now() < deadline:
        st, rec = ctx.req("GET", "/shell-executions/" + run_id)
        if rec and rec.get("state") not in ("running", None):
            break
        time.sleep(0.2)
    st, log = ctx.req("GET", "/shell-executions/%s/logs?stream=stdout" % run_id)
    r = L.http(ctx.d.port, "GET", "/shell-executions/%s/logs?stream=stdout" % run_id, [ctx.bearer()], b"", timeout=10)
    res.eq("the run that held revision 1", r.body.decode(), "1.0\n1.0\n")
    res.eq("its record's environment", (rec or {}).get("environment"), {"name": "sci", "revision": 1})
    # Revision 1's prefix goes once the run is freed (finished runs linger a while); the record:
    revs = ctx.revision_packages("sci")
    res.eq("revisions", [r for r, _ in revs], [1, 2])
    pk = revs[-1][1] if revs else {}
    res.eq("alpha 2.0", pk.get("srtest_alpha", {}).get("version"), "2.0")
    res.eq("beta sha256", pk.get("srtest_beta", {}).get("sha256"),
           sha256_file(os.path.join(ctx.wh, "wheelhouse", "srtest_beta-1.0-py3-none-any.whl")))


def case_kill_provisioner(ctx, res):
    st, j = ctx.req("PUT", "/environments/sci", {"packages": ["srtest_alpha<2"]})
    res.check(st == 202, "PUT sci: %d %r" % (st, j))
    pids = ctx.wait_provisioner()
    if not res.check(pids, "no provisioner process was seen"):
        return
    for p in pids:
        os.kill(p, signal.SIGKILL)
    e = ctx.wait_phase("sci", phases=("failed", "ready"))
    res.check(e and e.get("phase") == "failed", "after SIGKILL of the provisioner: %r" % e)
    res.eq("live revision", (e or {}).get("revision"), 2)
    res.check("killed by signal 9" in str((e or {}).get("error")),
              "error: %r" % (e or {}).get("error"))
    res.eq("build directories left", ctx.build_dirs("sci"), [])
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION)"), "environment": "sci"})
    res.eq("a run after the failed setup", j.get("stdout"), "2.0\n")
    # Retry: the same request, serialised, without a restart.
    st, j = ctx.req("POST", "/environments/setup/retry?name=sci")
    res.check(st == 202 and "sci" in (j or {}).get("retried", []), "retry: %d %r" % (st, j))
    e = ctx.wait_phase("sci", revision=3)
    res.check(e and e.get("phase") == "ready", "the retry did not build revision 3: %r" % e)
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION)"), "environment": "sci"})
    res.eq("a run after the retry", j.get("stdout"), "1.0\n")


def case_kill_daemon(ctx, res):
    st, j = ctx.req("PUT", "/environments/sci", {"packages": ["srtest_alpha>=2"]})
    res.check(st == 202, "PUT sci: %d %r" % (st, j))
    pids = ctx.wait_provisioner()
    if not res.check(pids, "no provisioner process was seen"):
        return
    ctx.d.kill()
    live = os.path.join(ctx.env_root(), "envs", "sci", "live")
    res.eq("live after SIGKILL of the daemon", os.readlink(live), "r3")
    deadline = now() + 10
    while now() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.05)
    res.check(not any(os.path.exists("/proc/%d" % p) for p in pids), "the provisioner outlived the daemon")
    ctx.d.start(wait=30)
    st, j = ctx.req("GET", "/environments/sci")
    res.check(j and j.get("revision") == 3, "after the restart the live revision is %r" % (j or {}).get("revision"))
    e = ctx.wait_phase("sci", revision=4)
    res.check(e and e.get("phase") == "ready", "the interrupted setup was not resumed: %r" % e)
    res.eq("build directories left", ctx.build_dirs("sci"), [])
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION)"), "environment": "sci"})
    res.eq("a run after the resumed setup", j.get("stdout"), "2.0\n")
    res.eq("its environment", j.get("environment"), {"name": "sci", "revision": 4})


def case_provisioning_sandbox(ctx, res):
    st, j = ctx.req("PUT", "/environments/probe", {"kind": "python", "packages": ["srtest_probe"]})
    res.check(st == 202, "PUT probe: %d %r" % (st, j))
    e = ctx.wait_phase("probe", revision=1)
    if not res.check(e and e.get("phase") == "ready", "probe not ready: %r" % e):
        return
    report_path = os.path.join(ctx.env_root(), "envs", "probe", "live", "probe-report.json")
    try:
        with open(report_path) as f:
            rep = json.load(f)
    except OSError as e:
        res.fail("no probe report in the prefix (%s): the probe did not run in the provisioner" % e)
        return
    res.note("report: " + json.dumps(rep))
    res.check(rep.get("uid") != 0, "the provisioner ran as uid 0")
    res.eq("Seccomp", rep.get("Seccomp"), "2")
    res.eq("NoNewPrivs", rep.get("NoNewPrivs"), "1")
    res.eq("CapEff", rep.get("CapEff"), "0000000000000000")
    for path, outcome in rep.get("writes", {}).items():
        if path in ("/tmp/srtest-probe", "/workspace/srtest-probe"):
            # The step's own tmpfs and scratch directory: discarded with it (checked below).
            res.eq("write to " + path, outcome, "ok")
        else:
            res.check(outcome != "ok", "the provisioner could write %s" % path)
    for path in ctx.host_paths:
        res.check(not os.path.exists(path), "%s exists on the host" % path)
    for addr, outcome in rep.get("connects", {}).items():
        res.check(outcome != "ok", "the provisioner reached %s" % addr)
    res.check(rep.get("resolve") != "ok", "the provisioner resolved a name")
    res.eq("connections the host listener saw", ctx.listener_hits, [])
    work = os.path.join(ctx.env_root(), "work")
    res.eq("scratch directories left", os.listdir(work) if os.path.isdir(work) else [], [])


def case_r_base(ctx, res):
    code = ("library(data.table); dt <- data.table(x=1:4, g=c(1,1,2,2)); cat(dt[, sum(x), by=g]$V1, '\\n'); "
            "cat(.libPaths(), sep='\\n')")
    st, j = ctx.execute({"language": "r", "code": code, "environment": "r-base"}, path="/execute")
    res.check(st == 409 and j.get("error") == "environment_not_ready",
              "first use of r-base: expected 409 environment_not_ready, got %d %r" % (st, j))
    e = ctx.wait_phase("r-base", revision=1)
    if not res.check(e and e.get("phase") == "ready", "r-base not ready: %r" % e):
        return
    st, j = ctx.execute({"language": "r", "code": code, "environment": "r-base"}, path="/execute")
    res.eq("status", st, 200)
    out = j.get("stdout", "").splitlines()
    res.note("stdout: %r stderr: %r" % (j.get("stdout"), trunc(j.get("stderr"), 800)))
    res.eq("data.table", out[:1], ["3 7 "])
    res.check("/usr/lib/R/site-library" not in out, "the host's site library is on .libPaths(): %r" % out)
    res.check(any(p.startswith("/opt/science-env") for p in out), ".libPaths() lacks the environment: %r" % out)
    st, j = ctx.execute({"command": "command -v Rscript; /usr/bin/Rscript -e 1 2>/dev/null && echo host-R-ran",
                         "environment": "r-base"})
    res.eq("Rscript", j.get("stdout", "").splitlines()[:1], ["/opt/science-env/bin/Rscript"])
    res.check("host-R-ran" not in j.get("stdout", ""), "the host's Rscript ran")
    revs = ctx.revision_packages("r-base")
    pk = revs[-1][1] if revs else {}
    res.check("data.table" in pk and str(pk["data.table"].get("source", "")).startswith("debian:r-cran-data.table"),
              "r-base's record lacks data.table from Debian: %r" % list(pk))


def case_python_base_from_wheelhouse(ctx, res):
    """[Environments] PythonBase=wheelhouse: after a restart, python-base is built again from the
    wheelhouse (its live revision meanwhile the Debian one)."""
    st, _ = ctx.d.terminate()
    res.check(st is not None, "the daemon did not stop on SIGTERM")
    with open(ctx.d.conf, "a") as f:
        f.write("[Environments]\nPythonBase=wheelhouse\nPythonBasePackages=\nPythonBasePackages=srtest_alpha<2\n")
    ctx.d.start(wait=30)
    st, j = ctx.req("GET", "/environments/python-base")
    res.check(st == 200 and j.get("revision") == 1, "python-base after the restart: %d %r" % (st, j))
    e = ctx.wait_phase("python-base", revision=2)
    if not res.check(e and e.get("phase") == "ready", "python-base was not built again: %r" % e):
        return
    revs = ctx.revision_packages("python-base")
    pk = revs[-1][1] if revs else {}
    res.check("numpy" not in pk, "revision 2 still holds numpy")
    res.check(str(pk.get("srtest_alpha", {}).get("source", "")).startswith("wheelhouse:"),
              "srtest_alpha's source: %r" % pk.get("srtest_alpha"))
    st, j = ctx.execute({"command": py("import srtest_alpha; print(srtest_alpha.VERSION)"), "environment": "python-base"})
    res.eq("a run with python-base", j.get("stdout"), "1.0\n")
    res.eq("its environment", j.get("environment"), {"name": "python-base", "revision": 2})


def case_remove(ctx, res):
    st, j = ctx.req("DELETE", "/environments/sci")
    res.check(st == 202, "DELETE sci: %d %r" % (st, j))
    st, j = ctx.req("GET", "/environments/sci")
    res.eq("GET after DELETE", st, 404)
    st, j = ctx.execute({"command": "true", "environment": "sci"})
    res.check(st == 400 and j.get("error") == "environment_unknown", "a run naming it: %d %r" % (st, j))
    d = os.path.join(ctx.env_root(), "envs", "sci")
    deadline = now() + 20
    while now() < deadline and os.path.exists(d):
        time.sleep(0.1)
    res.check(not os.path.exists(d), "envs/sci is still on disk")


CASES_LIST = [
    ("python-base is built offline from Debian's packages after start-up", case_base_ready),
    ("a run with python-base imports numpy, pandas, scipy, matplotlib from /opt/science-env and computes", case_base_run),
    ("python-base's sandbox: the host's interpreter hidden, the prefix read-only (pip install fails), PATH", case_base_shape),
    ("validation: each refusal its own code, nothing created", case_validation),
    ("a named environment from the wheelhouse and a client wheel: revision 1 with versions and hashes", case_named_create),
    ("an update while a run holds revision 1: the run keeps it, a new run sees revision 2", case_update_in_flight),
    ("SIGKILL of the provisioner: the old revision stays live, failed, no build left; a retry builds it", case_kill_provisioner),
    ("SIGKILL of the daemon mid-setup: the old prefix stays live, the restart resumes the setup", case_kill_daemon),
    ("the provisioning sandbox: no write outside the prefix, no network, unprivileged, seccomp", case_provisioning_sandbox),
    ("r-base on first use: 409 environment_not_ready, then Rscript with data.table", case_r_base),
    ("PythonBase=wheelhouse: after a restart python-base is built again from the wheelhouse", case_python_base_from_wheelhouse),
    ("DELETE: gone from the API, its prefixes from the disk", case_remove),
    ("SIGTERM during a setup: the daemon exits promptly and leaves no provisioning sandbox", "stop"),
]


def case_stop(ctx, res):
    st, j = ctx.req("PUT", "/environments/late", {"kind": "python", "packages": ["srtest_beta"]})
    res.check(st == 202, "PUT late: %d %r" % (st, j))
    pids = ctx.wait_provisioner()
    res.check(pids, "no provisioner process was seen")
    status, took = ctx.d.terminate(grace=20)
    res.check(status is not None, "the daemon did not exit within 20 s of SIGTERM")
    res.note("exit status %r after %.2fs" % (status, took))
    deadline = now() + 10
    while now() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.05)
    res.check(not any(os.path.exists("/proc/%d" % p) for p in pids), "a provisioner outlived the daemon")
    res.eq("build directories left", ctx.build_dirs("late"), [])


def listener(ctx):
    """A TCP listener on the host's loopback that the provisioning sandbox must not reach."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.settimeout(0.5)
    ctx.listener_hits = []

    def loop():
        while not ctx.budget.expired.is_set():
            try:
                c, a = s.accept()
                ctx.listener_hits.append(a)
                c.close()
            except OSError:
                continue
    threading.Thread(target=loop, daemon=True).start()
    return s.getsockname()[1]


CASES = [(n, case_stop if f == "stop" else f) for n, f in CASES_LIST]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    args = ap.parse_args()

    out = sys.stdout
    tap = L.Tap(out)
    out.write("1..%d\n" % len(CASES))
    out.flush()
    budget = L.Budget(BUDGET)
    run_as = T.resolve_run_as(args.run_as)

    d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as, config="")
    wh = os.path.join(d.tmp, "wh")
    ctx = Ctx(d, budget, wh)
    port = listener(ctx)
    ctx.host_paths = [os.path.join(d.tmp, "srtest-probe-escape"), os.path.join(d.state, "srtest-probe-escape")]
    for sub, name, version, requires, init in WH.WHEELS:
        os.makedirs(os.path.join(wh, sub), exist_ok=True)
        WH.write_wheel(os.path.join(wh, sub, "%s-%s-py3-none-any.whl" % (name, version)),
                       WH.wheel_bytes_files(name, version, requires, init))
    probe_wheel(os.path.join(wh, "wheelhouse", "srtest_probe-1.0-py3-none-any.whl"), ctx.host_paths, port)
    for root, dirs, files in os.walk(wh):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    with open("/usr/bin/true", "rb") as f:
        true_sha = hashlib.sha256(f.read()).hexdigest()
    with open(d.conf, "w") as f:
        f.write("[Environments]\nBootstrap=python-base\nOffline=yes\nWheelhouse=%s\nChannels=conda-forge\n"
                "Micromamba=/usr/bin/true\nMicromambaSHA256=%s\nSetupTimeoutSec=300\n"
                "[Runner]\nIdleExitSec=0\n[Execution]\nAllowUnscoped=yes\nDefaultTimeoutSec=60\n"
                % (os.path.join(wh, "wheelhouse"), true_sha))
    T.chown_tree(d.tmp, run_as)
    out.write("# daemon runs as uid %s\n" % T.run_as_uid(run_as))
    if L.start_or_fail_all(d, CASES, tap, Result, 400) is None:
        d.cleanup()
        return 1

    def watchdog():
        if not budget.expired.wait(max(0.0, budget.left())):
            budget.expired.set()
            out.write("# time budget of %.0fs exhausted: killing the daemon\n" % BUDGET)
            out.flush()
            d.kill()
    threading.Thread(target=watchdog, daemon=True).start()

    t_start = now()
    try:
        for name, fn in CASES:
            res = Result(name)
            t0 = now()
            if budget.expired.is_set():
                res.fail("not run: the time budget is exhausted")
            elif not d.alive() and fn is not case_stop:
                res.fail("the daemon is not running; log tail:\n%s" % d.log_tail(1500))
            else:
                try:
                    fn(ctx, res)
                except Exception as e:                              # noqa: BLE001
                    res.fail("%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
                if not d.alive() and fn is not case_stop:
                    res.fail("the daemon died; log tail:\n%s" % d.log_tail(2000))
            res.note("(%.2fs)" % (now() - t0))
            tap.emit(res, verbose=args.verbose)
    finally:
        budget.expired.set()
        if tap.failed:
            L.write_log_tail(d, out)
        d.cleanup()
        if args.keep_tmp:
            out.write("# kept %s\n" % d.tmp)
    return tap.summary(len(CASES), now() - t_start)


if __name__ == "__main__":
    sys.exit(main())
