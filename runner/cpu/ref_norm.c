/* Reference kernels for BatchNormalization (inference form),
 * InstanceNormalization and LayerNormalization.
 *
 * Statistics are computed in double with two passes (mean, then the mean of
 * squared deviations), so they do not suffer from cancellation; the
 * normalized values are written in f32. */
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <math.h>

static bool all_f32(const struct cp_graph *g, const struct cp_node *n)
{
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (t && t->dtype != CP_DTYPE_F32)
            return false;
    }
    for (size_t i = 0; i < n->n_outputs; i++) {
        const struct cp_tensor *t = cp_ref_out(g, n, i);
        if (t && t->dtype != CP_DTYPE_F32)
            return false;
    }
    return true;
}

/* A 1-D parameter of `c` elements. */
static bool is_channel_param(const struct cp_tensor *t, int64_t c)
{
    return t && cp_ref_numel(&t->shape) == c && t->shape.rank <= 1;
}

/* Mean and variance of n floats, in double. */
static void moments(const float *x, int64_t n, double *mean, double *var)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    double m = n > 0 ? s / (double)n : 0.0, v = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = x[i] - m;
        v += d * d;
    }
    *mean = m;
    *var = n > 0 ? v / (double)n : 0.0;
}

/* ---- BatchNormalization ---------------------------------------------------------------- */

static int64_t channels(const struct cp_shape *s)
{
    return s->rank >= 2 ? s->dims[1].value : 1;
}

static bool batch_norm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 5 || !all_f32(g, n))
        return false;
    /* Inference form only: training mode (running statistics as outputs)
     * is refused here, so the plan names the node. */
    if (cp_node_attr_int(n, "training_mode", 0) != 0)
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0)
            return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    if (x->shape.rank < 1)
        return false;
    int64_t c = channels(&x->shape);
    for (size_t i = 1; i < 5; i++)
        if (!is_channel_param(cp_ref_in(g, n, i), c))
            return false;
    return true;
}

static enum cp_status batch_norm_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    float eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    int64_t batch = xs->dims[0].value, c_n = channels(xs);
    int64_t plane = xs->rank >= 2 ? cp_ref_span(xs, 2, xs->rank) : 1;
    const float *x = k->in_data[0], *scale = k->in_data[1], *bias = k->in_data[2];
    const float *mean = k->in_data[3], *var = k->in_data[4];
    float *y = k->out_data[0];
    for (int64_t c = 0; c < c_n; c++) {
        float a = (float)((double)scale[c] / sqrt((double)var[c] + (double)eps));
        float m = mean[c], b = bias[c];
        for (int64_t n = 0; n < batch; n++) {
            const float *xp = x + (n * c_n + c) * plane;
            float *yp = y + (n * c_n + c) * plane;
            for (int64_t i = 0; i < plane; i++)
                yp[i] = (xp[i] - m) * a + b;
        }
    }
    return CP_OK;
}

/* A norm in a layout region runs on plain copies (layout.h). */
static enum cp_status batch_norm_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, batch_norm_run);
}

CP_REF_KERNEL(cp_ref_batch_norm, CP_OP_BATCH_NORMALIZATION, batch_norm_supports,
              cp_ref_layout_prepare, batch_norm_run_any_layout);

/* ---- InstanceNormalization ------------------------------------------------------------- */

static bool instance_norm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 3 || n->n_outputs != 1 || !all_f32(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    if (x->shape.rank < 3)
        return false;
    int64_t c = x->shape.dims[1].value;
    return is_channel_param(cp_ref_in(g, n, 1), c) && is_channel_param(cp_ref_in(g, n, 2), c);
}

static enum cp_status instance_norm_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    double eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    int64_t batch = xs->dims[0].value, c_n = xs->dims[1].value;
    int64_t plane = cp_ref_span(xs, 2, xs->rank);
    const float *x = k->in_data[0], *scale = k->in_data[1], *bias = k->in_data[2];
    float *y = k->out_data[0];
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t c = 0; c < c_n; c++) {
            const float *xp = x + (n * c_n + c) * plane;
            float *yp = y + (n * c_n + c) * plane;
            double mean, var;
            moments(xp, plane, &mean, &var);
            double a = scale[c] / sqrt(var + eps);
            for (int64_t i = 0; i < plane; i++)
                yp[i] = (float)((xp[i] - mean) * a + bias[c]);
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_instance_norm, CP_OP_INSTANCE_NORMALIZATION, instance_norm_supports, NULL,
              instance_norm_run);

