/* Kernel harness cases of what the conversion passes make: fused ops,
 * layouts and FusedAttention (included by test_kernel_harness.c). */
#ifndef CP_TESTS_HARNESS_CASES_PASSES_H
#define CP_TESTS_HARNESS_CASES_PASSES_H

/* ---- fused ops (FusionPasses: FusedConv, FusedMatMul, GroupNormalization,
 * Gelu) ---------------------------------------------------------------------- */

/* A node of cannprof's own domain; outputs are created like N's. */
static int32_t NF(struct cp_graph *g, const char *op, const char *const *ins,
                  const char *const *outs)
{
    int32_t in[8], out[2], idx;
    size_t ni = 0, no = 0;
    for (; ins[ni]; ni++)
        in[ni] = ins[ni][0] ? cp_graph_find_tensor(g, ins[ni]) : -1;
    for (; outs[no]; no++) {
        out[no] = cp_graph_find_tensor(g, outs[no]);
        if (out[no] < 0)
            out[no] = gb_tensor(g, outs[no], CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    }
    const char *origin = "n";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "n", op, CP_DOMAIN, in, ni, out, no, &origin, 1, &idx, &d),
                 CP_OK, "%s", d.msg);
    return idx;
}

static void c_fconv_relu_res_after(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 10, 10));
    W(g, "w", 4, D(16, 16, 3, 3));
    W(g, "b", 1, D(16));
    X(g, "r", 4, D(1, 16, 10, 10));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b", "r"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "Relu");
}
static void c_fconv_res_first_silu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 9, 9));
    W(g, "w", 4, D(16, 8, 3, 3));
    X(g, "r", 4, D(1, 16, 5, 5));
    int32_t n = NF(g, "FusedConv", I("x", "w", "", "r"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "strides", 2, 2);
    cp_node_set_string(g, n, "activation", "SiLU");
    cp_node_set_int(g, n, "residual_first", 1);
}
static void c_fthinconv_res_first_sigmoid(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 16, 3));
    W(g, "w", 3, D(10, 16, 3));
    W(g, "b", 1, D(10));
    X(g, "r", 3, D(1, 10, 3));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b", "r"), I("y"));
    INTS(g, n, "pads", 1, 1);
    cp_node_set_string(g, n, "activation", "Sigmoid");
    cp_node_set_int(g, n, "residual_first", 1);
}
static void c_fthinconv_relu_res_after_2d(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 6, 2, 2));
    W(g, "w", 4, D(8, 6, 2, 2));
    X(g, "r", 4, D(1, 8, 1, 1));
    int32_t n = NF(g, "FusedConv", I("x", "w", "", "r"), I("y"));
    cp_node_set_string(g, n, "activation", "Relu");
}
static void c_fconv_clip(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 16, 16));
    W(g, "w", 4, D(16, 3, 3, 3));
    W(g, "b", 1, D(16));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "Clip");
    cp_node_set_float(g, n, "activation_alpha", 0.0f);
    cp_node_set_float(g, n, "activation_beta", 0.5f);
}
static void c_fconv_leaky_group(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 8, 8));
    W(g, "w", 4, D(8, 2, 3, 3));
    int32_t n = NF(g, "FusedConv", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 4);
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "LeakyRelu");
    cp_node_set_float(g, n, "activation_alpha", 0.1f);
}
static void c_fconv_gelu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 6, 6));
    W(g, "w", 4, D(32, 16, 1, 1));
    W(g, "b", 1, D(32));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b"), I("y"));
    cp_node_set_string(g, n, "activation", "Gelu");
}
static void c_fconv_sigmoid_tanh_gelu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 6, 6));
    W(g, "w", 4, D(16, 16, 3, 3));
    X(g, "r", 4, D(1, 16, 6, 6));
    int32_t n = NF(g, "FusedConv", I("x", "w", "", "r"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "GeluTanh");
}
static void c_fconv_sigmoid(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 6, 6));
    W(g, "w", 4, D(16, 16, 3, 3));
    int32_t n = NF(g, "FusedConv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "Sigmoid");
}
/* Depthwise FusedConv: the C kernel's activation and residual, both
 * orders (the residual may share the output's buffer). */
