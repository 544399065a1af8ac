/*
 * Add, Sub, Mul and Div on oneDNN's binary primitive, f32, plain layouts,
 * with ONNX (numpy-style) broadcasting as far as oneDNN 2.6 allows it.
 *
 * The primitive wants src0 in the shape of dst and src1 broadcastable to
 * it: same rank, each dim of src1 either 1 or the dst dim. Both operands
 * are left-padded with 1s to the output rank. When src0 is the one that
 * broadcasts, Add and Mul swap their operands (exact in IEEE arithmetic);
 * Sub and Div, and nodes where both operands broadcast ([3,1,5] - [1,4,1]),
 * are declined and stay with the C kernels.
 *
 * Shapes keep their dims rather than being merged, so that a per-channel
 * operand ([1,C,1,1] against NCHW) reaches oneDNN as the per-channel
 * pattern its JIT kernels recognise.
 *
 * In a layout region (NHWC or blocked, layout.h) the full operand and the
 * result share their tag, and the other operand is a single element or a
 * per-channel vector ([1,C,1,1] or [N,C,1,1]), whose bytes are the same in
 * every layout: squeeze-excitation's scaling then stays in the region
 * instead of costing two TransData of the whole activation.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

/* How the node maps onto the primitive: dims of dst and of src1 (padded to
 * `rank`), and whether the node's inputs go in swapped. */
struct bin_geom {
    int rank;
    int64_t dst[CP_MAX_RANK];
    int64_t src1[CP_MAX_RANK];
    bool swap;
    bool tagged; /* the result and the full operand are NHWC or blocked */
};

/* `s` left-padded with 1s to `rank` dims. False when `s` has more. */
static bool pad_dims(const struct cp_shape *s, int rank, int64_t *out)
{
    int lead = rank - s->rank;
    if (lead < 0)
        return false;
    for (int i = 0; i < rank; i++)
        out[i] = i < lead ? 1 : s->dims[i - lead].value;
    return true;
}

/* Whether every dim of `b` is 1 or the matching dim of `full`. */
static bool bcasts_to(const int64_t *b, const int64_t *full, int rank)
{
    for (int i = 0; i < rank; i++)
        if (b[i] != 1 && b[i] != full[i])
            return false;
    return true;
}

static bool same_dims(const int64_t *a, const int64_t *b, int rank)
{
    for (int i = 0; i < rank; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static bool bin_alg(enum cp_op op, dnnl_alg_kind_t *alg)
{
    switch (op) {
    case CP_OP_ADD:
        *alg = dnnl_binary_add;
        return true;
    case CP_OP_SUB:
        *alg = dnnl_binary_sub;
        return true;
    case CP_OP_MUL:
        *alg = dnnl_binary_mul;
        return true;
    case CP_OP_DIV:
        *alg = dnnl_binary_div;
        return true;
    default:
        return false;
    }
}

static bool bin_geom(const struct cp_graph *g, const struct cp_node *n, struct bin_geom *geo)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_shape *o = &cp_fk_out(g, n, 0)->shape;
    if (cp_shape_numel(o) <= 0)
        return false;
    /* A scalar result is a 1-element 1-D tensor to oneDNN. */
    int rank = o->rank ? o->rank : 1;
    int64_t a[CP_MAX_RANK], b[CP_MAX_RANK];
    if (!pad_dims(o, rank, geo->dst) || !pad_dims(&cp_fk_in(g, n, 0)->shape, rank, a) ||
        !pad_dims(&cp_fk_in(g, n, 1)->shape, rank, b))
        return false;
    geo->rank = rank;
    const int64_t *src1;
    if (same_dims(a, geo->dst, rank) && bcasts_to(b, geo->dst, rank)) {
        geo->swap = false;
        src1 = b;
    } else if ((n->op == CP_OP_ADD || n->op == CP_OP_MUL) && same_dims(b, geo->dst, rank) &&
               bcasts_to(a, geo->dst, rank)) {
        geo->swap = true;
        src1 = a;
    } else {
        return false;
    }
    for (int i = 0; i < rank; i++)
        geo->src1[i] = src1[i];
    const struct cp_tensor *y = cp_fk_out(g, n, 0), *full = cp_fk_in(g, n, geo->swap ? 1 : 0);
    const struct cp_tensor *other = cp_fk_in(g, n, geo->swap ? 0 : 1);
    geo->tagged = !cp_tensor_is_plain(y) || !cp_tensor_is_plain(full);
    if (!geo->tagged)
        return cp_tensor_is_plain(other);
    /* the broadcast operand: one element, or one per channel */
    int64_t ones = 1;
    for (int i = 0; i < rank; i++)
        ones *= src1[i];
    bool per_channel = rank == 4 && src1[1] == geo->dst[1] && src1[2] == 1 && src1[3] == 1;
    return y->layout == full->layout && rank == 4 && (ones == 1 || per_channel);
}

static bool bin_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct bin_geom geo;
    dnnl_alg_kind_t alg;
    return bin_alg(n->op, &alg) && bin_geom(g, n, &geo);
}

