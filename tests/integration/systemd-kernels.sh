#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Kernels outlive a daemon restart under a real (private) systemd (issue 22; docs/kernels.md,
# "Daemon restarts").
#
#   tests/integration/systemd-kernels.sh [BUILDDIR]       (or MESON_BUILD_ROOT=BUILDDIR)
#
# One boot of tests/helpers/systemd-box.sh (DESIGN.md section 13; nothing here touches the host),
# the project installed into it with [Kernels] Enable=yes and a short IdleExitSec=, the service
# socket-activated, and then:
#  - a kernel is created and sets x = 42; its sandbox runs in sandbox-runner-x-kernel-<id>-1.scope;
#  - the daemon does not idle-exit while the kernel lives;
#  - `systemctl restart sandbox-runner.service`: a new daemon (another MainPID) re-adopts the
#    kernel: the same scope and keeper, the same id answers x == 42 over a new WebSocket;
#  - the daemon killed with SIGKILL: the next one re-adopts the kernel too;
#  - kernels-isolation.py, every case, against this service (the service user, kernels in their
#    scopes; its SANDBOX_TEST_SECRET from a drop-in): the isolation of kernels in the posture
#    the by-hand suites cannot reach; kernels-lifecycle.py too (interrupt, restart, the cap,
#    OOM and tasks limits through the scopes);
#  - a re-adopted kernel restarted (POST .../restart): a new run in a new scope, state cleared;
#  - DELETE: 204, then no scope, no process of the kernel, no directory or record; the workspace
#    of each re-adopted run was snapshotted at its end (a revision kernel-<id>-1);
#  - with no kernel left the daemon idle-exits again;
# and at the end that the host is as it was.
#
# Output is TAP.  Needs root (exit 77 otherwise: the only skip; CI runs as root).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}

IDLE_SEC=3
CAP=6           # two kernels of this script live while kernels-lifecycle.py races for the rest
RUNTIME=/run/sandbox-runner
SRCROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CANARY=canary-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

tap_plan 21
box_test_init kernels

# -----------------------------------------------------------------------------------------
# Install, boot, provision

step_install() {
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper || return 1
        stage_check_units || return 1
        stage_check_polkit_rule || return 1
        echo "prefix=$PREFIX confdir=$CONFDIR user=$SERVICE_USER polkit-transient-scopes=$POLKIT_MODE"
}

timed T_INSTALL t "meson install into a staging DESTDIR" step_install || broken="install failed"

step_boot_kernels() {
        box_boot || return 1
        box_boot_info
}

timed T_BOOT t "private systemd boots to running" step_boot_kernels || broken=${broken:-"box did not boot"}

