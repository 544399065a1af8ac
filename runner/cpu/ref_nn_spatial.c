/* Reference kernels of the [nn] family that move or resample pixels:
 * DepthToSpace, SpaceToDepth, GridSample, CenterCropPad, Col2Im and
 * AffineGrid (ref_nn_ops.h). */
#include "runner/cpu/ref_nn_ops.h"

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

CP_REF_KERNEL(cp_ref_depth_to_space, CP_OP_DEPTH_TO_SPACE, d2s_supports, cp_ref_layout_prepare,
              d2s_run);
CP_REF_KERNEL(cp_ref_space_to_depth, CP_OP_SPACE_TO_DEPTH, d2s_supports, cp_ref_layout_prepare,
              d2s_run);

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
    if (!cp_nn_float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *gr = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    enum gs_mode mode;
    enum gs_pad pad;
    int r = x->shape.rank, ns = r - 2;
    if (!gr || !cp_dtype_is_float(gr->dtype) || !gs_params(g, n, &mode, &pad) || ns < 1 ||
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

CP_REF_KERNEL(cp_ref_grid_sample, CP_OP_GRID_SAMPLE, gs_supports, cp_ref_layout_prepare, gs_run);

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

CP_REF_KERNEL(cp_ref_center_crop_pad, CP_OP_CENTER_CROP_PAD, ccp_supports, cp_ref_layout_prepare,
              ccp_run);

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
    return cp_nn_float_io(g, n) && c2i_geom(g, n, &q);
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

CP_REF_KERNEL(cp_ref_col2im, CP_OP_COL2IM, c2i_supports, cp_ref_layout_prepare, c2i_run);

/* ---- AffineGrid
 * ------------------------------------------------------------------------------------ */

static bool affine_grid_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n))
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

CP_REF_KERNEL(cp_ref_affine_grid, CP_OP_AFFINE_GRID, affine_grid_supports, cp_ref_layout_prepare,
              affine_grid_run);
