/* The ONNX op table: one row per operator of enum cp_op, with its opset
 * range, input and output counts, known attributes and a loader. The first
 * rows are sorted by name; the rest are grouped by family between markers.
 * A lookup walks the table (a few hundred rows, once per node at import). */
#include "onnx/onnx_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- adding nodes ------------------------------------------------------------ */

static void count_text(int lo, int hi, char *out, size_t n)
{
    if (hi < 0)
        snprintf(out, n, "at least %d", lo);
    else if (lo == hi)
        snprintf(out, n, "exactly %d", lo);
    else
        snprintf(out, n, "%d to %d", lo, hi);
}

static enum cp_status check_counts(struct onnx_ctx *c, const struct onnx_op_def *def,
                                   const Onnx__NodeProto *np, const char *name)
{
    char want[48];
    size_t ni = np->n_input, no = np->n_output;
    if (ni < (size_t)def->min_inputs || (def->max_inputs >= 0 && ni > (size_t)def->max_inputs)) {
        count_text(def->min_inputs, def->max_inputs, want, sizeof want);
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s) has %zu input%s; %s takes %s", name,
                        np->op_type, ni, ni == 1 ? "" : "s", def->name, want);
    }
    if (no < (size_t)def->min_outputs || (def->max_outputs >= 0 && no > (size_t)def->max_outputs)) {
        count_text(def->min_outputs, def->max_outputs, want, sizeof want);
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s) has %zu output%s; %s gives %s", name,
                        np->op_type, no, no == 1 ? "" : "s", def->name, want);
    }
    return CP_OK;
}

/* The tensor `tname`, created as a not-yet-produced intermediate when the
 * name is new (a forward reference, resolved or reported at the end). */
static enum cp_status tensor_ref(struct onnx_ctx *c, const char *tname, int32_t *idx)
{
    *idx = (int32_t)cp_strmap_gets(&c->tensors, tname, -1);
    if (*idx >= 0)
        return CP_OK;
    /* A subgraph may read what an enclosing graph defines. */
    if (c->parent && !onnx_graph_defines(c->gp, tname))
        return onnx_scope_capture(c, tname, idx);
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_add_tensor(c->g, tname, CP_DTYPE_UNDEFINED, NULL,
                                            CP_TENSOR_INTERMEDIATE, idx, &local);
    if (st != CP_OK)
        return onnx_err_from(c, &local, st);
    if (cp_strmap_puts(&c->tensors, cp_graph_tensor(c->g, *idx)->name, *idx) != CP_OK)
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    return CP_OK;
}

static enum cp_status check_output(struct onnx_ctx *c, const Onnx__NodeProto *np, const char *name,
                                   const int32_t *outs, size_t i)
{
    const char *tname = np->output[i];
    int32_t idx = (int32_t)cp_strmap_gets(&c->tensors, tname, -1);
    if (idx < 0)
        return CP_OK;
    const struct cp_tensor *t = cp_graph_tensor(c->g, idx);
    if (t->kind == CP_TENSOR_INPUT)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): output '%s' is also a graph input",
                        name, np->op_type, tname);
    if (t->kind == CP_TENSOR_INITIALIZER)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): output '%s' is also an initializer",
                        name, np->op_type, tname);
    if (t->producer >= 0)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): output '%s' is already the output of node '%s'", name,
                        np->op_type, tname, cp_graph_node(c->g, t->producer)->name);
    for (size_t j = 0; j < i; j++)
        if (outs[j] == idx)
            return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s) lists output '%s' twice", name,
                            np->op_type, tname);
    return CP_OK;
}

enum cp_status onnx_add_node(struct onnx_ctx *c, const struct onnx_op_def *def,
                             const Onnx__NodeProto *np, const char *name, const char *origin,
                             int32_t *index)
{
    *index = -1;
    enum cp_status st = check_counts(c, def, np, name);
    if (st != CP_OK)
        return st;
    int32_t *ins = cp_calloc(np->n_input ? np->n_input : 1, sizeof *ins);
    int32_t *outs = cp_calloc(np->n_output ? np->n_output : 1, sizeof *outs);
    if (!ins || !outs) {
        st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < np->n_input; i++) {
        ins[i] = -1;
        if (np->input[i] && *np->input[i] && (st = tensor_ref(c, np->input[i], &ins[i])) != CP_OK)
            goto out;
    }
    for (size_t i = 0; i < np->n_output; i++) {
        outs[i] = -1;
        if (!np->output[i] || !*np->output[i])
            continue;
        if ((st = check_output(c, np, name, outs, i)) != CP_OK ||
            (st = tensor_ref(c, np->output[i], &outs[i])) != CP_OK)
            goto out;
    }
    struct cp_diag local;
    cp_diag_init(&local);
    st = cp_graph_add_node(c->g, name, np->op_type, np->domain ? np->domain : "", ins, np->n_input,
                           outs, np->n_output, &origin, 1, index, &local);
    if (st != CP_OK) {
        st = onnx_err_from(c, &local, st);
        goto out;
    }
    if (cp_strmap_puts(&c->nodes, cp_graph_node(c->g, *index)->name, *index) != CP_OK)
        st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
out:
    free(ins);
    free(outs);
    return st;
}

