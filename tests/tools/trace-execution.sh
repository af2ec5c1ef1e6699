#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The path of one execution through the daemon's source files, measured (docs/architecture.md,
# "Module map"): builds the tree with -finstrument-functions in BUILDDIR (default
# /tmp/sr-trace-build), starts the daemon by hand as root (it becomes the service user; no systemd,
# AllowUnscoped=yes) with tests/tools/trace-hook.c preloaded, runs one warm-up execution and then
# the measured one (`sandbox-runnerctl exec -- true`, workspace "trace"), and hands the function
# entries of the measured one to trace-report.py: the files it passes through, the cross-file
# calls ("stops"), those that go back up a layer, and the file most returned to.
#   tests/tools/trace-execution.sh [BUILDDIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-/tmp/sr-trace-build}
[ "$(id -u)" = 0 ] || { echo "run me as root" >&2; exit 1; }

if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build" "$top" -Dtests=disabled -Dc_args=-finstrument-functions >/dev/null
fi
ninja -C "$build" src/sandbox-runnerd src/keeper/sandbox-runner-keeper src/ctl/sandbox-runnerctl >/dev/null
tmp=$(mktemp -d /tmp/sr-trace.XXXXXX)
chmod 0755 "$tmp"
pid=
cleanup() {
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
        rm -rf "$tmp"
}
trap cleanup EXIT
gcc -O2 -shared -fPIC -o "$tmp/trace-hook.so" "$top/tests/tools/trace-hook.c"

mkdir -p "$tmp/creds" "$tmp/state" "$tmp/run"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/creds/api-token"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/creds/signing-key"
printf '[Environments]\nBootstrap=\n[Runner]\nIdleExitSec=0\nLogLevel=warning\n[Execution]\nAllowUnscoped=yes\n' >"$tmp/runner.conf"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env -i PATH=/usr/bin:/bin LD_PRELOAD="$tmp/trace-hook.so" SR_TRACE_FILE="$tmp/trace" \
        CREDENTIALS_DIRECTORY="$tmp/creds" STATE_DIRECTORY="$tmp/state" RUNTIME_DIRECTORY="$tmp/run" \
        "$build/src/sandbox-runnerd" --listen "127.0.0.1:$port" --config "$tmp/runner.conf" \
        --log-target console 2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && break; sleep 0.1; done

ctl=("$build/src/ctl/sandbox-runnerctl" --url "http://127.0.0.1:$port" --token-file "$tmp/creds/api-token"
     --signing-key-file "$tmp/creds/signing-key")
"${ctl[@]}" exec --workspace trace -- true >/dev/null
sleep 1
from=$(stat -c %s "$tmp/trace")
"${ctl[@]}" exec --workspace trace -- true >/dev/null
sleep 1
to=$(stat -c %s "$tmp/trace")
tail -c +"$((from + 1))" "$tmp/trace" | head -c "$((to - from))" >"$tmp/measured"
/usr/bin/python3 "$top/tests/tools/trace-report.py" "$build/src/sandbox-runnerd" "$top/src" "$tmp/measured"
