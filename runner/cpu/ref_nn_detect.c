/* Reference kernels of the [nn] family that detection models bring:
 * RoiAlign, NonMaxSuppression and DeformConv (ref_nn_ops.h). */
#include "runner/cpu/ref_nn_ops.h"

/* ---- RoiAlign
 * -------------------------------------------------------------------------------------- */

static bool roi_align_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_nn_float_io(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *rois = cp_ref_in(g, n, 1),
                           *bi = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    const char *mode = cp_node_attr_string(n, "mode", "avg");
    const char *ctm = cp_node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    if (!rois || !bi || !cp_dtype_is_float(rois->dtype) || bi->dtype != CP_DTYPE_I64)
        return false;
    if ((strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0) ||
        (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0))
        return false;
    int64_t r = rois->shape.rank == 2 ? rois->shape.dims[0].value : -1;
    return x->shape.rank == 4 && rois->shape.rank == 2 && rois->shape.dims[1].value == 4 &&
           bi->shape.rank == 1 && bi->shape.dims[0].value == r && y->shape.rank == 4 &&
           y->shape.dims[0].value == r && y->shape.dims[1].value == x->shape.dims[1].value &&
           y->shape.dims[2].value == cp_node_attr_int(n, "output_height", 1) &&
           y->shape.dims[3].value == cp_node_attr_int(n, "output_width", 1) &&
           cp_node_attr_int(n, "sampling_ratio", 0) >= 0;
}

static enum cp_status roi_align_run_plain(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t nb = xs->dims[0].value, ch = xs->dims[1].value, h = xs->dims[2].value,
            w = xs->dims[3].value;
    int64_t nr = k->in[1]->shape.dims[0].value;
    int64_t ph_n = k->out[0]->shape.dims[2].value, pw_n = k->out[0]->shape.dims[3].value;
    bool is_max = strcmp(cp_node_attr_string(k->node, "mode", "avg"), "max") == 0;
    /* Opset 10 had no coordinate_transformation_mode and behaved as
     * output_half_pixel; 16 made half_pixel the default. */
    const char *ctm =
        cp_node_attr_string(k->node, "coordinate_transformation_mode",
                            cp_ref_opset(k->g) >= 16 ? "half_pixel" : "output_half_pixel");
    bool half = strcmp(ctm, "half_pixel") == 0;
    double scale = cp_node_attr_float(k->node, "spatial_scale", 1.0f);
    int64_t ratio = cp_node_attr_int(k->node, "sampling_ratio", 0);
    const int64_t *bidx = k->in_data[2];
    enum cp_dtype rdt = k->in[1]->dtype;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = bidx[r];
        if (b < 0 || b >= nb)
            return CP_ERR_INVALID;
        double off = half ? 0.5 : 0.0;
        double x0 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 0) * scale - off;
        double y0 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 1) * scale - off;
        double x1 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 2) * scale - off;
        double y1 = cp_elem_load_f64(k->in_data[1], rdt, r * 4 + 3) * scale - off;
        double rw = x1 - x0, rh = y1 - y0;
        if (!half) {
            rw = rw > 1.0 ? rw : 1.0;
            rh = rh > 1.0 ? rh : 1.0;
        }
        double bh = rh / (double)ph_n, bw = rw / (double)pw_n;
        int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)ph_n);
        int64_t gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)pw_n);
        double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;
        for (int64_t c = 0; c < ch; c++) {
            int64_t base = (b * ch + c) * h * w;
            for (int64_t ph = 0; ph < ph_n; ph++)
                for (int64_t pw = 0; pw < pw_n; pw++) {
                    double acc = 0.0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double y = y0 + ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double x = x0 + pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v = 0.0;
                            int64_t o[4];
                            double wt[4];
                            if (cp_eval_roi_align_tap(y, x, h, w, o, wt)) {
                                double v1 = wt[0] * LD(0, base + o[0]);
                                double v2 = wt[1] * LD(0, base + o[1]);
                                double v3 = wt[2] * LD(0, base + o[2]);
                                double v4 = wt[3] * LD(0, base + o[3]);
                                v = is_max ? fmax(fmax(fmax(v1, v2), v3), v4) : v1 + v2 + v3 + v4;
                            }
                            if (!is_max)
                                acc += v;
                            else if (first || v > acc)
                                acc = v;
                            first = false;
                        }
                    }
                    ST(((r * ch + c) * ph_n + ph) * pw_n + pw, is_max ? acc : acc / count);
                }
        }
    }
    return CP_OK;
}

