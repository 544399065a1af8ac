/* What the elementwise, cast and reduction ops compute, and the strided
 * walk (see op_eval.h). Data movement is in op_eval_move.c. */
#include "graph/op_eval_elementwise.h"
#include "graph/op_eval_internal.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

static int64_t numel_of(const struct cp_shape *s)
{
    return cp_eval_span_(s, 0, s->rank);
}

static bool dtype_is_int(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_I64;
}

/* ---- element stores -------------------------------------------------------------- */

/* Truncation, as ONNX's reference (and its test data, through 1.12) casts
 * to bfloat16; NaN stays a quiet NaN. The one conversion where ops differ
 * from graph/elem.c's round-to-nearest. */
uint16_t cp_eval_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)(x >> 16);
}

void cp_eval_store_f64(void *data, enum cp_dtype dt, int64_t i, double v)
{
    if (dt == CP_DTYPE_BF16)
        ((uint16_t *)data)[i] = cp_eval_f32_to_bf16((float)v);
    else
        cp_elem_store_f64(data, dt, i, v);
}

void cp_eval_store_i64(void *data, enum cp_dtype dt, int64_t i, int64_t v)
{
    if (dt == CP_DTYPE_BF16)
        cp_eval_store_f64(data, dt, i, (double)v);
    else
        cp_elem_store_i64(data, dt, i, v);
}

/* ---- unary ops ------------------------------------------------------------------------ */

/* exp of a non-positive number only. */
float cp_eval_sigmoid(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

bool cp_eval_unary(enum cp_op op, float alpha, enum cp_dtype dt, int64_t n, const void *xv,
                   void *yv)
{
    if (dt != CP_DTYPE_F32) { /* integer Relu */
        if (op != CP_OP_RELU || !dtype_is_int(dt))
            return false;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = cp_elem_load_i64(xv, dt, i);
            cp_eval_store_i64(yv, dt, i, v < 0 ? 0 : v);
        }
        return true;
    }
    const float *x = xv;
    float *y = yv;
    switch (op) {
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
            y[i] = cp_eval_sigmoid(x[i]);
        break;
    case CP_OP_RELU:
        /* NaN and -0 pass through, as numpy's maximum lets them. */
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case CP_OP_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? alpha * x[i] : x[i];
        break;
    default:
        return false;
    }
    return true;
}

float cp_eval_unary_f32(enum cp_op op, float x, float alpha)
{
    float y = x;
    cp_eval_unary(op, alpha, CP_DTYPE_F32, 1, &x, &y);
    return y;
}

void cp_eval_clip_f32(int64_t n, const float *x, float lo, float hi, float *y)
{
    /* Comparisons rather than fmin/fmax so that NaN passes through; when
     * lo > hi every value becomes hi. */
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] < lo ? lo : x[i];
        y[i] = v > hi ? hi : v;
    }
}

void cp_eval_clip_int(enum cp_dtype dt, int64_t n, const void *x, int64_t lo, int64_t hi, void *y)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t v = cp_elem_load_i64(x, dt, i);
        v = v < lo ? lo : v;
        cp_eval_store_i64(y, dt, i, v > hi ? hi : v);
    }
}

/* ---- binary ops --------------------------------------------------------------------- */

/* One row of an f32 binary op: y[j] = a[j * sa] op b[j * sb]. One loop per
 * op, so that each is a plain loop. */
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

static double binary_f64(enum cp_op op, double a, double b)
{
    switch (op) {
    case CP_OP_ADD:
        return a + b;
    case CP_OP_SUB:
        return a - b;
    case CP_OP_MUL:
        return a * b;
    case CP_OP_DIV:
        return a / b;
    default:
        return pow(a, b);
    }
}

float cp_eval_binary_f32(enum cp_op op, float a, float b)
{
    float y = 0.0f;
    binary_f32_row(op, &y, &a, 0, &b, 0, 1);
    return y;
}

int64_t cp_eval_binary_i64(enum cp_op op, int64_t a, int64_t b)
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

