#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The Debian package (tests/packaging/debian/) under a real (private) systemd, as an operator
# gets it.
#
#   tests/integration/systemd-package.sh [BUILDDIR]     (or MESON_BUILD_ROOT=BUILDDIR)
#
# Builds two binary packages from copies of this tree with tests/packaging/build-deb.sh
# (dpkg-buildpackage -us -uc -b, then lintian: no error, no warning): the "previous build",
# version $PREV_VERSION (the same source built as an earlier version: its binaries differ, in
# their version string, from the current one's), and the current one. Boots a private systemd
# (tests/helpers/systemd-box.sh, DESIGN.md section 13: the box's /etc, /usr and /var are
# overlays, so apt-get and dpkg in the box never touch the host) and there:
#   - apt-get install ./<previous>.deb; the secrets as README says; the first request activates
#     the service (the time from apt-get to the first answer is printed); an execution runs in a
#     transient scope with its limits; journalctl -u sandbox-runner -x shows the catalog's text;
#     sandbox-runnerd --check;
#   - the upgrade to the current package with a run in flight that uses the egress gateway: the
#     postinst reloads the service, the old daemon retires (the run finishes, exit 0, both of
#     its fetches answered by the old gateway), a request made meanwhile waits and is answered
#     by the new daemon, whose gateway instance is of the new build (the old one stopped);
#   - apt-get remove: no unit, file of the package (but its conffiles), scope or process left,
#     the state kept; apt-get purge: state, runtime directory and conffiles gone, the operator's
#     credentials kept;
# and at the end that the host is as it was. Output is TAP. Needs root (exit 77 otherwise).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
SRCROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

ID_STARTED=156863b03a4e4e98ad9eddd77533f056
ID_RETIRING=b21b95ae28ce465fb4c9960b9e9a20aa
PREV_VERSION=${SR_PREV_VERSION:-0.1.0~prev-1}
DAEMON=/usr/libexec/sandbox-runnerd
GATEWAY=/usr/libexec/sandbox-runner-egress
SERVICE_USER=sandbox-runner
CONFDIR=/etc/sandbox-runner
RUN=$$-$RANDOM

tap_plan 16
box_test_init package

# -----------------------------------------------------------------------------------------
# The packages

# What build-deb.sh printed of lintian (its tags, indented; "(nothing)" when there are none).
lintian_lines() { local f; for f in "$@"; do sed -n "/^lintian:$/,/^deb: /{/^  /p}" "$f"; done; }

# What a build could leave behind: files in the tree (git's view, ignored ones too, but the build
# directories) and dpkg-buildpackage's results in the tree's parent directory.
tree_state() {
        git -C "$SRCROOT" status --porcelain --ignored --untracked-files=all -- . ':!build*'
        find "$SRCROOT/.." -maxdepth 1 -name 'sandbox-runner_*' 2>/dev/null
}

