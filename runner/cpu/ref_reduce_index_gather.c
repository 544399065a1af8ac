/* Reference kernels of the reduce_index family, part 2: indexing
 * (GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
 * Compress, NonZero, OneHot, Trilu, Tile, Size, EyeLike). Elements move as
 * bytes; scatter reductions compute in double (floats) or int64.
 *
 * An index out of range fails the run (CP_ERR_INTERNAL) rather than read
 * or write past the data. Compress and NonZero, whose output size depends
 * on the data, check that the data agrees with the planned output shape
 * before writing anything. */
#include "runner/cpu/ref_reduce_index.h"

#include <string.h>

#define ELEM(p, i, es)  ((char *)(p) + (int64_t)(i) * (int64_t)(es))
#define CELEM(p, i, es) ((const char *)(p) + (int64_t)(i) * (int64_t)(es))

static bool fix_index(int64_t *v, int64_t dim)
{
    if (*v < 0)
        *v += dim;
    return *v >= 0 && *v < dim;
}

/* Coordinates of flat index i in static shape s. */
static void unravel(const struct cp_shape *s, int64_t i, int64_t *co)
{
    for (int a = s->rank - 1; a >= 0; a--) {
        int64_t dm = s->dims[a].value;
        co[a] = dm ? i % dm : 0;
        i = dm ? i / dm : 0;
    }
}

static int64_t ravel(const struct cp_shape *s, const int64_t *co)
{
    int64_t f = 0;
    for (int a = 0; a < s->rank; a++)
        f = f * s->dims[a].value + co[a];
    return f;
}

/* ---- GatherElements ---------------------------------------------------------------------- */

static bool gather_el_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    int axis;
    if (!x || !ix || !cp_ri_is_index(ix->dtype) || y->dtype != x->dtype ||
        x->shape.rank != ix->shape.rank || x->shape.rank == 0 ||
        !cp_shape_equal(&y->shape, &ix->shape) ||
        !cp_eval_axis(cp_node_attr_int(n, "axis", 0), x->shape.rank, &axis))
        return false;
    return true;
}

static enum cp_status gather_el_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *ix = k->in[1];
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(k->node, "axis", 0), x->shape.rank, &axis))
        return CP_ERR_INTERNAL;
    size_t es = cp_dtype_size(x->dtype);
    int64_t n = cp_ref_numel(&ix->shape), co[CP_MAX_RANK];
    for (int64_t i = 0; i < n; i++) {
        unravel(&ix->shape, i, co);
        int64_t v = cp_elem_load_i64(k->in_data[1], ix->dtype, i);
        if (!fix_index(&v, x->shape.dims[axis].value))
            return CP_ERR_INTERNAL;
        co[axis] = v;
        for (int a = 0; a < x->shape.rank; a++)
            if (co[a] >= x->shape.dims[a].value)
                return CP_ERR_INTERNAL;
        memcpy(ELEM(k->out_data[0], i, es), CELEM(k->in_data[0], ravel(&x->shape, co), es), es);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_gather_elements, CP_OP_GATHER_ELEMENTS, gather_el_supports, NULL,
              gather_el_run);

/* ---- GatherND, ScatterND geometry ------------------------------------------------------------ */

/* data [b..., m dims addressed, slice...], indices [b..., q..., m]. */
struct nd_geom {
    int64_t batches, per_batch, m, slice, data_per_batch;
};

static bool nd_geometry(const struct cp_shape *x, const struct cp_shape *ix, int64_t b,
                        struct nd_geom *gm)
{
    int rd = x->rank, ri = ix->rank;
    if (rd < 1 || ri < 1 || b < 0 || b >= rd || b >= ri)
        return false;
    gm->m = ix->dims[ri - 1].value;
    if (gm->m < 1 || b + gm->m > rd)
        return false;
    for (int a = 0; a < b; a++)
        if (x->dims[a].value != ix->dims[a].value)
            return false;
    gm->batches = cp_ref_span(x, 0, (int)b);
    gm->per_batch = cp_ref_span(ix, (int)b, ri - 1);
    gm->slice = cp_ref_span(x, (int)(b + gm->m), rd);
    gm->data_per_batch = cp_ref_span(x, (int)b, rd);
    return true;
}

