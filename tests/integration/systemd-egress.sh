#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Egress under a real (private) systemd: the gateway as sandbox-runner-egress@<rev>.socket/.service.
#
#   tests/integration/systemd-egress.sh [BUILDDIR]         (or MESON_BUILD_ROOT=BUILDDIR)
#
# Installs the meson build into a staging DESTDIR, boots a private systemd with
# tests/helpers/systemd-box.sh (DESIGN.md section 13: the box's /etc, /usr and /var are overlays
# on a tmpfs, nothing here touches the host), installs the staged tree into the box (the polkit
# rule installed where polkitd reads it, as systemd-scopes.sh checks), and sets up:
#  - a [Network] policy in a drop-in of the build's configuration directory
#    (Mode=allowlist, Allow=allowed.test *.wild.test, Mirrors=127.0.0.0/8);
#  - test hosts in the box's own network namespace (its loopback; the box has no other
#    interface): an HTTP server that answers with the request line and Host header it got, on
#    127.0.0.2:80, and a TCP echo on 127.0.0.2:7000, run as a transient service of the box;
#    the names in the box's /etc/hosts (an overlay);
#  - a drop-in that shortens the gateway's --idle-exit-sec from 60 to $SR_EGRESS_IDLE_SEC
#    (default 5; SR_EGRESS_IDLE_SEC=default keeps the unit's 60 s and waits for it).
# Then, from inside the box, with signed requests:
#  - `systemctl start sandbox-runner.socket`; /health: sandboxNetwork allowlist, gateway
#    systemd, available, the revision REV; sandbox-runner-egress@REV.socket active (listening),
#    its service not started yet;
#  - a run fetching http://allowed.test/ (200, the upstream saw the origin-form request and Host
#    allowed.test) and tunnelling bytes with CONNECT; a name not listed is refused (403);
#  - sandbox-runner-egress@REV.service was started on demand by that first connection, and
#    stops when idle while the socket stays; the next run starts it again;
#  - the gateway's journal entries (journalctl -u 'sandbox-runner-egress@*') carry
#    SANDBOX_EGRESS_HOST, SANDBOX_EGRESS_DECISION and the run's SANDBOX_EXECUTION_ID;
#  - PUT /api/network-policy rotates: a socket unit for the new revision, the old one stopped;
#  - an instance with an upstream route (what a ScienceDiscovery run's sandboxEgressProxy url
#    makes): its snapshot names the upstream, its credentials are in <instance>.auth (0600, the
#    service user's), which the unit loads as a credential; a CONNECT through its socket goes to
#    the test's upstream proxy (127.0.0.5:3128) with Proxy-Authorization, and the credentials
#    appear in no journal entry;
#  - `systemd-analyze security sandbox-runner-egress@REV.service`: the score as a TAP comment.
# At the end nothing of the service user is left in the box; after stopping the box the host is
# as it was (canary in /tmp, no process of the box, no mount, no cgroup left).
#
# Output is TAP.  Needs root (exit 77 otherwise: the only skip; CI runs as root).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}
SRCROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

ID_EGRESS_ALLOWED=9394c9ce8cf744608d25f91394ffee57
ID_EGRESS_DENIED=9b6badc02f3e4187a43154179427c795
ID_EGRESS_STARTED=cf725a2c399b4f63a2a73ae8e917e5a5
ID_EGRESS_STOPPED=6158ec6d15184288be0cc7ec83e1613d
ID_POLICY_ROTATED=5eb4d70b0c2047a3b089db951c38dea5
IDLE_SEC=${SR_EGRESS_IDLE_SEC:-5}
ECHO_PORT=7000

tap_plan 19
box_test_init egress

# jlines2 EXPR ARG: jlines with ARG bound to a
jlines2() {
        "$PY" -c 'import json, sys
a = sys.argv[2]
L = [json.loads(l) for l in sys.stdin if l.strip()]
r = eval(sys.argv[1])
if isinstance(r, str):
    print(r)
sys.exit(0 if r else 1)' "$@" 2>/dev/null
}

# PUT /api/network-policy from inside the box (bearer only; the library's client has no PUT).
PUT_PY='import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", 4311, timeout=60)
c.request("PUT", "/api/network-policy", body=sys.argv[1].encode(),
          headers={"Authorization": "Bearer " + open("/root/sr-token").read(), "Content-Type": "application/json"})
r = c.getresponse()
raw = r.read()
try:
    doc = json.loads(raw)
except ValueError:
    doc = {"_raw": raw.decode("utf-8", "replace")}
print(json.dumps({"http": r.status, "body": doc}))'

# The test hosts, a transient service of the box (its network namespace, loopback only).
HOSTS_PY='
import json, socket, socketserver, sys, threading

class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 128

class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            while True:
                d = self.request.recv(65536)
                if not d:
                    break
                self.request.sendall(d)
            self.request.shutdown(socket.SHUT_WR)
        except OSError:
            pass

