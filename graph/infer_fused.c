/* Inference for cannprof's own ops (graph.h: FusedConv, FusedMatMul,
 * GroupNormalization, Gelu, FusedAttention, TransData). */
#include "graph/infer_internal.h"
#include "graph/op_eval.h"

#include <string.h>

/* The activation names are op_eval.h's (cp_act_from_name). */
static enum cp_status check_activation(struct cp_infer *c)
{
    const char *act = cp_node_attr_string(c->node, "activation", "");
    if (cp_act_from_name(act) != CP_ACT_BAD)
        return CP_OK;
    return cp_infer_fail(c, "unknown fused activation '%s'", act);
}

/* The residual input, when present, must have the output's shape. */
static enum cp_status check_residual(struct cp_infer *c, size_t idx)
{
    const struct cp_tensor *r = cp_infer_in(c, idx), *y = cp_infer_out(c, 0);
    if (!r || !y || r->shape.rank < 0 || y->shape.rank < 0)
        return CP_OK;
    if (r->shape.rank != y->shape.rank)
        return cp_infer_fail(c, "residual '%s' has rank %d, the output rank %d", r->name,
                             r->shape.rank, y->shape.rank);
    for (int k = 0; k < r->shape.rank; k++) {
        int64_t a = r->shape.dims[k].value, b = y->shape.dims[k].value;
        if (a >= 0 && b >= 0 && a != b) {
            char br[64], by[64];
            return cp_infer_fail(c, "residual '%s' is %s but the output is %s", r->name,
                                 cp_infer_fmt(&r->shape, br), cp_infer_fmt(&y->shape, by));
        }
    }
    return CP_OK;
}

enum cp_status cp_infer_fused_conv(struct cp_infer *c)
{
    enum cp_status st = check_activation(c);
    if (st == CP_OK)
        st = cp_infer_conv(c);
    if (st == CP_OK)
        st = check_residual(c, 3);
    return st;
}

static void swap_last(struct cp_shape *s)
{
    if (s->rank < 2)
        return;
    struct cp_dim t = s->dims[s->rank - 1];
    s->dims[s->rank - 1] = s->dims[s->rank - 2];
    s->dims[s->rank - 2] = t;
}

enum cp_status cp_infer_fused_matmul(struct cp_infer *c)
{
    enum cp_status st = check_activation(c);
    if (st != CP_OK)
        return st;
    const struct cp_tensor *a = cp_infer_in(c, 0), *b = cp_infer_in(c, 1),
                           *bias = cp_infer_in(c, 2);
    struct cp_shape s;
    if (a->shape.rank < 0 || b->shape.rank < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, a->dtype, &s);
    }
    if (a->shape.rank < 2 || b->shape.rank < 2)
        return cp_infer_fail(c, "FusedMatMul needs inputs of rank >= 2 ('%s' %d, '%s' %d)", a->name,
                             a->shape.rank, b->name, b->shape.rank);
    struct cp_shape sa = a->shape, sb = b->shape;
    if (cp_node_attr_int(c->node, "transA", 0))
        swap_last(&sa);
    if (cp_node_attr_int(c->node, "transB", 0))
        swap_last(&sb);
    int64_t ka = sa.dims[sa.rank - 1].value, kb = sb.dims[sb.rank - 2].value;
    if (ka >= 0 && kb >= 0 && ka != kb)
        return cp_infer_fail(c, "inner dimensions differ: %lld vs %lld", (long long)ka,
                             (long long)kb);
    struct cp_shape ba = sa, bb = sb;
    ba.rank -= 2;
    bb.rank -= 2;
    if ((st = cp_infer_broadcast(c, &ba, a->name, &bb, b->name, &s)) != CP_OK)
        return st;
    s.dims[s.rank++] = sa.dims[sa.rank - 2];
    s.dims[s.rank++] = sb.dims[sb.rank - 1];
    if (bias && bias->shape.rank >= 0) {
        int64_t n = s.dims[s.rank - 1].value;
        int64_t bn = bias->shape.rank == 1 ? bias->shape.dims[0].value : -2;
        if (bn == -2 || (bn >= 0 && n >= 0 && bn != n))
            return cp_infer_fail(c, "bias '%s' must be 1-D of %lld elements", bias->name,
                                 (long long)n);
    }
    if ((st = cp_infer_set_out(c, 0, a->dtype, &s)) != CP_OK)
        return st;
    return check_residual(c, 3);
}

