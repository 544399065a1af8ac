/* Reference kernels of the [nn] family: LRN, LpNormalization,
 * MeanVarianceNormalization, GlobalMaxPool, LpPool, GlobalLpPool,
 * MaxUnpool, DepthToSpace, SpaceToDepth, GridSample, RoiAlign and
 * NonMaxSuppression.
 *
 * Floating-point kernels load and store through cp_elem_load_f64 /
 * cp_eval_store_f64, so every float dtype (f32, f16, bf16, f64) runs the
 * same loops with double arithmetic. The data-movement kernels
 * (DepthToSpace, SpaceToDepth, MaxUnpool) move elements of any dtype.
 * Where ONNX leaves details to the runtime (RoiAlign's sample points,
 * GridSample's out-of-range taps, NonMaxSuppression's ties), the kernels
 * do what ONNX Runtime does. */
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <math.h>
#include <string.h>

static bool float_dt(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_F16 || dt == CP_DTYPE_BF16 || dt == CP_DTYPE_F64;
}

/* Static node, input 0 and output 0 of the same float dtype. */
static bool float_io(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && y && float_dt(x->dtype) && y->dtype == x->dtype;
}

static bool same_shape(const struct cp_tensor *a, const struct cp_tensor *b)
{
    return cp_shape_equal(&a->shape, &b->shape);
}

#define LD(i, idx) cp_elem_load_f64(k->in_data[i], k->in[i]->dtype, (idx))
#define ST(idx, v) cp_eval_store_f64(k->out_data[0], k->out[0]->dtype, (idx), (v))

static enum cp_status plain_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return cp_ref_layout_prepare(k, d);
}

/* ---- LRN ---------------------------------------------------------------------------- */

static bool lrn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return float_io(g, n) && cp_ref_in(g, n, 0)->shape.rank >= 2 &&
           same_shape(cp_ref_in(g, n, 0), cp_ref_out(g, n, 0)) &&
           cp_node_attr_int(n, "size", 0) >= 1;
}

static enum cp_status lrn_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t size = cp_node_attr_int(k->node, "size", 1);
    double alpha = cp_node_attr_float(k->node, "alpha", 1e-4f);
    double beta = cp_node_attr_float(k->node, "beta", 0.75f);
    double bias = cp_node_attr_float(k->node, "bias", 1.0f);
    int64_t batch = xs->dims[0].value, ch = xs->dims[1].value;
    int64_t plane = cp_ref_span(xs, 2, xs->rank);
    int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t c = 0; c < ch; c++) {
            int64_t c0 = c - lo_off < 0 ? 0 : c - lo_off;
            int64_t c1 = c + hi_off > ch - 1 ? ch - 1 : c + hi_off;
            for (int64_t p = 0; p < plane; p++) {
                double sum = 0.0;
                for (int64_t j = c0; j <= c1; j++) {
                    double v = LD(0, (b * ch + j) * plane + p);
                    sum += v * v;
                }
                int64_t i = (b * ch + c) * plane + p;
                ST(i, LD(0, i) / pow(bias + alpha / (double)size * sum, beta));
            }
        }
    return CP_OK;
}

static enum cp_status lrn_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, lrn_run_plain);
}

CP_REF_KERNEL(cp_ref_lrn, CP_OP_LRN, lrn_supports, plain_prepare, lrn_run);

/* ---- LpNormalization ---------------------------------------------------------------------- */

static int norm_axis(const struct cp_node *n, int rank)
{
    int64_t a = cp_node_attr_int(n, "axis", -1);
    return (int)(a < 0 ? a + rank : a);
}

static bool lp_norm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n) || !same_shape(cp_ref_in(g, n, 0), cp_ref_out(g, n, 0)))
        return false;
    int r = cp_ref_in(g, n, 0)->shape.rank, ax = norm_axis(n, r);
    int64_t p = cp_node_attr_int(n, "p", 2);
    return r >= 1 && ax >= 0 && ax < r && (p == 1 || p == 2);
}

static enum cp_status lp_norm_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int ax = norm_axis(k->node, xs->rank);
    bool p1 = cp_node_attr_int(k->node, "p", 2) == 1;
    int64_t outer = cp_ref_span(xs, 0, ax), len = xs->dims[ax].value;
    int64_t inner = cp_ref_span(xs, ax + 1, xs->rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double s = 0.0;
            for (int64_t j = 0; j < len; j++) {
                double v = LD(0, base + j * inner);
                s += p1 ? fabs(v) : v * v;
            }
            double norm = p1 ? s : sqrt(s);
            for (int64_t j = 0; j < len; j++)
                ST(base + j * inner, norm != 0.0 ? LD(0, base + j * inner) / norm : 0.0);
        }
    return CP_OK;
}

static enum cp_status lp_norm_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, lp_norm_run_plain);
}

CP_REF_KERNEL(cp_ref_lp_normalization, CP_OP_LP_NORMALIZATION, lp_norm_supports, plain_prepare,
              lp_norm_run);

/* ---- MeanVarianceNormalization --------------------------------------------------------------- */

/* The reduced axes as a mask; false when an axis is out of range. */
static bool mvn_mask(const struct cp_node *n, int rank, bool *mask)
{
    for (int i = 0; i < rank; i++)
        mask[i] = false;
    const struct cp_attr *a = cp_node_attr(n, "axes");
    static const int64_t dflt[] = {0, 2, 3};
    const int64_t *ax = a ? a->ints : dflt;
    size_t na = a ? a->n : 3;
    for (size_t i = 0; i < na; i++) {
        int64_t v = ax[i] < 0 ? ax[i] + rank : ax[i];
        if (v < 0 || v >= rank)
            return false;
        mask[v] = true;
    }
    return true;
}

