/*
 * MaxPool, AveragePool and GlobalAveragePool on oneDNN's pooling_v2
 * primitive, f32, 1-D to 3-D; 2-D pools also on NHWC and blocked tensors
 * (layout.h), whose memory descriptors follow the tensors' layout tags.
 *
 * The end padding is derived from the output size, which covers ceil_mode:
 * oneDNN's max pooling ignores padded cells and its exclude-padding average
 * divides by the cells inside the input, both as ONNX does. An average that
 * counts padding (count_include_pad=1) is only taken when no ceil_mode
 * extension is involved, since ONNX does not count that extension.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <string.h>

struct pool_geom {
    int ns;
    dnnl_dims_t kernel, strides, dil, pl, pr;
    dnnl_alg_kind_t alg;
};

static bool attr_ints(const struct cp_node *n, const char *name, int64_t *out, size_t want,
                      int64_t dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    if (!a) {
        for (size_t i = 0; i < want; i++)
            out[i] = dflt;
        return true;
    }
    if (a->type != CP_ATTR_INTS || a->n != want)
        return false;
    memcpy(out, a->ints, want * sizeof *out);
    return true;
}

static bool pool_geom(const struct cp_node *n, const struct cp_tensor *x, const struct cp_tensor *y,
                      struct pool_geom *gm)
{
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 3 || r > 5 || cp_fk_dims(y, yd) != r || xd[0] != yd[0] || xd[1] != yd[1])
        return false;
    int ns = r - 2;
    gm->ns = ns;
    if (n->op == CP_OP_GLOBAL_AVERAGE_POOL) {
        for (int i = 0; i < ns; i++) {
            if (yd[2 + i] != 1 || xd[2 + i] < 1)
                return false;
            gm->kernel[i] = xd[2 + i];
            gm->strides[i] = 1;
            gm->dil[i] = gm->pl[i] = gm->pr[i] = 0;
        }
        gm->alg = dnnl_pooling_avg_exclude_padding;
        return true;
    }
    int64_t ks[3], st[3], dl[3], pads[6];
    if (!cp_node_attr(n, "kernel_shape") || !attr_ints(n, "kernel_shape", ks, (size_t)ns, 1) ||
        !attr_ints(n, "strides", st, (size_t)ns, 1) ||
        !attr_ints(n, "dilations", dl, (size_t)ns, 1) ||
        !attr_ints(n, "pads", pads, (size_t)(2 * ns), 0))
        return false;
    const char *ap = cp_node_attr_string(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    bool valid = strcmp(ap, "VALID") == 0;
    if (!same && !valid && strcmp(ap, "NOTSET") != 0)
        return false;
    bool include_pad = cp_node_attr_int(n, "count_include_pad", 0) != 0;
    if (n->op == CP_OP_MAX_POOL) {
        if (cp_node_attr_int(n, "storage_order", 0) != 0 ||
            (n->n_outputs > 1 && n->outputs[1] >= 0))
            return false;
        gm->alg = dnnl_pooling_max;
    } else {
        gm->alg = include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
        if (include_pad && same)
            return false;
    }
    for (int i = 0; i < ns; i++) {
        if (ks[i] < 1 || st[i] < 1 || dl[i] < 1)
            return false;
        int64_t range = (ks[i] - 1) * dl[i] + 1, in = xd[2 + i], out = yd[2 + i], pb, pe;
        if (valid) {
            pb = 0;
        } else if (same) {
            int64_t total = (out - 1) * st[i] + range - in;
            total = total < 0 ? 0 : total;
            pb = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        } else {
            pb = pads[i];
        }
        pe = (out - 1) * st[i] + range - in - pb;
        if (!same && !valid && include_pad && pe != pads[ns + i])
            return false; /* ceil_mode extension with count_include_pad */
        if (pe < 0)
            pe = 0;
        if (pb < 0 || pb >= range || pe >= range || (in + pb + pe - range) / st[i] + 1 != out)
            return false;
        gm->kernel[i] = ks[i];
        gm->strides[i] = st[i];
        gm->dil[i] = dl[i] - 1;
        gm->pl[i] = pb;
        gm->pr[i] = pe;
    }
    return true;
}

static bool pool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct pool_geom gm;
    dnnl_memory_desc_t md;
    return n->n_inputs == 1 && n->n_outputs >= 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) &&
           pool_geom(n, cp_fk_in(g, n, 0), cp_fk_out(g, n, 0), &gm) &&
           cp_dk_md_tensor(&md, cp_fk_in(g, n, 0), dnnl_f32) &&
           cp_dk_md_tensor(&md, cp_fk_out(g, n, 0), dnnl_f32);
}

static enum cp_status pool_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct pool_geom gm;
    if (!pool_geom(k->node, k->in[0], k->out[0], &gm))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': pooling geometry unsupported",
                           k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_memory_desc_t xm, ym;
    if (!cp_dk_md_tensor(&xm, k->in[0], dnnl_f32) || !cp_dk_md_tensor(&ym, k->out[0], dnnl_f32))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    dnnl_pooling_v2_desc_t pdsc;
    dnnl_status_t s =
        dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, gm.alg, &xm, &ym,
                                          gm.strides, gm.kernel, gm.dil, gm.pl, gm.pr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "pooling descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &pdsc, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "pooling primitive descriptor", s);
    int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    int mems[2] = {cp_dk_mem_user(p, &xm, k->in_data[0]), cp_dk_mem_user(p, &ym, k->out_data[0])};
    enum cp_status st = cp_dk_step_add(p, pd, 2, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_dk_fail(k, d, "pooling primitive", dnnl_runtime_error);
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    return CP_OK;
}

const struct cp_kernel cp_dnnl_max_pool = {"onednn:pool", CP_OP_MAX_POOL,   pool_supports,
                                           pool_prepare,  cp_dk_kernel_run, cp_dk_kernel_release,
                                           NULL};
const struct cp_kernel cp_dnnl_avg_pool = {"onednn:pool", CP_OP_AVERAGE_POOL, pool_supports,
                                           pool_prepare,  cp_dk_kernel_run,   cp_dk_kernel_release,
                                           NULL};
const struct cp_kernel cp_dnnl_global_avg_pool = {
    "onednn:pool",    CP_OP_GLOBAL_AVERAGE_POOL, pool_supports, pool_prepare,
    cp_dk_kernel_run, cp_dk_kernel_release,      NULL};
