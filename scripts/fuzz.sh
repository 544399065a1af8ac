#!/usr/bin/env bash
# A fuzzing campaign over the parsers of outside input (docs/fuzzing.md).
#
#   scripts/fuzz.sh [--keep] [SECONDS_PER_TARGET] [TARGET...]
#
# Installs what is missing (as scripts/test.sh does, plus clang), builds
# with clang and -DCP_FUZZ=ON into build-fuzz/, then runs each target (all
# of fuzz/fuzz_*.c by default; TARGET is the name without fuzz_, e.g. onnx)
# for SECONDS_PER_TARGET (default 60) on a working corpus in
# build-fuzz/corpus/<name>/, which is kept between runs and seeded from the
# target's seed list (build-fuzz/fuzz/seeds-<name>.list: files of the
# repository and fuzz/seeds/<name>/), from fuzz/crashes/<name>/, and for
# the ONNX and tensor targets from the installed ONNX test data
# (libonnx-testdata). Nothing is fetched.
#
# --keep merges what the campaign found into tests/fuzz/<name>/, the kept
# corpus: libFuzzer's -merge=1 adds only the inputs that reach code the
# kept ones do not, so the folder stays small; inputs grown from ONNX's own
# test data are left out (it is Debian's package, read at each campaign). CMake lists it among the
# seeds, so the replay test runs it and later campaigns start from it.
#
# Prints a table (target, seconds, executions, execs/s, corpus size,
# crashes) and writes it to build-fuzz/fuzz-table.md. A target stops at its
# first crash, leak, timeout or out-of-memory; that input is copied into
# fuzz/crashes/<name>/, where the replay test (ctest fuzz_replay_<name>)
# keeps running it. Logs are in build-fuzz/logs/<name>.log.
#
# Environment: CP_JOBS (build jobs, default: cores), FUZZ_JOBS (targets run
# at the same time, default 1), FUZZ_MAX_LEN (largest input in bytes,
# default 65536; 262144 for the .om targets), FUZZ_ARGS (more libFuzzer
# flags). Exit 0 when nothing crashed, 1 when something
# did, 2 on bad usage, 3 when the build fails.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"

secs=60
keep=0
if [ $# -gt 0 ] && [ "$1" = --keep ]; then
    keep=1
    shift
fi
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
    secs=$1
    shift
fi
if [ "$secs" -lt 1 ]; then
    echo "fuzz: SECONDS_PER_TARGET must be at least 1" >&2
    exit 2
fi
all=()
for f in "$CP_ROOT"/fuzz/fuzz_*.c; do
    n=$(basename "$f" .c)
    all+=("${n#fuzz_}")
done
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
    if [ ! -f "$CP_ROOT/fuzz/fuzz_$t.c" ]; then
        echo "fuzz: unknown target '$t'; targets: ${all[*]}" >&2
        exit 2
    fi
done

cp_install_deps clang
build="$CP_ROOT/build-fuzz"
mkdir -p "$build"
# a folder configured before the C++ file came has gcc's C++ compiler in
# its cache, which cannot build with libFuzzer's flags: start it again
if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang' "$build/CMakeCache.txt"; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S "$CP_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCP_WERROR=ON \
        -DCP_FUZZ=ON -DCP_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 || {
        cat "$build/configure.log" >&2
        exit 3
    }
fi
build_targets=(fuzz_seeds)
for t in "${targets[@]}"; do build_targets+=("fuzz_$t" "fuzz_replay_$t"); done
cmake --build "$build" -j"${CP_JOBS:-$(nproc)}" --target "${build_targets[@]}" \
    >"$build/build.log" 2>&1 || {
    grep -E 'error|Error' -A3 "$build/build.log" | head -60 >&2
    echo "fuzz: build failed; full log in $build/build.log" >&2
    exit 3
}

testdata=/usr/share/libonnx-testdata/data
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/logs" "$build/rows"

