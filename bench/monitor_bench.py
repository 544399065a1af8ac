#!/usr/bin/env python3
"""What the serving monitor costs, and how fast it catches a slowdown.

Overhead: `cannprof serve` under `cannprof load` offered more than the model
can do (1.5x bench's throughput, open loop), in three configurations run
--reps times in rotating order: no monitor; `--monitor` with a condition
that never holds (the flight recorder and the ticks: the steady cost); and
a monitor that fires at once with a deep trace longer than the load (every
batch records its kernels: the triggered trace's cost, bounded by the
--deep-trace duration). The answered throughput's median [min..max] and
its ratio to no monitor.

Detection: a fire drill (--inject-slowdown) under a load the model carries
easily; from findings.json, the time from the slowdown to the firing and
to the alert's delivery (a local webhook receiver), --reps times.

--flow serves a flow instead (written here: a prompt through a delay node
spinning 2 ms, the tokenizer and the text encoder): the load offered is
1.5x what the unmonitored flow answered at saturation, the monitor that
never fires watches a node (the second ring of node calls), and the drill
slows the delay node alone (`--inject-slowdown AFTER:+MS@wait`) under a
node condition (`wait.p99_latency>6ms`)."""
import argparse
import glob
import http.server
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading

from serving import cli, fmt, load, serve, stop


