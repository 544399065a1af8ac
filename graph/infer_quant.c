/* Shape and dtype inference of the quantization ops: QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, and the integer convolutions and
 * matmuls (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger).
 *
 * The integer convolutions and matmuls have the shapes of Conv and MatMul
 * over their data inputs, so their inference runs Conv's and MatMul's on a
 * view of the node that lists only those inputs, then sets the dtype. */
#include "graph/infer_internal.h"

#include <stdio.h>
#include <string.h>

static bool is_qint(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8 || dt == CP_DTYPE_I16 || dt == CP_DTYPE_U16;
}

static bool is_8bit(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8;
}

static bool is_scale_dtype(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_F16 || dt == CP_DTYPE_BF16;
}

/* Whether a shape holds exactly one element (a scalar or [1]). */
static bool is_single(const struct cp_shape *s)
{
    if (s->rank == 0)
        return true;
    for (int k = 0; k < s->rank; k++)
        if (s->dims[k].value != 1)
            return false;
    return true;
}

/* The scale (and zero point) layout of a QuantizeLinear/DequantizeLinear:
 * per tensor (one element), per axis (1-D along `axis`, opset 13 on) or
 * blocked (opset 21, `block_size` > 0: the rank of x, the axis dim
 * ceil(len / block_size), the others equal). */
static enum cp_status check_qdq_params(struct cp_infer *c, const struct cp_tensor *x,
                                       const struct cp_tensor *scale, const struct cp_tensor *zp)
{
    if (!is_scale_dtype(scale->dtype) && scale->dtype != CP_DTYPE_UNDEFINED)
        return cp_infer_fail(c, "scale '%s' is %s; it must be f32, f16 or bf16", scale->name,
                             cp_dtype_name(scale->dtype));
    int64_t block = cp_node_attr_int(c->node, "block_size", 0);
    if (block != 0 && c->opset < 21)
        return cp_infer_fail(c, "block_size needs opset 21 (the model imports opset %lld)",
                             (long long)c->opset);
    if (zp && zp->shape.rank >= 0 && scale->shape.rank >= 0 &&
        !cp_shape_equal(&zp->shape, &scale->shape)) {
        char a[64], b[64];
        return cp_infer_fail(c, "zero point '%s' is %s but scale '%s' is %s", zp->name,
                             cp_infer_fmt(&zp->shape, a), scale->name,
                             cp_infer_fmt(&scale->shape, b));
    }
    if (scale->shape.rank < 0 || x->shape.rank < 0)
        return CP_OK;
    if (block == 0 && is_single(&scale->shape))
        return CP_OK;
    if (c->opset < 13)
        return cp_infer_fail(c, "scale '%s' must be a scalar before opset 13", scale->name);
    int axis;
    enum cp_status st =
        cp_infer_axis(c, cp_node_attr_int(c->node, "axis", 1), x->shape.rank, false, "axis", &axis);
    if (st != CP_OK)
        return st;
    char bs[64], bx[64];
    if (block == 0) {
        int64_t len = x->shape.dims[axis].value, ns = scale->shape.dims[0].value;
        if (scale->shape.rank != 1 || (len >= 0 && ns >= 0 && len != ns))
            return cp_infer_fail(c,
                                 "per-axis scale '%s' is %s; it must be 1-D with the %lld "
                                 "elements of axis %d of '%s'",
                                 scale->name, cp_infer_fmt(&scale->shape, bs), (long long)len, axis,
                                 x->name);
        return CP_OK;
    }
    if (scale->shape.rank != x->shape.rank)
        return cp_infer_fail(c, "blocked scale '%s' is %s; it must have the rank of '%s' (%s)",
                             scale->name, cp_infer_fmt(&scale->shape, bs), x->name,
                             cp_infer_fmt(&x->shape, bx));
    for (int k = 0; k < x->shape.rank; k++) {
        int64_t len = x->shape.dims[k].value, ns = scale->shape.dims[k].value;
        if (len < 0 || ns < 0)
            continue;
        int64_t want = k == axis ? (len + block - 1) / block : len;
        if (ns != want)
            return cp_infer_fail(c,
                                 "blocked scale '%s' is %s; with block_size %lld over axis %d "
                                 "of '%s' (%s) it must be %lld along dim %d",
                                 scale->name, cp_infer_fmt(&scale->shape, bs), (long long)block,
                                 axis, x->name, cp_infer_fmt(&x->shape, bx), (long long)want, k);
    }
    return CP_OK;
}

