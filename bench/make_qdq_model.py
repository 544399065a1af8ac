#!/usr/bin/python3
"""A QDQ convolution model as ONNX Runtime's static quantizer writes it
(QuantizeLinear/DequantizeLinear around every Conv, u8 activations with a
zero point, per-channel s8 weights with reduce_range, int32 biases as
DequantizeLinear of x_scale * w_scale), for bench/qdq_bench.sh.

usage: make_qdq_model.py OUT.onnx [--channels C] [--size HW] [--layers L]
Run with Debian's /usr/bin/python3 (its onnx package), outside the repo
(our onnx/ folder would shadow it)."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    c, hw = a.channels, a.size
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    x_scale = np.float32(8.0 / 255.0)
    init("x_scale", np.array(x_scale, np.float32))
    init("x_zp", np.array(128, np.uint8))
    nodes.append(helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["q0"]))
    cur, cur_scale = "q0", "x_scale"
    for i in range(a.layers):
        nodes.append(helper.make_node("DequantizeLinear", [cur, cur_scale, "x_zp"], [f"a{i}"]))
        w = rng.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.05
        ws = (np.abs(w).reshape(c, -1).max(axis=1) / 63.0).astype(np.float32)  # reduce_range
        wq = np.clip(np.rint(w / ws[:, None, None, None]), -63, 63).astype(np.int8)
        init(f"w{i}_q", wq)
        init(f"w{i}_s", ws)
        init(f"w{i}_zp", np.zeros(c, np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [f"w{i}_q", f"w{i}_s", f"w{i}_zp"],
                                      [f"w{i}"], axis=0))
        b = rng.standard_normal(c).astype(np.float32) * 0.1
        bs = (x_scale * ws).astype(np.float32)
        init(f"b{i}_q", np.rint(b / bs).astype(np.int32))
        init(f"b{i}_s", bs)
        nodes.append(helper.make_node("DequantizeLinear", [f"b{i}_q", f"b{i}_s"], [f"b{i}"],
                                      axis=0))
        nodes.append(helper.make_node("Conv", [f"a{i}", f"w{i}", f"b{i}"], [f"y{i}"],
                                      pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        nodes.append(helper.make_node("QuantizeLinear", [f"y{i}", "x_scale", "x_zp"], [f"q{i+1}"]))
        cur = f"q{i+1}"
    nodes.append(helper.make_node("DequantizeLinear", [cur, "x_scale", "x_zp"], ["y"]))
    g = helper.make_graph(nodes, "qdq_conv", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
    ], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
