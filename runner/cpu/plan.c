/* Building a plan: everything that allocates happens here, so running it
 * allocates nothing.
 *
 * 1. A private graph read from the model's bytes (weights stay where they
 *    are), with concrete shapes (plan_shapes.c).
 * 2. The execution order; view nodes (Reshape and friends) run no kernel
 *    and alias their input's storage.
 * 3. Memory: liveness and placement (memplan.c), one arena allocated and
 *    zeroed once; every tensor gets its data pointer.
 * 4. A kernel instance per executed node, prepared (oneDNN primitives are
 *    created here); one scratch area shared by all.
 * 5. The trace kernel table (plan_trace.c). */
#include "graph/op_eval.h"
#include "runner/cpu/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t align64(uint64_t x)
{
    return (x + (CP_MEM_ALIGN - 1)) & ~(uint64_t)(CP_MEM_ALIGN - 1);
}

/* ---- views ------------------------------------------------------------------- */

/* How many readers each tensor has: node inputs and graph outputs. */
static uint32_t *count_uses(const struct cp_graph *g, const int32_t *order, size_t n)
{
    uint32_t *uses = cp_calloc(cp_graph_n_tensors(g) + 1, sizeof *uses);
    if (!uses)
        return NULL;
    for (size_t k = 0; k < n; k++) {
        const struct cp_node *node = cp_graph_node(g, order[k]);
        for (size_t i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0)
                uses[node->inputs[i]]++;
    }
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++)
        uses[cp_graph_output(g, i)]++;
    return uses;
}

/* A view op runs nothing, except a Dropout whose mask someone reads (the
 * kernel must materialise it) or whose training_mode is not known to be
 * false (the kernel's `supports` then decides, and refuses). */
static bool node_is_view(const struct cp_graph *g, const struct cp_node *n, const uint32_t *uses)
{
    if (!cp_op_is_view(n->op))
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0 && uses[n->outputs[i]] > 0)
            return false;
    return n->op != CP_OP_DROPOUT || cp_eval_dropout_is_identity(g, n);
}

enum cp_status cp_plan_mark_views(const struct cp_graph *g, const int32_t *order, size_t n,
                                  bool *is_view)
{
    uint32_t *uses = count_uses(g, order, n);
    if (!uses)
        return CP_ERR_NOMEM;
    for (size_t k = 0; k < n; k++)
        is_view[k] = node_is_view(g, cp_graph_node(g, order[k]), uses);
    free(uses);
    return CP_OK;
}

/* ---- shape checks ------------------------------------------------------------- */

/* Whether inference left a tensor's dtype or shape open. */
static bool is_open(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(g, t);
    return T->dtype == CP_DTYPE_UNDEFINED || !cp_shape_is_static(&T->shape);
}

/* A top-level plan with an open tensor is built dynamic (plan_dynamic.c). */
static bool needs_dynamic(const struct cp_plan *p, const int32_t *order, const bool *is_view,
                          size_t n)
{
    if (p->nested)
        return false;
    for (size_t k = 0; k < n; k++) {
        const struct cp_node *node = cp_graph_node(p->g, order[k]);
        for (size_t i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0 && is_open(p->g, node->inputs[i]))
                return true;
        size_t n_out = is_view[k] && node->n_outputs ? 1 : node->n_outputs;
        for (size_t i = 0; i < n_out; i++)
            if (node->outputs[i] >= 0 && is_open(p->g, node->outputs[i]))
                return true;
    }
    return false;
}

