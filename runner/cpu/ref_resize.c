/* Reference kernel for Resize: nearest (every nearest_mode), n-linear and
 * n-cubic interpolation over any rank, with the coordinate transformations
 * half_pixel, asymmetric, align_corners, pytorch_half_pixel,
 * tf_half_pixel_for_nn and tf_crop_and_resize.
 *
 * Interpolation is separable: for every axis and every output coordinate
 * along it, a few taps (input index, weight) are computed once into
 * scratch memory; an output element is then the sum over all combinations
 * of its axes' taps of the product of weights times the input element.
 * Axes that are not resized have one tap of weight 1, so a 2-D bilinear
 * resize of an NCHW tensor costs four products per output element.
 *
 * The numbers follow ONNX's reference implementation (onnx/backend/test/
 * case/node/resize.py): with `scales` the resized length is scale * length
 * as a real number (align_corners divides by it, not by the rounded output
 * size); neighbours outside the input repeat the edge unless
 * exclude_outside drops them; and before opset 11 coordinates are
 * asymmetric and nearest rounds down when upsampling and up when
 * downsampling, as onnxruntime does for Resize-10. */
#include "runner/cpu/ref_util.h"
#include "runner/cpu/ref_shared.h"

#include <math.h>
#include <string.h>

enum interp { INTERP_NEAREST, INTERP_LINEAR, INTERP_CUBIC };

enum coord {
    COORD_HALF_PIXEL,
    COORD_ASYMMETRIC,
    COORD_ALIGN_CORNERS,
    COORD_PYTORCH_HALF_PIXEL,
    COORD_TF_HALF_PIXEL_FOR_NN,
    COORD_TF_CROP_AND_RESIZE,
    COORD_HALF_PIXEL_SYMMETRIC, /* opset 19 */
};

enum nearest {
    NEAREST_ROUND_PREFER_FLOOR,
    NEAREST_ROUND_PREFER_CEIL,
    NEAREST_FLOOR,
    NEAREST_CEIL,
    NEAREST_SIMPLE /* Resize-10 */
};

#define MAX_TAPS CP_RESIZE_MAX_TAPS

struct resize_cfg {
    enum interp interp;
    enum coord coord;
    enum nearest nearest;
    double cubic_a;
    bool exclude_outside;
    double extrapolation;
    int n_axes;                /* entries of scales / sizes / half of roi */
    int axes[CP_MAX_RANK];     /* the axis each entry is for */
    size_t scales, sizes, roi; /* input slots; 0 when absent (slot 0 is X) */
    int keep_aspect;           /* 0 stretch, 1 not_larger, 2 not_smaller */
};

static bool lookup(const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return true;
        }
    return false;
}

