#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Chips and the host NPU broker under the service, as a distribution ships them (issue 13,
# DESIGN.md §9), on a FAKE Ascend host: no NPU exists on the test machines.
#
#   tests/integration/systemd-npu.sh [BUILDDIR]       (or MESON_BUILD_ROOT=BUILDDIR)
#
# Installs the meson build into a staging DESTDIR, boots a private systemd with
# tests/helpers/systemd-box.sh (DESIGN.md section 13: nothing here touches the host), and inside
# the box builds the fake host: /dev/davinci0..3 and the management nodes in the box's private
# /dev (mknod with /dev/null's numbers), a driver tree with the fake npu-smi
# (tests/helpers/fake-npu-smi.sh; chip 2 is an "Ascend 310P3"), a deployment checkout with a
# "model" script and a workload allowlist. The service gets the drop-in an NPU host needs
# (docs/npu.md: PrivateDevices=no, DevicePolicy=closed, DeviceAllow= for the nodes) and
# [NPU] Enable=yes, Broker=yes. Then:
#  - the service probes the chips (0, 1, 3 selectable; 2 refused by name); the journal has the
#    NPU_PROBED entry with its catalog text;
#  - a signed run with chips [3, 1] in its transient scope sees them as /dev/davinci0 and 1;
#  - a broker job runs as sandbox-runner-npu@<job>.service: started by the daemon over D-Bus
#    (polkit grants exactly that template), User= the service user, DeviceAllow= its chip; log,
#    result, its output in the session's workspace; the unit is gone afterwards, no process left;
#  - a cancel stops the job's unit (cancelled); a job active across a restart of the service is
#    marked interrupted and its unit stopped.
# At the end: nothing of the box left on the host.
#
# Output is TAP.  Needs root (exit 77 otherwise: the only skip; CI runs as root).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log_id() { sed -n "s/^#define SR_MESSAGE_$1 *\"\([0-9a-f]*\)\"/\1/p" "$HERE/../../src/util/log-ids.h"; }
ID_NPU_PROBED=$(log_id NPU_PROBED)
ID_JOB_STARTED=$(log_id NPU_JOB_STARTED)
ID_JOB_FINISHED=$(log_id NPU_JOB_FINISHED)
FAKE=/var/lib/sr-npu-test
SESSION=npu-box-sess
BOX_CLIENT_TIMEOUT=60

tap_plan 16
box_test_init npu

step_install() {
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper src/sandbox-runner-npu || return 1
        stage_check_units || return 1
        stage_path 'sandbox-runner-npu@.service' -path '*/systemd/system/*' >/dev/null ||
                { echo "sandbox-runner-npu@.service not installed"; return 1; }
        stage_check_polkit_rule || return 1
        grep -q 'sandbox-runner-npu@' "$STAGE$RULEFILE" || { echo "the polkit rule has no grant for the job units"; return 1; }
        [[ -n "$ID_NPU_PROBED" && -n "$ID_JOB_STARTED" && -n "$ID_JOB_FINISHED" ]] ||
                { echo "no NPU_PROBED, NPU_JOB_STARTED or NPU_JOB_FINISHED id in log-ids.h"; return 1; }
        echo "prefix=$PREFIX confdir=$CONFDIR user=$SERVICE_USER"
}

timed T_INSTALL t "meson install into a staging DESTDIR: the runner, the job unit template, the polkit grant" step_install ||
        broken="install failed"
timed T_BOOT t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}

# The fake host's files, made on the host side under $WORK and copied into the box's /var overlay.
fake_tree() {
        local f=$WORK/fake
        mkdir -p "$f/driver/lib64/common" "$f/driver/lib64/driver" "$f/driver/tools" "$f/driver/fake" \
                "$f/toolkit/bin" "$f/toolkit/lib64" "$f/checkout/tools" "$f/weights" || return 1
        cp "$HERE/../helpers/fake-npu-smi.sh" "$f/driver/tools/npu-smi" && chmod 0755 "$f/driver/tools/npu-smi" || return 1
        printf '0 Ascend 910B3\n1 Ascend 910B3\n2 Ascend 310P3\n3 Ascend 910B3\n' >"$f/driver/fake/names"
        printf 'weights-v1\n' >"$f/weights/w.txt"
        cat >"$f/checkout/tools/fold.py" <<'PY'
import json, os, sys, time
cfg = json.load(open(sys.argv[sys.argv.index("--config") + 1]))
print("fold: uid", os.getuid(), "chips", os.environ.get("ASCEND_RT_VISIBLE_DEVICES"), flush=True)
print("fold: cgroup", open("/proc/self/cgroup").read().strip().splitlines()[-1], flush=True)
os.makedirs(cfg["run_dir"], exist_ok=True)
with open(os.path.join(cfg["run_dir"], "model.pdb"), "w") as f:
    f.write("MODEL of " + open(cfg["target_pdb"]).read())
time.sleep(float(cfg.get("sleep", 0)))
print("fold: done", flush=True)
PY
        cat >"$f/workloads.json" <<EOF2
{"workloads": [{"id": "fold", "description": "Fold on one chip",
  "argv": ["/usr/bin/python3", "-I", "\${repo:tools/fold.py}", "--config", "\${input:configPath}"],
  "chips": 1, "timeoutSec": 120, "configPathFields": ["run_dir", "target_pdb"],
  "resourceRoots": ["$FAKE/weights"]}]}
EOF2
        chmod -R a+rX "$f"
}

