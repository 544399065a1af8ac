/*
 * GroupNormalization (graph.h) and Gelu in vectorised C with OpenMP.
 *
 * GroupNormalization reads NCHW (or untagged), NHWC and blocked (nChw8c,
 * nChw16c) tensors in place:
 *  - NCHW: each (n, group) is one contiguous block; threads take whole
 *    blocks, and each block is read three times (mean, variance, output),
 *    the last pass one channel row at a time so the fused activation runs
 *    on data still in L1.
 *  - NHWC and blocked: channels are interleaved within each pixel (one
 *    slab of C lanes, or C/B slabs of B lanes); threads split the pixels of
 *    each image, keep per-channel partial sums in the kernel's scratch (run
 *    allocates nothing), and the partial sums are added in thread order so
 *    results do not depend on timing.
 * Both compute the mean first and then the sum of squared deviations
 * (no E[x^2] - E[x]^2 cancellation), accumulating in double per row.
 *
 * Gelu: 0.5 x (1 + erf(x / sqrt2)) or the tanh form, with the branch-free
 * erf and exp of fast_math.h, so the loops vectorise.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/fused_act.h"
#include "runner/cpu/layout.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GRAIN 16384

struct gn_state {
    int64_t batch, c, sp, groups;
    float eps;
    int64_t block; /* channel-interleaved: lanes per slab (C for NHWC, 8 or 16); 0 for NCHW */
    struct cp_act act;
};

static bool gn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 3 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 2, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) || cp_act_of(n).kind == CP_ACT_BAD)
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    int64_t groups = cp_node_attr_int(n, "num_groups", 0);
    if (x->shape.rank < 2 || groups < 1 || !cp_shape_equal(&x->shape, &y->shape))
        return false;
    int64_t c = x->shape.dims[1].value;
    if (c % groups || cp_shape_numel(&cp_fk_in(g, n, 1)->shape) != c ||
        cp_shape_numel(&cp_fk_in(g, n, 2)->shape) != c)
        return false;
    if (cp_tensor_is_plain(x))
        return cp_tensor_is_plain(y);
    return x->shape.rank == 4 && y->layout == x->layout && cp_layout_fits(x->layout, &x->shape) &&
           (x->layout == CP_LAYOUT_NHWC || cp_layout_block(x->layout) > 0);
}

static enum cp_status gn_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct gn_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_shape *xs = &k->in[0]->shape;
    s->batch = xs->dims[0].value;
    s->c = xs->dims[1].value;
    s->sp = 1;
    for (int i = 2; i < xs->rank; i++)
        s->sp *= xs->dims[i].value;
    s->groups = cp_node_attr_int(k->node, "num_groups", 1);
    s->eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    enum cp_layout l = k->in[0]->layout;
    s->block = l == CP_LAYOUT_NHWC ? s->c : cp_tensor_is_plain(k->in[0]) ? 0 : cp_layout_block(l);
    s->act = cp_act_of(k->node);
    k->state = s;
    if (s->block) { /* per-thread channel sums, group stats, then mean, a, b per channel */
        int nt = k->env && k->env->threads > 0 ? k->env->threads : 1;
        k->scratch_bytes = (size_t)nt * (size_t)s->c * sizeof(double) +
                           (size_t)s->groups * 2 * sizeof(double) +
                           3 * (size_t)nt * (size_t)s->c * sizeof(float);
    }
    return CP_OK;
}

CP_FK_HOT static double row_sum(const float *x, int64_t n)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++)
            acc[j] += x[i + j];
    double s = 0.0;
    for (int j = 0; j < 16; j++)
        s += acc[j];
    for (; i < n; i++)
        s += x[i];
    return s;
}

CP_FK_HOT static double row_sq_dev(const float *x, int64_t n, float mean)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            float dv = x[i + j] - mean;
            acc[j] += dv * dv;
        }
    double s = 0.0;
    for (int j = 0; j < 16; j++)
        s += acc[j];
    for (; i < n; i++) {
        double dv = (double)x[i] - mean;
        s += dv * dv;
    }
    return s;
}

CP_FK_HOT static void row_affine(const float *x, float *y, int64_t n, float a, float b)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * a + b;
}

CP_FK_HOT static void act_row(const struct cp_act *a, float *y, int64_t n)
{
    cp_act_row(a, y, n);
}

