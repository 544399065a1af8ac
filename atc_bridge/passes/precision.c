/*
 * The precision pass family (see pass.h): --precision_mode and
 * --op_select_implmode, as node attributes the kernels read.
 *
 * PrecisionModePass. Tensors stay f32 at every node boundary; what changes
 * is the arithmetic inside the compute-bound ops. force_fp32 and
 * must_keep_origin_dtype (the CPU target's default) leave the graph as it
 * is. allow_fp32_to_bf16 marks Conv, FusedConv, MatMul, FusedMatMul, Gemm
 * and FusedAttention with compute_precision "bf16": their kernels convert
 * inputs and weights to bf16 and accumulate in f32 (oneDNN on AVX512-BF16 /
 * AMX). allow_mix_precision_bf16 marks the same ops and records the
 * precision-sensitive ones (Softmax, the normalisations, the reductions)
 * explicitly as "fp32", which they already compute in. Both need bf16
 * arithmetic (avx512_bf16 or amx_bf16). The fp16 modes are refused: the CPU
 * target has no fp16 kernels, and the message names the bf16 mode that does
 * the same job.
 *
 * ImplModePass. high_performance (ATC's default) gives Softmax,
 * FusedAttention, Erf and Gelu the attribute impl "fast": vectorised exp
 * and erf polynomials within a few ulp (runner/cpu/fast_math.h), so results
 * stay within 1e-4 of the exact ones. high_precision and
 * high_precision_for_all give impl "exact": libm's expf and erff.
 * high_performance_for_all also switches GELU to its tanh approximation
 * (Gelu approximate "tanh", fused activation "Gelu" -> "GeluTanh"), which
 * changes results by up to about 3e-4 per element.
 */
#include "atc_bridge/passes/pass.h"
#include "graph/op_eval.h"

#include <stdio.h>
#include <string.h>

/* ---- PrecisionModePass --------------------------------------------------------------- */

/* Ops whose arithmetic the bf16 modes change. */
static bool is_bf16_op(enum cp_op op)
{
    switch (op) {
    case CP_OP_CONV:
    case CP_OP_FUSED_CONV:
    case CP_OP_MATMUL:
    case CP_OP_FUSED_MATMUL:
    case CP_OP_GEMM:
    case CP_OP_FUSED_ATTENTION:
        return true;
    default:
        return false;
    }
}

/* Ops allow_mix_precision_bf16 keeps in fp32 on purpose. */
static bool is_fp32_kept_op(enum cp_op op)
{
    switch (op) {
    case CP_OP_SOFTMAX:
    case CP_OP_LAYER_NORMALIZATION:
    case CP_OP_GROUP_NORMALIZATION:
    case CP_OP_INSTANCE_NORMALIZATION:
    case CP_OP_BATCH_NORMALIZATION:
    case CP_OP_REDUCE_MEAN:
    case CP_OP_REDUCE_SUM:
    case CP_OP_REDUCE_MAX:
        return true;
    default:
        return false;
    }
}

static bool op_type_listed(const char *canon, const char *type)
{
    char entry[160];
    snprintf(entry, sizeof entry, "OpType::%s", type);
    return strlen(type) < sizeof entry - 9 && cp_keep_dtype_has(canon, entry);
}

bool cp_keep_dtype_covers(const char *canon, const struct cp_node *n)
{
    if (!canon || !canon[0])
        return false;
    for (size_t i = 0; i < n->n_origins; i++)
        if (cp_keep_dtype_has(canon, n->origins[i]))
            return true;
    if (cp_keep_dtype_has(canon, n->name) || (n->op_type && op_type_listed(canon, n->op_type)) ||
        op_type_listed(canon, cp_op_name(n->op)))
        return true;
    switch (n->op) {
    case CP_OP_FUSED_CONV:
        return op_type_listed(canon, "Conv");
    case CP_OP_FUSED_MATMUL:
        return op_type_listed(canon, "MatMul") || op_type_listed(canon, "Gemm");
    case CP_OP_FUSED_ATTENTION:
        return op_type_listed(canon, "MatMul");
    default:
        return false;
    }
}

static bool is_fp16_mode(enum cp_precision_mode m)
{
    return m == CP_PREC_FORCE_FP16 || m == CP_PREC_CUBE_FP16IN_FP32OUT ||
           m == CP_PREC_ALLOW_MIX_PRECISION || m == CP_PREC_ALLOW_FP32_TO_FP16 ||
           m == CP_PREC_ALLOW_MIX_PRECISION_FP16;
}

