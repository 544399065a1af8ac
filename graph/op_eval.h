/*
 * graph/op_eval: what the elementwise, cast, reduction and data-movement
 * ops compute, written once.
 *
 * An op's definition lives in graph/ (graph.h: attributes, shape and dtype
 * inference, cost); this is its arithmetic: the reference result of each op
 * on row-major data. Two modules compute those results and must agree bit
 * for bit: the runtime's reference kernels (runner/cpu/ref_*.c), which are
 * these functions behind a `supports` predicate, and the constant folder
 * (atc_bridge/passes/cleanup_eval.c), which calls the same functions on
 * initializers at conversion time. A folded constant is therefore exactly
 * what the runtime would have computed, and the fast kernels, checked
 * against the reference kernels, are checked against this file.
 *
 * The definitions:
 *  - floats compute in f32 with libm (sqrtf, expf, erff, tanhf, powf);
 *    Relu is x < 0 ? 0 : x (NaN and -0 pass through, as numpy's maximum);
 *    Sigmoid never overflows (exp of a non-positive number only);
 *  - integers compute in int64 and wrap into the output dtype (two's
 *    complement, as onnxruntime does); integer Div truncates toward zero
 *    and a zero divisor gives 0 instead of a trap (INT64_MIN / -1 gives
 *    INT64_MIN);
 *  - Pow with an exponent of another dtype, or integer operands, computes
 *    in double and stores as cp_eval_store_f64 does;
 *  - casts: from a float dtype through double (to integers: truncation
 *    toward zero, saturating, NaN to 0; to bool: != 0), from integers and
 *    bool through int64 (to narrower integers: wrap); f32 -> bf16 truncates
 *    (ONNX's reference, and its test data through 1.12, cast that way),
 *    f32 -> f16 rounds to nearest even (graph.h, cp_f32_to_f16);
 *  - reductions accumulate in double (floats) or int64 (integers, wrapping)
 *    in memory order of the input; ReduceMax lets NaN win;
 *  - data movement (Transpose, Slice, Expand, Concat, Gather, ConstantOfShape)
 *    moves elements of cp_dtype_size bytes and never looks at them.
 *
 * Levels: element stores as the kernels define them; scalar definitions;
 * per-tensor functions over static shapes; the parameters some ops read
 * from their node (a Transpose's perm, a Slice's starts/ends/axes/steps);
 * and the strided walk they are built on, public because the other
 * reference kernels (MatMul's batch dimensions, the normalisations) walk
 * their operands the same way.
 *
 * Per-tensor functions take tensors for their dtype and (static) shape and
 * separate data pointers (a plan's kernels see tensors of concrete shapes
 * whose data lives in an arena). They check nothing a caller's `supports`
 * predicate already checked: dtypes as documented, shapes consistent (the
 * output the broadcast of the inputs, and so on). None allocates, so a
 * kernel's run may call them; none keeps state. Data may be NULL only for
 * an empty tensor.
 */
#ifndef CP_GRAPH_OP_EVAL_H
#define CP_GRAPH_OP_EVAL_H

#include "graph/graph.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- element stores -------------------------------------------------------------- */

/* Copy one element of `size` bytes (1, 2, 4, 8 or other): what every
 * gather, transpose and fill moves. */
static inline void cp_eval_copy_elem(void *dst, const void *src, size_t size)
{
    switch (size) {
    case 1:
        *(uint8_t *)dst = *(const uint8_t *)src;
        break;
    case 2:
        *(uint16_t *)dst = *(const uint16_t *)src;
        break;
    case 4:
        *(uint32_t *)dst = *(const uint32_t *)src;
        break;
    case 8:
        *(uint64_t *)dst = *(const uint64_t *)src;
        break;
    default:
        memcpy(dst, src, size);
        break;
    }
}

/* f32 -> bf16 as ops define it: truncation; NaN stays a quiet NaN. (The
 * rounding conversion of tensor I/O is graph.h's cp_f32_to_bf16.) */
