#!/usr/bin/python3
"""A model that batching helps: an MLP of --layers Gemm+Relu layers of
--width units, its batch dimension dynamic ("N"). At batch 1 each layer is
a matrix-vector product that reads its whole weight matrix for one row;
batched, one read of the weights serves every row. For
bench/serve_bench.sh --mlp.

usage: make_mlp_model.py OUT.onnx [--width W] [--layers L]
Run with Debian's /usr/bin/python3 (its onnx package), outside the repo
(our onnx/ folder would shadow it)."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    w = a.width
    nodes, inits = [], []
    x = "x"
    for i in range(a.layers):
        wt = numpy_helper.from_array(
            (rng.standard_normal((w, w)) / np.sqrt(w)).astype(np.float32), f"w{i}")
        b = numpy_helper.from_array(np.zeros(w, np.float32), f"b{i}")
        inits += [wt, b]
        g = f"gemm{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [g], name=f"/fc{i}/Gemm",
                                      transB=1))
        last = i == a.layers - 1
        y = "y" if last else f"relu{i}"
        nodes.append(helper.make_node("Relu", [g], [y], name=f"/fc{i}/Relu"))
        x = y
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", w])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="cannprof bench")
    onnx.checker.check_model(m)
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
