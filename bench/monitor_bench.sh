#!/usr/bin/env bash
# The serving monitor's overhead and its time from an injected slowdown to the alert
# (bench/monitor_bench.py). usage: bench/monitor_bench.sh [--model M | --flow] [--reps N] [--drills N]
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
exec "$py" "$CP_ROOT/bench/monitor_bench.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
