/*
 * Softmax, LayerNormalization, BatchNormalization (inference) and
 * InstanceNormalization on oneDNN, f32, plain layouts.
 *
 * Softmax before opset 13 works on the input coerced to 2-D at `axis`
 * ([prod(dims before axis), prod(dims from axis)]); from 13 on it works
 * along `axis`. Both map onto softmax_v2 with a reshaped descriptor.
 * LayerNormalization normalises over the dims from `axis` on: the tensor is
 * seen as [outer, inner] and scale/bias as vectors of `inner`.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <stdlib.h>
#include <string.h>

static int norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

/* Softmax as [outer, mid, inner] with the softmax over `mid`. */
static bool softmax_geom(const struct cp_graph *g, const struct cp_node *n,
                         const struct cp_tensor *x, int64_t *dims3)
{
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 1)
        return false;
    bool old = cp_fk_opset(g) < 13;
    int ax = norm_axis(cp_node_attr_int(n, "axis", old ? 1 : -1), r);
    if (ax < 0)
        return false;
    int64_t outer = 1, mid = 1, inner = 1;
    for (int i = 0; i < r; i++) {
        if (i < ax)
            outer *= xd[i];
        else if (i == ax || old)
            mid *= xd[i];
        else
            inner *= xd[i];
    }
    dims3[0] = outer;
    dims3[1] = mid;
    dims3[2] = inner;
    return outer * mid * inner > 0;
}

static bool softmax_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t d3[3];
    return n->n_inputs == 1 && n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) && softmax_geom(g, n, cp_fk_in(g, n, 0), d3) &&
           /* impl "exact" asks for libm's expf: fast_softmax.c or the reference */
           strcmp(cp_node_attr_string(n, "impl", "fast"), "exact") != 0;
}

static enum cp_status softmax_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    int64_t d3[3];
    if (!softmax_geom(k->g, k->node, k->in[0], d3))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad softmax axis", k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    /* Drop the trailing 1 so the common last-axis case is a 2-D softmax. */
    int nd = d3[2] == 1 ? 2 : 3;
    dnnl_dims_t dims = {d3[0], d3[1], d3[2]};
    dnnl_memory_desc_t md;
    dnnl_memory_desc_init_by_tag(&md, nd, dims, dnnl_f32, nd == 2 ? dnnl_ab : dnnl_abc);
    dnnl_softmax_v2_desc_t sd;
    dnnl_status_t s = dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference,
                                                        dnnl_softmax_accurate, &md, &md, 1);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "softmax descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &sd, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "softmax primitive descriptor", s);
    int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    int mems[2] = {cp_dk_mem_user(p, &md, k->in_data[0]), cp_dk_mem_user(p, &md, k->out_data[0])};
    enum cp_status st = cp_dk_step_add(p, pd, 2, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_dk_fail(k, d, "softmax primitive", dnnl_runtime_error);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_softmax = {
    "onednn:softmax",     CP_OP_SOFTMAX, softmax_supports, softmax_prepare, cp_dk_kernel_run,
    cp_dk_kernel_release, NULL};

/* ---- LayerNormalization ------------------------------------------------ */

static bool ln_geom(const struct cp_node *n, const struct cp_tensor *x, int64_t *outer,
                    int64_t *inner)
{
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 1)
        return false;
    int ax = norm_axis(cp_node_attr_int(n, "axis", -1), r);
    if (ax < 0)
        return false;
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < r; i++)
        *(i < ax ? outer : inner) *= xd[i];
    return *outer > 0 && *inner > 0;
}

static bool ln_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs < 2 || n->n_inputs > 3 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0)
            return false; /* Mean / InvStdDev outputs: reference */
    int64_t outer, inner;
    if (!ln_geom(n, cp_fk_in(g, n, 0), &outer, &inner))
        return false;
    if (cp_shape_numel(&cp_fk_in(g, n, 1)->shape) != inner)
        return false;
    const struct cp_tensor *b = cp_fk_in(g, n, 2);
    return !b || (b->dtype == CP_DTYPE_F32 && cp_shape_is_static(&b->shape) &&
                  cp_shape_numel(&b->shape) == inner);
}

