#!/usr/bin/env python3
"""Regret of `cannprof tune` against an exhaustive reference grid (issue 14):
within 12 latency evaluations the tuner should land within 3% of the grid's
best point (median over 5 runs, worst <= 5%), with no constraint violated,
on a quiet machine and with background load; random search and coordinate
descent get the same budget for comparison.

Models and constraints (--models "NAME[:BOUND] ..."; BOUND is the
precision_loss bound in %):
  - examples/models/sd_unet_tiny.onnx, precision_loss<0.5% (whole-model bf16
    loses ~0.69% there, so the answer is a per-node mix);
  - examples/models/transformer_encoder_op17.onnx. The issue's bound, 1%, is
    met trivially there (whole-model bf16 loses ~0.09%, so the grid's best
    would just be whole-model bf16), so the default bound is
    precision_loss<0.05%: whole-model bf16 breaks it and 10 of the 32
    precision subsets of the grid fit (group losses measured from 0.007% to
    0.06% alone). The bound used and the whole-model loss are printed.

1. Groups. MODEL is converted with --precision_mode=allow_mix_precision_bf16
   and run once with a trace (`cannprof bench X.om -n 5 --no-probe --trace
   t.db`); the kernels of the last run (`SELECT idx, node, op_type, origins
   FROM kernels WHERE run_id=(SELECT max(id) FROM runs) ORDER BY idx`) whose
   op_type is Conv, FusedConv, MatMul, FusedMatMul, Gemm or FusedAttention are
   the bf16-capable nodes. They are split, in execution order (idx), into
   G=5 contiguous groups of as equal sizes as possible. A group's keep list
   is the union of the ONNX names in its nodes' origins (all of them, not
   only origins[0]: with FlashAttentionFusionPass off a FusedAttention
   becomes MatMul/Softmax/MatMul nodes whose origins are its later origins,
   and listing all names keeps those in their group too). This is checked:
   the same conversion with FlashAttentionFusionPass off is traced and every
   node computing in bf16 (its output's "compute" is "bf16") must map to
   exactly one group; a failure is printed.

2. Grid. Points = every subset S of the groups computing in bf16 (32:
   S empty is --precision_mode=force_fp32, S all is
   allow_mix_precision_bf16 alone, otherwise allow_mix_precision_bf16 with
   --keep_dtype listing the groups not in S) x --layout_policy {auto,
   blocked, nhwc, nchw} x fusion {default (every pass on),
   FlashAttentionFusionPass:off} = 256 points. Each point is converted, its
   precision_loss measured (`cannprof compare MODEL.onnx P.om --json`,
   seeded inputs, seed 0, as the tuner's precision checks), and it is timed
   interleaved against ONE anchor, the default conversion (`cannprof
   convert --model=MODEL --framework=5 --output=ANCHOR`): `cannprof bench
   ANCHOR.om --vs P.om -n GRID_ROUNDS --json` (default 40 rounds, all cores);
   ratio = after/before of that run's medians (on its undisturbed rounds),
   with its 95% CI. The points are timed in a seeded random order (--seed),
   so that drift of the machine does not line up with a knob. A point is
   feasible when its precision_loss is below the bound. On a shared machine
   40 rounds are often disturbed (a first run gave ratios of 0.40 for
   points that measure 0.90 with 150 rounds), so two steps were added to
   the plain "re-measure the 10 best": (a) every feasible point whose
   first measurement hit bench's time limit or whose 95% CI is wider than
   10% of its ratio is timed once more with GRID_ROUNDS, and the
   measurement with the narrower CI is kept; (b) the 10 feasible points
   with the lowest best-known ratio (re-measured if they have been, else
   the grid's) are re-measured with CONFIRM_ROUNDS (default 150), one at a
   time, until the 10 lowest all have a re-measurement (at most 30), so a
   point that was merely lucky in the grid drops out and the next one is
   re-measured. The grid's best is the lowest re-measured ratio among the
   feasible points. Everything is cached in WORK/MODEL/grid.json (keyed by
   the binary's sha256 and the round counts), so a rerun with --keep reuses
   what was measured. On the transformer the layout knob has no conv region
   to act on, so its 4 layouts are 4 conversions of the same graph: those
   points are kept in the grid (they are what the tuner's space offers too)
   and their spread shows the grid's measurement noise.

3. Tuner. For each condition (--hogs "0 2": quiet, and 2 hogs: one `dd
   if=/dev/zero of=/dev/null bs=64M` loop and one busy shell loop, as in
   bench/validate_calibration.sh, running during the tune only) and each of
   --reps runs (default 5; conditions alternate within a rep): `cannprof
   tune MODEL --target latency --constraints "precision_loss<BOUND%"
   --budget 12 --kb FRESH.sqlite --out DIR --json --quiet` in a fresh folder
   with a fresh knowledge base. Then, quiet (hogs stopped, 2 s pause), the
   tuner's DIR/best.om and the grid's best are each measured against the
   anchor with CONFIRM_ROUNDS interleaved rounds, one right after the other
   (which of the two goes first alternates by run), and "regret via
   anchor" = ratio_tuner / ratio_gridbest - 1, as the issue's method asks.
   That did not hold up: two processes a few seconds apart still saw
   different machine states on this shared machine (one run gave the grid
   best 0.967 x the anchor right after measurements of 0.90, which turned a
   real +10.8% into +3.3%). So the tuner's best is then also measured
   directly against the grid's best, interleaved in one process: `cannprof
   bench GRIDBEST.om --vs DIR/best.om -n CONFIRM_ROUNDS --json`, and
   regret = its after/before - 1; this is the figure the bar is judged on,
   and both are printed. Negative regret means the tuner beat the grid
   (its per-node plan is finer than 5 groups). From report.json:
   latency_evaluations (the interleaved A/B against the best; bar <= 12).
   The constraint is checked apart from the tuner: `cannprof compare MODEL.onnx DIR/best.om --json` must give a loss
   below the bound. If the tuner's best chose another thread count than all
   cores (bench --vs runs both sides on one thread count), the tuner's best
   (on its threads) and the grid's best (all cores) are benched in separate
   runs instead, in the order T G G T (G T T G on even runs), CONFIRM_ROUNDS
   undisturbed iterations each, and regret = t_tuner / t_gridbest - 1 from
   the means of each side's two undisturbed medians (marked "cross-run").

4. Baselines, SIMULATED on the grid's measured table (no new measurement):
   each grid point's ratio is its re-measured ratio when it has one, else
   its (narrower-CI) GRID_ROUNDS ratio; feasibility comes from its measured
   precision_loss and is free (the tuner's precision checks do not count as
   latency evaluations either). Random search: 12 distinct feasible points
   other than the default, drawn at random; the result is the lowest ratio
   among them and the default. Coordinate descent: from the default point
   (force_fp32, auto, every pass on), over the coordinates (each group's
   precision, layout, fusion) in a random order, repeated in cycles: for a
   coordinate, each feasible not yet evaluated alternative value (in random
   order) costs one evaluation; it moves to the best of them when that is
   more than 2% better than the current point (ratio < 0.98 x current, the
   tuner's acceptance threshold), and stops when 12 evaluations are spent or
   a cycle evaluates nothing new. Each is repeated 200 times with different
   seeds; regret = ratio_result / ratio_gridbest - 1, reported as median
   and worst. A simulated method picks by the same table values it is
   scored by, so no measurement noise can mislead it the way it can
   mislead a real run: this favours the two baselines.

5. Output (Markdown on stdout): the machine load (uptime) before and after;
   per model the groups, the grid summary (points, feasible points, the
   anchor measured against itself, the 10 re-measured points, the best
   point with its ratio and CI), the per-run table of the tuner and a table
   method x median regret, worst regret (and, for the tuner, the regret via
   anchor), latency evaluations (median, max), constraint violations; then the bar per model and tuner condition:
   median regret <= 3%, worst <= 5%, at most 12 latency evaluations, no
   constraint violated: met or MISSED.

Usage: bench/tune_regret.sh [--models "M[:BOUND] ..."] [--reps K]
           [--grid-rounds N] [--confirm-rounds N] [--hogs "0 2"] [--seed S]
           [--keep DIR] [--priority high] [--grid-binary PATH]
--grid-binary PATH reuses the grid another binary measured into --keep DIR
(for a change that touches neither the converter nor the runtime); the
tuner runs are measured again.
--priority high passes `--priority high` to every bench and tune run (the
measurements at nice -20; the hogs stay at their own priority).
Exit 1 when a bar is missed or a step fails (the tables are printed anyway),
2 on bad usage.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS_DIR = os.path.join(ROOT, "examples", "models")
DEFAULT_MODELS = "sd_unet_tiny:0.5 transformer_encoder_op17:0.05"
STATED_BOUNDS = {"sd_unet_tiny": 0.5, "transformer_encoder_op17": 1.0}  # the figures
BF16_TYPES = ("Conv", "FusedConv", "MatMul", "FusedMatMul", "Gemm", "FusedAttention")
GROUPS = 5
LAYOUTS = ("auto", "blocked", "nhwc", "nchw")
FUSIONS = {"default": None, "noflash": "FlashAttentionFusionPass:off"}
BUDGET = 12
# `--priority high` for every bench and tune run (set by --priority)
PRIORITY = []
BAR_MEDIAN = 3.0   # % regret, median over runs
BAR_WORST = 5.0    # % regret, worst run
TOP_CONFIRM = 10
MAX_CONFIRM = 30   # re-measurements per model, at most
RETRY_CI = 0.10    # a grid measurement whose CI is wider than this share of its ratio is retried
SIM_REPS = 200
MOVE = 0.02        # coordinate descent moves when better by more than this
CACHE_VERSION = 1
T0 = time.monotonic()


class Failure(Exception):
    """A cannprof command that failed, or an output that cannot be read."""


def log(msg):
    print(f"[tune_regret {time.monotonic() - T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def run(cmd, ok=(0,), cwd=None):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode not in ok:
        tail = "\n".join(p.stderr.strip().splitlines()[-6:])
        raise Failure(f"`{' '.join(cmd)}` exited {p.returncode}: {tail}")
    return p


def load():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        with open("/proc/loadavg") as f:
            return "loadavg " + f.read().strip()


def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    print()


def pct(v, digits=1):
    return "-" if v is None else f"{v:+.{digits}f}%"


def fnum(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def fmt_loss(v):
    if v is None:
        return "-"
    if v == float("inf"):
        return "inf"
    return f"{v:.4f}%"


def save_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# ---- background load --------------------------------------------------------------------------

class Hogs:
    """N background processes, each in its own process group (killed by that id)."""
    live = []

    def __init__(self, n):
        self.procs = []
        for i in range(n):
            body = ("while :; do dd if=/dev/zero of=/dev/null bs=64M count=64 status=none; done"
                    if i % 2 == 0 else "while :; do :; done")
            p = subprocess.Popen(["bash", "-c", body], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            Hogs.live.append(p)

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            if p in Hogs.live:
                Hogs.live.remove(p)
        self.procs = []

    @classmethod
    def stop_all(cls):
        for p in list(cls.live):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        cls.live = []


def on_signal(signum, _frame):
    Hogs.stop_all()
    raise SystemExit(128 + signum)


# ---- measurements -----------------------------------------------------------------------------

def ab(cli, a, b, n):
    """`bench A --vs B` interleaved: B's median over A's (undisturbed rounds) and its CI."""
    d = json.loads(run([cli, "bench", a, "--vs", b, "-n", str(n), "--json"] + PRIORITY).stdout)
    c = d.get("comparison") or {}
    if c.get("unit") != "ms" or not c.get("before") or c.get("after") is None:
        raise Failure("bench --vs --json has no comparison in ms: " + json.dumps(d)[:300])
    ci = c.get("ci_pct") or [None, None]
    return {"before": c["before"], "after": c["after"], "ratio": c["after"] / c["before"],
            "ci": [None if x is None else 1 + x / 100 for x in ci],
            "n": c.get("n_after"), "rounds": d.get("rounds"),
            "time_limit_hit": bool(d.get("time_limit_hit")), "seconds": d.get("elapsed_s")}


def bench_one(cli, om, n, threads=None):
    cmd = [cli, "bench", om, "-n", str(n), "--json"] + PRIORITY
    if threads:
        cmd += ["--threads", str(threads)]
    d = json.loads(run(cmd).stdout)
    und = (d.get("probe") or {}).get("latency_ms") or {}
    return und.get("median") or d["latency_ms"]["median"]


def precision_loss(cli, model, om):
    # compare exits 1 when outputs are beyond its tolerance, as bf16 ones are
    v = json.loads(run([cli, "compare", model, om, "--json"], ok=(0, 1)).stdout).get(
        "precision_loss_pct")
    return float("inf") if v is None else v


def kernels(cli, om, db):
    if os.path.exists(db):
        os.remove(db)
    run([cli, "bench", om, "-n", "5", "--no-probe", "--trace", db])
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT idx, node, op_type, origins, outputs FROM kernels WHERE "
                           "run_id=(SELECT max(id) FROM runs) ORDER BY idx").fetchall()
    finally:
        con.close()
    out = []
    for idx, node, op, origins, outputs in rows:
        outs = json.loads(outputs or "[]")
        out.append({"idx": idx, "node": node, "op_type": op, "origins": json.loads(origins or "[]"),
                    "bf16": any(o.get("compute") == "bf16" for o in outs)})
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---- one model: groups, points ----------------------------------------------------------------

class Model:
    def __init__(self, cli, wd, name, bound):
        self.cli = cli
        self.name = name
        self.bound = bound
        self.path = os.path.join(MODELS_DIR, name + ".onnx")
        self.wd = os.path.join(wd, name)
        os.makedirs(os.path.join(self.wd, "points"), exist_ok=True)
        self.groups = []       # [{"nodes": [...], "names": [...]}]
        self.check = []        # problems of the group mapping
        self.anchor = None

    def convert(self, out, flags=()):
        run([self.cli, "convert", f"--model={self.path}", "--framework=5", f"--output={out}"]
            + list(flags))
        return out + ".om"

    def find_groups(self):
        bf = self.convert(os.path.join(self.wd, "bf16"),
                          ["--precision_mode=allow_mix_precision_bf16"])
        ks = kernels(self.cli, bf, os.path.join(self.wd, "bf16.db"))
        nodes = [k for k in ks if k["op_type"] in BF16_TYPES]
        if len(nodes) < GROUPS:
            raise Failure(f"{self.name}: {len(nodes)} bf16-capable nodes, fewer than {GROUPS}")
        q, r = divmod(len(nodes), GROUPS)
        i = 0
        for g in range(GROUPS):
            size = q + (1 if g < r else 0)
            part = nodes[i:i + size]
            i += size
            names = []
            for k in part:
                for o in k["origins"]:
                    if o not in names:
                        names.append(o)
            self.groups.append({"nodes": part, "names": names})
        owner = {}
        for g, grp in enumerate(self.groups):
            for nm in grp["names"]:
                if nm in owner and owner[nm] != g:
                    self.check.append(f"ONNX node {nm} is an origin in groups {owner[nm] + 1} and "
                                      f"{g + 1}")
                owner[nm] = g
        # every node computing in bf16, with every fusion pass on and with the
        # switch of the grid off, must belong to exactly one group
        self.bf16_whole = {}
        for fus, line in FUSIONS.items():
            flags = ["--precision_mode=allow_mix_precision_bf16"]
            if line:
                flags.append(f"--fusion_switch_file={self.switch_file(fus)}")
            om = self.convert(os.path.join(self.wd, f"bf16-{fus}"), flags)
            n_bf16 = 0
            for k in kernels(self.cli, om, os.path.join(self.wd, f"bf16-{fus}.db")):
                if not k["bf16"]:
                    continue
                n_bf16 += 1
                gs = {owner[o] for o in k["origins"] if o in owner}
                if len(gs) != 1:
                    self.check.append(f"fusion {fus}: bf16 node {k['node']} ({k['op_type']}) is in "
                                      f"{len(gs)} groups")
            self.bf16_whole[fus] = n_bf16

    def switch_file(self, fusion):
        line = FUSIONS[fusion]
        if not line:
            return None
        path = os.path.join(self.wd, fusion + ".switches")
        with open(path, "w") as f:
            f.write(line + "\n")
        return path

    def keys(self):
        out = []
        for mask in range(1 << GROUPS):
            for lay in LAYOUTS:
                for fus in FUSIONS:
                    out.append(self.key(mask, lay, fus))
        return out

    @staticmethod
    def key(mask, layout, fusion):
        bits = "".join("1" if mask >> g & 1 else "0" for g in range(GROUPS))
        return f"{bits}-{layout}-{fusion}"

    @staticmethod
    def parse(key):
        bits, layout, fusion = key.split("-")
        return sum(1 << g for g, c in enumerate(bits) if c == "1"), layout, fusion

    def default_key(self):
        return self.key(0, "auto", "default")

    def describe(self, key):
        mask, layout, fusion = self.parse(key)
        if mask == 0:
            prec = "fp32"
        elif mask == (1 << GROUPS) - 1:
            prec = "all bf16"
        else:
            prec = "bf16 groups " + ",".join(str(g + 1) for g in range(GROUPS) if mask >> g & 1)
        fus = "all passes" if fusion == "default" else FUSIONS[fusion]
        return f"{prec}; {layout}; {fus}"

    def flags(self, key):
        mask, layout, fusion = self.parse(key)
        full = (1 << GROUPS) - 1
        fl = []
        if mask == 0:
            fl.append("--precision_mode=force_fp32")
        else:
            fl.append("--precision_mode=allow_mix_precision_bf16")
            if mask != full:
                kept = []
                for g in range(GROUPS):
                    if not mask >> g & 1:
                        kept += self.groups[g]["names"]
                path = os.path.join(self.wd, "keep-" + key.split("-")[0] + ".txt")
                with open(path, "w") as f:
                    f.write("\n".join(kept) + "\n")
                fl.append(f"--keep_dtype={path}")
        fl.append(f"--layout_policy={layout}")
        sw = self.switch_file(fusion)
        if sw:
            fl.append(f"--fusion_switch_file={sw}")
        return fl

    def om(self, key):
        path = os.path.join(self.wd, "points", key + ".om")
        if not os.path.exists(path):
            self.convert(path[:-3], self.flags(key))
        return path


# ---- the grid ---------------------------------------------------------------------------------

# the sha256 of --grid-binary, whose grid cache is reused; None: the --cli binary's
GRID_SHA = None


def grid_phase(args, m, cli_sha):
    path = os.path.join(m.wd, "grid.json")
    cache = {}
    if os.path.exists(path):
        with open(path) as f:
            cache = json.load(f)
    ident = {"version": CACHE_VERSION, "cli_sha256": cli_sha, "groups":
             [g["names"] for g in m.groups], "fusions": FUSIONS, "priority": PRIORITY}
    if cache.get("ident") != ident:
        if cache:
            log(f"{m.name}: grid cache is for another binary or grouping: measuring again")
        cache = {"ident": ident, "loss": {}, "grid": {}, "confirm": {}}
    gk = str(args.grid_rounds)
    ck = str(args.confirm_rounds)
    cache["grid"].setdefault(gk, {})
    cache["confirm"].setdefault(ck, {})
    keys = m.keys()
    t = time.monotonic()
    todo = [k for k in keys if k not in cache["loss"]]
    if todo:
        log(f"{m.name}: converting and checking precision of {len(todo)} points ...")
    for i, k in enumerate(todo):
        cache["loss"][k] = precision_loss(m.cli, m.path, m.om(k))
        if i % 16 == 15:
            save_json(path, cache)
    save_json(path, cache)
    order = list(keys)
    random.Random(args.seed).shuffle(order)
    grid = cache["grid"][gk]
    todo = [k for k in order if k not in grid]
    if todo:
        log(f"{m.name}: timing {len(todo)} of {len(keys)} points against the anchor, "
            f"{args.grid_rounds} rounds each ...")
    for i, k in enumerate(todo):
        grid[k] = ab(m.cli, m.anchor, m.om(k), args.grid_rounds)
        save_json(path, cache)  # after every point: a stopped run loses nothing
        if i % 16 == 15 or i == len(todo) - 1:
            log(f"{m.name}: {i + 1}/{len(todo)} points timed")
    feas = [k for k in keys if cache["loss"][k] < m.bound]
    if not feas:
        raise Failure(f"{m.name}: no grid point within precision_loss<{m.bound:g}%")
    # a disturbed first measurement of a feasible point is taken once more
    retry = cache.setdefault("retry", {}).setdefault(gk, {})
    fs = set(feas)
    todo = [k for k in order if k in fs and unreliable(grid[k]) and k not in retry]
    if todo:
        log(f"{m.name}: timing {len(todo)} feasible points again (time limit hit or CI wider "
            f"than {RETRY_CI:.0%}), {args.grid_rounds} rounds each ...")
    for k in todo:
        retry[k] = ab(m.cli, m.anchor, m.om(k), args.grid_rounds)
        save_json(path, cache)
    table_ = {k: min([grid[k]] + ([retry[k]] if k in retry else []), key=rel_width)
              for k in keys}
    # the 10 best feasible points by their best-known ratio, re-measured until
    # those 10 all have a re-measurement (a lucky first measurement drops out)
    conf = cache["confirm"][ck]
    n_new = 0
    while True:
        settled = {k: (conf[k]["ratio"] if k in conf else table_[k]["ratio"]) for k in keys}
        top = sorted(feas, key=settled.get)[:TOP_CONFIRM]
        todo = [k for k in top if k not in conf]
        if not todo or sum(1 for k in conf if k in fs) >= MAX_CONFIRM:
            break
        if n_new == 0:
            log(f"{m.name}: re-measuring the best feasible points, {args.confirm_rounds} "
                f"rounds each ...")
        conf[todo[0]] = ab(m.cli, m.anchor, m.om(todo[0]), args.confirm_rounds)
        n_new += 1
        save_json(path, cache)
    secs = time.monotonic() - t
    confirmed = [k for k in conf if k in fs]
    best = min(confirmed, key=lambda k: conf[k]["ratio"])
    return {"keys": keys, "loss": cache["loss"], "grid": table_, "first": grid, "confirm": conf,
            "confirmed": confirmed, "top": top, "retried": sorted(retry), "feasible": feas,
            "best": best, "settled": settled, "seconds": secs}


def rel_width(v):
    lo, hi = v.get("ci") or (None, None)
    if lo is None or hi is None or not v["ratio"]:
        return float("inf")
    return (hi - lo) / v["ratio"]


def unreliable(v):
    return v["time_limit_hit"] or rel_width(v) > RETRY_CI


# ---- simulated baselines ----------------------------------------------------------------------

def sim_random(m, g, rng):
    default = m.default_key()
    pool = [k for k in g["feasible"] if k != default]
    pick = rng.sample(pool, min(BUDGET, len(pool)))
    r = g["settled"]
    best = min(pick + [default], key=lambda k: r[k])
    return best, len(pick)


def sim_coord(m, g, rng):
    r = g["settled"]
    feas = set(g["feasible"])
    cur = m.default_key()
    seen = {cur}
    spent = 0
    coords = [("group", i) for i in range(GROUPS)] + [("layout", None), ("fusion", None)]
    rng.shuffle(coords)
    while spent < BUDGET:
        evaluated = 0
        for kind, gi in coords:
            if spent >= BUDGET:
                break
            mask, lay, fus = m.parse(cur)
            if kind == "group":
                alts = [m.key(mask ^ (1 << gi), lay, fus)]
            elif kind == "layout":
                alts = [m.key(mask, x, fus) for x in LAYOUTS if x != lay]
            else:
                alts = [m.key(mask, lay, x) for x in FUSIONS if x != fus]
            alts = [k for k in alts if k in feas and k not in seen]
            rng.shuffle(alts)
            best = None
            for k in alts:
                if spent >= BUDGET:
                    break
                seen.add(k)
                spent += 1
                evaluated += 1
                if best is None or r[k] < r[best]:
                    best = k
            if best is not None and r[best] < r[cur] * (1 - MOVE):
                cur = best
        if evaluated == 0:
            break
    return cur, spent


def simulate(m, g, fn, seed):
    regrets, evals = [], []
    rb = g["settled"][g["best"]]
    for i in range(SIM_REPS):
        k, n = fn(m, g, random.Random(seed * 100003 + i))
        regrets.append((g["settled"][k] / rb - 1) * 100)
        evals.append(n)
    return regrets, evals


# ---- the tuner --------------------------------------------------------------------------------

def tune_run(args, m, g, hogs, rep, cores):
    tag = f"h{hogs}-r{rep}"
    out = os.path.join(m.wd, "tune-" + tag)
    kb = os.path.join(m.wd, "kb-" + tag + ".sqlite")
    shutil.rmtree(out, ignore_errors=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(kb + suffix):
            os.remove(kb + suffix)
    cons = f"precision_loss<{m.bound:g}%"
    cmd = [m.cli, "tune", m.path, "--target", "latency", "--constraints", cons,
           "--budget", str(BUDGET), "--kb", kb, "--out", out, "--json", "--quiet"] + PRIORITY
    log(f"{m.name}: tune run {rep}, {hogs} hogs ...")
    h = Hogs(hogs)
    t = time.monotonic()
    try:
        time.sleep(1 if hogs else 0)
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=m.wd)
    finally:
        h.stop()
    secs = time.monotonic() - t
    with open(os.path.join(m.wd, "tune-" + tag + ".stderr"), "w") as f:
        f.write(p.stderr)
    if p.returncode != 0:
        raise Failure(f"`cannprof tune` exited {p.returncode}: "
                      + "\n".join(p.stderr.strip().splitlines()[-6:]))
    with open(os.path.join(out, "report.json")) as f:
        rep_json = json.load(f)
    best = os.path.join(out, "best.om")
    if not os.path.exists(best):
        raise Failure(f"no {best}")
    time.sleep(2)
    res = {"hogs": hogs, "rep": rep, "tune_seconds": secs,
           "latency_evaluations": rep_json.get("latency_evaluations"),
           "evaluations": rep_json.get("evaluations"),
           "precision_checks": rep_json.get("precision_checks"),
           "stop_reason": rep_json.get("stop_reason"),
           "loss_tuner": (rep_json.get("best") or {}).get("precision_loss_pct"),
           "accepted": [s.get("delta", "") for s in rep_json.get("steps", [])
                        if s.get("status") == "accepted"]}
    res["loss"] = precision_loss(m.cli, m.path, best)
    threads = (((rep_json.get("best") or {}).get("point") or {}).get("threads")) or 0
    res["threads"] = threads
    grid_om = m.om(g["best"])
    if threads and threads != cores:
        log(f"{m.name}: the tuner's best runs on {threads} threads: separate runs")
        tt, tg = [], []
        for who in ("tggt" if rep % 2 == 1 else "gttg"):
            if who == "t":
                tt.append(bench_one(m.cli, best, args.confirm_rounds, threads))
            else:
                tg.append(bench_one(m.cli, grid_om, args.confirm_rounds))
        res.update({"mode": "cross-run", "ratio_tuner": None, "ratio_grid": None,
                    "regret": (statistics.mean(tt) / statistics.mean(tg) - 1) * 100})
        return res
    log(f"{m.name}: anchor --vs tuner best, anchor --vs grid best, grid best --vs tuner best, "
        f"{args.confirm_rounds} rounds each ...")
    if rep % 2 == 1:
        at = ab(m.cli, m.anchor, best, args.confirm_rounds)
        ag = ab(m.cli, m.anchor, grid_om, args.confirm_rounds)
    else:
        ag = ab(m.cli, m.anchor, grid_om, args.confirm_rounds)
        at = ab(m.cli, m.anchor, best, args.confirm_rounds)
    direct = ab(m.cli, grid_om, best, args.confirm_rounds)
    res.update({"mode": "interleaved", "ratio_tuner": at, "ratio_grid": ag, "direct": direct,
                "regret_anchor": (at["ratio"] / ag["ratio"] - 1) * 100,
                "regret": (direct["ratio"] - 1) * 100})
    return res


def short_delta(d):
    parts = []
    for tok in d.split():
        if tok.startswith("keep_dtype="):
            tok = "keep_dtype=" + os.path.basename(tok.split("=", 1)[1])
        elif tok.startswith("fusion_switch_file="):
            tok = "fusion_switch_file=" + os.path.basename(tok.split("=", 1)[1])
        parts.append(tok)
    return " ".join(parts)


def ci_str(c):
    lo, hi = c.get("ci") or (None, None)
    if lo is None or hi is None:
        return "-"
    return f"[{lo:.3f}, {hi:.3f}]"


def cond_name(h):
    return "quiet" if h == 0 else f"{h} hogs"


# ---- one model, end to end --------------------------------------------------------------------

def do_model(args, wd, name, bound, cli_sha, cores, bars, errors):
    m = Model(args.cli, wd, name, bound)
    print(f"\n## {name} (precision_loss<{bound:g}%)\n")
    stated = STATED_BOUNDS.get(name)
    m.anchor = m.convert(os.path.join(m.wd, "anchor"))
    log(f"{name}: groups ...")
    m.find_groups()
    whole = precision_loss(m.cli, m.path, os.path.join(m.wd, "bf16.om"))
    fp32 = precision_loss(m.cli, m.path, m.anchor)
    note = ""
    if stated is not None and abs(stated - bound) > 1e-12:
        note = (f" The issue's bound for this model, precision_loss<{stated:g}%, is "
                + ("met trivially by whole-model bf16" if whole < stated else "not used")
                + f"; the bound used here is precision_loss<{bound:g}%.")
    print(f"Anchor: the default conversion (force_fp32, layout auto, every pass on), "
          f"precision_loss {fmt_loss(fp32)}. Whole-model bf16 (allow_mix_precision_bf16): "
          f"precision_loss {fmt_loss(whole)}.{note}\n")
    rows = []
    for gi, grp in enumerate(m.groups):
        ns = grp["nodes"]
        rows.append([gi + 1, len(ns), f"{ns[0]['idx']}..{ns[-1]['idx']}",
                     f"`{ns[0]['node']}` .. `{ns[-1]['node']}`", len(grp["names"])])
    print(f"bf16-capable nodes: {sum(len(g['nodes']) for g in m.groups)}, split in execution "
          f"order into {GROUPS} groups; nodes computing in bf16 in whole-model bf16: "
          + ", ".join(f"{v} with fusion {k}" for k, v in m.bf16_whole.items()) + ".\n")
    table(["group", "nodes", "idx", "first .. last node", "ONNX names kept when in fp32"], rows)
    if m.check:
        for c in m.check:
            print(f"- group mapping problem: {c}")
        print()
        errors.append(f"{name}: group mapping: {len(m.check)} problems")
    sys.stdout.flush()

    g = grid_phase(args, m, GRID_SHA or cli_sha)
    grid, conf, loss = g["grid"], g["confirm"], g["loss"]
    dk = m.default_key()
    n_lim = sum(1 for k in g["keys"] if grid[k]["time_limit_hit"])
    n_subsets_ok = len({k.split("-")[0] for k in g["feasible"]})
    print(f"### Grid: {len(g['keys'])} points, {len(g['feasible'])} feasible "
          f"({n_subsets_ok} of {1 << GROUPS} precision subsets under at least one "
          f"layout/fusion)\n")
    n_lim1 = sum(1 for k in g["keys"] if g["first"][k]["time_limit_hit"])
    print(f"Each point against the anchor, interleaved, {args.grid_rounds} rounds "
          f"(`bench ANCHOR --vs P -n {args.grid_rounds}`), in a seeded random order: "
          f"{n_lim1} of {len(g['keys'])} first measurements hit bench's time limit; "
          f"{len(g['retried'])} feasible points whose first measurement hit it or had a CI "
          f"wider than {RETRY_CI:.0%} of the ratio were timed again, the narrower CI kept "
          f"({n_lim} time-limited measurements left in the table). "
          f"{len(g['confirmed'])} feasible points re-measured with {args.confirm_rounds} rounds "
          f"(the {TOP_CONFIRM} best by their best-known ratio, until all {TOP_CONFIRM} had "
          f"one). Grid time (this run, cached measurements excluded): {g['seconds']:.0f} s.\n")
    dflt = grid[dk]
    ratios = sorted(grid[k]["ratio"] for k in g["keys"])
    fr = sorted(grid[k]["ratio"] for k in g["feasible"])
    print(f"- default point (= the anchor) measured against the anchor: ratio "
          f"{dflt['ratio']:.3f} {ci_str(dflt)} (A/A; by definition 1.0)")
    print(f"- ratios over all points: min {ratios[0]:.3f}, median "
          f"{statistics.median(ratios):.3f}, max {ratios[-1]:.3f}; over feasible points: "
          f"min {fr[0]:.3f}, median {statistics.median(fr):.3f}")
    fp_best = min((k for k in g["keys"] if k.startswith("0" * GROUPS)),
                  key=lambda k: grid[k]["ratio"])
    allbf = [k for k in g["keys"] if k.startswith("1" * GROUPS)]
    ab_best = min(allbf, key=lambda k: grid[k]["ratio"])
    print(f"- best fp32 point: {m.describe(fp_best)}, ratio {grid[fp_best]['ratio']:.3f}; best "
          f"whole-model bf16 point: {m.describe(ab_best)}, ratio {grid[ab_best]['ratio']:.3f}, "
          f"precision_loss {fmt_loss(loss[ab_best])} "
          f"({'feasible' if loss[ab_best] < bound else 'infeasible'})")
    gb = g["best"]
    print(f"- **grid best: {m.describe(gb)} (`{gb}`), ratio {conf[gb]['ratio']:.3f} "
          f"{ci_str(conf[gb])}, precision_loss {fmt_loss(loss[gb])}**\n")
    rows = []
    for k in sorted(g["confirmed"], key=lambda k: conf[k]["ratio"])[:TOP_CONFIRM]:
        rows.append([m.describe(k), fmt_loss(loss[k]), f"{grid[k]['ratio']:.3f} {ci_str(grid[k])}",
                     f"{conf[k]['ratio']:.3f} {ci_str(conf[k])}", conf[k]["n"],
                     "yes" if conf[k]["time_limit_hit"] else ""])
    table(["point (groups in bf16; layout; fusion)", "precision_loss",
           f"ratio, {args.grid_rounds} rounds [95% CI]",
           f"ratio, {args.confirm_rounds} rounds [95% CI]", "undisturbed rounds",
           "time limit"], rows)
    sys.stdout.flush()

    # simulated baselines
    sims = {}
    for label, fn in (("random search (simulated)", sim_random),
                      ("coordinate descent (simulated)", sim_coord)):
        sims[label] = simulate(m, g, fn, args.seed)

    # tuner runs
    rpath = os.path.join(m.wd, "runs.json")
    rcache = {}
    if os.path.exists(rpath):
        with open(rpath) as f:
            rcache = json.load(f)
    rid = {"version": CACHE_VERSION, "runs_method": 2, "cli_sha256": cli_sha, "bound": bound,
           "grid_best": gb, "confirm_rounds": args.confirm_rounds, "priority": PRIORITY}
    if rcache.get("ident") != rid:
        rcache = {"ident": rid, "runs": {}}
    runs = []
    for rep in range(1, args.reps + 1):
        order = args.hogs if rep % 2 == 1 else list(reversed(args.hogs))
        for h in order:
            tag = f"h{h}-r{rep}"
            if tag in rcache["runs"]:
                runs.append(rcache["runs"][tag])
                continue
            try:
                r = tune_run(args, m, g, h, rep, cores)
            except (Failure, ValueError, KeyError, OSError) as e:
                errors.append(f"{name}, {cond_name(h)}, run {rep}: {e}")
                print(f"\n**{name}, {cond_name(h)}, run {rep} failed:** {e}\n")
                continue
            rcache["runs"][tag] = r
            save_json(rpath, rcache)
            runs.append(r)
    runs.sort(key=lambda r: (r["hogs"], r["rep"]))
    print("### Tuner runs\n")
    print(f"`cannprof tune MODEL --target latency --constraints \"precision_loss<{bound:g}%\" "
          f"--budget {BUDGET} --kb FRESH --out DIR --json --quiet`; then, quiet, "
          f"`bench ANCHOR --vs DIR/best.om` and `bench ANCHOR --vs GRIDBEST` back to back "
          f"(regret via anchor = the ratio of the two), then `bench GRIDBEST --vs DIR/best.om` "
          f"(regret = its ratio - 1), {args.confirm_rounds} rounds each.\n")
    rows = []
    for r in runs:
        rt, rg, dr = r.get("ratio_tuner"), r.get("ratio_grid"), r.get("direct")
        rows.append([cond_name(r["hogs"]), r["rep"], f"{r['tune_seconds']:.0f}",
                     r["latency_evaluations"], r["evaluations"], r["precision_checks"],
                     fmt_loss(r["loss"]), "yes" if r["loss"] < bound else "**NO**",
                     "-" if not rt else f"{rt['ratio']:.3f} {ci_str(rt)}",
                     "-" if not rg else f"{rg['ratio']:.3f} {ci_str(rg)}",
                     pct(r.get("regret_anchor")),
                     "-" if not dr else f"{dr['ratio']:.3f} {ci_str(dr)}",
                     pct(r["regret"]) + (" (cross-run)" if r["mode"] != "interleaved" else ""),
                     "; ".join("`" + short_delta(d) + "`" for d in r["accepted"]) or "(none)"])
    table(["condition", "run", "tune s", "latency evals", "evaluations", "precision checks",
           "precision_loss (compare)", "within bound", "tuner best / anchor [95% CI]",
           "grid best / anchor [95% CI]", "regret via anchor",
           "tuner best / grid best, direct [95% CI]", "regret", "accepted"], rows)

    print(f"### Regret against the grid best ({m.describe(gb)})\n")
    rows = []
    for h in args.hogs:
        rs = [r for r in runs if r["hogs"] == h]
        label = f"tuner, {cond_name(h)}"
        if not rs:
            rows.append([label, 0, "-", "-", "-", "-", "-"])
            bars.append((name, label, "no run finished", False))
            continue
        reg = [r["regret"] for r in rs]
        ev = [r["latency_evaluations"] for r in rs]
        viol = sum(1 for r in rs if not r["loss"] < bound)
        med, worst = statistics.median(reg), max(reg)
        ra = [r["regret_anchor"] for r in rs if r.get("regret_anchor") is not None]
        rows.append([label, len(rs), pct(med), pct(worst),
                     f"{pct(statistics.median(ra))}, {pct(max(ra))}" if ra else "-",
                     f"{statistics.median(ev):g}, {max(ev)}", viol])
        met = (med <= BAR_MEDIAN and worst <= BAR_WORST and max(ev) <= BUDGET and viol == 0
               and len(rs) == args.reps)
        bars.append((name, label, f"median {pct(med)}, worst {pct(worst)}, latency evals max "
                     f"{max(ev)}, violations {viol}, {len(rs)} of {args.reps} runs", met))
    for label, (reg, ev) in sims.items():
        rows.append([label, SIM_REPS, pct(statistics.median(reg)), pct(max(reg)), "-",
                     f"{statistics.median(ev):g}, {max(ev)}", "0 (feasible points only)"])
    table(["method", "runs", "median regret", "worst regret",
           "regret via anchor (median, worst)", "latency evals (median, max)",
           "constraint violations"], rows)
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description="Regret of cannprof tune against an exhaustive grid.")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help=f"example models, NAME[:BOUND%%] (default \"{DEFAULT_MODELS}\")")
    ap.add_argument("--reps", type=int, default=5, help="tuner runs per condition (5)")
    ap.add_argument("--grid-rounds", type=int, default=40, help="A/B rounds per grid point (40)")
    ap.add_argument("--confirm-rounds", type=int, default=150,
                    help="A/B rounds of re-measurements and of the tuner's best (150)")
    ap.add_argument("--hogs", default="0 2", help="background hogs per condition (\"0 2\")")
    ap.add_argument("--seed", type=int, default=1, help="seed of the grid order and simulations")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (reused on a rerun)")
    ap.add_argument("--grid-binary", metavar="PATH",
                    help="reuse the grid (--keep) another cannprof binary measured: for a change "
                         "that touches neither the converter nor the runtime")
    ap.add_argument("--priority", choices=("normal", "high"), default="normal",
                    help="every bench and tune run's --priority (normal; high measures at "
                    "nice -20, needs root)")
    a = ap.parse_args()
    if a.priority == "high":
        PRIORITY.extend(["--priority", "high"])
    try:
        a.hogs = [int(x) for x in a.hogs.split()]
        models = []
        for tok in a.models.split():
            nm, _, b = tok.partition(":")
            if not b:
                b = dict(x.split(":") for x in DEFAULT_MODELS.split()).get(nm)
                if b is None:
                    raise ValueError(f"no default bound for {nm}: give {nm}:BOUND")
            models.append((nm, float(b.rstrip("%"))))
    except ValueError as e:
        print(f"tune_regret: bad --hogs or --models: {e}", file=sys.stderr)
        return 2
    if (a.reps < 1 or a.grid_rounds < 10 or a.confirm_rounds < 10 or not a.hogs
            or min(a.hogs) < 0 or not models):
        print("tune_regret: --reps >= 1, --grid-rounds and --confirm-rounds >= 10, --hogs "
              "whole numbers, at least one model", file=sys.stderr)
        return 2
    for nm, b in models:
        if not os.path.exists(os.path.join(MODELS_DIR, nm + ".onnx")) or b <= 0:
            print(f"tune_regret: no examples/models/{nm}.onnx, or bound {b} <= 0", file=sys.stderr)
            return 2
    a.cli = os.path.abspath(a.cli)
    if not os.access(a.cli, os.X_OK):
        print(f"tune_regret: {a.cli} is not executable", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    holder = None
    if a.keep:
        wd = os.path.abspath(a.keep)
        os.makedirs(wd, exist_ok=True)
    else:
        holder = tempfile.TemporaryDirectory(prefix="cannprof-tune-regret-")
        wd = holder.name
    cores = os.cpu_count() or 1
    cli_sha = sha256(a.cli)
    global GRID_SHA
    if a.grid_binary:
        GRID_SHA = sha256(a.grid_binary)
    version = run([a.cli, "--version"]).stdout.strip()
    load_before = load()
    print("# cannprof tune: regret against an exhaustive grid\n")
    print(f"{version} (sha256 {cli_sha[:12]}); {cores} cores; work folder {wd}"
          f"{' (kept)' if a.keep else ' (temporary)'}; tuner runs per condition: {a.reps}; "
          f"grid rounds {a.grid_rounds}, confirmation rounds {a.confirm_rounds}; seed {a.seed}; "
          f"priority {a.priority}.\n")
    if GRID_SHA:
        print(f"The grid is the one binary sha256 {GRID_SHA[:12]} measured (--grid-binary): "
              f"the tuner runs are this binary's, the grid's points that binary's conversions "
              f"and timings.\n")
    print(f"load before: `{load_before}`\n")
    print("Random search and coordinate descent are simulated on the grid's measured table "
          "(no noise), with the same budget of 12 latency evaluations; the tuner is run for "
          "real.\n")
    sys.stdout.flush()
    bars, errors = [], []
    try:
        for nm, b in models:
            try:
                do_model(a, wd, nm, b, cli_sha, cores, bars, errors)
            except (Failure, ValueError, KeyError, OSError) as e:
                errors.append(f"{nm}: {e}")
                print(f"\n**{nm} failed:** {e}\n")
                bars.append((nm, "tuner", "not measured", False))
    finally:
        Hogs.stop_all()
    print("\n## Bar: tuner median regret <= 3%, worst <= 5%, <= 12 latency evaluations, "
          "no constraint violated\n")
    table(["model", "condition", "figures", "bar"],
          [[n, c, f, "met" if ok else "**MISSED**"] for n, c, f, ok in bars])
    for e in errors:
        print(f"- error: {e}")
    print(f"\nload before: `{load_before}`  \nload after:  `{load()}`  \n"
          f"total time: {time.monotonic() - T0:.0f} s")
    if holder is not None:
        holder.cleanup()
    return 0 if bars and all(ok for *_, ok in bars) and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
