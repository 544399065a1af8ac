/*
 * Data movement in plain C, for any element type (copied as bytes):
 * Concat, Split, Slice, Gather and nearest-neighbour Resize. Concat and
 * Split also take channel parts in NHWC or blocked layouts; Slice and a
 * constant-index channel Gather also take NHWC.
 *
 * Each kernel reduces its node to "rows": the output is walked in runs
 * that are contiguous in both tensors (memcpy) or, for Slice with a step
 * and Resize, in runs with a fixed input stride or an index table. Index
 * tables and offsets are computed in prepare; run only copies.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_shared.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define COPY_GRAIN (256 * 1024) /* bytes per thread worth splitting for */
/* Concat and Split split finer: their parts were often written layers ago
 * and come from the last-level cache, where one thread's bandwidth is the
 * limit (DenseNet's Concats of 16-256 KiB took twice the time of a Relu). */
#define CAT_GRAIN (32 * 1024)

static void state_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

static int norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

/* ---- Concat / Split ----------------------------------------------------- */

/* Concat and Split share a geometry: `outer` rows, each the concatenation
 * of the parts' chunks (chunk[i] bytes of part i). */
struct cat_state {
    int64_t outer;
    size_t nparts;
    size_t row;     /* bytes per outer row of the whole tensor */
    size_t chunk[]; /* bytes per outer row of each part */
};

/* Per-dim values of an NCHW-ordered rank-4 tensor in NHWC byte order. */
static void nhwc_order(int64_t *v)
{
    int64_t c = v[1];
    v[1] = v[2];
    v[2] = v[3];
    v[3] = c;
}

/* The dims of t as its bytes are ordered: NHWC's [N, H, W, C]; blocked
 * tensors keep their logical dims, since a channel concatenation of
 * nChw{B}c parts whose channels fill whole blocks moves the same bytes as
 * one of NCHW parts. */
static int byte_dims(const struct cp_tensor *t, int64_t *d)
{
    int r = cp_fk_dims(t, d);
    if (r == 4 && t->layout == CP_LAYOUT_NHWC)
        nhwc_order(d);
    return r;
}

static bool cat_geom(const struct cp_tensor *whole, const struct cp_tensor *const *parts, size_t np,
                     int64_t axis_attr, int64_t *outer, size_t *chunks, size_t *row)
{
    int64_t wd[CP_MAX_RANK], pd[CP_MAX_RANK];
    int r = byte_dims(whole, wd);
    if (r < 1)
        return false;
    int ax = norm_axis(axis_attr, r);
    if (ax < 0)
        return false;
    if (!cp_tensor_is_plain(whole)) {
        /* laid out: channels only, every part in the whole's layout */
        if (r != 4 || ax != 1)
            return false;
        for (size_t p = 0; p < np; p++)
            if (!parts[p] || parts[p]->layout != whole->layout)
                return false;
        if (whole->layout == CP_LAYOUT_NHWC)
            ax = 3;
    } else {
        for (size_t p = 0; p < np; p++)
            if (parts[p] && !cp_tensor_is_plain(parts[p]))
                return false;
    }
    size_t es = cp_dtype_size(whole->dtype);
    int64_t o = 1, inner = 1, sum = 0;
    for (int i = 0; i < ax; i++)
        o *= wd[i];
    for (int i = ax + 1; i < r; i++)
        inner *= wd[i];
    for (size_t p = 0; p < np; p++) {
        if (!parts[p] || parts[p]->dtype != whole->dtype || byte_dims(parts[p], pd) != r)
            return false;
        for (int i = 0; i < r; i++)
            if (i != ax && pd[i] != wd[i])
                return false;
        sum += pd[ax];
        if (chunks)
            chunks[p] = (size_t)(pd[ax] * inner) * es;
    }
    if (sum != wd[ax] || es == 0)
        return false;
    *outer = o;
    *row = (size_t)(wd[ax] * inner) * es;
    return true;
}

static bool concat_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *parts[64];
    if (n->n_inputs < 1 || n->n_inputs > 64 || n->n_outputs != 1 || !cp_fk_out(g, n, 0) ||
        !cp_node_attr(n, "axis"))
        return false;
    for (size_t i = 0; i < n->n_inputs; i++)
        parts[i] = cp_fk_in(g, n, i);
    int64_t outer;
    size_t row;
    return cat_geom(cp_fk_out(g, n, 0), parts, n->n_inputs, cp_node_attr_int(n, "axis", 0), &outer,
                    NULL, &row);
}

