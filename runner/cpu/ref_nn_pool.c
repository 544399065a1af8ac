/* Reference kernels of the [nn] family's pooling: GlobalMaxPool,
 * GlobalLpPool, LpPool, MaxUnpool and MaxRoiPool (ref_nn_ops.h). */
#include "runner/cpu/ref_nn_ops.h"

/* ---- GlobalMaxPool, GlobalLpPool ----------------------------------------------------------- */

static bool global_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (n->op == CP_OP_GLOBAL_LP_POOL && cp_node_attr_int(n, "p", 2) < 1)
        return false;
    return x->shape.rank >= 2 && cp_ref_numel(&y->shape) == cp_ref_span(&x->shape, 0, 2);
}

static enum cp_status global_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t planes = cp_ref_span(xs, 0, 2), plane = cp_ref_span(xs, 2, xs->rank);
    bool is_max = k->node->op == CP_OP_GLOBAL_MAX_POOL;
    double p = (double)cp_node_attr_int(k->node, "p", 2);
    for (int64_t q = 0; q < planes; q++) {
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t i = 0; i < plane; i++) {
            double v = LD(0, q * plane + i);
            if (is_max)
                acc = v > acc || isnan(v) ? v : acc;
            else
                acc += pow(fabs(v), p);
        }
        ST(q, is_max ? (plane > 0 ? acc : NAN) : pow(acc, 1.0 / p));
    }
    return CP_OK;
}

static enum cp_status global_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, global_run_plain);
}

CP_REF_KERNEL(cp_ref_global_max_pool, CP_OP_GLOBAL_MAX_POOL, global_supports, cp_ref_layout_prepare,
              global_run);
CP_REF_KERNEL(cp_ref_global_lp_pool, CP_OP_GLOBAL_LP_POOL, global_supports, cp_ref_layout_prepare,
              global_run);

/* ---- LpPool ---------------------------------------------------------------------------------- */

static bool lp_pool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int r = x->shape.rank;
    const struct cp_attr *ks = cp_node_attr(n, "kernel_shape");
    if (r < 3 || r > 2 + CP_REF_MAX_SPATIAL || y->shape.rank != r || !ks ||
        ks->n != (size_t)(r - 2) || !cp_ref_window_attrs_ok(n, r - 2))
        return false;
    return cp_node_attr_int(n, "p", 2) >= 1 && x->shape.dims[0].value == y->shape.dims[0].value &&
           x->shape.dims[1].value == y->shape.dims[1].value;
}

static enum cp_status lp_pool_run_plain(struct cp_kexec *k)
{
    struct cp_ref_window win;
    cp_ref_window_forward(k->node, &k->in[0]->shape, NULL, &k->out[0]->shape, &win);
    double p = (double)cp_node_attr_int(k->node, "p", 2);
    int64_t planes = k->in[0]->shape.dims[0].value * k->in[0]->shape.dims[1].value;
    int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
    int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
    for (int64_t q = 0; q < planes; q++)
        for (int64_t o = 0; o < out_plane; o++) {
            int64_t oc[3] = {o / (win.out[1] * win.out[2]), o / win.out[2] % win.out[1],
                             o % win.out[2]};
            double acc = 0.0;
            for (int64_t kd = 0; kd < win.kernel[0]; kd++)
                for (int64_t kh = 0; kh < win.kernel[1]; kh++)
                    for (int64_t kw = 0; kw < win.kernel[2]; kw++) {
                        int64_t kc[3] = {kd, kh, kw}, ic[3];
                        bool inside = true;
                        for (int a = 0; a < 3; a++) {
                            ic[a] =
                                oc[a] * win.stride[a] + kc[a] * win.dilation[a] - win.pad_begin[a];
                            inside = inside && ic[a] >= 0 && ic[a] < win.in[a];
                        }
                        if (inside)
                            acc += pow(
                                fabs(LD(0, q * in_plane + (ic[0] * win.in[1] + ic[1]) * win.in[2] +
                                               ic[2])),
                                p);
                    }
            ST(q * out_plane + o, pow(acc, 1.0 / p));
        }
    return CP_OK;
}

static enum cp_status lp_pool_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, lp_pool_run_plain);
}

CP_REF_KERNEL(cp_ref_lp_pool, CP_OP_LP_POOL, lp_pool_supports, cp_ref_layout_prepare, lp_pool_run);

/* ---- MaxUnpool --------------------------------------------------------------------------------
 */

static bool max_unpool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    return x && ix && ix->dtype == CP_DTYPE_I64 && y->dtype == x->dtype &&
           cp_ref_numel(&ix->shape) == cp_ref_numel(&x->shape) && y->shape.rank == x->shape.rank;
}

/* Every input element goes to the output position its index names; the
 * rest is zero. Indices are flat positions in the default unpooled shape
 * ((in - 1) * stride + kernel - pads, as MaxPool produced them); with an
 * explicit output_shape the position keeps its coordinates in the larger
 * output. An index outside the output fails the run. */
