/*
 * TransposeRoundTripEliminationPass: remove layout round trips such as
 * NCHW -> Transpose(0,2,3,1) -> ops in NHWC -> Transpose(0,3,1,2) -> NCHW.
 *
 * Starting from a Transpose with permutation p, the pass collects the
 * region its output flows into: "permuted-space" tensors and the ops that
 * read them. The region may only hold ops that can be rewritten to work on
 * the unpermuted tensors, and may only be left through Transposes with the
 * inverse permutation (exits); other Transposes with permutation p may join
 * it as further entries (Add of two permuted tensors). The rewrite then
 * drops entries and exits, so the region's ops read the entries' inputs
 * and their results flow straight to the exits' readers:
 *
 *  - elementwise ops (unary, Clip, Gelu, and the broadcasting Add, Sub, Mul,
 *    Div, Pow, Where, Equal) stay as they are; a constant operand is
 *    permuted the same way as the data: a per-channel scale of shape [C]
 *    that broadcast over NHWC's last axis becomes [C,1,1] over NCHW;
 *  - reductions (ReduceMean, ReduceSum, ReduceMax) with keepdims and
 *    Softmax (opset >= 13) have their axes mapped through p;
 *  - a LayerNormalization keeps its meaning only if its normalized axes
 *    map onto trailing axes in the same order; otherwise (the usual case:
 *    LayerNorm over NHWC's channel axis, which LayerNormFusionPass makes
 *    out of the decomposed form) it is written out again as the
 *    decomposition over the mapped axes (ReduceMean, Sub, Mul, ReduceMean,
 *    Add(eps), Sqrt, Div, Mul(scale), Add(bias)).
 *
 * Every rewrite computes the same function: elementwise ops and
 * reductions only change which axis they run along, so their results are
 * the same up to summation order; a written-out LayerNorm rounds like the
 * decomposed form PyTorch exported.
 *
 * Which regions can go is graph/pattern.h's cp_pattern_match_roundtrip,
 * which the rule engine runs on traces too; this file rewrites them.
 */
#include "atc_bridge/passes/layout_internal.h"
#include "graph/op_eval.h"
#include "graph/pattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rewriting ------------------------------------------------------------------------- */

struct rt_rewrite {
    struct cp_lay *l;
    const struct cp_pattern_view *v;
    struct cp_pattern_roundtrip *R;
    int32_t *alias;     /* per tensor: what a permuted tensor becomes (-1: itself) */
    int32_t *const_map; /* per tensor: its permuted constant (-1: none yet) */
};

static int32_t resolve(const struct rt_rewrite *w, int32_t t)
{
    for (int guard = 0; t >= 0 && w->alias[t] >= 0 && guard < 64; guard++)
        t = w->alias[t];
    return t;
}

/* Shape s of a permuted tensor, as the unpermuted one: dims[j] =
 * s[inv[j]]. */
static void unpermute_shape(const struct cp_pattern_roundtrip *R, struct cp_shape *s)
{
    struct cp_shape o = *s;
    for (int j = 0; j < R->rank; j++)
        s->dims[j] = o.dims[R->inv[j]];
}

/* The constant t (broadcasting in permuted space, rank <= r) for the
 * unpermuted tensors: right-aligned to rank r, transposed by the inverse
 * permutation, leading ones dropped. */
static enum cp_status permute_const(struct rt_rewrite *w, int32_t t, int32_t *out)
{
    if (w->const_map[t] >= 0) {
        *out = w->const_map[t];
        return CP_OK;
    }
    struct cp_lay *l = w->l;
    const struct cp_pattern_roundtrip *R = w->R;
    const struct cp_tensor *T = cp_graph_tensor(l->g, t);
    int r = R->rank, k = T->shape.rank;
    /* x: the constant right-aligned to rank r; y: x transposed so that its
     * axis j is x's axis inv[j] (graph/op_eval.h's Transpose). */
    struct cp_tensor x = {.dtype = T->dtype}, y = {.dtype = T->dtype};
    int64_t ad[CP_MAX_RANK], nd[CP_MAX_RANK], perm[CP_MAX_RANK];
    for (int i = 0; i < r; i++)
        ad[i] = i < r - k ? 1 : T->shape.dims[i - (r - k)].value;
    for (int j = 0; j < r; j++) {
        perm[j] = R->inv[j];
        nd[j] = ad[R->inv[j]];
    }
    cp_shape_set(&x.shape, r, ad);
    cp_shape_set(&y.shape, r, nd);
    size_t nbytes = (size_t)cp_shape_numel(&x.shape) * cp_dtype_size(T->dtype);
    char *buf = malloc(nbytes ? nbytes : 1);
    if (!buf)
        return cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory permuting constant '%s'", T->name);
    cp_eval_transpose(&x, T->data, perm, &y, buf);
    int lead = 0;
    while (lead < r - 1 && nd[lead] == 1)
        lead++;
    enum cp_status st = cp_lay_new_const(l, T->name, "_unpermuted", T->dtype, r - lead, nd + lead,
                                         buf, nbytes, out);
    free(buf);
    if (st == CP_OK)
        w->const_map[t] = *out;
    return st;
}

