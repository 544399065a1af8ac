#!/usr/bin/python3
"""The ONNX Runtime pack's expected gain against the gain its advice gives.

rules/packs/onnxruntime/onnxruntime.yaml's `ort_layout_transposes` fires on
an ORT profile whose Transposes take over 10% of the nodes' time and
predicts, with a prior speedup of the Transposes' time (the pack's gain:
speedup, interval), the latency that graph optimization level ORT_ENABLE_ALL saves. This
checks that prior on models where the Transposes are real and ORT's
transpose optimizer can act on them.

Per model (made here with onnx's helper in a temporary folder):
  1. ORT (npm onnxruntime-node, CPU provider, --threads intra-op threads,
     sequential) profiles it at graphOptimizationLevel 'disabled' and 'all',
     two sessions in one process, --warmup + --profile-runs runs each in
     alternating blocks (bench/ort_profile.js), so both profiles see the
     same machine;
  2. `cannprof import` reads the 'disabled' profile, `cannprof analyze
     --json` (the ONNX Runtime pack) gives the fired rule's time share and
     expected gain (latency saved, its interval, the prior speedup);
  3. one ORT process loads the model at 'disabled' and at 'all' and times
     them interleaved: --rounds rounds of --iterations runs of each, in
     blocks of --block runs alternating between the levels (ABBA); each
     round's median per level, and the round's speedup disabled / all
     (paired: a neighbour's load hits both alike);
  4. the 'all' profile counts the Transpose nodes left and their time; it
     is imported and analyzed too (does the rule still fire?), and
     `cannprof validate` compares the two imports.

The table per model gives the prediction (end-to-end latency saved [low,
high] and as a speedup), the measured speedup (median, min..max over the
rounds), whether the measurement falls in the predicted interval, and the
speedup the measurement implies for the Transposes' own time under
Amdahl's law (what the prior stands for): s = f / (f - g) with f the
Transposes' share and g the latency saved (infinite when g >= f: more
than all the Transposes' time was saved). The measured latency is the
node binding's session.run() as the caller sees it (input and output
copies included, about a millisecond here); f is a share of ORT's own
model_run, which leaves them out. The profiles' rows say where the saving
went (Transposes, the other nodes, outside the nodes).

usage: import_gains.py --cli CANNPROF --node-path NODE_MODULES [--models a,b]
       [--threads 2] [--rounds 7] [--iterations 100] [--block 10] [--keep DIR]
       [--json OUT.json]
Run with Debian's /usr/bin/python3 (its onnx and numpy)."""
import argparse
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RULE = "ort_layout_transposes"
# Only the pack that applies to ORT profiles (the others do not run on them):
# a pack elsewhere in the tree being edited cannot fail the analysis.
PACK = os.path.join(ROOT, "rules", "packs", "onnxruntime", "onnxruntime.yaml")

# ---- models ------------------------------------------------------------------


def _save(nodes, inits, shape_in, shape_out, name, path):
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape_in))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape_out))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="cannprof bench/import_gains.py")
    onnx.checker.check_model(m)
    onnx.save(m, path)


def transpose_chain(path, blocks=6, shape=(1, 64, 128, 128)):
    """Elementwise blocks done in NHWC on an NCHW tensor: Transpose to NHWC,
    Add a per-channel constant, Relu, Transpose back, Mul by the block's
    input. Every Transpose pair cancels once pushed through Add and Relu."""
    nodes, inits, x = [], [], "x"
    c = shape[1]
    for i in range(blocks):
        y = "y" if i == blocks - 1 else f"b{i}"
        inits.append(numpy_helper.from_array(np.full((c,), 0.01 * (i + 1), np.float32), f"c{i}"))
        nodes += [
            helper.make_node("Transpose", [x], [f"t{i}"], name=f"/blk{i}/to_nhwc",
                             perm=[0, 2, 3, 1]),
            helper.make_node("Add", [f"t{i}", f"c{i}"], [f"a{i}"], name=f"/blk{i}/Add"),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"/blk{i}/Relu"),
            helper.make_node("Transpose", [f"r{i}"], [f"u{i}"], name=f"/blk{i}/to_nchw",
                             perm=[0, 3, 1, 2]),
            helper.make_node("Mul", [f"u{i}", x], [y], name=f"/blk{i}/Mul"),
        ]
        x = y
    _save(nodes, inits, shape, shape, "transpose_chain", path)
    return {"x": list(shape)}


