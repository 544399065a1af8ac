#!/usr/bin/python3
"""Small If/Loop/Scan models for tests/onnx/test_control.c and the fuzz
seeds of the onnx target. Run with Debian's /usr/bin/python3 (onnx 1.12)
from outside the repository (our onnx/ folder shadows the package):
    cd /tmp && /usr/bin/python3 /path/to/tests/onnx/control/make_models.py DIR
Writes DIR/*.onnx; the committed copies were made this way."""
import sys, os
import numpy as np
from onnx import helper as h, TensorProto as T, numpy_helper as nh, save

out = sys.argv[1]
F, B, I64 = T.FLOAT, T.BOOL, T.INT64


def vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def model(graph, opset=13):
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], producer_name="cannprof-tests")
    m.ir_version = 7
    return m


def write(name, m):
    save(m, os.path.join(out, name + ".onnx"))


w = nh.from_array(np.array([[1, 2, 3], [4, 5, 6]], np.float32), "w")


def branches(then_op="Add", else_op="Sub"):
    tb = h.make_graph([h.make_node(then_op, ["x", "w"], ["t_y"], name="then_add")], "then",
                      [], [vi("t_y", F, [2, 3])])
    eb = h.make_graph([h.make_node(else_op, ["x", "w"], ["e_y"], name="else_sub")], "else",
                      [], [vi("e_y", F, [2, 3])])
    return tb, eb


# 1. If on a constant condition, branches reading outer x and w.
tb, eb = branches()
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
                 "if_const", [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                 [w, nh.from_array(np.array(True), "c")])
write("if_const", model(g))

# 2. If on a run-time condition (both branches kept).
tb, eb = branches()
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
                 "if_input", [vi("c", B, []), vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [w])
write("if_input", model(g))

# 3. A Loop of 3 iterations whose body holds an If (nested) reading x from
#    the model's graph (two levels up): acc += flag ? x : -x; scan out acc.
inner_t = h.make_graph([h.make_node("Identity", ["x"], ["it_y"], name="inner_then")], "it", [],
                       [vi("it_y", F, [2, 3])])
inner_e = h.make_graph([h.make_node("Neg", ["x"], ["ie_y"], name="inner_else")]
                       if False else [h.make_node("Sub", ["zero", "x"], ["ie_y"], name="inner_else")],
                       "ie", [], [vi("ie_y", F, [2, 3])])
body = h.make_graph(
    [h.make_node("If", ["flag"], ["d"], name="inner_if", then_branch=inner_t, else_branch=inner_e),
     h.make_node("Add", ["acc_in", "d"], ["acc_out"], name="accumulate"),
     h.make_node("Identity", ["acc_out"], ["scan_out"], name="emit"),
     h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going")],
    "body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [2, 3])],
    [vi("cond_out", B, []), vi("acc_out", F, [2, 3]), vi("scan_out", F, [2, 3])])
g = h.make_graph([h.make_node("Loop", ["m", "", "acc0"], ["acc", "trace"], name="loop", body=body)],
                 "nested_loop", [vi("flag", B, []), vi("x", F, [2, 3]), vi("acc0", F, [2, 3])],
                 [vi("acc", F, [2, 3]), vi("trace", F, [3, 2, 3])],
                 [nh.from_array(np.array(3, np.int64), "m"),
                  nh.from_array(np.zeros((2, 3), np.float32), "zero")])
write("nested_loop", model(g))

# 4. Scan (opset 11): running sum over axis 1 of x [2, 4, 3], backwards,
#    scan output along axis 1.
sbody = h.make_graph([h.make_node("Add", ["s_in", "xs"], ["s_out"], name="step"),
                      h.make_node("Identity", ["s_out"], ["ys"], name="emit")],
                     "sbody", [vi("s_in", F, [2, 3]), vi("xs", F, [2, 3])],
                     [vi("s_out", F, [2, 3]), vi("ys", F, [2, 3])])
g = h.make_graph([h.make_node("Scan", ["s0", "x"], ["s", "y"], name="scan", body=sbody,
                              num_scan_inputs=1, scan_input_axes=[1], scan_input_directions=[1],
                              scan_output_axes=[1])],
                 "scan_sum", [vi("s0", F, [2, 3]), vi("x", F, [2, 4, 3])],
                 [vi("s", F, [2, 3]), vi("y", F, [2, 4, 3])])
write("scan_sum", model(g, 11))

# ---- malformed --------------------------------------------------------------
# 5. A Loop body with one input too few.
bad = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"], name="c"),
                    h.make_node("Identity", ["cond_in"], ["v_out"], name="v")],
                   "body", [vi("i", I64, []), vi("cond_in", B, [])],
                   [vi("cond_out", B, []), vi("v_out", B, [])])