void cp_eval_binary(enum cp_op op, const struct cp_tensor *ta, const void *ad,
                    const struct cp_tensor *tb, const void *bd, const struct cp_tensor *ty,
                    void *yd)
{
    struct cp_walk w;
    cp_walk_init(&w, &ty->shape, 3);
    cp_walk_bcast(&w, 0, &ty->shape);
    cp_walk_bcast(&w, 1, &ta->shape);
    cp_walk_bcast(&w, 2, &tb->shape);
    cp_walk_finish(&w);
    int64_t sa = w.inner_stride[1], sb = w.inner_stride[2];
    bool f32 = ta->dtype == CP_DTYPE_F32 && tb->dtype == CP_DTYPE_F32;
    struct cp_walk_pos p;
    cp_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        int64_t oy = p.off[0], oa = p.off[1], ob = p.off[2];
        if (f32 && op != CP_OP_EQUAL) {
            binary_f32_row(op, (float *)yd + oy, (const float *)ad + oa, sa, (const float *)bd + ob,
                           sb, w.inner);
        } else if (op == CP_OP_POW) {
            for (int64_t j = 0; j < w.inner; j++) {
                double x = cp_elem_load_f64(ad, ta->dtype, oa + j * sa);
                double e = cp_elem_load_f64(bd, tb->dtype, ob + j * sb);
                cp_eval_store_f64(yd, ty->dtype, oy + j, pow(x, e));
            }
        } else if (op != CP_OP_POW && ta->dtype != CP_DTYPE_F32 && cp_dtype_is_float(ta->dtype)) {
            /* f64, f16, bf16: in double, which rounds +-*\/ of the narrower
             * types exactly as their own arithmetic would. */
            for (int64_t j = 0; j < w.inner; j++) {
                double a = cp_elem_load_f64(ad, ta->dtype, oa + j * sa);
                double b = cp_elem_load_f64(bd, tb->dtype, ob + j * sb);
                if (op == CP_OP_EQUAL)
                    ((uint8_t *)yd)[oy + j] = a == b;
                else
                    cp_eval_store_f64(yd, ty->dtype, oy + j, binary_f64(op, a, b));
            }
        } else if (op == CP_OP_EQUAL && ta->dtype == CP_DTYPE_F32) {
            const float *a = (const float *)ad + oa;
            const float *b = (const float *)bd + ob;
            uint8_t *y = (uint8_t *)yd + oy;
            for (int64_t j = 0; j < w.inner; j++)
                y[j] = a[j * sa] == b[j * sb];
        } else if (cp_dtype_is_float(ta->dtype)) {
            /* f64, f16, bf16: in double, rounded once into the output. */
            for (int64_t j = 0; j < w.inner; j++) {
                double a = cp_elem_load_f64(ad, ta->dtype, oa + j * sa);
                double b = cp_elem_load_f64(bd, tb->dtype, ob + j * sb);
                double v = op == CP_OP_ADD   ? a + b
                           : op == CP_OP_SUB ? a - b
                           : op == CP_OP_MUL ? a * b
                           : op == CP_OP_DIV ? a / b
                                             : (double)(a == b);
                cp_eval_store_f64(yd, ty->dtype, oy + j, v);
            }
        } else if (ta->dtype == CP_DTYPE_U64 && op == CP_OP_DIV) {
            for (int64_t j = 0; j < w.inner; j++) {
                uint64_t a = (uint64_t)cp_elem_load_i64(ad, ta->dtype, oa + j * sa);
                uint64_t b = (uint64_t)cp_elem_load_i64(bd, tb->dtype, ob + j * sb);
                cp_eval_store_i64(yd, ty->dtype, oy + j, b ? (int64_t)(a / b) : 0);
            }
        } else {
            for (int64_t j = 0; j < w.inner; j++) {
                int64_t a = cp_elem_load_i64(ad, ta->dtype, oa + j * sa);
                int64_t b = cp_elem_load_i64(bd, tb->dtype, ob + j * sb);
                cp_eval_store_i64(yd, ty->dtype, oy + j, cp_eval_binary_i64(op, a, b));
            }
        }
        cp_walk_next(&w, &p);
    }
}

/* ---- Where and Cast ------------------------------------------------------------------ */

void cp_eval_where(const struct cp_tensor *tc, const void *cd, const struct cp_tensor *tx,
                   const void *xd, const struct cp_tensor *ty, const void *yd,
                   const struct cp_tensor *to, void *od)
{
    size_t es = cp_dtype_size(to->dtype);
    struct cp_walk w;
    cp_walk_init(&w, &to->shape, 4);
    cp_walk_bcast(&w, 0, &to->shape);
    cp_walk_bcast(&w, 1, &tc->shape);
    cp_walk_bcast(&w, 2, &tx->shape);
    cp_walk_bcast(&w, 3, &ty->shape);
    cp_walk_finish(&w);
    const uint8_t *cond = cd;
    const unsigned char *x = xd, *y = yd;
    unsigned char *out = od;
    struct cp_walk_pos p;
    cp_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        for (int64_t j = 0; j < w.inner; j++) {
            bool c = cond[p.off[1] + j * w.inner_stride[1]] != 0;
            const unsigned char *src = c ? x + (p.off[2] + j * w.inner_stride[2]) * (int64_t)es
                                         : y + (p.off[3] + j * w.inner_stride[3]) * (int64_t)es;
            cp_eval_copy_elem(out + (p.off[0] + j) * (int64_t)es, src, es);
        }
        cp_walk_next(&w, &p);
    }
}