static void gn_nchw(const struct cp_kexec *k, const struct gn_state *s)
{
    const float *x = k->in_data[0], *scale = k->in_data[1], *bias = k->in_data[2];
    float *y = k->out_data[0];
    int64_t cg = s->c / s->groups, blocks = s->batch * s->groups, len = cg * s->sp;
    int nt = cp_fk_threads(k, blocks * len, GRAIN);
    if (nt > blocks)
        nt = (int)blocks;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t b = 0; b < blocks; b++) {
        const float *xb = x + b * len;
        float *yb = y + b * len;
        float mean = (float)(row_sum(xb, len) / (double)len);
        double var = row_sq_dev(xb, len, mean) / (double)len;
        float inv = (float)(1.0 / sqrt(var + s->eps));
        int64_t c0 = (b % s->groups) * cg;
        for (int64_t ch = 0; ch < cg; ch++) {
            float a = inv * scale[c0 + ch];
            row_affine(xb + ch * s->sp, yb + ch * s->sp, s->sp, a, bias[c0 + ch] - mean * a);
            act_row(&s->act, yb + ch * s->sp, s->sp);
        }
    }
}

/* Channel-interleaved layouts: NHWC is one slab [S][C]; nChw8c/16c are
 * C/B slabs [S][B]. Element (slab cb, pixel s, lane j) is channel cb*B + j
 * at ((n*CB + cb)*S + s)*B + j. Sums are kept per channel (the inner loops
 * then run over contiguous lanes) and folded into groups afterwards.
 *
 * Lanes are taken 16 at a time; each lane sums up to SLAB_RUN pixels in
 * float (as the NCHW path's row_sum keeps 16 float partial sums of up to
 * a few thousand values), then adds that into its double total. */
#define SLAB_RUN 256

/* out[j] += sum over `np` pixels (stride B) of row[j] (or (row[j] - m[j])^2
 * when m), for j < W, W <= 16. */
CP_FK_HOT static void lane_sums(const float *x, int64_t B, int64_t np, int64_t W, const float *m,
                                double *out)
{
    for (int64_t p0 = 0; p0 < np; p0 += SLAB_RUN) {
        int64_t p1 = p0 + SLAB_RUN < np ? p0 + SLAB_RUN : np;
        float acc[16] = {0};
        if (W == 16 && m) {
            for (int64_t p = p0; p < p1; p++)
                for (int j = 0; j < 16; j++) {
                    float dv = x[p * B + j] - m[j];
                    acc[j] += dv * dv;
                }
        } else if (W == 16) {
            for (int64_t p = p0; p < p1; p++)
                for (int j = 0; j < 16; j++)
                    acc[j] += x[p * B + j];
        } else {
            for (int64_t p = p0; p < p1; p++)
                for (int64_t j = 0; j < W; j++) {
                    float v = m ? (x[p * B + j] - m[j]) * (x[p * B + j] - m[j]) : x[p * B + j];
                    acc[j] += v;
                }
        }
        for (int64_t j = 0; j < W; j++)
            out[j] += acc[j];
    }
}

static void slab_sums(const float *x, const struct gn_state *s, int64_t p0, int64_t p1,
                      const float *mean, double *out)
{
    int64_t B = s->block, CB = s->c / B;
    for (int64_t c = 0; c < s->c; c++)
        out[c] = 0.0;
    for (int64_t cb = 0; cb < CB; cb++)
        for (int64_t j0 = 0; j0 < B; j0 += 16) {
            int64_t W = B - j0 < 16 ? B - j0 : 16;
            lane_sums(x + (cb * s->sp + p0) * B + j0, B, p1 - p0, W,
                      mean ? mean + cb * B + j0 : NULL, out + cb * B + j0);
        }
}

/* y = x * a[lane] + b[lane] over np pixels of B lanes, then the
 * activation over the whole span. */
/* 16 floats as one vector (a zmm, or two ymm in the AVX2 clone), loaded
 * and stored unaligned. */
typedef float gn_v16 __attribute__((vector_size(64), aligned(4)));

CP_FK_HOT static void slab_affine(const float *x, float *y, int64_t np, int64_t B, const float *a,
                                  const float *b, const struct cp_act *act)
{
    if (B == 16) {
        /* written with vectors: GCC vectorised the lane loop across pixels
         * with permutes */
        gn_v16 av, bv;
        memcpy(&av, a, sizeof av);
        memcpy(&bv, b, sizeof bv);
        for (int64_t p = 0; p < np; p++) {
            gn_v16 v;
            memcpy(&v, x + p * 16, sizeof v);
            v = v * av + bv;
            memcpy(y + p * 16, &v, sizeof v);
        }
    } else {
        for (int64_t p = 0; p < np; p++)
            for (int64_t j = 0; j < B; j++)
                y[p * B + j] = x[p * B + j] * a[j] + b[j];
    }
    cp_act_row(act, y, np * B);
}

