/*
 * The batch pass family (see pass.h): DynamicBatchPass, which makes a model
 * exported at one batch size run at every --dynamic_batch_size profile.
 *
 * PyTorch traces `x.view(1, 1024, 4, 16)` and even `x.view(b, n, h, d)`
 * with b taken from x.shape as a constant, so the exported graph hard-codes
 * its batch (usually 1) in Reshape targets. At another batch such a Reshape
 * either fails (the element count no longer matches) or, worse, succeeds
 * with the batch folded into another axis ([1, -1, 64] turns batch 2 into
 * twice the tokens) and silently mixes batch items.
 *
 * The pass finds the batch every Reshape really sees by running shape
 * inference twice: at the exported batch S (what the source model declares
 * for its inputs before --input_shape made them dynamic; failing that, the
 * first batch at which the graph as given infers) and at a probe batch P,
 * the largest profile other than S. A dimension that differs between the
 * two runs carries the batch. For a Reshape whose input carries the batch
 * on one axis a, the batch must land on the output axis j where the product
 * of the dimensions before it equals the product of the input's dimensions
 * before a (the outermost such axis: the batch is the outermost factor of
 * whatever it is merged with). When inference at P does not give exactly
 * that, and the target shape is a constant, the entry j is rewritten to 0
 * ("copy the input's dimension", when j = a and the dimension is copied
 * unchanged) or to -1 ("whatever is left", any other -1 being fixed to its
 * value at S). Both rewrites give the same shape as before at S, so the
 * function at the exported batch is untouched. Expand targets that repeat
 * the batch become 1, which broadcasts to any batch. A target computed at
 * run time, or an op that cannot be generalised, is an error naming the
 * node and the batch it fails at.
 *
 * The pass leaves the batch inputs at the exported batch, so the passes
 * after it see static shapes and match their patterns as in a static
 * conversion; this is what ATC does too, compiling one static graph per
 * profile. cp_batch_finish, after the last pass, makes the batch dynamic
 * again, generalises whatever the later passes hard-coded, and checks every
 * profile.
 */
#include "atc_bridge/passes/batch_check.h"
#include "atc_bridge/passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exported batch is looked for among 1..MAX_EXPORTED_BATCH. */
#define MAX_EXPORTED_BATCH 64

struct batch_run {
    struct cp_graph *g;
    const struct cp_convert_config *c;
    struct cp_diag *d;
    int32_t *inputs; /* graph inputs whose dimension 0 is the batch */
    size_t n_inputs;
    struct cp_dim *saved; /* their dimension 0 as the config left it */
    struct cp_shape *at_s, *at_p;
    int64_t s, p;
    size_t n_rewritten;
};

/* Set the batch of every batch input, forget every intermediate shape and
 * infer again. Errors go to `d` (which may be a local diag). */
static enum cp_status infer_at(struct batch_run *r, int64_t batch, struct cp_diag *d)
{
    for (size_t i = 0; i < r->n_inputs; i++) {
        struct cp_dim *dm = &cp_graph_tensor(r->g, r->inputs[i])->shape.dims[0];
        dm->value = batch;
        dm->sym = NULL;
    }
    cp_batch_forget_intermediates(r->g);
    return cp_graph_infer(r->g, d);
}

static enum cp_status snapshot(struct batch_run *r, struct cp_shape **out)
{
    size_t n = cp_graph_n_tensors(r->g);
    struct cp_shape *s = cp_realloc_array(*out, n + 1, sizeof *s);
    if (!s)
        return cp_diag_set(r->d, CP_ERR_NOMEM, "DynamicBatchPass: out of memory");
    *out = s;
    for (size_t i = 0; i < n; i++)
        s[i] = cp_graph_tensor(r->g, (int32_t)i)->shape;
    return CP_OK;
}

/* The axis of `t` that carries the batch: -1 when none does, -2 when
 * several do or a shape is not known at both batches. */
