/*
 * Transpose of 4-byte elements whose permutation is a batched matrix
 * transpose once the dimensions that move together are merged: [B, R, C]
 * -> [B, C, R]. That is what the attention blocks of U-Nets and vision
 * transformers do around their token sequence: NCHW [1, C, H, W] -> [1, H,
 * W, C] (perm 0,2,3,1, a C x HW transpose) and back (perm 0,3,1,2).
 *
 * oneDNN's reorder runs those as a generic strided copy (38 us for the
 * 64 x 1024 floats of the SD-like example, one thread); here 16 x 16 tiles
 * are transposed in registers (transpose16.h: 16 row loads, 64 shuffles,
 * 16 stores), 7 to 17 us. Edges of the matrix, and CPUs without AVX-512, use a
 * scalar loop over cache-sized tiles. Any other permutation is left to the
 * oneDNN reorder (dnnl_reorder.c), listed after this kernel.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"
#include "runner/cpu/transpose16.h"

#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TILE 16

struct tp_state {
    int64_t batch, rows, cols; /* [batch, rows, cols] -> [batch, cols, rows] */
    bool x512;
};

/* The permutation of a Transpose node (default: reversed dims). */
static bool tp_perm(const struct cp_node *n, int rank, int *perm)
{
    const struct cp_attr *a = cp_node_attr(n, "perm");
    bool seen[CP_MAX_RANK] = {false};
    if (a && (a->type != CP_ATTR_INTS || a->n != (size_t)rank))
        return false;
    for (int i = 0; i < rank; i++) {
        int64_t p = a ? a->ints[i] : rank - 1 - i;
        if (p < 0)
            p += rank;
        if (p < 0 || p >= rank || seen[p])
            return false;
        seen[p] = true;
        perm[i] = (int)p;
    }
    return true;
}

/* Merge the dims of x that stay adjacent under perm, dropping dims of
 * size 1; true when what is left is [B, R, C] -> [B, C, R] (or [R, C] ->
 * [C, R]). */
static bool tp_geom(const struct cp_graph *g, const struct cp_node *n, struct tp_state *s)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd), perm[CP_MAX_RANK];
    if (n->n_inputs != 1 || n->n_outputs != 1 || r < 2 || !y || x->dtype != y->dtype ||
        cp_dtype_size(x->dtype) != 4 || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) ||
        !cp_shape_is_static(&y->shape) || !tp_perm(n, r, perm))
        return false;
    for (int i = 0; i < r; i++)
        if (y->shape.dims[i].value != xd[perm[i]])
            return false;
    /* runs of input dims in output order: perm[i + 1] == perm[i] + 1 merge */
    int64_t size[CP_MAX_RANK];
    int first[CP_MAX_RANK], runs = 0;
    for (int i = 0; i < r; i++) {
        if (xd[perm[i]] == 1)
            continue;
        if (runs > 0 && perm[i] == first[runs - 1] + 1) {
            /* the run's last input dim is perm[i] - 1: extend it */
            size[runs - 1] *= xd[perm[i]];
            first[runs - 1] = perm[i];
            continue;
        }
        first[runs] = perm[i];
        size[runs++] = xd[perm[i]];
    }
    /* in output order the runs are (B,) C, R where input order is (B,) R, C:
     * C's run ends on the last input dim and R's run ends right before C's
     * run starts */
    if (runs == 2 && first[1] < first[0]) {
        s->batch = 1;
        s->cols = size[0];
        s->rows = size[1];
        return true;
    }
    if (runs == 3 && first[0] < first[2] && first[2] < first[1]) {
        s->batch = size[0];
        s->cols = size[1];
        s->rows = size[2];
        return true;
    }
    return false;
}

static bool tp_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct tp_state s;
    return tp_geom(g, n, &s) && s.rows >= TILE && s.cols >= TILE;
}

static enum cp_status tp_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct tp_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (!tp_geom(k->g, k->node, s)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': not a matrix transpose", k->node->name);
    }
    __builtin_cpu_init();
    s->x512 = __builtin_cpu_supports("avx512f");
    k->state = s;
    return CP_OK;
}

/* y[c][r] = x[r][c] for r in [r0, r1), c in [c0, c1); strides in elements. */
static void tp_scalar(const uint32_t *x, uint32_t *y, int64_t xs, int64_t ys, int64_t r0,
                      int64_t r1, int64_t c0, int64_t c1)
{
    for (int64_t c = c0; c < c1; c++)
        for (int64_t r = r0; r < r1; r++)
            y[c * ys + r] = x[r * xs + c];
}

/* One 16 x 16 tile: rows of x at x (stride xs) become rows of y (stride ys). */
__attribute__((target("avx512f"))) static inline void tp_tile16(const uint32_t *x, uint32_t *y,
                                                                int64_t xs, int64_t ys)
{
    __m512i r[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_si512(x + i * xs);
    cp_transpose16(r);
    for (int i = 0; i < 16; i++)
        _mm512_storeu_si512(y + i * ys, r[i]);
}

/* Row tiles [t0, t1) of one matrix. */
__attribute__((target("avx512f"))) static void
tp_rows_x512(const uint32_t *x, uint32_t *y, int64_t R, int64_t C, int64_t t0, int64_t t1)
{
    int64_t cfull = C / TILE * TILE;
    for (int64_t t = t0; t < t1; t++) {
        int64_t r0 = t * TILE, r1 = r0 + TILE < R ? r0 + TILE : R;
        if (r1 - r0 < TILE) {
            tp_scalar(x, y, C, R, r0, r1, 0, C);
            continue;
        }
        for (int64_t c0 = 0; c0 < cfull; c0 += TILE)
            tp_tile16(x + r0 * C + c0, y + c0 * R + r0, C, R);
        tp_scalar(x, y, C, R, r0, r1, cfull, C);
    }
}

static void tp_rows_plain(const uint32_t *x, uint32_t *y, int64_t R, int64_t C, int64_t t0,
                          int64_t t1)
{
    for (int64_t t = t0; t < t1; t++) {
        int64_t r0 = t * TILE, r1 = r0 + TILE < R ? r0 + TILE : R;
        for (int64_t c0 = 0; c0 < C; c0 += 4 * TILE)
            tp_scalar(x, y, C, R, r0, r1, c0, c0 + 4 * TILE < C ? c0 + 4 * TILE : C);
    }
}

static enum cp_status tp_run(struct cp_kexec *k)
{
    const struct tp_state *s = k->state;
    const uint32_t *x = k->in_data[0];
    uint32_t *y = k->out_data[0];
    int64_t R = s->rows, C = s->cols, tiles = (R + TILE - 1) / TILE;
    int64_t work = s->batch * tiles;
    int nt = cp_fk_threads(k, s->batch * R * C, 16384);
    if (nt > work)
        nt = (int)work;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t w0, w1;
        cp_fk_split(work, 1, &w0, &w1);
        for (int64_t w = w0; w < w1;) {
            int64_t b = w / tiles, t0 = w % tiles;
            int64_t t1 = w1 - b * tiles < tiles ? w1 - b * tiles : tiles;
            const uint32_t *xb = x + b * R * C;
            uint32_t *yb = y + b * R * C;
            if (s->x512)
                tp_rows_x512(xb, yb, R, C, t0, t1);
            else
                tp_rows_plain(xb, yb, R, C, t0, t1);
            w += t1 - t0;
        }
    }
    return CP_OK;
}

static void tp_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_transpose = {"c:transpose", CP_OP_TRANSPOSE, tp_supports, tp_prepare,
                                            tp_run,        tp_release,      NULL};
