#!/usr/bin/env python3
"""cannprof versus ONNX Runtime on every corpus model, interleaved in one run.

Run through bench/ort_compare.sh, which installs npm's onnxruntime-node,
builds cannprof and makes the corpus if it is missing.

Per (model, opset) of the corpus manifest:
  - cannprof's default conversion (fp32) and one conversion per low-precision
    mode (--lowp-modes; bf16 today) are made with `cannprof convert`;
  - ONNX Runtime (CPU provider, every graph optimisation, the same thread
    count) loads the same .onnx in one long-lived node process
    (bench/ort_runner.js) and is checked against the PyTorch reference;
  - then rounds interleave ORT, cannprof fp32 and each low-precision .om,
    the order reversed every other round, all on the manifest's inputs.
    cannprof's side is `cannprof bench --no-probe --json` (the median of its
    iterations); ORT's is the median of as many iterations in its process.
The table gives the median over rounds, the spread (min-max) of the per-round
ratios cannprof/ORT, the best low-precision mode (lowest median) against the
same ORT rounds, then the worst ratio and the geometric mean. Models that do
not convert, or that ORT refuses, are listed with the reason.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "corpus"))
from corpus_io import Ort  # noqa: E402
from run_corpus import pairs, read_tsv, rel_l2, short_error  # noqa: E402


def convert(cli, model, out, mode, input_shape=None):
    cmd = [cli, "convert", "--model=" + model, "--framework=5", "--output=" + out]
    if input_shape:  # a model with dynamic inputs, as ATC takes it
        cmd.append("--input_shape=" + input_shape)
    if mode:
        cmd.append("--precision_mode=" + mode)
    p = subprocess.run(cmd, capture_output=True, text=True)
    return None if p.returncode == 0 else short_error(p.stderr + p.stdout)


def cp_round(cli, om, inputs, threads, warmup, iters):
    cmd = [cli, "bench", om, "--threads", str(threads), "--warmup", str(warmup),
           "--iterations", str(iters), "--no-probe", "--json"]
    for n, f in inputs:
        cmd += ["--input", f"{n}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(short_error(p.stderr + p.stdout))
    return json.loads(p.stdout)["latency_ms"]["median"]


def cp_accuracy(cli, om, inputs, outputs, threads, work):
    d = tempfile.mkdtemp(dir=work)
    cmd = [cli, "run", om, "--threads", str(threads), "--output-dir", d, "--allow-nonfinite"]
    for n, f in inputs:
        cmd += ["--input", f"{n}={f}"]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        return None
    worst = 0.0
    for n, f in outputs:
        got = os.path.join(d, n + ".npy")
        if not os.path.exists(got):
            return None
        a, b = np.load(f), np.load(got)
        worst = max(worst, rel_l2(a, b) if a.shape == b.shape else float("inf"))
    return worst


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "cannprof"))
    ap.add_argument("--corpus", default=os.path.join(ROOT, "build", "corpus"))
    ap.add_argument("--node", default="node")
    ap.add_argument("--node-path", required=True, help="node_modules holding onnxruntime-node")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--min-round-ms", type=float, default=150.0,
                    help="each side of a round measures at least this long: a model of 0.2 ms "
                         "gets more iterations than --iterations, so that its median is not "
                         "the noise of a few milliseconds")
    ap.add_argument("--lowp-modes", default="allow_mix_precision_bf16,allow_fp32_to_bf16")
    ap.add_argument("--models", nargs="*", default=None)
    args = ap.parse_args()

    modes = [m for m in args.lowp_modes.split(",") if m]
    rows = read_tsv(os.path.join(args.corpus, "manifest.tsv"))
    if args.models:
        rows = [r for r in rows if r["name"] in args.models]
    ort = Ort(args.node, os.path.join(HERE, "ort_runner.js"), args.node_path)
    ver = ort.call(cmd="version").get("version", "?")
    print(f"# onnxruntime-node {ver} (CPU, all graph optimisations) vs cannprof, "
          f"{args.threads} threads, {args.rounds} interleaved rounds x at least "
          f"{args.iterations} iterations and {args.min_round_ms:g} ms per side (warm-up "
          f"{args.warmup}, or a tenth of the iterations); latency = median per round, then median of "
          f"rounds; ratio = cannprof / ORT (below 1: cannprof faster)", flush=True)
    results, refused, low_refused = [], [], {}
    with tempfile.TemporaryDirectory(prefix="cannprof-ort.") as work:
        for row in rows:
            label = f"{row['name']} op{row['opset']}"
            if not row["status"].startswith("ok"):
                refused.append((label, "export failed", row["status"][:120]))
                continue
            model = os.path.join(args.corpus, row["file"])
            inputs = [(n, os.path.join(args.corpus, f)) for n, f in pairs(row["inputs"])]
            outputs = [(n, os.path.join(args.corpus, f)) for n, f in pairs(row["outputs"])]
            base = os.path.join(work, os.path.splitext(row["file"])[0])
            shape = row.get("input_shape")
            why = convert(args.cli, model, base + "_fp32", None, shape)
            if why:
                refused.append((label, "cannprof does not convert", why))
                continue
            oms = {"fp32": base + "_fp32.om"}
            for m in modes:
                err = convert(args.cli, model, base + "_" + m, m, shape)
                if err:
                    low_refused.setdefault(m, {}).setdefault(err, []).append(label)
                else:
                    oms[m] = base + "_" + m + ".om"
            got = ort.call(cmd="load", model=model, threads=args.threads,
                           inputs=dict(inputs), outputs=dict(outputs))
            if not got["ok"]:
                refused.append((label, "ORT refuses", got["error"][:160]))
                continue
            ort_rel = max((v for v in got["rel_l2"].values() if v is not None), default=None)
            times = {k: [] for k in ["ort", *oms]}
            order = ["ort", *oms]
            try:
                # iterations per round from ORT's speed (the same count for
                # every side): sub-millisecond models get enough of them
                t = ort.call(cmd="time", warmup=args.warmup, iterations=args.iterations)
                if not t["ok"]:
                    raise RuntimeError("ORT: " + t["error"])
                iters = max(args.iterations,
                            math.ceil(args.min_round_ms / max(t["median_ms"], 1e-3)))
                warm = max(args.warmup, iters // 10)
                for r in range(args.rounds):
                    for k in (order if r % 2 == 0 else order[::-1]):
                        if k == "ort":
                            t = ort.call(cmd="time", warmup=warm, iterations=iters)
                            if not t["ok"]:
                                raise RuntimeError("ORT: " + t["error"])
                            times["ort"].append(t["median_ms"])
                        else:
                            times[k].append(cp_round(args.cli, oms[k], inputs, args.threads,
                                                     warm, iters))
            except RuntimeError as e:
                refused.append((label, "a timed run failed", str(e)[:160]))
                continue
            ratios = {k: [c / o for c, o in zip(times[k], times["ort"])] for k in oms}
            med = {k: statistics.median(v) for k, v in times.items()}
            low = [k for k in oms if k != "fp32"]
            best = min(low, key=lambda k: med[k]) if low else None
            best_rel = (cp_accuracy(args.cli, oms[best], inputs, outputs, args.threads, work)
                        if best else None)
            results.append(dict(label=label, ort=med["ort"], fp32=med["fp32"],
                                r32=statistics.median(ratios["fp32"]),
                                r32_lo=min(ratios["fp32"]), r32_hi=max(ratios["fp32"]),
                                best=best, low=med.get(best), ort_rel=ort_rel,
                                rlow=statistics.median(ratios[best]) if best else None,
                                rlow_lo=min(ratios[best]) if best else None,
                                rlow_hi=max(ratios[best]) if best else None,
                                best_rel=best_rel))
            print(f"# {label}: ORT {med['ort']:.3f} ms, fp32 {med['fp32']:.3f} ms", flush=True)
    ort.close()

    print()
    print("| model | ORT ms | cannprof fp32 ms | fp32/ORT | range | best low-precision | "
          "low ms | low/ORT | range | low rel-L2 | ORT rel-L2 |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")

    def f(x, fmt):
        return "-" if x is None else format(x, fmt)
    for r in results:
        print(f"| {r['label']} | {r['ort']:.3f} | {r['fp32']:.3f} | {r['r32']:.2f} | "
              f"{r['r32_lo']:.2f}-{r['r32_hi']:.2f} | {r['best'] or '-'} | {f(r['low'], '.3f')} | "
              f"{f(r['rlow'], '.2f')} | "
              f"{'-' if r['rlow'] is None else f(r['rlow_lo'], '.2f') + '-' + f(r['rlow_hi'], '.2f')} | "
              f"{f(r['best_rel'], '.1e')} | "
              f"{f(r['ort_rel'], '.1e')} |")
    for label, what, why in refused:
        print(f"| {label} | {what}: {why.replace('|', '/')} | | | | | | | | | |")
    print()
    for m, errs in low_refused.items():
        for err, labels in errs.items():
            print(f"{m} not converted for {len(labels)} models: {err}")
    if results:
        w = max(results, key=lambda r: r["r32"])
        g = geomean([r["r32"] for r in results])
        print(f"fp32: worst ratio {w['r32']:.2f} ({w['label']}), geometric mean {g:.2f} "
              f"over {len(results)} models; target: none above 1.00, mean at most 0.85: "
              f"{'met' if w['r32'] <= 1.0 and g <= 0.85 else 'missed'}")
        lows = [r for r in results if r["rlow"] is not None]
        if lows:
            w = max(lows, key=lambda r: r["rlow"])
            print(f"best low precision: worst ratio {w['rlow']:.2f} ({w['label']}), geometric "
                  f"mean {geomean([r['rlow'] for r in lows]):.2f} over {len(lows)} models")
    print(f"{len(results)} models measured, {len(refused)} not measured (listed above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
