#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Per-execution transient scopes under a real (private) systemd, with polkit.
#
#   tests/integration/systemd-scopes.sh [BUILDDIR]         (or MESON_BUILD_ROOT=BUILDDIR)
#
# Installs the meson build into a staging DESTDIR, boots a private systemd with
# tests/helpers/systemd-box.sh (DESIGN.md section 13: the box's /etc, /usr and /var are overlays
# on a tmpfs, so nothing here touches the host), installs the staged tree into the box, lets
# polkitd (the host's, seen through the /usr overlay, D-Bus activated) load the installed rule,
# and checks DESIGN.md section 6 with signed requests sent from inside the box:
#  - /health: scopes available, sandbox usable (the probes' findings as TAP comments);
#  - a run happens in sandbox-runner-x-<id>.scope in sandbox-runner.slice with the limits that
#    were asked for (systemctl and the kernel's cgroup files), reports memory and CPU use, and
#    its scope is gone right after the answer;
#  - the memory limit (status memory_limit), the tasks limit (status tasks_limit) and the
#    wall-clock limit (status timeout) are enforced and nothing of the run is left;
#  - structured journal entries for started/finished executions;
#  - without the polkit rule the daemon says so in /health and refuses executions, and with
#    [Execution] AllowUnscoped=yes runs them without a scope;
# and measures (TAP comments) what a scope adds to the latency of an execution: the median of
# 30 `true` runs with scopes against 30 without.  At the end: no scope and no stray process
# of the service user in the box; after stopping the box, the host is as it was (canary in
# /tmp, no process of the box, no mount, no cgroup left).
#
# Output is TAP.  Needs root (exit 77 otherwise: the only skip; CI runs as root).

set -u
set -o pipefail

T_START=$EPOCHREALTIME
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRCROOT=$(cd "$HERE/../.." && pwd)

if [[ $EUID -ne 0 ]]; then
        echo "1..0 # SKIP needs root (boots a private systemd)"
        exit 77
fi

BUILD=${1:-${MESON_BUILD_ROOT:-}}
# shellcheck source=../helpers/systemd-box.sh
source "$SRCROOT/tests/helpers/systemd-box.sh"

ID_EXEC_STARTED=a9de5f3b7e0b4263a90b8b97d898b83f
ID_EXEC_FINISHED=4f17f541cb23403c9e79f39ef5a14aea
SLICE=sandbox-runner.slice
SCOPE_PREFIX=sandbox-runner-x-
RULE=50-sandbox-runner.rules
RULESDIR=/usr/share/polkit-1/rules.d          # polkitd reads only this and /etc/polkit-1/rules.d
BENCH_N=30
MiB=$((1024 * 1024))

PLAN=23
echo "1..$PLAN"
n=0
failed=0
broken=            # set when a step that later tests depend on failed

