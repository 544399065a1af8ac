/* Dynamic plans: models whose shapes depend on data known only at run time
 * (a detector's resize to the image's own size, the boxes NonZero or
 * NonMaxSuppression keeps, an If on whether any box is left).
 *
 * A static plan fixes every shape, buffer and kernel when it is built. When
 * inference leaves a shape open, plan.c builds this instead, as ONNX
 * Runtime does for such models: each run infers the nodes one at a time in
 * topological order with the values already computed in that run
 * (cp_graph_infer_open), so Reshape's shape, Resize's sizes and NonZero's
 * count come out concrete; then the node runs.
 *
 * - Buffers: one per tensor, kept between runs and grown when a run needs
 *   more, so kernels prepared for a shape keep their pointers. Nothing is
 *   shared between tensors; the total counts against the plan memory
 *   limit.
 * - Kernels: chosen and prepared for the shapes of the first run that
 *   reaches them, and again only when a node's shapes or buffers change.
 *   Runs with the same input therefore prepare nothing.
 * - NonMaxSuppression: its output is sized for the most rows the inputs
 *   allow, and the kernel reports how many it wrote (cp_kexec.rows).
 * - If: the taken branch runs as a nested dynamic plan, and the node's
 *   outputs take the branch's shapes.
 * - Loop: the body runs as a nested dynamic plan per iteration, so its
 *   shapes may change from one iteration to the next; carried values may
 *   change shape, and scan outputs are stacked (each iteration's must have
 *   the same shape).
 * - Scan whose shapes change at run time is refused, naming the node, as
 *   in static plans.
 *
 * Running a dynamic plan allocates when shapes change; a static plan
 * never does. */
#include "graph/op_eval.h"
#include "runner/cpu/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A control-flow node's subgraphs as nested dynamic plans, made when first
 * run: If's two branches, or Loop's body (branch[0]). */
struct dyn_if {
    struct cp_plan *branch[2];
};

/* A Loop's carried values between iterations: two sets of buffers, the one
 * the body reads and the one its outputs are copied to. */
struct carried {
    enum cp_dtype dtype;
    struct cp_shape shape;
    void *buf[2];
    size_t cap[2];
};

struct cp_dyn {
    int32_t *order; /* node indices, topological */
    bool *is_view;  /* per position */
    int32_t *kx_at; /* per position: kernel instance, -1 for views */
    size_t n;
    size_t nt;               /* tensors */
    enum cp_dtype *dtype0;   /* per tensor: dtype after planning */
    struct cp_shape *shape0; /* per tensor: shape after planning */
    const void **run_data;   /* per tensor: bytes inference may read this run */
    void **buf;              /* per tensor: owned storage */
    size_t *cap;
    uint64_t bytes; /* sum of cap */
    /* Per kernel instance: prepared, and for which shapes and pointers. */
    bool *ready;
    struct cp_shape *seen; /* n_io entries, as the io pools */
    void **seen_data;
    struct dyn_if *ifs; /* per kernel instance (If nodes only) */
    size_t n_io;
};

static size_t align64(size_t x)
{
    return (x + (CP_MEM_ALIGN - 1)) & ~(size_t)(CP_MEM_ALIGN - 1);
}

static enum cp_status oom(const struct cp_plan *p, struct cp_diag *d)
{
    return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory running a dynamic plan", p->m->name);
}

/* ---- storage ------------------------------------------------------------------ */

/* Storage of at least `bytes` for tensor t, kept when it is big enough. */
static enum cp_status ensure(struct cp_plan *p, int32_t t, uint64_t bytes, struct cp_diag *d)
{
    struct cp_dyn *y = p->dyn;
    if (y->buf[t] && y->cap[t] >= bytes)
        return CP_OK;
    uint64_t want = align64(bytes ? (size_t)bytes : 1);
    uint64_t total = y->bytes - y->cap[t] + want;
    if (bytes > SIZE_MAX / 2 || total > p->rt->max_plan_bytes) {
        char need[32], lim[32];
        cp_format_bytes(total, need);
        cp_format_bytes(p->rt->max_plan_bytes, lim);
        const struct cp_tensor *T = cp_graph_tensor(p->g, t);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: tensor '%s' brings the dynamic plan's memory to %s, more than "
                           "the limit of %s (set %s to change it)",
                           p->m->name, T->name, need, lim, CP_MAX_PLAN_BYTES_ENV);
    }
    void *nb = NULL;
    if (posix_memalign(&nb, CP_MEM_ALIGN, (size_t)want) != 0)
        return oom(p, d);
    memset(nb, 0, (size_t)want);
    free(y->buf[t]);
    y->buf[t] = nb;
    y->bytes = total;
    y->cap[t] = (size_t)want;
    p->ptr[t] = nb;
    return CP_OK;
}