static enum cp_status ln_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    int64_t outer, inner;
    if (!ln_geom(k->node, k->in[0], &outer, &inner))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad axis", k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    bool has_b = k->node->n_inputs > 2 && k->in[2];
    dnnl_dims_t dims = {outer, inner}, vd = {inner};
    dnnl_memory_desc_t md, vmd;
    dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&vmd, 1, vd, dnnl_f32, dnnl_a);
    float eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    unsigned flags = dnnl_use_scale | (has_b ? dnnl_use_shift : 0);
    dnnl_layer_normalization_desc_t ld;
    dnnl_status_t s = dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &md,
                                                                 NULL, eps, flags);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "layer normalization descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &ld, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "layer normalization primitive descriptor", s);
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT};
    int mems[4] = {cp_dk_mem_user(p, &md, k->in_data[0]), cp_dk_mem_user(p, &md, k->out_data[0]),
                   cp_dk_mem_user(p, &vmd, k->in_data[1]),
                   has_b ? cp_dk_mem_user(p, &vmd, k->in_data[2]) : -1};
    enum cp_status st = cp_dk_step_add(p, pd, has_b ? 4 : 3, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_dk_fail(k, d, "layer normalization primitive", dnnl_runtime_error);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_layer_norm = {
    "onednn:layer_norm", CP_OP_LAYER_NORMALIZATION, ln_supports, ln_prepare,
    cp_dk_kernel_run,    cp_dk_kernel_release,      NULL};

/* ---- BatchNormalization ------------------------------------------------ */

static bool bn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 5 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) || cp_node_attr_int(n, "training_mode", 0) != 0)
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0)
            return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0);
    int r = x->shape.rank;
    if (r < 2 || r > 5 || !cp_shape_equal(&x->shape, &cp_fk_out(g, n, 0)->shape) ||
        !cp_tensor_is_plain(x) || !cp_tensor_is_plain(cp_fk_out(g, n, 0)))
        return false;
    int64_t C = x->shape.dims[1].value;
    for (size_t i = 1; i < 5; i++) {
        const struct cp_tensor *t = cp_fk_in(g, n, i);
        if (!t || !cp_fk_in_is(g, n, i, CP_DTYPE_F32) || cp_shape_numel(&t->shape) != C)
            return false;
    }
    return cp_shape_numel(&x->shape) > 0;
}

