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
    /* A row that maps an ONNX op onto one of our own (Gelu): the graph
     * derives ops from default-domain names only, which skip our own. */
    cp_graph_node(c->g, *index)->op = def->op;
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

/* CastLike takes its target type from its second input, whose dtype the
 * importer has already checked (a tensor of a type we do not have is
 * refused where it is declared). */
static enum cp_status load_cast_like(struct onnx_ctx *c, const struct onnx_op_def *def,
                                     const Onnx__NodeProto *np, const char *name,
                                     const char *origin)
{
    return load_generic(c, def, np, name, origin);
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

/* ---- [nn] ---- */

/* ONNX's GroupNormalization is imported as our own op (domain CP_DOMAIN),
 * which takes per-channel scale and bias: opset 21's form. Opsets 18-20
 * take them per group; that is the same function when there are as many
 * groups as channels, and inference refuses the node, naming it, when the
 * scale is not one value per channel. */
static enum cp_status load_group_norm(struct onnx_ctx *c, const struct onnx_op_def *def,
                                      const Onnx__NodeProto *np, const char *name,
                                      const char *origin)
{
    Onnx__NodeProto own = *np;
    own.domain = (char *)CP_DOMAIN;
    const struct cp_node *n;
    enum cp_status st = load_node(c, def, &own, name, origin, &n);
    if (st != CP_OK)
        return st;
    if (n->op != CP_OP_GROUP_NORMALIZATION)
        return onnx_err(c, CP_ERR_INTERNAL, "node '%s' (GroupNormalization) was not mapped", name);
    return CP_OK;
}
/* ---- end [nn] ---- */

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

/* The opsets the reductions and Softmax rows were written and tested for;
 * the other rows give the range their op follows every version of. */
#define LO   11
#define HI   17
#define MAXV CP_ONNX_OPSET_MAX
#define ANY  (-1)
/* ---- [elementwise] ---- */
static const struct onnx_attr_spec alpha_attrs[] = {{"alpha", CP_ATTR_FLOAT, false},
                                                    {NULL, 0, false}};
static const struct onnx_attr_spec selu_attrs[] = {
    {"alpha", CP_ATTR_FLOAT, false}, {"gamma", CP_ATTR_FLOAT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec hard_sigmoid_attrs[] = {
    {"alpha", CP_ATTR_FLOAT, false}, {"beta", CP_ATTR_FLOAT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec shrink_attrs[] = {
    {"lambd", CP_ATTR_FLOAT, false}, {"bias", CP_ATTR_FLOAT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec isinf_attrs[] = {{"detect_negative", CP_ATTR_INT, false},
                                                    {"detect_positive", CP_ATTR_INT, false},
                                                    {NULL, 0, false}};
static const struct onnx_attr_spec gelu_attrs[] = {{"approximate", CP_ATTR_STRING, false},
                                                   {NULL, 0, false}};
static const struct onnx_attr_spec mod_attrs[] = {{"fmod", CP_ATTR_INT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec bitshift_attrs[] = {{"direction", CP_ATTR_STRING, true},
                                                       {NULL, 0, false}};
static const struct onnx_attr_spec random_normal_attrs[] = {
    {"dtype", CP_ATTR_INT, false},  {"mean", CP_ATTR_FLOAT, false}, {"scale", CP_ATTR_FLOAT, false},
    {"seed", CP_ATTR_FLOAT, false}, {"shape", CP_ATTR_INTS, true},  {NULL, 0, false}};
static const struct onnx_attr_spec random_uniform_attrs[] = {
    {"dtype", CP_ATTR_INT, false},  {"high", CP_ATTR_FLOAT, false}, {"low", CP_ATTR_FLOAT, false},
    {"seed", CP_ATTR_FLOAT, false}, {"shape", CP_ATTR_INTS, true},  {NULL, 0, false}};
static const struct onnx_attr_spec random_like_attrs[] = {{"dtype", CP_ATTR_INT, false},
                                                          {"mean", CP_ATTR_FLOAT, false},
                                                          {"scale", CP_ATTR_FLOAT, false},
                                                          {"high", CP_ATTR_FLOAT, false},
                                                          {"low", CP_ATTR_FLOAT, false},
                                                          {"seed", CP_ATTR_FLOAT, false},
                                                          {NULL, 0, false}};
static const struct onnx_attr_spec bernoulli_attrs[] = {
    {"dtype", CP_ATTR_INT, false}, {"seed", CP_ATTR_FLOAT, false}, {NULL, 0, false}};
static const struct onnx_attr_spec multinomial_attrs[] = {{"dtype", CP_ATTR_INT, false},
                                                          {"sample_size", CP_ATTR_INT, false},
                                                          {"seed", CP_ATTR_FLOAT, false},
                                                          {NULL, 0, false}};
/* ---- end [elementwise] ---- */
/* ---- [quant] ---- */
static const struct onnx_attr_spec qdq_attrs[] = {
    {"axis", CP_ATTR_INT, false},
    {"saturate", CP_ATTR_INT, false},
    {"block_size", CP_ATTR_INT, false},
    {"output_dtype", CP_ATTR_INT, false},
    {NULL, 0, false},
};

/* QuantizeLinear / DequantizeLinear: the 8- and 16-bit integer forms are
 * supported; float8 (opset 19) and int4/uint4 (opset 21) are refused here,
 * by name, rather than left to fail on a dtype further on. */
static enum cp_status load_qdq(struct onnx_ctx *c, const struct onnx_op_def *def,
                               const Onnx__NodeProto *np, const char *name, const char *origin)
{
    const struct cp_node *n;
    enum cp_status st = load_node(c, def, np, name, origin, &n);
    if (st != CP_OK)
        return st;
    int64_t od = cp_node_attr_int(n, "output_dtype", 0);
    if (od != 0) {
        enum cp_dtype dt =
            od > 0 && od <= INT32_MAX ? cp_dtype_from_onnx((int)od) : CP_DTYPE_UNDEFINED;
        if (dt != CP_DTYPE_I8 && dt != CP_DTYPE_U8 && dt != CP_DTYPE_I16 && dt != CP_DTYPE_U16) {
            char buf[24];
            const char *what = od >= 17 && od <= 20   ? " (float8 is not supported)"
                               : od == 21 || od == 22 ? " (int4/uint4 are not supported)"
                                                      : "";
            return onnx_err(c, CP_ERR_UNSUPPORTED,
                            "node '%s' (%s): output_dtype %s is not supported%s; supported: "
                            "int8, uint8, int16, uint16",
                            name, np->op_type,
                            cp_onnx_dtype_name(od > 0 && od <= INT32_MAX ? (int)od : -1, buf),
                            what);
        }
    }
    if (cp_node_attr_int(n, "block_size", 0) < 0)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): block_size must be >= 0", name,
                        np->op_type);
    return CP_OK;
}
/* ---- end [quant] ---- */

/* The opsets the first rows were written and tested for; a row widens its
 * range once its op follows the older or newer versions' semantics. */
#define LO  11
#define HI  17
#define ANY (-1)

/* name, op, opsets, inputs, outputs, attributes, loader. Sorted by name. */
static const struct onnx_op_def ops[] = {
    {"Add", CP_OP_ADD, 1, 21, 2, 2, 1, 1, NULL, onnx_load_legacy_binary},
    {"AveragePool", CP_OP_AVERAGE_POOL, 1, 21, 1, 1, 1, 1, pool_attrs, load_generic},
    {"BatchNormalization", CP_OP_BATCH_NORMALIZATION, 1, 21, 5, 5, 1, 5, norm_attrs,
     onnx_load_batch_norm},
    {"Cast", CP_OP_CAST, 1, 21, 1, 1, 1, 1, NULL, onnx_load_cast},
    {"Clip", CP_OP_CLIP, 1, 21, 1, 3, 1, 1, NULL, load_generic},
    {"Concat", CP_OP_CONCAT, 1, 21, 1, ANY, 1, 1, axis_attrs, onnx_load_concat},
    {"Constant", CP_OP_CONSTANT, 1, 21, 0, 0, 1, 1, NULL, load_constant},
    {"ConstantOfShape", CP_OP_CONSTANT_OF_SHAPE, 9, 21, 1, 1, 1, 1, cos_attrs,
     load_constant_of_shape},
    {"Conv", CP_OP_CONV, 1, 21, 2, 3, 1, 1, conv_attrs, load_generic},
    {"ConvTranspose", CP_OP_CONV_TRANSPOSE, 1, 21, 2, 3, 1, 1, conv_attrs, load_generic},
    {"Div", CP_OP_DIV, 1, 21, 2, 2, 1, 1, NULL, onnx_load_legacy_binary},
    {"Dropout", CP_OP_DROPOUT, 1, 21, 1, 3, 1, 2, dropout_attrs, onnx_load_dropout},
    {"Equal", CP_OP_EQUAL, 1, 21, 2, 2, 1, 1, NULL, onnx_load_legacy_binary},
    {"Erf", CP_OP_ERF, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Exp", CP_OP_EXP, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Expand", CP_OP_EXPAND, 8, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Flatten", CP_OP_FLATTEN, 1, 21, 1, 1, 1, 1, axis_attrs, load_generic},
    {"Gather", CP_OP_GATHER, 1, 21, 2, 2, 1, 1, axis_attrs, load_generic},
    {"Gemm", CP_OP_GEMM, 1, 21, 2, 3, 1, 1, gemm_attrs, load_generic},
    {"GlobalAveragePool", CP_OP_GLOBAL_AVERAGE_POOL, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Identity", CP_OP_IDENTITY, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"InstanceNormalization", CP_OP_INSTANCE_NORMALIZATION, 1, 21, 3, 3, 1, 1, norm_attrs,
     load_generic},
    /* LayerNormalization entered the default domain in opset 17. */
    {"LayerNormalization", CP_OP_LAYER_NORMALIZATION, 17, 21, 2, 3, 1, 3, norm_attrs, load_generic},
    {"LeakyRelu", CP_OP_LEAKY_RELU, 1, 21, 1, 1, 1, 1, leaky_attrs, load_generic},
    {"MatMul", CP_OP_MATMUL, 1, 21, 2, 2, 1, 1, NULL, load_generic},
    {"MaxPool", CP_OP_MAX_POOL, 1, 21, 1, 1, 1, 2, pool_attrs, load_generic},
    {"Mul", CP_OP_MUL, 1, 21, 2, 2, 1, 1, NULL, onnx_load_legacy_binary},
    {"Pad", CP_OP_PAD, 2, 21, 1, 4, 1, 1, pad_attrs, load_generic},
    {"Pow", CP_OP_POW, 1, 21, 2, 2, 1, 1, NULL, onnx_load_legacy_binary},
    {"Range", CP_OP_RANGE, 11, 21, 3, 3, 1, 1, NULL, load_generic},
    {"ReduceMax", CP_OP_REDUCE_MAX, 1, 21, 1, 2, 1, 1, reduce_attrs, load_generic},
    {"ReduceMean", CP_OP_REDUCE_MEAN, 1, 21, 1, 2, 1, 1, reduce_attrs, load_generic},
    {"ReduceSum", CP_OP_REDUCE_SUM, 1, 21, 1, 2, 1, 1, reduce_attrs, load_generic},
    {"Relu", CP_OP_RELU, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Reshape", CP_OP_RESHAPE, 1, 21, 1, 2, 1, 1, reshape_attrs, onnx_load_reshape},
    {"Resize", CP_OP_RESIZE, 10, 21, 1, 4, 1, 1, resize_attrs, load_generic},
    {"Shape", CP_OP_SHAPE, 1, 21, 1, 1, 1, 1, shape_attrs, load_generic},
    {"Sigmoid", CP_OP_SIGMOID, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Slice", CP_OP_SLICE, 1, 21, 1, 5, 1, 1, NULL, load_generic},
    {"Softmax", CP_OP_SOFTMAX, 1, 21, 1, 1, 1, 1, axis_attrs, load_generic},
    {"Split", CP_OP_SPLIT, 1, 21, 1, 2, 1, ANY, split_attrs, load_generic},
    {"Sqrt", CP_OP_SQRT, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Squeeze", CP_OP_SQUEEZE, 1, 21, 1, 2, 1, 1, axes_attrs, load_generic},
    {"Sub", CP_OP_SUB, 1, 21, 2, 2, 1, 1, NULL, onnx_load_legacy_binary},
    {"Tanh", CP_OP_TANH, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Transpose", CP_OP_TRANSPOSE, 1, 21, 1, 1, 1, 1, transpose_attrs, load_generic},
    {"Unsqueeze", CP_OP_UNSQUEEZE, 1, 21, 1, 2, 1, 1, axes_attrs, load_unsqueeze},
    {"Where", CP_OP_WHERE, 9, 21, 3, 3, 1, 1, NULL, load_generic},
    /* ---- [elementwise] ---- */
    /* Unary math: the versions from 7 on differ only in the dtypes they
     * list (bf16 at 13), which the kernels check. */
    {"Abs", CP_OP_ABS, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Neg", CP_OP_NEG, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Reciprocal", CP_OP_RECIPROCAL, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Floor", CP_OP_FLOOR, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Ceil", CP_OP_CEIL, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Round", CP_OP_ROUND, 11, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Sign", CP_OP_SIGN, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Log", CP_OP_LOG, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Sin", CP_OP_SIN, 7, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Cos", CP_OP_COS, 7, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Tan", CP_OP_TAN, 7, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Asin", CP_OP_ASIN, 7, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Acos", CP_OP_ACOS, 7, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Atan", CP_OP_ATAN, 7, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Sinh", CP_OP_SINH, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Cosh", CP_OP_COSH, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Asinh", CP_OP_ASINH, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Acosh", CP_OP_ACOSH, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Atanh", CP_OP_ATANH, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"IsNaN", CP_OP_IS_NAN, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"IsInf", CP_OP_IS_INF, 10, 21, 1, 1, 1, 1, isinf_attrs, load_generic},
    {"Not", CP_OP_NOT, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"BitwiseNot", CP_OP_BITWISE_NOT, 18, 21, 1, 1, 1, 1, NULL, load_generic},
    /* Activations. */
    {"Elu", CP_OP_ELU, 1, 21, 1, 1, 1, 1, alpha_attrs, load_generic},
    {"Selu", CP_OP_SELU, 1, 21, 1, 1, 1, 1, selu_attrs, load_generic},
    {"Celu", CP_OP_CELU, 12, 21, 1, 1, 1, 1, alpha_attrs, load_generic},
    {"HardSigmoid", CP_OP_HARD_SIGMOID, 1, 21, 1, 1, 1, 1, hard_sigmoid_attrs, load_generic},
    {"HardSwish", CP_OP_HARD_SWISH, 14, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Softsign", CP_OP_SOFTSIGN, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Softplus", CP_OP_SOFTPLUS, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"ThresholdedRelu", CP_OP_THRESHOLDED_RELU, 10, 21, 1, 1, 1, 1, alpha_attrs, load_generic},
    {"Shrink", CP_OP_SHRINK, 9, 21, 1, 1, 1, 1, shrink_attrs, load_generic},
    {"Mish", CP_OP_MISH, 18, 21, 1, 1, 1, 1, NULL, load_generic},
    {"PRelu", CP_OP_PRELU, 1, 21, 2, 2, 1, 1, NULL, load_generic},
    /* ONNX's Gelu (20) is our own Gelu, with the same `approximate`. */
    {"Gelu", CP_OP_GELU, 20, 21, 1, 1, 1, 1, gelu_attrs, load_generic},
    /* Comparisons, logic, Mod and the bitwise ops. */
    {"Greater", CP_OP_GREATER, 7, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Less", CP_OP_LESS, 7, 21, 2, 2, 1, 1, NULL, load_generic},
    {"GreaterOrEqual", CP_OP_GREATER_OR_EQUAL, 12, 21, 2, 2, 1, 1, NULL, load_generic},
    {"LessOrEqual", CP_OP_LESS_OR_EQUAL, 12, 21, 2, 2, 1, 1, NULL, load_generic},
    {"And", CP_OP_AND, 7, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Or", CP_OP_OR, 7, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Xor", CP_OP_XOR, 7, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Mod", CP_OP_MOD, 10, 21, 2, 2, 1, 1, mod_attrs, load_generic},
    {"BitShift", CP_OP_BIT_SHIFT, 11, 21, 2, 2, 1, 1, bitshift_attrs, load_generic},
    {"BitwiseAnd", CP_OP_BITWISE_AND, 18, 21, 2, 2, 1, 1, NULL, load_generic},
    {"BitwiseOr", CP_OP_BITWISE_OR, 18, 21, 2, 2, 1, 1, NULL, load_generic},
    {"BitwiseXor", CP_OP_BITWISE_XOR, 18, 21, 2, 2, 1, 1, NULL, load_generic},
    /* Variadic, multidirectional broadcasting (from 8; opset 7's same-shape
     * form is a special case). */
    {"Max", CP_OP_MAX, 1, 21, 1, ANY, 1, 1, NULL, load_generic},
    {"Min", CP_OP_MIN, 1, 21, 1, ANY, 1, 1, NULL, load_generic},
    {"Sum", CP_OP_SUM, 1, 21, 1, ANY, 1, 1, NULL, load_generic},
    {"Mean", CP_OP_MEAN, 1, 21, 1, ANY, 1, 1, NULL, load_generic},
    {"CastLike", CP_OP_CAST_LIKE, 15, 21, 2, 2, 1, 1, NULL, load_cast_like},
    /* Random generators: deterministic given `seed` (graph/op_eval_elementwise.h). */
    {"RandomNormal", CP_OP_RANDOM_NORMAL, 7, 21, 0, 0, 1, 1, random_normal_attrs, load_generic},
    {"RandomUniform", CP_OP_RANDOM_UNIFORM, 7, 21, 0, 0, 1, 1, random_uniform_attrs, load_generic},
    {"RandomNormalLike", CP_OP_RANDOM_NORMAL_LIKE, 7, 21, 1, 1, 1, 1, random_like_attrs,
     load_generic},
    {"RandomUniformLike", CP_OP_RANDOM_UNIFORM_LIKE, 7, 21, 1, 1, 1, 1, random_like_attrs,
     load_generic},
    {"Bernoulli", CP_OP_BERNOULLI, 15, 21, 1, 1, 1, 1, bernoulli_attrs, load_generic},
    {"Multinomial", CP_OP_MULTINOMIAL, 7, 21, 1, 1, 1, 1, multinomial_attrs, load_generic},
    /* ---- end [elementwise] ---- */
    /* ---- [elementwise] ---- */
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    {"ReduceMin", CP_OP_REDUCE_MIN, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ReduceProd", CP_OP_REDUCE_PROD, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ReduceL1", CP_OP_REDUCE_L1, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ReduceL2", CP_OP_REDUCE_L2, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ReduceLogSum", CP_OP_REDUCE_LOG_SUM, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ReduceLogSumExp", CP_OP_REDUCE_LOG_SUM_EXP, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ReduceSumSquare", CP_OP_REDUCE_SUM_SQUARE, 1, 21, 1, 2, 1, 1, NULL, load_generic},
    {"ArgMax", CP_OP_ARG_MAX, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"ArgMin", CP_OP_ARG_MIN, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"TopK", CP_OP_TOP_K, 1, 21, 1, 2, 2, 2, NULL, load_generic},
    {"CumSum", CP_OP_CUM_SUM, 11, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Hardmax", CP_OP_HARDMAX, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"LogSoftmax", CP_OP_LOG_SOFTMAX, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"GatherElements", CP_OP_GATHER_ELEMENTS, 11, 21, 2, 2, 1, 1, NULL, load_generic},
    {"GatherND", CP_OP_GATHER_ND, 11, 21, 2, 2, 1, 1, NULL, load_generic},
    {"ScatterElements", CP_OP_SCATTER_ELEMENTS, 11, 21, 3, 3, 1, 1, NULL, load_generic},
    {"ScatterND", CP_OP_SCATTER_ND, 11, 21, 3, 3, 1, 1, NULL, load_generic},
    {"Scatter", CP_OP_SCATTER, 9, 10, 3, 3, 1, 1, NULL, load_generic},
    {"Compress", CP_OP_COMPRESS, 9, 21, 2, 2, 1, 1, NULL, load_generic},
    {"NonZero", CP_OP_NON_ZERO, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"OneHot", CP_OP_ONE_HOT, 9, 21, 3, 3, 1, 1, NULL, load_generic},
    {"Trilu", CP_OP_TRILU, 14, 21, 1, 2, 1, 1, NULL, load_generic},
    {"Tile", CP_OP_TILE, 6, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Size", CP_OP_SIZE, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"EyeLike", CP_OP_EYE_LIKE, 9, 21, 1, 1, 1, 1, NULL, load_generic},
    {"NegativeLogLikelihoodLoss", CP_OP_NLL_LOSS, 12, 21, 2, 3, 1, 1, NULL, load_generic},
    {"SoftmaxCrossEntropyLoss", CP_OP_SCE_LOSS, 12, 21, 2, 3, 1, 2, NULL, load_generic},
    {"ReverseSequence", CP_OP_REVERSE_SEQUENCE, 10, 21, 2, 2, 1, 1, NULL, load_generic},
    {"Det", CP_OP_DET, 11, 21, 1, 1, 1, 1, NULL, load_generic},
    {"Einsum", CP_OP_EINSUM, 12, 21, 1, 8, 1, 1, NULL, load_generic},
    {"Unique", CP_OP_UNIQUE, 11, 21, 1, 1, 1, 4, NULL, load_generic},
/* ---- end [reduce_index] ---- */
/* ---- [reduce_index] ---- */
/* ---- end [reduce_index] ---- */

/* ---- [nn] ---- */
/* Attribute lists as compound literals, so the family's rows stay in
 * its block. */
#define NN_ATTRS(...) ((const struct onnx_attr_spec[]){__VA_ARGS__, {NULL, 0, false}})
    {"LRN", CP_OP_LRN, 1, 21, 1, 1, 1, 1,
     NN_ATTRS({"size", CP_ATTR_INT, true}, {"alpha", CP_ATTR_FLOAT, false},
              {"beta", CP_ATTR_FLOAT, false}, {"bias", CP_ATTR_FLOAT, false}),
     load_generic},
    {"LpNormalization", CP_OP_LP_NORMALIZATION, 1, 21, 1, 1, 1, 1,
     NN_ATTRS({"axis", CP_ATTR_INT, false}, {"p", CP_ATTR_INT, false}), load_generic},
    {"MeanVarianceNormalization", CP_OP_MEAN_VARIANCE_NORMALIZATION, 9, 21, 1, 1, 1, 1,
     NN_ATTRS({"axes", CP_ATTR_INTS, false}), load_generic},
    {"GlobalMaxPool", CP_OP_GLOBAL_MAX_POOL, 1, 21, 1, 1, 1, 1, NULL, load_generic},
    {"LpPool", CP_OP_LP_POOL, 2, 21, 1, 1, 1, 1,
     NN_ATTRS({"kernel_shape", CP_ATTR_INTS, true}, {"strides", CP_ATTR_INTS, false},
              {"pads", CP_ATTR_INTS, false}, {"dilations", CP_ATTR_INTS, false},
              {"auto_pad", CP_ATTR_STRING, false}, {"ceil_mode", CP_ATTR_INT, false},
              {"p", CP_ATTR_INT, false}),
     load_generic},
    {"GlobalLpPool", CP_OP_GLOBAL_LP_POOL, 2, 21, 1, 1, 1, 1, NN_ATTRS({"p", CP_ATTR_INT, false}),
     load_generic},
    {"MaxUnpool", CP_OP_MAX_UNPOOL, 9, 21, 2, 3, 1, 1,
     NN_ATTRS({"kernel_shape", CP_ATTR_INTS, true}, {"strides", CP_ATTR_INTS, false},
              {"pads", CP_ATTR_INTS, false}),
     load_generic},
    {"DepthToSpace", CP_OP_DEPTH_TO_SPACE, 1, 21, 1, 1, 1, 1,
     NN_ATTRS({"blocksize", CP_ATTR_INT, true}, {"mode", CP_ATTR_STRING, false}), load_generic},
    {"SpaceToDepth", CP_OP_SPACE_TO_DEPTH, 1, 21, 1, 1, 1, 1,
     NN_ATTRS({"blocksize", CP_ATTR_INT, true}), load_generic},
    {"GridSample", CP_OP_GRID_SAMPLE, 16, 21, 2, 2, 1, 1,
     NN_ATTRS({"mode", CP_ATTR_STRING, false}, {"padding_mode", CP_ATTR_STRING, false},
              {"align_corners", CP_ATTR_INT, false}),
     load_generic},
    {"RoiAlign", CP_OP_ROI_ALIGN, 10, 21, 3, 3, 1, 1,
     NN_ATTRS({"mode", CP_ATTR_STRING, false}, {"output_height", CP_ATTR_INT, false},
              {"output_width", CP_ATTR_INT, false}, {"sampling_ratio", CP_ATTR_INT, false},
              {"spatial_scale", CP_ATTR_FLOAT, false},
              {"coordinate_transformation_mode", CP_ATTR_STRING, false}),
     load_generic},
    {"NonMaxSuppression", CP_OP_NON_MAX_SUPPRESSION, 10, 21, 2, 5, 1, 1,
     NN_ATTRS({"center_point_box", CP_ATTR_INT, false}), load_generic},
    {"GroupNormalization", CP_OP_GROUP_NORMALIZATION, 18, 21, 3, 3, 1, 1,
     NN_ATTRS({"num_groups", CP_ATTR_INT, true}, {"epsilon", CP_ATTR_FLOAT, false},
              {"stash_type", CP_ATTR_INT, false}),
     load_group_norm},
    {"MaxRoiPool", CP_OP_MAX_ROI_POOL, 1, 21, 2, 2, 1, 1,
     NN_ATTRS({"pooled_shape", CP_ATTR_INTS, true}, {"spatial_scale", CP_ATTR_FLOAT, false}),
     load_generic},
    {"CenterCropPad", CP_OP_CENTER_CROP_PAD, 18, 21, 2, 2, 1, 1,
     NN_ATTRS({"axes", CP_ATTR_INTS, false}), load_generic},
    {"Col2Im", CP_OP_COL2IM, 18, 21, 3, 3, 1, 1,
     NN_ATTRS({"dilations", CP_ATTR_INTS, false}, {"pads", CP_ATTR_INTS, false},
              {"strides", CP_ATTR_INTS, false}),
     load_generic},
    {"AffineGrid", CP_OP_AFFINE_GRID, 20, 21, 2, 2, 1, 1,
     NN_ATTRS({"align_corners", CP_ATTR_INT, false}), load_generic},
    {"DeformConv", CP_OP_DEFORM_CONV, 19, 21, 3, 5, 1, 1,
     NN_ATTRS({"dilations", CP_ATTR_INTS, false}, {"group", CP_ATTR_INT, false},
              {"kernel_shape", CP_ATTR_INTS, false}, {"offset_group", CP_ATTR_INT, false},
              {"pads", CP_ATTR_INTS, false}, {"strides", CP_ATTR_INTS, false}),
     load_generic},
#undef NN_ATTRS
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    /* LSTM, GRU, RNN: opset 7's form (no output_sequence); 14 adds layout. */
    {"BlackmanWindow", CP_OP_BLACKMAN_WINDOW, 17, 21, 1, 1, 1, 1, onnx_window_attrs,
     onnx_load_signal},
    {"DFT", CP_OP_DFT, 17, 21, 1, 3, 1, 1, onnx_dft_attrs, onnx_load_signal},
    {"GRU", CP_OP_GRU, 7, 21, 3, 6, 0, 2, onnx_gru_attrs, onnx_load_recurrent},
    {"HammingWindow", CP_OP_HAMMING_WINDOW, 17, 21, 1, 1, 1, 1, onnx_window_attrs,
     onnx_load_signal},
    {"HannWindow", CP_OP_HANN_WINDOW, 17, 21, 1, 1, 1, 1, onnx_window_attrs, onnx_load_signal},
    {"LSTM", CP_OP_LSTM, 7, 21, 3, 8, 0, 3, onnx_lstm_attrs, onnx_load_recurrent},
    {"MelWeightMatrix", CP_OP_MEL_WEIGHT_MATRIX, 17, 21, 5, 5, 1, 1, onnx_window_attrs,
     onnx_load_signal},
    {"RNN", CP_OP_RNN, 7, 21, 3, 6, 0, 2, onnx_rnn_attrs, onnx_load_recurrent},
    {"STFT", CP_OP_STFT, 17, 21, 2, 4, 1, 1, onnx_stft_attrs, onnx_load_signal},
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    /* Input counts: the op's own inputs are checked by the loader, which
     * appends the subgraphs' outer-scope references. */
    {"If", CP_OP_IF, 7, 21, 1, ANY, 1, ANY, NULL, onnx_load_control},
    {"Loop", CP_OP_LOOP, 7, 21, 2, ANY, 1, ANY, NULL, onnx_load_control},
    {"Scan", CP_OP_SCAN, 8, 21, 1, ANY, 1, ANY, NULL, onnx_load_control},
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    {"ConvInteger", CP_OP_CONV_INTEGER, 10, 21, 2, 4, 1, 1, conv_attrs, load_generic},
    {"DequantizeLinear", CP_OP_DEQUANTIZE_LINEAR, 10, 21, 2, 3, 1, 1, qdq_attrs, load_qdq},
    {"DynamicQuantizeLinear", CP_OP_DYNAMIC_QUANTIZE_LINEAR, 11, 21, 1, 1, 3, 3, NULL,
     load_generic},
    {"MatMulInteger", CP_OP_MATMUL_INTEGER, 10, 21, 2, 4, 1, 1, NULL, load_generic},
    {"QLinearConv", CP_OP_QLINEAR_CONV, 10, 21, 8, 9, 1, 1, conv_attrs, load_generic},
    {"QLinearMatMul", CP_OP_QLINEAR_MATMUL, 10, 21, 8, 8, 1, 1, NULL, load_generic},
    {"QuantizeLinear", CP_OP_QUANTIZE_LINEAR, 10, 21, 2, 3, 1, 1, qdq_attrs, load_qdq},
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* Upsample (deprecated in opset 10) is Resize as opset 10 defines it:
     * asymmetric coordinates, nearest rounding down. */
    {"Upsample", CP_OP_RESIZE, 7, 9, 1, 2, 1, 1, NULL, onnx_load_upsample},
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
