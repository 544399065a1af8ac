/*
 * MatMul, Gemm and FusedMatMul on oneDNN's matmul primitive.
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
 * FusedMatMul (graph.h): transA/transB as strides, alpha as the output
 * scale, the 1-D bias as the primitive's bias (or, with alpha != 1, as a
 * binary add post-op, since the bias is not scaled), then the activation
 * (eltwise) and the residual (binary add) post-ops in residual_first order.
 *
 * A constant B (an initializer) is packed once, in prepare, into the format
 * the primitive prefers.
 *
 * Precision: with compute_precision "bf16" (set by the precision pass) A
 * and B are bf16 inside the primitive: a constant B is converted once at
 * prepare, A (and a run-time B) into the shared scratch at every run
 * (cp_dk_step_to_bf16, a flat conversion when the operand is plain, else a
 * reorder); the output, bias and residual stay f32. oneDNN 2.6 has bf16
 * primitives only from avx512_core up, so the kernels' `isa`
 * (cp_dk_isa_bf16) names those features for bf16 nodes and the plan never
 * picks them for one on a lesser CPU.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/fused_act.h"
#include "runner/cpu/layout.h"

#include <math.h>
#include <stdlib.h>
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

static bool wants_bf16(const struct cp_node *n)
{
    return strcmp(cp_node_attr_string(n, "compute_precision", "fp32"), "bf16") == 0;
}

static bool precision_ok(const struct cp_node *n)
{
    const char *p = cp_node_attr_string(n, "compute_precision", "fp32");
    return strcmp(p, "fp32") == 0 || strcmp(p, "bf16") == 0 || strcmp(p, "int8") == 0;
}

/* An int8 node (cp_dk_int8_of): a constant 2-D B and one weight scale per
 * output column; true for other nodes. */
