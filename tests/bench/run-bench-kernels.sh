#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 22's kernel targets against jupyter_server 1.23 (bench-kernels.py says what and how).
# Usage: run-bench-kernels.sh BUILDDIR [ROUNDS] (BENCH_SMOKE=1: a few rounds; BENCH_USER: the
# user our daemon is started as).
set -euo pipefail
build=${1:?usage: run-bench-kernels.sh BUILDDIR [ROUNDS]}
exec /usr/bin/python3 "$(dirname "$0")/bench-kernels.py" "$build" ${2:+--rounds "$2"}
