/* DepthToSpace and SpaceToDepth as strided copies of plain tensors of 1-,
 * 2-, 4- or 8-byte elements: for each (n, c, row) of the space-side tensor
 * the W*b elements of the row come from b depth channels, read
 * contiguously along w. Rows are split between threads. */
#include "graph/op_eval.h"
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <math.h>
#include <string.h>

static bool d2s_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    if (n->n_inputs != 1 || n->n_outputs != 1 || !x || !y || !cp_shape_is_static(&x->shape) ||
        !cp_shape_is_static(&y->shape) || x->dtype != y->dtype || x->shape.rank != 4 ||
        y->shape.rank != 4 || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y))
        return false;
    size_t es = cp_dtype_size(x->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return false;
    int64_t b = cp_node_attr_int(n, "blocksize", 0);
    if (b < 1)
        return false;
    int64_t c = x->shape.dims[1].value, h = x->shape.dims[2].value, w = x->shape.dims[3].value;
    if (x->shape.dims[0].value != y->shape.dims[0].value)
        return false;
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

/* One space row (n, c, ys) <-> its b depth rows. */
#define ROW_LOOP(T)                                                                                \
    do {                                                                                           \
        T *sp = (T *)space + row * ws;                                                             \
        for (int64_t j = 0; j < b; j++) {                                                          \
            T *dp = (T *)depth + ((n * cs * b * b + chan(c, i, j)) * h + ys / b) * w;              \
            if (to_space)                                                                          \
                for (int64_t x = 0; x < w; x++)                                                    \
                    sp[x * b + j] = dp[x];                                                         \
            else                                                                                   \
                for (int64_t x = 0; x < w; x++)                                                    \
                    dp[x] = sp[x * b + j];                                                         \
        }                                                                                          \
    } while (0)

static enum cp_status d2s_run(struct cp_kexec *k)
{
    bool to_space = k->node->op == CP_OP_DEPTH_TO_SPACE;
    bool crd = to_space && strcmp(cp_node_attr_string(k->node, "mode", "DCR"), "CRD") == 0;
    const struct cp_shape *ss = to_space ? &k->out[0]->shape : &k->in[0]->shape;
    char *space = to_space ? k->out_data[0] : k->in_data[0];
    char *depth = to_space ? k->in_data[0] : k->out_data[0];
    int64_t b = cp_node_attr_int(k->node, "blocksize", 1);
    int64_t cs = ss->dims[1].value, hs = ss->dims[2].value, ws = ss->dims[3].value;
    int64_t h = hs / b, w = ws / b, rows = ss->dims[0].value * cs * hs;
    size_t es = cp_dtype_size(k->in[0]->dtype);
#define chan(c, i, j) (crd ? (c)*b * b + (i)*b + (j) : ((i)*b + (j)) * cs + (c))
    int nt = cp_fk_threads(k, rows * ws, 1 << 14);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        int64_t ys = row % hs, c = row / hs % cs, n = row / hs / cs, i = ys % b;
        switch (es) {
        case 1:
            ROW_LOOP(uint8_t);
            break;
        case 2:
            ROW_LOOP(uint16_t);
            break;
        case 4:
            ROW_LOOP(uint32_t);
            break;
        default:
            ROW_LOOP(uint64_t);
            break;
        }
    }
#undef chan
    return CP_OK;
}

const struct cp_kernel cp_fast_depth_to_space = {
    "c:depth_to_space", CP_OP_DEPTH_TO_SPACE, d2s_supports, NULL, d2s_run, NULL, NULL};
const struct cp_kernel cp_fast_space_to_depth = {
    "c:space_to_depth", CP_OP_SPACE_TO_DEPTH, d2s_supports, NULL, d2s_run, NULL, NULL};

/* ---- RoiAlign, f32 -------------------------------------------------------------------------- */

/* The reference's arithmetic, reordered: each sample point's four taps and
 * weights are found once and applied to every channel, instead of once per
 * channel; rois are split between threads. Same sums in the same order per
 * output element, in f32. */
static bool roi_align_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 3 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 2, CP_DTYPE_I64) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *r = cp_fk_in(g, n, 1), *b = cp_fk_in(g, n, 2),
                           *y = cp_fk_out(g, n, 0);
    if (!cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) || x->shape.rank != 4 ||
        r->shape.rank != 2 || r->shape.dims[1].value != 4 || b->shape.rank != 1 ||
        b->shape.dims[0].value != r->shape.dims[0].value || y->shape.rank != 4 ||
        y->shape.dims[0].value != r->shape.dims[0].value ||
        y->shape.dims[1].value != x->shape.dims[1].value ||
        y->shape.dims[2].value != cp_node_attr_int(n, "output_height", 1) ||
        y->shape.dims[3].value != cp_node_attr_int(n, "output_width", 1))
        return false;
    const char *mode = cp_node_attr_string(n, "mode", "avg");
    const char *ctm = cp_node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    return strcmp(mode, "avg") == 0 &&
           (strcmp(ctm, "half_pixel") == 0 || strcmp(ctm, "output_half_pixel") == 0) &&
           cp_node_attr_int(n, "sampling_ratio", 0) >= 0;
}

