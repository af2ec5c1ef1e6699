#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Start a daemon by hand (no systemd, AllowUnscoped=yes) on an ephemeral loopback port and run
# bench-execute against it. Usage: run-bench.sh BUILDDIR [REQUESTS]
# BENCH_EXTRA_CONF: more runner.conf lines (sections included), for experiments.
# BENCH_DAEMON: another sandbox-runnerd to measure (say, the previous build's), with this build's
# bench-execute and floors: before/after in one go.
# BENCH_USER: start the daemon as this user instead (as the service runs it; without systemd it
# then has rlimits only), rather than as root (which becomes the service user, with cgroups).
# Ends with the BENCH-RESULT line of bench_result.py (target http-over-bwrap: < 1.25).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-bench.sh BUILDDIR [REQUESTS]}" && pwd)
n=${2:-500}
tmp=$(mktemp -d /tmp/sr-bench.XXXXXX)
chmod 0755 "$tmp"   # a root-started daemon becomes its sandbox user, which must reach it
pid=
cleanup() {
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
        rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/creds" "$tmp/state" "$tmp/run"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/creds/api-token"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/creds/signing-key"
cat >"$tmp/runner.conf" <<CONF
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
LogLevel=warning
MaxConnectionsPerClient=64
${BENCH_EXTRA_CONF:-}
[Execution]
AllowUnscoped=yes
CONF
runas=()
if [ -n "${BENCH_USER:-}" ]; then
        chown -R "$(id -u "$BENCH_USER"):$(id -g "$BENCH_USER")" "$tmp/state" "$tmp/run" "$tmp/creds"
        runas=(setpriv --reuid="$(id -u "$BENCH_USER")" --regid="$(id -g "$BENCH_USER")" --clear-groups)
fi
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env -i PATH=/usr/bin:/bin ${BENCH_ENV:-} CREDENTIALS_DIRECTORY="$tmp/creds" STATE_DIRECTORY="$tmp/state" RUNTIME_DIRECTORY="$tmp/run" \
        "${runas[@]}" "${BENCH_DAEMON:-$build/src/sandbox-runnerd}" --listen "127.0.0.1:$port" --config "$tmp/runner.conf" --log-target console \
        2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && break; sleep 0.1; done

"$build/tests/bench/bench-execute" --url "http://127.0.0.1:$port" --token-file "$tmp/creds/api-token" \
        --key-file "$tmp/creds/signing-key" --state-dir "$tmp/state" -n "$n" --label unscoped | tee "$tmp/bench.out"
/usr/bin/python3 "$here/bench_result.py" execute "$tmp/bench.out"
