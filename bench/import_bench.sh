#!/usr/bin/env bash
# Streaming import with bounded memory: generates synthetic large traces in
# each family (Kineto / torch.profiler JSON, torch_npu trace_view.json, and
# the Kineto JSON gzip-compressed), 2 GiB each by default, and times
# `cannprof import FILE -o OUT.db --json` on each under /usr/bin/time: median
# wall time (min..max over the reps), throughput in MB/s, peak RSS, and whether
# the goals are met (>= 100 MB/s, peak RSS <= 512 MB). Generator and method in
# bench/import_bench.py.
#
# usage: bench/import_bench.sh [--size 2G] [--families "kineto trace_view kineto_gz"]
#                              [--reps 3] [--keep DIR] [--generate-only]
# --keep DIR keeps (and reuses) the generated traces; --generate-only (with
# --keep) only writes them. The cannprof binary is $CANNPROF, else
# build/cannprof (built here, except with --generate-only).
# Exit 1 when a goal is missed, 2 on a usage error or a failed import.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
generate_only=0
for arg in "$@"; do
    [ "$arg" = "--generate-only" ] && generate_only=1
done
if [ -z "${CANNPROF:-}" ] && [ "$generate_only" = 0 ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3 time
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
# Debian's python3 (standard library only), not whatever python3 comes first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$CP_ROOT/bench/import_bench.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
