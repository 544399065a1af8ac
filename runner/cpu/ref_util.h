/*
 * Private to the reference kernels (runner/cpu/ref_*.c): what they share.
 *
 * The reference kernels are the truth the fast kernels are checked against,
 * so they are written for clarity: plain loops over row-major data, math in
 * f32 with double accumulators where a sum is long, no layout tricks. Each
 * family lives in its own file (ref_elementwise.c, ref_reduce.c, ref_linalg.c,
 * ref_conv.c, ref_pool.c, ref_norm.c, ref_shape.c, ref_misc.c, ref_resize.c)
 * and exports one `struct cp_kernel` per op, declared below and listed in
 * ref_kernels.c.
 *
 * What the elementwise, cast, reduction and data-movement ops compute is
 * not here but in graph/op_eval.h, which the constant folder calls too: a
 * kernel of those families checks its node (`supports`), reads the node's
 * parameters and calls the op's definition. So do element stores
 * (cp_eval_store_*: bf16 truncates, as ONNX's reference casts), element
 * loads (graph.h, cp_elem_load_*) and the strided walk (cp_walk_*) the
 * other kernels use for broadcasting operands.
 *
 * The helpers here:
 *  - node access for `supports` predicates (tensors of a node, static shapes);
 *  - shape arithmetic (element counts, strides, spans);
 *  - sliding-window geometry for Conv, ConvTranspose and the pools.
 */
#ifndef CP_RUNNER_REF_UTIL_H
#define CP_RUNNER_REF_UTIL_H

#include "graph/op_eval.h"
#include "runner/cpu/kernel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- nodes ----------------------------------------------------------------- */

/* The graph's opset, 17 when unset (as inference assumes). */
int64_t cp_ref_opset(const struct cp_graph *g);

/* Tensor of input / output i of n; NULL when absent or past the end. */
const struct cp_tensor *cp_ref_in(const struct cp_graph *g, const struct cp_node *n, size_t i);
const struct cp_tensor *cp_ref_out(const struct cp_graph *g, const struct cp_node *n, size_t i);

/* Every present input and output has a static shape and a known dtype, and
 * output 0 is present. The common first check of a `supports`. */
bool cp_ref_node_is_static(const struct cp_graph *g, const struct cp_node *n);

/* Whether input i is present and not an empty tensor (ONNX marks some
 * optional inputs absent with a zero-element tensor). */
bool cp_ref_has_input(const struct cp_graph *g, const struct cp_node *n, size_t i);

/* ---- shapes -------------------------------------------------------------------- */

/* Element count of a static shape (1 for a scalar). */
int64_t cp_ref_numel(const struct cp_shape *s);
/* Row-major element strides of a static shape. */
void cp_ref_strides(const struct cp_shape *s, int64_t *strides);
/* Product of dims [from, to). */
int64_t cp_ref_span(const struct cp_shape *s, int from, int to);
/* Softmax, LogSoftmax and Hardmax as (outer, len, inner) over shape s:
 * before opset 13 the input is coerced to 2-D at `axis` (default 1, inner
 * 1); from 13 the op works along `axis` (default -1) alone. false for a
 * bad axis. (ref_reduce.c) */
bool cp_ref_softmax_geometry(const struct cp_graph *g, const struct cp_node *n,
                             const struct cp_shape *s, int64_t *outer, int64_t *len,
                             int64_t *inner);

/* ---- elements ------------------------------------------------------------------ */

bool cp_ref_dtype_is_int(enum cp_dtype dt); /* i8, u8, i32, i64 */

/* memcpy that allows n == 0 with NULL pointers and dst == src. */
void cp_ref_copy(void *dst, const void *src, size_t n);

/* ---- windows (Conv, ConvTranspose, pools) ------------------------------------------ */

#define CP_REF_MAX_SPATIAL 3

/* Sliding-window geometry over up to three spatial dims. Fewer spatial
 * dims are padded at the front with size-1 dims (kernel 1, stride 1). */