static bool mvn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n) || !same_shape(cp_ref_in(g, n, 0), cp_ref_out(g, n, 0)))
        return false;
    bool mask[CP_MAX_RANK];
    const struct cp_attr *a = cp_node_attr(n, "axes");
    if (a && a->type != CP_ATTR_INTS)
        return false;
    return mvn_mask(n, cp_ref_in(g, n, 0)->shape.rank, mask);
}

/* Flat index of element r of group gi: the kept dims' coordinates come from
 * gi, the reduced dims' from r (both row-major over their dims). */
static int64_t mvn_index(const struct cp_shape *s, const bool *mask, int64_t gi, int64_t r)
{
    int64_t idx = 0, stride = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int64_t n = s->dims[d].value, c;
        if (mask[d]) {
            c = r % n;
            r /= n;
        } else {
            c = gi % n;
            gi /= n;
        }
        idx += c * stride;
        stride *= n;
    }
    return idx;
}

static enum cp_status mvn_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    bool mask[CP_MAX_RANK];
    mvn_mask(k->node, xs->rank, mask);
    int64_t red = 1, groups = 1;
    for (int d = 0; d < xs->rank; d++)
        *(mask[d] ? &red : &groups) *= xs->dims[d].value;
    if (red == 0)
        return CP_OK;
    for (int64_t gi = 0; gi < groups; gi++) {
        double s = 0.0;
        for (int64_t r = 0; r < red; r++)
            s += LD(0, mvn_index(xs, mask, gi, r));
        double mean = s / (double)red, v = 0.0;
        for (int64_t r = 0; r < red; r++) {
            double dv = LD(0, mvn_index(xs, mask, gi, r)) - mean;
            v += dv * dv;
        }
        double sd = sqrt(v / (double)red) + 1e-9;
        for (int64_t r = 0; r < red; r++) {
            int64_t i = mvn_index(xs, mask, gi, r);
            ST(i, (LD(0, i) - mean) / sd);
        }
    }
    return CP_OK;
}

static enum cp_status mvn_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, mvn_run_plain);
}

CP_REF_KERNEL(cp_ref_mvn, CP_OP_MEAN_VARIANCE_NORMALIZATION, mvn_supports, plain_prepare, mvn_run);

/* ---- GlobalMaxPool, GlobalLpPool ----------------------------------------------------------- */

static bool global_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n))
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

CP_REF_KERNEL(cp_ref_global_max_pool, CP_OP_GLOBAL_MAX_POOL, global_supports, plain_prepare,
              global_run);
CP_REF_KERNEL(cp_ref_global_lp_pool, CP_OP_GLOBAL_LP_POOL, global_supports, plain_prepare,
              global_run);

/* ---- LpPool ---------------------------------------------------------------------------------- */

static bool lp_pool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
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

CP_REF_KERNEL(cp_ref_lp_pool, CP_OP_LP_POOL, lp_pool_supports, plain_prepare, lp_pool_run);

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

CP_REF_KERNEL(cp_ref_max_unpool, CP_OP_MAX_UNPOOL, max_unpool_supports, plain_prepare,
              max_unpool_run);

/* ---- DepthToSpace, SpaceToDepth -----------------------------------------------------------------
 */

static bool d2s_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int64_t b = cp_node_attr_int(n, "blocksize", 0);
    if (!x || x->shape.rank != 4 || y->shape.rank != 4 || x->dtype != y->dtype || b < 1)
        return false;
    int64_t c = x->shape.dims[1].value, h = x->shape.dims[2].value, w = x->shape.dims[3].value;
    if (n->op == CP_OP_DEPTH_TO_SPACE) {
        const char *mode = cp_node_attr_string(n, "mode", "DCR");
        if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
            return false;
        return c % (b * b) == 0 && y->shape.dims[1].value == c / (b * b) &&
               y->shape.dims[2].value == h * b && y->shape.dims[3].value == w * b;
    }
    return h % b == 0 && w % b == 0 && y->shape.dims[1].value == c * b * b &&
           y->shape.dims[2].value == h / b && y->shape.dims[3].value == w / b;
}

/* Walk the space-side tensor (N, C', H*b, W*b); `depth` is (N, C'*b*b, H, W).
 * DCR takes depth channel (i*b + j) * C' + c, CRD c * b*b + i*b + j. */
static enum cp_status d2s_run_plain(struct cp_kexec *k)
{
    bool to_space = k->node->op == CP_OP_DEPTH_TO_SPACE;
    bool crd = to_space && strcmp(cp_node_attr_string(k->node, "mode", "DCR"), "CRD") == 0;
    const struct cp_shape *ss = to_space ? &k->out[0]->shape : &k->in[0]->shape;
    int64_t b = cp_node_attr_int(k->node, "blocksize", 1);
    int64_t nb = ss->dims[0].value, cs = ss->dims[1].value;
    int64_t hs = ss->dims[2].value, ws = ss->dims[3].value, h = hs / b, w = ws / b;
    size_t es = cp_dtype_size(k->in[0]->dtype);
    char *dst = k->out_data[0];
    const char *src = k->in_data[0];
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c = 0; c < cs; c++)
            for (int64_t y = 0; y < hs; y++)
                for (int64_t x = 0; x < ws; x++) {
                    int64_t i = y % b, j = x % b;
                    int64_t cd = crd ? c * b * b + i * b + j : (i * b + j) * cs + c;
                    int64_t si = ((n * cs + c) * hs + y) * ws + x;
                    int64_t di = ((n * cs * b * b + cd) * h + y / b) * w + x / b;
                    if (to_space)
                        memcpy(dst + (size_t)si * es, src + (size_t)di * es, es);
                    else
                        memcpy(dst + (size_t)di * es, src + (size_t)si * es, es);
                }
    return CP_OK;
}

static enum cp_status d2s_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, d2s_run_plain);
}