uint16_t cp_eval_f32_to_bf16(float f);

/* Store v as element i of data of dtype dt: as cp_elem_store_f64 (floats
 * round, integers truncate toward zero and saturate, NaN gives 0, bool is
 * v != 0) except that bf16 truncates (cp_eval_f32_to_bf16). */
void cp_eval_store_f64(void *data, enum cp_dtype dt, int64_t i, double v);

/* Store v as element i: as cp_elem_store_i64 (integers wrap, bool is
 * v != 0) except that bf16 truncates. */
void cp_eval_store_i64(void *data, enum cp_dtype dt, int64_t i, int64_t v);

/* ---- scalar definitions ------------------------------------------------------------ */

/* Sigmoid(x) in f32 without overflow. */
float cp_eval_sigmoid(float x);

/* A unary op on one f32: CP_OP_SQRT, EXP, ERF, TANH, SIGMOID, RELU, or
 * LEAKY_RELU (alpha is its slope; ignored otherwise). Other ops give x. */
float cp_eval_unary_f32(enum cp_op op, float x, float alpha);

/* A binary op on two f32: CP_OP_ADD, SUB, MUL, DIV, POW (powf). Other
 * ops give 0. */
float cp_eval_binary_f32(enum cp_op op, float a, float b);

/* A binary op on integers in int64: CP_OP_ADD, SUB, MUL (wrapping), DIV
 * (toward zero; 0 for a zero divisor), EQUAL (0/1). Other ops give 0. */
int64_t cp_eval_binary_i64(enum cp_op op, int64_t a, int64_t b);

/* ---- elementwise ------------------------------------------------------------------- */

/* y = op(x) over n elements of dtype dt: op as cp_eval_unary_f32 for f32;
 * for integer dtypes (i8, u8, i32, i64) CP_OP_RELU only. x and y may be the
 * same buffer. False, with nothing written, for another op. */
bool cp_eval_unary(enum cp_op op, float alpha, enum cp_dtype dt, int64_t n, const void *x, void *y);

/* RoiAlign's bilinear sample at (y, x) of an h x w plane, as ONNX Runtime
 * takes it: false when the point lies outside [-1, h] x [-1, w] (it then
 * counts as 0); otherwise the four taps' offsets off[] (row-major in the
 * plane) and weights wt[] (summing to 1), edges clamped. Shared by the
 * reference and the fast RoiAlign. */
bool cp_eval_roi_align_tap(double y, double x, int64_t h, int64_t w, int64_t off[4], double wt[4]);

/* Whether Dropout node n computes the identity on its data: training_mode
 * (input 2) absent or known false, or ratio (input 1) a constant 0 (then
 * even training keeps every element). The optional mask is all true. */
bool cp_eval_dropout_is_identity(const struct cp_graph *g, const struct cp_node *n);

/* Clip: y = min(max(x, lo), hi) over n f32 by comparisons (NaN passes
 * through; when lo > hi every value becomes hi, as the spec says). */
void cp_eval_clip_f32(int64_t n, const float *x, float lo, float hi, float *y);

/* Clip over n integers of dtype dt (i8, u8, i32, i64) with int64 bounds. */
void cp_eval_clip_int(enum cp_dtype dt, int64_t n, const void *x, int64_t lo, int64_t hi, void *y);

/* y = a op b with numpy broadcasting (a and b broadcast to y's shape).
 * op: CP_OP_ADD, SUB, MUL, DIV with a, b, y of one dtype (f32 or an
 * integer dtype); CP_OP_POW with a and y of one dtype and b f32, i32 or
 * i64; CP_OP_EQUAL with a and b of one dtype (f32, integer or bool) and y
 * bool. */
void cp_eval_binary(enum cp_op op, const struct cp_tensor *a, const void *ad,
                    const struct cp_tensor *b, const void *bd, const struct cp_tensor *y, void *yd);

