/* Inference for the [nn] family: LRN, LpNormalization,
 * MeanVarianceNormalization, GlobalMaxPool, LpPool, GlobalLpPool,
 * MaxUnpool, DepthToSpace, SpaceToDepth, GridSample, RoiAlign and
 * NonMaxSuppression. */
#include "graph/infer_internal.h"

#include <string.h>

static enum cp_status need_float(struct cp_infer *c, const struct cp_tensor *x)
{
    if (x->dtype != CP_DTYPE_UNDEFINED && !cp_dtype_is_float(x->dtype))
        return cp_infer_fail(c, "input '%s' must be a floating-point tensor", x->name);
    return CP_OK;
}

/* Same shape and dtype as input 0; `min_rank` checked when known. */
static enum cp_status same_as_input(struct cp_infer *c, int min_rank)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    enum cp_status st = need_float(c, x);
    if (st != CP_OK)
        return st;
    if (x->shape.rank >= 0 && x->shape.rank < min_rank)
        return cp_infer_fail(c, "input '%s' must have rank >= %d, got %d", x->name, min_rank,
                             x->shape.rank);
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

enum cp_status cp_infer_lrn(struct cp_infer *c)
{
    if (cp_node_attr_int(c->node, "size", 0) < 1)
        return cp_infer_fail(c, "attribute 'size' must be given and >= 1");
    return same_as_input(c, 2);
}

enum cp_status cp_infer_lp_normalization(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t p = cp_node_attr_int(c->node, "p", 2);
    if (p != 1 && p != 2)
        return cp_infer_fail(c, "attribute 'p' must be 1 or 2, got %lld", (long long)p);
    if (x->shape.rank >= 0) {
        int ax;
        enum cp_status st = cp_infer_axis(c, cp_node_attr_int(c->node, "axis", -1), x->shape.rank,
                                          false, "axis", &ax);
        if (st != CP_OK)
            return st;
    }
    return same_as_input(c, 1);
}

enum cp_status cp_infer_mvn(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    const struct cp_attr *a = cp_node_attr(c->node, "axes");
    if (a && x->shape.rank >= 0) {
        for (size_t i = 0; i < a->n; i++) {
            int ax;
            enum cp_status st = cp_infer_axis(c, a->ints[i], x->shape.rank, false, "axes", &ax);
            if (st != CP_OK)
                return st;
        }
    } else if (!a && x->shape.rank >= 0 && x->shape.rank < 4) {
        return cp_infer_fail(c,
                             "input '%s' has rank %d; without 'axes' (default 0, 2, 3) it "
                             "must have rank >= 4",
                             x->name, x->shape.rank);
    }
    return same_as_input(c, 1);
}

enum cp_status cp_infer_global_max_pool(struct cp_infer *c)
{
    return cp_infer_global_pool(c);
}

enum cp_status cp_infer_lp_pool(struct cp_infer *c)
{
    if (cp_node_attr_int(c->node, "p", 2) < 1)
        return cp_infer_fail(c, "attribute 'p' must be >= 1");
    return cp_infer_pool(c);
}

/* MaxUnpool: output_shape input when given (its values must be known),
 * else (in - 1) * stride + kernel - pad_begin - pad_end per spatial dim. */