static enum cp_status bin_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct bin_geom geo;
    dnnl_alg_kind_t alg;
    if (!bin_alg(k->node->op, &alg) || !bin_geom(k->g, k->node, &geo))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': operands oneDNN cannot broadcast",
                           k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    enum cp_status st = CP_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t dmd, smd;
    bool dmd_ok = geo.tagged ? cp_dk_md_tensor(&dmd, k->out[0], dnnl_f32)
                             : cp_dk_md_plain(&dmd, geo.rank, geo.dst, CP_DTYPE_F32);
    /* A per-channel operand of a tagged result is described in the
     * result's tag (the same bytes): with a plain one oneDNN 2.6 takes its
     * reference loop. A single element stays plain (a blocked tag would
     * pad it to a whole block). */
    bool smd_ok;
    if (geo.tagged && geo.src1[1] > 1) {
        dnnl_dims_t sd = {geo.src1[0], geo.src1[1], geo.src1[2], geo.src1[3]};
        smd_ok = dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32,
                                              cp_dk_layout_tag(k->out[0]->layout)) == dnnl_success;
    } else {
        smd_ok = cp_dk_md_plain(&smd, geo.rank, geo.src1, CP_DTYPE_F32);
    }
    if (!dmd_ok || !smd_ok) {
        st = cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
        goto out_release;
    }
    dnnl_binary_desc_t bd;
    dnnl_status_t s = dnnl_binary_desc_init(&bd, alg, &dmd, &smd, &dmd);
    if (s != dnnl_success) {
        st = cp_dk_fail(k, d, "binary descriptor", s);
        goto out_release;
    }
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    s = attr ? dnnl_primitive_desc_create(&pd, &bd, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) {
        st = cp_dk_fail(k, d, "binary primitive descriptor", s);
        goto out_release;
    }
    void *src0 = k->in_data[geo.swap ? 1 : 0], *src1 = k->in_data[geo.swap ? 0 : 1];
    int ids[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST};
    int mems[3] = {cp_dk_mem_user(p, &dmd, src0), cp_dk_mem_user(p, &smd, src1),
                   cp_dk_mem_user(p, &dmd, k->out_data[0])};
    st = cp_dk_step_add(p, pd, 3, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK) {
        st = cp_dk_fail(k, d, "binary primitive", dnnl_runtime_error);
        goto out_release;
    }
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;

out_release:
    /* The plan does not release a kernel whose prepare failed. */
    cp_dk_kernel_release(k);
    return st;
}

#define BIN_KERNEL(var, opv)                                                                       \
    const struct cp_kernel var = {                                                                 \
        "onednn:binary",      opv, bin_supports, bin_prepare, cp_dk_kernel_run,                    \
        cp_dk_kernel_release, NULL}

BIN_KERNEL(cp_dnnl_add, CP_OP_ADD);
BIN_KERNEL(cp_dnnl_sub, CP_OP_SUB);
BIN_KERNEL(cp_dnnl_mul, CP_OP_MUL);
BIN_KERNEL(cp_dnnl_div, CP_OP_DIV);