static void c_fdwconv_relu_res(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 16, 12));
    W(g, "w", 3, D(16, 1, 5));
    W(g, "b", 1, D(16));
    X(g, "r", 3, D(1, 16, 12));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b", "r"), I("y"));
    cp_node_set_int(g, n, "group", 16);
    INTS(g, n, "pads", 2, 2);
    cp_node_set_string(g, n, "activation", "Relu");
}
static void c_fdwconv_res_first_silu(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 8, 9, 9));
    W(g, "w", 4, D(8, 1, 3, 3));
    X(g, "r", 4, D(2, 8, 5, 5));
    int32_t n = NF(g, "FusedConv", I("x", "w", "", "r"), I("y"));
    cp_node_set_int(g, n, "group", 8);
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "strides", 2, 2);
    cp_node_set_string(g, n, "activation", "SiLU");
    cp_node_set_int(g, n, "residual_first", 1);
}
/* The activations ONNX's own ops bring (HardSwish ... Tanh), as FusedConv
 * post-ops: one oneDNN eltwise each, HardSigmoid two (linear, clip). */
static void fconv_act(struct cp_graph *g, const char *act, float alpha, float beta, bool residual)
{
    X(g, "x", 4, D(1, 16, 7, 7));
    W(g, "w", 4, D(16, 16, 3, 3));
    W(g, "b", 1, D(16));
    if (residual)
        X(g, "r", 4, D(1, 16, 7, 7));
    int32_t n = NF(g, "FusedConv", residual ? I("x", "w", "b", "r") : I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", act);
    if (alpha == alpha)
        cp_node_set_float(g, n, "activation_alpha", alpha);
    if (beta == beta)
        cp_node_set_float(g, n, "activation_beta", beta);
}
static void c_fconv_hard_swish(struct cp_graph *g)
{
    fconv_act(g, "HardSwish", NAN, NAN, false);
}
static void c_fconv_hard_sigmoid_res(struct cp_graph *g)
{
    fconv_act(g, "HardSigmoid", 1.0f / 6.0f, 0.5f, true);
}
static void c_fconv_elu(struct cp_graph *g)
{
    fconv_act(g, "Elu", 0.7f, NAN, false);
}
static void c_fconv_softplus(struct cp_graph *g)
{
    fconv_act(g, "Softplus", NAN, NAN, false);
}
static void c_fconv_mish_res(struct cp_graph *g)
{
    fconv_act(g, "Mish", NAN, NAN, true);
}
static void c_fconv_tanh(struct cp_graph *g)
{
    fconv_act(g, "Tanh", NAN, NAN, false);
}
static void c_fmm_hard_sigmoid_default(struct cp_graph *g)
{
    X(g, "a", 2, D(9, 40));
    W(g, "w", 2, D(40, 24));
    W(g, "b", 1, D(24));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "b"), I("y"));
    cp_node_set_string(g, n, "activation", "HardSigmoid"); /* alpha 0.2, beta 0.5 */
}
static void c_fmm_hard_swish_res(struct cp_graph *g)
{
    X(g, "a", 2, D(9, 40));
    W(g, "w", 2, D(40, 24));
    X(g, "r", 2, D(9, 24));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "", "r"), I("y"));
    cp_node_set_string(g, n, "activation", "HardSwish");
}
static void c_fmm_linear_gelu(struct cp_graph *g)
{
    X(g, "a", 3, D(1, 40, 64));
    W(g, "w", 2, D(64, 96));
    W(g, "b", 1, D(96));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "b"), I("y"));
    cp_node_set_string(g, n, "activation", "Gelu");
}
static void c_fmm_bias_residual(struct cp_graph *g)
{
    X(g, "a", 3, D(2, 17, 32));
    W(g, "w", 2, D(32, 24));
    W(g, "b", 1, D(24));
    X(g, "r", 3, D(2, 17, 24));
    NF(g, "FusedMatMul", I("a", "w", "b", "r"), I("y"));
}
static void c_fmm_gemm_transb_alpha(struct cp_graph *g)
{
    X(g, "a", 2, D(5, 48));
    W(g, "w", 2, D(20, 48));
    W(g, "b", 1, D(20));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "b"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
    cp_node_set_float(g, n, "alpha", 0.5f);
    cp_node_set_string(g, n, "activation", "SiLU");
}
static void c_fmm_transa_runtime_b(struct cp_graph *g)
{
    X(g, "a", 2, D(12, 7));
    X(g, "w", 2, D(12, 9));
    X(g, "r", 2, D(7, 9));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "", "r"), I("y"));
    cp_node_set_int(g, n, "transA", 1);
    cp_node_set_int(g, n, "residual_first", 1);
    cp_node_set_string(g, n, "activation", "Relu");
}
static void c_gn_silu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 32, 12, 12));
    W(g, "s", 1, D(32));
    W(g, "b", 1, D(32));
    int32_t n = NF(g, "GroupNormalization", I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 8);
    cp_node_set_string(g, n, "activation", "SiLU");
}
static void c_gn_plain(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 12, 50));
    W(g, "s", 1, D(12));
    W(g, "b", 1, D(12));
    int32_t n = NF(g, "GroupNormalization", I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 3);
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}
static void c_gelu_erf(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 33, 70));
    NF(g, "Gelu", I("x"), I("y"));
}
static void c_gelu_tanh(struct cp_graph *g)
{
    X(g, "x", 2, D(40, 41));
    int32_t n = NF(g, "Gelu", I("x"), I("y"));
    cp_node_set_string(g, n, "approximate", "tanh");
}

