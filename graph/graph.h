/*
 * graph: cannprof's intermediate representation of a model.
 *
 * A `struct cp_graph` owns everything in it: tensors, nodes, attributes and
 * names live in the graph's arena and die with it. Tensors and nodes are
 * referred to by index (int32), so passes can rewrite the graph without
 * dangling pointers; an absent optional input is index -1.
 *
 * Every node carries `origins`, the names of the original ONNX nodes it stands
 * for. Import sets one origin per node; passes that fuse nodes merge the
 * lists, so any later finding can name nodes of the user's own model.
 *
 * The op table (`cp_op_*`) is the single list of operators the CPU target
 * knows. Each op has its definition here (attributes, validation, shape and
 * dtype inference, FLOP and byte estimates); kernels live in runner/.
 *
 * Pieces: graph.c (construction, arena), op.c (op table), verify.c
 * (topological order, dangling inputs, cycles, duplicate names), infer*.c
 * (shape/dtype inference with small-integer value propagation, so the
 * Shape→Gather→Concat→Reshape chains PyTorch exports resolve), cost.c (FLOPs
 * and bytes), dtype.c (dtype and layout names and sizes).
 *
 * op_eval.h is the arithmetic of the elementwise, cast, reduction and
 * data-movement ops, which the runtime's reference kernels and the constant
 * folder share.
 */
#ifndef CP_GRAPH_H
#define CP_GRAPH_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- dtypes and layouts ------------------------------------------------ */

enum cp_dtype {
    CP_DTYPE_UNDEFINED = 0,
    CP_DTYPE_F32,
    CP_DTYPE_F16,
    CP_DTYPE_BF16,
    CP_DTYPE_I8,
    CP_DTYPE_U8,
    CP_DTYPE_I32,
    CP_DTYPE_I64,
    CP_DTYPE_BOOL,
    CP_DTYPE_F64,
    CP_DTYPE_I16,
    CP_DTYPE_U16,
    CP_DTYPE_U32,
    CP_DTYPE_U64,
    CP_DTYPE_COUNT
};

/* "f32", "i64", ... ; "undefined" for CP_DTYPE_UNDEFINED. */
const char *cp_dtype_name(enum cp_dtype t);
/* Inverse of cp_dtype_name; CP_DTYPE_UNDEFINED when unknown. */
enum cp_dtype cp_dtype_from_name(const char *name);
/* Bytes per element (bool is 1); 0 for undefined. */
size_t cp_dtype_size(enum cp_dtype t);
/* ONNX TensorProto.DataType value <-> ours; CP_DTYPE_UNDEFINED / 0 if none. */
enum cp_dtype cp_dtype_from_onnx(int onnx_type);
int cp_dtype_to_onnx(enum cp_dtype t);
bool cp_dtype_is_float(enum cp_dtype t);

/* f16 and bf16 conversions. f32 -> f16 and f32 -> bf16 round to nearest,
 * ties to even (overflow to inf, NaN stays a quiet NaN). */
float cp_f16_to_f32(uint16_t h);
uint16_t cp_f32_to_f16(float f);
float cp_bf16_to_f32(uint16_t h);
uint16_t cp_f32_to_bf16(float f);

/* Element i of a dtype's array read as double or int64 (floats to integers
 * truncate toward zero, saturating, NaN to 0), and written from one
 * (integers wrap into narrower integer dtypes when written from int64,
 * saturate when written from double; bool is != 0). */
double cp_elem_load_f64(const void *data, enum cp_dtype dt, int64_t i);
int64_t cp_elem_load_i64(const void *data, enum cp_dtype dt, int64_t i);
/* How many of the n elements at data are nonzero (NaN is, -0.0 is not),
 * NonZero's and Compress's test; with pos, the positions of the first cap
 * of them, ascending, are written there. One typed pass over the data. */
int64_t cp_elem_count_nonzero(const void *data, enum cp_dtype dt, int64_t n, int64_t *pos,
                              int64_t cap);
