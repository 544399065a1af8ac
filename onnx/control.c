/* Control flow at import: If, Loop and Scan with their subgraphs.
 *
 * A GRAPH attribute is imported recursively, with the model's opset, into
 * a cp_graph of its own (graph.h, "subgraphs"). A name a subgraph reads but
 * does not define is looked up in the enclosing graphs and becomes an
 * outer-scope reference; the control-flow node then lists it as an extra
 * input. Malformed subgraphs are refused naming the node and the attribute:
 * wrong input or output counts for the op, a name no graph defines, nesting
 * deeper than CP_ONNX_MAX_SUBGRAPH_DEPTH. Every message of a subgraph
 * starts with the path to it ("model.onnx: node 'loop' (Loop), attribute
 * 'body': ..."). */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool onnx_graph_defines(const Onnx__GraphProto *gp, const char *name)
{
    if (!gp || !name)
        return false;
    for (size_t i = 0; i < gp->n_input; i++)
        if (gp->input[i]->name && strcmp(gp->input[i]->name, name) == 0)
            return true;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && strcmp(gp->initializer[i]->name, name) == 0)
            return true;
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t j = 0; j < gp->node[i]->n_output; j++)
            if (gp->node[i]->output[j] && strcmp(gp->node[i]->output[j], name) == 0)
                return true;
    return false;
}

enum cp_status onnx_scope_capture(struct onnx_ctx *c, const char *name, int32_t *idx)
{
    *idx = -1;
    const struct onnx_ctx *a = c->parent;
    while (a && !onnx_graph_defines(a->gp, name) &&
           (int32_t)cp_strmap_gets(&a->tensors, name, -1) < 0)
        a = a->parent;
    if (!a) {
        if (c->cur_node)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' reads '%s', which neither this subgraph nor any enclosing "
                            "graph defines",
                            c->cur_node, name);
        return onnx_err(c, CP_ERR_INVALID,
                        "output '%s' is defined neither in this subgraph nor in any enclosing "
                        "graph",
                        name);
    }
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st =
        cp_graph_add_tensor(c->g, name, CP_DTYPE_UNDEFINED, NULL, CP_TENSOR_INPUT, idx, &local);
    if (st != CP_OK)
        return onnx_err_from(c, &local, st);
    if (cp_strmap_puts(&c->tensors, cp_graph_tensor(c->g, *idx)->name, *idx) != CP_OK ||
        cp_graph_add_outer(c->g, *idx) != CP_OK)
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    return CP_OK;
}

/* Import GRAPH attribute `a` of node `name`. OUT: *sub (caller frees). */
static enum cp_status import_sub(struct onnx_ctx *c, const Onnx__NodeProto *np, const char *name,
                                 const Onnx__AttributeProto *a, struct cp_graph **sub)
{
    *sub = NULL;
    if (c->depth + 1 > CP_ONNX_MAX_SUBGRAPH_DEPTH)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): attribute '%s': subgraphs nest deeper than %d levels",
                        name, np->op_type, a->name, CP_ONNX_MAX_SUBGRAPH_DEPTH);
    struct cp_buf where;
    cp_buf_init(&where);
    cp_buf_printf(&where, "%s: node '%s' (%s), attribute '%s'", c->where, name, np->op_type,
                  a->name);
    struct cp_graph *g = cp_graph_create();
    if (cp_buf_status(&where) != CP_OK || !g) {
        cp_buf_release(&where);
        cp_graph_free(g);
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    }
    cp_graph_set_opset(g, c->opset);
    struct onnx_ctx s = {0};
    s.g = g;
    s.d = c->d;
    s.where = where.data;
    s.dir = c->dir;
    s.opset = c->opset;
    s.parent = c;
    s.depth = c->depth + 1;
    cp_strmap_init(&s.tensors);
    cp_strmap_init(&s.nodes);
    enum cp_status st = onnx_import_graph(&s, a->g);
    cp_strmap_release(&s.tensors);
    cp_strmap_release(&s.nodes);
    cp_buf_release(&where);
    if (st != CP_OK) {
        cp_graph_free(g);
        return st;
    }
    *sub = g;
    return CP_OK;
}

