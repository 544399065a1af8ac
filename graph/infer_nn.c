/* Inference for the compute-heavy ops: MatMul, Gemm, Conv, ConvTranspose,
 * pools; and Resize and Pad, whose output size comes from a shape-like
 * input. */
#include "graph/infer_internal.h"

#include <math.h>
#include <string.h>

/* ---- MatMul and Gemm ------------------------------------------------------------ */

static struct cp_dim dim_or_dyn(const struct cp_shape *s, int k)
{
    struct cp_dim d = {-1, NULL};
    if (s->rank > k && k >= 0)
        d = s->dims[k];
    return d;
}

/* numpy matmul: 1-D operands are promoted (and the added dim dropped again),
 * leading dims broadcast. */
enum cp_status cp_infer_matmul(struct cp_infer *c)
{
    const struct cp_tensor *a = cp_infer_in(c, 0), *b = cp_infer_in(c, 1);
    struct cp_shape s;
    if (a->shape.rank < 0 || b->shape.rank < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, a->dtype, &s);
    }
    if (a->shape.rank == 0 || b->shape.rank == 0)
        return cp_infer_fail(c, "input '%s' is a scalar; MatMul needs at least 1-D inputs",
                             a->shape.rank == 0 ? a->name : b->name);
    struct cp_shape sa = a->shape, sb = b->shape;
    bool drop_m = false, drop_n = false;
    if (sa.rank == 1) {
        sa.rank = 2;
        sa.dims[1] = sa.dims[0];
        cp_infer_dim_set(&sa.dims[0], 1);
        drop_m = true;
    }
    if (sb.rank == 1) {
        sb.rank = 2;
        cp_infer_dim_set(&sb.dims[1], 1);
        drop_n = true;
    }
    int64_t ka = sa.dims[sa.rank - 1].value, kb = sb.dims[sb.rank - 2].value;
    if (ka >= 0 && kb >= 0 && ka != kb) {
        char ba[64], bb[64];
        return cp_infer_fail(c, "inner dimensions differ: %lld vs %lld ('%s' is %s, '%s' is %s)",
                             (long long)ka, (long long)kb, a->name, cp_infer_fmt(&a->shape, ba),
                             b->name, cp_infer_fmt(&b->shape, bb));
    }
    struct cp_shape ba_s = sa, bb_s = sb;
    ba_s.rank -= 2;
    bb_s.rank -= 2;
    enum cp_status st = cp_infer_broadcast(c, &ba_s, a->name, &bb_s, b->name, &s);
    if (st != CP_OK)
        return st;
    if (!drop_m)
        s.dims[s.rank++] = sa.dims[sa.rank - 2];
    if (!drop_n)
        s.dims[s.rank++] = sb.dims[sb.rank - 1];
    return cp_infer_set_out(c, 0, a->dtype, &s);
}