static int batch_axis(const struct batch_run *r, int32_t t)
{
    const struct cp_shape *s = &r->at_s[t], *p = &r->at_p[t];
    if (s->rank < 0 || p->rank != s->rank || !cp_shape_is_static(s) || !cp_shape_is_static(p))
        return -2;
    int axis = -1;
    for (int k = 0; k < s->rank; k++) {
        if (s->dims[k].value == p->dims[k].value)
            continue;
        if (axis >= 0)
            return -2;
        axis = k;
    }
    return axis;
}

static int64_t prefix(const struct cp_shape *s, int upto)
{
    int64_t n = 1;
    for (int k = 0; k < upto; k++)
        n *= s->dims[k].value;
    return n;
}

/* Where the batch of input axis `a` must land in a Reshape's output: the
 * first output axis whose leading product equals the input's before `a`;
 * -1 when there is none. */
static int reshape_target_axis(const struct cp_shape *x, int a, const struct cp_shape *y)
{
    int64_t want = prefix(x, a);
    for (int j = 0; j < y->rank; j++) {
        if (prefix(y, j) == want)
            return j;
        if (prefix(y, j) > want)
            break;
    }
    return -1;
}

/* Whether output `y` carries the batch on axis j only, scaled by the same
 * factor as the input's axis a. */
static bool carries_batch_on(const struct batch_run *r, int32_t x, int a, int32_t y, int j)
{
    const struct cp_shape *ys = &r->at_s[y], *yp = &r->at_p[y];
    if (ys->rank < 0 || yp->rank != ys->rank || !cp_shape_is_static(yp))
        return false;
    for (int k = 0; k < ys->rank; k++) {
        int64_t vs = ys->dims[k].value, vp = yp->dims[k].value;
        if (k != j && vs != vp)
            return false;
    }
    int64_t xs = r->at_s[x].dims[a].value, xp = r->at_p[x].dims[a].value;
    /* yp[j] / ys[j] == xp / xs, without division. */
    return ys->dims[j].value * xp == yp->dims[j].value * xs;
}

/* The constant i64 data behind tensor t, or NULL. */
static const int64_t *const_i64(const struct cp_graph *g, int32_t t, int64_t *n)
{
    const struct cp_tensor *ct = t >= 0 ? cp_graph_tensor(g, t) : NULL;
    if (!ct || ct->kind != CP_TENSOR_INITIALIZER || ct->dtype != CP_DTYPE_I64 || !ct->data ||
        ct->shape.rank != 1)
        return NULL;
    *n = ct->shape.dims[0].value;
    if (*n < 0 || *n > CP_MAX_RANK || (size_t)*n * sizeof(int64_t) != ct->nbytes)
        return NULL;
    return ct->data;
}

/* Give node `ni` a new constant i64 input `which` holding v[0..n). */
static enum cp_status replace_const(struct batch_run *r, int32_t ni, size_t which, const int64_t *v,
                                    int64_t n)
{
    struct cp_graph *g = r->g;
    const char *base = cp_graph_tensor(g, cp_graph_node(g, ni)->inputs[which])->name;
    char name[512];
    snprintf(name, sizeof name, "%s/dynamic_batch", base);
    for (int k = 2; cp_graph_find_tensor(g, name) >= 0; k++)
        snprintf(name, sizeof name, "%s/dynamic_batch_%d", base, k);
    struct cp_shape s;
    cp_shape_set(&s, 1, &n);
    int32_t t;
    enum cp_status st =
        cp_graph_add_tensor(g, name, CP_DTYPE_I64, &s, CP_TENSOR_INITIALIZER, &t, r->d);
    if (st != CP_OK)
        return st;
    int64_t *data = malloc((size_t)(n ? n : 1) * sizeof *data);
    if (!data)
        return cp_diag_set(r->d, CP_ERR_NOMEM, "DynamicBatchPass: out of memory");
    memcpy(data, v, (size_t)n * sizeof *data);
    st = cp_graph_set_data(g, t, data, (size_t)n * sizeof *data, CP_DATA_HEAP, r->d);
    if (st != CP_OK)
        return st;
    cp_graph_node(g, ni)->inputs[which] = t;
    r->n_rewritten++;
    return CP_OK;
}

