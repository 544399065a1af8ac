/* The constant evaluator's part for the elementwise family: the ops shape
 * arithmetic uses (Neg, Abs, Sign, Floor, Ceil, Not, comparisons, And, Or,
 * Xor, Mod, Max, Min, Sum, CastLike). What they compute is
 * graph/op_eval_elementwise.h's, as the reference kernels compute it. The
 * random generators are never folded: they are not in this list. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "graph/op_eval.h"

static bool same_dtype(size_t n, const struct cp_tensor *const *in, enum cp_dtype dt)
{
    for (size_t i = 0; i < n; i++)
        if (!in[i] || in[i]->dtype != dt)
            return false;
    return true;
}

bool cp_fold_eval_elementwise(const struct cp_node *n, const struct cp_tensor *const *in,
                              const void *const *in_data, const struct cp_tensor *out,
                              void *out_data)
{
    enum cp_op op = n->op;
    size_t ni = n->n_inputs;
    struct cp_ew_params p;
    cp_ew_params_of(n, &p);
    if (op == CP_OP_CAST_LIKE) {
        if (ni != 2 || !in[1] || in[1]->dtype != out->dtype ||
            cp_shape_numel(&in[0]->shape) != cp_shape_numel(&out->shape))
            return false;
        cp_eval_cast(in[0]->dtype, in_data[0], out->dtype, out_data, cp_shape_numel(&out->shape));
        return true;
    }
    if (cp_ew_out_dtype(op, in[0]->dtype) != out->dtype || out->dtype == CP_DTYPE_UNDEFINED)
        return false;
    if (cp_ew_is_unary(op)) {
        if (ni != 1 || cp_shape_numel(&in[0]->shape) != cp_shape_numel(&out->shape))
            return false;
        cp_ew_unary(op, &p, in[0]->dtype, in_data[0], out_data, cp_shape_numel(&out->shape));
        return true;
    }
    if (!same_dtype(ni, in, in[0]->dtype))
        return false;
    for (size_t i = 0; i < ni; i++)
        if (!cp_eval_broadcasts(&in[i]->shape, &out->shape))
            return false;
    if (cp_ew_is_binary(op)) {
        if (ni != 2 || (op == CP_OP_MOD && cp_dtype_is_float(in[0]->dtype) && !p.fmod))
            return false;
        cp_ew_binary(op, &p, in[0], in_data[0], in[1], in_data[1], out, out_data);
        return true;
    }
    if (cp_ew_is_variadic(op) && ni >= 1 && ni <= 8) {
        cp_ew_variadic(op, ni, in, in_data, out, out_data);
        return true;
    }
    return false;
}
