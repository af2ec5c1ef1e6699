#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-fuzz.sh TARGET CORPUS SECONDS [libFuzzer options...]
# Fuzz TARGET for SECONDS ($FUZZ_SECONDS overrides) over a copy of the seed corpus CORPUS, so the
# source tree is never written to, with $TMPDIR pointing into a scratch directory removed
# afterwards. Exit 0, or 1 on any crash, leak, sanitizer report, timeout or out-of-memory; the
# offending input is kept as TARGET's directory/artifacts-<target>/crash-... (or leak-, timeout-).
set -euo pipefail

target=$1 corpus=$2 seconds=${FUZZ_SECONDS:-$3}
shift 3

[ -x "$target" ] || { echo "run-fuzz.sh: no such fuzz target: $target" >&2; exit 1; }
[ -d "$corpus" ] || { echo "run-fuzz.sh: no seed corpus: $corpus" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/tmp"
cp -r "$corpus"/. "$work/corpus/"
artifacts="$(dirname "$target")/artifacts-$(basename "$target")"
mkdir -p "$artifacts"

echo "fuzzing $(basename "$target") for ${seconds}s over $(find "$corpus" -type f | wc -l) seeds"
rc=0
TMPDIR="$work/tmp" "$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$@" "$work/corpus" || rc=$?
if [ "$rc" -ne 0 ]; then
        echo "run-fuzz.sh: $(basename "$target") failed (exit $rc); inputs kept in $artifacts:" >&2
        ls -l "$artifacts" >&2
        exit 1
fi