static void format_ints(const int64_t *v, int64_t n, char *out, size_t cap)
{
    size_t pos = (size_t)snprintf(out, cap, "[");
    for (int64_t k = 0; k < n && pos < cap; k++)
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%lld", k ? "," : "", (long long)v[k]);
    if (pos < cap)
        snprintf(out + pos, cap - pos, "]");
}

static enum cp_status cannot(struct batch_run *r, const struct cp_node *n, const char *why)
{
    return cp_diag_set(r->d, CP_ERR_UNSUPPORTED,
                       "cannot generalise the batch (exported at %lld) at node '%s' (%s): %s",
                       (long long)r->s, n->name, n->op_type, why);
}

/* A Reshape whose input carries the batch on axis a. OUT: *rewrote. */
static enum cp_status fix_reshape(struct batch_run *r, int32_t ni, int a, bool *rewrote)
{
    struct cp_node *n = cp_graph_node(r->g, ni);
    int32_t x = n->inputs[0], y = n->outputs[0];
    const struct cp_shape *xs = &r->at_s[x], *ys = &r->at_s[y];
    if (ys->rank < 0 || !cp_shape_is_static(ys))
        return CP_OK;
    int j = reshape_target_axis(xs, a, ys);
    if (j >= 0 && carries_batch_on(r, x, a, y, j))
        return CP_OK;
    char msg[512];
    if (j < 0) {
        char xt[96], yt[96];
        cp_shape_format(xs, xt, sizeof xt);
        cp_shape_format(ys, yt, sizeof yt);
        snprintf(msg, sizeof msg,
                 "it reshapes %s to %s, splitting the batch (input axis %d) across output axes", xt,
                 yt, a);
        return cannot(r, n, msg);
    }
    int64_t len;
    const int64_t *t = n->n_inputs >= 2 ? const_i64(r->g, n->inputs[1], &len) : NULL;
    if (!t || len != ys->rank) {
        snprintf(msg, sizeof msg,
                 "its target shape '%s' is computed, not a constant, and does not follow the "
                 "batch (at batch %lld the batch does not land on output axis %d)",
                 n->n_inputs >= 2 ? cp_graph_tensor(r->g, n->inputs[1])->name : "?",
                 (long long)r->p, j);
        return cannot(r, n, msg);
    }
    bool allowzero = cp_node_attr_int(n, "allowzero", 0) != 0;
    int64_t v[CP_MAX_RANK];
    memcpy(v, t, (size_t)len * sizeof *v);
    if (j == a && !allowzero && ys->dims[j].value == xs->dims[a].value) {
        v[j] = 0;
    } else {
        for (int k = 0; k < len; k++)
            if (k != j && (v[k] == -1 || (v[k] == 0 && !allowzero && k == a)))
                v[k] = ys->dims[k].value;
        v[j] = -1;
    }
    char before[160], after[160];
    format_ints(t, len, before, sizeof before);
    format_ints(v, len, after, sizeof after);
    if (memcmp(v, t, (size_t)len * sizeof *v) == 0) {
        snprintf(msg, sizeof msg, "its target %s does not follow the batch", before);
        return cannot(r, n, msg);
    }
    enum cp_status st = replace_const(r, ni, 1, v, len);
    if (st == CP_OK)
        *rewrote = true;
    return st;
}

/* An Expand whose input carries the batch on axis a. OUT: *rewrote. */
static enum cp_status fix_expand(struct batch_run *r, int32_t ni, int a, bool *rewrote)
{
    struct cp_node *n = cp_graph_node(r->g, ni);
    int32_t x = n->inputs[0], y = n->outputs[0];
    const struct cp_shape *xs = &r->at_s[x], *ys = &r->at_s[y];
    if (ys->rank < 0)
        return CP_OK;
    int j = a + (ys->rank - xs->rank);
    if (carries_batch_on(r, x, a, y, j))
        return CP_OK;
    int64_t len;
    const int64_t *t = n->n_inputs >= 2 ? const_i64(r->g, n->inputs[1], &len) : NULL;
    int ta = t ? a + (int)(len - xs->rank) : -1;
    if (!t || ta < 0 || t[ta] != xs->dims[a].value)
        return cannot(r, n, "its target shape does not follow the batch");
    int64_t v[CP_MAX_RANK];
    memcpy(v, t, (size_t)len * sizeof *v);
    v[ta] = 1; /* broadcasts to whatever batch the input has */
    enum cp_status st = replace_const(r, ni, 1, v, len);
    if (st == CP_OK)
        *rewrote = true;
    return st;
}

