#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of the workspace, managed-run and settings commands of `sandbox-runnerctl` against the
# REAL daemon, started here by hand on an ephemeral loopback port (as ctl-exec.sh does):
#   upload (streamed PUT, multipart) → ls → download (digest verified, same bytes) → runs that read
#   and modify a file → revisions → download --revision → tree → restore → the content is back;
#   rm, teardown; quota show/set/restore; policy show/set/allow/deny/mirrors with revisions that
#   change, and a PUT of the same content that keeps the revision; shell --follow streaming lines
#   while the run goes on and exiting with the run's code; shell --detach + logs (--offset,
#   --stream, --follow, -v) + cancel + status-of; a download whose Repr-Digest does not match
#   (from a small fake server) fails and leaves no file, as does an interrupted download; usage
#   errors; an unreachable daemon; and that neither the token nor the signing key is ever printed.
#
# Usage: ctl-workspace.sh /path/to/sandbox-runnerd /path/to/sandbox-runnerctl
# Exit 77 (skip) when a program is missing or the daemon reports that it cannot make sandboxes.

# Commands for the sandbox are single-quoted on purpose: they expand inside the run.
# shellcheck disable=SC2016

set -u

# shellcheck source=SCRIPTDIR/../helpers/daemon-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/daemon-lib.sh"
daemon_lib_init ctl-workspace "${1:-}" "${2:-}" sha256sum cmp od timeout
FAKE_PID=
BG_PID=
# Called by daemon-lib.sh's EXIT trap before the daemon is stopped.
test_cleanup() {
        stop_pid "$BG_PID"
        stop_pid "$FAKE_PID"
}

# ---------------------------------------------------------------------------
# The daemon (tests/helpers/daemon-lib.sh)
daemon_credentials files dl
daemon_start ctl-workspace
daemon_require_sandbox

# ---------------------------------------------------------------------------
# TAP helpers beyond daemon-lib.sh's

clean_env=(env -u SANDBOX_RUNNER_TOKEN -u SANDBOX_RUNNER_TOKEN_FILE -u SANDBOX_RUNNER_URL
           -u SANDBOX_RUNNER_SIGNING_KEY -u SANDBOX_RUNNER_SIGNING_KEY_FILE
           CREDENTIALS_DIRECTORY="$WORK/creds")
# ctl ARGS...: the CLI against the daemon; stdout, stderr and the exit code in out, err, RC.
STDIN=/dev/null
ctl() {
        ctl_at "$URL" "$@"
}
# ctl_at URL ARGS...: the same against another address.
ctl_at() {
        local url=$1
        shift
        "${clean_env[@]}" "$CTL" --url "$url" "$@" <"$STDIN" >"$WORK/out" 2>"$WORK/err"
        RC=$?
        keep_outputs "$WORK/out" "$WORK/err"
}
out_has() {
        grep -qF -- "$1" "$WORK/out"
}
err_has() {
        grep -qF -- "$1" "$WORK/err"
}
# json_get PYTHON-EXPRESSION: print the expression over stdout's JSON.
json_get() {
        "$PYTHON" -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
' "$WORK/out" "$1"
}
sha_of() {
        sha256sum "$1" | cut -d' ' -f1
}
# no_temp_files DIR: no ".<name>.XXXXXX" left from a download.
no_temp_files() {
        ! find "$1" -maxdepth 1 -name '.*.??????' | grep -q .
}

UNIQ="$$-$RANDOM"
WS="ctl-ws-$UNIQ"

# ---------------------------------------------------------------------------
# upload → ls → download
head -c 200000 /dev/urandom >"$WORK/files/data file.bin"
DATA_SHA=$(sha_of "$WORK/files/data file.bin")

ctl upload "$WS" "$WORK/files/data file.bin"
expect_rc 0 "upload WORKSPACE LOCAL"
check "upload: prints the path, the bytes and the sha256" out_is "data file.bin: 200000 bytes, sha256 $DATA_SHA"

ctl upload "$WS" "$WORK/files/data file.bin" 'sub dir/n%me ?#ü.bin'
expect_rc 0 "upload to a REMOTE path that needs escaping"
check "upload REMOTE: the daemon wrote that very name" out_has "sub dir/n%me ?#ü.bin: 200000 bytes, sha256 $DATA_SHA"

