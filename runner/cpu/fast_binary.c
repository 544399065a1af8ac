/*
 * Elementwise binary ops (Add, Sub, Mul, Div) on f32 with ONNX
 * (numpy-style) broadcasting, and Where.
 *
 * The broadcasting plan (fast_util.h) merges dimensions so that the common
 * cases collapse to one loop shape: same-shape and scalar operands become a
 * single row, a bias over the trailing dim or a per-channel scale become
 * rows whose inner loop sees one operand contiguous and the other either
 * contiguous or a scalar. Threads split the flat element range, so a single
 * long row is shared as well as many short ones.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <omp.h>
#include <stdlib.h>

#define GRAIN 16384 /* elements per thread below which threading costs more */

struct binary_state {
    struct cp_fk_bcast b;
    enum cp_op op;
};

static bool binary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    struct cp_fk_bcast b;
    const struct cp_shape *in[2] = {&cp_fk_in(g, n, 0)->shape, &cp_fk_in(g, n, 1)->shape};
    const struct cp_tensor *y = cp_fk_out(g, n, 0);
    /* Broadcasting indexes plain tensors: in a layout region an operand
     * must be laid out as the result, or be a single element (a
     * per-channel operand there is oneDNN's: dnnl_binary.c). */
    for (size_t i = 0; i < 2; i++) {
        const struct cp_tensor *x = cp_fk_in(g, n, i);
        if ((!cp_tensor_is_plain(x) || !cp_tensor_is_plain(y)) &&
            !(cp_shape_numel(&x->shape) == 1 && cp_tensor_is_plain(x)) &&
            !(x->layout == y->layout && cp_shape_equal(&x->shape, &y->shape)))
            return false;
    }
    return cp_fk_bcast_init(&b, 2, in, &y->shape);
}

static enum cp_status bcast_prepare(struct cp_kexec *k, int nin, size_t first, struct cp_diag *d)
{
    struct binary_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_shape *in[CP_FK_MAX_IN];
    for (int i = 0; i < nin; i++)
        in[i] = &k->in[first + (size_t)i]->shape;
    if (!cp_fk_bcast_init(&s->b, nin, in, &k->out[0]->shape)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': inputs do not broadcast", k->node->name);
    }
    s->op = k->node->op;
    k->state = s;
    return CP_OK;
}

static enum cp_status binary_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return bcast_prepare(k, 2, 0, d);
}

#define ROW_LOOPS(EXPR)                                                                            \
    do {                                                                                           \
        if (sa && sb) {                                                                            \
            for (int64_t j = 0; j < len; j++) {                                                    \
                float x = a[j], y = b[j];                                                          \
                c[j] = (EXPR);                                                                     \
            }                                                                                      \
        } else if (sb) {                                                                           \
            float x = a[0];                                                                        \
            for (int64_t j = 0; j < len; j++) {                                                    \
                float y = b[j];                                                                    \
                c[j] = (EXPR);                                                                     \
            }                                                                                      \
        } else if (sa) {                                                                           \
            float y = b[0];                                                                        \
            for (int64_t j = 0; j < len; j++) {                                                    \
                float x = a[j];                                                                    \
                c[j] = (EXPR);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            float x = a[0], y = b[0];                                                              \
            float v = (EXPR);                                                                      \
            for (int64_t j = 0; j < len; j++)                                                      \
                c[j] = v;                                                                          \
        }                                                                                          \
    } while (0)

/* A block of `rows` rows of `len` elements. Along the row each operand is
 * contiguous (s != 0) or one value repeated; from one row to the next it
 * moves by its row stride (0 when the row repeats). Short rows (a bias over
 * 16 channels of NHWC) stay cheap because one call covers many of them. */
CP_FK_HOT static void binary_block(enum cp_op op, const float *A, int64_t ars, int sa,
                                   const float *B, int64_t brs, int sb, float *C, int64_t rows,
                                   int64_t len)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *a = A + r * ars, *b = B + r * brs;
        float *c = C + r * len;
        switch (op) {
        case CP_OP_ADD:
            ROW_LOOPS(x + y);
            break;
        case CP_OP_SUB:
            ROW_LOOPS(x - y);
            break;
        case CP_OP_MUL:
            ROW_LOOPS(x * y);
            break;
        default:
            ROW_LOOPS(x / y);
            break;
        }
    }
}