struct cp_ref_window {
    int n; /* spatial dims as given */
    int64_t in[CP_REF_MAX_SPATIAL];
    int64_t out[CP_REF_MAX_SPATIAL];
    int64_t kernel[CP_REF_MAX_SPATIAL];
    int64_t stride[CP_REF_MAX_SPATIAL];
    int64_t dilation[CP_REF_MAX_SPATIAL];
    int64_t pad_begin[CP_REF_MAX_SPATIAL];
    int64_t pad_end[CP_REF_MAX_SPATIAL];
};

/* Whether the window attributes of n (kernel_shape, strides, dilations,
 * pads, auto_pad) are well formed for `n_spatial` dims. */
bool cp_ref_window_attrs_ok(const struct cp_node *n, int n_spatial);

/* Geometry of a Conv or pool: `x` and `y` are N, C, spatial... shapes,
 * kernel from kernel_shape, else from `w` (the weight, may be NULL). SAME
 * padding is derived from the output size. */
void cp_ref_window_forward(const struct cp_node *n, const struct cp_shape *x,
                           const struct cp_shape *w, const struct cp_shape *y,
                           struct cp_ref_window *win);

/* First and one-past-last output positions o in [0, out) for which
 * o * stride + off lands in [0, in). */
void cp_ref_valid_range(int64_t out, int64_t stride, int64_t off, int64_t in, int64_t *lo,
                        int64_t *hi);

/* ---- the kernels ----------------------------------------------------------------------- */

/* Define a reference kernel (none of them keeps state to release). */
#define CP_REF_KERNEL(var, opv, supports_fn, prepare_fn, run_fn)                                   \
    const struct cp_kernel var = {"ref", opv, supports_fn, prepare_fn, run_fn, NULL, NULL}

extern const struct cp_kernel cp_ref_add, cp_ref_sub, cp_ref_mul, cp_ref_div, cp_ref_pow,
    cp_ref_equal;
extern const struct cp_kernel cp_ref_sqrt, cp_ref_exp, cp_ref_erf, cp_ref_tanh, cp_ref_sigmoid,
    cp_ref_relu, cp_ref_leaky_relu, cp_ref_clip;
extern const struct cp_kernel cp_ref_where, cp_ref_cast;
extern const struct cp_kernel cp_ref_softmax, cp_ref_reduce_mean, cp_ref_reduce_sum,
    cp_ref_reduce_max;
extern const struct cp_kernel cp_ref_matmul, cp_ref_gemm;
extern const struct cp_kernel cp_ref_conv, cp_ref_conv_transpose;
extern const struct cp_kernel cp_ref_max_pool, cp_ref_average_pool, cp_ref_global_average_pool;
extern const struct cp_kernel cp_ref_batch_norm, cp_ref_instance_norm, cp_ref_layer_norm;
extern const struct cp_kernel cp_ref_concat, cp_ref_split, cp_ref_slice, cp_ref_gather,
    cp_ref_reshape, cp_ref_flatten, cp_ref_transpose, cp_ref_squeeze, cp_ref_unsqueeze,
    cp_ref_expand, cp_ref_identity, cp_ref_dropout, cp_ref_shape;
extern const struct cp_kernel cp_ref_constant_of_shape, cp_ref_range, cp_ref_pad;
extern const struct cp_kernel cp_ref_resize;
extern const struct cp_kernel cp_ref_fused_conv, cp_ref_fused_matmul, cp_ref_group_norm,
    cp_ref_gelu; /* ref_fused.c */

/* ---- [rnn] ---- */
extern const struct cp_kernel cp_ref_lstm, cp_ref_gru, cp_ref_rnn; /* ref_rnn.c */
extern const struct cp_kernel cp_ref_dft, cp_ref_stft, cp_ref_hann_window, cp_ref_hamming_window,
    cp_ref_blackman_window, cp_ref_mel_weight_matrix; /* ref_signal.c */
