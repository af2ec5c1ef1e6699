#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Chips and devices in sandboxes (issue 13, DESIGN.md §9) against a FAKE Ascend host: no NPU
exists on the test machines. The test builds the host itself:

  - under <tmp>/ascend/dev: character device nodes (mknod with /dev/null's numbers, so nothing
    real is reachable through them) davinci0..3 and the management nodes davinci_manager,
    devmm_svm, hisi_hdc;
  - a driver tree (<tmp>/ascend/driver: lib64/common, lib64/driver) and a toolkit tree;
  - a fake npu-smi (tests/helpers/fake-npu-smi.sh) that prints the real output format, names
    chip 2 an "Ascend 310P3", and fails inside a sandbox for a chip listed as claimed;
  - CDI specs (a good one for a fake device: a node and a mount; one with hooks, one with an
    unknown field, one that is not JSON).

    npu.py --daemon BUILD/src/sandbox-runnerd [--ctl BUILD/src/ctl/sandbox-runnerctl]
           [--run-as self|auto|USER] [--verbose] [--keep-tmp]

What it shows: only probed chips are selectable (chip 1 claimed at start-up, chip 2 not a 910);
renumbering (host chips 3 and 0 are /dev/davinci1 and /dev/davinci0, checked by inode); the
re-probe at launch refusing by name a chip claimed after start-up (409 npu_chip_unavailable); a
chip held by a run; inside an NPU sandbox exactly the selected nodes, the CANN variables, PATH,
getent, ptrace/mount/bpf still denied, no interface but lo; a plain sandbox unchanged; CDI
applied exactly and refused specs listed with reasons; request validation; a daemon without
[NPU] Enable=yes refusing chips; a device root the daemon cannot enter named in every answer that
reports it; the host NPU broker's jobs; the operator CLI sandbox-runnerctl
(--ctl, by default next to the daemon in the build tree) against the same daemon: npu chips, exec
--npu/--device, npu submit --wait, npu jobs/log/result. Output is TAP; nothing is skipped.
"""

import argparse
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_lib as L                                                    # noqa: E402
from environments_lib import EnvClient                                    # noqa: E402
import testlib as T                                                        # noqa: E402
from execute_lib import now                                                # noqa: E402
from testlib import Result                                                 # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUDGET = 240.0
CHIP_NAMES = {0: "Ascend 910B3", 1: "Ascend 910B3", 2: "Ascend 310P3", 3: "Ascend 910B3"}
MGMT = ["davinci_manager", "devmm_svm", "hisi_hdc"]

CASES, case = T.case_registry()


class Ctx(EnvClient):
    def __init__(self, d, budget, root):
        super().__init__(d, budget, "npu-main", "nputest")
        self.root = root
        self.dev = os.path.join(root, "dev")
        self.driver = os.path.join(root, "driver")
        self.toolkit = os.path.join(root, "toolkit")
        self.smi = os.path.join(self.driver, "tools", "npu-smi")
        self.cdi = os.path.join(root, "cdi")
        self.cdi_run = os.path.join(root, "cdi-run")
        self.inodes = {}
        self.repo = os.path.join(os.path.dirname(root), "checkout")
        self.weights = os.path.join(os.path.dirname(root), "weights")
        self.workloads = os.path.join(os.path.dirname(root), "workloads.json")
        self.ctl = None                 # sandbox-runnerctl (--ctl)

    def claim(self, ids):
        path = os.path.join(self.driver, "fake", "claimed")
        tmp = path + ".new"
        with open(tmp, "w") as f:
            f.write("".join("%d\n" % i for i in ids))
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)

    def signed(self, method, path, body):
        """(status, JSON answer) of a signed request (bearer + signature)."""
        raw = json.dumps(body).encode()
        ts = int(time.time())
        h = [self.bearer(), ("Content-Type", "application/json"), ("X-Sandbox-Timestamp", str(ts)),
             ("X-Sandbox-Signature", L.signature(self.d.key, ts, method, path, raw))]
        r = L.http(self.d.port, method, path, h, raw, timeout=self.budget.bound(10.0))
        return r.status, (json.loads(r.body.decode()) if r.body else None)

    def chips(self):
        st, j = self.req("GET", "/npu/chips")
        if st != 200:
            raise AssertionError("GET /npu/chips: %d %s" % (st, j))
        return {c["id"]: c for c in j["chips"]}, j


def build_host(root):
    """The fake Ascend host under @root (see the docstring); returns {logic id: inode}."""
    nul = os.stat("/dev/null").st_rdev
    dev = os.path.join(root, "dev")
    os.makedirs(dev)
    inodes = {}
    for i in range(4):
        p = os.path.join(dev, "davinci%d" % i)
        os.mknod(p, 0o666 | stat.S_IFCHR, nul)
        inodes[i] = os.stat(p).st_ino
    for n in MGMT:
        os.mknod(os.path.join(dev, n), 0o666 | stat.S_IFCHR, nul)
    # Not chips: a regular file and a directory with chip-like names.
    with open(os.path.join(dev, "davinci9"), "w") as f:
        f.write("not a device\n")
    os.mkdir(os.path.join(dev, "davinci8"))
    driver = os.path.join(root, "driver")
    for sub in ("lib64/common", "lib64/driver", "tools", "fake"):
        os.makedirs(os.path.join(driver, sub))
    with open(os.path.join(driver, "version.info"), "w") as f:
        f.write("Version=23.0.rc3\n")
    shutil.copy(os.path.join(HERE, "..", "helpers", "fake-npu-smi.sh"), os.path.join(driver, "tools", "npu-smi"))
    os.chmod(os.path.join(driver, "tools", "npu-smi"), 0o755)
    with open(os.path.join(driver, "fake", "names"), "w") as f:
        f.write("".join("%d %s\n" % (i, n) for i, n in sorted(CHIP_NAMES.items())))
    with open(os.path.join(driver, "fake", "inodes"), "w") as f:
        f.write("".join("%d %d\n" % (ino, i) for i, ino in sorted(inodes.items())))
    for sub in ("bin", "lib64", "opp", "python/site-packages"):
        os.makedirs(os.path.join(root, "toolkit", sub))
    # CDI: a good spec, and three that must be refused with their reasons.
    data = os.path.join(root, "cdi-data")
    os.makedirs(data)
    with open(os.path.join(data, "weights.txt"), "w") as f:
        f.write("fake device data\n")
    cdi, cdi_run = os.path.join(root, "cdi"), os.path.join(root, "cdi-run")
    os.makedirs(cdi)
    os.makedirs(cdi_run)
    good = {"cdiVersion": "0.6.0", "kind": "example.com/fake",
            "devices": [{"name": "dev0", "containerEdits": {
                # The registry takes device nodes from the host's /dev only: /dev/null stands in.
                "deviceNodes": [{"path": "/dev/fake0", "hostPath": "/dev/null"}],
                "mounts": [{"hostPath": data, "containerPath": "/opt/fake-data", "options": ["ro", "nosuid", "bind"]}],
                "env": ["FAKE_DEVICE=dev0"]}}],
            "containerEdits": {"env": ["FAKE_VENDOR=example"]}}
    hooked = {"cdiVersion": "0.6.0", "kind": "example.com/hooked",
              "devices": [{"name": "x", "containerEdits": {
                  "deviceNodes": [{"path": "/dev/hooked0", "hostPath": "/dev/null"}],
                  "hooks": [{"hookName": "createContainer", "path": "/usr/bin/true"}]}}]}
    unknown = {"cdiVersion": "0.6.0", "kind": "example.com/unknown",
               "devices": [{"name": "y", "colour": "blue", "containerEdits": {"env": ["A=1"]}}]}
    for d, name, spec in ((cdi, "fake.json", good), (cdi_run, "hooked.json", hooked), (cdi, "unknown.json", unknown)):
        with open(os.path.join(d, name), "w") as f:
            json.dump(spec, f)
    with open(os.path.join(cdi, "broken.json"), "w") as f:
        f.write('{"cdiVersion": "0.6.0", "kind": ')
    for top, dirs, files in os.walk(root):
        for n in dirs:
            os.chmod(os.path.join(top, n), 0o755)
        for n in files:
            p = os.path.join(top, n)
            if stat.S_ISREG(os.lstat(p).st_mode) and not n == "npu-smi":
                os.chmod(p, 0o644)
    return inodes


# The "model" of the broker's workloads: reads its config, writes into run_dir, says what it saw.
FOLD = r'''
import json, os, sys, time
cfg = json.load(open(sys.argv[sys.argv.index("--config") + 1]))
print("fold: config", sys.argv[sys.argv.index("--config") + 1], flush=True)
print("fold: uid", os.getuid(), "chips", os.environ.get("ASCEND_RT_VISIBLE_DEVICES"), flush=True)
print("fold: weights", open(os.path.join(cfg["weights"], "w.txt")).read().strip(), flush=True)
os.makedirs(cfg["run_dir"], exist_ok=True)
with open(os.path.join(cfg["run_dir"], "model.pdb"), "w") as f:
    f.write("MODEL of " + open(cfg["target_pdb"]).read())
time.sleep(float(cfg.get("sleep", 0)))
print("fold: done", flush=True)
'''


def build_broker(ctx):
    """The deployment checkout, the weights (a resource root) and the allowlist."""
    os.makedirs(os.path.join(ctx.repo, "tools"))
    with open(os.path.join(ctx.repo, "tools", "fold.py"), "w") as f:
        f.write(FOLD)
    os.symlink("/etc/passwd", os.path.join(ctx.repo, "tools", "escape.py"))
    os.makedirs(ctx.weights)
    with open(os.path.join(ctx.weights, "w.txt"), "w") as f:
        f.write("weights-v1\n")
    wl = {"workloads": [
        {"id": "fold", "description": "Fold a protein on one chip",
         "argv": ["/usr/bin/python3", "-I", "${repo:tools/fold.py}", "--config", "${input:configPath}"],
         "chips": 1, "timeoutSec": 120, "configPathFields": ["workspace", "run_dir", "target_pdb", "weights"],
         "resourceRoots": [ctx.weights], "env": {"OMP_NUM_THREADS": "2"}},
        {"id": "escape", "description": "A workload whose script is a symlink out of the checkout",
         "argv": ["/usr/bin/python3", "${repo:tools/escape.py}"], "chips": 1, "timeoutSec": 10}]}
    with open(ctx.workloads, "w") as f:
        json.dump(wl, f)


def config_text(ctx):
    return ("[NPU]\nEnable=yes\nDeviceRoot=%s\nDriverDirectory=%s\nToolkitDirectory=%s\nNpuSmi=%s\n"
            "CDISpecDirectories=%s %s\nProbeTimeoutSec=30\nBroker=yes\nWorkloadsFile=%s\nRepositoryDirectory=%s\n"
            "[Environments]\nBootstrap=\n[Runner]\nIdleExitSec=0\n[Execution]\nAllowUnscoped=yes\nDefaultTimeoutSec=60\n"
            % (ctx.dev, ctx.driver, ctx.toolkit, ctx.smi, ctx.cdi, ctx.cdi_run, ctx.workloads, ctx.repo))


def wait_probed(ctx, res):
    deadline = now() + 60
    while now() < deadline:
        chips, j = ctx.chips()
        if j.get("phase") in ("ready", "failed"):
            return chips, j
        ctx.budget.expired.wait(0.2)
    res.fail("the chips were not probed within 60 s")
    return ctx.chips()


# A probe run inside the sandbox: what it sees, as JSON on stdout.
INSIDE = r'''
import ctypes, errno, json, os, socket, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *a):
    r = libc.syscall(nr, *a)
    return 0 if r >= 0 else ctypes.get_errno()
out = {"dev": sorted(os.listdir("/dev")), "env": dict(os.environ), "uid": os.getuid()}
out["ino"] = {n: os.stat("/dev/" + n).st_ino for n in out["dev"] if n.startswith("davinci")}
out["rdev"] = {n: os.stat("/dev/" + n).st_rdev for n in out["dev"] if n == "fake0"}
out["chr"] = {n: __import__("stat").S_ISCHR(os.stat("/dev/" + n).st_mode) for n in out["dev"]
              if n.startswith("davinci") or n in ("devmm_svm", "hisi_hdc", "fake0")}
out["getent"] = subprocess.run(["getent", "passwd", str(os.getuid())], capture_output=True, text=True).stdout
out["ptrace"] = sc(101, 0, 0, 0, 0)          # PTRACE_TRACEME (x86_64 numbers)
out["mount"] = sc(165, b"none", b"/tmp", b"tmpfs", 0, None)
out["bpf"] = sc(321, 0, None, 0)
out["ifaces"] = [n for _, n in socket.if_nameindex()]
if os.path.exists("/opt/fake-data/weights.txt"):
    out["data"] = open("/opt/fake-data/weights.txt").read()
    try:
        open("/opt/fake-data/new", "w")
        out["data_write"] = "ok"
    except OSError as e:
        out["data_write"] = e.errno
print(json.dumps(out))
'''


def inside(ctx, res, extra, path="/execute"):
    st, j = ctx.execute(dict({"language": "python", "code": INSIDE}, **extra), path=path)
    if not res.check(st == 200 and j.get("exitCode") == 0, "the run: %d %s" % (st, L.trunc(json.dumps(j), 800))):
        return None, j
    return json.loads(j["stdout"]), j


@case("chips: only probed 910 chips are selectable; reasons name the chip")
def case_listing(ctx, res):
    chips, j = wait_probed(ctx, res)
    res.eq("phase", j.get("phase"), "ready")
    res.eq("chip ids", sorted(chips), [0, 1, 2, 3])
    res.eq("management nodes", j.get("managementNodes"), MGMT)
    res.eq("selectable", sorted(i for i, c in chips.items() if c["selectable"]), [0, 3])
    res.check("310P3" in chips[2].get("reason", "") and "910" in chips[2].get("reason", ""),
              "chip 2's reason names its model: %r" % chips[2].get("reason"))
    res.check("probe" in chips[1].get("reason", "") and "device is used" in chips[1].get("reason", ""),
              "chip 1 (claimed at start-up) failed its probe with npu-smi's message: %r" % chips[1].get("reason"))
    res.eq("chip 0 name", chips[0].get("name"), "Ascend 910B3")
    res.eq("chip 0 health", chips[0].get("health"), "OK")
    st, h = ctx.req("GET", "/health")
    npu = (h or {}).get("npu", {})
    res.check(npu.get("enabled") is True and npu.get("chips") == 4 and npu.get("selectable") == 2,
              "/health.npu summarises: %r" % npu)
    st, _ = L.http(ctx.d.port, "GET", "/npu/chips", [], b"").status, None
    res.eq("GET /npu/chips without the bearer", st, 401)


@case("chips: refusals before anything starts (not selectable, non-910, unknown, validation)")
def case_refusals(ctx, res):
    for chips, code, words in (([2], "npu_unavailable", ["chip 2", "310P3"]),
                               ([1], "npu_unavailable", ["chip 1", "probe"]),
                               ([7], "npu_unavailable", ["chip 7", "does not exist"]),
                               ([9], "npu_unavailable", ["chip 9"]),
                               ([0, 2], "npu_unavailable", ["chip 2"])):
        st, j = ctx.execute({"command": "true", "npu": {"chips": chips}})
        res.check(st == 400 and j.get("error") == code and all(w in j.get("message", "") for w in words),
                  "chips %r: expected 400 %s naming %r, got %d %s" % (chips, code, words, st, j))
    for body in ({"npu": {"chips": []}}, {"npu": {"chips": [0, 0]}}, {"npu": {"chips": ["0"]}},
                 {"npu": {"chips": [-1]}}, {"npu": [0]}, {"npu": {"chips": [0], "x": 1}},
                 {"devices": []}, {"devices": ["nodevice"]}, {"devices": ["a.com/b=c", "a.com/b=c"]},
                 {"devices": ["a.com/b=c;rm"]}):
        st, j = ctx.execute(dict({"command": "true"}, **body))
        res.check(st == 400 and j.get("error") == "invalid_request",
                  "%r: expected 400 invalid_request, got %d %s" % (body, st, j))
    chips, _ = ctx.chips()
    res.check(all("heldBy" not in c for c in chips.values()), "no chip is held after refusals: %r" % chips)


@case("NPU sandbox: renumbered chips, management nodes, CANN variables, PATH, identity, seccomp, no network")
def case_inside(ctx, res):
    o, j = inside(ctx, res, {"npu": {"chips": [3, 0]}})
    if not o:
        return
    davinci = sorted(n for n in o["dev"] if n.startswith("davinci") and n[7:].isdigit())
    res.eq("chip nodes", davinci, ["davinci0", "davinci1"])
    res.eq("davinci0 is host chip 0 (by inode)", o["ino"].get("davinci0"), ctx.inodes[0])
    res.eq("davinci1 is host chip 3 (by inode)", o["ino"].get("davinci1"), ctx.inodes[3])
    for n in MGMT:
        res.check(n in o["dev"] and o["chr"].get(n), "management node /dev/%s is there, a character device" % n)
    env = o["env"]
    res.eq("ASCEND_HOME_PATH", env.get("ASCEND_HOME_PATH"), ctx.toolkit)
    ld = env.get("LD_LIBRARY_PATH", "").split(":")
    for p in ("lib64/common", "lib64/driver"):
        res.check(os.path.join(ctx.driver, p) in ld, "LD_LIBRARY_PATH has the driver's %s: %r" % (p, ld))
    path = env.get("PATH", "").split(":")
    res.check(path[:1] == ["/usr/local/bin"] and os.path.join(ctx.toolkit, "bin") in path and "/usr/bin" in path,
              "PATH starts with /usr/local/bin and has the toolkit's bin: %r" % path)
    res.check(o["getent"].startswith("sandbox:x:%d:" % o["uid"]), "getent passwd $(id -u): %r" % o["getent"])
    for sc in ("ptrace", "mount", "bpf"):
        res.check(o[sc] in (1, 38), "%s still fails (EPERM or ENOSYS): errno %r" % (sc, o[sc]))
    res.eq("interfaces", o["ifaces"], ["lo"])
    res.eq("the answer names the chips", j.get("npu"), {"chips": [3, 0]})


@case("plain sandbox: the old PATH, no chip, no CANN variable")
def case_plain(ctx, res):
    o, _ = inside(ctx, res, {})
    if not o:
        return
    res.eq("PATH", o["env"].get("PATH"), "/usr/local/bin:/usr/bin:/bin")
    res.check(not any(n.startswith("davinci") or n in MGMT for n in o["dev"]), "no NPU node: %r" % o["dev"])
    res.check(not any(k.startswith("ASCEND") for k in o["env"]), "no ASCEND_* variable")


@case("re-probe at launch: a chip claimed after start-up fails the run by name (409), nothing runs")
def case_reprobe(ctx, res):
    marker = "reprobe-" + ctx.new_id()
    ctx.claim([1, 3])
    try:
        st, j = ctx.execute({"command": "touch /workspace/%s" % marker, "npu": {"chips": [0, 3]}})
        res.check(st == 409 and j.get("error") == "npu_chip_unavailable" and "chip 3" in j.get("message", "")
                  and "device is used" in j.get("message", ""),
                  "expected 409 npu_chip_unavailable naming chip 3, got %d %s" % (st, j))
        res.check(not os.path.exists(os.path.join(ctx.d.workspace_path(ctx.workspace), marker)),
                  "the workload did not start")
        st, j = ctx.execute({"command": "true", "npu": {"chips": [3]}}, path="/shell-executions")
        res.check(st == 409 and j.get("error") == "npu_chip_unavailable", "a managed run too: %d %s" % (st, j))
        chips, _ = ctx.chips()
        res.check("device is used" in chips[3].get("lastProbeFailure", ""), "chip 3 shows the failed re-probe: %r" % chips[3])
        res.check(all("heldBy" not in c for c in chips.values()), "nothing held after the refusal: %r" % chips)
    finally:
        ctx.claim([1])
    st, j = ctx.execute({"command": "echo ok", "npu": {"chips": [3]}})
    res.check(st == 200 and j.get("exitCode") == 0, "free again: chip 3 runs: %d %s" % (st, j))


@case("a chip held by a run: heldBy, 409 for another run, free after it ends")
def case_held(ctx, res):
    st, j = ctx.execute({"command": "sleep 30", "npu": {"chips": [0]}}, path="/shell-executions")
    if not res.check(st == 202, "managed run: %d %s" % (st, j)):
        return
    ex = j["executionId"]
    try:
        chips, _ = ctx.chips()
        res.eq("heldBy", chips[0].get("heldBy"), ex)
        st, j = ctx.execute({"command": "true", "npu": {"chips": [0]}})
        res.check(st == 409 and j.get("error") == "npu_chip_unavailable" and ex in j.get("message", ""),
                  "another run: 409 naming the holder, got %d %s" % (st, j))
    finally:
        st, _ = ctx.signed("POST", "/shell-executions/%s/cancel" % ex, {})
        res.eq("cancel", st, 202)
    deadline = now() + 30
    while now() < deadline:
        chips, _ = ctx.chips()
        if "heldBy" not in chips[0]:
            break
        ctx.budget.expired.wait(0.2)
    res.check("heldBy" not in chips[0], "chip 0 is free after the run: %r" % chips[0])


@case("CDI: a spec's node, mount and variables applied exactly; refused specs listed with reasons")
def case_cdi(ctx, res):
    chips, j = ctx.chips()
    res.eq("usable CDI devices", j.get("cdiDevices"), ["example.com/fake=dev0"])
    refused = " | ".join("%s: %s" % (r.get("what"), r.get("reason")) for r in j.get("cdiRefused", []))
    for words in (("hooked", "hook"), ("unknown.json", "colour"), ("broken.json",)):
        res.check(any(all(w in "%s: %s" % (r.get("what"), r.get("reason")) for w in words)
                      for r in j.get("cdiRefused", [])), "refusal %r listed: %s" % (words, refused))
    o, _ = inside(ctx, res, {"devices": ["example.com/fake=dev0"]})
    if o:
        res.check("fake0" in o["dev"] and o["chr"].get("fake0"), "/dev/fake0 is a character device: %r" % o["dev"])
        res.eq("/dev/fake0 is the spec's host node", o["rdev"].get("fake0"), os.stat("/dev/null").st_rdev)
        res.eq("mounted data", o.get("data"), "fake device data\n")
        res.eq("the mount is read-only", o.get("data_write"), 30)   # EROFS
        res.eq("FAKE_DEVICE", o["env"].get("FAKE_DEVICE"), "dev0")
        res.eq("spec-level FAKE_VENDOR", o["env"].get("FAKE_VENDOR"), "example")
        res.eq("PATH unchanged without chips", o["env"].get("PATH"), "/usr/local/bin:/usr/bin:/bin")
        res.check(not any(n.startswith("davinci") for n in o["dev"]), "no chip without npu")
    for dev, words in (("example.com/hooked=x", ["hook"]), ("example.com/none=z", ["example.com/none=z"])):
        st, j = ctx.execute({"command": "true", "devices": [dev]})
        res.check(st == 400 and j.get("error") == "npu_unavailable" and all(w in j.get("message", "") for w in words),
                  "%s: 400 npu_unavailable with %r, got %d %s" % (dev, words, st, j))


@case("a daemon without [NPU] Enable=yes refuses chips and devices (400 npu_unavailable)")
def case_disabled(ctx, res):
    d2 = L.Daemon(ctx.d.path, run_as=ctx.d.run_as,
                  config="[Environments]\nBootstrap=\n[Runner]\nIdleExitSec=0\n[Execution]\nAllowUnscoped=yes\n")
    try:
        d2.start()
        c2 = EnvClient(d2, ctx.budget, "npu-off", "npuoff")
        for body in ({"npu": {"chips": [0]}}, {"devices": ["example.com/fake=dev0"]}):
            st, j = c2.execute(dict({"command": "true"}, **body))
            res.check(st == 400 and j.get("error") == "npu_unavailable" and "Enable" in j.get("message", ""),
                      "%r: %d %s" % (body, st, j))
        st, j = c2.req("GET", "/npu/chips")
        res.check(st == 400 and (j or {}).get("error") == "npu_unavailable", "GET /npu/chips: %d %s" % (st, j))
        st, h = c2.req("GET", "/health")
        res.eq("/health.npu", (h or {}).get("npu"), {"enabled": False})
    finally:
        d2.cleanup()


def proc_uid(pid):
    """The effective uid of process @pid (from /proc)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[2])
    raise AssertionError("no Uid: line for pid %d" % pid)


