/* Reference kernels for MatMul (numpy semantics: 1-D operands promoted,
 * batch dims broadcast) and Gemm (alpha, beta, transA, transB, C broadcast
 * to M x N).
 *
 * The product loops run i, k, j so that the innermost loop streams a row of
 * B into a row of the output; a transposed B instead takes dot products of
 * two contiguous rows. Sums accumulate in f32 (in f64 for MatMul on f64). */
#include "runner/cpu/ref_util.h"

#include <string.h>

/* C[M x N] = A[M x K] * B[K x N], all row-major. */
static void matmul_block(const float *a, const float *b, float *c, int64_t m, int64_t kk, int64_t n)
{
    for (int64_t i = 0; i < m; i++) {
        float *crow = c + i * n;
        for (int64_t j = 0; j < n; j++)
            crow[j] = 0.0f;
        for (int64_t k = 0; k < kk; k++) {
            float av = a[i * kk + k];
            const float *brow = b + k * n;
            for (int64_t j = 0; j < n; j++)
                crow[j] += av * brow[j];
        }
    }
}

/* The same in double (f64 models). */
static void matmul_block_f64(const double *a, const double *b, double *c, int64_t m, int64_t kk,
                             int64_t n)
{
    for (int64_t i = 0; i < m; i++) {
        double *crow = c + i * n;
        for (int64_t j = 0; j < n; j++)
            crow[j] = 0.0;
        for (int64_t k = 0; k < kk; k++) {
            double av = a[i * kk + k];
            const double *brow = b + k * n;
            for (int64_t j = 0; j < n; j++)
                crow[j] += av * brow[j];
        }
    }
}

/* ---- MatMul --------------------------------------------------------------------- */

/* Operand shapes with 1-D ones promoted: A (K) is (1, K), B (K) is (K, 1). */
struct matmul_dims {
    struct cp_shape a, b; /* promoted, rank >= 2 */
    int64_t m, k, n;
};

static bool matmul_dims(const struct cp_shape *a, const struct cp_shape *b, struct matmul_dims *md)
{
    if (a->rank < 1 || b->rank < 1)
        return false;
    md->a = *a;
    md->b = *b;
    if (a->rank == 1) {
        md->a.rank = 2;
        md->a.dims[1] = a->dims[0];
        md->a.dims[0].value = 1;
    }
    if (b->rank == 1) {
        md->b.rank = 2;
        md->b.dims[1].value = 1;
    }
    md->m = md->a.dims[md->a.rank - 2].value;
    md->k = md->a.dims[md->a.rank - 1].value;
    md->n = md->b.dims[md->b.rank - 1].value;
    return md->k == md->b.dims[md->b.rank - 2].value;
}

static bool matmul_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, 0), *b = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    struct matmul_dims md;
    return a && b && (a->dtype == CP_DTYPE_F32 || a->dtype == CP_DTYPE_F64) &&
           b->dtype == a->dtype && y->dtype == a->dtype && matmul_dims(&a->shape, &b->shape, &md);
}

static enum cp_status matmul_run(struct cp_kexec *k)
{
    struct matmul_dims md;
    if (!matmul_dims(&k->in[0]->shape, &k->in[1]->shape, &md))
        return CP_ERR_INTERNAL;
    /* The batch space: leading dims of the promoted operands, broadcast. */
    struct cp_shape ba = md.a, bb = md.b, batch;
    ba.rank -= 2;
    bb.rank -= 2;
    batch.rank = ba.rank > bb.rank ? ba.rank : bb.rank;
    for (int d = 0; d < batch.rank; d++) {
        int ia = d - (batch.rank - ba.rank), ib = d - (batch.rank - bb.rank);
        int64_t da = ia >= 0 ? ba.dims[ia].value : 1, db = ib >= 0 ? bb.dims[ib].value : 1;
        batch.dims[d].value = da == 1 ? db : da;
        batch.dims[d].sym = NULL;
    }
    if (cp_ref_numel(&batch) * md.m * md.n != cp_ref_numel(&k->out[0]->shape))
        return CP_ERR_INTERNAL;
    struct cp_walk w;
    cp_walk_init(&w, &batch, 3);
    cp_walk_bcast(&w, 0, &batch);
    cp_walk_bcast(&w, 1, &ba);
    cp_walk_bcast(&w, 2, &bb);
    /* Strides count whole matrices. */
    for (int d = 0; d < w.rank; d++) {
        w.strides[0][d] *= md.m * md.n;
        w.strides[1][d] *= md.m * md.k;
        w.strides[2][d] *= md.k * md.n;
    }
    cp_walk_finish(&w);
    bool f64 = k->in[0]->dtype == CP_DTYPE_F64;
    struct cp_walk_pos p;
    cp_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        for (int64_t j = 0; j < w.inner; j++) {
            int64_t oa = p.off[1] + j * w.inner_stride[1], ob = p.off[2] + j * w.inner_stride[2];
            int64_t oy = p.off[0] + j * w.inner_stride[0];
            if (f64)
                matmul_block_f64((const double *)k->in_data[0] + oa,
                                 (const double *)k->in_data[1] + ob, (double *)k->out_data[0] + oy,
                                 md.m, md.k, md.n);
            else
                matmul_block((const float *)k->in_data[0] + oa, (const float *)k->in_data[1] + ob,
                             (float *)k->out_data[0] + oy, md.m, md.k, md.n);
        }
        cp_walk_next(&w, &p);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_matmul, CP_OP_MATMUL, matmul_supports, NULL, matmul_run);