enum cp_status cp_infer_max_unpool(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *ix = cp_infer_in(c, 1);
    const struct cp_attr *ks = cp_node_attr(c->node, "kernel_shape");
    if (!ks || ks->type != CP_ATTR_INTS || ks->n < 1 || ks->n > CP_MAX_RANK - 2)
        return cp_infer_fail(c, "attribute 'kernel_shape' is missing or malformed");
    int ns = (int)ks->n, r = ns + 2;
    if (x->shape.rank >= 0 && x->shape.rank != r)
        return cp_infer_fail(c, "input '%s' has rank %d but kernel_shape has %d entries", x->name,
                             x->shape.rank, ns);
    if (ix && ix->dtype != CP_DTYPE_UNDEFINED && ix->dtype != CP_DTYPE_I64)
        return cp_infer_fail(c, "indices '%s' must be int64", ix->name);
    struct cp_shape s;
    cp_infer_shape_dyn(&s, r);
    int32_t os = cp_infer_in_index(c, 2);
    if (os >= 0) {
        int64_t v[CP_MAX_RANK], n;
        if (cp_infer_ints(c, os, v, CP_MAX_RANK, &n)) {
            if (n != r)
                return cp_infer_fail(c, "output_shape has %lld entries; expected %d", (long long)n,
                                     r);
            for (int k = 0; k < r; k++) {
                if (v[k] < 0)
                    return cp_infer_fail(c, "output_shape[%d] is negative", k);
                cp_infer_dim_set(&s.dims[k], v[k]);
            }
        }
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int64_t st_[CP_MAX_RANK], pads[2 * CP_MAX_RANK];
    size_t n;
    bool pr;
    enum cp_status st = cp_infer_attr_ints(c, "strides", st_, CP_MAX_RANK, &n, &pr);
    if (st != CP_OK)
        return st;
    if (!pr)
        for (int k = 0; k < ns; k++)
            st_[k] = 1;
    else if ((int)n != ns)
        return cp_infer_fail(c, "attribute 'strides' has %zu entries, expected %d", n, ns);
    if ((st = cp_infer_attr_ints(c, "pads", pads, 2 * CP_MAX_RANK, &n, &pr)) != CP_OK)
        return st;
    if (!pr)
        memset(pads, 0, sizeof pads);
    else if ((int)n != 2 * ns)
        return cp_infer_fail(c, "attribute 'pads' has %zu entries, expected %d", n, 2 * ns);
    if (x->shape.rank == r) {
        s.dims[0] = x->shape.dims[0];
        s.dims[1] = x->shape.dims[1];
        for (int k = 0; k < ns; k++) {
            int64_t in = x->shape.dims[k + 2].value;
            if (in < 0)
                continue;
            if (st_[k] < 1 || ks->ints[k] < 1 || pads[k] < 0 || pads[k + ns] < 0)
                return cp_infer_fail(c, "strides, kernel_shape and pads must be positive");
            int64_t o = (in - 1) * st_[k] + ks->ints[k] - pads[k] - pads[k + ns];
            if (o < 0)
                return cp_infer_fail(c, "spatial dim %d of the output would be negative", k);
            cp_infer_dim_set(&s.dims[k + 2], o);
        }
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* DepthToSpace (to_space) and SpaceToDepth. */
static enum cp_status infer_d2s(struct cp_infer *c, bool to_space)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t b = cp_node_attr_int(c->node, "blocksize", 0);
    if (b < 1)
        return cp_infer_fail(c, "attribute 'blocksize' must be given and >= 1");
    if (to_space) {
        const char *mode = cp_node_attr_string(c->node, "mode", "DCR");
        if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
            return cp_infer_fail(c, "unknown mode '%s' (DCR or CRD)", mode);
    }
    struct cp_shape s;
    if (x->shape.rank < 0) {
        cp_infer_shape_dyn(&s, 4);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (x->shape.rank != 4)
        return cp_infer_fail(c, "input '%s' must have rank 4 (N, C, H, W), got %d", x->name,
                             x->shape.rank);
    s = x->shape;
    int64_t ch = x->shape.dims[1].value, h = x->shape.dims[2].value, w = x->shape.dims[3].value;
    if (to_space) {
        if (ch >= 0 && ch % (b * b) != 0)
            return cp_infer_fail(c, "channels %lld are not a multiple of blocksize^2 (%lld)",
                                 (long long)ch, (long long)(b * b));
        if (ch >= 0)
            cp_infer_dim_set(&s.dims[1], ch / (b * b));
        else
            cp_infer_dim_dyn(&s.dims[1]);
        for (int k = 2; k < 4; k++) {
            int64_t v = x->shape.dims[k].value;
            if (v >= 0)
                cp_infer_dim_set(&s.dims[k], v * b);
            else
                cp_infer_dim_dyn(&s.dims[k]);
        }
    } else {
        if ((h >= 0 && h % b != 0) || (w >= 0 && w % b != 0))
            return cp_infer_fail(c, "spatial dims %lldx%lld are not multiples of blocksize %lld",
                                 (long long)h, (long long)w, (long long)b);
        if (ch >= 0)
            cp_infer_dim_set(&s.dims[1], ch * b * b);
        else
            cp_infer_dim_dyn(&s.dims[1]);
        for (int k = 2; k < 4; k++) {
            int64_t v = x->shape.dims[k].value;
            if (v >= 0)
                cp_infer_dim_set(&s.dims[k], v / b);
            else
                cp_infer_dim_dyn(&s.dims[k]);
        }
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

enum cp_status cp_infer_depth_to_space(struct cp_infer *c)
{
    return infer_d2s(c, true);
}

enum cp_status cp_infer_space_to_depth(struct cp_infer *c)
{
    return infer_d2s(c, false);
}

/* GridSample: X (N, C, D1..Dr), grid (N, O1..Or, r) -> (N, C, O1..Or). */
enum cp_status cp_infer_grid_sample(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *gr = cp_infer_in(c, 1);
    const char *mode = cp_node_attr_string(c->node, "mode", c->opset >= 20 ? "linear" : "bilinear");
    const char *pad = cp_node_attr_string(c->node, "padding_mode", "zeros");
    bool ok_mode = strcmp(mode, "nearest") == 0 ||
                   (c->opset >= 20 ? strcmp(mode, "linear") == 0 || strcmp(mode, "cubic") == 0
                                   : strcmp(mode, "bilinear") == 0 || strcmp(mode, "bicubic") == 0);
    if (!ok_mode)
        return cp_infer_fail(c, "unknown mode '%s' for opset %lld", mode, (long long)c->opset);
    if (strcmp(pad, "zeros") != 0 && strcmp(pad, "border") != 0 && strcmp(pad, "reflection") != 0)
        return cp_infer_fail(c, "unknown padding_mode '%s'", pad);
    enum cp_status st = need_float(c, gr);
    if (st != CP_OK)
        return st;
    struct cp_shape s;
    if (x->shape.rank < 0 || gr->shape.rank < 0) {
        cp_infer_shape_dyn(&s, x->shape.rank >= 0 ? x->shape.rank : gr->shape.rank);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int r = x->shape.rank;
    if (r < 3 || gr->shape.rank != r)
        return cp_infer_fail(c,
                             "input '%s' (rank %d) and grid '%s' (rank %d) must have the same "
                             "rank >= 3",
                             x->name, r, gr->name, gr->shape.rank);
    if (c->opset < 20 && r != 4)
        return cp_infer_fail(c, "opset %lld takes 4-D input only (N-D from opset 20)",
                             (long long)c->opset);
    int64_t last = gr->shape.dims[r - 1].value;
    if (last >= 0 && last != r - 2)
        return cp_infer_fail(c, "grid '%s' last dim is %lld; expected %d", gr->name,
                             (long long)last, r - 2);
    s = x->shape;
    for (int k = 2; k < r; k++)
        s.dims[k] = gr->shape.dims[k - 1];
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* RoiAlign: X (N, C, H, W), rois (R, 4), batch_indices (R) -> (R, C, oh, ow). */
enum cp_status cp_infer_roi_align(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *rois = cp_infer_in(c, 1),
                           *bi = cp_infer_in(c, 2);
    const char *mode = cp_node_attr_string(c->node, "mode", "avg");
    if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0)
        return cp_infer_fail(c, "unknown mode '%s' (avg or max)", mode);
    const char *ctm = cp_node_attr_string(c->node, "coordinate_transformation_mode", "half_pixel");
    if (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0)
        return cp_infer_fail(c, "unknown coordinate_transformation_mode '%s'", ctm);
    int64_t oh = cp_node_attr_int(c->node, "output_height", 1);
    int64_t ow = cp_node_attr_int(c->node, "output_width", 1);
    if (oh < 1 || ow < 1 || cp_node_attr_int(c->node, "sampling_ratio", 0) < 0)
        return cp_infer_fail(c, "output_height, output_width must be >= 1, sampling_ratio >= 0");
    enum cp_status st = need_float(c, x);
    if (st != CP_OK)
        return st;
    if (x->shape.rank >= 0 && x->shape.rank != 4)
        return cp_infer_fail(c, "input '%s' must have rank 4, got %d", x->name, x->shape.rank);
    if (rois->shape.rank >= 0 && (rois->shape.rank != 2 || (rois->shape.dims[1].value >= 0 &&
                                                            rois->shape.dims[1].value != 4)))
        return cp_infer_fail(c, "rois '%s' must have shape (num_rois, 4)", rois->name);
    if (bi->dtype != CP_DTYPE_UNDEFINED && bi->dtype != CP_DTYPE_I64)
        return cp_infer_fail(c, "batch_indices '%s' must be int64", bi->name);
    if (bi->shape.rank >= 0 && bi->shape.rank != 1)
        return cp_infer_fail(c, "batch_indices '%s' must be 1-D", bi->name);
    struct cp_shape s;
    cp_infer_shape_dyn(&s, 4);
    if (rois->shape.rank == 2)
        s.dims[0] = rois->shape.dims[0];
    else if (bi->shape.rank == 1)
        s.dims[0] = bi->shape.dims[0];
    if (x->shape.rank == 4)
        s.dims[1] = x->shape.dims[1];
    cp_infer_dim_set(&s.dims[2], oh);
    cp_infer_dim_set(&s.dims[3], ow);
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* NonMaxSuppression: the number of selected boxes depends on the data, so
 * the first dim stays dynamic unless the model declares it; the kernel
 * checks at run time that the selection fits what was declared. */
enum cp_status cp_infer_nms(struct cp_infer *c)
{
    const struct cp_tensor *b = cp_infer_in(c, 0), *sc = cp_infer_in(c, 1);
    enum cp_status st = need_float(c, b);
    if (st == CP_OK)
        st = need_float(c, sc);
    if (st != CP_OK)
        return st;
    if (b->shape.rank >= 0 &&
        (b->shape.rank != 3 || (b->shape.dims[2].value >= 0 && b->shape.dims[2].value != 4)))
        return cp_infer_fail(c, "boxes '%s' must have shape (batches, boxes, 4)", b->name);
    if (sc->shape.rank >= 0 && sc->shape.rank != 3)
        return cp_infer_fail(c, "scores '%s' must have shape (batches, classes, boxes)", sc->name);
    int64_t cpb = cp_node_attr_int(c->node, "center_point_box", 0);
    if (cpb != 0 && cpb != 1)
        return cp_infer_fail(c, "center_point_box must be 0 or 1");
    const struct cp_tensor *m = cp_infer_in(c, 2);
    if (m && m->dtype != CP_DTYPE_UNDEFINED && m->dtype != CP_DTYPE_I64)
        return cp_infer_fail(c, "max_output_boxes_per_class '%s' must be int64", m->name);
    struct cp_shape s;
    cp_infer_shape_dyn(&s, 2);
    cp_infer_dim_set(&s.dims[1], 3);
    return cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
}

/* MaxRoiPool: X (N, C, H, W), rois (R, 5) -> (R, C, pooled_shape). */
enum cp_status cp_infer_max_roi_pool(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *rois = cp_infer_in(c, 1);
    const struct cp_attr *ps = cp_node_attr(c->node, "pooled_shape");
    if (!ps || ps->type != CP_ATTR_INTS || ps->n != 2 || ps->ints[0] < 1 || ps->ints[1] < 1)
        return cp_infer_fail(c, "attribute 'pooled_shape' must be two positive ints");
    enum cp_status st = need_float(c, x);
    if (st != CP_OK)
        return st;
    if (x->shape.rank >= 0 && x->shape.rank != 4)
        return cp_infer_fail(c, "input '%s' must have rank 4, got %d", x->name, x->shape.rank);
    if (rois->shape.rank >= 0 && (rois->shape.rank != 2 || (rois->shape.dims[1].value >= 0 &&
                                                            rois->shape.dims[1].value != 5)))
        return cp_infer_fail(c, "rois '%s' must have shape (num_rois, 5)", rois->name);
    struct cp_shape s;
    cp_infer_shape_dyn(&s, 4);
    if (rois->shape.rank == 2)
        s.dims[0] = rois->shape.dims[0];
    if (x->shape.rank == 4)
        s.dims[1] = x->shape.dims[1];
    cp_infer_dim_set(&s.dims[2], ps->ints[0]);
    cp_infer_dim_set(&s.dims[3], ps->ints[1]);
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* CenterCropPad: each listed axis (default all) becomes shape[i] long. */
enum cp_status cp_infer_center_crop_pad(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *sh = cp_infer_in(c, 1);
    if (sh->dtype != CP_DTYPE_UNDEFINED && sh->dtype != CP_DTYPE_I64 && sh->dtype != CP_DTYPE_I32)
        return cp_infer_fail(c, "shape '%s' must be int32 or int64", sh->name);
    struct cp_shape s;
    int r = x->shape.rank;
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int axes[CP_MAX_RANK], na = 0;
    const struct cp_attr *a = cp_node_attr(c->node, "axes");
    if (a) {
        bool seen[CP_MAX_RANK] = {false};
        for (size_t i = 0; i < a->n && i < CP_MAX_RANK; i++) {
            enum cp_status st = cp_infer_axis(c, a->ints[i], r, false, "axes", &axes[na]);
            if (st != CP_OK)
                return st;
            if (seen[axes[na]])
                return cp_infer_fail(c, "axis %lld is listed twice", (long long)a->ints[i]);
            seen[axes[na++]] = true;
        }
        if (a->n > CP_MAX_RANK)
            return cp_infer_fail(c, "too many axes");
    } else {
        for (int i = 0; i < r; i++)
            axes[na++] = i;
    }
    s = x->shape;
    int64_t v[CP_MAX_RANK], n;
    bool known = cp_infer_ints(c, cp_infer_in_index(c, 1), v, CP_MAX_RANK, &n);
    if (known && n != na)
        return cp_infer_fail(c, "shape '%s' has %lld entries for %d axes", sh->name, (long long)n,
                             na);
    for (int i = 0; i < na; i++) {
        if (!known) {
            cp_infer_dim_dyn(&s.dims[axes[i]]);
        } else if (v[i] < 0) {
            return cp_infer_fail(c, "shape[%d] is negative", i);
        } else {
            cp_infer_dim_set(&s.dims[axes[i]], v[i]);
        }
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* Col2Im: input (N, C * prod(block), L), image_shape, block_shape ->
 * (N, C, image_shape...). Both shapes must be known. */
enum cp_status cp_infer_col2im(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t img[CP_MAX_RANK], blk[CP_MAX_RANK], ni, nb;
    struct cp_shape s;
    if (!cp_infer_ints(c, cp_infer_in_index(c, 1), img, CP_MAX_RANK - 2, &ni) ||
        !cp_infer_ints(c, cp_infer_in_index(c, 2), blk, CP_MAX_RANK - 2, &nb)) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (ni != nb || ni < 1)
        return cp_infer_fail(c, "image_shape and block_shape must have the same length >= 1");
    int64_t prod = 1;
    for (int i = 0; i < ni; i++) {
        if (img[i] < 1 || blk[i] < 1)
            return cp_infer_fail(c, "image_shape and block_shape entries must be >= 1");
        prod *= blk[i];
    }
    if (x->shape.rank >= 0 && x->shape.rank != 3)
        return cp_infer_fail(c, "input '%s' must have rank 3 (N, C*prod(block), L)", x->name);
    cp_infer_shape_dyn(&s, (int)ni + 2);
    if (x->shape.rank == 3) {
        s.dims[0] = x->shape.dims[0];
        int64_t cb = x->shape.dims[1].value;
        if (cb >= 0 && cb % prod != 0)
            return cp_infer_fail(c, "dim 1 of '%s' (%lld) is not a multiple of prod(block) %lld",
                                 x->name, (long long)cb, (long long)prod);
        if (cb >= 0)
            cp_infer_dim_set(&s.dims[1], cb / prod);
    }
    for (int i = 0; i < ni; i++)
        cp_infer_dim_set(&s.dims[i + 2], img[i]);
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* AffineGrid: theta (N, 2, 3) with size (N, C, H, W) -> (N, H, W, 2), or
 * (N, 3, 4) with (N, C, D, H, W) -> (N, D, H, W, 3). */
enum cp_status cp_infer_affine_grid(struct cp_infer *c)
{
    const struct cp_tensor *th = cp_infer_in(c, 0);
    enum cp_status st = need_float(c, th);
    if (st != CP_OK)
        return st;
    int64_t v[CP_MAX_RANK], n;
    struct cp_shape s;
    if (!cp_infer_ints(c, cp_infer_in_index(c, 1), v, CP_MAX_RANK, &n)) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, th->dtype, &s);
    }
    if (n != 4 && n != 5)
        return cp_infer_fail(c, "size must have 4 or 5 entries, got %lld", (long long)n);
    int sp = (int)n - 2;
    if (th->shape.rank >= 0 &&
        (th->shape.rank != 3 || (th->shape.dims[1].value >= 0 && th->shape.dims[1].value != sp) ||
         (th->shape.dims[2].value >= 0 && th->shape.dims[2].value != sp + 1)))
        return cp_infer_fail(c, "theta '%s' must have shape (N, %d, %d)", th->name, sp, sp + 1);
    int64_t dims[CP_MAX_RANK];
    dims[0] = v[0];
    for (int i = 0; i < sp; i++)
        dims[i + 1] = v[i + 2];
    dims[sp + 1] = sp;
    for (int i = 0; i < sp + 2; i++)
        if (dims[i] < 0)
            return cp_infer_fail(c, "size has a negative entry");
    cp_shape_set(&s, sp + 2, dims);
    return cp_infer_set_out(c, 0, th->dtype, &s);
}

/* DeformConv: X (N, C, H, W), W (oC, C/group, kH, kW), offset, [B], [mask]
 * -> (N, oC, oH, oW), oH as Conv's without auto_pad. */
enum cp_status cp_infer_deform_conv(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *w = cp_infer_in(c, 1);
    enum cp_status st = need_float(c, x);
    if (st != CP_OK)
        return st;
    if ((x->shape.rank >= 0 && x->shape.rank != 4) || (w->shape.rank >= 0 && w->shape.rank != 4))
        return cp_infer_fail(c, "input '%s' and weight '%s' must be 4-D (2-D images only)", x->name,
                             w->name);
    int64_t group = cp_node_attr_int(c->node, "group", 1);
    int64_t og = cp_node_attr_int(c->node, "offset_group", 1);
    if (group < 1 || og < 1)
        return cp_infer_fail(c, "group and offset_group must be >= 1");
    int64_t ks[2] = {-1, -1}, str[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    size_t n;
    bool pr;
    if ((st = cp_infer_attr_ints(c, "kernel_shape", ks, 2, &n, &pr)) != CP_OK)
        return st;
    if (pr && n != 2)
        return cp_infer_fail(c, "kernel_shape must have 2 entries");
    if ((st = cp_infer_attr_ints(c, "strides", str, 2, &n, &pr)) != CP_OK)
        return st;
    if (pr && n != 2)
        return cp_infer_fail(c, "strides must have 2 entries");
    if ((st = cp_infer_attr_ints(c, "dilations", dil, 2, &n, &pr)) != CP_OK)
        return st;
    if (pr && n != 2)
        return cp_infer_fail(c, "dilations must have 2 entries");
    if ((st = cp_infer_attr_ints(c, "pads", pads, 4, &n, &pr)) != CP_OK)
        return st;
    if (pr && n != 4)
        return cp_infer_fail(c, "pads must have 4 entries");
    struct cp_shape s;
    cp_infer_shape_dyn(&s, 4);
    if (x->shape.rank == 4)
        s.dims[0] = x->shape.dims[0];
    if (w->shape.rank == 4) {
        s.dims[1] = w->shape.dims[0];
        for (int k = 0; k < 2; k++)
            if (ks[k] < 0)
                ks[k] = w->shape.dims[k + 2].value;
        int64_t cin = x->shape.rank == 4 ? x->shape.dims[1].value : -1;
        int64_t wc = w->shape.dims[1].value;
        if (cin >= 0 && wc >= 0 && wc * group != cin)
            return cp_infer_fail(c,
                                 "weight '%s' has %lld input channels per group; input has "
                                 "%lld channels in %lld groups",
                                 w->name, (long long)wc, (long long)cin, (long long)group);
    }
    for (int k = 0; k < 2; k++) {
        if (str[k] < 1 || dil[k] < 1 || pads[k] < 0 || pads[k + 2] < 0)
            return cp_infer_fail(c, "strides and dilations must be >= 1, pads >= 0");
        int64_t in = x->shape.rank == 4 ? x->shape.dims[k + 2].value : -1;
        if (in < 0 || ks[k] < 1)
            continue;
        int64_t span = in + pads[k] + pads[k + 2] - (dil[k] * (ks[k] - 1) + 1);
        if (span < 0)
            return cp_infer_fail(c, "the kernel is larger than the padded input");
        cp_infer_dim_set(&s.dims[k + 2], span / str[k] + 1);
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}
