/* Shape and dtype inference: the driver, stepwise inference at run time,
 * and the shape and attribute helpers the per-op files share (values live
 * in infer_values.c; see infer_internal.h for how the pieces fit). */
#include "graph/infer_internal.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------ */

static enum cp_status vfail(struct cp_infer *c, enum cp_status st, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const struct cp_node *n = c->node;
    return cp_diag_set(c->d, st, "node '%s' (%s): %s", n->name ? n->name : "(unnamed)", n->op_type,
                       msg);
}

enum cp_status cp_infer_fail_st(struct cp_infer *c, enum cp_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, st, fmt, ap);
    va_end(ap);
    return st;
}

enum cp_status cp_infer_fail(struct cp_infer *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, CP_ERR_INVALID, fmt, ap);
    va_end(ap);
    return CP_ERR_INVALID;
}

/* ---- inputs and outputs ---------------------------------------------------------- */

int32_t cp_infer_in_index(const struct cp_infer *c, size_t i)
{
    return i < c->node->n_inputs ? c->node->inputs[i] : -1;
}

struct cp_tensor *cp_infer_in(const struct cp_infer *c, size_t i)
{
    int32_t t = cp_infer_in_index(c, i);
    return t >= 0 ? cp_graph_tensor(c->g, t) : NULL;
}

struct cp_tensor *cp_infer_out(const struct cp_infer *c, size_t i)
{
    int32_t t = i < c->node->n_outputs ? c->node->outputs[i] : -1;
    return t >= 0 ? cp_graph_tensor(c->g, t) : NULL;
}

/* Why a static shape is too large for a tensor of dtype `dt` (an
 * undefined dtype counts a byte per element): written into why[n], false;
 * true when it fits or is not static. */
static bool size_fits(const struct cp_shape *s, enum cp_dtype dt, char *why, size_t n)
{
    if (!cp_shape_is_static(s))
        return true;
    enum cp_dtype es = dt != CP_DTYPE_UNDEFINED ? dt : CP_DTYPE_U8;
    if (cp_shape_nbytes(s, es, NULL))
        return true;
    char sh[96];
    cp_shape_format(s, sh, sizeof sh);
    int64_t numel = cp_shape_numel(s);
    if (numel < 0)
        snprintf(why, n, "%s %s: its element count does not fit in 64 bits", sh, cp_dtype_name(dt));
    else
        snprintf(why, n, "%s %s: %lld elements of %zu bytes do not fit in 64 bits", sh,
                 cp_dtype_name(dt), (long long)numel, cp_dtype_size(es));
    return false;
}

enum cp_status cp_infer_set_out(struct cp_infer *c, size_t i, enum cp_dtype dt,
                                const struct cp_shape *s)
{
    struct cp_tensor *t = cp_infer_out(c, i);
    if (!t || t->kind != CP_TENSOR_INTERMEDIATE)
        return CP_OK;
    if (s->rank > CP_MAX_RANK)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                "output '%s' would have rank %d; at most %d is supported", t->name,
                                s->rank, CP_MAX_RANK);
    if (dt != CP_DTYPE_UNDEFINED)
        t->dtype = dt;
    if (s->rank < 0) {
        /* keep the old shape */
    } else if (t->shape.rank != s->rank) {
        t->shape = *s;
    } else {
        for (int k = 0; k < s->rank; k++) {
            struct cp_dim *old = &t->shape.dims[k];
            const struct cp_dim *nw = &s->dims[k];
            if (nw->value >= 0)
                *old = *nw;
            else if (old->value < 0 && nw->sym)
                old->sym = nw->sym;
        }
    }
    /* Sizes come from the model (attributes, shape inputs, declared
     * shapes): refuse here, once for every op, what no tensor can hold. */
    char why[256];
    if (!size_fits(&t->shape, t->dtype, why, sizeof why))
        return cp_infer_fail(c, "output '%s' would be %s", t->name, why);
    return CP_OK;
}

/* ---- shapes ------------------------------------------------------------------------ */

void cp_infer_dim_set(struct cp_dim *dm, int64_t v)
{
    dm->value = v;
    dm->sym = NULL;
}

void cp_infer_dim_dyn(struct cp_dim *dm)
{
    dm->value = -1;
    dm->sym = NULL;
}