/* out = cond ? x : y elementwise with broadcasting; cond is bool, x, y and
 * out share a dtype. */
void cp_eval_where(const struct cp_tensor *cond, const void *cd, const struct cp_tensor *x,
                   const void *xd, const struct cp_tensor *y, const void *yd,
                   const struct cp_tensor *out, void *od);

/* Convert n elements of dtype `from` at x into dtype `to` at y (see the
 * cast rules above; from == to copies). */
void cp_eval_cast(enum cp_dtype from, const void *x, enum cp_dtype to, void *y, int64_t n);

/* ---- reductions and Softmax ------------------------------------------------------------ */

/* Where a reduction's axes come from: the attribute until the opset that
 * made them an input (13 for ReduceSum, 18 for the others); a model that
 * uses the other form is read that way, as inference does. */
bool cp_eval_reduce_axes_from_input(const struct cp_graph *g, const struct cp_node *n);
/* The reduced axes as a mask. OUT: *noop when the op is the identity (empty
 * axes with noop_with_empty_axes). axes_data NULL with axes from an input:
 * the values are checked at run time. false on malformed axes. */
bool cp_eval_reduce_mask(const struct cp_graph *g, const struct cp_node *n, const void *axes_data,
                         int rank, bool mask[CP_MAX_RANK], bool *noop);

/* ReduceMean (f32), ReduceSum, ReduceMax or ReduceMin (f32, i32, i64) of x
 * over the axes where mask[a] is true, into y (x's dtype, y's numel the
 * product of the kept dims). `acc` is scratch of 8 bytes per output
 * element. False, with nothing written, when y's size does not match the
 * mask. */
bool cp_eval_reduce(enum cp_op op, const struct cp_tensor *x, const void *xd, const bool *mask,
                    const struct cp_tensor *y, void *yd, void *acc);

/* Softmax of f32 data viewed as [outer, len, inner], normalizing along len:
 * max-subtracted expf, summed in double. */
void cp_eval_softmax(int64_t outer, int64_t len, int64_t inner, const float *x, float *y);

/* ---- data movement ------------------------------------------------------------------- */

/* y = Transpose(x, perm): output axis a is input axis perm[a]. */
void cp_eval_transpose(const struct cp_tensor *x, const void *xd, const int64_t *perm,
                       const struct cp_tensor *y, void *yd);

/* y = x broadcast (numpy rules, aligned at the right) to y's shape. */
void cp_eval_expand(const struct cp_tensor *x, const void *xd, const struct cp_tensor *y, void *yd);

/* y[i...] = x[first + i * step ...] per axis (from cp_eval_slice_plan). */
void cp_eval_slice(const struct cp_tensor *x, const void *xd, const int64_t *first,
                   const int64_t *step, const struct cp_tensor *y, void *yd);

/* y = Concat(x[0..n), axis): inputs of y's dtype and rank whose sizes along
 * `axis` (normalized) add up to y's. */
void cp_eval_concat(size_t n, const struct cp_tensor *const *x, const void *const *xd, int axis,
                    const struct cp_tensor *y, void *yd);

/* y = Gather(x, idx, axis): idx is i64 or i32, negative indices count from
 * the end. False, with nothing written, when an index is out of range. */
bool cp_eval_gather(const struct cp_tensor *x, const void *xd, const struct cp_tensor *idx,
                    const void *idxd, int axis, const struct cp_tensor *y, void *yd);

/* Range: y[i] = start + i * delta for i < n, in dtype dt: f32 computed in
 * double, integer dtypes in int64 (wrapping) stored as cp_eval_store_i64
 * does. start and delta point at one element of dtype dt. */
void cp_eval_range(enum cp_dtype dt, const void *start, const void *delta, int64_t n, void *y);

