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
extern const struct cp_kernel cp_fast_add, cp_fast_sub, cp_fast_mul, cp_fast_div, cp_fast_where;
extern const struct cp_kernel cp_fast_softmax, cp_fast_matmul_n16;
extern const struct cp_kernel cp_fast_relu, cp_fast_leaky_relu, cp_fast_sigmoid, cp_fast_exp,
    cp_fast_sqrt, cp_fast_clip, cp_fast_erf, cp_fast_pow;
extern const struct cp_kernel cp_fast_reduce_mean, cp_fast_reduce_sum, cp_fast_reduce_max,
    cp_fast_global_avg_pool, cp_fast_instance_norm, cp_fast_batch_norm;
extern const struct cp_kernel cp_fast_concat, cp_fast_split, cp_fast_slice, cp_fast_gather,
    cp_fast_resize, cp_fast_transpose;
extern const struct cp_kernel cp_fast_group_norm, cp_fast_gelu; /* FUSION */
extern const struct cp_kernel cp_fast_layer_norm;

/* ---- [quant] ---- */
extern const struct cp_kernel cp_dnnl_qlinear_conv, cp_dnnl_conv_integer, cp_dnnl_qlinear_matmul,
    cp_dnnl_matmul_integer;                                                       /* dnnl_quant.c */
extern const struct cp_kernel cp_fast_quantize_linear, cp_fast_dequantize_linear; /* fast_quant.c */
/* ---- end [quant] ---- */

#endif
