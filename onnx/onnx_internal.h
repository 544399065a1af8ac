/*
 * Private to onnx/: the pieces of ONNX import.
 *
 * import.c walks a decoded ModelProto: it checks the opset, lists every
 * unsupported op at once (first pass), then creates initializers, graph
 * inputs, nodes and outputs. ops.c holds the op table, one row per operator
 * of enum cp_op ({ONNX name, opset range, input/output counts, attribute
 * specs, loader}); a loader adds its node and copies and checks attributes.
 * tensor_read.c holds the rules of a TensorProto (header, typed fields,
 * raw_data), which cp_onnx_tensor_read gives the runtime's tensor files
 * too; tensor.c turns initializers into graph tensors (with external data
 * files and this importer's messages) and reads value types. wire.c bounds message nesting before
 * protobuf-c's unpack, which recurses without limit. names.c is a string -> index hash map, so
 * lookups stay O(1) on models with thousands of tensors.
 *
 * Every message starts with the model's display name (its path).
 */
#ifndef CP_ONNX_INTERNAL_H
#define CP_ONNX_INTERNAL_H

#include "onnx/onnx.h"
#include "core/core.h"
#include "core/hashmap.h"
#include "graph/graph.h"
#include "proto/onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opsets of the default ONNX domain a model may import. Each op's row in
 * the op table (ops.c) says which of them it supports. */
#define CP_ONNX_OPSET_MIN 1
#define CP_ONNX_OPSET_MAX 21
/* Deepest message nesting accepted (protobuf's C++ default). */
#define CP_ONNX_MAX_NESTING 100

/* ---- import context ------------------------------------------------------ */

struct onnx_ctx {
    struct cp_graph *g;
    struct cp_diag *d;
    const char *where; /* display name of the model: every message starts with it */
    const char *dir;   /* folder for external data; NULL refuses external data */
    int64_t opset;     /* default-domain opset */
    const struct cp_input_shape *shapes; /* --input_shape overrides */
    size_t n_shapes;
    bool shapes_changed;      /* an override differs from what the model declares */
    struct cp_strmap tensors; /* tensor name -> tensor index */
    struct cp_strmap nodes;   /* node names in use -> node index */
    /* Subgraphs (control.c): the enclosing graph's context (NULL at the
     * top), this graph's proto (for what it defines), the nesting depth,
     * and the node being loaded (for messages). */
    struct onnx_ctx *parent;
    const Onnx__GraphProto *gp;
    int depth;
    const char *cur_node;
};