CP_REF_KERNEL(cp_ref_depth_to_space, CP_OP_DEPTH_TO_SPACE, d2s_supports, plain_prepare, d2s_run);
CP_REF_KERNEL(cp_ref_space_to_depth, CP_OP_SPACE_TO_DEPTH, d2s_supports, plain_prepare, d2s_run);

/* ---- GridSample
 * ----------------------------------------------------------------------------------- */

enum gs_mode { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static bool gs_params(const struct cp_graph *g, const struct cp_node *n, enum gs_mode *mode,
                      enum gs_pad *pad)
{
    bool v20 = cp_ref_opset(g) >= 20;
    const char *m = cp_node_attr_string(n, "mode", v20 ? "linear" : "bilinear");
    const char *p = cp_node_attr_string(n, "padding_mode", "zeros");
    if (strcmp(m, "nearest") == 0)
        *mode = GS_NEAREST;
    else if (strcmp(m, v20 ? "linear" : "bilinear") == 0)
        *mode = GS_LINEAR;
    else if (strcmp(m, v20 ? "cubic" : "bicubic") == 0)
        *mode = GS_CUBIC;
    else
        return false;
    if (strcmp(p, "zeros") == 0)
        *pad = GS_ZEROS;
    else if (strcmp(p, "border") == 0)
        *pad = GS_BORDER;
    else if (strcmp(p, "reflection") == 0)
        *pad = GS_REFLECTION;
    else
        return false;
    return true;
}

#define GS_MAX_SPATIAL 3

static bool gs_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *gr = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    enum gs_mode mode;
    enum gs_pad pad;
    int r = x->shape.rank, ns = r - 2;
    if (!gr || !float_dt(gr->dtype) || !gs_params(g, n, &mode, &pad) || ns < 1 ||
        ns > GS_MAX_SPATIAL || gr->shape.rank != r || y->shape.rank != r)
        return false;
    if (mode == GS_CUBIC && ns != 2) /* bicubic is defined on 2-D images */
        return false;
    if (gr->shape.dims[0].value != x->shape.dims[0].value || gr->shape.dims[r - 1].value != ns ||
        y->shape.dims[0].value != x->shape.dims[0].value ||
        y->shape.dims[1].value != x->shape.dims[1].value)
        return false;
    for (int d = 2; d < r; d++)
        if (y->shape.dims[d].value != gr->shape.dims[d - 1].value)
            return false;
    return true;
}

static double gs_reflect(double x, double lo, double hi)
{
    double range = hi - lo;
    if (range <= 0.0)
        return lo;
    if (x < lo) {
        double dx = lo - x;
        double nf = floor(dx / range), r = dx - nf * range;
        return fmod(nf, 2.0) == 0.0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        double nf = floor(dx / range), r = dx - nf * range;
        return fmod(nf, 2.0) == 0.0 ? hi - r : lo + r;
    }
    return x;
}

struct gs_ctx {
    const struct cp_kexec *k;
    int ns;
    int64_t in[GS_MAX_SPATIAL]; /* spatial input sizes, outermost first */
    enum gs_pad pad;
    bool align;
    int64_t base; /* flat offset of the (n, c) plane */
};

/* The pixel at integer coordinates c[] (outermost first), padding applied. */
static double gs_pixel(const struct gs_ctx *g, const int64_t *c)
{
    int64_t idx = 0;
    for (int d = 0; d < g->ns; d++) {
        int64_t v = c[d], n = g->in[d];
        if (g->pad == GS_ZEROS) {
            if (v < 0 || v >= n)
                return 0.0;
        } else if (g->pad == GS_BORDER) {
            v = v < 0 ? 0 : v >= n ? n - 1 : v;
        } else {
            double lo = g->align ? 0.0 : -0.5, hi = g->align ? (double)n - 1 : (double)n - 0.5;
            v = (int64_t)gs_reflect((double)v, lo, hi);
            v = v < 0 ? 0 : v >= n ? n - 1 : v;
        }
        idx = idx * n + v;
    }
    return cp_elem_load_f64(g->k->in_data[0], g->k->in[0]->dtype, g->base + idx);
}

static void cubic_coeffs(double t, double *w)
{
    const double a = -0.75;
    double x = t + 1.0;
    w[0] = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    w[1] = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
    x = 1.0 - t;
    w[2] = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    w[3] = 1.0 - w[0] - w[1] - w[2];
}

