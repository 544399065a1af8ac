#!/usr/bin/env python3
"""What every conversion knob does, measured: latency, throughput, memory and
precision_loss of each example model under each knob setting.

For each model it converts one .om per row and prints a table of:

  - no fusion passes (ALL:off; layout and precision stay on), each pass alone (all others off), all passes;
  - each layout policy (nchw, nhwc, blocked) with all passes;
  - each precision mode (force_fp32, allow_fp32_to_bf16,
    allow_mix_precision_bf16) with all passes;
  - all passes + each layout + allow_mix_precision_bf16 (the bar candidates);
  - throughput at batch 1 and batch 4 of one dynamic-batch .om
    (--dynamic_batch_size 1,2,4);
  - arena and peak activation memory with buffer_optimize l2_optimize and
    off_optimize;

and for every row its precision_loss: `cannprof compare MODEL.onnx ROW.om`
on the model's test_data_set_0 inputs (docs/precision.md). Rows of a pass
that changes nothing on a model are listed without timing (they are the
no-passes model).

Timing: `cannprof bench --json` on T threads (default 2), iterating for D
seconds (default 0.3, so a small model runs a thousand iterations and the
largest a few dozen) after W warm-up iterations, in R interleaved rounds
(default 5): every round times every row once, in an order rotated each
round, so drift of a shared machine hits all rows alike. A row's latency is
the median over rounds of each round's median; the spread is the min..max of
the round medians. Speed-ups are computed per round against the
same round's no-passes time, then the median (and min..max) is taken.

speed-up % = (t_no_passes / t_row - 1) * 100 (a 35% speed-up is 1.35x the
throughput); latency reduction = 1 - t_row / t_no_passes.

The bar: on sd_unet_tiny, all passes + the best layout +
allow_mix_precision_bf16 against no passes in fp32 must be >= 35% faster with
precision_loss < 1%.

Usage: bench/passes_bench.sh [--rounds R] [--duration D] [--warmup W]
                             [--threads T] [--models NAME ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["sd_unet_tiny", "resnet_tiny", "transformer_encoder_op14",
          "transformer_encoder_op17", "nhwc_roundtrip"]
LAYOUTS = ["nchw", "nhwc", "blocked"]
PRECISIONS = ["force_fp32", "allow_fp32_to_bf16", "allow_mix_precision_bf16"]
BAR_MODEL = "sd_unet_tiny"
BAR_SPEEDUP = 35.0
BAR_LOSS = 1.0


def run(cmd, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in ok:
        sys.exit(f"passes_bench: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p


class Row:
    def __init__(self, section, label, flags=(), switches=None, batch=0, dynamic=False):
        self.section = section
        self.label = label
        self.flags = list(flags)
        self.switches = switches
        self.batch = batch
        self.dynamic = dynamic
        self.om = None
        self.changed = None
        self.nodes = None
        self.loss = None
        self.rounds = []   # median latency (ms) per round
        self.items_s = []  # throughput per round
        self.memory = None
        self.timed = True


def convert(cli, model, row, workdir, idx, inputs):
    out = os.path.join(workdir, f"{model}_{idx}")
    cmd = [cli, "convert", f"--model={os.path.join(ROOT, 'examples', 'models', model)}.onnx",
           "--framework=5", f"--output={out}", "--json"] + row.flags
    if row.switches is not None:
        sw = os.path.join(workdir, f"{model}_{idx}.switches")
        with open(sw, "w") as f:
            f.write(row.switches)
        cmd.append(f"--fusion_switch_file={sw}")
    if row.dynamic:
        shapes = ";".join(f"{i['name']}:" + ",".join(["-1"] + [str(v) for v in i["shape"][1:]])
                          for i in inputs)
        cmd += [f"--input_shape={shapes}", "--dynamic_batch_size=1,2,4"]
    res = json.loads(run(cmd).stdout)
    row.om = out + ".om"
    row.changed = res.get("passes_changed")
    row.nodes = res.get("nodes_out")


def precision_loss(cli, model, row, input_flags):
    p = run([cli, "compare", os.path.join(ROOT, "examples", "models", model + ".onnx"), row.om,
             "--threads", "2", "--json"] + input_flags, ok=(0, 1))
    v = json.loads(p.stdout)["precision_loss_pct"]
    row.loss = float("inf") if v is None else v


def bench(cli, row, args):
    cmd = [cli, "bench", row.om, "--threads", str(args.threads), "--warmup", str(args.warmup),
           "--duration", f"{args.duration}s", "--json"]
    if row.batch:
        cmd += ["--batch", str(row.batch)]
    res = json.loads(run(cmd).stdout)
    row.rounds.append(res["latency_ms"]["median"])
    row.items_s.append(res["throughput_items_per_s"])
    row.memory = res["memory"]


def fmt_bytes(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def fmt_loss(v):
    if v is None:
        return "-"
    if v == float("inf"):
        return "inf"
    return f"{v:.2g}" if v < 0.01 else f"{v:.3f}"


def speedups(row, base):
    return [(b / r - 1.0) * 100.0 for r, b in zip(row.rounds, base.rounds)]


def model_rows(cli, model):
    passes = json.loads(run([cli, "convert", "--list-passes", "--json"]).stdout)["passes"]
    rows = [Row("passes", "no fusion passes (ALL:off)", switches="ALL:off\n")]
    for p in passes:
        if p["family"] in ("batch", "precision"):
            continue  # no-ops without dynamic batch / in fp32
        rows.append(Row("passes", f"{p['name']} alone", switches=f"ALL:off\n{p['name']}:on\n"))
    rows.append(Row("passes", "all passes"))
    for lay in LAYOUTS:
        rows.append(Row("layout", f"all passes, layout {lay}", [f"--layout_policy={lay}"]))
    for prec in PRECISIONS:
        rows.append(Row("precision", f"all passes, {prec}", [f"--precision_mode={prec}"]))
    for lay in LAYOUTS:
        rows.append(Row("bar", f"all passes, {lay}, allow_mix_precision_bf16",
                        [f"--layout_policy={lay}", "--precision_mode=allow_mix_precision_bf16"]))
    rows.append(Row("batch", "dynamic batch .om, batch 1", batch=1, dynamic=True))
    rows.append(Row("batch", "dynamic batch .om, batch 4", batch=4, dynamic=True))
    rows.append(Row("memory", "all passes, l2_optimize", ["--buffer_optimize=l2_optimize"]))
    rows.append(Row("memory", "all passes, off_optimize", ["--buffer_optimize=off_optimize"]))
    return rows


def run_model(cli, model, args, workdir):
    info = json.loads(run([cli, "info", os.path.join(ROOT, "examples", "models", model + ".onnx"),
                           "--json"]).stdout)
    inputs = info["graph"]["inputs"]
    data = os.path.join(ROOT, "examples", "models", model, "test_data_set_0")
    input_flags = []
    for i, inp in enumerate(inputs):
        input_flags += ["--input", f"{inp['name']}={os.path.join(data, f'input_{i}.pb')}"]
    rows = model_rows(cli, model)
    for idx, row in enumerate(rows):
        convert(cli, model, row, workdir, idx, inputs)
        precision_loss(cli, model, row, input_flags)
    base = rows[0]
    # A pass alone that changes nothing gives the no-passes model: not timed.
    for row in rows:
        if row.section == "passes" and row.label.endswith(" alone") and row.changed == 0:
            row.timed = False
    timed = [r for r in rows if r.timed]
    for r in range(args.rounds):
        k = r % len(timed)
        for row in timed[k:] + timed[:k]:
            bench(cli, row, args)
        print(f"  {model}: round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return rows, base


def print_table(model, rows, base, args):
    print(f"\n## {model}\n")
    print(f"{'row':<58} {'nodes':>5} {'latency ms':>10} {'spread ms':>15} {'speed-up %':>18} "
          f"{'precision_loss %':>16}  notes")
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            print(f"-- {section}")
        if not row.timed:
            print(f"{row.label:<58} {row.nodes:>5} {'(no change: = no passes)':>45} "
                  f"{fmt_loss(row.loss):>16}")
            continue
        med = statistics.median(row.rounds)
        spread = f"{min(row.rounds):.3f}..{max(row.rounds):.3f}"
        notes = ""
        if row.batch:
            notes = f"{statistics.median(row.items_s):.1f} items/s (batch {row.batch})"
        if row.section == "memory":
            m = row.memory
            notes = f"arena {fmt_bytes(m['arena_bytes'])}, peak {fmt_bytes(m['peak_bytes'])}"
        if row is base or row.batch:
            su = "-"
        else:
            s = speedups(row, base)
            su = f"{statistics.median(s):+.1f} ({min(s):+.0f}..{max(s):+.0f})"
        print(f"{row.label:<58} {row.nodes:>5} {med:>10.3f} {spread:>15} {su:>18} "
              f"{fmt_loss(row.loss):>16}  {notes}")


def print_bar(rows, base):
    cands = [r for r in rows if r.section == "bar"]
    best = min(cands, key=lambda r: statistics.median(r.rounds))
    s = speedups(best, base)
    su = statistics.median(s)
    red = (1.0 - statistics.median(best.rounds) / statistics.median(base.rounds)) * 100.0
    ok = su >= BAR_SPEEDUP and best.loss is not None and best.loss < BAR_LOSS
    print(f"\nBAR ({BAR_MODEL}): {best.label} vs no passes fp32: "
          f"{statistics.median(base.rounds):.3f} ms -> {statistics.median(best.rounds):.3f} ms, "
          f"speed-up {su:+.1f}% (per-round {min(s):+.1f}..{max(s):+.1f}), "
          f"latency -{red:.1f}%, precision_loss {fmt_loss(best.loss)}% "
          f"=> {'MET' if ok else 'NOT MET'} (needs >= {BAR_SPEEDUP:.0f}% and < {BAR_LOSS:g}%)")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "cannprof"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--duration", type=float, default=0.3)
    ap.add_argument("--models", nargs="*", default=MODELS)
    args = ap.parse_args()
    if args.rounds < 1 or not args.duration > 0:
        sys.exit("passes_bench: --rounds must be at least 1 and --duration positive")
    cpu = run([args.cli, "--version"]).stdout.strip()
    print(f"# {cpu}; {args.threads} threads; {args.rounds} interleaved rounds x "
          f"{args.duration:g} s of iterations (warm-up {args.warmup}); latency = median of "
          f"round medians; speed-up vs no passes, per round, median (min..max); "
          f"precision_loss vs the unconverted .onnx on test_data_set_0")
    bar_ok = None
    with tempfile.TemporaryDirectory(prefix="cannprof-passes-") as workdir:
        for model in args.models:
            rows, base = run_model(args.cli, model, args, workdir)
            print_table(model, rows, base, args)
            if model == BAR_MODEL:
                bar_ok = print_bar(rows, base)
            sys.stdout.flush()
    if bar_ok is False:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