step_provision() {
        local i
        box_provision || return 1
        box_install_client || return 1
        bx ip link set lo up || return 1
        fake_tree || return 1
        bx mkdir -p "$FAKE" || return 1
        tar -C "$WORK/fake" -cf - . | bx tar -C "$FAKE" -xf - || return 1
        # The chips and the management nodes, in the box's own /dev (a tmpfs of the box).
        for i in 0 1 2 3; do bx mknod -m 0666 "/dev/davinci$i" c 1 3 || return 1; done
        for i in davinci_manager devmm_svm hisi_hdc; do bx mknod -m 0666 "/dev/$i" c 1 3 || return 1; done
        bx sh -c "for i in 0 1 2 3; do echo \"\$(stat -c %i /dev/davinci\$i) \$i\"; done >$FAKE/driver/fake/inodes" || return 1
        printf '[NPU]\nEnable=yes\nDriverDirectory=%s/driver\nToolkitDirectory=%s/toolkit\nNpuSmi=%s/driver/tools/npu-smi\nBroker=yes\nWorkloadsFile=%s/workloads.json\nRepositoryDirectory=%s/checkout\n' \
                "$FAKE" "$FAKE" "$FAKE" "$FAKE" "$FAKE" |
                bx sh -c "mkdir -p '$CONFDIR/runner.conf.d' && cat >'$CONFDIR/runner.conf.d/50-npu.conf'" || return 1
        # What docs/npu.md tells an operator of an NPU host to add.
        printf '[Service]\nPrivateDevices=no\nDevicePolicy=closed\n%s\n' \
                "$(for n in davinci0 davinci1 davinci2 davinci3 davinci_manager devmm_svm hisi_hdc; do echo "DeviceAllow=/dev/$n rw"; done)" |
                bx sh -c 'mkdir -p /etc/systemd/system/sandbox-runner.service.d && cat >/etc/systemd/system/sandbox-runner.service.d/50-npu.conf' || return 1
        bx systemctl daemon-reload
}

timed T_PROVISION t "fake Ascend host in the box (/dev nodes, driver, fake npu-smi, checkout, allowlist), NPU drop-ins" step_provision ||
        broken=${broken:-"provisioning failed"}

step_probed() {
        local i phase=
        bx systemctl start sandbox-runner.socket || return 1
        for ((i = 0; i < 120; i++)); do
                client get /npu/chips || return 1
                phase=$(r 'd["body"].get("phase")')
                [[ "$phase" == ready || "$phase" == failed ]] && break
                sleep 0.25
        done
        r '"phase=%s chips=%s" % (d["body"].get("phase"), [(c["id"], c["selectable"], c.get("reason", "")[:80]) for c in d["body"]["chips"]])'
        rt 'd["body"]["phase"] == "ready" and [c["id"] for c in d["body"]["chips"] if c["selectable"]] == [0, 1, 3]' || return 1
        rt '"310P3" in [c for c in d["body"]["chips"] if c["id"] == 2][0]["reason"]'
}

t "the service probes the chips: 0, 1, 3 selectable, chip 2 (Ascend 310P3) refused by name" step_probed ||
        broken=${broken:-"no chips"}

step_journal() {
        local text
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_NPU_PROBED' and e.get('SANDBOX_NPU_SELECTABLE') == '3']" ||
                { echo "no NPU_PROBED entry with 3 selectable"; return 1; }
        text=$(bx journalctl -x --no-pager MESSAGE_ID="$ID_NPU_PROBED") || return 1
        echo "$text" | tail -n 4
        grep -q "probed each one of the Ascend 910 series" <<<"$text" || { echo "no catalog text"; return 1; }
}

t "journal: NPU_PROBED (3 selectable) with its catalog text under journalctl -x" step_journal

