/* The fusion passes (atc_bridge/passes/fusion*.c): each finds its pattern
 * in a hand-built graph and in the example models, leaves alone what it
 * must not touch (intermediates read elsewhere or graph outputs), and the
 * rewritten graph computes what the original does, within 1e-4 relative L2
 * error, when both run on the runtime (import -> infer -> pass ->
 * cp_model_from_graph -> plan -> run). Passes are called through their
 * table entries in cp_fusion_passes. */
#include "atc_bridge/passes/pass.h"
#include "runner/runner.h"
#include "support/examples.h"

#include "graph/graph_build.h"
#include "graph/op_eval.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODELS_DIR CP_SOURCE_DIR "/examples/models/"
#define MAX_REL_L2 1e-4

/* ---- running passes ------------------------------------------------------- */

static const struct cp_pass *fusion_pass(const char *name)
{
    for (size_t i = 0; cp_fusion_passes[i].name; i++)
        if (strcmp(cp_fusion_passes[i].name, name) == 0)
            return &cp_fusion_passes[i];
    cr_assert_fail("no fusion pass '%s'", name);
    return NULL;
}

/* Run one pass, then compact, verify and infer as the manager does. */
static bool run_pass(struct cp_graph *g, const char *name)
{
    struct cp_convert_config cfg;
    cp_convert_config_init(&cfg);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g, .config = &cfg, .d = &d, .has_bf16 = false};
    bool changed = false;
    cr_assert_eq(fusion_pass(name)->run(&ctx, &changed), CP_OK, "%s: %s", name, d.msg);
    if (changed) {
        cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s: %s", name, d.msg);
        cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "after %s: %s", name, d.msg);
        cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "after %s: %s", name, d.msg);
    }
    return changed;
}

static void run_all_fusion(struct cp_graph *g)
{
    for (size_t i = 0; cp_fusion_passes[i].name; i++)
        run_pass(g, cp_fusion_passes[i].name);
}

static size_t count_op(const struct cp_graph *g, enum cp_op op)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        n += !nd->dead && nd->op == op;
    }
    return n;
}

/* Live nodes of op with attribute activation == act. */
static size_t count_act(const struct cp_graph *g, enum cp_op op, const char *act)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        n += !nd->dead && nd->op == op &&
             strcmp(cp_node_attr_string(nd, "activation", ""), act) == 0;
    }
    return n;
}

/* ---- running graphs ------------------------------------------------------------ */

struct outputs {
    size_t n;
    struct cp_host_tensor t[4];
};

static struct cp_graph *import(const char *name)
{
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_ex_import(name, &g, NULL, &d), CP_OK, "%s", d.msg);
    return g;
}

/* Run g (taken over) with fast kernels on the example's test inputs, or on
 * seeded random inputs when `example` is NULL. */