static enum cp_status roi_align_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, roi_align_run_plain);
}

CP_REF_KERNEL(cp_ref_roi_align, CP_OP_ROI_ALIGN, roi_align_supports, cp_ref_layout_prepare,
              roi_align_run);

/* ---- NonMaxSuppression
 * ------------------------------------------------------------------------------ */

/* The output's row count depends on the data; a static plan sizes it from
 * the shape the model declares, and the run fails (naming the node) when
 * the selection has another size, never writing past the buffer. A dynamic
 * plan sizes it for the most rows possible and reads back how many were
 * kept (cp_kexec.rows). A node whose output shape is not known has no
 * kernel. */
static bool nms_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *b = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    if (!b || !s || !cp_dtype_is_float(b->dtype) || !cp_dtype_is_float(s->dtype) ||
        y->dtype != CP_DTYPE_I64)
        return false;
    if (b->shape.rank != 3 || s->shape.rank != 3 || b->shape.dims[2].value != 4 ||
        b->shape.dims[0].value != s->shape.dims[0].value ||
        b->shape.dims[1].value != s->shape.dims[2].value)
        return false;
    if (y->shape.rank != 2 || y->shape.dims[1].value != 3)
        return false;
    const struct cp_tensor *m = cp_ref_in(g, n, 2), *iou = cp_ref_in(g, n, 3),
                           *st = cp_ref_in(g, n, 4);
    if (m && (m->dtype != CP_DTYPE_I64 || cp_ref_numel(&m->shape) > 1))
        return false;
    if (iou && (!cp_dtype_is_float(iou->dtype) || cp_ref_numel(&iou->shape) > 1))
        return false;
    if (st && (!cp_dtype_is_float(st->dtype) || cp_ref_numel(&st->shape) > 1))
        return false;
    int64_t cpb = cp_node_attr_int(n, "center_point_box", 0);
    return cpb == 0 || cpb == 1;
}

static size_t align64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* Scratch: the ids being sorted and a merge buffer, the batch's boxes as
 * corners and areas, the class's scores, and the suppressors kept so far
 * (corners and areas again, contiguous, for the inner loop), filed in
 * buckets by their left edge: a candidate is checked only against kept
 * boxes whose left edge lies within one widest box of its own, which are
 * the only ones that can overlap it. torchvision's batched NMS offsets
 * each class's boxes into a range of its own and runs one NMS over all of
 * them; without buckets every candidate met every kept box of every class. */
struct nms_scratch {
    int64_t *ids, *tmp;
    double *box;   /* 5 per box: x0, y0, x1, y1, area (0 when degenerate) */
    double *score; /* nbox */
    double *kept;  /* 5 per kept suppressor */
    int64_t *head; /* nbox + 1 buckets: the last kept box filed there, -1 */
    int64_t *next; /* per kept box: the one filed before it in its bucket */
};

static size_t nms_bytes(int64_t nbox)
{
    size_t n = (size_t)nbox;
    return align64(2 * n * sizeof(int64_t)) + align64(5 * n * sizeof(double)) +
           align64(n * sizeof(double)) + align64(5 * n * sizeof(double)) +
           align64((2 * n + 1) * sizeof(int64_t));
}

/* The buckets of one batch: left edges from x0 in steps of `width`, at
 * least the widest box (so overlapping boxes are in neighbouring buckets)
 * and at most nbox + 1 of them. One bucket when an edge is not finite. */
struct nms_grid {
    double x0, width, wmax;
    int64_t n;
};

static struct nms_grid nms_grid(const double *box, int64_t nbox)
{
    struct nms_grid g = {0.0, 1.0, 0.0, 1};
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < nbox; i++) {
        const double *b = box + 5 * i;
        if (b[4] <= 0.0)
            continue;
        lo = b[0] < lo ? b[0] : lo;
        hi = b[0] > hi ? b[0] : hi;
        g.wmax = b[2] - b[0] > g.wmax ? b[2] - b[0] : g.wmax;
    }
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(g.wmax) || g.wmax <= 0.0)
        return (struct nms_grid){0.0, 1.0, INFINITY, 1};
    g.x0 = lo;
    g.width = g.wmax;
    if ((hi - lo) / g.width > (double)nbox)
        g.width = (hi - lo) / (double)nbox;
    g.n = (int64_t)((hi - lo) / g.width) + 1;
    return g;
}

static int64_t nms_bucket(const struct nms_grid *g, double x)
{
    if (g->n == 1 || !(x > g->x0))
        return 0;
    double b = (x - g->x0) / g->width;
    return b >= (double)(g->n - 1) ? g->n - 1 : (int64_t)b;
}

