#!/usr/bin/env python3
"""What serving costs and what dynamic batching gains, side by side.

For one model and thread count: `cannprof bench` throughput (the model
alone, in process), then `cannprof serve` under `cannprof load` offered
more than the model can do (open loop, --rate above bench's throughput),
without batching (--max-batch 1) and with it (--max-batch N, a small
window). --mlp benches a model that batching helps instead of --model
(bench/make_mlp_model.py: Gemm layers whose weights one batched call
reads once for every row), made in a temporary folder. Each configuration is run --reps times, interleaved; the table
shows medians [min..max] of the answered throughput and the p50/p99
latency load measured (from the intended send times: under overload they
grow with the queue, which is the point)."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from serving import cli, fmt, load, serve, stop


def served(binary, model, threads, batch, window, rate, duration, tmp):
    srv, port = serve(binary, model, ["--max-batch", str(batch), "--batch-window", str(window)],
                      tmp, threads)
    try:
        return load(binary, port, rate, duration)
    finally:
        stop(srv)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", default=os.environ.get("CANNPROF", "build/cannprof"))
    ap.add_argument("--model", default="examples/models/resnet_tiny.onnx")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--mlp", action="store_true",
                    help="bench an MLP that batching helps (bench/make_mlp_model.py)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cannprof-serve-bench-")
    shape = []
    if a.mlp:
        a.model = os.path.join(tmp, "mlp.onnx")
        # Debian's onnx, run outside the repo (our onnx/ folder would shadow it)
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run(["/usr/bin/python3", os.path.join(here, "make_mlp_model.py"), a.model],
                       cwd=tmp, check=True)
        shape = ["--input_shape", "x:1,1024"]
    rows = {"bench": [], "serve b1": [], f"serve b{a.batch}": []}
    lat = {k: ([], []) for k in rows}
    for r in range(a.reps):
        b = json.loads(cli(["bench", a.model, *shape, "-t", str(a.threads), "-n", "200",
                            "--json"], a.cli))
        thr = b["throughput_items_per_s"]
        rows["bench"].append(thr)
        rate = 1.5 * thr
        for name, batch, window in (("serve b1", 1, 0), (f"serve b{a.batch}", a.batch, 2)):
            out = served(a.cli, a.model, a.threads, batch, window, rate, a.duration, tmp)
            rows[name].append(out["throughput"])
            lat[name][0].append(out["latency_p50_ms"])
            lat[name][1].append(out["latency_p99_ms"])
    name = "an MLP (4 x 1024 Gemm, bench/make_mlp_model.py)" if a.mlp else a.model
    print(f"## serve against bench: {name}, {a.threads} thread(s), {a.reps} interleaved "
          f"rounds, load offered at 1.5x bench's throughput for {a.duration:.0f} s\n")
    print("| configuration | throughput (req/s) | vs bench | p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    base = statistics.median(rows["bench"])
    for name, v in rows.items():
        ratio = statistics.median(v) / base if base else 0
        p50 = fmt(lat[name][0]) if lat[name][0] else "-"
        p99 = fmt(lat[name][1]) if lat[name][1] else "-"
        print(f"| {name} | {fmt(v)} | {ratio:.2f} | {p50} | {p99} |")


if __name__ == "__main__":
    main()
