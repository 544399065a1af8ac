/* A trace's kernel table as a graph/pattern.h view (see
 * patterns_internal.h for what it assumes where the table is silent). */
#include "rules/patterns_internal.h"

#include <stdlib.h>
#include <string.h>

/* Attributes worked out per kernel, at most (FusedMatMul: transA, transB,
 * activation). */
#define ATTRS_PER_KERNEL 3

/* A kernel's op in the op table: either domain (the trace does not say),
 * CP_OP_UNKNOWN for an op we do not know (imported traces). */
static enum cp_op op_of(const char *op_type)
{
    enum cp_op op = cp_op_from_name(op_type);
    return op != CP_OP_UNKNOWN ? op : cp_op_from_domain_name(CP_DOMAIN, op_type);
}

/* ---- the view's functions ---------------------------------------------------------- */

static size_t tv_n_nodes(const void *ctx)
{
    return ((const struct cp_trace_view *)ctx)->n_nodes;
}

static size_t tv_n_tensors(const void *ctx)
{
    return ((const struct cp_trace_view *)ctx)->n_tensors;
}

static const struct cp_node *tv_node(const void *ctx, int32_t n)
{
    const struct cp_trace_view *tv = ctx;
    return n >= 0 && (size_t)n < tv->n_nodes && !tv->nodes[n].dead ? &tv->nodes[n] : NULL;
}

static const struct cp_tensor *tv_tensor(const void *ctx, int32_t t)
{
    const struct cp_trace_view *tv = ctx;
    return t >= 0 && (size_t)t < tv->n_tensors ? &tv->tensors[t] : NULL;
}

static int32_t tv_producer(const void *ctx, int32_t t)
{
    const struct cp_tensor *T = tv_tensor(ctx, t);
    return T ? T->producer : -1;
}

static size_t tv_readers(const void *ctx, int32_t t, int32_t *out, size_t max)
{
    const struct cp_trace_view *tv = ctx;
    if (t < 0 || (size_t)t >= tv->n_tensors)
        return 0;
    size_t n = tv->read_start[t + 1] - tv->read_start[t];
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = tv->readers[tv->read_start[t] + i];
    return n;
}

static size_t tv_n_reads(const void *ctx, int32_t t)
{
    const struct cp_trace_view *tv = ctx;
    return t >= 0 && (size_t)t < tv->n_tensors ? tv->n_reads[t] : 0;
}

/* A trace knows no graph outputs. */
static bool tv_is_output(const void *ctx, int32_t t)
{
    (void)ctx;
    (void)t;
    return false;
}

/* A Transpose may have perm when its shapes agree: out[j] = in[perm[j]]
 * (an unknown dimension agrees with anything). */
static bool tv_perm_fits(const void *ctx, int32_t n, const int *perm, int r)
{
    const struct cp_trace_view *tv = ctx;
    const struct cp_node *nd = tv_node(ctx, n);
    if (!nd || nd->n_inputs < 1 || nd->n_outputs < 1)
        return false;
    const struct cp_shape *in = &tv->tensors[nd->inputs[0]].shape;
    const struct cp_shape *out = &tv->tensors[nd->outputs[0]].shape;
    if (in->rank != r || out->rank != r)
        return false;
    for (int j = 0; j < r; j++) {
        int64_t a = out->dims[j].value, b = in->dims[perm[j]].value;
        if (a >= 0 && b >= 0 && a != b)
            return false;
    }
    return true;
}

int32_t cp_trace_view_maker(const struct cp_trace_view *tv, const char *name)
{
    int64_t e = cp_strmap_gets(&tv->names, name, -1);
    int32_t p = e >= 0 ? tv->tensors[e].producer : -1;
    return p >= 0 && (size_t)p < tv->n_kernels ? p : -1;
}

bool cp_trace_view_is_kernel(const struct cp_trace_view *tv, int32_t n)
{
    return n >= 0 && (size_t)n < tv->n_kernels;
}

/* ---- tensors ------------------------------------------------------------------------ */

/* The tensor named `name`, added when new (a constant until something makes
 * it). -1 when the table is full, which the sizing rules out. */
