/* ConstantFoldingPass: a node whose outputs are known at conversion time
 * becomes initializers, and the node goes.
 *
 * Two ways to know an output:
 *  - shape inference already computed its value (tensor->value: the small
 *    integer tensors of the Shape -> Gather -> Unsqueeze -> Concat chains
 *    PyTorch exports; the Shape's input need not be constant, only its
 *    shape);
 *  - every input is an initializer, and the evaluator (cleanup_eval.c)
 *    handles the op: transposed, reshaped or cast weights, arithmetic on
 *    constants.
 *
 * The output tensor keeps its name and index and turns into an initializer
 * in place, so consumers need no rewiring. Nodes are visited in topological
 * order, so a whole constant chain folds in one run. Folding never grows
 * the model much: an output larger than 1 MiB is folded only when it is no
 * larger than the constant inputs it replaces (an Expand or
 * ConstantOfShape that would bake in megabytes stays a node). Graph outputs
 * are never folded: they stay produced by a node.
 *
 * The batch stays free. The runtime can run a model converted at batch S
 * at another batch (`run --batch B` sets dimension 0 of the inputs), so a
 * known value that depends on the batch must not be baked in: Reshape(x,
 * [S, -1]) would silently become [S, B*.../S] at batch B. A probe infers a
 * copy of the graph at batch 2S; a value that differs there is folded only
 * as a Reshape target whose batch entries are 0 ("copy the input's
 * dimension", which follows the batch), and otherwise stays computed. A
 * graph the probe cannot infer at 2S does not run at another batch at all
 * (its constants hard-code the batch), so everything known folds. With a
 * dynamic batch dimension (--dynamic_batch_size) such values are not known
 * in the first place. */
#include "om/om.h"
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <stdlib.h>
#include <string.h>

#define FOLD_FREE_BYTES ((size_t)1 << 20)

/* An initializer the evaluator can read: it has data, or it is empty. */
static bool is_const(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(g, t);
    return T && T->kind == CP_TENSOR_INITIALIZER && (T->data || cp_shape_numel(&T->shape) == 0);
}

static bool output_foldable(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(g, t);
    return T && T->kind == CP_TENSOR_INTERMEDIATE && T->dtype != CP_DTYPE_UNDEFINED &&
           cp_dtype_size(T->dtype) > 0 && cp_shape_is_static(&T->shape) &&
           cp_shape_numel(&T->shape) >= 0 && !cp_rw_is_graph_output(g, t);
}

/* `v[0..n)` as the bytes of a tensor of t's dtype (i64, i32 or bool). */
static bool ints_bytes(const struct cp_tensor *t, const int64_t *v, int64_t n, void **data,
                       size_t *nbytes)
{
    size_t es = cp_dtype_size(t->dtype);
    if (t->dtype != CP_DTYPE_I64 && t->dtype != CP_DTYPE_I32 && t->dtype != CP_DTYPE_BOOL)
        return false;
    void *p = malloc(n ? (size_t)n * es : 1);
    if (!p)
        return false;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == CP_DTYPE_I64)
            ((int64_t *)p)[i] = v[i];
        else if (t->dtype == CP_DTYPE_I32)
            ((int32_t *)p)[i] = (int32_t)v[i];
        else
            ((uint8_t *)p)[i] = v[i] != 0;
    }
    *data = p;
    *nbytes = (size_t)n * es;
    return true;
}

static bool value_known(const struct cp_tensor *t)
{
    int64_t n = cp_shape_numel(&t->shape);
    return t->value && n >= 0 && t->value_len == n;
}

/* ---- the batch probe ----------------------------------------------------------------- */

/* Values and shapes of every tensor with the inputs' batch doubled. */
struct probe {
    bool active;   /* the batch can change at run time: compare */
    size_t n;      /* tensors */
    int64_t **val; /* value at the doubled batch (malloc'ed), NULL if unknown */
    int64_t *len;  /* its length */
    struct cp_shape *shape;
};

static void probe_release(struct probe *p)
{
    for (size_t i = 0; p->val && i < p->n; i++)
        free(p->val[i]);
    free(p->val);
    free(p->len);
    free(p->shape);
    memset(p, 0, sizeof *p);
}

/* Whether the runtime may run g at another batch by setting every input's
 * dimension 0 (no input has a dynamic one), and some known value could
 * depend on it. */
static bool probe_needed(const struct cp_graph *g)
{
    bool batched = false;
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        if (t->kind != CP_TENSOR_INPUT || t->shape.rank < 1)
            continue;
        if (t->shape.dims[0].value < 0)
            return false;
        batched = true;
    }
    if (!batched)
        return false;
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (t->kind == CP_TENSOR_INTERMEDIATE && t->value)
            return true;
    }
    return false;
}

/* Infer a copy of g (through the .om form, which keeps tensor indices) at
 * twice the batch. A copy that cannot be made leaves values unknown,
 * which only means less gets folded; one that cannot be inferred turns the
 * probe off (above). */
