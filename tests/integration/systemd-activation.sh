#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Socket activation of the installed sandbox-runner under a real (private) systemd.
#
#   tests/integration/systemd-activation.sh [BUILDDIR]     (or MESON_BUILD_ROOT=BUILDDIR)
#
# Installs the meson build into a staging DESTDIR, boots a private systemd with
# tests/helpers/systemd-box.sh (see DESIGN.md section 13: the box's /etc, /usr and /var are
# overlays on a tmpfs, so nothing here touches the host), copies the staged tree into the box,
# and checks: socket activation on 127.0.0.1:4311, /health, bearer auth on /status,
# sandbox-runnerctl, structured journal entries and their catalog, that no secret reaches the
# journal, idle exit and re-activation, `systemd-analyze verify` of the units and their
# exposure score; and at the end that the host is as it was (canary in /tmp, no process of
# the box, no mount, no cgroup left).
#
# Output is TAP.  Needs root (exit 77 otherwise: the only skip; CI runs as root).

set -u
set -o pipefail

# shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
box_test_require_root
BUILD=${1:-${MESON_BUILD_ROOT:-}}

ID_STARTED=156863b03a4e4e98ad9eddd77533f056
ID_AUTH_FAILED=6055ba522e6c44348f8aa45cc7e4d746
ID_CREDENTIALS_MISSING=0d1a6da70661440fa68126b07841329a
URL=http://127.0.0.1:4311
IDLE_SEC=5

tap_plan 27
box_test_init activation

# -----------------------------------------------------------------------------------------
# Build products and install layout

step_install() {
        stage_install src/sandbox-runnerd src/keeper/sandbox-runner-keeper src/ctl/sandbox-runnerctl || return 1
        local f
        f=$(stage_path sandbox-runner.service -path '*/systemd/system/*') || { echo "no sandbox-runner.service installed"; return 1; }
        UNITDIR=$(dirname "$f")
        CTL=$(stage_path sandbox-runnerctl -type f) || { echo "sandbox-runnerctl not installed"; return 1; }
        DAEMON=$(stage_path sandbox-runnerd -type f) || { echo "sandbox-runnerd not installed"; return 1; }
        for f in sandbox-runner.socket sandbox-runner.service sandbox-runner.slice; do
                [[ -f "$STAGE$UNITDIR/$f" ]] || { echo "$UNITDIR/$f not installed"; return 1; }
        done
        echo "prefix=$PREFIX unitdir=$UNITDIR daemon=$DAEMON ctl=$CTL confdir=$CONFDIR user=$SERVICE_USER"
}

timed T_INSTALL t "meson install into a staging DESTDIR" step_install || broken="install failed"

# -----------------------------------------------------------------------------------------
# Boot

timed T_BOOT t "private systemd boots to running" step_boot || broken=${broken:-"box did not boot"}

# -----------------------------------------------------------------------------------------
# Install into the box

step_provision() {
        box_provision || return 1
        printf 'Authorization: Bearer %s\n' "$TOKEN" | bx sh -c 'umask 077; cat >/root/auth-header' || return 1
        printf '[Runner]\nIdleExitSec=%s\n' "$IDLE_SEC" |
                bx sh -c "mkdir -p '$CONFDIR/runner.conf.d' && cat >'$CONFDIR/runner.conf.d/50-test.conf'" || return 1
}

timed T_PROVISION t "project installed in the box (sysusers, tmpfiles, catalog, daemon-reload, secrets)" step_provision ||
        broken=${broken:-"provisioning failed"}

# -----------------------------------------------------------------------------------------
# Socket activation and the API

