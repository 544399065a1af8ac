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
    &cp_ref_abs,
    &cp_ref_neg,
    &cp_ref_reciprocal,
    &cp_ref_floor,
    &cp_ref_ceil,
    &cp_ref_round,
    &cp_ref_sign,
    &cp_ref_log,
    &cp_ref_sin,
    &cp_ref_cos,
    &cp_ref_tan,
    &cp_ref_asin,
    &cp_ref_acos,
    &cp_ref_atan,
    &cp_ref_sinh,
    &cp_ref_cosh,
    &cp_ref_asinh,
    &cp_ref_acosh,
    &cp_ref_atanh,
    &cp_ref_is_nan,
    &cp_ref_is_inf,
    &cp_ref_not,
    &cp_ref_bitwise_not,
    &cp_ref_elu,
    &cp_ref_selu,
    &cp_ref_celu,
    &cp_ref_hard_sigmoid,
    &cp_ref_hard_swish,
    &cp_ref_softsign,
    &cp_ref_softplus,
    &cp_ref_thresholded_relu,
    &cp_ref_shrink,
    &cp_ref_mish,
    &cp_ref_prelu,
    &cp_ref_greater,
    &cp_ref_less,
    &cp_ref_greater_or_equal,
    &cp_ref_less_or_equal,
    &cp_ref_and,
    &cp_ref_or,
    &cp_ref_xor,
    &cp_ref_mod,
    &cp_ref_bit_shift,
    &cp_ref_bitwise_and,
    &cp_ref_bitwise_or,
    &cp_ref_bitwise_xor,
    &cp_ref_max,
    &cp_ref_min,
    &cp_ref_sum,
    &cp_ref_mean,
    &cp_ref_cast_like,
    &cp_ref_random_normal,
    &cp_ref_random_uniform,
    &cp_ref_random_normal_like,
    &cp_ref_random_uniform_like,
    &cp_ref_bernoulli,
    &cp_ref_multinomial,
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    &cp_ref_reduce_min,
    &cp_ref_reduce_prod,
    &cp_ref_reduce_l1,
    &cp_ref_reduce_l2,
    &cp_ref_reduce_log_sum,
    &cp_ref_reduce_log_sum_exp,
    &cp_ref_reduce_sum_square,
    &cp_ref_arg_max,
    &cp_ref_arg_min,
    &cp_ref_top_k,
    &cp_ref_cum_sum,
    &cp_ref_hardmax,
    &cp_ref_log_softmax,
    &cp_ref_gather_elements,
    &cp_ref_gather_nd,
    &cp_ref_scatter_elements,
    &cp_ref_scatter_nd,
    &cp_ref_scatter,
    &cp_ref_compress,
    &cp_ref_non_zero,
    &cp_ref_one_hot,
    &cp_ref_trilu,
    &cp_ref_tile,
    &cp_ref_size,
    &cp_ref_eye_like,
    &cp_ref_nll_loss,
    &cp_ref_sce_loss,
    &cp_ref_reverse_sequence,
    &cp_ref_det,
    &cp_ref_einsum,
    &cp_ref_unique,
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    &cp_ref_lstm, /* ref_rnn.c */
    &cp_ref_gru,
    &cp_ref_rnn,
    &cp_ref_dft, /* ref_signal.c */
    &cp_ref_stft,
    &cp_ref_hann_window,
    &cp_ref_hamming_window,
    &cp_ref_blackman_window,
    &cp_ref_mel_weight_matrix,
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
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
