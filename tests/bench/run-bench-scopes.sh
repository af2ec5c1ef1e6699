#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What a transient scope per execution adds to the latency of POST /execute-shell running
# `true`, next to the bare bwrap floor, all measured inside a private systemd (a "box").
#
#   tests/bench/run-bench-scopes.sh BUILDDIR [REQUESTS]     (REQUESTS: default 200)
#
# Set-up as in tests/integration/systemd-scopes.sh (through tests/helpers/box-test-lib.sh, whose
# safety rules hold here: the only way to boot systemd is box_start, the box is stopped by the
# EXIT trap, its /etc, /usr and /var are overlays on a tmpfs, all traffic stays on the box's
# loopback): meson install into a staging DESTDIR, boot the box, install into it, polkitd loads
# the rule, sandbox-runner.socket on 127.0.0.1:4311 in the box.  Then bench-execute runs inside
# the box twice, N requests each:
#   scoped    every run in sandbox-runner-x-<id>.scope (checked: /health scopes.available, one
#             answer's limits.enforcedBy=scope, and systemd's "Started" lines for the bench's
#             scopes in the journal);
#   unscoped  the polkit rule moved away and [Execution] AllowUnscoped=yes (checked the same
#             way: enforcedBy=rlimit, no scope started).
# bench-execute runs as root in the box, so its bare bwrap floor is bwrap started by root there.
# Prints both tables, then the floor, the two HTTP medians, what the scope adds (scoped -
# unscoped) and that as a fraction of the floor (target <= 1.0), and the unscoped ratio
# http/bwrap (target < 1.25), then the BENCH-RESULT line of bench_result.py.  A benchmark, not a pass/fail test: exit 0 when it measured,
# 77 when not root, 1 when it could not measure (or when the box left something on the host).

set -u
set -o pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"

if [[ $EUID -ne 0 ]]; then
        echo "run-bench-scopes.sh: needs root (boots a private systemd); skipped" >&2
        exit 77
fi
BUILD=${1:-${MESON_BUILD_ROOT:-}}
N=${2:-200}
[[ -n "$BUILD" && -d "$BUILD" ]] || { echo "usage: run-bench-scopes.sh BUILDDIR [REQUESTS]" >&2; exit 1; }
if ! [[ "$N" =~ ^[0-9]+$ ]] || (( N < 10 )); then
        echo "REQUESTS must be a number >= 10" >&2
        exit 1
fi
BUILD=$(cd "$BUILD" && pwd)
BENCH=$BUILD/tests/bench/bench-execute
BOX_BENCH=/usr/local/bin/sr-bench-execute       # where it runs, in the box (step_provision)
URL=http://127.0.0.1:4311           # sandbox-runner.socket's ListenStream (box_client uses it too)
CRED=/etc/credstore/sandbox-runner
BOX_STATE=/var/tmp/sr-bench          # in the box: a tmpfs of its own

box_test_init bench-scopes

log() { printf '# %s\n' "$*"; }
# step DESC FUNC [ARGS]: run FUNC (its output indented); stop measuring when it fails
step() {
        local desc=$1 t0=$EPOCHREALTIME rc
        shift
        "$@" >"$WORK/step.out" 2>&1
        rc=$?
        if (( rc == 0 )); then
                log "$desc ($(since "$t0") s)"
                sed -e 's/^/#   /' "$WORK/step.out"
                return 0
        fi
        log "FAILED: $desc"
        sed -e 's/^/#   /' "$WORK/step.out"
        echo "run-bench-scopes.sh: could not measure: $desc failed" >&2
        exit 1
}

# -----------------------------------------------------------------------------------------
# Install, boot, provision (as tests/integration/systemd-scopes.sh)

step_install() {
        [[ -x "$BENCH" ]] || { echo "$BENCH not built"; return 1; }
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper || return 1
        stage_check_units || return 1
        stage_check_polkit_rule || return 1
        echo "prefix=$PREFIX confdir=$CONFDIR user=$SERVICE_USER polkit rule $RULEFILE (polkit-transient-scopes=$POLKIT_MODE)"
}

step_boot() {
        box_boot || return 1
        box_boot_info
}

step_provision() {
        box_provision || return 1
        box_install_client || return 1
        bx mkdir -p "$CONFDIR/runner.conf.d" || return 1
        # The build directory may be under /tmp, which the box has of its own: bench-execute goes
        # into the box's /usr (an overlay), beside the daemon.
        bx sh -c "cat >'$BOX_BENCH' && chmod 0755 '$BOX_BENCH'" <"$BENCH" || return 1
        bx ip link set lo up || return 1
        # As tests/bench/run-bench.sh: no idle exit in the middle of the runs, room for the 8
        # clients, and no info lines per execution in the journal.
        printf '[Runner]\nIdleExitSec=0\nLogLevel=warning\nMaxConnectionsPerClient=64\n' |
                bx sh -c "cat >'$CONFDIR/runner.conf.d/40-bench.conf'" || return 1
        bx mkdir -p -m 0700 "$BOX_STATE"
}