enum cp_status cp_infer_quantize_linear(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *scale = cp_infer_in(c, 1),
                           *zp = cp_infer_in(c, 2);
    if (x->dtype != CP_DTYPE_UNDEFINED && x->dtype != CP_DTYPE_F32 && x->dtype != CP_DTYPE_F16 &&
        x->dtype != CP_DTYPE_BF16 && x->dtype != CP_DTYPE_I32)
        return cp_infer_fail(c, "input '%s' is %s; it must be f32, f16, bf16 or i32", x->name,
                             cp_dtype_name(x->dtype));
    enum cp_dtype out = CP_DTYPE_U8;
    int64_t od = cp_node_attr_int(c->node, "output_dtype", 0);
    if (od != 0)
        out = od <= INT32_MAX ? cp_dtype_from_onnx((int)od) : CP_DTYPE_UNDEFINED;
    if (zp) {
        if (od != 0 && zp->dtype != out)
            return cp_infer_fail(c, "zero point '%s' is %s but output_dtype says %s", zp->name,
                                 cp_dtype_name(zp->dtype), cp_dtype_name(out));
        out = zp->dtype;
    }
    if (!is_qint(out))
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                "quantizing to %s is not supported (int8, uint8, int16, uint16 "
                                "are; float8 and int4 are not)",
                                cp_dtype_name(out));
    enum cp_status st = check_qdq_params(c, x, scale, zp);
    if (st != CP_OK)
        return st;
    return cp_infer_set_out(c, 0, out, &x->shape);
}

enum cp_status cp_infer_dequantize_linear(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *scale = cp_infer_in(c, 1),
                           *zp = cp_infer_in(c, 2);
    if (x->dtype != CP_DTYPE_UNDEFINED && !is_qint(x->dtype) && x->dtype != CP_DTYPE_I32)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                "input '%s' is %s; dequantizing int8, uint8, int16, uint16 and "
                                "int32 is supported (float8 and int4 are not)",
                                x->name, cp_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return cp_infer_fail(c, "zero point '%s' is %s but input '%s' is %s", zp->name,
                             cp_dtype_name(zp->dtype), x->name, cp_dtype_name(x->dtype));
    enum cp_status st = check_qdq_params(c, x, scale, zp);
    if (st != CP_OK)
        return st;
    return cp_infer_set_out(c, 0, scale->dtype, &x->shape);
}

enum cp_status cp_infer_dynamic_quantize_linear(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (x->dtype != CP_DTYPE_UNDEFINED && x->dtype != CP_DTYPE_F32)
        return cp_infer_fail(c, "input '%s' is %s; it must be f32", x->name,
                             cp_dtype_name(x->dtype));
    struct cp_shape scalar;
    cp_shape_set(&scalar, 0, NULL);
    enum cp_status st = cp_infer_set_out(c, 0, CP_DTYPE_U8, &x->shape);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 1, CP_DTYPE_F32, &scalar);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 2, CP_DTYPE_U8, &scalar);
    return st;
}

/* ---- integer convolutions and matmuls ---------------------------------------------- */

/* Check a data input (8-bit) and its zero point (same dtype, one element or
 * 1-D of `per` elements when `per` >= 0... any length when per == -2). */
static enum cp_status check_operand(struct cp_infer *c, size_t data, int zp_in, int scale_in,
                                    const char *role)
{
    const struct cp_tensor *x = cp_infer_in(c, data);
    if (x->dtype != CP_DTYPE_UNDEFINED && !is_8bit(x->dtype))
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "%s '%s' is %s; it must be int8 or uint8",
                                role, x->name, cp_dtype_name(x->dtype));
    const struct cp_tensor *zp = zp_in >= 0 ? cp_infer_in(c, (size_t)zp_in) : NULL;
    if (zp && zp->dtype != x->dtype && zp->dtype != CP_DTYPE_UNDEFINED)
        return cp_infer_fail(c, "zero point '%s' is %s but %s '%s' is %s", zp->name,
                             cp_dtype_name(zp->dtype), role, x->name, cp_dtype_name(x->dtype));
    if (zp && zp->shape.rank > 1)
        return cp_infer_fail(c, "zero point '%s' must be a scalar or 1-D", zp->name);
    const struct cp_tensor *s = scale_in >= 0 ? cp_infer_in(c, (size_t)scale_in) : NULL;
    if (s && s->dtype != CP_DTYPE_F32 && s->dtype != CP_DTYPE_UNDEFINED &&
        !(c->opset >= 21 && is_scale_dtype(s->dtype)))
        return cp_infer_fail(c, "scale '%s' is %s; it must be f32", s->name,
                             cp_dtype_name(s->dtype));
    if (s && s->shape.rank > 1)
        return cp_infer_fail(c, "scale '%s' must be a scalar or 1-D", s->name);
    return CP_OK;
}

