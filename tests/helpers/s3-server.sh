#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# An S3 server on loopback for the length of one command:
#
#   s3-server.sh [--verifier sigv4-check.py] -- COMMAND [ARGS...]
#
# Starts the npm package s3rver 3.7.1 (installed by tests/setup.sh under $S3RVER_PREFIX, default
# /usr/local/lib/sandbox-runner-tests) with node on 127.0.0.1 and a port it picks itself (-p 0,
# read back from its first line), storing into a temporary directory; creates the bucket with a
# signed PUT (curl --aws-sigv4) and waits until a signed GET of it answers 200; then runs COMMAND
# with S3_ENDPOINT, S3_BUCKET, S3_REGION, S3_ACCESS_KEY and S3_SECRET (s3rver's S3RVER/S3RVER) in
# its environment and exits with its status.
#
# --verifier FILE: also starts `FILE serve` (tests/helpers/sigv4-check.py: a loopback server that
# checks each request's signature with botocore and answers 403 SignatureDoesNotMatch when it is
# wrong) with the same credentials, and passes SIGV4_CHECK=FILE, SIGV4_ENDPOINT=its URL and
# PYTHON3 (the interpreter with Debian's python3-botocore) on to COMMAND.
#
# Whatever happens, both servers are stopped on the way out (SIGTERM, SIGKILL after 2 s) by the
# pids this script started and nothing else, and so is COMMAND on SIGTERM/SIGINT; the temporary
# directory goes. Its own lines on stdout are TAP comments; when node, s3rver or botocore are
# missing or a server does not come up it prints "Bail out!" naming what to install and exits 1
# (never a skip).
set -uo pipefail

prefix=${S3RVER_PREFIX:-/usr/local/lib/sandbox-runner-tests}
s3rver_dir=$prefix/node_modules/s3rver
s3rver_version=3.7.1
node=${NODE:-node}
python3=${PYTHON3:-/usr/bin/python3}
bucket=sr-test
region=us-east-1
access_key=S3RVER
secret=S3RVER
empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

note() { echo "# s3-server: $*"; }
bail() { echo "Bail out! $*"; exit 1; }

verifier=
while [ $# -gt 0 ]; do
        case $1 in
        --verifier) verifier=${2:?}; shift 2 ;;
        --) shift; break ;;
        *) bail "s3-server.sh: unknown argument '$1' (usage: s3-server.sh [--verifier FILE] -- COMMAND...)" ;;
        esac
done
[ $# -gt 0 ] || bail "s3-server.sh: a command to run after --"

command -v "$node" >/dev/null ||
        bail "node not found: install Debian's nodejs and npm (tests/setup.sh does)"
[ -f "$s3rver_dir/bin/s3rver.js" ] ||
        bail "s3rver not found in $prefix: tests/setup.sh installs it (npm install --prefix $prefix s3rver@$s3rver_version)"
found=$("$node" -p "require('$s3rver_dir/package.json').version" 2>/dev/null)
[ "$found" = "$s3rver_version" ] ||
        bail "s3rver in $prefix is version '$found', the tests expect $s3rver_version (tests/setup.sh installs it)"
command -v curl >/dev/null || bail "curl not found: install Debian's curl"
if [ -n "$verifier" ]; then
        "$python3" -c 'import botocore.auth' 2>/dev/null ||
                bail "$python3 cannot import botocore: install Debian's python3-botocore (tests/setup.sh does)"
fi

top=$(mktemp -d /tmp/sr-s3-XXXXXX) || bail "mktemp failed"
s3rver_pid= verifier_pid= child_pid=

stop_pid() {
        local pid=$1
        [ -n "$pid" ] || return 0
        kill -TERM "$pid" 2>/dev/null || return 0
        for _ in $(seq 20); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
}

cleanup() {
        stop_pid "$child_pid"
        stop_pid "$verifier_pid"
        stop_pid "$s3rver_pid"
        rm -rf "$top"
}
trap cleanup EXIT
trap 'note "stopping on a signal"; exit 1' TERM INT

dump_log() {
        local f
        for f in "$top"/*.log; do
                [ -f "$f" ] || continue
                tail -n 15 "$f" | sed "s|^|# $(basename "$f"): |"
        done
}

# s3rver: -p 0, its port from "S3rver listening on 127.0.0.1:PORT"; request logs go to its log
mkdir "$top/data"
"$node" "$s3rver_dir/bin/s3rver.js" -d "$top/data" -a 127.0.0.1 -p 0 </dev/null >"$top/s3rver.log" 2>&1 &
s3rver_pid=$!
port=
for _ in $(seq 200); do
        port=$(sed -n 's/^S3rver listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$top/s3rver.log")
        [ -n "$port" ] && break
        kill -0 "$s3rver_pid" 2>/dev/null || { dump_log; bail "s3rver (pid $s3rver_pid) exited before listening"; }
        sleep 0.05
done
[ -n "$port" ] || { dump_log; bail "s3rver did not listen within 10 s"; }
endpoint=http://127.0.0.1:$port

s3_curl() {
        curl -sS -o /dev/null -w '%{http_code}' --max-time 5 --aws-sigv4 "aws:amz:$region:s3" \
                --user "$access_key:$secret" -H "x-amz-content-sha256: $empty_sha256" "$@"
}
status=$(s3_curl -X PUT "$endpoint/$bucket")
[ "$status" = 200 ] || { dump_log; bail "creating the bucket $bucket in s3rver at $endpoint: HTTP $status"; }
for _ in $(seq 50); do
        status=$(s3_curl "$endpoint/$bucket")
        [ "$status" = 200 ] && break
        sleep 0.1
done
[ "$status" = 200 ] || { dump_log; bail "s3rver at $endpoint does not list the bucket $bucket: HTTP $status"; }
note "s3rver $s3rver_version (pid $s3rver_pid) at $endpoint, bucket $bucket"

extra_env=()
if [ -n "$verifier" ]; then
        "$python3" "$verifier" serve --access-key "$access_key" --secret "$secret" --region "$region" \
                --port-file "$top/verifier.port" </dev/null >"$top/verifier.log" 2>&1 &
        verifier_pid=$!
        for _ in $(seq 200); do
                [ -s "$top/verifier.port" ] && break
                kill -0 "$verifier_pid" 2>/dev/null || { dump_log; bail "sigv4-check.py serve exited early"; }
                sleep 0.05
        done
        [ -s "$top/verifier.port" ] || { dump_log; bail "sigv4-check.py serve did not listen within 10 s"; }
        extra_env=(SIGV4_CHECK="$verifier" SIGV4_ENDPOINT="http://127.0.0.1:$(cat "$top/verifier.port")"
                   PYTHON3="$python3")
        note "SigV4 verifier (pid $verifier_pid) at http://127.0.0.1:$(cat "$top/verifier.port")"
fi

start=$SECONDS
env S3_ENDPOINT="$endpoint" S3_BUCKET="$bucket" S3_REGION="$region" S3_ACCESS_KEY="$access_key" \
        S3_SECRET="$secret" "${extra_env[@]}" "$@" &
child_pid=$!
wait "$child_pid"
rc=$?
child_pid=
note "command exited with $rc after $((SECONDS - start)) s"
[ "$rc" = 0 ] || dump_log
exit "$rc"