step_polkit() {
        local out
        bx test -f "$RULEFILE" || { echo "$RULEFILE missing in the box"; return 1; }
        # D-Bus activation: the first call to org.freedesktop.PolicyKit1 starts polkit.service.
        out=$(bx busctl --system get-property org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
                org.freedesktop.PolicyKit1.Authority BackendVersion 2>&1) || { echo "polkit authority: $out"; return 1; }
        echo "polkit authority: $out"
        [[ "$(bx systemctl is-active polkit.service)" == active ]] || { echo "polkit.service is not active"; return 1; }
        out=$(bx journalctl -u polkit.service -o cat --no-pager)
        grep -q "Loading rules from directory ${RULESDIR%/}" <<<"$out" || { echo "$out"; return 1; }
}


step_socket() {
        bx systemctl start sandbox-runner.socket || return 1
        [[ "$(bx systemctl is-active sandbox-runner.socket)" == active ]] || return 1
        health || { echo "$HEALTH"; return 1; }
        jprint '"/health: HTTP %s, sandbox.usable=%s, scopes=%s" % (d["http"], d["body"]["sandbox"].get("usable"), d["body"].get("scopes"))' <<<"$HEALTH"
        jtest 'd["http"] == 200 and d["body"]["sandbox"]["usable"] is True' <<<"$HEALTH" || return 1
        jtest 'd["body"]["scopes"]["available"] is True' <<<"$HEALTH" || {
                echo "scopes.available is not true; daemon and polkit journal:"
                bx journalctl -u sandbox-runner.service -u polkit.service -o cat --no-pager | tail -n 15
                return 1
        }
}

# one_run ENFORCED: one signed `true` through the lib's client; its limits.enforcedBy
RUN=$$-$RANDOM
one_run() {
        client post /execute-shell "{\"executionId\": \"check-$1-$RUN\", \"workspaceId\": \"check\", \"command\": \"true\"}" || return 1
        r '"HTTP %s status=%s exitCode=%s limits.enforcedBy=%s (%s ms through the python client)" % (d["http"],
           d["body"].get("status"), d["body"].get("exitCode"), d["body"].get("limits", {}).get("enforcedBy"), d["elapsedMs"])'
        rt 'd["http"] == 200 and d["body"].get("exitCode") == 0 and d["body"]["limits"]["enforcedBy"] == a' "$1" ||
                { echo "expected limits.enforcedBy=$1"; return 1; }
}

# -----------------------------------------------------------------------------------------
# The runs

CURSOR=
journal_mark() { CURSOR=$(bx journalctl --show-cursor -n 0 -q --no-pager | sed -n 's/^-- cursor: //p'); }
# scopes of the bench that systemd started since the mark: a cold run's, named by its execution
# id (bench-<pid>-<seq>), and those of the sandboxes built ahead (p<daemon pid>-<keeper pid>,
# "sandbox built ahead": a run released into one keeps its scope), taken or not
scopes_started() {
        bx journalctl _PID=1 -o cat --no-pager ${CURSOR:+--after-cursor="$CURSOR"} |
                grep -cE "^Started (${SCOPE_PREFIX}bench-|sandbox-runner execution bench-|${SCOPE_PREFIX}p[0-9]+-[0-9]+\.scope|sandbox-runner sandbox built ahead)"
}

# cpu_snapshot FILE: CPU time (utime + stime, ms) of the processes a scope involves: PID 1,
# the bus, polkitd, journald (PID 1 logs every scope) and the daemon (its own threads only:
# the keepers and bwraps are children it reaps, counted in cutime, not here)
cpu_snapshot() {
        bx /usr/bin/python3 -c '
import json, os, subprocess
tck = os.sysconf("SC_CLK_TCK")
main = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value", "sandbox-runner.service"],
                      capture_output=True, text=True).stdout.strip()
want = {"1": "systemd"}
if main and main != "0":
    want[main] = "sandbox-runnerd"
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            comm = open("/proc/%s/comm" % p).read().strip()
        except OSError:
            continue
        if comm in ("dbus-daemon", "dbus-broker", "polkitd", "systemd-journal"):
            want[p] = comm
out = {}
for p, name in want.items():
    try:
        f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    out[name] = out.get(name, 0) + (int(f[11]) + int(f[12])) * 1000 / tck
