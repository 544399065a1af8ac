/* Reference kernels of the elementwise family: unary math and activations,
 * comparisons, logic, Mod, the bitwise ops, PRelu, the variadic
 * Max/Min/Sum/Mean, CastLike and the random generators. What they compute
 * is graph/op_eval_elementwise.h's, which the constant folder computes
 * too; here: which nodes each kernel takes. */
#include "runner/cpu/ref_util.h"

/* ---- unary ------------------------------------------------------------------------ */

static bool ew_unary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && y && cp_ew_out_dtype(n->op, x->dtype) == y->dtype &&
           y->dtype != CP_DTYPE_UNDEFINED && cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
}

static enum cp_status ew_unary_run(struct cp_kexec *k)
{
    struct cp_ew_params p;
    cp_ew_params_of(k->node, &p);
    cp_ew_unary(k->node->op, &p, k->in[0]->dtype, k->in_data[0], k->out_data[0],
                cp_ref_numel(&k->in[0]->shape));
    return CP_OK;
}

/* ---- binary ------------------------------------------------------------------------ */

static bool ew_binary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, 0), *b = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    if (!a || !b || a->dtype != b->dtype || cp_ew_out_dtype(n->op, a->dtype) != y->dtype ||
        y->dtype == CP_DTYPE_UNDEFINED)
        return false;
    if (n->op == CP_OP_PRELU && !cp_shape_equal(&a->shape, &y->shape))
        return false;
    if (n->op == CP_OP_MOD && cp_dtype_is_float(a->dtype) && !cp_node_attr_int(n, "fmod", 0))
        return false;
    if (n->op == CP_OP_BIT_SHIFT) {
        const char *d = cp_node_attr_string(n, "direction", "");
        if (strcmp(d, "LEFT") != 0 && strcmp(d, "RIGHT") != 0)
            return false;
    }
    struct cp_tensor bt = *b;
    if (n->op == CP_OP_PRELU)
        cp_ew_prelu_slope_shape(cp_ref_opset(g), &a->shape, &b->shape, &bt.shape);
    return cp_eval_broadcasts(&a->shape, &y->shape) && cp_eval_broadcasts(&bt.shape, &y->shape);
}

static enum cp_status ew_binary_run(struct cp_kexec *k)
{
    struct cp_ew_params p;
    cp_ew_params_of(k->node, &p);
    struct cp_tensor bt = *k->in[1];
    if (k->node->op == CP_OP_PRELU)
        cp_ew_prelu_slope_shape(cp_ref_opset(k->g), &k->in[0]->shape, &k->in[1]->shape, &bt.shape);
    cp_ew_binary(k->node->op, &p, k->in[0], k->in_data[0], &bt, k->in_data[1], k->out[0],
                 k->out_data[0]);
    return CP_OK;
}

/* ---- variadic ------------------------------------------------------------------------ */

#define MAX_VARIADIC 64

static bool ew_variadic_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs < 1 || n->n_inputs > MAX_VARIADIC ||
        n->n_outputs != 1)
        return false;
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    if (cp_ew_out_dtype(n->op, y->dtype) != y->dtype || y->dtype == CP_DTYPE_UNDEFINED)
        return false;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_tensor *x = cp_ref_in(g, n, i);
        if (!x || x->dtype != y->dtype || !cp_eval_broadcasts(&x->shape, &y->shape))
            return false;
    }
    return true;
}

static enum cp_status ew_variadic_run(struct cp_kexec *k)
{
    const struct cp_tensor *x[MAX_VARIADIC];
    const void *xd[MAX_VARIADIC];
    size_t n = k->node->n_inputs;
    for (size_t i = 0; i < n; i++) {
        x[i] = k->in[i];
        xd[i] = k->in_data[i];
    }
    cp_ew_variadic(k->node->op, n, x, xd, k->out[0], k->out_data[0]);
    return CP_OK;
}

/* ---- CastLike ---------------------------------------------------------------------------- */

static bool cast_like_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *like = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    return x && like && y->dtype == like->dtype && y->dtype != CP_DTYPE_UNDEFINED &&
           cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
}

static enum cp_status cast_like_run(struct cp_kexec *k)
{
    cp_eval_cast(k->in[0]->dtype, k->in_data[0], k->out[0]->dtype, k->out_data[0],
                 cp_ref_numel(&k->in[0]->shape));
    return CP_OK;
}

/* ---- random generators ----------------------------------------------------------------- */

static bool random_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    switch (n->op) {
    case CP_OP_RANDOM_NORMAL:
    case CP_OP_RANDOM_UNIFORM:
        return n->n_inputs == 0 && cp_dtype_is_float(y->dtype);
    case CP_OP_RANDOM_NORMAL_LIKE:
    case CP_OP_RANDOM_UNIFORM_LIKE:
        return n->n_inputs == 1 && x && cp_dtype_is_float(y->dtype);
    case CP_OP_BERNOULLI:
        return n->n_inputs == 1 && x && cp_dtype_is_float(x->dtype) &&
               cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
    case CP_OP_MULTINOMIAL:
        return n->n_inputs == 1 && x && cp_dtype_is_float(x->dtype) && x->shape.rank == 2 &&
               y->shape.rank == 2 && y->shape.dims[0].value == x->shape.dims[0].value &&
               (y->dtype == CP_DTYPE_I32 || y->dtype == CP_DTYPE_I64);
    default:
        return false;
    }
}