static struct nms_scratch nms_carve(void *scratch, int64_t nbox)
{
    size_t n = (size_t)nbox;
    char *p = scratch;
    struct nms_scratch s;
    s.ids = (int64_t *)p;
    s.tmp = s.ids + n;
    p += align64(2 * n * sizeof(int64_t));
    s.box = (double *)p;
    p += align64(5 * n * sizeof(double));
    s.score = (double *)p;
    p += align64(n * sizeof(double));
    s.kept = (double *)p;
    p += align64(5 * n * sizeof(double));
    s.head = (int64_t *)p;
    s.next = s.head + n + 1;
    return s;
}

static enum cp_status nms_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = nms_bytes(k->in[0]->shape.dims[1].value);
    return CP_OK;
}

/* Box `i` of batch b as corners: center_point_box 1 is (x_center, y_center,
 * width, height), 0 is (y1, x1, y2, x2) with the corners in either order. A
 * box with no area (or NaN in it) never suppresses nor is suppressed. */
static void nms_load_boxes(const struct cp_kexec *k, int64_t b, int64_t nbox, bool center,
                           double *box)
{
    enum cp_dtype dt = k->in[0]->dtype;
    for (int64_t i = 0; i < nbox; i++) {
        double v[4], *o = box + 5 * i;
        for (int c = 0; c < 4; c++)
            v[c] = cp_elem_load_f64(k->in_data[0], dt, (b * nbox + i) * 4 + c);
        if (center) {
            o[0] = v[0] - v[2] / 2.0;
            o[2] = v[0] + v[2] / 2.0;
            o[1] = v[1] - v[3] / 2.0;
            o[3] = v[1] + v[3] / 2.0;
        } else {
            o[1] = fmin(v[0], v[2]);
            o[3] = fmax(v[0], v[2]);
            o[0] = fmin(v[1], v[3]);
            o[2] = fmax(v[1], v[3]);
        }
        double area = (o[2] - o[0]) * (o[3] - o[1]);
        o[4] = area > 0.0 ? area : 0.0;
    }
}

/* Whether kept box q suppresses candidate c: IoU above the threshold. Both
 * have a positive area, and their corners hold no NaN. */
static bool nms_suppresses(const double *c, const double *q, double thr)
{
    double ix0 = c[0] > q[0] ? c[0] : q[0], iy0 = c[1] > q[1] ? c[1] : q[1];
    double ix1 = c[2] < q[2] ? c[2] : q[2], iy1 = c[3] < q[3] ? c[3] : q[3];
    if (ix1 <= ix0 || iy1 <= iy0)
        return false;
    double inter = (ix1 - ix0) * (iy1 - iy0);
    double uni = c[4] + q[4] - inter;
    return uni > 0.0 && inter / uni > thr;
}

/* Order ids[0..n) by score, highest first, lower box index first on ties
 * (a bottom-up merge sort through tmp). */
static void nms_sort(const double *score, int64_t *ids, int64_t *tmp, int64_t n)
{
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                double si = score[ids[i]], sj = score[ids[j]];
                bool take_j = sj > si || (sj == si && ids[j] < ids[i]);
                tmp[o++] = take_j ? ids[j++] : ids[i++];
            }
            while (i < mid)
                tmp[o++] = ids[i++];
            while (j < hi)
                tmp[o++] = ids[j++];
        }
        memcpy(ids, tmp, (size_t)n * sizeof *ids);
    }
}