ctl --json upload "$WS" "$WORK/files/data file.bin" copy.bin
expect_rc 0 "upload --json"
check "upload --json: the daemon's answer" json_check "j['written'][0]['path'] == 'copy.bin' and j['written'][0]['sha256'] == '$DATA_SHA'"

printf 'from standard input\n' >"$WORK/files/stdin.txt"
STDIN=$WORK/files/stdin.txt
ctl upload "$WS" - stdin.txt
STDIN=/dev/null
expect_rc 0 "upload - REMOTE (standard input, sent chunked)"
check "upload -: bytes and sha256" out_is "stdin.txt: 20 bytes, sha256 $(sha_of "$WORK/files/stdin.txt")"

ctl ls "$WS"
expect_rc 0 "ls WORKSPACE"
check "ls: the uploaded file with its size" grep -qE '^file +200000  data file\.bin$' "$WORK/out"
check "ls: the directory, with a slash" grep -qE '^dir +-  sub dir/$' "$WORK/out"

ctl ls "$WS" 'sub dir'
expect_rc 0 "ls WORKSPACE DIR"
check "ls DIR: the escaped name came through" grep -qE '^file +200000  n%me \?#ü\.bin$' "$WORK/out"

ctl --json ls "$WS"
expect_rc 0 "ls --json"
check "ls --json: entries" json_check "sorted(e['name'] for e in j['entries']) == ['copy.bin', 'data file.bin', 'stdin.txt', 'sub dir']"

ctl download "$WS" 'data file.bin' "$WORK/dl/data.bin"
expect_rc 0 "download WORKSPACE REMOTE LOCAL"
check "download: the same bytes" cmp -s "$WORK/dl/data.bin" "$WORK/files/data file.bin"
check "download: says the digest was verified" out_is "$WORK/dl/data.bin: 200000 bytes, sha256 $DATA_SHA (verified)"
check "download: no temporary file left" no_temp_files "$WORK/dl"

ctl download "$WS" 'sub dir/n%me ?#ü.bin' "$WORK/dl/"
expect_rc 0 "download into a directory, escaped remote name"
check "download into a directory: named after the remote file" cmp -s "$WORK/dl/n%me ?#ü.bin" "$WORK/files/data file.bin"

ctl -v download "$WS" 'data file.bin' -
expect_rc 0 "download ... - (standard output), --verbose"
check "download -: the bytes on standard output" cmp -s "$WORK/out" "$WORK/files/data file.bin"
check "download -v: the digest check on standard error" err_has "SHA-256 $DATA_SHA matches Repr-Digest"

ctl download "$WS" no-such-file "$WORK/dl/none"
expect_rc 1 "download of a missing file"
check "missing file: the daemon's error" grep -q '(not_found, HTTP 404)$' "$WORK/err"
check "missing file: nothing created" test ! -e "$WORK/dl/none"
check "missing file: no temporary file left" no_temp_files "$WORK/dl"

# ---------------------------------------------------------------------------
# Runs, revisions, restore
printf 'version 1\n' >"$WORK/files/doc.txt"
ctl upload "$WS" "$WORK/files/doc.txt"
expect_rc 0 "upload doc.txt"

RUN1="ctl-ws-r1-$UNIQ"
RUN2="ctl-ws-r2-$UNIQ"
ctl shell --workspace "$WS" --id "$RUN1" 'cat doc.txt'
expect_rc 0 "a run that reads the file"
check "the run sees the uploaded content" out_is "version 1"
ctl shell --workspace "$WS" --id "$RUN2" 'echo "version 2" >doc.txt'
expect_rc 0 "a run that modifies the file"

ctl download "$WS" doc.txt -
expect_rc 0 "download the modified file"
check "the modification is there" out_is "version 2"

ctl --json revisions "$WS"
expect_rc 0 "revisions --json"
check "revisions: at least 2, both runs among them" \
        json_check "len(j['revisions']) >= 2 and {'$RUN1', '$RUN2'} <= {r['executionId'] for r in j['revisions']}"
ctl revisions "$WS"
expect_rc 0 "revisions"
check "revisions: a header and a line per run" \
        sh -c "grep -q '^EXECUTION ' '$WORK/out' && grep -q '^$RUN1 ' '$WORK/out' && grep -q '^$RUN2 ' '$WORK/out'"

