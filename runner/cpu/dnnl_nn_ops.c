/* LRN on oneDNN (lrn_across_channels), f32, in the tensor's own layout
 * (plain, NHWC or blocked; input and output alike).
 *
 * ONNX sums the squares of channels c - floor((size-1)/2) ..
 * c + ceil((size-1)/2); oneDNN's window is centred, which is the same only
 * for an odd size, so an even size goes to the reference kernel. Both
 * divide alpha by size. */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

static bool lrn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 1 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    int64_t size = cp_node_attr_int(n, "size", 0);
    return size >= 1 && size % 2 == 1 && x->shape.rank >= 3 && x->shape.rank <= 5 &&
           cp_shape_equal(&x->shape, &y->shape) && x->layout == y->layout &&
           cp_shape_numel(&x->shape) > 0;
}

static enum cp_status lrn_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_memory_desc_t md;
    if (!cp_dk_md_tensor(&md, k->in[0], dnnl_f32))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': oneDNN cannot describe '%s'",
                           k->node->name, k->in[0]->name);
    int64_t size = cp_node_attr_int(k->node, "size", 1);
    float alpha = cp_node_attr_float(k->node, "alpha", 1e-4f);
    float beta = cp_node_attr_float(k->node, "beta", 0.75f);
    float bias = cp_node_attr_float(k->node, "bias", 1.0f);
    dnnl_lrn_desc_t ld;
    dnnl_status_t s = dnnl_lrn_forward_desc_init(
        &ld, dnnl_forward_inference, dnnl_lrn_across_channels, &md, size, alpha, beta, bias);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "lrn descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &ld, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "lrn primitive descriptor", s);
    int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    int mems[2] = {cp_dk_mem_user(p, &md, k->in_data[0]), cp_dk_mem_user(p, &md, k->out_data[0])};
    enum cp_status st = cp_dk_step_add(p, pd, 2, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_dk_fail(k, d, "lrn primitive", dnnl_runtime_error);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_lrn = {"onednn:lrn", CP_OP_LRN,        lrn_supports,
                                      lrn_prepare,  cp_dk_kernel_run, cp_dk_kernel_release,
                                      NULL};