step_build() {
        local out=$WORK/debs
        mkdir -p "$out/prev" "$out/cur"
        tree_state >"$WORK/tree-before"
        timed T_BUILD_PREV bash "$SRCROOT/tests/packaging/build-deb.sh" "$SRCROOT" "$out/prev" "$PREV_VERSION" \
                >"$WORK/build-prev.log" 2>&1 || { tail -n 30 "$WORK/build-prev.log"; return 1; }
        timed T_BUILD_CUR bash "$SRCROOT/tests/packaging/build-deb.sh" "$SRCROOT" "$out/cur" \
                >"$WORK/build-cur.log" 2>&1 || { tail -n 30 "$WORK/build-cur.log"; return 1; }
        tree_state | cmp -s "$WORK/tree-before" - || { echo "the builds changed the source tree or its parent:"; tree_state; return 1; }
        # Debian's flags (-O2, -D_FORTIFY_SOURCE=2, ...) see what the test builds do not: no warning.
        if grep -E ': warning: ' "$out/cur/build-deb.log" | head -n 10 | grep .; then
                echo "the compiler warned with Debian's build flags (above)"
                return 1
        fi
        PREV_DEB=$(ls "$out"/prev/sandbox-runner_*.deb 2>/dev/null | head -n1)
        CUR_DEB=$(ls "$out"/cur/sandbox-runner_*.deb 2>/dev/null | head -n1)
        [[ -f "$PREV_DEB" && -f "$CUR_DEB" ]] || { echo "no .deb: '$PREV_DEB' '$CUR_DEB'"; return 1; }
        PREV_PKGVER=$(dpkg-deb -f "$PREV_DEB" Version)
        CUR_PKGVER=$(dpkg-deb -f "$CUR_DEB" Version)
        [[ "$PREV_PKGVER" == "$PREV_VERSION" ]] || { echo "previous package is $PREV_PKGVER, not $PREV_VERSION"; return 1; }
        dpkg --compare-versions "$CUR_PKGVER" gt "$PREV_PKGVER" || { echo "$CUR_PKGVER is not newer than $PREV_PKGVER"; return 1; }
        echo "built $(basename "$PREV_DEB") in $T_BUILD_PREV s and $(basename "$CUR_DEB") in $T_BUILD_CUR s"
        echo "$(basename "$CUR_DEB"): $(stat -c %s "$CUR_DEB") bytes, Installed-Size $(dpkg-deb -f "$CUR_DEB" Installed-Size) KiB"
        echo "lintian on $(basename "$CUR_DEB") (build-deb.sh fails on any error or warning):"
        lintian_lines "$WORK/build-cur.log"
        [[ -n "$(lintian_lines "$WORK/build-cur.log")" ]] || { echo "no lintian output in the build log"; return 1; }
        ! lintian_lines "$WORK/build-cur.log" "$WORK/build-prev.log" | grep -qE '^  [EW]: ' || { echo "lintian: errors or warnings"; return 1; }
}

t "dpkg-buildpackage -us -uc -b of the previous build ($PREV_VERSION) and of the current one from copies of the tree (left as it was), no compiler warning; lintian: no error, no warning" \
        step_build || broken="the packages were not built"

step_check_deb() {
        bash "$SRCROOT/tests/packaging/check-deb.sh" "$CUR_DEB" >"$WORK/check-deb.tap" 2>&1
        local rc=$?
        grep -E '^(not ok|# )' "$WORK/check-deb.tap" | head -n 40
        echo "$(grep -c '^ok' "$WORK/check-deb.tap") checks passed, $(grep -c '^not ok' "$WORK/check-deb.tap") failed"
        (( rc == 0 )) && ! grep -q '^not ok' "$WORK/check-deb.tap"
}

t "the current package's contents and maintainer scripts (tests/packaging/check-deb.sh)" step_check_deb

# -----------------------------------------------------------------------------------------
# Boot, and what an operator has before installing

timed T_BOOT t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}

# A test host on the box's loopback for the network policy: allowed.test -> 127.0.0.2:80.
step_prepare() {
        bx sh -c 'mkdir -p /root/www && echo ok >/root/www/ok' || return 1
        bx ip link set lo up || return 1
        printf '127.0.0.2 allowed.test\n' | bx sh -c 'cat >>/etc/hosts' || return 1
        bx systemd-run --quiet --unit=sr-test-host --property=Type=exec \
                /usr/bin/python3 -m http.server --bind 127.0.0.2 --directory /root/www 80 || return 1
        # The network policy, as an operator writes it: a drop-in of the configuration.
        printf '[Network]\nMode=allowlist\nAllow=allowed.test\nMirrors=127.0.0.0/8\n' |
                bx sh -c "mkdir -p '$CONFDIR/runner.conf.d' && cat >'$CONFDIR/runner.conf.d/50-test-egress.conf'" || return 1
        # man-db's trigger rebuilds its whole index on every install (seconds): off in the box.
        bx rm -f /var/lib/man-db/auto-update
        # A container image's policy-rc.d (exit 101: start nothing) would keep the postinst from
        # starting the socket, as it should in a container; the box is a booted host (its /usr is
        # an overlay: the host's file stays).
        if bx test -e /usr/sbin/policy-rc.d; then
                echo "removed the host's /usr/sbin/policy-rc.d in the box: $(bx cat /usr/sbin/policy-rc.d | grep -v '^#' | tr '\n' ' ')"
                bx rm -f /usr/sbin/policy-rc.d || return 1
        fi
        bx dpkg-query -W -f='${Status}\n' sandbox-runner 2>/dev/null | grep -q 'install ok' &&
                { echo "sandbox-runner is installed on the host already: the test needs a host without it"; return 1; }
        bx sh -c 'cat >/root/'"$(basename "$PREV_DEB")" <"$PREV_DEB" || return 1
        bx sh -c 'cat >/root/'"$(basename "$CUR_DEB")" <"$CUR_DEB" || return 1
        bx /usr/bin/python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.2/ok", timeout=5)' ||
                { echo "the test host does not answer"; return 1; }
}