/* ConstantOfShape: n copies of the `es`-byte element at value. */
void cp_eval_fill(size_t es, const void *value, int64_t n, void *y);

/* ---- parameters from a node ------------------------------------------------------------- */

/* Normalize axis into [0, rank). OUT: *out. False when out of range. */
bool cp_eval_axis(int64_t axis, int rank, int *out);

/* A Transpose's perm for input rank `rank`: the attribute, reversed axes
 * when absent. OUT: perm[rank]. False when it is not a permutation. */
bool cp_eval_transpose_perm(const struct cp_node *n, int rank, int64_t *perm);

/* A Slice's first index and step per axis of x (0 and 1 for axes it does
 * not slice), with ONNX's clamping, checked against y's shape. Parameters
 * come from attributes before opset 10 and from inputs 1..4 (i64 or i32,
 * 1-D; their data in in_data[1..4]) from 10; in_data NULL checks only the
 * parameters' form (inputs from opset 10 are then not read). OUT:
 * first[x rank], step[x rank]. False when malformed or not y's shape. */
bool cp_eval_slice_plan(const struct cp_graph *g, const struct cp_node *n,
                        const void *const *in_data, const struct cp_shape *xs,
                        const struct cp_shape *ys, int64_t *first, int64_t *step);

/* Whether shape s broadcasts (numpy rules) to shape `to`. Both static. */
bool cp_eval_broadcasts(const struct cp_shape *s, const struct cp_shape *to);

/* ---- the fused activation ------------------------------------------------------------- */

/* The activation FusedConv, FusedMatMul and GroupNormalization carry
 * (graph.h), which the fusion passes write and the kernels read: the
 * `activation` attribute names, in this order, "" (none), "Relu",
 * "LeakyRelu" (activation_alpha = slope, default 0.01), "Clip"
 * (activation_alpha = min, activation_beta = max), "Sigmoid", "SiLU"
 * (x * sigmoid(x)), "Gelu" (erf form), "GeluTanh", then ONNX's HardSwish,
 * "HardSigmoid" (activation_alpha, activation_beta: defaults 0.2, 0.5),
 * "Elu" (activation_alpha, default 1), "Softplus", "Mish" and "Tanh". */
enum cp_act_kind {
    CP_ACT_NONE = 0,
    CP_ACT_RELU,
    CP_ACT_LEAKY_RELU,
    CP_ACT_CLIP,
    CP_ACT_SIGMOID,
    CP_ACT_SILU,
    CP_ACT_GELU,
    CP_ACT_GELU_TANH,
    CP_ACT_HARD_SWISH,
    CP_ACT_HARD_SIGMOID,
    CP_ACT_ELU,
    CP_ACT_SOFTPLUS,
    CP_ACT_MISH,
    CP_ACT_TANH,
    CP_ACT_BAD /* not an activation name */
};

struct cp_act {
    enum cp_act_kind kind;
    float alpha, beta;
};

/* sqrt(2/pi) and the cubic coefficient of the tanh form of GELU. */
#define CP_GELU_TANH_K 0.7978845608028654
#define CP_GELU_TANH_C 0.044715

/* The attribute value of a kind ("" for none); NULL for CP_ACT_BAD. */
const char *cp_act_name(enum cp_act_kind k);

/* The kind an attribute value names; CP_ACT_BAD when none. */
enum cp_act_kind cp_act_from_name(const char *name);

/* The activation attributes of a node; kind CP_ACT_BAD when unknown. */
struct cp_act cp_act_of(const struct cp_node *n);

/* The reference definition: act(x) with libm, in double where it matters. */
float cp_act_ref(const struct cp_act *a, float x);

/* ---- strided walks ----------------------------------------------------------------------- */

#define CP_WALK_MAX_OPS 4

