#!/bin/sh
# FusedAttention benchmark: the fused kernel against the unfused
# MatMul -> Mul -> Softmax -> MatMul sequence it replaces, through the
# runtime with its fast kernels, for N = 256 ... 4096 tokens, H = 4, D = 16
# and 64, fp32 and bf16. Prints a table: median latency with its 10-90%
# spread over interleaved runs, the speedup, and the memory each needs
# beyond its inputs and output (issue 4: the fused kernel never holds the
# N x N scores and must beat the unfused sequence at >= 1024 tokens).
#
#   bench/attention_bench.sh [REPS [THREADS [TOKENS [DEPTHS]]]]
#
# Defaults: 21 reps, 2 threads, every N and D; TOKENS and DEPTHS are
# comma-separated lists that narrow the table.
#
# BUILD names the CMake build folder (default: build); the script builds the
# runtime's static libraries there and compiles bench/attention_bench.c
# against them.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
CC=${CC:-cc}

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null
fi
cmake --build "$build" --target cp_runner -j2 >/dev/null

exe=$build/attention_bench
dnnl=$(sed -n 's/^DNNL_LIB:FILEPATH=//p' "$build/CMakeCache.txt")
dnnl_inc=$(sed -n 's/^DNNL_INCLUDE:PATH=//p' "$build/CMakeCache.txt")
# shellcheck disable=SC2046 # pkg-config output is meant to split
"$CC" -std=c11 -O2 -fopenmp -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
    -Wall -Wextra -Werror -I"$root" -I"$build/gen" -I"$dnnl_inc" \
    "$root/bench/attention_bench.c" \
    "$build/libcp_runner.a" "$build/libcp_atc.a" "$build/libcp_trace.a" \
    "$build/libcp_graph.a" "$build/libcp_proto.a" "$build/libcp_core.a" \
    "$dnnl" $(pkg-config --cflags --libs sqlite3 jansson libxxhash libprotobuf-c) -lm \
    -o "$exe"

sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | sed 's/^/host: /'
echo "cores: $(nproc 2>/dev/null || echo '?')"
"$exe" "$@"