void cp_infer_shape_dyn(struct cp_shape *s, int rank)
{
    cp_shape_set_unknown(s);
    if (rank < 0)
        return;
    s->rank = rank;
    for (int k = 0; k < rank && k < CP_MAX_RANK; k++)
        cp_infer_dim_dyn(&s->dims[k]);
}

enum cp_status cp_infer_axis(struct cp_infer *c, int64_t axis, int rank, bool inclusive,
                             const char *what, int *out)
{
    int64_t hi = inclusive ? rank : rank - 1;
    if (axis < -(int64_t)rank || axis > hi)
        return cp_infer_fail(c, "%s %lld is out of range for rank %d", what, (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return CP_OK;
}

const char *cp_infer_fmt(const struct cp_shape *s, char buf[64])
{
    cp_shape_format(s, buf, 64);
    return buf;
}

static bool bcast_dim(struct cp_dim a, struct cp_dim b, struct cp_dim *out)
{
    if (a.value >= 0 && b.value >= 0) {
        if (a.value == b.value || b.value == 1)
            *out = a;
        else if (a.value == 1)
            *out = b;
        else
            return false;
    } else if (a.value == 1) {
        *out = b;
    } else if (b.value == 1) {
        *out = a;
    } else if (a.value >= 0) {
        *out = a; /* b is dynamic: it must be 1 or equal to a */
    } else if (b.value >= 0) {
        *out = b;
    } else if (a.sym && b.sym && strcmp(a.sym, b.sym) == 0) {
        *out = a;
    } else {
        /* Two unrelated dynamic dims: either may be 1, so neither name holds. */
        cp_infer_dim_dyn(out);
    }
    return true;
}

enum cp_status cp_infer_broadcast(struct cp_infer *c, const struct cp_shape *a, const char *na,
                                  const struct cp_shape *b, const char *nb, struct cp_shape *out)
{
    if (a->rank < 0 || b->rank < 0) {
        cp_shape_set_unknown(out);
        return CP_OK;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    struct cp_shape s;
    cp_infer_shape_dyn(&s, r);
    for (int k = 0; k < r; k++) {
        int ia = k - (r - a->rank), ib = k - (r - b->rank);
        struct cp_dim one = {1, NULL};
        struct cp_dim da = ia >= 0 ? a->dims[ia] : one;
        struct cp_dim db = ib >= 0 ? b->dims[ib] : one;
        if (!bcast_dim(da, db, &s.dims[k])) {
            char ba[64], bb[64];
            return cp_infer_fail(c,
                                 "cannot broadcast '%s' (%s) with '%s' (%s): dimension %d is "
                                 "%lld vs %lld",
                                 na ? na : "?", cp_infer_fmt(a, ba), nb ? nb : "?",
                                 cp_infer_fmt(b, bb), k, (long long)da.value, (long long)db.value);
        }
    }
    *out = s;
    return CP_OK;
}

void cp_infer_unravel(const struct cp_shape *s, int64_t flat, int64_t *coords)
{
    for (int k = s->rank - 1; k >= 0; k--) {
        int64_t d = s->dims[k].value;
        coords[k] = d > 0 ? flat % d : 0;
        flat = d > 0 ? flat / d : 0;
    }
}

int64_t cp_infer_ravel(const struct cp_shape *s, const int64_t *coords)
{
    int64_t flat = 0;
    for (int k = 0; k < s->rank; k++)
        flat = flat * s->dims[k].value + coords[k];
    return flat;
}

int64_t cp_infer_bcast_index(const struct cp_shape *out, const struct cp_shape *in, int64_t flat)
{
    int64_t oc[CP_MAX_RANK], ic[CP_MAX_RANK];
    cp_infer_unravel(out, flat, oc);
    int off = out->rank - in->rank;
    for (int k = 0; k < in->rank; k++)
        ic[k] = in->dims[k].value == 1 ? 0 : oc[k + off];
    return cp_infer_ravel(in, ic);
}

/* ---- attributes ------------------------------------------------------------------------- */

enum cp_status cp_infer_attr_ints(struct cp_infer *c, const char *name, int64_t *out, size_t cap,
                                  size_t *n, bool *present)
{
    const struct cp_attr *a = cp_node_attr(c->node, name);
    *n = 0;
    *present = false;
    if (!a)
        return CP_OK;
    if (a->type == CP_ATTR_INT) {
        if (cap < 1)
            return cp_infer_fail(c, "attribute '%s' has 1 entry, at most 0 expected", name);
        out[0] = a->i;
        *n = 1;
    } else if (a->type == CP_ATTR_INTS) {
        if (a->n > cap)
            return cp_infer_fail(c, "attribute '%s' has %zu entries, at most %zu expected", name,
                                 a->n, cap);
        if (a->n)
            memcpy(out, a->ints, a->n * sizeof *out);
        *n = a->n;
    } else {
        return cp_infer_fail(c, "attribute '%s' must be a list of integers", name);
    }
    *present = true;
    return CP_OK;
}

/* ---- the driver -------------------------------------------------------------------------------
 */

#define MANY 255

/* Input and output counts every opset from 11 on accepts (opset-specific
 * minimums, such as Slice's three inputs from opset 10, are checked by the
 * op itself). The first min_in inputs are required. */
struct op_rule {
    enum cp_status (*infer)(struct cp_infer *c);
    uint8_t min_in, max_in, min_out, max_out;
};

static const struct op_rule rules[] = {
    [CP_OP_UNKNOWN] = {NULL, 0, MANY, 0, MANY},
    [CP_OP_ADD] = {cp_infer_binary, 2, 2, 1, 1},
    [CP_OP_SUB] = {cp_infer_binary, 2, 2, 1, 1},
    [CP_OP_MUL] = {cp_infer_binary, 2, 2, 1, 1},
    [CP_OP_DIV] = {cp_infer_binary, 2, 2, 1, 1},
    [CP_OP_POW] = {cp_infer_binary, 2, 2, 1, 1},
    [CP_OP_SQRT] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_EXP] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_ERF] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_TANH] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_SIGMOID] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_RELU] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_LEAKY_RELU] = {cp_infer_unary, 1, 1, 1, 1},
    [CP_OP_CLIP] = {cp_infer_unary, 1, 3, 1, 1},
    [CP_OP_SOFTMAX] = {cp_infer_softmax, 1, 1, 1, 1},
    [CP_OP_REDUCE_MEAN] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_REDUCE_SUM] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_REDUCE_MAX] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_MATMUL] = {cp_infer_matmul, 2, 2, 1, 1},
    [CP_OP_GEMM] = {cp_infer_gemm, 2, 3, 1, 1},
    [CP_OP_CONV] = {cp_infer_conv, 2, 3, 1, 1},
    [CP_OP_CONV_TRANSPOSE] = {cp_infer_conv_transpose, 2, 3, 1, 1},
    [CP_OP_MAX_POOL] = {cp_infer_pool, 1, 1, 1, 2},
    [CP_OP_AVERAGE_POOL] = {cp_infer_pool, 1, 1, 1, 1},
    [CP_OP_GLOBAL_AVERAGE_POOL] = {cp_infer_global_pool, 1, 1, 1, 1},
    [CP_OP_BATCH_NORMALIZATION] = {cp_infer_batch_norm, 5, 5, 1, 5},
    [CP_OP_INSTANCE_NORMALIZATION] = {cp_infer_instance_norm, 3, 3, 1, 1},
    [CP_OP_LAYER_NORMALIZATION] = {cp_infer_layer_norm, 2, 3, 1, 3},
    [CP_OP_CONCAT] = {cp_infer_concat, 1, MANY, 1, 1},
    [CP_OP_SPLIT] = {cp_infer_split, 1, 2, 1, MANY},
    [CP_OP_SLICE] = {cp_infer_slice, 1, 5, 1, 1},
    [CP_OP_GATHER] = {cp_infer_gather, 2, 2, 1, 1},
    [CP_OP_RESHAPE] = {cp_infer_reshape, 2, 2, 1, 1},
    [CP_OP_FLATTEN] = {cp_infer_flatten, 1, 1, 1, 1},
    [CP_OP_TRANSPOSE] = {cp_infer_transpose, 1, 1, 1, 1},
    [CP_OP_SQUEEZE] = {cp_infer_squeeze, 1, 2, 1, 1},
    [CP_OP_UNSQUEEZE] = {cp_infer_unsqueeze, 1, 2, 1, 1},
    [CP_OP_SHAPE] = {cp_infer_shape_op, 1, 1, 1, 1},
    [CP_OP_EXPAND] = {cp_infer_expand, 2, 2, 1, 1},
    [CP_OP_WHERE] = {cp_infer_where, 3, 3, 1, 1},
    [CP_OP_EQUAL] = {cp_infer_binary, 2, 2, 1, 1},
    [CP_OP_CAST] = {cp_infer_cast, 1, 1, 1, 1},
    [CP_OP_CONSTANT] = {cp_infer_constant, 0, 0, 1, 1},
    [CP_OP_CONSTANT_OF_SHAPE] = {cp_infer_constant_of_shape, 1, 1, 1, 1},
    [CP_OP_IDENTITY] = {cp_infer_identity, 1, 1, 1, 1},
    [CP_OP_RESIZE] = {cp_infer_resize, 1, 4, 1, 1},
    [CP_OP_PAD] = {cp_infer_pad, 1, 4, 1, 1},
    [CP_OP_RANGE] = {cp_infer_range, 3, 3, 1, 1},
    [CP_OP_DROPOUT] = {cp_infer_dropout, 1, 3, 1, 2},
    [CP_OP_FUSED_CONV] = {cp_infer_fused_conv, 2, 4, 1, 1},
    [CP_OP_FUSED_MATMUL] = {cp_infer_fused_matmul, 2, 4, 1, 1},
    [CP_OP_GROUP_NORMALIZATION] = {cp_infer_group_norm, 3, 3, 1, 1},
    [CP_OP_GELU] = {cp_infer_gelu, 1, 1, 1, 1},
    [CP_OP_FUSED_ATTENTION] = {cp_infer_fused_attention, 3, 4, 1, 1},
    [CP_OP_TRANS_DATA] = {cp_infer_trans_data, 1, 1, 1, 1},
    /* ---- [elementwise] ---- */
    [CP_OP_ABS] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_NEG] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_RECIPROCAL] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_FLOOR] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_CEIL] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ROUND] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SIGN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_LOG] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SIN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_COS] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_TAN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ASIN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ACOS] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ATAN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SINH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_COSH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ASINH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ACOSH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ATANH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_IS_NAN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_IS_INF] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_NOT] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_BITWISE_NOT] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_ELU] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SELU] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_CELU] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_HARD_SIGMOID] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_HARD_SWISH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SOFTSIGN] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SOFTPLUS] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_THRESHOLDED_RELU] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_SHRINK] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_MISH] = {cp_infer_ew_unary, 1, 1, 1, 1},
    [CP_OP_PRELU] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_GREATER] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_LESS] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_GREATER_OR_EQUAL] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_LESS_OR_EQUAL] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_AND] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_OR] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_XOR] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_MOD] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_BIT_SHIFT] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_BITWISE_AND] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_BITWISE_OR] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_BITWISE_XOR] = {cp_infer_ew_binary, 2, 2, 1, 1},
    [CP_OP_MAX] = {cp_infer_ew_variadic, 1, MANY, 1, 1},
    [CP_OP_MIN] = {cp_infer_ew_variadic, 1, MANY, 1, 1},
    [CP_OP_SUM] = {cp_infer_ew_variadic, 1, MANY, 1, 1},
    [CP_OP_MEAN] = {cp_infer_ew_variadic, 1, MANY, 1, 1},
    [CP_OP_CAST_LIKE] = {cp_infer_cast_like, 2, 2, 1, 1},
    [CP_OP_RANDOM_NORMAL] = {cp_infer_random, 0, 0, 1, 1},
    [CP_OP_RANDOM_UNIFORM] = {cp_infer_random, 0, 0, 1, 1},
    [CP_OP_RANDOM_NORMAL_LIKE] = {cp_infer_random, 1, 1, 1, 1},
    [CP_OP_RANDOM_UNIFORM_LIKE] = {cp_infer_random, 1, 1, 1, 1},
    [CP_OP_BERNOULLI] = {cp_infer_random, 1, 1, 1, 1},
    [CP_OP_MULTINOMIAL] = {cp_infer_random, 1, 1, 1, 1},
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    [CP_OP_REDUCE_MIN] = {cp_infer_reduce_values, 1, 2, 1, 1},
    [CP_OP_REDUCE_PROD] = {cp_infer_reduce_values, 1, 2, 1, 1},
    [CP_OP_REDUCE_L1] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_REDUCE_L2] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_REDUCE_LOG_SUM] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_REDUCE_LOG_SUM_EXP] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_REDUCE_SUM_SQUARE] = {cp_infer_reduce, 1, 2, 1, 1},
    [CP_OP_ARG_MAX] = {cp_infer_argmax, 1, 1, 1, 1},
    [CP_OP_ARG_MIN] = {cp_infer_argmax, 1, 1, 1, 1},
    [CP_OP_TOP_K] = {cp_infer_topk, 1, 2, 2, 2},
    [CP_OP_CUM_SUM] = {cp_infer_same_shape, 2, 2, 1, 1},
    [CP_OP_HARDMAX] = {cp_infer_softmax, 1, 1, 1, 1},
    [CP_OP_LOG_SOFTMAX] = {cp_infer_softmax, 1, 1, 1, 1},
    [CP_OP_GATHER_ELEMENTS] = {cp_infer_gather_elements, 2, 2, 1, 1},
    [CP_OP_GATHER_ND] = {cp_infer_gather_nd, 2, 2, 1, 1},
    [CP_OP_SCATTER_ELEMENTS] = {cp_infer_scatter, 3, 3, 1, 1},
    [CP_OP_SCATTER_ND] = {cp_infer_scatter, 3, 3, 1, 1},
    [CP_OP_SCATTER] = {cp_infer_scatter, 3, 3, 1, 1},
    [CP_OP_COMPRESS] = {cp_infer_compress, 2, 2, 1, 1},
    [CP_OP_NON_ZERO] = {cp_infer_nonzero, 1, 1, 1, 1},
    [CP_OP_ONE_HOT] = {cp_infer_onehot, 3, 3, 1, 1},
    [CP_OP_TRILU] = {cp_infer_same_shape, 1, 2, 1, 1},
    [CP_OP_TILE] = {cp_infer_tile, 2, 2, 1, 1},
    [CP_OP_SIZE] = {cp_infer_size, 1, 1, 1, 1},
    [CP_OP_EYE_LIKE] = {cp_infer_eye_like, 1, 1, 1, 1},
    [CP_OP_NLL_LOSS] = {cp_infer_nll_loss, 2, 3, 1, 1},
    [CP_OP_SCE_LOSS] = {cp_infer_sce_loss, 2, 3, 1, 2},
    [CP_OP_REVERSE_SEQUENCE] = {cp_infer_reverse_sequence, 2, 2, 1, 1},
    [CP_OP_DET] = {cp_infer_det, 1, 1, 1, 1},
    [CP_OP_EINSUM] = {cp_infer_einsum, 1, 8, 1, 1},
    [CP_OP_UNIQUE] = {cp_infer_unique, 1, 1, 1, 4},
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    [CP_OP_LRN] = {cp_infer_lrn, 1, 1, 1, 1},
    [CP_OP_LP_NORMALIZATION] = {cp_infer_lp_normalization, 1, 1, 1, 1},
    [CP_OP_MEAN_VARIANCE_NORMALIZATION] = {cp_infer_mvn, 1, 1, 1, 1},
    [CP_OP_GLOBAL_MAX_POOL] = {cp_infer_global_max_pool, 1, 1, 1, 1},
    [CP_OP_LP_POOL] = {cp_infer_lp_pool, 1, 1, 1, 1},
    [CP_OP_GLOBAL_LP_POOL] = {cp_infer_global_pool, 1, 1, 1, 1},
    [CP_OP_MAX_UNPOOL] = {cp_infer_max_unpool, 2, 3, 1, 1},
    [CP_OP_DEPTH_TO_SPACE] = {cp_infer_depth_to_space, 1, 1, 1, 1},
    [CP_OP_SPACE_TO_DEPTH] = {cp_infer_space_to_depth, 1, 1, 1, 1},
    [CP_OP_GRID_SAMPLE] = {cp_infer_grid_sample, 2, 2, 1, 1},
    [CP_OP_ROI_ALIGN] = {cp_infer_roi_align, 3, 3, 1, 1},
    [CP_OP_NON_MAX_SUPPRESSION] = {cp_infer_nms, 2, 5, 1, 1},
    [CP_OP_MAX_ROI_POOL] = {cp_infer_max_roi_pool, 2, 2, 1, 1},
    [CP_OP_CENTER_CROP_PAD] = {cp_infer_center_crop_pad, 2, 2, 1, 1},
    [CP_OP_COL2IM] = {cp_infer_col2im, 3, 3, 1, 1},
    [CP_OP_AFFINE_GRID] = {cp_infer_affine_grid, 2, 2, 1, 1},
    [CP_OP_DEFORM_CONV] = {cp_infer_deform_conv, 3, 5, 1, 1},
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    [CP_OP_LSTM] = {cp_infer_lstm, 3, 8, 1, 3},
    [CP_OP_GRU] = {cp_infer_gru, 3, 6, 1, 2},
    [CP_OP_RNN] = {cp_infer_rnn, 3, 6, 1, 2},
    [CP_OP_DFT] = {cp_infer_dft, 1, 3, 1, 1},
    [CP_OP_STFT] = {cp_infer_stft, 2, 4, 1, 1},
    [CP_OP_HANN_WINDOW] = {cp_infer_window, 1, 1, 1, 1},
    [CP_OP_HAMMING_WINDOW] = {cp_infer_window, 1, 1, 1, 1},
    [CP_OP_BLACKMAN_WINDOW] = {cp_infer_window, 1, 1, 1, 1},
    [CP_OP_MEL_WEIGHT_MATRIX] = {cp_infer_mel_weight_matrix, 5, 5, 1, 1},
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    [CP_OP_IF] = {cp_infer_if, 1, MANY, 1, MANY},
    [CP_OP_LOOP] = {cp_infer_loop, 0, MANY, 1, MANY},
    [CP_OP_SCAN] = {cp_infer_scan, 0, MANY, 1, MANY},
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    [CP_OP_QUANTIZE_LINEAR] = {cp_infer_quantize_linear, 2, 3, 1, 1},
    [CP_OP_DEQUANTIZE_LINEAR] = {cp_infer_dequantize_linear, 2, 3, 1, 1},
    [CP_OP_QLINEAR_CONV] = {cp_infer_qlinear_conv, 8, 9, 1, 1},
    [CP_OP_QLINEAR_MATMUL] = {cp_infer_qlinear_matmul, 8, 8, 1, 1},
    [CP_OP_MATMUL_INTEGER] = {cp_infer_matmul_integer, 2, 4, 1, 1},
    [CP_OP_CONV_INTEGER] = {cp_infer_conv_integer, 2, 4, 1, 1},
    [CP_OP_DYNAMIC_QUANTIZE_LINEAR] = {cp_infer_dynamic_quantize_linear, 1, 1, 3, 3},
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
};
static_assert(sizeof rules / sizeof rules[0] == CP_OP_COUNT, "an inference rule per op");