t "the box: a test host allowed.test on its loopback, an allowlist drop-in in $CONFDIR/runner.conf.d" \
        step_prepare || broken=${broken:-"the box could not be prepared"}

# -----------------------------------------------------------------------------------------
# Install the previous build, first answer

apt_install() {
        bx env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >"$WORK/apt.log" 2>&1 ||
                { tail -n 25 "$WORK/apt.log"; return 1; }
}

unit_state() { bx systemctl show -p ActiveState,SubState --value "$1" | paste -sd/; }

step_install_prev() {
        local t0=$EPOCHREALTIME s i
        apt_install "/root/$(basename "$PREV_DEB")" || return 1
        T_APT=$(since "$t0")
        # The secrets, as README says; /etc/credstore comes from the package's tmpfiles.d.
        bx test -d /etc/credstore || { echo "/etc/credstore was not created"; return 1; }
        box_secrets || return 1
        box_install_client || return 1
        for ((i = 0; i < 100; i++)); do
                health 2>/dev/null && jtest 'd["http"] == 200' <<<"$HEALTH" && break
                sleep 0.1
        done
        T_FIRST=$(since "$t0")
        jtest 'd["http"] == 200' <<<"$HEALTH" || {
                echo "no answer from 127.0.0.1:4311: $HEALTH"
                bx systemctl status --no-pager sandbox-runner.socket sandbox-runner.service 2>&1 | head -n 20
                tail -n 25 "$WORK/apt.log"
                return 1
        }
        echo "apt-get install took $T_APT s; from its start to the first answered request: $T_FIRST s"
        jprint '"version %s, status %s, scopes %s" % (d["body"]["version"], d["body"]["status"], d["body"]["scopes"])' <<<"$HEALTH"
        jtest 'd["body"]["version"] == a' "${PREV_VERSION%-*}" <<<"$HEALTH" || { echo "not the previous build"; return 1; }
        bx getent passwd "$SERVICE_USER" >/dev/null || { echo "no user $SERVICE_USER"; return 1; }
        [[ "$(bx systemctl is-enabled sandbox-runner.socket)" == enabled ]] || { echo "the socket is not enabled"; return 1; }
        # What README tells the operator to run: a no-op, the postinst started it.
        bx systemctl start sandbox-runner.socket || return 1
        s=$(unit_state sandbox-runner.service)
        [[ "$s" == active/running ]] || { echo "sandbox-runner.service is $s after the first request"; return 1; }
        bx journalctl -u sandbox-runner.service -o json --no-pager | jlines "[e for e in L if e.get('MESSAGE_ID') == '$ID_STARTED']" >/dev/null ||
                { echo "no STARTED entry in the journal"; return 1; }
}

t "apt-get install ./$(basename "${PREV_DEB:-previous.deb}"), secrets as README says: the socket listens, the first request activates the service" \
        step_install_prev || broken=${broken:-"the package did not install"}

# A managed run; poll until its state is final. RUNDOC = the final document.
wait_run() {
        local id=$1 i
        for ((i = 0; i < 200; i++)); do
                client get "/shell-executions/$id" || return 1
                rt 'd["body"].get("state") not in (None, "running", "queued")' && { RUNDOC=$RES; return 0; }
                sleep 0.1
        done
        echo "run $id did not end: $RES"
        return 1
}