/* Element offset, within one batch of data, of the slice indices `p`
 * address; -1 when out of range. */
static int64_t nd_offset(const struct cp_shape *x, int64_t b, const struct nd_geom *gm,
                         const void *idx, enum cp_dtype idt, int64_t at)
{
    int64_t off = 0;
    for (int64_t q = 0; q < gm->m; q++) {
        int64_t v = cp_elem_load_i64(idx, idt, at + q), dm = x->dims[b + q].value;
        if (!fix_index(&v, dm))
            return -1;
        off = off * dm + v;
    }
    return off * gm->slice;
}

static bool gather_nd_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    struct nd_geom gm;
    return x && ix && ix->dtype == CP_DTYPE_I64 && y->dtype == x->dtype &&
           nd_geometry(&x->shape, &ix->shape, cp_node_attr_int(n, "batch_dims", 0), &gm) &&
           cp_ref_numel(&y->shape) == gm.batches * gm.per_batch * gm.slice;
}

static enum cp_status gather_nd_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *ix = k->in[1];
    int64_t b = cp_node_attr_int(k->node, "batch_dims", 0);
    struct nd_geom gm;
    if (!nd_geometry(&x->shape, &ix->shape, b, &gm))
        return CP_ERR_INTERNAL;
    size_t es = cp_dtype_size(x->dtype);
    for (int64_t bb = 0; bb < gm.batches; bb++)
        for (int64_t j = 0; j < gm.per_batch; j++) {
            int64_t at = (bb * gm.per_batch + j);
            int64_t off = nd_offset(&x->shape, b, &gm, k->in_data[1], ix->dtype, at * gm.m);
            if (off < 0)
                return CP_ERR_INTERNAL;
            int64_t src = bb * gm.data_per_batch + off;
            if (gm.slice == 1 && es == 4) /* scores picked one by one (detectors) */
                ((uint32_t *)k->out_data[0])[at] = ((const uint32_t *)k->in_data[0])[src];
            else
                memcpy(ELEM(k->out_data[0], at * gm.slice, es), CELEM(k->in_data[0], src, es),
                       (size_t)gm.slice * es);
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_gather_nd, CP_OP_GATHER_ND, gather_nd_supports, NULL, gather_nd_run);

/* ---- scatters ---------------------------------------------------------------------------------
 */

enum red { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN, RED_BAD };

static enum red reduction_of(const struct cp_node *n)
{
    const char *r = cp_node_attr_string(n, "reduction", "none");
    return strcmp(r, "none") == 0  ? RED_NONE
           : strcmp(r, "add") == 0 ? RED_ADD
           : strcmp(r, "mul") == 0 ? RED_MUL
           : strcmp(r, "max") == 0 ? RED_MAX
           : strcmp(r, "min") == 0 ? RED_MIN
                                   : RED_BAD;
}

/* y[dst] = reduce(y[dst], u[src]) */
static void apply(enum red r, enum cp_dtype dt, void *y, int64_t dst, const void *u, int64_t src)
{
    size_t es = cp_dtype_size(dt);
    if (r == RED_NONE) {
        memcpy(ELEM(y, dst, es), CELEM(u, src, es), es);
    } else if (cp_dtype_is_float(dt)) {
        double a = cp_elem_load_f64(y, dt, dst), b = cp_elem_load_f64(u, dt, src);
        double v = r == RED_ADD   ? a + b
                   : r == RED_MUL ? a * b
                   : r == RED_MAX ? (a > b ? a : b)
                                  : (a < b ? a : b);
        cp_eval_store_f64(y, dt, dst, v);
    } else {
        int64_t a = cp_elem_load_i64(y, dt, dst), b = cp_elem_load_i64(u, dt, src);
        int64_t v = r == RED_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
                    : r == RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                    : r == RED_MAX ? (a > b ? a : b)
                                   : (a < b ? a : b);
        cp_eval_store_i64(y, dt, dst, v);
    }
}

static bool scatter_common(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1 || n->n_inputs != 3)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1);
    const struct cp_tensor *u = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    enum red r = reduction_of(n);
    return x && ix && u && cp_ri_is_index(ix->dtype) && u->dtype == x->dtype &&
           y->dtype == x->dtype && cp_shape_equal(&x->shape, &y->shape) && r != RED_BAD &&
           !(r != RED_NONE && x->dtype == CP_DTYPE_BOOL);
}

