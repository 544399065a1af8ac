#!/usr/bin/python3
"""Generate the example ONNX models and their reference test data for cannprof.

Run with Debian's python (needs the Debian packages python3-torch, python3-onnx,
python3-numpy; onnxruntime is NOT used):

    /usr/bin/python3 examples/models/make_models.py            # every model
    /usr/bin/python3 examples/models/make_models.py NAME ...   # only these

Works from any current directory: everything is written next to this script.
For every model NAME it writes

    NAME.onnx
    NAME/test_data_set_0/input_<i>.pb    (onnx TensorProto, named after the graph input)
    NAME/test_data_set_0/output_<i>.pb   (onnx TensorProto, named after the graph output)

exactly like ONNX's backend test cases.  Reference outputs are computed by
PyTorch eager in fp32 (model.eval(), torch.no_grad()) on the same inputs.
Everything is seeded, so the output is reproducible.
"""

import collections
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_ONNX_BYTES = 8 * 1024 * 1024

# Ops cannprof supports (default ONNX domain only).
SUPPORTED_OPS = {
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Erf", "Tanh", "Sigmoid",
    "Relu", "LeakyRelu", "Clip", "Softmax", "ReduceMean", "ReduceSum",
    "ReduceMax", "MatMul", "Gemm", "Conv", "ConvTranspose", "MaxPool",
    "AveragePool", "GlobalAveragePool", "BatchNormalization",
    "InstanceNormalization", "LayerNormalization", "Concat", "Split", "Slice",
    "Gather", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
    "Shape", "Expand", "Where", "Equal", "Cast", "Constant",
    "ConstantOfShape", "Identity", "Resize", "Pad", "Range",
}


