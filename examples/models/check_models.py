#!/usr/bin/python3
"""Optional cross-check (no onnxruntime needed): evaluate each example .onnx
with a tiny numpy/torch-functional interpreter that follows ONNX operator
semantics (only the ops these models use) and compare with the stored
test_data_set_0/output_*.pb.

    /usr/bin/python3 examples/models/check_models.py            # all models
    /usr/bin/python3 examples/models/check_models.py X.onnx ...  # selected
"""
import sys, os, glob, numpy as np, onnx, torch, torch.nn.functional as F
from onnx import numpy_helper
def attrs(n): return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
def run(m, feeds):
    env = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    env.update(feeds)
    for n in m.graph.node:
        a = attrs(n); x = [env[i] if i else None for i in n.input]; op = n.op_type
        T = lambda v: torch.from_numpy(np.array(v))
        if op == "Constant": y = numpy_helper.to_array(a["value"])
        elif op in ("Add","Sub","Mul","Div","Pow"): y = getattr(np, {"Add":"add","Sub":"subtract","Mul":"multiply","Div":"divide","Pow":"power"}[op])(x[0], x[1]).astype(x[0].dtype)
        elif op == "Sqrt": y = np.sqrt(x[0])
        elif op == "Erf": y = torch.erf(T(x[0])).numpy()
        elif op == "Sigmoid": y = 1/(1+np.exp(-x[0]))
        elif op == "Relu": y = np.maximum(x[0], 0)
        elif op == "Clip": y = np.clip(x[0], x[1], x[2])
        elif op == "Softmax":
            ax = a.get("axis", -1); e = np.exp(x[0]-x[0].max(ax, keepdims=True)); y = e/e.sum(ax, keepdims=True)
        elif op == "ReduceMean": y = x[0].mean(tuple(a["axes"]), keepdims=bool(a.get("keepdims",1)))
        elif op == "MatMul": y = np.matmul(x[0], x[1])
        elif op == "Gemm":
            A = x[0].T if a.get("transA",0) else x[0]; B = x[1].T if a.get("transB",0) else x[1]
            y = a.get("alpha",1.0)*A@B + (a.get("beta",1.0)*x[2] if len(x)>2 else 0)
        elif op == "Conv":
            p = a.get("pads",[0,0,0,0]); assert p[0]==p[2] and p[1]==p[3]
            y = F.conv2d(T(x[0]), T(x[1]), T(x[2]) if len(x)>2 else None, stride=a.get("strides",1), padding=(p[0],p[1]), dilation=a.get("dilations",1), groups=a.get("group",1)).numpy()
        elif op == "MaxPool":
            p = a.get("pads",[0,0,0,0]); y = F.max_pool2d(T(x[0]), a["kernel_shape"], a["strides"], (p[0],p[1])).numpy()
        elif op == "GlobalAveragePool": y = x[0].mean((2,3), keepdims=True)
        elif op == "BatchNormalization":
            s = [1,-1,1,1]; y = (x[0]-x[3].reshape(s))/np.sqrt(x[4].reshape(s)+a.get("epsilon",1e-5))*x[1].reshape(s)+x[2].reshape(s)
        elif op == "InstanceNormalization":
            ax = tuple(range(2, x[0].ndim)); mu = x[0].mean(ax, keepdims=True); var = x[0].var(ax, keepdims=True)
            s = [1,-1]+[1]*(x[0].ndim-2); y = (x[0]-mu)/np.sqrt(var+a.get("epsilon",1e-5))*x[1].reshape(s)+x[2].reshape(s)
        elif op == "LayerNormalization":
            ax = a.get("axis",-1); axes = tuple(range(ax % x[0].ndim, x[0].ndim)); mu = x[0].mean(axes, keepdims=True); var = x[0].var(axes, keepdims=True)
            y = (x[0]-mu)/np.sqrt(var+a.get("epsilon",1e-5))*x[1] + (x[2] if len(x)>2 else 0)
        elif op == "Concat": y = np.concatenate(x, a["axis"])
        elif op == "Reshape":
            shp = [x[0].shape[i] if (s==0 and not a.get("allowzero",0)) else s for i,s in enumerate(x[1].tolist())]; y = x[0].reshape(shp)
        elif op == "Flatten": ax=a.get("axis",1); y = x[0].reshape(int(np.prod(x[0].shape[:ax])), -1)
        elif op == "Transpose": y = x[0].transpose(a["perm"])
        elif op == "Unsqueeze":
            y = x[0]
            axes = sorted(int(v) % (x[0].ndim+len(x[1])) for v in x[1])
            for ax_ in axes: y = np.expand_dims(y, ax_)
        elif op == "Shape": y = np.array(x[0].shape, dtype=np.int64)
        elif op == "Resize":
            assert a.get("mode",b"nearest")==b"nearest", a
            sc = x[2]; assert sc is not None and len(sc)==4, (x, a)
            assert a.get("nearest_mode", b"round_prefer_floor") == b"floor" and a.get("coordinate_transformation_mode") == b"asymmetric", a
            assert float(sc[2]).is_integer() and float(sc[3]).is_integer(), sc
            y = x[0].repeat(int(sc[2]),2).repeat(int(sc[3]),3)
        else: raise NotImplementedError(op)
        y = np.asarray(y)
        if y.dtype == np.float64: y = y.astype(np.float32)
        env[n.output[0]] = y
    return [env[o.name] for o in m.graph.output]
HERE = os.path.dirname(os.path.abspath(__file__))
files = sys.argv[1:] or sorted(glob.glob(os.path.join(HERE, "*.onnx")))
worst = 0.0
for name in files:
    m = onnx.load(name); base = name[:-5]
    ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(base+"/test_data_set_0/input_*.pb"))]
    names = [onnx.load_tensor(f).name for f in sorted(glob.glob(base+"/test_data_set_0/input_*.pb"))]
    outs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(base+"/test_data_set_0/output_*.pb"))]
    got = run(m, dict(zip(names, ins)))
    for g, r in zip(got, outs):
        assert g.shape == r.shape and g.dtype == r.dtype, (name, g.shape, r.shape, g.dtype, r.dtype)
        rel = float(np.abs(g - r).max() / np.abs(r).max())
        worst = max(worst, rel)
        print(f"{os.path.basename(name):<32} {str(r.shape):<18} max_abs_diff={np.abs(g - r).max():.3g} rel={rel:.3g}")
print("OK" if worst < 1e-4 else "MISMATCH")
sys.exit(0 if worst < 1e-4 else 1)