def nhwc_dwconv(path, blocks=4, shape=(1, 112, 112, 64)):
    """A MobileNet-like stack fed NHWC, as a TF/TFLite export leaves it:
    per block Transpose to NCHW, depthwise 3x3 Conv, Relu, Transpose back to
    NHWC, Add the block's input. Between blocks a Transpose back and the next
    one to NCHW cancel; 'all' also fuses Conv+Relu and may run the convs in
    ORT's NCHWc layout."""
    n, h, w, c = shape
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        y = "y" if i == blocks - 1 else f"b{i}"
        inits += [
            numpy_helper.from_array((rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32),
                                    f"w{i}"),
            numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), f"bias{i}"),
        ]
        nodes += [
            helper.make_node("Transpose", [x], [f"t{i}"], name=f"/blk{i}/to_nchw",
                             perm=[0, 3, 1, 2]),
            helper.make_node("Conv", [f"t{i}", f"w{i}", f"bias{i}"], [f"v{i}"],
                             name=f"/blk{i}/dwconv", group=c, kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"v{i}"], [f"r{i}"], name=f"/blk{i}/Relu"),
            helper.make_node("Transpose", [f"r{i}"], [f"u{i}"], name=f"/blk{i}/to_nhwc",
                             perm=[0, 2, 3, 1]),
            helper.make_node("Add", [f"u{i}", x], [y], name=f"/blk{i}/Add"),
        ]
        x = y
    _save(nodes, inits, shape, shape, "nhwc_dwconv", path)
    return {"x": list(shape)}


def transpose_partial(path, blocks=6, shape=(1, 96, 96, 96)):
    """Transposes the optimizer can only merge, not cancel: per block
    Transpose(0,2,3,1), Relu, Transpose(0,2,3,1) again (the two compose to
    (0,3,1,2), not the identity), Mul by the block's input (all axes are 96,
    so the shapes agree). At best one Transpose per block is left."""
    nodes, x = [], "x"
    for i in range(blocks):
        y = "y" if i == blocks - 1 else f"b{i}"
        nodes += [
            helper.make_node("Transpose", [x], [f"t{i}"], name=f"/blk{i}/perm_a",
                             perm=[0, 2, 3, 1]),
            helper.make_node("Relu", [f"t{i}"], [f"r{i}"], name=f"/blk{i}/Relu"),
            helper.make_node("Transpose", [f"r{i}"], [f"u{i}"], name=f"/blk{i}/perm_b",
                             perm=[0, 2, 3, 1]),
            helper.make_node("Mul", [f"u{i}", x], [y], name=f"/blk{i}/Mul"),
        ]
        x = y
    _save(nodes, [], shape, shape, "transpose_partial", path)
    return {"x": list(shape)}


MODELS = {
    "transpose_chain": transpose_chain,
    "nhwc_dwconv": nhwc_dwconv,
    "transpose_partial": transpose_partial,
}

# ---- ORT ---------------------------------------------------------------------


def node_js(args, node_path, cwd):
    env = dict(os.environ, NODE_PATH=node_path)
    p = subprocess.run(["node", os.path.join(HERE, "ort_profile.js")] + [str(a) for a in args],
                       capture_output=True, text=True, env=env, cwd=cwd)
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"ort_profile.js {args[0]}: exit {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[:500]}")
    if not r.get("ok"):
        raise RuntimeError(f"ort_profile.js {args[0]}: {r.get('error')}")
    return r


def ort_profile(model, work, a, shapes):
    """Profiles of 'disabled' and 'all', taken interleaved in one process."""
    prefix = os.path.join(work, os.path.basename(model)[:-5])
    levels = ("disabled", "all")
    for lv in levels:
        for f in glob.glob(f"{prefix}_{lv}_*.json"):
            os.remove(f)
    node_js(["profile", model, ",".join(levels), prefix, a.threads, a.warmup, a.profile_runs,
             json.dumps(shapes), a.block], a.node_path, work)
    out = {}
    for lv in levels:
        files = sorted(glob.glob(f"{prefix}_{lv}_*.json"))
        if len(files) != 1:
            raise RuntimeError(f"expected one profile {prefix}_{lv}_*.json, found {files}")
        out[lv] = files[0]
    return out