@case("a DeviceRoot= the daemon cannot enter: /npu/chips, /health and a launch name it (issue 21)")
def case_device_root_unreadable(ctx, res):
    d2 = L.Daemon(ctx.d.path, run_as=ctx.d.run_as, config="")
    try:
        # A directory of root, mode 0700, above the device root: the daemon (its service user in
        # both postures: started as root it drops to SandboxUser=) cannot enter it.
        locked = os.path.join(d2.tmp, "locked")
        dev = os.path.join(locked, "dev")
        os.mkdir(locked, 0o700)
        os.mkdir(dev, 0o755)
        os.chown(locked, 0, 0)
        os.chmod(locked, 0o700)
        with open(d2.conf, "w") as f:
            f.write("[NPU]\nEnable=yes\nDeviceRoot=%s\nDriverDirectory=%s\nNpuSmi=%s\nProbeTimeoutSec=30\n"
                    "[Environments]\nBootstrap=\n[Runner]\nIdleExitSec=0\n[Execution]\nAllowUnscoped=yes\n"
                    % (dev, ctx.driver, ctx.smi))
        d2.start()
        uid = proc_uid(d2.proc.pid)
        res.check(uid != 0, "the daemon runs as uid %d, not root (else it could enter %s)" % (uid, locked))
        c2 = EnvClient(d2, ctx.budget, "npu-locked", "npulocked")
        deadline = now() + 60
        while True:
            st, j = c2.req("GET", "/npu/chips")
            if st != 200 or (j or {}).get("phase") not in ("idle", "probing") or now() > deadline:
                break
            ctx.budget.expired.wait(0.2)
        want = "cannot open the NPU device root '%s'" % dev
        err = (j or {}).get("error", "")
        res.check(st == 200 and j.get("phase") == "failed", "GET /npu/chips: %d %s" % (st, j))
        res.check(want in err and "Permission denied" in err and err != "Permission denied",
                  "/npu/chips error names the device root: %r" % err)
        st, h = c2.req("GET", "/health")
        herr = ((h or {}).get("npu") or {}).get("error", "")
        res.check(want in herr and "Permission denied" in herr, "/health.npu.error names the device root: %r" % herr)
        st, j = c2.execute({"command": "true", "npu": {"chips": [0]}})
        msg = (j or {}).get("message", "")
        res.check(st == 400 and j.get("error") == "npu_unavailable" and want in msg,
                  "a launch with chips names the device root: %d %s" % (st, j))
    finally:
        d2.cleanup()