static bool scatter_el_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!scatter_common(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1);
    const struct cp_tensor *u = cp_ref_in(g, n, 2);
    int axis;
    return x->shape.rank > 0 && ix->shape.rank == x->shape.rank &&
           cp_shape_equal(&ix->shape, &u->shape) &&
           cp_eval_axis(cp_node_attr_int(n, "axis", 0), x->shape.rank, &axis);
}

static enum cp_status scatter_el_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *ix = k->in[1];
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(k->node, "axis", 0), x->shape.rank, &axis))
        return CP_ERR_INTERNAL;
    enum red r = reduction_of(k->node);
    cp_ref_copy(k->out_data[0], k->in_data[0],
                (size_t)cp_ref_numel(&x->shape) * cp_dtype_size(x->dtype));
    int64_t n = cp_ref_numel(&ix->shape), co[CP_MAX_RANK];
    for (int64_t i = 0; i < n; i++) {
        unravel(&ix->shape, i, co);
        int64_t v = cp_elem_load_i64(k->in_data[1], ix->dtype, i);
        if (!fix_index(&v, x->shape.dims[axis].value))
            return CP_ERR_INTERNAL;
        co[axis] = v;
        for (int a = 0; a < x->shape.rank; a++)
            if (co[a] >= x->shape.dims[a].value)
                return CP_ERR_INTERNAL;
        apply(r, x->dtype, k->out_data[0], ravel(&x->shape, co), k->in_data[2], i);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_scatter_elements, CP_OP_SCATTER_ELEMENTS, scatter_el_supports, NULL,
              scatter_el_run);
CP_REF_KERNEL(cp_ref_scatter, CP_OP_SCATTER, scatter_el_supports, NULL, scatter_el_run);

static bool scatter_nd_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!scatter_common(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1);
    const struct cp_tensor *u = cp_ref_in(g, n, 2);
    struct nd_geom gm;
    return ix->dtype == CP_DTYPE_I64 && nd_geometry(&x->shape, &ix->shape, 0, &gm) &&
           cp_ref_numel(&u->shape) == gm.per_batch * gm.slice;
}

static enum cp_status scatter_nd_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *ix = k->in[1];
    struct nd_geom gm;
    if (!nd_geometry(&x->shape, &ix->shape, 0, &gm))
        return CP_ERR_INTERNAL;
    enum red r = reduction_of(k->node);
    cp_ref_copy(k->out_data[0], k->in_data[0],
                (size_t)cp_ref_numel(&x->shape) * cp_dtype_size(x->dtype));
    for (int64_t j = 0; j < gm.per_batch; j++) {
        int64_t off = nd_offset(&x->shape, 0, &gm, k->in_data[1], ix->dtype, j * gm.m);
        if (off < 0)
            return CP_ERR_INTERNAL;
        for (int64_t e = 0; e < gm.slice; e++)
            apply(r, x->dtype, k->out_data[0], off + e, k->in_data[2], j * gm.slice + e);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_scatter_nd, CP_OP_SCATTER_ND, scatter_nd_supports, NULL, scatter_nd_run);

/* ---- Compress ----------------------------------------------------------------------------------
 */

static bool compress_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *cd = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    const struct cp_attr *a = cp_node_attr(n, "axis");
    int axis;
    if (!x || !cd || cd->dtype != CP_DTYPE_BOOL || cd->shape.rank != 1 || y->dtype != x->dtype)
        return false;
    if (!a)
        return y->shape.rank == 1;
    if (!cp_eval_axis(a->i, x->shape.rank, &axis) || y->shape.rank != x->shape.rank)
        return false;
    for (int k = 0; k < x->shape.rank; k++)
        if (k != axis && y->shape.dims[k].value != x->shape.dims[k].value)
            return false;
    return true;
}