ok()   { n=$((n + 1)); echo "ok $n - $*"; }
nok()  { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
diag() { sed -e 's/^/# /'; }
note() { echo "# $*"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# t DESC FUNC [ARGS...]: one TAP test; FUNC prints its diagnostics on stdout/stderr.
t() {
        local desc=$1 out rc
        shift
        if [[ -n "$broken" ]]; then
                nok "$desc # not run: $broken"
                return 1
        fi
        # not in a subshell: steps set variables for later ones
        "$@" >"$WORK/step.out" 2>&1
        rc=$?
        out=$(<"$WORK/step.out")
        if (( rc == 0 )); then
                ok "$desc"
        else
                nok "$desc"
        fi
        [[ -n "$out" ]] && printf '%s\n' "$out" | diag
        return $rc
}

WORK=$(mktemp -d /tmp/sr-scopes.XXXXXX)
BOX=$WORK/box
STAGE=$WORK/stage
CANARY=$(mktemp /tmp/sr-scopes-canary.XXXXXX)
echo "sandbox-runner scopes test canary $$" >"$CANARY"
cp "$CANARY" "$WORK/canary.expected"
awk '{ print $5 }' /proc/self/mountinfo | sort >"$WORK/mounts.before"
BG_PID=

cleanup() {
        if [[ -n "$BG_PID" ]]; then
                kill "$BG_PID" 2>/dev/null
                wait "$BG_PID" 2>/dev/null
        fi
        box_stop "$BOX" 2>/dev/null
        if grep -qF " $WORK/" /proc/self/mountinfo; then
                echo "# mounts left below $WORK; not removing it" >&2
        else
                rm -rf --one-file-system "$WORK"
        fi
        rm -f "$CANARY"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

bx() { box_run "$BOX" "$@"; }

# JSON with python3, on the host side.
PY=$(command -v /usr/bin/python3 || command -v python3)
# jtest EXPR [ARG]: stdin is one JSON document, bound to d (ARG to a); true if EXPR is
jtest() {
        "$PY" -c 'import json, sys
a = sys.argv[2] if len(sys.argv) > 2 else None
d = json.load(sys.stdin)
sys.exit(0 if eval(sys.argv[1]) else 1)' "$@" 2>/dev/null
}
# jprint EXPR [ARG]: print EXPR over the JSON document d
jprint() {
        "$PY" -c 'import json, sys
a = sys.argv[2] if len(sys.argv) > 2 else None
d = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$@"
}
# jlines EXPR: stdin is JSON lines (journalctl -o json), bound to the list L
jlines() {
        "$PY" -c 'import json, sys
L = [json.loads(l) for l in sys.stdin if l.strip()]
r = eval(sys.argv[1])
if isinstance(r, str):
    print(r)
sys.exit(0 if r else 1)' "$@" 2>/dev/null
}

# The client, run inside the box with the box's python3: bearer token and v1 signatures
# (API.md, Authentication) from the secrets provisioned below.
CLIENT_PY='
import hashlib, hmac, http.client, json, sys, time

TOKEN = open("/root/sr-token").read()
KEY = open("/root/sr-key", "rb").read()

def request(method, path, body=None, signed=False, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": "Bearer " + TOKEN}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if signed:
        ts = str(int(time.time()))
        s = "v1\n%s\n%s\n%s\n%s" % (ts, method, path, hashlib.sha256(data or b"").hexdigest())
        headers["X-Sandbox-Timestamp"] = ts
        headers["X-Sandbox-Signature"] = "v1=" + hmac.new(KEY, s.encode(), hashlib.sha256).hexdigest()
    c = http.client.HTTPConnection("127.0.0.1", 4311, timeout=timeout)
    t0 = time.monotonic()
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    raw = r.read()
    dt = time.monotonic() - t0
    c.close()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = {"_raw": raw.decode("utf-8", "replace")}
    return r.status, doc, dt

cmd = sys.argv[1]
if cmd == "health":
    st, doc, dt = request("GET", "/health")
    print(json.dumps({"http": st, "body": doc}))
elif cmd == "exec":                     # exec PATH BODY-JSON
    st, doc, dt = request("POST", sys.argv[2], json.loads(sys.argv[3]), signed=True)
    print(json.dumps({"http": st, "elapsedMs": round(dt * 1000, 1), "body": doc}))
elif cmd == "bench":                    # bench N ID-PREFIX: N sequential `true` runs
    n, prefix = int(sys.argv[2]), sys.argv[3]
    lat, bad = [], []
    for i in range(-1, n):              # -1: one warm-up run, not counted
        body = {"executionId": "%s-%d" % (prefix, i + 1), "workspaceId": "bench",
                "command": "true", "timeoutMs": 30000}
        st, doc, dt = request("POST", "/execute-shell", body, signed=True)
        if st != 200 or doc.get("status") != "exited" or doc.get("exitCode") != 0:
            bad.append({"run": i + 1, "http": st, "status": doc.get("status"), "exitCode": doc.get("exitCode"),
                        "stderr": (doc.get("stderr") or "")[:120], "error": doc.get("error")})
        if i >= 0:
            lat.append(dt * 1000)
        enforced = doc.get("limits", {}).get("enforcedBy")
    print(json.dumps({"latMs": lat, "nbad": len(bad), "bad": bad[:2], "enforcedBy": enforced}))
else:
    sys.exit("usage: health | exec PATH BODY | bench N PREFIX")
'

# -----------------------------------------------------------------------------------------
# Build products and install layout

BUILD_OPTS=
opt() { jprint 'next((o["value"] for o in d if o["name"] == a), "")' "$1" <<<"$BUILD_OPTS"; }

step_install() {
        [[ -n "$BUILD" && -d "$BUILD" ]] || { echo "no build dir (argument or MESON_BUILD_ROOT)"; return 1; }
        BUILD=$(cd "$BUILD" && pwd)
        [[ -x "$BUILD/src/sandbox-runnerd" ]] || { echo "$BUILD/src/sandbox-runnerd not built"; return 1; }
        BUILD_OPTS=$(meson introspect "$BUILD" --buildoptions) || return 1
        DESTDIR=$STAGE meson install -C "$BUILD" --no-rebuild --quiet || return 1

        local prefix sysconfdir f
        prefix=$(opt prefix)
        sysconfdir=$(opt sysconfdir)
        [[ "$sysconfdir" == /* ]] || sysconfdir=$prefix/$sysconfdir
        CONFDIR=$sysconfdir/sandbox-runner
        SERVICE_USER=$(opt service-user)
        POLKIT_MODE=$(opt polkit-transient-scopes)
        for f in sandbox-runner.socket sandbox-runner.service "$SLICE"; do
                [[ -n "$(cd "$STAGE" && find . -name "$f" -path '*/systemd/system/*')" ]] ||
                        { echo "$f not installed"; return 1; }
        done

        # The polkit rule goes to -Dpolkitrulesdir (default <prefix>/share/polkit-1/rules.d);
        # polkitd reads only /usr/share/polkit-1/rules.d and /etc/polkit-1/rules.d, so a build
        # with another prefix (/usr/local) gets its rule relocated here, as a packager would.
        f=$(cd "$STAGE" && find . -name "$RULE" -type f | head -n1)
        [[ -n "$f" ]] || { echo "$RULE not installed (polkit-transient-scopes=$POLKIT_MODE)"; return 1; }
        f=${f#.}
        if [[ "$f" != "$RULESDIR/$RULE" && "$f" != "/etc/polkit-1/rules.d/$RULE" ]]; then
                echo "polkit rule installed as $f, which polkitd does not read: relocated to $RULESDIR/$RULE"
                mkdir -p "$STAGE$RULESDIR" && mv "$STAGE$f" "$STAGE$RULESDIR/$RULE" || return 1
                f=$RULESDIR/$RULE
        fi
        RULEFILE=$f
        echo "prefix=$prefix confdir=$CONFDIR user=$SERVICE_USER polkit rule $RULEFILE" \
             "($(grep -o 'mode of this build: [a-z-]*' "$STAGE$RULEFILE"); option polkit-transient-scopes=$POLKIT_MODE)"
}

T=$EPOCHREALTIME
t "meson install into a staging DESTDIR (polkit rule where polkitd reads it)" step_install ||
        broken="install failed"
T_INSTALL=$(since "$T")

# -----------------------------------------------------------------------------------------
# Boot

step_boot() {
        box_start "$BOX" >/dev/null || return 1
        box_wait "$BOX" 60 || return 1
        echo "box PID 1 = $(box_pid1 "$BOX"), state: $(bx systemctl is-system-running)," \
             "cgroup layout: $(bx stat -f -c %T /sys/fs/cgroup) at /sys/fs/cgroup"
}

T=$EPOCHREALTIME
t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}
T_BOOT=$(since "$T")
BOX_PIDNS=
if pid1=$(box_pid1 "$BOX"); then
        BOX_PIDNS=$(readlink "/proc/$pid1/ns/pid")
fi

# -----------------------------------------------------------------------------------------
# Install into the box

step_provision() {
        box_install "$BOX" "$STAGE" || return 1
        bx systemd-sysusers || return 1
        bx systemd-tmpfiles --create sandbox-runner.conf || return 1
        bx journalctl --update-catalog || return 1
        bx systemctl daemon-reload || return 1
        bx getent passwd "$SERVICE_USER" || { echo "user $SERVICE_USER not created"; return 1; }
        bx test -d /etc/credstore || { echo "/etc/credstore not created by tmpfiles"; return 1; }

        TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
        SIGNING_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
        printf '%s' "$TOKEN" | bx sh -c 'umask 077; cat >/etc/credstore/sandbox-runner.api-token' || return 1
        printf '%s' "$SIGNING_KEY" | bx sh -c 'umask 077; cat >/etc/credstore/sandbox-runner.signing-key' || return 1
        printf '%s' "$TOKEN" | bx sh -c 'umask 077; cat >/root/sr-token' || return 1
        printf '%s' "$SIGNING_KEY" | bx sh -c 'umask 077; cat >/root/sr-key' || return 1
        printf '%s' "$CLIENT_PY" | bx sh -c 'cat >/root/sr-client.py' || return 1
        bx mkdir -p "$CONFDIR/runner.conf.d" || return 1
        bx ip link set lo up || return 1
}

T=$EPOCHREALTIME
t "project installed in the box (sysusers, tmpfiles, catalog, daemon-reload, secrets)" step_provision ||
        broken=${broken:-"provisioning failed"}
T_PROVISION=$(since "$T")

step_polkit() {
        local out
        bx test -f "$RULEFILE" || { echo "$RULEFILE missing in the box"; return 1; }
        # D-Bus activation: the first call to org.freedesktop.PolicyKit1 starts polkit.service.
        out=$(bx busctl --system get-property org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
                org.freedesktop.PolicyKit1.Authority BackendVersion 2>&1) || { echo "polkit authority: $out"; return 1; }
        echo "polkit authority: $out; polkit.service $(bx systemctl is-active polkit.service)"
        [[ "$(bx systemctl is-active polkit.service)" == active ]] || return 1
        out=$(bx journalctl -u polkit.service -o cat --no-pager)
        grep -E 'Loading rules|Finished loading|rror' <<<"$out"
        grep -q "Loading rules from directory ${RULESDIR%/}" <<<"$out" || return 1
        ! grep -qiE 'error.*rules|rules.*error' <<<"$out"
}

t "polkitd is D-Bus activated in the box and loads the rules in $RULESDIR" step_polkit ||
        broken=${broken:-"no polkit in the box"}

# -----------------------------------------------------------------------------------------
# Helpers for runs

HEALTH=
health() { HEALTH=$(bx /usr/bin/python3 /root/sr-client.py health); }

# run PATH BODY-JSON: sets RES (the client's JSON: http, elapsedMs, body)
RES=
run() {
        RES=$(bx /usr/bin/python3 /root/sr-client.py exec "$1" "$2") || { echo "client failed: $RES"; return 1; }
}
r() { jprint "$@" <<<"$RES"; }
rt() { jtest "$@" <<<"$RES"; }
summary() {
        jprint '"HTTP %s status=%s exitCode=%s signal=%s durationMs=%s elapsedMs=%s resources=%s stderr=%r%s" % (d["http"],
                d["body"].get("status"), d["body"].get("exitCode"), d["body"].get("signal"), d["body"].get("durationMs"),
                d.get("elapsedMs"), d["body"].get("resources"), (d["body"].get("stderr") or "")[:300],
                (" error=%r" % d["body"]["error"]) if "error" in d["body"] else "")' <<<"$RES"
}

scope_units() {
        bx systemctl list-units --all --no-legend --plain "${SCOPE_PREFIX}*" | awk 'NF { print $1 }'
}

# scope_gone UNIT [SEC]: wait until UNIT is no longer loaded
scope_gone() {
        local unit=$1 sec=${2:-2} i state
        for ((i = 0; i <= sec * 10; i++)); do
                state=$(bx systemctl show -p LoadState --value "$unit" 2>/dev/null)
                [[ "$state" == not-found ]] && { echo "$unit gone after ~$((i * 100)) ms"; return 0; }
                sleep 0.1
        done
        echo "$unit still loaded ${sec}s after the answer: $(bx systemctl show -p LoadState,ActiveState,SubState "$unit" | tr '\n' ' ')"
        return 1
}

# Processes of the service user other than the daemon itself.
stray_processes() {
        local main
        main=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        bx ps -u "$SERVICE_USER" -o pid=,args= | awk -v m="$main" '$1 != m'
}

RUN=$$-$RANDOM          # execution ids of this run

# -----------------------------------------------------------------------------------------
# Health

step_socket() {
        bx systemctl start sandbox-runner.socket || return 1
        [[ "$(bx systemctl is-active sandbox-runner.socket)" == active ]]
}

step_health() {
        health || { echo "$HEALTH"; return 1; }
        jprint '"HTTP %s sandbox=%s scopes=%s" % (d["http"], d["body"].get("sandbox"), d["body"].get("scopes"))' <<<"$HEALTH"
        jtest 'd["http"] == 200' <<<"$HEALTH" || return 1
        jprint '"probe: sandbox.proc=%s disableUserns=%s" % (d["body"]["sandbox"].get("proc"), d["body"]["sandbox"].get("disableUserns"))' <<<"$HEALTH"
        jtest 'd["body"]["sandbox"]["usable"] is True' <<<"$HEALTH" || { echo "sandbox.usable is not true"; return 1; }
        jtest 'd["body"]["scopes"]["available"] is True' <<<"$HEALTH" || {
                echo "scopes.available is not true; daemon and polkit journal:"
                bx journalctl -u sandbox-runner.service -u polkit.service -o cat --no-pager | tail -n 15
                return 1
        }
}

t "sandbox-runner.socket started" step_socket || broken=${broken:-"socket did not start"}
t "/health: scopes.available true, sandbox.usable true" step_health

# -----------------------------------------------------------------------------------------
# One run in a scope

ID_HI=hi-$RUN
step_echo() {
        run /execute-shell "{\"executionId\": \"$ID_HI\", \"workspaceId\": \"scopes\", \"command\": \"echo hi\", \"timeoutMs\": 20000}" || return 1
        summary
        rt 'd["http"] == 200 and d["body"]["status"] == "exited" and d["body"]["exitCode"] == 0 and d["body"]["stdout"] == "hi\n"' || return 1
        rt 'd["body"]["limits"]["enforcedBy"] == "scope"' || { echo "limits.enforcedBy is not scope"; return 1; }
}

step_echo_resources() {
        [[ -n "$RES" ]] || { echo "no result"; return 1; }
        r '"resources: %s" % d["body"].get("resources")'
        rt '(d["body"]["resources"].get("memoryPeakBytes") or 0) > 0' || { echo "memoryPeakBytes is not > 0"; return 1; }
        if rt 'd["body"]["resources"].get("tasksPeak") is None'; then
                echo "tasksPeak is null (no pids.peak for the scope on this cgroup layout; allowed on v1)"
        fi
        rt '(d["body"]["resources"].get("cpuUsageNsec") or 0) > 0' || {
                echo "cpuUsageNsec is not > 0"
                # systemd (v1/hybrid) creates a scope's cgroup in the cpu hierarchy only and takes
                # cpuacct to be co-mounted with it; where they are separate hierarchies the scope
                # has no cpuacct cgroup, but the unified tree's cpu.stat has usage_usec.
                if bx test -d /sys/fs/cgroup/cpuacct -a ! -L /sys/fs/cgroup/cpuacct -a ! -e /sys/fs/cgroup/cpuacct/cpu.shares; then
                        echo "note: cpu and cpuacct are separate v1 hierarchies here, so the scope has no cpuacct cgroup;" \
                             "usage_usec in /sys/fs/cgroup/unified/<ControlGroup>/cpu.stat has the CPU time"
                fi
                return 1
        }
}

t "echo hi in a scope: exited 0, stdout \"hi\", limits enforced by scope" step_echo
t "its resources: memoryPeakBytes > 0 and cpuUsageNsec > 0" step_echo_resources

ID_SLEEP=sleep-$RUN
SLEEP_MEM=$((96 * MiB))
SLEEP_TASKS=32
step_sleep_scope() {
        local unit=$SCOPE_PREFIX$ID_SLEEP.scope i state props cg rc=0 v
        bx /usr/bin/python3 /root/sr-client.py exec /execute-shell \
                "{\"executionId\": \"$ID_SLEEP\", \"workspaceId\": \"scopes\", \"command\": \"sleep 2\", \"timeoutMs\": 20000,
                  \"limits\": {\"memoryBytes\": $SLEEP_MEM, \"tasks\": $SLEEP_TASKS}}" >"$WORK/sleep.json" 2>&1 &
        BG_PID=$!
        for ((i = 0; i < 30; i++)); do
                state=$(bx systemctl is-active "$unit" 2>/dev/null)
                [[ "$state" == active ]] && break
                sleep 0.05
        done
        bx systemctl status --no-pager --lines=0 "$unit" 2>&1 | grep -vE '^ +(├|└|│)' | head -n 12
        [[ "$state" == active ]] || { echo "$unit is '$state' during the run"; rc=1; }
        props=$(bx systemctl show -p Slice,MemoryMax,TasksMax,ControlGroup "$unit")
        echo "$props" | tr '\n' ' '; echo
        grep -qx "Slice=$SLICE" <<<"$props" || { echo "not in $SLICE"; rc=1; }
        grep -qx "MemoryMax=$SLEEP_MEM" <<<"$props" || { echo "MemoryMax is not $SLEEP_MEM"; rc=1; }
        # the daemon adds 3 to the requested tasks: keeper, bwrap, bwrap's init in the sandbox
        grep -qx "TasksMax=$((SLEEP_TASKS + 3))" <<<"$props" || { echo "TasksMax is not $SLEEP_TASKS + 3"; rc=1; }
        # and the kernel's own limits on the scope's cgroup
        cg=$(sed -n 's/^ControlGroup=//p' <<<"$props")
        if [[ -n "$cg" ]]; then
                if bx test -f /sys/fs/cgroup/memory.max -o -f "/sys/fs/cgroup$cg/memory.max"; then
                        v="$(bx cat "/sys/fs/cgroup$cg/memory.max") $(bx cat "/sys/fs/cgroup$cg/pids.max")"
                else
                        v="$(bx cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes") $(bx cat "/sys/fs/cgroup/pids$cg/pids.max")"
                fi
                echo "kernel: memory limit, pids.max = $v"
                [[ "$v" == "$SLEEP_MEM $((SLEEP_TASKS + 3))" ]] || { echo "kernel limits differ"; rc=1; }
        fi
        wait "$BG_PID"
        BG_PID=
        RES=$(<"$WORK/sleep.json")
        summary
        rt 'd["body"]["status"] == "exited" and d["body"]["exitCode"] == 0' || rc=1
        return $rc
}

step_sleep_gone() {
        scope_gone "$SCOPE_PREFIX$ID_SLEEP.scope" 2 || return 1
        local left
        left=$(scope_units)
        [[ -z "$left" ]] || { echo "scope units still listed: $left"; return 1; }
}

t "during a 'sleep 2' run: ${SCOPE_PREFIX}<id>.scope active in $SLICE, MemoryMax/TasksMax as asked (unit and kernel)" step_sleep_scope
t "after the answer its scope is gone within 2 s (list-units ${SCOPE_PREFIX}* empty)" step_sleep_gone

# -----------------------------------------------------------------------------------------
# Limits

ID_HOG=hog-$RUN
HOG_MEM=$((64 * MiB))
# Allocate and touch 512 MiB in 16 MiB steps.
HOG_CODE='b = []\nfor i in range(32):\n    a = bytearray(16 << 20)\n    for o in range(0, len(a), 4096):\n        a[o] = 1\n    b.append(a)\nprint(\"survived\", len(b) * 16, \"MiB\")\n'
step_memory() {
        run /execute "{\"executionId\": \"$ID_HOG\", \"workspaceId\": \"scopes\", \"language\": \"python\", \"code\": \"$HOG_CODE\",
                       \"timeoutMs\": 30000, \"limits\": {\"memoryBytes\": $HOG_MEM}}" || return 1
        summary
        rt 'd["http"] == 200 and d["body"]["status"] == "memory_limit"' || return 1
        r '"memoryPeakBytes = %.1f MiB (limit %.0f MiB)" % ((d["body"]["resources"].get("memoryPeakBytes") or 0) / 1048576, int(a) / 1048576)' "$HOG_MEM"
        rt '0.75 * int(a) <= (d["body"]["resources"].get("memoryPeakBytes") or 0) <= int(a) + (4 << 20)' "$HOG_MEM" ||
                { echo "memoryPeakBytes is not close to the limit"; return 1; }
}

ID_BOMB=bomb-$RUN
BOMB_TIMEOUT=10000
step_tasks() {
        local left rc=0
        run /execute-shell "{\"executionId\": \"$ID_BOMB\", \"workspaceId\": \"scopes\",
                             \"command\": \"for i in \$(seq 200); do sleep 30 & done; wait\",
                             \"timeoutMs\": $BOMB_TIMEOUT, \"limits\": {\"tasks\": 16}}" || return 1
        summary
        rt 'd["http"] == 200 and d["body"]["status"] == "tasks_limit"' || rc=1
        if rt 'd["body"]["durationMs"] < int(a) / 2' "$BOMB_TIMEOUT"; then
                echo "finished well before the timeout: $(r 'd["body"]["durationMs"]') ms of $BOMB_TIMEOUT"
        else
                echo "finished at the timeout: $(r 'd["body"]["durationMs"]') ms of $BOMB_TIMEOUT"
        fi
        scope_gone "$SCOPE_PREFIX$ID_BOMB.scope" 2 || rc=1
        left=$(bx pgrep -a -x sleep)
        [[ -z "$left" ]] || { echo "processes left: $left"; rc=1; }
        left=$(stray_processes)
        [[ -z "$left" ]] || { echo "processes of $SERVICE_USER left: $left"; rc=1; }
        return $rc
}

ID_TIMEOUT=timeout-$RUN
step_timeout() {
        local left rc=0
        run /execute-shell "{\"executionId\": \"$ID_TIMEOUT\", \"workspaceId\": \"scopes\", \"command\": \"sleep 60\",
                             \"timeoutMs\": 1000}" || return 1
        summary
        rt 'd["http"] == 200 and d["body"]["status"] == "timeout"' || rc=1
        rt 'd["elapsedMs"] < 3000' || { echo "the answer took 3 s or more"; rc=1; }
        scope_gone "$SCOPE_PREFIX$ID_TIMEOUT.scope" 2 || rc=1
        left=$(bx pgrep -a -f 'sleep 60')
        [[ -z "$left" ]] || { echo "processes left: $left"; rc=1; }
        return $rc
}

t "memory hog (512 MiB in 16 MiB steps) with limits.memoryBytes 64 MiB: memory_limit, peak close to 64 MiB" step_memory
t "fork bomb (200 x 'sleep 30 &') with limits.tasks 16: tasks_limit, scope gone, no process left" step_tasks
t "'sleep 60' with timeoutMs 1000: timeout in < 3 s, scope gone, no 'sleep 60' left" step_timeout

# -----------------------------------------------------------------------------------------
# Journal

# journal_has PY-EXPR over L: retry a little, journald may lag behind.
journal_has() {
        local i
        for i in $(seq 1 20); do
                bx journalctl -u sandbox-runner.service -o json --no-pager 2>/dev/null |
                        jlines "$1" >/dev/null && return 0
                sleep 0.25
        done
        return 1
}

step_journal_finished() {
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_EXEC_FINISHED' and e.get('SANDBOX_EXECUTION_ID') == '$ID_HOG'
                      and e.get('SANDBOX_STATUS') == 'memory_limit' and str(e.get('SANDBOX_MEMORY_PEAK', '')).isdigit()]" || {
                echo "no finished entry for $ID_HOG with SANDBOX_STATUS=memory_limit and a numeric SANDBOX_MEMORY_PEAK; have:"
                bx journalctl -u sandbox-runner.service -o json --no-pager MESSAGE_ID=$ID_EXEC_FINISHED |
                        jlines "'\n'.join('%s %s peak=%s' % (e.get('SANDBOX_EXECUTION_ID'), e.get('SANDBOX_STATUS'), e.get('SANDBOX_MEMORY_PEAK')) for e in L)"
                return 1
        }
        bx journalctl -u sandbox-runner.service -o json --no-pager MESSAGE_ID=$ID_EXEC_FINISHED SANDBOX_EXECUTION_ID=$ID_HOG |
                jlines "'MESSAGE=%s SANDBOX_MEMORY_PEAK=%s SANDBOX_SCOPE=%r' % (L[-1].get('MESSAGE'), L[-1].get('SANDBOX_MEMORY_PEAK'), L[-1].get('SANDBOX_SCOPE'))"
}

step_journal_started() {
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_EXEC_STARTED' and e.get('SANDBOX_EXECUTION_ID') == '$ID_HOG'
                      and e.get('SANDBOX_SCOPE') == '$SCOPE_PREFIX$ID_HOG.scope']" || {
                echo "no started entry for $ID_HOG with SANDBOX_SCOPE=$SCOPE_PREFIX$ID_HOG.scope; have:"
                bx journalctl -u sandbox-runner.service -o json --no-pager MESSAGE_ID=$ID_EXEC_STARTED |
                        jlines "'\n'.join('%s scope=%r' % (e.get('SANDBOX_EXECUTION_ID'), e.get('SANDBOX_SCOPE')) for e in L)"
                return 1
        }
        bx journalctl -u sandbox-runner.service -o json --no-pager MESSAGE_ID=$ID_EXEC_STARTED SANDBOX_EXECUTION_ID=$ID_HOG |
                jlines "'MESSAGE=%s' % L[-1].get('MESSAGE')"
}

t "journal: finished entry $ID_EXEC_FINISHED of the hog, SANDBOX_STATUS=memory_limit, numeric SANDBOX_MEMORY_PEAK" step_journal_finished
t "journal: started entry $ID_EXEC_STARTED of the hog with SANDBOX_SCOPE=${SCOPE_PREFIX}<id>.scope" step_journal_started

# -----------------------------------------------------------------------------------------
# Latency with scopes; then without the polkit rule: refused, then unscoped

MED_SCOPED=
MED_UNSCOPED=
# bench PREFIX VAR: BENCH_N runs; sets VAR to the median latency in ms
bench() {
        local out
        out=$(bx /usr/bin/python3 /root/sr-client.py bench "$BENCH_N" "$1") || { echo "client failed: $out"; return 1; }
        jprint '"%d runs: median %.1f ms, min %.1f, max %.1f; limits.enforcedBy=%s; failed: %d %s" % (len(d["latMs"]),
                __import__("statistics").median(d["latMs"]), min(d["latMs"]), max(d["latMs"]), d["enforcedBy"],
                d["nbad"], d["bad"])' <<<"$out"
        printf -v "$2" '%s' "$(jprint '__import__("statistics").median(d["latMs"])' <<<"$out")"
        BENCH_ENFORCED=$(jprint 'd["enforcedBy"]' <<<"$out")
        jtest 'd["nbad"] == 0' <<<"$out" || { BENCH_FAILED=1; return 1; }
}
BENCH_FAILED=

step_bench_scoped() {
        bench "lat-scoped-$RUN" MED_SCOPED || return 1
        [[ "$BENCH_ENFORCED" == scope ]]
}

# restart_until EXPR: restart the daemon until its /health matches EXPR (polkitd reloads its
# rules asynchronously, on inotify)
restart_until() {
        local i
        for i in $(seq 1 20); do
                bx systemctl restart sandbox-runner.service || return 1
                health && jtest "$1" <<<"$HEALTH" && return 0
                sleep 0.25
        done
        echo "after 20 restarts /health is still: $HEALTH"
        return 1
}

step_no_rule() {
        bx mv "$RULEFILE" "/root/$RULE.saved" || return 1
        restart_until 'd["body"]["scopes"]["available"] is False' || return 1
        jprint '"/health scopes: %s" % d["body"]["scopes"]' <<<"$HEALTH"
        jtest '"reason" in d["body"]["scopes"]' <<<"$HEALTH" || { echo "no scopes.reason"; return 1; }
        run /execute-shell "{\"executionId\": \"refused-$RUN\", \"workspaceId\": \"scopes\", \"command\": \"true\"}" || return 1
        r '"HTTP %s %s" % (d["http"], d["body"])'
        rt 'd["http"] == 503 and d["body"].get("error") == "sandbox_unavailable"'
}

step_bench_unscoped() {
        printf '[Execution]\nAllowUnscoped=yes\n' | bx sh -c "cat >'$CONFDIR/runner.conf.d/50-test-unscoped.conf'" || return 1
        restart_until 'd["body"]["scopes"]["available"] is False' || return 1
        jprint '"/health scopes: %s" % d["body"]["scopes"]' <<<"$HEALTH"
        bench "lat-unscoped-$RUN" MED_UNSCOPED || return 1
        [[ "$BENCH_ENFORCED" == rlimit ]] || { echo "limits.enforcedBy=$BENCH_ENFORCED, expected rlimit"; return 1; }
        [[ -z "$(scope_units)" ]] || { echo "scope units appeared: $(scope_units)"; return 1; }
}

t "$BENCH_N x 'true' with scopes: all exited 0" step_bench_scoped
t "without the polkit rule: /health scopes.available false with a reason, executions refused (503 sandbox_unavailable)" step_no_rule
t "and with [Execution] AllowUnscoped=yes: $BENCH_N x 'true' run unscoped (enforcedBy rlimit, no scope unit)" step_bench_unscoped
if [[ -n "$MED_SCOPED" && -n "$MED_UNSCOPED" ]]; then
        note "latency of POST /execute-shell 'true' (median of $BENCH_N): with scope $(printf '%.1f' "$MED_SCOPED") ms," \
             "unscoped $(printf '%.1f' "$MED_UNSCOPED") ms; the scope adds $(awk -v a="$MED_SCOPED" -v b="$MED_UNSCOPED" 'BEGIN { printf "%.1f", a - b }') ms" \
             "${BENCH_FAILED:+(NOT MEANINGFUL: runs failed)}"
fi

# -----------------------------------------------------------------------------------------
# Nothing left in the box

step_box_clean() {
        local left
        left=$(scope_units)
        [[ -z "$left" ]] || { echo "scope units left: $left"; return 1; }
        left=$(stray_processes)
        [[ -z "$left" ]] || { echo "processes of $SERVICE_USER other than the daemon: $left"; return 1; }
        echo "daemon: $(bx systemctl show -p MainPID,ActiveState sandbox-runner.service | tr '\n' ' ')"
        left=$(bx journalctl -b _PID=1 -o cat --no-pager | grep -E "${SCOPE_PREFIX}" | grep -viE '^(Started|Stopped) |Deactivated successfully|Consumed ' | sort | uniq -c | sort -rn | head -n 5)
        [[ -n "$left" ]] && echo "systemd's other messages about our scopes:" && echo "$left"
        left=$(bx journalctl -u sandbox-runner.service -p warning -o cat --no-pager | sort | uniq -c | sort -rn | head -n 8)
        [[ -n "$left" ]] && echo "the daemon's warnings and errors:" && echo "$left"
        left=$(bx journalctl -u polkit.service -o cat --no-pager | grep -iE 'denied|fail|error|not authorized' | sort | uniq -c | head -n 5)
        [[ -n "$left" ]] && echo "polkitd:" && echo "$left"
        return 0
}

t "in the box: no ${SCOPE_PREFIX}* unit left, no process of the service user but the daemon" step_box_clean

# -----------------------------------------------------------------------------------------
# Stop the box; the host must be as it was.

cp "$BOX/cgroups" "$WORK/box-cgroups" 2>/dev/null || : >"$WORK/box-cgroups"
T=$EPOCHREALTIME
box_stop "$BOX"
T_STOP=$(since "$T")
broken=

step_canary() {
        [[ -f "$CANARY" ]] || { echo "canary $CANARY is gone: the box emptied the host's /tmp"; return 1; }
        cmp -s "$CANARY" "$WORK/canary.expected" || { echo "canary changed"; return 1; }
        ! box_pid1 "$BOX" >/dev/null || { echo "box PID 1 still running"; return 1; }
}

step_no_processes() {
        [[ -n "$BOX_PIDNS" ]] || { echo "box never ran"; return 0; }
        local p left=()
        for p in /proc/[0-9]*; do
                [[ "$(readlink "$p/ns/pid" 2>/dev/null)" == "$BOX_PIDNS" ]] && left+=("${p#/proc/}")
        done
        (( ${#left[@]} == 0 )) || { echo "processes of the box still running: ${left[*]}"; ps -o pid,cmd -p "${left[*]}"; return 1; }
}

step_no_mounts() {
        local extra
        extra=$(awk '{ print $5 }' /proc/self/mountinfo | sort | comm -13 "$WORK/mounts.before" -)
        [[ -z "$extra" ]] && return 0
        echo "new mounts on the host since the start: $extra"
        ! grep -qE "^$WORK/|^/(etc|usr|var|run|tmp|var/tmp|dev|dev/shm|proc|sys|sys/fs/cgroup)(/|$)" <<<"$extra"
}

step_no_cgroups() {
        local cg left=()
        while IFS= read -r cg; do
                [[ -n "$cg" && -e "$cg" ]] && left+=("$cg")
        done <"$WORK/box-cgroups"
        (( ${#left[@]} == 0 )) || { echo "cgroups left: ${left[*]}"; return 1; }
        echo "$(wc -l <"$WORK/box-cgroups") box cgroups removed"
}

t "box stopped; host /tmp canary intact" step_canary
t "no process of the box left" step_no_processes
t "no mount left on the host" step_no_mounts
t "no cgroup of the box left on the host" step_no_cgroups

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, stop ${T_STOP}s, total $(since "$T_START")s"
if (( n != PLAN )); then
        echo "# planned $PLAN tests, ran $n"
        failed=$((failed + 1))
fi
(( failed == 0 ))
