/* Reference kernels for Conv and ConvTranspose, 1-D to 3-D (fewer spatial
 * dims are run as 3-D with leading dims of 1), with groups, strides,
 * dilations, explicit or automatic padding, and for ConvTranspose
 * output_padding and output_shape.
 *
 * Both are direct loops: for each output channel, input channel and kernel
 * tap, one pass over the output plane adds weight * input, with the range
 * of positions that stay inside the input computed up front so the
 * innermost loop has no bounds tests. */
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <string.h>

/* Shape checks shared by both ops: x and w rank 3..5 and equal, f32,
 * optional bias of `m` elements. */
static bool conv_common_ok(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *w = cp_ref_in(g, n, 1),
                           *b = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    if (!x || !w || x->dtype != CP_DTYPE_F32 || w->dtype != CP_DTYPE_F32 ||
        y->dtype != CP_DTYPE_F32)
        return false;
    int r = x->shape.rank;
    if (r < 3 || r > 2 + CP_REF_MAX_SPATIAL || w->shape.rank != r || y->shape.rank != r)
        return false;
    if (!cp_ref_window_attrs_ok(n, r - 2) || cp_node_attr_int(n, "group", 1) < 1)
        return false;
    const struct cp_attr *ks = cp_node_attr(n, "kernel_shape");
    for (int k = 0; ks && k < r - 2; k++)
        if (ks->ints[k] != w->shape.dims[k + 2].value)
            return false;
    if (b && (b->dtype != CP_DTYPE_F32 || b->shape.rank != 1 ||
              b->shape.dims[0].value != y->shape.dims[1].value))
        return false;
    return x->shape.dims[0].value == y->shape.dims[0].value;
}

/* Fill each output plane with its channel's bias (or zero). */
static void init_with_bias(float *y, const float *bias, int64_t batch, int64_t m, int64_t plane)
{
    for (int64_t n = 0; n < batch; n++)
        for (int64_t c = 0; c < m; c++) {
            float v = bias ? bias[c] : 0.0f;
            float *p = y + (n * m + c) * plane;
            for (int64_t i = 0; i < plane; i++)
                p[i] = v;
        }
}

static const float *bias_data(const struct cp_kexec *k)
{
    return k->node->n_inputs > 2 && k->in[2] ? k->in_data[2] : NULL;
}

/* ---- Conv --------------------------------------------------------------------------- */

static bool conv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!conv_common_ok(g, n))
        return false;
    const struct cp_shape *x = &cp_ref_in(g, n, 0)->shape, *w = &cp_ref_in(g, n, 1)->shape;
    const struct cp_shape *y = &cp_ref_out(g, n, 0)->shape;
    int64_t group = cp_node_attr_int(n, "group", 1);
    int64_t c = x->dims[1].value, m = w->dims[0].value;
    return c == w->dims[1].value * group && m % group == 0 && y->dims[1].value == m;
}

