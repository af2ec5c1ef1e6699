#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandbox-runner-provision: builds one environment prefix, run by the daemon inside a bwrap
sandbox (DESIGN.md section 14) as `/usr/bin/python3 -I -B /.sandbox/code`.

Owns: reading the plan (one JSON object on stdin), building the prefix it names (kind python: a
`venv --copies`, the closure of the requested Debian python3-* packages copied into its
site-packages, then pip from the plan's wheelhouses, client wheels or index; kind r: a site
library with the closure of the requested r-cran-*/r-bioc-* packages copied in, and R/Rscript
wrappers), and reporting on stdout, one JSON object a line: progress lines, then one result line
on success.  pip's and venv's own output goes to stderr; on failure the last line on stderr is
`provision: <why>` and the exit status is 1 (2 for a bad plan).

May use: the Python standard library only.  It writes only under the plan's prefix and the
temporary directory, runs only the plan's interpreter, the prefix's own interpreter (venv, pip,
compileall) and nothing else, and trusts nothing it reads (dpkg's database, pip's report, the
prefix's metadata) beyond the plan: paths from dpkg's file lists are checked to lie under the one
directory they are copied from, files are created with O_EXCL|O_NOFOLLOW, directories are checked
not to be symlinks."""

import email.parser
import hashlib
import json
import os
import platform
import re
import shlex
import stat
import subprocess
import sys
import tempfile
import urllib.parse

PY_DIST_PACKAGES = "/usr/lib/python3/dist-packages/"
R_SITE_LIBRARY = "/usr/lib/R/site-library/"
R_BIN = "/usr/lib/R/bin"
R_BASE_DESCRIPTION = "/usr/lib/R/library/base/DESCRIPTION"
PLAN_MAX = 1 << 20

REQUIRED = object()
# key: (types, default)
PLAN_KEYS = {
    "kind": ((str,), REQUIRED),
    "prefix": ((str,), REQUIRED),
    "python": ((str,), "/usr/bin/python3"),
    "debianPackages": ((list,), []),
    "packages": ((list,), []),
    "wheels": ((list,), []),
    "findLinks": ((list,), []),
    "indexUrl": ((str, type(None)), None),
    "offline": ((bool,), True),
    "dpkgRoot": ((str,), "/var/lib/dpkg"),
    "cert": ((str, type(None)), None),
}

DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# The daemon checked each specifier (env_package_spec_check()); this is the second line of defence
# against option injection, URLs, paths, direct references and markers ("--" goes before them too).
PIP_SPEC = re.compile(r"^[A-Za-z0-9][^/\\@;:\s]*(?: +[^/\\@;:\s]+)*$")
SAFE_PATH = re.compile(r"^/[A-Za-z0-9._+/-]*$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "i686": "i386", "i386": "i386",
            "armv7l": "armhf", "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}


class ProvisionError(Exception):
    """A failure with a message for the daemon (the last line on stderr)."""


class PlanError(ProvisionError):
    """The plan itself is wrong: exit status 2."""


def log(msg):
    sys.stderr.write("provision: %s\n" % msg)
    sys.stderr.flush()


def emit(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


class Progress:
    """Progress lines: one as each step starts (done = steps finished before it), and a last one
    with done == total."""

    def __init__(self, total):
        self.total = total
        self.done = 0

    def start(self, step):
        emit({"progress": {"done": self.done, "total": self.total, "step": step}})

    def finish(self):
        self.done += 1

    def end(self):
        emit({"progress": {"done": self.done, "total": self.total, "step": "finished"}})


# --------------------------------------------------------------------------------------------
# The plan

def is_abs_path(p):
    return (isinstance(p, str) and p.startswith("/") and "\0" not in p
            and os.path.normpath(p) == p and p != "/")


def check_str_list(plan, key, check, what):
    for v in plan[key]:
        if not isinstance(v, str) or not check(v):
            raise PlanError("bad plan: %s: not %s: %r" % (key, what, v))


def parse_plan(text):
    try:
        plan = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise PlanError("bad plan: not JSON: %s" % e) from None
    if not isinstance(plan, dict):
        raise PlanError("bad plan: not a JSON object")
    for k in plan:
        if k not in PLAN_KEYS:
            raise PlanError("bad plan: unknown key %r" % k)
    for k, (types, default) in PLAN_KEYS.items():
        if k not in plan:
            if default is REQUIRED:
                raise PlanError("bad plan: %s missing" % k)
            plan[k] = list(default) if isinstance(default, list) else default
        elif not isinstance(plan[k], types):
            raise PlanError("bad plan: %s has the wrong type" % k)

    kind = plan["kind"]
    if kind not in ("python", "r"):
        raise PlanError("bad plan: kind %r is not provisioned by this script" % kind)
    if not is_abs_path(plan["prefix"]) or not SAFE_PATH.match(plan["prefix"]):
        raise PlanError("bad plan: prefix must be a normalized absolute path of [A-Za-z0-9._+/-]")
    for k in ("python", "dpkgRoot"):
        if not is_abs_path(plan[k]):
            raise PlanError("bad plan: %s must be a normalized absolute path" % k)
    check_str_list(plan, "debianPackages", DEB_NAME.match, "a Debian package name")
    check_str_list(plan, "packages", lambda s: PIP_SPEC.match(s) and s.isprintable(),
                   "a requirement specifier")
    check_str_list(plan, "wheels", lambda s: is_abs_path(s) and s.endswith(".whl"), "a wheel path")
    check_str_list(plan, "findLinks", is_abs_path, "an absolute directory")
    url = plan["indexUrl"]
    if url is not None and (not url.startswith("https://") or not url.isprintable() or " " in url):
        raise PlanError("bad plan: indexUrl must be an https URL")
    if plan["offline"] and url is not None:
        raise PlanError("bad plan: indexUrl given in offline mode")

    allowed = ("python3-",) if kind == "python" else ("r-cran-", "r-bioc-")
    for p in plan["debianPackages"]:
        if not p.startswith(allowed):
            raise PlanError("bad plan: Debian package %s is not %s*" % (p, "*/".join(allowed)))
    if kind == "r":
        if plan["packages"]:
            raise ProvisionError("CRAN/Bioconductor installs are not implemented: only Debian's "
                                 "r-cran-*/r-bioc-* packages can go into an r environment "
                                 "(asked for %s)" % ", ".join(plan["packages"]))
        if plan["wheels"] or plan["findLinks"] or url is not None:
            raise PlanError("bad plan: wheels, findLinks and indexUrl are for kind python")
    return plan


def prepare_prefix(prefix):
    """The prefix exists as an empty directory (the daemon's bind target) or is created."""
    try:
        os.mkdir(prefix, 0o755)
        return
    except FileExistsError:
        pass
    st = os.lstat(prefix)
    if not stat.S_ISDIR(st.st_mode):
        raise ProvisionError("prefix %s is not a directory" % prefix)
    if os.listdir(prefix):
        raise ProvisionError("prefix %s is not empty" % prefix)


# --------------------------------------------------------------------------------------------
# dpkg's database: the status file, versions, the dependency closure

def read_deb822(path):
    """The paragraphs of a deb822 file (dpkg's status) as dicts; continuation lines joined."""
    paras, para, key = [], {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if para:
                    paras.append(para)
                para, key = {}, None
                continue
            if line[0] in " \t":
                if key is not None:
                    para[key] += "\n" + line.strip()
                continue
            k, sep, v = line.partition(":")
            if not sep:
                continue
            key = k.strip()
            para[key] = v.strip()
    if para:
        paras.append(para)
    return paras


def _order(c):
    if c == "~":
        return -1
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _cmp_part(a, b):
    """dpkg's verrevcmp() on one upstream version or revision."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def split_version(v):
    epoch, sep, rest = v.partition(":")
    if not sep or not epoch.isdigit():
        epoch, rest = "0", v
    upstream, sep, rev = rest.rpartition("-")
    if not sep:
        upstream, rev = rest, ""
    return int(epoch), upstream, rev


def version_cmp(a, b):
    ea, ua, ra = split_version(a)
    eb, ub, rb = split_version(b)
    if ea != eb:
        return ea - eb
    return _cmp_part(ua, ub) or _cmp_part(ra, rb)


def version_satisfies(have, op, want):
    c = version_cmp(have, want)
    return {"<<": c < 0, "<=": c <= 0, "=": c == 0, ">=": c >= 0, ">>": c > 0,
            "<": c <= 0, ">": c >= 0}.get(op, False)


RELATION = re.compile(r"^([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9-]+)?\s*"
                      r"(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([^)\s]+)\s*\))?")


def parse_relations(value):
    """Depends-style field -> [[(name, op, version)]] (and-list of or-lists); architecture
    qualifiers (:any, :amd64) dropped, [arch] and <profile> restrictions ignored."""
    groups = []
    for group in value.split(","):
        alts = []
        for alt in group.split("|"):
            m = RELATION.match(alt.strip())
            if m:
                alts.append((m.group(1), m.group(2), m.group(3)))
        if alts:
            groups.append(alts)
    return groups


class Dpkg:
    """The installed packages of dpkg's status file, by name, and who provides what."""

    def __init__(self, root):
        self.root = root
        native = DEB_ARCH.get(platform.machine())
        self.pkgs = {}
        self.provides = {}
        try:
            paras = read_deb822(os.path.join(root, "status"))
        except OSError as e:
            raise ProvisionError("cannot read dpkg's status in %s: %s" % (root, e.strerror))
        for p in paras:
            name = p.get("Package", "")
            if not DEB_NAME.match(name) or p.get("Status", "").split()[-1:] != ["installed"]:
                continue
            old = self.pkgs.get(name)
            if old is not None and old.get("Architecture") in (native, "all"):
                continue                    # multiarch: keep the native instance
            self.pkgs[name] = p
        for name, p in self.pkgs.items():
            for alts in parse_relations(p.get("Provides", "")):
                virt, op, ver = alts[0]
                self.provides.setdefault(virt, []).append((name, ver if op == "=" else None))

    def version(self, name):
        return self.pkgs[name].get("Version", "")

    def satisfier(self, name, op, ver):
        """The installed package that satisfies one alternative, or None."""
        p = self.pkgs.get(name)
        if p is not None and (op is None or version_satisfies(p.get("Version", ""), op, ver)):
            return name
        for prov, pver in sorted(self.provides.get(name, [])):
            if op is None or (pver is not None and version_satisfies(pver, op, ver)):
                return prov
        return None

    def closure(self, roots, allowed):
        """The roots and the installed packages named allowed* they depend on (Depends,
        Pre-Depends), breadth first; a dependency is followed through the first alternative an
        installed package satisfies, and not followed when that one is not allowed*."""
        for r in roots:
            if r not in self.pkgs:
                raise ProvisionError("Debian package %s is not installed" % r)
        order, seen, queue = [], set(), list(roots)
        while queue:
            name = queue.pop(0)
            if name in seen:
                continue
            seen.add(name)
            order.append(name)
            p = self.pkgs[name]
            for field in ("Pre-Depends", "Depends"):
                for alts in parse_relations(p.get(field, "")):
                    for alt in alts:
                        got = self.satisfier(*alt)
                        if got is not None:
                            if got.startswith(allowed) and got not in seen:
                                queue.append(got)
                            break
        return order

    def file_list(self, name):
        arch = self.pkgs[name].get("Architecture", "")
        for fn in ("%s:%s.list" % (name, arch), "%s.list" % name):
            try:
                with open(os.path.join(self.root, "info", fn), encoding="utf-8",
                          errors="surrogateescape") as f:
                    return [line.rstrip("\n") for line in f if line.strip()]
            except FileNotFoundError:
                continue
        raise ProvisionError("dpkg has no file list for %s" % name)


# --------------------------------------------------------------------------------------------
# Copying files into the prefix

class Copier:
    """Copies files from under one source directory to the same relative paths under one target
    directory, which it creates: regular files copied (mode without set-id bits, mtime kept),
    symlinks recreated as symlinks, never a hard link."""

    def __init__(self, src_root, dst_root):
        self.src_root = src_root
        self.dst_root = dst_root
        self.dirs = set()
        self.bytes = 0

    def relative(self, path):
        """path's place under src_root, or None (outside, the root itself, or odd)."""
        if not path.startswith(self.src_root) or os.path.normpath(path) != path.rstrip("/"):
            return None
        rel = path[len(self.src_root):]
        if not rel or rel.startswith("/") or ".." in rel.split("/") or "\0" in rel:
            return None
        return rel

    def ensure_dir(self, rel):
        if rel in ("", ".") or rel in self.dirs:
            return
        self.ensure_dir(os.path.dirname(rel))
        d = os.path.join(self.dst_root, rel)
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                raise ProvisionError("%s exists in the prefix and is not a directory" % rel)
        self.dirs.add(rel)

    def plan(self, paths):
        """[(rel, lstat of the source)] of the paths under src_root that exist."""
        out = []
        for p in paths:
            rel = self.relative(p)
            if rel is None:
                continue
            try:
                out.append((rel, os.lstat(p)))
            except FileNotFoundError:
                continue
        return out

    def collisions(self, entries):
        return [rel for rel, st in entries if not stat.S_ISDIR(st.st_mode)
                and os.path.lexists(os.path.join(self.dst_root, rel))]

    def copy(self, entries):
        for rel, st in entries:
            src = os.path.join(self.src_root, rel)
            dst = os.path.join(self.dst_root, rel)
            if stat.S_ISDIR(st.st_mode):
                self.ensure_dir(rel)
            elif stat.S_ISLNK(st.st_mode):
                self.ensure_dir(os.path.dirname(rel))
                os.symlink(os.readlink(src), dst)
            elif stat.S_ISREG(st.st_mode):
                self.ensure_dir(os.path.dirname(rel))
                self.copy_file(src, dst, st)

    def copy_file(self, src, dst, st):
        fi = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fo = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         stat.S_IMODE(st.st_mode) & 0o755)
            try:
                while True:
                    n = os.sendfile(fo, fi, None, 1 << 24)
                    if n == 0:
                        break
                    self.bytes += n
                os.utime(fo, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(fo)
        finally:
            os.close(fi)


def copy_debian(dpkg, closure, source, target, progress):
    """Copies the closure's files under source (Debian's directory) to target; returns owners:
    top-level entry under target -> (pkg, version). A package whose files are already in the
    prefix (the venv's own pip/setuptools/pkg_resources) is left out, with a note on stderr."""
    owners = {}
    if not closure:
        return owners
    copier = Copier(source, target)
    copier.dirs.add("")
    for name in closure:
        progress.start("copy %s" % name)
        entries = copier.plan(dpkg.file_list(name))
        clash = copier.collisions(entries)
        if clash:
            log("%s left out: the prefix already has %s" % (name, clash[0]))
        elif entries:
            copier.copy(entries)
            for rel, _ in entries:
                owners.setdefault(rel.split("/")[0], (name, dpkg.version(name)))
        progress.finish()
    return owners


# --------------------------------------------------------------------------------------------
# Running the prefix's programs

def child_env(prefix):
    env = {"PATH": prefix + "/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "HOME": os.environ.get("HOME") or tempfile.gettempdir(),
           "TMPDIR": tempfile.gettempdir(), "PIP_CONFIG_FILE": os.devnull,
           "PYTHONNOUSERSITE": "1"}
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
              "SSL_CERT_FILE", "SSL_CERT_DIR", "SOURCE_DATE_EPOCH"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def run(argv, prefix, what):
    """Runs argv with its stdout and stderr forwarded to our stderr; raises with the last
    ERROR line (else the last line) when it fails.  Returns its stdout+stderr lines."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=child_env(prefix), cwd="/",
                                close_fds=True)
    except OSError as e:
        raise ProvisionError("%s failed: cannot run %s: %s" % (what, argv[0], e.strerror))
    lines = []
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        sys.stderr.write(line + "\n")
        lines.append(line)
        del lines[:-200]
    sys.stderr.flush()
    rc = proc.wait()
    if rc != 0:
        errs = [ln for ln in lines if ln.startswith("ERROR:")] or [ln for ln in lines if ln.strip()]
        why = errs[-1].strip() if errs else "no output"
        # pip says why it could not reach an index only in its retry warnings: the gateway's
        # refusal ("Tunnel connection failed: 403 ...") is the cause the operator needs.
        proxy = [ln for ln in lines if "Tunnel connection failed" in ln or "ProxyError" in ln]
        if proxy:
            m = re.search(r"Tunnel connection failed: [^'\")]*", proxy[-1])
            why += " (the index was not reachable: %s)" % (m.group(0) if m else "proxy error")
        raise ProvisionError("%s failed (exit %d): %s" % (what, rc, why[:500]))
    return lines


def file_sha256(path):
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_size(top):
    total, seen = 0, set()
    for dp, dns, fns in os.walk(top):
        for n in dns + fns:
            st = os.lstat(os.path.join(dp, n))
            if stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def normalize_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_headers(path):
    """The RFC 822 headers of a METADATA/PKG-INFO file, not following a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        data = f.read(1 << 20)
    return email.parser.BytesHeaderParser().parsebytes(data)


# --------------------------------------------------------------------------------------------
# Kind python

def pip_sources(report, plan):
    """pip's --report -> {normalized name: (source, sha256 or None)}."""
    wheels = {os.path.realpath(w): w for w in plan["wheels"]}
    links = {os.path.realpath(d) for d in plan["findLinks"]}
    out = {}
    items = report.get("install") if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise ProvisionError("pip's report has no install list")
    for it in items:
        meta = it.get("metadata") if isinstance(it, dict) else None
        dl = it.get("download_info") if isinstance(it, dict) else None
        if not isinstance(meta, dict) or not isinstance(dl, dict) \
                or not isinstance(meta.get("name"), str) or not isinstance(dl.get("url"), str):
            raise ProvisionError("pip's report has an install entry without name or url")
        url = dl["url"]
        ai = dl.get("archive_info") if isinstance(dl.get("archive_info"), dict) else {}
        sha = None
        if isinstance(ai.get("hashes"), dict) and isinstance(ai["hashes"].get("sha256"), str):
            sha = ai["hashes"]["sha256"]
        elif isinstance(ai.get("hash"), str) and ai["hash"].startswith("sha256="):
            sha = ai["hash"][len("sha256="):]
        u = urllib.parse.urlsplit(url)
        if u.scheme == "file":
            path = os.path.realpath(urllib.parse.unquote(u.path))
            base = os.path.basename(path)
            if path in wheels:
                source = "wheel:" + base
                actual = file_sha256(path)
                parent = os.path.basename(os.path.dirname(wheels[path]))
                if SHA256_HEX.match(parent) and parent != actual:
                    raise ProvisionError("wheel %s does not match its hash %s" % (base, parent))
                sha = actual
            elif os.path.dirname(path) in links:
                source = "wheelhouse:" + base
                sha = sha or file_sha256(path)
            else:
                source = "file:" + path
        elif u.scheme in ("https", "http"):
            source = "index:" + url
        else:
            source = "unknown:" + url
        if sha is not None and not SHA256_HEX.match(sha):
            raise ProvisionError("pip's report has a bad sha256 for %s" % meta["name"])
        out[normalize_name(meta["name"])] = (source, sha)
    return out


def pip_install(plan, tmp):
    prefix = plan["prefix"]
    report = os.path.join(tmp, "pip-report.json")
    argv = [prefix + "/bin/python", "-I", "-m", "pip", "install", "--no-cache-dir",
            "--disable-pip-version-check", "--no-input", "--report", report]
    if plan["offline"]:
        argv.append("--no-index")
    for d in plan["findLinks"]:
        argv += ["--find-links", d]
    if plan["indexUrl"] is not None:
        argv += ["--index-url", plan["indexUrl"]]
    if plan["cert"] is not None:
        argv += ["--cert", plan["cert"]]
    argv += ["--"] + plan["wheels"] + plan["packages"]
    run(argv, prefix, "pip install")
    try:
        with open(report, encoding="utf-8") as f:
            return pip_sources(json.load(f), plan)
    except (OSError, ValueError) as e:
        raise ProvisionError("cannot read pip's report: %s" % e)


def python_packages(site, owners, pip_src):
    """Every distribution in site-packages, with its source."""
    pkgs = []
    for entry in sorted(os.listdir(site)):
        path = os.path.join(site, entry)
        st = os.lstat(path)
        if entry.endswith(".dist-info") and stat.S_ISDIR(st.st_mode):
            meta = os.path.join(path, "METADATA")
        elif entry.endswith(".egg-info") and stat.S_ISDIR(st.st_mode):
            meta = os.path.join(path, "PKG-INFO")
        elif entry.endswith(".egg-info") and stat.S_ISREG(st.st_mode):
            meta = path
        else:
            continue
        try:
            h = read_headers(meta)
        except OSError:
            continue
        name, version = h.get("Name"), h.get("Version")
        if not name or not version:
            continue
        key = normalize_name(name)
        p = {"name": str(name), "version": str(version)}
        if key in pip_src:
            p["source"], sha = pip_src[key]
            if sha:
                p["sha256"] = sha
        elif entry in owners:
            p["source"] = "debian:%s %s" % owners[entry]
        else:
            p["source"] = "venv"
        pkgs.append(p)
    pkgs.sort(key=lambda p: (normalize_name(p["name"]), p["version"]))
    return pkgs


def provision_python(plan, tmp):
    prefix = plan["prefix"]
    dpkg = Dpkg(plan["dpkgRoot"]) if plan["debianPackages"] else None
    closure = dpkg.closure(plan["debianPackages"], ("python3-",)) if dpkg else []
    want_pip = bool(plan["packages"] or plan["wheels"])
    progress = Progress(1 + len(closure) + (1 if closure else 0) + (2 if want_pip else 0))

    progress.start("venv")
    run([plan["python"], "-I", "-m", "venv", "--copies", prefix], prefix, "python -m venv")
    out = run([prefix + "/bin/python", "-I", "-c",
               "import sys; print('%d.%d.%d' % sys.version_info[:3])"], prefix, "python")
    pyver = out[-1].strip() if out else ""
    if not re.match(r"^3\.\d+\.\d+$", pyver):
        raise ProvisionError("the venv's python reports no version")
    site = os.path.join(prefix, "lib", "python" + pyver.rsplit(".", 1)[0], "site-packages")
    if not os.path.isdir(site) or os.path.islink(site):
        raise ProvisionError("the venv has no %s" % site)
    progress.finish()

    owners = copy_debian(dpkg, closure, PY_DIST_PACKAGES, site, progress)
    if closure:
        # The prefix is read-only in runs: byte-code now, or every import compiles again.
        progress.start("compile")
        compile_site(prefix, site)
        progress.finish()

    pip_src = {}
    if want_pip:
        progress.start("pip install")
        pip_src = pip_install(plan, tmp)
        progress.finish()
        # The new environment's interpreter starts once, as runs will start it: its site
        # (and every .pth file the packages installed) must load. This runs the packages' own
        # start-up code here, in the provisioning sandbox, before any run does.
        progress.start("check")
        run([prefix + "/bin/python", "-I", "-c",
             "import importlib.metadata as m; print(len(list(m.distributions())))"], prefix,
            "the environment's interpreter")
        progress.finish()

    pkgs = python_packages(site, owners, pip_src)
    pip_version = next((p["version"] for p in pkgs if normalize_name(p["name"]) == "pip"), "none")
    progress.end()
    return {"packages": pkgs,
            "provisioner": "python-venv (Python %s, pip %s)" % (pyver, pip_version),
            "sizeBytes": tree_size(prefix)}


def compile_site(prefix, site):
    """Byte-compiles site-packages, in parallel, then once more in one process if that failed
    (a sandbox without working POSIX semaphores; files done already are skipped).  A file that
    does not compile (a test module written for another Python) is not a failure of the
    environment: a note on stderr."""
    for jobs in ("0", "1"):
        try:
            run([prefix + "/bin/python", "-I", "-m", "compileall", "-q", "-q", "-j", jobs, site],
                prefix, "compileall")
            return
        except ProvisionError as e:
            why = e
    log("byte-compiling left some files out: %s" % why)


# --------------------------------------------------------------------------------------------
# Kind r

def read_dcf(path):
    """The fields of an R DESCRIPTION file (DCF), not following a symlink."""
    fields, key = {}, None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        for line in f.read(1 << 20).splitlines():
            if line[:1] in (" ", "\t"):
                if key:
                    fields[key] += " " + line.strip()
                continue
            k, sep, v = line.partition(":")
            if sep:
                key = k.strip()
                fields[key] = v.strip()
    return fields


R_WRAPPER = """#!/bin/sh
# sandbox-runner environment {prefix}: {prog} with this environment's site library only.
R_LIBS_SITE={lib}
R_LIBS_USER={lib}
R_ENVIRON={environ}
export R_LIBS_SITE R_LIBS_USER R_ENVIRON
unset R_LIBS
exec {exe} "$@"
"""


def write_file(path, text, mode):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def provision_r(plan, tmp):
    prefix = plan["prefix"]
    dpkg = Dpkg(plan["dpkgRoot"]) if plan["debianPackages"] else None
    closure = dpkg.closure(plan["debianPackages"], ("r-cran-", "r-bioc-")) if dpkg else []
    progress = Progress(1 + len(closure))

    progress.start("site library")
    lib = os.path.join(prefix, "library")
    environ = os.path.join(prefix, "etc", "Renviron.site")
    for d in ("bin", "library", "etc"):
        os.mkdir(os.path.join(prefix, d), 0o755)
    # Debian's Renviron.site puts /usr/local/lib/R/site-library before R_LIBS_SITE: ours
    # replaces it (R_ENVIRON), the exports cover --vanilla/--no-environ.
    write_file(environ, "R_LIBS_SITE=%s\nR_LIBS_USER=%s\n" % (shlex.quote(lib), shlex.quote(lib)),
               0o644)
    for prog in ("R", "Rscript"):
        write_file(os.path.join(prefix, "bin", prog),
                   R_WRAPPER.format(prefix=prefix, prog=prog, lib=shlex.quote(lib),
                                    environ=shlex.quote(environ),
                                    exe=shlex.quote(os.path.join(R_BIN, prog))), 0o755)
    progress.finish()

    owners = copy_debian(dpkg, closure, R_SITE_LIBRARY, lib, progress)

    pkgs = []
    for entry in sorted(os.listdir(lib)):
        desc = os.path.join(lib, entry, "DESCRIPTION")
        try:
            fields = read_dcf(desc)
        except OSError:
            continue
        if not fields.get("Package") or not fields.get("Version"):
            continue
        p = {"name": fields["Package"], "version": fields["Version"]}
        p["source"] = "debian:%s %s" % owners[entry] if entry in owners else "unknown"
        pkgs.append(p)
    try:
        rver = read_dcf(R_BASE_DESCRIPTION).get("Version") or "unknown"
    except OSError:
        rver = "unknown"
    progress.end()
    return {"packages": pkgs, "provisioner": "r-site-library (R %s)" % rver,
            "sizeBytes": tree_size(prefix)}


# --------------------------------------------------------------------------------------------

def main():
    os.umask(0o022)
    try:
        text = sys.stdin.buffer.read(PLAN_MAX + 1)
        if len(text) > PLAN_MAX:
            raise PlanError("bad plan: larger than %d bytes" % PLAN_MAX)
        plan = parse_plan(text)
        prepare_prefix(plan["prefix"])
        with tempfile.TemporaryDirectory(prefix="provision-") as tmp:
            if plan["kind"] == "python":
                result = provision_python(plan, tmp)
            else:
                result = provision_r(plan, tmp)
        emit({"result": result})
        return 0
    except PlanError as e:
        log(str(e))
        return 2
    except ProvisionError as e:
        log(str(e))
        return 1
    except OSError as e:
        log("%s%s" % (e.strerror or e, ": " + e.filename if e.filename else ""))
        return 1


if __name__ == "__main__":
    sys.exit(main())
