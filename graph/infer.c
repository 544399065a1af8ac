/* Shape and dtype inference: the driver and the helpers the per-op files
 * share (see infer_internal.h for how the pieces fit). */
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

/* ---- values --------------------------------------------------------------------------------- */

bool cp_infer_dtype_has_value(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_BOOL || dt == CP_DTYPE_I8 ||
           dt == CP_DTYPE_U8;
}

/* The public tensor->value is promised for these only. */
static bool dtype_has_public_value(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_BOOL;
}

int64_t cp_infer_wrap(enum cp_dtype dt, int64_t v)
{
    switch (dt) {
    case CP_DTYPE_I32:
        return (int32_t)(uint32_t)(uint64_t)v;
    case CP_DTYPE_I8:
        return (int8_t)(uint8_t)(uint64_t)v;
    case CP_DTYPE_U8:
        return (uint8_t)(uint64_t)v;
    case CP_DTYPE_BOOL:
        return v != 0;
    default:
        return v;
    }
}

/* Data may sit unaligned in a mapped file: read through memcpy. */
static int64_t read_int(const void *data, enum cp_dtype dt, int64_t i)
{
    const unsigned char *p = data;
    switch (dt) {
    case CP_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    case CP_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    case CP_DTYPE_I8:
        return (int8_t)p[i];
    case CP_DTYPE_U8:
        return p[i];
    case CP_DTYPE_BOOL:
        return p[i] != 0;
    default:
        return 0;
    }
}

static double half_to_double(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = man / 1024.0 / 16384.0; /* subnormal: man * 2^-24 */
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = (1.0 + man / 1024.0) * (double)((int64_t)1 << exp) / 32768.0;
    return sign ? -v : v;
}

