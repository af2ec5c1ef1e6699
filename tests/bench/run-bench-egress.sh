#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Egress benchmark (bench-egress.py): throughput of a download through bridge + gateway against a
# direct loopback download, and the set-up latency of CONNECTs against direct TCP connects, all
# inside private mount + network namespaces (only loopback traffic). Run by hand, as root; not a
# pass/fail test (it prints medians, ratios and the targets: >= 80% throughput, < 1 ms added, then
# the BENCH-RESULT line of bench_result.py, with each round's and each batch's figure's quartiles).
# Usage: run-bench-egress.sh BUILDDIR [MIB [REPEAT [CONNECTS [WARM]]]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-bench-egress.sh BUILDDIR [MIB [REPEAT [CONNECTS [WARM]]]]}" && pwd)
mib=${2:-1024}
repeat=${3:-3}
connects=${4:-1000}
warm=${5:-50}

if [ "$(id -u)" -ne 0 ]; then
        echo "run-bench-egress: needs root (mount and network namespaces)" >&2
        exit 77
fi
for f in src/sandbox-runnerd src/egress/sandbox-runner-egress src/bridge/sandbox-runner-bridge; do
        [ -x "$build/$f" ] || { echo "run-bench-egress: $build/$f is not built" >&2; exit 1; }
done
echo "# $(nproc) CPUs; kernel $(uname -r); $(bwrap --version 2>/dev/null || echo 'bwrap ?')"
exec /usr/bin/python3 "$here/bench-egress.py" --daemon "$build/src/sandbox-runnerd" \
        --mib "$mib" --repeat "$repeat" --connects "$connects" --warm "$warm"