class Hook(http.server.BaseHTTPRequestHandler):
    got = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        Hook.got.append(json.loads(self.rfile.read(n)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *a):
        pass


def write_flow(tmp):
    """A served flow in tmp: prompt -> delay (2 ms spin) -> tokenize -> the text encoder."""
    os.makedirs(os.path.join(tmp, "prompts"), exist_ok=True)
    with open(os.path.join(tmp, "prompts", "a.txt"), "w") as f:
        f.write("a poster of a lighthouse at dusk")
    model = os.path.abspath("examples/models/text_encoder_tiny.onnx")
    path = os.path.join(tmp, "flow.toml")
    with open(path, "w") as f:
        f.write("[graph]\nformat = \"graphviz\"\ngraphconf = '''digraph bench {\n"
                "  src[flowunit=file_source, dir=\"prompts\"]\n"
                "  wait[flowunit=delay, spin_ms=2]\n"
                "  tok[flowunit=tokenize, max_len=77, vocab=1000]\n"
                f"  enc[flowunit=inference, model=\"{model}\", threads=1]\n"
                "  out[flowunit=file_sink, dir=\"out\"]\n"
                "  src:out -> wait:in\n  wait:out -> tok:in\n  tok:out -> enc:in\n"
                "  enc:out -> out:in\n}'''\n")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", default=os.environ.get("CANNPROF", "build/cannprof"))
    ap.add_argument("--model", default="examples/models/resnet_tiny.onnx")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6)
    ap.add_argument("--drills", type=int, default=3)
    ap.add_argument("--flow", action="store_true",
                    help="serve a flow and watch its nodes (see above)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cannprof-monitor-bench-")
    inc = os.path.join(tmp, "incidents")
    if a.flow:
        a.model = write_flow(tmp)
    never = "enc.p99_latency>100s" if a.flow else "p99_latency>100s"
    configs = {
        "no monitor": [],
        f"--monitor {never} (never fires)": ["--monitor", never, "--incident-dir", inc],
        "--monitor firing, deep trace throughout": [
            "--monitor", "throughput>0/s", "--window", "0.5s", "--for", "0", "--min-requests",
            "1", "--deep-trace", f"{a.duration + 30}s", "--incident-dir", inc],
    }
    names = list(configs)
    thr = {k: [] for k in names}
    if a.flow:
        # what the flow answers at saturation, unmonitored
        srv, port = serve(a.cli, a.model, [], tmp)
        capacity = load(a.cli, port, 2000, 3)["throughput"]
        stop(srv)
        b = {"throughput_items_per_s": capacity}
        what = "the unmonitored flow's saturated"
    else:
        b = json.loads(cli(["bench", a.model, "-t", "1", "-n", "300", "--json"], a.cli))
        what = "bench's"
    rate = 1.5 * b["throughput_items_per_s"]
    for r in range(a.reps):
        order = names[r % 3:] + names[:r % 3]
        for name in order:
            srv, port = serve(a.cli, a.model, configs[name], tmp)
            out = load(a.cli, port, rate, a.duration)
            stop(srv)
            thr[name].append(out["throughput"])
            shutil.rmtree(inc, ignore_errors=True)
    print(f"## monitor overhead: {a.model}, 1 thread, {a.reps} rounds in rotating order, load "
          f"offered at {rate:.0f} req/s (1.5x {what} {b['throughput_items_per_s']:.0f}) for "
          f"{a.duration:.0f} s\n")
    print("| configuration | throughput (req/s) | vs no monitor |")
    print("|---|---|---|")
    base = statistics.median(thr[names[0]])
    for name in names:
        print(f"| {name} | {fmt(thr[name])} | {statistics.median(thr[name]) / base:.3f} |")

    # detection
    hs = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hs.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{hs.server_address[1]}/hook"
    after, window, hold, deep, drate = 8.0, 5.0, 2.0, 5.0, 100
    # the threshold from this machine's own p99 at that load: three times
    # it (at least 2 ms), and a slowdown twice the threshold
    srv, port = serve(a.cli, a.model, [], tmp)
    base_p99 = load(a.cli, port, drate, 5)["latency_p99_ms"]
    stop(srv)
    thr_ms = max(2.0, 3 * base_p99)
    slow_ms = 2 * thr_ms
    cond, at = "p99_latency", ""
    if a.flow:
        # the delay node's own calls: 2 ms, watched at 6 ms, slowed by 8
        cond, at, thr_ms, slow_ms = "wait.p99_latency", "@wait", 6.0, 8.0
    fired, sent, held = [], [], []
    for r in range(a.drills):
        shutil.rmtree(inc, ignore_errors=True)
        Hook.got.clear()
        srv, port = serve(a.cli, a.model,
                          ["--monitor", f"{cond}>{thr_ms:.3f}ms", "--window", f"{window}s",
                           "--for", f"{hold}s", "--deep-trace", f"{deep}s", "--incident-dir",
                           inc, "--webhook", hook, "--inject-slowdown",
                           f"{after}s:+{slow_ms:.3f}{at}"], tmp)
        load(a.cli, port, drate, after + hold + deep + 6)
        code, out, err = stop(srv)
        found = glob.glob(os.path.join(inc, "incident-*", "findings.json"))
        if len(found) != 1 or len(Hook.got) != 1:
            sys.exit(f"monitor_bench: drill {r}: {len(found)} incidents, {len(Hook.got)} alerts "
                     f"received (exit {code}): {out}{err}")
        f = json.load(open(found[0]))
        if a.flow and f.get("flow_nodes", {}).get("grew_most") != "wait":
            sys.exit(f"monitor_bench: drill {r}: the incident names "
                     f"{f.get('flow_nodes', {}).get('grew_most')} as the node that grew, not wait")
        fired.append(f["fired"]["fired_s_since_start"] - after)
        held.append(f["fired"]["fired_s_since_start"] - f["fired"]["first_violation_s_since_start"])
        sent.append(f["alert"]["sent_s_since_start"] - after)
    hs.shutdown()
    unit = "call of the node wait" if a.flow else "batch"
    print(f"\n## time from an injected slowdown to the alert: {a.drills} drills, {drate} req/s "
          f"(p99 {base_p99:.2f} ms before), +{slow_ms:.1f} ms per {unit} from {after:.0f} s, "
          f"{cond}>{thr_ms:.2f}ms over a {window:.0f} s window held {hold:.0f} s, deep "
          f"trace {deep:.0f} s\n")
    print("| from the slowdown to | seconds, median [min..max] |")
    print("|---|---|")
    print(f"| the condition first holding | {fmt([x - y for x, y in zip(fired, held)], 2)} |")
    print(f"| the firing (after the hold) | {fmt(fired, 2)} |")
    print(f"| the alert sent (after the deep trace and the diagnosis) | {fmt(sent, 2)} |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
