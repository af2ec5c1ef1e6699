#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The fleet's deployment manifests (issue 24, docs/deploy/), checked offline; TAP on stdout.

  - Kubernetes: every document of docs/deploy/kubernetes/host and .../in-pod validates against the
    Kubernetes schemas of the npm package kubernetes-models 5.1.0 (its ajv validators; PodSpec
    knows hostUsers), strictly (a field the schema does not name is an error), through
    tests/helpers/k8s-validate.mjs; each kustomization lists exactly the documents beside it.
    Where kubectl is installed, `kubectl kustomize` renders both, the output validates too, and
    it differs from the raw documents by the namespace and the labels only (a TAP comment says
    whether the render ran: kubectl is the one optional tool, it is not in Debian 12).
  - Rules: in-pod, procMount: Unmasked only with hostUsers: false, and privileged, hostUsers and
    procMount each explained by a comment, with the versions they need; host, no privileged
    container, no capability, the host's user namespace, only the drop-in directory and the D-Bus
    socket from the host, read-write only the drop-in directory; everywhere, every container has
    requests and limits for cpu and memory, and every image is pinned by a tag that is not latest.
  - The node agent's script (the host ConfigMap's node-agent.sh) run against a fake busctl: the
    drop-in it writes, StartUnit for a stopped runner, ReloadUnit after a change, nothing when
    nothing changed, a refusal of bad settings and of a node without the package; the drop-ins
    it and the in-pod init container write are accepted by sandbox-runnerd's own configuration
    parser (--check).
  - Nomad: docs/deploy/nomad/sandbox-runner.nomad.hcl parses as HCL2 (npm @cdktf/hcl2json 0.21.0,
    HashiCorp's parser compiled to WebAssembly, through tests/helpers/hcl2json.mjs); a system job
    with one raw_exec task that runs the same script as the ConfigMap.
  - Each kind of check is shown to fail on a broken copy (a wrong type, a misspelled field, a
    broken YAML and HCL file, Unmasked without hostUsers: false, a privileged host pod, ...).

A missing node or npm package is a "Bail out!" naming what to install (tests/setup.sh installs
them), never a skip.

    fleet-manifests.py --daemon build/src/sandbox-runnerd
"""

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
DEPLOY = os.path.join(TOP, "docs", "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
NOMAD = os.path.join(DEPLOY, "nomad", "sandbox-runner.nomad.hcl")
VALIDATE = os.path.join(TOP, "tests", "helpers", "k8s-validate.mjs")
HCL2JSON = os.path.join(TOP, "tests", "helpers", "hcl2json.mjs")
DEFAULT_PREFIX = "/usr/local/lib/sandbox-runner-tests/manifests"
DBUS_SOCKET = "/run/dbus/system_bus_socket"
DROPIN_DIR = "/etc/sandbox-runner/runner.conf.d"

# --------------------------------------------------------------------------------------------
# TAP

count = 0
failed = 0


def tap(name, problems):
    """One TAP point: ok when @problems (a list of strings) is empty."""
    global count, failed
    count += 1
    if problems:
        failed += 1
        print("not ok %d - %s" % (count, name))
        for p in problems:
            for line in str(p).splitlines():
                print("#   " + line)
    else:
        print("ok %d - %s" % (count, name))
    sys.stdout.flush()


def comment(msg):
    print("# " + msg)
    sys.stdout.flush()


def bail(msg):
    print("Bail out! " + msg)
    sys.exit(1)


def expect_rejected(name, problems):
    """A negative self-check: the check must find something in the broken copy."""
    tap("self-check: %s is rejected" % name,
        [] if problems else ["the check found nothing wrong in a deliberately broken copy"])
    if problems:
        comment("  (rejected with: %s)" % str(problems[0]).splitlines()[0][:160])


# --------------------------------------------------------------------------------------------
# Tools

class Node:
    def __init__(self, node, modules):
        self.node = node
        self.modules = modules

    def validate(self, files):
        """k8s-validate.mjs over @files: its JSON, or bail out when it cannot run."""
        r = subprocess.run([self.node, VALIDATE, "--modules", self.modules] + list(files),
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 2:
            bail(r.stderr.strip())
        if r.returncode != 0:
            bail("k8s-validate.mjs failed (status %d): %s" % (r.returncode, r.stderr.strip()[-2000:]))
        return json.loads(r.stdout)

    def hcl(self, path):
        """(json, None) or (None, the parser's error); bail out when it cannot run."""
        r = subprocess.run([self.node, HCL2JSON, "--modules", self.modules, path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 2:
            bail(r.stderr.strip())
        if r.returncode != 0:
            return None, r.stderr.strip() or "status %d" % r.returncode
        return json.loads(r.stdout), None


def schema_problems(result):
    """Every error of a k8s-validate.mjs result: parse errors, schema errors, unknown fields."""
    out = []
    for f in result["files"]:
        where = os.path.relpath(f["file"], TOP) if f["file"].startswith(TOP) else os.path.basename(f["file"])
        if f["error"]:
            out.append("%s: %s" % (where, f["error"]))
        if not f["error"] and not f["documents"]:
            out.append("%s: no document" % where)
        for d in f["documents"]:
            what = "%s: %s %s" % (where, d.get("kind"), d.get("name"))
            out += ["%s: %s" % (what, e) for e in d["errors"]]
            out += ["%s: %s: a field the schema does not have" % (what, u) for u in d["unknownFields"]]
    return out


def documents(result):
    return [d["doc"] for f in result["files"] for d in f["documents"]]


def split(result):
    """A k8s-validate.mjs result over many files as one result per file, by path."""
    return {f["file"]: {"files": [f]} for f in result["files"]}


def write_docs(path, docs):
    """A YAML stream of @docs (JSON is YAML)."""
    with open(path, "w") as f:
        f.write("\n---\n".join(json.dumps(d, indent=1) for d in docs) + "\n")


# --------------------------------------------------------------------------------------------
# Walking manifests

def pod_specs(doc):
    """The pod specs of a document (a DaemonSet's template, a Pod's spec)."""
    if doc.get("kind") == "Pod":
        return [doc.get("spec") or {}]
    tpl = (doc.get("spec") or {}).get("template")
    return [tpl.get("spec") or {}] if isinstance(tpl, dict) else []


def containers(spec):
    return [(kind, c) for kind in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(kind) or []]


def label(doc, c):
    return "%s %s container %s" % (doc.get("kind"), (doc.get("metadata") or {}).get("name"), c.get("name"))


def rule_resources(docs):
    out = []
    for doc in docs:
        for spec in pod_specs(doc):
            for _, c in containers(spec):
                res = c.get("resources") or {}
                for part in ("requests", "limits"):
                    for r in ("cpu", "memory"):
                        if r not in (res.get(part) or {}):
                            out.append("%s: no resources.%s.%s" % (label(doc, c), part, r))
    return out


def rule_images(docs):
    out = []
    for doc in docs:
        for spec in pod_specs(doc):
            for _, c in containers(spec):
                image = c.get("image") or ""
                if "@sha256:" in image:
                    continue
                last = image.rsplit("/", 1)[-1]
                if ":" not in last:
                    out.append("%s: image %r has no tag" % (label(doc, c), image))
                elif last.rsplit(":", 1)[1] == "latest":
                    out.append("%s: image %r is pinned to latest" % (label(doc, c), image))
    return out


def rule_unmasked(docs):
    """procMount: Unmasked only in a pod with hostUsers: false."""
    out = []
    for doc in docs:
        for spec in pod_specs(doc):
            for _, c in containers(spec):
                if (c.get("securityContext") or {}).get("procMount") == "Unmasked" and spec.get("hostUsers") is not False:
                    out.append("%s: procMount: Unmasked without hostUsers: false in its pod" % label(doc, c))
    return out


def rule_in_pod_fields(docs):
    """The runner container of the in-pod variant has the fields the variant is about."""
    out = []
    runners = [(doc, spec, c) for doc in docs for spec in pod_specs(doc)
               for kind, c in containers(spec) if kind == "containers"]
    if not runners:
        return ["no container"]
    for doc, spec, c in runners:
        sc = c.get("securityContext") or {}
        if sc.get("privileged") is not True:
            out.append("%s: not privileged: true" % label(doc, c))
        if sc.get("procMount") != "Unmasked":
            out.append("%s: not procMount: Unmasked" % label(doc, c))
        if spec.get("hostUsers") is not False:
            out.append("%s: its pod has not hostUsers: false" % label(doc, c))
    return out


def rule_commented(text, fields):
    """Each line that sets one of @fields carries a comment: on the line, or in the comment
    block right above it."""
    out = []
    lines = text.splitlines()
    for field in fields:
        hits = [i for i, l in enumerate(lines) if re.match(r"^\s*%s:\s*\S" % re.escape(field), l)]
        if not hits:
            out.append("no line sets %s" % field)
        for i in hits:
            line = lines[i]
            above = lines[i - 1] if i > 0 else ""
            if "#" not in line.split(":", 1)[1] and not re.match(r"^\s*#\s*\S", above):
                out.append("line %d sets %s without a comment next to it: %s" % (i + 1, field, line.strip()))
    return out


VERSIONS = [("Kubernetes", r"Kubernetes >= 1\.33"), ("Linux", r"Linux >= 6\.3"),
            ("containerd", r"containerd >= 2\.0"), ("runc", r"runc >= 1\.2"), ("crun", r"crun >= 1\.9"),
            ("containerd 1.6 ignoring hostUsers", r"containerd 1\.6 .*IGNORES hostUsers: false"),
            ("the ProcMountType feature gate", r"ProcMountType")]


def rule_versions(text):
    comments = "\n".join(l for l in text.splitlines() if l.lstrip().startswith("#"))
    comments = re.sub(r"\n\s*#\s*", " ", comments)
    return ["the comments do not state %s (/%s/)" % (what, rx) for what, rx in VERSIONS if not re.search(rx, comments)]


def rule_host(docs):
    """The host variant's pod: nothing privileged, no capability, the host's user namespace, and
    from the host only the drop-in directory (read-write) and the D-Bus socket (read-only)."""
    out = []
    seen_ds = False
    for doc in docs:
        for spec in pod_specs(doc):
            seen_ds = True
            if spec.get("hostUsers") is False:
                out.append("%s: hostUsers: false (D-Bus would not see uid 0)" % doc["kind"])
            for ns in ("hostNetwork", "hostPID", "hostIPC"):
                if spec.get(ns):
                    out.append("%s: %s: true" % (doc["kind"], ns))
            if spec.get("automountServiceAccountToken") is not False:
                out.append("%s: the service account token is mounted" % doc["kind"])
            host_paths = {}
            for v in spec.get("volumes") or []:
                if "hostPath" in v:
                    host_paths[v["name"]] = v["hostPath"]
            for name, hp in host_paths.items():
                if hp.get("path") == DBUS_SOCKET:
                    if hp.get("type") != "Socket":
                        out.append("volume %s: the D-Bus socket without type: Socket" % name)
                elif hp.get("path") == DROPIN_DIR:
                    if hp.get("type") != "Directory":
                        out.append("volume %s: the drop-in directory without type: Directory" % name)
                else:
                    out.append("volume %s: host path %s is neither %s nor %s" % (name, hp.get("path"), DROPIN_DIR, DBUS_SOCKET))
            for _, c in containers(spec):
                sc = c.get("securityContext") or {}
                if sc.get("privileged"):
                    out.append("%s: privileged" % label(doc, c))
                if sc.get("allowPrivilegeEscalation") is not False:
                    out.append("%s: allowPrivilegeEscalation is not false" % label(doc, c))
                if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
                    out.append("%s: capabilities are not drop: [ALL]" % label(doc, c))
                if (sc.get("capabilities") or {}).get("add"):
                    out.append("%s: adds capabilities" % label(doc, c))
                if sc.get("procMount") == "Unmasked":
                    out.append("%s: procMount: Unmasked" % label(doc, c))
                if sc.get("readOnlyRootFilesystem") is not True:
                    out.append("%s: the root file system is writable" % label(doc, c))
                for m in c.get("volumeMounts") or []:
                    hp = host_paths.get(m.get("name"))
                    if hp is None:
                        continue
                    if hp.get("path") != DROPIN_DIR and m.get("readOnly") is not True:
                        out.append("%s: host path %s mounted read-write" % (label(doc, c), hp.get("path")))
    if not seen_ds:
        out.append("no pod template")
    return out


def rule_agent_wiring(docs, script):
    """The host DaemonSet runs the ConfigMap's node-agent.sh, mounted from that ConfigMap."""
    out = []
    cms = [d for d in docs if d.get("kind") == "ConfigMap"]
    if not any((d.get("data") or {}).get("node-agent.sh") == script for d in cms):
        out.append("no ConfigMap carries the node agent's script as node-agent.sh")
    for doc in docs:
        for spec in pod_specs(doc):
            vols = {v["name"]: v for v in spec.get("volumes") or []}
            for _, c in containers(spec):
                cmd = c.get("command") or []
                if len(cmd) != 2 or cmd[0] != "/bin/sh":
                    out.append("%s: command is not /bin/sh SCRIPT: %r" % (label(doc, c), cmd))
                    continue
                ok = False
                for m in c.get("volumeMounts") or []:
                    cm = (vols.get(m["name"]) or {}).get("configMap")
                    if not cm:
                        continue
                    for item in cm.get("items") or []:
                        if item.get("key") == "node-agent.sh" and os.path.join(m["mountPath"], item["path"]) == cmd[1]:
                            ok = True
                if not ok:
                    out.append("%s: %s is not the ConfigMap's node-agent.sh" % (label(doc, c), cmd[1]))
    return out


def strip_kustomize(doc):
    """@doc less what the kustomizations add: the namespace and the part-of label."""
    d = copy.deepcopy(doc)
    for meta in (d.get("metadata"), ((d.get("spec") or {}).get("template") or {}).get("metadata")):
        if isinstance(meta, dict):
            meta.pop("namespace", None)
            labels = meta.get("labels")
            if isinstance(labels, dict):
                labels.pop("app.kubernetes.io/part-of", None)
                if not labels:
                    del meta["labels"]      # kustomize writes "labels: {}" where it added none
    return d


def render_differences(raw_docs, rendered_docs):
    """What the render changed besides the namespace and the labels."""
    out = []
    raw = {(d.get("kind"), (d.get("metadata") or {}).get("name")): strip_kustomize(d) for d in raw_docs}
    got = {(d.get("kind"), (d.get("metadata") or {}).get("name")): strip_kustomize(d) for d in rendered_docs}
    for key in sorted(set(raw) | set(got), key=str):
        if key not in got:
            out.append("%s %s: not in the render" % key)
        elif key not in raw:
            out.append("%s %s: in the render only" % key)
        elif raw[key] != got[key]:
            a = json.dumps(raw[key], indent=1, sort_keys=True).splitlines()
            b = json.dumps(got[key], indent=1, sort_keys=True).splitlines()
            diff = [x for x in __import__("difflib").unified_diff(a, b, "raw", "rendered", lineterm="", n=1)]
            out.append("%s %s differs beyond namespace and labels:\n%s" % (key + ("\n".join(diff[:30]),)))
    return out


def kustomization_problems(directory, kust):
    out = []
    if kust.get("kind") != "Kustomization":
        return ["kustomization.yaml is not a Kustomization"]
    listed = kust.get("resources") or []
    present = sorted(f for f in os.listdir(directory) if f.endswith(".yaml") and f != "kustomization.yaml")
    for f in listed:
        if f not in present:
            out.append("resources lists %s, which is not there" % f)
    for f in present:
        if f not in listed:
            out.append("%s is not in resources" % f)
    for key in kust:
        if key not in ("apiVersion", "kind", "namespace", "labels", "resources"):
            out.append("kustomization.yaml sets %s: it must add only the namespace and labels" % key)
    return out


# --------------------------------------------------------------------------------------------
# The node agent against a fake busctl

FAKE_BUSCTL = r"""#!/bin/sh
# The calls the node agent makes, answered from files in $FAKE_DIR.
echo "$*" >>"$FAKE_DIR/calls"
[ -e "$FAKE_DIR/down" ] && { echo "Failed to connect to bus: No such file or directory" >&2; exit 1; }
case $1 in
get-property)
        [ "$3" = /org/freedesktop/systemd1/unit/sandbox_2drunner_2eservice ] || exit 1
        case $5 in
        LoadState) printf 's "%s"\n' "$(cat "$FAKE_DIR/load")" ;;
        ActiveState) printf 's "%s"\n' "$(cat "$FAKE_DIR/state")" ;;
        *) exit 1 ;;
        esac ;;
call) [ "$3" = /org/freedesktop/systemd1 ] && [ "$6" = ss ] && [ "$7" = sandbox-runner.service ] || exit 1 ;;
*) exit 1 ;;
esac
"""


class Agent:
    def __init__(self, script_path, work):
        self.script = script_path
        self.work = work
        self.fake = os.path.join(work, "fake")
        self.dropins = os.path.join(work, "runner.conf.d")
        os.makedirs(self.fake)
        os.makedirs(self.dropins)
        self.busctl = os.path.join(work, "busctl")
        with open(self.busctl, "w") as f:
            f.write(FAKE_BUSCTL)
        os.chmod(self.busctl, 0o755)
        self.set_unit("loaded", "inactive")

    def set_unit(self, load, state):
        for name, v in (("load", load), ("state", state)):
            with open(os.path.join(self.fake, name), "w") as f:
                f.write(v + "\n")

    def calls(self):
        p = os.path.join(self.fake, "calls")
        if not os.path.exists(p):
            return []
        with open(p) as f:
            lines = f.read().splitlines()
        os.unlink(p)
        return lines

    def manager_calls(self):
        return [l.split()[4] for l in self.calls() if l.startswith("call ")]

    def dropin(self):
        p = os.path.join(self.dropins, "50-fleet.conf")
        if not os.path.exists(p):
            return None
        with open(p) as f:
            return f.read()

    def run(self, **env):
        e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FAKE_DIR": self.fake, "BUSCTL": self.busctl,
             "DROPIN_DIR": self.dropins, "AGENT_ONCE": "1", "AGENT_READY_FILE": os.path.join(self.work, "ready"),
             "NODE_NAME": "node-a", "HOST_IP": "10.1.2.3", "FLEET_ETCD": "http://10.0.0.1:2379 http://10.0.0.2:2379"}
        e.update({k: v for k, v in env.items() if v is not None})
        for k, v in env.items():
            if v is None:
                e.pop(k, None)
        return subprocess.run(["/bin/sh", self.script], env=e, capture_output=True, text=True, timeout=30)

    def ready(self):
        return os.path.exists(os.path.join(self.work, "ready"))


def daemon_accepts(daemon, work, dropin):
    """None when sandbox-runnerd's configuration parser accepts @dropin as runner.conf.d/50-fleet.conf
    (--check prints its JSON report; the preflight's own verdict does not matter here), else why not."""
    d = tempfile.mkdtemp(dir=work)
    conf = os.path.join(d, "runner.conf")
    os.makedirs(conf + ".d")
    open(conf, "w").close()
    with open(os.path.join(conf + ".d", "50-fleet.conf"), "w") as f:
        f.write(dropin)
    r = subprocess.run([daemon, "--check", "--json", "--config", conf], capture_output=True, text=True, timeout=60)
    try:
        report = json.loads(r.stdout)
        if isinstance(report.get("checks"), list):
            return None
    except ValueError:
        pass
    return "refused (status %d): %s" % (r.returncode, (r.stderr or r.stdout).strip()[-500:])


# --------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True, help="sandbox-runnerd (its configuration parser checks the drop-ins)")
    ap.add_argument("--prefix", default=os.environ.get("MANIFEST_TOOLS_PREFIX", DEFAULT_PREFIX),
                    help="where tests/setup.sh installed the npm packages (default %(default)s)")
    args = ap.parse_args()

    node_bin = shutil.which(os.environ.get("NODE", "node"))
    if not node_bin:
        bail("node not found: install Debian's nodejs and npm (tests/setup.sh does)")
    if not os.access(args.daemon, os.X_OK):
        bail("no daemon at %s (build it: ninja -C build)" % args.daemon)
    node = Node(node_bin, os.path.join(args.prefix, "node_modules"))
    work = tempfile.mkdtemp(prefix="fleet-manifests-")
    try:
        run(node, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("1..%d" % count)
    return 1 if failed else 0


def run(node, args, work):
    variants = {}
    for v in ("host", "in-pod"):
        directory = os.path.join(K8S, v)
        files = sorted(os.path.join(directory, f) for f in os.listdir(directory)
                       if f.endswith(".yaml") and f != "kustomization.yaml")
        with open(os.path.join(directory, "daemonset.yaml")) as f:
            text = f.read()
        variants[v] = dict(dir=directory, files=files, text=text, kust_file=os.path.join(directory, "kustomization.yaml"))
    # One run of node for all raw files (each run loads the schemas anew: about a second).
    raw = split(node.validate([p for info in variants.values() for p in [info["kust_file"]] + info["files"]]))
    for info in variants.values():
        kust = raw[info["kust_file"]]
        kdocs = documents(kust)
        info["kust"] = kdocs[0] if len(kdocs) == 1 else {}
        info["kust_error"] = kust["files"][0]["error"]

    # -- the raw documents ----------------------------------------------------------------
    for v, info in variants.items():
        tap("%s: kustomization.yaml lists exactly the documents beside it and adds only namespace and labels" % v,
            ([info["kust_error"]] if info["kust_error"] else []) + kustomization_problems(info["dir"], info["kust"]))
        info["docs"] = []
        for path in info["files"]:
            res = raw[path]
            docs = documents(res)
            info["docs"] += docs
            names = ", ".join("%s %s" % (d.get("kind"), (d.get("metadata") or {}).get("name")) for d in docs)
            tap("%s/%s validates against the Kubernetes schemas, strictly (%s)" % (v, os.path.basename(path), names),
                schema_problems(res))
            ns = [d for d in docs if d.get("kind") != "Namespace" and (d.get("metadata") or {}).get("namespace") != info["kust"].get("namespace")]
            tap("%s/%s names the kustomization's namespace itself (a complete document)" % (v, os.path.basename(path)),
                ["%s %s: metadata.namespace is %r" % (d.get("kind"), d["metadata"].get("name"), d["metadata"].get("namespace")) for d in ns])

    # -- kubectl kustomize, where kubectl is ------------------------------------------------
    kubectl = shutil.which("kubectl")
    if kubectl:
        comment("kubectl kustomize: ran (%s)" % kubectl)
        for v, info in variants.items():
            r = subprocess.run([kubectl, "kustomize", info["dir"]], capture_output=True, text=True, timeout=120)
            tap("%s: kubectl kustomize renders it" % v,
                [] if r.returncode == 0 else ["status %d: %s" % (r.returncode, r.stderr.strip()[-1000:])])
            info["rendered_file"] = os.path.join(work, v + "-rendered.yaml")
            with open(info["rendered_file"], "w") as f:
                f.write(r.stdout)
        rendered = split(node.validate([info["rendered_file"] for info in variants.values()]))
        for v, info in variants.items():
            res = rendered[info["rendered_file"]]
            tap("%s: the rendered documents validate against the Kubernetes schemas, strictly" % v, schema_problems(res))
            tap("%s: the render adds only the namespace and the labels to the raw documents" % v,
                render_differences(info["docs"], documents(res)))
            info["rendered"] = documents(res)
    else:
        comment("kubectl kustomize: did NOT run (kubectl is not installed; it is not in Debian 12): "
                "the raw documents above are what was validated")

    # -- rules ------------------------------------------------------------------------------
    host, inpod = variants["host"], variants["in-pod"]
    everything = host["docs"] + inpod["docs"] + host.get("rendered", []) + inpod.get("rendered", [])
    tap("every container (init containers too) has requests and limits for cpu and memory", rule_resources(everything))
    tap("every image is pinned by a tag that is not latest (or a digest)", rule_images(everything))
    tap("in-pod: procMount: Unmasked only in a pod with hostUsers: false", rule_unmasked(inpod["docs"]))
    tap("in-pod: the runner is privileged, with procMount: Unmasked and hostUsers: false", rule_in_pod_fields(inpod["docs"]))
    tap("in-pod: privileged, hostUsers and procMount each carry a comment saying why",
        rule_commented(inpod["text"], ["privileged", "hostUsers", "procMount"]))
    tap("in-pod: the comments state the versions it needs (Kubernetes, Linux, containerd, runc, crun)",
        rule_versions(inpod["text"]))
    tap("host: no privileged container, no capability, the host's user namespace, no token", rule_host(host["docs"]))
    tap("host: the host's D-Bus socket and drop-in directory only, read-write only the drop-in directory",
        [p for p in rule_host(host["docs"]) if "host path" in p or "volume" in p])
    tap("host: hostUsers is written out, with a comment", rule_commented(host["text"], ["hostUsers"]))
    tap("host: no procMount: Unmasked in a pod without hostUsers: false", rule_unmasked(host["docs"]))

    cm = [d for d in host["docs"] if d.get("kind") == "ConfigMap"]
    script = ((cm[0].get("data") or {}).get("node-agent.sh") if cm else None) or ""
    tap("host: the DaemonSet runs the ConfigMap's node-agent.sh", rule_agent_wiring(
        [d for d in host["docs"] if d.get("kind") in ("ConfigMap", "DaemonSet")], script))

    # -- the node agent -------------------------------------------------------------------
    script_path = os.path.join(work, "node-agent.sh")
    with open(script_path, "w") as f:
        f.write(script)
    r = subprocess.run(["/bin/sh", "-n", script_path], capture_output=True, text=True)
    tap("node agent: the script parses (sh -n)", [] if script and r.returncode == 0 else [r.stderr.strip() or "no script"])

    agent = Agent(script_path, os.path.join(work, "agent"))
    r = agent.run(FLEET_ETCD_PREFIX="/sr/", FLEET_LEASE_TTL="10s")
    first = agent.dropin()
    p = []
    if r.returncode != 0:
        p.append("status %d: %s" % (r.returncode, r.stderr))
    want = ["[Fleet]", "Enable=yes", "NodeId=node-a", "AdvertiseURL=http://10.1.2.3:4313",
            "Etcd=http://10.0.0.1:2379 http://10.0.0.2:2379", "EtcdPrefix=/sr/", "LeaseTTLSec=10s"]
    got = [l for l in (first or "").splitlines() if not l.startswith("#")]
    if got != want:
        p.append("the drop-in is %r, expected %r" % (got, want))
    calls = agent.manager_calls()
    if calls != ["StartUnit"]:
        p.append("systemd was asked %r, expected StartUnit" % calls)
    tap("node agent, a stopped runner: writes the drop-in and starts the unit", p)
    err = daemon_accepts(args.daemon, work, first or "")
    tap("node agent: sandbox-runnerd's configuration parser accepts its drop-in", [err] if err else [])

    agent.set_unit("loaded", "active")
    r = agent.run(FLEET_ETCD_PREFIX="/sr/", FLEET_LEASE_TTL="10s")
    calls = agent.manager_calls()
    p = [] if r.returncode == 0 else ["status %d: %s" % (r.returncode, r.stderr)]
    if calls:
        p.append("systemd was asked %r, expected nothing" % calls)
    if agent.dropin() != first:
        p.append("the drop-in changed")
    if not agent.ready():
        p.append("the ready file is not there")
    tap("node agent, an active runner and nothing changed: no call to systemd, ready", p)

    r = agent.run(FLEET_ETCD_PREFIX="/sr/", FLEET_LEASE_TTL="10s", HOST_IP="fd00::7", FLEET_PORT="4400")
    calls = agent.manager_calls()
    new = agent.dropin() or ""
    p = [] if r.returncode == 0 else ["status %d: %s" % (r.returncode, r.stderr)]
    if calls != ["ReloadUnit"]:
        p.append("systemd was asked %r, expected ReloadUnit" % calls)
    if "AdvertiseURL=http://[fd00::7]:4400\n" not in new:
        p.append("the new drop-in has no AdvertiseURL=http://[fd00::7]:4400: %r" % new)
    if agent.ready():
        p.append("ready while the runner reloads")
    if any(f.startswith(".") for f in os.listdir(agent.dropins)):
        p.append("a temporary file was left: %r" % os.listdir(agent.dropins))
    tap("node agent, a changed setting (IPv6 address, port): rewrites the drop-in, reloads the unit", p)
    err = daemon_accepts(args.daemon, work, new)
    tap("node agent: sandbox-runnerd's configuration parser accepts the IPv6 drop-in", [err] if err else [])

    agent.set_unit("not-found", "inactive")
    r = agent.run(NODE_NAME="node-b")
    calls = agent.manager_calls()
    p = []
    if r.returncode == 0:
        p.append("status 0 on a node without the package")
    if calls:
        p.append("systemd was asked %r" % calls)
    if "install the sandbox-runner package" not in r.stderr:
        p.append("no message naming the package: %r" % r.stderr)
    tap("node agent, a node without the .deb: fails, says so, starts nothing", p)

    agent.set_unit("loaded", "active")
    with open(os.path.join(agent.fake, "down"), "w"):
        pass
    r = agent.run(NODE_NAME="node-c")
    os.unlink(os.path.join(agent.fake, "down"))
    agent.calls()
    tap("node agent, D-Bus unreachable: fails and is not ready",
        ([] if r.returncode != 0 else ["status 0"]) + (["ready"] if agent.ready() else []))

    for what, env in (("a node name with a newline", {"NODE_NAME": "a\nEnable=no"}),
                      ("an etcd endpoint that is not a URL", {"FLEET_ETCD": "10.0.0.1:2379"}),
                      ("no etcd endpoint", {"FLEET_ETCD": None}),
                      ("a host address that is not one", {"HOST_IP": "10.0.0.1; rm"}),
                      ("a port that is not one", {"FLEET_PORT": "43x"}),
                      ("a prefix with a space", {"FLEET_ETCD_PREFIX": "/a b/"})):
        fresh = Agent(script_path, tempfile.mkdtemp(dir=work))
        r = fresh.run(**env)
        p = []
        if r.returncode != 78:
            p.append("status %d, expected 78 (EX_CONFIG): %s" % (r.returncode, r.stderr))
        if fresh.dropin() is not None:
            p.append("a drop-in was written")
        if fresh.manager_calls():
            p.append("systemd was asked")
        tap("node agent refuses %s (status 78, nothing written, nothing asked)" % what, p)

    # The in-pod variant's init container writes the same drop-in in its pod.
    init = [c for d in inpod["docs"] for spec in pod_specs(d) for kind, c in containers(spec) if kind == "initContainers"]
    p = []
    inpod_dropin = ""
    if len(init) != 1 or (init[0].get("command") or [None])[:2] != ["/bin/sh", "-ec"]:
        p.append("no single init container running /bin/sh -ec SCRIPT")
    else:
        d = tempfile.mkdtemp(dir=work)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NODE_NAME": "node-p", "POD_IP": "10.244.1.9",
               "FLEET_ETCD": "http://10.0.0.1:2379", "FLEET_ETCD_PREFIX": "/sandbox-runner/",
               "FLEET_PORT": "4313", "FLEET_LEASE_TTL": "10s", "DROPIN_DIR": d}
        r = subprocess.run(["/bin/sh", "-ec", init[0]["command"][2]], env=env, capture_output=True, text=True, timeout=30)
        try:
            with open(os.path.join(d, "50-fleet.conf")) as f:
                inpod_dropin = f.read()
        except OSError as e:
            p.append("status %d, no drop-in: %s %s" % (r.returncode, e, r.stderr))
        if "AdvertiseURL=http://10.244.1.9:4313\n" not in inpod_dropin:
            p.append("no AdvertiseURL of the pod's address: %r" % inpod_dropin)
        err = daemon_accepts(args.daemon, work, inpod_dropin)
        if err:
            p.append("sandbox-runnerd: " + err)
    tap("in-pod: the init container's drop-in is accepted by sandbox-runnerd's configuration parser", p)

    # -- Nomad ------------------------------------------------------------------------------
    job, err = node.hcl(NOMAD)
    tap("nomad: sandbox-runner.nomad.hcl parses as HCL2 (@cdktf/hcl2json)", [err] if err else [])
    tap("nomad: a system job whose one raw_exec task runs the node agent", nomad_problems(job or {}))
    with open(NOMAD) as f:
        nomad_text = f.read()
    data = nomad_template(job or {})
    p = []
    if data != script:
        p.append("the template's script differs from the ConfigMap's node-agent.sh")
    for bad in ("${", "%{", "{{"):
        if bad in script:
            p.append("the script contains %r (HCL or Nomad template syntax)" % bad)
    tap("nomad: the task's script is the ConfigMap's node-agent.sh, free of HCL and template syntax", p)
    tap("nomad: the job says what raw_exec costs (root, no isolation) in its comments",
        [] if re.search(r"raw_exec has no isolation", nomad_text) and re.search(r"root", nomad_text)
        else ["no comment on raw_exec's cost"])

    # -- each kind of check fails on a broken copy --------------------------------------------
    ds = next(d for d in host["docs"] if d.get("kind") == "DaemonSet")
    ipds = next(d for d in inpod["docs"] if d.get("kind") == "DaemonSet")

    def broken(mutate, base=ds):
        d = copy.deepcopy(base)
        mutate(d)
        return d

    def agent_container(d):
        return d["spec"]["template"]["spec"]["containers"][0]

    schema_cases = [
        ("a wrong type (a memory limit of '32 MB')",
         broken(lambda d: agent_container(d)["resources"]["limits"].update(memory="32 MB"))),
        ("a wrong type (containerPort as a string)",
         broken(lambda d: agent_container(d).update(ports=[{"containerPort": "4311"}]), ipds)),
        ("a misspelled field (hostUser)", broken(lambda d: d["spec"]["template"]["spec"].update(hostUser=True))),
        ("a misspelled field in a container (readOnlyRootFileSystem)",
         broken(lambda d: agent_container(d)["securityContext"].update(readOnlyRootFileSystem=True))),
        ("a missing required field (a container without name)", broken(lambda d: agent_container(d).pop("name"))),
        ("an unknown kind (DaemonSett)", broken(lambda d: d.update(kind="DaemonSett"))),
    ]
    paths = []
    for i, (_, doc) in enumerate(schema_cases):
        paths.append(os.path.join(work, "broken-%d.yaml" % i))
        write_docs(paths[-1], [doc])
    bad_yaml = os.path.join(work, "broken.yaml")
    with open(bad_yaml, "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   namespace: y\n")
    results = split(node.validate(paths + [bad_yaml]))
    for (what, _), path in zip(schema_cases, paths):
        expect_rejected(what, schema_problems(results[path]))
    expect_rejected("a YAML syntax error", schema_problems(results[bad_yaml]))
    expect_rejected("procMount: Unmasked without hostUsers: false",
                    rule_unmasked([broken(lambda d: d["spec"]["template"]["spec"].pop("hostUsers"), ipds)]))
    expect_rejected("an in-pod runner that is not privileged", rule_in_pod_fields([broken(
        lambda d: agent_container(d)["securityContext"].pop("privileged"), ipds)]))
    expect_rejected("privileged without its comment",
                    rule_commented(re.sub(r"(?m)^(\s*#.*\n)+(\s*privileged: true)", r"\2", inpod["text"]), ["privileged"]))
    expect_rejected("comments without the containerd version",
                    rule_versions(inpod["text"].replace("containerd >= 2.0", "containerd 2")))
    expect_rejected("a privileged host agent", rule_host([broken(
        lambda d: agent_container(d)["securityContext"].update(privileged=True))]))
    expect_rejected("a host agent with a capability", rule_host([broken(
        lambda d: agent_container(d)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]))]))
    expect_rejected("a host agent that also mounts /run/systemd", rule_host([broken(
        lambda d: d["spec"]["template"]["spec"]["volumes"].append({"name": "systemd", "hostPath": {"path": "/run/systemd"}}))]))
    expect_rejected("a host agent with the D-Bus socket read-write", rule_host([broken(
        lambda d: [m.pop("readOnly") for m in agent_container(d)["volumeMounts"] if m["name"] == "system-bus"])]))
    expect_rejected("an image pinned to latest", rule_images([broken(
        lambda d: agent_container(d).update(image="registry.example.com/x/node-agent:latest"))]))
    expect_rejected("an image without a tag", rule_images([broken(
        lambda d: agent_container(d).update(image="registry.example.com:5000/x/node-agent"))]))
    expect_rejected("a container without limits", rule_resources([broken(
        lambda d: agent_container(d)["resources"].pop("limits"))]))
    expect_rejected("a render that changed more than namespace and labels", render_differences(
        [ds], [broken(lambda d: agent_container(d).update(image="registry.example.com/x/other:1"))]))
    expect_rejected("a kustomization that patches", kustomization_problems(host["dir"], dict(host["kust"], patches=[])))
    expect_rejected("a DaemonSet that runs another script", rule_agent_wiring(
        [cm[0], broken(lambda d: agent_container(d).update(command=["/bin/sh", "/opt/other.sh"]))], script))
    err = daemon_accepts(args.daemon, work, (first or "").replace("Enable=yes", "Enabled=yes"))
    expect_rejected("a drop-in with a misspelled key (by sandbox-runnerd)", [err] if err else [])
    bad_hcl = os.path.join(work, "broken.nomad.hcl")
    with open(bad_hcl, "w") as f:
        f.write(nomad_text.replace('driver = "raw_exec"', 'driver = "raw_exec'))
    _, err = node.hcl(bad_hcl)
    expect_rejected("an HCL syntax error", [err] if err else [])
    if job:
        j = copy.deepcopy(job)
        next(iter(j["job"].values()))[0]["type"] = "service"
        expect_rejected("a Nomad job that is not a system job", nomad_problems(j))
    else:
        tap("self-check: a Nomad job that is not a system job is rejected", ["the job did not parse"])


def nomad_task(job):
    try:
        (name, [j]), = job["job"].items()
        (gname, [g]), = j["group"].items()
        (tname, [t]), = g["task"].items()
        return j, g, t
    except (KeyError, TypeError, ValueError):
        return None


def nomad_template(job):
    jgt = nomad_task(job)
    try:
        return jgt[2]["template"][0]["data"]
    except (TypeError, KeyError, IndexError):
        return None


def nomad_problems(job):
    jgt = nomad_task(job)
    if not jgt:
        return ["not one job with one group with one task"]
    j, g, t = jgt
    out = []
    if j.get("type") != "system":
        out.append("type is %r, not system" % j.get("type"))
    if t.get("driver") != "raw_exec":
        out.append("driver is %r, not raw_exec" % t.get("driver"))
    tpl = (t.get("template") or [{}])[0]
    dest = tpl.get("destination", "")
    cfg = (t.get("config") or [{}])[0]
    args = cfg.get("args") or []
    if cfg.get("command") != "/bin/sh" or len(args) != 1 or not dest.startswith("local/") or \
            args[0] != "${NOMAD_TASK_DIR}/" + dest[len("local/"):]:
        out.append("the task does not run its template (%r %r, destination %r)" % (cfg.get("command"), args, dest))
    env = (t.get("env") or [{}])[0]
    for k, want in (("NODE_NAME", "${node.unique.name}"), ("HOST_IP", "${attr.unique.network.ip-address}"),
                    ("FLEET_ETCD", "${var.etcd}"), ("DROPIN_DIR", DROPIN_DIR)):
        if env.get(k) != want:
            out.append("env %s is %r, not %r" % (k, env.get(k), want))
    res = (t.get("resources") or [{}])[0]
    if not res.get("cpu") or not res.get("memory"):
        out.append("no resources (cpu, memory)")
    var = (job.get("variable") or {}).get("etcd")
    if not var or "default" in var[0]:
        out.append("variable etcd missing or with a default (it must be given)")
    return out


if __name__ == "__main__":
    sys.exit(main())
