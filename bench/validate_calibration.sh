#!/usr/bin/env bash
# Calibration evidence for the verdicts of `bench --vs` and `validate`
# (docs/validation.md): how often they cry wolf, and how often they catch a
# real slowdown, with default settings (mann-whitney, alpha 0.05, threshold
# 2%, 10 warm-up iterations; `bench --vs` measures 100 rounds, a single
# `bench` measures until 100 iterations ran undisturbed by neighbours, as
# its interference probe judges them, and `validate` compares those).
#
#   A/A    the same .om against itself, TRIALS times: every "improved" or
#          "regressed" is a false positive. The bar: false-positive rate
#          <= 8% at alpha = 0.05.
#   power  the .om against SLOW, a conversion of the same model that is about
#          5% slower, TRIALS times: the share of trials that say "regressed".
#          The bar: >= 90%.
#
# Both are measured along two paths:
#   tuner  `cannprof bench A.om --vs B.om --json`: A and B interleaved in one
#          process (the way the tuner accepts a candidate);
#   CI     `cannprof bench A.om --trace X.db`, then `bench B.om --trace Y.db`
#          (two processes, one after the other), then
#          `cannprof validate --before X.db --after Y.db --metrics latency`
#          (exit 1 = regression).
# SLOW's true slowdown is measured once by a long interleaved run.
#
# The model is examples/models/transformer_encoder_op14.onnx (about 0.4 ms
# per run, so a trial takes a fraction of a second); SLOW is its conversion
# with LayerNormFusionPass switched off (a fusion switch file) and
# --buffer_optimize=off_optimize.
#
# usage: [TRIALS=N] [THREADS=T] [TRUE_ROUNDS=R] bench/validate_calibration.sh
#   TRIALS       trials per figure (default 100)
#   THREADS      runtime threads of every bench (default 1: on a small shared
#                machine a second thread mostly measures the neighbours)
#   TRUE_ROUNDS  rounds of the run that measures SLOW's true slowdown
#                (default 3000)
#   HOGS         background load while measuring (default 0): HOGS processes,
#                alternately copying 64 MiB blocks through memory (dd) and
#                spinning in a shell loop, the way other jobs on a shared CI
#                machine compete for it
# The cannprof binary is $CANNPROF, else build/cannprof (built here).
# Exit 1 when a bar is not met.
set -euo pipefail
shopt -s inherit_errexit
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CANNPROF:-}" ]; then
    # shellcheck source=scripts/deps.sh
    . "$CP_ROOT/scripts/deps.sh"
    cp_install_deps
    mkdir -p "$CP_ROOT/build"
    cp_build "$CP_ROOT/build"
fi
cli=${CANNPROF:-$CP_ROOT/build/cannprof}
trials=${TRIALS:-100}
threads=${THREADS:-1}
true_rounds=${TRUE_ROUNDS:-3000}
hogs=${HOGS:-0}
case "$trials$threads$true_rounds$hogs" in
*[!0-9]*) echo "validate_calibration: TRIALS, THREADS, TRUE_ROUNDS and HOGS are whole numbers" >&2; exit 2 ;;
esac
if [ "$trials" -lt 1 ] || [ "$threads" -lt 1 ] || [ "$true_rounds" -lt 2 ]; then
    echo "validate_calibration: TRIALS and THREADS >= 1, TRUE_ROUNDS >= 2" >&2
    exit 2
fi
model=transformer_encoder_op14
work=$(mktemp -d /tmp/cannprof-calibration.XXXXXX)
hog_pids=()
cleanup() {
    if [ "${#hog_pids[@]}" -gt 0 ]; then kill "${hog_pids[@]}" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
for i in $(seq "$hogs"); do
    if [ $((i % 2)) -eq 1 ]; then
        (while :; do dd if=/dev/zero of=/dev/null bs=64M count=64 status=none; done) &
    else
        (while :; do :; done) &
    fi
    hog_pids+=("$!")
done

# ---- the two models ---------------------------------------------------------
echo "LayerNormFusionPass:off" >"$work/slow.cfg"
"$cli" convert --model="$CP_ROOT/examples/models/$model.onnx" --framework=5 \
    --output="$work/a" >/dev/null
"$cli" convert --model="$CP_ROOT/examples/models/$model.onnx" --framework=5 \
    --output="$work/slow" --fusion_switch_file="$work/slow.cfg" \
    --buffer_optimize=off_optimize >/dev/null
A=$work/a.om
SLOW=$work/slow.om

# "k n" -> "lo hi" in percent: the 95% Wilson score interval of k/n.
wilson() {
    awk -v k="$1" -v n="$2" 'BEGIN {
        z = 1.959963984540054; p = k / n; z2 = z * z
        c = (p + z2 / (2 * n)) / (1 + z2 / n)
        h = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        lo = c - h; hi = c + h; if (lo < 0) lo = 0; if (hi > 1) hi = 1
        printf "%.1f%% to %.1f%%", 100 * lo, 100 * hi }'
}
pct() { awk -v k="$1" -v n="$2" 'BEGIN { printf "%.1f%%", 100 * k / n }'; }

# "VERDICT DELTA_PCT" of a --json output (its last verdict, its latency delta).
verdict_delta() { sed -E 's/.*"delta_pct":([-0-9.e+]+).*"verdict":"([a-z]+)".*/\2 \1/'; }

# One trial of the tuner path: prints "VERDICT DELTA_PCT" of B against A.
tuner_trial() {
    "$cli" bench "$1" --vs "$2" --threads "$threads" --json | verdict_delta
}

