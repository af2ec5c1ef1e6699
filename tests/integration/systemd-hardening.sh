#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Can the daemon launch Bubblewrap sandboxes from inside its own unit's hardening?
#
#   tests/integration/systemd-hardening.sh [BUILDDIR]      (or MESON_BUILD_ROOT=BUILDDIR)
#
# Boots a private systemd (tests/helpers/systemd-box.sh), installs the build's units, and runs
# a probe script in a copy of the installed sandbox-runner.service whose ExecStart is replaced
# (Type=oneshot, no socket, no watchdog) and everything else kept: the same user, hardening,
# credentials and directories.  The probe runs bwrap the way DESIGN.md section 4 does, and
# this test checks what the daemon relies on:
#  - the sandbox shape with `--ro-bind /proc /proc` works (the documented fallback);
#  - a workspace under the StateDirectory is writable from inside;
#  - the sandbox has only a loopback interface;
#  - sandbox code cannot reach the daemon's credentials, not even through /proc/<pid>/root
#    or /proc/<pid>/environ of the service process;
# and reports as TAP comments what the daemon's start-up probes will find here: a fresh
# procfs (`--proc /proc`) and `--disable-userns`.
#
# TAP; needs root (exit 77 otherwise: the only skip).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}

tap_plan 9
box_test_init hardening

# The probe, run as ExecStart= of the copied unit. Writes KEY=ok|fail(N) OUTPUT lines.
# shellcheck disable=SC2016  # expanded by the probe's shell, not here
PROBE='#!/bin/sh
out="$STATE_DIRECTORY/probe.out"
exec >"$out.tmp" 2>&1
set -- bwrap --die-with-parent --new-session --unshare-all --unshare-user --cap-drop ALL \
        --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
        --symlink usr/bin /bin --symlink usr/sbin /sbin --dev /dev --tmpfs /tmp
r() {
        name=$1; shift
        o=$("$@" 2>&1); rc=$?
        o=$(printf "%s" "$o" | tr "\n" " ")
        if [ $rc -eq 0 ]; then echo "$name=ok $o"; else echo "$name=fail($rc) $o"; fi
}
echo "self=uid:$(id -u) creds:${CREDENTIALS_DIRECTORY:-none} token:$(test -r "$CREDENTIALS_DIRECTORY/api-token" && echo readable || echo unreadable)"
r robind "$@" --ro-bind /proc /proc -- /bin/true
r freshproc "$@" --proc /proc -- /bin/true
r disableuserns_fresh "$@" --disable-userns --proc /proc -- /bin/true
r disableuserns_robind "$@" --disable-userns --ro-bind /proc /proc -- /bin/true
r nested_userns "$@" --ro-bind /proc /proc -- /usr/bin/unshare --user /bin/true
mkdir -p "$STATE_DIRECTORY/ws"
r workspace "$@" --ro-bind /proc /proc --bind "$STATE_DIRECTORY/ws" /workspace --chdir /workspace \
        --clearenv --setenv PATH /usr/bin:/bin -- /bin/sh -c "echo hi >f && cat f && id -u"
r workspace_host test "$(cat "$STATE_DIRECTORY/ws/f" 2>/dev/null)" = hi
r net "$@" --ro-bind /proc /proc -- /bin/sh -c "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d \" \" | tr \"\\n\" \",\""
r env "$@" --ro-bind /proc /proc --clearenv -- /usr/bin/env
r creds_dir "$@" --ro-bind /proc /proc -- /bin/cat "$CREDENTIALS_DIRECTORY/api-token"
r creds_via_proc_root "$@" --ro-bind /proc /proc -- /bin/cat "/proc/$$/root$CREDENTIALS_DIRECTORY/api-token"
r creds_via_proc_environ "$@" --ro-bind /proc /proc -- /bin/cat "/proc/$$/environ"
mv "$out.tmp" "$out"
'