/* Run `infer` on a view of the node whose inputs are `ins` (n of them),
 * then give output 0 dtype `dt`. */
static enum cp_status infer_as(struct cp_infer *c, const int32_t *ins, size_t n,
                               enum cp_status (*infer)(struct cp_infer *), enum cp_dtype dt)
{
    struct cp_node *saved = c->node;
    struct cp_node view = *saved;
    int32_t buf[3];
    memcpy(buf, ins, n * sizeof *ins);
    view.inputs = buf;
    view.n_inputs = n;
    c->node = &view;
    enum cp_status st = infer(c);
    c->node = saved;
    if (st != CP_OK)
        return st;
    struct cp_tensor *y = cp_infer_out(c, 0);
    if (y && y->kind == CP_TENSOR_INTERMEDIATE)
        y->dtype = dt;
    return CP_OK;
}

static int32_t in_index(const struct cp_infer *c, size_t i)
{
    return i < c->node->n_inputs ? c->node->inputs[i] : -1;
}

enum cp_status cp_infer_qlinear_conv(struct cp_infer *c)
{
    for (size_t i = 0; i < 8; i++)
        if (!cp_infer_in(c, i) && i != 2 && i != 5 && i != 7)
            return cp_infer_fail(c, "required input %zu is missing", i);
    enum cp_status st = check_operand(c, 0, 2, 1, "input");
    if (st == CP_OK)
        st = check_operand(c, 3, 5, 4, "weight");
    if (st != CP_OK)
        return st;
    const struct cp_tensor *yzp = cp_infer_in(c, 7), *b = cp_infer_in(c, 8);
    enum cp_dtype out = yzp ? yzp->dtype : CP_DTYPE_U8;
    if (!is_8bit(out))
        return cp_infer_fail(c, "output zero point '%s' is %s; it must be int8 or uint8", yzp->name,
                             cp_dtype_name(out));
    if (b && b->dtype != CP_DTYPE_I32 && b->dtype != CP_DTYPE_UNDEFINED)
        return cp_infer_fail(c, "bias '%s' is %s; it must be i32", b->name,
                             cp_dtype_name(b->dtype));
    int32_t ins[3] = {in_index(c, 0), in_index(c, 3), in_index(c, 8)};
    return infer_as(c, ins, b ? 3 : 2, cp_infer_conv, out);
}

enum cp_status cp_infer_conv_integer(struct cp_infer *c)
{
    enum cp_status st = check_operand(c, 0, 2, -1, "input");
    if (st == CP_OK)
        st = check_operand(c, 1, 3, -1, "weight");
    if (st != CP_OK)
        return st;
    int32_t ins[2] = {in_index(c, 0), in_index(c, 1)};
    return infer_as(c, ins, 2, cp_infer_conv, CP_DTYPE_I32);
}

enum cp_status cp_infer_qlinear_matmul(struct cp_infer *c)
{
    for (size_t i = 0; i < 8; i++)
        if (!cp_infer_in(c, i) && i != 2 && i != 5 && i != 7)
            return cp_infer_fail(c, "required input %zu is missing", i);
    enum cp_status st = check_operand(c, 0, 2, 1, "input");
    if (st == CP_OK)
        st = check_operand(c, 3, 5, 4, "input");
    if (st != CP_OK)
        return st;
    const struct cp_tensor *yzp = cp_infer_in(c, 7);
    enum cp_dtype out = yzp ? yzp->dtype : CP_DTYPE_U8;
    if (!is_8bit(out))
        return cp_infer_fail(c, "output zero point '%s' is %s; it must be int8 or uint8", yzp->name,
                             cp_dtype_name(out));
    int32_t ins[2] = {in_index(c, 0), in_index(c, 3)};
    return infer_as(c, ins, 2, cp_infer_matmul, out);
}

enum cp_status cp_infer_matmul_integer(struct cp_infer *c)
{
    enum cp_status st = check_operand(c, 0, 2, -1, "input");
    if (st == CP_OK)
        st = check_operand(c, 1, 3, -1, "input");
    if (st != CP_OK)
        return st;
    int32_t ins[2] = {in_index(c, 0), in_index(c, 1)};
    return infer_as(c, ins, 2, cp_infer_matmul, CP_DTYPE_I32);
}