step_scope() {
        local id=scope-$RUN scope i s
        client post /shell-executions "{\"executionId\": \"$id\", \"workspaceId\": \"pkg\", \"command\": \"sleep 3\",
                \"limits\": {\"memoryBytes\": 268435456, \"tasks\": 48}}" || return 1
        rt 'd["http"] == 202' || { r 'd'; return 1; }
        scope=${SCOPE_PREFIX}$id.scope
        for ((i = 0; i < 50; i++)); do
                s="$(bx systemctl show -p ActiveState --value "$scope") $(bx systemctl show -p MemoryMax --value "$scope")"
                s+=" $(bx systemctl show -p TasksMax --value "$scope")"
                [[ "$s" == active* ]] && break
                sleep 0.1
        done
        echo "$scope: $s"
        # TasksMax: the run's 48 and 3 of the runner's own (keeper, bwrap, bwrap's init; docs/architecture.md)
        [[ "$s" == "active 268435456 51" ]] || { echo "expected the scope active with MemoryMax=268435456 TasksMax=51"; return 1; }
        wait_run "$id" || return 1
        jprint '"status %s, limits %s" % (d["body"]["status"], d["body"]["limits"])' <<<"$RUNDOC"
        jtest 'd["body"]["status"] == "exited" and d["body"]["limits"]["enforcedBy"] == "scope"' <<<"$RUNDOC"
}

t "an execution runs in its transient scope with its limits (MemoryMax, TasksMax), enforcedBy scope" step_scope

step_catalog() {
        local out
        out=$(bx journalctl -u sandbox-runner -x --no-pager -o short 2>&1)
        grep -F 'has read its configuration and secrets' <<<"$out" | head -n 2
        grep -qF 'has read its configuration and secrets' <<<"$out" || { echo "no catalog text:"; tail -n 8 <<<"$out"; return 1; }
}

t "journalctl -u sandbox-runner -x shows the catalog's text (installed by the package, indexed by its trigger)" step_catalog

step_check() {
        local out rc
        out=$(bx "$DAEMON" --check 2>&1)
        rc=$?
        printf '%s\n' "$out"
        (( rc == 0 )) || { echo "sandbox-runnerd --check exited $rc"; return 1; }
}

t "sandbox-runnerd --check in the box, as root: no item fails" step_check

# -----------------------------------------------------------------------------------------
# Upgrade with a run in flight

FETCH='import sys, time, urllib.request
def get(path):
    return urllib.request.urlopen("http://allowed.test/" + path, timeout=20).status
print(get("ok"), flush=True)
time.sleep(float(sys.argv[1]))
print(get("ok"), flush=True)'

