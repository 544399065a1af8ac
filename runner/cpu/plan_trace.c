/* The plan's trace kernel table: what every kernel instance is, described
 * once when the plan is built, so the run loop records only indices and
 * times. Node names are interned in the runtime's recorder here for the
 * same reason. */
#include "runner/cpu/plan_internal.h"

#include <stdlib.h>

static void tensor_json(struct cp_buf *b, const struct cp_tensor *t)
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
    cp_buf_putc(b, '}');
}

/* A JSON array of the present tensors among `idx[0..n)`. Caller frees;
 * NULL on OOM. */
static char *tensors_json(const struct cp_graph *g, const int32_t *idx, size_t n)
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
        tensor_json(&b, cp_graph_tensor(g, idx[i]));
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
    if (!p->ktab || !p->kname)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory describing kernels", p->m->name);
    struct cp_trace_recorder *tr = p->rt->trace;
    for (size_t i = 0; i < p->n_kx; i++) {
        const struct cp_kexec *x = &p->kx[i];
        const struct cp_node *n = x->node;
        struct cp_trace_kernel *k = &p->ktab[i];
        k->node = n->name;
        k->op_type = n->op_type;
        k->impl = x->kernel->name;
        k->origins = origins_json(n);
        k->inputs = tensors_json(p->g, n->inputs, n->n_inputs);
        k->outputs = tensors_json(p->g, n->outputs, n->n_outputs);
        struct cp_node_cost c = cp_node_cost(p->g, n);
        k->flops = c.flops;
        k->bytes = c.bytes;
        p->kname[i] = tr ? cp_trace_intern(tr, n->name) : -1;
        if (!k->origins || !k->inputs || !k->outputs || (tr && p->kname[i] < 0))
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory describing kernels", p->m->name);
    }
    return CP_OK;
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
