#!/usr/bin/env python3
"""The int8 figure of issue 14 on the SD-like example
(examples/models/sd_unet_tiny.onnx): under precision_loss<1% with int8
allowed, the tuned ratio to the default conversion, and how it compares with
the tuner limited to bf16 (no --int8).

The default conversion is made once (`cannprof convert --model=MODEL
--framework=5 --output=D`). Then, K times (--reps, default 3), each tuning run
in a fresh folder with a fresh knowledge base:

  1. bf16 alone: `cannprof tune MODEL --target latency --constraints
     "precision_loss<1%" --kb FRESH.sqlite --out T_bf16 --json --quiet`;
  2. with int8: the same with --int8 added (out T_int8). `tune --int8` plans
     Conv/MatMul/Gemm in int8 on top of the best float point and keeps them
     only when measured faster; from T_int8/report.json: the plan's node count
     (int8_plan), whether its step (source "plan:int8") was accepted, and how
     many nodes the best keeps in int8 (best.int8_nodes);
  3. three interleaved measurements, each in one process, `cannprof bench A.om
     --vs B.om -n N --json` (N = --iterations, default 60 rounds):
       D vs T_bf16/best.om, D vs T_int8/best.om, T_bf16/best.om vs
       T_int8/best.om (the direct comparison of int8 with bf16 alone).
     A ratio is after/before of that run's medians (bench compares the
     undisturbed rounds), i.e. B's latency as a share of A's, with the run's
     95% CI of the change as 1 + ci/100. The three run in this order in odd
     repetitions and in the reverse order in even ones, so that drift over a
     repetition does not always favour the same measurement;
  4. each best's precision_loss measured again apart from the tuner:
     `cannprof compare MODEL T/best.om --json` (seeded inputs, seed 0).

The tuner keeps its own defaults (60 rounds per evaluation); --iterations sets
only the rounds of the three measurements above. When a run ends on its
baseline (the default conversion), or the int8 run on the same point as bf16
alone, the ratio concerned compares two copies of one model: the row marks it
A/A, and its distance from 1 shows the noise of that measurement. Beside the
direct int8 / bf16 ratio the quotient of the two ratios to the default is
printed; it spans two processes, so the machine's drift between them is in it.

It prints the machine load before and after, a row per repetition, and the
median with min..max over repetitions of each ratio. Issue 14 sets no bar for
this figure, so the figure is stated only, together with whether every best
held precision_loss<1% by compare. Nothing here asserts on time.

Usage: bench/tune_int8.sh [--reps K] [--iterations N] [--keep DIR]
Exit 1 when a repetition fails or a best breaks precision_loss<1% by compare;
the tables are printed anyway.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = os.path.join(ROOT, "examples", "models", "sd_unet_tiny.onnx")
BOUND_PCT = 1.0
CONSTRAINTS = f"precision_loss<{BOUND_PCT:g}%"
T0 = time.monotonic()

# the three interleaved measurements: key, A, B (names of the .om files)
PAIRS = (("bf16", "default", "bf16"), ("int8", "default", "int8"), ("direct", "bf16", "int8"))


def log(msg):
    print(f"[tune_int8 {time.monotonic() - T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def run(cmd, cwd=None, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode not in ok:
        tail = "\n".join(p.stderr.strip().splitlines()[-6:])
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}: {tail}")
    return p


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def tune(cli, wd, tag, int8):
    """One tuning run in a fresh folder with a fresh knowledge base: its report and best.om."""
    # relative to wd, so the accepted steps read short (tune names its files by --out)
    cmd = [cli, "tune", MODEL, "--target", "latency", "--constraints", CONSTRAINTS, "--kb",
           tag + ".sqlite", "--out", "tune-" + tag, "--json", "--quiet"] + (
               ["--int8"] if int8 else [])
    log(f"tune{' --int8' if int8 else ''} ({tag}) ...")
    t = time.monotonic()
    run(cmd, cwd=wd)
    secs = time.monotonic() - t
    out = os.path.join(wd, "tune-" + tag)
    with open(os.path.join(out, "report.json")) as f:
        r = json.load(f)
    best = os.path.join(out, "best.om")
    if not os.path.isfile(best):
        raise RuntimeError(f"tune wrote no {best}")
    return r, best, out, secs


def ab(cli, a, b, n):
    """`bench A --vs B` interleaved: B's median over A's (undisturbed rounds) and its CI."""
    d = json.loads(run([cli, "bench", a, "--vs", b, "-n", str(n), "--json"]).stdout)
    c = d.get("comparison") or {}
    if c.get("unit") != "ms" or not c.get("before") or c.get("after") is None:
        raise RuntimeError("bench --vs --json has no comparison in ms: " + json.dumps(d)[:300])
    ci = c.get("ci_pct") or [None, None]
    return {"ratio": c["after"] / c["before"],
            "ci": [None if x is None else 1 + x / 100 for x in ci],
            "n": c.get("n_after"), "verdict": c.get("verdict"),
            "time_limit_hit": bool(d.get("time_limit_hit"))}


def precision_loss(cli, om):
    # compare exits 1 when outputs are beyond its tolerance, as bf16 and int8 ones are
    return json.loads(run([cli, "compare", MODEL, om, "--json"], ok=(0, 1)).stdout).get(
        "precision_loss_pct")


def accepted(r):
    return [s["delta"] for s in r.get("steps", []) if s.get("status") == "accepted"]


def point_key(entry):
    """A report's baseline or best as comparable text: its conversion and run settings. The
    files named in the config differ by folder; their content (int8_nodes, quant_ranges) is
    compared instead."""
    p = (entry or {}).get("point") or {}
    c = {k: v for k, v in (p.get("config") or {}).items()
         if k not in ("model", "output", "int8_nodes_file", "quant_ranges_file")}
    c.setdefault("int8_nodes", "")
    c.setdefault("quant_ranges", "")
    if not c["int8_nodes"]:  # ranges matter only for nodes in int8
        c["quant_ranges"] = ""
    return json.dumps([c, p.get("threads"), p.get("batch")], sort_keys=True)


def same_point(ra, rb):
    """Whether two tuning runs ended on the same point."""
    return point_key(ra.get("best")) == point_key(rb.get("best"))


def kept_baseline(r):
    """Whether a tuning run ended on its baseline, the default conversion (`convert
    --framework=5` with nothing else), so that its best against the default is an A/A."""
    return point_key(r.get("best")) == point_key(r.get("baseline"))


def step_verdict(s):
    """The tuner's own measurement of a step, from its reason: 'latency -1.9% [..]: why'."""
    why = s.get("reason") or ""
    m = re.search(r"latency [+-]?[\d.]+% \[[^\]]*\]", why)
    if not m:
        return why or "-"
    after = why[m.end():]  # ', p=...: why' on a rejection, nothing more on an acceptance
    return m.group(0) + (": " + after.split(": ", 1)[1] if ": " in after else "")