static enum cp_status compress_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *cd = k->in[1], *y = k->out[0];
    const struct cp_attr *a = cp_node_attr(k->node, "axis");
    const uint8_t *c = k->in_data[1];
    size_t es = cp_dtype_size(x->dtype);
    int64_t outer = 1, len = cp_ref_numel(&x->shape), inner = 1, ylen;
    int axis = 0;
    if (a) {
        if (!cp_eval_axis(a->i, x->shape.rank, &axis) ||
            !cp_ri_axis_geometry(&x->shape, axis, &outer, &len, &inner))
            return CP_ERR_INTERNAL;
        ylen = y->shape.dims[axis].value;
    } else {
        ylen = y->shape.dims[0].value;
    }
    int64_t nc = cp_ref_numel(&cd->shape), count = 0;
    if (nc > len)
        return CP_ERR_INTERNAL; /* a condition longer than the axis */
    for (int64_t l = 0; l < nc; l++)
        count += c[l] != 0;
    if (count != ylen)
        return CP_ERR_INTERNAL; /* the data disagrees with the planned shape */
    for (int64_t o = 0; o < outer; o++) {
        int64_t j = 0;
        for (int64_t l = 0; l < nc; l++) {
            if (!c[l])
                continue;
            memcpy(ELEM(k->out_data[0], (o * ylen + j) * inner, es),
                   CELEM(k->in_data[0], (o * len + l) * inner, es), (size_t)inner * es);
            j++;
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_compress, CP_OP_COMPRESS, compress_supports, NULL, compress_run);

/* ---- NonZero -----------------------------------------------------------------------------------
 */

static bool nonzero_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && y->dtype == CP_DTYPE_I64 && y->shape.rank == 2 &&
           y->shape.dims[0].value == (x->shape.rank ? x->shape.rank : 1);
}

/* One pass finds the positions, into the last row of y; each is then
 * unravelled into its column (read before the last row is overwritten). */
static enum cp_status nonzero_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    int64_t n = cp_ref_numel(&x->shape), count = y->shape.dims[1].value, co[CP_MAX_RANK] = {0};
    int r = x->shape.rank ? x->shape.rank : 1;
    int64_t *out = k->out_data[0], *last = out + (int64_t)(r - 1) * count;
    if (cp_elem_count_nonzero(k->in_data[0], x->dtype, n, last, count) != count)
        return CP_ERR_INTERNAL; /* the data disagrees with the planned shape */
    /* rank 0 and 1: the positions are the answer */
    for (int64_t j = 0; j < count && r > 1; j++) {
        unravel(&x->shape, last[j], co);
        for (int d = 0; d < r; d++)
            out[d * count + j] = co[d];
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_non_zero, CP_OP_NON_ZERO, nonzero_supports, NULL, nonzero_run);

/* ---- OneHot ---------------------------------------------------------------------------------- */

static bool onehot_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *ix = cp_ref_in(g, n, 0), *dp = cp_ref_in(g, n, 1);
    const struct cp_tensor *v = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    int axis;
    return ix && dp && v && cp_ref_numel(&dp->shape) == 1 && cp_ref_numel(&v->shape) == 2 &&
           y->dtype == v->dtype && y->shape.rank == ix->shape.rank + 1 &&
           ix->dtype != CP_DTYPE_BOOL &&
           cp_eval_axis(cp_node_attr_int(n, "axis", -1), y->shape.rank, &axis);
}

static enum cp_status onehot_run(struct cp_kexec *k)
{
    const struct cp_tensor *ix = k->in[0], *dp = k->in[1], *y = k->out[0];
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(k->node, "axis", -1), y->shape.rank, &axis))
        return CP_ERR_INTERNAL;
    double dv = cp_elem_load_f64(k->in_data[1], dp->dtype, 0);
    int64_t depth = (int64_t)dv;
    if (depth != y->shape.dims[axis].value)
        return CP_ERR_INTERNAL; /* depth disagrees with the planned shape */
    size_t es = cp_dtype_size(y->dtype);
    int64_t outer = cp_ref_span(&y->shape, 0, axis),
            inner = cp_ref_span(&y->shape, axis + 1, y->shape.rank);
    int64_t ny = cp_ref_numel(&y->shape);
    for (int64_t i = 0; i < ny; i++)
        memcpy(ELEM(k->out_data[0], i, es), k->in_data[2], es);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t at = o * inner + i;
            int64_t v = cp_dtype_is_float(ix->dtype)
                            ? (int64_t)cp_elem_load_f64(k->in_data[0], ix->dtype, at)
                            : cp_elem_load_i64(k->in_data[0], ix->dtype, at);
            if (!fix_index(&v, depth))
                continue; /* out of range: all "off" */
            memcpy(ELEM(k->out_data[0], (o * depth + v) * inner + i, es),
                   CELEM(k->in_data[2], 1, es), es);
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_one_hot, CP_OP_ONE_HOT, onehot_supports, NULL, onehot_run);