static enum cp_status check_tensor(const struct cp_plan *p, const struct cp_node *n, int32_t t,
                                   const char *role, size_t pos, struct cp_diag *d)
{
    const struct cp_tensor *T = cp_graph_tensor(p->g, t);
    const struct cp_node *src = cp_graph_node(p->g, T->producer);
    if (src && cp_op_is_control(src->op) && !cp_shape_is_static(&T->shape)) {
        /* A trip count or a branch known only at run time. */
        char s[96];
        cp_shape_format(&T->shape, s, sizeof s);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: node '%s' (%s): output '%s' has shape %s, which depends on data "
                           "known only at run time (%s); cannprof's plans need static shapes",
                           p->m->name, src->name, src->op_type, T->name, s,
                           src->op == CP_OP_IF ? "which branch runs" : "the number of iterations");
    }
    if (p->nested && !cp_shape_is_static(&T->shape)) {
        char s[96];
        cp_shape_format(&T->shape, s, sizeof s);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: node '%s' (%s): %s %zu '%s' has shape %s; inside a subgraph, "
                           "shapes that change per iteration or depend on run-time data are not "
                           "supported",
                           p->m->name, n->name, n->op_type, role, pos, T->name, s);
    }
    if (T->dtype == CP_DTYPE_UNDEFINED || !cp_shape_is_static(&T->shape)) {
        char s[96];
        cp_shape_format(&T->shape, s, sizeof s);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: node '%s' (%s): %s %zu '%s' has shape %s and dtype %s after shape "
                           "inference; the plan needs both to be known",
                           p->m->name, n->name, n->op_type, role, pos, T->name, s,
                           cp_dtype_name(T->dtype));
    }
    if (T->kind == CP_TENSOR_INITIALIZER && !T->data && cp_memplan_tensor_bytes(T) > 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: node '%s' (%s) reads initializer '%s', which has no data",
                           p->m->name, n->name, n->op_type, T->name);
    return CP_OK;
}

static enum cp_status check_shapes(const struct cp_plan *p, const int32_t *order,
                                   const bool *is_view, size_t n, struct cp_diag *d)
{
    for (size_t k = 0; k < n; k++) {
        const struct cp_node *node = cp_graph_node(p->g, order[k]);
        for (size_t i = 0; i < node->n_inputs; i++)
            if (node->inputs[i] >= 0) {
                enum cp_status st = check_tensor(p, node, node->inputs[i], "input", i, d);
                if (st != CP_OK)
                    return st;
            }
        /* A view's extra outputs (Dropout's unread mask) are never made. */
        size_t n_out = is_view[k] && node->n_outputs ? 1 : node->n_outputs;
        for (size_t i = 0; i < n_out; i++)
            if (node->outputs[i] >= 0) {
                enum cp_status st = check_tensor(p, node, node->outputs[i], "output", i, d);
                if (st != CP_OK)
                    return st;
            }
    }
    return CP_OK;
}

/* ---- memory -------------------------------------------------------------------- */

/* "(CANNPROF_MAX_PLAN_BYTES)" or, for the default, how to change it. */
static void limit_text(const struct cp_runtime *rt, char *out, size_t n)
{
    char lim[32];
    cp_format_bytes(rt->max_plan_bytes, lim);
    if (strcmp(rt->max_plan_source, CP_MAX_PLAN_BYTES_ENV) == 0)
        snprintf(out, n, "the limit of %s set by %s", lim, CP_MAX_PLAN_BYTES_ENV);
    else
        snprintf(out, n, "the limit of %s (%s; set %s to change it)", lim, rt->max_plan_source,
                 CP_MAX_PLAN_BYTES_ENV);
}

/* The arena must fit the runtime's limit: refused before it is allocated
 * (an untrusted model asks for what it likes), naming the largest tensor
 * and the node that writes it. */
static enum cp_status check_arena_limit(const struct cp_plan *p, uint64_t size, struct cp_diag *d)
{
    if (size <= p->rt->max_plan_bytes)
        return CP_OK;
    const struct cp_mem_block *big = NULL;
    for (size_t i = 0; i < p->mem.n_blocks; i++)
        if (!big || p->mem.blocks[i].size > big->size)
            big = &p->mem.blocks[i];
    char need[32], bsz[32], lim[160], shape[96], who[600] = "";
    cp_format_bytes(size, need);
    limit_text(p->rt, lim, sizeof lim);
    if (big && big->tensor >= 0) {
        const struct cp_tensor *T = cp_graph_tensor(p->g, big->tensor);
        const struct cp_node *n = cp_graph_node(p->g, T->producer);
        cp_format_bytes(big->size, bsz);
        cp_shape_format(&T->shape, shape, sizeof shape);
        if (n)
            snprintf(who, sizeof who,
                     "; the largest tensor is '%s' (%s %s, %s), written by node '%s' (%s)", T->name,
                     shape, cp_dtype_name(T->dtype), bsz, n->name, n->op_type);
        else
            snprintf(who, sizeof who, "; the largest tensor is input '%s' (%s %s, %s)", T->name,
                     shape, cp_dtype_name(T->dtype), bsz);
    }
    return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                       "%s: the plan needs %s of activation memory, more than %s%s", p->m->name,
                       need, lim, who);
}

