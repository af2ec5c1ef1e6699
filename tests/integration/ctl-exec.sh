#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of `sandbox-runnerctl exec` and `sandbox-runnerctl shell` against the REAL daemon,
# started here by hand on an ephemeral loopback port (as tests/integration/http_battery_lib.py
# does): output passed through exactly (also non-UTF-8 output, which the API sends as base64),
# exit codes of the run (exit status, 128+signal, 124 on timeout), code from --code, --file and
# standard input, the exec options, --json, signed requests and a wrong signing key, and that
# neither the token nor the signing key ever shows up in any output.
#
# Usage: ctl-exec.sh /path/to/sandbox-runnerd /path/to/sandbox-runnerctl
# Exit 77 (skip) when a program is missing or the daemon reports that it cannot make sandboxes.

# Commands for the sandbox are single-quoted on purpose: they expand inside the run.
# shellcheck disable=SC2016

set -u

# shellcheck source=SCRIPTDIR/../helpers/daemon-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/daemon-lib.sh"
daemon_lib_init ctl-exec "${1:-}" "${2:-}"

# ---------------------------------------------------------------------------
# The daemon (tests/helpers/daemon-lib.sh), and a signing key it does not know.
# shellcheck disable=SC2119  # no directories beyond creds, state, run
daemon_credentials
WRONG_KEY=$(random_hex 32)
(umask 077 && printf '%s\n' "$WRONG_KEY" >"$WORK/wrong-key")
daemon_start ctl-exec
daemon_require_sandbox

# ---------------------------------------------------------------------------
# TAP helpers beyond daemon-lib.sh's

# run [ENV=VAL...] -- ARGS...: the CLI with a clean credential environment plus ENV, standard
# input from $STDIN (default /dev/null); keeps stdout, stderr and the exit code, and a copy of
# every output for the final "secrets never printed" test.
STDIN=/dev/null
WRAP=()         # a command run() puts in front of the CLI (a private mount namespace, say)
run() {
        local envs=()
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do
                envs+=("$1")
                shift
        done
        shift
        env -u SANDBOX_RUNNER_TOKEN -u SANDBOX_RUNNER_TOKEN_FILE -u SANDBOX_RUNNER_URL \
                -u SANDBOX_RUNNER_SIGNING_KEY -u SANDBOX_RUNNER_SIGNING_KEY_FILE \
                -u CREDENTIALS_DIRECTORY "${envs[@]}" \
                "${WRAP[@]}" "$CTL" "$@" <"$STDIN" >"$WORK/out" 2>"$WORK/err"
        RC=$?
        keep_outputs "$WORK/out" "$WORK/err"
}
# The usual case: credentials from $CREDENTIALS_DIRECTORY, as under a systemd unit.
ctl() {
        run "CREDENTIALS_DIRECTORY=$WORK/creds" -- --url "$URL" "$@"
}

# ---------------------------------------------------------------------------
# exec -- ARGV
ctl exec -- /bin/echo hi
expect_rc 0 "exec -- /bin/echo hi"
check "exec: stdout is the run's" out_is "hi"
check "exec: exactly 'hi\\n'" cmp -s "$WORK/out" <(printf 'hi\n')
check "exec: nothing on stderr" err_empty

ctl exec -- /bin/ls -l /
expect_rc 0 "exec: options of the program after -- are its own"

ctl exec -- /bin/sh -c 'echo out; echo err >&2; exit 3'
expect_rc 3 "exec: the run's exit status"
check "exec: stdout and stderr apart (stdout)" out_is "out"
check "exec: stdout and stderr apart (stderr)" err_is "err"

# ---------------------------------------------------------------------------
# shell
ctl shell 'exit 7'
expect_rc 7 "shell 'exit 7'"
check "shell 'exit 7': no output" out_empty

ctl shell 'echo "$((6 * 7))"; printf "no newline"'
expect_rc 0 "shell: a command line with expansions"
check "shell: exact output" cmp -s "$WORK/out" <(printf '42\nno newline')

ctl shell 'kill -KILL $$'
expect_rc 137 "shell: killed by SIGKILL is 128+9"

# ---------------------------------------------------------------------------
# --language
ctl exec --language python --code 'import sys; sys.stderr.write("e")'
expect_rc 0 "exec --language python --code"
check "python: stderr is exactly 'e'" cmp -s "$WORK/err" <(printf 'e')
check "python: nothing on stdout" out_empty

printf 'import sys\nprint(6 * 7)\nsys.exit(5)\n' >"$WORK/code.py"
STDIN=$WORK/code.py
ctl exec --language python -
expect_rc 5 "exec --language python - (code on standard input)"
check "code from standard input ran" out_is "42"
STDIN=/dev/null

