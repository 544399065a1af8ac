/* Half-precision models (f16 and bf16 weights and I/O) under the precision
 * modes that compute in fp32 (force_fp32, the CPU default, and the bf16
 * modes, whose kernels take f32 at every node boundary): the weights are
 * widened to f32, each f16/bf16 graph input is cast to f32 where it enters
 * and each f16/bf16 graph output is cast back where it leaves, and the
 * model's own casts to f16/bf16 become casts to f32. The graph inside then
 * computes in fp32, as ATC's force_fp32 does for ops that support both;
 * users still feed and read the dtypes the model declares.
 * must_keep_origin_dtype keeps the half types (and so needs half kernels;
 * the plan names any node that has none). */
#include "atc_bridge/passes/pass.h"
#include "atc_bridge/passes/rewrite.h"

#include <stdio.h>
#include <stdlib.h>

static bool is_half(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F16 || dt == CP_DTYPE_BF16;
}

static enum cp_status widen_initializer(struct cp_pass_ctx *ctx, int32_t ti)
{
    struct cp_tensor *t = cp_graph_tensor(ctx->g, ti);
    int64_t n = cp_shape_numel(&t->shape);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory widening '%s'", t->name);
    for (int64_t i = 0; i < n && t->data; i++)
        v[i] = (float)cp_elem_load_f64(t->data, t->dtype, i);
    enum cp_dtype old = t->dtype;
    t->dtype = CP_DTYPE_F32;
    if (!t->data) {
        free(v);
        return CP_OK;
    }
    enum cp_status st =
        cp_graph_set_data(ctx->g, ti, v, (size_t)n * sizeof *v, CP_DATA_HEAP, ctx->d);
    if (st != CP_OK)
        t->dtype = old;
    return st;
}

/* A Cast of `from` into `to` (ONNX type `onnx_to`), standing for `origin`
 * (a node index, or -1: the graph's boundary). */
static enum cp_status add_cast(struct cp_pass_ctx *ctx, int32_t from, int32_t to, int onnx_to)
{
    char name[256];
    cp_rw_unique_node_name(ctx->g, "half_boundary_cast", name, sizeof name);
    int32_t idx;
    enum cp_status st =
        cp_rw_add_node(ctx->g, name, "Cast", "", &from, 1, &to, 1, NULL, 0, &idx, ctx->d);
    if (st == CP_OK && cp_node_set_int(ctx->g, idx, "to", onnx_to) != CP_OK)
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
    return st;
}

static enum cp_status new_f32_like(struct cp_pass_ctx *ctx, int32_t like, int32_t *out)
{
    const struct cp_tensor *t = cp_graph_tensor(ctx->g, like);
    char name[512];
    char base[300];
    snprintf(base, sizeof base, "%.280s/f32", t->name);
    cp_rw_unique_tensor_name(ctx->g, base, name, sizeof name);
    struct cp_shape s = t->shape;
    return cp_graph_add_tensor(ctx->g, name, CP_DTYPE_F32, &s, CP_TENSOR_INTERMEDIATE, out, ctx->d);
}

static int onnx_type_of(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F16 ? 10 : 16; /* FLOAT16, BFLOAT16 */
}

enum cp_status cp_precision_widen_half(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    size_t n_nodes = cp_graph_n_nodes(g);
    enum cp_status st = CP_OK;
    /* The model's own casts to a half type: to f32 (before the boundary
     * casts are added, which must keep theirs). */
    for (size_t i = 0; i < n_nodes; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead || n->op != CP_OP_CAST)
            continue;
        int64_t to = cp_node_attr_int(n, "to", 0);
        if (to != 10 && to != 16)
            continue;
        if (cp_node_set_int(g, (int32_t)i, "to", 1) != CP_OK)
            return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
        *changed = true;
    }
    size_t n_tensors = cp_graph_n_tensors(g);
    for (size_t i = 0; i < n_tensors && st == CP_OK; i++) {
        struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        /* an initializer that is itself a graph output keeps its dtype */
        if (t->kind == CP_TENSOR_INITIALIZER && is_half(t->dtype) &&
            !cp_rw_is_graph_output(g, (int32_t)i)) {
            st = widen_initializer(ctx, (int32_t)i);
            *changed = true;
        }
    }
    /* Inputs: consumers read a cast of them. */
    for (size_t i = 0; i < cp_graph_n_inputs(g) && st == CP_OK; i++) {
        int32_t x = cp_graph_input(g, i);
        const struct cp_tensor *t = cp_graph_tensor(g, x);
        if (!is_half(t->dtype) || cp_rw_n_uses(g, x) == 0)
            continue;
        int32_t x32;
        if ((st = new_f32_like(ctx, x, &x32)) != CP_OK)
            break;
        cp_rw_replace_uses(g, x, x32);
        st = add_cast(ctx, x, x32, 1);
        *changed = true;
    }
    /* Outputs: their producer writes f32, cast back to what the model
     * declares. A declared half output keeps the dtype the model gives. */
    for (size_t i = 0; i < cp_graph_n_outputs(g) && st == CP_OK; i++) {
        int32_t y = cp_graph_output(g, i);
        struct cp_tensor *t = cp_graph_tensor(g, y);
        if (!is_half(t->dtype) || t->kind != CP_TENSOR_INTERMEDIATE || t->producer < 0)
            continue;
        int32_t y32;
        if ((st = new_f32_like(ctx, y, &y32)) != CP_OK)
            break;
        t = cp_graph_tensor(g, y);
        struct cp_node *p = cp_graph_node(g, t->producer);
        for (size_t k = 0; k < p->n_outputs; k++)
            if (p->outputs[k] == y)
                p->outputs[k] = y32;
        cp_graph_tensor(g, y32)->producer = t->producer;
        t->producer = -1;
        cp_rw_replace_uses(g, y, y32);
        st = add_cast(ctx, y32, y, onnx_type_of(t->dtype));
        *changed = true;
    }
    /* Intermediates are re-inferred from here. */
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (t->kind == CP_TENSOR_INTERMEDIATE && is_half(t->dtype) &&
            !cp_rw_is_graph_output(g, (int32_t)i))
            t->dtype = CP_DTYPE_UNDEFINED;
    }
    return st;
}
