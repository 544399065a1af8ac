#!/usr/bin/env bash
# Where the time goes, per op: runs `cannprof bench --trace` on a model and
# prints, from the trace store, each op type's kernel time (the sum over its
# nodes of each node's fastest iteration, which is robust on a shared,
# noisy machine) and the slowest nodes.
#
# usage: bench/op_profile.sh MODEL.onnx|MODEL.om [THREADS] [ITERATIONS] [TOP]
# The cannprof binary is $CANNPROF, else build/cannprof.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli=${CANNPROF:-$CP_ROOT/build/cannprof}
model=$1
threads=${2:-2}
iters=${3:-50}
top=${4:-15}
db=$(mktemp /tmp/cannprof-prof.XXXXXX)
rm -f "$db"
trap 'rm -f "$db" "$db"-wal "$db"-shm' EXIT
"$cli" bench "$model" --threads="$threads" --iterations="$iters" --trace="$db" | grep latency
mins="WITH k AS (SELECT kernel_idx AS idx, MIN(dur_ns) AS mn FROM events
                 WHERE layer = 2 AND iteration >= 0 GROUP BY kernel_idx),
          kn AS (SELECT * FROM kernels WHERE run_id = (SELECT MAX(id) FROM runs))"
echo
echo "per op (sum of per-node minimum, us):"
sqlite3 -column -header "$db" "$mins
SELECT kn.op_type AS op, kn.impl AS impl, COUNT(*) AS nodes, ROUND(SUM(k.mn) / 1000.0, 1) AS us
FROM k JOIN kn ON kn.idx = k.idx GROUP BY kn.op_type, kn.impl ORDER BY us DESC;"
sqlite3 "$db" "$mins SELECT 'total: ' || ROUND(SUM(mn) / 1000.0, 1) || ' us' FROM k;"
echo
echo "slowest nodes:"
sqlite3 -column -header "$db" "$mins
SELECT kn.node AS node, kn.op_type AS op, kn.impl AS impl, ROUND(k.mn / 1000.0, 1) AS us,
       json_extract(kn.inputs, '\$[0].shape') AS in0
FROM k JOIN kn ON kn.idx = k.idx ORDER BY k.mn DESC LIMIT $top;"