static enum cp_status roi_align_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t nb = xs->dims[0].value, ch = xs->dims[1].value, h = xs->dims[2].value,
            w = xs->dims[3].value;
    int64_t nr = k->in[1]->shape.dims[0].value;
    int64_t ph_n = k->out[0]->shape.dims[2].value, pw_n = k->out[0]->shape.dims[3].value;
    const char *ctm =
        cp_node_attr_string(k->node, "coordinate_transformation_mode",
                            cp_fk_opset(k->g) >= 16 ? "half_pixel" : "output_half_pixel");
    bool half = strcmp(ctm, "half_pixel") == 0;
    double scale = cp_node_attr_float(k->node, "spatial_scale", 1.0f);
    int64_t ratio = cp_node_attr_int(k->node, "sampling_ratio", 0);
    const float *X = k->in_data[0], *R = k->in_data[1];
    const int64_t *bidx = k->in_data[2];
    float *Y = k->out_data[0];
    int64_t hw = h * w, phw = ph_n * pw_n;
    for (int64_t r = 0; r < nr; r++)
        if (bidx[r] < 0 || bidx[r] >= nb)
            return CP_ERR_INVALID;
    int nt = cp_fk_threads(k, nr * ch * phw * 4, 1 << 12);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t r = 0; r < nr; r++) {
        double off = half ? 0.5 : 0.0;
        double x0 = R[r * 4 + 0] * scale - off, y0 = R[r * 4 + 1] * scale - off;
        double rw = R[r * 4 + 2] * scale - off - x0, rh = R[r * 4 + 3] * scale - off - y0;
        if (!half) {
            rw = rw > 1.0 ? rw : 1.0;
            rh = rh > 1.0 ? rh : 1.0;
        }
        double bh = rh / (double)ph_n, bw = rw / (double)pw_n;
        int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)ph_n);
        int64_t gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)pw_n);
        float inv = 1.0f / (float)(gh * gw > 1 ? gh * gw : 1);
        const float *xb = X + bidx[r] * ch * hw;
        float *yr = Y + r * ch * phw;
        for (int64_t c = 0; c < ch; c++)
            for (int64_t q = 0; q < phw; q++)
                yr[c * phw + q] = 0.0f;
        for (int64_t ph = 0; ph < ph_n; ph++)
            for (int64_t pw = 0; pw < pw_n; pw++) {
                float *yo = yr + ph * pw_n + pw;
                for (int64_t iy = 0; iy < gh; iy++) {
                    double y = y0 + ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        double x = x0 + pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                        int64_t o[4];
                        double wd[4];
                        if (!cp_eval_roi_align_tap(y, x, h, w, o, wd))
                            continue;
                        float w1 = (float)wd[0], w2 = (float)wd[1], w3 = (float)wd[2],
                              w4 = (float)wd[3];
                        int64_t o1 = o[0], o2 = o[1], o3 = o[2], o4 = o[3];
                        for (int64_t c = 0; c < ch; c++) {
                            const float *xc = xb + c * hw;
                            yo[c * phw] += w1 * xc[o1] + w2 * xc[o2] + w3 * xc[o3] + w4 * xc[o4];
                        }
                    }
                }
                for (int64_t c = 0; c < ch; c++)
                    yo[c * phw] *= inv;
            }
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_roi_align = {
    "c:roi_align", CP_OP_ROI_ALIGN, roi_align_supports, NULL, roi_align_run, NULL, NULL};

/* ---- GridSample, f32, 2-D, linear and nearest -------------------------------------------- */

/* As the reference: each output point's taps (index and weight, padding
 * applied) are found once and applied to every channel. */
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static int gs_pad_mode(const struct cp_node *n)
{
    const char *p = cp_node_attr_string(n, "padding_mode", "zeros");
    return strcmp(p, "zeros") == 0        ? GS_ZEROS
           : strcmp(p, "border") == 0     ? GS_BORDER
           : strcmp(p, "reflection") == 0 ? GS_REFLECTION
                                          : -1;
}

/* 1: linear, 0: nearest, -1: other (cubic, unknown). */
static int gs_linear(const struct cp_graph *g, const struct cp_node *n)
{
    bool v20 = cp_fk_opset(g) >= 20;
    const char *m = cp_node_attr_string(n, "mode", v20 ? "linear" : "bilinear");
    if (strcmp(m, "nearest") == 0)
        return 0;
    return strcmp(m, v20 ? "linear" : "bilinear") == 0 ? 1 : -1;
}