static enum cp_status conv_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ws = &k->in[1]->shape;
    const struct cp_shape *ys = &k->out[0]->shape;
    struct cp_ref_window win;
    cp_ref_window_forward(k->node, xs, ws, ys, &win);
    int64_t group = cp_node_attr_int(k->node, "group", 1);
    int64_t batch = xs->dims[0].value, c_in = xs->dims[1].value, m_out = ws->dims[0].value;
    int64_t cg = c_in / group, mg = m_out / group;
    int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
    int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
    int64_t taps = win.kernel[0] * win.kernel[1] * win.kernel[2];
    const float *x = k->in_data[0], *w = k->in_data[1];
    float *y = k->out_data[0];
    init_with_bias(y, bias_data(k), batch, m_out, out_plane);
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t m = 0; m < m_out; m++) {
            int64_t g = m / mg;
            float *yo = y + (n * m_out + m) * out_plane;
            for (int64_t c = 0; c < cg; c++) {
                const float *xc = x + (n * c_in + g * cg + c) * in_plane;
                const float *wc = w + (m * cg + c) * taps;
                for (int64_t t = 0; t < taps; t++) {
                    int64_t kd = t / (win.kernel[1] * win.kernel[2]);
                    int64_t kh = t / win.kernel[2] % win.kernel[1], kw = t % win.kernel[2];
                    float wv = wc[t];
                    /* input position = out * stride + off, per axis */
                    int64_t off0 = kd * win.dilation[0] - win.pad_begin[0];
                    int64_t off1 = kh * win.dilation[1] - win.pad_begin[1];
                    int64_t off2 = kw * win.dilation[2] - win.pad_begin[2];
                    int64_t d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
                    cp_ref_valid_range(win.out[0], win.stride[0], off0, win.in[0], &d_lo, &d_hi);
                    cp_ref_valid_range(win.out[1], win.stride[1], off1, win.in[1], &h_lo, &h_hi);
                    cp_ref_valid_range(win.out[2], win.stride[2], off2, win.in[2], &w_lo, &w_hi);
                    int64_t s2 = win.stride[2];
                    for (int64_t od = d_lo; od < d_hi; od++) {
                        int64_t id = od * win.stride[0] + off0;
                        for (int64_t oh = h_lo; oh < h_hi; oh++) {
                            int64_t ih = oh * win.stride[1] + off1;
                            const float *xrow = xc + (id * win.in[1] + ih) * win.in[2];
                            float *yrow = yo + (od * win.out[1] + oh) * win.out[2];
                            for (int64_t ow = w_lo; ow < w_hi; ow++)
                                yrow[ow] += wv * xrow[ow * s2 + off2];
                        }
                    }
                }
            }
        }
    }
    return CP_OK;
}

/* A Conv in a layout region (NHWC, blocked) runs on plain copies. */
static enum cp_status conv_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, conv_run);
}

CP_REF_KERNEL(cp_ref_conv, CP_OP_CONV, conv_supports, cp_ref_layout_prepare, conv_run_any_layout);

/* ---- ConvTranspose ------------------------------------------------------------------- */

/* The begin padding of a transposed convolution along spatial axis j.
 * With output_shape (or SAME auto_pad, whose output is in * stride) the
 * total padding follows from the output size and is split as the spec
 * says: SAME_UPPER puts the odd cell at the end, otherwise at the start;
 * a negative total (an output larger than the full result) pads nothing
 * and leaves the tail at the bias. */
static int64_t convt_pad_begin(const struct cp_node *n, int j, int64_t in, int64_t out,
                               int64_t kernel, int64_t stride, int64_t dilation)
{
    const char *ap = cp_node_attr_string(n, "auto_pad", "NOTSET");
    bool upper = strcmp(ap, "SAME_UPPER") == 0, lower = strcmp(ap, "SAME_LOWER") == 0;
    const struct cp_attr *os = cp_node_attr(n, "output_shape");
    if (!os && !upper && !lower) {
        const struct cp_attr *pads = cp_node_attr(n, "pads");
        bool valid = strcmp(ap, "VALID") == 0;
        return !valid && pads && pads->type == CP_ATTR_INTS && (size_t)j < pads->n ? pads->ints[j]
                                                                                   : 0;
    }
    const struct cp_attr *op = cp_node_attr(n, "output_padding");
    int64_t adj = op && op->type == CP_ATTR_INTS && (size_t)j < op->n ? op->ints[j] : 0;
    int64_t total = stride * (in - 1) + adj + (kernel - 1) * dilation + 1 - out;
    if (total < 0)
        total = 0;
    return upper ? total / 2 : total - total / 2;
}

