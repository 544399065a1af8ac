/* Reference kernels for elementwise ops: the binary arithmetic ops and Equal
 * with numpy broadcasting, the unary activations, Clip, Where and Cast.
 *
 * Floats compute in f32. Integer arithmetic runs in int64 and wraps into
 * the output dtype (two's complement, as onnxruntime does); integer Div
 * truncates toward zero like C, and a zero divisor gives 0 instead of a
 * trap. */
#include "runner/cpu/ref_util.h"

#include <float.h>
#include <math.h>

/* ---- binary ops ------------------------------------------------------------------ */

static bool is_arith_dtype(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || cp_ref_dtype_is_int(dt);
}

static bool binary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, 0), *b = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    if (!a || !b)
        return false;
    switch (n->op) {
    case CP_OP_POW:
        /* The exponent may have its own type (opset 12). */
        return (a->dtype == CP_DTYPE_F32 || a->dtype == CP_DTYPE_I32 || a->dtype == CP_DTYPE_I64) &&
               (b->dtype == CP_DTYPE_F32 || b->dtype == CP_DTYPE_I32 || b->dtype == CP_DTYPE_I64) &&
               y->dtype == a->dtype;
    case CP_OP_EQUAL:
        return a->dtype == b->dtype && (is_arith_dtype(a->dtype) || a->dtype == CP_DTYPE_BOOL) &&
               y->dtype == CP_DTYPE_BOOL;
    default:
        return a->dtype == b->dtype && is_arith_dtype(a->dtype) && y->dtype == a->dtype;
    }
}

static void binary_f32_row(enum cp_op op, float *y, const float *a, int64_t sa, const float *b,
                           int64_t sb, int64_t n)
{
    switch (op) {
    case CP_OP_ADD:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j * sa] + b[j * sb];
        break;
    case CP_OP_SUB:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j * sa] - b[j * sb];
        break;
    case CP_OP_MUL:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j * sa] * b[j * sb];
        break;
    case CP_OP_DIV:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j * sa] / b[j * sb];
        break;
    case CP_OP_POW:
        for (int64_t j = 0; j < n; j++)
            y[j] = powf(a[j * sa], b[j * sb]);
        break;
    default:
        break;
    }
}

static int64_t int_binary(enum cp_op op, int64_t a, int64_t b)
{
    switch (op) {
    case CP_OP_ADD:
        return (int64_t)((uint64_t)a + (uint64_t)b);
    case CP_OP_SUB:
        return (int64_t)((uint64_t)a - (uint64_t)b);
    case CP_OP_MUL:
        return (int64_t)((uint64_t)a * (uint64_t)b);
    case CP_OP_DIV:
        if (b == 0)
            return 0;
        if (a == INT64_MIN && b == -1)
            return INT64_MIN;
        return a / b;
    case CP_OP_EQUAL:
        return a == b;
    default:
        return 0;
    }
}

static enum cp_status binary_run(struct cp_kexec *k)
{
    enum cp_op op = k->node->op;
    const struct cp_tensor *ta = k->in[0], *tb = k->in[1], *ty = k->out[0];
    struct cp_ref_walk w;
    cp_ref_walk_init(&w, &ty->shape, 3);
    cp_ref_walk_bcast(&w, 0, &ty->shape);
    cp_ref_walk_bcast(&w, 1, &ta->shape);
    cp_ref_walk_bcast(&w, 2, &tb->shape);
    cp_ref_walk_finish(&w);
    int64_t sa = w.inner_stride[1], sb = w.inner_stride[2];
    bool f32 = ta->dtype == CP_DTYPE_F32 && tb->dtype == CP_DTYPE_F32;
    struct cp_ref_pos p;
    cp_ref_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        int64_t oy = p.off[0], oa = p.off[1], ob = p.off[2];
        if (f32 && op != CP_OP_EQUAL) {
            binary_f32_row(op, (float *)k->out_data[0] + oy, (const float *)k->in_data[0] + oa, sa,
                           (const float *)k->in_data[1] + ob, sb, w.inner);
        } else if (op == CP_OP_POW) {
            for (int64_t j = 0; j < w.inner; j++) {
                double x = cp_ref_load_f64(k->in_data[0], ta->dtype, oa + j * sa);
                double e = cp_ref_load_f64(k->in_data[1], tb->dtype, ob + j * sb);
                cp_ref_store_f64(k->out_data[0], ty->dtype, oy + j, pow(x, e));
            }
        } else if (op == CP_OP_EQUAL && ta->dtype == CP_DTYPE_F32) {
            const float *a = (const float *)k->in_data[0] + oa;
            const float *b = (const float *)k->in_data[1] + ob;
            uint8_t *y = (uint8_t *)k->out_data[0] + oy;
            for (int64_t j = 0; j < w.inner; j++)
                y[j] = a[j * sa] == b[j * sb];
        } else {
            for (int64_t j = 0; j < w.inner; j++) {
                int64_t a = cp_ref_load_i64(k->in_data[0], ta->dtype, oa + j * sa);
                int64_t b = cp_ref_load_i64(k->in_data[1], tb->dtype, ob + j * sb);
                cp_ref_store_i64(k->out_data[0], ty->dtype, oy + j, int_binary(op, a, b));
            }
        }
        cp_ref_walk_next(&w, &p);
    }
    return CP_OK;
}

