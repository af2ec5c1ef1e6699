#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run bench-quota (the cost of workspace quota checks next to `du -s -B1` of the same tree, and the
# time from crossing a limit to the tick that reports it) on a disk-backed directory: the build
# directory (bench-quota falls back to /var/tmp on a tmpfs), then print its BENCH-RESULT line
# (bench_result.py). Usage: run-bench-quota.sh BUILDDIR [FILES [DIRS [TRIALS]]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-bench-quota.sh BUILDDIR [FILES [DIRS [TRIALS]]]}" && pwd)
files=${2:-100000}
dirs=${3:-1000}
trials=${4:-10}

echo "# $(nproc) CPUs; kernel $(uname -r)"
out=$(mktemp /tmp/sr-bench-quota.XXXXXX)
trap 'rm -f "$out"' EXIT
"$build/tests/bench/bench-quota" --dir "$build" --files "$files" --dirs "$dirs" --trials "$trials" | tee "$out"
/usr/bin/python3 "$here/bench_result.py" quota "$out"