/* Per-channel partial sums of the team's threads folded into groups, in
 * thread order: pass 0 gives each group's mean (and mean[] per channel),
 * pass 1 its 1 / std. */
static void fold_groups(const struct gn_state *s, const double *part, int nt, int pass,
                        double *gstat, float *mean)
{
    int64_t G = s->groups, C = s->c, cg = C / G;
    double cnt = (double)(cg * s->sp);
    for (int64_t g = 0; g < G; g++) {
        double sum = 0.0;
        for (int t = 0; t < nt; t++)
            for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                sum += part[(size_t)t * C + c];
        if (pass == 0)
            gstat[g] = sum / cnt;
        else
            gstat[G + g] = 1.0 / sqrt(sum / cnt + s->eps);
    }
    for (int64_t c = 0; pass == 0 && c < C; c++)
        mean[c] = (float)gstat[c / cg];
}

/* One parallel region per image: the pixels are split over the threads for
 * the two sums and the output, with the folds in between done by one
 * thread (barriers, not three regions: on the 2-core machine each region
 * cost a few microseconds, as much as a 16x32x32 slab's sums). */
static void gn_slabs(const struct cp_kexec *k, const struct gn_state *s)
{
    const float *scale = k->in_data[1], *bias = k->in_data[2];
    int64_t G = s->groups, C = s->c, cg = C / G, B = s->block, CB = C / B;
    int maxt = k->env && k->env->threads > 0 ? k->env->threads : 1;
    double *part = k->scratch, *gstat = part + (size_t)maxt * C;
    float *mean = (float *)(gstat + 2 * G), *av = mean + C, *bv = av + C;
    int nt = cp_fk_threads(k, s->sp * C, GRAIN);
    for (int64_t n = 0; n < s->batch; n++) {
        const float *x = (const float *)k->in_data[0] + n * s->sp * C;
        float *y = (float *)k->out_data[0] + n * s->sp * C;
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int t = omp_get_thread_num(), team = omp_get_num_threads();
            int64_t p0, p1;
            cp_fk_split(s->sp, 1, &p0, &p1);
            double *mine = part + (size_t)t * C;
            slab_sums(x, s, p0, p1, NULL, mine);
#pragma omp barrier
#pragma omp single
            fold_groups(s, part, team, 0, gstat, mean);
            slab_sums(x, s, p0, p1, mean, mine);
#pragma omp barrier
#pragma omp single
            {
                fold_groups(s, part, team, 1, gstat, mean);
                for (int64_t c = 0; c < C; c++) {
                    int64_t g = c / cg;
                    av[c] = (float)(gstat[G + g] * scale[c]);
                    bv[c] = (float)(bias[c] - gstat[g] * gstat[G + g] * scale[c]);
                }
            }
            for (int64_t cb = 0; cb < CB && p1 > p0; cb++) {
                int64_t o = (cb * s->sp + p0) * B;
                slab_affine(x + o, y + o, p1 - p0, B, av + cb * B, bv + cb * B, &s->act);
            }
        }
    }
}

/* Blocked layouts whose groups do not straddle slabs apart from whole
 * ones (B a multiple of the group's channels, or the other way round):
 * the slabs split into independent units, one or more whole groups each,
 * and every thread normalises its units from start to end with no sums
 * shared between threads, so no barriers (the pixel split of gn_slabs
 * needs three per image). Units of `span` slabs. */
static bool gn_units(const struct gn_state *s, int64_t *span)
{
    int64_t cg = s->c / s->groups, B = s->block;
    if (B == s->c) /* NHWC: a single slab */
        return false;
    if (B % cg == 0)
        *span = 1;
    else if (cg % B == 0)
        *span = cg / B;
    else
        return false;
    return true;
}

