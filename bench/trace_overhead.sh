#!/usr/bin/env bash
# The cost of tracing: `cannprof bench` with and without --trace on every
# example model, interleaved in rounds (plain, traced, plain, traced, ...) so
# machine drift hits both alike. Prints the median latency of each, the
# overhead of tracing in percent (median over rounds of the per-round
# overhead) and its range. The bar is 3%.
# Usage: bench/trace_overhead.sh [ROUNDS] [ITERATIONS]
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps sqlite3
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"
rounds=${1:-7}
iters=${2:-30}
work=$(mktemp -d /tmp/cannprof-trace-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
median_of() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo "# cannprof bench --threads 2, $rounds interleaved rounds x $iters iterations (warm-up 5)"
echo
echo "| model | plain median ms | traced median ms | overhead % (median) | overhead % range | events/iteration | within 3% |"
echo "|---|---:|---:|---:|---:|---:|:---:|"
for m in examples/models/*.onnx; do
    name=$(basename "$m" .onnx)
    build/cannprof convert --model="$m" --framework=5 --output="$work/$name" >/dev/null
    : >"$work/plain" ; : >"$work/traced" ; : >"$work/over"
    for _ in $(seq "$rounds"); do
        p=$(build/cannprof bench "$work/$name.om" --threads 2 --warmup 5 --iterations "$iters" --json |
            sed -E 's/.*"median":([0-9.]+).*/\1/')
        rm -f "$work/t.db" "$work/t.db-wal" "$work/t.db-shm"
        t=$(build/cannprof bench "$work/$name.om" --threads 2 --warmup 5 --iterations "$iters" \
            --trace "$work/t.db" --json | sed -E 's/.*"median":([0-9.]+).*/\1/')
        echo "$p" >>"$work/plain"
        echo "$t" >>"$work/traced"
        awk -v p="$p" -v t="$t" 'BEGIN {printf "%.3f\n", (t / p - 1) * 100}' >>"$work/over"
    done
    ev=$(sqlite3 "$work/t.db" "select count(*) / max(1, count(distinct iteration)) from events where layer = 2 and iteration >= 0" 2>/dev/null || echo "?")
    pm=$(median_of <"$work/plain")
    tm=$(median_of <"$work/traced")
    om=$(median_of <"$work/over")
    lo=$(sort -g "$work/over" | head -1)
    hi=$(sort -g "$work/over" | tail -1)
    ok=$(awk -v o="$om" 'BEGIN {print (o <= 3.0) ? "yes" : "NO"}')
    printf '| %s | %.3f | %.3f | %.2f | %s to %s | %s | %s |\n' "$name" "$pm" "$tm" "$om" "$lo" "$hi" "$ev" "$ok"
done