static enum cp_status alloc_arena(struct cp_plan *p, struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    uint64_t size = align64(p->mem.arena_bytes ? p->mem.arena_bytes : CP_MEM_ALIGN);
    enum cp_status st = check_arena_limit(p, size, d);
    if (st != CP_OK)
        return st;
    if (size > SIZE_MAX || posix_memalign(&p->arena, CP_MEM_ALIGN, (size_t)size) != 0) {
        p->arena = NULL;
        char b[32];
        cp_format_bytes(size, b);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory allocating a %s activation arena",
                           p->m->name, b);
    }
    memset(p->arena, 0, (size_t)size);
    size_t nt = cp_graph_n_tensors(p->g);
    p->ptr = cp_calloc(nt + 1, sizeof *p->ptr);
    if (!p->ptr)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory planning", p->m->name);
    for (size_t t = 0; t < nt; t++) {
        int32_t b = p->mem.block[t], r = p->mem.root[t];
        if (b >= 0)
            p->ptr[t] = (char *)p->arena + p->mem.blocks[b].offset;
        else if (r >= 0)
            p->ptr[t] = (void *)cp_graph_tensor(p->g, r)->data; /* read-only weights */
    }
    cp_runtime_record(p->rt, p->rt->names.alloc, -1, t0, cp_clock_ns());
    return CP_OK;
}

/* ---- kernels ------------------------------------------------------------------- */

/* "f32 1x3x8x8, i64 4" : what a kernel saw, for messages. */
static void describe_inputs(const struct cp_graph *g, const struct cp_node *n, char *out,
                            size_t cap)
{
    size_t pos = 0;
    out[0] = 0;
    for (size_t i = 0; i < n->n_inputs && pos < cap; i++) {
        char s[96];
        const char *dt = "absent";
        s[0] = 0;
        if (n->inputs[i] >= 0) {
            const struct cp_tensor *t = cp_graph_tensor(g, n->inputs[i]);
            cp_shape_format(&t->shape, s, sizeof s);
            dt = cp_dtype_name(t->dtype);
        }
        int w = snprintf(out + pos, cap - pos, "%s%s%s%s", i ? ", " : "", dt, s[0] ? " " : "", s);
        if (w < 0)
            break;
        pos += (size_t)w;
    }
}

/* Whether the node asks for bf16 arithmetic (the precision pass's mark). */
static bool wants_bf16(const struct cp_node *n)
{
    return strcmp(cp_node_attr_string(n, "compute_precision", ""), "bf16") == 0;
}

/* A bf16 node whose fast kernels this CPU cannot execute is not left to the
 * reference kernel: the reference Conv, MatMul and Gemm compute in fp32, so
 * the plan would silently drop the arithmetic the .om was converted for
 * (and run at the speed of a plain loop). True when `k` is such a fallback;
 * `passed` says which kernel was passed over and why. */
static bool lost_bf16(const struct cp_node *n, const struct cp_kernel *k,
                      const struct cp_kernel_passed *passed)
{
    return passed->kernel && wants_bf16(n) && k == cp_kernel_reference(n->op);
}

/* How many executed nodes after position `from` of `order` would be refused
 * as lost_bf16 too, for the message of the first. */
static size_t count_lost_bf16(const struct cp_plan *p, const int32_t *order, const bool *is_view,
                              size_t from, size_t n)
{
    size_t more = 0;
    for (size_t k = from + 1; k < n; k++) {
        if (is_view[k])
            continue;
        const struct cp_node *node = cp_graph_node(p->g, order[k]);
        struct cp_kernel_passed passed;
        const struct cp_kernel *kern = cp_kernel_select(p->g, node, &p->rt->host, false, &passed);
        if (kern && lost_bf16(node, kern, &passed))
            more++;
    }
    return more;
}

