/* Loaders for the older versions of the ops the table already has (opsets
 * 1-10): attributes that later became inputs are turned into constant
 * inputs where the rest of cannprof reads only the newer form (Reshape's
 * `shape`, Upsample's `scales`), old attribute forms are checked or given
 * their old defaults (Cast's `to` as a string, Concat's `axis`), and the
 * versions whose semantics we do not compute are refused with the node
 * named (BatchNormalization in training mode or with spatial 0, Dropout in
 * training mode, legacy broadcasting flags that are not 0 or 1). */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Add the node and copy its attributes. OUT: *idx. */
static enum cp_status add_node(struct onnx_ctx *c, const struct onnx_op_def *def,
                               const Onnx__NodeProto *np, const char *name, const char *origin,
                               int32_t *idx)
{
    enum cp_status st = onnx_add_node(c, def, np, name, origin, idx);
    if (st == CP_OK)
        st = onnx_copy_attrs(c, def, np, *idx, name);
    return st;
}

/* A tensor name not yet used in the model: "<node>/<what>", with a counter
 * appended when that is taken. OUT: buf. */
static void fresh_name(struct onnx_ctx *c, const char *node, const char *what, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", node, what);
    for (int k = 1; cp_strmap_gets(&c->tensors, buf, -1) >= 0; k++)
        snprintf(buf, n, "%s/%s_%d", node, what, k);
}

/* Load `np` with one more input: a new 1-D initializer holding `data`
 * (heap, ownership passes here), appended after the node's first input,
 * and the op type `op_type` (the name of the row's cp_op). */
static enum cp_status load_with_const_input(struct onnx_ctx *c, const struct onnx_op_def *def,
                                            const Onnx__NodeProto *np, const char *name,
                                            const char *origin, const char *op_type,
                                            const char *what, enum cp_dtype dt, void *data,
                                            size_t count, int32_t *idx)
{
    char tname[512];
    fresh_name(c, name, what, tname, sizeof tname);
    struct cp_shape shape;
    int64_t dim = (int64_t)count;
    cp_shape_set(&shape, 1, &dim);
    char desc[600];
    snprintf(desc, sizeof desc, "node '%.200s' (%s) attribute '%s'", name, np->op_type, what);
    enum cp_status st =
        onnx_set_initializer(c, tname, dt, &shape, data, count * cp_dtype_size(dt), desc, NULL);
    if (st != CP_OK)
        return st;
    char *inputs[2] = {np->n_input ? np->input[0] : (char *)"", tname};
    Onnx__NodeProto copy = *np;
    copy.input = inputs;
    copy.n_input = 2;
    copy.op_type = (char *)op_type;
    return add_node(c, def, &copy, name, origin, idx);
}

/* ---- elementwise: the broadcast flag before opset 7 ---------------------------------- */

enum cp_status onnx_load_legacy_binary(struct onnx_ctx *c, const struct onnx_op_def *def,
                                       const Onnx__NodeProto *np, const char *name,
                                       const char *origin)
{
    int32_t idx;
    enum cp_status st = add_node(c, def, np, name, origin, &idx);
    if (st != CP_OK || c->opset >= 7)
        return st;
    const struct cp_node *n = cp_graph_node(c->g, idx);
    const struct cp_attr *b = cp_node_attr(n, "broadcast");
    if (b && (b->type != CP_ATTR_INT || (b->i != 0 && b->i != 1)))
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): attribute 'broadcast' must be the integer 0 or 1", name,
                        np->op_type);
    const struct cp_attr *a = cp_node_attr(n, "axis");
    if (a && a->type != CP_ATTR_INT)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): attribute 'axis' must be an integer",
                        name, np->op_type);
    return CP_OK;
}

/* ---- BatchNormalization, Dropout ------------------------------------------------------ */

static bool output_named(const Onnx__NodeProto *np, size_t i)
{
    return i < np->n_output && np->output[i] && *np->output[i];
}

enum cp_status onnx_load_batch_norm(struct onnx_ctx *c, const struct onnx_op_def *def,
                                    const Onnx__NodeProto *np, const char *name, const char *origin)
{
    int32_t idx;
    enum cp_status st = add_node(c, def, np, name, origin, &idx);
    if (st != CP_OK)
        return st;
    const struct cp_node *n = cp_graph_node(c->g, idx);
    /* Before opset 7 the default is training mode (is_test 0), which
     * normalises with the batch's own statistics. */
    if (c->opset < 7 && cp_node_attr_int(n, "is_test", 0) == 0)
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (BatchNormalization): opset %lld without is_test=1 is training "
                        "mode (batch statistics), which is not supported",
                        name, (long long)c->opset);
    /* spatial 0 (before opset 9): per-activation statistics, C x D1 x ... */
    if (c->opset < 9 && cp_node_attr_int(n, "spatial", 1) != 1)
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (BatchNormalization): spatial=0 (per-activation statistics) "
                        "is not supported",
                        name);
    if (c->opset < 14) {
        for (size_t i = 1; i < np->n_output; i++)
            if (output_named(np, i))
                return onnx_err(c, CP_ERR_UNSUPPORTED,
                                "node '%s' (BatchNormalization): output %zu ('%s') exists only "
                                "in training mode, which is not supported",
                                name, i, np->output[i]);
    }
    return CP_OK;
}

