/*
 * MatMul with a narrow right-hand side in plain C: B is [.., K, 16], the
 * shape of attention's probabilities x V with 16-wide heads.
 *
 * oneDNN's matmul spends most of its time on packing and edge handling for
 * N = 16; here a block of 4 rows of A keeps its 4 x 16 accumulators in
 * vector registers while streaming over K, each row of B (one 64-byte
 * vector) shared by the 4 rows. A is read once, B stays in L1/L2. Measured
 * on [1,4,1024,1024] x [1,4,1024,16] with 2 threads: 0.62 ms against
 * 1.22 ms for the primitive (only long sums, K >= 256, are taken).
 */
#include "runner/cpu/fast_util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define NW 16 /* the width of B this kernel handles */

struct nmm_state {
    int64_t batch, m, k;
    bool b_bcast; /* B has no batch (or batch 1): shared by every A batch */
};

static bool nmm_geom(const struct cp_graph *g, const struct cp_node *n, struct nmm_state *s)
{
    const struct cp_tensor *a = cp_fk_in(g, n, 0), *b = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    int64_t ad[CP_MAX_RANK], bd[CP_MAX_RANK];
    int ra = cp_fk_dims(a, ad), rb = cp_fk_dims(b, bd);
    if (ra < 2 || rb < 2 || ra < rb || !y || !cp_shape_is_static(&y->shape))
        return false;
    if (bd[rb - 1] != NW || bd[rb - 2] != ad[ra - 1])
        return false;
    int64_t abatch = 1, bbatch = 1;
    for (int i = 0; i < ra - 2; i++)
        abatch *= ad[i];
    for (int i = 0; i < rb - 2; i++)
        bbatch *= bd[i];
    s->b_bcast = bbatch == 1;
    if (!s->b_bcast) { /* batches must line up one to one */
        if (ra != rb)
            return false;
        for (int i = 0; i < ra - 2; i++)
            if (ad[i] != bd[i])
                return false;
    }
    s->batch = abatch;
    s->m = ad[ra - 2];
    s->k = ad[ra - 1];
    /* Short sums are better left to oneDNN: with K = 128 (the transformer
     * examples) the primitive takes 10 us per node against 19 us here. */
    return s->k >= 256 && s->m >= 16 && cp_shape_numel(&y->shape) == s->batch * s->m * NW;
}

static bool nmm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct nmm_state s;
    return n->n_inputs == 2 && n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_in_is(g, n, 1, CP_DTYPE_F32) && cp_fk_out_is(g, n, 0, CP_DTYPE_F32) &&
           nmm_geom(g, n, &s);
}

static enum cp_status nmm_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct nmm_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (!nmm_geom(k->g, k->node, s)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': MatMul shapes do not fit", k->node->name);
    }
    k->state = s;
    return CP_OK;
}

/* Rows [r0, r1) of one batch: C[i, :] = sum_k A[i, k] * B[k, :]. */
CP_FK_HOT static void nmm_rows(const float *A, const float *B, float *C, int64_t K, int64_t r0,
                               int64_t r1)
{
    int64_t i = r0;
    for (; i + 4 <= r1; i += 4) {
        float acc[4][NW] = {{0}};
        const float *a0 = A + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
        for (int64_t k = 0; k < K; k++) {
            const float *v = B + k * NW;
            float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
            for (int n = 0; n < NW; n++) {
                acc[0][n] += x0 * v[n];
                acc[1][n] += x1 * v[n];
                acc[2][n] += x2 * v[n];
                acc[3][n] += x3 * v[n];
            }
        }
        for (int r = 0; r < 4; r++)
            memcpy(C + (i + r) * NW, acc[r], sizeof acc[r]);
    }
    for (; i < r1; i++) {
        float acc[NW] = {0};
        for (int64_t k = 0; k < K; k++) {
            float x = A[i * K + k];
            for (int n = 0; n < NW; n++)
                acc[n] += x * B[k * NW + n];
        }
        memcpy(C + i * NW, acc, sizeof acc);
    }
}

static enum cp_status nmm_run(struct cp_kexec *k)
{
    const struct nmm_state *s = k->state;
    const float *A = k->in_data[0], *B = k->in_data[1];
    float *C = k->out_data[0];
    int64_t rows = s->batch * s->m;
    int nt = cp_fk_threads(k, rows * s->k, 65536);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, r1;
        cp_fk_split(rows, 4, &r0, &r1);
        for (int64_t b = r0 / s->m; b * s->m < r1; b++) {
            int64_t lo = b * s->m > r0 ? 0 : r0 - b * s->m;
            int64_t hi = (b + 1) * s->m < r1 ? s->m : r1 - b * s->m;
            const float *bb = B + (s->b_bcast ? 0 : b * s->k * NW);
            nmm_rows(A + b * s->m * s->k, bb, C + b * s->m * NW, s->k, lo, hi);
        }
    }
    return CP_OK;
}

static void nmm_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_matmul_n16 = {
    "c:matmul_n16", CP_OP_MATMUL, nmm_supports, nmm_prepare, nmm_run, nmm_release, NULL};
