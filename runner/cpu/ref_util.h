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
 * The helpers here:
 *  - node access for `supports` predicates (tensors of a node, static shapes);
 *  - element loads and stores of any dtype through double or int64, with the
 *    f16/bf16 conversions (round to nearest even);
 *  - a strided walk: up to CP_REF_MAX_OPS operands viewed with arbitrary
 *    element strides over one iteration space (broadcasting is stride 0,
 *    transposition is permuted strides, slicing is scaled strides), visited
 *    row by row so that the innermost loop is a plain counted loop.
 */
#ifndef CP_RUNNER_REF_UTIL_H
#define CP_RUNNER_REF_UTIL_H

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

/* Normalize axis into [0, rank); false when out of range. */
bool cp_ref_axis(int64_t axis, int rank, int *out);

/* ---- shapes -------------------------------------------------------------------- */

/* Element count of a static shape (1 for a scalar). */
int64_t cp_ref_numel(const struct cp_shape *s);
/* Row-major element strides of a static shape. */
void cp_ref_strides(const struct cp_shape *s, int64_t *strides);
/* Product of dims [from, to). */
int64_t cp_ref_span(const struct cp_shape *s, int from, int to);

/* ---- elements ------------------------------------------------------------------ */

float cp_ref_f16_to_f32(uint16_t h);
uint16_t cp_ref_f32_to_f16(float f);
float cp_ref_bf16_to_f32(uint16_t h);
uint16_t cp_ref_f32_to_bf16(float f);

/* Element i of data of dtype dt, as double (any dtype; bool is 0/1). */
double cp_ref_load_f64(const void *data, enum cp_dtype dt, int64_t i);
/* Element i as int64 (floats truncate toward zero and saturate; NaN is 0). */
int64_t cp_ref_load_i64(const void *data, enum cp_dtype dt, int64_t i);
/* Store v as element i: floats round, integers truncate toward zero and
 * saturate (NaN gives 0), bool is v != 0. */
void cp_ref_store_f64(void *data, enum cp_dtype dt, int64_t i, double v);
/* Store v as element i: floats convert, integers wrap, bool is v != 0. */
void cp_ref_store_i64(void *data, enum cp_dtype dt, int64_t i, int64_t v);
bool cp_ref_dtype_is_int(enum cp_dtype dt); /* i8, u8, i32, i64 */

/* memcpy that allows n == 0 with NULL pointers and dst == src. */
void cp_ref_copy(void *dst, const void *src, size_t n);
/* Copy one element of `size` bytes (1, 2, 4, 8 or other). */
void cp_ref_copy_elem(void *dst, const void *src, size_t size);

/* ---- strided walks ----------------------------------------------------------------- */

#define CP_REF_MAX_OPS 4

/* An iteration space and, per operand, an element stride per dimension and
 * a base offset. Operand 0 is usually the output. */
struct cp_ref_walk {
    int rank; /* >= 1 after cp_ref_walk_finish */
    int n_ops;
    int64_t dims[CP_MAX_RANK];
    int64_t strides[CP_REF_MAX_OPS][CP_MAX_RANK];
    int64_t base[CP_REF_MAX_OPS];
    /* Set by cp_ref_walk_finish: rows to visit and the inner loop. */
    int64_t rows;
    int64_t inner;
    int64_t inner_stride[CP_REF_MAX_OPS];
};

/* Start a walk over `space` (static) for n_ops operands, all strides 0. */
void cp_ref_walk_init(struct cp_ref_walk *w, const struct cp_shape *space, int n_ops);
/* Operand op is a row-major tensor of shape s broadcast (numpy rules,
 * aligned at the right) to the space: stride 0 where s has a 1. */
void cp_ref_walk_bcast(struct cp_ref_walk *w, int op, const struct cp_shape *s);
/* Merge dims that every operand walks contiguously, drop dims of 1, and
 * compute rows/inner. Call once after the strides are set. */
void cp_ref_walk_finish(struct cp_ref_walk *w);

/* Position of a row-by-row visit. */
struct cp_ref_pos {
    int64_t idx[CP_MAX_RANK];
    int64_t off[CP_REF_MAX_OPS]; /* element offset of each operand at the row's start */
};

void cp_ref_walk_start(const struct cp_ref_walk *w, struct cp_ref_pos *p);
/* Advance to the next row (over every dim but the last). */
void cp_ref_walk_next(const struct cp_ref_walk *w, struct cp_ref_pos *p);

/* Output 0 = input 0 broadcast / strided, for dtype-agnostic copies: walks
 * operand 0 (destination) and operand 1 (source) copying elements of
 * `size` bytes. */
void cp_ref_walk_copy(const struct cp_ref_walk *w, void *dst, const void *src, size_t size);

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

#endif
