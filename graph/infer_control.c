/* Shape and dtype inference of If, Loop and Scan: their subgraphs are
 * inferred with the node's inputs bound to the subgraph's inputs and
 * outer-scope references, and the node's outputs follow from the
 * subgraph's outputs. */
#include "graph/infer_internal.h"

#include <stdlib.h>
#include <string.h>

static struct cp_graph *sub_of(struct cp_infer *c, const char *attr)
{
    const struct cp_attr *a = cp_node_attr(c->node, attr);
    return a && a->type == CP_ATTR_GRAPH ? a->graph : NULL;
}

/* Give subgraph input tensor t the dtype and shape `src` has. */
static enum cp_status bind(struct cp_infer *c, const char *attr, struct cp_tensor *t,
                           enum cp_dtype dt, const struct cp_shape *s)
{
    if (t->dtype != CP_DTYPE_UNDEFINED && dt != CP_DTYPE_UNDEFINED && t->dtype != dt)
        return cp_infer_fail(c,
                             "attribute '%s': subgraph input '%s' is declared %s but receives %s",
                             attr, t->name, cp_dtype_name(t->dtype), cp_dtype_name(dt));
    if (dt != CP_DTYPE_UNDEFINED)
        t->dtype = dt;
    if (s)
        t->shape = *s;
    else
        cp_shape_set_unknown(&t->shape);
    return CP_OK;
}

/* Bind the outer-scope references of `sub`, infer it, and report its
 * errors with the node and attribute. */
static enum cp_status infer_sub(struct cp_infer *c, const char *attr, struct cp_graph *sub)
{
    for (size_t i = 0; i < cp_graph_n_outer(sub); i++) {
        struct cp_tensor *t = cp_graph_tensor(sub, cp_graph_outer(sub, i));
        int32_t slot = cp_control_outer_slot(c->g, c->node, sub, i);
        const struct cp_tensor *src = slot >= 0 ? cp_infer_in(c, (size_t)slot) : NULL;
        if (!src)
            return cp_infer_fail(c,
                                 "attribute '%s': outer-scope reference '%s' is not among the "
                                 "node's inputs",
                                 attr, t->name);
        t->dtype = src->dtype;
        t->shape = src->shape;
        t->value = NULL;
        t->value_len = 0;
        if (src->value) {
            int64_t *v =
                cp_graph_alloc(sub, (size_t)(src->value_len ? src->value_len : 1) * sizeof *v);
            if (!v)
                return cp_diag_set(c->d, CP_ERR_NOMEM, "out of memory");
            memcpy(v, src->value, (size_t)src->value_len * sizeof *v);
            t->value = v;
            t->value_len = src->value_len;
        }
    }
    /* Shapes of a previous inference (other input shapes) must not leak. */
    for (size_t i = 0; i < cp_graph_n_tensors(sub); i++) {
        struct cp_tensor *t = cp_graph_tensor(sub, (int32_t)i);
        if (t->kind == CP_TENSOR_INTERMEDIATE)
            cp_shape_set_unknown(&t->shape);
    }
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_infer(sub, &local);
    if (st != CP_OK)
        return cp_infer_fail_st(c, st, "attribute '%s': %s", attr, local.msg);
    return CP_OK;
}

static const struct cp_tensor *sub_out(const struct cp_graph *g, size_t i)
{
    return cp_graph_tensor(g, cp_graph_output(g, i));
}

/* The shape both a and b fit: equal dims stay, others become dynamic. */
static void merge(const struct cp_shape *a, const struct cp_shape *b, struct cp_shape *out)
{
    if (a->rank < 0 || b->rank < 0 || a->rank != b->rank) {
        cp_shape_set_unknown(out);
        return;
    }
    *out = *a;
    for (int k = 0; k < a->rank; k++)
        if (a->dims[k].value != b->dims[k].value || a->dims[k].value < 0)
            cp_infer_dim_dyn(&out->dims[k]);
}

static bool known_scalar(const struct cp_tensor *t, int64_t *v)
{
    if (!t || !t->value || t->value_len != 1)
        return false;
    *v = t->value[0];
    return true;
}