struct subs {
    const char *attr[2];
    struct cp_graph *g[2];
    size_t n;
};

static struct cp_graph *sub_named(const struct subs *s, const char *attr)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->attr[i], attr) == 0)
            return s->g[i];
    return NULL;
}

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i]->name && strcmp(np->attribute[i]->name, name) == 0)
            return np->attribute[i];
    return NULL;
}

static enum cp_status need_int(struct onnx_ctx *c, const Onnx__NodeProto *np, const char *name,
                               const char *attr, int64_t *v)
{
    const Onnx__AttributeProto *a = find_attr(np, attr);
    if (!a || !a->has_i)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): required attribute '%s' (INT) is missing", name,
                        np->op_type, attr);
    *v = a->i;
    return CP_OK;
}

static enum cp_status list_len(struct onnx_ctx *c, const Onnx__NodeProto *np, const char *name,
                               const char *attr, size_t want)
{
    const Onnx__AttributeProto *a = find_attr(np, attr);
    if (a && a->n_ints != want)
        return onnx_err(
            c, CP_ERR_INVALID,
            "node '%s' (Scan): attribute '%s' has %zu entries; it needs one per %s (%zu)", name,
            attr, a->n_ints, strstr(attr, "input") ? "scan input" : "scan output", want);
    return CP_OK;
}

/* The op's own rules on its subgraphs' inputs and outputs. */
static enum cp_status check_shape_of(struct onnx_ctx *c, const Onnx__NodeProto *np,
                                     const char *name, const struct subs *s)
{
    const char *op = np->op_type;
    size_t ni = np->n_input, no = np->n_output;
    if (strcmp(op, "If") == 0) {
        if (ni != 1)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (If) has %zu inputs; If takes exactly 1 (the condition)",
                            name, ni);
        static const char *const br[2] = {"then_branch", "else_branch"};
        for (int k = 0; k < 2; k++) {
            const struct cp_graph *g = sub_named(s, br[k]);
            if (!g)
                return onnx_err(c, CP_ERR_INVALID,
                                "node '%s' (If): required attribute '%s' (GRAPH) is missing", name,
                                br[k]);
            if (cp_graph_n_inputs(g) != 0)
                return onnx_err(c, CP_ERR_INVALID,
                                "node '%s' (If): attribute '%s': the branch has %zu inputs; an If "
                                "branch takes none",
                                name, br[k], cp_graph_n_inputs(g));
            if (cp_graph_n_outputs(g) != no)
                return onnx_err(c, CP_ERR_INVALID,
                                "node '%s' (If): attribute '%s': the branch has %zu outputs, but "
                                "the node has %zu",
                                name, br[k], cp_graph_n_outputs(g), no);
        }
        return CP_OK;
    }
    const struct cp_graph *body = sub_named(s, "body");
    if (!body)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): required attribute 'body' (GRAPH) is missing", name, op);
    size_t bi = cp_graph_n_inputs(body), bo = cp_graph_n_outputs(body);
    if (strcmp(op, "Loop") == 0) {
        /* inputs M, cond, v_initial[N]; body (iteration, cond, v[N]) ->
         * (cond, v[N], scan[K]); outputs v_final[N], scan[K]. */
        size_t n = ni - 2;
        if (bi != ni)
            return onnx_err(
                c, CP_ERR_INVALID,
                "node '%s' (Loop): attribute 'body': the body has %zu inputs; with %zu "
                "loop-carried values it needs %zu (iteration number, condition, then the values)",
                name, bi, n, n + 2);
        if (no < n)
            return onnx_err(
                c, CP_ERR_INVALID,
                "node '%s' (Loop) has %zu outputs, fewer than its %zu loop-carried values", name,
                no, n);
        if (bo != 1 + no)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (Loop): attribute 'body': the body has %zu outputs; it "
                            "needs %zu (the condition, then one per node output)",
                            name, bo, 1 + no);
        return CP_OK;
    }
    /* Scan: [sequence_lens (opset 8)], states[N], scans[M] -> states[N],
     * scan outputs[K]; body: states, scan slices -> states, slices. */
    int64_t m = 0;
    enum cp_status st = need_int(c, np, name, "num_scan_inputs", &m);
    if (st != CP_OK)
        return st;
    size_t formal = ni - (c->opset < 9 ? 1 : 0);
    if (c->opset < 9 && ni < 1)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (Scan) has no inputs", name);
    if (m < 1 || (uint64_t)m > formal)
        return onnx_err(
            c, CP_ERR_INVALID,
            "node '%s' (Scan): num_scan_inputs is %lld, but the node has %zu state and scan inputs",
            name, (long long)m, formal);
    size_t n = formal - (size_t)m;
    if (bi != formal)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Scan): attribute 'body': the body has %zu inputs; it needs %zu "
                        "(the states, then one slice per scan input)",
                        name, bi, formal);
    if (bo != no)
        return onnx_err(
            c, CP_ERR_INVALID,
            "node '%s' (Scan): attribute 'body': the body has %zu outputs, but the node has %zu",
            name, bo, no);
    if (no < n)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (Scan) has %zu outputs, fewer than its %zu states", name, no, n);
    if ((st = list_len(c, np, name, c->opset < 9 ? "directions" : "scan_input_directions",
                       (size_t)m)) != CP_OK ||
        (st = list_len(c, np, name, "scan_input_axes", (size_t)m)) != CP_OK ||
        (st = list_len(c, np, name, "scan_output_axes", no - n)) != CP_OK ||
        (st = list_len(c, np, name, "scan_output_directions", no - n)) != CP_OK)
        return st;
    return CP_OK;
}

