#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of the preflight: the built `sandbox-runnerd --check` and `--check --json`, run as root
# and as an unprivileged user (setpriv --reuid=65534), with temporary credentials, state and
# runtime directories; every item present in order, the exit status 0 exactly when no item
# failed, `[Execution] Bwrap=/nonexistent` failing "bwrap" (exit 1), a token file of mode 0644
# failing "credentials" (exit 1), and that the check creates nothing. Then `sandbox-runnerctl
# check` (and --json) against a daemon started by tests/helpers/daemon-lib.sh.
#
# Usage: preflight.sh /path/to/sandbox-runnerd /path/to/sandbox-runnerctl
# Exit 77 (skip) when a program is missing; the unprivileged runs need root (else skipped as tests).

set -u

# shellcheck source=SCRIPTDIR/../helpers/daemon-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/daemon-lib.sh"
daemon_lib_init preflight "${1:-}" "${2:-}" setpriv

IDS='["bwrap", "userns", "sandbox", "limits", "credentials", "state", "egress"]'
CTL_IDS='["sandbox", "limits", "egress", "environments", "npu"]'

# shellcheck disable=SC2119  # no directories beyond creds, state, run
daemon_credentials

# check_as WHO CONF CREDS STATE RUN [ARGS...]: sandbox-runnerd --check with a clean environment,
# as root ("root") or as uid/gid 65534 ("nobody"); stdout, stderr and RC kept.
check_as() {
        local who=$1 conf=$2 creds=$3 state=$4 run=$5
        local cmd=(env -i PATH=/usr/bin:/bin LANG=C.UTF-8 CREDENTIALS_DIRECTORY="$creds" STATE_DIRECTORY="$state"
                   RUNTIME_DIRECTORY="$run")
        local v
        shift 5
        for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
                [ -n "${!v:-}" ] && cmd+=("$v=${!v}")
        done
        if [ "$who" = nobody ]; then
                cmd=(setpriv --reuid=65534 --regid=65534 --clear-groups "${cmd[@]}")
        fi
        (cd / && "${cmd[@]}" "$DAEMON" --check --config "$conf" "$@") >"$WORK/out" 2>"$WORK/err"
        RC=$?
}

# The JSON report on stdout: every id in order, a status each, "ok" as the exit status says.
report_ok() {
        json_check "[c['id'] for c in j['checks']] == $IDS and \
all(c['status'] in ('ok', 'warn', 'fail') and c['summary'] for c in j['checks']) and \
all(('fix' in c) == (c['status'] != 'ok') for c in j['checks']) and \
j['ok'] == (not any(c['status'] == 'fail' for c in j['checks'])) and j['ok'] == ($RC == 0)"
}

# The text report: one line an item, "STATUS  ID  ...", in order; exit 1 exactly when one says fail.
lines_ok() {
        local ids
        ids=$(awk '{ print $2 }' "$WORK/out" | tr '\n' ' ')
        [ "$ids" = "bwrap userns sandbox limits credentials state egress " ] || return 1
        ! grep -qvE '^(ok|warn|fail)  ' "$WORK/out" || return 1
        if grep -q '^fail' "$WORK/out"; then [ "$RC" -eq 1 ]; else [ "$RC" -eq 0 ]; fi
}

item_is() {
        json_check "[c for c in j['checks'] if c['id'] == '$1'][0]['status'] == '$2'"
}

item_says() {
        json_check "'$3' in [c for c in j['checks'] if c['id'] == '$1'][0].get('$2', '')"
}

# ---------------------------------------------------------------------------
# As root
CONF=$WORK/runner.conf
check_as root "$CONF" "$WORK/creds" "$WORK/state" "$WORK/run"
check "root: one line an item, in order, exit status as the items say (exit $RC)" lines_ok
check_as root "$CONF" "$WORK/creds" "$WORK/state" "$WORK/run" --json
check "root --json: every id, a status, a fix for warn/fail, ok matching the exit status (exit $RC)" report_ok
check "root: bwrap ok" item_is bwrap ok
check "root: credentials ok (0600 files of root)" item_is credentials ok
check "root: the limits name the user the answer is for" item_says limits reason "runuser -u"