/* Axes of a permuted tensor as axes of the unpermuted one, sorted. */
static void map_axes(const struct cp_pattern_roundtrip *R, int64_t *axes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        axes[i] = R->perm[axes[i]];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && axes[j - 1] > axes[j]; j--) {
            int64_t t = axes[j];
            axes[j] = axes[j - 1];
            axes[j - 1] = t;
        }
}

static enum cp_status remap_reduce(struct rt_rewrite *w, int32_t ni)
{
    struct cp_lay *l = w->l;
    struct cp_node *n = cp_graph_node(l->g, ni);
    int64_t axes[CP_MAX_RANK];
    size_t na;
    if (!cp_pattern_reduce_axes(w->v, n, w->R->rank, axes, &na))
        return cp_diag_set(l->d, CP_ERR_INTERNAL, "node '%s': axes changed", n->name);
    if (na == 0)
        return CP_OK;
    map_axes(w->R, axes, na);
    if (cp_node_attr(n, "axes"))
        return cp_node_set_ints(l->g, ni, "axes", axes, na) == CP_OK
                   ? CP_OK
                   : cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory");
    int64_t dim = (int64_t)na;
    int32_t t;
    enum cp_status st =
        cp_lay_new_const(l, cp_graph_tensor(l->g, n->inputs[1])->name, "_unpermuted", CP_DTYPE_I64,
                         1, &dim, axes, na * sizeof *axes, &t);
    if (st == CP_OK)
        n->inputs[1] = t;
    return st;
}

/* One node of a written-out LayerNorm: op reading ins, writing a new tensor
 * (shape s, f32) or `out` when >= 0. OUT: *res, the tensor written. */
static enum cp_status ln_step(struct rt_rewrite *w, const struct cp_node *ln, const char *suffix,
                              const char *op, const int32_t *ins, size_t n_ins,
                              const struct cp_shape *s, int32_t out, int32_t *res, int32_t *node)
{
    struct cp_lay *l = w->l;
    enum cp_status st;
    if (out < 0) {
        char tn[600];
        snprintf(tn, sizeof tn, "%s%s", ln->name, suffix);
        struct cp_shape sh = *s;
        int32_t t;
        char name[620];
        snprintf(name, sizeof name, "%s", tn);
        for (int k = 2; cp_graph_find_tensor(l->g, name) >= 0; k++)
            snprintf(name, sizeof name, "%s_%d", tn, k);
        if ((st = cp_graph_add_tensor(l->g, name, CP_DTYPE_F32, &sh, CP_TENSOR_INTERMEDIATE, &t,
                                      l->d)) != CP_OK)
            return st;
        out = t;
    }
    char nn[620];
    cp_lay_fresh_node_name(l->g, ln->name, suffix, nn, sizeof nn);
    if ((st = cp_graph_add_node(l->g, nn, op, "", ins, n_ins, &out, 1, ln->origins, ln->n_origins,
                                node, l->d)) != CP_OK)
        return st;
    *res = out;
    return CP_OK;
}

static enum cp_status ln_reduce_mean(struct rt_rewrite *w, const struct cp_node *ln,
                                     const char *suffix, int32_t x, const int64_t *axes, size_t na,
                                     const struct cp_shape *s, int32_t *res)
{
    struct cp_lay *l = w->l;
    int32_t ins[2] = {x, -1}, node;
    size_t n_ins = 1;
    enum cp_status st;
    bool axes_input = cp_graph_opset(l->g) >= 18;
    if (axes_input) {
        int64_t dim = (int64_t)na;
        if ((st = cp_lay_new_const(l, ln->name, "/axes", CP_DTYPE_I64, 1, &dim, axes,
                                   na * sizeof *axes, &ins[1])) != CP_OK)
            return st;
        n_ins = 2;
    }
    if ((st = ln_step(w, ln, suffix, "ReduceMean", ins, n_ins, s, -1, res, &node)) != CP_OK)
        return st;
    if ((!axes_input && cp_node_set_ints(l->g, node, "axes", axes, na) != CP_OK) ||
        cp_node_set_int(l->g, node, "keepdims", 1) != CP_OK)
        return cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory");
    return CP_OK;
}

/* Write LayerNorm node `ni` (already reading unpermuted X) out as its
 * decomposition over the mapped axes; its output tensor keeps its name. */
