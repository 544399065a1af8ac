#!/usr/bin/env python3
"""A slower twin of a model, for bench/validate_calibration.sh.

The twin takes the same inputs and computes the same outputs, plus a
ballast: a chain of K Sigmoid nodes over the first FRACTION of the
elements of its first input, reduced to one number, multiplied by zero and
added to its first output. The ballast is
extra work that no conversion knob removes (the constant folder cannot
fold it: it depends on the input), whose cost grows with K on every
machine, so the calibration can pick the fraction for a change of about
5%.
Conversion knobs will not do for that: whether a fusion or a layout is
faster depends on the machine (on an AVX2 host some are slower).

usage: make_slow_variant.py IN.onnx OUT.onnx K FRACTION
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    args = sys.argv[1:]
    try:
        src, dst, k, frac = args[0], args[1], int(args[2]), float(args[3])
    except (IndexError, ValueError):
        sys.exit(__doc__.strip().splitlines()[-1])
    if len(args) != 4 or k < 1 or not 0 < frac <= 1:
        sys.exit(__doc__.strip().splitlines()[-1])
    m = onnx.load(src)
    g = m.graph
    x, y = g.input[0], g.output[0]
    if x.type.tensor_type.elem_type != TensorProto.FLOAT or \
            y.type.tensor_type.elem_type != TensorProto.FLOAT:
        sys.exit("make_slow_variant: the first input and output must be float32")
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    if not shape or any(d <= 0 for d in shape):
        sys.exit("make_slow_variant: the first input needs a static shape")
    n = max(1, round(frac * int(np.prod(shape))))
    g.initializer.extend([
        numpy_helper.from_array(np.array([0], np.int64), "ballast__start"),
        numpy_helper.from_array(np.array([n], np.int64), "ballast__end"),
        numpy_helper.from_array(np.array([1], np.int64), "ballast__axis"),
    ])
    nodes = [
        helper.make_node("Flatten", [x.name], ["ballast__flat"], axis=0),
        helper.make_node("Slice", ["ballast__flat", "ballast__start", "ballast__end",
                                   "ballast__axis"], ["ballast__part"]),
    ]
    prev = "ballast__part"
    for i in range(k):
        out = f"ballast__{i}"
        nodes.append(helper.make_node("Sigmoid", [prev], [out]))
        prev = out
    g.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), "ballast__zero"))
    inner = y.name + "__before_ballast"
    for node in g.node:
        node.output[:] = [inner if n == y.name else n for n in node.output]
        node.input[:] = [inner if n == y.name else n for n in node.input]
    nodes += [
        helper.make_node("ReduceMax", [prev], ["ballast__max"], keepdims=0),
        helper.make_node("Mul", ["ballast__max", "ballast__zero"], ["ballast__nothing"]),
        helper.make_node("Add", [inner, "ballast__nothing"], [y.name]),
    ]
    g.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, dst)


if __name__ == "__main__":
    main()