# ---- the host NPU broker (child mode: the daemon is started by hand) ----

SESSION = "npu-sess-a"
OTHER = "npu-sess-b"


def put_file(ctx, ws, path, data):
    st, j = ctx.req("PUT", "/workspaces/%s/files/%s" % (ws, path), raw=data)
    if st != 201:
        raise AssertionError("upload %s: %d %s" % (path, st, j))


def fold_config(ctx, **over):
    ws = ctx.d.workspace_path(SESSION)
    cfg = {"workspace": ws, "run_dir": "out/run1", "target_pdb": "target.pdb",
           "weights": ctx.weights, "sleep": 0}
    cfg.update(over)
    return json.dumps(cfg).encode()


def wait_job(ctx, job, session=SESSION, states=("succeeded", "failed", "cancelled", "interrupted"), t=60):
    deadline = now() + t
    j = None
    while now() < deadline:
        st, j = ctx.req("GET", "/npu/jobs/%s?session_id=%s" % (job, session))
        if st == 200 and j.get("state") in states:
            return j
        ctx.budget.expired.wait(0.2)
    raise AssertionError("job %s did not reach %s: %s" % (job, states, j))


@case("broker: workloads listed without host paths; allowlist only; template escapes refused (403)")
def case_broker_refusals(ctx, res):
    st, j = ctx.req("GET", "/npu/workloads")
    ids = [w.get("id") for w in (j or {}).get("workloads", [])]
    res.check(st == 200 and ids == ["fold", "escape"], "GET /npu/workloads: %d %s" % (st, j))
    res.check(ctx.repo not in json.dumps(j) and "argv" not in json.dumps(j), "no host path or argv listed")
    put_file(ctx, SESSION, "target.pdb", b"ATOM 1\n")
    put_file(ctx, SESSION, "cfg.json", fold_config(ctx))
    st, j = ctx.execute({"workspaceId": SESSION, "command":
                         "ln -s /etc/passwd evil.json && mkdir -p sub && ln -s /etc escdir && "
                         "printf '{\"run_dir\": \"escdir/x\", \"workspace\": \".\", \"target_pdb\": \"target.pdb\"}' > viasym.json"})
    res.check(st == 200 and j.get("exitCode") == 0, "set-up run: %d %s" % (st, j))
    put_file(ctx, SESSION, "abs.json", fold_config(ctx, run_dir="/etc/cron.d"))
    put_file(ctx, SESSION, "up.json", fold_config(ctx, target_pdb="../../../../etc/shadow"))
    put_file(ctx, OTHER, "x.txt", b"x")
    for body, status, words in (
            ({"workloadId": "shell", "sessionId": SESSION}, 400, ["not in the allowlist"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "cfg.json"}, "argv": ["sh"]}, 400, ["argv"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "cfg.json", "cmd": "id"}}, 400, []),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "../cfg.json"}}, None, ["configPath"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "/etc/passwd"}}, None, ["configPath"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "evil.json"}}, 403, ["configPath"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "abs.json"}}, 403, ["run_dir"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "up.json"}}, 403, ["target_pdb"]),
            ({"workloadId": "fold", "sessionId": SESSION, "inputs": {"configPath": "viasym.json"}}, 403, ["run_dir"]),
            ({"workloadId": "escape", "sessionId": SESSION}, 403, ["repo"]),
            ({"workloadId": "fold", "sessionId": "no-such-session", "inputs": {"configPath": "cfg.json"}}, 404, [])):
        st, j = ctx.signed("POST", "/npu/jobs", body)
        ok = (st == status if status else st in (400, 403)) and all(w in (j or {}).get("message", "") for w in words)
        res.check(ok, "%r: expected %s with %r, got %d %s" % (body, status or "400/403", words, st, j))
    st, j = ctx.req("POST", "/npu/jobs", body={"workloadId": "fold", "sessionId": SESSION})
    res.check(st == 401, "POST /npu/jobs without a signature: %d" % st)
    st, j = ctx.req("GET", "/npu/jobs?session_id=%s" % SESSION)
    res.check(st == 200 and j.get("jobs") == [], "nothing was created by the refusals: %s" % j)


