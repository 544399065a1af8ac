/* If, Loop and Scan: each subgraph runs as a nested plan, planned once at
 * prepare (cp_plan_create_nested) with the shapes inference gave it. Per
 * branch or iteration the kernel copies values into the nested plan's
 * inputs and outer-scope references, runs it, and copies its outputs out:
 * Loop's carried values go back into the body's inputs, scan outputs are
 * written slice by slice into the node's output. Shapes are static: a
 * carried value must keep its shape across iterations (else the node is
 * refused at prepare). In a model whose shapes are known only at run time,
 * If and Loop run in the dynamic plan instead (plan_dynamic.c). */
#include "runner/cpu/plan_internal.h"
#include "runner/cpu/ref_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One subgraph: its plan and where its outer-scope references come from. */
struct cf_sub {
    struct cp_plan *plan;
    const struct cp_graph *g;
    size_t n_bind;
    int32_t *bind_t;   /* sub tensor */
    size_t *bind_slot; /* node input */
};

struct cf_state {
    struct cf_sub sub[2];
    void *tmp; /* carried values between iterations */
    size_t tmp_bytes;
    /* If: why a branch that cannot take the model's shapes was left out
     * (empty: both run); a run that takes it fails with this. */
    char bad_why[1100];
};

static size_t tbytes(const struct cp_tensor *t)
{
    return t ? (size_t)cp_memplan_tensor_bytes(t) : 0;
}

static void copy(void *dst, const void *src, size_t n)
{
    if (n && dst && src && dst != src)
        memmove(dst, src, n);
}

static struct cp_graph *sub_graph(const struct cp_node *n, const char *attr)
{
    const struct cp_attr *a = cp_node_attr(n, attr);
    return a && a->type == CP_ATTR_GRAPH ? a->graph : NULL;
}

static enum cp_status fail(struct cp_kexec *k, struct cp_diag *d, const char *fmt, const char *a,
                           size_t i, const char *x, const char *y)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, i, x, y);
    return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s' (%s): %s", k->node->name, k->node->op_type,
                       msg);
}

static enum cp_status open_sub(struct cp_kexec *k, const char *attr, struct cf_sub *s,
                               struct cp_diag *d)
{
    struct cp_graph *g = sub_graph(k->node, attr);
    if (!g)
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': attribute '%s' is missing", k->node->name,
                           attr);
    s->g = g;
    s->n_bind = cp_graph_n_outer(g);
    s->bind_t = cp_calloc(s->n_bind + 1, sizeof *s->bind_t);
    s->bind_slot = cp_calloc(s->n_bind + 1, sizeof *s->bind_slot);
    if (!s->bind_t || !s->bind_slot)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_bind; i++) {
        int32_t t = cp_graph_outer(g, i);
        const char *nm = cp_graph_tensor(g, t)->name;
        int32_t slot = cp_control_outer_slot(k->g, k->node, g, i);
        if (slot < 0 || !k->in[slot])
            return cp_diag_set(d, CP_ERR_INVALID,
                               "node '%s': attribute '%s' reads '%s', which is not among the "
                               "node's inputs",
                               k->node->name, attr, nm);
        s->bind_t[i] = t;
        s->bind_slot[i] = (size_t)slot;
    }
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_plan_create_nested(k->plan, g, &s->plan, &local);
    if (st != CP_OK) {
        /* The nested plan's message starts with the model's name too. */
        const char *msg = local.msg;
        size_t pre = strlen(k->plan->m->name);
        if (strncmp(msg, k->plan->m->name, pre) == 0 && strncmp(msg + pre, ": ", 2) == 0)
            msg += pre + 2;
        return cp_diag_set(d, st, "node '%s' (%s), attribute '%s': %s", k->node->name,
                           k->node->op_type, attr, msg);
    }
    return CP_OK;
}

static void bind_outer(struct cp_kexec *k, const struct cf_sub *s)
{
    for (size_t i = 0; i < s->n_bind; i++) {
        const struct cp_tensor *t = cp_graph_tensor(s->g, s->bind_t[i]);
        copy(cp_plan_data(s->plan, s->bind_t[i]), k->in_data[s->bind_slot[i]], tbytes(t));
    }
}