void cp_eval_cast(enum cp_dtype from, const void *x, enum cp_dtype to, void *y, int64_t n)
{
    if (from == to) {
        size_t bytes = (size_t)n * cp_dtype_size(to);
        if (bytes && x != y)
            memmove(y, x, bytes);
        return;
    }
    if (cp_dtype_is_float(from)) {
        for (int64_t i = 0; i < n; i++)
            cp_eval_store_f64(y, to, i, cp_elem_load_f64(x, from, i));
    } else {
        for (int64_t i = 0; i < n; i++)
            cp_eval_store_i64(y, to, i, cp_elem_load_i64(x, from, i));
    }
}

/* ---- reductions and Softmax ------------------------------------------------------------ */

/* One pass over x in memory order, adding each element into the
 * accumulator of its output element: any set of axes costs the same. */
bool cp_eval_reduce_axes_from_input(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t from = n->op == CP_OP_REDUCE_SUM ? 13 : 18;
    int64_t opset = cp_graph_opset(g) > 0 ? cp_graph_opset(g) : 17;
    return n->n_inputs > 1 && n->inputs[1] >= 0 && (opset >= from || !cp_node_attr(n, "axes"));
}

bool cp_eval_reduce_mask(const struct cp_graph *g, const struct cp_node *n, const void *axes_data,
                         int rank, bool mask[CP_MAX_RANK], bool *noop)
{
    const int64_t *attr_axes = NULL;
    int64_t count = 0;
    const struct cp_tensor *at = NULL;
    if (cp_eval_reduce_axes_from_input(g, n)) {
        at = cp_graph_tensor(g, n->inputs[1]);
        count = cp_shape_numel(&at->shape);
        if (count < 0)
            return false;
    } else {
        const struct cp_attr *a = cp_node_attr(n, "axes");
        if (a && a->type != CP_ATTR_INTS)
            return false;
        attr_axes = a ? a->ints : NULL;
        count = a ? (int64_t)a->n : 0;
    }
    *noop = false;
    for (int k = 0; k < CP_MAX_RANK; k++)
        mask[k] = count == 0;
    if (count == 0) {
        *noop = cp_node_attr_int(n, "noop_with_empty_axes", 0) != 0;
        return true;
    }
    if (at && !axes_data)
        return true; /* checked at run time */
    for (int64_t i = 0; i < count; i++) {
        int64_t v = at ? cp_elem_load_i64(axes_data, at->dtype, i) : attr_axes[i];
        int ax;
        if (!cp_eval_axis(v, rank, &ax) || mask[ax])
            return false;
        mask[ax] = true;
    }
    return true;
}

