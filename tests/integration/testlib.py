# SPDX-License-Identifier: LGPL-2.1-or-later
"""The harness pieces every Python suite of tests/integration shares, whatever its client
library (execute_lib, workspaces_lib, http_battery_lib): the --run-as option (which user the
daemon under test is started as, resolved to ids, the daemon's files handed to that user, the
ids for subprocess.Popen) the registry of test cases (one TAP point each) and the outcome of one case.  It starts no
process and talks to nothing; Python 3 stdlib only."""

import fcntl
import os
import pwd
import socket
import struct
import sys

# --------------------------------------------------------------------------------------------
# --run-as: the daemon's user

RUN_AS_HELP = ("user the daemon runs as: 'auto' (when this test runs as root: the user "
               "'sandbox-runner' if it exists, else nobody), 'self', or NAME/UID[:GID]")


def add_run_as_option(ap):
    """--run-as on the argparse parser @ap (default 'auto'); resolve it with resolve_run_as()."""
    ap.add_argument("--run-as", default="auto", help=RUN_AS_HELP)


def resolve_run_as(spec):
    """(uid, gid) to start the daemon with, or None for the test's own ids.

    The daemon is rootless by design (its own system user); started as root it becomes
    [Execution] SandboxUser= itself (tests/integration/posture.py covers that start).  As root
    a suite starts it as an ordinary user, as the service does ('auto': the user
    'sandbox-runner' if it exists, else nobody); '--run-as self' starts it as root instead;
    NAME or UID, with an optional :GID, names the user."""
    if spec == "self" or (spec == "auto" and os.geteuid() != 0):
        return None
    if spec == "auto":
        try:
            pw = pwd.getpwnam("sandbox-runner")
            return pw.pw_uid, pw.pw_gid
        except KeyError:
            return 65534, 65534
    name, _, g = spec.partition(":")
    if name.isdigit():
        uid = int(name)
        try:
            gid = pwd.getpwuid(uid).pw_gid
        except KeyError:
            gid = uid
    else:
        pw = pwd.getpwnam(name)
        uid, gid = pw.pw_uid, pw.pw_gid
    if g:
        gid = int(g)
    return uid, gid


def run_as_uid(run_as):
    """The uid the daemon runs as: run_as's, or ours when it is None."""
    return run_as[0] if run_as else os.geteuid()


def chown_tree(top, run_as):
    """Hand @top and everything below it to run_as's ids (nothing to do when it is None)."""
    if run_as is None:
        return
    uid, gid = run_as
    for dp, dns, fns in os.walk(top):
        os.chown(dp, uid, gid)
        for n in fns:
            os.chown(os.path.join(dp, n), uid, gid)


def popen_ids(run_as):
    """The keyword arguments of subprocess.Popen that start a process with run_as's ids (and no
    supplementary groups); {} when it is None."""
    if run_as is None:
        return {}
    return dict(user=run_as[0], group=run_as[1], extra_groups=[])


# --------------------------------------------------------------------------------------------
# Test cases

def case_registry():
    """(CASES, case): a list of (name, function) and the decorator @case(name) that appends to it,
    in the order of definition."""
    cases = []

    def case(name):
        def deco(fn):
            cases.append((name, fn))
            return fn
        return deco
    return cases, case


class Result:
    """The outcome of one test case: its failures (none: it passed), notes (printed when it fails
    or in verbose mode), or why it was skipped."""

    def __init__(self, name):
        self.name = name
        self.failures = []
        self.notes = []
        self.skip = None

    def fail(self, msg):
        self.failures.append(msg)

    def note(self, msg):
        self.notes.append(msg)

    def check(self, cond, msg):
        if not cond:
            self.fail(msg)
        return bool(cond)

    def eq(self, what, actual, expected):
        return self.check(actual == expected, "%s: expected %r, got %r" % (what, expected, actual))

    @property
    def ok(self):
        return not self.failures


# ---- private mount and network namespaces (egress-e2e.py, environments-online.py) ----------

def enter_namespaces(argv, inner_env):
    """Re-run this script (argv: its arguments) in new mount and network namespaces, with
    @inner_env=1 in its environment (the script tells by it that it is the inner run). As
    another user than root: a skip (exit 77), the only one of the suites that use it."""
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (mount and network namespaces, bind mount over /etc/hosts)")
        sys.exit(77)
    env = dict(os.environ)
    env[inner_env] = "1"
    script = os.path.abspath(sys.argv[0])
    os.execvpe("unshare", ["unshare", "--mount", "--net", "--propagation", "private", "--",
                           sys.executable, script] + list(argv), env)


def loopback_up():
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def check_private_netns():
    """Refuse to run anywhere but in a network namespace whose only interface is lo."""
    with open("/proc/net/dev") as f:
        ifaces = [ln.split(":")[0].strip() for ln in f.read().splitlines()[2:] if ":" in ln]
    if ifaces != ["lo"]:
        raise SystemExit("not in a private network namespace (interfaces: %s)" % ifaces)