static void gn_blocks(const struct cp_kexec *k, const struct gn_state *s, int64_t span)
{
    const float *scale = k->in_data[1], *bias = k->in_data[2];
    int64_t C = s->c, cg = C / s->groups, B = s->block, CB = C / B;
    int64_t units = s->batch * (CB / span), W = span * B; /* channels per unit */
    int maxt = k->env && k->env->threads > 0 ? k->env->threads : 1;
    int nt = cp_fk_threads(k, s->sp * C * s->batch, GRAIN);
    if (nt > units)
        nt = (int)units;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* per thread: channel sums (double), then mean, a, b (float) */
        int t = omp_get_thread_num();
        double *sum = (double *)k->scratch + (size_t)t * (size_t)C;
        float *mean =
            (float *)((double *)k->scratch + (size_t)maxt * (size_t)C) + (size_t)t * 3 * (size_t)C;
        float *av = mean + C, *bv = av + C;
        int64_t u0, u1;
        cp_fk_split(units, 1, &u0, &u1);
        for (int64_t u = u0; u < u1; u++) {
            int64_t n = u / (CB / span), cb0 = u % (CB / span) * span, c0 = cb0 * B;
            const float *x = (const float *)k->in_data[0] + n * s->sp * C;
            float *y = (float *)k->out_data[0] + n * s->sp * C;
            for (int pass = 0; pass < 2; pass++) {
                for (int64_t c = 0; c < W; c++)
                    sum[c] = 0.0;
                for (int64_t cb = cb0; cb < cb0 + span; cb++)
                    for (int64_t j0 = 0; j0 < B; j0 += 16) {
                        int64_t w = B - j0 < 16 ? B - j0 : 16;
                        lane_sums(x + cb * s->sp * B + j0, B, s->sp, w,
                                  pass ? mean + (cb - cb0) * B + j0 : NULL,
                                  sum + (cb - cb0) * B + j0);
                    }
                /* the unit's groups: channels [c0 + g * cg, c0 + (g + 1) * cg) */
                for (int64_t g = 0; g < W / cg; g++) {
                    double tot = 0.0;
                    for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                        tot += sum[c];
                    double v = tot / (double)(cg * s->sp);
                    for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                        if (pass == 0) {
                            mean[c] = (float)v;
                        } else {
                            double inv = 1.0 / sqrt(v + s->eps);
                            av[c] = (float)(inv * scale[c0 + c]);
                            bv[c] = (float)(bias[c0 + c] - (double)mean[c] * inv * scale[c0 + c]);
                        }
                    }
                }
            }
            for (int64_t cb = cb0; cb < cb0 + span; cb++) {
                int64_t o = cb * s->sp * B;
                slab_affine(x + o, y + o, s->sp, B, av + (cb - cb0) * B, bv + (cb - cb0) * B,
                            &s->act);
            }
        }
    }
}

static enum cp_status gn_run(struct cp_kexec *k)
{
    const struct gn_state *s = k->state;
    int64_t span;
    if (s->block && gn_units(s, &span))
        gn_blocks(k, s, span);
    else if (s->block)
        gn_slabs(k, s);
    else
        gn_nchw(k, s);
    return CP_OK;
}

static void state_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_group_norm = {"c:group_norm",
                                             CP_OP_GROUP_NORMALIZATION,
                                             gn_supports,
                                             gn_prepare,
                                             gn_run,
                                             state_release,
                                             NULL};

/* ---- Gelu ------------------------------------------------------------------ */

static bool gelu_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const char *ap = cp_node_attr_string(n, "approximate", "none");
    return n->n_inputs == 1 && n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) &&
           cp_shape_equal(&cp_fk_in(g, n, 0)->shape, &cp_fk_out(g, n, 0)->shape) &&
           cp_fk_in(g, n, 0)->layout == cp_fk_out(g, n, 0)->layout &&
           (strcmp(ap, "none") == 0 || strcmp(ap, "tanh") == 0);
}

CP_FK_HOT static void gelu_span(const float *x, float *y, int64_t n, bool tanh_form)
{
    if (tanh_form)
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_act_gelu_tanh(x[i]);
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_act_gelu(x[i]);
}

static enum cp_status gelu_run(struct cp_kexec *k)
{
    bool tanh_form = strcmp(cp_node_attr_string(k->node, "approximate", "none"), "tanh") == 0;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int64_t n = cp_shape_numel(&k->out[0]->shape);
    int nt = cp_fk_threads(k, n, GRAIN);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t b, e;
        cp_fk_split(n, 16, &b, &e);
        gelu_span(x + b, y + b, e - b, tanh_form);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_gelu = {"c:gelu", CP_OP_GELU, gelu_supports, NULL,
                                       gelu_run, NULL,       NULL};