enum cp_status cp_infer_group_norm(struct cp_infer *c)
{
    enum cp_status st = check_activation(c);
    if (st != CP_OK)
        return st;
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t groups = cp_node_attr_int(c->node, "num_groups", 0);
    if (groups < 1)
        return cp_infer_fail(c, "num_groups must be >= 1, got %lld", (long long)groups);
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return cp_infer_fail(c, "input '%s' must have rank >= 2 (N, C, ...)", x->name);
    if (x->shape.rank >= 2) {
        int64_t ch = x->shape.dims[1].value;
        if (ch >= 0 && ch % groups != 0)
            return cp_infer_fail(c, "%lld channels are not divisible into %lld groups",
                                 (long long)ch, (long long)groups);
        for (size_t i = 1; i <= 2; i++) {
            const struct cp_tensor *p = cp_infer_in(c, i);
            if (p && p->shape.rank >= 0 && ch >= 0 &&
                (p->shape.rank != 1 ||
                 (p->shape.dims[0].value >= 0 && p->shape.dims[0].value != ch)))
                return cp_infer_fail(c, "'%s' must be 1-D of %lld channels", p->name,
                                     (long long)ch);
        }
    }
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

enum cp_status cp_infer_gelu(struct cp_infer *c)
{
    const char *ap = cp_node_attr_string(c->node, "approximate", "none");
    if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
        return cp_infer_fail(c, "approximate must be \"none\" or \"tanh\", got '%s'", ap);
    return cp_infer_unary(c);
}

/* Dimensions of one attention operand in [B, H, rows, depth] terms. */
struct att_dims {
    struct cp_dim b, h, rows, depth;
};

static enum cp_status att_operand(struct cp_infer *c, size_t idx, const char *attr, int64_t heads,
                                  struct att_dims *o)
{
    const struct cp_tensor *t = cp_infer_in(c, idx);
    const char *fmt = cp_node_attr_string(c->node, attr, "BHND");
    struct cp_dim dyn = {-1, NULL};
    o->b = o->h = o->rows = o->depth = dyn;
    bool packed = strcmp(fmt, "BNHD") == 0;
    bool trans = strcmp(fmt, "BHDN") == 0;
    if (!packed && !trans && strcmp(fmt, "BHND") != 0)
        return cp_infer_fail(c, "%s must be BHND, BHDN or BNHD, got '%s'", attr, fmt);
    int want = packed ? 3 : 4;
    if (t->shape.rank < 0)
        return CP_OK;
    if (t->shape.rank != want)
        return cp_infer_fail(c, "'%s' must have rank %d for %s %s, got %d", t->name, want, attr,
                             fmt, t->shape.rank);
    const struct cp_dim *d = t->shape.dims;
    o->b = d[0];
    if (packed) {
        o->rows = d[1];
        cp_infer_dim_set(&o->h, heads);
        if (d[2].value >= 0) {
            if (d[2].value % heads != 0)
                return cp_infer_fail(c, "'%s' last dimension %lld is not divisible by %lld heads",
                                     t->name, (long long)d[2].value, (long long)heads);
            cp_infer_dim_set(&o->depth, d[2].value / heads);
        }
    } else {
        o->h = d[1];
        o->rows = trans ? d[3] : d[2];
        o->depth = trans ? d[2] : d[3];
    }
    return CP_OK;
}

static bool dims_clash(struct cp_dim a, struct cp_dim b)
{
    return a.value >= 0 && b.value >= 0 && a.value != b.value;
}

enum cp_status cp_infer_fused_attention(struct cp_infer *c)
{
    int64_t heads = cp_node_attr_int(c->node, "num_heads", 0);
    if (heads < 1)
        return cp_infer_fail(c, "num_heads must be >= 1, got %lld", (long long)heads);
    const char *prec = cp_node_attr_string(c->node, "compute_precision", "fp32");
    if (strcmp(prec, "fp32") != 0 && strcmp(prec, "bf16") != 0)
        return cp_infer_fail(c, "compute_precision must be fp32 or bf16, got '%s'", prec);
    struct att_dims q, k, v;
    enum cp_status st;
    if ((st = att_operand(c, 0, "q_format", heads, &q)) != CP_OK ||
        (st = att_operand(c, 1, "k_format", heads, &k)) != CP_OK ||
        (st = att_operand(c, 2, "v_format", heads, &v)) != CP_OK)
        return st;
    if (dims_clash(q.depth, k.depth))
        return cp_infer_fail(c, "Q depth %lld differs from K depth %lld", (long long)q.depth.value,
                             (long long)k.depth.value);
    if (dims_clash(k.rows, v.rows))
        return cp_infer_fail(c, "K has %lld keys but V has %lld", (long long)k.rows.value,
                             (long long)v.rows.value);
    if (dims_clash(q.h, k.h) || dims_clash(q.h, v.h) || dims_clash(q.b, k.b) ||
        dims_clash(q.b, v.b))
        return cp_infer_fail(c, "Q, K and V disagree on batch or heads");
    const char *of = cp_node_attr_string(c->node, "out_format", "BHND");
    struct cp_shape s;
    if (strcmp(of, "BNHD") == 0) {
        s.rank = 3;
        s.dims[0] = q.b;
        s.dims[1] = q.rows;
        if (v.depth.value >= 0)
            cp_infer_dim_set(&s.dims[2], v.depth.value * heads);
        else
            cp_infer_dim_dyn(&s.dims[2]);
    } else if (strcmp(of, "BHND") == 0) {
        s.rank = 4;
        s.dims[0] = q.b;
        s.dims[1] = q.h;
        s.dims[2] = q.rows;
        s.dims[3] = v.depth;
    } else {
        return cp_infer_fail(c, "out_format must be BHND or BNHD, got '%s'", of);
    }
    return cp_infer_set_out(c, 0, cp_infer_in(c, 0)->dtype, &s);
}

enum cp_status cp_infer_trans_data(struct cp_infer *c)
{
    const char *src = cp_node_attr_string(c->node, "src_format", "");
    const char *dst = cp_node_attr_string(c->node, "dst_format", "");
    if (cp_layout_from_name(src) == CP_LAYOUT_UNDEF || cp_layout_from_name(dst) == CP_LAYOUT_UNDEF)
        return cp_infer_fail(c, "src_format '%s' and dst_format '%s' must be layout names", src,
                             dst);
    enum cp_status st = cp_infer_unary(c);
    struct cp_tensor *y = cp_infer_out(c, 0);
    if (st == CP_OK && y && y->kind == CP_TENSOR_INTERMEDIATE)
        y->layout = cp_layout_from_name(dst);
    return st;
}
