/*
 * MatMul and Gemm on oneDNN's matmul primitive, f32.
 *
 * MatMul: 1-D operands are promoted as numpy does (a vector A becomes
 * [1,K], a vector B [K,1]; the promoted dim is dropped from the output,
 * which leaves the bytes as they are). Batch dims are padded with leading
 * ones to a common rank; oneDNN broadcasts a batch dim of size 1 on either
 * side.
 *
 * Gemm: transA/transB are expressed as strides (no copy), alpha as the
 * output scale, C either as the primitive's bias (a row [1,N] when alpha
 * and beta are 1) or as a binary add post-op with numpy broadcasting; a
 * beta other than 1 is folded as beta * ((alpha/beta) * A*B + C).
 *
 * A constant B (an initializer) is packed once, in prepare, into the format
 * the primitive prefers.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"

#include <math.h>
#include <string.h>

/* Dims and strides of a 2-D-or-more operand. */
struct mm_operand {
    int nd;
    dnnl_dims_t dims;
    dnnl_dims_t strides;
};

static void set_plain_strides(struct mm_operand *o)
{
    int64_t s = 1;
    for (int i = o->nd - 1; i >= 0; i--) {
        o->strides[i] = s;
        s *= o->dims[i];
    }
}

/* Shapes of a MatMul node promoted to a common rank. False if they do not
 * fit the rules (mismatched K, non-broadcastable batch). */
static bool matmul_shapes(const struct cp_tensor *a, const struct cp_tensor *b,
                          const struct cp_tensor *y, struct mm_operand *A, struct mm_operand *B,
                          struct mm_operand *Y)
{
    int64_t ad[CP_MAX_RANK + 1], bd[CP_MAX_RANK + 1];
    int ra = cp_fk_dims(a, ad), rb = cp_fk_dims(b, bd);
    if (ra < 1 || rb < 1 || !cp_shape_is_static(&y->shape))
        return false;
    if (ra == 1) {
        ad[1] = ad[0];
        ad[0] = 1;
        ra = 2;
    }
    if (rb == 1) {
        bd[1] = 1;
        rb = 2;
    }
    int r = ra > rb ? ra : rb;
    if (r > DNNL_MAX_NDIMS)
        return false;
    A->nd = B->nd = Y->nd = r;
    for (int i = 0; i < r; i++) {
        A->dims[i] = i - (r - ra) >= 0 ? ad[i - (r - ra)] : 1;
        B->dims[i] = i - (r - rb) >= 0 ? bd[i - (r - rb)] : 1;
    }
    if (A->dims[r - 1] != B->dims[r - 2])
        return false;
    for (int i = 0; i < r - 2; i++) {
        if (A->dims[i] != B->dims[i] && A->dims[i] != 1 && B->dims[i] != 1)
            return false;
        Y->dims[i] = A->dims[i] > B->dims[i] ? A->dims[i] : B->dims[i];
    }
    Y->dims[r - 2] = A->dims[r - 2];
    Y->dims[r - 1] = B->dims[r - 1];
    int64_t n = 1;
    for (int i = 0; i < r; i++)
        n *= Y->dims[i];
    if (n != cp_shape_numel(&y->shape))
        return false;
    set_plain_strides(A);
    set_plain_strides(B);
    set_plain_strides(Y);
    return true;
}

static bool matmul_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    struct mm_operand A, B, Y;
    if (!matmul_shapes(cp_fk_in(g, n, 0), cp_fk_in(g, n, 1), cp_fk_out(g, n, 0), &A, &B, &Y))
        return false;
    for (int i = 0; i < Y.nd; i++)
        if (Y.dims[i] == 0)
            return false; /* empty products: left to the reference */
    return true;
}

/* What to add to the product (Gemm's C). */
struct mm_addend {
    int kind; /* 0 none, 1 bias row, 2 binary post-op */
    dnnl_memory_desc_t md;
    void *data;
};