step_upgrade() {
        local id=inflight-$RUN i old_pid old_inst t0 logs
        health || return 1
        OLD_INST=$(jprint 'd["body"]["sandboxNetwork"].get("instance")' <<<"$HEALTH")
        old_pid=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        OLD_PID=$old_pid
        # The run in flight: a fetch through the gateway, 15 s of sleep, another fetch.
        client post /shell-executions "$("$PY" -c 'import json, sys
print(json.dumps({"executionId": sys.argv[1], "workspaceId": "pkg", "command": "python3 -c \"$F\" 15",
                  "env": {"F": sys.argv[2]}, "timeoutMs": 60000}))' "$id" "$FETCH")" || return 1
        rt 'd["http"] == 202' || { r 'd'; return 1; }
        for ((i = 0; i < 100; i++)); do
                # Raw bytes: the client gives them as "_raw" unless they parse as JSON ("200\n" does).
                logs=$(box_client get "/shell-executions/$id/logs?stream=stdout" |
                        jprint 'd["body"].get("_raw", "") if isinstance(d["body"], dict) else d["body"]')
                [[ "$logs" == 200* ]] && break
                sleep 0.1
        done
        [[ "$logs" == 200* ]] || { echo "the run's first fetch did not succeed: '$logs'"; client get "/shell-executions/$id"; r 'd'; return 1; }
        OLD_GW_PID=$(bx systemctl show -p MainPID --value "sandbox-runner-egress@$OLD_INST.service")
        echo "before: daemon pid $old_pid ($PREV_PKGVER), gateway instance $OLD_INST (pid $OLD_GW_PID), run $id in flight"

        t0=$EPOCHREALTIME
        apt_install "/root/$(basename "$CUR_DEB")" || return 1
        T_UPGRADE=$(since "$t0")
        echo "apt-get install of $CUR_PKGVER took $T_UPGRADE s"
        [[ "$(bx dpkg-query -W -f='${Version}' sandbox-runner)" == "$CUR_PKGVER" ]] || { echo "not upgraded"; return 1; }
        # The old daemon retires but lives on while its run does.
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_RETIRING' and e.get('_PID') == '$old_pid']" ||
                { echo "no RETIRING entry of pid $old_pid"; return 1; }
        [[ "$(bx systemctl show -p MainPID --value sandbox-runner.service)" == "$old_pid" ]] ||
                { echo "the old daemon is gone before its run ended (run still going: $(since "$t0") s after the upgrade began)"; return 1; }
        # A request now waits in the socket's backlog for the new daemon.
        t0=$EPOCHREALTIME
        NEW_REQ=$(box_client post /execute-shell "$("$PY" -c 'import json, sys
print(json.dumps({"executionId": sys.argv[1], "workspaceId": "pkg-2", "command": "python3 -c \"$F\" 0",
                  "env": {"F": sys.argv[2]}}))' "after-$RUN" "$FETCH")") || { echo "the request made during the upgrade failed: $NEW_REQ"; return 1; }
        T_WAITED=$(since "$t0")
        jprint '"request made during the upgrade: HTTP %s after %s s, status %s, stdout %r" % (d["http"], a, d["body"].get("status"), d["body"].get("stdout"))' "$T_WAITED" <<<"$NEW_REQ"
        jtest 'd["http"] == 200 and d["body"]["status"] == "exited" and d["body"]["stdout"] == "200\n200\n"' <<<"$NEW_REQ" ||
                { echo "the request made during the upgrade did not run (or its fetches failed)"; return 1; }
        wait_run "$id" || return 1
        jprint '"run in flight: status %s, exit %s, stdout %r" % (d["body"]["status"], d["body"]["exitCode"], d["body"]["stdout"])' <<<"$RUNDOC"
        jtest 'd["body"]["status"] == "exited" and d["body"]["exitCode"] == 0 and d["body"]["stdout"] == "200\n200\n"' <<<"$RUNDOC" ||
                { echo "the run in flight did not finish well"; return 1; }
}

t "upgrade to the current package with a run in flight: the old daemon retires, the run finishes, a request made meanwhile is answered by the new one" \
        step_upgrade

step_after_upgrade() {
        local pid exe inst gw gwexe s rc=0
        health || return 1
        pid=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        exe=$(bx readlink "/proc/$pid/exe")
        inst=$(jprint 'd["body"]["sandboxNetwork"].get("instance")' <<<"$HEALTH")
        echo "after: daemon pid $pid ($exe), version $(jprint 'd["body"]["version"]' <<<"$HEALTH"), gateway instance $inst"
        [[ "$pid" != "$OLD_PID" && "$exe" == "$DAEMON" ]] || { echo "not a new daemon from the new file"; rc=1; }
        jtest 'd["body"]["version"] == a' "${CUR_PKGVER%-*}" <<<"$HEALTH" || { echo "not the new version"; rc=1; }
        [[ "${inst%-*}" == "${OLD_INST%-*}" && "${inst##*-}" != "${OLD_INST##*-}" ]] ||
                { echo "expected the same revision with another build: $OLD_INST -> $inst"; rc=1; }
        gw=$(bx systemctl show -p MainPID --value "sandbox-runner-egress@$inst.service")
        gwexe=$(bx readlink "/proc/$gw/exe" 2>/dev/null)
        echo "new gateway sandbox-runner-egress@$inst.service: pid $gw ($gwexe)"
        [[ "$gw" != 0 && "$gwexe" == "$GATEWAY" ]] || { echo "the new runs' gateway is not the new binary"; rc=1; }
        s=$(bx systemctl show -p ActiveState --value "sandbox-runner-egress@$OLD_INST.socket")
        echo "old instance sandbox-runner-egress@$OLD_INST.socket: ${s:-gone}"
        [[ "$s" != active ]] || { echo "the old build's gateway instance is still active"; rc=1; }
        bx test -e "/proc/$OLD_GW_PID" && [[ "$(bx readlink "/proc/$OLD_GW_PID/exe")" == *sandbox-runner-egress* ]] &&
                { echo "the old gateway process $OLD_GW_PID still runs"; rc=1; }
        return $rc
}

t "after the upgrade: a new daemon of the new version; new runs use a gateway instance of the new build, the old one stopped" \
        step_after_upgrade

# -----------------------------------------------------------------------------------------
# Remove, purge

step_remove() {
        local f left=() units procs
        bx dpkg-query -L sandbox-runner >"$WORK/files" || return 1
        bx sh -c 'dpkg-query -W -f="\${Conffiles}\n" sandbox-runner' | awk 'NF { print $1 }' >"$WORK/conffiles"
        bx env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q sandbox-runner >"$WORK/apt.log" 2>&1 ||
                { tail -n 20 "$WORK/apt.log"; return 1; }
        while IFS= read -r f; do
                grep -qxF "$f" "$WORK/conffiles" && continue
                bx sh -c '[ ! -d "$1" ] && { [ -f "$1" ] || [ -L "$1" ]; }' sh "$f" && left+=("$f")
        done <"$WORK/files"
        (( ${#left[@]} == 0 )) || { echo "files of the package left: ${left[*]}"; return 1; }
        # Debian keeps a removed package's enablement (the sockets.target.wants link goes with
        # purge): a "not-found" reference may remain, no loaded unit.
        units=$(bx systemctl list-units --all --plain --no-legend 'sandbox-runner*' | awk '$2 != "not-found"'
                bx systemctl list-unit-files --plain --no-legend 'sandbox-runner*')
        [[ -z "$units" ]] || { echo "units left: $units"; return 1; }
        procs=$(bx sh -c 'for p in /proc/[0-9]*; do e=$(readlink "$p/exe" 2>/dev/null) || continue
                case "$e" in */sandbox-runner*) echo "${p#/proc/} $e";; esac; done; ps -u '"$SERVICE_USER"' -o pid=,args= 2>/dev/null')
        [[ -z "$procs" ]] || { echo "processes left: $procs"; return 1; }
        bx journalctl --list-catalog "$ID_STARTED" 2>/dev/null | grep -q . && { echo "the catalog still has the runner's entries"; return 1; }
        bx test -d /var/lib/sandbox-runner || { echo "the state directory went with remove (only purge may remove it)"; return 1; }
        echo "$(wc -l <"$WORK/files") paths of the package gone but $(wc -l <"$WORK/conffiles") conffile(s); state kept: $(bx ls /var/lib/sandbox-runner | tr '\n' ' ')"
}

t "apt-get remove: no unit, file (but conffiles), catalog entry or process of the runner left; the state kept" step_remove

step_purge() {
        local f left=()
        bx env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q sandbox-runner >"$WORK/apt.log" 2>&1 ||
                { tail -n 20 "$WORK/apt.log"; return 1; }
        for f in /var/lib/sandbox-runner /run/sandbox-runner $(cat "$WORK/conffiles"); do
                bx test -e "$f" && left+=("$f")
        done
        (( ${#left[@]} == 0 )) || { echo "left after purge: ${left[*]}"; return 1; }
        left=($(bx find /etc/systemd/system -name 'sandbox-runner*'))
        (( ${#left[@]} == 0 )) || { echo "unit links left after purge: ${left[*]}"; return 1; }
        bx systemctl daemon-reload || return 1
        f=$(bx systemctl list-units --all --plain --no-legend 'sandbox-runner*')
        [[ -z "$f" ]] || { echo "units still known after purge: $f"; return 1; }
        f=$(bx dpkg-query -W -f='${Status}' sandbox-runner 2>/dev/null)
        [[ -z "$f" || "$f" == *not-installed ]] || { echo "dpkg says: $f"; return 1; }
        bx test -s /etc/credstore/sandbox-runner.api-token || { echo "purge removed the operator's credentials"; return 1; }
        echo "gone: /var/lib/sandbox-runner, /run/sandbox-runner, conffiles; kept: /etc/credstore/sandbox-runner.*"
}

t "apt-get purge: state, runtime directory, conffiles and unit links gone, no unit known; the operator's credentials kept" step_purge

stop_box_and_check_host

note "timings: build previous ${T_BUILD_PREV:-?} s, current ${T_BUILD_CUR:-?} s; boot ${T_BOOT:-?} s;" \
        "apt-get install ${T_APT:-?} s, to first answer ${T_FIRST:-?} s; upgrade ${T_UPGRADE:-?} s;" \
        "the request made during the upgrade waited ${T_WAITED:-?} s; box stop ${T_STOP:-?} s"
tap_finish