/* The bf16 mode that does what an fp16 mode asks: the mixed modes keep
 * sensitive ops in fp32, the others convert the compute-bound ops. */
static enum cp_precision_mode bf16_counterpart(enum cp_precision_mode m)
{
    return m == CP_PREC_ALLOW_MIX_PRECISION || m == CP_PREC_ALLOW_MIX_PRECISION_FP16
               ? CP_PREC_ALLOW_MIX_PRECISION_BF16
               : CP_PREC_ALLOW_FP32_TO_BF16;
}

static enum cp_status refuse_mode(struct cp_pass_ctx *ctx, enum cp_precision_mode m)
{
    const char *model = ctx->cpu_model ? ctx->cpu_model : "unknown";
    const char *name = cp_precision_mode_name(m);
    if (is_fp16_mode(m)) {
        enum cp_precision_mode alt = ctx->has_bf16 ? bf16_counterpart(m) : CP_PREC_FORCE_FP32;
        if (!ctx->has_fp16)
            return cp_diag_set(ctx->d, CP_ERR_UNSUPPORTED,
                               "--precision_mode=%s needs fp16 arithmetic (avx512_fp16), which "
                               "this CPU (%s) lacks; use --precision_mode=%s",
                               name, model, cp_precision_mode_name(alt));
        return cp_diag_set(ctx->d, CP_ERR_UNSUPPORTED,
                           "--precision_mode=%s: the CPU target has no fp16 kernels (this CPU, "
                           "%s, has avx512_fp16, but cannprof does not use it yet); use "
                           "--precision_mode=%s",
                           name, model, cp_precision_mode_name(alt));
    }
    return cp_diag_set(ctx->d, CP_ERR_UNSUPPORTED,
                       "--precision_mode=%s needs bf16 arithmetic (avx512_bf16 or amx_bf16), "
                       "which this CPU (%s) lacks; use --precision_mode=force_fp32",
                       name, model);
}

static enum cp_status mark(struct cp_pass_ctx *ctx, int32_t node, const char *attr,
                           const char *value, bool *changed)
{
    const struct cp_node *n = cp_graph_node(ctx->g, node);
    const char *have = cp_node_attr_string(n, attr, NULL);
    if (have && strcmp(have, value) == 0)
        return CP_OK;
    if (cp_node_set_string(ctx->g, node, attr, value) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "node '%s': out of memory", n->name);
    *changed = true;
    return CP_OK;
}

/* The --modify_mixlist / --customize_dtypes override of node n: by its
 * name or an origin first, then by its op type (fused forms as
 * cp_keep_dtype_covers treats them). NULL when none. */
static const char *override_of(const char *canon, const struct cp_node *n)
{
    const char *v = cp_precision_override(canon, n->name);
    for (size_t i = 0; !v && i < n->n_origins; i++)
        v = cp_precision_override(canon, n->origins[i]);
    const char *types[3] = {n->op_type ? n->op_type : cp_op_name(n->op), NULL, NULL};
    if (n->op == CP_OP_FUSED_CONV)
        types[1] = "Conv";
    else if (n->op == CP_OP_FUSED_MATMUL)
        types[1] = "MatMul", types[2] = "Gemm";
    else if (n->op == CP_OP_FUSED_ATTENTION)
        types[1] = "MatMul";
    for (int k = 0; !v && k < 3 && types[k]; k++) {
        char entry[160];
        snprintf(entry, sizeof entry, "OpType::%s", types[k]);
        v = cp_precision_override(canon, entry);
    }
    return v;
}

/* The overrides win over the mode and --keep_dtype, as with ATC; only ops
 * with bf16 kernels change (the conversion warns about the others). */