static bool split_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *parts[64];
    if (n->n_inputs < 1 || n->n_inputs > 2 || n->n_outputs < 1 || n->n_outputs > 64 ||
        !cp_fk_in(g, n, 0))
        return false;
    for (size_t i = 0; i < n->n_outputs; i++)
        if (!(parts[i] = cp_fk_out(g, n, i)))
            return false;
    int64_t outer;
    size_t row;
    return cat_geom(cp_fk_in(g, n, 0), parts, n->n_outputs, cp_node_attr_int(n, "axis", 0), &outer,
                    NULL, &row);
}

static enum cp_status cat_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    bool split = k->node->op == CP_OP_SPLIT;
    size_t np = split ? k->node->n_outputs : k->node->n_inputs;
    struct cat_state *s = calloc(1, sizeof *s + np * sizeof(size_t));
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_tensor *whole = split ? k->in[0] : k->out[0];
    const struct cp_tensor *const *parts = split ? k->out : k->in;
    if (!cat_geom(whole, parts, np, cp_node_attr_int(k->node, "axis", 0), &s->outer, s->chunk,
                  &s->row)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': shapes do not match", k->node->name);
    }
    s->nparts = np;
    k->state = s;
    return CP_OK;
}

/* The whole tensor is the chunks (o, p) in order, back to back: each
 * thread copies its share of the whole's bytes, cut through chunks where
 * it falls, so a Concat of one big part and many thin ones (DenseNet's)
 * splits evenly, and maps that sit in the last-level cache (parts written
 * layers ago) are read with every thread's bandwidth. */
static enum cp_status cat_run(struct cp_kexec *k)
{
    const struct cat_state *s = k->state;
    bool split = k->node->op == CP_OP_SPLIT;
    char *whole = split ? k->in_data[0] : k->out_data[0];
    void **parts = split ? k->out_data : k->in_data;
    int64_t bytes = s->outer * (int64_t)s->row;
    if (bytes == 0)
        return CP_OK;
    int nt = cp_fk_threads(k, bytes, CAT_GRAIN);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t b0, b1;
        cp_fk_split(bytes, 64, &b0, &b1);
        int64_t o = b0 / (int64_t)s->row;
        size_t at = (size_t)(b0 % (int64_t)s->row), off = 0, p = 0;
        while (p < s->nparts && off + s->chunk[p] <= at)
            off += s->chunk[p++];
        for (int64_t pos = b0; pos < b1;) {
            if (p == s->nparts) {
                o++;
                p = 0;
                off = 0;
                continue;
            }
            size_t in_chunk = (size_t)pos - (size_t)o * s->row - off;
            size_t n = s->chunk[p] - in_chunk;
            if ((int64_t)n > b1 - pos)
                n = (size_t)(b1 - pos);
            char *w = whole + (size_t)pos;
            char *pp = (char *)parts[p] + (size_t)o * s->chunk[p] + in_chunk;
            if (n) {
                if (split)
                    memcpy(pp, w, n);
                else
                    memcpy(w, pp, n);
            }
            pos += (int64_t)n;
            off += s->chunk[p++];
        }
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_concat = {
    "c:concat", CP_OP_CONCAT, concat_supports, cat_prepare, cat_run, state_release, NULL};
const struct cp_kernel cp_fast_split = {
    "c:split", CP_OP_SPLIT, split_supports, cat_prepare, cat_run, state_release, NULL};

/* ---- strided copies (Slice, Resize) ------------------------------------- */

/* out[i0, .., i_{r-1}] = in[sum_d idx_d(i_d)] where idx_d is either
 * start_d + i*step_d (in elements of the input, pre-multiplied by the
 * input stride) or a table. The last dim is the inner loop. */
struct gather_state {
    int rank;
    size_t es;
    int64_t odims[CP_MAX_RANK];
    int64_t rows;
    int64_t *tab[CP_MAX_RANK]; /* per dim: input element offset of each output index */
    int64_t storage[];
};

static struct gather_state *gather_alloc(int rank, const int64_t *odims, size_t es)
{
    int64_t total = 0;
    for (int i = 0; i < rank; i++)
        total += odims[i];
    struct gather_state *s = calloc(1, sizeof *s + (size_t)total * sizeof(int64_t));
    if (!s)
        return NULL;
    s->rank = rank;
    s->es = es;
    s->rows = 1;
    int64_t *p = s->storage;
    for (int i = 0; i < rank; i++) {
        s->odims[i] = odims[i];
        s->tab[i] = p;
        p += odims[i];
        if (i < rank - 1)
            s->rows *= odims[i];
    }
    return s;
}

/* Every dim's table reads input index start[d] + j * step[d] (NULL: 0
 * and 1), for an input of dims xd in s's byte order. */
static void strided_tables(struct gather_state *s, const int64_t *xd, const int64_t *start,
                           const int64_t *step)
{
    int64_t stride = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        for (int64_t j = 0; j < s->odims[i]; j++)
            s->tab[i][j] = ((start ? start[i] : 0) + j * (step ? step[i] : 1)) * stride;
        stride *= xd[i];
    }
}