ctl exec --language python --file "$WORK/code.py"
expect_rc 5 "exec --language python --file FILE"
check "code from --file ran" out_is "42"

ctl exec --language shell --code 'echo "shell:$#"'
expect_rc 0 "exec --language shell"
check "shell code ran" out_is "shell:0"

ctl exec --language python --code 'print("h\u00e9 \u2603")'
expect_rc 0 "python: non-ASCII UTF-8 output"
check "UTF-8 output unchanged" cmp -s "$WORK/out" <(printf 'h\303\251 \342\230\203\n')

# ---------------------------------------------------------------------------
# Output that is not UTF-8 travels as base64 and must come out byte for byte.
ctl shell 'printf "\377\000\001binary\n"; printf "\376" >&2'
expect_rc 0 "shell: binary output"
check "binary stdout decoded from base64" cmp -s "$WORK/out" <(printf '\377\000\001binary\n')
check "binary stderr decoded from base64" cmp -s "$WORK/err" <(printf '\376')

ctl shell 'printf "a\000b"'
expect_rc 0 "shell: NUL byte in UTF-8 output"
check "NUL byte passed through" cmp -s "$WORK/out" <(printf 'a\000b')

# ---------------------------------------------------------------------------
# Options
ctl exec --env A=b -- /bin/sh -c 'printf %s "$A"'
expect_rc 0 "exec --env A=b"
check "--env: A=b visible in the run" out_is "b"

ctl exec --env A=1 --env B=x=y --env A=2 -- /bin/sh -c 'printf "%s %s" "$A" "$B"'
expect_rc 0 "exec --env repeated"
check "--env: last one wins, '=' in the value kept" out_is "2 x=y"

printf 'line 1\nline 2 \303\251\n' >"$WORK/stdin.txt"
ctl exec --stdin-file "$WORK/stdin.txt" -- /bin/cat
expect_rc 0 "exec --stdin-file"
check "--stdin-file: the run reads it" cmp -s "$WORK/out" "$WORK/stdin.txt"

STDIN=$WORK/stdin.txt
ctl shell --stdin-file - 'wc -l'
expect_rc 0 "shell --stdin-file - (standard input)"
check "--stdin-file -: two lines" out_is "2"
STDIN=/dev/null

printf 'ok\377\376\n' >"$WORK/stdin.bin"
ctl exec --stdin-file "$WORK/stdin.bin" -- /bin/cat
expect_rc 1 "exec --stdin-file with binary content"
check "binary --stdin-file: clear error" grep -q "is binary, not UTF-8 text" "$WORK/err"
check "binary --stdin-file: no output" out_empty

ctl shell --workspace ctl-exec-ws1 'mkdir -p sub && echo kept >sub/file'
expect_rc 0 "shell --workspace: write a file"
ctl exec --workspace ctl-exec-ws1 --cwd sub -- /bin/sh -c 'pwd; cat file'
expect_rc 0 "exec --workspace --cwd"
check "--workspace/--cwd: same workspace, sub directory" out_is "$(printf '/workspace/sub\nkept')"

ctl --json exec --memory 256M --tasks 64 --cpu 50 --timeout-ms 20000 -- /bin/true
expect_rc 0 "exec with --memory, --tasks, --cpu, --timeout-ms"
# A scope or the daemon's own cgroup enforces all three; with rlimits only (a daemon started by
# hand as an ordinary user) memory is RLIMIT_AS, tasks RLIMIT_NPROC, and no CPU limit: null.
check "limits sent: 256M is 268435456 bytes, tasks, cpu, timeout" \
        json_check 'j["limits"]["memoryBytes"] == 268435456 and j["limits"]["timeoutMs"] == 20000 and j["limits"]["tasks"] == 64 and ((j["limits"]["enforcedBy"] in ("scope", "cgroup") and j["limits"]["cpuPercent"] == 50) or (j["limits"]["enforcedBy"] == "rlimit" and j["limits"]["cpuPercent"] is None))'

EID="ctl-exec-$$-$RANDOM"
ctl --json exec --id "$EID" -- /bin/true
expect_rc 0 "exec --id"
check "--id: the run has that id" json_check "j['executionId'] == '$EID'"
ctl exec --id "$EID" -- /bin/true
expect_rc 1 "exec --id reused within 60 s"
check "reused id: the daemon's error" grep -q "(execution_id_conflict, HTTP 409)\$" "$WORK/err"

ctl exec --env PATH=/x -- /bin/true
expect_rc 1 "a request the daemon refuses"
check "refused request: 'sandbox-runnerctl: <message> (<code>, HTTP <status>)'" \
        grep -qE '^sandbox-runnerctl: .+ \(invalid_request, HTTP 400\)$' "$WORK/err"

