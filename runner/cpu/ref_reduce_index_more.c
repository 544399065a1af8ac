/* Reference kernels of the reduce_index family, part 3: ReverseSequence,
 * Det, Einsum (the general definition, graph/op_eval.h) and Unique. */
#include "runner/cpu/ref_reduce_index.h"

#include <math.h>
#include <string.h>

/* ---- ReverseSequence ----------------------------------------------------------------------- */

static bool revseq_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *sl = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    int64_t ba = cp_node_attr_int(n, "batch_axis", 1);
    int64_t ta = cp_node_attr_int(n, "time_axis", 0);
    return x && sl && sl->dtype == CP_DTYPE_I64 && x->shape.rank >= 2 && y->dtype == x->dtype &&
           cp_shape_equal(&x->shape, &y->shape) && ((ba == 0 && ta == 1) || (ba == 1 && ta == 0)) &&
           cp_ref_numel(&sl->shape) == x->shape.dims[ba].value;
}

static enum cp_status revseq_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0];
    int ba = (int)cp_node_attr_int(k->node, "batch_axis", 1), ta = 1 - ba;
    int64_t nb = x->shape.dims[ba].value, nt = x->shape.dims[ta].value;
    int64_t inner = cp_ref_span(&x->shape, 2, x->shape.rank);
    size_t es = cp_dtype_size(x->dtype);
    const int64_t *lens = k->in_data[1];
    /* element (t, b) starts at ((ta == 0 ? t * nb + b : b * nt + t) * inner) */
    for (int64_t b = 0; b < nb; b++) {
        int64_t len = lens[b];
        if (len < 0 || len > nt)
            return CP_ERR_INTERNAL;
        for (int64_t t = 0; t < nt; t++) {
            int64_t src_t = t < len ? len - 1 - t : t;
            int64_t dst = ta == 0 ? t * nb + b : b * nt + t;
            int64_t src = ta == 0 ? src_t * nb + b : b * nt + src_t;
            memcpy((char *)k->out_data[0] + dst * inner * (int64_t)es,
                   (const char *)k->in_data[0] + src * inner * (int64_t)es, (size_t)inner * es);
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_reverse_sequence, CP_OP_REVERSE_SEQUENCE, revseq_supports, NULL, revseq_run);

/* ---- Det --------------------------------------------------------------------------------------
 */

static bool det_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int r = x ? x->shape.rank : 0;
    return x && cp_dtype_is_float(x->dtype) && y->dtype == x->dtype && r >= 2 &&
           x->shape.dims[r - 1].value == x->shape.dims[r - 2].value &&
           cp_ref_numel(&y->shape) == cp_ref_span(&x->shape, 0, r - 2);
}

static enum cp_status det_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    int r = k->in[0]->shape.rank;
    int64_t m = k->in[0]->shape.dims[r - 1].value;
    k->scratch_bytes = (size_t)(m * m) * sizeof(double) + 8;
    return CP_OK;
}

/* LU with partial pivoting, in double. */
static enum cp_status det_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0];
    int r = x->shape.rank;
    int64_t m = x->shape.dims[r - 1].value, mats = cp_ref_span(&x->shape, 0, r - 2);
    double *a = k->scratch;
    for (int64_t b = 0; b < mats; b++) {
        for (int64_t i = 0; i < m * m; i++)
            a[i] = cp_elem_load_f64(k->in_data[0], x->dtype, b * m * m + i);
        double det = 1.0;
        for (int64_t c = 0; c < m; c++) {
            int64_t p = c;
            for (int64_t i = c + 1; i < m; i++)
                if (fabs(a[i * m + c]) > fabs(a[p * m + c]))
                    p = i;
            if (a[p * m + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = a[c * m + j];
                    a[c * m + j] = a[p * m + j];
                    a[p * m + j] = t;
                }
                det = -det;
            }
            det *= a[c * m + c];
            for (int64_t i = c + 1; i < m; i++) {
                double f = a[i * m + c] / a[c * m + c];
                for (int64_t j = c; j < m; j++)
                    a[i * m + j] -= f * a[c * m + j];
            }
        }
        cp_eval_store_f64(k->out_data[0], x->dtype, b, det);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_det, CP_OP_DET, det_supports, det_prepare, det_run);

/* ---- Einsum -----------------------------------------------------------------------------------
 */

static bool einsum_plan(const struct cp_graph *g, const struct cp_node *n, struct cp_einsum *e)
{
    const struct cp_shape *shapes[CP_EINSUM_MAX_IN];
    if (n->n_inputs < 1 || n->n_inputs > CP_EINSUM_MAX_IN)
        return false;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (!t)
            return false;
        shapes[i] = &t->shape;
    }
    char why[160];
    return cp_eval_einsum_plan(cp_node_attr_string(n, "equation", ""), (int)n->n_inputs, shapes, e,
                               why, sizeof why);
}

static bool einsum_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    struct cp_einsum e;
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    if (!einsum_plan(g, n, &e) || y->shape.rank != e.out_rank || y->dtype == CP_DTYPE_BOOL)
        return false;
    for (int q = 0; q < e.out_rank; q++)
        if (y->shape.dims[q].value != e.size[e.out_label[q]])
            return false;
    return true;
}