enum cp_status cp_infer_gemm(struct cp_infer *c)
{
    const struct cp_tensor *a = cp_infer_in(c, 0), *b = cp_infer_in(c, 1),
                           *bias = cp_infer_in(c, 2);
    if (a->shape.rank >= 0 && a->shape.rank != 2)
        return cp_infer_fail(c, "input A '%s' must be 2-D, got rank %d", a->name, a->shape.rank);
    if (b->shape.rank >= 0 && b->shape.rank != 2)
        return cp_infer_fail(c, "input B '%s' must be 2-D, got rank %d", b->name, b->shape.rank);
    bool ta = cp_node_attr_int(c->node, "transA", 0) != 0;
    bool tb = cp_node_attr_int(c->node, "transB", 0) != 0;
    struct cp_dim m = dim_or_dyn(&a->shape, ta ? 1 : 0), ka = dim_or_dyn(&a->shape, ta ? 0 : 1);
    struct cp_dim kb = dim_or_dyn(&b->shape, tb ? 1 : 0), n = dim_or_dyn(&b->shape, tb ? 0 : 1);
    if (ka.value >= 0 && kb.value >= 0 && ka.value != kb.value) {
        char ba[64], bb[64];
        return cp_infer_fail(c,
                             "inner dimensions differ: %lld vs %lld ('%s' is %s%s, '%s' is "
                             "%s%s)",
                             (long long)ka.value, (long long)kb.value, a->name,
                             cp_infer_fmt(&a->shape, ba), ta ? ", transposed" : "", b->name,
                             cp_infer_fmt(&b->shape, bb), tb ? ", transposed" : "");
    }
    struct cp_shape s;
    s.rank = 2;
    s.dims[0] = m;
    s.dims[1] = n;
    if (bias && bias->shape.rank >= 0) {
        /* C broadcasts unidirectionally to (M, N). */
        const struct cp_shape *cs = &bias->shape;
        bool ok = cs->rank <= 2;
        for (int k = 0; ok && k < cs->rank; k++) {
            int64_t cd = cs->dims[k].value, od = s.dims[2 - cs->rank + k].value;
            ok = cd < 0 || od < 0 || cd == 1 || cd == od;
        }
        if (!ok) {
            char bc[64], bo[64];
            return cp_infer_fail(c, "C '%s' (%s) does not broadcast to the output %s", bias->name,
                                 cp_infer_fmt(cs, bc), cp_infer_fmt(&s, bo));
        }
    }
    return cp_infer_set_out(c, 0, a->dtype, &s);
}

/* ---- convolutions and pools ------------------------------------------------------ */

enum auto_pad { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

#define MAX_SPATIAL (CP_MAX_RANK - 2)

struct window {
    int n; /* spatial dims */
    int64_t kernel[MAX_SPATIAL];
    int64_t strides[MAX_SPATIAL];
    int64_t dilations[MAX_SPATIAL];
    int64_t pads[2 * MAX_SPATIAL];
    int64_t out_pad[MAX_SPATIAL];
    enum auto_pad auto_pad;
    bool ceil_mode;
};

/* Read an INTS attribute that must have exactly `want` entries (or be absent:
 * every entry `dflt`). */
static enum cp_status window_attr(struct cp_infer *c, const char *name, int64_t *out, size_t want,
                                  int64_t dflt, int64_t min, bool *present)
{
    size_t n;
    bool pr;
    enum cp_status st = cp_infer_attr_ints(c, name, out, 2 * MAX_SPATIAL, &n, &pr);
    if (st != CP_OK)
        return st;
    if (present)
        *present = pr;
    if (!pr) {
        for (size_t k = 0; k < want; k++)
            out[k] = dflt;
        return CP_OK;
    }
    if (n != want)
        return cp_infer_fail(c, "attribute '%s' has %zu entries, expected %zu", name, n, want);
    for (size_t k = 0; k < n; k++)
        if (out[k] < min)
            return cp_infer_fail(c, "attribute '%s' has invalid entry %lld", name,
                                 (long long)out[k]);
    return CP_OK;
}

/* Attributes shared by Conv, ConvTranspose and the pools. The kernel comes
 * from kernel_shape, else from the weight's dims (may be dynamic). */
static enum cp_status read_window(struct cp_infer *c, int n, const struct cp_shape *w,
                                  struct window *win, bool *has_kernel)
{
    memset(win, 0, sizeof *win);
    win->n = n;
    const char *ap = cp_node_attr_string(c->node, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0 || ap[0] == '\0')
        win->auto_pad = PAD_NOTSET;
    else if (strcmp(ap, "SAME_UPPER") == 0)
        win->auto_pad = PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0)
        win->auto_pad = PAD_SAME_LOWER;
    else if (strcmp(ap, "VALID") == 0)
        win->auto_pad = PAD_VALID;
    else
        return cp_infer_fail(c, "unknown auto_pad '%s'", ap);
    win->ceil_mode = cp_node_attr_int(c->node, "ceil_mode", 0) != 0;
    enum cp_status st = window_attr(c, "kernel_shape", win->kernel, (size_t)n, -1, 1, has_kernel);
    if (st != CP_OK)
        return st;
    if (w && w->rank == n + 2) {
        for (int k = 0; k < n; k++) {
            int64_t wk = w->dims[k + 2].value;
            if (!*has_kernel)
                win->kernel[k] = wk;
            else if (wk >= 0 && wk != win->kernel[k])
                return cp_infer_fail(c, "kernel_shape[%d] is %lld but the weight has %lld", k,
                                     (long long)win->kernel[k], (long long)wk);
        }
    }
    if ((st = window_attr(c, "strides", win->strides, (size_t)n, 1, 1, NULL)) != CP_OK ||
        (st = window_attr(c, "dilations", win->dilations, (size_t)n, 1, 1, NULL)) != CP_OK ||
        (st = window_attr(c, "pads", win->pads, 2 * (size_t)n, 0, 0, NULL)) != CP_OK ||
        (st = window_attr(c, "output_padding", win->out_pad, (size_t)n, 0, 0, NULL)) != CP_OK)
        return st;
    if (win->auto_pad != PAD_NOTSET)
        memset(win->pads, 0, sizeof win->pads);
    return CP_OK;
}

