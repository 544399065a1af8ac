/*
 * Conv and FusedConv (group 1) on plain NCW / NCHW tensors whose output has
 * few positions: at most THIN_POSITIONS (batch x spatial) per output
 * channel, in vectorised C.
 *
 * Why: with so few positions a convolution is a matrix-vector product, and
 * its time is reading the weights. oneDNN 2.6 runs plain tensors through
 * im2col and a gemm (x64:gemm:jit) with a fixed cost per call that is
 * larger than the product itself: Silero VAD v5's STFT filter (258 output
 * channels, 256 taps, 3 frames) took 34 us that way and its 129-channel
 * 3-tap encoder convolution 28 us, most of the model. Here the input
 * patches are gathered once into a small matrix (zeros where the window
 * runs into the padding), then each thread takes a fixed block of output
 * channels and streams their weight rows once, taking each row's dot
 * product with every patch while the row is in L1. Fixed blocks mean a
 * thread reads the same rows every run, so at two threads the weights of
 * a small model stay in the two cores' L2 caches.
 *
 * Bias, the fused activation and the residual follow on the output row,
 * in the order residual_first says, as in the depthwise kernel
 * (fast_conv.c).
 */
#include "runner/cpu/conv_geom.h"
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/fused_act.h"
#include "runner/cpu/layout.h"

#include <stdlib.h>
#include <string.h>

#define THIN_POSITIONS 8     /* output positions (batch x spatial) at most */
#define GRAIN          32768 /* multiply-adds per thread */

struct thin_state {
    int64_t batch, cin, cout;
    int64_t ih, iw, oh, ow, kh, kw;
    int64_t sh, sw, dh, dw, ph, pw; /* dh, dw: full dilations */
    int64_t k;                      /* weight row: cin * kh * kw */
    int64_t np;                     /* positions per image: oh * ow */
    struct cp_act act;
    bool residual, res_first;
    int threads;
};

static bool thin_supports_common(const struct cp_graph *g, const struct cp_node *n, bool fused)
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
        !cp_tensor_is_plain(w) || w->shape.rank != rank)
        return false;
    struct cp_conv_geom gm;
    if (!cp_conv_geom(n, x, w, y, false, &gm) || gm.group != 1)
        return false;
    int64_t positions =
        y->shape.dims[0].value * y->shape.dims[2].value * (rank == 4 ? y->shape.dims[3].value : 1);
    int64_t M = y->shape.dims[1].value;
    if (positions < 1 || positions > THIN_POSITIONS || M < 1 || w->shape.dims[0].value != M ||
        w->shape.dims[1].value != x->shape.dims[1].value ||
        x->shape.dims[0].value != y->shape.dims[0].value)
        return false;
    if (b && (b->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&b->shape) ||
              cp_shape_numel(&b->shape) != M))
        return false;
    if (fused && cp_act_of(n).kind == CP_ACT_BAD)
        return false;
    return !r || (r->dtype == CP_DTYPE_F32 && cp_tensor_is_plain(r) &&
                  cp_shape_equal(&r->shape, &y->shape));
}

static bool thin_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return thin_supports_common(g, n, false);
}

static bool fthin_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return thin_supports_common(g, n, true);
}

static enum cp_status thin_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    const struct cp_tensor *x = k->in[0], *w = k->in[1], *y = k->out[0];
    struct cp_conv_geom gm;
    if (!cp_conv_geom(k->node, x, w, y, false, &gm))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': convolution geometry unsupported",
                           k->node->name);
    struct thin_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    bool two = gm.ns == 2; /* 1-D runs as one row */
    s->batch = x->shape.dims[0].value;
    s->cin = x->shape.dims[1].value;
    s->cout = y->shape.dims[1].value;
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
    s->k = s->cin * s->kh * s->kw;
    s->np = s->oh * s->ow;
    s->act = k->node->op == CP_OP_FUSED_CONV ? cp_act_of(k->node) : (struct cp_act){0};
    s->residual = k->node->n_inputs > 3 && k->in[3];
    s->res_first = cp_node_attr_int(k->node, "residual_first", 0) != 0;
    s->threads = cp_fk_threads(k, s->batch * s->np * s->cout * s->k, GRAIN);
    if (s->threads > s->cout)
        s->threads = (int)s->cout;
    /* The patches: batch * np rows of k floats. */
    k->scratch_bytes = (size_t)(s->batch * s->np) * (size_t)s->k * sizeof(float);
    k->state = s;
    return CP_OK;
}

/* Gather every output position's input window into cols (one row of k
 * floats per position, in the weights' [cin, kh, kw] order), zeros where
 * the window runs into the padding.
 *
 * Wide kernels (Silero's 256-tap STFT filter): per position and input
 * row, the taps inside the image are one contiguous run, copied whole.
 * Narrow ones (1x1, 3x3): per tap, every position; a per-row copy would
 * cost a call per element there. */