static enum cp_status select_kernel(const struct cp_plan *p, const int32_t *order,
                                    const bool *is_view, size_t at, size_t n_order,
                                    bool reference_only, const struct cp_kernel **out,
                                    struct cp_diag *d)
{
    const struct cp_node *n = cp_graph_node(p->g, order[at]);
    struct cp_kernel_passed passed;
    const struct cp_kernel *k = cp_kernel_select(p->g, n, &p->rt->host, reference_only, &passed);
    const char *pin = cp_node_attr_string(n, "kernel", "");
    if (!k && pin[0] && !reference_only) {
        const struct cp_kernel *ch[8];
        size_t nc = cp_kernel_choices(p->g, n, &p->rt->host, ch, 8);
        char list[400] = "";
        size_t used = 0;
        for (size_t i = 0; i < nc && i < 8; i++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", ch[i]->name);
            if (w < 0 || (size_t)w >= sizeof list - used)
                break;
            used += (size_t)w;
        }
        return cp_diag_set(d, CP_ERR_USAGE,
                           "%s: node '%s' (%s) is pinned to kernel '%s' (--op_kernels), which "
                           "cannot run it: %s; kernels that can: %s",
                           p->m->name, n->name, n->op_type, pin, passed.missing,
                           list[0] ? list : "(none)");
    }
    if (!k)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: no kernel for node '%s' (%s)", p->m->name,
                           n->name, n->op_type);
    if (!reference_only && k == cp_kernel_reference(n->op) &&
        strcmp(cp_node_attr_string(n, "compute_precision", ""), "int8") == 0)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: node '%s' (%s) computes in int8 (compute_precision=int8) but no "
                           "int8 kernel takes it (its scales or inputs do not fit), and the "
                           "reference kernel computes in fp32; convert it without it in "
                           "--int8_nodes",
                           p->m->name, n->name, n->op_type);
    if (lost_bf16(n, k, &passed)) {
        size_t more = count_lost_bf16(p, order, is_view, at, n_order);
        char also[64] = "";
        if (more)
            snprintf(also, sizeof also, " (and %zu more node%s)", more, more == 1 ? "" : "s");
        return cp_diag_set(
            d, CP_ERR_UNSUPPORTED,
            "%s: node '%s' (%s)%s computes in bf16 (compute_precision=bf16): its "
            "kernel %s needs %s, which this CPU (%s) lacks, and the reference "
            "kernel computes in fp32; convert it with --precision_mode=force_fp32 to "
            "run it on this CPU",
            p->m->name, n->name, n->op_type, also, passed.kernel->name, passed.missing,
            p->rt->host.cpu_model);
    }
    if (k->supports && !k->supports(p->g, n)) {
        char what[512];
        describe_inputs(p->g, n, what, sizeof what);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: node '%s' (%s): no kernel supports it with inputs %s", p->m->name,
                           n->name, n->op_type, what);
    }
    *out = k;
    return CP_OK;
}

/* Kernel instances for the executed nodes, their tensor arrays pointing
 * into two pools. */
static enum cp_status make_kernels(struct cp_plan *p, const int32_t *order, const bool *is_view,
                                   size_t n, bool reference_only, struct cp_diag *d)
{
    size_t n_io = 0;
    for (size_t k = 0; k < n; k++)
        if (!is_view[k]) {
            const struct cp_node *node = cp_graph_node(p->g, order[k]);
            n_io += node->n_inputs + node->n_outputs;
            p->n_kx++;
        }
    p->kx = cp_calloc(p->n_kx + 1, sizeof *p->kx);
    p->io_tensors = cp_calloc(n_io + 1, sizeof *p->io_tensors);
    p->io_data = cp_calloc(n_io + 1, sizeof *p->io_data);
    if (!p->kx || !p->io_tensors || !p->io_data)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory planning", p->m->name);
    size_t io = 0, i = 0;
    for (size_t k = 0; k < n; k++) {
        if (is_view[k])
            continue;
        const struct cp_node *node = cp_graph_node(p->g, order[k]);
        struct cp_kexec *x = &p->kx[i++];
        enum cp_status st = select_kernel(p, order, is_view, k, n, reference_only, &x->kernel, d);
        if (st != CP_OK)
            return st;
        x->g = p->g;
        x->node = node;
        x->env = &p->rt->env;
        x->plan = p;
        x->in = &p->io_tensors[io];
        x->in_data = &p->io_data[io];
        for (size_t j = 0; j < node->n_inputs; j++, io++) {
            int32_t t = node->inputs[j];
            p->io_tensors[io] = t >= 0 ? cp_graph_tensor(p->g, t) : NULL;
            p->io_data[io] = t >= 0 ? p->ptr[t] : NULL;
        }
        x->out = &p->io_tensors[io];
        x->out_data = &p->io_data[io];
        for (size_t j = 0; j < node->n_outputs; j++, io++) {
            int32_t t = node->outputs[j];
            p->io_tensors[io] = t >= 0 ? cp_graph_tensor(p->g, t) : NULL;
            p->io_data[io] = t >= 0 ? p->ptr[t] : NULL;
        }
    }
    return CP_OK;
}

