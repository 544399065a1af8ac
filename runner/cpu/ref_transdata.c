/* Layout index mapping (layout.h), the reference TransData kernel, and the
 * adapter that runs reference kernels on plain copies of re-laid-out
 * tensors.
 *
 * TransData moves a tensor's bytes between plain NCHW (or ND), NHWC and the
 * blocked nChw8c / nChw16c, one element at a time through the offset
 * formula of each layout; the logical shape is unchanged. Between two plain
 * layouts it is a copy. */
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <string.h>

#define LAYOUT_ALIGN 64
#define MAX_IO       64 /* Concat's parts in a region (layout_transform.c) */

bool cp_layout_is_plain(enum cp_layout l)
{
    return l == CP_LAYOUT_UNDEF || l == CP_LAYOUT_ND || l == CP_LAYOUT_NCHW || l == CP_LAYOUT_NCDHW;
}

bool cp_tensor_is_plain(const struct cp_tensor *t)
{
    return !t || cp_layout_is_plain(t->layout);
}

int cp_layout_block(enum cp_layout l)
{
    return l == CP_LAYOUT_NCHW8C ? 8 : l == CP_LAYOUT_NCHW16C ? 16 : 0;
}

bool cp_layout_fits(enum cp_layout l, const struct cp_shape *s)
{
    if (cp_layout_is_plain(l))
        return true;
    if (l != CP_LAYOUT_NHWC && !cp_layout_block(l))
        return false;
    if (s->rank != 4 || !cp_shape_is_static(s))
        return false;
    int b = cp_layout_block(l);
    return b == 0 || s->dims[1].value % b == 0;
}

int64_t cp_layout_offset(enum cp_layout l, const int64_t *dims, int64_t n, int64_t c, int64_t h,
                         int64_t w)
{
    int64_t C = dims[1], H = dims[2], W = dims[3];
    if (l == CP_LAYOUT_NHWC)
        return ((n * H + h) * W + w) * C + c;
    int64_t b = cp_layout_block(l);
    if (b)
        return (((n * (C / b) + c / b) * H + h) * W + w) * b + c % b;
    return ((n * C + c) * H + h) * W + w;
}

void cp_layout_convert(void *dst, enum cp_layout to, const void *src, enum cp_layout from,
                       const int64_t *dims, size_t size)
{
    char *d = dst;
    const char *s = src;
    for (int64_t n = 0; n < dims[0]; n++)
        for (int64_t c = 0; c < dims[1]; c++)
            for (int64_t h = 0; h < dims[2]; h++)
                for (int64_t w = 0; w < dims[3]; w++) {
                    int64_t i = cp_layout_offset(from, dims, n, c, h, w);
                    int64_t o = cp_layout_offset(to, dims, n, c, h, w);
                    cp_eval_copy_elem(d + o * (int64_t)size, s + i * (int64_t)size, size);
                }
}

/* ---- TransData ------------------------------------------------------------------------- */

static bool formats(const struct cp_node *n, enum cp_layout *src, enum cp_layout *dst)
{
    *src = cp_layout_from_name(cp_node_attr_string(n, "src_format", ""));
    *dst = cp_layout_from_name(cp_node_attr_string(n, "dst_format", ""));
    return *src != CP_LAYOUT_UNDEF && *dst != CP_LAYOUT_UNDEF;
}

/* A tensor's tag agrees with a format when both are plain or both equal. */
static bool tag_agrees(enum cp_layout tag, enum cp_layout fmt)
{
    return cp_layout_is_plain(tag) ? cp_layout_is_plain(fmt) : tag == fmt;
}

static bool transdata_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    enum cp_layout src, dst;
    if (!x || !formats(n, &src, &dst) || x->dtype != y->dtype ||
        !cp_shape_equal(&x->shape, &y->shape) || cp_dtype_size(x->dtype) == 0)
        return false;
    return cp_layout_fits(src, &x->shape) && cp_layout_fits(dst, &x->shape) &&
           tag_agrees(x->layout, src) && tag_agrees(y->layout, dst);
}