static void gather_wide(const struct thin_state *s, const float *x, float *cols)
{
    float *c = cols;
    for (int64_t n = 0; n < s->batch; n++)
        for (int64_t oh = 0; oh < s->oh; oh++)
            for (int64_t ow = 0; ow < s->ow; ow++) {
                int64_t iw0 = ow * s->sw - s->pw;
                /* taps [lo, hi) fall inside [0, iw) */
                int64_t lo = iw0 >= 0 ? 0 : -iw0;
                int64_t hi = s->iw - iw0 < s->kw ? s->iw - iw0 : s->kw;
                if (hi < 0)
                    hi = 0;
                if (lo > hi)
                    lo = hi;
                for (int64_t ic = 0; ic < s->cin; ic++) {
                    const float *xp = x + (n * s->cin + ic) * s->ih * s->iw;
                    for (int64_t kh = 0; kh < s->kh; kh++, c += s->kw) {
                        int64_t ih = oh * s->sh - s->ph + kh * s->dh;
                        if (ih < 0 || ih >= s->ih) {
                            memset(c, 0, (size_t)s->kw * sizeof *c);
                            continue;
                        }
                        memset(c, 0, (size_t)lo * sizeof *c);
                        memcpy(c + lo, xp + ih * s->iw + iw0 + lo, (size_t)(hi - lo) * sizeof *c);
                        memset(c + hi, 0, (size_t)(s->kw - hi) * sizeof *c);
                    }
                }
            }
}

static void gather_narrow(const struct thin_state *s, const float *x, float *cols)
{
    int64_t P = s->batch * s->np, base[THIN_POSITIONS], ih0[THIN_POSITIONS], iw0[THIN_POSITIONS];
    for (int64_t p = 0; p < P; p++) {
        int64_t n = p / s->np, q = p % s->np;
        base[p] = n * s->cin * s->ih * s->iw;
        ih0[p] = q / s->ow * s->sh - s->ph;
        iw0[p] = q % s->ow * s->sw - s->pw;
    }
    int64_t tap = 0;
    for (int64_t ic = 0; ic < s->cin; ic++)
        for (int64_t kh = 0; kh < s->kh; kh++)
            for (int64_t kw = 0; kw < s->kw; kw++, tap++)
                for (int64_t p = 0; p < P; p++) {
                    int64_t ih = ih0[p] + kh * s->dh, iw = iw0[p] + kw * s->dw;
                    bool in = ih >= 0 && ih < s->ih && iw >= 0 && iw < s->iw;
                    cols[p * s->k + tap] = in ? x[base[p] + (ic * s->ih + ih) * s->iw + iw] : 0.0f;
                }
}

/* out[p] = row . cols[p] for the np patches (k floats apart), four at a
 * time so that each stretch of the row is loaded once for four of them. */
CP_FK_HOT static void thin_dots(const float *row, const float *cols, int64_t k, int64_t np,
                                float *out)
{
    int64_t p = 0;
    for (; p + 4 <= np; p += 4) {
        const float *c0 = cols + p * k, *c1 = c0 + k, *c2 = c1 + k, *c3 = c2 + k;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
        for (int64_t i = 0; i < k; i++) {
            float w = row[i];
            a0 += w * c0[i];
            a1 += w * c1[i];
            a2 += w * c2[i];
            a3 += w * c3[i];
        }
        out[p] = a0;
        out[p + 1] = a1;
        out[p + 2] = a2;
        out[p + 3] = a3;
    }
    for (; p < np; p++) {
        const float *c = cols + p * k;
        float a = 0.0f;
#pragma omp simd reduction(+ : a)
        for (int64_t i = 0; i < k; i++)
            a += row[i] * c[i];
        out[p] = a;
    }
}

/* Output channels [lo, hi): each weight row against every patch. */
static void channels(const struct thin_state *s, const float *w, const float *bias,
                     const float *cols, const float *r, float *y, int64_t lo, int64_t hi)
{
    float acc[THIN_POSITIONS];
    for (int64_t oc = lo; oc < hi; oc++) {
        const float *row = w + oc * s->k;
        for (int64_t n = 0; n < s->batch; n++) {
            int64_t at = (n * s->cout + oc) * s->np;
            thin_dots(row, cols + n * s->np * s->k, s->k, s->np, acc);
            for (int64_t p = 0; bias && p < s->np; p++)
                acc[p] += bias[oc];
            if (r && s->res_first)
                for (int64_t p = 0; p < s->np; p++)
                    acc[p] += r[at + p];
            cp_act_row(&s->act, acc, s->np);
            if (r && !s->res_first)
                for (int64_t p = 0; p < s->np; p++)
                    acc[p] += r[at + p];
            memcpy(y + at, acc, (size_t)s->np * sizeof *acc);
        }
    }
}

static enum cp_status thin_run(struct cp_kexec *k)
{
    const struct thin_state *s = k->state;
    const float *w = k->in_data[1];
    const float *b = k->node->n_inputs > 2 ? k->in_data[2] : NULL;
    const float *r = s->residual ? k->in_data[3] : NULL;
    float *cols = k->scratch;
    if (s->kw >= 16 && s->dw == 1)
        gather_wide(s, k->in_data[0], cols);
    else
        gather_narrow(s, k->in_data[0], cols);
    int nt = s->threads;
    /* Fixed contiguous blocks of output channels: the same rows per
     * thread every run. The residual may share y's buffer (memplan.c):
     * each output element is read from it before it is written. */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t lo, hi;
        cp_fk_split(s->cout, 1, &lo, &hi);
        channels(s, w, b, cols, r, k->out_data[0], lo, hi);
    }
    return CP_OK;
}

static void thin_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_thin_conv = {
    "c:thin_conv", CP_OP_CONV, thin_supports, thin_prepare, thin_run, thin_release, NULL};
const struct cp_kernel cp_fast_thin_fused_conv = {"c:thin_fused_conv",
                                                  CP_OP_FUSED_CONV,
                                                  fthin_supports,
                                                  thin_prepare,
                                                  thin_run,
                                                  thin_release,
                                                  NULL};
