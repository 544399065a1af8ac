#!/usr/bin/env bash
# serve's throughput under load against bench's, with and without dynamic
# batching (bench/serve_bench.py). usage: bench/serve_bench.sh [--model M] [--reps N]
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
cd "$CP_ROOT"
exec "$py" "$CP_ROOT/bench/serve_bench.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
