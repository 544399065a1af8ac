#!/bin/sh
# Trace store benchmark: records, stores and exports a million synthetic
# events and prints a table (events/s for each phase). Issue 3 asks that a
# million events "must not take minutes"; this is the evidence.
#
#   bench/trace_store_bench.sh [N_EVENTS [KERNELS_PER_ITERATION [OUT_DIR]]]
#
# BUILD names the CMake build folder (default: build); the script builds the
# trace and core libraries there and compiles the benchmark against them, so
# it needs nothing from the rest of the tree.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
CC=${CC:-cc}

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null
fi
cmake --build "$build" --target cp_trace cp_core -j2 >/dev/null

exe=$build/trace_store_bench
# shellcheck disable=SC2046 # pkg-config output is meant to split
"$CC" -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
    -Wall -Wextra -Werror -I"$root" \
    "$root/bench/trace_store_bench.c" "$build/libcp_trace.a" "$build/libcp_core.a" \
    $(pkg-config --cflags --libs sqlite3 jansson libxxhash) -lm -o "$exe"

cat /proc/cpuinfo 2>/dev/null | sed -n 's/^model name[[:space:]]*: //p' | head -n 1 |
    sed 's/^/host: /'
echo "cores: $(nproc 2>/dev/null || echo '?')"
"$exe" "$@"