static bool convt_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!conv_common_ok(g, n))
        return false;
    const struct cp_shape *x = &cp_ref_in(g, n, 0)->shape, *w = &cp_ref_in(g, n, 1)->shape;
    const struct cp_shape *y = &cp_ref_out(g, n, 0)->shape;
    int64_t group = cp_node_attr_int(n, "group", 1);
    int ns = x->rank - 2;
    const struct cp_attr *op = cp_node_attr(n, "output_padding");
    if (op && (op->type != CP_ATTR_INTS || op->n != (size_t)ns))
        return false;
    const struct cp_attr *os = cp_node_attr(n, "output_shape");
    if (os && (os->type != CP_ATTR_INTS || (os->n != (size_t)ns && os->n != (size_t)x->rank)))
        return false;
    return x->dims[1].value == w->dims[0].value && x->dims[1].value % group == 0 &&
           y->dims[1].value == w->dims[1].value * group;
}

static enum cp_status convt_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ws = &k->in[1]->shape;
    const struct cp_shape *ys = &k->out[0]->shape;
    /* The forward geometry gives kernel, strides and dilations; the roles of
     * in and out are then swapped and the padding recomputed. */
    struct cp_ref_window win;
    cp_ref_window_forward(k->node, xs, ws, ys, &win);
    int ns = xs->rank - 2, lead = CP_REF_MAX_SPATIAL - ns;
    for (int j = 0; j < ns; j++) {
        int a = lead + j;
        win.pad_begin[a] = convt_pad_begin(k->node, j, win.in[a], win.out[a], win.kernel[a],
                                           win.stride[a], win.dilation[a]);
    }
    int64_t group = cp_node_attr_int(k->node, "group", 1);
    int64_t batch = xs->dims[0].value, c_in = xs->dims[1].value, mg = ws->dims[1].value;
    int64_t cg = c_in / group, m_out = mg * group;
    int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
    int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
    int64_t taps = win.kernel[0] * win.kernel[1] * win.kernel[2];
    const float *x = k->in_data[0], *w = k->in_data[1];
    float *y = k->out_data[0];
    init_with_bias(y, bias_data(k), batch, m_out, out_plane);
    for (int64_t n = 0; n < batch; n++) {
        for (int64_t g = 0; g < group; g++) {
            for (int64_t c = 0; c < cg; c++) {
                const float *xc = x + (n * c_in + g * cg + c) * in_plane;
                for (int64_t m = 0; m < mg; m++) {
                    float *yo = y + (n * m_out + g * mg + m) * out_plane;
                    const float *wc = w + ((g * cg + c) * mg + m) * taps;
                    for (int64_t t = 0; t < taps; t++) {
                        int64_t kd = t / (win.kernel[1] * win.kernel[2]);
                        int64_t kh = t / win.kernel[2] % win.kernel[1], kw = t % win.kernel[2];
                        float wv = wc[t];
                        /* output position = in * stride + off, per axis */
                        int64_t off0 = kd * win.dilation[0] - win.pad_begin[0];
                        int64_t off1 = kh * win.dilation[1] - win.pad_begin[1];
                        int64_t off2 = kw * win.dilation[2] - win.pad_begin[2];
                        int64_t d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
                        cp_ref_valid_range(win.in[0], win.stride[0], off0, win.out[0], &d_lo,
                                           &d_hi);
                        cp_ref_valid_range(win.in[1], win.stride[1], off1, win.out[1], &h_lo,
                                           &h_hi);
                        cp_ref_valid_range(win.in[2], win.stride[2], off2, win.out[2], &w_lo,
                                           &w_hi);
                        int64_t s2 = win.stride[2];
                        for (int64_t id = d_lo; id < d_hi; id++) {
                            int64_t od = id * win.stride[0] + off0;
                            for (int64_t ih = h_lo; ih < h_hi; ih++) {
                                int64_t oh = ih * win.stride[1] + off1;
                                const float *xrow = xc + (id * win.in[1] + ih) * win.in[2];
                                float *yrow = yo + (od * win.out[1] + oh) * win.out[2];
                                for (int64_t iw = w_lo; iw < w_hi; iw++)
                                    yrow[iw * s2 + off2] += wv * xrow[iw];
                            }
                        }
                    }
                }
            }
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_conv_transpose, CP_OP_CONV_TRANSPOSE, convt_supports, NULL, convt_run);
