#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The benchmarks' one result format, their targets, the smoke check and the table.

Every benchmark of tests/bench/ ends its output with one line

    BENCH-RESULT {"bench": NAME, "sizes": {...}, "results": [RESULT, ...]}

(the JSON on one line), one RESULT per figure it measures against a floor:

    name         the target's name ("http-over-bwrap", ...), unique within the bench
    what         what is measured, in words
    floor        what the figure is measured against, in words (measured in the same run)
    floorValue   the floor's median, in floorUnit ("ms", "us", "MiB/s")
    measured     the figure over all of the run: a ratio of medians, or a difference (unit)
    unit         "ratio" (measured / floor) or the unit of a difference ("us", "ms")
    batches      how many batches (runs of each path taken in turn, or rounds) the run had
    batchMedian, batchP25, batchP75
                 the median and quartiles of the batches' own figures (each batch against the
                 floor measured right beside it): one noisy batch cannot move them much
    target       the target in words ("< 1.25"), or null where none is set (reported only)
    targetValue  its number, or null
    op           "<", "<=", ">" or ">=" (measured op targetValue meets it), or null
    met          whether batchMedian meets the target; null where none is set

The targets and the floors' descriptions live in TARGETS below, one place for all; each bench
gives its figures, this module adds the rest.  No timing is asserted anywhere in CI: the smoke
tests (tests/bench/meson.build) check that each bench runs to its end and prints this line with
every field; run-all.sh runs them at full size and prints the table.

    bench_result.py execute|environment|snapshot|quota OUTPUT [KEY=VALUE ...]
                                print the BENCH-RESULT line from a bench program's output
    bench_result.py smoke BENCH -- COMMAND...
                                run COMMAND, pass its output through, fail unless it exited 0 and
                                printed a valid BENCH-RESULT line of BENCH (exit 1 on a skip, 77)
    bench_result.py check BENCH FILE      validate FILE's BENCH-RESULT line of BENCH
    bench_result.py table FILE...         the table of the BENCH-RESULT lines in FILEs
    bench_result.py self-test             TAP: the check catches each way a line can be wrong