# One trial of the CI path: two separate bench runs, then validate. Prints
# "VERDICT DELTA_PCT" of latency; checks that validate's exit code agrees.
ci_trial() {
    rm -f "$work"/x.db* "$work"/y.db*
    "$cli" bench "$1" --threads "$threads" --trace "$work/x.db" >/dev/null
    "$cli" bench "$2" --threads "$threads" --trace "$work/y.db" >/dev/null
    local out rc=0
    out=$("$cli" validate --before "$work/x.db" --after "$work/y.db" --metrics latency \
        --json) || rc=$?
    local v d
    read -r v d <<<"$(verdict_delta <<<"$out")"
    if { [ "$v" = regressed ] && [ "$rc" -ne 1 ]; } || { [ "$v" != regressed ] && [ "$rc" -ne 0 ]; }; then
        echo "validate_calibration: validate said '$v' with exit code $rc" >&2
        exit 3
    fi
    echo "$v $d"
}

median_of() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# trial PATH A B: one trial of the tuner or the CI path.
trial() {
    case "$1" in
    tuner) tuner_trial "$2" "$3" ;;
    ci) ci_trial "$2" "$3" ;;
    esac
}

# run_trials PATH B -> "improved regressed unchanged inconclusive
# median|delta| median-delta" over TRIALS trials of A against B
run_trials() {
    local path=$1 b=$2 imp=0 reg=0 unc=0 inc=0 v d
    : >"$work/deltas"
    for _ in $(seq "$trials"); do
        read -r v d <<<"$(trial "$path" "$A" "$b")"
        echo "$d" >>"$work/deltas"
        case "$v" in
        improved) imp=$((imp + 1)) ;;
        regressed) reg=$((reg + 1)) ;;
        unchanged) unc=$((unc + 1)) ;;
        inconclusive) inc=$((inc + 1)) ;;
        *) echo "validate_calibration: unexpected verdict '$v'" >&2; exit 3 ;;
        esac
    done
    echo "$imp $reg $unc $inc $(tr -d - <"$work/deltas" | median_of) $(median_of <"$work/deltas")"
}

# ---- SLOW's true slowdown -----------------------------------------------------
t0=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
truth=$("$cli" bench "$A" --vs "$SLOW" --threads "$threads" --iterations "$true_rounds" --json)
true_delta=$(sed -E 's/.*"delta_pct":([-0-9.e+]+).*/\1/' <<<"$truth")
true_lo=$(sed -E 's/.*"ci_pct":\[([-0-9.e+]+),.*/\1/' <<<"$truth")
true_hi=$(sed -E 's/.*"ci_pct":\[[-0-9.e+]+,([-0-9.e+]+)\].*/\1/' <<<"$truth")

# ---- the trials ---------------------------------------------------------------
fail=0
rows=()
for path in tuner ci; do
    ts=$(date +%s)
    aa=$(run_trials "$path" "$A")
    pw=$(run_trials "$path" "$SLOW")
    read -r aa_imp aa_reg aa_unc aa_inc aa_abs _ <<<"$aa"
    read -r p_imp p_reg p_unc p_inc _ p_med <<<"$pw"
    secs=$(($(date +%s) - ts))
    fp=$((aa_imp + aa_reg))
    fpr_ok=$(awk -v k="$fp" -v n="$trials" 'BEGIN { print (k / n <= 0.08) ? "yes" : "NO" }')
    pow_ok=$(awk -v k="$p_reg" -v n="$trials" 'BEGIN { print (k / n >= 0.90) ? "yes" : "NO" }')
    [ "$fpr_ok" = yes ] && [ "$pow_ok" = yes ] || fail=1
    if [ "$path" = tuner ]; then
        label="tuner: bench A --vs B"
    else
        label="CI: bench --trace x2, validate"
    fi
    rows+=("| $label | $trials | $aa_imp / $aa_reg / $aa_unc / $aa_inc | $(printf '%.2f' "$aa_abs") | $(pct "$fp" "$trials") | $(wilson "$fp" "$trials") | $fpr_ok | $p_reg / $p_unc / $p_inc / $p_imp | $(printf '%+.2f' "$p_med") | $(pct "$p_reg" "$trials") | $(wilson "$p_reg" "$trials") | $pow_ok | $secs |")
done

echo "# Verdict calibration: $model, $threads thread(s), default settings"
echo "# (mann-whitney, alpha 0.05, threshold 2%, 10 warm-up; --vs: 100 rounds;"
echo "#  single runs: until 100 undisturbed iterations, validate compares those)"
echo "# load average at the start: $load0; background hogs: $hogs"
echo
printf 'SLOW = LayerNormFusionPass:off + --buffer_optimize=off_optimize; true slowdown\n'
printf '(median, %s interleaved rounds): %+.2f%% (95%% CI %+.2f%% to %+.2f%%)\n\n' \
    "$true_rounds" "$true_delta" "$true_lo" "$true_hi"
echo "| path | trials | A/A improved / regressed / unchanged / inconclusive | A/A median abs. delta % | false-positive rate | 95% Wilson CI | FPR <= 8% | A/SLOW regressed / unchanged / inconclusive / improved | A/SLOW median delta % | power | 95% Wilson CI | power >= 90% | seconds |"
echo "|---|---:|---|---:|---:|---|:---:|---|---:|---:|---|:---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "total: $(($(date +%s) - t0)) s"
exit "$fail"
