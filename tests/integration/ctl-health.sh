#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of sandbox-runnerctl against a tiny fake daemon (Python http.server on 127.0.0.1 and on
# an AF_UNIX socket): human and --json output, exit codes, token sources, and that the token never
# shows up in any output.
#
# Usage: ctl-health.sh /path/to/sandbox-runnerctl
# Exit 77 (skip) only when the CLI or /usr/bin/python3 is missing.

set -u

CTL=${1:-${SANDBOX_RUNNERCTL:-}}
PYTHON=/usr/bin/python3

if [ -z "$CTL" ] || [ ! -x "$CTL" ]; then
        echo "1..0 # SKIP sandbox-runnerctl not given or not executable (pass its path as \$1)"
        exit 77
fi
if [ ! -x "$PYTHON" ]; then
        echo "1..0 # SKIP $PYTHON not found"
        exit 77
fi

TOKEN='s3cret-Token_value.XYZ-4242'
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ctl-health.XXXXXX") || exit 1
SERVER_PID=
USERVER_PID=

cleanup() {
        [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
        [ -n "$USERVER_PID" ] && kill "$USERVER_PID" 2>/dev/null
        wait 2>/dev/null
        rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---------------------------------------------------------------------------
# The fake daemon
cat >"$WORK/server.py" <<'EOF'
import http.server, json, os, socket, socketserver, sys, time

TOKEN = os.environ["FAKE_TOKEN"]
LOG = os.environ["FAKE_LOG"]

HEALTH = {
    "status": "ok", "version": "0.1.0", "uptimeSec": 3725,
    "sandbox": {"usable": True, "proc": "fresh", "disableUserns": False},
    "scopes": {"available": False, "reason": "no bus"},
    "sandboxNetwork": {"mode": "none", "available": True},
    "workspace": {"root": "/var/lib/sandbox-runner/workspaces", "usedBytes": 2048, "count": 3},
    "runner": {"maxWorkspaceBytes": 10737418240, "maxFileBytes": 0, "maxOutputBytes": 1073741824},
}
STATUS = {
    "status": "ok", "version": "0.1.0", "uptimeSec": 59,
    "running": [{"executionId": "exec-1", "workspaceId": "agent7-runner1", "durationMs": 1500}],
    "counts": {"running": 1, "finished": 7},
    "languages": ["python", "shell"],
    "queued": [],
}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, obj=None, raw=None):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        auth = self.headers.get("Authorization")
        with open(LOG, "a") as f:
            f.write("%s %s auth=%s\n" % (self.command, self.path, "yes" if auth else "no"))
        path = self.path
        if path == "/health":
            return self.reply(200, HEALTH)
        if path == "/status":
            if auth != "Bearer " + TOKEN:
                return self.reply(401, {"error": "unauthorized",
                                        "message": "Invalid or missing bearer token."})
            return self.reply(200, STATUS)
        if path == "/evil/health":
            # Terminal escapes and a C1 control must not reach the terminal raw.
            return self.reply(200, {"status": "ok\u001b[31m", "version": "0.1.0\u009b2J",
                                    "note\u001b]0;x\u0007": "line1\nline2"})
        if path == "/broken/health":
            return self.reply(502, raw=b"<html>Bad Gateway</html>")
        if path == "/garbage/health":
            return self.reply(200, raw=b'{"status": "ok"} trailing')
        if path == "/slow/health":
            time.sleep(3)
            return self.reply(200, HEALTH)
        if path == "/forbidden/status":
            return self.reply(403, {"error": "forbidden", "message": "Not for you."})
        return self.reply(404, {"error": "not_found", "message": "No such endpoint."})


class Quiet:
    def handle_error(self, request, client_address):
        pass    # e.g. the client of the timeout test hung up before the late answer


class TCPServer(Quiet, socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


class UnixServer(Quiet, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        sock, _ = super().get_request()
        return sock, ("unix", 0)   # BaseHTTPRequestHandler expects a (host, port) pair


if sys.argv[1] == "tcp":
    srv = TCPServer(("127.0.0.1", 0), Handler)
    ready = str(srv.server_address[1])
else:
    srv = UnixServer(sys.argv[2], Handler)
    ready = sys.argv[2]
with open(sys.argv[-1] + ".tmp", "w") as f:
    f.write(ready)
os.rename(sys.argv[-1] + ".tmp", sys.argv[-1])
srv.serve_forever()
EOF

export FAKE_TOKEN="$TOKEN" FAKE_LOG="$WORK/requests.log"
: >"$FAKE_LOG"

"$PYTHON" "$WORK/server.py" tcp "$WORK/port" &
SERVER_PID=$!
"$PYTHON" "$WORK/server.py" unix "$WORK/api.sock" "$WORK/unix-ready" &
USERVER_PID=$!

i=0
while [ ! -s "$WORK/port" ] || [ ! -s "$WORK/unix-ready" ]; do
        i=$((i + 1))
        if [ $i -gt 100 ]; then
                echo "Bail out! fake server did not start"
                exit 1
        fi
        sleep 0.1
done
PORT=$(cat "$WORK/port")
URL="http://127.0.0.1:$PORT"

# A port nothing listens on: bind an ephemeral one and close it again.
CLOSED_PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

# ---------------------------------------------------------------------------
# TAP helpers (ok, not_ok, check, expect_rc, err_is, ...)
# shellcheck source=SCRIPTDIR/../helpers/tap-lib.sh
. "$(dirname "$0")/../helpers/tap-lib.sh"

# run [ENV=VAL...] -- ARGS...: runs the CLI with a clean credential environment, saves stdout,
# stderr and the exit code; keeps a copy of every output for the final "token never printed" test.
RUNS=0
WRAP=           # a command run() puts in front of the CLI (a private mount namespace, say)
run() {
        envs=
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do
                envs="$envs $1"
                shift
        done
        shift
        RUNS=$((RUNS + 1))
        # shellcheck disable=SC2086
        env -u SANDBOX_RUNNER_TOKEN -u SANDBOX_RUNNER_TOKEN_FILE -u SANDBOX_RUNNER_URL \
                -u SANDBOX_RUNNER_SIGNING_KEY -u SANDBOX_RUNNER_SIGNING_KEY_FILE \
                -u CREDENTIALS_DIRECTORY $envs \
                $WRAP "$CTL" "$@" >"$WORK/out" 2>"$WORK/err"
        RC=$?
        cp "$WORK/out" "$WORK/all-out.$RUNS"
        cp "$WORK/err" "$WORK/all-err.$RUNS"
}
# out_line KEY-REGEX VALUE-REGEX: stdout has the line "KEY: <padding>VALUE"
out_line() {
        grep -qE -- "^$1: +$2\$" "$WORK/out"
}

# Token file with trailing whitespace and newlines, which must be stripped.
printf '%s  \n\n' "$TOKEN" >"$WORK/token"
printf 'wrong-token\n' >"$WORK/bad-token"
mkdir "$WORK/creds"
printf '%s\n' "$TOKEN" >"$WORK/creds/api-token"


# ---------------------------------------------------------------------------
# health, human form
run -- --url "$URL" health
expect_rc 0 "health"
check "health: status line" out_line 'status' 'ok'
check "health: version line" out_line 'version' '0\.1\.0'
check "health: uptime humanised" out_line 'uptime' '1h 2min 5s'
check "health: nested object flattened" out_line 'sandbox\.usable' 'yes'
check "health: false as no" out_line 'scopes\.available' 'no'
check "health: byte count with unit" out_line 'workspace\.usedBytes' '2048 \(2\.0 KiB\)'
# The widest key decides the column; verify alignment generically instead of by hand.
aligned() {
        awk '{ i = index($0, ": "); c = i; while (substr($0, c + 1, 1) == " ") c++;
               col[NR] = c } END { for (n = 2; n <= NR; n++) if (col[n] != col[1]) exit 1; exit NR < 10 }' "$WORK/out"
}
check "health: values aligned in one column" aligned
check "health: zero maximum is unlimited" out_line 'runner\.maxFileBytes' '0 \(unlimited\)'
check "health: GiB" out_line 'runner\.maxWorkspaceBytes' '10737418240 \(10\.0 GiB\)'
check "health: status, version, uptime first" \
        sh -c "head -n 3 '$WORK/out' | cut -d: -f1 | tr '\n' ' ' | grep -qx 'status version uptime '"
check "health: nothing on stderr" test ! -s "$WORK/err"

# ---------------------------------------------------------------------------
# health, --json
run -- --url "$URL" --json health
expect_rc 0 "health --json"
check "health --json: same JSON as the server sent" "$PYTHON" -c '
import json, sys
got = json.load(open(sys.argv[1]))
assert got["status"] == "ok" and got["uptimeSec"] == 3725, got
assert got["sandbox"] == {"usable": True, "proc": "fresh", "disableUserns": False}, got
assert got["runner"]["maxWorkspaceBytes"] == 10737418240, got
' "$WORK/out"
check "health --json: pretty-printed" test "$(wc -l <"$WORK/out")" -gt 10

# ---------------------------------------------------------------------------
# status and the token chain
run -- --url "$URL" --token-file "$WORK/token" status
expect_rc 0 "status with --token-file (trailing whitespace stripped)"
check "status: array of objects flattened with index" out_line 'running\[0\]\.executionId' 'exec-1'
check "status: array of scalars joined" out_line 'languages' 'python, shell'
check "status: empty array" out_line 'queued' '\(none\)'

run "SANDBOX_RUNNER_TOKEN=$TOKEN" -- --url "$URL" status
expect_rc 0 "status with \$SANDBOX_RUNNER_TOKEN"

run "SANDBOX_RUNNER_TOKEN_FILE=$WORK/token" -- --url "$URL" status
expect_rc 0 "status with \$SANDBOX_RUNNER_TOKEN_FILE"

run "CREDENTIALS_DIRECTORY=$WORK/creds" -- --url "$URL" status
expect_rc 0 "status with \$CREDENTIALS_DIRECTORY/api-token"

run "SANDBOX_RUNNER_TOKEN=wrong" -- --url "$URL" --token-file "$WORK/token" status
expect_rc 0 "--token-file wins over \$SANDBOX_RUNNER_TOKEN"

run "SANDBOX_RUNNER_URL=$URL" "SANDBOX_RUNNER_TOKEN=$TOKEN" -- status
expect_rc 0 "\$SANDBOX_RUNNER_URL used without --url"

run -- --url "$URL" --token-file "$WORK/bad-token" status
expect_rc 1 "status with a wrong token"
check "401: server message, code and status on stderr" \
        err_is "sandbox-runnerctl: Invalid or missing bearer token. (unauthorized, HTTP 401)"
check "401: nothing on stdout" test ! -s "$WORK/out"

run -- --url "$URL" --token-file "$WORK/bad-token" --json status
expect_rc 1 "status --json with a wrong token"
check "401 --json: error object on stdout" "$PYTHON" -c '
import json, sys
assert json.load(open(sys.argv[1])) == {"error": "unauthorized", "message": "Invalid or missing bearer token."}
' "$WORK/out"

run -- --url "$URL/forbidden" --token-file "$WORK/token" status
expect_rc 1 "403 from the server"
check "403: message" err_is "sandbox-runnerctl: Not for you. (forbidden, HTTP 403)"

run -- --url "$URL" --token-file "$WORK/no-such-file" status
expect_rc 1 "unreadable --token-file"
check "unreadable --token-file: says which" grep -qF -- "--token-file $WORK/no-such-file" "$WORK/err"

# The CLI's last resort is the quick start's token under /var/lib/sandbox-runner/credentials,
# which 'tests/setup.sh run' writes on this host: hide that directory for this one run, in a
# mount namespace of its own (the host's stays as it is).
if [ -d /var/lib/sandbox-runner ]; then
        cat >"$WORK/hide-credentials" <<'EOF'
#!/bin/sh
exec unshare --mount --propagation private sh -c \
        'mount -t tmpfs -o mode=0700 tmpfs /var/lib/sandbox-runner && exec "$0" "$@"' "$@"
EOF
        chmod +x "$WORK/hide-credentials"
        WRAP=$WORK/hide-credentials
fi
run -- --url "$URL" status
WRAP=
expect_rc 1 "status without any token"
check "no token: explains where it is looked for" grep -q 'No API token' "$WORK/err"

# ---------------------------------------------------------------------------
# Transport: AF_UNIX, unreachable daemon, timeouts, bad answers
run -- --url "unix:$WORK/api.sock" health
expect_rc 0 "health over unix:"
check "health over unix: output" out_line status ok

run -- --url "http://127.0.0.1:$CLOSED_PORT" health
expect_rc 69 "closed port"
check "closed port: message names the URL" grep -qF "http://127.0.0.1:$CLOSED_PORT" "$WORK/err"
check "closed port: message says how to start the runner and where its log is" \
        grep -qF "Is it running? Under systemd: 'systemctl start sandbox-runner.socket'" "$WORK/err"

run -- --url "unix:$WORK/missing.sock" health
expect_rc 69 "missing unix socket"

run -- --url "$URL/slow" --timeout 0.5 health
expect_rc 69 "timeout"

run -- --url "$URL/broken" health
expect_rc 1 "non-JSON 502"
check "non-JSON 502: message" grep -qF "HTTP 502" "$WORK/err"

run -- --url "$URL/garbage" health
expect_rc 1 "trailing garbage after the JSON"

run -- --url "$URL/evil" health
expect_rc 0 "control characters in the answer"
escaped() {
        # No raw ESC or BEL reaches the terminal; the escapes are shown instead.
        ! LC_ALL=C grep -q "$(printf '[\033\007]')" "$WORK/out" &&
                grep -qF 'ok\x1b[31m' "$WORK/out" &&
                grep -qF '\xc2\x9b2J' "$WORK/out" &&
                grep -qF 'line1\nline2' "$WORK/out"
}
check "control characters escaped" escaped

# ---------------------------------------------------------------------------
# Usage
run -- --no-such-option health
expect_rc 2 "unknown option"
run -- frobnicate
expect_rc 2 "unknown command"
run -- --url "ftp://127.0.0.1/" health
expect_rc 2 "unsupported URL scheme"
run -- --version
expect_rc 0 "--version"

# ---------------------------------------------------------------------------
# Secrets
check "/health never got an Authorization header" sh -c "! grep -q '^GET /health auth=yes' '$FAKE_LOG'"
check "/status got one" grep -q '^GET /status auth=yes' "$FAKE_LOG"
check "the token never appears in any output ($RUNS runs)" \
        sh -c "! cat '$WORK'/all-out.* '$WORK'/all-err.* | grep -qF -- '$TOKEN'"

echo "1..$N"
[ "$FAILED" -eq 0 ]