# http PATH [CURL ARGS...]: sets CODE, BODY, HEADERS.
http() {
        local path=$1 resp
        shift
        resp=$(bx curl -sS -m 20 -D /tmp/headers -w '\n%{http_code}' "$@" "$URL$path") || return 1
        CODE=${resp##*$'\n'}
        BODY=${resp%$'\n'*}
        HEADERS=$(bx cat /tmp/headers)
}

step_socket() {
        bx ip link set lo up || return 1
        bx systemctl start sandbox-runner.socket || return 1
        local s
        s=$(bx systemctl is-active sandbox-runner.socket)
        [[ "$s" == active ]] || { echo "socket is $s"; return 1; }
        s=$(bx systemctl is-active sandbox-runner.service)
        echo "service before the first connection: $s"
        [[ "$s" != active && "$s" != activating ]]
}

step_health() {
        local t0 t1
        # The first request starts the service: measure socket-activation latency (start, probes,
        # READY, answer), as seen by a client in the box.
        t0=$(date +%s%N)
        http /health || return 1
        t1=$(date +%s%N)
        echo "first request through socket activation answered in $(( (t1 - t0) / 1000000 )) ms"
        echo "HTTP $CODE $BODY"
        [[ "$CODE" == 200 ]] || return 1
        jtest 'isinstance(d, dict) and "status" in d' <<<"$BODY"
}

step_active() {
        local s
        s=$(bx systemctl is-active sandbox-runner.service)
        echo "service: $s ($(bx systemctl show -p MainPID,Type,NRestarts sandbox-runner.service | tr '\n' ' '))"
        [[ "$s" == active ]]
}

step_unauthorized() {
        http /status || return 1
        echo "HTTP $CODE $BODY"
        [[ "$CODE" == 401 ]] || return 1
        grep -qiE '^WWW-Authenticate: *Bearer' <<<"$HEADERS" || { echo "no WWW-Authenticate: Bearer header"; return 1; }
        jtest 'd.get("error") == "unauthorized"' <<<"$BODY"
}

step_authorized() {
        http /status -H @/root/auth-header || return 1
        echo "HTTP $CODE $(head -c 400 <<<"$BODY")"
        [[ "$CODE" == 200 ]] || return 1
        jtest 'isinstance(d, dict)' <<<"$BODY"
}

step_ctl_health() {
        local out
        out=$(bx "$CTL" health) || { echo "$out"; return 1; }
        echo "$out"
        [[ -n "$out" ]]
}

step_ctl_status() {
        local out
        out=$(bx "$CTL" --json --token-file /etc/credstore/sandbox-runner.api-token status) || { echo "$out"; return 1; }
        jtest 'isinstance(d, dict)' <<<"$out" || { echo "not JSON: $out"; return 1; }
        echo "--token-file: $(head -c 300 <<<"$out")"
        out=$(bx env SANDBOX_RUNNER_TOKEN="$TOKEN" "$CTL" --json status) || { echo "$out"; return 1; }
        jtest 'isinstance(d, dict)' <<<"$out" || { echo "not JSON: $out"; return 1; }
        echo "\$SANDBOX_RUNNER_TOKEN: ok"
        # and without a token it must fail
        if bx env -u SANDBOX_RUNNER_TOKEN "$CTL" --json status >/dev/null 2>&1; then
                echo "status without a token succeeded"; return 1
        fi
}

T_ACT=$EPOCHREALTIME
t "sandbox-runner.socket listens, service not started yet" step_socket || broken=${broken:-"socket did not start"}
t "GET /health activates the service: 200 JSON with \"status\"" step_health
t "sandbox-runner.service is active after the first request" step_active
t "GET /status without token: 401, WWW-Authenticate: Bearer, error unauthorized" step_unauthorized
t "GET /status with the bearer token: 200 JSON" step_authorized
t "sandbox-runnerctl health" step_ctl_health
t "sandbox-runnerctl --json status (--token-file, \$SANDBOX_RUNNER_TOKEN; refused without)" step_ctl_status

# -----------------------------------------------------------------------------------------
# Journal

step_journal_started() {
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_STARTED' and e.get('SANDBOX_VERSION')]" || {
                echo "no entry with MESSAGE_ID=$ID_STARTED and SANDBOX_VERSION; journal:"
                bx journalctl -u sandbox-runner.service -o verbose --no-pager | tail -n 40
                return 1
        }
        bx journalctl -u sandbox-runner.service -o json --no-pager MESSAGE_ID=$ID_STARTED |
                jlines "'MESSAGE=%s SANDBOX_VERSION=%s' % (L[-1].get('MESSAGE'), L[-1].get('SANDBOX_VERSION'))"
}

step_journal_auth() {
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_AUTH_FAILED' and e.get('HTTP_PATH') == '/status']" || {
                echo "no entry with MESSAGE_ID=$ID_AUTH_FAILED and HTTP_PATH=/status; journal:"
                bx journalctl -u sandbox-runner.service -o verbose --no-pager | tail -n 40
                return 1
        }
}