#define GATHER_INNER(T)                                                                            \
    do {                                                                                           \
        const T *src_ = (const T *)in + base;                                                      \
        T *dst_ = (T *)out + r * L;                                                                \
        for (int64_t j = 0; j < L; j++)                                                            \
            dst_[j] = src_[t[j]];                                                                  \
    } while (0)

/* dst[2i] = dst[2i + 1] = src[i] for i < n: a row of a 2x nearest upsample. */
CP_FK_HOT static void dup2_u32(const uint32_t *src, uint32_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        dst[2 * i] = src[i];
        dst[2 * i + 1] = src[i];
    }
}

/* How the last dim's index table reads its row. */
enum { ROW_GATHER, ROW_CONTIGUOUS, ROW_DUP2 };

static int row_kind(const int64_t *t, int64_t L, size_t es)
{
    bool contiguous = true, dup2 = es == 4 && L % 2 == 0;
    for (int64_t j = 1; j < L && contiguous; j++)
        contiguous = t[j] == t[0] + j;
    for (int64_t j = 0; j < L && dup2; j++)
        dup2 = t[j] == t[0] + j / 2;
    return contiguous ? ROW_CONTIGUOUS : dup2 ? ROW_DUP2 : ROW_GATHER;
}

/*
 * Each thread walks its output rows with an odometer over the outer dims
 * (no divisions per row), and a row whose source row is the previous
 * row's (a nearest upsample repeats every source row) is a copy of the
 * output row just written.
 */
static enum cp_status gather_run(struct cp_kexec *k)
{
    const struct gather_state *s = k->state;
    const char *in = k->in_data[0];
    char *out = k->out_data[0];
    int R = s->rank;
    int64_t L = s->odims[R - 1];
    const int64_t *t = s->tab[R - 1];
    int kind = row_kind(t, L, s->es);
    size_t row_bytes = (size_t)L * s->es;
    int nt = cp_fk_threads(k, s->rows * L * (int64_t)s->es, COPY_GRAIN);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, r1, idx[CP_MAX_RANK] = {0};
        cp_fk_split(s->rows, 1, &r0, &r1);
        for (int64_t q = r0, d = R - 2; d >= 0; d--) {
            idx[d] = q % s->odims[d];
            q /= s->odims[d];
        }
        int64_t prev = -1;
        for (int64_t r = r0; r < r1; r++) {
            int64_t base = 0;
            for (int d = 0; d < R - 1; d++)
                base += s->tab[d][idx[d]];
            for (int d = R - 2; d >= 0 && ++idx[d] == s->odims[d]; d--)
                idx[d] = 0;
            char *dst = out + (size_t)r * row_bytes;
            if (base == prev) {
                memcpy(dst, dst - row_bytes, row_bytes);
                continue;
            }
            prev = base;
            if (kind == ROW_CONTIGUOUS) {
                memcpy(dst, in + (size_t)(base + t[0]) * s->es, row_bytes);
                continue;
            }
            if (kind == ROW_DUP2) {
                dup2_u32((const uint32_t *)in + base + t[0], (uint32_t *)dst, L / 2);
                continue;
            }
            switch (s->es) {
            case 1:
                GATHER_INNER(uint8_t);
                break;
            case 2:
                GATHER_INNER(uint16_t);
                break;
            case 4:
                GATHER_INNER(uint32_t);
                break;
            default:
                GATHER_INNER(uint64_t);
                break;
            }
        }
    }
    return CP_OK;
}

