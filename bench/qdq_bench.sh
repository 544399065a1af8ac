#!/usr/bin/env bash
# QDQ convolution model, unfolded vs folded by QDQFoldPass: builds the model
# (bench/make_qdq_model.py: u8 activations with a zero point, per-channel
# 7-bit s8 weights, int32 biases, as ONNX Runtime's quantizer writes with
# reduce_range), converts it with the pass off and on, and measures both
# interleaved in one run ('cannprof bench A --vs B': medians side by side,
# p99, a confidence interval of the change).
#
# usage: bench/qdq_bench.sh [--threads T] [--iterations N] [--channels C]
#                           [--size HW] [--layers L]
# The cannprof binary is $CANNPROF, else build/cannprof.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLI=${CANNPROF:-$CP_ROOT/build/cannprof}
threads=2 iterations=30 model_args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) threads=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --channels | --size | --layers) model_args+=("$1" "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debian's onnx is installed for /usr/bin/python3; run outside the repo so
# our onnx/ folder does not shadow it.
(cd "$work" && /usr/bin/python3 "$CP_ROOT/bench/make_qdq_model.py" "$work/qdq.onnx" "${model_args[@]}")
echo "QDQFoldPass:off" >"$work/off.txt"
"$CLI" convert --model="$work/qdq.onnx" --framework=5 --output="$work/unfolded" \
    --fusion_switch_file="$work/off.txt"
"$CLI" convert --model="$work/qdq.onnx" --framework=5 --output="$work/folded"
echo "A = unfolded QDQ graph (DequantizeLinear -> f32 Conv -> QuantizeLinear)"
echo "B = folded (QLinearConv on oneDNN int8)"
"$CLI" bench "$work/unfolded.om" --vs "$work/folded.om" --threads "$threads" \
    --iterations "$iterations"