/* ---- building ---------------------------------------------------------------- */

static enum cp_status init_kernels(struct cp_plan *p, struct cp_diag *d)
{
    struct cp_dyn *y = p->dyn;
    size_t n_io = 0;
    for (size_t k = 0; k < y->n; k++) {
        y->kx_at[k] = -1;
        if (y->is_view[k])
            continue;
        const struct cp_node *node = cp_graph_node(p->g, y->order[k]);
        n_io += node->n_inputs + node->n_outputs;
        y->kx_at[k] = (int32_t)p->n_kx++;
    }
    y->n_io = n_io;
    p->kx = cp_calloc(p->n_kx + 1, sizeof *p->kx);
    p->io_tensors = cp_calloc(n_io + 1, sizeof *p->io_tensors);
    p->io_data = cp_calloc(n_io + 1, sizeof *p->io_data);
    y->ready = cp_calloc(p->n_kx + 1, sizeof *y->ready);
    y->ifs = cp_calloc(p->n_kx + 1, sizeof *y->ifs);
    y->seen = cp_calloc(n_io + 1, sizeof *y->seen);
    y->seen_data = cp_calloc(n_io + 1, sizeof *y->seen_data);
    if (!p->kx || !p->io_tensors || !p->io_data || !y->ready || !y->ifs || !y->seen ||
        !y->seen_data)
        return oom(p, d);
    size_t io = 0;
    for (size_t k = 0; k < y->n; k++) {
        if (y->kx_at[k] < 0)
            continue;
        const struct cp_node *node = cp_graph_node(p->g, y->order[k]);
        struct cp_kexec *x = &p->kx[y->kx_at[k]];
        x->g = p->g;
        x->node = node;
        x->env = &p->rt->env;
        x->plan = p;
        /* Named in the trace until a run picks the kernel. */
        x->kernel = cp_kernel_reference(node->op);
        if (!x->kernel)
            return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: no kernel for node '%s' (%s)",
                               p->m->name, node->name, node->op_type);
        x->in = &p->io_tensors[io];
        x->in_data = &p->io_data[io];
        for (size_t j = 0; j < node->n_inputs; j++, io++)
            p->io_tensors[io] =
                node->inputs[j] >= 0 ? cp_graph_tensor(p->g, node->inputs[j]) : NULL;
        x->out = &p->io_tensors[io];
        x->out_data = &p->io_data[io];
        for (size_t j = 0; j < node->n_outputs; j++, io++)
            p->io_tensors[io] =
                node->outputs[j] >= 0 ? cp_graph_tensor(p->g, node->outputs[j]) : NULL;
    }
    return CP_OK;
}

/* Scan keeps a static plan of its body: its outputs must be known when
 * the plan is made. */
static enum cp_status check_loops(const struct cp_plan *p, struct cp_diag *d)
{
    const struct cp_dyn *y = p->dyn;
    for (size_t k = 0; k < y->n; k++) {
        const struct cp_node *n = cp_graph_node(p->g, y->order[k]);
        if (n->op != CP_OP_SCAN)
            continue;
        for (size_t j = 0; j < n->n_outputs; j++) {
            const struct cp_tensor *T = cp_graph_tensor(p->g, n->outputs[j]);
            if (!T || cp_shape_is_static(&T->shape))
                continue;
            char s[96];
            cp_shape_format(&T->shape, s, sizeof s);
            return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                               "%s: node '%s' (%s): output '%s' has shape %s, which depends on "
                               "data known only at run time; cannprof runs Scan with static "
                               "shapes only",
                               p->m->name, n->name, n->op_type, T->name, s);
        }
    }
    return CP_OK;
}

