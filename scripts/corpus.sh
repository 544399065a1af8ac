#!/usr/bin/env bash
# Make the model corpus (docs/corpus.md): torchvision architectures and
# transformer-style models with random, seeded weights, exported to ONNX at
# two opsets, with inputs and PyTorch's reference outputs. Written to
# build/corpus/ (or $CORPUS_DIR), outside git, and remade from scratch on
# every run. Extra arguments name the models to (re)make, keeping the rest.
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
/usr/bin/python3 "$CP_ROOT/tests/corpus/make_corpus.py" "$out" "$@"
end=$(date +%s)
ok=$(awk -F'\t' 'NR > 1 && $7 ~ /^ok/' "$out/manifest.tsv" | wc -l)
all=$(($(wc -l <"$out/manifest.tsv") - 1))
echo "corpus: $ok of $all (model, opset) exports in $out, $((end - start)) s"