step_exec() {
        local i1 i3
        i1=$(bx stat -c %i /dev/davinci1) && i3=$(bx stat -c %i /dev/davinci3) || return 1
        client post /execute-shell "{\"workspaceId\": \"$SESSION\", \"npu\": {\"chips\": [3, 1]},
                \"command\": \"stat -c '%n %i' /dev/davinci0 /dev/davinci1; ls /dev | grep -c '^davinci[0-9]'; echo \$ASCEND_HOME_PATH\"}" || return 1
        r '"HTTP %s exit=%s stdout=%r stderr=%r enforcedBy=%s npu=%s" % (d["http"], d["body"].get("exitCode"), d["body"].get("stdout"),
           d["body"].get("stderr", "")[:200], d["body"].get("limits", {}).get("enforcedBy"), d["body"].get("npu"))'
        rt 'd["http"] == 200 and d["body"]["exitCode"] == 0 and d["body"]["limits"]["enforcedBy"] == "scope"' || return 1
        rt 'd["body"]["stdout"] == "/dev/davinci0 %s\n/dev/davinci1 %s\n2\n'"$FAKE"'/toolkit\n" % tuple(a.split())' "$i1 $i3"
}

t "a signed run with chips [3, 1] in its scope: host chips 1 and 3 are /dev/davinci0 and 1 (by inode)" step_exec

step_setup_session() {
        local cfg slow pdb
        cfg=$(printf '{"run_dir": "out/r1", "target_pdb": "target.pdb"}' | base64 -w0)
        slow=$(printf '{"run_dir": "out/slow", "target_pdb": "target.pdb", "sleep": 120}' | base64 -w0)
        pdb=$(printf 'ATOM 1\n' | base64 -w0)
        client post /execute-shell "{\"workspaceId\": \"$SESSION\", \"command\":
                \"echo $cfg | base64 -d >cfg.json && echo $slow | base64 -d >slow.json && echo $pdb | base64 -d >target.pdb && cat cfg.json\"}" || return 1
        r '"HTTP %s stdout=%r stderr=%r" % (d["http"], d["body"].get("stdout"), d["body"].get("stderr"))'
        rt 'd["http"] == 200 and d["body"]["exitCode"] == 0'
}

t "the session's workspace holds the job's config and input" step_setup_session

JOB=
# job_state ID: the job's state into STATE
job_state() { client get "/npu/jobs/$1?session_id=$SESSION" && STATE=$(r 'd["body"].get("state")'); }
wait_state() {
        local i
        for ((i = 0; i < 240; i++)); do
                job_state "$1" || return 1
                [[ " $2 " == *" $STATE "* ]] && return 0
                sleep 0.25
        done
        echo "job $1 is $STATE, not one of: $2"
        return 1
}

step_job_unit() {
        local unit props
        client post /npu/jobs "{\"workloadId\": \"fold\", \"sessionId\": \"$SESSION\", \"inputs\": {\"configPath\": \"slow.json\"}}" || return 1
        r '"HTTP %s %s" % (d["http"], d["body"])'
        rt 'd["http"] == 202' || return 1
        JOB=$(r 'd["body"]["jobId"]')
        wait_state "$JOB" running || return 1
        unit=sandbox-runner-npu@$JOB.service
        # "running" is the daemon's word once StartUnit returned; Type=exec makes the unit active
        # only when the runner has been exec'd (on a loaded machine, a moment later).
        local i
        for ((i = 0; i < 100; i++)); do
                [[ "$(bx systemctl show -p ActiveState --value "$unit")" == activating ]] || break
                sleep 0.1
        done
        props=$(bx systemctl show -p ActiveState -p User -p DeviceAllow -p DevicePolicy "$unit") || return 1
        echo "$props"
        grep -qx 'ActiveState=active' <<<"$props" && grep -qx "User=$SERVICE_USER" <<<"$props" &&
                grep -qx 'DevicePolicy=closed' <<<"$props" && grep -q '/dev/davinci0 rw' <<<"$props" ||
                { echo "the unit is not as expected"; return 1; }
}

t "a broker job runs as sandbox-runner-npu@<job>.service: active, User=$SERVICE_USER, DevicePolicy=closed, DeviceAllow=/dev/davinci0" step_job_unit

step_cancel() {
        local unit=sandbox-runner-npu@$JOB.service
        client post "/npu/jobs/$JOB/cancel" "{\"sessionId\": \"$SESSION\"}" || return 1
        rt 'd["http"] == 202 and d["body"]["state"] == "cancelling"' || { r 'd'; return 1; }
        wait_state "$JOB" cancelled || return 1
        bx systemctl is-active -q "$unit" && { echo "$unit still active"; return 1; }
        echo "job $JOB cancelled, $unit inactive"
}