enum cp_status onnx_load_dropout(struct onnx_ctx *c, const struct onnx_op_def *def,
                                 const Onnx__NodeProto *np, const char *name, const char *origin)
{
    int32_t idx;
    enum cp_status st = add_node(c, def, np, name, origin, &idx);
    if (st != CP_OK)
        return st;
    const struct cp_node *n = cp_graph_node(c->g, idx);
    if (c->opset < 7 && cp_node_attr_int(n, "is_test", 0) == 0)
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (Dropout): opset %lld without is_test=1 drops at random "
                        "(training mode), which is not supported",
                        name, (long long)c->opset);
    if (c->opset < 12 && np->n_input > 1)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Dropout): opset %lld takes one input, not %zu", name,
                        (long long)c->opset, np->n_input);
    /* Before opset 10 the mask has the data's type, not bool. */
    if (c->opset < 10 && output_named(np, 1))
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (Dropout): the mask output of opset %lld (of the data's type) "
                        "is not supported",
                        name, (long long)c->opset);
    return CP_OK;
}

/* ---- Cast: `to` as a type name before opset 6 ------------------------------------------ */

static int onnx_type_of_name(const char *s)
{
    static const struct {
        const char *name;
        int type;
    } names[] = {
        {"FLOAT", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT},
        {"UINT8", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8},
        {"INT8", ONNX__TENSOR_PROTO__DATA_TYPE__INT8},
        {"UINT16", ONNX__TENSOR_PROTO__DATA_TYPE__UINT16},
        {"INT16", ONNX__TENSOR_PROTO__DATA_TYPE__INT16},
        {"INT32", ONNX__TENSOR_PROTO__DATA_TYPE__INT32},
        {"INT64", ONNX__TENSOR_PROTO__DATA_TYPE__INT64},
        {"BOOL", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL},
        {"FLOAT16", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16},
        {"DOUBLE", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE},
        {"UINT32", ONNX__TENSOR_PROTO__DATA_TYPE__UINT32},
        {"UINT64", ONNX__TENSOR_PROTO__DATA_TYPE__UINT64},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].type;
    return -1;
}

enum cp_status onnx_load_cast(struct onnx_ctx *c, const struct onnx_op_def *def,
                              const Onnx__NodeProto *np, const char *name, const char *origin)
{
    int32_t idx;
    enum cp_status st = add_node(c, def, np, name, origin, &idx);
    if (st != CP_OK)
        return st;
    const struct cp_attr *a = cp_node_attr(cp_graph_node(c->g, idx), "to");
    if (!a)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (Cast): required attribute 'to' is missing",
                        name);
    int64_t to;
    if (a->type == CP_ATTR_STRING && c->opset < 6) {
        to = onnx_type_of_name(a->s);
        if (to < 0)
            return onnx_err(c, CP_ERR_UNSUPPORTED,
                            "node '%s' (Cast): a cast to '%s' is not supported", name, a->s);
        if (cp_node_set_int(c->g, idx, "to", to) != CP_OK)
            return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    } else if (a->type == CP_ATTR_INT) {
        to = a->i;
    } else {
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Cast): attribute 'to' must be %s at opset %lld", name,
                        c->opset < 6 ? "a type name (STRING)" : "an INT", (long long)c->opset);
    }
    if (to < 0 || to > INT32_MAX || cp_dtype_from_onnx((int)to) == CP_DTYPE_UNDEFINED) {
        char buf[24];
        /* Cast's `saturate` (19) concerns only the float8 types. */
        const char *why = to >= 17 && to <= 20   ? " (float8 types are not supported)"
                          : to == 21 || to == 22 ? " (4-bit types are not supported)"
                                                 : "";
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "node '%s' (Cast): a cast to %s is not supported%s (supported: f32, f16, "
                        "bf16, f64, i8, u8, i16, u16, i32, u32, i64, u64, bool)",
                        name, cp_onnx_dtype_name(to < 0 || to > INT32_MAX ? -1 : (int)to, buf),
                        why);
    }
    return CP_OK;
}

/* ---- Concat: axis optional (default 1) before opset 4 ---------------------------------- */

enum cp_status onnx_load_concat(struct onnx_ctx *c, const struct onnx_op_def *def,
                                const Onnx__NodeProto *np, const char *name, const char *origin)
{
    int32_t idx;
    enum cp_status st = add_node(c, def, np, name, origin, &idx);
    if (st != CP_OK)
        return st;
    if (cp_node_attr(cp_graph_node(c->g, idx), "axis"))
        return CP_OK;
    if (c->opset >= 4)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Concat): required attribute 'axis' (INT) is missing", name);
    if (cp_node_set_int(c->g, idx, "axis", 1) != CP_OK)
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    return CP_OK;
}

