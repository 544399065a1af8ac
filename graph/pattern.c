/* The fusion pattern table, the node view of a cp_graph, and the helpers
 * every matcher reads a view through (see pattern.h, pattern_internal.h).
 * The matchers are in pattern_act.c (activations, GELU, residual),
 * pattern_epilogue.c (Conv, MatMul, Gemm, Conv + BatchNorm), pattern_norm.c
 * (LayerNorm, GroupNorm), pattern_attention.c and pattern_roundtrip.c. */
#include "graph/pattern_internal.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the pattern table ---------------------------------------------------------------- */

static const struct cp_pattern_def patterns[] = {
    [CP_PATTERN_ATTENTION] = {"attention", CP_PASS_FLASH_ATTENTION,
                              "MatMul -> [Mul/Div scale] -> [Add mask] -> Softmax -> MatMul, with "
                              "the head split and merge Transposes that only feed it",
                              "fuse into one FusedAttention kernel that never writes the scores"},
    [CP_PATTERN_LAYERNORM] = {"layernorm", CP_PASS_LAYERNORM,
                              "ReduceMean -> Sub -> Pow/Mul -> ReduceMean -> Add -> Sqrt -> Div "
                              "[-> Mul gamma -> Add beta]",
                              "fuse into one LayerNormalization"},
    [CP_PATTERN_GROUPNORM] =
        {"groupnorm", CP_PASS_GROUPNORM,
         "(Reshape) InstanceNormalization (Reshape) [-> Mul gamma] [-> Add beta] "
         "[-> activation]",
         "fuse into one GroupNormalization (with its activation)"},
    [CP_PATTERN_GELU] = {"gelu", CP_PASS_GELU, "Div/Mul -> Erf -> Add -> Mul -> Mul (erf form)",
                         "fuse into one Gelu"},
    [CP_PATTERN_GELU_TANH] = {"gelu", "",
                              "Pow/Mul -> Mul -> Add -> Mul -> Tanh -> Add -> Mul -> Mul (tanh "
                              "form)",
                              "no pass fuses the tanh form; GeluFusionPass fuses GELU exported "
                              "with approximate='none' (the erf form)"},
    [CP_PATTERN_CONV_ACT] = {"conv_act", CP_PASS_CONV_BIAS_ACT,
                             "Conv [-> bias Add] -> activation (Relu, LeakyRelu, Clip, Sigmoid, "
                             "Gelu, SiLU = Sigmoid + Mul, or a decomposed GELU) [-> residual Add]",
                             "fuse bias, activation and residual Add into the Conv (oneDNN "
                             "post-ops)"},
    [CP_PATTERN_CONV_ADD] = {"conv_add", CP_PASS_CONV_BIAS_ACT,
                             "Conv -> bias and/or residual Add, no activation",
                             "fuse bias, activation and residual Add into the Conv (oneDNN "
                             "post-ops)"},
    [CP_PATTERN_CONV_BN] = {"conv_bn", CP_PASS_CONV_BN,
                            "Conv -> BatchNormalization (inference, constant weights)",
                            "fold the BatchNormalization into the Conv's weights; "
                            "ConvBiasActivationFusionPass then fuses what follows"},
    [CP_PATTERN_MATMUL_ACT] = {"matmul_act", CP_PASS_MATMUL_BIAS_ACT,
                               "MatMul with a weight (or a FusedMatMul with nothing fused, or "
                               "Gemm) [-> bias Add] -> activation [-> residual Add]",
                               "fuse bias, activation and residual Add into the MatMul (oneDNN "
                               "post-ops)"},
    [CP_PATTERN_MATMUL_ADD] = {"matmul_add", CP_PASS_MATMUL_BIAS_ACT,
                               "MatMul with a weight (or a FusedMatMul with nothing fused, or "
                               "Gemm) -> bias and/or residual Add, no activation",
                               "fuse bias, activation and residual Add into the MatMul (oneDNN "
                               "post-ops)"},
    [CP_PATTERN_ROUNDTRIP_TRANSDATA] = {"layout_roundtrip", CP_PASS_LAYOUT_TRANSFORM,
                                        "TransData, at most 4 ops, then a TransData that restores "
                                        "the first one's input shape and layout",
                                        "the ops between have no kernel for the blocked layout: "
                                        "give them one, or try --layout_policy=nchw"},
    [CP_PATTERN_ROUNDTRIP_TRANSPOSE] = {"layout_roundtrip", CP_PASS_TRANSPOSE_ROUNDTRIP,
                                        "Transpose -> layout-agnostic ops (elementwise, reductions "
                                        "keeping dims, Softmax, LayerNormalization) -> the inverse "
                                        "Transpose on every way out",
                                        "the pass cancels the pair when every op between is "
                                        "layout-agnostic"},
};
static_assert(sizeof patterns / sizeof patterns[0] == CP_PATTERN_COUNT, "pattern table size");

const struct cp_pattern_def *cp_pattern_get(enum cp_pattern_id id)
{
    return (unsigned)id < CP_PATTERN_COUNT ? &patterns[id] : NULL;
}

/* ---- views -------------------------------------------------------------------------- */