static enum cp_status random_run(struct cp_kexec *k)
{
    const struct cp_node *n = k->node;
    const struct cp_tensor *y = k->out[0];
    int64_t count = cp_ref_numel(&y->shape);
    switch (n->op) {
    case CP_OP_BERNOULLI:
        cp_ew_bernoulli(n, k->in[0]->dtype, k->in_data[0], y->dtype, k->out_data[0], count);
        break;
    case CP_OP_MULTINOMIAL:
        cp_ew_multinomial(n, k->in[0]->dtype, k->in_data[0], k->in[0]->shape.dims[0].value,
                          k->in[0]->shape.dims[1].value, y->dtype, k->out_data[0],
                          y->shape.dims[1].value);
        break;
    default:
        cp_ew_random_fill(n, y->dtype, count, k->out_data[0]);
        break;
    }
    return CP_OK;
}

/* ---- the kernels ------------------------------------------------------------------------ */

#define EW_UNARY(var, opv)    CP_REF_KERNEL(var, opv, ew_unary_supports, NULL, ew_unary_run)
#define EW_BINARY(var, opv)   CP_REF_KERNEL(var, opv, ew_binary_supports, NULL, ew_binary_run)
#define EW_VARIADIC(var, opv) CP_REF_KERNEL(var, opv, ew_variadic_supports, NULL, ew_variadic_run)
#define EW_RANDOM(var, opv)   CP_REF_KERNEL(var, opv, random_supports, NULL, random_run)

EW_UNARY(cp_ref_abs, CP_OP_ABS);
EW_UNARY(cp_ref_neg, CP_OP_NEG);
EW_UNARY(cp_ref_reciprocal, CP_OP_RECIPROCAL);
EW_UNARY(cp_ref_floor, CP_OP_FLOOR);
EW_UNARY(cp_ref_ceil, CP_OP_CEIL);
EW_UNARY(cp_ref_round, CP_OP_ROUND);
EW_UNARY(cp_ref_sign, CP_OP_SIGN);
EW_UNARY(cp_ref_log, CP_OP_LOG);
EW_UNARY(cp_ref_sin, CP_OP_SIN);
EW_UNARY(cp_ref_cos, CP_OP_COS);
EW_UNARY(cp_ref_tan, CP_OP_TAN);
EW_UNARY(cp_ref_asin, CP_OP_ASIN);
EW_UNARY(cp_ref_acos, CP_OP_ACOS);
EW_UNARY(cp_ref_atan, CP_OP_ATAN);
EW_UNARY(cp_ref_sinh, CP_OP_SINH);
EW_UNARY(cp_ref_cosh, CP_OP_COSH);
EW_UNARY(cp_ref_asinh, CP_OP_ASINH);
EW_UNARY(cp_ref_acosh, CP_OP_ACOSH);
EW_UNARY(cp_ref_atanh, CP_OP_ATANH);
EW_UNARY(cp_ref_is_nan, CP_OP_IS_NAN);
EW_UNARY(cp_ref_is_inf, CP_OP_IS_INF);
EW_UNARY(cp_ref_not, CP_OP_NOT);
EW_UNARY(cp_ref_bitwise_not, CP_OP_BITWISE_NOT);
EW_UNARY(cp_ref_elu, CP_OP_ELU);
EW_UNARY(cp_ref_selu, CP_OP_SELU);
EW_UNARY(cp_ref_celu, CP_OP_CELU);
EW_UNARY(cp_ref_hard_sigmoid, CP_OP_HARD_SIGMOID);
EW_UNARY(cp_ref_hard_swish, CP_OP_HARD_SWISH);
EW_UNARY(cp_ref_softsign, CP_OP_SOFTSIGN);
EW_UNARY(cp_ref_softplus, CP_OP_SOFTPLUS);
EW_UNARY(cp_ref_thresholded_relu, CP_OP_THRESHOLDED_RELU);
EW_UNARY(cp_ref_shrink, CP_OP_SHRINK);
EW_UNARY(cp_ref_mish, CP_OP_MISH);
EW_BINARY(cp_ref_prelu, CP_OP_PRELU);
EW_BINARY(cp_ref_greater, CP_OP_GREATER);
EW_BINARY(cp_ref_less, CP_OP_LESS);
EW_BINARY(cp_ref_greater_or_equal, CP_OP_GREATER_OR_EQUAL);
EW_BINARY(cp_ref_less_or_equal, CP_OP_LESS_OR_EQUAL);
EW_BINARY(cp_ref_and, CP_OP_AND);
EW_BINARY(cp_ref_or, CP_OP_OR);
EW_BINARY(cp_ref_xor, CP_OP_XOR);
EW_BINARY(cp_ref_mod, CP_OP_MOD);
EW_BINARY(cp_ref_bit_shift, CP_OP_BIT_SHIFT);
EW_BINARY(cp_ref_bitwise_and, CP_OP_BITWISE_AND);
EW_BINARY(cp_ref_bitwise_or, CP_OP_BITWISE_OR);
EW_BINARY(cp_ref_bitwise_xor, CP_OP_BITWISE_XOR);
EW_VARIADIC(cp_ref_max, CP_OP_MAX);
EW_VARIADIC(cp_ref_min, CP_OP_MIN);
EW_VARIADIC(cp_ref_sum, CP_OP_SUM);
EW_VARIADIC(cp_ref_mean, CP_OP_MEAN);
CP_REF_KERNEL(cp_ref_cast_like, CP_OP_CAST_LIKE, cast_like_supports, NULL, cast_like_run);
EW_RANDOM(cp_ref_random_normal, CP_OP_RANDOM_NORMAL);
EW_RANDOM(cp_ref_random_uniform, CP_OP_RANDOM_UNIFORM);
EW_RANDOM(cp_ref_random_normal_like, CP_OP_RANDOM_NORMAL_LIKE);
EW_RANDOM(cp_ref_random_uniform_like, CP_OP_RANDOM_UNIFORM_LIKE);
EW_RANDOM(cp_ref_bernoulli, CP_OP_BERNOULLI);
EW_RANDOM(cp_ref_multinomial, CP_OP_MULTINOMIAL);
