#!/usr/bin/env bash
# cannprof vs ONNX Runtime on every corpus model (docs/corpus.md), side by
# side and interleaved in one run: cannprof's default fp32 conversion and its
# best bf16 conversion, each against ORT's CPU provider with every graph
# optimisation, the same 2 threads and the same inputs.
#
# npm's onnxruntime-node 1.30 is a benchmark-only dependency, installed here
# into the cache folder ($XDG_CACHE_HOME/cannprof); the corpus is made by
# scripts/corpus.sh when build/corpus is missing. Extra arguments go to
# bench/ort_compare.py (e.g. --rounds 7, --models resnet18 bert_encoder).
# Run it on a quiet machine: it measures time.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps python3-numpy
cd "$CP_ROOT"
mkdir -p build
# Only the CLI is needed here: build that target, not the test suite.
if [ ! -f build/CMakeCache.txt ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >build/configure.log 2>&1 || {
        cat build/configure.log >&2
        exit 3
    }
fi
cmake --build build --target cannprof -j"$(nproc)" >build/build-cannprof.log 2>&1 || {
    tail -n 30 build/build-cannprof.log >&2
    exit 3
}
corpus=${CORPUS_DIR:-$CP_ROOT/build/corpus}
[ -f "$corpus/manifest.tsv" ] || CORPUS_DIR=$corpus "$CP_ROOT/scripts/corpus.sh"

cp_install_ort
/usr/bin/python3 bench/ort_compare.py --cli "$CP_ROOT/build/cannprof" --corpus "$corpus" \
    --node-path "$CP_ORT_NODE_PATH" "$@"