# Nothing is created: a state and a runtime directory that do not exist stay so.
check_as root "$CONF" "$WORK/creds" "$WORK/new-state" "$WORK/new-run" --json
check "root: a missing state directory is reported as such" item_says state summary "does not exist"
check "root: --check creates neither the state nor the runtime directory" \
        test ! -e "$WORK/new-state" -a ! -e "$WORK/new-run"

# [Execution] Bwrap=/nonexistent: bwrap fails, so does the whole check.
printf '[Environments]\nBootstrap=\n[Execution]\nAllowUnscoped=yes\nBwrap=/nonexistent\n' >"$WORK/no-bwrap.conf"
check_as root "$WORK/no-bwrap.conf" "$WORK/creds" "$WORK/state" "$WORK/run" --json
expect_rc 1 "Bwrap=/nonexistent: the check fails"
check "Bwrap=/nonexistent: bwrap fails" item_is bwrap fail
check "Bwrap=/nonexistent: the reason names the path" item_says bwrap reason "/nonexistent"
check "Bwrap=/nonexistent: the report is still complete" report_ok
check_as root "$WORK/no-bwrap.conf" "$WORK/creds" "$WORK/state" "$WORK/run"
expect_rc 1 "Bwrap=/nonexistent, text: the check fails"
check "Bwrap=/nonexistent, text: the line says fail and the fix" \
        grep -qE '^fail  bwrap .*/nonexistent.* Fix: ' "$WORK/out"

# A Listen= of the ScienceDiscovery dialect: the item "dialects" after the others, a warning that
# says what that scheme leaves unsigned next to what ours signs; nothing else changes.
printf '[Environments]\nBootstrap=\n[Execution]\nAllowUnscoped=yes\n[Runner]\nListen=127.0.0.1:4311\n%s\n' \
        'Listen=sciencediscovery=127.0.0.1:4312' >"$WORK/sd.conf"
check_as root "$WORK/sd.conf" "$WORK/creds" "$WORK/state" "$WORK/run" --json
check "Listen=sciencediscovery=: the item dialects comes last" \
        json_check "[c['id'] for c in j['checks']] == $IDS + ['dialects']"
check "Listen=sciencediscovery=: dialects warns, naming the listener" \
        json_check "[c for c in j['checks'] if c['id'] == 'dialects'][0]['status'] == 'warn' and \
'127.0.0.1:4312' in [c for c in j['checks'] if c['id'] == 'dialects'][0]['summary']"
check "Listen=sciencediscovery=: the reason says method, path and query are not signed" \
        item_says dialects reason "the method, path and query are not signed"
check "Listen=sciencediscovery=: ... and what our v1 signature covers" \
        item_says dialects reason "Our own API (v1) signs the method, path, query, timestamp and body"
check "Listen=sciencediscovery=: a warning only, the exit status as the other items say (exit $RC)" \
        json_check "j['ok'] == ($RC == 0)"
check_as root "$WORK/sd.conf" "$WORK/creds" "$WORK/state" "$WORK/run"
check "Listen=sciencediscovery=, text: the warn line of dialects" \
        grep -qE '^warn  dialects .*not signed.* Fix: ' "$WORK/out"

# A token file every user may read: credentials fail.
mkdir -m 0700 "$WORK/creds-0644"
cp -p "$WORK/creds/api-token" "$WORK/creds/signing-key" "$WORK/creds-0644/"
chmod 0644 "$WORK/creds-0644/api-token"
check_as root "$CONF" "$WORK/creds-0644" "$WORK/state" "$WORK/run" --json
expect_rc 1 "a token file of mode 0644: the check fails"
check "a token file of mode 0644: credentials fail" item_is credentials fail
check "a token file of mode 0644: the reason says the mode" item_says credentials reason "mode 0644"
check "a token file of mode 0644: the fix says what to do" item_says credentials fix "umask 077"