static enum cp_status probe_run(const struct cp_graph *g, struct probe *p)
{
    memset(p, 0, sizeof *p);
    if (!probe_needed(g))
        return CP_OK;
    p->active = true;
    p->n = cp_graph_n_tensors(g);
    p->val = cp_calloc(p->n + 1, sizeof *p->val);
    p->len = cp_calloc(p->n + 1, sizeof *p->len);
    p->shape = cp_calloc(p->n + 1, sizeof *p->shape);
    if (!p->val || !p->len || !p->shape) {
        probe_release(p);
        return CP_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->n; i++)
        cp_shape_set_unknown(&p->shape[i]);
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.source_path = (char *)"";
    meta.source_hash = (char *)"";
    meta.target = (char *)"cpu";
    cp_convert_config_init(&meta.config);
    uint8_t *bytes = NULL;
    size_t len = 0;
    struct cp_graph *copy = NULL;
    if (cp_om_write_buffer(g, &meta, &bytes, &len, NULL) != CP_OK ||
        cp_om_read_buffer(bytes, len, "batch probe", &copy, NULL, NULL) != CP_OK ||
        cp_graph_n_tensors(copy) != p->n)
        goto out;
    for (size_t i = 0; i < cp_graph_n_inputs(copy); i++) {
        struct cp_tensor *t = cp_graph_tensor(copy, cp_graph_input(copy, i));
        if (t->kind == CP_TENSOR_INPUT && t->shape.rank >= 1) {
            t->shape.dims[0].value *= 2;
            t->shape.dims[0].sym = NULL;
        }
    }
    for (size_t i = 0; i < p->n; i++) {
        struct cp_tensor *t = cp_graph_tensor(copy, (int32_t)i);
        if (t->kind == CP_TENSOR_INTERMEDIATE) {
            cp_shape_set_unknown(&t->shape);
            t->value = NULL;
            t->value_len = 0;
        }
    }
    /* Inference that stops at a node which cannot take the doubled batch
     * (a Reshape to a constant [1, 2, 24, 8, 8], as ShuffleNet's channel
     * shuffle is exported) says the model runs at its own batch only:
     * then no value depends on the batch, and everything known folds. */
    if (cp_graph_infer(copy, NULL) != CP_OK) {
        p->active = false;
        goto out;
    }
    for (size_t i = 0; i < p->n; i++) {
        const struct cp_tensor *t = cp_graph_tensor(copy, (int32_t)i);
        p->shape[i] = t->shape;
        for (int k = 0; k < t->shape.rank; k++)
            p->shape[i].dims[k].sym = NULL; /* the copy's arena goes */
        if (!t->value || t->value_len < 0)
            continue;
        p->val[i] = malloc((size_t)(t->value_len ? t->value_len : 1) * sizeof *t->value);
        if (!p->val[i])
            continue;
        if (t->value_len)
            memcpy(p->val[i], t->value, (size_t)t->value_len * sizeof *t->value);
        p->len[i] = t->value_len;
    }
out:
    cp_graph_free(copy);
    free(bytes);
    return CP_OK;
}

/* Whether t's value is the same at the doubled batch. */
static bool batch_free(const struct probe *p, const struct cp_tensor *t, int32_t ti)
{
    if (!p->active)
        return true;
    return p->val[ti] && p->len[ti] == t->value_len &&
           memcmp(p->val[ti], t->value, (size_t)t->value_len * sizeof *t->value) == 0;
}

/* A batch-dependent Reshape target: fold it with 0 where it repeats the
 * data input's dimension at both batches, so the entry keeps following the
 * batch. Every reader must be a Reshape (allowzero 0) reading t as its
 * target. */
static bool reshape_target_bytes(const struct cp_graph *g, const struct probe *p, int32_t ti,
                                 void **data, size_t *nbytes)
{
    const struct cp_tensor *t = cp_graph_tensor(g, ti);
    int64_t n = t->value_len;
    if (t->dtype != CP_DTYPE_I64 || !p->val[ti] || p->len[ti] != n || n > CP_MAX_RANK)
        return false;
    int64_t v[CP_MAX_RANK];
    memcpy(v, t->value, (size_t)n * sizeof *v);
    size_t readers = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *r = cp_graph_node(g, (int32_t)i);
        bool reads = false;
        for (size_t k = 0; !r->dead && k < r->n_inputs; k++)
            reads |= r->inputs[k] == ti;
        if (!reads)
            continue;
        if (r->op != CP_OP_RESHAPE || r->n_inputs != 2 || r->inputs[0] == ti ||
            cp_node_attr_int(r, "allowzero", 0) != 0)
            return false;
        const struct cp_shape *s = &cp_graph_tensor(g, r->inputs[0])->shape;
        const struct cp_shape *sp = &p->shape[r->inputs[0]];
        for (int64_t j = 0; j < n; j++) {
            if (t->value[j] == p->val[ti][j])
                continue;
            if (j >= s->rank || j >= sp->rank || s->dims[j].value != t->value[j] ||
                sp->dims[j].value != p->val[ti][j])
                return false;
            v[j] = 0;
        }
        readers++;
    }
    return readers > 0 && ints_bytes(t, v, n, data, nbytes);
}

