/* Reference kernels for cannprof's own fused ops (graph.h): FusedConv,
 * FusedMatMul, GroupNormalization and Gelu.
 *
 * They compute the definition step by step: the product (FusedConv through
 * the reference Conv kernel itself), then the residual and activation in
 * the order residual_first says, on plain NCHW / row-major data. Tensors
 * the layout pass re-laid out (NHWC, blocked) reach them as plain copies
 * through the layout adapter (layout.h). */
#include "runner/cpu/fused_act.h"
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <math.h>
#include <string.h>

/* The residual input (index 3), when present, is f32 of the output's shape. */
static bool residual_ok(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *r = cp_ref_in(g, n, 3), *y = cp_ref_out(g, n, 0);
    return !r || (r->dtype == CP_DTYPE_F32 && cp_shape_equal(&r->shape, &y->shape) &&
                  (r->layout == y->layout || (cp_tensor_is_plain(r) && cp_tensor_is_plain(y))));
}

/* y = act(y + r) or act(y) + r over n elements; r is a copy when the
 * residual shares the output's buffer (memplan.c lets it). */
static void finish(const struct cp_kexec *k, float *y, int64_t n, const float *r)
{
    struct cp_act a = cp_act_of(k->node);
    bool first = cp_node_attr_int(k->node, "residual_first", 0) != 0;
    for (int64_t i = 0; i < n; i++) {
        float v = y[i];
        if (r && first)
            v += r[i];
        v = cp_act_ref(&a, v);
        if (r && !first)
            v += r[i];
        y[i] = v;
    }
}

/* ---- FusedConv ------------------------------------------------------------ */

static bool fconv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return n->n_inputs >= 2 && n->n_inputs <= 4 && cp_act_of(n).kind != CP_ACT_BAD &&
           cp_ref_conv.supports(g, n) && residual_ok(g, n);
}

/* The reference Conv kernel brings its own layout adapter, so only the
 * residual and activation are left; they are elementwise and the residual
 * shares the output's layout, so they run on the bytes as they are. */
static bool residual_in_place(const struct cp_kexec *k)
{
    return k->node->n_inputs > 3 && k->in[3] && k->in_data[3] == k->out_data[0];
}

static enum cp_status fconv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    enum cp_status st = cp_ref_layout_prepare(k, d);
    if (st == CP_OK && residual_in_place(k))
        k->scratch_bytes += (size_t)cp_ref_numel(&k->out[0]->shape) * sizeof(float);
    return st;
}

static enum cp_status fconv_run(struct cp_kexec *k)
{
    int64_t n = cp_ref_numel(&k->out[0]->shape);
    const float *r = k->node->n_inputs > 3 && k->in[3] ? k->in_data[3] : NULL;
    if (residual_in_place(k)) {
        float *copy = (float *)((char *)k->scratch + cp_ref_layout_bytes(k));
        memcpy(copy, r, (size_t)n * sizeof(float));
        r = copy;
    }
    enum cp_status st = cp_ref_conv.run(k);
    if (st == CP_OK)
        finish(k, k->out_data[0], n, r);
    return st;
}

CP_REF_KERNEL(cp_ref_fused_conv, CP_OP_FUSED_CONV, fconv_supports, fconv_prepare, fconv_run);

/* ---- FusedMatMul ---------------------------------------------------------- */

/* Operands promoted to rank >= 2 with op() applied, batch dims aligned to
 * the output's. */
struct fmm_dims {
    int rank; /* of the output, >= 2 */
    int64_t m, k, n;
    int64_t batch[CP_MAX_RANK];     /* output batch dims */
    int64_t a_bs[CP_MAX_RANK];      /* A's stride per batch dim (0: broadcast) */
    int64_t b_bs[CP_MAX_RANK];      /* B's */
    int64_t a_rs, a_ks, b_ks, b_ns; /* element strides of A[i, p] and B[p, j] */
};