static enum cp_status max_unpool_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    size_t es = cp_dtype_size(k->in[0]->dtype);
    int r = xs->rank, ns = r - 2;
    int64_t n_in = cp_ref_numel(xs), n_out = cp_ref_numel(ys);
    const int64_t *idx = k->in_data[1];
    const struct cp_attr *ks = cp_node_attr(k->node, "kernel_shape");
    const struct cp_attr *sa = cp_node_attr(k->node, "strides");
    const struct cp_attr *pa = cp_node_attr(k->node, "pads");
    int64_t def[CP_MAX_RANK];
    bool same = true;
    def[0] = xs->dims[0].value;
    def[1] = xs->dims[1].value;
    for (int d = 0; d < ns; d++) {
        int64_t kk = ks && (size_t)d < ks->n ? ks->ints[d] : 1;
        int64_t st = sa && (size_t)d < sa->n ? sa->ints[d] : 1;
        int64_t pb = pa && (size_t)(d + ns) < pa->n ? pa->ints[d] + pa->ints[d + ns] : 0;
        def[d + 2] = (xs->dims[d + 2].value - 1) * st + kk - pb;
    }
    for (int d = 0; d < r; d++)
        same = same && def[d] == ys->dims[d].value;
    memset(k->out_data[0], 0, (size_t)n_out * es);
    for (int64_t i = 0; i < n_in; i++) {
        int64_t at = idx[i];
        if (!same) {
            int64_t rest = at, pos = 0, stride = 1;
            for (int d = r - 1; d >= 0; d--) {
                int64_t c = def[d] > 0 ? rest % def[d] : 0;
                rest = def[d] > 0 ? rest / def[d] : 0;
                if (c >= ys->dims[d].value)
                    return CP_ERR_INVALID;
                pos += c * stride;
                stride *= ys->dims[d].value;
            }
            at = rest == 0 && idx[i] >= 0 ? pos : -1;
        }
        if (at < 0 || at >= n_out)
            return CP_ERR_INVALID;
        memcpy((char *)k->out_data[0] + (size_t)at * es,
               (const char *)k->in_data[0] + (size_t)i * es, es);
    }
    return CP_OK;
}

static enum cp_status max_unpool_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, max_unpool_run_plain);
}

CP_REF_KERNEL(cp_ref_max_unpool, CP_OP_MAX_UNPOOL, max_unpool_supports, cp_ref_layout_prepare,
              max_unpool_run);

/* ---- MaxRoiPool
 * ---------------------------------------------------------------------------------- */

static bool max_roi_pool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *rois = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    const struct cp_attr *ps = cp_node_attr(n, "pooled_shape");
    return rois && cp_dtype_is_float(rois->dtype) && ps && ps->type == CP_ATTR_INTS && ps->n == 2 &&
           x->shape.rank == 4 && rois->shape.rank == 2 && rois->shape.dims[1].value == 5 &&
           y->shape.rank == 4 && y->shape.dims[0].value == rois->shape.dims[0].value &&
           y->shape.dims[1].value == x->shape.dims[1].value &&
           y->shape.dims[2].value == ps->ints[0] && y->shape.dims[3].value == ps->ints[1];
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Caffe's ROI pooling, as ONNX Runtime: the ROI is rounded to pixels, each
 * bin maxes the pixels it covers, an empty bin is 0. */
static enum cp_status max_roi_pool_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t nb = xs->dims[0].value, ch = xs->dims[1].value, h = xs->dims[2].value,
            w = xs->dims[3].value;
    int64_t nr = k->in[1]->shape.dims[0].value;
    int64_t ph_n = k->out[0]->shape.dims[2].value, pw_n = k->out[0]->shape.dims[3].value;
    double scale = cp_node_attr_float(k->node, "spatial_scale", 1.0f);
    enum cp_dtype rdt = k->in[1]->dtype;
    for (int64_t r = 0; r < nr; r++) {
        double rv[5];
        for (int i = 0; i < 5; i++)
            rv[i] = cp_elem_load_f64(k->in_data[1], rdt, r * 5 + i);
        int64_t b = (int64_t)rv[0];
        if (!(rv[0] >= 0) || b >= nb)
            return CP_ERR_INVALID;
        int64_t x0 = (int64_t)round(rv[1] * scale), y0 = (int64_t)round(rv[2] * scale);
        int64_t x1 = (int64_t)round(rv[3] * scale), y1 = (int64_t)round(rv[4] * scale);
        int64_t rh = y1 - y0 + 1 > 1 ? y1 - y0 + 1 : 1, rw = x1 - x0 + 1 > 1 ? x1 - x0 + 1 : 1;
        double bh = (double)rh / (double)ph_n, bw = (double)rw / (double)pw_n;
        for (int64_t c = 0; c < ch; c++)
            for (int64_t ph = 0; ph < ph_n; ph++)
                for (int64_t pw = 0; pw < pw_n; pw++) {
                    int64_t hs = clamp64((int64_t)floor(ph * bh) + y0, 0, h);
                    int64_t he = clamp64((int64_t)ceil((ph + 1) * bh) + y0, 0, h);
                    int64_t wsx = clamp64((int64_t)floor(pw * bw) + x0, 0, w);
                    int64_t we = clamp64((int64_t)ceil((pw + 1) * bw) + x0, 0, w);
                    double m = he <= hs || we <= wsx ? 0.0 : -INFINITY;
                    for (int64_t yy = hs; yy < he; yy++)
                        for (int64_t xx = wsx; xx < we; xx++) {
                            double v = LD(0, ((b * ch + c) * h + yy) * w + xx);
                            m = v > m ? v : m;
                        }
                    ST(((r * ch + c) * ph_n + ph) * pw_n + pw, m);
                }
    }
    return CP_OK;
}

static enum cp_status max_roi_pool_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, max_roi_pool_run_plain);
}

CP_REF_KERNEL(cp_ref_max_roi_pool, CP_OP_MAX_ROI_POOL, max_roi_pool_supports, cp_ref_layout_prepare,
              max_roi_pool_run);