/* ---- end [rnn] ---- */
/* ---- [elementwise] ---- */
/* ref_elementwise_ops.c */
extern const struct cp_kernel cp_ref_abs, cp_ref_neg, cp_ref_reciprocal, cp_ref_floor, cp_ref_ceil,
    cp_ref_round, cp_ref_sign, cp_ref_log, cp_ref_sin, cp_ref_cos, cp_ref_tan, cp_ref_asin,
    cp_ref_acos, cp_ref_atan, cp_ref_sinh, cp_ref_cosh, cp_ref_asinh, cp_ref_acosh, cp_ref_atanh,
    cp_ref_is_nan, cp_ref_is_inf, cp_ref_not, cp_ref_bitwise_not, cp_ref_elu, cp_ref_selu,
    cp_ref_celu, cp_ref_hard_sigmoid, cp_ref_hard_swish, cp_ref_softsign, cp_ref_softplus,
    cp_ref_thresholded_relu, cp_ref_shrink, cp_ref_mish, cp_ref_prelu, cp_ref_greater, cp_ref_less,
    cp_ref_greater_or_equal, cp_ref_less_or_equal, cp_ref_and, cp_ref_or, cp_ref_xor, cp_ref_mod,
    cp_ref_bit_shift, cp_ref_bitwise_and, cp_ref_bitwise_or, cp_ref_bitwise_xor, cp_ref_max,
    cp_ref_min, cp_ref_sum, cp_ref_mean, cp_ref_cast_like, cp_ref_random_normal,
    cp_ref_random_uniform, cp_ref_random_normal_like, cp_ref_random_uniform_like, cp_ref_bernoulli,
    cp_ref_multinomial;
/* ---- [reduce_index] ---- */
extern const struct cp_kernel cp_ref_reduce_min, cp_ref_reduce_prod, cp_ref_reduce_l1,
    cp_ref_reduce_l2, cp_ref_reduce_log_sum, cp_ref_reduce_log_sum_exp, cp_ref_reduce_sum_square,
    cp_ref_arg_max, cp_ref_arg_min, cp_ref_top_k, cp_ref_cum_sum, cp_ref_hardmax,
    cp_ref_log_softmax, cp_ref_gather_elements, cp_ref_gather_nd, cp_ref_scatter_elements,
    cp_ref_scatter_nd, cp_ref_scatter, cp_ref_compress, cp_ref_non_zero, cp_ref_one_hot,
    cp_ref_trilu, cp_ref_tile, cp_ref_size, cp_ref_eye_like, cp_ref_nll_loss, cp_ref_sce_loss;
extern const struct cp_kernel cp_ref_reverse_sequence, cp_ref_det, cp_ref_einsum, cp_ref_unique;
/* ---- end [reduce_index] ---- */
/* ---- [nn] ---- */
extern const struct cp_kernel cp_ref_lrn, cp_ref_lp_normalization, cp_ref_mvn,
    cp_ref_global_max_pool, cp_ref_lp_pool, cp_ref_global_lp_pool, cp_ref_max_unpool,
    cp_ref_depth_to_space, cp_ref_space_to_depth, cp_ref_grid_sample, cp_ref_roi_align, cp_ref_nms;
extern const struct cp_kernel cp_ref_max_roi_pool, cp_ref_center_crop_pad, cp_ref_col2im,
    cp_ref_affine_grid;
extern const struct cp_kernel cp_ref_deform_conv;
/* ---- [quant] ---- */
extern const struct cp_kernel cp_ref_quantize_linear, cp_ref_dequantize_linear, cp_ref_qlinear_conv,
    cp_ref_qlinear_matmul, cp_ref_matmul_integer, cp_ref_conv_integer,
    cp_ref_dynamic_quantize_linear; /* ref_quant.c */
/* ---- end [quant] ---- */
/* ---- [control] ---- */
extern const struct cp_kernel cp_ref_if, cp_ref_loop, cp_ref_scan;

#endif
