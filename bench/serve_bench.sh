#!/usr/bin/env bash
# serve's throughput under load against bench's, with and without dynamic
# batching (bench/serve_bench.py). usage: bench/serve_bench.sh [--model M | --mlp] [--reps N]
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
# --mlp makes its model with Debian's onnx and numpy (bench/make_mlp_model.py)
case " $* " in *" --mlp "*) cp_install_deps python3 python3-onnx python3-numpy ;; esac
if [ -z "${CANNPROF:-}" ]; then
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
py=/usr/bin/python3
[ -x "$py" ] || py=python3
cd "$CP_ROOT"
exec "$py" "$CP_ROOT/bench/serve_bench.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