static bool int8_ok(const struct cp_graph *g, const struct cp_node *n, const struct mm_operand *B,
                    const struct mm_operand *Y)
{
    struct cp_dk_int8 q8;
    if (!cp_dk_int8_of(n, &q8))
        return false;
    const struct cp_tensor *b = cp_fk_in(g, n, 1);
    if (!q8.on)
        return true;
    for (int i = 0; i + 2 < B->nd; i++)
        if (B->dims[i] != 1)
            return false; /* one matrix, broadcast over A's batch */
    return b->kind == CP_TENSOR_INITIALIZER && b->data && B->nd >= 2 &&
           q8.n_w == (size_t)Y->dims[Y->nd - 1];
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
    if (n->n_inputs != 2 || n->n_outputs != 1 || !precision_ok(n) ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    struct mm_operand A, B, Y;
    if (!matmul_shapes(cp_fk_in(g, n, 0), cp_fk_in(g, n, 1), cp_fk_out(g, n, 0), &A, &B, &Y))
        return false;
    for (int i = 0; i < Y.nd; i++)
        if (Y.dims[i] == 0)
            return false; /* empty products: left to the reference */
    return int8_ok(g, n, &B, &Y);
}

/* What to add to the product (Gemm's C). */
struct mm_addend {
    int kind; /* 0 none, 1 bias row, 2 binary post-op */
    dnnl_memory_desc_t md;
    void *data;
};

/* Everything one matmul program is built from. */
struct mm_spec {
    const struct mm_operand *A, *B, *Y;
    void *a_data, *b_data;
    bool b_const;
    float out_scale;
    struct mm_addend add; /* added after the scale */
    float final_scale;    /* a linear post-op after that (Gemm's beta) */
    bool bf16;
    struct cp_dk_int8 q8; /* int8 compute (cp_dk_int8_of) */
    /* FusedMatMul's activation and residual (res_data NULL: none). */
    struct cp_act act;
    void *res_data;
    bool res_first;
};

/* The post-op chain: [C / bias add], [beta scale], then activation and
 * residual in order. OUT: *po (NULL when empty), bin[] the post-op index
 * of the addend's and the residual's binary add (-1 if none). */
static dnnl_status_t mm_post_ops(const struct mm_spec *sp, const dnnl_memory_desc_t *y_md,
                                 dnnl_post_ops_t *po, int *bin_add, int *bin_res)
{
    *po = NULL;
    *bin_add = *bin_res = -1;
    bool has_act = cp_act_has_dnnl(&sp->act);
    bool has_res = sp->res_data != NULL;
    if (sp->add.kind != 2 && sp->final_scale == 1.0f && !has_act && !has_res)
        return dnnl_success;
    dnnl_status_t s = dnnl_post_ops_create(po);
    int idx = 0;
    if (s == dnnl_success && sp->add.kind == 2) {
        s = dnnl_post_ops_append_binary(*po, dnnl_binary_add, &sp->add.md);
        *bin_add = idx++;
    }
    if (s == dnnl_success && sp->final_scale != 1.0f) {
        s = dnnl_post_ops_append_eltwise(*po, 1.0f, dnnl_eltwise_linear, sp->final_scale, 0.0f);
        idx++;
    }
    if (s == dnnl_success && has_res && sp->res_first) {
        s = dnnl_post_ops_append_binary(*po, dnnl_binary_add, y_md);
        *bin_res = idx++;
    }
    if (s == dnnl_success && has_act) {
        int n_act;
        s = cp_act_dnnl_append(&sp->act, *po, &n_act);
        idx += n_act;
    }
    if (s == dnnl_success && has_res && !sp->res_first) {
        s = dnnl_post_ops_append_binary(*po, dnnl_binary_add, y_md);
        *bin_res = idx++;
    }
    return s;
}

/* The s8 copy of a constant B, one [K, N] matrix (strides as given), quantized with one
 * scale per column n, into memory the program owns. OUT: *bm. */
static enum cp_status quantize_b(struct cp_dk_prog *p, const struct mm_spec *sp,
                                 const dnnl_memory_desc_t *b_user, int *bm)
{
    const struct mm_operand *B = sp->B;
    dnnl_memory_desc_t b_s8 = *b_user;
    b_s8.data_type = dnnl_s8;
    void *h = NULL;
    *bm = cp_dk_mem_owned(p, &b_s8);
    if (*bm < 0 || dnnl_memory_get_data_handle(p->mems[*bm], &h) != dnnl_success || !h)
        return CP_ERR_NOMEM;
    const float *b = sp->b_data;
    int8_t *q = h;
    int r = B->nd - 2; /* the leading dims are 1 (int8_ok) */
    for (int64_t kk = 0; kk < B->dims[r]; kk++)
        for (int64_t n = 0; n < B->dims[r + 1]; n++) {
            int64_t at = kk * B->strides[r] + n * B->strides[r + 1];
            float v = nearbyintf(b[at] / sp->q8.w_scales[n]);
            q[at] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v);
        }
    return CP_OK;
}