static enum cp_status gs_run_plain(struct cp_kexec *k)
{
    enum gs_mode mode;
    enum gs_pad pad;
    gs_params(k->g, k->node, &mode, &pad);
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    struct gs_ctx g = {.k = k, .ns = xs->rank - 2, .pad = pad};
    g.align = cp_node_attr_int(k->node, "align_corners", 0) != 0;
    for (int d = 0; d < g.ns; d++)
        g.in[d] = xs->dims[d + 2].value;
    int64_t nb = xs->dims[0].value, ch = xs->dims[1].value;
    int64_t in_plane = cp_ref_span(xs, 2, xs->rank), out_plane = cp_ref_span(ys, 2, ys->rank);
    enum cp_dtype gdt = k->in[1]->dtype;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t o = 0; o < out_plane; o++) {
            /* Grid entry k is the coordinate of spatial dim ns-1-k (x first). */
            double pos[GS_MAX_SPATIAL];
            for (int d = 0; d < g.ns; d++) {
                double gv = cp_elem_load_f64(k->in_data[1], gdt,
                                             (n * out_plane + o) * g.ns + (g.ns - 1 - d));
                double size = (double)g.in[d];
                double p =
                    g.align ? (gv + 1.0) / 2.0 * (size - 1.0) : ((gv + 1.0) * size - 1.0) / 2.0;
                double lo = g.align ? 0.0 : -0.5, hi = g.align ? size - 1.0 : size - 0.5;
                if (mode == GS_NEAREST)
                    p = nearbyint(p);
                if (p < lo || p > hi) {
                    if (pad == GS_BORDER)
                        p = p < 0.0 ? 0.0 : p > size - 1.0 ? size - 1.0 : p;
                    else if (pad == GS_REFLECTION)
                        p = gs_reflect(p, lo, hi);
                }
                pos[d] = p;
            }
            for (int64_t c = 0; c < ch; c++) {
                g.base = (n * ch + c) * in_plane;
                double v = 0.0;
                if (mode == GS_NEAREST) {
                    int64_t ic[GS_MAX_SPATIAL];
                    for (int d = 0; d < g.ns; d++)
                        ic[d] = (int64_t)nearbyint(pos[d]);
                    v = gs_pixel(&g, ic);
                } else if (mode == GS_LINEAR) {
                    for (int corner = 0; corner < (1 << g.ns); corner++) {
                        int64_t ic[GS_MAX_SPATIAL];
                        double w = 1.0;
                        for (int d = 0; d < g.ns; d++) {
                            double f = floor(pos[d]), t = pos[d] - f;
                            bool hi = (corner >> d) & 1;
                            ic[d] = (int64_t)f + hi;
                            w *= hi ? t : 1.0 - t;
                        }
                        if (w != 0.0)
                            v += w * gs_pixel(&g, ic);
                    }
                } else {
                    double fy = floor(pos[0]), fx = floor(pos[1]), wy[4], wx[4];
                    cubic_coeffs(pos[0] - fy, wy);
                    cubic_coeffs(pos[1] - fx, wx);
                    for (int i = 0; i < 4; i++)
                        for (int j = 0; j < 4; j++) {
                            int64_t ic[2] = {(int64_t)fy - 1 + i, (int64_t)fx - 1 + j};
                            v += wy[i] * wx[j] * gs_pixel(&g, ic);
                        }
                }
                ST((n * ch + c) * out_plane + o, v);
            }
        }
    return CP_OK;
}

static enum cp_status gs_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, gs_run_plain);
}

CP_REF_KERNEL(cp_ref_grid_sample, CP_OP_GRID_SAMPLE, gs_supports, plain_prepare, gs_run);

/* ---- RoiAlign
 * -------------------------------------------------------------------------------------- */

static bool roi_align_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *rois = cp_ref_in(g, n, 1),
                           *bi = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    const char *mode = cp_node_attr_string(n, "mode", "avg");
    const char *ctm = cp_node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    if (!rois || !bi || !float_dt(rois->dtype) || bi->dtype != CP_DTYPE_I64)
        return false;
    if ((strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0) ||
        (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0))
        return false;
    int64_t r = rois->shape.rank == 2 ? rois->shape.dims[0].value : -1;
    return x->shape.rank == 4 && rois->shape.rank == 2 && rois->shape.dims[1].value == 4 &&
           bi->shape.rank == 1 && bi->shape.dims[0].value == r && y->shape.rank == 4 &&
           y->shape.dims[0].value == r && y->shape.dims[1].value == x->shape.dims[1].value &&
           y->shape.dims[2].value == cp_node_attr_int(n, "output_height", 1) &&
           y->shape.dims[3].value == cp_node_attr_int(n, "output_width", 1) &&
           cp_node_attr_int(n, "sampling_ratio", 0) >= 0;
}

static enum cp_status roi_align_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t nb = xs->dims[0].value, ch = xs->dims[1].value, h = xs->dims[2].value,
            w = xs->dims[3].value;
    int64_t nr = k->in[1]->shape.dims[0].value;
    int64_t ph_n = k->out[0]->shape.dims[2].value, pw_n = k->out[0]->shape.dims[3].value;
    bool is_max = strcmp(cp_node_attr_string(k->node, "mode", "avg"), "max") == 0;
    /* Opset 10 had no coordinate_transformation_mode and behaved as
     * output_half_pixel; 16 made half_pixel the default. */
    const char *ctm =
        cp_node_attr_string(k->node, "coordinate_transformation_mode",
                            cp_ref_opset(k->g) >= 16 ? "half_pixel" : "output_half_pixel");
    bool half = strcmp(ctm, "half_pixel") == 0;
    double scale = cp_node_attr_float(k->node, "spatial_scale", 1.0f);
    int64_t ratio = cp_node_attr_int(k->node, "sampling_ratio", 0);
    const int64_t *bidx = k->in_data[2];
    enum cp_dtype rdt = k->in[1]->dtype;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = bidx[r];
        if (b < 0 || b >= nb)
            return CP_ERR_INVALID;
        double off = half ? 0.5 : 0.0;
        double x0 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 0) * scale - off;
        double y0 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 1) * scale - off;
        double x1 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 2) * scale - off;
        double y1 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 3) * scale - off;
        double rw = x1 - x0, rh = y1 - y0;
        if (!half) {
            rw = rw > 1.0 ? rw : 1.0;
            rh = rh > 1.0 ? rh : 1.0;
        }
        double bh = rh / (double)ph_n, bw = rw / (double)pw_n;
        int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)ph_n);
        int64_t gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)pw_n);
        double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;
        for (int64_t c = 0; c < ch; c++) {
            int64_t base = (b * ch + c) * h * w;
            for (int64_t ph = 0; ph < ph_n; ph++)
                for (int64_t pw = 0; pw < pw_n; pw++) {
                    double acc = 0.0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double y = y0 + ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double x = x0 + pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v = 0.0;
                            if (!(y < -1.0 || y > (double)h || x < -1.0 || x > (double)w)) {
                                double yy = y <= 0.0 ? 0.0 : y, xx = x <= 0.0 ? 0.0 : x;
                                int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                                if (yl >= h - 1) {
                                    yh = yl = h - 1;
                                    yy = (double)yl;
                                } else {
                                    yh = yl + 1;
                                }
                                if (xl >= w - 1) {
                                    xh = xl = w - 1;
                                    xx = (double)xl;
                                } else {
                                    xh = xl + 1;
                                }
                                double ly = yy - yl, lx = xx - xl, hy = 1.0 - ly, hx = 1.0 - lx;
                                double v1 = hy * hx * LD(0, base + yl * w + xl);
                                double v2 = hy * lx * LD(0, base + yl * w + xh);
                                double v3 = ly * hx * LD(0, base + yh * w + xl);
                                double v4 = ly * lx * LD(0, base + yh * w + xh);
                                v = is_max ? fmax(fmax(fmax(v1, v2), v3), v4) : v1 + v2 + v3 + v4;
                            }
                            if (!is_max)
                                acc += v;
                            else if (first || v > acc)
                                acc = v;
                            first = false;
                        }
                    }
                    ST(((r * ch + c) * ph_n + ph) * pw_n + pw, is_max ? acc : acc / count);
                }
        }
    }
    return CP_OK;
}

