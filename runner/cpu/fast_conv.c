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

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GRAIN 32768 /* multiply-adds per thread */

struct dw_state {
    struct cp_plain_conv c;
    int64_t mult; /* output channels per input channel */
    int threads;
};

static bool dw_supports_common(const struct cp_graph *g, const struct cp_node *n, bool fused)
{
    struct cp_conv_geom gm;
    if (!cp_plain_conv_supports(g, n, fused, &gm))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *w = cp_fk_in(g, n, 1);
    int64_t C = x->shape.dims[1].value, M = w->shape.dims[0].value;
    return gm.group == C && C >= 2 && M % C == 0 && w->shape.dims[1].value == 1;
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
    struct dw_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    enum cp_status st = cp_plain_conv_init(k, &s->c, d);
    if (st != CP_OK) {
        free(s);
        return st;
    }
    const struct cp_plain_conv *c = &s->c;
    s->mult = c->cout / c->cin;
    int64_t planes = c->batch * c->cout;
    s->threads = cp_fk_threads(k, planes * c->oh * c->ow * c->kh * c->kw, GRAIN);
    if (s->threads > planes)
        s->threads = (int)planes;
    if (c->residual)
        k->scratch_bytes = (size_t)s->threads * (size_t)(c->oh * c->ow) * sizeof(float);
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
CP_FK_HOT static void dw_plane(const struct cp_plain_conv *c, const float *x, const float *w,
                               float bias, float *acc)
{
    int64_t np = c->oh * c->ow;
    for (int64_t i = 0; i < np; i++)
        acc[i] = bias;
    for (int64_t oh = 0; oh < c->oh; oh++) {
        float *ar = acc + oh * c->ow;
        for (int64_t kh = 0; kh < c->kh; kh++) {
            int64_t ih = oh * c->sh - c->ph + kh * c->dh;
            if (ih < 0 || ih >= c->ih)
                continue;
            const float *xr = x + ih * c->iw;
            for (int64_t kw = 0; kw < c->kw; kw++) {
                float wv = w[kh * c->kw + kw];
                int64_t off = kw * c->dw - c->pw, lo, hi;
                col_range(off, c->sw, c->iw, c->ow, &lo, &hi);
                if (c->sw == 1) {
                    const float *xo = xr + off;
                    for (int64_t o = lo; o < hi; o++)
                        ar[o] += wv * xo[o];
                } else {
                    for (int64_t o = lo; o < hi; o++)
                        ar[o] += wv * xr[o * c->sw + off];
                }
            }
        }
    }
}

/* The epilogue, compiled per ISA clone like the plane. */
CP_FK_HOT static void dw_finish(const struct cp_plain_conv *c, float *acc, const float *r, float *y,
                                int64_t n)
{
    cp_plain_conv_finish(c, acc, r, y, n);
}

static enum cp_status dw_run(struct cp_kexec *k)
{
    const struct dw_state *s = k->state;
    const struct cp_plain_conv *c = &s->c;
    const float *x = k->in_data[0], *w = k->in_data[1];
    const float *b = k->node->n_inputs > 2 ? k->in_data[2] : NULL;
    const float *r = c->residual ? k->in_data[3] : NULL;
    float *y = k->out_data[0];
    int64_t planes = c->batch * c->cout, np = c->oh * c->ow, ktaps = c->kh * c->kw;
    int nt = s->threads;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t p = 0; p < planes; p++) {
        int64_t n = p / c->cout, oc = p % c->cout, ic = oc / s->mult;
        float *out = y + p * np;
        float *acc = r ? (float *)k->scratch + (size_t)omp_get_thread_num() * (size_t)np : out;
        dw_plane(c, x + (n * c->cin + ic) * c->ih * c->iw, w + oc * ktaps, b ? b[oc] : 0.0f, acc);
        if (r || c->act.kind != CP_ACT_NONE)
            dw_finish(c, acc, r ? r + p * np : NULL, out, np);
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