static void count_text(char *buf, size_t n, unsigned lo, unsigned hi)
{
    if (lo == hi)
        snprintf(buf, n, "%u", lo);
    else if (hi == MANY)
        snprintf(buf, n, "at least %u", lo);
    else
        snprintf(buf, n, "%u to %u", lo, hi);
}

static enum cp_status check_arity(struct cp_infer *c, const struct op_rule *r)
{
    const struct cp_node *n = c->node;
    char want[32];
    if (n->n_inputs < r->min_in || n->n_inputs > r->max_in) {
        count_text(want, sizeof want, r->min_in, r->max_in);
        return cp_infer_fail(c, "expects %s input%s, got %zu", want, r->max_in == 1 ? "" : "s",
                             n->n_inputs);
    }
    for (size_t i = 0; i < r->min_in; i++)
        if (n->inputs[i] < 0)
            return cp_infer_fail(c, "required input %zu is missing", i);
    if (n->n_outputs < r->min_out || n->n_outputs > r->max_out) {
        count_text(want, sizeof want, r->min_out, r->max_out);
        return cp_infer_fail(c, "expects %s output%s, got %zu", want, r->max_out == 1 ? "" : "s",
                             n->n_outputs);
    }
    if (n->n_outputs > 0 && n->outputs[0] < 0)
        return cp_infer_fail(c, "output 0 is missing");
    return CP_OK;
}