void cp_elem_store_f64(void *data, enum cp_dtype dt, int64_t i, double v);
void cp_elem_store_i64(void *data, enum cp_dtype dt, int64_t i, int64_t v);

/* The memory format a tensor's data is kept in. */
enum cp_layout {
    CP_LAYOUT_UNDEF = 0, /* not decided yet */
    CP_LAYOUT_ND,        /* plain row-major, no image semantics */
    CP_LAYOUT_NCHW,
    CP_LAYOUT_NHWC,
    CP_LAYOUT_NCDHW,
    CP_LAYOUT_NCHW8C,  /* oneDNN blocked, 8 channels */
    CP_LAYOUT_NCHW16C, /* oneDNN blocked, 16 channels */
    CP_LAYOUT_COUNT
};

const char *cp_layout_name(enum cp_layout l);
enum cp_layout cp_layout_from_name(const char *name); /* UNDEF when unknown */

/* ---- shapes ------------------------------------------------------------- */

#define CP_MAX_RANK 8

/* A dimension: value >= 0 is known; value < 0 is dynamic, and `sym` then may
 * name it (symbolic dimension such as "batch"; arena-owned, may be NULL). */
struct cp_dim {
    int64_t value;
    const char *sym;
};

/* rank < 0: rank unknown (the shape is not inferred yet). */
struct cp_shape {
    int rank;
    struct cp_dim dims[CP_MAX_RANK];
};

void cp_shape_set_unknown(struct cp_shape *s);
/* A fully known shape from values. rank must be <= CP_MAX_RANK. */
void cp_shape_set(struct cp_shape *s, int rank, const int64_t *dims);
bool cp_shape_is_static(const struct cp_shape *s);
/* Element count of a static shape (1 for rank 0); -1 if not static or on
 * overflow. */
int64_t cp_shape_numel(const struct cp_shape *s);

/* The largest byte size a tensor may have: every element and byte offset
 * of one fits in int64 (and so in size_t). Shapes come from untrusted
 * models, so a size is computed with this check, never as a bare
 * numel * size that could wrap. */
#define CP_TENSOR_MAX_BYTES ((uint64_t)INT64_MAX)

/* Bytes of a tensor of static shape `s` and dtype `dt`: element count times
 * element size, checked. False when the shape is not static, the dtype has
 * no size, or the size exceeds CP_TENSOR_MAX_BYTES. OUT: *nbytes (0 when
 * false; may be NULL). */
bool cp_shape_nbytes(const struct cp_shape *s, enum cp_dtype dt, size_t *nbytes);
bool cp_shape_equal(const struct cp_shape *a, const struct cp_shape *b);
/* "1x4x64x64", "?x77x768", "batchx3", "scalar", "unknown". Writes out[n]. */
void cp_shape_format(const struct cp_shape *s, char *out, size_t n);

/* ---- tensors ------------------------------------------------------------ */

enum cp_tensor_kind {
    CP_TENSOR_INTERMEDIATE = 0, /* produced by a node */
    CP_TENSOR_INPUT,            /* graph input fed at run time */
    CP_TENSOR_INITIALIZER,      /* constant weight data */
};

/* Who owns an initializer's bytes. */
enum cp_data_owner {
    CP_DATA_NONE = 0, /* no data */
    CP_DATA_ARENA,    /* in the graph's arena */
    CP_DATA_HEAP,     /* malloc'ed, freed with the graph */
    CP_DATA_MMAP,     /* points into a mapping the graph holds (cp_graph_adopt_mmap) */
};

struct cp_tensor {
    const char *name; /* unique within the graph; arena-owned */
    enum cp_dtype dtype;
    struct cp_shape shape;
    enum cp_layout layout;
    enum cp_tensor_kind kind;
    /* Initializer data (kind == INITIALIZER), nbytes = numel * dtype size. */
    const void *data;
    size_t nbytes;
    enum cp_data_owner owner;
    /* Small integer value known at conversion time (shape arithmetic), filled
     * by shape inference for i64/i32/bool tensors of at most
     * CP_VALUE_MAX_ELEMS elements; NULL if not known. Arena-owned. */
    const int64_t *value;
    int64_t value_len;
    int32_t producer; /* node index, -1 for inputs/initializers */
};

