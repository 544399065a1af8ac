#!/usr/bin/python3
"""The corpus test: convert, run and check every corpus model (docs/corpus.md).

    run_corpus.py --cli build/cannprof --corpus build/corpus \
                  --expected tests/corpus/expected.tsv [--strict] [--update FILE]

For each row of the corpus manifest (tests/corpus/make_corpus.py) it runs
`cannprof convert` with default flags, `cannprof run` on the manifest's
inputs, and the relative L2 error ||ref - out|| / ||ref|| of every output
against PyTorch's reference; a row passes when every output is within 1e-4.
It prints one table line per row: converts?, runs?, the worst rel-L2, or the
error (the importer's message names the unsupported ops).

The verdict, until every model passes: tests/corpus/expected.tsv lists each
(model, opset) as `pass` or `gap` with the reason. A row expected to pass that
does not is a regression and fails the test; a known gap is reported, not
failed; a gap that now passes is reported so the list can be updated
(--update rewrites it from this run). Rows missing from the list are
expected to pass. --strict fails on every row that does not pass (the
issue's "done when"). With no corpus folder the test is skipped (exit 77).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

try:  # scripts/corpus.sh installs it with the corpus; without a corpus the test skips
    import numpy as np
except ImportError:
    np = None

TOL = 1e-4
SKIP = 77


def read_tsv(path):
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:]]


def pairs(col):
    if col in ("", "-"):
        return []
    return [tuple(p.split("=", 1)) for p in col.split(",")]


def short_error(text):
    """The one line of cannprof's stderr that says why."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no message"
    m = re.search(r"unsupported ops?: ([^;\n]+)", text)
    if m:  # the importer names every unsupported op at once, with node counts
        return "unsupported: " + m.group(1).strip()
    # Drop the "cannprof CMD: error: FILE: " prefix, keep what follows.
    lines = [re.sub(r"^cannprof \w+: (error: )?(\S+\.(onnx|om): )?", "", l) for l in lines]
    for line in lines:
        if "error" in line.lower() or "unsupported" in line.lower():
            return line[:200]
    return lines[0][:200]


def rel_l2(ref, out):
    ref = ref.astype(np.float64).ravel()
    out = out.astype(np.float64).ravel()
    den = np.linalg.norm(ref)
    num = np.linalg.norm(ref - out)
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return float(num / den)


def check_row(cli, corpus, row, work, threads):
    """Returns (status, converts, runs, rel, why); status is pass, export,
    convert, run or mismatch."""
    if not row["status"].startswith("ok"):
        return "export", "-", "-", None, row["status"]
    name = os.path.splitext(row["file"])[0]
    om = os.path.join(work, name)
    cmd = [cli, "convert", "--model=" + os.path.join(corpus, row["file"]), "--framework=5",
           "--output=" + om]
    if row.get("input_shape"):  # a model with dynamic inputs, as ATC takes it
        cmd.append("--input_shape=" + row["input_shape"])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "convert", "no", "-", None, short_error(p.stderr + p.stdout)
    outdir = os.path.join(work, name + ".out")
    os.makedirs(outdir, exist_ok=True)
    cmd = [cli, "run", om + ".om", "--threads", str(threads), "--output-dir", outdir]
    for n, f in pairs(row["inputs"]):
        cmd += ["--input", f"{n}={os.path.join(corpus, f)}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "run", "yes", "no", None, short_error(p.stderr + p.stdout)
    worst, why = 0.0, ""
    for n, f in pairs(row["outputs"]):
        ref = np.load(os.path.join(corpus, f))
        got_path = os.path.join(outdir, n + ".npy")
        if not os.path.exists(got_path):
            return "mismatch", "yes", "yes", None, f"no output {n}"
        got = np.load(got_path)
        if got.shape != ref.shape:
            return "mismatch", "yes", "yes", None, f"{n}: shape {got.shape} != ref {ref.shape}"
        r = rel_l2(ref, got)
        if r > worst or np.isnan(r):
            worst, why = r, n
    if not worst <= TOL:
        return "mismatch", "yes", "yes", worst, f"{why}: rel-L2 above {TOL:g}"
    return "pass", "yes", "yes", worst, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--update", metavar="FILE")
    ap.add_argument("--models", nargs="*", default=None)
    args = ap.parse_args()

    manifest = os.path.join(args.corpus, "manifest.tsv")
    if not os.path.exists(manifest):
        print(f"corpus: no {manifest}; make it with scripts/corpus.sh (test skipped)")
        return SKIP
    if np is None:
        print("corpus: the corpus is made but numpy is missing (apt-get install python3-numpy)")
        return 1
    rows = read_tsv(manifest)
    if args.models:
        rows = [r for r in rows if r["name"] in args.models]
    expected = {}
    if os.path.exists(args.expected):
        for e in read_tsv(args.expected):
            expected[(e["name"], e["opset"])] = (e["expect"], e.get("why", ""))

    results = []
    with tempfile.TemporaryDirectory(prefix="cannprof-corpus.") as work:
        for row in rows:
            st, conv, ran, rel, why = check_row(args.cli, args.corpus, row, work, args.threads)
            results.append((row, st, conv, ran, rel, why))
            print(f"corpus: {row['name']} op{row['opset']}: {st} {why}", file=sys.stderr,
                  flush=True)

    print(f"corpus summary ({len(rows)} model x opset rows, rel-L2 tolerance {TOL:g})")
    print("| model | opset | converts | runs | rel-L2 | status | expected | why |")
    print("|---|---:|:---:|:---:|---:|---|---|---|")
    regressions, fixed, gaps, passed = [], [], [], 0
    for row, st, conv, ran, rel, why in results:
        key = (row["name"], row["opset"])
        exp = expected.get(key, ("pass", ""))[0]
        if st == "pass":
            passed += 1
            verdict = "ok" if exp == "pass" else "FIXED (update expected.tsv)"
            if exp != "pass":
                fixed.append(key)
        elif exp == "pass":
            verdict = "REGRESSION"
            regressions.append(key)
        else:
            verdict = "known gap"
            gaps.append(key)
        rel_s = "-" if rel is None else f"{rel:.2e}"
        print(f"| {row['name']} | {row['opset']} | {conv} | {ran} | {rel_s} | {st} | "
              f"{verdict} | {why.replace('|', '/')} |")
    print()
    print(f"corpus: {passed} of {len(results)} pass; {len(gaps)} known gaps; "
          f"{len(fixed)} newly passing; {len(regressions)} regressions")
    if args.update:
        with open(args.update, "w") as f:
            f.write("# Expected corpus status per (model, opset); written by run_corpus.py "
                    "--update, see docs/corpus.md.\n")
            f.write("name\topset\texpect\twhy\n")
            for row, st, _, _, _, why in results:
                exp = "pass" if st == "pass" else "gap"
                f.write(f"{row['name']}\t{row['opset']}\t{exp}\t"
                        f"{'' if st == 'pass' else st + ': ' + why}\n")
    failed = len(regressions) + (len(gaps) if args.strict else 0)
    print(f"corpus: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
