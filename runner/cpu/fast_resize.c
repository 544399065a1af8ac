/* Resize by interpolation (linear, cubic; nearest where the copy kernel
 * of fast_copy.c declines) on plain f32 tensors whose last two axes are
 * resized: segmentation heads upsample their logits to the image this way.
 *
 * The taps are the reference's (resize.h). An output row is made in two
 * passes: the input rows it reads are blended into one row of the input's
 * width (contiguous, vectorised), which the row's taps along W then read.
 * Upsampling by s costs about (taps_h / s + taps_w) operations per output
 * element instead of taps_h * taps_w. Leading axes must not be resized and
 * no tap may fall outside (tf_crop_and_resize's extrapolation); those
 * cases run the reference loop. */
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"
#include "runner/cpu/ref_shared.h"

#include <omp.h>

static bool lin_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    return x && y && x->dtype == CP_DTYPE_F32 && y->dtype == CP_DTYPE_F32 && x->shape.rank >= 2 &&
           cp_shape_is_static(&x->shape) && cp_shape_is_static(&y->shape) &&
           cp_shape_numel(&x->shape) > 0 && cp_shape_numel(&y->shape) > 0 &&
           cp_tensor_is_plain(x) && cp_tensor_is_plain(y) && cp_resize_supported(g, n);
}

/* Scratch: the taps, then one blended row per thread. */
static size_t taps_bytes(const struct cp_kexec *k)
{
    return (cp_resize_taps_bytes(&k->out[0]->shape) + 63) / 64 * 64;
}

static enum cp_status lin_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t iw = xs->dims[xs->rank - 1].value;
    int threads = k->env && k->env->threads > 0 ? k->env->threads : 1;
    k->scratch_bytes = taps_bytes(k) + (size_t)threads * (size_t)((iw + 15) / 16 * 16) * 4;
    return CP_OK;
}

/* Whether the taps leave the leading axes as they are and never point
 * outside the input. */
static bool plane_resize(const struct cp_kexec *k, const struct cp_resize_taps *t)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    int r = xs->rank;
    int64_t stride = 1;
    for (int a = r - 1; a >= 0; a--) {
        const struct cp_resize_tap *tp = t->axis[a];
        for (int64_t i = 0; i < ys->dims[a].value; i++) {
            if (tp[i].outside)
                return false;
            if (a < r - 2 && (tp[i].n != 1 || tp[i].w[0] != 1.0 || tp[i].off[0] != i * stride))
                return false;
        }
        if (a < r - 2 && ys->dims[a].value != xs->dims[a].value)
            return false;
        stride *= xs->dims[a].value;
    }
    return true;
}

CP_FK_HOT static void blend_rows(const float *x, const struct cp_resize_tap *th, float *row,
                                 int64_t iw)
{
    const float *r0 = x + th->off[0];
    float w0 = (float)th->w[0];
    for (int64_t j = 0; j < iw; j++)
        row[j] = w0 * r0[j];
    for (int32_t i = 1; i < th->n; i++) {
        const float *ri = x + th->off[i];
        float wi = (float)th->w[i];
        for (int64_t j = 0; j < iw; j++)
            row[j] += wi * ri[j];
    }
}

CP_FK_HOT static void sample_row(const float *row, const struct cp_resize_tap *tw, float *y,
                                 int64_t ow)
{
    for (int64_t o = 0; o < ow; o++) {
        const struct cp_resize_tap *t = &tw[o];
        float acc = 0.0f;
        for (int32_t j = 0; j < t->n; j++)
            acc += (float)t->w[j] * row[t->off[j]];
        y[o] = acc;
    }
}

static enum cp_status lin_run(struct cp_kexec *k)
{
    struct cp_resize_taps t;
    if (!cp_resize_taps(k, k->scratch, &t))
        return CP_ERR_INTERNAL;
    if (!plane_resize(k, &t))
        return cp_ref_resize.run(k);
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    int r = xs->rank;
    int64_t ih = xs->dims[r - 2].value, iw = xs->dims[r - 1].value;
    int64_t oh = ys->dims[r - 2].value, ow = ys->dims[r - 1].value;
    int64_t planes = cp_shape_numel(ys) / (oh * ow), rows = planes * oh;
    const struct cp_resize_tap *taps_h = t.axis[r - 2], *taps_w = t.axis[r - 1];
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    float *rows_base = (float *)((char *)k->scratch + taps_bytes(k));
    int64_t row_len = (iw + 15) / 16 * 16;
    int nt = cp_fk_threads(k, rows * (ow + iw), 16384);
    bool nearest = t.nearest;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *row = rows_base + (int64_t)omp_get_thread_num() * row_len;
        int64_t b, e;
        cp_fk_split(rows, 1, &b, &e);
        for (int64_t i = b; i < e; i++) {
            int64_t p = i / oh, h = i % oh;
            const float *xp = x + p * ih * iw;
            const struct cp_resize_tap *th = &taps_h[h];
            float *yr = y + i * ow;
            if (nearest) {
                const float *src = xp + th->off[0];
                for (int64_t o = 0; o < ow; o++)
                    yr[o] = src[taps_w[o].off[0]];
                continue;
            }
            blend_rows(xp, th, row, iw);
            sample_row(row, taps_w, yr, ow);
        }
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_resize_interp = {
    "c:resize_interp", CP_OP_RESIZE, lin_supports, lin_prepare, lin_run, NULL, NULL};