#define BINARY_KERNEL(var, opv) CP_REF_KERNEL(var, opv, binary_supports, NULL, binary_run)

BINARY_KERNEL(cp_ref_add, CP_OP_ADD);
BINARY_KERNEL(cp_ref_sub, CP_OP_SUB);
BINARY_KERNEL(cp_ref_mul, CP_OP_MUL);
BINARY_KERNEL(cp_ref_div, CP_OP_DIV);
BINARY_KERNEL(cp_ref_pow, CP_OP_POW);
BINARY_KERNEL(cp_ref_equal, CP_OP_EQUAL);

/* ---- unary ops ----------------------------------------------------------------------- */

static bool same_shape_and_dtype(const struct cp_tensor *x, const struct cp_tensor *y)
{
    return x && y && x->dtype == y->dtype && cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
}

static bool unary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!same_shape_and_dtype(x, y))
        return false;
    if (n->op == CP_OP_RELU)
        return x->dtype == CP_DTYPE_F32 || x->dtype == CP_DTYPE_I8 || x->dtype == CP_DTYPE_I32 ||
               x->dtype == CP_DTYPE_I64;
    return x->dtype == CP_DTYPE_F32;
}

/* Sigmoid without overflow: exp of a non-positive number only. */
static float sigmoid(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static enum cp_status unary_run(struct cp_kexec *k)
{
    int64_t n = cp_ref_numel(&k->in[0]->shape);
    enum cp_dtype dt = k->in[0]->dtype;
    if (dt != CP_DTYPE_F32) { /* integer Relu */
        for (int64_t i = 0; i < n; i++) {
            int64_t v = cp_ref_load_i64(k->in_data[0], dt, i);
            cp_ref_store_i64(k->out_data[0], dt, i, v < 0 ? 0 : v);
        }
        return CP_OK;
    }
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    float alpha = cp_node_attr_float(k->node, "alpha", 0.01f);
    switch (k->node->op) {
    case CP_OP_SQRT:
        for (int64_t i = 0; i < n; i++)
            y[i] = sqrtf(x[i]);
        break;
    case CP_OP_EXP:
        for (int64_t i = 0; i < n; i++)
            y[i] = expf(x[i]);
        break;
    case CP_OP_ERF:
        for (int64_t i = 0; i < n; i++)
            y[i] = erff(x[i]);
        break;
    case CP_OP_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    case CP_OP_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = sigmoid(x[i]);
        break;
    case CP_OP_RELU:
        /* NaN passes through, as numpy's maximum does. */
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case CP_OP_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? alpha * x[i] : x[i];
        break;
    default:
        return CP_ERR_INTERNAL;
    }
    return CP_OK;
}

#define UNARY_KERNEL(var, opv) CP_REF_KERNEL(var, opv, unary_supports, NULL, unary_run)

UNARY_KERNEL(cp_ref_sqrt, CP_OP_SQRT);
UNARY_KERNEL(cp_ref_exp, CP_OP_EXP);
UNARY_KERNEL(cp_ref_erf, CP_OP_ERF);
UNARY_KERNEL(cp_ref_tanh, CP_OP_TANH);
UNARY_KERNEL(cp_ref_sigmoid, CP_OP_SIGMOID);
UNARY_KERNEL(cp_ref_relu, CP_OP_RELU);
UNARY_KERNEL(cp_ref_leaky_relu, CP_OP_LEAKY_RELU);

/* ---- Clip ------------------------------------------------------------------------------ */

/* Bounds: attributes `min`/`max` before opset 11, optional scalar inputs 1
 * and 2 from 11. */
static bool clip_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!same_shape_and_dtype(x, y) || !is_arith_dtype(x->dtype))
        return false;
    for (size_t i = 1; i < n->n_inputs; i++) {
        const struct cp_tensor *b = cp_ref_in(g, n, i);
        if (b && (b->dtype != x->dtype || cp_ref_numel(&b->shape) > 1))
            return false;
    }
    return true;
}

static bool clip_bound(const struct cp_kexec *k, size_t i, double *v)
{
    if (i >= k->node->n_inputs || !k->in[i] || cp_ref_numel(&k->in[i]->shape) < 1)
        return false;
    *v = cp_ref_load_f64(k->in_data[i], k->in[i]->dtype, 0);
    return true;
}