class Http(socketserver.BaseRequestHandler):
    lock = threading.Lock()
    def handle(self):
        s = self.request
        s.settimeout(10)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            lines = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            hosts = [l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("host:")]
            rec = {"requestLine": lines[0], "host": hosts[0] if len(hosts) == 1 else hosts}
            with Http.lock, open("/root/seen.jsonl", "a") as f:
                f.write(json.dumps(rec) + "\n")
            a = json.dumps(rec).encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(a), a))
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

for addr, h in ((("127.0.0.2", 80), Http), (("127.0.0.2", int(sys.argv[1])), Echo)):
    srv = Server(addr, h)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
print("test hosts ready", flush=True)
threading.Event().wait()
'

# -----------------------------------------------------------------------------------------
# Build products and install layout

step_install() {
        local u
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper src/egress/sandbox-runner-egress src/bridge/sandbox-runner-bridge || return 1
        stage_check_units || return 1
        UNITDIR=$(dirname "$(stage_path sandbox-runner.service -path '*/systemd/system/*')")
        for u in sandbox-runner-egress@.socket sandbox-runner-egress@.service; do
                [[ -f "$STAGE$UNITDIR/$u" ]] || { echo "$UNITDIR/$u not installed"; return 1; }
        done
        GATEWAY=$(stage_path sandbox-runner-egress -type f) || { echo "sandbox-runner-egress not installed"; return 1; }
        stage_path sandbox-runner-bridge -type f >/dev/null || { echo "sandbox-runner-bridge not installed"; return 1; }
        EGRESS_EXECSTART=$(sed -n 's/^ExecStart=//p' "$STAGE$UNITDIR/sandbox-runner-egress@.service")
        [[ "$EGRESS_EXECSTART" == "$GATEWAY "* ]] ||
                { echo "sandbox-runner-egress@.service runs '$EGRESS_EXECSTART', not the installed $GATEWAY"; return 1; }
        [[ "$EGRESS_EXECSTART" == *"--idle-exit-sec=60"* ]] ||
                echo "note: the unit's ExecStart has no --idle-exit-sec=60: $EGRESS_EXECSTART"
        # The rule also grants starting and stopping sandbox-runner-egress@<rev>.socket.
        stage_check_polkit_rule || return 1
        echo "prefix=$PREFIX unitdir=$UNITDIR confdir=$CONFDIR user=$SERVICE_USER gateway=$GATEWAY rule=$RULEFILE"
        echo "gateway unit: ExecStart=$EGRESS_EXECSTART"
}

timed T_INSTALL t "meson install into a staging DESTDIR (egress units, gateway, bridge; polkit rule where polkitd reads it)" \
        step_install || broken="install failed"

# -----------------------------------------------------------------------------------------
# Boot

step_boot_egress() {
        box_boot || return 1
        echo "$(box_boot_info), network interfaces: $(bx ls /sys/class/net | tr '\n' ' ')"
}

timed T_BOOT t "private systemd boots to running" step_boot_egress || broken=${broken:-"box did not boot"}

# -----------------------------------------------------------------------------------------
# Install into the box; policy, test hosts