def int8_facts(r, out):
    """What the int8 plan proposed and what the best kept."""
    plan = r.get("int8_plan") or {}
    steps = [s for s in r.get("steps", []) if str(s.get("source", "")).startswith("plan:int8")]
    if not steps:
        step = "not tried"
    elif any(s.get("status") == "accepted" for s in steps):
        step = "accepted"
    else:
        step = "/".join(sorted({s.get("status", "?") for s in steps}))
    measured = "; ".join(f"{s.get('status')}: {step_verdict(s)}" for s in steps) or "-"
    kept = 0
    path = os.path.join(out, "best.int8_nodes")
    if os.path.isfile(path):
        with open(path) as f:
            kept = sum(1 for line in f if line.strip())
    return {"plan_int8": plan.get("int8_nodes"), "plan_nodes": plan.get("nodes"),
            "plan_loss": plan.get("plan_loss_pct"), "all_int8_loss": plan.get("all_int8_loss_pct"),
            "step": step, "measured": measured, "kept": kept}


def one_rep(cli, wd, default_om, rep, n):
    rb, best_bf16, _, sb = tune(cli, wd, f"bf16-r{rep}", False)
    ri, best_int8, out_i, si = tune(cli, wd, f"int8-r{rep}", True)
    oms = {"default": default_om, "bf16": best_bf16, "int8": best_int8}
    order = list(PAIRS) if rep % 2 else list(reversed(PAIRS))
    m = {}
    for key, a, b in order:
        log(f"bench {a} --vs {b} -n {n} (rep {rep}) ...")
        m[key] = ab(cli, oms[a], oms[b], n)
    log(f"compare (rep {rep}) ...")
    return {
        "rep": rep, "m": m, "order": [k for k, _, _ in order],
        "loss_bf16": precision_loss(cli, best_bf16), "loss_int8": precision_loss(cli, best_int8),
        "int8": int8_facts(ri, out_i),
        "evals_bf16": rb.get("latency_evaluations"), "evals_int8": ri.get("latency_evaluations"),
        "acc_bf16": accepted(rb), "acc_int8": accepted(ri), "secs": (sb, si),
        "same": same_point(rb, ri), "dflt_bf16": kept_baseline(rb),
        "dflt_int8": kept_baseline(ri),
    }