/* The bytes to fold a value-known tensor to; false to keep it. */
static bool known_bytes(const struct cp_graph *g, const struct probe *p, int32_t ti, void **data,
                        size_t *nbytes)
{
    const struct cp_tensor *t = cp_graph_tensor(g, ti);
    if (!value_known(t))
        return false;
    if (batch_free(p, t, ti))
        return ints_bytes(t, t->value, t->value_len, data, nbytes);
    return reshape_target_bytes(g, p, ti, data, nbytes);
}

/* Whether evaluating the node is allowed: constant inputs (at least one),
 * and an output that does not bloat the model. */
static bool eval_allowed(const struct cp_graph *g, const struct cp_node *n)
{
    size_t in_bytes = 0, present = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] < 0)
            continue;
        if (!is_const(g, n->inputs[i]))
            return false;
        in_bytes += cp_graph_tensor(g, n->inputs[i])->nbytes;
        present++;
    }
    if (!present)
        return false;
    size_t out_bytes = 0;
    for (size_t i = 0; i < n->n_outputs; i++) {
        if (n->outputs[i] < 0)
            continue;
        const struct cp_tensor *t = cp_graph_tensor(g, n->outputs[i]);
        size_t nb;
        if (!cp_shape_nbytes(&t->shape, t->dtype, &nb) || nb > SIZE_MAX - out_bytes)
            return false;
        out_bytes += nb;
    }
    return out_bytes <= FOLD_FREE_BYTES || out_bytes <= in_bytes;
}

/* Fold node i if it can be. OUT: *folded. */
static enum cp_status fold_node(struct cp_pass_ctx *ctx, const struct probe *probe, int32_t i,
                                bool *folded)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *n = cp_graph_node(g, i);
    *folded = false;
    size_t no = n->n_outputs, present = 0;
    for (size_t k = 0; k < no; k++) {
        if (n->outputs[k] < 0)
            continue;
        if (!output_foldable(g, n->outputs[k]))
            return CP_OK;
        present++;
    }
    if (!present || no > 16)
        return CP_OK;
    void *data[16] = {NULL};
    size_t nbytes[16] = {0};
    bool known = !ctx->in_subgraph;
    for (size_t k = 0; k < no && known; k++)
        if (n->outputs[k] >= 0)
            known = known_bytes(g, probe, n->outputs[k], &data[k], &nbytes[k]);
    if (!known) {
        for (size_t k = 0; k < no; k++) {
            free(data[k]);
            data[k] = NULL;
        }
        if (!eval_allowed(g, n) || !cp_fold_eval(g, n, data, nbytes))
            return CP_OK;
    }
    cp_rw_kill(g, i);
    enum cp_status st = CP_OK;
    for (size_t k = 0; k < no; k++) {
        if (n->outputs[k] < 0)
            continue;
        struct cp_tensor *t = cp_graph_tensor(g, n->outputs[k]);
        if (st != CP_OK) {
            free(data[k]);
            continue;
        }
        t->kind = CP_TENSOR_INITIALIZER;
        t->producer = -1;
        /* Inference reads the value back from the data (which may now
         * hold 0 for a batch entry). */
        t->value = NULL;
        t->value_len = 0;
        st = cp_graph_set_data(g, n->outputs[k], data[k], nbytes[k], CP_DATA_HEAP, ctx->d);
    }
    if (st == CP_OK)
        *folded = true;
    return st;
}

enum cp_status cp_cleanup_constant_folding(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    *changed = false;
    struct probe probe;
    memset(&probe, 0, sizeof probe);
    if (!ctx->in_subgraph && probe_run(g, &probe) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory folding constants");
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < cp_graph_n_nodes(g) && st == CP_OK; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead || n->op == CP_OP_UNKNOWN || cp_op_is_own(n->op))
            continue;
        bool folded;
        st = fold_node(ctx, &probe, (int32_t)i, &folded);
        if (st != CP_OK)
            break;
        if (folded) {
            *changed = true;
            cp_log_msg(ctx->log, CP_LOG_DEBUG, "ConstantFoldingPass: folded node '%s' (%s)",
                       n->name, n->op_type);
        }
    }
    probe_release(&probe);
    /* An If on a constant condition becomes the branch it takes. */
    bool inlined = false;
    if (st == CP_OK && (st = cp_control_fold_if(ctx, &inlined)) == CP_OK && inlined)
        *changed = true;
    return st;
}