@case("broker: a job runs the allowlisted argv (no shell), log, result, its chip held then free; other sessions get 404")
def case_broker_job(ctx, res):
    st, j = ctx.signed("POST", "/npu/jobs", {"workloadId": "fold", "sessionId": SESSION,
                                               "inputs": {"configPath": "cfg.json"}})
    if not res.check(st == 202 and j.get("state") == "queued" and len(j.get("jobId", "")) == 16,
                     "POST /npu/jobs: %d %s" % (st, j)):
        return
    job = j["jobId"]
    final = wait_job(ctx, job)
    res.eq("state", final.get("state"), "succeeded")
    res.eq("chips", final.get("chips"), [0])
    res.check("argv" not in final and "cwd" not in final, "no host paths in the job's view: %s" % final)
    r = L.http(ctx.d.port, "GET", "/npu/jobs/%s/log?session_id=%s&offset=0" % (job, SESSION), [ctx.bearer()], b"")
    log = r.body.decode()
    res.check(r.status == 200 and "fold: done" in log and "chips 0" in log and "weights-v1" in log,
              "log: %d %r" % (r.status, log))
    res.check("uid 0 " not in log, "the job did not run as root: %r" % log)
    res.check("/npu-jobs/%s/config.json" % job in log, "the job read the broker's checked copy: %r" % log)
    res.eq("next offset", r.header("X-Sandbox-Next-Offset"), str(len(r.body)))
    r2 = L.http(ctx.d.port, "GET", "/npu/jobs/%s/log?session_id=%s&offset=%d" % (job, SESSION, len(r.body)),
                [ctx.bearer()], b"")
    res.check(r2.status == 200 and r2.body == b"", "log past the end is empty: %r" % r2.body)
    st, j = ctx.req("GET", "/npu/jobs/%s/result?session_id=%s" % (job, SESSION))
    res.check(st == 200 and j.get("exitCode") == 0 and j.get("timedOut") is False, "result: %d %s" % (st, j))
    out = os.path.join(ctx.d.workspace_path(SESSION), "out", "run1", "model.pdb")
    res.check(os.path.exists(out) and open(out).read() == "MODEL of ATOM 1\n", "the job's output is in the workspace")
    chips, _ = ctx.chips()
    res.check("heldBy" not in chips[0], "chip 0 is free after the job: %r" % chips[0])
    for path in ("/npu/jobs/%s?session_id=%s", "/npu/jobs/%s/log?session_id=%s", "/npu/jobs/%s/result?session_id=%s"):
        st, j = ctx.req("GET", path % (job, OTHER))
        res.check(st == 404 and (j or {}).get("error") == "not_found", "%s of another session: %d %s" % (path, st, j))
    st, j = ctx.signed("POST", "/npu/jobs/%s/cancel" % job, {"sessionId": OTHER})
    res.check(st == 404, "cancel from another session: %d %s" % (st, j))
    st, j = ctx.req("GET", "/npu/jobs?session_id=%s" % OTHER)
    res.check(st == 200 and j.get("jobs") == [], "another session lists nothing: %s" % j)
    st, j = ctx.req("GET", "/npu/jobs?session_id=%s" % SESSION)
    res.check(st == 200 and [x.get("jobId") for x in j.get("jobs", [])] == [job], "the session lists its job: %s" % j)


