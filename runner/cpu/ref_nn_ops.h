/*
 * Private to runner/: what the [nn] family's reference kernels share
 * (ref_nn_norm.c, ref_nn_pool.c, ref_nn_spatial.c, ref_nn_detect.c).
 *
 * Floating-point kernels load and store through cp_elem_load_f64 /
 * cp_eval_store_f64, so every float dtype (f32, f16, bf16, f64) runs the
 * same loops with double arithmetic; the data-movement kernels move
 * elements of any dtype. Where ONNX leaves details to the runtime
 * (RoiAlign's sample points, GridSample's out-of-range taps,
 * NonMaxSuppression's ties), the kernels do what ONNX Runtime does.
 */
#ifndef CP_RUNNER_REF_NN_OPS_H
#define CP_RUNNER_REF_NN_OPS_H

#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <math.h>
#include <string.h>

/* Static node, input 0 and output 0 of the same float dtype. */
static inline bool cp_nn_float_io(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && y && cp_dtype_is_float(x->dtype) && y->dtype == x->dtype;
}

static inline bool cp_nn_same_shape(const struct cp_tensor *a, const struct cp_tensor *b)
{
    return cp_shape_equal(&a->shape, &b->shape);
}

/* Element idx of input i, and of output 0, as double (k is the kexec). */
#define LD(i, idx) cp_elem_load_f64(k->in_data[i], k->in[i]->dtype, (idx))
#define ST(idx, v) cp_eval_store_f64(k->out_data[0], k->out[0]->dtype, (idx), (v))

#endif
