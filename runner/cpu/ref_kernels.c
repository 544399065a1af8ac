/* The reference kernel table: one kernel per op in enum cp_op, except
 * Unknown (no kernel) and Constant (its output is data, placed by the plan
 * like a weight). Order follows the op enum. */
#include "runner/cpu/ref_util.h"
#include "runner/cpu/layout.h"    /* cp_ref_trans_data */
#include "runner/cpu/attention.h" /* cp_ref_fused_attention */

const struct cp_kernel *const cp_ref_kernels[] = {
    &cp_ref_add,
    &cp_ref_sub,
    &cp_ref_mul,
    &cp_ref_div,
    &cp_ref_pow,
    &cp_ref_sqrt,
    &cp_ref_exp,
    &cp_ref_erf,
    &cp_ref_tanh,
    &cp_ref_sigmoid,
    &cp_ref_relu,
    &cp_ref_leaky_relu,
    &cp_ref_clip,
    &cp_ref_softmax,
    &cp_ref_reduce_mean,
    &cp_ref_reduce_sum,
    &cp_ref_reduce_max,
    &cp_ref_matmul,
    &cp_ref_gemm,
    &cp_ref_conv,
    &cp_ref_conv_transpose,
    &cp_ref_max_pool,
    &cp_ref_average_pool,
    &cp_ref_global_average_pool,
    &cp_ref_batch_norm,
    &cp_ref_instance_norm,
    &cp_ref_layer_norm,
    &cp_ref_concat,
    &cp_ref_split,
    &cp_ref_slice,
    &cp_ref_gather,
    &cp_ref_reshape,
    &cp_ref_flatten,
    &cp_ref_transpose,
    &cp_ref_squeeze,
    &cp_ref_unsqueeze,
    &cp_ref_shape,
    &cp_ref_expand,
    &cp_ref_where,
    &cp_ref_equal,
    &cp_ref_cast,
    &cp_ref_constant_of_shape,
    &cp_ref_identity,
    &cp_ref_resize,
    &cp_ref_pad,
    &cp_ref_range,
    &cp_ref_dropout,
    &cp_ref_fused_conv,
    &cp_ref_fused_matmul,
    &cp_ref_group_norm,
    &cp_ref_gelu,            /* ref_fused.c */
    &cp_ref_trans_data,      /* layout.h */
    &cp_ref_fused_attention, /* attention.h */
    /* ---- [elementwise] ---- */
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    &cp_ref_if,
    &cp_ref_loop,
    &cp_ref_scan,
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
    NULL,
};

/* Every op but Unknown and Constant has exactly one entry; the test
 * ref_table::has_one_kernel_per_op_except_unknown_and_constant checks it
 * (a static count cannot tell which op is missing). */
