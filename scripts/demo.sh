#!/usr/bin/env bash
# Install what is missing, build into build/, and run the main job on the
# SD-like example: convert it to a CPU .om, then describe the result.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"

out=$(mktemp -d /tmp/cannprof-demo.XXXXXX)
model=examples/models/sd_unet_tiny.onnx
echo "== cannprof convert $model"
build/cannprof convert --model="$model" --framework=5 --output="$out/sd_unet_tiny"
echo
echo "== cannprof info $out/sd_unet_tiny.om"
build/cannprof info "$out/sd_unet_tiny.om"
echo
echo "== cannprof bench $out/sd_unet_tiny.om (2 threads)"
build/cannprof bench "$out/sd_unet_tiny.om" --threads 2 --warmup 5 --iterations 30
