#!/usr/bin/env bash
# Install what is missing, build into build/, and run the whole suite through
# ctest. Extra arguments go to ctest (e.g. -R om).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