static void run_graph(struct cp_graph *g, const char *example, struct outputs *out)
{
    struct cp_runtime_options o = {.threads = 2};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    struct cp_plan_options po = {.buffer_optimize = -1};
    struct cp_plan *p;
    cr_assert_eq(cp_plan_create(m, &po, &p, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++) {
        struct cp_host_tensor t;
        char path[640];
        snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/input_%zu.pb",
                 example ? example : "", i);
        size_t slot = i;
        if (example && access(path, F_OK) == 0) {
            cr_assert_eq(cp_tensor_read_file(path, &t, &d), CP_OK, "%s", d.msg);
            for (size_t k = 0; k < cp_plan_n_inputs(p); k++)
                if (strcmp(cp_plan_input(p, k)->name, t.name) == 0)
                    slot = k;
        } else {
            const struct cp_tensor *in = cp_plan_input(p, i);
            memset(&t, 0, sizeof t);
            snprintf(t.name, sizeof t.name, "%s", in->name);
            t.dtype = in->dtype;
            t.rank = in->shape.rank;
            for (int k = 0; k < t.rank; k++)
                t.dims[k] = in->shape.dims[k].value;
            cr_assert_eq(cp_tensor_fill_random(&t, 1234 + i, &d), CP_OK, "%s", d.msg);
        }
        cr_assert_eq(cp_plan_set_input(p, slot, &t, &d), CP_OK, "%s", d.msg);
        cp_host_tensor_release(&t);
    }
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s", d.msg);
    out->n = cp_plan_n_outputs(p);
    cr_assert_leq(out->n, 4);
    for (size_t i = 0; i < out->n; i++)
        cr_assert_eq(cp_plan_get_output(p, i, &out->t[i], &d), CP_OK, "%s", d.msg);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

static void outputs_release(struct outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        cp_host_tensor_release(&o->t[i]);
}

static double rel_l2(const float *got, const float *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - (double)want[i];
        num += e * e;
        den += (double)want[i] * (double)want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The worst relative L2 error of b's outputs against a's. */
static double compare(const struct outputs *a, const struct outputs *b, const char *what)
{
    cr_assert_eq(a->n, b->n);
    double worst = 0;
    for (size_t i = 0; i < a->n; i++) {
        cr_assert_eq(a->t[i].nbytes, b->t[i].nbytes, "%s: output %zu size differs", what, i);
        double e = rel_l2(b->t[i].data, a->t[i].data, a->t[i].nbytes / sizeof(float));
        worst = e > worst ? e : worst;
    }
    cr_expect_leq(worst, MAX_REL_L2, "%s: fused outputs differ by %.3g relative L2", what, worst);
    return worst;
}

/* Run `before` and `after` (both taken over) and compare. */
static void expect_same_function(struct cp_graph *before, struct cp_graph *after,
                                 const char *example, const char *what)
{
    struct outputs a, b;
    run_graph(before, example, &a);
    run_graph(after, example, &b);
    double e = compare(&a, &b, what);
    fprintf(stderr, "fusion: %-40s rel L2 %.3g\n", what, e);
    outputs_release(&a);
    outputs_release(&b);
}

/* ---- hand-built graphs -------------------------------------------------------- */

static void weight(struct cp_graph *g, const char *name, int rank, const int64_t *dims,
                   uint64_t seed, float lo, float hi)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    float *v = malloc((size_t)n * sizeof *v);
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
    free(v);
}

static void scalar(struct cp_graph *g, const char *name, float v)
{
    gb_init(g, name, CP_DTYPE_F32, 0, NULL, &v);
}

#define D(...) GB_DIMS(__VA_ARGS__)
#define I(...) GB_IN(__VA_ARGS__)

static void output(struct cp_graph *g, const char *name)
{
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, name)), CP_OK);
}

/* y = Gelu(x @ W + b) + x, decomposed the way `form` says. */
static struct cp_graph *gelu_graph(int form)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, D(8, 32));
    weight(g, "w", 2, D(32, 32), 1, -0.3f, 0.3f);
    weight(g, "b", 1, D(32), 2, -0.5f, 0.5f);
    scalar(g, "sqrt2", 1.4142135f);
    scalar(g, "one", 1.0f);
    scalar(g, "half", 0.5f);
    gb_node(g, "mm", "MatMul", I("x", "w"), I("p"));
    gb_node(g, "bias", "Add", I("b", "p"), I("h")); /* bias first, as PyTorch */
    gb_node(g, "div", "Div", I("h", "sqrt2"), I("d"));
    gb_node(g, "erf", "Erf", I("d"), I("e"));
    gb_node(g, "add1", "Add", I("e", "one"), I("a"));
    if (form == 0) { /* (h * a) * 0.5 */
        gb_node(g, "mulx", "Mul", I("h", "a"), I("m"));
        gb_node(g, "mulh", "Mul", I("m", "half"), I("gl"));
    } else if (form == 1) { /* (h * 0.5) * a */
        gb_node(g, "mulh", "Mul", I("h", "half"), I("m"));
        gb_node(g, "mulx", "Mul", I("a", "m"), I("gl"));
    } else { /* h * (a * 0.5) */
        gb_node(g, "mulh", "Mul", I("half", "a"), I("m"));
        gb_node(g, "mulx", "Mul", I("m", "h"), I("gl"));
    }
    gb_node(g, "res", "Add", I("gl", "x"), I("y"));
    output(g, "y");
    gb_infer_ok(g);
    return g;
}