bool cp_eval_reduce(enum cp_op op, const struct cp_tensor *x, const void *xd, const bool *mask,
                    const struct cp_tensor *y, void *yd, void *accv)
{
    int rank = x->shape.rank;
    int64_t nx = numel_of(&x->shape), ny = numel_of(&y->shape);
    /* Output offsets of input positions: the keepdims strides of y, zero
     * along reduced axes. */
    struct cp_shape kept = x->shape;
    for (int a = 0; a < rank; a++)
        if (mask[a])
            kept.dims[a].value = 1;
    if (numel_of(&kept) != ny)
        return false;
    struct cp_walk w;
    cp_walk_init(&w, &x->shape, 2);
    cp_walk_bcast(&w, 0, &x->shape);
    cp_walk_bcast(&w, 1, &kept);
    cp_walk_finish(&w);
    int64_t count = ny > 0 ? nx / ny : 0;
    struct cp_walk_pos p;
    if (x->dtype == CP_DTYPE_F32) {
        double *acc = accv;
        const float *xf = xd;
        for (int64_t i = 0; i < ny; i++)
            acc[i] = op == CP_OP_REDUCE_MAX ? -INFINITY : op == CP_OP_REDUCE_MIN ? INFINITY : 0.0;
        cp_walk_start(&w, &p);
        for (int64_t r = 0; r < w.rows; r++) {
            const float *row = xf + p.off[0];
            double *arow = acc + p.off[1];
            int64_t s = w.inner_stride[1];
            if (op == CP_OP_REDUCE_MAX) {
                for (int64_t j = 0; j < w.inner; j++) {
                    double v = row[j];
                    if (isnan(v) || v > arow[j * s])
                        arow[j * s] = v;
                }
            } else if (op == CP_OP_REDUCE_MIN) {
                for (int64_t j = 0; j < w.inner; j++) {
                    double v = row[j];
                    if (isnan(v) || v < arow[j * s])
                        arow[j * s] = v;
                }
            } else {
                for (int64_t j = 0; j < w.inner; j++)
                    arow[j * s] += row[j];
            }
            cp_walk_next(&w, &p);
        }
        float *yf = yd;
        for (int64_t i = 0; i < ny; i++)
            yf[i] = (float)(op == CP_OP_REDUCE_MEAN ? acc[i] / (double)count : acc[i]);
        return true;
    }
    int64_t *acc = accv;
    int64_t lowest = x->dtype == CP_DTYPE_I32 ? INT32_MIN : INT64_MIN;
    int64_t highest = x->dtype == CP_DTYPE_I32 ? INT32_MAX : INT64_MAX;
    for (int64_t i = 0; i < ny; i++)
        acc[i] = op == CP_OP_REDUCE_MAX ? lowest : op == CP_OP_REDUCE_MIN ? highest : 0;
    cp_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        for (int64_t j = 0; j < w.inner; j++) {
            int64_t v = cp_elem_load_i64(xd, x->dtype, p.off[0] + j);
            int64_t *a = &acc[p.off[1] + j * w.inner_stride[1]];
            if (op == CP_OP_REDUCE_MAX)
                *a = v > *a ? v : *a;
            else if (op == CP_OP_REDUCE_MIN)
                *a = v < *a ? v : *a;
            else
                *a = (int64_t)((uint64_t)*a + (uint64_t)v);
        }
        cp_walk_next(&w, &p);
    }
    for (int64_t i = 0; i < ny; i++)
        cp_eval_store_i64(yd, y->dtype, i, acc[i]);
    return true;
}

void cp_eval_softmax(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const float *xs = x + o * len * inner + i;
            float *ys = y + o * len * inner + i;
            float m = -INFINITY;
            for (int64_t l = 0; l < len; l++)
                m = xs[l * inner] > m ? xs[l * inner] : m;
            double sum = 0.0;
            for (int64_t l = 0; l < len; l++) {
                float e = expf(xs[l * inner] - m);
                ys[l * inner] = e;
                sum += e;
            }
            for (int64_t l = 0; l < len; l++)
                ys[l * inner] = (float)(ys[l * inner] / sum);
        }
    }
}

/* ---- the fused activation ------------------------------------------------------------- */

static const char *const act_names[] = {
    [CP_ACT_NONE] = "",
    [CP_ACT_RELU] = "Relu",
    [CP_ACT_LEAKY_RELU] = "LeakyRelu",
    [CP_ACT_CLIP] = "Clip",
    [CP_ACT_SIGMOID] = "Sigmoid",
    [CP_ACT_SILU] = "SiLU",
    [CP_ACT_GELU] = "Gelu",
    [CP_ACT_GELU_TANH] = "GeluTanh",
    [CP_ACT_HARD_SWISH] = "HardSwish",
    [CP_ACT_HARD_SIGMOID] = "HardSigmoid",
    [CP_ACT_ELU] = "Elu",
    [CP_ACT_SOFTPLUS] = "Softplus",
    [CP_ACT_MISH] = "Mish",
    [CP_ACT_TANH] = "Tanh",
};
static_assert(sizeof act_names / sizeof *act_names == CP_ACT_BAD, "activation name table");

const char *cp_act_name(enum cp_act_kind k)
{
    return (unsigned)k < CP_ACT_BAD ? act_names[k] : NULL;
}

enum cp_act_kind cp_act_from_name(const char *name)
{
    for (int i = 0; i < CP_ACT_BAD; i++)
        if (strcmp(name, act_names[i]) == 0)
            return (enum cp_act_kind)i;
    return CP_ACT_BAD;
}