step_catalog() {
        local list
        # Capture first: with pipefail, grep -q closing the pipe early would fail journalctl (SIGPIPE).
        list=$(bx journalctl --list-catalog --no-pager) || { echo "journalctl --list-catalog failed"; return 1; }
        grep -qi "^$ID_STARTED" <<<"$list" ||
                { echo "$ID_STARTED not in the installed catalog"; return 1; }
        local out
        out=$(bx journalctl -x --no-pager -u sandbox-runner.service MESSAGE_ID=$ID_STARTED)
        grep -q '░░' <<<"$out" || { echo "$out"; echo "no catalog text in journalctl -x"; return 1; }
        grep '░░' <<<"$out" | head -n 4
}

step_no_secrets() {
        local hits
        hits=$(bx journalctl --no-pager -o export | grep -a -c -F -e "$TOKEN" -e "$SIGNING_KEY")
        [[ "$hits" == 0 ]] || { echo "$hits journal lines contain a secret"; return 1; }
        hits=$(bx journalctl --no-pager -o export | wc -l)
        echo "searched $hits lines of the box's journal"
}

t "journal: start event $ID_STARTED with SANDBOX_VERSION" step_journal_started
t "journal: auth failure $ID_AUTH_FAILED with HTTP_PATH=/status" step_journal_auth
t "journalctl -x shows the catalog text of the start event" step_catalog
t "no journal entry contains the token or the signing key" step_no_secrets

# -----------------------------------------------------------------------------------------
# Idle exit and re-activation

step_idle() {
        local t0 i s
        t0=$EPOCHREALTIME
        for ((i = 0; i < (IDLE_SEC + 10) * 4; i++)); do
                s=$(bx systemctl is-active sandbox-runner.service)
                [[ "$s" == active || "$s" == deactivating ]] || break
                sleep 0.25
        done
        echo "service $s after $(since "$t0") s without requests (IdleExitSec=$IDLE_SEC)"
        [[ "$s" == inactive ]] || return 1
        s=$(bx systemctl show -p Result --value sandbox-runner.service)
        [[ "$s" == success ]] || { echo "Result=$s"; return 1; }
        s=$(bx systemctl is-active sandbox-runner.socket)
        [[ "$s" == active ]] || { echo "socket is $s"; return 1; }
}

step_reactivate() {
        local t0 t1 t2
        t0=$(date +%s%N)
        http /health || return 1
        t1=$(date +%s%N)
        [[ "$CODE" == 200 ]] || { echo "HTTP $CODE $BODY"; return 1; }
        # The same request to the running service: what the activation itself added.
        http /health || return 1
        t2=$(date +%s%N)
        echo "request that re-activated the service: $(( (t1 - t0) / 1000000 )) ms; the next one: $(( (t2 - t1) / 1000000 )) ms"
        step_active
}

t "idle exit after IdleExitSec=$IDLE_SEC: service inactive (Result=success), socket still active" step_idle
t "a new request starts the service again" step_reactivate
T_ACTIVATION=$(since "$T_ACT")

# -----------------------------------------------------------------------------------------
# Without the token the daemon refuses to start, and says why in the journal.

step_no_token() {
        local s i
        bx systemctl stop sandbox-runner.service 2>/dev/null || return 1
        bx mv /etc/credstore/sandbox-runner.api-token /root/api-token.saved || return 1
        bx systemctl reset-failed sandbox-runner.service 2>/dev/null
        if bx curl -sS -m 5 -o /dev/null "$URL/health" 2>/dev/null; then
                echo "/health answered without a token installed"; return 1
        fi
        for i in $(seq 1 40); do
                s=$(bx systemctl is-active sandbox-runner.service)
                [[ "$s" == activating || "$s" == active || "$s" == deactivating ]] || break
                sleep 0.25
        done
        echo "service: $s ($(bx systemctl show -p Result,ExecMainStatus,NRestarts sandbox-runner.service | tr '\n' ' '))"
        echo "socket: $(bx systemctl is-active sandbox-runner.socket) ($(bx systemctl show -p Result --value sandbox-runner.socket))"
        [[ "$s" != active ]] || return 1
        journal_has "[e for e in L if e.get('MESSAGE_ID') == '$ID_CREDENTIALS_MISSING']" || {
                echo "no entry with MESSAGE_ID=$ID_CREDENTIALS_MISSING; journal:"
                bx journalctl -u sandbox-runner.service -o cat --no-pager | tail -n 12
                return 1
        }
        bx journalctl -u sandbox-runner.service -o json --no-pager MESSAGE_ID=$ID_CREDENTIALS_MISSING |
                jlines "'MESSAGE=%s' % L[-1].get('MESSAGE')"
}