/* Build the program: [convert A,] [convert or reorder B,] matmul. */
static enum cp_status mm_build(struct cp_kexec *k, struct cp_diag *d, const struct mm_spec *spec)
{
    /* int8: the bias goes after the scales, as a post-op (the product is
     * an s32 sum until the output scales) */
    struct mm_spec local = *spec;
    const struct mm_spec *sp = &local;
    if (local.q8.on && local.add.kind == 1)
        local.add.kind = 2;
    const struct mm_operand *A = sp->A, *B = sp->B, *Y = sp->Y;
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_data_type_t cdt = sp->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t adt = cdt, bdt = cdt;
    if (sp->q8.on) {
        adt = sp->q8.x_signed ? dnnl_s8 : dnnl_u8;
        bdt = dnnl_s8;
    }
    dnnl_memory_desc_t a_user, a_md, b_user, b_md, y_md;
    if (dnnl_memory_desc_init_by_strides(&a_user, A->nd, A->dims, dnnl_f32, A->strides) ||
        dnnl_memory_desc_init_by_strides(&b_user, B->nd, B->dims, dnnl_f32, B->strides) ||
        dnnl_memory_desc_init_by_strides(&y_md, Y->nd, Y->dims, dnnl_f32, Y->strides))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    a_md = a_user;
    if ((sp->bf16 || sp->q8.on) &&
        dnnl_memory_desc_init_by_tag(&a_md, A->nd, A->dims, adt,
                                     A->nd == 2   ? dnnl_ab
                                     : A->nd == 3 ? dnnl_abc
                                     : A->nd == 4 ? dnnl_abcd
                                     : A->nd == 5 ? dnnl_abcde
                                                  : dnnl_abcdef) != dnnl_success)
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    if (sp->b_const)
        dnnl_memory_desc_init_by_tag(&b_md, B->nd, B->dims, bdt, dnnl_format_tag_any);
    else if (sp->bf16)
        dnnl_memory_desc_init_by_tag(&b_md, B->nd, B->dims, cdt,
                                     B->nd == 2   ? dnnl_ab
                                     : B->nd == 3 ? dnnl_abc
                                     : B->nd == 4 ? dnnl_abcd
                                     : B->nd == 5 ? dnnl_abcde
                                                  : dnnl_abcdef);
    else
        b_md = b_user;
    dnnl_matmul_desc_t md;
    dnnl_status_t s =
        dnnl_matmul_desc_init(&md, &a_md, &b_md, sp->add.kind == 1 ? &sp->add.md : NULL, &y_md);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "matmul descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_post_ops_t po = NULL;
    int bin_add, bin_res;
    if (!attr)
        return cp_dk_fail(k, d, "attribute", dnnl_out_of_memory);
    float *oscales = NULL;
    if (sp->q8.on) {
        int64_t nn = Y->dims[Y->nd - 1];
        oscales = malloc((size_t)nn * sizeof *oscales);
        if (!oscales) {
            dnnl_primitive_attr_destroy(attr);
            return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
        }
        for (int64_t n = 0; n < nn; n++)
            oscales[n] = sp->out_scale * sp->q8.x_scale * sp->q8.w_scales[n];
        s = dnnl_primitive_attr_set_output_scales(attr, nn, 1 << (Y->nd - 1), oscales);
    } else if (sp->out_scale != 1.0f) {
        s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &sp->out_scale);
    }
    if (s == dnnl_success)
        s = mm_post_ops(sp, &y_md, &po, &bin_add, &bin_res);
    if (s == dnnl_success && po)
        s = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &md, attr, p->engine, NULL);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    free(oscales);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "matmul primitive descriptor", s);
    enum cp_status st = CP_ERR_INTERNAL;
    int bm = cp_dk_mem_user(p, &b_user, sp->b_data);
    if (sp->q8.on) {
        if ((st = quantize_b(p, sp, &b_user, &bm)) != CP_OK)
            goto out;
        b_user.data_type = dnnl_s8;
    }
    if (sp->b_const) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (!dnnl_memory_desc_equal(want, &b_user)) {
            int packed = cp_dk_mem_owned(p, want);
            if ((st = cp_dk_reorder_now(p, bm, packed)) != CP_OK)
                goto out;
            bm = packed;
        }
    } else if (sp->bf16) {
        int bb = cp_dk_mem_scratch(p, &b_md);
        if ((st = cp_dk_step_to_bf16(p, bm, bb)) != CP_OK)
            goto out;
        bm = bb;
    }
    int am = cp_dk_mem_user(p, &a_user, sp->a_data);
    if (sp->bf16 || sp->q8.on) {
        int ab = cp_dk_mem_scratch(p, &a_md);
        if ((st = sp->q8.on ? cp_dk_step_quantize(p, am, ab, 1.0f / sp->q8.x_scale)
                            : cp_dk_step_to_bf16(p, am, ab)) != CP_OK)
            goto out;
        am = ab;
    }
    int ids[6] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, 0, 0, 0};
    int mems[6] = {am, bm, cp_dk_mem_user(p, &y_md, k->out_data[0]), -1, -1, -1};
    int nargs = 3;
    if (sp->add.kind == 1) {
        ids[nargs] = DNNL_ARG_BIAS;
        mems[nargs++] = cp_dk_mem_user(p, &sp->add.md, sp->add.data);
    } else if (sp->add.kind == 2) {
        ids[nargs] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(bin_add) | DNNL_ARG_SRC_1;
        mems[nargs++] = cp_dk_mem_user(p, &sp->add.md, sp->add.data);
    }
    if (sp->res_data) {
        ids[nargs] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(bin_res) | DNNL_ARG_SRC_1;
        mems[nargs++] = cp_dk_mem_user(p, &y_md, sp->res_data);
    }
    if ((st = cp_dk_step_add(p, pd, nargs, ids, mems)) != CP_OK)
        goto out;
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    if (sp->q8.on)
        k->impl = k->node->op == CP_OP_FUSED_MATMUL ? "onednn:fused_matmul:int8"
                  : k->node->op == CP_OP_GEMM       ? "onednn:gemm:int8"
                                                    : "onednn:matmul:int8";
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
    struct mm_spec sp = {.A = &A,
                         .B = &B,
                         .Y = &Y,
                         .a_data = k->in_data[0],
                         .b_data = k->in_data[1],
                         .b_const = k->in[1]->kind == CP_TENSOR_INITIALIZER,
                         .out_scale = 1.0f,
                         .final_scale = 1.0f,
                         .bf16 = wants_bf16(k->node)};
    cp_dk_int8_of(k->node, &sp.q8);
    return mm_build(k, d, &sp);
}

