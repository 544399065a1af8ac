#!/usr/bin/env bash
# The evidence for the outcome bars of `cannprof tune` (docs/tuning.md) on the
# SD-like example (examples/models/sd_unet_tiny.onnx):
#   1. --target latency --constraints "precision_loss<1%": the tuned model is
#      >= 32.4% faster than the default conversion (interleaved A/B, repeated),
#      found within <= 12 candidate evaluations;
#   2. an exhaustive search over precision x layout x threads (12 points)
#      confirms the tuned result is within 5% of the best point: it prints the
#      number of evaluations and the gap;
#   3. --target throughput raises the batch.
# Everything runs in a fresh temporary directory with a fresh knowledge base.
# See bench/tune_outcome.py for the method.
#
# usage: bench/tune_outcome.sh [--rounds R] [--reps K] [--keep DIR]
# The cannprof binary is $CANNPROF, else build/cannprof (built here).
# Exit 1 when a bar is not met (everything is printed anyway).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
exec python3 "$CP_ROOT/bench/tune_outcome.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