static enum cp_status apply_overrides(struct cp_pass_ctx *ctx, bool *changed)
{
    const char *canon = ctx->config ? ctx->config->precision_overrides : "";
    for (size_t i = 0; canon[0] && i < cp_graph_n_nodes(ctx->g); i++) {
        const struct cp_node *n = cp_graph_node(ctx->g, (int32_t)i);
        if (n->dead || !is_bf16_op(n->op) ||
            strcmp(cp_node_attr_string(n, "compute_precision", ""), "int8") == 0)
            continue;
        const char *v = override_of(canon, n);
        if (!v)
            continue;
        if (strcmp(v, "bf16") == 0 && !ctx->has_bf16)
            return cp_diag_set(ctx->d, CP_ERR_UNSUPPORTED,
                               "node '%s': --customize_dtypes/--modify_mixlist ask for bf16, which "
                               "this CPU (%s) has no arithmetic for",
                               n->name, ctx->cpu_model ? ctx->cpu_model : "?");
        enum cp_status st = mark(ctx, (int32_t)i, "compute_precision", v, changed);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

static enum cp_status mode_marks(struct cp_pass_ctx *ctx, bool *changed);

static enum cp_status precision_mode_run(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    enum cp_status st = mode_marks(ctx, changed);
    return st == CP_OK ? apply_overrides(ctx, changed) : st;
}

static enum cp_status mode_marks(struct cp_pass_ctx *ctx, bool *changed)
{
    enum cp_precision_mode m = ctx->config ? ctx->config->precision_mode : CP_PREC_FORCE_FP32;
    if (m == CP_PREC_MUST_KEEP_ORIGIN_DTYPE)
        return CP_OK;
    if (!is_fp16_mode(m) && (m == CP_PREC_FORCE_FP32 || ctx->has_bf16)) {
        /* f16/bf16 models compute in fp32 here (precision_legacy.c) */
        enum cp_status st = cp_precision_widen_half(ctx, changed);
        if (st != CP_OK)
            return st;
    }
    if (m == CP_PREC_FORCE_FP32)
        return CP_OK;
    if (is_fp16_mode(m) || !ctx->has_bf16)
        return refuse_mode(ctx, m);
    bool mix = m == CP_PREC_ALLOW_MIX_PRECISION_BF16;
    const char *keep = ctx->config ? ctx->config->keep_dtype : "";
    size_t kept = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(ctx->g); i++) {
        const struct cp_node *n = cp_graph_node(ctx->g, (int32_t)i);
        if (n->dead || strcmp(cp_node_attr_string(n, "compute_precision", ""), "int8") == 0)
            continue; /* int8 nodes (Int8QuantizationPass) keep their mark */
        /* --keep_dtype: listed nodes keep fp32, marked so that the trace
         * says which ones they are */
        bool keep_fp32 = is_bf16_op(n->op) && cp_keep_dtype_covers(keep, n);
        kept += keep_fp32;
        const char *want = keep_fp32                       ? "fp32"
                           : is_bf16_op(n->op)             ? "bf16"
                           : mix && is_fp32_kept_op(n->op) ? "fp32"
                                                           : NULL;
        enum cp_status st =
            want ? mark(ctx, (int32_t)i, "compute_precision", want, changed) : CP_OK;
        if (st != CP_OK)
            return st;
    }
    if (kept)
        cp_log_msg(ctx->log, CP_LOG_INFO,
                   "PrecisionModePass: --keep_dtype keeps %zu node%s in fp32", kept,
                   kept == 1 ? "" : "s");
    return CP_OK;
}

/* ---- ImplModePass --------------------------------------------------------------------- */

/* Ops with a fast and an exact implementation of exp or erf. */
static bool has_impl_choice(enum cp_op op)
{
    return op == CP_OP_SOFTMAX || op == CP_OP_FUSED_ATTENTION || op == CP_OP_GELU ||
           op == CP_OP_ERF;
}

/* Whether `type` is one of the comma-separated list's entries. */
static bool listed_type(const char *list, const char *type)
{
    size_t k = strlen(type);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == k && strncmp(p, type, k) == 0)
            return true;
        p += len + (comma ? 1 : 0);
    }
    return false;
}