# run_target NAME: one libFuzzer run; its table row goes to rows/NAME.
run_target() {
    local t=$1
    local corpus="$build/corpus/$t" seeds="$build/seeds/$t" art="$build/artifacts/$t"
    rm -rf "$seeds" "$art" "$build/rows/$t"
    mkdir -p "$corpus" "$seeds" "$art"
    # The seed list names files and folders; libFuzzer takes folders, so the
    # files are gathered into one (names made unique by their path).
    local p f rel
    while IFS= read -r p; do
        [ -z "$p" ] && continue
        if [ -d "$p" ]; then
            find "$p" -type f ! -name '.*' -print0
        elif [ -f "$p" ]; then
            printf '%s\0' "$p"
        fi
    done <"$build/fuzz/seeds-$t.list" | while IFS= read -r -d '' f; do
        rel=${f#"$CP_ROOT"/}
        cp "$f" "$seeds/${rel//\//_}"
    done
    local dirs=("$corpus" "$seeds") max_len
    [ -d "$CP_ROOT/fuzz/crashes/$t" ] && dirs+=("$CP_ROOT/fuzz/crashes/$t")
    case "$t" in
    onnx | tensor) [ -d "$testdata" ] && dirs+=("$testdata") ;;
    esac
    case "$t" in
    om | om_ascend) max_len=${FUZZ_MAX_LEN:-262144} ;;
    *) max_len=${FUZZ_MAX_LEN:-65536} ;;
    esac
    local log="$build/logs/$t.log" start rc took execs rate size n a
    echo "fuzz: $t for ${secs}s ..." >&2
    start=$(date +%s)
    set +e
    # shellcheck disable=SC2086
    (cd "$art" && "$build/fuzz_$t" -max_total_time="$secs" -max_len="$max_len" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_ARGS:-} \
        "${dirs[@]}") >"$log" 2>&1
    rc=$?
    set -e
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    if [ -z "$execs" ]; then
        # a crash ends the run before the final stats: the last status line
        execs=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$log" | tail -n 1)
        [ -n "$execs" ] && rate=$((execs / (took > 0 ? took : 1)))
    fi
    # the corpus libFuzzer ended with (seeds that add coverage + what it found)
    size=$(sed -n 's/.* corp: \([0-9][0-9]*\)\/.*/\1/p' "$log" | tail -n 1)
    [ -z "$size" ] && size=$(find "$corpus" -type f | wc -l)
    n=0
    for a in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
        [ -f "$a" ] || continue
        mkdir -p "$CP_ROOT/fuzz/crashes/$t"
        cp "$a" "$CP_ROOT/fuzz/crashes/$t/"
        echo "fuzz: $t: $(basename "$a") -> fuzz/crashes/$t/ (log: $log)" >&2
        n=$((n + 1))
    done
    if [ "$keep" -eq 1 ] && [ "$n" -eq 0 ]; then
        local kept="$CP_ROOT/tests/fuzz/$t" before
        mkdir -p "$kept"
        before=$(find "$kept" -type f | wc -l)
        "$build/fuzz_$t" -merge=1 -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 "$kept" \
            "$corpus" >>"$log" 2>&1 || echo "fuzz: $t: merging into $kept failed; see $log" >&2
        # Inputs grown from ONNX's backend test data (Debian's
        # libonnx-testdata: producer "backend-test", graphs named test_*)
        # are not ours to commit; campaigns read that data from the package.
        # Only the targets that read models; grep finding nothing is fine.
        case "$t" in
        onnx | om | om_ascend | tensor)
            { grep -l -a -e backend-test -e test_ -r "$kept" || true; } | xargs -r rm -f
            ;;
        esac
        echo "fuzz: $t: tests/fuzz/$t/ holds $(find "$kept" -type f | wc -l) inputs ($before before)" >&2
    fi
    if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then
        echo "fuzz: $t exited with $rc without a crashing input; see $log" >&2
        tail -n 20 "$log" >&2
        n="error"
    fi
    echo "| $t | $took | ${execs:-?} | ${rate:-?} | $size | $n |" >"$build/rows/$t"
}

# FUZZ_JOBS targets at a time (default 1): each a single-threaded process.
jobs=${FUZZ_JOBS:-1}
for ((j = 0; j < jobs; j++)); do
    (
        for ((i = j; i < ${#targets[@]}; i += jobs)); do
            run_target "${targets[$i]}"
        done
    ) &
done
wait

table="$build/fuzz-table.md"
crashed=0
{
    echo "| target | seconds | executions | execs/s | corpus | crashes |"
    echo "|---|---:|---:|---:|---:|---:|"
    for t in "${targets[@]}"; do
        if [ -f "$build/rows/$t" ]; then
            cat "$build/rows/$t"
            grep -q '| 0 |$' "$build/rows/$t" || crashed=1
        else
            echo "| $t | ? | ? | ? | ? | not run |"
            crashed=1
        fi
    done
} >"$table"
echo
cat "$table"
exit "$crashed"
