#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of `sandbox-runnerctl env` (issue 12: managed scientific environments) against the REAL
# daemon, started by tests/helpers/daemon-lib.sh with a drop-in that makes it offline and points
# it at a wheelhouse this test builds (tests/helpers/make-wheelhouse.py):
#   env list shows the base python-base; env create from the wheelhouse plus a client wheel
#   uploaded to a workspace, --wait until ready; env show; env install 'srtest_alpha>=2' --wait
#   makes revision 2 (the client wheel kept); env revisions lists both (-v: versions and hashes);
#   an option-injection spec after -- is refused with the daemon's package_spec_invalid; a base
#   cannot be removed; env remove; env setup (--follow) until the base is ready; --json of every
#   command parses; usage errors; no secret in any output.
#
# Usage: ctl-env.sh /path/to/sandbox-runnerd /path/to/sandbox-runnerctl
# Exit 77 (skip) when a program is missing or the daemon reports that it cannot make sandboxes.

set -u

# shellcheck source=SCRIPTDIR/../helpers/daemon-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/daemon-lib.sh"
daemon_lib_init ctl-env "${1:-}" "${2:-}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Setups are slow (a venv, pip, in sandboxes): each wait has a limit of its own, so that a hung
# setup fails its test rather than the whole suite's timeout.
WAIT=(--timeout 300)

# ---------------------------------------------------------------------------
# The wheelhouse (srtest_alpha 1.0 and 2.0, srtest_beta 1.0 needing srtest_alpha; the client
# wheel srtest_gamma 0.1), the daemon offline with it
# shellcheck disable=SC2119  # no directories beyond creds, state, run
daemon_credentials
mkdir -m 0755 "$WORK/wh"
if ! "$PYTHON" "$HERE/../helpers/make-wheelhouse.py" "$WORK/wh" >"$WORK/wheelhouse.log" 2>&1; then
        echo "Bail out! make-wheelhouse.py failed"
        sed 's/^/# /' "$WORK/wheelhouse.log"
        exit 1
fi
GAMMA=$(find "$WORK/wh/client" -name 'srtest_gamma-0.1-*.whl' | head -n 1)
if [ -z "$GAMMA" ] || ! ls "$WORK/wh/wheelhouse"/srtest_alpha-2.0-*.whl >/dev/null 2>&1; then
        echo "Bail out! the wheelhouse lacks srtest_alpha 2.0 or the client wheel srtest_gamma 0.1"
        exit 1
fi
chmod -R a+rX "$WORK/wh"
mkdir -m 0755 "$WORK/runner.conf.d"
printf '[Environments]\nBootstrap=python-base\nWheelhouse=%s\nOffline=yes\n' "$WORK/wh/wheelhouse" >"$WORK/runner.conf.d/50-environments.conf"

daemon_start ctl-env
daemon_require_sandbox

# ---------------------------------------------------------------------------
# TAP helpers beyond daemon-lib.sh's
clean_env=(env -u SANDBOX_RUNNER_TOKEN -u SANDBOX_RUNNER_TOKEN_FILE -u SANDBOX_RUNNER_URL
           -u SANDBOX_RUNNER_SIGNING_KEY -u SANDBOX_RUNNER_SIGNING_KEY_FILE
           CREDENTIALS_DIRECTORY="$WORK/creds")
# ctl ARGS...: the CLI against the daemon; stdout, stderr and the exit code in out, err, RC.
ctl() {
        "${clean_env[@]}" "$CTL" --url "$URL" "$@" </dev/null >"$WORK/out" 2>"$WORK/err"
        RC=$?
        keep_outputs "$WORK/out" "$WORK/err"
}
out_has() {
        grep -qF -- "$1" "$WORK/out"
}
err_has() {
        grep -qF -- "$1" "$WORK/err"
}
out_matches() {
        grep -qE -- "$1" "$WORK/out"
}

ENV=sci-a
WS=ctl-env-ws

# ---------------------------------------------------------------------------
# The base
ctl env list
expect_rc 0 "env list"
check "env list: the header" out_matches '^NAME +KIND +BASE +STATE +REVISION +PACKAGES$'
check "env list: python-base, a python base" out_matches '^python-base +python +yes +'

ctl --json env list
expect_rc 0 "env list --json"
check "env list --json: python-base is a base of kind python" \
        json_check "any(e['name'] == 'python-base' and e['base'] and e['kind'] == 'python' for e in j['environments'])"

ctl env setup
expect_rc 0 "env setup"
check "env setup: a line for python-base with its phase and progress" \
        out_matches '^python-base +(pending|building|ready|failed) +([0-9]+|-)/([0-9]+|-)'

ctl --json env setup
expect_rc 0 "env setup --json"
check "env setup --json: python-base's phase" \
        json_check "any(s['name'] == 'python-base' and s['phase'] in ('pending', 'building', 'ready', 'failed') for s in j['setup'])"

# ---------------------------------------------------------------------------
# A named environment from the wheelhouse and a client wheel
ctl upload "$WS" "$GAMMA"
expect_rc 0 "upload the client wheel into workspace $WS"
GAMMA_FILE=$(basename "$GAMMA")

