#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Environments under the service, as a distribution ships it (issue 12, DESIGN.md §14).
#
#   tests/integration/systemd-environments.sh [BUILDDIR]       (or MESON_BUILD_ROOT=BUILDDIR)
#
# Installs the meson build into a staging DESTDIR, boots a private systemd with
# tests/helpers/systemd-box.sh (DESIGN.md section 13: nothing here touches the host), installs
# the staged tree into the box with the default configuration (this suite alone keeps
# [Environments] Bootstrap=python-base: BOX_BOOTSTRAP=yes), starts sandbox-runner.socket and checks:
#  - the provisioner is installed in libexecdir; python-base is built after start-up by the
#    service (User=sandbox-runner, its hardening, its PrivateNetwork=) and becomes ready;
#  - a signed run with "environment": "python-base" imports numpy and pandas from
#    /opt/science-env in its transient scope; the answer names the environment and revision;
#  - the journal: setup started and finished (with their MESSAGE_IDs and catalog text under
#    journalctl -x), environment changed, and the execution's finished entry with
#    SANDBOX_ENVIRONMENT=python-base and SANDBOX_ENVIRONMENT_REVISION=1;
#  - the prefix belongs to the service user, under its StateDirectory=; no provisioning process
#    and no build directory is left.
# At the end: nothing of the box left on the host.
#
# Output is TAP.  Needs root (exit 77 otherwise: the only skip; CI runs as root).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}
BOX_BOOTSTRAP=yes

ID_SETUP_STARTED=263b532f3ec0445ea7e842bb74ff6e50
ID_SETUP_FINISHED=33a2077ecb7b49b5ae9db22f7915bcf7
ID_ENV_CHANGED=7017ae96f2b045b1911d91957ac0efb0
ID_EXEC_FINISHED=4f17f541cb23403c9e79f39ef5a14aea
SERVICE=sandbox-runner.service
BOX_CLIENT_TIMEOUT=120

tap_plan 15
box_test_init environments

step_install() {
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper || return 1
        stage_check_units || return 1
        stage_check_polkit_rule || return 1
        [[ -f "$STAGE$LIBEXECDIR/sandbox-runner-provision.py" ]] ||
                { echo "the provisioner is not installed in libexecdir"; return 1; }
        echo "prefix=$PREFIX confdir=$CONFDIR user=$SERVICE_USER provisioner installed"
}

timed T_INSTALL t "meson install into a staging DESTDIR, the provisioner in libexecdir" step_install ||
        broken="install failed"
timed T_BOOT t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}

step_provision() {
        box_provision || return 1
        box_install_client || return 1
        bx ip link set lo up || return 1
        bx busctl --system get-property org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
                org.freedesktop.PolicyKit1.Authority BackendVersion >/dev/null || { echo "no polkit authority"; return 1; }
        ! bx test -e "$CONFDIR/runner.conf.d/05-test-no-bootstrap.conf" ||
                { echo "the no-bootstrap drop-in is there"; return 1; }
        # The box's /var is an overlay on the host's: environments that a daemon of the host built
        # (tests/setup.sh run's, in /var/lib/sandbox-runner) show through and would make the
        # bootstrap a no-op. Start from none: the removal writes whiteouts into the box's overlay
        # only, the host's directory stays as it is.
        [[ "$(bx stat -f -c %T /var)" == overlayfs ]] || { echo "the box's /var is not an overlay"; return 1; }
        bx rm -rf /var/lib/sandbox-runner/environments || return 1
}

timed T_PROVISION t "project installed in the box with the default [Environments] (Bootstrap=python-base)" step_provision ||
        broken=${broken:-"provisioning failed"}

step_socket() {
        bx systemctl start sandbox-runner.socket || return 1
        client health || return 1
        r '"HTTP %s sandbox.usable=%s environments=%s" % (d["http"], d["body"]["sandbox"]["usable"], d["body"].get("environments"))'
        rt 'd["http"] == 200 and d["body"]["sandbox"]["usable"] is True and "environments" in d["body"]'
}

t "sandbox-runner.socket started; /health has environments" step_socket || broken=${broken:-"the service does not work"}

step_ready() {
        local i phase=
        for ((i = 0; i < 600; i++)); do
                client get /environments/setup || return 1
                phase=$(r '[e["phase"] for e in d["body"]["setup"] if e["name"] == "python-base"][0] if d["body"]["setup"] else "none"')
                [[ "$phase" == ready || "$phase" == failed ]] && break
                sleep 0.5
        done
        r 'json.dumps(d["body"])'
        [[ "$phase" == ready ]]
}

timed T_SETUP t "python-base is built by the service after start-up and becomes ready" step_ready ||
        broken=${broken:-"python-base is not ready"}

