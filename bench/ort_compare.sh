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
# node and npm may come from Debian (nodejs, npm) or from a nodejs build that
# bundles npm: install Debian's only when either command is missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    cp_install_deps nodejs npm
fi
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

ORT_VERSION=1.30.0
ort_dir=${XDG_CACHE_HOME:-$HOME/.cache}/cannprof/onnxruntime-node-$ORT_VERSION
if [ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]; then
    mkdir -p "$ort_dir"
    [ -f "$ort_dir/package.json" ] || echo '{"name":"cannprof-ort-bench","private":true}' \
        >"$ort_dir/package.json"
    # The CPU binaries ship inside the package; the install script only
    # fetches CUDA's, which this benchmark does not use.
    (cd "$ort_dir" && ONNXRUNTIME_NODE_INSTALL_CUDA=skip ONNXRUNTIME_NODE_INSTALL=skip \
        npm install --no-audit --no-fund --ignore-scripts "onnxruntime-node@$ORT_VERSION" \
        >"$ort_dir/npm-install.log" 2>&1) || {
        tail -n 20 "$ort_dir/npm-install.log" >&2
        echo "cannprof: npm install onnxruntime-node@$ORT_VERSION failed" >&2
        exit 3
    }
fi
/usr/bin/python3 bench/ort_compare.py --cli "$CP_ROOT/build/cannprof" --corpus "$corpus" \
    --node-path "$ort_dir/node_modules" "$@"