/* ---- Reshape: the `shape` attribute before opset 5 ------------------------------------- */

enum cp_status onnx_load_reshape(struct onnx_ctx *c, const struct onnx_op_def *def,
                                 const Onnx__NodeProto *np, const char *name, const char *origin)
{
    int32_t idx;
    if (c->opset >= 5) {
        if (np->n_input != 2)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (Reshape) has %zu input%s; opset %lld takes exactly 2", name,
                            np->n_input, np->n_input == 1 ? "" : "s", (long long)c->opset);
        return add_node(c, def, np, name, origin, &idx);
    }
    if (np->n_input != 1)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Reshape) has %zu inputs; opset %lld takes exactly 1 (the "
                        "shape is an attribute)",
                        name, np->n_input, (long long)c->opset);
    const Onnx__AttributeProto *shape = NULL;
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i]->name && strcmp(np->attribute[i]->name, "shape") == 0)
            shape = np->attribute[i];
    if (!shape)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Reshape): opset %lld needs the 'shape' attribute", name,
                        (long long)c->opset);
    int type;
    enum cp_status st = onnx_attr_type(c, np, name, shape, &type);
    if (st != CP_OK)
        return st;
    if (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (Reshape): attribute 'shape' must be INTS",
                        name);
    size_t n = shape->n_ints;
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    if (n)
        memcpy(v, shape->ints, n * sizeof *v);
    return load_with_const_input(c, def, np, name, origin, "Reshape", "shape", CP_DTYPE_I64, v, n,
                                 &idx);
}

/* ---- Upsample (opsets 7-9): Resize as opset 10 defines it ------------------------------ */

enum cp_status onnx_load_upsample(struct onnx_ctx *c, const struct onnx_op_def *def,
                                  const Onnx__NodeProto *np, const char *name, const char *origin)
{
    const Onnx__AttributeProto *scales = NULL, *mode = NULL;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const char *an = np->attribute[i]->name ? np->attribute[i]->name : "";
        if (strcmp(an, "scales") == 0)
            scales = np->attribute[i];
        else if (strcmp(an, "mode") == 0)
            mode = np->attribute[i];
        else
            return onnx_err(c, CP_ERR_INVALID, "node '%s' (Upsample): unknown attribute '%s'", name,
                            an);
    }
    int type;
    enum cp_status st;
    if (mode) {
        if ((st = onnx_attr_type(c, np, name, mode, &type)) != CP_OK)
            return st;
        char m[16] = "";
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING && mode->s.len < sizeof m)
            memcpy(m, mode->s.data, mode->s.len);
        if (strcmp(m, "nearest") != 0 && strcmp(m, "linear") != 0)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (Upsample): attribute 'mode' must be 'nearest' or 'linear'",
                            name);
    }
    int32_t idx;
    if (c->opset >= 9) {
        if (scales)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (Upsample): opset %lld takes the scales as input 1, not as "
                            "an attribute",
                            name, (long long)c->opset);
        if (np->n_input != 2)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (Upsample) has %zu input%s; opset %lld takes exactly 2",
                            name, np->n_input, np->n_input == 1 ? "" : "s", (long long)c->opset);
        Onnx__NodeProto copy = *np;
        copy.op_type = (char *)"Resize";
        return add_node(c, def, &copy, name, origin, &idx);
    }
    if (np->n_input != 1)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Upsample) has %zu inputs; opset %lld takes exactly 1 (the "
                        "scales are an attribute)",
                        name, np->n_input, (long long)c->opset);
    if (!scales)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Upsample): opset %lld needs the 'scales' attribute", name,
                        (long long)c->opset);
    if ((st = onnx_attr_type(c, np, name, scales, &type)) != CP_OK)
        return st;
    if (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Upsample): attribute 'scales' must be FLOATS", name);
    size_t n = scales->n_floats;
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        v[i] = scales->floats[i];
        if (!(v[i] >= 1.0f)) {
            free(v);
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (Upsample): scale %g is below 1 (Upsample only enlarges)",
                            name, (double)scales->floats[i]);
        }
    }
    /* The attribute becomes input 1; the node keeps no 'scales' attribute. */
    Onnx__AttributeProto *kept[1];
    Onnx__NodeProto np2 = *np;
    np2.n_attribute = 0;
    np2.attribute = kept;
    if (mode)
        kept[np2.n_attribute++] = (Onnx__AttributeProto *)mode;
    return load_with_const_input(c, def, &np2, name, origin, "Resize", "scales", CP_DTYPE_F32, v, n,
                                 &idx);
}

bool cp_onnx_op_known(const char *op_type)
{
    return op_type && onnx_op_find(op_type) != NULL;
}
