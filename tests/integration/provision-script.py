#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of the in-sandbox provisioner src/environment/sandbox-runner-provision.py,
run directly (not sandboxed) the way the daemon runs it: `/usr/bin/python3 -I -B SCRIPT < plan`,
with temporary prefixes instead of /opt/science-env.

    /usr/bin/python3 tests/integration/provision-script.py --script SCRIPT --wheelhouse HELPER
                                           [--verbose] [--keep-tmp] [--only SUBSTRING]

Cases: the python base from Debian's numpy/pandas/scipy/matplotlib, offline (imports from the
prefix, not the host's dist-packages; a small computation; the result and the progress lines;
its build time and size as TAP diagnostics); named environments from the test wheelhouse
(tests/helpers/make-wheelhouse.py: srtest_alpha<2, then srtest_alpha>=2 with its dependency and
a client wheel, versions, sources and sha256s); an r environment with r-cran-data.table (its
site library only); the Debian closure over a synthetic dpkg database (alternatives, virtual
packages, version constraints, arch-qualified file lists, paths outside dist-packages or with
../ in them); failures (an unknown package offline, a plan that is not JSON, option injection,
a client wheel that does not match its hash, CRAN packages in an r plan).  Prints TAP, exits 1
on any failure.  Offline: no network at all; everything under one temporary directory."""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T                                                        # noqa: E402

PYTHON = "/usr/bin/python3"
BASE_DEBS = ["python3-numpy", "python3-pandas", "python3-scipy", "python3-matplotlib"]
CASES, case = T.case_registry()


class Run:
    """One run of the provisioner: exit status, stdout's JSON lines, stderr."""

    def __init__(self, rc, out, err, seconds):
        self.rc = rc
        self.out = out
        self.err = err
        self.seconds = seconds
        self.lines = []
        self.bad_lines = []
        for ln in out.splitlines():
            try:
                self.lines.append(json.loads(ln))
            except ValueError:
                self.bad_lines.append(ln)
        self.progress = [o["progress"] for o in self.lines if "progress" in o]
        results = [o["result"] for o in self.lines if "result" in o]
        self.result = results[-1] if results else None
        self.n_results = len(results)

    def last_err(self):
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    def pkg(self, name):
        for p in (self.result or {}).get("packages", []):
            if p.get("name", "").replace("-", "_").lower() == name:
                return p
        return None


class Ctx:
    def __init__(self, args, tmp):
        self.script = args.script
        self.tmp = tmp
        self.verbose = args.verbose
        out = os.path.join(tmp, "wheels-built")
        subprocess.run([PYTHON, "-I", "-B", args.wheelhouse, out], check=True,
                       stdout=subprocess.DEVNULL)
        self.wheelhouse = os.path.join(out, "wheelhouse")
        self.client = os.path.join(out, "client", "srtest_gamma-0.1-py3-none-any.whl")
        self.wheelhouse_builder = args.wheelhouse
        self.n = 0

    def prefix(self, name):
        self.n += 1
        return os.path.join(self.tmp, "%d-%s" % (self.n, name))

    def provision(self, plan, raw=None, timeout=280):
        data = raw if raw is not None else json.dumps(plan).encode()
        t0 = time.monotonic()
        p = subprocess.run([PYTHON, "-I", "-B", self.script], input=data, capture_output=True,
                           timeout=timeout)
        return Run(p.returncode, p.stdout.decode("utf-8", "replace"),
                   p.stderr.decode("utf-8", "replace"), time.monotonic() - t0)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_success(res, run):
    """The shape every successful run has: exit 0, only JSON on stdout, progress monotonic and
    ending at its total, one result line, last."""
    if not res.eq("exit status (stderr tail: %s)" % run.err[-1500:], run.rc, 0):
        return False
    res.eq("non-JSON stdout lines", run.bad_lines, [])
    res.eq("result lines", run.n_results, 1)
    res.check(run.lines and "result" in run.lines[-1], "the result is not the last line")
    res.check(run.progress, "no progress lines")
    totals = {p.get("total") for p in run.progress}
    res.eq("progress totals", len(totals), 1)
    done = [p.get("done") for p in run.progress]
    res.check(all(b > a for a, b in zip(done, done[1:])), "progress not increasing: %r" % done)
    res.check(done and done[-1] == run.progress[-1].get("total"),
              "progress does not end at its total: %r" % run.progress[-1:])
    res.check(all(isinstance(p.get("step"), str) and p["step"] for p in run.progress),
              "a progress line without a step")
    r = run.result or {}
    res.check(isinstance(r.get("sizeBytes"), int) and r["sizeBytes"] > 0, "no sizeBytes: %r" %
              r.get("sizeBytes"))
    res.check(isinstance(r.get("packages"), list), "no packages list")
    for p in r.get("packages", []):
        res.check(all(isinstance(p.get(k), str) and p[k] for k in ("name", "version", "source")),
                  "package entry incomplete: %r" % p)
    return res.ok