static enum cp_status expand_layernorm(struct rt_rewrite *w, int32_t ni)
{
    struct cp_lay *l = w->l;
    const struct cp_pattern_roundtrip *R = w->R;
    struct cp_node *ln = cp_graph_node(l->g, ni);
    int r = R->rank, a = cp_pattern_layernorm_axis(ln, r);
    int64_t axes[CP_MAX_RANK];
    size_t na = 0;
    for (int i = a; i < r; i++)
        axes[na++] = i;
    map_axes(R, axes, na);
    float eps = cp_node_attr_float(ln, "epsilon", 1e-5f);
    int32_t x = ln->inputs[0], y = ln->outputs[0];
    int32_t scale = ln->n_inputs > 1 ? ln->inputs[1] : -1;
    int32_t bias = ln->n_inputs > 2 ? ln->inputs[2] : -1;
    struct cp_shape xs = cp_graph_tensor(l->g, x)->shape, rs = xs;
    for (size_t i = 0; i < na; i++)
        rs.dims[axes[i]].value = 1, rs.dims[axes[i]].sym = NULL;
    ln->dead = true;
    cp_graph_tensor(l->g, y)->producer = -1;
    int32_t mean, dlt, sq, var, ve, sd, nrm, cur, eps_t, node;
    enum cp_status st;
    if ((st = ln_reduce_mean(w, ln, "/mean", x, axes, na, &rs, &mean)) != CP_OK)
        return st;
    int32_t in2[2] = {x, mean};
    if ((st = ln_step(w, ln, "/sub", "Sub", in2, 2, &xs, -1, &dlt, &node)) != CP_OK)
        return st;
    in2[0] = in2[1] = dlt;
    if ((st = ln_step(w, ln, "/square", "Mul", in2, 2, &xs, -1, &sq, &node)) != CP_OK)
        return st;
    if ((st = ln_reduce_mean(w, ln, "/var", sq, axes, na, &rs, &var)) != CP_OK)
        return st;
    if ((st = cp_lay_new_const(l, ln->name, "/epsilon", CP_DTYPE_F32, 0, NULL, &eps, sizeof eps,
                               &eps_t)) != CP_OK)
        return st;
    in2[0] = var;
    in2[1] = eps_t;
    if ((st = ln_step(w, ln, "/add_eps", "Add", in2, 2, &rs, -1, &ve, &node)) != CP_OK)
        return st;
    if ((st = ln_step(w, ln, "/sqrt", "Sqrt", &ve, 1, &rs, -1, &sd, &node)) != CP_OK)
        return st;
    in2[0] = dlt;
    in2[1] = sd;
    bool last = scale < 0 && bias < 0;
    if ((st = ln_step(w, ln, "/div", "Div", in2, 2, &xs, last ? y : -1, &nrm, &node)) != CP_OK)
        return st;
    cur = nrm;
    if (scale >= 0) {
        in2[0] = cur;
        in2[1] = scale;
        if ((st = ln_step(w, ln, "/scale", "Mul", in2, 2, &xs, bias < 0 ? y : -1, &cur, &node)) !=
            CP_OK)
            return st;
    }
    if (bias >= 0) {
        in2[0] = cur;
        in2[1] = bias;
        if ((st = ln_step(w, ln, "/bias", "Add", in2, 2, &xs, y, &cur, &node)) != CP_OK)
            return st;
    }
    return CP_OK;
}

/* Rewrite region node ni to work on unpermuted tensors. */
static enum cp_status rewrite_node(struct rt_rewrite *w, int32_t ni)
{
    struct cp_lay *l = w->l;
    const struct cp_pattern_roundtrip *R = w->R;
    struct cp_node *n = cp_graph_node(l->g, ni);
    enum cp_status st;
    for (size_t j = 0; j < n->n_inputs; j++) {
        int32_t t = n->inputs[j];
        if (t < 0)
            continue;
        if (R->space[t]) {
            n->inputs[j] = resolve(w, t);
            continue;
        }
        const struct cp_tensor *T = cp_graph_tensor(l->g, t);
        bool constant_operand = cp_pattern_roundtrip_permutes_constants(n->op) &&
                                cp_lay_is_const(l, t) && cp_shape_numel(&T->shape) != 1;
        if (constant_operand) {
            int32_t nt;
            if ((st = permute_const(w, t, &nt)) != CP_OK)
                return st;
            n = cp_graph_node(l->g, ni);
            n->inputs[j] = nt;
        }
    }
    struct cp_tensor *y = cp_graph_tensor(l->g, n->outputs[0]);
    if (R->space[n->outputs[0]]) { /* not when it became a graph output */
        unpermute_shape(R, &y->shape);
        y->value = NULL;
        y->value_len = 0;
    }
    if (cp_pattern_roundtrip_is_reduce(n->op))
        return remap_reduce(w, ni);
    if (n->op == CP_OP_SOFTMAX) {
        int64_t a = cp_node_attr_int(n, "axis", -1);
        if (a < 0)
            a += R->rank;
        return cp_node_set_int(l->g, ni, "axis", R->perm[a]) == CP_OK
                   ? CP_OK
                   : cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory");
    }
    if (n->op == CP_OP_LAYER_NORMALIZATION) {
        int na;
        if (cp_pattern_roundtrip_ln_trailing(R, n, &na))
            return cp_node_set_int(l->g, ni, "axis", na) == CP_OK
                       ? CP_OK
                       : cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory");
        return expand_layernorm(w, ni);
    }
    return CP_OK;
}

