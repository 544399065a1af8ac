/* The plan's trace kernel table: what every kernel instance is, described
 * once when the plan is built, so the run loop records only indices and
 * times. Node names are interned in the runtime's recorder here for the
 * same reason.
 *
 * Tensors are named, so an analysis can tell which kernel feeds which. View
 * nodes (Reshape and friends) run no kernel, so a kernel that reads a view
 * would seem to read a tensor nobody makes; its input then also carries
 * "view_of", the tensor the view aliases in the end (made by a kernel, or a
 * graph input or weight), which restores the link. The outputs of a node
 * the precision pass marked for bf16 compute (attribute compute_precision)
 * carry "compute":"bf16": the tensor stays f32, the arithmetic was not. */
#include "runner/cpu/plan_internal.h"

#include <stdlib.h>
#include <string.h>

static void tensor_json(struct cp_buf *b, const struct cp_tensor *t,
                        const struct cp_tensor *view_of, const char *compute)
{
    cp_buf_puts(b, "{\"name\":");
    cp_buf_json_str(b, t->name);
    cp_buf_puts(b, ",\"shape\":[");
    for (int k = 0; k < t->shape.rank; k++)
        cp_buf_printf(b, "%s%lld", k ? "," : "", (long long)t->shape.dims[k].value);
    cp_buf_puts(b, "],\"dtype\":");
    cp_buf_json_str(b, cp_dtype_name(t->dtype));
    cp_buf_puts(b, ",\"layout\":");
    cp_buf_json_str(b, cp_layout_name(t->layout));
    if (view_of && view_of != t) {
        cp_buf_puts(b, ",\"view_of\":");
        cp_buf_json_str(b, view_of->name);
    }
    if (compute) {
        cp_buf_puts(b, ",\"compute\":");
        cp_buf_json_str(b, compute);
    }
    cp_buf_putc(b, '}');
}

/* The tensor that `t` aliases through view nodes (nodes that run no kernel:
 * their outputs are not in `by_kernel`), or `t` itself. Views alias their
 * input 0. The walk is bounded by the node count, so a malformed graph
 * cannot loop. */
static int32_t view_source(const struct cp_graph *g, const bool *by_kernel, int32_t t)
{
    size_t guard = cp_graph_n_nodes(g);
    while (guard-- > 0) {
        const struct cp_tensor *T = cp_graph_tensor(g, t);
        if (T->producer < 0 || by_kernel[t])
            break;
        const struct cp_node *v = cp_graph_node(g, T->producer);
        if (!v || v->n_inputs < 1 || v->inputs[0] < 0)
            break;
        t = v->inputs[0];
    }
    return t;
}

/* A JSON array of the present tensors among `idx[0..n)`; with `by_kernel`
 * (inputs), views name their source; `compute` (outputs, may be NULL) is
 * the compute dtype to note. Caller frees; NULL on OOM. */
static char *tensors_json(const struct cp_graph *g, const int32_t *idx, size_t n,
                          const bool *by_kernel, const char *compute)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_putc(&b, '[');
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (idx[i] < 0)
            continue;
        if (!first)
            cp_buf_putc(&b, ',');
        first = false;
        const struct cp_tensor *src =
            by_kernel ? cp_graph_tensor(g, view_source(g, by_kernel, idx[i])) : NULL;
        tensor_json(&b, cp_graph_tensor(g, idx[i]), src, compute);
    }
    cp_buf_putc(&b, ']');
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

static char *origins_json(const struct cp_node *n)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_putc(&b, '[');
    for (size_t i = 0; i < n->n_origins; i++) {
        if (i)
            cp_buf_putc(&b, ',');
        cp_buf_json_str(&b, n->origins[i]);
    }
    cp_buf_putc(&b, ']');
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

enum cp_status cp_plan_build_trace(struct cp_plan *p, struct cp_diag *d)
{
    p->ktab = cp_calloc(p->n_kx + 1, sizeof *p->ktab);
    p->kname = cp_calloc(p->n_kx + 1, sizeof *p->kname);
    /* Which tensors a kernel makes: the others with a producer are views. */
    bool *by_kernel = cp_calloc(cp_graph_n_tensors(p->g) + 1, sizeof *by_kernel);
    if (!p->ktab || !p->kname || !by_kernel) {
        free(by_kernel);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory describing kernels", p->m->name);
    }
    for (size_t i = 0; i < p->n_kx; i++)
        for (size_t j = 0; j < p->kx[i].node->n_outputs; j++)
            if (p->kx[i].node->outputs[j] >= 0)
                by_kernel[p->kx[i].node->outputs[j]] = true;
    enum cp_status st = CP_OK;
    struct cp_trace_recorder *tr = p->rt->trace;
    for (size_t i = 0; i < p->n_kx; i++) {
        const struct cp_kexec *x = &p->kx[i];
        const struct cp_node *n = x->node;
        struct cp_trace_kernel *k = &p->ktab[i];
        k->node = n->name;
        k->op_type = n->op_type;
        k->impl = x->kernel->name;
        k->origins = origins_json(n);
        const char *prec = cp_node_attr_string(n, "compute_precision", "");
        k->inputs = tensors_json(p->g, n->inputs, n->n_inputs, by_kernel, NULL);
        k->outputs = tensors_json(p->g, n->outputs, n->n_outputs, NULL,
                                  strcmp(prec, "bf16") == 0 ? "bf16" : NULL);
        struct cp_node_cost c = cp_node_cost(p->g, n);
        k->flops = c.flops;
        k->bytes = c.bytes;
        p->kname[i] = tr ? cp_trace_intern(tr, n->name) : -1;
        if (!k->origins || !k->inputs || !k->outputs || (tr && p->kname[i] < 0)) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory describing kernels", p->m->name);
            break;
        }
    }
    free(by_kernel);
    return st;
}

void cp_plan_free_trace(struct cp_plan *p)
{
    for (size_t i = 0; p->ktab && i < p->n_kx; i++) {
        free((char *)p->ktab[i].origins);
        free((char *)p->ktab[i].inputs);
        free((char *)p->ktab[i].outputs);
    }
    free(p->ktab);
    free(p->kname);
    p->ktab = NULL;
    p->kname = NULL;
}