static double read_double(const void *data, enum cp_dtype dt, int64_t i)
{
    const unsigned char *p = data;
    switch (dt) {
    case CP_DTYPE_F32: {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    case CP_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        return half_to_double(h);
    }
    case CP_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        uint32_t bits = (uint32_t)h << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case CP_DTYPE_F64: {
        double v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    default:
        return (double)read_int(data, dt, i);
    }
}

/* Element count of initializer-like data, or -1 when it does not add up. */
static int64_t data_numel(const struct cp_tensor *t)
{
    size_t nb;
    if (!cp_shape_nbytes(&t->shape, t->dtype, &nb) || nb != t->nbytes || (!t->data && nb != 0))
        return -1;
    return cp_shape_numel(&t->shape);
}

/* The tensor holding t's constant bytes: t itself for an initializer, the
 * `value` attribute of a live Constant node that produces t; else NULL. */
static const struct cp_tensor *const_source(const struct cp_infer *c, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    if (!T)
        return NULL;
    if (T->kind == CP_TENSOR_INITIALIZER)
        return data_numel(T) >= 0 ? T : NULL;
    const struct cp_node *n = cp_graph_node(c->g, T->producer);
    if (!n || n->dead || n->op != CP_OP_CONSTANT || n->n_outputs < 1 || n->outputs[0] != t)
        return NULL;
    const struct cp_attr *a = cp_node_attr(n, "value");
    if (!a || a->type != CP_ATTR_TENSOR)
        return NULL;
    const struct cp_tensor *V = cp_graph_tensor(c->g, a->tensor);
    return V && data_numel(V) >= 0 ? V : NULL;
}

/* The run-time bytes of intermediate t (stepwise inference), or NULL. */
static const void *run_bytes(const struct cp_infer *c, int32_t t)
{
    if (!c->run_data || t < 0 || (size_t)t >= c->n_vals || !c->run_data[t])
        return NULL;
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    return T->kind != CP_TENSOR_INITIALIZER && cp_shape_is_static(&T->shape) ? c->run_data[t]
                                                                             : NULL;
}

bool cp_infer_count_nonzero(struct cp_infer *c, int32_t t, int64_t *count)
{
    *count = 0;
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    const void *rd = run_bytes(c, t);
    if (!rd) {
        const struct cp_tensor *src = const_source(c, t);
        if (src && src->data) {
            rd = src->data;
            T = src;
        }
    }
    if (rd) {
        *count = cp_elem_count_nonzero(rd, T->dtype, cp_shape_numel(&T->shape), NULL, 0);
        return true;
    }
    double v[CP_VALUE_MAX_ELEMS];
    int64_t n;
    if (!cp_shape_is_static(&T->shape) || !cp_infer_doubles(c, t, v, CP_VALUE_MAX_ELEMS, &n) ||
        n != cp_shape_numel(&T->shape))
        return false;
    for (int64_t k = 0; k < n; k++)
        *count += v[k] != 0.0;
    return true;
}

static void load_vals(struct cp_infer *c, int32_t t, struct cp_svals *sv)
{
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    if (T->value && T->value_len >= 0 && T->value_len <= CP_VALUE_MAX_ELEMS) {
        sv->e = cp_calloc((size_t)T->value_len, sizeof *sv->e);
        if (!sv->e)
            return;
        for (int64_t k = 0; k < T->value_len; k++)
            sv->e[k] = (struct cp_sval){T->value[k], NULL, true};
        sv->n = T->value_len;
        return;
    }
    const void *data = T->data;
    int64_t numel;
    if (run_bytes(c, t)) {
        data = c->run_data[t];
        numel = cp_shape_numel(&T->shape);
    } else if (T->kind == CP_TENSOR_INITIALIZER) {
        numel = data_numel(T);
    } else {
        return;
    }
    if (!cp_infer_dtype_has_value(T->dtype))
        return;
    if (numel < 0 || numel > CP_VALUE_MAX_ELEMS)
        return;
    sv->e = cp_calloc((size_t)numel, sizeof *sv->e);
    if (!sv->e)
        return;
    for (int64_t k = 0; k < numel; k++)
        sv->e[k] = (struct cp_sval){read_int(data, T->dtype, k), NULL, true};
    sv->n = numel;
}

const struct cp_sval *cp_infer_vals(struct cp_infer *c, int32_t t, int64_t *n)
{
    *n = 0;
    if (t < 0 || (size_t)t >= c->n_vals)
        return NULL;
    struct cp_svals *sv = &c->vals[t];
    if (!sv->loaded) {
        sv->loaded = true;
        load_vals(c, t, sv);
    }
    *n = sv->n;
    return sv->e;
}

bool cp_infer_ints(struct cp_infer *c, int32_t t, int64_t *out, int64_t cap, int64_t *n)
{
    int64_t len;
    const struct cp_sval *e = cp_infer_vals(c, t, &len);
    *n = 0;
    if (!e || len > cap)
        return false;
    for (int64_t k = 0; k < len; k++) {
        if (!e[k].known)
            return false;
        out[k] = e[k].v;
    }
    *n = len;
    return true;
}

bool cp_infer_doubles(struct cp_infer *c, int32_t t, double *out, int64_t cap, int64_t *n)
{
    *n = 0;
    const void *rd = run_bytes(c, t);
    if (rd) {
        const struct cp_tensor *R = cp_graph_tensor(c->g, t);
        int64_t numel = cp_shape_numel(&R->shape);
        if (numel > cap)
            return false;
        for (int64_t k = 0; k < numel; k++)
            out[k] = read_double(rd, R->dtype, k);
        *n = numel;
        return true;
    }
    const struct cp_tensor *src = t >= 0 ? const_source(c, t) : NULL;
    if (src) {
        int64_t numel = data_numel(src);
        if (numel > cap)
            return false;
        for (int64_t k = 0; k < numel; k++)
            out[k] = read_double(src->data, src->dtype, k);
        *n = numel;
        return true;
    }
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    const struct cp_node *p = T ? cp_graph_node(c->g, T->producer) : NULL;
    if (p && !p->dead && p->op == CP_OP_CONSTANT) {
        const struct cp_attr *a = cp_node_attr(p, "value_float");
        if (a && a->type == CP_ATTR_FLOAT && cap >= 1) {
            out[0] = a->f;
            *n = 1;
            return true;
        }
        a = cp_node_attr(p, "value_floats");
        if (a && a->type == CP_ATTR_FLOATS && (int64_t)a->n <= cap) {
            for (size_t k = 0; k < a->n; k++)
                out[k] = a->floats[k];
            *n = (int64_t)a->n;
            return true;
        }
    }
    int64_t iv[CP_VALUE_MAX_ELEMS], len;
    /* A Cast of known integers to a float type (window functions compute
     * Range's limit that way): the integers, as that type holds them. */
    if (p && !p->dead && p->op == CP_OP_CAST && cp_dtype_is_float(T->dtype) && p->n_inputs == 1 &&
        cp_infer_ints(c, p->inputs[0], iv, CP_VALUE_MAX_ELEMS, &len) && len <= cap) {
        for (int64_t k = 0; k < len; k++) {
            float f = (float)iv[k];
            out[k] = T->dtype == CP_DTYPE_F64 ? (double)iv[k] : (double)f;
        }
        *n = len;
        return true;
    }
    if (!cp_infer_ints(c, t, iv, CP_VALUE_MAX_ELEMS, &len) || len > cap)
        return false;
    for (int64_t k = 0; k < len; k++)
        out[k] = (double)iv[k];
    *n = len;
    return true;
}

bool cp_infer_out_small(const struct cp_infer *c, size_t i, int64_t *numel)
{
    const struct cp_tensor *t = cp_infer_out(c, i);
    *numel = -1;
    if (!t || t->kind != CP_TENSOR_INTERMEDIATE || !cp_infer_dtype_has_value(t->dtype))
        return false;
    int64_t n = cp_shape_numel(&t->shape);
    if (n < 0 || n > CP_VALUE_MAX_ELEMS)
        return false;
    *numel = n;
    return true;
}

enum cp_status cp_infer_set_vals(struct cp_infer *c, size_t i, struct cp_sval *e, int64_t n)
{
    int64_t numel;
    if (!e || !cp_infer_out_small(c, i, &numel) || numel != n) {
        free(e);
        return CP_OK;
    }
    int32_t ti = c->node->outputs[i];
    struct cp_tensor *t = cp_graph_tensor(c->g, ti);
    bool all = true;
    for (int64_t k = 0; k < n; k++) {
        if (e[k].known)
            e[k].v = cp_infer_wrap(t->dtype, e[k].v);
        else
            all = false;
    }
    struct cp_svals *sv = &c->vals[ti];
    free(sv->e);
    sv->e = e;
    sv->n = n;
    sv->loaded = true;
    if (!all || !dtype_has_public_value(t->dtype) || c->private_values)
        return CP_OK;
    int64_t *v = cp_graph_alloc(c->g, (size_t)(n ? n : 1) * sizeof *v);
    if (!v)
        return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory storing the value of '%s'",
                                t->name);
    for (int64_t k = 0; k < n; k++)
        v[k] = e[k].v;
    t->value = v;
    t->value_len = n;
    return CP_OK;
}

