/* Reference kernels for MaxPool, AveragePool and GlobalAveragePool.
 *
 * A window is visited tap by tap; taps that fall into padding are skipped.
 * AveragePool divides by the taps inside the input, or with
 * count_include_pad by the taps inside the explicitly padded input (cells
 * that only ceil_mode adds are never counted, as in onnxruntime and
 * PyTorch). MaxPool's optional Indices output holds the flat index of the
 * first maximum in the input, spatial dims in row-major order, or in
 * column-major order with storage_order 1. */
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <math.h>

static bool pool_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    const struct cp_tensor *ix = cp_ref_out(g, n, 1);
    if (n->n_outputs > 2 || (ix && (n->op != CP_OP_MAX_POOL || ix->dtype != CP_DTYPE_I64 ||
                                    cp_ref_numel(&ix->shape) != cp_ref_numel(&y->shape))))
        return false;
    int64_t order = cp_node_attr_int(n, "storage_order", 0);
    if (order != 0 && order != 1)
        return false;
    int r = x->shape.rank;
    if (r < 3 || r > 2 + CP_REF_MAX_SPATIAL || y->shape.rank != r || x->dtype != y->dtype)
        return false;
    const struct cp_attr *ks = cp_node_attr(n, "kernel_shape");
    if (!ks || !cp_ref_window_attrs_ok(n, r - 2) || ks->n != (size_t)(r - 2))
        return false;
    if (x->shape.dims[0].value != y->shape.dims[0].value ||
        x->shape.dims[1].value != y->shape.dims[1].value)
        return false;
    if (n->op == CP_OP_MAX_POOL)
        return x->dtype == CP_DTYPE_F32 || x->dtype == CP_DTYPE_I8 || x->dtype == CP_DTYPE_U8;
    return x->dtype == CP_DTYPE_F32;
}

static enum cp_status pool_run(struct cp_kexec *k)
{
    const struct cp_tensor *tx = k->in[0], *ty = k->out[0];
    struct cp_ref_window win;
    cp_ref_window_forward(k->node, &tx->shape, NULL, &ty->shape, &win);
    bool is_max = k->node->op == CP_OP_MAX_POOL;
    bool include_pad = cp_node_attr_int(k->node, "count_include_pad", 0) != 0;
    bool col_major = cp_node_attr_int(k->node, "storage_order", 0) == 1;
    int64_t *indices = k->node->n_outputs > 1 && k->out[1] ? k->out_data[1] : NULL;
    enum cp_dtype dt = tx->dtype;
    int64_t planes = tx->shape.dims[0].value * tx->shape.dims[1].value;
    int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
    int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
    for (int64_t p = 0; p < planes; p++) {
        for (int64_t o = 0; o < out_plane; o++) {
            int64_t oc[3] = {o / (win.out[1] * win.out[2]), o / win.out[2] % win.out[1],
                             o % win.out[2]};
            double acc = is_max ? -INFINITY : 0.0;
            int64_t count = 0, best = -1;
            for (int64_t kd = 0; kd < win.kernel[0]; kd++) {
                for (int64_t kh = 0; kh < win.kernel[1]; kh++) {
                    for (int64_t kw = 0; kw < win.kernel[2]; kw++) {
                        int64_t kc[3] = {kd, kh, kw}, ic[3];
                        bool inside = true, in_padded = true;
                        for (int a = 0; a < 3; a++) {
                            ic[a] =
                                oc[a] * win.stride[a] + kc[a] * win.dilation[a] - win.pad_begin[a];
                            inside = inside && ic[a] >= 0 && ic[a] < win.in[a];
                            in_padded = in_padded && ic[a] >= -win.pad_begin[a] &&
                                        ic[a] < win.in[a] + win.pad_end[a];
                        }
                        if (include_pad ? in_padded : inside)
                            count++;
                        if (!inside)
                            continue;
                        int64_t i = p * in_plane + (ic[0] * win.in[1] + ic[1]) * win.in[2] + ic[2];
                        double v = dt == CP_DTYPE_F32 ? ((const float *)k->in_data[0])[i]
                                                      : cp_elem_load_f64(k->in_data[0], dt, i);
                        if (!is_max) {
                            acc += v;
                        } else if (v > acc) {
                            acc = v;
                            best = col_major ? ic[0] + win.in[0] * (ic[1] + win.in[1] * ic[2])
                                             : i - p * in_plane;
                            best += p * in_plane;
                        }
                    }
                }
            }
            if (!is_max)
                acc = count > 0 ? acc / (double)count : 0.0;
            cp_eval_store_f64(k->out_data[0], dt, p * out_plane + o, acc);
            if (indices)
                indices[p * out_plane + o] = best;
        }
    }
    return CP_OK;
}

/* Pools in a layout region (NHWC, blocked) run on plain copies. */
static enum cp_status pool_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, pool_run);
}

CP_REF_KERNEL(cp_ref_max_pool, CP_OP_MAX_POOL, pool_supports, cp_ref_layout_prepare,
              pool_run_any_layout);
CP_REF_KERNEL(cp_ref_average_pool, CP_OP_AVERAGE_POOL, pool_supports, cp_ref_layout_prepare,
              pool_run_any_layout);

/* ---- GlobalAveragePool ------------------------------------------------------------------ */

static bool gap_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && x->dtype == CP_DTYPE_F32 && y->dtype == CP_DTYPE_F32 && x->shape.rank >= 2 &&
           cp_ref_numel(&y->shape) == cp_ref_span(&x->shape, 0, 2);
}

static enum cp_status gap_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t planes = cp_ref_span(xs, 0, 2), plane = cp_ref_span(xs, 2, xs->rank);
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    for (int64_t p = 0; p < planes; p++) {
        double sum = 0.0;
        for (int64_t i = 0; i < plane; i++)
            sum += x[p * plane + i];
        y[p] = (float)(plane > 0 ? sum / (double)plane : NAN);
    }
    return CP_OK;
}

static enum cp_status gap_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, gap_run);
}

CP_REF_KERNEL(cp_ref_global_average_pool, CP_OP_GLOBAL_AVERAGE_POOL, gap_supports,
              cp_ref_layout_prepare, gap_run_any_layout);