static void binary_range(const struct binary_state *s, const float *A, const float *B, float *C,
                         int64_t e0, int64_t e1)
{
    const struct cp_fk_bcast *b = &s->b;
    int R = b->rank;
    int64_t L = b->dims[R - 1];
    int sa = b->stride[0][R - 1] != 0, sb = b->stride[1][R - 1] != 0;
    /* Rows within one run of the second-to-last dim share constant strides. */
    int64_t D2 = R >= 2 ? b->dims[R - 2] : 1;
    int64_t ars = R >= 2 ? b->stride[0][R - 2] : 0, brs = R >= 2 ? b->stride[1][R - 2] : 0;
    int64_t e = e0;
    while (e < e1) {
        int64_t row = e / L, col = e % L;
        int64_t off[CP_FK_MAX_IN];
        cp_fk_bcast_row(b, row, off);
        if (col != 0 || e1 - e < L) { /* a partial row */
            int64_t len = L - col < e1 - e ? L - col : e1 - e;
            binary_block(s->op, A + off[0] + (sa ? col : 0), 0, sa, B + off[1] + (sb ? col : 0), 0,
                         sb, C + e, 1, len);
            e += len;
            continue;
        }
        int64_t rows = (e1 - e) / L, left = D2 - row % D2;
        if (rows > left)
            rows = left;
        binary_block(s->op, A + off[0], ars, sa, B + off[1], brs, sb, C + e, rows, L);
        e += rows * L;
    }
}

static enum cp_status binary_run(struct cp_kexec *k)
{
    const struct binary_state *s = k->state;
    const float *A = k->in_data[0], *B = k->in_data[1];
    float *C = k->out_data[0];
    int64_t n = s->b.numel;
    int nt = cp_fk_threads(k, n, GRAIN);
    if (nt <= 1) {
        binary_range(s, A, B, C, 0, n);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t e0, e1;
        cp_fk_split(n, 16, &e0, &e1);
        binary_range(s, A, B, C, e0, e1);
    }
    return CP_OK;
}

static void state_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_add = {
    "c:binary_f32", CP_OP_ADD, binary_supports, binary_prepare, binary_run, state_release, NULL};
const struct cp_kernel cp_fast_sub = {
    "c:binary_f32", CP_OP_SUB, binary_supports, binary_prepare, binary_run, state_release, NULL};
const struct cp_kernel cp_fast_mul = {
    "c:binary_f32", CP_OP_MUL, binary_supports, binary_prepare, binary_run, state_release, NULL};
const struct cp_kernel cp_fast_div = {
    "c:binary_f32", CP_OP_DIV, binary_supports, binary_prepare, binary_run, state_release, NULL};

/* ---- Where ------------------------------------------------------------- */

static bool where_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 3 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_BOOL))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 1), *y = cp_fk_in(g, n, 2), *o = cp_fk_out(g, n, 0);
    if (!x || !y || !o || x->dtype != y->dtype || o->dtype != x->dtype ||
        cp_dtype_size(x->dtype) != 4)
        return false;
    struct cp_fk_bcast b;
    const struct cp_shape *in[3] = {&cp_fk_in(g, n, 0)->shape, &x->shape, &y->shape};
    return cp_fk_bcast_init(&b, 3, in, &o->shape);
}

static enum cp_status where_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return bcast_prepare(k, 3, 0, d);
}

CP_FK_HOT static void where_span(const uint8_t *c, int sc, const uint32_t *x, int sx,
                                 const uint32_t *y, int sy, uint32_t *o, int64_t len)
{
    if (sc && sx && sy) {
        for (int64_t j = 0; j < len; j++)
            o[j] = c[j] ? x[j] : y[j];
        return;
    }
    for (int64_t j = 0; j < len; j++)
        o[j] = c[sc ? j : 0] ? x[sx ? j : 0] : y[sy ? j : 0];
}

static enum cp_status where_run(struct cp_kexec *k)
{
    const struct binary_state *s = k->state;
    const struct cp_fk_bcast *b = &s->b;
    const uint8_t *C = k->in_data[0];
    const uint32_t *X = k->in_data[1], *Y = k->in_data[2];
    uint32_t *O = k->out_data[0];
    int64_t n = b->numel, L = b->dims[b->rank - 1];
    int sc = b->stride[0][b->rank - 1] != 0, sx = b->stride[1][b->rank - 1] != 0,
        sy = b->stride[2][b->rank - 1] != 0;
    int nt = cp_fk_threads(k, n, GRAIN);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t e0, e1;
        cp_fk_split(n, 16, &e0, &e1);
        for (int64_t e = e0; e < e1;) {
            int64_t row = e / L, col = e % L;
            int64_t len = L - col < e1 - e ? L - col : e1 - e;
            int64_t off[CP_FK_MAX_IN];
            cp_fk_bcast_row(b, row, off);
            where_span(C + off[0] + (sc ? col : 0), sc, X + off[1] + (sx ? col : 0), sx,
                       Y + off[2] + (sy ? col : 0), sy, O + e, len);
            e += len;
        }
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_where = {
    "c:where", CP_OP_WHERE, where_supports, where_prepare, where_run, state_release, NULL};