step_setup() {
        local probe
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper || return 1
        UNIT=$(stage_path sandbox-runner.service -path '*/systemd/system/*') || { echo "no sandbox-runner.service installed"; return 1; }
        command -v bwrap >/dev/null || { echo "bwrap is not installed on the host (the box sees the host's /usr)"; return 1; }
        box_boot || return 1
        box_provision_base || return 1
        box_secrets || return 1
        # The probe beside the daemon, in the build's libexecdir (/usr/local/libexec for a plain
        # build, /usr/libexec for the package's --prefix=/usr): meson install made it in the box.
        probe=$LIBEXECDIR/sr-hardening-probe
        bx test -d "$LIBEXECDIR" || { echo "libexecdir $LIBEXECDIR is not in the box"; return 1; }
        # shellcheck disable=SC2016  # $1 of the box's shell
        printf '%s' "$PROBE" | bx sh -c 'cat >"$1" && chmod 755 "$1"' sh "$probe" || return 1
        # The copy: same [Service] except how it starts; no socket, no watchdog, no restart.
        bx sh -c "sed -e 's|^ExecStart=.*|ExecStart=$probe|' \
                      -e 's|^Type=.*|Type=oneshot|' \
                      -e '/^\(Requires\|After\|Also\|WantedBy\|WatchdogSec\|Restart\|NotifyAccess\)=/d' \
                      '$UNIT' >/etc/systemd/system/sr-hardening-probe.service" || return 1
        bx systemctl daemon-reload || return 1
        echo "[Service] of $UNIT (kept in the copy but for ExecStart=, Type=, watchdog, restart):"
        bx sed -n '/^\[Service\]/,/^\[/p' "$UNIT" | grep -E '^[A-Z][A-Za-z]*=' | grep -vE '^(ExecStart|Type|Description)='
}

PROBE_OUT=
step_probe() {
        if ! bx systemctl start sr-hardening-probe.service; then
                bx journalctl -u sr-hardening-probe.service -o cat --no-pager | tail -n 20
                return 1
        fi
        PROBE_OUT=$(bx cat /var/lib/sandbox-runner/probe.out) || return 1
        echo "$PROBE_OUT" | grep '^self='
}
result() { sed -n "s/^$1=//p" <<<"$PROBE_OUT"; }
is_ok() { [[ "$(result "$1")" == ok* ]]; }

step_robind() {
        echo "bwrap --unshare-all --unshare-user ... --ro-bind /proc /proc -- true: $(result robind)"
        is_ok robind
}

step_workspace() {
        echo "inside: $(result workspace); seen from the service: $(result workspace_host)"
        is_ok workspace && is_ok workspace_host
}

step_net() {
        local r
        r=$(result net)
        echo "interfaces in the sandbox: $r"
        [[ "$r" == "ok lo," ]]
}

step_secrets() {
        local k rc=0
        for k in creds_dir creds_via_proc_root creds_via_proc_environ; do
                echo "$k: $(result "$k")"
                is_ok "$k" && rc=1
        done
        echo "env: $(result env)"
        grep -qE 'CREDENTIALS_DIRECTORY|INVOCATION_ID|NOTIFY_SOCKET' <<<"$(result env)" && rc=1
        grep -qF "$TOKEN" <<<"$PROBE_OUT" && { echo "the token leaked into the sandbox"; rc=1; }
        return $rc
}

step_report() {
        local k
        for k in freshproc disableuserns_fresh disableuserns_robind nested_userns; do
                echo "$k: $(result "$k")"
                [[ -n "$(result "$k")" ]] || return 1
        done
}

t "install, boot, copy of sandbox-runner.service with a probe as ExecStart" step_setup || broken="set-up failed"
t "probe ran as the service user under the unit's hardening" step_probe || broken=${broken:-"probe failed"}
t "bwrap sandbox with --ro-bind /proc runs under the hardening" step_robind
t "workspace under StateDirectory is writable from the sandbox" step_workspace
t "the sandbox has only a loopback interface" step_net
t "the sandbox cannot read the daemon's credentials or environment" step_secrets
t "probe results for the daemon's start-up probes (informational)" step_report

box_test_stop
t "box stopped, host /tmp canary intact" step_host_canary
t "no cgroup of the box left on the host" step_host_no_cgroups

note "total $(since "$T_START")s"
tap_finish
