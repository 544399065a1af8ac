/*
 * LayerNormalization over the trailing dims in vectorised C: the norms of
 * transformer blocks, [tokens, width] with a width of 64 to 1024.
 *
 * oneDNN 2.6's layer normalization for such short rows runs its "simple"
 * implementation (25 us for the 1024 x 64 rows of the SD-like example, one
 * thread; 18 us here); each row is read three times while it sits in L1: its sum,
 * the sum of squared deviations from the mean (no E[x^2] - E[x]^2
 * cancellation), then y = (x - mean) / sqrt(var + eps) * scale + bias.
 * Widths that are multiples of 16 sum in 16 float lanes folded pairwise
 * (ln_rows16); others take a plain loop with double sums.
 * Scale and bias cover the whole normalized part (numel equal to it);
 * other broadcasts, the optional Mean and InvStdDev outputs and stash_type
 * other than float are left to the oneDNN and reference kernels.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct ln_state {
    int64_t rows, width;
    float eps;
};

static bool ln_geom(const struct cp_graph *g, const struct cp_node *n, struct ln_state *s)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *sc = cp_fk_in(g, n, 1), *b = cp_fk_in(g, n, 2),
                           *y = cp_fk_out(g, n, 0);
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (n->n_inputs < 2 || n->n_inputs > 3 || r < 1 || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) ||
        cp_node_attr_int(n, "stash_type", 1) != 1)
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0)
            return false;
    int64_t axis = cp_node_attr_int(n, "axis", -1);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis >= r)
        return false;
    s->rows = 1;
    s->width = 1;
    for (int i = 0; i < r; i++)
        *(i < axis ? &s->rows : &s->width) *= xd[i];
    s->eps = cp_node_attr_float(n, "epsilon", 1e-5f);
    return s->rows > 0 && s->width > 0 && cp_shape_numel(&sc->shape) == s->width &&
           (!b || (cp_fk_in_is(g, n, 2, CP_DTYPE_F32) && cp_shape_numel(&b->shape) == s->width));
}

static bool ln_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct ln_state s;
    return ln_geom(g, n, &s);
}

static enum cp_status ln_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct ln_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (!ln_geom(k->g, k->node, s)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': LayerNormalization does not fit",
                           k->node->name);
    }
    k->state = s;
    return CP_OK;
}

/* 16 floats as one vector (a zmm in the AVX-512 clone, two ymm in the
 * AVX2 one), loaded and stored unaligned. */
typedef float ln_v16 __attribute__((vector_size(64), aligned(4)));

static inline __attribute__((always_inline)) float ln_hsum(const ln_v16 *v)
{
    ln_v16 a =
        *v; /* by pointer: a 64-byte vector argument changes the ABI of the non-AVX-512 clones */
    a += __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    a += __builtin_shufflevector(a, a, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    a += __builtin_shufflevector(a, a, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    a += __builtin_shufflevector(a, a, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    return a[0];
}

/* Rows [r0, r1) of width n (a multiple of 16): y = (x - mean) * inv *
 * scale + bias (bias NULL: none). Partial sums in 16 float lanes summed
 * pairwise, all in registers: for the 64-wide rows of the example a row's
 * chain of dependent steps (sum, mean, deviations, 1 / sqrt) is what costs,
 * and arrays of partial sums went through memory. */
CP_FK_HOT static void ln_rows16(const float *x, float *y, int64_t r0, int64_t r1, int64_t n,
                                const float *scale, const float *bias, float eps)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        ln_v16 acc = {0}, v, s, b = {0};
        for (int64_t i = 0; i < n; i += 16) {
            memcpy(&v, xr + i, sizeof v);
            acc += v;
        }
        float mean = ln_hsum(&acc) / (float)n;
        acc = (ln_v16){0};
        for (int64_t i = 0; i < n; i += 16) {
            memcpy(&v, xr + i, sizeof v);
            v -= mean;
            acc += v * v;
        }
        float inv = 1.0f / sqrtf(ln_hsum(&acc) / (float)n + eps);
        for (int64_t i = 0; i < n; i += 16) {
            memcpy(&v, xr + i, sizeof v);
            memcpy(&s, scale + i, sizeof s);
            if (bias)
                memcpy(&b, bias + i, sizeof b);
            v = (v - mean) * inv * s + b;
            memcpy(yr + i, &v, sizeof v);
        }
    }
}

/* Any width: the same in double sums, one value at a time. */
static void ln_rows_any(const float *x, float *y, int64_t r0, int64_t r1, int64_t n,
                        const float *scale, const float *bias, float eps)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0, sq = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += xr[i];
        double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++)
            sq += (xr[i] - mean) * (xr[i] - mean);
        double inv = 1.0 / sqrt(sq / (double)n + (double)eps);
        for (int64_t i = 0; i < n; i++)
            yr[i] = (float)((xr[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0f));
    }
}

static enum cp_status ln_run(struct cp_kexec *k)
{
    const struct ln_state *s = k->state;
    const float *x = k->in_data[0], *scale = k->in_data[1];
    const float *bias = k->node->n_inputs > 2 && k->in[2] ? k->in_data[2] : NULL;
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, s->rows * s->width, 16384);
    if (nt > s->rows)
        nt = (int)s->rows;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, r1;
        cp_fk_split(s->rows, 1, &r0, &r1);
        if (s->width % 16 == 0)
            ln_rows16(x, y, r0, r1, s->width, scale, bias, s->eps);
        else
            ln_rows_any(x, y, r0, r1, s->width, scale, bias, s->eps);
    }
    return CP_OK;
}

static void ln_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_layer_norm = {
    "c:layer_norm", CP_OP_LAYER_NORMALIZATION, ln_supports, ln_prepare, ln_run, ln_release, NULL};
