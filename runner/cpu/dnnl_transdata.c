/*
 * TransData on oneDNN: one reorder between the memory descriptors of the
 * source and destination layouts (nchw, nhwc, nChw8c, nChw16c) of a rank-4
 * tensor, for the element types whose reorder is a bit-exact move on every
 * CPU: f32, s32, s8, u8. 2-byte floats go to the reference kernel (a
 * byte copy): oneDNN 2.6 moves bf16 as bits only in its AVX-512 reorder,
 * and elsewhere (and for f16 everywhere) converts through f32, which on an
 * AVX2 CPU flushed bf16 subnormals to zero, turned -0 into +0 and quieted
 * signalling NaNs. Converted models keep tensors f32 at node boundaries
 * (docs/layout-and-precision.md), so such TransData nodes are rare. Also
 * the descriptor helpers of layout.h that the layout-aware oneDNN kernels
 * share.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

dnnl_format_tag_t cp_dk_layout_tag(enum cp_layout l)
{
    switch (l) {
    case CP_LAYOUT_NCHW:
        return dnnl_nchw;
    case CP_LAYOUT_NHWC:
        return dnnl_nhwc;
    case CP_LAYOUT_NCHW8C:
        return dnnl_nChw8c;
    case CP_LAYOUT_NCHW16C:
        return dnnl_nChw16c;
    default:
        return dnnl_format_tag_undef;
    }
}

bool cp_dk_md_tensor(dnnl_memory_desc_t *md, const struct cp_tensor *t, dnnl_data_type_t dt)
{
    int64_t dims[CP_MAX_RANK];
    int r = cp_fk_dims(t, dims);
    if (r < 0 || dt == dnnl_data_type_undef)
        return false;
    if (!cp_layout_is_plain(t->layout)) {
        if (r != 4 || !cp_layout_fits(t->layout, &t->shape))
            return false;
        dnnl_dims_t dd = {dims[0], dims[1], dims[2], dims[3]};
        return dnnl_memory_desc_init_by_tag(md, 4, dd, dt, cp_dk_layout_tag(t->layout)) ==
               dnnl_success;
    }
    if (r > DNNL_MAX_NDIMS)
        return false;
    dnnl_dims_t dd, st;
    int nd = r ? r : 1;
    if (r == 0)
        dd[0] = 1;
    for (int i = 0; i < r; i++)
        dd[i] = dims[i];
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        st[i] = s;
        s *= dd[i];
    }
    return dnnl_memory_desc_init_by_strides(md, nd, dd, dt, st) == dnnl_success;
}

/* oneDNN's type for an element type it moves bit for bit (see above). */
static dnnl_data_type_t elem_type(enum cp_dtype dt)
{
    switch (dt) {
    case CP_DTYPE_F32:
        return dnnl_f32;
    case CP_DTYPE_I32:
        return dnnl_s32;
    case CP_DTYPE_I8:
        return dnnl_s8;
    case CP_DTYPE_U8:
        return dnnl_u8;
    default:
        return dnnl_data_type_undef;
    }
}

static bool formats(const struct cp_node *n, enum cp_layout *src, enum cp_layout *dst)
{
    *src = cp_layout_from_name(cp_node_attr_string(n, "src_format", ""));
    *dst = cp_layout_from_name(cp_node_attr_string(n, "dst_format", ""));
    return *src != CP_LAYOUT_UNDEF && *dst != CP_LAYOUT_UNDEF;
}

/* The layout a format stands for on a rank-4 tensor: plain ones are NCHW. */
static enum cp_layout as4(enum cp_layout l)
{
    return cp_layout_is_plain(l) ? CP_LAYOUT_NCHW : l;
}

static bool td_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    enum cp_layout src, dst;
    int64_t xd[CP_MAX_RANK];
    if (n->n_inputs != 1 || n->n_outputs != 1 || !x || !y || !formats(n, &src, &dst) ||
        x->dtype != y->dtype || elem_type(x->dtype) == dnnl_data_type_undef ||
        cp_fk_dims(x, xd) != 4 || !cp_shape_equal(&x->shape, &y->shape))
        return false;
    /* plain to plain is a copy: the reference kernel's memcpy */
    if (as4(src) == as4(dst) || cp_shape_numel(&x->shape) <= 0)
        return false;
    if ((cp_layout_is_plain(x->layout) ? !cp_layout_is_plain(src) : x->layout != src) ||
        (cp_layout_is_plain(y->layout) ? !cp_layout_is_plain(dst) : y->layout != dst))
        return false;
    return cp_layout_fits(src, &x->shape) && cp_layout_fits(dst, &x->shape);
}

static enum cp_status td_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    enum cp_layout src, dst;
    if (!formats(k->node, &src, &dst))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad src_format / dst_format",
                           k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_tensor *x = k->in[0];
    dnnl_dims_t dd = {x->shape.dims[0].value, x->shape.dims[1].value, x->shape.dims[2].value,
                      x->shape.dims[3].value};
    dnnl_data_type_t t = elem_type(x->dtype);
    dnnl_memory_desc_t smd, dmd;
    if (dnnl_memory_desc_init_by_tag(&smd, 4, dd, t, cp_dk_layout_tag(as4(src))) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dmd, 4, dd, t, cp_dk_layout_tag(as4(dst))) != dnnl_success)
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    int a = cp_dk_mem_user(p, &smd, k->in_data[0]), b = cp_dk_mem_user(p, &dmd, k->out_data[0]);
    if (a < 0 || b < 0 || cp_dk_step_reorder(p, a, b) != CP_OK)
        return cp_dk_fail(k, d, "reorder", dnnl_unimplemented);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_trans_data = {
    "onednn:transdata", CP_OP_TRANS_DATA,     td_supports, td_prepare,
    cp_dk_kernel_run,   cp_dk_kernel_release, NULL};