enum cp_status cp_plan_build_dynamic(struct cp_plan *p, int32_t *order, bool *is_view, size_t n,
                                     struct cp_diag *d)
{
    struct cp_dyn *y = cp_calloc(1, sizeof *y);
    if (!y) {
        free(order);
        free(is_view);
        return oom(p, d);
    }
    p->dyn = y;
    y->order = order;
    y->is_view = is_view;
    y->n = n;
    y->nt = cp_graph_n_tensors(p->g);
    y->kx_at = cp_calloc(n + 1, sizeof *y->kx_at);
    y->dtype0 = cp_calloc(y->nt + 1, sizeof *y->dtype0);
    y->shape0 = cp_calloc(y->nt + 1, sizeof *y->shape0);
    y->run_data = cp_calloc(y->nt + 1, sizeof *y->run_data);
    y->buf = cp_calloc(y->nt + 1, sizeof *y->buf);
    y->cap = cp_calloc(y->nt + 1, sizeof *y->cap);
    p->ptr = cp_calloc(y->nt + 1, sizeof *p->ptr);
    if (!y->kx_at || !y->dtype0 || !y->shape0 || !y->run_data || !y->buf || !y->cap || !p->ptr)
        return oom(p, d);
    enum cp_status st = check_loops(p, d);
    if (st != CP_OK)
        return st;
    for (size_t t = 0; t < y->nt; t++) {
        const struct cp_tensor *T = cp_graph_tensor(p->g, (int32_t)t);
        y->dtype0[t] = T->dtype;
        y->shape0[t] = T->shape;
        if (T->kind == CP_TENSOR_INITIALIZER)
            p->ptr[t] = (void *)T->data;
    }
    /* Graph inputs: their shapes are fixed by the plan (top level) or set
     * by the control-flow node before each run (nested). */
    if (!p->nested)
        for (size_t i = 0; i < cp_graph_n_inputs(p->g); i++) {
            int32_t t = cp_graph_input(p->g, i);
            const struct cp_tensor *T = cp_graph_tensor(p->g, t);
            if (T->kind == CP_TENSOR_INITIALIZER)
                continue;
            if (T->dtype == CP_DTYPE_UNDEFINED || !cp_shape_is_static(&T->shape)) {
                char s[96];
                cp_shape_format(&T->shape, s, sizeof s);
                return cp_diag_set(d, CP_ERR_INVALID, "%s: input '%s' has shape %s", p->m->name,
                                   T->name, s);
            }
            if ((st = ensure(p, t, cp_memplan_tensor_bytes(T), d)) != CP_OK)
                return st;
        }
    return init_kernels(p, d);
}

void cp_plan_free_dynamic(struct cp_plan *p)
{
    struct cp_dyn *y = p->dyn;
    if (!y)
        return;
    for (size_t i = 0; i < p->n_kx && y->ready; i++) {
        if (y->ready[i] && p->kx[i].kernel->release)
            p->kx[i].kernel->release(&p->kx[i]);
        for (int b = 0; y->ifs && b < 2; b++)
            cp_plan_free(y->ifs[i].branch[b]);
    }
    for (size_t t = 0; y->buf && t < y->nt; t++)
        free(y->buf[t]);
    free(y->order);
    free(y->is_view);
    free(y->kx_at);
    free(y->dtype0);
    free(y->shape0);
    free(y->run_data);
    free(y->buf);
    free(y->cap);
    free(y->ready);
    free(y->seen);
    free(y->seen_data);
    free(y->ifs);
    free(y);
    p->dyn = NULL;
}

uint64_t cp_plan_dynamic_bytes(const struct cp_plan *p)
{
    return p->dyn ? p->dyn->bytes : 0;
}

/* ---- running -------------------------------------------------------------------- */

static enum cp_status not_known(const struct cp_plan *p, const struct cp_node *n, size_t i,
                                const struct cp_tensor *T, struct cp_diag *d)
{
    char s[96];
    cp_shape_format(&T->shape, s, sizeof s);
    return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                       "%s: node '%s' (%s): output %zu '%s' has shape %s and dtype %s even with "
                       "the run's values known; no kernel can size it",
                       p->m->name, n->name, n->op_type, i, T->name, s, cp_dtype_name(T->dtype));
}

/* NonMaxSuppression's most rows: batches x classes x min(max per class,
 * boxes). Its kernel writes how many it kept into x->rows. */
static bool nms_bound(const struct cp_plan *p, const struct cp_node *n, int64_t *rows)
{
    const struct cp_tensor *b = cp_graph_tensor(p->g, n->inputs[0]);
    const struct cp_tensor *s = cp_graph_tensor(p->g, n->inputs[1]);
    if (b->shape.rank != 3 || s->shape.rank != 3 || !cp_shape_is_static(&b->shape) ||
        !cp_shape_is_static(&s->shape))
        return false;
    int64_t max_out = 0;
    if (n->n_inputs > 2 && n->inputs[2] >= 0) {
        const struct cp_tensor *m = cp_graph_tensor(p->g, n->inputs[2]);
        const void *md = p->ptr[n->inputs[2]];
        if (m->dtype != CP_DTYPE_I64 || cp_shape_numel(&m->shape) != 1 || !md)
            return false;
        memcpy(&max_out, md, sizeof max_out);
    }
    int64_t nbox = b->shape.dims[1].value, per = max_out < nbox ? max_out : nbox;
    if (per < 0)
        per = 0;
    *rows = b->shape.dims[0].value * s->shape.dims[1].value * per;
    return true;
}

static bool same_io(const struct cp_dyn *y, const struct cp_kexec *x, size_t base)
{
    size_t nio = x->node->n_inputs + x->node->n_outputs;
    for (size_t j = 0; j < nio; j++) {
        const struct cp_tensor *T = x->in[j]; /* in and out are adjacent in the pool */
        if ((T && !cp_shape_equal(&T->shape, &y->seen[base + j])) ||
            x->in_data[j] != y->seen_data[base + j])
            return false;
    }
    return true;
}

