/*
 * Private to graph/infer*.c: the context shape inference threads through the
 * per-op functions, and the helpers they share.
 *
 * infer.c drives (topological walk, input/output count checks, the dispatch
 * table, stepwise inference at run time) and holds the shape helpers;
 * infer_values.c the values inference knows and propagates; infer_elem.c covers elementwise ops,
 * reductions and normalizations; infer_nn.c MatMul, Gemm, convolutions,
 * pools, Resize and Pad; infer_shape.c Shape, constants, Range, Reshape and
 * the other ops that only relabel dims; infer_index.c the ops that select
 * along an axis (Concat, Split, Slice, Gather).
 *
 * Values. Besides the public tensor->value (every element known), inference
 * keeps a "symbolic value" for each small integer tensor: every element is
 * either known or unknown, and an unknown one may name the symbolic dimension
 * it equals (Shape of a [batch, 77] tensor gives {batch, 77}). That lets a
 * Shape -> Gather -> Concat -> Reshape chain keep `batch` symbolic while the
 * static dimensions resolve.
 */
#ifndef CP_GRAPH_INFER_INTERNAL_H
#define CP_GRAPH_INFER_INTERNAL_H

#include "graph/graph.h"

struct cp_sval {
    int64_t v;       /* meaningful when known */
    const char *sym; /* when unknown: the symbolic dimension it equals, or NULL */
    bool known;
};

struct cp_svals {
    struct cp_sval *e; /* heap, owned by the context; NULL: nothing known */
    int64_t n;
    bool loaded; /* looked up already */
};

struct cp_infer {
    struct cp_graph *g;
    struct cp_diag *d;
    int64_t opset;
    struct cp_node *node;  /* the node being inferred */
    struct cp_svals *vals; /* per tensor index */
    size_t n_vals;
    /* Stepwise inference at run time (cp_graph_infer_open): the bytes of
     * tensors already computed, per tensor index (NULL: not available), and
     * values kept in the context rather than in the graph's arena. */
    const void *const *run_data;
    bool private_values;
};

/* The number of nonzero elements of tensor t when its values are known
 * (constants, or run-time bytes of any size); false otherwise. */
bool cp_infer_count_nonzero(struct cp_infer *c, int32_t t, int64_t *count);

/* The values' lifetime in one inference (infer_values.c): initializers'
 * public values set up front, the context's values freed at the end. */
enum cp_status cp_infer_fill_initializer_values(struct cp_infer *c);
void cp_infer_free_vals(struct cp_infer *c);

/* ---- errors --------------------------------------------------------------- */