static bool fmm_dims(const struct cp_node *node, const struct cp_shape *as,
                     const struct cp_shape *bs, const struct cp_shape *ys, struct fmm_dims *d)
{
    if (as->rank < 2 || bs->rank < 2 || ys->rank < 2)
        return false;
    bool ta = cp_node_attr_int(node, "transA", 0) != 0;
    bool tb = cp_node_attr_int(node, "transB", 0) != 0;
    int64_t ar = as->dims[as->rank - 2].value, ac = as->dims[as->rank - 1].value;
    int64_t br = bs->dims[bs->rank - 2].value, bc = bs->dims[bs->rank - 1].value;
    d->m = ta ? ac : ar;
    d->k = ta ? ar : ac;
    d->n = tb ? br : bc;
    if ((tb ? bc : br) != d->k)
        return false;
    d->a_rs = ta ? 1 : ac;
    d->a_ks = ta ? ac : 1;
    d->b_ks = tb ? 1 : bc;
    d->b_ns = tb ? bc : 1;
    d->rank = ys->rank;
    if (ys->dims[ys->rank - 2].value != d->m || ys->dims[ys->rank - 1].value != d->n)
        return false;
    int nb = ys->rank - 2;
    int64_t sa = ar * ac, sb = br * bc;
    for (int i = nb - 1; i >= 0; i--) {
        int ia = i - (nb - (as->rank - 2)), ib = i - (nb - (bs->rank - 2));
        int64_t da = ia >= 0 ? as->dims[ia].value : 1, db = ib >= 0 ? bs->dims[ib].value : 1;
        d->batch[i] = ys->dims[i].value;
        if ((da != 1 && da != d->batch[i]) || (db != 1 && db != d->batch[i]))
            return false;
        d->a_bs[i] = da == 1 ? 0 : sa;
        d->b_bs[i] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
    }
    return true;
}

static bool fmm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs < 2 || n->n_inputs > 4 || n->n_outputs != 1 ||
        cp_act_of(n).kind == CP_ACT_BAD || !residual_ok(g, n))
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, 0), *b = cp_ref_in(g, n, 1),
                           *bias = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    struct fmm_dims d;
    if (!a || !b || a->dtype != CP_DTYPE_F32 || b->dtype != CP_DTYPE_F32 ||
        y->dtype != CP_DTYPE_F32 || !fmm_dims(n, &a->shape, &b->shape, &y->shape, &d))
        return false;
    return !bias || (bias->dtype == CP_DTYPE_F32 && bias->shape.rank == 1 &&
                     bias->shape.dims[0].value == d.n);
}

static enum cp_status fmm_plain(struct cp_kexec *k)
{
    struct fmm_dims d;
    if (!fmm_dims(k->node, &k->in[0]->shape, &k->in[1]->shape, &k->out[0]->shape, &d))
        return CP_ERR_INTERNAL;
    const float *a = k->in_data[0], *b = k->in_data[1];
    const float *bias = k->node->n_inputs > 2 && k->in[2] ? k->in_data[2] : NULL;
    float alpha = cp_node_attr_float(k->node, "alpha", 1.0f);
    float *y = k->out_data[0];
    int nb = d.rank - 2;
    int64_t batches = 1, idx[CP_MAX_RANK] = {0};
    for (int i = 0; i < nb; i++)
        batches *= d.batch[i];
    for (int64_t bt = 0; bt < batches; bt++) {
        int64_t ao = 0, bo = 0, rem = bt;
        for (int i = nb - 1; i >= 0; i--) {
            idx[i] = rem % d.batch[i];
            rem /= d.batch[i];
            ao += idx[i] * d.a_bs[i];
            bo += idx[i] * d.b_bs[i];
        }
        float *yb = y + bt * d.m * d.n;
        for (int64_t i = 0; i < d.m; i++)
            for (int64_t j = 0; j < d.n; j++) {
                double acc = 0.0;
                for (int64_t p = 0; p < d.k; p++)
                    acc += (double)a[ao + i * d.a_rs + p * d.a_ks] *
                           (double)b[bo + p * d.b_ks + j * d.b_ns];
                yb[i * d.n + j] = (float)(alpha * acc + (bias ? bias[j] : 0.0f));
            }
    }
    finish(k, y, batches * d.m * d.n, k->node->n_inputs > 3 && k->in[3] ? k->in_data[3] : NULL);
    return CP_OK;
}

