#!/usr/bin/python3
"""Export the model corpus: models cannprof's authors did not design.

    /usr/bin/python3 tests/corpus/make_corpus.py OUT_DIR [NAME ...]

Run through scripts/corpus.sh, which installs Debian's python3-torch,
python3-torchvision, python3-onnx and python3-numpy first. Writes, for every
model NAME and opset N:

    OUT_DIR/NAME_opN.onnx
    OUT_DIR/NAME/<input>.npy        the inputs (shared by both opsets)
    OUT_DIR/NAME/ref_<output>.npy   PyTorch eager's outputs on them, fp32
    OUT_DIR/manifest.tsv            one line per (model, opset), see below

manifest.tsv columns: name, file, opset, inputs (name=path,...), outputs
(name=path,...), source, status. status is "ok", or "export-failed: why"
(the exporter's own message, first line), in which case file is "-". Paths
are relative to OUT_DIR. Weights are random (torchvision's own init, no
download), every generator is seeded, so a rerun writes the same corpus.
"""

import os
import sys
import time
import traceback
import warnings

import numpy as np
import onnx
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transformers  # noqa: E402
from corpus_io import read_manifest, write_manifest  # noqa: E402

OPSETS = (13, 17)
TV = "torchvision " + torchvision.__version__


def image(n, h, w, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, h, w, generator=g)


# ---- torchvision -----------------------------------------------------------------
def tv_classifier(fn, size=64, **kw):
    def build():
        m = fn(weights=None, **kw)
        return m, (image(1, size, size, 7),), ["image"], f"{TV} models.{fn.__name__}"
    return build


def tv_small(cls_name, size, **kw):
    """A torchvision architecture class at a small configuration (the named
    builders only come at full size: tens of millions of weights)."""
    def build():
        import torchvision.models as tm
        mods = {"VisionTransformer": tm.vision_transformer, "SwinTransformer":
                tm.swin_transformer, "ConvNeXt": tm.convnext}
        mod = next(m for m in mods.values() if hasattr(m, cls_name))
        if cls_name == "ConvNeXt":
            cfg = [tm.convnext.CNBlockConfig(32, 64, 1), tm.convnext.CNBlockConfig(64, 128, 1),
                   tm.convnext.CNBlockConfig(128, None, 1)]
            m = tm.convnext.ConvNeXt(cfg, stochastic_depth_prob=0.0, num_classes=100)
        else:
            m = getattr(mod, cls_name)(**kw)
        return (m, (image(1, size, size, 7),), ["image"],
                f"{TV} models.{mod.__name__.split('.')[-1]}.{cls_name} (small config)")
    return build


def tv_fcn_resnet18():
    from torchvision.models import resnet18
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.fcn import FCN, FCNHead
    backbone = IntermediateLayerGetter(resnet18(weights=None), {"layer4": "out"})
    m = FCN(backbone, FCNHead(512, 21))
    return (m, (image(1, 96, 96, 7),), ["image"],
            f"{TV} models.segmentation.fcn.FCN + FCNHead on resnet18")


def tv_segmentation(fn, size=96, **kw):
    def build():
        m = fn(weights=None, weights_backbone=None, **kw)
        return (m, (image(1, size, size, 7),), ["image"],
                f"{TV} models.segmentation.{fn.__name__}")
    return build


def tv_detection(fn, size=160, **kw):
    def build():
        m = fn(weights=None, weights_backbone=None, **kw)
        return (m, (image(1, size, size, 7),), ["image"],
                f"{TV} models.detection.{fn.__name__}")
    return build