#define CP_VALUE_MAX_ELEMS 64

/* ---- attributes --------------------------------------------------------- */

enum cp_attr_type {
    CP_ATTR_INT = 1,
    CP_ATTR_FLOAT,
    CP_ATTR_STRING,
    CP_ATTR_INTS,
    CP_ATTR_FLOATS,
    CP_ATTR_STRINGS,
    CP_ATTR_TENSOR, /* a tensor value (e.g. ConstantOfShape's value) */
    CP_ATTR_GRAPH,  /* a subgraph: If's branches, Loop's and Scan's body */
};

struct cp_attr {
    const char *name;
    enum cp_attr_type type;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;
    const float *floats;
    const char *const *strings;
    size_t n;       /* element count for INTS/FLOATS/STRINGS */
    int32_t tensor; /* CP_ATTR_TENSOR: index of a detached tensor */
    /* CP_ATTR_GRAPH: the subgraph, owned by the node's graph (see
     * "subgraphs" below). */
    struct cp_graph *graph;
};

/* ---- operators ---------------------------------------------------------- */

/* The operator table. Order is part of the .om format: append only. */
enum cp_op {
    CP_OP_UNKNOWN = 0,
    CP_OP_ADD,
    CP_OP_SUB,
    CP_OP_MUL,
    CP_OP_DIV,
    CP_OP_POW,
    CP_OP_SQRT,
    CP_OP_EXP,
    CP_OP_ERF,
    CP_OP_TANH,
    CP_OP_SIGMOID,
    CP_OP_RELU,
    CP_OP_LEAKY_RELU,
    CP_OP_CLIP,
    CP_OP_SOFTMAX,
    CP_OP_REDUCE_MEAN,
    CP_OP_REDUCE_SUM,
    CP_OP_REDUCE_MAX,
    CP_OP_MATMUL,
    CP_OP_GEMM,
    CP_OP_CONV,
    CP_OP_CONV_TRANSPOSE,
    CP_OP_MAX_POOL,
    CP_OP_AVERAGE_POOL,
    CP_OP_GLOBAL_AVERAGE_POOL,
    CP_OP_BATCH_NORMALIZATION,
    CP_OP_INSTANCE_NORMALIZATION,
    CP_OP_LAYER_NORMALIZATION,
    CP_OP_CONCAT,
    CP_OP_SPLIT,
    CP_OP_SLICE,
    CP_OP_GATHER,
    CP_OP_RESHAPE,
    CP_OP_FLATTEN,
    CP_OP_TRANSPOSE,
    CP_OP_SQUEEZE,
    CP_OP_UNSQUEEZE,
    CP_OP_SHAPE,
    CP_OP_EXPAND,
    CP_OP_WHERE,
    CP_OP_EQUAL,
    CP_OP_CAST,
    CP_OP_CONSTANT,
    CP_OP_CONSTANT_OF_SHAPE,
    CP_OP_IDENTITY,
    CP_OP_RESIZE,
    CP_OP_PAD,
    CP_OP_RANGE,
    CP_OP_DROPOUT, /* inference: identity; removed by a cleanup pass */
    /* cannprof's own ops (domain CP_DOMAIN), made by conversion passes; their
     * definitions follow. */
    CP_OP_FUSED_CONV,
    CP_OP_FUSED_MATMUL,
    CP_OP_GROUP_NORMALIZATION,
    CP_OP_GELU,
    CP_OP_FUSED_ATTENTION,
    CP_OP_TRANS_DATA,
    /* More ops of the default ONNX domain, appended after cannprof's own;
     * grouped by family, each family between its markers. */
    /* ---- [elementwise] ---- */
    CP_OP_ABS,
    CP_OP_NEG,
    CP_OP_RECIPROCAL,
    CP_OP_FLOOR,
    CP_OP_CEIL,
    CP_OP_ROUND,
    CP_OP_SIGN,
    CP_OP_LOG,
    CP_OP_SIN,
    CP_OP_COS,
    CP_OP_TAN,
    CP_OP_ASIN,
    CP_OP_ACOS,
    CP_OP_ATAN,
    CP_OP_SINH,
    CP_OP_COSH,
    CP_OP_ASINH,
    CP_OP_ACOSH,
    CP_OP_ATANH,
    CP_OP_IS_NAN,
    CP_OP_IS_INF,
    CP_OP_NOT,
    CP_OP_BITWISE_NOT,
    CP_OP_ELU,
    CP_OP_SELU,
    CP_OP_CELU,
    CP_OP_HARD_SIGMOID,
    CP_OP_HARD_SWISH,
    CP_OP_SOFTSIGN,
    CP_OP_SOFTPLUS,
    CP_OP_THRESHOLDED_RELU,
    CP_OP_SHRINK,
    CP_OP_MISH,
    CP_OP_PRELU,
    CP_OP_GREATER,
    CP_OP_LESS,
    CP_OP_GREATER_OR_EQUAL,
    CP_OP_LESS_OR_EQUAL,
    CP_OP_AND,
    CP_OP_OR,
    CP_OP_XOR,
    CP_OP_MOD,
    CP_OP_BIT_SHIFT,
    CP_OP_BITWISE_AND,
    CP_OP_BITWISE_OR,
    CP_OP_BITWISE_XOR,
    CP_OP_MAX,
    CP_OP_MIN,
    CP_OP_SUM,
    CP_OP_MEAN,
    CP_OP_CAST_LIKE,
    CP_OP_RANDOM_NORMAL,
    CP_OP_RANDOM_UNIFORM,
    CP_OP_RANDOM_NORMAL_LIKE,
    CP_OP_RANDOM_UNIFORM_LIKE,
    CP_OP_BERNOULLI,
    CP_OP_MULTINOMIAL,
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    CP_OP_REDUCE_MIN,
    CP_OP_REDUCE_PROD,
    CP_OP_REDUCE_L1,
    CP_OP_REDUCE_L2,
    CP_OP_REDUCE_LOG_SUM,
    CP_OP_REDUCE_LOG_SUM_EXP,
    CP_OP_REDUCE_SUM_SQUARE,
    CP_OP_ARG_MAX,
    CP_OP_ARG_MIN,
    CP_OP_TOP_K,
    CP_OP_CUM_SUM,
    CP_OP_HARDMAX,
    CP_OP_LOG_SOFTMAX,
    CP_OP_GATHER_ELEMENTS,
    CP_OP_GATHER_ND,
    CP_OP_SCATTER_ELEMENTS,
    CP_OP_SCATTER_ND,
    CP_OP_SCATTER,
    CP_OP_COMPRESS,
    CP_OP_NON_ZERO,
    CP_OP_ONE_HOT,
    CP_OP_TRILU,
    CP_OP_TILE,
    CP_OP_SIZE,
    CP_OP_EYE_LIKE,
    CP_OP_NLL_LOSS,
    CP_OP_SCE_LOSS,
    CP_OP_REVERSE_SEQUENCE,
    CP_OP_DET,
    CP_OP_EINSUM,
    CP_OP_UNIQUE,
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    CP_OP_LRN,
    CP_OP_LP_NORMALIZATION,
    CP_OP_MEAN_VARIANCE_NORMALIZATION,
    CP_OP_GLOBAL_MAX_POOL,
    CP_OP_LP_POOL,
    CP_OP_GLOBAL_LP_POOL,
    CP_OP_MAX_UNPOOL,
    CP_OP_DEPTH_TO_SPACE,
    CP_OP_SPACE_TO_DEPTH,
    CP_OP_GRID_SAMPLE,
    CP_OP_ROI_ALIGN,
    CP_OP_NON_MAX_SUPPRESSION,
    CP_OP_MAX_ROI_POOL,
    CP_OP_CENTER_CROP_PAD,
    CP_OP_COL2IM,
    CP_OP_AFFINE_GRID,
    CP_OP_DEFORM_CONV,
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    CP_OP_LSTM,
    CP_OP_GRU,
    CP_OP_RNN,
    CP_OP_DFT,
    CP_OP_STFT,
    CP_OP_HANN_WINDOW,
    CP_OP_HAMMING_WINDOW,
    CP_OP_BLACKMAN_WINDOW,
    CP_OP_MEL_WEIGHT_MATRIX,
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    CP_OP_IF,
    CP_OP_LOOP,
    CP_OP_SCAN,
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    CP_OP_QUANTIZE_LINEAR,
    CP_OP_DEQUANTIZE_LINEAR,
    CP_OP_QLINEAR_CONV,
    CP_OP_QLINEAR_MATMUL,
    CP_OP_MATMUL_INTEGER,
    CP_OP_CONV_INTEGER,
    CP_OP_DYNAMIC_QUANTIZE_LINEAR,
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
    CP_OP_COUNT
};