/* ceil(a / b) for a >= 0, b > 0, without the a + b - 1 that overflows. */
static int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

/* The dilated kernel extent (kernel - 1) * dilation + 1 along axis k;
 * fails naming both attributes when it does not fit in 64 bits. */
static enum cp_status dilated_kernel(struct cp_infer *c, const struct window *win, int k,
                                     int64_t *eff)
{
    int64_t kk = win->kernel[k], dl = win->dilations[k];
    if (cp_mul_overflows_i64(kk - 1, dl, eff) || cp_add_overflows_i64(*eff, 1, eff))
        return cp_infer_fail(c,
                             "attributes 'kernel_shape' (%lld) and 'dilations' (%lld) of spatial "
                             "axis %d give a dilated kernel that does not fit in 64 bits",
                             (long long)kk, (long long)dl, k);
    return CP_OK;
}

/* Output length of a sliding window along spatial axis k (-1 if unknown).
 * SAME pads to ceil(in / stride); VALID is NOTSET without padding. With
 * ceil_mode the last window must still start inside the (begin-padded)
 * input, as in PyTorch and onnxruntime. Every sum and product is checked:
 * the attributes come from the model file. */
static enum cp_status window_out(struct cp_infer *c, const struct window *win, int k, int64_t in,
                                 const char *xname, int64_t *out)
{
    int64_t kk = win->kernel[k], s = win->strides[k];
    *out = -1;
    if (in < 0)
        return CP_OK;
    if (win->auto_pad == PAD_SAME_UPPER || win->auto_pad == PAD_SAME_LOWER) {
        *out = ceil_div(in, s);
        return CP_OK;
    }
    if (kk < 0)
        return CP_OK;
    int64_t eff, padded, span, o;
    enum cp_status st = dilated_kernel(c, win, k, &eff);
    if (st != CP_OK)
        return st;
    int64_t pb = win->pads[k], pe = win->pads[k + win->n];
    if (cp_add_overflows_i64(in, pb, &padded) || cp_add_overflows_i64(padded, pe, &padded))
        return cp_infer_fail(c,
                             "attribute 'pads' (%lld at the start, %lld at the end of spatial "
                             "axis %d) on '%s' of size %lld: the padded size does not fit in 64 "
                             "bits",
                             (long long)pb, (long long)pe, k, xname, (long long)in);
    span = padded - eff;
    if (span < 0)
        return cp_infer_fail(c,
                             "spatial axis %d of '%s': kernel %lld (dilated %lld) is larger "
                             "than the padded input %lld",
                             k, xname, (long long)kk, (long long)eff, (long long)padded);
    /* span / s <= span < INT64_MAX unless s == 1 and span == INT64_MAX. */
    if (cp_add_overflows_i64(win->ceil_mode ? ceil_div(span, s) : span / s, 1, &o))
        return cp_infer_fail(c,
                             "spatial axis %d of '%s': %lld windows of stride %lld do not fit in "
                             "64 bits",
                             k, xname, (long long)span, (long long)s);
    /* (o - 1) * s >= in + pb, without the product. */
    if (win->ceil_mode && o - 1 >= ceil_div(in + pb, s))
        o--;
    *out = o;
    return CP_OK;
}