const struct cp_kernel cp_dnnl_matmul = {"onednn:matmul", CP_OP_MATMUL,     matmul_supports,
                                         matmul_prepare,  cp_dk_kernel_run, cp_dk_kernel_release,
                                         cp_dk_isa_bf16};

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
    if (n->n_inputs < 2 || n->n_inputs > 3 || n->n_outputs != 1 || !precision_ok(n) ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    struct gemm_geom gm;
    return gemm_geom(n, cp_fk_in(g, n, 0), cp_fk_in(g, n, 1), cp_fk_in(g, n, 2), cp_fk_out(g, n, 0),
                     &gm) &&
           int8_ok(g, n, &gm.B, &gm.Y);
}

static enum cp_status gemm_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct gemm_geom gm;
    const struct cp_tensor *c = k->node->n_inputs > 2 ? k->in[2] : NULL;
    if (!gemm_geom(k->node, k->in[0], k->in[1], c, k->out[0], &gm))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': Gemm shapes do not match", k->node->name);
    struct mm_spec sp = {.A = &gm.A,
                         .B = &gm.B,
                         .Y = &gm.Y,
                         .a_data = k->in_data[0],
                         .b_data = k->in_data[1],
                         .b_const = k->in[1]->kind == CP_TENSOR_INITIALIZER,
                         .bf16 = wants_bf16(k->node)};
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
    sp.out_scale = out_scale;
    sp.add = add;
    sp.final_scale = final_scale;
    cp_dk_int8_of(k->node, &sp.q8);
    return mm_build(k, d, &sp);
}

const struct cp_kernel cp_dnnl_gemm = {"onednn:gemm", CP_OP_GEMM,       gemm_supports,
                                       gemm_prepare,  cp_dk_kernel_run, cp_dk_kernel_release,
                                       cp_dk_isa_bf16};

/* ---- FusedMatMul --------------------------------------------------------- */

/* Operands of rank >= 2 padded to a common rank, then op() applied as a
 * swap of the last two dims and strides (no copy). */