static bool resize_config(const struct cp_graph *g, const struct cp_node *n, struct resize_cfg *c)
{
    static const char *const interps[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {
        "half_pixel",           "asymmetric",         "align_corners",       "pytorch_half_pixel",
        "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    memset(c, 0, sizeof *c);
    bool v10 = cp_ref_opset(g) < 11;
    int i;
    if (!lookup(cp_node_attr_string(n, "mode", "nearest"), interps, 3, &i))
        return false;
    c->interp = (enum interp)i;
    if (v10) {
        c->coord = COORD_ASYMMETRIC;
        c->nearest = NEAREST_SIMPLE;
    } else {
        if (!lookup(cp_node_attr_string(n, "coordinate_transformation_mode", "half_pixel"), coords,
                    cp_ref_opset(g) >= 19 ? 7 : 6, &i))
            return false;
        c->coord = (enum coord)i;
        if (!lookup(cp_node_attr_string(n, "nearest_mode", "round_prefer_floor"), nearests, 4, &i))
            return false;
        c->nearest = (enum nearest)i;
    }
    if (!lookup(cp_node_attr_string(n, "keep_aspect_ratio_policy", "stretch"), policies, 3,
                &c->keep_aspect))
        return false;
    if (cp_node_attr_int(n, "antialias", 0) != 0)
        return false;
    c->cubic_a = cp_node_attr_float(n, "cubic_coeff_a", -0.75f);
    c->exclude_outside = cp_node_attr_int(n, "exclude_outside", 0) != 0;
    c->extrapolation = cp_node_attr_float(n, "extrapolation_value", 0.0f);
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    int r = x->shape.rank;
    const struct cp_attr *axes = cp_node_attr(n, "axes");
    if (axes) {
        bool seen[CP_MAX_RANK] = {false};
        if (axes->type != CP_ATTR_INTS || axes->n > (size_t)r)
            return false;
        c->n_axes = (int)axes->n;
        for (int k = 0; k < c->n_axes; k++) {
            if (!cp_eval_axis(axes->ints[k], r, &c->axes[k]) || seen[c->axes[k]])
                return false;
            seen[c->axes[k]] = true;
        }
    } else {
        c->n_axes = r;
        for (int k = 0; k < r; k++)
            c->axes[k] = k;
    }
    if (v10) {
        c->scales = cp_ref_has_input(g, n, 1) ? 1 : 0;
    } else {
        c->roi = cp_ref_has_input(g, n, 1) ? 1 : 0;
        c->scales = cp_ref_has_input(g, n, 2) ? 2 : 0;
        c->sizes = cp_ref_has_input(g, n, 3) ? 3 : 0;
    }
    return true;
}

static bool float_vector(const struct cp_tensor *t, int64_t len)
{
    return t && cp_dtype_is_float(t->dtype) && cp_ref_numel(&t->shape) == len;
}

bool cp_resize_supported(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    struct resize_cfg c;
    if (!x || y->dtype != x->dtype || y->shape.rank != x->shape.rank || !resize_config(g, n, &c))
        return false;
    /* Nearest only moves elements; interpolation computes in f32. */
    if (c.interp != INTERP_NEAREST && x->dtype != CP_DTYPE_F32)
        return false;
    if (c.sizes) {
        const struct cp_tensor *s = cp_ref_in(g, n, c.sizes);
        if (s->dtype != CP_DTYPE_I64 || cp_ref_numel(&s->shape) != c.n_axes)
            return false;
    } else if (!c.scales || !float_vector(cp_ref_in(g, n, c.scales), c.n_axes)) {
        return false;
    }
    if (c.coord == COORD_TF_CROP_AND_RESIZE &&
        (!c.roi || !float_vector(cp_ref_in(g, n, c.roi), 2 * (int64_t)c.n_axes)))
        return false;
    return true;
}

size_t cp_resize_taps_bytes(const struct cp_shape *ys)
{
    size_t total = 0;
    for (int a = 0; a < ys->rank; a++)
        total += (size_t)ys->dims[a].value;
    return total * sizeof(struct cp_resize_tap);
}

static enum cp_status resize_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = cp_resize_taps_bytes(&k->out[0]->shape);
    return CP_OK;
}

/* ---- coordinates ----------------------------------------------------------------- */

/* Per axis: the scale and the resized length as a real number. */
struct axis_geom {
    double scale, length;
    double roi_start, roi_end;
    int64_t in, out, stride;
};

static double source_coord(const struct resize_cfg *c, const struct axis_geom *ag, int64_t x)
{
    double xr = (double)x, in = (double)ag->in;
    switch (c->coord) {
    case COORD_HALF_PIXEL:
        return (xr + 0.5) / ag->scale - 0.5;
    case COORD_ASYMMETRIC:
        return xr / ag->scale;
    case COORD_ALIGN_CORNERS:
        return ag->length == 1.0 ? 0.0 : xr * (in - 1.0) / (ag->length - 1.0);
    case COORD_PYTORCH_HALF_PIXEL:
        return ag->length > 1.0 ? (xr + 0.5) / ag->scale - 0.5 : 0.0;
    case COORD_TF_HALF_PIXEL_FOR_NN:
        return (xr + 0.5) / ag->scale;
    case COORD_HALF_PIXEL_SYMMETRIC: {
        /* half_pixel, shifted so that the rounded output stays centred on
         * the input: offset = in / 2 * (1 - out / (scale * in)). */
        double adjust = (double)ag->out / ag->length;
        return in / 2.0 * (1.0 - adjust) + (xr + 0.5) / ag->scale - 0.5;
    }
    case COORD_TF_CROP_AND_RESIZE:
        if (ag->length > 1.0)
            return ag->roi_start * (in - 1.0) +
                   xr * (ag->roi_end - ag->roi_start) * (in - 1.0) / (ag->length - 1.0);
        return 0.5 * (ag->roi_start + ag->roi_end) * (in - 1.0);
    }
    return 0.0;
}

static int64_t nearest_index(enum nearest mode, double xo, double scale)
{
    double fl = floor(xo), frac = xo - fl;
    switch (mode) {
    case NEAREST_ROUND_PREFER_FLOOR:
        return (int64_t)(frac <= 0.5 ? fl : fl + 1.0);
    case NEAREST_ROUND_PREFER_CEIL:
        return (int64_t)(frac < 0.5 ? fl : fl + 1.0);
    case NEAREST_FLOOR:
        return (int64_t)fl;
    case NEAREST_CEIL:
        return (int64_t)ceil(xo);
    case NEAREST_SIMPLE:
        return (int64_t)(scale < 1.0 ? ceil(xo) : fl);
    }
    return 0;
}

static void cubic_coeffs(double r, double a, double *w)
{
    double t0 = r + 1.0, t1 = r, t2 = 1.0 - r, t3 = 2.0 - r;
    w[0] = ((a * t0 - 5.0 * a) * t0 + 8.0 * a) * t0 - 4.0 * a;
    w[1] = ((a + 2.0) * t1 - (a + 3.0)) * t1 * t1 + 1.0;
    w[2] = ((a + 2.0) * t2 - (a + 3.0)) * t2 * t2 + 1.0;
    w[3] = ((a * t3 - 5.0 * a) * t3 + 8.0 * a) * t3 - 4.0 * a;
}

static int64_t clamp_index(int64_t i, int64_t n)
{
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* The taps of output coordinate x along one axis. */
static void axis_taps(const struct resize_cfg *c, const struct axis_geom *ag, int64_t x,
                      struct cp_resize_tap *t)
{
    double xo = source_coord(c, ag, x);
    memset(t, 0, sizeof *t);
    if (c->coord == COORD_TF_CROP_AND_RESIZE && (xo < 0.0 || xo > (double)(ag->in - 1))) {
        t->outside = 1;
        return;
    }
    int64_t idx[MAX_TAPS];
    double w[MAX_TAPS];
    int n;
    double fl = floor(xo), r = xo - fl;
    int64_t i0 = (int64_t)fl;
    switch (c->interp) {
    case INTERP_NEAREST:
        idx[0] = nearest_index(c->nearest, xo, ag->scale);
        w[0] = 1.0;
        n = 1;
        break;
    case INTERP_LINEAR:
        idx[0] = i0;
        idx[1] = i0 + 1;
        w[0] = 1.0 - r;
        w[1] = r;
        n = 2;
        break;
    default:
        for (int j = 0; j < 4; j++)
            idx[j] = i0 - 1 + j;
        cubic_coeffs(r, c->cubic_a, w);
        n = 4;
        break;
    }
    if (c->exclude_outside && c->interp != INTERP_NEAREST) {
        double sum = 0.0;
        for (int j = 0; j < n; j++) {
            if (idx[j] < 0 || idx[j] >= ag->in)
                w[j] = 0.0;
            sum += w[j];
        }
        for (int j = 0; j < n && sum != 0.0; j++)
            w[j] /= sum;
    }
    for (int j = 0; j < n; j++) {
        if (w[j] == 0.0 && !(j == n - 1 && t->n == 0))
            continue; /* keep at least one tap */
        t->off[t->n] = clamp_index(idx[j], ag->in) * ag->stride;
        t->w[t->n] = w[j];
        t->n++;
    }
}

/* Scale, resized length and roi of every axis. false on bad values. */
static bool axis_geometry(const struct cp_kexec *k, const struct resize_cfg *c,
                          struct axis_geom *ag)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    int64_t st[CP_MAX_RANK];
    cp_ref_strides(xs, st);
    for (int a = 0; a < xs->rank; a++) {
        ag[a] = (struct axis_geom){
            1.0, (double)xs->dims[a].value, 0.0, 1.0, xs->dims[a].value, ys->dims[a].value, st[a]};
    }
    double common = c->keep_aspect == 1 ? INFINITY : 0.0;
    for (int j = 0; j < c->n_axes; j++) {
        struct axis_geom *g = &ag[c->axes[j]];
        if (c->sizes) {
            int64_t want = cp_elem_load_i64(k->in_data[c->sizes], k->in[c->sizes]->dtype, j);
            if (g->in <= 0)
                return false;
            g->scale = (double)want / (double)g->in;
            g->length = (double)want;
            common = c->keep_aspect == 1 ? fmin(common, g->scale) : fmax(common, g->scale);
        } else {
            g->scale = cp_elem_load_f64(k->in_data[c->scales], k->in[c->scales]->dtype, j);
            if (!(g->scale > 0.0))
                return false;
            g->length = g->scale * (double)g->in;
        }
        if (c->roi) {
            const struct cp_tensor *tr = k->in[c->roi];
            g->roi_start = cp_elem_load_f64(k->in_data[c->roi], tr->dtype, j);
            g->roi_end = cp_elem_load_f64(k->in_data[c->roi], tr->dtype, j + c->n_axes);
        }
    }
    if (c->sizes && c->keep_aspect != 0) {
        for (int j = 0; j < c->n_axes; j++) {
            struct axis_geom *g = &ag[c->axes[j]];
            g->scale = common;
            g->length = common * (double)g->in;
        }
    }
    return true;
}

/* ---- running ------------------------------------------------------------------------ */

bool cp_resize_taps(const struct cp_kexec *k, void *scratch, struct cp_resize_taps *t)
{
    struct resize_cfg c;
    struct axis_geom ag[CP_MAX_RANK];
    if (!resize_config(k->g, k->node, &c) || !axis_geometry(k, &c, ag))
        return false;
    /* Taps of each axis, laid out one axis after the other. */
    struct cp_resize_tap *next = scratch;
    t->rank = k->out[0]->shape.rank;
    t->nearest = c.interp == INTERP_NEAREST;
    t->extrapolation = c.extrapolation;
    for (int a = 0; a < t->rank; a++) {
        t->axis[a] = next;
        for (int64_t x = 0; x < ag[a].out; x++)
            axis_taps(&c, &ag[a], x, &next[x]);
        next += ag[a].out;
    }
    return true;
}

static enum cp_status resize_run(struct cp_kexec *k)
{
    const struct cp_tensor *tx = k->in[0], *ty = k->out[0];
    int r = ty->shape.rank;
    int64_t ny = cp_ref_numel(&ty->shape);
    if (ny == 0)
        return CP_OK;
    struct cp_resize_taps taps;
    if (cp_ref_numel(&tx->shape) == 0 || !cp_resize_taps(k, k->scratch, &taps))
        return CP_ERR_INTERNAL;
    const struct cp_resize_tap *const *axis_taps_at = taps.axis;
    enum cp_dtype dt = tx->dtype;
    size_t es = cp_dtype_size(dt);
    int64_t oc[CP_MAX_RANK] = {0};
    for (int64_t o = 0; o < ny; o++) {
        const struct cp_resize_tap *t[CP_MAX_RANK];
        bool outside = false;
        for (int a = 0; a < r; a++) {
            t[a] = &axis_taps_at[a][oc[a]];
            outside = outside || t[a]->outside;
        }
        if (outside) {
            cp_eval_store_f64(k->out_data[0], dt, o, taps.extrapolation);
        } else if (taps.nearest) {
            int64_t off = 0;
            for (int a = 0; a < r; a++)
                off += t[a]->off[0];
            cp_eval_copy_elem((unsigned char *)k->out_data[0] + (size_t)o * es,
                              (const unsigned char *)k->in_data[0] + (size_t)off * es, es);
        } else {
            /* Sum over every combination of taps (an odometer over j[]). */
            const float *x = k->in_data[0];
            int j[CP_MAX_RANK] = {0};
            double acc = 0.0;
            for (;;) {
                double w = 1.0;
                int64_t off = 0;
                for (int a = 0; a < r; a++) {
                    w *= t[a]->w[j[a]];
                    off += t[a]->off[j[a]];
                }
                acc += w * x[off];
                int a = r - 1;
                while (a >= 0 && ++j[a] == t[a]->n)
                    j[a--] = 0;
                if (a < 0)
                    break;
            }
            ((float *)k->out_data[0])[o] = (float)acc;
        }
        for (int a = r - 1; a >= 0; a--) {
            if (++oc[a] < ty->shape.dims[a].value)
                break;
            oc[a] = 0;
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_resize, CP_OP_RESIZE, cp_resize_supported, resize_prepare, resize_run);