# The kernel client in the box (Debian's python3-websocket), DocsGPT's way: REST with
# "Authorization: token T", a new WebSocket per execution, done after execute_reply and idle.
install_kernel_client() {
        bx sh -c 'cat >/root/kg.py' <<'EOF'
import http.client, json, sys, time, uuid
import websocket

TOKEN = open("/root/sr-token").read()
AUTH = {"Authorization": "token " + TOKEN}

def call(method, path, body=None, auth=None):
    c = http.client.HTTPConnection("127.0.0.1", 4311, timeout=30)
    h = dict(auth or AUTH)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, {"_raw": raw.decode("utf-8", "replace")}

def wait_idle(kid, sec=90):
    st, m = None, None
    deadline = time.monotonic() + sec
    while time.monotonic() < deadline:
        st, m = call("GET", "/api/kernels/" + kid)
        if st != 200 or m.get("execution_state") in ("idle", "dead"):
            break
        time.sleep(0.2)
    return st, m

def execute(kid, code, timeout=60):
    ws = websocket.create_connection("ws://127.0.0.1:4311/api/kernels/%s/channels" % kid, timeout=timeout,
                                     header=["Authorization: token " + TOKEN])
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({"header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                                   "msg_type": "execute_request", "version": "5.3"},
                        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                        "content": {"code": code, "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    out = {"stdout": "", "results": [], "errors": [], "reply": None, "idle": False}
    while not (out["reply"] is not None and out["idle"]):
        m = json.loads(ws.recv())
        if (m.get("parent_header") or {}).get("msg_id") != msg_id:
            continue
        t, c = m.get("msg_type") or m["header"]["msg_type"], m.get("content") or {}
        if t == "stream":
            out["stdout"] += c.get("text", "")
        elif t == "execute_result":
            out["results"].append(c.get("data", {}).get("text/plain"))
        elif t == "error":
            out["errors"].append(c.get("ename"))
        elif t == "execute_reply":
            out["reply"] = c.get("status")
        elif t == "status" and c.get("execution_state") == "idle":
            out["idle"] = True
    ws.close()
    return out

cmd = sys.argv[1]
if cmd == "create":
    st, m = call("POST", "/api/kernels", {"name": "python3"})
    if st == 201:
        st, m = wait_idle(m["id"])
    print(json.dumps({"http": st, "model": m}))
elif cmd == "get":
    st, m = call("GET", "/api/kernels/" + sys.argv[2])
    print(json.dumps({"http": st, "model": m}))
elif cmd == "wait-idle":
    st, m = wait_idle(sys.argv[2])
    print(json.dumps({"http": st, "model": m}))
elif cmd == "exec":
    print(json.dumps(execute(sys.argv[2], sys.argv[3])))
elif cmd == "restart":
    st, m = call("POST", "/api/kernels/%s/restart" % sys.argv[2])
    if st == 200:
        st, m = wait_idle(sys.argv[2])
    print(json.dumps({"http": st, "model": m}))
elif cmd == "revisions":
    st, m = call("GET", "/workspaces/%s/revisions" % sys.argv[2], auth={"Authorization": "Bearer " + TOKEN})
    print(json.dumps({"http": st, "executions": [r["executionId"] for r in (m or {}).get("revisions", [])]}))
elif cmd == "delete":
    st, m = call("DELETE", "/api/kernels/" + sys.argv[2])
    st2, _ = call("GET", "/api/kernels/" + sys.argv[2])
    print(json.dumps({"http": st, "then": st2}))
EOF
}

kg() { RES=$(bx /usr/bin/python3 /root/kg.py "$@") || { echo "kernel client failed: $RES"; return 1; }; }

step_provision() {
        box_provision || return 1
        box_install_client || return 1
        install_kernel_client || return 1
        printf '[Runner]\nIdleExitSec=%s\n[Kernels]\nEnable=yes\nMaxKernels=%s\n' "$IDLE_SEC" "$CAP" |
                bx sh -c "mkdir -p '$CONFDIR/runner.conf.d' && cat >'$CONFDIR/runner.conf.d/50-test.conf'" || return 1
        # A value the isolation suite looks for in kernels (it must reach none).
        printf '[Service]\nEnvironment=SANDBOX_TEST_SECRET=%s\n' "$CANARY" |
                bx sh -c 'mkdir -p /etc/systemd/system/sandbox-runner.service.d &&
                          cat >/etc/systemd/system/sandbox-runner.service.d/50-test-canary.conf' || return 1
        bx systemctl daemon-reload || return 1
        # The suite and what it runs in kernels (the box sees no /tmp of the host's).
        tar -C "$SRCROOT/tests" --exclude=__pycache__ -cf - integration |
                bx sh -c 'mkdir -p /root/iso/build && tar -C /root/iso -xf -' || return 1
        tar -C "$BUILD/tests" -cf - try-syscall seccomp-export | bx tar -C /root/iso/build -xf - || return 1
        bx ip link set lo up || return 1
}

timed T_PROVISION t "project installed in the box, [Kernels] Enable=yes, IdleExitSec=$IDLE_SEC" step_provision ||
        broken=${broken:-"provisioning failed"}

# -----------------------------------------------------------------------------------------
# A kernel in its scope

KID=
KID2=
UNIT=
MAIN1=

step_socket() {
        bx systemctl start sandbox-runner.socket || return 1
        # polkitd loads its rules asynchronously: the first daemons may find no scopes yet.
        restart_until 'd["body"]["scopes"]["available"] is True' || {
                bx journalctl -u sandbox-runner.service -u polkit.service -o cat --no-pager | tail -n 15
                return 1
        }
        jprint '"scopes=%s" % d["body"]["scopes"].get("mechanism")' <<<"$HEALTH"
}

step_create() {
        kg create || return 1
        echo "$RES"
        jtest 'd["http"] == 200 and d["model"]["execution_state"] == "idle"' <<<"$RES" || return 1
        KID=$(jprint 'd["model"]["id"]' <<<"$RES")
        kg exec "$KID" 'x = 42' || return 1
        echo "x = 42: $RES"
        jtest 'd["reply"] == "ok"' <<<"$RES" || return 1
        # A second kernel, restarted once re-adopted (below).
        kg create || return 1
        jtest 'd["http"] == 200 and d["model"]["execution_state"] == "idle"' <<<"$RES" || { echo "$RES"; return 1; }
        KID2=$(jprint 'd["model"]["id"]' <<<"$RES")
        kg exec "$KID2" 'x = 2' || return 1
        jtest 'd["reply"] == "ok"' <<<"$RES"
}

# scope_gone UNIT [SEC]: wait until UNIT is no longer loaded
scope_gone() {
        local unit=$1 sec=${2:-2} i state
        for ((i = 0; i <= sec * 10; i++)); do
                state=$(bx systemctl show -p LoadState --value "$unit" 2>/dev/null)
                [[ "$state" == not-found ]] && { echo "$unit gone after ~$((i * 100)) ms"; return 0; }
                sleep 0.1
        done
        echo "$unit still loaded after ${sec}s: $(bx systemctl show -p LoadState,ActiveState,SubState "$unit" | tr '\n' ' ')"
        return 1
}

# scope_pids UNIT: the processes of UNIT (sorted pids, one line), from its cgroup (v2 or the
# name=systemd hierarchy of a hybrid host)
scope_pids() {
        local cg
        cg=$(bx systemctl show -p ControlGroup --value "$1") || return 1
        [[ -n "$cg" ]] || return 1
        bx sh -c "cat /sys/fs/cgroup/unified$cg/cgroup.procs 2>/dev/null || cat /sys/fs/cgroup/systemd$cg/cgroup.procs 2>/dev/null ||
                  cat /sys/fs/cgroup$cg/cgroup.procs" | sort -n | tr '\n' ' '
}

PIDS1=

step_scope() {
        local state slice
        UNIT=${SCOPE_PREFIX}kernel-$KID-1.scope
        state=$(bx systemctl show -p ActiveState --value "$UNIT")
        slice=$(bx systemctl show -p Slice --value "$UNIT")
        PIDS1=$(scope_pids "$UNIT")
        echo "$UNIT: $state in $slice; processes: $PIDS1"
        [[ "$state" == active && "$slice" == sandbox-runner.slice ]] || return 1
        # the keeper, bwrap, the sandbox's pid 1 and the kernel at least
        (( $(wc -w <<<"$PIDS1") >= 4 ))
}

step_no_idle_exit() {
        MAIN1=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        sleep $((IDLE_SEC + 3))
        local s main
        s=$(bx systemctl is-active sandbox-runner.service)
        main=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        echo "after $((IDLE_SEC + 3)) s without requests: service $s, MainPID $MAIN1 -> $main"
        [[ "$s" == active && "$main" == "$MAIN1" ]]
}

t "socket-activated service with scopes and kernels" step_socket || broken=${broken:-"no service"}
t "POST /api/kernels: idle; x = 42 over a WebSocket" step_create || broken=${broken:-"no kernel"}
t "the kernel's sandbox runs in its scope in sandbox-runner.slice" step_scope
t "no idle exit while a kernel lives (IdleExitSec=$IDLE_SEC)" step_no_idle_exit

# -----------------------------------------------------------------------------------------
# The restart

step_restart() {
        local main pids
        bx systemctl restart sandbox-runner.service || return 1
        main=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        pids=$(scope_pids "$UNIT")
        echo "MainPID $MAIN1 -> $main; $UNIT: $(bx systemctl is-active "$UNIT"); processes: $pids"
        [[ "$main" != "$MAIN1" && "$main" != 0 ]] || return 1
        [[ "$(bx systemctl is-active "$UNIT")" == active ]] || return 1
        # the very same processes: nothing was restarted
        [[ "$pids" == "$PIDS1" ]] || { echo "before the restart: $PIDS1"; return 1; }
}

step_readopted() {
        kg wait-idle "$KID" || return 1
        echo "$RES"
        jtest 'd["http"] == 200 and d["model"]["execution_state"] == "idle"' <<<"$RES" || {
                bx journalctl -u sandbox-runner.service -o cat --no-pager | tail -n 20
                return 1
        }
        journal_has "[e for e in L if e.get('SANDBOX_KERNEL_ID') == '$KID' and 're-adopted' in e.get('MESSAGE', '')]" || {
                echo "no re-adoption entry in the journal"; return 1; }
}

step_state_kept() {
        kg exec "$KID" 'x' || return 1
        echo "x: $RES"
        jtest 'd["reply"] == "ok" and d["results"] == ["42"]' <<<"$RES"
}

step_record_private() {
        local mode
        mode=$(bx stat -c '%a %U' "$RUNTIME/kernels/$KID.json") || return 1
        echo "record: $mode; the sandbox sees $RUNTIME/kernels/$KID only"
        [[ "$mode" == "600 $SERVICE_USER" ]]
}

t "systemctl restart sandbox-runner.service: a new daemon; the kernel's scope and processes unchanged" step_restart
t "the new daemon re-adopts the kernel (same id, idle after kernel_info; journal)" step_readopted
t "the same kernel answers x == 42 over a new WebSocket" step_state_kept
t "the kernel's record (key included) is 0600, beside its directory" step_record_private

step_crash() {
        local main1 main i s pids
        main1=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        bx systemctl kill -s SIGKILL sandbox-runner.service || return 1
        # Restart=on-failure brings it back; a request would too (socket activation).
        for ((i = 0; i < 100; i++)); do
                main=$(bx systemctl show -p MainPID --value sandbox-runner.service)
                s=$(bx systemctl is-active sandbox-runner.service)
                [[ "$s" == active && "$main" != 0 && "$main" != "$main1" ]] && break
                sleep 0.2
        done
        pids=$(scope_pids "$UNIT")
        echo "SIGKILL: MainPID $main1 -> $main ($s, NRestarts=$(bx systemctl show -p NRestarts --value sandbox-runner.service)); processes: $pids"
        [[ "$s" == active && "$main" != "$main1" ]] || return 1
        [[ "$pids" == "$PIDS1" ]] || { echo "before: $PIDS1"; return 1; }
        kg wait-idle "$KID" || return 1
        jtest 'd["http"] == 200 and d["model"]["execution_state"] == "idle"' <<<"$RES" || { echo "$RES"; return 1; }
        kg exec "$KID" 'x + 1' || return 1
        echo "x + 1: $RES"
        jtest 'd["reply"] == "ok" and d["results"] == ["43"]' <<<"$RES"
}

t "the daemon killed (SIGKILL): restarted by systemd, it re-adopts the kernel again (x + 1 == 43)" step_crash

# -----------------------------------------------------------------------------------------
# The isolation suite against the service (the kernel above keeps it from idle-exiting)

# run_suite SCRIPT MIN-OK [ARGS...]: a kernels suite (TAP) in the box against the service.
run_suite() {
        local script=$1 min=$2 out rc n bad
        shift 2
        out=$(bx env PATH=/usr/bin:/bin /usr/bin/python3 "/root/iso/integration/$script" \
                --service sandbox-runner.service --service-canary "$CANARY" "$@" 2>&1)
        rc=$?
        n=$(grep -c '^ok ' <<<"$out")
        bad=$(grep -c '^not ok ' <<<"$out")
        echo "$script against the service: exit $rc, $n ok, $bad not ok"
        grep -E '^(not ok|#)' <<<"$out" | grep -v '^# *$' | tail -n 40
        (( rc == 0 && bad == 0 && n >= min ))
}

step_isolation() { run_suite kernels-isolation.py 25 --build-root /root/iso/build; }
step_lifecycle() { run_suite kernels-lifecycle.py 6; }

t "kernels-isolation.py against the service: files, /tmp, processes, API, network, environment, uids, escape battery, syscalls, socket directory" step_isolation
t "kernels-lifecycle.py against the service: interrupt, restart, workspace busy, the cap under 20 racing POSTs, OOM in a scope, a kernel that never gets ready" step_lifecycle

# -----------------------------------------------------------------------------------------
# DELETE leaves nothing; then the daemon may idle-exit

step_delete() {
        local i left
        kg delete "$KID" || return 1
        echo "$RES"
        jtest 'd["http"] == 204 and d["then"] == 404' <<<"$RES" || return 1
        scope_gone "$UNIT" 10 || return 1
        # The re-adopted kernel's run is no execution of this daemon's: its end snapshot still is
        # published (kernel-adopt.c), as the first run of the kernel restarted after re-adoption.
        for ((i = 0; i < 50; i++)); do
                kg revisions "kernel-$KID" || return 1
                jtest '"kernel-'"$KID"'-1" in d["executions"]' <<<"$RES" && break
                sleep 0.2
        done
        echo "revisions of kernel-$KID: $RES"
        jtest '"kernel-'"$KID"'-1" in d["executions"]' <<<"$RES" || return 1
        kg revisions "kernel-$KID2" || return 1
        echo "revisions of kernel-$KID2 (restarted once re-adopted): $RES"
        jtest '"kernel-'"$KID2"'-1" in d["executions"]' <<<"$RES" || return 1
        kg delete "$KID2" || return 1
        jtest 'd["http"] == 204 and d["then"] == 404' <<<"$RES" || { echo "second kernel: $RES"; return 1; }
        scope_gone "${SCOPE_PREFIX}kernel-$KID2-2.scope" 10 || return 1
        for ((i = 0; i < 50; i++)); do
                left=$(bx sh -c "ps -u '$SERVICE_USER' -o pid=,args= | grep -e ipykernel -e bwrap | grep -v grep")
                [[ -z "$left" ]] && break
                sleep 0.2
        done
        [[ -z "$left" ]] || { echo "processes left: $left"; return 1; }
        if [[ -n "$(bx ls -A "$RUNTIME/kernels")" ]]; then
                echo "left: $(bx ls -la "$RUNTIME/kernels")"; return 1
        fi
}

step_idle_after() {
        local i s
        for ((i = 0; i < (IDLE_SEC + 10) * 4; i++)); do
                s=$(bx systemctl is-active sandbox-runner.service)
                [[ "$s" == active || "$s" == deactivating ]] || break
                sleep 0.25
        done
        echo "service $s with no kernel left"
        [[ "$s" == inactive ]] && return 0
        # why not: the unit's state and its last journal lines
        bx systemctl show -p ActiveState,SubState,Result,NRestarts,ExecMainStatus,TriggeredBy sandbox-runner.service
        bx journalctl --no-pager -n 40 -o short-monotonic -u sandbox-runner.service -u sandbox-runner.socket
        return 1
}

step_restart_adopted() {
        local old=${SCOPE_PREFIX}kernel-$KID2-1.scope new=${SCOPE_PREFIX}kernel-$KID2-2.scope
        kg restart "$KID2" || return 1
        echo "$RES"
        jtest 'd["http"] == 200 and d["model"]["execution_state"] == "idle"' <<<"$RES" || return 1
        kg exec "$KID2" 'x' || return 1
        echo "x after the restart: $RES"
        jtest 'd["reply"] == "error" and d["errors"] == ["NameError"]' <<<"$RES" || return 1
        scope_gone "$old" 10 || return 1
        echo "$new: $(bx systemctl is-active "$new")"
        [[ "$(bx systemctl is-active "$new")" == active ]]
}

t "POST .../restart of a re-adopted kernel: its old scope goes, a new run in a new scope, state cleared" step_restart_adopted
t "DELETE: 204 then 404; the end snapshots of re-adopted runs; no scope, no process, no directory or record left" step_delete
t "with no kernel left the daemon idle-exits" step_idle_after

stop_box_and_check_host

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, stop ${T_STOP}s, total $(since "$T_START")s"
tap_finish