static void remember_io(struct cp_dyn *y, const struct cp_kexec *x, size_t base)
{
    size_t nio = x->node->n_inputs + x->node->n_outputs;
    for (size_t j = 0; j < nio; j++) {
        if (x->in[j])
            y->seen[base + j] = x->in[j]->shape;
        y->seen_data[base + j] = x->in_data[j];
    }
}

/* Choose and prepare the kernel for the node's shapes of this run. */
static enum cp_status prepare(struct cp_plan *p, size_t ki, struct cp_diag *d)
{
    struct cp_dyn *y = p->dyn;
    struct cp_kexec *x = &p->kx[ki];
    size_t base = (size_t)(x->in - p->io_tensors);
    if (y->ready[ki] && same_io(y, x, base))
        return CP_OK;
    if (y->ready[ki] && x->kernel->release)
        x->kernel->release(x);
    y->ready[ki] = false;
    x->state = NULL;
    x->scratch_bytes = 0;
    struct cp_kernel_passed passed;
    const struct cp_kernel *k =
        cp_kernel_select(p->g, x->node, &p->rt->host, p->reference_only, &passed);
    if (!k || (k->supports && !k->supports(p->g, x->node)))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: node '%s' (%s): no kernel supports it with the shapes of this run",
                           p->m->name, x->node->name, x->node->op_type);
    x->kernel = k;
    if (p->ktab)
        p->ktab[ki].impl = k->name;
    if (k->prepare) {
        struct cp_diag local;
        cp_diag_init(&local);
        enum cp_status st = k->prepare(x, &local);
        if (st != CP_OK)
            return cp_diag_set(d, st, "%s: node '%s' (%s), kernel %s: %s", p->m->name,
                               x->node->name, x->node->op_type, k->name,
                               local.msg[0] ? local.msg : cp_status_str(st));
    }
    y->ready[ki] = true;
    remember_io(y, x, base);
    if (x->scratch_bytes > p->scratch_bytes) {
        void *s = NULL;
        size_t want = align64(x->scratch_bytes);
        if (posix_memalign(&s, CP_MEM_ALIGN, want) != 0)
            return oom(p, d);
        free(p->scratch);
        p->scratch = s;
        p->scratch_bytes = want;
    }
    return CP_OK;
}

static enum cp_status run_if(struct cp_plan *p, size_t ki, int32_t iteration, struct cp_diag *d);
static enum cp_status run_loop(struct cp_plan *p, size_t ki, int32_t iteration, struct cp_diag *d);

static enum cp_status run_node(struct cp_plan *p, size_t pos, int32_t iteration, struct cp_diag *d)
{
    struct cp_dyn *y = p->dyn;
    struct cp_node *n = cp_graph_node(p->g, y->order[pos]);
    if (y->is_view[pos]) {
        int32_t in = n->inputs[0], out = n->outputs[0];
        p->ptr[out] = p->ptr[in];
        y->run_data[out] = p->ptr[out];
        return CP_OK;
    }
    size_t ki = (size_t)y->kx_at[pos];
    struct cp_kexec *x = &p->kx[ki];
    if (n->op == CP_OP_IF)
        return run_if(p, ki, iteration, d);
    if (n->op == CP_OP_LOOP)
        return run_loop(p, ki, iteration, d);
    bool upto = false;
    for (size_t j = 0; j < n->n_outputs; j++) {
        struct cp_tensor *T = n->outputs[j] >= 0 ? cp_graph_tensor(p->g, n->outputs[j]) : NULL;
        if (!T || (cp_shape_is_static(&T->shape) && T->dtype != CP_DTYPE_UNDEFINED))
            continue;
        int64_t rows;
        if (n->op == CP_OP_NON_MAX_SUPPRESSION && j == 0 && T->shape.rank == 2 &&
            nms_bound(p, n, &rows)) {
            T->shape.dims[0].value = rows;
            T->shape.dims[0].sym = NULL;
            upto = true;
            continue;
        }
        return not_known(p, n, j, T, d);
    }
    for (size_t j = 0; j < n->n_inputs; j++)
        x->in_data[j] = n->inputs[j] >= 0 ? p->ptr[n->inputs[j]] : NULL;
    for (size_t j = 0; j < n->n_outputs; j++) {
        int32_t t = n->outputs[j];
        if (t < 0)
            continue;
        enum cp_status st = ensure(p, t, cp_memplan_tensor_bytes(cp_graph_tensor(p->g, t)), d);
        if (st != CP_OK)
            return st;
        x->out_data[j] = p->ptr[t];
    }
    enum cp_status st = prepare(p, ki, d);
    if (st != CP_OK)
        return st;
    x->scratch = p->scratch;
    x->rows = upto ? &x->rows_kept : NULL;
    struct cp_trace_recorder *tr = cp_rt_recording(p->rt);
    uint64_t ks = tr ? cp_clock_ns() : 0;
    st = x->kernel->run(x);
    if (tr && p->kname)
        cp_trace_record(tr, CP_LAYER_DEVICE, p->kname[ki], (int32_t)ki, iteration, ks,
                        cp_clock_ns(), p->rt->trace_thread);
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s: node '%s' (%s): kernel %s failed (%s)", p->m->name, n->name,
                           n->op_type, x->kernel->name, cp_status_str(st));
    if (upto) {
        struct cp_tensor *T = cp_graph_tensor(p->g, n->outputs[0]);
        T->shape.dims[0].value = x->rows_kept;
    }
    x->rows = NULL;
    for (size_t j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0)
            y->run_data[n->outputs[j]] = p->ptr[n->outputs[j]];
    return CP_OK;
}