struct cp_act cp_act_of(const struct cp_node *n)
{
    struct cp_act a = {cp_act_from_name(cp_node_attr_string(n, "activation", "")), 0.0f, 0.0f};
    if (a.kind == CP_ACT_LEAKY_RELU)
        a.alpha = cp_node_attr_float(n, "activation_alpha", 0.01f);
    if (a.kind == CP_ACT_CLIP) {
        a.alpha = cp_node_attr_float(n, "activation_alpha", -FLT_MAX);
        a.beta = cp_node_attr_float(n, "activation_beta", FLT_MAX);
    }
    if (a.kind == CP_ACT_HARD_SIGMOID) {
        a.alpha = cp_node_attr_float(n, "activation_alpha", 0.2f);
        a.beta = cp_node_attr_float(n, "activation_beta", 0.5f);
    }
    if (a.kind == CP_ACT_ELU)
        a.alpha = cp_node_attr_float(n, "activation_alpha", 1.0f);
    return a;
}

/* The ONNX op an activation kind is, for the ones the elementwise family
 * defines (op_eval_elementwise.c); CP_OP_UNKNOWN for the others. */
static enum cp_op act_op(enum cp_act_kind k)
{
    switch (k) {
    case CP_ACT_HARD_SWISH:
        return CP_OP_HARD_SWISH;
    case CP_ACT_HARD_SIGMOID:
        return CP_OP_HARD_SIGMOID;
    case CP_ACT_ELU:
        return CP_OP_ELU;
    case CP_ACT_SOFTPLUS:
        return CP_OP_SOFTPLUS;
    case CP_ACT_MISH:
        return CP_OP_MISH;
    default:
        return CP_OP_UNKNOWN;
    }
}

float cp_act_ref(const struct cp_act *a, float x)
{
    switch (a->kind) {
    case CP_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case CP_ACT_LEAKY_RELU:
        return x >= 0.0f ? x : a->alpha * x;
    case CP_ACT_CLIP:
        return x < a->alpha ? a->alpha : (x > a->beta ? a->beta : x);
    case CP_ACT_SIGMOID:
        return (float)(1.0 / (1.0 + exp(-(double)x)));
    case CP_ACT_SILU:
        return (float)((double)x / (1.0 + exp(-(double)x)));
    case CP_ACT_GELU:
        return (float)(0.5 * x * (1.0 + erf((double)x / sqrt(2.0))));
    case CP_ACT_GELU_TANH: {
        double u = CP_GELU_TANH_K * ((double)x + CP_GELU_TANH_C * (double)x * x * x);
        return (float)(0.5 * x * (1.0 + tanh(u)));
    }
    case CP_ACT_HARD_SWISH:
    case CP_ACT_HARD_SIGMOID:
    case CP_ACT_ELU:
    case CP_ACT_SOFTPLUS:
    case CP_ACT_MISH: { /* as the unfused op computes it */
        struct cp_ew_params p = {.alpha = a->alpha, .beta = a->beta};
        return (float)cp_ew_unary_f64(act_op(a->kind), &p, x);
    }
    case CP_ACT_TANH:
        return (float)tanh((double)x);
    default:
        return x;
    }
}

/* ---- strided walks ----------------------------------------------------------------- */

void cp_walk_init(struct cp_walk *w, const struct cp_shape *space, int n_ops)
{
    memset(w, 0, sizeof *w);
    w->rank = space->rank;
    w->n_ops = n_ops;
    for (int k = 0; k < space->rank; k++)
        w->dims[k] = space->dims[k].value;
}

void cp_walk_bcast(struct cp_walk *w, int op, const struct cp_shape *s)
{
    int64_t st[CP_MAX_RANK];
    cp_eval_strides_(s, st);
    int off = w->rank - s->rank;
    for (int k = 0; k < w->rank; k++) {
        int j = k - off;
        w->strides[op][k] = j >= 0 && s->dims[j].value != 1 ? st[j] : 0;
    }
}