static bool gs_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *gr = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    if (gs_linear(g, n) < 0 || gs_pad_mode(n) < 0 || !cp_tensor_is_plain(x) ||
        !cp_tensor_is_plain(y) || x->shape.rank != 4 || gr->shape.rank != 4 || y->shape.rank != 4)
        return false;
    return gr->shape.dims[0].value == x->shape.dims[0].value && gr->shape.dims[3].value == 2 &&
           y->shape.dims[0].value == x->shape.dims[0].value &&
           y->shape.dims[1].value == x->shape.dims[1].value &&
           y->shape.dims[2].value == gr->shape.dims[1].value &&
           y->shape.dims[3].value == gr->shape.dims[2].value;
}

static double gs_reflect(double x, double lo, double hi)
{
    double range = hi - lo;
    if (range <= 0.0)
        return lo;
    if (x < lo) {
        double dx = lo - x, nf = floor(dx / range), r = dx - nf * range;
        return fmod(nf, 2.0) == 0.0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, nf = floor(dx / range), r = dx - nf * range;
        return fmod(nf, 2.0) == 0.0 ? hi - r : lo + r;
    }
    return x;
}

/* Index v along a dim of n pixels after padding; false: reads as zero. */
static bool gs_index(int64_t *v, int64_t n, int pad, bool align)
{
    if (pad == GS_ZEROS)
        return *v >= 0 && *v < n;
    if (pad == GS_REFLECTION) {
        double lo = align ? 0.0 : -0.5, hi = align ? (double)n - 1 : (double)n - 0.5;
        *v = (int64_t)gs_reflect((double)*v, lo, hi);
    }
    *v = *v < 0 ? 0 : *v >= n ? n - 1 : *v;
    return true;
}

static enum cp_status gs_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    int pad = gs_pad_mode(k->node);
    bool linear = gs_linear(k->g, k->node) == 1;
    bool align = cp_node_attr_int(k->node, "align_corners", 0) != 0;
    int64_t nb = xs->dims[0].value, ch = xs->dims[1].value, h = xs->dims[2].value,
            w = xs->dims[3].value;
    int64_t pts = ys->dims[2].value * ys->dims[3].value, hw = h * w;
    const float *X = k->in_data[0], *G = k->in_data[1];
    float *Y = k->out_data[0];
    int nt = cp_fk_threads(k, nb * pts * ch * 4, 1 << 12);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t np = 0; np < nb * pts; np++) {
        int64_t n = np / pts, o = np % pts;
        double pos[2];
        int64_t size[2] = {h, w};
        for (int d = 0; d < 2; d++) {
            double gv = G[np * 2 + (1 - d)], sz = (double)size[d];
            double p = align ? (gv + 1.0) / 2.0 * (sz - 1.0) : ((gv + 1.0) * sz - 1.0) / 2.0;
            double lo = align ? 0.0 : -0.5, hi = align ? sz - 1.0 : sz - 0.5;
            if (!linear)
                p = nearbyint(p);
            if (p < lo || p > hi) {
                if (pad == GS_BORDER)
                    p = p < 0.0 ? 0.0 : p > sz - 1.0 ? sz - 1.0 : p;
                else if (pad == GS_REFLECTION)
                    p = gs_reflect(p, lo, hi);
            }
            pos[d] = p;
        }
        int64_t off[4] = {0, 0, 0, 0};
        float wt[4] = {0, 0, 0, 0};
        int taps = linear ? 4 : 1, used = 0;
        for (int t = 0; t < taps; t++) {
            int64_t iy, ix;
            double wgt = 1.0;
            if (linear) {
                double fy = floor(pos[0]), fx = floor(pos[1]);
                double ty = pos[0] - fy, tx = pos[1] - fx;
                iy = (int64_t)fy + (t >> 1);
                ix = (int64_t)fx + (t & 1);
                wgt = ((t >> 1) ? ty : 1.0 - ty) * ((t & 1) ? tx : 1.0 - tx);
            } else {
                iy = (int64_t)nearbyint(pos[0]);
                ix = (int64_t)nearbyint(pos[1]);
            }
            if (wgt != 0.0 && gs_index(&iy, h, pad, align) && gs_index(&ix, w, pad, align)) {
                off[used] = iy * w + ix;
                wt[used++] = (float)wgt;
            }
        }
        const float *xn = X + n * ch * hw;
        float *yn = Y + n * ch * pts + o;
        /* Only taps inside (or padded onto) the image: a zero-weight tap
         * must not read a NaN into the sum, as in the reference. */
        for (int64_t c = 0; c < ch; c++) {
            const float *xc = xn + c * hw;
            float v = 0.0f;
            for (int t = 0; t < used; t++)
                v += wt[t] * xc[off[t]];
            yn[c * pts] = v;
        }
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_grid_sample = {
    "c:grid_sample", CP_OP_GRID_SAMPLE, gs_supports, NULL, gs_run, NULL, NULL};