def profile_facts(path):
    """From the ORT profile itself: Transpose nodes, their time and the
    nodes' time per run, the runs' mean length."""
    with open(path) as f:
        ev = json.load(f)
    runs = [e["dur"] for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes, tr_names = 0.0, set()
    tr = 0.0
    names = set()
    for e in ev:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        nodes += e["dur"]
        names.add(e["name"])
        if e.get("args", {}).get("op_name") == "Transpose":
            tr += e["dur"]
            tr_names.add(e["name"])
    k = max(len(runs), 1)
    return {"runs": len(runs), "run_ms": statistics.fmean(runs) / 1e3 if runs else math.nan,
            "run_median_ms": statistics.median(runs) / 1e3 if runs else math.nan,
            "nodes": len(names), "transposes": len(tr_names),
            "transpose_ms": tr / k / 1e3, "node_ms": nodes / k / 1e3}


# ---- cannprof ----------------------------------------------------------------


def run_cli(cli, args, ok=(0,)):
    p = subprocess.run([cli] + args, capture_output=True, text=True)
    if p.returncode not in ok:
        raise RuntimeError(f"cannprof {' '.join(args)}: exit {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[:800]}")
    return p


def import_analyze(cli, profile, db):
    if os.path.exists(db):
        os.remove(db)
    imp = json.loads(run_cli(cli, ["import", profile, "-o", db, "--json"]).stdout)
    an = json.loads(run_cli(cli, ["analyze", db, "--json", "--no-calibrate", "--rules", PACK,
                                  "--skeleton", db + ".skeleton.yaml"]).stdout)
    finding = next((f for f in an.get("findings", []) if f.get("rule") == RULE), None)
    return imp, an, finding


def validate(cli, before, after):
    p = run_cli(cli, ["validate", "--before", before, "--after", after, "--json"],
                ok=(0, 1, 4))
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"error": p.stdout[:300] + p.stderr[:300]}


def latency_verdict(v):
    """validate --json's latency verdict and change (before -> after medians)."""
    m = (v.get("metrics") or {}).get("latency")
    if not m:
        return v.get("verdict", v.get("error")), None
    ci = m.get("ci_pct") or [math.nan, math.nan]
    return m.get("verdict"), (f"{m['before']:.2f} -> {m['after']:.2f} ms, "
                              f"{m['delta_pct']:+.1f}% [{ci[0]:+.1f}%, {ci[1]:+.1f}%]")


# ---- one model ---------------------------------------------------------------


def measure(name, a, work):
    model = os.path.join(work, name + ".onnx")
    shapes = MODELS[name](model)
    r = {"model": name, "shape": shapes["x"]}

    profiles = ort_profile(model, work, a, shapes)
    prof_dis, prof_all = profiles["disabled"], profiles["all"]
    r["before"] = profile_facts(prof_dis)
    imp, an, f = import_analyze(a.cli, prof_dis, os.path.join(work, name + "_disabled.db"))
    r["import_iterations"] = imp.get("iterations")
    sc = an.get("features", {}).get("scalars", {})
    r["transpose_share"] = sc.get("transpose_share")
    r["latency_mean_s"] = sc.get("latency_mean")
    r["finding"] = f
    r["other_findings"] = [x.get("rule") or x.get("title") for x in an.get("findings", [])
                           if x is not f]

    t = node_js(["time", model, a.threads, a.rounds, a.iterations, a.warmup,
                 json.dumps(shapes), a.block], a.node_path, work)
    dis, al = t["median_ms"]["disabled"], t["median_ms"]["all"]
    r["max_abs_diff"] = t["max_abs_diff"]
    r["disabled_ms"], r["all_ms"] = dis, al
    r["speedups"] = [d / x for d, x in zip(dis, al)]

    r["after"] = profile_facts(prof_all)
    db_all = os.path.join(work, name + "_all.db")
    _, an_all, f_all = import_analyze(a.cli, prof_all, db_all)
    r["fires_after"] = f_all is not None
    r["saved_predicted_after"] = f_all["expected_gain"]["latency_saved"] if f_all else None
    r["transpose_share_after"] = an_all.get("features", {}).get("scalars", {}).get(
        "transpose_share")
    v = validate(a.cli, os.path.join(work, name + "_disabled.db"), db_all)
    r["validate"] = v
    return r


# ---- report ------------------------------------------------------------------