/* Record "node 'name' (OpType): <message>" with status `st`; returns `st`. */
enum cp_status cp_infer_fail_st(struct cp_infer *c, enum cp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same with CP_ERR_INVALID. */
enum cp_status cp_infer_fail(struct cp_infer *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- inputs and outputs ----------------------------------------------------- */

/* Input / output i of the current node; NULL when absent (-1) or past the end. */
struct cp_tensor *cp_infer_in(const struct cp_infer *c, size_t i);
int32_t cp_infer_in_index(const struct cp_infer *c, size_t i);
struct cp_tensor *cp_infer_out(const struct cp_infer *c, size_t i);

/* Set output i's dtype and shape. Graph inputs and initializers are never
 * touched; when the tensor already has a shape of the same rank (value_info),
 * inferred static dims win and the old dims fill in what inference left
 * dynamic. A shape of unknown rank keeps the old shape. Absent outputs are a
 * no-op. CP_ERR_UNSUPPORTED when the rank exceeds CP_MAX_RANK; CP_ERR_INVALID,
 * naming the node, when the resulting static shape is too large for any
 * tensor (cp_shape_nbytes). */
enum cp_status cp_infer_set_out(struct cp_infer *c, size_t i, enum cp_dtype dt,
                                const struct cp_shape *s);

/* ---- shapes ------------------------------------------------------------------ */

void cp_infer_dim_set(struct cp_dim *dm, int64_t v);
void cp_infer_dim_dyn(struct cp_dim *dm);
/* A shape of `rank` dims all dynamic (rank < 0: unknown). */
void cp_infer_shape_dyn(struct cp_shape *s, int rank);

/* Normalize an axis in [-rank, rank) (or [-rank, rank] when `inclusive`);
 * fails naming `what`. */
enum cp_status cp_infer_axis(struct cp_infer *c, int64_t axis, int rank, bool inclusive,
                             const char *what, int *out);

/* Multidirectional (numpy) broadcast of a and b into out. Keeps the sym of a
 * dimension that passes through; fails on two different static dims, naming
 * the tensors na and nb (either may be NULL). */
enum cp_status cp_infer_broadcast(struct cp_infer *c, const struct cp_shape *a, const char *na,
                                  const struct cp_shape *b, const char *nb, struct cp_shape *out);

/* Flat index into static shape `in`, broadcast against static `out`, of
 * output element `flat`. */
int64_t cp_infer_bcast_index(const struct cp_shape *out, const struct cp_shape *in, int64_t flat);
/* Coordinates of a flat index in a static shape, and back. */
void cp_infer_unravel(const struct cp_shape *s, int64_t flat, int64_t *coords);
int64_t cp_infer_ravel(const struct cp_shape *s, const int64_t *coords);

/* "1x64x?x?" into buf[64], for messages. */
const char *cp_infer_fmt(const struct cp_shape *s, char buf[64]);

/* ---- attributes ---------------------------------------------------------------- */

/* An INTS attribute copied into out[cap]. OUT: *n. false when absent; fails
 * when present with the wrong type or more than cap entries. */
enum cp_status cp_infer_attr_ints(struct cp_infer *c, const char *name, int64_t *out, size_t cap,
                                  size_t *n, bool *present);

/* ---- values ---------------------------------------------------------------------- */

/* The symbolic value of tensor t, or NULL. Reads tensor->value, initializer
 * data and Constant nodes lazily. OUT: *n (element count). */
const struct cp_sval *cp_infer_vals(struct cp_infer *c, int32_t t, int64_t *n);
/* Every element of t known: copies up to cap into out. OUT: *n. */
bool cp_infer_ints(struct cp_infer *c, int32_t t, int64_t *out, int64_t cap, int64_t *n);
/* Numeric contents of t as doubles, from float or integer constant data or
 * known integer values (Resize scales, Range bounds). OUT: *n. */
bool cp_infer_doubles(struct cp_infer *c, int32_t t, double *out, int64_t cap, int64_t *n);

/* Whether output i can carry a value: an integer dtype and a static shape of
 * at most CP_VALUE_MAX_ELEMS elements. OUT: *numel. */
bool cp_infer_out_small(const struct cp_infer *c, size_t i, int64_t *numel);
/* Store the symbolic value of output i; takes ownership of `e` (heap) in
 * every case. Also sets tensor->value when every element is known. */
enum cp_status cp_infer_set_vals(struct cp_infer *c, size_t i, struct cp_sval *e, int64_t n);
/* Output i's value gathered from src: element k is src[map[k]] (map NULL:
 * identity). n elements. */
enum cp_status cp_infer_copy_vals(struct cp_infer *c, size_t i, const struct cp_sval *src,
                                  const int64_t *map, int64_t n);
/* Wrap an integer into the range of dtype (i32 wraps, bool is != 0). */
int64_t cp_infer_wrap(enum cp_dtype dt, int64_t v);
bool cp_infer_dtype_has_value(enum cp_dtype dt);

/* ---- per-op inference --------------------------------------------------------------- */

enum cp_status cp_infer_binary(struct cp_infer *c);
enum cp_status cp_infer_unary(struct cp_infer *c);
enum cp_status cp_infer_identity(struct cp_infer *c);
enum cp_status cp_infer_softmax(struct cp_infer *c);
enum cp_status cp_infer_dropout(struct cp_infer *c);
enum cp_status cp_infer_cast(struct cp_infer *c);
enum cp_status cp_infer_where(struct cp_infer *c);
enum cp_status cp_infer_reduce(struct cp_infer *c);
enum cp_status cp_infer_batch_norm(struct cp_infer *c);
enum cp_status cp_infer_instance_norm(struct cp_infer *c);
enum cp_status cp_infer_layer_norm(struct cp_infer *c);

enum cp_status cp_infer_matmul(struct cp_infer *c);
enum cp_status cp_infer_gemm(struct cp_infer *c);
enum cp_status cp_infer_conv(struct cp_infer *c);
enum cp_status cp_infer_conv_transpose(struct cp_infer *c);
enum cp_status cp_infer_pool(struct cp_infer *c);
enum cp_status cp_infer_global_pool(struct cp_infer *c);
enum cp_status cp_infer_resize(struct cp_infer *c);
enum cp_status cp_infer_pad(struct cp_infer *c);

enum cp_status cp_infer_shape_op(struct cp_infer *c);
enum cp_status cp_infer_constant(struct cp_infer *c);
enum cp_status cp_infer_constant_of_shape(struct cp_infer *c);
enum cp_status cp_infer_reshape(struct cp_infer *c);
enum cp_status cp_infer_flatten(struct cp_infer *c);
enum cp_status cp_infer_transpose(struct cp_infer *c);
enum cp_status cp_infer_squeeze(struct cp_infer *c);
enum cp_status cp_infer_unsqueeze(struct cp_infer *c);
enum cp_status cp_infer_expand(struct cp_infer *c);
enum cp_status cp_infer_concat(struct cp_infer *c);
enum cp_status cp_infer_split(struct cp_infer *c);
enum cp_status cp_infer_slice(struct cp_infer *c);
enum cp_status cp_infer_gather(struct cp_infer *c);
enum cp_status cp_infer_range(struct cp_infer *c);

enum cp_status cp_infer_fused_conv(struct cp_infer *c);
enum cp_status cp_infer_fused_matmul(struct cp_infer *c);
enum cp_status cp_infer_group_norm(struct cp_infer *c);
enum cp_status cp_infer_gelu(struct cp_infer *c);
enum cp_status cp_infer_fused_attention(struct cp_infer *c);
enum cp_status cp_infer_trans_data(struct cp_infer *c);

/* ---- [rnn] ---- */
/* infer_rnn.c: LSTM, GRU, RNN and the signal ops. */
enum cp_status cp_infer_lstm(struct cp_infer *c);
enum cp_status cp_infer_gru(struct cp_infer *c);
enum cp_status cp_infer_rnn(struct cp_infer *c);
enum cp_status cp_infer_dft(struct cp_infer *c);
enum cp_status cp_infer_stft(struct cp_infer *c);
enum cp_status cp_infer_window(struct cp_infer *c);
enum cp_status cp_infer_mel_weight_matrix(struct cp_infer *c);
/* ---- end [rnn] ---- */
/* ---- [legacy] ---- */
/* infer_legacy.c: Add/Sub/Mul/Div/Pow/Equal before opset 7 (`broadcast`,
 * `axis`): refuses what numpy broadcasting would compute differently. */
enum cp_status cp_infer_legacy_broadcast(struct cp_infer *c, const struct cp_tensor *a,
                                         const struct cp_tensor *b);
/* ---- end [legacy] ---- */
/* ---- [elementwise] ---- */
enum cp_status cp_infer_ew_unary(struct cp_infer *c);
enum cp_status cp_infer_ew_binary(struct cp_infer *c);
enum cp_status cp_infer_ew_variadic(struct cp_infer *c);
enum cp_status cp_infer_cast_like(struct cp_infer *c);
enum cp_status cp_infer_random(struct cp_infer *c);
/* ---- [reduce_index] ---- */
enum cp_status cp_infer_argmax(struct cp_infer *c);
enum cp_status cp_infer_compress(struct cp_infer *c);
enum cp_status cp_infer_eye_like(struct cp_infer *c);
enum cp_status cp_infer_gather_elements(struct cp_infer *c);
enum cp_status cp_infer_gather_nd(struct cp_infer *c);
enum cp_status cp_infer_nll_loss(struct cp_infer *c);
enum cp_status cp_infer_nonzero(struct cp_infer *c);
enum cp_status cp_infer_onehot(struct cp_infer *c);
enum cp_status cp_infer_same_shape(struct cp_infer *c);
enum cp_status cp_infer_scatter(struct cp_infer *c);
enum cp_status cp_infer_sce_loss(struct cp_infer *c);
enum cp_status cp_infer_size(struct cp_infer *c);
enum cp_status cp_infer_tile(struct cp_infer *c);
enum cp_status cp_infer_topk(struct cp_infer *c);
enum cp_status cp_infer_reverse_sequence(struct cp_infer *c);
enum cp_status cp_infer_det(struct cp_infer *c);
enum cp_status cp_infer_einsum(struct cp_infer *c);
enum cp_status cp_infer_unique(struct cp_infer *c);
enum cp_status cp_infer_reduce_values(struct cp_infer *c);
/* ---- end [reduce_index] ---- */
/* ---- [nn] ---- */
enum cp_status cp_infer_lrn(struct cp_infer *c);
enum cp_status cp_infer_lp_normalization(struct cp_infer *c);
enum cp_status cp_infer_mvn(struct cp_infer *c);
enum cp_status cp_infer_global_max_pool(struct cp_infer *c);
enum cp_status cp_infer_lp_pool(struct cp_infer *c);
enum cp_status cp_infer_max_unpool(struct cp_infer *c);
enum cp_status cp_infer_depth_to_space(struct cp_infer *c);
enum cp_status cp_infer_space_to_depth(struct cp_infer *c);
enum cp_status cp_infer_grid_sample(struct cp_infer *c);
enum cp_status cp_infer_roi_align(struct cp_infer *c);
enum cp_status cp_infer_nms(struct cp_infer *c);
enum cp_status cp_infer_max_roi_pool(struct cp_infer *c);
enum cp_status cp_infer_center_crop_pad(struct cp_infer *c);
enum cp_status cp_infer_col2im(struct cp_infer *c);
enum cp_status cp_infer_affine_grid(struct cp_infer *c);
enum cp_status cp_infer_deform_conv(struct cp_infer *c);
/* ---- [quant] ---- */
enum cp_status cp_infer_quantize_linear(struct cp_infer *c);
enum cp_status cp_infer_dequantize_linear(struct cp_infer *c);
enum cp_status cp_infer_qlinear_conv(struct cp_infer *c);
enum cp_status cp_infer_qlinear_matmul(struct cp_infer *c);
enum cp_status cp_infer_matmul_integer(struct cp_infer *c);
enum cp_status cp_infer_conv_integer(struct cp_infer *c);
enum cp_status cp_infer_dynamic_quantize_linear(struct cp_infer *c);
/* ---- end [quant] ---- */
/* ---- [control] ---- */
enum cp_status cp_infer_if(struct cp_infer *c);
enum cp_status cp_infer_loop(struct cp_infer *c);
enum cp_status cp_infer_scan(struct cp_infer *c);

#endif