step_token_back() {
        bx mv /root/api-token.saved /etc/credstore/sandbox-runner.api-token || return 1
        bx systemctl reset-failed sandbox-runner.service sandbox-runner.socket 2>/dev/null
        bx systemctl restart sandbox-runner.socket || return 1
        http /health || return 1
        [[ "$CODE" == 200 ]] || { echo "HTTP $CODE $BODY"; return 1; }
        step_active
}

t "without the api-token credential the service refuses to start and logs $ID_CREDENTIALS_MISSING" step_no_token
t "with the token back (reset-failed, restart the socket) it is served again" step_token_back

# -----------------------------------------------------------------------------------------
# Both dialects from one service: the shipped sandbox-runner-sciencediscovery.socket
# (FileDescriptorName=sciencediscovery, Service=sandbox-runner.service) beside sandbox-runner.socket.

SD_URL=http://127.0.0.1:4312

# sd_signed FILE: the ScienceDiscovery execution signature headers of the body in FILE (on the host),
# as their API server computes them: hex HMAC-SHA256 keyed with the bearer token over
# "<ms>\n<sha256 hex of the body>".
sd_signed() {
        python3 - "$TOKEN" "$1" <<'PY'
import hashlib, hmac, sys, time
token, body = sys.argv[1].encode(), open(sys.argv[2], "rb").read()
ts = str(int(time.time() * 1000))
sig = hmac.new(token, ts.encode() + b"\n" + hashlib.sha256(body).hexdigest().encode(), hashlib.sha256).hexdigest()
print("x-science-execution-timestamp: " + ts)
print("x-science-execution-signature: " + sig)
PY
}