def job_processes(marker):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


@case("broker: cancel stops the job's processes; the job is cancelled")
def case_broker_cancel(ctx, res):
    put_file(ctx, SESSION, "slow.json", fold_config(ctx, run_dir="out/slow", sleep=60))
    st, j = ctx.signed("POST", "/npu/jobs", {"workloadId": "fold", "sessionId": SESSION,
                                               "inputs": {"configPath": "slow.json"}})
    if not res.check(st == 202, "POST: %d %s" % (st, j)):
        return
    job = j["jobId"]
    wait_job(ctx, job, states=("running",))
    deadline = now() + 20
    while now() < deadline and not job_processes(job):
        ctx.budget.expired.wait(0.2)
    res.check(job_processes(job), "the job's processes run")
    # The job holds the session workspace's write lease: nothing of the session changes what was
    # checked while it runs (another job, an upload: refused or waiting).
    st, j = ctx.signed("POST", "/npu/jobs", {"workloadId": "fold", "sessionId": SESSION,
                                               "inputs": {"configPath": "cfg.json"}})
    res.check(st == 423 and j.get("error") == "workspace_busy", "a second job of the session: %d %s" % (st, j))
    st, j = ctx.signed("POST", "/npu/jobs/%s/cancel" % job, {"sessionId": SESSION})
    res.check(st == 202 and j.get("state") == "cancelling", "cancel: %d %s" % (st, j))
    final = wait_job(ctx, job, t=30)
    res.eq("state", final.get("state"), "cancelled")
    res.eq("processes left", job_processes(job), [])
    st, j = ctx.signed("POST", "/npu/jobs/%s/cancel" % job, {"sessionId": SESSION})
    res.check(st == 202 and j.get("state") == "finished", "cancel of a finished job: %d %s" % (st, j))