g = h.make_graph([h.make_node("Loop", ["m", "", "v0"], ["v"], name="bad_loop", body=bad)],
                 "bad_loop_inputs", [vi("v0", B, [])], [vi("v", B, [])],
                 [nh.from_array(np.array(2, np.int64), "m")])
write("bad_loop_inputs", model(g))

# 6. An If without else_branch.
tb, _ = branches()
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="half_if", then_branch=tb)],
                 "bad_if_missing_else", [vi("c", B, []), vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                 [w])
write("bad_if_missing_else", model(g))

# 7. A branch reading a name no graph defines.
tb = h.make_graph([h.make_node("Add", ["x", "nowhere"], ["t_y"], name="reads_nowhere")], "then",
                  [], [vi("t_y", F, [2, 3])])
_, eb = branches()
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="lost_if", then_branch=tb, else_branch=eb)],
                 "bad_if_unresolved", [vi("c", B, []), vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                 [w])
write("bad_if_unresolved", model(g))

# 8. Ifs nested 20 deep.
def leaf(d):
    return h.make_graph([h.make_node("Identity", ["x"], ["l%d" % d], name="leaf%d" % d)],
                        "leaf%d" % d, [], [vi("l%d" % d, F, [2, 3])])


sub = leaf(20)
for d in range(19, -1, -1):
    node = h.make_node("If", ["c"], ["y%d" % d], name="if%d" % d, then_branch=sub,
                       else_branch=leaf(d))
    if d == 0:
        break
    sub = h.make_graph([node], "g%d" % d, [], [vi("y%d" % d, F, [2, 3])])
g = h.make_graph([node], "bad_deep", [vi("c", B, []), vi("x", F, [2, 3])], [vi("y0", F, [2, 3])])
write("bad_deep", model(g))

# 9. A Sequence op inside a Loop body.
sbad = h.make_graph([h.make_node("SequenceEmpty", [], ["seq"], name="make_seq"),
                     h.make_node("Identity", ["cond_in"], ["cond_out"], name="c"),
                     h.make_node("Identity", ["v_in"], ["v_out"], name="v")],
                    "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [1])],
                    [vi("cond_out", B, []), vi("v_out", F, [1])])
g = h.make_graph([h.make_node("Loop", ["m", "", "v0"], ["v"], name="seq_loop", body=sbad)],
                 "bad_seq_in_loop", [vi("v0", F, [1])], [vi("v", F, [1])],
                 [nh.from_array(np.array(2, np.int64), "m")])
write("bad_seq_in_loop", model(g))

# ---- shapes known only at run time (dynamic plans, runner/cpu/plan_dynamic.c) ----
# 10. The positive elements of x: NonZero's count decides the output's length.
g = h.make_graph([h.make_node("Constant", [], ["zero_f"], name="zero_c",
                              value=nh.from_array(np.array(0, np.float32))),
                  h.make_node("Greater", ["x", "zero_f"], ["pos"], name="positive"),
                  h.make_node("NonZero", ["pos"], ["where"], name="where"),
                  h.make_node("Squeeze", ["where", "ax0"], ["idx"], name="flat"),
                  h.make_node("Gather", ["x", "idx"], ["y"], name="pick", axis=0)],
                 "dyn_nonzero", [vi("x", F, [6])], [vi("y", F, ["n"])],
                 [nh.from_array(np.array([0], np.int64), "ax0")])
write("dyn_nonzero", model(g))

# 11. An If on a run-time condition whose branches differ in shape: x, or
#     x twice along axis 0.
tb = h.make_graph([h.make_node("Identity", ["x"], ["t_y"], name="same")], "then", [],
                  [vi("t_y", F, [2, 3])])
eb = h.make_graph([h.make_node("Concat", ["x", "x"], ["e_y"], name="twice", axis=0)], "else", [],
                  [vi("e_y", F, [4, 3])])
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
                 "dyn_if_shapes", [vi("c", B, []), vi("x", F, [2, 3])], [vi("y", F, ["r", 3])])
write("dyn_if_shapes", model(g))