static enum cp_status roi_align_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, roi_align_run_plain);
}

CP_REF_KERNEL(cp_ref_roi_align, CP_OP_ROI_ALIGN, roi_align_supports, plain_prepare, roi_align_run);

/* ---- NonMaxSuppression
 * ------------------------------------------------------------------------------ */

/* The output's row count depends on the data; the plan sizes it from the
 * shape the model declares, and the run fails (naming the node) when the
 * selection has another size, never writing past the buffer. A node whose
 * output shape is not known before running has no kernel. */
static bool nms_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *b = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    if (!b || !s || !float_dt(b->dtype) || !float_dt(s->dtype) || y->dtype != CP_DTYPE_I64)
        return false;
    if (b->shape.rank != 3 || s->shape.rank != 3 || b->shape.dims[2].value != 4 ||
        b->shape.dims[0].value != s->shape.dims[0].value ||
        b->shape.dims[1].value != s->shape.dims[2].value)
        return false;
    if (y->shape.rank != 2 || y->shape.dims[1].value != 3)
        return false;
    const struct cp_tensor *m = cp_ref_in(g, n, 2), *iou = cp_ref_in(g, n, 3),
                           *st = cp_ref_in(g, n, 4);
    if (m && (m->dtype != CP_DTYPE_I64 || cp_ref_numel(&m->shape) > 1))
        return false;
    if (iou && (!float_dt(iou->dtype) || cp_ref_numel(&iou->shape) > 1))
        return false;
    if (st && (!float_dt(st->dtype) || cp_ref_numel(&st->shape) > 1))
        return false;
    int64_t cpb = cp_node_attr_int(n, "center_point_box", 0);
    return cpb == 0 || cpb == 1;
}

static size_t align64(size_t n)
{
    return (n + 63) / 64 * 64;
}

static enum cp_status nms_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    int64_t nbox = k->in[0]->shape.dims[1].value;
    k->scratch_bytes = align64(2 * (size_t)nbox * sizeof(int64_t));
    return CP_OK;
}

struct nms_box {
    double x0, y0, x1, y1;
};

static struct nms_box nms_load(const struct cp_kexec *k, int64_t at, bool center)
{
    double v[4];
    for (int i = 0; i < 4; i++)
        v[i] = cp_elem_load_f64(k->in_data[0], k->in[0]->dtype, at + i);
    struct nms_box b;
    if (center) { /* x_center, y_center, width, height */
        b.x0 = v[0] - v[2] / 2.0;
        b.x1 = v[0] + v[2] / 2.0;
        b.y0 = v[1] - v[3] / 2.0;
        b.y1 = v[1] + v[3] / 2.0;
    } else { /* y1, x1, y2, x2, corners in either order */
        b.y0 = fmin(v[0], v[2]);
        b.y1 = fmax(v[0], v[2]);
        b.x0 = fmin(v[1], v[3]);
        b.x1 = fmax(v[1], v[3]);
    }
    return b;
}

/* Whether b suppresses a: IoU above the threshold (degenerate boxes never do). */
static bool nms_suppresses(struct nms_box a, struct nms_box b, double thr)
{
    double ix0 = fmax(a.x0, b.x0), iy0 = fmax(a.y0, b.y0);
    double ix1 = fmin(a.x1, b.x1), iy1 = fmin(a.y1, b.y1);
    if (ix1 <= ix0 || iy1 <= iy0)
        return false;
    double inter = (ix1 - ix0) * (iy1 - iy0);
    double aa = (a.x1 - a.x0) * (a.y1 - a.y0), ab = (b.x1 - b.x0) * (b.y1 - b.y0);
    if (aa <= 0.0 || ab <= 0.0)
        return false;
    double uni = aa + ab - inter;
    return uni > 0.0 && inter / uni > thr;
}

/* Order ids[0..n) by score, highest first, lower box index first on ties
 * (a bottom-up merge sort through tmp). */
static void nms_sort(const struct cp_kexec *k, int64_t sbase, int64_t *ids, int64_t *tmp, int64_t n)
{
    enum cp_dtype dt = k->in[1]->dtype;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                double si = cp_elem_load_f64(k->in_data[1], dt, sbase + ids[i]);
                double sj = cp_elem_load_f64(k->in_data[1], dt, sbase + ids[j]);
                bool take_j = sj > si || (sj == si && ids[j] < ids[i]);
                tmp[o++] = take_j ? ids[j++] : ids[i++];
            }
            while (i < mid)
                tmp[o++] = ids[i++];
            while (j < hi)
                tmp[o++] = ids[j++];
        }
        memcpy(ids, tmp, (size_t)n * sizeof *ids);
    }
}