def py(prefix, code):
    return subprocess.run([os.path.join(prefix, "bin", "python"), "-I", "-c", code],
                          capture_output=True, text=True, timeout=120, cwd="/")


def dpkg_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True,
                          text=True, check=True).stdout.strip()


BASE_CODE = r"""
import os, sys
import numpy, pandas, scipy, scipy.linalg, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
x = scipy.linalg.solve(numpy.array([[3.0, 1.0], [1.0, 2.0]]), numpy.array([9.0, 8.0]))
df = pandas.DataFrame({"g": [1, 1, 2, 2], "x": [1, 2, 3, 4]})
s = df.groupby("g")["x"].sum().tolist()
fig = plt.figure()
plt.plot([1, 2, 3], [1, 4, 9])
png = sys.argv[1] if len(sys.argv) > 1 else "/tmp/provision-test-%d.png" % os.getpid()
fig.savefig(png)
size = os.path.getsize(png)
os.unlink(png)
print("solve", "%.3f %.3f" % tuple(x))
print("groupby", s)
print("png", size > 1000)
for m in (numpy, pandas, scipy, matplotlib):
    print("file", m.__name__, m.__file__)
print("path", ":".join(sys.path))
"""


@case("python base from Debian packages, offline")
def t_base(ctx, res):
    prefix = ctx.prefix("python-base")
    run = ctx.provision({"kind": "python", "prefix": prefix, "python": PYTHON,
                         "debianPackages": BASE_DEBS, "packages": [], "wheels": [],
                         "findLinks": [], "indexUrl": None, "offline": True,
                         "dpkgRoot": "/var/lib/dpkg"})
    res.note("base build: %.1f s, sizeBytes %s, %d packages, %d progress steps"
             % (run.seconds, (run.result or {}).get("sizeBytes"),
                len((run.result or {}).get("packages", [])),
                run.progress[-1]["total"] if run.progress else 0))
    res.always = True
    if not check_success(res, run):
        return
    steps = [p["step"] for p in run.progress]
    for d in BASE_DEBS:
        res.check("copy " + d in steps, "no progress step for %s: %r" % (d, steps))
    res.check(steps[0] == "venv", "first step is not the venv: %r" % steps[:1])

    npkg = run.pkg("numpy")
    ver = dpkg_version("python3-numpy")
    if res.check(npkg, "numpy not in the result"):
        res.eq("numpy source", npkg["source"], "debian:python3-numpy " + ver)
        upstream = ver.split(":", 1)[-1].rsplit("-", 1)[0]
        res.eq("numpy version", npkg["version"], upstream)
    for name in ("pandas", "scipy", "matplotlib"):
        p = run.pkg(name)
        res.check(p and p["source"].startswith("debian:python3-" + name + " "),
                  "%s missing or not from Debian: %r" % (name, p))
    pip = run.pkg("pip")
    res.check(pip and pip["source"] == "venv", "pip is not from the venv: %r" % pip)
    res.check(run.result["provisioner"].startswith("python-venv (Python 3."),
              "provisioner: %r" % run.result["provisioner"])

    p = py(prefix, BASE_CODE)
    if not res.eq("computation exit status (stderr: %s)" % p.stderr[-1500:], p.returncode, 0):
        return
    lines = dict(ln.split(" ", 1) for ln in p.stdout.splitlines() if " " in ln and
                 not ln.startswith("file "))
    res.eq("scipy.linalg.solve", lines.get("solve"), "2.000 3.000")
    res.eq("pandas groupby", lines.get("groupby"), "[3, 7]")
    res.eq("matplotlib Agg png written", lines.get("png"), "True")
    site = os.path.join(prefix, "lib")
    for ln in p.stdout.splitlines():
        if ln.startswith("file "):
            _, mod, path = ln.split(" ", 2)
            res.check(path.startswith(site + "/"), "%s imported from %s, not the prefix" %
                      (mod, path))
    res.check("/usr/lib/python3/dist-packages" not in lines.get("path", "").split(":"),
              "the host's dist-packages is on sys.path: %s" % lines.get("path"))
    # Copies, not links: the base must not change when the host upgrades.
    init = os.path.join(os.path.dirname(
        [ln for ln in p.stdout.splitlines() if ln.startswith("file numpy ")][0].split(" ", 2)[2]),
        "__init__.py")
    st = os.lstat(init)
    res.check(not os.path.islink(init) and st.st_nlink == 1,
              "numpy/__init__.py is a link (nlink %d)" % st.st_nlink)
    res.check(os.stat("/usr/lib/python3/dist-packages/numpy/__init__.py").st_ino != st.st_ino,
              "numpy/__init__.py is the host's inode")