static const struct cp_tensor *sub_in(const struct cf_sub *s, size_t i)
{
    return cp_graph_tensor(s->g, cp_graph_input(s->g, i));
}
static const struct cp_tensor *sub_out(const struct cf_sub *s, size_t i)
{
    return cp_graph_tensor(s->g, cp_graph_output(s->g, i));
}
static void *in_ptr(const struct cf_sub *s, size_t i)
{
    return cp_plan_data(s->plan, cp_graph_input(s->g, i));
}
static void *out_ptr(const struct cf_sub *s, size_t i)
{
    return cp_plan_data(s->plan, cp_graph_output(s->g, i));
}

static bool same_shape(const struct cp_tensor *a, const struct cp_tensor *b)
{
    return a && b && a->dtype == b->dtype && cp_shape_equal(&a->shape, &b->shape);
}

static void cf_release(struct cp_kexec *k)
{
    struct cf_state *s = k->state;
    if (!s)
        return;
    for (int i = 0; i < 2; i++) {
        cp_plan_free(s->sub[i].plan);
        free(s->sub[i].bind_t);
        free(s->sub[i].bind_slot);
    }
    free(s->tmp);
    free(s);
    k->state = NULL;
}

static enum cp_status cf_alloc(struct cp_kexec *k, struct cp_diag *d)
{
    k->state = cp_calloc(1, sizeof(struct cf_state));
    return k->state ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
}

/* A prepare that fails frees what it made: the plan releases only the
 * kernels it prepared. */
static enum cp_status cf_prepared(struct cp_kexec *k, enum cp_status st)
{
    if (st != CP_OK)
        cf_release(k);
    return st;
}

static bool supports_cf(const struct cp_graph *g, const struct cp_node *n)
{
    (void)g;
    if (n->op == CP_OP_IF)
        return sub_graph(n, "then_branch") && sub_graph(n, "else_branch");
    return sub_graph(n, "body") != NULL;
}

/* ---- If ---------------------------------------------------------------------- */

static enum cp_status if_prepare_state(struct cp_kexec *k, struct cp_diag *d)
{
    enum cp_status st = cf_alloc(k, d);
    if (st != CP_OK)
        return st;
    struct cf_state *s = k->state;
    static const char *const br[2] = {"then_branch", "else_branch"};
    const struct cp_tensor *cond = k->in[0];
    bool known = cond->value && cond->value_len == 1;
    int bad = -1;
    for (int b = 0; b < 2; b++) {
        if (known && (cond->value[0] != 0) != (b == 0))
            continue; /* never taken */
        struct cp_diag local;
        cp_diag_init(&local);
        if ((st = open_sub(k, br[b], &s->sub[b], &local)) != CP_OK) {
            /* A branch the model's shapes do not fit (inference took the
             * other's outputs, infer_control.c) stays out of the plan;
             * it is an error when both are out, or when it is taken. */
            if (known || bad >= 0 || st == CP_ERR_NOMEM)
                return cp_diag_set(d, st, "%s", local.msg);
            bad = b;
            /* Inference says why better than the plan (shapes it left
             * open): run it again on the branch for the message. */
            struct cp_diag why;
            cp_diag_init(&why);
            bool inferred = cp_graph_infer(sub_graph(k->node, br[b]), &why) == CP_OK;
            snprintf(s->bad_why, sizeof s->bad_why, "%s cannot run on these inputs: %s", br[b],
                     inferred ? local.msg : why.msg);
            cp_plan_free(s->sub[b].plan);
            s->sub[b].plan = NULL;
            continue;
        }
        for (size_t i = 0; i < k->node->n_outputs; i++) {
            char x[96], y[96];
            if (!k->out[i] || same_shape(sub_out(&s->sub[b], i), k->out[i]))
                continue;
            cp_shape_format(&sub_out(&s->sub[b], i)->shape, x, sizeof x);
            cp_shape_format(&k->out[i]->shape, y, sizeof y);
            return fail(k, d,
                        "%s gives output %zu shape %s but the node's output is %s; branches of "
                        "different shapes are not supported",
                        br[b], i, x, y);
        }
    }
    return CP_OK;
}