ctl download --revision "$RUN1" "$WS" doc.txt "$WORK/dl/doc-r1.txt"
expect_rc 0 "download --revision of the first run"
check "download --revision: the content as the first run left it" cmp -s "$WORK/dl/doc-r1.txt" "$WORK/files/doc.txt"
check "download --revision: verified" out_has "(verified)"

ctl tree "$WS" "$RUN1"
expect_rc 0 "tree WORKSPACE EXEC_ID"
check "tree: doc.txt with mode and size" grep -qE '^file +[0-7]{4} +10  doc\.txt$' "$WORK/out"
ctl tree "$WS" "$RUN1" 'sub dir'
expect_rc 0 "tree WORKSPACE EXEC_ID DIR"
check "tree DIR: the file in the sub-directory" out_has 'n%me ?#ü.bin'

ctl restore "$WS" "$RUN1"
expect_rc 0 "restore WORKSPACE EXEC_ID"
check "restore: names the revision" out_has "workspace/$WS/$RUN1"
ctl download "$WS" doc.txt -
expect_rc 0 "download after the restore"
check "restore: the content is back" out_is "version 1"

ctl restore "$WS" "no-such-run-$UNIQ"
expect_rc 1 "restore to an unknown revision"
check "unknown revision: not_found" grep -q '(not_found, HTTP 404)$' "$WORK/err"

ctl rm "$WS" copy.bin
expect_rc 0 "rm WORKSPACE PATH"
check "rm: says what was removed" out_has "copy.bin"
ctl ls "$WS"
check "rm: the file is gone" sh -c "! grep -q 'copy.bin' '$WORK/out'"
ctl rm "$WS" copy.bin
expect_rc 1 "rm of a missing file"

ctl teardown "$WS"
expect_rc 0 "teardown of an idle workspace"
check "teardown: nothing was stopped" out_has "stopped"

# ---------------------------------------------------------------------------
# Multipart upload
MP=$WORK/files/mp
mkdir -p "$MP/a" "$MP/b"
head -c 1000 /dev/urandom >"$MP/one.bin"
head -c 70000 /dev/urandom >"$MP/a/two.bin"
printf 'three\n' >"$MP/b/three.txt"
ctl upload "$WS" --multipart "$MP/one.bin" "$MP/a/two.bin" "$MP/b/three.txt"
expect_rc 0 "upload --multipart with 3 files"
check "multipart: one line per file, with the local sha256" sh -c "
        grep -qx 'one.bin: 1000 bytes, sha256 $(sha_of "$MP/one.bin")' '$WORK/out' &&
        grep -qx 'two.bin: 70000 bytes, sha256 $(sha_of "$MP/a/two.bin")' '$WORK/out' &&
        grep -qx 'three.txt: 6 bytes, sha256 $(sha_of "$MP/b/three.txt")' '$WORK/out' &&
        [ \$(wc -l <'$WORK/out') -eq 3 ]"
for f in one.bin a/two.bin b/three.txt; do
        ctl download "$WS" "$(basename "$f")" "$WORK/dl/mp-$(basename "$f")"
        check "multipart: $(basename "$f") downloads the same" cmp -s "$WORK/dl/mp-$(basename "$f")" "$MP/$f"
done
cp "$MP/one.bin" "$MP/a/one.bin"
ctl upload "$WS" --multipart "$MP/one.bin" "$MP/a/one.bin"
expect_rc 2 "multipart: two files with the same name"

# ---------------------------------------------------------------------------
# Quota
ctl --json quota
expect_rc 0 "quota --json"
check "quota: the four settings" \
        json_check "all(k in j for k in ('maxWorkspaceBytes', 'maxOutputBytes', 'maxUploadFileBytes', 'maxUploadRequestBytes'))"
Q_FILE=$(json_get "j['maxUploadFileBytes']")
Q_REQ=$(json_get "j['maxUploadRequestBytes']")
Q_WS=$(json_get "j['maxWorkspaceBytes']")
Q_OUT=$(json_get "j['maxOutputBytes']")

