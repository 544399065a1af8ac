#!/usr/bin/env python3
"""Do `cannprof suggest`'s expected gains hold when the change is applied?
(issue 14, "predictions that hold"). For each example model, converted with
every fusion pass off (a switch file `ALL:off`: fusion passes only, the
precision and layout passes stay on) under each layout policy asked for:

  1. `cannprof bench BASE.om -n 100 --trace T.db`;
  2. `cannprof suggest T.db --json` (the rules' priors) and
     `cannprof suggest T.db --measure --json` (each change measured for
     --whatif-rounds interleaved rounds on the run's own model);
  3. every change among the top 3 findings of either list is applied exactly
     as printed (the `commands` entry: its convert command, switch file and
     runtime flags) and its realised gain measured against BASE.om:
     `cannprof bench BASE.om --vs CAND.om -n N --json` (interleaved; the
     realised gain is the latency saved, -delta), in --processes separate
     processes (default 3; the order of the two alternates): the realised
     gain is their median and its CI spans every process's own CI. One
     process is not enough on this machine: the fp32 NCHW resnet_tiny ran
     at 0.30 ms in some processes and 0.60 ms in others, and the same pair
     measured twice in a row gave -17.7% and +6.5%. A change of threads or
     batch cannot run interleaved on other threads: BASE and CAND are then
     benched apart, alternately, 3 times each, and the median ratio is the
     realised figure (marked cross-run).

Per list (prior, measured) it prints every top-3 finding with its predicted
gain and interval and the realised gain, then:
  - the share of realised gains inside the predicted interval (goal >= 80%);
  - the share of models whose top finding realises the most among its top 3
    (goal >= 90%); "within noise" also counts a top finding whose realised
    gain is inside the realised CI of the one that gained most.

The measured list is ranked as `suggest --measure` ranks it: by the
what-ifs, then the race of the top three whose intervals overlap (the
"race" column: won or lost against the first; --no-race ranks by the
what-ifs alone, the ranking before the race existed).

Usage: bench/suggest_calibration.sh [--models a,b] [--layouts auto,nchw]
        [--whatif-rounds R] [--rounds N] [--processes P] [--keep DIR]
        [--priority high] [--no-race]
Exit 1 when the measured list misses a goal, 0 otherwise (the prior list's
figures are reported, not judged: they are the "before").
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
EXAMPLES = os.path.join(ROOT, "examples", "models")
MODELS = ["resnet_tiny", "nhwc_roundtrip", "launch_bound_tiny", "transformer_encoder_op14",
          "transformer_encoder_op17", "sd_unet_tiny"]
T0 = time.monotonic()
PROCESSES = 3  # set from --processes
PRIORITY = []  # `--priority high` for every bench and suggest --measure (set by --priority)


def log(msg):
    print(f"[suggest_calibration {time.monotonic() - T0:6.0f}s] {msg}", file=sys.stderr,
          flush=True)


def run(cmd, ok=(0,), cwd=None):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode not in ok:
        tail = "\n".join(p.stderr.strip().splitlines()[-4:])
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}: {tail}")
    return p


def key_of(f, cmd):
    return (cmd.get("convert") or "") + "|" + (cmd.get("switch_file") or "") + "|" + (
        cmd.get("runtime") or "")


def runtime_flags(text):
    return text.split() if text else []


def realise(cli, wd, base_om, idx, cmd, rounds):
    """Convert the change as printed and measure it against base_om."""
    d = os.path.join(wd, f"cand{idx}")
    os.makedirs(d, exist_ok=True)
    if cmd.get("switch_file"):
        with open(os.path.join(d, "switches.cfg"), "w") as f:
            f.write(cmd["switch_file"])
    conv = cmd["convert"].split()
    if conv[:2] != ["cannprof", "convert"]:
        raise RuntimeError("not a convert command: " + cmd["convert"])
    # the command as printed, its output moved into this candidate's folder
    args = [x if not x.startswith("--output=") else f"--output={d}/cand" for x in conv[2:]]
    run([cli, "convert"] + args, cwd=d)
    cand = os.path.join(d, "cand.om")
    rt = runtime_flags(cmd.get("runtime"))
    if not rt:
        gains, los, his = [], [], []
        for p in range(PROCESSES):
            swap = p % 2 == 1  # B --vs A: its change is the inverse
            a, b = (cand, base_om) if swap else (base_om, cand)
            c = json.loads(run([cli, "bench", a, "--vs", b, "-n", str(rounds),
                                "--json"] + PRIORITY).stdout)["comparison"]
            r, lo, hi = (1 + c["delta_pct"] / 100, 1 + c["ci_pct"][0] / 100,
                         1 + c["ci_pct"][1] / 100)
            if swap:  # cand/base = 1 / (base/cand)
                r, lo, hi = 1 / r, 1 / hi, 1 / lo
            gains.append(1 - r)
            los.append(1 - hi)
            his.append(1 - lo)
        return {"gain": statistics.median(gains), "ci": [min(los), max(his)],
                "cross_run": False}
    ratios = []
    for rep in range(3):
        meds = {}
        order = [("a", base_om, []), ("b", cand, rt)]
        if rep % 2:
            order.reverse()
        for name, om, flags in order:
            j = json.loads(run([cli, "bench", om, "-n", str(rounds), "--json"] + flags +
                               PRIORITY).stdout)
            # the undisturbed iterations' median when the probe found any
            und = (j.get("probe") or {}).get("latency_ms") or {}
            meds[name] = und.get("median") if isinstance(und, dict) else None
            if meds[name] is None:
                meds[name] = j["latency_ms"]["median"]
        ratios.append(meds["b"] / meds["a"])
    r = statistics.median(ratios)
    return {"gain": 1 - r, "ci": [1 - max(ratios), 1 - min(ratios)], "cross_run": True}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--layouts", default="auto,nchw")
    ap.add_argument("--whatif-rounds", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--processes", type=int, default=3,
                    help="separate interleaved processes per realised change")
    ap.add_argument("--priority", choices=("normal", "high"), default="normal",
                    help="every bench and suggest --measure run's --priority (normal)")
    ap.add_argument("--no-race", action="store_true",
                    help="suggest --measure --no-race: rank by the what-ifs alone")
    a = ap.parse_args()
    global PROCESSES
    if a.priority == "high":
        PRIORITY.extend(["--priority", "high"])
    if a.processes < 1:
        ap.error("--processes takes 1 or more")
    PROCESSES = a.processes
    wd = a.keep or tempfile.mkdtemp(prefix="cannprof-suggest-calibration.")
    os.makedirs(wd, exist_ok=True)
    with open(os.path.join(wd, "off.cfg"), "w") as f:
        f.write("ALL:off\n")
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# Do suggest's expected gains hold?\n\nload before: {up}; priority "
          f"{a.priority}; race {'off' if a.no_race else 'on'}\n")
    lists = {"prior": [], "measured": []}  # per model: [(finding row)...]
    realised = {}
    cand_n = 0
    for model in [m for m in a.models.split(",") if m]:
        for layout in [l for l in a.layouts.split(",") if l]:
            name = f"{model}/{layout}"
            md = os.path.join(wd, model + "-" + layout)
            os.makedirs(md, exist_ok=True)
            base = os.path.join(md, "base")
            try:
                run([a.cli, "convert", f"--model={os.path.join(EXAMPLES, model + '.onnx')}",
                     "--framework=5", f"--output={base}",
                     f"--fusion_switch_file={os.path.join(wd, 'off.cfg')}",
                     f"--layout_policy={layout}"])
                trace = os.path.join(md, "t.db")
                run([a.cli, "bench", base + ".om", "-n", "100", "--trace", trace])
                log(f"{name}: suggest, suggest --measure")
                got = {
                    "prior": json.loads(run([a.cli, "suggest", trace, "--json"]).stdout),
                    "measured": json.loads(run([a.cli, "suggest", trace, "--measure", "-n",
                                                str(a.whatif_rounds), "--json"] + PRIORITY +
                                               (["--no-race"] if a.no_race else [])).stdout),
                }
            except RuntimeError as e:
                print(f"**{name}: {e}**\n")
                continue
            for mode, j in got.items():
                rows = []
                for i, f in enumerate(j["findings"][:3]):
                    if f.get("unclassified"):
                        continue
                    cmd = j["commands"][i]
                    if not cmd.get("convert"):
                        continue
                    eg = f["expected_gain"]
                    race = ((j.get("measured") or [{}] * 3)[i] or {}).get("race") or {}
                    rows.append({"race": ("won" if race.get("won") else "lost")
                                 if race.get("measured") else ("failed" if race else ""),"model": name, "rank": i + 1, "rule": f["rule"],
                                 "gain": eg["latency_saved"], "lo": eg["low"], "hi": eg["high"],
                                 "key": key_of(f, cmd), "cmd": cmd,
                                 "measured": (j.get("measured") or [{}] * 3)[i].get("measured")})
                lists[mode].append(rows)
                for r in rows:
                    k = (name, r["key"])
                    if k in realised:
                        continue
                    cand_n += 1
                    log(f"{name}: realise {r['rule']} ...")
                    try:
                        realised[k] = realise(a.cli, a.keep or wd, base + ".om", cand_n,
                                              r["cmd"], a.rounds)
                    except (RuntimeError, KeyError, ValueError, TypeError) as e:
                        realised[k] = {"error": str(e)}
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"load after: {up}\n")
    summary = {}
    for mode in ("prior", "measured"):
        print(f"## {mode}\n")
        print("| model | rank | rule | predicted [interval] | realised [CI] | inside | race |")
        print("|---|---:|---|---|---|---|---|")
        inside = total = tops = tops_noise = models = races = tops_whatif = 0
        for rows in lists[mode]:
            got = []
            for r in rows:
                z = realised.get((r["model"], r["key"]), {"error": "not measured"})
                if "error" in z:
                    print(f"| {r['model']} | {r['rank']} | {r['rule']} | {100*r['gain']:.1f}% "
                          f"[{100*r['lo']:.1f}, {100*r['hi']:.1f}] | error: {z['error'][:80]} | - "
                          f"| {r['race']} |")
                    continue
                ok = r["lo"] <= z["gain"] <= r["hi"]
                inside += ok
                total += 1
                races += bool(r["race"])
                got.append((r, z))
                print(f"| {r['model']} | {r['rank']} | {r['rule']} | {100*r['gain']:.1f}% "
                      f"[{100*r['lo']:.1f}, {100*r['hi']:.1f}] | {100*z['gain']:.1f}% "
                      f"[{100*z['ci'][0]:.1f}, {100*z['ci'][1]:.1f}]"
                      f"{' cross-run' if z['cross_run'] else ''} | {'yes' if ok else 'no'} "
                      f"| {r['race']} |")
            if got:
                models += 1
                best = max(got, key=lambda t: t[1]["gain"])
                top = got[0]
                tops += top[1]["gain"] >= best[1]["gain"]
                tops_noise += top[1]["gain"] >= best[1]["ci"][0]
                # the ranking by the predicted gains alone (for the measured
                # list: the what-ifs without the race), on the same realised
                # figures
                first = max(got, key=lambda t: t[0]["gain"])
                tops_whatif += first[1]["gain"] >= best[1]["gain"]
        summary[mode] = (inside, total, tops, tops_noise, models)
        print()
        if total:
            print(f"{mode}: {inside} of {total} realised gains inside the predicted interval "
                  f"({100*inside/total:.0f}%); top finding realises the most on {tops} of "
                  f"{models} models ({100*tops/max(models,1):.0f}%), within noise on "
                  f"{tops_noise} of {models}; {races} raced; ranked by the predicted gains "
                  f"alone, the top realises the most on {tops_whatif} of {models}\n")
    ok = True
    inside, total, tops, tops_noise, models = summary.get("measured", (0, 0, 0, 0, 0))
    if not total or inside / total < 0.8 or tops / max(models, 1) < 0.9:
        ok = False
    print(f"goals (measured list: >= 80% inside, >= 90% top realises most): "
          f"{'met' if ok else 'MISSED'}")
    print(f"\nwork folder: {wd}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