SANDBOX_CLIENT=$("$PY" - "$SRCROOT/tests/integration/egress-e2e.py" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("egress_e2e", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
sys.stdout.write(m.CLIENT)
EOF
)

step_provision() {
        box_provision || return 1
        box_install_client || return 1
        bx ip link set lo up || return 1
        [[ -n "$SANDBOX_CLIENT" ]] || { echo "no sandbox client from egress-e2e.py"; return 1; }
        printf '%s' "$SANDBOX_CLIENT" >"$WORK/sandbox-client.py" || return 1
        printf '%s' "$HOSTS_PY" | bx sh -c 'cat >/root/test-hosts.py' || return 1
        printf '%s' "$PUT_PY" | bx sh -c 'cat >/root/sr-put-policy.py' || return 1

        # The network policy, as an operator writes it: a drop-in of the configuration.
        printf '[Network]\nMode=allowlist\nAllow=allowed.test *.wild.test\nMirrors=127.0.0.0/8\n' |
                bx sh -c "mkdir -p '$CONFDIR/runner.conf.d' && cat >'$CONFDIR/runner.conf.d/50-test-egress.conf'" || return 1
        # The test hosts' names (the box's /etc is an overlay: the host's file is untouched).
        printf '127.0.0.2 allowed.test\n127.0.0.2 a.wild.test\n127.0.0.2 notlisted.test\n' |
                bx sh -c 'cat >>/etc/hosts' || return 1
        bx findmnt -n -o FSTYPE --target /etc/hosts | grep -qx overlay || { echo "/etc/hosts is not on the overlay"; return 1; }

        # The gateway's idle exit, shortened for the test (the unit says 60 s).
        if [[ "$IDLE_SEC" != default ]]; then
                printf '[Service]\nExecStart=\nExecStart=%s\n' "${EGRESS_EXECSTART/--idle-exit-sec=60/--idle-exit-sec=$IDLE_SEC}" |
                        bx sh -c 'mkdir -p /etc/systemd/system/sandbox-runner-egress@.service.d &&
                                  cat >/etc/systemd/system/sandbox-runner-egress@.service.d/50-test-idle.conf' || return 1
                echo "drop-in: $(bx cat /etc/systemd/system/sandbox-runner-egress@.service.d/50-test-idle.conf | tr '\n' ' ')"
        else
                IDLE_SEC=60
        fi
        bx systemctl daemon-reload || return 1

        bx systemd-run --quiet --unit=sr-test-hosts --property=Type=exec /usr/bin/python3 /root/test-hosts.py "$ECHO_PORT" ||
                return 1
        local i
        for ((i = 0; i < 50; i++)); do
                bx /usr/bin/python3 -c 'import socket, sys
for p in (80, int(sys.argv[1])):
    socket.create_connection(("127.0.0.2", p), timeout=1).close()' "$ECHO_PORT" 2>/dev/null && break
                sleep 0.1
        done
        (( i < 50 )) || { echo "test hosts did not come up"; bx journalctl -u sr-test-hosts -o cat --no-pager | tail; return 1; }
        echo "test hosts: sr-test-hosts.service $(bx systemctl is-active sr-test-hosts.service) on 127.0.0.2:80 and :$ECHO_PORT"
}

timed T_PROVISION t "installed in the box: secrets, [Network] drop-in in $CONFDIR/runner.conf.d, test hosts on the box's loopback" \
        step_provision || broken=${broken:-"provisioning failed"}

# -----------------------------------------------------------------------------------------
# Helpers

# run_ops ID OPS-JSON: POST /execute of the sandbox client (tests/integration/egress-e2e.py) with
# these operations; RES gets the client's JSON with body.ops = the operations' results.
run_ops() {
        local body
        body=$("$PY" -c 'import json, sys
print(json.dumps({"executionId": sys.argv[1], "workspaceId": "egress", "language": "python",
                  "code": open(sys.argv[3]).read(), "stdin": sys.argv[2], "timeoutMs": 30000}))' "$1" "$2" "$WORK/sandbox-client.py") ||
                return 1
        client post /execute "$body" || return 1
        RES=$("$PY" -c 'import json, sys
d = json.load(sys.stdin)
try:
    d["body"]["ops"] = json.loads(d["body"].get("stdout") or "")
except (ValueError, AttributeError):
    d["body"]["ops"] = None
print(json.dumps(d))' <<<"$RES")
}
policy_put() { RES=$(bx /usr/bin/python3 /root/sr-put-policy.py "$1") || { echo "PUT failed: $RES"; return 1; }; }
summary() {
        jprint '"HTTP %s status=%s exitCode=%s network=%s elapsedMs=%s stderr=%r%s" % (d["http"], d["body"].get("status"),
                d["body"].get("exitCode"), d["body"].get("network"), d.get("elapsedMs"), (d["body"].get("stderr") or "")[:300],
                (" error=%r" % d["body"]["error"]) if "error" in d["body"] else "")' <<<"$RES"
        jprint '"\n".join("op %d: %s" % (i, json.dumps(o)[:400]) for i, o in enumerate(d["body"].get("ops") or []))' <<<"$RES"
}
# unit_state UNIT: "ActiveState/SubState"
unit_state() { bx systemctl show -p ActiveState,SubState --value "$1" | paste -sd/; }
# wait_state UNIT REGEX SEC: until unit_state matches
wait_state() {
        local i s
        for ((i = 0; i <= $3 * 10; i++)); do
                s=$(unit_state "$1")
                [[ "$s" =~ $2 ]] && return 0
                sleep 0.1
        done
        echo "$1 is $s after $3 s (wanted $2)"
        return 1
}
# journal_egress PY-EXPR [ARG]: retry a little, journald may lag behind.
journal_egress() {
        local i
        for i in $(seq 1 20); do
                bx journalctl -u 'sandbox-runner-egress@*' -o json --no-pager 2>/dev/null | jlines2 "$@" >/dev/null && return 0
                sleep 0.25
        done
        return 1
}

RUN=$$-$RANDOM          # execution ids of this run
REV=
INST=

# -----------------------------------------------------------------------------------------
# Socket activation, health, the gateway's socket unit

step_socket() {
        bx systemctl start sandbox-runner.socket || return 1
        [[ "$(bx systemctl is-active sandbox-runner.socket)" == active ]]
}

step_health() {
        health || { echo "$HEALTH"; return 1; }
        jprint '"HTTP %s sandboxNetwork=%s scopes=%s" % (d["http"], json.dumps(d["body"].get("sandboxNetwork")),
                json.dumps(d["body"].get("scopes")))' <<<"$HEALTH"
        jtest 'd["http"] == 200' <<<"$HEALTH" || return 1
        jtest 'd["body"]["sandboxNetwork"]["mode"] == "allowlist" and d["body"]["sandboxNetwork"]["available"] is True' <<<"$HEALTH" ||
                { echo "sandboxNetwork is not allowlist + available"; bx journalctl -u sandbox-runner.service -o cat --no-pager | tail -n 15; return 1; }
        jtest 'd["body"]["sandboxNetwork"].get("gateway") == "systemd"' <<<"$HEALTH" ||
                echo "note: sandboxNetwork.gateway is not \"systemd\""
        REV=$(jprint 'd["body"]["sandboxNetwork"]["revision"]' <<<"$HEALTH")
        [[ "$REV" =~ ^[0-9a-f]{16}$ ]] || { echo "revision '$REV' is not 16 hex digits"; return 1; }
        # Units and files are named by the instance: the revision and the build of the helpers.
        INST=$(jprint 'd["body"]["sandboxNetwork"]["instance"]' <<<"$HEALTH")
        [[ "$INST" =~ ^${REV}-[0-9a-f]{8}$ ]] || { echo "instance '$INST' is not $REV-<8 hex digits>"; return 1; }
        jtest 'd["body"]["scopes"]["available"] is True' <<<"$HEALTH" ||
                echo "note: scopes are not available here: the gateway cannot name executions (peer cgroup)"
        client get /api/network-policy || return 1
        r '"GET /api/network-policy: %s" % json.dumps(d["body"])'
        rt '(d["body"].get("revision") == a and d["body"].get("allow") == ["*.wild.test", "allowed.test"] and
             d["body"].get("mirrors") == ["127.0.0.0/8"])' "$REV" || { echo "the policy is not the drop-in's"; return 1; }
}