/* ---- Gemm ------------------------------------------------------------------------- */

/* Strides of C broadcast to (M, N): 0 along a dim of 1 or a missing one. */
static bool gemm_c_strides(const struct cp_shape *c, int64_t m, int64_t n, int64_t *si, int64_t *sj)
{
    if (c->rank > 2)
        return false;
    int64_t cm = c->rank == 2 ? c->dims[0].value : 1;
    int64_t cn = c->rank >= 1 ? c->dims[c->rank - 1].value : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
        return false;
    *sj = cn == 1 ? 0 : 1;
    *si = cm == 1 ? 0 : cn;
    return true;
}

static bool gemm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, 0), *b = cp_ref_in(g, n, 1),
                           *c = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    if (!a || !b || a->dtype != CP_DTYPE_F32 || b->dtype != CP_DTYPE_F32 ||
        y->dtype != CP_DTYPE_F32 || a->shape.rank != 2 || b->shape.rank != 2 || y->shape.rank != 2)
        return false;
    bool ta = cp_node_attr_int(n, "transA", 0) != 0, tb = cp_node_attr_int(n, "transB", 0) != 0;
    int64_t m = a->shape.dims[ta ? 1 : 0].value, ka = a->shape.dims[ta ? 0 : 1].value;
    int64_t kb = b->shape.dims[tb ? 1 : 0].value, nn = b->shape.dims[tb ? 0 : 1].value;
    int64_t si, sj;
    if (ka != kb || y->shape.dims[0].value != m || y->shape.dims[1].value != nn)
        return false;
    return !c || cp_ref_numel(&c->shape) == 0 ||
           (c->dtype == CP_DTYPE_F32 && gemm_c_strides(&c->shape, m, nn, &si, &sj));
}

static enum cp_status gemm_run(struct cp_kexec *k)
{
    const struct cp_tensor *ta = k->in[0];
    const struct cp_tensor *tc = k->node->n_inputs > 2 ? k->in[2] : NULL;
    bool trans_a = cp_node_attr_int(k->node, "transA", 0) != 0;
    bool trans_b = cp_node_attr_int(k->node, "transB", 0) != 0;
    float alpha = cp_node_attr_float(k->node, "alpha", 1.0f);
    float beta = cp_node_attr_float(k->node, "beta", 1.0f);
    int64_t m = k->out[0]->shape.dims[0].value, n = k->out[0]->shape.dims[1].value;
    int64_t kk = ta->shape.dims[trans_a ? 0 : 1].value;
    const float *a = k->in_data[0], *b = k->in_data[1];
    float *y = k->out_data[0];
    /* A'[i, k] lives at a[i * sai + k * sak]. */
    int64_t sai = trans_a ? 1 : kk, sak = trans_a ? m : 1;
    if (!trans_b) {
        for (int64_t i = 0; i < m; i++) {
            float *yrow = y + i * n;
            for (int64_t j = 0; j < n; j++)
                yrow[j] = 0.0f;
            for (int64_t p = 0; p < kk; p++) {
                float av = a[i * sai + p * sak];
                const float *brow = b + p * n;
                for (int64_t j = 0; j < n; j++)
                    yrow[j] += av * brow[j];
            }
        }
    } else {
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                const float *brow = b + j * kk;
                float acc = 0.0f;
                for (int64_t p = 0; p < kk; p++)
                    acc += a[i * sai + p * sak] * brow[p];
                y[i * n + j] = acc;
            }
        }
    }
    int64_t si = 0, sj = 0;
    bool use_c = tc && cp_ref_numel(&tc->shape) > 0 && beta != 0.0f &&
                 gemm_c_strides(&tc->shape, m, n, &si, &sj);
    const float *c = use_c ? k->in_data[2] : NULL;
    for (int64_t i = 0; i < m; i++) {
        float *yrow = y + i * n;
        if (c) {
            for (int64_t j = 0; j < n; j++)
                yrow[j] = alpha * yrow[j] + beta * c[i * si + j * sj];
        } else if (alpha != 1.0f) {
            for (int64_t j = 0; j < n; j++)
                yrow[j] *= alpha;
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_gemm, CP_OP_GEMM, gemm_supports, NULL, gemm_run);
