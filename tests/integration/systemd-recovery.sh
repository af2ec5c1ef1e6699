#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Recovery of managed runs when the service is killed, under a real (private) systemd.
#
#   tests/integration/systemd-recovery.sh [BUILDDIR]       (or MESON_BUILD_ROOT=BUILDDIR)
#
# Installs the meson build into a staging DESTDIR, boots a private systemd with
# tests/helpers/systemd-box.sh (DESIGN.md section 13: the box's /etc, /usr and /var are overlays
# on a tmpfs, so nothing here touches the host), installs the staged tree into the box (the
# polkit rule relocated where polkitd reads it, as systemd-scopes.sh does), starts
# sandbox-runner.socket and checks API.md / docs/api.md section 7.5 with signed requests sent
# from inside the box:
#  - a managed run `sleep 300` runs in its scope;
#  - `systemctl kill -s KILL sandbox-runner.service`;
#  - the next request (GET /shell-executions/{id}) gets the service started again and answers
#    status `interrupted` (with finishedAt);
#  - no sandbox-runner-x-* unit is left, no `sleep 300` process is left in the box;
#  - the journal has the finished entry (MESSAGE_ID 4f17f541cb23403c9e79f39ef5a14aea) with
#    SANDBOX_STATUS=interrupted for the run.
# Twice: as installed (Restart=on-failure: systemd may restart the service by itself before the
# request comes), and with a drop-in Restart=no, where only the socket can start it again.
# At the end: nothing of the box left on the host (canary in /tmp, processes, mounts, cgroups).
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

ID_EXEC_FINISHED=4f17f541cb23403c9e79f39ef5a14aea
SCOPE_PREFIX=sandbox-runner-x-
SERVICE=sandbox-runner.service
RULE=50-sandbox-runner.rules
RULESDIR=/usr/share/polkit-1/rules.d          # polkitd reads only this and /etc/polkit-1/rules.d

PLAN=22
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

WORK=$(mktemp -d /tmp/sr-recovery.XXXXXX)
BOX=$WORK/box
STAGE=$WORK/stage
CANARY=$(mktemp /tmp/sr-recovery-canary.XXXXXX)
echo "sandbox-runner recovery test canary $$" >"$CANARY"
cp "$CANARY" "$WORK/canary.expected"
awk '{ print $5 }' /proc/self/mountinfo | sort >"$WORK/mounts.before"

cleanup() {
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
# (API.md, Authentication).
CLIENT_PY='
import hashlib, hmac, http.client, json, sys, time

TOKEN = open("/root/sr-token").read()
KEY = open("/root/sr-key", "rb").read()

def request(method, path, body=None, signed=False, timeout=60):
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
elif cmd == "post":                     # post PATH BODY-JSON (signed)
    st, doc, dt = request("POST", sys.argv[2], json.loads(sys.argv[3]), signed=True)
elif cmd == "get":                      # get PATH
    st, doc, dt = request("GET", sys.argv[2])
else:
    sys.exit("usage: health | post PATH BODY | get PATH")
print(json.dumps({"http": st, "elapsedMs": round(dt * 1000, 1), "body": doc}))
'

# -----------------------------------------------------------------------------------------
# Build products and install layout (as systemd-scopes.sh)

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
        for f in sandbox-runner.socket "$SERVICE" sandbox-runner.slice; do
                [[ -n "$(cd "$STAGE" && find . -name "$f" -path '*/systemd/system/*')" ]] ||
                        { echo "$f not installed"; return 1; }
        done
        # polkitd reads only /usr/share/polkit-1/rules.d and /etc/polkit-1/rules.d: a build with
        # another prefix gets its rule relocated there, as a packager would.
        f=$(cd "$STAGE" && find . -name "$RULE" -type f | head -n1)
        [[ -n "$f" ]] || { echo "$RULE not installed"; return 1; }
        f=${f#.}
        if [[ "$f" != "$RULESDIR/$RULE" && "$f" != "/etc/polkit-1/rules.d/$RULE" ]]; then
                echo "polkit rule installed as $f, which polkitd does not read: relocated to $RULESDIR/$RULE"
                mkdir -p "$STAGE$RULESDIR" && mv "$STAGE$f" "$STAGE$RULESDIR/$RULE" || return 1
                f=$RULESDIR/$RULE
        fi
        RULEFILE=$f
        echo "prefix=$prefix confdir=$CONFDIR user=$SERVICE_USER polkit rule $RULEFILE"
}

T=$EPOCHREALTIME
t "meson install into a staging DESTDIR (polkit rule where polkitd reads it)" step_install ||
        broken="install failed"
T_INSTALL=$(since "$T")

# -----------------------------------------------------------------------------------------
# Boot and provision

step_boot() {
        box_start "$BOX" >/dev/null || return 1
        box_wait "$BOX" 60 || return 1
        echo "box PID 1 = $(box_pid1 "$BOX"), state: $(bx systemctl is-system-running)"
}

T=$EPOCHREALTIME
t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}
T_BOOT=$(since "$T")
BOX_PIDNS=
if pid1=$(box_pid1 "$BOX"); then
        BOX_PIDNS=$(readlink "/proc/$pid1/ns/pid")