static enum cp_status bn_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_tensor *x = k->in[0];
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    dnnl_memory_desc_t md, vmd;
    dnnl_dims_t vd = {xd[1]};
    cp_dk_md_plain(&md, r, xd, CP_DTYPE_F32);
    dnnl_memory_desc_init_by_tag(&vmd, 1, vd, dnnl_f32, dnnl_a);
    float eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    dnnl_batch_normalization_desc_t bd;
    dnnl_status_t s = dnnl_batch_normalization_forward_desc_init(
        &bd, dnnl_forward_inference, &md, eps,
        dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "batch normalization descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &bd, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "batch normalization primitive descriptor", s);
    int ids[6] = {DNNL_ARG_SRC,   DNNL_ARG_DST,  DNNL_ARG_SCALE,
                  DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    int mems[6] = {cp_dk_mem_user(p, &md, k->in_data[0]),  cp_dk_mem_user(p, &md, k->out_data[0]),
                   cp_dk_mem_user(p, &vmd, k->in_data[1]), cp_dk_mem_user(p, &vmd, k->in_data[2]),
                   cp_dk_mem_user(p, &vmd, k->in_data[3]), cp_dk_mem_user(p, &vmd, k->in_data[4])};
    enum cp_status st = cp_dk_step_add(p, pd, 6, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_dk_fail(k, d, "batch normalization primitive", dnnl_runtime_error);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_batch_norm = {
    "onednn:batch_norm", CP_OP_BATCH_NORMALIZATION, bn_supports, bn_prepare,
    cp_dk_kernel_run,    cp_dk_kernel_release,      NULL};

/* ---- InstanceNormalization ------------------------------------------- */

/* x [N, C, spatial...] is [1, N*C, S, 1] to the batch normalization
 * primitive: without global stats it computes mean and variance per
 * channel, which here is per (n, c) instance, and writes them to scratch.
 * 4-D because oneDNN 2.6 has an optimised plain-layout implementation for
 * nchw but not for ncw (3-D falls to its reference implementation, about
 * ten times slower). Its scale and
 * shift are per channel too, so gamma and beta are repeated N times into
 * kernel-owned buffers: once at prepare when they are initializers, at
 * every run otherwise. With N == 1 the primitive reads them in place. */
struct inorm_state {
    struct cp_dk_prog prog;
    int64_t n, c;
    float *scale, *shift; /* the repeated copies; NULL when N == 1 */
    bool copy_at_run;
};

static bool inorm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 3 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 2, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0);
    if (x->shape.rank < 3 || cp_shape_numel(&x->shape) <= 0 ||
        !cp_shape_equal(&x->shape, &cp_fk_out(g, n, 0)->shape))
        return false;
    int64_t C = x->shape.dims[1].value;
    return cp_shape_numel(&cp_fk_in(g, n, 1)->shape) == C &&
           cp_shape_numel(&cp_fk_in(g, n, 2)->shape) == C;
}

static void inorm_repeat(struct inorm_state *s, const float *gamma, const float *beta)
{
    for (int64_t i = 0; i < s->n; i++) {
        memcpy(s->scale + i * s->c, gamma, (size_t)s->c * sizeof *gamma);
        memcpy(s->shift + i * s->c, beta, (size_t)s->c * sizeof *beta);
    }
}

static void inorm_release(struct cp_kexec *k)
{
    struct inorm_state *s = k->state;
    if (!s)
        return;
    cp_dk_prog_release(&s->prog);
    free(s->scale);
    free(s->shift);
    free(s);
    k->state = NULL;
}

/* The memory the primitive reads scale (i = 1) or shift (i = 2) from. */
static int inorm_param_mem(struct cp_kexec *k, const dnnl_memory_desc_t *vmd, size_t i)
{
    struct inorm_state *s = k->state;
    if (s->n == 1)
        return cp_dk_mem_user(&s->prog, vmd, k->in_data[i]);
    return cp_dk_mem_user(&s->prog, vmd, i == 1 ? s->scale : s->shift);
}

static enum cp_status inorm_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct inorm_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    k->state = s;
    cp_dk_prog_init(&s->prog, k->env);
    const struct cp_shape *xs = &k->in[0]->shape;
    s->n = xs->dims[0].value;
    s->c = xs->dims[1].value;
    int64_t nc = s->n * s->c;
    enum cp_status st = CP_OK;
    if (s->n > 1) {
        s->scale = malloc((size_t)nc * sizeof *s->scale);
        s->shift = malloc((size_t)nc * sizeof *s->shift);
        if (!s->scale || !s->shift) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
            goto out_release;
        }
        s->copy_at_run =
            k->in[1]->kind != CP_TENSOR_INITIALIZER || k->in[2]->kind != CP_TENSOR_INITIALIZER;
        if (!s->copy_at_run)
            inorm_repeat(s, k->in_data[1], k->in_data[2]);
    }
    dnnl_dims_t dims = {1, nc, cp_shape_numel(xs) / nc, 1}, vd = {nc};
    dnnl_memory_desc_t md, vmd;
    dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_abcd);
    dnnl_memory_desc_init_by_tag(&vmd, 1, vd, dnnl_f32, dnnl_a);
    float eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    dnnl_batch_normalization_desc_t bd;
    dnnl_status_t ds = dnnl_batch_normalization_forward_desc_init(
        &bd, dnnl_forward_training, &md, eps, dnnl_use_scale | dnnl_use_shift);
    if (ds != dnnl_success) {
        st = cp_dk_fail(k, d, "batch normalization descriptor", ds);
        goto out_release;
    }
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    ds = attr ? dnnl_primitive_desc_create(&pd, &bd, attr, s->prog.engine, NULL)
              : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (ds != dnnl_success) {
        st = cp_dk_fail(k, d, "batch normalization primitive descriptor", ds);
        goto out_release;
    }
    int ids[6] = {DNNL_ARG_SRC,   DNNL_ARG_DST,  DNNL_ARG_SCALE,
                  DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    int mems[6] = {cp_dk_mem_user(&s->prog, &md, k->in_data[0]),
                   cp_dk_mem_user(&s->prog, &md, k->out_data[0]),
                   inorm_param_mem(k, &vmd, 1),
                   inorm_param_mem(k, &vmd, 2),
                   cp_dk_mem_scratch(&s->prog, &vmd),
                   cp_dk_mem_scratch(&s->prog, &vmd)};
    st = cp_dk_step_add(&s->prog, pd, 6, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK) {
        st = cp_dk_fail(k, d, "batch normalization primitive", dnnl_runtime_error);
        goto out_release;
    }
    k->scratch_bytes = cp_dk_prog_scratch_bytes(&s->prog);
    return CP_OK;

out_release:
    /* The plan does not release a kernel whose prepare failed. */
    inorm_release(k);
    return st;
}

static enum cp_status inorm_run(struct cp_kexec *k)
{
    struct inorm_state *s = k->state;
    if (s->copy_at_run)
        inorm_repeat(s, k->in_data[1], k->in_data[2]);
    return cp_dk_prog_run(&s->prog, k->scratch);
}

const struct cp_kernel cp_dnnl_instance_norm = {"onednn:instance_norm",
                                                CP_OP_INSTANCE_NORMALIZATION,
                                                inorm_supports,
                                                inorm_prepare,
                                                inorm_run,
                                                inorm_release,
                                                NULL};
