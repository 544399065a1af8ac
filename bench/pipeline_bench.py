#!/usr/bin/env python3
"""node-bottleneck on planted flows, and what-if predictions against runs.

Part 1 runs each planted flow --reps times and counts how often
`cannprof node-bottleneck` names the planted node as the limiting one and
the planted problem (a sleeping node: io_bound; a spinning node: none; a
fast node before a slow one behind a queue of one: back_pressure; more
spinning workers than cores: cpu_oversubscribed; an idle flow: nothing
limiting). Part 2 replays runs with changes (`--what-if ... --check`) and
prints the prediction error against the changed flow actually run:
median [min..max] over the reps. Everything is measured in this run, side
by side; nothing is asserted."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

FLOW = """[graph]
graphconf = '''
digraph planted {{
{nodes}
}}'''
"""


def write_flow(d, name, nodes):
    path = os.path.join(d, name + ".toml")
    with open(path, "w") as f:
        f.write(FLOW.format(nodes=nodes))
    return path


def run(cli, *args):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pipeline_bench: {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", default=os.environ.get("CANNPROF", "build/cannprof"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--requests", type=int, default=40)
    a = ap.parse_args()
    cores = os.cpu_count() or 2
    d = tempfile.mkdtemp(prefix="cannprof-pipeline-bench-")
    os.makedirs(os.path.join(d, "in"))
    for i in range(3):
        with open(os.path.join(d, "in", f"p{i}.txt"), "w") as f:
            f.write(f"a poster of cat number {i}")
    src = ' src[flowunit=file_source, dir="in"]\n'
    cases = [
        ("sleep-bound", src + ' a[flowunit=delay, spin_ms=1]\n io[flowunit=delay, sleep_ms=15]\n'
         ' b[flowunit=delay]\n src:out -> a:in\n a:out -> io:in\n io:out -> b:in', "io", "io_bound"),
        ("cpu-bound", src + ' io[flowunit=delay, sleep_ms=1]\n cpu[flowunit=delay, spin_ms=12]\n'
         ' b[flowunit=delay]\n src:out -> io:in\n io:out -> cpu:in\n cpu:out -> b:in', "cpu", None),
        ("blocked", src + ' fast[flowunit=delay, spin_ms=1]\n slow[flowunit=delay, spin_ms=8, queue_size=1]\n'
         ' src:out -> fast:in\n fast:out -> slow:in', "slow", "back_pressure"),
        ("oversubscribed", src + f' spin[flowunit=delay, spin_ms=10, workers={3 * cores}]\n'
         ' src:out -> spin:in', "spin", "cpu_oversubscribed"),
        ("idle (negative control)", src + ' tok[flowunit=tokenize]\n a[flowunit=delay]\n'
         ' src:out -> tok:in\n tok:out -> a:in', None, None),
    ]
    print(f"## node-bottleneck on planted flows ({a.reps} runs each, {a.requests} requests, "
          f"{cores} cores)\n")
    print("| case | planted limit | named right | planted problem | named right | false problems |")
    print("|---|---|---|---|---|---|")
    right_total = cases_total = 0
    for name, nodes, limit, problem in cases:
        flow = write_flow(d, name.split()[0], nodes)
        ok_limit = ok_problem = false_probs = 0
        for r in range(a.reps):
            db = os.path.join(d, f"{name.split()[0]}-{r}.db")
            run(a.cli, "pipeline", "run", flow, "--requests", str(a.requests), "--trace", db)
            b = json.loads(run(a.cli, "node-bottleneck", db, "--json"))
            got = b.get("limiting_node")
            ok_limit += got == limit
            kinds = [p["kind"] for p in b["problems"] if p["kind"] != "input_bound"]
            if problem:
                ok_problem += problem in kinds
            false_probs += len([k for k in kinds if k != problem])
        right_total += ok_limit
        cases_total += a.reps
        print(f"| {name} | {limit or 'none'} | {ok_limit}/{a.reps} | {problem or 'none'} | "
              f"{ok_problem if problem else '-'}/{a.reps if problem else '-'} | {false_probs} |")
    print(f"\nlimiting node named right in {right_total} of {cases_total} runs "
          f"({100.0 * right_total / cases_total:.0f}%)\n")

    whatifs = [
        ("sleep node, workers 1 -> 2", cases[0][1], "io.workers=2"),
        ("sleep node, workers 1 -> 4", cases[0][1], "io.workers=4"),
        ("spin node, workers 1 -> 2", cases[1][1], "cpu.workers=2"),
        ("slow node's queue 1 -> 8", cases[2][1], "slow.queue_size=8"),
    ]
    print(f"## what-if against the changed flow run ({a.reps} each)\n")
    print("| change | predicted req/s | measured req/s | throughput error median [min..max] "
          "| p99 error median [min..max] |")
    print("|---|---|---|---|---|")
    for name, nodes, change in whatifs:
        flow = write_flow(d, "wi", nodes)
        te, pe, pr, ms = [], [], [], []
        for r in range(a.reps):
            db = os.path.join(d, f"wi-{len(te)}-{name[:4]}.db")
            if os.path.exists(db):
                os.remove(db)
            run(a.cli, "pipeline", "run", flow, "--requests", str(a.requests), "--trace", db)
            w = json.loads(run(a.cli, "node-bottleneck", db, "--what-if", change, "--check",
                               "--json"))
            te.append(w["throughput_error_pct"])
            pe.append(w["p99_error_pct"])
            pr.append(w["predicted"]["throughput"])
            ms.append(w["checked"]["throughput"])
        print(f"| {name} | {statistics.median(pr):.1f} | {statistics.median(ms):.1f} | "
              f"{statistics.median(te):+.1f}% [{min(te):+.1f}..{max(te):+.1f}] | "
              f"{statistics.median(pe):+.1f}% [{min(pe):+.1f}..{max(pe):+.1f}] |")


if __name__ == "__main__":
    main()
