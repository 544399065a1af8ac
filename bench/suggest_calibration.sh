#!/usr/bin/env bash
# Do `cannprof suggest`'s expected gains hold when the change is applied
# (issue 14)? Every example converted with every fusion pass off, its top-3
# suggestions applied as printed and measured interleaved, for the rules'
# priors and for `suggest --measure`. Method in bench/suggest_calibration.py.
#
# usage: bench/suggest_calibration.sh [--models a,b] [--layouts auto,nchw]
#                                     [--whatif-rounds R] [--rounds N] [--processes P]
#                                     [--keep DIR] [--priority high] [--no-race]
# The cannprof binary is $CANNPROF, else build/cannprof (built here).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps python3
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
exec python3 "$CP_ROOT/bench/suggest_calibration.py" --cli "${CANNPROF:-$CP_ROOT/build/cannprof}" "$@"