def run_ctl(ctx, *args, timeout=60.0):
    """sandbox-runnerctl ARGS against the test daemon, its credentials from the daemon's own
    directory: (exit code, stdout, stderr)."""
    env = {"PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": ctx.d.creds}
    p = subprocess.run([ctx.ctl, "--url", "http://%s:%d" % (L.LOOPBACK, ctx.d.port)] + list(args), env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=ctx.budget.bound(timeout))
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


@case("sandbox-runnerctl: npu chips, exec --npu/--device, npu submit --wait, npu jobs/log/result")
def case_ctl(ctx, res):
    if not res.check(ctx.ctl and os.access(ctx.ctl, os.X_OK), "sandbox-runnerctl (--ctl) is there: %r" % ctx.ctl):
        return
    rc, out, err = run_ctl(ctx, "npu", "chips", "--json")
    chips, _ = ctx.chips()
    try:
        listed = sorted(c["id"] for c in json.loads(out)["chips"])
    except (ValueError, KeyError, TypeError) as e:
        listed = "not the answer (%s): %r" % (e, out[:500])
    res.check(rc == 0 and listed == sorted(chips), "npu chips --json: rc %d, ids %r, GET /npu/chips has %r; %s"
              % (rc, listed, sorted(chips), err))
    rc, out, err = run_ctl(ctx, "npu")
    lines = out.splitlines()
    res.check(rc == 0 and lines[:1] and lines[0].split() == ["ID", "NAME", "HEALTH", "SELECTABLE", "HELD-BY", "REASON"]
              and any(ln.split()[:5] == ["2", "Ascend", "310P3", "OK", "no"] for ln in lines)
              and "CDI devices: example.com/fake=dev0" in lines,
              "npu (chips) table: rc %d\n%s%s" % (rc, out, err))

    rc, out, err = run_ctl(ctx, "exec", "--workspace", ctx.workspace, "--npu=3,0", "--", "ls", "/dev")
    dev = out.split()
    res.check(rc == 0 and "davinci0" in dev and "davinci1" in dev and "davinci2" not in dev and "davinci3" not in dev,
              "exec --npu=3,0 -- ls /dev: rc %d, %r %s" % (rc, dev, err))
    rc, out, err = run_ctl(ctx, "exec", "--workspace", ctx.workspace, "--device=example.com/fake=dev0", "--",
                           "cat", "/opt/fake-data/weights.txt")
    res.check(rc == 0 and out == "fake device data\n", "exec --device: rc %d, %r %s" % (rc, out, err))
    rc, out, err = run_ctl(ctx, "exec", "--npu=2", "--", "true")
    res.check(rc == 1 and "310P3" in err, "exec --npu=2 (not selectable): rc %d, %s" % (rc, err))

    rc, out, err = run_ctl(ctx, "npu", "submit", "fold", "--session=%s" % SESSION, "--config=cfg.json", "--wait",
                           timeout=90.0)
    lines = out.splitlines()
    job = lines[0] if lines else ""
    if not res.check(rc == 0 and len(lines) == 2 and len(job) == 16 and lines[1] == "succeeded",
                     "npu submit --wait: rc %d, %r %s" % (rc, out, err)):
        return
    st, j = ctx.req("GET", "/npu/jobs/%s?session_id=%s" % (job, SESSION))
    res.check(st == 200 and j.get("state") == "succeeded", "the daemon has job %s succeeded: %d %s" % (job, st, j))
    rc, out, err = run_ctl(ctx, "npu", "jobs", "--session=%s" % SESSION)
    rows = [ln.split() for ln in out.splitlines()]
    res.check(rc == 0 and rows[:1] == [["JOB", "WORKLOAD", "STATE", "CHIPS", "CREATED"]]
              and any(r[:4] == [job, "fold", "succeeded", "0"] for r in rows),
              "npu jobs lists %s: rc %d\n%s%s" % (job, rc, out, err))
    rc, out, err = run_ctl(ctx, "npu", "log", job, "--session=%s" % SESSION)
    res.check(rc == 0 and "fold: done" in out, "npu log: rc %d, %r %s" % (rc, out, err))
    rc, out, err = run_ctl(ctx, "npu", "result", job, "--session=%s" % SESSION, "--json")
    res.check(rc == 0 and json.loads(out or "{}").get("exitCode") == 0, "npu result --json: rc %d, %r %s" % (rc, out, err))
    rc, out, err = run_ctl(ctx, "npu", "show", job, "--session=%s" % OTHER)
    res.check(rc == 1 and "No job" in err, "npu show from another session: rc %d, %s" % (rc, err))
    rc, out, err = run_ctl(ctx, "npu", "cancel", job, "--session=%s" % SESSION)
    res.check(rc == 0 and re.search(r"^state: +finished$", out, re.M), "npu cancel of the ended job: rc %d, %r %s"
              % (rc, out, err))
    rc, out, err = run_ctl(ctx, "npu", "workloads")
    rows = [ln.split(None, 3) for ln in out.splitlines()]
    res.check(rc == 0 and ["fold", "1", "120s", "Fold a protein on one chip"] in rows,
              "npu workloads: rc %d\n%s%s" % (rc, out, err))
    # --follow: the log streamed while the job runs (it sleeps 2 s after its first lines).
    put_file(ctx, SESSION, "cfg2.json", fold_config(ctx, run_dir="out/run2", sleep=2))
    rc, out, err = run_ctl(ctx, "npu", "submit", "fold", "--session=%s" % SESSION, "--config=cfg2.json", "--follow",
                           timeout=90.0)
    res.check(rc == 0 and out.startswith("fold: config") and out.endswith("fold: done\n") and "succeeded" in err,
              "npu submit --follow: rc %d, %r %s" % (rc, out, err))


