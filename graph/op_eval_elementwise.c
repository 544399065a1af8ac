/* What the elementwise family's ops compute (see op_eval_elementwise.h). */
#include "graph/op_eval_elementwise.h"
#include "graph/op_eval.h"

#include <math.h>
#include <string.h>

/* ---- parameters ------------------------------------------------------------------ */

void cp_ew_params_of(const struct cp_node *n, struct cp_ew_params *p)
{
    memset(p, 0, sizeof *p);
    double alpha = 1.0, beta = 0.0;
    switch (n->op) {
    case CP_OP_SELU:
        alpha = 1.67326319217681884765625;
        p->gamma = cp_node_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case CP_OP_HARD_SIGMOID:
        alpha = 0.2;
        beta = 0.5;
        break;
    default:
        break;
    }
    const struct cp_attr *a = cp_node_attr(n, "alpha");
    p->alpha = a && a->type == CP_ATTR_FLOAT ? a->f : alpha;
    const struct cp_attr *b = cp_node_attr(n, "beta");
    p->beta = b && b->type == CP_ATTR_FLOAT ? b->f : beta;
    p->lambd = cp_node_attr_float(n, "lambd", 0.5f);
    p->bias = cp_node_attr_float(n, "bias", 0.0f);
    p->fmod = cp_node_attr_int(n, "fmod", 0) != 0;
    p->left = strcmp(cp_node_attr_string(n, "direction", ""), "LEFT") == 0;
    p->detect_neg = cp_node_attr_int(n, "detect_negative", 1) != 0;
    p->detect_pos = cp_node_attr_int(n, "detect_positive", 1) != 0;
}

/* ---- kinds and dtypes --------------------------------------------------------------- */

bool cp_ew_is_unary(enum cp_op op)
{
    return (op >= CP_OP_ABS && op <= CP_OP_MISH);
}

bool cp_ew_is_binary(enum cp_op op)
{
    return op >= CP_OP_PRELU && op <= CP_OP_BITWISE_XOR;
}

bool cp_ew_is_variadic(enum cp_op op)
{
    return op >= CP_OP_MAX && op <= CP_OP_MEAN;
}

bool cp_ew_is_random(enum cp_op op)
{
    return op >= CP_OP_RANDOM_NORMAL && op <= CP_OP_MULTINOMIAL;
}

static bool is_float(enum cp_dtype t)
{
    return cp_dtype_is_float(t);
}

static bool is_signed_int(enum cp_dtype t)
{
    return t == CP_DTYPE_I8 || t == CP_DTYPE_I16 || t == CP_DTYPE_I32 || t == CP_DTYPE_I64;
}

static bool is_unsigned_int(enum cp_dtype t)
{
    return t == CP_DTYPE_U8 || t == CP_DTYPE_U16 || t == CP_DTYPE_U32 || t == CP_DTYPE_U64;
}

static bool is_int(enum cp_dtype t)
{
    return is_signed_int(t) || is_unsigned_int(t);
}

static bool is_numeric(enum cp_dtype t)
{
    return is_float(t) || is_int(t);
}

enum cp_dtype cp_ew_out_dtype(enum cp_op op, enum cp_dtype x)
{
    bool ok;
    switch (op) {
    case CP_OP_ABS:
    case CP_OP_SIGN:
    case CP_OP_SHRINK:
    case CP_OP_PRELU:
    case CP_OP_MAX:
    case CP_OP_MIN:
        ok = is_numeric(x);
        break;
    case CP_OP_NEG:
        ok = is_float(x) || is_signed_int(x);
        break;
    case CP_OP_MOD:
        ok = is_numeric(x);
        break;
    case CP_OP_IS_NAN:
    case CP_OP_IS_INF:
        return is_float(x) ? CP_DTYPE_BOOL : CP_DTYPE_UNDEFINED;
    case CP_OP_NOT:
    case CP_OP_AND:
    case CP_OP_OR:
    case CP_OP_XOR:
        ok = x == CP_DTYPE_BOOL;
        break;
    case CP_OP_BITWISE_NOT:
    case CP_OP_BITWISE_AND:
    case CP_OP_BITWISE_OR:
    case CP_OP_BITWISE_XOR:
        ok = is_int(x);
        break;
    case CP_OP_BIT_SHIFT:
        ok = is_unsigned_int(x);
        break;
    case CP_OP_GREATER:
    case CP_OP_LESS:
    case CP_OP_GREATER_OR_EQUAL:
    case CP_OP_LESS_OR_EQUAL:
        return is_numeric(x) ? CP_DTYPE_BOOL : CP_DTYPE_UNDEFINED;
    default:
        /* The float-only math ops and activations, Sum and Mean. */
        ok = is_float(x) && (cp_ew_is_unary(op) || op == CP_OP_SUM || op == CP_OP_MEAN);
        break;
    }
    return ok ? x : CP_DTYPE_UNDEFINED;
}