/* Build the program: [reorder B,] matmul. */
static enum cp_status mm_build(struct cp_kexec *k, struct cp_diag *d, const struct mm_operand *A,
                               const struct mm_operand *B, const struct mm_operand *Y, void *a_data,
                               void *b_data, bool b_const, float out_scale,
                               const struct mm_addend *add, float final_scale)
{
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_memory_desc_t a_md, b_user, b_md, y_md;
    if (dnnl_memory_desc_init_by_strides(&a_md, A->nd, A->dims, dnnl_f32, A->strides) ||
        dnnl_memory_desc_init_by_strides(&b_user, B->nd, B->dims, dnnl_f32, B->strides) ||
        dnnl_memory_desc_init_by_strides(&y_md, Y->nd, Y->dims, dnnl_f32, Y->strides))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    if (b_const)
        dnnl_memory_desc_init_by_tag(&b_md, B->nd, B->dims, dnnl_f32, dnnl_format_tag_any);
    else
        b_md = b_user;
    dnnl_matmul_desc_t md;
    dnnl_status_t s =
        dnnl_matmul_desc_init(&md, &a_md, &b_md, add->kind == 1 ? &add->md : NULL, &y_md);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "matmul descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_post_ops_t po = NULL;
    if (!attr)
        return cp_dk_fail(k, d, "attribute", dnnl_out_of_memory);
    if (out_scale != 1.0f)
        s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &out_scale);
    if (s == dnnl_success && (add->kind == 2 || final_scale != 1.0f)) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success && add->kind == 2)
            s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &add->md);
        if (s == dnnl_success && final_scale != 1.0f)
            s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, final_scale, 0.0f);
        if (s == dnnl_success)
            s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &md, attr, p->engine, NULL);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "matmul primitive descriptor", s);
    enum cp_status st = CP_ERR_INTERNAL;
    int bm = cp_dk_mem_user(p, &b_user, b_data);
    if (b_const) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (!dnnl_memory_desc_equal(want, &b_user)) {
            int packed = cp_dk_mem_owned(p, want);
            if ((st = cp_dk_reorder_now(p, bm, packed)) != CP_OK)
                goto out;
            bm = packed;
        }
    }
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, 0};
    int mems[4] = {cp_dk_mem_user(p, &a_md, a_data), bm, cp_dk_mem_user(p, &y_md, k->out_data[0]),
                   -1};
    int nargs = 3;
    if (add->kind == 1) {
        ids[3] = DNNL_ARG_BIAS;
        mems[3] = cp_dk_mem_user(p, &add->md, add->data);
        nargs = 4;
    } else if (add->kind == 2) {
        ids[3] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
        mems[3] = cp_dk_mem_user(p, &add->md, add->data);
        nargs = 4;
    }
    if ((st = cp_dk_step_add(p, pd, nargs, ids, mems)) != CP_OK)
        goto out;
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
out:
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_diag_set(d, st, "node '%s' (%s): could not build the oneDNN program",
                           k->node->name, cp_op_name(k->node->op));
    return CP_OK;
}

static enum cp_status matmul_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct mm_operand A, B, Y;
    if (!matmul_shapes(k->in[0], k->in[1], k->out[0], &A, &B, &Y))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': MatMul shapes do not match",
                           k->node->name);
    struct mm_addend none = {0};
    return mm_build(k, d, &A, &B, &Y, k->in_data[0], k->in_data[1],
                    k->in[1]->kind == CP_TENSOR_INITIALIZER, 1.0f, &none, 1.0f);
}

const struct cp_kernel cp_dnnl_matmul = {"onednn:matmul", CP_OP_MATMUL,     matmul_supports,
                                         matmul_prepare,  cp_dk_kernel_run, cp_dk_kernel_release};

/* ---- Gemm ------------------------------------------------------------- */

struct gemm_geom {
    struct mm_operand A, B, Y;
    int64_t cdims[2]; /* C broadcast to 2-D, when present */
    bool has_c;
    float alpha, beta;
};

