/*
 * Depthwise Conv and FusedConv (group == input channels, any channel
 * multiplier) on plain NCHW / NCW tensors, 1-D and 2-D, in vectorised C.
 *
 * Why: oneDNN 2.6 has jit depthwise kernels only for blocked and NHWC
 * sources; on plain ones it falls back to its gemm-based convolution, one
 * tiny gemm per group. Silero VAD's 258-channel 5-tap 1-D filter over 8
 * frames took 90 us that way, as much as the rest of the model; the direct
 * loop below takes a few. Plain tensors reach convolutions in 1-D models
 * (which the layout pass leaves alone), in If/Loop bodies, and under
 * layout_policy nchw.
 *
 * Each output plane (one image, one output channel) is computed whole by
 * one thread: the bias first, then per output row, per kernel tap, one
 * contiguous (stride 1) or strided run over the output columns whose input
 * column is inside the image, so padding costs no test in the inner loop.
 * The fused activation and residual follow on the plane while it is in L1,
 * in the order residual_first says; the residual may share the output's
 * buffer (memplan.c), so the plane is accumulated in the kernel's scratch
 * then.
 */
#include "runner/cpu/conv_geom.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/fused_act.h"
#include "runner/cpu/layout.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GRAIN 32768 /* multiply-adds per thread */

struct dw_state {
    int64_t batch, cin, cout, mult; /* mult: output channels per input channel */
    int64_t ih, iw, oh, ow, kh, kw;
    int64_t sh, sw, dh, dw, ph, pw; /* dh, dw: full dilations */
    struct cp_act act;
    bool residual, res_first;
    int threads;
};

static bool dw_supports_common(const struct cp_graph *g, const struct cp_node *n, bool fused)
{
    size_t max_in = fused ? 4 : 3;
    if (n->n_inputs < 2 || n->n_inputs > max_in || n->n_outputs != 1 ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) ||
        strcmp(cp_node_attr_string(n, "compute_precision", "fp32"), "fp32") != 0)
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *w = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    const struct cp_tensor *b = cp_fk_in(g, n, 2), *r = fused ? cp_fk_in(g, n, 3) : NULL;
    int rank = x->shape.rank;
    if ((rank != 3 && rank != 4) || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) ||
        !cp_tensor_is_plain(w))
        return false;
    struct cp_conv_geom gm;
    if (!cp_conv_geom(n, x, w, y, false, &gm))
        return false;
    int64_t C = x->shape.dims[1].value, M = y->shape.dims[1].value;
    if (gm.group != C || C < 2 || M % C || w->shape.dims[0].value != M ||
        w->shape.dims[1].value != 1 || x->shape.dims[0].value != y->shape.dims[0].value)
        return false;
    if (b && (b->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&b->shape) ||
              cp_shape_numel(&b->shape) != M))
        return false;
    if (fused && cp_act_of(n).kind == CP_ACT_BAD)
        return false;
    return !r || (r->dtype == CP_DTYPE_F32 && cp_tensor_is_plain(r) &&
                  cp_shape_equal(&r->shape, &y->shape));
}

static bool dw_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return dw_supports_common(g, n, false);
}

static bool fdw_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return dw_supports_common(g, n, true);
}

static enum cp_status dw_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    const struct cp_tensor *x = k->in[0], *w = k->in[1], *y = k->out[0];
    struct cp_conv_geom gm;
    if (!cp_conv_geom(k->node, x, w, y, false, &gm))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': convolution geometry unsupported",
                           k->node->name);
    struct dw_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    bool two = gm.ns == 2; /* 1-D runs as one row */
    s->batch = x->shape.dims[0].value;
    s->cin = x->shape.dims[1].value;
    s->cout = y->shape.dims[1].value;
    s->mult = s->cout / s->cin;
    s->ih = two ? x->shape.dims[2].value : 1;
    s->iw = x->shape.dims[two ? 3 : 2].value;
    s->oh = two ? y->shape.dims[2].value : 1;
    s->ow = y->shape.dims[two ? 3 : 2].value;
    s->kh = two ? w->shape.dims[2].value : 1;
    s->kw = w->shape.dims[two ? 3 : 2].value;
    s->sh = two ? gm.strides[0] : 1;
    s->dh = two ? gm.dil[0] + 1 : 1;
    s->ph = two ? gm.pl[0] : 0;
    s->sw = gm.strides[gm.ns - 1];
    s->dw = gm.dil[gm.ns - 1] + 1;
    s->pw = gm.pl[gm.ns - 1];
    s->act = k->node->op == CP_OP_FUSED_CONV ? cp_act_of(k->node) : (struct cp_act){0};
    s->residual = k->node->n_inputs > 3 && k->in[3];
    s->res_first = cp_node_attr_int(k->node, "residual_first", 0) != 0;
    int64_t planes = s->batch * s->cout;
    s->threads = cp_fk_threads(k, planes * s->oh * s->ow * s->kh * s->kw, GRAIN);
    if (s->threads > planes)
        s->threads = (int)planes;
    if (s->residual)
        k->scratch_bytes = (size_t)s->threads * (size_t)(s->oh * s->ow) * sizeof(float);
    k->state = s;
    return CP_OK;
}