/* ---- loaders ------------------------------------------------------------------ */

/* Add the node and copy its attributes. OUT: *node. */
static enum cp_status load_node(struct onnx_ctx *c, const struct onnx_op_def *def,
                                const Onnx__NodeProto *np, const char *name, const char *origin,
                                const struct cp_node **node)
{
    int32_t idx;
    *node = NULL;
    enum cp_status st = onnx_add_node(c, def, np, name, origin, &idx);
    if (st == CP_OK)
        st = onnx_copy_attrs(c, def, np, idx, name);
    if (st == CP_OK)
        *node = cp_graph_node(c->g, idx);
    return st;
}

static enum cp_status load_generic(struct onnx_ctx *c, const struct onnx_op_def *def,
                                   const Onnx__NodeProto *np, const char *name, const char *origin)
{
    const struct cp_node *n;
    return load_node(c, def, np, name, origin, &n);
}

static enum cp_status load_cast(struct onnx_ctx *c, const struct onnx_op_def *def,
                                const Onnx__NodeProto *np, const char *name, const char *origin)
{
    const struct cp_node *n;
    enum cp_status st = load_node(c, def, np, name, origin, &n);
    if (st != CP_OK)
        return st;
    int64_t to = cp_node_attr_int(n, "to", 0);
    if (to < 0 || to > INT32_MAX || cp_dtype_from_onnx((int)to) == CP_DTYPE_UNDEFINED) {
        char buf[24];
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (Cast): a cast to %s is not supported (supported: f32, f16, "
                        "bf16, i8, u8, i32, i64, bool)",
                        name, cp_onnx_dtype_name(to < 0 || to > INT32_MAX ? -1 : (int)to, buf));
    }
    return CP_OK;
}

/* Unsqueeze takes its axes as an attribute before opset 13 and as a second
 * input from 13 on; either way they are required. */
static enum cp_status load_unsqueeze(struct onnx_ctx *c, const struct onnx_op_def *def,
                                     const Onnx__NodeProto *np, const char *name,
                                     const char *origin)
{
    const struct cp_node *n;
    enum cp_status st = load_node(c, def, np, name, origin, &n);
    if (st != CP_OK)
        return st;
    if (c->opset < 13 && !cp_node_attr(n, "axes"))
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Unsqueeze): opset %lld needs the 'axes' attribute", name,
                        (long long)c->opset);
    if (c->opset >= 13 && (n->n_inputs < 2 || n->inputs[1] < 0))
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Unsqueeze): opset %lld takes the axes as a second input, "
                        "which is missing",
                        name, (long long)c->opset);
    return CP_OK;
}

static enum cp_status load_constant_of_shape(struct onnx_ctx *c, const struct onnx_op_def *def,
                                             const Onnx__NodeProto *np, const char *name,
                                             const char *origin)
{
    const struct cp_node *n;
    enum cp_status st = load_node(c, def, np, name, origin, &n);
    if (st != CP_OK)
        return st;
    const struct cp_attr *a = cp_node_attr(n, "value");
    if (a && cp_shape_numel(&cp_graph_tensor(c->g, a->tensor)->shape) != 1)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (ConstantOfShape): attribute 'value' must hold exactly one "
                        "element",
                        name);
    return CP_OK;
}