void cp_walk_finish(struct cp_walk *w)
{
    /* Drop dims of size 1: they never move any operand. A zero-size dim is
     * kept so that the walk visits nothing. */
    int r = 0;
    for (int k = 0; k < w->rank; k++) {
        if (w->dims[k] == 1)
            continue;
        w->dims[r] = w->dims[k];
        for (int op = 0; op < w->n_ops; op++)
            w->strides[op][r] = w->strides[op][k];
        r++;
    }
    /* Merge dim k into k+1 when every operand steps over k+1 exactly. */
    int m = 0;
    for (int k = 0; k < r; k++) {
        if (m > 0) {
            bool merge = true;
            for (int op = 0; op < w->n_ops && merge; op++)
                merge = w->strides[op][m - 1] == w->strides[op][k] * w->dims[k];
            if (merge) {
                w->dims[m - 1] *= w->dims[k];
                for (int op = 0; op < w->n_ops; op++)
                    w->strides[op][m - 1] = w->strides[op][k];
                continue;
            }
        }
        w->dims[m] = w->dims[k];
        for (int op = 0; op < w->n_ops; op++)
            w->strides[op][m] = w->strides[op][k];
        m++;
    }
    if (m == 0) {
        w->dims[0] = 1;
        for (int op = 0; op < w->n_ops; op++)
            w->strides[op][0] = 0;
        m = 1;
    }
    w->rank = m;
    w->inner = w->dims[m - 1];
    w->rows = 1;
    for (int k = 0; k < m - 1; k++)
        w->rows *= w->dims[k];
    if (w->inner == 0)
        w->rows = 0;
    for (int op = 0; op < w->n_ops; op++)
        w->inner_stride[op] = w->strides[op][m - 1];
}

void cp_walk_start(const struct cp_walk *w, struct cp_walk_pos *p)
{
    memset(p->idx, 0, sizeof p->idx);
    for (int op = 0; op < w->n_ops; op++)
        p->off[op] = w->base[op];
}

void cp_walk_next(const struct cp_walk *w, struct cp_walk_pos *p)
{
    for (int k = w->rank - 2; k >= 0; k--) {
        if (++p->idx[k] < w->dims[k]) {
            for (int op = 0; op < w->n_ops; op++)
                p->off[op] += w->strides[op][k];
            return;
        }
        p->idx[k] = 0;
        for (int op = 0; op < w->n_ops; op++)
            p->off[op] -= w->strides[op][k] * (w->dims[k] - 1);
    }
}

void cp_walk_copy(const struct cp_walk *w, void *dst, const void *src, size_t size)
{
    struct cp_walk_pos p;
    unsigned char *d = dst;
    const unsigned char *s = src;
    int64_t es = (int64_t)size;
    int64_t sd = w->inner_stride[0] * es, ss = w->inner_stride[1] * es;
    cp_walk_start(w, &p);
    for (int64_t r = 0; r < w->rows; r++) {
        unsigned char *drow = d + p.off[0] * es;
        const unsigned char *srow = s + p.off[1] * es;
        if (sd == es && ss == es) {
            memcpy(drow, srow, (size_t)(w->inner * es));
        } else {
            for (int64_t j = 0; j < w->inner; j++)
                cp_eval_copy_elem(drow + j * sd, srow + j * ss, size);
        }
        cp_walk_next(w, &p);
    }
}

bool cp_eval_dropout_is_identity(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs < 3 || n->inputs[2] < 0)
        return true;
    const struct cp_tensor *tm = cp_graph_tensor(g, n->inputs[2]);
    if (tm->value && tm->value_len == 1 && tm->value[0] == 0)
        return true;
    if (n->inputs[1] < 0)
        return false; /* training with the default ratio 0.5 */
    const struct cp_tensor *r = cp_graph_tensor(g, n->inputs[1]);
    if (!r->data || !cp_dtype_is_float(r->dtype) || cp_shape_numel(&r->shape) != 1 ||
        r->nbytes < cp_dtype_size(r->dtype))
        return false;
    return cp_elem_load_f64(r->data, r->dtype, 0) == 0.0;
}

bool cp_eval_roi_align_tap(double y, double x, int64_t h, int64_t w, int64_t off[4], double wt[4])
{
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w)
        return false;
    double yy = y <= 0.0 ? 0.0 : y, xx = x <= 0.0 ? 0.0 : x;
    int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
    if (yl >= h - 1) {
        yh = yl = h - 1;
        yy = (double)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= w - 1) {
        xh = xl = w - 1;
        xx = (double)xl;
    } else {
        xh = xl + 1;
    }
    double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1.0 - ly, hx = 1.0 - lx;
    off[0] = yl * w + xl;
    off[1] = yl * w + xh;
    off[2] = yh * w + xl;
    off[3] = yh * w + xh;
    wt[0] = hy * hx;
    wt[1] = hy * lx;
    wt[2] = ly * hx;
    wt[3] = ly * lx;
    return true;
}