# ---------------------------------------------------------------------------
# Limits and timeouts
start=$(date +%s)
ctl exec --timeout-ms 500 -- /bin/sleep 30
end=$(date +%s)
expect_rc 124 "exec --timeout-ms 500 -- sleep 30"
check "timeout: 'execution <id> ended: timeout' on stderr" \
        grep -qE '^sandbox-runnerctl: execution [A-Za-z0-9._-]+ ended: timeout$' "$WORK/err"
check "timeout: ended well before the sleep would ($((end - start)) s)" test $((end - start)) -lt 20

ctl --json exec --timeout-ms 500 -- /bin/sleep 30
expect_rc 124 "--json: exit code still from the status"
check "--json timeout: status in the JSON" json_check 'j["status"] == "timeout"'

# ---------------------------------------------------------------------------
# --json
ctl --json shell 'echo hi; exit 3'
expect_rc 3 "--json shell"
check "--json: parses, has status, exitCode and the output" \
        json_check 'j["status"] == "exited" and j["exitCode"] == 3 and j["stdout"] == "hi\n" and "executionId" in j'
check "--json: the run's output is not printed besides" \
        sh -c "[ \"\$(grep -c '^hi\$' '$WORK/out')\" -eq 0 ]"

ctl shell --json 'true'
expect_rc 0 "--json after the command"
check "--json after the command: JSON" json_check '"status" in j'

# ---------------------------------------------------------------------------
# Credentials and signing
ctl --signing-key-file "$WORK/wrong-key" exec -- /bin/true
expect_rc 1 "wrong signing key"
check "wrong signing key: signature_invalid" grep -q "(signature_invalid, HTTP 401)\$" "$WORK/err"
check "wrong signing key: nothing on stdout" out_empty

ctl --json --signing-key-file "$WORK/wrong-key" shell 'true'
expect_rc 1 "wrong signing key, --json"
check "wrong signing key, --json: error object on stdout" json_check 'j["error"] == "signature_invalid"'

run "SANDBOX_RUNNER_TOKEN_FILE=$WORK/creds/api-token" "SANDBOX_RUNNER_SIGNING_KEY=$KEY" -- \
        --url "$URL" exec -- /bin/echo env
expect_rc 0 "token and key from the environment"
check "environment credentials: output" out_is "env"

run "SANDBOX_RUNNER_TOKEN_FILE=$WORK/creds/api-token" "SANDBOX_RUNNER_SIGNING_KEY_FILE=$WORK/creds/signing-key" -- \
        --url "$URL" shell 'echo keyfile'
expect_rc 0 "signing key from \$SANDBOX_RUNNER_SIGNING_KEY_FILE"

# The CLI's last resort is the quick start's key under /var/lib/sandbox-runner/credentials, which
# 'tests/setup.sh run' writes on this host: hide that directory for this one run, in a mount
# namespace of its own (the host's stays as it is).
[ -d /var/lib/sandbox-runner ] &&
        WRAP=(unshare --mount --propagation private sh -c
              'mount -t tmpfs -o mode=0700 tmpfs /var/lib/sandbox-runner && exec "$0" "$@"')
run "SANDBOX_RUNNER_TOKEN_FILE=$WORK/creds/api-token" -- --url "$URL" exec -- /bin/true
WRAP=()
expect_rc 1 "no signing key anywhere"
check "no signing key: says where it is looked for" grep -q "No signing key" "$WORK/err"

# ---------------------------------------------------------------------------
# Usage errors (exit 2, nothing sent)
ctl exec
expect_rc 2 "exec without a program"
ctl exec --language python
expect_rc 2 "--language without code"
ctl exec --language python --code 1 --file "$WORK/code.py"
expect_rc 2 "--code and --file together"
ctl exec --language cobol --code 1
expect_rc 2 "unknown --language"
ctl exec --code 1 -- /bin/true
expect_rc 2 "--code without --language"
ctl shell
expect_rc 2 "shell without a command"
ctl shell 'true' 'extra'
expect_rc 2 "shell with two commands"
ctl exec --memory 12X -- /bin/true
expect_rc 2 "bad --memory"
ctl exec --env NOEQUALS -- /bin/true
expect_rc 2 "bad --env"
ctl exec --timeout-ms 0 -- /bin/true
expect_rc 2 "--timeout-ms 0"
ctl status --workspace x
expect_rc 2 "exec options on another command"

run "CREDENTIALS_DIRECTORY=$WORK/creds" -- --url "http://$LOOPBACK:$(pick_port)" exec -- /bin/true
expect_rc 69 "exec with the daemon unreachable"

# ---------------------------------------------------------------------------
# Secrets and the daemon's health
daemon_check_secrets "$WRONG_KEY"
daemon_finish