static enum cp_status transdata_run(struct cp_kexec *k)
{
    enum cp_layout src, dst;
    if (!formats(k->node, &src, &dst))
        return CP_ERR_INTERNAL;
    const struct cp_tensor *x = k->in[0];
    size_t size = cp_dtype_size(x->dtype);
    if (cp_layout_is_plain(src) && cp_layout_is_plain(dst)) {
        cp_ref_copy(k->out_data[0], k->in_data[0], (size_t)cp_ref_numel(&x->shape) * size);
        return CP_OK;
    }
    int64_t dims[4];
    for (int i = 0; i < 4; i++)
        dims[i] = x->shape.dims[i].value;
    cp_layout_convert(k->out_data[0], dst, k->in_data[0], src, dims, size);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_trans_data, CP_OP_TRANS_DATA, transdata_supports, NULL, transdata_run);

/* ---- the adapter for reference kernels ---------------------------------------------- */

/* Whether tensor t needs a plain copy: a non-plain rank-4 tensor. */
static bool needs_copy(const struct cp_tensor *t)
{
    return t && !cp_layout_is_plain(t->layout) && t->shape.rank == 4;
}

static size_t plain_bytes(const struct cp_tensor *t)
{
    size_t n = (size_t)cp_ref_numel(&t->shape) * cp_dtype_size(t->dtype);
    return (n + LAYOUT_ALIGN - 1) / LAYOUT_ALIGN * LAYOUT_ALIGN;
}

size_t cp_ref_layout_bytes(const struct cp_kexec *k)
{
    size_t total = 0;
    for (size_t i = 0; i < k->node->n_inputs; i++)
        if (needs_copy(k->in[i]))
            total += plain_bytes(k->in[i]);
    for (size_t i = 0; i < k->node->n_outputs; i++)
        if (needs_copy(k->out[i]))
            total += plain_bytes(k->out[i]);
    return total;
}

enum cp_status cp_ref_layout_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = cp_ref_layout_bytes(k);
    return CP_OK;
}

static void dims4(const struct cp_tensor *t, int64_t *dims)
{
    for (int i = 0; i < 4; i++)
        dims[i] = t->shape.dims[i].value;
}

enum cp_status cp_ref_layout_run(struct cp_kexec *k, size_t inner_scratch,
                                 enum cp_status (*run)(struct cp_kexec *k))
{
    size_t ni = k->node->n_inputs, no = k->node->n_outputs;
    if (cp_ref_layout_bytes(k) == 0)
        return run(k);
    if (ni > MAX_IO || no > MAX_IO || !k->scratch)
        return CP_ERR_INTERNAL;
    /* The kernel sees plain copies of the data and plain tags on copies of
     * the tensors, so a reference kernel that calls another one (FusedConv
     * runs the Conv kernel) does not convert twice. */
    struct cp_tensor view_in[MAX_IO], view_out[MAX_IO];
    const struct cp_tensor *saved_in_t[MAX_IO], *saved_out_t[MAX_IO];
    void *saved_in[MAX_IO], *saved_out[MAX_IO];
    char *p = (char *)k->scratch + inner_scratch;
    int64_t dims[4];
    for (size_t i = 0; i < ni; i++) {
        saved_in[i] = k->in_data[i];
        saved_in_t[i] = k->in[i];
        if (!needs_copy(k->in[i]))
            continue;
        dims4(k->in[i], dims);
        cp_layout_convert(p, CP_LAYOUT_NCHW, saved_in[i], k->in[i]->layout, dims,
                          cp_dtype_size(k->in[i]->dtype));
        view_in[i] = *k->in[i];
        view_in[i].layout = CP_LAYOUT_NCHW;
        k->in[i] = &view_in[i];
        k->in_data[i] = p;
        p += plain_bytes(saved_in_t[i]);
    }
    for (size_t i = 0; i < no; i++) {
        saved_out[i] = k->out_data[i];
        saved_out_t[i] = k->out[i];
        if (!needs_copy(k->out[i]))
            continue;
        view_out[i] = *k->out[i];
        view_out[i].layout = CP_LAYOUT_NCHW;
        k->out[i] = &view_out[i];
        k->out_data[i] = p;
        p += plain_bytes(saved_out_t[i]);
    }
    enum cp_status st = run(k);
    for (size_t i = 0; i < no; i++) {
        const struct cp_tensor *t = saved_out_t[i];
        if (st == CP_OK && needs_copy(t)) {
            dims4(t, dims);
            cp_layout_convert(saved_out[i], t->layout, k->out_data[i], CP_LAYOUT_NCHW, dims,
                              cp_dtype_size(t->dtype));
        }
        k->out[i] = t;
        k->out_data[i] = saved_out[i];
    }
    for (size_t i = 0; i < ni; i++) {
        k->in[i] = saved_in_t[i];
        k->in_data[i] = saved_in[i];
    }
    return st;
}