def wheel_plan(prefix, packages, wheels=(), find_links=None):
    return {"kind": "python", "prefix": prefix, "python": PYTHON, "debianPackages": [],
            "packages": list(packages), "wheels": list(wheels),
            "findLinks": [find_links] if find_links else [], "indexUrl": None, "offline": True,
            "dpkgRoot": "/var/lib/dpkg"}


@case("test wheelhouse is deterministic")
def t_wheelhouse(ctx, res):
    again = os.path.join(ctx.tmp, "wheels-again")
    subprocess.run([PYTHON, "-I", "-B", ctx.wheelhouse_builder, again], check=True,
                   stdout=subprocess.DEVNULL)
    names = sorted(os.listdir(ctx.wheelhouse))
    res.eq("wheelhouse", names, ["srtest_alpha-1.0-py3-none-any.whl",
                                 "srtest_alpha-2.0-py3-none-any.whl",
                                 "srtest_beta-1.0-py3-none-any.whl"])
    for n in names:
        res.eq(n, sha256_file(os.path.join(again, "wheelhouse", n)),
               sha256_file(os.path.join(ctx.wheelhouse, n)))


@case("named python env from the wheelhouse: srtest_alpha < 2")
def t_alpha1(ctx, res):
    prefix = ctx.prefix("alpha1")
    run = ctx.provision(wheel_plan(prefix, ["srtest_alpha < 2"], find_links=ctx.wheelhouse))
    if not check_success(res, run):
        return
    a = run.pkg("srtest_alpha")
    if res.check(a, "srtest_alpha not in the result"):
        res.eq("alpha version", a["version"], "1.0")
        res.eq("alpha source", a["source"], "wheelhouse:srtest_alpha-1.0-py3-none-any.whl")
        res.eq("alpha sha256", a.get("sha256"),
               sha256_file(os.path.join(ctx.wheelhouse, "srtest_alpha-1.0-py3-none-any.whl")))
    res.eq("beta installed", run.pkg("srtest_beta"), None)
    res.eq("steps", [p["step"] for p in run.progress], ["venv", "pip install", "check", "finished"])
    p = py(prefix, "import srtest_alpha; print(srtest_alpha.VERSION, srtest_alpha.__file__)")
    res.eq("import exit status (%s)" % p.stderr[-800:], p.returncode, 0)
    res.check(p.stdout.startswith("1.0 " + prefix + "/"), "import: %r" % p.stdout)


@case("named python env: srtest_alpha>=2, its dependency, a client wheel")
def t_alpha2(ctx, res):
    prefix = ctx.prefix("alpha2")
    digest = sha256_file(ctx.client)
    wdir = os.path.join(ctx.tmp, "wheels", digest)
    os.makedirs(wdir)
    wheel = os.path.join(wdir, os.path.basename(ctx.client))
    shutil.copyfile(ctx.client, wheel)
    run = ctx.provision(wheel_plan(prefix, ["srtest_alpha>=2"], [wheel], ctx.wheelhouse))
    if not check_success(res, run):
        return
    wh = ctx.wheelhouse
    want = {"srtest_alpha": ("2.0", "wheelhouse:", wh + "/srtest_alpha-2.0-py3-none-any.whl"),
            "srtest_beta": ("1.0", "wheelhouse:", wh + "/srtest_beta-1.0-py3-none-any.whl"),
            "srtest_gamma": ("0.1", "wheel:", ctx.client)}
    for name, (ver, kind, path) in want.items():
        p = run.pkg(name)
        if not res.check(p, "%s not in the result" % name):
            continue
        res.eq(name + " version", p["version"], ver)
        res.eq(name + " source", p["source"], kind + os.path.basename(path))
        res.eq(name + " sha256", p.get("sha256"), sha256_file(path))
    p = py(prefix, "import srtest_alpha, srtest_gamma; "
                   "print(srtest_alpha.VERSION, srtest_alpha.beta_version(), srtest_gamma.VERSION)")
    res.eq("imports (%s)" % p.stderr[-800:], p.stdout.strip(), "2.0 1.0 0.1")