/* Slice: starts/ends/axes/steps as constant inputs (opset >= 10). */
static bool slice_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *start,
                       int64_t *step)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 1 || cp_fk_dims(y, yd) != r || x->dtype != y->dtype || n->n_inputs < 3)
        return false;
    if ((!cp_tensor_is_plain(x) || !cp_tensor_is_plain(y)) &&
        (r != 4 || x->layout != CP_LAYOUT_NHWC || y->layout != CP_LAYOUT_NHWC))
        return false; /* laid out: NHWC only, walked in its byte order */
    int64_t st[CP_MAX_RANK], en[CP_MAX_RANK], ax[CP_MAX_RANK], sp[CP_MAX_RANK];
    size_t ns, ne, na, nsp;
    if (!cp_fk_const_ints(cp_fk_in(g, n, 1), st, CP_MAX_RANK, &ns) ||
        !cp_fk_const_ints(cp_fk_in(g, n, 2), en, CP_MAX_RANK, &ne) || ns != ne)
        return false;
    if (cp_fk_in(g, n, 3)) {
        if (!cp_fk_const_ints(cp_fk_in(g, n, 3), ax, CP_MAX_RANK, &na) || na != ns)
            return false;
    } else {
        for (size_t i = 0; i < ns; i++)
            ax[i] = (int64_t)i;
    }
    if (cp_fk_in(g, n, 4)) {
        if (!cp_fk_const_ints(cp_fk_in(g, n, 4), sp, CP_MAX_RANK, &nsp) || nsp != ns)
            return false;
    } else {
        for (size_t i = 0; i < ns; i++)
            sp[i] = 1;
    }
    for (int i = 0; i < r; i++) {
        start[i] = 0;
        step[i] = 1;
    }
    bool seen[CP_MAX_RANK] = {false};
    for (size_t i = 0; i < ns; i++) {
        int a = norm_axis(ax[i], r);
        if (a < 0 || seen[a] || sp[i] == 0)
            return false;
        seen[a] = true;
        int64_t dim = xd[a], s = st[i], e = en[i], k = sp[i], cnt;
        if (s < 0)
            s = s < -dim ? 0 : s + dim;
        if (e < 0)
            e = e < -dim ? -1 : e + dim;
        if (k > 0) {
            s = s > dim ? dim : s;
            e = e > dim ? dim : (e < 0 ? 0 : e);
            cnt = e > s ? (e - s + k - 1) / k : 0;
        } else {
            s = s > dim - 1 ? dim - 1 : s;
            e = e > dim - 1 ? dim - 1 : e;
            cnt = s > e ? (s - e + (-k) - 1) / (-k) : 0;
        }
        if (cnt != yd[a])
            return false;
        start[a] = s;
        step[a] = k;
    }
    for (int i = 0; i < r; i++)
        if (!seen[i] && yd[i] != xd[i])
            return false;
    return cp_shape_numel(&y->shape) > 0;
}

static bool slice_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t start[CP_MAX_RANK], step[CP_MAX_RANK];
    return n->n_outputs == 1 && cp_fk_in(g, n, 0) && cp_fk_out(g, n, 0) &&
           slice_geom(g, n, start, step);
}

static enum cp_status slice_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    int64_t start[CP_MAX_RANK], step[CP_MAX_RANK], xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    if (!slice_geom(k->g, k->node, start, step))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad slice", k->node->name);
    int r = byte_dims(k->in[0], xd);
    byte_dims(k->out[0], yd);
    if (k->in[0]->layout == CP_LAYOUT_NHWC) {
        nhwc_order(start);
        nhwc_order(step);
    }
    struct gather_state *s = gather_alloc(r, yd, cp_dtype_size(k->in[0]->dtype));
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    strided_tables(s, xd, start, step);
    k->state = s;
    return CP_OK;
}

const struct cp_kernel cp_fast_slice = {
    "c:slice", CP_OP_SLICE, slice_supports, slice_prepare, gather_run, state_release, NULL};

/* Resize, mode nearest, without roi. */
static double resize_src(const char *ctm, int64_t x, double scale, int64_t in, int64_t out)
{
    double xr = (double)x;
    if (strcmp(ctm, "asymmetric") == 0)
        return xr / scale;
    if (strcmp(ctm, "align_corners") == 0)
        return out == 1 ? 0.0 : xr * (double)(in - 1) / (double)(out - 1);
    if (strcmp(ctm, "pytorch_half_pixel") == 0)
        return out > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
    if (strcmp(ctm, "tf_half_pixel_for_nn") == 0)
        return (xr + 0.5) / scale;
    return (xr + 0.5) / scale - 0.5; /* half_pixel */
}

