/* Private to graph/op_eval*.c: the small helpers both halves use. */
#ifndef CP_GRAPH_OP_EVAL_INTERNAL_H
#define CP_GRAPH_OP_EVAL_INTERNAL_H

#include "graph/op_eval.h"

#include <string.h>

/* Row-major element strides of a static shape. */
static inline void cp_eval_strides_(const struct cp_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int k = s->rank - 1; k >= 0; k--) {
        strides[k] = st;
        st *= s->dims[k].value;
    }
}

/* Product of dims [from, to) of a static shape (1 when empty). */
static inline int64_t cp_eval_span_(const struct cp_shape *s, int from, int to)
{
    int64_t p = 1;
    for (int k = from; k < to; k++)
        p *= s->dims[k].value;
    return p;
}

#endif