/* The kernel's own message when it names the node, else one that does. */
static enum cp_status prepare_failed(const struct cp_plan *p, const struct cp_kexec *x,
                                     enum cp_status st, const struct cp_diag *local,
                                     struct cp_diag *d)
{
    const char *msg = local->msg[0] ? local->msg : cp_status_str(st);
    if (strstr(msg, x->node->name))
        return cp_diag_set(d, st, "%s: %s", p->m->name, msg);
    return cp_diag_set(d, st, "%s: node '%s' (%s), kernel %s: %s", p->m->name, x->node->name,
                       x->node->op_type, x->kernel->name, msg);
}

static enum cp_status prepare_kernels(struct cp_plan *p, struct cp_diag *d)
{
    cp_runtime_bind_threads(p->rt);
    size_t scratch = 0;
    for (size_t i = 0; i < p->n_kx; i++) {
        struct cp_kexec *x = &p->kx[i];
        if (x->kernel->prepare) {
            struct cp_diag local;
            cp_diag_init(&local);
            enum cp_status st = x->kernel->prepare(x, &local);
            if (st != CP_OK)
                return prepare_failed(p, x, st, &local, d);
        }
        p->n_prepared = i + 1;
        if (x->scratch_bytes > scratch)
            scratch = x->scratch_bytes;
    }
    if (scratch == 0)
        return CP_OK;
    uint64_t arena = align64(p->mem.arena_bytes ? p->mem.arena_bytes : CP_MEM_ALIGN);
    /* arena <= the limit: checked before the arena was allocated. */
    if (align64(scratch) > p->rt->max_plan_bytes - arena) {
        const struct cp_kexec *big = &p->kx[0];
        for (size_t i = 1; i < p->n_kx; i++)
            if (p->kx[i].scratch_bytes > big->scratch_bytes)
                big = &p->kx[i];
        char sb[32], ab[32], lim[160];
        cp_format_bytes(align64(scratch), sb);
        cp_format_bytes(arena, ab);
        limit_text(p->rt, lim, sizeof lim);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: node '%s' (%s), kernel %s, needs %s of scratch on top of %s of "
                           "activations, more than %s",
                           p->m->name, big->node->name, big->node->op_type, big->kernel->name, sb,
                           ab, lim);
    }
    uint64_t t0 = cp_clock_ns();
    p->scratch_bytes = (size_t)align64(scratch);
    if (posix_memalign(&p->scratch, CP_MEM_ALIGN, p->scratch_bytes) != 0) {
        p->scratch = NULL;
        char b[32];
        cp_format_bytes(p->scratch_bytes, b);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory allocating %s of kernel scratch",
                           p->m->name, b);
    }
    for (size_t i = 0; i < p->n_kx; i++)
        p->kx[i].scratch = p->scratch;
    cp_runtime_record(p->rt, p->rt->names.alloc, -1, t0, cp_clock_ns());
    return CP_OK;
}

/* ---- the plan ------------------------------------------------------------------- */

static enum cp_status resolve_buffer_opt(const struct cp_plan *p, int requested,
                                         enum cp_buffer_opt *out, struct cp_diag *d)
{
    if (requested < 0) {
        *out = p->m->meta.config.buffer_optimize;
        return CP_OK;
    }
    if (requested >= CP_BUF_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "buffer_optimize %d is not valid: l2_optimize, l1_optimize or "
                           "off_optimize",
                           requested);
    *out = (enum cp_buffer_opt)requested;
    return CP_OK;
}

/* Steps 2 to 4 on a plan whose graph has concrete shapes. */
static enum cp_status build(struct cp_plan *p, const struct cp_plan_options *opt, struct cp_diag *d)
{
    enum cp_buffer_opt mode = CP_BUF_L2_OPTIMIZE;
    enum cp_status st = resolve_buffer_opt(p, opt->buffer_optimize, &mode, d);
    if (st != CP_OK)
        return st;
    int32_t *order = NULL;
    size_t n = 0;
    bool *is_view = NULL;
    struct cp_diag local;
    cp_diag_init(&local);
    if ((st = cp_graph_topo_order(p->g, &order, &n, &local)) != CP_OK) {
        cp_diag_set(d, st, "%s: %s", p->m->name, local.msg);
        goto out_free;
    }
    is_view = cp_calloc(n + 1, sizeof *is_view);
    if (!is_view || cp_plan_mark_views(p->g, order, n, is_view) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory planning", p->m->name);
        goto out_free;
    }
    if (needs_dynamic(p, order, is_view, n)) {
        st = cp_plan_build_dynamic(p, order, is_view, n, d);
        return st;
    }
    if ((st = check_shapes(p, order, is_view, n, d)) != CP_OK)
        goto out_free;
    if ((st = cp_memplan_build(p->g, order, is_view, n, mode, &p->mem, &local)) != CP_OK) {
        cp_diag_set(d, st, "%s: %s", p->m->name, local.msg);
        goto out_free;
    }
    if ((st = alloc_arena(p, d)) != CP_OK)
        goto out_free;
    if ((st = make_kernels(p, order, is_view, n, opt->reference_only, d)) != CP_OK)
        goto out_free;
    st = prepare_kernels(p, d);
out_free:
    free(order);
    free(is_view);
    return st;
}

