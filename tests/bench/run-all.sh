#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every benchmark of tests/bench/ at its real size, one after the other, then one table: each
# target, the figure measured (over the whole run, and the median and quartiles of its batches),
# met or not, and the floor it is measured against (measured in the same run), under a line that
# names the machine (CPUs, kernel, date, load). Needs root (egress: namespaces; scopes: a private
# systemd, booted only through tests/helpers/box-test-lib.sh). 10-20 minutes on 2 CPUs.
#
#   tests/bench/run-all.sh BUILDDIR [BENCH...]    (BENCH: execute environment scopes egress snapshot quota sciencediscovery kernels)
#
# Each bench's whole output is kept in a directory named at the end; its BENCH-RESULT line
# (bench_result.py) is what the table is made of. Exit status 0 when every bench ran to its end
# and printed its result line, whatever the figures (a missed target is not a failure here:
# the table says so); 1 otherwise, the table showing which failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-all.sh BUILDDIR [BENCH...]}" && pwd) || exit 1
shift
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(execute environment scopes egress snapshot quota sciencediscovery kernels)

if [ "$(id -u)" -ne 0 ]; then
        echo "run-all.sh: needs root (egress: namespaces; scopes: a private systemd)" >&2
        exit 1
fi
out=$(mktemp -d /tmp/sr-bench-all.XXXXXX)

# The real sizes: the ones each target was set for (issues 3, 4, 5, 12, 22 and 26).
set_cmd() {
        case $1 in
        execute)     cmd=("$here/run-bench.sh" "$build" 500) ;;
        environment) cmd=("$here/run-bench-environment.sh" "$build" 300 python-base) ;;
        scopes)      cmd=("$here/run-bench-scopes.sh" "$build" 200) ;;
        egress)      cmd=("$here/run-bench-egress.sh" "$build" 1024 3 1000) ;;
        snapshot)    cmd=("$here/run-bench-snapshot.sh" "$build") ;;
        quota)       cmd=("$here/run-bench-quota.sh" "$build") ;;
        sciencediscovery) cmd=("$here/run-bench-sciencediscovery.sh" "$build" 200) ;;
        kernels)     cmd=("$here/run-bench-kernels.sh" "$build") ;;
        *)           return 1 ;;
        esac
}

files=()
for b in "${benches[@]}"; do
        set_cmd "$b" || { echo "run-all.sh: no bench '$b'" >&2; exit 1; }
done
for b in "${benches[@]}"; do
        set_cmd "$b"
        t0=$(date +%s)
        echo "== $b: ${cmd[*]}" >&2
        bash "${cmd[@]}" >"$out/$b.out" 2>&1 </dev/null
        rc=$?
        echo "   exit status $rc after $(( $(date +%s) - t0 )) s; $(grep -c '^BENCH-RESULT ' "$out/$b.out") result line(s)" >&2
        files+=("$out/$b.out")
done

echo
/usr/bin/python3 "$here/bench_result.py" table "${files[@]}"
rc=$?
echo
echo "# whole outputs: $out"
exit $rc