print(json.dumps(out))' >"$1"
}

# bench LABEL: bench-execute inside the box; output in $WORK/LABEL.out, CPU snapshots in
# $WORK/LABEL.cpu0 and .cpu1
bench() {
        local label=$1
        journal_mark
        cpu_snapshot "$WORK/$label.cpu0" || return 1
        bx rm -rf "$BOX_STATE/$label" && bx mkdir -m 0700 "$BOX_STATE/$label" || return 1
        bx "$BOX_BENCH" --url "$URL" --token-file "$CRED.api-token" --key-file "$CRED.signing-key" \
                --state-dir "$BOX_STATE/$label" -n "$N" --label "$label" >"$WORK/$label.out" 2>&1
        local rc=$?
        (( rc == 0 )) || { cat "$WORK/$label.out"; echo "bench-execute exited $rc"; return 1; }
        tail -n 1 "$WORK/$label.out" | jtest '"httpMedianMs" in d' || { cat "$WORK/$label.out"; echo "no JSON line"; return 1; }
        cpu_snapshot "$WORK/$label.cpu1" || return 1
        SCOPES=$(scopes_started)
        echo "systemd started $SCOPES scopes of the bench (runs: 10 warm-up + 3 x $N)"
}

step_scoped() {
        one_run scope || return 1
        bench scoped || return 1
        (( SCOPES >= 3 * N )) || {
                echo "expected at least $((3 * N)) scopes; systemd's journal ends:"
                bx journalctl _PID=1 -o cat --no-pager -n 10
                return 1
        }
}

step_to_unscoped() {
        bx mv "$RULEFILE" "/root/$RULE.saved" || return 1
        printf '[Execution]\nAllowUnscoped=yes\n' | bx sh -c "cat >'$CONFDIR/runner.conf.d/50-bench-unscoped.conf'" || return 1
        restart_until 'd["body"]["scopes"]["available"] is False' || return 1
        jprint '"/health scopes: %s" % d["body"]["scopes"]' <<<"$HEALTH"
        one_run rlimit
}

step_unscoped() {
        bench unscoped || return 1
        (( SCOPES == 0 )) || { echo "scopes were started while unscoped"; return 1; }
        [[ -z "$(scope_units)" ]] || { echo "scope units: $(scope_units)"; return 1; }
}

# Where the time of a scope goes, as far as the box's journal tells: systemd's and polkitd's
# complaints, if any.
step_box_notes() {
        local out
        out=$(bx journalctl -b _PID=1 -o cat --no-pager | grep -E "$SCOPE_PREFIX|sandbox-runner execution" |
                grep -viE '^(Started|Stopped) |Deactivated successfully|Consumed ' | sort | uniq -c | sort -rn | head -n 5)
        [[ -n "$out" ]] && echo "systemd's other messages about the scopes:" && echo "$out"
        out=$(bx journalctl -u sandbox-runner.service -p warning -o cat --no-pager | sort | uniq -c | sort -rn | head -n 5)
        [[ -n "$out" ]] && echo "the daemon's warnings:" && echo "$out"
        out=$(bx journalctl -u polkit.service -o cat --no-pager | grep -viE 'Loading rules|Finished loading|Acquired the name|Started|Starting|started daemon' | sort | uniq -c | sort -rn | head -n 5)
        [[ -n "$out" ]] && echo "polkitd:" && echo "$out"
        return 0
}

step "meson install into a staging DESTDIR" step_install
step "private systemd boots to running" step_boot
step "project installed in the box" step_provision
step "polkitd D-Bus activated, loads $RULESDIR" step_polkit
step "sandbox-runner.socket started, /health: scopes available" step_socket
step "bench-execute, scoped ($N requests)" step_scoped
step "switch to unscoped: polkit rule moved away, AllowUnscoped=yes" step_to_unscoped
step "bench-execute, unscoped ($N requests)" step_unscoped
step "journal of the box" step_box_notes

# -----------------------------------------------------------------------------------------
# Stop the box; the host must be as it was.

box_test_stop
host_bad=
for check in step_host_canary step_host_no_processes step_host_no_mounts step_host_no_cgroups; do
        out=$($check 2>&1) || { host_bad=1; log "HOST CHECK FAILED ($check): $out"; }
done
[[ -n "$host_bad" ]] || log "box stopped (${T_STOP} s); host checks: canary intact, no process, mount or cgroup of the box left"

# -----------------------------------------------------------------------------------------
# Results