static enum cp_status nms_run(struct cp_kexec *k)
{
    int64_t nb = k->in[0]->shape.dims[0].value, nbox = k->in[0]->shape.dims[1].value;
    int64_t ncls = k->in[1]->shape.dims[1].value;
    int64_t rows = k->out[0]->shape.dims[0].value;
    bool center = cp_node_attr_int(k->node, "center_point_box", 0) == 1;
    const struct cp_tensor *tm = k->node->n_inputs > 2 ? k->in[2] : NULL;
    const struct cp_tensor *ti = k->node->n_inputs > 3 ? k->in[3] : NULL;
    const struct cp_tensor *ts = k->node->n_inputs > 4 ? k->in[4] : NULL;
    int64_t max_out = tm && cp_ref_numel(&tm->shape) == 1 ? *(const int64_t *)k->in_data[2] : 0;
    double iou =
        ti && cp_ref_numel(&ti->shape) == 1 ? cp_elem_load_f64(k->in_data[3], ti->dtype, 0) : 0.0;
    bool has_st = ts && cp_ref_numel(&ts->shape) == 1;
    double sthr = has_st ? cp_elem_load_f64(k->in_data[4], ts->dtype, 0) : 0.0;
    int64_t *ids = k->scratch, *tmp = ids + nbox, *out = k->out_data[0];
    int64_t count = 0;
    enum cp_dtype sdt = k->in[1]->dtype;
    for (int64_t b = 0; b < nb && max_out > 0; b++)
        for (int64_t c = 0; c < ncls; c++) {
            int64_t sbase = (b * ncls + c) * nbox, nc = 0;
            for (int64_t i = 0; i < nbox; i++)
                if (!has_st || cp_elem_load_f64(k->in_data[1], sdt, sbase + i) > sthr)
                    ids[nc++] = i;
            nms_sort(k, sbase, ids, tmp, nc);
            int64_t first = count, picked = 0;
            for (int64_t i = 0; i < nc && picked < max_out; i++) {
                struct nms_box cand = nms_load(k, (b * nbox + ids[i]) * 4, center);
                bool keep = true;
                for (int64_t j = first; j < count && keep; j++)
                    keep = !nms_suppresses(
                        cand, nms_load(k, (b * nbox + out[j * 3 + 2]) * 4, center), iou);
                if (!keep)
                    continue;
                if (count >= rows) /* more than the declared rows */
                    return CP_ERR_INVALID;
                out[count * 3 + 0] = b;
                out[count * 3 + 1] = c;
                out[count * 3 + 2] = ids[i];
                count++;
                picked++;
            }
        }
    return count == rows ? CP_OK : CP_ERR_INVALID;
}

CP_REF_KERNEL(cp_ref_nms, CP_OP_NON_MAX_SUPPRESSION, nms_supports, nms_prepare, nms_run);

/* ---- MaxRoiPool
 * ---------------------------------------------------------------------------------- */

static bool max_roi_pool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *rois = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    const struct cp_attr *ps = cp_node_attr(n, "pooled_shape");
    return rois && float_dt(rois->dtype) && ps && ps->type == CP_ATTR_INTS && ps->n == 2 &&
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

CP_REF_KERNEL(cp_ref_max_roi_pool, CP_OP_MAX_ROI_POOL, max_roi_pool_supports, plain_prepare,
              max_roi_pool_run);

/* ---- CenterCropPad ------------------------------------------------------------------------------
 */

static bool ccp_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && y->dtype == x->dtype && y->shape.rank == x->shape.rank;
}

/* Each dim is cropped (start (in - out) / 2) or zero-padded (before
 * (out - in) / 2) about its centre; the output shape says how much. */
static enum cp_status ccp_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    size_t es = cp_dtype_size(k->in[0]->dtype);
    int r = xs->rank;
    int64_t off[CP_MAX_RANK], xst[CP_MAX_RANK], n_out = cp_ref_numel(ys);
    cp_ref_strides(xs, xst);
    for (int d = 0; d < r; d++) {
        int64_t in = xs->dims[d].value, out = ys->dims[d].value;
        off[d] = in >= out ? (in - out) / 2 : -((out - in) / 2); /* input index of output 0 */
    }
    for (int64_t o = 0; o < n_out; o++) {
        int64_t rest = o, src = 0;
        bool inside = true;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = rest % ys->dims[d].value + off[d];
            rest /= ys->dims[d].value;
            inside = inside && c >= 0 && c < xs->dims[d].value;
            src += c * xst[d];
        }
        char *dst = (char *)k->out_data[0] + (size_t)o * es;
        if (inside)
            memcpy(dst, (const char *)k->in_data[0] + (size_t)src * es, es);
        else
            memset(dst, 0, es);
    }
    return CP_OK;
}

static enum cp_status ccp_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, ccp_run_plain);
}

CP_REF_KERNEL(cp_ref_center_crop_pad, CP_OP_CENTER_CROP_PAD, ccp_supports, plain_prepare, ccp_run);

/* ---- Col2Im
 * --------------------------------------------------------------------------------------- */

#define C2I_MAX (CP_MAX_RANK - 2)

struct c2i_geom {
    int ns;
    int64_t img[C2I_MAX], blk[C2I_MAX], dil[C2I_MAX], pad[C2I_MAX], str[C2I_MAX], cnt[C2I_MAX];
    int64_t prod, len;
};