# 12. A Loop whose trip count is an input and whose carried value grows:
#     acc = [0, 0, 1, ..., m-1] (one more element per iteration), and the
#     scan output stacks 2*i as [m, 1].
body = h.make_graph(
    [h.make_node("Cast", ["i"], ["fi"], name="as_float", to=F),
     h.make_node("Reshape", ["fi", "one"], ["fi1"], name="as_vector"),
     h.make_node("Concat", ["acc_in", "fi1"], ["acc_out"], name="grow", axis=0),
     h.make_node("Add", ["fi1", "fi1"], ["twice"], name="double"),
     h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going")],
    "body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, ["k"])],
    [vi("cond_out", B, []), vi("acc_out", F, ["k1"]), vi("twice", F, [1])],
    [nh.from_array(np.array([1], np.int64), "one")])
g = h.make_graph([h.make_node("Loop", ["m", "", "acc0"], ["acc", "trace"], name="grow_loop",
                              body=body)],
                 "dyn_loop", [vi("m", I64, []), vi("acc0", F, [1])],
                 [vi("acc", F, ["a"]), vi("trace", F, ["m", 1])])
write("dyn_loop", model(g))

# 13. NonMaxSuppression with no declared row count: boxes [1, 4, 4],
#     scores [1, 1, 4], at most 3 per class, IoU 0.5.
g = h.make_graph([h.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou"],
                              ["sel"], name="nms")],
                 "dyn_nms", [vi("boxes", F, [1, 4, 4]), vi("scores", F, [1, 1, 4])],
                 [vi("sel", I64, ["k", 3])],
                 [nh.from_array(np.array([3], np.int64), "max_out"),
                  nh.from_array(np.array([0.5], np.float32), "iou")])
write("dyn_nms", model(g, 11))

# 14. An If on a run-time condition whose then_branch reorders the rows of
#     an outer weight (Slice + Concat, as PyTorch's LSTM export reorders
#     gates) before a MatMul; the else branch uses the weight as it is.
#     The conversion folds the reordering inside the branch.
gate_consts = [h.make_node("Constant", [], [nm], name=nm + "_c", value=nh.from_array(np.array(v, np.int64)))
               for nm, v in [("s0", [0]), ("s2", [2]), ("s4", [4]), ("ax", [0])]]
tb = h.make_graph(gate_consts +
                  [h.make_node("Slice", ["w", "s0", "s2", "ax"], ["top"], name="top_rows"),
                   h.make_node("Slice", ["w", "s2", "s4", "ax"], ["bottom"], name="bottom_rows"),
                   h.make_node("Concat", ["bottom", "top"], ["w_swapped"], name="swap", axis=0),
                   h.make_node("MatMul", ["x", "w_swapped"], ["t_y"], name="t_mm")],
                  "then", [], [vi("t_y", F, [1, 4])])
eb = h.make_graph([h.make_node("MatMul", ["x", "w"], ["e_y"], name="e_mm")], "else", [],
                  [vi("e_y", F, [1, 4])])
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
                 "if_gates", [vi("c", B, []), vi("x", F, [1, 4])], [vi("y", F, [1, 4])],
                 [nh.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")])
write("if_gates", model(g))

# 15. An If on a run-time condition whose branches are Conv -> Relu on
#     outer weights, as Silero VAD's sample-rate branches are: a full
#     1-D conv in then_branch, a depthwise one in else_branch. The
#     conversion fuses each chain inside its branch into one FusedConv.
rng = np.random.default_rng(15)
tb = h.make_graph([h.make_node("Conv", ["x", "wf", "bf"], ["t_c"], name="t_conv", pads=[1, 1]),
                   h.make_node("Relu", ["t_c"], ["t_y"], name="t_relu")],
                  "then", [], [vi("t_y", F, [1, 4, 6])])
eb = h.make_graph([h.make_node("Conv", ["x", "wd"], ["e_c"], name="e_conv", pads=[1, 1], group=4),
                   h.make_node("Relu", ["e_c"], ["e_y"], name="e_relu")],
                  "else", [], [vi("e_y", F, [1, 4, 6])])
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
                 "if_conv", [vi("c", B, []), vi("x", F, [1, 4, 6])], [vi("y", F, [1, 4, 6])],
                 [nh.from_array(rng.standard_normal((4, 4, 3)).astype(np.float32), "wf"),
                  nh.from_array(rng.standard_normal(4).astype(np.float32), "bf"),
                  nh.from_array(rng.standard_normal((4, 1, 3)).astype(np.float32), "wd")])
write("if_conv", model(g))

# 16. An If on a run-time condition whose else_branch cannot take x's shape
#     (a Reshape of 6 elements to [2, 4]), as Silero VAD's 8 kHz branch
#     cannot take a 16 kHz chunk: then_branch's shapes stand, the plan stays
#     static, and a run that takes else_branch fails naming it.
tb = h.make_graph([h.make_node("Relu", ["x"], ["t_y"], name="t_relu")], "then", [],
                  [vi("t_y", F, [1, 6])])
eb = h.make_graph([h.make_node("Reshape", ["x", "shape24"], ["e_y"], name="e_reshape")], "else",
                  [], [vi("e_y", F, [2, 4])],
                  [nh.from_array(np.array([2, 4], np.int64), "shape24")])
g = h.make_graph([h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
                 "if_bad_branch", [vi("c", B, []), vi("x", F, [1, 6])], [vi("y", F, None)])
write("if_bad_branch", model(g))