def seed_everything(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def perturb_norm_affine(model, std=0.1):
    """Give norm layers non-trivial (but O(1)) affine params so the test data
    actually exercises gamma/beta (default init is weight=1, bias=0)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.GroupNorm, nn.LayerNorm, nn.BatchNorm2d)):
                if m.weight is not None:
                    m.weight.add_(torch.randn_like(m.weight) * std)
                if m.bias is not None:
                    m.bias.add_(torch.randn_like(m.bias) * std)


# --------------------------------------------------------------------------
# Shared building block: explicit (unfused) multi-head attention
# --------------------------------------------------------------------------
class ExplicitAttention(nn.Module):
    """q@k^T (*scale or /sqrt(d)) -> softmax -> @v with explicit reshape/transpose
    head split; deliberately NOT nn.MultiheadAttention / scaled_dot_product_attention."""

    def __init__(self, dim, heads, context_dim=None, qkv_bias=False,
                 scale_by_div=False):
        super().__init__()
        context_dim = dim if context_dim is None else context_dim
        assert dim % heads == 0
        self.heads = heads
        self.dim_head = dim // heads
        self.scale = self.dim_head ** -0.5
        self.scale_by_div = scale_by_div
        self.to_q = nn.Linear(dim, dim, bias=qkv_bias)
        self.to_k = nn.Linear(context_dim, dim, bias=qkv_bias)
        self.to_v = nn.Linear(context_dim, dim, bias=qkv_bias)
        self.to_out = nn.Linear(dim, dim)

    def _split(self, t):  # [B, N, C] -> [B, h, N, d]
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, self.dim_head).transpose(1, 2)

    def forward(self, x, context=None):
        context = x if context is None else context
        q = self._split(self.to_q(x))
        k = self._split(self.to_k(context))
        v = self._split(self.to_v(context))
        scores = q @ k.transpose(-1, -2)
        if self.scale_by_div:
            scores = scores / math.sqrt(self.dim_head)
        else:
            scores = scores * self.scale
        attn = scores.softmax(dim=-1)
        out = attn @ v                                   # [B, h, N, d]
        b, h, n, d = out.shape
        out = out.transpose(1, 2).reshape(b, n, h * d)
        return self.to_out(out)


# --------------------------------------------------------------------------
# 1. sd_unet_tiny
# --------------------------------------------------------------------------
class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb_dim, groups=8):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin, eps=1e-5)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb_proj = nn.Linear(temb_dim, cout)
        self.norm2 = nn.GroupNorm(groups, cout, eps=1e-5)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.act = nn.SiLU()
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(self.act(self.norm1(x)))
        h = h + self.temb_proj(self.act(temb))[:, :, None, None]
        h = self.conv2(self.act(self.norm2(h)))
        return self.skip(x) + h


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * mult)
        self.act = nn.GELU()  # exact (erf)
        self.fc2 = nn.Linear(dim * mult, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SpatialTransformer(nn.Module):
    """SD-style: GroupNorm -> proj_in (1x1 conv) -> tokens -> [LN -> self-attn,
    LN -> cross-attn, LN -> FF(GELU)] with residuals -> proj_out -> + input."""

    def __init__(self, ch, heads, context_dim, groups=8):
        super().__init__()
        self.norm = nn.GroupNorm(groups, ch, eps=1e-6)
        self.proj_in = nn.Conv2d(ch, ch, 1)
        self.norm1 = nn.LayerNorm(ch)
        self.attn1 = ExplicitAttention(ch, heads)
        self.norm2 = nn.LayerNorm(ch)
        self.attn2 = ExplicitAttention(ch, heads, context_dim=context_dim)
        self.norm3 = nn.LayerNorm(ch)
        self.ff = FeedForward(ch)
        self.proj_out = nn.Conv2d(ch, ch, 1)

    def forward(self, x, context):
        b, c, h, w = x.shape
        residual = x
        x = self.proj_in(self.norm(x))
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, c)     # [B, HW, C]
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context) + x
        x = self.ff(self.norm3(x)) + x
        x = x.reshape(b, h, w, c).permute(0, 3, 1, 2)
        return self.proj_out(x) + residual


class SDUNetTiny(nn.Module):
    def __init__(self, in_ch=4, ch=64, ch_mid=128, temb_dim=128, context_dim=64,
                 heads=4, groups=8):
        super().__init__()
        # Learned MLP on the raw timestep (a sinusoidal embedding would need
        # Sin/Cos, which are outside the supported op set).
        self.time_in = nn.Linear(1, temb_dim)
        self.time_act = nn.SiLU()
        self.time_out = nn.Linear(temb_dim, temb_dim)

        self.conv_in = nn.Conv2d(in_ch, ch, 3, padding=1)
        self.res_down = ResBlock(ch, ch, temb_dim, groups)
        self.attn_down = SpatialTransformer(ch, heads, context_dim, groups)
        self.downsample = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.res_mid = ResBlock(ch, ch_mid, temb_dim, groups)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.up_conv = nn.Conv2d(ch_mid, ch, 3, padding=1)
        self.res_up = ResBlock(2 * ch, ch, temb_dim, groups)
        self.attn_up = SpatialTransformer(ch, heads, context_dim, groups)
        self.norm_out = nn.GroupNorm(groups, ch)
        self.act_out = nn.SiLU()
        self.conv_out = nn.Conv2d(ch, in_ch, 3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states):
        t = (timestep / 1000.0).unsqueeze(-1)               # [1] -> [1, 1]
        temb = self.time_out(self.time_act(self.time_in(t)))

        h = self.conv_in(sample)
        h = self.res_down(h, temb)
        skip = self.attn_down(h, encoder_hidden_states)      # 32x32 = 1024 tokens
        h = self.downsample(skip)                            # 16x16
        h = self.res_mid(h, temb)
        h = self.up_conv(self.upsample(h))                   # back to 32x32
        h = torch.cat([h, skip], dim=1)
        h = self.res_up(h, temb)
        h = self.attn_up(h, encoder_hidden_states)
        return self.conv_out(self.act_out(self.norm_out(h)))


# --------------------------------------------------------------------------
# 2. resnet_tiny
# --------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetTiny(nn.Module):
    def __init__(self, num_classes=10, widths=(16, 32, 64)):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers = []
        cin = widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(cin, w, stride), BasicBlock(w, w, 1)]
            cin = w
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(self.flatten(self.avgpool(x)))


def calibrate_batchnorm(model, input_shape, batches=4, batch_size=8):
    """Give BatchNorm realistic (non-identity) running statistics by running a
    few seeded random batches in train mode (cumulative average)."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch_size, *input_shape[1:]))
    model.eval()


# --------------------------------------------------------------------------
# 3. transformer_encoder_op14 / _op17
# --------------------------------------------------------------------------
class EncoderLayer(nn.Module):
    """Post-LN (BERT-style) encoder layer with explicit attention math."""

    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.attn = ExplicitAttention(dim, heads, qkv_bias=True, scale_by_div=True)
        self.ln1 = nn.LayerNorm(dim, eps=1e-5)
        self.fc1 = nn.Linear(dim, ffn)
        self.act = nn.GELU()  # exact (erf)
        self.fc2 = nn.Linear(ffn, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        x = self.ln2(x + self.fc2(self.act(self.fc1(x))))
        return x


class TinyTransformerEncoder(nn.Module):
    def __init__(self, dim=64, heads=4, ffn=256, layers=2):
        super().__init__()
        self.layers = nn.ModuleList(
            [EncoderLayer(dim, heads, ffn) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


# --------------------------------------------------------------------------
# 4. nhwc_roundtrip
# --------------------------------------------------------------------------
class NHWCRoundTrip(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(16))
        self.bias = nn.Parameter(0.1 * torch.randn(16))
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.ln = nn.LayerNorm(32)
        self.conv4 = nn.Conv2d(32, 8, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        # per-channel affine done in NHWC ([C] broadcasts over the last dim)
        x = x.permute(0, 2, 3, 1)
        x = x * self.scale + self.bias
        x = x.permute(0, 3, 1, 2)
        x = self.relu(self.conv2(x))
        # round trip NCHW -> NHWC -> NCHW around a layout-agnostic op.  (A
        # literally empty permute/permute pair is fused away by torch's own
        # ONNX peephole pass, so a Clip (ReLU6) sits in between.)
        x = x.permute(0, 2, 3, 1)
        x = torch.clamp(x, 0.0, 6.0)
        x = x.permute(0, 3, 1, 2)
        x = self.relu(self.conv3(x))
        # LayerNorm over channels in NHWC
        x = x.permute(0, 2, 3, 1)
        x = self.ln(x)
        x = x.permute(0, 3, 1, 2)
        return self.conv4(x)


# --------------------------------------------------------------------------
# 5. launch_bound_tiny
# --------------------------------------------------------------------------
class TextEncoderTiny(nn.Module):
    """The first stage of the poster service (examples/pipelines/poster):
    token ids (int64 [1, 77], as cannprof's tokenize flowunit makes them)
    to what the denoiser reads: the text embedding, an initial latent drawn
    from it and the timestep.  Embedding -> LayerNorm -> Linear -> Tanh for
    the embedding; its mean over the tokens through two Linear layers for
    the latent (reshaped to [1, 4, 32, 32]) and the timestep ([1])."""

    def __init__(self, vocab=1000, dim=64, seq=77):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)
        self.to_latent = nn.Linear(dim, 4 * 32 * 32)
        self.to_t = nn.Linear(dim, 1)
        nn.init.normal_(self.to_latent.weight, 0.0, 2.0 * dim ** -0.5)
        nn.init.normal_(self.to_t.weight, 0.0, dim ** -0.5)

    def forward(self, ids):
        h = torch.tanh(self.proj(self.norm(self.embed(ids))))
        pooled = h.mean(dim=1)
        sample = self.to_latent(pooled).reshape(1, 4, 32, 32)
        timestep = (self.to_t(pooled).reshape(1) * 100.0 + 500.0)
        return h, sample, timestep


class VaeDecoderTiny(nn.Module):
    """The last model of the poster service: a latent [1, 4, 32, 32] to an
    image [1, 3, 128, 128] in 0..1 (Conv -> Relu -> 2x upsampling (Resize)
    -> Conv -> Relu -> 2x -> Conv -> Sigmoid)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 16, 3, padding=1)
        self.c3 = nn.Conv2d(16, 3, 3, padding=1)
        nn.init.normal_(self.c3.weight, 0.0, 0.3)

    def forward(self, latent):
        h = torch.relu(self.c1(latent))
        h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        h = torch.relu(self.c2(h))
        h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        return torch.sigmoid(self.c3(h) * 4.0)


class LaunchBoundTiny(nn.Module):
    """A long chain of tiny ops on a [1, 16] vector: every kernel does a few
    hundred FLOPs, so launching it (dispatch, waking threads) costs more than
    running it.  Each block is

        Gemm(16x16, bias) -> Clip(-3, 3) -> Mul(scale[16]) -> Add(x)
        -> Sigmoid -> Mul          (a SiLU on the residual sum)

    Conversion fuses Gemm+Clip into one FusedMatMul and leaves the other four
    ops alone (no pass fuses plain elementwise chains), so 16 blocks give 80
    kernels of well under 10 us each."""

    def __init__(self, dim=16, blocks=16):
        super().__init__()
        self.fcs = nn.ModuleList([nn.Linear(dim, dim) for _ in range(blocks)])
        self.scales = nn.ParameterList(
            [nn.Parameter(1.0 + 0.1 * torch.randn(dim)) for _ in range(blocks)])
        # Unit-gain weights: with the default (kaiming-uniform) init the
        # activations fade to a std below 0.1 over 16 blocks.
        for fc in self.fcs:
            nn.init.normal_(fc.weight, 0.0, dim ** -0.5)

    def forward(self, x):
        for fc, scale in zip(self.fcs, self.scales):
            h = torch.clamp(fc(x), -3.0, 3.0) * scale + x
            x = h * torch.sigmoid(h)
        return x


# --------------------------------------------------------------------------
# Export / test-data machinery
# --------------------------------------------------------------------------
def op_histogram(model):
    return collections.Counter(n.op_type for n in model.graph.node)


def graph_io(model):
    init_names = {i.name for i in model.graph.initializer}

    def shape(vi):
        return [d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in vi.type.tensor_type.shape.dim]

    ins = [(i.name, shape(i)) for i in model.graph.input if i.name not in init_names]
    outs = [(o.name, shape(o)) for o in model.graph.output]
    return ins, outs


def write_tensor(path, arr, name):
    tensor = numpy_helper.from_array(np.ascontiguousarray(arr), name=name)
    with open(path, "wb") as f:
        f.write(tensor.SerializeToString())


def export_model(name, model, inputs, input_names, output_names, opset,
                 do_constant_folding=True,
                 training=torch.onnx.TrainingMode.EVAL):
    model.eval()
    onnx_path = os.path.join(HERE, name + ".onnx")
    with torch.no_grad():
        outputs = model(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)

    with torch.no_grad():
        torch.onnx.export(
            model, tuple(inputs), onnx_path,
            export_params=True,
            opset_version=opset,
            do_constant_folding=do_constant_folding,
            training=training,
            input_names=input_names,
            output_names=output_names,
        )

    m = onnx.load(onnx_path)
    onnx.checker.check_model(m, full_check=True)

    ins, outs = graph_io(m)
    assert [n for n, _ in ins] == input_names, (ins, input_names)
    assert [n for n, _ in outs] == output_names, (outs, output_names)
    for (n, shp), t in zip(ins, inputs):
        assert shp == list(t.shape), (name, n, shp, list(t.shape))
    for (n, shp), t in zip(outs, outputs):
        assert shp == list(t.shape), (name, n, shp, list(t.shape))
    for imp in m.opset_import:
        assert imp.domain in ("", "ai.onnx"), (name, imp)
        assert imp.version == opset, (name, imp)
    hist = op_histogram(m)
    for node in m.graph.node:
        assert node.domain in ("", "ai.onnx"), (name, node.op_type, node.domain)
    unsupported = sorted(set(hist) - SUPPORTED_OPS)
    assert not unsupported, f"{name}: unsupported ops {unsupported}"
    size = os.path.getsize(onnx_path)
    assert size <= MAX_ONNX_BYTES, (name, size)

    data_dir = os.path.join(HERE, name, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    for old in os.listdir(data_dir):
        if old.endswith(".pb"):
            os.remove(os.path.join(data_dir, old))
    for i, (n, t) in enumerate(zip(input_names, inputs)):
        write_tensor(os.path.join(data_dir, f"input_{i}.pb"), t.numpy(), n)
    out_stds = []
    for i, (n, t) in enumerate(zip(output_names, outputs)):
        arr = t.detach().numpy().astype(np.float32)
        assert np.isfinite(arr).all(), (name, n)
        std = float(arr.std())
        assert arr.size == 1 or 0.1 <= std <= 10.0, (name, n, std)
        out_stds.append(std)
        write_tensor(os.path.join(data_dir, f"output_{i}.pb"), arr, n)

    return {
        "name": name, "model": m, "size": size, "hist": hist,
        "inputs": ins, "outputs": outs, "out_stds": out_stds,
        "params": sum(p.numel() for p in model.parameters()),
    }


def consumers(m):
    cons = collections.defaultdict(list)
    for node in m.graph.node:
        for i in node.input:
            cons[i].append(node)
    return cons


def producers(m):
    return {o: node for node in m.graph.node for o in node.output}


def count_attention_patterns(m):
    """Count MatMul -> (Mul|Div) -> Softmax -> MatMul chains."""
    prod, cons = producers(m), consumers(m)
    n = 0
    for node in m.graph.node:
        if node.op_type != "Softmax":
            continue
        scale = prod.get(node.input[0])
        if scale is None or scale.op_type not in ("Mul", "Div"):
            continue
        if not any(prod.get(i) is not None and prod[i].op_type == "MatMul"
                   for i in scale.input):
            continue
        if any(c.op_type == "MatMul" for c in cons[node.output[0]]):
            n += 1
    return n


def transpose_perms(m):
    perms = []
    for node in m.graph.node:
        if node.op_type == "Transpose":
            for a in node.attribute:
                if a.name == "perm":
                    perms.append(list(a.ints))
    return perms


# --------------------------------------------------------------------------
def make_module(name):
    """Build one example as a PyTorch module in eval mode, with the seeded
    weights and the inputs its test data uses. Returns (model, inputs,
    input_names, output_names, opset). The benchmark scripts in bench/ use
    this to time PyTorch eager on exactly the exported model."""
    if name == "sd_unet_tiny":
        seed_everything(0)
        model = SDUNetTiny()
        perturb_norm_affine(model)
        rng = np.random.RandomState(100)
        inputs = [
            torch.from_numpy(rng.randn(1, 4, 32, 32).astype(np.float32)),
            torch.tensor([421.0], dtype=torch.float32),
            torch.from_numpy(rng.randn(1, 77, 64).astype(np.float32)),
        ]
        names = ["sample", "timestep", "encoder_hidden_states"]
        return model.eval(), inputs, names, ["noise_pred"], 17
    if name == "resnet_tiny":
        seed_everything(1)
        model = ResNetTiny()
        perturb_norm_affine(model)
        calibrate_batchnorm(model, (1, 3, 64, 64))
        rng = np.random.RandomState(101)
        inputs = [torch.from_numpy(rng.randn(1, 3, 64, 64).astype(np.float32))]
        return model.eval(), inputs, ["input"], ["logits"], 13
    if name.startswith("transformer_encoder_op"):
        opset = int(name[len("transformer_encoder_op"):])
        seed_everything(2)
        model = TinyTransformerEncoder()
        perturb_norm_affine(model)
        rng = np.random.RandomState(102)
        inputs = [torch.from_numpy(rng.randn(1, 128, 64).astype(np.float32))]
        return model.eval(), inputs, ["x"], ["y"], opset
    if name == "nhwc_roundtrip":
        seed_everything(3)
        model = NHWCRoundTrip()
        perturb_norm_affine(model)
        rng = np.random.RandomState(103)
        inputs = [torch.from_numpy(rng.randn(1, 3, 64, 64).astype(np.float32))]
        return model.eval(), inputs, ["input"], ["output"], 13
    if name == "launch_bound_tiny":
        seed_everything(4)
        model = LaunchBoundTiny()
        rng = np.random.RandomState(104)
        inputs = [torch.from_numpy(rng.randn(1, 16).astype(np.float32))]
        return model.eval(), inputs, ["x"], ["y"], 13
    if name == "text_encoder_tiny":
        seed_everything(5)
        model = TextEncoderTiny()
        perturb_norm_affine(model)
        rng = np.random.RandomState(105)
        ids = np.zeros((1, 77), dtype=np.int64)
        ids[0, 0] = 1
        ids[0, 1:9] = rng.randint(2, 1000, size=8)
        inputs = [torch.from_numpy(ids)]
        return (model.eval(), inputs, ["input_ids"],
                ["encoder_hidden_states", "sample", "timestep"], 17)
    if name == "vae_decoder_tiny":
        seed_everything(6)
        model = VaeDecoderTiny()
        rng = np.random.RandomState(106)
        inputs = [torch.from_numpy(rng.randn(1, 4, 32, 32).astype(np.float32))]
        return model.eval(), inputs, ["latent"], ["image"], 17
    raise ValueError(f"unknown example model {name!r}")


def build_sd_unet_tiny():
    # opset 17
    model, inputs, names, outs, opset = make_module("sd_unet_tiny")
    r = export_model("sd_unet_tiny", model, inputs, names, outs, opset=opset)
    h = r["hist"]
    assert count_attention_patterns(r["model"]) == 4, "attention pattern missing"
    assert h["InstanceNormalization"] >= 1 and h["LayerNormalization"] >= 1
    assert h["Sigmoid"] >= 1 and "Erf" in h and "Resize" in h
    assert r["params"] <= 1_500_000, r["params"]
    return r


def build_resnet_tiny():
    # opset 13, BatchNormalization nodes kept
    model, inputs, names, outs, opset = make_module("resnet_tiny")
    # TrainingMode.EVAL makes torch run its eval peephole, which folds every
    # BatchNorm into the preceding Conv.  PRESERVE (with the model in eval())
    # still exports inference-mode BatchNormalization but skips that folding.
    r = export_model("resnet_tiny", model, inputs, names, outs,
                     opset=opset, do_constant_folding=False,
                     training=torch.onnx.TrainingMode.PRESERVE)
    n_bn = sum(isinstance(mm, nn.BatchNorm2d) for mm in model.modules())
    assert r["hist"]["BatchNormalization"] == n_bn, (r["hist"], n_bn)
    for node in r["model"].graph.node:
        if node.op_type == "BatchNormalization":
            assert len(node.output) == 1  # inference-mode BN
    return r


def build_transformer_encoder(opset):
    # the same weights and data at opset 14 and 17
    name = f"transformer_encoder_op{opset}"
    model, inputs, names, outs, _ = make_module(name)
    r = export_model(name, model, inputs, names, outs, opset=opset)
    h = r["hist"]
    assert count_attention_patterns(r["model"]) == 2
    assert "Erf" in h, h
    if opset == 14:
        for op in ("ReduceMean", "Pow", "Sqrt", "Erf"):
            assert op in h, (op, h)
        assert "LayerNormalization" not in h, h
    else:
        assert h["LayerNormalization"] == 4, h
    return r


def build_nhwc_roundtrip():
    # opset 13
    model, inputs, names, outs, opset = make_module("nhwc_roundtrip")
    r = export_model("nhwc_roundtrip", model, inputs, names, outs, opset=opset)
    perms = transpose_perms(r["model"])
    assert perms.count([0, 2, 3, 1]) == 3 and perms.count([0, 3, 1, 2]) == 3, perms
    return r


def build_launch_bound_tiny():
    # opset 13; tiny on purpose: many launches, almost no work per kernel
    model, inputs, names, outs, opset = make_module("launch_bound_tiny")
    r = export_model("launch_bound_tiny", model, inputs, names, outs, opset=opset)
    h = r["hist"]
    blocks = len(model.fcs)
    assert h["Gemm"] == blocks and h["Clip"] == blocks and h["Sigmoid"] == blocks, h
    assert h["Mul"] == 2 * blocks and h["Add"] == blocks, h
    # Clip's min and max arrive as Constant nodes (folded by the converter)
    assert sum(v for k, v in h.items() if k != "Constant") == 6 * blocks, h
    assert r["size"] <= 64 * 1024, r["size"]
    return r


def build_text_encoder_tiny():
    # opset 17: int64 ids in (the tokenize flowunit's), three outputs
    model, inputs, names, outs, opset = make_module("text_encoder_tiny")
    r = export_model("text_encoder_tiny", model, inputs, names, outs, opset=opset)
    assert "Gather" in r["hist"] and r["hist"]["LayerNormalization"] == 1, r["hist"]
    return r


def build_vae_decoder_tiny():
    # opset 17: two nearest 2x Resizes
    model, inputs, names, outs, opset = make_module("vae_decoder_tiny")
    r = export_model("vae_decoder_tiny", model, inputs, names, outs, opset=opset)
    assert r["hist"]["Resize"] == 2 and r["hist"]["Conv"] == 3, r["hist"]
    return r


# Every example, in the order the summary lists them.  Each builder is
# seeded on its own (make_module), so building one model alone writes the
# same bytes as building all of them.
BUILDERS = {
    "sd_unet_tiny": build_sd_unet_tiny,
    "resnet_tiny": build_resnet_tiny,
    "transformer_encoder_op14": lambda: build_transformer_encoder(14),
    "transformer_encoder_op17": lambda: build_transformer_encoder(17),
    "nhwc_roundtrip": build_nhwc_roundtrip,
    "launch_bound_tiny": build_launch_bound_tiny,
    "text_encoder_tiny": build_text_encoder_tiny,
    "vae_decoder_tiny": build_vae_decoder_tiny,
}
MODEL_NAMES = list(BUILDERS)


def build_all(names=None):
    return [BUILDERS[n]() for n in (names or MODEL_NAMES)]


def print_summary(results):
    print()
    print(f"{'model':<26} {'bytes':>9} {'params':>9}  inputs -> outputs  (output std)")
    print("-" * 100)
    for r in results:
        ins = ", ".join(f"{n}{s}" for n, s in r["inputs"])
        outs = ", ".join(f"{n}{s}" for n, s in r["outputs"])
        stds = ", ".join(f"{s:.4f}" for s in r["out_stds"])
        opsets = ",".join(f"{i.domain or 'ai.onnx'}:{i.version}"
                          for i in r["model"].opset_import)
        print(f"{r['name']:<26} {r['size']:>9} {r['params']:>9}  "
              f"{ins} -> {outs}  (std {stds})  [{opsets}]")
        hist = ", ".join(f"{k}:{v}" for k, v in sorted(r["hist"].items()))
        print(f"    nodes={sum(r['hist'].values())}  {hist}")
    print()


def main(argv):
    import argparse
    import warnings
    ap = argparse.ArgumentParser(description="Generate the example ONNX models "
                                 "and their test_data_set_0.")
    ap.add_argument("models", nargs="*", metavar="NAME",
                    help="models to (re)generate (default: all): "
                    + ", ".join(MODEL_NAMES))
    args = ap.parse_args(argv)
    unknown = [n for n in args.models if n not in BUILDERS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; "
                 f"known: {', '.join(MODEL_NAMES)}")
    warnings.filterwarnings("ignore", message="The shape inference of prim::Constant")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    results = build_all(args.models)
    print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
