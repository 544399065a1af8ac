#!/usr/bin/env bash
# Install what is missing, build into build/, and run the whole suite through
# ctest. Extra arguments go to ctest (e.g. -R om). The tests that assert on
# measured speed (ctest label `perf`, tests/perf/) are left out: they depend
# on the machine, and bench/perf_tests.sh runs them.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps chromium
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"
cd build
log=$(mktemp /tmp/cannprof-ctest.XXXXXX)
trap 'rm -f "$log"' EXIT
set +e
ctest --output-on-failure -j"$(nproc)" -LE perf "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# The corpus test (docs/corpus.md) runs only where scripts/corpus.sh made
# build/corpus; then say how far it got, and any row that changed.
if grep -q '^corpus summary' Testing/Temporary/LastTest.log 2>/dev/null; then
    echo
    grep -E '^corpus: [0-9]+ of |REGRESSION|FIXED' Testing/Temporary/LastTest.log | head -n 40
    grep -E '^[0-9]+% tests passed' "$log" | tail -n 1
fi
# The ONNX conformance summary is printed by its test; ctest shows a test's
# output only on failure, so repeat it here, then end with ctest's verdict.
if grep -q 'conformance summary' Testing/Temporary/LastTest.log 2>/dev/null; then
    echo
    awk '/^conformance summary/ {p = 1} p && /^$/ {exit} p && n++ < 30' \
        Testing/Temporary/LastTest.log
    grep -E '^[0-9]+% tests passed' "$log" | tail -n 1
fi
exit "$rc"
