#!/usr/bin/env bash
# Does `cannprof view --diff` call noise a change? And does it read a real
# change as the interleaved measurement does?
#
# For each example model (converted once, the same .om on both sides):
#   - A/A, interleaved: `bench M.om --vs M.om --trace` (run 1 and run 2 of
#     one store, rounds alternating): every frame marked is a false mark;
#   - A/A, separate: two `bench --trace` runs one after the other, the
#     setting where machine drift between runs is real and may be marked;
#   - A/B: the model against its bf16 conversion, interleaved (a real change
#     on a machine with bf16 units): the root's change read by the diff
#     (medians per iteration) beside the change `bench --vs` reports.
# Repeated PAIRS times; prints the share of frames marked per setting
# (median and range over the pairs) and the A/B changes side by side.
# Usage: bench/view_diff.sh [PAIRS] [ROUNDS]
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"
pairs=${1:-5}
rounds=${2:-100}
work=$(mktemp -d /tmp/cannprof-view-diff.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp=build/cannprof
stats() { sort -g | awk '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2;
    printf "%.1f | %.1f..%.1f", m, a[1], a[NR]}'; }
# "marked share" of a --json line: (slower + faster) / frames, percent
marked() { sed -E 's/.*"frames":([0-9]+).*"slower":([0-9]+),"faster":([0-9]+).*/\1 \2 \3/' |
    awk '{printf "%.2f\n", $1 ? 100 * ($2 + $3) / $1 : 0}'; }
root_change() { # the root frame's change, from the SVG's first frame
    grep -o 'id="f0"[^>]*' "$1" | grep -o 'data-change="[^"]*"' | sed -E 's/.*="([^"%]*)%?"/\1/' || true
}
echo "# cannprof view --diff: $pairs pairs per setting, $rounds rounds or iterations each"
echo
echo "| model | A/A interleaved: % frames marked (median, range) | A/A separate runs | A/B bf16: diff's root change % | bench --vs change % |"
echo "|---|---:|---:|---:|---:|"
for name in resnet_tiny launch_bound_tiny sd_unet_tiny; do
    m=examples/models/$name.onnx
    $cp convert --model="$m" --framework=5 --output="$work/$name" >/dev/null
    $cp convert --model="$m" --framework=5 --precision_mode=allow_mix_precision_bf16 \
        --output="$work/$name.bf16" >/dev/null
    : >"$work/aa_i"
    : >"$work/aa_s"
    : >"$work/ab_d"
    : >"$work/ab_v"
    for p in $(seq "$pairs"); do
        rm -f "$work"/*.db*
        $cp bench "$work/$name.om" --vs "$work/$name.om" -n "$rounds" --trace "$work/i.db" >/dev/null
        $cp view --diff "$work/i.db" "$work/i.db" --run 1 --run-b 2 -o "$work/i.svg" --json |
            marked >>"$work/aa_i"
        $cp bench "$work/$name.om" -n "$rounds" --trace "$work/a.db" >/dev/null
        $cp bench "$work/$name.om" -n "$rounds" --trace "$work/b.db" >/dev/null
        $cp view --diff "$work/a.db" "$work/b.db" -o "$work/s.svg" --json | marked >>"$work/aa_s"
        v=$($cp bench "$work/$name.om" --vs "$work/$name.bf16.om" -n "$rounds" \
            --trace "$work/ab.db" --json | sed -E 's/.*"delta_pct":(-?[0-9.e+-]+).*/\1/')
        $cp view --diff "$work/ab.db" "$work/ab.db" --run 1 --run-b 2 -o "$work/ab.svg" >/dev/null
        root_change "$work/ab.svg" >>"$work/ab_d"
        echo "$v" >>"$work/ab_v"
        echo "  $name pair $p done" >&2
    done
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$(stats <"$work/aa_i")" "$(stats <"$work/aa_s")" \
        "$(paste -sd' ' "$work/ab_d")" "$(paste -sd' ' "$work/ab_v")"
done
echo
echo "A/A interleaved should mark nothing (Holm keeps the family-wise error at 5%"
echo "per diff); separate runs may mark drift that is real between them. An empty"
echo "A/B cell: the diff marked no change at the root (within noise)."