/* ---- unary ------------------------------------------------------------------------- */

static double softplus(double x)
{
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

double cp_ew_unary_f64(enum cp_op op, const struct cp_ew_params *p, double x)
{
    switch (op) {
    case CP_OP_ABS:
        return fabs(x);
    case CP_OP_NEG:
        return -x;
    case CP_OP_RECIPROCAL:
        return 1.0 / x;
    case CP_OP_FLOOR:
        return floor(x);
    case CP_OP_CEIL:
        return ceil(x);
    case CP_OP_ROUND:
        return nearbyint(x); /* the default rounding mode: half to even */
    case CP_OP_SIGN:
        return isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case CP_OP_LOG:
        return log(x);
    case CP_OP_SIN:
        return sin(x);
    case CP_OP_COS:
        return cos(x);
    case CP_OP_TAN:
        return tan(x);
    case CP_OP_ASIN:
        return asin(x);
    case CP_OP_ACOS:
        return acos(x);
    case CP_OP_ATAN:
        return atan(x);
    case CP_OP_SINH:
        return sinh(x);
    case CP_OP_COSH:
        return cosh(x);
    case CP_OP_ASINH:
        return asinh(x);
    case CP_OP_ACOSH:
        return acosh(x);
    case CP_OP_ATANH:
        return atanh(x);
    case CP_OP_IS_NAN:
        return isnan(x) ? 1.0 : 0.0;
    case CP_OP_IS_INF:
        return (isinf(x) && ((x > 0 && p->detect_pos) || (x < 0 && p->detect_neg))) ? 1.0 : 0.0;
    case CP_OP_ELU:
        return x < 0 ? p->alpha * (exp(x) - 1.0) : x;
    case CP_OP_SELU:
        return p->gamma * (x <= 0 ? p->alpha * exp(x) - p->alpha : x);
    case CP_OP_CELU:
        return fmax(0.0, x) + fmin(0.0, p->alpha * (exp(x / p->alpha) - 1.0));
    case CP_OP_HARD_SIGMOID:
        return fmax(0.0, fmin(1.0, p->alpha * x + p->beta));
    case CP_OP_HARD_SWISH:
        return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case CP_OP_SOFTSIGN:
        return x / (1.0 + fabs(x));
    case CP_OP_SOFTPLUS:
        return softplus(x);
    case CP_OP_THRESHOLDED_RELU:
        return x > p->alpha ? x : 0.0;
    case CP_OP_SHRINK:
        return x < -p->lambd ? x + p->bias : x > p->lambd ? x - p->bias : 0.0;
    case CP_OP_MISH:
        return x * tanh(softplus(x));
    default:
        return x;
    }
}

/* The integer forms: Abs, Neg, Sign, BitwiseNot, Not, Shrink. */
static int64_t unary_i64(enum cp_op op, const struct cp_ew_params *p, enum cp_dtype t, int64_t x)
{
    switch (op) {
    case CP_OP_ABS:
        return is_unsigned_int(t) || x >= 0 ? x : (int64_t)(0 - (uint64_t)x);
    case CP_OP_NEG:
        return (int64_t)(0 - (uint64_t)x);
    case CP_OP_SIGN:
        if (t == CP_DTYPE_U64)
            return x != 0;
        return x > 0 ? 1 : x < 0 ? -1 : 0;
    case CP_OP_BITWISE_NOT:
    case CP_OP_NOT:
        return op == CP_OP_NOT ? !x : ~x;
    case CP_OP_SHRINK: {
        double v = t == CP_DTYPE_U64 ? (double)(uint64_t)x : (double)x;
        double r = v < -p->lambd ? v + p->bias : v > p->lambd ? v - p->bias : 0.0;
        return (int64_t)r;
    }
    default:
        return x;
    }
}

void cp_ew_unary(enum cp_op op, const struct cp_ew_params *p, enum cp_dtype xt, const void *x,
                 void *y, int64_t n)
{
    enum cp_dtype yt = cp_ew_out_dtype(op, xt);
    if (is_float(xt)) {
        for (int64_t i = 0; i < n; i++)
            cp_eval_store_f64(y, yt, i, cp_ew_unary_f64(op, p, cp_elem_load_f64(x, xt, i)));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        cp_eval_store_i64(y, yt, i, unary_i64(op, p, xt, cp_elem_load_i64(x, xt, i)));
}

/* ---- binary ------------------------------------------------------------------------ */

static double binary_f64(enum cp_op op, const struct cp_ew_params *p, double a, double b)
{
    switch (op) {
    case CP_OP_PRELU:
        return a < 0 ? a * b : a;
    case CP_OP_GREATER:
        return a > b;
    case CP_OP_LESS:
        return a < b;
    case CP_OP_GREATER_OR_EQUAL:
        return a >= b;
    case CP_OP_LESS_OR_EQUAL:
        return a <= b;
    case CP_OP_MOD: {
        double r = fmod(a, b);
        /* fmod 0 (refused for floats at inference) would follow the divisor. */
        if (!p->fmod && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        return r;
    }
    case CP_OP_MAX:
        return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case CP_OP_MIN:
        return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case CP_OP_SUM:
    case CP_OP_MEAN:
        return a + b;
    default:
        return 0.0;
    }
}

static int64_t binary_u64(enum cp_op op, const struct cp_ew_params *p, uint64_t a, uint64_t b,
                          unsigned bits)
{
    switch (op) {
    case CP_OP_GREATER:
        return a > b;
    case CP_OP_LESS:
        return a < b;
    case CP_OP_GREATER_OR_EQUAL:
        return a >= b;
    case CP_OP_LESS_OR_EQUAL:
        return a <= b;
    case CP_OP_MOD:
        return b ? (int64_t)(a % b) : 0;
    case CP_OP_BIT_SHIFT:
        if (b >= bits)
            return 0;
        return (int64_t)(p->left ? a << b : a >> b);
    case CP_OP_MAX:
        return (int64_t)(a > b ? a : b);
    case CP_OP_MIN:
        return (int64_t)(a < b ? a : b);
    case CP_OP_PRELU:
        return (int64_t)a;
    default:
        return 0;
    }
}

static int64_t binary_i64(enum cp_op op, const struct cp_ew_params *p, int64_t a, int64_t b)
{
    switch (op) {
    case CP_OP_PRELU:
        return a < 0 ? (int64_t)((uint64_t)a * (uint64_t)b) : a;
    case CP_OP_GREATER:
        return a > b;
    case CP_OP_LESS:
        return a < b;
    case CP_OP_GREATER_OR_EQUAL:
        return a >= b;
    case CP_OP_LESS_OR_EQUAL:
        return a <= b;
    case CP_OP_AND:
        return a && b;
    case CP_OP_OR:
        return a || b;
    case CP_OP_XOR:
        return (a != 0) != (b != 0);
    case CP_OP_MOD: {
        if (b == 0)
            return 0;
        if (b == -1)
            return 0; /* also INT64_MIN % -1, which would trap */
        int64_t r = a % b;
        if (!p->fmod && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        return r;
    }
    case CP_OP_BITWISE_AND:
        return a & b;
    case CP_OP_BITWISE_OR:
        return a | b;
    case CP_OP_BITWISE_XOR:
        return a ^ b;
    case CP_OP_MAX:
        return a > b ? a : b;
    case CP_OP_MIN:
        return a < b ? a : b;
    default:
        return 0;
    }
}

/* One row: y[j] = a[oa + j*sa] op b[ob + j*sb]. */
static void binary_row(enum cp_op op, const struct cp_ew_params *p, enum cp_dtype at,
                       const void *ad, int64_t oa, int64_t sa, enum cp_dtype bt, const void *bd,
                       int64_t ob, int64_t sb, enum cp_dtype yt, void *yd, int64_t oy, int64_t n)
{
    if (is_float(at)) {
        for (int64_t j = 0; j < n; j++) {
            double a = cp_elem_load_f64(ad, at, oa + j * sa);
            double b = cp_elem_load_f64(bd, bt, ob + j * sb);
            cp_eval_store_f64(yd, yt, oy + j, binary_f64(op, p, a, b));
        }
    } else if (is_unsigned_int(at) && op != CP_OP_BITWISE_AND && op != CP_OP_BITWISE_OR &&
               op != CP_OP_BITWISE_XOR) {
        unsigned bits = (unsigned)(8 * cp_dtype_size(at));
        for (int64_t j = 0; j < n; j++) {
            uint64_t a = (uint64_t)cp_elem_load_i64(ad, at, oa + j * sa);
            uint64_t b = (uint64_t)cp_elem_load_i64(bd, bt, ob + j * sb);
            if (bits < 64) {
                a &= (1ULL << bits) - 1;
                b &= (1ULL << bits) - 1;
            }
            cp_eval_store_i64(yd, yt, oy + j, binary_u64(op, p, a, b, bits));
        }
    } else {
        for (int64_t j = 0; j < n; j++) {
            int64_t a = cp_elem_load_i64(ad, at, oa + j * sa);
            int64_t b = cp_elem_load_i64(bd, bt, ob + j * sb);
            cp_eval_store_i64(yd, yt, oy + j, binary_i64(op, p, a, b));
        }
    }
}

void cp_ew_binary(enum cp_op op, const struct cp_ew_params *p, const struct cp_tensor *ta,
                  const void *ad, const struct cp_tensor *tb, const void *bd,
                  const struct cp_tensor *ty, void *yd)
{
    struct cp_walk w;
    cp_walk_init(&w, &ty->shape, 3);
    cp_walk_bcast(&w, 0, &ty->shape);
    cp_walk_bcast(&w, 1, &ta->shape);
    cp_walk_bcast(&w, 2, &tb->shape);
    cp_walk_finish(&w);
    struct cp_walk_pos pos;
    cp_walk_start(&w, &pos);
    for (int64_t r = 0; r < w.rows; r++) {
        binary_row(op, p, ta->dtype, ad, pos.off[1], w.inner_stride[1], tb->dtype, bd, pos.off[2],
                   w.inner_stride[2], ty->dtype, yd, pos.off[0], w.inner);
        cp_walk_next(&w, &pos);
    }
}

void cp_ew_prelu_slope_shape(int64_t opset, const struct cp_shape *x, const struct cp_shape *slope,
                             struct cp_shape *out)
{
    *out = *slope;
    if (opset >= 7 || slope->rank != 1 || x->rank < 3 || slope->dims[0].value < 0 ||
        slope->dims[0].value != x->dims[1].value ||
        slope->dims[0].value == x->dims[x->rank - 1].value)
        return;
    out->rank = x->rank - 1;
    out->dims[0] = slope->dims[0];
    for (int k = 1; k < out->rank; k++)
        out->dims[k] = (struct cp_dim){1, NULL};
}

/* ---- variadic -------------------------------------------------------------------- */

void cp_ew_variadic(enum cp_op op, size_t n, const struct cp_tensor *const *x,
                    const void *const *xd, const struct cp_tensor *y, void *yd)
{
    struct cp_ew_params p;
    memset(&p, 0, sizeof p);
    /* y = x0 broadcast, then y = y op xk in input order. */
    cp_eval_expand(x[0], xd[0], y, yd);
    for (size_t k = 1; k < n; k++)
        cp_ew_binary(op, &p, y, yd, x[k], xd[k], y, yd);
    if (op == CP_OP_MEAN && n > 1) {
        int64_t count = cp_shape_numel(&y->shape);
        for (int64_t i = 0; i < count; i++)
            cp_eval_store_f64(yd, y->dtype, i, cp_elem_load_f64(yd, y->dtype, i) / (double)n);
    }
}

/* ---- random generators ---------------------------------------------------------------- */

void cp_ew_rng_of(const struct cp_node *n, struct cp_ew_rng *r)
{
    const struct cp_attr *a = cp_node_attr(n, "seed");
    if (a && a->type == CP_ATTR_FLOAT) {
        double s = a->f;
        uint64_t bits;
        memcpy(&bits, &s, sizeof bits);
        r->state = bits;
    } else {
        r->state = CP_EW_DEFAULT_SEED;
    }
}

uint64_t cp_ew_rng_next(struct cp_ew_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double cp_ew_rng_uniform(struct cp_ew_rng *r)
{
    return (double)(cp_ew_rng_next(r) >> 11) * 0x1.0p-53;
}

double cp_ew_rng_normal(struct cp_ew_rng *r)
{
    double u1 = cp_ew_rng_uniform(r), u2 = cp_ew_rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

void cp_ew_random_fill(const struct cp_node *n, enum cp_dtype dt, int64_t count, void *y)
{
    struct cp_ew_rng r;
    cp_ew_rng_of(n, &r);
    bool normal = n->op == CP_OP_RANDOM_NORMAL || n->op == CP_OP_RANDOM_NORMAL_LIKE;
    double p0 = normal ? cp_node_attr_float(n, "mean", 0.0f) : cp_node_attr_float(n, "low", 0.0f);
    double p1 = normal ? cp_node_attr_float(n, "scale", 1.0f) : cp_node_attr_float(n, "high", 1.0f);
    for (int64_t i = 0; i < count; i++) {
        double v = normal ? p0 + p1 * cp_ew_rng_normal(&r) : p0 + (p1 - p0) * cp_ew_rng_uniform(&r);
        cp_eval_store_f64(y, dt, i, v);
    }
}

void cp_ew_bernoulli(const struct cp_node *n, enum cp_dtype pt, const void *p, enum cp_dtype yt,
                     void *y, int64_t count)
{
    struct cp_ew_rng r;
    cp_ew_rng_of(n, &r);
    for (int64_t i = 0; i < count; i++)
        cp_eval_store_i64(y, yt, i, cp_ew_rng_uniform(&r) < cp_elem_load_f64(p, pt, i));
}

void cp_ew_multinomial(const struct cp_node *n, enum cp_dtype xt, const void *x, int64_t batch,
                       int64_t classes, enum cp_dtype yt, void *y, int64_t samples)
{
    struct cp_ew_rng r;
    cp_ew_rng_of(n, &r);
    for (int64_t b = 0; b < batch; b++) {
        double mx = -INFINITY, total = 0.0;
        for (int64_t c = 0; c < classes; c++)
            mx = fmax(mx, cp_elem_load_f64(x, xt, b * classes + c));
        for (int64_t c = 0; c < classes; c++)
            total += exp(cp_elem_load_f64(x, xt, b * classes + c) - mx);
        for (int64_t s = 0; s < samples; s++) {
            double u = cp_ew_rng_uniform(&r) * total, acc = 0.0;
            int64_t pick = classes - 1;
            for (int64_t c = 0; c < classes; c++) {
                acc += exp(cp_elem_load_f64(x, xt, b * classes + c) - mx);
                if (u < acc) {
                    pick = c;
                    break;
                }
            }
            cp_eval_store_i64(y, yt, b * samples + s, pick);
        }
    }
}