static bool gemm_geom(const struct cp_node *n, const struct cp_tensor *a, const struct cp_tensor *b,
                      const struct cp_tensor *c, const struct cp_tensor *y, struct gemm_geom *g)
{
    int64_t ad[CP_MAX_RANK], bd[CP_MAX_RANK], yd[CP_MAX_RANK], cd[CP_MAX_RANK];
    if (cp_fk_dims(a, ad) != 2 || cp_fk_dims(b, bd) != 2 || cp_fk_dims(y, yd) != 2)
        return false;
    bool ta = cp_node_attr_int(n, "transA", 0) != 0, tb = cp_node_attr_int(n, "transB", 0) != 0;
    int64_t M = ta ? ad[1] : ad[0], K = ta ? ad[0] : ad[1];
    int64_t Kb = tb ? bd[1] : bd[0], N = tb ? bd[0] : bd[1];
    if (K != Kb || yd[0] != M || yd[1] != N || M == 0 || N == 0 || K == 0)
        return false;
    g->alpha = cp_node_attr_float(n, "alpha", 1.0f);
    g->beta = cp_node_attr_float(n, "beta", 1.0f);
    if (!isfinite(g->alpha) || !isfinite(g->beta))
        return false;
    g->A.nd = g->B.nd = g->Y.nd = 2;
    g->A.dims[0] = M;
    g->A.dims[1] = K;
    g->A.strides[0] = ta ? 1 : K;
    g->A.strides[1] = ta ? M : 1;
    g->B.dims[0] = K;
    g->B.dims[1] = N;
    g->B.strides[0] = tb ? 1 : N;
    g->B.strides[1] = tb ? K : 1;
    g->Y.dims[0] = M;
    g->Y.dims[1] = N;
    set_plain_strides(&g->Y);
    g->has_c = c != NULL && g->beta != 0.0f;
    if (g->has_c) {
        int rc = cp_fk_dims(c, cd);
        if (rc < 0 || rc > 2 || c->dtype != CP_DTYPE_F32)
            return false;
        g->cdims[0] = rc == 2 ? cd[0] : 1;
        g->cdims[1] = rc >= 1 ? cd[rc - 1] : 1;
        if ((g->cdims[0] != 1 && g->cdims[0] != M) || (g->cdims[1] != 1 && g->cdims[1] != N))
            return false;
    }
    return true;
}

static bool gemm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs < 2 || n->n_inputs > 3 || n->n_outputs != 1 ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    struct gemm_geom gm;
    return gemm_geom(n, cp_fk_in(g, n, 0), cp_fk_in(g, n, 1), cp_fk_in(g, n, 2), cp_fk_out(g, n, 0),
                     &gm);
}

static enum cp_status gemm_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct gemm_geom gm;
    const struct cp_tensor *c = k->node->n_inputs > 2 ? k->in[2] : NULL;
    if (!gemm_geom(k->node, k->in[0], k->in[1], c, k->out[0], &gm))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': Gemm shapes do not match", k->node->name);
    struct mm_addend add = {0};
    float out_scale = gm.alpha, final_scale = 1.0f;
    if (gm.has_c) {
        add.data = k->in_data[2];
        dnnl_dims_t cd = {gm.cdims[0], gm.cdims[1]};
        dnnl_memory_desc_init_by_tag(&add.md, 2, cd, dnnl_f32, dnnl_ab);
        if (gm.alpha == 1.0f && gm.beta == 1.0f && gm.cdims[0] == 1 && gm.cdims[1] == gm.Y.dims[1])
            add.kind = 1;
        else
            add.kind = 2;
        if (gm.beta != 1.0f) {
            out_scale = gm.alpha / gm.beta;
            final_scale = gm.beta;
        }
    }
    return mm_build(k, d, &gm.A, &gm.B, &gm.Y, k->in_data[0], k->in_data[1],
                    k->in[1]->kind == CP_TENSOR_INITIALIZER, out_scale, &add, final_scale);
}

const struct cp_kernel cp_dnnl_gemm = {"onednn:gemm", CP_OP_GEMM,       gemm_supports,
                                       gemm_prepare,  cp_dk_kernel_run, cp_dk_kernel_release};