EXEC_ID=env-$$-$RANDOM

step_run() {
        client post /execute-shell "{\"executionId\": \"$EXEC_ID\", \"workspaceId\": \"envs\", \"environment\": \"python-base\",
                \"command\": \"python3 -c 'import numpy, pandas; print(numpy.__file__, int(numpy.arange(10).sum()))'\"}" || return 1
        r '"HTTP %s status=%s stdout=%r stderr=%r environment=%s enforcedBy=%s" % (d["http"], d["body"].get("status"),
           d["body"].get("stdout"), d["body"].get("stderr", "")[:300], d["body"].get("environment"),
           d["body"].get("limits", {}).get("enforcedBy"))'
        rt 'd["http"] == 200 and d["body"]["exitCode"] == 0' || return 1
        rt 'd["body"]["stdout"].startswith("/opt/science-env/lib/") and d["body"]["stdout"].endswith(" 45\n")' || return 1
        rt 'd["body"]["environment"] == {"name": "python-base", "revision": 1}' || return 1
        rt 'd["body"]["limits"]["enforcedBy"] == "scope"'
}

t "a signed run with \"environment\": \"python-base\" in its scope: numpy from /opt/science-env" step_run

# journal_has ID FILTER-EXPR: an entry with MESSAGE_ID=ID for which FILTER-EXPR holds (e: the entry)
journal_has() {
        local id=$1 expr=$2 i
        for ((i = 0; i < 20; i++)); do
                bx journalctl -o json --no-pager MESSAGE_ID="$id" 2>/dev/null |
                        jlines "[e for e in L if $expr]" >/dev/null && break
                sleep 0.25
        done
        bx journalctl -o json --no-pager MESSAGE_ID="$id" |
                jlines "'\n'.join('%s: %s' % (e.get('_SYSTEMD_UNIT'), e.get('MESSAGE')) for e in L if $expr)"
        bx journalctl -o json --no-pager MESSAGE_ID="$id" | jlines "[e for e in L if $expr]" >/dev/null ||
                { echo "no $id entry with $expr"; return 1; }
}

step_journal_setup() {
        journal_has $ID_SETUP_STARTED "e.get('SANDBOX_ENVIRONMENT') == 'python-base' and e.get('SANDBOX_SETUP_ID')" || return 1
        journal_has $ID_SETUP_FINISHED "e.get('SANDBOX_ENVIRONMENT') == 'python-base' and e.get('SANDBOX_ENVIRONMENT_REVISION') == '1' and e.get('_SYSTEMD_UNIT') == '$SERVICE'" || return 1
        journal_has $ID_ENV_CHANGED "e.get('SANDBOX_ENVIRONMENT') == 'python-base'"
}

t "journal: setup started, setup finished (revision 1, from $SERVICE), environment changed" step_journal_setup

step_journal_catalog() {
        local text
        text=$(bx journalctl -x --no-pager MESSAGE_ID=$ID_SETUP_FINISHED) || return 1
        echo "$text" | tail -n 8
        grep -q "was built and made live with one rename" <<<"$text" || { echo "no catalog text"; return 1; }
}

t "journalctl -x explains the setup's entry (catalog)" step_journal_catalog

step_journal_exec() {
        journal_has $ID_EXEC_FINISHED "e.get('SANDBOX_EXECUTION_ID') == '$EXEC_ID' and e.get('SANDBOX_ENVIRONMENT') == 'python-base' and e.get('SANDBOX_ENVIRONMENT_REVISION') == '1'"
}

t "journal: the execution's finished entry names python-base and revision 1" step_journal_exec

step_prefix_owner() {
        local live owner
        live=$(bx readlink /var/lib/sandbox-runner/environments/envs/python-base/live) || return 1
        owner=$(bx stat -c %U "/var/lib/sandbox-runner/environments/envs/python-base/$live") || return 1
        echo "live -> $live, owned by $owner"
        [[ "$live" == r1 && "$owner" == "$SERVICE_USER" ]]
}

t "the live prefix (r1) belongs to $SERVICE_USER under /var/lib/sandbox-runner" step_prefix_owner

step_no_leftover() {
        local left
        left=$(stray_processes)
        [[ -z "$left" ]] || { echo "processes of $SERVICE_USER other than the daemon: $left"; return 1; }
        left=$(bx sh -c 'ls /var/lib/sandbox-runner/environments/envs/python-base | grep -E "^build-" || true')
        [[ -z "$left" ]] || { echo "build directories left: $left"; return 1; }
        echo "no provisioner left, no build directory"
}

t "no provisioning process or build directory is left" step_no_leftover

stop_box_and_check_host

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, python-base ${T_SETUP}s, stop ${T_STOP}s, total $(since "$T_START")s"
tap_finish
