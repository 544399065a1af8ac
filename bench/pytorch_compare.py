#!/usr/bin/env python3
"""cannprof versus PyTorch eager, fp32, same model, same machine, same threads.

For each example model, the same seeded PyTorch module that produced the
committed ONNX file (examples/models/make_models.py: make_module) is timed in
eager mode, and the converted .om is timed by `cannprof bench`. The two are
interleaved in rounds (torch, cannprof, torch, cannprof, ...) so that drift of
a shared, noisy machine hits both alike. Each round takes the median latency
of its iterations; the table reports the median over rounds and the spread of
the per-round ratios.

Usage: bench/pytorch_compare.sh (installs python3-torch, builds, converts).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples", "models"))

import torch  # noqa: E402
import make_models  # noqa: E402


def torch_round(model, inputs, warmup, iters):
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            model(*inputs)
            samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def cannprof_round(cli, om, threads, warmup, iters):
    out = subprocess.run(
        [cli, "bench", om, "--threads", str(threads), "--warmup", str(warmup),
         "--iterations", str(iters), "--json"],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "cannprof"))
    ap.add_argument("--om-dir", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--bar", type=float, default=1.3)
    ap.add_argument("--models", nargs="*", default=make_models.MODEL_NAMES)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    print(f"# torch {torch.__version__}, {args.threads} threads, "
          f"{args.rounds} interleaved rounds x {args.iterations} iterations "
          f"(warm-up {args.warmup}); latency = median per round, then median of rounds")
    print(f"# torch BLAS/oneDNN: mkldnn={torch.backends.mkldnn.is_available()}")
    rows = []
    for name in args.models:
        model, inputs, _, _, _ = make_models.make_module(name)
        model.eval()
        om = os.path.join(args.om_dir, name + ".om")
        t_rounds, c_rounds = [], []
        for _ in range(args.rounds):
            t_rounds.append(torch_round(model, inputs, args.warmup, args.iterations))
            c_rounds.append(cannprof_round(args.cli, om, args.threads, args.warmup,
                                           args.iterations))
        ratios = [c / t for c, t in zip(c_rounds, t_rounds)]
        rows.append((name, statistics.median(t_rounds), statistics.median(c_rounds),
                     statistics.median(ratios), min(ratios), max(ratios)))

    print()
    print(f"| model | torch eager ms | cannprof ms | ratio (cannprof/torch) | "
          f"ratio range over rounds | within {args.bar}x |")
    print("|---|---:|---:|---:|---:|:---:|")
    ok = True
    for name, t, c, r, lo, hi in rows:
        within = r <= args.bar
        ok &= within
        print(f"| {name} | {t:.3f} | {c:.3f} | {r:.2f} | {lo:.2f}-{hi:.2f} | "
              f"{'yes' if within else 'NO'} |")
    print()
    print("all models within the bar" if ok else "some models miss the bar")
    return 0


if __name__ == "__main__":
    sys.exit(main())
