#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The cost of an environment (DESIGN.md §14): start a daemon by hand (no systemd,
# AllowUnscoped=yes) that builds ENVIRONMENT (python-base) after start-up, report that build's time
# and the prefix's size, then run bench-execute with --environment ENVIRONMENT: POST /execute-shell
# `true` with and without "environment", interleaved in one run with the floors, and the ratio of
# their medians (target: at most 1.10), with the quartiles of each batch's own ratio (20 of each in
# turn), and the BENCH-RESULT line of bench_result.py.
# Usage: run-bench-environment.sh BUILDDIR [REQUESTS [ENVIRONMENT]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-bench-environment.sh BUILDDIR [REQUESTS [ENVIRONMENT]]}" && pwd)
n=${2:-300}
# The smoke test (meson.build) names r-base: the same read-only prefix bind, a build of a few
# seconds instead of python-base's minute.
envname=${3:-python-base}
tmp=$(mktemp -d /tmp/sr-bench-env.XXXXXX)
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
# A list: the empty assignment drops the default (python-base), then the one measured.
Bootstrap=
Bootstrap=${envname}
[Runner]
IdleExitSec=0
LogLevel=warning
MaxConnectionsPerClient=64
[Execution]
AllowUnscoped=yes
CONF
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
t0=$(date +%s%N)
env -i PATH=/usr/bin:/bin CREDENTIALS_DIRECTORY="$tmp/creds" STATE_DIRECTORY="$tmp/state" RUNTIME_DIRECTORY="$tmp/run" \
        "$build/src/sandbox-runnerd" --listen "127.0.0.1:$port" --config "$tmp/runner.conf" --log-target console \
        2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && break; sleep 0.1; done

token=$(cat "$tmp/creds/api-token")
phase= last=
for _ in $(seq 1200); do
        phase=$(curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/environments/setup" |
                /usr/bin/python3 -c 'import json,sys; print(next((e["phase"] for e in json.load(sys.stdin)["setup"] if e["name"]==sys.argv[1]), "none"))' "$envname")
        [ "$phase" = "$last" ] || echo "# $envname: $phase after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
        last=$phase
        [ "$phase" = ready ] || [ "$phase" = failed ] && break
        sleep 0.5
done
t1=$(date +%s%N)
if [ "$phase" != ready ]; then
        echo "${envname} did not become ready ($phase)" >&2
        tail -20 "$tmp/daemon.log" >&2
        exit 1
fi
curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/environments/${envname}/revisions" |
        /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["revisions"][-1]
print("# %s: %d packages, %.1f MB, built in %.1f s (the setup step), provisioner %s" % (
      sys.argv[1], len(r["packages"]), r.get("sizeBytes", 0) / 1e6, r.get("durationMs", 0) / 1e3, r.get("provisioner")))
print(json.dumps({"label": sys.argv[1] + "-build", "packages": len(r["packages"]), "sizeBytes": r.get("sizeBytes"),
                  "buildMs": r.get("durationMs")}))' "$envname" | tee "$tmp/build.out"
printf "# from start to ready: %s ms; on disk: %s\n" "$(( (t1 - t0) / 1000000 ))" \
        "$(du -sh "$tmp/state/environments/envs/${envname}/live/" | cut -f1)"

"$build/tests/bench/bench-execute" --url "http://127.0.0.1:$port" --token-file "$tmp/creds/api-token" \
        --key-file "$tmp/creds/signing-key" --state-dir "$tmp/state" -n "$n" --label unscoped \
        --environment ${envname} | tee "$tmp/bench.out"
cat "$tmp/build.out" "$tmp/bench.out" >"$tmp/all.out"
/usr/bin/python3 "$here/bench_result.py" environment "$tmp/all.out"
