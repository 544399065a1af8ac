#!/usr/bin/env bash
# cannprof vs PyTorch eager (fp32, 2 threads) on every example model, side by
# side in one run. PyTorch (Debian python3-torch, with OpenBLAS) is a
# benchmark-only dependency: installed here, never needed by the tests.
# Extra arguments go to bench/pytorch_compare.py (e.g. --rounds 7).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps python3-torch python3-onnx python3-numpy libopenblas0-pthread
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"
om_dir=$(mktemp -d /tmp/cannprof-bench.XXXXXX)
trap 'rm -rf "$om_dir"' EXIT
for m in examples/models/*.onnx; do
    name=$(basename "$m" .onnx)
    build/cannprof convert --model="$m" --framework=5 --output="$om_dir/$name" >/dev/null
done
# The OpenBLAS variables some machines set slow a current BLAS; PyTorch here
# runs its convolutions and matmuls through oneDNN/OpenBLAS, so unset them
# for this one command, as the machine notes advise for benchmarks.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/pytorch_compare.py \
    --om-dir "$om_dir" "$@"