static int64_t resize_round(const char *nm, double v)
{
    if (strcmp(nm, "floor") == 0)
        return (int64_t)floor(v);
    if (strcmp(nm, "ceil") == 0)
        return (int64_t)ceil(v);
    double f = floor(v);
    if (v - f == 0.5)
        return strcmp(nm, "round_prefer_ceil") == 0 ? (int64_t)f + 1 : (int64_t)f;
    return (int64_t)floor(v + 0.5);
}

static bool resize_geom(const struct cp_graph *g, const struct cp_node *n, double *scales)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 1 || cp_fk_dims(y, yd) != r || x->dtype != y->dtype || n->n_outputs != 1)
        return false;
    if (strcmp(cp_node_attr_string(n, "mode", "nearest"), "nearest") != 0)
        return false;
    /* Resize-10 (and Upsample) coordinates, the opset-18 policies and
     * axes, and modes resize_src does not know are the reference's. */
    if (cp_fk_opset(g) < 11 || cp_node_attr(n, "axes") ||
        strcmp(cp_node_attr_string(n, "keep_aspect_ratio_policy", "stretch"), "stretch") != 0)
        return false;
    const char *ctm = cp_node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "asymmetric") && strcmp(ctm, "align_corners") &&
        strcmp(ctm, "pytorch_half_pixel") && strcmp(ctm, "tf_half_pixel_for_nn"))
        return false;
    const char *nm = cp_node_attr_string(n, "nearest_mode", "round_prefer_floor");
    if (strcmp(nm, "floor") && strcmp(nm, "ceil") && strcmp(nm, "round_prefer_floor") &&
        strcmp(nm, "round_prefer_ceil"))
        return false;
    float sc[CP_MAX_RANK];
    size_t nsc = 0;
    const struct cp_tensor *ts = cp_fk_in(g, n, 2);
    if (ts && cp_shape_numel(&ts->shape) > 0) {
        if (!cp_fk_const_floats(ts, sc, CP_MAX_RANK, &nsc) || nsc != (size_t)r)
            return false;
        for (int i = 0; i < r; i++) {
            if (!(sc[i] > 0.0f) || (int64_t)floor((double)xd[i] * sc[i]) != yd[i])
                return false;
            scales[i] = sc[i];
        }
    } else {
        for (int i = 0; i < r; i++) {
            if (xd[i] <= 0)
                return false;
            scales[i] = (double)yd[i] / (double)xd[i];
        }
    }
    return cp_shape_numel(&y->shape) > 0;
}

static bool resize_supports(const struct cp_graph *g, const struct cp_node *n)
{
    double scales[CP_MAX_RANK];
    return n->n_inputs >= 1 && n->n_inputs <= 4 && cp_fk_in(g, n, 0) && cp_fk_out(g, n, 0) &&
           resize_geom(g, n, scales);
}

static enum cp_status resize_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    double scales[CP_MAX_RANK];
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    if (!resize_geom(k->g, k->node, scales))
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad resize", k->node->name);
    int r = cp_fk_dims(k->in[0], xd);
    cp_fk_dims(k->out[0], yd);
    const char *ctm = cp_node_attr_string(k->node, "coordinate_transformation_mode", "half_pixel");
    const char *nm = cp_node_attr_string(k->node, "nearest_mode", "round_prefer_floor");
    struct gather_state *s = gather_alloc(r, yd, cp_dtype_size(k->in[0]->dtype));
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    int64_t stride = 1;
    for (int i = r - 1; i >= 0; i--) {
        for (int64_t j = 0; j < yd[i]; j++) {
            int64_t v = resize_round(nm, resize_src(ctm, j, scales[i], xd[i], yd[i]));
            v = v < 0 ? 0 : (v >= xd[i] ? xd[i] - 1 : v);
            s->tab[i][j] = v * stride;
        }
        stride *= xd[i];
    }
    k->state = s;
    return CP_OK;
}

const struct cp_kernel cp_fast_resize = {
    "c:resize_nearest", CP_OP_RESIZE, resize_supports, resize_prepare, gather_run,
    state_release,      NULL};

/* ---- Gather -------------------------------------------------------------- */

