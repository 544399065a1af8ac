/*
 * Unary elementwise ops on oneDNN's eltwise primitive (f32, any shape, seen
 * as 1-D): Tanh, and the ops the C kernels in fast_unary.c also cover
 * (Relu, LeakyRelu, Sigmoid, Exp, Sqrt, Clip with constant bounds), which
 * the registry reaches only when those are listed after these.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"

#include <math.h>

/* Algorithm and parameters for a node; false when not expressible. */
static bool elt_params(const struct cp_graph *g, const struct cp_node *n, dnnl_alg_kind_t *alg,
                       float *alpha, float *beta)
{
    *alpha = 0.0f;
    *beta = 0.0f;
    switch (n->op) {
    case CP_OP_TANH:
        *alg = dnnl_eltwise_tanh;
        return n->n_inputs == 1;
    case CP_OP_RELU:
        *alg = dnnl_eltwise_relu;
        return n->n_inputs == 1;
    case CP_OP_LEAKY_RELU:
        *alg = dnnl_eltwise_relu;
        *alpha = cp_node_attr_float(n, "alpha", 0.01f);
        return n->n_inputs == 1;
    case CP_OP_SIGMOID:
        *alg = dnnl_eltwise_logistic;
        return n->n_inputs == 1;
    case CP_OP_EXP:
        *alg = dnnl_eltwise_exp;
        return n->n_inputs == 1;
    case CP_OP_SQRT:
        *alg = dnnl_eltwise_sqrt;
        return n->n_inputs == 1;
    case CP_OP_CLIP: {
        *alg = dnnl_eltwise_clip;
        *alpha = -INFINITY;
        *beta = INFINITY;
        float v[1];
        size_t cnt;
        if (n->n_inputs > 3 || cp_fk_opset(g) < 11) /* attribute bounds: the reference's */
            return false;
        if (cp_fk_in(g, n, 1)) {
            if (!cp_fk_const_floats(cp_fk_in(g, n, 1), v, 1, &cnt) || cnt != 1)
                return false;
            *alpha = v[0];
        }
        if (cp_fk_in(g, n, 2)) {
            if (!cp_fk_const_floats(cp_fk_in(g, n, 2), v, 1, &cnt) || cnt != 1)
                return false;
            *beta = v[0];
        }
        return true;
    }
    default:
        return false;
    }
}

static bool elt_supports(const struct cp_graph *g, const struct cp_node *n)
{
    dnnl_alg_kind_t alg;
    float a, b;
    return n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) &&
           cp_shape_equal(&cp_fk_in(g, n, 0)->shape, &cp_fk_out(g, n, 0)->shape) &&
           cp_shape_numel(&cp_fk_in(g, n, 0)->shape) > 0 && elt_params(g, n, &alg, &a, &b);
}

static enum cp_status elt_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    dnnl_alg_kind_t alg;
    float a, b;
    if (!elt_params(k->g, k->node, &alg, &a, &b))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': unsupported eltwise", k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_dims_t dims = {cp_shape_numel(&k->in[0]->shape)};
    dnnl_memory_desc_t md;
    dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_f32, dnnl_a);
    dnnl_eltwise_desc_t ed;
    dnnl_status_t s = dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &md, a, b);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "eltwise descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &ed, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "eltwise primitive descriptor", s);
    int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    int mems[2] = {cp_dk_mem_user(p, &md, k->in_data[0]), cp_dk_mem_user(p, &md, k->out_data[0])};
    enum cp_status st = cp_dk_step_add(p, pd, 2, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_dk_fail(k, d, "eltwise primitive", dnnl_runtime_error);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

#define ELT_KERNEL(var, opv)                                                                       \
    const struct cp_kernel var = {                                                                 \
        "onednn:eltwise",     opv, elt_supports, elt_prepare, cp_dk_kernel_run,                    \
        cp_dk_kernel_release, NULL}

ELT_KERNEL(cp_dnnl_tanh, CP_OP_TANH);
ELT_KERNEL(cp_dnnl_relu, CP_OP_RELU);
ELT_KERNEL(cp_dnnl_leaky_relu, CP_OP_LEAKY_RELU);
ELT_KERNEL(cp_dnnl_sigmoid, CP_OP_SIGMOID);
ELT_KERNEL(cp_dnnl_exp, CP_OP_EXP);
ELT_KERNEL(cp_dnnl_sqrt, CP_OP_SQRT);
ELT_KERNEL(cp_dnnl_clip, CP_OP_CLIP);