static enum cp_status nms_run(struct cp_kexec *k)
{
    int64_t nb = k->in[0]->shape.dims[0].value, nbox = k->in[0]->shape.dims[1].value;
    int64_t ncls = k->in[1]->shape.dims[1].value;
    int64_t rows = k->out[0]->shape.dims[0].value;
    bool center = cp_node_attr_int(k->node, "center_point_box", 0) == 1;
    const struct cp_tensor *tm = k->node->n_inputs > 2 ? k->in[2] : NULL;
    const struct cp_tensor *ti = k->node->n_inputs > 3 ? k->in[3] : NULL;
    const struct cp_tensor *ts = k->node->n_inputs > 4 ? k->in[4] : NULL;
    int64_t max_out = tm && cp_ref_numel(&tm->shape) == 1 ? *(const int64_t *)k->in_data[2] : 0;
    double iou =
        ti && cp_ref_numel(&ti->shape) == 1 ? cp_elem_load_f64(k->in_data[3], ti->dtype, 0) : 0.0;
    bool has_st = ts && cp_ref_numel(&ts->shape) == 1;
    double sthr = has_st ? cp_elem_load_f64(k->in_data[4], ts->dtype, 0) : 0.0;
    struct nms_scratch sc = nms_carve(k->scratch, nbox);
    int64_t *out = k->out_data[0];
    int64_t count = 0;
    enum cp_dtype sdt = k->in[1]->dtype;
    for (int64_t b = 0; b < nb && max_out > 0; b++) {
        nms_load_boxes(k, b, nbox, center, sc.box);
        struct nms_grid grid = nms_grid(sc.box, nbox);
        for (int64_t c = 0; c < ncls; c++) {
            int64_t sbase = (b * ncls + c) * nbox, nc = 0, nkept = 0, picked = 0;
            for (int64_t q = 0; q < grid.n; q++)
                sc.head[q] = -1;
            for (int64_t i = 0; i < nbox; i++) {
                sc.score[i] = cp_elem_load_f64(k->in_data[1], sdt, sbase + i);
                if (!has_st || sc.score[i] > sthr)
                    sc.ids[nc++] = i;
            }
            nms_sort(sc.score, sc.ids, sc.tmp, nc);
            for (int64_t i = 0; i < nc && picked < max_out; i++) {
                const double *cand = sc.box + 5 * sc.ids[i];
                bool keep = true;
                if (cand[4] > 0.0) {
                    int64_t first = nms_bucket(&grid, cand[0] - grid.wmax);
                    int64_t last = nms_bucket(&grid, cand[2]);
                    for (int64_t q = first; q <= last && keep; q++)
                        for (int64_t j = sc.head[q]; j >= 0 && keep; j = sc.next[j])
                            keep = !nms_suppresses(cand, sc.kept + 5 * j, iou);
                }
                if (!keep)
                    continue;
                if (count >= rows) /* more than the declared rows */
                    return CP_ERR_INVALID;
                out[count * 3 + 0] = b;
                out[count * 3 + 1] = c;
                out[count * 3 + 2] = sc.ids[i];
                count++;
                picked++;
                if (cand[4] > 0.0) {
                    int64_t q = nms_bucket(&grid, cand[0]);
                    memcpy(sc.kept + 5 * nkept, cand, 5 * sizeof *cand);
                    sc.next[nkept] = sc.head[q];
                    sc.head[q] = nkept++;
                }
            }
        }
    }
    if (k->rows) { /* a dynamic plan: rows was the most there could be */
        *k->rows = count;
        return CP_OK;
    }
    return count == rows ? CP_OK : CP_ERR_INVALID;
}

CP_REF_KERNEL(cp_ref_nms, CP_OP_NON_MAX_SUPPRESSION, nms_supports, nms_prepare, nms_run);

/* ---- DeformConv
 * --------------------------------------------------------------------------------------- */

struct dc_geom {
    int64_t nb, cin, h, w, cout, kh, kw, oh, ow, group, og, sh, sw, dh, dw, ph, pw;
};

static bool dc_geom(const struct cp_graph *g, const struct cp_node *n, struct dc_geom *q)
{
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *wt = cp_ref_in(g, n, 1),
                           *off = cp_ref_in(g, n, 2), *b = cp_ref_in(g, n, 3),
                           *m = cp_ref_in(g, n, 4), *y = cp_ref_out(g, n, 0);
    if (!x || !wt || !off || x->shape.rank != 4 || wt->shape.rank != 4 || off->shape.rank != 4 ||
        y->shape.rank != 4)
        return false;
    const struct cp_attr *st = cp_node_attr(n, "strides"), *di = cp_node_attr(n, "dilations"),
                         *pa = cp_node_attr(n, "pads");
    q->nb = x->shape.dims[0].value;
    q->cin = x->shape.dims[1].value;
    q->h = x->shape.dims[2].value;
    q->w = x->shape.dims[3].value;
    q->cout = wt->shape.dims[0].value;
    q->kh = wt->shape.dims[2].value;
    q->kw = wt->shape.dims[3].value;
    q->oh = y->shape.dims[2].value;
    q->ow = y->shape.dims[3].value;
    q->group = cp_node_attr_int(n, "group", 1);
    q->og = cp_node_attr_int(n, "offset_group", 1);
    q->sh = st && st->n == 2 ? st->ints[0] : 1;
    q->sw = st && st->n == 2 ? st->ints[1] : 1;
    q->dh = di && di->n == 2 ? di->ints[0] : 1;
    q->dw = di && di->n == 2 ? di->ints[1] : 1;
    q->ph = pa && pa->n == 4 ? pa->ints[0] : 0;
    q->pw = pa && pa->n == 4 ? pa->ints[1] : 0;
    if (q->group < 1 || q->og < 1 || q->cin % q->group || q->cout % q->group || q->cin % q->og ||
        wt->shape.dims[1].value * q->group != q->cin || y->shape.dims[0].value != q->nb ||
        y->shape.dims[1].value != q->cout)
        return false;
    int64_t taps = q->kh * q->kw;
    if (off->shape.dims[0].value != q->nb || off->shape.dims[1].value != q->og * taps * 2 ||
        off->shape.dims[2].value != q->oh || off->shape.dims[3].value != q->ow)
        return false;
    if (b &&
        (b->shape.rank != 1 || b->shape.dims[0].value != q->cout || !cp_dtype_is_float(b->dtype)))
        return false;
    if (m && (m->shape.rank != 4 || m->shape.dims[0].value != q->nb ||
              m->shape.dims[1].value != q->og * taps || m->shape.dims[2].value != q->oh ||
              m->shape.dims[3].value != q->ow))
        return false;
    return cp_dtype_is_float(wt->dtype) && cp_dtype_is_float(off->dtype) &&
           (!m || cp_dtype_is_float(m->dtype));
}