step_egress_socket() {
        local rc=0 s
        bx systemctl status --no-pager --lines=0 'sandbox-runner-egress@*.socket' 2>&1 | grep -vE '^ +(├|└|│)' | head -n 12
        s=$(unit_state "sandbox-runner-egress@$INST.socket")
        [[ "$s" == active/listening ]] || { echo "sandbox-runner-egress@$INST.socket is $s"; rc=1; }
        bx systemctl show -p Listen,SocketUser,SocketMode --value "sandbox-runner-egress@$INST.socket" | paste -sd' '
        bx ls -ld /run/sandbox-runner /run/sandbox-runner/egress
        bx ls -l "/run/sandbox-runner/egress/" | sed -n '2,$p'
        bx test -S "/run/sandbox-runner/egress/$INST.sock" || { echo "no socket /run/sandbox-runner/egress/$INST.sock"; rc=1; }
        # The gateway runs as a dynamic user: the policy snapshot must be readable by others.
        local mode
        mode=$(bx stat -c %a /run/sandbox-runner/egress)
        (( (8#$mode & 8#001) != 0 )) || {
                echo "/run/sandbox-runner/egress is mode $mode: the gateway (DynamicUser=yes) cannot reach $INST.json"; rc=1; }
        mode=$(bx stat -c %a "/run/sandbox-runner/egress/$INST.json")
        (( (8#$mode & 8#004) != 0 )) || { echo "$INST.json is mode $mode: not readable by the gateway"; rc=1; }
        s=$(unit_state "sandbox-runner-egress@$INST.service")
        echo "sandbox-runner-egress@$INST.service before any run: $s"
        [[ "$s" == inactive/dead ]] || { echo "the gateway service runs before any connection"; rc=1; }
        local others
        others=$(bx systemctl list-units --all --no-legend --plain 'sandbox-runner-egress@*.socket' | awk 'NF { print $1 }' |
                 grep -vx "sandbox-runner-egress@$INST.socket")
        [[ -z "$others" ]] || { echo "other gateway sockets: $others"; rc=1; }
        return $rc
}

t "sandbox-runner.socket started" step_socket || broken=${broken:-"socket did not start"}
t "/health: sandboxNetwork allowlist (gateway systemd), available, revision; GET policy = the drop-in's" step_health ||
        broken=${broken:-"no egress in /health"}
t "sandbox-runner-egress@<rev>.socket listening for the current revision only, service not started yet, policy readable" \
        step_egress_socket

# -----------------------------------------------------------------------------------------
# Runs through the gateway unit

ID_FETCH=fetch-$RUN
MARK=/egress-$RUN
step_fetch() {
        local rc=0
        run_ops "$ID_FETCH" "[{\"op\": \"http\", \"url\": \"http://allowed.test$MARK?x=1\", \"headers\": {\"Host\": \"169.254.169.254\"}},
                                 {\"op\": \"connect\", \"authority\": \"allowed.test:$ECHO_PORT\", \"bytes\": 65536},
                                 {\"op\": \"http\", \"url\": \"http://notlisted.test$MARK\"},
                                 {\"op\": \"info\"}]" || return 1
        summary
        rt 'd["http"] == 200 and d["body"]["status"] == "exited" and d["body"]["exitCode"] == 0 and d["body"]["ops"]' || return 1
        rt 'd["body"]["ops"][0].get("status") == 200' || { echo "http://allowed.test/ did not answer 200"; rc=1; }
        local seen
        seen=$(bx cat /root/seen.jsonl 2>/dev/null | grep -F "$MARK?x=1")
        echo "upstream saw: $seen"
        jtest 'd["requestLine"] == "GET %s?x=1 HTTP/1.1" % a and d["host"] == "allowed.test"' "$MARK" <<<"$seen" ||
                { echo "upstream did not see the origin-form request with Host allowed.test"; rc=1; }
        rt '(d["body"]["ops"][1].get("status") == 200 and d["body"]["ops"][1].get("received") == 65536 and
             d["body"]["ops"][1].get("sha256Received") == d["body"]["ops"][1].get("sha256Sent"))' ||
                { echo "CONNECT allowed.test:$ECHO_PORT did not echo 64 KiB"; rc=1; }
        rt 'd["body"]["ops"][2].get("status") == 403 and "not in the allowlist" in d["body"]["ops"][2].get("body", "")' ||
                { echo "notlisted.test was not refused with 403 'not in the allowlist'"; rc=1; }
        rt 'd["body"]["ops"][3]["interfaces"] == ["lo"] and d["body"]["ops"][3]["gatewaySocket"] is True' ||
                { echo "sandbox shape: not only lo, or no gateway socket"; rc=1; }
        rt 'd["body"].get("limits", {}).get("enforcedBy") == "scope"' || echo "note: the run had no scope"
        if (( rc != 0 )); then
                echo "--- gateway units and journal:"
                bx systemctl status --no-pager --lines=0 "sandbox-runner-egress@$INST.socket" "sandbox-runner-egress@$INST.service" 2>&1 |
                        grep -vE '^ +(├|└|│)'
                bx journalctl -b --no-pager -o cat -u "sandbox-runner-egress@$INST.socket" -u "sandbox-runner-egress@$INST.service" | tail -n 25
                echo "--- daemon journal:"
                bx journalctl -b --no-pager -o cat -u sandbox-runner.service | tail -n 15
                health && jprint '"--- /health sandboxNetwork now: %s" % json.dumps(d["body"].get("sandboxNetwork"))' <<<"$HEALTH"
        fi
        return $rc
}

GW_START=
step_on_demand() {
        local s inv rc=0
        s=$(unit_state "sandbox-runner-egress@$INST.service")
        inv=$(bx systemctl show -p InvocationID --value "sandbox-runner-egress@$INST.service")
        GW_START=$(bx systemctl show -p ExecMainStartTimestampMonotonic --value "sandbox-runner-egress@$INST.service")
        echo "sandbox-runner-egress@$INST.service after the first run: $s (invocation $inv, started at monotonic $GW_START)"
        bx systemctl status --no-pager --lines=0 "sandbox-runner-egress@$INST.service" 2>&1 | grep -vE '^ +(├|└|│)' | head -n 10
        [[ -n "$inv" && "${GW_START:-0}" != 0 ]] || { echo "the gateway service was never started"; return 1; }
        [[ "$s" == active/running ]] || { echo "(it is no longer running: idle exit after ${IDLE_SEC}s?)"; rc=1; }
        bx systemctl show -p User,DynamicUser,MainPID "sandbox-runner-egress@$INST.service" | paste -sd' '
        local main
        main=$(bx systemctl show -p MainPID --value "sandbox-runner-egress@$INST.service")
        if [[ "$main" != 0 ]]; then
                echo "gateway process: $(bx ps -o pid=,user=,args= -p "$main")"
        fi
        journal_egress "[e for e in L if e.get('MESSAGE_ID') == '$ID_EGRESS_STARTED' and e.get('SANDBOX_EGRESS_REVISION') == a
                         and e.get('SANDBOX_SOCKET_ACTIVATED') == '1']" "$REV" ||
                { echo "no 'gateway ready' entry ($ID_EGRESS_STARTED) with SANDBOX_SOCKET_ACTIVATED=1"; rc=1; }
        return $rc
}

step_journal() {
        local rc=0
        journal_egress "[e for e in L if e.get('MESSAGE_ID') == '$ID_EGRESS_ALLOWED' and e.get('SANDBOX_EGRESS_HOST') == 'allowed.test'
                         and e.get('SANDBOX_EGRESS_DECISION') == 'allowed' and e.get('SANDBOX_EXECUTION_ID') == a
                         and e.get('SANDBOX_EGRESS_METHOD') == 'GET' and e.get('SANDBOX_EGRESS_REVISION') == '$REV']" "$ID_FETCH" || {
                echo "no allowed entry for GET allowed.test with SANDBOX_EXECUTION_ID=$ID_FETCH; have:"; rc=1; }
        journal_egress "[e for e in L if e.get('MESSAGE_ID') == '$ID_EGRESS_ALLOWED' and e.get('SANDBOX_EGRESS_HOST') == 'allowed.test'
                         and e.get('SANDBOX_EGRESS_METHOD') == 'CONNECT' and e.get('SANDBOX_EXECUTION_ID') == a]" "$ID_FETCH" || {
                echo "no allowed entry for CONNECT allowed.test:$ECHO_PORT with SANDBOX_EXECUTION_ID=$ID_FETCH"; rc=1; }
        journal_egress "[e for e in L if e.get('MESSAGE_ID') == '$ID_EGRESS_DENIED' and e.get('SANDBOX_EGRESS_HOST') == 'notlisted.test'
                         and e.get('SANDBOX_EGRESS_DECISION') == 'denied' and e.get('SANDBOX_EXECUTION_ID') == a
                         and 'not in the allowlist' in e.get('SANDBOX_EGRESS_REASON', '')]" "$ID_FETCH" || {
                echo "no denied entry for notlisted.test with SANDBOX_EXECUTION_ID=$ID_FETCH and the reason"; rc=1; }
        bx journalctl -u 'sandbox-runner-egress@*' -o json --no-pager |
                jlines "'\n'.join('%s %s %s:%s %s exec=%s reason=%r' % (e.get('_SYSTEMD_UNIT'), e.get('SANDBOX_EGRESS_DECISION'),
                         e.get('SANDBOX_EGRESS_HOST'), e.get('SANDBOX_EGRESS_PORT'), e.get('SANDBOX_EGRESS_METHOD'),
                         e.get('SANDBOX_EXECUTION_ID'), e.get('SANDBOX_EGRESS_REASON')) for e in L if e.get('SANDBOX_EGRESS_DECISION'))"
        bx journalctl -u 'sandbox-runner-egress@*' -o cat --no-pager MESSAGE_ID=$ID_EGRESS_ALLOWED | head -n 2
        return $rc
}

