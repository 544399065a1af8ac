/* DepthToSpace and SpaceToDepth as strided copies of plain tensors of 1-,
 * 2-, 4- or 8-byte elements: for each (n, c, row) of the space-side tensor
 * the W*b elements of the row come from b depth channels, read
 * contiguously along w. Rows are split between threads. */
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <string.h>

static bool d2s_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    if (n->n_inputs != 1 || n->n_outputs != 1 || !x || !y || !cp_shape_is_static(&x->shape) ||
        !cp_shape_is_static(&y->shape) || x->dtype != y->dtype || x->shape.rank != 4 ||
        y->shape.rank != 4 || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y))
        return false;
    size_t es = cp_dtype_size(x->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return false;
    int64_t b = cp_node_attr_int(n, "blocksize", 0);
    if (b < 1)
        return false;
    int64_t c = x->shape.dims[1].value, h = x->shape.dims[2].value, w = x->shape.dims[3].value;
    if (x->shape.dims[0].value != y->shape.dims[0].value)
        return false;
    if (n->op == CP_OP_DEPTH_TO_SPACE) {
        const char *mode = cp_node_attr_string(n, "mode", "DCR");
        if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
            return false;
        return c % (b * b) == 0 && y->shape.dims[1].value == c / (b * b) &&
               y->shape.dims[2].value == h * b && y->shape.dims[3].value == w * b;
    }
    return h % b == 0 && w % b == 0 && y->shape.dims[1].value == c * b * b &&
           y->shape.dims[2].value == h / b && y->shape.dims[3].value == w / b;
}

/* One space row (n, c, ys) <-> its b depth rows. */
#define ROW_LOOP(T)                                                                                \
    do {                                                                                           \
        T *sp = (T *)space + row * ws;                                                             \
        for (int64_t j = 0; j < b; j++) {                                                          \
            T *dp = (T *)depth + ((n * cs * b * b + chan(c, i, j)) * h + ys / b) * w;              \
            if (to_space)                                                                          \
                for (int64_t x = 0; x < w; x++)                                                    \
                    sp[x * b + j] = dp[x];                                                         \
            else                                                                                   \
                for (int64_t x = 0; x < w; x++)                                                    \
                    dp[x] = sp[x * b + j];                                                         \
        }                                                                                          \
    } while (0)

static enum cp_status d2s_run(struct cp_kexec *k)
{
    bool to_space = k->node->op == CP_OP_DEPTH_TO_SPACE;
    bool crd = to_space && strcmp(cp_node_attr_string(k->node, "mode", "DCR"), "CRD") == 0;
    const struct cp_shape *ss = to_space ? &k->out[0]->shape : &k->in[0]->shape;
    char *space = to_space ? k->out_data[0] : k->in_data[0];
    char *depth = to_space ? k->in_data[0] : k->out_data[0];
    int64_t b = cp_node_attr_int(k->node, "blocksize", 1);
    int64_t cs = ss->dims[1].value, hs = ss->dims[2].value, ws = ss->dims[3].value;
    int64_t h = hs / b, w = ws / b, rows = ss->dims[0].value * cs * hs;
    size_t es = cp_dtype_size(k->in[0]->dtype);
#define chan(c, i, j) (crd ? (c)*b * b + (i)*b + (j) : ((i)*b + (j)) * cs + (c))
    int nt = cp_fk_threads(k, rows * ws, 1 << 14);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        int64_t ys = row % hs, c = row / hs % cs, n = row / hs / cs, i = ys % b;
        switch (es) {
        case 1:
            ROW_LOOP(uint8_t);
            break;
        case 2:
            ROW_LOOP(uint16_t);
            break;
        case 4:
            ROW_LOOP(uint32_t);
            break;
        default:
            ROW_LOOP(uint64_t);
            break;
        }
    }
#undef chan
    return CP_OK;
}

const struct cp_kernel cp_fast_depth_to_space = {
    "c:depth_to_space", CP_OP_DEPTH_TO_SPACE, d2s_supports, NULL, d2s_run, NULL, NULL};
const struct cp_kernel cp_fast_space_to_depth = {
    "c:space_to_depth", CP_OP_SPACE_TO_DEPTH, d2s_supports, NULL, d2s_run, NULL, NULL};