/* Forget the last run: intermediate shapes are inferred afresh. */
static void reset(struct cp_plan *p)
{
    struct cp_dyn *y = p->dyn;
    for (size_t t = 0; t < y->nt; t++) {
        struct cp_tensor *T = cp_graph_tensor(p->g, (int32_t)t);
        if (T->kind != CP_TENSOR_INTERMEDIATE) {
            y->run_data[t] = p->ptr[t];
            continue;
        }
        y->run_data[t] = NULL;
        T->dtype = y->dtype0[t];
        cp_shape_set_unknown(&T->shape);
    }
}

enum cp_status cp_plan_run_dynamic(struct cp_plan *p, int32_t iteration, struct cp_diag *d)
{
    struct cp_dyn *y = p->dyn;
    reset(p);
    struct cp_infer_steps *steps = NULL;
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_infer_open(p->g, y->run_data, &steps, &local);
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s: %s", p->m->name, local.msg);
    for (size_t k = 0; k < y->n && st == CP_OK; k++) {
        struct cp_node *n = cp_graph_node(p->g, y->order[k]);
        st = cp_graph_infer_node(steps, n);
        if (st != CP_OK) {
            cp_diag_set(d, st, "%s: at run time: %s", p->m->name, local.msg);
            break;
        }
        st = run_node(p, k, iteration, d);
    }
    cp_graph_infer_close(steps);
    return st;
}

/* ---- If ------------------------------------------------------------------------- */

static struct cp_graph *branch_graph(const struct cp_node *n, int b)
{
    const struct cp_attr *a = cp_node_attr(n, b == 0 ? "then_branch" : "else_branch");
    return a && a->type == CP_ATTR_GRAPH ? a->graph : NULL;
}

static enum cp_status make_branch(struct cp_plan *parent, struct cp_graph *sub,
                                  struct cp_plan **out, struct cp_diag *d)
{
    struct cp_plan *p = calloc(1, sizeof *p);
    if (!p)
        return oom(parent, d);
    p->m = parent->m;
    p->rt = parent->rt;
    p->g = sub;
    p->nested = true;
    p->reference_only = parent->reference_only;
    int32_t *order = NULL;
    size_t n = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_topo_order(sub, &order, &n, &local);
    bool *is_view = st == CP_OK ? cp_calloc(n + 1, sizeof *is_view) : NULL;
    if (st != CP_OK || !is_view) {
        free(order);
        free(p);
        return st != CP_OK ? cp_diag_set(d, st, "%s: %s", parent->m->name, local.msg)
                           : oom(parent, d);
    }
    if (cp_plan_mark_views(sub, order, n, is_view) != CP_OK) {
        free(order);
        free(is_view);
        free(p);
        return oom(parent, d);
    }
    st = cp_plan_build_dynamic(p, order, is_view, n, d);
    if (st != CP_OK) {
        cp_plan_free(p);
        return st;
    }
    *out = p;
    return CP_OK;
}

/* Outer-scope references of subgraph `sub` (plan bp): the parent's
 * tensors, with their shapes and bytes. */
static enum cp_status bind_outer(struct cp_plan *p, const struct cp_node *n, struct cp_graph *sub,
                                 struct cp_plan *bp, struct cp_diag *d)
{
    for (size_t i = 0; i < cp_graph_n_outer(sub); i++) {
        int32_t t = cp_graph_outer(sub, i);
        int32_t slot = cp_control_outer_slot(p->g, n, sub, i);
        if (slot < 0 || n->inputs[slot] < 0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: node '%s' (%s): a subgraph reads a value the node does not "
                               "pass",
                               p->m->name, n->name, n->op_type);
        struct cp_tensor *T = cp_graph_tensor(sub, t);
        const struct cp_tensor *src = cp_graph_tensor(p->g, n->inputs[slot]);
        T->dtype = src->dtype;
        T->shape = src->shape;
        bp->ptr[t] = p->ptr[n->inputs[slot]];
    }
    return CP_OK;
}