static bool fmm_shapes(const struct cp_node *n, const struct cp_tensor *a,
                       const struct cp_tensor *b, const struct cp_tensor *y, struct mm_operand *A,
                       struct mm_operand *B, struct mm_operand *Y)
{
    int64_t ad[CP_MAX_RANK], bd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int ra = cp_fk_dims(a, ad), rb = cp_fk_dims(b, bd), ry = cp_fk_dims(y, yd);
    if (ra < 2 || rb < 2 || ry < 2)
        return false;
    int r = ra > rb ? ra : rb;
    if (r > DNNL_MAX_NDIMS || ry != r)
        return false;
    A->nd = B->nd = Y->nd = r;
    for (int i = 0; i < r; i++) {
        A->dims[i] = i - (r - ra) >= 0 ? ad[i - (r - ra)] : 1;
        B->dims[i] = i - (r - rb) >= 0 ? bd[i - (r - rb)] : 1;
    }
    set_plain_strides(A);
    set_plain_strides(B);
    struct mm_operand *ops[2] = {A, B};
    const char *attrs[2] = {"transA", "transB"};
    for (int o = 0; o < 2; o++)
        if (cp_node_attr_int(n, attrs[o], 0)) {
            struct mm_operand *m = ops[o];
            int64_t t = m->dims[r - 1];
            m->dims[r - 1] = m->dims[r - 2];
            m->dims[r - 2] = t;
            t = m->strides[r - 1];
            m->strides[r - 1] = m->strides[r - 2];
            m->strides[r - 2] = t;
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
    for (int i = 0; i < r; i++)
        if (Y->dims[i] != yd[i] || Y->dims[i] == 0 || A->dims[i] == 0 || B->dims[i] == 0)
            return false;
    set_plain_strides(Y);
    return true;
}

static bool fmm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs < 2 || n->n_inputs > 4 || n->n_outputs != 1 || !precision_ok(n) ||
        cp_act_of(n).kind == CP_ACT_BAD || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *y = cp_fk_out(g, n, 0), *bias = cp_fk_in(g, n, 2),
                           *res = cp_fk_in(g, n, 3);
    for (size_t i = 0; i < n->n_inputs; i++)
        if (!cp_tensor_is_plain(cp_fk_in(g, n, i)))
            return false;
    struct mm_operand A, B, Y;
    if (!fmm_shapes(n, cp_fk_in(g, n, 0), cp_fk_in(g, n, 1), y, &A, &B, &Y) ||
        !int8_ok(g, n, &B, &Y))
        return false;
    if (bias && (!cp_fk_in_is(g, n, 2, CP_DTYPE_F32) || bias->shape.rank != 1 ||
                 bias->shape.dims[0].value != Y.dims[Y.nd - 1]))
        return false;
    return !res || (cp_fk_in_is(g, n, 3, CP_DTYPE_F32) && cp_shape_equal(&res->shape, &y->shape));
}

static enum cp_status fmm_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct mm_operand A, B, Y;
    if (!fmm_shapes(k->node, k->in[0], k->in[1], k->out[0], &A, &B, &Y))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': FusedMatMul shapes do not match",
                           k->node->name);
    float alpha = cp_node_attr_float(k->node, "alpha", 1.0f);
    struct mm_spec sp = {.A = &A,
                         .B = &B,
                         .Y = &Y,
                         .a_data = k->in_data[0],
                         .b_data = k->in_data[1],
                         .b_const = k->in[1]->kind == CP_TENSOR_INITIALIZER,
                         .out_scale = alpha,
                         .final_scale = 1.0f,
                         .bf16 = wants_bf16(k->node),
                         .act = cp_act_of(k->node),
                         .res_first = cp_node_attr_int(k->node, "residual_first", 0) != 0};
    if (k->node->n_inputs > 2 && k->in[2]) {
        dnnl_dims_t bd, bs;
        for (int i = 0; i < Y.nd; i++) {
            bd[i] = i == Y.nd - 1 ? Y.dims[i] : 1;
            bs[i] = i == Y.nd - 1 ? 1 : Y.dims[Y.nd - 1];
        }
        if (dnnl_memory_desc_init_by_strides(&sp.add.md, Y.nd, bd, dnnl_f32, bs) != dnnl_success)
            return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
        sp.add.data = k->in_data[2];
        sp.add.kind = alpha == 1.0f ? 1 : 2; /* a scaled product: the bias goes after */
    }
    if (k->node->n_inputs > 3 && k->in[3])
        sp.res_data = k->in_data[3];
    cp_dk_int8_of(k->node, &sp.q8);
    return mm_build(k, d, &sp);
}

const struct cp_kernel cp_dnnl_fused_matmul = {
    "onednn:fused_matmul", CP_OP_FUSED_MATMUL,   fmm_supports,  fmm_prepare,
    cp_dk_kernel_run,      cp_dk_kernel_release, cp_dk_isa_bf16};
