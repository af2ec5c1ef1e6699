#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run bench-snapshot on a disk-backed directory: DATADIR if given, else the build directory,
# else /var/tmp (never a tmpfs: page-cache copies would flatter every number).
# About a minute on a quiet disk, up to ~3 minutes on a busy shared one (3 rounds of the small
# workspace, 1 of the big file).
# Ends with the BENCH-RESULT line of bench_result.py (ratios against cp -a and sha256sum, per round).
# Usage: run-bench-snapshot.sh BUILDDIR [DATADIR [FILES [BIG_MIB [ROUNDS]]]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-bench-snapshot.sh BUILDDIR [DATADIR [FILES [BIG_MIB [ROUNDS]]]]}" && pwd)
files=${3:-10000}
big_mib=${4:-1024}
rounds=${5:-3}

fstype() { stat -f -c %T "$1"; }
avail_mib() { df -Pm "$1" | awk 'NR == 2 { print $4 }'; }
# The big file exists three times at most (workspace, copy or object, restore), plus slack.
need_mib=$((big_mib * 3 + 512))

pick=
for d in ${2:+"$2"} "$build" /var/tmp; do
        [ -d "$d" ] && [ -w "$d" ] || continue
        [ "$(fstype "$d")" = tmpfs ] && continue
        [ "$(avail_mib "$d")" -ge "$need_mib" ] || continue
        pick=$d
        break
done
if [ -z "$pick" ]; then
        echo "run-bench-snapshot: no disk-backed directory with ${need_mib} MiB free" >&2
        exit 1
fi

echo "# $(fstype "$pick") at $pick, $(avail_mib "$pick") MiB free; $(nproc) CPUs; kernel $(uname -r)"
out=$(mktemp /tmp/sr-bench-snapshot.XXXXXX)
trap 'rm -f "$out"' EXIT
"$build/tests/bench/bench-snapshot" --dir "$pick" --files "$files" --big-mib "$big_mib" --rounds "$rounds" | tee "$out"
/usr/bin/python3 "$here/bench_result.py" snapshot "$out"