Python 3 stdlib only.
"""

import json
import os
import platform
import subprocess
import sys
import time

PREFIX = "BENCH-RESULT "

# (bench, name) -> what, floor, target in words, op, target value, where it is decided (DESIGN.md,
# docs/architecture.md), and the unit of measured. target None: reported only, no target set.
TARGETS = {
    ("execute", "http-over-bwrap"): dict(
        what="POST /execute-shell `true` over HTTP, unscoped (daemon started by hand)",
        floor="bare bwrap running `true` with the daemon's argv, seccomp program and fd layout, interleaved",
        op="<", value=1.25, unit="ratio", source="issue 3: the HTTP round trip adds under 25% to the bwrap floor"),
    ("execute", "http-over-bwrap-prebuilt"): dict(
        what="POST /execute-shell `true` over HTTP, unscoped, with sandboxes built ahead ([Execution] "
             "Prebuilt=2 and PrebuiltBurst=20 by default): the median of all runs, the pool's and the cold ones",
        floor="bare bwrap running `true` with the daemon's argv, seccomp program and fd layout, interleaved",
        op="<=", value=0.70, unit="ratio", source="issue 23: answer faster than a sandbox can be built"),
    ("execute", "p95-over-bwrap"): dict(
        what="the p95 of POST /execute-shell `true` (the runs of http-over-bwrap-prebuilt; one figure: batches 1)",
        floor="the p95 of bare bwrap `true` in the same run",
        op="<=", value=1.0, unit="ratio", source="issue 23: p95 no slower than a cold build"),
    ("execute", "python-over-bwrap"): dict(
        what="POST /execute python `pass` (the code shape; sandboxes built ahead as configured)",
        floor="python3 -c pass in a cold bare bwrap with the daemon's argv, interleaved",
        op="<=", value=0.85, unit="ratio", source="issue 23: python faster than its cold sandbox"),
    ("execute", "burst-over-bwrap"): dict(
        what="the median of 5 bursts of 20 sequential POST /execute-shell `true`, each after an idle second "
             "(one figure: batches 1)",
        floor="the bare bwrap median of the same run",
        op="<=", value=0.70, unit="ratio", source="issue 23: a burst after an idle second"),
    ("execute", "throughput-8-over-bwrap"): dict(
        what="POST /execute-shell `true` per second with 8 concurrent clients (one figure: batches 1)",
        floor="bare bwrap `true` per second, 8 at a time, measured after the clients",
        op=">=", value=0.85, unit="ratio", source="issue 23: under sustained load the pool cannot beat the build rate"),
    ("environment", "environment-over-plain"): dict(
        what="POST /execute-shell `true` with \"environment\" (python-base; sizes.environment says which)",
        floor="the same request without \"environment\", interleaved",
        op="<=", value=1.10, unit="ratio", source="issue 12, DESIGN.md section 14: the environment bind adds at most 10%"),
    ("scopes", "scope-adds"): dict(
        what="what a transient scope adds to POST /execute-shell `true` (scoped - unscoped median), "
             "inside a private systemd",
        floor="bare bwrap running `true` in the box (mean of both runs' medians)",
        op="<=", value=1.0, unit="ratio", source="issue 3: a scope adds no more than the floor again"),
    ("scopes", "unscoped-in-box"): dict(
        what="POST /execute-shell `true`, unscoped, inside the private systemd",
        floor="bare bwrap running `true` in the box, interleaved",
        op="<", value=1.25, unit="ratio", source="issue 3: under 25% over the floor without scopes"),
    ("scopes", "scoped-over-bwrap"): dict(
        what="POST /execute-shell `true`, each run in a scope (sandboxes built ahead as configured: the "
             "scope made with the sandbox, off the request path), inside the private systemd",
        floor="bare bwrap running `true` in the box, interleaved",
        op="<=", value=1.0, unit="ratio", source="issue 23: with scopes, no slower than a cold build"),
    ("egress", "throughput"): dict(
        what="download through bridge + gateway from inside a sandbox (MiB/s)",
        floor="the same client outside the sandbox downloading the same bytes directly (MiB/s), paired rounds",
        op=">=", value=0.80, unit="ratio", source="issue 5: at least 80% of direct throughput"),
    ("egress", "connect-added"): dict(
        what="set-up of a CONNECT through bridge + gateway from inside a sandbox, added over direct (us)",
        floor="a direct TCP connect to the same server, in alternating batches",
        op="<", value=1000.0, unit="us", source="issue 5: set-up adds under 1 ms at the median"),
    ("snapshot", "small-snapshot-over-copy"): dict(
        what="first snapshot (cold store) of a workspace of small files",
        floor="cp -a + syncfs of the same tree, same round",
        op=None, value=None, unit="ratio", source="issue 4: reported against cp -a and sha256sum (no target)"),
    ("snapshot", "small-unchanged-over-sha256sum"): dict(
        what="second snapshot (unchanged) of the small-file workspace",
        floor="find | xargs sha256sum of the same tree, same round",
        op=None, value=None, unit="ratio", source="issue 4: reported (no target)"),
    ("snapshot", "small-restore-over-copy"): dict(
        what="restore (synced) of the small-file workspace",
        floor="cp -a + syncfs of the same tree, same round",
        op=None, value=None, unit="ratio", source="issue 4: reported (no target)"),
    ("snapshot", "big-snapshot-over-copy"): dict(
        what="first snapshot (cold store) of one big file",
        floor="cp -a + syncfs of the same file, same round",
        op=None, value=None, unit="ratio", source="issue 4: reported (no target)"),
    ("quota", "scan-over-du"): dict(
        what="full quota scan (quota_scan) of the tree",
        floor="du -s -B1 of the same tree, interleaved",
        op=None, value=None, unit="ratio", source="issue 4: reported (no target)"),
    ("quota", "crossing-to-report"): dict(
        what="from a writer crossing the limit to the 100 ms tick that reports it (ms)",
        floor="the 100 ms tick period",
        op="<", value=200.0, unit="ms", source="issue 4: a writing loop stopped within 200 ms of crossing"),
    ("sciencediscovery", "execute-theirs-over-ours"): dict(
        what="POST /execute of python `pass` signed and shaped as the ScienceDiscovery API server sends it",
        floor="our own API's POST /execute of the same code, same daemon, in alternating batches",
        op="<=", value=1.05, unit="ratio", source="issue 26: their dialect costs at most 5% over ours"),
    ("sciencediscovery", "managed-poll-added"): dict(
        what="their managed shell path, submit -> completed polled every 200 ms as their API does, "
             "minus the synchronous run (ms)",
        floor="their synchronous POST /execute-shell of the same code",
        op="<=", value=200.0, unit="ms", source="issue 26: the managed path adds no more than one poll interval"),
    ("kernels", "execute-new-ws"): dict(
        what="`x = 1` on a live kernel over a new WebSocket each time (open, execute_request, execute_reply "
             "and status idle, close), as DocsGPT does",
        floor="the same against jupyter_server 1.23 serving the same ipykernel unsandboxed, alternating batches",
        op="<=", value=0.3, unit="ratio", source="issue 22: at most 0.3x jupyter_server's round trip"),
    ("kernels", "cold-start"): dict(
        what="POST /api/kernels -> first execute_reply of `x = 1`, a cold sandboxed kernel",
        floor="the same against jupyter_server 1.23 (an unsandboxed kernel), alternating rounds",
        op="<=", value=1.1, unit="ratio", source="issue 22: a sandboxed kernel starts at most 10% slower"),
    ("kernels", "prespawn-start"): dict(
        what="POST /api/kernels -> first execute_reply with [Kernels] Prespawn=4, kernels created back to back",
        floor="jupyter_server 1.23's cold start (median of cold-start's rounds)",
        op="<=", value=0.05, unit="ratio", source="issue 22: a prespawned kernel in at most 5% of a cold start"),
    ("kernels", "idle-memory"): dict(
        what="Pss of one idle sandboxed kernel's processes",
        floor="Pss of one idle jupyter_server kernel (MiB)",
        op=None, value=None, unit="ratio", source="issue 22: reported next to an unsandboxed kernel's"),
}

BENCHES = ("execute", "environment", "scopes", "egress", "snapshot", "quota", "sciencediscovery", "kernels")
FIELDS = ("name", "what", "floor", "floorValue", "floorUnit", "measured", "unit", "batches", "batchMedian",
          "batchP25", "batchP75", "target", "targetValue", "op", "met")


def quartiles(values):
    """(median, p25, p75) of values, as bench-execute takes them: the sorted list at n/2, n/4, 3n/4."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("no values")
    return v[n // 2], v[n // 4], v[min((3 * n) // 4, n - 1)]


def meets(x, op, value):
    return {"<": x < value, "<=": x <= value, ">": x > value, ">=": x >= value}[op]


def result(bench, name, measured, floor_value, floor_unit, batch_values=None, batch=None):
    """One RESULT: the figures given, the rest from TARGETS. batch_values: each batch's figure
    (quartiles taken here); or batch=(n, median, p25, p75) already taken."""
    t = TARGETS[(bench, name)]
    if batch_values is not None:
        med, p25, p75 = quartiles(batch_values)
        batch = (len(batch_values), med, p25, p75)
    n, med, p25, p75 = batch
    r = {"name": name, "what": t["what"], "floor": t["floor"], "floorValue": round(float(floor_value), 4),
         "floorUnit": floor_unit, "measured": round(float(measured), 4), "unit": t["unit"], "batches": int(n),
         "batchMedian": round(float(med), 4), "batchP25": round(float(p25), 4), "batchP75": round(float(p75), 4),
         "target": None, "targetValue": None, "op": None, "met": None}
    if t["op"] is not None:
        r.update(target="%s %g%s" % (t["op"], t["value"], "" if t["unit"] == "ratio" else " " + t["unit"]),
                 targetValue=t["value"], op=t["op"],
                 met=bool(meets(r["batchMedian"], t["op"], t["value"])))
    return r


def line(bench, sizes, results):
    return PREFIX + json.dumps({"bench": bench, "sizes": sizes, "results": results}, sort_keys=True)


def emit(bench, sizes, results, out=sys.stdout):
    out.write(line(bench, sizes, results) + "\n")
    out.flush()


# ---- the C programs' JSON lines -------------------------------------------------------------------

def json_lines(text):
    out = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("{") and ln.endswith("}"):
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
    return out


def pick(objs, key, what):
    for o in reversed(objs):
        if key in o:
            return o
    raise SystemExit("bench_result: no JSON line with %r in the output of %s" % (key, what))


def from_execute(text):
    j = pick(json_lines(text), "ratioBatchMedian", "bench-execute")
    batches = (j["n"] + 19) // 20
    one = lambda v: (1, v, v, v)   # noqa: E731  (a single figure, no batches)
    burst = j["burstMedianMs"] / j["bwrapMedianMs"]
    rate8 = j["rps8"] / j["bwrapRps8"]
    p95 = j["httpP95Ms"] / j["bwrapP95Ms"]
    return {"requests": j["n"], "prebuiltServed": j["prebuiltServed"], "pythonRequests": j["pyN"],
            "pythonPrebuiltServed": j["pyPrebuiltServed"]}, [
        result("execute", "http-over-bwrap", j["ratioMedian"], j["bwrapMedianMs"], "ms",
               batch=(batches, j["ratioBatchMedian"], j["ratioBatchP25"], j["ratioBatchP75"])),
        result("execute", "http-over-bwrap-prebuilt", j["ratioMedian"], j["bwrapMedianMs"], "ms",
               batch=(batches, j["ratioBatchMedian"], j["ratioBatchP25"], j["ratioBatchP75"])),
        result("execute", "p95-over-bwrap", p95, j["bwrapP95Ms"], "ms", batch=one(p95)),
        result("execute", "python-over-bwrap", j["pyHttpMedianMs"] / j["pyBwrapMedianMs"], j["pyBwrapMedianMs"], "ms",
               batch=((j["pyN"] + 19) // 20, j["pyRatioBatchMedian"], j["pyRatioBatchP25"], j["pyRatioBatchP75"])),
        result("execute", "burst-over-bwrap", burst, j["bwrapMedianMs"], "ms", batch=one(burst)),
        result("execute", "throughput-8-over-bwrap", rate8, j["bwrapRps8"], "per s", batch=one(rate8))]


def from_environment(text):
    objs = json_lines(text)
    e = pick(objs, "ratioEnvPlainBatchP25", "bench-execute --environment")
    build = pick(objs, "buildMs", "run-bench-environment.sh")
    sizes = {"requests": e["n"], "environment": e["environment"], "packages": build["packages"],
             "sizeBytes": build["sizeBytes"], "buildMs": build["buildMs"]}
    return sizes, [result("environment", "environment-over-plain", e["ratioEnvPlain"], e["plainMedianMs"], "ms",
                          batch=((e["n"] + 19) // 20, e["ratioEnvPlainBatchMedian"], e["ratioEnvPlainBatchP25"],
                                 e["ratioEnvPlainBatchP75"]))]


def from_snapshot(text):
    objs = json_lines(text)
    small = pick([o for o in objs if o.get("workspace") == "small"], "rounds", "bench-snapshot (small)")
    big = pick([o for o in objs if o.get("workspace") == "big"], "rounds", "bench-snapshot (big)")

    def res(name, row_set, key, floor_key):
        per = [r[key] / r[floor_key] for r in row_set["rows"]]
        med_floor = quartiles([r[floor_key] for r in row_set["rows"]])[0]
        return result("snapshot", name, quartiles(per)[0], med_floor, "ms", batch_values=per)
    sizes = {"files": small["files"], "bigMiB": big["bigMiB"], "rounds": len(small["rows"]),
             "bigRounds": len(big["rows"])}
    return sizes, [res("small-snapshot-over-copy", small, "snap1", "cpSync"),
                   res("small-unchanged-over-sha256sum", small, "snap2", "sha"),
                   res("small-restore-over-copy", small, "restore", "cpSync"),
                   res("big-snapshot-over-copy", big, "snap1", "cpSync")]


def from_quota(text):
    j = pick(json_lines(text), "scanOverDuP25", "bench-quota")
    sizes = {"files": j["files"], "dirs": j["dirs"], "trials": j["trials"]}
    return sizes, [
        result("quota", "scan-over-du", j["scanMedianMs"] / j["duMedianMs"], j["duMedianMs"], "ms",
               batch=(j["scanTrials"], j["scanOverDuMedian"], j["scanOverDuP25"], j["scanOverDuP75"])),
        result("quota", "crossing-to-report", j["crossLatencyMedianMs"], 100.0, "ms",
               batch=(j["trials"], j["crossLatencyMedianMs"], j["crossLatencyP25Ms"], j["crossLatencyP75Ms"])),
    ]


CONVERTERS = {"execute": from_execute, "environment": from_environment, "snapshot": from_snapshot,
              "quota": from_quota}


# ---- validation -----------------------------------------------------------------------------------

def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def validate(obj, bench):
    """The list of what is wrong with one parsed BENCH-RESULT of @bench (empty: valid)."""
    bad = []
    if not isinstance(obj, dict):
        return ["not a JSON object"]
    if obj.get("bench") != bench:
        bad.append("bench is %r, expected %r" % (obj.get("bench"), bench))
    if not isinstance(obj.get("sizes"), dict) or not obj["sizes"]:
        bad.append("sizes missing or empty")
    results = obj.get("results")
    if not isinstance(results, list) or not results:
        return bad + ["results missing or empty"]
    want = sorted(n for (b, n) in TARGETS if b == bench)
    got = sorted(r.get("name") for r in results if isinstance(r, dict))
    if got != want:
        bad.append("results name %s, expected %s" % (got, want))
    for r in results:
        if not isinstance(r, dict):
            bad.append("a result is not an object")
            continue
        n = r.get("name")
        for f in FIELDS:
            if f not in r:
                bad.append("%s: field %s missing" % (n, f))
        for f in ("floorValue", "measured", "batchMedian", "batchP25", "batchP75"):
            if f in r and not is_num(r[f]):
                bad.append("%s: %s is not a number: %r" % (n, f, r[f]))
        for f in ("what", "floor", "floorUnit", "unit"):
            if f in r and not (isinstance(r[f], str) and r[f]):
                bad.append("%s: %s is not a text" % (n, f))
        if not (isinstance(r.get("batches"), int) and r["batches"] >= 1):
            bad.append("%s: batches is not a count >= 1: %r" % (n, r.get("batches")))
        if all(is_num(r.get(f)) for f in ("batchMedian", "batchP25", "batchP75")) and \
                not r["batchP25"] <= r["batchMedian"] <= r["batchP75"]:
            bad.append("%s: quartiles out of order: %s <= %s <= %s" % (n, r["batchP25"], r["batchMedian"],
                                                                       r["batchP75"]))
        t = TARGETS.get((bench, n))
        if t is None:
            continue
        if t["op"] is None:
            if any(r.get(f) is not None for f in ("target", "targetValue", "op", "met")):
                bad.append("%s: has a target, none is set" % n)
        else:
            if r.get("op") != t["op"] or r.get("targetValue") != t["value"] or not isinstance(r.get("target"), str):
                bad.append("%s: target %r %r %r, expected %s %g" % (n, r.get("target"), r.get("op"),
                                                                    r.get("targetValue"), t["op"], t["value"]))
            elif not isinstance(r.get("met"), bool) or \
                    (is_num(r.get("batchMedian")) and r["met"] != meets(r["batchMedian"], t["op"], t["value"])):
                bad.append("%s: met is %r for %r %s %g" % (n, r.get("met"), r.get("batchMedian"), t["op"], t["value"]))
    return bad


def find_results(text):
    out = []
    for ln in text.splitlines():
        if ln.startswith(PREFIX):
            out.append(json.loads(ln[len(PREFIX):]))
    return out


def check_text(text, bench):
    try:
        found = find_results(text)
    except ValueError as e:
        return ["a BENCH-RESULT line is not JSON: %s" % e]
    if len(found) != 1:
        return ["expected one BENCH-RESULT line, found %d" % len(found)]
    return validate(found[0], bench)


# ---- the table ------------------------------------------------------------------------------------

def fmt(x, unit):
    if x is None:
        return "-"
    if unit == "ratio":
        return "%.3f" % x
    return "%.0f %s" % (x, unit) if abs(x) >= 100 else "%.2f %s" % (x, unit)


def machine():
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        load = "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d CPUs (%s), kernel %s, %s; load average %s" % (
        os.cpu_count() or 0, cpu, platform.release(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load)


def table(objs, missing=()):
    rows = [("bench", "target", "measured", "per batch: median [p25, p75] (n)", "target", "met", "floor")]
    for o in objs:
        for r in o["results"]:
            u = r["unit"]
            rows.append((o["bench"], r["name"], fmt(r["measured"], u),
                         "%s [%s, %s] (%d)" % (fmt(r["batchMedian"], u), fmt(r["batchP25"], u),
                                                fmt(r["batchP75"], u), r["batches"]),
                         r["target"] or "none", {True: "met", False: "NOT met", None: "-"}[r["met"]],
                         "%s (%s)" % (r["floor"], fmt(r["floorValue"], r["floorUnit"]))))
    for b, why in missing:
        rows.append((b, "-", "-", "-", "-", "FAILED", why))
    rows = [tuple(c.replace("|", "\\|") for c in r) for r in rows]    # a Markdown table
    w = [max(len(r[i]) for r in rows) for i in range(6)]
    out = []
    for i, r in enumerate(rows):
        out.append("| " + " | ".join(r[k].ljust(w[k]) if k < 6 else r[k] for k in range(7)) + " |")
        if i == 0:
            out.append("|" + "|".join("-" * (w[k] + 2) for k in range(6)) + "| --- |")
    return "\n".join(out)


# ---- the checker's own test ---------------------------------------------------------------------

def self_test():
    """TAP: a valid line of each bench passes; each way of breaking it is caught."""
    cases = []
    for bench in BENCHES:
        res = [result(bench, n, 1.0, 10.0, "ms", batch_values=[0.9, 1.0, 1.1])
               for (b, n) in sorted(TARGETS) if b == bench]
        good = line(bench, {"n": 1}, res)
        cases.append(("%s: a valid line passes" % bench, not check_text("# x\n" + good + "\n", bench)))

        def broken(fn):
            o = json.loads(good[len(PREFIX):])
            fn(o)
            return PREFIX + json.dumps(o)
        for what, fn in (("a field missing", lambda o: o["results"][0].pop("batchP75")),
                         ("a number that is text", lambda o: o["results"][0].update(measured="1.0")),
                         ("quartiles out of order", lambda o: o["results"][0].update(batchP25=5.0)),
                         ("a result missing", lambda o: o["results"].pop()),
                         ("another bench's name", lambda o: o.update(bench="other")),
                         ("no sizes", lambda o: o.update(sizes={})),
                         ("met that contradicts the figures", lambda o: [r.update(met=not r["met"]) for r in
                                                                         o["results"] if r["met"] is not None]
                          or o["results"][0].update(met=True))):
            cases.append(("%s: %s is caught" % (bench, what), bool(check_text(broken(fn), bench))))
        cases.append(("%s: two lines are caught" % bench, bool(check_text(good + "\n" + good, bench))))
        cases.append(("%s: no line is caught" % bench, bool(check_text("nothing\n", bench))))
    print("1..%d" % len(cases))
    for i, (name, ok) in enumerate(cases, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
    return 0 if all(ok for _, ok in cases) else 1


# ---- main -----------------------------------------------------------------------------------------

def main(argv):
    if len(argv) >= 2 and argv[0] in CONVERTERS:
        with open(argv[1], errors="replace") as f:
            sizes, results = CONVERTERS[argv[0]](f.read())
        for kv in argv[2:]:
            k, _, v = kv.partition("=")
            sizes[k] = int(v) if v.isdigit() else v
        emit(argv[0], sizes, results)
        return 0
    if len(argv) >= 3 and argv[0] == "smoke" and argv[2] == "--":
        bench, cmd = argv[1], argv[3:]
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        text = p.stdout.decode("utf-8", "replace")
        sys.stdout.write(text)
        print("# smoke %s: exit status %d after %.1f s" % (bench, p.returncode, time.monotonic() - t0))
        if p.returncode != 0:
            print("FAIL: %s exited %d (a skip, 77, is a failure here too)" % (bench, p.returncode))
            return 1
        bad = check_text(text, bench)
        for b in bad:
            print("FAIL: " + b)
        if not bad:
            print("OK: one BENCH-RESULT line of %s with every field (no timing asserted)" % bench)
        return 1 if bad else 0
    if len(argv) == 3 and argv[0] == "check":
        with open(argv[2], errors="replace") as f:
            bad = check_text(f.read(), argv[1])
        for b in bad:
            print("FAIL: " + b)
        return 1 if bad else 0
    if argv == ["self-test"]:
        return self_test()
    if len(argv) >= 1 and argv[0] == "table":
        objs, missing = [], []
        for path in argv[1:]:
            bench = os.path.basename(path).split(".")[0]
            with open(path, errors="replace") as f:
                text = f.read()
            bad = check_text(text, bench)
            if bad:
                missing.append((bench, "; ".join(bad)[:200]))
            else:
                objs.append(find_results(text)[0])
        print("# " + machine())
        print(table(objs, missing))
        return 1 if missing else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
