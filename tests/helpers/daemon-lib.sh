#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# daemon-lib.sh: what the shell suites that drive the REAL daemon by hand share
# (tests/integration/ctl-exec.sh, ctl-workspace.sh): start sandbox-runnerd with its own temporary
# credentials, state, runtime directory and configuration on an ephemeral loopback port, wait for
# GET /health, and stop it (by pid only) at exit; plus the TAP helpers of those suites.  Sourced,
# never run; it starts nothing itself, and ends only the processes the test started.  (The
# private-systemd suites use box-test-lib.sh instead.)  A test looks like:
#
#   set -u
#   # shellcheck source=SCRIPTDIR/../helpers/daemon-lib.sh
#   source "$(dirname "${BASH_SOURCE[0]}")/../helpers/daemon-lib.sh"
#   daemon_lib_init NAME "$@"       # DAEMON, CTL (absolute), PYTHON, WORK; the EXIT trap
#   daemon_credentials [DIR...]     # TOKEN, KEY in $WORK/creds; $WORK/runner.conf; mkdir DIR...
#   daemon_start NAME               # PORT, URL, DAEMON_PID; bails out when it does not answer
#   daemon_require_sandbox          # TAP skip (77) when the daemon cannot make sandboxes
#   ...ok/not_ok/check/expect_rc...
#   daemon_check_secrets [SECRET...] # TAP: no secret in the kept outputs nor the log; still up
#   daemon_finish                   # stop the daemon; the script's status: no test failed
#
# Setup
#   daemon_lib_init NAME DAEMON CTL [PROGRAM...]   TAP skip (exit 77) unless DAEMON and CTL are
#                       executable and /usr/bin/python3 and each PROGRAM exist; WORK=/tmp/NAME.*
#                       (0755: a root-started daemon becomes its sandbox user); EXIT trap
#                       daemon_lib_cleanup (test_cleanup if the test defines it, then
#                       stop_daemon, then WORK removed)
#   stop_pid PID        SIGTERM, 5 s of grace, SIGKILL, reap
#   random_hex N        N random bytes as hex
#   pick_port           a free loopback TCP port
#   health_ok           the daemon at $URL answers GET /health with 200
#
# TAP (N tests, FAILED of them failed; the outputs of the last CLI run in $WORK/out, $WORK/err)
#   ok/not_ok DESC, diag_outputs, check DESC CMD..., expect_rc RC DESC, out_is TEXT, err_is TEXT,
#   out_empty, err_empty, json_check PYTHON-EXPRESSION (over j, the JSON on stdout)
#
# Secrets
#   keep_outputs OUT ERR   keep a copy of a CLI run's outputs (RUNS of them)
#   daemon_check_secrets [SECRET...]   TAP: TOKEN, KEY and each SECRET in none of the kept
#                       outputs, TOKEN and KEY not in $WORK/daemon.log, the daemon still running

PYTHON=/usr/bin/python3
LOOPBACK=127.0.0.1
DAEMON_PID=
RUNS=0

# ---------------------------------------------------------------------------
# Setup and teardown
daemon_lib_init() {
        local name=$1 prog
        DAEMON=${2:-}
        CTL=${3:-}
        shift 3
        if [ -z "$DAEMON" ] || [ ! -x "$DAEMON" ] || [ -z "$CTL" ] || [ ! -x "$CTL" ]; then
                echo "1..0 # SKIP usage: $name.sh SANDBOX-RUNNERD SANDBOX-RUNNERCTL (both executable)"
                exit 77
        fi
        if [ ! -x "$PYTHON" ]; then
                echo "1..0 # SKIP $PYTHON not found"
                exit 77
        fi
        for prog in "$@"; do
                if ! command -v "$prog" >/dev/null; then
                        echo "1..0 # SKIP $prog not found"
                        exit 77
                fi
        done
        # The daemon runs in its own directory.
        DAEMON=$(realpath "$DAEMON") || exit 1
        CTL=$(realpath "$CTL") || exit 1

        WORK=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || exit 1
        # Started as root, the daemon becomes its sandbox user: that user must reach the state below.
        chmod 0755 "$WORK"
        trap daemon_lib_cleanup EXIT
        trap 'exit 1' INT TERM HUP
}

stop_pid() {
        # By pid only: SIGTERM, a grace period, then SIGKILL.
        local pid=$1
        [ -n "$pid" ] || return 0
        if kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null
                for _ in $(seq 50); do
                        kill -0 "$pid" 2>/dev/null || break
                        sleep 0.1
                done
                kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null
}

stop_daemon() {
        stop_pid "$DAEMON_PID"
        DAEMON_PID=
}

daemon_lib_cleanup() {
        # The test's own background processes first (it defines test_cleanup when it has any).
        if declare -F test_cleanup >/dev/null; then
                test_cleanup
        fi
        stop_daemon
        rm -rf "$WORK"
}