fi

step_provision() {
        box_install "$BOX" "$STAGE" || return 1
        bx systemd-sysusers || return 1
        bx systemd-tmpfiles --create sandbox-runner.conf || return 1
        bx journalctl --update-catalog || return 1
        bx systemctl daemon-reload || return 1
        bx getent passwd "$SERVICE_USER" || { echo "user $SERVICE_USER not created"; return 1; }
        local token key
        token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
        key=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
        printf '%s' "$token" | bx sh -c 'umask 077; cat >/etc/credstore/sandbox-runner.api-token' || return 1
        printf '%s' "$key" | bx sh -c 'umask 077; cat >/etc/credstore/sandbox-runner.signing-key' || return 1
        printf '%s' "$token" | bx sh -c 'umask 077; cat >/root/sr-token' || return 1
        printf '%s' "$key" | bx sh -c 'umask 077; cat >/root/sr-key' || return 1
        printf '%s' "$CLIENT_PY" | bx sh -c 'cat >/root/sr-client.py' || return 1
        bx mkdir -p "$CONFDIR/runner.conf.d" || return 1
        bx ip link set lo up || return 1
        # polkitd D-Bus activated now, so that its rules are loaded before the daemon probes.
        bx busctl --system get-property org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
                org.freedesktop.PolicyKit1.Authority BackendVersion >/dev/null || { echo "no polkit authority"; return 1; }
}

T=$EPOCHREALTIME
t "project installed in the box (sysusers, tmpfiles, catalog, secrets, polkitd up)" step_provision ||
        broken=${broken:-"provisioning failed"}
T_PROVISION=$(since "$T")

# -----------------------------------------------------------------------------------------
# Helpers

RES=
client() { RES=$(bx /usr/bin/python3 /root/sr-client.py "$@") || { echo "client failed: $RES"; return 1; }; }
r() { jprint "$@" <<<"$RES"; }
rt() { jtest "$@" <<<"$RES"; }

scope_units() {
        bx systemctl list-units --all --no-legend --plain "${SCOPE_PREFIX}*" | awk 'NF { print $1 }'
}
svc() { bx systemctl show -p "$1" --value "$SERVICE"; }
sleepers() { bx pgrep -a -f '^sleep 300$'; }

RUN=$$-$RANDOM

step_socket() {
        bx systemctl start sandbox-runner.socket || return 1
        [[ "$(bx systemctl is-active sandbox-runner.socket)" == active ]] || return 1
        client health || return 1
        r '"HTTP %s scopes=%s sandbox.usable=%s" % (d["http"], d["body"].get("scopes"), d["body"].get("sandbox", {}).get("usable"))'
        rt 'd["http"] == 200 and d["body"]["scopes"]["available"] is True and d["body"]["sandbox"]["usable"] is True'
}

t "sandbox-runner.socket started; /health: scopes available, sandbox usable" step_socket ||
        broken=${broken:-"the service does not work"}

# -----------------------------------------------------------------------------------------
# One round: start `sleep 300`, kill the service, ask for the run.

ID=
MAIN_BEFORE=
NRESTARTS_BEFORE=
KILL_AT=

