/* Kernel selection: the fast kernels in preference order, then the
 * reference kernel of the op. The tables are constant and short, so a
 * linear walk at plan time is all it takes (nothing is cached: no mutable
 * globals). */
#include "runner/cpu/kernel.h"

const struct cp_kernel *cp_kernel_reference(enum cp_op op)
{
    if (op == CP_OP_UNKNOWN)
        return NULL;
    for (size_t i = 0; cp_ref_kernels[i]; i++)
        if (cp_ref_kernels[i]->op == op)
            return cp_ref_kernels[i];
    return NULL;
}

const struct cp_kernel *cp_kernel_select(const struct cp_graph *g, const struct cp_node *n,
                                         bool reference_only)
{
    if (n->op == CP_OP_UNKNOWN)
        return NULL;
    if (!reference_only)
        for (size_t i = 0; cp_fast_kernels[i]; i++) {
            const struct cp_kernel *k = cp_fast_kernels[i];
            if (k->op == n->op && (!k->supports || k->supports(g, n)))
                return k;
        }
    return cp_kernel_reference(n->op);
}

bool cp_op_is_view(enum cp_op op)
{
    switch (op) {
    case CP_OP_RESHAPE:
    case CP_OP_FLATTEN:
    case CP_OP_SQUEEZE:
    case CP_OP_UNSQUEEZE:
    case CP_OP_IDENTITY:
    case CP_OP_DROPOUT:
        return true;
    default:
        return false;
    }
}