/* The domain of cannprof's own ops. */
#define CP_DOMAIN "cannprof"

/*
 * cannprof's own ops. Each replaces a pattern of ONNX ops and computes the
 * same function; attributes are typed as noted.
 *
 * Fused activation, shared by FusedConv, FusedMatMul and GroupNormalization:
 *   activation (string): "" (none), "Relu", "LeakyRelu" (activation_alpha =
 *     slope), "Clip" (activation_alpha = min, activation_beta = max),
 *     "Sigmoid", "SiLU" (x * sigmoid(x)), "Gelu" (erf form), "GeluTanh".
 *   residual (input): optional tensor of the output's shape added to the
 *     result; residual_first (int, default 0): 1 adds it before the
 *     activation (y = act(f(x) + R)), 0 after (y = act(f(x)) + R).
 *
 * FusedConv: Conv (all of Conv's attributes) plus bias and fused activation.
 *   Inputs X, W, [B], [R]. Output as Conv.
 * FusedMatMul: y = alpha * op(A) @ op(B) [+ bias] then activation/residual.
 *   op() swaps the last two dimensions when transA / transB (int) are 1;
 *   alpha (float, default 1); bias is 1-D over the last output dimension.
 *   Inputs A, B, [bias], [R]. Batch dimensions broadcast as in MatMul; made
 *   from MatMul and from Gemm.
 * GroupNormalization: PyTorch's GroupNorm. Inputs X [N, C, ...], scale [C],
 *   bias [C] (per channel); num_groups (int), epsilon (float, default 1e-5);
 *   fused activation (no residual). Output as X.
 * Gelu: approximate (string) "none" (0.5x(1+erf(x/sqrt2))) or "tanh".
 * FusedAttention: softmax(scale * Q Kᵀ + mask) V, per batch and head, never
 *   materialising the N×M score matrix. Inputs Q, K, V, [mask]; mask is
 *   additive and broadcasts to [B, H, N, M]. Attributes: num_heads (int),
 *   scale (float, default 1/sqrt(D)), impl (string, "fast" (default) or
 *   "exact" exp, set from --op_select_implmode), and the layout of each
 *   of q, k, v and the output as q_format / k_format / v_format /
 *   out_format (string):
 *     "BHND" 4-D [B, H, N, D] (the default),
 *     "BHDN" 4-D [B, H, D, N] (K already transposed),
 *     "BNHD" 3-D [B, N, H*D] (heads packed in the last dimension).
 *   compute_precision (string): "fp32" (default) or "bf16".
 *   Output: [B, H, N, Dv] for "BHND", [B, N, H*Dv] for "BNHD".
 * TransData: a layout change, as on Ascend; the logical shape is kept and
 *   the output's layout tag says the new memory format. src_format and
 *   dst_format (string) are layout names (cp_layout_name).
 *
 * Conv, FusedConv, MatMul, FusedMatMul may carry compute_precision "bf16"
 * (set by the precision pass); tensors stay f32 at their boundaries.
 */