/* One sweep over the nodes in order, rewriting the first node that does
 * not follow the batch. OUT: *rewrote. */
static enum cp_status sweep(struct batch_run *r, bool *rewrote)
{
    *rewrote = false;
    for (size_t i = 0; i < cp_graph_n_nodes(r->g) && !*rewrote; i++) {
        struct cp_node *n = cp_graph_node(r->g, (int32_t)i);
        if (n->dead || (n->op != CP_OP_RESHAPE && n->op != CP_OP_EXPAND))
            continue;
        if (n->n_inputs < 2 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0)
            continue;
        int a = batch_axis(r, n->inputs[0]);
        if (a < 0)
            continue; /* no batch here (or not known at P yet) */
        enum cp_status st = n->op == CP_OP_RESHAPE ? fix_reshape(r, (int32_t)i, a, rewrote)
                                                   : fix_expand(r, (int32_t)i, a, rewrote);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* The batch the source model declares for the batch inputs (before
 * --input_shape made it dynamic): its dimension 0 when every batch input
 * declares the same static one, else 0. */
static int64_t declared_batch(const struct batch_run *r, const char *model)
{
    if (!model || !model[0])
        return 0;
    struct cp_graph *src = NULL;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_onnx_import(model, NULL, 0, &src, NULL, &local) != CP_OK)
        return 0;
    int64_t batch = 0;
    for (size_t i = 0; i < r->n_inputs; i++) {
        const char *name = cp_graph_tensor(r->g, r->inputs[i])->name;
        int32_t t = cp_graph_find_tensor(src, name);
        const struct cp_tensor *st = t >= 0 ? cp_graph_tensor(src, t) : NULL;
        int64_t v = st && st->shape.rank >= 1 ? st->shape.dims[0].value : -1;
        if (v <= 0 || (batch && v != batch)) {
            batch = 0;
            break;
        }
        batch = v;
    }
    cp_graph_free(src);
    return batch;
}

/* The exported batch S: what the source model declares, else the first
 * batch at which the graph as given infers. */
static enum cp_status find_exported_batch(struct batch_run *r, const char *model)
{
    struct cp_diag local;
    cp_diag_init(&local);
    int64_t declared = declared_batch(r, model);
    if (declared > 0) {
        if (infer_at(r, declared, &local) != CP_OK)
            return cp_diag_set(r->d, CP_ERR_INVALID,
                               "the model does not infer at the batch it declares (%lld): %s",
                               (long long)declared, local.msg);
        r->s = declared;
        return CP_OK;
    }
    struct cp_diag first;
    cp_diag_init(&first);
    for (int64_t b = 1; b <= MAX_EXPORTED_BATCH; b++) {
        cp_diag_init(&local);
        if (infer_at(r, b, &local) == CP_OK) {
            r->s = b;
            return CP_OK;
        }
        if (b == 1)
            first = local;
    }
    return cp_diag_set(r->d, CP_ERR_UNSUPPORTED,
                       "no batch from 1 to %d makes the model infer; at batch 1: %s",
                       MAX_EXPORTED_BATCH, first.msg);
}

static enum cp_status generalise(struct batch_run *r, bool *changed)
{
    enum cp_status st = find_exported_batch(r, r->c->model);
    if (st != CP_OK)
        return st;
    /* The probe batch: the largest profile other than S (a config has at
     * least two), so the pass asks no more of the model than the profiles
     * do; 2S when there is no profile at all (tests run the pass alone). */
    r->p = 0;
    for (size_t i = 0; i < r->c->n_dynamic_batch; i++)
        if (r->c->dynamic_batch[i] != r->s && r->c->dynamic_batch[i] > r->p)
            r->p = r->c->dynamic_batch[i];
    if (r->p == 0)
        r->p = 2 * r->s;
    /* Each round rewrites one node; a graph has finitely many. */
    for (size_t round = 0; round <= cp_graph_n_nodes(r->g) + 1; round++) {
        struct cp_diag at_s, at_p;
        cp_diag_init(&at_s);
        cp_diag_init(&at_p);
        if ((st = infer_at(r, r->s, &at_s)) != CP_OK)
            return cp_diag_set(r->d, CP_ERR_INTERNAL,
                               "rewriting the batch broke the exported batch %lld: %s",
                               (long long)r->s, at_s.msg);
        if ((st = snapshot(r, &r->at_s)) != CP_OK)
            return st;
        enum cp_status st_p = infer_at(r, r->p, &at_p);
        if ((st = snapshot(r, &r->at_p)) != CP_OK)
            return st;
        bool rewrote;
        if ((st = sweep(r, &rewrote)) != CP_OK)
            return st;
        if (rewrote) {
            *changed = true;
            continue;
        }
        if (st_p != CP_OK)
            return cp_diag_set(r->d, st_p,
                               "the model (exported at batch %lld) fails at batch %lld: %s",
                               (long long)r->s, (long long)r->p, at_p.msg);
        return CP_OK;
    }
    return cp_diag_set(r->d, CP_ERR_INTERNAL, "rewriting the batch does not converge");
}

enum cp_status cp_batch_generalise(struct cp_graph *g, const struct cp_convert_config *c,
                                   bool leave_exported, const struct cp_log *log, bool *changed,
                                   struct cp_diag *d)
{
    *changed = false;
    if (c->n_dynamic_batch == 0)
        return CP_OK;
    struct batch_run r = {.g = g, .c = c, .d = d};
    size_t ni = cp_graph_n_inputs(g);
    r.inputs = cp_calloc(ni + 1, sizeof *r.inputs);
    r.saved = cp_calloc(ni + 1, sizeof *r.saved);
    enum cp_status st = CP_OK;
    if (!r.inputs || !r.saved) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory generalising the batch");
        goto out_free;
    }
    for (size_t i = 0; i < ni; i++) {
        int32_t t = cp_graph_input(g, i);
        const struct cp_tensor *tt = cp_graph_tensor(g, t);
        if (tt->kind == CP_TENSOR_INPUT && tt->shape.rank >= 1 && tt->shape.dims[0].value < 0) {
            r.saved[r.n_inputs] = tt->shape.dims[0];
            r.inputs[r.n_inputs++] = t;
        }
    }
    if (r.n_inputs == 0)
        goto out_free;
    if ((st = generalise(&r, changed)) != CP_OK)
        goto out_free;
    if (leave_exported) {
        /* The later passes see the static shapes of the exported batch. */
        st = infer_at(&r, r.s, d);
        *changed = true;
    } else {
        for (size_t i = 0; i < r.n_inputs; i++)
            cp_graph_tensor(g, r.inputs[i])->shape.dims[0] = r.saved[i];
        cp_batch_forget_intermediates(g);
        st = cp_graph_infer(g, d);
    }
    if (st == CP_OK && r.n_rewritten)
        cp_log_msg(log, CP_LOG_INFO,
                   "DynamicBatchPass: exported at batch %lld; %zu shape constant%s now follow "
                   "the batch",
                   (long long)r.s, r.n_rewritten, r.n_rewritten == 1 ? "" : "s");
out_free:
    free(r.inputs);
    free(r.saved);
    free(r.at_s);
    free(r.at_p);
    return st;
}

static enum cp_status dynamic_batch_run(struct cp_pass_ctx *ctx, bool *changed)
{
    return cp_batch_generalise(ctx->g, ctx->config, true, ctx->log, changed, ctx->d);
}

const struct cp_pass cp_batch_passes[] = {
    {"DynamicBatchPass", "GraphFusion",
     "with --dynamic_batch_size, make Reshape/Expand shape constants that hard-code the "
     "exported batch follow the batch",
     dynamic_batch_run},
    {NULL, NULL, NULL, NULL},
};