static enum cp_status if_run(struct cp_kexec *k)
{
    struct cf_state *s = k->state;
    bool c = cp_elem_load_i64(k->in_data[0], k->in[0]->dtype, 0) != 0;
    struct cf_sub *b = &s->sub[c ? 0 : 1];
    if (!b->plan) {
        k->run_why = s->bad_why[0] ? s->bad_why : "the branch taken was not planned";
        return CP_ERR_UNSUPPORTED;
    }
    bind_outer(k, b);
    enum cp_status st = cp_plan_run_nested(b->plan);
    if (st != CP_OK)
        return st;
    for (size_t i = 0; i < k->node->n_outputs; i++)
        if (k->out[i])
            copy(k->out_data[i], out_ptr(b, i), tbytes(k->out[i]));
    return CP_OK;
}

static enum cp_status if_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return cf_prepared(k, if_prepare_state(k, d));
}

const struct cp_kernel cp_ref_if = {"ref",  CP_OP_IF,   supports_cf, if_prepare,
                                    if_run, cf_release, NULL};

/* ---- Loop ------------------------------------------------------------------------ */

static enum cp_status loop_prepare_state(struct cp_kexec *k, struct cp_diag *d)
{
    enum cp_status st = cf_alloc(k, d);
    if (st != CP_OK)
        return st;
    struct cf_state *s = k->state;
    if ((st = open_sub(k, "body", &s->sub[0], d)) != CP_OK)
        return st;
    const struct cf_sub *b = &s->sub[0];
    size_t n = cp_graph_n_inputs(b->g) - 2;
    for (size_t j = 0; j < n; j++) {
        char x[96], y[96];
        if (same_shape(sub_out(b, 1 + j), sub_in(b, 2 + j)))
            continue;
        cp_shape_format(&sub_in(b, 2 + j)->shape, x, sizeof x);
        cp_shape_format(&sub_out(b, 1 + j)->shape, y, sizeof y);
        return fail(k, d,
                    "loop-carried value %s%zu enters the body as %s and leaves it as %s; values "
                    "that change shape across iterations are not supported",
                    "", j, x, y);
    }
    for (size_t j = 0; j < n; j++)
        s->tmp_bytes += tbytes(sub_in(b, 2 + j));
    s->tmp = malloc(s->tmp_bytes ? s->tmp_bytes : 1);
    return s->tmp ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
}

static enum cp_status loop_run(struct cp_kexec *k)
{
    struct cf_state *s = k->state;
    struct cf_sub *b = &s->sub[0];
    size_t n = cp_graph_n_inputs(b->g) - 2, kk = k->node->n_outputs - n;
    int64_t m = k->in[0] ? cp_elem_load_i64(k->in_data[0], k->in[0]->dtype, 0) : INT64_MAX;
    bool cond = k->in[1] ? cp_elem_load_i64(k->in_data[1], k->in[1]->dtype, 0) != 0 : true;
    int64_t planned = -1;
    for (size_t j = 0; j < kk; j++)
        if (k->out[n + j])
            planned = k->out[n + j]->shape.dims[0].value;
    bind_outer(k, b);
    for (size_t j = 0; j < n; j++)
        copy(in_ptr(b, 2 + j), k->in_data[2 + j], tbytes(sub_in(b, 2 + j)));
    const struct cp_tensor *it_t = sub_in(b, 0), *ci_t = sub_in(b, 1), *co_t = sub_out(b, 0);
    int64_t it = 0;
    for (; it < m && cond; it++) {
        if (planned >= 0 && it >= planned)
            return CP_ERR_INTERNAL; /* more iterations than inference said */
        if (in_ptr(b, 0))
            cp_elem_store_i64(in_ptr(b, 0), it_t->dtype, 0, it);
        if (in_ptr(b, 1))
            cp_elem_store_i64(in_ptr(b, 1), ci_t->dtype, 0, 1);
        enum cp_status st = cp_plan_run_nested(b->plan);
        if (st != CP_OK)
            return st;
        cond = cp_elem_load_i64(out_ptr(b, 0), co_t->dtype, 0) != 0;
        for (size_t j = 0, off = 0; j < kk; j++) {
            (void)off;
            if (!k->out[n + j])
                continue;
            size_t sz = tbytes(sub_out(b, 1 + n + j));
            copy((char *)k->out_data[n + j] + (size_t)it * sz, out_ptr(b, 1 + n + j), sz);
        }
        size_t off = 0;
        for (size_t j = 0; j < n; j++) {
            size_t sz = tbytes(sub_in(b, 2 + j));
            copy((char *)s->tmp + off, out_ptr(b, 1 + j), sz);
            off += sz;
        }
        off = 0;
        for (size_t j = 0; j < n; j++) {
            size_t sz = tbytes(sub_in(b, 2 + j));
            copy(in_ptr(b, 2 + j), (char *)s->tmp + off, sz);
            off += sz;
        }
    }
    if (planned >= 0 && it != planned)
        return CP_ERR_INTERNAL;
    for (size_t j = 0; j < n; j++)
        if (k->out[j])
            copy(k->out_data[j], in_ptr(b, 2 + j), tbytes(k->out[j]));
    return CP_OK;
}