Test(pass_fusion, gelu_decomposed_in_every_pytorch_order_becomes_one_gelu)
{
    for (int form = 0; form < 3; form++) {
        struct cp_graph *g = gelu_graph(form);
        cr_assert(run_pass(g, "GeluFusionPass"), "form %d not fused", form);
        cr_expect_eq(count_op(g, CP_OP_GELU), 1, "form %d", form);
        cr_expect_eq(count_op(g, CP_OP_ERF), 0, "form %d", form);
        cr_expect_eq(cp_graph_n_live_nodes(g), 4, "form %d: MatMul, Add, Gelu, Add", form);
        char what[64];
        snprintf(what, sizeof what, "hand-built GELU form %d", form);
        expect_same_function(gelu_graph(form), g, NULL, what);
    }
}

Test(pass_fusion, matmul_bias_gelu_residual_become_one_fused_matmul)
{
    struct cp_graph *g = gelu_graph(0);
    run_all_fusion(g);
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert_eq(n->op, CP_OP_FUSED_MATMUL);
    cr_expect_str_eq(cp_node_attr_string(n, "activation", ""), "Gelu");
    cr_expect_eq(n->n_inputs, 4, "A, B, bias, residual");
    cr_expect_eq(cp_node_attr_int(n, "residual_first", 0), 0);
    cr_expect_geq(n->n_origins, 8, "origins of every fused node are kept");
    expect_same_function(gelu_graph(0), g, NULL, "hand-built Linear+GELU+residual");
}

Test(pass_fusion, an_intermediate_read_elsewhere_is_not_fused_away)
{
    /* Erf's input d is also a graph output: the GELU must stay. */
    struct cp_graph *g = gelu_graph(0);
    output(g, "d");
    cr_expect_not(run_pass(g, "GeluFusionPass"));
    cr_expect_eq(count_op(g, CP_OP_ERF), 1);
    cp_graph_free(g);
    /* The bias Add's result h is read by the GELU pattern and also feeds a
     * second output: MatMul+bias may fuse, the GELU may not be folded into
     * it. */
    g = gelu_graph(0);
    output(g, "h");
    run_all_fusion(g);
    cr_expect_eq(count_act(g, CP_OP_FUSED_MATMUL, ""), 1);
    cr_expect_eq(count_op(g, CP_OP_GELU), 1);
    cp_graph_free(g);
}