/* ---- layouts (LayoutTransformPass: TransData, and the kernels a layout
 * region holds reading NHWC and blocked tensors) --------------------------------- */

/* Tag tensor `name` with a layout (graph inputs and outputs of a case). */
static void L(struct cp_graph *g, const char *name, enum cp_layout l)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0, "no tensor '%s'", name);
    cp_graph_tensor(g, t)->layout = l;
}

static void transdata(struct cp_graph *g, int64_t c, enum cp_layout from, enum cp_layout to)
{
    X(g, "x", 4, D(2, c, 5, 7));
    int32_t in = cp_graph_find_tensor(g, "x"), out, idx;
    out = gb_tensor(g, "y", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    const char *origin = "n";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(
        cp_graph_add_node(g, "n", "TransData", CP_DOMAIN, &in, 1, &out, 1, &origin, 1, &idx, &d),
        CP_OK, "%s", d.msg);
    cp_node_set_string(g, idx, "src_format", cp_layout_name(from));
    cp_node_set_string(g, idx, "dst_format", cp_layout_name(to));
    L(g, "x", from);
}
static void c_td_nchw_nhwc(struct cp_graph *g)
{
    transdata(g, 3, CP_LAYOUT_NCHW, CP_LAYOUT_NHWC);
}
static void c_td_nhwc_nchw(struct cp_graph *g)
{
    transdata(g, 24, CP_LAYOUT_NHWC, CP_LAYOUT_NCHW);
}
static void c_td_nchw_16c(struct cp_graph *g)
{
    transdata(g, 32, CP_LAYOUT_NCHW, CP_LAYOUT_NCHW16C);
}
static void c_td_16c_nhwc(struct cp_graph *g)
{
    transdata(g, 48, CP_LAYOUT_NCHW16C, CP_LAYOUT_NHWC);
}
static void c_td_8c_nchw(struct cp_graph *g)
{
    transdata(g, 24, CP_LAYOUT_NCHW8C, CP_LAYOUT_NCHW);
}
static void c_td_16c_8c(struct cp_graph *g)
{
    transdata(g, 16, CP_LAYOUT_NCHW16C, CP_LAYOUT_NCHW8C);
}
static void c_conv_nhwc(struct cp_graph *g)
{
    c_conv_3x3_bias(g);
    L(g, cp_graph_tensor(g, cp_graph_node(g, 0)->inputs[0])->name, CP_LAYOUT_NHWC);
    L(g, cp_graph_tensor(g, cp_graph_node(g, 0)->outputs[0])->name, CP_LAYOUT_NHWC);
}
static void c_conv_nchw_to_16c(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 12, 12));
    W(g, "w", 4, D(16, 3, 3, 3));
    W(g, "b", 1, D(16));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    L(g, "y", CP_LAYOUT_NCHW16C);
}
static void c_conv_16c_to_8c(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 9, 9));
    W(g, "w", 4, D(24, 16, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "strides", 2, 2);
    L(g, "x", CP_LAYOUT_NCHW16C);
    L(g, "y", CP_LAYOUT_NCHW8C);
}
static void c_maxpool_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 24, 11, 11));
    int32_t n = N(g, "MaxPool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
    L(g, "x", CP_LAYOUT_NHWC);
    L(g, "y", CP_LAYOUT_NHWC);
}
static void c_avgpool_16c(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 32, 8, 8));
    int32_t n = N(g, "AveragePool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 2, 2);
    INTS(g, n, "strides", 2, 2);
    L(g, "x", CP_LAYOUT_NCHW16C);
    L(g, "y", CP_LAYOUT_NCHW16C);
}
/* Channel selections in an NHWC region (ShuffleNet's shuffle halves). */
static void c_channel_gather_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 24, 5, 3));
    gb_ints(g, "i", 12, (const int64_t[]){0, 12, 1, 13, 2, 14, 3, 15, 4, 16, -1, 23});
    int32_t n = N(g, "Gather", I("x", "i"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
    L(g, "x", CP_LAYOUT_NHWC);
    L(g, "y", CP_LAYOUT_NHWC);
}
static void c_channel_slice_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 24, 5, 3));
    gb_ints(g, "st", 1, (const int64_t[]){4});
    gb_ints(g, "en", 1, (const int64_t[]){22});
    gb_ints(g, "ax", 1, (const int64_t[]){1});
    gb_ints(g, "sp", 1, (const int64_t[]){3});
    N(g, "Slice", I("x", "st", "en", "ax", "sp"), I("y"));
    L(g, "x", CP_LAYOUT_NHWC);
    L(g, "y", CP_LAYOUT_NHWC);
}
static void c_gap_8c(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 24, 7, 7));
    N(g, "GlobalAveragePool", I("x"), I("y"));
    L(g, "x", CP_LAYOUT_NCHW8C);
    L(g, "y", CP_LAYOUT_NCHW8C);
}