static enum cp_status fmm_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, fmm_plain);
}

CP_REF_KERNEL(cp_ref_fused_matmul, CP_OP_FUSED_MATMUL, fmm_supports, cp_ref_layout_prepare,
              fmm_run);

/* ---- GroupNormalization --------------------------------------------------- */

static bool gn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 3 || n->n_outputs != 1 ||
        cp_act_of(n).kind == CP_ACT_BAD)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1),
                           *b = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    int64_t groups = cp_node_attr_int(n, "num_groups", 0);
    if (!x || !s || !b || x->dtype != CP_DTYPE_F32 || s->dtype != CP_DTYPE_F32 ||
        b->dtype != CP_DTYPE_F32 || y->dtype != CP_DTYPE_F32 || x->shape.rank < 2 || groups < 1)
        return false;
    int64_t c = x->shape.dims[1].value;
    return c % groups == 0 && cp_ref_numel(&s->shape) == c && cp_ref_numel(&b->shape) == c &&
           cp_shape_equal(&x->shape, &y->shape);
}

static enum cp_status gn_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t batch = xs->dims[0].value, c = xs->dims[1].value;
    int64_t sp = cp_ref_span(xs, 2, xs->rank);
    int64_t groups = cp_node_attr_int(k->node, "num_groups", 1), cg = c / groups;
    float eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    struct cp_act a = cp_act_of(k->node);
    const float *x = k->in_data[0], *scale = k->in_data[1], *bias = k->in_data[2];
    float *y = k->out_data[0];
    int64_t cs = sp, ss = 1; /* element (n, ch, s) at (n*C + ch)*S + s */
    for (int64_t n = 0; n < batch; n++)
        for (int64_t gi = 0; gi < groups; gi++) {
            double sum = 0.0, sq = 0.0;
            for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ch++)
                for (int64_t s = 0; s < sp; s++)
                    sum += x[n * c * sp + ch * cs + s * ss];
            double cnt = (double)(cg * sp), mean = sum / cnt;
            for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ch++)
                for (int64_t s = 0; s < sp; s++) {
                    double dv = x[n * c * sp + ch * cs + s * ss] - mean;
                    sq += dv * dv;
                }
            double inv = 1.0 / sqrt(sq / cnt + eps);
            for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ch++)
                for (int64_t s = 0; s < sp; s++) {
                    int64_t o = n * c * sp + ch * cs + s * ss;
                    float v = (float)((x[o] - mean) * inv * scale[ch] + bias[ch]);
                    y[o] = cp_act_ref(&a, v);
                }
        }
    return CP_OK;
}

static enum cp_status gn_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, gn_plain);
}

CP_REF_KERNEL(cp_ref_group_norm, CP_OP_GROUP_NORMALIZATION, gn_supports, cp_ref_layout_prepare,
              gn_run);

/* ---- Gelu ------------------------------------------------------------------ */

static bool gelu_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const char *ap = cp_node_attr_string(n, "approximate", "none");
    return cp_ref_in(g, n, 0)->dtype == CP_DTYPE_F32 &&
           cp_ref_out(g, n, 0)->dtype == CP_DTYPE_F32 &&
           (strcmp(ap, "none") == 0 || strcmp(ap, "tanh") == 0);
}

static enum cp_status gelu_run(struct cp_kexec *k)
{
    bool tanh_form = strcmp(cp_node_attr_string(k->node, "approximate", "none"), "tanh") == 0;
    struct cp_act a = {tanh_form ? CP_ACT_GELU_TANH : CP_ACT_GELU, 0.0f, 0.0f};
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int64_t n = cp_ref_numel(&k->out[0]->shape);
    for (int64_t i = 0; i < n; i++)
        y[i] = cp_act_ref(&a, x[i]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_gelu, CP_OP_GELU, gelu_supports, NULL, gelu_run);
