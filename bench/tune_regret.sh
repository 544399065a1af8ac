#!/usr/bin/env bash
# The regret figure of issue 14: `cannprof tune --budget 12` against an
# exhaustive reference grid of 256 points (per-node-group precision x layout x
# fusion), each point measured interleaved against one anchor (the default
# conversion), on the SD-like example and the transformer encoder; the tuner
# quiet and with two background hogs, next to random search and coordinate
# descent given the same 12 latency evaluations. Method in bench/tune_regret.py.
#
# usage: bench/tune_regret.sh [--models "M[:BOUND] ..."] [--reps K] [--grid-rounds N]
#                             [--confirm-rounds N] [--hogs "0 2"] [--seed S] [--keep DIR]
#                             [--priority high] [--grid-binary PATH]
# The cannprof binary is $CANNPROF, else build/cannprof (built here).
# Exit 1 when a bar is missed or a step fails (the tables are printed anyway).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
# Debian's python3 (standard library only), not whatever python3 comes first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$CP_ROOT/bench/tune_regret.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
