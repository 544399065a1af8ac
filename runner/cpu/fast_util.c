/* Helpers the fast kernels share (see fast_util.h). */
#include "runner/cpu/fast_util.h"

#include <omp.h>
#include <string.h>

const struct cp_tensor *cp_fk_in(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    if (i >= n->n_inputs || n->inputs[i] < 0)
        return NULL;
    return cp_graph_tensor(g, n->inputs[i]);
}

const struct cp_tensor *cp_fk_out(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    if (i >= n->n_outputs || n->outputs[i] < 0)
        return NULL;
    return cp_graph_tensor(g, n->outputs[i]);
}

bool cp_fk_in_is(const struct cp_graph *g, const struct cp_node *n, size_t i, enum cp_dtype dt)
{
    const struct cp_tensor *t = cp_fk_in(g, n, i);
    return t && t->dtype == dt && cp_shape_is_static(&t->shape);
}

bool cp_fk_out_is(const struct cp_graph *g, const struct cp_node *n, size_t i, enum cp_dtype dt)
{
    const struct cp_tensor *t = cp_fk_out(g, n, i);
    return t && t->dtype == dt && cp_shape_is_static(&t->shape);
}

int cp_fk_dims(const struct cp_tensor *t, int64_t *out)
{
    if (!t || !cp_shape_is_static(&t->shape))
        return -1;
    for (int i = 0; i < t->shape.rank; i++)
        out[i] = t->shape.dims[i].value;
    return t->shape.rank;
}

bool cp_fk_const_ints(const struct cp_tensor *t, int64_t *out, size_t max, size_t *n)
{
    *n = 0;
    if (!t)
        return false;
    if (t->value) {
        if ((size_t)t->value_len > max)
            return false;
        memcpy(out, t->value, (size_t)t->value_len * sizeof *out);
        *n = (size_t)t->value_len;
        return true;
    }
    if (t->kind != CP_TENSOR_INITIALIZER || !t->data)
        return false;
    size_t es = t->dtype == CP_DTYPE_I64 ? 8 : t->dtype == CP_DTYPE_I32 ? 4 : 0;
    if (!es || t->nbytes % es || t->nbytes / es > max)
        return false;
    size_t cnt = t->nbytes / es;
    for (size_t i = 0; i < cnt; i++) {
        if (es == 8) {
            int64_t v;
            memcpy(&v, (const char *)t->data + i * 8, 8);
            out[i] = v;
        } else {
            int32_t v;
            memcpy(&v, (const char *)t->data + i * 4, 4);
            out[i] = v;
        }
    }
    *n = cnt;
    return true;
}

bool cp_fk_const_floats(const struct cp_tensor *t, float *out, size_t max, size_t *n)
{
    *n = 0;
    if (!t || t->kind != CP_TENSOR_INITIALIZER || !t->data || t->dtype != CP_DTYPE_F32)
        return false;
    size_t cnt = t->nbytes / sizeof(float);
    if (cnt > max)
        return false;
    memcpy(out, t->data, cnt * sizeof(float));
    *n = cnt;
    return true;
}

int64_t cp_fk_opset(const struct cp_graph *g)
{
    int64_t o = cp_graph_opset(g);
    return o > 0 ? o : 17;
}

/* ---- broadcasting ------------------------------------------------------ */

bool cp_fk_bcast_init(struct cp_fk_bcast *b, int nin, const struct cp_shape *const *in,
                      const struct cp_shape *out)
{
    memset(b, 0, sizeof *b);
    if (nin < 1 || nin > CP_FK_MAX_IN || !cp_shape_is_static(out) || out->rank > CP_MAX_RANK)
        return false;
    int r = out->rank;
    int64_t od[CP_MAX_RANK], st[CP_FK_MAX_IN][CP_MAX_RANK];
    for (int d = 0; d < r; d++)
        od[d] = out->dims[d].value;
    for (int i = 0; i < nin; i++) {
        const struct cp_shape *s = in[i];
        if (!cp_shape_is_static(s) || s->rank > r)
            return false;
        int off = r - s->rank;
        int64_t stride = 1;
        for (int d = r - 1; d >= 0; d--) {
            int64_t v = d >= off ? s->dims[d - off].value : 1;
            if (v != od[d] && v != 1)
                return false;
            st[i][d] = (v == 1 && od[d] != 1) ? 0 : stride;
            stride *= v;
        }
    }
    /* Merge dims of size 1 away, then neighbours whose strides chain for
     * every input (both broadcast, or both contiguous with the next). */
    int m = 0;
    int64_t numel = 1;
    for (int d = 0; d < r; d++) {
        numel *= od[d];
        if (od[d] == 1)
            continue;
        if (m > 0) {
            bool chain = true;
            for (int i = 0; i < nin; i++) {
                int64_t prev = b->stride[i][m - 1], cur = st[i][d];
                if (!((prev == 0 && cur == 0) || (cur != 0 && prev == cur * od[d])))
                    chain = false;
            }
            if (chain) {
                b->dims[m - 1] *= od[d];
                for (int i = 0; i < nin; i++)
                    b->stride[i][m - 1] = st[i][d];
                continue;
            }
        }
        b->dims[m] = od[d];
        for (int i = 0; i < nin; i++)
            b->stride[i][m] = st[i][d];
        m++;
    }
    if (m == 0) {
        b->dims[0] = 1;
        for (int i = 0; i < nin; i++)
            b->stride[i][0] = 1;
        m = 1;
    }
    b->rank = m;
    b->nin = nin;
    b->numel = numel;
    return true;
}

int64_t cp_fk_bcast_rows(const struct cp_fk_bcast *b)
{
    int64_t rows = 1;
    for (int d = 0; d < b->rank - 1; d++)
        rows *= b->dims[d];
    return rows;
}

void cp_fk_bcast_row(const struct cp_fk_bcast *b, int64_t r, int64_t *off)
{
    for (int i = 0; i < b->nin; i++)
        off[i] = 0;
    for (int d = b->rank - 2; d >= 0; d--) {
        int64_t idx = r % b->dims[d];
        r /= b->dims[d];
        for (int i = 0; i < b->nin; i++)
            off[i] += idx * b->stride[i][d];
    }
}

/* ---- threads ------------------------------------------------------------ */

void cp_fk_split(int64_t n, int64_t align, int64_t *begin, int64_t *end)
{
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    if (align < 1)
        align = 1;
    int64_t blocks = (n + align - 1) / align;
    int64_t b = blocks * t / nt, e = blocks * (t + 1) / nt;
    *begin = b * align < n ? b * align : n;
    *end = e * align < n ? e * align : n;
}

int cp_fk_threads(const struct cp_kexec *k, int64_t work, int64_t grain)
{
    int nt = k->env && k->env->threads > 0 ? k->env->threads : 1;
    if (grain < 1)
        grain = 1;
    int64_t want = work / grain;
    if (want < 1)
        want = 1;
    return want < nt ? (int)want : nt;
}