/* ---- Trilu --------------------------------------------------------------------------------------
 */

static bool trilu_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *kt = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    return x && x->shape.rank >= 2 && y->dtype == x->dtype &&
           cp_shape_equal(&x->shape, &y->shape) &&
           (!kt || (kt->dtype == CP_DTYPE_I64 && cp_ref_numel(&kt->shape) == 1));
}

static enum cp_status trilu_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0];
    int64_t kk = k->node->n_inputs > 1 && k->in_data[1] ? *(const int64_t *)k->in_data[1] : 0;
    bool upper = cp_node_attr_int(k->node, "upper", 1) != 0;
    int r = x->shape.rank;
    int64_t rows = x->shape.dims[r - 2].value, cols = x->shape.dims[r - 1].value;
    int64_t mats = cp_ref_span(&x->shape, 0, r - 2);
    size_t es = cp_dtype_size(x->dtype);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                int64_t at = (m * rows + i) * cols + j;
                bool keep = upper ? j - i >= kk : j - i <= kk;
                if (keep)
                    memcpy(ELEM(k->out_data[0], at, es), CELEM(k->in_data[0], at, es), es);
                else
                    memset(ELEM(k->out_data[0], at, es), 0, es);
            }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_trilu, CP_OP_TRILU, trilu_supports, NULL, trilu_run);

/* ---- Tile ---------------------------------------------------------------------------------------
 */

static bool tile_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!x || y->dtype != x->dtype || y->shape.rank != x->shape.rank)
        return false;
    for (int a = 0; a < x->shape.rank; a++) {
        int64_t xd = x->shape.dims[a].value, yd = y->shape.dims[a].value;
        if (xd == 0 ? yd != 0 : yd % xd != 0)
            return false;
    }
    return true;
}

static enum cp_status tile_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    const struct cp_tensor *rp = k->in[1];
    for (int a = 0; a < x->shape.rank; a++)
        if (x->shape.dims[a].value * cp_elem_load_i64(k->in_data[1], rp->dtype, a) !=
            y->shape.dims[a].value)
            return CP_ERR_INTERNAL; /* repeats disagree with the planned shape */
    size_t es = cp_dtype_size(x->dtype);
    int64_t ny = cp_ref_numel(&y->shape), co[CP_MAX_RANK];
    for (int64_t i = 0; i < ny; i++) {
        unravel(&y->shape, i, co);
        for (int a = 0; a < x->shape.rank; a++)
            co[a] %= x->shape.dims[a].value;
        memcpy(ELEM(k->out_data[0], i, es), CELEM(k->in_data[0], ravel(&x->shape, co), es), es);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_tile, CP_OP_TILE, tile_supports, NULL, tile_run);

/* ---- Size, EyeLike ------------------------------------------------------------------------------
 */

static bool size_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    return cp_ref_node_is_static(g, n) && n->n_outputs == 1 && y->dtype == CP_DTYPE_I64 &&
           cp_ref_numel(&y->shape) == 1;
}

static enum cp_status size_run(struct cp_kexec *k)
{
    *(int64_t *)k->out_data[0] = cp_ref_numel(&k->in[0]->shape);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_size, CP_OP_SIZE, size_supports, NULL, size_run);

static bool eye_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    return x && x->shape.rank == 2 && cp_shape_equal(&x->shape, &y->shape);
}

static enum cp_status eye_run(struct cp_kexec *k)
{
    const struct cp_tensor *y = k->out[0];
    int64_t rows = y->shape.dims[0].value, cols = y->shape.dims[1].value;
    int64_t kk = cp_node_attr_int(k->node, "k", 0);
    memset(k->out_data[0], 0, (size_t)(rows * cols) * cp_dtype_size(y->dtype));
    for (int64_t i = 0; i < rows; i++)
        if (i + kk >= 0 && i + kk < cols)
            cp_eval_store_f64(k->out_data[0], y->dtype, i * cols + i + kk, 1.0);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_eye_like, CP_OP_EYE_LIKE, eye_supports, NULL, eye_run);