static bool c2i_geom(const struct cp_graph *g, const struct cp_node *n, struct c2i_geom *q)
{
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    const struct cp_tensor *bt = cp_ref_in(g, n, 2);
    if (!x || !bt || !bt->data || x->shape.rank != 3 || bt->shape.rank != 1)
        return false;
    int ns = y->shape.rank - 2;
    if (ns < 1 || ns > C2I_MAX || bt->shape.dims[0].value != ns)
        return false;
    const struct cp_attr *da = cp_node_attr(n, "dilations"), *pa = cp_node_attr(n, "pads"),
                         *sa = cp_node_attr(n, "strides");
    if ((da && da->n != (size_t)ns) || (pa && pa->n != 2 * (size_t)ns) ||
        (sa && sa->n != (size_t)ns))
        return false;
    q->ns = ns;
    q->prod = 1;
    q->len = 1;
    for (int d = 0; d < ns; d++) {
        q->img[d] = y->shape.dims[d + 2].value;
        q->blk[d] = cp_elem_load_i64(bt->data, bt->dtype, d);
        q->dil[d] = da ? da->ints[d] : 1;
        q->str[d] = sa ? sa->ints[d] : 1;
        q->pad[d] = pa ? pa->ints[d] : 0;
        int64_t pe = pa ? pa->ints[d + ns] : 0;
        if (q->blk[d] < 1 || q->dil[d] < 1 || q->str[d] < 1 || q->pad[d] < 0 || pe < 0)
            return false;
        int64_t span = q->img[d] + q->pad[d] + pe - (q->dil[d] * (q->blk[d] - 1) + 1);
        q->cnt[d] = span < 0 ? 0 : span / q->str[d] + 1;
        q->prod *= q->blk[d];
        q->len *= q->cnt[d];
    }
    return x->shape.dims[0].value == y->shape.dims[0].value &&
           x->shape.dims[1].value == y->shape.dims[1].value * q->prod &&
           x->shape.dims[2].value == q->len;
}

static bool c2i_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct c2i_geom q;
    return float_io(g, n) && c2i_geom(g, n, &q);
}

static enum cp_status c2i_run_plain(struct cp_kexec *k)
{
    struct c2i_geom q;
    if (!c2i_geom(k->g, k->node, &q))
        return CP_ERR_INTERNAL;
    int64_t nb = k->out[0]->shape.dims[0].value, ch = k->out[0]->shape.dims[1].value;
    int64_t plane = cp_ref_numel(&k->out[0]->shape) / (nb * ch > 0 ? nb * ch : 1);
    for (int64_t i = 0; i < nb * ch * plane; i++)
        ST(i, 0.0);
    if (nb * ch == 0)
        return CP_OK;
    for (int64_t nc = 0; nc < nb * ch; nc++)
        for (int64_t kk = 0; kk < q.prod; kk++)
            for (int64_t l = 0; l < q.len; l++) {
                int64_t kr = kk, lr = l, pos = 0;
                bool inside = true;
                for (int d = q.ns - 1; d >= 0; d--) {
                    int64_t kd = kr % q.blk[d], ld = lr % q.cnt[d];
                    kr /= q.blk[d];
                    lr /= q.cnt[d];
                    int64_t p = ld * q.str[d] - q.pad[d] + kd * q.dil[d];
                    inside = inside && p >= 0 && p < q.img[d];
                    int64_t stride = 1;
                    for (int e = d + 1; e < q.ns; e++)
                        stride *= q.img[e];
                    pos += p * stride;
                }
                if (!inside)
                    continue;
                int64_t o = nc * plane + pos;
                ST(o, cp_elem_load_f64(k->out_data[0], k->out[0]->dtype, o) +
                          LD(0, (nc * q.prod + kk) * q.len + l));
            }
    return CP_OK;
}

static enum cp_status c2i_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, c2i_run_plain);
}

CP_REF_KERNEL(cp_ref_col2im, CP_OP_COL2IM, c2i_supports, plain_prepare, c2i_run);

/* ---- AffineGrid
 * ------------------------------------------------------------------------------------ */

static bool affine_grid_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!float_io(g, n))
        return false;
    const struct cp_tensor *th = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int sp = y->shape.rank - 2;
    return (sp == 2 || sp == 3) && th->shape.rank == 3 &&
           th->shape.dims[0].value == y->shape.dims[0].value && th->shape.dims[1].value == sp &&
           th->shape.dims[2].value == sp + 1 && y->shape.dims[sp + 1].value == sp;
}

/* Base coordinates in [-1, 1] (pixel centres unless align_corners), then
 * theta times (x, y[, z], 1). */
static enum cp_status affine_grid_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *ys = &k->out[0]->shape;
    bool align = cp_node_attr_int(k->node, "align_corners", 0) != 0;
    int sp = ys->rank - 2;
    int64_t nb = ys->dims[0].value, pts = cp_ref_span(ys, 1, sp + 1);
    for (int64_t n = 0; n < nb; n++)
        for (int64_t p = 0; p < pts; p++) {
            double base[4]; /* x, y, z, 1: x is the innermost dim */
            int64_t rest = p;
            for (int d = 0; d < sp; d++) {
                int64_t size = ys->dims[sp - d].value, i = rest % size;
                rest /= size;
                base[d] = align ? (size > 1 ? -1.0 + 2.0 * (double)i / (double)(size - 1) : -1.0)
                                : (2.0 * (double)i + 1.0) / (double)size - 1.0;
            }
            base[sp] = 1.0;
            for (int r = 0; r < sp; r++) {
                double v = 0.0;
                for (int c = 0; c <= sp; c++)
                    v += LD(0, (n * sp + r) * (sp + 1) + c) * base[c];
                ST((n * pts + p) * sp + r, v);
            }
        }
    return CP_OK;
}

static enum cp_status affine_grid_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, affine_grid_run_plain);
}

CP_REF_KERNEL(cp_ref_affine_grid, CP_OP_AFFINE_GRID, affine_grid_supports, plain_prepare,
              affine_grid_run);

/* ---- DeformConv
 * --------------------------------------------------------------------------------------- */

struct dc_geom {
    int64_t nb, cin, h, w, cout, kh, kw, oh, ow, group, og, sh, sw, dh, dw, ph, pw;
};