static enum cp_status impl_mode_run(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    enum cp_implmode m = ctx->config ? ctx->config->implmode : CP_IMPL_HIGH_PERFORMANCE;
    bool exact = m == CP_IMPL_HIGH_PRECISION || m == CP_IMPL_HIGH_PRECISION_FOR_ALL;
    bool tanh_gelu = m == CP_IMPL_HIGH_PERFORMANCE_FOR_ALL;
    /* --optypelist_for_implmode: the mode for the listed types only, the
     * default (fast) for the others */
    const char *only = ctx->config ? ctx->config->optypelist_for_implmode : "";
    for (size_t i = 0; i < cp_graph_n_nodes(ctx->g); i++) {
        const struct cp_node *n = cp_graph_node(ctx->g, (int32_t)i);
        if (n->dead)
            continue;
        enum cp_status st = CP_OK;
        bool listed = !only[0] || listed_type(only, cp_op_name(n->op)) ||
                      (n->op == CP_OP_FUSED_ATTENTION && listed_type(only, "Softmax"));
        if (has_impl_choice(n->op))
            st = mark(ctx, (int32_t)i, "impl", exact && listed ? "exact" : "fast", changed);
        if (st == CP_OK && tanh_gelu && n->op == CP_OP_GELU)
            st = mark(ctx, (int32_t)i, "approximate", "tanh", changed);
        if (st == CP_OK && tanh_gelu &&
            (n->op == CP_OP_FUSED_CONV || n->op == CP_OP_FUSED_MATMUL ||
             n->op == CP_OP_GROUP_NORMALIZATION) &&
            cp_act_of(n).kind == CP_ACT_GELU)
            st = mark(ctx, (int32_t)i, "activation", cp_act_name(CP_ACT_GELU_TANH), changed);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* ---- KernelSelectionPass ------------------------------------------------------------ */

/* Whether node n stands for ONNX node `name` (by name or origin). */
static bool stands_for(const struct cp_node *n, const char *name, size_t len)
{
    if (strlen(n->name) == len && strncmp(n->name, name, len) == 0)
        return true;
    for (size_t k = 0; k < n->n_origins; k++)
        if (strlen(n->origins[k]) == len && strncmp(n->origins[k], name, len) == 0)
            return true;
    return false;
}

/* --op_kernels: each converted node standing for a listed ONNX node gets
 * the attribute `kernel`, which the runtime's kernel selection obeys (or
 * refuses, naming the kernels that can run the node). Two entries that
 * land on one fused node with different kernels are refused. */
static enum cp_status kernel_select_run(struct cp_pass_ctx *ctx, bool *changed)
{
    const char *list = ctx->config ? ctx->config->op_kernels : "";
    *changed = false;
    for (const char *p = list; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *eq = NULL;
        for (const char *q = p; q < p + len; q++)
            if (*q == '=')
                eq = q;
        char kernel[128];
        size_t klen = eq ? len - (size_t)(eq - p) - 1 : 0;
        if (!eq || klen >= sizeof kernel)
            return cp_diag_set(ctx->d, CP_ERR_USAGE, "--op_kernels: '%.*s' is not NODE=KERNEL",
                               (int)len, p);
        memcpy(kernel, eq + 1, klen);
        kernel[klen] = '\0';
        size_t nlen = (size_t)(eq - p);
        for (size_t i = 0; i < cp_graph_n_nodes(ctx->g); i++) {
            const struct cp_node *n = cp_graph_node(ctx->g, (int32_t)i);
            if (n->dead || !stands_for(n, p, nlen))
                continue;
            const char *had = cp_node_attr_string(n, "kernel", "");
            if (had[0] && strcmp(had, kernel) != 0)
                return cp_diag_set(ctx->d, CP_ERR_USAGE,
                                   "--op_kernels: node '%s' stands for several listed nodes, "
                                   "pinned to both '%s' and '%s'",
                                   n->name, had, kernel);
            enum cp_status st = mark(ctx, (int32_t)i, "kernel", kernel, changed);
            if (st != CP_OK)
                return st;
        }
        p = nl ? nl + 1 : p + len;
    }
    return CP_OK;
}

const struct cp_pass cp_precision_passes[] = {
    {"PrecisionModePass", "GraphFusion",
     "--precision_mode: marks conv, matmul and attention for bf16 compute (fp16 modes refused "
     "without fp16 arithmetic)",
     precision_mode_run},
    {"ImplModePass", "GraphFusion",
     "--op_select_implmode: exact (libm) or fast (vectorised) exp/erf in softmax, attention, "
     "GELU; tanh GELU with high_performance_for_all",
     impl_mode_run},
    {"KernelSelectionPass", "GraphFusion",
     "--op_kernels: pins single nodes to a runtime kernel (by ONNX node, through fusion)",
     kernel_select_run},
    {NULL, NULL, NULL, NULL},
};