enum cp_status cp_infer_copy_vals(struct cp_infer *c, size_t i, const struct cp_sval *src,
                                  const int64_t *map, int64_t n)
{
    struct cp_sval *e = cp_calloc((size_t)n, sizeof *e);
    if (!e)
        return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
    for (int64_t k = 0; k < n; k++)
        e[k] = src[map ? map[k] : k];
    return cp_infer_set_vals(c, i, e, n);
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

static void free_vals(struct cp_infer *c)
{
    if (c->vals)
        for (size_t i = 0; i < c->n_vals; i++)
            free(c->vals[i].e);
    free(c->vals);
    c->vals = NULL;
}

/* Small integer initializers get their public value up front, so every
 * consumer (here and in later passes) sees it the same way. */
static enum cp_status fill_initializer_values(struct cp_infer *c)
{
    size_t nt = cp_graph_n_tensors(c->g);
    for (size_t i = 0; i < nt; i++) {
        struct cp_tensor *t = cp_graph_tensor(c->g, (int32_t)i);
        if (t->kind != CP_TENSOR_INITIALIZER || t->value || !dtype_has_public_value(t->dtype))
            continue;
        int64_t n;
        const struct cp_sval *e = cp_infer_vals(c, (int32_t)i, &n);
        if (!e)
            continue;
        int64_t *v = cp_graph_alloc(c->g, (size_t)(n ? n : 1) * sizeof *v);
        if (!v)
            return cp_diag_set(c->d, CP_ERR_NOMEM, "out of memory reading '%s'", t->name);
        for (int64_t k = 0; k < n; k++)
            v[k] = e[k].v;
        t->value = v;
        t->value_len = n;
    }
    return CP_OK;
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

enum cp_status cp_graph_infer(struct cp_graph *g, struct cp_diag *d)
{
    struct cp_infer c = {.g = g, .d = d, .opset = cp_graph_opset(g)};
    if (c.opset <= 0)
        c.opset = 17;
    int32_t *order = NULL;
    size_t n_order = 0;
    enum cp_status st = cp_graph_topo_order(g, &order, &n_order, d);
    if (st != CP_OK)
        return st;
    c.n_vals = cp_graph_n_tensors(g);
    c.vals = cp_calloc(c.n_vals + 1, sizeof *c.vals);
    if (!c.vals) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory inferring shapes");
        goto out_free;
    }
    st = fill_initializer_values(&c);
    if (st != CP_OK)
        goto out_free;
    if ((st = check_input_sizes(g, d)) != CP_OK)
        goto out_free;
    for (size_t k = 0; k < n_order && st == CP_OK; k++)
        st = infer_one(&c, cp_graph_node(g, order[k]));
out_free:
    free_vals(&c);
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
    s->c = (struct cp_infer){
        .g = g, .d = d, .opset = cp_graph_opset(g), .run_data = run_data, .private_values = true};
    if (s->c.opset <= 0)
        s->c.opset = 17;
    s->c.n_vals = cp_graph_n_tensors(g);
    s->c.vals = cp_calloc(s->c.n_vals + 1, sizeof *s->c.vals);
    if (!s->c.vals) {
        free(s);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory inferring shapes");
    }
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
    free_vals(&s->c);
    free(s);
}