/* ONNX op_type name ("MatMul"); "Unknown" for CP_OP_UNKNOWN. */
const char *cp_op_name(enum cp_op op);
/* Lookup by ONNX op_type in the default domain; CP_OP_UNKNOWN if none. */
enum cp_op cp_op_from_name(const char *op_type);
/* Lookup in a domain: the default ONNX domain ("" or "ai.onnx") or
 * CP_DOMAIN for cannprof's own ops. */
enum cp_op cp_op_from_domain_name(const char *domain, const char *op_type);
/* Whether op is one of cannprof's own (domain CP_DOMAIN): FusedConv to
 * TransData; the ops after TransData are ONNX ops again. */
bool cp_op_is_own(enum cp_op op);

/* ---- nodes -------------------------------------------------------------- */

struct cp_node {
    const char *name; /* unique within the graph (may be generated); arena */
    enum cp_op op;
    const char *op_type; /* as written in the source model; arena */
    const char *domain;  /* "" for the default ONNX domain; arena */
    struct cp_attr *attrs;
    size_t n_attrs;
    int32_t *inputs; /* tensor indices; -1 = absent optional input */
    size_t n_inputs;
    int32_t *outputs; /* tensor indices; -1 = absent optional output */
    size_t n_outputs;
    const char **origins; /* original ONNX node names; arena */
    size_t n_origins;
    bool dead; /* removed by a pass; skipped everywhere, dropped by compact */
};

