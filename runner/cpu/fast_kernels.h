/*
 * Private to runner/cpu: the fast kernels, one `struct cp_kernel` each,
 * defined in dnnl_*.c (oneDNN primitives) and fast_*.c (vectorised C) and
 * listed in preference order in fast_kernels.c (cp_fast_kernels).
 */
#ifndef CP_RUNNER_FAST_KERNELS_H
#define CP_RUNNER_FAST_KERNELS_H

#include "runner/cpu/kernel.h"

/* oneDNN */
extern const struct cp_kernel cp_dnnl_conv, cp_dnnl_deconv;
extern const struct cp_kernel cp_dnnl_matmul, cp_dnnl_gemm;
extern const struct cp_kernel cp_dnnl_max_pool, cp_dnnl_avg_pool, cp_dnnl_global_avg_pool;
extern const struct cp_kernel cp_dnnl_softmax, cp_dnnl_layer_norm, cp_dnnl_batch_norm,
    cp_dnnl_instance_norm;
extern const struct cp_kernel cp_dnnl_add, cp_dnnl_sub, cp_dnnl_mul, cp_dnnl_div;
extern const struct cp_kernel cp_dnnl_tanh, cp_dnnl_relu, cp_dnnl_leaky_relu, cp_dnnl_sigmoid,
    cp_dnnl_exp, cp_dnnl_sqrt, cp_dnnl_clip;
extern const struct cp_kernel cp_dnnl_transpose;
extern const struct cp_kernel cp_dnnl_fused_conv, cp_dnnl_fused_matmul; /* FUSION */

/* C */
extern const struct cp_kernel cp_fast_dw_conv, cp_fast_dw_fused_conv;
extern const struct cp_kernel cp_fast_thin_conv, cp_fast_thin_fused_conv;
extern const struct cp_kernel cp_fast_add, cp_fast_sub, cp_fast_mul, cp_fast_div, cp_fast_where;
extern const struct cp_kernel cp_fast_softmax, cp_fast_matmul_n16;
extern const struct cp_kernel cp_fast_relu, cp_fast_leaky_relu, cp_fast_sigmoid, cp_fast_exp,
    cp_fast_sqrt, cp_fast_clip, cp_fast_erf, cp_fast_pow;
extern const struct cp_kernel cp_fast_reduce_mean, cp_fast_reduce_sum, cp_fast_reduce_max,
    cp_fast_global_avg_pool, cp_fast_instance_norm, cp_fast_batch_norm;
extern const struct cp_kernel cp_fast_concat, cp_fast_split, cp_fast_slice, cp_fast_gather,
    cp_fast_channel_gather, cp_fast_resize, cp_fast_resize_interp, cp_fast_pad, cp_fast_transpose;
extern const struct cp_kernel cp_fast_group_norm, cp_fast_gelu; /* FUSION */
extern const struct cp_kernel cp_fast_layer_norm;

/* ---- [rnn] ---- */
extern const struct cp_kernel cp_fast_lstm, cp_fast_gru, cp_fast_rnn; /* fast_rnn.c */
/* ---- end [rnn] ---- */
/* ---- [elementwise] ---- */
/* fast_elementwise.c */
extern const struct cp_kernel cp_fast_hard_swish, cp_fast_hard_sigmoid, cp_fast_elu,
    cp_fast_softplus, cp_fast_mish, cp_fast_neg, cp_fast_reciprocal, cp_fast_abs, cp_fast_floor,
    cp_fast_ceil, cp_fast_log, cp_fast_sin, cp_fast_cos, cp_fast_prelu, cp_fast_max2, cp_fast_min2,
    cp_fast_greater, cp_fast_less, cp_fast_greater_or_equal, cp_fast_less_or_equal;
/* ---- [reduce_index] ---- */
extern const struct cp_kernel cp_fast_log_softmax, cp_fast_arg_max, cp_fast_arg_min,
    cp_fast_reduce_min, cp_fast_reduce_prod, cp_fast_reduce_l1, cp_fast_reduce_l2,
    cp_fast_reduce_log_sum, cp_fast_reduce_log_sum_exp, cp_fast_reduce_sum_square, cp_fast_cum_sum,
    cp_fast_einsum, cp_fast_top_k, cp_fast_gather_elements, cp_fast_tile;
/* ---- end [reduce_index] ---- */
/* ---- [nn] ---- */
extern const struct cp_kernel cp_dnnl_lrn; /* dnnl_nn_ops.c */
extern const struct cp_kernel cp_fast_depth_to_space, cp_fast_space_to_depth, cp_fast_roi_align,
    cp_fast_grid_sample; /* fast_nn_ops.c */
/* ---- [quant] ---- */
extern const struct cp_kernel cp_dnnl_qlinear_conv, cp_dnnl_conv_integer, cp_dnnl_qlinear_matmul,
    cp_dnnl_matmul_integer;                                                       /* dnnl_quant.c */
extern const struct cp_kernel cp_fast_quantize_linear, cp_fast_dequantize_linear; /* fast_quant.c */
/* ---- end [quant] ---- */

#endif