/* A Constant node adds no node: its output becomes an initializer. */
static enum cp_status load_constant(struct onnx_ctx *c, const struct onnx_op_def *def,
                                    const Onnx__NodeProto *np, const char *name, const char *origin)
{
    (void)origin;
    enum cp_status st = check_counts(c, def, np, name);
    if (st != CP_OK)
        return st;
    const char *out = np->output[0];
    if (!out || !*out)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (Constant) has an empty output name", name);
    if (np->n_attribute != 1)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Constant) needs exactly one value attribute, not %zu", name,
                        np->n_attribute);
    const Onnx__AttributeProto *a = np->attribute[0];
    const char *an = a->name ? a->name : "";
    int type;
    if ((st = onnx_attr_type(c, np, name, a, &type)) != CP_OK)
        return st;
    char what[600];
    snprintf(what, sizeof what, "node '%.200s' (Constant) value", name);
    enum cp_dtype dt = CP_DTYPE_UNDEFINED;
    struct cp_shape shape;
    void *data = NULL;
    size_t nbytes = 0;
    int want;
    if (strcmp(an, "value") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    } else if (strcmp(an, "value_float") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    } else if (strcmp(an, "value_floats") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    } else if (strcmp(an, "value_int") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    } else if (strcmp(an, "value_ints") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    } else if (strcmp(an, "sparse_value") == 0) {
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (Constant): sparse_value is not supported; store the constant "
                        "densely ('value')",
                        name);
    } else if (strcmp(an, "value_string") == 0 || strcmp(an, "value_strings") == 0) {
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (Constant): string constants ('%s') are not supported", name,
                        an);
    } else {
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (Constant): unknown attribute '%s'", name,
                        an);
    }
    if (type != want)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Constant): attribute '%s' has the wrong type (%d, expected %d)",
                        name, an, type, want);
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        st = onnx_tensor_decode(c, a->t, what, &dt, &shape, &data, &nbytes);
        if (st != CP_OK)
            return st;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
        bool list = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        size_t n = list ? a->n_floats : 1;
        int64_t dim = (int64_t)n;
        cp_shape_set(&shape, list ? 1 : 0, &dim);
        dt = CP_DTYPE_F32;
        nbytes = n * sizeof(float);
        if (n && !(data = malloc(nbytes)))
            return onnx_err(c, CP_ERR_NOMEM, "out of memory");
        if (n)
            memcpy(data, list ? a->floats : &a->f, nbytes);
        break;
    }
    default: { /* INT, INTS */
        bool list = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        size_t n = list ? a->n_ints : 1;
        int64_t dim = (int64_t)n;
        cp_shape_set(&shape, list ? 1 : 0, &dim);
        dt = CP_DTYPE_I64;
        nbytes = n * sizeof(int64_t);
        if (n && !(data = malloc(nbytes)))
            return onnx_err(c, CP_ERR_NOMEM, "out of memory");
        if (n)
            memcpy(data, list ? a->ints : &a->i, nbytes);
        break;
    }
    }
    return onnx_set_initializer(c, out, dt, &shape, data, nbytes, what, NULL);
}

/* ---- the table -------------------------------------------------------------- */