struct gidx_state {
    int64_t outer, nidx, dim;
    size_t inner_bytes;
    bool i64;
};

static bool gidx_geom(const struct cp_graph *g, const struct cp_node *n, struct gidx_state *s)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *ix = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 1 || !ix || !y || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) ||
        !cp_shape_is_static(&ix->shape) || !cp_shape_is_static(&y->shape) ||
        (ix->dtype != CP_DTYPE_I64 && ix->dtype != CP_DTYPE_I32) || y->dtype != x->dtype)
        return false;
    int ax = norm_axis(cp_node_attr_int(n, "axis", 0), r);
    if (ax < 0)
        return false;
    s->outer = 1;
    int64_t inner = 1;
    for (int i = 0; i < ax; i++)
        s->outer *= xd[i];
    for (int i = ax + 1; i < r; i++)
        inner *= xd[i];
    s->dim = xd[ax];
    s->nidx = cp_shape_numel(&ix->shape);
    s->inner_bytes = (size_t)inner * cp_dtype_size(x->dtype);
    s->i64 = ix->dtype == CP_DTYPE_I64;
    return cp_shape_numel(&y->shape) == s->outer * s->nidx * inner && s->dim > 0;
}

static bool gidx_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct gidx_state s;
    return n->n_inputs == 2 && n->n_outputs == 1 && gidx_geom(g, n, &s);
}

static enum cp_status gidx_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct gidx_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (!gidx_geom(k->g, k->node, s)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad gather", k->node->name);
    }
    k->state = s;
    return CP_OK;
}

static enum cp_status gidx_run(struct cp_kexec *k)
{
    const struct gidx_state *s = k->state;
    const char *x = k->in_data[0];
    char *y = k->out_data[0];
    const int64_t *i64 = k->in_data[1];
    const int32_t *i32 = k->in_data[1];
    for (int64_t j = 0; j < s->nidx; j++) {
        int64_t v = s->i64 ? i64[j] : i32[j];
        if (v < -s->dim || v >= s->dim)
            return CP_ERR_INTERNAL; /* out-of-range index */
    }
    int64_t total = s->outer * s->nidx;
    int nt = cp_fk_threads(k, total * (int64_t)s->inner_bytes, COPY_GRAIN);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t t = 0; t < total; t++) {
        int64_t o = t / s->nidx, j = t % s->nidx;
        int64_t v = s->i64 ? i64[j] : i32[j];
        if (v < 0)
            v += s->dim;
        memcpy(y + (size_t)t * s->inner_bytes, x + (size_t)(o * s->dim + v) * s->inner_bytes,
               s->inner_bytes);
    }
    return CP_OK;
}

/* A Gather of constant channels of an NHWC image (a channel shuffle or a
 * half of one, cleanup_shuffle.c): each output pixel's channels are a
 * table lookup into its input pixel's, walked as gather_run's rows. */
static bool cgather_indices(const struct cp_graph *g, const struct cp_node *n, int64_t *idx,
                            size_t max, size_t *ni)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *ix = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int64_t axis = cp_node_attr_int(n, "axis", 0);
    if (n->n_inputs != 2 || n->n_outputs != 1 || !x || !ix || !y || cp_fk_dims(x, xd) != 4 ||
        cp_fk_dims(y, yd) != 4 || x->layout != CP_LAYOUT_NHWC || y->layout != CP_LAYOUT_NHWC ||
        x->dtype != y->dtype || (axis != 1 && axis != -3) || ix->shape.rank != 1 ||
        !cp_fk_const_ints(ix, idx, max, ni) || (int64_t)*ni != yd[1])
        return false;
    for (int a = 0; a < 4; a++)
        if (a != 1 && xd[a] != yd[a])
            return false;
    for (size_t j = 0; j < *ni; j++) {
        if (idx[j] < -xd[1] || idx[j] >= xd[1])
            return false;
        idx[j] += idx[j] < 0 ? xd[1] : 0;
    }
    return *ni > 0 && cp_shape_numel(&y->shape) > 0;
}

static bool cgather_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *y = cp_fk_out(g, n, 0);
    if (!y || y->shape.rank != 4 || y->shape.dims[1].value < 1)
        return false;
    int64_t *idx = malloc((size_t)y->shape.dims[1].value * sizeof *idx);
    size_t ni;
    bool ok = idx && cgather_indices(g, n, idx, (size_t)y->shape.dims[1].value, &ni);
    free(idx);
    return ok;
}