ctl quota
expect_rc 0 "quota (human)"
check "quota: maxUploadFileBytes shown" grep -q '^maxUploadFileBytes: ' "$WORK/out"

ctl quota set upload-file=1K upload-request=1M
expect_rc 0 "quota set upload-file=1K upload-request=1M"
check "quota set: the new values" sh -c "grep -q '^maxUploadFileBytes: *1024 ' '$WORK/out' && grep -q '^maxUploadRequestBytes: *1048576 ' '$WORK/out'"
ctl --json quota
check "quota set: only the given fields changed" \
        json_check "j['maxUploadFileBytes'] == 1024 and j['maxUploadRequestBytes'] == 1048576 and j['maxWorkspaceBytes'] == $Q_WS and j['maxOutputBytes'] == $Q_OUT"

head -c 4096 /dev/urandom >"$WORK/files/4k.bin"
ctl upload "$WS" "$WORK/files/4k.bin"
expect_rc 1 "upload over maxUploadFileBytes"
check "over the limit: payload_too_large" grep -q '(payload_too_large, HTTP 413)$' "$WORK/err"

ctl quota set workspace=0
expect_rc 0 "quota set workspace=0 (unlimited)"
check "quota set 0: unlimited" grep -q '^maxWorkspaceBytes: *0 (unlimited)' "$WORK/out"

ctl quota set "upload-file=$Q_FILE" "upload-request=$Q_REQ" "workspace=$Q_WS" "output=$Q_OUT"
expect_rc 0 "quota set: back to the original values"
ctl --json quota
check "quota: restored" \
        json_check "j['maxUploadFileBytes'] == $Q_FILE and j['maxUploadRequestBytes'] == $Q_REQ and j['maxWorkspaceBytes'] == $Q_WS and j['maxOutputBytes'] == $Q_OUT"

ctl quota set nonsense=1
expect_rc 2 "quota set with an unknown key"
ctl quota set output=12X
expect_rc 2 "quota set with a bad size"
ctl quota set
expect_rc 2 "quota set without settings"

# ---------------------------------------------------------------------------
# Network policy
ctl --json policy show
expect_rc 0 "policy show --json"
check "policy show: mode, revision, allow, mirrors" \
        json_check "j['mode'] in ('none', 'allowlist') and j['revision'] and 'allow' in j and 'mirrors' in j"
P_ORIG=$(cat "$WORK/out")
REV0=$(json_get "j['revision']")

ctl policy show
expect_rc 0 "policy show"
check "policy show: human form" sh -c "grep -q '^mode: ' '$WORK/out' && grep -q '^revision: *$REV0\$' '$WORK/out'"

ctl policy set allowlist example.org
expect_rc 0 "policy set allowlist example.org"
check "policy set: the new revision, and the old one" grep -qE "^revision: +[0-9a-f]+ \(was $REV0\)\$" "$WORK/out"
ctl --json policy show
check "policy set allowlist: mode and list" json_check "j['mode'] == 'allowlist' and j['allow'] == ['example.org']"
REV1=$(json_get "j['revision']")
check "policy set allowlist: the revision changed" test "$REV1" != "$REV0"

ctl policy allow '*.Example.COM:443'
expect_rc 0 "policy allow ENTRY"
ctl --json policy show
check "policy allow: added (canonical), the rest kept" \
        json_check "sorted(j['allow']) == ['*.example.com:443', 'example.org'] and j['mode'] == 'allowlist'"
REV2=$(json_get "j['revision']")
check "policy allow: the revision changed" test "$REV2" != "$REV1"

ctl policy set allowlist example.org '*.example.com:443'
expect_rc 0 "policy set with the same content"
check "same content: the revision is kept" grep -qE "^revision: +$REV2 \(unchanged\)\$" "$WORK/out"

ctl policy mirrors 127.0.0.0/8
expect_rc 0 "policy mirrors CIDR"
ctl --json policy show
check "policy mirrors: set, the allow list kept" \
        json_check "j['mirrors'] == ['127.0.0.0/8'] and len(j['allow']) == 2"
REV3=$(json_get "j['revision']")
check "policy mirrors: the revision changed" test "$REV3" != "$REV2"

