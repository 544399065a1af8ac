#!/usr/bin/env bash
# The tests that assert on measured speed: ctest label `perf`, the files of
# tests/perf/. Which candidate the tuner accepts, which bottleneck analyze
# puts on top, whether validate finds the unfused model slower and whether
# suggest has a LayerNorm change to paste all follow from what this machine
# measures (its CPU, and how busy it is while they run), so scripts/test.sh
# leaves them out (ctest -LE perf); their logic is pinned on replayed
# measurements in the normal suite (tests/tuner/test_tune_replayed.c,
# tests/rules/test_rules_planted.c, tests/cli/test_cli_validate.c,
# tests/cli/test_cli_suggest.c).
#
# This installs what is missing and builds as the other bench scripts do,
# runs `ctest -L perf` (one test at a time: they are RUN_SERIAL) and prints
# a table: every test of every perf file, whether it passed, failed or was
# skipped, how long it took, and for a failure its first failed assertion.
#
# usage: bench/perf_tests.sh [CTEST ARGS...]     e.g. bench/perf_tests.sh -R tune
# BUILD names the build folder (default: build).
# Exit: ctest's (0 when every perf test passed).
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps
build=${BUILD:-$CP_ROOT/build}
case $build in /*) ;; *) build=$CP_ROOT/$build ;; esac
cp_build "$build"
cd "$build"

echo "# perf tests: ctest -L perf $*"
sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | sed 's/^/# host: /'
echo "# cores: $(nproc 2>/dev/null || echo '?'); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
log=$(mktemp /tmp/cannprof-perf.XXXXXX)
trap 'rm -f "$log"' EXIT
t0=$(date +%s)
set +e
# Criterion at verbosity 1 names every test it runs and how it ended, and
# ctest keeps each test's output in LastTest.log.
CRITERION_VERBOSITY_LEVEL=1 ctest -L perf "$@" >"$log" 2>&1
rc=$?
set -e
if ! grep -q 'Testing:' Testing/Temporary/LastTest.log 2>/dev/null; then
    cat "$log"
    echo "perf_tests: ctest ran no perf test" >&2
    [ "$rc" -ne 0 ] || rc=1
    exit "$rc"
fi
echo
echo "| file | test | result | seconds | first failed assertion or reason |"
echo "|---|---|---|---:|---|"
awk '
function flush_reason(r) { gsub(/\|/, "/", r); return length(r) > 120 ? substr(r, 1, 117) "..." : r }
/^[0-9]+\/[0-9]+ Testing: / { file = $3; run = ""; why = ""; next }
/^\[RUN \] / { run = $2; why = ""; next }
/Assertion Failed$/ { want = 2; next }
want > 0 && /^\[----\]/ {
    line = $0; sub(/^\[----\][ ]*/, "", line)
    if (line != "") { if (why == "") why = line; want = 0 } else if (--want == 0) want = 0
    next
}
/^\[(PASS|FAIL|SKIP)\] / {
    res = substr($1, 2, 4)
    name = $2; sub(/:$/, "", name)
    rest = $0; sub(/^\[[A-Z]+\] [^ ]+[ ]?/, "", rest)
    secs = ""
    if (match(rest, /\(([0-9.]+)s\)$/)) secs = substr(rest, RSTART + 1, RLENGTH - 3)
    note = why
    if (res == "SKIP") note = rest
    else if (res == "FAIL" && rest ~ /CRASH|Timed out/) note = rest (why != "" ? "; " why : "")
    printf "| %s | %s | %s | %s | %s |\n", file, name, (res == "PASS" ? "passed" : res == "FAIL" ? "FAILED" : "skipped"), secs, flush_reason(note)
    n[res]++
    why = ""
    next
}
/^\[----\] .*: Skipped/ { next }
END { printf "\n%d passed, %d failed, %d skipped\n", n["PASS"], n["FAIL"], n["SKIP"] }
' Testing/Temporary/LastTest.log
echo
grep -E '^[0-9]+% tests passed|^The following tests|^[[:space:]]+[0-9]+ - ' "$log" || true
echo "total: $(($(date +%s) - t0)) s"
exit "$rc"
