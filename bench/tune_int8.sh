#!/usr/bin/env bash
# The int8 figure of `cannprof tune` on the SD-like example (issue 14): under
# precision_loss<1%, the tuned model with --int8 against the default conversion
# and against the tuner without int8 (bf16 alone), each measured interleaved in
# one process, repeated, with the precision_loss of every best checked apart
# from the tuner. Method in bench/tune_int8.py.
#
# usage: bench/tune_int8.sh [--reps K] [--iterations N] [--keep DIR]
# The cannprof binary is $CANNPROF, else build/cannprof (built here when missing).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ] && [ ! -x "$CP_ROOT/build/cannprof" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
# Debian's python3 (standard library only), not whatever python3 comes first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$CP_ROOT/bench/tune_int8.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