/* Infer one node: its outputs' dtype, shape and (small) values. */
static enum cp_status infer_one(struct cp_infer *c, struct cp_node *n)
{
    c->node = n;
    /* Values from an earlier run may be stale once passes rewrote the
     * graph, or from the last run of a dynamic plan; recompute them. */
    for (size_t j = 0; j < n->n_outputs; j++) {
        struct cp_tensor *t = cp_graph_tensor(c->g, n->outputs[j]);
        if (t && t->kind == CP_TENSOR_INTERMEDIATE) {
            t->value = NULL;
            t->value_len = 0;
            if (n->outputs[j] >= 0 && (size_t)n->outputs[j] < c->n_vals) {
                struct cp_svals *sv = &c->vals[n->outputs[j]];
                free(sv->e);
                *sv = (struct cp_svals){0};
            }
        }
    }
    /* At run time the plan runs the taken branch (the loop's iterations) and
     * takes the shapes they give. */
    if (c->run_data && (n->op == CP_OP_IF || n->op == CP_OP_LOOP))
        return CP_OK;
    const struct op_rule *r = (unsigned)n->op < CP_OP_COUNT ? &rules[n->op] : &rules[0];
    if (!r->infer)
        return CP_OK; /* unknown op: keep what the model declared */
    enum cp_status st = check_arity(c, r);
    return st == CP_OK ? r->infer(c) : st;
}