step_sd_socket() {
        local s
        # A service already running keeps the fds it was started with: stop it, so that the next
        # connection starts it with both sockets' fds.
        bx systemctl stop sandbox-runner.service || return 1
        bx systemctl start sandbox-runner-sciencediscovery.socket || return 1
        s=$(bx systemctl is-active sandbox-runner-sciencediscovery.socket)
        [[ "$s" == active ]] || { echo "socket is $s"; return 1; }
        resp=$(bx curl -sS -m 20 -w '\n%{http_code}' "$SD_URL/health") || return 1
        CODE=${resp##*$'\n'}; BODY=${resp%$'\n'*}
        echo "4312: HTTP $CODE $(head -c 300 <<<"$BODY")"
        [[ "$CODE" == 200 ]] || return 1
        # Their /health: the fields their API server reads on every run (npuBroker, sandboxNetwork).
        jtest '"npuBroker" in d and "sandboxNetwork" in d' <<<"$BODY" || { echo "not their /health"; return 1; }
        http /health || return 1
        [[ "$CODE" == 200 ]] || { echo "4311: HTTP $CODE"; return 1; }
        jtest '"npuBroker" not in d and "status" in d' <<<"$BODY" || { echo "4311 is not our own /health: $BODY"; return 1; }
        echo "one service, pid $(bx systemctl show -p MainPID --value sandbox-runner.service), serves both"
}

step_sd_execute() {
        local body=$WORK/sd-body.json resp code out
        printf '{"executionId":"act-%s","agentId":"main","code":"import os\\nprint(6*7, os.getuid() != 0)","language":"python","kernelMode":"ephemeral","runnerWorkspaceKey":"activation","workspaceRoot":"/unused","permissionEpoch":{"id":"e1","sessionId":"s1","createdAt":"2026-12-03T00:00:00.000Z","reason":"test","mounts":[{"source":"workspace","mode":"read-write"}],"secretRefs":[],"networkPolicy":"none"}}' \
                "$RANDOM$RANDOM" >"$body"
        bx sh -c 'cat >/tmp/sd-body.json' <"$body" || return 1
        # Without the bearer token, and with it but unsigned: their 401s.
        resp=$(bx curl -sS -m 20 -w '\n%{http_code}' -H 'Content-Type: application/json' \
                --data-binary @/tmp/sd-body.json "$SD_URL/execute") || return 1
        code=${resp##*$'\n'}
        echo "no token: HTTP $code ${resp%$'\n'*}"
        [[ "$code" == 401 ]] && jtest 'd == {"error": "Unauthorized"}' <<<"${resp%$'\n'*}" || return 1
        resp=$(bx curl -sS -m 20 -w '\n%{http_code}' -H @/root/auth-header -H 'Content-Type: application/json' \
                --data-binary @/tmp/sd-body.json "$SD_URL/execute") || return 1
        code=${resp##*$'\n'}
        echo "unsigned: HTTP $code ${resp%$'\n'*}"
        [[ "$code" == 401 ]] && jtest 'd == {"error": "Invalid or expired execution signature"}' <<<"${resp%$'\n'*}" ||
                return 1
        sd_signed "$body" | bx sh -c 'cat >/tmp/sd-sig' || return 1
        resp=$(bx curl -sS -m 60 -w '\n%{http_code}' -H @/root/auth-header -H @/tmp/sd-sig \
                -H 'Content-Type: application/json' --data-binary @/tmp/sd-body.json "$SD_URL/execute") || return 1
        code=${resp##*$'\n'}; out=${resp%$'\n'*}
        echo "signed: HTTP $code $(head -c 400 <<<"$out")"
        [[ "$code" == 200 ]] || return 1
        jtest 'd["stdout"] == "42 True\n" and d["exitCode"] == 0 and "createdFiles" in d' <<<"$out"
}

step_sd_check() {
        local out
        out=$(bx "$DAEMON" --check 2>&1)
        grep -E '^(ok|warn|fail) +dialects' <<<"$out" || { echo "$out"; echo "no dialects item"; return 1; }
        grep -E '^warn +dialects .*127\.0\.0\.1:4312 \(sandbox-runner-sciencediscovery\.socket\)' <<<"$out" >/dev/null ||
                { echo "the dialects item does not name the socket unit"; return 1; }
}

t "sandbox-runner-sciencediscovery.socket: 4312 answers their /health, 4311 ours, one service" step_sd_socket
t "their /execute on 4312: their 401s without the token and unsigned; signed as their API server: the run's answer" step_sd_execute
t "sandbox-runnerd --check names the socket unit that speaks their dialect (asked of systemd)" step_sd_check

# -----------------------------------------------------------------------------------------
# Static checks of the installed units

step_verify() {
        local out rc u paths=()
        for u in sandbox-runner.socket sandbox-runner-sciencediscovery.socket sandbox-runner.service sandbox-runner.slice; do
                paths+=("$UNITDIR/$u")
        done
        # Documentation=man:... pages are checked when the build installs man pages (then a
        # missing one is a packaging bug); a build without them (-Dman=disabled, no scdoc)
        # cannot satisfy that check, so it is left out there.
        local man=yes
        if [[ -z "$(cd "$STAGE" && find . -path '*/man/man[0-9]/*' -type f | head -n1)" ]]; then
                echo "no man pages in this build: --man=no"
                man=no
        elif ! bx sh -c 'command -v man' >/dev/null; then
                echo "man(1) is not installed: --man=no"
                man=no
        fi
        out=$(bx systemd-analyze verify --man=$man "${paths[@]}" 2>&1)
        rc=$?
        [[ -n "$out" ]] && echo "$out"
        (( rc == 0 )) || return 1
        # warnings about our own units count as failures too
        ! grep -q 'sandbox-runner' <<<"$out"
}

step_security() {
        local out score
        out=$(bx systemd-analyze security --no-pager sandbox-runner.service 2>&1) || { echo "$out"; return 1; }
        score=$(grep -o 'Overall exposure level for sandbox-runner.service: [0-9.]*' <<<"$out" | awk '{ print $NF }')
        [[ -n "$score" ]] || { echo "$out" | tail -n 5; return 1; }
        echo "exposure: $score"
}

t "systemd-analyze verify sandbox-runner.{socket,service,slice}, sandbox-runner-sciencediscovery.socket" step_verify
t "systemd-analyze security sandbox-runner.service" step_security

# -----------------------------------------------------------------------------------------
# Stop the box; the host must be as it was.

stop_box_and_check_host

note "timing: install ${T_INSTALL}s, boot ${T_BOOT}s, provision ${T_PROVISION}s, activation tests ${T_ACTIVATION}s, stop ${T_STOP}s, total $(since "$T_START")s"
tap_finish