/* ---- the graph ---------------------------------------------------------- */

struct cp_graph;

/* Create an empty graph. Free with cp_graph_free. NULL on out-of-memory. */
struct cp_graph *cp_graph_create(void);
void cp_graph_free(struct cp_graph *g); /* NULL is a no-op */

/* Arena allocation: zeroed memory that lives as long as the graph. NULL on
 * out-of-memory. */
void *cp_graph_alloc(struct cp_graph *g, size_t size);
const char *cp_graph_strdup(struct cp_graph *g, const char *s);

/* Model-level facts. */
const char *cp_graph_name(const struct cp_graph *g);
void cp_graph_set_name(struct cp_graph *g, const char *name);
int64_t cp_graph_opset(const struct cp_graph *g);
void cp_graph_set_opset(struct cp_graph *g, int64_t opset);

/* Add a tensor. The name is copied and must be unique (CP_ERR_INVALID
 * otherwise). OUT: *index. Data is attached with cp_graph_set_data. */
enum cp_status cp_graph_add_tensor(struct cp_graph *g, const char *name, enum cp_dtype dtype,
                                   const struct cp_shape *shape, enum cp_tensor_kind kind,
                                   int32_t *index, struct cp_diag *d);

/* Attach initializer data. `owner` says who frees it: ARENA and MMAP are
 * never freed individually, HEAP is freed with the graph (ownership passes
 * to the graph even on failure). nbytes must match the tensor's static
 * shape and dtype. */
enum cp_status cp_graph_set_data(struct cp_graph *g, int32_t tensor, const void *data,
                                 size_t nbytes, enum cp_data_owner owner, struct cp_diag *d);

/* Keep a mapping alive as long as the graph; the graph unmaps it. */
enum cp_status cp_graph_adopt_mmap(struct cp_graph *g, struct cp_mmap *m);

/* Look up a tensor by name; -1 if none. */
int32_t cp_graph_find_tensor(const struct cp_graph *g, const char *name);

/* Add a node; inputs/outputs/origins are copied. Output tensors must exist
 * and have no producer yet (their producer is set here). op_type is the
 * ONNX name; op is derived from it when domain is "" or "ai.onnx". OUT:
 * *index (may be NULL). */
enum cp_status cp_graph_add_node(struct cp_graph *g, const char *name, const char *op_type,
                                 const char *domain, const int32_t *inputs, size_t n_inputs,
                                 const int32_t *outputs, size_t n_outputs,
                                 const char *const *origins, size_t n_origins, int32_t *index,
                                 struct cp_diag *d);