static enum cp_status loop_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return cf_prepared(k, loop_prepare_state(k, d));
}

const struct cp_kernel cp_ref_loop = {"ref",    CP_OP_LOOP, supports_cf, loop_prepare,
                                      loop_run, cf_release, NULL};

/* ---- Scan -------------------------------------------------------------------------- */

/* Slab `pos` of an axis of length `len`: `outer` blocks of `inner` bytes. */
static void slab(char *full, char *part, int64_t outer, int64_t len, size_t inner, int64_t pos,
                 bool to_part)
{
    for (int64_t o = 0; o < outer; o++) {
        char *f = full + (size_t)(o * len + pos) * inner;
        char *p = part + (size_t)o * inner;
        if (to_part)
            memcpy(p, f, inner);
        else
            memcpy(f, p, inner);
    }
}

/* outer, len and inner bytes of axis `a` of t. */
static void axis_split(const struct cp_tensor *t, int a, int64_t *outer, int64_t *len,
                       size_t *inner)
{
    *outer = 1;
    *len = t->shape.dims[a].value;
    size_t in = cp_dtype_size(t->dtype);
    for (int q = 0; q < a; q++)
        *outer *= t->shape.dims[q].value;
    for (int q = a + 1; q < t->shape.rank; q++)
        in *= (size_t)t->shape.dims[q].value;
    *inner = in;
}

static int64_t attr_at(const struct cp_node *n, const char *name, size_t i, int64_t dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    return a && a->type == CP_ATTR_INTS && i < a->n ? a->ints[i] : dflt;
}

static int norm_axis(int64_t a, int rank)
{
    return (int)(a < 0 ? a + rank : a);
}

static enum cp_status scan_prepare_state(struct cp_kexec *k, struct cp_diag *d)
{
    enum cp_status st = cf_alloc(k, d);
    if (st != CP_OK)
        return st;
    struct cf_state *s = k->state;
    if ((st = open_sub(k, "body", &s->sub[0], d)) != CP_OK)
        return st;
    const struct cf_sub *b = &s->sub[0];
    int64_t m = cp_node_attr_int(k->node, "num_scan_inputs", 0);
    size_t n = cp_graph_n_inputs(b->g) - (size_t)m;
    for (size_t j = 0; j < n; j++) {
        char x[96], y[96];
        if (same_shape(sub_out(b, j), sub_in(b, j)))
            continue;
        cp_shape_format(&sub_in(b, j)->shape, x, sizeof x);
        cp_shape_format(&sub_out(b, j)->shape, y, sizeof y);
        return fail(k, d,
                    "state %s%zu enters the body as %s and leaves it as %s; states that change "
                    "shape are not supported",
                    "", j, x, y);
    }
    for (size_t j = 0; j < n; j++)
        s->tmp_bytes += tbytes(sub_in(b, j));
    s->tmp = malloc(s->tmp_bytes ? s->tmp_bytes : 1);
    return s->tmp ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
}