static int32_t entry(struct cp_trace_view *tv, size_t cap, const char *name)
{
    int64_t e = cp_strmap_gets(&tv->names, name, -1);
    if (e >= 0)
        return (int32_t)e;
    if (tv->n_tensors == cap || cp_strmap_puts(&tv->names, name, (int64_t)tv->n_tensors) != CP_OK)
        return -1;
    struct cp_tensor *t = &tv->tensors[tv->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->kind = CP_TENSOR_INITIALIZER;
    t->producer = -1;
    cp_shape_set_unknown(&t->shape);
    return (int32_t)tv->n_tensors++;
}

/* What the table says about a tensor, kept from where it is first said. */
static void describe(struct cp_tensor *t, const struct cp_ftensor *f)
{
    if (t->shape.rank < 0 && f->rank >= 0 && f->rank <= CP_MAX_RANK)
        cp_shape_set(&t->shape, f->rank, f->dims);
    if (t->dtype == CP_DTYPE_UNDEFINED && f->dtype)
        t->dtype = cp_dtype_from_name(f->dtype);
    if (t->layout == CP_LAYOUT_UNDEF && f->layout)
        t->layout = cp_layout_from_name(f->layout);
}

/* ---- attributes worked out from shapes ---------------------------------------------- */

struct synth {
    struct cp_node *n;
    int64_t *ints; /* CP_MAX_RANK for this kernel */
};

static void set_ints(struct synth *s, const char *name, const int64_t *v, size_t n)
{
    struct cp_attr *a = &s->n->attrs[s->n->n_attrs++];
    memcpy(s->ints, v, n * sizeof *v);
    *a = (struct cp_attr){.name = name, .type = CP_ATTR_INTS, .ints = s->ints, .n = n};
}

static void set_int(struct synth *s, const char *name, int64_t v)
{
    s->n->attrs[s->n->n_attrs++] = (struct cp_attr){.name = name, .type = CP_ATTR_INT, .i = v};
}

static const struct cp_shape *shape_of(const struct cp_trace_view *tv, const struct cp_node *n,
                                       bool out, size_t i)
{
    if (i >= (out ? n->n_outputs : n->n_inputs))
        return NULL;
    const struct cp_shape *s = &tv->tensors[out ? n->outputs[i] : n->inputs[i]].shape;
    return s->rank >= 0 ? s : NULL;
}

/* A Transpose's perm: output axis j is the first unused input axis of the
 * same size. An empty perm (which no matcher accepts) when none fits. */
static void synth_perm(struct synth *s, const struct cp_shape *in, const struct cp_shape *out)
{
    int64_t perm[CP_MAX_RANK];
    bool used[CP_MAX_RANK] = {false};
    size_t n = 0;
    if (in && out && in->rank == out->rank) {
        for (int j = 0; j < out->rank; j++) {
            int found = -1;
            for (int i = 0; i < in->rank && found < 0; i++)
                if (!used[i] && in->dims[i].value >= 0 && in->dims[i].value == out->dims[j].value)
                    found = i;
            if (found < 0)
                break;
            used[found] = true;
            perm[n++] = found;
        }
        if (n != (size_t)out->rank)
            n = 0;
    }
    set_ints(s, "perm", perm, n);
}

/* A reduction's keepdims (the ranks agree) and, keeping dims, its axes:
 * those the output has at 1 and the input not. */
static void synth_reduce(struct synth *s, const struct cp_shape *in, const struct cp_shape *out)
{
    if (!in || !out)
        return;
    set_int(s, "keepdims", in->rank == out->rank);
    if (in->rank != out->rank)
        return;
    int64_t axes[CP_MAX_RANK];
    size_t n = 0;
    for (int i = 0; i < in->rank; i++)
        if (out->dims[i].value == 1 && in->dims[i].value != 1)
            axes[n++] = i;
    set_ints(s, "axes", axes, n);
}

/* A FusedMatMul's transA / transB: the first combination under which
 * [.., M, K] x [.., K, N] -> [.., M, N] holds. */
static void synth_matmul(struct synth *s, const struct cp_shape *a, const struct cp_shape *b,
                         const struct cp_shape *y)
{
    if (!a || !b || !y || a->rank < 2 || b->rank < 2 || y->rank < 2)
        return;
    int64_t a1 = a->dims[a->rank - 2].value, a2 = a->dims[a->rank - 1].value;
    int64_t b1 = b->dims[b->rank - 2].value, b2 = b->dims[b->rank - 1].value;
    int64_t y1 = y->dims[y->rank - 2].value, y2 = y->dims[y->rank - 1].value;
    for (int c = 0; c < 4; c++) {
        bool ta = c >= 2, tb = c & 1;
        int64_t m = ta ? a2 : a1, k = ta ? a1 : a2, kb = tb ? b2 : b1, n = tb ? b1 : b2;
        if (m == y1 && n == y2 && k == kb) {
            set_int(s, "transA", ta);
            set_int(s, "transB", tb);
            return;
        }
    }
}

static void synth_attrs(struct cp_trace_view *tv, size_t r, bool matmul_pass_off)
{
    struct cp_node *n = &tv->nodes[r];
    struct synth s = {n, tv->ints + r * CP_MAX_RANK};
    n->attrs = tv->attrs + r * ATTRS_PER_KERNEL;
    const struct cp_shape *in0 = shape_of(tv, n, false, 0), *out0 = shape_of(tv, n, true, 0);
    switch (n->op) {
    case CP_OP_TRANSPOSE:
        synth_perm(&s, in0, out0);
        break;
    case CP_OP_REDUCE_MEAN:
    case CP_OP_REDUCE_SUM:
    case CP_OP_REDUCE_MAX:
        synth_reduce(&s, in0, out0);
        break;
    case CP_OP_FUSED_MATMUL:
        synth_matmul(&s, in0, shape_of(tv, n, false, 1), out0);
        if (!matmul_pass_off && n->n_inputs > 1 &&
            tv->tensors[n->inputs[1]].kind == CP_TENSOR_INITIALIZER)
            n->attrs[n->n_attrs++] =
                (struct cp_attr){.name = "activation", .type = CP_ATTR_STRING, .s = "unknown"};
        break;
    case CP_OP_LAYER_NORMALIZATION: {
        const struct cp_shape *scale = shape_of(tv, n, false, 1);
        if (in0 && scale)
            set_int(&s, "axis", in0->rank - scale->rank);
        break;
    }
    default:
        break;
    }
}

/* ---- building ------------------------------------------------------------------------ */

/* The tensor a TransData chain ending in t started from. */
static int32_t before_transdata(const struct cp_trace_view *tv, int32_t t)
{
    for (size_t guard = 0; guard < tv->n_kernels; guard++) {
        int32_t p = tv->tensors[t].producer;
        if (p < 0 || (size_t)p >= tv->n_kernels || tv->nodes[p].op != CP_OP_TRANS_DATA ||
            tv->nodes[p].n_inputs < 1)
            break;
        t = tv->nodes[p].inputs[0];
    }
    return t;
}

/* LayoutTransformPass runs after every pass that fuses, and a TransData it
 * puts between two ops (a Conv and a BatchNormalization that has no
 * blocked kernel) was not there when the fusing pass ran: the view reads
 * through them, as that pass saw the graph, and leaves the TransData out
 * (dead). */
static void look_through_transdata(struct cp_trace_view *tv)
{
    for (size_t n = 0; n < tv->n_nodes; n++) {
        struct cp_node *nd = &tv->nodes[n];
        if (nd->op == CP_OP_TRANS_DATA && n < tv->n_kernels) {
            nd->dead = true;
            continue;
        }
        for (size_t i = 0; i < nd->n_inputs; i++)
            nd->inputs[i] = before_transdata(tv, nd->inputs[i]);
    }
}

/* Who reads each tensor: distinct nodes in index order, and input slots;
 * dead nodes read nothing. */
static enum cp_status index_readers(struct cp_trace_view *tv)
{
    size_t nt = tv->n_tensors;
    tv->read_start = cp_calloc(nt + 2, sizeof *tv->read_start);
    tv->n_reads = cp_calloc(nt + 1, sizeof *tv->n_reads);
    int32_t *last = cp_calloc(nt + 1, sizeof *last);
    if (!tv->read_start || !tv->n_reads || !last) {
        free(last);
        return CP_ERR_NOMEM;
    }
    for (size_t t = 0; t < nt; t++)
        last[t] = -1;
    size_t total = 0;
    for (size_t n = 0; n < tv->n_nodes; n++)
        for (size_t i = 0; !tv->nodes[n].dead && i < tv->nodes[n].n_inputs; i++) {
            int32_t t = tv->nodes[n].inputs[i];
            tv->n_reads[t]++;
            if (last[t] != (int32_t)n) {
                last[t] = (int32_t)n;
                tv->read_start[t + 1]++;
                total++;
            }
        }
    for (size_t t = 0; t < nt; t++)
        tv->read_start[t + 1] += tv->read_start[t];
    tv->readers = cp_calloc(total + 1, sizeof *tv->readers);
    size_t *fill = cp_calloc(nt + 1, sizeof *fill);
    if (!tv->readers || !fill) {
        free(last);
        free(fill);
        return CP_ERR_NOMEM;
    }
    for (size_t t = 0; t < nt; t++)
        last[t] = -1;
    for (size_t n = 0; n < tv->n_nodes; n++)
        for (size_t i = 0; !tv->nodes[n].dead && i < tv->nodes[n].n_inputs; i++) {
            int32_t t = tv->nodes[n].inputs[i];
            if (last[t] != (int32_t)n) {
                last[t] = (int32_t)n;
                tv->readers[tv->read_start[t] + fill[t]++] = (int32_t)n;
            }
        }
    free(last);
    free(fill);
    return CP_OK;
}

enum cp_status cp_trace_view_build(struct cp_trace_view *tv, const struct cp_fload *l,
                                   bool matmul_pass_off, struct cp_diag *d)
{
    memset(tv, 0, sizeof *tv);
    tv->l = l;
    size_t n = tv->n_kernels = l->n_k, n_in = 0, n_out = 0;
    for (size_t r = 0; r < n; r++) {
        n_in += l->k[r].n_in;
        n_out += l->k[r].n_out;
    }
    size_t cap = 2 * n_in + n_out + 1;
    tv->tensors = cp_calloc(cap, sizeof *tv->tensors);
    tv->nodes = cp_calloc(n + n_in + 1, sizeof *tv->nodes);
    tv->slots = cp_calloc(3 * n_in + n_out + 1, sizeof *tv->slots);
    tv->attrs = cp_calloc(n * ATTRS_PER_KERNEL + 1, sizeof *tv->attrs);
    tv->ints = cp_calloc(n * CP_MAX_RANK + 1, sizeof *tv->ints);
    if (!tv->tensors || !tv->nodes || !tv->slots || !tv->attrs || !tv->ints ||
        cp_strmap_reserve(&tv->names, cap) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
    size_t used = 0;
    /* Kernels and what they make, first, so a tensor is described by its
     * producer. */
    for (size_t r = 0; r < n; r++) {
        const struct cp_fk *k = &l->k[r];
        struct cp_node *nd = &tv->nodes[r];
        nd->name = k->node;
        nd->op_type = k->op_type;
        nd->op = op_of(k->op_type);
        nd->domain = cp_op_is_own(nd->op) ? CP_DOMAIN : "";
        nd->outputs = tv->slots + used;
        used += k->n_out;
        for (size_t j = 0; j < k->n_out; j++) {
            int32_t e = entry(tv, cap, k->out[j].name);
            if (e < 0)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
            struct cp_tensor *t = &tv->tensors[e];
            describe(t, &k->out[j]);
            if (t->producer < 0) {
                t->producer = (int32_t)r;
                t->kind = CP_TENSOR_INTERMEDIATE;
            }
            nd->outputs[nd->n_outputs++] = e;
        }
    }
    tv->n_nodes = n;
    /* Then what they read; an input that is a view gets the view's node. */
    for (size_t r = 0; r < n; r++) {
        const struct cp_fk *k = &l->k[r];
        struct cp_node *nd = &tv->nodes[r];
        nd->inputs = tv->slots + used;
        used += k->n_in;
        for (size_t i = 0; i < k->n_in; i++) {
            int32_t e = entry(tv, cap, k->in[i].name);
            if (e < 0)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
            describe(&tv->tensors[e], &k->in[i]);
            nd->inputs[nd->n_inputs++] = e;
            if (strcmp(k->in[i].src, k->in[i].name) == 0 || tv->tensors[e].producer >= 0)
                continue;
            int32_t s = entry(tv, cap, k->in[i].src);
            if (s < 0)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
            struct cp_node *vn = &tv->nodes[tv->n_nodes];
            vn->name = k->in[i].name;
            vn->domain = "";
            vn->inputs = tv->slots + used++;
            vn->inputs[vn->n_inputs++] = s;
            vn->outputs = tv->slots + used++;
            vn->outputs[vn->n_outputs++] = e;
            tv->tensors[e].producer = (int32_t)tv->n_nodes++;
            tv->tensors[e].kind = CP_TENSOR_INTERMEDIATE;
        }
    }
    /* A view that keeps its source's shape is an Identity, else a Reshape
     * (all the view ops are reshapes of their source). */
    for (size_t v = n; v < tv->n_nodes; v++) {
        struct cp_node *vn = &tv->nodes[v];
        const struct cp_shape *src = &tv->tensors[vn->inputs[0]].shape;
        const struct cp_shape *dst = &tv->tensors[vn->outputs[0]].shape;
        vn->op = src->rank >= 0 && cp_shape_equal(src, dst) ? CP_OP_IDENTITY : CP_OP_RESHAPE;
        vn->op_type = cp_op_name(vn->op);
    }
    look_through_transdata(tv);
    for (size_t r = 0; r < n; r++)
        synth_attrs(tv, r, matmul_pass_off);
    if (index_readers(tv) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
    tv->view = (struct cp_pattern_view){
        .ctx = tv,
        .n_nodes = tv_n_nodes,
        .n_tensors = tv_n_tensors,
        .node = tv_node,
        .tensor = tv_tensor,
        .producer = tv_producer,
        .readers = tv_readers,
        .n_reads = tv_n_reads,
        .is_output = tv_is_output,
        .perm_fits = tv_perm_fits,
        .opset = CP_PATTERN_OPSET_UNKNOWN,
        .knows_values = false,
    };
    return CP_OK;
}

void cp_trace_view_release(struct cp_trace_view *tv)
{
    free(tv->nodes);
    free(tv->tensors);
    free(tv->read_start);
    free(tv->readers);
    free(tv->n_reads);
    free(tv->slots);
    free(tv->attrs);
    free(tv->ints);
    cp_strmap_release(&tv->names);
    memset(tv, 0, sizeof *tv);
}
