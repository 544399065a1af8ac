#!/usr/bin/env bash
# Install what is missing, build into build/, and run the main job on the
# SD-like example: tune it for latency under memory and precision
# constraints, then show what was found.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps
cd "$CP_ROOT"
mkdir -p build
cp_build "$CP_ROOT/build"

out=$(mktemp -d /tmp/cannprof-demo.XXXXXX)
model=examples/models/sd_unet_tiny.onnx
# A knowledge base of its own, so the demo starts from nothing and leaves
# the user's alone.
kb="$out/kb.sqlite"
echo "== cannprof tune $model --target latency --constraints \"memory<3GB,precision_loss<1%\""
build/cannprof tune "$model" --target latency --constraints "memory<3GB,precision_loss<1%" \
    --kb "$kb" --out "$out/tune"
echo
echo "== the report: $out/tune/report.md"
sed -n '/^## Steps/,$p' "$out/tune/report.md"
echo
echo "== the same report with its charts (the tuning trajectory, the Pareto front):"
echo "   HTML: $out/tune/report.html (self-contained, opens offline)"
echo "   PDF:  $out/tune/report.pdf ($(pdfinfo "$out/tune/report.pdf" | awk '/^Pages:/ {print $2}') pages)"
echo
# The last accepted step's interleaved measurement: run 1 the best before
# it, run 2 the candidate; its flame graph and the difference, frame by frame.
step=$(awk -F'|' '/\*\*accepted\*\*/ {n = $2} END {gsub(/ /, "", n); print n}' "$out/tune/report.md")
if [ -n "$step" ]; then
    db=$(printf '%s/tune/cand-%02d.db' "$out" "$step")
    echo "== step $step, accepted: where its time goes, and what changed against the best before it"
    build/cannprof view "$db" --flame --run 2 --group op --iteration median -o "$out/tune/step-$step.flame.svg"
    build/cannprof view --diff "$db" "$db" --run 1 --run-b 2 -o "$out/tune/step-$step.diff.svg"
fi
echo
echo "== what the knowledge base learned (cannprof kb card)"
build/cannprof kb card --model "$model" --kb "$kb"
# A tighter budget that whole-model bf16 (0.69% here) breaks: the tuner's
# per-node precision plan keeps the sensitive nodes in fp32 (--keep_dtype).
echo
echo "== cannprof tune $model --target latency --constraints \"precision_loss<0.5%\""
build/cannprof tune "$model" --target latency --constraints "precision_loss<0.5%" \
    --kb "$kb" --out "$out/tune-0.5"
echo
echo "== its per-node precision plan: $out/tune-0.5/report.md"
sed -n '/^## Per-node precision plan/,/^## Pareto/p' "$out/tune-0.5/report.md" | sed '$d'
echo
echo "== cannprof tune $model --target latency --constraints \"precision_loss<1%\" --int8"
build/cannprof tune "$model" --target latency --constraints "precision_loss<1%" --int8 \
    --kb "$kb" --out "$out/tune-int8"
echo
echo "== its int8 plan (calibrated on seeded random inputs here): $out/tune-int8/report.md"
sed -n '/^## int8 plan/,/^## Pareto/p' "$out/tune-int8/report.md" | sed '$d'