static enum cp_status run_if(struct cp_plan *p, size_t ki, int32_t iteration, struct cp_diag *d)
{
    struct cp_kexec *x = &p->kx[ki];
    const struct cp_node *n = x->node;
    const struct cp_tensor *cond = cp_graph_tensor(p->g, n->inputs[0]);
    const void *cd = p->ptr[n->inputs[0]];
    if (!cd || cp_shape_numel(&cond->shape) != 1)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: node '%s' (If): the condition '%s' is not one "
                           "value",
                           p->m->name, n->name, cond->name);
    int b = cp_elem_load_f64(cd, cond->dtype, 0) != 0.0 ? 0 : 1;
    struct cp_graph *sub = branch_graph(n, b);
    if (!sub)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: node '%s' (If) has no %s", p->m->name, n->name,
                           b == 0 ? "then_branch" : "else_branch");
    struct dyn_if *f = &p->dyn->ifs[ki];
    enum cp_status st;
    if (!f->branch[b] && (st = make_branch(p, sub, &f->branch[b], d)) != CP_OK)
        return st;
    struct cp_plan *bp = f->branch[b];
    if ((st = bind_outer(p, n, sub, bp, d)) != CP_OK)
        return st;
    if ((st = cp_plan_run_dynamic(bp, iteration, d)) != CP_OK)
        return st;
    for (size_t j = 0; j < n->n_outputs; j++) {
        int32_t t = n->outputs[j];
        if (t < 0)
            continue;
        int32_t bt = cp_graph_output(sub, j);
        const struct cp_tensor *B = cp_graph_tensor(sub, bt);
        struct cp_tensor *T = cp_graph_tensor(p->g, t);
        T->dtype = B->dtype;
        T->shape = B->shape;
        uint64_t nb = cp_memplan_tensor_bytes(T);
        if ((st = ensure(p, t, nb, d)) != CP_OK)
            return st;
        if (nb && bp->ptr[bt])
            memcpy(p->ptr[t], bp->ptr[bt], (size_t)nb);
        p->dyn->run_data[t] = p->ptr[t];
    }
    return CP_OK;
}

/* ---- Loop ----------------------------------------------------------------------- */

static bool grow(void **buf, size_t *cap, size_t need)
{
    if (*buf && *cap >= need)
        return true;
    void *nb = NULL;
    size_t want = align64(need ? need : 1);
    if (posix_memalign(&nb, CP_MEM_ALIGN, want) != 0)
        return false;
    free(*buf);
    *buf = nb;
    *cap = want;
    return true;
}

static uint64_t shape_bytes(enum cp_dtype dt, const struct cp_shape *s)
{
    size_t nb = 0;
    return cp_shape_nbytes(s, dt, &nb) ? nb : 0;
}

struct loop_run {
    struct carried *cv; /* n carried values */
    size_t n;
    void **scan; /* k scan outputs: stacked bytes */
    size_t *scan_cap, *scan_len;
    struct cp_shape *scan_shape; /* one iteration's */
    size_t k;
};

static void loop_run_free(struct loop_run *r)
{
    for (size_t j = 0; r->cv && j < r->n; j++) {
        free(r->cv[j].buf[0]);
        free(r->cv[j].buf[1]);
    }
    for (size_t j = 0; r->scan && j < r->k; j++)
        free(r->scan[j]);
    free(r->cv);
    free(r->scan);
    free(r->scan_cap);
    free(r->scan_len);
    free(r->scan_shape);
}

/* Append one iteration's scan output j. */
static enum cp_status scan_append(struct cp_plan *p, const struct cp_node *n, struct loop_run *r,
                                  size_t j, int64_t it, const struct cp_tensor *B, const void *src,
                                  struct cp_diag *d)
{
    if (it == 0) {
        r->scan_shape[j] = B->shape;
    } else if (!cp_shape_equal(&r->scan_shape[j], &B->shape)) {
        char a[96], b[96];
        cp_shape_format(&r->scan_shape[j], a, sizeof a);
        cp_shape_format(&B->shape, b, sizeof b);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: node '%s' (Loop): scan output %zu has shape %s in iteration 0 but "
                           "%s in iteration %lld; ONNX stacks equal shapes only",
                           p->m->name, n->name, j, a, b, (long long)it);
    }
    size_t sz = (size_t)shape_bytes(B->dtype, &B->shape);
    if (!grow(&r->scan[j], &r->scan_cap[j],
              r->scan_len[j] + sz > r->scan_cap[j] ? 2 * (r->scan_len[j] + sz) : r->scan_cap[j]))
        return oom(p, d);
    if (sz && src)
        memcpy((char *)r->scan[j] + r->scan_len[j], src, sz);
    r->scan_len[j] += sz;
    return CP_OK;
}

