#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Seccomp battery: every deny rule of every variant, probed from inside a real bwrap sandbox.

Usage: seccomp-battery.py BUILD_DIR        (TAP on stdout; exit 77 = skip, 1 = failures)
Environment: SECCOMP_EXPORT, TRY_SYSCALL (default: looked up under BUILD_DIR), BWRAP
(default /usr/bin/bwrap).

For each variant (baseline, network, npu):
  * `seccomp-export --describe` lists the compiled rules; each must be matched by at least one
    probe of tests/helpers/try-syscall.c (a rule without a probe fails the battery);
  * all probes run twice inside bwrap --seccomp: once with the real program, where a probe must
    get exactly the errno of the rules it matches, and once with every errno replaced by
    ENOTRECOVERABLE, which proves that the filter, not the kernel, refused the call (many of
    these calls fail with EPERM in an unprivileged sandbox anyway);
  * probes that match no rule are controls: they must get through the filter unchanged
    (the same result in both runs, never ENOTRECOVERABLE), and the essential ones must succeed;
  * i386 ("int $0x80") and x32 system calls must kill the process with SIGSYS;
  * python3, sh, ls, cat, sort and sha256sum must still work under the filter.
"""

import errno
import os
import shlex
import signal
import subprocess
import sys
import tempfile

VARIANTS = ["baseline", "network", "npu"]
OVERRIDE = "ENOTRECOVERABLE"

# x86/arm/generic values (the battery runs natively; the profiles resolve the same names from
# the build's headers).
CLONE = {"NEWNS": 0x20000, "NEWCGROUP": 0x2000000, "NEWUTS": 0x4000000, "NEWIPC": 0x8000000,
         "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}
SIGCHLD = 17
TIOCSTI, TIOCLINUX, TIOCSETD, FIONREAD = 0x5412, 0x541C, 0x5423, 0x541B
PER_LINUX, PER_LINUX32, ADDR_NO_RANDOMIZE = 0, 0x8, 0x0040000
SOCK_CLOEXEC, SOCK_NONBLOCK = 0x80000, 0x800

# probe name -> (syscall, {argument index: value}) for every argument a rule may compare.
PROBES = {
    "getpid": ("getpid", {}),
    "fork": ("clone", {0: 0x01200000 | SIGCHLD}),   # glibc: CHILD_SETTID|CHILD_CLEARTID|SIGCHLD
    "syslog": ("syslog", {}),
    "acct": ("acct", {}),
    "quotactl": ("quotactl", {}),
    "quotactl_fd": ("quotactl_fd", {}),
    "add_key": ("add_key", {}),
    "keyctl": ("keyctl", {}),
    "request_key": ("request_key", {}),
    "mbind": ("mbind", {}),
    "get_mempolicy": ("get_mempolicy", {}),
    "set_mempolicy": ("set_mempolicy", {}),
    "set_mempolicy_home_node": ("set_mempolicy_home_node", {}),
    "migrate_pages": ("migrate_pages", {}),
    "move_pages": ("move_pages", {}),
    "unshare": ("unshare", {}),
    "setns": ("setns", {}),
    "clone-plain": ("clone", {0: SIGCHLD}),
    "clone-newuser": ("clone", {0: CLONE["NEWUSER"] | SIGCHLD}),
    "clone-newuser-hibits": ("clone", {0: CLONE["NEWUSER"] | (1 << 40) | SIGCHLD}),
    "clone-newns": ("clone", {0: CLONE["NEWNS"] | SIGCHLD}),
    "clone-newpid": ("clone", {0: CLONE["NEWPID"] | SIGCHLD}),
    "clone-newnet": ("clone", {0: CLONE["NEWNET"] | SIGCHLD}),
    "clone-newuts": ("clone", {0: CLONE["NEWUTS"] | SIGCHLD}),
    "clone-newipc": ("clone", {0: CLONE["NEWIPC"] | SIGCHLD}),
    "clone-newcgroup": ("clone", {0: CLONE["NEWCGROUP"] | SIGCHLD}),
    "clone3": ("clone3", {}),
    "mount": ("mount", {}),
    "umount": ("umount", {}),
    "umount2": ("umount2", {}),
    "pivot_root": ("pivot_root", {}),
    "chroot": ("chroot", {}),
    "open_tree": ("open_tree", {}),
    "move_mount": ("move_mount", {}),
    "fsopen": ("fsopen", {}),
    "fsconfig": ("fsconfig", {}),
    "fsmount": ("fsmount", {}),
    "fspick": ("fspick", {}),
    "mount_setattr": ("mount_setattr", {}),
    "open_tree_attr": ("open_tree_attr", {}),
    "io_uring_setup": ("io_uring_setup", {}),
    "io_uring_enter": ("io_uring_enter", {}),
    "io_uring_register": ("io_uring_register", {}),
    "ioctl-tiocsti": ("ioctl", {1: TIOCSTI}),
    "ioctl-tiocsti-hibits": ("ioctl", {1: TIOCSTI | (1 << 32)}),
    "ioctl-tioclinux": ("ioctl", {1: TIOCLINUX}),
    "ioctl-tiocsetd": ("ioctl", {1: TIOCSETD}),
    "ioctl-fionread": ("ioctl", {1: FIONREAD}),
    "vhangup": ("vhangup", {}),
    "ptrace": ("ptrace", {}),
    "process_vm_readv": ("process_vm_readv", {}),
    "process_vm_writev": ("process_vm_writev", {}),
    "process_madvise": ("process_madvise", {}),
    "pidfd_getfd": ("pidfd_getfd", {}),
    "kcmp": ("kcmp", {}),
    "perf_event_open": ("perf_event_open", {}),
    "bpf": ("bpf", {}),
    "userfaultfd": ("userfaultfd", {}),
    "personality-linux": ("personality", {0: PER_LINUX}),
    "personality-addr-no-randomize": ("personality", {0: PER_LINUX | ADDR_NO_RANDOMIZE}),
    "personality-linux32": ("personality", {0: PER_LINUX32}),
    "personality-query": ("personality", {0: 0xFFFFFFFF}),
    "init_module": ("init_module", {}),
    "finit_module": ("finit_module", {}),
    "delete_module": ("delete_module", {}),
    "kexec_load": ("kexec_load", {}),
    "kexec_file_load": ("kexec_file_load", {}),
    "reboot": ("reboot", {}),
    "swapon": ("swapon", {}),
    "swapoff": ("swapoff", {}),
    "iopl": ("iopl", {}),
    "ioperm": ("ioperm", {}),
    "modify_ldt": ("modify_ldt", {}),
    "settimeofday": ("settimeofday", {}),
    "clock_settime": ("clock_settime", {}),
    "clock_adjtime": ("clock_adjtime", {}),
    "adjtimex": ("adjtimex", {}),
    "sethostname": ("sethostname", {}),
    "setdomainname": ("setdomainname", {}),
    "open_by_handle_at": ("open_by_handle_at", {}),
    "name_to_handle_at": ("name_to_handle_at", {}),
    "uselib": ("uselib", {}),
    "lookup_dcookie": ("lookup_dcookie", {}),
    "nfsservctl": ("nfsservctl", {}),
    "fanotify_init": ("fanotify_init", {}),
    "socketpair-unix": ("socketpair", {0: 1, 1: 1, 2: 0}),
    "socketpair-inet": ("socketpair", {0: 2, 1: 1, 2: 0}),
    "socketpair-packet": ("socketpair", {0: 17, 1: 1, 2: 0}),
    "tcp-loopback": ("socket", {0: 2, 1: 1 | SOCK_CLOEXEC, 2: 0}),
}
SOCKET_PROBES = {   # name: (family, type, protocol), as in try-syscall.c
    "socket-unix": (1, 1, 0),
    "socket-unix-hibits": (1 | (1 << 32), 1, 0),
    "socket-unspec": (0, 1, 0),
    "socket-netlink-route": (16, 3 | SOCK_CLOEXEC, 0),
    "socket-netlink-generic": (16, 3 | SOCK_CLOEXEC, 16),
    "socket-netlink-netfilter": (16, 3 | SOCK_CLOEXEC, 12),
    "socket-netlink-sock-diag": (16, 3 | SOCK_CLOEXEC, 4),
    "socket-inet-stream": (2, 1, 0),
    "socket-inet-stream-tcp": (2, 1 | SOCK_NONBLOCK | SOCK_CLOEXEC, 6),
    "socket-inet-dgram": (2, 2, 0),
    "socket-inet6-stream": (10, 1, 0),
    "socket-inet6-dgram": (10, 2 | SOCK_CLOEXEC, 17),
    "socket-inet-raw": (2, 3, 17),
    "socket-inet-raw-icmp": (2, 3, 1),
    "socket-inet-raw-flags": (2, 3 | SOCK_NONBLOCK | SOCK_CLOEXEC, 17),
    "socket-inet6-raw": (10, 3, 17),
    "socket-inet-packet": (2, 10, 0),
    "socket-inet-seqpacket": (2, 5, 0),
    "socket-inet6-seqpacket": (10, 5, 0),
    "socket-inet-sctp": (2, 1, 132),
    "socket-inet6-sctp": (10, 1, 132),
    "socket-inet-mptcp": (2, 1, 262),
    "socket-inet-udplite": (2, 2, 136),
    "socket-inet-icmp": (2, 2, 1),
    "socket-inet6-icmp": (10, 2, 58),
    "socket-inet-l2tp": (2, 2, 115),
    "socket-packet": (17, 3, 0x300),
    "socket-vsock": (40, 1, 0),
    "socket-alg": (38, 5, 0),
    "socket-key": (15, 3, 2),
    "socket-family-200": (200, 1, 0),
}
for _name, (_f, _t, _p) in SOCKET_PROBES.items():
    PROBES[_name] = ("socket", {0: _f, 1: _t, 2: _p})

# Controls that must succeed under the filter (per variant; others only have to pass through).
MUST_SUCCEED = {
    "baseline": ["getpid", "fork", "clone-plain", "personality-linux", "ioctl-fionread", "socket-unix",
                 "socketpair-unix", "socket-netlink-route"],
}
MUST_SUCCEED["network"] = MUST_SUCCEED["baseline"] + [
    "socket-inet-stream", "socket-inet-stream-tcp", "socket-inet-dgram", "socket-inet6-stream",
    "socket-inet6-dgram", "tcp-loopback"]
MUST_SUCCEED["npu"] = MUST_SUCCEED["network"]

FOREIGN_ABI_PROBES = ["i386-getpid", "i386-unshare-newuser", "x32-getpid", "x32-unshare-newuser"]


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, desc, diag=None):
        self.n += 1
        desc = " ".join(str(desc).split()).replace("#", "\\#")   # one line; '#' starts a TAP directive
        print(f"{'ok' if cond else 'not ok'} {self.n} - {desc}", flush=True)
        if not cond:
            self.failed += 1
            if diag:
                for line in str(diag).splitlines():
                    print(f"# {line}", flush=True)
        return cond

    def note(self, text):
        for line in text.splitlines():
            print(f"# {line}", flush=True)


def find_binary(build, env, name):
    if os.environ.get(env):
        return os.environ[env]
    for sub in ("tests", "tests/helpers", "."):
        p = os.path.join(build, sub, name)
        if os.access(p, os.X_OK):
            return p
    return None


def parse_cond(text):
    """Parse the CONDITION column of --describe into (conds, unless).
    conds: [(arg, op, mask, value)], op in '==', '!=', '&'; unless: (arg, mask or None, set) or None."""
    toks = text.split()
    conds, unless, i = [], None, 0
    num = lambda s: int(s, 0)
    if i < len(toks) and toks[i] == "if":
        i += 1
        while True:
            arg = int(toks[i][1])
            if toks[i + 1] == "&":
                conds.append((arg, "&", num(toks[i + 2]), num(toks[i + 4])))
                i += 5
            else:
                conds.append((arg, toks[i + 1], None, num(toks[i + 2])))
                i += 3
            if i < len(toks) and toks[i] == "and":
                i += 1
                continue
            break
    if i < len(toks) and toks[i] == "unless":
        arg = int(toks[i + 1][1])
        i += 2
        mask = None
        if toks[i] == "&":
            mask = num(toks[i + 1])
            i += 2
        assert toks[i] == "in", text
        unless = (arg, mask, {num(t) for t in toks[i + 1:]})
        i = len(toks)
    assert i == len(toks), f"cannot parse condition '{text}'"
    return conds, unless


def rule_matches(rule, probe):
    """Does the rule's condition hold for the probe's arguments? None if the probe does not say
    what an argument it compares is (a defect in the PROBES table)."""
    syscall, args = PROBES[probe]
    if syscall != rule["syscall"]:
        return False
    for arg, op, mask, value in rule["conds"]:
        if arg not in args:
            return None
        a = args[arg]
        if op == "==" and a != value:
            return False
        if op == "!=" and a == value:
            return False
        if op == "&" and (a & mask) != value:
            return False
    if rule["unless"]:
        arg, mask, allowed = rule["unless"]
        if arg not in args:
            return None
        a = args[arg] & mask if mask is not None else args[arg]
        if a in allowed:
            return False
    return True


def describe(export, variant):
    out = subprocess.run([export, "--describe", variant], check=True, capture_output=True, text=True).stdout
    rules = []
    for line in out.splitlines():
        origin, syscall, nr, err, cond = line.split("\t")
        conds, unless = parse_cond(cond)
        rules.append({"origin": origin, "syscall": syscall, "nr": nr, "errno": err, "cond": cond,
                      "conds": conds, "unless": unless})
    return rules


def export_program(export, variant, path, override=None):
    argv = [export, variant]
    if override:
        argv.insert(1, f"--errno-override={override}")
    with open(path, "wb") as f:
        subprocess.run(argv, check=True, stdout=f)


def bwrap_argv(bwrap, try_syscall, seccomp):
    # The sandbox shape of DESIGN.md §4, reduced to what the probes and tools need.
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
            "--ro-bind", try_syscall, "/try",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
    if seccomp:
        argv += ["--seccomp", "3"]
    return argv + ["--"]


def run_sandboxed(bwrap, try_syscall, program, cmd, timeout=120):
    """Run cmd in bwrap with the BPF file @program (or none) as fd 3."""
    fd = os.open(program, os.O_RDONLY | os.O_CLOEXEC) if program else -1

    def child():
        if fd == 3:
            os.set_inheritable(3, True)
        elif fd >= 0:
            os.dup2(fd, 3)      # the copy is inheritable
            os.close(fd)

    try:
        return subprocess.run(bwrap_argv(bwrap, try_syscall, bool(program)) + cmd,
                              capture_output=True, text=True, timeout=timeout,
                              preexec_fn=child, pass_fds=(fd, 3) if fd >= 0 else ())
    finally:
        if fd >= 0:
            os.close(fd)


def run_probes(bwrap, try_syscall, program, probes):
    p = run_sandboxed(bwrap, try_syscall, program, ["/try"] + probes)
    results = {}
    for line in p.stdout.splitlines():
        name, _, res = line.partition(" ")
        results[name] = res
    return p, results


def main(argv):
    tap = Tap()
    if len(argv) != 2:
        print("usage: seccomp-battery.py BUILD_DIR", file=sys.stderr)
        return 2
    build = argv[1]
    export = find_binary(build, "SECCOMP_EXPORT", "seccomp-export")
    try_syscall = find_binary(build, "TRY_SYSCALL", "try-syscall")
    bwrap = os.environ.get("BWRAP", "/usr/bin/bwrap")
    if not export or not try_syscall:
        print(f"Bail out! seccomp-export or try-syscall not found under {build}")
        return 1
    if not os.access(bwrap, os.X_OK):
        print(f"1..0 # SKIP no bwrap at {bwrap}")
        return 77

    known = set(subprocess.run([try_syscall, "--list"], check=True, capture_output=True,
                               text=True).stdout.split())
    tap.ok(set(PROBES) | set(FOREIGN_ABI_PROBES) <= known,
           "every probe of the battery exists in try-syscall",
           sorted(set(PROBES) | set(FOREIGN_ABI_PROBES) - known))
    probe_names = [p for p in PROBES if p in known]

    p = run_sandboxed(bwrap, try_syscall, None, ["/try", "getpid"])
    if not tap.ok(p.returncode == 0 and p.stdout.strip() == "ok", "bwrap runs a sandbox at all",
                  p.stderr):
        print(f"1..{tap.n}")
        return 1

    # The foreign ABIs exist without the filter, so that killing them below is the filter's doing.
    p, unfiltered = run_probes(bwrap, try_syscall, None, FOREIGN_ABI_PROBES)
    # A kernel without the i386 entry (CONFIG_IA32_EMULATION off, or ia32_emulation=false on the
    # command line, as on some VMs) answers int $0x80 with SIGSEGV before any filter sees it: the
    # ABI is absent, so there is nothing to filter, and below the probe must die the same way.
    no_entry = {name for name in FOREIGN_ABI_PROBES if name.startswith("i386-")
              and unfiltered.get(name) == "killed=SIGSEGV"}
    if no_entry:
        tap.note("this kernel has no i386 system call entry (int $0x80 gives SIGSEGV without a filter): "
                 "the i386 probes check that it stays so under every filter")
    tap.ok(unfiltered.get("i386-getpid") in ("ok", "unsupported", "killed=SIGSEGV"),
           f"without a filter an i386 int $0x80 getpid works, or the kernel has no i386 entry: "
           f"{unfiltered.get('i386-getpid')}")
    tap.ok(unfiltered.get("x32-getpid") in ("ok", "errno=ENOSYS", "unsupported"),
           f"without a filter an x32 getpid gives {unfiltered.get('x32-getpid')} "
           "(ENOSYS: kernel built without CONFIG_X86_X32_ABI)")

    with tempfile.TemporaryDirectory(prefix="seccomp-battery-") as tmp:
        for variant in VARIANTS:
            real = os.path.join(tmp, f"{variant}.bpf")
            over = os.path.join(tmp, f"{variant}-override.bpf")
            export_program(export, variant, real)
            export_program(export, variant, over, OVERRIDE)
            size = os.path.getsize(real)
            tap.ok(size > 0 and size % 8 == 0, f"{variant}: exported program of {size // 8} instructions")

            rules = describe(export, variant)
            tap.note(f"{variant}: {len(rules)} rules")

            # Which rules does each probe match?
            matches = {name: [] for name in probe_names}
            undefined = []
            for rule in rules:
                for name in probe_names:
                    m = rule_matches(rule, name)
                    if m is None:
                        undefined.append(f"{name} vs {rule['origin']} {rule['cond']}")
                    elif m:
                        matches[name].append(rule)
            tap.ok(not undefined, f"{variant}: the probe table gives every argument the rules compare",
                   "\n".join(undefined))
            for rule in rules:
                covered = [n for n in probe_names if rule in matches[n]]
                tap.ok(covered, f"{variant}: {rule['origin']} {rule['syscall']} {rule['cond'] or '(always)'} "
                       f"-> {rule['errno']} has probes {' '.join(covered)}")

            pr, res_real = run_probes(bwrap, try_syscall, real, probe_names + FOREIGN_ABI_PROBES)
            tap.ok(pr.returncode == 0, f"{variant}: try-syscall ran under the filter", pr.stderr)
            po, res_over = run_probes(bwrap, try_syscall, over, probe_names + FOREIGN_ABI_PROBES)
            tap.ok(po.returncode == 0, f"{variant}: try-syscall ran under the override filter", po.stderr)

            for name in probe_names:
                got, got_over = res_real.get(name), res_over.get(name)
                hit = matches[name]
                if hit:
                    absent = all(r["nr"] == "-" for r in hit)
                    if absent:
                        tap.ok(got == "unsupported",
                               f"{variant}: {name}: not on this architecture, nothing to filter ({got})")
                        continue
                    want = {f"errno={r['errno']}" for r in hit}
                    tap.ok(got in want, f"{variant}: {name} -> {got} (rule {' / '.join(sorted(want))})",
                           f"matched: {[r['origin'] for r in hit]}")
                    tap.ok(got_over == f"errno={OVERRIDE}",
                           f"{variant}: {name} is refused by the filter itself ({got_over})")
                else:
                    tap.ok(got_over == got and got != f"errno={OVERRIDE}",
                           f"{variant}: control {name} passes the filter ({got})",
                           f"real: {got}, override: {got_over}")
                    if name in MUST_SUCCEED[variant]:
                        tap.ok(got == "ok", f"{variant}: control {name} succeeds", got)

            for name in FOREIGN_ABI_PROBES:
                got = res_real.get(name)
                if unfiltered.get(name) == "unsupported":
                    tap.ok(got == "unsupported", f"{variant}: {name}: not an x86_64 host")
                    continue
                if name in no_entry:
                    tap.ok(got == "killed=SIGSEGV",
                           f"{variant}: {name}: no such entry in this kernel, it dies as without a filter ({got})")
                    continue
                tap.ok(got == "killed=SIGSYS", f"{variant}: {name} kills the process ({got})")

            # In-process: the probe kills try-syscall itself; bwrap reports 128 + SIGSYS.
            for name in ("i386-unshare-newuser", "x32-unshare-newuser"):
                if unfiltered.get(name) == "unsupported":
                    continue
                sig = signal.SIGSEGV if name in no_entry else signal.SIGSYS
                p = run_sandboxed(bwrap, try_syscall, real, ["/try", name])
                tap.ok(p.returncode == 128 + sig and p.stdout == "",
                       f"{variant}: {name} as the only probe: exit status {p.returncode} (128+{sig.name})",
                       p.stdout + p.stderr)

            # Ordinary programs keep working.
            checks = [
                (["/usr/bin/python3", "-c", "print(1)"], "1\n"),
                (["/usr/bin/python3", "-c",
                  "import subprocess, threading\n"
                  "print(subprocess.run(['/bin/echo', 'spawned'], capture_output=True, text=True).stdout, end='')\n"
                  "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
                  "import socket; print(socket.if_nameindex()[0][1])"],
                 "spawned\nthread\nlo\n"),
                (["/bin/sh", "-c", "echo shell; exit 3"], "shell\n", 3),
                (["/bin/sh", "-c", "ls / | grep -x usr"], "usr\n"),
                (["/bin/cat", "/proc/self/status"], None),
                (["/bin/sh", "-c", "printf 'b\\na\\nc\\n' | sort | tr '\\n' ' '"], "a b c "),
                (["/bin/sh", "-c", "printf abc | sha256sum"],
                 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n"),
            ]
            for check in checks:
                cmd, want = check[0], check[1]
                rc_want = check[2] if len(check) > 2 else 0
                p = run_sandboxed(bwrap, try_syscall, real, cmd)
                good = p.returncode == rc_want and (want is None or p.stdout == want)
                if cmd[0] == "/bin/cat":
                    good = good and "\nSeccomp:\t2\n" in p.stdout and "\nNoNewPrivs:\t1\n" in p.stdout
                tap.ok(good, f"{variant}: {shlex.join(cmd)[:70]}",
                       f"rc={p.returncode}\nstdout={p.stdout!r}\nstderr={p.stderr!r}")
            if variant != "baseline":
                p = run_sandboxed(bwrap, try_syscall, real, [
                    "/usr/bin/python3", "-c",
                    "import socket\n"
                    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
                    "c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n"
                    "c.sendall(b'ping'); print(a.recv(4).decode())"])
                tap.ok(p.returncode == 0 and p.stdout == "ping\n",
                       f"{variant}: python TCP over the sandbox's loopback", p.stderr)

    print(f"1..{tap.n}", flush=True)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
