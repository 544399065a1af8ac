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

#include <stdlib.h>
#include <string.h>

#define THIN_POSITIONS 8     /* output positions (batch x spatial) at most */
#define GRAIN          32768 /* multiply-adds per thread */

struct thin_state {
    struct cp_plain_conv c;
    int64_t k;  /* weight row: cin * kh * kw */
    int64_t np; /* positions per image: oh * ow */
    int threads;
};

static bool thin_supports_common(const struct cp_graph *g, const struct cp_node *n, bool fused)
{
    struct cp_conv_geom gm;
    if (!cp_plain_conv_supports(g, n, fused, &gm) || gm.group != 1)
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *w = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    int64_t positions = y->shape.dims[0].value;
    for (int i = 2; i < y->shape.rank; i++)
        positions *= y->shape.dims[i].value;
    return positions >= 1 && positions <= THIN_POSITIONS &&
           w->shape.dims[1].value == x->shape.dims[1].value;
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
    struct thin_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    enum cp_status st = cp_plain_conv_init(k, &s->c, d);
    if (st != CP_OK) {
        free(s);
        return st;
    }
    const struct cp_plain_conv *c = &s->c;
    s->k = c->cin * c->kh * c->kw;
    s->np = c->oh * c->ow;
    s->threads = cp_fk_threads(k, c->batch * s->np * c->cout * s->k, GRAIN);
    if (s->threads > c->cout)
        s->threads = (int)c->cout;
    /* The patches: batch * np rows of k floats. */
    k->scratch_bytes = (size_t)(c->batch * s->np) * (size_t)s->k * sizeof(float);
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
    const struct cp_plain_conv *c = &s->c;
    float *dst = cols;
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t oh = 0; oh < c->oh; oh++)
            for (int64_t ow = 0; ow < c->ow; ow++) {
                int64_t iw0 = ow * c->sw - c->pw;
                /* taps [lo, hi) fall inside [0, iw) */
                int64_t lo = iw0 >= 0 ? 0 : -iw0;
                int64_t hi = c->iw - iw0 < c->kw ? c->iw - iw0 : c->kw;
                if (hi < 0)
                    hi = 0;
                if (lo > hi)
                    lo = hi;
                for (int64_t ic = 0; ic < c->cin; ic++) {
                    const float *xp = x + (n * c->cin + ic) * c->ih * c->iw;
                    for (int64_t kh = 0; kh < c->kh; kh++, dst += c->kw) {
                        int64_t ih = oh * c->sh - c->ph + kh * c->dh;
                        if (ih < 0 || ih >= c->ih) {
                            memset(dst, 0, (size_t)c->kw * sizeof *dst);
                            continue;
                        }
                        memset(dst, 0, (size_t)lo * sizeof *dst);
                        memcpy(dst + lo, xp + ih * c->iw + iw0 + lo,
                               (size_t)(hi - lo) * sizeof *dst);
                        memset(dst + hi, 0, (size_t)(c->kw - hi) * sizeof *dst);
                    }
                }
            }
}

static void gather_narrow(const struct thin_state *s, const float *x, float *cols)
{
    const struct cp_plain_conv *c = &s->c;
    int64_t P = c->batch * s->np, base[THIN_POSITIONS], ih0[THIN_POSITIONS], iw0[THIN_POSITIONS];
    for (int64_t p = 0; p < P; p++) {
        int64_t n = p / s->np, q = p % s->np;
        base[p] = n * c->cin * c->ih * c->iw;
        ih0[p] = q / c->ow * c->sh - c->ph;
        iw0[p] = q % c->ow * c->sw - c->pw;
    }
    int64_t tap = 0;
    for (int64_t ic = 0; ic < c->cin; ic++)
        for (int64_t kh = 0; kh < c->kh; kh++)
            for (int64_t kw = 0; kw < c->kw; kw++, tap++)
                for (int64_t p = 0; p < P; p++) {
                    int64_t ih = ih0[p] + kh * c->dh, iw = iw0[p] + kw * c->dw;
                    bool in = ih >= 0 && ih < c->ih && iw >= 0 && iw < c->iw;
                    cols[p * s->k + tap] = in ? x[base[p] + (ic * c->ih + ih) * c->iw + iw] : 0.0f;
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
CP_FK_HOT static void channels(const struct thin_state *s, const float *w, const float *bias,
                               const float *cols, const float *r, float *y, int64_t lo, int64_t hi)
{
    const struct cp_plain_conv *c = &s->c;
    float acc[THIN_POSITIONS];
    for (int64_t oc = lo; oc < hi; oc++) {
        const float *row = w + oc * s->k;
        for (int64_t n = 0; n < c->batch; n++) {
            int64_t at = (n * c->cout + oc) * s->np;
            thin_dots(row, cols + n * s->np * s->k, s->k, s->np, acc);
            for (int64_t p = 0; bias && p < s->np; p++)
                acc[p] += bias[oc];
            cp_plain_conv_finish(c, acc, r ? r + at : NULL, y + at, s->np);
        }
    }
}

static enum cp_status thin_run(struct cp_kexec *k)
{
    const struct thin_state *s = k->state;
    const struct cp_plain_conv *c = &s->c;
    const float *w = k->in_data[1];
    const float *b = k->node->n_inputs > 2 ? k->in_data[2] : NULL;
    const float *r = c->residual ? k->in_data[3] : NULL;
    float *cols = k->scratch;
    if (c->kw >= 16 && c->dw == 1)
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
        cp_fk_split(c->cout, 1, &lo, &hi);
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
