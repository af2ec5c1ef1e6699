#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP test of the Debian package (meson test 'package-deb'): build-deb.sh builds it from a copy of
# the source tree and lints it (no lintian error or warning), the tree and its parent directory are
# left as they were, then check-deb.sh's checks run on the .deb (files, maintainer scripts).
# Never installs the package. Fails (no skip) when dpkg-buildpackage, debhelper or lintian is missing.
#
# Usage: package-deb.sh SRC OUTDIR

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../helpers/tap-lib.sh
. "$here/../helpers/tap-lib.sh"
# shellcheck source=check-deb.sh
. "$here/check-deb.sh"

if [ $# -ne 2 ]; then
        echo "usage: package-deb.sh SRC OUTDIR" >&2
        exit 2
fi
src=$1
out=$2
pd_work=$(mktemp -d "${TMPDIR:-/tmp}/package-deb.XXXXXX") || exit 1
WORK=$pd_work           # check_deb_main points WORK at a directory of its own
trap 'rm -rf "$pd_work"; check_deb_cleanup' EXIT

# What the build could leave behind: files in the tree (git's view, ignored ones included) and
# dpkg-buildpackage's results in the tree's parent directory.
tree_state() {
        git -C "$src" status --porcelain --ignored --untracked-files=all -- . ':!build*'
        find "$src/.." -maxdepth 1 -name 'sandbox-runner_*' 2>/dev/null
}

tree_state >"$WORK/tree-before"
start=$(date +%s)
bash "$here/build-deb.sh" "$src" "$out" >"$WORK/out" 2>"$WORK/err"
RC=$?
secs=$(($(date +%s) - start))
sed 's/^/# /' "$WORK/out"
expect_rc 0 "build-deb.sh: the package built, lintian found no error and no warning, in $secs s"
tree_state >"$WORK/tree-after"
check "the source tree and its parent directory are as before" cmp -s "$WORK/tree-before" "$WORK/tree-after"

deb=$(sed -n 's/^deb: //p' "$WORK/out")
if [ "$RC" -ne 0 ] || [ -z "$deb" ]; then
        not_ok "a .deb to check"
        echo "1..$N"
        exit 1
fi
check_deb_main "$deb"

echo "1..$N"
[ "$FAILED" -eq 0 ]