/* Conv -> [Relu | Add(r) -> Relu | Relu -> Add(r)] on a 1x8x10x10 input. */
static struct cp_graph *conv_graph(int variant)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, D(1, 8, 10, 10));
    gb_input(g, "r", CP_DTYPE_F32, 4, D(1, 16, 10, 10));
    weight(g, "w", 4, D(16, 8, 3, 3), 3, -0.2f, 0.2f);
    weight(g, "b", 1, D(16), 4, -0.5f, 0.5f);
    weight(g, "cb", 3, D(16, 1, 1), 11, -0.5f, 0.5f);
    scalar(g, "lo", 0.0f);
    scalar(g, "hi", 6.0f);
    scalar(g, "sqrt2", 1.4142135f);
    scalar(g, "one", 1.0f);
    scalar(g, "half", 0.5f);
    int32_t c = variant == 4 ? gb_node(g, "conv", "Conv", I("x", "w"), I("c0"))
                             : gb_node(g, "conv", "Conv", I("x", "w", "b"), I("c"));
    cp_node_set_ints(g, c, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    switch (variant) {
    case 0:
        gb_node(g, "relu", "Relu", I("c"), I("y"));
        break;
    case 1: /* residual first */
        gb_node(g, "add", "Add", I("r", "c"), I("s"));
        gb_node(g, "relu", "Relu", I("s"), I("y"));
        break;
    case 2: /* Clip (Relu6), then residual */
        gb_node(g, "clip", "Clip", I("c", "lo", "hi"), I("a"));
        gb_node(g, "add", "Add", I("a", "r"), I("y"));
        break;
    case 3: /* SiLU */
        gb_node(g, "sig", "Sigmoid", I("c"), I("sg"));
        gb_node(g, "mul", "Mul", I("c", "sg"), I("y"));
        break;
    case 4: /* no bias input: a per-channel constant Add is the bias */
        gb_node(g, "bias", "Add", I("cb", "c0"), I("c"));
        gb_node(g, "relu", "Relu", I("c"), I("y"));
        break;
    case 6: /* HardSwish, then residual */
        gb_node(g, "hsw", "HardSwish", I("c"), I("a"));
        gb_node(g, "add", "Add", I("a", "r"), I("y"));
        break;
    case 7: { /* HardSigmoid as PyTorch writes it */
        int32_t h = gb_node(g, "hsg", "HardSigmoid", I("c"), I("y"));
        cp_node_set_float(g, h, "alpha", 1.0f / 6.0f);
        break;
    }
    case 8: {
        int32_t e = gb_node(g, "elu", "Elu", I("c"), I("y"));
        cp_node_set_float(g, e, "alpha", 0.5f);
        break;
    }
    case 9:
        gb_node(g, "sp", "Softplus", I("c"), I("y"));
        break;
    case 10:
        gb_node(g, "mish", "Mish", I("c"), I("y"));
        break;
    case 11:
        gb_node(g, "tanh", "Tanh", I("c"), I("y"));
        break;
    case 12: { /* HardSwish as PyTorch writes it below opset 14 */
        int32_t h = gb_node(g, "hsg", "HardSigmoid", I("c"), I("hg"));
        cp_node_set_float(g, h, "alpha", 1.0f / 6.0f);
        gb_node(g, "mul", "Mul", I("hg", "c"), I("y"));
        break;
    }
    default: /* decomposed GELU, not fused into a Gelu node first */
        gb_node(g, "div", "Div", I("c", "sqrt2"), I("d"));
        gb_node(g, "erf", "Erf", I("d"), I("e"));
        gb_node(g, "add1", "Add", I("e", "one"), I("a"));
        gb_node(g, "mulx", "Mul", I("c", "a"), I("m"));
        gb_node(g, "mulh", "Mul", I("m", "half"), I("y"));
        break;
    }
    output(g, "y");
    gb_infer_ok(g);
    return g;
}

Test(pass_fusion, conv_bias_activation_residual_become_one_fused_conv)
{
    static const char *const acts[] = {"Relu", "Relu",      "Clip",        "SiLU", "Relu",
                                       "Gelu", "HardSwish", "HardSigmoid", "Elu",  "Softplus",
                                       "Mish", "Tanh",      "HardSwish"};
    static const int64_t res_first[] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int v = 0; v < 13; v++) {
        struct cp_graph *g = conv_graph(v);
        cr_assert(run_pass(g, "ConvBiasActivationFusionPass"), "variant %d", v);
        cr_assert_eq(cp_graph_n_live_nodes(g), 1, "variant %d", v);
        const struct cp_node *n = cp_graph_node(g, 0);
        cr_assert_eq(n->op, CP_OP_FUSED_CONV);
        cr_expect_str_eq(cp_node_attr_string(n, "activation", ""), acts[v]);
        cr_expect_eq(cp_node_attr_int(n, "residual_first", 0), res_first[v], "variant %d", v);
        cr_expect_eq(cp_node_attr(n, "pads")->n, 4, "Conv's attributes are kept");
        if (v == 7)
            cr_expect_float_eq(cp_act_of(n).alpha, 1.0f / 6.0f, 1e-7f, "HardSigmoid's alpha");
        if (v == 8)
            cr_expect_float_eq(cp_act_of(n).alpha, 0.5f, 1e-7f, "Elu's alpha");
        char what[64];
        snprintf(what, sizeof what, "hand-built Conv variant %d", v);
        expect_same_function(conv_graph(v), g, NULL, what);
    }
}