static enum cp_status scan_run(struct cp_kexec *k)
{
    struct cf_state *s = k->state;
    struct cf_sub *b = &s->sub[0];
    const struct cp_node *nd = k->node;
    bool v8 = cp_graph_opset(k->g) < 9;
    size_t first = v8 ? 1 : 0;
    int64_t m = cp_node_attr_int(nd, "num_scan_inputs", 0);
    size_t n = cp_graph_n_inputs(b->g) - (size_t)m, kk = nd->n_outputs - n;
    const struct cp_tensor *x0 = k->in[first + n];
    int64_t batch = v8 ? x0->shape.dims[0].value : 1;
    int64_t seq =
        v8 ? x0->shape.dims[1].value
           : x0->shape.dims[norm_axis(attr_at(nd, "scan_input_axes", 0, 0), x0->shape.rank)].value;
    bind_outer(k, b);
    for (size_t j = 0; j < kk; j++)
        if (k->out[n + j] && v8)
            memset(k->out_data[n + j], 0, tbytes(k->out[n + j]));
    for (int64_t bi = 0; bi < batch; bi++) {
        int64_t len = seq;
        if (v8 && k->in[0]) {
            len = cp_elem_load_i64(k->in_data[0], k->in[0]->dtype, bi);
            if (len < 0 || len > seq)
                return CP_ERR_INTERNAL;
        }
        for (size_t j = 0; j < n; j++) {
            size_t sz = tbytes(sub_in(b, j));
            copy(in_ptr(b, j), (char *)k->in_data[first + j] + (size_t)bi * sz, sz);
        }
        for (int64_t t = 0; t < len; t++) {
            for (size_t i = 0; i < (size_t)m; i++) {
                const struct cp_tensor *x = k->in[first + n + i];
                int64_t dir = attr_at(nd, v8 ? "directions" : "scan_input_directions", i, 0);
                int64_t pos = dir ? len - 1 - t : t;
                int64_t outer, ln;
                size_t inner;
                if (v8) {
                    axis_split(x, 1, &outer, &ln, &inner);
                    slab((char *)k->in_data[first + n + i] + (size_t)(bi * ln) * inner,
                         in_ptr(b, n + i), 1, ln, inner, pos, true);
                } else {
                    int a = norm_axis(attr_at(nd, "scan_input_axes", i, 0), x->shape.rank);
                    axis_split(x, a, &outer, &ln, &inner);
                    slab(k->in_data[first + n + i], in_ptr(b, n + i), outer, ln, inner, pos, true);
                }
            }
            enum cp_status st = cp_plan_run_nested(b->plan);
            if (st != CP_OK)
                return st;
            for (size_t j = 0; j < kk; j++) {
                const struct cp_tensor *y = k->out[n + j];
                if (!y)
                    continue;
                int64_t dir = v8 ? 0 : attr_at(nd, "scan_output_directions", j, 0);
                int64_t pos = dir ? len - 1 - t : t;
                int64_t outer, ln;
                size_t inner;
                if (v8) {
                    axis_split(y, 1, &outer, &ln, &inner);
                    slab((char *)k->out_data[n + j] + (size_t)(bi * ln) * inner, out_ptr(b, n + j),
                         1, ln, inner, pos, false);
                } else {
                    int a = norm_axis(attr_at(nd, "scan_output_axes", j, 0), y->shape.rank);
                    axis_split(y, a, &outer, &ln, &inner);
                    slab(k->out_data[n + j], out_ptr(b, n + j), outer, ln, inner, pos, false);
                }
            }
            size_t off = 0;
            for (size_t j = 0; j < n; j++) {
                size_t sz = tbytes(sub_in(b, j));
                copy((char *)s->tmp + off, out_ptr(b, j), sz);
                off += sz;
            }
            off = 0;
            for (size_t j = 0; j < n; j++) {
                size_t sz = tbytes(sub_in(b, j));
                copy(in_ptr(b, j), (char *)s->tmp + off, sz);
                off += sz;
            }
        }
        for (size_t j = 0; j < n; j++) {
            size_t sz = tbytes(sub_in(b, j));
            if (k->out[j])
                copy((char *)k->out_data[j] + (size_t)bi * sz, in_ptr(b, j), sz);
        }
    }
    return CP_OK;
}

static enum cp_status scan_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return cf_prepared(k, scan_prepare_state(k, d));
}

const struct cp_kernel cp_ref_scan = {"ref",    CP_OP_SCAN, supports_cf, scan_prepare,
                                      scan_run, cf_release, NULL};