t "a signed run fetches http://allowed.test/ (origin form, Host from the URI), tunnels with CONNECT; notlisted.test 403" \
        step_fetch || broken=${broken:-"no run got through the gateway"}
t "sandbox-runner-egress@<rev>.service was started on demand by the first connection (socket-activated)" step_on_demand
t "gateway journal (-u sandbox-runner-egress@*): SANDBOX_EGRESS_HOST/DECISION/REASON and the run's SANDBOX_EXECUTION_ID" \
        step_journal

step_idle() {
        local rc=0 s t0
        t0=$EPOCHREALTIME
        wait_state "sandbox-runner-egress@$INST.service" '^inactive/dead$' $((IDLE_SEC + 15)) || rc=1
        echo "sandbox-runner-egress@$INST.service inactive ~$(since "$t0") s after the run (idle exit after ${IDLE_SEC} s)"
        s=$(unit_state "sandbox-runner-egress@$INST.socket")
        [[ "$s" == active/listening ]] || { echo "the socket unit is $s after the idle exit"; rc=1; }
        bx systemctl show -p Result,ExecMainStatus,NRestarts "sandbox-runner-egress@$INST.service" | paste -sd' '
        [[ "$(bx systemctl show -p Result --value "sandbox-runner-egress@$INST.service")" == success ]] ||
                { echo "the gateway did not exit successfully"; rc=1; }
        journal_egress "[e for e in L if e.get('MESSAGE_ID') == '$ID_EGRESS_STOPPED' and e.get('SANDBOX_EGRESS_REVISION') == a]" "$REV" ||
                { echo "no idle-exit entry ($ID_EGRESS_STOPPED)"; rc=1; }
        bx journalctl -u "sandbox-runner-egress@$INST.service" -o cat --no-pager MESSAGE_ID=$ID_EGRESS_STOPPED | tail -n 1
        return $rc
}