@case("broker: a daemon restart marks an active job interrupted (last: it kills the daemon)")
def case_broker_restart(ctx, res):
    st, j = ctx.signed("POST", "/npu/jobs", {"workloadId": "fold", "sessionId": SESSION,
                                               "inputs": {"configPath": "slow.json"}})
    if not res.check(st == 202, "POST: %d %s" % (st, j)):
        return
    job = j["jobId"]
    wait_job(ctx, job, states=("running",))
    ctx.d.kill()
    deadline = now() + 20
    while now() < deadline and job_processes(job):
        ctx.budget.expired.wait(0.2)
    res.eq("the job's processes after the daemon's death", job_processes(job), [])
    ctx.d.start()
    j = wait_job(ctx, job, states=("interrupted",), t=20)
    res.check("restarted" in j.get("error", ""), "the reason: %s" % j)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--ctl", help="sandbox-runnerctl (default: src/ctl/sandbox-runnerctl next to the daemon)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    T.add_run_as_option(ap)
    args = ap.parse_args()

    out = sys.stdout
    tap = L.Tap(out)
    out.write("1..%d\n" % len(CASES))
    out.flush()
    if os.geteuid() != 0:
        # mknod needs root: the fake host cannot be built otherwise. Not a skip: a failure.
        for name, _ in CASES:
            r = Result(name)
            r.fail("this test builds fake device nodes with mknod and must run as root")
            tap.emit(r)
        return 1
    budget = L.Budget(BUDGET)
    run_as = T.resolve_run_as(args.run_as)
    d = L.Daemon(args.daemon, keep_tmp=args.keep_tmp, run_as=run_as, config="")
    ctx = Ctx(d, budget, os.path.join(d.tmp, "ascend"))
    ctx.inodes = build_host(ctx.root)
    build_broker(ctx)
    ctx.ctl = os.path.abspath(args.ctl) if args.ctl else \
        os.path.join(os.path.dirname(os.path.abspath(args.daemon)), "ctl", "sandbox-runnerctl")
    ctx.claim([1])
    with open(d.conf, "w") as f:
        f.write(config_text(ctx))
    T.chown_tree(d.tmp, run_as)
    out.write("# daemon runs as uid %s; fake Ascend host under %s\n" % (T.run_as_uid(run_as), ctx.root))
    if L.start_or_fail_all(d, CASES, tap, Result, 600) is None:
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
            elif not d.alive():
                res.fail("the daemon is not running; log tail:\n%s" % d.log_tail(1500))
            else:
                try:
                    fn(ctx, res)
                except Exception as e:                              # noqa: BLE001
                    res.fail("%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
                if not d.alive():
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