/* ---- LayerNormalization ---------------------------------------------------------------- */

/* The normalized part of x: dims from axis on. */
static bool layer_norm_axis(const struct cp_node *n, const struct cp_shape *xs, int *axis)
{
    return xs->rank >= 1 && cp_eval_axis(cp_node_attr_int(n, "axis", -1), xs->rank, axis);
}

/* p broadcasts unidirectionally to dims [axis, rank) of x. */
static bool broadcasts_to_tail(const struct cp_tensor *p, const struct cp_shape *xs, int axis)
{
    int tail = xs->rank - axis;
    if (p->shape.rank > tail)
        return false;
    for (int k = 0; k < p->shape.rank; k++) {
        int64_t pd = p->shape.dims[k].value;
        int64_t xd = xs->dims[xs->rank - p->shape.rank + k].value;
        if (pd != 1 && pd != xd)
            return false;
    }
    return true;
}

static bool layer_norm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || !all_f32(g, n) || n->n_inputs < 2)
        return false;
    if (cp_node_attr_int(n, "stash_type", 1) != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1),
                           *b = cp_ref_in(g, n, 2);
    int axis;
    if (!x || !s || !layer_norm_axis(n, &x->shape, &axis))
        return false;
    int64_t rows = cp_ref_span(&x->shape, 0, axis);
    for (size_t i = 1; i < n->n_outputs; i++) {
        const struct cp_tensor *o = cp_ref_out(g, n, i);
        if (o && cp_ref_numel(&o->shape) != rows)
            return false;
    }
    return broadcasts_to_tail(s, &x->shape, axis) && (!b || broadcasts_to_tail(b, &x->shape, axis));
}

static enum cp_status layer_norm_run(struct cp_kexec *k)
{
    const struct cp_tensor *tx = k->in[0], *ts = k->in[1];
    const struct cp_tensor *tb = k->node->n_inputs > 2 ? k->in[2] : NULL;
    int axis;
    if (!layer_norm_axis(k->node, &tx->shape, &axis))
        return CP_ERR_INTERNAL;
    double eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    int64_t rows = cp_ref_span(&tx->shape, 0, axis);
    int64_t dn = cp_ref_span(&tx->shape, axis, tx->shape.rank);
    /* Scale and bias offsets over the normalized dims. */
    struct cp_shape tail;
    tail.rank = tx->shape.rank - axis;
    for (int d = 0; d < tail.rank; d++)
        tail.dims[d] = tx->shape.dims[axis + d];
    struct cp_walk w;
    cp_walk_init(&w, &tail, 3);
    cp_walk_bcast(&w, 0, &tail);
    cp_walk_bcast(&w, 1, &ts->shape);
    if (tb)
        cp_walk_bcast(&w, 2, &tb->shape);
    cp_walk_finish(&w);
    const float *x = k->in_data[0], *scale = k->in_data[1];
    const float *bias = tb ? k->in_data[2] : NULL;
    float *y = k->out_data[0];
    float *mean_out = k->node->n_outputs > 1 && k->out[1] ? k->out_data[1] : NULL;
    float *inv_out = k->node->n_outputs > 2 && k->out[2] ? k->out_data[2] : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dn;
        float *yr = y + r * dn;
        double mean, var;
        moments(xr, dn, &mean, &var);
        double inv = 1.0 / sqrt(var + eps);
        if (mean_out)
            mean_out[r] = (float)mean;
        if (inv_out)
            inv_out[r] = (float)inv;
        struct cp_walk_pos p;
        cp_walk_start(&w, &p);
        for (int64_t row = 0; row < w.rows; row++) {
            for (int64_t j = 0; j < w.inner; j++) {
                int64_t i = p.off[0] + j;
                double v = (xr[i] - mean) * inv * scale[p.off[1] + j * w.inner_stride[1]];
                if (bias)
                    v += bias[p.off[2] + j * w.inner_stride[2]];
                yr[i] = (float)v;
            }
            cp_walk_next(&w, &p);
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_layer_norm, CP_OP_LAYER_NORMALIZATION, layer_norm_supports, NULL,
              layer_norm_run);