def torchvision_models():
    import torchvision.models as tm
    import torchvision.models.detection as td
    import torchvision.models.segmentation as ts
    det = dict(min_size=160, max_size=160)
    return {
        "resnet18": tv_classifier(tm.resnet18),
        "resnext50_32x4d": tv_classifier(tm.resnext50_32x4d),
        "mobilenet_v2": tv_classifier(tm.mobilenet_v2),
        "mobilenet_v3_small": tv_classifier(tm.mobilenet_v3_small),
        "mobilenet_v3_large": tv_classifier(tm.mobilenet_v3_large),
        "efficientnet_b0": tv_classifier(tm.efficientnet_b0),
        "efficientnet_v2_s": tv_classifier(tm.efficientnet_v2_s),
        "regnet_y_400mf": tv_classifier(tm.regnet_y_400mf),
        "regnet_x_400mf": tv_classifier(tm.regnet_x_400mf),
        "shufflenet_v2_x0_5": tv_classifier(tm.shufflenet_v2_x0_5),
        "squeezenet1_1": tv_classifier(tm.squeezenet1_1),
        "densenet121": tv_classifier(tm.densenet121),
        "googlenet": tv_classifier(tm.googlenet, aux_logits=False, init_weights=True),
        "inception_v3": tv_classifier(tm.inception_v3, size=96, aux_logits=False,
                                      init_weights=True),
        "mnasnet0_5": tv_classifier(tm.mnasnet0_5),
        "convnext_small_cfg": tv_small("ConvNeXt", 64),
        "vit_small_cfg": tv_small("VisionTransformer", 32, image_size=32, patch_size=8,
                                  num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                                  num_classes=100),
        "swin_small_cfg": tv_small("SwinTransformer", 64, patch_size=[4, 4], embed_dim=32,
                                   depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                                   stochastic_depth_prob=0.0, num_classes=100),
        "deeplabv3_mobilenet_v3": tv_segmentation(ts.deeplabv3_mobilenet_v3_large),
        "lraspp_mobilenet_v3": tv_segmentation(ts.lraspp_mobilenet_v3_large),
        "fcn_resnet18": tv_fcn_resnet18,
        "ssdlite320_mobilenet_v3": tv_detection(td.ssdlite320_mobilenet_v3_large, size=320),
        # Random weights score every box near the class prior, below the
        # default thresholds: lower them, or the reference is empty.
        "fasterrcnn_mobilenet_v3_320_fpn": tv_detection(
            td.fasterrcnn_mobilenet_v3_large_320_fpn, box_score_thresh=0.0,
            box_detections_per_img=20, **det),
        "retinanet_resnet50_fpn": tv_detection(td.retinanet_resnet50_fpn, score_thresh=0.0,
                                               detections_per_img=20, **det),
        "fcos_resnet50_fpn": tv_detection(td.fcos_resnet50_fpn, score_thresh=0.0,
                                          detections_per_img=20, **det),
        # 20 detections, as above: among 100, scores closer than fp32's
        # reordering error swap places, and the comparison would measure that.
        "maskrcnn_resnet50_fpn": tv_detection(td.maskrcnn_resnet50_fpn, box_score_thresh=0.0,
                                              box_detections_per_img=20, **det),
        "keypointrcnn_resnet50_fpn": tv_detection(td.keypointrcnn_resnet50_fpn,
                                                  box_score_thresh=0.0,
                                                  box_detections_per_img=20, **det),
    }


def wake_zero_weights(model):
    """Some inits zero a layer (ViT's head, adaLN-zero style gates), which
    makes the output constant and any comparison trivially exact: give such
    weight matrices small random values instead."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.numel() and float(p.abs().max()) == 0.0:
                p.normal_(0.0, 0.02)


def calibrate_batchnorm(model, inputs, batches=4):
    """BatchNorm's fresh running stats (mean 0, variance 1) do not normalise
    randomly weighted layers: activations die out (GoogLeNet, ShuffleNet end
    up returning the classifier's bias) or explode (Inception: 1e8). Set
    them as a trained model's are, from batch statistics over seeded random
    images of the model's input size. Detection models are left as they are
    (their train mode needs targets)."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns or len(inputs) != 1 or not inputs[0].is_floating_point():
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    g = torch.Generator().manual_seed(11)
    shape = (4,) + tuple(inputs[0].shape[1:])
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.rand(shape, generator=g))


def calibrate_detector_backbone(model, inputs, batches=4):
    """A detector's train mode needs targets, but its backbone's does not.
    With fresh BatchNorm statistics the backbone's features die out, every
    box then gets the same score (SSDLite and Faster R-CNN scored all boxes
    1/91), and which boxes are kept is decided by how TopK and NMS break
    ties, which ONNX fixes and PyTorch does not. Calibrate the backbone's
    statistics on seeded images the size the model's transform makes."""
    backbone = getattr(model, "backbone", None)
    bns = [m for m in backbone.modules()
           if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)] if backbone else []
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    g = torch.Generator().manual_seed(11)
    model.eval()
    with torch.no_grad():
        images, _ = model.transform([torch.rand(inputs[0].shape[1:], generator=g)
                                     for _ in range(4)])
        backbone.train()
        for _ in range(batches):
            backbone(images.tensors)
    model.eval()