enum cp_status onnx_load_control(struct onnx_ctx *c, const struct onnx_op_def *def,
                                 const Onnx__NodeProto *np, const char *name, const char *origin)
{
    struct subs s = {0};
    const char **names = NULL;
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        int type;
        if (!a->name || !*a->name)
            continue; /* onnx_copy_attrs reports it */
        if ((st = onnx_attr_type(c, np, name, a, &type)) != CP_OK)
            goto out;
        if (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)
            continue;
        bool known = strcmp(np->op_type, "If") == 0 ? strcmp(a->name, "then_branch") == 0 ||
                                                          strcmp(a->name, "else_branch") == 0
                                                    : strcmp(a->name, "body") == 0;
        if (!known || sub_named(&s, a->name)) {
            st = onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): unexpected GRAPH attribute '%s'",
                          name, np->op_type, a->name);
            goto out;
        }
        if ((st = import_sub(c, np, name, a, &s.g[s.n])) != CP_OK)
            goto out;
        s.attr[s.n++] = a->name;
    }
    if ((st = check_shape_of(c, np, name, &s)) != CP_OK)
        goto out;
    /* The node's inputs: its own, then each outer-scope name once. */
    size_t cap = np->n_input;
    for (size_t k = 0; k < s.n; k++)
        cap += cp_graph_n_outer(s.g[k]);
    names = cp_calloc(cap + 1, sizeof *names);
    if (!names) {
        st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t ni = 0;
    for (size_t i = 0; i < np->n_input; i++)
        names[ni++] = np->input[i];
    for (size_t k = 0; k < s.n; k++)
        for (size_t j = 0; j < cp_graph_n_outer(s.g[k]); j++) {
            const char *nm = cp_graph_tensor(s.g[k], cp_graph_outer(s.g[k], j))->name;
            bool dup = false;
            for (size_t q = np->n_input; q < ni && !dup; q++)
                dup = strcmp(names[q], nm) == 0;
            if (!dup)
                names[ni++] = nm;
        }
    Onnx__NodeProto ext = *np;
    ext.input = (char **)names;
    ext.n_input = ni;
    int32_t idx;
    if ((st = onnx_add_node(c, def, &ext, name, origin, &idx)) != CP_OK)
        goto out;
    for (size_t k = 0; k < s.n; k++) {
        struct cp_graph *g = s.g[k];
        s.g[k] = NULL;
        if (cp_node_set_graph(c->g, idx, s.attr[k], g) != CP_OK) {
            st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    st = onnx_copy_attrs(c, def, np, idx, name);
out:
    for (size_t k = 0; k < s.n; k++)
        cp_graph_free(s.g[k]);
    free(names);
    return st;
}