static enum cp_status rewrite(struct cp_lay *l, const struct cp_pattern_view *v,
                              struct cp_pattern_roundtrip *R)
{
    struct rt_rewrite w = {l, v, R, NULL, NULL};
    size_t nt = cp_graph_n_tensors(l->g);
    w.alias = malloc((nt + 1) * sizeof *w.alias);
    w.const_map = malloc((nt + 1) * sizeof *w.const_map);
    enum cp_status st = CP_OK;
    if (!w.alias || !w.const_map) {
        st = cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory in a layout pass");
        goto out;
    }
    for (size_t t = 0; t <= nt; t++)
        w.alias[t] = w.const_map[t] = -1;
    /* Entries vanish: their results become their inputs. */
    for (size_t i = 0; i < R->n_entries; i++) {
        struct cp_node *e = cp_graph_node(l->g, R->entries[i]);
        w.alias[e->outputs[0]] = e->inputs[0];
        e->dead = true;
        cp_graph_tensor(l->g, e->outputs[0])->producer = -1;
    }
    /* Exits that are graph outputs: the region op writes the output. */
    for (size_t i = 0; i < R->n_exits; i++) {
        struct cp_node *x = cp_graph_node(l->g, R->exits[i]);
        int32_t z = x->outputs[0], t = x->inputs[0];
        if (!l->is_output[z])
            continue;
        int32_t pi = cp_graph_tensor(l->g, t)->producer;
        struct cp_node *p = cp_graph_node(l->g, pi);
        x->dead = true;
        p->outputs[0] = z;
        cp_graph_tensor(l->g, z)->producer = pi;
        cp_graph_tensor(l->g, t)->producer = -1;
        w.alias[t] = z;
        R->space[z] = false;
    }
    for (size_t i = 0; i < R->n_nodes && st == CP_OK; i++)
        st = rewrite_node(&w, R->nodes[i]);
    if (st != CP_OK)
        goto out;
    /* The other exits: their readers read the region's result. */
    for (size_t i = 0; i < R->n_exits; i++) {
        struct cp_node *x = cp_graph_node(l->g, R->exits[i]);
        if (x->dead)
            continue;
        int32_t z = x->outputs[0], to = resolve(&w, x->inputs[0]);
        x->dead = true;
        size_t nu;
        const struct cp_lay_use *u = cp_lay_uses(l, z, &nu);
        for (size_t k = 0; k < nu; k++)
            cp_graph_node(l->g, u[k].node)->inputs[u[k].slot] = to;
    }
out:
    free(w.alias);
    free(w.const_map);
    return st;
}

/* ---- the pass --------------------------------------------------------------------------- */

/* Try to remove the round trip starting at Transpose `seed`. OUT:
 * *removed. */
static enum cp_status try_seed(struct cp_lay *l, const struct cp_pattern_graph *pg, int32_t seed,
                               bool *removed)
{
    *removed = false;
    struct cp_pattern_roundtrip R;
    enum cp_status st;
    if (cp_pattern_match_roundtrip(&pg->view, seed, &R, &st)) {
        st = rewrite(l, &pg->view, &R);
        *removed = st == CP_OK;
    } else if (st != CP_OK) {
        st = cp_diag_set(l->d, st, "out of memory in a layout pass");
    }
    cp_pattern_roundtrip_release(&R);
    return st;
}

enum cp_status cp_layout_roundtrip_run(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    struct cp_lay l;
    enum cp_status st = cp_lay_init(&l, ctx->g, ctx->d);
    if (st != CP_OK)
        return st;
    struct cp_pattern_graph pg;
    if (cp_pattern_graph_init(&pg, ctx->g) != CP_OK)
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory in a layout pass");
    bool again = st == CP_OK;
    while (again && st == CP_OK) {
        again = false;
        for (size_t i = 0; i < cp_graph_n_nodes(ctx->g) && st == CP_OK; i++) {
            bool removed;
            st = try_seed(&l, &pg, (int32_t)i, &removed);
            if (st == CP_OK && removed) {
                *changed = again = true;
                st = cp_lay_reindex(&l);
                if (st == CP_OK && cp_pattern_graph_update(&pg) != CP_OK)
                    st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory in a layout pass");
                break;
            }
        }
    }
    cp_pattern_graph_release(&pg);
    cp_lay_release(&l);
    return st;
}