/* Declared input shapes (and --input_shape) are untrusted too. */
static enum cp_status check_input_sizes(const struct cp_graph *g, struct cp_diag *d)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        char why[256];
        if (!size_fits(&t->shape, t->dtype, why, sizeof why))
            return cp_diag_set(d, CP_ERR_INVALID, "input '%s' is %s", t->name, why);
    }
    return CP_OK;
}

/* A context for g with room for a value per tensor. */
static enum cp_status infer_begin(struct cp_infer *c, struct cp_graph *g, struct cp_diag *d)
{
    *c = (struct cp_infer){.g = g, .d = d, .opset = cp_graph_opset(g)};
    if (c->opset <= 0)
        c->opset = 17;
    c->n_vals = cp_graph_n_tensors(g);
    c->vals = cp_calloc(c->n_vals + 1, sizeof *c->vals);
    return c->vals ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory inferring shapes");
}

enum cp_status cp_graph_infer(struct cp_graph *g, struct cp_diag *d)
{
    struct cp_infer c;
    int32_t *order = NULL;
    size_t n_order = 0;
    enum cp_status st = cp_graph_topo_order(g, &order, &n_order, d);
    if (st != CP_OK)
        return st;
    if ((st = infer_begin(&c, g, d)) != CP_OK)
        goto out_free;
    st = cp_infer_fill_initializer_values(&c);
    if (st != CP_OK)
        goto out_free;
    if ((st = check_input_sizes(g, d)) != CP_OK)
        goto out_free;
    for (size_t k = 0; k < n_order && st == CP_OK; k++)
        st = infer_one(&c, cp_graph_node(g, order[k]));
out_free:
    cp_infer_free_vals(&c);
    free(order);
    return st;
}

/* ---- stepwise, at run time ----------------------------------------------------------------------
 */

struct cp_infer_steps {
    struct cp_infer c;
};

enum cp_status cp_graph_infer_open(struct cp_graph *g, const void *const *run_data,
                                   struct cp_infer_steps **out, struct cp_diag *d)
{
    *out = NULL;
    struct cp_infer_steps *s = cp_calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory inferring shapes");
    enum cp_status st = infer_begin(&s->c, g, d);
    if (st != CP_OK) {
        free(s);
        return st;
    }
    s->c.run_data = run_data;
    s->c.private_values = true;
    *out = s;
    return CP_OK;
}

enum cp_status cp_graph_infer_node(struct cp_infer_steps *s, struct cp_node *n)
{
    return infer_one(&s->c, n);
}

void cp_graph_infer_close(struct cp_infer_steps *s)
{
    if (!s)
        return;
    cp_infer_free_vals(&s->c);
    free(s);
}
