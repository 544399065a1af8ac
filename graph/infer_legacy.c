/* Shape inference for the opset 1-10 forms of ops whose rules live in the
 * other infer_*.c files: what those rules call to check the old forms. */
#include "graph/infer_internal.h"

#include <string.h>

/* Before opset 7, Add, Sub, Mul, Div, Pow and Equal broadcast only when
 * `broadcast` is 1, and then only B to A's shape (unidirectionally), B's
 * dims lined up with A's starting at `axis` (default: B's last dim on A's
 * last). Numpy broadcasting, which the kernels compute, gives the same
 * result exactly when B lines up with A's trailing dims and the result has
 * A's shape; anything else is refused rather than computed differently. */
enum cp_status cp_infer_legacy_broadcast(struct cp_infer *c, const struct cp_tensor *a,
                                         const struct cp_tensor *b)
{
    const struct cp_attr *bc = cp_node_attr(c->node, "broadcast");
    const struct cp_attr *ax = cp_node_attr(c->node, "axis");
    bool on = bc && bc->type == CP_ATTR_INT && bc->i == 1;
    if (!on) {
        if (ax)
            return cp_infer_fail(c, "attribute 'axis' needs broadcast=1 (opset %lld)",
                                 (long long)c->opset);
        return CP_OK; /* same shapes required; numpy broadcasting is the lenient superset */
    }
    int ra = a->shape.rank, rb = b->shape.rank;
    if (ax && (ra < 0 || rb < 0))
        return cp_infer_fail(c,
                             "legacy broadcasting at axis %lld needs the ranks of '%s' and '%s' "
                             "to be known",
                             (long long)ax->i, a->name, b->name);
    if (ra < 0 || rb < 0)
        return CP_OK;
    if (rb > ra)
        return cp_infer_fail(c, "broadcast=1: '%s' (rank %d) has a higher rank than '%s' (rank %d)",
                             b->name, rb, a->name, ra);
    if (ax) {
        int64_t axis = ax->i < 0 ? ax->i + ra : ax->i;
        if (axis < 0 || axis + rb > ra)
            return cp_infer_fail(c,
                                 "broadcast=1: axis %lld does not fit '%s' (rank %d) in '%s' "
                                 "(rank %d)",
                                 (long long)ax->i, b->name, rb, a->name, ra);
        /* Lined up elsewhere than the trailing dims, B gives the same
         * result only when it holds one element. */
        bool one = true;
        for (int k = 0; k < rb; k++)
            one = one && b->shape.dims[k].value == 1;
        if (axis != ra - rb && !one)
            return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                    "broadcast=1 with axis %lld lines '%s' up with dims %lld.. of "
                                    "'%s' (rank %d), not with its last dims; only trailing "
                                    "alignment is supported",
                                    (long long)ax->i, b->name, (long long)axis, a->name, ra);
    }
    /* Unidirectional: every dim of B is 1 or A's. */
    for (int k = 0; k < rb; k++) {
        const struct cp_dim *db = &b->shape.dims[rb - 1 - k], *da = &a->shape.dims[ra - 1 - k];
        if (db->value == 1 || (db->value >= 0 && db->value == da->value))
            continue;
        if (db->value < 0 && db->sym && da->sym && strcmp(db->sym, da->sym) == 0)
            continue;
        if (db->value >= 0 && da->value >= 0)
            return cp_infer_fail(c,
                                 "broadcast=1: '%s' (dim %d is %lld) does not broadcast to "
                                 "'%s' (%lld)",
                                 b->name, rb - 1 - k, (long long)db->value, a->name,
                                 (long long)da->value);
    }
    return CP_OK;
}