ctl policy deny example.org
expect_rc 0 "policy deny ENTRY"
ctl --json policy show
check "policy deny: removed, the rest and the mirrors kept" \
        json_check "j['allow'] == ['*.example.com:443'] and j['mirrors'] == ['127.0.0.0/8']"

ctl policy deny not-there.example
expect_rc 0 "policy deny of an entry that is not there"
check "deny of a missing entry: says so" err_has "not in the allow list"
check "deny of a missing entry: the revision stays" out_has "(unchanged)"

ctl policy deny '*.example.com:443'
expect_rc 0 "policy deny of the last entry"
check "deny of the last entry: says the list is empty and the mode stays" err_has "allow list is empty"
ctl --json policy show
check "deny of the last entry: mode allowlist, empty list" json_check "j['mode'] == 'allowlist' and j['allow'] == []"

ctl policy mirrors none
expect_rc 0 "policy mirrors none"
ctl policy set none
expect_rc 0 "policy set none"
ctl --json policy show
check "policy set none: mode none" json_check "j['mode'] == 'none' and j['allow'] == [] and j['mirrors'] == []"
ctl policy set none
check "policy set none again: the revision is kept" out_has "(unchanged)"

ctl policy set allowlist 'bad_name.example'
expect_rc 1 "policy set with an entry the daemon refuses"
check "refused entry: invalid_request" grep -q '(invalid_request, HTTP 400)$' "$WORK/err"
ctl policy frobnicate
expect_rc 2 "policy with an unknown sub-command"
ctl policy allow
expect_rc 2 "policy allow without entries"

# Back to what the daemon had (the whole policy, as GET showed it).
printf '%s' "$P_ORIG" | "$PYTHON" -c '
import json, sys
p = json.load(sys.stdin)
print(p["mode"]); print(" ".join(p["allow"])); print(" ".join(p["mirrors"]))' >"$WORK/policy.orig"
{ read -r o_mode; read -r o_allow; read -r o_mirrors; } <"$WORK/policy.orig"
# shellcheck disable=SC2086 # the lists are split on purpose
{ if [ "$o_mode" = none ]; then ctl policy set none; else ctl policy set allowlist $o_allow; fi
  if [ -n "$o_mirrors" ]; then ctl policy mirrors $o_mirrors; fi; }
ctl --json policy show
check "policy: back to the original revision" json_check "j['revision'] == '$REV0'"

# ---------------------------------------------------------------------------
# shell --follow: lines come as the run writes them; the exit code is the run's.
(
        "${clean_env[@]}" "$CTL" --url "$URL" shell --follow --workspace "$WS" \
                'echo first; sleep 2; echo second; echo oops >&2; exit 5' 2>"$WORK/follow.err"
        echo "$?" >"$WORK/follow.rc"
        date +%s.%N >"$WORK/follow.end"
) | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done >"$WORK/follow.ts"
cut -d' ' -f2- "$WORK/follow.ts" >"$WORK/out"
cp "$WORK/follow.err" "$WORK/err"
keep_outputs "$WORK/out" "$WORK/err"
RC=$(cat "$WORK/follow.rc")
expect_rc 5 "shell --follow: the run's exit code"
check "shell --follow: the run's standard output" out_is "$(printf 'first\nsecond')"
check "shell --follow: the run's standard error" err_has "oops"
first_ts=$(head -n 1 "$WORK/follow.ts" | cut -d' ' -f1)
end_ts=$(cat "$WORK/follow.end")
check "shell --follow: the first line arrived at least 1 s before the run ended ($first_ts < $end_ts)" \
        "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) + 1.0 < float(sys.argv[2]) else 1)' "$first_ts" "$end_ts"

ctl --json shell --follow --workspace "$WS" 'echo hi; exit 3'
expect_rc 3 "shell --follow --json: the run's exit code"
check "shell --follow --json: the final record" json_check "j['status'] == 'exited' and j['exitCode'] == 3"

ctl shell --follow --workspace "$WS" 'kill -KILL $$'
expect_rc 137 "shell --follow: killed by SIGKILL is 128+9"

# ---------------------------------------------------------------------------
# shell --detach, logs, cancel, status-of
ctl shell --detach --workspace "$WS" 'echo started; echo warn >&2; sleep 60; echo never'
expect_rc 0 "shell --detach"
ID=$(cat "$WORK/out")
check "shell --detach: prints the execution id" sh -c "printf '%s' '$ID' | grep -qE '^[A-Za-z0-9._-]+\$'"