static enum cp_status einsum_run(struct cp_kexec *k)
{
    struct cp_einsum e;
    enum cp_dtype dts[CP_EINSUM_MAX_IN];
    const void *ins[CP_EINSUM_MAX_IN];
    if (!einsum_plan(k->g, k->node, &e))
        return CP_ERR_INTERNAL;
    for (int i = 0; i < e.n_in; i++) {
        dts[i] = k->in[i]->dtype;
        ins[i] = k->in_data[i];
    }
    cp_eval_einsum(&e, dts, ins, k->out[0]->dtype, k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_einsum, CP_OP_EINSUM, einsum_supports, NULL, einsum_run);

/* ---- Unique ---------------------------------------------------------------------------------- */

/* Slices l of (outer, len, inner): the elements [o, l, i] in memory order. */
struct uq {
    const void *x;
    enum cp_dtype dt;
    int64_t outer, len, inner;
};

static int slice_cmp(const struct uq *u, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < u->outer; o++)
        for (int64_t i = 0; i < u->inner; i++) {
            double va = cp_elem_load_f64(u->x, u->dt, (o * u->len + a) * u->inner + i);
            double vb = cp_elem_load_f64(u->x, u->dt, (o * u->len + b) * u->inner + i);
            if (va != vb)
                return va < vb ? -1 : 1;
        }
    return 0;
}

static bool unique_geometry(const struct cp_node *n, const struct cp_tensor *x, struct uq *u,
                            int *axis)
{
    const struct cp_attr *a = cp_node_attr(n, "axis");
    u->outer = u->inner = 1;
    u->len = cp_ref_numel(&x->shape);
    *axis = -1;
    if (!a)
        return true;
    return cp_eval_axis(a->i, x->shape.rank, axis) &&
           cp_ri_axis_geometry(&x->shape, *axis, &u->outer, &u->len, &u->inner);
}

static bool unique_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs < 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    struct uq u;
    int axis;
    if (!x || y->dtype != x->dtype || !unique_geometry(n, x, &u, &axis))
        return false;
    int64_t nu = axis < 0 ? (y->shape.rank == 1 ? y->shape.dims[0].value : -1)
                          : (y->shape.rank == x->shape.rank ? y->shape.dims[axis].value : -1);
    if (nu < 0)
        return false;
    for (size_t o = 1; o < n->n_outputs; o++) {
        const struct cp_tensor *t = cp_ref_out(g, n, o);
        if (t && (t->dtype != CP_DTYPE_I64 || t->shape.rank != 1 ||
                  t->shape.dims[0].value != (o == 2 ? u.len : nu)))
            return false;
    }
    return true;
}

static enum cp_status unique_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    struct uq u;
    int axis;
    if (!unique_geometry(k->node, k->in[0], &u, &axis))
        return CP_ERR_INTERNAL;
    k->scratch_bytes = (size_t)(u.len + 1) * 2 * sizeof(int64_t);
    return CP_OK;
}

static enum cp_status unique_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    struct uq u = {.x = k->in_data[0], .dt = x->dtype};
    int axis;
    if (!unique_geometry(k->node, x, &u, &axis))
        return CP_ERR_INTERNAL;
    int64_t *first = k->scratch, *inv = first + u.len + 1, nu = 0;
    /* First occurrences in input order, and each slice's unique slot. */
    for (int64_t l = 0; l < u.len; l++) {
        int64_t j = 0;
        while (j < nu && slice_cmp(&u, first[j], l) != 0)
            j++;
        if (j == nu)
            first[nu++] = l;
        inv[l] = j;
    }
    int64_t want = axis < 0 ? y->shape.dims[0].value : y->shape.dims[axis].value;
    if (nu != want)
        return CP_ERR_INTERNAL; /* the data disagrees with the planned shape */
    /* sorted: order the unique slices (insertion sort, stable), remapping
     * each slot to its rank. */
    if (cp_node_attr_int(k->node, "sorted", 1) != 0) {
        for (int64_t i = 1; i < nu; i++) {
            int64_t v = first[i], j = i;
            while (j > 0 && slice_cmp(&u, first[j - 1], v) > 0) {
                first[j] = first[j - 1];
                j--;
            }
            first[j] = v;
        }
        for (int64_t l = 0; l < u.len; l++) {
            int64_t j = 0;
            while (slice_cmp(&u, first[j], l) != 0)
                j++;
            inv[l] = j;
        }
    }
    size_t es = cp_dtype_size(x->dtype);
    for (int64_t o = 0; o < u.outer; o++)
        for (int64_t j = 0; j < nu; j++)
            memcpy((char *)k->out_data[0] + (o * nu + j) * u.inner * (int64_t)es,
                   (const char *)k->in_data[0] + (o * u.len + first[j]) * u.inner * (int64_t)es,
                   (size_t)u.inner * es);
    if (k->node->n_outputs > 1 && k->out_data[1])
        for (int64_t j = 0; j < nu; j++)
            ((int64_t *)k->out_data[1])[j] = first[j];
    if (k->node->n_outputs > 2 && k->out_data[2])
        for (int64_t l = 0; l < u.len; l++)
            ((int64_t *)k->out_data[2])[l] = inv[l];
    if (k->node->n_outputs > 3 && k->out_data[3]) {
        int64_t *cnt = k->out_data[3];
        for (int64_t j = 0; j < nu; j++)
            cnt[j] = 0;
        for (int64_t l = 0; l < u.len; l++)
            cnt[inv[l]]++;
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_unique, CP_OP_UNIQUE, unique_supports, unique_prepare, unique_run);
