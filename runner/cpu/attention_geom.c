/* FusedAttention operand geometry (see attention.h). */
#include "runner/cpu/attention.h"

#include <math.h>
#include <string.h>

enum att_fmt { ATT_BHND, ATT_BHDN, ATT_BNHD, ATT_BAD };

static enum att_fmt att_fmt(const struct cp_node *n, const char *attr)
{
    const char *s = cp_node_attr_string(n, attr, "BHND");
    if (strcmp(s, "BHND") == 0)
        return ATT_BHND;
    if (strcmp(s, "BHDN") == 0)
        return ATT_BHDN;
    if (strcmp(s, "BNHD") == 0)
        return ATT_BNHD;
    return ATT_BAD;
}

static const struct cp_tensor *att_tensor(const struct cp_graph *g, int32_t idx)
{
    if (idx < 0)
        return NULL;
    const struct cp_tensor *t = cp_graph_tensor(g, idx);
    if (!t || t->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&t->shape))
        return NULL;
    return t;
}

/* Batch, heads, rows, depth and strides of one operand of format f. */
struct att_operand {
    int64_t b, h, rows, depth;
    struct cp_att_strides s;
};

static bool att_operand(const struct cp_tensor *t, enum att_fmt f, int64_t heads,
                        struct att_operand *o)
{
    const struct cp_dim *d = t->shape.dims;
    if (f == ATT_BNHD) {
        if (t->shape.rank != 3 || d[2].value % heads != 0)
            return false;
        o->b = d[0].value;
        o->h = heads;
        o->rows = d[1].value;
        o->depth = d[2].value / heads;
        o->s.b = o->rows * d[2].value;
        o->s.h = o->depth;
        o->s.row = d[2].value;
        o->s.d = 1;
        return true;
    }
    if (f != ATT_BHND && f != ATT_BHDN)
        return false;
    if (t->shape.rank != 4 || d[1].value != heads)
        return false;
    o->b = d[0].value;
    o->h = heads;
    bool trans = f == ATT_BHDN;
    o->rows = trans ? d[3].value : d[2].value;
    o->depth = trans ? d[2].value : d[3].value;
    o->s.b = heads * o->rows * o->depth;
    o->s.h = o->rows * o->depth;
    o->s.row = trans ? 1 : o->depth;
    o->s.d = trans ? o->rows : 1;
    return true;
}

/* The mask broadcast (numpy rules, aligned right) to [B, H, N, M]. */
static bool att_mask(const struct cp_tensor *t, const struct cp_att_geom *geo,
                     struct cp_att_strides *s)
{
    const int64_t full[4] = {geo->batch, geo->heads, geo->n, geo->m};
    int64_t st[4] = {0, 0, 0, 0};
    int r = t->shape.rank;
    if (r > 4)
        return false;
    int64_t stride = 1;
    for (int i = r - 1; i >= 0; i--) {
        int64_t dim = t->shape.dims[i].value;
        int k = 4 - r + i;
        if (dim != full[k] && dim != 1)
            return false;
        st[k] = dim == 1 ? 0 : stride;
        stride *= dim;
    }
    s->b = st[0];
    s->h = st[1];
    s->row = st[2];
    s->d = st[3];
    return true;
}

bool cp_att_geom_init(const struct cp_graph *g, const struct cp_node *n, struct cp_att_geom *geo)
{
    memset(geo, 0, sizeof *geo);
    if (n->op != CP_OP_FUSED_ATTENTION || n->n_inputs < 3 || n->n_inputs > 4 || n->n_outputs != 1)
        return false;
    int64_t heads = cp_node_attr_int(n, "num_heads", 0);
    if (heads < 1)
        return false;
    const char *prec = cp_node_attr_string(n, "compute_precision", "fp32");
    const char *impl = cp_node_attr_string(n, "impl", "fast");
    if ((strcmp(prec, "fp32") != 0 && strcmp(prec, "bf16") != 0) ||
        (strcmp(impl, "fast") != 0 && strcmp(impl, "exact") != 0))
        return false;
    geo->bf16 = strcmp(prec, "bf16") == 0;
    geo->exact = strcmp(impl, "exact") == 0;

    const struct cp_tensor *tq = att_tensor(g, n->inputs[0]), *tk = att_tensor(g, n->inputs[1]),
                           *tv = att_tensor(g, n->inputs[2]), *ty = att_tensor(g, n->outputs[0]);
    if (!tq || !tk || !tv || !ty)
        return false;
    struct att_operand q, k, v;
    if (!att_operand(tq, att_fmt(n, "q_format"), heads, &q) ||
        !att_operand(tk, att_fmt(n, "k_format"), heads, &k) ||
        !att_operand(tv, att_fmt(n, "v_format"), heads, &v))
        return false;
    if (q.b != k.b || q.b != v.b || q.depth != k.depth || k.rows != v.rows)
        return false;
    geo->batch = q.b;
    geo->heads = heads;
    geo->n = q.rows;
    geo->m = k.rows;
    geo->d = q.depth;
    geo->dv = v.depth;
    geo->q = q.s;
    geo->k = k.s;
    geo->v = v.s;
    if (geo->batch < 1 || geo->n < 1 || geo->m < 1 || geo->d < 1 || geo->dv < 1)
        return false;

    /* The output: BHND [B, H, N, Dv] or BNHD [B, N, H*Dv]. */
    enum att_fmt of = att_fmt(n, "out_format");
    const struct cp_dim *yd = ty->shape.dims;
    if (of == ATT_BHND) {
        if (ty->shape.rank != 4 || yd[0].value != geo->batch || yd[1].value != heads ||
            yd[2].value != geo->n || yd[3].value != geo->dv)
            return false;
        geo->out = (struct cp_att_strides){heads * geo->n * geo->dv, geo->n * geo->dv, geo->dv, 1};
    } else if (of == ATT_BNHD) {
        if (ty->shape.rank != 3 || yd[0].value != geo->batch || yd[1].value != geo->n ||
            yd[2].value != heads * geo->dv)
            return false;
        geo->out = (struct cp_att_strides){geo->n * heads * geo->dv, geo->dv, heads * geo->dv, 1};
    } else {
        return false;
    }

    if (n->n_inputs == 4 && n->inputs[3] >= 0) {
        const struct cp_tensor *tm = att_tensor(g, n->inputs[3]);
        if (!tm || !att_mask(tm, geo, &geo->mask))
            return false;
        geo->has_mask = true;
    }
    const struct cp_attr *sa = cp_node_attr(n, "scale");
    geo->scale = sa ? sa->f : (float)(1.0 / sqrt((double)geo->d));
    if (sa && sa->type != CP_ATTR_FLOAT)
        return false;
    return true;
}