static enum cp_status loop_iterate(struct cp_plan *p, const struct cp_node *n,
                                   struct cp_graph *body, struct cp_plan *bp, struct loop_run *r,
                                   int32_t iteration, int64_t *iters, struct cp_diag *d)
{
    int64_t m = INT64_MAX;
    bool cond = true;
    if (n->n_inputs > 0 && n->inputs[0] >= 0)
        m = cp_elem_load_i64(p->ptr[n->inputs[0]], cp_graph_tensor(p->g, n->inputs[0])->dtype, 0);
    if (n->n_inputs > 1 && n->inputs[1] >= 0)
        cond = cp_elem_load_i64(p->ptr[n->inputs[1]], cp_graph_tensor(p->g, n->inputs[1])->dtype,
                                0) != 0;
    int64_t it_val = 0;
    uint8_t cond_in = 1;
    int32_t it_t = cp_graph_input(body, 0), ci_t = cp_graph_input(body, 1);
    int cur = 0;
    enum cp_status st = CP_OK;
    int64_t it = 0;
    for (; it < m && cond; it++) {
        struct cp_tensor *IT = cp_graph_tensor(body, it_t), *CI = cp_graph_tensor(body, ci_t);
        it_val = it;
        if (IT->dtype != CP_DTYPE_I64 || (CI->dtype != CP_DTYPE_BOOL))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: node '%s' (Loop): the body's first inputs must be an int64 "
                               "iteration number and a bool condition",
                               p->m->name, n->name);
        cp_shape_set(&IT->shape, 0, NULL);
        cp_shape_set(&CI->shape, 0, NULL);
        bp->ptr[it_t] = &it_val;
        bp->ptr[ci_t] = &cond_in;
        for (size_t j = 0; j < r->n; j++) {
            struct cp_tensor *T = cp_graph_tensor(body, cp_graph_input(body, 2 + j));
            T->dtype = r->cv[j].dtype;
            T->shape = r->cv[j].shape;
            bp->ptr[cp_graph_input(body, 2 + j)] = r->cv[j].buf[cur];
        }
        if ((st = bind_outer(p, n, body, bp, d)) != CP_OK)
            return st;
        if ((st = cp_plan_run_dynamic(bp, iteration, d)) != CP_OK)
            return st;
        int32_t co = cp_graph_output(body, 0);
        cond = cp_elem_load_i64(bp->ptr[co], cp_graph_tensor(body, co)->dtype, 0) != 0;
        for (size_t j = 0; j < r->n; j++) {
            int32_t bo = cp_graph_output(body, 1 + j);
            const struct cp_tensor *B = cp_graph_tensor(body, bo);
            size_t sz = (size_t)shape_bytes(B->dtype, &B->shape);
            struct carried *c = &r->cv[j];
            if (!grow(&c->buf[1 - cur], &c->cap[1 - cur], sz))
                return oom(p, d);
            if (sz && bp->ptr[bo])
                memcpy(c->buf[1 - cur], bp->ptr[bo], sz);
            c->dtype = B->dtype;
            c->shape = B->shape;
        }
        cur = 1 - cur;
        for (size_t j = 0; j < r->k; j++) {
            int32_t bo = cp_graph_output(body, 1 + r->n + j);
            if ((st = scan_append(p, n, r, j, it, cp_graph_tensor(body, bo), bp->ptr[bo], d)) !=
                CP_OK)
                return st;
        }
    }
    /* The final carried values are in buf[cur]: make it buf[0]. */
    if (cur == 1)
        for (size_t j = 0; j < r->n; j++) {
            void *t = r->cv[j].buf[0];
            size_t c = r->cv[j].cap[0];
            r->cv[j].buf[0] = r->cv[j].buf[1];
            r->cv[j].cap[0] = r->cv[j].cap[1];
            r->cv[j].buf[1] = t;
            r->cv[j].cap[1] = c;
        }
    *iters = it;
    return CP_OK;
}