ID_AGAIN=again-$RUN
step_again() {
        run_ops "$ID_AGAIN" "[{\"op\": \"http\", \"url\": \"http://a.wild.test$MARK-again\"}]" || return 1
        summary
        rt 'd["http"] == 200 and d["body"]["status"] == "exited" and d["body"]["ops"] and d["body"]["ops"][0].get("status") == 200' || return 1
        local start
        start=$(bx systemctl show -p ExecMainStartTimestampMonotonic --value "sandbox-runner-egress@$INST.service")
        echo "gateway started again at monotonic $start (first start $GW_START)"
        [[ "${start:-0}" != 0 && "$start" != "$GW_START" ]] || { echo "the gateway service was not started again"; return 1; }
}

t "the gateway service stops when idle (--idle-exit-sec $IDLE_SEC), the socket stays listening" step_idle
t "the next run starts it again on demand (a.wild.test: 200)" step_again

# -----------------------------------------------------------------------------------------
# Rotation

REV2=
INST2=
step_rotate() {
        local rc=0 s i
        policy_put '{"mode": "allowlist", "allow": ["allowed.test"], "mirrors": ["127.0.0.0/8"]}' || return 1
        r '"PUT: HTTP %s %s" % (d["http"], json.dumps(d["body"]))'
        rt 'd["http"] == 200' || return 1
        REV2=$(r 'd["body"]["revision"]')
        [[ "$REV2" =~ ^[0-9a-f]{16}$ && "$REV2" != "$REV" ]] || { echo "revision did not change ($REV -> $REV2)"; return 1; }
        INST2=$REV2-${INST##*-}   # the same build
        s=$(unit_state "sandbox-runner-egress@$INST2.socket")
        [[ "$s" == active/listening ]] || { echo "sandbox-runner-egress@$INST2.socket is $s"; rc=1; }
        for ((i = 0; i < 50; i++)); do
                s=$(bx systemctl show -p LoadState,ActiveState --value "sandbox-runner-egress@$INST.socket" | paste -sd/)
                [[ "$s" == not-found/* || "$s" == */inactive ]] && break
                sleep 0.1
        done
        echo "old sandbox-runner-egress@$INST.socket: $s; new @$INST2.socket: $(unit_state "sandbox-runner-egress@$INST2.socket")"
        [[ "$s" == not-found/* || "$s" == */inactive ]] || { echo "the old revision's socket unit was not stopped"; rc=1; }
        bx test -e "/run/sandbox-runner/egress/$INST.sock" && { echo "the old socket file is still there"; rc=1; }
        bx journalctl -u sandbox-runner.service -o cat --no-pager MESSAGE_ID=$ID_POLICY_ROTATED | tail -n 2
        run_ops "rotated-$RUN" "[{\"op\": \"http\", \"url\": \"http://a.wild.test$MARK-rotated\"},
                                     {\"op\": \"http\", \"url\": \"http://allowed.test$MARK-rotated\"}]" || return 1
        summary
        rt 'd["body"]["ops"] and d["body"]["ops"][0].get("status") == 403 and d["body"]["ops"][1].get("status") == 200' ||
                { echo "under the new revision a.wild.test must be refused and allowed.test allowed"; rc=1; }
        journal_egress "[e for e in L if e.get('_SYSTEMD_UNIT') == 'sandbox-runner-egress@%s.service' % a
                         and e.get('SANDBOX_EGRESS_HOST') == 'a.wild.test' and e.get('SANDBOX_EGRESS_DECISION') == 'denied']" "$INST2" ||
                { echo "no denied entry of sandbox-runner-egress@$INST2.service for a.wild.test"; rc=1; }
        return $rc
}

t "PUT /api/network-policy: sandbox-runner-egress@<new rev>.socket listening, the old one stopped; runs use the new policy" \
        step_rotate

# An upstream HTTP proxy in the box: records each request line and its Proxy-Authorization, then
# relays CONNECT tunnels to the origin.
UPSTREAM_PY='
import json, select, socket, socketserver, threading

class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

class Proxy(socketserver.BaseRequestHandler):
    def handle(self):
        c = self.request
        c.settimeout(10)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        auth = [l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("proxy-authorization:")]
        with open("/root/upstream.jsonl", "a") as f:
            f.write(json.dumps({"requestLine": lines[0], "auth": auth}) + "\n")
        method, target, _ = lines[0].split(" ", 2)
        if method != "CONNECT":
            c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        host, port = target.rsplit(":", 1)
        o = socket.create_connection((host, int(port)), timeout=10)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + rest)
        socks = [c, o]
        while socks:
            r, _, _ = select.select(socks, [], [], 10)
            if not r:
                break
            for s in r:
                d = s.recv(65536)
                other = o if s is c else c
                if not d:
                    socks.remove(s)
                    other.shutdown(socket.SHUT_WR)
                else:
                    other.sendall(d)