static enum cp_status clip_run(struct cp_kexec *k)
{
    enum cp_dtype dt = k->in[0]->dtype;
    int64_t n = cp_ref_numel(&k->in[0]->shape);
    bool old = cp_ref_opset(k->g) < 11;
    double lo = old ? cp_node_attr_float(k->node, "min", -FLT_MAX) : -INFINITY;
    double hi = old ? cp_node_attr_float(k->node, "max", FLT_MAX) : INFINITY;
    bool has_lo = clip_bound(k, 1, &lo), has_hi = clip_bound(k, 2, &hi);
    if (dt == CP_DTYPE_F32) {
        const float *x = k->in_data[0];
        float *y = k->out_data[0];
        float flo = (float)lo, fhi = (float)hi;
        /* Comparisons rather than fmin/fmax so that NaN passes through; when
         * min > max every value becomes max, as the spec says. */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] < flo ? flo : x[i];
            y[i] = v > fhi ? fhi : v;
        }
        return CP_OK;
    }
    int64_t ilo = has_lo ? cp_ref_load_i64(k->in_data[1], dt, 0) : INT64_MIN;
    int64_t ihi = has_hi ? cp_ref_load_i64(k->in_data[2], dt, 0) : INT64_MAX;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = cp_ref_load_i64(k->in_data[0], dt, i);
        v = v < ilo ? ilo : v;
        cp_ref_store_i64(k->out_data[0], dt, i, v > ihi ? ihi : v);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_clip, CP_OP_CLIP, clip_supports, NULL, clip_run);

/* ---- Where ------------------------------------------------------------------------------ */

static bool where_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 3 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *c = cp_ref_in(g, n, 0), *x = cp_ref_in(g, n, 1),
                           *y = cp_ref_in(g, n, 2), *o = cp_ref_out(g, n, 0);
    return c && x && y && c->dtype == CP_DTYPE_BOOL && x->dtype == y->dtype && o->dtype == x->dtype;
}

static enum cp_status where_run(struct cp_kexec *k)
{
    const struct cp_tensor *to = k->out[0];
    size_t es = cp_dtype_size(to->dtype);
    struct cp_ref_walk w;
    cp_ref_walk_init(&w, &to->shape, 4);
    cp_ref_walk_bcast(&w, 0, &to->shape);
    for (int i = 0; i < 3; i++)
        cp_ref_walk_bcast(&w, i + 1, &k->in[i]->shape);
    cp_ref_walk_finish(&w);
    const uint8_t *cond = k->in_data[0];
    const unsigned char *x = k->in_data[1], *y = k->in_data[2];
    unsigned char *out = k->out_data[0];
    struct cp_ref_pos p;
    cp_ref_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        for (int64_t j = 0; j < w.inner; j++) {
            bool c = cond[p.off[1] + j * w.inner_stride[1]] != 0;
            const unsigned char *src = c ? x + (p.off[2] + j * w.inner_stride[2]) * (int64_t)es
                                         : y + (p.off[3] + j * w.inner_stride[3]) * (int64_t)es;
            cp_ref_copy_elem(out + (p.off[0] + j) * (int64_t)es, src, es);
        }
        cp_ref_walk_next(&w, &p);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_where, CP_OP_WHERE, where_supports, NULL, where_run);

/* ---- Cast --------------------------------------------------------------------------------- */

static bool cast_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    const struct cp_attr *to = cp_node_attr(n, "to");
    return x && to && to->type == CP_ATTR_INT && cp_dtype_from_onnx((int)to->i) == y->dtype &&
           y->dtype != CP_DTYPE_UNDEFINED && cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
}

/* Floats convert through double (to integers: truncation toward zero,
 * saturating, NaN to 0; to bool: != 0); integers and bools through int64
 * (to narrower integers: wrap). */
static enum cp_status cast_run(struct cp_kexec *k)
{
    enum cp_dtype from = k->in[0]->dtype, to = k->out[0]->dtype;
    int64_t n = cp_ref_numel(&k->in[0]->shape);
    if (from == to) {
        cp_ref_copy(k->out_data[0], k->in_data[0], (size_t)n * cp_dtype_size(to));
        return CP_OK;
    }
    if (cp_dtype_is_float(from)) {
        for (int64_t i = 0; i < n; i++)
            cp_ref_store_f64(k->out_data[0], to, i, cp_ref_load_f64(k->in_data[0], from, i));
    } else {
        for (int64_t i = 0; i < n; i++)
            cp_ref_store_i64(k->out_data[0], to, i, cp_ref_load_i64(k->in_data[0], from, i));
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_cast, CP_OP_CAST, cast_supports, NULL, cast_run);