bool cp_pattern_private(const struct cp_pattern_view *v, int32_t t, size_t reads)
{
    return t >= 0 && (size_t)t < v->n_tensors(v->ctx) && v->n_reads(v->ctx, t) == reads &&
           !v->is_output(v->ctx, t);
}

/* ---- a cp_graph as a view ------------------------------------------------------------ */

static size_t g_n_nodes(const void *ctx)
{
    return cp_graph_n_nodes(((const struct cp_pattern_graph *)ctx)->g);
}

static size_t g_n_tensors(const void *ctx)
{
    return ((const struct cp_pattern_graph *)ctx)->n_tensors;
}

static const struct cp_node *g_node(const void *ctx, int32_t n)
{
    const struct cp_graph *g = ((const struct cp_pattern_graph *)ctx)->g;
    if (n < 0 || (size_t)n >= cp_graph_n_nodes(g))
        return NULL;
    const struct cp_node *nd = cp_graph_node(g, n);
    return nd->dead ? NULL : nd;
}

static const struct cp_tensor *g_tensor(const void *ctx, int32_t t)
{
    const struct cp_graph *g = ((const struct cp_pattern_graph *)ctx)->g;
    return t >= 0 && (size_t)t < cp_graph_n_tensors(g) ? cp_graph_tensor(g, t) : NULL;
}

/* The live node that has t among its outputs. */
static int32_t g_producer(const void *ctx, int32_t t)
{
    const struct cp_graph *g = ((const struct cp_pattern_graph *)ctx)->g;
    if (t < 0 || (size_t)t >= cp_graph_n_tensors(g))
        return -1;
    int32_t p = cp_graph_tensor(g, t)->producer;
    const struct cp_node *n = p >= 0 ? cp_graph_node(g, p) : NULL;
    if (!n || n->dead)
        return -1;
    for (size_t j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] == t)
            return p;
    return -1;
}

static size_t g_readers(const void *ctx, int32_t t, int32_t *out, size_t max)
{
    const struct cp_graph *g = ((const struct cp_pattern_graph *)ctx)->g;
    size_t k = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == t) {
                if (k < max)
                    out[k] = (int32_t)i;
                k++;
                break;
            }
    }
    return k;
}

static size_t g_n_reads(const void *ctx, int32_t t)
{
    const struct cp_pattern_graph *pg = ctx;
    return t >= 0 && (size_t)t < pg->n_tensors ? pg->reads[t] : 0;
}

static bool g_is_output(const void *ctx, int32_t t)
{
    const struct cp_pattern_graph *pg = ctx;
    return t >= 0 && (size_t)t < pg->n_tensors && pg->is_output[t];
}

enum cp_status cp_pattern_graph_update(struct cp_pattern_graph *pg)
{
    const struct cp_graph *g = pg->g;
    size_t nt = cp_graph_n_tensors(g);
    if (nt != pg->n_tensors || !pg->reads) {
        size_t *r = cp_realloc_array(pg->reads, nt ? nt : 1, sizeof *r);
        if (!r)
            return CP_ERR_NOMEM;
        pg->reads = r;
        bool *o = cp_realloc_array(pg->is_output, nt ? nt : 1, sizeof *o);
        if (!o)
            return CP_ERR_NOMEM;
        pg->is_output = o;
        pg->n_tensors = nt;
    }
    memset(pg->reads, 0, nt * sizeof *pg->reads);
    memset(pg->is_output, 0, nt * sizeof *pg->is_output);
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] >= 0 && (size_t)n->inputs[j] < nt)
                pg->reads[n->inputs[j]]++;
    }
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        int32_t t = cp_graph_output(g, i);
        if (t >= 0 && (size_t)t < nt)
            pg->is_output[t] = true;
    }
    pg->view.opset = cp_graph_opset(g);
    return CP_OK;
}

enum cp_status cp_pattern_graph_init(struct cp_pattern_graph *pg, const struct cp_graph *g)
{
    memset(pg, 0, sizeof *pg);
    pg->g = g;
    pg->view = (struct cp_pattern_view){
        .ctx = pg,
        .n_nodes = g_n_nodes,
        .n_tensors = g_n_tensors,
        .node = g_node,
        .tensor = g_tensor,
        .producer = g_producer,
        .readers = g_readers,
        .n_reads = g_n_reads,
        .is_output = g_is_output,
        .opset = cp_graph_opset(g),
        .knows_values = true,
    };
    return cp_pattern_graph_update(pg);
}

void cp_pattern_graph_release(struct cp_pattern_graph *pg)
{
    free(pg->reads);
    free(pg->is_output);
    memset(pg, 0, sizeof *pg);
}

/* ---- reading a view (pattern_internal.h) ---------------------------------------------- */

const struct cp_node *cp_pv_node(const struct cp_pattern_view *v, int32_t n)
{
    return n >= 0 ? v->node(v->ctx, n) : NULL;
}

const struct cp_tensor *cp_pv_tensor(const struct cp_pattern_view *v, int32_t t)
{
    return t >= 0 ? v->tensor(v->ctx, t) : NULL;
}