/* ---- FusedAttention (FlashAttentionFusionPass) ---------------------------- */

static void c_attn_bhnd_kt(struct cp_graph *g)
{
    X(g, "q", 4, D(2, 3, 37, 16));
    X(g, "k", 4, D(2, 3, 16, 45));
    X(g, "v", 4, D(2, 3, 45, 16));
    int32_t n = NF(g, "FusedAttention", I("q", "k", "v"), I("y"));
    cp_node_set_int(g, n, "num_heads", 3);
    cp_node_set_float(g, n, "scale", 0.25f);
    cp_node_set_string(g, n, "k_format", "BHDN");
}
static void c_attn_bnhd_mask(struct cp_graph *g)
{
    X(g, "q", 3, D(1, 40, 64));
    X(g, "k", 3, D(1, 50, 64));
    X(g, "v", 3, D(1, 50, 64));
    X(g, "mask", 4, D(1, 1, 40, 50));
    int32_t n = NF(g, "FusedAttention", I("q", "k", "v", "mask"), I("y"));
    cp_node_set_int(g, n, "num_heads", 4);
    cp_node_set_float(g, n, "scale", 0.25f);
    cp_node_set_string(g, n, "q_format", "BNHD");
    cp_node_set_string(g, n, "k_format", "BNHD");
    cp_node_set_string(g, n, "v_format", "BNHD");
    cp_node_set_string(g, n, "out_format", "BNHD");
}
static void c_attn_d40_exact(struct cp_graph *g)
{
    X(g, "q", 4, D(1, 2, 30, 40));
    X(g, "k", 4, D(1, 2, 70, 40));
    X(g, "v", 4, D(1, 2, 40, 70));
    int32_t n = NF(g, "FusedAttention", I("q", "k", "v"), I("y"));
    cp_node_set_int(g, n, "num_heads", 2);
    cp_node_set_float(g, n, "scale", 0.158113883f);
    cp_node_set_string(g, n, "v_format", "BHDN");
    cp_node_set_string(g, n, "impl", "exact");
}

#endif