/* An iteration space and, per operand, an element stride per dimension and
 * a base offset: up to CP_WALK_MAX_OPS operands viewed with arbitrary
 * strides over one space (broadcasting is stride 0, transposition permuted
 * strides, slicing scaled strides), visited row by row so that the
 * innermost loop is a plain counted loop. Operand 0 is usually the output.
 * Set up with init, bcast (or strides and base set by hand), then finish. */
struct cp_walk {
    int rank; /* >= 1 after cp_walk_finish */
    int n_ops;
    int64_t dims[CP_MAX_RANK];
    int64_t strides[CP_WALK_MAX_OPS][CP_MAX_RANK];
    int64_t base[CP_WALK_MAX_OPS];
    /* Set by cp_walk_finish: rows to visit and the inner loop. */
    int64_t rows;
    int64_t inner;
    int64_t inner_stride[CP_WALK_MAX_OPS];
};

/* Position of a row-by-row visit. */
struct cp_walk_pos {
    int64_t idx[CP_MAX_RANK];
    int64_t off[CP_WALK_MAX_OPS]; /* element offset of each operand at the row's start */
};

/* Start a walk over `space` (static) for n_ops operands, all strides 0. */
void cp_walk_init(struct cp_walk *w, const struct cp_shape *space, int n_ops);
/* Operand op is a row-major tensor of shape s broadcast (numpy rules,
 * aligned at the right) to the space: stride 0 where s has a 1. */
void cp_walk_bcast(struct cp_walk *w, int op, const struct cp_shape *s);
/* Merge dims that every operand walks contiguously, drop dims of 1, and
 * compute rows / inner. Call once after the strides are set. */
void cp_walk_finish(struct cp_walk *w);
/* The first row. OUT: *p. */
void cp_walk_start(const struct cp_walk *w, struct cp_walk_pos *p);
/* Advance p to the next row (over every dim but the last). */
void cp_walk_next(const struct cp_walk *w, struct cp_walk_pos *p);
/* Copy elements of `size` bytes from operand 1 (src) to operand 0 (dst)
 * along the walk. */
void cp_walk_copy(const struct cp_walk *w, void *dst, const void *src, size_t size);

/* ---- [rnn] ---- */
/*
 * The attributes of ONNX's recurrent ops (LSTM, GRU, RNN), read and checked
 * once, for shape inference, the kernels and the cost model.
 *
 * ONNX's gate order is kept: LSTM i o f c (W is [dirs, 4H, I]), GRU z r h
 * ([dirs, 3H, I]), RNN one gate ([dirs, H, I]). Activations are per
 * direction: LSTM f g h, GRU f g, RNN f; defaults Sigmoid/Tanh/Tanh,
 * Sigmoid/Tanh and Tanh. activation_alpha / activation_beta are consumed in
 * the order of the activations, each taking as many as it uses (Affine,
 * ScaledTanh, HardSigmoid one alpha and one beta; LeakyRelu,
 * ThresholdedRelu, Elu one alpha), ONNX's defaults when the lists run out.
 */
enum cp_rnn_act {
    CP_RNN_RELU,
    CP_RNN_TANH,
    CP_RNN_SIGMOID,
    CP_RNN_AFFINE,
    CP_RNN_LEAKY_RELU,
    CP_RNN_THRESHOLDED_RELU,
    CP_RNN_SCALED_TANH,
    CP_RNN_HARD_SIGMOID,
    CP_RNN_ELU,
    CP_RNN_SOFTSIGN,
    CP_RNN_SOFTPLUS,
};

struct cp_rnn_fn {
    enum cp_rnn_act act;
    float alpha, beta;
};

#define CP_RNN_MAX_ACTS 3

