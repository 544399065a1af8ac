/*
 * The fast kernel table, in preference order: for each node the registry
 * takes the first entry whose op matches and whose `supports` accepts the
 * node, else the op's reference kernel.
 *
 * Where both a C and a oneDNN kernel cover an op, the order follows
 * measurements on the example models (2 threads, AVX-512): for the small
 * activations these models have, the C loops beat a primitive call.
 */
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/layout.h"    /* cp_dnnl_trans_data */
#include "runner/cpu/attention.h" /* cp_fast_attention* */

#include <stddef.h>

const struct cp_kernel *const cp_fast_kernels[] = {
    /* compute-bound: oneDNN, but for depthwise convolutions on plain
     * tensors, which oneDNN runs as one gemm per group, and convolutions
     * with a handful of output positions (matrix-vector products) */
    &cp_fast_dw_conv,
    &cp_fast_dw_fused_conv,
    &cp_fast_thin_conv,
    &cp_fast_thin_fused_conv,
    &cp_dnnl_conv,
    &cp_dnnl_deconv,
    &cp_dnnl_fused_conv,
    &cp_fast_matmul_n16,
    &cp_dnnl_matmul,
    &cp_dnnl_gemm,
    &cp_dnnl_fused_matmul,
    &cp_fast_group_norm,
    &cp_fast_gelu,
    &cp_dnnl_max_pool,
    &cp_dnnl_avg_pool,
    &cp_fast_global_avg_pool,
    &cp_dnnl_global_avg_pool,
    &cp_fast_attention_avx512,
    &cp_fast_attention,
    &cp_fast_softmax,
    &cp_dnnl_softmax,
    &cp_fast_layer_norm,
    &cp_dnnl_layer_norm,
    &cp_fast_batch_norm,
    &cp_dnnl_batch_norm,
    &cp_fast_instance_norm,
    &cp_dnnl_instance_norm,
    /* elementwise */
    &cp_fast_add,
    &cp_fast_sub,
    &cp_fast_mul,
    &cp_fast_div,
    &cp_dnnl_add,
    &cp_dnnl_sub,
    &cp_dnnl_mul,
    &cp_dnnl_div,
    &cp_fast_where,
    &cp_fast_relu,
    &cp_fast_leaky_relu,
    &cp_fast_sigmoid,
    &cp_fast_exp,
    &cp_fast_sqrt,
    &cp_fast_clip,
    &cp_fast_erf,
    &cp_fast_pow,
    &cp_dnnl_tanh,
    &cp_dnnl_relu,
    &cp_dnnl_leaky_relu,
    &cp_dnnl_sigmoid,
    &cp_dnnl_exp,
    &cp_dnnl_sqrt,
    &cp_dnnl_clip,
    /* reductions */
    &cp_fast_reduce_mean,
    &cp_fast_reduce_sum,
    &cp_fast_reduce_max,
    /* data movement */
    &cp_fast_transpose,
    &cp_dnnl_transpose,
    &cp_dnnl_trans_data,
    &cp_fast_concat,
    &cp_fast_split,
    &cp_fast_slice,
    &cp_fast_channel_gather,
    &cp_fast_gather,
    &cp_fast_resize,
    &cp_fast_resize_interp,
    &cp_fast_pad,
    /* ---- [elementwise] ---- */
    &cp_fast_hard_swish,
    &cp_fast_hard_sigmoid,
    &cp_fast_elu,
    &cp_fast_softplus,
    &cp_fast_mish,
    &cp_fast_neg,
    &cp_fast_reciprocal,
    &cp_fast_abs,
    &cp_fast_floor,
    &cp_fast_ceil,
    &cp_fast_log,
    &cp_fast_sin,
    &cp_fast_cos,
    &cp_fast_prelu,
    &cp_fast_max2,
    &cp_fast_min2,
    &cp_fast_greater,
    &cp_fast_less,
    &cp_fast_greater_or_equal,
    &cp_fast_less_or_equal,
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    &cp_fast_log_softmax,
    &cp_fast_arg_max,
    &cp_fast_arg_min,
    &cp_fast_reduce_min,
    &cp_fast_reduce_prod,
    &cp_fast_reduce_l1,
    &cp_fast_reduce_l2,
    &cp_fast_reduce_log_sum,
    &cp_fast_reduce_log_sum_exp,
    &cp_fast_reduce_sum_square,
    &cp_fast_cum_sum,
    &cp_fast_einsum,
    &cp_fast_top_k,
    &cp_fast_gather_elements,
    &cp_fast_tile,
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    &cp_dnnl_lrn,
    &cp_fast_depth_to_space,
    &cp_fast_space_to_depth,
    &cp_fast_roi_align,
    &cp_fast_grid_sample,
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    &cp_fast_lstm,
    &cp_fast_gru,
    &cp_fast_rnn,
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    &cp_dnnl_qlinear_conv,
    &cp_dnnl_conv_integer,
    &cp_dnnl_qlinear_matmul,
    &cp_dnnl_matmul_integer,
    &cp_fast_quantize_linear,
    &cp_fast_dequantize_linear,
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
    NULL,
};