@case("r env with r-cran-data.table")
def t_r(ctx, res):
    prefix = ctx.prefix("r-base")
    run = ctx.provision({"kind": "r", "prefix": prefix, "debianPackages": ["r-cran-data.table"],
                         "packages": [], "offline": True, "dpkgRoot": "/var/lib/dpkg"})
    if not check_success(res, run):
        return
    dt = run.pkg("data.table")
    if res.check(dt, "data.table not in the result"):
        ver = dpkg_version("r-cran-data.table")
        res.eq("data.table source", dt["source"], "debian:r-cran-data.table " + ver)
        res.check(ver.startswith(dt["version"]), "data.table version %r vs %r" %
                  (dt["version"], ver))
    res.check(run.result["provisioner"].startswith("r-site-library (R 4."),
              "provisioner: %r" % run.result["provisioner"])
    rscript = os.path.join(prefix, "bin", "Rscript")
    p = subprocess.run([rscript, "-e", "library(data.table); dt <- data.table(x=1:4, "
                        "g=c(1,1,2,2)); cat(dt[, sum(x), by=g]$V1)"],
                       capture_output=True, text=True, timeout=120, cwd="/")
    res.eq("Rscript data.table (%s)" % p.stderr[-800:], p.stdout.strip(), "3 7")
    for extra in ([], ["--vanilla"]):
        p = subprocess.run([rscript] + extra + ["-e", "cat(.libPaths(), sep='\\n')"],
                           capture_output=True, text=True, timeout=120, cwd="/")
        paths = p.stdout.split()
        res.check(prefix + "/library" in paths, ".libPaths() %s lacks the prefix: %r" %
                  (extra, paths))
        for host in ("/usr/lib/R/site-library", "/usr/local/lib/R/site-library"):
            res.check(not any(x.rstrip("/") == host for x in paths),
                      ".libPaths() %s has %s: %r" % (extra, host, paths))
    r = subprocess.run([os.path.join(prefix, "bin", "R"), "--version"], capture_output=True,
                       text=True, timeout=60)
    res.check(r.returncode == 0 and "R version 4" in r.stdout, "bin/R --version: %r" % r.stdout)


DP = "/usr/lib/python3/dist-packages/"
JQUERY = DP + "matplotlib/backends/web_backend/jquery/js/jquery-1.7.1.min.js"
FAKE_STATUS = """Package: python3-fake-a
Status: install ok installed
Architecture: all
Version: 1.0-1
Depends: python3-virt | python3-missing, libc6 (>= 2.0), python3-fake-b:any (>= 1.0~),
 python3-fake-old (>= 2.0) | python3-fake-d, python3-fake-gone
Description: fake

Package: python3-fake-b
Status: install ok installed
Architecture: all
Version: 1:1.0-2
Pre-Depends: python3-numpy-abi9
Description: fake

Package: python3-fake-c
Status: install ok installed
Architecture: all
Version: 0.1
Provides: python3-virt (= 3)
Depends: python3:any, python3-fake-a

Package: python3-fake-d
Status: install ok installed
Architecture: ARCH
Multi-Arch: same
Version: 2.0

Package: python3-fake-old
Status: install ok installed
Architecture: all
Version: 1.0

Package: python3-fake-gone
Status: deinstall ok config-files
Architecture: all
Version: 1.0
"""
FAKE_LISTS = {
    "python3-fake-a.list": ["/usr/lib/python3", DP[:-1], DP + "six.py", "/etc/passwd",
                            DP + "../../../../etc/passwd", DP + "./decorator.py",
                            DP + "no-such-file.py"],
    "python3-fake-b.list": [DP + "decorator.py"],
    "python3-fake-c.list": [DP + "matplotlib", JQUERY],
    "python3-fake-d:ARCH.list": [DP + "appdirs.py"],
    "python3-fake-old.list": [DP + "cycler.py"],
}