def f(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def ratio_str(v):
    lo, hi = v.get("ci") or (None, None)
    s = f"{v['ratio']:.3f}" + ("" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]")
    return s + (f" † n={v['n']}" if v.get("time_limit_hit") else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    if a.reps < 1 or a.iterations < 10:
        print("tune_int8: --reps >= 1 and --iterations >= 10", file=sys.stderr)
        return 2
    if os.sep in a.cli:  # tune runs in the work folder
        a.cli = os.path.abspath(a.cli)
    wd = os.path.abspath(a.keep or tempfile.mkdtemp(prefix="cannprof-tune-int8."))
    os.makedirs(wd, exist_ok=True)
    print(f"# cannprof tune with int8 allowed, {CONSTRAINTS}: {MODEL}\n")
    print(f"load before: {uptime()}")
    default = os.path.join(wd, "default")
    log("convert the default ...")
    run([a.cli, "convert", f"--model={MODEL}", "--framework=5", f"--output={default}"])
    rows, failed = [], False
    for rep in range(1, a.reps + 1):
        try:
            rows.append(one_rep(a.cli, wd, default + ".om", rep, a.iterations))
        except (RuntimeError, KeyError, ValueError) as e:
            failed = True
            print(f"\n**run {rep} failed:** {e}\n")
    print(f"load after:  {uptime()}\n")

    print(f"Ratios are B's median latency over A's, measured interleaved in one process "
          f"(`bench A --vs B -n {a.iterations}`), with the 95% CI; † = bench's time limit "
          f"stopped it before {a.iterations} undisturbed rounds, n = the undisturbed rounds it "
          f"got. A/A = the int8 run ended on the same point as bf16 alone's, so its direct "
          f"ratio measures two copies of one model; likewise against the default when a run "
          f"ended on its baseline, the default conversion. The quotient (with int8 / default) / "
          f"(bf16 alone / default) combines two processes and is shown only beside the direct "
          f"figure. bf16 alone = `tune` without `--int8`. precision_loss by "
          f"`compare MODEL best.om` (seed 0).\n")
    print("| rep | bf16 alone / default [95% CI] | with int8 / default [95% CI] | "
          "int8 best / bf16 best [95% CI] | quotient | precision_loss bf16 best | "
          "precision_loss int8 best | int8 plan: nodes in int8 | int8 step | "
          "int8 nodes in best | latency evals (bf16 / int8) | order |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
    for r in rows:
        m, i8 = r["m"], r["int8"]
        pn = "-" if i8["plan_int8"] is None else f"{i8['plan_int8']} of {i8['plan_nodes']}"
        aa = {k: " (A/A)" if r[k] else "" for k in ("dflt_bf16", "dflt_int8", "same")}
        print(f"| {r['rep']} | {ratio_str(m['bf16'])}{aa['dflt_bf16']} | "
              f"{ratio_str(m['int8'])}{aa['dflt_int8']} | "
              f"{ratio_str(m['direct'])}{aa['same']} | "
              f"{m['int8']['ratio'] / m['bf16']['ratio']:.3f} | {f(r['loss_bf16'], '{:.4f}%')} | "
              f"{f(r['loss_int8'], '{:.4f}%')} | {pn} | {i8['step']} | {i8['kept']} | "
              f"{r['evals_bf16']} / {r['evals_int8']} | {', '.join(r['order'])} |")
    print("\nWhat each tuning run kept (accepted steps), the int8 step as the tuner measured "
          "it, the int8 plan's losses and the seconds each run took:\n")
    print("| rep | bf16 alone: accepted | with int8: accepted | int8 step (tuner) | "
          "int8 plan loss | all in int8 loss | s (bf16 / int8) |")
    print("|---:|---|---|---|---:|---:|---:|")
    for r in rows:
        acc = [("; ".join("`" + x + "`" for x in r[k]) or "(none: the default)")
               for k in ("acc_bf16", "acc_int8")]
        print(f"| {r['rep']} | {acc[0]} | {acc[1]} | {r['int8']['measured']} | "
              f"{f(r['int8']['plan_loss'], '{:.4f}%')} | "
              f"{f(r['int8']['all_int8_loss'], '{:.4f}%')} | "
              f"{r['secs'][0]:.0f} / {r['secs'][1]:.0f} |")

    print(f"\nOver {len(rows)} repetition(s):\n")
    print("| ratio | median | min–max |")
    print("|---|---:|---|")
    names = {"bf16": "tuned bf16 alone / default", "int8": "tuned with int8 / default",
             "direct": "int8 best / bf16 best (direct)"}
    meds = {}
    for key, _, _ in PAIRS:
        v = [r["m"][key]["ratio"] for r in rows]
        if v:
            meds[key] = statistics.median(v)
            print(f"| {names[key]} | {meds[key]:.3f} | {min(v):.3f}–{max(v):.3f} |")
        else:
            print(f"| {names[key]} | - | - |")
    losses = [x for r in rows for x in (r["loss_bf16"], r["loss_int8"])]
    within = bool(rows) and all(x is not None and x < BOUND_PCT for x in losses)
    print()
    if meds:
        print(f"Issue 14 sets no bar for this figure (stated only): with int8 allowed under "
              f"{CONSTRAINTS} the tuned model runs at {meds['int8']:.3f}x the default's latency "
              f"(median of {len(rows)}), bf16 alone at {meds['bf16']:.3f}x, and int8's best at "
              f"{meds['direct']:.3f}x bf16 alone's measured directly (the int8 step accepted "
              f"in {sum(r['int8']['step'] == 'accepted' for r in rows)} of {len(rows)} runs; "
              f"{sum(r['same'] for r in rows)} of {len(rows)} ended on bf16 alone's point; "
              f"bf16 alone kept the default in {sum(r['dflt_bf16'] for r in rows)} of "
              f"{len(rows)}); "
              f"every best within {CONSTRAINTS} by compare: {'yes' if within else 'NO'}.")
    else:
        print("Issue 14 sets no bar for this figure: no repetition finished.")
    print(f"\nwork folder: {wd}")
    return 0 if within and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