static bool dc_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct dc_geom q;
    return cp_nn_float_io(g, n) && dc_geom(g, n, &q);
}

/* Bilinear sample of plane p at (y, x); zero outside, corners outside
 * contribute nothing (as ONNX's reference and ONNX Runtime). */
static double dc_sample(const struct cp_kexec *k, int64_t p, int64_t h, int64_t w, double y,
                        double x)
{
    if (y <= -1.0 || y >= (double)h || x <= -1.0 || x >= (double)w)
        return 0.0;
    double fy = floor(y), fx = floor(x), ly = y - fy, lx = x - fx;
    int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    double v = 0.0;
    for (int t = 0; t < 4; t++) {
        int64_t yy = y0 + (t >> 1), xx = x0 + (t & 1);
        if (yy < 0 || yy >= h || xx < 0 || xx >= w)
            continue;
        double wt = ((t >> 1) ? ly : 1.0 - ly) * ((t & 1) ? lx : 1.0 - lx);
        v += wt * LD(0, p + yy * w + xx);
    }
    return v;
}

static enum cp_status dc_run_plain(struct cp_kexec *k)
{
    struct dc_geom q;
    if (!dc_geom(k->g, k->node, &q))
        return CP_ERR_INTERNAL;
    bool has_b = k->node->n_inputs > 3 && k->in[3];
    bool has_m = k->node->n_inputs > 4 && k->in[4];
    int64_t cin_g = q.cin / q.group, cout_g = q.cout / q.group, cin_og = q.cin / q.og;
    int64_t taps = q.kh * q.kw, opl = q.oh * q.ow;
    for (int64_t n = 0; n < q.nb; n++)
        for (int64_t oc = 0; oc < q.cout; oc++) {
            int64_t gi = oc / cout_g;
            for (int64_t o = 0; o < opl; o++) {
                int64_t oy = o / q.ow, ox = o % q.ow;
                double acc = has_b ? LD(3, oc) : 0.0;
                for (int64_t icl = 0; icl < cin_g; icl++) {
                    int64_t ic = gi * cin_g + icl, og = ic / cin_og;
                    for (int64_t t = 0; t < taps; t++) {
                        int64_t i = t / q.kw, j = t % q.kw;
                        int64_t oi = ((n * q.og + og) * taps + t) * 2;
                        double dy = LD(2, oi * opl + o), dx = LD(2, (oi + 1) * opl + o);
                        double y = (double)(oy * q.sh - q.ph + i * q.dh) + dy;
                        double x = (double)(ox * q.sw - q.pw + j * q.dw) + dx;
                        double mk = has_m ? LD(4, ((n * q.og + og) * taps + t) * opl + o) : 1.0;
                        double v = dc_sample(k, (n * q.cin + ic) * q.h * q.w, q.h, q.w, y, x);
                        acc += LD(1, ((oc * cin_g + icl) * q.kh + i) * q.kw + j) * v * mk;
                    }
                }
                ST((n * q.cout + oc) * opl + o, acc);
            }
        }
    return CP_OK;
}

static enum cp_status dc_run(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, dc_run_plain);
}

CP_REF_KERNEL(cp_ref_deform_conv, CP_OP_DEFORM_CONV, dc_supports, cp_ref_layout_prepare, dc_run);