/* Attributes on a node (name copied; arrays copied into the arena). */
enum cp_status cp_node_set_int(struct cp_graph *g, int32_t node, const char *name, int64_t v);
enum cp_status cp_node_set_float(struct cp_graph *g, int32_t node, const char *name, float v);
enum cp_status cp_node_set_string(struct cp_graph *g, int32_t node, const char *name,
                                  const char *v);
enum cp_status cp_node_set_ints(struct cp_graph *g, int32_t node, const char *name,
                                const int64_t *v, size_t n);
enum cp_status cp_node_set_floats(struct cp_graph *g, int32_t node, const char *name,
                                  const float *v, size_t n);
enum cp_status cp_node_set_strings(struct cp_graph *g, int32_t node, const char *name,
                                   const char *const *v, size_t n);
/* `tensor` is a tensor index created with kind INITIALIZER that is not used as
 * a node input ("detached"); it is kept for the attribute only. */
enum cp_status cp_node_set_tensor(struct cp_graph *g, int32_t node, const char *name,
                                  int32_t tensor);

/* `sub` becomes a GRAPH attribute; the graph owns it from now on (even on
 * failure) and frees it with itself. */
enum cp_status cp_node_set_graph(struct cp_graph *g, int32_t node, const char *name,
                                 struct cp_graph *sub);

/* Attribute lookup; NULL when absent. */
const struct cp_attr *cp_node_attr(const struct cp_node *n, const char *name);
int64_t cp_node_attr_int(const struct cp_node *n, const char *name, int64_t dflt);
float cp_node_attr_float(const struct cp_node *n, const char *name, float dflt);
const char *cp_node_attr_string(const struct cp_node *n, const char *name, const char *dflt);

/* Graph inputs and outputs (tensor indices, in declaration order). */
enum cp_status cp_graph_add_input(struct cp_graph *g, int32_t tensor);
enum cp_status cp_graph_add_output(struct cp_graph *g, int32_t tensor);

/* Accessors. Pointers stay valid until the next add of the same kind. */
size_t cp_graph_n_tensors(const struct cp_graph *g);
size_t cp_graph_n_nodes(const struct cp_graph *g); /* includes dead nodes */
struct cp_tensor *cp_graph_tensor(const struct cp_graph *g, int32_t i);
struct cp_node *cp_graph_node(const struct cp_graph *g, int32_t i);
size_t cp_graph_n_inputs(const struct cp_graph *g);
size_t cp_graph_n_outputs(const struct cp_graph *g);
int32_t cp_graph_input(const struct cp_graph *g, size_t i);
int32_t cp_graph_output(const struct cp_graph *g, size_t i);
/* Live (not dead) node count. */
size_t cp_graph_n_live_nodes(const struct cp_graph *g);

/* ---- subgraphs (control flow) ------------------------------------------ */

/*
 * If, Loop and Scan carry subgraphs as GRAPH attributes: complete graphs of
 * their own (tensors, initializers, nodes, inputs, outputs), owned by the
 * graph of the node. A subgraph's node may read a tensor of any enclosing
 * graph by name (ONNX's outer scope). Such a reference is a tensor of kind
 * CP_TENSOR_INPUT in the subgraph, of the same name, listed in the
 * subgraph's "outer" list (not among its inputs); the control-flow node
 * lists the outer tensor as an extra input after its own ones, so
 * ordering, liveness and passes see the dependency. A reference two levels
 * up is an outer tensor of the middle graph too. The op's own inputs are
 * the first cp_control_n_formal() of the node's inputs.
 */
enum cp_status cp_graph_add_outer(struct cp_graph *g, int32_t tensor);
size_t cp_graph_n_outer(const struct cp_graph *g);
int32_t cp_graph_outer(const struct cp_graph *g, size_t i);
/* Whether the op carries subgraphs (If, Loop, Scan). */
bool cp_op_is_control(enum cp_op op);
/* How many of a control-flow node's inputs are the op's own (the rest are
 * outer-scope captures); n->n_inputs for every other op. */