# No credentials at all (no $CREDENTIALS_DIRECTORY file, no TokenFile=, none in the credstore).
mkdir -m 0700 "$WORK/creds-none"
check_as root "$CONF" "$WORK/creds-none" "$WORK/state" "$WORK/run" --json
if [ -e /etc/credstore/sandbox-runner.api-token ] || [ -e /run/credstore/sandbox-runner.api-token ]; then
        ok "no credentials: # SKIP this host has a credstore entry for the service"
else
        expect_rc 1 "no credentials: the check fails"
        check "no credentials: the reason names what was looked for" item_says credentials reason "TokenFile"
fi

# ---------------------------------------------------------------------------
# As an unprivileged user, with credentials, state and runtime directories of its own.
if [ "$(id -u)" -eq 0 ]; then
        mkdir -m 0700 "$WORK/creds-nobody" "$WORK/state-nobody" "$WORK/run-nobody"
        cp "$WORK/creds/api-token" "$WORK/creds/signing-key" "$WORK/creds-nobody/"
        chmod 0600 "$WORK/creds-nobody/"*
        chown -R 65534:65534 "$WORK/creds-nobody" "$WORK/state-nobody" "$WORK/run-nobody"
        check_as nobody "$CONF" "$WORK/creds-nobody" "$WORK/state-nobody" "$WORK/run-nobody"
        check "unprivileged: one line an item, in order, exit status as the items say (exit $RC)" lines_ok
        check_as nobody "$CONF" "$WORK/creds-nobody" "$WORK/state-nobody" "$WORK/run-nobody" --json
        check "unprivileged --json: the report is complete and matches the exit status (exit $RC)" report_ok
        check "unprivileged: credentials ok (its own 0600 files)" item_is credentials ok
        check "unprivileged: the limits say the answer is for this user" item_says limits reason "nobody"
        check "unprivileged: the state directory of another owner is a warning" item_is state warn
        # The root's credentials are not readable by it.
        check_as nobody "$CONF" "$WORK/creds" "$WORK/state-nobody" "$WORK/run-nobody" --json
        expect_rc 1 "unprivileged, root's credentials: the check fails"
        check "unprivileged, root's credentials: credentials fail" item_is credentials fail
else
        ok "unprivileged runs # SKIP not root: setpriv cannot change the user"
fi

# ---------------------------------------------------------------------------
# sandbox-runnerctl check against a running daemon
daemon_start preflight
run_ctl() {
        env -u SANDBOX_RUNNER_URL -u SANDBOX_RUNNER_TOKEN -u SANDBOX_RUNNER_TOKEN_FILE \
                "$CTL" --url "$URL" "$@" >"$WORK/out" 2>"$WORK/err"
        RC=$?
}
run_ctl check --json
check "ctl check --json: the five items in order, ok matching the exit status (exit $RC)" json_check \
        "[c['id'] for c in j['checks']] == $CTL_IDS and j['ok'] == ($RC == 0) and \
all(('fix' in c) == (c['status'] != 'ok') for c in j['checks'])"
check "ctl check --json: the sandbox item agrees with /health" sh -c \
        "'$CTL' --url '$URL' --json health | '$PYTHON' -c '
import json, sys
h = json.load(sys.stdin)
r = json.load(open(sys.argv[1]))
s = [c for c in r[\"checks\"] if c[\"id\"] == \"sandbox\"][0]
sys.exit(0 if (s[\"status\"] == \"fail\") == (not h[\"sandbox\"][\"usable\"] or not h[\"sandbox\"][\"executions\"]) else 1)
' '$WORK/out'"
run_ctl check
check "ctl check: one line an item (exit $RC)" sh -c \
        "[ \"\$(awk '{ print \$2 }' '$WORK/out' | tr '\n' ' ')\" = 'sandbox limits egress environments npu ' ]"
check "ctl check: the limits line names the mechanism of AllowUnscoped=yes" \
        grep -qE '^(ok|warn) +limits ' "$WORK/out"
if grep -q '^fail' "$WORK/out"; then expect_rc 1 "ctl check: a failed item fails"; else expect_rc 0 "ctl check: no failed item"; fi
stop_daemon
run_ctl --timeout 2 check
check "ctl check without a daemon: exit 69 (unavailable) (exit $RC)" test "$RC" -eq 69

daemon_finish