static enum cp_status cgather_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    byte_dims(k->in[0], xd);
    byte_dims(k->out[0], yd);
    struct gather_state *s = gather_alloc(4, yd, cp_dtype_size(k->in[0]->dtype));
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    /* pixels as they are; the channels (NHWC's last dim) from the table */
    strided_tables(s, xd, NULL, NULL);
    size_t ni;
    if (!cgather_indices(k->g, k->node, s->tab[3], (size_t)yd[3], &ni)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': bad channel gather", k->node->name);
    }
    k->state = s;
    return CP_OK;
}

const struct cp_kernel cp_fast_channel_gather = {
    "c:channel_gather", CP_OP_GATHER, cgather_supports, cgather_prepare, gather_run,
    state_release,      NULL};

const struct cp_kernel cp_fast_gather = {"c:gather", CP_OP_GATHER,  gidx_supports, gidx_prepare,
                                         gidx_run,   state_release, NULL};

/* ---- Pad, constant mode ------------------------------------------------ */

/* Each output row (the last axis) is the constant, or the constant around
 * a copied run of the input row; rows are split between threads. Pads may
 * be negative (cropping). The pads are the reference's reading of the node
 * (ref_shared.h). */
static bool pad_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    if (!x || !y || x->shape.rank < 1 || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) ||
        !cp_shape_is_static(&y->shape) || cp_shape_numel(&y->shape) <= 0 ||
        strcmp(cp_node_attr_string(n, "mode", "constant"), "constant") != 0)
        return false;
    size_t es = cp_dtype_size(x->dtype);
    return (es == 1 || es == 2 || es == 4 || es == 8) && cp_pad_supported(g, n);
}

/* dst[0..n) = the constant (es bytes at fill; `zero` when all are 0). */
static void fill_elems(unsigned char *dst, const unsigned char *fill, size_t es, bool zero,
                       int64_t n)
{
    if (n <= 0)
        return;
    if (zero) {
        memset(dst, 0, (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * es, fill, es);
}

static enum cp_status pad_run(struct cp_kexec *k)
{
    int64_t begin[CP_MAX_RANK];
    unsigned char fill[8];
    bool constant;
    if (!cp_pad_geometry(k, begin, fill, &constant) || !constant)
        return CP_ERR_INTERNAL;
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    int r = ys->rank, last = r - 1;
    size_t es = cp_dtype_size(k->in[0]->dtype);
    int64_t xst[CP_MAX_RANK], inner = ys->dims[last].value, d = xs->dims[last].value;
    int64_t s = 1;
    for (int a = r - 1; a >= 0; a--) {
        xst[a] = s;
        s *= xs->dims[a].value;
    }
    int64_t rows = cp_shape_numel(ys) / inner;
    /* the copied run of a row: output [lo, hi) from input lo - begin */
    int64_t lo = begin[last] > 0 ? begin[last] : 0;
    int64_t hi = begin[last] + d < inner ? begin[last] + d : inner;
    const unsigned char *x = k->in_data[0];
    unsigned char *y = k->out_data[0];
    bool zero = true;
    for (size_t i = 0; i < es; i++)
        zero = zero && fill[i] == 0;
    int nt = cp_fk_threads(k, rows * inner, 32768);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t b, e;
        cp_fk_split(rows, 1, &b, &e);
        for (int64_t row = b; row < e; row++) {
            int64_t rem = row, base = 0;
            bool inside = true;
            for (int a = last - 1; a >= 0; a--) {
                int64_t o = rem % ys->dims[a].value, c = o - begin[a];
                rem /= ys->dims[a].value;
                inside = inside && c >= 0 && c < xs->dims[a].value;
                base += c * xst[a];
            }
            unsigned char *yr = y + (size_t)(row * inner) * es;
            if (!inside || hi <= lo) {
                fill_elems(yr, fill, es, zero, inner);
                continue;
            }
            fill_elems(yr, fill, es, zero, lo);
            memcpy(yr + (size_t)lo * es, x + (size_t)(base + lo - begin[last]) * es,
                   (size_t)(hi - lo) * es);
            fill_elems(yr + (size_t)hi * es, fill, es, zero, inner - hi);
        }
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_pad = {"c:pad", CP_OP_PAD, pad_supports, NULL, pad_run, NULL, NULL};