static const struct onnx_attr_spec pool_attrs[] = {
    {"kernel_shape", CP_ATTR_INTS, true},
    {"strides", CP_ATTR_INTS, false},
    {"pads", CP_ATTR_INTS, false},
    {"dilations", CP_ATTR_INTS, false},
    {"auto_pad", CP_ATTR_STRING, false},
    {"ceil_mode", CP_ATTR_INT, false},
    {"count_include_pad", CP_ATTR_INT, false},
    {"storage_order", CP_ATTR_INT, false},
    {NULL, 0, false},
};
static const struct onnx_attr_spec conv_attrs[] = {
    {"kernel_shape", CP_ATTR_INTS, false},
    {"strides", CP_ATTR_INTS, false},
    {"pads", CP_ATTR_INTS, false},
    {"dilations", CP_ATTR_INTS, false},
    {"group", CP_ATTR_INT, false},
    {"auto_pad", CP_ATTR_STRING, false},
    {"output_padding", CP_ATTR_INTS, false},
    {"output_shape", CP_ATTR_INTS, false},
    {NULL, 0, false},
};
static const struct onnx_attr_spec norm_attrs[] = {
    {"epsilon", CP_ATTR_FLOAT, false},     {"momentum", CP_ATTR_FLOAT, false},
    {"training_mode", CP_ATTR_INT, false}, {"axis", CP_ATTR_INT, false},
    {"stash_type", CP_ATTR_INT, false},    {NULL, 0, false},
};
static const struct onnx_attr_spec reduce_attrs[] = {
    {"axes", CP_ATTR_INTS, false},
    {"keepdims", CP_ATTR_INT, false},
    {"noop_with_empty_axes", CP_ATTR_INT, false},
    {NULL, 0, false},
};
static const struct onnx_attr_spec axis_attrs[] = {{"axis", CP_ATTR_INT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec axes_attrs[] = {{"axes", CP_ATTR_INTS, false}, {NULL, 0, false}};
static const struct onnx_attr_spec concat_attrs[] = {{"axis", CP_ATTR_INT, true}, {NULL, 0, false}};
static const struct onnx_attr_spec cast_attrs[] = {{"to", CP_ATTR_INT, true}, {NULL, 0, false}};
static const struct onnx_attr_spec cos_attrs[] = {{"value", CP_ATTR_TENSOR, false},
                                                  {NULL, 0, false}};
static const struct onnx_attr_spec dropout_attrs[] = {
    {"seed", CP_ATTR_INT, false}, {"ratio", CP_ATTR_FLOAT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec gemm_attrs[] = {
    {"alpha", CP_ATTR_FLOAT, false},
    {"beta", CP_ATTR_FLOAT, false},
    {"transA", CP_ATTR_INT, false},
    {"transB", CP_ATTR_INT, false},
    {NULL, 0, false},
};
static const struct onnx_attr_spec leaky_attrs[] = {{"alpha", CP_ATTR_FLOAT, false},
                                                    {NULL, 0, false}};
static const struct onnx_attr_spec pad_attrs[] = {{"mode", CP_ATTR_STRING, false},
                                                  {NULL, 0, false}};
static const struct onnx_attr_spec reshape_attrs[] = {{"allowzero", CP_ATTR_INT, false},
                                                      {NULL, 0, false}};
static const struct onnx_attr_spec resize_attrs[] = {
    {"mode", CP_ATTR_STRING, false},
    {"coordinate_transformation_mode", CP_ATTR_STRING, false},
    {"nearest_mode", CP_ATTR_STRING, false},
    {"cubic_coeff_a", CP_ATTR_FLOAT, false},
    {"exclude_outside", CP_ATTR_INT, false},
    {"extrapolation_value", CP_ATTR_FLOAT, false},
    {NULL, 0, false},
};
static const struct onnx_attr_spec shape_attrs[] = {
    {"start", CP_ATTR_INT, false}, {"end", CP_ATTR_INT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec split_attrs[] = {
    {"axis", CP_ATTR_INT, false}, {"split", CP_ATTR_INTS, false}, {NULL, 0, false}};
static const struct onnx_attr_spec transpose_attrs[] = {{"perm", CP_ATTR_INTS, false},
                                                        {NULL, 0, false}};

/* The opsets the first rows were written and tested for; a row widens its
 * range once its op follows the older or newer versions' semantics. */
#define LO  11
#define HI  17
#define ANY (-1)

/* name, op, opsets, inputs, outputs, attributes, loader. Sorted by name. */
static const struct onnx_op_def ops[] = {
    {"Add", CP_OP_ADD, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"AveragePool", CP_OP_AVERAGE_POOL, LO, HI, 1, 1, 1, 1, pool_attrs, load_generic},
    {"BatchNormalization", CP_OP_BATCH_NORMALIZATION, LO, HI, 5, 5, 1, 3, norm_attrs, load_generic},
    {"Cast", CP_OP_CAST, LO, HI, 1, 1, 1, 1, cast_attrs, load_cast},
    {"Clip", CP_OP_CLIP, LO, HI, 1, 3, 1, 1, NULL, load_generic},
    {"Concat", CP_OP_CONCAT, LO, HI, 1, ANY, 1, 1, concat_attrs, load_generic},
    {"Constant", CP_OP_CONSTANT, LO, HI, 0, 0, 1, 1, NULL, load_constant},
    {"ConstantOfShape", CP_OP_CONSTANT_OF_SHAPE, LO, HI, 1, 1, 1, 1, cos_attrs,
     load_constant_of_shape},
    {"Conv", CP_OP_CONV, LO, HI, 2, 3, 1, 1, conv_attrs, load_generic},
    {"ConvTranspose", CP_OP_CONV_TRANSPOSE, LO, HI, 2, 3, 1, 1, conv_attrs, load_generic},
    {"Div", CP_OP_DIV, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"Dropout", CP_OP_DROPOUT, LO, HI, 1, 3, 1, 2, dropout_attrs, load_generic},
    {"Equal", CP_OP_EQUAL, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"Erf", CP_OP_ERF, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Exp", CP_OP_EXP, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Expand", CP_OP_EXPAND, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"Flatten", CP_OP_FLATTEN, LO, HI, 1, 1, 1, 1, axis_attrs, load_generic},
    {"Gather", CP_OP_GATHER, LO, HI, 2, 2, 1, 1, axis_attrs, load_generic},
    {"Gemm", CP_OP_GEMM, LO, HI, 2, 3, 1, 1, gemm_attrs, load_generic},
    {"GlobalAveragePool", CP_OP_GLOBAL_AVERAGE_POOL, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Identity", CP_OP_IDENTITY, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"InstanceNormalization", CP_OP_INSTANCE_NORMALIZATION, LO, HI, 3, 3, 1, 1, norm_attrs,
     load_generic},
    /* LayerNormalization entered the default domain in opset 17. */
    {"LayerNormalization", CP_OP_LAYER_NORMALIZATION, 17, HI, 2, 3, 1, 3, norm_attrs, load_generic},
    {"LeakyRelu", CP_OP_LEAKY_RELU, LO, HI, 1, 1, 1, 1, leaky_attrs, load_generic},
    {"MatMul", CP_OP_MATMUL, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"MaxPool", CP_OP_MAX_POOL, LO, HI, 1, 1, 1, 2, pool_attrs, load_generic},
    {"Mul", CP_OP_MUL, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"Pad", CP_OP_PAD, LO, HI, 2, 3, 1, 1, pad_attrs, load_generic},
    {"Pow", CP_OP_POW, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"Range", CP_OP_RANGE, LO, HI, 3, 3, 1, 1, NULL, load_generic},
    {"ReduceMax", CP_OP_REDUCE_MAX, LO, HI, 1, 1, 1, 1, reduce_attrs, load_generic},
    {"ReduceMean", CP_OP_REDUCE_MEAN, LO, HI, 1, 1, 1, 1, reduce_attrs, load_generic},
    {"ReduceSum", CP_OP_REDUCE_SUM, LO, HI, 1, 2, 1, 1, reduce_attrs, load_generic},
    {"Relu", CP_OP_RELU, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Reshape", CP_OP_RESHAPE, LO, HI, 2, 2, 1, 1, reshape_attrs, load_generic},
    {"Resize", CP_OP_RESIZE, LO, HI, 1, 4, 1, 1, resize_attrs, load_generic},
    {"Shape", CP_OP_SHAPE, LO, HI, 1, 1, 1, 1, shape_attrs, load_generic},
    {"Sigmoid", CP_OP_SIGMOID, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Slice", CP_OP_SLICE, LO, HI, 3, 5, 1, 1, NULL, load_generic},
    {"Softmax", CP_OP_SOFTMAX, LO, HI, 1, 1, 1, 1, axis_attrs, load_generic},
    {"Split", CP_OP_SPLIT, LO, HI, 1, 2, 1, ANY, split_attrs, load_generic},
    {"Sqrt", CP_OP_SQRT, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Squeeze", CP_OP_SQUEEZE, LO, HI, 1, 2, 1, 1, axes_attrs, load_generic},
    {"Sub", CP_OP_SUB, LO, HI, 2, 2, 1, 1, NULL, load_generic},
    {"Tanh", CP_OP_TANH, LO, HI, 1, 1, 1, 1, NULL, load_generic},
    {"Transpose", CP_OP_TRANSPOSE, LO, HI, 1, 1, 1, 1, transpose_attrs, load_generic},
    {"Unsqueeze", CP_OP_UNSQUEEZE, LO, HI, 1, 2, 1, 1, axes_attrs, load_unsqueeze},
    {"Where", CP_OP_WHERE, LO, HI, 3, 3, 1, 1, NULL, load_generic},
    /* ---- [elementwise] ---- */
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    /* Input counts: the op's own inputs are checked by the loader, which
     * appends the subgraphs' outer-scope references. */
    {"If", CP_OP_IF, 7, 21, 1, ANY, 1, ANY, NULL, onnx_load_control},
    {"Loop", CP_OP_LOOP, 7, 21, 2, ANY, 1, ANY, NULL, onnx_load_control},
    {"Scan", CP_OP_SCAN, 8, 21, 1, ANY, 1, ANY, NULL, onnx_load_control},
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
};
/* Every enum cp_op but Unknown and cannprof's own ops has one row; a row
 * may also map an ONNX op onto one of cannprof's own where the two compute
 * the same function (ONNX's Gelu, opset 20, is ours), so the count is a
 * floor (the test test_onnx_op_table_covers_every_op_once checks which). */
#define N_OWN_OPS (CP_OP_TRANS_DATA - CP_OP_FUSED_CONV + 1)
static_assert(sizeof ops / sizeof ops[0] >= CP_OP_COUNT - 1 - N_OWN_OPS,
              "one ONNX row per ONNX cp_op");

const struct onnx_op_def *onnx_op_find(const char *op_type)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(op_type, ops[i].name) == 0)
            return &ops[i];
    return NULL;
}

size_t onnx_op_count(void)
{
    return sizeof ops / sizeof ops[0];
}

const struct onnx_op_def *onnx_op_at(size_t i)
{
    return i < onnx_op_count() ? &ops[i] : NULL;
}
