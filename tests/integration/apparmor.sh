#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of the AppArmor profile for bwrap (units/apparmor/sandbox-runner-bwrap.in, as generated
# in the build directory): its shape, that it attaches to the path the built daemon runs bwrap at
# (`sandbox-runnerd --check --json`, item "bwrap", with an empty configuration), and a syntax check
# by apparmor_parser without loading anything (--skip-kernel-load, --skip-cache, warnings as errors,
# a private include directory first on the search path).
#
# The profile uses AppArmor 4.0's `userns,` rule under `abi <abi/4.0>`. Parser >= 4.0: the profile
# is parsed as shipped. Older parsers (Debian 12 has 3.0.8) know neither: the include directory
# then holds a stand-in abi/4.0 (the parser only needs the file to exist), the test parses a copy
# without exactly the `userns,` line, which must pass, and asserts that the parser rejects the
# profile as shipped at that line. The day the parser understands `userns,`, that assertion fails
# and this test must parse the real profile instead (it does so for any parser >= 4.0).
#
# Nothing is loaded: this machine's kernel has no AppArmor. Runs as any user.
#
# Usage: apparmor.sh /path/to/build/units/apparmor/sandbox-runner-bwrap /path/to/sandbox-runnerd
# Fails (no skip) when apparmor_parser (package apparmor) or an argument is missing.

set -u

PROFILE=${1:-}
DAEMON=${2:-}
NAME=sandbox-runner-bwrap
PATH=$PATH:/usr/sbin:/sbin

# shellcheck source=SCRIPTDIR/../helpers/tap-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/tap-lib.sh"

bail() {
        echo "Bail out! $*"
        exit 1
}

{ [ -n "$PROFILE" ] && [ -f "$PROFILE" ]; } || bail "the generated profile not given or missing: '$PROFILE'"
{ [ -n "$DAEMON" ] && [ -x "$DAEMON" ]; } || bail "sandbox-runnerd not given or not executable: '$DAEMON'"
PARSER=$(command -v apparmor_parser) || bail "apparmor_parser not found (install the package apparmor)"
[ -x /usr/bin/python3 ] || bail "/usr/bin/python3 not found"
DAEMON=$(realpath "$DAEMON")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/apparmor.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM HUP
mkdir -p "$WORK/inc/abi" "$WORK/inc/local"
: >"$WORK/out"
: >"$WORK/err"

# parse FILE [OPTIONS...]: apparmor_parser without loading or caching, warnings as errors, our
# include directory searched first (before /etc/apparmor.d); stdout, stderr and RC kept.
parse() {
        local file=$1
        shift
        "$PARSER" --skip-kernel-load --skip-cache --Werror -I "$WORK/inc" "$@" "$file" >"$WORK/out" 2>"$WORK/err"
        RC=$?
}

version=$("$PARSER" --version 2>/dev/null | sed -n 's/^AppArmor parser version \([0-9][0-9.]*\).*/\1/p')
[ -n "$version" ] || bail "cannot tell the version of $PARSER"
echo "# $PARSER $version"
if [ "$(printf '%s\n' 4.0 "$version" | sort -V | head -n 1)" = 4.0 ]; then
        modern=1
else
        modern=0
fi

# ---------------------------------------------------------------------------
# The profile's shape
check "no unsubstituted @VARIABLE@" sh -c "! grep -q '@[A-Za-z_]*@' '$PROFILE'"
check "abi <abi/4.0>" grep -qx 'abi <abi/4.0>,' "$PROFILE"
check "one profile: $NAME, attached to a path, unconfined" \
        test "$(grep -cE "^profile $NAME /[^ ]+ flags=\(unconfined\) \{\$" "$PROFILE")" -eq 1
check "the rule userns, once, verbatim" test "$(grep -cx '  userns,' "$PROFILE")" -eq 1
check "include if exists <local/$NAME>" grep -qx "  include if exists <local/$NAME>" "$PROFILE"
check "no other rule in the profile (it grants userns only)" \
        test "$(sed -n "/^profile /,/^}/p" "$PROFILE" | grep -cvE '^\s*(#|$)')" -eq 4
