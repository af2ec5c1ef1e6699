#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test of sandbox-runner-npu (src/npu/npu-job-main.c), the runner of one host NPU
broker job, without systemd: each case makes a job directory (job.json as the daemon writes it,
src/npu/npu-jobs.h) under a temporary directory and runs the binary on it.

    /usr/bin/python3 tests/integration/npu-job-runner.py --runner build/src/sandbox-runner-npu
                                                      [--verbose] [--keep-tmp] [--only SUBSTRING]

Cases: --help and --version; a job printing to stdout and stderr and exiting 3 (the log, the
result, the "started" file); argv[0] relative, or a program that does not exist, or a job.json
that breaks the rules (refused: non-zero exit, the reason on stderr and in result.json); a job
past its timeout (timedOut, killed by SIGTERM, its grandchild gone too); a job ignoring SIGTERM
(SIGKILL after the grace); SIGTERM to the runner (the process group stopped, result.json still
written); the environment, exactly; arguments with ';', '$(...)', backquotes and '*' passed
literally (no shell); the working directory and stdin.  Prints TAP, exits 1 on any failure."""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T                                                        # noqa: E402

CASES, case = T.case_registry()
KILL_GRACE = 10          # NPU_JOB_KILL_GRACE_SEC


class Ctx:
    def __init__(self, runner, tmp):
        self.runner = runner
        self.tmp = tmp
        self.n = 0

    def job(self, argv, env=None, timeout=30, chips=(0, 3), **extra):
        """A job directory with job.json "running" (the daemon's view once the unit started), and
        its working directory; returns (job_dir, cwd)."""
        self.n += 1
        job_id = "%016x" % (0xabc000 + self.n)
        jdir = os.path.join(self.tmp, "npu-jobs", job_id)
        cwd = os.path.join(self.tmp, "ws-%d" % self.n)
        os.makedirs(jdir, mode=0o700)
        os.makedirs(cwd)
        job = {"jobId": job_id, "workloadId": "test-workload", "sessionId": "session-1",
               "argv": argv, "env": env or {}, "cwd": cwd, "chips": list(chips),
               "timeoutSec": timeout, "state": "running", "createdAt": int(time.time() * 1000),
               "unit": "sandbox-runner-npu@%s.service" % job_id}
        job.update(extra)
        with open(os.path.join(jdir, "job.json"), "w") as f:
            json.dump(job, f)
        return jdir, cwd

    def run(self, jdir, timeout=60):
        """Run the runner on @jdir; returns (rc, stderr, seconds)."""
        t0 = time.monotonic()
        p = subprocess.run([self.runner, "--job", jdir], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           env=dict(os.environ, SECRET_OF_THE_CALLER="leak"))
        return p.returncode, (p.stdout + p.stderr).decode(errors="replace"), time.monotonic() - t0


def read(path, binary=False):
    with open(path, "rb" if binary else "r") as f:
        return f.read()


def result(jdir):
    return json.loads(read(os.path.join(jdir, "result.json")))


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(pid, 0): it is gone for our purposes.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(path, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.02)
    return False


def check_refused(res, rc, out, jdir, reason):
    res.check(rc != 0, "the runner exited 0 for a job it could not run")
    res.check(reason in out, "the reason %r is not on stderr: %r" % (reason, out))
    r = result(jdir)
    res.check(reason in (r.get("error") or ""), "result.json's error %r lacks %r" % (r.get("error"), reason))
    res.eq("exitCode", r["exitCode"], None)
    res.eq("startedAt", r["startedAt"], None)
    res.check(not os.path.exists(os.path.join(jdir, "started")), "a 'started' file for a job that never ran")


@case("--help and --version exit 0")
def t_help(ctx, res):
    for opt, want in (("--help", "--job DIR"), ("--version", "sandbox-runner-npu ")):
        p = subprocess.run([ctx.runner, opt], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
        res.eq(opt + " exit status", p.returncode, 0)
        res.check(want in p.stdout.decode(), "%s does not print %r" % (opt, want))
    p = subprocess.run([ctx.runner], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    res.check(p.returncode != 0 and b"--job" in p.stderr, "no --job: exit %d %r" % (p.returncode, p.stderr))


@case("stdout and stderr into the log, exit status 3 in result.json")
def t_exit3(ctx, res):
    jdir, _ = ctx.job(["/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"])
    before = int(time.time() * 1000)
    rc, out, _ = ctx.run(jdir)
    res.eq("runner exit status", rc, 0)
    res.eq("log", read(os.path.join(jdir, "log")), "to-stdout\nto-stderr\n")
    r = result(jdir)
    res.eq("exitCode", r["exitCode"], 3)
    res.eq("signal", r["signal"], None)
    res.eq("timedOut", r["timedOut"], False)
    res.check("error" not in r, "an error in result.json: %r" % r.get("error"))
    res.check(before <= r["startedAt"] <= r["finishedAt"] <= int(time.time() * 1000) + 1,
              "times out of order: %r (test started at %d)" % (r, before))
    st = json.loads(read(os.path.join(jdir, "started")))
    res.check(st["pid"] > 0 and st["startedAt"] == r["startedAt"], "started: %r" % st)
    res.eq("log mode", os.stat(os.path.join(jdir, "log")).st_mode & 0o777, 0o600)
    leftovers = [n for n in os.listdir(jdir) if n.startswith(".#")]
    res.eq("temporary files left", leftovers, [])
    res.note(out)


@case("argv[0] relative: refused, non-zero exit, the reason")
def t_relative(ctx, res):
    jdir, _ = ctx.job(["echo", "hi"])
    rc, out, _ = ctx.run(jdir)
    check_refused(res, rc, out, jdir, "not a valid job: argv[0] must be an absolute path")


@case("a program that does not exist: refused, non-zero exit, the reason")
def t_missing(ctx, res):
    jdir, _ = ctx.job(["/nonexistent/program"])
    rc, out, _ = ctx.run(jdir)
    check_refused(res, rc, out, jdir, "Cannot execute '/nonexistent/program'")


@case("job.json setting ASCEND_RT_VISIBLE_DEVICES itself: refused")
def t_visible_env(ctx, res):
    jdir, _ = ctx.job(["/bin/true"], env={"ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
    rc, out, _ = ctx.run(jdir)
    check_refused(res, rc, out, jdir, "not a valid job: the environment may not set ASCEND_RT_VISIBLE_DEVICES")


@case("a missing working directory: refused, the reason")
def t_missing_cwd(ctx, res):
    jdir, cwd = ctx.job(["/bin/true"])
    os.rmdir(cwd)
    rc, out, _ = ctx.run(jdir)
    check_refused(res, rc, out, jdir, "Cannot change to the directory")


# The workload: a grandchild `sleep` in the background (its pid in a file), then a long sleep.
GRANDCHILD = "sleep 300 & echo $! > grandchild.pid; echo started; sleep 300"


def grandchild(cwd):
    return int(read(os.path.join(cwd, "grandchild.pid")).strip())


@case("past its timeout: timedOut, SIGTERM, the whole process group gone")
def t_timeout(ctx, res):
    jdir, cwd = ctx.job(["/bin/sh", "-c", GRANDCHILD], timeout=1)
    rc, out, secs = ctx.run(jdir)
    res.eq("runner exit status", rc, 0)
    r = result(jdir)
    res.eq("timedOut", r["timedOut"], True)
    res.eq("signal", r["signal"], signal.SIGTERM)
    res.eq("exitCode", r["exitCode"], None)
    res.check(1 <= secs < KILL_GRACE, "took %.1f s" % secs)
    gc = grandchild(cwd)
    res.check(not alive(gc), "the grandchild %d is still alive" % gc)
    res.eq("log", read(os.path.join(jdir, "log")), "started\n")


@case("ignoring SIGTERM past its timeout: SIGKILL after the grace")
def t_kill(ctx, res):
    jdir, cwd = ctx.job(["/bin/sh", "-c", "trap '' TERM; " + GRANDCHILD], timeout=1)
    rc, out, secs = ctx.run(jdir, timeout=60)
    res.eq("runner exit status", rc, 0)
    r = result(jdir)
    res.eq("timedOut", r["timedOut"], True)
    res.eq("signal", r["signal"], signal.SIGKILL)
    res.check(1 + KILL_GRACE - 0.5 <= secs < 1 + KILL_GRACE + 5, "took %.1f s" % secs)
    gc = grandchild(cwd)
    res.check(not alive(gc), "the grandchild %d is still alive" % gc)


@case("SIGTERM to the runner: the process group stopped, result.json written")
def t_sigterm(ctx, res):
    jdir, cwd = ctx.job(["/bin/sh", "-c", GRANDCHILD], timeout=600)
    p = subprocess.Popen([ctx.runner, "--job", jdir], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        started = wait_for(os.path.join(cwd, "grandchild.pid")) and wait_for(os.path.join(jdir, "started"))
        res.check(started, "the workload did not start")
        gc = grandchild(cwd)
        res.check(alive(gc), "the grandchild is not running before SIGTERM")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
        secs = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    res.note(p.stdout.read().decode(errors="replace"))
    res.eq("runner exit status", rc, 0)
    res.check(secs < KILL_GRACE, "took %.1f s to stop" % secs)
    r = result(jdir)
    res.eq("signal", r["signal"], signal.SIGTERM)
    res.eq("timedOut", r["timedOut"], False)
    res.check(not alive(gc), "the grandchild %d is still alive" % gc)


@case("the environment is exactly PATH, HOME, LANG, the job's, ASCEND_RT_VISIBLE_DEVICES")
def t_env(ctx, res):
    jdir, cwd = ctx.job(["/usr/bin/env"], env={"FOO": "bar baz", "OMP_NUM_THREADS": "4"}, chips=(2, 5, 7))
    rc, out, _ = ctx.run(jdir)
    res.eq("runner exit status", rc, 0)
    got = sorted(read(os.path.join(jdir, "log")).splitlines())
    want = sorted(["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + cwd, "LANG=C.UTF-8", "FOO=bar baz",
                   "OMP_NUM_THREADS=4", "ASCEND_RT_VISIBLE_DEVICES=2,5,7"])
    res.eq("environment", got, want)
    res.eq("exitCode", result(jdir)["exitCode"], 0)


@case("the job's environment replaces a default (LANG); no chips: an empty ASCEND_RT_VISIBLE_DEVICES")
def t_env_override(ctx, res):
    jdir, cwd = ctx.job(["/usr/bin/env"], env={"LANG": "en_US.UTF-8"}, chips=())
    rc, _, _ = ctx.run(jdir)
    res.eq("runner exit status", rc, 0)
    got = sorted(read(os.path.join(jdir, "log")).splitlines())
    res.eq("environment", got, sorted(["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + cwd, "LANG=en_US.UTF-8",
                                       "ASCEND_RT_VISIBLE_DEVICES="]))


@case("no shell: ';', '$(...)', backquotes, '*' and '>' are passed literally")
def t_no_shell(ctx, res):
    words = ["a;b", "$(id)", "`id`", "*", "x > y", "$HOME", "'q'"]
    jdir, cwd = ctx.job(["/bin/echo"] + words)
    rc, _, _ = ctx.run(jdir)
    res.eq("runner exit status", rc, 0)
    res.eq("log", read(os.path.join(jdir, "log")), " ".join(words) + "\n")
    res.eq("files in cwd", os.listdir(cwd), [])


@case("the working directory is cwd; stdin is /dev/null; the log is appended to")
def t_cwd_stdin(ctx, res):
    jdir, cwd = ctx.job(["/bin/sh", "-c", "pwd; cat; echo end"])
    with open(os.path.join(jdir, "log"), "w") as f:
        f.write("earlier\n")
    rc, _, _ = ctx.run(jdir)
    res.eq("runner exit status", rc, 0)
    res.eq("log", read(os.path.join(jdir, "log")), "earlier\n%s\nend\n" % cwd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", required=True, help="the sandbox-runner-npu binary")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    args = ap.parse_args()
    cases = [(n, f) for n, f in CASES if not args.only or args.only in n]

    out = sys.stdout
    out.write("1..%d\n" % len(cases))
    out.flush()
    tmp = tempfile.mkdtemp(prefix="srtest-npu-job-")
    failed = 0
    try:
        ctx = Ctx(os.path.abspath(args.runner), tmp)
        for i, (name, fn) in enumerate(cases, 1):
            res = T.Result(name)
            t0 = time.monotonic()
            try:
                fn(ctx, res)
            except Exception:                                  # noqa: BLE001
                res.fail("test error:\n" + traceback.format_exc())
            res.note("(%.1fs)" % (time.monotonic() - t0))
            out.write("%s %d - %s\n" % ("ok" if res.ok else "not ok", i, name))
            diag = res.failures + res.notes if (not res.ok or args.verbose) else []
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