def pct(x):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def spd(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return "inf" if math.isinf(x) else f"{x:.2f}x"


def implied_speedup(f, g):
    """Speedup of a part of share f that saves g of the whole (Amdahl)."""
    if f is None or f <= 0:
        return math.nan
    return math.inf if g >= f else f / (f - g)


def prior_text(share, eg):
    """The prior speedup and its interval, as analyze's finding implies them."""
    return (f"{spd(eg['speedup_prior'])} [{spd(implied_speedup(share, eg['low']))}, "
            f"{spd(implied_speedup(share, eg['high']))}]")


def table(r, a):
    f = r["finding"]
    sp = r["speedups"]
    med = statistics.median(sp)
    g_med = 1 - 1 / med
    g_min, g_max = 1 - 1 / min(sp), 1 - 1 / max(sp)
    dis_med, all_med = statistics.median(r["disabled_ms"]), statistics.median(r["all_ms"])
    b, af = r["before"], r["after"]
    rows = []
    add = lambda k, v: rows.append((k, v))  # noqa: E731
    add("input (x)", "x".join(map(str, r["shape"])) + f", max |disabled - all| "
        f"{r['max_abs_diff']:.2g}")
    add("profile 'disabled'", f"{b['runs']} runs (interleaved with 'all'), mean "
        f"{b['run_ms']:.2f} ms/run, nodes "
        f"{b['node_ms']:.2f} ms/run, Transposes {b['transpose_ms']:.2f} ms/run")
    add("transpose_share (cannprof)", pct(r["transpose_share"]))
    if f is None:
        add(f"rule {RULE}", "did NOT fire (" + ", ".join(map(str, r["other_findings"])) + ")")
    else:
        eg = f["expected_gain"]
        s0, lo, hi = eg["speedup_prior"], eg["low"], eg["high"]
        share = f["time_share"]
        add(f"rule {RULE}", f"fired, confidence {f['confidence']}, {len(f['nodes'])} nodes, "
            f"time share {pct(share)} of the iteration")
        add("predicted: Transposes' speedup", f"{spd(s0)} [{spd(implied_speedup(share, lo))}, "
            f"{spd(implied_speedup(share, hi))}] (the prior, from analyze's interval)")
        add("predicted: latency saved", f"{pct(eg['latency_saved'])} [{pct(lo)}, {pct(hi)}]")
        add("predicted: end-to-end speedup",
            f"{spd(1 / (1 - eg['latency_saved']))} [{spd(1 / (1 - lo))}, {spd(1 / (1 - hi))}]")
        add("predicted: time saved", f"{eg['latency_saved'] * dis_med:.2f} ms of the measured "
            f"{dis_med:.2f} ms [{lo * dis_med:.2f}, {hi * dis_med:.2f}]")
    add("measured 'disabled'", f"median {dis_med:.2f} ms ({min(r['disabled_ms']):.2f}.."
        f"{max(r['disabled_ms']):.2f}), {a.rounds} rounds x {a.iterations} runs, "
        f"blocks of {a.block} alternating")
    add("measured 'all'", f"median {all_med:.2f} ms ({min(r['all_ms']):.2f}.."
        f"{max(r['all_ms']):.2f})")
    add("measured: end-to-end speedup", f"{spd(med)} ({spd(min(sp))}..{spd(max(sp))} over "
        f"rounds, paired)")
    add("measured: latency saved", f"{pct(g_med)} ({pct(g_min)}..{pct(g_max)}), "
        f"{dis_med - all_med:.2f} ms")
    if f is not None:
        eg = f["expected_gain"]
        inside = eg["low"] <= g_med <= eg["high"]
        allin = all(eg["low"] <= g <= eg["high"] for g in (1 - 1 / s for s in sp))
        above = g_med > eg["high"]
        add("in the predicted interval?", ("yes" if inside else ("no, above" if above else
                                                                 "no, below"))
            + f" (rounds inside: {sum(eg['low'] <= 1 - 1 / s <= eg['high'] for s in sp)}"
            f"/{len(sp)}{', all' if allin else ''})")
        share = f["time_share"]
        add("implied Transposes' speedup", f"{spd(implied_speedup(share, g_med))} "
            f"(rounds {spd(implied_speedup(share, g_min))}..{spd(implied_speedup(share, g_max))};"
            f" prior {prior_text(share, eg)})")
        add("prediction error (saved)", f"{100 * (g_med - eg['latency_saved']):+.1f} points; "
            f"measured saved / Transposes' share = {g_med / share:.2f} (1 = exactly their time)")
    own = (spd(b["transpose_ms"] / af["transpose_ms"]) if af["transpose_ms"] > 0
           else "inf (all removed)")
    add("Transposes before -> after", f"{b['transposes']} -> {af['transposes']} nodes; "
        f"{b['transpose_ms']:.2f} -> {af['transpose_ms']:.2f} ms/run in the profiles "
        f"(speedup of their own time {own})")
    other_b, other_a = b["node_ms"] - b["transpose_ms"], af["node_ms"] - af["transpose_ms"]
    add("other nodes before -> after", f"{b['nodes'] - b['transposes']} -> "
        f"{af['nodes'] - af['transposes']} nodes; {other_b:.2f} -> {other_a:.2f} ms/run "
        f"in the profiles")
    add("profiles: end-to-end speedup", f"{spd(b['run_ms'] / af['run_ms'])} on model_run's "
        f"means ({b['run_ms']:.2f} -> {af['run_ms']:.2f} ms), "
        f"{spd(b['run_median_ms'] / af['run_median_ms'])} on its medians "
        f"({b['run_median_ms']:.2f} -> {af['run_median_ms']:.2f} ms)")
    saved = b["run_ms"] - af["run_ms"]
    if saved > 0:
        add("saving in the profiles", f"{saved:.2f} ms/run: Transposes "
            f"{100 * (b['transpose_ms'] - af['transpose_ms']) / saved:.0f}%, other nodes "
            f"{100 * (other_b - other_a) / saved:.0f}%, outside nodes "
            f"{100 * ((b['run_ms'] - b['node_ms']) - (af['run_ms'] - af['node_ms'])) / saved:.0f}%")
    add("profile 'all'", f"mean {af['run_ms']:.2f} ms/run; rule fires on it: "
        + (f"yes, again predicting {pct(r['saved_predicted_after'])} saved" if r["fires_after"]
           else "no") + f" (transpose_share {pct(r['transpose_share_after'])})")
    v = r["validate"]
    verdict, change = latency_verdict(v)
    add("cannprof validate before->after", f"{verdict}" + (f" ({change})" if change is not None
                                                              else ""))
    w = max(len(k) for k, _ in rows)
    out = [f"## {r['model']}", ""]
    out += [f"  {k.ljust(w)}  {v}" for k, v in rows]
    return "\n".join(out)


def summary(results):
    """One line per model: the prediction against the measurement."""
    head = ("model", "share f", "predicted saved [low, high]", "measured saved (rounds)",
            "inside", "implied s", "saved / f", "Transposes")
    rows = []
    for r in results:
        f, sp = r["finding"], r["speedups"]
        g = 1 - 1 / statistics.median(sp)
        meas = f"{pct(g)} ({pct(1 - 1 / min(sp))}..{pct(1 - 1 / max(sp))})"
        tr = f"{r['before']['transposes']} -> {r['after']['transposes']}"
        if f is None:
            rows.append((r["model"], pct(r["transpose_share"]), "rule did not fire", meas, "-",
                         "-", "-", tr))
            continue
        eg, share = f["expected_gain"], f["time_share"]
        inside = sum(eg["low"] <= 1 - 1 / s <= eg["high"] for s in sp)
        rows.append((r["model"], pct(share),
                     f"{pct(eg['latency_saved'])} [{pct(eg['low'])}, {pct(eg['high'])}]", meas,
                     f"{'yes' if eg['low'] <= g <= eg['high'] else 'no'} ({inside}/{len(sp)})",
                     spd(implied_speedup(share, g)), f"{g / share:.2f}", tr))
    w = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    line = lambda x: "| " + " | ".join(str(v).ljust(w[i]) for i, v in enumerate(x)) + " |"  # noqa
    first = next((r["finding"] for r in results if r.get("finding")), None)
    prior = prior_text(first["time_share"], first["expected_gain"]) if first else "?"
    out = [f"## summary (prior: the Transposes' time sped up {prior})", "", line(head),
           "|" + "|".join("-" * (n + 2) for n in w) + "|"]
    return "\n".join(out + [line(x) for x in rows]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--node-path", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--block", type=int, default=10,
                    help="runs of one level before switching to the other (default 10)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--profile-runs", type=int, default=50)
    ap.add_argument("--keep", help="keep the models, profiles and trace stores in DIR")
    ap.add_argument("--json", help="also write the raw results as JSON to this file")
    a = ap.parse_args()
    names = [m for m in a.models.split(",") if m]
    for m in names:
        if m not in MODELS:
            ap.error(f"unknown model {m}; known: {', '.join(MODELS)}")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        work = a.keep
    else:
        work = tempfile.mkdtemp(prefix="import_gains-")
    print(f"# ort_layout_transposes: predicted vs measured gain of ORT_ENABLE_ALL "
          f"(onnxruntime-node, CPU, {a.threads} intra-op threads)\n")
    results, failed = [], 0
    try:
        for m in names:
            try:
                r = measure(m, a, work)
            except RuntimeError as e:
                print(f"## {m}\n\n  failed: {e}\n", flush=True)
                failed += 1
                continue
            results.append(r)
            print(table(r, a) + "\n", flush=True)
        if results:
            print(summary(results))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1, default=str)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
