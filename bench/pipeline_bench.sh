#!/usr/bin/env bash
# node-bottleneck's accuracy on planted flows and the what-if prediction
# error against real runs of the changed flows (bench/pipeline_bench.py).
# usage: bench/pipeline_bench.sh [--reps N] [--requests N]
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$CP_ROOT/bench/pipeline_bench.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