random_hex() {
        od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

pick_port() {
        "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# health_ok: the daemon answers GET /health with 200 (the CLI's exit 0).
health_ok() {
        env -u SANDBOX_RUNNER_URL "$CTL" --url "$URL" --timeout 1 health >/dev/null 2>&1
}

# ---------------------------------------------------------------------------
# The daemon: its own credentials, state and runtime directories, a minimal configuration.

# daemon_credentials [DIR...]: random TOKEN and KEY in $WORK/creds (api-token, signing-key),
# $WORK/state, $WORK/run and $WORK/DIR... (0700), and $WORK/runner.conf.
daemon_credentials() {
        local d dirs=("$WORK/creds" "$WORK/state" "$WORK/run")
        TOKEN=$(random_hex 32)
        KEY=$(random_hex 32)
        if [ "${#TOKEN}" -ne 64 ] || [ "${#KEY}" -ne 64 ] || [ "$TOKEN" = "$KEY" ]; then
                echo "Bail out! could not make random credentials"
                exit 1
        fi
        for d in "$@"; do
                dirs+=("$WORK/$d")
        done
        mkdir -m 0700 "${dirs[@]}"
        (umask 077 && printf '%s' "$TOKEN" >"$WORK/creds/api-token" && printf '%s' "$KEY" >"$WORK/creds/signing-key")
        printf '[Environments]\nBootstrap=\n[Runner]\nIdleExitSec=0\n[Execution]\nAllowUnscoped=yes\n' >"$WORK/runner.conf"
}

# daemon_start NAME: start the daemon on a free loopback port (PORT, URL, DAEMON_PID), its output
# in $WORK/daemon.log, and wait up to 20 s for GET /health; another port when the one picked was
# taken meanwhile.  Bail out (exit 1) when it does not answer.
daemon_start() {
        local name=$1 attempt started='' v
        local daemon_env=(PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}" LANG=C.UTF-8
                          CREDENTIALS_DIRECTORY="$WORK/creds" STATE_DIRECTORY="$WORK/state"
                          RUNTIME_DIRECTORY="$WORK/run")
        for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS ASAN_SYMBOLIZER_PATH; do
                [ -n "${!v:-}" ] && daemon_env+=("$v=${!v}")
        done

        for attempt in 1 2 3 4 5; do
                PORT=$(pick_port) || break
                URL="http://$LOOPBACK:$PORT"
                echo "=== $name: start #$attempt on port $PORT ===" >>"$WORK/daemon.log"
                (cd "$WORK" && exec env -i "${daemon_env[@]}" "$DAEMON" --listen "$LOOPBACK:$PORT" \
                        --config "$WORK/runner.conf" --log-target console) </dev/null >>"$WORK/daemon.log" 2>&1 &
                DAEMON_PID=$!
                for _ in $(seq 200); do
                        kill -0 "$DAEMON_PID" 2>/dev/null || break
                        if health_ok; then
                                started=yes
                                break
                        fi
                        sleep 0.1
                done
                [ -n "$started" ] && break
                stop_daemon
                grep -qi 'in use' "$WORK/daemon.log" || break
        done
        if [ -z "$started" ]; then
                echo "Bail out! the daemon did not start or did not answer GET /health within 20 s"
                sed 's/^/# daemon: /' "$WORK/daemon.log" | tail -n 30
                exit 1
        fi
}

# daemon_require_sandbox: executions need a working sandbox; without one there is nothing to test.
daemon_require_sandbox() {
        local reason
        "$CTL" --url "$URL" --json health >"$WORK/health.json" 2>/dev/null
        if ! "$PYTHON" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["sandbox"]["usable"] else 1)' \
                "$WORK/health.json"; then
                reason=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["sandbox"].get("reason", "?"))' \
                        "$WORK/health.json" 2>/dev/null)
                echo "1..0 # SKIP the daemon cannot make sandboxes here: ${reason:-unknown}"
                exit 77
        fi
}

# keep_outputs OUT ERR: a copy of a CLI run's outputs for daemon_check_secrets (RUNS counts them).
keep_outputs() {
        RUNS=$((RUNS + 1))
        cp "$1" "$WORK/all-out.$RUNS"
        cp "$2" "$WORK/all-err.$RUNS"
}

# daemon_check_secrets [SECRET...]: TAP: neither TOKEN, KEY nor any SECRET shows in any output the
# test kept ($WORK/all-out.N, $WORK/all-err.N; RUNS of them), TOKEN and KEY not in the daemon's
# log, and the daemon is still running.
daemon_check_secrets() {
        local secrets=(-e "$TOKEN" -e "$KEY") s
        for s in "$@"; do
                secrets+=(-e "$s")
        done
        # shellcheck disable=SC2317  # called by check
        secret_free() {
                ! cat "$WORK"/all-out.* "$WORK"/all-err.* | grep -qF "${secrets[@]}"
        }
        check "neither the token nor the signing key appears in any output ($RUNS runs)" secret_free
        check "nor in the daemon's log" sh -c "! grep -qF -e '$TOKEN' -e '$KEY' '$WORK/daemon.log'"
        check "the daemon is still running" kill -0 "$DAEMON_PID"
}

# daemon_finish: stop the daemon, print the plan; the status is the script's (no test failed).
daemon_finish() {
        stop_daemon
        echo "1..$N"
        [ "$FAILED" -eq 0 ]
}

# ---------------------------------------------------------------------------
# TAP helpers (ok, not_ok, check, expect_rc, out_is, err_is, ...)
# shellcheck source=SCRIPTDIR/tap-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap-lib.sh"
# json_check PYTHON-EXPRESSION: stdout is JSON and the expression (over `j`) is true.
json_check() {
        "$PYTHON" -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
' "$WORK/out" "$1"
}