/* x * HardSigmoid(x) is HardSwish only with PyTorch's alpha 1/6 and beta
 * 1/2: with ONNX's default alpha 0.2 it is another function, kept as
 * written. */
Test(pass_fusion, x_times_hard_sigmoid_is_hard_swish_only_with_its_constants)
{
    struct cp_graph *g = conv_graph(12), *before = conv_graph(12);
    cr_assert_eq(cp_graph_node(g, 1)->op, CP_OP_HARD_SIGMOID);
    cp_node_set_float(g, 1, "alpha", 0.2f);
    cp_node_set_float(before, 1, "alpha", 0.2f);
    run_pass(g, "ConvBiasActivationFusionPass");
    cr_expect_eq(count_op(g, CP_OP_HARD_SIGMOID), 1);
    cr_expect_eq(count_op(g, CP_OP_MUL), 1);
    cr_expect_eq(count_act(g, CP_OP_FUSED_CONV, "HardSwish"), 0);
    expect_same_function(before, g, NULL, "x * HardSigmoid(x), alpha 0.2");
}

Test(pass_fusion, a_conv_whose_output_is_a_graph_output_stays_a_conv)
{
    struct cp_graph *g = conv_graph(0);
    output(g, "c");
    cr_expect_not(run_pass(g, "ConvBiasActivationFusionPass"));
    cr_expect_eq(count_op(g, CP_OP_CONV), 1);
    cp_graph_free(g);
}

/* A Gemm with transB, alpha, beta and a [1, N] C, then Relu. */
static struct cp_graph *gemm_graph(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, D(6, 24));
    weight(g, "w", 2, D(10, 24), 5, -0.5f, 0.5f);
    weight(g, "c", 2, D(1, 10), 6, -1.0f, 1.0f);
    int32_t n = gb_node(g, "gemm", "Gemm", I("x", "w", "c"), I("p"));
    cp_node_set_int(g, n, "transB", 1);
    cp_node_set_float(g, n, "alpha", 0.7f);
    cp_node_set_float(g, n, "beta", 1.5f);
    gb_node(g, "relu", "Relu", I("p"), I("y"));
    output(g, "y");
    gb_infer_ok(g);
    return g;
}

