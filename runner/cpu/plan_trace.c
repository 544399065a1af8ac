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
#include "core/json.h"
#include "runner/cpu/plan_internal.h"

#include <stdlib.h>
#include <string.h>

static json_t *tensor_json(const struct cp_tensor *t, const struct cp_tensor *view_of,
                           const char *compute)
{
    json_t *o = json_object(), *shape = json_array();
    for (int k = 0; shape && k < t->shape.rank; k++)
        cp_json_push(shape, cp_json_int(t->shape.dims[k].value));
    bool ok = o && cp_json_set_str(o, "name", t->name) && cp_json_set(o, "shape", shape) &&
              cp_json_set_str(o, "dtype", cp_dtype_name(t->dtype)) &&
              cp_json_set_str(o, "layout", cp_layout_name(t->layout)) &&
              (!view_of || view_of == t || cp_json_set_str(o, "view_of", view_of->name)) &&
              (!compute || cp_json_set_str(o, "compute", compute));
    if (!ok) {
        if (!o)
            json_decref(shape);
        json_decref(o);
        return NULL;
    }
    return o;
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
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        if (idx[i] < 0)
            continue;
        const struct cp_tensor *src =
            by_kernel ? cp_graph_tensor(g, view_source(g, by_kernel, idx[i])) : NULL;
        ok = cp_json_push(arr, tensor_json(cp_graph_tensor(g, idx[i]), src, compute));
    }
    char *text = ok ? cp_json_text(arr) : NULL;
    json_decref(arr);
    return text;
}

static char *origins_json(const struct cp_node *n)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n->n_origins; i++)
        ok = cp_json_push(arr, cp_json_str(n->origins[i]));
    char *text = ok ? cp_json_text(arr) : NULL;
    json_decref(arr);
    return text;
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
        k->impl = x->impl ? x->impl : x->kernel->name;
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
