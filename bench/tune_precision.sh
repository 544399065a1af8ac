#!/usr/bin/env bash
# The precision-budget figures of `cannprof tune` on the SD-like example
# (issue 14): under precision_loss<0.5% (whole-model bf16 breaks it) and <1%,
# the tuned model against the default conversion, interleaved, repeated, with
# the precision checks and latency evaluations each run spent. Method in
# bench/tune_precision.py.
#
# usage: bench/tune_precision.sh [--reps K] [--ab-rounds N] [--budgets "B1;B2"] [--keep DIR]
# The cannprof binary is $CANNPROF, else build/cannprof (built here).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
exec python3 "$CP_ROOT/bench/tune_precision.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