/* The output columns [*lo, *hi) whose input column ow * sw + off lies in
 * [0, iw). */
static void col_range(int64_t off, int64_t sw, int64_t iw, int64_t ow, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t h = iw - 1 - off < 0 ? 0 : (iw - 1 - off) / sw + 1;
    *lo = l;
    *hi = h < ow ? h : ow;
    if (*hi < *lo)
        *hi = *lo;
}

/* acc (oh x ow) = bias + the taps w (kh x kw) over the input plane x. */
CP_FK_HOT static void dw_plane(const struct dw_state *s, const float *x, const float *w, float bias,
                               float *acc)
{
    int64_t np = s->oh * s->ow;
    for (int64_t i = 0; i < np; i++)
        acc[i] = bias;
    for (int64_t oh = 0; oh < s->oh; oh++) {
        float *ar = acc + oh * s->ow;
        for (int64_t kh = 0; kh < s->kh; kh++) {
            int64_t ih = oh * s->sh - s->ph + kh * s->dh;
            if (ih < 0 || ih >= s->ih)
                continue;
            const float *xr = x + ih * s->iw;
            for (int64_t kw = 0; kw < s->kw; kw++) {
                float wv = w[kh * s->kw + kw];
                int64_t off = kw * s->dw - s->pw, lo, hi;
                col_range(off, s->sw, s->iw, s->ow, &lo, &hi);
                if (s->sw == 1) {
                    const float *xo = xr + off;
                    for (int64_t o = lo; o < hi; o++)
                        ar[o] += wv * xo[o];
                } else {
                    for (int64_t o = lo; o < hi; o++)
                        ar[o] += wv * xr[o * s->sw + off];
                }
            }
        }
    }
}

/* y = act(acc [+ r]) [+ r], in the order residual_first says. */
CP_FK_HOT static void dw_finish(const struct dw_state *s, float *acc, const float *r, float *y,
                                int64_t n)
{
    if (r && s->res_first)
        for (int64_t i = 0; i < n; i++)
            acc[i] += r[i];
    cp_act_row(&s->act, acc, n);
    if (r && !s->res_first)
        for (int64_t i = 0; i < n; i++)
            acc[i] += r[i];
    if (acc != y)
        memcpy(y, acc, (size_t)n * sizeof *y);
}

static enum cp_status dw_run(struct cp_kexec *k)
{
    const struct dw_state *s = k->state;
    const float *x = k->in_data[0], *w = k->in_data[1];
    const float *b = k->node->n_inputs > 2 ? k->in_data[2] : NULL;
    const float *r = s->residual ? k->in_data[3] : NULL;
    float *y = k->out_data[0];
    int64_t planes = s->batch * s->cout, np = s->oh * s->ow, ktaps = s->kh * s->kw;
    int nt = s->threads;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t p = 0; p < planes; p++) {
        int64_t n = p / s->cout, oc = p % s->cout, ic = oc / s->mult;
        float *out = y + p * np;
        float *acc = r ? (float *)k->scratch + (size_t)omp_get_thread_num() * (size_t)np : out;
        dw_plane(s, x + (n * s->cin + ic) * s->ih * s->iw, w + oc * ktaps, b ? b[oc] : 0.0f, acc);
        if (r || s->act.kind != CP_ACT_NONE)
            dw_finish(s, acc, r ? r + p * np : NULL, out, np);
    }
    return CP_OK;
}

static void dw_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_dw_conv = {
    "c:depthwise_conv", CP_OP_CONV, dw_supports, dw_prepare, dw_run, dw_release, NULL};
const struct cp_kernel cp_fast_dw_fused_conv = {
    "c:depthwise_fused_conv", CP_OP_FUSED_CONV, fdw_supports, dw_prepare, dw_run, dw_release, NULL};