static enum cp_status loop_outputs(struct cp_plan *p, const struct cp_node *n,
                                   const struct cp_graph *body, struct loop_run *r, int64_t iters,
                                   struct cp_diag *d)
{
    enum cp_status st;
    for (size_t j = 0; j < r->n + r->k; j++) {
        int32_t t = j < n->n_outputs ? n->outputs[j] : -1;
        if (t < 0)
            continue;
        struct cp_tensor *T = cp_graph_tensor(p->g, t);
        const void *src;
        if (j < r->n) {
            T->dtype = r->cv[j].dtype;
            T->shape = r->cv[j].shape;
            src = r->cv[j].buf[0];
        } else {
            size_t s = j - r->n;
            const struct cp_tensor *B = cp_graph_tensor(body, cp_graph_output(body, 1 + j));
            /* No iteration: the shape planning gave the output, with 0 for
             * what it could not know. */
            struct cp_shape one = r->scan_shape[s];
            if (!iters) {
                const struct cp_shape *s0 = &p->dyn->shape0[t];
                one.rank = s0->rank > 0 ? s0->rank - 1 : -1;
                for (int q = 0; q < one.rank; q++) {
                    one.dims[q] = s0->dims[q + 1];
                    if (one.dims[q].value < 0)
                        one.dims[q].value = 0;
                }
            }
            if (one.rank < 0 || one.rank + 1 > CP_MAX_RANK)
                return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                                   "%s: node '%s' (Loop): scan output %zu has no stackable shape",
                                   p->m->name, n->name, s);
            T->dtype = B->dtype;
            T->shape.rank = one.rank + 1;
            T->shape.dims[0].value = iters;
            T->shape.dims[0].sym = NULL;
            for (int q = 0; q < one.rank; q++)
                T->shape.dims[q + 1] = one.dims[q];
            src = r->scan[s];
        }
        uint64_t nb = cp_memplan_tensor_bytes(T);
        if ((st = ensure(p, t, nb, d)) != CP_OK)
            return st;
        if (nb && src)
            memcpy(p->ptr[t], src, (size_t)nb);
        p->dyn->run_data[t] = p->ptr[t];
    }
    return CP_OK;
}

static enum cp_status run_loop(struct cp_plan *p, size_t ki, int32_t iteration, struct cp_diag *d)
{
    const struct cp_node *n = p->kx[ki].node;
    const struct cp_attr *a = cp_node_attr(n, "body");
    struct cp_graph *body = a && a->type == CP_ATTR_GRAPH ? a->graph : NULL;
    if (!body || cp_graph_n_inputs(body) < 2 || cp_graph_n_outputs(body) < 1 ||
        n->n_inputs < cp_graph_n_inputs(body) ||
        cp_graph_n_outputs(body) - 1 < cp_graph_n_inputs(body) - 2)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: node '%s' (Loop): its body's inputs and outputs do not match "
                           "the node's",
                           p->m->name, n->name);
    struct dyn_if *f = &p->dyn->ifs[ki];
    enum cp_status st;
    if (!f->branch[0] && (st = make_branch(p, body, &f->branch[0], d)) != CP_OK)
        return st;
    /* The node's inputs: M, cond, the carried values, then the outer-scope
     * references the importer added. */
    struct loop_run r = {.n = cp_graph_n_inputs(body) - 2};
    r.k = cp_graph_n_outputs(body) - 1 - r.n;
    r.cv = cp_calloc(r.n + 1, sizeof *r.cv);
    r.scan = cp_calloc(r.k + 1, sizeof *r.scan);
    r.scan_cap = cp_calloc(r.k + 1, sizeof *r.scan_cap);
    r.scan_len = cp_calloc(r.k + 1, sizeof *r.scan_len);
    r.scan_shape = cp_calloc(r.k + 1, sizeof *r.scan_shape);
    if (!r.cv || !r.scan || !r.scan_cap || !r.scan_len || !r.scan_shape) {
        loop_run_free(&r);
        return oom(p, d);
    }
    st = CP_OK;
    for (size_t j = 0; j < r.n && st == CP_OK; j++) {
        int32_t t = n->inputs[2 + j];
        const struct cp_tensor *T = t >= 0 ? cp_graph_tensor(p->g, t) : NULL;
        if (!T) {
            st =
                cp_diag_set(d, CP_ERR_INVALID, "%s: node '%s' (Loop): carried value %zu is missing",
                            p->m->name, n->name, j);
            break;
        }
        size_t sz = (size_t)cp_memplan_tensor_bytes(T);
        r.cv[j].dtype = T->dtype;
        r.cv[j].shape = T->shape;
        if (!grow(&r.cv[j].buf[0], &r.cv[j].cap[0], sz))
            st = oom(p, d);
        else if (sz && p->ptr[t])
            memcpy(r.cv[j].buf[0], p->ptr[t], sz);
    }
    int64_t iters = 0;
    if (st == CP_OK)
        st = loop_iterate(p, n, body, f->branch[0], &r, iteration, &iters, d);
    if (st == CP_OK)
        st = loop_outputs(p, n, body, &r, iters, d);
    loop_run_free(&r);
    return st;
}
