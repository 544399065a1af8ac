#!/usr/bin/env bash
# Every conversion knob with its effect, on every example model: latency with
# no passes, each pass alone and all passes; each layout policy and precision
# mode; throughput at batch 1 and 4 of a dynamic-batch .om; arena and peak
# memory with buffer_optimize on and off; precision_loss of every row against
# the unconverted .onnx; and the bar line for sd_unet_tiny (all passes + best
# layout + allow_mix_precision_bf16 >= 35% faster than no passes in fp32,
# precision_loss < 1%). See bench/passes_bench.py for the method.
#
# usage: bench/passes_bench.sh [--rounds R] [--duration D] [--warmup W]
#                              [--threads T] [--models NAME ...]
# The cannprof binary is $CANNPROF, else build/cannprof (built here).
# Exit 1 when the bar is not met.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
exec python3 "$CP_ROOT/bench/passes_bench.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