Test(pass_fusion, gemm_becomes_fused_matmul_with_scaled_bias)
{
    struct cp_graph *g = gemm_graph();
    cr_assert(run_pass(g, "MatMulBiasActivationFusionPass"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert_eq(n->op, CP_OP_FUSED_MATMUL);
    cr_expect_eq(cp_node_attr_int(n, "transB", 0), 1);
    cr_expect_float_eq(cp_node_attr_float(n, "alpha", 1.0f), 0.7f, 1e-7);
    cr_expect_str_eq(cp_node_attr_string(n, "activation", ""), "Relu");
    expect_same_function(gemm_graph(), g, NULL, "hand-built Gemm+Relu");
}

/* Decomposed LayerNorm over the last axis of [2, 5, 24]. */
static struct cp_graph *layernorm_graph(void)
{
    struct cp_graph *g = gb_graph(14);
    gb_input(g, "x", CP_DTYPE_F32, 3, D(2, 5, 24));
    weight(g, "gamma", 1, D(24), 7, 0.5f, 1.5f);
    weight(g, "beta", 1, D(24), 8, -0.5f, 0.5f);
    scalar(g, "two", 2.0f);
    scalar(g, "eps", 1e-5f);
    int32_t n = gb_node(g, "rm1", "ReduceMean", I("x"), I("mean"));
    cp_node_set_ints(g, n, "axes", (const int64_t[]){-1}, 1);
    gb_node(g, "sub", "Sub", I("x", "mean"), I("d"));
    gb_node(g, "pow", "Pow", I("d", "two"), I("sq"));
    n = gb_node(g, "rm2", "ReduceMean", I("sq"), I("var"));
    cp_node_set_ints(g, n, "axes", (const int64_t[]){-1}, 1);
    gb_node(g, "addeps", "Add", I("var", "eps"), I("ve"));
    gb_node(g, "sqrt", "Sqrt", I("ve"), I("sd"));
    gb_node(g, "div", "Div", I("d", "sd"), I("nrm"));
    gb_node(g, "mul", "Mul", I("nrm", "gamma"), I("sc"));
    gb_node(g, "add", "Add", I("sc", "beta"), I("y"));
    output(g, "y");
    gb_infer_ok(g);
    return g;
}

Test(pass_fusion, decomposed_layernorm_becomes_layernormalization_at_opset_14)
{
    struct cp_graph *g = layernorm_graph();
    cr_assert(run_pass(g, "LayerNormFusionPass"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert_eq(n->op, CP_OP_LAYER_NORMALIZATION);
    cr_expect_eq(cp_node_attr_int(n, "axis", 0), -1);
    cr_expect_float_eq(cp_node_attr_float(n, "epsilon", 0), 1e-5f, 1e-12);
    cr_expect_eq(cp_graph_opset(g), 14);
    expect_same_function(layernorm_graph(), g, NULL, "hand-built LayerNorm (opset 14)");
}

/* PyTorch's GroupNorm(4 groups, 16 channels) then SiLU. */
static struct cp_graph *groupnorm_graph(bool silu)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, D(1, 16, 6, 6));
    gb_ints(g, "shape1", 3, (const int64_t[]){0, 4, -1});
    gb_floats(g, "ones", 4, (const float[]){1, 1, 1, 1});
    gb_floats(g, "zeros", 4, (const float[]){0, 0, 0, 0});
    weight(g, "gamma", 3, D(16, 1, 1), 9, 0.5f, 1.5f);
    weight(g, "beta", 3, D(16, 1, 1), 10, -0.5f, 0.5f);
    gb_node(g, "r1", "Reshape", I("x", "shape1"), I("xr"));
    int32_t n = gb_node(g, "in", "InstanceNormalization", I("xr", "ones", "zeros"), I("xn"));
    cp_node_set_float(g, n, "epsilon", 1e-5f);
    gb_node(g, "shape", "Shape", I("x"), I("xs"));
    gb_node(g, "r2", "Reshape", I("xn", "xs"), I("xb"));
    gb_node(g, "mul", "Mul", I("xb", "gamma"), I("sc"));
    gb_node(g, "add", "Add", I("sc", "beta"), I(silu ? "gn" : "y"));
    if (silu) {
        gb_node(g, "sig", "Sigmoid", I("gn"), I("sg"));
        gb_node(g, "silu", "Mul", I("gn", "sg"), I("y"));
    }
    output(g, "y");
    gb_infer_ok(g);
    return g;
}

Test(pass_fusion, pytorch_groupnorm_and_its_silu_become_one_groupnormalization)
{
    for (int silu = 0; silu < 2; silu++) {
        struct cp_graph *g = groupnorm_graph(silu);
        cr_assert(run_pass(g, "GroupNormFusionPass"));
        cr_assert_eq(cp_graph_n_live_nodes(g), 1, "the Shape node goes too");
        const struct cp_node *n = cp_graph_node(g, 0);
        cr_assert_eq(n->op, CP_OP_GROUP_NORMALIZATION);
        cr_expect_eq(cp_node_attr_int(n, "num_groups", 0), 4);
        cr_expect_str_eq(cp_node_attr_string(n, "activation", ""), silu ? "SiLU" : "");
        expect_same_function(groupnorm_graph(silu), g, NULL,
                             silu ? "hand-built GroupNorm+SiLU" : "hand-built GroupNorm");
    }
}

/* ---- the example models ----------------------------------------------------------- */

Test(pass_fusion, sd_unet_tiny_groupnorms_fuse_with_their_silu)
{
    struct cp_graph *g = import("sd_unet_tiny");
    cr_assert_eq(count_op(g, CP_OP_INSTANCE_NORMALIZATION), 9);
    run_pass(g, "GeluFusionPass");
    cr_expect_eq(count_op(g, CP_OP_GELU), 2);
    run_pass(g, "GroupNormFusionPass");
    cr_expect_eq(count_op(g, CP_OP_INSTANCE_NORMALIZATION), 0);
    cr_expect_eq(count_op(g, CP_OP_GROUP_NORMALIZATION), 9);
    cr_expect_eq(count_op(g, CP_OP_SHAPE), 0, "the Shape nodes feeding the Reshapes go");
    /* 7 of the 9 GroupNorms are followed by SiLU; the 2 before the
     * transformers' proj_in are not. */
    cr_expect_eq(count_act(g, CP_OP_GROUP_NORMALIZATION, "SiLU"), 7);
    run_all_fusion(g);
    cr_expect_eq(count_op(g, CP_OP_GEMM), 0, "every Gemm becomes a FusedMatMul");
    cr_expect_gt(count_op(g, CP_OP_FUSED_CONV), 0);
    cr_expect_gt(count_op(g, CP_OP_FUSED_MATMUL), 0);
    cr_expect_eq(count_op(g, CP_OP_SOFTMAX), 4, "attention is left to the attention pass");
    fprintf(stderr, "fusion: sd_unet_tiny %zu -> %zu nodes\n", (size_t)217,
            cp_graph_n_live_nodes(g));
    expect_same_function(import("sd_unet_tiny"), g, "sd_unet_tiny", "sd_unet_tiny all fusion");
}

Test(pass_fusion, transformer_op14_layernorms_and_gelus_fuse)
{
    struct cp_graph *g = import("transformer_encoder_op14");
    cr_assert_eq(count_op(g, CP_OP_LAYER_NORMALIZATION), 0);
    run_pass(g, "GeluFusionPass");
    cr_expect_eq(count_op(g, CP_OP_GELU), 2);
    cr_expect_eq(count_op(g, CP_OP_ERF), 0);
    run_pass(g, "LayerNormFusionPass");
    cr_expect_eq(count_op(g, CP_OP_LAYER_NORMALIZATION), 4);
    cr_expect_eq(count_op(g, CP_OP_REDUCE_MEAN), 0);
    cr_expect_eq(count_op(g, CP_OP_POW), 0);
    run_all_fusion(g);
    cr_expect_eq(count_act(g, CP_OP_FUSED_MATMUL, "Gelu"), 2, "the GELUs fold into fc1");
    cr_expect_eq(count_op(g, CP_OP_SOFTMAX), 2, "attention is left to the attention pass");
    expect_same_function(import("transformer_encoder_op14"), g, "transformer_encoder_op14",
                         "transformer_encoder_op14 all fusion");
}

Test(pass_fusion, transformer_op17_fuses_and_keeps_its_function)
{
    struct cp_graph *g = import("transformer_encoder_op17");
    run_all_fusion(g);
    cr_expect_eq(count_op(g, CP_OP_LAYER_NORMALIZATION), 4);
    cr_expect_eq(count_act(g, CP_OP_FUSED_MATMUL, "Gelu"), 2);
    expect_same_function(import("transformer_encoder_op17"), g, "transformer_encoder_op17",
                         "transformer_encoder_op17 all fusion");
}

Test(pass_fusion, nhwc_roundtrip_channel_layernorm_fuses)
{
    struct cp_graph *g = import("nhwc_roundtrip");
    run_pass(g, "LayerNormFusionPass");
    cr_expect_eq(count_op(g, CP_OP_LAYER_NORMALIZATION), 1);
    run_all_fusion(g);
    expect_same_function(import("nhwc_roundtrip"), g, "nhwc_roundtrip",
                         "nhwc_roundtrip all fusion");
}

Test(pass_fusion, resnet_tiny_keeps_its_function)
{
    struct cp_graph *g = import("resnet_tiny");
    run_all_fusion(g);
    cr_expect_eq(count_op(g, CP_OP_GEMM), 0);
    expect_same_function(import("resnet_tiny"), g, "resnet_tiny", "resnet_tiny all fusion");
}