for _ in $(seq 100); do
        ctl logs "$ID"
        [ "$RC" -eq 0 ] && out_is started && break
        sleep 0.1
done
expect_rc 0 "logs ID"
check "logs: what the run wrote so far" out_is "started"

ctl status-of "$ID"
expect_rc 0 "status-of ID"
check "status-of: running" grep -qE '^state: +running$' "$WORK/out"
ctl --json execution "$ID"
expect_rc 0 "execution ID --json (the alias)"
check "execution --json: the record" json_check "j['executionId'] == '$ID' and j['state'] == 'running'"

ctl logs "$ID" --offset 2
expect_rc 0 "logs --offset 2"
check "logs --offset: from byte 2" out_is "arted"
ctl -v logs "$ID"
check "logs -v: 'next offset: 8' on standard error" grep -qx 'next offset: 8' "$WORK/err"
ctl logs "$ID"
check "logs without -v: nothing on standard error" test ! -s "$WORK/err"
ctl logs --stream stderr "$ID"
expect_rc 0 "logs --stream stderr"
check "logs --stream stderr: the run's standard error" out_is "warn"

"${clean_env[@]}" "$CTL" --url "$URL" logs --follow "$ID" >"$WORK/follow-logs.out" 2>"$WORK/follow-logs.err" &
BG_PID=$!
sleep 1
check "logs --follow: still following while the run goes on" kill -0 "$BG_PID"

ctl cancel "$ID"
expect_rc 0 "cancel ID"
check "cancel: the execution id" out_has "$ID"

for _ in $(seq 100); do
        kill -0 "$BG_PID" 2>/dev/null || break
        sleep 0.1
done
if kill -0 "$BG_PID" 2>/dev/null; then
        not_ok "logs --follow: ended with the run"
        stop_pid "$BG_PID"
else
        wait "$BG_PID"
        RC=$?
        expect_rc 0 "logs --follow: ended with the run"
fi
BG_PID=
keep_outputs "$WORK/follow-logs.out" "$WORK/follow-logs.err"
check "logs --follow: the output, not what comes after the cancel" \
        sh -c "[ \"\$(cat '$WORK/follow-logs.out')\" = started ]"

ctl --json status-of "$ID"
expect_rc 0 "status-of after cancel"
check "status-of: cancelled" json_check "j['status'] == 'cancelled'"

ctl status-of "no-such-run-$UNIQ"
expect_rc 1 "status-of an unknown id"
check "unknown id: not_found" grep -q '(not_found, HTTP 404)$' "$WORK/err"
ctl cancel "no-such-run-$UNIQ"
expect_rc 1 "cancel of an unknown id"

# ---------------------------------------------------------------------------
# Digests that do not match, from a fake server: nothing is saved.
cat >"$WORK/fake.py" <<'EOF'
import base64, hashlib, http.server, sys, time

BODY = b"the bytes that were sent\n"
def digest(b):
    return "sha-256=:%s:" % base64.b64encode(hashlib.sha256(b).digest()).decode()

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        name = self.path.rsplit("/", 1)[-1]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if name == "stall":
            self.send_header("Content-Length", "1000000")
            self.send_header("Repr-Digest", digest(BODY))
            self.end_headers()
            self.wfile.write(b"x" * 1000)
            self.wfile.flush()
            time.sleep(30)
            return
        self.send_header("Content-Length", str(len(BODY)))
        if name == "good":
            self.send_header("Repr-Digest", "sha-512=:AAAA:, " + digest(BODY))
        elif name == "tampered":
            self.send_header("Repr-Digest", digest(b"something else\n"))
        elif name == "garbled":
            self.send_header("Repr-Digest", "sha-256=:not base64!:")
        self.end_headers()
        self.wfile.write(BODY)

s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
"$PYTHON" "$WORK/fake.py" >"$WORK/fake.port" 2>"$WORK/fake.log" &
FAKE_PID=$!
for _ in $(seq 100); do
        [ -s "$WORK/fake.port" ] && break
        sleep 0.1
