# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP for the shell suites (POSIX sh: ctl-health.sh sources it as well as daemon-lib.sh). A suite
# runs its command under test with stdout in $WORK/out, stderr in $WORK/err and the exit code in
# $RC, then asserts with these; it prints the plan and exits with FAILED at the end.

N=0
FAILED=0
ok() {
        N=$((N + 1))
        echo "ok $N - $1"
}
not_ok() {
        N=$((N + 1))
        FAILED=$((FAILED + 1))
        echo "not ok $N - $1"
}
diag_outputs() {
        sed 's/^/# stdout: /' "$WORK/out" | head -n 20
        sed 's/^/# stderr: /' "$WORK/err" | head -n 20
}
# check "description" command...: ok when the command succeeds (the outputs as diagnostics if not)
check() {
        desc=$1
        shift
        if "$@"; then
                ok "$desc"
        else
                not_ok "$desc"
                diag_outputs
        fi
}
# expect_rc CODE "description": the last command exited with CODE
expect_rc() {
        if [ "$RC" -eq "$1" ]; then
                ok "$2 (exit $1)"
        else
                not_ok "$2 (exit $RC, expected $1)"
                diag_outputs
        fi
}
out_is() {
        [ "$(cat "$WORK/out")" = "$1" ]
}
err_is() {
        [ "$(cat "$WORK/err")" = "$1" ]
}
out_empty() {
        [ ! -s "$WORK/out" ]
}
err_empty() {
        [ ! -s "$WORK/err" ]
}
