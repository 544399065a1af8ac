#!/usr/bin/env bash
# The suite under AddressSanitizer and UndefinedBehaviorSanitizer: a Debug
# build in build-asan/ with -DCP_SANITIZE=ON, then ctest (the perf label,
# which times things, is left out: instrumentation changes every time).
# Extra arguments go to ctest.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps chromium
cd "$CP_ROOT"
cp_build "$CP_ROOT/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCP_SANITIZE=ON
cd build-asan
ctest --output-on-failure -j"$(nproc)" -LE perf "$@"