enum cp_status cp_infer_if(struct cp_infer *c)
{
    struct cp_graph *br[2] = {sub_of(c, "then_branch"), sub_of(c, "else_branch")};
    static const char *const names[2] = {"then_branch", "else_branch"};
    if (!br[0] || !br[1])
        return cp_infer_fail(c, "needs GRAPH attributes then_branch and else_branch");
    const struct cp_tensor *cond = cp_infer_in(c, 0);
    int64_t numel = cp_shape_numel(&cond->shape);
    if (numel >= 0 && numel != 1)
        return cp_infer_fail(c, "the condition '%s' has %lld elements; it must have one",
                             cond->name, (long long)numel);
    int64_t cv = 0;
    bool known = known_scalar(cond, &cv);
    /* A branch that cannot take these inputs (Silero VAD's 8 kHz branch,
     * given a 16 kHz chunk) is an error only if it can be taken: with a
     * condition known at run time only, the other branch's outputs stand,
     * shapes and all, since only that branch can produce outputs; a run
     * that takes the bad branch fails naming the node and why (as ONNX
     * Runtime, which infers lazily, fails there). */
    bool bad[2] = {false, false};
    for (int k = 0; k < 2; k++) {
        if (cp_graph_n_outputs(br[k]) != c->node->n_outputs)
            return cp_infer_fail(c, "attribute '%s' has %zu outputs, the node %zu", names[k],
                                 cp_graph_n_outputs(br[k]), c->node->n_outputs);
        if (known && (cv != 0) != (k == 0))
            continue; /* never taken */
        enum cp_status st = infer_sub(c, names[k], br[k]);
        if (st == CP_OK)
            continue;
        if (known || st != CP_ERR_INVALID || bad[0])
            return st; /* both bad: the second's message stands */
        bad[k] = true;
        cp_diag_init(c->d);
    }
    if (bad[0] || bad[1]) {
        const struct cp_graph *ok = br[bad[0] ? 1 : 0];
        for (size_t i = 0; i < c->node->n_outputs; i++) {
            const struct cp_tensor *t = sub_out(ok, i);
            enum cp_status st = cp_infer_set_out(c, i, t->dtype, &t->shape);
            if (st != CP_OK)
                return st;
        }
        return CP_OK;
    }
    for (size_t i = 0; i < c->node->n_outputs; i++) {
        const struct cp_tensor *a = sub_out(br[0], i), *b = sub_out(br[1], i);
        enum cp_status st;
        if (known) {
            const struct cp_tensor *t = cv ? a : b;
            st = cp_infer_set_out(c, i, t->dtype, &t->shape);
        } else {
            if (a->dtype != b->dtype)
                return cp_infer_fail(c, "output %zu is %s in then_branch but %s in else_branch", i,
                                     cp_dtype_name(a->dtype), cp_dtype_name(b->dtype));
            struct cp_shape s;
            merge(&a->shape, &b->shape, &s);
            if (c->opset < 11 && cp_shape_is_static(&a->shape) && cp_shape_is_static(&b->shape) &&
                !cp_shape_equal(&a->shape, &b->shape)) {
                char x[64], y[64];
                return cp_infer_fail(c,
                                     "output %zu has shape %s in then_branch but %s in "
                                     "else_branch; before opset 11 both branches must agree",
                                     i, cp_infer_fmt(&a->shape, x), cp_infer_fmt(&b->shape, y));
            }
            st = cp_infer_set_out(c, i, a->dtype, &s);
        }
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

enum cp_status cp_infer_loop(struct cp_infer *c)
{
    struct cp_graph *body = sub_of(c, "body");
    if (!body)
        return cp_infer_fail(c, "needs GRAPH attribute body");
    size_t formal = cp_control_n_formal(c->g, c->node);
    if (formal < 2 || cp_graph_n_inputs(body) != formal ||
        cp_graph_n_outputs(body) != c->node->n_outputs + 1)
        return cp_infer_fail(c, "the body's inputs and outputs do not match the node's");
    size_t n = formal - 2, k = c->node->n_outputs - n;
    struct cp_shape scalar;
    cp_shape_set(&scalar, 0, NULL);
    enum cp_status st;
    if ((st = bind(c, "body", cp_graph_tensor(body, cp_graph_input(body, 0)), CP_DTYPE_I64,
                   &scalar)) != CP_OK ||
        (st = bind(c, "body", cp_graph_tensor(body, cp_graph_input(body, 1)), CP_DTYPE_BOOL,
                   &scalar)) != CP_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        const struct cp_tensor *v = cp_infer_in(c, 2 + j);
        if (!v)
            return cp_infer_fail(c, "loop-carried input %zu is missing", j);
        if ((st = bind(c, "body", cp_graph_tensor(body, cp_graph_input(body, 2 + j)), v->dtype,
                       &v->shape)) != CP_OK)
            return st;
    }
    if ((st = infer_sub(c, "body", body)) != CP_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        const struct cp_tensor *v = cp_infer_in(c, 2 + j), *o = sub_out(body, 1 + j);
        if (o->dtype != v->dtype)
            return cp_infer_fail(c, "loop-carried value %zu enters as %s but the body makes %s", j,
                                 cp_dtype_name(v->dtype), cp_dtype_name(o->dtype));
        struct cp_shape s;
        merge(&v->shape, &o->shape, &s);
        if ((st = cp_infer_set_out(c, j, v->dtype, &s)) != CP_OK)
            return st;
    }
    /* The trip count is known when M is, and the condition cannot stop the
     * loop early: absent or known true, and the body passes it through. */
    int64_t m = -1, cv;
    const struct cp_tensor *mt = cp_infer_in(c, 0), *ct = cp_infer_in(c, 1);
    const struct cp_tensor *co = sub_out(body, 0);
    bool cond_fixed =
        (!ct || (known_scalar(ct, &cv) && cv)) &&
        (cp_graph_output(body, 0) == cp_graph_input(body, 1) || (known_scalar(co, &cv) && cv));
    if (mt && known_scalar(mt, &m) && m < 0)
        m = 0;
    if (mt && ct && known_scalar(ct, &cv) && !cv)
        m = 0, cond_fixed = true;
    for (size_t j = 0; j < k; j++) {
        const struct cp_tensor *o = sub_out(body, 1 + n + j);
        struct cp_shape s;
        if (o->shape.rank < 0 || o->shape.rank + 1 > CP_MAX_RANK) {
            cp_shape_set_unknown(&s);
        } else {
            s.rank = o->shape.rank + 1;
            for (int q = 0; q < o->shape.rank; q++)
                s.dims[q + 1] = o->shape.dims[q];
            if (m >= 0 && cond_fixed)
                cp_infer_dim_set(&s.dims[0], m);
            else
                cp_infer_dim_dyn(&s.dims[0]);
        }
        if ((st = cp_infer_set_out(c, n + j, o->dtype, &s)) != CP_OK)
            return st;
    }
    return CP_OK;
}

/* A shape without dimension `axis`. */
static void drop_dim(const struct cp_shape *in, int axis, struct cp_shape *out)
{
    out->rank = in->rank - 1;
    for (int q = 0, w = 0; q < in->rank; q++)
        if (q != axis)
            out->dims[w++] = in->dims[q];
}

enum cp_status cp_infer_scan(struct cp_infer *c)
{
    struct cp_graph *body = sub_of(c, "body");
    if (!body)
        return cp_infer_fail(c, "needs GRAPH attribute body");
    bool v8 = c->opset < 9;
    size_t first = v8 ? 1 : 0;
    size_t formal = cp_control_n_formal(c->g, c->node);
    int64_t m = cp_node_attr_int(c->node, "num_scan_inputs", -1);
    if (m < 1 || (size_t)m > formal - first || cp_graph_n_inputs(body) != formal - first ||
        cp_graph_n_outputs(body) != c->node->n_outputs)
        return cp_infer_fail(c, "the body's inputs and outputs do not match the node's");
    size_t n = formal - first - (size_t)m, k = c->node->n_outputs - n;
    int64_t axes[CP_MAX_RANK * 8];
    size_t na = 0;
    bool have = false;
    enum cp_status st;
    if (!v8 && (st = cp_infer_attr_ints(c, "scan_input_axes", axes, sizeof axes / sizeof *axes, &na,
                                        &have)) != CP_OK)
        return st;
    int64_t seq = -1;
    bool seq_dyn = false;
    for (size_t j = 0; j < first + n + (size_t)m; j++) {
        if (j < first)
            continue;
        const struct cp_tensor *x = cp_infer_in(c, j);
        if (!x)
            return cp_infer_fail(c, "input %zu is missing", j);
        struct cp_tensor *bt = cp_graph_tensor(body, cp_graph_input(body, j - first));
        struct cp_shape s;
        cp_shape_set_unknown(&s);
        bool scan = j >= first + n;
        if (x->shape.rank >= 0) {
            int lead = v8 ? (scan ? 2 : 1) : (scan ? 1 : 0);
            if (x->shape.rank < lead)
                return cp_infer_fail(c, "input '%s' has rank %d; Scan needs at least %d", x->name,
                                     x->shape.rank, lead);
            if (v8) {
                s.rank = x->shape.rank - lead;
                for (int q = 0; q < s.rank; q++)
                    s.dims[q] = x->shape.dims[q + lead];
            } else if (scan) {
                int64_t ax = have && (size_t)(j - first - n) < na ? axes[j - first - n] : 0;
                int a;
                if ((st = cp_infer_axis(c, ax, x->shape.rank, false, "scan_input_axes", &a)) !=
                    CP_OK)
                    return st;
                drop_dim(&x->shape, a, &s);
                int64_t d = x->shape.dims[a].value;
                if (d < 0)
                    seq_dyn = true;
                else if (seq >= 0 && d != seq)
                    return cp_infer_fail(c, "scan inputs have sequence lengths %lld and %lld",
                                         (long long)seq, (long long)d);
                else
                    seq = d;
            } else {
                s = x->shape;
            }
            if (v8 && scan) {
                int64_t d = x->shape.dims[1].value;
                if (d < 0)
                    seq_dyn = true;
                else if (seq >= 0 && d != seq)
                    return cp_infer_fail(c, "scan inputs have sequence lengths %lld and %lld",
                                         (long long)seq, (long long)d);
                else
                    seq = d;
            }
        }
        if ((st = bind(c, "body", bt, x->dtype, &s)) != CP_OK)
            return st;
    }
    if (seq_dyn)
        seq = -1;
    if ((st = infer_sub(c, "body", body)) != CP_OK)
        return st;
    int64_t oaxes[CP_MAX_RANK * 8];
    size_t noa = 0;
    bool ohave = false;
    if (!v8 && (st = cp_infer_attr_ints(c, "scan_output_axes", oaxes, sizeof oaxes / sizeof *oaxes,
                                        &noa, &ohave)) != CP_OK)
        return st;
    const struct cp_tensor *x0 = v8 ? cp_infer_in(c, 1) : NULL;
    for (size_t j = 0; j < n + k; j++) {
        const struct cp_tensor *o = sub_out(body, j);
        struct cp_shape s;
        cp_shape_set_unknown(&s);
        int extra = v8 ? (j < n ? 1 : 2) : (j < n ? 0 : 1);
        if (o->shape.rank >= 0 && o->shape.rank + extra <= CP_MAX_RANK) {
            s.rank = o->shape.rank + extra;
            int at = 0;
            if (!v8 && j >= n) {
                int64_t ax = ohave && j - n < noa ? oaxes[j - n] : 0;
                int a;
                if ((st = cp_infer_axis(c, ax, s.rank, false, "scan_output_axes", &a)) != CP_OK)
                    return st;
                at = a;
            }
            for (int q = 0, r = 0; q < s.rank; q++) {
                if (v8 && q == 0) {
                    if (x0 && x0->shape.rank > 0)
                        s.dims[0] = x0->shape.dims[0];
                    else
                        cp_infer_dim_dyn(&s.dims[0]);
                } else if ((v8 && j >= n && q == 1) || (!v8 && j >= n && q == at)) {
                    if (seq >= 0)
                        cp_infer_dim_set(&s.dims[q], seq);
                    else
                        cp_infer_dim_dyn(&s.dims[q]);
                } else {
                    s.dims[q] = o->shape.dims[r++];
                }
            }
        }
        if ((st = cp_infer_set_out(c, j, o->dtype, &s)) != CP_OK)
            return st;
    }
    return CP_OK;
}