int32_t cp_pv_producer(const struct cp_pattern_view *v, int32_t t)
{
    return t >= 0 ? v->producer(v->ctx, t) : -1;
}

size_t cp_pv_readers(const struct cp_pattern_view *v, int32_t t, int32_t *out, size_t max)
{
    return t >= 0 ? v->readers(v->ctx, t, out, max) : 0;
}

bool cp_pv_is_output(const struct cp_pattern_view *v, int32_t t)
{
    return t >= 0 && v->is_output(v->ctx, t);
}

int32_t cp_pv_sole_reader(const struct cp_pattern_view *v, int32_t t)
{
    int32_t r;
    if (!cp_pattern_private(v, t, 1) || cp_pv_readers(v, t, &r, 1) != 1)
        return -1;
    return r;
}

int32_t cp_pv_only_consumer(const struct cp_pattern_view *v, int32_t t, enum cp_op op)
{
    int32_t r = cp_pv_sole_reader(v, t);
    return r >= 0 && cp_pv_node(v, r)->op == op ? r : -1;
}

int32_t cp_pv_sole_consumer(const struct cp_pattern_view *v, int32_t t)
{
    int32_t r;
    if (t < 0 || cp_pv_is_output(v, t) || cp_pv_readers(v, t, &r, 1) != 1)
        return -1;
    return r;
}

int cp_pv_other(const struct cp_node *n, int32_t t)
{
    if (n->n_inputs != 2 || n->inputs[0] == n->inputs[1])
        return -1;
    if (n->inputs[0] == t)
        return 1;
    if (n->inputs[1] == t)
        return 0;
    return -1;
}

bool cp_pv_is_const(const struct cp_pattern_view *v, int32_t t)
{
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    return T && T->kind == CP_TENSOR_INITIALIZER && (T->data || !v->knows_values);
}

bool cp_pv_is_static_const(const struct cp_pattern_view *v, int32_t t)
{
    return cp_pv_is_const(v, t) && cp_shape_is_static(&cp_pv_tensor(v, t)->shape);
}

bool cp_pv_const_f32_count(const struct cp_pattern_view *v, int32_t t, size_t max, size_t *n)
{
    *n = 0;
    if (!cp_pv_is_static_const(v, t))
        return false;
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    int64_t numel = cp_shape_numel(&T->shape);
    if (numel < 0 || (size_t)numel > max || T->dtype != CP_DTYPE_F32)
        return false;
    if (v->knows_values && T->nbytes != (size_t)numel * sizeof(float))
        return false;
    *n = (size_t)numel;
    return true;
}

bool cp_pv_const_floats(const struct cp_pattern_view *v, int32_t t, float *out, size_t max,
                        size_t *n, bool *known)
{
    if (known)
        *known = false;
    if (!cp_pv_const_f32_count(v, t, max, n))
        return false;
    if (v->knows_values) {
        memcpy(out, cp_pv_tensor(v, t)->data, *n * sizeof *out);
        if (known)
            *known = true;
    }
    return true;
}

bool cp_pv_const_scalar(const struct cp_pattern_view *v, int32_t t, float *val, bool *known)
{
    size_t n;
    bool k;
    float c = NAN;
    if (!cp_pv_const_floats(v, t, &c, 1, &n, &k) || n != 1)
        return false;
    *val = k ? c : NAN;
    if (known)
        *known = k;
    return true;
}

bool cp_pv_const_near(const struct cp_pattern_view *v, int32_t t, float want, float rtol)
{
    float c;
    bool known;
    return cp_pv_const_scalar(v, t, &c, &known) &&
           (!known || fabsf(c - want) <= rtol * fabsf(want));
}

bool cp_pv_const_ints(const struct cp_pattern_view *v, int32_t t, int64_t *out, size_t max,
                      size_t *n)
{
    *n = 0;
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    if (!T)
        return false;
    if (T->value && T->value_len >= 0 && (size_t)T->value_len <= max) {
        memcpy(out, T->value, (size_t)T->value_len * sizeof *out);
        *n = (size_t)T->value_len;
        return true;
    }
    if (T->kind != CP_TENSOR_INITIALIZER || !T->data || !cp_shape_is_static(&T->shape))
        return false;
    int64_t numel = cp_shape_numel(&T->shape);
    if (numel < 0 || (size_t)numel > max)
        return false;
    for (int64_t i = 0; i < numel; i++) {
        if (T->dtype == CP_DTYPE_I64 && T->nbytes == (size_t)numel * 8)
            out[i] = ((const int64_t *)T->data)[i];
        else if (T->dtype == CP_DTYPE_I32 && T->nbytes == (size_t)numel * 4)
            out[i] = ((const int32_t *)T->data)[i];
        else
            return false;
    }
    *n = (size_t)numel;
    return true;
}

bool cp_pv_opset_below(const struct cp_pattern_view *v, int64_t below)
{
    return v->opset > 0 && v->opset < below;
}

bool cp_pv_opset_at_least(const struct cp_pattern_view *v, int64_t at_least)
{
    return v->opset == CP_PATTERN_OPSET_UNKNOWN || v->opset >= at_least;
}