Server(("127.0.0.5", 3128), Proxy).serve_forever()
'

# A client of a gateway socket: CONNECT allowed.test:80, then GET MARK through the tunnel.
TUNNEL_PY='
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(15)
s.connect(sys.argv[1])
s.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    d = s.recv(65536)
    if not d:
        break
    buf += d
print(buf.split(b"\r\n", 1)[0].decode("latin-1"))
s.sendall(b"GET " + sys.argv[2].encode() + b" HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
out = buf.split(b"\r\n\r\n", 1)[1]
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print(out.decode("latin-1"))
'

# Basic base64("runner:s3cret-upstream")
UP_AUTH="Basic cnVubmVyOnMzY3JldC11cHN0cmVhbQ=="
step_upstream() {
        local rc=0 inst=00000000000000a1-${INST##*-} out i
        printf '%s' "$UPSTREAM_PY" | bx sh -c 'cat >/root/upstream.py' || return 1
        printf '%s' "$TUNNEL_PY" | bx sh -c 'cat >/root/tunnel.py' || return 1
        bx systemd-run --quiet --unit=sr-test-upstream --property=Type=exec /usr/bin/python3 /root/upstream.py || return 1
        for ((i = 0; i < 50; i++)); do
                bx /usr/bin/python3 -c 'import socket; socket.create_connection(("127.0.0.5", 3128), timeout=1).close()' \
                        2>/dev/null && break
                sleep 0.1
        done
        # What the daemon writes for such a run: the snapshot (0644) and the credentials (0600).
        printf '{"mode":"allowlist","allow":["allowed.test"],"mirrors":["127.0.0.0/8"],"upstream":"http://127.0.0.5:3128","upstreamAuth":"test-tag"}' |
                bx sh -c "cat >/run/sandbox-runner/egress/$inst.json && chmod 0644 /run/sandbox-runner/egress/$inst.json" || return 1
        printf '%s' "$UP_AUTH" | bx sh -c "umask 077 && cat >/run/sandbox-runner/egress/$inst.auth &&
                chown $SERVICE_USER: /run/sandbox-runner/egress/$inst.auth" || return 1
        bx systemctl start "sandbox-runner-egress@$inst.socket" || return 1
        out=$(bx /usr/bin/python3 /root/tunnel.py "/run/sandbox-runner/egress/$inst.sock" "$MARK-upstream") || rc=1
        echo "through the gateway: $(head -c 300 <<<"$out" | tr '\n' ' ')"
        [[ "$out" == "HTTP/1.1 200 "* && "$out" == *"$MARK-upstream"* ]] ||
                { echo "the tunnel did not reach the origin"; rc=1; }
        out=$(bx cat /root/upstream.jsonl 2>/dev/null)
        echo "upstream saw: $out"
        jlines2 '[e for e in L if e["requestLine"] == "CONNECT allowed.test:80 HTTP/1.1" and e["auth"] == [a]]' "$UP_AUTH" <<<"$out" ||
                { echo "the upstream did not get CONNECT allowed.test:80 with the credentials"; rc=1; }
        bx journalctl -u "sandbox-runner-egress@$inst.service" -o cat --no-pager | tail -n 3
        if bx journalctl --no-pager -o export | grep -q -e 's3cret-upstream' -e 'cnVubmVyOnMzY3JldC11cHN0cmVhbQ'; then
                echo "the credentials are in the journal"; rc=1
        fi
        bx systemctl stop "sandbox-runner-egress@$inst.socket" "sandbox-runner-egress@$inst.service" sr-test-upstream.service
        bx rm -f "/run/sandbox-runner/egress/$inst.json" "/run/sandbox-runner/egress/$inst.auth"
        return $rc
}

t "an instance with an upstream route: CONNECT goes through the upstream proxy with the credentials the unit loaded" \
        step_upstream

step_security() {
        local out score
        out=$(bx systemd-analyze security --no-pager "sandbox-runner-egress@${INST2:-$INST}.service" 2>&1) ||
                { echo "$out" | tail -n 5; return 1; }
        score=$(grep -E 'Overall exposure level' <<<"$out")
        echo "$score"
        grep -E '^ *✗' <<<"$out" | head -n 12
        SECURITY_SCORE=$score
        [[ -n "$score" ]]
}
SECURITY_SCORE=
t "systemd-analyze security sandbox-runner-egress@<rev>.service runs (score below)" step_security
[[ -n "$SECURITY_SCORE" ]] && note "systemd-analyze security: $SECURITY_SCORE"

# -----------------------------------------------------------------------------------------
# Nothing left in the box

step_box_clean() {
        local left
        left=$(scope_units)
        [[ -z "$left" ]] || { echo "scope units left: $left"; return 1; }
        left=$(stray_processes)
        [[ -z "$left" ]] || { echo "processes of $SERVICE_USER other than the daemon: $left"; return 1; }
        left=$(bx journalctl -u sandbox-runner.service -u 'sandbox-runner-egress@*' -p warning -o cat --no-pager |
               sort | uniq -c | sort -rn | head -n 8)
        [[ -n "$left" ]] && echo "warnings and errors of the daemon and the gateway:" && echo "$left"
        bx systemctl list-units --all --no-legend --plain 'sandbox-runner-egress@*' | awk 'NF { print "unit: " $1, $3, $4 }'
        return 0
}

t "in the box: no scope left, no process of the service user but the daemon" step_box_clean

# -----------------------------------------------------------------------------------------
# Stop the box; the host must be as it was.

stop_box_and_check_host

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, stop ${T_STOP}s, total $(since "$T_START")s"
tap_finish