step_start_run() {
        local i state unit
        ID=$1
        unit=$SCOPE_PREFIX$ID.scope
        client post /shell-executions "{\"executionId\": \"$ID\", \"workspaceId\": \"recovery\", \"command\": \"sleep 300\"}" || return 1
        r '"HTTP %s %s" % (d["http"], d["body"])'
        rt 'd["http"] == 202 and d["body"].get("state") == "running"' || return 1
        for ((i = 0; i < 50; i++)); do
                state=$(bx systemctl is-active "$unit" 2>/dev/null)
                [[ "$state" == active && -n "$(sleepers)" ]] && break
                sleep 0.1
        done
        echo "$unit: $state; sleep 300: $(sleepers | tr '\n' ' ')"
        [[ "$state" == active ]] || return 1
        [[ -n "$(sleepers)" ]] || { echo "no 'sleep 300' process"; return 1; }
        MAIN_BEFORE=$(svc MainPID)
        NRESTARTS_BEFORE=$(svc NRestarts)
        echo "$SERVICE MainPID=$MAIN_BEFORE NRestarts=$NRESTARTS_BEFORE"
}

step_kill() {
        local i
        KILL_AT=$EPOCHREALTIME
        bx systemctl kill -s KILL "$SERVICE" || return 1
        # Wait until the killed process is gone (systemd saw it die).
        for ((i = 0; i < 50; i++)); do
                [[ "$(svc MainPID)" != "$MAIN_BEFORE" ]] && break
                sleep 0.1
        done
        echo "after the kill: $(bx systemctl show -p ActiveState,SubState,Result,MainPID,NRestarts "$SERVICE" | tr '\n' ' ')"
        [[ "$(svc MainPID)" != "$MAIN_BEFORE" ]] || { echo "MainPID is still $MAIN_BEFORE"; return 1; }
}

# step_get_interrupted MODE: MODE=socket: the service must be down until the request comes
step_get_interrupted() {
        local mode=$1 before after
        before=$(bx systemctl show -p ActiveState,SubState,MainPID,NRestarts "$SERVICE" | tr '\n' ' ')
        if [[ "$mode" == socket ]]; then
                # Give an automatic restart every chance to happen: it must not.
                sleep 1
                before=$(bx systemctl show -p ActiveState,SubState,MainPID,NRestarts "$SERVICE" | tr '\n' ' ')
                [[ "$(svc ActiveState)" != active ]] || { echo "the service is active again before any request: $before"; return 1; }
                [[ "$(bx systemctl is-active sandbox-runner.socket)" == active ]] ||
                        { echo "sandbox-runner.socket is $(bx systemctl is-active sandbox-runner.socket)"; return 1; }
                # No daemon runs now: the sandbox must have died with the killed one (parent-death
                # signals), not only by the next daemon's recovery.
                [[ -z "$(sleepers)" ]] ||
                        { echo "'sleep 300' outlived the killed daemon: $(sleepers | tr '\n' ' ')"; return 1; }
                echo "while no daemon runs: no 'sleep 300' left (it died with the daemon); scopes: $(scope_units | tr '\n' ' ')"
        fi
        echo "before the request: $before"
        client get "/shell-executions/$ID" || return 1
        after=$(bx systemctl show -p ActiveState,MainPID,NRestarts "$SERVICE" | tr '\n' ' ')
        echo "after: $after (answer $(since "$KILL_AT") s after the kill)"
        r '"HTTP %s in %s ms: status=%s state=%s finishedAt=%s" % (d["http"], d["elapsedMs"], d["body"].get("status"),
           d["body"].get("state"), d["body"].get("finishedAt"))'
        if [[ "$(svc NRestarts)" != "$NRESTARTS_BEFORE" ]]; then
                echo "the service was started again by Restart= (NRestarts $NRESTARTS_BEFORE -> $(svc NRestarts))"
        else
                echo "the service was started again through the socket (NRestarts unchanged)"
        fi
        rt 'd["http"] == 200 and d["body"].get("status") == "interrupted" and d["body"].get("state") == "interrupted"' || return 1
        rt 'isinstance(d["body"].get("finishedAt"), int)' || { echo "no finishedAt"; return 1; }
        [[ "$(svc ActiveState)" == active ]] || { echo "$SERVICE is $(svc ActiveState) after answering"; return 1; }
}

step_no_scope() {
        local i left
        for ((i = 0; i < 30; i++)); do
                left=$(scope_units)
                [[ -z "$left" ]] && break
                sleep 0.1
        done
        bx systemctl list-units --all --no-legend --plain "${SCOPE_PREFIX}*"
        [[ -z "$left" ]] || { echo "still listed 3 s after the answer: $left"; return 1; }
        echo "list-units '${SCOPE_PREFIX}*' is empty"
}