# ---- export ----------------------------------------------------------------------
def flatten(out):
    """Outputs as a flat list of tensors (detection models return dicts)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in out for t in flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    raise TypeError(f"unexpected output type {type(out)}")


def fix_roi_align_mode(path, opset):
    """torchvision 0.14 has only an opset-11 symbolic for roi_align, and
    exports it unchanged at any opset: a RoiAlign without
    coordinate_transformation_mode. From opset 16 that attribute defaults
    to half_pixel, while the PyTorch model computes output_half_pixel
    (aligned=False, all the corpus detectors), so the file would not mean
    what the model computes. Say what the model means, as newer
    torchvision exports do."""
    if opset < 16:
        return
    m = onnx.load(path)
    changed = False
    for n in m.graph.node:
        if n.op_type == "RoiAlign" and n.domain in ("", "ai.onnx") and not any(
                a.name == "coordinate_transformation_mode" for a in n.attribute):
            n.attribute.append(onnx.helper.make_attribute(
                "coordinate_transformation_mode", "output_half_pixel"))
            changed = True
    if changed:
        onnx.save(m, path)


def first_line(exc):
    msg = str(exc).strip().splitlines()
    msg = msg[0] if msg else type(exc).__name__
    return f"{type(exc).__name__}: {msg}"[:300].replace("\t", " ")


def export_one(out_dir, name, build):
    rows = []
    torch.manual_seed(0)
    np.random.seed(0)
    try:
        model, inputs, in_names, source = build()
    except Exception as e:  # a builder this torchvision lacks
        return [(name, "-", str(op), "-", "-", "-", "build-failed: " + first_line(e))
                for op in OPSETS]
    wake_zero_weights(model)
    if ".detection." not in source:
        calibrate_batchnorm(model, inputs)
    else:
        calibrate_detector_backbone(model, inputs)
    model.eval()
    with torch.no_grad():
        ref = flatten(model(*inputs))
    for i, t in enumerate(ref):
        if t.numel() and not t.is_floating_point():
            continue
        if t.numel() == 0 or float(t.abs().max()) == 0.0:
            print(f"{name}: warning: output {i} is empty or all zeros", file=sys.stderr)
    out_names = [f"out{i}" for i in range(len(ref))]
    sub = os.path.join(out_dir, name)
    os.makedirs(sub, exist_ok=True)
    in_col = []
    for n, t in zip(in_names, inputs):
        np.save(os.path.join(sub, n + ".npy"), t.numpy())
        in_col.append(f"{n}={name}/{n}.npy")
    out_col = []
    for n, t in zip(out_names, ref):
        np.save(os.path.join(sub, f"ref_{n}.npy"), t.numpy())
        out_col.append(f"{n}={name}/ref_{n}.npy")
    for opset in OPSETS:
        # The exporter may refuse an opset (an op with no symbolic there):
        # go up one at a time and say so, so both rows name what happened.
        tried = []
        candidates = range(opset, OPSETS[1]) if opset == OPSETS[0] else [opset]
        for op in candidates:
            fname = f"{name}_op{op}.onnx"
            path = os.path.join(out_dir, fname)
            try:
                # Not under no_grad: there nn.MultiheadAttention takes its
                # fused fast path, which the exporter cannot write.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.onnx.export(model, inputs, path, opset_version=op,
                                      input_names=in_names, output_names=out_names,
                                      do_constant_folding=True)
                fix_roi_align_mode(path, op)
                onnx.checker.check_model(path)
                note = "ok" if not tried else "ok (" + "; ".join(tried) + ")"
                rows.append((name, fname, str(op), ",".join(in_col), ",".join(out_col),
                             source, note))
                break
            except Exception as e:
                if os.path.exists(path):
                    os.remove(path)
                tried.append(f"opset {op}: {first_line(e)}")
        else:
            rows.append((name, "-", str(opset), ",".join(in_col), ",".join(out_col), source,
                         "export-failed: " + "; ".join(tried)))
    return rows


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(int(os.environ.get("CORPUS_THREADS", "2")))
    models = dict(torchvision_models())
    models.update(transformers.BUILDERS)
    only = sys.argv[2:]
    unknown = [n for n in only if n not in models]
    if unknown:
        print("unknown models: " + " ".join(unknown), file=sys.stderr)
        return 2
    names = only or list(models)
    manifest = os.path.join(out_dir, "manifest.tsv")
    head = ["name", "file", "opset", "inputs", "outputs", "source", "status"]
    old = []
    if only:  # a partial run keeps the other rows (and make_trained.py's column)
        head, old = read_manifest(manifest, only, head)
    rows = []
    for name in names:
        t0 = time.time()
        try:
            got = export_one(out_dir, name, models[name])
        except Exception as e:
            traceback.print_exc()
            got = [(name, "-", str(op), "-", "-", "-", "export-failed: " + first_line(e))
                   for op in OPSETS]
        rows += got
        print(f"{name:34s} {time.time() - t0:6.1f}s  " +
              "  ".join(f"op{r[2]}:{r[6][:60]}" for r in got), flush=True)
    write_manifest(manifest, head, old, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
