/* Helpers shared by the reference kernels (see ref_util.h). */
#include "runner/cpu/ref_util.h"

#include <string.h>

/* ---- nodes ----------------------------------------------------------------- */

int64_t cp_ref_opset(const struct cp_graph *g)
{
    int64_t v = cp_graph_opset(g);
    return v > 0 ? v : 17;
}

const struct cp_tensor *cp_ref_in(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    if (i >= n->n_inputs || n->inputs[i] < 0)
        return NULL;
    return cp_graph_tensor(g, n->inputs[i]);
}

const struct cp_tensor *cp_ref_out(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    if (i >= n->n_outputs || n->outputs[i] < 0)
        return NULL;
    return cp_graph_tensor(g, n->outputs[i]);
}

static bool tensor_is_static(const struct cp_tensor *t)
{
    return t->dtype != CP_DTYPE_UNDEFINED && cp_shape_is_static(&t->shape) &&
           t->shape.rank <= CP_MAX_RANK && cp_shape_numel(&t->shape) >= 0;
}

bool cp_ref_node_is_static(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_out(g, n, 0))
        return false;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (t && !tensor_is_static(t))
            return false;
    }
    for (size_t i = 0; i < n->n_outputs; i++) {
        const struct cp_tensor *t = cp_ref_out(g, n, i);
        if (t && !tensor_is_static(t))
            return false;
    }
    return true;
}

bool cp_ref_has_input(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    const struct cp_tensor *t = cp_ref_in(g, n, i);
    return t && cp_shape_numel(&t->shape) != 0;
}

/* ---- shapes -------------------------------------------------------------------- */

int64_t cp_ref_numel(const struct cp_shape *s)
{
    return cp_ref_span(s, 0, s->rank);
}

void cp_ref_strides(const struct cp_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int k = s->rank - 1; k >= 0; k--) {
        strides[k] = st;
        st *= s->dims[k].value;
    }
}

int64_t cp_ref_span(const struct cp_shape *s, int from, int to)
{
    int64_t p = 1;
    for (int k = from; k < to; k++)
        p *= s->dims[k].value;
    return p;
}

/* ---- elements ------------------------------------------------------------------ */

bool cp_ref_dtype_is_int(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_I64;
}

void cp_ref_copy(void *dst, const void *src, size_t n)
{
    if (n == 0 || dst == src)
        return;
    memmove(dst, src, n);
}

/* ---- windows ------------------------------------------------------------------------ */

enum auto_pad { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID, PAD_BAD };

static enum auto_pad read_auto_pad(const struct cp_node *n)
{
    const char *ap = cp_node_attr_string(n, "auto_pad", "NOTSET");
    if (ap[0] == '\0' || strcmp(ap, "NOTSET") == 0)
        return PAD_NOTSET;
    if (strcmp(ap, "SAME_UPPER") == 0)
        return PAD_SAME_UPPER;
    if (strcmp(ap, "SAME_LOWER") == 0)
        return PAD_SAME_LOWER;
    if (strcmp(ap, "VALID") == 0)
        return PAD_VALID;
    return PAD_BAD;
}

static bool ints_attr_ok(const struct cp_node *n, const char *name, size_t want, int64_t min)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    if (!a)
        return true;
    if (a->type != CP_ATTR_INTS || a->n != want)
        return false;
    for (size_t k = 0; k < a->n; k++)
        if (a->ints[k] < min)
            return false;
    return true;
}

bool cp_ref_window_attrs_ok(const struct cp_node *n, int n_spatial)
{
    if (n_spatial < 1 || n_spatial > CP_REF_MAX_SPATIAL || read_auto_pad(n) == PAD_BAD)
        return false;
    size_t ns = (size_t)n_spatial;
    return ints_attr_ok(n, "kernel_shape", ns, 1) && ints_attr_ok(n, "strides", ns, 1) &&
           ints_attr_ok(n, "dilations", ns, 1) && ints_attr_ok(n, "pads", 2 * ns, 0);
}

static int64_t attr_at(const struct cp_node *n, const char *name, int k, int64_t dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    if (!a || a->type != CP_ATTR_INTS || (size_t)k >= a->n)
        return dflt;
    return a->ints[k];
}

void cp_ref_window_forward(const struct cp_node *n, const struct cp_shape *x,
                           const struct cp_shape *w, const struct cp_shape *y,
                           struct cp_ref_window *win)
{
    int ns = x->rank - 2;
    int lead = CP_REF_MAX_SPATIAL - ns;
    enum auto_pad ap = read_auto_pad(n);
    win->n = ns;
    for (int k = 0; k < CP_REF_MAX_SPATIAL; k++) {
        win->in[k] = win->out[k] = win->kernel[k] = win->stride[k] = win->dilation[k] = 1;
        win->pad_begin[k] = win->pad_end[k] = 0;
    }
    for (int j = 0; j < ns; j++) {
        int k = lead + j;
        win->in[k] = x->dims[j + 2].value;
        win->out[k] = y->dims[j + 2].value;
        int64_t kdflt = w && w->rank == x->rank ? w->dims[j + 2].value : 1;
        win->kernel[k] = attr_at(n, "kernel_shape", j, kdflt);
        win->stride[k] = attr_at(n, "strides", j, 1);
        win->dilation[k] = attr_at(n, "dilations", j, 1);
        if (ap == PAD_NOTSET) {
            win->pad_begin[k] = attr_at(n, "pads", j, 0);
            win->pad_end[k] = attr_at(n, "pads", j + ns, 0);
        } else if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
            int64_t eff = (win->kernel[k] - 1) * win->dilation[k] + 1;
            int64_t total = (win->out[k] - 1) * win->stride[k] + eff - win->in[k];
            if (total < 0)
                total = 0;
            /* SAME_UPPER puts the odd cell at the end, SAME_LOWER at the start. */
            win->pad_begin[k] = ap == PAD_SAME_UPPER ? total / 2 : total - total / 2;
            win->pad_end[k] = total - win->pad_begin[k];
        }
    }
}

/* floor(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

void cp_ref_valid_range(int64_t out, int64_t stride, int64_t off, int64_t in, int64_t *lo,
                        int64_t *hi)
{
    /* o * stride + off >= 0   <=>  o >= ceil(-off / stride)
     * o * stride + off < in   <=>  o <= floor((in - 1 - off) / stride) */
    int64_t a = -floor_div(off, stride); /* ceil(-off / stride) */
    int64_t b = floor_div(in - 1 - off, stride) + 1;
    *lo = a < 0 ? 0 : a > out ? out : a;
    *hi = b < *lo ? *lo : b > out ? out : b;
}
