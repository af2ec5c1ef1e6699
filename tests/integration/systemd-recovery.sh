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
# polkit rule installed where polkitd reads it, as systemd-scopes.sh checks), starts
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

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}

ID_EXEC_FINISHED=4f17f541cb23403c9e79f39ef5a14aea
SERVICE=sandbox-runner.service
BOX_CLIENT_TIMEOUT=60           # seconds, for each request of the client in the box

tap_plan 22
box_test_init recovery

# -----------------------------------------------------------------------------------------
# Build products and install layout (as systemd-scopes.sh)

step_install() {
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper || return 1
        stage_check_units || return 1
        stage_check_polkit_rule || return 1
        echo "prefix=$PREFIX confdir=$CONFDIR user=$SERVICE_USER polkit rule $RULEFILE"
}

timed T_INSTALL t "meson install into a staging DESTDIR (polkit rule where polkitd reads it)" step_install ||
        broken="install failed"

# -----------------------------------------------------------------------------------------
# Boot and provision

timed T_BOOT t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}

step_provision() {
        box_provision || return 1
        box_install_client || return 1
        bx mkdir -p "$CONFDIR/runner.conf.d" || return 1
        bx ip link set lo up || return 1
        # polkitd D-Bus activated now, so that its rules are loaded before the daemon probes.
        bx busctl --system get-property org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
                org.freedesktop.PolicyKit1.Authority BackendVersion >/dev/null || { echo "no polkit authority"; return 1; }
}

timed T_PROVISION t "project installed in the box (sysusers, tmpfiles, catalog, secrets, polkitd up)" step_provision ||
        broken=${broken:-"provisioning failed"}

# -----------------------------------------------------------------------------------------
# Helpers

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
        left=$(stray_processes)
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

stop_box_and_check_host

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, rounds ${T_ROUNDS}s, stop ${T_STOP}s, total $(since "$T_START")s"
tap_finish