step_no_sleep() {
        local left
        left=$(sleepers)
        [[ -z "$left" ]] || { echo "'sleep 300' still running in the box: $left"; bx ps -eo pid,ppid,user,cgroup:60,args | grep -E 'sleep 300|bwrap' | grep -v grep; return 1; }
        left=$(bx ps -u "$SERVICE_USER" -o pid=,args= | awk -v m="$(svc MainPID)" '$1 != m')
        [[ -z "$left" ]] || { echo "processes of $SERVICE_USER other than the daemon: $left"; return 1; }
        echo "no 'sleep 300', no process of $SERVICE_USER but the daemon ($(svc MainPID))"
}

step_journal() {
        local i
        for i in $(seq 1 20); do
                bx journalctl -o json --no-pager MESSAGE_ID=$ID_EXEC_FINISHED SANDBOX_EXECUTION_ID="$ID" 2>/dev/null |
                        jlines "[e for e in L if e.get('SANDBOX_STATUS') == 'interrupted']" >/dev/null && break
                sleep 0.25
        done
        bx journalctl -o json --no-pager MESSAGE_ID=$ID_EXEC_FINISHED SANDBOX_EXECUTION_ID="$ID" |
                jlines "'\n'.join('_SYSTEMD_UNIT=%s SANDBOX_STATUS=%s SANDBOX_SCOPE=%s MESSAGE=%s' % (e.get('_SYSTEMD_UNIT'),
                        e.get('SANDBOX_STATUS'), e.get('SANDBOX_SCOPE'), e.get('MESSAGE')) for e in L)"
        bx journalctl -o json --no-pager MESSAGE_ID=$ID_EXEC_FINISHED SANDBOX_EXECUTION_ID="$ID" |
                jlines "[e for e in L if e.get('SANDBOX_STATUS') == 'interrupted']" >/dev/null ||
                { echo "no $ID_EXEC_FINISHED entry with SANDBOX_STATUS=interrupted for $ID"; return 1; }
}

round() {
        local label=$1 id=$2 mode=$3 saved=$broken
        t "$label: managed 'sleep 300' (signed, from inside the box) runs in ${SCOPE_PREFIX}$id.scope" step_start_run "$id" ||
                broken=${broken:-"the run did not start"}
        t "$label: systemctl kill -s KILL $SERVICE" step_kill || broken=${broken:-"the kill failed"}
        t "$label: GET /shell-executions/$id starts the service again ($mode) and answers 'interrupted'" \
                step_get_interrupted "$mode"
        t "$label: systemctl list-units '${SCOPE_PREFIX}*' is empty" step_no_scope
        t "$label: no 'sleep 300' left in the box" step_no_sleep
        t "$label: journal: $ID_EXEC_FINISHED with SANDBOX_STATUS=interrupted for $id" step_journal
        broken=$saved
}

T=$EPOCHREALTIME
round "as installed" "rec1-$RUN" "Restart= or socket"

step_restart_no() {
        printf '[Service]\nRestart=no\n' |
                bx sh -c "mkdir -p /etc/systemd/system/$SERVICE.d && cat >/etc/systemd/system/$SERVICE.d/50-test-restart-no.conf" || return 1
        bx systemctl daemon-reload || return 1
        bx systemctl restart "$SERVICE" || return 1
        bx systemctl show -p Restart,ActiveState,MainPID "$SERVICE" | tr '\n' ' '; echo
        [[ "$(svc Restart)" == no ]]
}

t "drop-in Restart=no (only the socket can bring the service back)" step_restart_no ||
        broken=${broken:-"drop-in failed"}
round "Restart=no" "rec2-$RUN" "socket"
T_ROUNDS=$(since "$T")

step_box_warnings() {
        local left
        left=$(bx journalctl -u "$SERVICE" -p warning -o cat --no-pager | sort | uniq -c | sort -rn | head -n 8)
        [[ -n "$left" ]] && echo "the daemon's warnings and errors:" && echo "$left"
        return 0
}
t "(the daemon's warnings, for the record)" step_box_warnings

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

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, rounds ${T_ROUNDS}s, stop ${T_STOP}s, total $(since "$T_START")s"
if (( n != PLAN )); then
        echo "# planned $PLAN tests, ran $n"
        failed=$((failed + 1))
fi
(( failed == 0 ))