enum cp_status cp_infer_conv(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *w = cp_infer_in(c, 1), *b = cp_infer_in(c, 2);
    int rx = x->shape.rank, rw = w->shape.rank;
    if (rx >= 0 && rx < 3)
        return cp_infer_fail(c, "input '%s' must have rank >= 3 (N, C, spatial...), got %d",
                             x->name, rx);
    if (rx >= 0 && rw >= 0 && rx != rw)
        return cp_infer_fail(c, "weight '%s' has rank %d but input '%s' has rank %d", w->name, rw,
                             x->name, rx);
    int r = rx >= 0 ? rx : rw;
    struct cp_shape s;
    if (r < 3) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    struct window win;
    bool has_kernel;
    enum cp_status st = read_window(c, r - 2, &w->shape, &win, &has_kernel);
    if (st != CP_OK)
        return st;
    int64_t group = cp_node_attr_int(c->node, "group", 1);
    if (group < 1)
        return cp_infer_fail(c, "group must be >= 1, got %lld", (long long)group);
    struct cp_dim cin = dim_or_dyn(&x->shape, 1), wc = dim_or_dyn(&w->shape, 1);
    struct cp_dim m = dim_or_dyn(&w->shape, 0);
    int64_t want_c;
    if (wc.value >= 0 && cp_mul_overflows_i64(wc.value, group, &want_c))
        return cp_infer_fail(c,
                             "attribute 'group' (%lld) times the %lld channels of weight '%s' "
                             "does not fit in 64 bits",
                             (long long)group, (long long)wc.value, w->name);
    if (cin.value >= 0 && wc.value >= 0 && cin.value != want_c)
        return cp_infer_fail(c,
                             "input '%s' has %lld channels but weight '%s' expects %lld x group "
                             "%lld = %lld",
                             x->name, (long long)cin.value, w->name, (long long)wc.value,
                             (long long)group, (long long)want_c);
    if (m.value >= 0 && m.value % group != 0)
        return cp_infer_fail(c, "weight '%s' has %lld output channels, not divisible by group %lld",
                             w->name, (long long)m.value, (long long)group);
    if (b && b->shape.rank >= 0) {
        int64_t bn = b->shape.rank == 1 ? b->shape.dims[0].value : -2;
        if (bn == -2 || (bn >= 0 && m.value >= 0 && bn != m.value))
            return cp_infer_fail(c, "bias '%s' must be 1-D of %lld elements", b->name,
                                 (long long)m.value);
    }
    s.rank = r;
    s.dims[0] = dim_or_dyn(&x->shape, 0);
    s.dims[1] = m;
    for (int k = 0; k < r - 2; k++) {
        int64_t o;
        st = window_out(c, &win, k, dim_or_dyn(&x->shape, k + 2).value, x->name, &o);
        if (st != CP_OK)
            return st;
        cp_infer_dim_set(&s.dims[k + 2], o);
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* Output length of ConvTranspose along spatial axis k (-1 if unknown):
 * `given` from output_shape when >= 0, else stride * (in - 1) +
 * output_padding + dilated kernel - pads, every step checked. */
static enum cp_status transposed_out(struct cp_infer *c, const struct window *win, int k,
                                     int64_t in, int64_t given, int64_t *out)
{
    int64_t s = win->strides[k], o = -1, eff;
    *out = -1;
    if (given >= 0) {
        *out = given;
        return CP_OK;
    }
    if (in < 0)
        return CP_OK;
    if (win->auto_pad == PAD_SAME_UPPER || win->auto_pad == PAD_SAME_LOWER) {
        if (cp_mul_overflows_i64(in, s, out))
            return cp_infer_fail(c,
                                 "attribute 'strides' (%lld) of spatial axis %d times the input "
                                 "size %lld does not fit in 64 bits",
                                 (long long)s, k, (long long)in);
        return CP_OK;
    }
    if (win->kernel[k] < 0)
        return CP_OK;
    enum cp_status st = dilated_kernel(c, win, k, &eff);
    if (st != CP_OK)
        return st;
    if (cp_mul_overflows_i64(s, in - 1, &o))
        return cp_infer_fail(c,
                             "attribute 'strides' (%lld) of spatial axis %d on an input of size "
                             "%lld gives an output size that does not fit in 64 bits",
                             (long long)s, k, (long long)in);
    if (cp_add_overflows_i64(o, win->out_pad[k], &o) || cp_add_overflows_i64(o, eff, &o))
        return cp_infer_fail(c,
                             "attributes 'output_padding' (%lld) and 'kernel_shape' / "
                             "'dilations' (dilated kernel %lld) of spatial axis %d give an "
                             "output size that does not fit in 64 bits",
                             (long long)win->out_pad[k], (long long)eff, k);
    int64_t pb = win->pads[k], pe = win->pads[k + win->n];
    if (cp_sub_overflows_i64(o, pb, &o) || cp_sub_overflows_i64(o, pe, &o))
        return cp_infer_fail(c,
                             "attribute 'pads' (%lld at the start, %lld at the end of spatial "
                             "axis %d): the output size does not fit in 64 bits",
                             (long long)pb, (long long)pe, k);
    if (o <= 0)
        return cp_infer_fail(c, "spatial axis %d of the output would be %lld", k, (long long)o);
    *out = o;
    return CP_OK;
}

enum cp_status cp_infer_conv_transpose(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *w = cp_infer_in(c, 1), *b = cp_infer_in(c, 2);
    int rx = x->shape.rank, rw = w->shape.rank;
    if (rx >= 0 && rx < 3)
        return cp_infer_fail(c, "input '%s' must have rank >= 3 (N, C, spatial...), got %d",
                             x->name, rx);
    if (rx >= 0 && rw >= 0 && rx != rw)
        return cp_infer_fail(c, "weight '%s' has rank %d but input '%s' has rank %d", w->name, rw,
                             x->name, rx);
    int r = rx >= 0 ? rx : rw;
    struct cp_shape s;
    if (r < 3) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int n = r - 2;
    struct window win;
    bool has_kernel;
    enum cp_status st = read_window(c, n, &w->shape, &win, &has_kernel);
    if (st != CP_OK)
        return st;
    int64_t group = cp_node_attr_int(c->node, "group", 1);
    if (group < 1)
        return cp_infer_fail(c, "group must be >= 1, got %lld", (long long)group);
    struct cp_dim cin = dim_or_dyn(&x->shape, 1), wc = dim_or_dyn(&w->shape, 0);
    if (cin.value >= 0 && wc.value >= 0 && cin.value != wc.value)
        return cp_infer_fail(c, "input '%s' has %lld channels but weight '%s' expects %lld",
                             x->name, (long long)cin.value, w->name, (long long)wc.value);
    struct cp_dim m = dim_or_dyn(&w->shape, 1);
    if (m.value >= 0) {
        int64_t mg;
        if (cp_mul_overflows_i64(m.value, group, &mg))
            return cp_infer_fail(c,
                                 "attribute 'group' (%lld) times the %lld output channels of "
                                 "weight '%s' does not fit in 64 bits",
                                 (long long)group, (long long)m.value, w->name);
        cp_infer_dim_set(&m, mg);
    }
    if (b && b->shape.rank == 1 && b->shape.dims[0].value >= 0 && m.value >= 0 &&
        b->shape.dims[0].value != m.value)
        return cp_infer_fail(c, "bias '%s' has %lld elements, expected %lld", b->name,
                             (long long)b->shape.dims[0].value, (long long)m.value);
    int64_t oshape[CP_MAX_RANK];
    size_t n_os;
    bool has_os;
    st = cp_infer_attr_ints(c, "output_shape", oshape, CP_MAX_RANK, &n_os, &has_os);
    if (st != CP_OK)
        return st;
    if (has_os && n_os != (size_t)n && n_os != (size_t)r)
        return cp_infer_fail(c, "attribute 'output_shape' has %zu entries, expected %d", n_os, n);
    for (size_t k = 0; has_os && k < n_os; k++)
        if (oshape[k] < 0)
            return cp_infer_fail(c, "attribute 'output_shape' has invalid entry %lld",
                                 (long long)oshape[k]);
    s.rank = r;
    s.dims[0] = dim_or_dyn(&x->shape, 0);
    s.dims[1] = m;
    for (int k = 0; k < n; k++) {
        int64_t o;
        st = transposed_out(c, &win, k, dim_or_dyn(&x->shape, k + 2).value,
                            has_os ? oshape[n_os - (size_t)n + (size_t)k] : -1, &o);
        if (st != CP_OK)
            return st;
        cp_infer_dim_set(&s.dims[k + 2], o);
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

enum cp_status cp_infer_pool(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    const struct cp_attr *ka = cp_node_attr(c->node, "kernel_shape");
    if (!ka)
        return cp_infer_fail(c, "missing required attribute 'kernel_shape'");
    int n = ka->type == CP_ATTR_INTS ? (int)ka->n : 1;
    if (n < 1 || n > MAX_SPATIAL)
        return cp_infer_fail(c, "attribute 'kernel_shape' has %d entries", n);
    int r = x->shape.rank;
    if (r >= 0 && r != n + 2)
        return cp_infer_fail(c, "input '%s' has rank %d but kernel_shape has %d entries", x->name,
                             r, n);
    struct window win;
    bool has_kernel;
    enum cp_status st = read_window(c, n, NULL, &win, &has_kernel);
    if (st != CP_OK)
        return st;
    struct cp_shape s;
    s.rank = n + 2;
    s.dims[0] = dim_or_dyn(&x->shape, 0);
    s.dims[1] = dim_or_dyn(&x->shape, 1);
    for (int k = 0; k < n; k++) {
        int64_t o;
        st = window_out(c, &win, k, dim_or_dyn(&x->shape, k + 2).value, x->name, &o);
        if (st != CP_OK)
            return st;
        cp_infer_dim_set(&s.dims[k + 2], o);
    }
    st = cp_infer_set_out(c, 0, x->dtype, &s);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 1, CP_DTYPE_I64, &s); /* MaxPool indices */
    return st;
}

enum cp_status cp_infer_global_pool(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    struct cp_shape s = x->shape;
    if (s.rank >= 0 && s.rank < 2)
        return cp_infer_fail(c, "input '%s' must have rank >= 2 (N, C, ...), got %d", x->name,
                             s.rank);
    for (int k = 2; k < s.rank; k++)
        cp_infer_dim_set(&s.dims[k], 1);
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* ---- Resize and Pad ---------------------------------------------------------------- */

/* 2^63: the first double no int64 holds. */
#define TWO_63 9223372036854775808.0

/* An optional input given as an empty tensor counts as absent. */
static int32_t nonempty_input(const struct cp_infer *c, size_t i)
{
    int32_t ti = cp_infer_in_index(c, i);
    const struct cp_tensor *t = ti >= 0 ? cp_graph_tensor(c->g, ti) : NULL;
    if (!t || cp_shape_numel(&t->shape) == 0)
        return -1;
    return ti;
}

/* Length of a 1-D shape-like input, -1 if unknown. */
static int64_t vector_len(const struct cp_infer *c, int32_t ti)
{
    const struct cp_shape *s = &cp_graph_tensor(c->g, ti)->shape;
    return s->rank == 1 ? s->dims[0].value : -1;
}

/* Axes a Resize or Pad applies to: the `axes` attribute or input (opset 18),
 * else all of them. OUT: *n. false when they cannot be known. */
static enum cp_status op_axes(struct cp_infer *c, int r, int32_t axes_input, int *axes, int *n,
                              bool *known)
{
    int64_t v[CP_VALUE_MAX_ELEMS];
    int64_t nv = 0;
    size_t na;
    bool present;
    *known = true;
    enum cp_status st = cp_infer_attr_ints(c, "axes", v, CP_VALUE_MAX_ELEMS, &na, &present);
    if (st != CP_OK)
        return st;
    nv = (int64_t)na;
    if (!present && axes_input >= 0) {
        present = true;
        if (!cp_infer_ints(c, axes_input, v, CP_VALUE_MAX_ELEMS, &nv)) {
            *known = false;
            return CP_OK;
        }
    }
    if (!present) {
        for (int k = 0; k < r; k++)
            axes[k] = k;
        *n = r;
        return CP_OK;
    }
    if (nv > r)
        return cp_infer_fail(c, "%lld axes given for rank %d", (long long)nv, r);
    bool seen[CP_MAX_RANK] = {false};
    for (int64_t k = 0; k < nv; k++) {
        if ((st = cp_infer_axis(c, v[k], r, false, "axis", &axes[k])) != CP_OK)
            return st;
        if (seen[axes[k]])
            return cp_infer_fail(c, "axis %lld is listed twice", (long long)v[k]);
        seen[axes[k]] = true;
    }
    *n = (int)nv;
    return CP_OK;
}

enum cp_status cp_infer_resize(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int r = x->shape.rank;
    /* Opset 10: Resize(X, scales); from 11: Resize(X, roi, scales, sizes). */
    int32_t scales = nonempty_input(c, c->opset < 11 ? 1 : 2);
    int32_t sizes = c->opset < 11 ? -1 : nonempty_input(c, 3);
    if (scales < 0 && sizes < 0 && cp_infer_in_index(c, c->opset < 11 ? 1 : 2) < 0 &&
        cp_infer_in_index(c, 3) < 0)
        return cp_infer_fail(c, "needs either 'scales' or 'sizes'");
    struct cp_shape s;
    if (r < 0) {
        int64_t len = sizes >= 0 ? vector_len(c, sizes) : scales >= 0 ? vector_len(c, scales) : -1;
        cp_infer_shape_dyn(&s, len >= 0 && len <= CP_MAX_RANK ? (int)len : -1);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int axes[CP_MAX_RANK], na;
    bool axes_known;
    enum cp_status st = op_axes(c, r, -1, axes, &na, &axes_known);
    if (st != CP_OK)
        return st;
    s = x->shape;
    for (int k = 0; k < na; k++)
        cp_infer_dim_dyn(&s.dims[axes[k]]);
    const char *what = sizes >= 0 ? "sizes" : "scales";
    int32_t src = sizes >= 0 ? sizes : scales;
    int64_t len = src >= 0 ? vector_len(c, src) : -1;
    if (len >= 0 && len != na)
        return cp_infer_fail(c, "'%s' has %lld entries for %d axes of '%s'", what, (long long)len,
                             na, x->name);
    if (sizes >= 0) {
        int64_t n;
        const struct cp_sval *e = cp_infer_vals(c, sizes, &n);
        if (e && n == na) {
            for (int k = 0; k < na; k++) {
                struct cp_dim *dm = &s.dims[axes[k]];
                if (e[k].known && e[k].v < 0)
                    return cp_infer_fail(c, "'sizes' has negative entry %lld for axis %d",
                                         (long long)e[k].v, axes[k]);
                dm->value = e[k].known ? e[k].v : -1;
                dm->sym = e[k].known ? NULL : e[k].sym;
            }
            /* not_larger / not_smaller: one scale for all axes, then round. */
            const char *pol = cp_node_attr_string(c->node, "keep_aspect_ratio_policy", "stretch");
            bool all = strcmp(pol, "stretch") != 0;
            double scale = strcmp(pol, "not_larger") == 0 ? INFINITY : 0.0;
            for (int k = 0; all && k < na; k++) {
                int64_t in = x->shape.dims[axes[k]].value;
                all = e[k].known && in > 0;
                if (!all)
                    break;
                double sk = (double)e[k].v / (double)in;
                scale = strcmp(pol, "not_larger") == 0 ? fmin(scale, sk) : fmax(scale, sk);
            }
            for (int k = 0; all && k < na; k++) {
                double v = round(scale * (double)x->shape.dims[axes[k]].value);
                if (!(v < TWO_63))
                    return cp_infer_fail(
                        c,
                        "'sizes' give axis %d of '%s' the size %g, which does not fit in 64 bits",
                        axes[k], x->name, v);
                cp_infer_dim_set(&s.dims[axes[k]], (int64_t)v);
            }
        }
    } else if (scales >= 0) {
        double f[CP_VALUE_MAX_ELEMS];
        int64_t n;
        const char *mode = cp_node_attr_string(c->node, "coordinate_transformation_mode", "");
        /* tf_crop_and_resize sizes the output from roi too: left dynamic. */
        if (strcmp(mode, "tf_crop_and_resize") != 0 &&
            cp_infer_doubles(c, scales, f, CP_VALUE_MAX_ELEMS, &n) && n == na) {
            for (int k = 0; k < na; k++) {
                const struct cp_dim *in = &x->shape.dims[axes[k]];
                if (!(f[k] > 0.0))
                    return cp_infer_fail(c, "scale %g for axis %d is not positive", f[k], axes[k]);
                if (f[k] == 1.0)
                    s.dims[axes[k]] = *in;
                else if (in->value >= 0) {
                    double v = floor((double)in->value * f[k]);
                    if (!(v < TWO_63))
                        return cp_infer_fail(c,
                                             "scale %g for axis %d of '%s' (size %lld) gives %g, "
                                             "which does not fit in 64 bits",
                                             f[k], axes[k], x->name, (long long)in->value, v);
                    cp_infer_dim_set(&s.dims[axes[k]], (int64_t)v);
                }
            }
        }
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

enum cp_status cp_infer_pad(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int r = x->shape.rank;
    struct cp_shape s;
    int64_t pads_attr[2 * CP_MAX_RANK];
    const struct cp_sval *e = NULL;
    struct cp_sval attr_vals[2 * CP_MAX_RANK];
    int64_t np = -1;
    if (c->opset < 11) {
        size_t n;
        bool present;
        enum cp_status st = cp_infer_attr_ints(c, "pads", pads_attr, 2 * CP_MAX_RANK, &n, &present);
        if (st != CP_OK)
            return st;
        if (!present)
            return cp_infer_fail(c, "missing required attribute 'pads'");
        for (size_t k = 0; k < n; k++)
            attr_vals[k] = (struct cp_sval){pads_attr[k], NULL, true};
        e = attr_vals;
        np = (int64_t)n;
    } else {
        int32_t pi = cp_infer_in_index(c, 1);
        if (pi < 0)
            return cp_infer_fail(c, "required input 1 (pads) is missing");
        e = cp_infer_vals(c, pi, &np);
        if (!e)
            np = vector_len(c, pi);
    }
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int axes[CP_MAX_RANK], na;
    bool axes_known;
    enum cp_status st =
        op_axes(c, r, c->opset >= 18 ? cp_infer_in_index(c, 3) : -1, axes, &na, &axes_known);
    if (st != CP_OK)
        return st;
    if (!axes_known) {
        cp_infer_shape_dyn(&s, r);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (np >= 0 && np != 2 * (int64_t)na)
        return cp_infer_fail(c, "pads has %lld entries, expected %d for rank %d", (long long)np,
                             2 * na, r);
    s = x->shape;
    for (int k = 0; k < na; k++) {
        struct cp_dim *dm = &s.dims[axes[k]];
        if (!e) {
            cp_infer_dim_dyn(dm);
            continue;
        }
        struct cp_sval b = e[k], en = e[k + na];
        if (b.known && en.known && b.v == 0 && en.v == 0)
            continue;
        if (!b.known || !en.known || dm->value < 0) {
            cp_infer_dim_dyn(dm);
            continue;
        }
        int64_t o;
        if (__builtin_add_overflow(dm->value, b.v, &o) || __builtin_add_overflow(o, en.v, &o) ||
            o < 0)
            return cp_infer_fail(c,
                                 "padding axis %d of '%s' (size %lld) by %lld and %lld gives "
                                 "a negative size",
                                 axes[k], x->name, (long long)dm->value, (long long)b.v,
                                 (long long)en.v);
        cp_infer_dim_set(dm, o);
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}