done
FAKE_URL="http://$LOOPBACK:$(cat "$WORK/fake.port")"
printf 'the bytes that were sent\n' >"$WORK/files/fake-body"

ctl_at "$FAKE_URL" download w good "$WORK/dl/good.out"
expect_rc 0 "fake server, a matching Repr-Digest (with another algorithm before it)"
check "matching digest: saved" cmp -s "$WORK/dl/good.out" "$WORK/files/fake-body"

ctl_at "$FAKE_URL" download w tampered "$WORK/dl/tampered.out"
expect_rc 1 "fake server, a tampered Repr-Digest"
check "tampered: a clear message" err_has "Digest mismatch for 'tampered'"
check "tampered: no file" test ! -e "$WORK/dl/tampered.out"
check "tampered: no temporary file" no_temp_files "$WORK/dl"

ctl_at "$FAKE_URL" download w nodigest "$WORK/dl/nodigest.out"
expect_rc 1 "fake server, no Repr-Digest"
check "no digest: says it cannot be verified" err_has "no Repr-Digest"
check "no digest: no file" test ! -e "$WORK/dl/nodigest.out"

ctl_at "$FAKE_URL" download w garbled "$WORK/dl/garbled.out"
expect_rc 1 "fake server, a malformed Repr-Digest"
check "malformed digest: no file" test ! -e "$WORK/dl/garbled.out"
check "malformed digest: no temporary file" no_temp_files "$WORK/dl"

# An interrupted download leaves nothing behind either.
"${clean_env[@]}" "$CTL" --url "$FAKE_URL" download w stall "$WORK/dl/stall.out" >"$WORK/out" 2>"$WORK/err" &
BG_PID=$!
for _ in $(seq 100); do
        find "$WORK/dl" -maxdepth 1 -name '.stall.out.*' | grep -q . && break
        sleep 0.1
done
check "stalled download: writes into a temporary file next to the target" \
        sh -c "find '$WORK/dl' -maxdepth 1 -name '.stall.out.*' | grep -q ."
# (SIGTERM: a background job of a script ignores SIGINT, and the CLI keeps it so.)
kill -TERM "$BG_PID"
wait "$BG_PID"
RC=$?
BG_PID=
keep_outputs "$WORK/out" "$WORK/err"
expect_rc 143 "interrupted download: dies of SIGTERM"
check "interrupted download: no temporary file" no_temp_files "$WORK/dl"
check "interrupted download: no file" test ! -e "$WORK/dl/stall.out"
stop_pid "$FAKE_PID"
FAKE_PID=

# ---------------------------------------------------------------------------
# Usage errors and an unreachable daemon
ctl upload "$WS"
expect_rc 2 "upload without a file"
ctl upload "$WS" a b c
expect_rc 2 "upload of several files without --multipart"
ctl upload "$WS" -
expect_rc 2 "upload - without REMOTE"
ctl upload "$WS" --multipart -
expect_rc 2 "upload --multipart -"
ctl ls "$WS" --revision x
expect_rc 2 "--revision is an option of download only"
ctl logs x --stream bogus
expect_rc 2 "logs --stream bogus"
ctl logs x --offset -1
expect_rc 2 "logs --offset -1"
ctl shell --follow --detach true
expect_rc 2 "shell --follow --detach"
ctl status-of
expect_rc 2 "status-of without an id"
ctl download "$WS" 'data file.bin' a b
expect_rc 2 "download with too many arguments"
ctl upload "$WS" "$WORK/files/no-such-file"
expect_rc 1 "upload of a missing local file"

ctl_at "http://$LOOPBACK:$(pick_port)" upload "$WS" "$WORK/files/doc.txt"
expect_rc 69 "upload with the daemon unreachable"
ctl_at "http://$LOOPBACK:$(pick_port)" download "$WS" doc.txt "$WORK/dl/unreachable"
expect_rc 69 "download with the daemon unreachable"
check "unreachable: no temporary file" no_temp_files "$WORK/dl"
ctl_at "http://$LOOPBACK:$(pick_port)" policy show
expect_rc 69 "policy show with the daemon unreachable"

# ---------------------------------------------------------------------------
# Secrets and the daemon's health
# shellcheck disable=SC2119  # no secret beyond the token and the key
daemon_check_secrets
daemon_finish
