/*
 * Transpose as a oneDNN reorder: the source is described in the output's
 * dimension order with permuted strides, the destination is plain, and the
 * reorder copies between the two. Any element type works: 8-byte elements
 * (i64) are seen as pairs of s32 and 2-byte ones as pairs of u8, through an
 * extra innermost dimension.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"

/* The permutation of a Transpose node (default: reversed dims). */
static bool transpose_perm(const struct cp_node *n, int rank, int *perm)
{
    const struct cp_attr *a = cp_node_attr(n, "perm");
    bool seen[CP_MAX_RANK] = {false};
    for (int i = 0; i < rank; i++) {
        int64_t p =
            a ? (a->type == CP_ATTR_INTS && a->n == (size_t)rank ? a->ints[i] : -1) : rank - 1 - i;
        if (p < 0)
            p += a ? rank : 0;
        if (p < 0 || p >= rank || seen[p])
            return false;
        seen[p] = true;
        perm[i] = (int)p;
    }
    return true;
}

static bool elem_type(enum cp_dtype dt, dnnl_data_type_t *t, int *pairs)
{
    *pairs = 1;
    switch (cp_dtype_size(dt)) {
    case 1:
        *t = dnnl_u8;
        return true;
    case 2:
        *t = dnnl_u8;
        *pairs = 2;
        return true;
    case 4:
        *t = dnnl_s32;
        return true;
    case 8:
        *t = dnnl_s32;
        *pairs = 2;
        return true;
    default:
        return false;
    }
}

static bool reorder_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    int perm[CP_MAX_RANK];
    dnnl_data_type_t t;
    int pairs;
    if (n->n_inputs != 1 || n->n_outputs != 1 || !x || !y || x->dtype != y->dtype ||
        !cp_shape_is_static(&x->shape) || !cp_shape_is_static(&y->shape) ||
        !elem_type(x->dtype, &t, &pairs) || x->shape.rank < 1 ||
        x->shape.rank + 1 > DNNL_MAX_NDIMS || !transpose_perm(n, x->shape.rank, perm))
        return false;
    if (cp_shape_numel(&x->shape) <= 0)
        return false;
    for (int i = 0; i < x->shape.rank; i++)
        if (y->shape.dims[i].value != x->shape.dims[perm[i]].value)
            return false;
    return true;
}

static enum cp_status reorder_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    const struct cp_tensor *x = k->in[0];
    int r = x->shape.rank, perm[CP_MAX_RANK], pairs;
    dnnl_data_type_t t;
    if (!transpose_perm(k->node, r, perm) || !elem_type(x->dtype, &t, &pairs))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad perm", k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_dims_t xs, sdims, sstr, ddims, dstr;
    int64_t s = pairs;
    for (int i = r - 1; i >= 0; i--) {
        xs[i] = s;
        s *= x->shape.dims[i].value;
    }
    for (int i = 0; i < r; i++) {
        sdims[i] = ddims[i] = x->shape.dims[perm[i]].value;
        sstr[i] = xs[perm[i]];
    }
    int nd = r;
    if (pairs > 1) {
        sdims[nd] = ddims[nd] = pairs;
        sstr[nd] = 1;
        nd++;
    }
    s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        dstr[i] = s;
        s *= ddims[i];
    }
    dnnl_memory_desc_t smd, dmd;
    if (dnnl_memory_desc_init_by_strides(&smd, nd, sdims, t, sstr) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&dmd, nd, ddims, t, dstr) != dnnl_success)
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    int a = cp_dk_mem_user(p, &smd, k->in_data[0]), b = cp_dk_mem_user(p, &dmd, k->out_data[0]);
    if (cp_dk_step_reorder(p, a, b) != CP_OK)
        return cp_dk_fail(k, d, "reorder", dnnl_unimplemented);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_transpose = {"onednn:reorder",
                                            CP_OP_TRANSPOSE,
                                            reorder_supports,
                                            reorder_prepare,
                                            cp_dk_kernel_run,
                                            cp_dk_kernel_release,
                                            NULL};
