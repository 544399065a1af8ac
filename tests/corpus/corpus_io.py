"""What the corpus scripts share: the manifest's file form, and a client of
bench/ort_runner.js (onnxruntime-node, one JSON command a line), used by
tests/corpus/make_trained.py for references and bench/ort_compare.py for
timings."""

import json
import os
import subprocess


def read_manifest(path, replaced, head):
    """The manifest's columns (`head` when the file does not exist) and its
    rows, except those of the models in `replaced`, which are about to be
    written again."""
    if not os.path.exists(path):
        return list(head), []
    with open(path) as f:
        lines = f.read().splitlines()
    cols = lines[0].split("\t") if lines else list(head)
    return cols, [line for line in lines[1:] if line.split("\t")[0] not in replaced]


def write_manifest(path, cols, kept, rows):
    """The header, the kept lines as they were, then the new rows."""
    with open(path, "w") as f:
        f.write("\t".join(cols) + "\n")
        for line in kept:
            f.write(line + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


class Ort:
    """bench/ort_runner.js in a long-lived node process."""

    def __init__(self, node, runner, node_path):
        env = dict(os.environ, NODE_PATH=node_path)
        self.p = subprocess.Popen([node, runner], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env)

    def call(self, **msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        return json.loads(line) if line else {"ok": False, "error": "onnxruntime-node died"}

    def close(self):
        self.p.stdin.close()
        self.p.wait()