size_t cp_control_n_formal(const struct cp_graph *g, const struct cp_node *n);
/* The input slot of control-flow node n that outer-scope reference i of its
 * subgraph `sub` reads, or -1. Slots follow the node's GRAPH attributes in
 * order, each distinct outer name once, after the formal inputs; binding by
 * position keeps working when passes rewire the node's inputs. */
int32_t cp_control_outer_slot(const struct cp_graph *g, const struct cp_node *n,
                              const struct cp_graph *sub, size_t i);

/* ---- analysis ----------------------------------------------------------- */

/* Verify structure: unique tensor and node names, every node input either a
 * graph input, an initializer or the output of exactly one node, graph
 * outputs produced, no cycles. The first problem found goes into `d`, naming
 * the node and tensor. */
enum cp_status cp_graph_verify(const struct cp_graph *g, struct cp_diag *d);

/* Topological order of live nodes (stable: ties keep insertion order).
 * OUT: *order (caller frees), *n. CP_ERR_INVALID naming a node on a cycle. */
enum cp_status cp_graph_topo_order(const struct cp_graph *g, int32_t **order, size_t *n,
                                   struct cp_diag *d);

/* Reorder the node array topologically and drop dead nodes. Node indices
 * change; tensor indices do not. */
enum cp_status cp_graph_compact(struct cp_graph *g, struct cp_diag *d);

/* Drop tensors nothing refers to: not read or written by a live node, not
 * behind a live node's tensor attribute, not a graph input or output. Such
 * tensors are what passes leave behind (weights replaced by folded copies,
 * outputs of removed nodes); dropping them keeps them out of the .om.
 * Heap-owned data of dropped tensors is freed. Tensor indices change (the
 * kept tensors keep their relative order), so call it only when no caller
 * holds tensor indices, e.g. at the end of the conversion passes; dead
 * nodes lose their references to dropped tensors (set to -1). OUT:
 * *n_removed (may be NULL). */
enum cp_status cp_graph_remove_unused_tensors(struct cp_graph *g, size_t *n_removed,
                                              struct cp_diag *d);

/* Infer dtype and shape of every intermediate tensor from graph inputs and
 * initializers, in topological order, propagating small integer values
 * through shape arithmetic. Dimensions that cannot be known stay dynamic.
 * Errors name the node and say what is inconsistent (e.g. MatMul inner
 * dimensions 64 vs 32). */
enum cp_status cp_graph_infer(struct cp_graph *g, struct cp_diag *d);

/* Stepwise inference, for plans whose shapes depend on run-time data: the
 * caller infers the nodes one at a time in topological order, running each
 * before the next is inferred. `run_data[t]` (per tensor index; the array
 * outlives the context, entries may be filled as nodes run) points at the
 * bytes of intermediate tensor t once they are computed, so shapes that
 * depend on values (Reshape's shape, Resize's sizes, NonZero's count) come
 * out concrete. Values stay in the context: the graph's arena does not grow
 * per step. */
struct cp_infer_steps;
enum cp_status cp_graph_infer_open(struct cp_graph *g, const void *const *run_data,
                                   struct cp_infer_steps **out, struct cp_diag *d);
enum cp_status cp_graph_infer_node(struct cp_infer_steps *s, struct cp_node *n);
void cp_graph_infer_close(struct cp_infer_steps *s);

/* Per-node cost estimate, from inferred shapes. Dynamic dimensions count as
 * 1. flops counts a multiply-add as 2; bytes counts every input and output
 * tensor read or written once. */
struct cp_node_cost {
    double flops;
    double bytes;
};
struct cp_node_cost cp_node_cost(const struct cp_graph *g, const struct cp_node *n);

/* Totals over live nodes. */
struct cp_graph_stats {
    size_t n_nodes;
    size_t n_params; /* elements in initializers */
    size_t param_bytes;
    double flops;
    double bytes;
    size_t op_count[CP_OP_COUNT];
};
void cp_graph_stats(const struct cp_graph *g, struct cp_graph_stats *out);

#endif
