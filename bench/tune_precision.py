#!/usr/bin/env python3
"""The precision-budget figures of issue 14 on the SD-like example
(examples/models/sd_unet_tiny.onnx), each tuning run in a fresh folder with a
fresh knowledge base:

  for each budget B (default: precision_loss<0.5% and precision_loss<1%),
  K times (default 3):
    1. `cannprof tune MODEL --target latency --constraints B --kb K --out T
       --json`; from report.json: the accepted changes, the best's
       precision_loss, the latency evaluations, precision checks and profiling
       runs spent, and the per-node precision plan's summary (nodes in bf16,
       its measured loss, the latency model's predicted figure);
    2. the default conversion (`cannprof convert --model=MODEL --framework=5
       --output=D`) against T/best.om, interleaved in one process:
       `cannprof bench D.om --vs T/best.om -n N --json`. The ratio is
       t_best / t_default from that run's medians (the tuned model's latency
       as a share of the default's), with the run's 95% CI of the change;
    3. the best's precision_loss measured again apart from the tuner:
       `cannprof compare MODEL T/best.om --json` (seeded inputs, seed 0).

It prints a row per run and, per budget, the median ratio with its min..max,
and whether the issue's bar holds: for precision_loss<0.5% the tuned model at
most 0.75x the default latency with precision_loss within the budget in every
run. The latency model's prediction for the plan (predicted / profiled fp32)
is printed beside the realised ratio, so its error is visible.

Usage: bench/tune_precision.sh [--reps K] [--ab-rounds N] [--budgets "B1;B2"]
                              [--keep DIR]
Exit 1 when the bar is missed or a run fails; the table is printed anyway.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = os.path.join(ROOT, "examples", "models", "sd_unet_tiny.onnx")
BAR_RATIO = 0.75
T0 = time.monotonic()


def log(msg):
    print(f"[tune_precision {time.monotonic() - T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def run(cmd, cwd=None, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode not in ok:
        tail = "\n".join(p.stderr.strip().splitlines()[-6:])
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}: {tail}")
    return p


def budget_value(b):
    return float(b.split("<", 1)[1].rstrip("%"))


def one_run(cli, wd, default_om, budget, rep, ab_rounds):
    tag = f"b{budget_value(budget):g}-r{rep}"
    out = os.path.join(wd, "tune-" + tag)
    kb = os.path.join(wd, tag + ".sqlite")
    log(f"tune --constraints {budget} (run {rep}) ...")
    t = time.monotonic()
    run([cli, "tune", MODEL, "--target", "latency", "--constraints", budget, "--kb", kb,
         "--out", out, "--json", "--quiet"], cwd=wd)
    secs = time.monotonic() - t
    with open(os.path.join(out, "report.json")) as f:
        r = json.load(f)
    best = os.path.join(out, "best.om")
    log(f"bench default --vs best -n {ab_rounds} ...")
    ab = json.loads(run([cli, "bench", default_om, "--vs", best, "-n", str(ab_rounds),
                         "--json"]).stdout)
    # compare exits 1 when outputs are beyond its tolerance, as bf16 ones are
    cmp_ = json.loads(run([cli, "compare", MODEL, best, "--json"], ok=(0, 1)).stdout)
    a_ms, b_ms = ab_medians(ab)
    change = ab_change(ab)
    plan = r.get("precision_plan") or {}
    accepted = [s["delta"] for s in r["steps"] if s.get("status") == "accepted"]
    pred = None
    if plan.get("predicted_ms") and plan.get("profile_fp32_ms"):
        pred = plan["predicted_ms"] / plan["profile_fp32_ms"]
    return {
        "budget": budget, "rep": rep, "seconds": secs,
        "ratio": b_ms / a_ms if a_ms and b_ms else None,
        "change": change, "a_ms": a_ms, "b_ms": b_ms,
        "loss_tuner": r["best"].get("precision_loss_pct"),
        "loss": cmp_.get("precision_loss_pct"),
        "lat_evals": r.get("latency_evaluations"), "checks": r.get("precision_checks"),
        "profiles": r.get("profile_runs"), "evaluations": r.get("evaluations"),
        "plan_nodes": (plan.get("bf16_nodes"), plan.get("nodes")) if plan else None,
        "plan_loss": plan.get("plan_loss_pct"), "whole_loss": plan.get("whole_model_loss_pct"),
        "predicted": pred, "accepted": accepted,
        "final": (r["best"].get("against_baseline") or {}).get("gain_pct"),
    }


def ab_medians(ab):
    """The two medians (ms) that `bench --vs --json` compared."""
    cmp_ = ab.get("comparison") or {}
    if cmp_.get("unit") != "ms" or cmp_.get("before") is None or cmp_.get("after") is None:
        raise RuntimeError("bench --vs --json has no comparison in ms: " + json.dumps(ab)[:300])
    return cmp_["before"], cmp_["after"]


def ab_change(ab):
    cmp_ = ab.get("comparison") or {}
    return cmp_.get("delta_pct"), cmp_.get("ci_pct")


def f(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ab-rounds", type=int, default=300)
    ap.add_argument("--budgets", default="precision_loss<0.5%;precision_loss<1%")
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    if a.reps < 1 or a.ab_rounds < 10:
        print("tune_precision: --reps >= 1 and --ab-rounds >= 10", file=sys.stderr)
        return 2
    wd = a.keep or tempfile.mkdtemp(prefix="cannprof-tune-precision.")
    os.makedirs(wd, exist_ok=True)
    budgets = [b.strip() for b in a.budgets.split(";") if b.strip()]
    print(f"# cannprof tune under a precision budget: {MODEL}\n")
    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    default = os.path.join(wd, "default")
    run([a.cli, "convert", f"--model={MODEL}", "--framework=5", f"--output={default}"])
    rows, failed = [], False
    for rep in range(1, a.reps + 1):  # budgets interleaved, so drift hits both alike
        for b in budgets:
            try:
                rows.append(one_run(a.cli, wd, default + ".om", b, rep, a.ab_rounds))
            except (RuntimeError, KeyError, ValueError) as e:
                failed = True
                print(f"\n**{b}, run {rep} failed:** {e}\n")
    print(f"load after:  {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}\n")
    print("| budget | run | tuned/default (interleaved) | change [95% CI] | precision_loss "
          "(compare) | plan: bf16 nodes | plan loss | whole-model bf16 loss | "
          "predicted / profiled fp32 | latency evals | precision checks | profiles | s | "
          "accepted |")
    print("|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        d, ci = r["change"]
        ch = "-" if d is None else f"{d:+.1f}%" + (
            f" [{ci[0]:+.1f}%, {ci[1]:+.1f}%]" if ci and None not in ci else "")
        pn = "-" if not r["plan_nodes"] else f"{r['plan_nodes'][0]} of {r['plan_nodes'][1]}"
        print(f"| {r['budget']} | {r['rep']} | {f(r['ratio'])} | {ch} | "
              f"{f(r['loss'], '{:.4f}%')} | {pn} | {f(r['plan_loss'], '{:.4f}%')} | "
              f"{f(r['whole_loss'], '{:.4f}%')} | {f(r['predicted'])} | {r['lat_evals']} | "
              f"{r['checks']} | {r['profiles']} | {r['seconds']:.0f} | "
              f"{'; '.join('`' + x + '`' for x in r['accepted']) or '(none)'} |")
    print()
    ok = not failed
    for b in budgets:
        rs = [r for r in rows if r["budget"] == b and r["ratio"] is not None]
        if not rs:
            ok = False
            print(f"{b}: no run finished")
            continue
        ratios = [r["ratio"] for r in rs]
        within = all(r["loss"] is not None and r["loss"] < budget_value(b) for r in rs)
        med = statistics.median(ratios)
        line = (f"{b}: tuned/default median {med:.3f} (runs {min(ratios):.3f}..{max(ratios):.3f},"
                f" {len(rs)} runs), precision_loss within the budget in every run: "
                f"{'yes' if within else 'NO'}")
        if abs(budget_value(b) - 0.5) < 1e-9:
            met = med <= BAR_RATIO and within
            ok = ok and met
            line += f"; bar (at most {BAR_RATIO}x, within budget): {'met' if met else 'MISSED'}"
        print(line)
    print(f"\nwork folder: {wd}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