static bool dc_geom(const struct cp_graph *g, const struct cp_node *n, struct dc_geom *q)
{
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *wt = cp_ref_in(g, n, 1),
                           *off = cp_ref_in(g, n, 2), *b = cp_ref_in(g, n, 3),
                           *m = cp_ref_in(g, n, 4), *y = cp_ref_out(g, n, 0);
    if (!x || !wt || !off || x->shape.rank != 4 || wt->shape.rank != 4 || off->shape.rank != 4 ||
        y->shape.rank != 4)
        return false;
    const struct cp_attr *st = cp_node_attr(n, "strides"), *di = cp_node_attr(n, "dilations"),
                         *pa = cp_node_attr(n, "pads");
    q->nb = x->shape.dims[0].value;
    q->cin = x->shape.dims[1].value;
    q->h = x->shape.dims[2].value;
    q->w = x->shape.dims[3].value;
    q->cout = wt->shape.dims[0].value;
    q->kh = wt->shape.dims[2].value;
    q->kw = wt->shape.dims[3].value;
    q->oh = y->shape.dims[2].value;
    q->ow = y->shape.dims[3].value;
    q->group = cp_node_attr_int(n, "group", 1);
    q->og = cp_node_attr_int(n, "offset_group", 1);
    q->sh = st && st->n == 2 ? st->ints[0] : 1;
    q->sw = st && st->n == 2 ? st->ints[1] : 1;
    q->dh = di && di->n == 2 ? di->ints[0] : 1;
    q->dw = di && di->n == 2 ? di->ints[1] : 1;
    q->ph = pa && pa->n == 4 ? pa->ints[0] : 0;
    q->pw = pa && pa->n == 4 ? pa->ints[1] : 0;
    if (q->group < 1 || q->og < 1 || q->cin % q->group || q->cout % q->group || q->cin % q->og ||
        wt->shape.dims[1].value * q->group != q->cin || y->shape.dims[0].value != q->nb ||
        y->shape.dims[1].value != q->cout)
        return false;
    int64_t taps = q->kh * q->kw;
    if (off->shape.dims[0].value != q->nb || off->shape.dims[1].value != q->og * taps * 2 ||
        off->shape.dims[2].value != q->oh || off->shape.dims[3].value != q->ow)
        return false;
    if (b && (b->shape.rank != 1 || b->shape.dims[0].value != q->cout || !float_dt(b->dtype)))
        return false;
    if (m && (m->shape.rank != 4 || m->shape.dims[0].value != q->nb ||
              m->shape.dims[1].value != q->og * taps || m->shape.dims[2].value != q->oh ||
              m->shape.dims[3].value != q->ow))
        return false;
    return float_dt(wt->dtype) && float_dt(off->dtype) && (!m || float_dt(m->dtype));
}

static bool dc_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct dc_geom q;
    return float_io(g, n) && dc_geom(g, n, &q);
}

/* Bilinear sample of plane p at (y, x); zero outside, corners outside
 * contribute nothing (as ONNX's reference and ONNX Runtime). */
static double dc_sample(const struct cp_kexec *k, int64_t p, int64_t h, int64_t w, double y,
                        double x)
{
    if (y <= -1.0 || y >= (double)h || x <= -1.0 || x >= (double)w)
        return 0.0;
    double fy = floor(y), fx = floor(x), ly = y - fy, lx = x - fx;
    int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    double v = 0.0;
    for (int t = 0; t < 4; t++) {
        int64_t yy = y0 + (t >> 1), xx = x0 + (t & 1);
        if (yy < 0 || yy >= h || xx < 0 || xx >= w)
            continue;
        double wt = ((t >> 1) ? ly : 1.0 - ly) * ((t & 1) ? lx : 1.0 - lx);
        v += wt * LD(0, p + yy * w + xx);
    }
    return v;
}

static enum cp_status dc_run_plain(struct cp_kexec *k)
{
    struct dc_geom q;
    if (!dc_geom(k->g, k->node, &q))
        return CP_ERR_INTERNAL;
    bool has_b = k->node->n_inputs > 3 && k->in[3];
    bool has_m = k->node->n_inputs > 4 && k->in[4];
    int64_t cin_g = q.cin / q.group, cout_g = q.cout / q.group, cin_og = q.cin / q.og;
    int64_t taps = q.kh * q.kw, opl = q.oh * q.ow;
    for (int64_t n = 0; n < q.nb; n++)
        for (int64_t oc = 0; oc < q.cout; oc++) {
            int64_t gi = oc / cout_g;
            for (int64_t o = 0; o < opl; o++) {
                int64_t oy = o / q.ow, ox = o % q.ow;
                double acc = has_b ? LD(3, oc) : 0.0;
                for (int64_t icl = 0; icl < cin_g; icl++) {
                    int64_t ic = gi * cin_g + icl, og = ic / cin_og;
                    for (int64_t t = 0; t < taps; t++) {
                        int64_t i = t / q.kw, j = t % q.kw;
                        int64_t oi = ((n * q.og + og) * taps + t) * 2;
                        double dy = LD(2, oi * opl + o), dx = LD(2, (oi + 1) * opl + o);
                        double y = (double)(oy * q.sh - q.ph + i * q.dh) + dy;
                        double x = (double)(ox * q.sw - q.pw + j * q.dw) + dx;
                        double mk = has_m ? LD(4, ((n * q.og + og) * taps + t) * opl + o) : 1.0;
                        double v = dc_sample(k, (n * q.cin + ic) * q.h * q.w, q.h, q.w, y, x);
                        acc += LD(1, ((oc * cin_g + icl) * q.kh + i) * q.kw + j) * v * mk;
                    }
                }
                ST((n * q.cout + oc) * opl + o, acc);
            }
        }
    return CP_OK;
}

static enum cp_status dc_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, dc_run_plain);
}

CP_REF_KERNEL(cp_ref_deform_conv, CP_OP_DEFORM_CONV, dc_supports, plain_prepare, dc_run);