t "cancel: the job's unit is stopped, the job is cancelled" step_cancel

step_job_done() {
        local unit left
        client post /npu/jobs "{\"workloadId\": \"fold\", \"sessionId\": \"$SESSION\", \"inputs\": {\"configPath\": \"cfg.json\"}}" || return 1
        rt 'd["http"] == 202' || { r 'd'; return 1; }
        JOB=$(r 'd["body"]["jobId"]')
        wait_state "$JOB" "succeeded failed" || return 1
        unit=sandbox-runner-npu@$JOB.service
        client get "/npu/jobs/$JOB/result?session_id=$SESSION" || return 1
        r '"result: %s" % d["body"]'
        rt 'd["http"] == 200 and d["body"]["exitCode"] == 0 and d["body"]["state"] == "succeeded"' || return 1
        bx cat "/var/lib/sandbox-runner/npu-jobs/$JOB/log" | sed 's/^/log: /'
        bx grep -q "fold: done" "/var/lib/sandbox-runner/npu-jobs/$JOB/log" || return 1
        bx grep -q "sandbox-runner-npu@$JOB.service" "/var/lib/sandbox-runner/npu-jobs/$JOB/log" ||
                { echo "the job did not run in its unit's cgroup"; return 1; }
        bx grep -q "uid $(bx id -u "$SERVICE_USER") chips 0" "/var/lib/sandbox-runner/npu-jobs/$JOB/log" || return 1
        bx grep -qx "MODEL of ATOM 1" "/var/lib/sandbox-runner/workspaces/$SESSION/out/r1/model.pdb" || return 1
        left=$(bx systemctl list-units --all --no-legend --plain 'sandbox-runner-npu@*' | awk 'NF { print $1 }')
        [[ -z "$left" ]] || { echo "units left: $left"; return 1; }
        left=$(stray_processes)
        [[ -z "$left" ]] || { echo "processes of $SERVICE_USER other than the daemon: $left"; return 1; }
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_JOB_STARTED' and e.get('SANDBOX_NPU_JOB') == '$JOB' and e.get('SANDBOX_UNIT') == '$unit' and e.get('SANDBOX_NPU_CHIPS') == '0']" ||
                { echo "no NPU_JOB_STARTED entry for $JOB in $unit on chip 0"; return 1; }
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_JOB_FINISHED' and e.get('SANDBOX_NPU_JOB') == '$JOB' and e.get('SANDBOX_NPU_JOB_STATE') == 'succeeded' and e.get('SANDBOX_SESSION') == '$SESSION']" ||
                { echo "no NPU_JOB_FINISHED entry (succeeded) for $JOB"; return 1; }
        bx journalctl -x --no-pager MESSAGE_ID="$ID_JOB_FINISHED" | grep -q "allowlisted\|ended in state" ||
                { echo "no catalog text for NPU_JOB_FINISHED"; return 1; }
        echo "job $JOB succeeded in $unit; journal: started and finished entries; no unit and no process left"
}

t "a job runs to the end in its unit: result, log, output in the workspace, journal entries; the unit is gone, no process left" step_job_done

step_restart() {
        local unit i
        client post /npu/jobs "{\"workloadId\": \"fold\", \"sessionId\": \"$SESSION\", \"inputs\": {\"configPath\": \"slow.json\"}}" || return 1
        JOB=$(r 'd["body"]["jobId"]')
        wait_state "$JOB" running || return 1
        unit=sandbox-runner-npu@$JOB.service
        bx systemctl restart sandbox-runner.service || return 1
        wait_state "$JOB" interrupted || return 1
        client get "/npu/jobs/$JOB?session_id=$SESSION" && r '"job: %s" % d["body"]'
        for ((i = 0; i < 80; i++)); do bx systemctl is-active -q "$unit" || break; sleep 0.25; done
        bx systemctl is-active -q "$unit" && { echo "$unit still active after the restart"; return 1; }
        echo "interrupted, $unit stopped"
}

t "a job active across a restart of the service is marked interrupted (by the stopping daemon, or the next one), its unit stopped" step_restart

step_other_session() {
        client get "/npu/jobs/$JOB?session_id=another-session" || return 1
        rt 'd["http"] == 404' || { r 'd'; return 1; }
        client get "/npu/jobs?session_id=another-session" || return 1
        rt 'd["http"] == 200 and d["body"]["jobs"] == []'
}

t "another session sees none of these jobs (404, empty list)" step_other_session

stop_box_and_check_host

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, stop ${T_STOP}s, total $(since "$T_START")s"
tap_finish