/* Record an error prefixed with the model's name; returns `st`. */
enum cp_status onnx_err(struct onnx_ctx *c, enum cp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Forward an error a graph call left in `local`, prefixed with the model's
 * name. Returns its status. */
enum cp_status onnx_err_from(struct onnx_ctx *c, const struct cp_diag *local, enum cp_status st);

/* Whether a node domain is the default ONNX domain ("" or "ai.onnx"). */
bool onnx_is_default_domain(const char *domain);

/* Check, before unpacking, that the encoded model nests messages at most
 * CP_ONNX_MAX_NESTING deep (protobuf-c recurses without a limit) and that its
 * framing holds together. CP_ERR_PARSE otherwise. */
enum cp_status onnx_wire_check(struct onnx_ctx *c, const uint8_t *data, size_t len);

/* ---- the op table --------------------------------------------------------- */

/* An attribute an op knows: its type and whether it is required. Attributes
 * not listed are copied as they come. */
struct onnx_attr_spec {
    const char *name;
    enum cp_attr_type type;
    bool required;
};

struct onnx_op_def;

/* A loader builds one ONNX node into the graph: normally it adds the node
 * (onnx_add_node) and copies its attributes (onnx_copy_attrs), then checks
 * what the op needs. `name` is the node's unique (possibly generated) name,
 * `origin` the name to remember as provenance. */
typedef enum cp_status (*onnx_loader_fn)(struct onnx_ctx *c, const struct onnx_op_def *def,
                                         const Onnx__NodeProto *np, const char *name,
                                         const char *origin);

struct onnx_op_def {
    const char *name; /* ONNX op_type, default domain */
    enum cp_op op;
    int min_opset, max_opset;
    int min_inputs, max_inputs; /* max -1: unbounded */
    int min_outputs, max_outputs;
    const struct onnx_attr_spec *attrs; /* terminated by {NULL}; may be NULL */
    onnx_loader_fn load;
};

/* The row for a default-domain op_type; NULL when the op is not supported at
 * all. The caller checks the opset range. */
const struct onnx_op_def *onnx_op_find(const char *op_type);
/* Table access for tests: rows are sorted by name. */
size_t onnx_op_count(void);
const struct onnx_op_def *onnx_op_at(size_t i);

/* Add a graph node for `np`: resolves or creates input tensors, creates
 * output tensors (INTERMEDIATE), checks input/output counts against `def`.
 * OUT: *index. */
enum cp_status onnx_add_node(struct onnx_ctx *c, const struct onnx_op_def *def,
                             const Onnx__NodeProto *np, const char *name, const char *origin,
                             int32_t *index);

/* Copy every attribute of `np` onto graph node `node`, checking that each
 * declared type matches its payload and that `def`'s specs hold (types,
 * required attributes). */
enum cp_status onnx_copy_attrs(struct onnx_ctx *c, const struct onnx_op_def *def,
                               const Onnx__NodeProto *np, int32_t node, const char *name);

/* Check one attribute's declared type against its payload (a missing type
 * is taken from the payload, as old exporters left it out). OUT: *type, the
 * ONNX AttributeType. */
enum cp_status onnx_attr_type(struct onnx_ctx *c, const Onnx__NodeProto *np, const char *name,
                              const Onnx__AttributeProto *a, int *type);

/* ---- tensors -------------------------------------------------------------- */

/* What a TensorProto's header says (tensor_read.c): dtype, static shape
 * (no symbols), element and byte counts, and whether the data is in an
 * external file. */
struct onnx_tensor_head {
    enum cp_dtype dtype;
    struct cp_shape shape;
    size_t numel, nbytes;
    bool external;
};

/* Check a TensorProto's header in the order faults are reported: dtype,
 * segment, then (when !allow_external) external data, rank, dimensions,
 * size. OUT: *h, *err. Returns err->fault. */
enum cp_onnx_tensor_fault onnx_tensor_head(const Onnx__TensorProto *tp, bool allow_external,
                                           struct onnx_tensor_head *h,
                                           struct cp_onnx_tensor_error *err);

/* The values a TensorProto holds itself (raw_data or its dtype's typed
 * field; the others must be empty). OUT: *data (malloc'ed, the caller
 * frees; NULL when h->nbytes is 0), *err. Returns err->fault. */
enum cp_onnx_tensor_fault onnx_tensor_values(const Onnx__TensorProto *tp,
                                             const struct onnx_tensor_head *h, void **data,
                                             struct cp_onnx_tensor_error *err);

/* Decode a TensorProto's dtype, shape and data. `what` names it in messages
 * ("initializer 'w'"). OUT: *dtype, *shape (syms arena-owned), *data (heap,
 * caller frees; NULL when there are 0 bytes), *nbytes. */
enum cp_status onnx_tensor_decode(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what,
                                  enum cp_dtype *dtype, struct cp_shape *shape, void **data,
                                  size_t *nbytes);

/* Make `name` an initializer holding `data` (heap; ownership passes here,
 * even on failure). When a tensor of that name already exists as a
 * not-yet-produced intermediate (a forward reference), it is turned into the
 * initializer; any other existing tensor is a duplicate (CP_ERR_INVALID).
 * OUT: *index (may be NULL). */
enum cp_status onnx_set_initializer(struct onnx_ctx *c, const char *name, enum cp_dtype dtype,
                                    const struct cp_shape *shape, void *data, size_t nbytes,
                                    const char *what, int32_t *index);

/* The dtype and shape a ValueInfoProto declares. `what` names it ("input
 * 'x'"). A missing shape gives rank -1. CP_ERR_UNSUPPORTED for non-tensor
 * types and dtypes we lack. */
enum cp_status onnx_value_type(struct onnx_ctx *c, const Onnx__ValueInfoProto *vi, const char *what,
                               enum cp_dtype *dtype, struct cp_shape *shape);

/* ---- [rnn] ---- */
/* ops_rnn.c: the importer's attribute specs and loaders of LSTM, GRU, RNN
 * and the signal ops (DFT, STFT, windows, MelWeightMatrix). */
extern const struct onnx_attr_spec onnx_lstm_attrs[], onnx_gru_attrs[], onnx_rnn_attrs[],
    onnx_dft_attrs[], onnx_stft_attrs[], onnx_window_attrs[];
enum cp_status onnx_load_recurrent(struct onnx_ctx *c, const struct onnx_op_def *def,
                                   const Onnx__NodeProto *np, const char *name, const char *origin);
enum cp_status onnx_load_signal(struct onnx_ctx *c, const struct onnx_op_def *def,
                                const Onnx__NodeProto *np, const char *name, const char *origin);
/* ---- end [rnn] ---- */
/* ---- [legacy] ---- */
/* Loaders of ops_legacy.c: the opset 1-10 forms of ops the table has. */
enum cp_status onnx_load_legacy_binary(struct onnx_ctx *c, const struct onnx_op_def *def,
                                       const Onnx__NodeProto *np, const char *name,
                                       const char *origin);
enum cp_status onnx_load_batch_norm(struct onnx_ctx *c, const struct onnx_op_def *def,
                                    const Onnx__NodeProto *np, const char *name,
                                    const char *origin);
enum cp_status onnx_load_dropout(struct onnx_ctx *c, const struct onnx_op_def *def,
                                 const Onnx__NodeProto *np, const char *name, const char *origin);
enum cp_status onnx_load_cast(struct onnx_ctx *c, const struct onnx_op_def *def,
                              const Onnx__NodeProto *np, const char *name, const char *origin);
enum cp_status onnx_load_concat(struct onnx_ctx *c, const struct onnx_op_def *def,
                                const Onnx__NodeProto *np, const char *name, const char *origin);
enum cp_status onnx_load_reshape(struct onnx_ctx *c, const struct onnx_op_def *def,
                                 const Onnx__NodeProto *np, const char *name, const char *origin);
enum cp_status onnx_load_upsample(struct onnx_ctx *c, const struct onnx_op_def *def,
                                  const Onnx__NodeProto *np, const char *name, const char *origin);
/* ---- end [legacy] ---- */
/* ---- [control] ---- */

/* Deepest subgraph nesting accepted (an If inside a Loop body is depth 2). */
#define CP_ONNX_MAX_SUBGRAPH_DEPTH 16

/* Load one graph's body into c->g: unsupported ops, initializers, inputs,
 * nodes, outputs (import.c). Used for the model's graph and, through
 * control.c, for every subgraph. */
enum cp_status onnx_import_graph(struct onnx_ctx *c, const Onnx__GraphProto *gp);

/* Whether graph `gp` itself defines `name` (input, initializer or node
 * output). */
bool onnx_graph_defines(const Onnx__GraphProto *gp, const char *name);

/* In a subgraph, `name` is not defined locally: find it in an enclosing
 * graph and make it an outer-scope reference of c->g (graph.h). OUT: *idx.
 * CP_ERR_INVALID, naming the node, when no enclosing graph defines it. */
enum cp_status onnx_scope_capture(struct onnx_ctx *c, const char *name, int32_t *idx);

/* Loaders of If, Loop and Scan. */
enum cp_status onnx_load_control(struct onnx_ctx *c, const struct onnx_op_def *def,
                                 const Onnx__NodeProto *np, const char *name, const char *origin);

#endif
