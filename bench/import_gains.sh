#!/usr/bin/env bash
# The ONNX Runtime pack's expected gain, checked: models whose Transposes
# take much of ORT's CPU time are profiled by ONNX Runtime with graph
# optimisations disabled, imported (`cannprof import`) and analyzed
# (`cannprof analyze --json`); the fired rule ort_layout_transposes predicts
# the latency ORT_ENABLE_ALL saves (the pack's prior speedup of the
# Transposes' time and its interval). Then the same model is timed at 'disabled' and 'all',
# interleaved in one process, and profiled at 'all' to count the Transposes
# left. One table per model: predicted vs measured, in the interval or not.
# Method and models in bench/import_gains.py; ORT driven by
# bench/ort_profile.js.
#
# usage: bench/import_gains.sh [--models transpose_chain,nhwc_dwconv,transpose_partial]
#                              [--threads 2] [--rounds 7] [--iterations 100] [--keep DIR]
#                              [--json OUT.json]
# npm's onnxruntime-node 1.30 is installed into the cache folder
# ($XDG_CACHE_HOME/cannprof), Debian's python3-onnx and python3-numpy when
# missing. The cannprof binary is $CANNPROF, else build/cannprof (its CLI
# target built here). Run it on a quiet machine: it measures time (20 to 30
# seconds per model, 1 to 1.5 minutes for the three).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import onnx, numpy' 2>/dev/null; then
    cp_install_deps python3 python3-onnx python3-numpy
fi
if [ -z "${CANNPROF:-}" ]; then
    mkdir -p "$CP_ROOT/build"
    if [ ! -f "$CP_ROOT/build/CMakeCache.txt" ]; then
        cmake -S "$CP_ROOT" -B "$CP_ROOT/build" -DCMAKE_BUILD_TYPE=Release \
            >"$CP_ROOT/build/configure.log" 2>&1 || {
            cat "$CP_ROOT/build/configure.log" >&2
            exit 3
        }
    fi
    cmake --build "$CP_ROOT/build" --target cannprof -j"$(nproc)" \
        >"$CP_ROOT/build/build-cannprof.log" 2>&1 || {
        tail -n 30 "$CP_ROOT/build/build-cannprof.log" >&2
        exit 3
    }
fi
cp_install_ort
# Outside the repo: its onnx/ folder would shadow the onnx package.
cd /tmp
exec "$py" "$CP_ROOT/bench/import_gains.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" \
    --node-path "$CP_ORT_NODE_PATH" "$@"