struct cp_rnn_desc {
    int gates;                /* 4 LSTM, 3 GRU, 1 RNN */
    int n_acts;               /* activations per direction: 3, 2, 1 */
    int dirs;                 /* 1 or 2 */
    bool reverse;             /* direction "reverse" (dirs == 1) */
    int64_t hidden;           /* H; -1 when neither hidden_size nor R's shape says */
    int layout;               /* 0: [seq, batch, ...]; 1 (opset 14): [batch, seq, ...] */
    bool has_clip;            /* clip attribute present */
    float clip;               /* > 0 */
    bool input_forget;        /* LSTM */
    bool linear_before_reset; /* GRU */
    struct cp_rnn_fn fn[2][CP_RNN_MAX_ACTS]; /* [direction][f, g, h] */
};

/* Read the attributes of recurrent node n (LSTM, GRU or RNN) in a model of
 * `opset`; R (input 2, may have an unknown shape) gives H when hidden_size
 * is absent. false with a message in why[n] when an attribute is bad. */
bool cp_rnn_describe(const struct cp_graph *g, const struct cp_node *n, int64_t opset,
                     struct cp_rnn_desc *desc, char *why, size_t why_n);

/* One activation applied to x. */
double cp_rnn_apply(const struct cp_rnn_fn *f, double x);

/*
 * What the signal ops that make data from a description compute
 * (HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix), shared by
 * their reference kernels (runner/cpu/ref_signal.c) and the constant
 * folder, so a folded window or mel matrix holds what the runtime would
 * compute. Math in double, stored into any dtype with cp_elem_store_f64.
 */
/* w[i] = a0 - a1 cos(2πi/N) + a2 cos(4πi/N) for i < size, N = size when
 * periodic, else size - 1; `op` is one of the three window ops. */
void cp_eval_window(enum cp_op op, bool periodic, int64_t size, enum cp_dtype dt, void *out);

/* ONNX's MelWeightMatrix, [dft_length / 2 + 1, num_mel_bins]: triangular
 * filters between num_mel_bins + 2 points that split [lower, upper] evenly
 * in mel, each mapped to the bin floor((dft_length + 1) * hz /
 * sample_rate); filter m rises from point m to m+1 and falls to m+2.
 * false (nothing written) when an argument is out of range. */
bool cp_eval_mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate,
                               double lower_hz, double upper_hz, enum cp_dtype dt, void *out);
/* ---- end [rnn] ---- */
/* ---- [elementwise] ---- */
/* The elementwise family's ops (unary math, activations, comparisons,
 * logic, Mod, bitwise, variadic, random generators). */
#include "graph/op_eval_elementwise.h"
/* ---- [reduce_index] ---- */

/* An Einsum equation resolved against its input shapes. Labels 0..51 are
 * the letters (A-Z then a-z), 52.. the dims an ellipsis stands for
 * (right-aligned across inputs, broadcasting where a dim is 1). */
#define CP_EINSUM_MAX_IN     8
#define CP_EINSUM_MAX_LABELS (52 + CP_MAX_RANK)
struct cp_einsum {
    int n_in;
    int rank[CP_EINSUM_MAX_IN];
    int label[CP_EINSUM_MAX_IN][CP_MAX_RANK];
    int64_t dim[CP_EINSUM_MAX_IN][CP_MAX_RANK]; /* the input's own dims */
    int out_rank;
    int out_label[CP_MAX_RANK];
    int64_t size[CP_EINSUM_MAX_LABELS]; /* -1: unused; the broadcast size */
};

/* Parse `eq` for n_in inputs of the given shapes (a dynamic dim is -1 and
 * sizes a label only when no input knows it). false with a reason in
 * why[n] on a malformed equation or shapes that disagree with it. */
bool cp_eval_einsum_plan(const char *eq, int n_in, const struct cp_shape *const *shapes,
                         struct cp_einsum *e, char *why, size_t n);

/* The reference Einsum over a plan with static shapes: every output element
 * is the sum over the contracted labels of the inputs' product, in double. */
void cp_eval_einsum(const struct cp_einsum *e, const enum cp_dtype *in_dt, const void *const *in,
                    enum cp_dtype out_dt, void *out);
/* ---- end [reduce_index] ---- */

#endif