@case("Debian closure: a synthetic dpkg database (alternatives, virtual, versions, paths)")
def t_closure(ctx, res):
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    root = os.path.join(ctx.tmp, "dpkg")
    os.makedirs(os.path.join(root, "info"))
    with open(os.path.join(root, "status"), "w") as f:
        f.write(FAKE_STATUS.replace("ARCH", arch))
    for name, paths in FAKE_LISTS.items():
        with open(os.path.join(root, "info", name.replace("ARCH", arch)), "w") as f:
            f.write("".join(p + "\n" for p in paths))
    prefix = ctx.prefix("closure")
    plan = wheel_plan(prefix, [])
    plan.update(debianPackages=["python3-fake-a"], dpkgRoot=root)
    run = ctx.provision(plan)
    if not check_success(res, run):
        return
    res.eq("steps", [p["step"] for p in run.progress],
           ["venv", "copy python3-fake-a", "copy python3-fake-c", "copy python3-fake-b",
            "copy python3-fake-d", "compile", "finished"])
    site = os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    if not res.check(os.path.isdir(site), "no %s (this test runs under %s)" % (site, PYTHON)):
        return
    for n in ("six.py", "decorator.py", "appdirs.py"):
        st = os.lstat(os.path.join(site, n)) if os.path.lexists(os.path.join(site, n)) else None
        res.check(st and not os.path.islink(os.path.join(site, n)) and st.st_nlink == 1,
                  "%s not copied as a file" % n)
        if st:
            res.eq(n + " content", sha256_file(os.path.join(site, n)), sha256_file(DP + n))
    res.check(not os.path.lexists(os.path.join(site, "cycler.py")),
              "python3-fake-old (too old for its alternative) was copied")
    link = os.path.join(site, JQUERY[len(DP):])
    res.check(os.path.islink(link) and os.readlink(link) == os.readlink(JQUERY),
              "the jquery symlink is not kept as the same symlink")
    found = []
    for dp, dns, fns in os.walk(ctx.tmp):        # the prefix and around it: ../ in a file list
        found += [os.path.join(dp, n) for n in fns if n == "passwd"]
    res.eq("files named passwd under the test's directory", found, [])


def check_failure(res, run, want_in_msg):
    res.check(run.rc != 0, "exit status 0")
    res.eq("result lines", run.n_results, 0)
    msg = run.last_err()
    res.check(msg.startswith("provision: ") and want_in_msg in msg,
              "last stderr line %r lacks %r" % (msg, want_in_msg))


@case("failure: an unknown package, offline")
def t_unknown(ctx, res):
    run = ctx.provision(wheel_plan(ctx.prefix("unknown"), ["srtest_nosuch"],
                                   find_links=ctx.wheelhouse))
    check_failure(res, run, "pip install failed")


@case("failure: a plan that is not JSON")
def t_bad_json(ctx, res):
    run = ctx.provision(None, raw=b'{"kind": "python", "prefix": ')
    check_failure(res, run, "bad plan")
    res.eq("stdout", run.out, "")


@case("failure: option injection and a URL in the plan's packages")
def t_injection(ctx, res):
    for spec in ("--index-url=https://example.org/simple", "-e", "https://example.org/x.whl"):
        prefix = ctx.prefix("inject")
        run = ctx.provision(wheel_plan(prefix, [spec], find_links=ctx.wheelhouse))
        check_failure(res, run, "bad plan")
        res.check(not os.path.exists(prefix), "%r: the prefix was created" % spec)


@case("failure: a client wheel that does not match its hash")
def t_bad_hash(ctx, res):
    wdir = os.path.join(ctx.tmp, "wheels", "0" * 64)
    os.makedirs(wdir)
    wheel = os.path.join(wdir, os.path.basename(ctx.client))
    shutil.copyfile(ctx.client, wheel)
    run = ctx.provision(wheel_plan(ctx.prefix("badhash"), [], [wheel]))
    check_failure(res, run, "does not match its hash")


@case("failure: CRAN packages in an r plan")
def t_cran(ctx, res):
    run = ctx.provision({"kind": "r", "prefix": ctx.prefix("cran"), "packages": ["dplyr"],
                         "offline": True})
    check_failure(res, run, "CRAN")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", required=True)
    ap.add_argument("--wheelhouse", required=True, help="tests/helpers/make-wheelhouse.py")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    args = ap.parse_args()
    cases = [(n, f) for n, f in CASES if not args.only or args.only in n]

    out = sys.stdout
    out.write("1..%d\n" % len(cases))
    out.flush()
    tmp = tempfile.mkdtemp(prefix="srtest-provision-")
    failed = 0
    try:
        ctx = Ctx(args, tmp)
        for i, (name, fn) in enumerate(cases, 1):
            res = T.Result(name)
            res.always = False
            t0 = time.monotonic()
            try:
                fn(ctx, res)
            except Exception:                                  # noqa: BLE001
                res.fail("test error:\n" + traceback.format_exc())
            res.note("(%.1fs)" % (time.monotonic() - t0))
            out.write("%s %d - %s\n" % ("ok" if res.ok else "not ok", i, name))
            diag = res.failures + res.notes if (not res.ok or args.verbose or res.always) \
                else []
            for line in "\n".join(diag).splitlines()[:60]:
                out.write("# %s\n" % line)
            out.flush()
            failed += not res.ok
    finally:
        if args.keep_tmp:
            out.write("# kept %s\n" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