enum cp_status cp_plan_create(struct cp_model *m, const struct cp_plan_options *opt,
                              struct cp_plan **out, struct cp_diag *d)
{
    *out = NULL;
    uint64_t t0 = cp_clock_ns();
    static const struct cp_plan_options defaults = {.buffer_optimize = -1};
    if (!opt)
        opt = &defaults;
    struct cp_plan *p = calloc(1, sizeof *p);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory planning", m->name);
    p->m = m;
    p->rt = m->rt;
    p->reference_only = opt->reference_only;
    enum cp_status st = cp_om_read_buffer(m->bytes, m->len, m->name, &p->g, NULL, d);
    if (st != CP_OK)
        goto out_free_plan;
    if ((st = cp_plan_apply_shapes(p->g, m->name, &m->meta, opt, d)) != CP_OK)
        goto out_free_plan;
    if ((st = build(p, opt, d)) != CP_OK)
        goto out_free_plan;
    if ((st = cp_plan_build_trace(p, d)) != CP_OK)
        goto out_free_plan;
    cp_runtime_record(p->rt, p->rt->names.plan, -1, t0, cp_clock_ns());
    *out = p;
    return CP_OK;

out_free_plan:
    cp_plan_free(p);
    return st;
}

void cp_plan_free(struct cp_plan *p)
{
    if (!p)
        return;
    for (size_t i = p->n_prepared; i-- > 0;)
        if (p->kx[i].kernel->release)
            p->kx[i].kernel->release(&p->kx[i]);
    cp_plan_free_dynamic(p);
    cp_plan_free_trace(p);
    free(p->kx);
    free(p->io_tensors);
    free(p->io_data);
    free(p->scratch);
    free(p->arena);
    free(p->ptr);
    cp_memplan_release(&p->mem);
    if (!p->nested)
        cp_graph_free(p->g);
    free(p);
}

/* ---- [control] ---- */

enum cp_status cp_plan_create_nested(struct cp_plan *parent, struct cp_graph *sub,
                                     struct cp_plan **out, struct cp_diag *d)
{
    *out = NULL;
    struct cp_plan *p = calloc(1, sizeof *p);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory planning", parent->m->name);
    p->m = parent->m;
    p->rt = parent->rt;
    p->g = sub;
    p->nested = true;
    p->reference_only = parent->reference_only;
    struct cp_plan_options opt = {.buffer_optimize = -1, .reference_only = p->reference_only};
    enum cp_status st = build(p, &opt, d);
    if (st != CP_OK) {
        cp_plan_free(p);
        return st;
    }
    *out = p;
    return CP_OK;
}

enum cp_status cp_plan_run_nested(struct cp_plan *p)
{
    for (size_t i = 0; i < p->n_kx; i++) {
        enum cp_status st = p->kx[i].kernel->run(&p->kx[i]);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

void *cp_plan_data(const struct cp_plan *p, int32_t t)
{
    return t >= 0 && (size_t)t < cp_graph_n_tensors(p->g) ? p->ptr[t] : NULL;
}

size_t cp_plan_kernel_choices(const struct cp_plan *p, const char *node, const char **out,
                              size_t cap)
{
    for (size_t i = 0; i < cp_graph_n_nodes(p->g); i++) {
        const struct cp_node *n = cp_graph_node(p->g, (int32_t)i);
        if (n->dead || strcmp(n->name, node) != 0)
            continue;
        const struct cp_kernel *k[16];
        size_t nk = cp_kernel_choices(p->g, n, &p->rt->host, k, 16);
        for (size_t j = 0; j < nk && j < 16 && j < cap; j++)
            out[j] = k[j]->name;
        return nk;
    }
    return 0;
}