echo
cat "$WORK/scoped.out"
echo
cat "$WORK/unscoped.out"
echo
"$PY" - "$WORK/scoped.out" "$WORK/unscoped.out" "$WORK" "$BENCH_DIR" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[4])
import bench_result as R
s, u = (json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:3])
# The floor: both runs measure it, each interleaved with its own HTTP requests; the mean of the
# two medians.  The two runs follow each other (not interleaved), so a change of the machine's
# load between them shows in "scope adds"; the difference of the two runs' ratios to their own
# floors does not depend on it, and is printed beside it.
floor = (s["bwrapMedianMs"] + u["bwrapMedianMs"]) / 2
add = s["httpMedianMs"] - u["httpMedianMs"]
print("# summary: POST /execute-shell `true`, %d requests each, medians, inside the box" % s["n"])
print("bare bwrap floor        %7.3f ms  (scoped run %.3f, unscoped run %.3f)" % (floor, s["bwrapMedianMs"], u["bwrapMedianMs"]))
print("unscoped HTTP           %7.3f ms" % u["httpMedianMs"])
print("scoped HTTP             %7.3f ms" % s["httpMedianMs"])
print("scope adds              %7.3f ms  = %.2f x the floor (target <= 1.0; by each run's own floor: %.2f)"
      % (add, add / floor, s["ratioMedian"] - u["ratioMedian"]))
print("unscoped http/bwrap     %7.3f     (target < 1.25)" % u["ratioMedian"])
print("scoped http/bwrap       %7.3f     (target <= 1.0, issue 23; %d of %d served by sandboxes built ahead)"
      % (s["ratioMedian"], s["prebuiltServed"], s["n"]))
print("throughput scoped       %.1f / %.1f / %.1f per s (1 / 2 / 8 clients); unscoped %.1f / %.1f / %.1f"
      % (s["rps1"], s["rps2"], s["rps8"], u["rps1"], u["rps2"], u["rps8"]))
# CPU time of the helpers per request (10 warm-up + 3 x n requests, 5 bursts of 20, 5 + n/2 python
# ones in each run), and what the scope adds to it: where the scope's time goes
runs = 10 + 3 * s["n"] + 100 + 5 + s["n"] // 2
cpu = {}
for label in ("scoped", "unscoped"):
    a, b = (json.load(open(sys.argv[3] + "/%s.cpu%d" % (label, i))) for i in (0, 1))
    cpu[label] = {k: (b[k] - a.get(k, 0)) / runs for k in b}
names = sorted(set(cpu["scoped"]) | set(cpu["unscoped"]))
print("CPU ms per request      " + ", ".join("%s %.2f (unscoped %.2f)" % (k, cpu["scoped"].get(k, 0), cpu["unscoped"].get(k, 0))
                                         for k in names))
print(json.dumps({"n": s["n"], "floorMedianMs": round(floor, 4), "unscopedMedianMs": round(u["httpMedianMs"], 4),
                  "scopedMedianMs": round(s["httpMedianMs"], 4), "scopeAddsMs": round(add, 4),
                  "scopeAddsPerFloor": round(add / floor, 4),
                  "scopeAddsPerOwnFloor": round(s["ratioMedian"] - u["ratioMedian"], 4), "unscopedRatio": round(u["ratioMedian"], 4),
                  "scopedRatio": round(s["ratioMedian"], 4),
                  "cpuMsPerRequest": {k: {l: round(v.get(k, 0), 3) for l, v in cpu.items()} for k in names}}))
# The runs are not interleaved, so what a scope adds has no batches of its own: its quartiles are
# those of the scoped run's batch ratios (each batch against its own floor) less the unscoped run's
# batch median, i.e. the scoped run's spread.
batches = (s["n"] + 19) // 20
R.emit("scopes", {"requests": s["n"], "prebuiltServedScoped": s["prebuiltServed"],
                  "prebuiltServedUnscoped": u["prebuiltServed"]},
       [R.result("scopes", "scope-adds", add / floor, floor, "ms",
                 batch=(batches, s["ratioBatchMedian"] - u["ratioBatchMedian"], s["ratioBatchP25"] - u["ratioBatchMedian"],
                        s["ratioBatchP75"] - u["ratioBatchMedian"])),
        R.result("scopes", "unscoped-in-box", u["ratioMedian"], u["bwrapMedianMs"], "ms",
                 batch=(batches, u["ratioBatchMedian"], u["ratioBatchP25"], u["ratioBatchP75"])),
        R.result("scopes", "scoped-over-bwrap", s["ratioMedian"], s["bwrapMedianMs"], "ms",
                 batch=(batches, s["ratioBatchMedian"], s["ratioBatchP25"], s["ratioBatchP75"]))])
EOF
log "timing: total $(since "$T_START") s"
if [[ -n "$host_bad" ]]; then
        echo "run-bench-scopes.sh: the box left something on the host (see above)" >&2
        exit 1
fi
exit 0