attach=$(sed -n "s/^profile $NAME \(\/[^ ]*\) flags=.*/\1/p" "$PROFILE")
echo "# attaches to: $attach"

# ---------------------------------------------------------------------------
# The attachment is the daemon's own default bwrap (no runner.conf: an empty one)
: >"$WORK/empty.conf"
(cd / && env -i PATH=/usr/bin:/bin LANG=C.UTF-8 ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
        ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} "$DAEMON" --check --json --config "$WORK/empty.conf") \
        >"$WORK/check.json" 2>"$WORK/check.err"
bwrap_summary=$(/usr/bin/python3 -c 'import json, sys
print(next(c["summary"] for c in json.load(open(sys.argv[1]))["checks"] if c["id"] == "bwrap"))' "$WORK/check.json" 2>>"$WORK/check.err")
echo "# sandbox-runnerd --check, item bwrap: $bwrap_summary"
case "$bwrap_summary" in
*" at $attach" | "'$attach' "*) ok "the profile attaches to the daemon's default bwrap ($attach)" ;;
*)
        not_ok "the profile attaches to '$attach', the daemon's default bwrap is not it: '$bwrap_summary'"
        sed 's/^/# check: /' "$WORK/check.err" | head -n 10
        ;;
esac

# ---------------------------------------------------------------------------
# The parser itself checks what we rely on: an unknown flag is refused
# (an older parser: an empty stand-in for abi/4.0, which it lacks, and without userns,)
if [ "$modern" = 1 ]; then
        sed 's/flags=(unconfined)/flags=(unconfinedx)/' "$PROFILE" >"$WORK/badflag"
else
        : >"$WORK/inc/abi/4.0"
        sed 's/flags=(unconfined)/flags=(unconfinedx)/; /^  userns,$/d' "$PROFILE" >"$WORK/badflag"
fi
parse "$WORK/badflag"
check "the parser refuses an unknown profile flag (so it knows 'unconfined')" \
        sh -c "[ $RC -ne 0 ] && grep -q 'Invalid profile flag: unconfinedx' '$WORK/err'"

if [ "$modern" = 1 ]; then
        # -----------------------------------------------------------------------
        # AppArmor >= 4.0: the profile as shipped
        parsed=$PROFILE
        parse "$PROFILE"
        expect_rc 0 "apparmor_parser $version parses the profile as shipped"
else
        # -----------------------------------------------------------------------
        # AppArmor < 4.0: without the rule it lacks, and refusing the profile at that rule
        parsed=$WORK/$NAME-without-userns
        sed '/^  userns,$/d' "$PROFILE" >"$parsed"
        check "the copy lacks exactly the line '  userns,'" \
                test "$(diff "$PROFILE" "$parsed" | grep -c '^[<>]')" -eq 1 -a \
                "$(diff "$PROFILE" "$parsed" | grep '^[<>]')" = "<   userns,"
        parse "$parsed"
        expect_rc 0 "apparmor_parser $version parses the profile without userns, (abi/4.0: a stand-in)"
        line=$(grep -nx '  userns,' "$PROFILE" | cut -d: -f1)
        parse "$PROFILE"
        echo "# as shipped: $(grep -v '^Cache read/write disabled' "$WORK/err" | head -n 1)"
        check "apparmor_parser $version refuses the profile as shipped at userns, (line $line): it does not know the rule" \
                sh -c "[ $RC -ne 0 ] && grep -q 'parser error for .* at line $line: syntax error' '$WORK/err'"
fi

# ---------------------------------------------------------------------------
# Common to both: the names in it, and the site's local file is included
parse "$parsed" --names
check "the file holds one profile, named $NAME" out_is "$NAME"
echo 'this is not a rule' >"$WORK/inc/local/$NAME"
parse "$parsed"
check "a broken local/$NAME breaks the parse (the local include is read)" \
        sh -c "[ $RC -ne 0 ] && grep -q 'in profile .*local/$NAME at line 1' '$WORK/err'"
echo '  /nonexistent/sandbox-runner-apparmor-test r,' >"$WORK/inc/local/$NAME"
parse "$parsed"
expect_rc 0 "a valid local/$NAME parses"

echo "1..$N"
[ "$FAILED" -eq 0 ]