ctl "${WAIT[@]}" env create "$ENV" --kind python --wheel "$WS:$GAMMA_FILE" --wait 'srtest_alpha<2' srtest_beta
expect_rc 0 "env create --wait from the wheelhouse and a client wheel"
check "env create --wait: the progress line ends ready" out_matches "^$ENV +ready +"

ctl env show "$ENV"
expect_rc 0 "env show"
check "env show: ready" out_matches '^state: +ready$'
check "env show: revision 1" out_matches '^revision: +1$'
check "env show: srtest_alpha 1.0 installed" out_matches '^  srtest[-_]alpha +1\.0$'
check "env show: srtest_beta installed" out_matches '^  srtest[-_]beta +1\.0$'
check "env show: the client wheel's package installed" out_matches '^  srtest[-_]gamma +0\.1$'
check "env show: the client wheel stored by its hash" out_matches "^  [0-9a-f]{64}  $GAMMA_FILE\$"

ctl exec --environment "$ENV" --workspace "$WS" -- python3 -c 'import srtest_alpha, sys; print(srtest_alpha.VERSION, sys.prefix)'
expect_rc 0 "exec --environment $ENV"
check "exec --environment: srtest_alpha 1.0 from /opt/science-env" out_matches '^1\.0 /opt/science-env$'

ctl "${WAIT[@]}" env install "$ENV" 'srtest_alpha>=2' --wait
expect_rc 0 "env install 'srtest_alpha>=2' --wait"

ctl --json env show "$ENV"
expect_rc 0 "env show --json"
check "env install: revision 2, srtest_alpha 2.0" \
        json_check "j['revision'] == 2 and j['state'] == 'ready' and any(p['name'].replace('-', '_') == 'srtest_alpha' and p['version'] == '2.0' for p in j['packages'])"
check "env install: the spec replaced the old one, the others and the client wheel kept" \
        json_check "'srtest_alpha>=2' in j['requested'] and 'srtest_alpha<2' not in j['requested'] and 'srtest_beta' in j['requested'] and any(w['file'] == '$GAMMA_FILE' for w in j['wheels'])"

ctl env revisions "$ENV"
expect_rc 0 "env revisions"
check "env revisions: the header" out_matches '^REVISION +CREATED +PACKAGES +PROVISIONER$'
check "env revisions: revision 1 with its RFC 3339 time" out_matches '^ +1  [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z +[0-9]+  '
check "env revisions: revision 2" out_matches '^ +2  [0-9]{4}-'

ctl -v env revisions "$ENV"
expect_rc 0 "env revisions -v"
check "env revisions -v: srtest_alpha 2.0 with its sha256" out_matches '^    srtest[-_]alpha  2\.0  [0-9a-f]{64}  '

ctl --json env revisions "$ENV"
expect_rc 0 "env revisions --json"
check "env revisions --json: two revisions, the resolved versions and hashes recorded" \
        json_check "[r['revision'] for r in j['revisions']] == [1, 2] and all(len(p['sha256']) == 64 for r in j['revisions'] for p in r['packages'] if p['name'].replace('-', '_').startswith('srtest_'))"

# ---------------------------------------------------------------------------
# Refusals
ctl env install "$ENV" -- '--index-url=https://x'
expect_rc 1 "env install -- --index-url=https://x: refused"
check "the daemon's package_spec_invalid" err_has "package_spec_invalid"

ctl --json env create sci-b --kind python -- '--index-url=https://x'
expect_rc 1 "env create -- --index-url=https://x: refused"
check "--json: the daemon's error object" json_check "j['error'] == 'package_spec_invalid'"

ctl env remove python-base
expect_rc 1 "env remove of a base: refused"
check "the daemon's environment_read_only" err_has "environment_read_only"

ctl env show no-such-env
expect_rc 1 "env show of an unknown environment"
check "the daemon's not_found (404)" err_has "not_found, HTTP 404"

ctl env create sci-c srtest_beta
expect_rc 2 "env create without --kind: a usage error"
check "says --kind is needed" err_has "--kind"
ctl env list --wait
expect_rc 2 "env list --wait: a usage error"
ctl env frobnicate
expect_rc 2 "an unknown env command: a usage error"

# ---------------------------------------------------------------------------
# Removal
ctl --json env remove "$ENV"
expect_rc 0 "env remove --json"
check "env remove: removing" json_check "j['name'] == '$ENV' and j['state'] == 'removing'"
gone() {
        for _ in $(seq 100); do
                ctl env show "$ENV"
                [ "$RC" -ne 0 ] && err_has 'not_found, HTTP 404' && return 0
                sleep 0.1
        done
        return 1
}
check "env remove: the environment is gone within 10 s" gone

# ---------------------------------------------------------------------------
# The base's setup, followed to its end
ctl "${WAIT[@]}" env setup --follow
expect_rc 0 "env setup --follow: every setup ended ready"
check "env setup --follow: python-base ready" out_matches '^python-base +ready +'

ctl --json env setup --follow
expect_rc 0 "env setup --follow --json"
check "env setup --follow --json: all ready" json_check "all(s['phase'] == 'ready' for s in j['setup'])"

# shellcheck disable=SC2119  # no secrets beyond the token and the key
daemon_check_secrets
daemon_finish
